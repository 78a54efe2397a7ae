/* test_tokenizer.c - the BERT, GPT-2 and Marian tokenizers against the ids and
 * texts of transformers' slow tokenizers (tests/fixtures/tokenizers, made by
 * tools/fixtures/make_tokenizer_fixtures.py), tokenizer.json against the
 * `tokenizers` library, GGUF tokenizers against the same cases and llama.cpp
 * (tests/fixtures/gguf_tokenizers), round trips, and bad files. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* Tokenizers need no context: their errors are in clf_last_error(NULL). */
#define TOK_FAILS(expr, status, needle)                                                          \
  do {                                                                                           \
    clf_status tk_st_ = (expr);                                                                  \
    ck_assert_msg(tk_st_ == (status), "%s returned %s, expected %s (%s)", #expr,                 \
                  clf_status_name(tk_st_), clf_status_name(status), clf_last_error(NULL));       \
    ck_assert_msg(strstr(clf_last_error(NULL), (needle)) != NULL,                                \
                  "error of %s is \"%s\", expected it to mention \"%s\"", #expr,                 \
                  clf_last_error(NULL), (needle));                                               \
  } while (0)
#define TOK_OK(expr)                                                                             \
  do {                                                                                           \
    clf_status tk_st_ = (expr);                                                                  \
    ck_assert_msg(tk_st_ == CLF_OK, "%s returned %s: %s", #expr, clf_status_name(tk_st_),        \
                  clf_last_error(NULL));                                                         \
  } while (0)

static char *fixture_path(const char *rel) {
  const char *root = getenv("CLF_FIXTURES");
  ck_assert_msg(root != NULL, "CLF_FIXTURES is not set");
  char *p = malloc(strlen(root) + strlen(rel) + 2);
  sprintf(p, "%s/%s", root, rel);
  return p;
}

/* The fixture file `rel`, parsed. */
static cJSON *json_fixture(const char *rel) {
  char *path = fixture_path(rel);
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)n + 1);
  ck_assert(fread(text, 1, (size_t)n, f) == (size_t)n);
  text[n] = '\0';
  fclose(f);
  cJSON *root = cJSON_Parse(text);
  ck_assert_msg(root != NULL, "%s is not JSON", path);
  free(text);
  free(path);
  return root;
}

static cJSON *expected_in(const char *set) {
  char rel[64];
  snprintf(rel, sizeof(rel), "%s/expected.json", set);
  return json_fixture(rel);
}

static cJSON *expected(void) { return expected_in("tokenizers"); }

/* A tokenizer of the fixtures, or NULL when this build has no SentencePiece
 * (a C++14 build: the error must say so). */
static clf_tokenizer *load_fixture(const char *name) {
  char rel[64];
  snprintf(rel, sizeof(rel), "tokenizers/%s", name);
  char *dir = fixture_path(rel);
  clf_tokenizer *t = NULL;
  clf_status st = clf_tokenizer_load(dir, &t);
  free(dir);
  if (st == CLF_E_UNSUPPORTED && (!strcmp(name, "marian") || !strcmp(name, "xlmr"))) {
    ck_assert(strstr(clf_last_error(NULL), "C++17") != NULL);
    return NULL;
  }
  ck_assert_msg(st == CLF_OK, "loading %s: %s", name, clf_last_error(NULL));
  return t;
}

static void check_ids(const int64_t *got, size_t n, const cJSON *want, const char *what, const char *text) {
  size_t m = (size_t)cJSON_GetArraySize(want);
  ck_assert_msg(n == m, "%s of \"%s\": %zu ids, expected %zu", what, text, n, m);
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(got[i] == (int64_t)cJSON_GetArrayItem(want, (int)i)->valuedouble,
                  "%s of \"%s\": id %zu is %lld, expected %lld", what, text, i, (long long)got[i],
                  (long long)cJSON_GetArrayItem(want, (int)i)->valuedouble);
}

static int64_t *json_ids(const cJSON *a, size_t *n) {
  *n = (size_t)cJSON_GetArraySize(a);
  int64_t *v = malloc((*n ? *n : 1) * sizeof(int64_t));
  for (size_t i = 0; i < *n; i++) v[i] = (int64_t)cJSON_GetArrayItem(a, (int)i)->valuedouble;
  return v;
}

static void check_decode(clf_tokenizer *t, const cJSON *ids, int skip, const char *want, const char *what) {
  size_t n;
  int64_t *v = json_ids(ids, &n);
  char *text = NULL;
  TOK_OK(clf_tokenizer_decode(t, v, n, skip, &text));
  ck_assert_msg(!strcmp(text, want), "%s: decoded \"%s\", expected \"%s\"", what, text, want);
  free(text);
  free(v);
}

/* Every case of root[name]: ids with and without special tokens (exactly),
 * and the decoded texts with and without skip_special; then the id lists of
 * root[name_decode]. */
static void check_cases(clf_tokenizer *t, cJSON *root, const char *name) {
  cJSON *c, *cases = cJSON_GetObjectItem(root, name);
  ck_assert_msg(cJSON_GetArraySize(cases) >= 15, "%s: too few cases", name);
  cJSON_ArrayForEach(c, cases) {
    const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
    int64_t *ids = NULL;
    size_t n = 0;
    TOK_OK(clf_tokenizer_encode(t, text, 0, &ids, &n));
    ck_assert(ids != NULL);
    check_ids(ids, n, cJSON_GetObjectItem(c, "ids"), name, text);
    free(ids);
    TOK_OK(clf_tokenizer_encode(t, text, 1, &ids, &n));
    check_ids(ids, n, cJSON_GetObjectItem(c, "ids_special"), name, text);
    free(ids);
    check_decode(t, cJSON_GetObjectItem(c, "ids_special"), 0, cJSON_GetObjectItem(c, "decoded")->valuestring, text);
    check_decode(t, cJSON_GetObjectItem(c, "ids_special"), 1, cJSON_GetObjectItem(c, "decoded_skip")->valuestring,
                 text);
  }
  char key[64];
  snprintf(key, sizeof(key), "%s_decode", name); /* id lists that encode never gives */
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, key)) {
    check_decode(t, cJSON_GetObjectItem(c, "ids"), 0, cJSON_GetObjectItem(c, "decoded")->valuestring, key);
    check_decode(t, cJSON_GetObjectItem(c, "ids"), 1, cJSON_GetObjectItem(c, "decoded_skip")->valuestring, key);
  }
}

static void check_model(const char *name) {
  clf_tokenizer *t = load_fixture(name);
  if (!t) return;
  cJSON *root = expected();
  check_cases(t, root, name);
  cJSON_Delete(root);
  clf_tokenizer_destroy(t);
}

/* The tokenizer.json fixtures (make_tokenizer_json_fixtures.py) against
 * the `tokenizers` library's ids and transformers' fast decodes. */
static void check_json_model(const char *name) {
  char rel[64];
  snprintf(rel, sizeof(rel), "tokenizers_json/%s", name);
  char *dir = fixture_path(rel);
  clf_tokenizer *t = NULL;
  TOK_OK(clf_tokenizer_load(dir, &t));
  free(dir);
  cJSON *root = expected_in("tokenizers_json");
  check_cases(t, root, name);
  char key[64];
  snprintf(key, sizeof(key), "%s_random", name); /* random strings of tricky characters: ids */
  cJSON *c, *random = cJSON_GetObjectItem(root, key);
  ck_assert_msg(cJSON_GetArraySize(random) >= 50, "%s: too few random cases", key);
  cJSON_ArrayForEach(c, random) {
    const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
    int64_t *ids = NULL;
    size_t n = 0;
    TOK_OK(clf_tokenizer_encode(t, text, 0, &ids, &n));
    check_ids(ids, n, cJSON_GetObjectItem(c, "ids"), key, text);
    free(ids);
  }
  cJSON_Delete(root);
  clf_tokenizer_destroy(t);
}

START_TEST(llama3_matches_tokenizers) { check_json_model("llama3"); }
END_TEST
START_TEST(qwen2_matches_tokenizers) { check_json_model("qwen2"); }
END_TEST
START_TEST(smollm_matches_tokenizers) { check_json_model("smollm"); }
END_TEST
START_TEST(llama2_matches_tokenizers) { check_json_model("llama2"); }
END_TEST
START_TEST(llama2_metaspace_matches_tokenizers) { check_json_model("llama2_meta"); }
END_TEST
START_TEST(llama2_unk_matches_tokenizers) { check_json_model("llama2_unk"); }
END_TEST

START_TEST(bert_uncased_matches_transformers) { check_model("bert"); }
END_TEST
START_TEST(bert_cased_matches_transformers) { check_model("bert_cased"); }
END_TEST
START_TEST(gpt2_matches_transformers) { check_model("gpt2"); }
END_TEST
START_TEST(marian_matches_transformers) { check_model("marian"); }
END_TEST
START_TEST(roberta_matches_transformers) { check_model("roberta"); }
END_TEST
START_TEST(xlmr_matches_transformers) { check_model("xlmr"); }
END_TEST

/* Byte-level BPE is lossless: random UTF-8 (ASCII, Latin, Greek, CJK, Hangul,
 * emoji, controls, unusual spaces) decodes back to itself.  Punctuation is
 * left out so that clean_up_tokenization_spaces cannot change the text. */
START_TEST(gpt2_round_trip_random_text) {
  clf_tokenizer *t = load_fixture("gpt2");
  static const uint32_t pool[] = {'a', 'b', 'Z', '7', ' ', ' ', '\t', '\n', 0x7, 0xE9, 0x301, 0x3A3, 0x4E2D,
                                  0xAC00, 0x1F600, 0x1F3FD, 0x200B, 0x3000, 0xA0, '-', '#', '\'', 's', 0x663};
  uint32_t seed = 12345;
  for (int rep = 0; rep < 200; rep++) {
    char text[512];
    size_t len = 0;
    int count = (int)(seed % 60);
    for (int k = 0; k < count; k++) {
      seed = seed * 1664525u + 1013904223u;
      uint32_t cp = pool[(seed >> 8) % (sizeof(pool) / sizeof(pool[0]))];
      if (cp < 0x80) text[len++] = (char)cp;
      else if (cp < 0x800) { text[len++] = (char)(0xC0 | cp >> 6); text[len++] = (char)(0x80 | (cp & 63)); }
      else if (cp < 0x10000) {
        text[len++] = (char)(0xE0 | cp >> 12); text[len++] = (char)(0x80 | ((cp >> 6) & 63));
        text[len++] = (char)(0x80 | (cp & 63));
      } else {
        text[len++] = (char)(0xF0 | cp >> 18); text[len++] = (char)(0x80 | ((cp >> 12) & 63));
        text[len++] = (char)(0x80 | ((cp >> 6) & 63)); text[len++] = (char)(0x80 | (cp & 63));
      }
    }
    text[len] = '\0';
    seed = seed * 1664525u + 1013904223u;
    int64_t *ids;
    size_t n;
    char *back;
    TOK_OK(clf_tokenizer_encode(t, text, 1, &ids, &n));
    TOK_OK(clf_tokenizer_decode(t, ids, n, 0, &back));
    ck_assert_msg(!strcmp(back, text), "round trip of \"%s\" gave \"%s\"", text, back);
    free(back);
    free(ids);
  }
  clf_tokenizer_destroy(t);
}
END_TEST

