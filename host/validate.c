/* validate.c - self-validation of kernel variants and the cached verdicts.
 * (Skeleton: filled in by the self-validation work.) */
#include "internal.h"

void clf__verdicts_load(clf_context *ctx) { CLF__UNUSED(ctx); }
void clf__verdicts_free(clf_context *ctx) { CLF__UNUSED(ctx); }

clf_status clf_validate(clf_context *ctx, clf_variant_result *out, size_t capacity, size_t *count) {
  CLF__UNUSED(out);
  CLF__UNUSED(capacity);
  if (count) *count = 0;
  return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_validate: not implemented yet");
}

int clf_variant_disabled(const clf_context *ctx, const char *name) {
  CLF__UNUSED(ctx);
  CLF__UNUSED(name);
  return 0;
}
