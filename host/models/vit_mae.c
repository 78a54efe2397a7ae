/* vit_mae.c - ViTMAEModel / ViTMAEForPreTraining: patch embedding +
 * positions, random masking by noise, the ViT encoder on CLS + kept patches,
 * and the decoder (mask tokens unshuffled into place) with its pixel loss.
 */
#include "family.h"
#include "vit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mae {
  size_t D, C, P, S, L, keep, n_layers;       /* L: patches of the configured image */
  size_t Dd, n_dec;                           /* decoder */
  int norm_pix;
  clf_tensor *patch_w, *patch_b;              /* [D, C, P, P], [D] */
  clf_tensor *pos_patch;                      /* [L, D]: position_embeddings[0, 1:] (view) */
  clf_tensor *cls_pos;                        /* [1, 1, D]: cls_token + position_embeddings[0, 0] */
  clf__layer *layers, *dec_layers;
  clf__ln ln_f, dec_norm;
  clf__linear dec_embed, dec_pred;            /* w NULL: no decoder (ViTMAEModel) */
  clf_tensor *mask_token;                     /* [Dd] (view) */
  clf_tensor *dec_pos;                        /* [L + 1, Dd] (view) */
  uint64_t rng;                               /* splitmix64 state for noise when none is given */
} mae;

static const char *const mae_inputs[] = {"pixel_values", "noise"};
static const char *const mae_outputs[] = {"last_hidden_state", "mask", "ids_restore"};
static const char *const mae_pre_outputs[] = {"logits", "mask", "ids_restore", "loss", "last_hidden_state"};

static void mae_destroy(clf_model *m) {
  mae *e = m->impl;
  if (e) {
    free(e->layers);
    free(e->dec_layers);
  }
  free(e);
  m->impl = NULL;
}

/* splitmix64: uniform floats in [0, 1) with 24 bits. */
static float mae_uniform(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (float)(z >> 40) * (1.0f / 16777216.0f);
}

/* The loss of ViTMAEForPreTraining.forward_loss on the host, in double:
 * target = patchify(pixels) (nhwpqc), normalised per patch (unbiased var,
 * + 1e-6) with norm_pix_loss; mean over masked patches of the patch MSE. */
static float mae_loss(const mae *e, const float *px, const float *pred, const float *mask, size_t B, size_t gh,
                      size_t gw) {
  const size_t P = e->P, C = e->C, F = P * P * C, L = gh * gw, W = gw * P, H = gh * P;
  double num = 0, den = 0;
  double *t = malloc(F * sizeof *t);
  if (!t) return NAN;
  for (size_t b = 0; b < B; b++)
    for (size_t l = 0; l < L; l++) {
      const size_t py = l / gw, pxx = l % gw;
      for (size_t i = 0; i < P; i++)
        for (size_t j = 0; j < P; j++)
          for (size_t c = 0; c < C; c++)
            t[(i * P + j) * C + c] = px[((b * C + c) * H + py * P + i) * W + pxx * P + j];
      if (e->norm_pix) {
        double mean = 0, var = 0;
        for (size_t f = 0; f < F; f++) mean += t[f];
        mean /= (double)F;
        for (size_t f = 0; f < F; f++) var += (t[f] - mean) * (t[f] - mean);
        var /= (double)(F > 1 ? F - 1 : 1);
        for (size_t f = 0; f < F; f++) t[f] = (t[f] - mean) / sqrt(var + 1e-6);
      }
      double se = 0;
      const float *p = pred + (b * L + l) * F;
      for (size_t f = 0; f < F; f++) se += (p[f] - t[f]) * (p[f] - t[f]);
      num += se / (double)F * mask[b * L + l];
      den += mask[b * L + l];
    }
  free(t);
  return (float)(num / den);
}

/* ViTMAEForPreTraining's decoder on the encoder output a [B, K + 1, D]:
 * decoder_embed, mask tokens unshuffled into place, positions, the layers,
 * decoder_pred; logits [B, L, P*P*C] into res[0] and the loss into res[3]. */
