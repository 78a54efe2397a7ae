/* test_dense.c - the dense ops against CPU references in double: GEMM (every
 * transpose, alpha/beta, views, batched with batched and shared B, both of
 * CLBlast's paths), linear layers, activations, broadcast add, scale,
 * softmax, every dtype cast, empty tensors and bad arguments. */
#include <clblast_c.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "device/reference.h"
#include "harness.h"
#include "ops/ops.h" /* the sub-group variant: clf__softmax_sg */

static int under_oclgrind(void) { return getenv("CLF_TEST_UNDER_OCLGRIND") != NULL; }

/* A view of `n` elements at element `off` of a fresh tensor holding `data`
 * after `off` elements of padding (NaN, so that a kernel reading the padding
 * shows).  *base receives the underlying tensor. */
static clf_tensor *view_at(size_t off, int ndim, const size_t *shape, const float *data, clf_tensor **base) {
  size_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  float *buf = malloc((off + n + 3) * sizeof(float));
  for (size_t i = 0; i < off + n + 3; i++) buf[i] = NAN;
  memcpy(buf + off, data, n * sizeof(float));
  *base = th_tensor(CLF_F32, 1, TH_SHAPE(off + n + 3), buf);
  clf_tensor *v = NULL;
  TH_OK(clf_tensor_view(*base, off, ndim, shape, &v));
  free(buf);
  return v;
}

/* ---- GEMM ---- */

/* C = alpha op(A) op(B) + beta C0 for `batch` matrices (B shared when
 * b_stride is 0): the library's reference (device/reference.c) in f32. */
static void ref_gemm(int ta, int tb, size_t batch, size_t M, size_t N, size_t K, float alpha, const float *A,
                     const float *B, size_t b_stride, float beta, const float *C0, float *C) {
  double *d = malloc((batch * M * N + 1) * sizeof(double));
  clf__ref_gemm(ta, tb, batch, M, N, K, alpha, A, B, b_stride, beta, C0, d);
  clf__ref_to_f32(d, batch * M * N, C);
  free(d);
}

/* f32 accumulation of K products of values in [-1, 1]: the rounding error
 * grows about like sqrt(K) ulps of the result's scale; 1e-5 * sqrt(K) leaves
 * an order of magnitude of margin for any summation order. */
static double gemm_tol(size_t K) { return 1e-5 * (K > 1 ? sqrt((double)K) : 1.0); }

/* Runs one (batched when batch > 1) GEMM with operands as views at offsets
 * a_off, b_off, c_off and checks it.  shared_b: B is 2-D. */
static void check_gemm(int ta, int tb, size_t batch, size_t M, size_t N, size_t K, float alpha, float beta,
                       int shared_b, size_t off, uint32_t seed) {
  size_t zb = shared_b ? 1 : batch;
  float *A = th_rand(batch * M * K, seed, -1, 1), *B = th_rand(zb * K * N, seed + 1, -1, 1);
  float *C0 = th_rand(batch * M * N, seed + 2, -1, 1), *ref = malloc((batch * M * N + 1) * sizeof(float));
  ref_gemm(ta, tb, batch, M, N, K, alpha, A, B, shared_b ? 0 : K * N, beta, C0, ref);
  clf_tensor *ba, *bb, *bc, *ta_, *tb_, *tc;
  if (batch == 1) {
    ta_ = view_at(off, 2, ta ? TH_SHAPE(K, M) : TH_SHAPE(M, K), A, &ba);
    tb_ = view_at(off + 2, 2, tb ? TH_SHAPE(N, K) : TH_SHAPE(K, N), B, &bb);
    tc = view_at(off + 1, 2, TH_SHAPE(M, N), C0, &bc);
    TH_OK(clf_gemm(th_ctx, ta, tb, alpha, ta_, tb_, beta, tc, NULL));
  } else { /* batch as [2, batch/2] when even, to exercise several batch dims */
    size_t b0 = batch % 2 == 0 ? 2 : 1, b1 = batch / b0;
    ta_ = view_at(off, 4, ta ? TH_SHAPE(b0, b1, K, M) : TH_SHAPE(b0, b1, M, K), A, &ba);
    if (shared_b)
      tb_ = view_at(off + 2, 2, tb ? TH_SHAPE(N, K) : TH_SHAPE(K, N), B, &bb);
    else
      tb_ = view_at(off + 2, 4, tb ? TH_SHAPE(b0, b1, N, K) : TH_SHAPE(b0, b1, K, N), B, &bb);
    tc = view_at(off + 1, 4, TH_SHAPE(b0, b1, M, N), C0, &bc);
    cl_event ev = NULL;
    TH_OK(clf_gemm_batched(th_ctx, ta, tb, alpha, ta_, tb_, beta, tc, &ev));
    ck_assert_ptr_nonnull(ev);
    ck_assert_int_eq(clWaitForEvents(1, &ev), CL_SUCCESS);
    clReleaseEvent(ev);
  }
  float *got = th_download(tc);
  TH_CLOSE(got, ref, batch * M * N, gemm_tol(K));
  free(got); free(A); free(B); free(C0); free(ref);
  clf_tensor_destroy(ta_); clf_tensor_destroy(tb_); clf_tensor_destroy(tc);
  clf_tensor_destroy(ba); clf_tensor_destroy(bb); clf_tensor_destroy(bc);
}

START_TEST(gemm_transposes_odd_sizes) {
  const int big = !under_oclgrind();
  static const size_t sz[][3] = {{1, 1, 1}, {7, 5, 33}, {33, 7, 1}, {197, 64, 768}}; /* M, N, K */
  for (int t = 0; t < 4; t++)
    for (size_t s = 0; s < 4; s++) {
      size_t K = sz[s][2] == 768 && !big ? 65 : sz[s][2];
      check_gemm(t & 1, t >> 1, 1, sz[s][0], sz[s][1], K, 1.0f, 0.0f, 0, 0, (uint32_t)(10 * s + t));
    }
}
END_TEST

START_TEST(gemm_transformer_shape) {
  /* A BERT-base projection, with W as [out, in] (trans_b) and [in, out]. */
  size_t M = under_oclgrind() ? 9 : 128, D = under_oclgrind() ? 48 : 768;
  check_gemm(0, 1, 1, M, D, D, 1.0f, 0.0f, 0, 0, 1);
  check_gemm(0, 0, 1, M, D, D, 1.0f, 0.0f, 0, 0, 2);
}
END_TEST

START_TEST(gemm_alpha_beta_and_views) {
  check_gemm(0, 0, 1, 7, 33, 5, 0.5f, -2.0f, 0, 0, 3);
  check_gemm(1, 1, 1, 19, 3, 17, -1.5f, 0.25f, 0, 13, 4);
  check_gemm(0, 1, 1, 33, 65, 31, 1.0f, 1.0f, 0, 7, 5);
  /* beta 0: C is not read (it holds NaN here). */
  float nan4[4] = {NAN, NAN, NAN, NAN}, a[2] = {1, 2}, b[2] = {3, 4};
  clf_tensor *ta = th_tensor(CLF_F32, 2, TH_SHAPE(2, 1), a), *tb = th_tensor(CLF_F32, 2, TH_SHAPE(1, 2), b);
  clf_tensor *tc = th_tensor(CLF_F32, 2, TH_SHAPE(2, 2), nan4);
  TH_OK(clf_gemm(th_ctx, 0, 0, 1.0f, ta, tb, 0.0f, tc, NULL));
  float *c = th_download(tc), want[4] = {3, 4, 6, 8};
  TH_CLOSE(c, want, 4, 1e-7);
  free(c);
  clf_tensor_destroy(ta); clf_tensor_destroy(tb); clf_tensor_destroy(tc);
}
END_TEST

