/* test_linear.c - weight storage types and the skinny (M <= 8) linear path
 * against CPU references in double: the f16 / Q8_0 / Q4_0 formats as
 * clformer.h states them (decoded here independently of the library, f16
 * through the compiler's _Float16), clf_linear with every weight type on
 * both paths (matrix-vector kernel and expanded weight + CLBlast), ggml's
 * block types uploaded as blocks and decoded for the reference by
 * clf_gguf_dequantize (test_gguf checks it against gguf-py), every
 * work-group shape of the skinny kernels (f32 [in, out] too), and bad
 * arguments. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "device/reference.h"
#include "harness.h"
#include "ops/ops.h" /* clf__skinny_fit: the group a shape runs in */

/* The environment is read when a context is made (host/core/env.c): a
 * test that changes it under th_ctx has th_ctx read it again. */
static void env_set(const char *name, const char *value) {
  if (value) setenv(name, value, 1);
  else unsetenv(name);
  if (th_ctx) TH_OK(clf__env_reload(th_ctx));
}

static const clf_dtype types[] = {CLF_F32, CLF_F16, CLF_Q8_0, CLF_Q4_0};

static float half_to_float(const unsigned char *p) {
  _Float16 h;
  memcpy(&h, p, 2);
  return (float)h;
}

/* The stored tensor's values as floats, decoded per clformer.h. */
static float *decode(clf_dtype dt, const unsigned char *p, size_t rows, size_t K) {
  const size_t n = rows * K;
  float *w = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) {
    const size_t b = i / 32, j = i % 32;
    switch (dt) {
      case CLF_F32: memcpy(&w[i], p + 4 * i, 4); break;
      case CLF_F16: w[i] = half_to_float(p + 2 * i); break;
      case CLF_Q8_0: w[i] = half_to_float(p + n + 2 * b) * (float)(signed char)p[i]; break;
      default: {
        const unsigned char byte = p[b * 16 + j % 16];
        const int q = (j < 16 ? byte & 15 : byte >> 4) - 8;
        w[i] = half_to_float(p + n / 2 + 2 * b) * (float)q;
      }
    }
  }
  return w;
}

/* How far a stored weight may be from the value it was made from: f16
 * rounding (2^-11 relative), half a quantisation step of the block (Q8_0),
 * or a whole one (Q4_0: the top of the range clamps to 7 steps of 8). */
static void check_format(clf_dtype dt, const float *src, const float *got, size_t n) {
  for (size_t b = 0; b < n / 32; b++) {
    double amax = 0;
    for (int j = 0; j < 32; j++) amax = fmax(amax, fabs(src[b * 32 + j]));
    for (int j = 0; j < 32; j++) {
      const size_t i = b * 32 + j;
      const double err = fabs((double)got[i] - src[i]);
      double lim = fabs(src[i]) * 0x1p-11;
      if (dt == CLF_Q8_0) lim = amax / 127 * (0.5 + 1e-3);
      if (dt == CLF_Q4_0) lim = amax / 8 * (1 + 1e-3);
      ck_assert_msg(err <= lim, "%s element %zu: %g stored as %g (error %g > %g)", clf_dtype_name(dt), i, src[i],
                    got[i], err, lim);
    }
  }
}

START_TEST(formats_round_trip) {
  const size_t rows = 5, K = 96, n = rows * K;
  float *src = th_rand(n, 11, -2, 2);
  src[7] = 0.0f;                    /* zero */
  for (int j = 0; j < 32; j++) src[32 + j] = 0.0f; /* an all-zero block: scale 0 */
  src[70] = 3.5f;                   /* the block's extreme, positive */
  src[100] = -3.25f;                /* ... and negative */
  for (size_t t = 0; t < 4; t++) {
    clf_tensor *w = NULL;
    TH_OK(clf_tensor_from_f32(th_ctx, types[t], 2, TH_SHAPE(rows, K), src, &w));
    const size_t want = types[t] == CLF_F32 ? 4 * n : types[t] == CLF_F16 ? 2 * n
                        : types[t] == CLF_Q8_0 ? n + n / 16 : n / 2 + n / 16;
    ck_assert_uint_eq(clf_tensor_bytes(w), want);
    unsigned char *p = th_download(w);
    float *got = decode(types[t], p, rows, K);
    check_format(types[t], src, got, n);
    for (int j = 0; j < 32; j++) ck_assert_float_eq(got[32 + j], 0.0f);
    if (types[t] == CLF_Q4_0) ck_assert_float_eq(got[100], -3.25f); /* the extreme is exact */
    if (types[t] == CLF_Q8_0) ck_assert(fabsf(got[70] - 3.5f) < 3.5f * 0x1p-10f);
    free(p);
    free(got);
    clf_tensor_destroy(w);
  }
  free(src);
}
END_TEST

/* y = act(x W^T + b) through clf_linear with W stored as dt, against the
 * reference on the stored values (so the test checks the product, the
 * format test above the storage).  x is a view at an offset. */