/* A long word (quadratic in the reference too) and a long text finish. */
START_TEST(long_inputs) {
  const char *names[] = {"bert", "gpt2", "marian"};
  size_t len = 20000;
  char *text = malloc(len + 1);
  for (size_t i = 0; i < len; i++) text[i] = (i % 7 == 6 && i > 3000) ? ' ' : "abcdefgh"[i % 8];
  text[len] = '\0';
  for (int k = 0; k < 3; k++) {
    clf_tokenizer *t = load_fixture(names[k]);
    if (!t) continue;
    int64_t *ids;
    size_t n;
    char *back;
    TOK_OK(clf_tokenizer_encode(t, text, 1, &ids, &n));
    ck_assert(n > 2);
    TOK_OK(clf_tokenizer_decode(t, ids, n, 1, &back));
    if (k == 1) ck_assert(!strcmp(back, text));
    free(back);
    free(ids);
    clf_tokenizer_destroy(t);
  }
  /* tokenizer.json: Llama 2's pipeline has no pre-tokenizer, so the text is
   * one word for the merge queue; Llama 3 checks 256 added tokens at every
   * position.  Both are lossless here. */
  const char *json_names[] = {"tokenizers_json/llama2", "tokenizers_json/llama3"};
  for (int k = 0; k < 2; k++) {
    char *dir = fixture_path(json_names[k]);
    clf_tokenizer *t = NULL;
    TOK_OK(clf_tokenizer_load(dir, &t));
    free(dir);
    int64_t *ids;
    size_t n;
    char *back;
    TOK_OK(clf_tokenizer_encode(t, text, 0, &ids, &n));
    ck_assert(n > 2);
    TOK_OK(clf_tokenizer_decode(t, ids, n, 1, &back));
    ck_assert_msg(!strcmp(back, text), "%s: the long text does not come back", json_names[k]);
    free(back);
    free(ids);
    clf_tokenizer_destroy(t);
  }
  free(text);
}
END_TEST

/* ---- bad arguments and bad files ---- */

static char g_dir[64];

static void put_file(const char *name, const char *content, size_t n) {
  char p[256];
  snprintf(p, sizeof(p), "%s/%s", g_dir, name);
  FILE *f = fopen(p, "wb");
  ck_assert(f != NULL);
  ck_assert(fwrite(content, 1, n, f) == n);
  fclose(f);
}
#define PUT(name, s) put_file(name, s, strlen(s))

static void unlink_file(const char *name) {
  char p[256];
  snprintf(p, sizeof(p), "%s/%s", g_dir, name);
  unlink(p);
}

static void clear_dir(void) {
  static const char *files[] = {"vocab.txt", "vocab.json", "merges.txt", "source.spm", "target.spm",
                                "tokenizer_config.json", "tokenizer.json", "config.json",
                                "sentencepiece.bpe.model"};
  char p[256];
  for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
    snprintf(p, sizeof(p), "%s/%s", g_dir, files[i]);
    unlink(p);
  }
}

static void make_dir(void) {
  strcpy(g_dir, "/tmp/clf-tok-test-XXXXXX");
  ck_assert(mkdtemp(g_dir) != NULL);
}

static void copy_fixture(const char *model, const char *name) {
  char rel[128];
  if (strchr(model, '/')) snprintf(rel, sizeof(rel), "%s/%s", model, name); /* another fixture set */
  else snprintf(rel, sizeof(rel), "tokenizers/%s/%s", model, name);
  char *src = fixture_path(rel);
  FILE *f = fopen(src, "rb");
  ck_assert(f != NULL);
  char *buf = malloc(1 << 20);
  size_t n = fread(buf, 1, 1 << 20, f);
  fclose(f);
  put_file(name, buf, n);
  free(buf);
  free(src);
}

/* A tokenizer.json of a BPE over "a", "b", "ab" with the given model,
 * normalizer, pre_tokenizer and decoder JSON. */
static void put_hf_json(const char *model_extra, const char *norm, const char *pre, const char *dec) {
  char buf[2048];
  snprintf(buf, sizeof(buf),
           "{\"version\": \"1.0\", \"added_tokens\": [{\"id\": 3, \"content\": \"<s>\", \"special\": true}], "
           "\"normalizer\": %s, \"pre_tokenizer\": %s, \"post_processor\": null, \"decoder\": %s, "
           "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"<s>\": 3}, "
           "\"merges\": [\"a b\"]%s}}", norm, pre, dec, model_extra);
  PUT("tokenizer.json", buf);
}

/* tokenizer.json: what is not supported is named, malformed files are
 * CLF_E_FORMAT, and a minimal file works. */
START_TEST(tokenizer_json_errors) {
  clf_tokenizer *t = NULL;
  make_dir();
  PUT("tokenizer.json", "{\"model\": {\"type\": \"BPE\", ");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "tokenizer.json is not a JSON object");
  PUT("tokenizer.json", "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_UNSUPPORTED, "tokenizer.json: model type (only BPE is) \"WordPiece\"");
  PUT("tokenizer.json", "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", -1.0]]}}");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_UNSUPPORTED, "\"Unigram\"");
  put_hf_json("", "{\"type\": \"Lowercase\"}", "null", "null");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_UNSUPPORTED, "normalizer type \"Lowercase\"");
  put_hf_json("", "null", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Whitespace\"}]}", "null");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_UNSUPPORTED, "pre_tokenizer type \"Whitespace\"");
  put_hf_json("", "null", "null", "{\"type\": \"WordPiece\"}");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_UNSUPPORTED, "decoder type \"WordPiece\"");
  put_hf_json(", \"dropout\": 0.1", "null", "null", "null");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_UNSUPPORTED, "\"dropout\"");
  put_hf_json("", "null", "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(a\"}, \"behavior\": \"Isolated\"}",
              "null");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_UNSUPPORTED, "the pattern \"(a\" does not compile");
  put_hf_json("", "null", "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"}, \"behavior\": \"Sideways\"}",
              "null");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_UNSUPPORTED, "Split behavior \"Sideways\"");
  PUT("tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}}");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "merge 0 (\"a\" \"b\") has a token that is not in");
  PUT("tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b c\"]}}");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "merge 0 \"a b c\" is not two tokens");
  PUT("tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [], "
                        "\"unk_token\": \"<unk>\"}}");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "unk_token \"<unk>\" is not in the vocabulary");
  /* a pattern that backtracks past PCRE2's match limit fails the encode, naming it */
  put_hf_json("", "null", "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(a|aa)+(?=[^a])\"}, "
              "\"behavior\": \"Isolated\"}", "null");
  TOK_OK(clf_tokenizer_load(g_dir, &t));
  int64_t *ids;
  size_t n;
  TOK_FAILS(clf_tokenizer_encode(t, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0, &ids, &n), CLF_E_OUT_OF_MEMORY,
            "past PCRE2's match limits");
  ck_assert(ids == NULL && n == 0);
  TOK_OK(clf_tokenizer_encode(t, "aab", 0, &ids, &n)); /* a short one matches: "aa" | "b", 0 0 1 as tokenizers */
  ck_assert_msg(n == 3 && ids[0] == 0 && ids[1] == 0 && ids[2] == 1, "n = %zu", n);
  free(ids);
  clf_tokenizer_destroy(t);
  /* minimal: no normalizer, pre-tokenizer or decoder (tokens joined by spaces); merges as pairs */
  PUT("tokenizer.json", "{\"added_tokens\": [{\"id\": 3, \"content\": \"<s>\", \"special\": true}], "
                        "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"<s>\": 3}, "
                        "\"merges\": [[\"a\", \"b\"]]}}");
  TOK_OK(clf_tokenizer_load(g_dir, &t));
  char *text;
  TOK_OK(clf_tokenizer_encode(t, "aab<s>bxa", 1, &ids, &n)); /* x has no id and no unk: dropped */
  ck_assert_msg(n == 5 && ids[0] == 0 && ids[1] == 2 && ids[2] == 3 && ids[3] == 1 && ids[4] == 0, "n = %zu", n);
  TOK_OK(clf_tokenizer_decode(t, ids, n, 1, &text));
  ck_assert_msg(!strcmp(text, "a ab b a"), "decoded \"%s\"", text);
  free(text);
  free(ids);
  clf_tokenizer_destroy(t);
  clear_dir();
  rmdir(g_dir);
}
END_TEST

/* expected.json's variants: a fixture's tokenizer.json with top-level keys
 * replaced (other Split behaviours, prefix spaces, Metaspace options and
 * decoders, ...), against the ids and texts `tokenizers` gives for it. */
static void check_variant(const cJSON *v) {
  const char *name = cJSON_GetObjectItem(v, "name")->valuestring;
  char rel[96];
  snprintf(rel, sizeof(rel), "tokenizers_json/%s/tokenizer.json", cJSON_GetObjectItem(v, "base")->valuestring);
  char *path = fixture_path(rel), *text = malloc(1 << 20);
  FILE *f = fopen(path, "rb");
  ck_assert(f != NULL);
  text[fread(text, 1, (1 << 20) - 1, f)] = '\0';
  fclose(f);
  free(path);
  cJSON *root = cJSON_Parse(text), *e, *c;
  free(text);
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(v, "patch"))
    cJSON_ReplaceItemInObjectCaseSensitive(root, e->string, cJSON_Duplicate(e, 1));
  text = cJSON_PrintUnformatted(root);
  PUT("tokenizer.json", text);
  PUT("tokenizer_config.json", "{\"clean_up_tokenization_spaces\": false}"); /* `tokenizers`' own decode */
  free(text);
  cJSON_Delete(root);
  clf_tokenizer *t = NULL;
  TOK_OK(clf_tokenizer_load(g_dir, &t));
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(v, "cases")) {
    const char *s = cJSON_GetObjectItem(c, "text")->valuestring;
    const cJSON *skip = cJSON_GetObjectItem(c, "decoded_skip");
    int64_t *ids = NULL;
    size_t n = 0;
    TOK_OK(clf_tokenizer_encode(t, s, 1, &ids, &n));
    check_ids(ids, n, cJSON_GetObjectItem(c, "ids_special"), name, s);
    free(ids);
    check_decode(t, cJSON_GetObjectItem(c, "ids_special"), 0, cJSON_GetObjectItem(c, "decoded")->valuestring, name);
    check_decode(t, cJSON_GetObjectItem(c, "ids_special"), 1,
                 (skip ? skip : cJSON_GetObjectItem(c, "decoded"))->valuestring, name);
  }
  clf_tokenizer_destroy(t);
}

