/* tokenizer.h - what the tokenizer modules share (internal).
 *
 * tokenizer.c holds the public entry points, UTF-8 and Unicode-class helpers,
 * the string->id map and special-token splitting; tok_wordpiece.c,
 * tok_bpe.c and tok_sentencepiece.cc hold one model each; tok_hfjson.c and
 * tok_hfrun.c the tokenizer.json pipeline, which tok_gguf.c builds from a
 * GGUF file's metadata.
 */
#ifndef CLF_TOKENIZER_H
#define CLF_TOKENIZER_H

#include "clformer.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- growable buffers ---- */
typedef struct clf__ids { int64_t *v; size_t n, cap; } clf__ids;
typedef struct clf__str { char *s; size_t n, cap; } clf__str; /* s NUL-terminated */
/* v (of capacity *cap elements of `size` bytes) with room for `need`:
 * v itself, or a realloc of it to the capacity doubled from 64 (*cap
 * updated); NULL when out of memory, v then untouched. */
void *clf__grow(void *v, size_t *cap, size_t need, size_t size);
/* The path of the first string of a valid JSON text that holds a NUL
 * (\u0000), which a C string cannot carry, after `prefix` (may be NULL)
 * as the server names it ("messages[1].content"), into path; 0 when there
 * is none (chat_template.c). */
int clf__json_nul_path(const char *json, const char *prefix, char *path, size_t cap);
int clf__ids_push(clf__ids *a, int64_t id);      /* 0 on success, -1 out of memory */
int clf__str_add(clf__str *b, const char *s, size_t n);
int clf__str_addc(clf__str *b, uint32_t cp);     /* appends cp as UTF-8 */

/* ---- UTF-8 and Unicode classes ---- */
/* Decodes the code point at s[*i] (advancing *i); -1 on invalid UTF-8. */
int32_t clf__utf8_next(const char *s, size_t n, size_t *i);
size_t clf__utf8_put(char *out, uint32_t cp); /* writes 1-4 bytes */
enum {
  CLF__UC_C = 0,  /* Cc Cf Cs Co Cn */
  CLF__UC_LC,     /* Lu Ll Lt */
  CLF__UC_LO,     /* Lm Lo */
  CLF__UC_MN,
  CLF__UC_M,      /* Mc Me */
  CLF__UC_N,
  CLF__UC_P,
  CLF__UC_S,
  CLF__UC_ZS,
  CLF__UC_Z       /* Zl Zp */
};
int clf__uc_class(uint32_t cp);       /* Python's unicodedata, coarse */
int clf__uc_regex_class(uint32_t cp); /* as the `regex` module sees \p{L}/\p{N} */
int clf__uc_isspace(uint32_t cp);     /* Python's str.isspace() */
/* Python's str.lower() of one code point; writes 1 or 2 code points. */
int clf__uc_lower(uint32_t cp, uint32_t out[2]);

/* ---- string -> int map (open addressing; keys copied) ---- */
typedef struct clf__strmap {
  char **keys;
  size_t *lens;
  int64_t *vals;
  size_t cap, count;
} clf__strmap;
int clf__strmap_put(clf__strmap *m, const char *k, size_t n, int64_t v); /* -1 OOM */
int64_t clf__strmap_get(const clf__strmap *m, const char *k, size_t n); /* -1 if absent */
void clf__strmap_free(clf__strmap *m);

/* ---- the tokenizer ---- */
typedef enum { CLF__TOK_WORDPIECE, CLF__TOK_BPE, CLF__TOK_SPM, CLF__TOK_HFJSON, CLF__TOK_XLMR } clf__tok_kind;

#define CLF__TOK_MAX_SPECIAL 8

