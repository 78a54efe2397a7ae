/* dense.c - the dense ops: GEMM through CLBlast, fused bias + activation,
 * broadcast add, scale, softmax over the last dim and dtype casts (kernels
 * in kernels/elementwise.cl).  The linear layer is in linear.c.
 */
#include "ops.h"

#include <stdio.h>
#include <string.h>

/* Work-group size of the element-wise kernels (clamped by clf__wg_1d). */
#define DENSE_WG 256
/* Elements per work-item of the f32 element-wise kernels and of the casts;
 * must match kernels/elementwise.cl. */
#define DENSE_VEC 4
#define DENSE_CAST_PER_ITEM 4

clf_status clf__nothing(clf_context *ctx, const char *op, cl_event *event) {
  if (!event) return CLF_OK;
  cl_int err = clEnqueueMarkerWithWaitList(ctx->queue, 0, NULL, event);
  if (err != CL_SUCCESS) return clf__fail_cl(ctx, err, "clEnqueueMarkerWithWaitList", op);
  return CLF_OK;
}

/* An f32 input x and an output y of x's shape, both within 32-bit indexing. */
static clf_status dense_check_unary(clf_context *ctx, const char *op, const clf_tensor *x, const clf_tensor *y) {
  clf_status st;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "x", x, CLF_F32, 1, CLF_MAX_DIMS)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "y", y, CLF_F32, 1, CLF_MAX_DIMS)) != CLF_OK) return st;
  if ((st = clf__check_same_shape(ctx, op, "x", x, "y", y)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "x", x)) != CLF_OK) return st;
  return clf__check_fits_u32(ctx, op, "y", y);
}

clf_status clf__check_act(clf_context *ctx, const char *op, clf_activation act) {
  if ((int)act < (int)CLF_ACT_NONE || (int)act > (int)CLF_ACT_TANH)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: act is %d, not a clf_activation", op, (int)act);
  return CLF_OK;
}

static size_t dense_vec_items(size_t n) { return (n + DENSE_VEC - 1) / DENSE_VEC; }

/* ------------------------------------------------------------------------ */

clf_status clf_activation_from_name(const char *name, clf_activation *out) {
  static const struct {
    const char *name;
    clf_activation act;
  } table[] = {
      {"relu", CLF_ACT_RELU},
      {"gelu", CLF_ACT_GELU},
      {"gelu_new", CLF_ACT_GELU_TANH},
      {"gelu_pytorch_tanh", CLF_ACT_GELU_TANH},
      {"gelu_fast", CLF_ACT_GELU_TANH},
      {"silu", CLF_ACT_SILU},
      {"swish", CLF_ACT_SILU},
      {"tanh", CLF_ACT_TANH},
  };
  if (!out) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_activation_from_name: out is NULL");
  for (size_t i = 0; name && i < CLF__ARRAY_LEN(table); i++) {
    if (strcmp(name, table[i].name) == 0) {
      *out = table[i].act;
      return CLF_OK;
    }
  }
  return clf__fail(NULL, CLF_E_UNSUPPORTED, "clf_activation_from_name: activation \"%s\" is not supported",
                   name ? name : "(null)");
}

/* ------------------------------------------------------------------------ */
/* GEMM */

/* op(X)'s rows and columns for a 2-D matrix stored as [d0, d1]. */
static void dense_op_dims(const clf_tensor *t, int trans, size_t *rows, size_t *cols) {
  size_t d0 = t->shape[t->ndim - 2], d1 = t->shape[t->ndim - 1];
  *rows = trans ? d1 : d0;
  *cols = trans ? d0 : d1;
}

/* Checks op(a) [M, K] x op(b) [K, N] -> c [M, N] on the last two dims. */
static clf_status dense_check_mnk(clf_context *ctx, const char *op, int trans_a, int trans_b, const clf_tensor *a,
                                  const clf_tensor *b, const clf_tensor *c, size_t *M, size_t *N, size_t *K) {
  char sa[96], sb[96], sc[96];
  size_t kb;
  dense_op_dims(a, trans_a, M, K);
  dense_op_dims(b, trans_b, &kb, N);
  if (*K != kb)
    return clf__fail(ctx, CLF_E_SHAPE,
                     "%s: K disagrees: op(a) is [M, K] = [%zu, %zu] (a %s, trans_a %d) but op(b) is [K, N] = "
                     "[%zu, %zu] (b %s, trans_b %d)",
                     op, *M, *K, clf__shape_str(a, sa, sizeof(sa)), trans_a != 0, kb, *N,
                     clf__shape_str(b, sb, sizeof(sb)), trans_b != 0);
  size_t cm = c->shape[c->ndim - 2], cn = c->shape[c->ndim - 1];
  if (cm != *M)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: c has shape %s but op(a) is [M, K] = [%zu, %zu] (a %s): M disagrees",
                     op, clf__shape_str(c, sc, sizeof(sc)), *M, *K, clf__shape_str(a, sa, sizeof(sa)));
  if (cn != *N)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: c has shape %s but op(b) is [K, N] = [%zu, %zu] (b %s): N disagrees",
                     op, clf__shape_str(c, sc, sizeof(sc)), *K, *N, clf__shape_str(b, sb, sizeof(sb)));
  return CLF_OK;
}

