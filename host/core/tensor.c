/* tensor.c - device tensors: creation, views, upload, download, fill, copy. */
#include "core.h"

#include "base/checked.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* *numel = the product of a shape; 0 when it overflows size_t. */
static int clf__shape_numel(int ndim, const size_t *shape, size_t *numel) {
  size_t n = 1;
  for (int i = 0; i < ndim; i++)
    if (!clf__mul_ok(n, shape[i], &n)) return 0;
  *numel = n;
  return 1;
}

static clf_status clf__check_shape_arg(clf_context *ctx, const char *fn, int ndim, const size_t *shape,
                                       clf_dtype dtype, size_t *numel) {
  if (ndim < 1 || ndim > CLF_MAX_DIMS)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: ndim is %d, must be 1..%d", fn, ndim, CLF_MAX_DIMS);
  if (!shape) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: shape is NULL", fn);
  const int block = clf__dtype_is_block(dtype);
  if (clf_dtype_size(dtype) == 0 && !block) return clf__fail(ctx, CLF_E_DTYPE, "%s: unknown dtype %d", fn, (int)dtype);
  if (block && (ndim != 2 || shape[1] % clf__dtype_block(dtype) != 0))
    return clf__fail(ctx, CLF_E_SHAPE, "%s: a %s tensor is 2-D [rows, K] with K a multiple of %zu; shape has %d dims%s",
                     fn, clf_dtype_name(dtype), clf__dtype_block(dtype), ndim, ndim == 2 ? " and K not a multiple" : "");
  size_t n = 0, bytes;
  /* Kernels index with 32-bit offsets. */
  if (!clf__shape_numel(ndim, shape, &n) || !clf__fits_u32(0, n) || !clf__mul_ok(n, block ? 1 : clf_dtype_size(dtype), &bytes))
    return clf__fail(ctx, CLF_E_SHAPE, "%s: shape too large (more than 2^32 elements)", fn);
  *numel = n;
  return CLF_OK;
}

clf_status clf_tensor_create(clf_context *ctx, clf_dtype dtype, int ndim, const size_t *shape,
                             clf_tensor **out) {
  clf_status st = clf__check_ctx(ctx, "clf_tensor_create");
  if (st != CLF_OK) return st;
  if (!out) return clf__fail(ctx, CLF_E_INVALID_ARG, "clf_tensor_create: out is NULL");
  *out = NULL;
  size_t numel;
  st = clf__check_shape_arg(ctx, "clf_tensor_create", ndim, shape, dtype, &numel);
  if (st != CLF_OK) return st;
  size_t bytes = clf__dtype_bytes(dtype, numel);
  if (bytes > ctx->caps.max_alloc) {
    char a[32], b[96];
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY,
                     "clf_tensor_create: %zu bytes (%s) exceed the device's largest allocation (%s)", bytes,
                     clf__bytes_str(bytes, a, sizeof a), clf__alloc_limit_str(ctx, b, sizeof b));
  }
  clf_tensor *t = calloc(1, sizeof(*t));
  if (!t) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "clf_tensor_create: out of host memory");
  cl_int err;
  /* An empty tensor still gets a small buffer so that kernels can bind it. */
  t->buf = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, bytes ? bytes : 16, NULL, &err);
  if (!t->buf) {
    free(t);
    char what[64];
    snprintf(what, sizeof(what), "%zu bytes", bytes);
    return clf__fail_cl(ctx, err, "clCreateBuffer", what);
  }
  t->ctx = ctx;
  t->dtype = dtype;
  t->ndim = ndim;
  memcpy(t->shape, shape, sizeof(size_t) * (size_t)ndim);
  *out = t;
  return CLF_OK;
}