struct clf_tokenizer {
  clf__tok_kind kind;
  clf__strmap vocab;   /* token -> id */
  char **id_to_token;  /* [n_ids], NULL where no token has that id */
  size_t n_ids;
  /* special tokens: their text and id (-1 when not in the vocabulary) */
  char *special[CLF__TOK_MAX_SPECIAL];
  int64_t special_id[CLF__TOK_MAX_SPECIAL];
  int n_special;
  /* bit k: special[k] takes the whitespace before / after it (AddedToken's
   * lstrip / rstrip in tokenizer_config.json's added_tokens_decoder) */
  unsigned special_lstrip, special_rstrip;
  int64_t unk_id, cls_id, sep_id, eos_id;
  int clean_up_spaces; /* clean_up_tokenization_spaces */
  /* WordPiece */
  int do_lower_case, strip_accents /* -1 unset */, tokenize_chinese;
  /* BPE */
  clf__strmap ranks; /* "left right" -> rank */
  int add_prefix_space;
  int roberta; /* RobertaTokenizer: <s> X </s>, <mask> */
  /* SentencePiece (Marian) */
  void *spm_source, *spm_target;
  /* tokenizer.json: its pipeline (tok_hf.h's clf__hf) */
  void *hf;
  /* tokenizer_config.json's chat_template (a GGUF file's
   * tokenizer.chat_template; of a list of named templates, "default"), kept
   * for chat formatting; NULL when none */
  char *chat_template;
  /* the variables it renders with, as a JSON object text: transformers'
   * special_tokens_map (bos_token, eos_token, unk_token, sep_token,
   * pad_token, cls_token, mask_token as strings, additional_special_tokens
   * a list); NULL when there is no template */
  char *chat_vars;
};

/* Fills t->vocab and t->id_to_token from a JSON object {token: id}. */
clf_status clf__tok_load_vocab_json(clf_tokenizer *t, const char *path);
/* The same from a parsed object (a cJSON *; path names it in errors). */
clf_status clf__tok_vocab_from_json(clf_tokenizer *t, const void *obj, const char *path);
/* Unicode NFC of the UTF-8 s[0..n) (valid), appended to out; -1 out of memory. */
int clf__nfc_utf8(const char *s, size_t n, clf__str *out);
/* CLF_OK for a token of n bytes; past CLF_LIMIT_TOKEN_BYTES (base/limits.h)
 * CLF_E_FORMAT, "clf_tokenizer_load: <where> is <n> bytes long, past the
 * limit ...", where naming the file and the token's place in it. */
