/* validate.c - self-validation of kernel variants.
 *
 * clf_validate runs each kernel variant the library would use on the
 * context's device on small inputs and compares it with a CPU reference
 * (reference.c, in double).  It records each verdict through core/variants.c,
 * which stores them and answers the ops' questions about them.
 */
#include "ops/ops.h"
#include "reference.h"
#include "base/half.h"

#include <clblast_c.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the cases: inputs, one op, a CPU reference ---- */

/* What one case allocates, freed together. */
typedef struct vwork {
  clf_context *ctx;
  clf_tensor *t[8];
  void *h[12];
  size_t nt, nh;
} vwork;

static void *vw_alloc(vwork *w, size_t bytes) {
  if (w->nh == CLF__ARRAY_LEN(w->h)) return NULL;
  void *p = calloc(1, bytes ? bytes : 1);
  if (p) w->h[w->nh++] = p;
  return p;
}

/* n uniform floats in [lo, hi) from a fixed seed (an LCG). */
static float *vw_rand(vwork *w, size_t n, uint32_t seed, float lo, float hi) {
  float *p = vw_alloc(w, n * sizeof(float));
  for (size_t i = 0; p && i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = lo + (hi - lo) * (float)(seed >> 8) / 16777216.0f;
  }
  return p;
}

/* A tensor holding `data` (NULL: uninitialised); NULL on failure, recorded. */
static clf_tensor *vw_tensor(vwork *w, clf_dtype dt, int nd, const size_t *shape, const void *data) {
  clf_tensor *t = NULL;
  if (w->nt == CLF__ARRAY_LEN(w->t)) return NULL;
  if (clf_tensor_create(w->ctx, dt, nd, shape, &t) != CLF_OK) return NULL;
  w->t[w->nt++] = t;
  if (data && clf_tensor_upload(w->ctx, t, data, clf_tensor_bytes(t)) != CLF_OK) return NULL;
  return t;
}

static float *vw_download(vwork *w, const clf_tensor *t) {
  float *p = vw_alloc(w, clf_tensor_bytes(t));
  if (p && clf_tensor_download(w->ctx, t, p, clf_tensor_bytes(t)) != CLF_OK) return NULL;
  return p;
}

static clf_status vw_done(vwork *w, clf_status st) {
  for (size_t i = 0; i < w->nt; i++) clf_tensor_destroy(w->t[i]);
  for (size_t i = 0; i < w->nh; i++) free(w->h[i]);
  return st;
}

/* A failure that left no message (an allocation that vw_* refused). */
static clf_status vw_fail(vwork *w) {
  if (w->ctx->err.status != CLF_OK) return vw_done(w, w->ctx->err.status);
  return vw_done(w, clf__fail(w->ctx, CLF_E_OUT_OF_MEMORY, "self-validation: out of host memory"));
}

/* max |got - ref| / max(1, max |ref|). */
static double rel_error(const float *got, const double *ref, size_t n) {
  double scale = 1.0, err = 0.0;
  for (size_t i = 0; i < n; i++) {
    if (fabs(ref[i]) > scale) scale = fabs(ref[i]);
    double e = fabs((double)got[i] - ref[i]);
    if (!(e <= err)) err = e; /* NaN sticks */
  }
  return err / scale;
}

typedef struct vcase vcase;
typedef clf_status (*case_fn)(clf_context *ctx, const vcase *c, double *err);
struct vcase {
  char name[96];
  case_fn run;
  size_t p[4]; /* the case's parameters */
  double tol;
};

/* Layer norm with residual, beta and sum_out over 7 rows of 200. */
static clf_status case_norm(clf_context *ctx, const vcase *c, double *err) {
  enum { R = 7, D = 200 };
  vwork w = {.ctx = ctx};
  CLF__UNUSED(c);
  float *x = vw_rand(&w, R * D, 1, -3, 5), *r = vw_rand(&w, R * D, 2, -1, 1);
  float *g = vw_rand(&w, D, 3, 0.5f, 1.5f), *b = vw_rand(&w, D, 4, -0.5f, 0.5f);
  double *ry = vw_alloc(&w, 2 * R * D * sizeof(double)), *rs = ry ? ry + R * D : NULL;
  if (!x || !r || !g || !b || !ry) return vw_fail(&w);
  const size_t sh[2] = {R, D}, sg[1] = {D};
  clf_tensor *tx = vw_tensor(&w, CLF_F32, 2, sh, x), *tr = vw_tensor(&w, CLF_F32, 2, sh, r);
  clf_tensor *tg = vw_tensor(&w, CLF_F32, 1, sg, g), *tb = vw_tensor(&w, CLF_F32, 1, sg, b);
  clf_tensor *ts = vw_tensor(&w, CLF_F32, 2, sh, NULL), *ty = vw_tensor(&w, CLF_F32, 2, sh, NULL);
  if (!tx || !tr || !tg || !tb || !ts || !ty) return vw_fail(&w);
  clf_status st = clf_layer_norm(ctx, tx, tr, tg, tb, 1e-5f, ts, ty, NULL);
  if (st != CLF_OK) return vw_done(&w, st);
  float *y = vw_download(&w, ty), *s = vw_download(&w, ts);
  if (!y || !s) return vw_fail(&w);
  clf__ref_layer_norm(x, r, g, b, 1e-5, R, D, rs, ry);
  double ey = rel_error(y, ry, R * D), es = rel_error(s, rs, R * D);
  *err = ey > es ? ey : es;
  return vw_done(&w, CLF_OK);
}

/* The per-row norm that writes the 8-bit blocks of a held x
 * (CLF__NORM_Q8): LayerNorm of 5 rows of 96 with a residual, its output
 * against the reference as case_norm's, and its blocks (read back as
 * quant times scale) against that output quantized by the reference
 * (clf__ref_quantize_q8): the same f32 operations, so equal but for a
 * rounding tie. */
