/* llama.c - LlamaModel / LlamaForCausalLM, MistralModel /
 * MistralForCausalLM, Qwen2Model / Qwen2ForCausalLM: embed_tokens, N
 * pre-norm blocks (RMSNorm fused with the residual add; q, k, v in one GEMM;
 * RoPE applied while splitting heads; grouped-query attention with causal,
 * padding and sliding-window masks; SwiGLU MLP with gate and up in one GEMM),
 * the final norm and the (tied or own) LM head; a KV cache of the KV heads
 * for generation.  As transformers 4.46.
 */
#include "family.h"
#include "kv.h"
#include "llama.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct llama_layer {
  clf__linear qkv;     /* [(H + 2 Hkv) Dh, D]: q_proj, k_proj, v_proj */
  clf__linear o;       /* [D, H Dh] */
  clf__linear gate_up; /* [2F, D]: gate_proj, up_proj */
  clf__linear down;    /* [D, F] */
  clf_tensor *ln_in, *ln_post; /* RMSNorm gammas [D] */
} llama_layer;

typedef struct llama {
  size_t V, D, H, Hkv, Dh, F, P, n_layers, window;
  size_t limit; /* the longest sequence: max_position_embeddings (dynamic: x factor) */
  float eps, scale;
  clf_activation act;
  clf__rope rope;
  int base; /* *Model: no LM head, last_hidden_state only */
  clf_tensor *embed, *head, *norm;
  llama_layer *layers;
  /* RoPE: inv_freq [Dh/2] on the device for the sequence length rope_dev
   * (0: the initial frequencies); rope_cached is transformers' dynamic state
   * (max_seq_len_cached, 0: the original), advanced per generation step */
  clf_tensor *inv_freq;
  size_t rope_dev, rope_cached;
  /* generation state */
  clf__kv_cache kv; /* per layer [B, Hkv, cap, Dh] while generating */
  clf_tensor *step; /* i64: ids, positions, mask of a step */
} llama;

static const char *const llama_inputs[] = {"input_ids", "attention_mask", "position_ids"};
static const char *const llama_outputs[] = {"logits", "last_hidden_state"};
enum { IN_IDS, IN_MASK, IN_POS };

/* ---- RoPE: transformers 4.46's ROPE_INIT_FUNCTIONS in float32 ---------- */

void clf__rope_inv_freq(const clf__rope *r, size_t seq_len, float *out) {
  const size_t half = r->dim / 2;
  float base = (float)r->theta;
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
  clf_status st = clf_tensor_upload(ctx, g->inv_freq, f, g->Dh / 2 * sizeof *f);
  if (st == CLF_OK) g->rope_dev = len;
  return st;
}

/* transformers' _dynamic_frequency_update for positions whose largest is
 * max_pos: grow past the cached length, back to the original below it. */
static clf_status rope_update(clf_context *ctx, llama *g, int64_t max_pos) {
  if (g->rope.type != CLF__ROPE_DYNAMIC) return CLF_OK;
  const size_t S = (size_t)(max_pos < 0 ? 0 : max_pos) + 1, orig = g->rope.max_pos;
  const size_t cached = g->rope_cached ? g->rope_cached : orig;
  if (S > cached) g->rope_cached = S;
  if (S < orig && g->rope_cached > orig) g->rope_cached = 0;
  return rope_sync(ctx, g, g->rope_cached);
}

/* ---- forward ----------------------------------------------------------- */

static void llama_gen_end(clf_model *m) {
  llama *g = m->impl;
  clf__kv_cache_end(&g->kv);
  clf_tensor_destroy(g->step);
  g->step = NULL;
}

static void llama_destroy(clf_model *m) {
  llama *g = m->impl;
  if (!g) return;
  llama_gen_end(m);
  clf__kv_cache_free(&g->kv);
  free(g->layers);
  free(g);
  m->impl = NULL;
}

/* Self-attention of layer i on a [B, L, D] into f [B, L, D]: the fused
 * projection, q and k rotated on their way into heads (k and v appended to
 * the cache at `past` when generating), GQA attention, o_proj. */
