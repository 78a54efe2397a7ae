/* llama.c - LlamaModel / LlamaForCausalLM, MistralModel /
 * MistralForCausalLM, Qwen2Model / Qwen2ForCausalLM: embed_tokens, N
 * pre-norm blocks (RMSNorm fused with the residual add; q, k, v in one GEMM;
 * RoPE applied while splitting heads; grouped-query attention with causal,
 * padding and sliding-window masks; SwiGLU MLP with gate and up in one GEMM),
 * the final norm and the (tied or own) LM head; a KV cache of the KV heads
 * for generation.  As transformers 4.46.
 */
#include "decoder.h"
#include "family.h"
#include "llama.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct llama {
  clf__decoder dec; /* the runtime's: caches of the KV heads [B, Hkv, cap, Dh] */
  size_t V, D, H, Hkv, Dh, F, P, n_layers, window;
  size_t rot; /* the rotated part of a head: Dh, or less (partial_rotary_factor) */
  size_t limit; /* the longest sequence: max_position_embeddings (dynamic: x factor) */
  float eps;
  clf_activation act;
  clf__rope rope;
  int base; /* *Model: no LM head, last_hidden_state only */
  clf_tensor *embed;
  clf__ln norm;
  clf__layer *layers;
  /* RoPE: inv_freq [rot/2] on the device for the sequence length rope_dev
   * (0: the initial frequencies); rope_cached is transformers' dynamic state
   * (max_seq_len_cached, 0: the original), advanced per generation step */
  clf_tensor *inv_freq;
  size_t rope_dev, rope_cached;
  float embed_scale;        /* the embeddings' factor: 1, or sqrt(hidden_size) (Gemma) */
  float attn_softcap;       /* attn_logit_softcapping (Gemma 2): scores capped at it; 0: none */
  clf_tensor *local_freq;   /* the sliding-window layers' own inv_freq [rot / 2] (Gemma 3), or NULL */
} llama;

static const char *const llama_outputs[] = {"logits", "last_hidden_state"};

/* ---- RoPE: transformers 4.46's ROPE_INIT_FUNCTIONS in float32 ---------- */

void clf__rope_inv_freq(const clf__rope *r, size_t seq_len, float *out) {
  const size_t half = r->dim / 2;
  float base = (float)r->theta;
  if (r->type == CLF__ROPE_LONGROPE) { /* 1.0 / (ext_factors * base ** (arange(0, dim, 2).float() / dim)) */
    const float *ext = seq_len > r->orig_max ? r->long_factors : r->short_factors;
    for (size_t i = 0; i < half; i++) out[i] = 1.0f / (ext[i] * powf(base, (float)(2 * i) / (float)r->dim));
    return;
  }
  if (r->type == CLF__ROPE_DYNAMIC && seq_len > r->max_pos) {
    /* base * ((factor * seq_len / max_pos) - (factor - 1)) ** (dim / (dim - 2)), seq_len a tensor */
    const float f = (float)r->factor * (float)seq_len / (float)r->max_pos - (float)(r->factor - 1.0);
    base = (float)r->theta * powf(f, (float)((double)r->dim / (double)(r->dim - 2)));
  }
  for (size_t i = 0; i < half; i++) {
    /* 1.0 / (base ** (arange(0, dim, 2).float() / dim)) */
    const float e = (float)(2 * i) / (float)r->dim;
    out[i] = 1.0f / powf(base, e);
  }
  if (r->type == CLF__ROPE_LINEAR)
    for (size_t i = 0; i < half; i++) out[i] /= (float)r->factor;
  if (r->has_factors)
    for (size_t i = 0; i < half; i++) out[i] /= r->factors[i];
  if (r->type != CLF__ROPE_LLAMA3) return;
  const float factor = (float)r->factor, low = (float)r->low, high = (float)r->high, old = (float)r->orig_max;
  const float low_wl = (float)((double)r->orig_max / r->low), high_wl = (float)((double)r->orig_max / r->high);
  const float two_pi = (float)6.283185307179586; /* 2 * math.pi */
  for (size_t i = 0; i < half; i++) {
    const float inv = out[i];
    const float wl = (1.0f / inv) * two_pi; /* 2 pi / inv_freq: reciprocal, then the product */
    const float inv_l = wl > low_wl ? inv / factor : inv;
    const float smooth = ((1.0f / wl) * old - low) / (high - low);
    const float smoothed = (1.0f - smooth) * inv_l / factor + smooth * inv_l;
    out[i] = !(wl < high_wl) && !(wl > low_wl) ? smoothed : inv_l;
  }
}

/* Puts the frequencies for sequence length `len` (0: initial) on the device
 * when they are not there already: one small upload, only when it changes. */
static clf_status rope_sync(clf_context *ctx, llama *g, size_t len) {
  if (len == g->rope_dev) return CLF_OK;
  float f[512];
  clf__rope_inv_freq(&g->rope, len, f);
  clf_status st = clf_tensor_upload(ctx, g->inv_freq, f, g->rot / 2 * sizeof *f);
  if (st == CLF_OK) g->rope_dev = len;
  return st;
}

/* transformers' _dynamic_frequency_update for positions whose largest is
 * max_pos: grow past the cached length, back to the original below it. */
