/* blocks.c - the Transformer blocks every model family is wired from:
 * attention (fused or separate QKV, KV cache, cross-attention), MLP and the
 * pre-/post-LN layer, plus the parameter list and activation workspaces.
 */
#include "blocks.h"

#include "base/checked.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

void clf__params_free(clf__params *p) {
  for (size_t i = 0; i < p->n; i++) clf_tensor_destroy(p->t[i]);
  free(p->t);
  memset(p, 0, sizeof *p);
}

clf_status clf__params_add(clf_context *ctx, clf__params *p, clf_tensor *t) {
  if (p->n == p->cap) {
    size_t cap = p->cap ? 2 * p->cap : 64;
    clf_tensor **nt = realloc(p->t, cap * sizeof *nt);
    if (!nt) {
      clf_tensor_destroy(t);
      return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory for the parameter list");
    }
    p->t = nt;
    p->cap = cap;
  }
  p->t[p->n++] = t;
  if (p->progress) {
    p->done += clf_tensor_numel(t) * sizeof(float);
    p->progress(p->progress_user, p->done < p->total ? p->done : p->total, p->total);
  }
  return CLF_OK;
}

clf_status clf__param(clf_context *ctx, const clf__weights *w, clf__params *p, const char *name, int ndim,
                      const size_t *shape, clf_tensor **out) {
  clf_tensor *t = NULL;
  clf_status st = clf__weights_load(ctx, w, name, ndim, shape, &t);
  if (st != CLF_OK) return st;
  if ((st = clf__params_add(ctx, p, t)) != CLF_OK) return st;
  *out = t;
  return CLF_OK;
}

/* t [cols, rows] = h [rows, cols], in tiles that stay in cache. */
static void transpose(const float *h, size_t rows, size_t cols, float *t) {
  enum { TILE = 32 };
  for (size_t r0 = 0; r0 < rows; r0 += TILE)
    for (size_t c0 = 0; c0 < cols; c0 += TILE)
      for (size_t r = r0; r < r0 + TILE && r < rows; r++)
        for (size_t c = c0; c < c0 + TILE && c < cols; c++) t[c * rows + r] = h[r * cols + c];
}

/* Host f32 [rows, in] of `name` (stored [in, rows] when in_out: transposed). */
static clf_status read_matrix(clf_context *ctx, const clf__weights *w, const char *name, size_t rows, size_t in,
                              int in_out, float **out) {
  size_t got[8];
  float *h = NULL;
  clf_status st = clf__weights_read(ctx, w, name, 2, in_out ? (size_t[]){in, rows} : (size_t[]){rows, in}, &h, got);
  if (st != CLF_OK || !in_out) {
    *out = h;
    return st;
  }
  float *t = malloc((rows * in > 0 ? rows * in : 1) * sizeof *t);
  if (!t) {
    free(h);
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory transposing \"%s\"", name);
  }
  transpose(h, in, rows, t);
  free(h);
  *out = t;
  return CLF_OK;
}

/* Uploads host [rows, in] as the params' weight type into p. */
static clf_status store_matrix(clf_context *ctx, clf__params *p, const char *name, const float *h, size_t rows,
                               size_t in, clf_tensor **out) {
  if (clf__dtype_is_block(p->wtype) && in % CLF__QBLOCK != 0)
    return clf__fail(ctx, CLF_E_UNSUPPORTED,
                     "tensor \"%s\" [%zu, %zu]: %s weights need in-features that are a multiple of %d (use f16 "
                     "or f32 weights for this model)",
                     name, rows, in, clf__weight_type_name(p->wtype), CLF__QBLOCK);
  clf_tensor *t = NULL;
  const clf_dtype stored = p->simulate ? CLF_F32 : p->wtype;
  clf_status st = clf__weight_fits_alloc(ctx, name, clf__dtype_bytes(stored, rows * in));
  if (st != CLF_OK) return st;
  if (p->simulate && p->wtype != CLF_F32) {
    float *r = malloc(rows * in * sizeof *r + 1);
    void *q = malloc(clf__dtype_bytes(p->wtype, rows * in) + 1);
    if (r && q) {
      clf__quantize(p->wtype, h, rows * in, q);
      clf__dequantize(p->wtype, q, rows * in, r);
    }
    st = r && q ? clf_tensor_from_f32(ctx, CLF_F32, 2, (size_t[]){rows, in}, r, &t)
                : clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory rounding \"%s\"", name);
    free(r);
    free(q);
  } else {
    st = clf_tensor_from_f32(ctx, p->wtype, 2, (size_t[]){rows, in}, h, &t);
  }
  if (st != CLF_OK) return st;
  if ((st = clf__params_add(ctx, p, t)) != CLF_OK) return st;
  *out = t;
  return CLF_OK;
}

