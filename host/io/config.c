/* config.c - config.json (+ generation_config.json over it) parsed with
 * cJSON, and the typed getters the models read their hyper-parameters with.
 * Every error names the key and the file the value came from. */
#include "config.h"
#include "base/file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct clf__config {
  cJSON *merged;        /* config.json with generation_config.json's keys over it */
  cJSON *gen;           /* generation_config.json, or NULL: where a key came from */
  char *config_path;    /* DIR/config.json */
  char *gen_path;       /* DIR/generation_config.json */
};

/* Reads and parses a JSON object.  *out stays NULL when the file is absent
 * and `optional`. */
static clf_status cfg_read(clf_context *ctx, const char *path, int optional, cJSON **out) {
  *out = NULL;
  struct stat sb;
  if (optional && stat(path, &sb) != 0 && errno == ENOENT) return CLF_OK;
  char *buf;
  size_t n;
  clf_status st = clf__read_file(ctx, "config", path, CLF__JSON_CONFIG_MAX_BYTES, &buf, &n);
  if (st != CLF_OK) return st;
  if (memchr(buf, 0, n)) {
    free(buf);
    return clf__fail(ctx, CLF_E_FORMAT, "config: %s is not valid JSON (it holds a NUL byte)", path);
  }
  const char *end = NULL;
  cJSON *j = cJSON_ParseWithLengthOpts(buf, n + 1, &end, 1);
  if (!j) {
    size_t at = (end && end >= buf && end <= buf + n) ? (size_t)(end - buf) : 0;
    const char *e = cJSON_GetErrorPtr();
    if (e && e >= buf && e <= buf + n) at = (size_t)(e - buf);
    free(buf);
    return clf__fail(ctx, CLF_E_FORMAT, "config: %s is not valid JSON (error near byte %zu)", path, at);
  }
  free(buf);
  if (!cJSON_IsObject(j)) {
    cJSON_Delete(j);
    return clf__fail(ctx, CLF_E_FORMAT, "config: %s does not hold a JSON object", path);
  }
  *out = j;
  return CLF_OK;
}

void clf__config_free(clf__config *c) {
  if (!c) return;
  cJSON_Delete(c->merged);
  cJSON_Delete(c->gen);
  free(c->config_path);
  free(c->gen_path);
  free(c);
}

static char *cfg_join(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s%s%s", dir, (dir[0] && dir[strlen(dir) - 1] == '/') ? "" : "/", name);
  return p;
}

clf_status clf__config_load(clf_context *ctx, const char *model_dir, clf__config **out) {
  if (!out) return clf__fail(ctx, CLF_E_INVALID_ARG, "clf__config_load: out is NULL");
  *out = NULL;
  if (!model_dir) return clf__fail(ctx, CLF_E_INVALID_ARG, "clf__config_load: model_dir is NULL");
  clf__config *c = calloc(1, sizeof(*c));
  if (!c || !(c->config_path = cfg_join(model_dir, "config.json")) ||
      !(c->gen_path = cfg_join(model_dir, "generation_config.json"))) {
    clf__config_free(c);
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "config: out of host memory");
  }
  clf_status st = cfg_read(ctx, c->config_path, 0, &c->merged);
  if (st == CLF_OK) st = cfg_read(ctx, c->gen_path, 1, &c->gen);
  for (cJSON *g = c->gen ? c->gen->child : NULL; st == CLF_OK && g; g = g->next) {
    cJSON *dup = cJSON_Duplicate(g, 1);
    int ok = dup != NULL;
    if (ok && cJSON_GetObjectItemCaseSensitive(c->merged, g->string))
      ok = cJSON_ReplaceItemInObjectCaseSensitive(c->merged, g->string, dup);
    else if (ok)
      ok = cJSON_AddItemToObject(c->merged, g->string, dup);
    if (!ok) {
      cJSON_Delete(dup);
      st = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "config: out of host memory merging %s", c->gen_path);
    }
  }
  if (st != CLF_OK) {
    clf__config_free(c);
    return st;
  }
  *out = c;
  return CLF_OK;
}

clf_status clf__config_parse(clf_context *ctx, const char *label, const char *json, clf__config **out) {
  *out = NULL;
  clf__config *c = calloc(1, sizeof(*c));
  if (!c || !(c->config_path = strdup(label)) || !(c->gen_path = strdup(label))) {
    clf__config_free(c);
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "config: out of host memory");
  }
  c->merged = cJSON_Parse(json);
  if (!cJSON_IsObject(c->merged)) {
    clf__config_free(c);
    return clf__fail(ctx, CLF_E_FORMAT, "config: %s is not a JSON object", label);
  }
  *out = c;
  return CLF_OK;
}

const struct cJSON *clf__config_json(const clf__config *c) { return c ? c->merged : NULL; }