static clf_status rope_update(clf_context *ctx, llama *g, int64_t max_pos) {
  /* longrope: the long factors while the positions reach past orig_max */
  if (g->rope.type == CLF__ROPE_LONGROPE)
    return rope_sync(ctx, g, max_pos + 1 > (int64_t)g->rope.orig_max ? g->rope.orig_max + 1 : 0);
  if (g->rope.type != CLF__ROPE_DYNAMIC) return CLF_OK;
  const size_t S = (size_t)(max_pos < 0 ? 0 : max_pos) + 1, orig = g->rope.max_pos;
  const size_t cached = g->rope_cached ? g->rope_cached : orig;
  if (S > cached) g->rope_cached = S;
  if (S < orig && g->rope_cached > orig) g->rope_cached = 0;
  return rope_sync(ctx, g, g->rope_cached);
}

/* ---- forward ----------------------------------------------------------- */

/* the weights of layers.N.: q, k, v fused (GQA: k, v Hkv Dh wide), gate
 * and up fused; biases as config.json says (Qwen2: q, k, v always) */
static const clf__weight_row llama_layer_rows[] = {CLF__LLAMA_ROWS};

/* embed -> N pre-norm layers (rotary q, k; GQA; sliding window) -> norm;
 * the RoPE frequencies follow the positions first (dynamic scaling). */
static clf_status llama_body(clf_model *m, const clf__step *s, clf_tensor **out) {
  llama *g = m->impl;
  clf_tensor *h, *a;
  clf_status st;
  if (!s->cached) g->rope_cached = 0; /* a forward pass starts from the original frequencies */
  if ((st = rope_update(m->ctx, g, s->max_pos)) != CLF_OK || (st = clf__decoder_stream(m, s, &h, &a)) != CLF_OK ||
      (st = clf_embedding(m->ctx, g->embed, s->ids, g->embed_scale, 0, h, NULL)) != CLF_OK)
    return st;
  const clf_attention_mask mask = {s->mask, 1, NULL, g->window, g->attn_softcap};
  const clf__rotary rot = {s->pos, g->inv_freq, g->local_freq, g->rope.attn_scale};
  *out = a;
  return clf__decoder_stack(m, g->layers, g->n_layers, &g->norm, s, &mask, &rot, h, a);
}

static clf_status llama_run(clf_model *m, const clf__inputs in, const int *want, clf_array *res) {
  llama *g = m->impl;
  clf_tensor *a;
  clf_status st;
  size_t B = 0, L = 0;
  int64_t max_pos = 0;
  if ((st = clf__decoder_check(m, in, &B, &L, &max_pos)) != CLF_OK ||
      (st = clf__decoder_forward(m, in, B, L, max_pos, &a)) != CLF_OK)
    return st;
  /* the base model's only output is last_hidden_state */
  const int want_logits = !g->base && want[0], want_hidden = g->base ? want[0] : want[1];
  if (want_hidden && (st = clf__download(m, a, "last_hidden_state", &res[g->base ? 0 : 1])) != CLF_OK) return st;
  return want_logits ? clf__decoder_logits(m, a, &res[0]) : CLF_OK;
}

/* A new generation starts from the original frequencies. */
static clf_status llama_prepare(clf_model *m, size_t B, size_t cap, const clf_array *enc_ids,
                                const clf_array *enc_mask) {
  llama *g = m->impl;
  (void)B, (void)cap, (void)enc_ids, (void)enc_mask;
  g->rope_cached = 0;
  return CLF_OK;
}

/* ---- config.json ------------------------------------------------------- */

/* Llama: head_dim, attention_bias (q, k, v and o), mlp_bias */
static const clf__config_key llama_keys[] = {
    CLF__LLAMA_KEYS(2048, 0),
    CLF__OPT(clf__llama_dims, Dh, "head_dim", INT, 0), /* 0: hidden_size / num_attention_heads */
    CLF__OPT(clf__llama_dims, attn_bias, "attention_bias", BOOL, 0),
    CLF__OPT(clf__llama_dims, mlp_bias, "mlp_bias", BOOL, 0),
};
/* Mistral: head_dim, sliding_window (read in mistral_window) */
static const clf__config_key mistral_keys[] = {
    CLF__LLAMA_KEYS(4096 * 32, 8),
    CLF__OPT(clf__llama_dims, Dh, "head_dim", INT, 0),
};
/* Qwen2: q, k, v biases always; the window only with use_sliding_window */
static const clf__config_key qwen2_keys[] = {
    CLF__LLAMA_KEYS(32768, 32),
    CLF__OPT(clf__llama_dims, use_window, "use_sliding_window", BOOL, 0),
};

/* config.json's sliding_window: absent 4096 (the config classes' default),
 * null none; Qwen2 only with use_sliding_window (4.46: its config then
 * holds None, and eager attention masks every layer by it). */
static clf_status read_window(clf_context *ctx, const char *type, const clf__llama_dims *d, const clf__config *c,
                              const clf__llama_kind *k, size_t *out) {
  *out = 0;
  if (k->window == CLF__LLAMA_NO_WINDOW || (k->window == CLF__LLAMA_WINDOW_IF_USED && !d->use_window)) return CLF_OK;
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(clf__config_json(c), "sliding_window");
  if (!w && k->window == CLF__LLAMA_WINDOW_IF_SET) return CLF_OK;
  if (!w) {
    *out = 4096;
    return CLF_OK;
  }
  if (cJSON_IsNull(w)) return CLF_OK;
  if (!cJSON_IsNumber(w) || w->valuedouble < 1 || w->valuedouble > 1e15 || w->valuedouble != floor(w->valuedouble))
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: %s config's sliding_window is not a positive integer", type);
  *out = (size_t)w->valuedouble;
  return CLF_OK;
}

