/* movement.c - data movement on the device: permute, head split/merge
 * (the split with rotary position embeddings too), row copies and row
 * gathers.  Kernels in kernels/movement.cl; the row gather shares
 * embed.cl's gather kernel with clf_embedding.
 */
#include "ops.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* The movement family's variant for an element size (bits are copied). */
static const char *elem_options(size_t elem_size) {
  return elem_size == 2 ? "-DCLF_ELEM=ushort" : elem_size == 8 ? "-DCLF_ELEM=ulong" : "-DCLF_ELEM=uint";
}


/* Outer dims as kernel arguments (<= 5, innermost first): sizes, division
 * magic (see clf_udiv in movement.cl) and strides in x and y.  Unused dims
 * have size 1 and strides 0. */
typedef struct outer_args {
  cl_uint8 dn, dm, dsh, xs, ys;
  size_t count; /* product of the sizes */
} outer_args;

/* m and shifts such that n / d == clf_udiv(n, m, sh) for every 32-bit n
 * (Granlund & Montgomery, "Division by invariant integers using
 * multiplication", 1994, fig. 4.1). */
static void udiv_magic(cl_uint d, cl_uint *m, cl_uint *sh) {
  int l = 0;
  while (((uint64_t)1 << l) < d) l++; /* ceil(log2 d) */
  *m = (cl_uint)(((((uint64_t)1 << l) - d) << 32) / d + 1);
  const int s1 = l < 1 ? l : 1, s2 = l > 1 ? l - 1 : 0;
  *sh = (cl_uint)s1 | ((cl_uint)s2 << 8);
}

static void outer_init(outer_args *o, int nd, const size_t *dims, const size_t *xs, const size_t *ys) {
  o->count = 1;
  for (int i = 0; i < 8; i++) {
    const cl_uint d = i < nd ? (cl_uint)dims[i] : 1u;
    o->dn.s[i] = d;
    udiv_magic(d ? d : 1u, &o->dm.s[i], &o->dsh.s[i]);
    o->xs.s[i] = i < nd ? (cl_uint)xs[i] : 0u;
    o->ys.s[i] = i < nd ? (cl_uint)ys[i] : 0u;
    o->count *= d;
  }
}

/* A strided copy (kernel copy_strided): rows of n elements (input stride
 * x_inner_stride, output contiguous) over nd <= 5 outer dims given
 * innermost first. */
typedef struct copy_plan {
  size_t x_off, y_off; /* elements, tensor offsets included */
  size_t n, x_inner_stride;
  int nd;
  size_t dims[5], xs[5], ys[5];
} copy_plan;

static clf_status launch_copy(clf_context *ctx, const clf_tensor *x, clf_tensor *y, const copy_plan *p,
                              cl_event *event) {
  clf__kernel *k;
  /* On a CPU, a work-item per row (copy_rows) */
  const int rows_shape = ctx->caps.is_cpu;
  clf_status st = clf__get_kernel(ctx, "movement", elem_options(clf_dtype_size(x->dtype)),
                                  rows_shape ? "copy_rows" : "copy_strided", &k);
  if (st != CLF_OK) return st;
  outer_args o;
  outer_init(&o, p->nd, p->dims, p->xs, p->ys);
  cl_uint xo = (cl_uint)p->x_off, yo = (cl_uint)p->y_off, n = (cl_uint)p->n, xis = (cl_uint)p->x_inner_stride;
  cl_uint rows = (cl_uint)o.count;
  st = clf__set_args(ctx, k, 12, CLF__ARG(x->buf), CLF__ARG(xo), CLF__ARG(y->buf), CLF__ARG(yo), CLF__ARG(n),
                     CLF__ARG(xis), CLF__ARG(rows), CLF__ARG(o.dn), CLF__ARG(o.dm), CLF__ARG(o.dsh), CLF__ARG(o.xs),
                     CLF__ARG(o.ys));
  if (st != CLF_OK) return st;
  if (rows_shape) {
    const size_t wg = clf__wg_1d(ctx, k, 16), g = (o.count + wg - 1) / wg * wg;
    return clf__launch(ctx, k, 1, &g, &wg, event);
  }
  /* Dim 0 walks a row, dim 1 the rows. */
  size_t global[2] = {p->n, o.count}, local[2];
  clf__rows_local(ctx, k, p->n, local);
  return clf__launch(ctx, k, 2, global, local, event);
}

