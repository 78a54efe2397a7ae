/* opt.c - the worked example of docs/architecture.md: what adding a decoder
 * family takes, here OPT (facebook/opt-*: OPTForCausalLM).  Its config
 * keys, its weight rows and its body; the blocks, the KV cache, generation,
 * the LM head and the GEMM list come from the shared runtime.
 *
 * To make it a family: move it to host/models/opt.c (its includes then
 * without "models/"), add it to lib_sources in meson.build and X(opt) to
 * the CLF__FAMILIES list in host/models/family.c, and give it
 * golden fixtures from transformers (tools/fixtures/).  Until then it is
 * compiled with the tests (tests/meson.build) so that it keeps up with the
 * runtime's interfaces, and it is not loaded by anything.
 *
 * Its last part is docs/architecture.md's second worked example, adding a
 * GGUF architecture: rows in the family's file, and nothing elsewhere
 * (tests/test_gguf_example.c runs them through the adapter).
 */
#include "models/decoder.h"
#include "models/family.h"

#include <math.h>

typedef struct opt {
  clf__decoder dec; /* the runtime's: caches, step buffer, head */
  size_t V, D, H, F, P, n_layers;
  clf_tensor *embed, *pos; /* [V, D]; [P, D]: embed_positions past its offset of 2 rows */
  clf__layer *layers;
  clf__ln final;
} opt;

/* config.json keys */
typedef struct opt_dims {
  long V, D, N, F, H, P, word_dim;
  int pre_ln, bias;
  const char *act;
} opt_dims;
static const clf__config_key opt_keys[] = {
    CLF__REQ(opt_dims, V, "vocab_size", INT),
    CLF__REQ(opt_dims, D, "hidden_size", INT),
    CLF__REQ(opt_dims, N, "num_hidden_layers", INT),
    CLF__REQ(opt_dims, F, "ffn_dim", INT),
    CLF__REQ(opt_dims, H, "num_attention_heads", INT),
    CLF__OPT(opt_dims, P, "max_position_embeddings", INT, 2048),
    CLF__OPT(opt_dims, word_dim, "word_embed_proj_dim", INT, 0), /* 0: hidden_size */
    CLF__OPT(opt_dims, pre_ln, "do_layer_norm_before", BOOL, 1),
    CLF__OPT(opt_dims, bias, "enable_bias", BOOL, 1),
    CLF__OPT_STR(opt_dims, act, "activation_function", "relu"),
};

/* the weights of model.decoder.layers.N. */
static const clf__weight_row opt_layer_rows[] = {
    CLF__QKV(clf__layer, self, "self_attn.%s_proj", ATTN, "q", "k", "v"), /* 3 x [D, D] */
    CLF__LIN(clf__layer, self.o, "self_attn.out_proj", D, D, ATTN),       /* [D, D] */
    CLF__LIN(clf__layer, mlp.fc1, "fc1", F, D, MLP),                      /* [F, D] */
    CLF__LIN(clf__layer, mlp.fc2, "fc2", D, F, MLP),                      /* [D, F] */
    CLF__LN(clf__layer, ln_self, "self_attn_layer_norm"),
    CLF__LN(clf__layer, ln_mlp, "final_layer_norm"),
};

static clf__block_spec opt_spec(size_t D, size_t F, int bias) {
  clf__block_spec s = {.eps = 1e-5f, .attn_bias = bias, .mlp_bias = bias, .layout = CLF_WEIGHT_OUT_IN};
  clf__spec_dims(&s, D, F, D, D);
  return s;
}

/* embed_tokens + embed_positions -> N pre-LN layers -> final_layer_norm.
 * Positions: as given, else 0.. (transformers counts them from the
 * attention mask: left-padded rows need position_ids). */
