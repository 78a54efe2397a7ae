/* swin.c - SwinModel / SwinForImageClassification: patch embedding + LN,
 * stages of (shifted-)window attention blocks with relative position bias,
 * patch merging between stages, final LN, average pooling, classifier.
 */
#include "family.h"

#include "base/limits.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SWIN_MAX_STAGES 8

/* Swin's workspace slots: window attention's input and output, a block's branch. */
enum { WS_WINDOWS = CLF__WS_FAMILY, WS_WINDOWS_OUT, WS_BRANCH };

typedef struct swin_block {
  clf__attn attn;
  clf__mlp mlp;
  clf__ln ln_before, ln_after;
  clf_tensor *table; /* [(2ws-1)^2, heads] relative_position_bias_table */
  clf_tensor *bias;  /* cached [nW or 1, heads, N, N] for key below */
  clf_tensor *rpb, *mask; /* its parts, kept alive with it (Oclgrind frees a
                           * released buffer before queued work has run) */
  size_t b_hp, b_wp, b_ws, b_shift;
} swin_block;

typedef struct swin_stage {
  size_t dim, depth, heads;
  swin_block *blocks;
  clf__ln merge_ln;     /* downsample.norm [4 dim] (last stage: none) */
  clf__linear merge;    /* downsample.reduction [2 dim, 4 dim], no bias */
  clf__ws ws;
} swin_stage;

typedef struct swin {
  size_t E, C, P, ws, n_stages, n_labels;
  clf_tensor *patch_w, *patch_b; /* [E, C, P, P], [E] */
  clf__ln ln_emb, ln_f;
  swin_stage st[SWIN_MAX_STAGES];
  clf__linear classifier; /* w NULL: SwinModel */
  clf_tensor *ones;       /* [1, L] of 1.0: the average pool as a GEMM */
} swin;

static const char *const swin_inputs[] = {"pixel_values"};
static const char *const swin_outputs[] = {"last_hidden_state", "pooler_output"};
static const char *const swin_cls_outputs[] = {"logits", "last_hidden_state", "pooler_output"};

static void swin_destroy(clf_model *m) {
  swin *s = m->impl;
  if (s)
    for (size_t i = 0; i < SWIN_MAX_STAGES; i++) {
      if (s->st[i].blocks)
        for (size_t j = 0; j < s->st[i].depth; j++) {
          swin_block *b = &s->st[i].blocks[j];
          if (b->bias != b->rpb) clf_tensor_destroy(b->bias);
          clf_tensor_destroy(b->rpb);
          clf_tensor_destroy(b->mask);
        }
      free(s->st[i].blocks);
      clf__ws_free(&s->st[i].ws);
    }
  if (s) clf_tensor_destroy(s->ones);
  free(s);
  m->impl = NULL;
}

/* The attention bias of a block for a padded hp x wp map cut in win x win
 * windows shifted by `shift`: relative position bias (+ the shifted-window
 * mask), [nW or 1, heads, N, N], built once per size and cached. */