START_TEST(tokenizer_json_variants) {
  cJSON *root = expected_in("tokenizers_json"), *v;
  ck_assert(cJSON_GetArraySize(cJSON_GetObjectItem(root, "variants")) >= 15);
  make_dir();
  cJSON_ArrayForEach(v, cJSON_GetObjectItem(root, "variants")) check_variant(v);
  clear_dir();
  rmdir(g_dir);
  cJSON_Delete(root);
}
END_TEST

/* A tokenizer.json cut short anywhere is CLF_E_FORMAT; one with bytes
 * changed loads or fails with a status, and what loads encodes and decodes
 * (run under the sanitizers in CI). */
START_TEST(tokenizer_json_damaged) {
  char *src = fixture_path("tokenizers_json/llama2_meta/tokenizer.json");
  FILE *f = fopen(src, "rb");
  ck_assert(f != NULL);
  char *buf = malloc(1 << 20), *bad = malloc(1 << 20);
  size_t len = fread(buf, 1, 1 << 20, f);
  fclose(f);
  free(src);
  make_dir();
  clf_tokenizer *t = NULL;
  for (size_t cut = 1; cut < len - 2; cut += len / 97) {
    put_file("tokenizer.json", buf, cut);
    TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "tokenizer.json is not a JSON object");
  }
  uint32_t seed = 99;
  for (int rep = 0; rep < 150; rep++) {
    memcpy(bad, buf, len);
    for (int k = 0; k < 3; k++) {
      seed = seed * 1664525u + 1013904223u;
      bad[(seed >> 8) % len] = "\"{}[]:,0a9\\ -"[(seed >> 4) % 14];
    }
    put_file("tokenizer.json", bad, len);
    clf_status st = clf_tokenizer_load(g_dir, &t);
    if (st != CLF_OK) {
      ck_assert_msg(strlen(clf_last_error(NULL)) > 0, "status %s without a message", clf_status_name(st));
      continue;
    }
    int64_t *ids;
    size_t n;
    char *text;
    TOK_OK(clf_tokenizer_encode(t, "Hello <s> w\xc3\xb6rld \xf0\x9f\x98\x80 12", 1, &ids, &n));
    TOK_OK(clf_tokenizer_decode(t, ids, n, 0, &text));
    free(text);
    free(ids);
    clf_tokenizer_destroy(t);
  }
  free(buf);
  free(bad);
  clear_dir();
  rmdir(g_dir);
}
END_TEST

/* A tokenizer.json with a normalizer and no added tokens (the fuzzer's
 * find: qsort was handed the NULL list, undefined even for no elements)
 * loads and encodes plain text as the fixture with its added tokens does. */
START_TEST(tokenizer_json_no_added_tokens) {
  char *src = fixture_path("tokenizers_json/llama2/tokenizer.json"), *text = malloc(1 << 20);
  FILE *f = fopen(src, "rb");
  ck_assert(f != NULL);
  text[fread(text, 1, (1 << 20) - 1, f)] = '\0';
  fclose(f);
  free(src);
  cJSON *root = cJSON_Parse(text);
  free(text);
  ck_assert(root != NULL && cJSON_GetObjectItem(root, "normalizer") != NULL);
  const char *plain = "Hello w\xc3\xb6rld, 12 \xf0\x9f\x98\x80";
  int64_t *want = NULL, *got = NULL;
  size_t n_want = 0, n_got = 0;
  clf_tokenizer *t = NULL;
  make_dir();
  text = cJSON_PrintUnformatted(root);
  PUT("tokenizer.json", text);
  free(text);
  TOK_OK(clf_tokenizer_load(g_dir, &t));
  TOK_OK(clf_tokenizer_encode(t, plain, 0, &want, &n_want));
  clf_tokenizer_destroy(t);
  cJSON_DeleteItemFromObjectCaseSensitive(root, "added_tokens");
  text = cJSON_PrintUnformatted(root);
  PUT("tokenizer.json", text);
  free(text);
  TOK_OK(clf_tokenizer_load(g_dir, &t));
  TOK_OK(clf_tokenizer_encode(t, plain, 0, &got, &n_got));
  ck_assert_uint_gt(n_want, 3);
  ck_assert_uint_eq(n_got, n_want);
  ck_assert_mem_eq(got, want, n_want * sizeof(int64_t));
  clf_tokenizer_destroy(t);
  free(want);
  free(got);
  cJSON_Delete(root);
  clear_dir();
  rmdir(g_dir);
}
END_TEST

/* Which files win: tokenizer_config.json's tokenizer_class when it names a
 * slow tokenizer whose files are there, tokenizer.json for a class only it
 * serves, else the slow files, else tokenizer.json. */
START_TEST(tokenizer_json_precedence) {
  static const char *q = "tokenizers_json/qwen2";
  clf_tokenizer *t = NULL;
  int64_t *ids;
  size_t n;
  make_dir();
  copy_fixture(q, "vocab.json");
  copy_fixture(q, "merges.txt");
  copy_fixture(q, "tokenizer.json");
  /* Qwen2's NFC makes "Cafe\u0301" one id, 393 (Café, as in expected.json's NFC case); the GPT-2 slow
   * tokenizer gives 5 (golden from
   * GPT2Tokenizer on the same vocab.json + merges.txt: 34 316 68 136 223) */
  PUT("tokenizer_config.json", "{\"tokenizer_class\": \"Qwen2Tokenizer\"}");
  TOK_OK(clf_tokenizer_load(g_dir, &t));
  TOK_OK(clf_tokenizer_encode(t, "Cafe\xcc\x81", 0, &ids, &n));
  ck_assert(n == 1 && ids[0] == 393);
  free(ids);
  clf_tokenizer_destroy(t);
  PUT("tokenizer_config.json", "{\"tokenizer_class\": \"GPT2TokenizerFast\"}");
  TOK_OK(clf_tokenizer_load(g_dir, &t));
  TOK_OK(clf_tokenizer_encode(t, "Cafe\xcc\x81", 0, &ids, &n));
  ck_assert(n == 5 && ids[0] == 34 && ids[4] == 223);
  free(ids);
  clf_tokenizer_destroy(t);
  PUT("tokenizer_config.json", "{}"); /* no class: the slow files, as before tokenizer.json was read */
  TOK_OK(clf_tokenizer_load(g_dir, &t));
  TOK_OK(clf_tokenizer_encode(t, "Cafe\xcc\x81", 0, &ids, &n));
  ck_assert(n == 5 && ids[0] == 34 && ids[4] == 223);
  free(ids);
  clf_tokenizer_destroy(t);
  clear_dir();
  copy_fixture(q, "tokenizer.json"); /* tokenizer.json alone, no config */
  TOK_OK(clf_tokenizer_load(g_dir, &t));
  TOK_OK(clf_tokenizer_encode(t, "Cafe\xcc\x81", 0, &ids, &n));
  ck_assert(n == 1 && ids[0] == 393);
  free(ids);
  clf_tokenizer_destroy(t);
  PUT("tokenizer_config.json", "{\"tokenizer_class\": \"BertTokenizerFast\"}"); /* no vocab.txt */
  TOK_OK(clf_tokenizer_load(g_dir, &t));
  clf_tokenizer_destroy(t);
  clear_dir();
  /* a class named for neither (DistilBERT's) with a WordPiece tokenizer.json
   * and vocab.txt: tokenizer.json is not read, vocab.txt serves it */
  copy_fixture("bert", "vocab.txt");
  PUT("tokenizer.json", "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}");
  PUT("tokenizer_config.json", "{\"tokenizer_class\": \"DistilBertTokenizer\", \"do_lower_case\": true}");
  TOK_OK(clf_tokenizer_load(g_dir, &t));
  TOK_OK(clf_tokenizer_encode(t, "Hello", 1, &ids, &n));
  ck_assert(n == 3); /* [CLS] hello [SEP] */
  free(ids);
  clf_tokenizer_destroy(t);
  { /* the same with too many normalizers: also not read, and the error once vocab.txt is gone */
    PUT("tokenizer.json", "{\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}, "
                          "{\"type\": \"NFC\"}, {\"type\": \"NFC\"}, {\"type\": \"NFC\"}, {\"type\": \"NFC\"}, "
                          "{\"type\": \"NFC\"}, {\"type\": \"NFC\"}, {\"type\": \"NFC\"}, {\"type\": \"NFC\"}]}, "
                          "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}");
    TOK_OK(clf_tokenizer_load(g_dir, &t));
    clf_tokenizer_destroy(t);
    unlink_file("vocab.txt");
    TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_UNSUPPORTED, "more than 8 normalizers");
  }
  clear_dir();
  rmdir(g_dir);
}
END_TEST

/* Without tokenizer_config.json, config.json's model_type picks RoBERTa
 * (<s> X </s>) over GPT-2 on the same files, and XLM-R for
 * sentencepiece.bpe.model (which alone is not enough: CamemBERT's has other
 * ids). */
START_TEST(model_type_picks_roberta_and_xlmr) {
  clf_tokenizer *t = NULL;
  int64_t *ids;
  size_t n;
  make_dir();
  copy_fixture("roberta", "vocab.json");
  copy_fixture("roberta", "merges.txt");
  TOK_OK(clf_tokenizer_load(g_dir, &t)); /* GPT-2: nothing added */
  TOK_OK(clf_tokenizer_encode(t, "a", 1, &ids, &n));
  ck_assert(n == 1 && ids[0] != 0);
  free(ids);
  clf_tokenizer_destroy(t);
  PUT("config.json", "{\"model_type\": \"roberta\"}");
  TOK_OK(clf_tokenizer_load(g_dir, &t));
  TOK_OK(clf_tokenizer_encode(t, "a", 1, &ids, &n));
  ck_assert(n == 3 && ids[0] == 0 && ids[2] == 2); /* roberta-base's <s> and </s> ids */
  free(ids);
  clf_tokenizer_destroy(t);
  PUT("vocab.json", "{\"a\": 0, \"b\": 1, \"ab\": 2, \"</s>\": 3}");
  PUT("merges.txt", "a b\n");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "has no <s> token (RoBERTa)");
  clear_dir();
  copy_fixture("xlmr", "sentencepiece.bpe.model");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_NOT_FOUND, "looked for");
  PUT("config.json", "{\"model_type\": \"xlm-roberta\"}");
  clf_status st = clf_tokenizer_load(g_dir, &t);
  if (st != CLF_E_UNSUPPORTED) { /* a C++14 build has no SentencePiece */
    TOK_OK(st);
    TOK_OK(clf_tokenizer_encode(t, "a", 1, &ids, &n));
    ck_assert(n >= 3 && ids[0] == 0 && ids[n - 1] == 2);
    free(ids);
    char *text = NULL;
    int64_t past = 302; /* <mask> is 301: IdToPiece raises in transformers */
    TOK_FAILS(clf_tokenizer_decode(t, &past, 1, 0, &text), CLF_E_INVALID_ARG, "id 302 at position 0");
    clf_tokenizer_destroy(t);
    PUT("sentencepiece.bpe.model", "not a protobuf \x01\x02");
    TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "sentencepiece.bpe.model is not a SentencePiece model");
  }
  clear_dir();
  rmdir(g_dir);
}
END_TEST

