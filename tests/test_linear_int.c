/* test_linear_int.c - the integer path of clf_linear (issue 42): x
 * quantized on the device to 8-bit blocks of 32, then integer products with
 * Q8_0, Q4_0 (clformer's layouts), Q4_1, Q5_0 and Q5_1 (ggml's) weights, for 1 to 8
 * rows, in the portable build and, where the device has
 * cl_khr_integer_dot_product, the extension's; against a CPU reference
 * that rounds x as the kernel does (clf__ref_quantize_q8), and against the
 * float path, which $CLFORMER_SKINNY_INT=0 keeps; and the same for
 * ggml's k-quants Q4_K, Q5_K, Q6_K (skinny_kq, skinny_kqdot). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "device/reference.h"
#include "harness.h"
#include "ops/ops.h"

static void env_set(const char *name, const char *value) {
  if (value) setenv(name, value, 1);
  else unsetenv(name);
  if (th_ctx) TH_OK(clf__env_reload(th_ctx));
}

static void put_half(unsigned char *p, float v) {
  const _Float16 h = (_Float16)v;
  memcpy(p, &h, 2);
}

/* W [N, K] of type dt, made from f32 (Q8_0, Q4_0, Q5_0) or, for Q4_1 and
 * Q5_1, of seeded random block bytes as a GGUF file holds them (scales and
 * mins moderate f16 values, some subnormal); *w gets its values, decoded
 * on the host (ggml's types by gguf_blocks.c). */
static clf_tensor *make_weight(clf_dtype dt, size_t N, size_t K, uint32_t seed, float **w) {
  clf_tensor *tw = NULL;
  *w = malloc(N * K * sizeof(float));
  const unsigned ggml = clf__dtype_ggml_id(dt);
  if (dt != CLF_Q4_1 && dt != CLF_Q5_1) {
    float *src = th_rand(N * K, seed, -1, 1);
    TH_OK(clf_tensor_from_f32(th_ctx, dt, 2, TH_SHAPE(N, K), src, &tw));
    void *raw = th_download(tw);
    if (ggml) TH_OK(clf_gguf_dequantize(ggml, raw, N * K, *w));
    else clf__dequantize(dt, raw, N * K, *w);
    free(raw);
    free(src);
    return tw;
  }
  const size_t blocks = N * K / 32, bb = clf__dtype_bytes(dt, 32);
  unsigned char *raw = malloc(blocks * bb);
  uint32_t r = seed * 2654435761u + 1;
  for (size_t i = 0; i < blocks * bb; i++) raw[i] = (unsigned char)((r = r * 1664525u + 1013904223u) >> 24);
  for (size_t b = 0; b < blocks; b++) {
    put_half(raw + bb * b, b % 5 == 1 ? 3e-6f : 0.01f + 0.002f * (float)(b % 7));
    put_half(raw + bb * b + 2, (b % 2 ? -0.05f : 0.04f) * (b % 5 == 2 ? 1e-4f : 1.0f));
  }
  TH_OK(clf_gguf_dequantize(ggml, raw, N * K, *w));
  TH_OK(clf_tensor_create(th_ctx, dt, 2, TH_SHAPE(N, K), &tw));
  TH_OK(clf_tensor_upload(th_ctx, tw, raw, blocks * bb));
  free(raw);
  return tw;
}

/* act(xq W^T + b) in double, xq being x rounded as quantize_q8 rounds it
 * (exact: every term of the kernel's integer sums) or x itself. */
static float *reference(const float *x, const float *w, const float *bias, size_t M, size_t N, size_t K,
                        clf_activation act, int quantized) {
  double *xq = malloc(M * K * sizeof(double));
  float *ref = malloc(M * N * sizeof(float));
  if (quantized) clf__ref_quantize_q8(x, M, K, xq);
  else
    for (size_t i = 0; i < M * K; i++) xq[i] = x[i];
  for (size_t m = 0; m < M; m++)
    for (size_t o = 0; o < N; o++) {
      double acc = bias[o];
      for (size_t k = 0; k < K; k++) acc += xq[m * K + k] * w[o * K + k];
      ref[m * N + o] = (float)clf__ref_act(act, acc);
    }
  free(xq);
  return ref;
}

static float *run(const clf_tensor *tw, const float *x, const float *bias, size_t M, size_t N, size_t K,
                  clf_activation act) {
  clf_tensor *tx = th_tensor(CLF_F32, 2, TH_SHAPE(M, K), x), *tb = th_tensor(CLF_F32, 1, TH_SHAPE(N), bias);
  clf_tensor *ty = th_empty(CLF_F32, 2, TH_SHAPE(M, N));
  TH_OK(clf_linear(th_ctx, tx, tw, CLF_WEIGHT_OUT_IN, tb, act, ty, NULL));
  float *y = th_download(ty);
  clf_tensor_destroy(tx); clf_tensor_destroy(tb); clf_tensor_destroy(ty);
  return y;
}

static double rel_err(const float *y, const float *ref, size_t n) {
  return th_max_abs_diff(y, ref, n) / fmax(1.0, th_max_abs(ref, n));
}

static const clf_dtype int_types[] = {CLF_Q8_0, CLF_Q4_0, CLF_Q4_1, CLF_Q5_0, CLF_Q5_1};
enum { N_INT_TYPES = sizeof int_types / sizeof *int_types };

/* Every type, 1 to 8 rows (each MMAX build, M not a power of two), N not
 * a multiple of a work-item's rows, K of 3 and 24 blocks (GPT-2's width),
 * an all-zero block of x (scale 0), and each activation, in the kernel
 * (act_pass 0) and in a pass of its own; each build the device has.
 * Tolerance 1e-5 of the larger of 1 and max |ref|: the integer sums are
 * exact and the reference rounds x the same way, so what is left is the
 * kernel's f32 scaling of each block's sum and its f32 accumulation over
 * at most 24 blocks (2^-24 each); the activations' f32 evaluation is
 * within that.  The float path, against the same reference, differs by
 * x's rounding: at least 1e-4 here, which is how the test knows it ran
 * the integer path. */
