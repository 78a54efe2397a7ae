/* llama.h - the Llama family (llama.c) as a base other rotary decoders
 * are made from (Qwen3: its rows and names added): the config keys, the
 * loader over a family's layer rows, the GGUF names; and the rotary
 * position embeddings, the inverse frequencies of each rope_scaling type,
 * computed on the host in float32 in the order of transformers 4.46's
 * ROPE_INIT_FUNCTIONS.
 */
#ifndef CLF_LLAMA_H
#define CLF_LLAMA_H

#include <stddef.h>

#include "family.h"
#include "rows.h"

typedef enum { CLF__ROPE_DEFAULT, CLF__ROPE_LINEAR, CLF__ROPE_DYNAMIC, CLF__ROPE_LLAMA3, CLF__ROPE_LONGROPE } clf__rope_type;

typedef struct clf__rope {
  clf__rope_type type;
  size_t dim;                   /* the rotated dims (head_dim, or less): inv_freq has dim / 2 entries */
  double theta;                 /* rope_theta */
  double factor, low, high;     /* rope_scaling's factor, low/high_freq_factor */
  size_t orig_max;              /* llama3: original_max_position_embeddings */
  size_t max_pos;               /* max_position_embeddings (dynamic: the original length) */
  /* A GGUF file's rope_freqs.weight (llama.cpp's Llama 3.1 conversion): each
   * frequency divided by its factor, as llama.cpp's rope does; 0: none */
  int has_factors;
  float factors[512];
  /* longrope (Phi-3's "longrope" / "su"): each frequency divided by its
   * short factor, or past orig_max positions its long one; cos and sin
   * times attn_scale */
  float short_factors[512], long_factors[512];
  float attn_scale;
} clf__rope;

/* inv_freq [dim / 2] for a sequence of seq_len positions: seq_len only
 * matters for dynamic (its NTK base for seq_len > max_pos; 0 or less: the
 * initial frequencies) and longrope (its long factors past orig_max). */
void clf__rope_inv_freq(const clf__rope *r, size_t seq_len, float *out);

/* config.json of a Llama-like decoder, read by the family's key table. */
typedef struct clf__llama_dims {
  long V, D, F, H, Hkv, Dh, N, P;
  double eps, theta;
  const char *act;
  int tie, attn_bias, mlp_bias, use_window;
  long orig_max;       /* original_max_position_embeddings (Phi-3: longrope's switch), 0: none */
  double rotary_frac;  /* partial_rotary_factor (Phi-3), 0: 1 */
  double rope_attn_factor; /* a GGUF file's rope.scaling.attn_factor (longrope's), 0: none */
  /* Gemma's (0 where a family has no such key): query_pre_attn_scalar
   * (the attention scale its -1/2 power; 0: head_dim's), the sliding-window
   * layers' rope_local_base_freq, final_logit_softcapping and
   * attn_logit_softcapping (0: none), sliding_window and
   * sliding_window_pattern (layers_types' default: every pattern-th layer
   * full, the others windowed) */
  double attn_scalar, local_theta, softcap, attn_softcap;
  long window, window_pattern;
} clf__llama_dims;

/* The keys every one has; P, Hkv: the config class's default when absent */
#define CLF__LLAMA_KEYS(P_default, Hkv_default)                                                               \
  CLF__REQ(clf__llama_dims, V, "vocab_size", INT), CLF__REQ(clf__llama_dims, D, "hidden_size", INT),            \
      CLF__REQ(clf__llama_dims, F, "intermediate_size", INT),                                                \
      CLF__REQ(clf__llama_dims, H, "num_attention_heads", INT),                                              \
      CLF__REQ(clf__llama_dims, N, "num_hidden_layers", INT),                                                \
      CLF__OPT(clf__llama_dims, Hkv, "num_key_value_heads", INT, Hkv_default), /* 0: num_attention_heads */   \
      CLF__OPT(clf__llama_dims, P, "max_position_embeddings", INT, P_default),                               \
      CLF__OPT(clf__llama_dims, eps, "rms_norm_eps", FLOAT, 1e-6),                                           \
      CLF__OPT(clf__llama_dims, theta, "rope_theta", FLOAT, 10000.0),                                        \
      CLF__OPT_STR(clf__llama_dims, act, "hidden_act", "silu"),                                              \
      CLF__OPT(clf__llama_dims, tie, "tie_word_embeddings", BOOL, 0)

