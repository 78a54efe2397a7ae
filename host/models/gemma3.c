/* gemma3.c - Gemma3ForCausalLM (config model_type gemma3_text; GGUF
 * architecture gemma3): Llama's body (llama.h) with the embeddings times
 * sqrt(hidden_size), every RMSNorm's gain 1 + weight, four norms a layer
 * (before and after attention and the MLP), per-head q/k norms, a
 * GELU(tanh)-gated MLP, the attention scale query_pre_attn_scalar^-1/2,
 * sliding-window layers with their own RoPE base between full ones, and
 * final logit soft-capping where the config sets it.  As transformers 4.53.
 */
#include "family.h"
#include "llama.h"

/* Gemma3TextConfig's keys and defaults. */
static const clf__config_key gemma3_keys[] = {
    CLF__OPT(clf__llama_dims, V, "vocab_size", INT, 262208),
    CLF__REQ(clf__llama_dims, D, "hidden_size", INT),
    CLF__REQ(clf__llama_dims, F, "intermediate_size", INT),
    CLF__REQ(clf__llama_dims, H, "num_attention_heads", INT),
    CLF__REQ(clf__llama_dims, N, "num_hidden_layers", INT),
    CLF__OPT(clf__llama_dims, Hkv, "num_key_value_heads", INT, 4),
    CLF__OPT(clf__llama_dims, Dh, "head_dim", INT, 256),
    CLF__OPT(clf__llama_dims, P, "max_position_embeddings", INT, 131072),
    CLF__OPT(clf__llama_dims, eps, "rms_norm_eps", FLOAT, 1e-6),
    CLF__OPT(clf__llama_dims, theta, "rope_theta", FLOAT, 1000000.0),
    CLF__OPT(clf__llama_dims, local_theta, "rope_local_base_freq", FLOAT, 10000.0),
    CLF__OPT_STR(clf__llama_dims, act, "hidden_activation", "gelu_pytorch_tanh"),
    CLF__OPT(clf__llama_dims, tie, "tie_word_embeddings", BOOL, 1),
    CLF__OPT(clf__llama_dims, attn_bias, "attention_bias", BOOL, 0),
    CLF__OPT(clf__llama_dims, attn_scalar, "query_pre_attn_scalar", FLOAT, 256),
    CLF__OPT(clf__llama_dims, window, "sliding_window", INT, 4096),
    CLF__OPT(clf__llama_dims, window_pattern, "sliding_window_pattern", INT, 6),
    CLF__OPT(clf__llama_dims, softcap, "final_logit_softcapping", FLOAT, 0),
    CLF__OPT(clf__llama_dims, attn_softcap, "attn_logit_softcapping", FLOAT, 0),
};

/* The weights of layers.N.: q, k, v and gate, up fused; the norms around
 * each branch; the per-head norms. */
static const clf__weight_row gemma3_layer_rows[] = {
    CLF__QKV(clf__layer, self, "self_attn.%s_proj", QKV, "q", "k", "v"), /* [H Dh | 2 Hkv Dh, D] */
    CLF__LIN(clf__layer, self.o, "self_attn.o_proj", D, Q, ATTN),         /* [D, H Dh] */
    CLF__FUSE(clf__layer, mlp.fc1, "mlp.%s_proj", D, MLP, CLF__PART("gate", F), CLF__PART("up", F)), /* [2F, D] */
    CLF__LIN(clf__layer, mlp.fc2, "mlp.down_proj", D, F, MLP),            /* [D, F] */
    CLF__RMS(clf__layer, ln_self, "input_layernorm"),
    CLF__RMS(clf__layer, post_self, "post_attention_layernorm"),
    CLF__RMS(clf__layer, ln_mlp, "pre_feedforward_layernorm"),
    CLF__RMS(clf__layer, post_mlp, "post_feedforward_layernorm"),
    CLF__HEAD_RMS(clf__layer, self.q_norm, "self_attn.q_norm"), /* [Dh] */
    CLF__HEAD_RMS(clf__layer, self.k_norm, "self_attn.k_norm"), /* [Dh] */
};

static const clf__llama_kind gemma3_kind = {gemma3_layer_rows, CLF__ARRAY_LEN(gemma3_layer_rows),
                                            {"Gemma3ForCausalLM"}, {"Gemma3TextModel"}, 0, CLF__LLAMA_NO_WINDOW,
                                            .scale_embed = 1, .norm_plus_one = 1, .layer_windows = 1,
                                            .act_key = "hidden_activation"};

static clf_status gemma3_load(clf_model *m, const void *dims, const clf__config *c, const clf__weights *w) {
  return clf__llama_load(m, dims, c, w, &gemma3_kind);
}