/* A number of rope_scaling, required. */
static clf_status rope_num(clf_context *ctx, const cJSON *rs, const char *type, const char *key, double lo,
                           double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(rs, key);
  if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo) || !isfinite(v->valuedouble))
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: rope_scaling of type \"%s\" needs \"%s\", a number of at "
                     "least %g", type, key, lo);
  *out = v->valuedouble;
  return CLF_OK;
}

/* rope_scaling's list `key` of n factors, finite and positive, into f. */
static clf_status rope_factors(clf_context *ctx, const cJSON *rs, const char *key, size_t n, float *f) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(rs, key), *e;
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != (int)n)
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: rope_scaling longrope needs \"%s\", a list of the rotary "
                     "head_dim / 2 (%zu) numbers", key, n);
  size_t i = 0;
  cJSON_ArrayForEach(e, a) {
    if (!cJSON_IsNumber(e) || !(e->valuedouble > 0) || !isfinite(e->valuedouble))
      return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: rope_scaling %s[%zu] is not a finite positive number", key, i);
    f[i++] = (float)e->valuedouble;
  }
  return CLF_OK;
}

/* Phi-3's longrope ("su" before it had that name): short and long factors,
 * the switch at original_max_position_embeddings, and the attention
 * factor (given, else sqrt(1 + ln(max / original) / ln(original)) when the
 * model reaches past its original length), as transformers 4.53. */
static clf_status read_longrope(clf_context *ctx, const cJSON *rs, const clf__llama_dims *d, size_t half,
                                clf__rope *r) {
  clf_status st;
  if (d->orig_max <= 0)
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: rope_scaling longrope needs original_max_position_embeddings");
  if (half > 512) return CLF_OK; /* llama_sizes refuses the head size */
  if ((st = rope_factors(ctx, rs, "short_factor", half, r->short_factors)) != CLF_OK ||
      (st = rope_factors(ctx, rs, "long_factor", half, r->long_factors)) != CLF_OK)
    return st;
  r->type = CLF__ROPE_LONGROPE, r->orig_max = (size_t)d->orig_max;
  const cJSON *af = cJSON_GetObjectItemCaseSensitive(rs, "attention_factor");
  const double factor = (double)d->P / (double)d->orig_max;
  if (cJSON_IsNumber(af) && af->valuedouble > 0) r->attn_scale = (float)af->valuedouble;
  else r->attn_scale = factor <= 1.0 ? 1.0f : (float)sqrt(1.0 + log(factor) / log((double)d->orig_max));
  return CLF_OK;
}

/* rope_scaling: null, or {"rope_type" (or "type"): linear | dynamic | llama3 | longrope, factor, ...}.
 * Mistral's rotary embedding (4.46) ignores it. */
static clf_status read_rope(clf_context *ctx, const char *model_type, const clf__llama_dims *d, const clf__config *c,
                            size_t half, clf__rope *r) {
  const cJSON *rs = cJSON_GetObjectItemCaseSensitive(clf__config_json(c), "rope_scaling");
  r->type = CLF__ROPE_DEFAULT;
  if (!rs || cJSON_IsNull(rs) || strcmp(model_type, "mistral") == 0) return CLF_OK;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
  if (!t) t = cJSON_GetObjectItemCaseSensitive(rs, "type");
  if (!cJSON_IsObject(rs) || !cJSON_IsString(t))
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: rope_scaling is not an object with a \"rope_type\"");
  const char *type = t->valuestring;
  clf_status st;
  if (strcmp(type, "default") == 0) return CLF_OK;
  if (strcmp(type, "longrope") == 0 || strcmp(type, "su") == 0) return read_longrope(ctx, rs, d, half, r);
  if (strcmp(type, "linear") == 0) r->type = CLF__ROPE_LINEAR;
  else if (strcmp(type, "dynamic") == 0) r->type = CLF__ROPE_DYNAMIC;
  else if (strcmp(type, "llama3") == 0) r->type = CLF__ROPE_LLAMA3;
  else
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_model_load: rope_scaling type \"%s\" is not supported (supported: "
                     "default, linear, dynamic, llama3, longrope)", type);
  if ((st = rope_num(ctx, rs, type, "factor", 1.0, &r->factor)) != CLF_OK) return st;
  if (r->type != CLF__ROPE_LLAMA3) return CLF_OK;
  double om = 0;
  if ((st = rope_num(ctx, rs, type, "low_freq_factor", 1e-9, &r->low)) != CLF_OK ||
      (st = rope_num(ctx, rs, type, "high_freq_factor", 1e-9, &r->high)) != CLF_OK ||
      (st = rope_num(ctx, rs, type, "original_max_position_embeddings", 1.0, &om)) != CLF_OK)
    return st;
  if (r->high <= r->low)
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: rope_scaling llama3 needs high_freq_factor (%g) above "
                     "low_freq_factor (%g)", r->high, r->low);
  if (om > 2147483648.0) /* a position count; larger is no model and no size_t on 32 bits */
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: rope_scaling llama3's original_max_position_embeddings %g "
                     "is above 2^31", om);
  r->orig_max = (size_t)om;
  return CLF_OK;
}

