/* model_gpt2.c - GPT2Model / GPT2LMHeadModel: wte + wpe, N pre-LN blocks
 * (fused c_attn, causal + padding mask, gelu_new MLP), ln_f, tied LM head,
 * and a KV cache for incremental decoding; GPT2ForSequenceClassification
 * (score at the last non-padding token) and GPT2ForTokenClassification.
 */
#include "family.h"
#include "kv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct gpt2 {
  size_t V, D, H, F, P, n_layers;
  clf_tensor *wte;  /* [V, D] */
  clf_tensor *wpe;  /* [P, D] */
  clf__layer *layers;
  clf__ln ln_f;     /* [D] */
  clf_tensor *head; /* [V, D] lm_head.weight, or wte when tied */
  int has_head;
  int task;           /* enum gpt2_task: what "logits" is */
  clf__linear cls;    /* [n_labels, D] score (no bias) or classifier */
  size_t n_labels;
  /* generation state */
  clf__kv_cache kv;  /* per layer [B, H, cap, Dh] while generating */
  clf_tensor *step;  /* i64 [B * (2 cap + cap)]: ids, positions, mask of a step */
} gpt2;

static const char *const gpt2_inputs[] = {"input_ids", "attention_mask", "position_ids"};
static const char *const gpt2_outputs[] = {"logits", "last_hidden_state"};
enum { IN_IDS, IN_MASK, IN_POS };
enum gpt2_task { TASK_LM, TASK_SEQ, TASK_TOK };

static void gpt2_gen_end(clf_model *m) {
  gpt2 *g = m->impl;
  clf__kv_cache_end(&g->kv);
  clf_tensor_destroy(g->step);
  g->step = NULL;
}

static void gpt2_destroy(clf_model *m) {
  gpt2 *g = m->impl;
  if (!g) return;
  gpt2_gen_end(m);
  clf__kv_cache_free(&g->kv);
  free(g->layers);
  free(g);
  m->impl = NULL;
}

/* embed (ids, positions) -> N x pre-LN block -> ln_f; `a` gets ln_f(h).
 * kv: per-layer caches (NULL: workspace K/V). */
