/* gpt2.c - GPT2Model / GPT2LMHeadModel: wte + wpe, N pre-LN blocks
 * (fused c_attn, causal + padding mask, gelu_new MLP), ln_f, tied LM head,
 * generating through the decoder runtime (decoder.c); GPT2ForSequenceClassification
 * (score at the last non-padding token) and GPT2ForTokenClassification.
 */
#include "decoder.h"
#include "family.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct gpt2 {
  clf__decoder dec;   /* first: the runtime's (head [V, D]: lm_head.weight, or wte when tied) */
  size_t V, D, H, F, P, n_layers;
  clf_tensor *wte;  /* [V, D] */
  clf_tensor *wpe;  /* [P, D] */
  clf__layer *layers;
  clf__ln ln_f;     /* [D] */
  int task;           /* enum gpt2_task: what "logits" is */
  clf__linear cls;    /* [n_labels, D] score (no bias) or classifier */
  size_t n_labels;
} gpt2;

static const char *const gpt2_outputs[] = {"logits", "last_hidden_state"};
enum { IN_IDS, IN_MASK, IN_POS };
enum gpt2_task { TASK_LM, TASK_SEQ, TASK_TOK };

/* wte (+ wpe at the positions, or past..) -> N pre-LN blocks -> ln_f. */
static clf_status gpt2_body(clf_model *m, const clf__step *s, clf_tensor **out) {
  clf_context *ctx = m->ctx;
  gpt2 *g = m->impl;
  clf_tensor *h, *a;
  clf_status st;
  if ((st = clf__decoder_stream(m, s, &h, &a)) != CLF_OK ||
      (st = clf_embedding(ctx, g->wte, s->ids, 1.0f, 0, h, NULL)) != CLF_OK ||
      (st = s->pos ? clf_embedding(ctx, g->wpe, s->pos, 1.0f, 1, h, NULL)
                   : clf_position_embedding(ctx, g->wpe, s->past, 1, h, NULL)) != CLF_OK)
    return st;
  const clf_attention_mask mask = {s->mask, 1, NULL};
  *out = a;
  return clf__decoder_stack(m, g->layers, g->n_layers, &g->ln_f, s, &mask, NULL, h, a);
}

/* GPT2ForSequenceClassification's rows as transformers 4.40 picks them:
 * the token before the first pad_token_id of each row, modulo L (so the
 * last token when the row has none, or starts with one); the last token
 * for all rows without pad_token_id, which transformers allows at batch 1
 * only.  CLF_E_INVALID_ARG for a larger batch without it. */
static clf_status gpt2_seq_rows(clf_model *m, const clf_array *ids, size_t B, size_t L, int64_t *rows) {
  if (!m->gen.has_pad && B > 1)
    return clf__fail(m->ctx, CLF_E_INVALID_ARG, "clf_model_run: GPT2ForSequenceClassification cannot classify a "
                     "batch of %zu without pad_token_id in config.json (the last token of each row is found by "
                     "it); run the rows one at a time or set pad_token_id", B);
  if (!L && B)
    return clf__fail(m->ctx, CLF_E_SHAPE, "clf_model_run: GPT2ForSequenceClassification needs at least one token");
  for (size_t b = 0; b < B; b++) {
    size_t first = 0; /* argmax of (ids == pad): 0 when there is none */
    for (size_t l = 0; m->gen.has_pad && l < L; l++) {
      if (clf__id_at(ids, b * L + l) == m->gen.pad) {
        first = l;
        break;
      }
    }
    rows[b] = (int64_t)((first + L - 1) % L);
  }
  return CLF_OK;
}

/* logits [B, num_labels] = score(a[b, rows[b]]): the rows gathered on the
 * device, then one GEMM. */
static clf_status gpt2_seq_logits(clf_model *m, const clf_array *ids, const clf_tensor *a, size_t B, size_t L,
                                  clf_array *res) {
  gpt2 *g = m->impl;
  clf__ws *ws = &m->ws;
  int64_t *rows = malloc(B * sizeof *rows + 1);
  if (!rows) return clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_run: out of host memory");
  clf_tensor *idx, *row, *o;
  clf_status st = gpt2_seq_rows(m, ids, B, L, rows);
  if (st == CLF_OK && (st = clf__ws_get(m->ctx, ws, CLF__WS_IDS2, CLF_I64, 2, (size_t[]){B, 1}, &idx)) == CLF_OK)
    st = clf_tensor_upload(m->ctx, idx, rows, B * sizeof *rows);
  free(rows);
  if (st != CLF_OK ||
      (st = clf__ws_get(m->ctx, ws, CLF__WS_ROW, CLF_F32, 3, (size_t[]){B, 1, g->D}, &row)) != CLF_OK ||
      (st = clf__ws_get(m->ctx, ws, CLF__WS_LOGITS, CLF_F32, 3, (size_t[]){B, 1, g->n_labels}, &o)) != CLF_OK ||
      (st = clf_gather_rows(m->ctx, a, 0, idx, row, 0, NULL)) != CLF_OK ||
      (st = clf_linear(m->ctx, row, g->cls.w, CLF_WEIGHT_OUT_IN, NULL, CLF_ACT_NONE, o, NULL)) != CLF_OK ||
      (st = clf__download(m, o, "logits", res)) != CLF_OK)
    return st;
  res->ndim = 2; /* [B, num_labels] */
  res->shape[1] = g->n_labels;
  res->shape[2] = 0;
  return CLF_OK;
}