/* ---- permute ---- */

static int tensors_overlap(const clf_tensor *a, const clf_tensor *b) {
  size_t na = clf_tensor_numel(a), nb = clf_tensor_numel(b);
  return a->buf == b->buf && na && nb && a->offset < b->offset + nb && b->offset < a->offset + na;
}

/* The batched tiled transpose: X = output's innermost merged dim, Y = the
 * input's innermost (stride 1).  Returns CLF_E_UNSUPPORTED (without
 * recording anything) when the kernel cannot run 32-wide groups. */
static clf_status launch_tiled(clf_context *ctx, const clf_tensor *x, clf_tensor *y, int m, const size_t *size,
                               const size_t *xstride, const size_t *ystride, int Y, cl_event *event) {
  clf__kernel *k;
  clf_status st = clf__get_kernel(ctx, "movement", elem_options(clf_dtype_size(x->dtype)), "permute_tiled", &k);
  if (st != CLF_OK) return st;
  const size_t total = clf__wg_1d(ctx, k, 256);
  if (total < 32 || (ctx->caps.max_item_sizes[0] && ctx->caps.max_item_sizes[0] < 32)) return CLF_E_UNSUPPORTED;
  const int X = m - 1;
  size_t bd[4], bxs[4], bys[4];
  int nb = 0;
  for (int i = m - 1; i >= 0; i--) {
    if (i == X || i == Y) continue;
    bd[nb] = size[i];
    bxs[nb] = xstride[i];
    bys[nb] = ystride[i];
    nb++;
  }
  outer_args b;
  outer_init(&b, nb, bd, bxs, bys);
  cl_uint nx = (cl_uint)size[X], sx = (cl_uint)xstride[X], ny = (cl_uint)size[Y], ty = (cl_uint)ystride[Y];
  st = clf__set_args(ctx, k, 13, CLF__TARG(x), CLF__TARG(y), CLF__ARG(nx), CLF__ARG(sx), CLF__ARG(ny),
                     CLF__ARG(ty), CLF__ARG(b.dn), CLF__ARG(b.dm), CLF__ARG(b.dsh), CLF__ARG(b.xs), CLF__ARG(b.ys));
  if (st != CLF_OK) return st;
  size_t l1 = total / 32 > 8 ? 8 : total / 32;
  size_t local[3] = {32, l1, 1};
  size_t global[3] = {(size[X] + 31) / 32 * 32, (size[Y] + 31) / 32 * l1, b.count};
  return clf__launch(ctx, k, 3, global, local, event);
}

/* Checks clf_permute's arguments: perm a permutation of x's dims and y of
 * the permuted shape, both addressable with 32-bit indices. */
static clf_status permute_check(clf_context *ctx, const char *op, const clf_tensor *x, const int *perm,
                                const clf_tensor *y) {
  clf_status st;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "x", x, -1, 1, CLF_MAX_DIMS)) != CLF_OK) return st;
  if (!perm) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: perm is NULL", op);
  if ((st = clf__check_tensor(ctx, op, "y", y, (int)x->dtype, x->ndim, x->ndim)) != CLF_OK) return st;
  const int n = x->ndim;
  int seen[CLF_MAX_DIMS] = {0};
  for (int i = 0; i < n; i++) {
    if (perm[i] < 0 || perm[i] >= n || seen[perm[i]]++)
      return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: perm[%d] = %d: perm is not a permutation of 0..%d", op, i,
                       perm[i], n - 1);
  }
  for (int i = 0; i < n; i++) {
    if (y->shape[i] != x->shape[perm[i]]) {
      char sx[96], sy[96];
      return clf__fail(ctx, CLF_E_SHAPE, "%s: y has shape %s, dim %d must be x's dim perm[%d] = %d (x %s)", op,
                       clf__shape_str(y, sy, sizeof(sy)), i, i, perm[i], clf__shape_str(x, sx, sizeof(sx)));
    }
  }
  if ((st = clf__check_fits_u32(ctx, op, "x", x)) != CLF_OK) return st;
  return clf__check_fits_u32(ctx, op, "y", y);
}

/* A permute reduced to its fewest dims: the output's dims with size-1 dims
 * dropped, each merged into the previous one when the two are also
 * adjacent in x.  [B, L, H, Dh] -> [B, H, L, Dh] stays 4-D, a 2-D transpose
 * of a reshaped tensor becomes 2-D. */
