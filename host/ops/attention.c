/* ops_attention.c - multi-head scaled dot-product attention: the fused
 * flash-attention kernel, and the GEMM path (CLBlast Q K^T, masked softmax,
 * CLBlast P V) for head dims the fused kernel does not take.
 */
#include "ops.h"

#include "base/checked.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>

#define ATT_MAX_HEAD_DIM 256
/* The fused kernel's work-group (an 8 x 8 grid; see attention.cl). */
#define ATT_FUSED_WG 64
/* Local memory the fused kernel may use: well under 32 KiB so that a GPU
 * keeps several work-groups resident per compute unit. */
#define ATT_LOCAL_BUDGET (28u * 1024u)

/* Everything the two paths need, resolved from the checked arguments. */
typedef struct attn_args {
  const clf_tensor *q, *k, *v, *pad, *bias;
  clf_tensor *out;
  size_t B, H, Lq, Lk, Lcap, Dh;
  cl_int pad_kind; /* 0 none, 1 i32, 2 i64, 3 f32 */
  cl_uint pad_off; /* in 32-bit words */
  cl_uint n_win, bias_bstride, bias_hstride;
  int causal, merged;
  float scale;
} attn_args;

/* Local bytes of the fused kernel for head dim dh and tiles bq x bk (the
 * arrays declared in attn_fused). */
static size_t attn_fused_local(size_t dh, size_t bq, size_t bk) {
  size_t str = dh | 1;
  return sizeof(float) * (bq * str + bk * str + bq * (bk + 1) + 2 * bq * 8) + sizeof(cl_int) * bk;
}

/* Tile sizes of the fused kernel: queries per work-group (bq) and keys per
 * tile (bk), multiples of 8.  Larger bq re-reads K and V less often; the
 * head dim bounds both through local memory.  Up to 8 queries (decoding
 * with a KV cache) take bq = 8, so little work goes to absent query rows,
 * and longer key tiles instead.  0 when nothing fits. */
static int attn_fused_tiles(const clf_context *ctx, size_t dh, size_t lq, unsigned *bq, unsigned *bk) {
  if (dh == 0 || dh > ATT_MAX_HEAD_DIM) return 0;
  size_t budget = ctx->caps.local_mem < ATT_LOCAL_BUDGET ? (size_t)ctx->caps.local_mem : ATT_LOCAL_BUDGET;
  unsigned q = dh <= 64 ? 32 : 16, kk = dh <= 64 ? 32 : dh <= 128 ? 16 : 8;
  if (lq <= 8) {
    q = 8;
    kk *= 2;
  }
  while (attn_fused_local(dh, q, kk) > budget) {
    if (kk > 8) kk /= 2;
    else if (q > 8) q /= 2;
    else return 0;
  }
  *bq = q;
  *bk = kk;
  return 1;
}

int clf__attn_fused_variant(const clf_context *ctx, size_t dh, size_t lq, char *buf, size_t len) {
  unsigned bq, bk;
  if (!attn_fused_tiles(ctx, dh, lq, &bq, &bk)) return 0;
  snprintf(buf, len, "attention.fused HEAD_DIM=%zu BQ=%u BK=%u", dh, bq, bk);
  return 1;
}

/* Sets kernel arguments first, first + 1, ... from parallel lists. */
static clf_status attn_set_list(clf_context *ctx, clf__kernel *kr, cl_uint first, cl_uint n, const size_t *sizes,
                                const void *const *vals) {
  for (cl_uint i = 0; i < n; i++) {
    cl_int err = clSetKernelArg(kr->kernel, first + i, sizes[i], vals[i]);
    if (err != CL_SUCCESS) {
      char what[160];
      snprintf(what, sizeof(what), "%s, arg %u", kr->name, (unsigned)(first + i));
      return clf__fail_cl(ctx, err, "clSetKernelArg", what);
    }
  }
  return CLF_OK;
}

/* Sets the mask arguments that both kernels take, from `first` on: pad,
 * pad_off, pad_kind, bias, bias_off, has_bias, n_win, bias_bstride,
 * bias_hstride.  An absent tensor passes q's buffer, never read. */
