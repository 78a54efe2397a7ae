/* test_norm.c - layer norm and RMS norm against a CPU reference, with and
 * without the fused residual add, at odd sizes, in place, and with bad
 * arguments. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "device/reference.h"
#include "harness.h"
#include "ops/ops.h" /* to run both kernels: caps.is_cpu picks one */

/* The library's reference (device/reference.c), rounded to f32. */
static void ref_layer_norm(const float *x, const float *r, const float *g, const float *b, float eps,
                           size_t rows, size_t D, float *sum, float *y) {
  double *ds = malloc((rows * D + 1) * sizeof(double)), *dy = malloc((rows * D + 1) * sizeof(double));
  clf__ref_layer_norm(x, r, g, b, eps, rows, D, ds, dy);
  if (sum) clf__ref_to_f32(ds, rows * D, sum);
  clf__ref_to_f32(dy, rows * D, y);
  free(ds);
  free(dy);
}

static void ref_rms_norm(const float *x, const float *r, const float *g, float eps, size_t rows, size_t D, float *sum,
                         float *y);

/* f32 accumulation over D <= 4096 values: 2e-5 of the output's scale. */
#define LN_TOL 2e-5

static void check_ln(size_t B, size_t L, size_t D, int with_res, int with_beta, int with_sum) {
  size_t n = B * L * D;
  float *x = th_rand(n, 1, -3.0f, 5.0f), *r = th_rand(n, 2, -1.0f, 1.0f);
  float *g = th_rand(D, 3, 0.5f, 1.5f), *b = th_rand(D, 4, -0.5f, 0.5f);
  float *ref_y = malloc(n * sizeof(float)), *ref_s = malloc(n * sizeof(float));
  ref_layer_norm(x, with_res ? r : NULL, g, with_beta ? b : NULL, 1e-5f, B * L, D, ref_s, ref_y);

  clf_tensor *tx = th_tensor(CLF_F32, 3, TH_SHAPE(B, L, D), x);
  clf_tensor *tr = th_tensor(CLF_F32, 3, TH_SHAPE(B, L, D), r);
  clf_tensor *tg = th_tensor(CLF_F32, 1, TH_SHAPE(D), g);
  clf_tensor *tb = th_tensor(CLF_F32, 1, TH_SHAPE(D), b);
  clf_tensor *ts = th_empty(CLF_F32, 3, TH_SHAPE(B, L, D));
  clf_tensor *ty = th_empty(CLF_F32, 3, TH_SHAPE(B, L, D));
  TH_OK(clf_layer_norm(th_ctx, tx, with_res ? tr : NULL, tg, with_beta ? tb : NULL, 1e-5f,
                       with_sum ? ts : NULL, ty, NULL));
  float *y = th_download(ty);
  TH_CLOSE(y, ref_y, n, LN_TOL);
  if (with_sum) {
    float *s = th_download(ts);
    TH_CLOSE(s, ref_s, n, 1e-6);
    free(s);
  }
  free(y);
  free(x); free(r); free(g); free(b); free(ref_y); free(ref_s);
  clf_tensor_destroy(tx); clf_tensor_destroy(tr); clf_tensor_destroy(tg);
  clf_tensor_destroy(tb); clf_tensor_destroy(ts); clf_tensor_destroy(ty);
}

START_TEST(ln_plain_odd_sizes) {
  static const size_t dims[][3] = {{1, 1, 1}, {1, 7, 33}, {2, 197, 768}, {3, 5, 1000}, {1, 3, 4096}};
  for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++) check_ln(dims[i][0], dims[i][1], dims[i][2], 0, 1, 0);
}
END_TEST

START_TEST(ln_residual_post_and_pre) {
  check_ln(2, 7, 33, 1, 1, 0);  /* post-LN: y = LN(x + f(x)) */
  check_ln(2, 33, 512, 1, 1, 1); /* pre-LN: sum_out carries the residual stream */
  check_ln(1, 1, 7, 1, 0, 1);   /* no beta */
}
END_TEST