clf_status clf__tok_check_len(size_t n, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Sets id_to_token[id] = token (growing it); -1 out of memory. */
int clf__tok_set_token(clf_tokenizer *t, int64_t id, const char *tok, size_t n);
/* Adds a special token (its id looked up in the vocabulary). */
clf_status clf__tok_add_special(clf_tokenizer *t, const char *text);
/* Reads tokenizer_config.json of dir (NULL when absent; error if malformed).
 * The result is a cJSON * passed as void * to keep cJSON out of this header. */
clf_status clf__tok_read_config(const char *dir, void **config);
/* config's string value for key (plain or {"content": ...}), or dflt. */
const char *clf__tok_cfg_str(void *config, const char *key, const char *dflt);
/* config's boolean for key: 1/0, or dflt when absent, -1 when null. */
int clf__tok_cfg_bool(void *config, const char *key, int dflt);
int clf__tok_is_special_id(const clf_tokenizer *t, int64_t id);
int clf__tok_is_special_text(const clf_tokenizer *t, const char *s, size_t n);
char *clf__tok_path(const char *dir, const char *name); /* malloc'd */
/* The largest tokenizer file read (tokenizer.json, vocab.txt, vocab.json,
 * merges.txt, tokenizer_config.json): real ones stay under 50 MiB. */
#define CLF__TOK_FILE_MAX_BYTES ((size_t)256 << 20)
/* The whole file, NUL-terminated (malloc'd); NULL with *st set on failure
 * (base/file.h's clf__read_file, capped at CLF__TOK_FILE_MAX_BYTES). */
char *clf__tok_read_text(const char *path, size_t *len, clf_status *st);
/* GPT-2's bytes_to_unicode(): fwd[byte] is its code point; inv (may be
 * NULL) the inverse, indexed by code point, -1 where none (tok_bpe.c). */
void clf__byte_map(uint32_t fwd[256], int inv[256 + 68]);
/* b[0..n) as UTF-8 with each maximal invalid subsequence replaced by one
 * U+FFFD (Python's errors="replace", Rust's from_utf8_lossy); -1 OOM. */
int clf__utf8_replace(const unsigned char *b, size_t n, clf__str *out);
/* Hugging Face's clean_up_tokenization, in place. */
void clf__tok_clean_up(clf__str *s);

/* Model-specific parts.  encode_chunk gets text with no special tokens. */
clf_status clf__wordpiece_load(clf_tokenizer *t, const char *dir, void *config);
/* The settings of a WordPiece vocabulary already in t (do_lower_case,
 * strip_accents, tokenize_chinese_chars, the special tokens) from config,
 * tokenizer_config.json's keys; `path` names the vocabulary in errors. */
clf_status clf__wordpiece_settings(clf_tokenizer *t, void *config, const char *path);
clf_status clf__wordpiece_encode(clf_tokenizer *t, const char *s, size_t n, clf__ids *out);
clf_status clf__wordpiece_decode(clf_tokenizer *t, const char **toks, size_t n, clf__str *out);
clf_status clf__bpe_load(clf_tokenizer *t, const char *dir, void *config);
clf_status clf__bpe_encode(clf_tokenizer *t, const char *s, size_t n, clf__ids *out);
clf_status clf__bpe_decode(clf_tokenizer *t, const char **toks, size_t n, clf__str *out);
clf_status clf__spm_load(clf_tokenizer *t, const char *dir, void *config);
clf_status clf__spm_encode(clf_tokenizer *t, const char *s, size_t n, clf__ids *out);
clf_status clf__spm_decode(clf_tokenizer *t, const char **toks, size_t n, clf__str *out);
void clf__spm_free(clf_tokenizer *t);
/* XLM-R (XLMRobertaTokenizer): sentencepiece.bpe.model with fairseq's ids. */
clf_status clf__xlmr_load(clf_tokenizer *t, const char *dir, void *config);
clf_status clf__xlmr_encode(clf_tokenizer *t, const char *s, size_t n, clf__ids *out);
clf_status clf__xlmr_decode(clf_tokenizer *t, const char **toks, size_t n, clf__str *out);
/* tokenizer.json (tok_hfjson.c loads it, tok_hfrun.c runs it): encode and
 * decode take the whole text / id list (added tokens, templates and the
 * decoder chain are theirs). */
clf_status clf__hf_load(clf_tokenizer *t, const char *dir, void *config);
/* The same from tokenizer.json's parsed root object (a cJSON *, borrowed;
 * `path` names it in errors).  t->vocab may hold tokens already: the
 * model's vocab adds to them. */
clf_status clf__hf_load_json(clf_tokenizer *t, const void *root, void *config, const char *path);
/* A GGUF file's tokenizer (tok_gguf.c): tokenizer.ggml.* as the tokenizer.json
 * pipeline they stand for (t->kind CLF__TOK_HFJSON); *config gets the
 * tokenizer_config.json they stand for (a cJSON *, the caller's to free). */
clf_status clf__gguf_tok_load(clf_tokenizer *t, const char *file, void **config);
/* The chat template for a GGUF file without tokenizer.chat_template whose
 * vocabulary holds a known format's turn tokens (chat_family.c: Gemma's);
 * NULL otherwise. */
const char *clf__turn_chat_template(const clf_tokenizer *t);
/* The WordPiece tokenizer of GGUF g (tokenizer.ggml.model "bert",
 * tok_gguf_wpm.c): t->kind set, vocabulary and settings filled. */
clf_status clf__gguf_wpm_load(clf_tokenizer *t, const clf_gguf *g, const char *file);
clf_status clf__hf_encode(clf_tokenizer *t, const char *s, size_t n, int add_special, clf__ids *out);
clf_status clf__hf_decode(clf_tokenizer *t, const int64_t *ids, size_t n, int skip_special, clf__str *out);
void clf__hf_free(clf_tokenizer *t);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif
