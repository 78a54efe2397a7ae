/* decoder.c - the generation runtime of every decoder (decoder.h). */
#include "decoder.h"

#include "base/checked.h"

#include <stdlib.h>
#include <string.h>

const char *const clf__decoder_inputs[3] = {"input_ids", "attention_mask", "position_ids"};
enum { IN_IDS, IN_MASK, IN_POS };

int clf__decoder_in_out(const clf_context *ctx) { return !ctx->caps.is_cpu; }

clf_status clf__decoder_attach(clf_model *m, clf__decoder *d, size_t n_layers, int cross) {
  clf_status st = clf__kv_cache_init(m->ctx, &d->kv, n_layers, cross);
  if (st == CLF_OK) m->dec = d;
  return st;
}

static clf_status load_head(clf_model *m, const clf__weights *w, const char *name, int tied, const char *table_name,
                            clf_tensor *table) {
  clf__decoder *d = m->dec;
  clf__params *p = &m->params;
  d->head = table;
  if (!tied) return clf__load_weight(m->ctx, w, p, name, d->V, d->D, CLF_WEIGHT_OUT_IN, &d->head);
  if (p->wtype == CLF_STORED) { /* the table's blocks where they are kept, else the table itself */
    clf_tensor *t = NULL;
    const size_t rows = d->V;
    clf_status st = clf__load_stored(m->ctx, w, p, &table_name, &rows, 1, d->D, &t);
    if (t) d->head = t;
    return st;
  }
  if (p->wtype != CLF_F32) return clf__load_weight(m->ctx, w, p, table_name, d->V, d->D, CLF_WEIGHT_OUT_IN, &d->head);
  return CLF_OK;
}

/* Under q4k the head is stored as q6k, as ggml's k-quant files keep
 * their output.weight in Q6_K (in Q8_0 where 256 does not divide D): every
 * logit takes the head's rounding directly, and it is one matrix. */
clf_status clf__decoder_load_head(clf_model *m, const clf__weights *w, const char *name, int tied,
                                  const char *table_name, clf_tensor *table) {
  clf__params *p = &m->params;
  const clf_dtype wt = p->wtype;
  if (wt == CLF_Q4_K) p->wtype = CLF_Q6_K;
  const clf_status st = load_head(m, w, name, tied, table_name, table);
  p->wtype = wt;
  return st;
}

void clf__decoder_end(clf_model *m) {
  clf__decoder *d = m->dec;
  if (!d) return;
  clf__kv_cache_end(&d->kv);
  clf__written_wait(&d->step_written);
  free(d->step_host);
  d->step_host = NULL;
  clf_tensor_destroy(d->step);
  d->step = NULL;
  d->owner = 0;
  if (d->release) d->release(m);
}

int clf__decoder_owned(const clf_model *m, unsigned long owner) {
  return m->dec && owner && m->dec->owner == owner && m->dec->kv.active;
}

void clf__decoder_free(clf_model *m) {
  if (!m->dec) return;
  clf__decoder_end(m);
  clf__kv_cache_free(&m->dec->kv);
}

clf_status clf__decoder_begin(clf_model *m, size_t B, size_t cap, const clf_array *enc_ids,
                              const clf_array *enc_mask) {
  clf__decoder *d = m->dec;
  clf_status st;
  clf__decoder_end(m);
  if (cap > d->limit)
    return clf__fail(m->ctx, CLF_E_INVALID_ARG, "clf_model_generate: max_length %zu exceeds %s's %zu positions (%s)",
                     cap, m->type, d->limit, d->limit_key);
  if (d->prepare && (st = d->prepare(m, B, cap, enc_ids, enc_mask)) != CLF_OK) return st;
  if ((st = clf__kv_cache_begin(m->ctx, &d->kv, B, d->kv_heads, cap, d->dh)) != CLF_OK) return st;
  size_t n, bytes;
  if (!clf__mul_ok(B, cap, &n) || !clf__mul_ok(n, 3, &n) || !clf__mul_ok(n, sizeof *d->step_host, &bytes))
    return clf__fail(m->ctx, CLF_E_INVALID_ARG, "clf_model_generate: %zu rows of %zu positions overflow", B, cap);
  if (!(d->step_host = malloc(bytes)))
    return clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_generate: out of host memory");
  return clf_tensor_create(m->ctx, CLF_I64, 1, &n, &d->step);
}