static clf_status llama_attn(clf_model *m, size_t i, const clf_tensor *pos, size_t past,
                             const clf_attention_mask *mask, const clf_tensor *a, clf_tensor *f) {
  clf_context *ctx = m->ctx;
  llama *g = m->impl;
  clf__ws *ws = &m->ws;
  const llama_layer *l = &g->layers[i];
  const size_t B = a->shape[0], L = a->shape[1], H = g->H, Hkv = g->Hkv, Dh = g->Dh;
  clf_tensor *proj, *q, *k, *v, *ctxm;
  size_t kv_len = 0;
  clf_status st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_PROJ, CLF_F32, 3, (size_t[]){B, L, (H + 2 * Hkv) * Dh}, &proj)) != CLF_OK ||
      (st = clf__ws_get(ctx, ws, CLF__WS_Q, CLF_F32, 4, (size_t[]){B, H, L, Dh}, &q)) != CLF_OK ||
      (st = clf__ws_get(ctx, ws, CLF__WS_CTX, CLF_F32, 3, (size_t[]){B, L, H * Dh}, &ctxm)) != CLF_OK)
    return st;
  if (g->kv.active) {
    k = g->kv.k[i], v = g->kv.v[i], kv_len = past + L;
  } else if ((st = clf__ws_get(ctx, ws, CLF__WS_K, CLF_F32, 4, (size_t[]){B, Hkv, L, Dh}, &k)) != CLF_OK ||
             (st = clf__ws_get(ctx, ws, CLF__WS_V, CLF_F32, 4, (size_t[]){B, Hkv, L, Dh}, &v)) != CLF_OK) {
    return st;
  }
  if ((st = clf_linear(ctx, a, l->qkv.w, l->qkv.layout, l->qkv.b, CLF_ACT_NONE, proj, NULL)) != CLF_OK ||
      (st = clf_split_heads_rope(ctx, proj, 0, 0, pos, g->inv_freq, 1.0f, q, NULL)) != CLF_OK ||
      (st = clf_split_heads_rope(ctx, proj, H * Dh, past, pos, g->inv_freq, 1.0f, k, NULL)) != CLF_OK ||
      (st = clf_split_heads(ctx, proj, (H + Hkv) * Dh, past, v, NULL)) != CLF_OK ||
      (st = clf_attention(ctx, q, k, v, kv_len, mask, g->scale, CLF_ATTN_AUTO, ctxm, NULL)) != CLF_OK)
    return st;
  return clf_linear(ctx, ctxm, l->o.w, l->o.layout, l->o.b, CLF_ACT_NONE, f, NULL);
}

/* One layer on the residual stream h; a = input_layernorm(h) on entry and
 * next(h) on exit (the next layer's input_layernorm or the final norm). */
static clf_status llama_layer_fwd(clf_model *m, size_t i, const clf_tensor *pos, size_t past,
                                  const clf_attention_mask *mask, clf_tensor *h, clf_tensor *a) {
  clf_context *ctx = m->ctx;
  llama *g = m->impl;
  clf__ws *ws = &m->ws;
  const llama_layer *l = &g->layers[i];
  const clf_tensor *next = i + 1 < g->n_layers ? g->layers[i + 1].ln_in : g->norm;
  const size_t B = h->shape[0], L = h->shape[1];
  clf_tensor *f, *gu, *hid;
  clf_status st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_BRANCH, CLF_F32, 3, h->shape, &f)) != CLF_OK ||
      (st = clf__ws_get(ctx, ws, CLF__WS_HID, CLF_F32, 3, (size_t[]){B, L, 2 * g->F}, &gu)) != CLF_OK ||
      (st = clf__ws_get(ctx, ws, CLF__WS_GLU, CLF_F32, 3, (size_t[]){B, L, g->F}, &hid)) != CLF_OK)
    return st;
  if ((st = llama_attn(m, i, pos, past, mask, a, f)) != CLF_OK ||
      (st = clf_rms_norm(ctx, h, f, l->ln_post, g->eps, h, a, NULL)) != CLF_OK ||
      (st = clf_linear(ctx, a, l->gate_up.w, l->gate_up.layout, l->gate_up.b, CLF_ACT_NONE, gu, NULL)) != CLF_OK ||
      (st = clf_glu(ctx, gu, g->act, hid, NULL)) != CLF_OK ||
      (st = clf_linear(ctx, hid, l->down.w, l->down.layout, l->down.b, CLF_ACT_NONE, f, NULL)) != CLF_OK)
    return st;
  return clf_rms_norm(ctx, h, f, next, g->eps, h, a, NULL);
}

/* embed -> N layers -> norm: `a` gets norm(h).  pos [B, L] the rotary
 * positions; past the cache rows already filled. */
