/* test_generate.c - greedy and beam-search generation against the sequences
 * transformers' generate() produced for the fixtures (token for token), and
 * the argument errors of clf_model_generate.
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clformer.h"
#include "fixture_util.h"
#include "harness.h"
#include "models/sampling.h"

#include <float.h>
#include <math.h>

/* The fixture helpers below are the same as test_models.c's (each suite is
 * one self-contained program). */
/* Every generate case: the sequences must equal the expected ones exactly. */
static void run_generate_cases(const char *model_dir, const char *case_dir) {
  check_generate_cases(get_model(model_dir), case_dir, case_dir);
}

static void run_fixture(const char *name) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/%s", fixtures(), name);
  run_generate_cases(dir, dir);
}

START_TEST(test_gpt2_greedy) { run_fixture("gpt2"); }
END_TEST

START_TEST(test_gpt2_legacy_greedy) { run_fixture("gpt2_legacy"); }
END_TEST

START_TEST(test_marian_greedy_and_beam) { run_fixture("marian"); }
END_TEST

START_TEST(test_marian_paper_greedy_and_beam) {
  char *dir = make_paper_dir(), cases[1024];
  snprintf(cases, sizeof cases, "%s/marian_paper", fixtures());
  run_generate_cases(dir, cases);
  remove_dir(dir);
}
END_TEST

/* Generating twice from one model, and a forward pass between, gives the same
 * sequences (the caches are rebuilt each time). */
START_TEST(test_repeat_and_interleave) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/gpt2", fixtures());
  clf_model *m = get_model(dir);
  int32_t ids[4] = {5, 17, 99, 3};
  clf_array in = {.name = "input_ids", .dtype = CLF_I32, .ndim = 2, .shape = {1, 4}, .data = ids}, a, b, lg;
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 5;
  TH_OK(clf_model_generate(m, &in, NULL, &o, &a));
  const char *outs[] = {"logits"};
  TH_OK(clf_model_run(m, &in, 1, outs, 1, &lg));
  TH_OK(clf_model_generate(m, &in, NULL, &o, &b));
  ck_assert_uint_eq(a.shape[1], 9);
  ck_assert_uint_eq(b.shape[1], 9);
  ck_assert(memcmp(a.data, b.data, 9 * sizeof(int64_t)) == 0);
  ck_assert(memcmp(a.data, (int64_t[]){5, 17, 99, 3}, 4 * sizeof(int64_t)) == 0);
  /* the first new token is the argmax of the forward pass's last logits */
  const float *l = (const float *)lg.data + 3 * 128;
  size_t best = 0;
  for (size_t v = 1; v < 128; v++)
    if (l[v] > l[best]) best = v;
  ck_assert_int_eq(((int64_t *)a.data)[4], (int64_t)best);
  clf_array_free(&a);
  clf_array_free(&b);
  clf_array_free(&lg);
}
END_TEST

START_TEST(test_bad_arguments) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/marian", fixtures());
  clf_model *m = get_model(dir);
  int64_t ids[6] = {1, 2, 3, 4, 5, 6};
  float f[6] = {0};
  clf_array in = {.name = "input_ids", .dtype = CLF_I64, .ndim = 2, .shape = {2, 3}, .data = ids}, seq;
  clf_array fl = {.name = "input_ids", .dtype = CLF_F32, .ndim = 2, .shape = {2, 3}, .data = f};
  clf_array mk = in;
  mk.shape[1] = 2;
  TH_FAILS(clf_model_generate(m, NULL, NULL, NULL, &seq), CLF_E_INVALID_ARG, "input_ids");
  TH_FAILS(clf_model_generate(m, &in, NULL, NULL, NULL), CLF_E_INVALID_ARG, "sequences");
  TH_FAILS(clf_model_generate(m, &fl, NULL, NULL, &seq), CLF_E_DTYPE, "input_ids");
  TH_FAILS(clf_model_generate(m, &in, &mk, NULL, &seq), CLF_E_SHAPE, "attention_mask");
  /* defaults from the checkpoint: greedy up to max_length 10 */
  TH_OK(clf_model_generate(m, &in, NULL, NULL, &seq));
  ck_assert_uint_eq(seq.shape[0], 2);
  ck_assert_uint_le(seq.shape[1], 10);
  ck_assert_int_eq(((int64_t *)seq.data)[0], 95); /* decoder_start_token_id */
  clf_array_free(&seq);
  TH_FAILS(clf_model_generate(NULL, &in, NULL, NULL, &seq), CLF_E_INVALID_ARG, "model");
  /* a setting that would change the result and is not implemented is refused */
  char *tmp = copy_fixture("gpt2", NULL, NULL, 0, NULL);
  set_config(tmp, "encoder_repetition_penalty", "1.3");
  TH_OK(clf_model_load(th_ctx, tmp, &m));
  TH_FAILS(clf_model_generate(m, &in, NULL, NULL, &seq), CLF_E_UNSUPPORTED, "encoder_repetition_penalty");
  clf_model_destroy(m);
  remove_dir(tmp);
}
END_TEST

