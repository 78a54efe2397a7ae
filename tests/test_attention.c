/* test_attention.c - clf_attention against a CPU reference in double, for
 * both implementations (GEMM and fused) on every case: odd sizes, cross and
 * cached attention, every mask, both output layouts, and bad arguments. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/reference.h"
#include "harness.h"
#include "ops/ops.h"

/* The environment is read when a context is made (host/core/env.c): a
 * test that changes it under th_ctx has th_ctx read it again. */
static void env_set(const char *name, const char *value) {
  if (value) setenv(name, value, 1);
  else unsetenv(name);
  if (th_ctx) TH_OK(clf__env_reload(th_ctx));
}

/* Inputs in [-1, 1) and scale 1/sqrt(Dh) keep the scores O(1); the f32 dot
 * products (Dh <= 256 terms) and softmax sums (Lk <= 197 terms) then round
 * to a few 1e-7 of the output's scale, so 1e-5 leaves a 10x margin while
 * still catching any indexing or masking mistake (those show as O(0.1)). */
#define ATT_TOL 1e-5

typedef struct att_case {
  size_t B, H, Lq, Lk, Lcap, Dh; /* Lk: keys used (kv_len); Lcap: rows of k, v */
  size_t kv_len_arg;             /* what is passed as kv_len (0: Lcap) */
  int pad;                       /* -1: no key padding, else its clf_dtype */
  int pad_empty_b;               /* batch index whose keys are all padded, or -1 */
  int causal;
  size_t nW, Hb;  /* bias [nW, Hb, Lq, Lk]; nW 0: no bias */
  int swin;       /* bias = relative-position-like values + {0, -100} regions */
  int merged;     /* out [B, Lq, H*Dh] */
  float scale;    /* 0: 1/sqrt(Dh) */
  float amp;      /* q, k in [-amp, amp); 0: 1 */
  uint32_t seed;
  size_t Hkv;    /* KV heads (GQA); 0: H */
  size_t window; /* mask->window (sliding window); 0: none */
  float softcap; /* mask->softcap (Gemma 2); 0: none */
} att_case;

static size_t att_hkv(const att_case *c) { return c->Hkv ? c->Hkv : c->H; }

static int under_oclgrind(void) { return getenv("CLF_TEST_UNDER_OCLGRIND") != NULL; }
/* A size: `full` on a real device, `small` on the (~1000x slower) Oclgrind
 * simulator.  Small sizes still span several query blocks and key tiles. */
static size_t att_size(size_t full, size_t small) { return under_oclgrind() ? small : full; }

/* Key j of batch b is attended: holes every few keys, the last batch
 * right-padded to half its keys, and pad_empty_b fully padded. */
static int att_keep(const att_case *c, size_t b, size_t j) {
  if (c->pad < 0) return 1;
  if ((int)b == c->pad_empty_b) return 0;
  if (b == c->B - 1 && c->B > 1 && j >= (c->Lk + 1) / 2) return 0;
  return (j * 7 + b * 3) % 5 != 1;
}

/* The library's reference (device/reference.c: scores, masks, softmax,
 * weighted sum, in double) for case c, in f32.  k and v hold Lcap rows per
 * (b, h); only the first Lk are used. */
static void ref_attention(const att_case *c, float scale, const float *q, const float *k, const float *v,
                          const float *bias, float *out) {
  const size_t n = c->B * c->H * c->Lq * c->Dh;
  int32_t *keep = malloc((c->B * c->Lk + 1) * sizeof(int32_t));
  double *d = malloc((n + 1) * sizeof(double));
  for (size_t b = 0; b < c->B; b++)
    for (size_t j = 0; j < c->Lk; j++) keep[b * c->Lk + j] = att_keep(c, b, j);
  const clf__ref_attn a = {c->B, c->H, c->Lq, c->Lk, c->Lcap, c->Dh, scale, c->causal, keep, bias,
                           c->nW ? c->nW : 1, c->Hb ? c->Hb : 1, c->merged, att_hkv(c), c->window, c->softcap};
  clf__ref_attention(&a, q, k, v, d);
  clf__ref_to_f32(d, n, out);
  free(keep);
  free(d);
}

/* The padding mask of c in its dtype, with varied non-zero values (an i64
 * with only high bits set, a negative f32) and -0.0f for some masked keys. */
static clf_tensor *att_pad_tensor(const att_case *c) {
  size_t n = c->B * c->Lk;
  clf_tensor *t;
  if (c->pad == CLF_I64) {
    int64_t *m = malloc((n ? n : 1) * sizeof(int64_t));
    for (size_t x = 0; x < n; x++) m[x] = att_keep(c, x / c->Lk, x % c->Lk) ? (x % 2 ? 1 : (int64_t)1 << 40) : 0;
    t = th_tensor(CLF_I64, 2, TH_SHAPE(c->B, c->Lk), m);
    free(m);
  } else if (c->pad == CLF_F32) {
    float *m = malloc((n ? n : 1) * sizeof(float));
    for (size_t x = 0; x < n; x++) m[x] = att_keep(c, x / c->Lk, x % c->Lk) ? (x % 2 ? 1.0f : -2.5f) : (x % 2 ? -0.0f : 0.0f);
    t = th_tensor(CLF_F32, 2, TH_SHAPE(c->B, c->Lk), m);
    free(m);
  } else {
    int32_t *m = malloc((n ? n : 1) * sizeof(int32_t));
    for (size_t x = 0; x < n; x++) m[x] = att_keep(c, x / c->Lk, x % c->Lk) ? (x % 2 ? 1 : -7) : 0;
    t = th_tensor(CLF_I32, 2, TH_SHAPE(c->B, c->Lk), m);
    free(m);
  }
  return t;
}

/* Bias values of c: uniform in [-2, 2), or Swin-like (a smooth relative
 * term plus -100 between tokens of different regions in odd windows). */
static float *att_bias_data(const att_case *c) {
  size_t n = c->nW * c->Hb * c->Lq * c->Lk;
  float *bias = th_rand(n, c->seed + 7, -2.0f, 2.0f);
  if (c->swin)
    for (size_t x = 0; x < n; x++) {
      size_t j = x % c->Lk, i = x / c->Lk % c->Lq, w = x / (c->Lk * c->Lq * c->Hb);
      int region_i = (int)(i % 7 >= 4) + 2 * (int)(i / 7 >= 4), region_j = (int)(j % 7 >= 4) + 2 * (int)(j / 7 >= 4);
      bias[x] *= 0.5f;
      if (w % 2 == 1 && region_i != region_j) bias[x] += -100.0f;
    }
  return bias;
}

/* Runs `impl` on case c and returns the downloaded output (malloc'd). */
static float *att_run(const att_case *c, clf_attention_impl impl, clf_tensor *tq, clf_tensor *tk, clf_tensor *tv,
                      const clf_attention_mask *mask, float scale) {
  clf_tensor *to = c->merged ? th_empty(CLF_F32, 3, TH_SHAPE(c->B, c->Lq, c->H * c->Dh))
                             : th_empty(CLF_F32, 4, TH_SHAPE(c->B, c->H, c->Lq, c->Dh));
  /* Poison the output: every element must be written. */
  TH_OK(clf_tensor_fill(th_ctx, to, NAN, NULL));
  cl_event ev = NULL;
  TH_OK(clf_attention(th_ctx, tq, tk, tv, c->kv_len_arg, mask, scale, impl, to, &ev));
  ck_assert_ptr_nonnull(ev);
  ck_assert_int_eq(clWaitForEvents(1, &ev), CL_SUCCESS);
  clReleaseEvent(ev);
  float *got = th_download(to);
  clf_tensor_destroy(to);
  return got;
}

/* Set by attn_fused_work_groups under Oclgrind: the fused kernel alone is
 * compared with the reference (the GEMM path, CLBlast's kernels under the
 * simulator, is what makes that test slow there, and the other tests check
 * it). */
static int att_fused_only;

/* Checks GEMM, fused (and AUTO when `with_auto`) against the reference and
 * against each other.  Returns the fused output when keep_out (else NULL). */
