/* gguf_model.c - a GGUF file as a model: found at a path, its metadata
 * turned into the config.json transformers 4.46's GGUF loader would make
 * (integrations/ggml.py's GGUF_CONFIG_MAPPING), its tensor names into the
 * Hugging Face ones (GGUF_TENSOR_MAPPING), each by the rows of the
 * architecture that the family above hands down: this file names none. */
#include "gguf_model.h"

#include "base/file.h"
#include "base/status.h"

#include "gguf_types.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "name-00001-of-00003.gguf": one part of a split model. */
static int gm_is_split(const char *name) {
  const char *s = strstr(name, "-of-");
  if (!s || s - name < 6) return 0;
  for (const char *p = s - 5; p < s; p++)
    if (*p < '0' || *p > '9') return 0;
  return s[-6] == '-' && strspn(s + 4, "0123456789") == 5 && strcmp(s + 9, ".gguf") == 0;
}

static clf_status gm_split_error(clf_context *ctx, const char *path) {
  return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s is one part of a split GGUF model: merge the parts into one file first "
                   "(llama-gguf-split --merge)", path);
}

static int gm_ends_with(const char *s, const char *end) {
  size_t n = strlen(s), m = strlen(end);
  return n > m && strcmp(s + n - m, end) == 0;
}

static char *gm_join(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s%s%s", dir, (dir[0] && dir[strlen(dir) - 1] == '/') ? "" : "/", name);
  return p;
}

/* The one *.gguf regular file in dir, or *file NULL when there is none. */
static clf_status gm_scan(clf_context *ctx, const char *dir, char **file) {
  DIR *d = opendir(dir);
  if (!d) return CLF_OK;
  char *found = NULL;
  clf_status st = CLF_OK;
  for (struct dirent *e; st == CLF_OK && (e = readdir(d));) {
    if (!gm_ends_with(e->d_name, ".gguf")) continue;
    char *p = gm_join(dir, e->d_name);
    if (!p)
      st = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory");
    else if (clf__is_file(p) && found)
      st = clf__fail(ctx, CLF_E_FORMAT, "%s holds several GGUF files (%s, %s, ...) and no config.json: name the "
                     "file to load", dir, strrchr(found, '/') + 1, e->d_name);
    else if (clf__is_file(p))
      found = p, p = NULL;
    free(p);
  }
  closedir(d);
  if (st == CLF_OK && found && gm_is_split(strrchr(found, '/') + 1)) st = gm_split_error(ctx, found);
  if (st == CLF_OK) *file = found;
  else free(found);
  return st;
}

clf_status clf__gguf_model_file(clf_context *ctx, const char *path, char **file) {
  *file = NULL;
  if (clf__is_file(path)) {
    const char *base = strrchr(path, '/');
    if (gm_is_split(base ? base + 1 : path)) return gm_split_error(ctx, path);
    return (*file = strdup(path)) ? CLF_OK : clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory");
  }
  char *cfg = gm_join(path, "config.json");
  if (!cfg) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory");
  const int hf = clf__path_present(cfg);
  free(cfg);
  return hf ? CLF_OK : gm_scan(ctx, path, file);
}

/* ---- metadata ---------------------------------------------------------- */

/* What a key must hold: kinds of value, named in errors. */
enum { GM_INT, GM_FLOAT, GM_STR };
static const char *const gm_kind_names[] = {"an integer", "a number", "a string"};

static int gm_is_int_type(uint32_t t) {
  return t == CLF_GGUF_U8 || t == CLF_GGUF_I8 || t == CLF_GGUF_U16 || t == CLF_GGUF_I16 || t == CLF_GGUF_U32 ||
         t == CLF_GGUF_I32 || t == CLF_GGUF_U64 || t == CLF_GGUF_I64;
}

/* Key `key` (index i) holds one value of `kind`: integers of any width for
 * GM_INT, those and f32/f64 for GM_FLOAT.  Otherwise CLF_E_FORMAT naming
 * the key, its type and the kind (an array: CLF_E_UNSUPPORTED, a value per
 * layer). */