/* Writes dir/generation_config.json with the given body. */
static void write_gen_config(const char *dir, const char *body) {
  char path[1200];
  snprintf(path, sizeof path, "%s/generation_config.json", dir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(body, f);
  fclose(f);
}

/* Sizes from generation settings and arguments are checked against the
 * model and the limits before anything is allocated (issue 11: max_length
 * or num_beams of 2^61 overflowed the sizes; 2e8 / 1e6 allocated 0.8-1.6 GB
 * first; Marian generated past its position table). */
START_TEST(test_budgets) {
  int64_t ids[2] = {5, 17}, bad[2] = {5, 128};
  clf_array in = {.name = "input_ids", .dtype = CLF_I64, .ndim = 2, .shape = {1, 2}, .data = ids}, seq;
  clf_generate_options o;
  char *tmp = copy_fixture("gpt2", NULL, NULL, 0, NULL);
  clf_model *m = NULL;
  write_gen_config(tmp, "{\"bos_token_id\": 33, \"eos_token_id\": 33, \"max_length\": 2305843009213693952}");
  TH_OK(clf_model_load(th_ctx, tmp, &m));
  TH_FAILS(clf_model_generate(m, &in, NULL, NULL, &seq), CLF_E_INVALID_ARG,
           "max_length makes sequences of 2305843009213693952 tokens, more than the model's 32 positions");
  clf_model_destroy(m);
  write_gen_config(tmp, "{\"bos_token_id\": 33, \"eos_token_id\": 33, \"num_beams\": 2305843009213693952}");
  TH_OK(clf_model_load(th_ctx, tmp, &m));
  TH_FAILS(clf_model_generate(m, &in, NULL, NULL, &seq), CLF_E_INVALID_ARG,
           "num_beams 2305843009213693952 is more than the limit of 1024");
  clf_generate_options_init(&o);
  /* within the beam limit: runs (1000 x 128 logits; fewer on Oclgrind's
   * simulation) */
  o.num_beams = getenv("CLF_TEST_UNDER_OCLGRIND") ? 16 : 1000;
  o.max_new_tokens = 2;
  TH_OK(clf_model_generate(m, &in, NULL, &o, &seq));
  clf_array_free(&seq);
  clf_generate_options_init(&o);
  o.num_beams = 1; /* greedy, over the checkpoint's num_beams */
  o.max_new_tokens = 31; /* 2 + 31 > n_positions 32 */
  TH_FAILS(clf_model_generate(m, &in, NULL, &o, &seq), CLF_E_INVALID_ARG,
           "max_new_tokens makes sequences of 33 tokens, more than the model's 32 positions");
  o.max_new_tokens = (size_t)-1;
  TH_FAILS(clf_model_generate(m, &in, NULL, &o, &seq), CLF_E_INVALID_ARG, "overflows");
  o.max_new_tokens = 30; /* exactly the table */
  TH_OK(clf_model_generate(m, &in, NULL, &o, &seq));
  ck_assert_uint_eq(seq.shape[1], 32);
  clf_array_free(&seq);
  in.data = bad; /* vocab_size 128 */
  TH_FAILS(clf_model_generate(m, &in, NULL, &o, &seq), CLF_E_INVALID_ARG,
           "input_ids[0][1] is 128, outside the table of 128 rows");
  clf_model_destroy(m);
  remove_dir(tmp);
  /* Marian: 64 positions, sinusoidal; decoder start + 100 new tokens */
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/marian", fixtures());
  m = get_model(dir);
  in.data = ids;
  clf_generate_options_init(&o);
  o.max_new_tokens = 100;
  TH_FAILS(clf_model_generate(m, &in, NULL, &o, &seq), CLF_E_INVALID_ARG,
           "sequences of 101 tokens, more than the model's 64 positions");
  o.max_new_tokens = 63;
  TH_OK(clf_model_generate(m, &in, NULL, &o, &seq));
  ck_assert_uint_le(seq.shape[1], 64);
  clf_array_free(&seq);
  /* a source longer than the 64 positions: refused before the encoder runs */
  int64_t long_src[65] = {0};
  clf_array src = {.name = "input_ids", .dtype = CLF_I64, .ndim = 2, .shape = {1, 65}, .data = long_src};
  o.max_new_tokens = 2;
  TH_FAILS(clf_model_generate(m, &src, NULL, &o, &seq), CLF_E_INVALID_ARG,
           "the source's 65 positions exceed max_position_embeddings 64");
}
END_TEST


/* ---- sampling ---- */

/* The distance of two floats in units in the last place (same sign). */
static long ulps(float a, float b) {
  int32_t x, y;
  memcpy(&x, &a, 4), memcpy(&y, &b, 4);
  if ((x < 0) != (y < 0)) return a == b ? 0 : 1L << 30;
  return labs((long)x - (long)y);
}

static double num_or(const cJSON *c, const char *key, double dflt) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(c, key);
  return cJSON_IsNumber(x) ? x->valuedouble : dflt;
}

