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

/* config.json as transformers 4.46's GGUF loader makes it from g's
 * metadata: model_type and architectures (the *ForCausalLM class) from
 * general.architecture (the architectures gguf_model.c lists), the sizes from {arch}.*, the special token ids
 * from tokenizer.ggml.*, tie_word_embeddings when output.weight is absent,
 * vocab_size from {arch}.vocab_size or else the token list.  Errors name
 * `file` and the key: CLF_E_UNSUPPORTED for another architecture, a RoPE
 * scaling other than linear, per-layer head counts or a rope_freqs tensor;
 * CLF_E_FORMAT for a required key missing, a key of the wrong type (its
 * type and the one expected named: an integer, a number, a string), an
 * integer out of its range or a number not finite or out of range (the
 * value and the bound named: "{arch}.attention.head_count = 1073741824 is
 * too large (at most 4096)", "{arch}.rope.freq_base = nan is not a finite
 * positive number"). */
clf_status clf__gguf_config(clf_context *ctx, const clf_gguf *g, const char *file, clf__config **out);

/* A model's config: clf__gguf_config of the GGUF file `path` names
 * (clf__gguf_model_file), else clf__config_load of the directory. */
clf_status clf__config_load_model(clf_context *ctx, const char *path, clf__config **out);

/* The Hugging Face parameter name of GGUF tensor `name` in a model of
 * `arch` ("blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight";
 * GGUF_TENSOR_MAPPING of transformers 4.46):
 * 1 with buf filled, 0 when it has none (or buf is too small). */
int clf__gguf_hf_name(const char *arch, const char *name, char *buf, size_t len);

/* 1 when GGUF tensor `name` of `arch` is the transpose of its transformers
 * parameter (Conv1D weights, [in, out] in transformers, [out, in] in the
 * file). */
int clf__gguf_transposed(const char *arch, const char *name);

/* The reverse: the GGUF name of Hugging Face name `hf` (with or without
 * the "model." prefix), for messages.  1 with buf filled, else 0. */
int clf__gguf_file_name(const char *hf, char *buf, size_t len);

/* An integer metadata value (any integer type), or `dflt` when the key is
 * absent: 0, or -1 when present but not a single integer (key and type
 * named on ctx, with `file`). */
int clf__gguf_meta_int(clf_context *ctx, const clf_gguf *g, const char *file, const char *key, int64_t dflt,
                       int64_t *out);

#ifdef __cplusplus
}
#endif

#endif /* CLF_IO_GGUF_MODEL_H */