START_TEST(int_matches_reference) {
  static const size_t Ms[] = {1, 2, 3, 5, 8}, Ks[] = {96, 768};
  /* the portable build in 8 lanes and in 16 (the profile's int_lanes=16),
   * then the extension's */
  const char *builds[] = {"1", "1", "dot"};
  const unsigned lanes[] = {8, 16, 8};
  const int nbuilds = th_ctx->caps.has_int_dot ? 3 : 2;
  /* the extension's build runs where it passed self-validation: said so
   * here for the shapes below */
  for (size_t t = 0; t < N_INT_TYPES && nbuilds == 3; t++)
    for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++) {
      char name[96];
      ck_assert(clf__skinny_int_variant(th_ctx, int_types[t], Ms[i], 1, name, sizeof name));
      ck_assert(clf__verdict_record(th_ctx, name, 1, 0, 0));
    }
  if (nbuilds == 2) fprintf(stderr, "note: no cl_khr_integer_dot_product (packed 4x8): the portable build only\n");
  env_set("CLFORMER_SKINNY_ACT_PASS", NULL);
  for (size_t t = 0; t < N_INT_TYPES; t++)
    for (size_t kk = 0; kk < 2; kk++) {
      const size_t N = 37, K = Ks[kk], M = 8;
      float *w, *x = th_rand(M * K, (uint32_t)(100 + t), -2, 2), *bias = th_rand(N, 7, -1, 1);
      for (size_t k = 32; k < 64; k++) x[K + k] = 0.0f; /* row 1, block 1: all zero */
      clf_tensor *tw = make_weight(int_types[t], N, K, (uint32_t)(200 + t), &w);
      for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++) {
        const clf_activation act = (clf_activation)((i + t) % 6);
        float *ref = reference(x, w, bias, Ms[i], N, K, act, 1);
        for (int b = 0; b < nbuilds; b++)
          for (int pass = 0; pass < 2; pass++) {
            env_set("CLFORMER_SKINNY_INT", builds[b]);
            env_set("CLFORMER_SKINNY_ACT_PASS", pass ? "1" : "0");
            ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "int_lanes",
                                           lanes[b] == 16 ? (unsigned[]){16, 0} : NULL));
            float *y = run(tw, x, bias, Ms[i], N, K, act);
            const double err = rel_err(y, ref, Ms[i] * N);
            th_note_error(err, 1e-5);
            ck_assert_msg(err <= 1e-5, "%s M=%zu K=%zu act %d, %s build in %u lanes, act_pass %d: error %g > 1e-5",
                          clf_dtype_name(int_types[t]), Ms[i], K, (int)act, builds[b], lanes[b], pass, err);
            free(y);
            ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "int_lanes", NULL));
          }
        env_set("CLFORMER_SKINNY_INT", "0");
        env_set("CLFORMER_SKINNY_ACT_PASS", NULL);
        float *yf = run(tw, x, bias, Ms[i], N, K, act), *exact = reference(x, w, bias, Ms[i], N, K, act, 0);
        const double ef = rel_err(yf, ref, Ms[i] * N), ee = rel_err(yf, exact, Ms[i] * N);
        ck_assert_msg(ee <= 2e-5 * sqrt((double)K) + 1e-5, "%s M=%zu: the float path is %g off the exact product",
                      clf_dtype_name(int_types[t]), Ms[i], ee);
        ck_assert_msg(ef >= 1e-4, "%s M=%zu: the float path is within %g of the quantized-x reference: did the "
                      "integer path run?", clf_dtype_name(int_types[t]), Ms[i], ef);
        free(yf); free(exact); free(ref);
      }
      free(w); free(x); free(bias);
      clf_tensor_destroy(tw);
    }
  env_set("CLFORMER_SKINNY_INT", NULL);
  env_set("CLFORMER_SKINNY_ACT_PASS", NULL);
}
END_TEST

/* Whether the integer path runs, and what the profile records: off by
 * default; the applied profile's Tiles line "int=R" turns it on up to R
 * rows and "int_dot=1" asks for the extension's build;
 * $CLFORMER_SKINNY_INT over both; never for other types or more than 8
 * rows (the path line of 9 rows says the float kernels). */
START_TEST(int_follows_profile_and_env) {
  int dot = -1;
  /* the applied profile's own keys aside (one `probe --tune` wrote may
   * say int=R; PoCL's shipped one says int_lanes=16), put back at the end */
  unsigned shipped[2], lanes[2];
  const int had = clf__tuned_group(th_ctx, CLF__TILES_TUNING, "int", shipped);
  const int had_lanes = clf__tuned_group(th_ctx, CLF__TILES_TUNING, "int_lanes", lanes);
  ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "int", NULL));
  ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "int_lanes", NULL));
  env_set("CLFORMER_SKINNY_INT", NULL);
  ck_assert(!clf__skinny_int_wanted(th_ctx, 1, &dot) && !dot);
  ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "int", (unsigned[]){2, 0}));
  ck_assert(clf__skinny_int_wanted(th_ctx, 1, &dot) && clf__skinny_int_wanted(th_ctx, 2, &dot) && !dot);
  ck_assert(!clf__skinny_int_wanted(th_ctx, 3, &dot)); /* past the measured rows */
  ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "int_dot", (unsigned[]){1, 0}));
  ck_assert(clf__skinny_int_wanted(th_ctx, 1, &dot) && dot);
  env_set("CLFORMER_SKINNY_INT", "0");
  ck_assert(!clf__skinny_int_wanted(th_ctx, 1, &dot));
  env_set("CLFORMER_SKINNY_INT", "1");
  ck_assert(clf__skinny_int_wanted(th_ctx, 8, &dot) && !dot);
  env_set("CLFORMER_SKINNY_INT", "dot");
  ck_assert(clf__skinny_int_wanted(th_ctx, 8, &dot) && dot);
  ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "int", NULL));
  ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "int_dot", NULL));
  char name[96];
  ck_assert(clf__skinny_int_variant(th_ctx, CLF_Q4_1, 3, 0, name, sizeof name));
  ck_assert_str_eq(name, "linear.skinny_int q4_1 MMAX=4 TN=2 TL=8");
  ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "int_lanes", (unsigned[]){16, 0}));
  ck_assert(clf__skinny_int_variant(th_ctx, CLF_Q4_1, 1, 0, name, sizeof name));
  ck_assert_str_eq(name, "linear.skinny_int q4_1 MMAX=1 TN=4 TL=8 lanes=16");
  ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "int_lanes", (unsigned[]){12, 0}));
  ck_assert(clf__skinny_int_variant(th_ctx, CLF_Q4_1, 1, 0, name, sizeof name)); /* 16 or nothing */
  ck_assert_str_eq(name, "linear.skinny_int q4_1 MMAX=1 TN=4 TL=8");
  ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "int_lanes", NULL));
  ck_assert(!clf__skinny_int_variant(th_ctx, CLF_Q4_K, 1, 0, name, sizeof name));
  ck_assert(!clf__skinny_int_variant(th_ctx, CLF_Q8_0, 9, 0, name, sizeof name));
  ck_assert_int_eq(clf__skinny_int_variant(th_ctx, CLF_Q8_0, 1, 1, name, sizeof name), th_ctx->caps.has_int_dot);
  /* the paths recorded: 1 and 9 rows of q8 with the integer path asked */
  env_set("CLFORMER_SKINNY_INT", "1");
  th_profiled_begin(NULL); /* th_ctx: a context that records */
  const size_t N = 40, K = 64;
  float *w, *x = th_rand(9 * K, 5, -1, 1), *bias = th_rand(N, 6, -1, 1);
  clf_tensor *tw = make_weight(CLF_Q8_0, N, K, 9, &w);
  free(run(tw, x, bias, 1, N, K, CLF_ACT_NONE));
  free(run(tw, x, bias, 9, N, K, CLF_ACT_NONE));
  ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "int_lanes", (unsigned[]){16, 0}));
  free(run(tw, x, bias, 3, N, K, CLF_ACT_NONE)); /* the 16-lane build */
  ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "int_lanes", NULL));
  if (th_ctx->caps.has_int_dot) { /* the extension's build, once it passed */
    char name[96];
    ck_assert(clf__skinny_int_variant(th_ctx, CLF_Q8_0, 2, 1, name, sizeof name));
    ck_assert(clf__verdict_record(th_ctx, name, 1, 0, 0));
    env_set("CLFORMER_SKINNY_INT", "dot");
    free(run(tw, x, bias, 2, N, K, CLF_ACT_NONE));
    env_set("CLFORMER_SKINNY_INT", "1");
  }
  int one = 0, nine = 0, two = 0, three = 0;
  const size_t n = clf_profile_paths(th_ctx, 0, NULL, NULL, NULL);
  for (size_t i = 0; i < n; i++) {
    const char *line;
    TH_OK(clf_profile_paths(th_ctx, i, &line, NULL, NULL) == n ? CLF_OK : CLF_E_INVALID_ARG);
    /* in 8 lanes or, where the shipped profile says int_lanes=16, 16 */
    if (strstr(line, "x [1, 64] w q8_0 [40, 64] [out, in]: quantize_q8 and skinny_int")) one = 1;
    if (strstr(line, "x [9, 64] w q8_0") && !strstr(line, "skinny_int")) nine = 1;
    if (strstr(line, "x [3, 64] w q8_0 [40, 64] [out, in]: quantize_q8 and skinny_int (16 lanes), 2 launches")) three = 1;
    if (strstr(line, "x [2, 64] w q8_0 [40, 64] [out, in]: quantize_q8 and skinny_idot, 2 launches")) two = 1;
  }
  ck_assert_msg(one && nine && three, "paths: one row on the integer path %d, nine rows off it %d, three in 16 lanes %d",
                one, nine, three);
  ck_assert_int_eq(two, th_ctx->caps.has_int_dot);
  free(w); free(x); free(bias);
  clf_tensor_destroy(tw);
  th_profiled_expect("skinny_int", NULL, 1);
  env_set("CLFORMER_SKINNY_INT", NULL);
  if (had) ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "int", shipped));
  if (had_lanes) ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "int_lanes", lanes));
}
END_TEST