static clf_status gpt2_body(clf_model *m, const clf_tensor *ids, const clf_tensor *pos, size_t past,
                            const clf_attention_mask *mask, clf_tensor *h, clf_tensor *a) {
  clf_context *ctx = m->ctx;
  gpt2 *g = m->impl;
  clf_status st;
  if ((st = clf_embedding(ctx, g->wte, ids, 1.0f, 0, h, NULL)) != CLF_OK) return st;
  st = pos ? clf_embedding(ctx, g->wpe, pos, 1.0f, 1, h, NULL) : clf_position_embedding(ctx, g->wpe, past, 1, h, NULL);
  if (st != CLF_OK) return st;
  if (g->n_layers == 0) return clf__ln_apply(ctx, &g->ln_f, h, NULL, NULL, a);
  if ((st = clf__ln_apply(ctx, &g->layers[0].ln_self, h, NULL, NULL, a)) != CLF_OK) return st;
  for (size_t i = 0; i < g->n_layers; i++) {
    clf__kv kv = clf__kv_cache_self(&g->kv, i, past);
    clf__layer_io io = {mask, g->kv.active ? &kv : NULL, NULL, NULL, NULL};
    const clf__ln *next = i + 1 < g->n_layers ? &g->layers[i + 1].ln_self : &g->ln_f;
    if ((st = clf__layer_forward(ctx, &g->layers[i], 1, next, h, a, &io, &m->ws)) != CLF_OK) return st;
  }
  return CLF_OK;
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
  static const char op[] = "clf_model_run";
  clf_context *ctx = m->ctx;
  gpt2 *g = m->impl;
  clf__ws *ws = &m->ws;
  clf_status st;
  size_t B = 0, L = 0;
  if (!in[IN_IDS])
    return clf__fail(ctx, CLF_E_INVALID_ARG,
                     "%s: gpt2 needs input \"input_ids\" (inputs: input_ids, attention_mask, position_ids)", op);
  if ((st = clf__check_ids(m, in[IN_IDS], "input_ids", &B, &L)) != CLF_OK) return st;
  for (int i = IN_MASK; i <= IN_POS; i++)
    if (in[i] && (st = clf__check_ids(m, in[i], gpt2_inputs[i], &B, &L)) != CLF_OK) return st;
  if (L > g->P)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: input_ids has %zu positions, more than n_positions %zu", op, L, g->P);
  if ((st = clf__check_id_range(m, op, in[IN_IDS], "input_ids", g->V)) != CLF_OK ||
      (st = clf__check_id_range(m, op, in[IN_POS], "position_ids", g->P)) != CLF_OK)
    return st;
  if (want[0] && g->task == TASK_SEQ && !m->gen.has_pad && B > 1) return gpt2_seq_rows(m, in[IN_IDS], B, L, NULL);
  gpt2_gen_end(m); /* a forward pass runs without the cache */
  clf_tensor *ids, *mask = NULL, *pos = NULL, *h, *a;
  if ((st = clf__upload_ids(m, ws, CLF__WS_IDS, in[IN_IDS], B, L, 0, &ids)) != CLF_OK) return st;
  if (in[IN_MASK] && (st = clf__upload_ids(m, ws, CLF__WS_MASK, in[IN_MASK], B, L, 1, &mask)) != CLF_OK) return st;
  if (in[IN_POS] && (st = clf__upload_ids(m, ws, CLF__WS_POS, in[IN_POS], B, L, 0, &pos)) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_H, CLF_F32, 3, (size_t[]){B, L, g->D}, &h)) != CLF_OK) return st;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_A, CLF_F32, 3, (size_t[]){B, L, g->D}, &a)) != CLF_OK) return st;
  clf_attention_mask am = {mask, 1, NULL};
  if ((st = gpt2_body(m, ids, pos, 0, &am, h, a)) != CLF_OK) return st;
  if (want[1] && (st = clf__download(m, a, "last_hidden_state", &res[1])) != CLF_OK) return st;
  if (!want[0]) return CLF_OK;
  if (g->task == TASK_SEQ) return gpt2_seq_logits(m, in[IN_IDS], a, B, L, &res[0]);
  clf_tensor *logits;
  const size_t O = g->task == TASK_TOK ? g->n_labels : g->V;
  if ((st = clf__ws_get(ctx, ws, CLF__WS_LOGITS, CLF_F32, 3, (size_t[]){B, L, O}, &logits)) != CLF_OK) return st;
  if (g->task == TASK_TOK)
    st = clf_linear(ctx, a, g->cls.w, CLF_WEIGHT_OUT_IN, g->cls.b, CLF_ACT_NONE, logits, NULL);
  else
    st = clf_linear(ctx, a, g->head, CLF_WEIGHT_OUT_IN, NULL, CLF_ACT_NONE, logits, NULL);
  if (st != CLF_OK) return st;
  return clf__download(m, logits, "logits", &res[0]);
}

static clf_status gpt2_gen_begin(clf_model *m, size_t B, size_t cap, const clf_array *enc_ids,
                                 const clf_array *enc_mask, size_t expand) {
  clf_context *ctx = m->ctx;
  gpt2 *g = m->impl;
  clf_status st;
  (void)enc_ids, (void)enc_mask, (void)expand;
  gpt2_gen_end(m);
  if (cap > g->P)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "clf_model_generate: max_length %zu exceeds gpt2's n_positions %zu", cap,
                     g->P);
  if ((st = clf__kv_cache_begin(ctx, &g->kv, B, g->H, cap, g->D / g->H)) != CLF_OK) return st;
  return clf_tensor_create(ctx, CLF_I64, 1, (size_t[]){B * 3 * cap}, &g->step);
}