static clf_status llama_body(clf_model *m, const clf_tensor *ids, const clf_tensor *pos, size_t past,
                             const clf_attention_mask *mask, clf_tensor *h, clf_tensor *a) {
  clf_context *ctx = m->ctx;
  llama *g = m->impl;
  clf_status st;
  if ((st = clf_embedding(ctx, g->embed, ids, 1.0f, 0, h, NULL)) != CLF_OK) return st;
  const clf_tensor *first = g->n_layers ? g->layers[0].ln_in : g->norm;
  if ((st = clf_rms_norm(ctx, h, NULL, first, g->eps, NULL, a, NULL)) != CLF_OK) return st;
  for (size_t i = 0; i < g->n_layers; i++)
    if ((st = llama_layer_fwd(m, i, pos, past, mask, h, a)) != CLF_OK) return st;
  return CLF_OK;
}

/* The inputs of a forward pass checked: ids in the vocabulary, at most
 * `limit` positions, position_ids in [0, limit); *max_pos the largest. */
static clf_status llama_check(clf_model *m, const clf__inputs in, size_t *B, size_t *L, int64_t *max_pos) {
  static const char op[] = "clf_model_run";
  clf_context *ctx = m->ctx;
  llama *g = m->impl;
  clf_status st;
  if (!in[IN_IDS])
    return clf__fail(ctx, CLF_E_INVALID_ARG,
                     "%s: %s needs input \"input_ids\" (inputs: input_ids, attention_mask, position_ids)", op, m->type);
  if ((st = clf__check_ids(m, in[IN_IDS], "input_ids", B, L)) != CLF_OK) return st;
  for (int i = IN_MASK; i <= IN_POS; i++)
    if (in[i] && (st = clf__check_ids(m, in[i], llama_inputs[i], B, L)) != CLF_OK) return st;
  if (*L > g->limit)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: input_ids has %zu positions, more than the %zu of %s's "
                     "max_position_embeddings", op, *L, g->limit, m->type);
  if ((st = clf__check_id_range(m, op, in[IN_IDS], "input_ids", g->V)) != CLF_OK) return st;
  *max_pos = *L ? (int64_t)*L - 1 : 0;
  if (!in[IN_POS]) return CLF_OK;
  *max_pos = 0;
  for (size_t i = 0; i < *B * *L; i++) {
    const int64_t p = clf__id_at(in[IN_POS], i);
    if (p < 0 || (uint64_t)p >= g->limit)
      return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: position_ids[%zu][%zu] is %lld, outside 0 to %zu (%s's "
                       "max_position_embeddings)", op, i / *L, i % *L, (long long)p, g->limit - 1, m->type);
    if (p > *max_pos) *max_pos = p;
  }
  return CLF_OK;
}

/* position_ids as given, or 0..L-1 in every row (transformers' default). */
static clf_status llama_positions(clf_model *m, const clf_array *given, size_t B, size_t L, clf_tensor **out) {
  if (given) return clf__upload_ids(m, &m->ws, CLF__WS_POS, given, B, L, 0, out);
  clf_array a = {"position_ids", CLF_I64, 2, {B, L}, malloc(B * L * sizeof(int64_t) + 1)};
  if (!a.data) return clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_run: out of host memory");
  for (size_t i = 0; i < B * L; i++) ((int64_t *)a.data)[i] = (int64_t)(i % L);
  clf_status st = clf__upload_ids(m, &m->ws, CLF__WS_POS, &a, B, L, 0, out);
  free(a.data);
  return st;
}

