// tune.cc - CLBlast GEMM parameter search and the per-device profile.
// (Skeleton: filled in by the tuning work.)
#include "internal.h"

extern "C" void clf__gemm_profile_apply(clf_context *ctx) { (void)ctx; }

extern "C" const char *clf_context_gemm_profile(const clf_context *ctx) { return ctx ? ctx->gemm_profile : nullptr; }

extern "C" clf_status clf_model_gemm_shapes(const char *model_dir, size_t tokens, clf_gemm_shape *out,
                                           size_t capacity, size_t *count) {
  (void)model_dir; (void)tokens; (void)out; (void)capacity;
  if (count) *count = 0;
  return clf__fail(nullptr, CLF_E_UNSUPPORTED, "clf_model_gemm_shapes: not implemented yet");
}

extern "C" clf_status clf_tune_gemm(clf_context *ctx, const clf_gemm_shape *shapes, size_t n,
                                   const clf_tune_options *opts, clf_tune_result *per_shape,
                                   clf_tune_report *report) {
  (void)shapes; (void)n; (void)opts; (void)per_shape; (void)report;
  return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_tune_gemm: not implemented yet");
}
