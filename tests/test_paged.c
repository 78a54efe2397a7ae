/* test_paged.c - the paged KV cache's ops (host/ops/paged.c): keys and
 * values scattered into blocks, and attention of rows from several
 * sequences through their block tables, against a CPU reference that
 * reads each sequence's keys and values as dense arrays.  Sequences of
 * ragged lengths (one under a block, several across the 64-key tile),
 * blocks in a shuffled order, decode rows and prompt chunks in one step,
 * grouped-query heads, sliding windows, head sizes below, at and above the
 * work-group; both kernel shapes (a CPU's and a GPU's); pools of f16; bad
 * arguments. */
#include <math.h>
#include <string.h>

#include "base/half.h"
#include "harness.h"
#include "ops/ops.h"

typedef struct pcase {
  size_t H, Hkv, Dh, BS, window;
  size_t S;
  size_t len[4];   /* each sequence's positions held */
  size_t first[4]; /* its rows in the step: positions first..len-1 */
  int half;        /* pools of f16 (the reference reads the same rounded values) */
  float softcap;   /* > 0: scores soft-capped (Gemma 2) */
} pcase;

/* CPU reference: row at position p of sequence s, head h. */
static void ref_row(const pcase *c, const float *q, const float *K, const float *V, size_t p, size_t h, float scale,
                    float *out) {
  const size_t hk = h / (c->H / c->Hkv), lo = c->window && p + 1 > c->window ? p + 1 - c->window : 0;
  double mx = -INFINITY, sum = 0;
  double *w = malloc((p + 1) * sizeof *w);
  for (size_t j = lo; j <= p; j++) {
    double d = 0;
    for (size_t i = 0; i < c->Dh; i++) d += (double)q[i] * K[(hk * 1024 + j) * c->Dh + i];
    w[j] = d * scale;
    if (c->softcap > 0) w[j] = c->softcap * tanh(w[j] / c->softcap);
    if (w[j] > mx) mx = w[j];
  }
  for (size_t j = lo; j <= p; j++) sum += (w[j] = exp(w[j] - mx));
  for (size_t i = 0; i < c->Dh; i++) {
    double a = 0;
    for (size_t j = lo; j <= p; j++) a += w[j] * V[(hk * 1024 + j) * c->Dh + i];
    out[i] = (float)(a / sum);
  }
  free(w);
}