/* Every case of tests/fixtures/sampling (tools/fixtures/make_sampling_fixtures.py:
 * transformers 4.40.2's processors, then with do_sample its warpers and
 * 4.41's min_p, on the same scores and ids): -inf at the same positions,
 * every other score within 1 ulp. */
START_TEST(test_processors_match_transformers) {
  char dir[1024], path[1200];
  snprintf(dir, sizeof dir, "%s/sampling", fixtures());
  cJSON *doc = load_cases(dir);
  clf_array x, ids, y;
  snprintf(path, sizeof path, "%s/scores_in.npy", dir);
  TH_OK(clf_npy_read(path, &x));
  snprintf(path, sizeof path, "%s/ids.npy", dir);
  TH_OK(clf_npy_read(path, &ids));
  snprintf(path, sizeof path, "%s/scores_out.npy", dir);
  TH_OK(clf_npy_read(path, &y));
  const cJSON *c;
  int n_cases = 0, n_filtered = 0;
  cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(doc, "cases")) {
    const size_t R = (size_t)num_or(c, "R", 0), V = (size_t)num_or(c, "V", 0), n = (size_t)num_or(c, "n", 0);
    const size_t n_eos = (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(c, "eos"));
    clf__gen_params p = {
        .do_sample = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "do_sample")),
        .repetition_penalty = num_or(c, "repetition_penalty", 1),
        .no_repeat_ngram = (size_t)num_or(c, "no_repeat_ngram_size", 0),
        .temperature = num_or(c, "temperature", 1),
        .top_k = (size_t)num_or(c, "top_k", 0),
        .top_p = num_or(c, "top_p", 1),
        .min_p = num_or(c, "min_p", -1),
        .min_keep = num_or(c, "num_beams", 1) > 1 ? n_eos + 1 : 1,
    };
    const float *in = (const float *)x.data + (size_t)num_or(c, "scores_offset", 0);
    const float *want = (const float *)y.data + (size_t)num_or(c, "scores_offset", 0);
    const int64_t *id = (const int64_t *)ids.data + (size_t)num_or(c, "ids_offset", 0);
    float *s = malloc(V * sizeof *s);
    clf__scored *tmp = malloc(V * sizeof *tmp);
    for (size_t r = 0; r < R; r++) {
      memcpy(s, in + r * V, V * sizeof *s);
      clf__gen_process(&p, id + r * n, n, s, V, tmp);
      for (size_t v = 0; v < V; v++) {
        const float w = want[r * V + v];
        n_filtered += isinf(w) && !isinf(in[r * V + v]);
        ck_assert_msg(isinf(w) ? s[v] == w : ulps(s[v], w) <= 1, "case %s row %zu token %zu: got %.9g, want %.9g",
                      cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring, r, v, s[v], w);
      }
    }
    free(s), free(tmp);
    n_cases++;
  }
  ck_assert_int_eq(n_cases, 59);
  ck_assert_int_gt(n_filtered, 1000); /* the warpers did filter */
  clf_array_free(&x), clf_array_free(&ids), clf_array_free(&y);
  cJSON_Delete(doc);
}
END_TEST

/* The sampler against the distribution it draws from: softmax of fixed
 * scores (one -inf), 200000 draws with a fixed seed; Pearson's chi-square
 * over the 7 finite tokens (6 degrees of freedom) must be below 22.46, its
 * 0.999 quantile; the -inf token is never drawn. */
