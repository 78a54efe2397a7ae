/* params.c - the parameter list, and the linear layers' weights read from
 * the checkpoint, transposed where needed and stored in the weight type
 * (params.h).
 */
#include "params.h"

#include "base/checked.h"
#include "ops/ops.h"

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

/* GGUF's blocks of dt [rows, in] in the 16-row interleave (linear_r16.c),
 * into p. */
static clf_status r16_upload(clf_context *ctx, clf__params *p, const char *name, clf_dtype dt,
                             const unsigned char *blocks, size_t rows, size_t in, clf_tensor **out) {
  const size_t bytes = clf__r16_bytes(dt, rows, in);
  unsigned char *packed = malloc(bytes + 1);
  if (!packed) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory repacking \"%s\"", name);
  clf__r16_pack(dt, blocks, rows, in, packed);
  clf_tensor *t = NULL;
  clf_status st = clf__weight_fits_alloc(ctx, name, bytes);
  if (st == CLF_OK) st = clf__r16_tensor(ctx, dt, rows, in, packed, &t);
  free(packed);
  if (st != CLF_OK || (st = clf__params_add(ctx, p, t)) != CLF_OK) return st;
  *out = t;
  return CLF_OK;
}

/* h [rows, in] quantized to block type wt in the 16-row interleave, into
 * p: its blocks as ggml's (clformer's Q8_0 / Q4_0 put back in blocks). */
static clf_status store_r16(clf_context *ctx, clf__params *p, const char *name, clf_dtype wt, const float *h,
                            size_t rows, size_t in, clf_tensor **out) {
  const size_t bytes = clf__dtype_bytes(wt, rows * in);
  unsigned char *q = malloc(bytes + 1), *blocks = malloc(bytes + 1);
  clf_status st = CLF_OK;
  if (!q || !blocks) st = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory quantizing \"%s\"", name);
  if (st == CLF_OK) {
    clf__quantize(wt, h, rows * in, q);
    if (clf__dtype_is_ggml(wt)) memcpy(blocks, q, bytes);
    else clf__unsplit_blocks(wt, q, rows * in / CLF__QBLOCK, blocks);
    st = r16_upload(ctx, p, name, wt, blocks, rows, in, out);
  }
  free(q);
  free(blocks);
  return st;
}

/* Uploads host [rows, in] as the params' weight type into p: a weight
 * that only clf_linear reads (every caller's), so on a CPU a block type
 * in the 16-row interleave (clf__r16_wanted). */
static clf_status store_matrix(clf_context *ctx, clf__params *p, const char *name, const float *h, size_t rows,
                               size_t in, clf_tensor **out) {
  const clf_dtype wt = clf__weight_type_for(host_type(p), in);
  if (clf__dtype_is_block(wt) && in % CLF__QBLOCK != 0)
    return clf__fail(ctx, CLF_E_UNSUPPORTED,
                     "tensor \"%s\" [%zu, %zu]: %s weights need in-features that are a multiple of %d (use f16 "
                     "or f32 weights for this model)",
                     name, rows, in, clf__weight_type_name(wt), CLF__QBLOCK);
  if (!p->simulate && clf__r16_wanted(ctx, wt, rows, in)) return store_r16(ctx, p, name, wt, h, rows, in, out);
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

/* The parts as the checkpoint stores them: dt[i] and raw[i] (malloc'd,
 * bytes[i] long), or dt[i] CLF_F32 and raw[i] NULL where a part is read as
 * f32 (clf__weights_blocks).  On failure every raw is freed. */
static clf_status read_parts(clf_context *ctx, const clf__weights *w, const char *const *names, const size_t *outs,
                             size_t n, size_t in, int in_out, clf_dtype *dt, unsigned char **raw, size_t *bytes) {
  clf_status st = CLF_OK;
  for (size_t i = 0; i < n; i++) dt[i] = CLF_F32, raw[i] = NULL, bytes[i] = 0;
  for (size_t i = 0; i < n && st == CLF_OK; i++)
    st = clf__weights_blocks(ctx, w, names[i], outs[i], in, in_out, &dt[i], &raw[i], &bytes[i]);
  if (st != CLF_OK)
    for (size_t i = 0; i < n; i++) free(raw[i]), raw[i] = NULL;
  return st;
}

/* Uploads a linear weight's blocks of type dt, [rows, in] as ggml stores
 * them (n_raw pieces one after another, together `bytes` long), into p:
 * on a CPU in the 16-row interleave (clf__r16_wanted), else as they are,
 * Q8_0 / Q4_0 in clformer's layout. */
static clf_status upload_blocks(clf_context *ctx, clf__params *p, const char *name, clf_dtype dt,
                                unsigned char *const *raw, const size_t *piece, size_t n_raw, size_t rows, size_t in,
                                clf_tensor **out) {
  size_t bytes = 0;
  for (size_t i = 0; i < n_raw; i++) bytes += piece[i];
  unsigned char *cat = malloc(bytes + 1), *packed = NULL;
  if (!cat) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory reading \"%s\"", name);
  for (size_t i = 0, at = 0; i < n_raw; at += piece[i], i++) memcpy(cat + at, raw[i], piece[i]);
  if (clf__r16_wanted(ctx, dt, rows, in)) {
    const clf_status st = r16_upload(ctx, p, name, dt, cat, rows, in, out);
    free(cat);
    return st;
  }
  if (dt == CLF_Q8_0 || dt == CLF_Q4_0) {
    if (!(packed = malloc(bytes + 1))) {
      free(cat);
      return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "model: out of host memory reading \"%s\"", name);
    }
    repack_blocks(dt, cat, rows * in / CLF__QBLOCK, packed);
    free(cat);
    cat = packed;
  }
  clf_tensor *t = NULL;
  clf_status st;
  if ((st = clf__weight_fits_alloc(ctx, name, bytes)) == CLF_OK &&
      (st = clf_tensor_create(ctx, dt, 2, (size_t[]){rows, in}, &t)) == CLF_OK &&
      (st = clf_tensor_upload(ctx, t, cat, bytes)) != CLF_OK)
    clf_tensor_destroy(t);
  free(cat);
  if (st != CLF_OK || (st = clf__params_add(ctx, p, t)) != CLF_OK) return st;
  *out = t;
  return CLF_OK;
}