static void run_case(const pcase *c, uint32_t seed) {
  const size_t H = c->H, Hkv = c->Hkv, Dh = c->Dh, BS = c->BS, S = c->S;
  /* Dense K, V per sequence [Hkv, 1024, Dh]; blocks dealt in a shuffled order. */
  size_t maxb = 0, nblocks = 0, T = 0, all = 0;
  for (size_t s = 0; s < S; s++) {
    const size_t nb = (c->len[s] + BS - 1) / BS;
    maxb = nb > maxb ? nb : maxb;
    nblocks += nb;
    T += c->len[s] - c->first[s];
    all += c->len[s];
  }
  const size_t NB = nblocks + 3;
  size_t *perm = malloc(NB * sizeof *perm);
  for (size_t i = 0; i < NB; i++) perm[i] = i;
  uint32_t x = seed;
  for (size_t i = NB - 1; i > 0; i--) {
    x = x * 1664525u + 1013904223u;
    const size_t j = (x >> 8) % (i + 1), tmp = perm[i];
    perm[i] = perm[j], perm[j] = tmp;
  }
  float *K[4], *V[4];
  int64_t *table = calloc(S * maxb, sizeof *table);
  size_t next = 0;
  for (size_t s = 0; s < S; s++) {
    K[s] = th_rand(Hkv * 1024 * Dh, seed + 10 + (uint32_t)s, -1, 1);
    V[s] = th_rand(Hkv * 1024 * Dh, seed + 20 + (uint32_t)s, -1, 1);
    for (size_t i = 0; c->half && i < Hkv * 1024 * Dh; i++) {
      K[s][i] = clf__f16_bits_to_f32(clf__f32_to_f16(K[s][i]));
      V[s][i] = clf__f16_bits_to_f32(clf__f32_to_f16(V[s][i]));
    }
    for (size_t b = 0; b < (c->len[s] + BS - 1) / BS; b++) table[s * maxb + b] = (int64_t)perm[next++];
  }
  /* Step 1: every held position scattered (rows of all sequences). */
  const size_t meta_n = 3 * all + S * maxb;
  int64_t *meta = malloc(meta_n * sizeof *meta);
  /* keys split [Hkv, all, Dh]; values as a projection's rows hold them,
   * from column 3 of C */
  const size_t C = Hkv * Dh + 5;
  float *src = malloc(Hkv * all * Dh * sizeof *src), *vrows = calloc(all * C, sizeof *vrows);
  size_t r = 0;
  for (size_t s = 0; s < S; s++)
    for (size_t p = 0; p < c->len[s]; p++, r++) {
      meta[r] = (int64_t)p, meta[all + r] = (int64_t)s;
      meta[2 * all + r] = table[s * maxb + p / BS] * (int64_t)BS + (int64_t)(p % BS);
      for (size_t h = 0; h < Hkv; h++)
        for (size_t i = 0; i < Dh; i++) {
          src[(h * all + r) * Dh + i] = K[s][(h * 1024 + p) * Dh + i];
          vrows[r * C + 3 + h * Dh + i] = V[s][(h * 1024 + p) * Dh + i];
        }
    }
  memcpy(meta + 3 * all, table, S * maxb * sizeof *table);
  clf_tensor *tm = th_tensor(CLF_I64, 1, TH_SHAPE(meta_n), meta);
  clf_tensor *ks = th_tensor(CLF_F32, 4, TH_SHAPE(1, Hkv, all, Dh), src);
  clf_tensor *vs = th_tensor(CLF_F32, 3, TH_SHAPE(1, all, C), vrows);
  /* The pools start as a full upload (Oclgrind tracks what was written). */
  float *zero = calloc(NB * Hkv * BS * Dh + 1, sizeof *zero);
  const clf_dtype pdt = c->half ? CLF_F16 : CLF_F32;
  clf_tensor *kp = th_tensor(pdt, 4, TH_SHAPE(NB, Hkv, BS, Dh), zero);
  clf_tensor *vp = th_tensor(pdt, 4, TH_SHAPE(NB, Hkv, BS, Dh), zero);
  clf__paged_meta pm = {tm, 0, all, 2 * all, 3 * all, all, S, maxb, BS};
  TH_OK(clf__kv_scatter(th_ctx, ks, vs, 3, &pm, kp, vp));
  /* The pool holds each key where the table says. */
  void *pool = th_download(kp);
  for (size_t s = 0; s < S; s++)
    for (size_t p = 0; p < c->len[s]; p++)
      for (size_t h = 0; h < Hkv; h++) {
        const size_t blk = (size_t)table[s * maxb + p / BS], at = ((blk * Hkv + h) * BS + p % BS) * Dh;
        for (size_t i = 0; i < Dh; i++) {
          const float got = c->half ? clf__f16_bits_to_f32(((const uint16_t *)pool)[at + i]) : ((float *)pool)[at + i];
          ck_assert_msg(got == K[s][(h * 1024 + p) * Dh + i],
                        "key of sequence %zu position %zu head %zu is not in block %zu", s, p, h, blk);
        }
      }
  free(pool);

  /* Step 2: attention of the rows first..len-1 of every sequence. */
  const size_t meta2_n = 2 * T + S * maxb;
  int64_t *meta2 = malloc(meta2_n * sizeof *meta2);
  float *q = th_rand(H * T * Dh, seed + 99, -1, 1), *ref = malloc(T * H * Dh * sizeof *ref);
  const float scale = 1.0f / sqrtf((float)Dh);
  r = 0;
  for (size_t s = 0; s < S; s++)
    for (size_t p = c->first[s]; p < c->len[s]; p++, r++) {
      meta2[r] = (int64_t)p, meta2[T + r] = (int64_t)s;
      for (size_t h = 0; h < H; h++) {
        float qr[512];
        for (size_t i = 0; i < Dh; i++) qr[i] = q[(h * T + r) * Dh + i];
        ref_row(c, qr, K[s], V[s], p, h, scale, ref + (r * H + h) * Dh);
      }
    }
  memcpy(meta2 + 2 * T, table, S * maxb * sizeof *table);
  clf_tensor *tm2 = th_tensor(CLF_I64, 1, TH_SHAPE(meta2_n), meta2);
  clf_tensor *tq = th_tensor(CLF_F32, 4, TH_SHAPE(1, H, T, Dh), q), *to = th_empty(CLF_F32, 3, TH_SHAPE(1, T, H * Dh));
  clf__paged_meta pm2 = {tm2, 0, T, 0, 2 * T, T, S, maxb, BS};
  TH_OK(clf__paged_attention(th_ctx, tq, kp, vp, &pm2, c->window, scale, c->softcap, to));
  float *got = th_download(to);
  TH_CLOSE(got, ref, T * H * Dh, 1e-5);

  free(got), free(ref), free(q), free(meta2), free(meta), free(src), free(vrows), free(zero), free(table), free(perm);
  for (size_t s = 0; s < S; s++) free(K[s]), free(V[s]);
  clf_tensor_destroy(tm), clf_tensor_destroy(tm2), clf_tensor_destroy(ks);
  clf_tensor_destroy(vs), clf_tensor_destroy(kp), clf_tensor_destroy(vp), clf_tensor_destroy(tq);
  clf_tensor_destroy(to);
}