static clf_status block_bias(clf_context *ctx, swin_block *b, size_t heads, size_t ws, size_t hp, size_t wp,
                             size_t win, size_t shift) {
  if (b->bias && b->b_hp == hp && b->b_wp == wp && b->b_ws == win && b->b_shift == shift) return CLF_OK;
  if (b->bias != b->rpb) clf_tensor_destroy(b->bias);
  clf_tensor_destroy(b->rpb);
  clf_tensor_destroy(b->mask);
  b->bias = b->rpb = b->mask = NULL;
  const size_t N = win * win, nW = (hp / win) * (wp / win);
  clf_tensor *rpb = NULL, *mask = NULL, *mview = NULL, *out = NULL;
  clf_status st;
  if ((st = clf_tensor_create(ctx, CLF_F32, 4, (size_t[]){1, heads, N, N}, &rpb)) != CLF_OK) goto done;
  if (win == ws) {
    st = clf_relative_position_bias(ctx, b->table, ws, rpb, NULL);
  } else {
    /* The window shrank to the map: the same table, indexed by the relative
     * offsets inside the smaller window. */
    const size_t T = (2 * ws - 1) * (2 * ws - 1);
    float *tab = malloc(T * heads * sizeof *tab), *v = malloc(heads * N * N * sizeof *v + 1);
    if (!tab || !v) st = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "clf_model_run: out of host memory");
    else st = clf_tensor_download(ctx, b->table, tab, T * heads * sizeof *tab);
    if (st == CLF_OK) {
      for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++) {
          const size_t dy = i / win + ws - 1 - j / win, dx = i % win + ws - 1 - j % win;
          for (size_t h = 0; h < heads; h++) v[(h * N + i) * N + j] = tab[(dy * (2 * ws - 1) + dx) * heads + h];
        }
      st = clf_tensor_upload(ctx, rpb, v, heads * N * N * sizeof *v);
    }
    free(tab);
    free(v);
  }
  if (st != CLF_OK) goto done;
  b->rpb = rpb;
  rpb = NULL;
  if (!shift) {
    b->bias = b->rpb;
  } else {
    if ((st = clf_tensor_create(ctx, CLF_F32, 3, (size_t[]){nW, N, N}, &mask)) != CLF_OK ||
        (st = clf_shifted_window_mask(ctx, hp, wp, win, shift, mask, NULL)) != CLF_OK ||
        (st = clf_tensor_view(mask, 0, 4, (size_t[]){nW, 1, N, N}, &mview)) != CLF_OK ||
        (st = clf_tensor_create(ctx, CLF_F32, 4, (size_t[]){nW, heads, N, N}, &out)) != CLF_OK ||
        (st = clf__zero(ctx, out)) != CLF_OK || (st = clf_add(ctx, out, b->rpb, out, NULL)) != CLF_OK ||
        (st = clf_add(ctx, out, mview, out, NULL)) != CLF_OK)
      goto done;
    b->bias = out;
    b->mask = mask;
    out = mask = NULL;
  }
  b->b_hp = hp, b->b_wp = wp, b->b_ws = win, b->b_shift = shift;
done:
  clf_tensor_destroy(rpb);
  clf_tensor_destroy(mask);
  clf_tensor_destroy(mview);
  clf_tensor_destroy(out);
  return st;
}

/* One Swin block on h [B, H*W, C] with a = ln_before(h) on entry:
 * h += reverse(WMSA(partition(a))); h += MLP(ln_after(h)); a = next(h)
 * (next NULL: a is left stale). */
static clf_status swin_block_forward(clf_context *ctx, swin *s, swin_stage *sg, size_t bi, size_t Hs, size_t Ws,
                                     clf_tensor *h, clf_tensor *a, const clf__ln *next) {
  swin_block *b = &sg->blocks[bi];
  const size_t B = h->shape[0], C = sg->dim;
  size_t win = s->ws, shift = bi % 2 ? s->ws / 2 : 0;
  const size_t mn = Hs < Ws ? Hs : Ws;
  if (mn <= win) win = mn, shift = 0;
  const size_t hp = (Hs + win - 1) / win * win, wp = (Ws + win - 1) / win * win, nW = (hp / win) * (wp / win);
  const size_t N = win * win;
  clf_status st;
  if ((st = block_bias(ctx, b, sg->heads, s->ws, hp, wp, win, shift)) != CLF_OK) return st;
  clf_tensor *aw, *fw, *f, *a4 = NULL, *f4 = NULL;
  clf__ws *ws = &sg->ws;
  if ((st = clf__ws_get(ctx, ws, WS_WINDOWS, CLF_F32, 3, (size_t[]){B * nW, N, C}, &aw)) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws, WS_WINDOWS_OUT, CLF_F32, 3, (size_t[]){B * nW, N, C}, &fw)) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws, WS_BRANCH, CLF_F32, 3, h->shape, &f)) != CLF_OK) return st;
  clf_attention_mask am = {NULL, 0, b->bias};
  /* The branches' output biases go into the norms after them (the window
   * reverse only moves positions); the last block's MLP, which no norm
   * follows, adds its own. */
  const clf_tensor *fb = NULL;
  if ((st = clf_tensor_view(a, 0, 4, (size_t[]){B, Hs, Ws, C}, &a4)) == CLF_OK &&
      (st = clf_tensor_view(f, 0, 4, (size_t[]){B, Hs, Ws, C}, &f4)) == CLF_OK &&
      (st = clf_window_partition(ctx, a4, win, shift, aw, NULL)) == CLF_OK &&
      (st = clf__attn_forward(ctx, &b->attn, aw, NULL, NULL, &am, NULL, ws, fw, &fb)) == CLF_OK)
    st = clf_window_reverse(ctx, fw, win, shift, f4, NULL);
  clf_tensor_destroy(a4);
  clf_tensor_destroy(f4);
  if (st != CLF_OK) return st;
  if ((st = clf__ln_apply(ctx, &b->ln_after, h, f, fb, h, a)) != CLF_OK) return st;
  if ((st = clf__mlp_forward(ctx, &b->mlp, a, ws, f, next ? &fb : NULL)) != CLF_OK) return st;
  if (next) return clf__ln_apply(ctx, next, h, f, fb, h, a);
  return clf_add(ctx, h, f, h, NULL);
}

