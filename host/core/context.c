/* context.c - devices, device selection and the context that owns a queue.
 *
 * Enumerates every platform and device, picks one by selector or default
 * (first GPU, else first device), reads the features that kernels are
 * specialised on, and owns the queue, the program cache and scratch memory.
 *
 * Threads: the OpenCL calls that touch the driver's process-wide state
 * (platform and device enumeration, and creating and releasing the
 * cl_context and its queue) run under one process-wide lock.  The first
 * enumeration initialises the ICD loader and PoCL's devices, and two threads
 * doing it at once crashed inside PoCL's device queries or found no device
 * (issue 11, defect 7).  Everything else a context does is its own, so
 * contexts on different threads run in parallel.
 */
#include "core.h"

#include <CL/cl_ext.h> /* cl_khr_integer_dot_product's query */

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CLF__MAX_PLATFORMS 16
#define CLF__MAX_DEVICES 64

/* Serialises enumeration and cl_context creation and release (see above). */
static pthread_mutex_t clf__driver_lock = PTHREAD_MUTEX_INITIALIZER;

static void clf__platform_str(cl_platform_id p, cl_platform_info what,
                              char *buf, size_t len) {
  size_t need = 0;
  buf[0] = '\0';
  if (clGetPlatformInfo(p, what, 0, NULL, &need) != CL_SUCCESS || need == 0) return;
  char *tmp = malloc(need + 1);
  if (!tmp) return;
  if (clGetPlatformInfo(p, what, need, tmp, NULL) == CL_SUCCESS) {
    tmp[need] = '\0';
    snprintf(buf, len, "%s", tmp);
  }
  free(tmp);
}

/* A string property, truncated to fit `buf` (asking with a buffer that is
 * too small fails in OpenCL, so the full size is asked first). */
static void clf__device_str(cl_device_id d, cl_device_info what, char *buf,
                            size_t len) {
  size_t need = 0;
  buf[0] = '\0';
  if (clGetDeviceInfo(d, what, 0, NULL, &need) != CL_SUCCESS || need == 0) return;
  char *tmp = malloc(need + 1);
  if (!tmp) return;
  if (clGetDeviceInfo(d, what, need, tmp, NULL) == CL_SUCCESS) {
    tmp[need] = '\0';
    snprintf(buf, len, "%s", tmp);
  }
  free(tmp);
}

/* clf_list_devices's enumeration, with clf__driver_lock held. */
static clf_status clf__list_devices_locked(clf_device_desc *out, size_t capacity, size_t *count) {
  cl_platform_id plats[CLF__MAX_PLATFORMS];
  cl_uint nplat = 0;
  size_t n = 0;
  if (!count) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_list_devices: count is NULL");
  *count = 0;
  if (capacity && !out)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_list_devices: out is NULL but capacity is %zu", capacity);
  cl_int err = clGetPlatformIDs(CLF__MAX_PLATFORMS, plats, &nplat);
  if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (err == CL_SUCCESS && nplat == 0))
    return clf__fail(NULL, CLF_E_NO_DEVICE,
                     "no OpenCL platform found (is an ICD such as pocl-opencl-icd installed?)");
  if (err != CL_SUCCESS) return clf__fail_cl(NULL, err, "clGetPlatformIDs", NULL);
  if (nplat > CLF__MAX_PLATFORMS) nplat = CLF__MAX_PLATFORMS;
  cl_int dev_err = CL_SUCCESS; /* the first failure of a platform's device query */
  for (cl_uint p = 0; p < nplat; p++) {
    cl_device_id devs[CLF__MAX_DEVICES];
    cl_uint ndev = 0;
    err = clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, CLF__MAX_DEVICES, devs, &ndev);
    if (err != CL_SUCCESS) {
      /* A platform without devices is not an error; a query that failed is
       * reported when no platform has a device. */
      if (err != CL_DEVICE_NOT_FOUND && dev_err == CL_SUCCESS) dev_err = err;
      continue;
    }
    if (ndev > CLF__MAX_DEVICES) ndev = CLF__MAX_DEVICES;
    for (cl_uint d = 0; d < ndev; d++, n++) {
      if (n >= capacity) continue;
      clf_device_desc *o = &out[n];
      memset(o, 0, sizeof(*o));
      o->platform_index = (int)p;
      o->device_index = (int)d;
      o->platform = plats[p];
      o->device = devs[d];
      clGetDeviceInfo(devs[d], CL_DEVICE_TYPE, sizeof(o->type), &o->type, NULL);
      clf__platform_str(plats[p], CL_PLATFORM_NAME, o->platform_name, sizeof(o->platform_name));
      clf__device_str(devs[d], CL_DEVICE_NAME, o->device_name, sizeof(o->device_name));
      clf__device_str(devs[d], CL_DEVICE_VENDOR, o->vendor, sizeof(o->vendor));
      clf__device_str(devs[d], CL_DRIVER_VERSION, o->driver_version, sizeof(o->driver_version));
      clf__device_str(devs[d], CL_DEVICE_VERSION, o->device_version, sizeof(o->device_version));
    }
  }
  *count = n;
  if (n == 0 && dev_err != CL_SUCCESS) return clf__fail_cl(NULL, dev_err, "clGetDeviceIDs", "every platform");
  if (n == 0) return clf__fail(NULL, CLF_E_NO_DEVICE, "OpenCL platforms found, but no device");
  return CLF_OK;
}