/* Decode rows (one each) beside prompt chunks, across block and tile
 * boundaries; grouped-query heads. */
START_TEST(paged_ragged_rows) {
  const pcase c = {4, 2, 64, 4, 0, 4, {1, 5, 70, 133}, {0, 4, 60, 132}};
  run_case(&c, 1);
  const pcase d = {3, 3, 16, 16, 0, 3, {16, 17, 40}, {0, 16, 39}};
  run_case(&d, 2);
}
END_TEST

/* Head sizes not a multiple of the work-group, and above it. */
START_TEST(paged_head_sizes) {
  const pcase a = {2, 1, 80, 8, 0, 2, {9, 66}, {8, 0}};
  run_case(&a, 3);
  const pcase b = {2, 2, 24, 2, 0, 2, {3, 7}, {0, 6}};
  run_case(&b, 4);
  const pcase c2 = {1, 1, 128, 16, 0, 1, {65}, {63}};
  run_case(&c2, 5);
}
END_TEST

/* Sliding windows: shorter than, equal to and longer than what is held. */
START_TEST(paged_window) {
  const pcase a = {4, 2, 32, 4, 5, 3, {3, 12, 90}, {0, 6, 88}};
  run_case(&a, 6);
  const pcase b = {2, 1, 32, 8, 12, 2, {12, 13}, {11, 0}};
  run_case(&b, 7);
}
END_TEST

/* The work-group kernel, as a GPU-class device runs it (a CPU runs a
 * work-item per row and head), on every case above. */
static void every_case(void) {
  const pcase cases[] = {{4, 2, 64, 4, 0, 4, {1, 5, 70, 133}, {0, 4, 60, 132}},
                         {2, 1, 80, 8, 0, 2, {9, 66}, {8, 0}},
                         {1, 1, 128, 16, 0, 1, {65}, {63}},
                         {4, 2, 32, 4, 5, 3, {3, 12, 90}, {0, 6, 88}}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], 40 + (uint32_t)i);
}

START_TEST(paged_gpu_class) { th_with_context("gpu", NULL, every_case); }
END_TEST

/* Pools of f16: the same keys and values rounded, both kernel shapes. */
static void every_case_half(void) {
  const pcase cases[] = {{4, 2, 64, 4, 0, 4, {1, 5, 70, 133}, {0, 4, 60, 132}, 1},
                         {2, 1, 80, 8, 0, 2, {9, 66}, {8, 0}, 1},
                         {4, 2, 32, 4, 5, 3, {3, 12, 90}, {0, 6, 88}, 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], 60 + (uint32_t)i);
}

START_TEST(paged_half_pools) {
  every_case_half();
  th_with_context("gpu", NULL, every_case_half);
}
END_TEST

/* Soft-capped scores (Gemma 2's attn_logit_softcapping) with a cap of
 * 0.5, well inside the scores' range (|s| up to about 2 here), so that
 * tanh bends most of them: both kernel shapes, a window and grouped heads,
 * f32 and f16 pools, against the reference's cap * tanh(s / cap). */
static void every_case_capped(void) {
  const pcase cases[] = {{4, 2, 64, 4, 0, 4, {1, 5, 70, 133}, {0, 4, 60, 132}, 0, 0.5f},
                         {2, 1, 80, 8, 0, 2, {9, 66}, {8, 0}, 1, 0.5f},
                         {4, 2, 32, 4, 5, 3, {3, 12, 90}, {0, 6, 88}, 0, 0.5f}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], 80 + (uint32_t)i);
}

