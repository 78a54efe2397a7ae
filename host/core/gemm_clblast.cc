// gemm_clblast.cc - every GEMM of clformer goes through CLBlast, here.
//
// The C++ API is used (not clblast_c.h) because only it takes a caller's
// temporary buffer for GEMM: CLBlast otherwise allocates one inside every
// call that pads or transposes, and a forward pass must not allocate.  The
// context's scratch slot grows to the largest size asked once, then is reused.
//
// Batched GEMM: CLBlast's GemmStridedBatched is used only where CLBlast runs
// its "direct" kernel (small m*n*k).  On its "indirect" path CLBlast 1.5.3
// allocates temporaries inside the call, and, for an operand that needs no
// padding copy, its kernel assumes offset 0 and a packed batch stride: a
// stride of 0 (a shared B), a padded stride or a view offset then give wrong
// results (checked in tests/test_dense.c).  There each batch runs as one Gemm
// with the scratch temp buffer; each of those GEMMs is large by definition.
// K = 0 (C = beta C, which CLBlast rejects) runs a small kernel instead.
//
// The callers speak row-major; CLBlast is called column-major with the
// operands swapped (row-major C = op(A) op(B) is column-major
// C = op(B)' op(A)' over the same memory).  CLBlast's Xgemm kernel (GEMMK
// 0) wants its A not rotated, its B rotated and its C not rotated: in
// row-major terms every operand of every call needs a pad/transpose copy,
// column-major C needs none, and a weight stored [in, out]
// (CLF_WEIGHT_IN_OUT) needs none either, leaving only the activations' copy
// (tests/test_dense.c; docs/performance.md has the measured effect).
#include <clblast.h>

#include "core.h"