/* Sizes checked and the model's shape filled in. */
static clf_status llama_sizes(clf_context *ctx, const char *type, const clf__llama_dims *d, llama *g) {
  if (d->V <= 0 || d->D <= 0 || d->H <= 0 || d->N < 0 || d->P <= 0 || d->F <= 0 || d->Hkv < 0 || d->Dh < 0 ||
      d->V > (1L << 31) || d->D > (1L << 20) || d->F > (1L << 24) || d->H > 4096 || d->N > 4096 || d->Dh > 4096)
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: %s config has invalid sizes (vocab_size %ld, hidden_size "
                     "%ld, intermediate_size %ld, num_attention_heads %ld, num_hidden_layers %ld)", type, d->V, d->D,
                     d->F, d->H, d->N);
  if (d->Dh == 0 && d->D % d->H)
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: %s hidden_size %ld is not a multiple of "
                     "num_attention_heads %ld", type, d->D, d->H);
  const long hkv = d->Hkv ? d->Hkv : d->H, dh = d->Dh ? d->Dh : d->D / d->H;
  if (d->H % hkv)
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: %s num_attention_heads %ld is not a multiple of "
                     "num_key_value_heads %ld", type, d->H, hkv);
  if (dh % 2 || dh > 1024)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_model_load: %s head_dim %ld: rotary embeddings need an even "
                     "head_dim of at most 1024", type, dh);
  /* transformers' int(head_dim * partial_rotary_factor), but for a product
   * a hair below a whole number (a GGUF file's rope.dimension_count / head
   * size, rounded down in binary, times the head size) */
  const double frac = d->rotary_frac != 0 ? d->rotary_frac : 1.0;
  const long rot = frac <= 1.0 ? (long)floor((double)dh * frac + 1e-6) : -1;
  if (!isfinite(frac) || rot < 2 || rot % 2)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_model_load: %s partial_rotary_factor %g of head_dim %ld rotates %ld "
                     "dimensions: it must rotate an even number, at least 2, of at most head_dim", type, frac, dh, rot);
  g->V = d->V, g->D = d->D, g->F = d->F, g->H = d->H, g->Hkv = hkv, g->Dh = dh, g->P = d->P, g->rot = (size_t)rot;
  g->n_layers = d->N;
  g->eps = (float)d->eps;
  return CLF_OK;
}

/* ---- weights ----------------------------------------------------------- */

/* The layers' rows are read with: nn.Linear [out, in], kept so on a CPU,
 * stored [in, out] on a GPU (clf__decoder_in_out). */
static clf__block_spec llama_spec(const llama *g, int qkv_bias, int attn_bias, int mlp_bias, int in_out) {
  clf__block_spec s = {.eps = g->eps, .qkv_bias = qkv_bias, .attn_bias = attn_bias, .mlp_bias = mlp_bias,
                       .layout = CLF_WEIGHT_OUT_IN, .in_out_f32 = in_out};
  clf__spec_dims(&s, g->D, g->F, g->H * g->Dh, g->Hkv * g->Dh);
  s.dims[CLF__DIM_DH] = g->Dh; /* the per-head norms' */
  return s;
}

/* Gemma's RMSNorm gain 1 + weight (transformers adds in f32 too), made
 * once at load. */
static clf_status norm_plus_one(clf_context *ctx, clf__ln *ln) {
  const size_t n = clf_tensor_numel(ln->g);
  float *h = malloc(n * sizeof *h + 1);
  if (!h) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "clf_model_load: out of host memory for a norm of %zu", n);
  clf_status st = clf_tensor_download(ctx, ln->g, h, n * sizeof *h);
  for (size_t i = 0; st == CLF_OK && i < n; i++) h[i] = 1.0f + h[i];
  if (st == CLF_OK) st = clf_tensor_upload(ctx, ln->g, h, n * sizeof *h);
  free(h);
  return st;
}

/* embed_tokens, the layers, norm under pf ("model." or ""), and the head:
 * lm_head.weight, or embed_tokens when tied. */