static void check_linear_layout(clf_dtype dt, int in_out, size_t M, size_t N, size_t K, int with_bias,
                                clf_activation act, uint32_t seed) {
  float *x = th_rand(M * K + 3, seed, -1, 1), *wsrc = th_rand(N * K, seed + 1, -1, 1);
  float *bias = th_rand(N, seed + 2, -1, 1), *ref = malloc((M * N + 1) * sizeof(float));
  clf_tensor *tw = NULL, *xb = th_tensor(CLF_F32, 1, TH_SHAPE(M * K + 3), x), *tx = NULL;
  TH_OK(clf_tensor_view(xb, 3, 2, TH_SHAPE(M, K), &tx));
  unsigned char *p = NULL;
  float *w;
  if (in_out) { /* f32 [K, N]: the reference reads wsrc as [N, K] */
    float *t = malloc(N * K * sizeof(float));
    for (size_t o = 0; o < N; o++)
      for (size_t k = 0; k < K; k++) t[k * N + o] = wsrc[o * K + k];
    TH_OK(clf_tensor_from_f32(th_ctx, CLF_F32, 2, TH_SHAPE(K, N), t, &tw));
    free(t);
    w = malloc(N * K * sizeof(float));
    memcpy(w, wsrc, N * K * sizeof(float));
  } else {
    TH_OK(clf_tensor_from_f32(th_ctx, dt, 2, TH_SHAPE(N, K), wsrc, &tw));
    p = th_download(tw);
    w = decode(dt, p, N, K);
  }
  for (size_t m = 0; m < M; m++)
    for (size_t o = 0; o < N; o++) {
      double acc = with_bias ? bias[o] : 0.0;
      for (size_t k = 0; k < K; k++) acc += (double)x[3 + m * K + k] * w[o * K + k];
      ref[m * N + o] = (float)clf__ref_act(act, acc);
    }
  clf_tensor *tb = th_tensor(CLF_F32, 1, TH_SHAPE(N), bias), *ty = th_empty(CLF_F32, 2, TH_SHAPE(M, N));
  TH_OK(clf_linear(th_ctx, tx, tw, in_out ? CLF_WEIGHT_IN_OUT : CLF_WEIGHT_OUT_IN, with_bias ? tb : NULL, act, ty,
                   NULL));
  float *y = th_download(ty);
  /* f32 sums of K products of |x| <= 1 and |w| <= 2 in any order, plus
   * the activations' f32 evaluation. */
  char what[96];
  snprintf(what, sizeof what, "%s%s M=%zu N=%zu K=%zu", clf_dtype_name(dt), in_out ? " [in, out]" : "", M, N, K);
  const double tol = 2e-5 * sqrt((double)K) + 1e-5;
  const double err = th_max_abs_diff(y, ref, M * N) / fmax(1.0, th_max_abs(ref, M * N));
  th_note_error(err, tol);
  ck_assert_msg(err <= tol, "%s: error %g > %g", what, err, tol);
  free(x); free(wsrc); free(bias); free(ref); free(p); free(w); free(y);
  clf_tensor_destroy(tw); clf_tensor_destroy(xb); clf_tensor_destroy(tx);
  clf_tensor_destroy(tb); clf_tensor_destroy(ty);
}

static void check_linear(clf_dtype dt, size_t M, size_t N, size_t K, int with_bias, clf_activation act,
                         uint32_t seed) {
  check_linear_layout(dt, 0, M, N, K, with_bias, act, seed);
}

START_TEST(linear_every_weight_type) {
  /* up to clf__skinny_max_rows rows run the skinny kernel (launches of
   * 8; 64 on a CPU by default, or the profile's measured crossover for the
   * type), more expand the weight for CLBlast: the last M of each type is
   * past its own crossover */
  static const size_t Ms[] = {1, 2, 3, 8, 9, 20, 70, 0};
  for (size_t t = 0; t < 4; t++)
    for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++)
      check_linear(types[t], Ms[i] ? Ms[i] : clf__skinny_max_rows(th_ctx, types[t], 0, NULL) + 3, 37, 96,
                   i % 2 == 0, (clf_activation)(i % 6), (uint32_t)(10 * t + i));
  /* a K the f32/f16 chunk does not divide: CLBlast for f32 */
  check_linear(CLF_F32, 1, 5, 36, 1, CLF_ACT_NONE, 99);
  /* f32 [in, out] (encoders' layout): the skinny_t kernel up to its rows,
   * CLBlast past them; N = 37 ends in a partial strip of 8 columns, K = 37
   * in rows past the last group of four */
  const size_t past_t = clf__skinny_max_rows(th_ctx, CLF_F32, 1, NULL) + 3;
  for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++) {
    const size_t m = Ms[i] ? Ms[i] : past_t;
    check_linear_layout(CLF_F32, 1, m, 37, 96, i % 2 == 0, (clf_activation)(i % 6), (uint32_t)(60 + i));
    check_linear_layout(CLF_F32, 1, m, 64, 37, i % 2 == 1, CLF_ACT_NONE, (uint32_t)(70 + i));
  }
}
END_TEST

/* The group that a skinny kernel asked for `shape` ("AxB") runs in for
 * M rows: the shape itself where the kernel built in it allows that many
 * work-items (CL_KERNEL_WORK_GROUP_SIZE and local memory, which on rusticl
 * allows 32 for every kernel), else a smaller one that the kernel built in
 * it allows, said on stderr. */
static void check_group(clf_dtype wt, int in_out, const char *shape, size_t M) {
  unsigned a, b;
  ck_assert(sscanf(shape, "%ux%u", &a, &b) == 2);
  size_t mmax = 1;
  while (mmax < M && mmax < CLF__SKINNY_MAX_M) mmax *= 2;
  clf__skinny_group g;
  TH_OK(clf__skinny_fit(th_ctx, wt, in_out, clf__skinny_kind(th_ctx, wt, in_out), mmax, &g));
  if ((size_t)a * b <= th_ctx->caps.max_wg) { /* the device's own limits allow these shapes */
    ck_assert_uint_eq(g.want[0], a);
    ck_assert_uint_eq(g.want[1], b);
  } else { /* a smaller device emulated (CLFORMER_LIMITS wg=, the matrix's mobile column) */
    ck_assert(g.want[0] <= a && g.want[1] <= b && (size_t)g.want[0] * g.want[1] <= th_ctx->caps.max_wg);
  }
  ck_assert_ptr_nonnull(g.kernel);
  ck_assert_uint_le(g.got[0] * g.got[1], g.kernel->max_wg);
  if ((size_t)a * b <= g.want_limit) {
    ck_assert_uint_eq(g.got[0], a);
    ck_assert_uint_eq(g.got[1], b);
  } else {
    ck_assert(g.got[0] <= a && g.got[1] <= b && g.got[0] * g.got[1] < (size_t)a * b);
    fprintf(stderr, "note: %s %s %s: the kernel allows %zu work-items per group; it ran as %zux%zu\n",
            in_out ? "skinny_t" : "skinny", clf_dtype_name(wt), shape, g.want_limit, g.got[0], g.got[1]);
  }
}

/* Every work-group shape of the [in, out] kernel, through
 * $CLFORMER_SKINNY_T: K split over work-items (KS > 1, as on a GPU) with
 * the local reduction, and groups wider than N. */
