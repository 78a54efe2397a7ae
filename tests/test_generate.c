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

#include "../tools/fixtures/paper_weights.h"
#include "clformer.h"
#include "harness.h"

/* The fixture helpers below are the same as test_models.c's (each suite is
 * one self-contained program). */
/* Models are loaded once per program and destroyed when the suite ends:
 * under Oclgrind, destroying a model that has run and then loading another
 * makes Oclgrind flag the new weights as uninitialised (the same sequence of
 * ops on plain tensors does not), so the suite avoids that pattern. */
static struct {
  char dir[1024];
  clf_model *m;
} model_cache[16];

static clf_model *get_model(const char *dir) {
  size_t i = 0;
  while (i < 16 && model_cache[i].m && strcmp(model_cache[i].dir, dir) != 0) i++;
  ck_assert(i < 16);
  if (!model_cache[i].m) {
    TH_OK(clf_model_load(th_ctx, dir, &model_cache[i].m));
    snprintf(model_cache[i].dir, sizeof model_cache[i].dir, "%s", dir);
  }
  return model_cache[i].m;
}

static void free_models(void) {
  for (size_t i = 0; i < 16; i++) {
    clf_model_destroy(model_cache[i].m);
    model_cache[i].m = NULL;
  }
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
  if (s) s[n] = 0;
  fclose(f);
  return s;
}

static void write_bytes(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_msg(f != NULL, "cannot write %s", path);
  ck_assert(fwrite(data, 1, n, f) == n);
  fclose(f);
}

static const char *fixtures(void) {
  const char *d = getenv("CLF_FIXTURES");
  return d ? d : "tests/fixtures";
}

static cJSON *load_cases(const char *dir) {
  char path[1024];
  snprintf(path, sizeof path, "%s/cases.json", dir);
  char *s = read_text(path);
  ck_assert_msg(s != NULL, "cannot read %s", path);
  cJSON *j = cJSON_Parse(s);
  free(s);
  ck_assert_msg(j != NULL, "%s is not JSON", path);
  return j;
}

/* A safetensors file of F32/other tensors, written in the order given. */
typedef struct st_entry {
  const char *name, *dtype;
  int ndim;
  size_t shape[8];
  const void *data;
  size_t bytes;
} st_entry;

static void write_safetensors(const char *path, const st_entry *e, size_t n) {
  cJSON *h = cJSON_CreateObject();
  size_t off = 0;
  for (size_t i = 0; i < n; i++) {
    cJSON *t = cJSON_AddObjectToObject(h, e[i].name);
    cJSON_AddStringToObject(t, "dtype", e[i].dtype);
    cJSON *sh = cJSON_AddArrayToObject(t, "shape");
    for (int d = 0; d < e[i].ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)e[i].shape[d]));
    cJSON *o = cJSON_AddArrayToObject(t, "data_offsets");
    cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
    cJSON_AddItemToArray(o, cJSON_CreateNumber((double)(off + e[i].bytes)));
    off += e[i].bytes;
  }
  char *txt = cJSON_PrintUnformatted(h);
  cJSON_Delete(h);
  size_t hl = strlen(txt), padded = (hl + 7) / 8 * 8;
  FILE *f = fopen(path, "wb");
  ck_assert_msg(f != NULL, "cannot write %s", path);
  unsigned char len[8];
  for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)padded >> (8 * i));
  fwrite(len, 1, 8, f);
  fwrite(txt, 1, hl, f);
  for (size_t i = hl; i < padded; i++) fputc(' ', f);
  for (size_t i = 0; i < n; i++) ck_assert(fwrite(e[i].data, 1, e[i].bytes, f) == e[i].bytes);
  fclose(f);
  free(txt);
}

/* A temp directory holding a copy of the fixture's config files, and a
 * model.safetensors rewritten from the fixture's with tensor `drop` left out
 * and tensor `reshape` given `new_shape` (same number of elements). */