static clf_status opt_body(clf_model *m, const clf__step *s, clf_tensor **out) {
  opt *o = m->impl;
  clf_tensor *h, *a;
  clf_status st;
  if ((st = clf__decoder_stream(m, s, &h, &a)) != CLF_OK ||
      (st = clf_embedding(m->ctx, o->embed, s->ids, 1.0f, 0, h, NULL)) != CLF_OK ||
      (st = clf_embedding(m->ctx, o->pos, s->pos, 1.0f, 1, h, NULL)) != CLF_OK)
    return st;
  const clf_attention_mask mask = {s->mask, 1, NULL};
  *out = a;
  return clf__decoder_stack(m, o->layers, o->n_layers, &o->final, s, &mask, NULL, h, a);
}

static clf_status opt_run(clf_model *m, const clf__inputs in, const int *want, clf_array *res) {
  clf_tensor *a;
  size_t B = 0, L = 0;
  int64_t max_pos = 0;
  clf_status st;
  if ((st = clf__decoder_check(m, in, &B, &L, &max_pos)) != CLF_OK ||
      (st = clf__decoder_forward(m, in, B, L, max_pos, &a)) != CLF_OK)
    return st;
  return want[0] ? clf__decoder_logits(m, a, &res[0]) : CLF_OK;
}

static clf_status opt_weights(clf_model *m, opt *o, const opt_dims *d, const clf__weights *w) {
  const clf__block_spec spec = opt_spec(o->D, o->F, d->bias);
  clf__params *p = &m->params;
  clf_tensor *table;
  char n[256];
  clf_status st;
  if ((st = clf__param(m->ctx, w, p, "model.decoder.embed_tokens.weight", 2, (size_t[]){o->V, o->D}, &o->embed)) !=
          CLF_OK ||
      (st = clf__param(m->ctx, w, p, "model.decoder.embed_positions.weight", 2, (size_t[]){o->P + 2, o->D},
                       &table)) != CLF_OK ||
      (st = clf_tensor_view(table, 2 * o->D, 2, (size_t[]){o->P, o->D}, &o->pos)) != CLF_OK ||
      (st = clf__params_add(m->ctx, p, o->pos)) != CLF_OK ||
      (st = clf__load_ln(m->ctx, w, p, "model.decoder.final_layer_norm", o->D, 1e-5f, &o->final)) != CLF_OK)
    return st;
  for (size_t i = 0; i < o->n_layers; i++) {
    clf__layer *l = &o->layers[i];
    l->self = (clf__attn){.heads = o->H, .dh = o->D / o->H, .scale = 1.0f / sqrtf((float)(o->D / o->H))};
    clf_activation_from_name(d->act, &l->mlp.act);
    clf__wn(n, sizeof n, "model.decoder.", "layers.%zu.", i);
    if ((st = clf__load_rows(m->ctx, w, p, n, opt_layer_rows, CLF__ARRAY_LEN(opt_layer_rows), &spec, l)) != CLF_OK)
      return st;
  }
  return clf__decoder_load_head(m, w, "lm_head.weight", !clf__weights_has(w, "lm_head.weight"),
                                "model.decoder.embed_tokens.weight", o->embed);
}

static clf_status opt_load(clf_model *m, const void *dims, const clf__config *c, const clf__weights *w) {
  static const char *const outputs[] = {"logits"};
  const opt_dims *d = dims;
  clf_activation act;
  clf_status st;
  (void)c;
  if (d->V <= 0 || d->D <= 0 || d->H <= 0 || d->D % d->H || d->N < 0 || d->F <= 0 || d->P <= 0 ||
      (d->word_dim && d->word_dim != d->D) || !d->pre_ln || clf_activation_from_name(d->act, &act) != CLF_OK)
    return clf__fail(m->ctx, CLF_E_UNSUPPORTED, "clf_model_load: this opt config is not supported (sizes, "
                     "word_embed_proj_dim, do_layer_norm_before or activation_function)");
  opt *o = clf__model_calloc(m, 1, sizeof *o);
  if (!o || !(o->layers = clf__model_calloc(m, (size_t)d->N + 1, sizeof *o->layers))) return CLF_E_OUT_OF_MEMORY;
  m->impl = o;
  o->V = d->V, o->D = d->D, o->H = d->H, o->F = d->F, o->P = d->P, o->n_layers = d->N;
  o->dec = (clf__decoder){.body = opt_body, .ws = &m->ws, .V = o->V, .D = o->D, .kv_heads = o->H,
                          .dh = o->D / o->H, .limit = o->P, .limit_key = "max_position_embeddings", .need_pos = 1};
  if ((st = clf__decoder_attach(m, &o->dec, o->n_layers, 0)) != CLF_OK) return st;
  m->run = opt_run;
  m->in_names = clf__decoder_inputs, m->n_in = 3;
  m->out_names = outputs, m->n_out = 1;
  m->vocab = m->in_vocab = o->V;
  m->max_positions = o->P;
  return opt_weights(m, o, d, w);
}