typedef struct permute_plan {
  int m;                                   /* dims left (>= 1) */
  size_t size[CLF_MAX_DIMS];               /* in y's order */
  size_t xstride[CLF_MAX_DIMS], ystride[CLF_MAX_DIMS];
  int identity;                            /* a plain copy */
} permute_plan;

static void permute_plan_of(const clf_tensor *x, const int *perm, permute_plan *p) {
  const int n = x->ndim;
  size_t xst[CLF_MAX_DIMS];
  xst[n - 1] = 1;
  for (int i = n - 2; i >= 0; i--) xst[i] = xst[i + 1] * x->shape[i + 1];
  int m = 0;
  for (int i = 0; i < n; i++) {
    const size_t s = x->shape[perm[i]], str = xst[perm[i]];
    if (s == 1) continue;
    if (m > 0 && p->xstride[m - 1] == s * str) {
      p->size[m - 1] *= s;
      p->xstride[m - 1] = str;
    } else {
      p->size[m] = s;
      p->xstride[m] = str;
      m++;
    }
  }
  if (m == 0) { p->size[0] = 1; p->xstride[0] = 1; m = 1; }
  p->ystride[m - 1] = 1;
  for (int i = m - 2; i >= 0; i--) p->ystride[i] = p->ystride[i + 1] * p->size[i + 1];
  p->m = m;
  p->identity = m == 1 && p->xstride[0] == 1;
}

/* The identity permute: one buffer copy, or nothing when y is x. */
static clf_status permute_copy_whole(clf_context *ctx, const char *op, const clf_tensor *x, clf_tensor *y,
                                     cl_event *event) {
  const size_t numel = clf_tensor_numel(x), es = clf_dtype_size(x->dtype);
  if (x->buf == y->buf && x->offset == y->offset) { /* y is x: nothing to move */
    cl_int err = event ? clEnqueueMarkerWithWaitList(ctx->queue, 0, NULL, event) : CL_SUCCESS;
    return err == CL_SUCCESS ? CLF_OK : clf__fail_cl(ctx, err, "clEnqueueMarkerWithWaitList", op);
  }
  cl_int err =
      clEnqueueCopyBuffer(ctx->queue, x->buf, y->buf, x->offset * es, y->offset * es, numel * es, 0, NULL, event);
  return err == CL_SUCCESS ? CLF_OK : clf__fail_cl(ctx, err, "clEnqueueCopyBuffer", op);
}

/* Runs a transposing permute with the tiled kernel when it pays off and
 * self-validation allows; *done 0 when the strided copy should run. */
static clf_status permute_try_tiled(clf_context *ctx, const char *op, const clf_tensor *x, clf_tensor *y,
                                    const permute_plan *p, cl_event *event, int *done) {
  const int X = p->m - 1;
  int Y = 0;
  *done = 0;
  while (p->xstride[Y] != 1) Y++; /* x's innermost dim of size > 1 is in the list */
  /* Tiles pay off on GPUs once both transposed dims fill a good part of a
   * tile.  CPU devices have caches and no real local memory: there the
   * strided copy is faster (2.2 vs 5.8 ms on PoCL for [8,197,12,64] ->
   * [8,12,64,197]). */
  if (p->size[X] < 16 || p->size[Y] < 16) return CLF_OK;
  static const char tiled_v[] = "movement.permute_tiled", copy_v[] = "movement.copy_strided";
  const int cpu = ctx->caps.is_cpu != 0;
  int pref; /* 0: self-validation failed the kernel the device prefers */
  clf_status st = clf__variant_pick(ctx, op, cpu ? copy_v : tiled_v, cpu ? tiled_v : copy_v, &pref);
  if (st != CLF_OK || pref == cpu) return st;
  st = launch_tiled(ctx, x, y, p->m, p->size, p->xstride, p->ystride, Y, event);
  if (st == CLF_E_UNSUPPORTED) return CLF_OK;
  *done = 1;
  return st;
}

