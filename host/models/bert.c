/* bert.c - BertModel: word + position + token-type embeddings, LN,
 * N post-LN encoder layers (GELU MLP), pooler tanh(dense(h[:, 0])); and the
 * task heads of transformers' BertFor* classes on top of it.  The head is the
 * one config.json's architectures names; every checkpoint also gives the
 * base model's outputs, and a head's GEMM runs only when its output is asked.
 * RoBERTa, XLM-RoBERTa and DistilBERT are the same blocks under other names
 * (a bert_kind each): RoBERTa's positions count from past padding_idx, its
 * sequence head is a dense + tanh of its own on the first token instead of
 * the pooler; DistilBERT has no token types and its own config keys.
 * bert.h hands the kind and the loader to encoders in their own files
 * (nomic_bert.c: rotary positions instead of the table, a gated MLP).
 */
#include "bert.h"
#include "llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef clf__bert_kind bert_kind;
typedef clf__bert_dims bert_dims;

typedef struct bert {
  const bert_kind *kind;
  size_t V, D, H, F, P, T, n_layers; /* T 0: no token types (DistilBERT) */
  long pad;                          /* RoBERTa's padding_idx (pad_token_id) */
  float eps;
  clf_tensor *wte; /* [V, D] word_embeddings */
  clf_tensor *wpe; /* [P, D] position_embeddings */
  clf_tensor *tte; /* [T, D] token_type_embeddings */
  clf__ln ln_emb;  /* [D] embeddings.LayerNorm */
  clf_tensor *inv_freq; /* [Dh / 2] a rotary kind's frequencies, or NULL */
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
  clf__linear seq_dense; /* [D, D] the sequence head's own dense on h[:, 0], or w NULL: the pooler */
  clf_activation seq_act;
  size_t n_labels;
  const char *out_names[6];
  int out_kind[6]; /* enum bert_out of each output */
} bert;

/* The architectures: the base model and its heads. */
enum bert_head { HEAD_BASE, HEAD_MLM, HEAD_PRE, HEAD_SEQ, HEAD_TOK, HEAD_QA, HEAD_NSP, HEAD_COUNT };
_Static_assert(HEAD_COUNT == CLF__BERT_HEADS, "bert.h's head count is the enum's");
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
enum { WS_POOLED = CLF__WS_FAMILY }; /* the pooler's output */

/* the weights of encoder.layer.N. */
static const clf__weight_row bert_layer_rows[] = {
    CLF__QKV(clf__layer, self, "attention.self.%s", YES, "query", "key", "value"), /* 3 x [D, D] */
    CLF__LIN(clf__layer, self.o, "attention.output.dense", D, D, YES), /* [D, D] */
    CLF__LIN(clf__layer, mlp.fc1, "intermediate.dense", F, D, YES),    /* [F, D] */
    CLF__LIN(clf__layer, mlp.fc2, "output.dense", D, F, YES),          /* [D, F] */
    CLF__LN(clf__layer, ln_self, "attention.output.LayerNorm"),
    CLF__LN(clf__layer, ln_mlp, "output.LayerNorm"),
};
/* DistilBERT's transformer.layer.N.: the same post-LN layer */
static const clf__weight_row distil_layer_rows[] = {
    CLF__QKV(clf__layer, self, "attention.%s", YES, "q_lin", "k_lin", "v_lin"),
    CLF__LIN(clf__layer, self.o, "attention.out_lin", D, D, YES),
    CLF__LIN(clf__layer, mlp.fc1, "ffn.lin1", F, D, YES),
    CLF__LIN(clf__layer, mlp.fc2, "ffn.lin2", D, F, YES),
    CLF__LN(clf__layer, ln_self, "sa_layer_norm"),
    CLF__LN(clf__layer, ln_mlp, "output_layer_norm"),
};

#define BERT_SIZES "vocab_size, hidden_size, num_attention_heads, intermediate_size"
#define ROBERTA_KIND(t, a)                                                                                         \
  {.type = t, .prefix = "roberta.",                                                                                \
   .archs = {a "Model", a "ForMaskedLM", NULL, a "ForSequenceClassification", a "ForTokenClassification",          \
             a "ForQuestionAnswering", NULL},                                                                      \
   .stack = "encoder.layer", .rows = bert_layer_rows, .n_rows = CLF__ARRAY_LEN(bert_layer_rows),                  \
   .sizes = BERT_SIZES, .act_key = "hidden_act", .token_types = 1,                                                  \
   .roberta_pos = 1, .mlm = {"lm_head.dense", "lm_head.layer_norm", "lm_head.decoder.weight", "lm_head.bias"},      \
   .mlm_bias2 = "lm_head.decoder.bias", .mlm_gelu = 1, .seq_dense = "classifier.dense",                             \
   .seq_out = "classifier.out_proj", .seq_act = CLF_ACT_TANH}