START_TEST(missing_files) {
  clf_tokenizer *t = (clf_tokenizer *)1;
  make_dir();
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_NOT_FOUND, "looked for vocab.txt");
  ck_assert(t == NULL);
  TOK_FAILS(clf_tokenizer_load("/nonexistent/dir", &t), CLF_E_NOT_FOUND, "merges.txt");
  copy_fixture("gpt2", "vocab.json"); /* vocab.json alone: merges.txt is named */
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_NOT_FOUND, "merges.txt is missing");
  copy_fixture("marian", "source.spm"); /* Marian without target.spm */
  clf_status st = clf_tokenizer_load(g_dir, &t); /* CLF_E_UNSUPPORTED in a build without SentencePiece */
  if (st != CLF_E_UNSUPPORTED) TOK_FAILS(st, CLF_E_NOT_FOUND, "target.spm not found");
  clear_dir();
  copy_fixture("marian", "source.spm");
  copy_fixture("marian", "target.spm");
  st = clf_tokenizer_load(g_dir, &t);
  if (st != CLF_E_UNSUPPORTED) TOK_FAILS(st, CLF_E_NOT_FOUND, "vocab.json not found");
  clear_dir();
  rmdir(g_dir);
}
END_TEST

START_TEST(malformed_files) {
  clf_tokenizer *t = NULL;
  make_dir();
  PUT("vocab.json", "{\"a\": 0, \"b\": ");
  PUT("merges.txt", "#version: 0.2\na b\n");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "vocab.json is not a JSON object");
  PUT("vocab.json", "[1, 2]");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "vocab.json is not a JSON object");
  PUT("vocab.json", "{\"a\": 0, \"b\": \"one\"}");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "token \"b\" is not a non-negative integer");
  PUT("vocab.json", "{\"a\": 0, \"b\": -3}");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "non-negative integer");
  /* issue 11: one id of 2.5e8 made a 2 GB id table; 1e9 was accepted */
  PUT("vocab.json", "{\"a\": 0, \"b\": 250000000}");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "token \"b\" has id 250000000, past the limit of 16777215");
  PUT("vocab.json", "{\"a\": 0, \"b\": 1e9}");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "past the limit");
  PUT("vocab.json", "{\"a\": 0, \"b\": 16000000}");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "ids run up to 16000000 for 2 tokens");
  PUT("vocab.json", "{\"a\": 0, \"b\": 1.5}");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "non-negative integer");
  PUT("vocab.json", "{\"a\": 0, \"b\": 1, \"ab\": 2, \"<|endoftext|>\": 3}");
  PUT("merges.txt", "#version: 0.2\na b\nab\n");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "merges.txt line 3: expected two symbols");
  PUT("merges.txt", "a b\nab  b\n");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "merges.txt line 2");
  PUT("merges.txt", "#version: 0.2\r\na b\r\n\r\n");
  TOK_OK(clf_tokenizer_load(g_dir, &t)); /* CRLF and blank lines are fine */
  int64_t *ids;
  size_t n;
  TOK_OK(clf_tokenizer_encode(t, "abab", 0, &ids, &n));
  ck_assert(n == 2 && ids[0] == 2 && ids[1] == 2);
  free(ids);
  clf_tokenizer_destroy(t);
  PUT("tokenizer_config.json", "{\"tokenizer_class\": ");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "tokenizer_config.json is not a JSON object");
  clear_dir();
  PUT("vocab.txt", "[PAD]\n[CLS]\n[SEP]\nhello\n");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "has no [UNK] token");
  PUT("vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nab\xff\n");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "line 5 is not valid UTF-8");
  PUT("vocab.txt", "");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "is empty");
  clear_dir();
  copy_fixture("marian", "vocab.json");
  copy_fixture("marian", "target.spm");
  PUT("source.spm", "this is not a protobuf \x01\x02\x03");
  clf_status st = clf_tokenizer_load(g_dir, &t);
  if (st != CLF_E_UNSUPPORTED) TOK_FAILS(st, CLF_E_FORMAT, "source.spm is not a SentencePiece model");
  ck_assert(t == NULL);
  /* issue 11: special files are refused at once, not waited on or read
   * without end: a FIFO as source.spm (SentencePiece's own Load blocked),
   * /dev/zero as vocab.json, a link loop as vocab.txt */
  char p[256];
  snprintf(p, sizeof(p), "%s/source.spm", g_dir);
  unlink(p);
  ck_assert_int_eq(mkfifo(p, 0600), 0);
  st = clf_tokenizer_load(g_dir, &t);
  if (st != CLF_E_UNSUPPORTED) TOK_FAILS(st, CLF_E_IO, "source.spm is not a regular file");
  clear_dir();
  snprintf(p, sizeof(p), "%s/vocab.json", g_dir);
  ck_assert_int_eq(symlink("/dev/zero", p), 0);
  PUT("merges.txt", "a b\n");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_IO, "vocab.json is not a regular file");
  clear_dir();
  snprintf(p, sizeof(p), "%s/vocab.txt", g_dir);
  ck_assert_int_eq(symlink(p, p), 0);
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_IO, "Too many levels of symbolic links");
  clear_dir();
  rmdir(g_dir);
}
END_TEST

static double seconds_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* buf (of n + 1 bytes at least): a token of n bytes of `c`. */
static const char *long_token(char *buf, char c, size_t n) {
  memset(buf, c, n);
  buf[n] = '\0';
  return buf;
}

/* Every vocabulary reader refuses a token past 1,024 bytes (host/base/
 * limits.h's CLF_LIMIT_TOKEN_BYTES) with CLF_E_FORMAT naming the file, the
 * token's place and its length, as tokenizer.ggml.tokens does
 * (gguf_long_token_refused); one of 1,024 bytes loads. */
START_TEST(long_tokens_refused) {
  clf_tokenizer *t = NULL;
  char buf[8192], tok[2001], tok2[2001];
  make_dir();
  /* vocab.txt (WordPiece): the line */
  snprintf(buf, sizeof(buf), "[PAD]\n[UNK]\n%s\n[CLS]\n[SEP]\n", long_token(tok, 'q', 1025));
  PUT("vocab.txt", buf);
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT,
            "vocab.txt line 3 is 1025 bytes long, past the limit of 1024 bytes for one token");
  snprintf(buf, sizeof(buf), "[PAD]\n[UNK]\n%s\n[CLS]\n[SEP]\n", long_token(tok, 'q', 1024));
  PUT("vocab.txt", buf);
  TOK_OK(clf_tokenizer_load(g_dir, &t));
  clf_tokenizer_destroy(t);
  clear_dir();
  /* vocab.json (GPT-2 BPE): the token's id */
  snprintf(buf, sizeof(buf), "{\"a\": 0, \"b\": 1, \"ab\": 2, \"<|endoftext|>\": 3, \"%s\": 4}",
           long_token(tok, 'q', 2000));
  PUT("vocab.json", buf);
  PUT("merges.txt", "a b\n");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT,
            "vocab.json: the token of id 4 is 2000 bytes long, past the limit of 1024 bytes");
  clear_dir();
  /* tokenizer.json: its vocab, its added tokens */
  snprintf(buf, sizeof(buf),
           "{\"added_tokens\": [], \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"%s\": 1}, \"merges\": []}}",
           long_token(tok, 'q', 1025));
  PUT("tokenizer.json", buf);
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT,
            "tokenizer.json: the token of id 1 is 1025 bytes long, past the limit of 1024 bytes");
  snprintf(buf, sizeof(buf),
           "{\"added_tokens\": [{\"id\": 1, \"content\": \"<s>\"}, {\"id\": 2, \"content\": \"%s\"}], "
           "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}", long_token(tok, 'q', 1025));
  PUT("tokenizer.json", buf);
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT,
            "tokenizer.json: added token 1 is 1025 bytes long, past the limit of 1024 bytes");
  snprintf(buf, sizeof(buf),
           "{\"added_tokens\": [{\"id\": 1, \"content\": \"%s\"}], "
           "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"%s\": 2}, \"merges\": []}}",
           long_token(tok, 'q', 1024), long_token(tok2, 'r', 1024));
  PUT("tokenizer.json", buf);
  TOK_OK(clf_tokenizer_load(g_dir, &t));
  clf_tokenizer_destroy(t);
  clear_dir();
  /* a SentencePiece model (XLM-R): the piece, here one more piece message
   * (ModelProto field 1: piece, score) appended to the fixture's */
  char *src = fixture_path("tokenizers/xlmr/sentencepiece.bpe.model");
  FILE *f = fopen(src, "rb");
  ck_assert(f != NULL);
  char *model = malloc(1 << 20);
  size_t n = fread(model, 1, (1 << 20) - 2048, f);
  fclose(f);
  free(src);
  const unsigned char piece_head[] = {0x0a, 0x89, 0x08, /* a message of 1033 bytes: */ 0x0a, 0x81, 0x08};
  memcpy(model + n, piece_head, sizeof(piece_head)); /* piece, 1025 bytes */
  memcpy(model + n + sizeof(piece_head), long_token(tok, 'q', 1025), 1025);
  memcpy(model + n + sizeof(piece_head) + 1025, "\x15\x00\x00\x80\xbf", 5); /* score -1.0 */
  put_file("sentencepiece.bpe.model", model, n + sizeof(piece_head) + 1030);
  free(model);
  PUT("config.json", "{\"model_type\": \"xlm-roberta\"}");
  clf_status st = clf_tokenizer_load(g_dir, &t);
  if (st != CLF_E_UNSUPPORTED) /* a C++14 build has no SentencePiece */
    TOK_FAILS(st, CLF_E_FORMAT, "sentencepiece.bpe.model: piece 300 is 1025 bytes long, past the limit of 1024 "
              "bytes");
  clear_dir();
  rmdir(g_dir);
}
END_TEST

/* A vocab.txt of 60,000 tokens of 8 letters chosen so that the unkeyed
 * FNV-1a the token map used put them all in slots 0-511 of its final
 * 131,072 (and so in one run at every size before): 17 s to load, each
 * insert probing the run so far.  Keyed per process, it loads in well under
 * the 2 s asserted (0.11 s for `clformer tokenize`, as a random vocabulary
 * of the same size). */
