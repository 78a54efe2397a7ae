/* kv.c - the one KV cache of every decoder (kv.h). */
#include "kv.h"

#include <stdlib.h>
#include <string.h>

static void destroy_all(clf_tensor **t, size_t n) {
  for (size_t i = 0; t && i < n; i++) {
    clf_tensor_destroy(t[i]);
    t[i] = NULL;
  }
}

clf_status clf__kv_cache_init(clf_context *ctx, clf__kv_cache *c, size_t n_layers, int cross) {
  memset(c, 0, sizeof *c);
  c->n_layers = n_layers;
  c->k = calloc(n_layers + 1, sizeof *c->k);
  c->v = calloc(n_layers + 1, sizeof *c->v);
  if (cross) {
    c->ck = calloc(n_layers + 1, sizeof *c->ck);
    c->cv = calloc(n_layers + 1, sizeof *c->cv);
  }
  if (!c->k || !c->v || (cross && (!c->ck || !c->cv)))
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "clf_model_load: out of host memory for the KV cache");
  return CLF_OK;
}

clf_status clf__kv_cache_begin(clf_context *ctx, clf__kv_cache *c, size_t B, size_t H, size_t cap, size_t dh) {
  clf__kv_cache_end(c);
  const size_t shape[4] = {B, H, cap, dh};
  clf_status st;
  c->active = 1;
  for (size_t i = 0; i < c->n_layers; i++)
    if ((st = clf_tensor_create(ctx, CLF_F32, 4, shape, &c->k[i])) != CLF_OK ||
        (st = clf_tensor_create(ctx, CLF_F32, 4, shape, &c->v[i])) != CLF_OK ||
        (st = clf__zero(ctx, c->k[i])) != CLF_OK || (st = clf__zero(ctx, c->v[i])) != CLF_OK)
      return st;
  c->B = B, c->cap = cap, c->past = 0;
  return CLF_OK;
}

void clf__kv_cache_end(clf__kv_cache *c) {
  destroy_all(c->k, c->n_layers);
  destroy_all(c->v, c->n_layers);
  c->active = 0;
}

void clf__kv_cache_free(clf__kv_cache *c) {
  clf__kv_cache_end(c);
  destroy_all(c->ck, c->n_layers);
  destroy_all(c->cv, c->n_layers);
  free(c->k), free(c->v), free(c->ck), free(c->cv);
  memset(c, 0, sizeof *c);
}

clf__kv clf__kv_cache_self(const clf__kv_cache *c, size_t i, size_t past) {
  clf__kv kv = {c->active ? c->k[i] : NULL, c->active ? c->v[i] : NULL, past, 0};
  return kv;
}

/* A cache tensor of exactly `shape` (re-created when it differs). */
static clf_status tensor_of_shape(clf_context *ctx, clf_tensor **slot, const size_t shape[4]) {
  if (*slot && memcmp((*slot)->shape, shape, 4 * sizeof *shape) == 0) return CLF_OK;
  clf_tensor_destroy(*slot);
  *slot = NULL;
  return clf_tensor_create(ctx, CLF_F32, 4, shape, slot);
}

clf_status clf__kv_cache_cross(clf_context *ctx, clf__kv_cache *c, size_t i, const size_t shape[4], clf__kv *out) {
  clf_status st;
  if (!c->cross_ready &&
      ((st = tensor_of_shape(ctx, &c->ck[i], shape)) != CLF_OK || (st = tensor_of_shape(ctx, &c->cv[i], shape)) != CLF_OK))
    return st;
  clf__kv kv = {c->ck[i], c->cv[i], 0, c->cross_ready};
  *out = kv;
  return CLF_OK;
}

/* Row r of cache [N, ...] becomes row idx[r]: a device gather into
 * workspace and a copy back. */
static clf_status reorder(clf_context *ctx, clf_tensor *cache, const int64_t *idx, clf__ws *ws) {
  const size_t N = cache->shape[0], row = clf_tensor_numel(cache) / (N ? N : 1);
  clf_tensor *ids, *tmp, *table = NULL, *out = NULL;
  clf_status st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_BEAM, CLF_I64, 1, &N, &ids)) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_REORDER, CLF_F32, 1, (size_t[]){N * row}, &tmp)) != CLF_OK) return st;
  if ((st = clf_tensor_upload(ctx, ids, idx, N * sizeof *idx)) == CLF_OK &&
      (st = clf_tensor_view(cache, 0, 2, (size_t[]){N, row}, &table)) == CLF_OK &&
      (st = clf_tensor_view(tmp, 0, 2, (size_t[]){N, row}, &out)) == CLF_OK &&
      (st = clf_embedding(ctx, table, ids, 1.0f, 0, out, NULL)) == CLF_OK)
    st = clf_tensor_copy(ctx, tmp, cache, NULL);
  clf_tensor_destroy(table);
  clf_tensor_destroy(out);
  return st;
}

clf_status clf__kv_cache_reorder(clf_context *ctx, clf__kv_cache *c, const int64_t *idx, clf__ws *ws) {
  clf_status st;
  for (size_t i = 0; c->active && i < c->n_layers; i++)
    if ((st = reorder(ctx, c->k[i], idx, ws)) != CLF_OK || (st = reorder(ctx, c->v[i], idx, ws)) != CLF_OK)
      return st;
  return CLF_OK;
}
