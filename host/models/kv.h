/* kv.h - the one KV cache of every decoder: per layer, the self-attention's
 * keys and values [B, H, cap, Dh], appended step by step and reordered for
 * beams, and for encoder-decoders the cross-attention's [B, H, Ls, Dh],
 * computed once per source and then reused.
 */
#ifndef CLF_KV_H
#define CLF_KV_H

#include "blocks.h"

typedef struct clf__kv_cache {
  size_t n_layers;
  clf_tensor **k, **v;   /* self, [n_layers]: [B, H, cap, Dh] while generating, else NULL */
  clf_tensor **ck, **cv; /* cross, [n_layers]: [B, H, Ls, Dh]; NULL arrays for decoder-only */
  int cross_ready;       /* the cross K/V hold the current source's */
  int active;            /* self caches exist (between begin and end) */
  size_t B, cap, past;   /* rows, positions held, positions filled */
} clf__kv_cache;

/* The per-layer arrays for n_layers (cross ones too when `cross`). */
clf_status clf__kv_cache_init(clf_context *ctx, clf__kv_cache *c, size_t n_layers, int cross);
/* Self caches for B rows of cap positions, H heads of Dh, zeroed (beam
 * reordering moves, and attention tiles read, rows past kv_len); past 0. */
clf_status clf__kv_cache_begin(clf_context *ctx, clf__kv_cache *c, size_t B, size_t H, size_t cap, size_t dh);
/* Frees the self caches; the cross ones stay for the next run. */
void clf__kv_cache_end(clf__kv_cache *c);
/* Frees everything (c may be zeroed or half-initialised). */
void clf__kv_cache_free(clf__kv_cache *c);
/* Layer i's self-attention cache, new rows appended at `past`. */
clf__kv clf__kv_cache_self(const clf__kv_cache *c, size_t i, size_t past);
/* Layer i's cross-attention K/V of shape [B, H, Ls, Dh], re-created when
 * its shape differs (unless ready), and marked ready as c says. */
clf_status clf__kv_cache_cross(clf_context *ctx, clf__kv_cache *c, size_t i, const size_t shape[4], clf__kv *out);
/* Row r of every self cache becomes row idx[r] (beam search). */
clf_status clf__kv_cache_reorder(clf_context *ctx, clf__kv_cache *c, const int64_t *idx, clf__ws *ws);

#endif /* CLF_KV_H */