/* Uploads host [rows, in] as linear l's weight: as store_matrix, or, for
 * f32 weights when in_out_f32 (clf__block_spec), transposed to [in, rows]
 * with l->layout CLF_WEIGHT_IN_OUT: CLBlast then reads the weight where it
 * lies instead of copying it into a transposed temporary on every call
 * (gemm_clblast.cc).  Stored types stay [out, in], the layout of the skinny
 * kernel.  rows x in is the size of h, already in memory. */
static clf_status store_linear(clf_context *ctx, clf__params *p, int in_out_f32, const char *name, const float *h,
                               size_t rows, size_t in, clf__linear *l) {
  l->layout = CLF_WEIGHT_OUT_IN;
  if (!in_out_f32 || p->wtype != CLF_F32) return store_matrix(ctx, p, name, h, rows, in, &l->w);
  float *t = malloc((rows * in > 0 ? rows * in : 1) * sizeof *t);
  if (!t) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory transposing \"%s\"", name);
  transpose(h, rows, in, t);
  clf_status st = store_matrix(ctx, p, name, t, in, rows, &l->w);
  free(t);
  if (st == CLF_OK) l->layout = CLF_WEIGHT_IN_OUT;
  return st;
}

clf_status clf__store_linear(clf_context *ctx, clf__params *p, const char *name, const float *h, size_t out_f,
                             size_t in_f, clf__linear *l) {
  l->b = NULL;
  return store_linear(ctx, p, 0, name, h, out_f, in_f, l);
}

clf_status clf__load_weight(clf_context *ctx, const clf__weights *w, clf__params *p, const char *wname,
                            size_t out_f, size_t in_f, clf_weight_layout layout, clf_tensor **out) {
  float *h = NULL;
  clf_status st = read_matrix(ctx, w, wname, out_f, in_f, layout == CLF_WEIGHT_IN_OUT, &h);
  if (st == CLF_OK) st = store_matrix(ctx, p, wname, h, out_f, in_f, out);
  free(h);
  return st;
}

/* clf__load_linear, with the weight stored as store_linear says. */
static clf_status load_linear(clf_context *ctx, const clf__weights *w, clf__params *p, const char *wname,
                              const char *bname, size_t out_f, size_t in_f, clf_weight_layout layout, int in_out_f32,
                              clf__linear *l) {
  float *h = NULL;
  l->layout = CLF_WEIGHT_OUT_IN;
  l->b = NULL;
  clf_status st = read_matrix(ctx, w, wname, out_f, in_f, layout == CLF_WEIGHT_IN_OUT, &h);
  if (st == CLF_OK) st = store_linear(ctx, p, in_out_f32, wname, h, out_f, in_f, l);
  free(h);
  if (st == CLF_OK && bname) st = clf__param(ctx, w, p, bname, 1, &out_f, &l->b);
  return st;
}

clf_status clf__load_linear(clf_context *ctx, const clf__weights *w, clf__params *p, const char *wname,
                            const char *bname, size_t out_f, size_t in_f, clf_weight_layout layout,
                            clf__linear *l) {
  return load_linear(ctx, w, p, wname, bname, out_f, in_f, layout, 0, l);
}

/* The parts of a QKV / KV row (PREFIX NAME with "%s" each of r->parts)
 * concatenated along out into one linear: weights [n D, D], biases [n D]. */