START_TEST(ln_large_mean) {
  /* Values around 1000 with spread 1: a one-pass variance loses digits. */
  size_t D = 256, n = 4 * D;
  float *x = th_rand(n, 9, 999.0f, 1001.0f), *g = th_rand(D, 3, 1.0f, 1.0f);
  float *ref = malloc(n * sizeof(float));
  ref_layer_norm(x, NULL, g, NULL, 1e-12f, 4, D, NULL, ref);
  clf_tensor *tx = th_tensor(CLF_F32, 2, TH_SHAPE(4, D), x), *tg = th_tensor(CLF_F32, 1, TH_SHAPE(D), g);
  clf_tensor *ty = th_empty(CLF_F32, 2, TH_SHAPE(4, D));
  TH_OK(clf_layer_norm(th_ctx, tx, NULL, tg, NULL, 1e-12f, NULL, ty, NULL));
  float *y = th_download(ty);
  /* The inputs carry ~6e-5 of rounding relative to a unit spread. */
  TH_CLOSE(y, ref, n, 2e-3);
  free(y); free(x); free(g); free(ref);
  clf_tensor_destroy(tx); clf_tensor_destroy(tg); clf_tensor_destroy(ty);
}
END_TEST

START_TEST(ln_in_place) {
  size_t D = 65, n = 3 * D;
  float *x = th_rand(n, 5, -2.0f, 2.0f), *r = th_rand(n, 6, -2.0f, 2.0f), *g = th_rand(D, 7, 0.5f, 1.5f);
  float *ref_y = malloc(n * sizeof(float)), *ref_s = malloc(n * sizeof(float));
  ref_layer_norm(x, r, g, NULL, 1e-6f, 3, D, ref_s, ref_y);
  clf_tensor *tx = th_tensor(CLF_F32, 2, TH_SHAPE(3, D), x), *tr = th_tensor(CLF_F32, 2, TH_SHAPE(3, D), r);
  clf_tensor *tg = th_tensor(CLF_F32, 1, TH_SHAPE(D), g);
  /* x becomes the residual stream, r the normalised output. */
  TH_OK(clf_layer_norm(th_ctx, tx, tr, tg, NULL, 1e-6f, tx, tr, NULL));
  float *s = th_download(tx), *y = th_download(tr);
  TH_CLOSE(s, ref_s, n, 1e-6);
  TH_CLOSE(y, ref_y, n, LN_TOL);
  free(s); free(y); free(x); free(r); free(g); free(ref_y); free(ref_s);
  clf_tensor_destroy(tx); clf_tensor_destroy(tr); clf_tensor_destroy(tg);
}
END_TEST

/* The residual's bias (a linear layer's, left to the norm: clf__ln_apply's
 * res_bias): y = norm(x + (r + rb)), the sum too, against the reference
 * on x and r + rb rounded to f32 as the layer would have written it; both
 * kernels, layer norm and RMS norm; refused without a residual or at the
 * wrong size. */
START_TEST(norm_residual_bias) {
  const size_t rows = 6, D = 97, n = rows * D;
  float *x = th_rand(n, 41, -2.0f, 2.0f), *r = th_rand(n, 42, -1.0f, 1.0f), *rb = th_rand(D, 43, -0.5f, 0.5f);
  float *g = th_rand(D, 44, 0.5f, 1.5f), *b = th_rand(D, 45, -0.5f, 0.5f), *rr = malloc(n * sizeof(float));
  float *ref_y = malloc(n * sizeof(float)), *ref_s = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) rr[i] = r[i] + rb[i % D];
  clf_tensor *tx = th_tensor(CLF_F32, 2, TH_SHAPE(rows, D), x), *tr = th_tensor(CLF_F32, 2, TH_SHAPE(rows, D), r);
  clf_tensor *trb = th_tensor(CLF_F32, 1, TH_SHAPE(D), rb), *tg = th_tensor(CLF_F32, 1, TH_SHAPE(D), g);
  clf_tensor *tb = th_tensor(CLF_F32, 1, TH_SHAPE(D), b), *short_b = th_tensor(CLF_F32, 1, TH_SHAPE(D - 1), b);
  clf_tensor *ts = th_empty(CLF_F32, 2, TH_SHAPE(rows, D)), *ty = th_empty(CLF_F32, 2, TH_SHAPE(rows, D));
  const int was_cpu = th_ctx->caps.is_cpu;
  for (int rms = 0; rms < 2; rms++) {
    if (rms) ref_rms_norm(x, rr, g, 1e-6f, rows, D, ref_s, ref_y);
    else ref_layer_norm(x, rr, g, b, 1e-6f, rows, D, ref_s, ref_y);
    for (int cpu = 0; cpu < 2; cpu++) {
      th_ctx->caps.is_cpu = cpu;
      TH_OK(clf__norm_res_bias(th_ctx, tx, tr, trb, tg, rms ? NULL : tb, 1e-6f, rms, ts, ty));
      float *y = th_download(ty), *sum = th_download(ts);
      TH_CLOSE(y, ref_y, n, LN_TOL);
      TH_CLOSE(sum, ref_s, n, 1e-6);
      free(y);
      free(sum);
    }
  }
  th_ctx->caps.is_cpu = was_cpu;
  TH_FAILS(clf__norm_res_bias(th_ctx, tx, NULL, trb, tg, tb, 1e-6f, 0, NULL, ty), CLF_E_INVALID_ARG, "without a residual");
  TH_FAILS(clf__norm_res_bias(th_ctx, tx, tr, short_b, tg, tb, 1e-6f, 0, NULL, ty), CLF_E_SHAPE, "res_bias");
  free(x); free(r); free(rb); free(g); free(b); free(rr); free(ref_y); free(ref_s);
  clf_tensor_destroy(tx); clf_tensor_destroy(tr); clf_tensor_destroy(trb); clf_tensor_destroy(tg);
  clf_tensor_destroy(tb); clf_tensor_destroy(short_b); clf_tensor_destroy(ts); clf_tensor_destroy(ty);
}
END_TEST