static clf_status swin_check_pixels(clf_model *m, const clf_array *px) {
  static const char op[] = "clf_model_run";
  clf_context *ctx = m->ctx;
  const swin *s = m->impl;
  if (!px)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: swin needs input \"pixel_values\" (f32 [B, C, H, W])", op);
  if (px->dtype != CLF_F32)
    return clf__fail(ctx, CLF_E_DTYPE, "%s: input \"pixel_values\" is %s, expected f32", op, clf_dtype_name(px->dtype));
  if (px->ndim != 4)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: input \"pixel_values\" has %d dims, expected 4 [B, C, H, W]", op,
                     px->ndim);
  if (px->shape[1] != s->C)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: input \"pixel_values\" has %zu channels, the config's num_channels is "
                     "%zu", op, px->shape[1], s->C);
  if (!px->shape[2] || !px->shape[3])
    return clf__fail(ctx, CLF_E_SHAPE, "%s: input \"pixel_values\" is empty (%zux%zu)", op, px->shape[2],
                     px->shape[3]);
  return clf__check_image_budget(m, op, px);
}

/* The image, zero-padded right/bottom to the patch as
 * SwinPatchEmbeddings.maybe_pad does, into img [B, C, Hp, Wp]. */
static clf_status swin_upload_padded(clf_context *ctx, const clf_array *px, clf_tensor *img) {
  const size_t B = px->shape[0], C = px->shape[1], Hi = px->shape[2], Wi = px->shape[3];
  const size_t Hp = img->shape[2], Wp = img->shape[3];
  if (Hp == Hi && Wp == Wi) return clf_tensor_upload(ctx, img, px->data, clf_tensor_bytes(img));
  float *v = calloc(B * C * Hp * Wp + 1, sizeof *v);
  if (!v) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "clf_model_run: out of host memory");
  const float *src = px->data;
  for (size_t bc = 0; bc < B * C; bc++)
    for (size_t y = 0; y < Hi; y++) memcpy(v + (bc * Hp + y) * Wp, src + (bc * Hi + y) * Wi, Wi * sizeof *v);
  clf_status st = clf_tensor_upload(ctx, img, v, clf_tensor_bytes(img));
  free(v);
  return st;
}

/* Patch merging after stage si: gather 2x2 (zero-padded to even), LN,
 * reduction; h, a and the map size move on to the next stage's. */
static clf_status swin_merge(clf_context *ctx, swin *s, size_t si, clf_tensor **h, clf_tensor **a, size_t *Hs,
                             size_t *Ws) {
  swin_stage *sg = &s->st[si];
  const size_t B = (*h)->shape[0], H2 = (*Hs + 1) / 2, W2 = (*Ws + 1) / 2, C2 = s->st[si + 1].dim;
  clf__ws *nws = &s->st[si + 1].ws;
  clf_tensor *h4 = NULL, *g, *nh, *na;
  clf_status st;
  if ((st = clf__ws_get(ctx, &sg->ws, CLF__WS_ENC, CLF_F32, 3, (size_t[]){B, H2 * W2, 4 * sg->dim}, &g)) != CLF_OK ||
      (st = clf__ws_get(ctx, nws, CLF__WS_H, CLF_F32, 3, (size_t[]){B, H2 * W2, C2}, &nh)) != CLF_OK ||
      (st = clf__ws_get(ctx, nws, CLF__WS_A, CLF_F32, 3, (size_t[]){B, H2 * W2, C2}, &na)) != CLF_OK)
    return st;
  if ((st = clf_tensor_view(*h, 0, 4, (size_t[]){B, *Hs, *Ws, sg->dim}, &h4)) == CLF_OK &&
      (st = clf_patch_merge(ctx, h4, g, NULL)) == CLF_OK &&
      (st = clf__ln_apply(ctx, &sg->merge_ln, g, NULL, NULL, NULL, g)) == CLF_OK)
    st = clf_linear(ctx, g, sg->merge.w, CLF_WEIGHT_OUT_IN, NULL, CLF_ACT_NONE, nh, NULL);
  clf_tensor_destroy(h4);
  if (st != CLF_OK) return st;
  *h = nh, *a = na, *Hs = H2, *Ws = W2;
  return CLF_OK;
}

