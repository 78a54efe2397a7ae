/* model_bert.c - BertModel: word + position + token-type embeddings, LN,
 * N post-LN encoder layers (GELU MLP), pooler tanh(dense(h[:, 0])).
 */
#include "model.h"

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
    if ((st = clf__ws_get(ctx, ws, CLF__WS_OUT, CLF_F32, 3, (size_t[]){B, 1, b->D}, &pooled)) != CLF_OK) return st;
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

clf_status clf__bert_load(clf_model *m, const clf__config *c, const clf__weights *w) {
  clf_context *ctx = m->ctx;
  clf_status st;
  long V, D, H, F, P, T, N;
  double eps;
  const char *act_name, *pe_type;
  clf_activation act;
  if ((st = clf__config_int(ctx, c, "vocab_size", &V)) != CLF_OK ||
      (st = clf__config_int(ctx, c, "hidden_size", &D)) != CLF_OK ||
      (st = clf__config_int(ctx, c, "num_attention_heads", &H)) != CLF_OK ||
      (st = clf__config_int(ctx, c, "num_hidden_layers", &N)) != CLF_OK ||
      (st = clf__config_int(ctx, c, "intermediate_size", &F)) != CLF_OK ||
      (st = clf__config_int_or(ctx, c, "max_position_embeddings", 512, &P)) != CLF_OK ||
      (st = clf__config_int_or(ctx, c, "type_vocab_size", 2, &T)) != CLF_OK ||
      (st = clf__config_float_or(ctx, c, "layer_norm_eps", 1e-12, &eps)) != CLF_OK ||
      (st = clf__config_str_or(ctx, c, "hidden_act", "gelu", &act_name)) != CLF_OK ||
      (st = clf__config_str_or(ctx, c, "position_embedding_type", "absolute", &pe_type)) != CLF_OK)
    return st;
  if (V <= 0 || D <= 0 || H <= 0 || D % H || N < 0 || F <= 0 || P <= 0 || T <= 0)
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: bert config has invalid sizes (vocab_size %ld, hidden_size "
                     "%ld, num_attention_heads %ld, intermediate_size %ld)", V, D, H, F);
  if (strcmp(pe_type, "absolute") != 0)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_model_load: bert position_embedding_type \"%s\" is not supported",
                     pe_type);
  if (clf_activation_from_name(act_name, &act) != CLF_OK)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_model_load: bert hidden_act \"%s\" is not supported", act_name);
  bert *b = calloc(1, sizeof *b);
  if (!b || !(b->layers = calloc((size_t)N + 1, sizeof *b->layers))) {
    free(b);
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "clf_model_load: out of host memory");
  }
  m->impl = b;
  m->destroy = bert_destroy;
  m->run = bert_run;
  m->in_names = bert_inputs;
  m->n_in = 4;
  m->out_names = bert_outputs;
  m->n_out = 2;
  b->V = V, b->D = D, b->H = H, b->F = F, b->P = P, b->T = T, b->n_layers = N;
  const size_t d = D, dh = D / H;
  const char *const probe[] = {"bert.embeddings.word_embeddings.weight", "embeddings.word_embeddings.weight", NULL};
  const char *found = clf__weights_pick(w, probe);
  const char *pf = found && strcmp(found, probe[0]) == 0 ? "bert." : "";
  char n1[256], n2[256];
  clf__params *p = &m->params;
  if ((st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.word_embeddings.weight"), 2,
                       (size_t[]){V, d}, &b->wte)) != CLF_OK ||
      (st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.position_embeddings.weight"), 2,
                       (size_t[]){P, d}, &b->wpe)) != CLF_OK ||
      (st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.token_type_embeddings.weight"), 2,
                       (size_t[]){T, d}, &b->tte)) != CLF_OK ||
      (st = clf__load_ln(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.LayerNorm"), d, (float)eps,
                         &b->ln_emb)) != CLF_OK)
    return st;
  for (long i = 0; i < N; i++) {
    clf__layer *l = &b->layers[i];
    char lp[128];
    clf__wn(lp, sizeof lp, pf, "encoder.layer.%ld.", i);
    l->self.heads = H, l->self.dh = dh, l->self.scale = 1.0f / sqrtf((float)dh);
    l->mlp.act = act;
#define LIN(dst, name, o, in_)                                                                              \
  if ((st = clf__load_linear(ctx, w, p, clf__wn(n1, sizeof n1, lp, "%s.weight", name),                     \
                             clf__wn(n2, sizeof n2, lp, "%s.bias", name), o, in_, CLF_WEIGHT_OUT_IN, &dst)) != \
      CLF_OK)                                                                                               \
    return st;
    LIN(l->self.q, "attention.self.query", d, d)            /* [D, D] */
    LIN(l->self.k, "attention.self.key", d, d)              /* [D, D] */
    LIN(l->self.v, "attention.self.value", d, d)            /* [D, D] */
    LIN(l->self.o, "attention.output.dense", d, d)          /* [D, D] */
    LIN(l->mlp.fc1, "intermediate.dense", (size_t)F, d)     /* [F, D] */
    LIN(l->mlp.fc2, "output.dense", d, (size_t)F)           /* [D, F] */
#undef LIN
    if ((st = clf__load_ln(ctx, w, p, clf__wn(n1, sizeof n1, lp, "attention.output.LayerNorm"), d, (float)eps,
                           &l->ln_self)) != CLF_OK ||
        (st = clf__load_ln(ctx, w, p, clf__wn(n1, sizeof n1, lp, "output.LayerNorm"), d, (float)eps,
                           &l->ln_mlp)) != CLF_OK)
      return st;
  }
  /* The pooler is optional (BertModel(add_pooling_layer=False)). */
  if (clf__weights_has(w, clf__wn(n1, sizeof n1, pf, "pooler.dense.weight"))) {
    if ((st = clf__load_linear(ctx, w, p, n1, clf__wn(n2, sizeof n2, pf, "pooler.dense.bias"), d, d,
                               CLF_WEIGHT_OUT_IN, &b->pooler)) != CLF_OK) /* [D, D] */
      return st;
  } else {
    m->n_out = 1;
  }
  return CLF_OK;
}
