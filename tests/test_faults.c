/* test_faults.c - OpenCL calls made to fail, one at a time, along a context
 * creation, a model load and a forward pass (issue 11, docs/threads-and-faults.md).
 *
 * This program defines the OpenCL entry points that clformer and CLBlast
 * call.  Symbols of the executable (exported: export_dynamic in
 * tests/meson.build) come before libOpenCL's, both for the static core
 * library linked here and for libclblast.so, so every call lands in a
 * wrapper below, which forwards to the real one (dlsym RTLD_NEXT) unless the
 * fault armed for that call number fires.  The wrappers also count live
 * OpenCL objects (creates and retains minus releases, per kind), so a test
 * can assert that nothing is left once everything is destroyed.
 *
 * For every N from 1 to the number of fallible calls that a clean run makes,
 * the Nth fails; the run must then fail with an error naming the call or
 * its OpenCL error (or succeed with the right output, where the library
 * retries), leave no OpenCL object behind, and leave its context able to
 * load and run the model again.
 */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <clblast_c.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fixture_util.h"
#include "harness.h"

/* ---- the fault and the object counts ---- */

enum { L_MEM, L_KERNEL, L_PROGRAM, L_QUEUE, L_CONTEXT, L_EVENT, L_KINDS };
static const char *const live_name[L_KINDS] = {"mem objects", "kernels", "programs", "queues", "contexts", "events"};
static long live[L_KINDS];

/* The log that a failed clBuildProgram of ours leaves for clGetProgramBuildInfo. */
#define INJECTED_LOG "clf-fault: injected build failure (no compiler ran)"

static struct {
  long at;           /* the counted call that fails (from 1); 0: none */
  int sticky;        /* later calls of the function that failed fail too */
  const char *only;  /* count only this function's calls (NULL: every fallible one) */
  cl_int err;        /* what it returns (clBuildProgram: CL_BUILD_PROGRAM_FAILURE) */
  long calls;        /* counted calls since fault_arm */
  const char *hit;   /* the function that failed first, and its error */
  cl_int hit_err;
  long failures;     /* calls failed */
  cl_program failed; /* the program whose build we failed last */
} F;

static void fault_arm(long at, cl_int err, int sticky, const char *only) {
  memset(&F, 0, sizeof F);
  F.at = at, F.err = err, F.sticky = sticky, F.only = only;
}

static void fault_off(void) { F.at = 0; }

/* 0, or the error this call is to return.  Calls that may not return
 * CL_MEM_OBJECT_ALLOCATION_FAILURE (alloc 0) get CL_OUT_OF_RESOURCES. */
static const char *call_log[8192]; /* the functions of the counted calls, by number */

static cl_int fault(const char *name, int alloc) {
  if (F.only && strcmp(F.only, name) != 0) return 0;
  const long n = ++F.calls;
  if (n < 8192) call_log[n] = name;
  if (!F.at || n < F.at) return 0;
  if (n > F.at && !(F.sticky && F.hit && strcmp(F.hit, name) == 0)) return 0;
  cl_int e = F.err;
  if (strcmp(name, "clBuildProgram") == 0) e = CL_BUILD_PROGRAM_FAILURE;
  else if (e == CL_MEM_OBJECT_ALLOCATION_FAILURE && !alloc) e = CL_OUT_OF_RESOURCES;
  if (!F.hit) F.hit = name, F.hit_err = e;
  F.failures++;
  return e;
}

static void *real(const char *name) {
  void *p = dlsym(RTLD_NEXT, name);
  if (!p) {
    fprintf(stderr, "test_faults: no real %s: %s\n", name, dlerror());
    abort();
  }
  return p;
}