static float *att_check_tol(const att_case *c, int with_auto, double tol, int keep_out) {
  const size_t nq = c->B * c->H * c->Lq * c->Dh, nk = c->B * att_hkv(c) * c->Lcap * c->Dh;
  const float amp = c->amp > 0 ? c->amp : 1.0f;
  const float scale = c->scale != 0 ? c->scale : (float)(1.0 / sqrt((double)(c->Dh ? c->Dh : 1)));
  float *q = th_rand(nq, c->seed, -amp, amp), *k = th_rand(nk, c->seed + 1, -amp, amp);
  float *v = th_rand(nk, c->seed + 2, -1.0f, 1.0f);
  /* Rows past kv_len must never be read: NaN would poison the output. */
  for (size_t x = 0; x < nk; x++)
    if (x / c->Dh % c->Lcap >= c->Lk) k[x] = v[x] = NAN;
  float *bias = c->nW ? att_bias_data(c) : NULL;
  float *ref = malloc((nq ? nq : 1) * sizeof(float));
  ref_attention(c, scale, q, k, v, bias, ref);

  clf_tensor *tq = th_tensor(CLF_F32, 4, TH_SHAPE(c->B, c->H, c->Lq, c->Dh), q);
  clf_tensor *tk = th_tensor(CLF_F32, 4, TH_SHAPE(c->B, att_hkv(c), c->Lcap, c->Dh), k);
  clf_tensor *tv = th_tensor(CLF_F32, 4, TH_SHAPE(c->B, att_hkv(c), c->Lcap, c->Dh), v);
  clf_tensor *tpad = c->pad >= 0 ? att_pad_tensor(c) : NULL;
  clf_tensor *tbias = bias ? th_tensor(CLF_F32, 4, TH_SHAPE(c->nW, c->Hb, c->Lq, c->Lk), bias) : NULL;
  clf_attention_mask mask = {tpad, c->causal, tbias, c->window, c->softcap};

  float *g = att_fused_only ? NULL : att_run(c, CLF_ATTN_GEMM, tq, tk, tv, &mask, scale);
  float *f = att_run(c, CLF_ATTN_FUSED, tq, tk, tv, &mask, scale);
  if (g) TH_CLOSE(g, ref, nq, tol);
  TH_CLOSE(f, ref, nq, tol);
  if (g) TH_CLOSE(f, g, nq, tol);
  if (with_auto) {
    float *a = att_run(c, CLF_ATTN_AUTO, tq, tk, tv, &mask, scale);
    TH_CLOSE(a, ref, nq, tol);
    free(a);
  }
  free(g);
  free(q); free(k); free(v); free(bias); free(ref);
  clf_tensor_destroy(tq); clf_tensor_destroy(tk); clf_tensor_destroy(tv);
  clf_tensor_destroy(tpad); clf_tensor_destroy(tbias);
  if (keep_out) return f;
  free(f);
  return NULL;
}

static void att_check(const att_case *c) { att_check_tol(c, 0, ATT_TOL, 0); }

/* A case with defaults: self-attention, no masks, unmerged. */
static att_case att_self(size_t B, size_t H, size_t L, size_t Dh) {
  att_case c = {B, H, L, L, L, Dh, 0, -1, -1, 0, 0, 1, 0, 0, 0, 0, 1};
  c.seed = (uint32_t)(B * 1000003u + H * 10007u + L * 101u + Dh);
  return c;
}

START_TEST(attn_self_sizes) {
  /* 33 already gives two query blocks and two or three key tiles. */
  const size_t Ls[] = {1, 7, 33, 197}, Dhs[] = {16, 64, 80};
  for (size_t a = 0; a < att_size(4, 3); a++)
    for (size_t d = 0; d < 3; d++) {
      att_case c = att_self(2, 3, Ls[a], Dhs[d]);
      att_check(&c);
    }
}
END_TEST

START_TEST(attn_cross) {
  att_case c = att_self(2, 2, 5, 32);
  c.Lk = c.Lcap = 17;
  att_check(&c);
  c.Lq = 17;
  c.Lk = c.Lcap = 5;
  att_check(&c);
  c.Lq = 40; /* two query blocks, two key tiles */
  c.Lk = c.Lcap = 70;
  c.Dh = 24;
  att_check(&c);
}
END_TEST

START_TEST(attn_key_padding) {
  const int dtypes[] = {CLF_I32, CLF_I64, CLF_F32};
  for (int t = 0; t < 3; t++) {
    att_case c = att_self(3, 2, att_size(33, 20), 64);
    c.pad = dtypes[t];
    att_check(&c);
    c.Lq = 5; /* cross-attention with padded encoder keys */
    c.Lk = c.Lcap = 19;
    c.Dh = 20;
    att_check(&c);
  }
}
END_TEST

START_TEST(attn_causal) {
  const size_t Ls[] = {1, 7, 33, 197};
  for (size_t a = 0; a < att_size(4, 3); a++) {
    att_case c = att_self(2, 3, Ls[a], 64);
    c.causal = 1;
    att_check(&c);
    c.pad = CLF_I32; /* causal + padding */
    c.Dh = 48;
    att_check(&c);
  }
}
END_TEST

START_TEST(attn_kv_cache) {
  /* Decoding step: one new query at position 8 over 9 cached keys of 16. */
  att_case c = att_self(2, 3, 1, 64);
  c.Lk = c.kv_len_arg = 9;
  c.Lcap = 16;
  c.causal = 1;
  att_check(&c);
  c.pad = CLF_I64;
  att_check(&c);
  /* Three new queries at positions 6..8, and a prefill of 5 into 16. */
  c.pad = -1;
  c.Lq = 3;
  att_check(&c);
  c.Lq = c.Lk = c.kv_len_arg = 5;
  att_check(&c);
  /* kv_len 0 means Lcap. */
  c.Lq = 2;
  c.Lk = c.Lcap = 16;
  c.kv_len_arg = 0;
  att_check(&c);
  /* A long cache: several key tiles, the causal bound mid-tile. */
  c.Lq = 3;
  c.Lk = c.kv_len_arg = 77;
  c.Lcap = 90;
  c.Dh = 96;
  att_check(&c);
}
END_TEST

START_TEST(attn_gqa) {
  /* 4:1 and 3:1 (the fixtures' ratios), 2:1, and one KV head for all
   * (multi-query), for prefill and decode, every mask and both layouts. */
  static const size_t heads[][2] = {{8, 2}, {6, 2}, {4, 2}, {3, 1}};
  for (size_t x = 0; x < 4; x++) {
    /* On Oclgrind 4:1 and 1 KV head only (the others add minutes there). */
    if (under_oclgrind() && (x == 1 || x == 2)) continue;
    att_case c = att_self(2, heads[x][0], att_size(33, 11), x % 2 ? 16 : att_size(64, 32));
    c.Hkv = heads[x][1];
    att_check(&c);
    c.causal = 1;
    c.pad = CLF_I64;
    c.merged = x % 2;
    att_check(&c);
    /* Decode: one query at position 11 over a cache of 16 rows; the G
     * query heads form one block of G rows in the fused kernel. */
    c.Lq = 1;
    c.Lk = c.kv_len_arg = 12;
    c.Lcap = 16;
    att_check(&c);
    c.merged = !c.merged;
    c.pad = -1;
    att_check(&c);
    /* A few new queries against the cache, with a per-head bias. */
    c.Lq = 3;
    c.nW = 1;
    c.Hb = c.H;
    att_check(&c);
  }
  /* B = 1, merged, Lq > 1: the GEMM path merges through scratch. */
  att_case c = att_self(1, 4, 9, 32);
  c.Hkv = 2;
  c.merged = 1;
  c.causal = 1;
  att_check_tol(&c, 1, ATT_TOL, 0);
}
END_TEST

START_TEST(attn_sliding_window) {
  /* Mistral's window: with W = 5 query i sees keys i-4..i.  Prefill longer
   * than the window (several key tiles on a real device), then decoding
   * past it with a cache, with GQA and padding. */
  att_case c = att_self(2, 4, att_size(70, 13), 32);
  c.causal = 1;
  c.window = 5;
  att_check_tol(&c, 1, ATT_TOL, 0);
  c.Hkv = 2;
  c.pad = CLF_I32;
  c.window = att_size(40, 7);
  att_check(&c);
  c.Lq = 1; /* decode at position 20 of a 24-row cache */
  c.Lk = c.kv_len_arg = 21;
  c.Lcap = 24;
  c.window = 5;
  att_check_tol(&c, 1, ATT_TOL, 0);
  c.Lq = 3; /* three new queries: each its own window */
  c.merged = 1;
  att_check(&c);
  c.window = 1; /* each query sees itself only */
  att_check(&c);
  c.window = 21; /* as long as the keys: nothing is masked by it */
  att_check(&c);
  c.causal = 0; /* a window without causal: keys after the query stay */
  c.window = 4;
  c.Lq = 5;
  att_check(&c);
}
END_TEST

