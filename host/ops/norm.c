/* norm.c - layer norm and RMS norm (each with a fused residual add) on
 * the device; both run the kernels of kernels/norm.cl, RMS norm with their
 * rms flag (mean taken as 0). */
#include "ops.h"

/* Checks the arguments shared by clf_layer_norm and clf_rms_norm (beta is
 * NULL for RMS norm); *D gets the normalised size. */
static clf_status norm_check(clf_context *ctx, const char *op, const clf_tensor *x, const clf_tensor *residual,
                             const clf_tensor *gamma, const clf_tensor *beta, float eps, const clf_tensor *sum_out,
                             const clf_tensor *y, size_t *D) {
  clf_status st;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "x", x, CLF_F32, 1, CLF_MAX_DIMS)) != CLF_OK) return st;
  *D = clf_tensor_dim(x, -1);
  if (*D == 0) return clf__fail(ctx, CLF_E_SHAPE, "%s: x has an empty last dim", op);
  if (residual) {
    if ((st = clf__check_tensor(ctx, op, "residual", residual, CLF_F32, 1, CLF_MAX_DIMS)) != CLF_OK) return st;
    if ((st = clf__check_same_shape(ctx, op, "x", x, "residual", residual)) != CLF_OK) return st;
  }
  if ((st = clf__check_tensor(ctx, op, "gamma", gamma, CLF_F32, 1, 1)) != CLF_OK) return st;
  if ((st = clf__check_dim(ctx, op, "gamma", gamma, 0, *D)) != CLF_OK) return st;
  if (beta) {
    if ((st = clf__check_tensor(ctx, op, "beta", beta, CLF_F32, 1, 1)) != CLF_OK) return st;
    if ((st = clf__check_dim(ctx, op, "beta", beta, 0, *D)) != CLF_OK) return st;
  }
  if (sum_out) {
    if ((st = clf__check_tensor(ctx, op, "sum_out", sum_out, CLF_F32, 1, CLF_MAX_DIMS)) != CLF_OK) return st;
    if ((st = clf__check_same_shape(ctx, op, "x", x, "sum_out", sum_out)) != CLF_OK) return st;
  }
  if ((st = clf__check_tensor(ctx, op, "y", y, CLF_F32, 1, CLF_MAX_DIMS)) != CLF_OK) return st;
  if ((st = clf__check_same_shape(ctx, op, "x", x, "y", y)) != CLF_OK) return st;
  if (!(eps >= 0.0f)) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: eps is %g, must be >= 0", op, (double)eps);
  return CLF_OK;
}

int clf__norm_sg(const clf_context *ctx) {
  return ctx->caps.has_subgroups && clf__variant_passed(ctx, CLF__NORM_SG);
}

