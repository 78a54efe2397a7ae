/* weights.h - the tensors of a Hugging Face model directory:
 * model.safetensors, or the shards that model.safetensors.index.json lists.
 * Looks names up, reads shapes, and uploads tensors as f32.  Internal. */
#ifndef CLF_WEIGHTS_H
#define CLF_WEIGHTS_H

#include "core/core.h"
#include "io/gguf_model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clf__weights clf__weights;

/* Opens MODEL_DIR/model.safetensors or, when absent, the shards listed by
 * MODEL_DIR/model.safetensors.index.json ("weight_map": name -> file), each
 * validated by clf_safetensors_open.  Errors on ctx (may be NULL):
 * CLF_E_NOT_FOUND when neither exists (saying that safetensors is required
 * when only pytorch_model.bin & co. are there) or when a listed shard is
 * absent (naming it); CLF_E_FORMAT for a malformed index or a tensor the
 * index places in a shard that lacks it.  With an index, only the tensors
 * it lists are visible. */
clf_status clf__weights_open(clf_context *ctx, const char *model_dir, clf__weights **out);
/* The tensors of GGUF file g (opened from `file`; owned by the result, and
 * closed here on failure) under their Hugging Face names by the rows of
 * `arch` (clf__gguf_hf_name; borrowed, static: a family's; a tensor without
 * a name, or of a block past {arch}.block_count, is CLF_E_FORMAT naming it,
 * but for a CLF__GGUF_COPY row's, not read), decoded to f32 by
 * clf__weights_read and clf__weights_load, the rows a CLF__GGUF_PERMUTE_*
 * row says convert_hf_to_gguf permutes put back in Hugging Face order.
 * clf__weights_info's dtype is the ggml type's name. */
clf_status clf__weights_from_gguf(clf_context *ctx, clf_gguf *g, const char *file, const clf__gguf_arch *arch,
                                  clf__weights **out);
/* NULL is accepted. */
void clf__weights_close(clf__weights *w);
/* GGUF, once the model is loaded: CLF_E_FORMAT naming the first tensor of
 * the file the model never looked up (clf__weights_info and what calls it:
 * a bias the configuration has none of), "not used by `arch`".  CLF_OK for
 * safetensors, whose checkpoints carry tensors a model skips. */
clf_status clf__weights_all_used(clf_context *ctx, const clf__weights *w, const char *arch);
int clf__weights_has(const clf__weights *w, const char *name);
/* The first of `names` (NULL-terminated list of alternatives) that exists,
 * else NULL. */
const char *clf__weights_pick(const clf__weights *w, const char *const *names);
/* Uploads `name` as a new f32 device tensor (F32 as is; F16 and BF16
 * converted on the host, exactly), checking its shape: ndim dims (1 to
 * CLF_MAX_DIMS), and a 0 in `shape` matches any size (shape NULL: any).
 * Errors: CLF_E_NOT_FOUND "tensor \"X\" not found in DIR/model.safetensors";
 * CLF_E_SHAPE "tensor \"X\" has shape [..], expected [..]"; CLF_E_DTYPE for
 * I64 and every other dtype. */
clf_status clf__weights_load(clf_context *ctx, const clf__weights *w, const char *name, int ndim,
                             const size_t *shape, clf_tensor **out);
/* `name` as f32 on the host (*out malloc'd, the caller frees it; got[] its
 * shape, 8 entries), with the checks and errors of clf__weights_load. */
clf_status clf__weights_read(clf_context *ctx, const clf__weights *w, const char *name, int ndim,
                             const size_t *shape, float **out, size_t got[8]);
/* GGUF: tensor `name` [rows, in] as the file stores it, where a kernel
 * reads its type: *dt CLF_F16, CLF_Q8_0, CLF_Q4_0 or one of ggml's block
 * types, *raw (malloc'd, *bytes long) its rows as in the file (ggml's
 * blocks, scales inside; Q8_0 / Q4_0 not yet in clformer's layout), q/k
 * rows in Hugging Face order.  in_out: the checkpoint's name is of
 * transformers' [in, rows] (a Conv1D weight), which a GGUF file holds
 * transposed, as [rows, in]: those bytes.  Otherwise (another type, a
 * tensor the file does not hold as [rows, in], or safetensors) *dt CLF_F32
 * and *raw NULL: read it as f32.  Errors as clf__weights_read. */
clf_status clf__weights_blocks(clf_context *ctx, const clf__weights *w, const char *name, size_t rows, size_t in,
                               int in_out, clf_dtype *dt, unsigned char **raw, size_t *bytes);
/* The type a linear weight with `in` features is stored in under weight
 * type wt: wt, but where the k-quants' 256-element blocks do not divide in,
 * the fallback ggml's own quantize tool takes: Q4_K to Q5_0, Q6_K to Q8_0,
 * and both to F16 where in is not a multiple of 32 either. */
clf_dtype clf__weight_type_for(clf_dtype wt, size_t in);
/* A lower bound of the device bytes the weights take with the linear
 * layers stored as wt: 2-D tensors whose last dim is a multiple of 32 at
 * wt's size (embeddings too, which stay f32: hence a bound), others f32. */
size_t clf__weights_bytes_as(const clf__weights *w, clf_dtype wt);
/* CLF_E_OUT_OF_MEMORY "weight NAME (SIZE) is larger than the device's
 * largest allocation (LIMIT, WHERE)" when `bytes` of weight `name` would
 * not fit one buffer (caps.max_alloc: the device's, or CLFORMER_LIMITS's
 * alloc). */
clf_status clf__weight_fits_alloc(clf_context *ctx, const char *name, size_t bytes);
/* The same for every tensor of w, before anything is loaded: each at the
 * least it can take (2-D as wt where wt can store it, others f32); the
 * largest one that cannot fit is named. */
clf_status clf__weights_fit_alloc(clf_context *ctx, const clf__weights *w, clf_dtype wt);
/* The shape of a tensor without loading it (for deducing sizes); shape has
 * room for 8 dims. */
clf_status clf__weights_shape(clf_context *ctx, const clf__weights *w, const char *name, int *ndim,
                              size_t shape[8]);
/* The tensor's raw description (dtype, shape, bytes in the mapping; valid
 * until clf__weights_close), for tensors that are not f32 weights. */
clf_status clf__weights_info(clf_context *ctx, const clf__weights *w, const char *name, clf_st_info *out);

#ifdef __cplusplus
}
#endif

#endif
