/* phi3.c - Phi3Model / Phi3ForCausalLM (Phi-3, Phi-3.5 mini): Llama's body
 * (llama.h) over the checkpoint's own fused weights, qkv_proj
 * [H Dh + 2 Hkv Dh, D] and gate_up_proj [2F, D] (gate first), a sliding
 * window where the config sets one, and longrope (or "su") RoPE scaling
 * with its short and long factors.  As transformers 4.53.
 */
#include "family.h"
#include "llama.h"

/* Phi3Config's keys and defaults (head_dim is hidden_size / heads). */
static const clf__config_key phi3_keys[] = {
    CLF__LLAMA_KEYS(4096, 0),
    CLF__OPT(clf__llama_dims, orig_max, "original_max_position_embeddings", INT, 4096),
    CLF__OPT(clf__llama_dims, rotary_frac, "partial_rotary_factor", FLOAT, 1.0),
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
  const clf__llama_dims *d = dims;
  if (d->rotary_frac != 1.0)
    return clf__fail(m->ctx, CLF_E_UNSUPPORTED, "clf_model_load: phi3 partial_rotary_factor %g: rotating part of "
                     "each head (Phi-4-mini) is not supported", d->rotary_frac);
  return clf__llama_load(m, dims, c, w, &phi3_kind);
}

static void phi3_gemms(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l) {
  clf__llama_gemms(dims, c, T, l, &phi3_kind);
}

/* Outputs: logits and last_hidden_state (Phi3ForCausalLM), last_hidden_state (Phi3Model). */
const clf__family clf__phi3_family = {"phi3", {"Phi3ForCausalLM", "Phi3Model", NULL}, phi3_keys,
                                      CLF__ARRAY_LEN(phi3_keys), sizeof(clf__llama_dims), phi3_load, phi3_gemms,
                                      NULL};