START_TEST(test_sampler_frequencies) {
  const float s[8] = {1.0f, 0.5f, -0.25f, 2.0f, -INFINITY, 0.0f, 1.5f, -1.0f};
  double prob[8], sum = 0;
  for (int v = 0; v < 8; v++) sum += prob[v] = exp((double)s[v]);
  size_t count[8] = {0};
  clf__rng rng;
  clf__rng_seed(&rng, 42);
  const size_t N = 200000;
  for (size_t i = 0; i < N; i++) count[clf__gen_draw(s, 8, &rng)]++;
  double chi2 = 0;
  for (int v = 0; v < 8; v++) {
    if (v == 4) continue;
    const double e = N * prob[v] / sum;
    chi2 += (count[v] - e) * (count[v] - e) / e;
  }
  ck_assert_uint_eq(count[4], 0);
  ck_assert_msg(chi2 < 22.46, "chi-square %.2f", chi2);
  /* the uniforms: their mean within 5 standard errors of 1/2 */
  double mean = 0;
  for (size_t i = 0; i < N; i++) mean += clf__rng_uniform(&rng) / N;
  ck_assert_msg(fabs(mean - 0.5) < 5 * sqrt(1.0 / 12 / N), "mean %.5f", mean);
}
END_TEST

/* Issue 21: a temperature that is 0 or a denormal as a float, or that makes
 * scores / t overflow, and a top_p whose cut 1 - top_p rounds to 1, are
 * their limits t -> 0+ and top_p -> 0+: only the maximal score(s) stay,
 * finite, and every draw is the argmax (torch's division gave inf and NaN,
 * and the draw a low id: [1, 0, 0, 0] where greedy gives [35, 37, 46, 46]).
 * Rows: scores of both signs with one maximum at 137; all negative (the
 * maximum -0.5 at 3); two tied maxima (2 and 250); nearly uniform (the
 * maximum 40.01, at least 9e-3 above the rest, at 299). */
#define EDGE_V 300
static void edge_rows(float rows[4][EDGE_V]) {
  uint32_t x = 12345;
  for (size_t v = 0; v < EDGE_V; v++) {
    x = x * 1664525u + 1013904223u;
    const float u = (float)(x >> 8) / 16777216.0f; /* [0, 1) */
    rows[0][v] = 100.0f * u - 60.0f;                /* [-60, 40) */
    rows[1][v] = -1.0f - 60.0f * u;
    rows[2][v] = rows[0][v];
    rows[3][v] = 40.0f + 1e-3f * u;
  }
  rows[0][137] = 47.25f;
  rows[1][3] = -0.5f;
  rows[2][2] = rows[2][250] = 47.25f;
  rows[3][299] = 40.01f;
}

/* s after the warpers: the maxima (want[0..n-1]) finite, the rest -inf, no
 * NaN; draws of 64 seeds land on the maxima only (each of them, if two). */
static void check_limit(const float *s, const size_t *want, size_t n, const char *what) {
  for (size_t v = 0; v < EDGE_V; v++) {
    int kept = 0;
    for (size_t i = 0; i < n; i++) kept |= v == want[i];
    ck_assert_msg(kept ? isfinite(s[v]) : s[v] == -INFINITY, "%s: token %zu is %g", what, v, s[v]);
  }
  size_t hits[2] = {0};
  for (uint64_t seed = 1; seed <= 64; seed++) {
    clf__rng rng;
    clf__rng_seed(&rng, seed);
    const size_t t = clf__gen_draw(s, EDGE_V, &rng);
    ck_assert_msg(t == want[0] || (n > 1 && t == want[1]), "%s: seed %lu drew %zu", what, (unsigned long)seed, t);
    hits[t == want[0] ? 0 : 1]++;
  }
  if (n > 1) ck_assert_msg(hits[0] && hits[1], "%s: draws %zu and %zu", what, hits[0], hits[1]);
}