/* The quantize_q8 launches of a recording, stopping it (then recording
 * again, for th_profiled_expect). */
static unsigned long quantize_launches(void) {
  clf_profile_entry e[64];
  size_t n = 0;
  TH_OK(clf_profile_stop(th_ctx, e, 64, &n, NULL));
  unsigned long c = 0;
  for (size_t i = 0; i < n && i < 64; i++)
    if (strcmp(e[i].op, "quantize_q8") == 0) c = e[i].count;
  TH_OK(clf_profile_start(th_ctx));
  return c;
}

static void product(const clf_tensor *tx, const clf_tensor *tw, const clf_tensor *tb, clf_tensor *ty) {
  TH_OK(clf_linear(th_ctx, tx, tw, CLF_WEIGHT_OUT_IN, tb, CLF_ACT_NONE, ty, NULL));
}

/* x held (clf__linear_hold_x, as the decoder's q, k, v and gate, up do):
 * three products of it with weights of three types launch quantize_q8
 * once, and a product of another x in between (which takes the scratch)
 * makes the next product of the held x quantize it again: 3 launches for
 * 4 products; each result within the first test's 1e-5 of its reference.
 * After release, x rewritten in place (same buffer, same offset) is
 * quantized afresh: a stale copy would answer the old x's product, 1e-1
 * off here. */
START_TEST(int_held_x_quantized_once) {
  env_set("CLFORMER_SKINNY_INT", "1");
  th_profiled_begin(NULL); /* th_ctx: a context that records */
  const size_t M = 2, N = 24, K = 96;
  float *w[3], *x = th_rand(M * K, 11, -2, 2), *x2 = th_rand(M * K, 12, -2, 2), *bias = th_rand(N, 13, -1, 1);
  clf_tensor *tw[3];
  for (int t = 0; t < 3; t++) tw[t] = make_weight(int_types[t], N, K, (uint32_t)(300 + t), &w[t]);
  clf_tensor *tx = th_tensor(CLF_F32, 2, TH_SHAPE(M, K), x), *tx2 = th_tensor(CLF_F32, 2, TH_SHAPE(M, K), x2);
  clf_tensor *tb = th_tensor(CLF_F32, 1, TH_SHAPE(N), bias), *ty[4];
  for (int i = 0; i < 4; i++) ty[i] = th_empty(CLF_F32, 2, TH_SHAPE(M, N));
  clf__linear_hold_x(th_ctx, tx);
  product(tx, tw[0], tb, ty[0]);
  product(tx, tw[1], tb, ty[1]);
  product(tx2, tw[0], tb, ty[3]); /* another x: the scratch is its now */
  product(tx, tw[2], tb, ty[2]);
  clf__linear_release_x(th_ctx, tx);
  ck_assert_int_eq(quantize_launches(), 3);
  for (int t = 0; t < 4; t++) {
    float *y = th_download(ty[t]), *ref = reference(t == 3 ? x2 : x, w[t == 3 ? 0 : t], bias, M, N, K,
                                                    CLF_ACT_NONE, 1);
    const double err = rel_err(y, ref, M * N);
    ck_assert_msg(err <= 1e-5, "product %d of the held x: error %g > 1e-5", t, err);
    free(y); free(ref);
  }
  /* held again, one product; released; x rewritten in place; held again */
  clf__linear_hold_x(th_ctx, tx);
  product(tx, tw[0], tb, ty[0]);
  clf__linear_release_x(th_ctx, tx);
  TH_OK(clf_tensor_upload(th_ctx, tx, x2, M * K * sizeof(float)));
  clf__linear_hold_x(th_ctx, tx);
  product(tx, tw[1], tb, ty[1]);
  clf__linear_release_x(th_ctx, tx);
  ck_assert_int_eq(quantize_launches(), 2);
  float *y = th_download(ty[1]), *ref = reference(x2, w[1], bias, M, N, K, CLF_ACT_NONE, 1);
  ck_assert_msg(rel_err(y, ref, M * N) <= 1e-5, "x rewritten after release: error %g", rel_err(y, ref, M * N));
  free(y); free(ref);
  product(tx, tw[0], tb, ty[0]); /* for th_profiled_expect's recording */
  for (int t = 0; t < 3; t++) free(w[t]), clf_tensor_destroy(tw[t]);
  for (int i = 0; i < 4; i++) clf_tensor_destroy(ty[i]);
  clf_tensor_destroy(tx); clf_tensor_destroy(tx2); clf_tensor_destroy(tb);
  free(x); free(x2); free(bias);
  th_profiled_expect("skinny_int", NULL, 1);
  env_set("CLFORMER_SKINNY_INT", NULL);
}
END_TEST

/* The per-row norm that writes a held x writes its 8-bit blocks too
 * (norm.cl's layer_norm_rows built with NORM_Q8): RMSNorm and LayerNorm
 * (with a residual and its sum) of 3 rows of 96, then products of their
 * outputs with each type launch no quantize_q8, each within 1e-5 of the
 * reference made from the norm's downloaded output (the first test's
 * tolerance: the blocks are the ones quantize_q8 makes from it), and that
 * output within 1e-6 of the same norm run unheld.  A norm that writes the
 * held x without its blocks (the integer path off while it runs) leaves no
 * stale copy: the next product quantizes (1 launch) and matches the new
 * output.  Only where the norm runs per row (CPU devices). */