static clf_status mae_decode(clf_model *m, const clf__inputs in, const int *want, const clf_tensor *a,
                             const clf_tensor *ids_restore, clf_array *res) {
  static const char op[] = "clf_model_run";
  clf_context *ctx = m->ctx;
  mae *e = m->impl;
  clf__ws *ws2 = &m->ws2;
  clf_status st;
  const int o_mask = 1;
  const size_t B = in[0]->shape[0], Hi = in[0]->shape[2], Wi = in[0]->shape[3], L = e->L, K = e->keep;
  const size_t Dd = e->Dd, F = e->P * e->P * e->C;
  clf_tensor *x, *xd, *ad, *pred, *logits;
  if ((st = clf__ws_get(ctx, ws2, CLF__WS_DEC_IN, CLF_F32, 3, (size_t[]){B, K + 1, Dd}, &x)) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws2, CLF__WS_H, CLF_F32, 3, (size_t[]){B, L + 1, Dd}, &xd)) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws2, CLF__WS_A, CLF_F32, 3, (size_t[]){B, L + 1, Dd}, &ad)) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws2, CLF__WS_ROW, CLF_F32, 3, (size_t[]){B, L + 1, F}, &pred)) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws2, CLF__WS_LOGITS, CLF_F32, 3, (size_t[]){B, L, F}, &logits)) != CLF_OK) return st;
  if ((st = clf_linear(ctx, a, e->dec_embed.w, CLF_WEIGHT_OUT_IN, e->dec_embed.b, CLF_ACT_NONE, x, NULL)) != CLF_OK)
    return st;
  if ((st = clf_copy_rows(ctx, x, 0, xd, 0, B ? 1 : 0, NULL)) != CLF_OK) return st;
  if ((st = clf_mae_unshuffle(ctx, x, 1, e->mask_token, ids_restore, K, xd, 1, NULL)) != CLF_OK) return st;
  if ((st = clf_position_embedding(ctx, e->dec_pos, 0, 1, xd, NULL)) != CLF_OK) return st;
  if ((st = clf__vit_encoder(ctx, e->dec_layers, e->n_dec, &e->dec_norm, xd, ad, ws2)) != CLF_OK) return st;
  if ((st = clf_linear(ctx, ad, e->dec_pred.w, CLF_WEIGHT_OUT_IN, e->dec_pred.b, CLF_ACT_NONE, pred, NULL)) != CLF_OK)
    return st;
  if ((st = clf_copy_rows(ctx, pred, 1, logits, 0, L, NULL)) != CLF_OK) return st;
  if ((st = clf__download(m, logits, "logits", &res[0])) != CLF_OK) return st;
  if (want[3]) {
    clf_array *r = &res[3];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "loss");
    r->dtype = CLF_F32;
    r->ndim = 0;
    if (!(r->data = malloc(sizeof(float)))) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
    *(float *)r->data =
        mae_loss(e, in[0]->data, res[0].data, res[o_mask].data, B, Hi / e->P, Wi / e->P);
  }
  if (!want[0]) clf_array_free(&res[0]);
  if (!want[o_mask]) clf_array_free(&res[o_mask]);
  return CLF_OK;
}