static clf_status llama_load_weights(clf_model *m, const clf__llama_dims *d, const char *pf, const clf__weights *w,
                                     const clf__llama_kind *k) {
  clf_context *ctx = m->ctx;
  llama *g = m->impl;
  clf__params *p = &m->params;
  const int attn_bias = d->attn_bias, qkv_bias = k->qkv_bias || attn_bias;
  clf__block_spec spec = llama_spec(g, qkv_bias, attn_bias, d->mlp_bias, clf__decoder_in_out(ctx));
  char n1[256];
  clf_status st;
  if ((st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embed_tokens.weight"), 2, (size_t[]){g->V, g->D},
                       &g->embed)) != CLF_OK ||
      (st = clf__load_rms(ctx, w, p, clf__wn(n1, sizeof n1, pf, "norm"), g->D, g->eps, &g->norm)) != CLF_OK)
    return st;
  for (size_t i = 0; i < g->n_layers; i++) {
    clf__layer *l = &g->layers[i];
    const float scale = d->attn_scalar > 0 ? (float)pow(d->attn_scalar, -0.5) : 1.0f / sqrtf((float)g->Dh);
    l->self = (clf__attn){.heads = g->H, .kv_heads = g->Hkv, .dh = g->Dh, .scale = scale};
    l->mlp.act = g->act, l->mlp.gated = 1;
    if ((st = clf__load_rows(ctx, w, p, clf__wn(n1, sizeof n1, pf, "layers.%zu.", i), k->rows, k->n_rows, &spec,
                             l)) != CLF_OK)
      return st;
    clf__ln *const norms[] = {&l->ln_self, &l->ln_mlp, &l->post_self, &l->post_mlp, &l->self.q_norm, &l->self.k_norm};
    for (size_t j = 0; k->norm_plus_one && j < CLF__ARRAY_LEN(norms); j++)
      if (norms[j]->g && (st = norm_plus_one(ctx, norms[j])) != CLF_OK) return st;
  }
  if (k->norm_plus_one && (st = norm_plus_one(ctx, &g->norm)) != CLF_OK) return st;
  if (g->base) return CLF_OK;
  return clf__decoder_load_head(m, w, "lm_head.weight", d->tie, clf__wn(n1, sizeof n1, pf, "embed_tokens.weight"),
                                g->embed);
}

/* A factor tensor `name` of n finite positive f32 values into f. */
static clf_status read_factor_tensor(clf_context *ctx, const clf__weights *w, const char *name, size_t n, float *f) {
  float *v = NULL;
  size_t got[8];
  clf_status st = clf__weights_read(ctx, w, name, 1, (size_t[]){n}, &v, got);
  if (st != CLF_OK) return st;
  for (size_t i = 0; i < n && st == CLF_OK; i++)
    if (!(v[i] > 0.0f) || !isfinite(v[i]))
      st = clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: %s[%zu] is %g: frequency factors must be finite and "
                     "positive", name, i, (double)v[i]);
  if (st == CLF_OK) memcpy(f, v, n * sizeof *f);
  free(v);
  return st;
}

/* rope_freqs.weight (a GGUF file's frequency factors, "model." or not):
 * f32 [rot / 2] of finite positive factors into r; none is fine.  Not with a
 * rope_scaling that rescales the frequencies by the length (dynamic) or
 * computes such factors itself (llama3): the file's would apply twice. */
static clf_status read_rope_factors(clf_context *ctx, const clf__weights *w, const char *type, size_t half,
                                    clf__rope *r) {
  const char *const names[] = {"model.rope_freqs.weight", "rope_freqs.weight", NULL};
  const char *name = clf__weights_pick(w, names);
  if (!name) return CLF_OK;
  if (r->type == CLF__ROPE_DYNAMIC || r->type == CLF__ROPE_LLAMA3 || r->type == CLF__ROPE_LONGROPE)
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: %s has both frequency factors (%s) and rope_scaling of type "
                     "\"%s\": they would scale the frequencies twice", type, name,
                     r->type == CLF__ROPE_DYNAMIC ? "dynamic" : r->type == CLF__ROPE_LLAMA3 ? "llama3" : "longrope");
  clf_status st = read_factor_tensor(ctx, w, name, half, r->factors);
  if (st == CLF_OK) r->has_factors = 1;
  return st;
}

/* A GGUF file's longrope (llama.cpp's conversion of Phi-3's rope_scaling
 * longrope / su): the tensors rope_factors_long and _short.weight, f32
 * [half] each, with the switch at original_max_position_embeddings
 * (rope.scaling.original_context_length) and the attention factor
 * rope.scaling.attn_factor (kept as rope_attn_factor; absent: transformers'
 * sqrt(1 + ln(max / original) / ln(original)), which the converter writes).
 * Neither tensor is fine; one without the other, or beside a config's own
 * rope_scaling, is refused. */
static clf_status read_longrope_tensors(clf_context *ctx, const clf__weights *w, const clf__llama_dims *d,
                                        const char *type, size_t half, clf__rope *r) {
  const char *const longs[] = {"model.rope_factors_long.weight", "rope_factors_long.weight", NULL};
  const char *const shorts[] = {"model.rope_factors_short.weight", "rope_factors_short.weight", NULL};
  const char *ln = clf__weights_pick(w, longs), *sn = clf__weights_pick(w, shorts);
  if (!ln && !sn) return CLF_OK;
  if (!ln || !sn)
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: %s has %s but not %s: longrope needs both factor lists",
                     type, ln ? ln : sn, ln ? "rope_factors_short.weight" : "rope_factors_long.weight");
  if (r->type != CLF__ROPE_DEFAULT)
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: %s has both longrope factor tensors (%s) and its own "
                     "rope_scaling: they would scale the frequencies twice", type, ln);
  if (d->orig_max <= 0)
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: %s longrope factors (%s) need "
                     "original_max_position_embeddings", type, ln);
  clf_status st;
  if ((st = read_factor_tensor(ctx, w, ln, half, r->long_factors)) != CLF_OK ||
      (st = read_factor_tensor(ctx, w, sn, half, r->short_factors)) != CLF_OK)
    return st;
  r->type = CLF__ROPE_LONGROPE, r->orig_max = (size_t)d->orig_max;
  const double factor = (double)d->P / (double)d->orig_max;
  if (d->rope_attn_factor > 0) r->attn_scale = (float)d->rope_attn_factor;
  else r->attn_scale = factor <= 1.0 ? 1.0f : (float)sqrt(1.0 + log(factor) / log((double)d->orig_max));
  return CLF_OK;
}

