/* test_gguf_embed.c - embedding GGUFs.  llama.cpp's "bert" against the
 * BertModel it was made from: tests/fixtures/gguf_models/bert_embed, which
 * tools/fixtures/make_gguf_bert_fixture.py wrote of tests/fixtures/bert and
 * the first 128 lines of tokenizers/bert/vocab.txt, gives the directory's
 * token ids and vectors (to 1e-5); the pooling the file states (mean, CLS,
 * last; none and rank refused by clf_model_embed), and what a broken file
 * is told.  (The directory's BERT is checked against transformers in
 * test_models.c.)  llama.cpp's "nomic-bert" against llama.cpp's own
 * outputs for a random file (below). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer.h"
#include "fixture_util.h"
#include "harness.h"

static char tmp[1024], hf_dir[1100];
static char gguf[1200];

/* Texts with words split into pieces, unknown ones, punctuation, accents,
 * upper case, padding (lengths differ). */
static const char *const texts[] = {"hello world!", "The quick brown fox, jumping.", "a", "Héllo, WORLD... 123",
                                    "zzzz qqq"};
#define N_TEXTS (sizeof texts / sizeof texts[0])

/* The Hugging Face directory test_cli.c's embed test builds, and the GGUF's path. */
static void setup(void) {
  th_tmpdir_create(tmp, sizeof tmp, "gguf-embed");
  snprintf(hf_dir, sizeof hf_dir, "%s/hf", tmp);
  char cmd[10000];
  const char *fx = fixtures();
  snprintf(cmd, sizeof cmd,
           "mkdir -p %s && cp %s/bert/config.json %s/bert/model.safetensors %s/ && head -n 128 "
           "%s/tokenizers/bert/vocab.txt > %s/vocab.txt && cp %s/tokenizers/bert/tokenizer_config.json %s/",
           hf_dir, fx, fx, hf_dir, fx, hf_dir, fx, hf_dir);
  ck_assert_int_eq(system(cmd), 0);
  snprintf(gguf, sizeof gguf, "%s/gguf_models/bert_embed/model.gguf", fx);
}

static void teardown(void) {
  free_models();
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
  ck_assert_int_eq(system(cmd), 0);
}

static clf_array embed(clf_model *m, clf_tokenizer *tok) {
  clf_array out;
  TH_OK(clf_model_embed(m, tok, texts, N_TEXTS, &out));
  return out;
}

/* The same ids of every text, and the same vectors to 1e-5. */
START_TEST(test_same_as_directory) {
  clf_tokenizer *th = NULL, *tg = NULL;
  TH_OK(clf_tokenizer_load(hf_dir, &th));
  TH_OK(clf_tokenizer_load(gguf, &tg));
  for (size_t i = 0; i < N_TEXTS; i++) {
    int64_t *a, *b;
    size_t na, nb;
    TH_OK(clf_tokenizer_encode(th, texts[i], 1, &a, &na));
    TH_OK(clf_tokenizer_encode(tg, texts[i], 1, &b, &nb));
    ck_assert_uint_eq(na, nb);
    ck_assert_msg(na >= 3 && !memcmp(a, b, na * sizeof *a), "ids of \"%s\" differ", texts[i]);
    char *back;
    TH_OK(clf_tokenizer_decode(tg, b, nb, 1, &back));
    ck_assert_ptr_nonnull(back);
    free(back);
    free(a), free(b);
  }
  clf_model *mh = get_model(hf_dir), *mg = get_model(gguf);
  ck_assert_str_eq(clf_model_type(mg), "bert");
  ck_assert_str_eq(clf_model_pooling(mg), "mean");
  ck_assert_str_eq(clf_model_pooling(mh), "mean");
  clf_array eh = embed(mh, th), eg = embed(mg, tg);
  ck_assert_uint_eq(eg.shape[0], N_TEXTS);
  ck_assert_uint_eq(eg.shape[1], 32);
  const size_t n = N_TEXTS * 32;
  double worst = 0, norm = 0;
  for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(((float *)eh.data)[i] - ((float *)eg.data)[i]));
  for (size_t d = 0; d < 32; d++) norm += (double)((float *)eg.data)[d] * ((float *)eg.data)[d];
  ck_assert_msg(worst <= 1e-5, "GGUF and safetensors vectors differ by %.3g", worst);
  ck_assert_msg(fabs(norm - 1) < 1e-5, "a vector's squared norm is %.8f", norm);
  clf_array_free(&eh), clf_array_free(&eg);
  clf_tokenizer_destroy(th), clf_tokenizer_destroy(tg);
}
END_TEST