START_TEST(test_sampling_edge_limits) {
  static float rows[4][EDGE_V];
  edge_rows(rows);
  static const size_t want[4][2] = {{137}, {3}, {2, 250}, {299}}, n_want[4] = {1, 1, 2, 1};
  /* 0 as a float; its smallest denormal; a denormal; FLT_MIN / 2; a normal
   * float that still overflows 47.25 / t */
  const double temps[] = {1e-300, 1e-45, 1e-40, (double)FLT_MIN / 2, 1e-37};
  float s[EDGE_V];
  clf__scored tmp[EDGE_V];
  char what[128];
  for (size_t r = 0; r < 4; r++) {
    for (size_t i = 0; i < sizeof temps / sizeof *temps; i++) {
      const clf__gen_params p = {.do_sample = 1, .repetition_penalty = 1, .temperature = temps[i], .top_p = 1,
                                 .min_p = -1, .min_keep = 1};
      memcpy(s, rows[r], sizeof s);
      clf__gen_warp(&p, s, EDGE_V, tmp);
      snprintf(what, sizeof what, "row %zu temperature %g", r, temps[i]);
      check_limit(s, want[r], n_want[r], what);
      /* with top-k 50 and top-p 0.9 after it: the same */
      const clf__gen_params q = {.do_sample = 1, .repetition_penalty = 1, .temperature = temps[i], .top_k = 50,
                                 .top_p = 0.9, .min_p = -1, .min_keep = 1};
      memcpy(s, rows[r], sizeof s);
      clf__gen_warp(&q, s, EDGE_V, tmp);
      snprintf(what, sizeof what, "row %zu temperature %g, top_k 50, top_p 0.9", r, temps[i]);
      check_limit(s, want[r], n_want[r], what);
    }
    /* top_p 1e-300 (the cut 1 - top_p is 1 as a float): the nucleus of one,
     * its score unchanged; of tied maxima, the one sorted last stays */
    const clf__gen_params p = {.do_sample = 1, .repetition_penalty = 1, .temperature = 1, .top_p = 1e-300,
                               .min_p = -1, .min_keep = 1};
    memcpy(s, rows[r], sizeof s);
    clf__gen_warp(&p, s, EDGE_V, tmp);
    size_t kept = 0, at = 0;
    for (size_t v = 0; v < EDGE_V; v++)
      if (s[v] != -INFINITY) kept++, at = v;
    ck_assert_msg(kept == 1, "row %zu top_p 1e-300 kept %zu tokens", r, kept);
    ck_assert(at == want[r][0] || at == want[r][n_want[r] - 1]);
    ck_assert(s[at] == rows[r][at]);
    snprintf(what, sizeof what, "row %zu top_p 1e-300", r);
    const size_t one[1] = {at};
    check_limit(s, one, 1, what);
  }
  /* an ordinary temperature is still the plain float division */
  const clf__gen_params p = {.do_sample = 1, .repetition_penalty = 1, .temperature = 0.7, .top_p = 1, .min_p = -1,
                             .min_keep = 1};
  memcpy(s, rows[0], sizeof s);
  clf__gen_warp(&p, s, EDGE_V, tmp);
  for (size_t v = 0; v < EDGE_V; v++) ck_assert(s[v] == rows[0][v] / 0.7f);
  /* a temperature that is +inf as a float (1e300) is t -> inf: finite
   * scores 0, a banned -inf stays banned (torch's -inf / inf is NaN) */
  const clf__gen_params hot = {.do_sample = 1, .repetition_penalty = 1, .temperature = 1e300, .top_p = 1,
                               .min_p = -1, .min_keep = 1};
  memcpy(s, rows[0], sizeof s);
  s[5] = -INFINITY;
  clf__gen_warp(&hot, s, EDGE_V, tmp);
  for (size_t v = 0; v < EDGE_V; v++)
    ck_assert_msg(v == 5 ? s[v] == -INFINITY : s[v] == 0.0f, "token %zu: %g", v, s[v]);
  /* the draw never picks -inf or NaN while a finite score exists */
  const float mixed[6] = {NAN, -INFINITY, -3.0f, NAN, -INFINITY, -2.5f};
  for (uint64_t seed = 1; seed <= 200; seed++) {
    clf__rng rng;
    clf__rng_seed(&rng, seed);
    const size_t t = clf__gen_draw(mixed, 6, &rng);
    ck_assert_msg(t == 2 || t == 5, "seed %lu drew %zu", (unsigned long)seed, t);
  }
}
END_TEST

static clf_status gen_gpt2(const clf_generate_options *o, clf_array *seq) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/gpt2", fixtures());
  static int64_t ids[6] = {5, 17, 99, 40, 41, 42};
  clf_array in = {.name = "input_ids", .dtype = CLF_I64, .ndim = 2, .shape = {2, 3}, .data = ids};
  return clf_model_generate(get_model(dir), &in, NULL, o, seq);
}

/* End to end on the tiny GPT-2: a seed gives the same tokens twice, other
 * seeds give other tokens, top_k 1 is greedy, and the tokens stay in the
 * top_k allowed. */