static clf_status llama_run(clf_model *m, const clf__inputs in, const int *want, clf_array *res) {
  clf_context *ctx = m->ctx;
  llama *g = m->impl;
  clf__ws *ws = &m->ws;
  clf_status st;
  size_t B = 0, L = 0;
  int64_t max_pos = 0;
  if ((st = llama_check(m, in, &B, &L, &max_pos)) != CLF_OK) return st;
  llama_gen_end(m); /* a forward pass runs without the cache */
  g->rope_cached = 0;
  if ((st = rope_update(ctx, g, max_pos)) != CLF_OK) return st;
  clf_tensor *ids, *mask = NULL, *pos, *h, *a;
  if ((st = clf__upload_ids(m, ws, CLF__WS_IDS, in[IN_IDS], B, L, 0, &ids)) != CLF_OK) return st;
  if (in[IN_MASK] && (st = clf__upload_ids(m, ws, CLF__WS_MASK, in[IN_MASK], B, L, 1, &mask)) != CLF_OK) return st;
  if ((st = llama_positions(m, in[IN_POS], B, L, &pos)) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_H, CLF_F32, 3, (size_t[]){B, L, g->D}, &h)) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_A, CLF_F32, 3, (size_t[]){B, L, g->D}, &a)) != CLF_OK) return st;
  clf_attention_mask am = {mask, 1, NULL, g->window};
  if ((st = llama_body(m, ids, pos, 0, &am, h, a)) != CLF_OK) return st;
  /* the base model's only output is last_hidden_state */
  const int want_logits = !g->base && want[0], want_hidden = g->base ? want[0] : want[1];
  if (want_hidden && (st = clf__download(m, a, "last_hidden_state", &res[g->base ? 0 : 1])) != CLF_OK) return st;
  if (want_logits) {
    clf_tensor *logits;
    if ((st = clf__ws_get(ctx, ws, CLF__WS_LOGITS, CLF_F32, 3, (size_t[]){B, L, g->V}, &logits)) != CLF_OK)
      return st;
    if ((st = clf_linear(ctx, a, g->head, CLF_WEIGHT_OUT_IN, NULL, CLF_ACT_NONE, logits, NULL)) != CLF_OK) return st;
    if ((st = clf__download(m, logits, "logits", &res[0])) != CLF_OK) return st;
  }
  return CLF_OK;
}

/* ---- generation -------------------------------------------------------- */

static clf_status llama_gen_begin(clf_model *m, size_t B, size_t cap, const clf_array *enc_ids,
                                  const clf_array *enc_mask, size_t expand) {
  clf_context *ctx = m->ctx;
  llama *g = m->impl;
  clf_status st;
  (void)enc_ids, (void)enc_mask, (void)expand;
  llama_gen_end(m);
  if (cap > g->limit)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "clf_model_generate: max_length %zu exceeds %s's %zu positions "
                     "(max_position_embeddings)", cap, m->type, g->limit);
  g->rope_cached = 0;
  if ((st = clf__kv_cache_begin(ctx, &g->kv, B, g->Hkv, cap, g->Dh)) != CLF_OK) return st;
  return clf_tensor_create(ctx, CLF_I64, 1, (size_t[]){B * 3 * cap}, &g->step);
}

/* The step's ids [B, n], positions [B, n] and mask [B, past + n] in one
 * upload, as views of g->step. */
static clf_status step_upload(clf_model *m, size_t n, const int64_t *ids, const int64_t *pos, const int64_t *mask,
                              clf_tensor *v[4]) {
  llama *g = m->impl;
  const size_t B = g->kv.B, kv_len = g->kv.past + n, total = B * (2 * n + kv_len);
  int64_t *host = malloc(total * sizeof *host);
  if (!host) return clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_generate: out of host memory");
  memcpy(host, ids, B * n * sizeof *host);
  memcpy(host + B * n, pos, B * n * sizeof *host);
  for (size_t i = 0; i < B * kv_len; i++) host[2 * B * n + i] = mask ? mask[i] : 1;
  clf_status st;
  if ((st = clf_tensor_view(g->step, 0, 1, &total, &v[0])) == CLF_OK &&
      (st = clf_tensor_upload(m->ctx, v[0], host, total * sizeof *host)) == CLF_OK &&
      (st = clf_tensor_view(g->step, 0, 2, (size_t[]){B, n}, &v[1])) == CLF_OK &&
      (st = clf_tensor_view(g->step, B * n, 2, (size_t[]){B, n}, &v[2])) == CLF_OK)
    st = clf_tensor_view(g->step, 2 * B * n, 2, (size_t[]){B, kv_len}, &v[3]);
  free(host);
  return st;
}