static clf_status case_norm_q8(clf_context *ctx, const vcase *c, double *err) {
  enum { R = 5, D = 96 };
  vwork w = {.ctx = ctx};
  CLF__UNUSED(c);
  float *x = vw_rand(&w, R * D, 5, -3, 5), *r = vw_rand(&w, R * D, 6, -1, 1), *q = vw_alloc(&w, R * D * 4);
  float *g = vw_rand(&w, D, 7, 0.5f, 1.5f), *b = vw_rand(&w, D, 8, -0.5f, 0.5f);
  double *ry = vw_alloc(&w, 2 * R * D * sizeof(double)), *rs = ry ? ry + R * D : NULL;
  double *rq = vw_alloc(&w, R * D * sizeof(double));
  if (!x || !r || !q || !g || !b || !ry || !rq) return vw_fail(&w);
  const size_t sh[2] = {R, D}, sg[1] = {D};
  clf_tensor *tx = vw_tensor(&w, CLF_F32, 2, sh, x), *tr = vw_tensor(&w, CLF_F32, 2, sh, r);
  clf_tensor *tg = vw_tensor(&w, CLF_F32, 1, sg, g), *tb = vw_tensor(&w, CLF_F32, 1, sg, b);
  clf_tensor *ts = vw_tensor(&w, CLF_F32, 2, sh, NULL), *ty = vw_tensor(&w, CLF_F32, 2, sh, NULL);
  if (!tx || !tr || !tg || !tb || !ts || !ty) return vw_fail(&w);
  const int hold = clf__linear_hold_x(ctx, ty);
  clf_status st = clf_layer_norm(ctx, tx, tr, tg, tb, 1e-5f, ts, ty, NULL);
  if (st == CLF_OK) st = clf__linear_x_blocks(ctx, ty, R, D, q);
  if (hold) clf__linear_release_x(ctx, ty);
  if (st != CLF_OK) return vw_done(&w, st);
  float *y = vw_download(&w, ty);
  if (!y) return vw_fail(&w);
  clf__ref_layer_norm(x, r, g, b, 1e-5, R, D, rs, ry);
  clf__ref_quantize_q8(y, R, D, rq);
  const double ey = rel_error(y, ry, R * D), eq = rel_error(q, rq, R * D);
  *err = ey > eq ? ey : eq;
  return vw_done(&w, CLF_OK);
}

/* glu that writes the 8-bit blocks of a held y (CLF__GLU_Q8): 3 rows of
 * F = 96 under SiLU, y against act(gate) * up in double, its blocks
 * against y quantized by the reference, as case_norm_q8. */
static clf_status case_glu_q8(clf_context *ctx, const vcase *c, double *err) {
  enum { R = 3, F = 96 };
  vwork w = {.ctx = ctx};
  CLF__UNUSED(c);
  float *g = vw_rand(&w, R * 2 * F, 9, -4, 4), *q = vw_alloc(&w, R * F * sizeof(float));
  double *ry = vw_alloc(&w, R * F * sizeof(double)), *rq = vw_alloc(&w, R * F * sizeof(double));
  if (!g || !q || !ry || !rq) return vw_fail(&w);
  const size_t sg[2] = {R, 2 * F}, sy[2] = {R, F};
  clf_tensor *tg = vw_tensor(&w, CLF_F32, 2, sg, g), *ty = vw_tensor(&w, CLF_F32, 2, sy, NULL);
  if (!tg || !ty) return vw_fail(&w);
  const int hold = clf__linear_hold_x(ctx, ty);
  clf_status st = clf_glu(ctx, tg, CLF_ACT_SILU, ty, NULL);
  if (st == CLF_OK) st = clf__linear_x_blocks(ctx, ty, R, F, q);
  if (hold) clf__linear_release_x(ctx, ty);
  if (st != CLF_OK) return vw_done(&w, st);
  float *y = vw_download(&w, ty);
  if (!y) return vw_fail(&w);
  for (size_t r = 0; r < R; r++)
    for (size_t f = 0; f < F; f++)
      ry[r * F + f] = clf__ref_act(CLF_ACT_SILU, g[r * 2 * F + f]) * g[r * 2 * F + F + f];
  clf__ref_quantize_q8(y, R, F, rq);
  const double ey = rel_error(y, ry, R * F), eq = rel_error(q, rq, R * F);
  *err = ey > eq ? ey : eq;
  return vw_done(&w, CLF_OK);
}

/* Attention, B = H = 2, head dim p[0], Lq p[1], kv_len p[2] of Lcap p[3],
 * with causal and key-padding masks, a per-head bias and the scores
 * soft-capped at 1.5 (Gemma 2's, which bends scores of O(1)); the fused kernel
 * writes [B, H, Lq, Dh], the GEMM path the merged [B, Lq, H*Dh].  The
 * short CPU kernel, which a causal mask over several rows keeps from a
 * launch, is checked without one. */
static clf_status case_attention(clf_context *ctx, const vcase *c, double *err) {
  const size_t B = 2, H = 2, Dh = c->p[0], Lq = c->p[1], Lk = c->p[2], Lcap = c->p[3];
  const int gemm = strcmp(c->name, "attention.gemm") == 0, causal = strstr(c->name, " SHORT ") == NULL;
  vwork w = {.ctx = ctx};
  float *q = vw_rand(&w, B * H * Lq * Dh, 11, -1, 1), *k = vw_rand(&w, B * H * Lcap * Dh, 12, -1, 1);
  float *v = vw_rand(&w, B * H * Lcap * Dh, 13, -1, 1), *bias = vw_rand(&w, H * Lq * Lk, 14, -1, 1);
  int32_t *pad = vw_alloc(&w, B * Lk * sizeof(int32_t));
  double *ref = vw_alloc(&w, B * H * Lq * Dh * sizeof(double));
  if (!q || !k || !v || !bias || !pad || !ref) return vw_fail(&w);
  for (size_t j = 0; j < B * Lk; j++) pad[j] = !(j >= Lk && j >= B * Lk - 2); /* batch 1: last two keys masked */
  const size_t sq[4] = {B, H, Lq, Dh}, sk[4] = {B, H, Lcap, Dh}, sp[2] = {B, Lk}, sb[4] = {1, H, Lq, Lk};
  const size_t sm[3] = {B, Lq, H * Dh};
  clf_tensor *tq = vw_tensor(&w, CLF_F32, 4, sq, q), *tk = vw_tensor(&w, CLF_F32, 4, sk, k);
  clf_tensor *tv = vw_tensor(&w, CLF_F32, 4, sk, v), *tp = vw_tensor(&w, CLF_I32, 2, sp, pad);
  clf_tensor *tb = vw_tensor(&w, CLF_F32, 4, sb, bias);
  clf_tensor *to = vw_tensor(&w, CLF_F32, gemm ? 3 : 4, gemm ? sm : sq, NULL);
  if (!tq || !tk || !tv || !tp || !tb || !to) return vw_fail(&w);
  const float scale = (float)(1.0 / sqrt((double)Dh));
  clf_attention_mask mask = {tp, causal, tb, 0, 1.5f};
  clf_status st = clf_attention(ctx, tq, tk, tv, Lk, &mask, scale, gemm ? CLF_ATTN_GEMM : CLF_ATTN_FUSED, to, NULL);
  if (st != CLF_OK) return vw_done(&w, st);
  float *o = vw_download(&w, to);
  if (!o) return vw_fail(&w);
  const clf__ref_attn ra = {B, H, Lq, Lk, Lcap, Dh, scale, causal, pad, bias, 1, H, gemm, 0, 0, 1.5};
  clf__ref_attention(&ra, q, k, v, ref);
  *err = rel_error(o, ref, B * H * Lq * Dh);
  return vw_done(&w, CLF_OK);
}

