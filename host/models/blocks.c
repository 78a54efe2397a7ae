/* blocks.c - the Transformer blocks every model family is wired from
 * (blocks.h): attention (self with fused q, k, v, grouped-query heads, a
 * rotary step and a KV cache; cross over encoder states), the plain or
 * gated MLP, the norms, the pre-/post-LN layer, and activation workspaces.
 */
#include "blocks.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

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

/* The K/V tensors attention reads: the cache's (new rows appended at its
 * pos; all of it when ready) or workspace ones of Ls rows. */
static clf_status attn_kv(clf_context *ctx, const clf__kv *kv, size_t B, size_t Hkv, size_t Ls, size_t Dh,
                          clf__ws *ws, clf_tensor **k, clf_tensor **v, size_t *pos, size_t *kv_len) {
  clf_status st;
  *pos = 0, *kv_len = 0;
  if (kv) {
    *k = kv->k, *v = kv->v, *pos = kv->pos;
    *kv_len = kv->ready ? 0 : kv->pos + Ls;
    return CLF_OK;
  }
  if ((st = clf__ws_get(ctx, ws, CLF__WS_K, CLF_F32, 4, (size_t[]){B, Hkv, Ls, Dh}, k)) != CLF_OK) return st;
  return clf__ws_get(ctx, ws, CLF__WS_V, CLF_F32, 4, (size_t[]){B, Hkv, Ls, Dh}, v);
}

/* Heads from the projection proj at column `col` into t at row pos,
 * rotated when rot is given. */
static clf_status heads(clf_context *ctx, const clf_tensor *proj, size_t col, size_t pos, const clf__rotary *rot,
                        clf_tensor *t) {
  if (rot) return clf_split_heads_rope(ctx, proj, col, pos, rot->pos, rot->inv_freq, rot->scale > 0 ? rot->scale : 1.0f, t,
                                      NULL);
  return clf_split_heads(ctx, proj, col, pos, t, NULL);
}

/* The output projection of the merged heads ctxm into y; its bias is left
 * to the caller where out_bias is given. */
static clf_status attn_out(clf_context *ctx, const clf__attn *a, const clf_tensor *ctxm, clf_tensor *y,
                           const clf_tensor **out_bias) {
  if (out_bias) *out_bias = a->o.b;
  return clf_linear(ctx, ctxm, a->o.w, a->o.layout, out_bias ? NULL : a->o.b, CLF_ACT_NONE, y, NULL);
}

/* Self-attention over a paged cache from the projection proj [1, T,
 * Q + 2 KV] of the step's rows: q and k (rotated) split into the
 * workspace, k and v (from proj) scattered into their blocks, then each
 * row's attention over its own sequence. */
