/* quant_k.c - ggml's Q4_K, Q6_K and Q5_0 blocks made from f32 on the host
 * (--weights q4k / q6k): llama.cpp's reference quantizers without an
 * importance matrix (ggml-quants.c quantize_row_*_ref), the same bytes. */
#include "core.h"

#include <math.h>
#include <string.h>

/* The reference's float arithmetic, operation for operation: no fused
 * multiply-adds (an FMA rounds once, and a changed rounding can move a
 * quant), whatever the target's default. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#define SUPER 256 /* elements in a k-quant super-block (ggml's QK_K) */

/* Round to nearest, ties to even, by adding 1.5 * 2^23 (ggml's
 * nearest_int: exact for |v| < 2^22, which every caller keeps to). */
static int round_even(float v) {
  float s = v + 12582912.0f;
  int32_t i;
  memcpy(&i, &s, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static void put_f16(unsigned char *p, float v) {
  const uint16_t h = clf__f32_to_f16(v);
  p[0] = (unsigned char)(h & 0xff), p[1] = (unsigned char)(h >> 8);
}

static float get_f16(const unsigned char *p) { return clf__f16_bits_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* The weighted squared error of x ~ scale * L + mn over 32 elements. */
static float affine_error(const float *x, const float *w, const uint8_t *L, float scale, float mn) {
  float err = 0;
  for (int i = 0; i < 32; i++) {
    float diff = scale * L[i] + mn - x[i];
    diff = diff * diff;
    err += w[i] * diff;
  }
  return err;
}

/* One Q4_K sub-block of 32: x ~ scale * L - *neg_min, L in 0..15, the pair
 * with the least w-weighted squared error among the range's own and 21
 * least-squares refits of slightly stretched grids, each grid starting at
 * the best min found before it (make_qkx2_quants with
 * nmax 15, rmin -1, rdelta 0.1, 20 steps).  The min is <= 0. */
static float fit_sub_block(const float *x, const float *w, uint8_t *L, float *neg_min) {
  float lo = x[0], hi = x[0], sum_w = w[0], sum_x = w[0] * x[0];
  for (int i = 1; i < 32; i++) {
    if (x[i] < lo) lo = x[i];
    if (x[i] > hi) hi = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (lo > 0) lo = 0;
  if (hi == lo) {
    memset(L, 0, 32);
    *neg_min = -lo;
    return 0.0f;
  }
  float iscale = 15 / (hi - lo), scale = 1 / iscale, mn = lo;
  for (int i = 0; i < 32; i++) L[i] = (uint8_t)clampi(round_even(iscale * (x[i] - lo)), 0, 15);
  float best = affine_error(x, w, L, scale, mn);
  for (int step = 0; step <= 20; step++) {
    uint8_t t[32];
    iscale = (-1.0f + 0.1f * step + 15) / (hi - mn); /* from the best min so far, as the reference */
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < 32; i++) {
      const int l = clampi(round_even(iscale * (x[i] - mn)), 0, 15);
      t[i] = (uint8_t)l;
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (!(D > 0)) continue;
    float s = (sum_w * sum_xl - sum_x * sum_l) / D, m = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    if (m > 0) m = 0, s = sum_xl / sum_l2;
    const float err = affine_error(x, w, t, s, m);
    if (err < best) memcpy(L, t, 32), best = err, scale = s, mn = m;
  }
  *neg_min = -mn;
  return scale;
}

/* Sub-block j's 6-bit scale and min from Q4_K's 12 packed bytes. */
static void q4k_scale_min(const unsigned char *p, int j, int *sc, int *m) {
  if (j < 4) {
    *sc = p[j] & 63, *m = p[j + 4] & 63;
  } else {
    *sc = (p[j + 4] & 0xF) | (p[j - 4] >> 6) << 4;
    *m = (p[j + 4] >> 4) | (p[j] >> 6) << 4;
  }
}

/* The 8 sub-blocks' scales and mins as 6-bit multiples of the block's d and
 * dmin (y: d, dmin, 12 bytes of packed scales). */
static void q4k_scales(const float *scales, const float *mins, float max_scale, float max_min, unsigned char *y) {
  const float inv_s = max_scale > 0 ? 63.f / max_scale : 0.f, inv_m = max_min > 0 ? 63.f / max_min : 0.f;
  unsigned char *p = y + 4;
  for (int j = 0; j < 8; j++) {
    uint8_t ls = (uint8_t)round_even(inv_s * scales[j]), lm = (uint8_t)round_even(inv_m * mins[j]);
    ls = ls > 63 ? 63 : ls, lm = lm > 63 ? 63 : lm;
    if (j < 4) {
      p[j] = ls, p[j + 4] = lm;
    } else {
      p[j + 4] = (unsigned char)((ls & 0xF) | (lm & 0xF) << 4);
      p[j - 4] |= (unsigned char)((ls >> 4) << 6);
      p[j] |= (unsigned char)((lm >> 4) << 6);
    }
  }
  put_f16(y, max_scale / 63.f);
  put_f16(y + 2, max_min / 63.f);
}

/* One Q4_K block (144 bytes: d, dmin, scales, 128 bytes of nibbles) of 256
 * elements. */
static void q4k_block(const float *x, unsigned char *y) {
  uint8_t L[SUPER];
  float w[32], scales[8], mins[8], max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; j++) {
    const float *xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
    const float av = sqrtf(sum_x2 / 32);
    for (int l = 0; l < 32; l++) w[l] = av + fabsf(xs[l]);
    scales[j] = fit_sub_block(xs, w, L + 32 * j, &mins[j]);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  q4k_scales(scales, mins, max_scale, max_min, y);
  const float d = get_f16(y), dmin = get_f16(y + 2);
  for (int j = 0; j < 8; j++) { /* again, against the rounded scales */
    int sc, m;
    q4k_scale_min(y + 4, j, &sc, &m);
    const float ds = d * sc;
    if (!ds) continue;
    const float dm = dmin * m;
    for (int i = 0; i < 32; i++) L[32 * j + i] = (uint8_t)clampi(round_even((x[32 * j + i] + dm) / ds), 0, 15);
  }
  unsigned char *q = y + 16;
  for (int j = 0; j < SUPER; j += 64, q += 32)
    for (int l = 0; l < 32; l++) q[l] = (unsigned char)(L[j + l] | L[j + l + 32] << 4);
}

/* The w-weighted least-squares scale of x ~ scale * l, l = clamp(round(
 * iscale * x), -32, 31), w = x^2; *sumlx_out its numerator. */
static float q6k_refit(const float *x, float iscale, float *sumlx_out, float *suml2_out) {
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < 16; i++) {
    const int l = clampi(round_even(iscale * x[i]), -32, 31);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  *sumlx_out = sumlx, *suml2_out = suml2;
  return suml2 ? sumlx / suml2 : 0.0f;
}

/* One Q6_K sub-block of 16: x ~ scale * (L - 32), L in 0..63, the best of
 * 19 grids by x^2-weighted error (make_qx_quants, nmax 32, rmse_type 1). */
static float q6k_sub_block(const float *x, int8_t *L) {
  float amax = 0, mx = 0;
  for (int i = 0; i < 16; i++)
    if (fabsf(x[i]) > amax) amax = fabsf(x[i]), mx = x[i];
  if (amax < 1e-15f) {
    memset(L, 0, 16);
    return 0.f;
  }
  float iscale = -32 / mx, sumlx, suml2;
  float scale = q6k_refit(x, iscale, &sumlx, &suml2), best = scale * sumlx, chosen = iscale;
  for (int is = -9; is <= 9; is++) {
    if (is == 0) continue;
    const float try_iscale = -(32 + 0.1f * is) / mx;
    q6k_refit(x, try_iscale, &sumlx, &suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) chosen = try_iscale, scale = sumlx / suml2, best = scale * sumlx;
  }
  for (int i = 0; i < 16; i++) L[i] = (int8_t)(32 + clampi(round_even(chosen * x[i]), -32, 31));
  return scale;
}

/* One Q6_K block (210 bytes: 128 of low nibbles, 64 of high bit pairs, 16
 * int8 scales, d) of 256 elements. */
static void q6k_block(const float *x, unsigned char *y) {
  int8_t L[SUPER];
  float scales[16], max_scale = 0, max_abs = 0;
  for (int b = 0; b < 16; b++) {
    scales[b] = q6k_sub_block(x + 16 * b, L + 16 * b);
    if (fabsf(scales[b]) > max_abs) max_abs = fabsf(scales[b]), max_scale = scales[b];
  }
  memset(y, 0, 210);
  if (max_abs < 1e-15f) return; /* all zero: d 0 */
  const float iscale = -128.f / max_scale;
  put_f16(y + 208, 1 / iscale);
  const float d = get_f16(y + 208);
  for (int b = 0; b < 16; b++) {
    const int s = round_even(iscale * scales[b]);
    y[192 + b] = (unsigned char)(int8_t)(s > 127 ? 127 : s);
  }
  for (int b = 0; b < 16; b++) { /* again, against the rounded scales */
    const float ds = d * (int8_t)y[192 + b];
    if (!ds) continue;
    for (int i = 0; i < 16; i++) L[16 * b + i] = (int8_t)(32 + clampi(round_even(x[16 * b + i] / ds), -32, 31));
  }
  unsigned char *ql = y, *qh = y + 128;
  for (int j = 0; j < SUPER; j += 128, ql += 64, qh += 32)
    for (int l = 0; l < 32; l++) {
      const int a = L[j + l], b = L[j + l + 32], c = L[j + l + 64], e = L[j + l + 96];
      ql[l] = (unsigned char)((a & 0xF) | (c & 0xF) << 4);
      ql[l + 32] = (unsigned char)((b & 0xF) | (e & 0xF) << 4);
      qh[l] = (unsigned char)(a >> 4 | (b >> 4) << 2 | (c >> 4) << 4 | (e >> 4) << 6);
    }
}

/* One Q5_0 block (22 bytes: d, 32 high bits, 16 bytes of nibbles) of 32:
 * d = -m / 16 for the element m of largest magnitude, q = min(31,
 * trunc(x / d + 16.5)). */
static void q5_0_block(const float *x, unsigned char *y) {
  float amax = 0, mx = 0;
  for (int j = 0; j < 32; j++)
    if (fabsf(x[j]) > amax) amax = fabsf(x[j]), mx = x[j];
  const float d = mx / -16, id = d ? 1.0f / d : 0.0f;
  put_f16(y, d);
  uint32_t qh = 0;
  for (int j = 0; j < 16; j++) {
    const int a = clampi((int)(x[j] * id + 16.5f), 0, 31), b = clampi((int)(x[j + 16] * id + 16.5f), 0, 31);
    y[6 + j] = (unsigned char)((a & 0xF) | (b & 0xF) << 4);
    qh |= (uint32_t)(a >> 4) << j | (uint32_t)(b >> 4) << (j + 16);
  }
  for (int k = 0; k < 4; k++) y[2 + k] = (unsigned char)(qh >> 8 * k);
}

void clf__quantize_ggml(clf_dtype dt, const float *x, size_t numel, void *out) {
  unsigned char *o = out;
  if (dt == CLF_Q4_K)
    for (size_t b = 0; b < numel / SUPER; b++) q4k_block(x + b * SUPER, o + b * 144);
  else if (dt == CLF_Q6_K)
    for (size_t b = 0; b < numel / SUPER; b++) q6k_block(x + b * SUPER, o + b * 210);
  else if (dt == CLF_Q5_0)
    for (size_t b = 0; b < numel / 32; b++) q5_0_block(x + b * 32, o + b * 22);
}