/* [B, L, H, Dh] -> [B, H, Dh, L] with L = 20, Dh = 17: both transposed dims
 * are at least 16, so either permute kernel may run it. */
static clf_status case_permute(clf_context *ctx, const vcase *c, double *err) {
  enum { B = 2, L = 20, H = 3, DH = 17, N = B * L * H * DH };
  vwork w = {.ctx = ctx};
  CLF__UNUSED(c);
  float *x = vw_rand(&w, N, 21, -1, 1);
  double *ref = vw_alloc(&w, N * sizeof(double));
  if (!x || !ref) return vw_fail(&w);
  const size_t sx[4] = {B, L, H, DH}, sy[4] = {B, H, DH, L};
  clf_tensor *tx = vw_tensor(&w, CLF_F32, 4, sx, x), *ty = vw_tensor(&w, CLF_F32, 4, sy, NULL);
  if (!tx || !ty) return vw_fail(&w);
  static const int perm[4] = {0, 2, 3, 1};
  clf_status st = clf_permute(ctx, tx, perm, ty, NULL);
  if (st != CLF_OK) return vw_done(&w, st);
  float *y = vw_download(&w, ty);
  if (!y) return vw_fail(&w);
  float *ref32 = vw_alloc(&w, N * sizeof(float));
  if (!ref32) return vw_fail(&w);
  clf__ref_permute(x, sx, 4, perm, sizeof(float), ref32);
  for (size_t i = 0; i < N; i++) ref[i] = ref32[i];
  *err = rel_error(y, ref, N);
  return vw_done(&w, CLF_OK);
}

/* C = 0.75 A B^T + 0.5 C with A [M, K], B [N, K] (p = {M, N, K, batch});
 * batch > 1 runs clf_gemm_batched with B [batch, K, N] untransposed. */
static clf_status case_gemm(clf_context *ctx, const vcase *c, double *err) {
  const size_t M = c->p[0], N = c->p[1], K = c->p[2], nb = c->p[3], tb = nb == 1;
  vwork w = {.ctx = ctx};
  float *a = vw_rand(&w, nb * M * K, 31, -1, 1), *b = vw_rand(&w, nb * K * N, 32, -1, 1);
  float *c0 = vw_rand(&w, nb * M * N, 33, -1, 1);
  double *ref = vw_alloc(&w, nb * M * N * sizeof(double));
  if (!a || !b || !c0 || !ref) return vw_fail(&w);
  const size_t sa[3] = {nb, M, K}, sbt[3] = {nb, N, K}, sbn[3] = {nb, K, N}, sc[3] = {nb, M, N};
  const int nd = nb == 1 ? 2 : 3, o = 3 - nd;
  clf_tensor *ta = vw_tensor(&w, CLF_F32, nd, sa + o, a), *tb_ = vw_tensor(&w, CLF_F32, nd, (tb ? sbt : sbn) + o, b);
  clf_tensor *tc = vw_tensor(&w, CLF_F32, nd, sc + o, c0);
  if (!ta || !tb_ || !tc) return vw_fail(&w);
  clf_status st = nb == 1 ? clf_gemm(ctx, 0, 1, 0.75f, ta, tb_, 0.5f, tc, NULL)
                          : clf_gemm_batched(ctx, 0, 0, 0.75f, ta, tb_, 0.5f, tc, NULL);
  if (st != CLF_OK) return vw_done(&w, st);
  float *got = vw_download(&w, tc);
  if (!got) return vw_fail(&w);
  clf__ref_gemm(0, (int)tb, nb, M, N, K, 0.75, a, b, tb ? 0 : K * N, 0.5, c0, ref);
  *err = rel_error(got, ref, nb * M * N);
  return vw_done(&w, CLF_OK);
}

/* Row softmax of 6 rows of 77 with scale 0.7. */
static clf_status case_softmax(clf_context *ctx, const vcase *c, double *err) {
  enum { R = 6, D = 77 };
  vwork w = {.ctx = ctx};
  CLF__UNUSED(c);
  float *x = vw_rand(&w, R * D, 41, -4, 4);
  double *ref = vw_alloc(&w, R * D * sizeof(double));
  if (!x || !ref) return vw_fail(&w);
  const size_t sh[2] = {R, D};
  clf_tensor *tx = vw_tensor(&w, CLF_F32, 2, sh, x), *ty = vw_tensor(&w, CLF_F32, 2, sh, NULL);
  if (!tx || !ty) return vw_fail(&w);
  clf_status st = clf_softmax(ctx, tx, 0.7f, ty, NULL);
  if (st != CLF_OK) return vw_done(&w, st);
  float *y = vw_download(&w, ty);
  if (!y) return vw_fail(&w);
  clf__ref_softmax(x, R, D, 0.7, ref);
  *err = rel_error(y, ref, R * D);
  return vw_done(&w, CLF_OK);
}