START_TEST(gemm_k_zero) {
  /* K = 0: C = beta C (CLBlast rejects it; a small kernel does it). */
  float c0[6] = {1, 2, 3, 4, 5, NAN};
  clf_tensor *ta = th_empty(CLF_F32, 2, TH_SHAPE(2, 0)), *tb = th_empty(CLF_F32, 2, TH_SHAPE(0, 3));
  clf_tensor *tc = th_tensor(CLF_F32, 2, TH_SHAPE(2, 3), c0);
  TH_OK(clf_gemm(th_ctx, 0, 0, 1.0f, ta, tb, 0.0f, tc, NULL));
  float *c = th_download(tc), zero[6] = {0};
  TH_CLOSE(c, zero, 6, 0.0);
  free(c);
  c0[5] = 6;
  TH_OK(clf_tensor_upload(th_ctx, tc, c0, sizeof(c0)));
  TH_OK(clf_gemm(th_ctx, 0, 0, 1.0f, ta, tb, 0.5f, tc, NULL));
  float half[6] = {0.5f, 1, 1.5f, 2, 2.5f, 3};
  c = th_download(tc);
  TH_CLOSE(c, half, 6, 0.0);
  free(c);
  clf_tensor_destroy(ta); clf_tensor_destroy(tb); clf_tensor_destroy(tc);
}
END_TEST

START_TEST(gemm_batched_all) {
  const size_t K = under_oclgrind() ? 17 : 64, L = under_oclgrind() ? 9 : 33;
  for (int t = 0; t < 4; t++) {
    check_gemm(t & 1, t >> 1, 6, 7, 5, 33, 1.0f, 0.0f, 0, 0, (uint32_t)(20 + t));   /* batched B */
    check_gemm(t & 1, t >> 1, 3, 7, 5, 33, 0.5f, 1.0f, 1, 3, (uint32_t)(30 + t));   /* shared B, views */
  }
  check_gemm(0, 1, 4, L, L, K, 0.125f, 0.0f, 0, 5, 40); /* attention scores q k^T */
  check_gemm(0, 0, 4, L, K, L, 1.0f, 0.0f, 0, 0, 41);   /* probabilities @ v */
}
END_TEST

/* CLBlast's indirect GEMM path (large m*n*k) is forced at small sizes by
 * lowering XGEMM_MIN_INDIRECT_SIZE; the teardown restores it.  CLBlast
 * 1.5.3's own GemmStridedBatched gets shared B, offsets and aligned sizes
 * wrong on that path, so this is where clf__sgemm's per-batch fallback
 * shows.  CLBlast's C API cannot read the parameter back, so the current
 * value is found by bisection: an s x s x s GEMM with A at offset 1 needs a
 * temporary buffer exactly when it takes the indirect path (s >= the value). */
static size_t saved_min_indirect;
static const char *min_indirect_name = "XGEMM_MIN_INDIRECT_SIZE";

static int clblast_indirect(size_t s) {
  cl_command_queue q = clf_context_queue(th_ctx);
  size_t t = 0;
  CLBlastStatusCode st = CLBlastSGemmTempBufferSize(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, s,
                                                    s, s, 1, s, 0, s, 0, s, &q, &t);
  ck_assert_int_eq(st, CLBlastSuccess);
  return t > 0;
}

static void indirect_setup(void) {
  size_t lo = 0, hi = (size_t)1 << 20; /* invariant: indirect(hi), !indirect(lo) */
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (clblast_indirect(mid)) hi = mid; else lo = mid;
  }
  saved_min_indirect = hi;
  size_t v = 8;
  ck_assert_int_eq(CLBlastOverrideParameters(clf_context_device(th_ctx)->device, "GemmRoutine",
                                             CLBlastPrecisionSingle, 1, &min_indirect_name, &v), CLBlastSuccess);
  ck_assert(clblast_indirect(8) && !clblast_indirect(7));
}

static void indirect_teardown(void) {
  CLBlastOverrideParameters(clf_context_device(th_ctx)->device, "GemmRoutine", CLBlastPrecisionSingle, 1,
                            &min_indirect_name, &saved_min_indirect);
  ck_assert(clblast_indirect(saved_min_indirect) && !clblast_indirect(saved_min_indirect - 1));
}

START_TEST(gemm_batched_indirect_path) {
  for (int t = 0; t < 4; t++) {
    check_gemm(t & 1, t >> 1, 3, 32, 32, 32, 1.0f, 0.0f, 1, 0, (uint32_t)(50 + t)); /* shared, aligned */
    check_gemm(t & 1, t >> 1, 2, 32, 32, 32, 1.0f, 0.5f, 0, 3, (uint32_t)(60 + t)); /* offsets */
    check_gemm(t & 1, t >> 1, 3, 7, 33, 5, 1.0f, 0.0f, 1, 2, (uint32_t)(70 + t));   /* odd, shared */
  }
  check_gemm(0, 1, 1, 33, 32, 64, 1.0f, 0.0f, 0, 1, 80); /* single GEMM with the scratch temp */
}
END_TEST

START_TEST(gemm_bad_arguments) {
  clf_tensor *a = th_empty(CLF_F32, 2, TH_SHAPE(3, 4)), *b = th_empty(CLF_F32, 2, TH_SHAPE(4, 5));
  clf_tensor *c = th_empty(CLF_F32, 2, TH_SHAPE(3, 5)), *c2 = th_empty(CLF_F32, 2, TH_SHAPE(5, 3));
  clf_tensor *c6 = th_empty(CLF_F32, 2, TH_SHAPE(3, 6)), *ai = th_empty(CLF_I32, 2, TH_SHAPE(3, 4));
  clf_tensor *a3 = th_empty(CLF_F32, 3, TH_SHAPE(2, 3, 4)), *b3 = th_empty(CLF_F32, 3, TH_SHAPE(2, 4, 5));
  clf_tensor *c3 = th_empty(CLF_F32, 3, TH_SHAPE(2, 3, 5)), *c3x = th_empty(CLF_F32, 3, TH_SHAPE(3, 3, 5));
  clf_tensor *b3x = th_empty(CLF_F32, 3, TH_SHAPE(3, 4, 5)), *b4 = th_empty(CLF_F32, 4, TH_SHAPE(1, 2, 4, 5));
  TH_FAILS(clf_gemm(th_ctx, 0, 0, 1, NULL, b, 0, c, NULL), CLF_E_INVALID_ARG, "a is NULL");
  TH_FAILS(clf_gemm(th_ctx, 0, 0, 1, a, NULL, 0, c, NULL), CLF_E_INVALID_ARG, "b is NULL");
  TH_FAILS(clf_gemm(th_ctx, 0, 0, 1, a, b, 0, NULL, NULL), CLF_E_INVALID_ARG, "c is NULL");
  TH_FAILS(clf_gemm(th_ctx, 0, 0, 1, ai, b, 0, c, NULL), CLF_E_DTYPE, "a is i32");
  TH_FAILS(clf_gemm(th_ctx, 0, 0, 1, a3, b, 0, c, NULL), CLF_E_SHAPE, "a has shape [2, 3, 4]");
  TH_FAILS(clf_gemm(th_ctx, 1, 0, 1, a, b, 0, c, NULL), CLF_E_SHAPE, "K disagrees");
  TH_FAILS(clf_gemm(th_ctx, 0, 1, 1, a, b, 0, c, NULL), CLF_E_SHAPE, "K disagrees");
  TH_FAILS(clf_gemm(th_ctx, 0, 0, 1, a, b, 0, c2, NULL), CLF_E_SHAPE, "M disagrees");
  TH_FAILS(clf_gemm(th_ctx, 0, 0, 1, a, b, 0, c6, NULL), CLF_E_SHAPE, "N disagrees");
  ck_assert_int_eq(clf_gemm(NULL, 0, 0, 1, a, b, 0, c, NULL), CLF_E_INVALID_ARG);
  TH_FAILS(clf_gemm_batched(th_ctx, 0, 0, 1, a, b, 0, c, NULL), CLF_E_SHAPE, "a has shape [3, 4]");
  TH_FAILS(clf_gemm_batched(th_ctx, 0, 0, 1, a3, b3, 0, c, NULL), CLF_E_SHAPE, "c has shape [3, 5]");
  TH_FAILS(clf_gemm_batched(th_ctx, 0, 0, 1, a3, b3, 0, c3x, NULL), CLF_E_SHAPE, "batch dim 0");
  TH_FAILS(clf_gemm_batched(th_ctx, 0, 0, 1, a3, b3x, 0, c3, NULL), CLF_E_SHAPE, "b has shape [3, 4, 5]");
  TH_FAILS(clf_gemm_batched(th_ctx, 0, 0, 1, a3, b4, 0, c3, NULL), CLF_E_SHAPE, "expected 2 dims (shared)");
  TH_FAILS(clf_gemm_batched(th_ctx, 0, 1, 1, a3, b3, 0, c3, NULL), CLF_E_SHAPE, "K disagrees");
  TH_FAILS(clf_gemm_batched(th_ctx, 0, 0, 1, a3, NULL, 0, c3, NULL), CLF_E_INVALID_ARG, "b is NULL");
  clf_tensor *list[] = {a, b, c, c2, c6, ai, a3, b3, c3, c3x, b3x, b4};
  for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++) clf_tensor_destroy(list[i]);
}
END_TEST