START_TEST(vocabulary_chosen_to_collide_loads_in_time) {
  clf_tokenizer *t = NULL;
  enum { N = 60000 };
  char *text = malloc(32 + (size_t)N * 9), *p = text, first[9] = "";
  p += sprintf(p, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n");
  for (uint64_t c = 0, found = 0; found < N; c++) {
    uint64_t h = 1469598103934665603ull, v = c;
    for (int i = 0; i < 8; i++, v /= 26) {
      p[i] = (char)('a' + v % 26);
      h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    }
    if ((h & ((1u << 17) - 1)) < 512) {
      if (!found) memcpy(first, p, 8);
      p[8] = '\n';
      p += 9;
      found++;
    }
  }
  make_dir();
  put_file("vocab.txt", text, (size_t)(p - text));
  free(text);
  double t0 = seconds_now();
  TOK_OK(clf_tokenizer_load(g_dir, &t));
  double took = seconds_now() - t0;
  ck_assert_msg(took < 2.0, "loading took %.2f s, expected under 2 s", took);
  int64_t *ids;
  size_t n;
  TOK_OK(clf_tokenizer_encode(t, first, 0, &ids, &n));
  ck_assert_msg(n == 1 && ids[0] == 4, "\"%s\": %zu ids, the first %lld, expected its id 4", first, n,
                (long long)ids[0]);
  free(ids);
  clf_tokenizer_destroy(t);
  clear_dir();
  rmdir(g_dir);
}
END_TEST

/* Whether tokenizers t (on text a) and u (on text b) give the same ids. */
static int same_ids(clf_tokenizer *t, const char *a, clf_tokenizer *u, const char *b) {
  int64_t *x, *y;
  size_t nx, ny;
  TOK_OK(clf_tokenizer_encode(t, a, 1, &x, &nx));
  TOK_OK(clf_tokenizer_encode(u, b, 1, &y, &ny));
  int same = nx == ny && !memcmp(x, y, nx * sizeof(int64_t));
  free(x);
  free(y);
  return same;
}

/* tokenizer_config.json: tokenizer_class picks among several tokenizers,
 * do_lower_case, add_prefix_space, clean_up_tokenization_spaces,
 * separate_vocabs (unsupported). */
START_TEST(config_options) {
  clf_tokenizer *t = NULL, *g = load_fixture("gpt2"), *b = load_fixture("bert");
  int64_t *ids;
  size_t n;
  char *text;
  make_dir();
  copy_fixture("bert", "vocab.txt");
  copy_fixture("gpt2", "vocab.json");
  copy_fixture("gpt2", "merges.txt");
  TOK_OK(clf_tokenizer_load(g_dir, &t)); /* no config: vocab.txt wins, BERT's defaults (lower case) */
  ck_assert(same_ids(t, "Hello World!", b, "Hello World!"));
  clf_tokenizer_destroy(t);
  PUT("tokenizer_config.json", "{\"do_lower_case\": false}");
  TOK_OK(clf_tokenizer_load(g_dir, &t));
  ck_assert(same_ids(t, "Hello World!", b, "hello world!") == 0);
  ck_assert(same_ids(t, "hello world!", b, "Hello World!"));
  clf_tokenizer_destroy(t);
  PUT("tokenizer_config.json", "{\"tokenizer_class\": \"GPT2Tokenizer\", \"add_prefix_space\": true, "
      "\"clean_up_tokenization_spaces\": false}");
  TOK_OK(clf_tokenizer_load(g_dir, &t));
  ck_assert(same_ids(t, "Hello , world", g, " Hello , world"));
  ck_assert(same_ids(t, "Hello , world", g, "Hello , world") == 0);
  TOK_OK(clf_tokenizer_encode(t, "Hello , world", 0, &ids, &n));
  TOK_OK(clf_tokenizer_decode(t, ids, n, 0, &text));
  ck_assert_str_eq(text, " Hello , world"); /* no clean-up */
  free(text);
  TOK_OK(clf_tokenizer_decode(g, ids, n, 0, &text));
  ck_assert_str_eq(text, " Hello, world"); /* the fixture cleans up, transformers' default */
  free(text);
  free(ids);
  clf_tokenizer_destroy(t);
  clear_dir();
  copy_fixture("marian", "vocab.json");
  copy_fixture("marian", "source.spm");
  copy_fixture("marian", "target.spm");
  PUT("tokenizer_config.json", "{\"separate_vocabs\": true}");
  clf_status st = clf_tokenizer_load(g_dir, &t);
  if (st != CLF_E_UNSUPPORTED || !strstr(clf_last_error(NULL), "C++17"))
    TOK_FAILS(st, CLF_E_UNSUPPORTED, "separate_vocabs");
  clear_dir();
  rmdir(g_dir);
  clf_tokenizer_destroy(g);
  clf_tokenizer_destroy(b);
}
END_TEST

/* Found by CI's fuzzing of tokenizer.json: a normalizer that leaves bytes
 * starting no UTF-8 sequence made BPE's symbol split stand still (an endless
 * loop).  Such a byte is a unit of its own now; the text encodes. */
START_TEST(normalized_invalid_utf8_ends) {
  char *dir = fixture_path("tokenizers_json/fuzz_invalid_utf8");
  clf_tokenizer *t = NULL;
  TOK_OK(clf_tokenizer_load(dir, &t));
  const char *text = "Hello, world! [CLS] a [SEP] <|endoftext|> </s> <unk> na\xc3\xafve caf\xc3\xa9 don't .";
  for (int special = 0; special < 2; special++) {
    int64_t *ids = NULL;
    size_t n = 0;
    TOK_OK(clf_tokenizer_encode(t, text, special, &ids, &n));
    ck_assert_uint_gt(n, 0);
    free(ids);
  }
  clf_tokenizer_destroy(t);
  free(dir);
}
END_TEST

START_TEST(bad_arguments) {
  clf_tokenizer *t = load_fixture("gpt2"), *b = load_fixture("bert");
  int64_t *ids;
  size_t n;
  char *text;
  clf_tokenizer *u = (clf_tokenizer *)1;
  TOK_FAILS(clf_tokenizer_load(NULL, &u), CLF_E_INVALID_ARG, "model_dir is NULL");
  ck_assert(u == NULL);
  TOK_FAILS(clf_tokenizer_load("x", NULL), CLF_E_INVALID_ARG, "out is NULL");
  TOK_FAILS(clf_tokenizer_encode(NULL, "a", 0, &ids, &n), CLF_E_INVALID_ARG, "tokenizer is NULL");
  TOK_FAILS(clf_tokenizer_encode(t, NULL, 0, &ids, &n), CLF_E_INVALID_ARG, "text is NULL");
  TOK_FAILS(clf_tokenizer_encode(t, "a", 0, NULL, &n), CLF_E_INVALID_ARG, "ids or n is NULL");
  TOK_FAILS(clf_tokenizer_encode(t, "ok \xc3\x28", 0, &ids, &n), CLF_E_INVALID_ARG, "not valid UTF-8 (byte 3)");
  TOK_FAILS(clf_tokenizer_encode(b, "\xed\xa0\x80", 0, &ids, &n), CLF_E_INVALID_ARG, "not valid UTF-8");
  int64_t good[] = {40, 331}, bad[] = {40, 99999}, neg[] = {-1};
  TOK_FAILS(clf_tokenizer_decode(NULL, good, 2, 0, &text), CLF_E_INVALID_ARG, "tokenizer is NULL");
  TOK_FAILS(clf_tokenizer_decode(t, NULL, 2, 0, &text), CLF_E_INVALID_ARG, "ids is NULL");
  TOK_FAILS(clf_tokenizer_decode(t, good, 2, 0, NULL), CLF_E_INVALID_ARG, "text is NULL");
  TOK_FAILS(clf_tokenizer_decode(t, bad, 2, 0, &text), CLF_E_INVALID_ARG, "id 99999 at position 1");
  TOK_FAILS(clf_tokenizer_decode(t, neg, 1, 1, &text), CLF_E_INVALID_ARG, "id -1 at position 0");
  TOK_OK(clf_tokenizer_decode(b, neg, 1, 0, &text)); /* BERT: unknown ids are [UNK], as in transformers */
  ck_assert_str_eq(text, "[UNK]");
  free(text);
  TOK_OK(clf_tokenizer_decode(t, NULL, 0, 0, &text)); /* nothing to decode */
  ck_assert_str_eq(text, "");
  free(text);
  clf_tokenizer_destroy(NULL);
  clf_tokenizer_destroy(t);
  clf_tokenizer_destroy(b);
}
END_TEST

/* ---- GGUF files (tokenizer.ggml.*) ---- */

/* differences.json's entry for `text` in list `diffs` (NULL when the GGUF
 * tokenizer gives what the tokenizer.json does); counts the entries used. */
static const cJSON *gguf_difference(const cJSON *diffs, const char *text, int *used) {
  const cJSON *d;
  cJSON_ArrayForEach(d, diffs) {
    if (strcmp(cJSON_GetObjectItem(d, "text")->valuestring, text)) continue;
    (*used)++;
    return d;
  }
  return NULL;
}

/* The value of `key` for this case: differences.json's (which must differ
 * from expected.json's, and say why) or expected.json's. */
static const cJSON *gguf_want(const cJSON *c, const cJSON *d, const cJSON *why, const char *key, const char *name) {
  const cJSON *hf = cJSON_GetObjectItem(c, key), *v = d ? cJSON_GetObjectItem(d, key) : NULL;
  if (!v) return hf;
  char *a = cJSON_PrintUnformatted(hf), *b = cJSON_PrintUnformatted(v);
  ck_assert_msg(strcmp(a, b), "%s: differences.json repeats expected.json's %s of \"%s\"", name, key,
                cJSON_GetObjectItem(c, "text")->valuestring);
  free(a);
  free(b);
  const cJSON *w = cJSON_GetObjectItem(d, "why");
  ck_assert_msg(cJSON_IsString(w) && cJSON_GetObjectItem(why, w->valuestring), "%s: a difference without a known "
                "cause for \"%s\"", name, cJSON_GetObjectItem(c, "text")->valuestring);
  return v;
}

/* One case of expected.json: ids (and, where the case has them, ids with
 * special tokens and both decodes) as the GGUF tokenizer must give them. */
static void check_gguf_case(clf_tokenizer *t, const cJSON *c, const cJSON *d, const cJSON *why, const char *name) {
  const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
  int64_t *ids = NULL;
  size_t n = 0;
  TOK_OK(clf_tokenizer_encode(t, text, 0, &ids, &n));
  check_ids(ids, n, gguf_want(c, d, why, "ids", name), name, text);
  free(ids);
  if (!cJSON_GetObjectItem(c, "ids_special")) return; /* the random texts have ids only */
  const cJSON *sp = gguf_want(c, d, why, "ids_special", name);
  TOK_OK(clf_tokenizer_encode(t, text, 1, &ids, &n));
  check_ids(ids, n, sp, name, text);
  free(ids);
  check_decode(t, sp, 0, gguf_want(c, d, why, "decoded", name)->valuestring, text);
  check_decode(t, sp, 1, gguf_want(c, d, why, "decoded_skip", name)->valuestring, text);
}

/* tests/fixtures/gguf_tokenizers/NAME.gguf (the tokenizer.json fixture
 * NAME as convert_hf_to_gguf.py writes it) against the same cases as the
 * tokenizer.json: expected.json, but for the differences.json entries
 * (llama.cpp's ids where its tokenizer differs, each with its cause), all
 * of which must be used. */
static void check_gguf_model(const char *name) {
  char rel[96], key[64];
  snprintf(rel, sizeof(rel), "gguf_tokenizers/%s.gguf", name);
  char *path = fixture_path(rel);
  clf_tokenizer *t = NULL;
  TOK_OK(clf_tokenizer_load(path, &t));
  free(path);
  cJSON *root = expected_in("tokenizers_json"), *diff = json_fixture("gguf_tokenizers/differences.json");
  const cJSON *diffs = cJSON_GetObjectItem(diff, name), *why = cJSON_GetObjectItem(diff, "why"), *c;
  ck_assert_msg(cJSON_IsArray(diffs), "differences.json has no list for %s", name);
  int used = 0, cases = 0;
  for (int k = 0; k < 2; k++) {
    snprintf(key, sizeof(key), k ? "%s_random" : "%s", name);
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, key)) {
      check_gguf_case(t, c, gguf_difference(diffs, cJSON_GetObjectItem(c, "text")->valuestring, &used), why, name);
      cases++;
    }
  }
  ck_assert_msg(cases >= 90, "%s: %d cases", name, cases);
  ck_assert_msg(used == cJSON_GetArraySize(diffs), "%s: %d of the %d differences.json entries match no case", name,
                cJSON_GetArraySize(diffs) - used, cJSON_GetArraySize(diffs));
  snprintf(key, sizeof(key), "%s_decode", name); /* id lists encode never gives: as the tokenizer.json */
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, key)) {
    check_decode(t, cJSON_GetObjectItem(c, "ids"), 0, cJSON_GetObjectItem(c, "decoded")->valuestring, key);
    check_decode(t, cJSON_GetObjectItem(c, "ids"), 1, cJSON_GetObjectItem(c, "decoded_skip")->valuestring, key);
  }
  cJSON_Delete(root);
  cJSON_Delete(diff);
  clf_tokenizer_destroy(t);
}

