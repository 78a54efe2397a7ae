/* model_bert.c - BertModel: word + position + token-type embeddings, LN,
 * N post-LN encoder layers (GELU MLP), pooler tanh(dense(h[:, 0])); and the
 * task heads of transformers' BertFor* classes on top of it.  The head is the
 * one config.json's architectures names; every checkpoint also gives the
 * base model's outputs, and a head's GEMM runs only when its output is asked.
 */
#include "family.h"

#include <math.h>
#include <stdio.h>
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
  int head;           /* enum bert_head */
  /* cls.predictions: transform.dense [D, D] + act + LayerNorm, decoder
   * [V, D] (tied to wte) + bias [V] */
  clf__linear mlm_dense, mlm_dec;
  clf_activation mlm_act;
  clf__ln mlm_ln;
  clf__linear nsp;  /* [2, D] cls.seq_relationship */
  clf__linear cls;  /* [n_labels, D] classifier (sequence / token) or [2, D] qa_outputs */
  size_t n_labels;
  const char *out_names[6];
  int out_kind[6]; /* enum bert_out of each output */
} bert;

/* The architectures: BertModel and its heads, in the family's order. */
enum bert_head { HEAD_BASE, HEAD_MLM, HEAD_PRE, HEAD_SEQ, HEAD_TOK, HEAD_QA, HEAD_NSP, HEAD_COUNT };
static const char *const bert_archs[HEAD_COUNT] = {
    "BertModel",  "BertForMaskedLM", "BertForPreTraining", "BertForSequenceClassification",
    "BertForTokenClassification", "BertForQuestionAnswering", "BertForNextSentencePrediction"};
/* What an output is. */
enum bert_out { OUT_LHS, OUT_POOL, OUT_MLM, OUT_NSP, OUT_SEQ, OUT_TOK, OUT_START, OUT_END, OUT_COUNT };
/* Each head's own outputs (transformers' names), then last_hidden_state and
 * pooler_output (with a pooler). */
static const struct {
  const char *names[2];
  int kinds[2];
  int pooler; /* 1: the head reads pooler_output, which must be stored */
} bert_head_outs[HEAD_COUNT] = {
    {{NULL, NULL}, {0, 0}, 0},
    {{"logits", NULL}, {OUT_MLM, 0}, 0},
    {{"prediction_logits", "seq_relationship_logits"}, {OUT_MLM, OUT_NSP}, 1},
    {{"logits", NULL}, {OUT_SEQ, 0}, 1},
    {{"logits", NULL}, {OUT_TOK, 0}, 0},
    {{"start_logits", "end_logits"}, {OUT_START, OUT_END}, 0},
    {{"logits", NULL}, {OUT_NSP, 0}, 1},
};

static const char *const bert_inputs[] = {"input_ids", "attention_mask", "token_type_ids", "position_ids"};
enum { IN_IDS, IN_MASK, IN_TT, IN_POS };

static void bert_destroy(clf_model *m) {
  bert *b = m->impl;
  if (b) free(b->layers);
  free(b);
  m->impl = NULL;
}

/* Checks the inputs, embeds them and runs the encoder: h [B, L, D]. */
static clf_status bert_encode(clf_model *m, const clf__inputs in, size_t *Bp, size_t *Lp, clf_tensor **hp) {
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
  *Bp = B, *Lp = L, *hp = h;
  return CLF_OK;
}

/* y (workspace `slot`, [B, L, out]) = act(x [B, L, in] @ W^T + b). */
static clf_status head_linear(clf_model *m, const clf_tensor *x, const clf__linear *l, clf_activation act, int slot,
                              size_t B, size_t L, size_t out, clf_tensor **y) {
  clf_status st = clf__ws_get(m->ctx, &m->ws, slot, CLF_F32, 3, (size_t[]){B, L, out}, y);
  if (st != CLF_OK) return st;
  return clf_linear(m->ctx, x, l->w, CLF_WEIGHT_OUT_IN, l->b, act, *y, NULL);
}

/* Downloads t [B, 1, n] (rows = 0) as [B, n], or [B, L, n] as is. */
static clf_status bert_put(clf_model *m, const clf_tensor *t, const char *name, int rows, clf_array *r) {
  clf_status st = clf__download(m, t, name, r);
  if (st == CLF_OK && !rows) {
    r->ndim = 2;
    r->shape[1] = r->shape[2];
    r->shape[2] = 0;
  }
  return st;
}