/* Gemma 2's soft-capped scores: scores of up to about 16 (q, k in [-4, 4))
 * capped at 2, so tanh bends nearly all of them, with every mask the
 * capping must come before (padding, causal, a window, a bias), grouped
 * heads and a KV cache; the GEMM path, the device's fused kernel, the
 * tiled one GPU-class devices run, and both CPU shapes, each against the
 * reference's cap * tanh(s / cap). */
static void att_softcap_cases(void) {
  att_case c = att_self(2, 4, att_size(40, 11), 32);
  c.amp = 4.0f;
  c.softcap = 2.0f;
  c.causal = 1;
  c.pad = CLF_I32;
  c.Hkv = 2;
  att_check_tol(&c, 1, ATT_TOL, 0);
  c.window = 5;
  att_check(&c);
  c.Lq = 1; /* decoding at position 20 of a 24-row cache */
  c.Lk = c.kv_len_arg = 21;
  c.Lcap = 24;
  att_check(&c);
  c = att_self(2, 2, 16, 16); /* no causal mask: the short CPU kernel's case */
  c.amp = 4.0f;
  c.softcap = 2.0f;
  c.nW = 1;
  c.Hb = 2;
  att_check(&c);
}

START_TEST(attn_softcap) {
  att_softcap_cases();
  env_set("CLFORMER_ATTN_FUSED", "tiled");
  att_softcap_cases();
  env_set("CLFORMER_ATTN_FUSED", "cpu");
  env_set("CLFORMER_ATTN_SHORT", "0");
  att_softcap_cases();
  env_set("CLFORMER_ATTN_SHORT", "1");
  att_softcap_cases();
  env_set("CLFORMER_ATTN_SHORT", NULL);
  env_set("CLFORMER_ATTN_FUSED", NULL);
  /* the cap changes the output: without it the same case is far off */
  att_case c = att_self(1, 2, 9, 16);
  c.amp = 4.0f;
  c.softcap = 2.0f;
  float *capped = att_check_tol(&c, 0, ATT_TOL, 1);
  c.softcap = 0.0f;
  float *plain = att_check_tol(&c, 0, ATT_TOL, 1);
  double worst = 0;
  for (size_t x = 0; x < 2 * 9 * 16; x++) worst = fmax(worst, fabs(capped[x] - plain[x]));
  ck_assert_msg(worst > 0.05, "capping at 2 moved the output by only %g", worst);
  free(capped), free(plain);
}
END_TEST

START_TEST(attn_bias_windows) {
  /* Two images of four windows each: batch b uses bias[b % 4]. */
  att_case c = att_self(8, 3, 16, 32);
  c.nW = 4;
  c.Hb = 3;
  att_check(&c);
  c.Hb = 1; /* the same bias for every head */
  att_check(&c);
  c.nW = 1; /* one bias for every batch */
  c.Hb = 3;
  att_check(&c);
  c.B = 2; /* bias with cross-attention, padding and causal */
  c.nW = 2;
  c.Lq = 9;
  c.Lk = c.Lcap = 13;
  c.pad = CLF_F32;
  c.causal = 1;
  att_check(&c);
}
END_TEST

START_TEST(attn_swin_like) {
  /* 7x7 windows (49 tokens), relative bias and -100 region masks, merged
   * output as Swin reshapes it: B = 2 images x 4 windows (1 on Oclgrind). */
  att_case c = att_self(att_size(8, 4), 3, 49, 32);
  c.nW = 4;
  c.Hb = 3;
  c.swin = 1;
  c.merged = 1;
  att_check(&c);
  c.merged = 0;
  att_check(&c);
}
END_TEST

START_TEST(attn_fully_masked_rows) {
  /* Batch 1 has every key padded; with causal and Lq > kv_len, queries 0
   * and 1 (positions -2, -1) see no key: those rows must be exactly 0. */
  att_case c = att_self(3, 2, 6, 16);
  c.Lk = c.Lcap = 4;
  c.pad = CLF_I32;
  c.pad_empty_b = 1;
  c.causal = 1;
  float *f = att_check_tol(&c, 0, ATT_TOL, 1);
  for (size_t b = 0; b < c.B; b++)
    for (size_t h = 0; h < c.H; h++)
      for (size_t i = 0; i < c.Lq; i++)
        for (size_t d = 0; d < c.Dh; d++) {
          float x = f[((b * c.H + h) * c.Lq + i) * c.Dh + d];
          ck_assert(!isnan(x));
          if (b == 1 || i < 2) ck_assert_msg(x == 0.0f, "b=%zu i=%zu d=%zu: %g", b, i, d, (double)x);
        }
  free(f);

  /* A bias of -inf everywhere masks every key as well. */
  size_t n = 2 * 5 * 8;
  float *q = th_rand(n, 3, -1, 1), *bias = malloc(5 * 5 * sizeof(float));
  for (size_t x = 0; x < 25; x++) bias[x] = -INFINITY;
  clf_tensor *tq = th_tensor(CLF_F32, 4, TH_SHAPE(1, 2, 5, 8), q);
  clf_tensor *tb = th_tensor(CLF_F32, 4, TH_SHAPE(1, 1, 5, 5), bias);
  clf_tensor *to = th_empty(CLF_F32, 4, TH_SHAPE(1, 2, 5, 8));
  clf_attention_mask m = {NULL, 0, tb};
  for (int impl = CLF_ATTN_FUSED; impl <= CLF_ATTN_GEMM; impl++) {
    TH_OK(clf_tensor_fill(th_ctx, to, NAN, NULL));
    TH_OK(clf_attention(th_ctx, tq, tq, tq, 0, &m, 0.5f, (clf_attention_impl)impl, to, NULL));
    float *o = th_download(to);
    for (size_t x = 0; x < n; x++) ck_assert_msg(o[x] == 0.0f, "impl %d, element %zu: %g", impl, x, (double)o[x]);
    free(o);
  }
  free(q); free(bias);
  clf_tensor_destroy(tq); clf_tensor_destroy(tb); clf_tensor_destroy(to);
}
END_TEST

START_TEST(attn_merged_layout) {
  /* B > 1 and Lq > 1 (the GEMM path merges through scratch), B == 1 and
   * Lq == 1 (one strided GEMM writes the merged rows), odd head dims. */
  static const size_t cases[][4] = {{2, 7, 3, 33}, {1, 7, 4, 16}, {3, 1, 2, 80}, {2, 35, 5, 9}};
  for (size_t x = 0; x < 4; x++) {
    att_case c = att_self(cases[x][0], cases[x][2], cases[x][1], cases[x][3]);
    c.merged = 1;
    c.Lk = c.Lcap = cases[x][1] + 4;
    c.pad = CLF_I32;
    att_check(&c);
  }
}
END_TEST

START_TEST(attn_large_scores) {
  /* q, k in [-8, 8), scale 1: scores reach several hundred, so exp()
   * overflows unless the max is subtracted.  Their f32 rounding (relative
   * 6e-8 over sums of |q k| up to ~4000) moves them by up to ~2e-4, which
   * moves the softmax weights by that relative amount: tolerance 5e-4. */
  att_case c = att_self(2, 2, att_size(33, 20), 64);
  c.amp = 8.0f;
  c.scale = 1.0f;
  att_check_tol(&c, 1, 5e-4, 0);
  c.causal = 1;
  c.pad = CLF_I32;
  att_check_tol(&c, 0, 5e-4, 0);
}
END_TEST

