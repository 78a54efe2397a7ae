/* gemma2.c - Gemma2ForCausalLM / Gemma2Model (GGUF architecture gemma2):
 * Gemma 3's body (llama.h) without its per-head q/k norms and with one
 * RoPE base: embeddings times sqrt(hidden_size), RMSNorm gains 1 + weight,
 * four norms a layer, a GELU(tanh)-gated MLP, the attention scale
 * query_pre_attn_scalar^-1/2, sliding-window layers between full ones
 * (every other one by default), and the attention scores and the final
 * logits soft-capped (attn_logit_softcapping, final_logit_softcapping).
 * As transformers 4.53.
 */
#include "family.h"
#include "llama.h"

#include <cjson/cJSON.h>

/* Gemma2Config's keys and defaults; the two caps' (50, 30) where the key is
 * absent are set in gemma2_load, as a null one is none. */
static const clf__config_key gemma2_keys[] = {CLF__GEMMA_KEYS(256000, 8192, 10000.0, 2)};

/* The weights of layers.N.: Gemma's (no per-head norms). */
static const clf__weight_row gemma2_layer_rows[] = {CLF__GEMMA_ROWS};

static const clf__llama_kind gemma2_kind = {gemma2_layer_rows, CLF__ARRAY_LEN(gemma2_layer_rows),
                                            {"Gemma2ForCausalLM"}, {"Gemma2Model"}, 0, CLF__LLAMA_NO_WINDOW,
                                            .scale_embed = 1, .norm_plus_one = 1, .layer_windows = 1,
                                            .act_key = "hidden_activation"};

/* A cap absent from config.json is Gemma2Config's default; null is none. */
static clf_status gemma2_load(clf_model *m, const void *dims, const clf__config *c, const clf__weights *w) {
  clf__llama_dims d = *(const clf__llama_dims *)dims;
  const cJSON *json = clf__config_json(c);
  if (!cJSON_GetObjectItemCaseSensitive(json, "attn_logit_softcapping")) d.attn_softcap = 50.0;
  if (!cJSON_GetObjectItemCaseSensitive(json, "final_logit_softcapping")) d.softcap = 30.0;
  return clf__llama_load(m, &d, c, w, &gemma2_kind);
}

static void gemma2_gemms(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l) {
  clf__llama_gemms(dims, c, T, l, &gemma2_kind);
}

/* ---- GGUF: llama.cpp's gemma2 (convert_hf_to_gguf's Gemma2Model) -------- */

/* Its metadata: Gemma's (no rope.freq_base in the converter's files: the
 * config's default 1e4, llama.cpp's too) and the attention cap (absent:
 * llama.cpp's 50, as gemma2_load's). */
static const clf__gguf_key gemma2_gguf_keys[] = {
    CLF__GEMMA_GGUF_KEYS,
    CLF__GGUF_NUM_KEY("%s.attn_logit_softcapping", "attn_logit_softcapping", POSITIVE),
};
static const clf__gguf_name gemma2_gguf_whole[] = {CLF__GEMMA_GGUF_WHOLE};
static const clf__gguf_name gemma2_gguf_layer[] = {CLF__GEMMA_GGUF_LAYER};
static const clf__gguf_arch gemma2_gguf = {
    "gemma2", "Gemma2ForCausalLM", gemma2_gguf_keys, CLF__ARRAY_LEN(gemma2_gguf_keys), CLF__GGUF_ROPE,
    "{\"hidden_activation\": \"gelu_pytorch_tanh\"}", "model.", gemma2_gguf_whole, CLF__ARRAY_LEN(gemma2_gguf_whole),
    "model.layers", gemma2_gguf_layer, CLF__ARRAY_LEN(gemma2_gguf_layer)};

/* Outputs: logits and last_hidden_state (Gemma2ForCausalLM), last_hidden_state (Gemma2Model). */
const clf__family clf__gemma2_family = {"gemma2", {"Gemma2ForCausalLM", "Gemma2Model", NULL}, gemma2_keys,
                                        CLF__ARRAY_LEN(gemma2_keys), sizeof(clf__llama_dims), gemma2_load,
                                        gemma2_gemms, &gemma2_gguf};
