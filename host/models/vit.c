/* vit.c - ViTModel / ViTForImageClassification: Conv2d patch embedding,
 * CLS token, learned positions (bicubic-interpolated for other image sizes),
 * pre-LN encoder layers, final LN, pooler tanh(dense(h[:, 0])), classifier.
 */
#include "family.h"
#include "vit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct vit {
  size_t D, H, F, C, P, S, n_layers, N, n_labels; /* P: patch, S: image_size, N: patches */
  clf_tensor *patch_w, *patch_b; /* [D, C, P, P], [D] */
  clf_tensor *cls;               /* [1, 1, D] */
  clf_tensor *pos;               /* [N + 1, D] (view) */
  clf__layer *layers;
  clf__ln ln_f;
  clf__linear pooler, classifier; /* w NULL when absent */
  float *pos_host;                /* the table on the host, for interpolation */
  clf_tensor *pos_i;              /* interpolated table [1 + gh*gw, D] */
  size_t pos_gh, pos_gw;
} vit;

static const char *const vit_inputs[] = {"pixel_values"};
static const char *const vit_outputs[] = {"last_hidden_state", "pooler_output"};
static const char *const vit_cls_outputs[] = {"logits", "last_hidden_state"};

static void vit_destroy(clf_model *m) {
  vit *v = m->impl;
  if (v) {
    free(v->layers);
    free(v->pos_host);
    clf_tensor_destroy(v->pos_i);
  }
  free(v);
  m->impl = NULL;
}

clf_status clf__vit_check_pixels(clf_model *m, const char *op, const clf_array *a, size_t C, size_t P) {
  if (!a)
    return clf__fail(m->ctx, CLF_E_INVALID_ARG, "%s: %s needs input \"pixel_values\" (f32 [B, C, H, W])", op,
                     m->type);
  if (a->dtype != CLF_F32)
    return clf__fail(m->ctx, CLF_E_DTYPE, "%s: input \"pixel_values\" is %s, expected f32", op,
                     clf_dtype_name(a->dtype));
  if (a->ndim != 4)
    return clf__fail(m->ctx, CLF_E_SHAPE, "%s: input \"pixel_values\" has %d dims, expected 4 [B, C, H, W]", op,
                     a->ndim);
  if (a->shape[1] != C)
    return clf__fail(m->ctx, CLF_E_SHAPE, "%s: input \"pixel_values\" has %zu channels, the config's num_channels "
                     "is %zu", op, a->shape[1], C);
  if (a->shape[2] % P || a->shape[3] % P || !a->shape[2] || !a->shape[3])
    return clf__fail(m->ctx, CLF_E_SHAPE, "%s: input \"pixel_values\" image size %zux%zu is not a multiple of the "
                     "patch size %zu", op, a->shape[2], a->shape[3], P);
  return clf__check_image_budget(m, op, a);
}

/* PyTorch's cubic convolution weights (A = -0.75) for fraction t. */
static void cubic_w(double t, double w[4]) {
  const double A = -0.75;
  double x = t + 1;
  w[0] = ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  w[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
  x = 1 - t;
  w[2] = ((A + 2) * x - (A + 3)) * x * x + 1;
  x = 2 - t;
  w[3] = ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
}

/* 1-D source indices and weights of F.interpolate(bicubic, align_corners=False,
 * scale_factor=sf) for output index o over an input of n. */
static void cubic_taps(size_t o, size_t n, double sf, long idx[4], double w[4]) {
  const float scale = (float)(1.0 / sf);
  const float real = scale * ((float)o + 0.5f) - 0.5f;
  const float fl = floorf(real);
  cubic_w((double)(real - fl), w);
  for (int k = 0; k < 4; k++) {
    long i = (long)fl - 1 + k;
    idx[k] = i < 0 ? 0 : i >= (long)n ? (long)n - 1 : i;
  }
}

/* The position table for a gh x gw patch grid, as ViTEmbeddings.
 * interpolate_pos_encoding computes it (4.40): cached per grid. */
clf_status clf__vit_interp_pos(clf_context *ctx, const clf_tensor *pos, size_t N, size_t D, size_t gh, size_t gw,
                               float **host, clf_tensor **cache, size_t *c_gh, size_t *c_gw) {
  static const char op[] = "clf_model_run";
  clf_status st;
  if (*cache && *c_gh == gh && *c_gw == gw) return CLF_OK;
  const size_t n = (size_t)sqrt((double)N);
  if (n * n != N)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: cannot interpolate %zu position embeddings (not a square grid) "
                     "to a %zux%zu grid", op, N, gh, gw);
  if (!*host) {
    if (!(*host = malloc((N + 1) * D * sizeof **host)))
      return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
    if ((st = clf_tensor_download(ctx, pos, *host, (N + 1) * D * sizeof **host)) != CLF_OK) return st;
  }
  const double sh = ((double)gh + 0.1) / sqrt((double)N), sw = ((double)gw + 0.1) / sqrt((double)N);
  if ((size_t)floor((double)n * sh) != gh || (size_t)floor((double)n * sw) != gw)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: position interpolation to a %zux%zu grid is not exact", op, gh, gw);
  float *out = malloc((1 + gh * gw) * D * sizeof *out);
  if (!out) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
  const float *src = *host;
  memcpy(out, src, D * sizeof *out);
  for (size_t y = 0; y < gh; y++) {
    long iy[4], ix[4];
    double wy[4], wx[4];
    cubic_taps(y, n, sh, iy, wy);
    for (size_t x = 0; x < gw; x++) {
      cubic_taps(x, n, sw, ix, wx);
      for (size_t d = 0; d < D; d++) {
        double acc = 0;
        for (int a = 0; a < 4; a++) {
          double r = 0;
          for (int b = 0; b < 4; b++) r += wx[b] * src[(1 + (size_t)iy[a] * n + (size_t)ix[b]) * D + d];
          acc += wy[a] * r;
        }
        out[(1 + y * gw + x) * D + d] = (float)acc;
      }
    }
  }
  clf_tensor_destroy(*cache);
  *cache = NULL;
  if ((st = clf_tensor_create(ctx, CLF_F32, 2, (size_t[]){1 + gh * gw, D}, cache)) == CLF_OK)
    st = clf_tensor_upload(ctx, *cache, out, (1 + gh * gw) * D * sizeof *out);
  free(out);
  if (st != CLF_OK) {
    clf_tensor_destroy(*cache);
    *cache = NULL;
    return st;
  }
  *c_gh = gh, *c_gw = gw;
  return CLF_OK;
}