static clf_status attn_set_mask_args(clf_context *ctx, clf__kernel *kr, cl_uint first, const attn_args *a) {
  cl_mem pad_buf = a->pad ? a->pad->buf : a->q->buf;
  cl_mem bias_buf = a->bias ? a->bias->buf : a->q->buf;
  cl_uint bias_off = a->bias ? (cl_uint)a->bias->offset : 0;
  cl_int has_bias = a->bias != NULL;
  const void *const vals[] = {&pad_buf, &a->pad_off, &a->pad_kind, &bias_buf, &bias_off,
                              &has_bias, &a->n_win, &a->bias_bstride, &a->bias_hstride};
  const size_t sizes[] = {sizeof(cl_mem), sizeof(cl_uint), sizeof(cl_int), sizeof(cl_mem), sizeof(cl_uint),
                          sizeof(cl_int), sizeof(cl_uint), sizeof(cl_uint), sizeof(cl_uint)};
  return attn_set_list(ctx, kr, first, (cl_uint)CLF__ARRAY_LEN(vals), sizes, vals);
}

/* The fused kernel for a's head dim, or *kr NULL (with CLF_OK) when it does
 * not apply on this device; *why says why. */
static clf_status attn_fused_kernel(clf_context *ctx, const attn_args *a, clf__kernel **kr, unsigned *bq,
                                    const char **why) {
  unsigned bk;
  *kr = NULL;
  if (a->Dh > ATT_MAX_HEAD_DIM) {
    *why = "the head dim exceeds 256";
    return CLF_OK;
  }
  if (!attn_fused_tiles(ctx, a->Dh, a->Lq, bq, &bk)) {
    *why = "the device has too little local memory";
    return CLF_OK;
  }
  char opts[96];
  snprintf(opts, sizeof(opts), "-DHEAD_DIM=%zu -DATT_BQ=%u -DATT_BK=%u", a->Dh, *bq, bk);
  clf__kernel *k;
  clf_status st = clf__get_kernel(ctx, "attention", opts, "attn_fused", &k);
  if (st != CLF_OK) return st;
  if (clf__wg_1d(ctx, k, ATT_FUSED_WG) < ATT_FUSED_WG) {
    *why = "the device runs fewer than 64 work-items per group";
    return CLF_OK;
  }
  *kr = k;
  return CLF_OK;
}

static clf_status attn_run_fused(clf_context *ctx, const attn_args *a, clf__kernel *kr, unsigned bq,
                                 cl_event *event) {
  cl_uint out_h = (cl_uint)(a->merged ? a->Dh : a->Lq * a->Dh);
  cl_uint out_i = (cl_uint)(a->merged ? a->H * a->Dh : a->Dh);
  cl_uint n_bh = (cl_uint)(a->B * a->H), H = (cl_uint)a->H, Lq = (cl_uint)a->Lq, Lk = (cl_uint)a->Lk;
  cl_uint Lcap = (cl_uint)a->Lcap;
  cl_int causal = a->causal;
  float scale = a->scale;
  clf_status st = clf__set_args(ctx, kr, 6, CLF__TARG(a->q), CLF__TARG(a->k), CLF__TARG(a->v));
  if (st != CLF_OK) return st;
  if ((st = attn_set_mask_args(ctx, kr, 6, a)) != CLF_OK) return st;
  /* Arguments 15.. follow the mask ones. */
  cl_uint out_off = (cl_uint)a->out->offset;
  const void *const vals[] = {&a->out->buf, &out_off, &out_h, &out_i, &n_bh, &H, &Lq, &Lk, &Lcap, &causal, &scale};
  const size_t sizes[] = {sizeof(cl_mem), sizeof(cl_uint), sizeof(cl_uint), sizeof(cl_uint), sizeof(cl_uint),
                          sizeof(cl_uint), sizeof(cl_uint), sizeof(cl_uint), sizeof(cl_uint), sizeof(cl_int),
                          sizeof(float)};
  if ((st = attn_set_list(ctx, kr, 15, (cl_uint)CLF__ARRAY_LEN(vals), sizes, vals)) != CLF_OK) return st;
  const size_t global[2] = {(a->Lq + bq - 1) / bq * ATT_FUSED_WG, a->B * a->H};
  const size_t local[2] = {ATT_FUSED_WG, 1};
  return clf__launch(ctx, kr, 2, global, local, event);
}