/* The RoPE settings, the frequencies' device tensor and the sequence limit. */
static clf_status llama_rope_init(clf_model *m, const clf__llama_dims *d, const clf__config *c, const clf__weights *w) {
  clf_context *ctx = m->ctx;
  llama *g = m->impl;
  clf_status st;
  if ((st = read_rope(ctx, m->type, d, c, g->rot / 2, &g->rope)) != CLF_OK ||
      (st = read_rope_factors(ctx, w, m->type, g->rot / 2, &g->rope)) != CLF_OK ||
      (st = read_longrope_tensors(ctx, w, d, m->type, g->rot / 2, &g->rope)) != CLF_OK)
    return st;
  g->rope.dim = g->rot, g->rope.theta = d->theta, g->rope.max_pos = g->P;
  if (!(d->theta > 0) || !isfinite(d->theta))
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: %s rope_theta %g is not positive", m->type, d->theta);
  g->limit = g->P;
  if (g->rope.type == CLF__ROPE_DYNAMIC) { /* scaled for factor x the original length */
    const double lim = (double)g->P * g->rope.factor;
    g->limit = lim > (double)(1L << 40) ? (size_t)1 << 40 : (size_t)lim;
  }
  if ((st = clf_tensor_create(ctx, CLF_F32, 1, (size_t[]){g->rot / 2}, &g->inv_freq)) != CLF_OK ||
      (st = clf__params_add(ctx, &m->params, g->inv_freq)) != CLF_OK)
    return st;
  g->rope_dev = (size_t)-1;
  return rope_sync(ctx, g, 0);
}

/* Which layers see a window of `window` positions: config.json's
 * layer_types, else `sliding(d, i)` (the family's default). */
static clf_status layer_types(clf_model *m, const clf__llama_dims *d, const clf__config *c, size_t window,
                              int (*sliding_default)(const clf__llama_dims *, size_t)) {
  clf_context *ctx = m->ctx;
  llama *g = m->impl;
  const cJSON *types = cJSON_GetObjectItemCaseSensitive(clf__config_json(c), "layer_types");
  if (cJSON_IsNull(types)) types = NULL;
  if (types && (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != (int)g->n_layers))
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: %s layer_types is not a list of num_hidden_layers (%zu) "
                     "attention types", m->type, g->n_layers);
  for (size_t i = 0; i < g->n_layers; i++) {
    int sliding = types ? 0 : sliding_default(d, i);
    if (types) {
      const cJSON *t = cJSON_GetArrayItem(types, (int)i);
      if (!cJSON_IsString(t) || (strcmp(t->valuestring, "sliding_attention") && strcmp(t->valuestring, "full_attention")))
        return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_model_load: %s layer_types[%zu] is %s%s%s, not "
                         "\"sliding_attention\" or \"full_attention\"", m->type, i, cJSON_IsString(t) ? "\"" : "",
                         cJSON_IsString(t) ? t->valuestring : "not a string", cJSON_IsString(t) ? "\"" : "");
      sliding = strcmp(t->valuestring, "sliding_attention") == 0;
    }
    g->layers[i].window = sliding ? window : 0;
  }
  return CLF_OK;
}

/* Gemma: all but every sliding_window_pattern-th layer. */
static int gemma_sliding(const clf__llama_dims *d, size_t i) { return (long)((i + 1) % (size_t)d->window_pattern) != 0; }

/* Qwen3: the layers from max_window_layers on. */
static int qwen3_sliding(const clf__llama_dims *d, size_t i) { return (long)i >= d->max_window_layers; }

/* Gemma's layers: which see a sliding window (layer_types or
 * sliding_window_pattern), its size, and (Gemma 3, local_rope) their own
 * RoPE frequencies (rope_local_base_freq, no scaling); Gemma 2's windowed
 * layers rotate as the others. */
static clf_status layer_windows(clf_model *m, const clf__llama_dims *d, const clf__config *c, int local_rope) {
  clf_context *ctx = m->ctx;
  llama *g = m->impl;
  if (d->window <= 0 || d->window > (1L << 30))
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: %s sliding_window %ld is not a positive size", m->type,
                     d->window);
  if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(clf__config_json(c), "layer_types")) && d->window_pattern <= 0)
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: %s sliding_window_pattern %ld is not positive", m->type,
                     d->window_pattern);
  clf_status st = layer_types(m, d, c, (size_t)d->window, gemma_sliding);
  if (st != CLF_OK) return st;
  if (!local_rope) return CLF_OK;
  if (!(d->local_theta > 0) || !isfinite(d->local_theta))
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: %s rope_local_base_freq %g is not positive", m->type,
                     d->local_theta);
  const clf__rope r = {.type = CLF__ROPE_DEFAULT, .dim = g->rot, .theta = d->local_theta};
  float f[512];
  clf__rope_inv_freq(&r, 0, f);
  st = clf_tensor_from_f32(ctx, CLF_F32, 1, (size_t[]){g->rot / 2}, f, &g->local_freq);
  return st == CLF_OK ? clf__params_add(ctx, &m->params, g->local_freq) : st;
}

