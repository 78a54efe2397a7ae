/* rows.c - the weight-row walker (rows.h): loading a layer's rows into its
 * block struct, fusing q, k, v (or gate, up) into one linear, the norms,
 * and the same walk listing the GEMMs for tuning.
 */
#include "rows.h"

#include "base/checked.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void clf__spec_dims(clf__block_spec *s, size_t D, size_t F, size_t Q, size_t KV) {
  s->dims[CLF__DIM_D] = D;
  s->dims[CLF__DIM_F] = F;
  s->dims[CLF__DIM_3D] = 3 * D;
  s->dims[CLF__DIM_Q] = Q;
  s->dims[CLF__DIM_KV] = KV;
  s->dims[CLF__DIM_QKV] = Q + 2 * KV;
  s->dims[CLF__DIM_2F] = 2 * F;
}

clf__block_spec clf__spec_encoder(size_t D, size_t F, float eps, int qkv_bias, int in_out) {
  clf__block_spec s = {.eps = eps, .qkv_bias = qkv_bias, .layout = CLF_WEIGHT_OUT_IN, .in_out_f32 = in_out};
  clf__spec_dims(&s, D, F, D, D);
  return s;
}

static int row_bias(const clf__weight_row *r, const clf__block_spec *spec) {
  switch (r->bias) {
  case CLF__BIAS_YES: return 1;
  case CLF__BIAS_QKV: return spec->qkv_bias;
  case CLF__BIAS_ATTN: return spec->attn_bias;
  case CLF__BIAS_MLP: return spec->mlp_bias;
  default: return 0;
  }
}

/* The out-features of a row: a fused row's parts summed. */
static size_t row_out(const clf__weight_row *r, const clf__block_spec *spec) {
  if (r->kind != CLF__ROW_FUSED) return spec->dims[r->out];
  size_t n = 0;
  for (const clf__row_part *q = r->parts; q->name; q++) n += spec->dims[q->out];
  return n;
}

/* PREFIX NAME with "%s" replaced by `part`, then `suffix`. */
static void part_name(char *buf, size_t len, const char *prefix, const char *name, const char *part,
                      const char *suffix) {
  char fmt[256];
  snprintf(fmt, sizeof fmt, "%s%s%s", prefix, name, suffix);
  snprintf(buf, len, fmt, part);
}

/* The name a fused row is known by in errors: PREFIX NAME with "%s" as
 * "{q,k,v}". */
static void fused_name(char *buf, size_t len, const char *prefix, const clf__weight_row *r) {
  char set[128] = "{";
  for (const clf__row_part *q = r->parts; q->name; q++) {
    const size_t n = strlen(set);
    snprintf(set + n, sizeof set - n, "%s%s", q == r->parts ? "" : ",", q->name);
  }
  const size_t n = strlen(set);
  snprintf(set + n, sizeof set - n, "}");
  part_name(buf, len, prefix, r->name, set, "");
}

/* A fused row's weight as the checkpoint stores its parts
 * (clf__load_stored_linear): l->w, l->part, or neither. */
static clf_status load_fused_stored(clf_context *ctx, const clf__weights *w, clf__params *p, const char *prefix,
                                    const clf__weight_row *r, const clf__block_spec *spec, clf__linear *l) {
  char names[8][256];
  const char *np[8];
  size_t outs[8], n = 0;
  for (const clf__row_part *q = r->parts; q->name; q++, n++) {
    if (n == 8) return CLF_OK;
    part_name(names[n], sizeof names[n], prefix, r->name, q->name, ".weight");
    np[n] = names[n], outs[n] = spec->dims[q->out];
  }
  return clf__load_stored_linear(ctx, w, p, np, outs, n, spec->dims[r->in], l);
}

/* The parts of a fused row concatenated along out into one linear: their
 * weights [sum out, in] and, with `bias`, their biases. */
static clf_status load_fused(clf_context *ctx, const clf__weights *w, clf__params *p, const char *prefix,
                             const clf__weight_row *r, int bias, const clf__block_spec *spec, clf__linear *l) {
  const size_t rows = row_out(r, spec), in = spec->dims[r->in];
  size_t numel, bytes;
  if (!clf__mul_ok(rows, in, &numel) || !clf__mul_ok(numel, sizeof(float), &bytes))
    return clf__fail(ctx, CLF_E_SHAPE, "model: fusing %s%s: %zu x %zu weights overflow", prefix, r->name, rows, in);
  float *cat = NULL, *bcat = NULL, *h = NULL;
  char wn[256];
  l->w = NULL, l->nparts = 0;
  clf_status st = spec->layout == CLF_WEIGHT_OUT_IN ? load_fused_stored(ctx, w, p, prefix, r, spec, l) : CLF_OK;
  const int stored = l->w || l->nparts; /* else read as f32 into cat */
  if (st == CLF_OK && ((!stored && !(cat = malloc(bytes + 1))) || !(bcat = malloc(rows * sizeof(float) + 1))))
    st = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory fusing %s%s", prefix, r->name);
  size_t at = 0;
  for (const clf__row_part *q = r->parts; q->name && st == CLF_OK; at += spec->dims[q->out], q++) {
    const size_t out = spec->dims[q->out];
    part_name(wn, sizeof wn, prefix, r->name, q->name, ".weight");
    if (!stored && (st = clf__read_matrix(ctx, w, wn, out, in, spec->layout == CLF_WEIGHT_IN_OUT, &h)) != CLF_OK)
      break;
    if (h) memcpy(cat + at * in, h, out * in * sizeof *h);
    free(h);
    h = NULL;
    if (!bias) continue;
    part_name(wn, sizeof wn, prefix, r->name, q->name, ".bias");
    st = clf__weights_read(ctx, w, wn, 1, &out, &h, (size_t[8]){0});
    if (st == CLF_OK) memcpy(bcat + at, h, out * sizeof *h);
    free(h);
    h = NULL;
  }
  l->layout = CLF_WEIGHT_OUT_IN;
  l->b = NULL;
  fused_name(wn, sizeof wn, prefix, r);
  if (st == CLF_OK && !stored) st = clf__store_linear(ctx, p, spec->in_out_f32, wn, cat, rows, in, l);
  if (st == CLF_OK && bias) {
    clf_tensor *t = NULL;
    if ((st = clf_tensor_from_f32(ctx, CLF_F32, 1, &rows, bcat, &t)) == CLF_OK &&
        (st = clf__params_add(ctx, p, t)) == CLF_OK)
      l->b = t;
  }
  free(cat);
  free(bcat);
  return st;
}

