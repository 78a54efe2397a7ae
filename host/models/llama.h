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
   * attn_logit_softcapping (0: none; the attention scores' cap), sliding_window and
   * sliding_window_pattern (layers_types' default: every pattern-th layer
   * full, the others windowed) */
  double attn_scalar, local_theta, softcap, attn_softcap;
  long window, window_pattern;
  long max_window_layers; /* Qwen3: the first layers without the window */
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
   * layer_types (or sliding_window_pattern); the windowed layers' own RoPE
   * base, rope_local_base_freq (Gemma 3; Gemma 2 has one base) */
  int scale_embed, norm_plus_one, layer_windows, local_rope;
  /* Qwen3: the window (read by `window`'s rule) only in the layers
   * layer_types names, else those from max_window_layers on */
  int window_from_layer;
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

/* Gemma's config keys (Gemma2Config's and Gemma3TextConfig's), with the
 * defaults they differ in: vocab_size, max_position_embeddings, rope_theta
 * and sliding_window_pattern (Gemma 2 has no such key: 2 is its
 * layer_types' default, every other layer windowed, llama.cpp's pattern 2) */
#define CLF__GEMMA_KEYS(V_default, P_default, theta_default, pattern_default)                                    \
  CLF__OPT(clf__llama_dims, V, "vocab_size", INT, V_default), CLF__REQ(clf__llama_dims, D, "hidden_size", INT),   \
      CLF__REQ(clf__llama_dims, F, "intermediate_size", INT),                                                   \
      CLF__REQ(clf__llama_dims, H, "num_attention_heads", INT),                                                 \
      CLF__REQ(clf__llama_dims, N, "num_hidden_layers", INT),                                                   \
      CLF__OPT(clf__llama_dims, Hkv, "num_key_value_heads", INT, 4),                                            \
      CLF__OPT(clf__llama_dims, Dh, "head_dim", INT, 256),                                                      \
      CLF__OPT(clf__llama_dims, P, "max_position_embeddings", INT, P_default),                                  \
      CLF__OPT(clf__llama_dims, eps, "rms_norm_eps", FLOAT, 1e-6),                                              \
      CLF__OPT(clf__llama_dims, theta, "rope_theta", FLOAT, theta_default),                                     \
      CLF__OPT_STR(clf__llama_dims, act, "hidden_activation", "gelu_pytorch_tanh"),                             \
      CLF__OPT(clf__llama_dims, tie, "tie_word_embeddings", BOOL, 1),                                           \
      CLF__OPT(clf__llama_dims, attn_bias, "attention_bias", BOOL, 0),                                          \
      CLF__OPT(clf__llama_dims, attn_scalar, "query_pre_attn_scalar", FLOAT, 256),                              \
      CLF__OPT(clf__llama_dims, window, "sliding_window", INT, 4096),                                           \
      CLF__OPT(clf__llama_dims, window_pattern, "sliding_window_pattern", INT, pattern_default),                \
      CLF__OPT(clf__llama_dims, softcap, "final_logit_softcapping", FLOAT, 0),                                  \
      CLF__OPT(clf__llama_dims, attn_softcap, "attn_logit_softcapping", FLOAT, 0)

/* Gemma's GGUF rows (llama.cpp's gemma2 and gemma3, convert_hf_to_gguf's
 * Gemma2Model and Gemma3Model): the metadata both have (head_dim from
 * attention.key_length, CLF__GGUF_ROPE, which llama.cpp also takes for
 * query_pre_attn_scalar but for the 27B models: not read here), and the
 * tensors, every norm stored as 1 + weight. */
#define CLF__GEMMA_GGUF_KEYS                                                                                   \
  CLF__GGUF_INT_KEY("%s.context_length", "max_position_embeddings", 0, 1, 1LL << 30),                         \
      CLF__GGUF_INT_KEY("%s.block_count", "num_hidden_layers", 1, 1, 4096),                                   \
      CLF__GGUF_INT_KEY("%s.feed_forward_length", "intermediate_size", 1, 1, 1LL << 24),                      \
      CLF__GGUF_INT_KEY("%s.embedding_length", "hidden_size", 1, 1, 1LL << 20),                               \
      CLF__GGUF_NUM_KEY("%s.rope.freq_base", "rope_theta", POSITIVE),                                         \
      CLF__GGUF_INT_KEY("%s.attention.head_count", "num_attention_heads", 1, 1, 4096),                        \
      CLF__GGUF_INT_KEY("%s.attention.head_count_kv", "num_key_value_heads", 0, 1, 4096),                     \
      CLF__GGUF_INT_KEY("%s.attention.key_length", "query_pre_attn_scalar", 1, 1, 4096),                      \
      CLF__GGUF_INT_KEY("%s.attention.sliding_window", "sliding_window", 1, 1, 1LL << 30),                    \
      CLF__GGUF_NUM_KEY("%s.attention.layer_norm_rms_epsilon", "rms_norm_eps", EPSILON),                      \
      CLF__GGUF_NUM_KEY("%s.final_logit_softcapping", "final_logit_softcapping", POSITIVE),                   \
      CLF__GGUF_INT_KEY("%s.vocab_size", "vocab_size", 0, 1, 1LL << 31)
#define CLF__GEMMA_GGUF_WHOLE                                                                                  \
  {"token_embd.weight", "model.embed_tokens.weight"},                                                          \
      {"output_norm.weight", "model.norm.weight", CLF__GGUF_MINUS_ONE}, {"output.weight", "lm_head.weight"}
#define CLF__GEMMA_GGUF_LAYER                                                                                  \
  {"attn_norm", "input_layernorm", CLF__GGUF_MINUS_ONE},                                                       \
      {"post_attention_norm", "post_attention_layernorm", CLF__GGUF_MINUS_ONE},                                \
      {"ffn_norm", "pre_feedforward_layernorm", CLF__GGUF_MINUS_ONE},                                          \
      {"post_ffw_norm", "post_feedforward_layernorm", CLF__GGUF_MINUS_ONE}, {"attn_q", "self_attn.q_proj"},    \
      {"attn_k", "self_attn.k_proj"}, {"attn_v", "self_attn.v_proj"}, {"attn_output", "self_attn.o_proj"},     \
      {"ffn_gate", "mlp.gate_proj"}, {"ffn_up", "mlp.up_proj"}, {"ffn_down", "mlp.down_proj"}
/* Gemma's layer rows: q, k, v and gate, up fused; the norms around each
 * branch (Gemma 3 adds its per-head q/k norms). */
#define CLF__GEMMA_ROWS                                                                                        \
  CLF__QKV(clf__layer, self, "self_attn.%s_proj", QKV, "q", "k", "v"), /* [H Dh | 2 Hkv Dh, D] */               \
      CLF__LIN(clf__layer, self.o, "self_attn.o_proj", D, Q, ATTN),     /* [D, H Dh] */                         \
      CLF__FUSE(clf__layer, mlp.fc1, "mlp.%s_proj", D, MLP, CLF__PART("gate", F), CLF__PART("up", F)),         \
      CLF__LIN(clf__layer, mlp.fc2, "mlp.down_proj", D, F, MLP), /* [D, F] */                                   \
      CLF__RMS(clf__layer, ln_self, "input_layernorm"), CLF__RMS(clf__layer, post_self, "post_attention_layernorm"), \
      CLF__RMS(clf__layer, ln_mlp, "pre_feedforward_layernorm"),                                                \
      CLF__RMS(clf__layer, post_mlp, "post_feedforward_layernorm")

#endif /* CLF_LLAMA_H */