static const bert_kind bert_kind_bert = {
    .type = "bert",
    .prefix = "bert.",
    .archs = {"BertModel", "BertForMaskedLM", "BertForPreTraining", "BertForSequenceClassification",
              "BertForTokenClassification", "BertForQuestionAnswering", "BertForNextSentencePrediction"},
    .stack = "encoder.layer",
    .rows = bert_layer_rows, .n_rows = CLF__ARRAY_LEN(bert_layer_rows),
    .sizes = BERT_SIZES,
    .act_key = "hidden_act",
    .token_types = 1,
    .mlm = {"cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm",
            "cls.predictions.decoder.weight", "cls.predictions.bias"},
    .mlm_bias2 = "cls.predictions.decoder.bias",
    .seq_out = "classifier"};
static const bert_kind bert_kind_roberta = ROBERTA_KIND("roberta", "Roberta");
static const bert_kind bert_kind_xlmr = ROBERTA_KIND("xlm-roberta", "XLMRoberta");
static const bert_kind bert_kind_distil = {
    .type = "distilbert",
    .prefix = "distilbert.",
    .archs = {"DistilBertModel", "DistilBertForMaskedLM", NULL, "DistilBertForSequenceClassification",
              "DistilBertForTokenClassification", "DistilBertForQuestionAnswering", NULL},
    .stack = "transformer.layer",
    .rows = distil_layer_rows, .n_rows = CLF__ARRAY_LEN(distil_layer_rows),
    .sizes = "vocab_size, dim, n_heads, hidden_dim",
    .act_key = "activation",
    .eps = 1e-12f,
    .mlm = {"vocab_transform", "vocab_layer_norm", "vocab_projector.weight", "vocab_projector.bias"},
    .seq_dense = "pre_classifier",
    .seq_out = "classifier",
    .seq_act = CLF_ACT_RELU};

static void bert_destroy(clf_model *m) {
  bert *b = m->impl;
  if (b) free(b->layers);
  free(b);
  m->impl = NULL;
}

/* RoBERTa's position ids from input_ids, as transformers 4.40's
 * create_position_ids_from_input_ids: padding_idx at padding tokens, else
 * padding_idx + the count of non-padding tokens so far; one upload. */
static clf_status roberta_positions(clf_model *m, const clf_array *a, size_t B, size_t L, clf_tensor **pos) {
  const bert *b = m->impl;
  int64_t *v = malloc(B * L * sizeof *v + 1);
  if (!v) return clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_run: out of host memory");
  clf_status st = CLF_OK;
  for (size_t r = 0; r < B; r++) {
    long n = 0;
    for (size_t j = 0; j < L; j++) {
      const size_t i = r * L + j;
      const long id = (long)clf__id_at(a, i);
      v[i] = id == b->pad ? b->pad : b->pad + ++n;
    }
    if (n && (size_t)(b->pad + n) >= b->P && st == CLF_OK)
      st = clf__fail(m->ctx, CLF_E_SHAPE, "clf_model_run: input_ids row %zu has %ld tokens other than padding_idx "
                     "%ld: their positions reach %ld, past max_position_embeddings %zu", r, n, b->pad, b->pad + n,
                     b->P);
  }
  const clf_array arr = {.dtype = CLF_I64, .ndim = 2, .shape = {B, L}, .data = v};
  if (st == CLF_OK) st = clf__upload_ids(m, &m->ws, CLF__WS_POS, &arr, B, L, 0, pos);
  free(v);
  return st;
}

/* Checks the inputs (the first n_in of bert_inputs) and their ids' ranges. */
static clf_status bert_check_inputs(clf_model *m, const clf__inputs in, size_t *B, size_t *L) {
  static const char op[] = "clf_model_run";
  const bert *b = m->impl;
  clf_status st;
  if (!in[IN_IDS])
    return clf__fail(m->ctx, CLF_E_INVALID_ARG, "%s: %s needs input \"input_ids\" (inputs: input_ids, "
                     "attention_mask%s)", op, m->type, b->T ? ", token_type_ids, position_ids" : "");
  if ((st = clf__check_ids(m, in[IN_IDS], "input_ids", B, L)) != CLF_OK) return st;
  for (size_t i = IN_MASK; i < m->n_in; i++)
    if (in[i] && (st = clf__check_ids(m, in[i], bert_inputs[i], B, L)) != CLF_OK) return st;
  if (*L > b->P)
    return clf__fail(m->ctx, CLF_E_SHAPE, "%s: input_ids has %zu positions, more than max_position_embeddings %zu",
                     op, *L, b->P);
  if ((st = clf__check_id_range(m, op, in[IN_IDS], "input_ids", b->V)) != CLF_OK ||
      (st = clf__check_id_range(m, op, in[IN_TT], "token_type_ids", b->T)) != CLF_OK)
    return st;
  return clf__check_id_range(m, op, in[IN_POS], "position_ids", b->P);
}