/* y = act(x + bias) over 5 rows of 70; p[0] is the activation. */
static clf_status case_bias_act(clf_context *ctx, const vcase *c, double *err) {
  enum { R = 5, D = 70 };
  const clf_activation act = (clf_activation)c->p[0];
  vwork w = {.ctx = ctx};
  float *x = vw_rand(&w, R * D, 51, -3, 3), *bias = vw_rand(&w, D, 52, -1, 1);
  double *ref = vw_alloc(&w, R * D * sizeof(double));
  if (!x || !bias || !ref) return vw_fail(&w);
  const size_t sh[2] = {R, D}, sb[1] = {D};
  clf_tensor *tx = vw_tensor(&w, CLF_F32, 2, sh, x), *tb = vw_tensor(&w, CLF_F32, 1, sb, bias);
  clf_tensor *ty = vw_tensor(&w, CLF_F32, 2, sh, NULL);
  if (!tx || !tb || !ty) return vw_fail(&w);
  clf_status st = clf_bias_act(ctx, tx, tb, act, ty, NULL);
  if (st != CLF_OK) return vw_done(&w, st);
  float *y = vw_download(&w, ty);
  if (!y) return vw_fail(&w);
  for (size_t i = 0; i < R * D; i++) ref[i] = clf__ref_act(act, (double)(x[i] + bias[i % D]));
  *err = rel_error(y, ref, R * D);
  return vw_done(&w, CLF_OK);
}

/* y = gelu(x W^T + b) with W [37, 96] stored as the clf_dtype p[0], x
 * [p[1], 96] (with p[2], W f32 [96, 37]: skinny_t): up to
 * clf__skinny_max_rows rows take the skinny kernel (11:
 * two launches, of 8 and 3 rows), more the expanded weight and CLBlast.
 * The reference multiplies the stored values (decoded on the host), so
 * that only the product is judged. */
static clf_status case_linear(clf_context *ctx, const vcase *c, double *err) {
  enum { N = 37, K = 96 };
  const clf_dtype dt = (clf_dtype)c->p[0];
  const size_t M = c->p[1];
  vwork w = {.ctx = ctx};
  float *x = vw_rand(&w, M * K, 71, -1, 1), *wf = vw_rand(&w, N * K, 72, -1, 1), *bias = vw_rand(&w, N, 73, -1, 1);
  float *wq = vw_alloc(&w, N * K * sizeof(float));
  void *packed = vw_alloc(&w, clf__dtype_bytes(dt, N * K));
  double *ref = vw_alloc(&w, M * N * sizeof(double));
  if (!x || !wf || !bias || !wq || !packed || !ref) return vw_fail(&w);
  clf_tensor *tw = NULL;
  const int in_out = c->p[2] != 0; /* f32 [K, N]: the skinny_t kernel */
  if (in_out)
    for (size_t n = 0; n < N; n++)
      for (size_t k = 0; k < K; k++) wq[k * N + n] = wf[n * K + k];
  clf_status st = in_out ? clf_tensor_from_f32(ctx, CLF_F32, 2, (size_t[]){K, N}, wq, &tw)
                         : clf_tensor_from_f32(ctx, dt, 2, (size_t[]){N, K}, wf, &tw);
  if (st != CLF_OK) return vw_done(&w, st);
  const size_t sx[2] = {M, K}, sb[1] = {N}, sy[2] = {M, N};
  clf_tensor *tx = vw_tensor(&w, CLF_F32, 2, sx, x), *tb = vw_tensor(&w, CLF_F32, 1, sb, bias);
  clf_tensor *ty = vw_tensor(&w, CLF_F32, 2, sy, NULL);
  if (tx && tb && ty)
    st = clf_linear(ctx, tx, tw, in_out ? CLF_WEIGHT_IN_OUT : CLF_WEIGHT_OUT_IN, tb, CLF_ACT_GELU, ty, NULL);
  clf_tensor_destroy(tw);
  if (!tx || !tb || !ty) return vw_fail(&w);
  if (st != CLF_OK) return vw_done(&w, st);
  float *y = vw_download(&w, ty);
  if (!y) return vw_fail(&w);
  clf__quantize(dt, wf, N * K, packed);
  clf__dequantize(dt, packed, N * K, wq);
  clf__ref_gemm(0, 1, 1, M, N, K, 1.0, x, wq, 0, 0.0, NULL, ref);
  for (size_t i = 0; i < M * N; i++) ref[i] = clf__ref_act(CLF_ACT_GELU, ref[i] + bias[i % N]);
  *err = rel_error(y, ref, M * N);
  return vw_done(&w, CLF_OK);
}

/* The integer path's cases, after the weight: y = gelu(x W^T + b) on the
 * device from tw (destroyed here), against wq (W decoded on the host, in
 * double) times x rounded as quantize_q8 rounds it (xq; exact_x: x as it
 * is, for a float kernel), into *err; st the weight's upload status.
 * Ends w. */
static clf_status int_case_error(clf_context *ctx, vwork *w, clf_status st, clf_tensor *tw, const float *x,
                                 const float *bias, const double *wq, double *xq, double *ref, size_t M, size_t N,
                                 size_t K, int exact_x, double *err) {
  if (st != CLF_OK) return clf_tensor_destroy(tw), vw_done(w, st);
  const size_t sx[2] = {M, K}, sb[1] = {N}, sy[2] = {M, N};
  clf_tensor *tx = vw_tensor(w, CLF_F32, 2, sx, x), *tb = vw_tensor(w, CLF_F32, 1, sb, bias);
  clf_tensor *ty = vw_tensor(w, CLF_F32, 2, sy, NULL);
  if (tx && tb && ty) st = clf_linear(ctx, tx, tw, CLF_WEIGHT_OUT_IN, tb, CLF_ACT_GELU, ty, NULL);
  clf_tensor_destroy(tw);
  if (!tx || !tb || !ty) return vw_fail(w);
  if (st != CLF_OK) return vw_done(w, st);
  float *y = vw_download(w, ty);
  if (!y) return vw_fail(w);
  if (exact_x)
    for (size_t i = 0; i < M * K; i++) xq[i] = x[i];
  else
    clf__ref_quantize_q8(x, M, K, xq);
  for (size_t m = 0; m < M; m++)
    for (size_t n = 0; n < N; n++) {
      double acc = bias[n];
      for (size_t k = 0; k < K; k++) acc += xq[m * K + k] * wq[n * K + k];
      ref[m * N + n] = clf__ref_act(CLF_ACT_GELU, acc);
    }
  *err = rel_error(y, ref, M * N);
  return vw_done(w, CLF_OK);
}

/* The integer path: y = gelu(x W^T + b), W [37, 96] of the clf_dtype p[0]
 * (Q8_0, Q4_0, Q5_0 made from f32; Q4_1, Q5_1 blocks of seeded bytes with
 * moderate scales), x [p[1], 96] with one all-zero block; the reference
 * multiplies the stored weights (decoded on the host) by x rounded as
 * quantize_q8 rounds it (clf__ref_quantize_q8), so that the integer
 * sums are judged exactly and only the kernel's f32 scaling is left. */