/* The pooler, AdaptiveAvgPool1d(1) over the tokens, on the device as
 * pooled[b] = (1/L) ones[1, L] @ a[b] (one strided-batched GEMM, the ones
 * shared by every batch), then the classifier on the pooled rows. */
static clf_status swin_head(clf_model *m, const clf_tensor *a, const int *want, clf_array *res) {
  clf_context *ctx = m->ctx;
  swin *s = m->impl;
  clf_status st;
  const int is_cls = s->classifier.w != NULL;
  const int o_lhs = is_cls ? 1 : 0, o_pool = is_cls ? 2 : 1;
  const size_t B = a->shape[0], L = a->shape[1], D = a->shape[2];
  if (!s->ones || s->ones->shape[1] != L) {
    float *one = malloc(L * sizeof *one + 1);
    if (!one) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "clf_model_run: out of host memory");
    for (size_t l = 0; l < L; l++) one[l] = 1.0f;
    clf_tensor_destroy(s->ones);
    s->ones = NULL;
    st = clf_tensor_create(ctx, CLF_F32, 2, (size_t[]){1, L}, &s->ones);
    if (st == CLF_OK) st = clf_tensor_upload(ctx, s->ones, one, L * sizeof *one);
    free(one);
    if (st != CLF_OK) return st;
  }
  clf__ws *ws = &s->st[0].ws;
  clf_tensor *pt, *lt;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_ROW, CLF_F32, 2, (size_t[]){B, D}, &pt)) != CLF_OK) return st;
  if ((st = clf__sgemm(ctx, 0, 0, 1, D, L, 1.0f / (float)L, s->ones->buf, s->ones->offset, L, 0, a->buf, a->offset,
                       D, L * D, 0.0f, pt->buf, pt->offset, D, D, B, NULL)) != CLF_OK)
    return st;
  if (is_cls && want[0]) {
    if ((st = clf__ws_get(ctx, ws, CLF__WS_LOGITS, CLF_F32, 2, (size_t[]){B, s->n_labels}, &lt)) != CLF_OK ||
        (st = clf_linear(ctx, pt, s->classifier.w, CLF_WEIGHT_OUT_IN, s->classifier.b, CLF_ACT_NONE, lt, NULL)) !=
            CLF_OK ||
        (st = clf__download(m, lt, "logits", &res[0])) != CLF_OK)
      return st;
  }
  if (want[o_lhs] && (st = clf__download(m, a, "last_hidden_state", &res[o_lhs])) != CLF_OK) return st;
  if (want[o_pool] && (st = clf__download(m, pt, "pooler_output", &res[o_pool])) != CLF_OK) return st;
  return CLF_OK;
}

/* patch embedding + LN -> stages of (shifted) window blocks, each but the
 * last followed by patch merging -> LN -> pooler and classifier. */