/* h += the position embeddings: position_ids', RoBERTa's, or 0..L-1. */
static clf_status bert_positions(clf_model *m, const clf__inputs in, size_t B, size_t L, clf_tensor *h) {
  bert *b = m->impl;
  clf_tensor *pos;
  clf_status st;
  if (in[IN_POS]) {
    if ((st = clf__upload_ids(m, &m->ws, CLF__WS_POS, in[IN_POS], B, L, 0, &pos)) != CLF_OK) return st;
  } else if (b->kind->roberta_pos) {
    if ((st = roberta_positions(m, in[IN_IDS], B, L, &pos)) != CLF_OK) return st;
  } else {
    return clf_position_embedding(m->ctx, b->wpe, 0, 1, h, NULL);
  }
  return clf_embedding(m->ctx, b->wpe, pos, 1.0f, 1, h, NULL);
}

/* Checks the inputs, embeds them and runs the encoder: h [B, L, D]. */
static clf_status bert_encode(clf_model *m, const clf__inputs in, size_t *Bp, size_t *Lp, clf_tensor **hp) {
  clf_context *ctx = m->ctx;
  bert *b = m->impl;
  clf__ws *ws = &m->ws;
  clf_status st;
  size_t B = 0, L = 0;
  if ((st = bert_check_inputs(m, in, &B, &L)) != CLF_OK) return st;
  clf_tensor *ids, *tt, *mask = NULL, *h;
  if ((st = clf__upload_ids(m, ws, CLF__WS_IDS, in[IN_IDS], B, L, 0, &ids)) != CLF_OK) return st;
  if (in[IN_MASK] && (st = clf__upload_ids(m, ws, CLF__WS_MASK, in[IN_MASK], B, L, 1, &mask)) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_H, CLF_F32, 3, (size_t[]){B, L, b->D}, &h)) != CLF_OK) return st;

  /* embeddings */
  if ((st = clf_embedding(ctx, b->wte, ids, 1.0f, 0, h, NULL)) != CLF_OK) return st;
  if (b->T && ((st = clf__upload_ids(m, ws, CLF__WS_IDS2, in[IN_TT], B, L, 0, &tt)) != CLF_OK ||
               (st = clf_embedding(ctx, b->tte, tt, 1.0f, 1, h, NULL)) != CLF_OK))
    return st;
  clf__rotary rot = {0}; /* a rotary kind: position_ids, or 0..L-1, rotate q and k in every layer */
  if (b->inv_freq) {
    clf_tensor *pos;
    if ((st = clf__upload_positions(m, ws, in[IN_POS], B, L, &pos)) != CLF_OK) return st;
    rot.pos = pos, rot.inv_freq = b->inv_freq;
  } else if ((st = bert_positions(m, in, B, L, h)) != CLF_OK) {
    return st;
  }
  if ((st = clf__ln_apply(ctx, &b->ln_emb, h, NULL, NULL, NULL, h)) != CLF_OK) return st;

  /* N x post-LN encoder layer */
  clf_attention_mask am = {mask, 0, NULL};
  clf__layer_io io = {&am, NULL, NULL, NULL, NULL, b->inv_freq ? &rot : NULL};
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

/* act(dense(h[:, 0])) [B, 1, out] into workspace `slot` (the first rows in
 * CLF__WS_ROW): the pooler, RoBERTa's and DistilBERT's sequence heads. */
static clf_status first_token_linear(clf_model *m, const clf_tensor *h, size_t B, const clf__linear *l,
                                     clf_activation act, int slot, size_t out, clf_tensor **y) {
  bert *b = m->impl;
  clf_tensor *first;
  clf_status st = clf__ws_get(m->ctx, &m->ws, CLF__WS_ROW, CLF_F32, 3, (size_t[]){B, 1, b->D}, &first);
  if (st != CLF_OK || (st = clf_copy_rows(m->ctx, h, 0, first, 0, B ? 1 : 0, NULL)) != CLF_OK) return st;
  return head_linear(m, first, l, act, slot, B, 1, out, y);
}