static clf_status gpt2_gen_step(clf_model *m, size_t n, const int64_t *ids, const int64_t *pos, const int64_t *mask,
                                float *logits) {
  clf_context *ctx = m->ctx;
  gpt2 *g = m->impl;
  clf__ws *ws = &m->ws;
  const size_t B = g->kv.B, kv_len = g->kv.past + n;
  clf_status st;
  if (kv_len > g->kv.cap)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "clf_model_generate: %zu positions exceed the cache's %zu", kv_len,
                     g->kv.cap);
  /* One upload per step: ids [B, n], positions [B, n], mask [B, past + n]. */
  const size_t total = B * (2 * n + kv_len);
  int64_t *host = malloc(total * sizeof *host);
  if (!host) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "clf_model_generate: out of host memory");
  memcpy(host, ids, B * n * sizeof *host);
  memcpy(host + B * n, pos, B * n * sizeof *host);
  for (size_t i = 0; i < B * kv_len; i++) host[2 * B * n + i] = mask ? mask[i] : 1;
  clf_tensor *all = NULL, *tid = NULL, *tpos = NULL, *tmask = NULL, *h, *a, *row, *lg;
  if ((st = clf_tensor_view(g->step, 0, 1, &total, &all)) == CLF_OK &&
      (st = clf_tensor_upload(ctx, all, host, total * sizeof *host)) == CLF_OK &&
      (st = clf_tensor_view(g->step, 0, 2, (size_t[]){B, n}, &tid)) == CLF_OK &&
      (st = clf_tensor_view(g->step, B * n, 2, (size_t[]){B, n}, &tpos)) == CLF_OK &&
      (st = clf_tensor_view(g->step, 2 * B * n, 2, (size_t[]){B, kv_len}, &tmask)) == CLF_OK &&
      (st = clf__ws_get(ctx, ws, CLF__WS_H, CLF_F32, 3, (size_t[]){B, n, g->D}, &h)) == CLF_OK &&
      (st = clf__ws_get(ctx, ws, CLF__WS_A, CLF_F32, 3, (size_t[]){B, n, g->D}, &a)) == CLF_OK &&
      (st = clf__ws_get(ctx, ws, CLF__WS_ROW, CLF_F32, 3, (size_t[]){B, 1, g->D}, &row)) == CLF_OK &&
      (st = clf__ws_get(ctx, ws, CLF__WS_LOGITS, CLF_F32, 3, (size_t[]){B, 1, g->V}, &lg)) == CLF_OK) {
    clf_attention_mask am = {tmask, 1, NULL};
    if ((st = gpt2_body(m, tid, tpos, g->kv.past, &am, h, a)) == CLF_OK &&
        (st = clf_copy_rows(ctx, a, n - 1, row, 0, 1, NULL)) == CLF_OK &&
        (st = clf_linear(ctx, row, g->head, CLF_WEIGHT_OUT_IN, NULL, CLF_ACT_NONE, lg, NULL)) == CLF_OK)
      st = clf_tensor_download(ctx, lg, logits, B * g->V * sizeof *logits);
  }
  free(host);
  clf_tensor_destroy(all);
  clf_tensor_destroy(tid);
  clf_tensor_destroy(tpos);
  clf_tensor_destroy(tmask);
  if (st == CLF_OK) g->kv.past = kv_len;
  return st;
}

static clf_status gpt2_gen_reorder(clf_model *m, const int64_t *idx) {
  gpt2 *g = m->impl;
  return clf__kv_cache_reorder(m->ctx, &g->kv, idx, &m->ws);
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
    return clf__load_linear(m->ctx, w, &m->params, "score.weight", NULL, g->n_labels, g->D, CLF_WEIGHT_OUT_IN,
                            &g->cls);
  return clf__load_linear(m->ctx, w, &m->params, "classifier.weight", "classifier.bias", g->n_labels, g->D,
                          CLF_WEIGHT_OUT_IN, &g->cls);
}