static clf_status llama_gen_step(clf_model *m, size_t n, const int64_t *ids, const int64_t *pos, const int64_t *mask,
                                 float *logits) {
  clf_context *ctx = m->ctx;
  llama *g = m->impl;
  clf__ws *ws = &m->ws;
  const size_t B = g->kv.B, kv_len = g->kv.past + n;
  clf_status st;
  if (kv_len > g->kv.cap)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "clf_model_generate: %zu positions exceed the cache's %zu", kv_len,
                     g->kv.cap);
  int64_t max_pos = 0;
  for (size_t i = 0; i < B * n; i++) max_pos = pos[i] > max_pos ? pos[i] : max_pos;
  if ((st = rope_update(ctx, g, max_pos)) != CLF_OK) return st;
  clf_tensor *v[4] = {NULL, NULL, NULL, NULL}, *h, *a, *row, *lg;
  if ((st = step_upload(m, n, ids, pos, mask, v)) == CLF_OK &&
      (st = clf__ws_get(ctx, ws, CLF__WS_H, CLF_F32, 3, (size_t[]){B, n, g->D}, &h)) == CLF_OK &&
      (st = clf__ws_get(ctx, ws, CLF__WS_A, CLF_F32, 3, (size_t[]){B, n, g->D}, &a)) == CLF_OK &&
      (st = clf__ws_get(ctx, ws, CLF__WS_ROW, CLF_F32, 3, (size_t[]){B, 1, g->D}, &row)) == CLF_OK &&
      (st = clf__ws_get(ctx, ws, CLF__WS_LOGITS, CLF_F32, 3, (size_t[]){B, 1, g->V}, &lg)) == CLF_OK) {
    clf_attention_mask am = {v[3], 1, NULL, g->window};
    if ((st = llama_body(m, v[1], v[2], g->kv.past, &am, h, a)) == CLF_OK &&
        (st = clf_copy_rows(ctx, a, n - 1, row, 0, 1, NULL)) == CLF_OK &&
        (st = clf_linear(ctx, row, g->head, CLF_WEIGHT_OUT_IN, NULL, CLF_ACT_NONE, lg, NULL)) == CLF_OK)
      st = clf_tensor_download(ctx, lg, logits, B * g->V * sizeof *logits);
  }
  for (int i = 0; i < 4; i++) clf_tensor_destroy(v[i]);
  if (st == CLF_OK) g->kv.past = kv_len;
  return st;
}

static clf_status llama_gen_reorder(clf_model *m, const int64_t *idx) {
  llama *g = m->impl;
  return clf__kv_cache_reorder(m->ctx, &g->kv, idx, &m->ws);
}

/* ---- config.json ------------------------------------------------------- */

typedef struct llama_dims {
  long V, D, F, H, Hkv, Dh, N, P;
  double eps, theta;
  const char *act;
  int tie, attn_bias, mlp_bias, use_window;
} llama_dims;

/* the keys of all three; P, Hkv: the config class's default when absent */
#define LLAMA_KEYS(P_default, Hkv_default)                                                            \
  CLF__REQ(llama_dims, V, "vocab_size", INT), CLF__REQ(llama_dims, D, "hidden_size", INT),            \
      CLF__REQ(llama_dims, F, "intermediate_size", INT),                                              \
      CLF__REQ(llama_dims, H, "num_attention_heads", INT),                                            \
      CLF__REQ(llama_dims, N, "num_hidden_layers", INT),                                              \
      CLF__OPT(llama_dims, Hkv, "num_key_value_heads", INT, Hkv_default), /* 0: num_attention_heads */ \
      CLF__OPT(llama_dims, P, "max_position_embeddings", INT, P_default),                             \
      CLF__OPT(llama_dims, eps, "rms_norm_eps", FLOAT, 1e-6),                                         \
      CLF__OPT(llama_dims, theta, "rope_theta", FLOAT, 10000.0),                                      \
      CLF__OPT_STR(llama_dims, act, "hidden_act", "silu"),                                            \
      CLF__OPT(llama_dims, tie, "tie_word_embeddings", BOOL, 0)

/* Llama: head_dim, attention_bias (q, k, v and o), mlp_bias */
static const clf__config_key llama_keys[] = {
    LLAMA_KEYS(2048, 0),
    CLF__OPT(llama_dims, Dh, "head_dim", INT, 0), /* 0: hidden_size / num_attention_heads */
    CLF__OPT(llama_dims, attn_bias, "attention_bias", BOOL, 0),
    CLF__OPT(llama_dims, mlp_bias, "mlp_bias", BOOL, 0),
};
/* Mistral: head_dim, sliding_window (read in mistral_window) */
static const clf__config_key mistral_keys[] = {
    LLAMA_KEYS(4096 * 32, 8),
    CLF__OPT(llama_dims, Dh, "head_dim", INT, 0),
};
/* Qwen2: q, k, v biases always; the window only with use_sliding_window */
static const clf__config_key qwen2_keys[] = {
    LLAMA_KEYS(32768, 32),
    CLF__OPT(llama_dims, use_window, "use_sliding_window", BOOL, 0),
};