/* The sequence classifier's logits [B, 1, n_labels]: classifier(pooled), or
 * RoBERTa's out_proj(tanh(dense(h[:, 0]))), DistilBERT's
 * classifier(relu(pre_classifier(h[:, 0]))). */
static clf_status bert_seq(clf_model *m, const clf_tensor *h, const clf_tensor *pooled, size_t B, clf_tensor **y) {
  bert *b = m->impl;
  const clf_tensor *x = pooled;
  clf_tensor *d;
  clf_status st = CLF_OK;
  if (b->seq_dense.w && (st = first_token_linear(m, h, B, &b->seq_dense, b->seq_act, CLF__WS_ENC, b->D, &d)) ==
                            CLF_OK)
    x = d;
  if (st != CLF_OK) return st;
  return head_linear(m, x, &b->cls, CLF_ACT_NONE, CLF__WS_LOGITS, B, 1, b->n_labels, y);
}

/* logits [B, L, V] = decoder(LN(act(dense(h)))) (slots A and LOGITS). */
static clf_status bert_mlm(clf_model *m, const clf_tensor *h, size_t B, size_t L, clf_tensor **logits) {
  bert *b = m->impl;
  clf_tensor *t;
  clf_status st = head_linear(m, h, &b->mlm_dense, b->mlm_act, CLF__WS_A, B, L, b->D, &t);
  if (st != CLF_OK || (st = clf__ln_apply(m->ctx, &b->mlm_ln, t, NULL, NULL, NULL, t)) != CLF_OK) return st;
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
  if (st == CLF_OK && (at[OUT_POOL] || at[OUT_NSP] || (at[OUT_SEQ] && !b->seq_dense.w)))
    st = first_token_linear(m, h, B, &b->pooler, CLF_ACT_TANH, WS_POOLED, b->D, &pooled);
  if (st == CLF_OK && at[OUT_POOL]) st = bert_put(m, pooled, "pooler_output", 0, at[OUT_POOL]);
  if (st == CLF_OK && at[OUT_MLM] && (st = bert_mlm(m, h, B, L, &t)) == CLF_OK)
    st = bert_put(m, t, b->head == HEAD_PRE ? "prediction_logits" : "logits", 1, at[OUT_MLM]);
  if (st == CLF_OK && at[OUT_NSP] &&
      (st = head_linear(m, pooled, &b->nsp, CLF_ACT_NONE, CLF__WS_ENC, B, 1, 2, &t)) == CLF_OK)
    st = bert_put(m, t, b->head == HEAD_PRE ? "seq_relationship_logits" : "logits", 0, at[OUT_NSP]);
  if (st == CLF_OK && at[OUT_SEQ] && (st = bert_seq(m, h, pooled, B, &t)) == CLF_OK)
    st = bert_put(m, t, "logits", 0, at[OUT_SEQ]);
  if (st == CLF_OK && (at[OUT_TOK] || at[OUT_START] || at[OUT_END]) &&
      (st = head_linear(m, h, &b->cls, CLF_ACT_NONE, CLF__WS_LOGITS, B, L, b->n_labels, &t)) == CLF_OK)
    st = at[OUT_TOK] ? bert_put(m, t, "logits", 1, at[OUT_TOK]) : bert_put_qa(m, t, at[OUT_START], at[OUT_END]);
  return st;
}

/* config.json keys */
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
    CLF__OPT(bert_dims, pad, "pad_token_id", INT, 1),
    CLF__BERT_POOLING_KEYS,
};
/* DistilBERT's names for the same (no token types; LayerNorm eps 1e-12;
 * sinusoidal_pos_embds needs nothing: the table is in the checkpoint) */
static const clf__config_key distil_keys[] = {
    CLF__REQ(bert_dims, V, "vocab_size", INT),
    CLF__REQ(bert_dims, D, "dim", INT),
    CLF__REQ(bert_dims, H, "n_heads", INT),
    CLF__REQ(bert_dims, N, "n_layers", INT),
    CLF__REQ(bert_dims, F, "hidden_dim", INT),
    CLF__OPT(bert_dims, P, "max_position_embeddings", INT, 512),
    CLF__OPT_STR(bert_dims, act, "activation", "gelu"),
    CLF__OPT(bert_dims, n_labels, "num_labels", INT, 0),
    CLF__OPT(bert_dims, tie, "tie_word_embeddings", BOOL, 1),
    CLF__BERT_POOLING_KEYS,
};