START_TEST(gguf_llama3_matches_llama_cpp) { check_gguf_model("llama3"); }
END_TEST
START_TEST(gguf_qwen2_matches_llama_cpp) { check_gguf_model("qwen2"); }
END_TEST
START_TEST(gguf_smollm_matches_llama_cpp) { check_gguf_model("smollm"); }
END_TEST
START_TEST(gguf_llama2_matches_llama_cpp) { check_gguf_model("llama2"); }
END_TEST
START_TEST(gguf_llama2_meta_matches_llama_cpp) { check_gguf_model("llama2_meta"); }
END_TEST
START_TEST(gguf_llama2_unk_matches_llama_cpp) { check_gguf_model("llama2_unk"); }
END_TEST

/* A GGUF file (version 3, no tensors) written key by key. */
typedef struct gw {
  unsigned char *p;
  size_t n, cap;
  uint64_t kvs;
} gw;

enum { GW_U32 = 4, GW_I32 = 5, GW_F32 = 6, GW_BOOL = 7, GW_STR = 8, GW_ARR = 9 };

static void gw_raw(gw *w, const void *p, size_t n) {
  if (w->n + n > w->cap) {
    w->cap = (w->n + n) * 2 + 256;
    w->p = realloc(w->p, w->cap);
  }
  memcpy(w->p + w->n, p, n);
  w->n += n;
}

static void gw_u32(gw *w, uint32_t v) { gw_raw(w, &v, 4); }
static void gw_u64(gw *w, uint64_t v) { gw_raw(w, &v, 8); }
static void gw_s(gw *w, const char *s) {
  gw_u64(w, strlen(s));
  gw_raw(w, s, strlen(s));
}
static void gw_key(gw *w, const char *key, uint32_t type) {
  gw_s(w, key);
  gw_u32(w, type);
  w->kvs++;
}
static void gw_str(gw *w, const char *key, const char *v) {
  gw_key(w, key, GW_STR);
  gw_s(w, v);
}
static void gw_u32kv(gw *w, const char *key, uint32_t v) {
  gw_key(w, key, GW_U32);
  gw_u32(w, v);
}
static void gw_bool(gw *w, const char *key, int v) {
  unsigned char b = (unsigned char)v;
  gw_key(w, key, GW_BOOL);
  gw_raw(w, &b, 1);
}
/* An array of n strings (the texts, separated by "|"), of n i32 or of n f32. */
static void gw_strs(gw *w, const char *key, const char *texts) {
  size_t n = 1;
  for (const char *p = texts; *p; p++) n += *p == '|';
  gw_key(w, key, GW_ARR);
  gw_u32(w, GW_STR);
  gw_u64(w, n);
  for (const char *p = texts;; p++) {
    const char *e = strchr(p, '|');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    gw_u64(w, l);
    gw_raw(w, p, l);
    if (!e) break;
    p = e;
  }
}
static void gw_nums(gw *w, const char *key, uint32_t type, const void *v, size_t n) {
  gw_key(w, key, GW_ARR);
  gw_u32(w, type);
  gw_u64(w, n);
  gw_raw(w, v, 4 * n);
}

/* Writes g_dir/NAME and returns its path (static); frees w. */
static const char *gw_file(gw *w, const char *name) {
  static char path[256];
  gw head = {0};
  gw_raw(&head, "GGUF", 4);
  gw_u32(&head, 3);
  gw_u64(&head, 0);
  gw_u64(&head, w->kvs);
  gw_raw(&head, w->p, w->n);
  while (head.n % 32) gw_raw(&head, "", 1);
  snprintf(path, sizeof(path), "%s/%s", g_dir, name);
  put_file(name, (const char *)head.p, head.n);
  free(head.p);
  free(w->p);
  memset(w, 0, sizeof(*w));
  return path;
}

/* A byte-level BPE over "a", "b", "ab" (+ <s> 3, control) with merge "a b";
 * `skip` leaves out the key it names, so that a test can write its own. */
static void gw_bpe(gw *w, const char *skip) {
  static const int32_t types[] = {1, 1, 1, 3};
  memset(w, 0, sizeof(*w));
  gw_str(w, "general.architecture", "llama");
  if (strcmp(skip, "model")) gw_str(w, "tokenizer.ggml.model", "gpt2");
  if (strcmp(skip, "pre")) gw_str(w, "tokenizer.ggml.pre", "gpt-2");
  if (strcmp(skip, "tokens")) gw_strs(w, "tokenizer.ggml.tokens", "a|b|ab|<s>");
  if (strcmp(skip, "types")) gw_nums(w, "tokenizer.ggml.token_type", GW_I32, types, 4);
  if (strcmp(skip, "merges")) gw_strs(w, "tokenizer.ggml.merges", "a b");
}

#define GGUF_FAILS(w, status, needle)                                                  \
  do {                                                                                 \
    clf_tokenizer *gf_t_ = (clf_tokenizer *)1;                                         \
    TOK_FAILS(clf_tokenizer_load(gw_file(w, "bad.gguf"), &gf_t_), status, needle);     \
    ck_assert(gf_t_ == NULL);                                                          \
  } while (0)

static void encodes_to(clf_tokenizer *t, const char *text, int special, const int64_t *want, size_t n) {
  int64_t *ids;
  size_t m;
  TOK_OK(clf_tokenizer_encode(t, text, special, &ids, &m));
  ck_assert_msg(m == n, "\"%s\": %zu ids, expected %zu", text, m, n);
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(ids[i] == want[i], "\"%s\": id %zu is %lld, expected %lld", text, i, (long long)ids[i],
                  (long long)want[i]);
  free(ids);
}

/* Small GGUF files: a minimal byte-level BPE works (from the file and from
 * a directory holding it); what is not a tokenizer read here is
 * CLF_E_UNSUPPORTED naming it, malformed metadata CLF_E_FORMAT naming the
 * key and the file. */