START_TEST(skinny_t_work_group_shapes) {
  static const char *const shapes[] = {"1x1", "4x4", "32x8", "16x2", "64x1"};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    env_set("CLFORMER_SKINNY_T", shapes[s]);
    check_group(CLF_F32, 1, shapes[s], 1 + 2 * s);
    check_linear_layout(CLF_F32, 1, 1 + 2 * s, 45, 83, 1, CLF_ACT_GELU, (uint32_t)(80 + s));
  }
  env_set("CLFORMER_SKINNY_T", NULL);
}
END_TEST

/* Every work-group shape of the skinny kernel, through $CLFORMER_SKINNY
 * (launches of up to 8 rows: skinny_tile, which takes M >= 2 on a CPU, off). */
START_TEST(skinny_work_group_shapes) {
  static const char *const shapes[] = {"1x1", "1x8", "4x2", "32x4", "8x16"};
  env_set("CLFORMER_SKINNY_TILE", "0");
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    env_set("CLFORMER_SKINNY", shapes[s]);
    for (size_t t = 0; t < 4; t++) {
      check_group(types[t], 0, shapes[s], 1 + s);
      check_linear(types[t], 1 + s, 33, 320, 1, CLF_ACT_GELU, (uint32_t)(50 + s));
    }
  }
  env_set("CLFORMER_SKINNY", NULL);
  env_set("CLFORMER_SKINNY_TILE", NULL);
}
END_TEST

static int path_has(const char *a, const char *b, unsigned long count);

/* A row's output does not depend on the rows beside it: x's first row alone
 * and within products of 2, 5 and 9 rows give the same bits, for every
 * weight type (on a CPU: the 1 x 4 and the 4 x 3 tiles; elsewhere one and
 * several rows of the same launch kernel). */
START_TEST(linear_rows_independent) {
  const size_t K = 64, N = 37, Ms[] = {1, 2, 5, 9};
  float *x = th_rand(9 * K, 31, -1.0f, 1.0f), *w = th_rand(N * K, 32, -1.0f, 1.0f), *b = th_rand(N, 33, -1.0f, 1.0f);
  for (size_t t = 0; t < 4; t++) {
    clf_tensor *tw = NULL, *tb = th_tensor(CLF_F32, 1, TH_SHAPE(N), b);
    TH_OK(clf_tensor_from_f32(th_ctx, types[t], 2, TH_SHAPE(N, K), w, &tw));
    float *first = NULL;
    for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++) {
      if (Ms[i] > clf__skinny_max_rows(th_ctx, types[t], 0, NULL)) continue;
      clf_tensor *tx = th_tensor(CLF_F32, 2, TH_SHAPE(Ms[i], K), x), *ty = th_empty(CLF_F32, 2, TH_SHAPE(Ms[i], N));
      TH_OK(clf_linear(th_ctx, tx, tw, CLF_WEIGHT_OUT_IN, tb, CLF_ACT_GELU, ty, NULL));
      float *y = th_download(ty);
      if (!first) first = y;
      else {
        ck_assert_msg(memcmp(first, y, N * sizeof(float)) == 0, "%s: row 0 alone differs from row 0 of %zu rows",
                      clf_dtype_name(types[t]), Ms[i]);
        free(y);
      }
      clf_tensor_destroy(tx); clf_tensor_destroy(ty);
    }
    free(first);
    clf_tensor_destroy(tw); clf_tensor_destroy(tb);
  }
  free(x); free(w); free(b);
}
END_TEST

/* Whether skinny_tile runs: the profile's "Tiles on=1" on a CPU-class
 * context, overridden by $CLFORMER_SKINNY_TILE; never for [in, out] or on
 * the GPU class. */
static void tiles_gpu_class(void) { ck_assert(!clf__skinny_tiles(th_ctx, 0, 5)); }
START_TEST(tiles_follow_profile) {
  const unsigned on = 1, off = 0;
  if (th_ctx->caps.is_cpu) {
    ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "on", (unsigned[]){on, 0}));
    ck_assert(clf__skinny_tiles(th_ctx, 0, 5) && !clf__skinny_tiles(th_ctx, 1, 5) && !clf__skinny_tiles(th_ctx, 0, 0));
    env_set("CLFORMER_SKINNY_TILE", "0");
    ck_assert(!clf__skinny_tiles(th_ctx, 0, 5));
    ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "on", (unsigned[]){off, 0}));
    env_set("CLFORMER_SKINNY_TILE", "1");
    ck_assert(clf__skinny_tiles(th_ctx, 0, 5));
    env_set("CLFORMER_SKINNY_TILE", NULL);
    ck_assert(!clf__skinny_tiles(th_ctx, 0, 5));
    ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "on", NULL));
  }
  env_set("CLFORMER_SKINNY_TILE", "1");
  th_with_context("gpu", NULL, tiles_gpu_class);
  env_set("CLFORMER_SKINNY_TILE", NULL);
}
END_TEST

/* The one-row build of skinny_tile with the activation in a bias_act pass
 * of its own (the profile's "Tiles act_pass=1", $CLFORMER_SKINNY_ACT_PASS
 * over it) gives the bits of the build that applies it in the kernel and
 * of row 0 among 5 rows (the 4 x 3 tiles), every weight type and
 * activation, with a bias (an activation applied twice or not at all
 * would differ). */