static clf_status mae_run(clf_model *m, const clf__inputs in, const int *want, clf_array *res) {
  static const char op[] = "clf_model_run";
  clf_context *ctx = m->ctx;
  mae *e = m->impl;
  clf__ws *ws = &m->ws;
  clf_status st;
  const int pre = e->dec_embed.w != NULL;
  /* output slot of each result */
  const int o_lhs = pre ? 4 : 0, o_mask = 1, o_ids = 2;
  if ((st = clf__vit_check_pixels(m, "clf_model_run", in[0], e->C, e->P)) != CLF_OK) return st;
  const size_t B = in[0]->shape[0], Hi = in[0]->shape[2], Wi = in[0]->shape[3];
  if (Hi != e->S || Wi != e->S)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: input \"pixel_values\" image size %zux%zu is not the config's "
                     "image_size %zux%zu (vit_mae does not interpolate positions)", op, Hi, Wi, e->S, e->S);
  const size_t L = e->L, K = e->keep, D = e->D;
  if (in[1]) {
    const clf_array *nz = in[1];
    if (nz->dtype != CLF_F32)
      return clf__fail(ctx, CLF_E_DTYPE, "%s: input \"noise\" is %s, expected f32", op, clf_dtype_name(nz->dtype));
    if (nz->ndim != 2 || nz->shape[0] != B || nz->shape[1] != L) {
      char shp[96];
      size_t at = 0;
      shp[0] = 0;
      for (int i = 0; i < nz->ndim && at < sizeof shp; i++)
        at += (size_t)snprintf(shp + at, sizeof shp - at, "%s%zu", i ? ", " : "", nz->shape[i]);
      return clf__fail(ctx, CLF_E_SHAPE, "%s: input \"noise\" has shape [%s], expected [%zu, %zu] (batch, number "
                       "of patches)", op, shp, B, L);
    }
  }
  clf_tensor *img, *noise, *pe, *h, *a, *ids_keep, *ids_restore, *mask;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_IMAGE, CLF_F32, 4, in[0]->shape, &img)) != CLF_OK) return st;
  if ((st = clf_tensor_upload(ctx, img, in[0]->data, clf_tensor_bytes(img))) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_POS, CLF_F32, 2, (size_t[]){B, L}, &noise)) != CLF_OK) return st;
  if (in[1]) {
    st = clf_tensor_upload(ctx, noise, in[1]->data, B * L * sizeof(float));
  } else {
    float *nz = malloc(B * L * sizeof *nz + 1);
    if (!nz) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
    for (size_t i = 0; i < B * L; i++) nz[i] = mae_uniform(&e->rng);
    st = clf_tensor_upload(ctx, noise, nz, B * L * sizeof *nz);
    free(nz);
  }
  if (st != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_IDS, CLF_I64, 2, (size_t[]){B, K}, &ids_keep)) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_IDS2, CLF_I64, 2, (size_t[]){B, L}, &ids_restore)) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_MASK, CLF_F32, 2, (size_t[]){B, L}, &mask)) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_PATCHES, CLF_F32, 3, (size_t[]){B, L, D}, &pe)) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_H, CLF_F32, 3, (size_t[]){B, K + 1, D}, &h)) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_A, CLF_F32, 3, (size_t[]){B, K + 1, D}, &a)) != CLF_OK) return st;

  /* embeddings: patches + positions, masking, CLS (+ its position) first */
  if ((st = clf_patch_embed(ctx, img, e->patch_w, e->patch_b, pe, NULL)) != CLF_OK) return st;
  if ((st = clf_position_embedding(ctx, e->pos_patch, 0, 1, pe, NULL)) != CLF_OK) return st;
  if ((st = clf_mae_random_masking(ctx, noise, K, ids_keep, ids_restore, mask, NULL)) != CLF_OK) return st;
  if ((st = clf_gather_rows(ctx, pe, 0, ids_keep, h, 1, NULL)) != CLF_OK) return st;
  if ((st = clf_copy_rows(ctx, e->cls_pos, 0, h, 0, B ? 1 : 0, NULL)) != CLF_OK) return st;
  if ((st = clf__vit_encoder(ctx, e->layers, e->n_layers, &e->ln_f, h, a, ws)) != CLF_OK) return st;
  if (want[o_lhs] && (st = clf__download(m, a, "last_hidden_state", &res[o_lhs])) != CLF_OK) return st;
  if ((want[o_mask] || (pre && want[3])) && (st = clf__download(m, mask, "mask", &res[o_mask])) != CLF_OK)
    return st;
  if (want[o_ids] && (st = clf__download(m, ids_restore, "ids_restore", &res[o_ids])) != CLF_OK) return st;
  if (!pre || !(want[0] || want[3])) return CLF_OK;

  return mae_decode(m, in, want, a, ids_restore, res);
}