static clf_status bert_check(clf_context *ctx, const bert_kind *k, const bert_dims *d, clf_activation *act) {
  if (d->V <= 0 || d->D <= 0 || d->H <= 0 || d->D % d->H || d->N < 0 || d->F <= 0 || d->P <= 0 ||
      (k->token_types ? d->T <= 0 : d->T != 0))
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: %s config has invalid sizes (%s: %ld, %ld, %ld, %ld; "
                     "max_position_embeddings %ld)", k->type, k->sizes, d->V, d->D, d->H, d->F, d->P);
  if (d->pe_type && strcmp(d->pe_type, "absolute") != 0)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_model_load: %s position_embedding_type \"%s\" is not supported",
                     k->type, d->pe_type);
  if (k->gated ? !d->act || strcmp(d->act, "swiglu") != 0 : clf_activation_from_name(d->act, act) != CLF_OK)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_model_load: %s %s \"%s\" is not supported%s", k->type, k->act_key,
                     d->act ? d->act : "(null)", k->gated ? " (swiglu)" : "");
  if (k->gated) *act = CLF_ACT_SILU;
  if (k->rotary && (!(d->theta > 0) || !isfinite(d->theta) || (d->D / d->H) % 2))
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: %s rotary positions need a finite positive base (%g) and an "
                     "even head size (%ld)", k->type, d->theta, d->D / d->H);
  const long pool = d->pooling >= 0 ? d->pooling : d->pool_dflt;
  if (pool < 0 || pool >= CLF__POOL_COUNT)
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: %s pooling_type %ld is not one of 0..%d (none, mean, cls, "
                     "last, rank)", k->type, pool, CLF__POOL_COUNT - 1);
  if (k->roberta_pos && (d->pad < 0 || d->pad >= d->P))
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: %s pad_token_id %ld (padding_idx) is not a row of the %ld "
                     "position embeddings", k->type, d->pad, d->P);
  return CLF_OK;
}

/* A rotary kind's inverse frequencies [Dh / 2] at base theta (RoPE's
 * default, llama.h), on the device. */
static clf_status bert_rotary(clf_model *m, bert *b, double theta) {
  const size_t half = b->D / b->H / 2;
  const clf__rope r = {.type = CLF__ROPE_DEFAULT, .dim = 2 * half, .theta = theta};
  clf_status st;
  if ((st = clf_tensor_create(m->ctx, CLF_F32, 1, (size_t[]){half}, &b->inv_freq)) != CLF_OK ||
      (st = clf__params_add(m->ctx, &m->params, b->inv_freq)) != CLF_OK)
    return st;
  float *f = malloc(half * sizeof *f + 1);
  if (!f) return clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_load: out of host memory");
  clf__rope_inv_freq(&r, 0, f);
  st = clf_tensor_upload(m->ctx, b->inv_freq, f, half * sizeof *f);
  free(f);
  return st;
}

/* embeddings.*, the layers, and the pooler under prefix pf: optional
 * (BertModel(add_pooling_layer=False)) unless `need_pooler`. */
static clf_status bert_load_weights(clf_model *m, bert *b, clf_activation act, const char *pf, int need_pooler,
                                    const clf__weights *w) {
  clf_context *ctx = m->ctx;
  clf__params *p = &m->params;
  const size_t d = b->D, dh = b->D / b->H;
  const clf__block_spec spec = clf__spec_encoder(d, b->F, b->eps, 1, clf__linear_prefers_in_out(ctx));
  char n1[256], n2[256];
  clf_status st;
  if ((st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.word_embeddings.weight"), 2,
                       (size_t[]){b->V, d}, &b->wte)) != CLF_OK ||
      (!b->kind->rotary && /* a rotary kind has no position table */
       (st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.position_embeddings.weight"), 2,
                        (size_t[]){b->P, d}, &b->wpe)) != CLF_OK) ||
      (b->T && (st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.token_type_embeddings.weight"), 2,
                                (size_t[]){b->T, d}, &b->tte)) != CLF_OK) ||
      (st = clf__load_ln(ctx, w, p, clf__wn(n1, sizeof n1, pf, "%s", b->kind->emb_ln ? b->kind->emb_ln :
                                            "embeddings.LayerNorm"), d, b->eps, &b->ln_emb)) != CLF_OK)
    return st;
  for (size_t i = 0; i < b->n_layers; i++) {
    clf__layer *l = &b->layers[i];
    l->self.heads = b->H, l->self.dh = dh, l->self.scale = 1.0f / sqrtf((float)dh);
    l->mlp.act = act, l->mlp.gated = b->kind->gated;
    if ((st = clf__load_rows(ctx, w, p, clf__wn(n1, sizeof n1, pf, "%s.%zu.", b->kind->stack, i),
                             b->kind->rows, b->kind->n_rows, &spec, l)) != CLF_OK)
      return st;
  }
  if (!need_pooler && !clf__weights_has(w, clf__wn(n1, sizeof n1, pf, "pooler.dense.weight"))) return CLF_OK;
  return clf__load_linear(ctx, w, p, clf__wn(n1, sizeof n1, pf, "pooler.dense.weight"),
                          clf__wn(n2, sizeof n2, pf, "pooler.dense.bias"), d, d, CLF_WEIGHT_OUT_IN, 0,
                          &b->pooler); /* [D, D] */
}