START_TEST(tiles_act_pass) {
  /* the tiles wherever the class is CPU (on the GPU class the launches
   * run, which apply their activation whatever act_pass says: the same
   * bits must come out there too) */
  env_set("CLFORMER_SKINNY_TILE", "1");
  const unsigned on[2] = {1, 0};
  ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "act_pass", on));
  ck_assert(clf__skinny_act_pass(th_ctx));
  env_set("CLFORMER_SKINNY_ACT_PASS", "0");
  ck_assert(!clf__skinny_act_pass(th_ctx));
  ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "act_pass", NULL));
  env_set("CLFORMER_SKINNY_ACT_PASS", "1");
  ck_assert(clf__skinny_act_pass(th_ctx));
  env_set("CLFORMER_SKINNY_ACT_PASS", NULL);
  ck_assert(!clf__skinny_act_pass(th_ctx));
  const size_t K = 96, N = 37;
  float *x = th_rand(5 * K, 61, -2.0f, 2.0f), *w = th_rand(N * K, 62, -1.0f, 1.0f), *b = th_rand(N, 63, -1.0f, 1.0f);
  clf_tensor *tb = th_tensor(CLF_F32, 1, TH_SHAPE(N), b);
  for (size_t t = 0; t < 4; t++) {
    clf_tensor *tw = NULL;
    TH_OK(clf_tensor_from_f32(th_ctx, types[t], 2, TH_SHAPE(N, K), w, &tw));
    for (int act = 0; act < 6; act++) {
      float *y[3];
      for (int v = 0; v < 3; v++) { /* one row in the kernel, one row and a pass, 5 rows */
        const size_t M = v == 2 ? 5 : 1;
        env_set("CLFORMER_SKINNY_ACT_PASS", v == 1 ? "1" : "0");
        clf_tensor *tx = th_tensor(CLF_F32, 2, TH_SHAPE(M, K), x), *ty = th_empty(CLF_F32, 2, TH_SHAPE(M, N));
        TH_OK(clf_linear(th_ctx, tx, tw, CLF_WEIGHT_OUT_IN, tb, (clf_activation)act, ty, NULL));
        y[v] = th_download(ty);
        clf_tensor_destroy(tx);
        clf_tensor_destroy(ty);
      }
      ck_assert_msg(memcmp(y[0], y[1], N * sizeof(float)) == 0, "%s, activation %d: the pass changes bits",
                    clf_dtype_name(types[t]), act);
      ck_assert_msg(memcmp(y[0], y[2], N * sizeof(float)) == 0, "%s, activation %d: one row differs from 5",
                    clf_dtype_name(types[t]), act);
      for (int v = 0; v < 3; v++) free(y[v]);
    }
    clf_tensor_destroy(tw);
  }
  env_set("CLFORMER_SKINNY_ACT_PASS", NULL);
  env_set("CLFORMER_SKINNY_TILE", NULL);
  clf_tensor_destroy(tb);
  free(x); free(w); free(b);
}
END_TEST

static void put_half(unsigned char *p, float v);

/* One row against 4-bit blocks in skinny_pair (rows in pairs,
 * $CLFORMER_SKINNY_PAIR=1) gives the bits of skinny_tile's one-row build
 * (=0) and of row 0 among 5 rows (the 4 x 3 tiles): Q4_0 made from f32 and
 * Q4_1 blocks as a GGUF file holds them, N not a multiple of the pair's 4
 * rows, every activation, in the kernel and in a pass of its own, with
 * some blocks' f16 scales subnormal (weights under 2^-14 / 8: converted
 * exactly, in integer operations, on devices without half arithmetic).
 * The path is recorded as skinny_pair where the tiles run. */
START_TEST(pair_same_bits) {
  env_set("CLFORMER_SKINNY_TILE", "1");
  env_set("CLFORMER_SKINNY_ACT_PASS", NULL);
  const size_t K = 96, N = 37;
  float *x = th_rand(5 * K, 71, -2.0f, 2.0f), *w = th_rand(N * K, 72, -1.0f, 1.0f), *b = th_rand(N, 73, -1.0f, 1.0f);
  for (size_t i = 3 * K; i < 5 * K; i++) w[i] *= 1e-6f; /* rows 3 and 4: subnormal Q4_0 scales */
  const size_t blocks = N * K / 32;
  unsigned char *raw = malloc(blocks * 20);
  uint32_t r = 12345;
  for (size_t i = 0; i < blocks * 20; i++) raw[i] = (unsigned char)((r = r * 1664525u + 1013904223u) >> 24);
  for (size_t k = 0; k < blocks; k++) {
    put_half(raw + 20 * k, k % 5 == 1 ? 3e-6f : 0.01f + 0.002f * (float)(k % 7)); /* d, subnormal in some */
    put_half(raw + 20 * k + 2, (k % 2 ? -0.05f : 0.04f) * (k % 5 == 2 ? 1e-4f : 1.0f));  /* m */
  }
  th_profiled_begin(NULL);
  clf_tensor *tb = th_tensor(CLF_F32, 1, TH_SHAPE(N), b), *tw[2] = {NULL, NULL};
  TH_OK(clf_tensor_from_f32(th_ctx, CLF_Q4_0, 2, TH_SHAPE(N, K), w, &tw[0]));
  TH_OK(clf_tensor_create(th_ctx, CLF_Q4_1, 2, TH_SHAPE(N, K), &tw[1]));
  TH_OK(clf_tensor_upload(th_ctx, tw[1], raw, blocks * 20));
  const int tiles = clf__skinny_tiles(th_ctx, 0, 1);
  for (int t = 0; t < 2; t++)
    for (int act = 0; act < 6; act++)
      for (int pass = 0; pass < 2; pass++) {
        float *y[3];
        env_set("CLFORMER_SKINNY_ACT_PASS", pass ? "1" : "0");
        for (int v = 0; v < 3; v++) { /* one row in pairs, one row in skinny_tile, 5 rows */
          const size_t M = v == 2 ? 5 : 1;
          env_set("CLFORMER_SKINNY_PAIR", v == 0 ? "1" : "0");
          clf_tensor *tx = th_tensor(CLF_F32, 2, TH_SHAPE(M, K), x), *ty = th_empty(CLF_F32, 2, TH_SHAPE(M, N));
          TH_OK(clf_linear(th_ctx, tx, tw[t], CLF_WEIGHT_OUT_IN, tb, (clf_activation)act, ty, NULL));
          y[v] = th_download(ty);
          clf_tensor_destroy(tx);
          clf_tensor_destroy(ty);
        }
        for (int v = 1; v < 3; v++)
          ck_assert_msg(memcmp(y[0], y[v], N * sizeof(float)) == 0, "%s, activation %d, act_pass %d: pairs differ "
                        "from %s", clf_dtype_name(tw[t]->dtype), act, pass, v == 1 ? "the one-row tiles" : "row 0 of 5");
        for (int v = 0; v < 3; v++) free(y[v]);
      }
  env_set("CLFORMER_SKINNY_ACT_PASS", NULL);
  env_set("CLFORMER_SKINNY_PAIR", "1");
  /* Q4_1's 7 one-row products in pairs with the activation in the kernel
   * (act_pass 0, and 1 without an activation) */
  ck_assert_int_eq(path_has("x [1, 96] w q4_1 [37, 96] [out, in]: skinny_pair, 1 launch (", "", 7), tiles);
  clf_tensor_destroy(tw[0]); clf_tensor_destroy(tw[1]); clf_tensor_destroy(tb);
  th_profiled_expect(tiles ? "skinny_pair" : "skinny", tiles ? NULL : "skinny_pair", 1);
  env_set("CLFORMER_SKINNY_PAIR", NULL);
  env_set("CLFORMER_SKINNY_TILE", NULL);
  free(raw); free(x); free(w); free(b);
}
END_TEST

