/* reference.c - CPU references of the ops, in double (reference.h).
 *
 * Each is the textbook formula, written for clarity over speed.
 */
#include "reference.h"
#include "base/half.h"

#include "base/half.h"
#include "base/half.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void clf__ref_layer_norm(const float *x, const float *r, const float *g, const float *b, double eps, size_t rows,
                         size_t D, double *sum, double *y) {
  for (size_t i = 0; i < rows; i++) {
    double mean = 0, var = 0;
    for (size_t d = 0; d < D; d++) mean += (double)x[i * D + d] + (r ? r[i * D + d] : 0);
    mean /= D;
    for (size_t d = 0; d < D; d++) {
      double c = (double)x[i * D + d] + (r ? r[i * D + d] : 0) - mean;
      var += c * c;
    }
    var /= D;
    for (size_t d = 0; d < D; d++) {
      double s = (double)x[i * D + d] + (r ? r[i * D + d] : 0);
      if (sum) sum[i * D + d] = s;
      y[i * D + d] = (s - mean) / sqrt(var + eps) * g[d] + (b ? b[d] : 0);
    }
  }
}

void clf__ref_rms_norm(const float *x, const float *r, const float *g, double eps, size_t rows, size_t D, double *sum,
                       double *y) {
  for (size_t i = 0; i < rows; i++) {
    double ms = 0;
    for (size_t d = 0; d < D; d++) {
      double s = (double)x[i * D + d] + (r ? r[i * D + d] : 0);
      ms += s * s;
    }
    ms /= D;
    for (size_t d = 0; d < D; d++) {
      double s = (double)x[i * D + d] + (r ? r[i * D + d] : 0);
      if (sum) sum[i * D + d] = s;
      y[i * D + d] = s / sqrt(ms + eps) * g[d];
    }
  }
}

void clf__ref_rope_split(const float *x, size_t B, size_t L, size_t C, size_t col, const int64_t *pos,
                         const float *inv_freq, size_t half, double scale, size_t H, size_t Lcap, size_t Dh,
                         size_t dst, double *y) {
  for (size_t b = 0; b < B; b++)
    for (size_t l = 0; l < L; l++)
      for (size_t h = 0; h < H; h++) {
        for (size_t d = 2 * half; d < Dh; d++) /* the part left as it is */
          y[((b * H + h) * Lcap + dst + l) * Dh + d] = x[(b * L + l) * C + col + h * Dh + d];
        for (size_t j = 0; j < half; j++) {
          const float angle = (float)pos[b * L + l] * inv_freq[j]; /* f32, as torch */
          const double c = cos((double)angle) * scale, s = sin((double)angle) * scale;
          const float *xh = x + (b * L + l) * C + col + h * Dh;
          double *yh = y + ((b * H + h) * Lcap + dst + l) * Dh;
          yh[j] = xh[j] * c - xh[j + half] * s;
          yh[j + half] = xh[j + half] * c + xh[j] * s;
        }
      }
}

void clf__ref_softmax(const float *x, size_t rows, size_t D, double scale, double *y) {
  for (size_t r = 0; r < rows; r++) {
    const float *xr = x + r * D;
    double m = -INFINITY, s = 0;
    for (size_t d = 0; d < D; d++)
      if (scale * xr[d] > m) m = scale * xr[d];
    for (size_t d = 0; d < D; d++) s += m == -INFINITY ? 0 : exp(scale * xr[d] - m);
    for (size_t d = 0; d < D; d++) y[r * D + d] = m == -INFINITY ? 0.0 : exp(scale * xr[d] - m) / s;
  }
}

double clf__ref_act(clf_activation act, double x) {
  switch (act) {
    case CLF_ACT_RELU: return x > 0 ? x : 0;
    case CLF_ACT_GELU: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case CLF_ACT_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    case CLF_ACT_SILU: return x / (1 + exp(-x));
    case CLF_ACT_TANH: return tanh(x);
    default: return x;
  }
}