/* qa_outputs [B, L, 2] split into start_logits / end_logits [B, L] (the
 * asked ones: r[0], r[1] NULL when not). */
static clf_status bert_put_qa(clf_model *m, const clf_tensor *t, clf_array *r0, clf_array *r1) {
  clf_array all;
  clf_status st = clf__download(m, t, "qa_outputs", &all);
  clf_array *r[2] = {r0, r1};
  static const char *const names[2] = {"start_logits", "end_logits"};
  const size_t n = all.shape[0] * all.shape[1];
  for (int k = 0; k < 2 && st == CLF_OK; k++) {
    if (!r[k]) continue;
    memset(r[k], 0, sizeof *r[k]);
    snprintf(r[k]->name, sizeof r[k]->name, "%s", names[k]);
    r[k]->dtype = CLF_F32, r[k]->ndim = 2;
    r[k]->shape[0] = all.shape[0], r[k]->shape[1] = all.shape[1];
    float *d = malloc(n * sizeof *d + 1);
    if (!d) st = clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_run: out of host memory for %s", names[k]);
    for (size_t i = 0; d && i < n; i++) d[i] = ((const float *)all.data)[2 * i + (size_t)k];
    r[k]->data = d;
  }
  clf_array_free(&all);
  return st;
}

/* pooler: tanh(dense(h[:, 0])) into workspace (CLF__WS_POOLED [B, 1, D]). */
static clf_status bert_pool(clf_model *m, const clf_tensor *h, size_t B, clf_tensor **pooled) {
  bert *b = m->impl;
  clf_tensor *first;
  clf_status st = clf__ws_get(m->ctx, &m->ws, CLF__WS_ROW, CLF_F32, 3, (size_t[]){B, 1, b->D}, &first);
  if (st != CLF_OK || (st = clf_copy_rows(m->ctx, h, 0, first, 0, B ? 1 : 0, NULL)) != CLF_OK) return st;
  return head_linear(m, first, &b->pooler, CLF_ACT_TANH, CLF__WS_POOLED, B, 1, b->D, pooled);
}

/* logits [B, L, V] = decoder(LN(act(dense(h)))) (slots A and LOGITS). */
static clf_status bert_mlm(clf_model *m, const clf_tensor *h, size_t B, size_t L, clf_tensor **logits) {
  bert *b = m->impl;
  clf_tensor *t;
  clf_status st = head_linear(m, h, &b->mlm_dense, b->mlm_act, CLF__WS_A, B, L, b->D, &t);
  if (st != CLF_OK || (st = clf__ln_apply(m->ctx, &b->mlm_ln, t, NULL, NULL, t)) != CLF_OK) return st;
  return head_linear(m, t, &b->mlm_dec, CLF_ACT_NONE, CLF__WS_LOGITS, B, L, b->V, logits);
}

static clf_status bert_run(clf_model *m, const clf__inputs in, const int *want, clf_array *res) {
  bert *b = m->impl;
  clf_array *at[OUT_COUNT] = {0}; /* where each asked output goes */
  for (size_t i = 0; i < m->n_out; i++)
    if (want[i]) at[b->out_kind[i]] = &res[i];
  size_t B = 0, L = 0;
  clf_tensor *h = NULL, *pooled = NULL, *t;
  clf_status st = bert_encode(m, in, &B, &L, &h);
  if (st == CLF_OK && at[OUT_LHS]) st = clf__download(m, h, "last_hidden_state", at[OUT_LHS]);
  if (st == CLF_OK && (at[OUT_POOL] || at[OUT_SEQ] || at[OUT_NSP])) st = bert_pool(m, h, B, &pooled);
  if (st == CLF_OK && at[OUT_POOL]) st = bert_put(m, pooled, "pooler_output", 0, at[OUT_POOL]);
  if (st == CLF_OK && at[OUT_MLM] && (st = bert_mlm(m, h, B, L, &t)) == CLF_OK)
    st = bert_put(m, t, b->head == HEAD_PRE ? "prediction_logits" : "logits", 1, at[OUT_MLM]);
  if (st == CLF_OK && at[OUT_NSP] &&
      (st = head_linear(m, pooled, &b->nsp, CLF_ACT_NONE, CLF__WS_ENC, B, 1, 2, &t)) == CLF_OK)
    st = bert_put(m, t, b->head == HEAD_PRE ? "seq_relationship_logits" : "logits", 0, at[OUT_NSP]);
  if (st == CLF_OK && at[OUT_SEQ] &&
      (st = head_linear(m, pooled, &b->cls, CLF_ACT_NONE, CLF__WS_LOGITS, B, 1, b->n_labels, &t)) == CLF_OK)
    st = bert_put(m, t, "logits", 0, at[OUT_SEQ]);
  if (st == CLF_OK && (at[OUT_TOK] || at[OUT_START] || at[OUT_END]) &&
      (st = head_linear(m, h, &b->cls, CLF_ACT_NONE, CLF__WS_LOGITS, B, L, b->n_labels, &t)) == CLF_OK)
    st = at[OUT_TOK] ? bert_put(m, t, "logits", 1, at[OUT_TOK]) : bert_put_qa(m, t, at[OUT_START], at[OUT_END]);
  return st;
}