START_TEST(attn_head_dims) {
  /* Every tile configuration of the fused kernel (Dh <= 64, <= 128, <= 256;
   * 19 queries, and 3 for the few-query tiles of decoding) and its edges,
   * with masks on; AUTO too. */
  static const size_t dhs[] = {1, 7, 64, 65, 128, 129, 200, 256};
  static const size_t dhs_small[] = {1, 65, 129, 256};
  const int og = under_oclgrind();
  for (size_t x = 0; x < (og ? 4 : 8); x++) {
    att_case c = att_self(1, 2, 19, og ? dhs_small[x] : dhs[x]);
    c.Lk = c.Lcap = 23;
    c.pad = CLF_I32;
    c.nW = 1;
    c.Hb = 2;
    att_check_tol(&c, 1, ATT_TOL, 0);
    c.Lq = 3;
    c.causal = 1;
    att_check(&c);
  }
}
END_TEST

/* The work-group of the fused kernel for head dim dh and lq query rows
 * over 200 keys (past the short CPU kernel's lanes), as its variant name
 * gives it ("... WG=32"); 0 when it does not apply. */
static unsigned att_fused_wg(size_t dh, size_t lq) {
  char name[128];
  if (!clf__attn_fused_variant(th_ctx, dh, lq, 200, 1, name, sizeof(name))) return 0;
  const char *w = strstr(name, " WG=");
  ck_assert_msg(w != NULL, "variant name %s has no WG=", name);
  return (unsigned)strtoul(w + 4, NULL, 10);
}

/* The cases every shape of the fused kernel runs: decoding with a KV cache
 * (rows past kv_len are NaN; one query, then three, i64 padding), GQA 4:1
 * merged (the G heads form one block: prefill, then decode) and a sliding
 * window with GQA (prefill, then decode).  With `more`, also three GQA
 * queries with a bias and a window without causal. */
static void att_cache_gqa_window(int more) {
  att_case c = att_self(2, 3, 1, 64);
  c.Lk = c.kv_len_arg = 9;
  c.Lcap = 16;
  c.causal = 1;
  c.pad = CLF_I64;
  att_check(&c);
  c.Lq = 3;
  att_check(&c);
  c = att_self(2, 8, att_size(33, 11), 64);
  c.Hkv = 2;
  c.causal = 1;
  c.merged = 1;
  att_check(&c);
  c.Lq = 1;
  c.Lk = c.kv_len_arg = 12;
  c.Lcap = 16;
  att_check(&c);
  if (more) {
    c.Lq = 3;
    c.nW = 1;
    c.Hb = c.H;
    att_check(&c);
  }
  c = att_self(2, 4, att_size(70, 13), 32);
  c.Hkv = 2;
  c.causal = 1;
  c.window = 5;
  att_check(&c);
  c.Lq = 3;
  c.Lk = c.kv_len_arg = 21;
  c.Lcap = 24;
  att_check(&c);
  if (more) {
    c.causal = 0;
    c.window = 4;
    c.Lq = 5;
    att_check(&c);
  }
}

/* Each work-group of the fused kernel (an ATT_TR x 8 grid of 64, 32 or 16
 * work-items, capped through $CLFORMER_ATTN_WG) against the reference and
 * the GEMM path, on every device: prefill and decode (Lq <= 8) tiles,
 * causal, padding, bias, a sliding window, GQA, fully masked rows and head
 * dims from 1 to 256.  The kernel takes the largest group the device runs
 * it with up to the cap (Mesa 22.3's rusticl runs it with 32 at most on
 * llvmpipe, so a cap of 64 gives 32 there); every device runs 16. */
START_TEST(attn_fused_work_groups) {
  static const unsigned caps[] = {64, 32, 16};
  const unsigned cap = caps[_i];
  char env[8];
  snprintf(env, sizeof env, "%u", cap);
  env_set("CLFORMER_ATTN_WG", env);
  env_set("CLFORMER_ATTN_FUSED", "tiled"); /* CPU-class devices take attn_fused_cpu by default */
  att_fused_only = under_oclgrind();
  const unsigned wg = att_fused_wg(64, 33);
  fprintf(stderr, "note: fused attention, work-group cap %u: %u work-items (head dim 64, 33 queries)\n", cap, wg);
  ck_assert_msg(wg >= 16 && wg <= cap, "cap %u: work-group %u", cap, wg);
  if (cap == 16) ck_assert_uint_eq(wg, 16);
  ck_assert_uint_le(att_fused_wg(64, 1), cap); /* decode tiles */
  ck_assert_uint_le(att_fused_wg(256, 19), cap);

  /* Prefill over several query blocks and key tiles: causal and padding. */
  att_case c = att_self(2, 3, att_size(33, 13), 64);
  c.causal = 1;
  c.pad = CLF_I32;
  att_check(&c);
  /* Decoding with a KV cache, GQA, a sliding window. */
  att_cache_gqa_window(0);
  /* Bias per window and head, with f32 padding, cross-attention. */
  c = att_self(4, 3, 9, 32);
  c.nW = 2;
  c.Hb = 3;
  c.Lk = c.Lcap = 13;
  c.pad = CLF_F32;
  att_check(&c);
  /* Rows with no key left give zeros. */
  c = att_self(3, 2, 6, 16);
  c.Lk = c.Lcap = 4;
  c.pad = CLF_I32;
  c.pad_empty_b = 1;
  c.causal = 1;
  att_check(&c);
  /* Head dims at the edges of the tiles, prefill and decode. */
  static const size_t dhs[] = {1, 80, 129, 256};
  for (size_t x = 0; x < att_size(4, 2); x++) {
    c = att_self(1, 2, 19, dhs[x]);
    c.Lk = c.Lcap = 23;
    c.pad = CLF_I32;
    c.nW = 1;
    c.Hb = 2;
    att_check(&c);
    c.Lq = 3;
    c.causal = 1;
    att_check(&c);
  }
}
END_TEST

/* Teardown of attn_fused_work_groups and attn_fused_cpu_shape, run even
 * when a check failed. */
static void att_wg_uncap(void) {
  env_set("CLFORMER_ATTN_WG", NULL);
  env_set("CLFORMER_ATTN_FUSED", NULL);
  env_set("CLFORMER_ATTN_SHORT", NULL);
  att_fused_only = 0;
}

/* Which shape of the fused kernel the device takes by default: the CPU
 * shape (attn_fused_cpu, "... CPU WG=n") exactly on CPU-class devices. */
START_TEST(attn_fused_default_shape) {
  char name[128];
  ck_assert(clf__attn_fused_variant(th_ctx, 64, 33, 200, 1, name, sizeof(name)));
  const int cpu = strcmp(clf_context_device_class(th_ctx, NULL), "cpu") == 0;
  fprintf(stderr, "note: fused attention on this %s-class device: %s\n", cpu ? "CPU" : "GPU", name);
  ck_assert_msg((strstr(name, " CPU ") != NULL) == cpu, "%s", name);
  ck_assert_msg(strncmp(name, "attention.fused HEAD_DIM=64 ", 28) == 0, "%s", name);
}
END_TEST

/* Which CPU kernel takes a launch (attn_short_lanes in attention.c): the
 * short one for 8 rows or more per KV head over up to 64 or 128 keys, no
 * causal mask or window banding them, where K transposed fits 64 KiB; else
 * the row kernel. */
START_TEST(attn_short_shape) {
  env_set("CLFORMER_ATTN_FUSED", "cpu");
  env_set("CLFORMER_ATTN_SHORT", NULL);
  static const struct {
    size_t dh, lq, lk;
    int banded;
    const char *name;
  } picks[] = {
      {32, 40, 49, 0, "attention.fused HEAD_DIM=32 CPU SHORT SK=64"},
      {32, 8, 64, 0, "attention.fused HEAD_DIM=32 CPU SHORT SK=64"},
      {16, 40, 100, 0, "attention.fused HEAD_DIM=16 CPU SHORT SK=128"}, /* 17 x 128 floats: under 16 KiB */
      {16, 40, 129, 0, "attention.fused HEAD_DIM=16 CPU WG=8"},
      {32, 7, 49, 0, "attention.fused HEAD_DIM=32 CPU WG=8"},   /* too few rows to share K */
      {32, 40, 49, 1, "attention.fused HEAD_DIM=32 CPU WG=8"},  /* causal prefill: the row kernel stops at the edge */
      {256, 40, 49, 0, "attention.fused HEAD_DIM=256 CPU WG=8"}, /* (256 + 1) x 64 floats > 64 KiB */
  };
  for (size_t x = 0; x < sizeof(picks) / sizeof(picks[0]); x++) {
    char name[128];
    ck_assert(clf__attn_fused_variant(th_ctx, picks[x].dh, picks[x].lq, picks[x].lk, picks[x].banded, name,
                                      sizeof(name)));
    ck_assert_str_eq(name, picks[x].name);
  }
  env_set("CLFORMER_ATTN_FUSED", NULL);
}
END_TEST

