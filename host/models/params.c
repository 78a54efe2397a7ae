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

/* Uploads host [rows, in] as the params' weight type into p. */
static clf_status store_matrix(clf_context *ctx, clf__params *p, const char *name, const float *h, size_t rows,
                               size_t in, clf_tensor **out) {
  if (clf__dtype_is_block(p->wtype) && in % CLF__QBLOCK != 0)
    return clf__fail(ctx, CLF_E_UNSUPPORTED,
                     "tensor \"%s\" [%zu, %zu]: %s weights need in-features that are a multiple of %d (use f16 "
                     "or f32 weights for this model)",
                     name, rows, in, clf__weight_type_name(p->wtype), CLF__QBLOCK);
  clf_tensor *t = NULL;
  const clf_dtype stored = p->simulate ? CLF_F32 : p->wtype;
  clf_status st = clf__weight_fits_alloc(ctx, name, clf__dtype_bytes(stored, rows * in));
  if (st != CLF_OK) return st;
  if (p->simulate && p->wtype != CLF_F32) {
    float *r = malloc(rows * in * sizeof *r + 1);
    void *q = malloc(clf__dtype_bytes(p->wtype, rows * in) + 1);
    if (r && q) {
      clf__quantize(p->wtype, h, rows * in, q);
      clf__dequantize(p->wtype, q, rows * in, r);
    }
    st = r && q ? clf_tensor_from_f32(ctx, CLF_F32, 2, (size_t[]){rows, in}, r, &t)
                : clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory rounding \"%s\"", name);
    free(r);
    free(q);
  } else {
    st = clf_tensor_from_f32(ctx, p->wtype, 2, (size_t[]){rows, in}, h, &t);
  }
  if (st != CLF_OK) return st;
  if ((st = clf__params_add(ctx, p, t)) != CLF_OK) return st;
  *out = t;
  return CLF_OK;
}

clf_status clf__store_linear(clf_context *ctx, clf__params *p, int in_out_f32, const char *name, const float *h,
                             size_t rows, size_t in, clf__linear *l) {
  l->layout = CLF_WEIGHT_OUT_IN;
  if (!in_out_f32 || p->wtype != CLF_F32) return store_matrix(ctx, p, name, h, rows, in, &l->w);
  float *t = malloc((rows * in > 0 ? rows * in : 1) * sizeof *t);
  if (!t) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory transposing \"%s\"", name);
  transpose(h, rows, in, t);
  clf_status st = store_matrix(ctx, p, name, t, in, rows, &l->w);
  free(t);
  if (st == CLF_OK) l->layout = CLF_WEIGHT_IN_OUT;
  return st;
}

clf_status clf__load_weight(clf_context *ctx, const clf__weights *w, clf__params *p, const char *wname,
                            size_t out_f, size_t in_f, clf_weight_layout layout, clf_tensor **out) {
  float *h = NULL;
  clf_status st = clf__read_matrix(ctx, w, wname, out_f, in_f, layout == CLF_WEIGHT_IN_OUT, &h);
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
  clf_status st = clf__read_matrix(ctx, w, wname, out_f, in_f, layout == CLF_WEIGHT_IN_OUT, &h);
  if (st == CLF_OK) st = clf__store_linear(ctx, p, in_out_f32, wname, h, out_f, in_f, l);
  free(h);
  if (st == CLF_OK && bname) st = clf__param(ctx, w, p, bname, 1, &out_f, &l->b);
  return st;
}