/* config.json keys */
typedef struct bert_dims {
  long V, D, H, N, F, P, T;
  long n_labels; /* num_labels (0: absent) */
  double eps;
  int tie;
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
    CLF__OPT(bert_dims, n_labels, "num_labels", INT, 0),
    CLF__OPT(bert_dims, tie, "tie_word_embeddings", BOOL, 1),
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

/* embeddings.*, the layers, and the pooler under prefix pf: optional
 * (BertModel(add_pooling_layer=False)) unless `need_pooler`. */
static clf_status bert_load_weights(clf_model *m, bert *b, const bert_dims *dm, clf_activation act, const char *pf,
                                    int need_pooler, const clf__weights *w) {
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
  if (!need_pooler && !clf__weights_has(w, clf__wn(n1, sizeof n1, pf, "pooler.dense.weight"))) return CLF_OK;
  return clf__load_linear(ctx, w, p, clf__wn(n1, sizeof n1, pf, "pooler.dense.weight"),
                          clf__wn(n2, sizeof n2, pf, "pooler.dense.bias"), d, d, CLF_WEIGHT_OUT_IN,
                          &b->pooler); /* [D, D] */
}

/* cls.predictions: transform (dense, hidden_act, LayerNorm) and the decoder,
 * tied to the word embeddings as transformers ties it (tie_word_embeddings:
 * cls.predictions.decoder.weight, stored or not, is not read), with the
 * bias cls.predictions.bias (or its alias decoder.bias). */
static clf_status bert_load_mlm(clf_model *m, bert *b, const bert_dims *dm, clf_activation act, const char *pf,
                                const clf__weights *w) {
  clf_context *ctx = m->ctx;
  clf__params *p = &m->params;
  const char *const bias[] = {"cls.predictions.bias", "cls.predictions.decoder.bias", NULL};
  const char *bn = clf__weights_pick(w, bias);
  char n1[256];
  clf_status st;
  b->mlm_act = act;
  if ((st = clf__load_linear(ctx, w, p, "cls.predictions.transform.dense.weight",
                             "cls.predictions.transform.dense.bias", b->D, b->D, CLF_WEIGHT_OUT_IN,
                             &b->mlm_dense)) != CLF_OK ||
      (st = clf__load_ln(ctx, w, p, "cls.predictions.transform.LayerNorm", b->D, (float)dm->eps, &b->mlm_ln)) !=
          CLF_OK ||
      (st = clf__param(ctx, w, p, bn ? bn : bias[0], 1, &b->V, &b->mlm_dec.b)) != CLF_OK)
    return st;
  b->mlm_dec.layout = CLF_WEIGHT_OUT_IN;
  if (!dm->tie) /* untied: the decoder's own weight */
    return clf__load_weight(ctx, w, p, "cls.predictions.decoder.weight", b->V, b->D, CLF_WEIGHT_OUT_IN,
                            &b->mlm_dec.w);
  /* wte itself in f32, a copy of it in another weight type (the lookup stays f32) */
  b->mlm_dec.w = b->wte;
  if (p->wtype == CLF_F32) return CLF_OK;
  return clf__load_weight(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.word_embeddings.weight"), b->V, b->D,
                          CLF_WEIGHT_OUT_IN, &b->mlm_dec.w);
}

/* The head of b->head's weights (top-level names, as transformers saves them)
 * and the model's output names. */
static clf_status bert_load_head(clf_model *m, bert *b, const bert_dims *dm, clf_activation act, const char *pf,
                                 const clf__weights *w) {
  clf_context *ctx = m->ctx;
  clf__params *p = &m->params;
  const int hd = b->head;
  clf_status st = CLF_OK;
  if (hd == HEAD_MLM || hd == HEAD_PRE) st = bert_load_mlm(m, b, dm, act, pf, w);
  if (st == CLF_OK && (hd == HEAD_PRE || hd == HEAD_NSP))
    st = clf__load_linear(ctx, w, p, "cls.seq_relationship.weight", "cls.seq_relationship.bias", 2, b->D,
                          CLF_WEIGHT_OUT_IN, &b->nsp); /* [2, D] */
  if (st == CLF_OK && (hd == HEAD_SEQ || hd == HEAD_TOK))
    st = clf__load_linear(ctx, w, p, "classifier.weight", "classifier.bias", b->n_labels, b->D, CLF_WEIGHT_OUT_IN,
                          &b->cls); /* [num_labels, D] */
  if (st == CLF_OK && hd == HEAD_QA) {
    b->n_labels = 2;
    st = clf__load_linear(ctx, w, p, "qa_outputs.weight", "qa_outputs.bias", 2, b->D, CLF_WEIGHT_OUT_IN, &b->cls);
  }
  if (st != CLF_OK) return st;
  size_t n = 0;
  for (int k = 0; k < 2 && bert_head_outs[hd].names[k]; k++, n++)
    b->out_names[n] = bert_head_outs[hd].names[k], b->out_kind[n] = bert_head_outs[hd].kinds[k];
  b->out_names[n] = "last_hidden_state", b->out_kind[n++] = OUT_LHS;
  if (b->pooler.w) b->out_names[n] = "pooler_output", b->out_kind[n++] = OUT_POOL;
  m->out_names = b->out_names;
  m->n_out = n;
  return CLF_OK;
}

/* The head: the first BertFor* that config.json's architectures lists
 * (none: BertModel).  num_labels: id2label's, else config's num_labels, else 2. */
static int bert_pick_head(const clf__config *c) {
  for (int i = 1; i < HEAD_COUNT; i++)
    if (clf__config_has_arch(c, bert_archs[i])) return i;
  return HEAD_BASE;
}

static clf_status bert_load(clf_model *m, const void *dims, const clf__config *c, const clf__weights *w) {
  const bert_dims *d = dims;
  clf_activation act;
  clf_status st;
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
  b->V = d->V, b->D = d->D, b->H = d->H, b->F = d->F, b->P = d->P, b->T = d->T, b->n_layers = d->N;
  b->head = bert_pick_head(c);
  b->n_labels = m->n_labels ? m->n_labels : d->n_labels > 0 ? (size_t)d->n_labels : 2;
  const char *const probe[] = {"bert.embeddings.word_embeddings.weight", "embeddings.word_embeddings.weight", NULL};
  const char *found = clf__weights_pick(w, probe);
  const char *pf = found && strcmp(found, probe[0]) == 0 ? "bert." : "";
  if ((st = bert_load_weights(m, b, d, act, pf, bert_head_outs[b->head].pooler, w)) != CLF_OK) return st;
  return bert_load_head(m, b, d, act, pf, w);
}

/* separate q, k, v; nn.Linear weights, stored [in, out] (trans_b 0); the
 * heads' weights [out, in] */
static void bert_gemms(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l) {
  const bert_dims *d = dims;
  clf__gemm_add(l, T, 3 * d->D, d->D, 0, d->N); /* q, k, v fused at load */
  clf__gemm_add(l, T, d->D, d->D, 0, d->N);
  clf__gemm_add(l, T, d->F, d->D, 0, d->N);
  clf__gemm_add(l, T, d->D, d->F, 0, d->N);
  const int hd = bert_pick_head(c);
  if (hd == HEAD_MLM || hd == HEAD_PRE) {
    clf__gemm_add(l, T, d->D, d->D, 1, 1);
    clf__gemm_add(l, T, d->V, d->D, 1, 1);
  }
  if (hd == HEAD_TOK) clf__gemm_add(l, T, d->n_labels > 0 ? d->n_labels : 2, d->D, 1, 1);
  if (hd == HEAD_QA) clf__gemm_add(l, T, 2, d->D, 1, 1);
}

/* BertModel: last_hidden_state, pooler_output (when the pooler is stored);
 * the heads: their outputs (bert_head_outs) and the same two. */
const clf__family clf__bert_family = {"bert",
                                      {"BertModel", "BertForMaskedLM", "BertForPreTraining",
                                       "BertForSequenceClassification", "BertForTokenClassification",
                                       "BertForQuestionAnswering", "BertForNextSentencePrediction", NULL},
                                      bert_keys,
                                      CLF__ARRAY_LEN(bert_keys),
                                      sizeof(bert_dims),
                                      bert_load,
                                      bert_gemms};