clf_status clf_tensor_view(const clf_tensor *base, size_t offset, int ndim, const size_t *shape,
                           clf_tensor **out) {
  if (!base) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_tensor_view: base is NULL");
  clf_context *ctx = base->ctx;
  if (!out) return clf__fail(ctx, CLF_E_INVALID_ARG, "clf_tensor_view: out is NULL");
  *out = NULL;
  if (clf__dtype_is_block(base->dtype))
    return clf__fail(ctx, CLF_E_DTYPE, "clf_tensor_view: base is %s: block-quantized tensors have no views",
                     clf_dtype_name(base->dtype));
  size_t numel;
  clf_status st = clf__check_shape_arg(ctx, "clf_tensor_view", ndim, shape, base->dtype, &numel);
  if (st != CLF_OK) return st;
  size_t have = clf_tensor_numel(base);
  if (offset > have || numel > have - offset) {
    char b[96];
    return clf__fail(ctx, CLF_E_SHAPE,
                     "clf_tensor_view: %zu elements at offset %zu do not fit in base %s (%zu elements)",
                     numel, offset, clf__shape_str(base, b, sizeof(b)), have);
  }
  clf_tensor *t = calloc(1, sizeof(*t));
  if (!t) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "clf_tensor_view: out of host memory");
  *t = *base;
  t->offset = base->offset + offset;
  t->ndim = ndim;
  memset(t->shape, 0, sizeof(t->shape));
  memcpy(t->shape, shape, sizeof(size_t) * (size_t)ndim);
  clRetainMemObject(t->buf);
  *out = t;
  return CLF_OK;
}

void clf_tensor_destroy(clf_tensor *t) {
  if (!t) return;
  if (t->buf) clReleaseMemObject(t->buf);
  free(t);
}

clf_dtype clf_tensor_dtype(const clf_tensor *t) { return t ? t->dtype : CLF_F32; }
int clf_tensor_ndim(const clf_tensor *t) { return t ? t->ndim : 0; }
const size_t *clf_tensor_shape(const clf_tensor *t) { return t ? t->shape : NULL; }
cl_mem clf_tensor_buffer(const clf_tensor *t) { return t ? t->buf : NULL; }
size_t clf_tensor_offset(const clf_tensor *t) { return t ? t->offset : 0; }

size_t clf_tensor_dim(const clf_tensor *t, int axis) {
  if (!t) return 0;
  if (axis < 0) axis += t->ndim;
  return (axis >= 0 && axis < t->ndim) ? t->shape[axis] : 0;
}