static clf_status load_fused(clf_context *ctx, const clf__weights *w, clf__params *p, const char *prefix,
                             const clf__weight_row *r, size_t D, int bias, const clf__block_spec *spec,
                             clf__linear *l) {
  const size_t n = r->kind == CLF__ROW_QKV ? 3 : 2;
  size_t nd, ndd, bytes;
  if (!clf__mul_ok(n, D, &nd) || !clf__mul_ok(nd, D, &ndd) || !clf__mul_ok(ndd, sizeof(float), &bytes))
    return clf__fail(ctx, CLF_E_SHAPE, "model: fusing %s%s: %zu x %zu x %zu weights overflow", prefix, r->name, n, D, D);
  float *cat = malloc(bytes + 1), *bcat = malloc(nd * sizeof(float) + 1), *h = NULL;
  char fmt[256], wn[256];
  clf_status st = CLF_OK;
  if (!cat || !bcat) st = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory fusing %s%s", prefix, r->name);
  snprintf(fmt, sizeof fmt, "%s%s", prefix, r->name);
  for (size_t i = 0; i < n && st == CLF_OK; i++) {
    snprintf(wn, sizeof wn, fmt, r->parts[i]);
    const size_t len = strlen(wn);
    snprintf(wn + len, sizeof wn - len, ".weight");
    if ((st = read_matrix(ctx, w, wn, D, D, spec->layout == CLF_WEIGHT_IN_OUT, &h)) != CLF_OK) break;
    memcpy(cat + i * D * D, h, D * D * sizeof *h);
    free(h);
    h = NULL;
    if (!bias) continue;
    snprintf(wn + len, sizeof wn - len, ".bias");
    st = clf__weights_read(ctx, w, wn, 1, &D, &h, (size_t[8]){0});
    if (st == CLF_OK) memcpy(bcat + i * D, h, D * sizeof *h);
    free(h);
    h = NULL;
  }
  l->layout = CLF_WEIGHT_OUT_IN;
  l->b = NULL;
  snprintf(wn, sizeof wn, fmt, r->kind == CLF__ROW_QKV ? "{q,k,v}" : "{k,v}");
  if (st == CLF_OK) st = store_linear(ctx, p, spec->in_out_f32, wn, cat, n * D, D, l);
  if (st == CLF_OK && bias) {
    clf_tensor *t = NULL;
    if ((st = clf_tensor_from_f32(ctx, CLF_F32, 1, (size_t[]){n * D}, bcat, &t)) == CLF_OK &&
        (st = clf__params_add(ctx, p, t)) == CLF_OK)
      l->b = t;
  }
  free(cat);
  free(bcat);
  return st;
}

clf_status clf__load_ln(clf_context *ctx, const clf__weights *w, clf__params *p, const char *prefix, size_t d,
                        float eps, clf__ln *ln) {
  char gw[256], gg[256], bb[256], bt[256];
  snprintf(gw, sizeof gw, "%s.weight", prefix);
  snprintf(gg, sizeof gg, "%s.gamma", prefix);
  snprintf(bb, sizeof bb, "%s.bias", prefix);
  snprintf(bt, sizeof bt, "%s.beta", prefix);
  const char *const gn[] = {gw, gg, NULL}, *const bn[] = {bb, bt, NULL};
  const char *g = clf__weights_pick(w, gn), *b = clf__weights_pick(w, bn);
  clf_status st;
  ln->eps = eps;
  /* Not found: load the canonical name to get the loader's message. */
  if ((st = clf__param(ctx, w, p, g ? g : gw, 1, &d, &ln->g)) != CLF_OK) return st;
  return clf__param(ctx, w, p, b ? b : bb, 1, &d, &ln->b);
}

clf_status clf__load_rows(clf_context *ctx, const clf__weights *w, clf__params *p, const char *prefix,
                          const clf__weight_row *rows, size_t n, const clf__block_spec *spec, void *block) {
  char wn[256], bn[256];
  clf_status st = CLF_OK;
  for (size_t i = 0; i < n && st == CLF_OK; i++) {
    const clf__weight_row *r = &rows[i];
    void *at = (char *)block + r->at;
    if (r->cross && !spec->cross) continue;
    snprintf(wn, sizeof wn, "%s%s", prefix, r->name);
    if (r->kind == CLF__ROW_LN) {
      st = clf__load_ln(ctx, w, p, wn, spec->dims[r->out], spec->eps, at);
      continue;
    }
    const int bias = r->bias == CLF__BIAS_YES || (r->bias == CLF__BIAS_QKV && spec->qkv_bias);
    if (r->kind == CLF__ROW_QKV || r->kind == CLF__ROW_KV) {
      clf__attn *a = at;
      st = load_fused(ctx, w, p, prefix, r, spec->dims[r->in], bias, spec, r->kind == CLF__ROW_QKV ? &a->qkv : &a->kv);
      continue;
    }
    snprintf(bn, sizeof bn, "%s%s.bias", prefix, r->name);
    snprintf(wn, sizeof wn, "%s%s.weight", prefix, r->name);
    st = load_linear(ctx, w, p, wn, bias ? bn : NULL, spec->dims[r->out], spec->dims[r->in], spec->layout,
                     spec->in_out_f32, at);
  }
  return st;
}