/* The MLM head (BERT's cls.predictions: transform (dense, hidden_act,
 * LayerNorm) and the decoder; RoBERTa's lm_head: dense, gelu, layer_norm,
 * decoder; DistilBERT's vocab_transform, activation, vocab_layer_norm,
 * vocab_projector), the decoder tied to the word embeddings as transformers
 * ties it (tie_word_embeddings: the decoder's weight, stored or not, is not
 * read), with its bias under either name. */
static clf_status bert_load_mlm(clf_model *m, bert *b, const bert_dims *dm, clf_activation act, const char *pf,
                                const clf__weights *w) {
  clf_context *ctx = m->ctx;
  clf__params *p = &m->params;
  const bert_kind *k = b->kind;
  const char *const bias[] = {k->mlm[3], k->mlm_bias2, NULL};
  const char *bn = clf__weights_pick(w, bias);
  char n1[256], n2[256];
  clf_status st;
  b->mlm_act = k->mlm_gelu ? CLF_ACT_GELU : act;
  if ((st = clf__load_linear(ctx, w, p, clf__wn(n1, sizeof n1, "", "%s.weight", k->mlm[0]),
                             clf__wn(n2, sizeof n2, "", "%s.bias", k->mlm[0]), b->D, b->D, CLF_WEIGHT_OUT_IN, 0,
                             &b->mlm_dense)) != CLF_OK ||
      (st = clf__load_ln(ctx, w, p, k->mlm[1], b->D, b->eps, &b->mlm_ln)) != CLF_OK ||
      (st = clf__param(ctx, w, p, bn ? bn : bias[0], 1, &b->V, &b->mlm_dec.b)) != CLF_OK)
    return st;
  b->mlm_dec.layout = CLF_WEIGHT_OUT_IN;
  if (!dm->tie) /* untied: the decoder's own weight */
    return clf__load_weight(ctx, w, p, k->mlm[2], b->V, b->D, CLF_WEIGHT_OUT_IN, &b->mlm_dec.w);
  /* wte itself in f32, a copy of it in another weight type (the lookup stays f32) */
  b->mlm_dec.w = b->wte;
  if (p->wtype == CLF_F32) return CLF_OK;
  return clf__load_weight(ctx, w, p, clf__wn(n1, sizeof n1, pf, "embeddings.word_embeddings.weight"), b->V, b->D,
                          CLF_WEIGHT_OUT_IN, &b->mlm_dec.w);
}

/* A head's [out, D] linear `name`.weight / .bias. */
static clf_status bert_load_linear(clf_model *m, const clf__weights *w, const char *name, size_t out, clf__linear *l) {
  char n1[256], n2[256];
  return clf__load_linear(m->ctx, w, &m->params, clf__wn(n1, sizeof n1, "", "%s.weight", name),
                          clf__wn(n2, sizeof n2, "", "%s.bias", name), out, ((bert *)m->impl)->D,
                          CLF_WEIGHT_OUT_IN, 0, l);
}

/* The head of b->head's weights (top-level names, as transformers saves them)
 * and the model's output names. */
static clf_status bert_load_head(clf_model *m, bert *b, const bert_dims *dm, clf_activation act, const char *pf,
                                 const clf__weights *w) {
  const bert_kind *k = b->kind;
  const int hd = b->head;
  clf_status st = CLF_OK;
  if (hd == HEAD_MLM || hd == HEAD_PRE) st = bert_load_mlm(m, b, dm, act, pf, w);
  if (st == CLF_OK && (hd == HEAD_PRE || hd == HEAD_NSP))
    st = bert_load_linear(m, w, "cls.seq_relationship", 2, &b->nsp); /* [2, D] */
  if (st == CLF_OK && hd == HEAD_SEQ && k->seq_dense) {
    b->seq_act = k->seq_act;
    st = bert_load_linear(m, w, k->seq_dense, b->D, &b->seq_dense); /* [D, D] */
  }
  if (st == CLF_OK && (hd == HEAD_SEQ || hd == HEAD_TOK))
    st = bert_load_linear(m, w, hd == HEAD_SEQ ? k->seq_out : "classifier", b->n_labels, &b->cls);
  if (st == CLF_OK && hd == HEAD_QA) {
    b->n_labels = 2;
    st = bert_load_linear(m, w, "qa_outputs", 2, &b->cls);
  }
  if (st != CLF_OK) return st;
  size_t n = 0;
  for (int i = 0; i < 2 && bert_head_outs[hd].names[i]; i++, n++)
    b->out_names[n] = bert_head_outs[hd].names[i], b->out_kind[n] = bert_head_outs[hd].kinds[i];
  b->out_names[n] = "last_hidden_state", b->out_kind[n++] = OUT_LHS;
  if (b->pooler.w) b->out_names[n] = "pooler_output", b->out_kind[n++] = OUT_POOL;
  m->out_names = b->out_names;
  m->n_out = n;
  return CLF_OK;
}