START_TEST(test_sampling_end_to_end) {
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 12;
  clf_array greedy, a, b, c;
  TH_OK(gen_gpt2(&o, &greedy));
  o.do_sample = 1, o.seed = 1234;
  TH_OK(gen_gpt2(&o, &a));
  TH_OK(gen_gpt2(&o, &b));
  ck_assert_uint_eq(a.shape[1], b.shape[1]);
  ck_assert(memcmp(a.data, b.data, a.shape[0] * a.shape[1] * sizeof(int64_t)) == 0);
  /* of 5 other seeds, at least 4 differ from seed 1234 (random weights: the
   * distribution is broad, a repeat of 24 tokens is improbable) */
  int differ = 0;
  for (uint64_t seed = 1; seed <= 5; seed++) {
    o.seed = seed;
    TH_OK(gen_gpt2(&o, &c));
    differ += c.shape[1] != a.shape[1] || memcmp(c.data, a.data, a.shape[0] * a.shape[1] * sizeof(int64_t)) != 0;
    clf_array_free(&c);
  }
  ck_assert_int_ge(differ, 4);
  ck_assert(memcmp(a.data, (int64_t[]){5, 17, 99}, 3 * sizeof(int64_t)) == 0); /* the prompt */
  o.top_k = 1, o.seed = 99;
  TH_OK(gen_gpt2(&o, &c));
  ck_assert_uint_eq(c.shape[1], greedy.shape[1]);
  ck_assert(memcmp(c.data, greedy.data, c.shape[0] * c.shape[1] * sizeof(int64_t)) == 0);
  clf_array_free(&c);
  o.top_k = 0, o.temperature = 1e-4; /* near-greedy: temperature 1e-4 on logits of gaps >= 1e-2 */
  TH_OK(gen_gpt2(&o, &c));
  ck_assert_uint_ge(c.shape[1], 4);
  clf_array_free(&c), clf_array_free(&a), clf_array_free(&b), clf_array_free(&greedy);
}
END_TEST

/* End to end (issue 21's report): sampling on the GPT-2 fixture at
 * temperature 1e-300, seed 1, from the ids of "a+b" gives greedy's tokens
 * ([35, 37, 46, 46]); it gave [1, 0, 0, 0]. */
START_TEST(test_sampling_tiny_temperature_is_greedy) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/gpt2", fixtures());
  int64_t ids[3] = {65, 11, 66}; /* "a+b" in tests/fixtures/sampling/tokenizer */
  clf_array in = {.name = "input_ids", .dtype = CLF_I64, .ndim = 2, .shape = {1, 3}, .data = ids}, g, a;
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 4;
  TH_OK(clf_model_generate(get_model(dir), &in, NULL, &o, &g));
  ck_assert_uint_eq(g.shape[1], 7);
  ck_assert(memcmp((int64_t *)g.data + 3, (int64_t[]){35, 37, 46, 46}, 4 * sizeof(int64_t)) == 0);
  o.do_sample = 1, o.seed = 1, o.temperature = 1e-300;
  TH_OK(clf_model_generate(get_model(dir), &in, NULL, &o, &a));
  ck_assert_uint_eq(a.shape[1], g.shape[1]);
  for (size_t t = 0; t < 7; t++)
    ck_assert_msg(((int64_t *)a.data)[t] == ((int64_t *)g.data)[t], "position %zu: %ld, greedy %ld", t,
                  (long)((int64_t *)a.data)[t], (long)((int64_t *)g.data)[t]);
  clf_array_free(&a);
  o.temperature = 1, o.top_p = 1e-300; /* the nucleus of one */
  TH_OK(clf_model_generate(get_model(dir), &in, NULL, &o, &a));
  ck_assert_uint_eq(a.shape[1], g.shape[1]);
  ck_assert(memcmp(a.data, g.data, 7 * sizeof(int64_t)) == 0);
  clf_array_free(&a), clf_array_free(&g);
}
END_TEST

typedef struct heard {
  int64_t tok[2][64];
  size_t n[2], stop_after;
} heard;

static int on_token(void *user, size_t row, int64_t t) {
  heard *h = user;
  ck_assert_uint_lt(row, 2);
  h->tok[row][h->n[row]++] = t;
  return h->stop_after && h->n[0] + h->n[1] >= h->stop_after;
}

/* on_token hears each row's new tokens as they come, the same as the
 * sequences; a non-zero return stops after the step; beams refuse it. */