START_TEST(ln_both_kernels) {
  /* The work-group kernel (GPUs) and the row-per-item kernel (CPUs) on the
   * same cases, whatever this device is. */
  const int was_cpu = th_ctx->caps.is_cpu;
  for (int cpu = 0; cpu < 2; cpu++) {
    th_ctx->caps.is_cpu = cpu;
    check_ln(1, 1, 1, 0, 1, 0);
    check_ln(2, 7, 33, 1, 1, 1);
    check_ln(1, 5, 1001, 1, 0, 0);
    check_ln(3, 4, 256, 0, 1, 1);
  }
  th_ctx->caps.is_cpu = was_cpu;
}
END_TEST

/* ---- variants that need a device feature (sub-groups, fp16) ----
 * Run on th_profiled_begin's context; a variant is forced on by a passing
 * verdict recorded as clf_validate records one (the comparison with the CPU
 * reference is then this test's own). */

/* The work-group kernel with its reductions through sub-groups where the
 * device has them (never before it passed validation), the plain one where
 * it has none or CLFORMER_LIMITS turns them off. */
static void ln_subgroups(const char *limits) {
  th_profiled_begin(limits);
  th_ctx->caps.is_cpu = 0; /* the work-group kernel, whatever the device */
  const int sg = th_ctx->caps.has_subgroups;
  ck_assert_int_eq(clf__norm_sg(th_ctx), 0); /* not validated: not used */
  if (sg) ck_assert(clf__verdict_record(th_ctx, CLF__NORM_SG, 1, 0, 0));
  else fprintf(stderr, "note: no sub-groups (%s): layer_norm runs\n", limits ? limits : "this device");
  ck_assert_int_eq(clf__norm_sg(th_ctx), sg);
  check_ln(1, 1, 1, 0, 1, 0);
  check_ln(2, 7, 33, 1, 1, 1);
  check_ln(1, 5, 1001, 1, 0, 0);
  check_ln(3, 4, 256, 0, 1, 1);
  th_profiled_expect(sg ? "layer_norm_sg" : "layer_norm", sg ? "layer_norm" : "layer_norm_sg", 1);
}

START_TEST(ln_subgroup_variant) {
  ln_subgroups(NULL);
  ln_subgroups("subgroups=0");
}
END_TEST

START_TEST(ln_bad_arguments) {
  clf_tensor *x = th_empty(CLF_F32, 2, TH_SHAPE(4, 8)), *y = th_empty(CLF_F32, 2, TH_SHAPE(4, 8));
  clf_tensor *g = th_empty(CLF_F32, 1, TH_SHAPE(8)), *g7 = th_empty(CLF_F32, 1, TH_SHAPE(7));
  clf_tensor *y2 = th_empty(CLF_F32, 2, TH_SHAPE(8, 4)), *xi = th_empty(CLF_I32, 2, TH_SHAPE(4, 8));
  TH_FAILS(clf_layer_norm(th_ctx, NULL, NULL, g, NULL, 1e-5f, NULL, y, NULL), CLF_E_INVALID_ARG, "x is NULL");
  TH_FAILS(clf_layer_norm(th_ctx, x, NULL, g7, NULL, 1e-5f, NULL, y, NULL), CLF_E_SHAPE, "gamma");
  TH_FAILS(clf_layer_norm(th_ctx, x, NULL, g, NULL, 1e-5f, NULL, y2, NULL), CLF_E_SHAPE, "y has shape [8, 4]");
  TH_FAILS(clf_layer_norm(th_ctx, xi, NULL, g, NULL, 1e-5f, NULL, y, NULL), CLF_E_DTYPE, "x is i32");
  TH_FAILS(clf_layer_norm(th_ctx, x, y2, g, NULL, 1e-5f, NULL, y, NULL), CLF_E_SHAPE, "residual");
  TH_FAILS(clf_layer_norm(th_ctx, x, NULL, g, NULL, -1.0f, NULL, y, NULL), CLF_E_INVALID_ARG, "eps");
  ck_assert_int_eq(clf_layer_norm(NULL, x, NULL, g, NULL, 1e-5f, NULL, y, NULL), CLF_E_INVALID_ARG);
  clf_tensor_destroy(x); clf_tensor_destroy(y); clf_tensor_destroy(g);
  clf_tensor_destroy(g7); clf_tensor_destroy(y2); clf_tensor_destroy(xi);
}
END_TEST