/* ---- activations, bias_act, linear ---- */

static double ref_act(double x, clf_activation act) { return clf__ref_act(act, x); }

START_TEST(activation_names) {
  static const struct {
    const char *name;
    clf_activation act;
  } ok[] = {{"relu", CLF_ACT_RELU},       {"gelu", CLF_ACT_GELU},
            {"gelu_new", CLF_ACT_GELU_TANH}, {"gelu_pytorch_tanh", CLF_ACT_GELU_TANH},
            {"gelu_fast", CLF_ACT_GELU_TANH}, {"silu", CLF_ACT_SILU}, {"swish", CLF_ACT_SILU},
            {"tanh", CLF_ACT_TANH}};
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    clf_activation a = CLF_ACT_NONE;
    ck_assert_int_eq(clf_activation_from_name(ok[i].name, &a), CLF_OK);
    ck_assert_int_eq(a, ok[i].act);
  }
  static const char *bad[] = {"quick_gelu", "GELU", "", "Tanh", "gelu_10"};
  clf_activation a;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    ck_assert_int_eq(clf_activation_from_name(bad[i], &a), CLF_E_UNSUPPORTED);
    char want[64];
    snprintf(want, sizeof(want), "\"%s\"", bad[i]);
    ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), want));
  }
  ck_assert_int_eq(clf_activation_from_name(NULL, &a), CLF_E_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "(null)"));
  ck_assert_int_eq(clf_activation_from_name("relu", NULL), CLF_E_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "out is NULL"));
}
END_TEST

/* One activation of an f32 value after one f32 add: exp/tanh in OpenCL and
 * the kernels' erf (4e-7, common.cl) are within a few ulps, so 2e-6 of the
 * output scale (|x| <= 12). */
#define ACT_TOL 2e-6

/* The pointwise bound near zero: 1e-5 of the value, except that exact GELU
 * is 0.5 x (1 + erf(x / sqrt2)) as torch computes it, whose erf error of
 * 4e-7 leaves 2e-7 |x| absolute where 1 + erf cancels (x < -3). */
static double act_point_tol(clf_activation act, double x, double ref) {
  return 1e-5 * fabs(ref) + 1e-7 + (act == CLF_ACT_GELU ? 2.5e-7 * fabs(x) : 0.0);
}

static void check_bias_act(size_t rows, size_t D, int with_bias, clf_activation act, int in_place, uint32_t seed) {
  size_t n = rows * D;
  float *x = th_rand(n, seed, -12.0f, 12.0f), *b = th_rand(D, seed + 1, -1.0f, 1.0f);
  if (n > 3) { x[0] = 0.0f; x[1] = -30.0f; x[2] = 30.0f; x[3] = -1e-3f; }
  float *ref = malloc((n + 1) * sizeof(float));
  for (size_t i = 0; i < n; i++) ref[i] = (float)ref_act((double)(x[i] + (with_bias ? b[i % D] : 0.0f)), act);
  clf_tensor *tx = th_tensor(CLF_F32, 2, TH_SHAPE(rows, D), x), *tb = th_tensor(CLF_F32, 1, TH_SHAPE(D), b);
  clf_tensor *ty = in_place ? tx : th_empty(CLF_F32, 2, TH_SHAPE(rows, D));
  TH_OK(clf_bias_act(th_ctx, tx, with_bias ? tb : NULL, act, ty, NULL));
  float *y = th_download(ty);
  TH_CLOSE(y, ref, n, ACT_TOL);
  /* and pointwise near zero, where the scale-relative check is lenient */
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(fabs(y[i] - ref[i]) <= act_point_tol(act, x[i] + (with_bias ? b[i % D] : 0.0f), ref[i]),
                  "act %d at %zu: %g vs %g", (int)act, i, y[i], ref[i]);
  free(y); free(x); free(b); free(ref);
  if (!in_place) clf_tensor_destroy(ty);
  clf_tensor_destroy(tx); clf_tensor_destroy(tb);
}

START_TEST(bias_act_each_activation) {
  for (int a = CLF_ACT_NONE; a <= CLF_ACT_TANH; a++) {
    check_bias_act(3, 37, 1, (clf_activation)a, 0, (uint32_t)a);
    check_bias_act(1, 197, 0, (clf_activation)a, 0, (uint32_t)(a + 10));
    check_bias_act(5, 64, 1, (clf_activation)a, 1, (uint32_t)(a + 20));
    check_bias_act(7, 1, 1, (clf_activation)a, 1, (uint32_t)(a + 30));
  }
}
END_TEST

/* clf_glu on gate_up [rows, 2F] ([gate | up]) against act(gate) * up in
 * double: one activation and one product, so ACT_TOL of the scale (|gate|
 * <= 12, |up| <= 2), and pointwise near zero.  A view at an odd offset
 * exercises the scalar tail of the kernel. */