static char *copy_fixture(const char *name, const char *drop, const char *reshape, int ndim,
                          const size_t *new_shape) {
  char tmpl[] = "/tmp/clf-models-XXXXXX", src[1024], dst[1200];
  ck_assert(mkdtemp(tmpl) != NULL);
  const char *files[] = {"config.json", "generation_config.json"};
  for (size_t i = 0; i < 2; i++) {
    snprintf(src, sizeof src, "%s/%s/%s", fixtures(), name, files[i]);
    char *s = read_text(src);
    if (!s) continue;
    snprintf(dst, sizeof dst, "%s/%s", tmpl, files[i]);
    write_bytes(dst, s, strlen(s));
    free(s);
  }
  snprintf(src, sizeof src, "%s/%s/model.safetensors", fixtures(), name);
  clf_safetensors *st = NULL;
  ck_assert_msg(clf_safetensors_open(src, &st) == CLF_OK, "%s", clf_last_error(NULL));
  size_t n = clf_safetensors_count(st), k = 0;
  st_entry *e = calloc(n, sizeof *e);
  for (size_t i = 0; i < n; i++) {
    clf_st_info info;
    ck_assert(clf_safetensors_info(st, i, &info) == CLF_OK);
    if (drop && strcmp(info.name, drop) == 0) continue;
    e[k] = (st_entry){info.name, info.dtype, info.ndim, {0}, info.data, info.bytes};
    memcpy(e[k].shape, info.shape, sizeof info.shape);
    if (reshape && strcmp(info.name, reshape) == 0) {
      e[k].ndim = ndim;
      memcpy(e[k].shape, new_shape, (size_t)ndim * sizeof *new_shape);
    }
    k++;
  }
  snprintf(dst, sizeof dst, "%s/model.safetensors", tmpl);
  write_safetensors(dst, e, k);
  free(e);
  clf_safetensors_close(st);
  return strdup(tmpl);
}

