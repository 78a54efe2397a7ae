/* launch.c - argument checks and kernel launches shared by every op. */
#include "core.h"

#include "base/checked.h"

#include <stdio.h>
#include <string.h>

const char *clf__shape_str(const clf_tensor *t, char *buf, size_t len) {
  size_t n = 0;
  if (!t) { snprintf(buf, len, "(null)"); return buf; }
  n += (size_t)snprintf(buf + n, len - n, "[");
  for (int i = 0; i < t->ndim && n < len; i++)
    n += (size_t)snprintf(buf + n, len - n, "%s%zu", i ? ", " : "", t->shape[i]);
  if (n < len) snprintf(buf + n, len - n, "]");
  return buf;
}

size_t clf__numel_range(const clf_tensor *t, int from, int to) {
  size_t n = 1;
  for (int i = from; i < to; i++) n *= t->shape[i];
  return n;
}

clf_status clf__check_ctx(clf_context *ctx, const char *op) {
  if (!ctx) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: context is NULL", op);
  return CLF_OK;
}

clf_status clf__check_tensor(clf_context *ctx, const char *op, const char *arg, const clf_tensor *t,
                             int dtype, int min_ndim, int max_ndim) {
  if (!t) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: %s is NULL", op, arg);
  if (t->ctx != ctx)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: %s belongs to another context", op, arg);
  /* -1: any element type; -2: that or a block type (transfers); -3: that
   * or the 16-row interleave (clf_linear's w) */
  if (t->r16 && dtype != -3)
    return clf__fail(ctx, CLF_E_DTYPE, "%s: %s is %s in clformer's 16-row interleave (a weight loaded for a CPU), "
                     "which only clf_linear reads", op, arg, clf_dtype_name(t->dtype));
  if (dtype == -3) dtype = -2;
  if (dtype == -1 && clf__dtype_is_block(t->dtype))
    return clf__fail(ctx, CLF_E_DTYPE, "%s: %s is %s, a weight storage type only clf_linear reads", op, arg,
                     clf_dtype_name(t->dtype));
  if (dtype >= 0 && t->dtype != (clf_dtype)dtype)
    return clf__fail(ctx, CLF_E_DTYPE, "%s: %s is %s, expected %s", op, arg, clf_dtype_name(t->dtype),
                     clf_dtype_name((clf_dtype)dtype));
  if (t->ndim < min_ndim || t->ndim > max_ndim) {
    char b[96];
    if (min_ndim == max_ndim)
      return clf__fail(ctx, CLF_E_SHAPE, "%s: %s has shape %s, expected %d dims", op, arg,
                       clf__shape_str(t, b, sizeof(b)), min_ndim);
    return clf__fail(ctx, CLF_E_SHAPE, "%s: %s has shape %s, expected %d to %d dims", op, arg,
                     clf__shape_str(t, b, sizeof(b)), min_ndim, max_ndim);
  }
  return CLF_OK;
}

clf_status clf__check_dim(clf_context *ctx, const char *op, const char *arg, const clf_tensor *t, int axis,
                          size_t want) {
  int a = axis < 0 ? axis + t->ndim : axis;
  if (a < 0 || a >= t->ndim || t->shape[a] != want) {
    char b[96];
    return clf__fail(ctx, CLF_E_SHAPE, "%s: %s has shape %s, dim %d must be %zu", op, arg,
                     clf__shape_str(t, b, sizeof(b)), axis, want);
  }
  return CLF_OK;
}

clf_status clf__check_same_shape(clf_context *ctx, const char *op, const char *arg_a, const clf_tensor *a,
                                 const char *arg_b, const clf_tensor *b) {
  int same = a->ndim == b->ndim;
  for (int i = 0; same && i < a->ndim; i++) same = a->shape[i] == b->shape[i];
  if (!same) {
    char sa[96], sb[96];
    return clf__fail(ctx, CLF_E_SHAPE, "%s: %s has shape %s but %s has shape %s", op, arg_b,
                     clf__shape_str(b, sb, sizeof(sb)), arg_a, clf__shape_str(a, sa, sizeof(sa)));
  }
  return CLF_OK;
}

clf_status clf__check_fits_u32(clf_context *ctx, const char *op, const char *arg, const clf_tensor *t) {
  if (t && !clf__fits_u32(t->offset, clf_tensor_numel(t))) {
    char b[96];
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: %s has shape %s (%zu elements at offset %zu): beyond 32-bit indexing",
                     op, arg, clf__shape_str(t, b, sizeof(b)), clf_tensor_numel(t), t->offset);
  }
  return CLF_OK;
}

clf_status clf__set_args(clf_context *ctx, clf__kernel *k, int nargs, ...) {
  va_list ap;
  va_start(ap, nargs);
  for (int i = 0; i < nargs; i++) {
    size_t size = va_arg(ap, size_t);
    const void *ptr = va_arg(ap, const void *);
    cl_int err = clSetKernelArg(k->kernel, (cl_uint)i, size, ptr);
    if (err != CL_SUCCESS) {
      va_end(ap);
      char what[160];
      snprintf(what, sizeof(what), "%s, arg %d", k->name, i);
      return clf__fail_cl(ctx, err, "clSetKernelArg", what);
    }
  }
  va_end(ap);
  return CLF_OK;
}