static void check_glu(size_t rows, size_t F, clf_activation act, size_t offset, uint32_t seed) {
  const size_t n = rows * F, ng = offset + rows * 2 * F;
  float *g = th_rand(ng, seed, -12.0f, 12.0f);
  for (size_t r = 0; r < rows; r++)
    for (size_t f = 0; f < F; f++) g[offset + r * 2 * F + F + f] /= 6.0f; /* up in [-2, 2) */
  if (n > 2) { g[offset] = 0.0f; g[offset + 1] = -30.0f; g[offset + 2 % F] = 30.0f; }
  float *ref = malloc((n + 1) * sizeof(float));
  for (size_t r = 0; r < rows; r++)
    for (size_t f = 0; f < F; f++)
      ref[r * F + f] = (float)(ref_act(g[offset + r * 2 * F + f], act) * g[offset + r * 2 * F + F + f]);
  clf_tensor *base = th_tensor(CLF_F32, 1, TH_SHAPE(ng), g), *tg = NULL;
  TH_OK(clf_tensor_view(base, offset, 3, TH_SHAPE(1, rows, 2 * F), &tg));
  clf_tensor *ty = th_empty(CLF_F32, 3, TH_SHAPE(1, rows, F));
  TH_OK(clf_glu(th_ctx, tg, act, ty, NULL));
  float *y = th_download(ty);
  TH_CLOSE(y, ref, n, ACT_TOL);
  for (size_t r = 0; r < rows; r++)
    for (size_t f = 0; f < F; f++) {
      const size_t i = r * F + f, gi = offset + r * 2 * F + f;
      const double up = fabs(g[gi + F]);
      ck_assert_msg(fabs(y[i] - ref[i]) <= act_point_tol(act, g[gi], ref[i] / (up > 0 ? up : 1)) * (up > 1 ? up : 1),
                    "glu act %d at %zu: %g vs %g", (int)act, i, y[i], ref[i]);
    }
  free(y); free(g); free(ref);
  clf_tensor_destroy(ty); clf_tensor_destroy(tg); clf_tensor_destroy(base);
}

START_TEST(glu_each_activation) {
  for (int a = CLF_ACT_NONE; a <= CLF_ACT_TANH; a++) {
    check_glu(3, 64, (clf_activation)a, 0, (uint32_t)a);      /* vector path */
    check_glu(5, 37, (clf_activation)a, 3, (uint32_t)a + 10); /* rows split the 4s */
    check_glu(1, 1, (clf_activation)a, 1, (uint32_t)a + 20);
  }
  check_glu(7, 1536, CLF_ACT_SILU, 0, 99); /* SmolLM's intermediate size */
}
END_TEST

START_TEST(glu_bad_arguments) {
  clf_tensor *g = th_empty(CLF_F32, 2, TH_SHAPE(3, 8)), *y = th_empty(CLF_F32, 2, TH_SHAPE(3, 4));
  clf_tensor *g7 = th_empty(CLF_F32, 2, TH_SHAPE(3, 7)), *y8 = th_empty(CLF_F32, 2, TH_SHAPE(3, 8));
  clf_tensor *y3 = th_empty(CLF_F32, 3, TH_SHAPE(1, 3, 4)), *gi = th_empty(CLF_I32, 2, TH_SHAPE(3, 8));
  clf_tensor *y0 = th_empty(CLF_F32, 2, TH_SHAPE(0, 4)), *g0 = th_empty(CLF_F32, 2, TH_SHAPE(0, 8));
  TH_OK(clf_glu(th_ctx, g, CLF_ACT_SILU, y, NULL));
  TH_OK(clf_glu(th_ctx, g0, CLF_ACT_SILU, y0, NULL));
  TH_FAILS(clf_glu(th_ctx, NULL, CLF_ACT_SILU, y, NULL), CLF_E_INVALID_ARG, "gate_up is NULL");
  TH_FAILS(clf_glu(th_ctx, g7, CLF_ACT_SILU, y, NULL), CLF_E_SHAPE, "last dim 7 must be even");
  TH_FAILS(clf_glu(th_ctx, g, CLF_ACT_SILU, y8, NULL), CLF_E_SHAPE, "y has shape [3, 8]");
  TH_FAILS(clf_glu(th_ctx, g, CLF_ACT_SILU, y3, NULL), CLF_E_SHAPE, "y");
  TH_FAILS(clf_glu(th_ctx, gi, CLF_ACT_SILU, y, NULL), CLF_E_DTYPE, "gate_up is i32");
  TH_FAILS(clf_glu(th_ctx, g, (clf_activation)42, y, NULL), CLF_E_INVALID_ARG, "act is 42");
  clf_tensor_destroy(g); clf_tensor_destroy(y); clf_tensor_destroy(g7); clf_tensor_destroy(y8);
  clf_tensor_destroy(y3); clf_tensor_destroy(gi); clf_tensor_destroy(y0); clf_tensor_destroy(g0);
}
END_TEST

START_TEST(linear_layouts_bias_activations) {
  const size_t B = 2, L = 7, in = 33, out = 17;
  float *x = th_rand(B * L * in, 1, -1, 1), *w = th_rand(out * in, 2, -1, 1), *bias = th_rand(out, 3, -1, 1);
  float *wt = malloc(in * out * sizeof(float)), *ref = malloc(B * L * out * sizeof(float));
  for (size_t o = 0; o < out; o++)
    for (size_t i = 0; i < in; i++) wt[i * out + o] = w[o * in + i];
  clf_tensor *tx = th_tensor(CLF_F32, 3, TH_SHAPE(B, L, in), x), *tb = th_tensor(CLF_F32, 1, TH_SHAPE(out), bias);
  clf_tensor *tw[2] = {th_tensor(CLF_F32, 2, TH_SHAPE(out, in), w), th_tensor(CLF_F32, 2, TH_SHAPE(in, out), wt)};
  /* y is uploaded once (zeros) although the GEMM overwrites it: Oclgrind
   * 21.10's uninitialised-value checker can keep a stale, smaller shadow for
   * a reused buffer id that only kernels write, and then flags bias_act's
   * reads of the GEMM's output. */
  float *zeros = calloc(B * L * out, sizeof(float));
  clf_tensor *ty = th_tensor(CLF_F32, 3, TH_SHAPE(B, L, out), zeros);
  free(zeros);
  for (int layout = 0; layout < 2; layout++)
    for (int with_bias = 0; with_bias < 2; with_bias++)
      for (int a = CLF_ACT_NONE; a <= CLF_ACT_TANH; a++) {
        for (size_t r = 0; r < B * L; r++)
          for (size_t o = 0; o < out; o++) {
            double acc = with_bias ? bias[o] : 0.0;
            for (size_t i = 0; i < in; i++) acc += (double)x[r * in + i] * w[o * in + i];
            ref[r * out + o] = (float)ref_act(acc, (clf_activation)a);
          }
        cl_event ev = NULL;
        TH_OK(clf_linear(th_ctx, tx, tw[layout], (clf_weight_layout)layout, with_bias ? tb : NULL,
                         (clf_activation)a, ty, &ev));
        ck_assert_ptr_nonnull(ev);
        clReleaseEvent(ev);
        float *y = th_download(ty);
        TH_CLOSE(y, ref, B * L * out, gemm_tol(in) + ACT_TOL);
        free(y);
      }
  /* 1-D x: one row. */
  clf_tensor *x1 = th_tensor(CLF_F32, 1, TH_SHAPE(in), x), *y1 = th_tensor(CLF_F32, 1, TH_SHAPE(out), bias);
  TH_OK(clf_linear(th_ctx, x1, tw[1], CLF_WEIGHT_IN_OUT, tb, CLF_ACT_GELU, y1, NULL));
  for (size_t o = 0; o < out; o++) {
    double acc = bias[o];
    for (size_t i = 0; i < in; i++) acc += (double)x[i] * w[o * in + i];
    ref[o] = (float)ref_act(acc, CLF_ACT_GELU);
  }
  float *y = th_download(y1);
  TH_CLOSE(y, ref, out, gemm_tol(in) + ACT_TOL);
  free(y); free(x); free(w); free(wt); free(bias); free(ref);
  clf_tensor_destroy(tx); clf_tensor_destroy(tb); clf_tensor_destroy(tw[0]); clf_tensor_destroy(tw[1]);
  clf_tensor_destroy(ty); clf_tensor_destroy(x1); clf_tensor_destroy(y1);
}
END_TEST

