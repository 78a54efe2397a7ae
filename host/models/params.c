/* params.c - the parameter list, and the linear layers' weights read from
 * the checkpoint, transposed where needed and stored in the weight type
 * (params.h).
 */
#include "params.h"

#include "base/checked.h"

#include <stdlib.h>
#include <string.h>

void clf__params_free(clf__params *p) {
  for (size_t i = 0; i < p->n; i++) clf_tensor_destroy(p->t[i]);
  free(p->t);
  memset(p, 0, sizeof *p);
}

clf_status clf__params_add(clf_context *ctx, clf__params *p, clf_tensor *t) {
  if (p->n == p->cap) {
    size_t cap = p->cap ? 2 * p->cap : 64;
    clf_tensor **nt = realloc(p->t, cap * sizeof *nt);
    if (!nt) {
      clf_tensor_destroy(t);
      return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory for the parameter list");
    }
    p->t = nt;
    p->cap = cap;
  }
  p->t[p->n++] = t;
  if (p->progress) {
    p->done += clf_tensor_numel(t) * sizeof(float);
    p->progress(p->progress_user, p->done < p->total ? p->done : p->total, p->total);
  }
  return CLF_OK;
}

clf_status clf__param(clf_context *ctx, const clf__weights *w, clf__params *p, const char *name, int ndim,
                      const size_t *shape, clf_tensor **out) {
  clf_tensor *t = NULL;
  clf_status st = clf__weights_load(ctx, w, name, ndim, shape, &t);
  if (st != CLF_OK) return st;
  if ((st = clf__params_add(ctx, p, t)) != CLF_OK) return st;
  *out = t;
  return CLF_OK;
}

/* t [cols, rows] = h [rows, cols], in tiles that stay in cache. */
static void transpose(const float *h, size_t rows, size_t cols, float *t) {
  enum { TILE = 32 };
  for (size_t r0 = 0; r0 < rows; r0 += TILE)
    for (size_t c0 = 0; c0 < cols; c0 += TILE)
      for (size_t r = r0; r < r0 + TILE && r < rows; r++)
        for (size_t c = c0; c < c0 + TILE && c < cols; c++) t[c * rows + r] = h[r * cols + c];
}

clf_status clf__read_matrix(clf_context *ctx, const clf__weights *w, const char *name, size_t rows, size_t in,
                              int in_out, float **out) {
  size_t got[8];
  float *h = NULL;
  clf_status st = clf__weights_read(ctx, w, name, 2, in_out ? (size_t[]){in, rows} : (size_t[]){rows, in}, &h, got);
  if (st != CLF_OK || !in_out) {
    *out = h;
    return st;
  }
  float *t = malloc((rows * in > 0 ? rows * in : 1) * sizeof *t);
  if (!t) {
    free(h);
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory transposing \"%s\"", name);
  }
  transpose(h, in, rows, t);
  free(h);
  *out = t;
  return CLF_OK;
}

/* The type host f32 weights are stored in: the params' (CLF_STORED's
 * weights that are not kept as stored: f32). */
static clf_dtype host_type(const clf__params *p) { return p->wtype == CLF_STORED ? CLF_F32 : p->wtype; }

/* h [rows, in] rounded through type wt, as f32 (simulate). */
static clf_status round_through(clf_context *ctx, clf_dtype wt, const char *name, const float *h, size_t rows,
                                size_t in, clf_tensor **t) {
  float *r = malloc(rows * in * sizeof *r + 1);
  void *q = malloc(clf__dtype_bytes(wt, rows * in) + 1);
  clf_status st = CLF_OK;
  if (r && q) {
    clf__quantize(wt, h, rows * in, q);
    if (clf__dtype_is_ggml(wt)) st = clf_gguf_dequantize(clf__dtype_ggml_id(wt), q, rows * in, r);
    else clf__dequantize(wt, q, rows * in, r);
  }
  if (st == CLF_OK)
    st = r && q ? clf_tensor_from_f32(ctx, CLF_F32, 2, (size_t[]){rows, in}, r, t)
                : clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory rounding \"%s\"", name);
  free(r);
  free(q);
  return st;
}