static clf_status case_linear_int(clf_context *ctx, const vcase *c, double *err) {
  enum { N = 37, K = 96 };
  const clf_dtype dt = (clf_dtype)c->p[0];
  const size_t M = c->p[1];
  vwork w = {.ctx = ctx};
  float *x = vw_rand(&w, M * K, 81, -2, 2), *wf = vw_rand(&w, N * K, 82, -1, 1), *bias = vw_rand(&w, N, 83, -1, 1);
  float *wq = vw_alloc(&w, N * K * sizeof(float));
  unsigned char *packed = vw_alloc(&w, clf__dtype_bytes(dt, N * K));
  double *xq = vw_alloc(&w, M * K * sizeof(double)), *ref = vw_alloc(&w, M * N * sizeof(double));
  double *wd = vw_alloc(&w, N * K * sizeof(double));
  if (!x || !wf || !bias || !wq || !packed || !xq || !ref || !wd) return vw_fail(&w);
  for (size_t k = 32; k < 64; k++) x[k] = 0.0f; /* a block of zeros: scale 0 */
  clf_tensor *tw = NULL;
  clf_status st;
  if (clf__dtype_is_ggml(dt)) { /* ggml's blocks, decoded as reference.c decodes them */
    const size_t bb = clf__dtype_bytes(dt, 32), nblk = N * K / 32;
    if (clf__dtype_quantizes(dt)) clf__quantize(dt, wf, N * K, packed); /* Q5_0 */
    else { /* Q4_1, Q5_1: seeded bytes, moderate scales and mins */
      uint32_t r = 84;
      for (size_t i = 0; i < nblk * bb; i++) packed[i] = (unsigned char)((r = r * 1664525u + 1013904223u) >> 24);
      for (size_t b = 0; b < nblk; b++) {
        const uint16_t d = clf__f32_to_f16(0.01f + 0.002f * (float)(b % 7)), m = clf__f32_to_f16(b % 2 ? -0.05f : 0.04f);
        memcpy(packed + bb * b, &d, 2);
        memcpy(packed + bb * b + 2, &m, 2);
      }
    }
    clf__ref_dequantize_ggml32(dt, packed, N * K, wq);
    if ((st = clf_tensor_create(ctx, dt, 2, (size_t[]){N, K}, &tw)) == CLF_OK)
      st = clf_tensor_upload(ctx, tw, packed, nblk * bb);
  } else {
    st = clf_tensor_from_f32(ctx, dt, 2, (size_t[]){N, K}, wf, &tw);
    clf__quantize(dt, wf, N * K, packed);
    clf__dequantize(dt, packed, N * K, wq);
  }
  for (size_t i = 0; i < N * K; i++) wd[i] = wq[i];
  return int_case_error(ctx, &w, st, tw, x, bias, wd, xq, ref, M, N, K, 0, err);
}

/* skinny_kq: y = gelu(x W^T + b), W [37, 512] of the clf_dtype p[0]
 * (Q2_K to Q6_K: clf__kq_blocks), x [p[1], 512] with
 * one all-zero block; the reference (clf__ref_dequant_k) multiplies the
 * decoded weights by x rounded as quantize_q8 rounds it, as
 * case_linear_int's. */
static clf_status case_linear_kq(clf_context *ctx, const vcase *c, double *err) {
  enum { N = 37, K = 512 };
  const clf_dtype dt = (clf_dtype)c->p[0];
  const size_t M = c->p[1];
  vwork w = {.ctx = ctx};
  float *x = vw_rand(&w, M * K, 91, -2, 2), *bias = vw_rand(&w, N, 93, -1, 1);
  unsigned char *packed = vw_alloc(&w, clf__dtype_bytes(dt, N * K));
  double *wq = vw_alloc(&w, N * K * sizeof(double)), *xq = vw_alloc(&w, M * K * sizeof(double));
  double *ref = vw_alloc(&w, M * N * sizeof(double));
  if (!x || !bias || !packed || !wq || !xq || !ref) return vw_fail(&w);
  for (size_t k = 32; k < 64; k++) x[k] = 0.0f; /* a block of zeros: scale 0 */
  clf__kq_blocks(dt, N, K, 94, packed);
  clf__ref_dequant_k(dt, packed, N * K, wq);
  clf_tensor *tw = NULL;
  clf_status st = clf_tensor_create(ctx, dt, 2, (size_t[]){N, K}, &tw);
  if (st == CLF_OK) st = clf_tensor_upload(ctx, tw, packed, clf__dtype_bytes(dt, N * K));
  return int_case_error(ctx, &w, st, tw, x, bias, wq, xq, ref, M, N, K, 0, err);
}

/* skinny_r16: y = gelu(x W^T + b), W [40, 96] of the clf_dtype p[0]
 * (Q4_0, Q4_1, Q8_0, Q5_0, Q5_1) as GGUF blocks of seeded bytes with
 * moderate scales (and mins), or W [40, 512] of Q2_K to Q6_K (clf__kq_blocks,
 * decoded by clf__ref_dequant_k), decoded on the host, then repacked into
 * the 16-row interleave (clf__r16_pack: two groups and one of 8 rows and 8
 * of padding); x [p[1], 96] with one all-zero block; against the same
 * reference as case_linear_int's (p[2]: skinny_r16f's, x as it is). */
