/* nomic_bert.c - llama.cpp's nomic-bert (nomic-embed-text v1 / v1.5 as
 * convert_hf_to_gguf.py's NomicBertModel writes them): BERT's post-LN
 * encoder (bert.h) without a position table, q and k rotated (rotate-half)
 * at rope.freq_base, the checkpoint's fused Wqkv, a SwiGLU MLP
 * (fc2(silu(fc12(x)) * fc11(x))), no biases but the LayerNorms'.  Token
 * type 0 unless token_type_ids say otherwise, as llama.cpp always takes it.
 * Names are the NomicBertModel checkpoint's and its config's.
 */
#include "bert.h"

#include <cjson/cJSON.h>

/* NomicBertConfig's names for BERT's sizes; the defaults llama.cpp takes
 * where a GGUF file has no key (rope.freq_base 10000). */
static const clf__config_key nomic_keys[] = {
    CLF__REQ(clf__bert_dims, V, "vocab_size", INT),
    CLF__REQ(clf__bert_dims, D, "n_embd", INT),
    CLF__REQ(clf__bert_dims, H, "n_head", INT),
    CLF__REQ(clf__bert_dims, N, "n_layer", INT),
    CLF__REQ(clf__bert_dims, F, "n_inner", INT),
    CLF__REQ(clf__bert_dims, P, "n_positions", INT),
    CLF__REQ(clf__bert_dims, eps, "layer_norm_epsilon", FLOAT),
    CLF__OPT(clf__bert_dims, T, "type_vocab_size", INT, 2),
    CLF__OPT(clf__bert_dims, theta, "rotary_emb_base", FLOAT, 10000.0),
    CLF__OPT_STR(clf__bert_dims, act, "activation_function", "swiglu"),
    CLF__BERT_POOLING_KEYS,
};

/* encoder.layers.N.: the checkpoint's fused q | k | v as it is, gate (fc12)
 * and up (fc11) fused for the gated MLP. */
static const clf__weight_row nomic_layer_rows[] = {
    CLF__LIN(clf__layer, self.qkv, "attn.Wqkv", QKV, D, NO), /* [3D, D] */
    CLF__LIN(clf__layer, self.o, "attn.out_proj", D, D, NO), /* [D, D] */
    CLF__FUSE(clf__layer, mlp.fc1, "mlp.%s", D, NO, CLF__PART("fc12", F), CLF__PART("fc11", F)), /* [2F, D] */
    CLF__LIN(clf__layer, mlp.fc2, "mlp.fc2", D, F, NO),      /* [D, F] */
    CLF__LN(clf__layer, ln_self, "norm1"),
    CLF__LN(clf__layer, ln_mlp, "norm2"),
};

static const clf__bert_kind nomic_kind = {
    .type = "nomic-bert",
    .prefix = "",
    .archs = {"NomicBertModel"},
    .stack = "encoder.layers",
    .rows = nomic_layer_rows,
    .n_rows = CLF__ARRAY_LEN(nomic_layer_rows),
    .sizes = "vocab_size, n_embd, n_head, n_inner",
    .act_key = "activation_function",
    .emb_ln = "emb_ln",
    .token_types = 1,
    .rotary = 1,
    .gated = 1,
};

/* RoPE scaling (a GGUF file's rope.scaling.type linear) is refused: no
 * nomic-embed checkpoint has it and nothing here is checked against it. */
static clf_status nomic_load(clf_model *m, const void *dims, const clf__config *c, const clf__weights *w) {
  const cJSON *rs = cJSON_GetObjectItemCaseSensitive(clf__config_json(c), "rope_scaling");
  if (rs && !cJSON_IsNull(rs))
    return clf__fail(m->ctx, CLF_E_UNSUPPORTED, "clf_model_load: nomic-bert with RoPE scaling (rope_scaling, a GGUF "
                     "file's rope.scaling.type) is not supported");
  return clf__bert_load(m, &nomic_kind, dims, c, w);
}

static void nomic_gemms(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l) {
  clf__bert_gemms(&nomic_kind, dims, c, T, l);
}

/* ---- GGUF: llama.cpp's nomic-bert --------------------------------------- */

/* llama.cpp requires the norm epsilon and a token type count; the rotary
 * base is 10000 where absent; rope.dimension_count other than the head
 * size and RoPE scaling other than linear are refused by the adapter
 * (CLF__GGUF_ROPE), linear by nomic_load. */
static const clf__gguf_key nomic_gguf_keys[] = {
    CLF__GGUF_INT_KEY("%s.embedding_length", "n_embd", 1, 1, 1 << 16),
    CLF__GGUF_INT_KEY("%s.feed_forward_length", "n_inner", 1, 1, 1 << 18),
    CLF__GGUF_INT_KEY("%s.attention.head_count", "n_head", 1, 1, 4096),
    CLF__GGUF_INT_KEY("%s.block_count", "n_layer", 1, 0, 4096),
    CLF__GGUF_INT_KEY("%s.context_length", "n_positions", 1, 1, 1 << 20),
    {"%s.attention.layer_norm_epsilon", "layer_norm_epsilon", 1, CLF__GGUF_EPSILON, 0, 0},
    CLF__GGUF_NUM_KEY("%s.rope.freq_base", "rotary_emb_base", POSITIVE),
    CLF__GGUF_INT_KEY("%s.pooling_type", "pooling_type", 0, 0, CLF__POOL_COUNT - 1),
    CLF__GGUF_INT_KEY("tokenizer.ggml.token_type_count", "type_vocab_size", 1, 1, 1 << 16),
};
static const clf__gguf_name nomic_gguf_whole[] = {
    {"token_embd.weight", "embeddings.word_embeddings.weight"},
    {"token_types.weight", "embeddings.token_type_embeddings.weight"},
    {"token_embd_norm.weight", "emb_ln.weight"},
    {"token_embd_norm.bias", "emb_ln.bias"},
};
static const clf__gguf_name nomic_gguf_layer[] = {
    {"attn_qkv", "attn.Wqkv"}, {"attn_output", "attn.out_proj"}, {"attn_output_norm", "norm1"},
    {"ffn_up", "mlp.fc11"},    {"ffn_gate", "mlp.fc12"},         {"ffn_down", "mlp.fc2"},
    {"layer_output_norm", "norm2"},
};
static const clf__gguf_arch nomic_gguf = {
    "nomic-bert", "NomicBertModel", nomic_gguf_keys, CLF__ARRAY_LEN(nomic_gguf_keys),
    CLF__GGUF_ROPE | CLF__GGUF_HEAD_DIM, "{\"pooling_type_default\": 0, \"activation_function\": \"swiglu\"}", NULL,
    nomic_gguf_whole, CLF__ARRAY_LEN(nomic_gguf_whole), "encoder.layers", nomic_gguf_layer,
    CLF__ARRAY_LEN(nomic_gguf_layer)};

/* NomicBertModel: last_hidden_state; embeddings pooled as the file states. */
const clf__family clf__nomic_bert_family = {"nomic-bert", {"NomicBertModel", NULL}, nomic_keys,
                                            CLF__ARRAY_LEN(nomic_keys), sizeof(clf__bert_dims), nomic_load,
                                            nomic_gemms, &nomic_gguf};