clf_status clf_list_devices(clf_device_desc *out, size_t capacity, size_t *count) {
  pthread_mutex_lock(&clf__driver_lock);
  clf_status st = clf__list_devices_locked(out, capacity, count);
  pthread_mutex_unlock(&clf__driver_lock);
  return st;
}

static int clf__icontains(const char *hay, const char *needle) {
  size_t nl = strlen(needle);
  for (; *hay; hay++) {
    size_t i = 0;
    while (i < nl && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
    if (i == nl) return 1;
  }
  return nl == 0;
}

/* "P:D" with two non-negative integers and nothing else. */
static int clf__parse_pd(const char *s, int *p, int *d) {
  char *end;
  errno = 0;
  long a = strtol(s, &end, 10);
  if (end == s || *end != ':' || a < 0 || errno) return 0;
  const char *s2 = end + 1;
  long b = strtol(s2, &end, 10);
  if (end == s2 || *end != '\0' || b < 0 || errno) return 0;
  *p = (int)a;
  *d = (int)b;
  return 1;
}

clf_status clf_select_device(const char *selector, clf_device_desc *out) {
  clf_device_desc devs[CLF__MAX_DEVICES];
  size_t n = 0;
  if (!out) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_select_device: out is NULL");
  clf_status st = clf_list_devices(devs, CLF__ARRAY_LEN(devs), &n);
  if (st != CLF_OK) return st;
  if (n > CLF__ARRAY_LEN(devs)) n = CLF__ARRAY_LEN(devs);
  if (!selector || !*selector) {
    for (size_t i = 0; i < n; i++)
      if (devs[i].type & CL_DEVICE_TYPE_GPU) { *out = devs[i]; return CLF_OK; }
    *out = devs[0];
    return CLF_OK;
  }
  int p, d;
  int by_index = clf__parse_pd(selector, &p, &d);
  for (size_t i = 0; i < n; i++) {
    char full[300];
    snprintf(full, sizeof(full), "%s / %s", devs[i].platform_name, devs[i].device_name);
    if (by_index ? (devs[i].platform_index == p && devs[i].device_index == d)
                 : clf__icontains(full, selector)) {
      *out = devs[i];
      return CLF_OK;
    }
  }
  char list[700] = "";
  for (size_t i = 0; i < n && strlen(list) < sizeof(list) - 200; i++) {
    char row[300];
    snprintf(row, sizeof(row), "%s %d:%d %s / %s", i ? ";" : "", devs[i].platform_index,
             devs[i].device_index, devs[i].platform_name, devs[i].device_name);
    strncat(list, row, sizeof(list) - strlen(list) - 1);
  }
  return clf__fail(NULL, CLF_E_DEVICE_NOT_FOUND,
                   "no OpenCL device matches \"%s\" (give P:D or part of a name); found:%s",
                   selector, list);
}

static void clf__read_caps(clf_context *ctx) {
  clf__device_caps *c = &ctx->caps;
  cl_device_id d = ctx->dev.device;
  size_t ext_len = 0;
  clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &ext_len);
  char *ext = calloc(1, ext_len + 1);
  if (ext) clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, ext_len, ext, NULL);
  c->has_fp16 = ext && strstr(ext, "cl_khr_fp16") != NULL;
  c->has_fp64 = ext && strstr(ext, "cl_khr_fp64") != NULL;
  c->has_subgroups = ext && (strstr(ext, "cl_khr_subgroups") || strstr(ext, "cl_intel_subgroups"));
  const int dot_ext = ext && strstr(ext, "cl_khr_integer_dot_product") != NULL;
  free(ext);
  char ver[128];
  clf__device_str(d, CL_DEVICE_OPENCL_C_VERSION, ver, sizeof(ver));
  c->opencl_c_major = 1;
  c->opencl_c_minor = 2;
  sscanf(ver, "OpenCL C %d.%d", &c->opencl_c_major, &c->opencl_c_minor);
  /* the packed 4x8-bit built-ins (dot_acc_sat_4x8packed_*) are optional
   * within the extension (its capabilities query says whether they exist)
   * and declared for OpenCL C 3.0 */
  cl_bitfield dotcaps = 0;
  if (dot_ext && c->opencl_c_major >= 3 &&
      clGetDeviceInfo(d, CL_DEVICE_INTEGER_DOT_PRODUCT_CAPABILITIES_KHR, sizeof dotcaps, &dotcaps, NULL) == CL_SUCCESS)
    c->has_int_dot = (dotcaps & CL_DEVICE_INTEGER_DOT_PRODUCT_INPUT_4x8BIT_PACKED_KHR) != 0;
  clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof(c->local_mem), &c->local_mem, NULL);
  clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof(c->global_mem), &c->global_mem, NULL);
  clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof(c->max_alloc), &c->max_alloc, NULL);
  clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof(c->max_wg), &c->max_wg, NULL);
  clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof(c->max_item_sizes), c->max_item_sizes, NULL);
  clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(c->compute_units), &c->compute_units, NULL);
  clGetDeviceInfo(d, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, sizeof(c->pref_vec_float), &c->pref_vec_float, NULL);
  if (c->max_wg == 0) c->max_wg = 1;
  c->is_cpu = (ctx->dev.type & CL_DEVICE_TYPE_CPU) != 0;
  c->is_pocl = strstr(ctx->dev.platform_name, "Portable Computing Language") != NULL;
}