/* Any permute with the strided copy kernel. */
static clf_status permute_strided(clf_context *ctx, const clf_tensor *x, clf_tensor *y, const permute_plan *pp,
                                  cl_event *event) {
  const int m = pp->m, X = m - 1;
  copy_plan p;
  memset(&p, 0, sizeof(p));
  p.x_off = x->offset;
  p.y_off = y->offset;
  p.n = pp->size[X];
  p.x_inner_stride = pp->xstride[X];
  p.nd = m - 1;
  for (int i = 0; i < m - 1; i++) {
    p.dims[i] = pp->size[m - 2 - i];
    p.xs[i] = pp->xstride[m - 2 - i];
    p.ys[i] = pp->ystride[m - 2 - i];
  }
  return launch_copy(ctx, x, y, &p, event);
}

clf_status clf_permute(clf_context *ctx, const clf_tensor *x, const int *perm, clf_tensor *y, cl_event *event) {
  static const char op[] = "clf_permute";
  clf_status st = permute_check(ctx, op, x, perm, y);
  if (st != CLF_OK) return st;
  permute_plan p;
  permute_plan_of(x, perm, &p);
  const size_t numel = clf_tensor_numel(x);
  if (tensors_overlap(x, y) && !(p.identity && x->offset == y->offset))
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: y overlaps x (same buffer); permute is not in place", op);
  if (p.identity && numel > 0) return permute_copy_whole(ctx, op, x, y, event);
  if (p.xstride[p.m - 1] != 1 && numel > 0) {
    int done;
    st = permute_try_tiled(ctx, op, x, y, &p, event, &done);
    if (st != CLF_OK || done) return st;
  }
  return permute_strided(ctx, x, y, &p, event);
}

/* ---- heads ---- */

/* The arguments clf_split_heads and clf_split_heads_rope share: x [B, L, C],
 * y [B, H, Lcap, Dh], col_offset + H*Dh <= C, dst_pos + L <= Lcap, 32-bit
 * indexing; op names the caller. */
static clf_status split_heads_check(clf_context *ctx, const char *op, const clf_tensor *x, size_t col_offset,
                                    size_t dst_pos, const clf_tensor *y) {
  clf_status st;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "x", x, CLF_F32, 3, 3)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "y", y, CLF_F32, 4, 4)) != CLF_OK) return st;
  const size_t B = x->shape[0], L = x->shape[1], C = x->shape[2];
  const size_t H = y->shape[1], Lcap = y->shape[2], Dh = y->shape[3];
  char sx[96], sy[96];
  clf__shape_str(x, sx, sizeof(sx));
  clf__shape_str(y, sy, sizeof(sy));
  if (y->shape[0] != B)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: y has shape %s, its batch must be x's %zu (x %s)", op, sy, B, sx);
  if (H * Dh > C)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: y has shape %s, H*Dh = %zu exceeds the %zu columns of x %s", op, sy,
                     H * Dh, C, sx);
  if (col_offset > C - H * Dh)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: col_offset %zu + H*Dh %zu exceeds the %zu columns of x %s", op,
                     col_offset, H * Dh, C, sx);
  if (L > Lcap)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: y has shape %s, Lcap %zu is less than x's L %zu (x %s)", op, sy, Lcap,
                     L, sx);
  if (dst_pos > Lcap - L)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: dst_pos %zu + L %zu exceeds y's Lcap %zu (y %s)", op, dst_pos, L,
                     Lcap, sy);
  if ((st = clf__check_fits_u32(ctx, op, "x", x)) != CLF_OK) return st;
  return clf__check_fits_u32(ctx, op, "y", y);
}

clf_status clf_split_heads(clf_context *ctx, const clf_tensor *x, size_t col_offset, size_t dst_pos, clf_tensor *y,
                           cl_event *event) {
  clf_status st = split_heads_check(ctx, "clf_split_heads", x, col_offset, dst_pos, y);
  if (st != CLF_OK) return st;
  const size_t B = x->shape[0], L = x->shape[1], C = x->shape[2];
  const size_t H = y->shape[1], Lcap = y->shape[2], Dh = y->shape[3];
  /* Rows in y's order (b, h, l), so consecutive rows write consecutive memory. */
  copy_plan p = {x->offset + col_offset, y->offset + dst_pos * Dh, Dh, 1, 3,
                 {L, H, B}, {C, Dh, L * C}, {Dh, Lcap * Dh, H * Lcap * Dh}};
  return launch_copy(ctx, x, y, &p, event);
}

/* rope_split's variant: the f32 copies' program (i32 positions) or one
 * reading i64 positions. */