static clf_status gm_typed(clf_context *ctx, const clf_gguf *g, const char *file, const char *key, long i,
                           int kind) {
  clf_gguf_kv kv;
  if (clf_gguf_kv_at(g, (size_t)i, &kv) != CLF_OK)
    return clf__fail(ctx, CLF_E_FORMAT, "%s: metadata %s cannot be read", file, key);
  if (kv.type == CLF_GGUF_ARRAY && kind != GM_STR)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: metadata %s is an array (a value per layer is not supported)",
                     file, key);
  const int ok = kind == GM_STR    ? kv.type == CLF_GGUF_STRING
                 : kind == GM_INT ? gm_is_int_type(kv.type)
                                  : gm_is_int_type(kv.type) || kv.type == CLF_GGUF_F32 || kv.type == CLF_GGUF_F64;
  if (!ok)
    return clf__fail(ctx, CLF_E_FORMAT, "%s: metadata %s is of type %s, expected %s", file, key,
                     clf__gguf_value_type_name(kv.type), gm_kind_names[kind]);
  return CLF_OK;
}

/* Integer `key` in lo..hi, or dflt when absent (*present 0). */
static clf_status gm_int(clf_context *ctx, const clf_gguf *g, const char *file, const char *key, int64_t lo,
                         int64_t hi, int64_t dflt, int64_t *out, int *present) {
  *out = dflt;
  const long i = clf_gguf_find(g, key);
  if (present) *present = i >= 0;
  if (i < 0) return CLF_OK;
  clf_status st = gm_typed(ctx, g, file, key, i, GM_INT);
  if (st != CLF_OK) return st;
  if (clf_gguf_get_int(g, (size_t)i, 0, out) != CLF_OK) /* a u64 past INT64_MAX */
    return clf__fail(ctx, CLF_E_FORMAT, "%s: metadata %s is too large (at most %lld)", file, key, (long long)hi);
  if (*out < lo)
    return clf__fail(ctx, CLF_E_FORMAT, "%s: metadata %s = %lld is too small (at least %lld)", file, key,
                     (long long)*out, (long long)lo);
  if (*out > hi)
    return clf__fail(ctx, CLF_E_FORMAT, "%s: metadata %s = %lld is too large (at most %lld)", file, key,
                     (long long)*out, (long long)hi);
  return CLF_OK;
}

/* A number's range: above lo (or at it, lo_in), at most hi, finite; `what`
 * says so in errors. */
typedef struct gm_range {
  double lo, hi;
  int lo_in;
  const char *what;
} gm_range;

static const gm_range gm_positive = {0, HUGE_VAL, 0, "a finite positive number"};
static const gm_range gm_epsilon = {0, 1, 0, "a finite number in (0, 1]"};
static const gm_range gm_factor = {1, HUGE_VAL, 1, "a finite number of at least 1"};

/* Number `key` (index i) within r. */
static clf_status gm_float(clf_context *ctx, const clf_gguf *g, const char *file, const char *key, long i,
                           const gm_range *r, double *out) {
  clf_status st = gm_typed(ctx, g, file, key, i, GM_FLOAT);
  if (st != CLF_OK) return st;
  if (clf_gguf_get_float(g, (size_t)i, 0, out) != CLF_OK)
    return clf__fail(ctx, CLF_E_FORMAT, "%s: metadata %s cannot be read as a number", file, key);
  const double v = *out;
  if (!isfinite(v) || v > r->hi || (r->lo_in ? v < r->lo : v <= r->lo))
    return clf__fail(ctx, CLF_E_FORMAT, "%s: metadata %s = %g is not %s", file, key, v, r->what);
  return CLF_OK;
}

/* String `key`: NULL when absent; CLF_E_FORMAT when of another type. */
static clf_status gm_string(clf_context *ctx, const clf_gguf *g, const char *file, const char *key,
                            const char **out) {
  *out = NULL;
  const long i = clf_gguf_find(g, key);
  if (i < 0) return CLF_OK;
  clf_status st = gm_typed(ctx, g, file, key, i, GM_STR);
  if (st == CLF_OK && clf_gguf_get_str(g, (size_t)i, 0, out, NULL) != CLF_OK)
    st = clf__fail(ctx, CLF_E_FORMAT, "%s: metadata %s cannot be read as a string", file, key);
  return st;
}

