/* vit.h - what ViTMAE borrows from ViT (vit.c): the pixel check, the
 * pre-LN layers and their loader, and the interpolated position table.
 */
#ifndef CLF_VIT_H
#define CLF_VIT_H

#include "model.h"

/* The workspace slots of ViT and ViTMAE. */
enum {
  CLF__WS_PATCHES = CLF__WS_FAMILY, /* patch embeddings before the CLS token */
  CLF__WS_DEC_IN,                   /* ViTMAE's decoder input */
  CLF__WS_VIT_END
};

/* Checks pixel_values: f32 [B, C, H, W] with C channels, H and W multiples
 * of the patch P; names the problem, prefixed with op. */
clf_status clf__vit_check_pixels(clf_model *m, const char *op, const clf_array *a, size_t C, size_t P);
/* n ViT layers "PREFIX%zu." (attention.attention.query, layernorm_before, ...). */
clf_status clf__vit_load_layers(clf_context *ctx, const clf__weights *w, clf__params *p, const char *prefix,
                                size_t n, size_t D, size_t H, size_t F, float eps, clf_activation act, int qkv_bias,
                                clf__layer *layers);
/* The GEMMs of n of those layers (width D, feed-forward F) over T rows. */
void clf__vit_gemms(size_t D, size_t F, size_t T, long n, clf__gemm_list *l);
/* Pre-LN stack on h; on exit a = ln_f(h). */
clf_status clf__vit_encoder(clf_context *ctx, const clf__layer *layers, size_t n, const clf__ln *ln_f, clf_tensor *h,
                            clf_tensor *a, clf__ws *ws);
/* The [N + 1, D] table pos bicubic-interpolated to a gh x gw grid as 4.40's
 * interpolate_pos_encoding (host copy in *host, result cached in *cache). */
clf_status clf__vit_interp_pos(clf_context *ctx, const clf_tensor *pos, size_t N, size_t D, size_t gh, size_t gw,
                               float **host, clf_tensor **cache, size_t *c_gh, size_t *c_gw);

#endif /* CLF_VIT_H */