static const cJSON *cfg_item(const clf__config *c, const char *key) {
  if (!c || !key) return NULL;
  return cJSON_GetObjectItemCaseSensitive(c->merged, key);
}

int clf__config_has(const clf__config *c, const char *key) {
  const cJSON *j = cfg_item(c, key);
  return j && !cJSON_IsNull(j);
}

/* The file a key's value comes from. */
static const char *cfg_src(const clf__config *c, const char *key) {
  return (c->gen && cJSON_GetObjectItemCaseSensitive(c->gen, key)) ? c->gen_path : c->config_path;
}

static const char *cfg_type(const cJSON *j) {
  if (cJSON_IsNull(j)) return "null";
  if (cJSON_IsBool(j)) return "a boolean";
  if (cJSON_IsNumber(j)) return "a number";
  if (cJSON_IsString(j)) return "a string";
  if (cJSON_IsArray(j)) return "a list";
  return "an object";
}

static clf_status cfg_wrong(clf_context *ctx, const clf__config *c, const char *key, const cJSON *j,
                            const char *want) {
  return clf__fail(ctx, CLF_E_FORMAT, "config: key \"%s\" in %s is %s, expected %s", key, cfg_src(c, key),
                   cfg_type(j), want);
}

/* Looks a key up: CLF_OK with *j set, or (when absent or null) CLF_OK with
 * *j NULL if `optional`, else an error naming the key. */
static clf_status cfg_lookup(clf_context *ctx, const clf__config *c, const char *key, int optional,
                             const cJSON **j) {
  *j = NULL;
  if (!c) return clf__fail(ctx, CLF_E_INVALID_ARG, "config: config is NULL (reading \"%s\")", key ? key : "?");
  if (!key) return clf__fail(ctx, CLF_E_INVALID_ARG, "config: key is NULL");
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->merged, key);
  if (v && !cJSON_IsNull(v)) {
    *j = v;
    return CLF_OK;
  }
  if (optional) return CLF_OK;
  if (v) return cfg_wrong(ctx, c, key, v, "a value");
  return clf__fail(ctx, CLF_E_FORMAT, "config: key \"%s\" missing in %s", key, c->config_path);
}

/* An integral JSON number within the range of long. */
static int cfg_as_long(const cJSON *j, long *out) {
  if (!cJSON_IsNumber(j)) return 0;
  double v = j->valuedouble;
  if (!isfinite(v) || floor(v) != v || v < -9.2233720368547748e18 || v >= 9.2233720368547748e18) return 0;
  *out = (long)v;
  return 1;
}

/* The typed values: a converter (1 when the JSON value has the type, then
 * written to out), the size of out, and what the messages call the type. */
typedef struct cfg_kind {
  int (*convert)(const cJSON *j, void *out);
  size_t size;
  const char *want;
} cfg_kind;

static int cfg_to_long(const cJSON *j, void *out) { return cfg_as_long(j, out); }
static int cfg_to_double(const cJSON *j, void *out) {
  if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble)) return 0;
  *(double *)out = j->valuedouble;
  return 1;
}
static int cfg_to_bool(const cJSON *j, void *out) {
  if (!cJSON_IsBool(j)) return 0;
  *(int *)out = cJSON_IsTrue(j) ? 1 : 0;
  return 1;
}
static int cfg_to_str(const cJSON *j, void *out) {
  if (!cJSON_IsString(j)) return 0;
  *(const char **)out = j->valuestring;
  return 1;
}

static const cfg_kind cfg_long_kind = {cfg_to_long, sizeof(long), "an integer"};
static const cfg_kind cfg_double_kind = {cfg_to_double, sizeof(double), "a number"};
static const cfg_kind cfg_bool_kind = {cfg_to_bool, sizeof(int), "true or false"};
static const cfg_kind cfg_str_kind = {cfg_to_str, sizeof(const char *), "a string"};

/* The value of `key` as `kind` into out; *dflt when it is absent or null
 * and dflt is not NULL, an error naming the key when dflt is NULL. */
static clf_status cfg_get(clf_context *ctx, const clf__config *c, const char *key, const cfg_kind *kind,
                          const void *dflt, void *out) {
  const cJSON *j;
  clf_status st = cfg_lookup(ctx, c, key, dflt != NULL, &j);
  if (st != CLF_OK) return st;
  if (!out) return clf__fail(ctx, CLF_E_INVALID_ARG, "config: out is NULL (reading \"%s\")", key);
  if (!j) {
    memcpy(out, dflt, kind->size);
    return CLF_OK;
  }
  if (!kind->convert(j, out)) return cfg_wrong(ctx, c, key, j, kind->want);
  return CLF_OK;
}