clf_status clf__llama_load(clf_model *m, const void *dims, const clf__config *c, const clf__weights *w,
                           const clf__llama_kind *k) {
  const clf__llama_dims *d = dims;
  clf_context *ctx = m->ctx;
  clf_status st;
  llama *g = clf__model_calloc(m, 1, sizeof *g);
  if (!g || !(g->layers = clf__model_calloc(m, d->N > 0 && d->N <= 4096 ? (size_t)d->N + 1 : 1, sizeof *g->layers)))
    return CLF_E_OUT_OF_MEMORY;
  m->impl = g;
  if ((st = llama_sizes(ctx, m->type, d, g)) != CLF_OK || (st = read_window(ctx, m->type, d, c, k, &g->window)) != CLF_OK)
    return st;
  if (clf_activation_from_name(d->act, &g->act) != CLF_OK)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_model_load: %s %s \"%s\" is not supported", m->type,
                     k->act_key ? k->act_key : "hidden_act", d->act);
  if ((st = llama_rope_init(m, d, c, w)) != CLF_OK) return st;
  if (k->layer_windows && (st = layer_windows(m, d, c, k->local_rope)) != CLF_OK) return st;
  /* Qwen3: sliding_window (with use_sliding_window) only in the layers
   * from max_window_layers on, at the same frequencies */
  if (k->window_from_layer && g->window) {
    const size_t window = g->window;
    g->window = 0;
    if (d->max_window_layers < 0)
      return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: %s max_window_layers %ld is negative", m->type,
                       d->max_window_layers);
    if ((st = layer_types(m, d, c, window, qwen3_sliding)) != CLF_OK) return st;
  }
  if (!(d->attn_softcap >= 0) || !isfinite(d->attn_softcap) || !(d->softcap >= 0) || !isfinite(d->softcap))
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: %s attn_logit_softcapping %g or final_logit_softcapping %g is "
                     "not a finite number of at least 0", m->type, d->attn_softcap, d->softcap);
  g->attn_softcap = (float)d->attn_softcap;
  g->embed_scale = k->scale_embed ? (float)sqrt((double)g->D) : 1.0f;
  g->base = !clf__weights_has(w, "lm_head.weight") && !d->tie;
  for (size_t i = 0; i < CLF__ARRAY_LEN(k->causal) && k->causal[i]; i++)
    if (clf__config_has_arch(c, k->causal[i])) g->base = 0;
  g->dec = (clf__decoder){.body = llama_body, .prepare = llama_prepare, .ws = &m->ws, .V = g->V, .D = g->D,
                          .kv_heads = g->Hkv, .dh = g->Dh, .limit = g->limit,
                          .limit_key = "max_position_embeddings", .need_pos = 1};
  g->dec.softcap = (float)d->softcap;
  size_t *windows = clf__model_calloc(m, g->n_layers ? g->n_layers : 1, sizeof *windows);
  if (!windows) return CLF_E_OUT_OF_MEMORY;
  clf__layers_windows(g->layers, g->n_layers, g->window, windows);
  g->dec.kv_windows = windows;
  if (g->rope.type == CLF__ROPE_LONGROPE) g->dec.refeed_at = g->rope.orig_max;
  if (g->rope.type == CLF__ROPE_LONGROPE && g->limit > g->rope.orig_max)
    g->dec.no_engine = "rope_scaling \"longrope\": its frequencies follow the longest sequence of a batch";
  if (g->rope.type == CLF__ROPE_DYNAMIC)
    g->dec.no_engine = "rope_scaling \"dynamic\": its frequencies follow the longest sequence of a batch";
  if ((st = clf__decoder_attach(m, &g->dec, g->n_layers, 0)) != CLF_OK) return st;
  m->run = llama_run;
  m->in_names = clf__decoder_inputs;
  m->n_in = 3;
  m->out_names = g->base ? llama_outputs + 1 : llama_outputs;
  m->n_out = g->base ? 1 : 2;
  m->vocab = m->in_vocab = g->V;
  m->max_positions = g->limit;
  const char *const probe[] = {"model.embed_tokens.weight", "embed_tokens.weight", NULL};
  const char *found = clf__weights_pick(w, probe);
  return llama_load_weights(m, d, found && strcmp(found, probe[0]) == 0 ? "model." : "", w, k);
}