clf_status clf_gemm(clf_context *ctx, int trans_a, int trans_b, float alpha, const clf_tensor *a,
                    const clf_tensor *b, float beta, clf_tensor *c, cl_event *event) {
  static const char op[] = "clf_gemm";
  clf_status st;
  size_t M, N, K;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "a", a, CLF_F32, 2, 2)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "b", b, CLF_F32, 2, 2)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "c", c, CLF_F32, 2, 2)) != CLF_OK) return st;
  if ((st = dense_check_mnk(ctx, op, trans_a, trans_b, a, b, c, &M, &N, &K)) != CLF_OK) return st;
  return clf__sgemm(ctx, trans_a, trans_b, M, N, K, alpha, a->buf, a->offset, a->shape[1], 0, b->buf, b->offset,
                    b->shape[1], 0, beta, c->buf, c->offset, N, 0, 1, event);
}

clf_status clf_gemm_batched(clf_context *ctx, int trans_a, int trans_b, float alpha, const clf_tensor *a,
                            const clf_tensor *b, float beta, clf_tensor *c, cl_event *event) {
  static const char op[] = "clf_gemm_batched";
  clf_status st;
  char sa[96], sb[96];
  size_t M, N, K;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "a", a, CLF_F32, 3, CLF_MAX_DIMS)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "b", b, CLF_F32, 2, CLF_MAX_DIMS)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "c", c, CLF_F32, a->ndim, a->ndim)) != CLF_OK) return st;
  const int nb = a->ndim - 2; /* batch dims */
  const int shared_b = b->ndim == 2;
  if (!shared_b && b->ndim != a->ndim)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: b has shape %s, expected 2 dims (shared) or %d like a %s", op,
                     clf__shape_str(b, sb, sizeof(sb)), a->ndim, clf__shape_str(a, sa, sizeof(sa)));
  for (int i = 0; i < nb; i++) {
    if (c->shape[i] != a->shape[i]) {
      char sc[96];
      return clf__fail(ctx, CLF_E_SHAPE, "%s: c has shape %s but a has shape %s: batch dim %d disagrees", op,
                       clf__shape_str(c, sc, sizeof(sc)), clf__shape_str(a, sa, sizeof(sa)), i);
    }
    if (!shared_b && b->shape[i] != a->shape[i])
      return clf__fail(ctx, CLF_E_SHAPE, "%s: b has shape %s but a has shape %s: batch dim %d disagrees", op,
                       clf__shape_str(b, sb, sizeof(sb)), clf__shape_str(a, sa, sizeof(sa)), i);
  }
  if ((st = dense_check_mnk(ctx, op, trans_a, trans_b, a, b, c, &M, &N, &K)) != CLF_OK) return st;
  const size_t batch = clf__numel_range(a, 0, nb);
  const size_t lda = a->shape[a->ndim - 1], ldb = b->shape[b->ndim - 1];
  if (shared_b && !trans_a) /* fold the batch into M: one GEMM [batch*M, K] x [K, N] */
    return clf__sgemm(ctx, 0, trans_b, batch * M, N, K, alpha, a->buf, a->offset, lda, 0, b->buf, b->offset, ldb,
                      0, beta, c->buf, c->offset, N, 0, 1, event);
  return clf__sgemm(ctx, trans_a, trans_b, M, N, K, alpha, a->buf, a->offset, lda, M * K, b->buf, b->offset, ldb,
                    shared_b ? 0 : K * N, beta, c->buf, c->offset, N, M * N, batch, event);
}

/* ------------------------------------------------------------------------ */
/* Bias + activation (clf_linear is in linear.c) */

