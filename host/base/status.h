/* status.h - the bottom layer: status helpers every other layer uses.
 *
 * Recording an error (on a context or, before one exists, on the calling
 * thread), OpenCL error names, dtype names and sizes, and the small macros
 * all of host/ shares.  It knows nothing of the context's layout beyond
 * its first member, the error record below.
 */
#ifndef CLF_BASE_STATUS_H
#define CLF_BASE_STATUS_H

#include "clformer.h"

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CLF__UNUSED(x) ((void)(x))
#define CLF__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* The detailed last error.  struct clf_context starts with one, so the
 * helpers here reach it through a pointer cast (a pointer to a struct points
 * to its first member, C11 6.7.2.1p15) without depending on the layer that
 * defines the context. */
typedef struct clf__errstate {
  clf_status status;
  cl_int cl;
  char msg[1024];
  char *log; /* the compiler's build log, or NULL */
} clf__errstate;

/* The error record of ctx (NULL: the calling thread's). */
clf__errstate *clf__err(const clf_context *ctx);

/* Records a failure on ctx (or the thread's slot when ctx is NULL) and
 * returns `status`, so callers can `return clf__fail(...)`. */
clf_status clf__fail(clf_context *ctx, clf_status status, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Records an OpenCL failure: "clEnqueueNDRangeKernel(layer_norm) failed:
 * CL_OUT_OF_RESOURCES (-5)".  Maps allocation failures to
 * CLF_E_OUT_OF_MEMORY and the rest to CLF_E_OPENCL. */
clf_status clf__fail_cl(clf_context *ctx, cl_int err, const char *call, const char *what);
void clf__set_build_log(clf_context *ctx, const char *log);

/* The short name of a weight storage type ("f32", "f16", "q8", "q4",
 * "q4k", "q6k"), as --weights and clf_weight_type_from_name take it;
 * another dtype's clf_dtype_name. */
const char *clf__weight_type_name(clf_dtype wt);

#ifdef __cplusplus
}
#endif

#endif /* CLF_BASE_STATUS_H */