/* ---- RMS norm ---- */

static void ref_rms_norm(const float *x, const float *r, const float *g, float eps, size_t rows, size_t D, float *sum,
                         float *y) {
  double *ds = malloc((rows * D + 1) * sizeof(double)), *dy = malloc((rows * D + 1) * sizeof(double));
  clf__ref_rms_norm(x, r, g, eps, rows, D, ds, dy);
  if (sum) clf__ref_to_f32(ds, rows * D, sum);
  clf__ref_to_f32(dy, rows * D, y);
  free(ds);
  free(dy);
}

/* in_place: y written over x and sum_out over residual (the decoder's
 * residual stream updated in place). */
static void check_rms(size_t B, size_t L, size_t D, int with_res, int with_sum, int in_place, float eps) {
  size_t n = B * L * D;
  float *x = th_rand(n, 11, -3.0f, 5.0f), *r = th_rand(n, 12, -1.0f, 1.0f), *g = th_rand(D, 13, 0.5f, 1.5f);
  float *ref_y = malloc(n * sizeof(float)), *ref_s = malloc(n * sizeof(float));
  ref_rms_norm(x, with_res ? r : NULL, g, eps, B * L, D, ref_s, ref_y);
  clf_tensor *tx = th_tensor(CLF_F32, 3, TH_SHAPE(B, L, D), x), *tr = th_tensor(CLF_F32, 3, TH_SHAPE(B, L, D), r);
  clf_tensor *tg = th_tensor(CLF_F32, 1, TH_SHAPE(D), g);
  clf_tensor *ts = in_place ? tr : th_empty(CLF_F32, 3, TH_SHAPE(B, L, D));
  clf_tensor *ty = in_place ? tx : th_empty(CLF_F32, 3, TH_SHAPE(B, L, D));
  TH_OK(clf_rms_norm(th_ctx, tx, with_res ? tr : NULL, tg, eps, with_sum ? ts : NULL, ty, NULL));
  float *y = th_download(ty);
  TH_CLOSE(y, ref_y, n, LN_TOL);
  if (with_sum) {
    float *s = th_download(ts);
    TH_CLOSE(s, ref_s, n, 1e-6);
    free(s);
  }
  free(y); free(x); free(r); free(g); free(ref_y); free(ref_s);
  if (!in_place) {
    clf_tensor_destroy(ts);
    clf_tensor_destroy(ty);
  }
  clf_tensor_destroy(tx); clf_tensor_destroy(tr); clf_tensor_destroy(tg);
}

START_TEST(rms_sizes_and_residual) {
  static const size_t dims[][3] = {{1, 1, 1}, {1, 7, 33}, {2, 19, 576}, {3, 5, 1000}, {1, 3, 4096}};
  for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++) {
    check_rms(dims[i][0], dims[i][1], dims[i][2], 0, 0, 0, 1e-6f);
    check_rms(dims[i][0], dims[i][1], dims[i][2], 1, 1, 0, 1e-5f);
  }
  check_rms(2, 7, 64, 1, 0, 0, 1e-6f); /* residual without sum_out */
  check_rms(2, 7, 65, 1, 1, 1, 1e-6f); /* in place: y over x, sum over residual */
  check_rms(1, 4, 64, 0, 0, 1, 0.0f);  /* eps 0 */
}
END_TEST

START_TEST(rms_both_kernels) {
  const int was_cpu = th_ctx->caps.is_cpu;
  for (int cpu = 0; cpu < 2; cpu++) {
    th_ctx->caps.is_cpu = cpu;
    check_rms(1, 1, 1, 0, 0, 0, 1e-6f);
    check_rms(2, 7, 33, 1, 1, 0, 1e-6f);
    check_rms(1, 5, 1001, 1, 0, 1, 1e-5f);
    /* The layer norm after it still centres (the rms flag is per launch). */
    check_ln(2, 7, 33, 1, 1, 1);
  }
  th_ctx->caps.is_cpu = was_cpu;
}
END_TEST