START_TEST(paged_softcap) {
  every_case_capped();
  th_with_context("gpu", NULL, every_case_capped);
}
END_TEST

START_TEST(paged_bad_arguments) {
  int64_t meta[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  clf_tensor *tm = th_tensor(CLF_I64, 1, TH_SHAPE(8), meta);
  clf_tensor *q = th_empty(CLF_F32, 4, TH_SHAPE(1, 3, 2, 8)), *kp = th_empty(CLF_F32, 4, TH_SHAPE(4, 2, 4, 8));
  clf_tensor *out = th_empty(CLF_F32, 3, TH_SHAPE(1, 2, 24));
  clf__paged_meta pm = {tm, 0, 2, 4, 6, 2, 1, 2, 4};
  TH_FAILS(clf__paged_attention(th_ctx, q, kp, kp, &pm, 0, 1.0f, 0.0f, out), CLF_E_SHAPE, "not a multiple");
  clf__paged_meta big = {tm, 0, 2, 4, 6, 2, 2, 2, 4}; /* the table runs past the buffer */
  clf_tensor *q2 = th_empty(CLF_F32, 4, TH_SHAPE(1, 2, 2, 8)), *out2 = th_empty(CLF_F32, 3, TH_SHAPE(1, 2, 16));
  TH_FAILS(clf__paged_attention(th_ctx, q2, kp, kp, &big, 0, 1.0f, 0.0f, out2), CLF_E_SHAPE, "does not fit");
  clf__paged_meta bs = {tm, 0, 2, 4, 6, 2, 1, 2, 8}; /* the pool's blocks are of 4 */
  TH_FAILS(clf__paged_attention(th_ctx, q2, kp, kp, &bs, 0, 1.0f, 0.0f, out2), CLF_E_SHAPE, "k");
  clf_tensor *vh = th_empty(CLF_F16, 4, TH_SHAPE(4, 2, 4, 8)), *vi = th_empty(CLF_I32, 4, TH_SHAPE(4, 2, 4, 8));
  TH_FAILS(clf__paged_attention(th_ctx, q2, kp, vh, &pm, 0, 1.0f, 0.0f, out2), CLF_E_DTYPE, "k is f32 and v f16");
  TH_FAILS(clf__paged_attention(th_ctx, q2, vi, vi, &pm, 0, 1.0f, 0.0f, out2), CLF_E_DTYPE, "expected f32 or f16");
  TH_FAILS(clf__paged_attention(th_ctx, q2, kp, kp, &pm, 0, 1.0f, -1.0f, out2), CLF_E_INVALID_ARG,
           "softcap is -1, must be finite and not negative");
  clf_tensor *src = th_empty(CLF_F32, 4, TH_SHAPE(1, 2, 3, 8));
  clf_tensor *k2 = th_empty(CLF_F32, 4, TH_SHAPE(1, 2, 2, 8)), *rows = th_empty(CLF_F32, 3, TH_SHAPE(1, 2, 20));
  TH_FAILS(clf__kv_scatter(th_ctx, src, rows, 0, &pm, kp, kp), CLF_E_SHAPE, "clf__kv_scatter: k");
  TH_FAILS(clf__kv_scatter(th_ctx, k2, rows, 5, &pm, kp, kp), CLF_E_SHAPE,
           "the values' 16 columns from column 5 do not fit proj's 20");
  TH_FAILS(clf__kv_scatter(th_ctx, k2, rows, 4, &pm, kp, vh), CLF_E_DTYPE, "kpool is f32 and vpool f16");
  clf_tensor_destroy(k2), clf_tensor_destroy(rows), clf_tensor_destroy(vh), clf_tensor_destroy(vi);
  clf_tensor_destroy(tm), clf_tensor_destroy(q), clf_tensor_destroy(kp), clf_tensor_destroy(out);
  clf_tensor_destroy(q2), clf_tensor_destroy(out2), clf_tensor_destroy(src);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("paged");
  TCase *tc = tcase_create("paged");
  tcase_add_test(tc, paged_ragged_rows);
  tcase_add_test(tc, paged_head_sizes);
  tcase_add_test(tc, paged_window);
  tcase_add_test(tc, paged_gpu_class);
  tcase_add_test(tc, paged_half_pools);
  tcase_add_test(tc, paged_softcap);
  tcase_add_test(tc, paged_bad_arguments);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