/* The CPU shapes of the fused kernel, forced through $CLFORMER_ATTN_FUSED
 * on every device: the row kernel (one work-item per query row, keys 8 at
 * a time, vectors of 8, 4 or 1 floats by head dim) throughout, then the
 * short kernel (keys in lanes, $CLFORMER_ATTN_SHORT=1) wherever the keys
 * fit it, decoding's few rows included: its work-groups, then against the
 * reference and the GEMM path with every mask kind, GQA, Swin's bias, a KV
 * cache, fully masked rows, large scores and head dims 1 to 256. */
START_TEST(attn_fused_cpu_shape) {
  env_set("CLFORMER_ATTN_FUSED", "cpu");
  env_set("CLFORMER_ATTN_SHORT", _i ? "1" : "0");
  att_fused_only = under_oclgrind();
  char name[128];
  ck_assert(clf__attn_fused_variant(th_ctx, 64, 33, 200, 1, name, sizeof(name)));
  ck_assert_str_eq(name, "attention.fused HEAD_DIM=64 CPU WG=8");
  ck_assert(clf__attn_fused_variant(th_ctx, 16, 3, 100, 1, name, sizeof(name)));
  ck_assert_str_eq(name, _i ? "attention.fused HEAD_DIM=16 CPU SHORT SK=128" : "attention.fused HEAD_DIM=16 CPU WG=4");
  /* Up to 4 rows per KV head (decoding): groups of 4. */
  ck_assert_uint_eq(att_fused_wg(64, 3), 4);
  ck_assert_uint_eq(att_fused_wg(128, 1), 4);
  ck_assert_uint_eq(att_fused_wg(7, 4), 4);
  ck_assert_uint_eq(att_fused_wg(7, 5), 8);

  /* Head dims by vector width: 8 (32, 64, 128, 256), 4 (20), 1 (1, 7,
   * 129); 23 keys end in a partial block of 4; prefill, then decode. */
  static const size_t dhs[] = {32, 20, 7, 64, 1, 128, 129, 256};
  for (size_t x = 0; x < att_size(8, 3); x++) {
    att_case c = att_self(1, 2, 19, dhs[x]);
    c.Lk = c.Lcap = 23;
    c.pad = CLF_I32;
    c.nW = 1;
    c.Hb = 2;
    att_check(&c);
    c.Lq = 3;
    c.causal = 1;
    att_check(&c);
  }
  /* Every padding dtype, with causal prefill. */
  const int dtypes[] = {CLF_I32, CLF_I64, CLF_F32};
  for (int t = 0; t < 3; t++) {
    att_case c = att_self(3, 2, att_size(33, 10), 64);
    c.pad = dtypes[t];
    c.causal = t != 1;
    att_check(&c);
  }
  /* Decoding with a KV cache, GQA (with a bias), sliding windows (one
   * without causal). */
  att_cache_gqa_window(1);
  att_case c;
  /* Swin: 7x7 windows, relative bias and -100 region masks by window. */
  c = att_self(att_size(8, 2), 3, 49, 32);
  c.nW = att_size(4, 2);
  c.Hb = 3;
  c.swin = 1;
  c.merged = 1;
  att_check(&c);
  /* Rows with no key left give zeros (checked exactly by
   * attn_fully_masked_rows, which runs whichever shape is the device's). */
  c = att_self(3, 2, 6, 16);
  c.Lk = c.Lcap = 4;
  c.pad = CLF_I32;
  c.pad_empty_b = 1;
  c.causal = 1;
  float *f = att_check_tol(&c, 0, ATT_TOL, 1);
  for (size_t x = 0; x < c.B * c.H * c.Lq * c.Dh; x++) {
    const size_t b = x / (c.H * c.Lq * c.Dh), i = x / c.Dh % c.Lq;
    if (b == 1 || i < 2) ck_assert_msg(f[x] == 0.0f, "b=%zu i=%zu: %g", b, i, (double)f[x]);
  }
  free(f);
  /* Scores of several hundred: the running max must be subtracted. */
  c = att_self(2, 2, att_size(33, 9), 64);
  c.amp = 8.0f;
  c.scale = 1.0f;
  c.causal = 1;
  att_check_tol(&c, 0, 5e-4, 0);
  /* 65 to 128 keys (the short kernel's 128 lanes): padding, causal, bias. */
  c = att_self(2, 2, att_size(100, 70), 16);
  c.pad = CLF_I32;
  c.causal = 1;
  c.nW = 1;
  c.Hb = 2;
  att_check(&c);
  env_set("CLFORMER_ATTN_SHORT", NULL);
}
END_TEST

/* Self-attention read in place from the projection [B, L, (H + 2 Hkv) Dh]
 * (clf__attention_proj, what the models call where the CPU shape runs):
 * against the reference, and bit for bit against clf_attention on the
 * same heads split out, since the kernel and its arithmetic are the same;
 * where the tiled kernel runs it leaves the work to the split path. */
static void att_proj_check(const att_case *c) {
  const size_t Hkv = att_hkv(c), W = (c->H + 2 * Hkv) * c->Dh, n_out = c->B * c->Lq * c->H * c->Dh;
  const float scale = (float)(1.0 / sqrt((double)c->Dh));
  float *p = th_rand(c->B * c->Lq * W, c->seed, -1.0f, 1.0f);
  float *q = malloc(c->B * c->H * c->Lq * c->Dh * sizeof(float));
  const size_t nkv = c->B * Hkv * c->Lq * c->Dh;
  float *k = malloc(nkv * sizeof(float)), *v = malloc(nkv * sizeof(float));
  for (size_t b = 0; b < c->B; b++)
    for (size_t l = 0; l < c->Lq; l++)
      for (size_t x = 0; x < c->H * c->Dh; x++) {
        const size_t h = x / c->Dh, d = x % c->Dh;
        q[((b * c->H + h) * c->Lq + l) * c->Dh + d] = p[(b * c->Lq + l) * W + x];
        if (h >= Hkv) continue;
        k[((b * Hkv + h) * c->Lq + l) * c->Dh + d] = p[(b * c->Lq + l) * W + c->H * c->Dh + x];
        v[((b * Hkv + h) * c->Lq + l) * c->Dh + d] = p[(b * c->Lq + l) * W + (c->H + Hkv) * c->Dh + x];
      }
  float *bias = c->nW ? att_bias_data(c) : NULL, *ref = malloc(n_out * sizeof(float));
  ref_attention(c, scale, q, k, v, bias, ref);
  clf_tensor *tp = th_tensor(CLF_F32, 3, TH_SHAPE(c->B, c->Lq, W), p);
  clf_tensor *tq = th_tensor(CLF_F32, 4, TH_SHAPE(c->B, c->H, c->Lq, c->Dh), q);
  clf_tensor *tk = th_tensor(CLF_F32, 4, TH_SHAPE(c->B, Hkv, c->Lq, c->Dh), k);
  clf_tensor *tv = th_tensor(CLF_F32, 4, TH_SHAPE(c->B, Hkv, c->Lq, c->Dh), v);
  clf_tensor *tpad = c->pad >= 0 ? att_pad_tensor(c) : NULL;
  clf_tensor *tbias = bias ? th_tensor(CLF_F32, 4, TH_SHAPE(c->nW, c->Hb, c->Lq, c->Lk), bias) : NULL;
  clf_tensor *to = th_empty(CLF_F32, 3, TH_SHAPE(c->B, c->Lq, c->H * c->Dh));
  clf_attention_mask mask = {tpad, c->causal, tbias, c->window, c->softcap};
  int done = -1;
  TH_OK(clf_tensor_fill(th_ctx, to, NAN, NULL));
  TH_OK(clf__attention_proj(th_ctx, tp, c->H, Hkv, c->Dh, &mask, scale, to, &done));
  const char *shape = getenv("CLFORMER_ATTN_FUSED");
  const int cpu = shape ? strcmp(shape, "cpu") == 0 : strcmp(clf_context_device_class(th_ctx, NULL), "cpu") == 0;
  ck_assert_int_eq(done, cpu);
  float *got = th_download(to);
  if (done) {
    TH_CLOSE(got, ref, n_out, ATT_TOL);
    float *split = att_run(c, CLF_ATTN_AUTO, tq, tk, tv, &mask, scale);
    ck_assert_msg(memcmp(got, split, n_out * sizeof(float)) == 0, "H %zu, Dh %zu: not the split heads' bits", c->H,
                  c->Dh);
    free(split);
  } else {
    for (size_t x = 0; x < n_out; x++) ck_assert_msg(isnan(got[x]), "element %zu written: %g", x, (double)got[x]);
  }
  free(got); free(p); free(q); free(k); free(v); free(bias); free(ref);
  clf_tensor_destroy(tp); clf_tensor_destroy(tq); clf_tensor_destroy(tk); clf_tensor_destroy(tv);
  clf_tensor_destroy(tpad); clf_tensor_destroy(tbias); clf_tensor_destroy(to);
}