/* y = act(x + bias) over x's last dim; arguments already checked. */
static clf_status dense_bias_act(clf_context *ctx, const clf_tensor *x, const clf_tensor *bias, clf_activation act,
                                 clf_tensor *y, cl_event *event) {
  clf_status st;
  clf__kernel *k;
  if ((st = clf__get_kernel(ctx, "elementwise", NULL, "bias_act", &k)) != CLF_OK) return st;
  const clf_tensor *bb = bias ? bias : x;
  cl_int has_bias = bias != NULL, act32 = (cl_int)act;
  cl_uint n = (cl_uint)clf_tensor_numel(x), D = (cl_uint)x->shape[x->ndim - 1];
  st = clf__set_args(ctx, k, 10, CLF__TARG(x), CLF__TARG(bb), CLF__ARG(has_bias), CLF__ARG(act32), CLF__TARG(y),
                     CLF__ARG(n), CLF__ARG(D));
  if (st != CLF_OK) return st;
  size_t local = clf__wg_1d(ctx, k, DENSE_WG), global = dense_vec_items(n);
  return clf__launch(ctx, k, 1, &global, &local, event);
}

clf_status clf__bias_act(clf_context *ctx, const clf_tensor *x, const clf_tensor *bias, clf_activation act,
                         clf_tensor *y, cl_event *event) {
  return dense_bias_act(ctx, x, bias, act, y, event);
}

clf_status clf__check_bias(clf_context *ctx, const char *op, const clf_tensor *bias, size_t D) {
  clf_status st;
  if (!bias) return CLF_OK;
  if ((st = clf__check_tensor(ctx, op, "bias", bias, CLF_F32, 1, 1)) != CLF_OK) return st;
  return clf__check_dim(ctx, op, "bias", bias, 0, D);
}

clf_status clf_bias_act(clf_context *ctx, const clf_tensor *x, const clf_tensor *bias, clf_activation act,
                        clf_tensor *y, cl_event *event) {
  static const char op[] = "clf_bias_act";
  clf_status st;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "x", x, CLF_F32, 1, CLF_MAX_DIMS)) != CLF_OK) return st;
  if ((st = clf__check_bias(ctx, op, bias, x->shape[x->ndim - 1])) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "y", y, CLF_F32, 1, CLF_MAX_DIMS)) != CLF_OK) return st;
  if ((st = clf__check_same_shape(ctx, op, "x", x, "y", y)) != CLF_OK) return st;
  if ((st = clf__check_act(ctx, op, act)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "x", x)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "y", y)) != CLF_OK) return st;
  const int same = x->buf == y->buf && x->offset == y->offset;
  if (clf_tensor_numel(x) == 0 || (same && !bias && act == CLF_ACT_NONE)) return clf__nothing(ctx, op, event);
  return dense_bias_act(ctx, x, bias, act, y, event);
}

clf_status clf_glu(clf_context *ctx, const clf_tensor *gate_up, clf_activation act, clf_tensor *y, cl_event *event) {
  static const char op[] = "clf_glu";
  clf_status st;
  char sg[96], sy[96];
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "gate_up", gate_up, CLF_F32, 1, CLF_MAX_DIMS)) != CLF_OK) return st;
  const size_t two_f = gate_up->shape[gate_up->ndim - 1], F = two_f / 2;
  if (two_f % 2 != 0)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: gate_up has shape %s, its last dim %zu must be even ([gate | up])", op,
                     clf__shape_str(gate_up, sg, sizeof(sg)), two_f);
  if ((st = clf__check_tensor(ctx, op, "y", y, CLF_F32, gate_up->ndim, gate_up->ndim)) != CLF_OK) return st;
  for (int i = 0; i < y->ndim; i++)
    if (y->shape[i] != (i == y->ndim - 1 ? F : gate_up->shape[i]))
      return clf__fail(ctx, CLF_E_SHAPE, "%s: y has shape %s, expected gate_up's leading dims and %zu (gate_up %s)", op,
                       clf__shape_str(y, sy, sizeof(sy)), F, clf__shape_str(gate_up, sg, sizeof(sg)));
  if ((st = clf__check_act(ctx, op, act)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "gate_up", gate_up)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "y", y)) != CLF_OK) return st;
  const size_t n = clf_tensor_numel(y);
  if (n == 0) return clf__nothing(ctx, op, event);
  /* Where y is held for the integer products (down_proj's x), glu_q8
   * writes its 8-bit blocks too: no quantize_q8 launch for it. */
  const size_t rows = n / F;
  cl_mem xq = NULL;
  cl_uint ds_off = 0;
  int q8 = 0;
  if ((st = clf__linear_x_slot(ctx, CLF__GLU_Q8, y, rows, F, &xq, &ds_off, &q8)) != CLF_OK) return st;
  clf__kernel *k;
  if ((st = clf__get_kernel(ctx, "elementwise", NULL, q8 ? "glu_q8" : "glu", &k)) != CLF_OK) return st;
  cl_int a = (cl_int)act;
  cl_uint n32 = (cl_uint)n, f32 = (cl_uint)F, r32 = (cl_uint)rows;
  if (q8)
    st = clf__set_args(ctx, k, 10, CLF__TARG(gate_up), CLF__ARG(a), CLF__TARG(y), CLF__ARG(r32), CLF__ARG(f32),
                       CLF__ARG(xq), CLF__ARG(xq), CLF__ARG(ds_off));
  else
    st = clf__set_args(ctx, k, 7, CLF__TARG(gate_up), CLF__ARG(a), CLF__TARG(y), CLF__ARG(n32), CLF__ARG(f32));
  if (st != CLF_OK) return st;
  /* work-groups of 8 on a CPU: glu's 256 took Intel's runtime 20 us a row, glu_q8's 8 took 7 */
  const size_t local = clf__wg_1d(ctx, k, q8 || ctx->caps.is_cpu ? 8 : DENSE_WG);
  const size_t global = q8 ? (n / 32 + local - 1) / local * local : dense_vec_items(n);
  st = clf__launch(ctx, k, 1, &global, &local, event);
  clf__linear_x_written(ctx, y, st == CLF_OK && q8, rows, F);
  return st;
}