/* The -D options that describe the device to every kernel, from the caps
 * as restricted by class and limits (so the program cache and the verdicts,
 * keyed on them, keep CPU-class and GPU-class builds apart). */
static void clf__base_options(clf_context *ctx) {
  const clf__device_caps *c = &ctx->caps;
  char opts[512];
  snprintf(opts, sizeof(opts),
           "-cl-std=CL1.2 -DCLF_HAS_FP16=%d -DCLF_HAS_FP64=%d -DCLF_HAS_SUBGROUPS=%d "
           "-DCLF_LOCAL_MEM_BYTES=%lu -DCLF_MAX_WG=%zu -DCLF_VEC_FLOAT=%u -DCLF_IS_CPU=%d",
           c->has_fp16, c->has_fp64, c->has_subgroups, (unsigned long)c->local_mem, c->max_wg,
           c->pref_vec_float, c->is_cpu);
  ctx->base_options = strdup(opts);
}

void clf_context_options_init(clf_context_options *opts) {
  if (opts) memset(opts, 0, sizeof(*opts));
}

clf_status clf_context_create(const clf_context_options *opts,
                              clf_context **out) {
  clf_context_options defaults;
  if (!out) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_context_create: out is NULL");
  *out = NULL;
  if (!opts) {
    clf_context_options_init(&defaults);
    opts = &defaults;
  }
  clf__env env;
  clf_status st = clf__env_read(&env); /* an override the library does not know refuses the context */
  if (st != CLF_OK) return st;
  clf__env_create envc;
  clf__env_create_read(&envc);
  const char *sel = opts->device ? opts->device : envc.device;
  clf_device_desc dev;
  if ((st = clf_select_device(sel, &dev)) != CLF_OK) return st;

  clf_context *ctx = calloc(1, sizeof(*ctx));
  if (!ctx) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_context_create: out of host memory");
  ctx->dev = dev;
  ctx->env = env;
  ctx->profiling = opts->profiling;
  ctx->log_fn = opts->log;
  ctx->log_user = opts->log_user;
  ctx->progress_fn = opts->progress;
  ctx->progress_user = opts->progress_user;
  cl_int err;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)dev.platform, 0};
  const char *failed = NULL;
  pthread_mutex_lock(&clf__driver_lock);
  ctx->cl = clCreateContext(props, 1, &dev.device, NULL, NULL, &err);
  if (!ctx->cl) {
    failed = "clCreateContext";
  } else {
    ctx->queue = clCreateCommandQueue(ctx->cl, dev.device, opts->profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &err);
    if (!ctx->queue) failed = "clCreateCommandQueue", clReleaseContext(ctx->cl);
  }
  pthread_mutex_unlock(&clf__driver_lock);
  if (failed) {
    free(ctx);
    return clf__fail_cl(NULL, err, failed, dev.device_name); /* CLF_E_OUT_OF_MEMORY or CLF_E_OPENCL */
  }
  clf__read_caps(ctx);
  if ((st = clf__caps_restrict(ctx, opts->device_class, opts->limits, &envc)) != CLF_OK) {
    char msg[sizeof(ctx->err.msg)];
    snprintf(msg, sizeof msg, "%s", clf_last_error(NULL));
    clf_context_destroy(ctx);
    return clf__fail(NULL, st, "%s", msg);
  }
  clf__base_options(ctx);
  ctx->cache_dir = clf__cache_dir_resolve(ctx, opts->cache_dir, &envc);
  /* PoCL keeps its own on-disk cache of compiled kernels, keyed by source and
   * options, and exporting CL_PROGRAM_BINARIES costs it an extra compile: on
   * PoCL our binary cache is the slower path (see docs/cache.md), so we let
   * PoCL's cache do the work there.  CLFORMER_CACHE_BINARIES=1/0 overrides. */
  ctx->cache_binaries = ctx->cache_dir != NULL && !ctx->caps.is_pocl;
  const char *cb = envc.cache_binaries;
  if (cb && *cb && ctx->cache_dir) ctx->cache_binaries = atoi(cb) != 0;
  const char *kdir = opts->kernel_dir ? opts->kernel_dir : envc.kernel_dir;
  if (kdir && *kdir) ctx->kernel_dir = strdup(kdir);
  if (!ctx->base_options) {
    clf_context_destroy(ctx);
    return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_context_create: out of host memory");
  }
  clf__verdicts_load(ctx);
  clf__gemm_profile_apply(ctx);
  *out = ctx;
  return CLF_OK;
}