namespace {

const char *status_name(clblast::StatusCode s) {
  switch (s) {
    case clblast::StatusCode::kSuccess: return "kSuccess";
    case clblast::StatusCode::kOpenCLCompilerNotAvailable: return "kOpenCLCompilerNotAvailable";
    case clblast::StatusCode::kTempBufferAllocFailure: return "kTempBufferAllocFailure";
    case clblast::StatusCode::kOpenCLOutOfResources: return "kOpenCLOutOfResources";
    case clblast::StatusCode::kOpenCLOutOfHostMemory: return "kOpenCLOutOfHostMemory";
    case clblast::StatusCode::kOpenCLBuildProgramFailure: return "kOpenCLBuildProgramFailure";
    case clblast::StatusCode::kInvalidValue: return "kInvalidValue";
    case clblast::StatusCode::kInvalidCommandQueue: return "kInvalidCommandQueue";
    case clblast::StatusCode::kInvalidMemObject: return "kInvalidMemObject";
    case clblast::StatusCode::kInvalidBinary: return "kInvalidBinary";
    case clblast::StatusCode::kInvalidBuildOptions: return "kInvalidBuildOptions";
    case clblast::StatusCode::kInvalidProgram: return "kInvalidProgram";
    case clblast::StatusCode::kInvalidProgramExecutable: return "kInvalidProgramExecutable";
    case clblast::StatusCode::kInvalidKernelName: return "kInvalidKernelName";
    case clblast::StatusCode::kInvalidKernelDefinition: return "kInvalidKernelDefinition";
    case clblast::StatusCode::kInvalidKernel: return "kInvalidKernel";
    case clblast::StatusCode::kInvalidArgIndex: return "kInvalidArgIndex";
    case clblast::StatusCode::kInvalidArgValue: return "kInvalidArgValue";
    case clblast::StatusCode::kInvalidArgSize: return "kInvalidArgSize";
    case clblast::StatusCode::kInvalidKernelArgs: return "kInvalidKernelArgs";
    case clblast::StatusCode::kInvalidLocalNumDimensions: return "kInvalidLocalNumDimensions";
    case clblast::StatusCode::kInvalidLocalThreadsTotal: return "kInvalidLocalThreadsTotal";
    case clblast::StatusCode::kInvalidLocalThreadsDim: return "kInvalidLocalThreadsDim";
    case clblast::StatusCode::kInvalidGlobalOffset: return "kInvalidGlobalOffset";
    case clblast::StatusCode::kInvalidEventWaitList: return "kInvalidEventWaitList";
    case clblast::StatusCode::kInvalidEvent: return "kInvalidEvent";
    case clblast::StatusCode::kInvalidOperation: return "kInvalidOperation";
    case clblast::StatusCode::kInvalidBufferSize: return "kInvalidBufferSize";
    case clblast::StatusCode::kInvalidGlobalWorkSize: return "kInvalidGlobalWorkSize";
    case clblast::StatusCode::kNotImplemented: return "kNotImplemented";
    case clblast::StatusCode::kInvalidMatrixA: return "kInvalidMatrixA";
    case clblast::StatusCode::kInvalidMatrixB: return "kInvalidMatrixB";
    case clblast::StatusCode::kInvalidMatrixC: return "kInvalidMatrixC";
    case clblast::StatusCode::kInsufficientMemoryA: return "kInsufficientMemoryA";
    case clblast::StatusCode::kInsufficientMemoryB: return "kInsufficientMemoryB";
    case clblast::StatusCode::kInsufficientMemoryC: return "kInsufficientMemoryC";
    case clblast::StatusCode::kInsufficientMemoryTemp: return "kInsufficientMemoryTemp";
    case clblast::StatusCode::kInvalidBatchCount: return "kInvalidBatchCount";
    case clblast::StatusCode::kInvalidOverrideKernel: return "kInvalidOverrideKernel";
    case clblast::StatusCode::kMissingOverrideParameter: return "kMissingOverrideParameter";
    case clblast::StatusCode::kInvalidLocalMemUsage: return "kInvalidLocalMemUsage";
    case clblast::StatusCode::kNoHalfPrecision: return "kNoHalfPrecision";
    case clblast::StatusCode::kNoDoublePrecision: return "kNoDoublePrecision";
    case clblast::StatusCode::kUnknownError: return "kUnknownError";
    default: return "unknown CLBlast status";
  }
}

clf_status fail_blas(clf_context *ctx, clblast::StatusCode s, const char *call, size_t m, size_t n, size_t k,
                     size_t batch) {
  int code = static_cast<int>(s);
  clf_status st = CLF_E_BLAS;
  if (s == clblast::StatusCode::kTempBufferAllocFailure || s == clblast::StatusCode::kOpenCLOutOfResources ||
      s == clblast::StatusCode::kOpenCLOutOfHostMemory)
    st = CLF_E_OUT_OF_MEMORY;
  clf__fail(ctx, st, "CLBlast %s (m=%zu n=%zu k=%zu batch=%zu) failed: %s (%d)", call, m, n, k, batch,
            status_name(s), code);
  if (code < 0 && code > -100) ctx->err.cl = code;  // an OpenCL error code
  return st;
}

// C = beta C for a GEMM with K = 0 (kernel gemm_beta of kernels/elementwise.cl).
clf_status gemm_beta_only(clf_context *ctx, size_t m, size_t n, float beta, cl_mem c, size_t c_off, size_t ldc,
                          size_t stride_c, size_t batch, cl_event *event) {
  if (batch * m * n > 0xFFFFFFFFu || c_off > 0xFFFFFFFFu || ldc > 0xFFFFFFFFu || stride_c > 0xFFFFFFFFu)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "gemm with k=0: C of %zu x %zu x %zu is too large for 32-bit indexing",
                     batch, m, n);
  clf__kernel *kern;
  clf_status st = clf__get_kernel(ctx, "elementwise", nullptr, "gemm_beta", &kern);
  if (st != CLF_OK) return st;
  const cl_uint off = static_cast<cl_uint>(c_off), m32 = static_cast<cl_uint>(m), n32 = static_cast<cl_uint>(n),
                ld32 = static_cast<cl_uint>(ldc), s32 = static_cast<cl_uint>(stride_c),
                b32 = static_cast<cl_uint>(batch);
  st = clf__set_args(ctx, kern, 8, CLF__ARG(c), CLF__ARG(off), CLF__ARG(m32), CLF__ARG(n32), CLF__ARG(ld32),
                     CLF__ARG(s32), CLF__ARG(b32), CLF__ARG(beta));
  if (st != CLF_OK) return st;
  const size_t local = clf__wg_1d(ctx, kern, 256), global = batch * m * n;
  return clf__launch(ctx, kern, 1, &global, &local, event);
}

}  // namespace