/* Llama, Mistral and Qwen2: the same rows; Qwen2's q, k, v with biases. */
#define LLAMA_KIND(qkv_bias, window)                                                                      \
  {llama_layer_rows, CLF__ARRAY_LEN(llama_layer_rows),                                                   \
   {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"}, {"LlamaModel", "MistralModel", "Qwen2Model"}, \
   qkv_bias, window}
static const clf__llama_kind llama_kind = LLAMA_KIND(0, CLF__LLAMA_NO_WINDOW);
static const clf__llama_kind mistral_kind = LLAMA_KIND(0, CLF__LLAMA_WINDOW);
static const clf__llama_kind qwen2_kind = LLAMA_KIND(1, CLF__LLAMA_WINDOW_IF_USED);
static clf_status llama_load(clf_model *m, const void *dims, const clf__config *c, const clf__weights *w) {
  const clf__llama_kind *k = strcmp(m->type, "qwen2") == 0     ? &qwen2_kind
                             : strcmp(m->type, "mistral") == 0 ? &mistral_kind
                                                               : &llama_kind;
  return clf__llama_load(m, dims, c, w, k);
}

/* the layers' rows; the head [V, D] */
void clf__llama_gemms(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l, const clf__llama_kind *k) {
  const clf__llama_dims *d = dims;
  llama g = {0};
  if (d->H <= 0 || d->D <= 0 || d->F <= 0 || d->Hkv < 0 || d->Dh < 0) return; /* llama_load refuses it */
  g.D = d->D, g.F = d->F, g.H = d->H, g.Hkv = d->Hkv ? d->Hkv : d->H, g.Dh = d->Dh ? d->Dh : d->D / d->H;
  const clf__block_spec spec = llama_spec(&g, 0, 0, 0, 0);
  clf__rows_gemms(k->rows, k->n_rows, &spec, T, d->N, l);
  for (size_t i = 0; i < CLF__ARRAY_LEN(k->base) && k->base[i]; i++)
    if (clf__config_has_arch(c, k->base[i])) return;
  clf__gemm_add(l, T, d->V, d->D, 1, 1);
}

static void llama_gemms(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l) {
  clf__llama_gemms(dims, c, T, l, &llama_kind);
}

/* ---- GGUF: GGUF_CONFIG_MAPPING and GGUF_TENSOR_MAPPING of transformers
 * 4.46 for llama, mistral and qwen2 (the same keys and names) ---------- */

/* The sizes' bounds are the models' own (llama_sizes). */
const clf__gguf_key clf__llama_gguf_keys[] = {
    CLF__GGUF_INT_KEY("%s.context_length", "max_position_embeddings", 0, 1, 1LL << 30),
    CLF__GGUF_INT_KEY("%s.block_count", "num_hidden_layers", 1, 1, 4096),
    CLF__GGUF_INT_KEY("%s.feed_forward_length", "intermediate_size", 1, 1, 1LL << 24),
    CLF__GGUF_INT_KEY("%s.embedding_length", "hidden_size", 1, 1, 1LL << 20),
    CLF__GGUF_NUM_KEY("%s.rope.freq_base", "rope_theta", POSITIVE),
    CLF__GGUF_INT_KEY("%s.attention.head_count", "num_attention_heads", 1, 1, 4096),
    CLF__GGUF_INT_KEY("%s.attention.head_count_kv", "num_key_value_heads", 0, 1, 4096),
    CLF__GGUF_NUM_KEY("%s.attention.layer_norm_rms_epsilon", "rms_norm_eps", EPSILON),
    CLF__GGUF_INT_KEY("%s.vocab_size", "vocab_size", 0, 1, 1LL << 31),
};

/* rope_freqs.weight (Llama 3's frequency factors) is not transformers'. */
const clf__gguf_name clf__llama_gguf_whole[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
    {"rope_freqs.weight", "model.rope_freqs.weight"},
};

_Static_assert(CLF__ARRAY_LEN(clf__llama_gguf_keys) == CLF__LLAMA_GGUF_N_KEYS, "llama.h's count of the keys");
_Static_assert(CLF__ARRAY_LEN(clf__llama_gguf_whole) == CLF__LLAMA_GGUF_N_WHOLE, "llama.h's count of the names");

static const clf__gguf_name llama_gguf_layer[] = {CLF__LLAMA_GGUF_LAYER(1)};
static const clf__gguf_name qwen2_gguf_layer[] = {CLF__LLAMA_GGUF_LAYER(0)};

static const clf__gguf_arch llama_gguf = CLF__LLAMA_GGUF("llama", "LlamaForCausalLM", 0, NULL, llama_gguf_layer);
static const clf__gguf_arch mistral_gguf = CLF__LLAMA_GGUF("mistral", "MistralForCausalLM", 0, NULL, llama_gguf_layer);
static const clf__gguf_arch qwen2_gguf = CLF__LLAMA_GGUF("qwen2", "Qwen2ForCausalLM", CLF__GGUF_HEAD_DIM,
                                                    "{\"use_sliding_window\": false}", qwen2_gguf_layer);

/* Outputs: logits and last_hidden_state (*ForCausalLM), last_hidden_state (*Model). */
const clf__family clf__llama_family = {"llama", {"LlamaForCausalLM", "LlamaModel", NULL}, llama_keys,
                                       CLF__ARRAY_LEN(llama_keys), sizeof(clf__llama_dims), llama_load, llama_gemms,
                                       &llama_gguf};
const clf__family clf__mistral_family = {"mistral", {"MistralForCausalLM", "MistralModel", NULL}, mistral_keys,
                                         CLF__ARRAY_LEN(mistral_keys), sizeof(clf__llama_dims), llama_load, llama_gemms,
                                         &mistral_gguf};
const clf__family clf__qwen2_family = {"qwen2", {"Qwen2ForCausalLM", "Qwen2Model", NULL}, qwen2_keys,
                                       CLF__ARRAY_LEN(qwen2_keys), sizeof(clf__llama_dims), llama_load, llama_gemms,
                                       &qwen2_gguf};