void clf_context_destroy(clf_context *ctx) {
  if (!ctx) return;
  if (ctx->queue) clFinish(ctx->queue);
  clf__prof_clear(ctx);
  clf__prof_paths_clear(ctx);
  clf__programs_release(ctx);
  for (int i = 0; i < CLF__SCRATCH_COUNT; i++)
    if (ctx->scratch[i]) clReleaseMemObject(ctx->scratch[i]);
  pthread_mutex_lock(&clf__driver_lock);
  if (ctx->queue) clReleaseCommandQueue(ctx->queue);
  if (ctx->cl) clReleaseContext(ctx->cl);
  pthread_mutex_unlock(&clf__driver_lock);
  clf__verdicts_free(ctx);
  free(ctx->gemm_profile);
  clf__tuned_free(ctx);
  free(ctx->cache_dir);
  free(ctx->kernel_dir);
  free(ctx->base_options);
  free(ctx->limits);
  free(ctx->err.log);
  free(ctx);
}

const clf_device_desc *clf_context_device(const clf_context *ctx) { return ctx ? &ctx->dev : NULL; }
cl_context clf_context_cl(const clf_context *ctx) { return ctx ? ctx->cl : NULL; }
cl_command_queue clf_context_queue(const clf_context *ctx) { return ctx ? ctx->queue : NULL; }
const char *clf_context_cache_dir(const clf_context *ctx) { return ctx ? ctx->cache_dir : NULL; }