size_t clf__wg_1d(const clf_context *ctx, const clf__kernel *k, size_t want) {
  size_t m = k->max_wg < ctx->caps.max_wg ? k->max_wg : ctx->caps.max_wg;
  if (ctx->caps.max_item_sizes[0] && ctx->caps.max_item_sizes[0] < m) m = ctx->caps.max_item_sizes[0];
  size_t w = want;
  while (w > m && w > 1) w /= 2;
  return w ? w : 1;
}

void clf__rows_local(const clf_context *ctx, const clf__kernel *k, size_t n, size_t local[2]) {
  size_t total = clf__wg_1d(ctx, k, 256);
  size_t l0 = n >= 48 ? 64 : n >= 12 ? 16 : 4;
  if (l0 > total) l0 = total;
  size_t l1 = total / l0;
  if (ctx->caps.max_item_sizes[1] && l1 > ctx->caps.max_item_sizes[1]) l1 = ctx->caps.max_item_sizes[1];
  local[0] = l0;
  local[1] = l1;
}

/* How many times a kernel's declared local memory the driver reports as
 * CL_KERNEL_LOCAL_MEM_SIZE, measured once on a kernel that declares 1 KiB:
 * Mesa 22.3's rusticl reports twice what __local arrays declare (8000 bytes
 * for float[1000]) and runs them in what they declare.  1 when it cannot be
 * measured. */
static unsigned local_overcount(clf_context *ctx) {
  if (ctx->local_overcount) return ctx->local_overcount;
  static const char *src = "__kernel void clf_local_probe(__global float *o) {\n"
                           "  __local float a[256];\n"
                           "  a[get_local_id(0)] = (float)get_local_id(0);\n"
                           "  barrier(CLK_LOCAL_MEM_FENCE);\n"
                           "  o[get_global_id(0)] = a[255 - get_local_id(0)];\n"
                           "}\n";
  cl_int err;
  cl_ulong used = 0;
  ctx->local_overcount = 1;
  cl_program p = clCreateProgramWithSource(ctx->cl, 1, &src, NULL, &err);
  if (p && clBuildProgram(p, 1, &ctx->dev.device, "-cl-std=CL1.2", NULL, NULL) == CL_SUCCESS) {
    cl_kernel kern = clCreateKernel(p, "clf_local_probe", &err);
    if (kern && clGetKernelWorkGroupInfo(kern, ctx->dev.device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof used, &used, NULL) ==
                    CL_SUCCESS && used >= 2048)
      ctx->local_overcount = (unsigned)(used / 1024);
    if (kern) clReleaseKernel(kern);
  }
  if (p) clReleaseProgram(p);
  return ctx->local_overcount;
}

int clf__local_fits(clf_context *ctx, const clf__kernel *k) {
  return k->local_mem <= ctx->caps.local_mem || k->local_mem / local_overcount(ctx) <= ctx->caps.local_mem;
}

clf_status clf__launch(clf_context *ctx, clf__kernel *k, cl_uint dims, const size_t *global,
                       const size_t *local, cl_event *event) {
  size_t g[3];
  for (cl_uint i = 0; i < dims; i++) {
    if (global[i] == 0) {
      /* Nothing to do; still honour the caller's event. */
      if (event) {
        cl_int err = clEnqueueMarkerWithWaitList(ctx->queue, 0, NULL, event);
        if (err != CL_SUCCESS) return clf__fail_cl(ctx, err, "clEnqueueMarkerWithWaitList", k->name);
      }
      return CLF_OK;
    }
    g[i] = (global[i] + local[i] - 1) / local[i] * local[i];
  }
  /* A driver refuses a group over the kernel's limit itself; these catch
   * an op that would break a limit of CLFORMER_LIMITS, which the device
   * (larger than the one emulated) would accept. */
  size_t items = 1;
  for (cl_uint i = 0; local && i < dims; i++) items *= local[i];
  if (local && items > k->max_wg)
    return clf__fail(ctx, CLF_E_UNSUPPORTED,
                     "kernel %s: a work-group of %zu work-items is more than the %zu it may have on this device%s%s",
                     k->name, items, k->max_wg, ctx->caps.limited & CLF__LIMIT_WG ? " under " : "",
                     ctx->caps.limited & CLF__LIMIT_WG ? ctx->limits_src : "");
  if (!clf__local_fits(ctx, k)) {
    char a[32], b[32];
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "kernel %s: uses %s of local memory, more than the device's %s%s%s",
                     k->name, clf__bytes_str(k->local_mem, a, sizeof a), clf__bytes_str(ctx->caps.local_mem, b, sizeof b),
                     ctx->caps.limited & CLF__LIMIT_LOCAL ? " under " : "",
                     ctx->caps.limited & CLF__LIMIT_LOCAL ? ctx->limits_src : "");
  }
  cl_event mine = NULL, *ev = clf__prof_event(ctx, event, &mine);
  cl_int err = clEnqueueNDRangeKernel(ctx->queue, k->kernel, dims, NULL, g, local, 0, NULL, ev);
  if (err != CL_SUCCESS) return clf__fail_cl(ctx, err, "clEnqueueNDRangeKernel", k->name);
  clf__prof_note(ctx, k->name, event, &mine);
  return CLF_OK;
}