/* ------------------------------------------------------------------------ */
/* add, scale, softmax */

clf_status clf_add(clf_context *ctx, const clf_tensor *a, const clf_tensor *b, clf_tensor *y, cl_event *event) {
  static const char op[] = "clf_add";
  clf_status st;
  char sa[96], sb[96];
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "a", a, CLF_F32, 1, CLF_MAX_DIMS)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "b", b, CLF_F32, 1, CLF_MAX_DIMS)) != CLF_OK) return st;
  if (b->ndim > a->ndim)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: b has shape %s, more dims than a %s (y has a's shape)", op,
                     clf__shape_str(b, sb, sizeof(sb)), clf__shape_str(a, sa, sizeof(sa)));
  for (int i = 1; i <= b->ndim; i++) {
    size_t da = a->shape[a->ndim - i], db = b->shape[b->ndim - i];
    if (db != 1 && db != da)
      return clf__fail(ctx, CLF_E_SHAPE,
                       "%s: b has shape %s, not broadcastable to a %s: dim %d is %zu, must be 1 or %zu", op,
                       clf__shape_str(b, sb, sizeof(sb)), clf__shape_str(a, sa, sizeof(sa)), -i, db, da);
  }
  if ((st = clf__check_tensor(ctx, op, "y", y, CLF_F32, 1, CLF_MAX_DIMS)) != CLF_OK) return st;
  if ((st = clf__check_same_shape(ctx, op, "a", a, "y", y)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "a", a)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "b", b)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "y", y)) != CLF_OK) return st;
  const size_t n = clf_tensor_numel(a);
  if (n == 0) return clf__nothing(ctx, op, event);

  /* Merge a's dims, innermost first, into runs where b either follows a or
   * broadcasts; dims of size 1 drop out.  At most CLF_MAX_DIMS runs remain. */
  cl_uint8 dims, bstr;
  memset(&dims, 0, sizeof(dims));
  memset(&bstr, 0, sizeof(bstr));
  cl_uint nd = 0;
  int prev_bc = -1;
  size_t bstride = 1;
  for (int i = 1; i <= a->ndim; i++) {
    size_t da = a->shape[a->ndim - i];
    if (da == 1) continue;
    int bc = i > b->ndim || b->shape[b->ndim - i] == 1;
    if (bc == prev_bc) {
      dims.s[nd - 1] *= (cl_uint)da;
    } else {
      dims.s[nd] = (cl_uint)da;
      bstr.s[nd] = bc ? 0 : (cl_uint)bstride;
      nd++;
      prev_bc = bc;
    }
    if (!bc) bstride *= da;
  }
  if (nd == 0) { /* a holds one element */
    dims.s[0] = 1;
    nd = 1;
  }
  clf__kernel *k;
  if ((st = clf__get_kernel(ctx, "elementwise", NULL, "add_bcast", &k)) != CLF_OK) return st;
  cl_uint n32 = (cl_uint)n;
  st = clf__set_args(ctx, k, 10, CLF__TARG(a), CLF__TARG(b), CLF__TARG(y), CLF__ARG(n32), CLF__ARG(nd),
                     CLF__ARG(dims), CLF__ARG(bstr));
  if (st != CLF_OK) return st;
  size_t local = clf__wg_1d(ctx, k, DENSE_WG), global = dense_vec_items(n);
  return clf__launch(ctx, k, 1, &global, &local, event);
}