static clf_status case_linear_r16(clf_context *ctx, const vcase *c, double *err) {
  const clf_dtype dt = (clf_dtype)c->p[0];
  const int kq = clf__dtype_block(dt) == 256; /* clf__kq_blocks' super-blocks, K = 512 */
  const size_t N = 40, K = kq ? 512 : 96, M = c->p[1], nblk = N * K / (kq ? 256 : 32);
  const size_t bb = clf__dtype_bytes(dt, clf__dtype_block(dt));
  vwork w = {.ctx = ctx};
  float *x = vw_rand(&w, M * K, 95, -2, 2), *bias = vw_rand(&w, N, 96, -1, 1), *wq = vw_alloc(&w, N * K * sizeof(float));
  unsigned char *raw = vw_alloc(&w, nblk * bb), *packed = vw_alloc(&w, clf__r16_bytes(dt, N, K));
  double *wd = vw_alloc(&w, N * K * sizeof(double)), *xq = vw_alloc(&w, M * K * sizeof(double));
  double *ref = vw_alloc(&w, M * N * sizeof(double));
  if (!x || !bias || !wq || !raw || !packed || !wd || !xq || !ref) return vw_fail(&w);
  for (size_t k = 32; k < 64; k++) x[k] = 0.0f; /* a block of zeros: scale 0 */
  uint32_t r = 97;
  for (size_t i = 0; i < nblk * bb; i++) raw[i] = (unsigned char)((r = r * 1664525u + 1013904223u) >> 24);
  if (kq) {
    clf__kq_blocks(dt, N, K, 98, raw);
    clf__ref_dequant_k(dt, raw, N * K, wd);
  }
  for (size_t b = 0; b < nblk && !kq; b++) {
    const uint16_t d = clf__f32_to_f16(0.01f + 0.002f * (float)(b % 7)), m = clf__f32_to_f16(b % 2 ? -0.05f : 0.04f);
    memcpy(raw + bb * b, &d, 2);
    if (dt == CLF_Q4_1 || dt == CLF_Q5_1) memcpy(raw + bb * b + 2, &m, 2);
  }
  if (kq) /* decoded above, in double */
    for (size_t i = 0; i < N * K; i++) wq[i] = (float)wd[i];
  else if (dt != CLF_Q8_0 && dt != CLF_Q4_0) clf__ref_dequantize_ggml32(dt, raw, N * K, wq);
  else /* Q8_0 {d; qs[32]}, Q4_0 {d; qs[16]}: element j in byte j's low nibble, j + 16 its high, less 8 */
    for (size_t i = 0; i < N * K; i++) {
      uint16_t h;
      const unsigned char *blk = raw + bb * (i / 32);
      const size_t j = i % 32;
      memcpy(&h, blk, 2);
      const int q = dt == CLF_Q8_0 ? (signed char)blk[2 + j] : (j < 16 ? blk[2 + j] & 15 : blk[2 + j - 16] >> 4) - 8;
      wq[i] = clf__f16_bits_to_f32(h) * (float)q;
    }
  for (size_t i = 0; i < N * K && !kq; i++) wd[i] = wq[i];
  clf__r16_pack(dt, raw, N, K, packed);
  clf_tensor *tw = NULL;
  clf_status st = clf__r16_tensor(ctx, dt, N, K, packed, &tw);
  return int_case_error(ctx, &w, st, tw, x, bias, wd, xq, ref, M, N, K, c->p[2] != 0, err);
}

/* y = a + b, a [3, 5, 40]; b the same shape (a residual add) or, with
 * p[0], [5, 1] broadcast. */
static clf_status case_add(clf_context *ctx, const vcase *c, double *err) {
  enum { A = 3, R = 5, D = 40, N = A * R * D };
  const int bc = c->p[0] != 0;
  vwork w = {.ctx = ctx};
  float *a = vw_rand(&w, N, 61, -2, 2), *b = vw_rand(&w, bc ? R : N, 62, -2, 2);
  double *ref = vw_alloc(&w, N * sizeof(double));
  if (!a || !b || !ref) return vw_fail(&w);
  const size_t sa[3] = {A, R, D}, sb[2] = {R, 1};
  clf_tensor *ta = vw_tensor(&w, CLF_F32, 3, sa, a);
  clf_tensor *tb = bc ? vw_tensor(&w, CLF_F32, 2, sb, b) : vw_tensor(&w, CLF_F32, 3, sa, b);
  clf_tensor *ty = vw_tensor(&w, CLF_F32, 3, sa, NULL);
  if (!ta || !tb || !ty) return vw_fail(&w);
  clf_status st = clf_add(ctx, ta, tb, ty, NULL);
  if (st != CLF_OK) return vw_done(&w, st);
  float *y = vw_download(&w, ty);
  if (!y) return vw_fail(&w);
  clf__ref_add(a, 3, sa, b, bc ? 2 : 3, bc ? sb : sa, ref);
  *err = rel_error(y, ref, N);
  return vw_done(&w, CLF_OK);
}

/* out += 0.5 table[ids] with table [30, 24] and ids [2, 6] (i32, or i64
 * with p[0]), one id past the table (a zero row). */
static clf_status case_gather(clf_context *ctx, const vcase *c, double *err) {
  enum { V = 30, D = 24, B = 2, K = 6 };
  const int i64 = c->p[0] != 0;
  static const int ids[B * K] = {3, 0, 29, 7, 30, 12, 5, 5, 1, 28, 14, 2};
  vwork w = {.ctx = ctx};
  float *table = vw_rand(&w, V * D, 71, -1, 1), *out0 = vw_rand(&w, B * K * D, 72, -1, 1);
  void *hid = vw_alloc(&w, B * K * sizeof(int64_t));
  double *ref = vw_alloc(&w, B * K * D * sizeof(double));
  if (!table || !out0 || !hid || !ref) return vw_fail(&w);
  for (size_t i = 0; i < B * K; i++) {
    if (i64) ((int64_t *)hid)[i] = ids[i];
    else ((int32_t *)hid)[i] = ids[i];
  }
  const size_t st_[2] = {V, D}, si[2] = {B, K}, so[3] = {B, K, D};
  clf_tensor *tt = vw_tensor(&w, CLF_F32, 2, st_, table), *ti = vw_tensor(&w, i64 ? CLF_I64 : CLF_I32, 2, si, hid);
  clf_tensor *to = vw_tensor(&w, CLF_F32, 3, so, out0);
  if (!tt || !ti || !to) return vw_fail(&w);
  clf_status st = clf_embedding(ctx, tt, ti, 0.5f, 1, to, NULL);
  if (st != CLF_OK) return vw_done(&w, st);
  float *o = vw_download(&w, to);
  if (!o) return vw_fail(&w);
  int64_t ids64[B * K];
  for (size_t i = 0; i < B * K; i++) ids64[i] = ids[i];
  clf__ref_embedding(table, V, D, ids64, B * K, 0.5, out0, ref);
  *err = rel_error(o, ref, B * K * D);
  return vw_done(&w, CLF_OK);
}

/* ---- the list of variants on this device ---- */

/* Whether CLBlast runs an m x n x k GEMM (B transposed) on its direct path:
 * with A at offset 1 its indirect path always needs a temporary buffer and
 * its direct path never does.  -1 when CLBlast cannot tell. */