void clf_context_cache_stats(const clf_context *ctx, clf_cache_stats *out) {
  if (!out) return;
  if (!ctx) { memset(out, 0, sizeof(*out)); return; }
  *out = ctx->stats;
}

clf_status clf_finish(clf_context *ctx) {
  clf_status st = clf__check_ctx(ctx, "clf_finish");
  if (st != CLF_OK) return st;
  cl_int err = clFinish(ctx->queue);
  if (err != CL_SUCCESS) return clf__fail_cl(ctx, err, "clFinish", NULL);
  return CLF_OK;
}

clf_status clf__scratch(clf_context *ctx, unsigned slot, size_t bytes, cl_mem *out) {
  if (slot >= CLF__SCRATCH_COUNT)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "scratch: slot %u, there are %d", slot, CLF__SCRATCH_COUNT);
  if (bytes == 0) bytes = 4;
  if (ctx->scratch_bytes[slot] < bytes) {
    if (bytes > ctx->caps.max_alloc) {
      char a[32], b[96];
      return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "scratch: %s of temporary memory exceed the device's largest "
                       "allocation (%s)", clf__bytes_str(bytes, a, sizeof a), clf__alloc_limit_str(ctx, b, sizeof b));
    }
    cl_int err;
    /* Releasing a buffer still used by queued commands is safe in OpenCL: it
     * is freed once they complete. */
    /* Zero-filled at creation (from a host copy, not clEnqueueFillBuffer):
     * scratch contents are then defined, which keeps Oclgrind's
     * uninitialised-value checker exact; it costs only when a slot grows. */
    void *zeros = calloc(1, bytes);
    if (!zeros) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "scratch: %zu bytes of host memory", bytes);
    cl_mem m = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, zeros, &err);
    free(zeros);
    if (!m) return clf__fail_cl(ctx, err, "clCreateBuffer", "scratch");
    if (ctx->scratch[slot]) clReleaseMemObject(ctx->scratch[slot]);
    ctx->scratch[slot] = m;
    ctx->scratch_bytes[slot] = bytes;
  }
  *out = ctx->scratch[slot];
  return CLF_OK;
}

/* A notice to the context's log callback, else to stderr: a warning unless
 * $CLFORMER_LOG is "off", an informational one only when it is "info". */
static void emit(clf_context *ctx, int info, const char *fmt, va_list ap) {
  char msg[1024];
  vsnprintf(msg, sizeof(msg), fmt, ap);
  if (ctx && ctx->log_fn) {
    ctx->log_fn(ctx->log_user, msg);
    return;
  }
  const int level = ctx ? ctx->env.log_level : clf__env_log_level();
  if (level < 0 || (info && level < 1)) return;
  fprintf(stderr, "clformer: %s\n", msg);
}

void clf__log(clf_context *ctx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit(ctx, 0, fmt, ap);
  va_end(ap);
}

void clf__info(clf_context *ctx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit(ctx, 1, fmt, ap);
  va_end(ap);
}