/* Uploads host [rows, in] as the params' weight type into p. */
static clf_status store_matrix(clf_context *ctx, clf__params *p, const char *name, const float *h, size_t rows,
                               size_t in, clf_tensor **out) {
  const clf_dtype wt = clf__weight_type_for(host_type(p), in);
  if (clf__dtype_is_block(wt) && in % CLF__QBLOCK != 0)
    return clf__fail(ctx, CLF_E_UNSUPPORTED,
                     "tensor \"%s\" [%zu, %zu]: %s weights need in-features that are a multiple of %d (use f16 "
                     "or f32 weights for this model)",
                     name, rows, in, clf__weight_type_name(wt), CLF__QBLOCK);
  clf_tensor *t = NULL;
  const clf_dtype stored = p->simulate ? CLF_F32 : wt;
  clf_status st = clf__weight_fits_alloc(ctx, name, clf__dtype_bytes(stored, rows * in));
  if (st != CLF_OK) return st;
  if (p->simulate && wt != CLF_F32) st = round_through(ctx, wt, name, h, rows, in, &t);
  else st = clf_tensor_from_f32(ctx, wt, 2, (size_t[]){rows, in}, h, &t);
  if (st != CLF_OK) return st;
  if ((st = clf__params_add(ctx, p, t)) != CLF_OK) return st;
  *out = t;
  return CLF_OK;
}

clf_status clf__store_linear(clf_context *ctx, clf__params *p, int in_out_f32, const char *name, const float *h,
                             size_t rows, size_t in, clf__linear *l) {
  l->layout = CLF_WEIGHT_OUT_IN;
  if (!in_out_f32 || host_type(p) != CLF_F32) return store_matrix(ctx, p, name, h, rows, in, &l->w);
  float *t = malloc((rows * in > 0 ? rows * in : 1) * sizeof *t);
  if (!t) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory transposing \"%s\"", name);
  transpose(h, rows, in, t);
  clf_status st = store_matrix(ctx, p, name, t, in, rows, &l->w);
  free(t);
  if (st == CLF_OK) l->layout = CLF_WEIGHT_IN_OUT;
  return st;
}

/* Q8_0 / Q4_0 blocks as ggml stores them ({d; qs} each) in clformer's
 * layout: every block's quants, then every scale. */
static void repack_blocks(clf_dtype dt, const unsigned char *raw, size_t blocks, unsigned char *out) {
  const size_t qb = dt == CLF_Q8_0 ? 32 : 16;
  unsigned char *scales = out + blocks * qb;
  for (size_t b = 0; b < blocks; b++) {
    memcpy(scales + 2 * b, raw + b * (qb + 2), 2);
    memcpy(out + b * qb, raw + b * (qb + 2) + 2, qb);
  }
}

/* The parts read as stored and concatenated along out: *dt CLF_F32 when
 * one cannot be (another type; parts of different types). */
static clf_status stored_parts(clf_context *ctx, const clf__weights *w, const char *const *names, const size_t *outs,
                               size_t n, size_t in, clf_dtype *dt, unsigned char **cat, size_t *total) {
  *dt = CLF_F32, *cat = NULL, *total = 0;
  clf_status st = CLF_OK;
  for (size_t i = 0; i < n && st == CLF_OK; i++) {
    clf_dtype t;
    unsigned char *raw = NULL;
    size_t bytes = 0;
    if ((st = clf__weights_blocks(ctx, w, names[i], outs[i], in, &t, &raw, &bytes)) == CLF_OK &&
        (t == CLF_F32 || (i > 0 && t != *dt))) {
      free(raw);
      free(*cat);
      *dt = CLF_F32, *cat = NULL, *total = 0;
      return CLF_OK;
    }
    unsigned char *grown = st == CLF_OK ? realloc(*cat, *total + bytes + 1) : NULL;
    if (st == CLF_OK && !grown) st = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory reading \"%s\"",
                                               names[i]);
    if (grown) memcpy(grown + *total, raw, bytes), *cat = grown, *total += bytes, *dt = t;
    free(raw);
  }
  if (st != CLF_OK) free(*cat), *cat = NULL;
  return st;
}