/* Whether skinny_pair runs: for Q4_0 and Q4_1 unless the profile's Tiles
 * line says pairs_off=1, $CLFORMER_SKINNY_PAIR over it; never other types. */
START_TEST(pair_follows_profile) {
  env_set("CLFORMER_SKINNY_PAIR", NULL); /* a failed test before may have left it set */
  ck_assert(clf__skinny_pair(th_ctx, CLF_Q4_0) && clf__skinny_pair(th_ctx, CLF_Q4_1));
  ck_assert(!clf__skinny_pair(th_ctx, CLF_Q8_0) && !clf__skinny_pair(th_ctx, CLF_F32) &&
            !clf__skinny_pair(th_ctx, CLF_Q4_K));
  ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "pairs_off", (unsigned[]){1, 0}));
  ck_assert(!clf__skinny_pair(th_ctx, CLF_Q4_0));
  env_set("CLFORMER_SKINNY_PAIR", "1");
  ck_assert(clf__skinny_pair(th_ctx, CLF_Q4_0) && !clf__skinny_pair(th_ctx, CLF_Q8_0));
  ck_assert(clf__tuned_group_set(th_ctx, CLF__TILES_TUNING, "pairs_off", NULL));
  env_set("CLFORMER_SKINNY_PAIR", "0");
  ck_assert(!clf__skinny_pair(th_ctx, CLF_Q4_1));
  env_set("CLFORMER_SKINNY_PAIR", NULL);
  ck_assert(clf__skinny_pair(th_ctx, CLF_Q4_1));
}
END_TEST

/* skinny_tile (the CPU class's [N, K] path) against the CPU reference for
 * every weight type: M and N on both sides of its 4 x 3 tile and 4 row
 * blocks a group and of its one-row shapes (f32 1 x 4 tiles, f16 1 x 8, 8
 * work-items a group; q8 1 x 1, 16; q4 skinny_pair's 4 rows) (partial
 * tiles, rows and groups), each recorded as one launch of it;
 * off ($CLFORMER_SKINNY_TILE=0), the same products in launches of up to 8
 * rows. */
START_TEST(skinny_tile_shapes) {
  static const size_t Ms[] = {1, 2, 3, 4, 5, 13, 17, 33}, Ns[] = {1, 2, 3, 4, 37, 67};
  /* where the profile has no tiles (and on the GPU class) they never run:
   * the launches once */
  const int cpu = clf__skinny_tiles(th_ctx, 0, 1);
  for (int off = !cpu; off < 2; off++) {
    if (off) env_set("CLFORMER_SKINNY_TILE", "0");
    th_profiled_begin(NULL);
    for (size_t t = 0; t < 4; t++)
      for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++)
        for (size_t j = 0; j < sizeof Ns / sizeof *Ns; j++)
          if (Ms[i] <= clf__skinny_max_rows(th_ctx, types[t], 0, NULL))
            check_linear(types[t], Ms[i], Ns[j], 64, (i + j) % 2, (clf_activation)((i + j + t) % 6),
                         (uint32_t)(400 + 50 * t + 5 * i + j));
    ck_assert_int_eq(path_has("x [5, 64] w q4_0 [37, 64] [out, in]: skinny_tile, 1 launch", "", 1), cpu && !off);
    ck_assert_int_eq(path_has("x [5, 64] w q4_0 [37, 64] [out, in]: skinny, 1 launch", "", 1), !cpu || off);
    ck_assert_int_eq(path_has("x [1, 64] w q8_0 [67, 64] [out, in]: skinny_tile, 1 launch", "", 1), cpu && !off);
    const int tile = cpu && !off;
    th_profiled_expect(tile ? "skinny_tile" : "skinny", tile ? "skinny" : "skinny_tile", 1);
  }
  env_set("CLFORMER_SKINNY_TILE", NULL);
}
END_TEST

/* ggml's block types: clformer dtype, ggml's type number, bytes a block,
 * the byte offsets of the block's f16 scales (-1: none). */
static const struct {
  clf_dtype dt;
  unsigned ggml, block, bytes;
  int d, m;
} ggml_types[] = {
    {CLF_Q4_1, 3, 32, 20, 0, 2},     {CLF_Q5_0, 6, 32, 22, 0, -1},    {CLF_Q5_1, 7, 32, 24, 0, 2},
    {CLF_Q2_K, 10, 256, 84, 80, 82}, {CLF_Q3_K, 11, 256, 110, 108, -1}, {CLF_Q4_K, 12, 256, 144, 0, 2},
    {CLF_Q5_K, 13, 256, 176, 0, 2},  {CLF_Q6_K, 14, 256, 210, 208, -1},
};

static void put_half(unsigned char *p, float v) {
  const _Float16 h = (_Float16)v;
  memcpy(p, &h, 2);
}

/* y = act(x W^T + b) with W [N, K] of ggml type g made of seeded random
 * block bytes (scales set to moderate f16 values), against the reference
 * on the weights clf_gguf_dequantize decodes.  On the float kernels: the
 * integer path, which a CPU takes by default for a few rows of the
 * k-quants, rounds x (test_linear_int checks it). */
