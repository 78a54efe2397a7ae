/* fixture_util.c - helpers the model suites share (see fixture_util.h). */
#include "fixture_util.h"

#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tools/fixtures/paper_weights.h"
#include "harness.h"

/* Models are loaded once per program and destroyed when the suite ends:
 * under Oclgrind, destroying a model that has run and then loading another
 * makes Oclgrind flag the new weights as uninitialised (the same sequence of
 * ops on plain tensors does not), so the suite avoids that pattern. */
static struct {
  char dir[1024];
  clf_model *m;
} model_cache[32]; /* every fixture one suite loads */

clf_model *get_model(const char *dir) {
  size_t i = 0;
  while (i < 32 && model_cache[i].m && strcmp(model_cache[i].dir, dir) != 0) i++;
  ck_assert(i < 32);
  if (!model_cache[i].m) {
    TH_OK(clf_model_load(th_ctx, dir, &model_cache[i].m));
    snprintf(model_cache[i].dir, sizeof model_cache[i].dir, "%s", dir);
  }
  return model_cache[i].m;
}

void free_models(void) {
  for (size_t i = 0; i < sizeof model_cache / sizeof model_cache[0]; i++) {
    clf_model_destroy(model_cache[i].m);
    model_cache[i].m = NULL;
  }
}

char *read_file_len(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
  if (s) s[n] = 0;
  fclose(f);
  if (len) *len = (size_t)n;
  return s;
}

char *read_text(const char *path) { return read_file_len(path, NULL); }

void write_bytes(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_msg(f != NULL, "cannot write %s", path);
  ck_assert(fwrite(data, 1, n, f) == n);
  fclose(f);
}

const char *fixtures(void) {
  const char *d = getenv("CLF_FIXTURES");
  return d ? d : "tests/fixtures";
}

cJSON *load_cases(const char *dir) {
  char path[1024];
  snprintf(path, sizeof path, "%s/cases.json", dir);
  char *s = read_text(path);
  ck_assert_msg(s != NULL, "cannot read %s", path);
  cJSON *j = cJSON_Parse(s);
  free(s);
  ck_assert_msg(j != NULL, "%s is not JSON", path);
  return j;
}


