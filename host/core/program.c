/* program.c - kernel sources, lazy program builds and the in-memory cache.
 *
 * A program is one op family (kernels/<family>.cl, after kernels/common.cl)
 * built with one set of extra options.  Programs are built on first use,
 * kept for the context's life and stored on disk by cache.c.  A variant that
 * fails to build is remembered as failed, with its log, and not retried.
 */
#include "core.h"

#include "base/file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A kernel source larger than this is not one. */
#define KERNEL_SOURCE_MAX_BYTES (16u << 20)

static double clf__now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const clf__kernel_source *clf__embedded(const char *family) {
  for (size_t i = 0; i < clf__kernel_source_count; i++)
    if (strcmp(clf__kernel_sources[i].family, family) == 0) return &clf__kernel_sources[i];
  return NULL;
}

clf_status clf__load_source(clf_context *ctx, const char *family, char **out, size_t *len) {
  if (ctx->kernel_dir) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.cl", ctx->kernel_dir, family);
    clf_status st = clf__read_file(ctx, "kernel source", path, KERNEL_SOURCE_MAX_BYTES, out, len);
    /* A family missing from the kernel directory is an I/O error there,
     * unlike one missing from the build (CLF_E_NOT_FOUND below). */
    return st == CLF_E_NOT_FOUND ? clf__fail(ctx, CLF_E_IO, "cannot open kernel source %s", path) : st;
  }
  const clf__kernel_source *s = clf__embedded(family);
  if (!s) return clf__fail(ctx, CLF_E_NOT_FOUND, "no kernel family \"%s\" in this build", family);
  char *buf = malloc(s->length + 1);
  if (!buf) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "loading kernel family %s", family);
  memcpy(buf, s->text, s->length);
  buf[s->length] = '\0';
  *out = buf;
  *len = s->length;
  return CLF_OK;
}

/* The full text of a family's program: common.cl, then the family. */
static clf_status clf__program_text(clf_context *ctx, const char *family, char **out, size_t *len) {
  char *common = NULL, *fam = NULL;
  size_t lc = 0, lf = 0;
  clf_status st = clf__load_source(ctx, "common", &common, &lc);
  if (st != CLF_OK) return st;
  st = clf__load_source(ctx, family, &fam, &lf);
  if (st != CLF_OK) { free(common); return st; }
  char *all = malloc(lc + lf + 2);
  if (!all) { free(common); free(fam); return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "kernel source"); }
  memcpy(all, common, lc);
  all[lc] = '\n';
  memcpy(all + lc + 1, fam, lf);
  all[lc + 1 + lf] = '\0';
  free(common);
  free(fam);
  *out = all;
  *len = lc + 1 + lf;
  return CLF_OK;
}

static char *clf__build_log(clf_context *ctx, cl_program prog) {
  size_t n = 0;
  clGetProgramBuildInfo(prog, ctx->dev.device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
  char *log = calloc(1, n + 1);
  if (log && n) clGetProgramBuildInfo(prog, ctx->dev.device, CL_PROGRAM_BUILD_LOG, n, log, NULL);
  return log;
}

/* Compiles `text`; on a build failure records the log and returns CLF_E_BUILD. */
static clf_status clf__compile(clf_context *ctx, const char *label, const char *text, size_t len,
                               const char *options, cl_program *out) {
  cl_int err;
  *out = NULL;
  cl_program prog = clCreateProgramWithSource(ctx->cl, 1, &text, &len, &err);
  if (!prog) return clf__fail_cl(ctx, err, "clCreateProgramWithSource", label);
  err = clBuildProgram(prog, 1, &ctx->dev.device, options, NULL, NULL);
  if (err != CL_SUCCESS) {
    char *log = clf__build_log(ctx, prog);
    clReleaseProgram(prog);
    clf__fail(ctx, CLF_E_BUILD, "kernel program \"%s\" failed to build (%s) with options \"%s\": %.600s",
              label, clf_cl_error_name(err), options, log && *log ? log : "(empty build log)");
    ctx->err.cl = err;
    clf__set_build_log(ctx, log);
    free(log);
    return CLF_E_BUILD;
  }
  *out = prog;
  return CLF_OK;
}

/* clf__compile, and once more when it fails: a failure can be transient
 * (PoCL's cache raced by processes starting together on an empty cache
 * failed 1 start in 64), and a failed program is remembered for the
 * context's life.  A failure twice over is reported. */
static clf_status compile_twice(clf_context *ctx, const char *label, const char *text, size_t len,
                                const char *options, cl_program *out) {
  clf_status st = clf__compile(ctx, label, text, len, options, out);
  if (st == CLF_OK || st == CLF_E_OUT_OF_MEMORY) return st;
  clf__log(ctx, "kernel program \"%s\" failed to build; building it once more in case that was transient", label);
  st = clf__compile(ctx, label, text, len, options, out);
  if (st == CLF_OK) clf__info(ctx, "kernel program \"%s\" built on the second try", label);
  return st;
}

/* The same, told to the context's progress callback (a status line). */
static clf_status clf__compile_retrying(clf_context *ctx, const char *label, const char *text, size_t len,
                                        const char *options, cl_program *out) {
  char what[200];
  snprintf(what, sizeof what, "kernel program %.160s", label);
  if (ctx->progress_fn) ctx->progress_fn(ctx->progress_user, what);
  const clf_status st = compile_twice(ctx, label, text, len, options, out);
  if (ctx->progress_fn) ctx->progress_fn(ctx->progress_user, NULL);
  return st;
}

clf_status clf__build_source(clf_context *ctx, const char *label, const char *source,
                             const char *options, cl_program *out) {
  char *opts = malloc(strlen(ctx->base_options) + strlen(options ? options : "") + 2);
  if (!opts) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "build options");
  sprintf(opts, "%s %s", ctx->base_options, options ? options : "");
  clf_status st = clf__compile(ctx, label, source, strlen(source), opts, out);
  free(opts);
  return st;
}