void clf__ref_gemm(int ta, int tb, size_t batch, size_t M, size_t N, size_t K, double alpha, const float *A,
                   const float *B, size_t b_stride, double beta, const float *C0, double *C) {
  for (size_t z = 0; z < batch; z++)
    for (size_t i = 0; i < M; i++)
      for (size_t j = 0; j < N; j++) {
        double acc = 0;
        for (size_t k = 0; k < K; k++) {
          double a = ta ? A[z * M * K + k * M + i] : A[z * M * K + i * K + k];
          double b = tb ? B[z * b_stride + j * K + k] : B[z * b_stride + k * N + j];
          acc += a * b;
        }
        size_t c = z * M * N + i * N + j;
        C[c] = alpha * acc + (beta != 0.0 ? beta * C0[c] : 0.0);
      }
}

/* Masked scores of query i of (b, h) into s, on[j] = whether key j counts;
 * returns the largest score that counts (-inf when none). */
static double attn_scores(const clf__ref_attn *a, size_t b, size_t h, size_t i, const float *q, const float *k,
                          double *s, int *on) {
  const size_t H = a->H, Lq = a->Lq, Lk = a->Lk, Dh = a->Dh;
  const size_t Hkv = a->Hkv ? a->Hkv : H, hk = h / (H / Hkv);
  const float *qi = q + ((b * H + h) * Lq + i) * Dh;
  const long pos = (long)i + (long)Lk - (long)Lq;
  double mx = -INFINITY;
  for (size_t j = 0; j < Lk; j++) {
    const float *kj = k + ((b * Hkv + hk) * a->Lcap + j) * Dh;
    on[j] = (!a->keep || a->keep[b * Lk + j]) && !(a->causal && (long)j > pos) &&
            !(a->window && (long)j <= pos - (long)a->window);
    double dot = 0;
    for (size_t d = 0; d < Dh; d++) dot += (double)qi[d] * kj[d];
    s[j] = a->scale * dot;
    if (a->softcap > 0) s[j] = a->softcap * tanh(s[j] / a->softcap);
    if (a->bias)
      s[j] += a->bias[(((b % a->n_win) * a->bias_heads + (a->bias_heads == 1 ? 0 : h)) * Lq + i) * Lk + j];
    if (s[j] == -INFINITY) on[j] = 0;
    if (on[j] && s[j] > mx) mx = s[j];
  }
  return mx;
}

void clf__ref_attention(const clf__ref_attn *a, const float *q, const float *k, const float *v, double *out) {
  const size_t B = a->B, H = a->H, Lq = a->Lq, Lk = a->Lk, Dh = a->Dh, Hkv = a->Hkv ? a->Hkv : H;
  double *s = malloc((Lk ? Lk : 1) * sizeof(double));
  int *on = malloc((Lk ? Lk : 1) * sizeof(int));
  for (size_t b = 0; s && on && b < B; b++)
    for (size_t h = 0; h < H; h++)
      for (size_t i = 0; i < Lq; i++) {
        const double mx = attn_scores(a, b, h, i, q, k, s, on);
        const size_t hk = h / (H / Hkv);
        double sum = 0;
        for (size_t j = 0; j < Lk; j++) sum += on[j] ? exp(s[j] - mx) : 0.0;
        double *o = a->merged ? out + (b * Lq + i) * H * Dh + h * Dh : out + ((b * H + h) * Lq + i) * Dh;
        for (size_t d = 0; d < Dh; d++) {
          double acc = 0;
          for (size_t j = 0; j < Lk; j++)
            if (on[j]) acc += exp(s[j] - mx) / sum * v[((b * Hkv + hk) * a->Lcap + j) * Dh + d];
          o[d] = acc; /* a row with no key left: 0 */
        }
      }
  free(s);
  free(on);
}

void clf__ref_permute(const void *x, const size_t *xs, int n, const int *perm, size_t es, void *y) {
  size_t numel = 1, xst[CLF_MAX_DIMS], ys[CLF_MAX_DIMS];
  for (int i = 0; i < n; i++) numel *= xs[i];
  xst[n - 1] = 1;
  for (int i = n - 2; i >= 0; i--) xst[i] = xst[i + 1] * xs[i + 1];
  for (int i = 0; i < n; i++) ys[i] = xs[perm[i]];
  for (size_t j = 0; j < numel; j++) {
    size_t r = j, src = 0;
    for (int k = n - 1; k >= 0; k--) {
      src += (r % ys[k]) * xst[perm[k]];
      r /= ys[k];
    }
    memcpy((unsigned char *)y + j * es, (const unsigned char *)x + src * es, es);
  }
}