static clf_status attn_paged(clf_context *ctx, const clf__attn *a, const clf_tensor *proj, const clf__kv *kv,
                             const clf_attention_mask *mask, const clf__rotary *rot, clf__ws *ws, clf_tensor *ctxm,
                             clf_tensor *y, const clf_tensor **out_bias) {
  const size_t T = proj->shape[1], H = a->heads, Hkv = a->kv_heads ? a->kv_heads : H, Dh = a->dh;
  const size_t Q = H * Dh, KV = Hkv * Dh;
  clf_tensor *q, *k, *qv = NULL, *kv1 = NULL;
  clf_status st;
  if (!rot && T == 1) {
    /* One row, not rotated: [1, H, 1, Dh] is the row's first Q columns as
     * they lie, and k the KV after them, so views, not two copies (GPT-2's
     * decode step: 24 of its 125 launches a token) */
    if ((st = clf_tensor_view(proj, 0, 4, (size_t[]){1, H, 1, Dh}, &qv)) != CLF_OK ||
        (st = clf_tensor_view(proj, Q, 4, (size_t[]){1, Hkv, 1, Dh}, &kv1)) != CLF_OK)
      goto done;
    q = qv, k = kv1;
  } else {
    if ((st = clf__ws_get(ctx, ws, CLF__WS_Q, CLF_F32, 4, (size_t[]){1, H, T, Dh}, &q)) != CLF_OK ||
        (st = clf__ws_get(ctx, ws, CLF__WS_K, CLF_F32, 4, (size_t[]){1, Hkv, T, Dh}, &k)) != CLF_OK)
      return st;
    if (rot) /* q and k, whose columns follow q's, in one launch */
      st = clf__split_heads_rope2(ctx, proj, 0, 0, rot->pos, rot->inv_freq, rot->scale > 0 ? rot->scale : 1.0f, q,
                                  k, NULL);
    else if ((st = heads(ctx, proj, 0, 0, NULL, q)) == CLF_OK)
      st = heads(ctx, proj, Q, 0, NULL, k);
  }
  if (st != CLF_OK || (st = clf__kv_scatter(ctx, k, proj, Q + KV, kv->paged, kv->k, kv->v)) != CLF_OK ||
      (st = clf__paged_attention(ctx, q, kv->k, kv->v, kv->paged, mask ? mask->window : 0, a->scale,
                                  mask ? mask->softcap : 0.0f, ctxm)) != CLF_OK)
    goto done;
  st = attn_out(ctx, a, ctxm, y, out_bias);
done:
  clf_tensor_destroy(qv);
  clf_tensor_destroy(kv1);
  return st;
}

/* The per-head norm `n` of the `heads` heads at column col of the
 * projection proj [B, L, C], in place: taken out, normed as rows of dh,
 * put back. */
static clf_status head_norm(clf_context *ctx, const clf__ln *n, clf_tensor *proj, size_t col, size_t heads,
                            size_t dh, clf__ws *ws) {
  const size_t rows = proj->shape[0] * proj->shape[1];
  clf_tensor *t, *view = NULL;
  clf_status st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_HEADNORM, CLF_F32, 2, (size_t[]){rows, heads * dh}, &t)) != CLF_OK ||
      (st = clf__take_cols(ctx, "attention head norm", proj, col, t)) != CLF_OK ||
      (st = clf_tensor_view(t, 0, 2, (size_t[]){rows * heads, dh}, &view)) != CLF_OK ||
      (st = clf__ln_apply(ctx, n, view, NULL, NULL, NULL, view)) == CLF_OK)
    st = clf__copy_cols(ctx, "attention head norm", t, proj, col);
  clf_tensor_destroy(view);
  return st;
}

/* The q and k heads of the projection proj normed where a has the norms. */
static clf_status head_norms(clf_context *ctx, const clf__attn *a, clf_tensor *proj, clf__ws *ws) {
  const size_t H = a->heads, Hkv = a->kv_heads ? a->kv_heads : H;
  clf_status st = CLF_OK;
  if (a->q_norm.g) st = head_norm(ctx, &a->q_norm, proj, 0, H, a->dh, ws);
  if (st == CLF_OK && a->k_norm.g) st = head_norm(ctx, &a->k_norm, proj, H * a->dh, Hkv, a->dh, ws);
  return st;
}

int clf__linear_reads(clf_context *ctx, const clf__linear *l, size_t M) {
  if (!l->nparts) return l->w && clf__linear_reads_blocks(ctx, l->w, M);
  for (size_t i = 0; i < l->nparts; i++)
    if (clf__linear_reads_blocks(ctx, l->part[i], M)) return 1;
  return 0;
}