static cl_program clf__from_binary(clf_context *ctx, const unsigned char *bin, size_t size,
                                   const char *options) {
  cl_int err, bin_status;
  cl_program prog = clCreateProgramWithBinary(ctx->cl, 1, &ctx->dev.device, &size, &bin,
                                              &bin_status, &err);
  if (!prog) return NULL;
  if (bin_status != CL_SUCCESS ||
      clBuildProgram(prog, 1, &ctx->dev.device, options, NULL, NULL) != CL_SUCCESS) {
    clReleaseProgram(prog);
    return NULL;
  }
  return prog;
}

static void clf__store_binary(clf_context *ctx, cl_program prog, const char *key) {
  size_t size = 0;
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, NULL) != CL_SUCCESS || !size)
    return;
  unsigned char *bin = malloc(size);
  if (!bin) return;
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof(bin), &bin, NULL) == CL_SUCCESS &&
      clf__cache_store(ctx, key, bin, size))
    ctx->stats.disk_written++;
  free(bin);
}

/* Builds one program entry: from the disk cache when allowed, else source. */
static void clf__program_build(clf_context *ctx, clf__program *p) {
  double t0 = clf__now_ms();
  char *text = NULL, *key = NULL;
  size_t len = 0;
  char label[160];
  snprintf(label, sizeof(label), "%s", p->family);
  size_t olen = strlen(ctx->base_options) + strlen(p->options) + 2;
  char *opts = malloc(olen);
  if (!opts) { p->status = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "build options"); goto done; }
  snprintf(opts, olen, "%s %s", ctx->base_options, p->options);
  p->status = clf__program_text(ctx, p->family, &text, &len);
  if (p->status != CLF_OK) goto done;
  if (ctx->cache_binaries) {
    key = clf__cache_key(ctx, text, len, opts);
    size_t size = 0;
    int rejected = 0;
    unsigned char *bin = key ? clf__cache_load(ctx, key, &size, &rejected) : NULL;
    if (bin) {
      p->program = clf__from_binary(ctx, bin, size, opts);
      free(bin);
      if (p->program) { ctx->stats.programs_from_disk++; goto done; }
      rejected = 1; /* the driver refused it: stale */
    }
    if (rejected) {
      ctx->stats.disk_rejected++;
      clf__cache_drop(ctx, key);
    }
  }
  p->status = clf__compile_retrying(ctx, label, text, len, opts, &p->program);
  if (p->status == CLF_OK) {
    ctx->stats.programs_built++;
    if (key) clf__store_binary(ctx, p->program, key);
  }
done:
  if (p->status != CLF_OK) {
    ctx->stats.build_failures++;
    p->cl = ctx->err.cl;
    const char *log = clf_last_build_log(ctx);
    size_t n = strlen(ctx->err.msg) + strlen(log) + 2;
    p->reason = malloc(n);
    if (p->reason) snprintf(p->reason, n, "%s\n%s", ctx->err.msg, log);
  }
  ctx->stats.build_ms += clf__now_ms() - t0;
  free(text);
  free(key);
  free(opts);
}

