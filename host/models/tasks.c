/* tasks.c - what is made of a model's outputs for people: pooled text
 * embeddings (`clformer embed`) and the softmax ranking of labels or tokens
 * (`clformer classify`, `fill-mask`), and the inputs a text gives a model for
 * them, here so that the command line and the Python package compute them
 * with the same code and agree bit for bit. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"

/* ---- softmax and top-k ---- */

typedef struct ranked {
  double p;
  size_t id;
} ranked;

static int cmp_ranked(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->p != y->p) return x->p < y->p ? 1 : -1;
  return (x->id > y->id) - (x->id < y->id);
}

clf_status clf_softmax_top_k(const float *logits, size_t n, size_t k, double *p, size_t *top) {
  static const char op[] = "clf_softmax_top_k";
  if (!logits || !p || (k && !top)) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: a pointer argument is NULL", op);
  if (n == 0) return clf__fail(NULL, CLF_E_SHAPE, "%s: no logits (n is 0)", op);
  if (k > n) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: k %zu is more than the %zu logits", op, k, n);
  double mx = logits[0], sum = 0;
  for (size_t j = 1; j < n; j++) mx = logits[j] > mx ? logits[j] : mx;
  for (size_t j = 0; j < n; j++) sum += (p[j] = exp((double)logits[j] - mx));
  for (size_t j = 0; j < n; j++) p[j] /= sum;
  if (k == 0) return CLF_OK;
  ranked *r = malloc(n * sizeof *r);
  if (!r) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
  for (size_t j = 0; j < n; j++) r[j] = (ranked){p[j], j};
  qsort(r, n, sizeof *r, cmp_ranked);
  for (size_t j = 0; j < k; j++) top[j] = r[j].id;
  free(r);
  return CLF_OK;
}

/* ---- mean-pooled embeddings ---- */

static int takes_input(const clf_model *m, const char *name) {
  for (size_t i = 0; i < m->n_in; i++)
    if (!strcmp(m->in_names[i], name)) return 1;
  return 0;
}

/* The one rule of a text's inputs (clf_model_embed, clf_model_encode_text):
 * the texts' ids with tok's special tokens as [n, L] input_ids padded with
 * pad, attention_mask and (when the model takes them) zero token_type_ids
 * in in[0 .. *n_in); lens[i] the length of text i; a text of no tokens
 * refused unless `empty_ok`.  Failures recorded on m's context, naming op;
 * what was made of in[] is left for the caller to free. */
static clf_status tokenize_batch(clf_model *m, const char *op, clf_tokenizer *tok, const char *const *texts, size_t n,
                                 int64_t pad, int empty_ok, size_t *lens, clf_array in[3], size_t *n_in) {
  static const char *const names[3] = {"input_ids", "attention_mask", "token_type_ids"};
  int64_t **ids = calloc(n, sizeof *ids);
  size_t L = 0, cells = 0;
  clf_status st = ids ? CLF_OK : clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
  *n_in = takes_input(m, names[2]) ? 3 : 2;
  for (size_t i = 0; i < n && st == CLF_OK; i++) {
    if (!texts[i]) st = clf__fail(m->ctx, CLF_E_INVALID_ARG, "%s: texts[%zu] is NULL", op, i);
    else if ((st = clf_tokenizer_encode(tok, texts[i], 1, &ids[i], &lens[i])) != CLF_OK)
      st = clf__fail(m->ctx, st, "%s: texts[%zu]: %s", op, i, clf_last_error(NULL));
    else if (lens[i] == 0 && !empty_ok)
      st = clf__fail(m->ctx, CLF_E_INVALID_ARG, "%s: texts[%zu] has no tokens to average", op, i);
    else if (lens[i] > L) L = lens[i];
  }
  if (st == CLF_OK && !clf__mul_ok(n, L, &cells))
    st = clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "%s: %zu texts of %zu tokens overflow", op, n, L);
  for (size_t k = 0; k < *n_in && st == CLF_OK; k++) {
    snprintf(in[k].name, sizeof in[k].name, "%s", names[k]);
    in[k].dtype = CLF_I64, in[k].ndim = 2, in[k].shape[0] = n, in[k].shape[1] = L;
    if (!(in[k].data = calloc(cells + 1, sizeof(int64_t))))
      st = clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
  }
  for (size_t i = 0; i < n && st == CLF_OK; i++)
    for (size_t j = 0; j < L; j++) {
      ((int64_t *)in[0].data)[i * L + j] = j < lens[i] ? ids[i][j] : pad;
      ((int64_t *)in[1].data)[i * L + j] = j < lens[i];
    }
  for (size_t i = 0; ids && i < n; i++) free(ids[i]);
  free(ids);
  return st;
}