START_TEST(linear_bias_act_bad_arguments) {
  clf_tensor *x = th_empty(CLF_F32, 3, TH_SHAPE(2, 3, 4)), *w = th_empty(CLF_F32, 2, TH_SHAPE(5, 4));
  clf_tensor *y = th_empty(CLF_F32, 3, TH_SHAPE(2, 3, 5)), *b = th_empty(CLF_F32, 1, TH_SHAPE(5));
  clf_tensor *b4 = th_empty(CLF_F32, 1, TH_SHAPE(4)), *y2 = th_empty(CLF_F32, 3, TH_SHAPE(2, 4, 5));
  clf_tensor *xi = th_empty(CLF_I64, 3, TH_SHAPE(2, 3, 4)), *y2d = th_empty(CLF_F32, 2, TH_SHAPE(6, 5));
  TH_FAILS(clf_linear(th_ctx, NULL, w, 0, b, 0, y, NULL), CLF_E_INVALID_ARG, "x is NULL");
  TH_FAILS(clf_linear(th_ctx, x, NULL, 0, b, 0, y, NULL), CLF_E_INVALID_ARG, "w is NULL");
  TH_FAILS(clf_linear(th_ctx, x, w, 0, b, 0, NULL, NULL), CLF_E_INVALID_ARG, "y is NULL");
  TH_FAILS(clf_linear(th_ctx, xi, w, 0, b, 0, y, NULL), CLF_E_DTYPE, "x is i64");
  TH_FAILS(clf_linear(th_ctx, x, w, CLF_WEIGHT_IN_OUT, b, 0, y, NULL), CLF_E_SHAPE, "in features disagree");
  TH_FAILS(clf_linear(th_ctx, x, w, (clf_weight_layout)7, b, 0, y, NULL), CLF_E_INVALID_ARG, "layout");
  TH_FAILS(clf_linear(th_ctx, x, w, 0, b4, 0, y, NULL), CLF_E_SHAPE, "bias has shape [4]");
  TH_FAILS(clf_linear(th_ctx, x, w, 0, b, 0, y2, NULL), CLF_E_SHAPE, "y has shape [2, 4, 5]");
  TH_FAILS(clf_linear(th_ctx, x, w, 0, b, 0, y2d, NULL), CLF_E_SHAPE, "y has shape [6, 5]");
  TH_FAILS(clf_linear(th_ctx, x, w, 0, b, (clf_activation)9, y, NULL), CLF_E_INVALID_ARG, "act");
  ck_assert_int_eq(clf_linear(NULL, x, w, 0, b, 0, y, NULL), CLF_E_INVALID_ARG);
  TH_FAILS(clf_bias_act(th_ctx, NULL, b4, 0, x, NULL), CLF_E_INVALID_ARG, "x is NULL");
  TH_FAILS(clf_bias_act(th_ctx, x, b, 0, x, NULL), CLF_E_SHAPE, "bias has shape [5]");
  TH_FAILS(clf_bias_act(th_ctx, x, b4, 0, y, NULL), CLF_E_SHAPE, "y has shape [2, 3, 5]");
  TH_FAILS(clf_bias_act(th_ctx, xi, b4, 0, x, NULL), CLF_E_DTYPE, "x is i64");
  TH_FAILS(clf_bias_act(th_ctx, x, b4, (clf_activation)-1, x, NULL), CLF_E_INVALID_ARG, "act");
  ck_assert_int_eq(clf_bias_act(NULL, x, b4, 0, x, NULL), CLF_E_INVALID_ARG);
  clf_tensor *list[] = {x, w, y, b, b4, y2, xi, y2d};
  for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++) clf_tensor_destroy(list[i]);
}
END_TEST

/* ---- add, scale ---- */

/* y = a + b broadcast: the library's reference (device/reference.c) in f32. */
static void ref_add(const float *a, int na, const size_t *as, const float *b, int nb, const size_t *bs, float *y) {
  size_t n = 1;
  for (int i = 0; i < na; i++) n *= as[i];
  double *d = malloc((n + 1) * sizeof(double));
  clf__ref_add(a, na, as, b, nb, bs, d);
  clf__ref_to_f32(d, n, y);
  free(d);
}

static void check_add(int na, const size_t *as, int nb, const size_t *bs, int in_place, uint32_t seed) {
  size_t n = 1, m = 1;
  for (int i = 0; i < na; i++) n *= as[i];
  for (int i = 0; i < nb; i++) m *= bs[i];
  float *a = th_rand(n, seed, -2, 2), *b = th_rand(m, seed + 1, -2, 2), *ref = malloc((n + 1) * sizeof(float));
  ref_add(a, na, as, b, nb, bs, ref);
  clf_tensor *ta = th_tensor(CLF_F32, na, as, a), *tb = th_tensor(CLF_F32, nb, bs, b);
  clf_tensor *ty = in_place ? ta : th_empty(CLF_F32, na, as);
  TH_OK(clf_add(th_ctx, ta, tb, ty, NULL));
  float *y = th_download(ty);
  TH_CLOSE(y, ref, n, 1e-7); /* one f32 add: exactly the rounded double sum */
  free(y); free(a); free(b); free(ref);
  if (!in_place) clf_tensor_destroy(ty);
  clf_tensor_destroy(ta); clf_tensor_destroy(tb);
}

START_TEST(add_broadcast_patterns) {
  size_t H = under_oclgrind() ? 33 : 197, D = under_oclgrind() ? 65 : 768;
  check_add(3, TH_SHAPE(2, 7, 33), 3, TH_SHAPE(2, 7, 33), 0, 1);          /* same shape */
  check_add(3, TH_SHAPE(2, 7, 33), 3, TH_SHAPE(2, 7, 33), 1, 2);          /* same, in place */
  check_add(2, TH_SHAPE(H, D), 1, TH_SHAPE(D), 0, 3);                     /* last dim */
  check_add(3, TH_SHAPE(2, 7, 33), 1, TH_SHAPE(33), 1, 4);                /* last dim, in place */
  check_add(4, TH_SHAPE(3, 4, 5, 5), 4, TH_SHAPE(3, 1, 5, 5), 0, 5);      /* [nW,1,N,N] */
  check_add(4, TH_SHAPE(3, 4, 7, 7), 4, TH_SHAPE(1, 4, 7, 7), 1, 6);      /* [1,H,N,N], in place */
  check_add(5, TH_SHAPE(2, 3, 4, 5, 5), 5, TH_SHAPE(1, 3, 1, 5, 5), 0, 7); /* Swin's shifted mask */
  check_add(3, TH_SHAPE(2, 7, 33), 1, TH_SHAPE(1), 0, 8);                 /* scalar-like */
  check_add(3, TH_SHAPE(2, 7, 33), 3, TH_SHAPE(1, 1, 1), 1, 9);
  check_add(3, TH_SHAPE(4, 5, 6), 3, TH_SHAPE(4, 1, 6), 0, 10);           /* middle broadcast */
  check_add(3, TH_SHAPE(4, 5, 6), 2, TH_SHAPE(5, 1), 0, 11);              /* column, last dim 1 */
  check_add(4, TH_SHAPE(1, 3, 1, 5), 3, TH_SHAPE(3, 1, 1), 0, 12);        /* size-1 dims of a */
  check_add(6, TH_SHAPE(2, 3, 2, 3, 2, 3), 6, TH_SHAPE(2, 1, 2, 1, 2, 1), 0, 13); /* 6 alternating runs */
  check_add(6, TH_SHAPE(2, 3, 2, 3, 2, 3), 5, TH_SHAPE(1, 2, 1, 2, 1), 0, 14);
  check_add(1, TH_SHAPE(1), 1, TH_SHAPE(1), 0, 15);                       /* one element */
  check_add(1, TH_SHAPE(7), 1, TH_SHAPE(1), 1, 16);
}
END_TEST