static void gemma3_gemms(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l) {
  clf__llama_gemms(dims, c, T, l, &gemma3_kind);
}

/* ---- GGUF: llama.cpp's gemma3 (convert_hf_to_gguf's Gemma3Model) -------- */

/* Its metadata: head_dim from attention.key_length (CLF__GGUF_ROPE), which
 * llama.cpp also takes for query_pre_attn_scalar (but for the 27B model,
 * whose hidden / heads it computes instead: not read here); the window
 * pattern and the local base are llama.cpp's constants for gemma3. */
static const clf__gguf_key gemma3_gguf_keys[] = {
    CLF__GGUF_INT_KEY("%s.context_length", "max_position_embeddings", 0, 1, 1LL << 30),
    CLF__GGUF_INT_KEY("%s.block_count", "num_hidden_layers", 1, 1, 4096),
    CLF__GGUF_INT_KEY("%s.feed_forward_length", "intermediate_size", 1, 1, 1LL << 24),
    CLF__GGUF_INT_KEY("%s.embedding_length", "hidden_size", 1, 1, 1LL << 20),
    CLF__GGUF_NUM_KEY("%s.rope.freq_base", "rope_theta", POSITIVE),
    CLF__GGUF_INT_KEY("%s.attention.head_count", "num_attention_heads", 1, 1, 4096),
    CLF__GGUF_INT_KEY("%s.attention.head_count_kv", "num_key_value_heads", 0, 1, 4096),
    CLF__GGUF_INT_KEY("%s.attention.key_length", "query_pre_attn_scalar", 1, 1, 4096),
    CLF__GGUF_INT_KEY("%s.attention.sliding_window", "sliding_window", 1, 1, 1LL << 30),
    CLF__GGUF_NUM_KEY("%s.attention.layer_norm_rms_epsilon", "rms_norm_eps", EPSILON),
    CLF__GGUF_NUM_KEY("%s.final_logit_softcapping", "final_logit_softcapping", POSITIVE),
    CLF__GGUF_INT_KEY("%s.vocab_size", "vocab_size", 0, 1, 1LL << 31),
};

/* The converter stores every norm as 1 + weight. */
static const clf__gguf_name gemma3_gguf_whole[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight", CLF__GGUF_MINUS_ONE},
    {"output.weight", "lm_head.weight"},
};
static const clf__gguf_name gemma3_gguf_layer[] = {
    {"attn_norm", "input_layernorm", CLF__GGUF_MINUS_ONE},
    {"post_attention_norm", "post_attention_layernorm", CLF__GGUF_MINUS_ONE},
    {"ffn_norm", "pre_feedforward_layernorm", CLF__GGUF_MINUS_ONE},
    {"post_ffw_norm", "post_feedforward_layernorm", CLF__GGUF_MINUS_ONE},
    {"attn_q_norm", "self_attn.q_norm", CLF__GGUF_MINUS_ONE},
    {"attn_k_norm", "self_attn.k_norm", CLF__GGUF_MINUS_ONE},
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
};
static const clf__gguf_arch gemma3_gguf = {
    "gemma3", "Gemma3ForCausalLM", gemma3_gguf_keys, CLF__ARRAY_LEN(gemma3_gguf_keys), CLF__GGUF_ROPE,
    "{\"sliding_window_pattern\": 6, \"rope_local_base_freq\": 10000.0, \"hidden_activation\": \"gelu_pytorch_tanh\"}",
    "model.", gemma3_gguf_whole, CLF__ARRAY_LEN(gemma3_gguf_whole), "model.layers", gemma3_gguf_layer,
    CLF__ARRAY_LEN(gemma3_gguf_layer)};

/* Outputs: logits and last_hidden_state (Gemma3ForCausalLM), last_hidden_state
 * (Gemma3TextModel).  A Hugging Face checkpoint's config says gemma3_text; a
 * GGUF file's architecture is gemma3 (the multimodal Gemma3 config, whose
 * text sits under text_config, is not read). */
const clf__family clf__gemma3_text_family = {"gemma3_text", {"Gemma3ForCausalLM", "Gemma3TextModel", NULL},
                                             gemma3_keys, CLF__ARRAY_LEN(gemma3_keys), sizeof(clf__llama_dims),
                                             gemma3_load, gemma3_gemms, NULL};
const clf__family clf__gemma3_family = {"gemma3", {"Gemma3ForCausalLM", NULL}, gemma3_keys,
                                        CLF__ARRAY_LEN(gemma3_keys), sizeof(clf__llama_dims), gemma3_load,
                                        gemma3_gemms, &gemma3_gguf};
