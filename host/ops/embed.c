/* embed.c - token embeddings (row gathers by id), learned and sinusoidal
 * position embeddings.  Kernels in kernels/embed.cl; clf_gather_rows
 * (movement.c) shares the gather kernel through clf__embed_gather.
 */
#include "ops.h"

#include <math.h>
#include <stdint.h>

/* The options of the embed family: the id dtype, and the float sinusoid path
 * on devices without fp64.  At most four variants. */
static const char *embed_options(const clf_context *ctx, int idx64) {
  if (ctx->caps.has_fp64) return idx64 ? "-DCLF_IDX64=1" : "-DCLF_IDX64=0";
  return idx64 ? "-DCLF_IDX64=1 -DCLF_SIN_F32=1" : "-DCLF_IDX64=0 -DCLF_SIN_F32=1";
}

/* Launches a kernel over (D, n1, n2): dim 0 walks a row of D elements
 * (coalesced), dims 1 and 2 the rows, in the rows' local shape. */
static clf_status launch_rows(clf_context *ctx, clf__kernel *k, size_t D, size_t n1, size_t n2, cl_event *event) {
  size_t global[3] = {D, n1, n2}, local[3] = {0, 0, 1};
  clf__rows_local(ctx, k, D, local);
  return clf__launch(ctx, k, 3, global, local, event);
}


static clf_status check_ids(clf_context *ctx, const char *op, const clf_tensor *ids, int min_ndim,
                            int max_ndim) {
  clf_status st = clf__check_tensor(ctx, op, "ids", ids, -1, min_ndim, max_ndim);
  if (st != CLF_OK) return st;
  if (ids->dtype != CLF_I32 && ids->dtype != CLF_I64)
    return clf__fail(ctx, CLF_E_DTYPE, "%s: ids is %s, expected i32 or i64", op, clf_dtype_name(ids->dtype));
  return clf__check_fits_u32(ctx, op, "ids", ids);
}

/* The shared gather: out[b, y_row0 + k, :] = (accumulate ? out : 0) +
 * scale * (0 <= id < n_valid ? x[b, x_row0 + id, :] : 0), id = ids[b, k],
 * for `batches` batches of K ids (strides in elements).  Arguments already
 * checked by the caller.  Declared in ops.h. */
clf_status clf__embed_gather(clf_context *ctx, const clf_tensor *x, size_t x_bstride, size_t x_row0,
                             size_t n_valid, const clf_tensor *ids, size_t batches, size_t K, size_t D,
                             float scale, int accumulate, clf_tensor *out, size_t y_bstride, size_t y_row0,
                             cl_event *event) {
  clf__kernel *k;
  clf_status st = clf__get_kernel(ctx, "embed", embed_options(ctx, ids->dtype == CLF_I64), "gather_rows", &k);
  if (st != CLF_OK) return st;
  cl_uint d32 = (cl_uint)D, k32 = (cl_uint)K;
  cl_uint xb = (cl_uint)x_bstride, xr = (cl_uint)x_row0, nv = (cl_uint)n_valid;
  cl_uint yb = (cl_uint)y_bstride, yr = (cl_uint)y_row0;
  cl_int acc = accumulate != 0;
  st = clf__set_args(ctx, k, 15, CLF__TARG(x), CLF__TARG(ids), CLF__TARG(out), CLF__ARG(d32), CLF__ARG(k32),
                     CLF__ARG(xb), CLF__ARG(xr), CLF__ARG(nv), CLF__ARG(yb), CLF__ARG(yr), CLF__ARG(scale),
                     CLF__ARG(acc));
  if (st != CLF_OK) return st;
  return launch_rows(ctx, k, D, K, batches, event);
}

clf_status clf_embedding(clf_context *ctx, const clf_tensor *table, const clf_tensor *ids, float scale,
                         int accumulate, clf_tensor *out, cl_event *event) {
  static const char op[] = "clf_embedding";
  clf_status st;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "table", table, CLF_F32, 2, 2)) != CLF_OK) return st;
  if ((st = check_ids(ctx, op, ids, 1, CLF_MAX_DIMS - 1)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "out", out, CLF_F32, 1, CLF_MAX_DIMS)) != CLF_OK) return st;
  const size_t V = table->shape[0], D = table->shape[1];
  int same = out->ndim == ids->ndim + 1 && out->shape[out->ndim - 1] == D;
  for (int i = 0; same && i < ids->ndim; i++) same = out->shape[i] == ids->shape[i];
  if (!same) {
    char so[96], si[96], st_[96];
    return clf__fail(ctx, CLF_E_SHAPE, "%s: out has shape %s, expected ids' shape %s + [%zu] (table %s)", op,
                     clf__shape_str(out, so, sizeof(so)), clf__shape_str(ids, si, sizeof(si)), D,
                     clf__shape_str(table, st_, sizeof(st_)));
  }
  if ((st = clf__check_fits_u32(ctx, op, "table", table)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "out", out)) != CLF_OK) return st;
  const size_t N = clf_tensor_numel(ids);
  return clf__embed_gather(ctx, table, 0, 0, V, ids, 1, N, D, scale, accumulate, out, 0, 0, event);
}