void write_safetensors(const char *path, const st_entry *e, size_t n) {
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
 * model.safetensors rewritten from the fixture's with tensor `drop` left out,
 * tensor `reshape` given `new_shape` (same number of elements) and `extra`
 * (may be NULL) added last. */
static char *copy_fixture_with(const char *name, const char *drop, const char *reshape, int ndim,
                               const size_t *new_shape, const st_entry *extra) {
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
  st_entry *e = calloc(n + 1, sizeof *e);
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
  if (extra) e[k++] = *extra;
  snprintf(dst, sizeof dst, "%s/model.safetensors", tmpl);
  write_safetensors(dst, e, k);
  free(e);
  clf_safetensors_close(st);
  return strdup(tmpl);
}

char *copy_fixture(const char *name, const char *drop, const char *reshape, int ndim,
                   const size_t *new_shape) {
  return copy_fixture_with(name, drop, reshape, ndim, new_shape, NULL);
}

char *copy_fixture_adding(const char *name, const st_entry *extra) {
  return copy_fixture_with(name, NULL, NULL, 0, NULL, extra);
}

void remove_dir(char *dir) {
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
void set_config(const char *dir, const char *key, const char *json) {
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
char *make_paper_dir(void) {
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


/* ---- running the golden cases ---- */

/* The npy files named by a case's "inputs" / "outputs" object. */
static size_t read_arrays(const cJSON *obj, const char *dir, clf_array *arr, const char **names, size_t cap) {
  char p[1200];
  size_t n = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, obj) {
    ck_assert_uint_lt(n, cap);
    snprintf(p, sizeof p, "%s/%s", dir, it->valuestring);
    ck_assert_msg(clf_npy_read(p, &arr[n]) == CLF_OK, "%s", clf_last_error(NULL));
    snprintf(arr[n].name, sizeof arr[n].name, "%s", it->string);
    if (names) names[n] = it->string;
    n++;
  }
  return n;
}

/* Max |got - exp| over the rows of an f32 output, skipping rows whose mask
 * (i32/i64 [rows], or NULL) is 0. */
static double output_error(const clf_array *got, const clf_array *exp, const clf_array *mask) {
  const size_t n = clf_array_numel(exp);
  const size_t rows = exp->ndim >= 2 ? exp->shape[0] * (exp->ndim > 2 ? exp->shape[1] : 1) : 1;
  const size_t width = n / (rows ? rows : 1);
  const float *g = got->data, *x = exp->data;
  double err = 0.0;
  for (size_t r = 0; r < rows; r++) {
    if (mask && !(mask->dtype == CLF_I64 ? ((int64_t *)mask->data)[r] : ((int32_t *)mask->data)[r])) continue;
    for (size_t i = 0; i < width; i++) err = fmax(err, fabs((double)g[r * width + i] - x[r * width + i]));
  }
  return err;
}

static void check_outputs(const cJSON *c, clf_array *got, clf_array *exp, const char **outs, size_t n_out,
                          const clf_array *mask, double tol, const char *what) {
  const char *cname = cJSON_GetObjectItem(c, "name")->valuestring;
  for (size_t o = 0; o < n_out; o++) {
    ck_assert_str_eq(got[o].name, outs[o]);
    ck_assert_int_eq(got[o].dtype, exp[o].dtype);
    ck_assert_int_eq(got[o].ndim, exp[o].ndim);
    for (int d = 0; d < exp[o].ndim; d++) ck_assert_uint_eq(got[o].shape[d], exp[o].shape[d]);
    if (exp[o].dtype == CLF_I64) {
      ck_assert_msg(memcmp(got[o].data, exp[o].data, clf_array_numel(&exp[o]) * sizeof(int64_t)) == 0,
                    "%s case %s output %s differs", what, cname, outs[o]);
      continue;
    }
    const double scale = fmax(1.0, cJSON_GetObjectItem(cJSON_GetObjectItem(c, "max_abs"), outs[o])->valuedouble);
    const int exact = !strcmp(outs[o], "mask");
    const double err = output_error(&got[o], &exp[o], mask), t = exact ? 0.0 : tol;
    th_note_error(err / scale, t);
    ck_assert_msg(err <= t * scale, "%s case %s output %s: max abs error %.3g > %g x %.3g", what, cname, outs[o],
                  err, t, scale);
  }
}

void check_forward_cases(clf_model *m, const char *case_dir, double tol, const char *what) {
  cJSON *cases = load_cases(case_dir), *c;
  int n_cases = 0;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(cases, "cases")) {
    if (strcmp(cJSON_GetObjectItem(c, "kind")->valuestring, "forward") != 0) continue;
    clf_array in[8], exp[8], got[8];
    const char *outs[8];
    const size_t n_in = read_arrays(cJSON_GetObjectItem(c, "inputs"), case_dir, in, NULL, 8);
    const size_t n_out = read_arrays(cJSON_GetObjectItem(c, "outputs"), case_dir, exp, outs, 8);
    TH_OK(clf_model_run(m, in, n_in, outs, n_out, got));
    const cJSON *cm = cJSON_GetObjectItem(c, "compare_mask");
    const clf_array *mask = NULL;
    for (size_t i = 0; i < n_in && cJSON_IsString(cm); i++)
      if (!strcmp(cm->valuestring, "attention_mask") && !strcmp(in[i].name, "attention_mask")) mask = &in[i];
    check_outputs(c, got, exp, outs, n_out, mask, tol, what);
    for (size_t o = 0; o < n_out; o++) clf_array_free(&got[o]), clf_array_free(&exp[o]);
    for (size_t i = 0; i < n_in; i++) clf_array_free(&in[i]);
    n_cases++;
  }
  ck_assert_msg(n_cases > 0, "%s has no forward case", what);
  cJSON_Delete(cases);
}

void check_forward_same(clf_model *a, clf_model *b, const char *case_dir, double tol, const char *what) {
  cJSON *cases = load_cases(case_dir), *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(cases, "cases")) {
    if (strcmp(cJSON_GetObjectItem(c, "kind")->valuestring, "forward") != 0) continue;
    clf_array in[8], exp[8], ga[8], gb[8];
    const char *outs[8];
    const size_t n_in = read_arrays(cJSON_GetObjectItem(c, "inputs"), case_dir, in, NULL, 8);
    const size_t n_out = read_arrays(cJSON_GetObjectItem(c, "outputs"), case_dir, exp, outs, 8);
    TH_OK(clf_model_run(a, in, n_in, outs, n_out, ga));
    TH_OK(clf_model_run(b, in, n_in, outs, n_out, gb));
    for (size_t o = 0; o < n_out; o++) {
      if (gb[o].dtype == CLF_F32) {
        const double scale = fmax(1.0, th_max_abs(gb[o].data, clf_array_numel(&gb[o])));
        const double err = th_max_abs_diff(ga[o].data, gb[o].data, clf_array_numel(&gb[o]));
        th_note_error(err / scale, tol);
        ck_assert_msg(err <= tol * scale, "%s case %s output %s: max abs difference %.3g > %g x %.3g", what,
                      cJSON_GetObjectItem(c, "name")->valuestring, outs[o], err, tol, scale);
      }
      clf_array_free(&ga[o]), clf_array_free(&gb[o]), clf_array_free(&exp[o]);
    }
    for (size_t i = 0; i < n_in; i++) clf_array_free(&in[i]);
  }
  cJSON_Delete(cases);
}

void check_generate_cases(clf_model *m, const char *case_dir, const char *what) {
  cJSON *cases = load_cases(case_dir), *c;
  int n_cases = 0;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(cases, "cases")) {
    if (strcmp(cJSON_GetObjectItem(c, "kind")->valuestring, "generate") != 0) continue;
    const char *cname = cJSON_GetObjectItem(c, "name")->valuestring;
    const cJSON *kw = cJSON_GetObjectItem(c, "generate_kwargs");
    clf_array in[2], expect, got;
    const size_t n_in = read_arrays(cJSON_GetObjectItem(c, "inputs"), case_dir, in, NULL, 2);
    read_arrays(cJSON_GetObjectItem(c, "outputs"), case_dir, &expect, NULL, 1);
    const clf_array *ids = !strcmp(in[0].name, "input_ids") ? &in[0] : &in[1];
    const clf_array *mask = n_in < 2 ? NULL : ids == &in[0] ? &in[1] : &in[0];
    clf_generate_options o;
    clf_generate_options_init(&o);
    const cJSON *mnt = cJSON_GetObjectItem(kw, "max_new_tokens"), *nb = cJSON_GetObjectItem(kw, "num_beams");
    if (cJSON_IsNumber(mnt)) o.max_new_tokens = (size_t)mnt->valuedouble;
    if (cJSON_IsNumber(nb)) o.num_beams = (size_t)nb->valuedouble;
    TH_OK(clf_model_generate(m, ids, mask, &o, &got));
    ck_assert_int_eq(got.dtype, CLF_I64);
    ck_assert_int_eq(got.ndim, 2);
    ck_assert_str_eq(got.name, "sequences");
    ck_assert_msg(got.shape[0] == expect.shape[0] && got.shape[1] == expect.shape[1],
                  "%s %s: sequences [%zu, %zu], expected [%zu, %zu]", what, cname, got.shape[0], got.shape[1],
                  expect.shape[0], expect.shape[1]);
    const int64_t *g = got.data, *x = expect.data;
    for (size_t i = 0; i < clf_array_numel(&expect); i++)
      ck_assert_msg(g[i] == x[i], "%s %s: token %zu of row %zu is %lld, expected %lld", what, cname,
                    i % expect.shape[1], i / expect.shape[1], (long long)g[i], (long long)x[i]);
    clf_array_free(&got);
    clf_array_free(&expect);
    for (size_t i = 0; i < n_in; i++) clf_array_free(&in[i]);
    n_cases++;
  }
  ck_assert_msg(n_cases > 0, "%s has no generate case", what);
  cJSON_Delete(cases);
}