static clf_status attn_run_gemm(clf_context *ctx, const attn_args *a, cl_event *event) {
  const size_t BH = a->B * a->H;
  size_t nS = 0;
  /* Merged output: the heads of one batch index are Dh apart with row
   * stride H*Dh, which one strided batch covers only when B == 1 or Lq == 1;
   * otherwise P V goes to scratch (after the scores) and attn_merge moves it. */
  const int direct = !a->merged || a->B == 1 || a->Lq == 1;
  const size_t nO = direct ? 0 : BH * a->Lq * a->Dh;
  if (!clf__mul_ok(BH * a->Lq, a->Lk, &nS) || !clf__fits_u32(nS, nO))
    return clf__fail(ctx, CLF_E_UNSUPPORTED,
                     "clf_attention: the GEMM path's %zu x %zu x %zu score buffer exceeds 2^32 elements", BH,
                     a->Lq, a->Lk);
  /* Kernels and scratch first, so that a failure enqueues nothing. */
  clf__kernel *ks, *km = NULL;
  clf_status st = clf__get_kernel(ctx, "attention", NULL, "attn_softmax", &ks);
  if (st != CLF_OK) return st;
  if (!direct && (st = clf__get_kernel(ctx, "attention", NULL, "attn_merge", &km)) != CLF_OK) return st;
  cl_mem s;
  if ((st = clf__scratch(ctx, CLF__SCRATCH_ATTN, (nS + nO) * sizeof(float), &s)) != CLF_OK) return st;

  /* scores = scale * q k^T: [Lq, Dh] x [Lk, Dh]^T per (b, h); k's batch
   * stride is Lcap * Dh so a KV cache longer than kv_len works. */
  st = clf__sgemm(ctx, 0, 1, a->Lq, a->Lk, a->Dh, a->scale, a->q->buf, a->q->offset, a->Dh, a->Lq * a->Dh,
                  a->k->buf, a->k->offset, a->Dh, a->Lcap * a->Dh, 0.0f, s, 0, a->Lk, a->Lq * a->Lk, BH, NULL);
  if (st != CLF_OK) return st;

  cl_uint zero = 0, n_rows = (cl_uint)(BH * a->Lq), H = (cl_uint)a->H, Lq = (cl_uint)a->Lq;
  cl_uint Lk = (cl_uint)a->Lk;
  cl_int causal = a->causal;
  if ((st = clf__set_args(ctx, ks, 2, CLF__ARG(s), CLF__ARG(zero))) != CLF_OK) return st;
  if ((st = attn_set_mask_args(ctx, ks, 2, a)) != CLF_OK) return st;
  const void *const vals[] = {&n_rows, &H, &Lq, &Lk, &causal};
  const size_t sizes[] = {sizeof(cl_uint), sizeof(cl_uint), sizeof(cl_uint), sizeof(cl_uint), sizeof(cl_int)};
  if ((st = attn_set_list(ctx, ks, 11, (cl_uint)CLF__ARRAY_LEN(vals), sizes, vals)) != CLF_OK) return st;
  /* One work-group per row; wider groups for long rows. */
  size_t local = clf__wg_1d(ctx, ks, a->Lk >= 1024 ? 256 : a->Lk >= 256 ? 128 : 64);
  size_t global = BH * a->Lq * local;
  if ((st = clf__launch(ctx, ks, 1, &global, &local, NULL)) != CLF_OK) return st;

  /* out = P v: [Lq, Lk] x [Lk, Dh] per (b, h). */
  cl_mem c = a->out->buf;
  size_t c_off = a->out->offset, ldc = a->Dh, stride_c = a->Lq * a->Dh;
  if (!direct) {
    c = s;
    c_off = nS;
  } else if (a->merged) {
    ldc = a->H * a->Dh;
    stride_c = a->Dh;
  }
  st = clf__sgemm(ctx, 0, 0, a->Lq, a->Dh, a->Lk, 1.0f, s, 0, a->Lk, a->Lq * a->Lk, a->v->buf, a->v->offset, a->Dh,
                  a->Lcap * a->Dh, 0.0f, c, c_off, ldc, stride_c, BH, direct ? event : NULL);
  if (st != CLF_OK || direct) return st;

  cl_uint x_off = (cl_uint)nS, Dh = (cl_uint)a->Dh, n = (cl_uint)nO;
  st = clf__set_args(ctx, km, 8, CLF__ARG(s), CLF__ARG(x_off), CLF__TARG(a->out), CLF__ARG(H), CLF__ARG(Lq),
                     CLF__ARG(Dh), CLF__ARG(n));
  if (st != CLF_OK) return st;
  size_t mlocal = clf__wg_1d(ctx, km, 256), mglobal = nO;
  return clf__launch(ctx, km, 1, &mglobal, &mlocal, event);
}