void clf__ref_add(const float *a, int na, const size_t *as, const float *b, int nb, const size_t *bs, double *y) {
  size_t n = 1;
  for (int i = 0; i < na; i++) n *= as[i];
  for (size_t i = 0; i < n; i++) {
    size_t rem = i, bi = 0, bstride = 1;
    for (int d = 1; d <= na; d++) {
      size_t c = rem % as[na - d];
      rem /= as[na - d];
      if (d <= nb) {
        if (bs[nb - d] != 1) bi += c * bstride;
        bstride *= bs[nb - d];
      }
    }
    y[i] = (double)a[i] + b[bi];
  }
}

void clf__ref_embedding(const float *table, size_t V, size_t D, const int64_t *ids, size_t n, double scale,
                        const float *out0, double *out) {
  for (size_t i = 0; i < n; i++)
    for (size_t d = 0; d < D; d++) {
      double v = ids[i] >= 0 && ids[i] < (int64_t)V ? scale * table[(size_t)ids[i] * D + d] : 0.0;
      out[i * D + d] = (out0 ? (double)out0[i * D + d] : 0.0) + v;
    }
}

static float half_at(const unsigned char *p) { return clf__f16_bits_to_f32((uint16_t)(p[0] | p[1] << 8)); }

void clf__ref_dequantize_ggml32(clf_dtype dt, const unsigned char *blocks, size_t numel, float *out) {
  const int has_min = dt != CLF_Q5_0, has_qh = dt != CLF_Q4_1;
  const size_t bytes = dt == CLF_Q4_1 ? 20 : dt == CLF_Q5_0 ? 22 : 24, qs_at = bytes - 16;
  for (size_t b = 0; b < numel / 32; b++) {
    const unsigned char *blk = blocks + b * bytes;
    const float d = half_at(blk), m = has_min ? half_at(blk + 2) : 0.0f;
    const size_t qh_at = has_min ? 4 : 2;
    const uint32_t qh = has_qh ? (uint32_t)blk[qh_at] | (uint32_t)blk[qh_at + 1] << 8 |
                                     (uint32_t)blk[qh_at + 2] << 16 | (uint32_t)blk[qh_at + 3] << 24
                               : 0;
    for (int j = 0; j < 32; j++) {
      const int nib = j < 16 ? blk[qs_at + j] & 15 : blk[qs_at + j - 16] >> 4;
      const int q = nib | (int)((qh >> j) & 1) << 4;
      out[b * 32 + j] = dt == CLF_Q5_0 ? d * (float)(q - 16) : d * (float)q + m;
    }
  }
}