static clf_status swin_run(clf_model *m, const clf__inputs in, const int *want, clf_array *res) {
  clf_context *ctx = m->ctx;
  swin *s = m->impl;
  clf_status st;
  const clf_array *px = in[0];
  if ((st = swin_check_pixels(m, px)) != CLF_OK) return st;
  const size_t B = px->shape[0], C = s->C, P = s->P;
  const size_t Hp = (px->shape[2] + P - 1) / P * P, Wp = (px->shape[3] + P - 1) / P * P;
  size_t Hs = Hp / P, Ws = Wp / P;
  swin_stage *s0 = &s->st[0];
  clf_tensor *img, *h, *a;
  if ((st = clf__ws_get(ctx, &s0->ws, CLF__WS_IMAGE, CLF_F32, 4, (size_t[]){B, C, Hp, Wp}, &img)) != CLF_OK ||
      (st = swin_upload_padded(ctx, px, img)) != CLF_OK ||
      (st = clf__ws_get(ctx, &s0->ws, CLF__WS_H, CLF_F32, 3, (size_t[]){B, Hs * Ws, s->E}, &h)) != CLF_OK ||
      (st = clf__ws_get(ctx, &s0->ws, CLF__WS_A, CLF_F32, 3, (size_t[]){B, Hs * Ws, s->E}, &a)) != CLF_OK ||
      (st = clf_patch_embed(ctx, img, s->patch_w, s->patch_b, h, NULL)) != CLF_OK ||
      (st = clf__ln_apply(ctx, &s->ln_emb, h, NULL, NULL, NULL, h)) != CLF_OK)
    return st;
  for (size_t si = 0; si < s->n_stages; si++) {
    swin_stage *sg = &s->st[si];
    if (sg->depth && (st = clf__ln_apply(ctx, &sg->blocks[0].ln_before, h, NULL, NULL, NULL, a)) != CLF_OK) return st;
    for (size_t bi = 0; bi < sg->depth; bi++) {
      const clf__ln *next = bi + 1 < sg->depth ? &sg->blocks[bi + 1].ln_before : NULL;
      if ((st = swin_block_forward(ctx, s, sg, bi, Hs, Ws, h, a, next)) != CLF_OK) return st;
    }
    if (si + 1 < s->n_stages && (st = swin_merge(ctx, s, si, &h, &a, &Hs, &Ws)) != CLF_OK) return st;
  }
  if ((st = clf__ln_apply(ctx, &s->ln_f, h, NULL, NULL, NULL, a)) != CLF_OK) return st;
  return swin_head(m, a, want, res);
}

/* config.json keys (depths and num_heads, lists, are read by the loader) */
typedef struct swin_dims {
  long E, C, P, WS;
  double eps, ratio;
  int qkv_bias, abs_pos;
  const char *act;
} swin_dims;
static const clf__config_key swin_keys[] = {
    CLF__OPT(swin_dims, E, "embed_dim", INT, 96),
    CLF__OPT(swin_dims, C, "num_channels", INT, 3),
    CLF__OPT(swin_dims, P, "patch_size", INT, 4),
    CLF__OPT(swin_dims, WS, "window_size", INT, 7),
    CLF__OPT(swin_dims, eps, "layer_norm_eps", FLOAT, 1e-5),
    CLF__OPT(swin_dims, ratio, "mlp_ratio", FLOAT, 4.0),
    CLF__OPT(swin_dims, qkv_bias, "qkv_bias", BOOL, 1),
    CLF__OPT(swin_dims, abs_pos, "use_absolute_embeddings", BOOL, 0),
    CLF__OPT_STR(swin_dims, act, "hidden_act", "gelu"),
};

/* the weights of encoder.layers.S.blocks.N. */
static const clf__weight_row swin_block_rows[] = {
    CLF__QKV(swin_block, attn, "attention.self.%s", QKV, "query", "key", "value"), /* 3 x [dim, dim] */
    CLF__LIN(swin_block, attn.o, "attention.output.dense", D, D, YES), /* [dim, dim] */
    CLF__LIN(swin_block, mlp.fc1, "intermediate.dense", F, D, YES),    /* [F, dim] */
    CLF__LIN(swin_block, mlp.fc2, "output.dense", D, F, YES),          /* [dim, F] */
    CLF__LN(swin_block, ln_before, "layernorm_before"),
    CLF__LN(swin_block, ln_after, "layernorm_after"),
};