/* config.json keys */
typedef struct mae_dims {
  long D, H, N, F, Dd, Hd, Nd, Fd, C, P, S;
  double eps, ratio;
  int qkv_bias, norm_pix;
  const char *act;
} mae_dims;
static const clf__config_key mae_keys[] = {
    CLF__REQ(mae_dims, D, "hidden_size", INT),
    CLF__REQ(mae_dims, H, "num_attention_heads", INT),
    CLF__REQ(mae_dims, N, "num_hidden_layers", INT),
    CLF__REQ(mae_dims, F, "intermediate_size", INT),
    CLF__OPT(mae_dims, Dd, "decoder_hidden_size", INT, 512),
    CLF__OPT(mae_dims, Hd, "decoder_num_attention_heads", INT, 16),
    CLF__OPT(mae_dims, Nd, "decoder_num_hidden_layers", INT, 8),
    CLF__OPT(mae_dims, Fd, "decoder_intermediate_size", INT, 2048),
    CLF__OPT(mae_dims, C, "num_channels", INT, 3),
    CLF__OPT(mae_dims, P, "patch_size", INT, 16),
    CLF__OPT(mae_dims, S, "image_size", INT, 224),
    CLF__OPT(mae_dims, eps, "layer_norm_eps", FLOAT, 1e-12),
    CLF__OPT(mae_dims, ratio, "mask_ratio", FLOAT, 0.75),
    CLF__OPT(mae_dims, qkv_bias, "qkv_bias", BOOL, 1),
    CLF__OPT(mae_dims, norm_pix, "norm_pix_loss", BOOL, 0),
    CLF__OPT_STR(mae_dims, act, "hidden_act", "gelu"),
};

/* The encoder as ViT's, then (ViTMAEForPreTraining) decoder_embed, the
 * decoder layers and decoder_pred, every GEMM over the T rows given. */
static void mae_gemms(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l) {
  const mae_dims *d = dims;
  /* the layers' f32 weights stored [in, out] (trans_b 0), the decoder's
   * embedding and prediction [out, in] */
  clf__vit_gemms((size_t)d->D, (size_t)d->F, T, d->N, l);
  if (!clf__config_has_arch(c, "ViTMAEForPreTraining")) return;
  clf__gemm_add(l, T, d->Dd, d->D, 1, 1);
  clf__vit_gemms((size_t)d->Dd, (size_t)d->Fd, T, d->Nd, l);
  clf__gemm_add(l, T, d->P * d->P * d->C, d->Dd, 1, 1);
}

/* ViTMAEForPreTraining's decoder: decoder_embed [Dd, D], the mask token
 * and positions, Nd pre-LN layers, decoder_norm and decoder_pred
 * [P*P*C, Dd]. */
static clf_status mae_load_decoder(clf_model *m, mae *e, const mae_dims *dm, const clf__weights *w,
                                   clf_activation act) {
  clf_context *ctx = m->ctx;
  clf_status st;
  clf__params *p = &m->params;
  const long Dd = dm->Dd, Nd = dm->Nd, Hd = dm->Hd, Fd = dm->Fd, P = dm->P, C = dm->C;
  const size_t d = dm->D, L = e->L;
  const double eps = dm->eps;
  const int qkv_bias = dm->qkv_bias;
  e->Dd = Dd, e->n_dec = Nd;
  const size_t dd = Dd, Fp = (size_t)(P * P * C);
  clf_tensor *mt3, *dpos3;
  if ((st = clf__load_linear(ctx, w, p, "decoder.decoder_embed.weight", "decoder.decoder_embed.bias", dd, d,
                             CLF_WEIGHT_OUT_IN, 0, &e->dec_embed)) != CLF_OK ||
      (st = clf__load_linear(ctx, w, p, "decoder.decoder_pred.weight", "decoder.decoder_pred.bias", Fp, dd,
                             CLF_WEIGHT_OUT_IN, 0, &e->dec_pred)) != CLF_OK ||
      (st = clf__param(ctx, w, p, "decoder.mask_token", 3, (size_t[]){1, 1, dd}, &mt3)) != CLF_OK ||
      (st = clf__param(ctx, w, p, "decoder.decoder_pos_embed", 3, (size_t[]){1, L + 1, dd}, &dpos3)) != CLF_OK ||
      (st = clf__load_ln(ctx, w, p, "decoder.decoder_norm", dd, (float)eps, &e->dec_norm)) != CLF_OK)
    return st;
  if ((st = clf_tensor_view(mt3, 0, 1, &dd, &e->mask_token)) != CLF_OK ||
      (st = clf__params_add(ctx, p, e->mask_token)) != CLF_OK ||
      (st = clf_tensor_view(dpos3, 0, 2, (size_t[]){L + 1, dd}, &e->dec_pos)) != CLF_OK ||
      (st = clf__params_add(ctx, p, e->dec_pos)) != CLF_OK)
    return st;
  return clf__vit_load_layers(ctx, w, p, "decoder.decoder_layers.", Nd, dd, Hd, Fd, (float)eps, act, qkv_bias,
                              e->dec_layers);
}