START_TEST(int_norm_makes_blocks) {
  if (!th_ctx->caps.is_cpu) return;
  env_set("CLFORMER_SKINNY_INT", "1");
  th_profiled_begin(NULL);
  const size_t M = 3, N = 24, K = 96;
  float *w[3], *x = th_rand(M * K, 21, -2, 2), *r = th_rand(M * K, 22, -1, 1), *g = th_rand(K, 23, 0.5f, 1.5f);
  float *be = th_rand(K, 24, -0.5f, 0.5f), *bias = th_rand(N, 25, -1, 1);
  clf_tensor *tw[3];
  for (int t = 0; t < 3; t++) tw[t] = make_weight(int_types[t], N, K, (uint32_t)(400 + t), &w[t]);
  clf_tensor *tx = th_tensor(CLF_F32, 2, TH_SHAPE(M, K), x), *tr = th_tensor(CLF_F32, 2, TH_SHAPE(M, K), r);
  clf_tensor *tg = th_tensor(CLF_F32, 1, TH_SHAPE(K), g), *tbe = th_tensor(CLF_F32, 1, TH_SHAPE(K), be);
  clf_tensor *tb = th_tensor(CLF_F32, 1, TH_SHAPE(N), bias), *ta = th_empty(CLF_F32, 2, TH_SHAPE(M, K));
  clf_tensor *ts = th_empty(CLF_F32, 2, TH_SHAPE(M, K)), *ty = th_empty(CLF_F32, 2, TH_SHAPE(M, N));
  for (int layer = 0; layer < 2; layer++) {
    TH_OK(layer ? clf_layer_norm(th_ctx, tx, tr, tg, tbe, 1e-5f, ts, ta, NULL)
                : clf_rms_norm(th_ctx, tx, NULL, tg, 1e-6f, NULL, ta, NULL));
    float *plain = th_download(ta);
    ck_assert(clf__linear_hold_x(th_ctx, ta));
    TH_OK(layer ? clf_layer_norm(th_ctx, tx, tr, tg, tbe, 1e-5f, ts, ta, NULL)
                : clf_rms_norm(th_ctx, tx, NULL, tg, 1e-6f, NULL, ta, NULL));
    float *a = th_download(ta);
    ck_assert_msg(rel_err(a, plain, M * K) <= 1e-6, "norm %d: the output with blocks is %g off the plain one",
                  layer, rel_err(a, plain, M * K));
    (void)quantize_launches(); /* a new recording */
    for (int t = 0; t < 3; t++) {
      product(ta, tw[t], tb, ty);
      float *y = th_download(ty), *ref = reference(a, w[t], bias, M, N, K, CLF_ACT_NONE, 1);
      ck_assert_msg(rel_err(y, ref, M * N) <= 1e-5, "norm %d, %s: error %g > 1e-5", layer,
                    clf_dtype_name(int_types[t]), rel_err(y, ref, M * N));
      free(y); free(ref);
    }
    ck_assert_int_eq(quantize_launches(), 0);
    /* the norm again, over the residual as x, the integer path off */
    env_set("CLFORMER_SKINNY_INT", "0");
    TH_OK(clf_rms_norm(th_ctx, tr, NULL, tg, 1e-6f, NULL, ta, NULL));
    env_set("CLFORMER_SKINNY_INT", "1");
    float *a2 = th_download(ta);
    product(ta, tw[0], tb, ty);
    ck_assert_int_eq(quantize_launches(), 1);
    float *y = th_download(ty), *ref = reference(a2, w[0], bias, M, N, K, CLF_ACT_NONE, 1);
    ck_assert_msg(rel_err(y, ref, M * N) <= 1e-5, "after a norm without blocks: error %g", rel_err(y, ref, M * N));
    clf__linear_release_x(th_ctx, ta);
    free(y); free(ref); free(a2); free(a); free(plain);
  }
  product(ta, tw[0], tb, ty); /* for th_profiled_expect's recording */
  for (int t = 0; t < 3; t++) free(w[t]), clf_tensor_destroy(tw[t]);
  clf_tensor_destroy(tx); clf_tensor_destroy(tr); clf_tensor_destroy(tg); clf_tensor_destroy(tbe);
  clf_tensor_destroy(tb); clf_tensor_destroy(ta); clf_tensor_destroy(ts); clf_tensor_destroy(ty);
  free(x); free(r); free(g); free(be); free(bias);
  th_profiled_expect("skinny_int", NULL, 1);
  env_set("CLFORMER_SKINNY_INT", NULL);
}
END_TEST

/* glu writes the blocks of a held output (elementwise.cl's glu_q8), held
 * inside another hold as the decoder's MLP holds it inside the layer's:
 * products of it launch no quantize_q8 and are within 1e-5 of the
 * reference made from the downloaded output; glu's output within 1e-6 of
 * the plain glu's.  Releasing the inner hold keeps the outer one (holding
 * it again is no new hold), and the outer x's copy is gone (the scratch
 * took glu's): its next product quantizes, once. */
START_TEST(int_glu_makes_blocks) {
  env_set("CLFORMER_SKINNY_INT", "1");
  th_profiled_begin(NULL);
  const size_t M = 2, N = 24, F = 96;
  float *w[3], *g = th_rand(M * 2 * F, 31, -4, 4), *x = th_rand(M * F, 32, -2, 2), *bias = th_rand(N, 33, -1, 1);
  clf_tensor *tw[3];
  for (int t = 0; t < 3; t++) tw[t] = make_weight(int_types[t], N, F, (uint32_t)(500 + t), &w[t]);
  clf_tensor *tg = th_tensor(CLF_F32, 2, TH_SHAPE(M, 2 * F), g), *tx = th_tensor(CLF_F32, 2, TH_SHAPE(M, F), x);
  clf_tensor *tb = th_tensor(CLF_F32, 1, TH_SHAPE(N), bias), *tu = th_empty(CLF_F32, 2, TH_SHAPE(M, F));
  clf_tensor *ty = th_empty(CLF_F32, 2, TH_SHAPE(M, N));
  TH_OK(clf_glu(th_ctx, tg, CLF_ACT_SILU, tu, NULL));
  float *plain = th_download(tu);
  ck_assert(clf__linear_hold_x(th_ctx, tx));
  product(tx, tw[0], tb, ty); /* the outer x's copy made */
  ck_assert(clf__linear_hold_x(th_ctx, tu));
  (void)quantize_launches();
  TH_OK(clf_glu(th_ctx, tg, CLF_ACT_SILU, tu, NULL));
  float *u = th_download(tu);
  ck_assert_msg(rel_err(u, plain, M * F) <= 1e-6, "glu with blocks %g off the plain one", rel_err(u, plain, M * F));
  for (int t = 0; t < 3; t++) {
    product(tu, tw[t], tb, ty);
    float *y = th_download(ty), *ref = reference(u, w[t], bias, M, N, F, CLF_ACT_NONE, 1);
    ck_assert_msg(rel_err(y, ref, M * N) <= 1e-5, "glu, %s: error %g > 1e-5", clf_dtype_name(int_types[t]),
                  rel_err(y, ref, M * N));
    free(y); free(ref);
  }
  ck_assert_int_eq(quantize_launches(), 0);
  clf__linear_release_x(th_ctx, tu);
  ck_assert(!clf__linear_hold_x(th_ctx, tx)); /* still held */
  product(tx, tw[1], tb, ty);
  product(tx, tw[2], tb, ty);
  ck_assert_int_eq(quantize_launches(), 1);
  float *y = th_download(ty), *ref = reference(x, w[2], bias, M, N, F, CLF_ACT_NONE, 1);
  ck_assert_msg(rel_err(y, ref, M * N) <= 1e-5, "the outer x after glu's: error %g", rel_err(y, ref, M * N));
  free(y); free(ref);
  clf__linear_release_x(th_ctx, tx);
  product(tx, tw[0], tb, ty); /* for th_profiled_expect's recording */
  for (int t = 0; t < 3; t++) free(w[t]), clf_tensor_destroy(tw[t]);
  clf_tensor_destroy(tg); clf_tensor_destroy(tx); clf_tensor_destroy(tb); clf_tensor_destroy(tu);
  clf_tensor_destroy(ty);
  free(g); free(x); free(bias); free(u); free(plain);
  th_profiled_expect("skinny_int", NULL, 1);
  env_set("CLFORMER_SKINNY_INT", NULL);
}
END_TEST

static const clf_dtype kq_types[] = {CLF_Q4_K, CLF_Q5_K, CLF_Q6_K, CLF_Q2_K, CLF_Q3_K};
static const unsigned kq_ggml[] = {12, 13, 14, 10, 11}; /* their ggml numbers */

/* W [N, K] of dt, one of kq_types (index t): seeded block bytes (clf__kq_blocks: moderate
 * scales, some subnormal) or, with from_f32, clformer's own quantizer of
 * uniform values (--weights q4k / q6k: the bytes llama.cpp's reference
 * quantizer writes); *w its values, decoded by the reference
 * (clf__ref_dequant_k), which is first checked against the GGUF reader's
 * decoder (clf_gguf_dequantize: float arithmetic, so within 1e-6 of the
 * largest weight). */
