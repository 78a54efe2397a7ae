/* gemma3.c - Gemma3ForCausalLM (config model_type gemma3_text; GGUF
 * architecture gemma3): Llama's body (llama.h) with the embeddings times
 * sqrt(hidden_size), every RMSNorm's gain 1 + weight, four norms a layer
 * (before and after attention and the MLP), per-head q/k norms, a
 * GELU(tanh)-gated MLP, the attention scale query_pre_attn_scalar^-1/2,
 * sliding-window layers with their own RoPE base between full ones, and
 * attention and final logit soft-capping where the config sets them.  As
 * transformers 4.53.
 */
#include "family.h"
#include "llama.h"

/* Gemma3TextConfig's keys and defaults. */
static const clf__config_key gemma3_keys[] = {
    CLF__GEMMA_KEYS(262208, 131072, 1000000.0, 6),
    CLF__OPT(clf__llama_dims, local_theta, "rope_local_base_freq", FLOAT, 10000.0),
};

/* The weights of layers.N.: Gemma's, and the per-head norms. */
static const clf__weight_row gemma3_layer_rows[] = {
    CLF__GEMMA_ROWS,
    CLF__HEAD_RMS(clf__layer, self.q_norm, "self_attn.q_norm"), /* [Dh] */
    CLF__HEAD_RMS(clf__layer, self.k_norm, "self_attn.k_norm"), /* [Dh] */
};

static const clf__llama_kind gemma3_kind = {gemma3_layer_rows, CLF__ARRAY_LEN(gemma3_layer_rows),
                                            {"Gemma3ForCausalLM"}, {"Gemma3TextModel"}, 0, CLF__LLAMA_NO_WINDOW,
                                            .scale_embed = 1, .norm_plus_one = 1, .layer_windows = 1,
                                            .local_rope = 1, .act_key = "hidden_activation"};

static clf_status gemma3_load(clf_model *m, const void *dims, const clf__config *c, const clf__weights *w) {
  return clf__llama_load(m, dims, c, w, &gemma3_kind);
}

static void gemma3_gemms(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l) {
  clf__llama_gemms(dims, c, T, l, &gemma3_kind);
}

/* ---- GGUF: llama.cpp's gemma3 (convert_hf_to_gguf's Gemma3Model) -------- */

/* Its metadata: Gemma's; the window pattern and the local base are
 * llama.cpp's constants for gemma3. */
static const clf__gguf_key gemma3_gguf_keys[] = {CLF__GEMMA_GGUF_KEYS};
static const clf__gguf_name gemma3_gguf_whole[] = {CLF__GEMMA_GGUF_WHOLE};
static const clf__gguf_name gemma3_gguf_layer[] = {
    CLF__GEMMA_GGUF_LAYER,
    {"attn_q_norm", "self_attn.q_norm", CLF__GGUF_MINUS_ONE},
    {"attn_k_norm", "self_attn.k_norm", CLF__GGUF_MINUS_ONE},
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
