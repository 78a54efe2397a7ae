/* quant.c - weight storage types on the host: the Q8_0 / Q4_0 block
 * formats (clformer.h states them), and tensors made from f32 data in any
 * of the four or in ggml's Q5_0, Q4_K, Q6_K (quant_k.c; f16 bits:
 * base/half.c). */
#include "core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Every fact below is a column of the type's CLF_DTYPE_MAP row. */
unsigned clf__dtype_ggml_id(clf_dtype dt) { return clf__dtype_is_ggml(dt) ? (unsigned)clf__dtype(dt)->ggml : 0; }

int clf__dtype_quantizes(clf_dtype dt) {
  const clf__dtype_row *r = clf__dtype(dt);
  return r && (r->flags & CLF_DTYPE_FROM_F32);
}

int clf__dtype_is_ggml(clf_dtype dt) {
  const clf__dtype_row *r = clf__dtype(dt);
  return r && (r->flags & CLF_DTYPE_GGML);
}

int clf__dtype_is_block(clf_dtype dt) {
  const clf__dtype_row *r = clf__dtype(dt);
  return r && r->block > 1;
}

int clf__dtype_is_linear(clf_dtype dt) {
  const clf__dtype_row *r = clf__dtype(dt);
  return r && r->wtype >= 0;
}

size_t clf__dtype_block(clf_dtype dt) { return clf__dtype_is_block(dt) ? clf__dtype(dt)->block : 1; }

size_t clf__dtype_bytes(clf_dtype dt, size_t numel) {
  const clf__dtype_row *r = clf__dtype(dt);
  return r && r->block > 1 ? numel / r->block * r->bytes : numel * clf_dtype_size(dt);
}

/* One block of 32: quants into q (Q8_0: 32 bytes; Q4_0: 16), the scale's
 * f16 bits returned.  The scale used is the f16-rounded one, so that the
 * device's d * q is what was meant. */
static uint16_t quant_block(clf_dtype dt, const float *x, unsigned char *q) {
  float amax = 0.0f, m = 0.0f;
  for (int j = 0; j < CLF__QBLOCK; j++)
    if (fabsf(x[j]) > amax) amax = fabsf(x[j]), m = x[j];
  const uint16_t dh = clf__f32_to_f16(dt == CLF_Q8_0 ? amax / 127.0f : m / -8.0f);
  const float d = clf__f16_bits_to_f32(dh), id = d != 0.0f ? 1.0f / d : 0.0f;
  if (dt == CLF_Q8_0) {
    for (int j = 0; j < CLF__QBLOCK; j++) {
      float v = roundf(x[j] * id);
      v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
      q[j] = (unsigned char)(signed char)v;
    }
  } else {
    for (int j = 0; j < CLF__QBLOCK / 2; j++) {
      int lo = (int)(x[j] * id + 8.5f), hi = (int)(x[j + 16] * id + 8.5f);
      lo = lo < 0 ? 0 : lo > 15 ? 15 : lo;
      hi = hi < 0 ? 0 : hi > 15 ? 15 : hi;
      q[j] = (unsigned char)(lo | hi << 4);
    }
  }
  return dh;
}

void clf__quantize(clf_dtype dt, const float *x, size_t numel, void *out) {
  unsigned char *o = out;
  if (clf__dtype_is_ggml(dt)) {
    clf__quantize_ggml(dt, x, numel, out);
  } else if (dt == CLF_F32) {
    memcpy(o, x, numel * sizeof(float));
  } else if (dt == CLF_F16) {
    for (size_t i = 0; i < numel; i++) {
      const uint16_t h = clf__f32_to_f16(x[i]);
      memcpy(o + 2 * i, &h, 2);
    }
  } else {
    const size_t blocks = numel / CLF__QBLOCK, qb = dt == CLF_Q8_0 ? 32 : 16;
    unsigned char *scales = o + blocks * qb;
    for (size_t b = 0; b < blocks; b++) {
      const uint16_t dh = quant_block(dt, x + b * CLF__QBLOCK, o + b * qb);
      memcpy(scales + 2 * b, &dh, 2);
    }
  }
}

void clf__dequantize(clf_dtype dt, const void *in, size_t numel, float *x) {
  const unsigned char *p = in;
  if (dt == CLF_F32) {
    memcpy(x, p, numel * sizeof(float));
    return;
  }
  if (dt == CLF_F16) {
    for (size_t i = 0; i < numel; i++) x[i] = clf__f16_bits_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
    return;
  }
  const size_t blocks = numel / CLF__QBLOCK, qb = dt == CLF_Q8_0 ? 32 : 16;
  const unsigned char *scales = p + blocks * qb;
  for (size_t b = 0; b < blocks; b++) {
    const float d = clf__f16_bits_to_f32((uint16_t)(scales[2 * b] | scales[2 * b + 1] << 8));
    const unsigned char *q = p + b * qb;
    float *o = x + b * CLF__QBLOCK;
    for (int j = 0; j < CLF__QBLOCK; j++)
      o[j] = dt == CLF_Q8_0 ? d * (float)(signed char)q[j]
                            : d * (float)((j < 16 ? q[j] & 15 : q[j - 16] >> 4) - 8);
  }
}

clf_status clf_tensor_from_f32(clf_context *ctx, clf_dtype dtype, int ndim, const size_t *shape, const float *host,
                               clf_tensor **out) {
  static const char op[] = "clf_tensor_from_f32";
  clf_status st = clf__check_ctx(ctx, op);
  if (st != CLF_OK) return st;
  if (!out) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: out is NULL", op);
  *out = NULL;
  if (!clf__dtype_quantizes(dtype))
    return clf__fail(ctx, CLF_E_DTYPE,
                     "%s: dtype %s is not a weight type it quantizes to (f32, f16, q8_0, q4_0, q5_0, q4_k, q6_k%s)",
                     op, clf_dtype_name(dtype), clf__dtype_is_ggml(dtype) ? "; upload ggml blocks instead" : "");
  clf_tensor *t = NULL;
  if ((st = clf_tensor_create(ctx, dtype, ndim, shape, &t)) != CLF_OK) return st;
  const size_t numel = clf_tensor_numel(t), bytes = clf_tensor_bytes(t);
  if (numel && !host) {
    clf_tensor_destroy(t);
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: host is NULL", op);
  }
  void *buf = dtype == CLF_F32 ? (void *)host : malloc(bytes ? bytes : 1);
  if (!buf) {
    clf_tensor_destroy(t);
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory (%zu bytes)", op, bytes);
  }
  if (dtype != CLF_F32 && numel) clf__quantize(dtype, host, numel, buf);
  st = clf_tensor_upload(ctx, t, buf, bytes);
  if (buf != host) free(buf);
  if (st != CLF_OK) {
    clf_tensor_destroy(t);
    return st;
  }
  *out = t;
  return CLF_OK;
}