int clf__gguf_meta_int(clf_context *ctx, const clf_gguf *g, const char *file, const char *key, int64_t dflt,
                       int64_t *out) {
  return gm_int(ctx, g, file, key, INT64_MIN, INT64_MAX, dflt, out, NULL) == CLF_OK ? 0 : -1;
}

/* The tokenizer's ids, after every architecture's own keys (the bounds
 * this reader always had). */
static const clf__gguf_key gm_token_ids[] = {
    CLF__GGUF_INT_KEY("tokenizer.ggml.bos_token_id", "bos_token_id", 0, 0, 1LL << 40),
    CLF__GGUF_INT_KEY("tokenizer.ggml.eos_token_id", "eos_token_id", 0, 0, 1LL << 40),
    CLF__GGUF_INT_KEY("tokenizer.ggml.padding_token_id", "pad_token_id", 0, 0, 1LL << 40),
};

/* One mapped key into cfg, of its type and in its range. */
static clf_status gm_put(clf_context *ctx, const clf_gguf *g, const char *file, const char *arch,
                         const clf__gguf_key *k, cJSON *cfg) {
  char key[160];
  snprintf(key, sizeof key, k->gguf, arch);
  const long i = clf_gguf_find(g, key);
  if (i < 0)
    return k->required ? clf__fail(ctx, CLF_E_FORMAT, "%s: metadata %s is missing", file, key) : CLF_OK;
  double v = 0;
  int64_t n = 0;
  const gm_range *range = k->kind == CLF__GGUF_POSITIVE ? &gm_positive : k->kind == CLF__GGUF_EPSILON ? &gm_epsilon : NULL;
  clf_status st = range ? gm_float(ctx, g, file, key, i, range, &v) : gm_int(ctx, g, file, key, k->lo, k->hi, 0, &n, NULL);
  if (st != CLF_OK) return st;
  if (!cJSON_AddNumberToObject(cfg, k->hf, range ? v : (double)n))
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "config: out of host memory");
  return CLF_OK;
}

/* What the config cannot say: RoPE beyond linear scaling, partial rotary
 * dims but where the architecture takes them (CLF__GGUF_PARTIAL: then
 * partial_rotary_factor, rope.dimension_count / head size).  (RoPE
 * frequency factors, rope_freqs.weight, are a tensor the model reads, where
 * the architecture's rows name it.) */
static clf_status gm_rope(clf_context *ctx, const clf_gguf *g, const char *file, const char *arch, unsigned config,
                          cJSON *cfg) {
  char key[160];
  const char *type = NULL;
  clf_status st;
  snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
  if ((st = gm_string(ctx, g, file, key, &type)) != CLF_OK) return st;
  int64_t rot = 0, heads = 0, dim = 0, klen = 0;
  int has_rot = 0;
  snprintf(key, sizeof key, "%s.rope.dimension_count", arch);
  if ((st = gm_int(ctx, g, file, key, 1, 4096, 0, &rot, &has_rot)) != CLF_OK) return st;
  if (has_rot) {
    snprintf(key, sizeof key, "%s.attention.head_count", arch);
    clf__gguf_meta_int(NULL, g, file, key, 0, &heads);
    snprintf(key, sizeof key, "%s.embedding_length", arch);
    clf__gguf_meta_int(NULL, g, file, key, 0, &dim);
    snprintf(key, sizeof key, "%s.attention.key_length", arch);
    clf__gguf_meta_int(NULL, g, file, key, heads > 0 ? dim / heads : 0, &klen);
    if (rot != klen && (!(config & CLF__GGUF_PARTIAL) || rot > klen))
      return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: %s.rope.dimension_count %lld is not the head size %lld (partial "
                       "rotary embeddings are not supported%s)", file, arch, (long long)rot, (long long)klen,
                       rot > klen ? "; nor more than the head" : " for this architecture");
    if (rot != klen && !cJSON_AddNumberToObject(cfg, "partial_rotary_factor", (double)rot / (double)klen))
      return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "config: out of host memory");
  }
  if (!type || strcmp(type, "none") == 0) return CLF_OK;
  if (strcmp(type, "linear") != 0)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: %s.rope.scaling.type \"%s\" is not supported (none, linear)", file,
                     arch, type);
  snprintf(key, sizeof key, "%s.rope.scaling.factor", arch);
  const long i = clf_gguf_find(g, key);
  double f = 0;
  if (i < 0) return clf__fail(ctx, CLF_E_FORMAT, "%s: linear RoPE scaling without a number %s", file, key);
  if ((st = gm_float(ctx, g, file, key, i, &gm_factor, &f)) != CLF_OK) return st;
  cJSON *rs = cJSON_AddObjectToObject(cfg, "rope_scaling");
  if (!rs || !cJSON_AddStringToObject(rs, "type", "linear") || !cJSON_AddNumberToObject(rs, "factor", f))
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "config: out of host memory");
  return CLF_OK;
}

