/* model_bert.c - BertModel: word + position + token-type embeddings, LN,
 * N post-LN encoder layers (GELU MLP), pooler tanh(dense(h[:, 0])).
 */
#include "family.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct bert {
  size_t V, D, H, F, P, T, n_layers;
  clf_tensor *wte; /* [V, D] word_embeddings */
  clf_tensor *wpe; /* [P, D] position_embeddings */
  clf_tensor *tte; /* [T, D] token_type_embeddings */
  clf__ln ln_emb;  /* [D] embeddings.LayerNorm */
  clf__layer *layers;
  clf__linear pooler; /* [D, D] pooler.dense, or w NULL */
} bert;

static const char *const bert_inputs[] = {"input_ids", "attention_mask", "token_type_ids", "position_ids"};
static const char *const bert_outputs[] = {"last_hidden_state", "pooler_output"};
enum { IN_IDS, IN_MASK, IN_TT, IN_POS };

static void bert_destroy(clf_model *m) {
  bert *b = m->impl;
  if (b) free(b->layers);
  free(b);
  m->impl = NULL;
}

static clf_status bert_run(clf_model *m, const clf__inputs in, const int *want, clf_array *res) {
  static const char op[] = "clf_model_run";
  clf_context *ctx = m->ctx;
  bert *b = m->impl;
  clf__ws *ws = &m->ws;
  clf_status st;
  size_t B = 0, L = 0;
  if (!in[IN_IDS])
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: bert needs input \"input_ids\" (inputs: input_ids, "
                     "attention_mask, token_type_ids, position_ids)", op);
  if ((st = clf__check_ids(m, in[IN_IDS], "input_ids", &B, &L)) != CLF_OK) return st;
  for (int i = IN_MASK; i <= IN_POS; i++)
    if (in[i] && (st = clf__check_ids(m, in[i], bert_inputs[i], &B, &L)) != CLF_OK) return st;
  if (L > b->P)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: input_ids has %zu positions, more than max_position_embeddings %zu", op,
                     L, b->P);
  if ((st = clf__check_id_range(m, op, in[IN_IDS], "input_ids", b->V)) != CLF_OK ||
      (st = clf__check_id_range(m, op, in[IN_TT], "token_type_ids", b->T)) != CLF_OK ||
      (st = clf__check_id_range(m, op, in[IN_POS], "position_ids", b->P)) != CLF_OK)
    return st;
  clf_tensor *ids, *tt, *mask = NULL, *pos, *h;
  if ((st = clf__upload_ids(m, ws, CLF__WS_IDS, in[IN_IDS], B, L, 0, &ids)) != CLF_OK) return st;
  if ((st = clf__upload_ids(m, ws, CLF__WS_IDS2, in[IN_TT], B, L, 0, &tt)) != CLF_OK) return st;
  if (in[IN_MASK] && (st = clf__upload_ids(m, ws, CLF__WS_MASK, in[IN_MASK], B, L, 1, &mask)) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_H, CLF_F32, 3, (size_t[]){B, L, b->D}, &h)) != CLF_OK) return st;

  /* embeddings */
  if ((st = clf_embedding(ctx, b->wte, ids, 1.0f, 0, h, NULL)) != CLF_OK) return st;
  if ((st = clf_embedding(ctx, b->tte, tt, 1.0f, 1, h, NULL)) != CLF_OK) return st;
  if (in[IN_POS]) {
    if ((st = clf__upload_ids(m, ws, CLF__WS_POS, in[IN_POS], B, L, 0, &pos)) != CLF_OK) return st;
    st = clf_embedding(ctx, b->wpe, pos, 1.0f, 1, h, NULL);
  } else {
    st = clf_position_embedding(ctx, b->wpe, 0, 1, h, NULL);
  }
  if (st != CLF_OK) return st;
  if ((st = clf__ln_apply(ctx, &b->ln_emb, h, NULL, NULL, h)) != CLF_OK) return st;

  /* N x post-LN encoder layer */
  clf_attention_mask am = {mask, 0, NULL};
  clf__layer_io io = {&am, NULL, NULL, NULL, NULL};
  for (size_t i = 0; i < b->n_layers; i++)
    if ((st = clf__layer_forward(ctx, &b->layers[i], 0, NULL, h, NULL, &io, ws)) != CLF_OK) return st;

  if (want[0] && (st = clf__download(m, h, "last_hidden_state", &res[0])) != CLF_OK) return st;
  if (want[1]) {
    /* pooler: tanh(dense(h[:, 0])) */
    clf_tensor *first, *pooled;
    if ((st = clf__ws_get(ctx, ws, CLF__WS_A, CLF_F32, 3, (size_t[]){B, 1, b->D}, &first)) != CLF_OK) return st;
    if ((st = clf__ws_get(ctx, ws, CLF__WS_POOLED, CLF_F32, 3, (size_t[]){B, 1, b->D}, &pooled)) != CLF_OK) return st;
    if ((st = clf_copy_rows(ctx, h, 0, first, 0, B ? 1 : 0, NULL)) != CLF_OK) return st;
    if ((st = clf_linear(ctx, first, b->pooler.w, CLF_WEIGHT_OUT_IN, b->pooler.b, CLF_ACT_TANH, pooled, NULL)) !=
        CLF_OK)
      return st;
    if ((st = clf__download(m, pooled, "pooler_output", &res[1])) != CLF_OK) return st;
    res[1].ndim = 2; /* [B, D] */
    res[1].shape[1] = b->D;
    res[1].shape[2] = 0;
  }
  return CLF_OK;
}