static clf_status vit_run(clf_model *m, const clf__inputs in, const int *want, clf_array *res) {
  clf_context *ctx = m->ctx;
  vit *v = m->impl;
  clf__ws *ws = &m->ws;
  clf_status st;
  if ((st = clf__vit_check_pixels(m, "clf_model_run", in[0], v->C, v->P)) != CLF_OK) return st;
  const size_t B = in[0]->shape[0], Hi = in[0]->shape[2], Wi = in[0]->shape[3];
  const size_t gh = Hi / v->P, gw = Wi / v->P, N = gh * gw, L = N + 1, D = v->D;
  const clf_tensor *pos = v->pos;
  /* As 4.40: the table as is when the patch count matches and the image is
   * square, else interpolated. */
  if (N != v->N || Hi != Wi) {
    if ((st = clf__vit_interp_pos(ctx, v->pos, v->N, D, gh, gw, &v->pos_host, &v->pos_i, &v->pos_gh, &v->pos_gw)) !=
        CLF_OK)
      return st;
    pos = v->pos_i;
  }
  clf_tensor *img, *pe, *h, *a;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_IMAGE, CLF_F32, 4, in[0]->shape, &img)) != CLF_OK) return st;
  if ((st = clf_tensor_upload(ctx, img, in[0]->data, clf_tensor_bytes(img))) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_PATCHES, CLF_F32, 3, (size_t[]){B, N, D}, &pe)) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_H, CLF_F32, 3, (size_t[]){B, L, D}, &h)) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_A, CLF_F32, 3, (size_t[]){B, L, D}, &a)) != CLF_OK) return st;
  if ((st = clf_patch_embed(ctx, img, v->patch_w, v->patch_b, pe, NULL)) != CLF_OK) return st;
  if ((st = clf_copy_rows(ctx, v->cls, 0, h, 0, B ? 1 : 0, NULL)) != CLF_OK) return st;
  if ((st = clf_copy_rows(ctx, pe, 0, h, 1, N, NULL)) != CLF_OK) return st;
  if ((st = clf_position_embedding(ctx, pos, 0, 1, h, NULL)) != CLF_OK) return st;
  if ((st = clf__vit_encoder(ctx, v->layers, v->n_layers, &v->ln_f, h, a, ws)) != CLF_OK) return st;
  /* a = layernorm(h): last_hidden_state */
  const int is_cls = v->classifier.w != NULL;
  if (is_cls ? want[1] : want[0])
    if ((st = clf__download(m, a, "last_hidden_state", &res[is_cls ? 1 : 0])) != CLF_OK) return st;
  const clf__linear *head = is_cls ? &v->classifier : &v->pooler;
  if (is_cls ? want[0] : want[1]) {
    const size_t O = is_cls ? v->n_labels : D;
    clf_tensor *first, *o;
    if ((st = clf__ws_get(ctx, ws, CLF__WS_ROW, CLF_F32, 3, (size_t[]){B, 1, D}, &first)) != CLF_OK) return st;
    if ((st = clf__ws_get(ctx, ws, CLF__WS_LOGITS, CLF_F32, 3, (size_t[]){B, 1, O}, &o)) != CLF_OK) return st;
    if ((st = clf_copy_rows(ctx, a, 0, first, 0, B ? 1 : 0, NULL)) != CLF_OK) return st;
    if ((st = clf_linear(ctx, first, head->w, CLF_WEIGHT_OUT_IN, head->b, is_cls ? CLF_ACT_NONE : CLF_ACT_TANH, o,
                         NULL)) != CLF_OK)
      return st;
    clf_array *r = &res[is_cls ? 0 : 1];
    if ((st = clf__download(m, o, is_cls ? "logits" : "pooler_output", r)) != CLF_OK) return st;
    r->ndim = 2; /* [B, O] */
    r->shape[1] = O;
    r->shape[2] = 0;
  }
  return CLF_OK;
}