static clf_status mae_load(clf_model *m, const void *dims, const clf__config *c, const clf__weights *w) {
  const mae_dims *dm = dims;
  clf_context *ctx = m->ctx;
  clf_status st;
  const long D = dm->D, H = dm->H, F = dm->F, N = dm->N, C = dm->C, P = dm->P, S = dm->S, Dd = dm->Dd, Hd = dm->Hd,
             Fd = dm->Fd, Nd = dm->Nd;
  const double eps = dm->eps, ratio = dm->ratio;
  const int qkv_bias = dm->qkv_bias, norm_pix = dm->norm_pix;
  const char *act_name = dm->act;
  clf_activation act;
  (void)c;
  if (D <= 0 || H <= 0 || D % H || N < 0 || F <= 0 || C <= 0 || P <= 0 || S <= 0 || S % P || Dd <= 0 || Hd <= 0 ||
      Dd % Hd || Nd < 0 || Fd <= 0 || !(ratio >= 0 && ratio < 1))
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: vit_mae config has invalid sizes (hidden_size %ld, heads "
                     "%ld, decoder_hidden_size %ld, decoder heads %ld, patch_size %ld, image_size %ld, mask_ratio %g)",
                     D, H, Dd, Hd, P, S, ratio);
  if (clf_activation_from_name(act_name, &act) != CLF_OK)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_model_load: vit_mae hidden_act \"%s\" is not supported", act_name);
  mae *e = calloc(1, sizeof *e);
  if (!e || !(e->layers = calloc((size_t)N + 1, sizeof *e->layers)) ||
      !(e->dec_layers = calloc((size_t)Nd + 1, sizeof *e->dec_layers))) {
    if (e) free(e->layers);
    free(e);
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "clf_model_load: out of host memory");
  }
  m->impl = e;
  m->destroy = mae_destroy;
  m->run = mae_run;
  m->in_names = mae_inputs;
  m->n_in = 2;
  e->D = D, e->C = C, e->P = P, e->S = S, e->n_layers = N, e->norm_pix = norm_pix;
  e->L = (size_t)(S / P) * (size_t)(S / P);
  e->keep = (size_t)((double)e->L * (1.0 - ratio)); /* int(L * (1 - mask_ratio)) */
  e->rng = 0;
  const size_t d = D, L = e->L;
  const int pre = clf__weights_has(w, "decoder.decoder_embed.weight");
  const char *pf = clf__weights_has(w, "vit.embeddings.cls_token") ? "vit." : "";
  char n1[256];
  clf__params *p = &m->params;
  clf_tensor *pos3, *cls, *v0;
  if ((st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.cls_token"), 3, (size_t[]){1, 1, d},
                       &cls)) != CLF_OK ||
      (st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.position_embeddings"), 3,
                       (size_t[]){1, L + 1, d}, &pos3)) != CLF_OK ||
      (st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.patch_embeddings.projection.weight"), 4,
                       (size_t[]){d, C, P, P}, &e->patch_w)) != CLF_OK ||
      (st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.patch_embeddings.projection.bias"), 1,
                       &d, &e->patch_b)) != CLF_OK ||
      (st = clf__load_ln(ctx, w, p, clf__wn(n1, sizeof n1, pf, "layernorm"), d, (float)eps, &e->ln_f)) != CLF_OK)
    return st;
  if ((st = clf_tensor_view(pos3, d, 2, (size_t[]){L, d}, &e->pos_patch)) != CLF_OK ||
      (st = clf__params_add(ctx, p, e->pos_patch)) != CLF_OK)
    return st;
  /* cls_pos = cls_token + position_embeddings[:, :1] (once, on the device) */
  if ((st = clf_tensor_view(pos3, 0, 3, (size_t[]){1, 1, d}, &v0)) != CLF_OK ||
      (st = clf__params_add(ctx, p, v0)) != CLF_OK ||
      (st = clf_tensor_create(ctx, CLF_F32, 3, (size_t[]){1, 1, d}, &e->cls_pos)) != CLF_OK ||
      (st = clf__params_add(ctx, p, e->cls_pos)) != CLF_OK || (st = clf_add(ctx, cls, v0, e->cls_pos, NULL)) != CLF_OK)
    return st;
  if ((st = clf__vit_load_layers(ctx, w, p, clf__wn(n1, sizeof n1, pf, "encoder.layer."), N, d, H, F, (float)eps,
                                 act, qkv_bias, e->layers)) != CLF_OK)
    return st;
  if (!pre) {
    m->out_names = mae_outputs;
    m->n_out = 3;
    return CLF_OK;
  }
  m->out_names = mae_pre_outputs;
  m->n_out = 5;
  return mae_load_decoder(m, e, dm, w, act);
}

