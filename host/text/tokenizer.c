/* tokenizer.c - text <-> token ids for BERT, GPT-2 and Marian directories,
 * tokenizer.json and GGUF files.
 *
 * The public entry points, special-token splitting, the vocabulary map, and
 * the Unicode helpers (UTF-8, general categories, lower case) the models use.
 */
#include "tokenizer.h"
#include "unicode_tables.h"
#include "io/gguf_model.h"
#include "base/file.h"
#include "base/limits.h"
#include "base/status.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* ---- buffers ---- */

void *clf__grow(void *v, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return v;
  size_t n = *cap ? *cap : 64;
  while (n < need) {
    if (n > SIZE_MAX / 2 / size) return NULL;
    n *= 2;
  }
  void *p = realloc(v, n * size);
  if (p) *cap = n;
  return p;
}

int clf__ids_push(clf__ids *a, int64_t id) {
  int64_t *v = clf__grow(a->v, &a->cap, a->n + 1, sizeof(*v));
  if (!v) return -1;
  a->v = v;
  a->v[a->n++] = id;
  return 0;
}

int clf__str_add(clf__str *b, const char *s, size_t n) {
  if (n > SIZE_MAX - b->n - 1) return -1;
  char *p = clf__grow(b->s, &b->cap, b->n + n + 1, 1);
  if (!p) return -1;
  b->s = p;
  if (n) memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = '\0';
  return 0;
}

int clf__str_addc(clf__str *b, uint32_t cp) {
  char tmp[4];
  return clf__str_add(b, tmp, clf__utf8_put(tmp, cp));
}

/* ---- UTF-8 ---- */

int32_t clf__utf8_next(const char *s, size_t n, size_t *i) {
  const unsigned char *u = (const unsigned char *)s;
  size_t p = *i;
  uint32_t c = u[p], cp;
  int len;
  if (c < 0x80) { *i = p + 1; return (int32_t)c; }
  if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
  else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; }
  else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; }
  else return -1;
  if (p + (size_t)len > n) return -1;
  for (int k = 1; k < len; k++) {
    if ((u[p + k] & 0xC0) != 0x80) return -1;
    cp = cp << 6 | (u[p + k] & 0x3F);
  }
  if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
      (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
    return -1;
  *i = p + (size_t)len;
  return (int32_t)cp;
}

size_t clf__utf8_put(char *out, uint32_t cp) {
  if (cp < 0x80) { out[0] = (char)cp; return 1; }
  if (cp < 0x800) { out[0] = (char)(0xC0 | cp >> 6); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | cp >> 12); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | cp >> 18); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* ---- Unicode classes ---- */

int clf__uc_class(uint32_t cp) {
  size_t lo = 0, hi = clf__uc_class_runs_len;
  if (cp > 0x10FFFF) return CLF__UC_C;
  while (hi - lo > 1) { /* last run with start <= cp */
    size_t mid = (lo + hi) / 2;
    if ((clf__uc_class_runs[mid] >> 4) <= cp) lo = mid; else hi = mid;
  }
  return (int)(clf__uc_class_runs[lo] & 15);
}

int clf__uc_regex_class(uint32_t cp) {
  size_t lo = 0, hi = clf__uc_regex_overrides_len / 3;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (clf__uc_regex_overrides[mid * 3 + 1] < cp) lo = mid + 1;
    else if (clf__uc_regex_overrides[mid * 3] > cp) hi = mid;
    else return (int)clf__uc_regex_overrides[mid * 3 + 2];
  }
  return clf__uc_class(cp);
}

int clf__uc_isspace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

int clf__uc_lower(uint32_t cp, uint32_t out[2]) {
  if (cp == 0x130) { out[0] = 'i'; out[1] = 0x307; return 2; } /* the one two-character case */
  size_t lo = 0, hi = clf__uc_lower_ranges_len / 4;
  out[0] = cp;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    const int32_t *r = clf__uc_lower_ranges + mid * 4;
    if ((uint32_t)r[1] < cp) lo = mid + 1;
    else if ((uint32_t)r[0] > cp) hi = mid;
    else {
      if ((cp - (uint32_t)r[0]) % (uint32_t)r[3] == 0) out[0] = (uint32_t)((int32_t)cp + r[2]);
      break;
    }
  }
  return 1;
}

/* ---- string map (FNV-1a keyed per process, linear probing, load <= 1/2) ----
 * With a fixed hash a vocabulary can be made of tokens whose slots fall in
 * one run: 60,000 tokens of 8 bytes (a 540 KB vocab.txt, found by trying
 * 8 M strings) took 17 s to load, every insert probing the run so far.
 * FNV-1a from a random state, then MurmurHash3's fmix64 (so that the low
 * bits, which pick the slot, depend on every bit), leaves nothing to aim
 * at.  The order of the slots is never seen: lookups only. */