static clf_status gpt2_run(clf_model *m, const clf__inputs in, const int *want, clf_array *res) {
  gpt2 *g = m->impl;
  clf_tensor *a, *logits;
  clf_status st;
  size_t B = 0, L = 0;
  int64_t max_pos = 0;
  if ((st = clf__decoder_check(m, in, &B, &L, &max_pos)) != CLF_OK) return st;
  if (want[0] && g->task == TASK_SEQ && !m->gen.has_pad && B > 1) return gpt2_seq_rows(m, in[IN_IDS], B, L, NULL);
  if ((st = clf__decoder_forward(m, in, B, L, max_pos, &a)) != CLF_OK) return st;
  if (want[1] && (st = clf__download(m, a, "last_hidden_state", &res[1])) != CLF_OK) return st;
  if (!want[0]) return CLF_OK;
  if (g->task == TASK_SEQ) return gpt2_seq_logits(m, in[IN_IDS], a, B, L, &res[0]);
  if (g->task == TASK_LM) return clf__decoder_logits(m, a, &res[0]);
  if ((st = clf__ws_get(m->ctx, &m->ws, CLF__WS_LOGITS, CLF_F32, 3, (size_t[]){B, L, g->n_labels}, &logits)) !=
          CLF_OK ||
      (st = clf_linear(m->ctx, a, g->cls.w, CLF_WEIGHT_OUT_IN, g->cls.b, CLF_ACT_NONE, logits, NULL)) != CLF_OK)
    return st;
  return clf__download(m, logits, "logits", &res[0]);
}

/* config.json keys */
typedef struct gpt2_dims {
  long V, D, H, N, P, F;
  double eps;
  const char *act;
  int scale_w, inv_idx, upcast;
} gpt2_dims;
static const clf__config_key gpt2_keys[] = {
    CLF__REQ(gpt2_dims, V, "vocab_size", INT),
    CLF__REQ(gpt2_dims, D, "n_embd", INT),
    CLF__REQ(gpt2_dims, H, "n_head", INT),
    CLF__REQ(gpt2_dims, N, "n_layer", INT),
    CLF__REQ(gpt2_dims, P, "n_positions", INT),
    CLF__OPT(gpt2_dims, F, "n_inner", INT, 0), /* 0: 4 n_embd */
    CLF__OPT(gpt2_dims, eps, "layer_norm_epsilon", FLOAT, 1e-5),
    CLF__OPT_STR(gpt2_dims, act, "activation_function", "gelu_new"),
    CLF__OPT(gpt2_dims, scale_w, "scale_attn_weights", BOOL, 1),
    CLF__OPT(gpt2_dims, inv_idx, "scale_attn_by_inverse_layer_idx", BOOL, 0),
    /* only changes the precision of the fp16 path */
    CLF__OPT(gpt2_dims, upcast, "reorder_and_upcast_attn", BOOL, 0),
};

/* the weights of h.N.: Conv1D weights stored [in, out]; attn.bias /
 * attn.masked_bias are mask buffers, not read */
static const clf__weight_row gpt2_layer_rows[] = {
    CLF__LIN(clf__layer, self.qkv, "attn.c_attn", 3D, D, YES), /* [D, 3D] */
    CLF__LIN(clf__layer, self.o, "attn.c_proj", D, D, YES),    /* [D, D] */
    CLF__LIN(clf__layer, mlp.fc1, "mlp.c_fc", F, D, YES),      /* [D, F] */
    CLF__LIN(clf__layer, mlp.fc2, "mlp.c_proj", D, F, YES),    /* [F, D] */
    CLF__LN(clf__layer, ln_self, "ln_1"),
    CLF__LN(clf__layer, ln_mlp, "ln_2"),
};

static long gpt2_ffn(const gpt2_dims *d) { return d->F == 0 ? 4 * d->D : d->F; }