static const char *rope_options(int idx64) { return idx64 ? "-DCLF_ELEM=uint -DCLF_IDX64=1" : elem_options(4); }

clf_status clf__split_heads_rope2(clf_context *ctx, const clf_tensor *x, size_t col_offset, size_t dst_pos,
                                  const clf_tensor *positions, const clf_tensor *inv_freq, float scale, clf_tensor *y,
                                  clf_tensor *y2, cl_event *event) {
  static const char op[] = "clf_split_heads_rope";
  clf_status st;
  if ((st = split_heads_check(ctx, op, x, col_offset, dst_pos, y)) != CLF_OK) return st;
  if (y2) {
    char s1[96], s2[96];
    if ((st = split_heads_check(ctx, op, x, col_offset + y->shape[1] * y->shape[3], dst_pos, y2)) != CLF_OK)
      return st;
    if (y2->shape[2] != y->shape[2] || y2->shape[3] != y->shape[3])
      return clf__fail(ctx, CLF_E_SHAPE, "%s: y2 has shape %s, its Lcap and Dh must be y's %s", op,
                       clf__shape_str(y2, s2, sizeof(s2)), clf__shape_str(y, s1, sizeof(s1)));
  }
  const size_t B = x->shape[0], L = x->shape[1], C = x->shape[2];
  const size_t H = y->shape[1], Lcap = y->shape[2], Dh = y->shape[3];
  char sb[96];
  if (Dh % 2 != 0)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: y has shape %s, its head dim %zu must be even for rotate_half", op,
                     clf__shape_str(y, sb, sizeof(sb)), Dh);
  if ((st = clf__check_tensor(ctx, op, "positions", positions, -1, 2, 2)) != CLF_OK) return st;
  if (positions->dtype != CLF_I32 && positions->dtype != CLF_I64)
    return clf__fail(ctx, CLF_E_DTYPE, "%s: positions is %s, expected i32 or i64", op,
                     clf_dtype_name(positions->dtype));
  if (positions->shape[0] != B || positions->shape[1] != L)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: positions has shape %s, expected [B, L] = [%zu, %zu]", op,
                     clf__shape_str(positions, sb, sizeof(sb)), B, L);
  if ((st = clf__check_tensor(ctx, op, "inv_freq", inv_freq, CLF_F32, 1, 1)) != CLF_OK) return st;
  if (inv_freq->shape[0] < 1 || inv_freq->shape[0] > Dh / 2)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: inv_freq has shape %s, expected [R] with 1 <= R <= Dh/2 = %zu (R < Dh/2: "
                     "the first 2R of each head rotated)", op, clf__shape_str(inv_freq, sb, sizeof(sb)), Dh / 2);
  if (!isfinite(scale)) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: scale is %g, must be finite", op, (double)scale);
  if ((st = clf__check_fits_u32(ctx, op, "positions", positions)) != CLF_OK) return st;

  clf__kernel *k;
  if ((st = clf__get_kernel(ctx, "movement", rope_options(positions->dtype == CLF_I64), "rope_split", &k)) != CLF_OK)
    return st;
  cl_uint x_off = (cl_uint)(x->offset + col_offset), p_off = (cl_uint)positions->offset;
  cl_uint f_off = (cl_uint)inv_freq->offset, y_off = (cl_uint)y->offset;
  cl_uint c32 = (cl_uint)C, h32 = (cl_uint)H, l32 = (cl_uint)L, cap = (cl_uint)Lcap, half = (cl_uint)(Dh / 2);
  cl_uint dst = (cl_uint)dst_pos, rot = (cl_uint)inv_freq->shape[0];
  const clf_tensor *out2 = y2 ? y2 : y;
  cl_uint y2_off = (cl_uint)out2->offset, h2 = y2 ? (cl_uint)y2->shape[1] : 0;
  st = clf__set_args(ctx, k, 19, CLF__ARG(x->buf), CLF__ARG(x_off), CLF__ARG(positions->buf), CLF__ARG(p_off),
                     CLF__ARG(inv_freq->buf), CLF__ARG(f_off), CLF__ARG(y->buf), CLF__ARG(y_off), CLF__ARG(out2->buf),
                     CLF__ARG(y2_off), CLF__ARG(h2), CLF__ARG(c32), CLF__ARG(h32), CLF__ARG(l32), CLF__ARG(cap),
                     CLF__ARG(half), CLF__ARG(dst), CLF__ARG(scale), CLF__ARG(rot));
  if (st != CLF_OK) return st;
  /* Dim 0 walks half a head (a rotated pair or two copied columns, in
   * every head), dim 1 the positions, dim 2 the batch. */
  size_t global[3] = {Dh / 2, L, B}, local[3] = {0, 0, 1};
  clf__rows_local(ctx, k, Dh / 2, local);
  return clf__launch(ctx, k, 3, global, local, event);
}