/* out [B, L, D] or [L, D]: sets *L and *B (1 for [L, D]); the table/D checks
 * are the caller's. */
static clf_status check_positions_out(clf_context *ctx, const char *op, const clf_tensor *out, size_t *L,
                                      size_t *B) {
  clf_status st = clf__check_tensor(ctx, op, "out", out, CLF_F32, 2, 3);
  if (st != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "out", out)) != CLF_OK) return st;
  *L = out->shape[out->ndim - 2];
  *B = out->ndim == 3 ? out->shape[0] : 1;
  return CLF_OK;
}

clf_status clf_position_embedding(clf_context *ctx, const clf_tensor *table, size_t start, int accumulate,
                                  clf_tensor *out, cl_event *event) {
  static const char op[] = "clf_position_embedding";
  clf_status st;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "table", table, CLF_F32, 2, 2)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "table", table)) != CLF_OK) return st;
  size_t L, B;
  if ((st = check_positions_out(ctx, op, out, &L, &B)) != CLF_OK) return st;
  const size_t P = table->shape[0], D = table->shape[1];
  if ((st = clf__check_dim(ctx, op, "out", out, -1, D)) != CLF_OK) return st;
  if (L > P) {
    char so[96], st_[96];
    return clf__fail(ctx, CLF_E_SHAPE, "%s: out %s has %zu positions, more than table %s holds", op,
                     clf__shape_str(out, so, sizeof(so)), L, clf__shape_str(table, st_, sizeof(st_)));
  }
  if (start > P - L) {
    char st_[96];
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: start %zu + L %zu exceeds the %zu positions of table %s", op,
                     start, L, P, clf__shape_str(table, st_, sizeof(st_)));
  }

  clf__kernel *k;
  if ((st = clf__get_kernel(ctx, "embed", embed_options(ctx, 0), "position_embedding", &k)) != CLF_OK) return st;
  cl_uint d32 = (cl_uint)D, l32 = (cl_uint)L, s32 = (cl_uint)start;
  cl_int acc = accumulate != 0;
  st = clf__set_args(ctx, k, 8, CLF__TARG(table), CLF__TARG(out), CLF__ARG(d32), CLF__ARG(l32), CLF__ARG(s32),
                     CLF__ARG(acc));
  if (st != CLF_OK) return st;
  return launch_rows(ctx, k, D, L, B, event);
}

clf_status clf_sinusoidal_embedding(clf_context *ctx, clf_sinusoid_layout layout, size_t start, int accumulate,
                                    clf_tensor *out, cl_event *event) {
  static const char op[] = "clf_sinusoidal_embedding";
  clf_status st;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if (layout != CLF_SINUSOID_INTERLEAVED && layout != CLF_SINUSOID_HALVES)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: layout is %d, expected CLF_SINUSOID_INTERLEAVED or "
                     "CLF_SINUSOID_HALVES", op, (int)layout);
  size_t L, B;
  if ((st = check_positions_out(ctx, op, out, &L, &B)) != CLF_OK) return st;
  const size_t D = out->shape[out->ndim - 1];
  /* Positions go to the kernel as uint, and the float path needs them exact
   * in float. */
  if (start > (1u << 24) || L > (1u << 24) - start)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: start %zu + L %zu exceeds 2^24 positions", op, start, L);

  clf__kernel *k;
  if ((st = clf__get_kernel(ctx, "embed", embed_options(ctx, 0), "sinusoidal_embedding", &k)) != CLF_OK)
    return st;
  /* base = 10000^(-2/D) and 1/pi as float-float pairs for the float path. */
  const double base = D ? pow(10000.0, -2.0 / (double)D) : 1.0, inv_pi = 0.31830988618379067154;
  cl_float base_hi = (cl_float)base, base_lo = (cl_float)(base - (double)base_hi);
  cl_float ipi_hi = (cl_float)inv_pi, ipi_lo = (cl_float)(inv_pi - (double)ipi_hi);
  cl_uint d32 = (cl_uint)D, l32 = (cl_uint)L, b32 = (cl_uint)B, s32 = (cl_uint)start;
  cl_int halves = layout == CLF_SINUSOID_HALVES, acc = accumulate != 0;
  st = clf__set_args(ctx, k, 12, CLF__TARG(out), CLF__ARG(d32), CLF__ARG(l32), CLF__ARG(b32), CLF__ARG(s32),
                     CLF__ARG(halves), CLF__ARG(acc), CLF__ARG(base_hi), CLF__ARG(base_lo), CLF__ARG(ipi_hi),
                     CLF__ARG(ipi_lo));
  if (st != CLF_OK) return st;
  /* A zero batch leaves nothing to write. */
  return launch_rows(ctx, k, D, L, B ? 1 : 0, event);
}
