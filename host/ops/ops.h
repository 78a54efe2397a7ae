/* ops.h - the op layer: what the op families share with each other and
 * with the layers above (device work, models), beyond the public ops.
 * Ops use the core only.
 */
#ifndef CLF_OPS_H
#define CLF_OPS_H

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- row gather (embed.c) ---- */
/* Row gather shared by clf_embedding and clf_gather_rows (ops_embed.c):
 * out[b, y_row0 + k, :] = (accumulate ? out : 0) + scale *
 * (0 <= id < n_valid ? x[b, x_row0 + id, :] : 0), id = ids[b, k], for
 * `batches` batches of K ids (strides in elements).  Arguments already
 * checked by the caller. */
clf_status clf__embed_gather(clf_context *ctx, const clf_tensor *x, size_t x_bstride, size_t x_row0,
                             size_t n_valid, const clf_tensor *ids, size_t batches, size_t K, size_t D,
                             float scale, int accumulate, clf_tensor *out, size_t y_bstride, size_t y_row0,
                             cl_event *event);

/* ---- attention (attention.c) ---- */
/* The variant name of the fused attention kernel for head dim dh and lq
 * queries on ctx's device ("attention.fused HEAD_DIM=64 BQ=32 BK=32"), or 0
 * when it does not apply (ops_attention.c). */
int clf__attn_fused_variant(const clf_context *ctx, size_t dh, size_t lq, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* CLF_OPS_H */