/* A copy of GGUF file src with `from` (bytes in the file) replaced by `to`
 * of the same length, the value after the key `key` ("bert.pooling_type":
 * type u32, then the u32) set to pool unless pool < 0. */
static void patched_file(const char *src, const char *key, const char *path, const char *from, const char *to,
                         long pool) {
  FILE *f = fopen(src, "rb");
  ck_assert_ptr_nonnull(f);
  static unsigned char buf[1 << 20];
  const size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  ck_assert(n > 0 && n < sizeof buf);
  for (size_t i = 0; i + 64 < n; i++) {
    if (pool >= 0 && !memcmp(buf + i, key, strlen(key))) {
      uint32_t v = (uint32_t)pool;
      memcpy(buf + i + strlen(key) + 4, &v, 4);
    }
    if (from && !memcmp(buf + i, from, strlen(from))) memcpy(buf + i, to, strlen(to));
  }
  write_bytes(path, buf, n);
}

/* The bert fixture patched so. */
static void patched(const char *path, const char *from, const char *to, long pool) {
  patched_file(gguf, "bert.pooling_type", path, from, to, pool);
}

/* h[i, at(i)] of the directory's last_hidden_state over the texts, L2-normalised. */
static void pooled_rows(clf_model *m, clf_tokenizer *tok, int last, float *want) {
  for (size_t i = 0; i < N_TEXTS; i++) {
    clf_array in[3], h;
    size_t n_in;
    const char *outs[1] = {"last_hidden_state"};
    TH_OK(clf_model_encode_text(m, tok, texts[i], in, &n_in));
    TH_OK(clf_model_run(m, in, n_in, outs, 1, &h));
    const size_t L = h.shape[1], D = h.shape[2], at = last ? L - 1 : 0;
    double norm = 0;
    for (size_t d = 0; d < D; d++) norm += pow(((float *)h.data)[at * D + d], 2);
    for (size_t d = 0; d < D; d++) want[i * D + d] = (float)(((float *)h.data)[at * D + d] / (sqrt(norm) + 1e-12));
    for (int k = 0; k < 3; k++) clf_array_free(&in[k]);
    clf_array_free(&h);
  }
}

/* pooling_type 2 (CLS) and 3 (last) pool each text's first / last token of
 * the padded batch as the directory's model gives them one text at a time. */
START_TEST(test_cls_and_last) {
  clf_tokenizer *tok = NULL;
  TH_OK(clf_tokenizer_load(hf_dir, &tok));
  clf_model *mh = get_model(hf_dir);
  static const char *const names[2] = {"cls", "last"};
  for (int last = 0; last < 2; last++) {
    char path[1300];
    snprintf(path, sizeof path, "%s/%s.gguf", tmp, names[last]);
    patched(path, NULL, NULL, 2 + last);
    clf_model *m = NULL;
    TH_OK(clf_model_load(th_ctx, path, &m));
    ck_assert_str_eq(clf_model_pooling(m), names[last]);
    float want[N_TEXTS * 32];
    pooled_rows(mh, tok, last, want);
    clf_array got = embed(m, tok);
    TH_CLOSE((float *)got.data, want, N_TEXTS * 32, 1e-5);
    clf_array_free(&got);
    clf_model_destroy(m);
  }
  clf_tokenizer_destroy(tok);
}
END_TEST

/* none (0, or no key at all, as llama.cpp takes it) and rank (4) load but
 * are refused by clf_model_embed, naming the pooling; 5 is no pooling. */