static clf_tensor *make_kq(size_t t, size_t N, size_t K, uint32_t seed, int from_f32, float **w) {
  const clf_dtype dt = kq_types[t];
  const size_t bytes = clf__dtype_bytes(dt, N * K);
  unsigned char *raw;
  clf_tensor *tw = NULL;
  if (from_f32) {
    float *src = th_rand(N * K, seed, -1, 1);
    TH_OK(clf_tensor_from_f32(th_ctx, dt, 2, TH_SHAPE(N, K), src, &tw));
    raw = th_download(tw);
    free(src);
  } else {
    raw = malloc(bytes);
    clf__kq_blocks(dt, N, K, seed, raw);
    TH_OK(clf_tensor_create(th_ctx, dt, 2, TH_SHAPE(N, K), &tw));
    TH_OK(clf_tensor_upload(th_ctx, tw, raw, bytes));
  }
  double *wd = malloc(N * K * sizeof(double));
  float *gg = malloc(N * K * sizeof(float));
  ck_assert(clf__ref_dequant_k(dt, raw, N * K, wd));
  TH_OK(clf_gguf_dequantize(kq_ggml[t], raw, N * K, gg));
  *w = malloc(N * K * sizeof(float));
  double most = 0, diff = 0;
  for (size_t i = 0; i < N * K; i++) {
    (*w)[i] = (float)wd[i];
    most = fmax(most, fabs(wd[i]));
    diff = fmax(diff, fabs(wd[i] - gg[i]));
  }
  ck_assert_msg(diff <= 1e-6 * most, "%s: the reference decoder is %g off the GGUF reader's (max |w| %g)",
                clf_dtype_name(dt), diff, most);
  free(wd); free(gg); free(raw);
  return tw;
}

/* skinny_kq (skinny_kqdot too where the device has the extension): each
 * type, 1 to 8 rows (on Oclgrind 1, 2, 3, 8 and the shorter K), N not a
 * multiple of a work-item's rows, K of 1 and 3 super-blocks, an all-zero
 * block of x, each activation in the kernel and in a pass of its own; against the
 * reference over x rounded as quantize_q8 rounds it, within 1e-5 of the
 * larger of 1 and max |ref| (int_matches_reference's reasoning: the
 * integer sums are exact, what is left is the f32 scaling of each block's
 * sum and the f32 accumulation over at most 24 blocks).  The float path
 * ($CLFORMER_SKINNY_INT=0) is within 2e-5 sqrt(K) of the exact product
 * and at least 1e-4 away from the quantized-x reference (the path that
 * ran is the integer one).  Then weights made by clformer's own
 * quantizers (q4k, q6k from f32: real scales and mins) against the
 * same reference, 1e-5. */
START_TEST(kq_matches_reference) {
  static const size_t Ms[] = {1, 2, 3, 8, 5}, Ks[] = {256, 768};
  const int sim = getenv("CLF_TEST_UNDER_OCLGRIND") != NULL; /* a simulator: each MMAX once, the shorter K */
  const size_t nm = sim ? 4 : 5, nk = sim ? 1 : 2;
  const char *builds[] = {"1", "dot"};
  const int nbuilds = th_ctx->caps.has_int_dot ? 2 : 1;
  const size_t ntypes = sizeof kq_types / sizeof *kq_types;
  for (size_t t = 0; t < ntypes && nbuilds == 2; t++)
    for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++) {
      char name[96];
      ck_assert(clf__skinny_kq_variant(th_ctx, kq_types[t], Ms[i], 1, name, sizeof name));
      ck_assert(clf__verdict_record(th_ctx, name, 1, 0, 0));
    }
  for (size_t t = 0; t < ntypes; t++)
    for (size_t kk = 0; kk < nk; kk++) {
      const size_t N = 37, K = Ks[kk], M = 8;
      float *w, *x = th_rand(M * K, (uint32_t)(600 + t), -2, 2), *bias = th_rand(N, 8, -1, 1);
      for (size_t k = 32; k < 64; k++) x[K + k] = 0.0f; /* row 1, block 1: all zero */
      clf_tensor *tw = make_kq(t, N, K, (uint32_t)(700 + t), 0, &w);
      for (size_t i = 0; i < nm; i++) {
        const clf_activation act = (clf_activation)((i + t) % 6);
        float *ref = reference(x, w, bias, Ms[i], N, K, act, 1);
        for (int b = 0; b < nbuilds; b++)
          for (int pass = 0; pass < 2; pass++) {
            env_set("CLFORMER_SKINNY_INT", builds[b]);
            env_set("CLFORMER_SKINNY_ACT_PASS", pass ? "1" : "0");
            float *y = run(tw, x, bias, Ms[i], N, K, act);
            const double err = rel_err(y, ref, Ms[i] * N);
            th_note_error(err, 1e-5);
            ck_assert_msg(err <= 1e-5, "%s M=%zu K=%zu act %d, %s build, act_pass %d: error %g > 1e-5",
                          clf_dtype_name(kq_types[t]), Ms[i], K, (int)act, builds[b], pass, err);
            free(y);
          }
        env_set("CLFORMER_SKINNY_INT", "0");
        env_set("CLFORMER_SKINNY_ACT_PASS", NULL);
        float *yf = run(tw, x, bias, Ms[i], N, K, act), *exact = reference(x, w, bias, Ms[i], N, K, act, 0);
        const double ef = rel_err(yf, ref, Ms[i] * N), ee = rel_err(yf, exact, Ms[i] * N);
        ck_assert_msg(ee <= 2e-5 * sqrt((double)K) + 1e-5, "%s M=%zu: the float path is %g off the exact product",
                      clf_dtype_name(kq_types[t]), Ms[i], ee);
        ck_assert_msg(ef >= 1e-4, "%s M=%zu: the float path is within %g of the quantized-x reference: did the "
                      "integer path run?", clf_dtype_name(kq_types[t]), Ms[i], ef);
        free(yf); free(exact); free(ref);
      }
      free(w); free(x); free(bias);
      clf_tensor_destroy(tw);
    }
  static const size_t own[] = {0, 2}; /* q4k, q6k */
  env_set("CLFORMER_SKINNY_INT", "1");
  for (size_t o = 0; o < 2; o++) {
    const size_t t = own[o];
    const size_t N = 29, K = 512, M = 3;
    float *w, *x = th_rand(M * K, (uint32_t)(800 + t), -2, 2), *bias = th_rand(N, 9, -1, 1);
    clf_tensor *tw = make_kq(t, N, K, (uint32_t)(900 + t), 1, &w);
    float *ref = reference(x, w, bias, M, N, K, CLF_ACT_NONE, 1), *y = run(tw, x, bias, M, N, K, CLF_ACT_NONE);
    const double err = rel_err(y, ref, M * N);
    th_note_error(err, 1e-5);
    ck_assert_msg(err <= 1e-5, "%s from f32: error %g > 1e-5", clf_dtype_name(kq_types[t]), err);
    free(y); free(ref); free(w); free(x); free(bias);
    clf_tensor_destroy(tw);
  }
  env_set("CLFORMER_SKINNY_INT", NULL);
  env_set("CLFORMER_SKINNY_ACT_PASS", NULL);
}
END_TEST

/* One quantization of a held x serves products of every type the integer
 * paths take: x [2, 512] held, products with Q4_1, Q4_K, Q6_K and Q5_K
 * weights launch quantize_q8 once, each within 1e-5 of its reference; the
 * profile's path line names skinny_kq, and 9 rows (past the integer path)
 * take the float kernels. */