clf_status clf_split_heads_rope(clf_context *ctx, const clf_tensor *x, size_t col_offset, size_t dst_pos,
                                const clf_tensor *positions, const clf_tensor *inv_freq, float scale, clf_tensor *y,
                                cl_event *event) {
  return clf__split_heads_rope2(ctx, x, col_offset, dst_pos, positions, inv_freq, scale, y, NULL, event);
}

clf_status clf_merge_heads(clf_context *ctx, const clf_tensor *x, clf_tensor *y, cl_event *event) {
  static const char op[] = "clf_merge_heads";
  clf_status st;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "x", x, CLF_F32, 4, 4)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "y", y, CLF_F32, 3, 3)) != CLF_OK) return st;
  const size_t B = x->shape[0], H = x->shape[1], L = x->shape[2], Dh = x->shape[3];
  if (y->shape[0] != B || y->shape[1] != L || y->shape[2] != H * Dh) {
    char sx[96], sy[96];
    return clf__fail(ctx, CLF_E_SHAPE, "%s: y has shape %s, expected [%zu, %zu, %zu] for x %s", op,
                     clf__shape_str(y, sy, sizeof(sy)), B, L, H * Dh, clf__shape_str(x, sx, sizeof(sx)));
  }
  if ((st = clf__check_fits_u32(ctx, op, "x", x)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "y", y)) != CLF_OK) return st;
  /* Rows in y's order (b, l, h). */
  copy_plan p = {x->offset, y->offset, Dh, 1, 3,
                 {H, L, B}, {L * Dh, Dh, H * L * Dh}, {Dh, H * Dh, L * H * Dh}};
  return launch_copy(ctx, x, y, &p, event);
}

/* ---- rows ---- */

clf_status clf_copy_rows(clf_context *ctx, const clf_tensor *src, size_t src_row, clf_tensor *dst, size_t dst_row,
                         size_t n_rows, cl_event *event) {
  static const char op[] = "clf_copy_rows";
  clf_status st;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "src", src, CLF_F32, 3, 3)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "dst", dst, CLF_F32, 3, 3)) != CLF_OK) return st;
  const size_t Bs = src->shape[0], Ls = src->shape[1], D = src->shape[2];
  const size_t B = dst->shape[0], Ld = dst->shape[1];
  char ss[96], sd[96];
  clf__shape_str(src, ss, sizeof(ss));
  clf__shape_str(dst, sd, sizeof(sd));
  if (dst->shape[2] != D)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: dst has shape %s, its last dim must be src's %zu (src %s)", op, sd, D,
                     ss);
  if (Bs != B && Bs != 1)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: src has shape %s, its batch must be 1 or dst's %zu (dst %s)", op, ss,
                     B, sd);
  if (src_row > Ls || n_rows > Ls - src_row)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: src_row %zu + n_rows %zu exceeds the %zu rows of src %s", op,
                     src_row, n_rows, Ls, ss);
  if (dst_row > Ld || n_rows > Ld - dst_row)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: dst_row %zu + n_rows %zu exceeds the %zu rows of dst %s", op,
                     dst_row, n_rows, Ld, sd);
  if ((st = clf__check_fits_u32(ctx, op, "src", src)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "dst", dst)) != CLF_OK) return st;
  copy_plan p = {src->offset + src_row * D, dst->offset + dst_row * D, D, 1, 2,
                 {n_rows, B}, {D, Bs == 1 ? 0 : Ls * D}, {D, Ld * D}};
  return launch_copy(ctx, src, dst, &p, event);
}

/* Columns [col, col + n) of the rows of wide [.., N] and the rows of
 * narrow [.., n], the same count of rows: narrow into them (into_wide) or
 * out of them. */