/* The step's ids [B, n], positions [B, n] and mask [B, past + n] (ones
 * when NULL) in one upload into the step buffer, as views v[1..3] of v[0];
 * the upload is not waited for (the step's logits are, after it). */
static clf_status step_upload(clf_model *m, size_t n, const int64_t *ids, const int64_t *pos, const int64_t *mask,
                              clf_tensor *v[4]) {
  clf__decoder *d = m->dec;
  const size_t B = d->kv.B, kv_len = d->kv.past + n, total = B * (2 * n + kv_len);
  clf__written_wait(&d->step_written); /* the last step's, done by now unless that step failed */
  int64_t *host = d->step_host;
  memcpy(host, ids, B * n * sizeof *host);
  memcpy(host + B * n, pos, B * n * sizeof *host);
  for (size_t i = 0; i < B * kv_len; i++) host[2 * B * n + i] = mask ? mask[i] : 1;
  clf_status st;
  if ((st = clf_tensor_view(d->step, 0, 1, &total, &v[0])) == CLF_OK &&
      (st = clf__tensor_write(m->ctx, v[0], host, total * sizeof *host, &d->step_written)) == CLF_OK &&
      (st = clf_tensor_view(d->step, 0, 2, (size_t[]){B, n}, &v[1])) == CLF_OK &&
      (st = clf_tensor_view(d->step, B * n, 2, (size_t[]){B, n}, &v[2])) == CLF_OK)
    st = clf_tensor_view(d->step, 2 * B * n, 2, (size_t[]){B, kv_len}, &v[3]);
  return st;
}

clf_status clf__decoder_head(clf_model *m, clf_context *ctx, const clf_tensor *x, clf_tensor *logits) {
  const clf__decoder *d = m->dec;
  clf_status st = clf_linear(ctx, x, d->head, CLF_WEIGHT_OUT_IN, d->head_bias, CLF_ACT_NONE, logits, NULL);
  if (st != CLF_OK || !(d->softcap > 0)) return st;
  /* cap * tanh(logits / cap), as transformers divides, tanh's and multiplies */
  if ((st = clf_scale(ctx, logits, 1.0f / d->softcap, logits, NULL)) != CLF_OK ||
      (st = clf_bias_act(ctx, logits, NULL, CLF_ACT_TANH, logits, NULL)) != CLF_OK)
    return st;
  return clf_scale(ctx, logits, d->softcap, logits, NULL);
}

/* logits [B, 1, V] of the last row of a [B, n, D], downloaded. */
static clf_status last_row_logits(clf_model *m, const clf_tensor *a, float *logits) {
  clf__decoder *d = m->dec;
  const size_t B = a->shape[0], n = a->shape[1];
  clf_tensor *row = NULL, *lg;
  clf_status st;
  /* a decode step's rows are the last ones already: no copy (a launch a
   * token) */
  if ((st = clf__ws_get(m->ctx, d->ws, CLF__WS_LOGITS, CLF_F32, 3, (size_t[]){B, 1, d->V}, &lg)) != CLF_OK ||
      (n > 1 && (st = clf__ws_get(m->ctx, d->ws, CLF__WS_ROW, CLF_F32, 3, (size_t[]){B, 1, d->D}, &row)) != CLF_OK) ||
      (n > 1 && (st = clf_copy_rows(m->ctx, a, n - 1, row, 0, 1, NULL)) != CLF_OK) ||
      (st = clf__decoder_head(m, m->ctx, row ? row : a, lg)) != CLF_OK)
    return st;
  return clf_tensor_download(m->ctx, lg, logits, B * d->V * sizeof *logits);
}

