/* tok_gguf.c - the tokenizer of a GGUF file (llama.cpp's format).
 *
 * tokenizer.ggml.* is read into what the model's Hugging Face repository
 * holds - a tokenizer.json pipeline, run by tok_hfjson.c / tok_hfrun.c, and
 * tokenizer_config.json's settings - with llama.cpp's choices
 * (src/llama-vocab.cpp, which reproduces the original tokenizers) wherever
 * the metadata leaves one: the defaults, the pre-tokenizer each
 * tokenizer.ggml.pre names, which tokens are cut out of the text.
 *
 * "gpt2", byte-level BPE: the tokens, tokenizer.ggml.merges (rank = place),
 * the pre-tokenizer of tokenizer.ggml.pre, the ByteLevel decoder.  "llama",
 * SentencePiece BPE: merges made from the scores as llama.cpp's
 * llm_tokenizer_spm merges (every token that is two tokens joined, the
 * higher its score the earlier, equal scores leftmost first), byte
 * fallback, spaces as U+2581 with one prepended to each piece of text
 * (tokenizer.ggml.add_space_prefix, default true), Llama's decoder.
 * Control, user-defined and unknown tokens are added tokens matched in the
 * raw text (control and unknown ones special); the post-processor adds
 * BOS / EOS as tokenizer.ggml.add_bos_token / add_eos_token say (absent:
 * llama.cpp's defaults, BOS for SentencePiece and Llama 3's pre-tokenizer).
 */
#include "tok_hf.h"
#include "base/limits.h"
#include "base/status.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* tokenizer.ggml.token_type values (llama.cpp's llama_token_type) */
enum { GT_UNDEFINED, GT_NORMAL, GT_UNKNOWN, GT_CONTROL, GT_USER_DEFINED, GT_UNUSED, GT_BYTE, GT_TYPES };

#define GT_NFC 1u           /* NFC normalizer (Qwen2's tokenizer.json has it; llama.cpp skips it) */
#define GT_IGNORE_MERGES 2u /* a piece that is a token is that token */
#define GT_ADD_BOS 4u       /* BOS added when tokenizer.ggml.add_bos_token is absent */
#define GT_KEEP_SPACES 8u   /* clean_up_tokenization_spaces false */

/* The GPT-2 pattern as llama.cpp writes it: the text between matches is a
 * piece too, so its last alternative (\s+) changes nothing. */
#define GT_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define GT_LLAMA3 \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
  "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define GT_QWEN2 \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
  "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define GT_UPPER "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define GT_LOWER "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
#define GT_CONTRACT "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"

/* tokenizer.ggml.pre: the values llama.cpp maps to one pre-tokenizer
 * ("|"-bounded), its Split patterns (each isolating its matches, applied in
 * turn; the tokenizer.json patterns where llama.cpp rewrote them for its own
 * regex engine), then ByteLevel without a pattern. */
typedef struct gt_pre {
  const char *names;
  const char *split[5];
  unsigned flags;
} gt_pre;