START_TEST(kq_held_x_shared) {
  env_set("CLFORMER_SKINNY_INT", "1");
  th_profiled_begin(NULL);
  const size_t M = 2, N = 24, K = 512;
  float *w[4], *x = th_rand(9 * K, 41, -2, 2), *bias = th_rand(N, 42, -1, 1);
  clf_tensor *tw[4];
  tw[0] = make_weight(CLF_Q4_1, N, K, 43, &w[0]);
  for (int t = 0; t < 3; t++) tw[t + 1] = make_kq((size_t)t, N, K, (uint32_t)(44 + t), 0, &w[t + 1]);
  clf_tensor *tx = th_tensor(CLF_F32, 2, TH_SHAPE(M, K), x), *tb = th_tensor(CLF_F32, 1, TH_SHAPE(N), bias);
  clf_tensor *ty = th_empty(CLF_F32, 2, TH_SHAPE(M, N));
  clf__linear_hold_x(th_ctx, tx);
  for (int t = 0; t < 4; t++) {
    product(tx, tw[t], tb, ty);
    float *y = th_download(ty), *ref = reference(x, w[t], bias, M, N, K, CLF_ACT_NONE, 1);
    const double err = rel_err(y, ref, M * N);
    ck_assert_msg(err <= 1e-5, "product %d of the held x: error %g > 1e-5", t, err);
    free(y); free(ref);
  }
  clf__linear_release_x(th_ctx, tx);
  free(run(tw[1], x, bias, 9, N, K, CLF_ACT_NONE));
  int kq = 0, nine = 0;
  const size_t n = clf_profile_paths(th_ctx, 0, NULL, NULL, NULL);
  for (size_t i = 0; i < n; i++) {
    const char *line;
    TH_OK(clf_profile_paths(th_ctx, i, &line, NULL, NULL) == n ? CLF_OK : CLF_E_INVALID_ARG);
    if (strstr(line, "x [2, 512] w q4_k [24, 512] [out, in]: quantize_q8 and skinny_kq, 2 launches")) kq = 1;
    if (strstr(line, "x [9, 512] w q4_k") && !strstr(line, "skinny_kq")) nine = 1;
  }
  ck_assert_msg(kq && nine, "paths: 2 rows of q4_k on skinny_kq %d, 9 rows off it %d", kq, nine);
  ck_assert_int_eq(quantize_launches(), 1);
  char name[96];
  ck_assert(clf__skinny_kq_variant(th_ctx, CLF_Q6_K, 3, 0, name, sizeof name));
  ck_assert_str_eq(name, "linear.skinny_kq q6k MMAX=4 TN=2 TL=8");
  ck_assert(!clf__skinny_kq_variant(th_ctx, CLF_Q4_1, 1, 0, name, sizeof name));
  ck_assert(!clf__skinny_kq_variant(th_ctx, CLF_Q4_K, 9, 0, name, sizeof name));
  product(tx, tw[1], tb, ty); /* for th_profiled_expect's recording */
  for (int t = 0; t < 4; t++) free(w[t]), clf_tensor_destroy(tw[t]);
  clf_tensor_destroy(tx); clf_tensor_destroy(tb); clf_tensor_destroy(ty);
  free(x); free(bias);
  th_profiled_expect("skinny_kq", NULL, 1);
  env_set("CLFORMER_SKINNY_INT", NULL);
}
END_TEST

/* Q4_1, Q8_0, Q5_0, Q5_1, Q4_K, Q6_K, Q4_0, Q5_K, Q2_K and Q3_K (_i) in the 16-row
 * interleave (linear_r16.c), 40 rows (two groups and one of 8, padded
 * with zero rows that no output is written of): the packing round-trips;
 * 1 to 33 rows (each MMAX build, every activation) on the path
 * clf__r16_path picks: skinny_r16f (in launches of 8; on a CPU the
 * default at every row count)
 * against the exact product at the float path's tolerance, skinny_r16
 * (8 rows with $CLFORMER_SKINNY_INT=1) against the quantized-x reference
 * at skinny_int's, 1e-5; 33 rows past the skinny path's
 * most through expand_r16 and CLBlast, likewise; the profile's path line names the kernel;
 * and every other op, and a download, refuses such a tensor by name. */