clf_status clf__load_ln(clf_context *ctx, const clf__weights *w, clf__params *p, const char *prefix, size_t d,
                        float eps, clf__ln *ln) {
  char gw[256], gg[256], bb[256], bt[256];
  snprintf(gw, sizeof gw, "%s.weight", prefix);
  snprintf(gg, sizeof gg, "%s.gamma", prefix);
  snprintf(bb, sizeof bb, "%s.bias", prefix);
  snprintf(bt, sizeof bt, "%s.beta", prefix);
  const char *const gn[] = {gw, gg, NULL}, *const bn[] = {bb, bt, NULL};
  const char *g = clf__weights_pick(w, gn), *b = clf__weights_pick(w, bn);
  clf_status st;
  ln->eps = eps;
  ln->rms = 0;
  /* Not found: load the canonical name to get the loader's message. */
  if ((st = clf__param(ctx, w, p, g ? g : gw, 1, &d, &ln->g)) != CLF_OK) return st;
  return clf__param(ctx, w, p, b ? b : bb, 1, &d, &ln->b);
}

clf_status clf__load_rms(clf_context *ctx, const clf__weights *w, clf__params *p, const char *prefix, size_t d,
                         float eps, clf__ln *ln) {
  char gw[256];
  if ((size_t)snprintf(gw, sizeof gw, "%s.weight", prefix) >= sizeof gw)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "the tensor name \"%.64s...\" is past %zu bytes", prefix, sizeof gw);
  ln->eps = eps;
  ln->rms = 1;
  ln->b = NULL;
  return clf__param(ctx, w, p, gw, 1, &d, &ln->g);
}

clf_status clf__load_rows(clf_context *ctx, const clf__weights *w, clf__params *p, const char *prefix,
                          const clf__weight_row *rows, size_t n, const clf__block_spec *spec, void *block) {
  char wn[256], bn[256];
  clf_status st = CLF_OK;
  for (size_t i = 0; i < n && st == CLF_OK; i++) {
    const clf__weight_row *r = &rows[i];
    void *at = (char *)block + r->at;
    if (r->cross && !spec->cross) continue;
    snprintf(wn, sizeof wn, "%s%s", prefix, r->name);
    const int bias = row_bias(r, spec);
    switch (r->kind) {
    case CLF__ROW_LN: st = clf__load_ln(ctx, w, p, wn, spec->dims[r->out], spec->eps, at); break;
    case CLF__ROW_RMS: st = clf__load_rms(ctx, w, p, wn, spec->dims[r->out], spec->eps, at); break;
    case CLF__ROW_FUSED: st = load_fused(ctx, w, p, prefix, r, bias, spec, at); break;
    default:
      snprintf(bn, sizeof bn, "%s%s.bias", prefix, r->name);
      snprintf(wn, sizeof wn, "%s%s.weight", prefix, r->name);
      st = clf__load_linear(ctx, w, p, wn, bias ? bn : NULL, spec->dims[r->out], spec->dims[r->in], spec->layout,
                            spec->in_out_f32, at);
    }
  }
  return st;
}

void clf__gemm_add(clf__gemm_list *l, size_t rows, long out, long in, int trans_b, long count) {
  if (rows == 0 || out <= 0 || in <= 0 || count <= 0) return;
  for (size_t i = 0; i < l->n && i < CLF__ARRAY_LEN(l->v); i++) {
    clf_gemm_shape *s = &l->v[i];
    if (s->m == rows && s->n == (size_t)out && s->k == (size_t)in && s->trans_b == trans_b) {
      s->count += (unsigned)count;
      return;
    }
  }
  if (l->n < CLF__ARRAY_LEN(l->v))
    l->v[l->n] = (clf_gemm_shape){rows, (size_t)out, (size_t)in, 0, trans_b, (unsigned)count};
  l->n++;
}

void clf__rows_gemms(const clf__weight_row *rows, size_t n, const clf__block_spec *spec, size_t T, long count,
                     clf__gemm_list *l) {
  /* clf__store_linear: f32 weights [in, out] (trans_b 0) with in_out_f32, else [out, in] */
  for (size_t i = 0; i < n; i++) {
    const clf__weight_row *r = &rows[i];
    if ((r->cross && !spec->cross) || r->kind == CLF__ROW_LN || r->kind == CLF__ROW_RMS) continue;
    clf__gemm_add(l, T, (long)row_out(r, spec), (long)spec->dims[r->in], !spec->in_out_f32, count);
  }
}