static uint64_t g_hash_seed;
static pthread_once_t g_hash_once = PTHREAD_ONCE_INIT;

static void hash_seed(void) {
  uint64_t s = 0;
  if (getentropy(&s, sizeof(s)) != 0) { /* no entropy source: the clock and addresses, still unknown to a file */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)&s;
  }
  g_hash_seed = s;
}

static uint64_t strhash(const char *k, size_t n) {
  pthread_once(&g_hash_once, hash_seed);
  uint64_t h = 1469598103934665603ull ^ g_hash_seed;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)k[i]) * 1099511628211ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 33);
}

static int strmap_grow(clf__strmap *m) {
  size_t cap = m->cap ? m->cap * 2 : 256;
  clf__strmap g = {calloc(cap, sizeof(char *)), calloc(cap, sizeof(size_t)),
                   calloc(cap, sizeof(int64_t)), cap, 0};
  if (!g.keys || !g.lens || !g.vals) {
    free(g.keys); free(g.lens); free(g.vals);
    return -1;
  }
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i]) continue;
    size_t j = strhash(m->keys[i], m->lens[i]) & (cap - 1);
    while (g.keys[j]) j = (j + 1) & (cap - 1);
    g.keys[j] = m->keys[i]; g.lens[j] = m->lens[i]; g.vals[j] = m->vals[i];
    g.count++;
  }
  free(m->keys); free(m->lens); free(m->vals);
  *m = g;
  return 0;
}

int clf__strmap_put(clf__strmap *m, const char *k, size_t n, int64_t v) {
  if ((m->count + 1) * 2 > m->cap && strmap_grow(m)) return -1;
  size_t j = strhash(k, n) & (m->cap - 1);
  for (; m->keys[j]; j = (j + 1) & (m->cap - 1))
    if (m->lens[j] == n && !memcmp(m->keys[j], k, n)) { m->vals[j] = v; return 0; }
  char *c = malloc(n + 1);
  if (!c) return -1;
  memcpy(c, k, n);
  c[n] = '\0';
  m->keys[j] = c; m->lens[j] = n; m->vals[j] = v;
  m->count++;
  return 0;
}

int64_t clf__strmap_get(const clf__strmap *m, const char *k, size_t n) {
  if (!m->cap) return -1;
  for (size_t j = strhash(k, n) & (m->cap - 1); m->keys[j]; j = (j + 1) & (m->cap - 1))
    if (m->lens[j] == n && !memcmp(m->keys[j], k, n)) return m->vals[j];
  return -1;
}

void clf__strmap_free(clf__strmap *m) {
  for (size_t i = 0; i < m->cap; i++) free(m->keys[i]);
  free(m->keys); free(m->lens); free(m->vals);
  memset(m, 0, sizeof(*m));
}

/* ---- files and configuration ---- */

char *clf__tok_path(const char *dir, const char *name) {
  size_t a = strlen(dir), b = strlen(name);
  char *p = malloc(a + b + 2);
  if (!p) return NULL;
  memcpy(p, dir, a);
  p[a] = '/';
  memcpy(p + a + 1, name, b + 1);
  return p;
}

char *clf__tok_read_text(const char *path, size_t *len, clf_status *st) {
  char *text;
  *st = clf__read_file(NULL, "clf_tokenizer_load", path, CLF__TOK_FILE_MAX_BYTES, &text, len);
  return text;
}

clf_status clf__tok_check_len(size_t n, const char *fmt, ...) {
  if (n <= CLF_LIMIT_TOKEN_BYTES) return CLF_OK;
  char where[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(where, sizeof(where), fmt, ap);
  va_end(ap);
  return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s is %zu bytes long, past the limit of %zu bytes for "
                   "one token", where, n, CLF_LIMIT_TOKEN_BYTES);
}

int clf__tok_set_token(clf_tokenizer *t, int64_t id, const char *tok, size_t n) {
  if ((size_t)id >= t->n_ids) {
    size_t cap = t->n_ids ? t->n_ids : 256;
    while (cap <= (size_t)id) cap *= 2;
    char **p = realloc(t->id_to_token, cap * sizeof(char *));
    if (!p) return -1;
    memset(p + t->n_ids, 0, (cap - t->n_ids) * sizeof(char *));
    t->id_to_token = p;
    t->n_ids = cap;
  }
  char *c = malloc(n + 1);
  if (!c) return -1;
  memcpy(c, tok, n);
  c[n] = '\0';
  free(t->id_to_token[id]);
  t->id_to_token[id] = c;
  return 0;
}

