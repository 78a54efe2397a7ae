/* test_gguf_embed.c - an embedding GGUF (llama.cpp's "bert") against the
 * BertModel it was made from: tests/fixtures/gguf_models/bert_embed, which
 * tools/fixtures/make_gguf_bert_fixture.py wrote of tests/fixtures/bert and
 * the first 128 lines of tokenizers/bert/vocab.txt, gives the directory's
 * token ids and vectors (to 1e-5); the pooling the file states (mean, CLS,
 * last; none and rank refused by clf_model_embed), and what a broken file
 * is told.  (The directory's BERT is checked against transformers in
 * test_models.c.) */
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

/* A copy of the GGUF with `from` (bytes in the file) replaced by `to` of
 * the same length, the value after the key "bert.pooling_type" (type u32,
 * then the u32) set to pool unless pool < 0. */
static void patched(const char *path, const char *from, const char *to, long pool) {
  FILE *f = fopen(gguf, "rb");
  ck_assert_ptr_nonnull(f);
  static unsigned char buf[1 << 17];
  const size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  ck_assert(n > 0 && n < sizeof buf);
  static const char key[] = "bert.pooling_type";
  for (size_t i = 0; i + 64 < n; i++) {
    if (pool >= 0 && !memcmp(buf + i, key, sizeof key - 1)) {
      uint32_t v = (uint32_t)pool;
      memcpy(buf + i + sizeof key - 1 + 4, &v, 4);
    }
    if (from && !memcmp(buf + i, from, strlen(from))) memcpy(buf + i, to, strlen(to));
  }
  write_bytes(path, buf, n);
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

static Suite *suite(void) {
  Suite *s = suite_create("gguf_embed");
  TCase *tc = tcase_create("gguf_embed");
  tcase_add_unchecked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_same_as_directory);
  tcase_add_test(tc, test_cls_and_last);
  tcase_add_test(tc, test_refused_poolings);
  tcase_add_test(tc, test_broken_files);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