clf_status clf__decoder_step(clf_model *m, size_t n, const int64_t *ids, const int64_t *pos, const int64_t *mask,
                             float *logits) {
  clf__decoder *d = m->dec;
  const size_t B = d->kv.B, kv_len = d->kv.past + n;
  if (kv_len > d->kv.cap)
    return clf__fail(m->ctx, CLF_E_INVALID_ARG, "clf_model_generate: %zu positions exceed the cache's %zu", kv_len,
                     d->kv.cap);
  clf__step s = {NULL, NULL, NULL, d->kv.past, 0, 1};
  for (size_t i = 0; i < B * n; i++) s.max_pos = pos[i] > s.max_pos ? pos[i] : s.max_pos;
  clf_tensor *v[4] = {NULL, NULL, NULL, NULL}, *a;
  clf_status st = step_upload(m, n, ids, pos, mask, v);
  s.ids = v[1], s.pos = v[2], s.mask = mask ? v[3] : NULL;
  if (st == CLF_OK && (st = d->body(m, &s, &a)) == CLF_OK) st = last_row_logits(m, a, logits);
  for (int i = 0; i < 4; i++) clf_tensor_destroy(v[i]);
  if (st == CLF_OK) d->kv.past = kv_len;
  return st;
}

clf_status clf__decoder_reorder(clf_model *m, const int64_t *idx) {
  return clf__kv_cache_reorder(m->ctx, &m->dec->kv, idx, m->dec->ws);
}

clf_status clf__decoder_check(clf_model *m, const clf__inputs in, size_t *B, size_t *L, int64_t *max_pos) {
  static const char op[] = "clf_model_run";
  clf_context *ctx = m->ctx;
  const clf__decoder *d = m->dec;
  clf_status st;
  if (!in[IN_IDS])
    return clf__fail(ctx, CLF_E_INVALID_ARG,
                     "%s: %s needs input \"input_ids\" (inputs: input_ids, attention_mask, position_ids)", op, m->type);
  for (int i = IN_IDS; i <= IN_POS; i++)
    if (in[i] && (st = clf__check_ids(m, in[i], clf__decoder_inputs[i], B, L)) != CLF_OK) return st;
  if (*L > d->limit)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: input_ids has %zu positions, more than the %zu of %s's %s", op, *L,
                     d->limit, m->type, d->limit_key);
  if ((st = clf__check_id_range(m, op, in[IN_IDS], "input_ids", m->in_vocab)) != CLF_OK) return st;
  *max_pos = *L ? (int64_t)*L - 1 : 0;
  if (!in[IN_POS]) return CLF_OK;
  *max_pos = 0;
  for (size_t i = 0; i < *B * *L; i++) {
    const int64_t p = clf__id_at(in[IN_POS], i);
    if (p < 0 || (uint64_t)p >= d->limit)
      return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: position_ids[%zu][%zu] is %lld, outside 0 to %zu (%s's %s)", op,
                       i / *L, i % *L, (long long)p, d->limit - 1, m->type, d->limit_key);
    if (p > *max_pos) *max_pos = p;
  }
  return CLF_OK;
}

/* position_ids as given, or 0..L-1 in every row (transformers' default)
 * where the family needs them. */
static clf_status upload_positions(clf_model *m, const clf_array *given, size_t B, size_t L, clf_tensor **out) {
  *out = NULL;
  if (!given && !m->dec->need_pos) return CLF_OK;
  return clf__upload_positions(m, m->dec->ws, given, B, L, out);
}