extern "C" clf_status clf__sgemm(clf_context *ctx, int trans_a, int trans_b, size_t m, size_t n, size_t k,
                                 float alpha, cl_mem a, size_t a_off, size_t lda, size_t stride_a, cl_mem b,
                                 size_t b_off, size_t ldb, size_t stride_b, float beta, cl_mem c, size_t c_off,
                                 size_t ldc, size_t stride_c, size_t batch, cl_event *event) {
  using clblast::Layout;
  using clblast::Transpose;
  if (m == 0 || n == 0 || batch == 0) {
    if (event) {
      cl_int err = clEnqueueMarkerWithWaitList(ctx->queue, 0, nullptr, event);
      if (err != CL_SUCCESS) return clf__fail_cl(ctx, err, "clEnqueueMarkerWithWaitList", "gemm");
    }
    return CLF_OK;
  }
  if (k == 0) return gemm_beta_only(ctx, m, n, beta, c, c_off, ldc, stride_c, batch, event);
  const Transpose ta = trans_a ? Transpose::kYes : Transpose::kNo;
  const Transpose tb = trans_b ? Transpose::kYes : Transpose::kNo;
  clblast::StatusCode s;
  // Which path CLBlast takes: with its A at offset 1 its indirect path always
  // needs a temporary buffer and its direct path never does.  Asked for
  // batches, and for every call once self-validation failed a GEMM variant.
  const int ask_path = batch > 1 || clf__variants_failed(ctx);
  size_t probe = 0;
  if (ask_path) {
    s = clblast::GemmTempBufferSize<float>(Layout::kColMajor, tb, ta, n, m, k, 1, ldb, 0, lda, 0, ldc, &ctx->queue,
                                           probe);
    if (s != clblast::StatusCode::kSuccess) return fail_blas(ctx, s, "GemmTempBufferSize", m, n, k, batch);
  }
  int use = 1;  // the path's variant passed (or was never validated)
  if (ask_path) {
    // The per-batch Gemm below is the alternative of the strided batch; a
    // failed single GEMM path has none.
    clf_status st = clf__variant_pick(ctx, "gemm", probe == 0 ? "gemm.clblast direct" : "gemm.clblast indirect",
                                      nullptr, &use);
    if (st != CLF_OK) return st;
  }
  if (batch > 1) {
    if (probe == 0) {
      clf_status st = clf__variant_pick(ctx, "gemm", "gemm.clblast direct batched", "gemm.clblast direct", &use);
      if (st != CLF_OK) return st;
    }
    if (probe == 0 && use) {
      cl_event mine = nullptr, *ev = clf__prof_event(ctx, event, &mine);
      clf__prof_mark(ctx);
      s = clblast::GemmStridedBatched<float>(Layout::kColMajor, tb, ta, n, m, k, alpha, b, b_off, ldb, stride_b, a,
                                             a_off, lda, stride_a, beta, c, c_off, ldc, stride_c, batch, &ctx->queue,
                                             ev);
      if (s != clblast::StatusCode::kSuccess) return fail_blas(ctx, s, "GemmStridedBatched", m, n, k, batch);
      clf__prof_note(ctx, "clblast_gemm_batched", event, &mine);
      return CLF_OK;
    }
  }
  // One Gemm per batch index, all sharing the scratch temp buffer (the
  // queue is in order).  The offsets of later batches differ only where
  // batch > 1, and the temp size depends on them only through "offset 0 or
  // not": take the largest over the first two batches.
  size_t temp_size = 0;
  for (size_t i = 0; i < (batch > 1 ? 2 : 1); i++) {
    size_t t = 0;
    s = clblast::GemmTempBufferSize<float>(Layout::kColMajor, tb, ta, n, m, k, b_off + i * stride_b, ldb,
                                           a_off + i * stride_a, lda, c_off + i * stride_c, ldc, &ctx->queue, t);
    if (s != clblast::StatusCode::kSuccess) return fail_blas(ctx, s, "GemmTempBufferSize", m, n, k, batch);
    if (t > temp_size) temp_size = t;
  }
  cl_mem temp = nullptr;
  if (temp_size > 0) {
    clf_status st = clf__scratch(ctx, CLF__SCRATCH_GEMM, temp_size, &temp);
    if (st != CLF_OK) return st;
  }
  for (size_t i = 0; i < batch; i++) {
    // While profiling, a marker before the call: CLBlast's event is its
    // last kernel's, and the pad/transpose kernels before it count too.
    cl_event mine = nullptr, *ev = clf__prof_event(ctx, i + 1 == batch ? event : nullptr, &mine);
    clf__prof_mark(ctx);
    s = clblast::Gemm<float>(Layout::kColMajor, tb, ta, n, m, k, alpha, b, b_off + i * stride_b, ldb, a,
                             a_off + i * stride_a, lda, beta, c, c_off + i * stride_c, ldc, &ctx->queue, ev, temp);
    if (s != clblast::StatusCode::kSuccess) return fail_blas(ctx, s, "Gemm", m, n, k, batch);
    clf__prof_note(ctx, "clblast_gemm", i + 1 == batch ? event : nullptr, &mine);
  }
  return CLF_OK;
}