START_TEST(test_refused_poolings) {
  clf_tokenizer *tok = NULL;
  TH_OK(clf_tokenizer_load(gguf, &tok));
  static const struct {
    const char *from, *to;
    long pool;
    const char *name, *words;
  } cases[] = {
      {NULL, NULL, 0, "none", "it gives a vector per token"},
      {"bert.pooling_type", "bert.pooling_typo", -1, "none", "or no pooling_type at all"},
      {NULL, NULL, 4, "rank", "a reranker scores pairs of texts"},
  };
  char path[1300];
  snprintf(path, sizeof path, "%s/refused.gguf", tmp);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    patched(path, cases[c].from, cases[c].to, cases[c].pool);
    clf_model *m = NULL;
    TH_OK(clf_model_load(th_ctx, path, &m));
    ck_assert_str_eq(clf_model_pooling(m), cases[c].name);
    clf_array out;
    TH_FAILS(clf_model_embed(m, tok, texts, 1, &out), CLF_E_UNSUPPORTED, cases[c].words);
    ck_assert_ptr_null(out.data);
    clf_model_destroy(m);
  }
  patched(path, NULL, NULL, 5);
  clf_model *m = NULL;
  TH_FAILS(clf_model_load(th_ctx, path, &m), CLF_E_FORMAT, "bert.pooling_type = 5 is too large (at most 4)");
  ck_assert_ptr_null(m);
  clf_tokenizer_destroy(tok);
}
END_TEST

/* A tensor under a name the architecture does not have, hence one missing;
 * a required key missing; a special token's id past the vocabulary. */
START_TEST(test_broken_files) {
  char path[1300];
  snprintf(path, sizeof path, "%s/broken.gguf", tmp);
  clf_model *m = NULL;
  patched(path, "token_types.weight", "token_typos.weight", -1);
  TH_FAILS(clf_model_load(th_ctx, path, &m), CLF_E_FORMAT, "token_typos.weight");
  patched(path, "bert.feed_forward_length", "bert.feed_forward_lengtx", -1);
  TH_FAILS(clf_model_load(th_ctx, path, &m), CLF_E_FORMAT, "bert.feed_forward_length is missing");
  ck_assert_ptr_null(m);
  /* the tokens list renamed: the tokenizer says what is missing */
  clf_tokenizer *tok = NULL;
  patched(path, "tokenizer.ggml.tokens", "tokenizer.ggml.tokenz", -1);
  ck_assert_int_eq(clf_tokenizer_load(path, &tok), CLF_E_FORMAT);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "tokenizer.ggml.tokens (a list of strings) is missing"));
  ck_assert_ptr_null(tok);
}
END_TEST

/* ---- nomic-bert: tests/fixtures/gguf_models/nomic_embed ----------------
 * A random nomic-bert file and llama.cpp's own outputs for it
 * (tools/fixtures/make_gguf_nomic_fixture.py: llama-server, f32 attention,
 * checked there against a numpy forward pass to 5.6e-7): every token's
 * hidden state of five id lists, the texts' ids, and their vectors under
 * mean, CLS and last pooling.  Tolerance: expected.json's, 1e-4 of each
 * output's largest magnitude (at least 1). */

static char nomic[1200];
static cJSON *nomic_exp;

static void nomic_load(void) {
  snprintf(nomic, sizeof nomic, "%s/gguf_models/nomic_embed/model.gguf", fixtures());
  char path[1300];
  snprintf(path, sizeof path, "%s/gguf_models/nomic_embed/expected.json", fixtures());
  char *text = read_text(path);
  ck_assert_ptr_nonnull(text);
  nomic_exp = cJSON_Parse(text);
  free(text);
  ck_assert_ptr_nonnull(nomic_exp);
}

static const cJSON *exp_item(const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(nomic_exp, key);
  ck_assert_msg(v != NULL, "expected.json has no %s", key);
  return v;
}

/* JSON list of numbers `a` into f (n of them exactly). */
static void floats(const cJSON *a, float *f, size_t n) {
  ck_assert_uint_eq((size_t)cJSON_GetArraySize(a), n);
  size_t i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, a) f[i++] = (float)e->valuedouble;
}