static int clblast_direct(clf_context *ctx, size_t m, size_t n, size_t k) {
  size_t temp = 0;
  CLBlastStatusCode s = CLBlastSGemmTempBufferSize(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes,
                                                   m, n, k, 1, k, 0, k, 0, n, &ctx->queue, &temp);
  return s != CLBlastSuccess ? -1 : temp == 0;
}

static void add_case(vcase *list, size_t *n, size_t cap, const char *name, case_fn run, size_t p0, size_t p1,
                     size_t p2, size_t p3, double tol) {
  for (size_t i = 0; i < *n && i < cap; i++)
    if (strcmp(list[i].name, name) == 0) return; /* the same variant twice (equal tiles) */
  if (*n >= cap) { /* counted, not kept: clf_validate refuses a list that overflowed */
    (*n)++;
    return;
  }
  vcase *c = &list[(*n)++];
  snprintf(c->name, sizeof(c->name), "%s", name);
  c->run = run;
  c->p[0] = p0;
  c->p[1] = p1;
  c->p[2] = p2;
  c->p[3] = p3;
  c->tol = tol;
}

/* Room for every variant of a device (about 180 on Intel's CPU runtime
 * with the integer extension); a list that would hold more fails
 * clf_validate rather than leave variants unchecked. */
#define MAX_CASES 320

/* Tolerances of max |dev - ref| / max(1, max |ref|), as the op tests use
 * (long: one list of every variant, a line or a loop each). */