START_TEST(gguf_bpe_and_errors) {
  gw w;
  clf_tokenizer *t = NULL;
  make_dir();
  gw_bpe(&w, "");
  TOK_OK(clf_tokenizer_load(gw_file(&w, "ok.gguf"), &t));
  encodes_to(t, "abab<s>a", 0, (const int64_t[]){2, 2, 3, 0}, 4);
  encodes_to(t, "ab", 1, (const int64_t[]){2}, 1); /* gpt-2: no BOS unless add_bos_token */
  clf_tokenizer_destroy(t);
  TOK_OK(clf_tokenizer_load(g_dir, &t)); /* a directory without config.json: its one .gguf */
  clf_tokenizer_destroy(t);
  gw_bpe(&w, "");
  gw_bool(&w, "tokenizer.ggml.add_bos_token", 1);
  gw_u32kv(&w, "tokenizer.ggml.bos_token_id", 3);
  gw_str(&w, "tokenizer.chat_template", "{{ messages }}");
  TOK_OK(clf_tokenizer_load(gw_file(&w, "ok.gguf"), &t));
  encodes_to(t, "ab", 1, (const int64_t[]){3, 2}, 2);
  clf_tokenizer_destroy(t);
  gw_bpe(&w, "");
  gw_file(&w, "second.gguf");
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "holds several GGUF files");
  unlink_file("second.gguf");
  unlink_file("ok.gguf");

  gw_bpe(&w, "model");
  GGUF_FAILS(&w, CLF_E_UNSUPPORTED, "bad.gguf: no tokenizer.ggml.model");
  static const char *const others[] = {"ugm", "t5", "rwkv", "gemma4"}; /* "bert": test_gguf_embed.c */
  for (int i = 0; i < 4; i++) {
    gw_bpe(&w, "model");
    gw_str(&w, "tokenizer.ggml.model", others[i]);
    char needle[64];
    snprintf(needle, sizeof(needle), "tokenizer.ggml.model \"%s\" is not supported", others[i]);
    GGUF_FAILS(&w, CLF_E_UNSUPPORTED, needle);
  }
  /* every pre-tokenizer of the table compiles and runs (one value a row;
   * tools/fixtures/README.md says how they were compared with llama.cpp) */
  static const char *const pres[] = {"default", "gpt-2", "trillion", "llama-bpe", "dbrx", "qwen2",
                                     "deepseek-r1-qwen", "stablelm2", "qwen35", "smollm", "starcoder", "falcon",
                                     "tekken", "gpt-4o", "deepseek-v3", "deepseek-coder", "bloom", "poro-chat",
                                     "viking"};
  for (size_t i = 0; i < sizeof(pres) / sizeof(pres[0]); i++) {
    gw_bpe(&w, "pre");
    gw_str(&w, "tokenizer.ggml.pre", pres[i]);
    gw_u32kv(&w, "tokenizer.ggml.bos_token_id", 3); /* llama-bpe and tekken add it by default */
    TOK_OK(clf_tokenizer_load(gw_file(&w, "ok.gguf"), &t));
    encodes_to(t, "abab", 0, (const int64_t[]){2, 2}, 2);
    if (!strcmp(pres[i], "llama-bpe") || !strcmp(pres[i], "tekken")) /* BOS without add_bos_token, as llama.cpp */
      encodes_to(t, "ab", 1, (const int64_t[]){3, 2}, 2);
    else
      encodes_to(t, "ab", 1, (const int64_t[]){2}, 1);
    int64_t *ids;
    size_t n;
    TOK_OK(clf_tokenizer_encode(t, "It's 12 ab\xc3\xa9 \r\n\t\xe3\x80\x80\xe4\xb8\xad!?", 1, &ids, &n));
    free(ids);
    clf_tokenizer_destroy(t);
  }
  unlink_file("ok.gguf");
  gw_bpe(&w, "pre");
  gw_str(&w, "tokenizer.ggml.pre", "no-such-pre");
  GGUF_FAILS(&w, CLF_E_UNSUPPORTED, "tokenizer.ggml.pre \"no-such-pre\" (the pre-tokenizer) is not supported");
  gw_bpe(&w, "");
  gw_bool(&w, "tokenizer.ggml.add_sep_token", 1);
  GGUF_FAILS(&w, CLF_E_UNSUPPORTED, "add_sep_token");
  gw_bpe(&w, "model");
  gw_u32kv(&w, "tokenizer.ggml.model", 2);
  GGUF_FAILS(&w, CLF_E_FORMAT, "bad.gguf: tokenizer.ggml.model is not a string");

  gw_bpe(&w, "tokens");
  GGUF_FAILS(&w, CLF_E_FORMAT, "bad.gguf: tokenizer.ggml.tokens is missing");
  gw_bpe(&w, "tokens");
  gw_nums(&w, "tokenizer.ggml.tokens", GW_I32, (const int32_t[]){1, 2, 3, 4}, 4);
  GGUF_FAILS(&w, CLF_E_FORMAT, "tokenizer.ggml.tokens is not an array of strings");
  gw_bpe(&w, "tokens");
  gw_strs(&w, "tokenizer.ggml.tokens", "a|b|a|<s>");
  GGUF_FAILS(&w, CLF_E_FORMAT, "tokenizer.ggml.tokens has \"a\" twice (ids 0 and 2)");
  gw_bpe(&w, "types");
  gw_nums(&w, "tokenizer.ggml.token_type", GW_I32, (const int32_t[]){1, 1, 1}, 3);
  GGUF_FAILS(&w, CLF_E_FORMAT, "tokenizer.ggml.token_type has 3 values for 4 tokens");
  gw_bpe(&w, "types");
  gw_nums(&w, "tokenizer.ggml.token_type", GW_F32, (const float[]){1, 1, 1, 3}, 4);
  GGUF_FAILS(&w, CLF_E_FORMAT, "tokenizer.ggml.token_type is not an array of integers");
  gw_bpe(&w, "types");
  gw_nums(&w, "tokenizer.ggml.token_type", GW_I32, (const int32_t[]){1, 1, 9, 3}, 4);
  GGUF_FAILS(&w, CLF_E_FORMAT, "tokenizer.ggml.token_type[2] is 9");
  gw_bpe(&w, "");
  gw_strs(&w, "tokenizer.ggml.scores", "x|y|z|w");
  GGUF_FAILS(&w, CLF_E_FORMAT, "tokenizer.ggml.scores is not an array of numbers");
  gw_bpe(&w, "");
  gw_nums(&w, "tokenizer.ggml.scores", GW_F32, (const float[]){0, 0}, 2);
  GGUF_FAILS(&w, CLF_E_FORMAT, "tokenizer.ggml.scores has 2 values for 4 tokens");

  gw_bpe(&w, "merges");
  GGUF_FAILS(&w, CLF_E_FORMAT, "tokenizer.ggml.merges is missing");
  gw_bpe(&w, "merges");
  gw_nums(&w, "tokenizer.ggml.merges", GW_I32, (const int32_t[]){0}, 1);
  GGUF_FAILS(&w, CLF_E_FORMAT, "tokenizer.ggml.merges is not an array of strings");
  gw_bpe(&w, "merges");
  gw_strs(&w, "tokenizer.ggml.merges", "a b|ab");
  GGUF_FAILS(&w, CLF_E_FORMAT, "tokenizer.ggml.merges[1] \"ab\" is not two tokens joined by a space");
  gw_bpe(&w, "merges");
  gw_strs(&w, "tokenizer.ggml.merges", "b a");
  GGUF_FAILS(&w, CLF_E_FORMAT, "tokenizer.ggml.merges[0] \"b a\" joins tokens that are not in tokenizer.ggml.tokens");

  gw_bpe(&w, "");
  gw_u32kv(&w, "tokenizer.ggml.eos_token_id", 4);
  GGUF_FAILS(&w, CLF_E_FORMAT, "tokenizer.ggml.eos_token_id is 4, not a token id (4 tokens)");
  gw_bpe(&w, "");
  gw_str(&w, "tokenizer.ggml.bos_token_id", "<s>");
  GGUF_FAILS(&w, CLF_E_FORMAT, "tokenizer.ggml.bos_token_id is not an integer");
  gw_bpe(&w, "");
  gw_bool(&w, "tokenizer.ggml.add_eos_token", 1);
  GGUF_FAILS(&w, CLF_E_FORMAT, "add_eos_token is true, but tokenizer.ggml.eos_token_id is not set");
  gw_bpe(&w, "");
  gw_strs(&w, "tokenizer.ggml.add_bos_token", "yes");
  GGUF_FAILS(&w, CLF_E_FORMAT, "tokenizer.ggml.add_bos_token is not a boolean");
  put_file("bad.gguf", "not a gguf file", 15);
  TOK_FAILS(clf_tokenizer_load(g_dir, &t), CLF_E_FORMAT, "bad.gguf");
  unlink_file("bad.gguf");
  rmdir(g_dir);
}
END_TEST

/* A SentencePiece vocabulary: ids 0 <unk> 1 <s> 2 </s> 3 ▁ 4 a 5 b 6 c 7 ab
 * 8 bc 9 ▁a, then (bytes) 10 <0xC3> 11 <0xA9>; scores[7..9] set by the test. */
static void gw_spm(gw *w, const float *scores, int bytes, int prefix) {
  static const int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 6, 6};
  float s[12] = {0, 0, 0, -10, -10, -10, -10, 0, 0, 0, 0, 0};
  memcpy(s + 7, scores, 3 * sizeof(float));
  memset(w, 0, sizeof(*w));
  gw_str(w, "tokenizer.ggml.model", "llama");
  gw_strs(w, "tokenizer.ggml.tokens", bytes ? "<unk>|<s>|</s>|\xe2\x96\x81|a|b|c|ab|bc|\xe2\x96\x81" "a|<0xC3>|<0xA9>"
                                            : "<unk>|<s>|</s>|\xe2\x96\x81|a|b|c|ab|bc|\xe2\x96\x81" "a");
  gw_nums(w, "tokenizer.ggml.token_type", GW_I32, types, bytes ? 12 : 10);
  gw_nums(w, "tokenizer.ggml.scores", GW_F32, s, bytes ? 12 : 10);
  if (!prefix) gw_bool(w, "tokenizer.ggml.add_space_prefix", 0);
}

static void decodes_to(clf_tokenizer *t, const int64_t *ids, size_t n, int skip, const char *want) {
  char *text;
  TOK_OK(clf_tokenizer_decode(t, ids, n, skip, &text));
  ck_assert_str_eq(text, want);
  free(text);
}

/* tokenizer.ggml.model "llama": merges made from the scores as llama.cpp's
 * llm_tokenizer_spm makes them - every token that is two tokens joined, the
 * highest score first, equal scores leftmost first; "▁" for spaces and
 * before the text; characters outside the vocabulary to the <0xNN> tokens,
 * or <unk> without them; BOS added by default; the decoder strips the one
 * space it prepended. */
START_TEST(gguf_spm_merges_by_score) {
  gw w;
  clf_tokenizer *t = NULL;
  make_dir();
  gw_spm(&w, (const float[]){-2, -1, -3}, 1, 1); /* bc before ab before ▁a */
  TOK_OK(clf_tokenizer_load(gw_file(&w, "spm.gguf"), &t));
  encodes_to(t, "abc", 1, (const int64_t[]){1, 9, 8}, 3);     /* ▁ a bc, then ▁a */
  encodes_to(t, "c\xc3\xa9", 0, (const int64_t[]){3, 6, 10, 11}, 4); /* é as its bytes */
  decodes_to(t, (const int64_t[]){1, 9, 8, 10, 11, 2}, 6, 0, "<s> abc\xc3\xa9</s>");
  decodes_to(t, (const int64_t[]){1, 9, 8, 10, 11, 2}, 6, 1, "abc\xc3\xa9");
  clf_tokenizer_destroy(t);
  gw_spm(&w, (const float[]){-2, -2, -3}, 0, 1); /* ab and bc tie: the leftmost pair */
  TOK_OK(clf_tokenizer_load(gw_file(&w, "spm.gguf"), &t));
  encodes_to(t, "abc", 0, (const int64_t[]){3, 7, 6}, 3);
  encodes_to(t, "x a", 0, (const int64_t[]){3, 0, 9}, 3); /* no byte tokens: <unk> */
  clf_tokenizer_destroy(t);
  gw_spm(&w, (const float[]){-2, -2, -3}, 0, 0); /* add_space_prefix false */
  TOK_OK(clf_tokenizer_load(gw_file(&w, "spm.gguf"), &t));
  encodes_to(t, "abc a", 1, (const int64_t[]){1, 7, 6, 9}, 4);
  decodes_to(t, (const int64_t[]){3, 4}, 2, 0, " a");
  clf_tokenizer_destroy(t);
  unlink_file("spm.gguf");
  rmdir(g_dir);
}
END_TEST