/* config.json's sliding_window: absent 4096 (the config classes' default),
 * null none; Qwen2 only with use_sliding_window (4.46: its config then
 * holds None, and eager attention masks every layer by it). */
static clf_status read_window(clf_context *ctx, const char *type, const llama_dims *d, const clf__config *c,
                              size_t *out) {
  *out = 0;
  if (strcmp(type, "llama") == 0 || (strcmp(type, "qwen2") == 0 && !d->use_window)) return CLF_OK;
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(clf__config_json(c), "sliding_window");
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

/* rope_scaling: null, or {"rope_type" (or "type"): linear | dynamic | llama3, factor, ...}.
 * Mistral's rotary embedding (4.46) ignores it. */
static clf_status read_rope(clf_context *ctx, const char *model_type, const clf__config *c, clf__rope *r) {
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
  if (strcmp(type, "linear") == 0) r->type = CLF__ROPE_LINEAR;
  else if (strcmp(type, "dynamic") == 0) r->type = CLF__ROPE_DYNAMIC;
  else if (strcmp(type, "llama3") == 0) r->type = CLF__ROPE_LLAMA3;
  else
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_model_load: rope_scaling type \"%s\" is not supported (supported: "
                     "default, linear, dynamic, llama3)", type);
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
  r->orig_max = (size_t)om;
  return CLF_OK;
}

/* Sizes checked and the model's shape filled in. */
static clf_status llama_sizes(clf_context *ctx, const char *type, const llama_dims *d, llama *g) {
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
  g->V = d->V, g->D = d->D, g->F = d->F, g->H = d->H, g->Hkv = hkv, g->Dh = dh, g->P = d->P;
  g->n_layers = d->N;
  g->eps = (float)d->eps;
  g->scale = 1.0f / sqrtf((float)dh);
  return CLF_OK;
}

/* ---- weights ----------------------------------------------------------- */

/* The linears PREFIX{names[i]}.weight [outs[i], in] (and .bias when `bias`)
 * concatenated along out into one linear: one GEMM for them all. */
static clf_status load_cat(clf_context *ctx, const clf__weights *w, clf__params *p, const char *prefix,
                           const char *const *names, const size_t *outs, size_t n, size_t in, int bias,
                           clf__linear *l) {
  size_t rows = 0;
  for (size_t i = 0; i < n; i++) rows += outs[i];
  float *cat = malloc(rows * in * sizeof *cat + 1), *bcat = malloc(rows * sizeof *bcat + 1), *h = NULL;
  char wn[256];
  clf_status st = cat && bcat ? CLF_OK : clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory fusing %s",
                                                   prefix);
  for (size_t i = 0, at = 0; i < n && st == CLF_OK; at += outs[i], i++) {
    clf__wn(wn, sizeof wn, prefix, "%s.weight", names[i]);
    if ((st = clf__weights_read(ctx, w, wn, 2, (size_t[]){outs[i], in}, &h, (size_t[8]){0})) != CLF_OK) break;
    memcpy(cat + at * in, h, outs[i] * in * sizeof *h);
    free(h);
    h = NULL;
    if (!bias) continue;
    clf__wn(wn, sizeof wn, prefix, "%s.bias", names[i]);
    if ((st = clf__weights_read(ctx, w, wn, 1, &outs[i], &h, (size_t[8]){0})) == CLF_OK)
      memcpy(bcat + at, h, outs[i] * sizeof *h);
    free(h);
    h = NULL;
  }
  clf__wn(wn, sizeof wn, prefix, "{%s,%s%s}", names[0], names[1], n > 2 ? ",..." : "");
  if (st == CLF_OK) st = clf__store_linear(ctx, p, wn, cat, rows, in, l);
  clf_tensor *t = NULL;
  if (st == CLF_OK && bias && (st = clf_tensor_from_f32(ctx, CLF_F32, 1, &rows, bcat, &t)) == CLF_OK &&
      (st = clf__params_add(ctx, p, t)) == CLF_OK)
    l->b = t;
  free(cat);
  free(bcat);
  return st;
}