/* One vector a text of h [n, L, D] by the model's pooling (the mean over
 * each text's lens[i] tokens, summed in double; its first token, CLS; its
 * last), L2-normalised, into emb [n, D]. */
static void pool(int pooling, const float *h, size_t n, size_t L, size_t D, const size_t *lens, float *emb) {
  for (size_t i = 0; i < n; i++) {
    double norm = 0;
    const size_t first = pooling == CLF__POOL_LAST ? lens[i] - 1 : 0, end = pooling == CLF__POOL_MEAN ? lens[i] : first + 1;
    for (size_t d = 0; d < D; d++) {
      double s = 0;
      for (size_t j = first; j < end; j++) s += h[(i * L + j) * D + d];
      emb[i * D + d] = (float)(s / (double)(end - first));
      norm += (double)emb[i * D + d] * emb[i * D + d];
    }
    for (size_t d = 0; d < D; d++) emb[i * D + d] /= (float)(sqrt(norm) + 1e-12);
  }
}

clf_status clf_model_embed(clf_model *m, clf_tokenizer *tok, const char *const *texts, size_t n, clf_array *out) {
  static const char op[] = "clf_model_embed";
  if (!m) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: model is NULL", op);
  if (!out || !tok || !texts) return clf__fail(m->ctx, CLF_E_INVALID_ARG, "%s: a pointer argument is NULL", op);
  memset(out, 0, sizeof *out);
  if (n == 0) return clf__fail(m->ctx, CLF_E_INVALID_ARG, "%s: no texts", op);
  if (!takes_input(m, "input_ids"))
    return clf__fail(m->ctx, CLF_E_UNSUPPORTED, "%s: a %s model takes no input_ids", op, m->type);
  if (m->pooling != CLF__POOL_MEAN && m->pooling != CLF__POOL_CLS && m->pooling != CLF__POOL_LAST)
    return clf__fail(m->ctx, CLF_E_UNSUPPORTED, "%s: the model states pooling \"%s\" (pooling_type %d%s): %s; "
                     "embeddings need mean, cls or last pooling", op, clf_model_pooling(m), m->pooling,
                     m->pooling == CLF__POOL_NONE ? ", or no pooling_type at all" : "",
                     m->pooling == CLF__POOL_RANK ? "a reranker scores pairs of texts"
                                                  : "it gives a vector per token, not one per text");
  size_t *lens = calloc(n, sizeof *lens), n_in = 0;
  clf_array in[3], res;
  memset(in, 0, sizeof in);
  memset(&res, 0, sizeof res);
  const char *outs[1] = {"last_hidden_state"};
  const int64_t pad = m->gen.has_pad ? m->gen.pad : 0; /* [PAD] is 0 in BERT vocabularies */
  clf_status st = lens ? tokenize_batch(m, op, tok, texts, n, pad, 0, lens, in, &n_in)
                       : clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
  if (st == CLF_OK) st = clf_model_run(m, in, n_in, outs, 1, &res);
  if (st == CLF_OK) {
    const size_t D = res.shape[2];
    float *emb = malloc(n * D * sizeof *emb + 1);
    if (!emb) {
      st = clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
    } else {
      pool(m->pooling, res.data, n, res.shape[1], D, lens, emb);
      snprintf(out->name, sizeof out->name, "embeddings");
      out->dtype = CLF_F32, out->ndim = 2, out->shape[0] = n, out->shape[1] = D, out->data = emb;
    }
  }
  for (int k = 0; k < 3; k++) clf_array_free(&in[k]);
  clf_array_free(&res);
  free(lens);
  return st;
}

/* ---- one text's inputs ---- */

clf_status clf_model_encode_text(clf_model *m, clf_tokenizer *tok, const char *text, clf_array in[3], size_t *n_in) {
  static const char op[] = "clf_model_encode_text";
  if (in) memset(in, 0, 3 * sizeof *in);
  if (n_in) *n_in = 0;
  if (!m) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: model is NULL", op);
  if (!in || !n_in || !tok || !text)
    return clf__fail(m->ctx, CLF_E_INVALID_ARG, "%s: a pointer argument is NULL", op);
  if (!takes_input(m, "input_ids"))
    return clf__fail(m->ctx, CLF_E_UNSUPPORTED, "%s: a %s model takes no input_ids", op, m->type);
  size_t len, n = 0;
  clf_status st = tokenize_batch(m, op, tok, &text, 1, 0, 1, &len, in, &n);
  if (st != CLF_OK) {
    for (int k = 0; k < 3; k++) clf_array_free(&in[k]);
    return st;
  }
  *n_in = n;
  return CLF_OK;
}