START_TEST(scale_odd_sizes) {
  static const size_t ns[] = {1, 3, 7, 33, 197, 4099};
  for (size_t s = 0; s < sizeof(ns) / sizeof(ns[0]); s++)
    for (int in_place = 0; in_place < 2; in_place++) {
      size_t n = ns[s];
      float alpha = in_place ? -0.37f : 3.0f, *x = th_rand(n, (uint32_t)s, -5, 5), *ref = malloc(n * sizeof(float));
      for (size_t i = 0; i < n; i++) ref[i] = (float)((double)alpha * x[i]);
      clf_tensor *tx = th_tensor(CLF_F32, 1, TH_SHAPE(n), x), *ty = in_place ? tx : th_empty(CLF_F32, 1, TH_SHAPE(n));
      TH_OK(clf_scale(th_ctx, tx, alpha, ty, NULL));
      float *y = th_download(ty);
      TH_CLOSE(y, ref, n, 1e-7); /* one f32 multiply */
      free(y); free(x); free(ref);
      if (!in_place) clf_tensor_destroy(ty);
      clf_tensor_destroy(tx);
    }
}
END_TEST

START_TEST(add_scale_bad_arguments) {
  clf_tensor *a = th_empty(CLF_F32, 3, TH_SHAPE(2, 3, 4)), *b = th_empty(CLF_F32, 2, TH_SHAPE(2, 4));
  clf_tensor *b4 = th_empty(CLF_F32, 4, TH_SHAPE(1, 2, 3, 4)), *y = th_empty(CLF_F32, 3, TH_SHAPE(2, 4, 3));
  clf_tensor *ai = th_empty(CLF_I32, 3, TH_SHAPE(2, 3, 4)), *b34 = th_empty(CLF_F32, 2, TH_SHAPE(3, 4));
  TH_FAILS(clf_add(th_ctx, a, b, a, NULL), CLF_E_SHAPE, "dim -2 is 2, must be 1 or 3");
  TH_FAILS(clf_add(th_ctx, a, b4, a, NULL), CLF_E_SHAPE, "more dims than a");
  TH_FAILS(clf_add(th_ctx, a, b34, y, NULL), CLF_E_SHAPE, "y has shape [2, 4, 3]");
  TH_FAILS(clf_add(th_ctx, ai, b34, a, NULL), CLF_E_DTYPE, "a is i32");
  TH_FAILS(clf_add(th_ctx, a, ai, a, NULL), CLF_E_DTYPE, "b is i32");
  TH_FAILS(clf_add(th_ctx, a, NULL, a, NULL), CLF_E_INVALID_ARG, "b is NULL");
  TH_FAILS(clf_add(th_ctx, a, b34, NULL, NULL), CLF_E_INVALID_ARG, "y is NULL");
  ck_assert_int_eq(clf_add(NULL, a, b34, a, NULL), CLF_E_INVALID_ARG);
  TH_FAILS(clf_scale(th_ctx, a, 2.0f, y, NULL), CLF_E_SHAPE, "y has shape [2, 4, 3]");
  TH_FAILS(clf_scale(th_ctx, NULL, 2.0f, y, NULL), CLF_E_INVALID_ARG, "x is NULL");
  TH_FAILS(clf_scale(th_ctx, ai, 2.0f, a, NULL), CLF_E_DTYPE, "x is i32");
  ck_assert_int_eq(clf_scale(NULL, a, 2.0f, a, NULL), CLF_E_INVALID_ARG);
  clf_tensor *list[] = {a, b, b4, y, ai, b34};
  for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++) clf_tensor_destroy(list[i]);
}
END_TEST

/* ---- softmax ---- */

/* The library's reference (device/reference.c) in f32. */
static void ref_softmax(const float *x, size_t rows, size_t D, float scale, float *y) {
  double *d = malloc((rows * D + 1) * sizeof(double));
  clf__ref_softmax(x, rows, D, scale, d);
  clf__ref_to_f32(d, rows * D, y);
  free(d);
}

/* Outputs are in [0, 1]: f32 exp (a few ulps) and a sum of D terms
 * accumulated per work-item and then as a tree: 1e-6 absolute covers
 * D up to a few thousand. */
#define SOFTMAX_TOL 1e-6

static void check_softmax(size_t rows, size_t D, float lo, float hi, float scale, int masked, int in_place,
                          uint32_t seed) {
  size_t n = rows * D;
  float *x = th_rand(n, seed, lo, hi), *ref = malloc((n + 1) * sizeof(float));
  if (masked) {
    for (size_t i = 0; i < n; i += 3) x[i] = -INFINITY;        /* scattered -inf */
    for (size_t d = 0; d < D; d++) x[(rows - 1) * D + d] = -INFINITY; /* a fully masked row */
  }
  ref_softmax(x, rows, D, scale, ref);
  clf_tensor *tx = th_tensor(CLF_F32, 2, TH_SHAPE(rows, D), x);
  clf_tensor *ty = in_place ? tx : th_empty(CLF_F32, 2, TH_SHAPE(rows, D));
  TH_OK(clf_softmax(th_ctx, tx, scale, ty, NULL));
  float *y = th_download(ty);
  TH_CLOSE(y, ref, n, SOFTMAX_TOL);
  if (masked)
    for (size_t d = 0; d < D; d++) ck_assert(y[(rows - 1) * D + d] == 0.0f);
  free(y); free(x); free(ref);
  if (!in_place) clf_tensor_destroy(ty);
  clf_tensor_destroy(tx);
}

START_TEST(softmax_rows_all_cases) {
  /* Row lengths for each of the three work-group sizes (64, 128, 256). */
  static const size_t Ds[] = {1, 7, 33, 197, 1000, 4097};
  for (size_t i = 0; i < sizeof(Ds) / sizeof(Ds[0]); i++) {
    check_softmax(3, Ds[i], -4, 4, 1.0f, 0, 0, (uint32_t)i);
    check_softmax(2, Ds[i], -4, 4, 0.3f, 1, 0, (uint32_t)(i + 10));
    check_softmax(3, Ds[i], -1e4f, 1e4f, 1.0f, 0, 1, (uint32_t)(i + 20)); /* large magnitudes, in place */
    check_softmax(2, Ds[i], -1e4f, 1e4f, 0.125f, 1, 1, (uint32_t)(i + 30));
  }
  check_softmax(197, 197, -8, 8, 0.125f, 0, 0, 40); /* attention-like */
}
END_TEST

/* ---- variants that need a device feature (sub-groups, fp16) ----
 * Run on th_profiled_begin's context; a variant is forced on by a passing
 * verdict recorded as clf_validate records one (the comparison with the CPU
 * reference is then this test's own). */

/* softmax_rows with its reductions through sub-groups where the device
 * has them (never before it passed validation), the plain one where it has
 * none or CLFORMER_LIMITS turns them off. */