static void opt_gemms(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l) {
  const opt_dims *d = dims;
  const clf__block_spec spec = opt_spec((size_t)d->D, (size_t)d->F, 1);
  (void)c;
  clf__rows_gemms(opt_layer_rows, CLF__ARRAY_LEN(opt_layer_rows), &spec, T, d->N, l);
  clf__gemm_add(l, T, d->V, d->D, 1, 1);
}

/* ---- GGUF: the rows that let the family read a GGUF file --------------
 * llama.cpp has no "opt" architecture: these rows are what one would be,
 * with llama.cpp's usual names.  They are the whole change: family.c hands
 * every family's rows to io/gguf_model.c, which names no architecture. */

/* metadata -> config.json ("%s" is general.architecture); the tokenizer's
 * ids and vocab_size from the token list are the adapter's own */
static const clf__gguf_key opt_gguf_keys[] = {
    CLF__GGUF_INT_KEY("%s.context_length", "max_position_embeddings", 0, 1, 1LL << 30),
    CLF__GGUF_INT_KEY("%s.block_count", "num_hidden_layers", 1, 1, 4096),
    CLF__GGUF_INT_KEY("%s.feed_forward_length", "ffn_dim", 1, 1, 1LL << 24),
    CLF__GGUF_INT_KEY("%s.embedding_length", "hidden_size", 1, 1, 1LL << 20),
    CLF__GGUF_INT_KEY("%s.attention.head_count", "num_attention_heads", 1, 1, 4096),
    CLF__GGUF_INT_KEY("%s.vocab_size", "vocab_size", 0, 1, 1LL << 31),
};

/* the model's tensors, then a layer's parts (blk.N.PART.weight and .bias) */
static const clf__gguf_name opt_gguf_whole[] = {
    {"token_embd.weight", "model.decoder.embed_tokens.weight"},
    {"position_embd.weight", "model.decoder.embed_positions.weight"},
    {"output_norm.weight", "model.decoder.final_layer_norm.weight"},
    {"output_norm.bias", "model.decoder.final_layer_norm.bias"},
    {"output.weight", "lm_head.weight"},
};
static const clf__gguf_name opt_gguf_layer[] = {
    {"attn_norm", "self_attn_layer_norm"}, {"attn_q", "self_attn.q_proj"}, {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},        {"attn_output", "self_attn.out_proj"},
    {"ffn_norm", "final_layer_norm"},      {"ffn_up", "fc1"},               {"ffn_down", "fc2"},
};

/* no RoPE (learned positions), no fixed config entries, rows unpermuted */
static const clf__gguf_arch opt_gguf = {"opt", "OPTForCausalLM", opt_gguf_keys, CLF__ARRAY_LEN(opt_gguf_keys), 0,
                                        NULL, "model.decoder.", opt_gguf_whole, CLF__ARRAY_LEN(opt_gguf_whole),
                                        "model.decoder.layers", opt_gguf_layer, CLF__ARRAY_LEN(opt_gguf_layer)};

const clf__family clf__opt_family = {"opt", {"OPTForCausalLM", NULL}, opt_keys, CLF__ARRAY_LEN(opt_keys),
                                     sizeof(opt_dims), opt_load, opt_gemms, &opt_gguf};