/* T patch tokens at stage 0; each merge quarters them */
static void swin_gemms(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l) {
  const swin_dims *d = dims;
  long depths[16];
  size_t ns = 0;
  if (clf__config_int_list(NULL, c, "depths", depths, 16, &ns) != CLF_OK) ns = 0;
  size_t rows = T;
  if (d->E <= 0 || (size_t)d->E > CLF_LIMIT_MODEL_DIM || !(d->ratio > 0 && d->ratio * (double)d->E < 1e9))
    return; /* swin_load refuses it */
  for (size_t s = 0; s < ns && rows > 0; s++, rows /= 4) {
    const long dim = d->E << s, f = (long)(d->ratio * dim);
    const clf__block_spec spec = clf__spec_encoder((size_t)dim, (size_t)f, 0, 1, 1);
    clf__rows_gemms(swin_block_rows, CLF__ARRAY_LEN(swin_block_rows), &spec, rows, depths[s], l);
    if (s + 1 < ns) clf__gemm_add(l, rows / 4, 2 * dim, 4 * dim, 1, 1); /* patch merging */
  }
}

/* Stage si: its blocks [depth] and, but for the last stage, the patch
 * merging after it. */
static clf_status swin_load_stage(clf_model *m, swin *s, const clf__weights *w, const char *pf, size_t si,
                                  const long *depths, const long *heads, const swin_dims *dm, clf_activation act) {
  clf_context *ctx = m->ctx;
  clf_status st;
  char n1[256];
  clf__params *p = &m->params;
  const size_t e = dm->E, T = (size_t)(2 * dm->WS - 1) * (size_t)(2 * dm->WS - 1), nd = s->n_stages;
  const double eps = dm->eps, ratio = dm->ratio;
  const int qkv_bias = dm->qkv_bias;
  swin_stage *sg = &s->st[si];
  const size_t dim = e << si, H = heads[si], F = (size_t)(ratio * (double)dim);
  sg->dim = dim, sg->depth = depths[si], sg->heads = H;
  if (!(sg->blocks = calloc(sg->depth + 1, sizeof *sg->blocks)))
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "clf_model_load: out of host memory");
  for (size_t bi = 0; bi < sg->depth; bi++) {
    swin_block *b = &sg->blocks[bi];
    char lp[160];
    clf__wn(lp, sizeof lp, pf, "encoder.layers.%zu.blocks.%zu.", si, bi);
    b->attn.heads = H, b->attn.dh = dim / H, b->attn.scale = 1.0f / sqrtf((float)(dim / H));
    b->mlp.act = act;
    const clf__block_spec spec = clf__spec_encoder(dim, F, (float)eps, qkv_bias, clf__linear_prefers_in_out(ctx));
    if ((st = clf__load_rows(ctx, w, p, lp, swin_block_rows, CLF__ARRAY_LEN(swin_block_rows), &spec, b)) != CLF_OK)
      return st;
    if ((st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, lp, "attention.self.relative_position_bias_table"), 2,
                         (size_t[]){T, H}, &b->table)) != CLF_OK)
      return st;
  }
  if (si + 1 < nd) {
    char dp[160];
    clf__wn(dp, sizeof dp, pf, "encoder.layers.%zu.downsample.", si);
    if ((st = clf__load_ln(ctx, w, p, clf__wn(n1, sizeof n1, dp, "norm"), 4 * dim, 1e-5f, &sg->merge_ln)) !=
            CLF_OK ||
        (st = clf__load_linear(ctx, w, p, clf__wn(n1, sizeof n1, dp, "reduction.weight"), NULL, 2 * dim, 4 * dim,
                               CLF_WEIGHT_OUT_IN, 0, &sg->merge)) != CLF_OK) /* [2 dim, 4 dim] */
      return st;
  }
  return CLF_OK;
}

/* SwinForImageClassification's classifier [n_labels, nf], when stored. */
static clf_status swin_load_head(clf_model *m, swin *s, const clf__weights *w, size_t nf) {
  clf_context *ctx = m->ctx;
  clf_status st;
  clf__params *p = &m->params;
  if (clf__weights_has(w, "classifier.weight")) {
    int ndim;
    size_t sh[8];
    if ((st = clf__weights_shape(ctx, w, "classifier.weight", &ndim, sh)) != CLF_OK) return st;
    s->n_labels = sh[0];
    if ((st = clf__load_linear(ctx, w, p, "classifier.weight", "classifier.bias", s->n_labels, nf, CLF_WEIGHT_OUT_IN, 0,
                               &s->classifier)) != CLF_OK)
      return st;
    m->out_names = swin_cls_outputs;
    m->n_out = 3;
  } else {
    m->out_names = swin_outputs;
    m->n_out = 2;
  }
  return CLF_OK;
}