/* The head: the first of the kind's heads that config.json's architectures
 * lists (none: the base model). */
static int bert_pick_head(const bert_kind *k, const clf__config *c) {
  for (int i = 1; i < HEAD_COUNT; i++)
    if (k->archs[i] && clf__config_has_arch(c, k->archs[i])) return i;
  return HEAD_BASE;
}

/* num_labels: id2label's, else config's num_labels, else 2.  Weights under
 * the kind's prefix ("bert.") or none (the base model saved alone). */
clf_status clf__bert_load(clf_model *m, const bert_kind *k, const void *dims, const clf__config *c,
                          const clf__weights *w) {
  const bert_dims *d = dims;
  clf_activation act;
  clf_status st;
  if ((st = bert_check(m->ctx, k, d, &act)) != CLF_OK) return st;
  bert *b = calloc(1, sizeof *b);
  if (!b || !(b->layers = calloc((size_t)d->N + 1, sizeof *b->layers))) {
    free(b);
    return clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_load: out of host memory");
  }
  m->impl = b;
  m->destroy = bert_destroy;
  m->run = bert_run;
  m->in_names = bert_inputs;
  m->n_in = k->token_types ? 4 : 2;
  m->pooling = (int)(d->pooling >= 0 ? d->pooling : d->pool_dflt);
  b->kind = k;
  b->V = d->V, b->D = d->D, b->H = d->H, b->F = d->F, b->P = d->P, b->T = d->T, b->n_layers = d->N;
  b->pad = d->pad, b->eps = k->eps ? k->eps : (float)d->eps;
  b->head = bert_pick_head(k, c);
  b->n_labels = m->n_labels ? m->n_labels : d->n_labels > 0 ? (size_t)d->n_labels : 2;
  char probe0[64];
  const char *const probe[] = {clf__wn(probe0, sizeof probe0, k->prefix, "embeddings.word_embeddings.weight"),
                               "embeddings.word_embeddings.weight", NULL};
  const char *found = clf__weights_pick(w, probe);
  const char *pf = found && strcmp(found, probe[0]) == 0 ? k->prefix : "";
  if ((st = bert_load_weights(m, b, act, pf, bert_head_outs[b->head].pooler && !k->seq_dense, w)) != CLF_OK ||
      (k->rotary && (st = bert_rotary(m, b, d->theta)) != CLF_OK))
    return st;
  return bert_load_head(m, b, d, act, pf, w);
}

/* the layers' rows; the heads' weights [out, in] */
void clf__bert_gemms(const bert_kind *k, const void *dims, const clf__config *c, size_t T, clf__gemm_list *l) {
  const bert_dims *d = dims;
  const clf__block_spec spec = clf__spec_encoder((size_t)d->D, (size_t)d->F, 0, 1, 1);
  clf__rows_gemms(k->rows, k->n_rows, &spec, T, d->N, l);
  const int hd = bert_pick_head(k, c);
  if (hd == HEAD_MLM || hd == HEAD_PRE) {
    clf__gemm_add(l, T, d->D, d->D, 1, 1);
    clf__gemm_add(l, T, d->V, d->D, 1, 1);
  }
  if (hd == HEAD_TOK) clf__gemm_add(l, T, d->n_labels > 0 ? d->n_labels : 2, d->D, 1, 1);
  if (hd == HEAD_QA) clf__gemm_add(l, T, 2, d->D, 1, 1);
}

#define BERT_KIND_HOOKS(name, kind)                                                                                \
  static clf_status name##_load(clf_model *m, const void *dims, const clf__config *c, const clf__weights *w) {     \
    return clf__bert_load(m, &kind, dims, c, w);                                                                   \
  }                                                                                                                \
  static void name##_gemms(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l) {                  \
    clf__bert_gemms(&kind, dims, c, T, l);                                                                         \
  }