/* Layer i under PF "layers.%zu.". */
static clf_status llama_load_layer(clf_model *m, const llama_dims *d, const char *pf, size_t i,
                                   const clf__weights *w) {
  clf_context *ctx = m->ctx;
  llama *g = m->impl;
  clf__params *p = &m->params;
  llama_layer *l = &g->layers[i];
  const int qwen = strcmp(m->type, "qwen2") == 0, qkv_bias = qwen || d->attn_bias;
  const size_t D = g->D, qd = g->H * g->Dh, kd = g->Hkv * g->Dh;
  char pre[192], n1[256], n2[256];
  clf_status st;
  clf__wn(pre, sizeof pre, pf, "layers.%zu.", i);
  snprintf(n1, sizeof n1, "%sself_attn.", pre);
  if ((st = load_cat(ctx, w, p, n1, (const char *const[]){"q_proj", "k_proj", "v_proj"},
                     (size_t[]){qd, kd, kd}, 3, D, qkv_bias, &l->qkv)) != CLF_OK)
    return st;
  snprintf(n1, sizeof n1, "%sself_attn.o_proj.weight", pre);
  snprintf(n2, sizeof n2, "%sself_attn.o_proj.bias", pre);
  if ((st = clf__load_linear(ctx, w, p, n1, d->attn_bias ? n2 : NULL, D, qd, CLF_WEIGHT_OUT_IN, &l->o)) != CLF_OK)
    return st;
  snprintf(n1, sizeof n1, "%smlp.", pre);
  if ((st = load_cat(ctx, w, p, n1, (const char *const[]){"gate_proj", "up_proj"}, (size_t[]){g->F, g->F}, 2, D,
                     d->mlp_bias, &l->gate_up)) != CLF_OK)
    return st;
  snprintf(n1, sizeof n1, "%smlp.down_proj.weight", pre);
  snprintf(n2, sizeof n2, "%smlp.down_proj.bias", pre);
  if ((st = clf__load_linear(ctx, w, p, n1, d->mlp_bias ? n2 : NULL, D, g->F, CLF_WEIGHT_OUT_IN, &l->down)) !=
      CLF_OK)
    return st;
  snprintf(n1, sizeof n1, "%sinput_layernorm.weight", pre);
  snprintf(n2, sizeof n2, "%spost_attention_layernorm.weight", pre);
  if ((st = clf__param(ctx, w, p, n1, 1, &D, &l->ln_in)) != CLF_OK) return st;
  return clf__param(ctx, w, p, n2, 1, &D, &l->ln_post);
}

/* embed_tokens, the layers, norm under pf ("model." or ""), and the head:
 * lm_head.weight, or embed_tokens when tied (a copy in another weight type,
 * the lookup staying f32). */
static clf_status llama_load_weights(clf_model *m, const llama_dims *d, const char *pf, const clf__weights *w) {
  clf_context *ctx = m->ctx;
  llama *g = m->impl;
  clf__params *p = &m->params;
  char n1[256];
  clf_status st;
  if ((st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embed_tokens.weight"), 2, (size_t[]){g->V, g->D},
                       &g->embed)) != CLF_OK ||
      (st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "norm.weight"), 1, &g->D, &g->norm)) != CLF_OK)
    return st;
  for (size_t i = 0; i < g->n_layers; i++)
    if ((st = llama_load_layer(m, d, pf, i, w)) != CLF_OK) return st;
  if (g->base) return CLF_OK;
  g->head = g->embed;
  if (!d->tie) return clf__load_weight(ctx, w, p, "lm_head.weight", g->V, g->D, CLF_WEIGHT_OUT_IN, &g->head);
  if (p->wtype != CLF_F32)
    return clf__load_weight(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embed_tokens.weight"), g->V, g->D,
                            CLF_WEIGHT_OUT_IN, &g->head);
  return CLF_OK;
}

/* The RoPE settings, the frequencies' device tensor and the sequence limit. */
static clf_status llama_rope_init(clf_model *m, const llama_dims *d, const clf__config *c) {
  clf_context *ctx = m->ctx;
  llama *g = m->impl;
  clf_status st;
  if ((st = read_rope(ctx, m->type, c, &g->rope)) != CLF_OK) return st;
  g->rope.dim = g->Dh, g->rope.theta = d->theta, g->rope.max_pos = g->P;
  if (!(d->theta > 0) || !isfinite(d->theta))
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: %s rope_theta %g is not positive", m->type, d->theta);
  g->limit = g->P;
  if (g->rope.type == CLF__ROPE_DYNAMIC) { /* scaled for factor x the original length */
    const double lim = (double)g->P * g->rope.factor;
    g->limit = lim > (double)(1L << 40) ? (size_t)1 << 40 : (size_t)lim;
  }
  if ((st = clf_tensor_create(ctx, CLF_F32, 1, (size_t[]){g->Dh / 2}, &g->inv_freq)) != CLF_OK ||
      (st = clf__params_add(ctx, &m->params, g->inv_freq)) != CLF_OK)
    return st;
  g->rope_dev = (size_t)-1;
  return rope_sync(ctx, g, 0);
}