static clf_status gpt2_check(clf_context *ctx, const gpt2_dims *d, clf_activation *act) {
  const long F = gpt2_ffn(d);
  if (d->V <= 0 || d->D <= 0 || d->H <= 0 || d->D % d->H || d->N < 0 || d->P <= 0 || F <= 0)
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: gpt2 config has invalid sizes (vocab_size %ld, n_embd %ld, "
                     "n_head %ld, n_inner %ld)", d->V, d->D, d->H, F);
  if (clf_activation_from_name(d->act, act) != CLF_OK)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_model_load: gpt2 activation_function \"%s\" is not supported",
                     d->act);
  return CLF_OK;
}

/* The classifier of a task head: score.weight [num_labels, D] (no bias) or
 * classifier.weight/.bias; num_labels from id2label (else 2, transformers'
 * default). */
static clf_status gpt2_load_task(clf_model *m, gpt2 *g, const clf__weights *w) {
  g->n_labels = m->n_labels ? m->n_labels : 2;
  if (g->task == TASK_SEQ)
    return clf__load_linear(m->ctx, w, &m->params, "score.weight", NULL, g->n_labels, g->D, CLF_WEIGHT_OUT_IN, 0,
                            &g->cls);
  return clf__load_linear(m->ctx, w, &m->params, "classifier.weight", "classifier.bias", g->n_labels, g->D,
                          CLF_WEIGHT_OUT_IN, 0, &g->cls);
}

/* The layers' rows are read with: c_attn biased; Conv1D [in, out], kept
 * so on a GPU, transposed to [out, in] on a CPU (clf__decoder_in_out). */
static clf__block_spec gpt2_spec(size_t D, size_t F, float eps, int in_out) {
  clf__block_spec s = {.eps = eps, .qkv_bias = 1, .layout = CLF_WEIGHT_IN_OUT, .in_out_f32 = in_out};
  clf__spec_dims(&s, D, F, D, D);
  return s;
}

/* wte, wpe, the blocks, ln_f and the (tied) LM head under prefix pf. */
static clf_status gpt2_load_weights(clf_model *m, gpt2 *g, const gpt2_dims *dm, clf_activation act, const char *pf,
                                    const clf__weights *w) {
  clf_context *ctx = m->ctx;
  clf__params *p = &m->params;
  const size_t d = g->D, dh = g->D / g->H;
  const clf__block_spec spec = gpt2_spec(d, g->F, (float)dm->eps, clf__decoder_in_out(ctx));
  char n1[256];
  clf_status st;
  if ((st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "wte.weight"), 2, (size_t[]){g->V, d}, &g->wte)) !=
          CLF_OK ||
      (st = clf__param(ctx, w, p, clf__wn(n1, sizeof n1, pf, "wpe.weight"), 2, (size_t[]){g->P, d}, &g->wpe)) !=
          CLF_OK ||
      (st = clf__load_ln(ctx, w, p, clf__wn(n1, sizeof n1, pf, "ln_f"), d, (float)dm->eps, &g->ln_f)) != CLF_OK)
    return st;
  for (size_t i = 0; i < g->n_layers; i++) {
    clf__layer *l = &g->layers[i];
    l->self.heads = g->H, l->self.dh = dh;
    l->self.scale = (dm->scale_w ? 1.0f / sqrtf((float)dh) : 1.0f) / (dm->inv_idx ? (float)(i + 1) : 1.0f);
    l->mlp.act = act;
    if ((st = clf__load_rows(ctx, w, p, clf__wn(n1, sizeof n1, pf, "h.%zu.", i), gpt2_layer_rows,
                             CLF__ARRAY_LEN(gpt2_layer_rows), &spec, l)) != CLF_OK)
      return st;
  }
  if (g->task != TASK_LM) return gpt2_load_task(m, g, w);
  /* lm_head.weight [V, D], tied to wte when absent */
  return clf__decoder_load_head(m, w, "lm_head.weight", !clf__weights_has(w, "lm_head.weight"),
                                clf__wn(n1, sizeof n1, pf, "wte.weight"), g->wte);
}

static clf_status gpt2_load(clf_model *m, const void *dims, const clf__config *c, const clf__weights *w) {
  const gpt2_dims *d = dims;
  clf_activation act;
  clf_status st;
  if ((st = gpt2_check(m->ctx, d, &act)) != CLF_OK) return st;
  gpt2 *g = clf__model_calloc(m, 1, sizeof *g);
  if (!g || !(g->layers = clf__model_calloc(m, (size_t)d->N + 1, sizeof *g->layers))) return CLF_E_OUT_OF_MEMORY;
  m->impl = g;
  g->task = clf__config_has_arch(c, "GPT2ForSequenceClassification") ? TASK_SEQ
            : clf__config_has_arch(c, "GPT2ForTokenClassification")  ? TASK_TOK
                                                                     : TASK_LM;
  g->V = d->V, g->D = d->D, g->H = d->H, g->F = gpt2_ffn(d), g->P = d->P, g->n_layers = d->N;
  g->dec = (clf__decoder){.body = gpt2_body, .ws = &m->ws, .V = g->V, .D = g->D, .kv_heads = g->H,
                          .dh = g->D / g->H, .limit = g->P, .limit_key = "n_positions"};
  if ((st = clf__decoder_attach(m, &g->dec, g->n_layers, 0)) != CLF_OK) return st;
  m->run = gpt2_run;
  m->in_names = clf__decoder_inputs;
  m->n_in = 3;
  m->out_names = gpt2_outputs;
  m->n_out = 2;
  m->vocab = g->task == TASK_LM ? (size_t)d->V : 0;
  m->in_vocab = d->V;
  m->max_positions = d->P;
  const char *const probe[] = {"transformer.wte.weight", "wte.weight", NULL};
  const char *found = clf__weights_pick(w, probe);
  return gpt2_load_weights(m, g, d, act, found && strcmp(found, probe[0]) == 0 ? "transformer." : "", w);
}