static void check_ggml(size_t g, size_t M, size_t N, size_t K, int with_bias, clf_activation act, uint32_t seed) {
  env_set("CLFORMER_SKINNY_INT", "0");
  const size_t blocks = N * K / ggml_types[g].block, bytes = blocks * ggml_types[g].bytes;
  unsigned char *raw = malloc(bytes);
  uint32_t r = seed * 2654435761u + 1;
  for (size_t i = 0; i < bytes; i++) raw[i] = (unsigned char)((r = r * 1664525u + 1013904223u) >> 24);
  for (size_t b = 0; b < blocks; b++) {
    unsigned char *blk = raw + b * ggml_types[g].bytes;
    put_half(blk + ggml_types[g].d, 0.002f + (float)(b % 7) * 0.001f);
    if (ggml_types[g].m >= 0) put_half(blk + ggml_types[g].m, (b % 2 ? -1.0f : 1.0f) * 0.003f);
  }
  float *w = malloc(N * K * sizeof(float)), *x = th_rand(M * K, seed, -1, 1), *bias = th_rand(N, seed + 1, -1, 1);
  float *ref = malloc(M * N * sizeof(float));
  TH_OK(clf_gguf_dequantize(ggml_types[g].ggml, raw, N * K, w));
  for (size_t m = 0; m < M; m++)
    for (size_t o = 0; o < N; o++) {
      double acc = with_bias ? bias[o] : 0.0;
      for (size_t k = 0; k < K; k++) acc += (double)x[m * K + k] * w[o * K + k];
      ref[m * N + o] = (float)clf__ref_act(act, acc);
    }
  clf_tensor *tw = NULL;
  TH_OK(clf_tensor_create(th_ctx, ggml_types[g].dt, 2, TH_SHAPE(N, K), &tw));
  ck_assert_uint_eq(clf_tensor_bytes(tw), bytes);
  TH_OK(clf_tensor_upload(th_ctx, tw, raw, bytes));
  clf_tensor *tx = th_tensor(CLF_F32, 2, TH_SHAPE(M, K), x), *tb = th_tensor(CLF_F32, 1, TH_SHAPE(N), bias);
  clf_tensor *ty = th_empty(CLF_F32, 2, TH_SHAPE(M, N));
  TH_OK(clf_linear(th_ctx, tx, tw, CLF_WEIGHT_OUT_IN, with_bias ? tb : NULL, act, ty, NULL));
  float *y = th_download(ty);
  const double tol = 2e-5 * sqrt((double)K) + 1e-5;
  const double err = th_max_abs_diff(y, ref, M * N) / fmax(1.0, th_max_abs(ref, M * N));
  th_note_error(err, tol);
  ck_assert_msg(err <= tol, "%s M=%zu N=%zu K=%zu: error %g > %g", clf_dtype_name(ggml_types[g].dt), M, N, K, err,
                tol);
  free(raw); free(w); free(x); free(bias); free(ref); free(y);
  clf_tensor_destroy(tw); clf_tensor_destroy(tx); clf_tensor_destroy(tb); clf_tensor_destroy(ty);
  env_set("CLFORMER_SKINNY_INT", NULL);
}

/* Each ggml type on the skinny kernels (1, 3, 8 rows), and past the
 * type's crossover, expanded to f32 for CLBlast; K of two super-blocks
 * (under Oclgrind, a simulator, one and fewer rows of W). */
START_TEST(linear_ggml_blocks) {
  const int sim = getenv("CLF_TEST_UNDER_OCLGRIND") != NULL;
  for (size_t g = 0; g < sizeof ggml_types / sizeof *ggml_types; g++) {
    const size_t Ms[] = {1, 3, 8, clf__skinny_max_rows(th_ctx, ggml_types[g].dt, 0, NULL) + 3};
    for (size_t i = 0; i < 4; i++)
      check_ggml(g, Ms[i], sim ? 9 : 37, sim ? 256 : 512, i % 2 == 0, (clf_activation)(i % 6),
                 (uint32_t)(700 + 10 * g + i));
  }
  clf_tensor *t = NULL;
  TH_FAILS(clf_tensor_create(th_ctx, CLF_Q4_K, 2, TH_SHAPE(4, 288), &t), CLF_E_SHAPE, "K a multiple of 256");
  float one[256] = {0}; /* Q5_0, Q4_K and Q6_K it makes (test_weight_types), the others not */
  TH_FAILS(clf_tensor_from_f32(th_ctx, CLF_Q5_K, 2, TH_SHAPE(1, 256), one, &t), CLF_E_DTYPE, "upload ggml blocks");
}
END_TEST

/* The products the suite checks above, fewer of them, on a context of the
 * class th_want_class: the skinny kernels, their groups and CLBlast as
 * that class chooses them. */
static const char *th_want_class;
static void linear_cases(void) {
  int forced = 0;
  ck_assert_str_eq(clf_context_device_class(th_ctx, &forced), th_want_class);
  ck_assert_int_eq(forced, 1);
  static const size_t Ms[] = {1, 3, 8, 9};
  for (size_t t = 0; t < 4; t++)
    for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++)
      check_linear(types[t], Ms[i], 37, 96, i % 2 == 0, (clf_activation)(i % 6), (uint32_t)(110 + 10 * t + i));
  for (size_t g = 0; g < sizeof ggml_types / sizeof *ggml_types; g++) /* the class's skinny groups */
    check_ggml(g, 1 + g % 3, 37, 256, g % 2, CLF_ACT_NONE, (uint32_t)(800 + g));
  for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++) {
    check_linear_layout(CLF_F32, 1, Ms[i], 37, 96, i % 2 == 0, CLF_ACT_GELU, (uint32_t)(160 + i));
    check_linear_layout(CLF_F32, 1, Ms[i], 64, 37, i % 2 == 1, CLF_ACT_NONE, (uint32_t)(170 + i));
  }
}

/* Both classes' choices on this device, whatever it is: on a CPU runtime
 * the GPU branch (32 x 4 skinny groups and 32 x 8 [in, out] groups with K
 * split and reduced in local memory, 8 rows before CLBlast) runs here. */
START_TEST(linear_gpu_and_cpu_class) {
  th_want_class = "gpu";
  th_with_context("gpu", NULL, linear_cases);
  th_want_class = "cpu";
  th_with_context("cpu", NULL, linear_cases);
}
END_TEST