static const gt_pre g_pre[] = {
    {"||default|", {"[\\p{P}\\$\\+<=>\\^~\\|]+", GT_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, 0},
    {"|gpt-2|gpt2|phi-2|jina-es|jina-de|gigachat|jina-v2-es|jina-v2-de|a.x-4.0|mellum|modern-bert|exaone4|mpt|olmo|"
     "jais|", {GT_GPT2}, 0},
    {"|trillion|granite-docling|", {GT_GPT2}, GT_KEEP_SPACES},
    {"|llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|jina-v5-nano|", {GT_LLAMA3},
     GT_IGNORE_MERGES | GT_ADD_BOS},
    {"|dbrx|smaug-bpe|chatglm-bpe|glm4|", {GT_LLAMA3}, 0},
    {"|qwen2|", {GT_QWEN2}, GT_NFC | GT_KEEP_SPACES},
    {"|deepseek-r1-qwen|kormo|f2llmv2|hunyuan|solar-open|grok-2|", {GT_QWEN2}, GT_KEEP_SPACES},
    {"|megrez|stablelm2|", {GT_QWEN2}, 0},
    {"|qwen35|", {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}|"
                  " ?[^\\s\\p{L}\\p{M}\\p{N}]+"
                  "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, GT_KEEP_SPACES},
    {"|smollm|command-r|", {"\\p{N}", GT_GPT2}, GT_KEEP_SPACES},
    {"|starcoder|refact|codeshell|exaone|minerva-7b|mellum2|", {"\\p{N}", GT_GPT2}, 0},
    {"|falcon|", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GT_GPT2, "[0-9][0-9][0-9]"}, 0},
    {"|tekken|", {"[^\\r\\n\\p{L}\\p{N}]?" GT_UPPER "*" GT_LOWER "+|[^\\r\\n\\p{L}\\p{N}]?" GT_UPPER "+" GT_LOWER
                  "*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     GT_IGNORE_MERGES | GT_ADD_BOS | GT_KEEP_SPACES},
    {"|gpt-4o|llama4|kanana2|talkie|", {"[^\\r\\n\\p{L}\\p{N}]?" GT_UPPER "*" GT_LOWER "+" GT_CONTRACT
                                        "|[^\\r\\n\\p{L}\\p{N}]?" GT_UPPER "+" GT_LOWER "*" GT_CONTRACT
                                        "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     GT_KEEP_SPACES},
    {"|deepseek-v3|hunyuan-dense|joyai-llm|hy_v4|",
     {"\\p{N}{1,3}", "[\\x{4e00}-\\x{9fa5}\\x{3040}-\\x{309f}\\x{30a0}-\\x{30ff}]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
      "?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     GT_KEEP_SPACES},
    {"|deepseek-coder|", {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
                          "[\\x{4e00}-\\x{9fa5}\\x{0800}-\\x{4e00}\\x{ac00}-\\x{d7ff}]+", "\\p{N}"}, GT_KEEP_SPACES},
    {"|bloom|gpt3-finnish|", {" ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{ff0c}\\x{3001}\\x{0964}\\x{06d4}\\x{060c})]+"}, 0},
    {"|poro-chat|", {" ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{ff0c}\\x{3001}\\x{0964}\\x{06d4}\\x{060c})]+"},
     GT_KEEP_SPACES},
    {"|viking|", {" ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{ff0c}\\x{3001}\\x{0964}\\x{06d4}\\x{060c})]+", "\\p{N}"},
     GT_KEEP_SPACES},
};

/* What is read from the file. */
typedef struct gt {
  const clf_gguf *g;
  const char *file;
  int spm;              /* tokenizer.ggml.model "llama" (else "gpt2") */
  uint64_t n;           /* tokens */
  unsigned char *type;  /* [n] GT_*, GT_NORMAL without tokenizer.ggml.token_type */
  float *score;         /* [n] SentencePiece: tokenizer.ggml.scores, 0 without */
  const gt_pre *pre;    /* byte-level BPE */
  int64_t id[4];        /* bos, eos, unk, pad; -1 for none */
  int add_bos, add_eos, add_space_prefix;
} gt;

/* bos, eos, unk, pad: tokenizer.ggml.<name>_token_id */
static const char *const g_special[4] = {"bos", "eos", "unknown", "padding"};

static clf_status gt_fail(const gt *s, clf_status st, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static clf_status gt_fail(const gt *s, clf_status st, const char *fmt, ...) {
  char msg[640];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  return clf__fail(NULL, st, "clf_tokenizer_load: %s: %s", s->file, msg);
}

static clf_status oom(void) { return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory"); }

static int is_int_type(clf_gguf_type e) {
  return e <= CLF_GGUF_I32 || e == CLF_GGUF_U64 || e == CLF_GGUF_I64;
}

/* The array `key` of strings (want 0), integers (1) or numbers (2): its
 * index, or -1 when absent (an error when required); *count its length. */
static clf_status gt_array(const gt *s, const char *key, int want, int required, long *idx, uint64_t *count) {
  static const char *const what[] = {"strings", "integers", "numbers"};
  clf_gguf_kv kv;
  *idx = clf_gguf_find(s->g, key);
  *count = 0;
  if (*idx < 0)
    return required ? gt_fail(s, CLF_E_FORMAT, "%s is missing", key) : CLF_OK;
  clf_gguf_kv_at(s->g, (size_t)*idx, &kv);
  int num = is_int_type(kv.elem) || kv.elem == CLF_GGUF_F32 || kv.elem == CLF_GGUF_F64;
  int ok = kv.type == CLF_GGUF_ARRAY &&
           (want == 0 ? kv.elem == CLF_GGUF_STRING : want == 1 ? is_int_type(kv.elem) : num);
  if (!ok) return gt_fail(s, CLF_E_FORMAT, "%s is not an array of %s", key, what[want]);
  *count = kv.count;
  return CLF_OK;
}

/* tokenizer.ggml.tokens into t->vocab and t->id_to_token: no token twice,
 * none with a NUL byte or longer than CLF_LIMIT_TOKEN_BYTES; an empty one
 * is "[EMPTY_<id>]", as llama.cpp names it. */
static clf_status gt_tokens(clf_tokenizer *t, gt *s) {
  long k;
  clf_status st = gt_array(s, "tokenizer.ggml.tokens", 0, 1, &k, &s->n);
  if (st != CLF_OK) return st;
  if (s->n == 0) return gt_fail(s, CLF_E_FORMAT, "tokenizer.ggml.tokens is empty");
  if (s->n > CLF_LIMIT_VOCAB_ID)
    return gt_fail(s, CLF_E_FORMAT, "tokenizer.ggml.tokens has %llu tokens, past the limit of %zu",
                   (unsigned long long)s->n, CLF_LIMIT_VOCAB_ID);
  for (uint64_t i = 0; i < s->n; i++) {
    const char *tok;
    size_t len;
    char empty[32];
    clf_gguf_get_str(s->g, (size_t)k, i, &tok, &len);
    if (len > CLF_LIMIT_TOKEN_BYTES)
      return gt_fail(s, CLF_E_FORMAT, "tokenizer.ggml.tokens[%llu] is %zu bytes long, past the limit of %zu bytes "
                     "for one token", (unsigned long long)i, len, CLF_LIMIT_TOKEN_BYTES);
    if (len == 0) {
      len = (size_t)snprintf(empty, sizeof(empty), "[EMPTY_%llu]", (unsigned long long)i);
      tok = empty;
    }
    if (memchr(tok, '\0', len))
      return gt_fail(s, CLF_E_FORMAT, "tokenizer.ggml.tokens[%llu] holds a NUL byte", (unsigned long long)i);
    int64_t prev = clf__strmap_get(&t->vocab, tok, len);
    if (prev >= 0)
      return gt_fail(s, CLF_E_FORMAT, "tokenizer.ggml.tokens has \"%.40s\" twice (ids %lld and %llu)", tok,
                     (long long)prev, (unsigned long long)i);
    if (clf__strmap_put(&t->vocab, tok, len, (int64_t)i) || clf__tok_set_token(t, (int64_t)i, tok, len))
      return oom();
  }
  return CLF_OK;
}

/* tokenizer.ggml.token_type and, for SentencePiece, tokenizer.ggml.scores:
 * one per token. */
static clf_status gt_types_scores(gt *s) {
  long kt, ks;
  uint64_t nt, ns;
  clf_status st = gt_array(s, "tokenizer.ggml.token_type", 1, 0, &kt, &nt);
  if (st == CLF_OK) st = gt_array(s, "tokenizer.ggml.scores", 2, 0, &ks, &ns);
  if (st != CLF_OK) return st;
  for (int k = 0; k < 2; k++) {
    uint64_t m = k ? ns : nt;
    if ((k ? ks : kt) >= 0 && m != s->n)
      return gt_fail(s, CLF_E_FORMAT, "%s has %llu values for %llu tokens",
                     k ? "tokenizer.ggml.scores" : "tokenizer.ggml.token_type", (unsigned long long)m,
                     (unsigned long long)s->n);
  }
  s->type = malloc((size_t)s->n);
  s->score = calloc((size_t)s->n, sizeof(float));
  if (!s->type || !s->score) return oom();
  for (uint64_t i = 0; i < s->n; i++) {
    int64_t v = GT_NORMAL;
    double f = 0;
    if (kt >= 0 && (clf_gguf_get_int(s->g, (size_t)kt, i, &v) != CLF_OK || v < 0 || v >= GT_TYPES))
      return gt_fail(s, CLF_E_FORMAT, "tokenizer.ggml.token_type[%llu] is %lld, not a token type (0 to 6)",
                     (unsigned long long)i, (long long)v);
    if (ks >= 0 && (clf_gguf_get_float(s->g, (size_t)ks, i, &f) != CLF_OK || isnan(f)))
      return gt_fail(s, CLF_E_FORMAT, "tokenizer.ggml.scores[%llu] is not a number", (unsigned long long)i);
    s->type[i] = (unsigned char)v;
    s->score[i] = (float)f;
  }
  return CLF_OK;
}

/* A boolean (or integer) setting, `dflt` when absent. */
static clf_status gt_bool(const gt *s, const char *key, int dflt, int *out) {
  long i = clf_gguf_find(s->g, key);
  clf_gguf_kv kv;
  int64_t v = dflt;
  if (i >= 0 && (clf_gguf_kv_at(s->g, (size_t)i, &kv) != CLF_OK || kv.type == CLF_GGUF_ARRAY ||
                 clf_gguf_get_int(s->g, (size_t)i, 0, &v) != CLF_OK))
    return gt_fail(s, CLF_E_FORMAT, "%s is not a boolean", key);
  *out = v != 0;
  return CLF_OK;
}

/* The special token ids (llama.cpp's defaults for SentencePiece: <unk> 0,
 * <s> 1, </s> 2) and whether BOS / EOS are added. */
static clf_status gt_specials(gt *s) {
  static const int64_t spm_ids[4] = {1, 2, 0, -1};
  for (int k = 0; k < 4; k++) {
    char key[64];
    int64_t dflt = s->spm ? spm_ids[k] : -1;
    snprintf(key, sizeof(key), "tokenizer.ggml.%s_token_id", g_special[k]);
    long i = clf_gguf_find(s->g, key);
    clf_gguf_kv kv;
    s->id[k] = dflt < (int64_t)s->n ? dflt : -1;
    if (i < 0) continue;
    if (clf_gguf_kv_at(s->g, (size_t)i, &kv) != CLF_OK || kv.type == CLF_GGUF_ARRAY ||
        clf_gguf_get_int(s->g, (size_t)i, 0, &s->id[k]) != CLF_OK)
      return gt_fail(s, CLF_E_FORMAT, "%s is not an integer", key);
    if (s->id[k] < 0 || (uint64_t)s->id[k] >= s->n)
      return gt_fail(s, CLF_E_FORMAT, "%s is %lld, not a token id (%llu tokens)", key, (long long)s->id[k],
                     (unsigned long long)s->n);
  }
  int bos_dflt = s->spm || (s->pre && (s->pre->flags & GT_ADD_BOS));
  clf_status st = gt_bool(s, "tokenizer.ggml.add_bos_token", bos_dflt, &s->add_bos);
  if (st == CLF_OK) st = gt_bool(s, "tokenizer.ggml.add_eos_token", 0, &s->add_eos);
  if (st == CLF_OK) st = gt_bool(s, "tokenizer.ggml.add_space_prefix", 1, &s->add_space_prefix);
  int add_sep = 0; /* BERT / RoBERTa-style vocabularies, which are not read here */
  if (st == CLF_OK) st = gt_bool(s, "tokenizer.ggml.add_sep_token", 0, &add_sep);
  if (st == CLF_OK && add_sep)
    st = gt_fail(s, CLF_E_UNSUPPORTED, "tokenizer.ggml.add_sep_token true (a separator after the text) is not "
                 "supported");
  for (int k = 0; k < 2 && st == CLF_OK; k++) /* llama.cpp refuses these too */
    if ((k ? s->add_eos : s->add_bos) && s->id[k] < 0)
      st = gt_fail(s, CLF_E_FORMAT, "tokenizer.ggml.add_%s_token is true, but tokenizer.ggml.%s_token_id is not set",
                   g_special[k], g_special[k]);
  return st;
}

/* A metadata string, or NULL when absent; an error when not a string. */
static clf_status gt_str(const gt *s, const char *key, const char **out) {
  long i = clf_gguf_find(s->g, key);
  clf_gguf_kv kv;
  *out = NULL;
  if (i < 0) return CLF_OK;
  if (clf_gguf_kv_at(s->g, (size_t)i, &kv) != CLF_OK || kv.type != CLF_GGUF_STRING ||
      clf_gguf_get_str(s->g, (size_t)i, 0, out, NULL) != CLF_OK)
    return gt_fail(s, CLF_E_FORMAT, "%s is not a string", key);
  return CLF_OK;
}

/* tokenizer.ggml.model and, for BPE, tokenizer.ggml.pre (absent: "default",
 * as llama.cpp takes it). */
static clf_status gt_kind(gt *s) {
  const char *model, *pre;
  clf_status st = gt_str(s, "tokenizer.ggml.model", &model);
  if (st == CLF_OK) st = gt_str(s, "tokenizer.ggml.pre", &pre);
  if (st != CLF_OK) return st;
  if (!model)
    return gt_fail(s, CLF_E_UNSUPPORTED, "no tokenizer.ggml.model: a GGUF file without a tokenizer is not supported");
  if (strcmp(model, "llama") && strcmp(model, "gpt2"))
    return gt_fail(s, CLF_E_UNSUPPORTED, "tokenizer.ggml.model \"%.40s\" is not supported (\"llama\", SentencePiece, "
                   "\"gpt2\", byte-level BPE, and \"bert\", WordPiece, are)", model);
  s->spm = !strcmp(model, "llama");
  if (s->spm) return CLF_OK;
  char name[80];
  if (!pre) pre = "";
  snprintf(name, sizeof(name), "|%s|", pre);
  for (size_t i = 0; i < CLF__ARRAY_LEN(g_pre) && !s->pre && strlen(pre) < 64 && !strchr(pre, '|'); i++)
    if (strstr(g_pre[i].names, name)) s->pre = &g_pre[i];
  if (!s->pre)
    return gt_fail(s, CLF_E_UNSUPPORTED, "tokenizer.ggml.pre \"%.40s\" (the pre-tokenizer) is not supported", pre);
  return CLF_OK;
}

/* ---- the tokenizer.json they stand for ----
 * Each node is attached to its parent when made, so deleting the root frees
 * everything, also after running out of memory half-way (a NULL parent
 * makes every cJSON_Add* return NULL). */

/* A new object under parent (appended when parent is an array and key
 * NULL), with "type" when type is not NULL; NULL out of memory. */
static cJSON *node(cJSON *parent, const char *key, const char *type) {
  cJSON *o = key ? cJSON_AddObjectToObject(parent, key) : cJSON_CreateObject();
  if (!o) return NULL;
  if (!key && !cJSON_AddItemToArray(parent, o)) {
    cJSON_Delete(o);
    return NULL;
  }
  return !type || cJSON_AddStringToObject(o, "type", type) ? o : NULL;
}

/* {"type": "Replace", "pattern": {"String": from}, "content": to} in arr */
static cJSON *replace_step(cJSON *arr, const char *from, const char *to) {
  cJSON *o = node(arr, NULL, "Replace"), *p = cJSON_AddObjectToObject(o, "pattern");
  return cJSON_AddStringToObject(p, "String", from) && cJSON_AddStringToObject(o, "content", to) ? o : NULL;
}

#define SPACE_MARK "\xe2\x96\x81" /* U+2581, SentencePiece's space */

/* SentencePiece: Llama's legacy tokenizer.json (Prepend only with
 * add_space_prefix; llama.cpp prefixes the text and each piece after an
 * added token, as Prepend does). */
static int spm_pipeline(const gt *s, cJSON *root) {
  cJSON *ns = cJSON_AddArrayToObject(node(root, "normalizer", "Sequence"), "normalizers");
  int ok = !s->add_space_prefix || cJSON_AddStringToObject(node(ns, NULL, "Prepend"), "prepend", SPACE_MARK);
  ok = ok && replace_step(ns, " ", SPACE_MARK) && cJSON_AddNullToObject(root, "pre_tokenizer");
  cJSON *ds = cJSON_AddArrayToObject(node(root, "decoder", "Sequence"), "decoders");
  ok = ok && replace_step(ds, SPACE_MARK, " ") && node(ds, NULL, "ByteFallback") && node(ds, NULL, "Fuse");
  if (ok && s->add_space_prefix) {
    cJSON *st = node(ds, NULL, "Strip");
    ok = cJSON_AddStringToObject(st, "content", " ") && cJSON_AddNumberToObject(st, "start", 1) &&
         cJSON_AddNumberToObject(st, "stop", 0);
  }
  return ok ? 0 : -1;
}

/* Byte-level BPE: the Split steps of tokenizer.ggml.pre, then ByteLevel. */
static int bpe_pipeline(const gt *s, cJSON *root) {
  cJSON *ps = cJSON_AddArrayToObject(node(root, "pre_tokenizer", "Sequence"), "pretokenizers");
  int ok = ps != NULL;
  for (int i = 0; i < 5 && s->pre->split[i] && ok; i++) {
    cJSON *sp = node(ps, NULL, "Split");
    ok = cJSON_AddStringToObject(cJSON_AddObjectToObject(sp, "pattern"), "Regex", s->pre->split[i]) &&
         cJSON_AddStringToObject(sp, "behavior", "Isolated");
  }
  cJSON *bl = ok ? node(ps, NULL, "ByteLevel") : NULL;
  ok = cJSON_AddFalseToObject(bl, "add_prefix_space") && cJSON_AddFalseToObject(bl, "use_regex");
  ok = ok && ((s->pre->flags & GT_NFC) ? node(root, "normalizer", "NFC") != NULL
                                       : cJSON_AddNullToObject(root, "normalizer") != NULL);
  return ok && node(root, "decoder", "ByteLevel") ? 0 : -1;
}

/* added_tokens: the control, user-defined and unknown tokens, which
 * llama.cpp cuts out of the raw text before anything else (not normalized,
 * no lstrip / rstrip / single_word); control and unknown ones are special
 * (dropped by decode's skip_special, as llama.cpp renders them only with
 * `special`). */
static int gt_added(const clf_tokenizer *t, const gt *s, cJSON *root) {
  cJSON *arr = cJSON_AddArrayToObject(root, "added_tokens");
  if (!arr) return -1;
  for (uint64_t i = 0; i < s->n; i++) {
    int ty = s->type[i];
    if (ty != GT_CONTROL && ty != GT_USER_DEFINED && ty != GT_UNKNOWN) continue;
    cJSON *a = node(arr, NULL, NULL);
    if (!cJSON_AddNumberToObject(a, "id", (double)i) || !cJSON_AddStringToObject(a, "content", t->id_to_token[i]) ||
        !cJSON_AddBoolToObject(a, "special", ty != GT_USER_DEFINED) || !cJSON_AddFalseToObject(a, "normalized"))
      return -1;
  }
  return 0;
}

/* post_processor: "bos $A eos" as add_bos / add_eos say. */
static int gt_template(const gt *s, cJSON *root) {
  cJSON *o = node(root, "post_processor", "TemplateProcessing");
  cJSON *single = cJSON_AddArrayToObject(o, "single"), *specials = cJSON_AddObjectToObject(o, "special_tokens");
  int ok = specials != NULL;
  for (int k = 0; k < 3 && ok; k++) { /* bos, $A, eos */
    if (k == 1) {
      ok = cJSON_AddStringToObject(cJSON_AddObjectToObject(node(single, NULL, NULL), "Sequence"), "id", "A") != NULL;
      continue;
    }
    if (!(k ? s->add_eos : s->add_bos)) continue;
    const char *name = g_special[k / 2];
    cJSON *item = node(single, NULL, NULL);
    cJSON *sp = cJSON_AddObjectToObject(specials, name), *ids = cJSON_AddArrayToObject(sp, "ids");
    cJSON *id = cJSON_CreateNumber((double)s->id[k / 2]);
    if (!cJSON_AddItemToArray(ids, id)) {
      cJSON_Delete(id);
      return -1;
    }
    ok = cJSON_AddStringToObject(cJSON_AddObjectToObject(item, "SpecialToken"), "id", name) &&
         cJSON_AddStringToObject(sp, "id", name);
  }
  return ok ? 0 : -1;
}

/* model: a BPE over the vocabulary already in t->vocab (an empty
 * model.vocab adds nothing); the merges are put in after loading
 * (bpe_merges, spm_merges). */
static int gt_model(const clf_tokenizer *t, const gt *s, cJSON *root) {
  cJSON *m = node(root, "model", "BPE");
  int ok = cJSON_AddObjectToObject(m, "vocab") && cJSON_AddArrayToObject(m, "merges") &&
           cJSON_AddBoolToObject(m, "byte_fallback", s->spm) && cJSON_AddBoolToObject(m, "fuse_unk", s->spm) &&
           cJSON_AddBoolToObject(m, "ignore_merges", !s->spm && (s->pre->flags & GT_IGNORE_MERGES));
  if (ok && s->spm && s->id[2] >= 0) ok = cJSON_AddStringToObject(m, "unk_token", t->id_to_token[s->id[2]]) != NULL;
  return ok ? 0 : -1;
}

/* tokenizer_config.json's equivalent: the special tokens, add_bos_token /
 * add_eos_token, clean_up_tokenization_spaces (llama.cpp's clean_spaces:
 * byte-level BPE but some pre-tokenizers), tokenizer.chat_template (or,
 * without one, the format its turn tokens identify: chat_family.c). */
static clf_status gt_config(const clf_tokenizer *t, const gt *s, cJSON **out) {
  static const char *const keys[4] = {"bos_token", "eos_token", "unk_token", "pad_token"};
  const char *chat;
  clf_status st = gt_str(s, "tokenizer.chat_template", &chat);
  if (st == CLF_OK && !chat) chat = clf__turn_chat_template(t); /* NULL: none, as before */
  if (st != CLF_OK) return st;
  cJSON *c = cJSON_CreateObject();
  int ok = c != NULL;
  for (int k = 0; k < 4 && ok; k++)
    if (s->id[k] >= 0) ok = cJSON_AddStringToObject(c, keys[k], t->id_to_token[s->id[k]]) != NULL;
  ok = ok && cJSON_AddBoolToObject(c, "add_bos_token", s->add_bos) &&
       cJSON_AddBoolToObject(c, "add_eos_token", s->add_eos);
  ok = ok && cJSON_AddBoolToObject(c, "clean_up_tokenization_spaces", !s->spm && !(s->pre->flags & GT_KEEP_SPACES));
  if (ok && chat) ok = cJSON_AddStringToObject(c, "chat_template", chat) != NULL;
  if (!ok) {
    cJSON_Delete(c);
    return oom();
  }
  *out = c;
  return CLF_OK;
}

/* ---- merges ---- */

static clf_status merge_add(clf__hf *h, int64_t a, int64_t b, int64_t rank, int64_t merged, int keep_first) {
  int32_t key[2] = {(int32_t)a, (int32_t)b};
  if (keep_first && clf__strmap_get(&h->merges, (const char *)key, sizeof(key)) >= 0) return CLF_OK;
  return clf__strmap_put(&h->merges, (const char *)key, sizeof(key), rank << 32 | merged) ? oom() : CLF_OK;
}

/* tokenizer.ggml.merges: "a b" (split at the first space after the first
 * byte, as llama.cpp does), ranked by place; a pair listed twice keeps its
 * first rank (llama.cpp's emplace). */
static clf_status bpe_merges(const clf_tokenizer *t, const gt *s, clf__hf *h) {
  long k;
  uint64_t n;
  clf_status st = gt_array(s, "tokenizer.ggml.merges", 0, 1, &k, &n);
  for (uint64_t i = 0; i < n && st == CLF_OK; i++) {
    const char *m, *sp;
    size_t len;
    clf_gguf_get_str(s->g, (size_t)k, i, &m, &len);
    if (len < 3 || !(sp = memchr(m + 1, ' ', len - 1)) || sp + 1 == m + len)
      return gt_fail(s, CLF_E_FORMAT, "tokenizer.ggml.merges[%llu] \"%.40s\" is not two tokens joined by a space",
                     (unsigned long long)i, m);
    size_t la = (size_t)(sp - m), lb = len - la - 1;
    int64_t a = clf__strmap_get(&t->vocab, m, la), b = clf__strmap_get(&t->vocab, sp + 1, lb), ab = -1;
    char *joined = malloc(la + lb);
    if (!joined) return oom();
    memcpy(joined, m, la);
    memcpy(joined + la, sp + 1, lb);
    if (a >= 0 && b >= 0) ab = clf__strmap_get(&t->vocab, joined, la + lb);
    free(joined);
    if (ab < 0)
      return gt_fail(s, CLF_E_FORMAT, "tokenizer.ggml.merges[%llu] \"%.40s\" joins tokens that are not in "
                     "tokenizer.ggml.tokens", (unsigned long long)i, m);
    st = merge_add(h, a, b, (int64_t)i, ab, 1);
  }
  return st;
}

static int score_desc(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x < y) - (x > y);
}

/* A token for the sorts of spm_merges. */
typedef struct spm_tok {
  const char *s;
  size_t len;
  int64_t id;
} spm_tok;

/* Byte order, a token before the tokens it begins. */
static int by_bytes(const void *a, const void *b) {
  const spm_tok *x = a, *y = b;
  int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);
  return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* The same read from the end: a token before the tokens it ends. */
static int by_bytes_from_end(const void *a, const void *b) {
  const spm_tok *x = a, *y = b;
  for (size_t i = 1; i <= x->len && i <= y->len; i++) {
    unsigned char p = (unsigned char)x->s[x->len - i], q = (unsigned char)y->s[y->len - i];
    if (p != q) return (p > q) - (p < q);
  }
  return (x->len > y->len) - (x->len < y->len);
}

/* Whether u begins (at_end: ends) with the shorter v. */
static int is_part(const spm_tok *v, const spm_tok *u, int at_end) {
  return v->len < u->len && !memcmp(u->s + (at_end ? u->len - v->len : 0), v->s, v->len);
}

/* stack[0..*depth) (indices into v, sorted by by_bytes, or by
 * by_bytes_from_end when at_end) holds v[i - 1] and the tokens that begin
 * (end) it, each beginning (ending) the next.  In that order the tokens
 * that begin (end) v[i] are among them, so popping the top until it begins
 * (ends) v[i] leaves exactly those: each token is pushed and popped once. */
static void part_stack(const spm_tok *v, size_t i, int at_end, size_t *stack, size_t *depth) {
  while (*depth && !is_part(&v[stack[*depth - 1]], &v[i], at_end)) (*depth)--;
}

/* SentencePiece: every token that is two tokens joined (at a character
 * boundary) is a merge of them, ranked by its score, highest first, equal
 * scores sharing a rank so that the leftmost pair goes first: the order of
 * llama.cpp's llm_tokenizer_spm queue.  Looking up every prefix and suffix
 * of every token was quadratic in a token's length (24 s for one token of
 * 200 KB).  Here the tokens are sorted twice (n log n comparisons, each of
 * at most CLF_LIMIT_TOKEN_BYTES), and the rest is linear in the
 * vocabulary's bytes: in byte order the tokens that begin each token are a
 * stack, recorded per token (fewer than its length); read from the end,
 * those that end it are one too, and a prefix and a suffix that meet at a
 * character boundary are a pair. */
static clf_status spm_merges(const clf_tokenizer *t, const gt *s, clf__hf *h) {
  size_t n = (size_t)s->n, max_len = 0, depth = 0, levels = 0;
  float *sorted = malloc(n * sizeof(float));
  spm_tok *v = malloc(n * sizeof(spm_tok));
  size_t *first = malloc(n * sizeof(size_t)), *count = malloc(n * sizeof(size_t));
  size_t *lens = malloc(n * sizeof(size_t)), *stack = NULL;
  int64_t *at = NULL;
  clf__ids pre = {0}; /* the ids of the tokens that begin each token: first[id], count[id] of them */
  clf_status st = sorted && v && first && count && lens ? CLF_OK : oom();
  for (size_t i = 0; i < n && st == CLF_OK; i++) {
    lens[i] = strlen(t->id_to_token[i]);
    v[i] = (spm_tok){t->id_to_token[i], lens[i], (int64_t)i};
    if (v[i].len > max_len) max_len = v[i].len;
  }
  if (st == CLF_OK && (!(stack = malloc((max_len + 1) * sizeof(size_t))) ||
                       !(at = malloc((max_len + 1) * sizeof(int64_t)))))
    st = oom();
  if (st == CLF_OK) {
    memcpy(sorted, s->score, n * sizeof(float));
    qsort(sorted, n, sizeof(float), score_desc);
    for (size_t i = 0; i < n; i++) /* distinct scores, highest first */
      if (!levels || sorted[levels - 1] != sorted[i]) sorted[levels++] = sorted[i];
    qsort(v, n, sizeof(spm_tok), by_bytes);
  }
  for (size_t i = 0; i < n && st == CLF_OK; i++) {
    part_stack(v, i, 0, stack, &depth);
    first[v[i].id] = pre.n;
    count[v[i].id] = depth;
    for (size_t k = 0; k < depth && st == CLF_OK; k++)
      if (clf__ids_push(&pre, v[stack[k]].id)) st = oom();
    stack[depth++] = i;
  }
  if (st == CLF_OK) {
    for (size_t k = 0; k <= max_len; k++) at[k] = -1;
    qsort(v, n, sizeof(spm_tok), by_bytes_from_end);
  }
  depth = 0;
  for (size_t i = 0; i < n && st == CLF_OK; i++) {
    part_stack(v, i, 1, stack, &depth);
    const spm_tok *u = &v[i];
    const int64_t *p = pre.v ? pre.v + first[u->id] : NULL; /* NULL: no token begins another */
    size_t lo = 0, hi = levels;
    while (hi - lo > 1) { /* the rank of its score */
      size_t mid = (lo + hi) / 2;
      if (sorted[mid] >= s->score[u->id]) lo = mid; else hi = mid;
    }
    for (size_t k = 0; k < count[u->id]; k++) at[lens[p[k]]] = p[k];
    for (size_t k = 0; k < depth && st == CLF_OK; k++) { /* a suffix and the prefix before it */
      size_t cut = u->len - v[stack[k]].len;
      if (at[cut] >= 0 && ((unsigned char)u->s[cut] & 0xC0) != 0x80)
        st = merge_add(h, at[cut], v[stack[k]].id, (int64_t)lo, u->id, 0);
    }
    for (size_t k = 0; k < count[u->id]; k++) at[lens[p[k]]] = -1;
    stack[depth++] = i;
  }
  free(sorted);
  free(v);
  free(first);
  free(count);
  free(lens);
  free(stack);
  free(at);
  free(pre.v);
  return st;
}

/* ---- loading ---- */

static clf_status gt_read(clf_tokenizer *t, gt *s, cJSON **root, cJSON **config) {
  clf_status st = gt_kind(s);
  if (st == CLF_OK) st = gt_tokens(t, s);
  if (st == CLF_OK) st = gt_types_scores(s);
  if (st == CLF_OK) st = gt_specials(s);
  if (st == CLF_OK) st = gt_config(t, s, config);
  if (st != CLF_OK) return st;
  *root = cJSON_CreateObject();
  if (!*root || gt_added(t, s, *root) || gt_template(s, *root) || gt_model(t, s, *root) ||
      (s->spm ? spm_pipeline(s, *root) : bpe_pipeline(s, *root)))
    return oom();
  t->eos_id = s->id[1]; /* unk_id: the model's unk_token (SentencePiece only; byte-level BPE drops what it lacks) */
  t->clean_up_spaces = clf__tok_cfg_bool(*config, "clean_up_tokenization_spaces", 1) == 1;
  return CLF_OK;
}

clf_status clf__gguf_tok_load(clf_tokenizer *t, const char *file, void **config) {
  gt s = {0};
  cJSON *root = NULL, *cfg = NULL;
  clf_gguf *g = NULL;
  *config = NULL;
  clf_status st = clf_gguf_open(file, &g);
  s.g = g;
  s.file = file;
  const long km = st == CLF_OK ? clf_gguf_find(g, "tokenizer.ggml.model") : -1;
  const char *model = NULL;
  if (km >= 0 && clf_gguf_get_str(g, (size_t)km, 0, &model, NULL) == CLF_OK && !strcmp(model, "bert")) {
    st = clf__gguf_wpm_load(t, g, file); /* WordPiece, not a tokenizer.json pipeline */
    clf_gguf_close(g);
    return st;
  }
  if (st == CLF_OK) st = gt_read(t, &s, &root, &cfg);
  if (st == CLF_OK) st = clf__hf_load_json(t, root, cfg, file);
  if (st == CLF_OK) st = s.spm ? spm_merges(t, &s, t->hf) : bpe_merges(t, &s, t->hf);
  cJSON_Delete(root);
  free(s.type);
  free(s.score);
  clf_gguf_close(g);
  if (st == CLF_OK) *config = cfg;
  else cJSON_Delete(cfg);
  return st;
}