clf_status clf__load_stored(clf_context *ctx, const clf__weights *w, clf__params *p, const char *const *names,
                            const size_t *outs, size_t n, size_t in, clf_tensor **out) {
  *out = NULL;
  if (p->wtype != CLF_STORED || p->simulate) return CLF_OK;
  clf_dtype dt;
  unsigned char *cat = NULL;
  size_t bytes = 0, rows = 0;
  for (size_t i = 0; i < n; i++) rows += outs[i];
  clf_status st = stored_parts(ctx, w, names, outs, n, in, &dt, &cat, &bytes);
  if (st != CLF_OK || dt == CLF_F32) return st;
  if (dt == CLF_Q8_0 || dt == CLF_Q4_0) {
    unsigned char *packed = malloc(bytes + 1);
    if (!packed) st = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory reading \"%s\"", names[0]);
    else repack_blocks(dt, cat, rows * in / CLF__QBLOCK, packed);
    free(cat);
    cat = packed;
  }
  clf_tensor *t = NULL;
  if (st == CLF_OK && (st = clf__weight_fits_alloc(ctx, names[0], bytes)) == CLF_OK &&
      (st = clf_tensor_create(ctx, dt, 2, (size_t[]){rows, in}, &t)) == CLF_OK &&
      (st = clf_tensor_upload(ctx, t, cat, bytes)) != CLF_OK)
    clf_tensor_destroy(t);
  free(cat);
  if (st != CLF_OK || (st = clf__params_add(ctx, p, t)) != CLF_OK) return st;
  *out = t;
  return CLF_OK;
}

clf_status clf__load_weight(clf_context *ctx, const clf__weights *w, clf__params *p, const char *wname,
                            size_t out_f, size_t in_f, clf_weight_layout layout, clf_tensor **out) {
  clf_status st = layout == CLF_WEIGHT_OUT_IN ? clf__load_stored(ctx, w, p, &wname, &out_f, 1, in_f, out) : CLF_OK;
  if (st != CLF_OK || (layout == CLF_WEIGHT_OUT_IN && *out)) return st;
  float *h = NULL;
  st = clf__read_matrix(ctx, w, wname, out_f, in_f, layout == CLF_WEIGHT_IN_OUT, &h);
  if (st == CLF_OK) st = store_matrix(ctx, p, wname, h, out_f, in_f, out);
  free(h);
  return st;
}

clf_status clf__load_linear(clf_context *ctx, const clf__weights *w, clf__params *p, const char *wname,
                            const char *bname, size_t out_f, size_t in_f, clf_weight_layout layout, int in_out_f32,
                            clf__linear *l) {
  float *h = NULL;
  l->layout = CLF_WEIGHT_OUT_IN;
  l->b = NULL;
  l->w = NULL;
  clf_status st = layout == CLF_WEIGHT_OUT_IN ? clf__load_stored(ctx, w, p, &wname, &out_f, 1, in_f, &l->w) : CLF_OK;
  if (st == CLF_OK && !l->w) st = clf__read_matrix(ctx, w, wname, out_f, in_f, layout == CLF_WEIGHT_IN_OUT, &h);
  if (st == CLF_OK && !l->w) st = clf__store_linear(ctx, p, in_out_f32, wname, h, out_f, in_f, l);
  free(h);
  if (st == CLF_OK && bname) st = clf__param(ctx, w, p, bname, 1, &out_f, &l->b);
  return st;
}