/* A small GPU's limits: groups halved to 64 work-items and to 16 KiB of
 * local memory, then to 32 and the embedded profile's 1 KiB (the [in, out]
 * kernel's 32 bytes of float8 per work-item then leave no K split). */
START_TEST(linear_small_device) {
  th_want_class = "gpu";
  th_with_context("gpu", "wg=64,local=16k", linear_cases);
  th_with_context("gpu", "wg=32,local=1k", linear_cases);
}
END_TEST

/* ---- variants that need a device feature (sub-groups, fp16) ----
 * Run on th_profiled_begin's context; a variant is forced on by a passing
 * verdict recorded as clf_validate records one (the comparison with the CPU
 * reference is then this test's own). */

/* The [N, K] kernel's variants: with sub-groups (the K split reduced by
 * sub_group_reduce_add, or clustered where a sub-group holds several rows:
 * SPLIT 32 and 4 on Intel's 8-wide sub-groups) and with f16 weights as half
 * vectors, where the device has them; never run before they passed; absent
 * and the base kernel run without them (CLFORMER_LIMITS turns them off). */
static void skinny_features(const char *limits) {
  static const char *const kernels[] = {"skinny", "skinny_sg", "skinny_h"}; /* by kind */
  static const char *const shapes[] = {"4x8", "32x4"};
  th_profiled_begin(limits);
  const int sg = th_ctx->caps.has_subgroups, h = th_ctx->caps.has_fp16;
  if (!sg || !h)
    fprintf(stderr, "note: %s%s%s: the skinny kernel runs without them\n", sg ? "" : "no sub-groups ",
            h ? "" : "no fp16 ", limits ? limits : "on this device");
  env_set("CLFORMER_SKINNY_TILE", "0"); /* the launch kernels at every M */
  for (size_t s = 0; s < 2; s++) {
    env_set("CLFORMER_SKINNY", shapes[s]);
    for (size_t t = 0; t < 3; t++) {
      char name[96];
      const int has_sg = clf__skinny_variant(th_ctx, types[t], 0, CLF__SKINNY_SG, name, sizeof name);
      ck_assert_int_eq(has_sg, sg); /* SPLIT > 1 in both shapes */
      ck_assert_int_eq(clf__skinny_kind(th_ctx, types[t], 0), CLF__SKINNY_BASE); /* not validated: not used */
      if (has_sg) ck_assert(clf__verdict_record(th_ctx, name, 1, 0, 0));
      const int has_h = clf__skinny_variant(th_ctx, types[t], 0, CLF__SKINNY_H, name, sizeof name);
      ck_assert_int_eq(has_h, h && types[t] == CLF_F16);
      if (has_h) ck_assert(clf__verdict_record(th_ctx, name, 1, 0, 0));
      const int want = has_h ? CLF__SKINNY_H : has_sg ? CLF__SKINNY_SG : CLF__SKINNY_BASE;
      ck_assert_int_eq(clf__skinny_kind(th_ctx, types[t], 0), want);
      for (size_t m = 1; m <= 9; m += 4) check_linear(types[t], m, 37, 96, 1, CLF_ACT_GELU, (uint32_t)(200 + 10 * t + m));
      th_profiled_expect(kernels[want], want == CLF__SKINNY_BASE ? "skinny_sg" : "skinny", s == 1 && t == 2);
    }
  }
  env_set("CLFORMER_SKINNY", NULL);
  env_set("CLFORMER_SKINNY_TILE", NULL);
}

/* The path each product took, and why, as clf_profile_paths gives it:
 * rows within the skinny path's most (the device's default here, then a
 * measured "Rows" value as a profile sets it) take the skinny kernels,
 * more take CLBlast; the count is per distinct product and path. */
static int path_has(const char *a, const char *b, unsigned long count) {
  const size_t n = clf_profile_paths(th_ctx, 0, NULL, NULL, NULL);
  for (size_t i = 0; i < n; i++) {
    const char *line;
    unsigned long c;
    double ms = -1;
    ck_assert_uint_eq(clf_profile_paths(th_ctx, i, &line, &c, &ms), n);
    ck_assert(ms >= 0); /* summed at clf_profile_stop: 0 before */
    if (strstr(line, a) && strstr(line, b)) return c == count;
  }
  return 0;
}

