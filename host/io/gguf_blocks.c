/* gguf_blocks.c - ggml's tensor types decoded to f32 on the host
 * (clf_gguf_dequantize): the reference the device's block decoders are
 * checked against, and the way to read a GGUF tensor as numbers.  Each
 * block as ggml-common.h lays it out and ggml-quants.c's dequantize_row_*
 * reads it (the same arithmetic, in the same order). */
#include "gguf_types.h"

#include "base/half.h"
#include "base/status.h"

#include <stdint.h>
#include <string.h>

/* ggml's types that clformer has too, from CLF_DTYPE_MAP: named as the
 * enum is ("Q4_K", ggml's own names), every one decoded. */
static const struct {
  int id; /* ggml's number */
  clf__ggml_type t;
} shared[] = {
#define CLF__GGML_SHARED(NAME, value, name, wname, ggml, block, bytes, wtype, flags) {ggml, {#NAME, block, bytes, 1}},
    CLF_DTYPE_MAP(CLF__GGML_SHARED)
#undef CLF__GGML_SHARED
};
_Static_assert(CLF__ARRAY_LEN(shared) == CLF__DTYPE_COUNT, "one row per CLF_DTYPE_MAP entry");

/* ggml's other types, by number. */
static const clf__ggml_type others[] = {
    [9] = {"Q8_1", 32, 36, 0},     [15] = {"Q8_K", 256, 292, 0},  [16] = {"IQ2_XXS", 0, 0, 0},
    [17] = {"IQ2_XS", 0, 0, 0},    [18] = {"IQ3_XXS", 0, 0, 0},   [19] = {"IQ1_S", 0, 0, 0},
    [20] = {"IQ4_NL", 0, 0, 0},    [21] = {"IQ3_S", 0, 0, 0},     [22] = {"IQ2_S", 0, 0, 0},
    [23] = {"IQ4_XS", 0, 0, 0},    [24] = {"I8", 1, 1, 1},        [25] = {"I16", 1, 2, 1},
    [28] = {"F64", 1, 8, 1},       [29] = {"IQ1_M", 0, 0, 0},     [30] = {"BF16", 1, 2, 1},
    [34] = {"TQ1_0", 0, 0, 0},     [35] = {"TQ2_0", 0, 0, 0},     [39] = {"MXFP4", 0, 0, 0},
};

const clf__ggml_type *clf__ggml_type_of(unsigned t) {
  for (size_t i = 0; i < CLF__ARRAY_LEN(shared); i++)
    if (shared[i].id >= 0 && (unsigned)shared[i].id == t) return &shared[i].t;
  return t < CLF__ARRAY_LEN(others) && others[t].name ? &others[t] : NULL;
}