/* vocab.json's ids: non-negative integers, below CLF_LIMIT_VOCAB_ID, and
 * dense enough that the id-to-token table (sized by the largest id) stays
 * within a small multiple of the file: one entry of 2.5e8 made it 2 GB.
 * Its tokens: none past CLF_LIMIT_TOKEN_BYTES. */
static clf_status vocab_ids_ok(const cJSON *root, const char *path) {
  size_t count = 0;
  double max = -1;
  for (const cJSON *e = root->child; e; e = e->next, count++) {
    double v = cJSON_IsNumber(e) ? e->valuedouble : -1;
    if (v < 0 || v != floor(v))
      return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: the id of token \"%.40s\" is not a "
                       "non-negative integer", path, e->string);
    if (v >= (double)CLF_LIMIT_VOCAB_ID)
      return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: token \"%.40s\" has id %.0f, past the limit "
                       "of %zu", path, e->string, v, CLF_LIMIT_VOCAB_ID - 1);
    if (v > max) max = v;
    clf_status st = clf__tok_check_len(strlen(e->string), "%s: the token of id %.0f", path, v);
    if (st != CLF_OK) return st;
  }
  if (max >= (double)(2 * count + 1024))
    return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: ids run up to %.0f for %zu tokens; a vocabulary "
                     "this sparse is refused (ids up to 2 x tokens + 1024)", path, max, count);
  return CLF_OK;
}

clf_status clf__tok_vocab_from_json(clf_tokenizer *t, const void *obj, const char *path) {
  const cJSON *root = obj;
  if (!cJSON_IsObject(root))
    return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: the vocabulary is not a JSON object of "
                     "token: id", path);
  clf_status st = vocab_ids_ok(root, path);
  for (const cJSON *e = root->child; e && st == CLF_OK; e = e->next) {
    const double v = e->valuedouble; /* checked by vocab_ids_ok */
    size_t n = strlen(e->string);
    if (clf__strmap_put(&t->vocab, e->string, n, (int64_t)v) || clf__tok_set_token(t, (int64_t)v, e->string, n))
      st = clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory reading %s", path);
  }
  if (st == CLF_OK && t->vocab.count == 0)
    st = clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s has no tokens", path);
  return st;
}

clf_status clf__tok_load_vocab_json(clf_tokenizer *t, const char *path) {
  clf_status st;
  char *text = clf__tok_read_text(path, NULL, &st);
  if (!text) return st;
  cJSON *root = cJSON_Parse(text);
  free(text);
  if (!root || !cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s is not a JSON object of token: id", path);
  }
  st = clf__tok_vocab_from_json(t, root, path);
  cJSON_Delete(root);
  return st;
}

clf_status clf__tok_read_config(const char *dir, void **config) {
  char *path = clf__tok_path(dir, "tokenizer_config.json");
  clf_status st = CLF_OK;
  *config = NULL;
  if (!path) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory");
  if (clf__path_present(path)) {
    char *text = clf__tok_read_text(path, NULL, &st);
    if (text) {
      cJSON *root = cJSON_Parse(text);
      free(text);
      if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        st = clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s is not a JSON object", path);
      } else {
        *config = root;
      }
    }
  }
  free(path);
  return st;
}

const char *clf__tok_cfg_str(void *config, const char *key, const char *dflt) {
  cJSON *v = config ? cJSON_GetObjectItemCaseSensitive((cJSON *)config, key) : NULL;
  if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
  return cJSON_IsString(v) ? v->valuestring : dflt;
}