clf_status clf__linear_run(clf_context *ctx, const clf_tensor *x, const clf__linear *l, clf_activation act,
                           clf__ws *ws, clf_tensor *y) {
  if (!l->nparts) return clf_linear(ctx, x, l->w, l->layout, l->b, act, y, NULL);
  const int nd = y->ndim;
  const size_t rows = clf_tensor_numel(y) / (y->shape[nd - 1] ? y->shape[nd - 1] : 1);
  size_t shape[CLF_MAX_DIMS], col = 0;
  memcpy(shape, y->shape, (size_t)nd * sizeof *shape);
  clf_status st = CLF_OK;
  /* the parts read the same x: quantized once on the integer path */
  const int hold = clf__linear_reads(ctx, l, rows) && clf__linear_hold_x(ctx, x);
  for (size_t i = 0; i < l->nparts && st == CLF_OK; i++) {
    const size_t n = l->part[i]->shape[0];
    clf_tensor *b = NULL, *part = NULL, *view = NULL;
    shape[nd - 1] = n;
    if (l->b) st = clf_tensor_view(l->b, col, 1, &n, &b);
    if (st == CLF_OK && rows == 1) st = clf_tensor_view(y, col, nd, shape, &view);
    else if (st == CLF_OK) st = clf__ws_get(ctx, ws, CLF__WS_PART, CLF_F32, nd, shape, &part);
    if (st == CLF_OK) st = clf_linear(ctx, x, l->part[i], CLF_WEIGHT_OUT_IN, b, act, view ? view : part, NULL);
    if (st == CLF_OK && part) st = clf__copy_cols(ctx, "clf_linear", part, y, col);
    clf_tensor_destroy(b);
    clf_tensor_destroy(view);
    col += n;
  }
  if (hold) clf__linear_release_x(ctx, x);
  return st;
}

clf_status clf__attn_forward(clf_context *ctx, const clf__attn *a, const clf_tensor *x, const clf_tensor *src,
                             const clf__kv *kv, const clf_attention_mask *mask, const clf__rotary *rot,
                             clf__ws *ws, clf_tensor *y, const clf_tensor **out_bias) {
  const size_t B = x->shape[0], Lq = x->shape[1], H = a->heads, Hkv = a->kv_heads ? a->kv_heads : H, Dh = a->dh;
  const size_t Q = H * Dh, KV = Hkv * Dh;
  const int self = src == NULL;
  if (self) src = x;
  const size_t Ls = src->shape[1];
  clf_tensor *q, *proj, *ctxm, *k, *v;
  size_t pos, kv_len;
  clf_status st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_CTX, CLF_F32, 3, (size_t[]){B, Lq, Q}, &ctxm)) != CLF_OK) return st;
  if (self) {
    /* One projection [Q + 2 KV, D]. */
    if ((st = clf__ws_get(ctx, ws, CLF__WS_PROJ, CLF_F32, 3, (size_t[]){B, Lq, Q + 2 * KV}, &proj)) != CLF_OK ||
        (st = clf__linear_run(ctx, x, &a->qkv, CLF_ACT_NONE, ws, proj)) != CLF_OK ||
        (st = head_norms(ctx, a, proj, ws)) != CLF_OK)
      return st;
    /* Nothing to cache or rotate: where the device's attention reads the
     * heads in place (attn_fused_cpu), they are not split. */
    int done = 0;
    if (!kv && !rot && (st = clf__attention_proj(ctx, proj, H, Hkv, Dh, mask, a->scale, ctxm, &done)) != CLF_OK)
      return st;
    if (done) return attn_out(ctx, a, ctxm, y, out_bias);
  }
  if (self && kv && kv->paged) return attn_paged(ctx, a, proj, kv, mask, rot, ws, ctxm, y, out_bias);
  if ((st = clf__ws_get(ctx, ws, CLF__WS_Q, CLF_F32, 4, (size_t[]){B, H, Lq, Dh}, &q)) != CLF_OK ||
      (st = attn_kv(ctx, kv, B, Hkv, Ls, Dh, ws, &k, &v, &pos, &kv_len)) != CLF_OK)
    return st;
  if (self) {
    /* The projection split three ways into q and the cache. */
    if ((st = heads(ctx, proj, 0, 0, rot, q)) != CLF_OK || (st = heads(ctx, proj, Q, pos, rot, k)) != CLF_OK ||
        (st = clf_split_heads(ctx, proj, Q + KV, pos, v, NULL)) != CLF_OK)
      return st;
  } else { /* cross-attention: q from x, the fused k, v from the encoder states */
    if ((st = clf__ws_get(ctx, ws, CLF__WS_PROJ, CLF_F32, 3, (size_t[]){B, Lq, Q}, &proj)) != CLF_OK ||
        (st = clf_linear(ctx, x, a->q.w, a->q.layout, a->q.b, CLF_ACT_NONE, proj, NULL)) != CLF_OK ||
        (st = clf_split_heads(ctx, proj, 0, 0, q, NULL)) != CLF_OK)
      return st;
    if (!(kv && kv->ready)) {
      clf_tensor *sp;
      if ((st = clf__ws_get(ctx, ws, CLF__WS_SRC, CLF_F32, 3, (size_t[]){B, Ls, 2 * KV}, &sp)) != CLF_OK ||
          (st = clf__linear_run(ctx, src, &a->kv, CLF_ACT_NONE, ws, sp)) != CLF_OK ||
          (st = clf_split_heads(ctx, sp, 0, pos, k, NULL)) != CLF_OK ||
          (st = clf_split_heads(ctx, sp, KV, pos, v, NULL)) != CLF_OK)
        return st;
    }
  }
  if ((st = clf_attention(ctx, q, k, v, kv_len, mask, a->scale, CLF_ATTN_AUTO, ctxm, NULL)) != CLF_OK) return st;
  return attn_out(ctx, a, ctxm, y, out_bias);
}