void check_differs(const char *name, const char *cname, const char *key, const char *json, const char *key2,
                          const char *json2) {
  char *dir = copy_fixture(name, NULL, NULL, 0, NULL), src[1024], path[1100];
  snprintf(src, sizeof src, "%s/%s", fixtures(), name);
  set_config(dir, key, json);
  if (key2) set_config(dir, key2, json2);
  clf_model *m = NULL;
  clf_array ids, want, got;
  TH_OK(clf_model_load(th_ctx, dir, &m));
  snprintf(path, sizeof path, "%s/%s.input_ids.npy", src, cname);
  TH_OK(clf_npy_read(path, &ids));
  snprintf(path, sizeof path, "%s/%s.logits.npy", src, cname);
  TH_OK(clf_npy_read(path, &want));
  snprintf(ids.name, sizeof ids.name, "input_ids");
  const char *logits = "logits";
  TH_OK(clf_model_run(m, &ids, 1, &logits, 1, &got));
  ck_assert_uint_eq(clf_array_numel(&got), clf_array_numel(&want));
  double err = 0, scale = 1;
  for (size_t i = 0; i < clf_array_numel(&want); i++) {
    const double g = ((float *)got.data)[i], w = ((float *)want.data)[i];
    err = fabs(g - w) > err ? fabs(g - w) : err;
    scale = fabs(w) > scale ? fabs(w) : scale;
  }
  ck_assert_msg(err > 1e-2 * scale, "%s with %s %s: max error %g of %g, the setting changed nothing", name, key, json,
                err, scale);
  clf_array_free(&ids), clf_array_free(&want), clf_array_free(&got);
  clf_model_destroy(m);
  remove_dir(dir);
}

void check_same_with(const char *name, const char *key, const char *json) {
  char *dir = copy_fixture(name, NULL, NULL, 0, NULL), src[1024], what[256];
  snprintf(src, sizeof src, "%s/%s", fixtures(), name);
  snprintf(what, sizeof what, "%s with %s %s", name, key, json);
  set_config(dir, key, json);
  clf_model *m = NULL;
  TH_OK(clf_model_load(th_ctx, dir, &m));
  check_forward_cases(m, src, 1e-4, what);
  clf_model_destroy(m);
  remove_dir(dir);
}

void load_fails2(const char *name, const char *key, const char *json, const char *key2, const char *json2,
                 clf_status want, const char *msg) {
  char *dir = copy_fixture(name, NULL, NULL, 0, NULL);
  clf_model *m = NULL;
  set_config(dir, key, json);
  if (key2) set_config(dir, key2, json2);
  TH_FAILS(clf_model_load(th_ctx, dir, &m), want, msg);
  ck_assert_ptr_null(m);
  remove_dir(dir);
}

void load_fails(const char *name, const char *key, const char *json, clf_status want, const char *msg) {
  load_fails2(name, key, json, NULL, NULL, want, msg);
}