/* ---- hostile vocabularies: long tokens, loaded in time linear in the file ---- */

/* The longest token clformer takes (host/base/limits.h's
 * CLF_LIMIT_TOKEN_BYTES): the longest in the real vocabularies measured is
 * far shorter (docs/reliability.md). */
#define TOKEN_LIMIT 1024

/* One string of an array (gw_strs writes whole arrays from one text). */
static void gw_item(gw *w, const char *s, size_t n) {
  gw_u64(w, n);
  gw_raw(w, s, n);
}

/* tokenizer.ggml.tokens: the tokens of `head` ("|"-separated), then
 * "a" x 2 .. "a" x chain (none when chain < 2), then `n_long` tokens of
 * long_len bytes, 'X's ending in their index in letters (so that they share
 * all but their last bytes, the worst case for comparing them).  Returns
 * how many tokens that is. */
static size_t gw_hostile_tokens(gw *w, const char *head, size_t chain, size_t n_long, size_t long_len) {
  size_t n_head = 1;
  for (const char *p = head; *p; p++) n_head += *p == '|';
  size_t n = n_head + (chain > 1 ? chain - 1 : 0) + n_long;
  size_t cap = (chain > long_len ? chain : long_len) + 1;
  char *buf = malloc(cap);
  gw_key(w, "tokenizer.ggml.tokens", GW_ARR);
  gw_u32(w, GW_STR);
  gw_u64(w, n);
  for (const char *p = head;; p++) {
    const char *e = strchr(p, '|');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    gw_item(w, p, l);
    if (!e) break;
    p = e;
  }
  memset(buf, 'a', cap);
  for (size_t k = 2; k <= chain; k++) gw_item(w, buf, k);
  for (size_t i = 0; i < n_long; i++) {
    memset(buf, 'X', long_len);
    for (size_t v = i, at = long_len; v && at; v /= 26) buf[--at] = (char)('a' + v % 26);
    gw_item(w, buf, long_len);
  }
  free(buf);
  return n;
}

/* A SentencePiece GGUF: the vocabulary of gw_spm (no byte tokens), then
 * the hostile tokens; "a" x k scores k, so "a" x chain is one token. */
static void gw_spm_hostile(gw *w, size_t chain, size_t n_long, size_t long_len) {
  memset(w, 0, sizeof(*w));
  gw_str(w, "tokenizer.ggml.model", "llama");
  size_t n = gw_hostile_tokens(w, "<unk>|<s>|</s>|\xe2\x96\x81|a|b|c|ab|bc|\xe2\x96\x81" "a", chain, n_long,
                               long_len);
  int32_t *types = malloc(n * sizeof(int32_t));
  float *scores = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) {
    types[i] = i == 0 ? 2 : i < 3 ? 3 : 1;
    scores[i] = i >= 10 && i < 10 + chain - 1 ? (float)(i - 8) : -10.0f;
  }
  gw_nums(w, "tokenizer.ggml.token_type", GW_I32, types, n);
  gw_nums(w, "tokenizer.ggml.scores", GW_F32, scores, n);
  gw_bool(w, "tokenizer.ggml.add_space_prefix", 0);
  free(types);
  free(scores);
}

/* A byte-level BPE GGUF: gw_bpe's vocabulary and merge "a b", then the
 * hostile tokens, with the merges that double "a" up to the chain's length
 * (before the others, so that "a" x 2^k is one token), then the merges "a"
 * x k + " a" that make the chain. */
static void gw_bpe_hostile(gw *w, size_t chain, size_t n_long, size_t long_len) {
  memset(w, 0, sizeof(*w));
  gw_str(w, "tokenizer.ggml.model", "gpt2");
  gw_str(w, "tokenizer.ggml.pre", "gpt-2");
  gw_hostile_tokens(w, "a|b|ab|<s>", chain, n_long, long_len);
  char *buf = malloc(2 * chain + 2);
  size_t doubling = 0;
  while ((size_t)2 << doubling <= chain) doubling++;
  gw_key(w, "tokenizer.ggml.merges", GW_ARR);
  gw_u32(w, GW_STR);
  gw_u64(w, 1 + doubling + (chain > 1 ? chain - 1 : 0));
  gw_item(w, "a b", 3);
  for (size_t j = 0; j < doubling; j++) { /* "a a", "aa aa", ...: a pair listed again keeps this rank */
    size_t k = (size_t)1 << j;
    memset(buf, 'a', 2 * k + 1);
    buf[k] = ' ';
    gw_item(w, buf, 2 * k + 1);
  }
  for (size_t k = 1; k < chain; k++) {
    memset(buf, 'a', k);
    memcpy(buf + k, " a", 2);
    gw_item(w, buf, k + 2);
  }
  free(buf);
}

/* Loads g_dir/NAME, or fails as expected, in under `limit` seconds. */
static clf_tokenizer *load_within(const char *path, double limit, clf_status want, const char *needle) {
  clf_tokenizer *t = NULL;
  double t0 = seconds_now();
  clf_status st = clf_tokenizer_load(path, &t);
  double took = seconds_now() - t0;
  ck_assert_msg(st == want, "%s: %s, expected %s (%s)", path, clf_status_name(st), clf_status_name(want),
                clf_last_error(NULL));
  if (needle)
    ck_assert_msg(strstr(clf_last_error(NULL), needle) != NULL, "error \"%s\", expected it to mention \"%s\"",
                  clf_last_error(NULL), needle);
  ck_assert_msg(took < limit, "%s: loading took %.2f s, expected under %.1f s", path, took, limit);
  return t;
}

/* The file: one token of 200 KB kept the SentencePiece loader
 * hashing its prefixes for over a minute (89 s for 769 KB).  A token longer
 * than the limit is refused at once with its index and length; one of the
 * limit's length loads. */
START_TEST(gguf_long_token_refused) {
  gw w;
  make_dir();
  gw_spm_hostile(&w, 0, 1, 200000); /* ids 0-9 gw_spm's, 10 the long one */
  load_within(gw_file(&w, "long.gguf"), 2.0, CLF_E_FORMAT,
              "tokenizer.ggml.tokens[10] is 200000 bytes long, past the limit of 1024 bytes");
  gw_bpe_hostile(&w, 0, 1, TOKEN_LIMIT + 1); /* ids 0-3 gw_bpe's, 4 the long one */
  load_within(gw_file(&w, "long.gguf"), 2.0, CLF_E_FORMAT,
              "tokenizer.ggml.tokens[4] is 1025 bytes long, past the limit of 1024 bytes");
  gw_spm_hostile(&w, 0, 2, TOKEN_LIMIT);
  clf_tokenizer_destroy(load_within(gw_file(&w, "long.gguf"), 2.0, CLF_OK, NULL));
  gw_bpe_hostile(&w, 0, 2, TOKEN_LIMIT);
  clf_tokenizer_destroy(load_within(gw_file(&w, "long.gguf"), 2.0, CLF_OK, NULL));
  unlink_file("long.gguf");
  rmdir(g_dir);
}
END_TEST

/* 4,000 tokens of 1,000 bytes and the tokens "a" x 2 .. "a" x 300 (a
 * 4 MB vocabulary; as SentencePiece, every split of the chain a merge):
 * each loads in well under the 2 s asserted (0.14 s in an optimized build,
 * whole `clformer tokenize`; the prefix-hashing loader took 6.9 s for the
 * SentencePiece one), and "a" x 300 (SentencePiece) or "a" x 256 (BPE)
 * encodes to its one token. */
START_TEST(gguf_large_vocabulary_loads_in_linear_time) {
  gw w;
  make_dir();
  char *text = malloc(301);
  for (int spm = 0; spm < 2; spm++) {
    if (spm) gw_spm_hostile(&w, 300, 4000, 1000);
    else gw_bpe_hostile(&w, 300, 4000, 1000);
    clf_tokenizer *t = load_within(gw_file(&w, "large.gguf"), 2.0, CLF_OK, NULL);
    int64_t want = spm ? 10 + 298 : 4 + 254; /* "a" x 300 (the chain's last), "a" x 256 */
    memset(text, 'a', 300);
    text[spm ? 300 : 256] = '\0';
    encodes_to(t, text, 0, &want, 1);
    clf_tokenizer_destroy(t);
  }
  free(text);
  unlink_file("large.gguf");
  rmdir(g_dir);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("tokenizer");
  TCase *tc = tcase_create("tokenizer");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, bert_uncased_matches_transformers);
  tcase_add_test(tc, bert_cased_matches_transformers);
  tcase_add_test(tc, gpt2_matches_transformers);
  tcase_add_test(tc, marian_matches_transformers);
  tcase_add_test(tc, roberta_matches_transformers);
  tcase_add_test(tc, xlmr_matches_transformers);
  tcase_add_test(tc, llama3_matches_tokenizers);
  tcase_add_test(tc, qwen2_matches_tokenizers);
  tcase_add_test(tc, smollm_matches_tokenizers);
  tcase_add_test(tc, llama2_matches_tokenizers);
  tcase_add_test(tc, llama2_metaspace_matches_tokenizers);
  tcase_add_test(tc, llama2_unk_matches_tokenizers);
  tcase_add_test(tc, gpt2_round_trip_random_text);
  tcase_add_test(tc, long_inputs);
  tcase_add_test(tc, tokenizer_json_errors);
  tcase_add_test(tc, tokenizer_json_precedence);
  tcase_add_test(tc, tokenizer_json_damaged);
  tcase_add_test(tc, tokenizer_json_no_added_tokens);
  tcase_add_test(tc, tokenizer_json_variants);
  tcase_add_test(tc, model_type_picks_roberta_and_xlmr);
  tcase_add_test(tc, missing_files);
  tcase_add_test(tc, malformed_files);
  tcase_add_test(tc, long_tokens_refused);
  tcase_add_test(tc, vocabulary_chosen_to_collide_loads_in_time);
  tcase_add_test(tc, config_options);
  tcase_add_test(tc, bad_arguments);
  tcase_add_test(tc, normalized_invalid_utf8_ends);
  tcase_add_test(tc, gguf_llama3_matches_llama_cpp);
  tcase_add_test(tc, gguf_qwen2_matches_llama_cpp);
  tcase_add_test(tc, gguf_smollm_matches_llama_cpp);
  tcase_add_test(tc, gguf_llama2_matches_llama_cpp);
  tcase_add_test(tc, gguf_llama2_meta_matches_llama_cpp);
  tcase_add_test(tc, gguf_llama2_unk_matches_llama_cpp);
  tcase_add_test(tc, gguf_bpe_and_errors);
  tcase_add_test(tc, gguf_spm_merges_by_score);
  tcase_add_test(tc, gguf_long_token_refused);
  tcase_add_test(tc, gguf_large_vocabulary_loads_in_linear_time);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