clf_status clf__ws_get(clf_context *ctx, clf__ws *ws, int slot, clf_dtype dt, int ndim, const size_t *shape,
                       clf_tensor **out) {
  clf_tensor *t = ws->t[slot];
  if (t && t->dtype == dt && t->ndim == ndim && memcmp(t->shape, shape, ndim * sizeof *shape) == 0) {
    *out = t;
    return CLF_OK;
  }
  clf_tensor_destroy(t);
  ws->t[slot] = NULL;
  clf_status st = clf_tensor_create(ctx, dt, ndim, shape, &ws->t[slot]);
  *out = ws->t[slot];
  return st;
}

void clf__ws_free(clf__ws *ws) {
  for (int i = 0; i < CLF__WS_COUNT; i++) clf_tensor_destroy(ws->t[i]);
  memset(ws, 0, sizeof *ws);
}

clf_status clf__attn_forward(clf_context *ctx, const clf__attn *a, const clf_tensor *x, const clf_tensor *src,
                             const clf__kv *kv, const clf_attention_mask *mask, clf__ws *ws, clf_tensor *y) {
  const size_t B = x->shape[0], Lq = x->shape[1], H = a->heads, Dh = a->dh, D = H * Dh;
  const int self = src == NULL;
  if (self) src = x;
  const size_t Ls = src->shape[1];
  clf_tensor *q, *proj, *ctxm, *k, *v;
  size_t pos = 0, kv_len = 0;
  clf_status st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_Q, CLF_F32, 4, (size_t[]){B, H, Lq, Dh}, &q)) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_CTX, CLF_F32, 3, (size_t[]){B, Lq, D}, &ctxm)) != CLF_OK) return st;
  if (kv) {
    k = kv->k, v = kv->v, pos = kv->pos;
    kv_len = kv->ready ? 0 : pos + Ls;
  } else {
    if ((st = clf__ws_get(ctx, ws, CLF__WS_K, CLF_F32, 4, (size_t[]){B, H, Ls, Dh}, &k)) != CLF_OK) return st;
    if ((st = clf__ws_get(ctx, ws, CLF__WS_V, CLF_F32, 4, (size_t[]){B, H, Ls, Dh}, &v)) != CLF_OK) return st;
  }
  const int need_kv = !(kv && kv->ready);
  if (self) {
    /* One [3D, D] projection, split three ways into q and the cache. */
    if ((st = clf__ws_get(ctx, ws, CLF__WS_PROJ, CLF_F32, 3, (size_t[]){B, Lq, 3 * D}, &proj)) != CLF_OK) return st;
    if ((st = clf_linear(ctx, x, a->qkv.w, a->qkv.layout, a->qkv.b, CLF_ACT_NONE, proj, NULL)) != CLF_OK) return st;
    if ((st = clf_split_heads(ctx, proj, 0, 0, q, NULL)) != CLF_OK) return st;
    if ((st = clf_split_heads(ctx, proj, D, pos, k, NULL)) != CLF_OK) return st;
    if ((st = clf_split_heads(ctx, proj, 2 * D, pos, v, NULL)) != CLF_OK) return st;
  } else { /* cross-attention: q from x, the fused k, v from the encoder states */
    if ((st = clf__ws_get(ctx, ws, CLF__WS_PROJ, CLF_F32, 3, (size_t[]){B, Lq, D}, &proj)) != CLF_OK) return st;
    if ((st = clf_linear(ctx, x, a->q.w, a->q.layout, a->q.b, CLF_ACT_NONE, proj, NULL)) != CLF_OK) return st;
    if ((st = clf_split_heads(ctx, proj, 0, 0, q, NULL)) != CLF_OK) return st;
    if (need_kv) {
      clf_tensor *sp;
      if ((st = clf__ws_get(ctx, ws, CLF__WS_SRC, CLF_F32, 3, (size_t[]){B, Ls, 2 * D}, &sp)) != CLF_OK) return st;
      if ((st = clf_linear(ctx, src, a->kv.w, a->kv.layout, a->kv.b, CLF_ACT_NONE, sp, NULL)) != CLF_OK) return st;
      if ((st = clf_split_heads(ctx, sp, 0, pos, k, NULL)) != CLF_OK) return st;
      if ((st = clf_split_heads(ctx, sp, D, pos, v, NULL)) != CLF_OK) return st;
    }
  }
  if ((st = clf_attention(ctx, q, k, v, kv_len, mask, a->scale, CLF_ATTN_AUTO, ctxm, NULL)) != CLF_OK) return st;
  return clf_linear(ctx, ctxm, a->o.w, a->o.layout, a->o.b, CLF_ACT_NONE, y, NULL);
}