clf_status clf__mlp_forward(clf_context *ctx, const clf__mlp *m, const clf_tensor *x, clf__ws *ws, clf_tensor *y,
                            const clf_tensor **out_bias) {
  const size_t B = x->shape[0], L = x->shape[1];
  const size_t F = clf__linear_out(&m->fc1);
  clf_tensor *hid, *glu;
  clf_status st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_HID, CLF_F32, 3, (size_t[]){B, L, F}, &hid)) != CLF_OK) return st;
  const clf_tensor *b2 = out_bias ? NULL : m->fc2.b;
  if (out_bias) *out_bias = m->fc2.b;
  if (!m->gated) {
    if ((st = clf__linear_run(ctx, x, &m->fc1, m->act, ws, hid)) != CLF_OK) return st;
    return clf_linear(ctx, hid, m->fc2.w, m->fc2.layout, b2, CLF_ACT_NONE, y, NULL);
  }
  if ((st = clf__ws_get(ctx, ws, CLF__WS_GLU, CLF_F32, 3, (size_t[]){B, L, F / 2}, &glu)) != CLF_OK ||
      (st = clf__linear_run(ctx, x, &m->fc1, CLF_ACT_NONE, ws, hid)) != CLF_OK)
    return st;
  /* glu held from the op that writes it to down_proj, which reads its
   * 8-bit blocks on the integer path (not over a weight whose product
   * takes the float path: glu_q8's blocks would go unread) */
  const int hold = clf__linear_reads(ctx, &m->fc2, B * L) && clf__linear_hold_x(ctx, glu);
  st = clf_glu(ctx, hid, m->act, glu, NULL);
  if (st == CLF_OK) st = clf_linear(ctx, glu, m->fc2.w, m->fc2.layout, b2, CLF_ACT_NONE, y, NULL);
  if (hold) clf__linear_release_x(ctx, glu);
  return st;
}

clf_status clf__ln_apply(clf_context *ctx, const clf__ln *ln, const clf_tensor *x, const clf_tensor *res,
                         const clf_tensor *res_bias, clf_tensor *sum_out, clf_tensor *y) {
  return clf__norm_res_bias(ctx, x, res, res_bias, ln->g, ln->rms ? NULL : ln->b, ln->eps, ln->rms, sum_out, y);
}

void clf__layers_windows(const clf__layer *l, size_t n, size_t window, size_t *out) {
  for (size_t i = 0; i < n; i++) out[i] = l[i].window ? l[i].window : window;
}