clf_status clf__vit_encoder(clf_context *ctx, const clf__layer *layers, size_t n, const clf__ln *ln_f, clf_tensor *h,
                            clf_tensor *a, clf__ws *ws) {
  clf_status st;
  clf__layer_io io = {NULL, NULL, NULL, NULL, NULL};
  if ((st = clf__ln_apply(ctx, n ? &layers[0].ln_self : ln_f, h, NULL, NULL, NULL, a)) != CLF_OK) return st;
  for (size_t i = 0; i < n; i++) {
    const clf__ln *next = i + 1 < n ? &layers[i + 1].ln_self : ln_f;
    if ((st = clf__layer_forward(ctx, &layers[i], 1, next, h, a, &io, ws)) != CLF_OK) return st;
  }
  return CLF_OK;
}

/* the weights of encoder.layer.N. (ViT and ViTMAE's encoder and decoder) */
static const clf__weight_row vit_layer_rows[] = {
    CLF__QKV(clf__layer, self, "attention.attention.%s", QKV, "query", "key", "value"), /* 3 x [D, D] */
    CLF__LIN(clf__layer, self.o, "attention.output.dense", D, D, YES),    /* [D, D] */
    CLF__LIN(clf__layer, mlp.fc1, "intermediate.dense", F, D, YES),       /* [F, D] */
    CLF__LIN(clf__layer, mlp.fc2, "output.dense", D, F, YES),             /* [D, F] */
    CLF__LN(clf__layer, ln_self, "layernorm_before"),
    CLF__LN(clf__layer, ln_mlp, "layernorm_after"),
};

void clf__vit_gemms(size_t D, size_t F, size_t T, long n, clf__gemm_list *l) {
  const clf__block_spec spec = clf__spec_encoder(D, F, 0, 1, 1);
  clf__rows_gemms(vit_layer_rows, CLF__ARRAY_LEN(vit_layer_rows), &spec, T, n, l);
}

clf_status clf__vit_load_layers(clf_context *ctx, const clf__weights *w, clf__params *p, const char *prefix,
                                size_t n, size_t D, size_t H, size_t F, float eps, clf_activation act, int qkv_bias,
                                clf__layer *layers) {
  clf_status st;
  const size_t dh = D / H;
  const clf__block_spec spec = clf__spec_encoder(D, F, eps, qkv_bias, clf__linear_prefers_in_out(ctx));
  for (size_t i = 0; i < n; i++) {
    clf__layer *l = &layers[i];
    char lp[160];
    snprintf(lp, sizeof lp, "%s%zu.", prefix, i);
    l->self.heads = H, l->self.dh = dh, l->self.scale = 1.0f / sqrtf((float)dh);
    l->mlp.act = act;
    if ((st = clf__load_rows(ctx, w, p, lp, vit_layer_rows, CLF__ARRAY_LEN(vit_layer_rows), &spec, l)) != CLF_OK)
      return st;
  }
  return CLF_OK;
}

/* config.json keys */
typedef struct vit_dims {
  long D, H, N, F, C, P, S;
  double eps;
  int qkv_bias;
  const char *act;
} vit_dims;
static const clf__config_key vit_keys[] = {
    CLF__REQ(vit_dims, D, "hidden_size", INT),
    CLF__REQ(vit_dims, H, "num_attention_heads", INT),
    CLF__REQ(vit_dims, N, "num_hidden_layers", INT),
    CLF__REQ(vit_dims, F, "intermediate_size", INT),
    CLF__OPT(vit_dims, C, "num_channels", INT, 3),
    CLF__OPT(vit_dims, P, "patch_size", INT, 16),
    CLF__OPT(vit_dims, S, "image_size", INT, 224),
    CLF__OPT(vit_dims, eps, "layer_norm_eps", FLOAT, 1e-12),
    CLF__OPT(vit_dims, qkv_bias, "qkv_bias", BOOL, 1),
    CLF__OPT_STR(vit_dims, act, "hidden_act", "gelu"),
};