static clf__program *clf__program_get(clf_context *ctx, const char *family, const char *options) {
  if (!options) options = "";
  for (clf__program *p = ctx->programs; p; p = p->next) {
    if (strcmp(p->family, family) != 0 || strcmp(p->options, options) != 0) continue;
    /* Only the compiler's verdict is final; a failure for want of memory or
     * of another OpenCL call is tried again at the next use. */
    if (p->status != CLF_OK && p->status != CLF_E_BUILD) {
      free(p->reason);
      p->reason = NULL;
      clf__program_build(ctx, p);
    }
    return p;
  }
  clf__program *p = calloc(1, sizeof(*p));
  if (!p) return NULL;
  p->family = strdup(family);
  p->options = strdup(options);
  if (!p->family || !p->options) { free(p->family); free(p->options); free(p); return NULL; }
  clf__program_build(ctx, p);
  p->next = ctx->programs;
  ctx->programs = p;
  return p;
}

static clf_status clf__program_error(clf_context *ctx, clf__program *p) {
  /* Report the remembered failure again, with its log. */
  const char *nl = p->reason ? strchr(p->reason, '\n') : NULL;
  clf__fail(ctx, p->status, "%.*s", nl ? (int)(nl - p->reason) : 0, p->reason ? p->reason : "");
  ctx->err.cl = p->cl;
  if (nl) clf__set_build_log(ctx, nl + 1);
  return p->status;
}

clf_status clf_context_prepare(clf_context *ctx, const char *family, const char *options) {
  clf_status st = clf__check_ctx(ctx, "clf_context_prepare");
  if (st != CLF_OK) return st;
  if (!family || !*family) return clf__fail(ctx, CLF_E_INVALID_ARG, "clf_context_prepare: family is empty");
  clf__program *p = clf__program_get(ctx, family, options);
  if (!p) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "clf_context_prepare: out of host memory");
  return p->status == CLF_OK ? CLF_OK : clf__program_error(ctx, p);
}

/* The families whose source builds one kernel a program when asked
 * (-DCLF_ONLY=1 -DCLF_ONLY_<kernel>=1: kernels/linear.cl): their builds
 * multiply by weight type, rows and options, and a build of every kernel
 * for the one the host runs cost Intel's CPU runtime 2.2x the time
 * (a Q6_K 16-row program: 9 s against 4 s for skinny_r16f alone). */
static int per_kernel_family(const char *family) { return strcmp(family, "linear") == 0; }

clf_status clf__get_kernel(clf_context *ctx, const char *family, const char *options,
                           const char *name, clf__kernel **out) {
  clf_status st = clf__variant_gate(ctx, family, name);
  if (st != CLF_OK) return st;
  char *own = NULL;
  if (per_kernel_family(family)) {
    const size_t n = strlen(options ? options : "") + strlen(name) + 40;
    if (!(own = malloc(n))) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "kernel %s: out of host memory", name);
    snprintf(own, n, "%s -DCLF_ONLY=1 -DCLF_ONLY_%s=1", options ? options : "", name);
    options = own;
  }
  clf__program *p = clf__program_get(ctx, family, options);
  free(own);
  if (!p) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "kernel %s: out of host memory", name);
  if (p->status != CLF_OK) return clf__program_error(ctx, p);
  for (clf__kernel *k = p->kernels; k; k = k->next)
    if (strcmp(k->name, name) == 0) { *out = k; return CLF_OK; }
  cl_int err;
  cl_kernel kern = clCreateKernel(p->program, name, &err);
  if (!kern) return clf__fail_cl(ctx, err, "clCreateKernel", name);
  clf__kernel *k = calloc(1, sizeof(*k));
  if (!k || !(k->name = strdup(name))) {
    free(k);
    clReleaseKernel(kern);
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "kernel %s", name);
  }
  k->kernel = kern;
  /* The kernel's own limit, within the context's (which CLFORMER_LIMITS
   * may have lowered below the device's): every launch stays under both. */
  if (clGetKernelWorkGroupInfo(kern, ctx->dev.device, CL_KERNEL_WORK_GROUP_SIZE, sizeof(k->max_wg),
                               &k->max_wg, NULL) != CL_SUCCESS || !k->max_wg || k->max_wg > ctx->caps.max_wg)
    k->max_wg = ctx->caps.max_wg;
  if (clGetKernelWorkGroupInfo(kern, ctx->dev.device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof(k->local_mem),
                               &k->local_mem, NULL) != CL_SUCCESS)
    k->local_mem = 0;
  k->next = p->kernels;
  p->kernels = k;
  *out = k;
  return CLF_OK;
}

void clf__programs_release(clf_context *ctx) {
  clf__program *p = ctx->programs;
  while (p) {
    clf__program *np = p->next;
    clf__kernel *k = p->kernels;
    while (k) {
      clf__kernel *nk = k->next;
      clReleaseKernel(k->kernel);
      free(k->name);
      free(k);
      k = nk;
    }
    if (p->program) clReleaseProgram(p->program);
    free(p->family);
    free(p->options);
    free(p->reason);
    free(p);
    p = np;
  }
  ctx->programs = NULL;
}
