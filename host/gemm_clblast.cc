// gemm_clblast.cc - every GEMM of clformer goes through CLBlast, here.
//
// The C++ API is used (not clblast_c.h) because only it takes a caller's
// temporary buffer for GEMM: CLBlast otherwise allocates one inside every
// call that pads or transposes, and a forward pass must not allocate.  The
// context's scratch slot grows to the largest size asked once, then is reused.
#include <clblast.h>

#include "internal.h"

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
  if (code < 0 && code > -100) ctx->err_cl = code;  // an OpenCL error code
  return st;
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
  const Transpose ta = trans_a ? Transpose::kYes : Transpose::kNo;
  const Transpose tb = trans_b ? Transpose::kYes : Transpose::kNo;
  clblast::StatusCode s;
  if (batch == 1) {
    size_t temp_size = 0;
    s = clblast::GemmTempBufferSize<float>(Layout::kRowMajor, ta, tb, m, n, k, a_off, lda, b_off, ldb, c_off, ldc,
                                           &ctx->queue, temp_size);
    if (s != clblast::StatusCode::kSuccess) return fail_blas(ctx, s, "GemmTempBufferSize", m, n, k, batch);
    cl_mem temp = nullptr;
    if (temp_size > 0) {
      clf_status st = clf__scratch(ctx, CLF__SCRATCH_GEMM, temp_size, &temp);
      if (st != CLF_OK) return st;
    }
    s = clblast::Gemm<float>(Layout::kRowMajor, ta, tb, m, n, k, alpha, a, a_off, lda, b, b_off, ldb, beta, c, c_off,
                             ldc, &ctx->queue, event, temp);
    if (s != clblast::StatusCode::kSuccess) return fail_blas(ctx, s, "Gemm", m, n, k, batch);
    return CLF_OK;
  }
  s = clblast::GemmStridedBatched<float>(Layout::kRowMajor, ta, tb, m, n, k, alpha, a, a_off, lda, stride_a, b, b_off,
                                         ldb, stride_b, beta, c, c_off, ldc, stride_c, batch, &ctx->queue, event);
  if (s != clblast::StatusCode::kSuccess) return fail_blas(ctx, s, "GemmStridedBatched", m, n, k, batch);
  return CLF_OK;
}