/* The parts as stored, adjacent ones of one block type together (a Q4_K_M
 * file's Q5_0 attn_q and attn_k beside its Q8_0 attn_v: two products a
 * step, not three), or each read as f32 [outs[i], in]. */
static clf_status upload_each(clf_context *ctx, const clf__weights *w, clf__params *p, const char *const *names,
                              const size_t *outs, size_t n, size_t in, int in_out, const clf_dtype *dt,
                              unsigned char *const *raw, const size_t *bytes, clf__linear *l) {
  clf_status st = CLF_OK;
  size_t np = 0;
  for (size_t i = 0, run; i < n && st == CLF_OK; i += run) {
    run = 1;
    if (raw[i]) {
      size_t rows = outs[i];
      while (i + run < n && raw[i + run] && dt[i + run] == dt[i]) rows += outs[i + run++];
      st = upload_blocks(ctx, p, names[i], dt[i], &raw[i], &bytes[i], run, rows, in, &l->part[np++]);
      continue;
    }
    float *h = NULL;
    if ((st = clf__read_matrix(ctx, w, names[i], outs[i], in, in_out, &h)) == CLF_OK)
      st = store_matrix(ctx, p, names[i], h, outs[i], in, &l->part[np++]);
    free(h);
  }
  if (st == CLF_OK) l->nparts = np, l->w = NULL;
  return st;
}

/* The weight of parts names[0..n) as stored (clf__load_stored_linear;
 * split 0: l->w or nothing), in_out as clf__weights_blocks'. */
static clf_status load_stored(clf_context *ctx, const clf__weights *w, clf__params *p, const char *const *names,
                              const size_t *outs, size_t n, size_t in, int in_out, int split, clf__linear *l) {
  l->w = NULL, l->nparts = 0;
  for (size_t i = 0; i < CLF__LINEAR_PARTS; i++) l->part[i] = NULL;
  if (p->wtype != CLF_STORED || p->simulate || n == 0 || n > 8) return CLF_OK;
  clf_dtype dt[8];
  unsigned char *raw[8];
  size_t bytes[8], rows = 0;
  clf_status st = read_parts(ctx, w, names, outs, n, in, in_out, dt, raw, bytes);
  if (st != CLF_OK) return st;
  int same = 1, blocks = 0;
  for (size_t i = 0; i < n; i++) rows += outs[i], same &= dt[i] == dt[0], blocks += raw[i] != NULL;
  if (same && blocks == (int)n) st = upload_blocks(ctx, p, names[0], dt[0], raw, bytes, n, rows, in, &l->w);
  else if (split && blocks > 0 && n <= CLF__LINEAR_PARTS)
    st = upload_each(ctx, w, p, names, outs, n, in, in_out, dt, raw, bytes, l);
  for (size_t i = 0; i < n; i++) free(raw[i]);
  return st;
}

clf_status clf__load_stored(clf_context *ctx, const clf__weights *w, clf__params *p, const char *const *names,
                            const size_t *outs, size_t n, size_t in, clf_tensor **out) {
  clf__linear l;
  clf_status st = load_stored(ctx, w, p, names, outs, n, in, 0, 0, &l);
  *out = l.w;
  return st;
}

clf_status clf__load_stored_linear(clf_context *ctx, const clf__weights *w, clf__params *p,
                                   const char *const *names, const size_t *outs, size_t n, size_t in,
                                   clf__linear *l) {
  return load_stored(ctx, w, p, names, outs, n, in, 0, 1, l);
}

size_t clf__linear_out(const clf__linear *l) {
  if (!l->nparts) return l->w ? l->w->shape[l->layout == CLF_WEIGHT_IN_OUT ? 1 : 0] : 0;
  size_t out = 0;
  for (size_t i = 0; i < l->nparts; i++) out += l->part[i]->shape[0];
  return out;
}

clf_status clf__load_weight(clf_context *ctx, const clf__weights *w, clf__params *p, const char *wname,
                            size_t out_f, size_t in_f, clf_weight_layout layout, clf_tensor **out) {
  clf__linear l;
  clf_status st = load_stored(ctx, w, p, &wname, &out_f, 1, in_f, layout == CLF_WEIGHT_IN_OUT, 0, &l);
  *out = l.w;
  if (st != CLF_OK || *out) return st;
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
  l->nparts = 0;
  /* as stored: the file's [out, in] blocks, whichever layout the name has */
  clf_status st = load_stored(ctx, w, p, &wname, &out_f, 1, in_f, layout == CLF_WEIGHT_IN_OUT, 0, l);
  if (st == CLF_OK && !l->w) st = clf__read_matrix(ctx, w, wname, out_f, in_f, layout == CLF_WEIGHT_IN_OUT, &h);
  if (st == CLF_OK && !l->w) st = clf__store_linear(ctx, p, in_out_f32, wname, h, out_f, in_f, l);
  free(h);
  if (st == CLF_OK && bname) st = clf__param(ctx, w, p, bname, 1, &out_f, &l->b);
  return st;
}