BERT_KIND_HOOKS(bert, bert_kind_bert)
BERT_KIND_HOOKS(roberta, bert_kind_roberta)
BERT_KIND_HOOKS(xlmr, bert_kind_xlmr)
BERT_KIND_HOOKS(distil, bert_kind_distil)

/* llama.cpp's bert (convert_hf_to_gguf's BertModel): a BertModel without
 * its pooler, as sentence-embedding models ship for llama.cpp's embedding
 * server; type_vocab_size from tokenizer.ggml.token_type_count; the pooling
 * the file states, none when it states nothing. */
static const clf__gguf_key bert_gguf_keys[] = {
    CLF__GGUF_INT_KEY("%s.embedding_length", "hidden_size", 1, 1, 1 << 16),
    CLF__GGUF_INT_KEY("%s.feed_forward_length", "intermediate_size", 1, 1, 1 << 18),
    CLF__GGUF_INT_KEY("%s.attention.head_count", "num_attention_heads", 1, 1, 4096),
    CLF__GGUF_INT_KEY("%s.block_count", "num_hidden_layers", 1, 0, 4096),
    CLF__GGUF_INT_KEY("%s.context_length", "max_position_embeddings", 1, 1, 1 << 20),
    CLF__GGUF_NUM_KEY("%s.attention.layer_norm_epsilon", "layer_norm_eps", EPSILON),
    CLF__GGUF_INT_KEY("%s.pooling_type", "pooling_type", 0, 0, CLF__POOL_COUNT - 1),
    CLF__GGUF_INT_KEY("tokenizer.ggml.token_type_count", "type_vocab_size", 0, 1, 1 << 16),
};
static const clf__gguf_name bert_gguf_whole[] = {
    {"token_embd.weight", "embeddings.word_embeddings.weight"},
    {"position_embd.weight", "embeddings.position_embeddings.weight"},
    {"token_types.weight", "embeddings.token_type_embeddings.weight"},
    {"token_embd_norm.weight", "embeddings.LayerNorm.weight"},
    {"token_embd_norm.bias", "embeddings.LayerNorm.bias"},
};
static const clf__gguf_name bert_gguf_layer[] = {
    {"attn_q", "attention.self.query"},
    {"attn_k", "attention.self.key"},
    {"attn_v", "attention.self.value"},
    {"attn_output", "attention.output.dense"},
    {"attn_output_norm", "attention.output.LayerNorm"},
    {"ffn_up", "intermediate.dense"},
    {"ffn_down", "output.dense"},
    {"layer_output_norm", "output.LayerNorm"},
};
static const clf__gguf_arch bert_gguf = {"bert", "BertModel", bert_gguf_keys, CLF__ARRAY_LEN(bert_gguf_keys), 0,
                                         "{\"pooling_type_default\": 0}", NULL, bert_gguf_whole,
                                         CLF__ARRAY_LEN(bert_gguf_whole), "encoder.layer", bert_gguf_layer,
                                         CLF__ARRAY_LEN(bert_gguf_layer)};

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
                                      bert_gemms,
                                      &bert_gguf};
/* RobertaModel (last_hidden_state, pooler_output when stored) and the
 * heads MaskedLM, SequenceClassification, TokenClassification,
 * QuestionAnswering; XLMRoberta* the same. */
const clf__family clf__roberta_family = {"roberta",
                                         {"RobertaModel", "RobertaForMaskedLM", "RobertaForSequenceClassification",
                                          "RobertaForTokenClassification", "RobertaForQuestionAnswering", NULL},
                                         bert_keys,
                                         CLF__ARRAY_LEN(bert_keys),
                                         sizeof(bert_dims),
                                         roberta_load,
                                         roberta_gemms};
const clf__family clf__xlm_roberta_family = {
    "xlm-roberta",
    {"XLMRobertaModel", "XLMRobertaForMaskedLM", "XLMRobertaForSequenceClassification",
     "XLMRobertaForTokenClassification", "XLMRobertaForQuestionAnswering", NULL},
    bert_keys,
    CLF__ARRAY_LEN(bert_keys),
    sizeof(bert_dims),
    xlmr_load,
    xlmr_gemms};
/* DistilBertModel (last_hidden_state) and the same four heads. */
const clf__family clf__distilbert_family = {
    "distilbert",
    {"DistilBertModel", "DistilBertForMaskedLM", "DistilBertForSequenceClassification",
     "DistilBertForTokenClassification", "DistilBertForQuestionAnswering", NULL},
    distil_keys,
    CLF__ARRAY_LEN(distil_keys),
    sizeof(bert_dims),
    distil_load,
    distil_gemms};