/* head_dim from attention.key_length where it is not hidden / heads. */
static clf_status gm_head_dim(clf_context *ctx, const clf_gguf *g, const char *file, const clf__gguf_arch *a,
                              cJSON *cfg) {
  const char *arch = a->arch;
  char key[160];
  int64_t k = 0, v = 0;
  clf_status st;
  snprintf(key, sizeof key, "%s.attention.key_length", arch);
  if ((st = gm_int(ctx, g, file, key, 1, 4096, 0, &k, NULL)) != CLF_OK) return st;
  snprintf(key, sizeof key, "%s.attention.value_length", arch);
  if ((st = gm_int(ctx, g, file, key, 1, 4096, k, &v, NULL)) != CLF_OK) return st;
  if (v != k)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: %s.attention.value_length %lld differs from key_length %lld", file,
                     arch, (long long)v, (long long)k);
  /* the sizes from the metadata, not from cfg: an architecture's rows may
   * give them config names other than hidden_size and num_attention_heads */
  int64_t dim = 0, heads = 0;
  snprintf(key, sizeof key, "%s.embedding_length", arch);
  clf__gguf_meta_int(NULL, g, file, key, 0, &dim);
  snprintf(key, sizeof key, "%s.attention.head_count", arch);
  clf__gguf_meta_int(NULL, g, file, key, 0, &heads);
  if (k <= 0 || heads <= 0 || k * heads == dim) return CLF_OK;
  if (a->config & CLF__GGUF_HEAD_DIM)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: %s with a head size (%lld) other than hidden / heads", file, arch,
                     (long long)k);
  return cJSON_AddNumberToObject(cfg, "head_dim", (double)k) ? CLF_OK
                                                             : clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "config: out of host memory");
}

/* vocab_size, when {arch}.vocab_size is absent: the token list's length. */
static clf_status gm_vocab(clf_context *ctx, const clf_gguf *g, const char *file, cJSON *cfg) {
  if (cJSON_GetObjectItemCaseSensitive(cfg, "vocab_size")) return CLF_OK;
  const long i = clf_gguf_find(g, "tokenizer.ggml.tokens");
  clf_gguf_kv kv;
  uint64_t n = 0;
  if (i >= 0 && clf_gguf_kv_at(g, (size_t)i, &kv) == CLF_OK && kv.type == CLF_GGUF_ARRAY) n = kv.count;
  clf_gguf_tensor t;
  const long e = clf_gguf_find_tensor(g, "token_embd.weight");
  if (!n && e >= 0 && clf_gguf_tensor_at(g, (size_t)e, &t) == CLF_OK && t.ndim == 2) n = t.shape[0];
  if (!n) return clf__fail(ctx, CLF_E_FORMAT, "%s: no vocabulary size: no vocab_size, tokenizer.ggml.tokens or "
                           "token_embd.weight", file);
  return cJSON_AddNumberToObject(cfg, "vocab_size", (double)n) ? CLF_OK
                                                               : clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "config: out of host memory");
}

/* The fixed entries of a's config (a JSON object) into cfg. */
static clf_status gm_fixed(clf_context *ctx, const clf__gguf_arch *a, cJSON *cfg) {
  cJSON *fixed = a->fixed ? cJSON_Parse(a->fixed) : NULL, *e;
  if (a->fixed && !cJSON_IsObject(fixed)) {
    cJSON_Delete(fixed);
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "config: out of host memory (or %s's fixed entries are not an object)",
                     a->arch);
  }
  while (fixed && (e = cJSON_DetachItemViaPointer(fixed, fixed->child)) != NULL) {
    const char *k = e->string;
    e->string = NULL;
    const int ok = cJSON_AddItemToObject(cfg, k, e);
    cJSON_free((char *)k);
    if (!ok) {
      cJSON_Delete(e), cJSON_Delete(fixed);
      return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "config: out of host memory");
    }
  }
  cJSON_Delete(fixed);
  return CLF_OK;
}