static void softmax_subgroups(const char *limits) {
  th_profiled_begin(limits);
  const int sg = th_ctx->caps.has_subgroups;
  ck_assert_int_eq(clf__softmax_sg(th_ctx), 0); /* not validated: not used */
  if (sg) ck_assert(clf__verdict_record(th_ctx, CLF__SOFTMAX_SG, 1, 0, 0));
  else fprintf(stderr, "note: no sub-groups (%s): softmax_rows runs\n", limits ? limits : "this device");
  ck_assert_int_eq(clf__softmax_sg(th_ctx), sg);
  static const size_t Ds[] = {1, 7, 33, 197, 1000, 4097};
  for (size_t i = 0; i < sizeof(Ds) / sizeof(Ds[0]); i++) {
    check_softmax(3, Ds[i], -4, 4, 1.0f, 0, 0, (uint32_t)i);
    check_softmax(2, Ds[i], -1e4f, 1e4f, 0.125f, 1, 1, (uint32_t)(i + 30));
  }
  th_profiled_expect(sg ? "softmax_rows_sg" : "softmax_rows", sg ? "softmax_rows" : "softmax_rows_sg", 1);
}

START_TEST(softmax_subgroup_variant) {
  softmax_subgroups(NULL);
  softmax_subgroups("subgroups=0");
}
END_TEST

START_TEST(softmax_bad_arguments) {
  clf_tensor *x = th_empty(CLF_F32, 2, TH_SHAPE(3, 4)), *y = th_empty(CLF_F32, 2, TH_SHAPE(4, 3));
  clf_tensor *xi = th_empty(CLF_I32, 2, TH_SHAPE(3, 4));
  TH_FAILS(clf_softmax(th_ctx, NULL, 1.0f, x, NULL), CLF_E_INVALID_ARG, "x is NULL");
  TH_FAILS(clf_softmax(th_ctx, x, 1.0f, NULL, NULL), CLF_E_INVALID_ARG, "y is NULL");
  TH_FAILS(clf_softmax(th_ctx, x, 1.0f, y, NULL), CLF_E_SHAPE, "y has shape [4, 3]");
  TH_FAILS(clf_softmax(th_ctx, xi, 1.0f, x, NULL), CLF_E_DTYPE, "x is i32");
  ck_assert_int_eq(clf_softmax(NULL, x, 1.0f, x, NULL), CLF_E_INVALID_ARG);
  clf_tensor_destroy(x); clf_tensor_destroy(y); clf_tensor_destroy(xi);
}
END_TEST

/* ---- cast ---- */

/* IEEE half bits of v, rounded to nearest even (the reference encoder). */
static uint16_t ref_half_bits(double v) {
  uint16_t sign = signbit(v) ? 0x8000 : 0;
  if (isnan(v)) return 0x7e00;
  double a = fabs(v);
  if (isinf(a)) return sign | 0x7c00;
  if (a < ldexp(1.0, -14)) return sign | (uint16_t)nearbyint(a / ldexp(1.0, -24)); /* subnormal (or 0x0400) */
  int e;
  frexp(a, &e);
  int ex = e - 1; /* a in [2^ex, 2^(ex+1)) */
  double r = nearbyint(a / ldexp(1.0, ex - 10)); /* in [1024, 2048] */
  if (r == 2048) { r = 1024; ex++; }
  if (ex > 15) return sign | 0x7c00;
  return sign | (uint16_t)((ex + 15) << 10) | (uint16_t)(r - 1024);
}

static double ref_half_value(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

/* Float to integer: truncation toward zero, saturated, NaN -> 0. */
static int64_t ref_f2i(double v, int64_t lo, int64_t hi) {
  if (isnan(v)) return 0;
  if (v >= (double)hi) return hi; /* (double)INT64_MAX rounds up to 2^63 */
  if (v <= (double)lo) return lo;
  return (int64_t)trunc(v);
}

/* Values of `dt` (stored as double, int64 for i64) and their bits. */
#define NCAST 24
static void cast_inputs(clf_dtype dt, size_t n, void *out, uint32_t seed) {
  static const float f32v[NCAST] = {0.0f, -0.0f, 1.5f, -2.7f, 2.7f, -0.5f, 65504.0f, 65519.0f, 65520.0f, 1e-8f,
                                     3e-8f, 1.00048828125f /* 1 + 2^-11 */, 1.00146484375f /* 1 + 3*2^-11 */,
                                     123456.7f, -1e10f, 3e9f, NAN, INFINITY, -INFINITY, 6.1e-5f, 2049.0f,
                                     -2147483648.0f, 2147483648.0f, 1e20f};
  static const uint16_t f16v[NCAST] = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x7bff, 0x0001, 0x03ff, 0x0400,
                                       0x7c00, 0xfc00, 0x7e00, 0x3555, 0xc248, 0x5640, 0xd640, 0x3bff,
                                       0x0200, 0x8001, 0x7800, 0xf800, 0x4900, 0xc900, 0x3800, 0xb800};
  static const int32_t i32v[NCAST] = {0, 1, -1, 2047, 2049, 2051, 65504, 65519, 65520, 16777217, 16777219,
                                      INT32_MAX, INT32_MIN, -7, 123456789, -123456789, 100, -100, 4097, 8193,
                                      33, -33, 70000, -70000};
  static const int64_t i64v[NCAST] = {0, -1, 2147483648LL, -2147483649LL, 4294967301LL, 9007199254740993LL,
                                      INT64_MAX, INT64_MIN, 65519, 65520, 2049, -2049, 16777217, 1LL << 40,
                                      -(1LL << 40) - 3, 123, -123, 7, 4294967295LL, -4294967296LL, 42, -42,
                                      (1LL << 24) + 1, 1099511627775LL};
  float *r = th_rand(n, seed, -3000.0f, 3000.0f);
  for (size_t i = 0; i < n; i++) {
    switch (dt) {
      case CLF_F32: ((float *)out)[i] = i < NCAST ? f32v[i] : r[i]; break;
      case CLF_F16: ((uint16_t *)out)[i] = i < NCAST ? f16v[i] : ref_half_bits(r[i]); break;
      case CLF_I32: ((int32_t *)out)[i] = i < NCAST ? i32v[i] : (int32_t)(r[i] * 1000); break;
      case CLF_I64: ((int64_t *)out)[i] = i < NCAST ? i64v[i] : (int64_t)(r[i] * 1e6); break;
      default: ck_abort_msg("cast_inputs: %s is not an element type", clf_dtype_name(dt));
    }
  }
  free(r);
}

/* The reference conversion of element i of `in` (dtype s) to dtype d. */
static void ref_cast_one(clf_dtype s, const void *in, size_t i, clf_dtype d, void *out) {
  double v = 0;
  int64_t iv = 0;
  int is_int = s == CLF_I32 || s == CLF_I64;
  switch (s) {
    case CLF_F32: v = ((const float *)in)[i]; break;
    case CLF_F16: v = ref_half_value(((const uint16_t *)in)[i]); break;
    case CLF_I32: iv = ((const int32_t *)in)[i]; break;
    case CLF_I64: iv = ((const int64_t *)in)[i]; break;
    default: ck_abort_msg("ref_cast_one: %s is not an element type", clf_dtype_name(s));
  }
  switch (d) {
    case CLF_F32: ((float *)out)[i] = is_int ? (float)iv : (float)v; break; /* C rounds int -> float to nearest */
    case CLF_F16: /* int -> float first: exact below 2^24, and above, both roads end in inf */
      ((uint16_t *)out)[i] = ref_half_bits(is_int ? (double)(float)iv : v); break;
    case CLF_I32: /* integers wrap modulo 2^32 */
      ((int32_t *)out)[i] = is_int ? (int32_t)(uint32_t)(uint64_t)iv : (int32_t)ref_f2i(v, INT32_MIN, INT32_MAX);
      break;
    case CLF_I64: ((int64_t *)out)[i] = is_int ? iv : ref_f2i(v, INT64_MIN, INT64_MAX); break;
    default: ck_abort_msg("ref_cast_one: %s is not an element type", clf_dtype_name(d));
  }
}