clf_status clf__config_int(clf_context *ctx, const clf__config *c, const char *key, long *out) {
  return cfg_get(ctx, c, key, &cfg_long_kind, NULL, out);
}
clf_status clf__config_float(clf_context *ctx, const clf__config *c, const char *key, double *out) {
  return cfg_get(ctx, c, key, &cfg_double_kind, NULL, out);
}
clf_status clf__config_bool(clf_context *ctx, const clf__config *c, const char *key, int *out) {
  return cfg_get(ctx, c, key, &cfg_bool_kind, NULL, out);
}
clf_status clf__config_str(clf_context *ctx, const clf__config *c, const char *key, const char **out) {
  return cfg_get(ctx, c, key, &cfg_str_kind, NULL, out);
}
clf_status clf__config_int_or(clf_context *ctx, const clf__config *c, const char *key, long dflt, long *out) {
  return cfg_get(ctx, c, key, &cfg_long_kind, &dflt, out);
}
clf_status clf__config_float_or(clf_context *ctx, const clf__config *c, const char *key, double dflt,
                                double *out) {
  return cfg_get(ctx, c, key, &cfg_double_kind, &dflt, out);
}
clf_status clf__config_bool_or(clf_context *ctx, const clf__config *c, const char *key, int dflt, int *out) {
  return cfg_get(ctx, c, key, &cfg_bool_kind, &dflt, out);
}
clf_status clf__config_str_or(clf_context *ctx, const clf__config *c, const char *key, const char *dflt,
                              const char **out) {
  return cfg_get(ctx, c, key, &cfg_str_kind, &dflt, out);
}

/* Appends v to out (when out is not NULL), failing past cap. */
static clf_status cfg_push(clf_context *ctx, const clf__config *c, const char *key, long v, long *out, size_t cap,
                           size_t *n) {
  if (out) {
    if (*n >= cap)
      return clf__fail(ctx, CLF_E_FORMAT, "config: key \"%s\" in %s has more than %zu values", key,
                       cfg_src(c, key), cap);
    out[*n] = v;
  }
  (*n)++;
  return CLF_OK;
}

/* Appends the integers of the JSON array `list` (each at least `min`) to
 * out; an error naming key's whole value j, as `want`, for any other. */
static clf_status cfg_push_ints(clf_context *ctx, const clf__config *c, const char *key, const cJSON *j,
                                const cJSON *list, long min, const char *want, long *out, size_t cap, size_t *n) {
  const cJSON *e;
  cJSON_ArrayForEach(e, list) {
    long v;
    if (!cfg_as_long(e, &v) || v < min) return cfg_wrong(ctx, c, key, j, want);
    clf_status st = cfg_push(ctx, c, key, v, out, cap, n);
    if (st != CLF_OK) return st;
  }
  return CLF_OK;
}

/* The start of a list getter: *n = 0 and *j the value, NULL when absent. */
static clf_status cfg_list_lookup(clf_context *ctx, const clf__config *c, const char *key, size_t *n,
                                  const cJSON **j) {
  clf_status st = cfg_lookup(ctx, c, key, 1, j);
  if (st != CLF_OK) return st;
  if (!n) return clf__fail(ctx, CLF_E_INVALID_ARG, "config: n is NULL (reading \"%s\")", key);
  *n = 0;
  return CLF_OK;
}

clf_status clf__config_int_list(clf_context *ctx, const clf__config *c, const char *key, long *out, size_t cap,
                                size_t *n) {
  const cJSON *j;
  clf_status st = cfg_list_lookup(ctx, c, key, n, &j);
  if (st != CLF_OK || !j) return st;
  long v;
  if (cfg_as_long(j, &v)) return cfg_push(ctx, c, key, v, out, cap, n);
  if (!cJSON_IsArray(j)) return cfg_wrong(ctx, c, key, j, "an integer or a list of integers");
  return cfg_push_ints(ctx, c, key, j, j, LONG_MIN, "a list of integers only", out, cap, n);
}

clf_status clf__config_int_lists(clf_context *ctx, const clf__config *c, const char *key, long *out, size_t cap,
                                 size_t *n) {
  const cJSON *j;
  clf_status st = cfg_list_lookup(ctx, c, key, n, &j);
  if (st != CLF_OK || !j) return st;
  if (!cJSON_IsArray(j)) return cfg_wrong(ctx, c, key, j, "a list of lists of integers");
  const cJSON *inner;
  cJSON_ArrayForEach(inner, j) {
    if (!cJSON_IsArray(inner)) return cfg_wrong(ctx, c, key, j, "a list of lists of integers");
    st = cfg_push_ints(ctx, c, key, j, inner, 0, "a list of lists of non-negative integers", out, cap, n);
    if (st == CLF_OK) st = cfg_push(ctx, c, key, -1, out, cap, n);
    if (st != CLF_OK) return st;
  }
  return CLF_OK;
}
