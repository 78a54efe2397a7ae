/* gguf_model.h - a GGUF file as a model: where the file is, the config
 * transformers 4.46's GGUF loader derives from its metadata, and the
 * Hugging Face name of each tensor.  Internal to clformer. */
#ifndef CLF_IO_GGUF_MODEL_H
#define CLF_IO_GGUF_MODEL_H

#include "config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where `path` names a GGUF model, *file is its path (malloc'd): `path`
 * itself when a regular file (whatever its name: clf_gguf_open then checks
 * it), or the one *.gguf file of a directory without config.json.
 * Otherwise *file is NULL (a Hugging Face directory, or nothing there: the
 * caller's own errors say so).  Errors, on ctx: several .gguf files and no
 * config.json to choose by, a part of a split model ("-00001-of-00003.gguf"),
 * out of memory. */
clf_status clf__gguf_model_file(clf_context *ctx, const char *path, char **file);

/* A GGUF architecture as rows, written by the family that reads it (one
 * file above) and handed down to this adapter, which names none:
 * general.architecture, the config.json it makes from the metadata, and
 * the Hugging Face name of every tensor.  Keys and names follow
 * transformers 4.46's GGUF_CONFIG_MAPPING and GGUF_TENSOR_MAPPING. */

/* What a metadata key holds: an integer in lo..hi, or a finite number
 * that is positive, or in (0, 1]. */
typedef enum { CLF__GGUF_INT, CLF__GGUF_POSITIVE, CLF__GGUF_EPSILON } clf__gguf_kind;
typedef struct clf__gguf_key {
  const char *gguf; /* "%s.block_count": %s is the architecture */
  const char *hf;   /* the config.json key it fills */
  int required;
  clf__gguf_kind kind;
  int64_t lo, hi; /* an integer's range */
} clf__gguf_key;
#define CLF__GGUF_INT_KEY(gguf, hf, req, lo, hi) {gguf, hf, req, CLF__GGUF_INT, lo, hi}
#define CLF__GGUF_NUM_KEY(gguf, hf, kind) {gguf, hf, 0, CLF__GGUF_##kind, 0, 0}

/* What a tensor row says besides its names. */
enum {
  CLF__GGUF_T = 1,         /* its .weight is the transpose of transformers' (a Conv1D weight) */
  CLF__GGUF_PERMUTE_Q = 2, /* rows permuted per head, by {arch}.attention.head_count (convert_hf_to_gguf's q) */
  CLF__GGUF_PERMUTE_K = 4, /* the same by {arch}.attention.head_count_kv (its k) */
  CLF__GGUF_COPY = 8,      /* a copy the converter writes (hf NULL): not read, and not refused */
  CLF__GGUF_MINUS_ONE = 16, /* the file holds 1 + transformers' values (Gemma's norms, whose 1 + w the converter
                              stores): 1 is taken off as read */
};
/* A tensor: the model's whole name ("token_embd.weight"), or a layer's
 * part ("attn_q", for blk.N.attn_q.weight and .bias). */
typedef struct clf__gguf_name {
  const char *gguf, *hf;
  unsigned flags;
} clf__gguf_name;

/* What the config of an architecture takes beyond its keys. */
enum {
  CLF__GGUF_ROPE = 1,     /* head_dim from attention.key_length, and the RoPE checks */
  CLF__GGUF_HEAD_DIM = 2, /* a head size other than hidden / heads is refused */
  CLF__GGUF_PARTIAL = 4,  /* rope.dimension_count below the head size is partial_rotary_factor (else refused) */
};

typedef struct clf__gguf_arch {
  const char *arch;     /* general.architecture, and config.json's model_type */
  const char *hf_class; /* config.json's architectures */
  const clf__gguf_key *keys;
  size_t n_keys;
  unsigned config;     /* CLF__GGUF_ROPE, CLF__GGUF_HEAD_DIM, CLF__GGUF_PARTIAL */
  const char *fixed;   /* a JSON object of config entries the metadata does not hold, or NULL */
  const char *prefix;  /* "model.": a name looked up without it is looked up with it, for messages */
  const clf__gguf_name *whole;
  size_t n_whole;
  const char *layers; /* "model.layers": blk.N.PART.weight is LAYERS.N.HF.weight */
  const clf__gguf_name *layer;
  size_t n_layer;
} clf__gguf_arch;

/* config.json as transformers 4.46's GGUF loader makes it from g's
 * metadata, by the row of `archs` (n of them) whose arch is
 * general.architecture: model_type and architectures from the row, the
 * row's keys, its fixed entries, the special token ids from
 * tokenizer.ggml.*, tie_word_embeddings when output.weight is absent,
 * vocab_size from {arch}.vocab_size or else the token list.  Errors name
 * `file` and the key: CLF_E_UNSUPPORTED for an architecture no row has (the
 * rows' listed), a RoPE scaling other than linear, per-layer head counts;
 * CLF_E_FORMAT for a required key missing, a key of the wrong type (its
 * type and the one expected named: an integer, a number, a string), an
 * integer out of its range or a number not finite or out of range (the
 * value and the bound named: "{arch}.attention.head_count = 1073741824 is
 * too large (at most 4096)", "{arch}.rope.freq_base = nan is not a finite
 * positive number"). */
clf_status clf__gguf_config(clf_context *ctx, const clf_gguf *g, const char *file, const clf__gguf_arch *const *archs,
                            size_t n, clf__config **out);

/* A model's config: clf__gguf_config of the GGUF file `path` names
 * (clf__gguf_model_file), else clf__config_load of the directory. */
clf_status clf__config_load_model(clf_context *ctx, const char *path, const clf__gguf_arch *const *archs, size_t n,
                                  clf__config **out);

/* The Hugging Face parameter name of GGUF tensor `name` by a's rows
 * ("blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight"):
 * 1 with buf filled and *flags the row's (CLF__GGUF_T only on a .weight;
 * a CLF__GGUF_COPY row leaves buf ""), 0 when no row has it (or buf is too
 * small). */
int clf__gguf_hf_name(const clf__gguf_arch *a, const char *name, char *buf, size_t len, unsigned *flags);

/* The reverse: the GGUF name of Hugging Face name `hf` (with or without
 * a's prefix), for messages.  1 with buf filled, else 0. */
int clf__gguf_file_name(const clf__gguf_arch *a, const char *hf, char *buf, size_t len);

/* An integer metadata value (any integer type), or `dflt` when the key is
 * absent: 0, or -1 when present but not a single integer (key and type
 * named on ctx, with `file`). */
int clf__gguf_meta_int(clf_context *ctx, const clf_gguf *g, const char *file, const char *key, int64_t dflt,
                       int64_t *out);

#ifdef __cplusplus
}
#endif

#endif /* CLF_IO_GGUF_MODEL_H */