int clf__tok_cfg_bool(void *config, const char *key, int dflt) {
  cJSON *v = config ? cJSON_GetObjectItemCaseSensitive((cJSON *)config, key) : NULL;
  if (cJSON_IsNull(v)) return -1;
  return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

clf_status clf__tok_add_special(clf_tokenizer *t, const char *text) {
  if (!text || !*text) return CLF_OK;
  for (int i = 0; i < t->n_special; i++)
    if (!strcmp(t->special[i], text)) return CLF_OK;
  if (t->n_special == CLF__TOK_MAX_SPECIAL)
    return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: more than %d special tokens", CLF__TOK_MAX_SPECIAL);
  char *c = strdup(text);
  if (!c) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory");
  t->special[t->n_special] = c;
  t->special_id[t->n_special++] = clf__strmap_get(&t->vocab, text, strlen(text));
  return CLF_OK;
}

int clf__tok_is_special_id(const clf_tokenizer *t, int64_t id) {
  for (int i = 0; i < t->n_special; i++)
    if (t->special_id[i] == id && id >= 0) return 1;
  return 0;
}

int clf__tok_is_special_text(const clf_tokenizer *t, const char *s, size_t n) {
  for (int i = 0; i < t->n_special; i++)
    if (strlen(t->special[i]) == n && !memcmp(t->special[i], s, n)) return 1;
  return 0;
}

/* transformers' clean_up_tokenization: the replacements in their order. */
void clf__tok_clean_up(clf__str *b) {
  static const char *from[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " 's", " 've", " 're"};
  static const char *to[] = {".", "?", "!", ",", "'", "n't", "'m", "'s", "'ve", "'re"};
  if (!b->s) return;
  for (size_t r = 0; r < CLF__ARRAY_LEN(from); r++) {
    size_t fl = strlen(from[r]), tl = strlen(to[r]), w = 0;
    for (size_t i = 0; i < b->n;) {
      if (i + fl <= b->n && !memcmp(b->s + i, from[r], fl)) {
        memmove(b->s + w, to[r], tl); /* tl < fl, so the write never passes the read */
        w += tl;
        i += fl;
      } else {
        b->s[w++] = b->s[i++];
      }
    }
    b->n = w;
    b->s[w] = '\0';
  }
}

/* ---- public API ---- */

void clf_tokenizer_destroy(clf_tokenizer *t) {
  if (!t) return;
  clf__strmap_free(&t->vocab);
  clf__strmap_free(&t->ranks);
  for (size_t i = 0; i < t->n_ids; i++) free(t->id_to_token[i]);
  free(t->id_to_token);
  for (int i = 0; i < t->n_special; i++) free(t->special[i]);
  free(t->chat_template);
  free(t->chat_vars);
  clf__spm_free(t);
  clf__hf_free(t);
  free(t);
}

/* tokenizer_class names one of the slow tokenizers ("Fast" or not): the
 * files of today's families serve it. */
static int slow_class(const char *cls) {
  return !strncmp(cls, "Bert", 4) || !strncmp(cls, "GPT2", 4) || !strncmp(cls, "Marian", 6) ||
         !strncmp(cls, "Roberta", 7) || !strncmp(cls, "XLMRoberta", 10);
}

enum { HAS_VOCAB_TXT, HAS_VOCAB_JSON, HAS_MERGES, HAS_SOURCE_SPM, HAS_TARGET_SPM, HAS_TOKENIZER_JSON, HAS_XLMR_SPM,
       HAS_N };
static const char *const g_files[HAS_N] = {"vocab.txt", "vocab.json", "merges.txt", "source.spm", "target.spm",
                                           "tokenizer.json", "sentencepiece.bpe.model"};

/* Which tokenizer a directory holds; `family` is tokenizer_class, else
 * config.json's model_type ("roberta", "xlm-roberta").  A class or type
 * naming a slow tokenizer whose files are there decides; a class only
 * tokenizer.json serves (PreTrainedTokenizerFast, LlamaTokenizer[Fast],
 * Qwen2Tokenizer[Fast], ...) takes tokenizer.json; else the slow files as
 * before, then tokenizer.json.  -1 when none is there. */
static int pick_kind(const char *cls, const char *type, const int has[HAS_N], int *roberta) {
  int bpe = has[HAS_VOCAB_JSON] && has[HAS_MERGES];
  *roberta = (!strncmp(cls, "Roberta", 7) || (!*cls && !strcmp(type, "roberta"))) && bpe;
  if (*roberta) return CLF__TOK_BPE;
  if ((!strncmp(cls, "XLMRoberta", 10) || (!*cls && !strcmp(type, "xlm-roberta"))) && has[HAS_XLMR_SPM])
    return CLF__TOK_XLMR;
  if (!strncmp(cls, "Bert", 4) && has[HAS_VOCAB_TXT]) return CLF__TOK_WORDPIECE;
  if (!strncmp(cls, "GPT2", 4) && bpe) return CLF__TOK_BPE;
  if (!strncmp(cls, "Marian", 6) && has[HAS_SOURCE_SPM]) return CLF__TOK_SPM;
  if (*cls && !slow_class(cls) && has[HAS_TOKENIZER_JSON]) return CLF__TOK_HFJSON;
  if (has[HAS_SOURCE_SPM]) return CLF__TOK_SPM;
  if (has[HAS_VOCAB_TXT]) return CLF__TOK_WORDPIECE;
  if (bpe) return CLF__TOK_BPE;
  if (has[HAS_TOKENIZER_JSON]) return CLF__TOK_HFJSON;
  return -1;
}

/* config.json's model_type in dir ("" when absent or unreadable: it only
 * breaks ties between tokenizer files, and a bad config.json is the model
 * loader's to report), into buf. */
static const char *model_type(const char *dir, char *buf, size_t size) {
  char *path = clf__tok_path(dir, "config.json");
  clf_status st;
  char *text = path && clf__path_present(path) ? clf__tok_read_text(path, NULL, &st) : NULL;
  cJSON *root = text ? cJSON_Parse(text) : NULL;
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "model_type");
  snprintf(buf, size, "%s", cJSON_IsString(v) ? v->valuestring : "");
  cJSON_Delete(root);
  free(text);
  free(path);
  return buf;
}