START_TEST(linear_paths_recorded) {
  th_profiled_begin(NULL);
  const size_t most = clf__skinny_max_rows(th_ctx, CLF_F32, 0, NULL);
  check_linear(CLF_F32, 3, 37, 96, 1, CLF_ACT_NONE, 301);
  check_linear(CLF_F32, 3, 37, 96, 1, CLF_ACT_NONE, 302);
  check_linear(CLF_F32, most + 1, 37, 96, 1, CLF_ACT_NONE, 303);
  check_linear_layout(CLF_F32, 1, 3, 37, 96, 0, CLF_ACT_NONE, 304);
  check_linear(CLF_Q8_0, clf__skinny_max_rows(th_ctx, CLF_Q8_0, 0, NULL) + 5, 37, 96, 0, CLF_ACT_NONE, 305);
  char b[96];
  ck_assert_msg(path_has(clf__skinny_tiles(th_ctx, 0, 3) ? "x [3, 96] w f32 [37, 96] [out, in]: skinny_tile, 1 launch "
                                              : "x [3, 96] w f32 [37, 96] [out, in]: skinny, 1 launch ",
                         "3 rows <= ", 2),
                "skinny x2");
  snprintf(b, sizeof b, "x [%zu, 96] w f32 [37, 96] [out, in]: CLBlast, w transposed (%zu rows > %zu", most + 1,
           most + 1, most);
  ck_assert_msg(path_has(b, "", 1), "%s", b);
  ck_assert_msg(path_has("x [3, 96] w f32 [96, 37] [in, out]: skinny_t", "rows <= ", 1), "skinny_t");
  ck_assert_msg(path_has("w q8_0 ", "expanded to f32 [in, out], CLBlast (", 1), "q8 expanded");
  check_linear(CLF_F32, 1, 5, 36, 1, CLF_ACT_NONE, 308); /* K 36: no whole chunks of 8 */
  ck_assert_msg(path_has("x [1, 36] w f32 [5, 36] [out, in]: CLBlast", "(K is not a multiple", 1), "K chunk");
  /* a measured crossover, as a profile's Rows line sets it: 16 rows now
   * take CLBlast, and the reason says where the number came from */
  const unsigned eight = 8;
  ck_assert(clf__skinny_rows_tune(th_ctx, CLF_F32, 0, &eight));
  TH_OK(clf_profile_start(th_ctx));
  ck_assert_uint_eq(clf_profile_paths(th_ctx, 0, NULL, NULL, NULL), 0); /* a new recording forgets the old */
  check_linear(CLF_F32, 16, 37, 96, 1, CLF_ACT_NONE, 306);
  ck_assert_msg(path_has("x [16, 96] w f32 [37, 96] [out, in]: CLBlast", "16 rows > 8: measured", 1), "rows 8");
  const unsigned was = (unsigned)most;
  ck_assert(clf__skinny_rows_tune(th_ctx, CLF_F32, 0, &was));
  ck_assert_uint_eq(clf__skinny_max_rows(th_ctx, CLF_F32, 0, NULL), most);
  /* stopped: the path's time is its commands' (CLBlast's call and the bias pass) */
  clf_context *c = th_ctx;
  clf_profile_entry e[64];
  size_t n_ops = 0;
  TH_OK(clf_profile_stop(c, e, 64, &n_ops, NULL));
  double ms = 0, ops_ms = 0;
  ck_assert_uint_eq(clf_profile_paths(c, 0, NULL, NULL, &ms), 1);
  for (size_t i = 0; i < n_ops; i++) ops_ms += e[i].ms;
  ck_assert_msg(ms > 0 && ms <= ops_ms * (1 + 1e-9), "path %g ms of %g", ms, ops_ms);
  TH_OK(clf_profile_start(c));
  check_linear(CLF_F32, 3, 37, 96, 1, CLF_ACT_NONE, 307);
  th_profiled_expect(clf__skinny_tiles(th_ctx, 0, 3) ? "skinny_tile" : "skinny", "clblast_gemm", 1);
  ck_assert_uint_eq(clf_profile_paths(NULL, 0, NULL, NULL, NULL), 0);
}
END_TEST

START_TEST(skinny_feature_variants) {
  skinny_features(NULL);
  skinny_features("subgroups=0,fp16=0");
}
END_TEST

START_TEST(bad_arguments) {
  float data[64 * 2] = {0};
  clf_tensor *q = NULL, *v = NULL;
  TH_FAILS(clf_tensor_from_f32(th_ctx, CLF_Q8_0, 2, TH_SHAPE(2, 40), data, &q), CLF_E_SHAPE, "multiple of 32");
  TH_FAILS(clf_tensor_from_f32(th_ctx, CLF_Q4_0, 1, TH_SHAPE(64), data, &q), CLF_E_SHAPE, "2-D");
  TH_FAILS(clf_tensor_from_f32(th_ctx, CLF_I32, 2, TH_SHAPE(2, 32), data, &q), CLF_E_DTYPE, "not a weight type");
  TH_OK(clf_tensor_from_f32(th_ctx, CLF_Q8_0, 2, TH_SHAPE(2, 64), data, &q));
  TH_FAILS(clf_tensor_view(q, 0, 2, TH_SHAPE(1, 64), &v), CLF_E_DTYPE, "no views");
  clf_tensor *x = th_empty(CLF_F32, 2, TH_SHAPE(1, 64)), *y = th_empty(CLF_F32, 2, TH_SHAPE(1, 2));
  TH_FAILS(clf_linear(th_ctx, x, q, CLF_WEIGHT_IN_OUT, NULL, CLF_ACT_NONE, y, NULL), CLF_E_DTYPE, "IN_OUT");
  /* an x the kernels could not index in 32 bits (2^33 elements; its shape only: refused before any launch) */
  clf_tensor xh = *x, yh = *y;
  xh.shape[0] = yh.shape[0] = (size_t)1 << 27;
  TH_FAILS(clf_linear(th_ctx, &xh, q, CLF_WEIGHT_OUT_IN, NULL, CLF_ACT_NONE, &yh, NULL), CLF_E_UNSUPPORTED,
           "x has shape [134217728, 64] (8589934592 elements at offset 0): beyond 32-bit indexing");
  TH_FAILS(clf_add(th_ctx, q, q, q, NULL), CLF_E_DTYPE, "q8_0");
  TH_FAILS(clf_tensor_fill(th_ctx, q, 1.0, NULL), CLF_E_DTYPE, "only clf_linear");
  clf_dtype dt;
  ck_assert_int_eq(clf_weight_type_from_name("q5", &dt), CLF_E_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "\"q5\" is not one of f32, f16, q8, q4"));
  TH_OK(clf_weight_type_from_name("q4", &dt));
  ck_assert_int_eq(dt, CLF_Q4_0);
  clf_tensor_destroy(q); clf_tensor_destroy(x); clf_tensor_destroy(y);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("linear");
  TCase *c = tcase_create("weights");
  tcase_set_timeout(c, 0);
  tcase_add_test(c, formats_round_trip);
  tcase_add_test(c, linear_every_weight_type);
  tcase_add_test(c, linear_ggml_blocks);
  tcase_add_test(c, skinny_work_group_shapes);
  tcase_add_test(c, skinny_t_work_group_shapes);
  tcase_add_test(c, skinny_tile_shapes);
  tcase_add_test(c, linear_rows_independent);
  tcase_add_test(c, tiles_follow_profile);
  tcase_add_test(c, tiles_act_pass);
  tcase_add_test(c, pair_same_bits);
  tcase_add_test(c, pair_follows_profile);
  tcase_add_test(c, linear_gpu_and_cpu_class);
  tcase_add_test(c, linear_small_device);
  tcase_add_test(c, skinny_feature_variants);
  tcase_add_test(c, linear_paths_recorded);
  tcase_add_test(c, bad_arguments);
  suite_add_tcase(s, c);
  return s;
}

int main(void) { return th_run(suite()); }