/* Checks the optional masks against the resolved sizes and fills a's mask
 * fields. */
static clf_status attn_check_mask(clf_context *ctx, const char *op, const clf_attention_mask *mask, attn_args *a) {
  clf_status st;
  char sb[96];
  a->pad = a->bias = NULL;
  a->pad_kind = 0;
  a->pad_off = 0;
  a->n_win = 1;
  a->bias_bstride = a->bias_hstride = 0;
  a->causal = 0;
  if (!mask) return CLF_OK;
  a->causal = mask->causal != 0;
  const clf_tensor *p = mask->key_padding;
  if (p) {
    if ((st = clf__check_tensor(ctx, op, "mask->key_padding", p, -1, 2, 2)) != CLF_OK) return st;
    if (p->dtype != CLF_I32 && p->dtype != CLF_I64 && p->dtype != CLF_F32)
      return clf__fail(ctx, CLF_E_DTYPE, "%s: mask->key_padding is %s, expected i32, i64 or f32", op,
                       clf_dtype_name(p->dtype));
    if (p->shape[0] != a->B || p->shape[1] != a->Lk)
      return clf__fail(ctx, CLF_E_SHAPE, "%s: mask->key_padding has shape %s, expected [B, kv_len] = [%zu, %zu]",
                       op, clf__shape_str(p, sb, sizeof(sb)), a->B, a->Lk);
    /* The kernel reads i64 as pairs of 32-bit words. */
    const size_t words = p->dtype == CLF_I64 ? 2 : 1;
    size_t off_w, n_w;
    if (!clf__mul_ok(p->offset, words, &off_w) || !clf__mul_ok(clf_tensor_numel(p), words, &n_w) ||
        !clf__fits_u32(off_w, n_w))
      return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: mask->key_padding is too large for 32-bit indexing", op);
    a->pad = p;
    a->pad_kind = p->dtype == CLF_I32 ? 1 : p->dtype == CLF_I64 ? 2 : 3;
    a->pad_off = (cl_uint)(p->offset * words);
  }
  const clf_tensor *bs = mask->bias;
  if (bs) {
    if ((st = clf__check_tensor(ctx, op, "mask->bias", bs, CLF_F32, 4, 4)) != CLF_OK) return st;
    size_t nw = bs->shape[0], hb = bs->shape[1];
    if (nw == 0 || a->B % nw != 0 || (hb != a->H && hb != 1) || bs->shape[2] != a->Lq || bs->shape[3] != a->Lk)
      return clf__fail(ctx, CLF_E_SHAPE,
                       "%s: mask->bias has shape %s, expected [nW, %zu or 1, %zu, %zu] (H, Lq, kv_len) "
                       "with nW dividing B = %zu",
                       op, clf__shape_str(bs, sb, sizeof(sb)), a->H, a->Lq, a->Lk, a->B);
    if ((st = clf__check_fits_u32(ctx, op, "mask->bias", bs)) != CLF_OK) return st;
    a->bias = bs;
    a->n_win = (cl_uint)nw;
    a->bias_bstride = (cl_uint)(hb * a->Lq * a->Lk);
    a->bias_hstride = hb == 1 ? 0u : (cl_uint)(a->Lq * a->Lk);
  }
  return CLF_OK;
}