/* The weights of layers.N.: q, k, v fused (GQA: k, v Hkv Dh wide), gate
 * and up fused; biases as config.json says (Qwen2: q, k, v always). */
#define CLF__LLAMA_ROWS                                                                                    \
  CLF__QKV(clf__layer, self, "self_attn.%s_proj", QKV, "q", "k", "v"), /* [H Dh | 2 Hkv Dh, D] */           \
      CLF__LIN(clf__layer, self.o, "self_attn.o_proj", D, Q, ATTN),     /* [D, H Dh] */                     \
      CLF__FUSE(clf__layer, mlp.fc1, "mlp.%s_proj", D, MLP, CLF__PART("gate", F), CLF__PART("up", F)),     \
      CLF__LIN(clf__layer, mlp.fc2, "mlp.down_proj", D, F, MLP), /* [D, F] */                               \
      CLF__RMS(clf__layer, ln_self, "input_layernorm"), CLF__RMS(clf__layer, ln_mlp, "post_attention_layernorm")

/* Where config.json's sliding_window applies: never (Llama), always
 * (Mistral: absent is 4096), only with use_sliding_window (Qwen2), where
 * set (Phi-3: absent is none). */
enum { CLF__LLAMA_NO_WINDOW, CLF__LLAMA_WINDOW, CLF__LLAMA_WINDOW_IF_USED, CLF__LLAMA_WINDOW_IF_SET };
/* What a Llama-like family loads with: its layer rows, the architectures
 * with an LM head and those without (the GEMM list), whether q, k and v
 * have biases whatever attention_bias says, and its window rule. */
typedef struct clf__llama_kind {
  const clf__weight_row *rows;
  size_t n_rows;
  const char *causal[4], *base[4];
  int qkv_bias, window;
  /* Gemma: embeddings times sqrt(hidden_size); every RMSNorm's gain
   * 1 + weight; sliding-window and full layers by config.json's
   * layer_types (or sliding_window_pattern) */
  int scale_embed, norm_plus_one, layer_windows;
  const char *act_key; /* the activation's config key, for messages (NULL: hidden_act) */
} clf__llama_kind;
/* A family's load and gemms (clf__family) over its kind. */
clf_status clf__llama_load(clf_model *m, const void *dims, const clf__config *c, const clf__weights *w,
                           const clf__llama_kind *k);
void clf__llama_gemms(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l, const clf__llama_kind *k);

/* GGUF: the metadata keys and the whole-model tensor names of llama.cpp's
 * llama-like architectures, and a layer's names (qk: llama's and
 * mistral's q and k rows, which convert_hf_to_gguf permutes per head). */
#define CLF__LLAMA_GGUF_N_KEYS 9
#define CLF__LLAMA_GGUF_N_WHOLE 4
extern const clf__gguf_key clf__llama_gguf_keys[CLF__LLAMA_GGUF_N_KEYS];
extern const clf__gguf_name clf__llama_gguf_whole[CLF__LLAMA_GGUF_N_WHOLE];
#define CLF__LLAMA_GGUF_LAYER(qk)                                                                            \
  {"attn_norm", "input_layernorm"}, {"ffn_norm", "post_attention_layernorm"},                                \
      {"attn_q", "self_attn.q_proj", (qk) ? CLF__GGUF_PERMUTE_Q : 0},                                        \
      {"attn_k", "self_attn.k_proj", (qk) ? CLF__GGUF_PERMUTE_K : 0}, {"attn_v", "self_attn.v_proj"},        \
      {"attn_output", "self_attn.o_proj"}, {"ffn_gate", "mlp.gate_proj"}, {"ffn_up", "mlp.up_proj"},         \
      {"ffn_down", "mlp.down_proj"}
/* An architecture of these keys and names with its own layer names. */
#define CLF__LLAMA_GGUF(arch, cls, config, fixed, layer)                                                       \
  {arch, cls, clf__llama_gguf_keys, CLF__LLAMA_GGUF_N_KEYS, CLF__GGUF_ROPE | (config), fixed, "model.",       \
   clf__llama_gguf_whole, CLF__LLAMA_GGUF_N_WHOLE, "model.layers", layer, CLF__ARRAY_LEN(layer)}

#endif /* CLF_LLAMA_H */