void clf__ref_to_f32(const double *src, size_t n, float *dst) {
  for (size_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

void clf__ref_quantize_q8(const float *x, size_t rows, size_t K, double *xq) {
  for (size_t b = 0; b < rows * K / 32; b++) {
    const float *v = x + b * 32;
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(v[j]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++) {
      const float p = v[j] * id; /* one f32 product, as the kernel's */
      xq[b * 32 + j] = (double)d * nearbyint((double)p);
    }
  }
}

static double ref_f16(const unsigned char *p) { return clf__f16_bits_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* The k-quants' block bytes (the types of 256 elements a block in
 * clformer.h's CLF_DTYPE_MAP), or 0. */
static size_t kq_bytes(clf_dtype dt) {
  switch (dt) {
#define KQ_BYTES(NAME, value, name, wname, ggml, block, bytes, wtype, flags) \
  case CLF_##NAME:                                                            \
    return (block) == 256 ? (bytes) : 0;
    CLF_DTYPE_MAP(KQ_BYTES)
#undef KQ_BYTES
  default:
    return 0;
  }
}

int clf__ref_dequant_k(clf_dtype dt, const unsigned char *blocks, size_t numel, double *out) {
  const size_t bytes = kq_bytes(dt);
  if (!bytes) return 0;
  for (size_t b = 0; b < numel / 256; b++) {
    const unsigned char *q = blocks + b * bytes;
    double *y = out + b * 256;
    for (int e = 0; e < 256; e++) {
      const int j = e / 32, l = e % 32; /* sub-block of 32, element in it */
      if (dt == CLF_Q2_K || dt == CLF_Q3_K) {
        /* e = 128 h + 32 c + 16 s + i: quants byte 32 h + 16 s + i, bits 2 c; scale of sub-block 16 t = 8 h + 2 c + s */
        const int h = e / 128, c = (e % 128) / 32, si = e % 32, t = e / 16;
        const unsigned char *qs = q + (dt == CLF_Q2_K ? 16 : 32);
        const int v = (qs[32 * h + si] >> (2 * c)) & 3;
        if (dt == CLF_Q2_K) { /* {scales[16]: 4-bit scale | 4-bit min << 4; qs[64]; d; dmin} */
          y[e] = ref_f16(q + 80) * (q[t] & 15) * v - ref_f16(q + 82) * (q[t] >> 4);
        } else { /* {hmask[32]; qs[64]; scales[12]: 16 6-bit values; d}: v - 4 where hmask's bit 4 h + c is clear */
          const unsigned char *sc = q + 96;
          const int low = t < 8 ? sc[t] & 15 : sc[t - 8] >> 4, high = (sc[8 + t % 4] >> (2 * (t / 4))) & 3;
          const int hbit = (q[si] >> (4 * h + c)) & 1;
          y[e] = ref_f16(q + 108) * ((low | high << 4) - 32) * (v - (hbit ? 0 : 4));
        }
        continue;
      }
      if (dt == CLF_Q6_K) { /* {ql[128]; qh[64]; scales[16]; d}: halves of 128, quarters of 32 */
        const int g = e / 128, t = (e % 128) / 32;
        const int lo = (q[g * 64 + (t & 1) * 32 + l] >> (t < 2 ? 0 : 4)) & 15;
        const int hi = (q[128 + g * 32 + l] >> (2 * t)) & 3;
        y[e] = ref_f16(q + 208) * (signed char)q[192 + g * 8 + 2 * t + l / 16] * ((lo | hi << 4) - 32);
        continue;
      }
      /* {d; dmin; scales[12]; (Q5_K: qh[32];) qs[128]}: 6-bit scale and min of sub-block j */
      const unsigned char *s = q + 4;
      const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
      const int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | (s[j] >> 6) << 4;
      const unsigned char *qs = q + (dt == CLF_Q4_K ? 16 : 48);
      int v = (qs[(j / 2) * 32 + l] >> (4 * (j % 2))) & 15;
      if (dt == CLF_Q5_K) v |= ((q[16 + l] >> j) & 1) << 4;
      y[e] = ref_f16(q) * sc * v - ref_f16(q + 2) * m;
    }
  }
  return 1;
}

/* Random bytes, then each block's f16 fields (d, and dmin where it has
 * one) set: scales, mins and quants as no quantizer would choose, but
 * every bit of the layout read. */
void clf__kq_blocks(clf_dtype dt, size_t N, size_t K, uint32_t seed, unsigned char *out) {
  const size_t bytes = kq_bytes(dt), blocks = N * K / 256;
  /* where d lies (dmin after it, where the type has one) */
  const size_t d_at = dt == CLF_Q6_K ? 208 : dt == CLF_Q2_K ? 80 : dt == CLF_Q3_K ? 108 : 0;
  uint32_t r = seed * 2654435761u + 1;
  for (size_t i = 0; i < blocks * bytes; i++) out[i] = (unsigned char)((r = r * 1664525u + 1013904223u) >> 24);
  for (size_t b = 0; b < blocks; b++) {
    unsigned char *q = out + b * bytes;
    const float d1 = dt == CLF_Q5_K ? 1e-4f : 2e-4f; /* weights within about 6 */
    const uint16_t d = clf__f32_to_f16(b % 5 == 1 ? 3e-6f : d1 * (float)(1 + b % 7));
    const uint16_t m = clf__f32_to_f16(b % 2 ? 0.008f : 0.002f);
    memcpy(q + d_at, &d, 2);
    if (dt != CLF_Q6_K && dt != CLF_Q3_K) memcpy(q + d_at + 2, &m, 2);
  }
}
