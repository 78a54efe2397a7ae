/* phi3.c - Phi3Model / Phi3ForCausalLM (Phi-3, Phi-3.5 mini): Llama's body
 * (llama.h) over the checkpoint's own fused weights, qkv_proj
 * [H Dh + 2 Hkv Dh, D] and gate_up_proj [2F, D] (gate first), a sliding
 * window where the config sets one, and longrope (or "su") RoPE scaling
 * with its short and long factors, rotary embeddings on the first part of
 * each head only where partial_rotary_factor < 1 (Phi-4-mini).  As
 * transformers 4.53.
 */
#include "family.h"
#include "llama.h"

/* Phi3Config's keys and defaults (head_dim is hidden_size / heads). */
static const clf__config_key phi3_keys[] = {
    CLF__LLAMA_KEYS(4096, 0),
    CLF__OPT(clf__llama_dims, orig_max, "original_max_position_embeddings", INT, 4096),
    CLF__OPT(clf__llama_dims, rotary_frac, "partial_rotary_factor", FLOAT, 1.0),
    CLF__OPT(clf__llama_dims, rope_attn_factor, "rope_attn_factor", FLOAT, 0), /* GGUF's attn_factor (below) */
};

/* layers.N.: the checkpoint's fused q, k, v and gate, up as they are. */
static const clf__weight_row phi3_layer_rows[] = {
    CLF__LIN(clf__layer, self.qkv, "self_attn.qkv_proj", QKV, D, NO), /* [H Dh + 2 Hkv Dh, D] */
    CLF__LIN(clf__layer, self.o, "self_attn.o_proj", D, Q, NO),       /* [D, H Dh] */
    CLF__LIN(clf__layer, mlp.fc1, "mlp.gate_up_proj", 2F, D, NO),     /* [2F, D]: gate | up */
    CLF__LIN(clf__layer, mlp.fc2, "mlp.down_proj", D, F, NO),         /* [D, F] */
    CLF__RMS(clf__layer, ln_self, "input_layernorm"),
    CLF__RMS(clf__layer, ln_mlp, "post_attention_layernorm"),
};

static const clf__llama_kind phi3_kind = {phi3_layer_rows, CLF__ARRAY_LEN(phi3_layer_rows), {"Phi3ForCausalLM"},
                                          {"Phi3Model"}, 0, CLF__LLAMA_WINDOW_IF_SET};

static clf_status phi3_load(clf_model *m, const void *dims, const clf__config *c, const clf__weights *w) {
  return clf__llama_load(m, dims, c, w, &phi3_kind);
}

static void phi3_gemms(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l) {
  clf__llama_gemms(dims, c, T, l, &phi3_kind);
}

/* ---- GGUF: llama.cpp's phi3 (convert_hf_to_gguf's Phi3MiniModel) ------- */

/* The window where the file has one; longrope as the converter writes it:
 * its factors as the tensors rope_factors_long / _short.weight, its
 * attention factor as rope.scaling.attn_factor (read by llama.c). */
static const clf__gguf_key phi3_gguf_keys[] = {
    CLF__GGUF_INT_KEY("%s.context_length", "max_position_embeddings", 0, 1, 1LL << 30),
    CLF__GGUF_INT_KEY("%s.rope.scaling.original_context_length", "original_max_position_embeddings", 0, 1, 1LL << 30),
    CLF__GGUF_INT_KEY("%s.block_count", "num_hidden_layers", 1, 1, 4096),
    CLF__GGUF_INT_KEY("%s.feed_forward_length", "intermediate_size", 1, 1, 1LL << 24),
    CLF__GGUF_INT_KEY("%s.embedding_length", "hidden_size", 1, 1, 1LL << 20),
    CLF__GGUF_NUM_KEY("%s.rope.freq_base", "rope_theta", POSITIVE),
    CLF__GGUF_INT_KEY("%s.attention.head_count", "num_attention_heads", 1, 1, 4096),
    CLF__GGUF_INT_KEY("%s.attention.head_count_kv", "num_key_value_heads", 0, 1, 4096),
    CLF__GGUF_INT_KEY("%s.attention.sliding_window", "sliding_window", 0, 1, 1LL << 30),
    CLF__GGUF_NUM_KEY("%s.attention.layer_norm_rms_epsilon", "rms_norm_eps", EPSILON),
    CLF__GGUF_INT_KEY("%s.vocab_size", "vocab_size", 0, 1, 1LL << 31),
    CLF__GGUF_NUM_KEY("%s.rope.scaling.attn_factor", "rope_attn_factor", POSITIVE),
};
static const clf__gguf_name phi3_gguf_whole[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
    {"rope_factors_long.weight", "model.rope_factors_long.weight"},
    {"rope_factors_short.weight", "model.rope_factors_short.weight"},
};
/* ffn_up is the fused gate_up_proj, as the checkpoint's. */
static const clf__gguf_name phi3_gguf_layer[] = {
    {"attn_norm", "input_layernorm"}, {"attn_qkv", "self_attn.qkv_proj"}, {"attn_output", "self_attn.o_proj"},
    {"ffn_norm", "post_attention_layernorm"}, {"ffn_up", "mlp.gate_up_proj"}, {"ffn_down", "mlp.down_proj"},
};
static const clf__gguf_arch phi3_gguf = {"phi3", "Phi3ForCausalLM", phi3_gguf_keys, CLF__ARRAY_LEN(phi3_gguf_keys),
                                         CLF__GGUF_ROPE | CLF__GGUF_HEAD_DIM | CLF__GGUF_PARTIAL, NULL, "model.", phi3_gguf_whole,
                                         CLF__ARRAY_LEN(phi3_gguf_whole), "model.layers", phi3_gguf_layer,
                                         CLF__ARRAY_LEN(phi3_gguf_layer)};

/* Outputs: logits and last_hidden_state (Phi3ForCausalLM), last_hidden_state (Phi3Model). */
const clf__family clf__phi3_family = {"phi3", {"Phi3ForCausalLM", "Phi3Model", NULL}, phi3_keys,
                                      CLF__ARRAY_LEN(phi3_keys), sizeof(clf__llama_dims), phi3_load, phi3_gemms,
                                      &phi3_gguf};