size_t clf_tensor_numel(const clf_tensor *t) {
  if (!t) return 0;
  size_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

size_t clf_tensor_bytes(const clf_tensor *t) { return t ? clf__dtype_bytes(t->dtype, clf_tensor_numel(t)) : 0; }

static clf_status clf__check_transfer(clf_context *ctx, const char *fn, const clf_tensor *t,
                                      const void *host, size_t bytes) {
  clf_status st = clf__check_ctx(ctx, fn);
  if (st != CLF_OK) return st;
  st = clf__check_tensor(ctx, fn, "t", t, -2, 1, CLF_MAX_DIMS);
  if (st != CLF_OK) return st;
  if (bytes != clf_tensor_bytes(t)) {
    char b[96];
    return clf__fail(ctx, CLF_E_SHAPE, "%s: %zu bytes given, tensor %s %s holds %zu", fn, bytes,
                     clf_dtype_name(t->dtype), clf__shape_str(t, b, sizeof(b)), clf_tensor_bytes(t));
  }
  if (!host && bytes) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: host pointer is NULL", fn);
  return CLF_OK;
}

/* host's bytes into t, waited for (written NULL) or not (its event there). */
static clf_status write_tensor(clf_context *ctx, clf_tensor *t, const void *host, size_t bytes, cl_event *written) {
  clf_status st = clf__check_transfer(ctx, "clf_tensor_upload", t, host, bytes);
  if (st != CLF_OK || bytes == 0) return st;
  cl_int err = clEnqueueWriteBuffer(ctx->queue, t->buf, written ? CL_FALSE : CL_TRUE,
                                    t->offset * clf_dtype_size(t->dtype), bytes, host, 0, NULL, written);
  if (err != CL_SUCCESS && written) *written = NULL;
  return err == CL_SUCCESS ? CLF_OK : clf__fail_cl(ctx, err, "clEnqueueWriteBuffer", "clf_tensor_upload");
}

clf_status clf_tensor_upload(clf_context *ctx, clf_tensor *t, const void *host, size_t bytes) {
  return write_tensor(ctx, t, host, bytes, NULL);
}

void clf__written_wait(cl_event *written) {
  if (!*written) return;
  (void)clWaitForEvents(1, written); /* a failed write was reported by the command after it */
  clReleaseEvent(*written);
  *written = NULL;
}

clf_status clf__tensor_write(clf_context *ctx, clf_tensor *t, const void *host, size_t bytes, cl_event *written) {
  clf__written_wait(written);
  return write_tensor(ctx, t, host, bytes, written);
}

clf_status clf_tensor_download(clf_context *ctx, const clf_tensor *t, void *host, size_t bytes) {
  clf_status st = clf__check_transfer(ctx, "clf_tensor_download", t, host, bytes);
  if (st != CLF_OK || bytes == 0) return st;
  cl_int err = clEnqueueReadBuffer(ctx->queue, t->buf, CL_TRUE, t->offset * clf_dtype_size(t->dtype),
                                   bytes, host, 0, NULL, NULL);
  return err == CL_SUCCESS ? CLF_OK : clf__fail_cl(ctx, err, "clEnqueueReadBuffer", "clf_tensor_download");
}

clf_status clf_tensor_fill(clf_context *ctx, clf_tensor *t, double value, cl_event *event) {
  clf_status st = clf__check_ctx(ctx, "clf_tensor_fill");
  if (st != CLF_OK) return st;
  st = clf__check_tensor(ctx, "clf_tensor_fill", "t", t, -1, 1, CLF_MAX_DIMS);
  if (st != CLF_OK) return st;
  unsigned char pat[8];
  size_t es = clf_dtype_size(t->dtype);
  switch (t->dtype) {
    case CLF_F32: { float v = (float)value; memcpy(pat, &v, 4); break; }
    case CLF_I32: { int32_t v = (int32_t)value; memcpy(pat, &v, 4); break; }
    case CLF_I64: { int64_t v = (int64_t)value; memcpy(pat, &v, 8); break; }
    case CLF_F16: { uint16_t h = clf__f32_to_f16((float)value); memcpy(pat, &h, 2); break; }
    default: break; /* the block types were refused above */
  }
  size_t bytes = clf_tensor_bytes(t);
  if (bytes == 0) return CLF_OK;
  cl_int err = clEnqueueFillBuffer(ctx->queue, t->buf, pat, es, t->offset * es, bytes, 0, NULL, event);
  return err == CL_SUCCESS ? CLF_OK : clf__fail_cl(ctx, err, "clEnqueueFillBuffer", "clf_tensor_fill");
}

clf_status clf_tensor_copy(clf_context *ctx, const clf_tensor *src, clf_tensor *dst, cl_event *event) {
  clf_status st = clf__check_ctx(ctx, "clf_tensor_copy");
  if (st != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, "clf_tensor_copy", "src", src, -1, 1, CLF_MAX_DIMS)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, "clf_tensor_copy", "dst", dst, (int)src->dtype, 1, CLF_MAX_DIMS)) != CLF_OK)
    return st;
  if (clf_tensor_numel(src) != clf_tensor_numel(dst)) {
    char a[96], b[96];
    return clf__fail(ctx, CLF_E_SHAPE, "clf_tensor_copy: src %s and dst %s differ in size",
                     clf__shape_str(src, a, sizeof(a)), clf__shape_str(dst, b, sizeof(b)));
  }
  size_t es = clf_dtype_size(src->dtype), bytes = clf_tensor_bytes(src);
  if (bytes == 0) return CLF_OK;
  cl_event mine = NULL, *ev = clf__prof_event(ctx, event, &mine);
  cl_int err = clEnqueueCopyBuffer(ctx->queue, src->buf, dst->buf, src->offset * es, dst->offset * es,
                                   bytes, 0, NULL, ev);
  if (err != CL_SUCCESS) return clf__fail_cl(ctx, err, "clEnqueueCopyBuffer", "clf_tensor_copy");
  clf__prof_note(ctx, "copy", event, &mine);
  return CLF_OK;
}

size_t clf_array_numel(const clf_array *a) {
  if (!a) return 0;
  size_t n = 1;
  for (int i = 0; i < a->ndim; i++) n *= a->shape[i];
  return n;
}

void clf_array_free(clf_array *a) {
  if (!a) return;
  free(a->data);
  a->data = NULL;
}