/* tokenizer_config.json's added_tokens_decoder: lstrip / rstrip of the
 * special tokens (RoBERTa's and XLM-R's <mask> takes the spaces before it). */
static void special_flags(clf_tokenizer *t, void *config) {
  const cJSON *e, *added = config ? cJSON_GetObjectItemCaseSensitive((cJSON *)config, "added_tokens_decoder") : NULL;
  cJSON_ArrayForEach(e, added) {
    const char *c = clf__tok_cfg_str((void *)e, "content", NULL);
    for (int k = 0; c && k < t->n_special; k++) {
      if (strcmp(c, t->special[k])) continue;
      if (clf__tok_cfg_bool((void *)e, "lstrip", 0) == 1) t->special_lstrip |= 1u << k;
      if (clf__tok_cfg_bool((void *)e, "rstrip", 0) == 1) t->special_rstrip |= 1u << k;
    }
  }
}

static clf_status load_kind(clf_tokenizer *t, const char *model_dir, void *config) {
  t->unk_id = t->cls_id = t->sep_id = t->eos_id = -1;
  t->clean_up_spaces = clf__tok_cfg_bool(config, "clean_up_tokenization_spaces", 1) == 1;
  if (t->kind == CLF__TOK_WORDPIECE) return clf__wordpiece_load(t, model_dir, config);
  if (t->kind == CLF__TOK_BPE) return clf__bpe_load(t, model_dir, config);
  if (t->kind == CLF__TOK_SPM) return clf__spm_load(t, model_dir, config);
  if (t->kind == CLF__TOK_XLMR) return clf__xlmr_load(t, model_dir, config);
  return clf__hf_load(t, model_dir, config);
}

/* A special token's text: a string or {"content": ...}; NULL otherwise. */
static const char *token_text(const cJSON *v) {
  if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Copies the special tokens of `from` (tokenizer_config.json or
 * special_tokens_map.json) into vars, as strings; 0 or -1 out of memory. */
static int add_special_vars(cJSON *vars, const cJSON *from) {
  static const char *const keys[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                     "pad_token", "cls_token", "mask_token"};
  for (size_t k = 0; k < CLF__ARRAY_LEN(keys); k++) {
    const char *s = token_text(cJSON_GetObjectItemCaseSensitive(from, keys[k]));
    if (!s || !*s) continue;
    cJSON_DeleteItemFromObjectCaseSensitive(vars, keys[k]);
    if (!cJSON_AddStringToObject(vars, keys[k], s)) return -1;
  }
  const cJSON *e, *extra = cJSON_GetObjectItemCaseSensitive(from, "additional_special_tokens");
  if (!cJSON_IsArray(extra) || !cJSON_GetArraySize(extra)) return 0;
  cJSON_DeleteItemFromObjectCaseSensitive(vars, "additional_special_tokens");
  cJSON *list = cJSON_AddArrayToObject(vars, "additional_special_tokens");
  if (!list) return -1;
  cJSON_ArrayForEach(e, extra) {
    const char *s = token_text(e);
    if (s && !cJSON_AddItemToArray(list, cJSON_CreateString(s))) return -1;
  }
  return 0;
}

/* The chat template's variables (tokenizer.h's chat_vars): config's special
 * tokens, and special_tokens_map.json's in dir when config has no
 * added_tokens_decoder (transformers' legacy path, which then takes them). */
static clf_status keep_chat_vars(clf_tokenizer *t, const char *dir, void *config) {
  cJSON *vars = cJSON_CreateObject(), *map = NULL;
  int ok = vars && !add_special_vars(vars, config);
  if (ok && dir && !cJSON_GetObjectItemCaseSensitive((cJSON *)config, "added_tokens_decoder")) {
    char *path = clf__tok_path(dir, "special_tokens_map.json");
    clf_status st;
    char *text = path && clf__path_present(path) ? clf__tok_read_text(path, NULL, &st) : NULL;
    map = text ? cJSON_Parse(text) : NULL;
    ok = path && (!cJSON_IsObject(map) || !add_special_vars(vars, map));
    free(text);
    free(path);
  }
  ok = ok && (t->chat_vars = cJSON_PrintUnformatted(vars)) != NULL;
  cJSON_Delete(map);
  cJSON_Delete(vars);
  return ok ? CLF_OK : clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory");
}

/* config's chat_template: a string, or a list of {"name", "template"} of
 * which transformers takes "default" (none named so: no template). */
static clf_status keep_chat_template(clf_tokenizer *t, const char *dir, void *config) {
  const cJSON *v = config ? cJSON_GetObjectItemCaseSensitive((cJSON *)config, "chat_template") : NULL, *e;
  const char *c = cJSON_IsString(v) ? v->valuestring : NULL;
  const cJSON *list = cJSON_IsArray(v) ? v : NULL;
  cJSON_ArrayForEach(e, list) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name"), *tpl = cJSON_GetObjectItemCaseSensitive(e, "template");
    if (cJSON_IsString(name) && !strcmp(name->valuestring, "default") && cJSON_IsString(tpl)) c = tpl->valuestring;
  }
  if (!c) return keep_chat_vars(t, dir, config); /* for a template from elsewhere (clf_tokenizer_chat_template_parse) */
  if (!(t->chat_template = strdup(c)))
    return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory");
  return keep_chat_vars(t, dir, config);
}