static clf_status swin_load(clf_model *m, const void *dims, const clf__config *c, const clf__weights *w) {
  const swin_dims *dm = dims;
  clf_context *ctx = m->ctx;
  clf_status st;
  const long E = dm->E, C = dm->C, P = dm->P, WS = dm->WS;
  long depths[SWIN_MAX_STAGES], heads[SWIN_MAX_STAGES];
  size_t nd = 0, nh = 0;
  const double eps = dm->eps, ratio = dm->ratio;
  const int abs_pos = dm->abs_pos;
  const char *act_name = dm->act;
  clf_activation act;
  if ((st = clf__config_int_list(ctx, c, "depths", depths, SWIN_MAX_STAGES, &nd)) != CLF_OK ||
      (st = clf__config_int_list(ctx, c, "num_heads", heads, SWIN_MAX_STAGES, &nh)) != CLF_OK)
    return st;
  const long lim = (long)CLF_LIMIT_MODEL_DIM;
  int bad = E <= 0 || C <= 0 || P <= 0 || WS <= 0 || nd == 0 || nd != nh || E > lim || C > lim || P > lim ||
            WS > lim || (E << (nd - 1)) > lim;
  for (size_t i = 0; i < nd && !bad; i++)
    bad = depths[i] < 0 || depths[i] > lim || heads[i] <= 0 || ((size_t)E << i) % (size_t)heads[i];
  if (bad)
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: swin config has invalid sizes (embed_dim %ld, %zu depths, "
                     "%zu num_heads, window_size %ld, patch_size %ld; each at most %ld)", E, nd, nh, WS, P, lim);
  /* SwinLayer's int(mlp_ratio * dim), for the widest stage */
  if (!(ratio > 0 && ratio * (double)(E << (nd - 1)) < (double)lim))
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: swin mlp_ratio %g gives an intermediate size outside 1 to "
                     "%ld at embed_dim %ld", ratio, lim, E << (nd - 1));
  if (abs_pos)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_model_load: swin use_absolute_embeddings is not supported");
  if (clf_activation_from_name(act_name, &act) != CLF_OK)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_model_load: swin hidden_act \"%s\" is not supported", act_name);
  swin *s = calloc(1, sizeof *s);
  if (!s) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "clf_model_load: out of host memory");
  m->impl = s;
  m->destroy = swin_destroy;
  m->run = swin_run;
  m->in_names = swin_inputs;
  m->n_in = 1;
  s->E = E, s->C = C, s->P = P, s->ws = WS, s->n_stages = nd;
  const char *pf = clf__weights_has(w, "swin.embeddings.patch_embeddings.projection.weight") ? "swin." : "";
  char n1[256];
  clf__params *p = &m->params;
  const size_t e = E;
  if ((st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.patch_embeddings.projection.weight"), 4,
                       (size_t[]){e, C, P, P}, &s->patch_w)) != CLF_OK ||
      (st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.patch_embeddings.projection.bias"), 1, &e,
                       &s->patch_b)) != CLF_OK ||
      (st = clf__load_ln(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.norm"), e, 1e-5f, &s->ln_emb)) != CLF_OK)
    return st;
  for (size_t si = 0; si < nd; si++)
    if ((st = swin_load_stage(m, s, w, pf, si, depths, heads, dm, act)) != CLF_OK) return st;
  const size_t nf = e << (nd - 1);
  if ((st = clf__load_ln(ctx, w, p, clf__wn(n1, sizeof n1, pf, "layernorm"), nf, (float)eps, &s->ln_f)) != CLF_OK)
    return st;
  return swin_load_head(m, s, w, nf);
}

/* SwinModel: last_hidden_state, pooler_output; SwinForImageClassification:
 * logits, last_hidden_state, pooler_output. */
const clf__family clf__swin_family = {"swin", {"SwinModel", "SwinForImageClassification", NULL}, swin_keys,
                                      CLF__ARRAY_LEN(swin_keys), sizeof(swin_dims), swin_load, swin_gemms};