clf_status clf_attention(clf_context *ctx, const clf_tensor *q, const clf_tensor *k, const clf_tensor *v,
                         size_t kv_len, const clf_attention_mask *mask, float scale, clf_attention_impl impl,
                         clf_tensor *out, cl_event *event) {
  static const char op[] = "clf_attention";
  clf_status st;
  char sb[96];
  attn_args a;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "q", q, CLF_F32, 4, 4)) != CLF_OK) return st;
  a.q = q;
  a.B = q->shape[0];
  a.H = q->shape[1];
  a.Lq = q->shape[2];
  a.Dh = q->shape[3];
  if ((st = clf__check_tensor(ctx, op, "k", k, CLF_F32, 4, 4)) != CLF_OK) return st;
  if ((st = clf__check_dim(ctx, op, "k", k, 0, a.B)) != CLF_OK) return st;
  if ((st = clf__check_dim(ctx, op, "k", k, 1, a.H)) != CLF_OK) return st;
  if ((st = clf__check_dim(ctx, op, "k", k, 3, a.Dh)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "v", v, CLF_F32, 4, 4)) != CLF_OK) return st;
  if ((st = clf__check_same_shape(ctx, op, "k", k, "v", v)) != CLF_OK) return st;
  a.k = k;
  a.v = v;
  a.Lcap = k->shape[2];
  if (kv_len > a.Lcap)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: kv_len %zu exceeds the %zu rows of k %s", op, kv_len, a.Lcap,
                     clf__shape_str(k, sb, sizeof(sb)));
  a.Lk = kv_len ? kv_len : a.Lcap;
  if ((st = clf__check_tensor(ctx, op, "out", out, CLF_F32, 3, 4)) != CLF_OK) return st;
  a.out = out;
  a.merged = out->ndim == 3;
  if (a.merged ? (out->shape[0] != a.B || out->shape[1] != a.Lq || out->shape[2] != a.H * a.Dh)
               : (out->shape[0] != a.B || out->shape[1] != a.H || out->shape[2] != a.Lq || out->shape[3] != a.Dh))
    return clf__fail(ctx, CLF_E_SHAPE, "%s: out has shape %s, expected [%zu, %zu, %zu, %zu] or [%zu, %zu, %zu]", op,
                     clf__shape_str(out, sb, sizeof(sb)), a.B, a.H, a.Lq, a.Dh, a.B, a.Lq, a.H * a.Dh);
  if ((st = attn_check_mask(ctx, op, mask, &a)) != CLF_OK) return st;
  if (impl != CLF_ATTN_AUTO && impl != CLF_ATTN_FUSED && impl != CLF_ATTN_GEMM)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: impl %d is not a clf_attention_impl", op, (int)impl);
  if (!isfinite(scale)) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: scale is %g, must be finite", op, (double)scale);
  if ((st = clf__check_fits_u32(ctx, op, "q", q)) != CLF_OK || (st = clf__check_fits_u32(ctx, op, "k", k)) != CLF_OK ||
      (st = clf__check_fits_u32(ctx, op, "v", v)) != CLF_OK || (st = clf__check_fits_u32(ctx, op, "out", out)) != CLF_OK)
    return st;
  if (a.Lq > INT_MAX || a.Lk > INT_MAX)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: Lq %zu or kv_len %zu exceeds 2^31 - 1", op, a.Lq, a.Lk);
  a.scale = scale;

  if (clf_tensor_numel(out) == 0) {
    /* Nothing to compute; still honour the event. */
    if (event) {
      cl_int err = clEnqueueMarkerWithWaitList(ctx->queue, 0, NULL, event);
      if (err != CL_SUCCESS) return clf__fail_cl(ctx, err, "clEnqueueMarkerWithWaitList", op);
    }
    return CLF_OK;
  }

  /* The fused kernel and the GEMM path stand in for each other where one
   * failed self-validation. */
  static const char gemm_v[] = "attention.gemm";
  char fused_v[96];
  int use_fused = impl != CLF_ATTN_GEMM, pref;
  if (clf__attn_fused_variant(ctx, a.Dh, a.Lq, fused_v, sizeof(fused_v))) {
    st = clf__variant_pick(ctx, op, use_fused ? fused_v : gemm_v, use_fused ? gemm_v : fused_v, &pref);
    if (st != CLF_OK) return st;
    use_fused = pref == use_fused;
  } else if ((st = clf__variant_pick(ctx, op, gemm_v, NULL, &pref)) != CLF_OK) {
    return st;
  }

  if (use_fused) {
    clf__kernel *kr;
    unsigned bq = 0;
    const char *why = "";
    if ((st = attn_fused_kernel(ctx, &a, &kr, &bq, &why)) != CLF_OK) return st;
    if (kr) return attn_run_fused(ctx, &a, kr, bq, event);
    if (impl == CLF_ATTN_FUSED)
      return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: the fused kernel does not apply to head dim %zu: %s", op, a.Dh,
                       why);
  }
  /* No key at all: every row is fully masked, so the output is zeros. */
  if (a.Lk == 0) return clf_tensor_fill(ctx, out, 0.0, event);
  return attn_run_gemm(ctx, &a, event);
}