clf_status clf__decoder_forward(clf_model *m, const clf__inputs in, size_t B, size_t L, int64_t max_pos,
                                clf_tensor **out) {
  clf__decoder *d = m->dec;
  clf_tensor *ids, *mask = NULL, *pos;
  clf_status st;
  clf__decoder_end(m); /* a forward pass runs without the cache */
  if ((st = clf__upload_ids(m, d->ws, CLF__WS_IDS, in[IN_IDS], B, L, 0, &ids)) != CLF_OK ||
      (in[IN_MASK] && (st = clf__upload_ids(m, d->ws, CLF__WS_MASK, in[IN_MASK], B, L, 1, &mask)) != CLF_OK) ||
      (st = upload_positions(m, in[IN_POS], B, L, &pos)) != CLF_OK)
    return st;
  const clf__step s = {ids, pos, mask, 0, max_pos, 0};
  return d->body(m, &s, out);
}

clf_status clf__decoder_logits(clf_model *m, const clf_tensor *a, clf_array *res) {
  clf__decoder *d = m->dec;
  clf_tensor *logits;
  clf_status st;
  if ((st = clf__ws_get(m->ctx, d->ws, CLF__WS_LOGITS, CLF_F32, 3, (size_t[]){a->shape[0], a->shape[1], d->V},
                        &logits)) != CLF_OK ||
      (st = clf__decoder_head(m, m->ctx, a, logits)) != CLF_OK)
    return st;
  return clf__download(m, logits, "logits", res);
}

clf_status clf__decoder_stream(clf_model *m, const clf__step *s, clf_tensor **h, clf_tensor **a) {
  const size_t shape[3] = {s->ids->shape[0], s->ids->shape[1], m->dec->D};
  clf_status st = clf__ws_get(m->ctx, m->dec->ws, CLF__WS_H, CLF_F32, 3, shape, h);
  if (st != CLF_OK) return st;
  return clf__ws_get(m->ctx, m->dec->ws, CLF__WS_A, CLF_F32, 3, shape, a);
}

clf_status clf__decoder_stack(clf_model *m, const clf__layer *layers, size_t n, const clf__ln *final,
                              const clf__step *s, const clf_attention_mask *mask, const clf__rotary *rot,
                              clf_tensor *h, clf_tensor *a) {
  clf__decoder *d = m->dec;
  /* a is written by the norms alone here, so it stays held for the
   * integer products: each norm makes its 8-bit blocks as it writes it and
   * the projections after it read them (ops.h's clf__linear_hold_x) */
  const size_t rows = clf_tensor_numel(a) / a->shape[a->ndim - 1];
  int reads = 0; /* not where every product takes the float path (the interleave's, on a CPU) */
  for (size_t i = 0; i < n && !reads; i++)
    reads = clf__linear_reads(m->ctx, &layers[i].self.qkv, rows) ||
            clf__linear_reads(m->ctx, &layers[i].self.q, rows) ||
            clf__linear_reads(m->ctx, &layers[i].self.kv, rows) ||
            clf__linear_reads(m->ctx, &layers[i].mlp.fc1, rows);
  const int hold = reads && clf__linear_hold_x(m->ctx, a);
  clf_status st = clf__ln_apply(m->ctx, n ? &layers[0].ln_self : final, h, NULL, NULL, NULL, a);
  for (size_t i = 0; i < n && st == CLF_OK; i++) {
    clf__kv kv = clf__kv_cache_self(&d->kv, i, s->past);
    if (s->paged) kv = (clf__kv){s->paged->k[i], s->paged->v[i], 0, 0, &s->paged->pm[s->paged->pool[i]]};
    const clf__layer_io io = {mask, s->cached ? &kv : NULL, NULL, NULL, NULL, rot};
    const clf__ln *next = i + 1 < n ? &layers[i + 1].ln_self : final;
    st = clf__layer_forward(m->ctx, &layers[i], 1, next, h, a, &io, d->ws);
  }
  if (hold) clf__linear_release_x(m->ctx, a);
  return st;
}
