/* params.h - a model's parameters: every device tensor it owns, and the
 * linear layers' weights stored in the weight type the user chose (f32,
 * f16, Q8_0, Q4_0, Q4_K, Q6_K, or f32 rounded through one of them).
 */
#ifndef CLF_PARAMS_H
#define CLF_PARAMS_H

#include <stddef.h>

#include "ops/ops.h"
#include "weights.h"

/* Every device tensor a model owns, destroyed together. */
typedef struct clf__params {
  clf_tensor **t;
  size_t n, cap;
  clf_dtype wtype; /* storage of the linear layers' weights (clf_model_options) */
  int simulate;    /* f32 weights rounded through wtype instead */
  void (*progress)(void *user, size_t done, size_t total); /* clf_model_options */
  void *progress_user;
  size_t done, total; /* f32 bytes loaded, and of the whole checkpoint */
} clf__params;
void clf__params_free(clf__params *p);
/* Adds t to p (on failure t is destroyed). */
clf_status clf__params_add(clf_context *ctx, clf__params *p, clf_tensor *t);

/* Loads `name` with shape checking into the model's parameter list. */
clf_status clf__param(clf_context *ctx, const clf__weights *w, clf__params *p, const char *name, int ndim,
                      const size_t *shape, clf_tensor **out);

enum { CLF__LINEAR_PARTS = 4 };
typedef struct clf__linear {
  clf_tensor *w; /* [out, in] in the params' wtype, or f32 [in, out] where layout says (clf__store_linear) */
  clf_tensor *b; /* [out] or NULL */
  clf_weight_layout layout;
  /* A fused linear whose parts a GGUF file stores in different types (a
   * Q4_K_M file's Q4_K attn_q and attn_k beside a Q6_K attn_v): w NULL and
   * each part [out_i, in] as stored, its outputs the next out_i columns
   * (clf__linear_run); nparts 0 otherwise. */
  clf_tensor *part[CLF__LINEAR_PARTS];
  size_t nparts;
} clf__linear;
/* out: w's out-features, or the parts' summed. */
size_t clf__linear_out(const clf__linear *l);

/* A linear layer's weight `wname` [out_f, in_f] (or [in_f, out_f] with
 * CLF_WEIGHT_IN_OUT, transposed here) as a device tensor [out_f, in_f] in
 * p->wtype (CLF_STORED: as stored, clf__load_stored), owned by p; on a
 * CPU a block type in the 16-row interleave (clf__r16_wanted), as every
 * weight these loaders make: only clf_linear reads them.
 * CLF_E_UNSUPPORTED, naming the tensor, when a block type cannot hold it
 * (in_f not a multiple of 32). */
clf_status clf__load_weight(clf_context *ctx, const clf__weights *w, clf__params *p, const char *wname,
                            size_t out_f, size_t in_f, clf_weight_layout layout, clf_tensor **out);
/* With p->wtype CLF_STORED (and not simulating): the linear weight whose
 * parts names[0..n) ([outs[i], in] each, [out, in] in the checkpoint) are
 * concatenated along out, uploaded as the checkpoint stores them
 * (clf__weights_blocks), owned by p.  *out NULL (CLF_OK) where they cannot
 * be: another type, parts of different types, another wtype; the caller
 * then stores them from f32.  On a CPU, Q4_0, Q4_1, Q5_x and Q8_0 are
 * uploaded in the 16-row interleave (ops.h's clf__r16_wanted), which
 * clf_linear alone reads. */
clf_status clf__load_stored(clf_context *ctx, const clf__weights *w, clf__params *p, const char *const *names,
                            const size_t *outs, size_t n, size_t in, clf_tensor **out);
/* clf__load_stored into l->w, and where the parts' stored types differ
 * (up to CLF__LINEAR_PARTS of them, one at least a block or f16 type),
 * each part as stored in l->part (an f32 one as f32 [out_i, in]), w NULL.
 * Neither (CLF_OK): the caller stores the weight from f32.  l->b
 * untouched. */
clf_status clf__load_stored_linear(clf_context *ctx, const clf__weights *w, clf__params *p,
                                   const char *const *names, const size_t *outs, size_t n, size_t in,
                                   clf__linear *l);
/* Host f32 [out_f, in_f] of `name` (stored [in_f, out_f] when in_out:
 * transposed); *out malloc'd. */
clf_status clf__read_matrix(clf_context *ctx, const clf__weights *w, const char *name, size_t out_f, size_t in_f,
                            int in_out, float **out);
/* Host h [out_f, in_f] as linear l's weight in p->wtype, owned by p (l->b
 * untouched).  in_out_f32: f32 weights are stored transposed, [in_f,
 * out_f] with l->layout CLF_WEIGHT_IN_OUT: for layers that see many rows at
 * once (encoders), where CLBlast then copies no weight and a few rows run
 * the skinny_t kernel; not for decoders, whose one-row steps run the skinny
 * kernel on [out, in] (1.3-2x faster at one row).  Errors name `name`. */
clf_status clf__store_linear(clf_context *ctx, clf__params *p, int in_out_f32, const char *name, const float *h,
                             size_t out_f, size_t in_f, clf__linear *l);
/* Linear `wname` [out_f, in_f] (the checkpoint's layout) with bias `bname`
 * [out_f] (NULL: none), stored as clf__store_linear says. */
clf_status clf__load_linear(clf_context *ctx, const clf__weights *w, clf__params *p, const char *wname,
                            const char *bname, size_t out_f, size_t in_f, clf_weight_layout layout, int in_out_f32,
                            clf__linear *l);

#endif /* CLF_PARAMS_H */