static clf_status gm_fill(clf_context *ctx, const clf_gguf *g, const char *file, const clf__gguf_arch *a, cJSON *cfg) {
  clf_status st;
  const char *cls[] = {a->hf_class};
  cJSON *archs = cJSON_CreateStringArray(cls, 1);
  if (!archs || !cJSON_AddItemToObject(cfg, "architectures", archs) ||
      !cJSON_AddStringToObject(cfg, "model_type", a->arch) ||
      !cJSON_AddBoolToObject(cfg, "tie_word_embeddings", clf_gguf_find_tensor(g, "output.weight") < 0)) {
    if (archs && !cJSON_GetObjectItemCaseSensitive(cfg, "architectures")) cJSON_Delete(archs);
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "config: out of host memory");
  }
  for (size_t k = 0; k < a->n_keys; k++)
    if ((st = gm_put(ctx, g, file, a->arch, &a->keys[k], cfg)) != CLF_OK) return st;
  for (size_t k = 0; k < sizeof gm_token_ids / sizeof gm_token_ids[0]; k++)
    if ((st = gm_put(ctx, g, file, a->arch, &gm_token_ids[k], cfg)) != CLF_OK) return st;
  if ((st = gm_fixed(ctx, a, cfg)) != CLF_OK) return st;
  if ((a->config & CLF__GGUF_ROPE) &&
      ((st = gm_head_dim(ctx, g, file, a, cfg)) != CLF_OK || (st = gm_rope(ctx, g, file, a->arch, a->config, cfg)) != CLF_OK))
    return st;
  return gm_vocab(ctx, g, file, cfg);
}

/* The row of `arch`, or NULL. */
static const clf__gguf_arch *gm_find(const clf__gguf_arch *const *archs, size_t n, const char *arch) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(archs[i]->arch, arch) == 0) return archs[i];
  return NULL;
}

static clf_status gm_unsupported(clf_context *ctx, const char *file, const char *arch,
                                 const clf__gguf_arch *const *archs, size_t n) {
  char list[512] = "";
  size_t used = 0;
  for (size_t i = 0; i < n && used < sizeof list; i++)
    used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", archs[i]->arch);
  return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: architecture \"%s\" is not supported (supported: %s)", file, arch,
                   list);
}

clf_status clf__gguf_config(clf_context *ctx, const clf_gguf *g, const char *file, const clf__gguf_arch *const *archs,
                            size_t n, clf__config **out) {
  *out = NULL;
  const char *arch = NULL;
  clf_status st = gm_string(ctx, g, file, "general.architecture", &arch);
  if (st != CLF_OK) return st;
  if (!arch) return clf__fail(ctx, CLF_E_FORMAT, "%s: metadata general.architecture (a string) is missing", file);
  const clf__gguf_arch *a = gm_find(archs, n, arch);
  if (!a) return gm_unsupported(ctx, file, arch, archs, n);
  cJSON *cfg = cJSON_CreateObject();
  if (!cfg) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "config: out of host memory");
  st = gm_fill(ctx, g, file, a, cfg);
  char *text = st == CLF_OK ? cJSON_PrintUnformatted(cfg) : NULL;
  cJSON_Delete(cfg);
  if (st == CLF_OK && !text) st = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "config: out of host memory");
  char label[512];
  snprintf(label, sizeof label, "%s's metadata", file);
  if (st == CLF_OK) st = clf__config_parse(ctx, label, text, out);
  free(text);
  return st;
}

/* ---- tensor names ------------------------------------------------------ */

/* "blk.N.PART.weight|bias": the layer's digits (*digits of them) and PART
 * (up to *dot); NULL when name is not so. */