/* A tokenizer of `kind` from dir (*out NULL on failure). */
static clf_status load_as(const char *dir, void *config, int kind, int roberta, clf_tokenizer **out) {
  clf_tokenizer *t = calloc(1, sizeof(*t));
  if (!t) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory");
  t->kind = (clf__tok_kind)kind;
  t->roberta = roberta;
  clf_status st = load_kind(t, dir, config);
  if (st == CLF_OK) special_flags(t, config);
  if (st == CLF_OK) st = keep_chat_template(t, dir, config);
  if (st != CLF_OK) {
    clf_tokenizer_destroy(t);
    t = NULL;
  }
  *out = t;
  return st;
}

/* The tokenizer of GGUF file `file` (tok_gguf.c). */
static clf_status load_gguf(const char *file, clf_tokenizer **out) {
  clf_tokenizer *t = calloc(1, sizeof(*t));
  if (!t) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory");
  t->kind = CLF__TOK_HFJSON;
  t->unk_id = t->cls_id = t->sep_id = t->eos_id = -1;
  void *config = NULL;
  clf_status st = clf__gguf_tok_load(t, file, &config);
  if (st == CLF_OK) st = keep_chat_template(t, NULL, config);
  cJSON_Delete(config);
  if (st != CLF_OK) {
    clf_tokenizer_destroy(t);
    t = NULL;
  }
  *out = t;
  return st;
}

clf_status clf_tokenizer_load(const char *model_dir, clf_tokenizer **out) {
  if (!out) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_tokenizer_load: out is NULL");
  *out = NULL;
  if (!model_dir) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_tokenizer_load: model_dir is NULL");
  char *gguf = NULL; /* a GGUF file, or a directory without config.json holding one */
  clf_status st = clf__gguf_model_file(NULL, model_dir, &gguf);
  if (st != CLF_OK || gguf) {
    if (gguf) st = load_gguf(gguf, out);
    free(gguf);
    return st;
  }
  int has[HAS_N], roberta;
  for (int i = 0; i < HAS_N; i++) {
    char *p = clf__tok_path(model_dir, g_files[i]);
    if (!p) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory");
    has[i] = clf__path_present(p);
    free(p);
  }
  void *config = NULL;
  st = clf__tok_read_config(model_dir, &config);
  if (st != CLF_OK) return st;
  char type[64];
  const char *cls = clf__tok_cfg_str(config, "tokenizer_class", "");
  int kind = pick_kind(cls, model_type(model_dir, type, sizeof(type)), has, &roberta);
  if (kind < 0) {
    cJSON_Delete(config);
    return clf__fail(NULL, CLF_E_NOT_FOUND,
                     "clf_tokenizer_load: no tokenizer in %s: looked for vocab.txt (BERT WordPiece), "
                     "vocab.json + merges.txt (GPT-2 BPE)%s, source.spm + target.spm + vocab.json (Marian "
                     "SentencePiece), tokenizer.json (Hugging Face tokenizers)",
                     model_dir, has[HAS_VOCAB_JSON] ? " (merges.txt is missing)" : "");
  }
  st = load_as(model_dir, config, kind, roberta, out);
  if (st == CLF_E_UNSUPPORTED && kind == CLF__TOK_HFJSON) {
    /* a tokenizer.json of a kind not read here (DistilBertTokenizer's
     * WordPiece, ...) beside slow files that serve the class: those */
    has[HAS_TOKENIZER_JSON] = 0;
    int slow = pick_kind(cls, type, has, &roberta);
    if (slow >= 0) st = load_as(model_dir, config, slow, roberta, out);
  }
  cJSON_Delete(config);
  return st;
}