/* ViTMAEModel: last_hidden_state, mask, ids_restore; ViTMAEForPreTraining:
 * logits, mask, ids_restore, loss, last_hidden_state. */
const clf__family clf__vit_mae_family = {"vit_mae", {"ViTMAEModel", "ViTMAEForPreTraining", NULL}, mae_keys,
                                         CLF__ARRAY_LEN(mae_keys), sizeof(mae_dims), mae_load, mae_gemms};

/* Un-normalises predicted patch `l` of image b (norm_pix_loss: the target
 * patch's own mean and unbiased std, as the loss used) into img. */
static void mae_unpatch_one(const mae *e, const float *x, const float *pred, size_t H, size_t W, size_t gw,
                            size_t l, float *img) {
  const size_t P = e->P, C = e->C, n = P * P * C, y0 = l / gw * P, x0 = l % gw * P;
  double pm = 0, pv = 1;
  if (e->norm_pix) {
    double s = 0, s2 = 0;
    for (size_t p = 0; p < P; p++)
      for (size_t q = 0; q < P; q++)
        for (size_t c = 0; c < C; c++) {
          double v = x[(c * H + y0 + p) * W + x0 + q];
          s += v;
          s2 += v * v;
        }
    pm = s / n;
    pv = sqrt((s2 - s * s / n) / (n - 1) + 1e-6); /* torch.var is unbiased */
  }
  for (size_t p = 0; p < P; p++)
    for (size_t q = 0; q < P; q++)
      for (size_t c = 0; c < C; c++)
        img[(c * H + y0 + p) * W + x0 + q] = (float)(pred[l * n + (p * P + q) * C + c] * pv + pm);
}

clf_status clf_model_mae_reconstruct(clf_model *m, const clf_array *pixel_values, const clf_array *logits,
                                     clf_array *out) {
  static const char op[] = "clf_model_mae_reconstruct";
  if (out) memset(out, 0, sizeof *out);
  if (!m) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: model is NULL", op);
  clf_context *ctx = m->ctx;
  if (!pixel_values || !logits || !out || !pixel_values->data || !logits->data)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: pixel_values, logits, their data or out is NULL", op);
  if (m->run != mae_run)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: the model is %s, not vit_mae", op, m->type);
  const mae *e = m->impl;
  clf_status st;
  if ((st = clf__vit_check_pixels(m, op, pixel_values, e->C, e->P)) != CLF_OK) return st;
  const size_t B = pixel_values->shape[0], H = pixel_values->shape[2], W = pixel_values->shape[3];
  const size_t gw = W / e->P, L = H / e->P * gw, F = e->P * e->P * e->C;
  if (logits->dtype != CLF_F32)
    return clf__fail(ctx, CLF_E_DTYPE, "%s: logits is %s, expected f32", op, clf_dtype_name(logits->dtype));
  if (logits->ndim != 3 || logits->shape[0] != B || logits->shape[1] != L || logits->shape[2] != F)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: logits is not [%zu, %zu, %zu] (batch, patches of the %zux%zu "
                     "pixel_values, patch_size^2 * num_channels)", op, B, L, F, H, W);
  float *img = malloc(B * e->C * H * W * sizeof *img + 1);
  if (!img) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
  const float *x = pixel_values->data, *pred = logits->data;
  for (size_t b = 0; b < B; b++)
    for (size_t l = 0; l < L; l++)
      mae_unpatch_one(e, x + b * e->C * H * W, pred + b * L * F, H, W, gw, l, img + b * e->C * H * W);
  snprintf(out->name, sizeof out->name, "reconstruction");
  out->dtype = CLF_F32;
  out->ndim = 4;
  memcpy(out->shape, pixel_values->shape, 4 * sizeof out->shape[0]);
  out->data = img;
  return CLF_OK;
}