/* `r` is the real function `name` (resolved once). */
#define REAL(name)                 \
  static __typeof__(&name) r;      \
  if (!r) r = (__typeof__(&name))real(#name)

/* A retain or release: forwarded, and the live count of its kind moved by
 * `step` when it succeeds. */
#define COUNTED(name, type, kind, step)            \
  CL_API_ENTRY cl_int CL_API_CALL name(type obj) { \
    REAL(name);                                    \
    cl_int st = r(obj);                            \
    if (st == CL_SUCCESS) live[kind] += (step);    \
    return st;                                     \
  }

static void count_event(cl_int st, cl_event *ev) {
  if (st == CL_SUCCESS && ev) live[L_EVENT]++;
}

/* ---- the wrappers: platforms, contexts, queues ---- */

CL_API_ENTRY cl_int CL_API_CALL clGetPlatformIDs(cl_uint n, cl_platform_id *p, cl_uint *np) {
  REAL(clGetPlatformIDs);
  cl_int e = fault("clGetPlatformIDs", 0);
  return e ? e : r(n, p, np);
}

CL_API_ENTRY cl_int CL_API_CALL clGetDeviceIDs(cl_platform_id p, cl_device_type t, cl_uint n, cl_device_id *d,
                                               cl_uint *nd) {
  REAL(clGetDeviceIDs);
  cl_int e = fault("clGetDeviceIDs", 0);
  return e ? e : r(p, t, n, d, nd);
}

CL_API_ENTRY cl_context CL_API_CALL clCreateContext(const cl_context_properties *props, cl_uint n,
                                                    const cl_device_id *d,
                                                    void(CL_CALLBACK *fn)(const char *, const void *, size_t, void *),
                                                    void *user, cl_int *err) {
  REAL(clCreateContext);
  cl_int e = fault("clCreateContext", 0);
  if (e) {
    if (err) *err = e;
    return NULL;
  }
  cl_context c = r(props, n, d, fn, user, err);
  if (c) live[L_CONTEXT]++;
  return c;
}

COUNTED(clReleaseContext, cl_context, L_CONTEXT, -1)
CL_API_ENTRY cl_command_queue CL_API_CALL clCreateCommandQueue(cl_context c, cl_device_id d,
                                                               cl_command_queue_properties p, cl_int *err) {
  REAL(clCreateCommandQueue);
  cl_int e = fault("clCreateCommandQueue", 0);
  if (e) {
    if (err) *err = e;
    return NULL;
  }
  cl_command_queue q = r(c, d, p, err);
  if (q) live[L_QUEUE]++;
  return q;
}

COUNTED(clReleaseCommandQueue, cl_command_queue, L_QUEUE, -1)
CL_API_ENTRY cl_int CL_API_CALL clFinish(cl_command_queue q) {
  REAL(clFinish);
  cl_int e = fault("clFinish", 0);
  return e ? e : r(q);
}

CL_API_ENTRY cl_int CL_API_CALL clWaitForEvents(cl_uint n, const cl_event *ev) {
  REAL(clWaitForEvents);
  cl_int e = fault("clWaitForEvents", 0);
  return e ? e : r(n, ev);
}

/* ---- memory ---- */

CL_API_ENTRY cl_mem CL_API_CALL clCreateBuffer(cl_context c, cl_mem_flags f, size_t n, void *host, cl_int *err) {
  REAL(clCreateBuffer);
  cl_int e = fault("clCreateBuffer", 1);
  if (e) {
    if (err) *err = e;
    return NULL;
  }
  cl_mem m = r(c, f, n, host, err);
  if (m) live[L_MEM]++;
  return m;
}

COUNTED(clRetainMemObject, cl_mem, L_MEM, +1)
COUNTED(clReleaseMemObject, cl_mem, L_MEM, -1)
CL_API_ENTRY cl_int CL_API_CALL clEnqueueWriteBuffer(cl_command_queue q, cl_mem m, cl_bool block, size_t off,
                                                     size_t n, const void *p, cl_uint nw, const cl_event *w,
                                                     cl_event *ev) {
  REAL(clEnqueueWriteBuffer);
  cl_int e = fault("clEnqueueWriteBuffer", 1);
  if (e) return e;
  cl_int st = r(q, m, block, off, n, p, nw, w, ev);
  count_event(st, ev);
  return st;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueReadBuffer(cl_command_queue q, cl_mem m, cl_bool block, size_t off,
                                                    size_t n, void *p, cl_uint nw, const cl_event *w, cl_event *ev) {
  REAL(clEnqueueReadBuffer);
  cl_int e = fault("clEnqueueReadBuffer", 1);
  if (e) return e;
  cl_int st = r(q, m, block, off, n, p, nw, w, ev);
  count_event(st, ev);
  return st;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueCopyBuffer(cl_command_queue q, cl_mem a, cl_mem b, size_t ao, size_t bo,
                                                    size_t n, cl_uint nw, const cl_event *w, cl_event *ev) {
  REAL(clEnqueueCopyBuffer);
  cl_int e = fault("clEnqueueCopyBuffer", 1);
  if (e) return e;
  cl_int st = r(q, a, b, ao, bo, n, nw, w, ev);
  count_event(st, ev);
  return st;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueFillBuffer(cl_command_queue q, cl_mem m, const void *pat, size_t ps,
                                                    size_t off, size_t n, cl_uint nw, const cl_event *w,
                                                    cl_event *ev) {
  REAL(clEnqueueFillBuffer);
  cl_int e = fault("clEnqueueFillBuffer", 1);
  if (e) return e;
  cl_int st = r(q, m, pat, ps, off, n, nw, w, ev);
  count_event(st, ev);
  return st;
}

/* ---- programs and kernels ---- */

CL_API_ENTRY cl_program CL_API_CALL clCreateProgramWithSource(cl_context c, cl_uint n, const char **s,
                                                              const size_t *len, cl_int *err) {
  REAL(clCreateProgramWithSource);
  cl_int e = fault("clCreateProgramWithSource", 0);
  if (e) {
    if (err) *err = e;
    return NULL;
  }
  cl_program p = r(c, n, s, len, err);
  if (p) live[L_PROGRAM]++;
  return p;
}

CL_API_ENTRY cl_program CL_API_CALL clCreateProgramWithBinary(cl_context c, cl_uint n, const cl_device_id *d,
                                                              const size_t *len, const unsigned char **bin,
                                                              cl_int *bin_st, cl_int *err) {
  REAL(clCreateProgramWithBinary);
  cl_int e = fault("clCreateProgramWithBinary", 0);
  if (e) {
    if (err) *err = e;
    return NULL;
  }
  cl_program p = r(c, n, d, len, bin, bin_st, err);
  if (p) live[L_PROGRAM]++;
  return p;
}

CL_API_ENTRY cl_int CL_API_CALL clBuildProgram(cl_program p, cl_uint n, const cl_device_id *d, const char *opts,
                                               void(CL_CALLBACK *fn)(cl_program, void *), void *user) {
  REAL(clBuildProgram);
  cl_int e = fault("clBuildProgram", 0);
  if (e) F.failed = p;
  return e ? e : r(p, n, d, opts, fn, user);
}

CL_API_ENTRY cl_int CL_API_CALL clGetProgramBuildInfo(cl_program p, cl_device_id d, cl_program_build_info what,
                                                      size_t n, void *v, size_t *n_ret) {
  REAL(clGetProgramBuildInfo);
  if (p != F.failed || !p || (what != CL_PROGRAM_BUILD_LOG && what != CL_PROGRAM_BUILD_STATUS))
    return r(p, d, what, n, v, n_ret);
  const size_t need = what == CL_PROGRAM_BUILD_LOG ? sizeof INJECTED_LOG : sizeof(cl_build_status);
  if (n_ret) *n_ret = need;
  if (v && n < need) return CL_INVALID_VALUE;
  if (v && what == CL_PROGRAM_BUILD_LOG) memcpy(v, INJECTED_LOG, need);
  if (v && what == CL_PROGRAM_BUILD_STATUS) *(cl_build_status *)v = CL_BUILD_ERROR;
  return CL_SUCCESS;
}

COUNTED(clReleaseProgram, cl_program, L_PROGRAM, -1)
CL_API_ENTRY cl_kernel CL_API_CALL clCreateKernel(cl_program p, const char *name, cl_int *err) {
  REAL(clCreateKernel);
  cl_int e = fault("clCreateKernel", 0);
  if (e) {
    if (err) *err = e;
    return NULL;
  }
  cl_kernel k = r(p, name, err);
  if (k) live[L_KERNEL]++;
  return k;
}

COUNTED(clReleaseKernel, cl_kernel, L_KERNEL, -1)
CL_API_ENTRY cl_int CL_API_CALL clSetKernelArg(cl_kernel k, cl_uint i, size_t n, const void *v) {
  REAL(clSetKernelArg);
  cl_int e = fault("clSetKernelArg", 0);
  return e ? e : r(k, i, n, v);
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint dims,
                                                       const size_t *off, const size_t *global, const size_t *local,
                                                       cl_uint nw, const cl_event *w, cl_event *ev) {
  REAL(clEnqueueNDRangeKernel);
  cl_int e = fault("clEnqueueNDRangeKernel", 1);
  if (e) return e;
  cl_int st = r(q, k, dims, off, global, local, nw, w, ev);
  count_event(st, ev);
  return st;
}

/* ---- events ---- */

CL_API_ENTRY cl_int CL_API_CALL clEnqueueMarkerWithWaitList(cl_command_queue q, cl_uint nw, const cl_event *w,
                                                            cl_event *ev) {
  REAL(clEnqueueMarkerWithWaitList);
  cl_int e = fault("clEnqueueMarkerWithWaitList", 0);
  if (e) return e;
  cl_int st = r(q, nw, w, ev);
  count_event(st, ev);
  return st;
}

COUNTED(clRetainEvent, cl_event, L_EVENT, +1)
COUNTED(clReleaseEvent, cl_event, L_EVENT, -1)
/* ---- one run: a context, a model load, a forward pass (and generation) ---- */

/* A model and what is run on it: forward case `fwd` of its fixture
 * (compared at the fixture's tolerance, 1e-4 x max(1, max |expected|)) and,
 * when gen_tokens > 0, greedy generation of that many tokens from the
 * prompt of generate case "greedy_b1" (compared exactly with the first
 * tokens of its expected sequence). */
typedef struct model_case {
  const char *fixture, *fwd; /* fixture NULL: the GEMMs of run_gemms instead */
  const char *outputs[2];
  size_t n_out, gen_tokens;
} model_case;

static const model_case BERT = {"bert", "ids_only", {"last_hidden_state", "pooler_output"}, 2, 0};
static const model_case GPT2 = {"gpt2", "ids_only", {"logits", NULL}, 1, 2};
static const model_case GEMM = {NULL, NULL, {NULL, NULL}, 0, 0};
#define NAME(mc) ((mc)->fixture ? (mc)->fixture : "gemm")

/* The tiny fixtures' linear layers take the skinny kernel and their
 * attention the fused one, so CLBlast is driven here: C = A B^T on its
 * direct path (16 x 24 x 40) and on its indirect path (352^3, above the
 * shipped PoCL profiles' XGEMM_MIN_INDIRECT_SIZE of 335 and 167: pad and
 * transpose kernels and a temporary buffer from the context's scratch),
 * compared with a double-precision CPU product at 1e-5 x max(1, max |C|)
 * (f32 sums of <= 352 products of values in [-1, 1]: ~1e-6 expected). */
static const size_t gemm_dims[2][3] = {{16, 24, 40}, {352, 352, 352}};
static float *gemm_ref[2], *gemm_a[2], *gemm_b[2];

static clf_status run_gemm(clf_context *ctx, int g) {
  const size_t M = gemm_dims[g][0], N = gemm_dims[g][1], K = gemm_dims[g][2];
  if (!gemm_ref[g]) {
    gemm_a[g] = th_rand(M * K, 11 + g, -1, 1), gemm_b[g] = th_rand(N * K, 21 + g, -1, 1);
    gemm_ref[g] = malloc(M * N * sizeof(float));
    for (size_t i = 0; i < M; i++)
      for (size_t j = 0; j < N; j++) {
        double acc = 0;
        for (size_t k = 0; k < K; k++) acc += (double)gemm_a[g][i * K + k] * gemm_b[g][j * K + k];
        gemm_ref[g][i * N + j] = (float)acc;
      }
  }
  clf_tensor *a = NULL, *b = NULL, *c = NULL;
  clf_status st = clf_tensor_from_f32(ctx, CLF_F32, 2, TH_SHAPE(M, K), gemm_a[g], &a);
  if (st == CLF_OK) st = clf_tensor_from_f32(ctx, CLF_F32, 2, TH_SHAPE(N, K), gemm_b[g], &b);
  if (st == CLF_OK) st = clf_tensor_create(ctx, CLF_F32, 2, TH_SHAPE(M, N), &c);
  if (st == CLF_OK) st = clf_gemm(ctx, 0, 1, 1.0f, a, b, 0.0f, c, NULL);
  float *got = malloc(M * N * sizeof(float));
  if (st == CLF_OK) st = clf_tensor_download(ctx, c, got, M * N * sizeof(float));
  if (st == CLF_OK) {
    const double scale = fmax(1.0, th_max_abs(gemm_ref[g], M * N));
    const double err = th_max_abs_diff(got, gemm_ref[g], M * N);
    ck_assert_msg(err <= 1e-5 * scale, "gemm %zu x %zu x %zu: max abs error %.3g", M, N, K, err);
  }
  free(got);
  clf_tensor_destroy(a), clf_tensor_destroy(b), clf_tensor_destroy(c);
  return st;
}

static void npy(const model_case *mc, const char *cs, const char *name, clf_array *a) {
  char p[1200];
  snprintf(p, sizeof p, "%s/%s/%s.%s.npy", fixtures(), mc->fixture, cs, name);
  ck_assert_msg(clf_npy_read(p, a) == CLF_OK, "%s", clf_last_error(NULL));
  snprintf(a->name, sizeof a->name, "%s", name);
}

/* Loads mc on ctx and runs it: CLF_OK with the outputs checked, or the
 * first failure's status (recorded on ctx). */
static clf_status run_model(clf_context *ctx, const model_case *mc) {
  if (!mc->fixture) {
    clf_status st = run_gemm(ctx, 0);
    return st == CLF_OK ? run_gemm(ctx, 1) : st;
  }
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/%s", fixtures(), mc->fixture);
  clf_model *m = NULL;
  clf_status st = clf_model_load(ctx, dir, &m);
  if (st != CLF_OK) {
    ck_assert_ptr_null(m);
    return st;
  }
  clf_array in, exp[2], got[2];
  npy(mc, mc->fwd, "input_ids", &in);
  st = clf_model_run(m, &in, 1, mc->outputs, mc->n_out, got);
  for (size_t o = 0; o < mc->n_out; o++) {
    npy(mc, mc->fwd, mc->outputs[o], &exp[o]);
    if (st == CLF_OK) {
      const size_t n = clf_array_numel(&exp[o]);
      ck_assert_uint_eq(clf_array_numel(&got[o]), n);
      const double scale = fmax(1.0, th_max_abs(exp[o].data, n));
      const double err = th_max_abs_diff(got[o].data, exp[o].data, n);
      ck_assert_msg(err <= 1e-4 * scale, "%s %s: max abs error %.3g > 1e-4 x %.3g", mc->fixture,
                    mc->outputs[o], err, scale);
      clf_array_free(&got[o]);
    }
    clf_array_free(&exp[o]);
  }
  clf_array_free(&in);
  if (st == CLF_OK && mc->gen_tokens) {
    clf_array prompt, want, seq;
    npy(mc, "greedy_b1", "input_ids", &prompt);
    npy(mc, "greedy_b1", "sequences", &want);
    clf_generate_options o;
    clf_generate_options_init(&o);
    o.max_new_tokens = mc->gen_tokens;
    st = clf_model_generate(m, &prompt, NULL, &o, &seq);
    if (st == CLF_OK) {
      const size_t len = prompt.shape[1] + mc->gen_tokens;
      ck_assert_uint_eq(seq.shape[1], len);
      ck_assert_msg(memcmp(seq.data, want.data, len * sizeof(int64_t)) == 0, "%s: generated tokens differ",
                    mc->fixture);
      clf_array_free(&seq);
    }
    clf_array_free(&prompt);
    clf_array_free(&want);
  }
  clf_model_destroy(m);
  return st;
}

/* ---- what every faulted run must satisfy ---- */

static void snapshot(long *out) { memcpy(out, live, sizeof live); }

/* Every kind of OpenCL object is back to its count in `before`.  CLBlast
 * keeps the programs it built (per cl_context) until its cache is cleared. */
static void assert_no_leak(const long *before, const char *what, int clear_clblast) {
  if (clear_clblast) CLBlastClearCache();
  for (int k = 0; k < L_KINDS; k++)
    ck_assert_msg(live[k] == before[k], "%s: %ld OpenCL %s left alive", what, live[k] - before[k], live_name[k]);
}

/* A failed run's error: the status fits the injected error and the message
 * names the call that failed or the error. */
static void assert_reported(clf_status st, const clf_context *ctx, const char *what) {
  const char *msg = clf_last_error(ctx);
  char code[32];
  snprintf(code, sizeof code, "(%d)", (int)F.hit_err);
  ck_assert_msg(st != CLF_OK, "%s: no failure", what);
  ck_assert_msg(strstr(msg, F.hit) || strstr(msg, clf_cl_error_name(F.hit_err)) || strstr(msg, code),
                "%s: %s failed with %s, but the error names neither: %s: %s", what, F.hit,
                clf_cl_error_name(F.hit_err), clf_status_name(st), msg);
  ck_assert_msg(clf_last_cl_error(ctx) == F.hit_err, "%s: clf_last_cl_error is %d, the injected error %d (%s)",
                what, (int)clf_last_cl_error(ctx), (int)F.hit_err, msg);
  if (F.hit_err == CL_BUILD_PROGRAM_FAILURE)
    ck_assert_msg(st == CLF_E_BUILD || st == CLF_E_BLAS, "%s: %s", what, clf_status_name(st));
  else
    ck_assert_msg(st == CLF_E_OUT_OF_MEMORY, "%s: %s for %s", what, clf_status_name(st),
                  clf_cl_error_name(F.hit_err));
  if (F.hit_err == CL_BUILD_PROGRAM_FAILURE && st == CLF_E_BUILD) {
    ck_assert_msg(strstr(msg, INJECTED_LOG) != NULL, "%s: the build log is not in \"%s\"", what, msg);
    ck_assert_str_eq(clf_last_build_log(ctx), INJECTED_LOG);
  }
}

static const cl_int kErrors[3] = {CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_OUT_OF_RESOURCES, CL_OUT_OF_HOST_MEMORY};

/* One faulted run: with `warm` NULL, a fresh context is created, the model
 * loaded and run (every program built on the way); with `warm`, a context
 * that has run the model before (its programs built), the model is loaded
 * and run on it.  Fallible call n fails (0: none).  Asserts that a failure
 * is reported as above, that the same context then loads and runs the
 * model right with no fault, and that no OpenCL object is left alive
 * beyond those that `warm` held before.  Returns the calls made. */
static long faulted_run(const model_case *mc, clf_context *warm, long n) {
  long before[L_KINDS];
  char what[200];
  snapshot(before);
  fault_arm(n, kErrors[n % 3], 0, NULL);
  clf_context *ctx = warm;
  clf_status st = warm ? CLF_OK : clf_context_create(NULL, &ctx);
  if (st == CLF_OK) st = run_model(ctx, mc);
  fault_off();
  const long calls = F.calls;
  snprintf(what, sizeof what, "%s (%s), call %ld (%s) failing", NAME(mc), warm ? "warm" : "cold", n,
           F.hit ? F.hit : "none");
  if (st != CLF_OK) {
    ck_assert_msg(F.hit != NULL, "%s: failed with no fault: %s", what, clf_last_error(ctx));
    assert_reported(st, ctx, what);
  }
  if (ctx) {
    clf_clear_error(ctx);
    st = run_model(ctx, mc);
    ck_assert_msg(st == CLF_OK, "%s: the context cannot run the model afterwards: %s: %s", what,
                  clf_status_name(st), clf_last_error(ctx));
    if (!warm) clf_context_destroy(ctx);
  }
  assert_no_leak(before, what, !warm);
  return calls;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The calls that only a cold run makes, or makes differently: enumeration,
 * context, queue, programs, builds, kernels and buffers (weights, scratch
 * growth).  Every other call (kernel arguments, launches, transfers) is the
 * same in a warm run, where it is swept. */
static int cold_call(const char *fn) {
  static const char *const cold[] = {"clGetPlatformIDs", "clGetDeviceIDs", "clCreateContext",
                                     "clCreateCommandQueue", "clCreateBuffer", "clCreateProgramWithSource",
                                     "clCreateProgramWithBinary", "clBuildProgram", "clCreateKernel"};
  for (size_t i = 0; i < sizeof cold / sizeof *cold; i++)
    if (strcmp(fn, cold[i]) == 0) return 1;
  return 0;
}

/* Cold: every N of a clean cold run whose call is a cold_call (with
 * cold_all, every N), each on a fresh context.  Warm: every stride-th N of
 * a clean warm run. */
static void sweep(const model_case *mc, int cold_all, long warm_stride) {
  double t0 = now_s();
  long before[L_KINDS], runs = 0, fired = 0;
  snapshot(before);
  const long cold_total = faulted_run(mc, NULL, 0);
  ck_assert_int_gt(cold_total, 10);
  ck_assert_int_lt(cold_total, 8192);
  const char *cold_log[8192];
  memcpy(cold_log, call_log, sizeof cold_log);
  const int show = getenv("CLF_FAULT_LOG") != NULL; /* for debugging: list the calls */
  for (long n = 1; n <= cold_total; n++) {
    if (show) printf("cold %ld %s\n", n, cold_log[n]);
    if (show || !(cold_all || cold_call(cold_log[n]))) continue;
    faulted_run(mc, NULL, n);
    runs++, fired += F.failures > 0;
  }
  ck_assert_int_eq(fired, runs);
  printf("%s cold: %ld fallible OpenCL calls; %ld of them (%s) failed in turn, %.1f s\n", NAME(mc), cold_total,
         runs, cold_all ? "all" : "those that create or build", now_s() - t0);
  t0 = now_s();
  clf_context *warm;
  TH_OK(clf_context_create(NULL, &warm));
  TH_OK(run_model(warm, mc));
  const long warm_total = faulted_run(mc, warm, 0);
  runs = fired = 0;
  for (long n = 1; n <= warm_total; n += warm_stride) {
    if (show) printf("warm %ld %s\n", n, call_log[n]);
    if (show) continue;
    faulted_run(mc, warm, n);
    runs++, fired += F.failures > 0;
  }
  ck_assert_int_eq(fired, runs);
  clf_context_destroy(warm);
  assert_no_leak(before, NAME(mc), 1);
  printf("%s warm: %ld fallible OpenCL calls; every %ld%s failed in turn, %.1f s\n", NAME(mc), warm_total,
         warm_stride, warm_stride == 1 ? "" : "th", now_s() - t0);
}

START_TEST(sweep_bert) { sweep(&BERT, 0, 1); }
END_TEST

/* A kernel program that does not compile: every clBuildProgram fails (so
 * the library's one retry fails too) with a log.  The forward pass fails
 * with CLF_E_BUILD carrying the log; the family stays failed for the
 * context's life (a compiler's verdict is final: the same error and log
 * again, with no fault armed), and a new context runs the model. */
START_TEST(build_failure_is_reported_and_remembered) {
  long before[L_KINDS];
  snapshot(before);
  clf_context *ctx;
  TH_OK(clf_context_create(NULL, &ctx));
  fault_arm(1, CL_OUT_OF_HOST_MEMORY, 1, "clBuildProgram");
  clf_status st = run_model(ctx, &BERT);
  fault_off();
  ck_assert_int_ge(F.failures, 2); /* built, and built once more */
  assert_reported(st, ctx, "bert, every build failing");
  ck_assert_int_eq(st, CLF_E_BUILD);
  char first[1024];
  snprintf(first, sizeof first, "%s", clf_last_error(ctx));
  ck_assert_msg(strstr(first, "kernel program \"") != NULL, "%s", first); /* names the family */
  clf_clear_error(ctx);
  ck_assert_int_eq(run_model(ctx, &BERT), CLF_E_BUILD);
  ck_assert_str_eq(clf_last_error(ctx), first);
  ck_assert_str_eq(clf_last_build_log(ctx), INJECTED_LOG);
  ck_assert_int_eq(clf_last_cl_error(ctx), CL_BUILD_PROGRAM_FAILURE);
  clf_context_destroy(ctx);
  assert_no_leak(before, "bert, every build failing", 1);
  TH_OK(clf_context_create(NULL, &ctx));
  TH_OK(run_model(ctx, &BERT));
  clf_context_destroy(ctx);
  assert_no_leak(before, "bert on a new context", 1);
}
END_TEST

/* Issue 11, defect 10: one build failing once (PoCL's cache raced by a
 * cold start under concurrency failed 1 start in 64, and the failure was
 * remembered for good) is built once more and the model runs right, on a
 * fresh context whose first kernel build is the one failed. */
START_TEST(transient_build_failure_is_retried) {
  long before[L_KINDS];
  snapshot(before);
  clf_context *ctx;
  TH_OK(clf_context_create(NULL, &ctx));
  fault_arm(1, CL_OUT_OF_HOST_MEMORY, 0, "clBuildProgram");
  clf_status st = run_model(ctx, &BERT);
  fault_off();
  ck_assert_int_eq(F.failures, 1);
  ck_assert_msg(st == CLF_OK, "a build that failed once: %s", clf_last_error(ctx));
  TH_OK(run_model(ctx, &BERT)); /* nothing was remembered as failed */
  clf_context_destroy(ctx);
  assert_no_leak(before, "bert, one build failing once", 1);
}
END_TEST

/* CLBlast's own program failing to build (after a clean run and CLBlast's
 * cache cleared, its program is the one built): CLF_E_BLAS naming CLBlast's status and the OpenCL code;
 * CLBlast keeps no failure, so the same context runs the model afterwards. */
START_TEST(clblast_build_failure_is_reported) {
  long before[L_KINDS];
  snapshot(before);
  clf_context *ctx;
  TH_OK(clf_context_create(NULL, &ctx));
  TH_OK(run_model(ctx, &GEMM));
  CLBlastClearCache();
  fault_arm(1, CL_OUT_OF_HOST_MEMORY, 1, "clBuildProgram");
  clf_status st = run_model(ctx, &GEMM);
  fault_off();
  ck_assert_int_ge(F.failures, 1);
  assert_reported(st, ctx, "gemm, CLBlast's build failing");
  ck_assert_int_eq(st, CLF_E_BLAS);
  ck_assert_msg(strstr(clf_last_error(ctx), "kOpenCLBuildProgramFailure (-11)") != NULL, "%s", clf_last_error(ctx));
  TH_OK(run_model(ctx, &GEMM));
  clf_context_destroy(ctx);
  assert_no_leak(before, "gemm, CLBlast's build failing", 1);
}
END_TEST

START_TEST(sweep_gpt2) { sweep(&GPT2, 0, 1); }
END_TEST

START_TEST(sweep_gemm) { sweep(&GEMM, 1, 1); }
END_TEST

int main(void) {
  Suite *s = suite_create("faults");
  TCase *tc = tcase_create("sweep");
  tcase_add_test(tc, build_failure_is_reported_and_remembered);
  tcase_add_test(tc, transient_build_failure_is_retried);
  tcase_add_test(tc, clblast_build_failure_is_reported);
  tcase_add_test(tc, sweep_bert);
  tcase_add_test(tc, sweep_gpt2);
  tcase_add_test(tc, sweep_gemm);
  suite_add_tcase(s, tc);
  int rc = th_run(s);
  free_models();
  return rc;
}