static clf_status copy_cols(clf_context *ctx, const char *op, const clf_tensor *narrow, clf_tensor *wide,
                            size_t col, int into_wide) {
  const clf_tensor *src = into_wide ? narrow : wide;
  clf_tensor *dst = into_wide ? wide : (clf_tensor *)narrow;
  clf_status st;
  if ((st = clf__check_tensor(ctx, op, "src", src, CLF_F32, 1, CLF_MAX_DIMS)) != CLF_OK ||
      (st = clf__check_tensor(ctx, op, "dst", dst, CLF_F32, 1, CLF_MAX_DIMS)) != CLF_OK)
    return st;
  const size_t n = narrow->shape[narrow->ndim - 1], N = wide->shape[wide->ndim - 1];
  const size_t rows = clf__numel_range(narrow, 0, narrow->ndim - 1);
  if (col > N || n > N - col || clf__numel_range(wide, 0, wide->ndim - 1) != rows) {
    char a[96], b[96];
    return clf__fail(ctx, CLF_E_SHAPE, "%s: cannot copy %s %s columns %zu.. of %s", op,
                     clf__shape_str(narrow, a, sizeof a), into_wide ? "into" : "from", col,
                     clf__shape_str(wide, b, sizeof b));
  }
  if ((st = clf__check_fits_u32(ctx, op, "src", src)) != CLF_OK ||
      (st = clf__check_fits_u32(ctx, op, "dst", dst)) != CLF_OK)
    return st;
  if (rows == 0 || n == 0) return CLF_OK;
  copy_plan p = into_wide ? (copy_plan){src->offset, dst->offset + col, n, 1, 1, {rows}, {n}, {N}}
                          : (copy_plan){src->offset + col, dst->offset, n, 1, 1, {rows}, {N}, {n}};
  return launch_copy(ctx, src, dst, &p, NULL);
}

clf_status clf__copy_cols(clf_context *ctx, const char *op, const clf_tensor *src, clf_tensor *dst, size_t col) {
  return copy_cols(ctx, op, src, dst, col, 1);
}

clf_status clf__take_cols(clf_context *ctx, const char *op, const clf_tensor *src, size_t col, clf_tensor *dst) {
  return copy_cols(ctx, op, dst, (clf_tensor *)src, col, 0);
}

clf_status clf_gather_rows(clf_context *ctx, const clf_tensor *x, size_t src_row, const clf_tensor *ids,
                           clf_tensor *out, size_t dst_row, cl_event *event) {
  static const char op[] = "clf_gather_rows";
  clf_status st;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "x", x, CLF_F32, 3, 3)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "ids", ids, -1, 2, 2)) != CLF_OK) return st;
  if (ids->dtype != CLF_I32 && ids->dtype != CLF_I64)
    return clf__fail(ctx, CLF_E_DTYPE, "%s: ids is %s, expected i32 or i64", op, clf_dtype_name(ids->dtype));
  if ((st = clf__check_tensor(ctx, op, "out", out, CLF_F32, 3, 3)) != CLF_OK) return st;
  const size_t B = x->shape[0], Lx = x->shape[1], D = x->shape[2];
  const size_t K = ids->shape[1], Lo = out->shape[1];
  char sx[96], si[96], so[96];
  clf__shape_str(x, sx, sizeof(sx));
  clf__shape_str(ids, si, sizeof(si));
  clf__shape_str(out, so, sizeof(so));
  if (ids->shape[0] != B)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: ids has shape %s, its batch must be x's %zu (x %s)", op, si, B, sx);
  if (out->shape[0] != B || out->shape[2] != D)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: out has shape %s, expected [%zu, Lo, %zu] for x %s", op, so, B, D, sx);
  if (K > Lo)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: out has shape %s, fewer rows than the %zu ids of %s", op, so, K, si);
  if (dst_row > Lo - K)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: dst_row %zu + K %zu exceeds the %zu rows of out %s", op, dst_row,
                     K, Lo, so);
  if (src_row > Lx)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: src_row %zu exceeds the %zu rows of x %s", op, src_row, Lx, sx);
  if ((st = clf__check_fits_u32(ctx, op, "x", x)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "ids", ids)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "out", out)) != CLF_OK) return st;
  /* ids index the rows [src_row, Lx) of x; others give zeros. */
  return clf__embed_gather(ctx, x, Lx * D, src_row, Lx - src_row, ids, B, K, D, 1.0f, 0, out, Lo * D, dst_row,
                           event);
}