START_TEST(attn_from_projection) {
  /* Swin's windows (7x7 tokens, bias by window), BERT's padded rows, GQA,
   * and a head dim of scalars; first in the shape the device takes, then
   * each shape forced. */
  static const char *const shapes[] = {NULL, "cpu", "tiled"};
  for (int s = 0; s < 3; s++) {
    if (shapes[s]) env_set("CLFORMER_ATTN_FUSED", shapes[s]);
    att_case c = att_self(att_size(8, 2), 3, 49, 32);
    c.nW = att_size(4, 2), c.Hb = 3, c.swin = 1, c.merged = 1;
    att_proj_check(&c);
    c = att_self(2, 4, att_size(37, 9), 64);
    c.pad = CLF_I64, c.merged = 1;
    att_proj_check(&c);
    c.Hkv = 2, c.pad = -1, c.causal = 1;
    att_proj_check(&c);
    c = att_self(1, 2, 5, 7);
    c.merged = 1;
    att_proj_check(&c);
  }
  env_set("CLFORMER_ATTN_FUSED", NULL);
  /* A projection that does not hold the heads named. */
  clf_tensor *tp = th_empty(CLF_F32, 3, TH_SHAPE(1, 4, 3 * 16 + 1));
  clf_tensor *to = th_empty(CLF_F32, 3, TH_SHAPE(1, 4, 16));
  int done = -1;
  env_set("CLFORMER_ATTN_FUSED", "cpu");
  ck_assert_int_eq(clf__attention_proj(th_ctx, tp, 2, 2, 8, NULL, 1.0f, to, &done), CLF_E_SHAPE);
  ck_assert_int_eq(done, 0);
  ck_assert_msg(strstr(clf_last_error(th_ctx), "does not hold 2 query and 2 x 2 KV heads of 8"), "%s",
                clf_last_error(th_ctx));
  clf_clear_error(th_ctx);
  env_set("CLFORMER_ATTN_FUSED", NULL);
  clf_tensor_destroy(tp);
  clf_tensor_destroy(to);
}
END_TEST

START_TEST(attn_head_dim_over_256) {
  /* The fused kernel stops at 256: FUSED fails, AUTO falls back to GEMM. */
  att_case c = att_self(1, 2, 5, 300);
  size_t n = c.B * c.H * c.Lq * c.Dh;
  float *q = th_rand(n, 11, -1, 1), *ref = malloc(n * sizeof(float));
  float scale = 0.05f;
  ref_attention(&c, scale, q, q, q, NULL, ref);
  clf_tensor *tq = th_tensor(CLF_F32, 4, TH_SHAPE(1, 2, 5, 300), q);
  clf_tensor *to = th_empty(CLF_F32, 4, TH_SHAPE(1, 2, 5, 300));
  TH_FAILS(clf_attention(th_ctx, tq, tq, tq, 0, NULL, scale, CLF_ATTN_FUSED, to, NULL), CLF_E_UNSUPPORTED,
           "head dim 300");
  for (int impl = CLF_ATTN_AUTO; impl <= CLF_ATTN_GEMM; impl += 2) {
    TH_OK(clf_attention(th_ctx, tq, tq, tq, 0, NULL, scale, (clf_attention_impl)impl, to, NULL));
    float *o = th_download(to);
    TH_CLOSE(o, ref, n, ATT_TOL);
    free(o);
  }
  free(q); free(ref);
  clf_tensor_destroy(tq); clf_tensor_destroy(to);
}
END_TEST

START_TEST(attn_views) {
  /* q, k, v and out as views at offsets into one buffer, as a fused QKV
   * projection gives them: every kernel must honour the offsets. */
  const size_t B = 2, H = 3, L = 11, Dh = 24, n = B * H * L * Dh;
  float *base = th_rand(4 * n + 5, 21, -1, 1), *ref = malloc(n * sizeof(float));
  att_case c = att_self(B, H, L, Dh);
  c.causal = 1;
  float scale = 0.2f;
  ref_attention(&c, scale, base + 5, base + 5 + n, base + 5 + 2 * n, NULL, ref);
  clf_tensor *tb = th_tensor(CLF_F32, 1, TH_SHAPE(4 * n + 5), base);
  clf_tensor *tq, *tk, *tv, *to;
  TH_OK(clf_tensor_view(tb, 5, 4, TH_SHAPE(B, H, L, Dh), &tq));
  TH_OK(clf_tensor_view(tb, 5 + n, 4, TH_SHAPE(B, H, L, Dh), &tk));
  TH_OK(clf_tensor_view(tb, 5 + 2 * n, 4, TH_SHAPE(B, H, L, Dh), &tv));
  TH_OK(clf_tensor_view(tb, 5 + 3 * n, 4, TH_SHAPE(B, H, L, Dh), &to));
  clf_attention_mask m = {NULL, 1, NULL};
  /* out is poisoned with NaN through a write of the whole base buffer:
   * Oclgrind 21.10 takes the rest of a buffer for uninitialised after a
   * partial write or fill of it. */
  for (size_t x = 0; x < n; x++) base[5 + 3 * n + x] = NAN;
  for (int impl = CLF_ATTN_FUSED; impl <= CLF_ATTN_GEMM; impl++) {
    TH_OK(clf_tensor_upload(th_ctx, tb, base, (4 * n + 5) * sizeof(float)));
    TH_OK(clf_attention(th_ctx, tq, tk, tv, 0, &m, scale, (clf_attention_impl)impl, to, NULL));
    float *o = th_download(to);
    TH_CLOSE(o, ref, n, ATT_TOL);
    free(o);
  }
  /* A padding mask view at an odd offset (i64: the kernel reads 32-bit
   * words, so the offset doubles). */
  int64_t pad[1 + 2 * 11];
  pad[0] = 0;
  for (size_t x = 0; x < 22; x++) pad[1 + x] = (x % 3 != 0);
  clf_tensor *tp = th_tensor(CLF_I64, 1, TH_SHAPE(23), pad), *tpv;
  TH_OK(clf_tensor_view(tp, 1, 2, TH_SHAPE(2, 11), &tpv));
  /* The reference gets this mask as a bias of -inf where pad is 0 (it
   * treats -inf as masked). */
  float *bias = malloc(B * L * L * sizeof(float));
  for (size_t b = 0; b < B; b++)
    for (size_t i = 0; i < L; i++)
      for (size_t j = 0; j < L; j++) bias[(b * L + i) * L + j] = pad[1 + b * L + j] ? 0.0f : -INFINITY;
  att_case cb = att_self(B, H, L, Dh);
  cb.nW = B;
  cb.Hb = 1;
  ref_attention(&cb, scale, base + 5, base + 5 + n, base + 5 + 2 * n, bias, ref);
  clf_attention_mask mp = {tpv, 0, NULL};
  for (int impl = CLF_ATTN_FUSED; impl <= CLF_ATTN_GEMM; impl++) {
    TH_OK(clf_attention(th_ctx, tq, tk, tv, 0, &mp, scale, (clf_attention_impl)impl, to, NULL));
    float *o = th_download(to);
    TH_CLOSE(o, ref, n, ATT_TOL);
    free(o);
  }
  free(base); free(ref); free(bias);
  clf_tensor_destroy(tq); clf_tensor_destroy(tk); clf_tensor_destroy(tv); clf_tensor_destroy(to);
  clf_tensor_destroy(tb); clf_tensor_destroy(tp); clf_tensor_destroy(tpv);
}
END_TEST

START_TEST(attn_empty) {
  /* No keys at all (Lcap 0): every row is fully masked, so zeros. */
  float *hq = th_rand(48, 1, -1, 1);
  clf_tensor *q = th_tensor(CLF_F32, 4, TH_SHAPE(1, 2, 3, 8), hq);
  free(hq);
  clf_tensor *k0 = th_empty(CLF_F32, 4, TH_SHAPE(1, 2, 0, 8)), *o = th_empty(CLF_F32, 4, TH_SHAPE(1, 2, 3, 8));
  for (int impl = CLF_ATTN_AUTO; impl <= CLF_ATTN_GEMM; impl++) {
    TH_OK(clf_tensor_fill(th_ctx, o, NAN, NULL));
    cl_event ev = NULL;
    TH_OK(clf_attention(th_ctx, q, k0, k0, 0, NULL, 1.0f, (clf_attention_impl)impl, o, &ev));
    ck_assert_ptr_nonnull(ev);
    clReleaseEvent(ev);
    float *h = th_download(o);
    for (size_t x = 0; x < 48; x++) ck_assert(h[x] == 0.0f);
    free(h);
  }
  /* Empty batch and empty queries: nothing to do, an event all the same. */
  clf_tensor *qe = th_empty(CLF_F32, 4, TH_SHAPE(0, 2, 3, 8)), *ke = th_empty(CLF_F32, 4, TH_SHAPE(0, 2, 5, 8));
  clf_tensor *oe = th_empty(CLF_F32, 3, TH_SHAPE(0, 3, 16)), *ql = th_empty(CLF_F32, 4, TH_SHAPE(1, 2, 0, 8));
  clf_tensor *kl = th_empty(CLF_F32, 4, TH_SHAPE(1, 2, 5, 8)), *ol = th_empty(CLF_F32, 4, TH_SHAPE(1, 2, 0, 8));
  for (int impl = CLF_ATTN_AUTO; impl <= CLF_ATTN_GEMM; impl++) {
    cl_event ev = NULL;
    TH_OK(clf_attention(th_ctx, qe, ke, ke, 0, NULL, 1.0f, (clf_attention_impl)impl, oe, &ev));
    ck_assert_ptr_nonnull(ev);
    clReleaseEvent(ev);
    TH_OK(clf_attention(th_ctx, ql, kl, kl, 3, NULL, 1.0f, (clf_attention_impl)impl, ol, NULL));
  }
  TH_OK(clf_finish(th_ctx));
  clf_tensor_destroy(q); clf_tensor_destroy(k0); clf_tensor_destroy(o);
  clf_tensor_destroy(qe); clf_tensor_destroy(ke); clf_tensor_destroy(oe);
  clf_tensor_destroy(ql); clf_tensor_destroy(kl); clf_tensor_destroy(ol);
}
END_TEST