static size_t list_cases(clf_context *ctx, vcase *list) {
  size_t n = 0;
  add_case(list, &n, MAX_CASES, "norm.layer_norm", case_norm, 0, 0, 0, 0, 2e-5);
  add_case(list, &n, MAX_CASES, "norm.layer_norm_rows", case_norm, 0, 0, 0, 0, 2e-5);
  if (ctx->caps.is_cpu) add_case(list, &n, MAX_CASES, CLF__NORM_Q8, case_norm_q8, 0, 0, 0, 0, 2e-5);
  add_case(list, &n, MAX_CASES, CLF__GLU_Q8, case_glu_q8, 0, 0, 0, 0, 1e-5);
  /* Variants that need a device feature: listed only where the device
   * (as the context's limits leave it) has it, and used only where they
   * pass. */
  if (ctx->caps.has_subgroups) add_case(list, &n, MAX_CASES, CLF__NORM_SG, case_norm, 0, 0, 0, 0, 2e-5);
  /* The head dims of the models clformer runs; prefill (Lq > 8) and
   * decode (Lq <= 8, a KV cache longer than kv_len) take different tiles,
   * and on a CPU prefill over up to 64, up to 128 and more keys three
   * kernels (names that repeat are one case). */
  static const size_t dims[] = {32, 64, 80, 128}, keys[] = {40, 100, 160};
  for (size_t i = 0; i < CLF__ARRAY_LEN(dims); i++) {
    char name[96];
    for (size_t j = 0; j < CLF__ARRAY_LEN(keys); j++)
      if (clf__attn_fused_variant(ctx, dims[i], 40, keys[j], 0, name, sizeof(name)))
        add_case(list, &n, MAX_CASES, name, case_attention, dims[i], 40, keys[j], keys[j], 1e-4);
    if (clf__attn_fused_variant(ctx, dims[i], 3, 45, 1, name, sizeof(name)))
      add_case(list, &n, MAX_CASES, name, case_attention, dims[i], 3, 45, 48, 1e-4);
  }
  add_case(list, &n, MAX_CASES, "attention.gemm", case_attention, 64, 40, 40, 40, 1e-4);
  add_case(list, &n, MAX_CASES, "movement.permute_tiled", case_permute, 0, 0, 0, 0, 0);
  add_case(list, &n, MAX_CASES, "movement.copy_strided", case_permute, 0, 0, 0, 0, 0);
  /* CLBlast's two GEMM paths, found by asking it; batches run strided on
   * the direct path only (gemm_clblast.cc). */
  static const size_t small[] = {16, 8}, large[] = {256, 512, 1024};
  for (size_t i = 0; i < CLF__ARRAY_LEN(small); i++)
    if (clblast_direct(ctx, small[i], small[i] + 8, small[i] + 4) == 1) {
      add_case(list, &n, MAX_CASES, "gemm.clblast direct", case_gemm, small[i], small[i] + 8, small[i] + 4, 1, 1e-5);
      add_case(list, &n, MAX_CASES, "gemm.clblast direct batched", case_gemm, small[i], small[i] + 8, small[i] + 4,
               3, 1e-5);
      break;
    }
  for (size_t i = 0; i < CLF__ARRAY_LEN(large); i++)
    if (clblast_direct(ctx, large[i], large[i], large[i]) == 0) {
      add_case(list, &n, MAX_CASES, "gemm.clblast indirect", case_gemm, large[i], large[i], large[i], 1, 1e-5);
      break;
    }
  add_case(list, &n, MAX_CASES, "elementwise.softmax", case_softmax, 0, 0, 0, 0, 1e-5);
  if (ctx->caps.has_subgroups) add_case(list, &n, MAX_CASES, CLF__SOFTMAX_SG, case_softmax, 0, 0, 0, 0, 1e-5);
  static const char *const acts[] = {"none", "relu", "gelu", "gelu_tanh", "silu", "tanh"}; /* by clf_activation */
  for (size_t i = 0; i < CLF__ARRAY_LEN(acts); i++) {
    char name[96];
    snprintf(name, sizeof(name), "elementwise.bias_act %s", acts[i]);
    add_case(list, &n, MAX_CASES, name, case_bias_act, i, 0, 0, 0, 1e-5);
  }
  add_case(list, &n, MAX_CASES, "elementwise.add", case_add, 0, 0, 0, 0, 1e-6);
  add_case(list, &n, MAX_CASES, "elementwise.add broadcast", case_add, 1, 0, 0, 0, 1e-6);
  add_case(list, &n, MAX_CASES, "embed.gather i32", case_gather, 0, 0, 0, 0, 1e-6);
  add_case(list, &n, MAX_CASES, "embed.gather i64", case_gather, 1, 0, 0, 0, 1e-6);
  /* Linear layers on every weight type: the skinny kernel as configured
   * for this device, and the expanded weight + CLBlast it falls back to. */
  static const clf_dtype wts[] = {CLF_F32, CLF_F16, CLF_Q8_0, CLF_Q4_0};
  for (size_t i = 0; i < CLF__ARRAY_LEN(wts); i++) {
    char name[96];
    const size_t most = clf__skinny_max_rows(ctx, wts[i], 0, NULL);
    const size_t most_t = clf__skinny_max_rows(ctx, wts[i], 1, NULL);
    for (int kind = CLF__SKINNY_BASE; kind <= CLF__SKINNY_H; kind++)
      if (clf__skinny_variant(ctx, wts[i], 0, kind, name, sizeof name))
        add_case(list, &n, MAX_CASES, name, case_linear, wts[i], most >= 11 ? 11 : 3, 0, 0, 1e-5);
    if (wts[i] == CLF_F32 && clf__skinny_variant(ctx, wts[i], 1, CLF__SKINNY_BASE, name, sizeof name))
      add_case(list, &n, MAX_CASES, name, case_linear, wts[i], most_t >= 11 ? 11 : 3, 1, 0, 1e-5);
    snprintf(name, sizeof name, "linear.gemm %s", clf__weight_type_name(wts[i]));
    add_case(list, &n, MAX_CASES, name, case_linear, wts[i], most + 3, 0, 0, 1e-5);
  }
  /* The integer path's builds (the extension's where the device has it)
   * for each type it takes, at each MMAX; 1e-5 as test_linear_int states. */
  static const clf_dtype ints[] = {CLF_Q8_0, CLF_Q4_0, CLF_Q4_1, CLF_Q5_0, CLF_Q5_1};
  static const size_t int_rows[] = {1, 2, 3, 7};
  for (size_t i = 0; i < CLF__ARRAY_LEN(ints); i++)
    for (size_t r = 0; r < CLF__ARRAY_LEN(int_rows); r++)
      for (int dot = 0; dot < 2; dot++) {
        char name[96];
        if (clf__skinny_int_variant(ctx, ints[i], int_rows[r], dot, name, sizeof name))
          add_case(list, &n, MAX_CASES, name, case_linear_int, ints[i], int_rows[r], 0, 0, 1e-5);
      }
  /* skinny_r16 and skinny_r16f (linear_r16.c) at each MMAX */
  static const clf_dtype r16s[] = {CLF_Q4_0, CLF_Q4_1, CLF_Q8_0, CLF_Q5_0, CLF_Q5_1,
                                   CLF_Q2_K, CLF_Q3_K, CLF_Q4_K, CLF_Q5_K, CLF_Q6_K};
  static const size_t r16_rows[] = {1, 2, 3, 7, 13}; /* 13: the float path's 16 a launch, where it takes them */
  for (size_t r = 0; r < CLF__ARRAY_LEN(r16_rows); r++) {
    char name[96];
    for (int exact = 0; exact < 2; exact++)
      for (size_t t = 0; t < CLF__ARRAY_LEN(r16s); t++)
        if (clf__r16_variant(ctx, r16s[t], r16_rows[r], exact, name, sizeof name))
          add_case(list, &n, MAX_CASES, name, case_linear_r16, r16s[t], r16_rows[r], exact, 0, 1e-5);
  }
  /* skinny_kq's builds likewise (linear_kq.c) */
  static const clf_dtype kqs[] = {CLF_Q2_K, CLF_Q3_K, CLF_Q4_K, CLF_Q5_K, CLF_Q6_K};
  for (size_t i = 0; i < CLF__ARRAY_LEN(kqs); i++)
    for (size_t r = 0; r < CLF__ARRAY_LEN(int_rows); r++)
      for (int dot = 0; dot < 2; dot++) {
        char name[96];
        if (clf__skinny_kq_variant(ctx, kqs[i], int_rows[r], dot, name, sizeof name))
          add_case(list, &n, MAX_CASES, name, case_linear_kq, kqs[i], int_rows[r], 0, 0, 1e-5);
      }
  return n;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

clf_status clf_validate(clf_context *ctx, clf_variant_result *out, size_t capacity, size_t *count) {
  static const char op[] = "clf_validate";
  clf_status st = clf__check_ctx(ctx, op);
  if (st != CLF_OK) return st;
  if (!count) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: count is NULL", op);
  if (capacity && !out) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: out is NULL with capacity %zu", op, capacity);
  *count = 0;
  if ((st = clf__validation_begin(ctx, op)) != CLF_OK) return st;
  vcase *list = malloc(MAX_CASES * sizeof(*list));
  if (!list) {
    clf__validation_end(ctx);
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
  }
  const size_t n = list_cases(ctx, list);
  if (n > MAX_CASES) {
    free(list);
    clf__validation_end(ctx);
    return clf__fail(ctx, CLF_E_LIMIT, "%s: %zu kernel variants, more than the %d the list holds", op, n, MAX_CASES);
  }
  for (size_t i = 0; i < n; i++) {
    const vcase *c = &list[i];
    clf_variant_result r;
    memset(&r, 0, sizeof(r));
    snprintf(r.name, sizeof(r.name), "%s", c->name);
    snprintf(r.fallback, sizeof(r.fallback), "%s", clf__variant_fallback(c->name));
    r.tolerance = c->tol;
    clf_clear_error(ctx);
    clf__validation_pin(ctx, c->name);
    double t0 = now_ms(), err = INFINITY;
    st = c->run(ctx, c, &err);
    /* A failure to run leaves queued work behind; finish it here. */
    if (st != CLF_OK) clFinish(ctx->queue);
    r.ms = now_ms() - t0;
    r.max_error = st == CLF_OK ? err : INFINITY;
    r.passed = st == CLF_OK && err <= c->tol;
    if (st != CLF_OK)
      snprintf(r.message, sizeof(r.message), "did not run: %s", clf_last_error(ctx));
    else if (!r.passed)
      snprintf(r.message, sizeof(r.message), "max error %.3g exceeds the tolerance %.3g", err, c->tol);
    if (!clf__verdict_record(ctx, c->name, r.passed, r.max_error, r.tolerance)) {
      clf__validation_end(ctx);
      free(list);
      return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
    }
    if (i < capacity) out[i] = r;
  }
  clf__validation_end(ctx);
  free(list);
  clf_clear_error(ctx);
  clf__verdicts_store(ctx);
  *count = n;
  return CLF_OK;
}