START_TEST(test_streaming_callback) {
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 10, o.do_sample = 1, o.seed = 7;
  heard h = {0};
  o.on_token = on_token, o.user = &h;
  clf_array seq;
  TH_OK(gen_gpt2(&o, &seq));
  const size_t T = seq.shape[1];
  const int64_t *s = seq.data;
  for (size_t r = 0; r < 2; r++) {
    ck_assert_uint_ge(h.n[r], 1);
    for (size_t i = 0; i < h.n[r]; i++) ck_assert_int_eq(h.tok[r][i], s[r * T + 3 + i]);
    /* after the last token heard: the row ended at EOS (33) or at the length */
    ck_assert(h.tok[r][h.n[r] - 1] == 33 || h.n[r] == T - 3);
  }
  clf_array_free(&seq);
  memset(&h, 0, sizeof h);
  h.stop_after = 4; /* two steps of two rows */
  o.do_sample = 0;
  TH_OK(gen_gpt2(&o, &seq));
  ck_assert_uint_eq(seq.shape[1], 3 + 2);
  ck_assert_uint_eq(h.n[0], 2);
  clf_array_free(&seq);
  o.num_beams = 2;
  TH_FAILS(gen_gpt2(&o, &seq), CLF_E_INVALID_ARG, "on_token");
}
END_TEST

/* Values out of range are CLF_E_INVALID_ARG naming the option; sampling
 * settings are not checked without do_sample (transformers ignores them). */
START_TEST(test_sampling_bad_options) {
  static const struct {
    int field;
    double v;
    const char *needle;
  } bad[] = {{0, -1.0, "temperature"}, {0, -0.5, "temperature"}, {1, -2, "top_k"},   {2, 1.5, "top_p"},
             {2, -0.1, "top_p"},        {3, 1.5, "min_p"},        {3, -0.5, "min_p"}, {4, -1.0, "repetition_penalty"},
             {5, -3, "no_repeat_ngram_size"}, {6, 2, "do_sample"}};
  clf_array seq;
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    clf_generate_options o;
    clf_generate_options_init(&o);
    o.do_sample = 1, o.max_new_tokens = 2;
    switch (bad[i].field) {
    case 0: o.temperature = bad[i].v; break;
    case 1: o.top_k = (long)bad[i].v; break;
    case 2: o.top_p = bad[i].v; break;
    case 3: o.min_p = bad[i].v; break;
    case 4: o.repetition_penalty = bad[i].v; break;
    case 5: o.no_repeat_ngram_size = (long)bad[i].v; break;
    default: o.do_sample = (int)bad[i].v; break;
    }
    TH_FAILS(gen_gpt2(&o, &seq), CLF_E_INVALID_ARG, bad[i].needle);
  }
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 2, o.temperature = -1, o.top_p = 7; /* ignored: no sampling */
  TH_OK(gen_gpt2(&o, &seq));
  clf_array_free(&seq);
  o.do_sample = 1, o.temperature = 0, o.top_p = 0, o.num_beams = 2;
  TH_FAILS(gen_gpt2(&o, &seq), CLF_E_UNSUPPORTED, "beam sampling");
}
END_TEST

/* Greedy and beam search with repetition_penalty / no_repeat_ngram_size on
 * the gpt2 and marian fixtures: the sequences transformers' generate() gave
 * (tests/fixtures/sampling/cases.json "generate"), token for token. */
START_TEST(test_penalties_in_greedy_and_beam) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/sampling", fixtures());
  cJSON *doc = load_cases(dir);
  const cJSON *c;
  int n = 0;
  cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(doc, "generate")) {
    char mdir[1024];
    snprintf(mdir, sizeof mdir, "%s/%s", fixtures(), cJSON_GetObjectItemCaseSensitive(c, "model")->valuestring);
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(c, "input_ids"), *want = cJSON_GetObjectItemCaseSensitive(c, "sequences");
    const cJSON *opt = cJSON_GetObjectItemCaseSensitive(c, "options");
    const size_t B = (size_t)cJSON_GetArraySize(ids), L = (size_t)cJSON_GetArraySize(ids->child);
    int64_t in[64];
    ck_assert_uint_le(B * L, 64);
    for (size_t b = 0; b < B; b++)
      for (size_t i = 0; i < L; i++)
        in[b * L + i] = (int64_t)cJSON_GetArrayItem(cJSON_GetArrayItem(ids, (int)b), (int)i)->valuedouble;
    clf_array a = {.name = "input_ids", .dtype = CLF_I64, .ndim = 2, .shape = {B, L}, .data = in}, seq;
    clf_generate_options o;
    clf_generate_options_init(&o);
    o.max_new_tokens = (size_t)num_or(opt, "max_new_tokens", 0);
    o.num_beams = (size_t)num_or(opt, "num_beams", 1);
    o.repetition_penalty = num_or(opt, "repetition_penalty", 0);
    o.no_repeat_ngram_size = (long)num_or(opt, "no_repeat_ngram_size", 0);
    TH_OK(clf_model_generate(get_model(mdir), &a, NULL, &o, &seq));
    const size_t T = (size_t)cJSON_GetArraySize(want->child);
    ck_assert_uint_eq(seq.shape[0], B);
    ck_assert_uint_eq(seq.shape[1], T);
    for (size_t b = 0; b < B; b++)
      for (size_t t = 0; t < T; t++)
        ck_assert_msg(((int64_t *)seq.data)[b * T + t] ==
                          (int64_t)cJSON_GetArrayItem(cJSON_GetArrayItem(want, (int)b), (int)t)->valuedouble,
                      "case %d row %zu position %zu", n, b, t);
    clf_array_free(&seq);
    n++;
  }
  ck_assert_int_eq(n, 6);
  cJSON_Delete(doc);
}
END_TEST

