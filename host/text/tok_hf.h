/* tok_hf.h - a tokenizer.json pipeline as the Hugging Face `tokenizers`
 * library runs it (internal to tok_hfjson.c, which builds it from the file,
 * and tok_hfrun.c, which runs it).
 *
 * encode: added tokens are cut out of the text (those with normalized=false
 * from the raw text, those with normalized=true from each normalized
 * segment); each segment goes through the normalizers, the pre-tokenizers
 * (into pieces) and the BPE model (pieces -> ids); the post-processor's
 * template adds the special ids.  decode: ids -> tokens (added tokens by
 * their content, unknown ids dropped), the decoder chain, then joined.
 */
#ifndef CLF_TEXT_TOK_HF_H
#define CLF_TEXT_TOK_HF_H

#include "tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#define CLF__HF_MAX_STEPS 8 /* normalizers / pre-tokenizers / decoders in a Sequence */
#define CLF__HF_MAX_TEMPLATE 8

typedef enum { CLF__HF_NORM_PREPEND, CLF__HF_NORM_REPLACE, CLF__HF_NORM_NFC } clf__hf_norm_kind;
typedef struct {
  clf__hf_norm_kind kind;
  char *text;       /* Prepend: what; Replace: the literal pattern (NULL when re) */
  char *content;    /* Replace: the replacement */
  pcre2_code *re;   /* Replace with a Regex pattern */
} clf__hf_norm;

typedef enum { CLF__HF_PRE_SPLIT, CLF__HF_PRE_BYTELEVEL, CLF__HF_PRE_METASPACE } clf__hf_pre_kind;
/* SplitDelimiterBehavior */
typedef enum {
  CLF__HF_REMOVED, CLF__HF_ISOLATED, CLF__HF_MERGED_PREV, CLF__HF_MERGED_NEXT, CLF__HF_CONTIGUOUS
} clf__hf_behavior;
typedef enum { CLF__HF_PREPEND_ALWAYS, CLF__HF_PREPEND_FIRST, CLF__HF_PREPEND_NEVER } clf__hf_prepend;
typedef struct {
  clf__hf_pre_kind kind;
  pcre2_code *re;            /* Split's pattern; ByteLevel's GPT-2 pattern when use_regex */
  clf__hf_behavior behavior; /* Split */
  int invert;                /* Split */
  int add_prefix_space;      /* ByteLevel */
  char repl[8];              /* Metaspace: the replacement character (UTF-8) */
  clf__hf_prepend prepend;   /* Metaspace */
  int split;                 /* Metaspace */
} clf__hf_pre;

typedef enum {
  CLF__HF_DEC_BYTELEVEL, CLF__HF_DEC_REPLACE, CLF__HF_DEC_BYTEFALLBACK, CLF__HF_DEC_FUSE, CLF__HF_DEC_STRIP,
  CLF__HF_DEC_METASPACE
} clf__hf_dec_kind;
typedef struct {
  clf__hf_dec_kind kind;
  char *from, *to;         /* Replace (literal); Metaspace: from = the replacement */
  int start, stop;         /* Strip: characters equal to `to` removed from each end */
  clf__hf_prepend prepend; /* Metaspace */
} clf__hf_dec;

typedef struct {
  char *text;  /* the content */
  char *match; /* what is matched: the content, normalized when `normalized` */
  size_t len;  /* of match */
  int64_t id;
  int special, lstrip, rstrip, single_word, normalized;
} clf__hf_added;

typedef struct clf__hf {
  clf__hf_norm norm[CLF__HF_MAX_STEPS];
  int n_norm;
  clf__hf_pre pre[CLF__HF_MAX_STEPS];
  int n_pre;
  clf__hf_dec dec[CLF__HF_MAX_STEPS];
  int n_dec, has_decoder; /* no decoder: tokens joined by spaces */
  clf__hf_added *added;   /* sorted by the length of match, longest first */
  size_t n_added;
  pcre2_code *word;       /* one character of Rust regex's \w, for single_word */
  /* BPE: (left id, right id) as 8 bytes -> rank << 32 | merged id */
  clf__strmap merges;
  int byte_fallback, fuse_unk, ignore_merges;
  int64_t byte_id[256]; /* the ids of <0x00>..<0xFF>, -1 where absent */
  /* the single-sequence template: prefix ids, $A, suffix ids */
  int64_t prefix[CLF__HF_MAX_TEMPLATE], suffix[CLF__HF_MAX_TEMPLATE];
  int n_prefix, n_suffix;
} clf__hf;

/* The normalizers applied to s[0..n), appended to out; -1 out of memory. */
int clf__hf_normalize(const clf__hf *h, const char *s, size_t n, clf__str *out);

/* A growable list of pieces of text. */
typedef struct {
  clf__str *v;
  size_t n, cap;
} clf__hf_pieces;

/* The GPT-2 pattern ByteLevel uses with use_regex. */
#define CLF__HF_GPT2_PATTERN \
  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

#endif /* CLF_TEXT_TOK_HF_H */