/* llama.cpp's vectors of the texts under pooling `how`, [n, 64]. */
static void nomic_pooled(const char *how, size_t n, float *want) {
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(exp_item("pooled"), how), *r;
  ck_assert_uint_eq((size_t)cJSON_GetArraySize(rows), n);
  size_t i = 0;
  cJSON_ArrayForEach(r, rows) floats(r, want + 64 * i++, 64);
}

/* The id lists in one batch, padded with [PAD] and masked: each row's
 * tokens give llama.cpp's hidden states (each list alone) to the
 * tolerance; the texts' ids are llama.cpp's. */
START_TEST(test_nomic_hidden) {
  nomic_load();
  const double tol = exp_item("tolerance")->valuedouble;
  ck_assert(tol > 0 && tol <= 1e-4);
  clf_model *m = get_model(nomic);
  ck_assert_str_eq(clf_model_type(m), "nomic-bert");
  ck_assert_str_eq(clf_model_pooling(m), "mean");
  const cJSON *lists = exp_item("ids"), *hidden = exp_item("hidden");
  const size_t B = (size_t)cJSON_GetArraySize(lists);
  size_t L = 0;
  for (size_t b = 0; b < B; b++) {
    const size_t n = (size_t)cJSON_GetArraySize(cJSON_GetArrayItem(lists, (int)b));
    L = n > L ? n : L;
  }
  int64_t *ids = calloc(B * L, sizeof *ids), *mask = calloc(B * L, sizeof *mask);
  for (size_t b = 0; b < B; b++)
    for (int j = 0; j < cJSON_GetArraySize(cJSON_GetArrayItem(lists, (int)b)); j++)
      ids[b * L + (size_t)j] = (int64_t)cJSON_GetArrayItem(cJSON_GetArrayItem(lists, (int)b), j)->valuedouble,
      mask[b * L + (size_t)j] = 1;
  clf_array in[2] = {{"input_ids", CLF_I64, 2, {B, L}, ids}, {"attention_mask", CLF_I64, 2, {B, L}, mask}}, h;
  const char *outs[1] = {"last_hidden_state"};
  TH_OK(clf_model_run(m, in, 2, outs, 1, &h));
  ck_assert_uint_eq(h.shape[2], 64);
  for (size_t b = 0; b < B; b++) {
    const cJSON *rows = cJSON_GetArrayItem(hidden, (int)b), *r;
    float want[64], *got;
    size_t j = 0;
    cJSON_ArrayForEach(r, rows) {
      floats(r, want, 64);
      got = (float *)h.data + (b * L + j++) * 64;
      TH_CLOSE(got, want, 64, tol);
    }
  }
  clf_array_free(&h);
  free(ids), free(mask);
  clf_tokenizer *tok = NULL;
  TH_OK(clf_tokenizer_load(nomic, &tok));
  const cJSON *text_ids = exp_item("text_ids");
  for (size_t i = 0; i < N_TEXTS; i++) {
    int64_t *a;
    size_t n;
    ck_assert_str_eq(cJSON_GetArrayItem(exp_item("texts"), (int)i)->valuestring, texts[i]);
    TH_OK(clf_tokenizer_encode(tok, texts[i], 1, &a, &n));
    const cJSON *want = cJSON_GetArrayItem(text_ids, (int)i);
    ck_assert_uint_eq(n, (size_t)cJSON_GetArraySize(want));
    for (size_t j = 0; j < n; j++) ck_assert_int_eq(a[j], (int64_t)cJSON_GetArrayItem(want, (int)j)->valuedouble);
    free(a);
  }
  clf_tokenizer_destroy(tok);
  cJSON_Delete(nomic_exp);
}
END_TEST

/* clf_model_embed of the texts as the file states (mean), and with
 * pooling_type patched to 2 (CLS) and 3 (last): llama.cpp's /v1/embeddings
 * under each (L2-normalised). */
START_TEST(test_nomic_pooled) {
  nomic_load();
  const double tol = exp_item("tolerance")->valuedouble;
  clf_tokenizer *tok = NULL;
  TH_OK(clf_tokenizer_load(nomic, &tok));
  static const char *const names[3] = {"mean", "cls", "last"};
  for (int p = 0; p < 3; p++) {
    char path[1300];
    snprintf(path, sizeof path, "%s/nomic-%s.gguf", tmp, names[p]);
    patched_file(nomic, "nomic-bert.pooling_type", path, NULL, NULL, 1 + p);
    clf_model *m = NULL;
    TH_OK(clf_model_load(th_ctx, path, &m));
    ck_assert_str_eq(clf_model_pooling(m), names[p]);
    float want[N_TEXTS * 64];
    nomic_pooled(names[p], N_TEXTS, want);
    clf_array got = embed(m, tok);
    ck_assert_uint_eq(got.shape[0], N_TEXTS);
    ck_assert_uint_eq(got.shape[1], 64);
    TH_CLOSE((float *)got.data, want, N_TEXTS * 64, tol);
    clf_array_free(&got);
    clf_model_destroy(m);
  }
  clf_tokenizer_destroy(tok);
  cJSON_Delete(nomic_exp);
}
END_TEST

/* The rotary base is read: with rope.freq_base renamed the file falls back
 * to llama.cpp's 10000, and the first list's hidden states move by more
 * than 1e-2 (its base is 1000). */
START_TEST(test_nomic_rope_base_read) {
  nomic_load();
  char path[1300];
  snprintf(path, sizeof path, "%s/nomic-base.gguf", tmp);
  patched_file(nomic, "nomic-bert.pooling_type", path, "nomic-bert.rope.freq_base", "nomic-bert.rope.freq_bass", -1);
  clf_model *m = NULL;
  TH_OK(clf_model_load(th_ctx, path, &m));
  const cJSON *first = cJSON_GetArrayItem(exp_item("ids"), 0);
  const size_t L = (size_t)cJSON_GetArraySize(first);
  int64_t ids[16];
  for (size_t j = 0; j < L; j++) ids[j] = (int64_t)cJSON_GetArrayItem(first, (int)j)->valuedouble;
  clf_array in[1] = {{"input_ids", CLF_I64, 2, {1, L}, ids}}, h;
  const char *outs[1] = {"last_hidden_state"};
  TH_OK(clf_model_run(m, in, 1, outs, 1, &h));
  float want[16 * 64];
  const cJSON *r;
  size_t j = 0;
  cJSON_ArrayForEach(r, cJSON_GetArrayItem(exp_item("hidden"), 0)) floats(r, want + 64 * j++, 64);
  const double diff = th_max_abs_diff((float *)h.data, want, L * 64);
  ck_assert_msg(diff > 1e-2, "with base 10000 instead of 1000 the states moved only %.3g", diff);
  clf_array_free(&h);
  clf_model_destroy(m);
  cJSON_Delete(nomic_exp);
}
END_TEST

/* position_ids given: rotary attention sees only position differences, so
 * the first list at positions 7..7+L-1 gives llama.cpp's states at 0..L-1
 * (to the tolerance), and positions reversed do not (by more than 1e-2). */
START_TEST(test_nomic_position_ids) {
  nomic_load();
  const double tol = exp_item("tolerance")->valuedouble;
  clf_model *m = get_model(nomic);
  const cJSON *first = cJSON_GetArrayItem(exp_item("ids"), 0), *r;
  const size_t L = (size_t)cJSON_GetArraySize(first);
  int64_t ids[16], pos[16];
  float want[16 * 64];
  size_t j = 0;
  for (j = 0; j < L; j++) ids[j] = (int64_t)cJSON_GetArrayItem(first, (int)j)->valuedouble;
  j = 0;
  cJSON_ArrayForEach(r, cJSON_GetArrayItem(exp_item("hidden"), 0)) floats(r, want + 64 * j++, 64);
  const char *outs[1] = {"last_hidden_state"};
  for (int reversed = 0; reversed < 2; reversed++) {
    for (j = 0; j < L; j++) pos[j] = reversed ? (int64_t)(L - 1 - j) : (int64_t)(7 + j);
    clf_array in[2] = {{"input_ids", CLF_I64, 2, {1, L}, ids}, {"position_ids", CLF_I64, 2, {1, L}, pos}}, h;
    TH_OK(clf_model_run(m, in, 2, outs, 1, &h));
    if (!reversed) {
      TH_CLOSE((float *)h.data, want, L * 64, tol);
    } else {
      const double diff = th_max_abs_diff((float *)h.data, want, L * 64);
      ck_assert_msg(diff > 1e-2, "positions reversed moved the states only %.3g", diff);
    }
    clf_array_free(&h);
  }
  cJSON_Delete(nomic_exp);
}
END_TEST

/* The GEMMs of a forward pass over 4 rows (for probe --tune), from the
 * same rows the loader reads: per layer the fused Wqkv and the fused gate |
 * up [192, 64] (two each), the output projection [64, 64] and ffn_down
 * [64, 96]; three layers (the fixture's sizes, make_gguf_nomic_fixture.py). */
START_TEST(test_nomic_gemm_shapes) {
  snprintf(nomic, sizeof nomic, "%s/gguf_models/nomic_embed/model.gguf", fixtures());
  clf_gemm_shape sh[16];
  size_t n = 0;
  TH_OK(clf_model_gemm_shapes(nomic, 4, sh, 16, &n));
  static const size_t want[3][3] = {{192, 64, 6}, {64, 64, 3}, {64, 96, 3}}; /* n, k, count */
  ck_assert_uint_eq(n, 3);
  for (size_t w = 0; w < 3; w++) {
    size_t found = 0;
    for (size_t i = 0; i < n; i++)
      if (sh[i].m == 4 && sh[i].n == want[w][0] && sh[i].k == want[w][1]) found += sh[i].count ? sh[i].count : 1;
    ck_assert_msg(found == want[w][2], "GEMM [4, %zu] x [%zu]: %zu, expected %zu", want[w][0], want[w][1], found,
                  want[w][2]);
  }
}
END_TEST

/* What a broken nomic-bert file is told, each naming the key or tensor. */
START_TEST(test_nomic_broken) {
  snprintf(nomic, sizeof nomic, "%s/gguf_models/nomic_embed/model.gguf", fixtures());
  char path[1300];
  snprintf(path, sizeof path, "%s/nomic-broken.gguf", tmp);
  static const struct {
    const char *from, *to;
    long pool;
    clf_status st;
    const char *words;
  } cases[] = {
      {"blk.1.ffn_gate.weight", "blk.1.ffn_gatx.weight", -1, CLF_E_FORMAT, "blk.1.ffn_gatx.weight"},
      {"blk.2.attn_qkv.weight", "blk.2.attn_qkx.weight", -1, CLF_E_FORMAT, "blk.2.attn_qkx.weight"},
      {"nomic-bert.attention.layer_norm_epsilon", "nomic-bert.attention.layer_norm_epsilox", -1, CLF_E_FORMAT,
       "nomic-bert.attention.layer_norm_epsilon is missing"},
      {"tokenizer.ggml.token_type_count", "tokenizer.ggml.token_type_counx", -1, CLF_E_FORMAT,
       "tokenizer.ggml.token_type_count is missing"},
      {"nomic-bert.feed_forward_length", "nomic-bert.feed_forward_lengtx", -1, CLF_E_FORMAT,
       "nomic-bert.feed_forward_length is missing"},
      {NULL, NULL, 5, CLF_E_FORMAT, "nomic-bert.pooling_type = 5 is too large (at most 4)"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    patched_file(nomic, "nomic-bert.pooling_type", path, cases[c].from, cases[c].to, cases[c].pool);
    clf_model *m = NULL;
    TH_FAILS(clf_model_load(th_ctx, path, &m), cases[c].st, cases[c].words);
    ck_assert_ptr_null(m);
  }
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("gguf_embed");
  TCase *tc = tcase_create("gguf_embed");
  tcase_add_unchecked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_same_as_directory);
  tcase_add_test(tc, test_cls_and_last);
  tcase_add_test(tc, test_refused_poolings);
  tcase_add_test(tc, test_broken_files);
  tcase_add_test(tc, test_nomic_hidden);
  tcase_add_test(tc, test_nomic_pooled);
  tcase_add_test(tc, test_nomic_rope_base_read);
  tcase_add_test(tc, test_nomic_broken);
  tcase_add_test(tc, test_nomic_gemm_shapes);
  tcase_add_test(tc, test_nomic_position_ids);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