static clf_status llama_load(clf_model *m, const void *dims, const clf__config *c, const clf__weights *w) {
  const llama_dims *d = dims;
  clf_context *ctx = m->ctx;
  clf_status st;
  llama *g = calloc(1, sizeof *g);
  if (!g || !(g->layers = calloc(d->N > 0 && d->N <= 4096 ? (size_t)d->N + 1 : 1, sizeof *g->layers))) {
    free(g);
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "clf_model_load: out of host memory");
  }
  m->impl = g;
  m->destroy = llama_destroy;
  if ((st = llama_sizes(ctx, m->type, d, g)) != CLF_OK || (st = read_window(ctx, m->type, d, c, &g->window)) != CLF_OK)
    return st;
  if (clf_activation_from_name(d->act, &g->act) != CLF_OK)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_model_load: %s hidden_act \"%s\" is not supported", m->type,
                     d->act);
  if ((st = clf__kv_cache_init(ctx, &g->kv, g->n_layers, 0)) != CLF_OK || (st = llama_rope_init(m, d, c)) != CLF_OK)
    return st;
  g->base = !clf__config_has_arch(c, "LlamaForCausalLM") && !clf__config_has_arch(c, "MistralForCausalLM") &&
            !clf__config_has_arch(c, "Qwen2ForCausalLM") && !clf__weights_has(w, "lm_head.weight") &&
            !d->tie;
  m->run = llama_run;
  m->in_names = llama_inputs;
  m->n_in = 3;
  m->out_names = g->base ? llama_outputs + 1 : llama_outputs;
  m->n_out = g->base ? 1 : 2;
  m->vocab = m->in_vocab = g->V;
  m->max_positions = g->limit;
  const char *const probe[] = {"model.embed_tokens.weight", "embed_tokens.weight", NULL};
  const char *found = clf__weights_pick(w, probe);
  if ((st = llama_load_weights(m, d, found && strcmp(found, probe[0]) == 0 ? "model." : "", w)) != CLF_OK) return st;
  if (g->base) return CLF_OK;
  m->gen_begin = llama_gen_begin;
  m->gen_step = llama_gen_step;
  m->gen_reorder = llama_gen_reorder;
  m->gen_end = llama_gen_end;
  return CLF_OK;
}

/* q, k, v fused; o; gate and up fused; down; the head [V, D] */
static void llama_gemms(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l) {
  const llama_dims *d = dims;
  if (d->H <= 0) return;
  const long hkv = d->Hkv ? d->Hkv : d->H, dh = d->Dh ? d->Dh : d->D / d->H;
  clf__gemm_add(l, T, (d->H + 2 * hkv) * dh, d->D, 1, d->N);
  clf__gemm_add(l, T, d->D, d->H * dh, 1, d->N);
  clf__gemm_add(l, T, 2 * d->F, d->D, 1, d->N);
  clf__gemm_add(l, T, d->D, d->F, 1, d->N);
  if (!clf__config_has_arch(c, "LlamaModel") && !clf__config_has_arch(c, "MistralModel") &&
      !clf__config_has_arch(c, "Qwen2Model"))
    clf__gemm_add(l, T, d->V, d->D, 1, 1);
}

/* Outputs: logits and last_hidden_state (*ForCausalLM), last_hidden_state (*Model). */
const clf__family clf__llama_family = {"llama", {"LlamaForCausalLM", "LlamaModel", NULL}, llama_keys,
                                       CLF__ARRAY_LEN(llama_keys), sizeof(llama_dims), llama_load, llama_gemms};
const clf__family clf__mistral_family = {"mistral", {"MistralForCausalLM", "MistralModel", NULL}, mistral_keys,
                                         CLF__ARRAY_LEN(mistral_keys), sizeof(llama_dims), llama_load, llama_gemms};
const clf__family clf__qwen2_family = {"qwen2", {"Qwen2ForCausalLM", "Qwen2Model", NULL}, qwen2_keys,
                                       CLF__ARRAY_LEN(qwen2_keys), sizeof(llama_dims), llama_load, llama_gemms};