static const char *gm_layer_part(const char *name, size_t *digits, const char **dot) {
  *digits = strncmp(name, "blk.", 4) == 0 ? strspn(name + 4, "0123456789") : 0;
  if (*digits == 0 || *digits > 6 || name[4 + *digits] != '.') return NULL;
  const char *part = name + 5 + *digits;
  *dot = strrchr(part, '.');
  if (!*dot || (strcmp(*dot, ".weight") != 0 && strcmp(*dot, ".bias") != 0)) return NULL;
  return part;
}

/* Whether s[0..n) is the whole of `word`. */
static int gm_is(const char *s, size_t n, const char *word) { return word && strlen(word) == n && !strncmp(s, word, n); }

int clf__gguf_hf_name(const clf__gguf_arch *a, const char *name, char *buf, size_t len, unsigned *flags) {
  *flags = 0;
  for (size_t k = 0; k < a->n_whole; k++)
    if (strcmp(name, a->whole[k].gguf) == 0) {
      *flags = a->whole[k].flags;
      return (size_t)snprintf(buf, len, "%s", a->whole[k].hf ? a->whole[k].hf : "") < len;
    }
  size_t digits;
  const char *dot, *part = gm_layer_part(name, &digits, &dot);
  for (size_t k = 0; part && k < a->n_layer; k++) {
    const clf__gguf_name *r = &a->layer[k];
    if (!gm_is(part, (size_t)(dot - part), r->gguf)) continue;
    *flags = r->flags & ~(strcmp(dot, ".weight") == 0 ? 0u : (unsigned)CLF__GGUF_T);
    if (!r->hf) { /* a copy: named by nothing */
      if (len) buf[0] = 0;
      return len > 0;
    }
    const unsigned layer = (unsigned)strtoul(name + 4, NULL, 10);
    return (size_t)snprintf(buf, len, "%s.%u.%s%s", a->layers, layer, r->hf, dot) < len;
  }
  return 0;
}

clf_status clf__config_load_model(clf_context *ctx, const char *path, const clf__gguf_arch *const *archs, size_t n,
                                  clf__config **out) {
  *out = NULL;
  char *file = NULL;
  clf_status st = clf__gguf_model_file(ctx, path, &file);
  if (st != CLF_OK || !file) return st == CLF_OK ? clf__config_load(ctx, path, out) : st;
  clf_gguf *g = NULL;
  if ((st = clf_gguf_open(file, &g)) != CLF_OK) st = clf__fail(ctx, st, "%s", clf_last_error(NULL));
  else st = clf__gguf_config(ctx, g, file, archs, n, out);
  clf_gguf_close(g);
  free(file);
  return st;
}

/* The reverse of clf__gguf_hf_name for `hf` as it is. */
static int gm_file_name(const clf__gguf_arch *a, const char *hf, char *buf, size_t len) {
  for (size_t k = 0; k < a->n_whole; k++)
    if (a->whole[k].hf && strcmp(hf, a->whole[k].hf) == 0) return (size_t)snprintf(buf, len, "%s", a->whole[k].gguf) < len;
  const size_t lw = strlen(a->layers);
  const size_t digits = strncmp(hf, a->layers, lw) == 0 && hf[lw] == '.' ? strspn(hf + lw + 1, "0123456789") : 0;
  if (digits == 0 || hf[lw + 1 + digits] != '.') return 0;
  const char *part = hf + lw + 2 + digits, *dot = strrchr(part, '.');
  for (size_t k = 0; dot && k < a->n_layer; k++)
    if (gm_is(part, (size_t)(dot - part), a->layer[k].hf))
      return (size_t)snprintf(buf, len, "blk.%.*s.%s%s", (int)digits, hf + lw + 1, a->layer[k].gguf, dot) < len;
  return 0;
}

int clf__gguf_file_name(const clf__gguf_arch *a, const char *hf, char *buf, size_t len) {
  if (gm_file_name(a, hf, buf, len)) return 1;
  const size_t pl = a->prefix ? strlen(a->prefix) : 0;
  if (!pl || strncmp(hf, a->prefix, pl) == 0) return 0;
  char full[512];
  return (size_t)snprintf(full, sizeof full, "%s%s", a->prefix, hf) < sizeof full && gm_file_name(a, full, buf, len);
}