clf_status clf__mlp_forward(clf_context *ctx, const clf__mlp *m, const clf_tensor *x, clf__ws *ws, clf_tensor *y) {
  const size_t B = x->shape[0], L = x->shape[1];
  const size_t F = m->fc1.layout == CLF_WEIGHT_IN_OUT ? m->fc1.w->shape[1] : m->fc1.w->shape[0];
  clf_tensor *hid;
  clf_status st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_HID, CLF_F32, 3, (size_t[]){B, L, F}, &hid)) != CLF_OK) return st;
  if ((st = clf_linear(ctx, x, m->fc1.w, m->fc1.layout, m->fc1.b, m->act, hid, NULL)) != CLF_OK) return st;
  return clf_linear(ctx, hid, m->fc2.w, m->fc2.layout, m->fc2.b, CLF_ACT_NONE, y, NULL);
}

clf_status clf__ln_apply(clf_context *ctx, const clf__ln *ln, const clf_tensor *x, const clf_tensor *res,
                         clf_tensor *sum_out, clf_tensor *y) {
  return clf_layer_norm(ctx, x, res, ln->g, ln->b, ln->eps, sum_out, y, NULL);
}

clf_status clf__layer_forward(clf_context *ctx, const clf__layer *l, int pre_ln, const clf__ln *next_ln,
                              clf_tensor *h, clf_tensor *a, const clf__layer_io *io, clf__ws *ws) {
  clf_tensor *f;
  clf_status st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_BRANCH, CLF_F32, 3, h->shape, &f)) != CLF_OK) return st;
  if (pre_ln) {
    /* a = ln_self(h) already. */
    if ((st = clf__attn_forward(ctx, &l->self, a, NULL, io->self_kv, io->self_mask, ws, f)) != CLF_OK) return st;
    if (l->has_cross) {
      if ((st = clf__ln_apply(ctx, &l->ln_cross, h, f, h, a)) != CLF_OK) return st;
      if ((st = clf__attn_forward(ctx, &l->cross, a, io->enc, io->cross_kv, io->cross_mask, ws, f)) != CLF_OK)
        return st;
    }
    if ((st = clf__ln_apply(ctx, &l->ln_mlp, h, f, h, a)) != CLF_OK) return st;
    if ((st = clf__mlp_forward(ctx, &l->mlp, a, ws, f)) != CLF_OK) return st;
    return clf__ln_apply(ctx, next_ln, h, f, h, a);
  }
  /* post-LN: h = LN(h + f(h)) */
  if ((st = clf__attn_forward(ctx, &l->self, h, NULL, io->self_kv, io->self_mask, ws, f)) != CLF_OK) return st;
  if ((st = clf__ln_apply(ctx, &l->ln_self, h, f, NULL, h)) != CLF_OK) return st;
  if (l->has_cross) {
    if ((st = clf__attn_forward(ctx, &l->cross, h, io->enc, io->cross_kv, io->cross_mask, ws, f)) != CLF_OK)
      return st;
    if ((st = clf__ln_apply(ctx, &l->ln_cross, h, f, NULL, h)) != CLF_OK) return st;
  }
  if ((st = clf__mlp_forward(ctx, &l->mlp, h, ws, f)) != CLF_OK) return st;
  return clf__ln_apply(ctx, &l->ln_mlp, h, f, NULL, h);
}

clf_status clf__kv_reorder(clf_context *ctx, clf_tensor *cache, const int64_t *idx, clf__ws *ws) {
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

clf_status clf__zero(clf_context *ctx, clf_tensor *t) {
  const size_t bytes = clf_tensor_bytes(t);
  void *z = calloc(1, bytes ? bytes : 1);
  if (!z) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory zeroing a %zu-byte cache", bytes);
  clf_status st = clf_tensor_upload(ctx, t, z, bytes);
  free(z);
  return st;
}