/* The checkpoint's generation_config.json sampling settings apply when the
 * options leave them unset: do_sample with top_k 1 is greedy; its
 * no_repeat_ngram_size gives the same as the option; an option overrides
 * it (CLF_GENERATE_OFF turns it off); a bad value there is named. */
START_TEST(test_checkpoint_sampling_settings) {
  int64_t ids[3] = {5, 17, 99};
  clf_array in = {.name = "input_ids", .dtype = CLF_I64, .ndim = 2, .shape = {1, 3}, .data = ids}, g, a, b;
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 10;
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/gpt2", fixtures());
  TH_OK(clf_model_generate(get_model(dir), &in, NULL, &o, &g));
  o.no_repeat_ngram_size = 1;
  TH_OK(clf_model_generate(get_model(dir), &in, NULL, &o, &b));
  char *tmp = copy_fixture("gpt2", NULL, NULL, 0, NULL);
  write_gen_config(tmp, "{\"do_sample\": true, \"top_k\": 1, \"no_repeat_ngram_size\": 1, \"eos_token_id\": 33}");
  clf_model *m;
  TH_OK(clf_model_load(th_ctx, tmp, &m));
  o.no_repeat_ngram_size = 0;
  TH_OK(clf_model_generate(m, &in, NULL, &o, &a)); /* sampled, top_k 1, no repeated token */
  ck_assert_uint_eq(a.shape[1], b.shape[1]);
  ck_assert(memcmp(a.data, b.data, a.shape[1] * sizeof(int64_t)) == 0);
  clf_array_free(&a);
  o.no_repeat_ngram_size = CLF_GENERATE_OFF, o.do_sample = CLF_GENERATE_OFF;
  TH_OK(clf_model_generate(m, &in, NULL, &o, &a)); /* greedy, n-grams allowed */
  ck_assert_uint_eq(a.shape[1], g.shape[1]);
  ck_assert(memcmp(a.data, g.data, a.shape[1] * sizeof(int64_t)) == 0);
  clf_array_free(&a);
  clf_model_destroy(m);
  write_gen_config(tmp, "{\"do_sample\": true, \"temperature\": 0.0}");
  TH_OK(clf_model_load(th_ctx, tmp, &m));
  clf_generate_options_init(&o);
  TH_FAILS(clf_model_generate(m, &in, NULL, &o, &a), CLF_E_INVALID_ARG, "temperature");
  o.temperature = 0.5; /* the option wins */
  TH_OK(clf_model_generate(m, &in, NULL, &o, &a));
  clf_array_free(&a);
  clf_model_destroy(m);
  remove_dir(tmp);
  clf_array_free(&g), clf_array_free(&b);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("generate");
  TCase *tc = tcase_create("generate");
  tcase_set_timeout(tc, 600);
  tcase_add_unchecked_fixture(tc, NULL, free_models);
  tcase_add_test(tc, test_gpt2_greedy);
  tcase_add_test(tc, test_gpt2_legacy_greedy);
  tcase_add_test(tc, test_marian_greedy_and_beam);
  if (!getenv("CLF_TEST_UNDER_OCLGRIND")) tcase_add_test(tc, test_marian_paper_greedy_and_beam);
  tcase_add_test(tc, test_repeat_and_interleave);
  tcase_add_test(tc, test_bad_arguments);
  tcase_add_test(tc, test_budgets);
  tcase_add_test(tc, test_processors_match_transformers);
  tcase_add_test(tc, test_sampler_frequencies);
  tcase_add_test(tc, test_sampling_end_to_end);
  tcase_add_test(tc, test_sampling_edge_limits);
  tcase_add_test(tc, test_sampling_tiny_temperature_is_greedy);
  tcase_add_test(tc, test_streaming_callback);
  tcase_add_test(tc, test_sampling_bad_options);
  tcase_add_test(tc, test_penalties_in_greedy_and_beam);
  tcase_add_test(tc, test_checkpoint_sampling_settings);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