/* Bit-exact, except that any NaN matches any NaN. */
static int cast_same(clf_dtype d, const unsigned char *g, const unsigned char *r) {
  if (d == CLF_F32) {
    float a, b;
    memcpy(&a, g, 4);
    memcpy(&b, r, 4);
    if (isnan(a) && isnan(b)) return 1;
  } else if (d == CLF_F16) {
    uint16_t a, b;
    memcpy(&a, g, 2);
    memcpy(&b, r, 2);
    if ((a & 0x7fff) > 0x7c00 && (b & 0x7fff) > 0x7c00) return 1;
  }
  return memcmp(g, r, clf_dtype_size(d)) == 0;
}

START_TEST(cast_every_pair) {
  const size_t n = under_oclgrind() ? 1029 : 4099; /* > one work-group's 4 x 256 */
  for (int s = 0; s < 4; s++) {
    void *in = malloc(n * 8);
    cast_inputs((clf_dtype)s, n, in, (uint32_t)s);
    clf_tensor *tx = th_tensor((clf_dtype)s, 2, TH_SHAPE(1, n), in);
    for (int d = 0; d < 4; d++) {
      size_t es = clf_dtype_size((clf_dtype)d);
      void *ref = malloc(n * 8);
      for (size_t i = 0; i < n; i++) ref_cast_one((clf_dtype)s, in, i, (clf_dtype)d, ref);
      clf_tensor *ty = th_empty((clf_dtype)d, 2, TH_SHAPE(1, n));
      TH_OK(clf_cast(th_ctx, tx, ty, NULL));
      unsigned char *got = th_download(ty);
      for (size_t i = 0; i < n; i++) {
        const unsigned char *g = got + i * es, *r = (const unsigned char *)ref + i * es;
        ck_assert_msg(cast_same((clf_dtype)d, g, r), "cast %s -> %s: element %zu differs", clf_dtype_name(s),
                      clf_dtype_name(d), i);
      }
      free(got); free(ref);
      clf_tensor_destroy(ty);
    }
    free(in);
    clf_tensor_destroy(tx);
  }
}
END_TEST

START_TEST(cast_bad_arguments) {
  clf_tensor *x = th_empty(CLF_F32, 2, TH_SHAPE(3, 4)), *y = th_empty(CLF_F16, 2, TH_SHAPE(4, 3));
  TH_FAILS(clf_cast(th_ctx, x, y, NULL), CLF_E_SHAPE, "y has shape [4, 3]");
  TH_FAILS(clf_cast(th_ctx, NULL, y, NULL), CLF_E_INVALID_ARG, "x is NULL");
  TH_FAILS(clf_cast(th_ctx, x, NULL, NULL), CLF_E_INVALID_ARG, "y is NULL");
  ck_assert_int_eq(clf_cast(NULL, x, y, NULL), CLF_E_INVALID_ARG);
  clf_tensor_destroy(x); clf_tensor_destroy(y);
}
END_TEST

/* ---- empty tensors: nothing to do, the event still comes ---- */

START_TEST(empty_tensors) {
  clf_tensor *e = th_empty(CLF_F32, 2, TH_SHAPE(0, 5)), *e2 = th_empty(CLF_F32, 2, TH_SHAPE(0, 5));
  clf_tensor *b = th_empty(CLF_F32, 1, TH_SHAPE(5)), *w = th_empty(CLF_F32, 2, TH_SHAPE(3, 5));
  clf_tensor *y3 = th_empty(CLF_F32, 2, TH_SHAPE(0, 3)), *eh = th_empty(CLF_F16, 2, TH_SHAPE(0, 5));
  clf_tensor *a3 = th_empty(CLF_F32, 3, TH_SHAPE(0, 4, 5)), *c3 = th_empty(CLF_F32, 3, TH_SHAPE(0, 4, 3));
  clf_tensor *x0 = th_empty(CLF_F32, 2, TH_SHAPE(4, 0));
  cl_event ev[9] = {NULL};
  TH_OK(clf_bias_act(th_ctx, e, b, CLF_ACT_GELU, e2, &ev[0]));
  TH_OK(clf_add(th_ctx, e, b, e2, &ev[1]));
  TH_OK(clf_scale(th_ctx, e, 2.0f, e2, &ev[2]));
  TH_OK(clf_softmax(th_ctx, e, 1.0f, e2, &ev[3]));
  TH_OK(clf_cast(th_ctx, e, eh, &ev[4]));
  TH_OK(clf_linear(th_ctx, e, w, CLF_WEIGHT_OUT_IN, NULL, CLF_ACT_RELU, y3, &ev[5]));
  TH_OK(clf_gemm(th_ctx, 0, 1, 1.0f, e, w, 0.0f, y3, &ev[6]));
  TH_OK(clf_gemm_batched(th_ctx, 0, 1, 1.0f, a3, w, 0.0f, c3, &ev[7]));
  TH_OK(clf_softmax(th_ctx, x0, 1.0f, x0, &ev[8]));
  for (int i = 0; i < 9; i++) {
    ck_assert_msg(ev[i] != NULL, "op %d gave no event", i);
    ck_assert_int_eq(clWaitForEvents(1, &ev[i]), CL_SUCCESS);
    clReleaseEvent(ev[i]);
  }
  clf_tensor *list[] = {e, e2, b, w, y3, eh, a3, c3, x0};
  for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++) clf_tensor_destroy(list[i]);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("dense");
  TCase *g = tcase_create("gemm");
  tcase_set_timeout(g, 0);
  tcase_add_test(g, gemm_transposes_odd_sizes);
  tcase_add_test(g, gemm_transformer_shape);
  tcase_add_test(g, gemm_alpha_beta_and_views);
  tcase_add_test(g, gemm_k_zero);
  tcase_add_test(g, gemm_batched_all);
  tcase_add_test(g, gemm_bad_arguments);
  suite_add_tcase(s, g);
  TCase *e = tcase_create("elementwise");
  tcase_set_timeout(e, 0);
  tcase_add_test(e, activation_names);
  tcase_add_test(e, bias_act_each_activation);
  tcase_add_test(e, glu_each_activation);
  tcase_add_test(e, glu_bad_arguments);
  tcase_add_test(e, linear_layouts_bias_activations);
  tcase_add_test(e, linear_bias_act_bad_arguments);
  tcase_add_test(e, add_broadcast_patterns);
  tcase_add_test(e, scale_odd_sizes);
  tcase_add_test(e, add_scale_bad_arguments);
  tcase_add_test(e, softmax_rows_all_cases);
  tcase_add_test(e, softmax_subgroup_variant);
  tcase_add_test(e, softmax_bad_arguments);
  tcase_add_test(e, cast_every_pair);
  tcase_add_test(e, cast_bad_arguments);
  tcase_add_test(e, empty_tensors);
  suite_add_tcase(s, e);
  TCase *gi = tcase_create("gemm_indirect");
  tcase_set_timeout(gi, 0);
  tcase_add_checked_fixture(gi, indirect_setup, indirect_teardown);
  tcase_add_test(gi, gemm_batched_indirect_path);
  suite_add_tcase(s, gi);
  return s;
}

int main(void) { return th_run(suite()); }