/* the layers' rows; the LM head over the tied wte [V, D] */
static void gpt2_gemms(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l) {
  const gpt2_dims *d = dims;
  const clf__block_spec spec = gpt2_spec((size_t)d->D, (size_t)gpt2_ffn(d), 0, 0);
  clf__rows_gemms(gpt2_layer_rows, CLF__ARRAY_LEN(gpt2_layer_rows), &spec, T, d->N, l);
  if (clf__config_has_arch(c, "GPT2LMHeadModel")) clf__gemm_add(l, T, d->V, d->D, 1, 1);
}

/* GGUF: gpt2's GGUF_CONFIG_MAPPING (but context_length sizes n_positions,
 * the position table, and feed_forward_length n_inner) and
 * GGUF_TENSOR_MAPPING.  The head is the token table, whatever output.weight
 * holds: convert_hf_to_gguf writes a copy there, skipped on purpose. */
static const clf__gguf_key gpt2_gguf_keys[] = {
    CLF__GGUF_INT_KEY("%s.context_length", "n_positions", 1, 1, 1LL << 30),
    CLF__GGUF_INT_KEY("%s.block_count", "n_layer", 1, 1, 4096),
    CLF__GGUF_INT_KEY("%s.feed_forward_length", "n_inner", 0, 1, 1LL << 24),
    CLF__GGUF_INT_KEY("%s.embedding_length", "n_embd", 1, 1, 1LL << 20),
    CLF__GGUF_INT_KEY("%s.attention.head_count", "n_head", 1, 1, 4096),
    CLF__GGUF_NUM_KEY("%s.attention.layer_norm_epsilon", "layer_norm_epsilon", EPSILON),
    CLF__GGUF_INT_KEY("%s.vocab_size", "vocab_size", 0, 1, 1LL << 31),
};
static const clf__gguf_name gpt2_gguf_whole[] = {
    {"token_embd.weight", "transformer.wte.weight"},   {"position_embd.weight", "transformer.wpe.weight"},
    {"output_norm.weight", "transformer.ln_f.weight"}, {"output_norm.bias", "transformer.ln_f.bias"},
    {"output.weight", NULL, CLF__GGUF_COPY},
};
/* The Conv1D weights are [in, out] in transformers, [out, in] in the file. */
static const clf__gguf_name gpt2_gguf_layer[] = {
    {"attn_norm", "ln_1"},
    {"ffn_norm", "ln_2"},
    {"attn_qkv", "attn.c_attn", CLF__GGUF_T},
    {"attn_output", "attn.c_proj", CLF__GGUF_T},
    {"ffn_up", "mlp.c_fc", CLF__GGUF_T},
    {"ffn_down", "mlp.c_proj", CLF__GGUF_T},
};
static const clf__gguf_arch gpt2_gguf = {"gpt2", "GPT2LMHeadModel", gpt2_gguf_keys, CLF__ARRAY_LEN(gpt2_gguf_keys),
                                         0, NULL, "transformer.", gpt2_gguf_whole, CLF__ARRAY_LEN(gpt2_gguf_whole),
                                         "transformer.h", gpt2_gguf_layer, CLF__ARRAY_LEN(gpt2_gguf_layer)};

/* GPT2Model / GPT2LMHeadModel: logits, last_hidden_state;
 * GPT2ForSequenceClassification: logits [B, num_labels], last_hidden_state;
 * GPT2ForTokenClassification: logits [B, L, num_labels], last_hidden_state. */
const clf__family clf__gpt2_family = {
    "gpt2",
    {"GPT2Model", "GPT2LMHeadModel", "GPT2ForSequenceClassification", "GPT2ForTokenClassification", NULL},
    gpt2_keys,
    CLF__ARRAY_LEN(gpt2_keys),
    sizeof(gpt2_dims),
    gpt2_load,
    gpt2_gemms,
    &gpt2_gguf};