clf_status clf__layer_forward(clf_context *ctx, const clf__layer *l, int pre_ln, const clf__ln *next_ln,
                              clf_tensor *h, clf_tensor *a, const clf__layer_io *io, clf__ws *ws) {
  clf_tensor *f;
  clf_status st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_BRANCH, CLF_F32, 3, h->shape, &f)) != CLF_OK) return st;
  /* Each branch's output bias goes into the norm that adds the branch to
   * the residual stream (fb), not into a pass of its own. */
  const clf_tensor *fb = NULL;
  if (pre_ln) {
    /* a = ln_self(h) already.  A sliding-window layer: its window and its
     * frequencies over the stack's. */
    clf_attention_mask wm;
    clf__rotary wr;
    const clf_attention_mask *sm = io->self_mask;
    const clf__rotary *rot = io->rot;
    if (l->window && sm) wm = *sm, wm.window = l->window, sm = &wm;
    if (l->window && rot && rot->local_inv_freq) wr = *rot, wr.inv_freq = rot->local_inv_freq, rot = &wr;
    /* a branch normed before the add takes its bias first */
    if ((st = clf__attn_forward(ctx, &l->self, a, NULL, io->self_kv, sm, rot, ws, f, l->post_self.g ? NULL : &fb)) !=
            CLF_OK ||
        (l->post_self.g && (st = clf__ln_apply(ctx, &l->post_self, f, NULL, NULL, NULL, f)) != CLF_OK))
      return st;
    if (l->has_cross) {
      if ((st = clf__ln_apply(ctx, &l->ln_cross, h, f, fb, h, a)) != CLF_OK) return st;
      if ((st = clf__attn_forward(ctx, &l->cross, a, io->enc, io->cross_kv, io->cross_mask, NULL, ws, f, &fb)) !=
          CLF_OK)
        return st;
    }
    /* a held from the norm that writes it to gate and up (or fc1), which
     * read its 8-bit blocks on the integer path (a stack may hold it
     * already: clf__decoder_stack) */
    const int hold = clf__linear_reads(ctx, &l->mlp.fc1, clf_tensor_numel(a) / a->shape[a->ndim - 1]) &&
                     clf__linear_hold_x(ctx, a);
    st = clf__ln_apply(ctx, &l->ln_mlp, h, f, fb, h, a);
    fb = NULL;
    if (st == CLF_OK) st = clf__mlp_forward(ctx, &l->mlp, a, ws, f, l->post_mlp.g ? NULL : &fb);
    if (hold) clf__linear_release_x(ctx, a);
    if (st != CLF_OK || (l->post_mlp.g && (st = clf__ln_apply(ctx, &l->post_mlp, f, NULL, NULL, NULL, f)) != CLF_OK))
      return st;
    return clf__ln_apply(ctx, next_ln, h, f, fb, h, a);
  }
  /* post-LN: h = LN(h + f(h)) */
  if ((st = clf__attn_forward(ctx, &l->self, h, NULL, io->self_kv, io->self_mask, io->rot, ws, f, &fb)) != CLF_OK)
    return st;
  if ((st = clf__ln_apply(ctx, &l->ln_self, h, f, fb, NULL, h)) != CLF_OK) return st;
  if (l->has_cross) {
    if ((st = clf__attn_forward(ctx, &l->cross, h, io->enc, io->cross_kv, io->cross_mask, NULL, ws, f, &fb)) != CLF_OK)
      return st;
    if ((st = clf__ln_apply(ctx, &l->ln_cross, h, f, fb, NULL, h)) != CLF_OK) return st;
  }
  if ((st = clf__mlp_forward(ctx, &l->mlp, h, ws, f, &fb)) != CLF_OK) return st;
  return clf__ln_apply(ctx, &l->ln_mlp, h, f, fb, NULL, h);
}

clf_status clf__zero(clf_context *ctx, clf_tensor *t) {
  const size_t bytes = clf_tensor_bytes(t);
  void *z = calloc(1, bytes ? bytes : 1);
  if (!z) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory zeroing a %zu-byte cache", bytes);
  clf_status st = clf_tensor_upload(ctx, t, z, bytes);
  free(z);
  return st;
}