START_TEST(attn_bad_arguments) {
  const int I = CLF_ATTN_AUTO;
  clf_tensor *q = th_empty(CLF_F32, 4, TH_SHAPE(2, 3, 5, 8)), *k = th_empty(CLF_F32, 4, TH_SHAPE(2, 3, 7, 8));
  clf_tensor *v = th_empty(CLF_F32, 4, TH_SHAPE(2, 3, 7, 8)), *o = th_empty(CLF_F32, 4, TH_SHAPE(2, 3, 5, 8));
  clf_tensor *qi = th_empty(CLF_I32, 4, TH_SHAPE(2, 3, 5, 8)), *q3 = th_empty(CLF_F32, 3, TH_SHAPE(2, 5, 24));
  clf_tensor *kb = th_empty(CLF_F32, 4, TH_SHAPE(1, 3, 7, 8)), *kh = th_empty(CLF_F32, 4, TH_SHAPE(2, 2, 7, 8));
  clf_tensor *kd = th_empty(CLF_F32, 4, TH_SHAPE(2, 3, 7, 9)), *v6 = th_empty(CLF_F32, 4, TH_SHAPE(2, 3, 6, 8));
  clf_tensor *o2 = th_empty(CLF_F32, 4, TH_SHAPE(2, 3, 8, 5)), *om = th_empty(CLF_F32, 3, TH_SHAPE(2, 5, 25));
  clf_tensor *oi = th_empty(CLF_F32, 2, TH_SHAPE(10, 24)), *ov = th_empty(CLF_I32, 4, TH_SHAPE(2, 3, 5, 8));
  clf_tensor *p = th_empty(CLF_I32, 2, TH_SHAPE(2, 7)), *p6 = th_empty(CLF_I32, 2, TH_SHAPE(2, 6));
  clf_tensor *ph = th_empty(CLF_F16, 2, TH_SHAPE(2, 7)), *p1 = th_empty(CLF_I32, 1, TH_SHAPE(14));
  clf_tensor *bs = th_empty(CLF_F32, 4, TH_SHAPE(2, 1, 5, 7)), *b3 = th_empty(CLF_F32, 4, TH_SHAPE(3, 3, 5, 7));
  clf_tensor *bh = th_empty(CLF_F32, 4, TH_SHAPE(1, 2, 5, 7)), *bl = th_empty(CLF_F32, 4, TH_SHAPE(1, 3, 5, 6));
  clf_tensor *bi = th_empty(CLF_I32, 4, TH_SHAPE(1, 3, 5, 7)), *b0 = th_empty(CLF_F32, 4, TH_SHAPE(0, 3, 5, 7));
  clf_attention_mask m = {NULL, 0, NULL};

  ck_assert_int_eq(clf_attention(NULL, q, k, v, 0, NULL, 1, I, o, NULL), CLF_E_INVALID_ARG);
  TH_FAILS(clf_attention(th_ctx, NULL, k, v, 0, NULL, 1, I, o, NULL), CLF_E_INVALID_ARG, "q is NULL");
  TH_FAILS(clf_attention(th_ctx, q, NULL, v, 0, NULL, 1, I, o, NULL), CLF_E_INVALID_ARG, "k is NULL");
  TH_FAILS(clf_attention(th_ctx, q, k, NULL, 0, NULL, 1, I, o, NULL), CLF_E_INVALID_ARG, "v is NULL");
  TH_FAILS(clf_attention(th_ctx, q, k, v, 0, NULL, 1, I, NULL, NULL), CLF_E_INVALID_ARG, "out is NULL");
  TH_FAILS(clf_attention(th_ctx, qi, k, v, 0, NULL, 1, I, o, NULL), CLF_E_DTYPE, "q is i32");
  TH_FAILS(clf_attention(th_ctx, q, k, v, 0, NULL, 1, I, ov, NULL), CLF_E_DTYPE, "out is i32");
  TH_FAILS(clf_attention(th_ctx, q3, k, v, 0, NULL, 1, I, o, NULL), CLF_E_SHAPE, "q has shape [2, 5, 24]");
  TH_FAILS(clf_attention(th_ctx, q, kb, v, 0, NULL, 1, I, o, NULL), CLF_E_SHAPE, "k has shape [1, 3, 7, 8]");
  /* 3 query heads over 2 KV heads: not a grouping. */
  TH_FAILS(clf_attention(th_ctx, q, kh, kh, 0, NULL, 1, I, o, NULL), CLF_E_SHAPE,
           "q has 3 heads and k [2, 2, 7, 8] has 2: the query heads must be a multiple of the KV heads");
  clf_tensor *k1 = th_empty(CLF_F32, 4, TH_SHAPE(2, 1, 7, 8)); /* one KV head: fine, but v must match it */
  TH_FAILS(clf_attention(th_ctx, q, k1, v, 0, NULL, 1, I, o, NULL), CLF_E_SHAPE, "v has shape [2, 3, 7, 8]");
  clf_tensor_destroy(k1);
  TH_FAILS(clf_attention(th_ctx, q, kd, v, 0, NULL, 1, I, o, NULL), CLF_E_SHAPE, "k has shape [2, 3, 7, 9]");
  TH_FAILS(clf_attention(th_ctx, q, k, v6, 0, NULL, 1, I, o, NULL), CLF_E_SHAPE, "v has shape [2, 3, 6, 8]");
  TH_FAILS(clf_attention(th_ctx, q, k, kd, 0, NULL, 1, I, o, NULL), CLF_E_SHAPE, "v has shape [2, 3, 7, 9]");
  TH_FAILS(clf_attention(th_ctx, q, k, v, 8, NULL, 1, I, o, NULL), CLF_E_INVALID_ARG, "kv_len 8 exceeds");
  TH_FAILS(clf_attention(th_ctx, q, k, v, 0, NULL, 1, I, o2, NULL), CLF_E_SHAPE, "out has shape [2, 3, 8, 5]");
  TH_FAILS(clf_attention(th_ctx, q, k, v, 0, NULL, 1, I, om, NULL), CLF_E_SHAPE, "out has shape [2, 5, 25]");
  TH_FAILS(clf_attention(th_ctx, q, k, v, 0, NULL, 1, I, oi, NULL), CLF_E_SHAPE, "out has shape [10, 24]");
  m.key_padding = p6;
  TH_FAILS(clf_attention(th_ctx, q, k, v, 0, &m, 1, I, o, NULL), CLF_E_SHAPE, "key_padding has shape [2, 6]");
  m.key_padding = p; /* [2, 7] is right for kv_len 7 but not for kv_len 6 */
  TH_FAILS(clf_attention(th_ctx, q, k, v, 6, &m, 1, I, o, NULL), CLF_E_SHAPE, "key_padding has shape [2, 7]");
  m.key_padding = ph;
  TH_FAILS(clf_attention(th_ctx, q, k, v, 0, &m, 1, I, o, NULL), CLF_E_DTYPE, "key_padding is f16");
  m.key_padding = p1;
  TH_FAILS(clf_attention(th_ctx, q, k, v, 0, &m, 1, I, o, NULL), CLF_E_SHAPE, "key_padding has shape [14]");
  m.key_padding = NULL;
  m.bias = b3; /* nW = 3 does not divide B = 2 */
  TH_FAILS(clf_attention(th_ctx, q, k, v, 0, &m, 1, I, o, NULL), CLF_E_SHAPE, "bias has shape [3, 3, 5, 7]");
  m.bias = bh;
  TH_FAILS(clf_attention(th_ctx, q, k, v, 0, &m, 1, I, o, NULL), CLF_E_SHAPE, "bias has shape [1, 2, 5, 7]");
  m.bias = bl;
  TH_FAILS(clf_attention(th_ctx, q, k, v, 0, &m, 1, I, o, NULL), CLF_E_SHAPE, "bias has shape [1, 3, 5, 6]");
  m.bias = b0;
  TH_FAILS(clf_attention(th_ctx, q, k, v, 0, &m, 1, I, o, NULL), CLF_E_SHAPE, "bias has shape [0, 3, 5, 7]");
  m.bias = bi;
  TH_FAILS(clf_attention(th_ctx, q, k, v, 0, &m, 1, I, o, NULL), CLF_E_DTYPE, "bias is i32");
  m.bias = bs; /* nW = 2 with H broadcast is fine */
  float *data = th_rand(2 * 3 * 7 * 8, 5, -1, 1); /* uploaded: see attn_views */
  TH_OK(clf_tensor_upload(th_ctx, q, data, clf_tensor_bytes(q)));
  TH_OK(clf_tensor_upload(th_ctx, k, data, clf_tensor_bytes(k)));
  TH_OK(clf_tensor_upload(th_ctx, v, data, clf_tensor_bytes(v)));
  TH_OK(clf_tensor_upload(th_ctx, bs, data, clf_tensor_bytes(bs)));
  TH_OK(clf_attention(th_ctx, q, k, v, 0, &m, 1, I, o, NULL));
  m.softcap = -1.0f;
  TH_FAILS(clf_attention(th_ctx, q, k, v, 0, &m, 1, I, o, NULL), CLF_E_INVALID_ARG,
           "mask->softcap is -1, must be finite and not negative");
  m.softcap = INFINITY;
  TH_FAILS(clf_attention(th_ctx, q, k, v, 0, &m, 1, I, o, NULL), CLF_E_INVALID_ARG, "mask->softcap is inf");
  m.softcap = 0.0f;
  TH_FAILS(clf_attention(th_ctx, q, k, v, 0, NULL, 1, (clf_attention_impl)7, o, NULL), CLF_E_INVALID_ARG, "impl 7");
  TH_FAILS(clf_attention(th_ctx, q, k, v, 0, NULL, NAN, I, o, NULL), CLF_E_INVALID_ARG, "scale");
  TH_OK(clf_finish(th_ctx));

  clf_tensor *all[] = {q, k, v, o, qi, q3, kb, kh, kd, v6, o2, om, oi, ov, p, p6, ph, p1, bs, b3, bh, bl, bi, b0};
  for (size_t x = 0; x < sizeof(all) / sizeof(all[0]); x++) clf_tensor_destroy(all[x]);
  free(data);
}
END_TEST

/* Under Oclgrind's data-race checker (the matrix's race-checked column,
 * OCLGRIND_DATA_RACES set), every test costs minutes: the suite keeps the
 * fused kernel in each of its shapes with every mask, and two
 * GEMM-path tests for its softmax kernel. */
static int under_race_checks(void) { return under_oclgrind() && getenv("OCLGRIND_DATA_RACES") != NULL; }

static Suite *suite(void) {
  Suite *s = suite_create("attention");
  TCase *sizes = tcase_create("sizes"), *masks = tcase_create("masks");
  TCase *layout = tcase_create("layout"), *errors = tcase_create("errors");
  TCase *groups = tcase_create("work_groups");
  tcase_set_timeout(groups, 0);
  tcase_add_checked_fixture(groups, NULL, att_wg_uncap);
  tcase_add_loop_test(groups, attn_fused_work_groups, 0, 3);
  tcase_add_loop_test(groups, attn_fused_cpu_shape, 0, 2);
  tcase_add_test(groups, attn_short_shape);
  tcase_add_test(groups, attn_fused_default_shape);
  if (!under_race_checks()) tcase_add_test(groups, attn_from_projection); /* no local memory to race on */
  tcase_set_timeout(sizes, 0);
  tcase_set_timeout(masks, 0);
  tcase_set_timeout(layout, 0);
  if (under_race_checks()) {
    tcase_add_test(masks, attn_causal);
    tcase_add_test(masks, attn_bias_windows);
    suite_add_tcase(s, masks);
    suite_add_tcase(s, groups);
    return s;
  }
  /* Under the simulator (CLF_TEST_UNDER_OCLGRIND) the three slowest tests,
   * 4 of its 12 minutes there, are left to the other columns: the sizes and
   * head dims, and the Swin-like masks, whose kernels the other tests run. */
  const int og = under_oclgrind();
  if (!og) tcase_add_test(sizes, attn_self_sizes);
  tcase_add_test(sizes, attn_cross);
  if (!og) tcase_add_test(sizes, attn_head_dims);
  tcase_add_test(sizes, attn_head_dim_over_256);
  tcase_add_test(masks, attn_key_padding);
  tcase_add_test(masks, attn_causal);
  tcase_add_test(masks, attn_kv_cache);
  tcase_add_test(masks, attn_gqa);
  tcase_add_test(masks, attn_sliding_window);
  tcase_add_test(masks, attn_bias_windows);
  if (!og) tcase_add_test(masks, attn_swin_like);
  tcase_add_test(masks, attn_fully_masked_rows);
  tcase_add_test(masks, attn_softcap);
  tcase_add_test(masks, attn_large_scores);
  tcase_add_test(layout, attn_merged_layout);
  tcase_add_test(layout, attn_views);
  tcase_add_test(layout, attn_empty);
  tcase_add_test(errors, attn_bad_arguments);
  suite_add_tcase(s, sizes);
  suite_add_tcase(s, masks);
  suite_add_tcase(s, layout);
  suite_add_tcase(s, groups);
  suite_add_tcase(s, errors);
  return s;
}

int main(void) { return th_run(suite()); }