/* The special token starting at s[i] (leftmost-longest, as transformers'
 * Trie.split), or -1. */
static int special_at(const clf_tokenizer *t, const char *s, size_t n, size_t i) {
  int best = -1;
  size_t best_len = 0;
  for (int k = 0; k < t->n_special; k++) {
    size_t l = strlen(t->special[k]);
    if (l > best_len && i + l <= n && !memcmp(s + i, t->special[k], l)) { best = k; best_len = l; }
  }
  return best;
}

/* Python's str.isspace() of the character ending at / starting at s[i]:
 * its length in bytes, or 0. */
static size_t space_before(const char *s, size_t lo, size_t i) {
  size_t k = i - 1;
  while (k > lo && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
  size_t j = k;
  int32_t c = clf__utf8_next(s, i, &j);
  return c >= 0 && clf__uc_isspace((uint32_t)c) ? i - k : 0;
}
static size_t space_at(const char *s, size_t n, size_t i) {
  size_t j = i;
  int32_t c = clf__utf8_next(s, n, &j);
  return c >= 0 && clf__uc_isspace((uint32_t)c) ? j - i : 0;
}

static clf_status encode_chunk(clf_tokenizer *t, const char *s, size_t n, clf__ids *out) {
  if (n == 0) return CLF_OK;
  if (t->kind == CLF__TOK_WORDPIECE) return clf__wordpiece_encode(t, s, n, out);
  if (t->kind == CLF__TOK_BPE) return clf__bpe_encode(t, s, n, out);
  if (t->kind == CLF__TOK_XLMR) return clf__xlmr_encode(t, s, n, out);
  return clf__spm_encode(t, s, n, out);
}

static clf_status hf_encode(clf_tokenizer *t, const char *text, size_t len, int add_special, int64_t **ids,
                            size_t *n) {
  clf__ids out = {0};
  clf_status st = clf__hf_encode(t, text, len, add_special, &out);
  if (st == CLF_OK && !out.v && !(out.v = malloc(sizeof(int64_t)))) /* a valid pointer even for no ids */
    st = clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_encode: out of memory");
  if (st != CLF_OK) {
    free(out.v);
    return st;
  }
  *ids = out.v;
  *n = out.n;
  return CLF_OK;
}

clf_status clf_tokenizer_encode(clf_tokenizer *t, const char *text, int add_special, int64_t **ids, size_t *n) {
  if (!ids || !n) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_tokenizer_encode: ids or n is NULL");
  *ids = NULL;
  *n = 0;
  if (!t) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_tokenizer_encode: tokenizer is NULL");
  if (!text) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_tokenizer_encode: text is NULL");
  size_t len = strlen(text);
  for (size_t i = 0; i < len;)
    if (clf__utf8_next(text, len, &i) < 0)
      return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_tokenizer_encode: text is not valid UTF-8 (byte %zu)", i);
  if (t->kind == CLF__TOK_HFJSON) return hf_encode(t, text, len, add_special, ids, n);
  clf__str pre = {0};
  if (t->kind == CLF__TOK_BPE && t->add_prefix_space) { /* GPT-2's prepare_for_tokenization */
    if (clf__str_add(&pre, " ", 1) || clf__str_add(&pre, text, len))
      return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_encode: out of memory");
    text = pre.s;
    len = pre.n;
  }
  clf__ids out = {0};
  clf_status st = CLF_OK;
  int oom = 0;
  /* BERT, RoBERTa, XLM-R: cls X sep (GPT-2 has no cls); Marian: X eos */
  if (add_special && t->cls_id >= 0 && t->kind != CLF__TOK_SPM) oom |= clf__ids_push(&out, t->cls_id);
  size_t start = 0;
  for (size_t i = 0; i < len && st == CLF_OK && !oom;) {
    int k = special_at(t, text, len, i);
    if (k < 0 || t->special_id[k] < 0) { i++; continue; }
    size_t end = i, l; /* lstrip: the text before loses its trailing spaces (str.rstrip) */
    while (t->special_lstrip >> k & 1 && end > start && (l = space_before(text, start, end))) end -= l;
    st = encode_chunk(t, text + start, end - start, &out);
    if (st == CLF_OK) oom |= clf__ids_push(&out, t->special_id[k]);
    i += strlen(t->special[k]);
    while (t->special_rstrip >> k & 1 && i < len && (l = space_at(text, len, i))) i += l;
    start = i;
  }
  if (st == CLF_OK && !oom) st = encode_chunk(t, text + start, len - start, &out);
  if (st == CLF_OK && !oom && add_special) {
    if (t->sep_id >= 0 && t->kind != CLF__TOK_SPM) oom |= clf__ids_push(&out, t->sep_id);
    else if (t->kind == CLF__TOK_SPM) oom |= clf__ids_push(&out, t->eos_id);
  }
  free(pre.s);
  if (st == CLF_OK && oom) st = clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_encode: out of memory");
  if (st != CLF_OK) {
    free(out.v);
    return st;
  }
  if (!out.v) out.v = malloc(sizeof(int64_t)); /* a valid pointer even for no ids */
  if (!out.v) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_encode: out of memory");
  *ids = out.v;
  *n = out.n;
  return CLF_OK;
}

static clf_status hf_decode(clf_tokenizer *t, const int64_t *ids, size_t n, int skip_special, char **text) {
  clf__str out = {0};
  clf_status st = clf__hf_decode(t, ids, n, skip_special, &out);
  if (st == CLF_OK && !out.s && clf__str_add(&out, "", 0))
    st = clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_decode: out of memory");
  if (st != CLF_OK) {
    free(out.s);
    return st;
  }
  if (t->clean_up_spaces) clf__tok_clean_up(&out);
  *text = out.s;
  return CLF_OK;
}

clf_status clf_tokenizer_token(const clf_tokenizer *t, int64_t id, const char **token) {
  if (!t || !token) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_tokenizer_token: NULL argument");
  *token = id >= 0 && (size_t)id < t->n_ids ? t->id_to_token[id] : NULL;
  if (!*token)
    return clf__fail(NULL, CLF_E_NOT_FOUND, "clf_tokenizer_token: no token of the vocabulary (%zu ids) has id %lld",
                     t->n_ids, (long long)id);
  return CLF_OK;
}

clf_status clf_tokenizer_decode(clf_tokenizer *t, const int64_t *ids, size_t n, int skip_special, char **text) {
  if (!text) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_tokenizer_decode: text is NULL");
  *text = NULL;
  if (!t) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_tokenizer_decode: tokenizer is NULL");
  if (!ids && n) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_tokenizer_decode: ids is NULL");
  if (t->kind == CLF__TOK_HFJSON) return hf_decode(t, ids, n, skip_special, text);
  const char **toks = malloc((n ? n : 1) * sizeof(char *));
  if (!toks) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_decode: out of memory");
  size_t m = 0;
  const char *unk = t->unk_id >= 0 ? t->id_to_token[t->unk_id] : NULL;
  for (size_t i = 0; i < n; i++) {
    if (skip_special && clf__tok_is_special_id(t, ids[i])) continue;
    const char *tok = (ids[i] >= 0 && (size_t)ids[i] < t->n_ids) ? t->id_to_token[ids[i]] : NULL;
    if (!tok && t->kind != CLF__TOK_BPE && t->kind != CLF__TOK_XLMR) /* XLM-R's IdToPiece raises */
      tok = unk; /* transformers maps unknown ids to the unk token */
    if (!tok) {
      free(toks);
      return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_tokenizer_decode: id %lld at position %zu is not in "
                       "the vocabulary", (long long)ids[i], i);
    }
    toks[m++] = tok;
  }
  clf__str out = {0};
  clf_status st;
  if (t->kind == CLF__TOK_WORDPIECE) st = clf__wordpiece_decode(t, toks, m, &out);
  else if (t->kind == CLF__TOK_BPE) st = clf__bpe_decode(t, toks, m, &out);
  else if (t->kind == CLF__TOK_XLMR) st = clf__xlmr_decode(t, toks, m, &out);
  else st = clf__spm_decode(t, toks, m, &out);
  free(toks);
  if (st == CLF_OK && !out.s && clf__str_add(&out, "", 0))
    st = clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_decode: out of memory");
  if (st != CLF_OK) {
    free(out.s);
    return st;
  }
  if (t->clean_up_spaces) clf__tok_clean_up(&out);
  *text = out.s;
  return CLF_OK;
}