/* config.json keys */
typedef struct bert_dims {
  long V, D, H, N, F, P, T;
  double eps;
  const char *act, *pe_type;
} bert_dims;
static const clf__config_key bert_keys[] = {
    CLF__REQ(bert_dims, V, "vocab_size", INT),
    CLF__REQ(bert_dims, D, "hidden_size", INT),
    CLF__REQ(bert_dims, H, "num_attention_heads", INT),
    CLF__REQ(bert_dims, N, "num_hidden_layers", INT),
    CLF__REQ(bert_dims, F, "intermediate_size", INT),
    CLF__OPT(bert_dims, P, "max_position_embeddings", INT, 512),
    CLF__OPT(bert_dims, T, "type_vocab_size", INT, 2),
    CLF__OPT(bert_dims, eps, "layer_norm_eps", FLOAT, 1e-12),
    CLF__OPT_STR(bert_dims, act, "hidden_act", "gelu"),
    CLF__OPT_STR(bert_dims, pe_type, "position_embedding_type", "absolute"),
};

/* the weights of encoder.layer.N. */
static const clf__weight_row bert_layer_rows[] = {
    CLF__QKV(clf__layer, self, "attention.self.%s", YES, "query", "key", "value"), /* 3 x [D, D] */
    CLF__LIN(clf__layer, self.o, "attention.output.dense", D, D, YES), /* [D, D] */
    CLF__LIN(clf__layer, mlp.fc1, "intermediate.dense", F, D, YES),    /* [F, D] */
    CLF__LIN(clf__layer, mlp.fc2, "output.dense", D, F, YES),          /* [D, F] */
    CLF__LN(clf__layer, ln_self, "attention.output.LayerNorm"),
    CLF__LN(clf__layer, ln_mlp, "output.LayerNorm"),
};

static clf_status bert_check(clf_context *ctx, const bert_dims *d, clf_activation *act) {
  if (d->V <= 0 || d->D <= 0 || d->H <= 0 || d->D % d->H || d->N < 0 || d->F <= 0 || d->P <= 0 || d->T <= 0)
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: bert config has invalid sizes (vocab_size %ld, hidden_size "
                     "%ld, num_attention_heads %ld, intermediate_size %ld)", d->V, d->D, d->H, d->F);
  if (strcmp(d->pe_type, "absolute") != 0)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_model_load: bert position_embedding_type \"%s\" is not supported",
                     d->pe_type);
  if (clf_activation_from_name(d->act, act) != CLF_OK)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_model_load: bert hidden_act \"%s\" is not supported", d->act);
  return CLF_OK;
}