START_TEST(r16_matches_reference) {
  static const size_t Ms[] = {1, 2, 3, 5, 8, 9, 33};
  static const clf_dtype types[] = {CLF_Q4_1, CLF_Q8_0, CLF_Q5_0, CLF_Q5_1, CLF_Q4_K,
                                    CLF_Q6_K, CLF_Q4_0, CLF_Q5_K, CLF_Q2_K, CLF_Q3_K};
  static const unsigned ggml[] = {3, 8, 6, 7, 12, 14, 2, 13, 10, 11}; /* their ggml numbers */
  static const size_t block_bytes[] = {20, 34, 22, 24, 144, 210, 18, 176, 84, 110};
  const clf_dtype dt = types[_i];
  const int kq = clf__dtype_block(dt) == 256; /* super-blocks of 256 */
  const size_t N = 40, K = kq ? 512 : 96, be = kq ? 256 : 32, bb = block_bytes[_i], bytes = N * K / be * bb;
  const int has_min = dt == CLF_Q4_1 || dt == CLF_Q5_1 || dt == CLF_Q4_K || dt == CLF_Q5_K || dt == CLF_Q2_K;
  const int has_int = dt == CLF_Q4_1 || dt == CLF_Q8_0;
  /* Q2_K's d and dmin, Q3_K's and Q6_K's d, are last */
  const size_t d_at = dt == CLF_Q6_K ? 208 : dt == CLF_Q2_K ? 80 : dt == CLF_Q3_K ? 108 : 0;
  const char *tn = clf_dtype_name(dt);
  th_profiled_begin(NULL); /* th_ctx: a context that records */
  float *w = malloc(N * K * sizeof(float)), *x = th_rand(33 * K, 41, -2, 2), *bias = th_rand(N, 8, -1, 1);
  for (size_t k = 32; k < 64; k++) x[K + k] = 0.0f; /* row 1, block 1: all zero */
  /* GGUF's blocks of seeded bytes, moderate scales (and mins), decoded by gguf_blocks.c */
  unsigned char *raw = malloc(bytes), *packed = malloc(clf__r16_bytes(dt, N, K)), *back = malloc(bytes);
  uint32_t r = 43;
  for (size_t i = 0; i < bytes; i++) raw[i] = (unsigned char)((r = r * 1664525u + 1013904223u) >> 24);
  for (size_t b = 0; b < N * K / be; b++) {
    put_half(raw + bb * b + d_at, (kq ? 0.001f : 0.01f) + 0.002f * (float)(b % 7));
    if (has_min) put_half(raw + bb * b + d_at + 2, b % 2 ? -0.005f : 0.004f);
  }
  TH_OK(clf_gguf_dequantize(ggml[_i], raw, N * K, w));
  clf__r16_pack(dt, raw, N, K, packed);
  clf__r16_unpack(dt, packed, N, K, back);
  ck_assert(memcmp(raw, back, bytes) == 0);
  ck_assert(memcmp(raw, packed, bytes) != 0);
  ck_assert_uint_eq(clf__r16_bytes(dt, N, K), bytes / 40 * 48);
  clf_tensor *tw = NULL;
  TH_OK(clf__r16_tensor(th_ctx, dt, N, K, packed, &tw));
  ck_assert(tw->r16 && tw->shape[0] == N && tw->shape[1] == K);
  for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++) {
    const clf_activation act = (clf_activation)(i % 6);
    const int skinny = clf__r16_path(th_ctx, dt, Ms[i]) == CLF__R16_INT;
    float *ref = reference(x, w, bias, Ms[i], N, K, act, skinny), *y = run(tw, x, bias, Ms[i], N, K, act);
    const double err = rel_err(y, ref, Ms[i] * N), tol = skinny ? 1e-5 : 2e-5 * sqrt((double)K) + 1e-5;
    th_note_error(err, tol);
    ck_assert_msg(err <= tol, "%s r16 M=%zu act %d: error %g > %g", tn, Ms[i], (int)act, err, tol);
    free(ref); free(y);
  }
  th_profiled_expect("skinny_r16f", "skinny_r16", 0);
  if (th_ctx->caps.is_cpu) { /* the float path unless the integer one is asked for */
    ck_assert_int_eq(clf__r16_path(th_ctx, dt, 1), CLF__R16_FLOAT);
    ck_assert_int_eq(clf__r16_path(th_ctx, dt, 33), CLF__R16_FLOAT);
    ck_assert_int_eq(clf__r16_path(th_ctx, dt, 4096), CLF__R16_FLOAT); /* at every row count */
  }
  env_set("CLFORMER_SKINNY_INT", "1"); /* the integer path up to 8 rows, where the type has it */
  ck_assert_int_eq(clf__r16_path(th_ctx, dt, 8), has_int ? CLF__R16_INT : CLF__R16_FLOAT);
  if (has_int) {
    float *r8 = reference(x, w, bias, 8, N, K, CLF_ACT_SILU, 1), *y8 = run(tw, x, bias, 8, N, K, CLF_ACT_SILU);
    ck_assert_msg(rel_err(y8, r8, 8 * N) <= 1e-5, "%s r16 M=8 on the integer path: error %g", tn,
                  rel_err(y8, r8, 8 * N));
    free(r8); free(y8);
    th_profiled_expect("skinny_r16", NULL, 0);
  }
  env_set("CLFORMER_SKINNY_INT", NULL);
  env_set("CLFORMER_SKINNY_ROWS", "8"); /* past 8 rows: expand_r16 and CLBlast */
  ck_assert_int_eq(clf__r16_path(th_ctx, dt, 33), CLF__R16_GEMM);
  float *ref = reference(x, w, bias, 33, N, K, CLF_ACT_GELU, 0), *y = run(tw, x, bias, 33, N, K, CLF_ACT_GELU);
  const double err = rel_err(y, ref, 33 * N), tol = 2e-5 * sqrt((double)K) + 1e-5;
  ck_assert_msg(err <= tol, "%s r16 M=33 through CLBlast: error %g > %g", tn, err, tol);
  free(ref); free(y);
  env_set("CLFORMER_SKINNY_ROWS", NULL);
  /* nothing else reads it */
  void *host = malloc(bytes);
  ck_assert_int_eq(clf_tensor_download(th_ctx, tw, host, bytes), CLF_E_DTYPE);
  ck_assert_msg(strstr(clf_last_error(th_ctx), "16-row interleave") != NULL, "%s", clf_last_error(th_ctx));
  clf_tensor *tx = th_tensor(CLF_F32, 2, TH_SHAPE(1, K), x), *ty = th_empty(CLF_F32, 2, TH_SHAPE(K, N));
  ck_assert_int_eq(clf_linear(th_ctx, tx, tw, CLF_WEIGHT_IN_OUT, NULL, CLF_ACT_NONE, ty, NULL), CLF_E_DTYPE);
  free(host); free(raw); free(packed); free(back); free(w); free(x); free(bias);
  clf_tensor_destroy(tx); clf_tensor_destroy(ty); clf_tensor_destroy(tw);
  th_profiled_expect("expand_r16", "skinny_r16", 1);
}
END_TEST

/* clf_linear_weight_prepare (the public repacking): the types made from
 * f32 (Q8_0 and Q4_0 in clformer's split layout, Q5_0, Q4_K, Q6_K; F32
 * and F16, which stay as they are), 40 rows, laid out as a loader lays
 * them, interleaved exactly where clf__r16_wanted says, by default and
 * with $CLFORMER_ROWS16 forcing either way; 1, 3 and 9 rows over the
 * prepared weight as over w, both on the float path
 * ($CLFORMER_SKINNY_INT=0: x as it is), at its tolerance (the same
 * weights, summed in another order); its refusals by name. */
START_TEST(weight_prepare_matches) {
  static const clf_dtype types[] = {CLF_F32, CLF_F16, CLF_Q8_0, CLF_Q4_0, CLF_Q5_0, CLF_Q4_K, CLF_Q6_K};
  static const size_t Ms[] = {1, 3, 9};
  static const char *const forced[] = {NULL, "1", "0"};
  const size_t N = 40, K = 512;
  float *wf = th_rand(N * K, 51, -1, 1), *x = th_rand(9 * K, 52, -2, 2), *bias = th_rand(N, 53, -1, 1);
  env_set("CLFORMER_SKINNY_INT", "0");
  for (size_t f = 0; f < 3; f++) {
    env_set("CLFORMER_ROWS16", forced[f]);
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
      const clf_dtype dt = types[t];
      clf_tensor *w = NULL, *wp = NULL, *again = NULL;
      TH_OK(clf_tensor_from_f32(th_ctx, dt, 2, TH_SHAPE(N, K), wf, &w));
      TH_OK(clf_linear_weight_prepare(th_ctx, w, &wp));
      const int inter = clf__r16_wanted(th_ctx, dt, N, K);
      if (forced[f]) ck_assert_int_eq(inter, dt != CLF_F32 && dt != CLF_F16 && forced[f][0] == '1');
      ck_assert_int_eq(wp->r16, inter);
      ck_assert(wp->dtype == dt && wp->ndim == 2 && wp->shape[0] == N && wp->shape[1] == K && wp != w);
      for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++) {
        const clf_activation act = (clf_activation)((t + i) % 6);
        float *y0 = run(w, x, bias, Ms[i], N, K, act), *y1 = run(wp, x, bias, Ms[i], N, K, act);
        const double err = rel_err(y1, y0, Ms[i] * N), tol = 2e-5 * sqrt((double)K) + 1e-5;
        ck_assert_msg(err <= tol, "%s prepared (%s) M=%zu: error %g > %g", clf_dtype_name(dt),
                      inter ? "interleaved" : "copied", Ms[i], err, tol);
        free(y0); free(y1);
      }
      if (inter) TH_FAILS(clf_linear_weight_prepare(th_ctx, wp, &again), CLF_E_INVALID_ARG, "already");
      ck_assert_ptr_null(again);
      clf_tensor_destroy(w); clf_tensor_destroy(wp);
    }
  }
  env_set("CLFORMER_ROWS16", NULL);
  env_set("CLFORMER_SKINNY_INT", NULL);
  clf_tensor *w = NULL, *i32 = th_empty(CLF_I32, 2, TH_SHAPE(4, 32)), *w3 = th_empty(CLF_F32, 3, TH_SHAPE(2, 4, 32));
  TH_FAILS(clf_linear_weight_prepare(th_ctx, i32, NULL), CLF_E_INVALID_ARG, "out is NULL");
  TH_FAILS(clf_linear_weight_prepare(th_ctx, i32, &w), CLF_E_DTYPE, "i32");
  TH_FAILS(clf_linear_weight_prepare(th_ctx, w3, &w), CLF_E_SHAPE, "w");
  TH_FAILS(clf_linear_weight_prepare(th_ctx, NULL, &w), CLF_E_INVALID_ARG, "w is NULL");
  ck_assert_ptr_null(w);
  clf_tensor_destroy(i32); clf_tensor_destroy(w3);
  free(wf); free(x); free(bias);
}
END_TEST