static float h(const unsigned char *p) { return clf__f16_bits_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* Q4_0 {d; qs[16]}, Q4_1 {d; m; qs[16]}: element j low nibble, j + 16 high. */
static void q4(const unsigned char *b, int has_min, float *y) {
  const float d = h(b), m = has_min ? h(b + 2) : 0.0f;
  const unsigned char *qs = b + (has_min ? 4 : 2);
  for (int j = 0; j < 16; j++) {
    if (has_min) {
      y[j] = (float)(qs[j] & 0xF) * d + m;
      y[j + 16] = (float)(qs[j] >> 4) * d + m;
    } else {
      y[j] = (float)((qs[j] & 0xF) - 8) * d;
      y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
    }
  }
}

/* Q5_0 {d; qh[4]; qs[16]}, Q5_1 {d; m; qh[4]; qs[16]}: the fifth bits in qh. */
static void q5(const unsigned char *b, int has_min, float *y) {
  const float d = h(b), m = has_min ? h(b + 2) : 0.0f;
  const unsigned char *qhp = b + (has_min ? 4 : 2), *qs = qhp + 4;
  const uint32_t qh = (uint32_t)qhp[0] | (uint32_t)qhp[1] << 8 | (uint32_t)qhp[2] << 16 | (uint32_t)qhp[3] << 24;
  for (int j = 0; j < 16; j++) {
    const int x0 = (qs[j] & 0xF) | (int)(((qh >> j) << 4) & 0x10);
    const int x1 = (qs[j] >> 4) | (int)((qh >> (j + 12)) & 0x10);
    if (has_min) {
      y[j] = (float)x0 * d + m;
      y[j + 16] = (float)x1 * d + m;
    } else {
      y[j] = (float)(x0 - 16) * d;
      y[j + 16] = (float)(x1 - 16) * d;
    }
  }
}

/* Q2_K {scales[16]; qs[64]; d; dmin}: 16 sub-blocks of 16, 4-bit scale and min each. */
static void q2_k(const unsigned char *b, float *y) {
  const unsigned char *sc = b, *q = b + 16;
  const float d = h(b + 80), min = h(b + 82);
  int is = 0;
  for (int n = 0; n < 256; n += 128, q += 32)
    for (int shift = 0; shift < 8; shift += 2)
      for (int half = 0; half < 2; half++) {
        const unsigned s = sc[is++];
        const float dl = d * (float)(s & 0xF), ml = min * (float)(s >> 4);
        for (int l = 0; l < 16; l++) *y++ = dl * (float)((q[l + 16 * half] >> shift) & 3) - ml;
      }
}

/* Q3_K {hmask[32]; qs[64]; scales[12]; d}: 16 sub-blocks of 16, 6-bit signed scales. */
static void q3_k(const unsigned char *b, float *y) {
  const unsigned char *hm = b, *q = b + 32, *s = b + 96;
  const float d_all = h(b + 108);
  int8_t scales[16];
  for (int j = 0; j < 16; j++) {
    const int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4, hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    scales[j] = (int8_t)((lo | hi << 4) - 32);
  }
  int is = 0;
  unsigned m = 1;
  for (int n = 0; n < 256; n += 128, q += 32)
    for (int shift = 0; shift < 8; shift += 2, m <<= 1)
      for (int half = 0; half < 2; half++) {
        const float dl = d_all * (float)scales[is++];
        for (int l = 0; l < 16; l++) {
          const int k = l + 16 * half;
          *y++ = dl * (float)(((q[k] >> shift) & 3) - ((hm[k] & m) ? 0 : 4));
        }
      }
}

/* The scale and min of sub-block j of Q4_K / Q5_K's 12 packed bytes. */
static void scale_min_k4(int j, const unsigned char *q, unsigned *d, unsigned *m) {
  if (j < 4) {
    *d = q[j] & 63, *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | (q[j - 4] >> 6) << 4;
    *m = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
  }
}

/* Q4_K {d; dmin; scales[12]; qs[128]} and Q5_K {d; dmin; scales[12];
 * qh[32]; qs[128]}: 8 sub-blocks of 32, 6-bit scales and mins. */
static void q45_k(const unsigned char *b, int five, float *y) {
  const float d = h(b), min = h(b + 2);
  const unsigned char *sc = b + 4, *qh = b + 16, *ql = b + (five ? 48 : 16);
  unsigned u1 = 1, u2 = 2;
  for (int j = 0, is = 0; j < 256; j += 64, ql += 32, is += 2, u1 <<= 2, u2 <<= 2) {
    unsigned s, m;
    scale_min_k4(is, sc, &s, &m);
    const float d1 = d * (float)s, m1 = min * (float)m;
    scale_min_k4(is + 1, sc, &s, &m);
    const float d2 = d * (float)s, m2 = min * (float)m;
    for (int l = 0; l < 32; l++) *y++ = d1 * (float)((ql[l] & 0xF) + (five && (qh[l] & u1) ? 16 : 0)) - m1;
    for (int l = 0; l < 32; l++) *y++ = d2 * (float)((ql[l] >> 4) + (five && (qh[l] & u2) ? 16 : 0)) - m2;
  }
}

/* Q6_K {ql[128]; qh[64]; scales[16] (int8); d}: 16 sub-blocks of 16. */
static void q6_k(const unsigned char *b, float *y) {
  const unsigned char *ql = b, *qh = b + 128;
  const int8_t *sc = (const int8_t *)(b + 192);
  const float d = h(b + 208);
  for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8)
    for (int l = 0; l < 32; l++) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
      const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
      const int q4v = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
      y[l] = d * (float)sc[is] * (float)q1;
      y[l + 32] = d * (float)sc[is + 2] * (float)q2;
      y[l + 64] = d * (float)sc[is + 4] * (float)q3;
      y[l + 96] = d * (float)sc[is + 6] * (float)q4v;
    }
}

/* Q8_0 {d; qs[32] (int8)}. */
static void q8_0(const unsigned char *b, float *y) {
  const float d = h(b);
  for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

/* One block of type t (block elements `block`) into y. */
static void decode_block(unsigned t, const unsigned char *b, float *y) {
  switch (t) {
  case 2: q4(b, 0, y); break;
  case 3: q4(b, 1, y); break;
  case 6: q5(b, 0, y); break;
  case 7: q5(b, 1, y); break;
  case 8: q8_0(b, y); break;
  case 10: q2_k(b, y); break;
  case 11: q3_k(b, y); break;
  case 12: q45_k(b, 0, y); break;
  case 13: q45_k(b, 1, y); break;
  case 14: q6_k(b, y); break;
  default: break;
  }
}

/* A scalar type's element i. */
static float scalar(unsigned t, const unsigned char *p, uint64_t i) {
  switch (t) {
  case 0: {
    float f;
    memcpy(&f, p + 4 * i, 4);
    return f;
  }
  case 1: return h(p + 2 * i);
  case 30: return clf__bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
  case 24: return (float)(int8_t)p[i];
  case 25: return (float)(int16_t)(p[2 * i] | p[2 * i + 1] << 8);
  case 26: {
    int32_t v;
    memcpy(&v, p + 4 * i, 4);
    return (float)v;
  }
  case 27: {
    int64_t v;
    memcpy(&v, p + 8 * i, 8);
    return (float)v;
  }
  default: {
    double v;
    memcpy(&v, p + 8 * i, 8);
    return (float)v;
  }
  }
}

clf_status clf_gguf_dequantize(unsigned ggml_type, const void *src, uint64_t n, float *dst) {
  static const char op[] = "clf_gguf_dequantize";
  const clf__ggml_type *ty = clf__ggml_type_of(ggml_type);
  if (!ty || !ty->decoded)
    return clf__fail(NULL, CLF_E_UNSUPPORTED, "%s: ggml type %u (%s) is not one clformer decodes", op, ggml_type,
                     ty ? ty->name : "unknown");
  if ((!src || !dst) && n) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: NULL buffer", op);
  const unsigned block = ty->block;
  if (n % block)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: %llu elements are not whole blocks of %u", op,
                     (unsigned long long)n, block);
  const unsigned char *p = src;
  if (block == 1) {
    for (uint64_t i = 0; i < n; i++) dst[i] = scalar(ggml_type, p, i);
    return CLF_OK;
  }
  for (uint64_t i = 0; i < n / block; i++) decode_block(ggml_type, p + i * ty->bytes, dst + i * block);
  return CLF_OK;
}