/* embeddings.*, the layers, and the optional pooler under prefix pf. */
static clf_status bert_load_weights(clf_model *m, bert *b, const bert_dims *dm, clf_activation act, const char *pf,
                                    const clf__weights *w) {
  clf_context *ctx = m->ctx;
  clf__params *p = &m->params;
  const size_t d = b->D, dh = b->D / b->H;
  const clf__block_spec spec = {{d, b->F, 3 * d}, (float)dm->eps, 1, 0, CLF_WEIGHT_OUT_IN, 1};
  char n1[256], n2[256];
  clf_status st;
  if ((st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.word_embeddings.weight"), 2,
                       (size_t[]){b->V, d}, &b->wte)) != CLF_OK ||
      (st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.position_embeddings.weight"), 2,
                       (size_t[]){b->P, d}, &b->wpe)) != CLF_OK ||
      (st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.token_type_embeddings.weight"), 2,
                       (size_t[]){b->T, d}, &b->tte)) != CLF_OK ||
      (st = clf__load_ln(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.LayerNorm"), d, (float)dm->eps,
                         &b->ln_emb)) != CLF_OK)
    return st;
  for (size_t i = 0; i < b->n_layers; i++) {
    clf__layer *l = &b->layers[i];
    l->self.heads = b->H, l->self.dh = dh, l->self.scale = 1.0f / sqrtf((float)dh);
    l->mlp.act = act;
    if ((st = clf__load_rows(ctx, w, p, clf__wn(n1, sizeof n1, pf, "encoder.layer.%zu.", i), bert_layer_rows,
                             CLF__ARRAY_LEN(bert_layer_rows), &spec, l)) != CLF_OK)
      return st;
  }
  /* The pooler is optional (BertModel(add_pooling_layer=False)). */
  if (!clf__weights_has(w, clf__wn(n1, sizeof n1, pf, "pooler.dense.weight"))) {
    m->n_out = 1;
    return CLF_OK;
  }
  return clf__load_linear(ctx, w, p, n1, clf__wn(n2, sizeof n2, pf, "pooler.dense.bias"), d, d, CLF_WEIGHT_OUT_IN,
                          &b->pooler); /* [D, D] */
}

static clf_status bert_load(clf_model *m, const void *dims, const clf__config *c, const clf__weights *w) {
  const bert_dims *d = dims;
  clf_activation act;
  clf_status st;
  (void)c;
  if ((st = bert_check(m->ctx, d, &act)) != CLF_OK) return st;
  bert *b = calloc(1, sizeof *b);
  if (!b || !(b->layers = calloc((size_t)d->N + 1, sizeof *b->layers))) {
    free(b);
    return clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_load: out of host memory");
  }
  m->impl = b;
  m->destroy = bert_destroy;
  m->run = bert_run;
  m->in_names = bert_inputs;
  m->n_in = 4;
  m->out_names = bert_outputs;
  m->n_out = 2;
  b->V = d->V, b->D = d->D, b->H = d->H, b->F = d->F, b->P = d->P, b->T = d->T, b->n_layers = d->N;
  const char *const probe[] = {"bert.embeddings.word_embeddings.weight", "embeddings.word_embeddings.weight", NULL};
  const char *found = clf__weights_pick(w, probe);
  return bert_load_weights(m, b, d, act, found && strcmp(found, probe[0]) == 0 ? "bert." : "", w);
}

/* separate q, k, v; nn.Linear weights, stored [in, out] (trans_b 0) */
static void bert_gemms(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l) {
  const bert_dims *d = dims;
  (void)c;
  clf__gemm_add(l, T, 3 * d->D, d->D, 0, d->N); /* q, k, v fused at load */
  clf__gemm_add(l, T, d->D, d->D, 0, d->N);
  clf__gemm_add(l, T, d->F, d->D, 0, d->N);
  clf__gemm_add(l, T, d->D, d->F, 0, d->N);
}

/* BertModel: last_hidden_state, pooler_output (when the pooler is stored). */
const clf__family clf__bert_family = {"bert", {"BertModel", NULL}, bert_keys, CLF__ARRAY_LEN(bert_keys),
                                      sizeof(bert_dims), bert_load, bert_gemms};