static void vit_gemms(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l) {
  const vit_dims *d = dims;
  (void)c;
  clf__vit_gemms((size_t)d->D, (size_t)d->F, T, d->N, l);
}

static clf_status vit_load(clf_model *m, const void *dims, const clf__config *c, const clf__weights *w) {
  const vit_dims *dm = dims;
  clf_context *ctx = m->ctx;
  clf_status st;
  const long D = dm->D, H = dm->H, F = dm->F, N = dm->N, C = dm->C, P = dm->P, S = dm->S;
  const double eps = dm->eps;
  const int qkv_bias = dm->qkv_bias;
  const char *act_name = dm->act;
  clf_activation act;
  (void)c;
  if (D <= 0 || H <= 0 || D % H || N < 0 || F <= 0 || C <= 0 || P <= 0 || S <= 0 || S % P)
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: vit config has invalid sizes (hidden_size %ld, "
                     "num_attention_heads %ld, intermediate_size %ld, patch_size %ld, image_size %ld)", D, H, F, P, S);
  if (clf_activation_from_name(act_name, &act) != CLF_OK)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_model_load: vit hidden_act \"%s\" is not supported", act_name);
  vit *v = calloc(1, sizeof *v);
  if (!v || !(v->layers = calloc((size_t)N + 1, sizeof *v->layers))) {
    free(v);
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "clf_model_load: out of host memory");
  }
  m->impl = v;
  m->destroy = vit_destroy;
  m->run = vit_run;
  m->in_names = vit_inputs;
  m->n_in = 1;
  v->D = D, v->H = H, v->F = F, v->C = C, v->P = P, v->S = S, v->n_layers = N;
  v->N = (size_t)(S / P) * (size_t)(S / P);
  const size_t d = D;
  const int is_cls = clf__weights_has(w, "classifier.weight");
  const char *pf = clf__weights_has(w, "vit.embeddings.cls_token") ? "vit." : "";
  char n1[256], n2[256];
  clf__params *p = &m->params;
  clf_tensor *pos3;
  if ((st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.cls_token"), 3, (size_t[]){1, 1, d},
                       &v->cls)) != CLF_OK ||
      (st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.position_embeddings"), 3,
                       (size_t[]){1, v->N + 1, d}, &pos3)) != CLF_OK ||
      (st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.patch_embeddings.projection.weight"), 4,
                       (size_t[]){d, C, P, P}, &v->patch_w)) != CLF_OK ||
      (st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.patch_embeddings.projection.bias"), 1,
                       &d, &v->patch_b)) != CLF_OK ||
      (st = clf__load_ln(ctx, w, p, clf__wn(n1, sizeof n1, pf, "layernorm"), d, (float)eps, &v->ln_f)) != CLF_OK)
    return st;
  if ((st = clf_tensor_view(pos3, 0, 2, (size_t[]){v->N + 1, d}, &v->pos)) != CLF_OK ||
      (st = clf__params_add(ctx, p, v->pos)) != CLF_OK)
    return st;
  if ((st = clf__vit_load_layers(ctx, w, p, clf__wn(n1, sizeof n1, pf, "encoder.layer."), N, d, H, F, (float)eps,
                                 act, qkv_bias, v->layers)) != CLF_OK)
    return st;
  if (is_cls) {
    int nd;
    size_t sh[8];
    if ((st = clf__weights_shape(ctx, w, "classifier.weight", &nd, sh)) != CLF_OK) return st;
    v->n_labels = sh[0];
    if ((st = clf__load_linear(ctx, w, p, "classifier.weight", "classifier.bias", v->n_labels, d, CLF_WEIGHT_OUT_IN, 0,
                               &v->classifier)) != CLF_OK)
      return st;
    m->out_names = vit_cls_outputs;
    m->n_out = 2;
  } else {
    m->out_names = vit_outputs;
    m->n_out = 1;
    /* The pooler is optional (ViTModel(add_pooling_layer=False)). */
    if (clf__weights_has(w, clf__wn(n1, sizeof n1, pf, "pooler.dense.weight"))) {
      if ((st = clf__load_linear(ctx, w, p, n1, clf__wn(n2, sizeof n2, pf, "pooler.dense.bias"), d, d,
                                 CLF_WEIGHT_OUT_IN, 0, &v->pooler)) != CLF_OK) /* [D, D] */
        return st;
      m->n_out = 2;
    }
  }
  return CLF_OK;
}

/* ViTModel: last_hidden_state, pooler_output (with a pooler);
 * ViTForImageClassification: logits, last_hidden_state. */
const clf__family clf__vit_family = {"vit", {"ViTModel", "ViTForImageClassification", NULL}, vit_keys,
                                     CLF__ARRAY_LEN(vit_keys), sizeof(vit_dims), vit_load, vit_gemms};