static void remove_dir(char *dir) {
  DIR *d = opendir(dir);
  struct dirent *de;
  char p[1200];
  while (d && (de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue;
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    unlink(p);
  }
  if (d) closedir(d);
  rmdir(dir);
  free(dir);
}

/* Rewrites `key` of dir/config.json to the JSON value `json`. */
static void set_config(const char *dir, const char *key, const char *json) {
  char p[1200];
  snprintf(p, sizeof p, "%s/config.json", dir);
  char *s = read_text(p);
  cJSON *c = cJSON_Parse(s);
  free(s);
  cJSON_DeleteItemFromObjectCaseSensitive(c, key);
  cJSON_AddItemToObject(c, key, cJSON_Parse(json));
  char *out = cJSON_Print(c);
  write_bytes(p, out, strlen(out));
  free(out);
  cJSON_Delete(c);
}

/* The marian_paper fixture's weights, regenerated into a temp dir. */
static char *make_paper_dir(void) {
  char src[1024];
  snprintf(src, sizeof src, "%s/marian_paper/tensors.json", fixtures());
  char *s = read_text(src);
  ck_assert_msg(s != NULL, "cannot read %s", src);
  cJSON *j = cJSON_Parse(s);
  free(s);
  cJSON *ts = cJSON_GetObjectItem(j, "tensors"), *t;
  size_t n = (size_t)cJSON_GetArraySize(ts), i = 0;
  st_entry *e = calloc(n, sizeof *e);
  cJSON_ArrayForEach(t, ts) {
    st_entry *x = &e[i++];
    x->name = cJSON_GetObjectItem(t, "name")->valuestring;
    x->dtype = "F32";
    cJSON *sh = cJSON_GetObjectItem(t, "shape"), *d;
    size_t numel = 1;
    cJSON_ArrayForEach(d, sh) numel *= (x->shape[x->ndim++] = (size_t)d->valuedouble);
    float *v = malloc(numel * sizeof *v + 1);
    clf_paper_fill(x->name, (float)cJSON_GetObjectItem(t, "offset")->valuedouble,
                   (float)cJSON_GetObjectItem(t, "scale")->valuedouble, v, numel);
    x->data = v;
    x->bytes = numel * sizeof *v;
  }
  char *dir = copy_fixture("marian", NULL, NULL, 0, NULL);
  char p[1200];
  const char *files[] = {"config.json", "generation_config.json"};
  for (size_t f = 0; f < 2; f++) {
    snprintf(src, sizeof src, "%s/marian_paper/%s", fixtures(), files[f]);
    char *txt = read_text(src);
    snprintf(p, sizeof p, "%s/%s", dir, files[f]);
    if (txt) write_bytes(p, txt, strlen(txt));
    else unlink(p);
    free(txt);
  }
  snprintf(p, sizeof p, "%s/model.safetensors", dir);
  write_safetensors(p, e, n);
  for (i = 0; i < n; i++) free((void *)e[i].data);
  free(e);
  cJSON_Delete(j);
  return dir;
}

/* Every generate case: the sequences must equal the expected ones exactly. */
static void run_generate_cases(const char *model_dir, const char *case_dir) {
  clf_model *m = get_model(model_dir);
  cJSON *cases = load_cases(case_dir), *c;
  int n_cases = 0;
  char p[1200];
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(cases, "cases")) {
    if (strcmp(cJSON_GetObjectItem(c, "kind")->valuestring, "generate") != 0) continue;
    const char *cname = cJSON_GetObjectItem(c, "name")->valuestring;
    cJSON *ins = cJSON_GetObjectItem(c, "inputs"), *kw = cJSON_GetObjectItem(c, "generate_kwargs");
    clf_array ids, mask, expect, got;
    int has_mask = cJSON_GetObjectItem(ins, "attention_mask") != NULL;
    snprintf(p, sizeof p, "%s/%s", case_dir, cJSON_GetObjectItem(ins, "input_ids")->valuestring);
    ck_assert_msg(clf_npy_read(p, &ids) == CLF_OK, "%s", clf_last_error(NULL));
    if (has_mask) {
      snprintf(p, sizeof p, "%s/%s", case_dir, cJSON_GetObjectItem(ins, "attention_mask")->valuestring);
      ck_assert_msg(clf_npy_read(p, &mask) == CLF_OK, "%s", clf_last_error(NULL));
    }
    snprintf(p, sizeof p, "%s/%s", case_dir,
             cJSON_GetObjectItem(cJSON_GetObjectItem(c, "outputs"), "sequences")->valuestring);
    ck_assert_msg(clf_npy_read(p, &expect) == CLF_OK, "%s", clf_last_error(NULL));
    clf_generate_options o;
    clf_generate_options_init(&o);
    const cJSON *mnt = cJSON_GetObjectItem(kw, "max_new_tokens"), *nb = cJSON_GetObjectItem(kw, "num_beams");
    if (cJSON_IsNumber(mnt)) o.max_new_tokens = (size_t)mnt->valuedouble;
    if (cJSON_IsNumber(nb)) o.num_beams = (size_t)nb->valuedouble;
    TH_OK(clf_model_generate(m, &ids, has_mask ? &mask : NULL, &o, &got));
    ck_assert_int_eq(got.dtype, CLF_I64);
    ck_assert_int_eq(got.ndim, 2);
    ck_assert_str_eq(got.name, "sequences");
    ck_assert_msg(got.shape[0] == expect.shape[0] && got.shape[1] == expect.shape[1],
                  "%s %s: sequences [%zu, %zu], expected [%zu, %zu]", case_dir, cname, got.shape[0], got.shape[1],
                  expect.shape[0], expect.shape[1]);
    const int64_t *g = got.data, *x = expect.data;
    for (size_t i = 0; i < clf_array_numel(&expect); i++)
      ck_assert_msg(g[i] == x[i], "%s %s: token %zu of row %zu is %lld, expected %lld", case_dir, cname,
                    i % expect.shape[1], i / expect.shape[1], (long long)g[i], (long long)x[i]);
    clf_array_free(&got);
    clf_array_free(&expect);
    clf_array_free(&ids);
    if (has_mask) clf_array_free(&mask);
    n_cases++;
  }
  ck_assert_msg(n_cases > 0, "%s has no generate case", case_dir);
  cJSON_Delete(cases);
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
  set_config(tmp, "repetition_penalty", "1.3");
  TH_OK(clf_model_load(th_ctx, tmp, &m));
  TH_FAILS(clf_model_generate(m, &in, NULL, NULL, &seq), CLF_E_UNSUPPORTED, "repetition_penalty");
  clf_model_destroy(m);
  remove_dir(tmp);
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
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