clf_status clf_scale(clf_context *ctx, const clf_tensor *x, float alpha, clf_tensor *y, cl_event *event) {
  static const char op[] = "clf_scale";
  clf_status st;
  if ((st = dense_check_unary(ctx, op, x, y)) != CLF_OK) return st;
  clf__kernel *k;
  if ((st = clf__get_kernel(ctx, "elementwise", NULL, "scale", &k)) != CLF_OK) return st;
  cl_uint n = (cl_uint)clf_tensor_numel(x);
  st = clf__set_args(ctx, k, 6, CLF__TARG(x), CLF__ARG(alpha), CLF__TARG(y), CLF__ARG(n));
  if (st != CLF_OK) return st;
  size_t local = clf__wg_1d(ctx, k, DENSE_WG), global = dense_vec_items(n);
  return clf__launch(ctx, k, 1, &global, &local, event);
}

int clf__softmax_sg(const clf_context *ctx) {
  return ctx->caps.has_subgroups && clf__variant_passed(ctx, CLF__SOFTMAX_SG);
}

clf_status clf_softmax(clf_context *ctx, const clf_tensor *x, float scale, clf_tensor *y, cl_event *event) {
  static const char op[] = "clf_softmax";
  clf_status st;
  if ((st = dense_check_unary(ctx, op, x, y)) != CLF_OK) return st;
  const size_t n = clf_tensor_numel(x), D = x->shape[x->ndim - 1];
  if (n == 0) return clf__nothing(ctx, op, event);
  /* Reductions through sub-groups where the device has them and that
   * variant passed self-validation. */
  const int sg = clf__softmax_sg(ctx);
  clf__kernel *k;
  if ((st = clf__get_kernel(ctx, "elementwise", sg ? "-DCLF_USE_SUBGROUPS=1" : NULL, sg ? "softmax_rows_sg" : "softmax_rows",
                            &k)) != CLF_OK)
    return st;
  cl_uint d32 = (cl_uint)D;
  st = clf__set_args(ctx, k, 6, CLF__TARG(x), CLF__TARG(y), CLF__ARG(d32), CLF__ARG(scale));
  if (st != CLF_OK) return st;
  /* One work-group per row; three fixed sizes so that a row has a few
   * elements per work-item (attention rows of ~200 use 64). */
  size_t local = clf__wg_1d(ctx, k, D <= 512 ? 64 : D <= 2048 ? 128 : 256);
  size_t global = n / D * local;
  return clf__launch(ctx, k, 1, &global, &local, event);
}

/* ------------------------------------------------------------------------ */
/* cast */

clf_status clf_cast(clf_context *ctx, const clf_tensor *x, clf_tensor *y, cl_event *event) {
  static const char op[] = "clf_cast";
  static const char *const suffix[] = {"f32", "f16", "i32", "i64"}; /* by clf_dtype */
  clf_status st;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "x", x, -1, 1, CLF_MAX_DIMS)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "y", y, -1, 1, CLF_MAX_DIMS)) != CLF_OK) return st;
  if ((unsigned)x->dtype > CLF_I64 || (unsigned)y->dtype > CLF_I64)
    return clf__fail(ctx, CLF_E_DTYPE, "%s: unknown dtype (x %d, y %d)", op, (int)x->dtype, (int)y->dtype);
  if ((st = clf__check_same_shape(ctx, op, "x", x, "y", y)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "x", x)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "y", y)) != CLF_OK) return st;
  char name[32];
  strcpy(name, "cast_");
  strcat(name, suffix[x->dtype]);
  strcat(name, "_");
  strcat(name, suffix[y->dtype]);
  clf__kernel *k;
  if ((st = clf__get_kernel(ctx, "elementwise", NULL, name, &k)) != CLF_OK) return st;
  cl_uint n = (cl_uint)clf_tensor_numel(x);
  st = clf__set_args(ctx, k, 5, CLF__TARG(x), CLF__TARG(y), CLF__ARG(n));
  if (st != CLF_OK) return st;
  size_t local = clf__wg_1d(ctx, k, DENSE_WG);
  /* Each group converts local * DENSE_CAST_PER_ITEM elements. */
  size_t groups = (n + local * DENSE_CAST_PER_ITEM - 1) / (local * DENSE_CAST_PER_ITEM);
  size_t global = groups * local;
  return clf__launch(ctx, k, 1, &global, &local, event);
}
