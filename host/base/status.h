/* status.h - the bottom layer: status helpers every other layer uses.
 *
 * Recording an error (on a context or, before one exists, on the calling
 * thread), OpenCL error names, the element types' rows (dtype.c), and the
 * small macros all of host/ shares.  It knows nothing of the context's layout beyond
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

/* dtype.c: a row of clformer.h's CLF_DTYPE_MAP (see there for the columns). */
typedef struct clf__dtype_row {
  clf_dtype dt;
  const char *name, *weight_name;
  int ggml;        /* ggml's type number; -1: none */
  unsigned block;  /* elements a block: 1 an element type, 0 not a tensor type */
  unsigned bytes;  /* bytes a block */
  int wtype;       /* kernels/linear.cl's WT_<NAME>; -1: the linear kernels read no weights of it */
  unsigned flags;  /* CLF_DTYPE_WEIGHTS, CLF_DTYPE_FROM_F32, CLF_DTYPE_GGML */
} clf__dtype_row;

/* The rows of CLF_DTYPE_MAP (every table derived from it is checked
 * against this count where it is built). */
#define CLF__DTYPE_ONE(...) +1
enum { CLF__DTYPE_COUNT = 0 CLF_DTYPE_MAP(CLF__DTYPE_ONE) };

/* dt's row; NULL for a value that is no clf_dtype. */
const clf__dtype_row *clf__dtype(clf_dtype dt);
/* The row of ggml's type number `ggml`; NULL where clformer has none. */
const clf__dtype_row *clf__dtype_of_ggml(unsigned ggml);

/* The short name of a weight storage type ("f32", "f16", "q8", "q4",
 * "q4k", "q6k"), as --weights and clf_weight_type_from_name take it;
 * another dtype's clf_dtype_name. */
const char *clf__weight_type_name(clf_dtype wt);
/* The weight names of the types clf_model_options.weights may be, in the
 * map's order: "f32, f16, q8, q4, q4k, q6k, stored". */
void clf__weight_type_names(char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* CLF_BASE_STATUS_H */