START_TEST(rms_bad_arguments) {
  clf_tensor *x = th_empty(CLF_F32, 2, TH_SHAPE(4, 8)), *y = th_empty(CLF_F32, 2, TH_SHAPE(4, 8));
  clf_tensor *g = th_empty(CLF_F32, 1, TH_SHAPE(8)), *g7 = th_empty(CLF_F32, 1, TH_SHAPE(7));
  clf_tensor *y2 = th_empty(CLF_F32, 2, TH_SHAPE(8, 4)), *xi = th_empty(CLF_I32, 2, TH_SHAPE(4, 8));
  TH_FAILS(clf_rms_norm(th_ctx, NULL, NULL, g, 1e-5f, NULL, y, NULL), CLF_E_INVALID_ARG, "clf_rms_norm: x is NULL");
  TH_FAILS(clf_rms_norm(th_ctx, x, NULL, g7, 1e-5f, NULL, y, NULL), CLF_E_SHAPE, "gamma");
  TH_FAILS(clf_rms_norm(th_ctx, x, NULL, g, 1e-5f, NULL, y2, NULL), CLF_E_SHAPE, "y has shape [8, 4]");
  TH_FAILS(clf_rms_norm(th_ctx, xi, NULL, g, 1e-5f, NULL, y, NULL), CLF_E_DTYPE, "x is i32");
  TH_FAILS(clf_rms_norm(th_ctx, x, y2, g, 1e-5f, NULL, y, NULL), CLF_E_SHAPE, "residual");
  TH_FAILS(clf_rms_norm(th_ctx, x, NULL, g, 1e-5f, y2, y, NULL), CLF_E_SHAPE, "sum_out");
  TH_FAILS(clf_rms_norm(th_ctx, x, NULL, g, NAN, NULL, y, NULL), CLF_E_INVALID_ARG, "eps");
  ck_assert_int_eq(clf_rms_norm(NULL, x, NULL, g, 1e-5f, NULL, y, NULL), CLF_E_INVALID_ARG);
  clf_tensor_destroy(x); clf_tensor_destroy(y); clf_tensor_destroy(g);
  clf_tensor_destroy(g7); clf_tensor_destroy(y2); clf_tensor_destroy(xi);
}
END_TEST

/* Layer norm and RMS norm on the context th_with_context made. */
static void norm_cases(void) {
  check_ln(1, 1, 1, 0, 1, 0);
  check_ln(2, 7, 33, 1, 1, 1);
  check_ln(1, 5, 1001, 1, 0, 0);
  check_ln(3, 4, 256, 0, 1, 1);
  check_rms(2, 7, 33, 1, 1, 0, 1e-6f);
  check_rms(1, 5, 1001, 1, 0, 1, 1e-5f);
}

/* The device class through the public option, not the caps: "gpu" runs the
 * work-group kernel, "cpu" the row-per-item one, on any device; then a
 * small GPU's work-group (32) and the embedded profile's 1 KiB of local
 * memory, which the reduction's 256 floats just fit. */
START_TEST(norm_classes_and_small_device) {
  th_with_context("gpu", NULL, norm_cases);
  th_with_context("cpu", NULL, norm_cases);
  th_with_context("gpu", "wg=32,local=1k", norm_cases);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("norm");
  TCase *tc = tcase_create("layer_norm");
  tcase_add_test(tc, ln_plain_odd_sizes);
  tcase_add_test(tc, ln_residual_post_and_pre);
  tcase_add_test(tc, norm_residual_bias);
  tcase_add_test(tc, ln_large_mean);
  tcase_add_test(tc, ln_in_place);
  tcase_add_test(tc, ln_both_kernels);
  tcase_add_test(tc, ln_subgroup_variant);
  tcase_add_test(tc, ln_bad_arguments);
  suite_add_tcase(s, tc);
  TCase *rms = tcase_create("rms_norm");
  tcase_add_test(rms, rms_sizes_and_residual);
  tcase_add_test(rms, rms_both_kernels);
  tcase_add_test(rms, rms_bad_arguments);
  tcase_add_test(rms, norm_classes_and_small_device);
  suite_add_tcase(s, rms);
  return s;
}

int main(void) { return th_run(suite()); }