/* Which weights a loader repacks: Q4_0, Q4_1, Q5_x and Q8_0 (any rows, in
 * a multiple of 32) and the k-quants Q2_K to Q6_K (in a multiple of 256)
 * on a CPU device by default, elsewhere not; $CLFORMER_ROWS16 over all of
 * it; other types never. */
START_TEST(r16_wanted) {
  env_set("CLFORMER_ROWS16", NULL);
  ck_assert_int_eq(clf__r16_wanted(th_ctx, CLF_Q4_1, 64, 96), th_ctx->caps.is_cpu);
  ck_assert_int_eq(clf__r16_wanted(th_ctx, CLF_Q4_1, 50257, 96), th_ctx->caps.is_cpu); /* the last group padded */
  ck_assert_int_eq(clf__r16_wanted(th_ctx, CLF_Q4_1, 64, 80), 0);
  ck_assert_int_eq(clf__r16_wanted(th_ctx, CLF_Q8_0, 64, 96), th_ctx->caps.is_cpu);
  ck_assert_int_eq(clf__r16_wanted(th_ctx, CLF_Q5_0, 64, 96), th_ctx->caps.is_cpu);
  ck_assert_int_eq(clf__r16_wanted(th_ctx, CLF_Q4_0, 64, 96), th_ctx->caps.is_cpu);
  ck_assert_int_eq(clf__r16_wanted(th_ctx, CLF_F16, 64, 96), 0);
  ck_assert_int_eq(clf__r16_wanted(th_ctx, CLF_Q4_K, 64, 256), th_ctx->caps.is_cpu);
  ck_assert_int_eq(clf__r16_wanted(th_ctx, CLF_Q6_K, 64, 256), th_ctx->caps.is_cpu);
  ck_assert_int_eq(clf__r16_wanted(th_ctx, CLF_Q5_K, 64, 256), th_ctx->caps.is_cpu);
  ck_assert_int_eq(clf__r16_wanted(th_ctx, CLF_Q2_K, 64, 256), th_ctx->caps.is_cpu);
  ck_assert_int_eq(clf__r16_wanted(th_ctx, CLF_Q3_K, 64, 256), th_ctx->caps.is_cpu);
  ck_assert_int_eq(clf__r16_wanted(th_ctx, CLF_Q3_K, 64, 96), 0); /* a super-block is 256 */
  ck_assert_int_eq(clf__r16_wanted(th_ctx, CLF_F32, 64, 256), 0);
  env_set("CLFORMER_ROWS16", "0");
  ck_assert_int_eq(clf__r16_wanted(th_ctx, CLF_Q4_1, 64, 96), 0);
  env_set("CLFORMER_ROWS16", "1");
  ck_assert_int_eq(clf__r16_wanted(th_ctx, CLF_Q4_1, 64, 96), 1);
  ck_assert_int_eq(clf__r16_wanted(th_ctx, CLF_Q6_K, 64, 256), 1);
  ck_assert_int_eq(clf__r16_wanted(th_ctx, CLF_Q4_K, 64, 96), 0); /* a super-block is 256 */
  setenv("CLFORMER_ROWS16", "yes", 1);
  ck_assert_int_eq(clf__env_reload(th_ctx), CLF_E_INVALID_ARG);
  env_set("CLFORMER_ROWS16", NULL);
}
END_TEST

/* A bad value of the variable is refused by name when a context reads it. */
START_TEST(int_env_refused) {
  setenv("CLFORMER_SKINNY_INT", "yes", 1);
  ck_assert_int_eq(clf__env_reload(th_ctx), CLF_E_INVALID_ARG);
  ck_assert_msg(strstr(clf_last_error(NULL), "CLFORMER_SKINNY_INT=\"yes\" is not 0, 1 or dot") != NULL, "%s",
                clf_last_error(NULL));
  env_set("CLFORMER_SKINNY_INT", NULL);
}
END_TEST

/* The linear family builds a program for each kernel it runs (program.c,
 * linear.cl's CLF_ONLY): skinny_tile's and quantize_q8's programs hold one
 * kernel each, where clf_context_prepare's build of the same options holds
 * them all; quantize_q8 comes from one program a context whatever the
 * products' types (two types on the integer path here: one program); a
 * kernel the file does not have is an error that names it. */
static cl_uint kernels_in(const char *options) {
  for (const clf__program *p = th_ctx->programs; p; p = p->next)
    if (strcmp(p->family, "linear") == 0 && strcmp(p->options, options) == 0 && p->program) {
      size_t n = 0;
      ck_assert_int_eq(clGetProgramInfo(p->program, CL_PROGRAM_NUM_KERNELS, sizeof n, &n, NULL), CL_SUCCESS);
      return (cl_uint)n;
    }
  return 0;
}

START_TEST(linear_kernel_a_program) {
  char opts[512], own[600];
  clf__linear_type_opts(CLF_Q8_0, opts, sizeof opts);
  clf__kernel *k;
  TH_OK(clf__get_kernel(th_ctx, "linear", opts, "skinny_tile", &k));
  snprintf(own, sizeof own, "%s -DCLF_ONLY=1 -DCLF_ONLY_skinny_tile=1", opts);
  ck_assert_uint_eq(kernels_in(own), 1);
  TH_OK(clf_context_prepare(th_ctx, "linear", opts));
  ck_assert_uint_gt(kernels_in(opts), 1);
  ck_assert_int_ne(clf__get_kernel(th_ctx, "linear", opts, "no_such_kernel", &k), CLF_OK);
  ck_assert_msg(strstr(clf_last_error(th_ctx), "no_such_kernel") != NULL, "%s", clf_last_error(th_ctx));

  const size_t N = 37, K = 96, M = 2;
  float *x = th_rand(M * K, 61, -2, 2), *bias = th_rand(N, 62, -1, 1);
  env_set("CLFORMER_SKINNY_INT", "1");
  for (int t = 0; t < 2; t++) {
    float *w;
    clf_tensor *tw = make_weight(int_types[t], N, K, (uint32_t)(63 + t), &w);
    free(run(tw, x, bias, M, N, K, CLF_ACT_NONE));
    free(w);
    clf_tensor_destroy(tw);
  }
  env_set("CLFORMER_SKINNY_INT", NULL);
  int quantizers = 0;
  for (const clf__program *p = th_ctx->programs; p; p = p->next)
    if (strstr(p->options, "-DCLF_ONLY_quantize_q8=1")) {
      quantizers++;
      ck_assert_uint_eq(kernels_in(p->options), 1);
    }
  ck_assert_int_eq(quantizers, 1);
  free(x); free(bias);
}
END_TEST

int main(void) {
  Suite *s = suite_create("linear_int");
  TCase *c = tcase_create("core");
  tcase_add_test(c, int_matches_reference);
  tcase_add_test(c, int_follows_profile_and_env);
  tcase_add_test(c, int_held_x_quantized_once);
  tcase_add_test(c, int_norm_makes_blocks);
  tcase_add_test(c, int_glu_makes_blocks);
  tcase_add_test(c, int_env_refused);
  tcase_add_test(c, kq_matches_reference);
  tcase_add_test(c, kq_held_x_shared);
  tcase_add_loop_test(c, r16_matches_reference, 0, 10);
  tcase_add_test(c, r16_wanted);
  tcase_add_test(c, weight_prepare_matches);
  tcase_add_test(c, linear_kernel_a_program);
  suite_add_tcase(s, c);
  return th_run(s);
}