/* wte, wpe, the blocks, ln_f and the (tied) LM head under prefix pf. */
static clf_status gpt2_load_weights(clf_model *m, gpt2 *g, const gpt2_dims *dm, clf_activation act, const char *pf,
                                    const clf__weights *w) {
  clf_context *ctx = m->ctx;
  clf__params *p = &m->params;
  const size_t d = g->D, dh = g->D / g->H;
  const clf__block_spec spec = {{d, g->F, 3 * d}, (float)dm->eps, 1, 0, CLF_WEIGHT_IN_OUT, 0};
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
  /* lm_head.weight [V, D], tied to wte when absent: wte itself in f32, a
   * copy of it in another weight type (the lookup stays f32) */
  g->head = g->wte;
  if (clf__weights_has(w, "lm_head.weight"))
    return clf__load_weight(ctx, w, p, "lm_head.weight", g->V, d, CLF_WEIGHT_OUT_IN, &g->head);
  if (p->wtype != CLF_F32)
    return clf__load_weight(ctx, w, p, clf__wn(n1, sizeof n1, pf, "wte.weight"), g->V, d, CLF_WEIGHT_OUT_IN,
                            &g->head);
  return CLF_OK;
}

static clf_status gpt2_load(clf_model *m, const void *dims, const clf__config *c, const clf__weights *w) {
  const gpt2_dims *d = dims;
  clf_activation act;
  clf_status st;
  if ((st = gpt2_check(m->ctx, d, &act)) != CLF_OK) return st;
  gpt2 *g = calloc(1, sizeof *g);
  if (!g || !(g->layers = calloc((size_t)d->N + 1, sizeof *g->layers))) {
    free(g);
    return clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_load: out of host memory");
  }
  m->impl = g;
  m->destroy = gpt2_destroy;
  if ((st = clf__kv_cache_init(m->ctx, &g->kv, (size_t)d->N, 0)) != CLF_OK) return st;
  m->run = gpt2_run;
  m->in_names = gpt2_inputs;
  m->n_in = 3;
  m->out_names = gpt2_outputs;
  m->n_out = 2;
  g->task = clf__config_has_arch(c, "GPT2ForSequenceClassification") ? TASK_SEQ
            : clf__config_has_arch(c, "GPT2ForTokenClassification")  ? TASK_TOK
                                                                     : TASK_LM;
  m->vocab = g->task == TASK_LM ? (size_t)d->V : 0;
  m->in_vocab = d->V;
  m->max_positions = d->P;
  g->V = d->V, g->D = d->D, g->H = d->H, g->F = gpt2_ffn(d), g->P = d->P, g->n_layers = d->N;
  const char *const probe[] = {"transformer.wte.weight", "wte.weight", NULL};
  const char *found = clf__weights_pick(w, probe);
  if ((st = gpt2_load_weights(m, g, d, act, found && strcmp(found, probe[0]) == 0 ? "transformer." : "", w)) !=
      CLF_OK)
    return st;
  if (g->task != TASK_LM) return CLF_OK; /* classifiers do not generate */
  m->gen_begin = gpt2_gen_begin;
  m->gen_step = gpt2_gen_step;
  m->gen_reorder = gpt2_gen_reorder;
  m->gen_end = gpt2_gen_end;
  return CLF_OK;
}

/* fused c_attn; Conv1D weights [in, out]; the tied head [V, D] */
static void gpt2_gemms(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l) {
  const gpt2_dims *d = dims;
  const long F = gpt2_ffn(d);
  /* Conv1D weights are transposed to [out, in] at load */
  clf__gemm_add(l, T, 3 * d->D, d->D, 1, d->N);
  clf__gemm_add(l, T, d->D, d->D, 1, d->N);
  clf__gemm_add(l, T, F, d->D, 1, d->N);
  clf__gemm_add(l, T, d->D, F, 1, d->N);
  if (clf__config_has_arch(c, "GPT2LMHeadModel")) clf__gemm_add(l, T, d->V, d->D, 1, 1);
}

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
    gpt2_gemms};
