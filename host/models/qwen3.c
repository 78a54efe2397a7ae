/* qwen3.c - Qwen3Model / Qwen3ForCausalLM: Llama's body (llama.h) with
 * each query and key head RMS-normed before the rotary step (q_norm,
 * k_norm [head_dim]), head_dim from the config, no q, k, v biases unless
 * attention_bias.  As transformers 4.53; GGUF architecture "qwen3" as
 * llama.cpp names it.
 */
#include "family.h"
#include "llama.h"

/* Qwen3Config: head_dim (128 when absent), attention_bias, and with
 * use_sliding_window a window of sliding_window positions (absent: 4096,
 * null: none) in the layers layer_types names "sliding_attention", by
 * default those from max_window_layers (28) on, as transformers 4.53
 * applies it. */
static const clf__config_key qwen3_keys[] = {
    CLF__LLAMA_KEYS(32768, 32),
    CLF__OPT(clf__llama_dims, Dh, "head_dim", INT, 128),
    CLF__OPT(clf__llama_dims, attn_bias, "attention_bias", BOOL, 0),
    CLF__OPT(clf__llama_dims, use_window, "use_sliding_window", BOOL, 0),
    CLF__OPT(clf__llama_dims, max_window_layers, "max_window_layers", INT, 28),
};

/* Llama's rows and the per-head norms of self_attn. */
static const clf__weight_row qwen3_layer_rows[] = {
    CLF__LLAMA_ROWS,
    CLF__HEAD_RMS(clf__layer, self.q_norm, "self_attn.q_norm"), /* [Dh] */
    CLF__HEAD_RMS(clf__layer, self.k_norm, "self_attn.k_norm"), /* [Dh] */
};

static const clf__llama_kind qwen3_kind = {qwen3_layer_rows, CLF__ARRAY_LEN(qwen3_layer_rows),
                                           {"Qwen3ForCausalLM"}, {"Qwen3Model"}, 0, CLF__LLAMA_WINDOW_IF_USED,
                                           .window_from_layer = 1};

static clf_status qwen3_load(clf_model *m, const void *dims, const clf__config *c, const clf__weights *w) {
  return clf__llama_load(m, dims, c, w, &qwen3_kind);
}

static void qwen3_gemms(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l) {
  clf__llama_gemms(dims, c, T, l, &qwen3_kind);
}

/* llama.cpp's qwen3: Qwen2's names (q and k not permuted) and the head
 * norms; head_dim from attention.key_length. */
static const clf__gguf_name qwen3_gguf_layer[] = {
    CLF__LLAMA_GGUF_LAYER(0),
    {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},
};
static const clf__gguf_arch qwen3_gguf = CLF__LLAMA_GGUF("qwen3", "Qwen3ForCausalLM", 0, NULL, qwen3_gguf_layer);

/* Outputs: logits and last_hidden_state (Qwen3ForCausalLM), last_hidden_state (Qwen3Model). */
const clf__family clf__qwen3_family = {"qwen3", {"Qwen3ForCausalLM", "Qwen3Model", NULL}, qwen3_keys,
                                       CLF__ARRAY_LEN(qwen3_keys), sizeof(clf__llama_dims), qwen3_load, qwen3_gemms,
                                       &qwen3_gguf};