/* Launches the norm kernel on checked arguments (rms: RMS norm). */
static clf_status norm_launch(clf_context *ctx, const char *op, const clf_tensor *x, const clf_tensor *residual,
                              const clf_tensor *res_bias, const clf_tensor *gamma, const clf_tensor *beta, float eps,
                              clf_tensor *sum_out, clf_tensor *y, size_t D, int rms, cl_event *event) {
  /* GPUs: one work-group per row, reducing in local memory.  CPUs: one
   * work-item per row (barriers are expensive there: 5.6 ms against 0.18 ms
   * for a copy of [1576, 768] on PoCL with the work-group kernel). */
  static const char rows_v[] = "norm.layer_norm_rows", group_v[] = "norm.layer_norm";
  const int cpu = ctx->caps.is_cpu != 0;
  int pref; /* 0: self-validation failed that kernel, the other one runs */
  clf_status st;
  if ((st = clf__variant_pick(ctx, op, cpu ? rows_v : group_v, cpu ? group_v : rows_v, &pref)) != CLF_OK) return st;
  int per_row = pref == cpu;
  /* The work-group kernel reduces through sub-groups where the device has
   * them and that variant passed self-validation (clf__norm_sg). */
  const int sg = clf__norm_sg(ctx);
  if (sg && clf__variant_validating(ctx, CLF__NORM_SG)) per_row = 0;
  /* Where y is an activation the integer products will read (held for
   * them: clf__linear_hold_x), the per-row kernel writes its 8-bit blocks
   * too, which saves their quantize_q8 launch (SmolLM2 decode: two of a
   * layer's four); elsewhere they quantize it themselves. */
  const size_t nrows = clf_tensor_numel(x) / D;
  cl_mem xq = NULL;
  cl_uint ds_off = 0;
  int q8 = 0;
  if (per_row && (st = clf__linear_x_slot(ctx, CLF__NORM_Q8, y, nrows, D, &xq, &ds_off, &q8)) != CLF_OK) return st;
  clf__kernel *k;
  if ((st = clf__get_kernel(ctx, "norm", q8 ? "-DNORM_Q8=1" : !per_row && sg ? "-DCLF_USE_SUBGROUPS=1" : NULL,
                            per_row ? "layer_norm_rows" : sg ? "layer_norm_sg" : "layer_norm", &k)) != CLF_OK)
    return st;
  const clf_tensor *r = residual ? residual : x;
  const clf_tensor *rb = res_bias ? res_bias : gamma;
  const clf_tensor *b = beta ? beta : gamma;
  clf_tensor *s = sum_out ? sum_out : y;
  cl_int has_res = residual != NULL, has_rb = res_bias != NULL, has_beta = beta != NULL, has_sum = sum_out != NULL,
         is_rms = rms != 0;
  cl_uint d32 = (cl_uint)D, rows = (cl_uint)(clf_tensor_numel(x) / D);
  st = clf__set_args(ctx, k, per_row ? q8 ? 25 : 22 : 21, CLF__TARG(x), CLF__TARG(r), CLF__ARG(has_res),
                     CLF__TARG(rb), CLF__ARG(has_rb), CLF__TARG(gamma), CLF__TARG(b), CLF__ARG(has_beta),
                     CLF__TARG(s), CLF__ARG(has_sum), CLF__TARG(y), CLF__ARG(d32), CLF__ARG(eps), CLF__ARG(is_rms),
                     CLF__ARG(rows), CLF__ARG(xq), CLF__ARG(xq), CLF__ARG(ds_off));
  if (st != CLF_OK) return st;
  if (per_row) {
    size_t local = clf__wg_1d(ctx, k, 8), global = rows;
    st = clf__launch(ctx, k, 1, &global, &local, event);
    clf__linear_x_written(ctx, y, st == CLF_OK && q8, nrows, D);
    return st;
  }
  clf__linear_x_written(ctx, y, 0, nrows, D);
  /* 64 items per row: enough to reduce D in the hundreds or thousands in a
   * few steps; one local size, so PoCL compiles one work-group function.
   * At most 128: the kernel's reduction array (CLF_LN_RED_WG in norm.cl). */
  size_t local = clf__wg_1d(ctx, k, D >= 256 ? 128 : 64);
  size_t global = clf_tensor_numel(x) / D * local;
  return clf__launch(ctx, k, 1, &global, &local, event);
}

clf_status clf_layer_norm(clf_context *ctx, const clf_tensor *x, const clf_tensor *residual,
                          const clf_tensor *gamma, const clf_tensor *beta, float eps, clf_tensor *sum_out,
                          clf_tensor *y, cl_event *event) {
  static const char op[] = "clf_layer_norm";
  size_t D;
  clf_status st = norm_check(ctx, op, x, residual, gamma, beta, eps, sum_out, y, &D);
  if (st != CLF_OK) return st;
  return norm_launch(ctx, op, x, residual, NULL, gamma, beta, eps, sum_out, y, D, 0, event);
}

clf_status clf_rms_norm(clf_context *ctx, const clf_tensor *x, const clf_tensor *residual, const clf_tensor *gamma,
                        float eps, clf_tensor *sum_out, clf_tensor *y, cl_event *event) {
  static const char op[] = "clf_rms_norm";
  size_t D;
  clf_status st = norm_check(ctx, op, x, residual, gamma, NULL, eps, sum_out, y, &D);
  if (st != CLF_OK) return st;
  return norm_launch(ctx, op, x, residual, NULL, gamma, NULL, eps, sum_out, y, D, 1, event);
}

clf_status clf__norm_res_bias(clf_context *ctx, const clf_tensor *x, const clf_tensor *residual,
                              const clf_tensor *res_bias, const clf_tensor *gamma, const clf_tensor *beta, float eps,
                              int rms, clf_tensor *sum_out, clf_tensor *y) {
  const char *op = rms ? "clf_rms_norm" : "clf_layer_norm";
  size_t D;
  clf_status st = norm_check(ctx, op, x, residual, gamma, beta, eps, sum_out, y, &D);
  if (st != CLF_OK) return st;
  if (res_bias) {
    if (!residual) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: a residual's bias without a residual", op);
    if ((st = clf__check_tensor(ctx, op, "res_bias", res_bias, CLF_F32, 1, 1)) != CLF_OK) return st;
    if ((st = clf__check_dim(ctx, op, "res_bias", res_bias, 0, D)) != CLF_OK) return st;
  }
  return norm_launch(ctx, op, x, residual, res_bias, gamma, beta, eps, sum_out, y, D, rms, NULL);
}
