/* clformer.h - the one public header of clformer.
 *
 * clformer runs Transformer models on any OpenCL device.  This header holds
 * the runtime (devices, contexts, tensors, errors) and the op library that the
 * models are built from.  Every op enqueues work on the context's in-order
 * queue and returns at once: no op waits for the device, reads back or
 * allocates device memory except where its comment says so.
 *
 * Conventions
 *   - Every fallible call returns a clf_status; CLF_OK is 0.  On failure the
 *     context keeps a detailed message (clf_last_error) that names the call,
 *     the argument and, for OpenCL failures, the OpenCL code and call.
 *   - Ownership: what a *_create function makes, the matching *_destroy frees.
 *     Tensors passed to ops are borrowed.  Outputs are tensors the caller has
 *     created with the shape the op documents; the op checks it.
 *   - Shapes are written outermost first, row-major (C order), e.g. [B, L, D].
 *   - `event` (last argument of every op) may be NULL; when not NULL it
 *     receives an event for the op's last command, which the caller releases
 *     with clReleaseEvent.
 *   - A context and its tensors are used from one thread at a time.
 */
#ifndef CLFORMER_H
#define CLFORMER_H

#include <stddef.h>
#include <stdint.h>

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#if defined(_WIN32) && defined(CLF_BUILDING_LIBRARY)
#define CLF_API __declspec(dllexport)
#elif defined(_WIN32)
#define CLF_API __declspec(dllimport)
#elif defined(__GNUC__) && defined(CLF_BUILDING_LIBRARY)
#define CLF_API __attribute__((visibility("default")))
#else
#define CLF_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define CLF_VERSION_MAJOR 0
#define CLF_VERSION_MINOR 1
#define CLF_VERSION_PATCH 0
#define CLF_VERSION_STRING "0.1.0"

/* Maximum number of dimensions a tensor can have. */
#define CLF_MAX_DIMS 6

/* ------------------------------------------------------------------------ */
/* Status codes.  One list; the enum and clf_strerror() are generated from it. */

#define CLF_STATUS_MAP(X)                                                      \
  X(OK, 0, "success")                                                          \
  X(E_INVALID_ARG, -1, "invalid argument")                                     \
  X(E_SHAPE, -2, "tensor shape mismatch")                                      \
  X(E_DTYPE, -3, "unsupported or mismatched data type")                        \
  X(E_NO_DEVICE, -4, "no OpenCL device found")                                 \
  X(E_DEVICE_NOT_FOUND, -5, "requested OpenCL device not found")               \
  X(E_OPENCL, -6, "OpenCL call failed")                                        \
  X(E_BUILD, -7, "OpenCL kernel failed to build")                              \
  X(E_OUT_OF_MEMORY, -8, "out of memory")                                      \
  X(E_BLAS, -9, "CLBlast call failed")                                         \
  X(E_UNSUPPORTED, -10, "not supported on this device or configuration")       \
  X(E_IO, -11, "file input/output error")                                      \
  X(E_FORMAT, -12, "malformed file or data")                                   \
  X(E_NOT_FOUND, -13, "item not found")                                        \
  X(E_LIMIT, -14, "a limit on work or memory was reached")

typedef enum clf_status {
#define CLF__STATUS_ENUM(name, code, msg) CLF_##name = code,
  CLF_STATUS_MAP(CLF__STATUS_ENUM)
#undef CLF__STATUS_ENUM
} clf_status;

/* A static description of a status code ("tensor shape mismatch"). */
CLF_API const char *clf_strerror(clf_status status);
/* The status code's name ("CLF_E_SHAPE"). */
CLF_API const char *clf_status_name(clf_status status);
/* The name of an OpenCL error code: "CL_INVALID_VALUE" for -30 (static
 * string; "unknown OpenCL error" for codes OpenCL 1.2 does not define). */
CLF_API const char *clf_cl_error_name(cl_int err);

/* ------------------------------------------------------------------------ */
/* Devices */

typedef struct clf_device_desc {
  int platform_index; /* position of the platform in clGetPlatformIDs order */
  int device_index;   /* position of the device within its platform */
  cl_platform_id platform;
  cl_device_id device;
  cl_device_type type;
  char platform_name[128];
  char device_name[128];
  char vendor[128];
  char driver_version[64];
  char device_version[64]; /* "OpenCL 3.0 PoCL ..." */
} clf_device_desc;

/* Lists every device of every platform.  Writes up to `capacity` entries to
 * `out` (may be NULL when capacity is 0) and the total number found to
 * `*count`.  Returns CLF_E_NO_DEVICE (with *count 0) when there is none. */
CLF_API clf_status clf_list_devices(clf_device_desc *out, size_t capacity,
                                    size_t *count);

/* Picks a device by selector: "P:D" (platform and device indices), or a
 * case-insensitive substring of "platform name / device name".  NULL or ""
 * picks the default: the first GPU, else the first device.  Returns
 * CLF_E_DEVICE_NOT_FOUND when nothing matches. */
CLF_API clf_status clf_select_device(const char *selector,
                                     clf_device_desc *out);

/* ------------------------------------------------------------------------ */
/* Context: one device, its queue, its kernel cache and CLBlast state. */

typedef struct clf_context clf_context;

typedef struct clf_context_options {
  /* Device selector (see clf_select_device).  NULL: $CLFORMER_DEVICE, and
   * if that is unset, the default device. */
  const char *device;
  /* Non-zero: create the queue with CL_QUEUE_PROFILING_ENABLE. */
  int profiling;
  /* Directory of the on-disk program cache.  NULL: $CLFORMER_CACHE_DIR, else
   * $XDG_CACHE_HOME/clformer, else ~/.cache/clformer.  "off" disables it. */
  const char *cache_dir;
  /* Directory to read kernels/<family>.cl from instead of the sources
   * embedded at build time.  NULL: $CLFORMER_KERNEL_DIR, else embedded. */
  const char *kernel_dir;
  /* Where the library's notices go: warnings (a kernel variant it does
   * not use because it failed self-validation on this device, a cache
   * directory it cannot use) and information (a GEMM tuning profile it
   * applied).  NULL: each notice is printed once to stderr, prefixed
   * "clformer: ": warnings unless $CLFORMER_LOG is "off", information only
   * when $CLFORMER_LOG is "info". */
  void (*log)(void *user, const char *message);
  void *log_user;
  /* The device class whose choices the library makes: "cpu", "gpu" or
   * "accelerator" (any case).  Every choice that depends on the class
   * follows it (work-group shapes, which kernel of a pair, the GEMM
   * profile, the tuner's search, -DCLF_IS_CPU), so a CPU runtime runs the
   * GPU code paths.  NULL: $CLFORMER_DEVICE_CLASS; NULL or "" there: the
   * device's own.  Anything else fails clf_context_create with
   * CLF_E_INVALID_ARG naming the variable and the value. */
  const char *device_class;
  /* Limits below the device's own, to run the choices a smaller device
   * (a phone's GPU) would make: comma-separated key=value,
   *   wg=N         work-items per work-group (1 ..  the device's)
   *   local=BYTES  local memory (1 KiB .. the device's; below 32 KiB, the
   *                full profile's minimum, with a notice once a process)
   *   alloc=BYTES  the largest single buffer (1 MiB .. the device's)
   *   fp16=0, subgroups=0   as if the device had no cl_khr_fp16 / subgroups
   * BYTES is a number with an optional k, m or g (KiB, MiB, GiB), as in
   * "wg=128,local=16k,alloc=256m,fp16=0".  Every op and the model loader
   * obey them (a weight larger than alloc is refused by name before any
   * upload).  NULL: $CLFORMER_LIMITS; NULL or "" there: none.  An unknown
   * key, a malformed value, or one above the device's or below OpenCL's
   * minimum fails clf_context_create with CLF_E_INVALID_ARG naming the key,
   * the value and why. */
  const char *limits;
  /* Long work as it happens, for a status line: called with what begins
   * ("kernel program attention": a program built from source, not taken
   * from a cache) and with NULL when it has ended.  NULL: none. */
  void (*progress)(void *user, const char *what);
  void *progress_user;
} clf_context_options;

/* Fills `opts` with the defaults (all NULL / 0). */
CLF_API void clf_context_options_init(clf_context_options *opts);

/* Creates a context on the selected device.  `opts` may be NULL.  On
 * failure *out is NULL and clf_last_error(NULL) tells why. */
CLF_API clf_status clf_context_create(const clf_context_options *opts,
                                      clf_context **out);
/* Waits for queued work, then frees the context and everything it owns.
 * Tensors must be destroyed first.  NULL is accepted. */
CLF_API void clf_context_destroy(clf_context *ctx);

/* The detailed message of the last failure on `ctx` (never NULL; "" if none).
 * With ctx NULL: the last failure of this thread that had no context, such as
 * a failed clf_context_create. */
CLF_API const char *clf_last_error(const clf_context *ctx);
/* The OpenCL error code of the last failure (0 if it was not an OpenCL one). */
CLF_API cl_int clf_last_cl_error(const clf_context *ctx);
/* The compiler log of the last kernel build that failed ("" if none). */
CLF_API const char *clf_last_build_log(const clf_context *ctx);
/* Forgets the last error. */
CLF_API void clf_clear_error(clf_context *ctx);

/* The device the context runs on (borrowed, valid until destroy). */
CLF_API const clf_device_desc *clf_context_device(const clf_context *ctx);
/* The context's OpenCL objects (borrowed). */
CLF_API cl_context clf_context_cl(const clf_context *ctx);
CLF_API cl_command_queue clf_context_queue(const clf_context *ctx);
/* Blocks until all work queued on the context has finished. */
CLF_API clf_status clf_finish(clf_context *ctx);
/* Per-op device time, from OpenCL profiling events (the context must be
 * created with clf_context_options.profiling).  Between start and stop
 * every kernel launch, CLBlast GEMM call (timed from a marker before it, so
 * its pad/transpose kernels count) and buffer copy is recorded. */
typedef struct clf_profile_entry {
  const char *op;      /* the kernel's name, "clblast_gemm", "copy", ...;
                          valid until the context is destroyed */
  unsigned long count; /* commands */
  double ms;           /* their device time, summed */
} clf_profile_entry;
/* Starts recording (forgetting an earlier one).  CLF_E_UNSUPPORTED when the
 * context was created without profiling.  The clock is chosen here: the
 * events' timestamps where the driver fills them, else (a driver whose
 * events report no time, e.g. Mesa's rusticl, or $CLFORMER_PROFILE_CLOCK=wall)
 * the host's monotonic clock around each command, the queue finished before
 * and after it: host time per command, serialized, so only a
 * diagnostic.  $CLFORMER_PROFILE_CLOCK other than "events", "wall" or
 * empty: CLF_E_INVALID_ARG. */
CLF_API clf_status clf_profile_start(clf_context *ctx);
/* The clock of the recording started last: "events" (device timestamps) or
 * "wall" (see clf_profile_start); NULL before any.  Static. */
CLF_API const char *clf_profile_clock(const clf_context *ctx);
/* Waits for the queue, stops recording and writes the ops, longest first,
 * up to `capacity` of them, with the number of ops in *n_ops and of
 * commands in *commands (may be NULL).  CLF_E_INVALID_ARG when not
 * recording. */
CLF_API clf_status clf_profile_stop(clf_context *ctx, clf_profile_entry *out,
                                    size_t capacity, size_t *n_ops,
                                    unsigned long *commands);

/* The paths the linear layers (clf_linear) took in the last recording
 * (from clf_profile_start on): returns how many distinct ones there are
 * and, when i is below that, sets *line, *count and *ms (each may be NULL)
 * to the i-th, in order of first use: the product, the kernels that ran
 * it and why, e.g. "x [64, 768] w f32 [768, 2304] [in, out]: skinny_t,
 * 8 launches of up to 8 rows (64 rows <= 64: measured: the profile's Rows
 * line)", how many calls took it, and their commands' time (as
 * clf_profile_stop sums it; 0 until it has stopped).  *line is valid until
 * the next clf_profile_start or the context's destruction.  0 for a NULL
 * ctx. */
CLF_API size_t clf_profile_paths(const clf_context *ctx, size_t i, const char **line, unsigned long *count,
                                 double *ms);

/* The device class the context's choices follow ("cpu", "gpu",
 * "accelerator", "custom"): the device's own unless device_class or
 * $CLFORMER_DEVICE_CLASS set it, when *overridden (may be NULL) is 1.
 * Borrowed, static. */
CLF_API const char *clf_context_device_class(const clf_context *ctx, int *overridden);
/* The limits the context runs under (clf_context_options.limits),
 * normalised to bytes ("wg=64,local=16384,alloc=268435456,fp16=0"); ""
 * when none.  Borrowed, valid until destroy. */
CLF_API const char *clf_context_limits(const clf_context *ctx);

/* The program cache directory in use, or NULL when disk caching is off. */
CLF_API const char *clf_context_cache_dir(const clf_context *ctx);

/* Kernel-cache counters, for tools and tests. */
typedef struct clf_cache_stats {
  unsigned programs_built;      /* compiled from source in this context */
  unsigned programs_from_disk;  /* loaded from the on-disk binary cache */
  unsigned disk_rejected;       /* disk entries found corrupt or stale */
  unsigned disk_written;        /* entries written to disk */
  unsigned build_failures;      /* variants that failed to build */
  double build_ms;              /* wall time spent creating programs */
} clf_cache_stats;
CLF_API void clf_context_cache_stats(const clf_context *ctx,
                                     clf_cache_stats *out);

/* Builds (or loads) the program of one op family with the given extra
 * compiler options ("-DHEAD_DIM=64"), as the ops do lazily.  For tools and
 * tests; ops never need it called first.  The linear family's ops build a
 * program for each kernel they run; this builds every kernel of it. */
CLF_API clf_status clf_context_prepare(clf_context *ctx, const char *family,
                                       const char *options);

/* ------------------------------------------------------------------------ */
/* Tensors: device buffers with a dtype and a shape (contiguous, row-major). */

/* The element types, one row each: the enum clf_dtype, clf_dtype_name,
 * clf_dtype_size, clf_weight_type_from_name, clf_dtype_at and every table
 * of the library that knows a type (block sizes, ggml's numbers, the GGUF
 * reader's types, kernels/linear.cl's type constants) come from this list.
 *   X(NAME, value, name, weight name, ggml type, block, block bytes, WTYPE, flags)
 * value: CLF_<NAME>'s (part of the ABI: never renumbered).
 * name: clf_dtype_name's; weight name: the short name --weights,
 *   clf_weight_type_from_name (which takes either) and the tuning profile use.
 * ggml type: ggml's number for the type, as a GGUF file stores it; -1: none.
 * block: elements a block (1: an element type; 0: not a tensor type);
 *   block bytes: a block's bytes (an element's size for the element types).
 * WTYPE: the type's constant in kernels/linear.cl (-DWT_<NAME>), -1 where
 *   clf_linear reads no weights of it.
 * flags: CLF_DTYPE_WEIGHTS (clf_model_options.weights may name it),
 *   CLF_DTYPE_FROM_F32 (clf_tensor_from_f32 makes it), CLF_DTYPE_GGML
 *   (ggml's block layout, scales inside each block, as a GGUF file stores
 *   it; Q8_0 and Q4_0 are clformer's split layout, stated below).
 *
 * The formats.  F16 is stored as half; ops read and write it with
 * vload/vstore_half.  Block-quantized weight storage is for the weights of
 * clf_linear only (other ops reject it): 2-D [rows, K], K a multiple of the
 * block, no views.
 *   Q8_0, Q4_0 (clformer's layout): each row is cut into blocks of 32
 *   along K, each with one f16 scale d; an element is d * q.  The buffer
 *   holds every block's quants, row-major, then every block's scale (f16,
 *   row-major):
 *     Q8_0: q int8 in [-127, 127], 32 bytes a block (8.5 bits a weight);
 *     Q4_0: 16 bytes a block, byte j holding element j in its low nibble
 *           and element j + 16 in its high one, q = nibble - 8 (4.5 bits;
 *           the layout of llama.cpp's Q4_0, split into quants and scales).
 *   Make them with clf_tensor_from_f32; upload/download move these bytes.
 *   ggml's block types (CLF_DTYPE_GGML), as a GGUF file stores them
 *   (ggml-common.h): each row K / B blocks of B elements, the blocks back
 *   to back (scales inside each block): B = 32 for Q4_1, Q5_0, Q5_1; B =
 *   256 for the k-quants Q2_K ... Q6_K.  Made by clf_tensor_create and
 *   filled with clf_tensor_upload of the blocks (clf_tensor_from_f32 makes
 *   those marked CLF_DTYPE_FROM_F32); an element is what clf_gguf_dequantize
 *   decodes.
 *   CLF_STORED is not a tensor type: clf_model_options.weights only (its
 *   default): each linear layer's weight in the type its checkpoint stores
 *   it in, where clformer's kernels read that type. */
#define CLF_DTYPE_WEIGHTS 1
#define CLF_DTYPE_FROM_F32 2
#define CLF_DTYPE_GGML 4
#define CLF_DTYPE_MAP(X)                                                                                       \
  X(F32,    0,  "f32",    "f32",    0,  1,   4,   0,  CLF_DTYPE_WEIGHTS | CLF_DTYPE_FROM_F32)                  \
  X(F16,    1,  "f16",    "f16",    1,  1,   2,   1,  CLF_DTYPE_WEIGHTS | CLF_DTYPE_FROM_F32)                  \
  X(I32,    2,  "i32",    "i32",    26, 1,   4,   -1, 0)                                                       \
  X(I64,    3,  "i64",    "i64",    27, 1,   8,   -1, 0)                                                       \
  X(Q8_0,   4,  "q8_0",   "q8",     8,  32,  34,  2,  CLF_DTYPE_WEIGHTS | CLF_DTYPE_FROM_F32)                  \
  X(Q4_0,   5,  "q4_0",   "q4",     2,  32,  18,  3,  CLF_DTYPE_WEIGHTS | CLF_DTYPE_FROM_F32)                  \
  X(Q4_1,   6,  "q4_1",   "q4_1",   3,  32,  20,  4,  CLF_DTYPE_GGML)                                          \
  X(Q5_0,   7,  "q5_0",   "q5_0",   6,  32,  22,  5,  CLF_DTYPE_GGML | CLF_DTYPE_FROM_F32)                     \
  X(Q5_1,   8,  "q5_1",   "q5_1",   7,  32,  24,  6,  CLF_DTYPE_GGML)                                          \
  X(Q2_K,   9,  "q2_k",   "q2_k",   10, 256, 84,  7,  CLF_DTYPE_GGML)                                          \
  X(Q3_K,   10, "q3_k",   "q3_k",   11, 256, 110, 8,  CLF_DTYPE_GGML)                                          \
  X(Q4_K,   11, "q4_k",   "q4k",    12, 256, 144, 9,  CLF_DTYPE_GGML | CLF_DTYPE_WEIGHTS | CLF_DTYPE_FROM_F32) \
  X(Q5_K,   12, "q5_k",   "q5_k",   13, 256, 176, 10, CLF_DTYPE_GGML)                                          \
  X(Q6_K,   13, "q6_k",   "q6k",    14, 256, 210, 11, CLF_DTYPE_GGML | CLF_DTYPE_WEIGHTS | CLF_DTYPE_FROM_F32) \
  X(STORED, 64, "stored", "stored", -1, 0,   0,   -1, CLF_DTYPE_WEIGHTS)

typedef enum clf_dtype {
#define CLF__DTYPE_ENUM(NAME, value, name, wname, ggml, block, bytes, wtype, flags) CLF_##NAME = value,
  CLF_DTYPE_MAP(CLF__DTYPE_ENUM)
#undef CLF__DTYPE_ENUM
} clf_dtype;

/* Bytes of one element; 0 for the block types (see clf_tensor_bytes). */
CLF_API size_t clf_dtype_size(clf_dtype dtype);
/* "f32", "f16", "i32", "i64", "q8_0", "q4_0", "q4_1", ..., "q6_k". */
CLF_API const char *clf_dtype_name(clf_dtype dtype);
/* The weight storage type (a row with CLF_DTYPE_WEIGHTS) named by its
 * weight name or its name: "f32", "f16", "q8" (or "q8_0"), "q4" (or
 * "q4_0"), "q4k" (or "q4_k"), "q6k" (or "q6_k") or "stored" (CLF_STORED);
 * CLF_E_INVALID_ARG naming the value and
 * the valid ones otherwise (recorded for clf_last_error(NULL)). */
CLF_API clf_status clf_weight_type_from_name(const char *name, clf_dtype *out);

/* One row of CLF_DTYPE_MAP, for bindings and command lines that list the
 * types (the weight types a user may ask for: weights_target) instead of
 * copying them.  The strings are static. */
typedef struct clf_dtype_desc {
  clf_dtype dtype;
  const char *name;        /* clf_dtype_name's: "q4_k" */
  const char *weight_name; /* --weights' short name: "q4k" */
  int ggml_type;           /* ggml's number for the type (GGUF); -1: none */
  size_t block;            /* elements a block: 1 an element type, 0 not a tensor type */
  size_t block_bytes;      /* bytes a block */
  int weights_target;      /* clf_model_options.weights may be it (CLF_DTYPE_WEIGHTS) */
  int from_f32;            /* clf_tensor_from_f32 makes it (CLF_DTYPE_FROM_F32) */
  int ggml_layout;         /* ggml's block layout (CLF_DTYPE_GGML) */
  int linear_weight;       /* clf_linear reads weights of it */
} clf_dtype_desc;

/* The rows of CLF_DTYPE_MAP. */
CLF_API size_t clf_dtype_count(void);
/* Row i (< clf_dtype_count(), in the map's order) into *out;
 * CLF_E_INVALID_ARG past the end or for a NULL out. */
CLF_API clf_status clf_dtype_at(size_t i, clf_dtype_desc *out);

typedef struct clf_tensor clf_tensor;

/* Allocates an uninitialised tensor.  ndim is 1..CLF_MAX_DIMS; a dimension
 * may be 0 (an empty tensor). */
CLF_API clf_status clf_tensor_create(clf_context *ctx, clf_dtype dtype,
                                     int ndim, const size_t *shape,
                                     clf_tensor **out);
/* A view: `ndim`/`shape` over the elements of `base` starting at element
 * `offset` (a reshape and/or a contiguous slice).  It shares base's buffer and
 * stays valid after base is destroyed; destroy it with clf_tensor_destroy. */
CLF_API clf_status clf_tensor_view(const clf_tensor *base, size_t offset,
                                   int ndim, const size_t *shape,
                                   clf_tensor **out);
/* NULL is accepted. */
CLF_API void clf_tensor_destroy(clf_tensor *t);

CLF_API clf_dtype clf_tensor_dtype(const clf_tensor *t);
CLF_API int clf_tensor_ndim(const clf_tensor *t);
CLF_API size_t clf_tensor_dim(const clf_tensor *t, int axis); /* axis<0: from the end */
CLF_API const size_t *clf_tensor_shape(const clf_tensor *t);
CLF_API size_t clf_tensor_numel(const clf_tensor *t);
/* Bytes of the tensor's storage (for Q8_0 / Q4_0 quants and scales). */
CLF_API size_t clf_tensor_bytes(const clf_tensor *t);
/* The buffer and the element offset of the tensor within it (borrowed). */
CLF_API cl_mem clf_tensor_buffer(const clf_tensor *t);
CLF_API size_t clf_tensor_offset(const clf_tensor *t);

/* Copies host memory into the tensor; `bytes` must equal clf_tensor_bytes.
 * Blocking: returns when the host memory may be reused. */
CLF_API clf_status clf_tensor_upload(clf_context *ctx, clf_tensor *t,
                                     const void *host, size_t bytes);
/* Waits for queued work, then copies the tensor to host memory. */
CLF_API clf_status clf_tensor_download(clf_context *ctx, const clf_tensor *t,
                                       void *host, size_t bytes);
/* A new tensor of `dtype` (F32, F16, Q8_0, Q4_0, Q5_0, Q4_K or Q6_K)
 * holding the f32 values `host` [shape] converted: F16 rounded to nearest
 * even; Q8_0 with the block scale d = max|x| / 127 and q = round(x / d);
 * Q4_0 as llama.cpp's
 * Q4_0 (d = -m / 8 for the element m of largest magnitude, q = clamp(
 * round-half-up(x / d) + 8, 0, 15) as the nibble); Q5_0, Q4_K and Q6_K
 * the bytes of ggml's reference quantizers (quantize_row_q5_0_ref,
 * _q4_K_ref, _q6_K_ref: no importance matrix).  The block types need a
 * 2-D shape whose last dim is a multiple of the block, 32 or 256 (else
 * CLF_E_SHAPE naming it).  Converts on the host, then uploads (blocking). */
CLF_API clf_status clf_tensor_from_f32(clf_context *ctx, clf_dtype dtype,
                                       int ndim, const size_t *shape,
                                       const float *host, clf_tensor **out);
/* Sets every element to `value` (converted to the tensor's dtype). */
CLF_API clf_status clf_tensor_fill(clf_context *ctx, clf_tensor *t,
                                   double value, cl_event *event);
/* Copies src into dst (same numel and dtype; shapes may differ). */
CLF_API clf_status clf_tensor_copy(clf_context *ctx, const clf_tensor *src,
                                   clf_tensor *dst, cl_event *event);

/* ------------------------------------------------------------------------ */
/* Dense ops.  Tensors are f32 unless stated. */

typedef enum clf_activation {
  CLF_ACT_NONE = 0,
  CLF_ACT_RELU,
  CLF_ACT_GELU,      /* exact: 0.5 x (1 + erf(x / sqrt 2)) */
  CLF_ACT_GELU_TANH, /* "gelu_new": 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))) */
  CLF_ACT_SILU,      /* x * sigmoid(x) (swish) */
  CLF_ACT_TANH,      /* tanh(x) (BERT's pooler) */
} clf_activation;

/* Parses a Hugging Face activation name ("gelu", "gelu_new", "relu",
 * "silu", "swish", "tanh", ...).  CLF_E_UNSUPPORTED for an unknown name. */
CLF_API clf_status clf_activation_from_name(const char *name,
                                            clf_activation *out);

/* C = alpha * op(A) @ op(B) + beta * C, through CLBlast.  A, B, C are 2-D
 * f32.  op(A) is [M, K]: A is [M, K], or [K, M] when trans_a.  op(B) is
 * [K, N]: B is [K, N], or [N, K] when trans_b.  C is [M, N]. */
CLF_API clf_status clf_gemm(clf_context *ctx, int trans_a, int trans_b,
                            float alpha, const clf_tensor *a,
                            const clf_tensor *b, float beta, clf_tensor *c,
                            cl_event *event);

/* Strided-batched GEMM: as clf_gemm for each batch index.  A and C have
 * ndim >= 3; the leading dims are the batch.  B is either batched like A or
 * 2-D (shared by every batch).  A [.., M, K], B [.., K, N], C [.., M, N]
 * (with trans_a / trans_b as in clf_gemm). */
CLF_API clf_status clf_gemm_batched(clf_context *ctx, int trans_a,
                                    int trans_b, float alpha,
                                    const clf_tensor *a, const clf_tensor *b,
                                    float beta, clf_tensor *c,
                                    cl_event *event);

typedef enum clf_weight_layout {
  CLF_WEIGHT_OUT_IN = 0, /* [out, in]: torch.nn.Linear */
  CLF_WEIGHT_IN_OUT = 1, /* [in, out]: GPT-2's Conv1D */
} clf_weight_layout;

/* y = act(x @ W^T + bias).  x [.., in], W [out, in] (or [in, out] with
 * CLF_WEIGHT_IN_OUT), bias [out] or NULL, y [.., out] with x's leading dims.
 * W is f32, or f16 / Q8_0 / Q4_0 [out, in] (CLF_WEIGHT_OUT_IN only); the
 * math is f32 either way.  Up to 8 rows of x (decode, small batches) run
 * a matrix-vector kernel that reads each weight once, with bias and
 * activation in its epilogue; more rows run CLBlast's GEMM (a weight that is
 * not f32 is first expanded to f32 in the context's scratch memory). */
CLF_API clf_status clf_linear(clf_context *ctx, const clf_tensor *x,
                              const clf_tensor *w, clf_weight_layout layout,
                              const clf_tensor *bias, clf_activation act,
                              clf_tensor *y, cl_event *event);

/* w [out, in] (CLF_WEIGHT_OUT_IN) in a new tensor *out laid out as
 * clf_linear reads it fastest on ctx's device, as the model loaders lay out
 * theirs: on a CPU device (or with $CLFORMER_ROWS16=1) the block types
 * Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and Q2_K to Q6_K in clformer's 16-row
 * interleave (16 rows' blocks side by side: each load of a word reads it
 * for 16 rows); for the other types and devices, a copy of w.  *out is for
 * clf_linear only (CLF_WEIGHT_OUT_IN): the other ops and the transfers
 * refuse an interleaved weight.  Downloads w first (blocking).
 * CLF_E_INVALID_ARG for a NULL out or a w that is already interleaved,
 * CLF_E_DTYPE / CLF_E_SHAPE for a w that is not a 2-D weight of a type
 * clf_linear reads. */
CLF_API clf_status clf_linear_weight_prepare(clf_context *ctx,
                                             const clf_tensor *w,
                                             clf_tensor **out);

/* y = act(x + bias): bias [D] over the last dim of x, or NULL.  y has x's
 * shape and may be x itself. */
CLF_API clf_status clf_bias_act(clf_context *ctx, const clf_tensor *x,
                                const clf_tensor *bias, clf_activation act,
                                clf_tensor *y, cl_event *event);

/* y = a + b with NumPy broadcasting (each dim of b, aligned from the right,
 * is 1 or equal to a's; y has a's shape).  y may be a. */
CLF_API clf_status clf_add(clf_context *ctx, const clf_tensor *a,
                           const clf_tensor *b, clf_tensor *y,
                           cl_event *event);

/* y = alpha * x.  y may be x. */
CLF_API clf_status clf_scale(clf_context *ctx, const clf_tensor *x,
                             float alpha, clf_tensor *y, cl_event *event);

/* y = softmax(scale * x) over the last dim, accumulated in f32 and stable
 * (max subtracted).  y may be x. */
CLF_API clf_status clf_softmax(clf_context *ctx, const clf_tensor *x,
                               float scale, clf_tensor *y, cl_event *event);

/* Converts between dtypes (f32, f16, i32, i64); same shape. */
CLF_API clf_status clf_cast(clf_context *ctx, const clf_tensor *x,
                            clf_tensor *y, cl_event *event);

/* Layer norm over the last dim, with an optional fused residual add:
 *   s = x + residual            (residual NULL: s = x)
 *   sum_out = s                 (when sum_out is not NULL)
 *   y = (s - mean(s)) / sqrt(var(s) + eps) * gamma + beta
 * x, residual, sum_out, y share a shape [.., D]; gamma, beta are [D] (beta
 * may be NULL).  Post-LN blocks use y = LN(x + f(x)); pre-LN blocks use
 * sum_out for the residual stream and y as the next block's input.  y or
 * sum_out may be x. */
CLF_API clf_status clf_layer_norm(clf_context *ctx, const clf_tensor *x,
                                  const clf_tensor *residual,
                                  const clf_tensor *gamma,
                                  const clf_tensor *beta, float eps,
                                  clf_tensor *sum_out, clf_tensor *y,
                                  cl_event *event);

/* RMS norm over the last dim (Llama's RMSNorm), with the same optional
 * fused residual add as clf_layer_norm:
 *   s = x + residual            (residual NULL: s = x)
 *   sum_out = s                 (when sum_out is not NULL)
 *   y = s * rsqrt(mean(s^2) + eps) * gamma
 * in f32, as transformers' LlamaRMSNorm computes it.  x, residual, sum_out,
 * y share a shape [.., D]; gamma is [D].  y or sum_out may be x. */
CLF_API clf_status clf_rms_norm(clf_context *ctx, const clf_tensor *x,
                                const clf_tensor *residual,
                                const clf_tensor *gamma, float eps,
                                clf_tensor *sum_out, clf_tensor *y,
                                cl_event *event);

/* Gated linear unit (SwiGLU and friends): gate_up [.., 2F] holds
 * [gate | up] along its last dim (gate_proj and up_proj fused into one
 * projection); y [.., F] = act(gate) * up, with gate_up's leading dims.
 * Llama's MLP uses CLF_ACT_SILU; any clf_activation works. */
CLF_API clf_status clf_glu(clf_context *ctx, const clf_tensor *gate_up,
                           clf_activation act, clf_tensor *y,
                           cl_event *event);

/* ------------------------------------------------------------------------ */
/* Embeddings and data movement. */

/* out[i, :] = (accumulate ? out[i, :] : 0) + scale * table[ids[i], :].
 * table [V, D] f32, ids [..] i32 or i64, out [.., D] (ids' shape + D).  An id
 * outside [0, V) contributes a row of zeros. */
CLF_API clf_status clf_embedding(clf_context *ctx, const clf_tensor *table,
                                 const clf_tensor *ids, float scale,
                                 int accumulate, clf_tensor *out,
                                 cl_event *event);

/* Learned positions: out[b, l, :] (+)= table[start + l, :].  table [P, D],
 * out [B, L, D] or [L, D]; start + L must not exceed P. */
CLF_API clf_status clf_position_embedding(clf_context *ctx,
                                          const clf_tensor *table,
                                          size_t start, int accumulate,
                                          clf_tensor *out, cl_event *event);

typedef enum clf_sinusoid_layout {
  /* The paper's layout: column 2i is sin(p / 10000^(2i/D)), column 2i+1 the
   * cos of the same angle. */
  CLF_SINUSOID_INTERLEAVED = 0,
  /* Marian's: columns [0, ceil(D/2)) hold sin(p / 10000^(2j/D)), columns
   * [ceil(D/2), D) hold cos(p / 10000^(2j/D)). */
  CLF_SINUSOID_HALVES = 1,
} clf_sinusoid_layout;

/* Sinusoidal positions: out[b, l, :] (+)= PE(start + l).  out [B, L, D] or
 * [L, D]. */
CLF_API clf_status clf_sinusoidal_embedding(clf_context *ctx,
                                            clf_sinusoid_layout layout,
                                            size_t start, int accumulate,
                                            clf_tensor *out, cl_event *event);

/* y = x.permute(perm): y's dim i is x's dim perm[i].  ndim <= 6. */
CLF_API clf_status clf_permute(clf_context *ctx, const clf_tensor *x,
                               const int *perm, clf_tensor *y,
                               cl_event *event);

/* Head split: y[b, h, dst_pos + l, d] = x[b, l, col_offset + h * Dh + d],
 * with x [B, L, C] (col_offset + H*Dh <= C, so a fused QKV projection can be
 * split in three calls) and y [B, H, Lcap, Dh] (dst_pos + L <= Lcap, so new
 * keys and values can be appended to a KV cache in place). */
CLF_API clf_status clf_split_heads(clf_context *ctx, const clf_tensor *x,
                                   size_t col_offset, size_t dst_pos,
                                   clf_tensor *y, cl_event *event);
/* Head split with rotary position embeddings applied on the way (so new
 * keys go into a KV cache already rotated), as transformers'
 * apply_rotary_pos_emb with rotate_half: for y[b, h, dst_pos + l, :] from
 * the head vector x_h = x[b, l, col_offset + h*Dh ..] (as clf_split_heads;
 * Dh even), with p = positions[b, l] and for j < Dh/2
 *   angle = p * inv_freq[j]     (f32, as torch's pos.float() @ inv_freq)
 *   c = cos(angle) * scale, s = sin(angle) * scale
 *   y[.., j]        = x_h[j] * c - x_h[j + Dh/2] * s
 *   y[.., j + Dh/2] = x_h[j + Dh/2] * c + x_h[j] * s
 * positions [B, L] i32 or i64; inv_freq f32 [Dh/2] (the checkpoint's
 * rope_theta and rope_scaling already applied), or [R] with R < Dh/2 for
 * partial rotary embeddings (transformers' partial_rotary_factor: the
 * formulas above with R for Dh/2 rotate x_h[0 .. 2R), and x_h[2R ..] is
 * copied as it is); scale the attention
 * scaling factor (1 for default, linear, dynamic and llama3 RoPE).  cos and
 * sin are the accurate f32 functions, so large angles (positions in the
 * tens of thousands) match torch's float32 results. */
CLF_API clf_status clf_split_heads_rope(clf_context *ctx, const clf_tensor *x,
                                        size_t col_offset, size_t dst_pos,
                                        const clf_tensor *positions,
                                        const clf_tensor *inv_freq,
                                        float scale, clf_tensor *y,
                                        cl_event *event);
/* Head merge: y[b, l, h * Dh + d] = x[b, h, l, d]; x [B, H, L, Dh],
 * y [B, L, H*Dh]. */
CLF_API clf_status clf_merge_heads(clf_context *ctx, const clf_tensor *x,
                                   clf_tensor *y, cl_event *event);

/* Row copy: dst[b, dst_row + r, :] = src[b or 0, src_row + r, :] for
 * r < n_rows.  src [Bs, Ls, D] with Bs == B or 1 (broadcast), dst [B, Ld, D].
 * (CLS tokens, concatenation along the sequence, cache appends.) */
CLF_API clf_status clf_copy_rows(clf_context *ctx, const clf_tensor *src,
                                 size_t src_row, clf_tensor *dst,
                                 size_t dst_row, size_t n_rows,
                                 cl_event *event);

/* Row gather: out[b, dst_row + k, :] = x[b, src_row + ids[b, k], :].
 * x [B, Lx, D], ids [B, K] i32 or i64, out [B, Lo, D] (dst_row + K <= Lo).
 * An id outside [0, Lx - src_row) gives a row of zeros. */
CLF_API clf_status clf_gather_rows(clf_context *ctx, const clf_tensor *x,
                                   size_t src_row, const clf_tensor *ids,
                                   clf_tensor *out, size_t dst_row,
                                   cl_event *event);

/* ------------------------------------------------------------------------ */
/* Attention */

typedef struct clf_attention_mask {
  /* [B, Lk] i32, i64 or f32: non-zero = attend, 0 = masked.  NULL: none. */
  const clf_tensor *key_padding;
  /* Non-zero: causal.  Query i sits at absolute position (kv_len - Lq + i)
   * and sees keys j <= that position (so it also holds with a KV cache). */
  int causal;
  /* [nW or 1, H or 1, Lq, Lk] f32 added to the scaled scores; batch index b
   * uses bias[b % nW] (Swin's windows are laid out as [B * nW]).  NULL: none.
   */
  const clf_tensor *bias;
  /* Sliding window (Mistral): non-zero W lets query i (at absolute position
   * kv_len - Lq + i, as for causal) see only keys j > position - W, i.e. the
   * last W positions up to itself when causal.  0: no window. */
  size_t window;
  /* Soft-capping (Gemma 2's attn_logit_softcapping): non-zero C makes each
   * scaled score s C * tanh(s / C) before the bias and the masks.  0: none;
   * finite and not negative. */
  float softcap;
} clf_attention_mask;

typedef enum clf_attention_impl {
  CLF_ATTN_AUTO = 0,  /* the fused kernel where it applies, else GEMM */
  CLF_ATTN_FUSED = 1, /* one kernel, online softmax, no Lq x Lk buffer */
  CLF_ATTN_GEMM = 2,  /* CLBlast QK^T, masked softmax, CLBlast PV */
} clf_attention_impl;

/* Multi-head scaled dot-product attention:
 *   out = softmax(cap(scale * q k^T) + bias + masks) v
 * (cap: mask->softcap's C * tanh(s / C), or s where it is 0 or mask NULL)
 * q [B, H, Lq, Dh]; k, v [B, Hkv, Lcap, Dh] of which the first kv_len rows
 * are used (kv_len 0 means Lcap; a KV cache allocates Lcap ahead).  Hkv is H
 * (multi-head) or divides it (grouped-query attention: query head h reads
 * KV head h / (H / Hkv); both paths read each KV head once for its group);
 * a count that does not divide is CLF_E_SHAPE.  out is
 * [B, H, Lq, Dh], or [B, Lq, H*Dh] to write the heads merged.  Masked
 * positions get probability 0; a row with every key masked gives 0.
 * `mask` may be NULL.  The GEMM path uses scratch memory that the context
 * keeps (allocated the first time a size is seen). */
CLF_API clf_status clf_attention(clf_context *ctx, const clf_tensor *q,
                                 const clf_tensor *k, const clf_tensor *v,
                                 size_t kv_len,
                                 const clf_attention_mask *mask, float scale,
                                 clf_attention_impl impl, clf_tensor *out,
                                 cl_event *event);

/* ------------------------------------------------------------------------ */
/* Image patching, windows and masking (ViT, Swin, MAE). */

typedef enum clf_patch_order {
  CLF_PATCH_CPQ = 0, /* feature (c, i, j): a Conv2d weight [E, C, p, p] flattened */
  CLF_PATCH_PQC = 1, /* feature (i, j, c): MAE's patchify ("nhwpqc") */
} clf_patch_order;

/* out[b, py * (W/p) + px, f] = img[b, c, py*p + i, px*p + j] with f given by
 * `order`.  img [B, C, H, W] with H and W multiples of p; out [B, N, C*p*p]. */
CLF_API clf_status clf_patchify(clf_context *ctx, const clf_tensor *img,
                                size_t patch, clf_patch_order order,
                                clf_tensor *out, cl_event *event);
/* The inverse of clf_patchify: x [B, N, C*p*p] -> img [B, C, H, W]. */
CLF_API clf_status clf_unpatchify(clf_context *ctx, const clf_tensor *x,
                                  size_t patch, clf_patch_order order,
                                  clf_tensor *img, cl_event *event);
/* ViT patch embedding (Conv2d with kernel = stride = p):
 * out [B, N, E] = patchify(img) @ weight^T + bias; weight [E, C, p, p],
 * bias [E] or NULL.  Uses context scratch for the patches. */
CLF_API clf_status clf_patch_embed(clf_context *ctx, const clf_tensor *img,
                                   const clf_tensor *weight,
                                   const clf_tensor *bias, clf_tensor *out,
                                   cl_event *event);

/* torch.roll over dims 1 and 2 of x [B, H, W, C]:
 * y[b, (h + shift_h) mod H, (w + shift_w) mod W, c] = x[b, h, w, c]. */
CLF_API clf_status clf_roll(clf_context *ctx, const clf_tensor *x,
                            long shift_h, long shift_w, clf_tensor *y,
                            cl_event *event);

/* Swin window partition of x [B, H, W, C]: zero-pad to Hp x Wp (multiples of
 * `window`), roll by (-shift, -shift), then cut windows:
 * out [B * (Hp/ws) * (Wp/ws), ws*ws, C], windows in row-major order. */
CLF_API clf_status clf_window_partition(clf_context *ctx, const clf_tensor *x,
                                        size_t window, size_t shift,
                                        clf_tensor *out, cl_event *event);
/* The inverse: windows [B * nW, ws*ws, C] -> out [B, H, W, C] (roll back by
 * +shift, crop the padding).  H and W are taken from out. */
CLF_API clf_status clf_window_reverse(clf_context *ctx,
                                      const clf_tensor *windows,
                                      size_t window, size_t shift,
                                      clf_tensor *out, cl_event *event);
/* Swin's shifted-window attention mask for a padded Hp x Wp map: 0 where two
 * tokens of a window come from the same region, -100 where not.
 * out [nW, ws*ws, ws*ws].  With shift 0 it is all zeros. */
CLF_API clf_status clf_shifted_window_mask(clf_context *ctx, size_t hp,
                                           size_t wp, size_t window,
                                           size_t shift, clf_tensor *out,
                                           cl_event *event);
/* Swin's relative position bias: out[0, h, i, j] = table[index(i, j), h] with
 * index from the tokens' relative (dy, dx) in a ws x ws window.
 * table [(2ws-1)^2, H], out [1, H, ws*ws, ws*ws]. */
CLF_API clf_status clf_relative_position_bias(clf_context *ctx,
                                              const clf_tensor *table,
                                              size_t window, clf_tensor *out,
                                              cl_event *event);
/* Swin patch merging gather: x [B, H, W, C] (zero-padded to even H, W) ->
 * out [B, ceil(H/2) * ceil(W/2), 4C] with the channel blocks ordered
 * x[0::2, 0::2], x[1::2, 0::2], x[0::2, 1::2], x[1::2, 1::2]. */
CLF_API clf_status clf_patch_merge(clf_context *ctx, const clf_tensor *x,
                                   clf_tensor *out, cl_event *event);

/* MAE random masking driven by noise [B, L] f32: rank the patches by noise
 * (ties by index), keep the `keep` lowest.  ids_keep [B, keep] (i32 or i64)
 * gets the kept indices in rank order, ids_restore [B, L] (i32 or i64) the
 * rank of each patch, mask [B, L] f32 gets 0 for kept and 1 for removed.
 * Any output may be NULL. */
CLF_API clf_status clf_mae_random_masking(clf_context *ctx,
                                          const clf_tensor *noise, size_t keep,
                                          clf_tensor *ids_keep,
                                          clf_tensor *ids_restore,
                                          clf_tensor *mask, cl_event *event);
/* MAE decoder input: out[b, dst_row + i, :] = r < keep ? x[b, src_row + r, :]
 * : mask_token, with r = ids_restore[b, i].  x [B, Lx, D], mask_token [D],
 * ids_restore [B, L], out [B, Lo, D] with dst_row + L <= Lo. */
CLF_API clf_status clf_mae_unshuffle(clf_context *ctx, const clf_tensor *x,
                                     size_t src_row,
                                     const clf_tensor *mask_token,
                                     const clf_tensor *ids_restore,
                                     size_t keep, clf_tensor *out,
                                     size_t dst_row, cl_event *event);

/* ------------------------------------------------------------------------ */
/* Host arrays and model files (loader section). */

/* A named n-d array in host memory: model inputs and outputs, .npy files.
 * `data` is owned by whoever filled it; arrays the library fills are freed
 * with clf_array_free. */
typedef struct clf_array {
  char name[64];
  clf_dtype dtype;
  int ndim;
  size_t shape[CLF_MAX_DIMS];
  void *data;
} clf_array;

CLF_API size_t clf_array_numel(const clf_array *a);
/* Frees a->data (malloc'd by the library) and clears it.  NULL is accepted. */
CLF_API void clf_array_free(clf_array *a);

/* ---- Model files: safetensors and .npy ---- */

/* safetensors files, read-only.  The whole file is validated when opened, as
 * strictly as the format's reference reader: an 8-byte little-endian header
 * length of at most 100,000,000 bytes, the header inside the file, UTF-8
 * JSON holding one object; "__metadata__" (optional) maps names to strings;
 * each tensor has "dtype" (a name the format defines: BOOL U8 I8 I16 U16 I32
 * U32 I64 U64 F16 BF16 F32 F64 C64 F8_E5M2 F8_E4M3 F8_E8M0 F8_E4M3FNUZ
 * F8_E5M2FNUZ F4 F6_E2M3 F6_E3M2), "shape" (at most 8 non-negative
 * integers) and "data_offsets" [begin, end] relative to the end of the
 * header (integers below 2^53, as JSON numbers are read as doubles); the
 * shape's element count times the dtype's size (overflow-checked) equals
 * end - begin; the ranges, taken in offset order (the header's key order does
 * not matter), start at 0, neither overlap nor leave gaps, and end exactly at
 * the end of the file.  Zero-size tensors are legal; duplicate names are
 * rejected.  The header is read with pread; the file stays open (O_CLOEXEC)
 * and memory-mapped (read-only) until closed.
 *
 * A file that changes while open: clf_safetensors_read copies a tensor's
 * bytes with pread and fails with CLF_E_IO, naming the file, where the file
 * now ends before the tensor does (truncated since it was opened); the
 * model loader reads every weight that way, so a model.safetensors
 * truncated while clf_model_load runs is an error, never a signal.
 * clf_st_info.data is the mapping itself: reading a page of it that lies
 * past the file's new end raises SIGBUS, so use it only on files nothing
 * truncates while open.  A file rewritten in place (same size) gives
 * whatever bytes it holds when read, through either. */
typedef struct clf_safetensors clf_safetensors;

typedef struct clf_st_info {
  const char *name;  /* borrowed from the clf_safetensors */
  const char *dtype; /* "F32", "F16", "BF16", "I64", ... as in the file */
  int ndim;          /* 0 for a scalar */
  size_t shape[8];
  const void *data;  /* the bytes in the live mapping (faults if the file is
                        truncated while open); may be unaligned.
                        clf_safetensors_read is the checked copy. */
  size_t bytes;
} clf_st_info;

/* Opens and validates `path`.  On failure *out is NULL and
 * clf_last_error(NULL) names the file, the tensor and the rule broken:
 * CLF_E_NOT_FOUND (no such file), CLF_E_IO (unreadable), CLF_E_FORMAT
 * (anything malformed), CLF_E_OUT_OF_MEMORY.  Close with
 * clf_safetensors_close. */
CLF_API clf_status clf_safetensors_open(const char *path,
                                        clf_safetensors **out);
/* Unmaps, closes the file and frees; every clf_st_info obtained from it
 * becomes invalid.  NULL is accepted. */
CLF_API void clf_safetensors_close(clf_safetensors *st);
/* The number of tensors (0 for NULL). */
CLF_API size_t clf_safetensors_count(const clf_safetensors *st);
/* The tensor at `index` (0 .. count-1), in the order of the data offsets.
 * CLF_E_INVALID_ARG (message in clf_last_error(NULL)) when out of range. */
CLF_API clf_status clf_safetensors_info(const clf_safetensors *st,
                                        size_t index, clf_st_info *out);
/* The tensor called `name`; CLF_E_NOT_FOUND (message in
 * clf_last_error(NULL)) when there is none. */
CLF_API clf_status clf_safetensors_find(const clf_safetensors *st,
                                        const char *name, clf_st_info *out);
/* Copies the `info->bytes` bytes of the tensor `info` (from
 * clf_safetensors_info or _find on this `st`) into `dst` (caller-owned, at
 * least info->bytes; may be NULL when that is 0) with pread, going on
 * after EINTR and short reads.  Errors (message in clf_last_error(NULL),
 * naming the file and the tensor): CLF_E_IO when the file ends before the
 * tensor does (it shrank since it was opened) or the read fails,
 * CLF_E_INVALID_ARG for NULL arguments or an `info` this file does not
 * hold.  dst's contents are unspecified after an error.  Safe to call from
 * several threads at once on one `st`. */
CLF_API clf_status clf_safetensors_read(const clf_safetensors *st,
                                        const clf_st_info *info, void *dst);
/* The "__metadata__" value of `key` (borrowed), or NULL when absent. */
CLF_API const char *clf_safetensors_metadata(const clf_safetensors *st,
                                             const char *key);

/* GGUF files (llama.cpp's format), read-only.  The header, every metadata
 * pair and the tensor table are read with pread and validated when opened,
 * with the rules of ggml's own reader and more: the magic "GGUF"; version
 * 2 or 3 (1, later ones and big-endian files are CLF_E_UNSUPPORTED); keys
 * non-empty, unique, without NUL bytes, at most 65535 bytes; value types
 * the format defines, no arrays of arrays, every count and length inside
 * the file (checked before anything is allocated for it);
 * general.alignment, where present, a u32 power of two (else 32); tensor
 * names unique, under 64 bytes; at most 4 dimensions, none negative, the
 * element count and the size in bytes without overflow, the row length a
 * multiple of the type's block; the data section starts at the table's end
 * rounded up to the alignment, and each tensor's bytes are aligned, inside
 * the file and clear of every other tensor's.  A ggml type with no block
 * layout here (the IQ, TQ and MXFP4 types) is CLF_E_UNSUPPORTED, naming
 * the tensor and the type.  Nothing is mapped: clf_gguf_read copies a
 * tensor's bytes with pread and fails with CLF_E_IO where the file shrank
 * since it was opened.  Safe to read from several threads at once. */
typedef struct clf_gguf clf_gguf;

/* Metadata value types, numbered as the format numbers them. */
typedef enum clf_gguf_type {
  CLF_GGUF_U8 = 0,
  CLF_GGUF_I8 = 1,
  CLF_GGUF_U16 = 2,
  CLF_GGUF_I16 = 3,
  CLF_GGUF_U32 = 4,
  CLF_GGUF_I32 = 5,
  CLF_GGUF_F32 = 6,
  CLF_GGUF_BOOL = 7,
  CLF_GGUF_STRING = 8,
  CLF_GGUF_ARRAY = 9,
  CLF_GGUF_U64 = 10,
  CLF_GGUF_I64 = 11,
  CLF_GGUF_F64 = 12
} clf_gguf_type;

typedef struct clf_gguf_kv {
  const char *key;        /* borrowed from the clf_gguf */
  clf_gguf_type type;     /* CLF_GGUF_ARRAY for an array */
  clf_gguf_type elem;     /* an array's element type; else type */
  uint64_t count;         /* an array's length; 1 for a single value */
} clf_gguf_kv;

typedef struct clf_gguf_tensor {
  const char *name;      /* borrowed from the clf_gguf */
  unsigned ggml_type;    /* ggml's number: 0 F32, 1 F16, 2 Q4_0, 8 Q8_0, 12 Q4_K, 30 BF16, ... */
  const char *type_name; /* "F32", "Q4_K", ... (static) */
  int ndim;              /* 0 to 4 */
  uint64_t shape[4];     /* outermost first, as clformer and NumPy order them
                            (the file stores the innermost first) */
  uint64_t offset;       /* of the tensor's bytes in the file */
  uint64_t bytes;
} clf_gguf_tensor;

/* Opens and validates `path`.  On failure *out is NULL and
 * clf_last_error(NULL) names the file, the key or tensor, and the rule
 * broken: CLF_E_NOT_FOUND, CLF_E_IO, CLF_E_FORMAT (anything malformed,
 * "truncated: ..." for data past the end of the file), CLF_E_UNSUPPORTED,
 * CLF_E_OUT_OF_MEMORY.  Close with clf_gguf_close (NULL is accepted). */
CLF_API clf_status clf_gguf_open(const char *path, clf_gguf **out);
CLF_API void clf_gguf_close(clf_gguf *g);
/* The file's format version (2 or 3; 0 for NULL). */
CLF_API unsigned clf_gguf_version(const clf_gguf *g);
/* Metadata pairs, in the file's order (0 for NULL). */
CLF_API size_t clf_gguf_kv_count(const clf_gguf *g);
/* Pair i; CLF_E_INVALID_ARG past the count. */
CLF_API clf_status clf_gguf_kv_at(const clf_gguf *g, size_t i, clf_gguf_kv *out);
/* The index of `key`, or -1. */
CLF_API long clf_gguf_find(const clf_gguf *g, const char *key);
/* Value j (0 for a single value; an array's element j) of pair i.
 * get_int: any integer type or bool, as a signed 64-bit integer
 * (CLF_E_DTYPE for floats, strings, and a u64 past INT64_MAX); get_float:
 * any number; get_str: a string (borrowed, NUL-terminated; *len, which may
 * be NULL, counts its bytes, and the string may hold NUL bytes of its own).
 * CLF_E_INVALID_ARG for an index past the pairs or the values. */
CLF_API clf_status clf_gguf_get_int(const clf_gguf *g, size_t i, uint64_t j, int64_t *out);
CLF_API clf_status clf_gguf_get_float(const clf_gguf *g, size_t i, uint64_t j, double *out);
CLF_API clf_status clf_gguf_get_str(const clf_gguf *g, size_t i, uint64_t j, const char **s, size_t *len);
/* Tensors, in the file's table order (0 for NULL). */
CLF_API size_t clf_gguf_tensor_count(const clf_gguf *g);
/* Tensor i; CLF_E_INVALID_ARG past the count. */
CLF_API clf_status clf_gguf_tensor_at(const clf_gguf *g, size_t i, clf_gguf_tensor *out);
/* The index of the tensor called `name`, or -1. */
CLF_API long clf_gguf_find_tensor(const clf_gguf *g, const char *name);
/* Copies tensor i's bytes (its blocks as stored) into dst, which holds
 * `capacity` bytes (CLF_E_INVALID_ARG when fewer than the tensor's). */
CLF_API clf_status clf_gguf_read(const clf_gguf *g, size_t i, void *dst, size_t capacity);

/* Decodes n elements of ggml type `ggml_type` (as clf_gguf_tensor.ggml_type
 * numbers it; the bytes as clf_gguf_read gives them) into dst as f32, with
 * the arithmetic of ggml's dequantize_row_*: F32, F16, BF16, Q4_0, Q4_1,
 * Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, I8, I16, I32, I64, F64.
 * CLF_E_UNSUPPORTED for another type; CLF_E_INVALID_ARG when n is not whole
 * blocks of the type or a buffer is NULL. */
CLF_API clf_status clf_gguf_dequantize(unsigned ggml_type, const void *src, uint64_t n, float *dst);

/* Reads a NumPy .npy file (format 1.0, 2.0 or 3.0) into `out`: dtype "<f4"
 * (CLF_F32), "<f2" (CLF_F16), "<i4" (CLF_I32) or "<i8" (CLF_I64), C order,
 * 0 to CLF_MAX_DIMS dims (0: a scalar with one element).  out->data is
 * malloc'd (free it with clf_array_free); out->name is the file's name
 * without directory and ".npy" (truncated to 63 bytes).  Errors, with the
 * message in clf_last_error(NULL) naming the file: CLF_E_NOT_FOUND,
 * CLF_E_IO, CLF_E_FORMAT (bad magic or header, fortran_order True, data
 * truncated or followed by extra bytes), CLF_E_DTYPE (any other descr, which
 * the message names), CLF_E_OUT_OF_MEMORY.  On failure out->data is NULL. */
CLF_API clf_status clf_npy_read(const char *path, clf_array *out);
/* Writes `a` as a .npy file (format 1.0, byte for byte as numpy.save
 * writes it; an existing file is replaced).  a->ndim is 0..CLF_MAX_DIMS;
 * a->data may be NULL only when the array is empty.  Errors in
 * clf_last_error(NULL): CLF_E_INVALID_ARG, CLF_E_DTYPE, CLF_E_IO (the
 * partly written file is removed). */
CLF_API clf_status clf_npy_write(const char *path, const clf_array *a);

/* ------------------------------------------------------------------------ */
/* Models. */

/* A Hugging Face model directory loaded onto a context: config.json (plus
 * generation_config.json) and model.safetensors.  Families, by `model_type`
 * and `architectures`:
 *   "bert" (BertModel: last_hidden_state, pooler_output when the checkpoint
 *     has a pooler) and its heads, with transformers' output names first:
 *     BertForMaskedLM: logits [B, L, vocab] (decoder tied to the word
 *     embeddings unless tie_word_embeddings is false); BertForPreTraining:
 *     prediction_logits, seq_relationship_logits [B, 2];
 *     BertForSequenceClassification: logits [B, num_labels] (num_labels:
 *     id2label's, else num_labels, else 2); BertForTokenClassification:
 *     logits [B, L, num_labels]; BertForQuestionAnswering: start_logits,
 *     end_logits [B, L]; BertForNextSentencePrediction: logits [B, 2].
 *   "roberta" and "xlm-roberta" (RobertaModel, XLMRobertaModel and their
 *     ForMaskedLM, ForSequenceClassification, ForTokenClassification,
 *     ForQuestionAnswering, with BERT's output names): position ids, unless
 *     given, are made from input_ids as transformers 4.40 makes them
 *     (padding_idx = pad_token_id at padding tokens, else padding_idx + the
 *     count of non-padding tokens so far; a row whose positions pass
 *     max_position_embeddings is CLF_E_SHAPE); the sequence classifier is
 *     out_proj(tanh(dense(h[:, 0]))), with no pooler.
 *   "distilbert" (DistilBertModel and the same four heads): inputs
 *     input_ids and attention_mask only (no token types, no position_ids);
 *     the sequence classifier is classifier(relu(pre_classifier(h[:, 0]))).
 *   "gpt2" (GPT2Model, GPT2LMHeadModel: logits [B, L, vocab],
 *     last_hidden_state; GPT2ForSequenceClassification: logits
 *     [B, num_labels] at the token before each row's first pad_token_id,
 *     modulo L, as transformers 4.40 picks it (the last token without
 *     pad_token_id, which only batch 1 may use: CLF_E_INVALID_ARG for more);
 *     GPT2ForTokenClassification: logits [B, L, num_labels]).
 *   The head is the first of config.json's architectures; a checkpoint of
 *   any head also gives last_hidden_state (and pooler_output with a pooler)
 *   and runs as its base model when only those are asked: a head's GEMMs
 *   run only for its outputs.  The weights of other heads are not read;
 *   a missing weight of the head is CLF_E_NOT_FOUND naming it.
 *   "llama", "mistral", "qwen2" (LlamaModel, MistralModel, Qwen2Model:
 *     last_hidden_state; *ForCausalLM: logits, last_hidden_state; inputs
 *     input_ids, attention_mask, position_ids (default 0..L-1); RoPE scaling
 *     linear, dynamic (sequences up to factor x max_position_embeddings) and
 *     llama3, others CLF_E_UNSUPPORTED; as transformers 4.46).
 *   "marian" (MarianModel, MarianMTModel), and the vision
 *   families, which take "pixel_values" f32 [B, C, H, W] (C = num_channels,
 *   else CLF_E_SHAPE; missing: CLF_E_INVALID_ARG):
 *   "vit" (ViTModel: last_hidden_state, pooler_output when the checkpoint has
 *     a pooler; ViTForImageClassification: logits, last_hidden_state).  H and
 *     W must be multiples of patch_size.  There is no interpolate_pos_encoding
 *     input: when the patch count differs from the config's image_size or the
 *     image is not square, the positions are interpolated as transformers
 *     4.40 does with interpolate_pos_encoding=True (bicubic, computed on the
 *     host once per grid and cached).
 *   "swin" (SwinModel: last_hidden_state, pooler_output;
 *     SwinForImageClassification: logits, last_hidden_state, pooler_output).
 *     Any H, W (zero-padded to the patch as transformers does); any depths,
 *     heads, window size.  Where a stage's map is smaller than the window,
 *     the window shrinks to the map with no shift (a map smaller than the
 *     window is an error in transformers; here the bias table is indexed by
 *     the offsets inside the smaller window).  use_absolute_embeddings is
 *     not supported.
 *   "vit_mae" (ViTMAEModel: last_hidden_state, mask, ids_restore;
 *     ViTMAEForPreTraining: logits, mask, ids_restore, loss,
 *     last_hidden_state).  H, W must equal image_size.  Optional input
 *     "noise" f32 [B, L] (L patches; other shapes CLF_E_SHAPE): a patch is
 *     kept when its noise is among the int(L * (1 - mask_ratio)) smallest.
 *     Without noise, noise is drawn from splitmix64 seeded with 0 when the
 *     model is loaded (uniform (x >> 40) / 2^24), the sequence continuing
 *     from run to run.  mask is f32 (1 = removed), ids_restore i64, loss a
 *     0-dim f32 (mean over removed patches of the per-patch MSE; with
 *     norm_pix_loss the target is normalised per patch with the unbiased
 *     variance + 1e-6), computed on the host. */
typedef struct clf_model clf_model;

/* Loads the model in `model_dir` onto ctx (weights uploaded as f32).  Errors
 * (recorded on ctx, *out NULL): CLF_E_UNSUPPORTED naming an unknown
 * model_type, architecture or activation; CLF_E_NOT_FOUND naming a missing
 * tensor; CLF_E_SHAPE naming a tensor of the wrong shape; CLF_E_FORMAT for a
 * missing or mistyped config key.  The model borrows ctx, which must outlive
 * it; free it with clf_model_destroy. */
CLF_API clf_status clf_model_load(clf_context *ctx, const char *model_dir,
                                  clf_model **out);

/* How clf_model_load_with loads a model. */
typedef struct clf_model_options {
  /* Storage of the weights of every linear layer (attention projections,
   * MLPs, task heads; a tied LM head gets its own copy): CLF_F32, CLF_F16,
   * CLF_Q8_0, CLF_Q4_0, CLF_Q4_K or CLF_Q6_K, converted from the
   * checkpoint's tensors at load (a GGUF file's decoded first; the k-quants
   * made as ggml's reference quantizers make them), or CLF_STORED (the
   * default of clf_model_options_init and of NULL options): a Hugging Face
   * checkpoint's as f32; a GGUF file's as the file stores them (F16, Q8_0,
   * Q4_0, Q4_1, Q5_0, Q5_1, Q2_K ... Q6_K: the blocks as they are), F32 and
   * BF16 as f32, and where one layer fuses tensors of different types (q, k
   * and v; gate and up), those as f32.  Embeddings, norms, biases and
   * convolutions stay f32.  CLF_Q8_0 and CLF_Q4_0 need every such layer's
   * input width to be a multiple of 32 (else CLF_E_UNSUPPORTED naming the
   * tensor); CLF_Q4_K and CLF_Q6_K store a layer whose width is not a
   * multiple of 256 as ggml's quantize tool does: Q4_K's in Q5_0, Q6_K's in
   * Q8_0, and either in F16 where the width is not a multiple of 32. */
  clf_dtype weights;
  /* Non-zero: store the linear weights as f32 holding the values `weights`
   * would hold (rounded through the type and back), so that the type's
   * rounding can be measured apart from its kernels. */
  int simulate;
  /* Called after each tensor is loaded with the f32 bytes read so far and
   * the total (NULL: none); the command line draws a progress line with it
   * on a terminal. */
  void (*progress)(void *user, size_t done, size_t total);
  void *progress_user;
} clf_model_options;

/* Fills `o` with the defaults (CLF_STORED weights). */
CLF_API void clf_model_options_init(clf_model_options *o);
/* clf_model_load with options (NULL: the defaults).  Before anything is
 * uploaded, CLF_E_INVALID_ARG for a weight type that is not one of the
 * four, and CLF_E_OUT_OF_MEMORY when the weights in that type would not fit
 * in the device's global memory (naming both sizes). */
CLF_API clf_status clf_model_load_with(clf_context *ctx, const char *model_dir,
                                       const clf_model_options *opts,
                                       clf_model **out);
/* Device bytes the model's parameters hold (0 for NULL). */
CLF_API size_t clf_model_weight_bytes(const clf_model *m);
/* The storage type of its linear layers' weights (CLF_F32 for NULL). */
CLF_API clf_dtype clf_model_weight_type(const clf_model *m);
/* The longest sequence generation may make: the rows of the position table
 * (n_positions, max_position_embeddings, a GGUF file's context_length); 0
 * for NULL or a model that does not generate. */
CLF_API size_t clf_model_max_positions(const clf_model *m);
/* Frees the model and its device memory.  NULL is accepted. */
CLF_API void clf_model_destroy(clf_model *m);
/* The config's model_type: "bert", "roberta", "xlm-roberta", "distilbert",
 * "gpt2", "marian", "llama", "mistral", "qwen2", "vit", "swin" or "vit_mae"
 * (static string). */
CLF_API const char *clf_model_type(const clf_model *m);
/* How clf_model_embed pools a text's hidden states (static string): "mean"
 * for a Hugging Face directory; a GGUF file's {arch}.pooling_type: "none"
 * (also when the key is absent, as llama.cpp takes it), "mean", "cls",
 * "last" or "rank"; NULL for NULL. */
CLF_API const char *clf_model_pooling(const clf_model *m);
/* The input / output names the model takes / produces (Hugging Face
 * forward() argument and output names): *names receives a static array,
 * the count is returned. */
CLF_API size_t clf_model_input_names(const clf_model *m,
                                     const char *const **names);
CLF_API size_t clf_model_output_names(const clf_model *m,
                                      const char *const **names);

/* One forward pass on host arrays.  inputs[i].name says which input it is;
 * ids and masks are i32 or i64 [B, L], float inputs f32.  results[i]
 * receives outputs[i] (name set, data malloc'd: free with clf_array_free).
 * Unknown or missing input names and unknown output names fail with
 * CLF_E_INVALID_ARG listing the valid ones; wrong dtypes (CLF_E_DTYPE) or
 * shapes (CLF_E_SHAPE) name the input.  On failure no result holds data.
 * Blocks until the outputs are on the host.
 *
 * Ids outside the model's tables (vocabulary, positions, token types) fail
 * with CLF_E_INVALID_ARG naming the position and the table.  A sequence
 * whose attention_mask is all 0 is where clformer and transformers differ:
 * transformers adds the dtype's minimum to every score, so each query
 * attends to all keys uniformly; clformer masks them out, and such a row's
 * attention output is 0.  Rows that attend to at least one key agree (the
 * golden tests skip only positions whose mask is 0, as users do). */
CLF_API clf_status clf_model_run(clf_model *m, const clf_array *inputs,
                                 size_t n_inputs, const char *const *outputs,
                                 size_t n_outputs, clf_array *results);

/* The class labels of config.json's id2label, read by clf_model_load:
 * clf_model_num_labels is one past the largest index given (0 when the
 * config has no id2label, or for a NULL model); clf_model_label returns
 * label i, or NULL when id2label does not name index i (or i is out of
 * range, or m is NULL).  The string is owned by the model and lives until
 * clf_model_destroy. */
CLF_API size_t clf_model_num_labels(const clf_model *m);
CLF_API const char *clf_model_label(const clf_model *m, size_t i);

/* For a vit_mae model: the image the decoder predicts, from pixel_values
 * f32 [B, C, H, W] (the model's input) and logits f32 [B, L, P*P*C] (its
 * output; L = (H/P)(W/P), patches row-major, (p, q, c) within a patch).
 * With norm_pix_loss each predicted patch is un-normalised with the mean
 * and unbiased standard deviation (+ 1e-6 under the root) of the same
 * patch of pixel_values, as ViTMAE's loss normalised it; the patches are
 * then unpatchified into *out: f32 [B, C, H, W] named "reconstruction", in
 * pixel_values space (still normalised by the image processor), every
 * patch predicted (masked or not).  out->data is malloc'd: free it with
 * clf_array_free; on failure *out holds no data.  Host-only (no device
 * work).  Errors (recorded on the model's context): CLF_E_INVALID_ARG for
 * NULL arguments; CLF_E_UNSUPPORTED when m is not a vit_mae model;
 * CLF_E_DTYPE / CLF_E_SHAPE naming pixel_values or logits when they are not
 * f32 of the shapes above (C the config's num_channels, H and W multiples
 * of patch_size). */
CLF_API clf_status clf_model_mae_reconstruct(clf_model *m,
                                             const clf_array *pixel_values,
                                             const clf_array *logits,
                                             clf_array *out);

/* In clf_generate_options: turns a setting off whatever the checkpoint says
 * (do_sample, top_k, min_p, no_repeat_ngram_size). */
#define CLF_GENERATE_OFF (-1)

/* How generate() decodes.  Every field's 0 means "unset": the checkpoint's
 * generation_config.json (or config.json) value, else transformers 4.40's
 * GenerationConfig default, which the comments give. */
typedef struct clf_generate_options {
  /* New tokens at most; 0: the checkpoint's max_length decides. */
  size_t max_new_tokens;
  /* Beams; 0: the checkpoint's num_beams (default 1 = greedy). */
  size_t num_beams;
  /* 1: multinomial sampling; CLF_GENERATE_OFF: greedy or beam search even
   * when the checkpoint samples (default false).  The four settings below
   * it apply only when sampling, as in transformers. */
  int do_sample;
  /* The scores are divided by it; > 0 (default 1.0). */
  double temperature;
  /* Only the top_k highest scores (and those tied with the k-th) stay;
   * >= 1, CLF_GENERATE_OFF: no top-k (default 50). */
  long top_k;
  /* Nucleus: the smallest set of the highest probabilities whose sum
   * reaches top_p stays; in (0, 1], 1: off (default 1.0). */
  double top_p;
  /* Probabilities below min_p times the highest go; in [0, 1],
   * CLF_GENERATE_OFF: off (default off).  Transformers 4.40 has no min_p:
   * this is 4.41's MinPLogitsWarper, applied after top_p. */
  double min_p;
  /* Scores of tokens already in the sequence (the prompt included for
   * decoder-only models): divided by it when positive, multiplied when
   * negative; > 0, 1: off (default 1.0).  Also in greedy and beam search. */
  double repetition_penalty;
  /* No n-gram of this size occurs twice in a sequence (prompt included);
   * CLF_GENERATE_OFF: off (default 0, off).  Also in greedy and beam search. */
  long no_repeat_ngram_size;
  /* The sampler's seed (xoshiro256** seeded through splitmix64, one state
   * per call, rows drawn in order at each step): the same seed, model,
   * inputs and options give the same tokens.  0: a fresh seed per call. */
  uint64_t seed;
  /* Streaming: called after each step with each unfinished batch row's new
   * token (the EOS token that ends a row included; rows already finished
   * are not reported), in row order.  A non-zero return stops generation
   * after this step: *sequences then holds the tokens so far.  Not
   * supported with beam search (num_beams > 1: CLF_E_INVALID_ARG), whose
   * tokens are known only at the end.  NULL: none. */
  int (*on_token)(void *user, size_t row, int64_t token);
  void *user; /* passed to on_token */
  /* The end-of-sequence tokens, replacing the checkpoint's eos_token_id
   * (and, as in transformers, the pad token when the checkpoint has none);
   * n_eos_token_ids 0: the checkpoint's.  At most 8, each >= 0, else
   * CLF_E_INVALID_ARG. */
  const int64_t *eos_token_ids;
  size_t n_eos_token_ids;
} clf_generate_options;

/* Fills `o` with the defaults (all 0: every setting unset). */
CLF_API void clf_generate_options_init(clf_generate_options *o);

/* The generation settings as people give them, one row each: the command
 * line's options (--max-new-tokens: the name with '-' for '_'), the
 * keyword arguments of Python's Model.generate (GenerationSettings) and
 * the fields of the server's completion requests all come from this list,
 * with their types, ranges, defaults and help (clf_generate_setting_at).
 *   X(NAME, name, type, min, max, min excluded, default, flags, metavar, default text, help)
 * A value means the same in the three: seed 0 is a seed (clf_generate_options'
 * seed S + 1), top_k, min_p and no_repeat_ngram_size 0 are off
 * (CLF_GENERATE_OFF), temperature 0 is greedy (do_sample CLF_GENERATE_OFF),
 * and a setting flagged CLF_GEN_SAMPLING, given without do_sample (and
 * temperature not 0), turns sampling on.
 * type: CLF_GEN_INT (a whole number), CLF_GEN_REAL, CLF_GEN_BOOL.
 * min, max: the range a value must be in, min itself not when min excluded
 *   is 1 (each an exact double: the integers' bounds are below 2^63).
 * default: the value when neither the caller nor the checkpoint's
 *   generation_config.json gives one (transformers 4.40's GenerationConfig);
 *   not a value where flags hold CLF_GEN_NO_DEFAULT.
 * default text: the default in words, as the help states it.
 * flags: CLF_GEN_SAMPLING (only sampling uses it, and it turns sampling
 *   on); CLF_GEN_WHOLE (decodes whole sequences: not where a reply streams
 *   token by token, `clformer chat` and the server); CLF_GEN_NO_DEFAULT. */
#define CLF_GEN_SAMPLING 1
#define CLF_GEN_WHOLE 2
#define CLF_GEN_NO_DEFAULT 4
#define CLF_GENERATE_SETTING_MAP(X)                                                                             \
  X(MAX_NEW_TOKENS, "max_new_tokens", INT, 1, 1000000, 0, 0, CLF_GEN_NO_DEFAULT, "N",                          \
    "generate --prompt, chat, Model.chat: until an end token or the end of the model's positions; else the "   \
    "checkpoint's max_length, else 20 tokens in all", "new tokens at most")                                    \
  X(NUM_BEAMS, "num_beams", INT, 1, 100000, 0, 1, CLF_GEN_WHOLE, "K", "the checkpoint's, else 1",              \
    "beam search with K beams; 1: greedy or sampling")                                                        \
  X(DO_SAMPLE, "do_sample", BOOL, 0, 1, 0, 0, 0, NULL,                                                         \
    "the checkpoint's, else off; on when a sampling setting is given",                                        \
    "multinomial sampling; off: greedy or beam search, even where the checkpoint samples")                    \
  X(TEMPERATURE, "temperature", REAL, 0, 1e6, 0, 1, CLF_GEN_SAMPLING, "T", "the checkpoint's, else 1",         \
    "sampling: the scores divided by T; 0: greedy")                                                           \
  X(TOP_K, "top_k", INT, 0, 100000000, 0, 50, CLF_GEN_SAMPLING, "K", "the checkpoint's, else 50",              \
    "sampling: keep the K highest scores (and those tied with the K-th); 0: no top-k")                        \
  X(TOP_P, "top_p", REAL, 0, 1, 1, 1, CLF_GEN_SAMPLING, "P", "the checkpoint's, else 1 (off)",                 \
    "sampling: keep the smallest set of the highest probabilities that reaches P; 1: off")                    \
  X(MIN_P, "min_p", REAL, 0, 1, 0, 0, CLF_GEN_SAMPLING, "P", "the checkpoint's, else 0 (off)",                 \
    "sampling: drop the probabilities below P times the highest; 0: off")                                    \
  X(REPETITION_PENALTY, "repetition_penalty", REAL, 0, 1e6, 1, 1, 0, "R", "the checkpoint's, else 1 (off)",    \
    "scores of the tokens already in the sequence divided by R (multiplied when negative); 1: off")           \
  X(NO_REPEAT_NGRAM_SIZE, "no_repeat_ngram_size", INT, 0, 100000, 0, 0, 0, "N",                                \
    "the checkpoint's, else 0 (off)", "no N-gram twice in a sequence; 0: off")                                \
  X(SEED, "seed", INT, 0, 9e18, 0, 0, CLF_GEN_NO_DEFAULT, "S", "a fresh one each time",                        \
    "the sampler's seed, 0 included: the same seed, model, prompt and settings give the same tokens")

/* The rows' positions: CLF_GEN_TOP_K is top_k's i for clf_generate_setting_at. */
typedef enum clf_generate_setting_id {
#define CLF__GEN_ID(NAME, ...) CLF_GEN_##NAME,
  CLF_GENERATE_SETTING_MAP(CLF__GEN_ID)
#undef CLF__GEN_ID
  CLF_GEN_SETTING_COUNT
} clf_generate_setting_id;

typedef enum clf_generate_setting_type { CLF_GEN_INT, CLF_GEN_REAL, CLF_GEN_BOOL } clf_generate_setting_type;

/* One row of CLF_GENERATE_SETTING_MAP, for command lines, bindings and
 * servers that take the settings instead of copying them.  The strings
 * are static. */
typedef struct clf_generate_setting {
  const char *name;               /* "top_k": Python's keyword, the server's field */
  clf_generate_setting_type type;
  double min, max;                /* the range; min itself excluded when min_excluded */
  int min_excluded;
  int has_default;                /* 0: no value is the default (default_text says what happens) */
  double default_value;           /* transformers' default, when has_default */
  int sampling;                   /* CLF_GEN_SAMPLING: only sampling uses it, and it turns sampling on */
  int whole;                      /* CLF_GEN_WHOLE: not where a reply streams (chat, the server) */
  const char *metavar;            /* "K" for the help ("--top-k K"); NULL for a flag */
  const char *default_text;       /* "the checkpoint's, else 50" */
  const char *help;               /* one line */
} clf_generate_setting;

/* The rows of CLF_GENERATE_SETTING_MAP (CLF_GEN_SETTING_COUNT). */
CLF_API size_t clf_generate_setting_count(void);
/* Row i (< clf_generate_setting_count(), in the map's order: a
 * clf_generate_setting_id) into *out; CLF_E_INVALID_ARG past the end or
 * for a NULL out. */
CLF_API clf_status clf_generate_setting_at(size_t i, clf_generate_setting *out);

/* 1 when m is an encoder-decoder model (Marian: input_ids is the source and
 * sequences start with the decoder start token), 0 for a decoder-only one
 * (sequences start with the prompt) or m NULL. */
CLF_API int clf_model_is_encoder_decoder(const clf_model *m);

/* Decoding as transformers' generate(): greedy (num_beams 1), multinomial
 * sampling (do_sample) or beam search (num_beams > 1), honouring the
 * checkpoint's decoder_start_token_id, eos_token_id, pad_token_id,
 * bad_words_ids, forced_eos_token_id, max_length, length_penalty,
 * early_stopping and the sampling settings above.  The scores go through
 * the processors (repetition penalty, no-repeat n-grams, bad words, min
 * length, forced BOS/EOS) and, when sampling, the warpers (temperature,
 * top-k, top-p, min-p) in transformers' order; the token is then drawn
 * from their softmax.  input_ids [B, L] i32/i64 (the prompt of a
 * decoder-only model, the source of an encoder-decoder); attention_mask
 * [B, L] or NULL (all ones).  `o` may be NULL.  *sequences receives i64
 * [B, T] (the prompt followed by the new tokens, or the decoder start token
 * followed by the new tokens; finished rows padded with pad_token_id), data
 * malloc'd: free with clf_array_free.  Errors: CLF_E_UNSUPPORTED for a
 * model without an LM head, a checkpoint setting not implemented (named),
 * or sampling with beams; CLF_E_INVALID_ARG naming the option for a value
 * out of range (temperature <= 0 when sampling, top_p outside (0, 1],
 * negative top_k, min_p outside [0, 1], repetition_penalty <= 0, negative
 * no_repeat_ngram_size, on_token with beams). */
CLF_API clf_status clf_model_generate(clf_model *m,
                                      const clf_array *input_ids,
                                      const clf_array *attention_mask,
                                      const clf_generate_options *o,
                                      clf_array *sequences);

/* ------------------------------------------------------------------------ */
/* The engine: many sequences of one decoder model decoded together. */

/* Each step of an engine runs one forward pass over the rows of every
 * running sequence (one new token of each decoding sequence, a chunk of
 * prompt of each starting one, within a budget of rows per step) and hands
 * each sequence the token it samples with its own settings.  Keys and
 * values live in a paged cache: fixed-size blocks of positions from one
 * pool, taken as a sequence grows and returned when it ends.  Full blocks
 * are kept by their tokens and everything before them, so a request whose
 * prompt starts as an earlier one did (a system prompt, an earlier turn)
 * reuses those blocks instead of computing them, but only under the same
 * isolation key.  When the pool is full, new sequences wait; a running
 * sequence that needs a block takes it from the newest running one, which
 * waits and is recomputed later (same tokens).  docs/engine.md has the
 * design and a worked example.
 *
 * Threads: clf_engine_submit, clf_engine_cancel and clf_engine_stats_get
 * may be called from any thread while another steps, and report their
 * failures through clf_last_error(NULL), the calling thread's (the
 * context's record belongs to the stepping thread); one thread steps at a
 * time (clf_engine_step serialises callers).  While an engine exists the
 * model is its: run nothing else on m (clf_model_run, generate, chat).
 * Decoder-only models (GPT-2, Llama, Mistral, Qwen2 and those of GGUF
 * files), every weight type; not encoder-decoders, not rope_scaling
 * "dynamic" (whose frequencies follow the longest sequence). */
typedef struct clf_engine clf_engine;

typedef struct clf_engine_options {
  /* Device memory for the block pool, in bytes; 0: a quarter of the
   * device's global memory left after the model's weights, at most what
   * max_sequences sequences of the model's full length take. */
  size_t kv_bytes;
  /* Positions per block; 0: 16. */
  size_t block_size;
  /* Rows of one step (decode rows and prompt chunks together); a prompt
   * longer than what is left of it is fed in chunks.  0: on a CPU device
   * the rows one launch of the quantized/f32 matrix-vector product takes
   * (64, or what `clformer probe --tune` measured), elsewhere 256. */
  size_t max_step_rows;
  /* Sequences running at once (the rest wait); 0: 64. */
  size_t max_sequences;
  /* The pool's element type: CLF_F32 (0, the default) or CLF_F16 (half
   * the memory a position, so twice the positions in kv_bytes; keys and
   * values rounded to f16, read back to f32 in attention).  Any device:
   * f16 storage needs no cl_khr_fp16. */
  clf_dtype kv_dtype;
} clf_engine_options;

/* Why a sequence ended: X(NAME, value, name) for CLF_FINISH_NAME, whose
 * name clf_finish_name gives:
 *   EOS       it sampled an end-of-sequence token (reported as a token)
 *   LENGTH    its max_new_tokens
 *   CONTEXT   the model's positions (no max_new_tokens, or a larger one)
 *   STOPPED   its on_token (or allowed) returned non-zero: a stop string
 *   CANCELLED clf_engine_cancel, or clf_engine_destroy
 *   ERROR     a step failed, or its token mask left nothing (the message
 *             is passed) */
#define CLF_FINISH_MAP(X) \
  X(EOS, 1, "eos")        \
  X(LENGTH, 2, "length")  \
  X(CONTEXT, 3, "context") \
  X(STOPPED, 4, "stopped") \
  X(CANCELLED, 5, "cancelled") \
  X(ERROR, 6, "error")
typedef enum clf_finish_reason {
#define CLF__FINISH_ENUM(NAME, value, name) CLF_FINISH_##NAME = value,
  CLF_FINISH_MAP(CLF__FINISH_ENUM)
#undef CLF__FINISH_ENUM
} clf_finish_reason;
/* "eos", "length", ... ; "unknown" for another value.  Static. */
CLF_API const char *clf_finish_name(clf_finish_reason why);

/* How a sequence ended, passed to its on_done. */
typedef struct clf_sequence_end {
  clf_finish_reason why;
  const char *error;    /* CLF_FINISH_ERROR's message, else NULL; valid during the call */
  size_t prompt_tokens; /* the prompt's */
  size_t new_tokens;    /* tokens generated (reported to on_token) */
  size_t cached_tokens; /* prompt positions taken from the prefix cache, not computed */
} clf_sequence_end;

/* A chosen token with its log-probability and the most probable
 * alternatives (most probable first; ties by lower id). */
typedef struct clf_token_info {
  int64_t token;
  float logprob;
  size_t n_top;
  const int64_t *top_tokens; /* [n_top], valid during the call */
  const float *top_logprobs; /* [n_top] */
} clf_token_info;

typedef struct clf_engine_request {
  /* The prompt: n_ids token ids (at least 1), copied at submission. */
  const int64_t *ids;
  size_t n_ids;
  /* Sampling and stopping as clf_model_generate takes them (one beam;
   * on_token there is not used): max_new_tokens (0: until an
   * end-of-sequence token or the model's positions), do_sample,
   * temperature, top_k, top_p, min_p, repetition_penalty,
   * no_repeat_ngram_size, seed (0: a fresh one) and eos_token_ids.  The
   * same settings and seed give the tokens clf_model_generate gives for
   * the prompt alone.  NULL: defaults. */
  const clf_generate_options *options;
  /* Prefix reuse happens only between requests of the same key (a server
   * passes its client's identity); 0 is a key like any other. */
  uint64_t isolation;
  /* Called from the stepping thread with each new token of the sequence;
   * non-zero ends it (CLF_FINISH_STOPPED: a stop string found by the
   * caller).  NULL: none. */
  int (*on_token)(void *user, uint64_t id, int64_t token);
  /* Called once when it ends, from the stepping thread (or from
   * clf_engine_destroy, with CLF_FINISH_CANCELLED).  NULL: none. */
  void (*on_done)(void *user, uint64_t id, const clf_sequence_end *end);
  void *user;
  /* Sequences made from this prompt (0 and 1: one).  The prompt is
   * computed once; the copies share its blocks (a block is copied when a
   * copy first writes to one it shares) and each draws its own tokens from
   * the prompt's logits on: copy i samples with seed + i (seed 0: fresh
   * seeds).  Their ids are *id, *id + 1, ... *id + n - 1; the callbacks
   * get each copy's id.  At most CLF_ENGINE_MAX_N.  Cancelling the first
   * before its prompt is computed cancels every copy. */
  size_t n;
  /* Non-NULL: called instead of on_token, with the token's log-probability
   * and, when top_logprobs > 0, that many of the most probable tokens.
   * Log-probabilities are the model's: the log-softmax of its logits
   * before any processor, warper or mask. */
  int (*on_token_info)(void *user, uint64_t id, const clf_token_info *info);
  size_t top_logprobs; /* at most CLF_ENGINE_MAX_TOP_LOGPROBS */
  /* Constrained decoding: non-NULL, called before each token is chosen
   * with the sequence's tokens so far (n, the prompt's first) and a mask
   * of ceil(vocab / 32) words, all bits set; clearing bit (t % 32) of
   * word t / 32 forbids token t (a grammar's next-token mask).  Forbidden
   * tokens are never chosen (if every token is, the sequence ends with
   * CLF_FINISH_ERROR).  Non-zero ends the sequence (CLF_FINISH_STOPPED). */
  int (*allowed)(void *user, uint64_t id, const int64_t *tokens, size_t n, uint32_t *mask, size_t vocab);
} clf_engine_request;

#define CLF_ENGINE_MAX_N 128
#define CLF_ENGINE_MAX_TOP_LOGPROBS 20


typedef struct clf_engine_stats {
  size_t blocks, block_size;     /* the pool: blocks of block_size positions */
  size_t block_bytes;            /* device memory of one block (every layer's keys and values) */
  size_t blocks_used;            /* held by running sequences */
  size_t blocks_cached;          /* free but holding a prefix that can be reused */
  size_t running, waiting;       /* sequences */
  size_t prefix_tokens_reused;   /* prompt positions taken from the cache instead of computed, in all */
  size_t preemptions;            /* sequences sent back to wait, in all */
  size_t blocks_copied;          /* copies on write (clf_engine_request.n), in all */
  size_t steps, rows;            /* steps run and their rows, in all */
  /* A model whose layers mix windowed and full ones (Gemma 3, Qwen3 with
   * use_sliding_window): the windowed layers' blocks, apart (the fields
   * above are the full layers'), of which a sequence holds only its
   * window's; 0 for other models. */
  size_t window_blocks, window_block_bytes, window_blocks_used;
} clf_engine_stats;

CLF_API void clf_engine_options_init(clf_engine_options *o);
/* An engine over m (which must outlive it).  Errors: CLF_E_UNSUPPORTED
 * for a model it cannot run (named why), CLF_E_INVALID_ARG for options
 * out of range, CLF_E_OUT_OF_MEMORY when the pool cannot be allocated. */
CLF_API clf_status clf_engine_create(clf_model *m, const clf_engine_options *o, clf_engine **out);
/* Queues a sequence (n of them: clf_engine_request.n); *id (may be NULL)
 * receives its id (never 0).
 * CLF_E_INVALID_ARG for a bad request (an id outside the vocabulary, a
 * prompt that leaves no position to generate, settings out of range, or
 * one that could never fit in the pool). */
CLF_API clf_status clf_engine_submit(clf_engine *e, const clf_engine_request *r, uint64_t *id);
/* Ends sequence `id` at the next step (on_done with CLF_FINISH_CANCELLED);
 * CLF_E_INVALID_ARG when no such sequence is queued or running. */
CLF_API clf_status clf_engine_cancel(clf_engine *e, uint64_t id);
/* Runs one step; *pending (may be NULL) receives the sequences still
 * queued or running after it.  A failed step ends the sequences it ran
 * with CLF_FINISH_ERROR and returns the error; the engine stays usable. */
CLF_API clf_status clf_engine_step(clf_engine *e, size_t *pending);
/* Steps until no sequence is queued or running. */
CLF_API clf_status clf_engine_run(clf_engine *e);
CLF_API clf_status clf_engine_stats_get(clf_engine *e, clf_engine_stats *s);
/* Cancels what is left (on_done with CLF_FINISH_CANCELLED) and frees. */
CLF_API void clf_engine_destroy(clf_engine *e);

/* ------------------------------------------------------------------------ */
/* Tokenizers. */

/* A tokenizer read from a Hugging Face model directory.  Host-only: it needs
 * no context, and its failures are reported through clf_last_error(NULL).
 * Behaviour follows transformers' slow tokenizers (BertTokenizer,
 * GPT2Tokenizer, MarianTokenizer, RobertaTokenizer, XLMRobertaTokenizer),
 * including special tokens written in the text ("[SEP]", "<|endoftext|>",
 * "</s>"), which encode to their ids, and for tokenizer.json the Hugging
 * Face `tokenizers` library (as transformers' fast tokenizers run it). */
typedef struct clf_tokenizer clf_tokenizer;

/* Loads the tokenizer in `model_dir`:
 *  - BERT WordPiece: vocab.txt, with tokenizer_config.json's do_lower_case,
 *    strip_accents, tokenize_chinese_chars;
 *  - GPT-2 byte-level BPE: vocab.json + merges.txt, add_prefix_space;
 *    RoBERTa's is the same files with <s> X </s> and <mask>;
 *  - Marian SentencePiece: source.spm + target.spm + vocab.json;
 *  - XLM-R: sentencepiece.bpe.model with fairseq's ids (<s> 0, <pad> 1,
 *    </s> 2, <unk> 3, piece + 1, <mask> last);
 *  - tokenizer.json, BPE models only: byte-level BPE with the checkpoint's
 *    Split pattern (Llama 3, Qwen2, SmolLM) and SentencePiece-style BPE with
 *    "\u2581" and byte fallback (Llama 2, TinyLlama, Mistral); its
 *    normalizers (Prepend, Replace, NFC), pre-tokenizers (Split, ByteLevel,
 *    Metaspace, Digits), post-processor template, decoders (ByteLevel,
 *    Replace, ByteFallback, Fuse, Strip, Metaspace) and added tokens
 *    (lstrip, rstrip, single_word, normalized).  For LlamaTokenizer[Fast]
 *    classes tokenizer_config.json's add_bos_token / add_eos_token set the
 *    special ids added, as transformers does; other classes keep the
 *    file's template.
 * Which one, when several are there: tokenizer_config.json's
 * tokenizer_class, when it names Bert..., GPT2..., Marian..., Roberta... or
 * XLMRoberta... (with or without "Fast") and that tokenizer's files are
 * present; tokenizer.json when the class names another tokenizer
 * (PreTrainedTokenizerFast, LlamaTokenizer, Qwen2Tokenizer, ...); without a
 * class, config.json's model_type "roberta" / "xlm-roberta"; else the slow
 * files (as before tokenizer.json was read: a directory with vocab.txt and
 * tokenizer.json keeps BertTokenizer's behaviour), then tokenizer.json.  A
 * tokenizer.json of a kind not read here beside slow files (DistilBERT's
 * WordPiece one with vocab.txt, class DistilBertTokenizer) falls back to
 * the slow files; alone, it is CLF_E_UNSUPPORTED.
 * tokenizer_config.json's special tokens and clean_up_tokenization_spaces
 * (default true) are honoured.  On success *out is freed with
 * clf_tokenizer_destroy.  Errors: CLF_E_NOT_FOUND when none is there
 * (naming what was looked for) or a needed file is missing, CLF_E_FORMAT
 * for a malformed vocab.txt / vocab.json / merges.txt / tokenizer.json /
 * tokenizer_config.json (naming the file and the entry) or an unreadable
 * .spm / .model, CLF_E_UNSUPPORTED for a tokenizer.json whose model is not
 * BPE (WordPiece, Unigram, WordLevel), whose normalizer, pre-tokenizer,
 * post-processor or decoder type is not one of the above, with BPE dropout
 * or subword prefixes, or with a pattern PCRE2 cannot compile (each named
 * with the file), a Marian directory with separate_vocabs, or a library
 * built without SentencePiece (C++14); CLF_E_IO, CLF_E_INVALID_ARG for
 * NULL arguments.
 * A GGUF file (model_dir a regular file, or a directory without config.json
 * holding one .gguf) gives the tokenizer of its tokenizer.ggml.* metadata,
 * as llama.cpp reads it (docs/gguf.md): "gpt2" byte-level BPE with the
 * pre-tokenizer tokenizer.ggml.pre names, or "llama" SentencePiece BPE with
 * merges made from the scores; CLF_E_UNSUPPORTED for another model or pre,
 * CLF_E_FORMAT naming the key for malformed metadata. */
CLF_API clf_status clf_tokenizer_load(const char *model_dir, clf_tokenizer **out);
/* NULL is accepted. */
CLF_API void clf_tokenizer_destroy(clf_tokenizer *t);
/* text (NUL-terminated UTF-8) -> ids.  *ids is malloc'd (free() it; never
 * NULL on success, even when *n is 0).  With add_special the model's special
 * tokens are added: [CLS] .. [SEP] for BERT, <s> .. </s> for RoBERTa and
 * XLM-R, </s> appended for Marian, none for GPT-2, the single-sequence
 * template for tokenizer.json (e.g. <|begin_of_text|> for Llama 3, <s> for
 * Llama 2, none for Qwen2).  CLF_E_INVALID_ARG for NULL arguments or text that is not
 * valid UTF-8 (naming the byte offset). */
CLF_API clf_status clf_tokenizer_encode(clf_tokenizer *t, const char *text, int add_special, int64_t **ids,
                                        size_t *n);
/* ids -> UTF-8 text (*text malloc'd, free() it), dropping special tokens when
 * skip_special; Marian decodes with target.spm.  As transformers does, an id
 * outside the vocabulary decodes to the unk token for BERT and Marian; for
 * GPT-2, RoBERTa and XLM-R it is CLF_E_INVALID_ARG (naming the id); for
 * tokenizer.json it is dropped, as `tokenizers` does.  Byte sequences that
 * are not UTF-8 (byte-level or byte-fallback tokens that split a character)
 * become U+FFFD. */
CLF_API clf_status clf_tokenizer_decode(clf_tokenizer *t, const int64_t *ids, size_t n, int skip_special,
                                        char **text);

/* The vocabulary's entry for `id` as the vocabulary spells it, as
 * transformers' convert_ids_to_tokens gives it ("\u0120world" for GPT-2's
 * " world", "\u2581the" for SentencePiece, "##ing" for WordPiece,
 * "<0x0A>" for a byte-fallback token), borrowed from t.  CLF_E_NOT_FOUND
 * (naming the id) when no token has it; CLF_E_INVALID_ARG for NULL
 * arguments. */
CLF_API clf_status clf_tokenizer_token(const clf_tokenizer *t, int64_t id, const char **token);

/* ------------------------------------------------------------------------ */
/* Chat templates. */

/* A chat template: the Jinja template a model's tokenizer_config.json (or
 * GGUF file) carries, rendered byte for byte as transformers'
 * apply_chat_template renders it (Jinja 3.1's ImmutableSandboxedEnvironment
 * with trim_blocks, lstrip_blocks, loop controls and {% generation %};
 * raise_exception, strftime_now; tojson as json.dumps).  Host-only; no
 * context: errors are in clf_last_error(NULL).  docs/chat.md lists what is
 * implemented (statements, expressions, filters, tests, methods) and the
 * limits on hostile templates: nesting of 200, strings and output of 64
 * MiB, lists of 4 million items, range() of 100000, and a budget per
 * render (clf_template_budget). */
typedef struct clf_chat_template clf_chat_template;

/* What one render may cost: a template is code from a downloaded file, run
 * with client text in it, so its work and memory are bounded.  0 in a field
 * of a budget given to clf_chat_template_set_budget: that field's default.
 * Past any of them a render fails with CLF_E_LIMIT, naming the budget and
 * the template's line:column. */
typedef struct clf_template_budget {
  uint64_t steps;  /* loop iterations, calls, filters and tests applied, list items made, dict entries
                      searched; default 1000000 */
  uint64_t bytes;  /* bytes of text produced, copied or searched (output, +, ~, *, join, replace,
                      format, filters, in, find; a character at a time: 8 or 16
                      a byte); default 128 MiB */
  uint64_t memory; /* bytes of the render's values alive at once (strings, lists, dicts, the
                      output); default 64 MiB */
} clf_template_budget;
/* The defaults into *b. */
CLF_API void clf_template_budget_default(clf_template_budget *b);

/* One message: role ("system", "user", "assistant", "tool", ...) and its
 * text (NULL: None), both UTF-8, borrowed. */
typedef struct clf_chat_message {
  const char *role;
  const char *content;
} clf_chat_message;

/* Parses `source` (UTF-8).  On success *out is freed with
 * clf_chat_template_destroy.  Errors: CLF_E_UNSUPPORTED for a construct not
 * implemented, named with its line:column ("unsupported filter 'xmlattr'
 * at 3:14", "unsupported statement 'include' at 1:3"), or nesting past the
 * limit; CLF_E_FORMAT for a syntax error, with its line:column;
 * CLF_E_INVALID_ARG for NULL arguments; CLF_E_OUT_OF_MEMORY. */
CLF_API clf_status clf_chat_template_parse(const char *source, clf_chat_template **out);
/* NULL is accepted. */
CLF_API void clf_chat_template_destroy(clf_chat_template *t);
/* The budget every later render of t runs under (NULL or zero fields: the
 * defaults).  Set it before t is shared between threads.  Errors:
 * CLF_E_INVALID_ARG for a NULL t. */
CLF_API clf_status clf_chat_template_set_budget(clf_chat_template *t, const clf_template_budget *budget);
/* Renders messages[0 .. n) with add_generation_prompt (0 / 1) and the
 * template's own variables (the special tokens when it came from
 * clf_tokenizer_chat_template; tools and documents None) into *text
 * (malloc'd, free() it; NULL on failure).  Errors: CLF_E_INVALID_ARG for
 * NULL arguments (messages may be NULL when n is 0; a NULL role) or a
 * template error while rendering: raise_exception("...") (its text
 * verbatim in the message), an attribute or item of an undefined value, a
 * type error, a limit passed; CLF_E_OUT_OF_MEMORY. */
CLF_API clf_status clf_chat_template_render(const clf_chat_template *t, const clf_chat_message *messages,
                                            size_t n, int add_generation_prompt, char **text);
/* The same with the whole context as a JSON object (UTF-8):
 * {"messages": [...], "add_generation_prompt": true, "tools": [...],
 * "date_string": "26 Jul 2024", any variable}; its keys override the
 * template's own variables.  Tool calls, tool results and content lists
 * reach the template this way (messages as OpenAI's API has them).  JSON
 * numbers are read as Python's json.loads reads them (1 an int, 1.0 a
 * float), except ints past 64 bits, which become floats.  Errors:
 * those of clf_chat_template_render; CLF_E_INVALID_ARG for text that is not
 * JSON or not an object, or with a string holding a NUL character (\u0000),
 * which a C string cannot carry ("messages[1].content contains a NUL
 * character", as the server says it). */
CLF_API clf_status clf_chat_template_render_json(const clf_chat_template *t, const char *context_json,
                                                 char **text);
/* Renders as clf_chat_template_render_json does, and reports what the
 * render cost in *cost (steps and bytes used, memory: the most alive at
 * once), also when it failed on its budget.  For sizing budgets. */
CLF_API clf_status clf_chat_template_render_cost(const clf_chat_template *t, const char *context_json, char **text,
                                                 clf_template_budget *cost);
/* The chat template of a tokenizer: tokenizer_config.json's chat_template
 * (a string, or of a list of {"name", "template"} the one named "default",
 * as transformers takes it) or a GGUF file's tokenizer.chat_template, with
 * the tokenizer's special tokens as its variables, as transformers passes
 * **special_tokens_map: bos_token, eos_token, unk_token, sep_token,
 * pad_token, cls_token, mask_token (strings, those set) and
 * additional_special_tokens (a list) from tokenizer_config.json (and
 * special_tokens_map.json when the config has no added_tokens_decoder), or
 * from the GGUF's token ids.  *out as for clf_chat_template_parse.
 * Errors: CLF_E_NOT_FOUND when the tokenizer has none; those of
 * clf_chat_template_parse; CLF_E_INVALID_ARG for NULL arguments. */
CLF_API clf_status clf_tokenizer_chat_template(const clf_tokenizer *tok, clf_chat_template **out);
/* Template `source` (a file's, for a model that ships none or another)
 * parsed as clf_chat_template_parse parses it, with tok's special tokens
 * as its variables as clf_tokenizer_chat_template has them (Gemma's
 * template opens with {{ bos_token }}).  Errors: those of
 * clf_chat_template_parse; CLF_E_INVALID_ARG for NULL arguments. */
CLF_API clf_status clf_tokenizer_chat_template_parse(const clf_tokenizer *tok, const char *source,
                                                     clf_chat_template **out);

/* ------------------------------------------------------------------------ */
/* Tasks: what the command line makes of a model's outputs. */

/* Sentence embeddings, as `clformer embed` takes the cosines of them (the
 * mean pooling of sentence-transformers, or the pooling a GGUF file states:
 * clf_model_pooling): each of the n texts (UTF-8) is
 * tokenized with tok with its special tokens, the batch padded with
 * config.json's pad_token_id (0 when absent) into input_ids [n, L] with an
 * attention_mask (and zero token_type_ids for models that take them), and
 * last_hidden_state [n, L, D] is averaged over each text's tokens (summed
 * in double, the mean rounded to f32; "cls": the first token's, "last":
 * the last token's of each text), then divided by its L2 norm
 * (+ 1e-12).  *out receives f32 [n, D] named "embeddings", data malloc'd
 * (clf_array_free).  Errors (recorded on the model's context; on failure
 * *out holds no data): CLF_E_INVALID_ARG for NULL arguments, n 0, a text
 * with no tokens, or the tokenizer's refusal (naming the text); those of
 * clf_model_run; CLF_E_UNSUPPORTED for a model that takes no input_ids, or
 * whose pooling is "none" or "rank" (the message names it). */
CLF_API clf_status clf_model_embed(clf_model *m, clf_tokenizer *tok, const char *const *texts, size_t n,
                                   clf_array *out);

/* One text (UTF-8) as the inputs of model m, as transformers' pipelines
 * tokenize it for text classification and fill-mask, and by the rule
 * clf_model_embed tokenizes each of its texts: input_ids [1, n], tok's ids
 * of text with the special tokens the tokenizer adds (clf_tokenizer_encode
 * with add_special: [CLS] .. [SEP] for BERT, <s> .. </s> for RoBERTa, none
 * for GPT-2), attention_mask [1, n] of ones and, for a model that takes
 * them (clf_model_input_names), token_type_ids [1, n] of zeros: in that
 * order, i64, named, into in[0 .. *n_in) (room for 3; *n_in is 2 or 3).
 * Each array's data is malloc'd: clf_array_free every one of the 3 (on
 * failure they hold none and *n_in is 0).  A text of no tokens gives
 * [1, 0] arrays.  Errors (recorded on the model's context):
 * CLF_E_INVALID_ARG for NULL arguments or the tokenizer's refusal (text
 * not UTF-8), CLF_E_UNSUPPORTED for a model that takes no input_ids,
 * CLF_E_OUT_OF_MEMORY. */
CLF_API clf_status clf_model_encode_text(clf_model *m, clf_tokenizer *tok, const char *text, clf_array in[3],
                                         size_t *n_in);

/* The softmax of logits[0 .. n) in double (the maximum subtracted first)
 * into p[0 .. n), and the indices of the k most probable into top[0 .. k),
 * most probable first, ties to the smaller index: how `clformer classify`
 * and `fill-mask` rank labels and tokens.  top may be NULL when k is 0.
 * Errors (in clf_last_error(NULL)): CLF_E_INVALID_ARG for NULL pointers or
 * k > n, CLF_E_SHAPE for n 0, CLF_E_OUT_OF_MEMORY. */
CLF_API clf_status clf_softmax_top_k(const float *logits, size_t n, size_t k, double *p, size_t *top);

/* ------------------------------------------------------------------------ */
/* Streaming text and conversations. */

/* Generated tokens to text as they come, for streaming: each token is
 * appended and the tokens so far decoded again (special tokens skipped,
 * clf_tokenizer_decode's text exactly); what is given out is what can no
 * longer change: a character split across tokens once whole, a word once the
 * next space or the end shows that clean_up_tokenization_spaces cannot
 * rewrite it, and nothing a stop string may still be completing.  The text
 * stops before the first stop string, which is not given out.  Host-only;
 * failures through clf_last_error(NULL). */
typedef struct clf_text_stream clf_text_stream;

/* A stream decoding with tok (borrowed: it must outlive the stream), cut
 * before the first of the n_stop stop strings (copied; none empty).
 * CLF_E_INVALID_ARG for NULL arguments or an empty stop string. */
CLF_API clf_status clf_text_stream_create(clf_tokenizer *tok, const char *const *stop, size_t n_stop,
                                          clf_text_stream **out);
/* Appends `token`; *text / *len receive the text that became final
 * (borrowed until the next call; often empty), *stopped (may be NULL) 1 once
 * a stop string was seen, after which tokens are ignored.  The errors of
 * clf_tokenizer_decode. */
CLF_API clf_status clf_text_stream_push(clf_text_stream *s, int64_t token, const char **text, size_t *len,
                                        int *stopped);
/* At the end: the text still held back (borrowed). */
CLF_API clf_status clf_text_stream_finish(clf_text_stream *s, const char **text, size_t *len);
/* The whole text so far, up to a stop string (borrowed, NUL-terminated);
 * *len (may be NULL) its length.  "" before any token. */
CLF_API const char *clf_text_stream_text(const clf_text_stream *s, size_t *len);
/* 1 once a stop string was seen. */
CLF_API int clf_text_stream_stopped(const clf_text_stream *s);
/* NULL is accepted. */
CLF_API void clf_text_stream_destroy(clf_text_stream *s);

/* A conversation with a decoder-only language model: messages rendered by
 * a chat template, replies decoded as clf_model_generate decodes them.
 * The model's KV cache is kept between turns: a turn feeds only the tokens
 * after the longest common prefix of the cached ones and the new prompt.
 * One conversation at a time keeps its tokens in a model: a forward pass,
 * a generate() or another conversation's turn on the same model takes the
 * caches, and the next turn of this one feeds its whole prompt again.  Not
 * thread-safe (as the model is not). */
typedef struct clf_chat clf_chat;

typedef struct clf_chat_options {
  /* Decoding, as for clf_model_generate (num_beams must be 0 or 1; on_token
   * and user are the conversation's own and are ignored here);
   * max_new_tokens 0: until an end-of-sequence token or the end of the
   * model's positions (at most 32768 tokens; 512 where the positions have
   * no end). */
  clf_generate_options generate;
  /* The reply ends before the first of these (not part of it); the tokens
   * decoded past it are not kept in the conversation. */
  const char *const *stop;
  size_t n_stop;
  /* Streaming: called with each piece of the reply's text as it becomes
   * final (clf_text_stream); a non-zero return ends the reply there.
   * NULL: none. */
  int (*on_text)(void *user, const char *text, size_t len);
  void *user;
} clf_chat_options;

/* What a turn did. */
typedef struct clf_chat_turn {
  size_t prompt_tokens; /* the rendered conversation's */
  size_t reused_tokens; /* of those, already in the KV cache (not fed again) */
  size_t new_tokens;    /* the reply's, its end-of-sequence token included */
  int finished;         /* 1: an end-of-sequence token, a stop string or on_text ended it; 0: max_new_tokens */
} clf_chat_turn;

/* Fills `o` with the defaults (no stop strings, no streaming, generate's
 * defaults). */
CLF_API void clf_chat_options_init(clf_chat_options *o);

/* A conversation with m, tokenized by tok, rendered by tmpl (all three
 * borrowed: they must outlive it); tmpl NULL: the tokenizer's template
 * (clf_tokenizer_chat_template).  Errors (recorded on m's context):
 * CLF_E_INVALID_ARG for NULL arguments, CLF_E_UNSUPPORTED for a model that
 * is not a decoder-only language model, and those of
 * clf_tokenizer_chat_template (CLF_E_NOT_FOUND: the tokenizer has no
 * template). */
CLF_API clf_status clf_chat_create(clf_model *m, clf_tokenizer *tok, const clf_chat_template *tmpl, clf_chat **out);
/* Frees the conversation (and the caches, when they hold it).  NULL is
 * accepted. */
CLF_API void clf_chat_destroy(clf_chat *c);
/* Appends a message {"role": role, "content": content} (UTF-8, copied). */
CLF_API clf_status clf_chat_add(clf_chat *c, const char *role, const char *content);
/* Appends a message given as a JSON object with a string "role" (UTF-8,
 * copied), as OpenAI's API and transformers take them: "content" a string
 * or a list of parts, "tool_calls", "name", ... reach the template as
 * they are.  CLF_E_INVALID_ARG naming what is wrong with it. */
CLF_API clf_status clf_chat_add_json(clf_chat *c, const char *message_json);
/* The budget of each rendering of the conversation's template
 * (clf_template_budget; NULL: the defaults), when the conversation made
 * that template itself (clf_chat_create with tmpl NULL).  Errors:
 * CLF_E_INVALID_ARG for a NULL c or a template of the caller's (set it with
 * clf_chat_template_set_budget). */
CLF_API clf_status clf_chat_set_template_budget(clf_chat *c, const clf_template_budget *budget);
/* Removes the last message (none: nothing), e.g. a user message whose
 * reply failed. */
CLF_API void clf_chat_pop(clf_chat *c);
/* Forgets the messages (the cached tokens stay: a conversation given again
 * from its start, as a stateless server receives it, reuses them). */
CLF_API void clf_chat_clear(clf_chat *c);
/* The number of messages. */
CLF_API size_t clf_chat_messages(const clf_chat *c);
/* One reply: the conversation rendered with add_generation_prompt and
 * tokenized without special tokens (apply_chat_template(tokenize=True)'s
 * ids), the reply decoded (streamed through o->on_text), appended to the
 * conversation as {"role": "assistant"} and returned in *reply (malloc'd,
 * free() it).  `o` may be NULL; `info` may be NULL.  Errors (recorded on
 * the model's context, the conversation unchanged): those of the
 * template's rendering (CLF_E_INVALID_ARG with raise_exception's message),
 * of the tokenizer and of clf_model_generate; CLF_E_INVALID_ARG when the
 * prompt and max_new_tokens exceed the model's positions. */
CLF_API clf_status clf_chat_respond(clf_chat *c, const clf_chat_options *o, char **reply, clf_chat_turn *info);

/* ------------------------------------------------------------------------ */
/* Images: PNG/JPEG in host memory and the image processor. */

/* An 8-bit RGB image in host memory: rgb holds height rows of width pixels,
 * 3 bytes each (R, G, B), top row first.  Images the library fills are freed
 * with clf_image_free. */
typedef struct clf_image {
  int width, height;
  unsigned char *rgb;
} clf_image;

/* Reads a PNG (libpng) or JPEG (libjpeg) file, told apart by its first
 * bytes, as 8-bit RGB the way PIL's Image.open(path).convert("RGB") does:
 * grey is replicated, palettes expanded, alpha (and tRNS) dropped without
 * compositing, 16-bit samples keep their high byte, gAMA is ignored.
 * Errors (no context: the message, naming the file, is in
 * clf_last_error(NULL); out->rgb is NULL): CLF_E_INVALID_ARG for NULL
 * arguments, CLF_E_NOT_FOUND (no such file), CLF_E_IO (unreadable),
 * CLF_E_FORMAT (neither PNG nor JPEG, truncated or corrupt),
 * CLF_E_UNSUPPORTED (a CMYK JPEG), CLF_E_OUT_OF_MEMORY. */
CLF_API clf_status clf_image_read(const char *path, clf_image *out);
/* Writes `img` as an 8-bit RGB PNG (an existing file is replaced).  Errors
 * in clf_last_error(NULL): CLF_E_INVALID_ARG (NULL, or a size below 1),
 * CLF_E_IO naming the file. */
CLF_API clf_status clf_image_write_png(const char *path, const clf_image *img);
/* Frees img->rgb (malloc'd by the library) and clears it.  NULL is accepted. */
CLF_API void clf_image_free(clf_image *img);

/* PIL's resample filters (Image.Resampling values, as preprocessor_config.json
 * stores them).  NEAREST is not supported. */
enum {
  CLF_RESAMPLE_NEAREST = 0,
  CLF_RESAMPLE_LANCZOS = 1,
  CLF_RESAMPLE_BILINEAR = 2,
  CLF_RESAMPLE_BICUBIC = 3,
  CLF_RESAMPLE_BOX = 4,
  CLF_RESAMPLE_HAMMING = 5
};

/* Resizes to width x height exactly as PIL's Image.resize(size, resample)
 * does for an RGB image (Pillow's Resample.c: separable passes, horizontal
 * first, with the filter's support widened by the downscale factor, 22-bit
 * fixed-point weights and 8-bit rounding after each pass), so the bytes are
 * identical.  *out is malloc'd (clf_image_free).  Errors in
 * clf_last_error(NULL): CLF_E_INVALID_ARG (NULL, sizes below 1),
 * CLF_E_UNSUPPORTED (NEAREST or an unknown filter), CLF_E_OUT_OF_MEMORY. */
CLF_API clf_status clf_image_resize(const clf_image *in, int width, int height,
                                    int resample, clf_image *out);

/* What a ViTImageProcessor's preprocessor_config.json says (ViT, Swin and
 * ViTMAE checkpoints all use it in transformers 4.40); absent keys take
 * ViTImageProcessor's defaults: do_resize true, size 224 x 224, resample 2
 * (bilinear), do_rescale true, rescale_factor 1/255, do_normalize true,
 * image_mean = image_std = 0.5 for each channel. */
typedef struct clf_image_processor {
  int do_resize, width, height, resample;
  int do_rescale;
  double rescale_factor;
  int do_normalize;
  double mean[3], std[3];
} clf_image_processor;

/* Fills *p with the defaults above, then reads MODEL_DIR/
 * preprocessor_config.json over them ("size" is {"height", "width"} or, in
 * old files, one int; image_mean / image_std a list of 3 numbers or one).
 * Errors in clf_last_error(NULL): CLF_E_NOT_FOUND (no such file),
 * CLF_E_FORMAT naming the key of a malformed value (or a file that is not
 * a JSON object), CLF_E_UNSUPPORTED (a size given as shortest_edge, which
 * ViTImageProcessor rejects too). */
CLF_API clf_status clf_image_processor_load(const char *model_dir,
                                            clf_image_processor *p);
/* pixel_values as ViTImageProcessor makes them: resize (clf_image_resize),
 * then x * rescale_factor (in double, rounded to f32), then
 * (x - mean) / std in f32, channels first: f32 [1, 3, H, W] named
 * "pixel_values", data malloc'd (clf_array_free).  Errors in
 * clf_last_error(NULL) as for clf_image_resize, plus CLF_E_INVALID_ARG for
 * a std of 0. */
CLF_API clf_status clf_image_preprocess_with(const clf_image *img,
                                             const clf_image_processor *p,
                                             clf_array *pixel_values);
/* clf_image_processor_load(model_dir) then clf_image_preprocess_with. */
CLF_API clf_status clf_image_preprocess(const clf_image *img,
                                        const char *model_dir,
                                        clf_array *pixel_values);

/* ------------------------------------------------------------------------ */
/* Self-validation: each kernel variant the library would use on a device,
 * run once against a CPU reference.  `clformer probe` runs it. */

typedef struct clf_variant_result {
  char name[96];     /* "attention.fused HEAD_DIM=64 BQ=32 BK=32" */
  char fallback[96]; /* what the library uses where this failed ("" none) */
  int passed;
  double max_error;  /* max |device - CPU| / max(1, max |CPU|) */
  double tolerance;
  double ms;         /* wall time, builds included */
  char message[256]; /* why it failed ("" when it passed) */
} clf_variant_result;

/* Runs every kernel variant the library would use on ctx's device on small
 * inputs against CPU references.  The verdicts are stored in the cache
 * directory, keyed by device, driver and kernel sources, and take effect at
 * once: ctx and every later context on the same device and driver do not
 * use a variant that failed; its op falls back to one that passed and logs
 * so (clf_context_options.log).  Writes up to `capacity` results to `out`
 * (may be NULL when capacity is 0) and the number of variants to *count.
 * Returns CLF_OK when every variant ran (passed or not); an error only when
 * validation itself could not run. */
CLF_API clf_status clf_validate(clf_context *ctx, clf_variant_result *out,
                                size_t capacity, size_t *count);
/* Non-zero when ctx will not use the named variant (it failed validation
 * in this context or a cached verdict says so). */
CLF_API int clf_variant_disabled(const clf_context *ctx, const char *name);

/* ------------------------------------------------------------------------ */
/* GEMM tuning: CLBlast's kernel parameters searched for this device, stored
 * as a profile in the cache directory and applied by every later context on
 * the same device, driver and CLBlast version.  Without one, a profile
 * shipped with the library for devices of the same kind applies
 * ($CLFORMER_TUNING=off skips both, =user the shipped ones).  `clformer
 * probe --tune` runs it. */

typedef struct clf_gemm_shape {
  size_t m, n, k;          /* C [m, n] = op(A) [m, k] op(B) [k, n], row-major */
  int trans_a, trans_b;
  unsigned count;          /* times one forward pass runs it (a weight; 0 = 1) */
} clf_gemm_shape;

/* The GEMMs of one forward pass of the model in `model_dir` (its
 * config.json) over `tokens` rows (batch x sequence), merged by shape.
 * Writes up to `capacity` shapes, the number of shapes to *count. */
CLF_API clf_status clf_model_gemm_shapes(const char *model_dir, size_t tokens,
                                         clf_gemm_shape *out, size_t capacity,
                                         size_t *count);
/* The same for one layer each of the reference checkpoints
 * bert-base-uncased and GPT-2 124M (what `clformer probe --tune` searches
 * when no model is given). */
CLF_API clf_status clf_reference_gemm_shapes(size_t tokens, clf_gemm_shape *out,
                                             size_t capacity, size_t *count);

typedef struct clf_tune_options {
  double budget_s;  /* wall-clock budget of the search; 0: 300 s */
  unsigned seed;    /* of the random part of the search */
  /* Progress lines (candidate, time), or NULL. */
  void (*progress)(void *user, const char *line);
  void *progress_user;
} clf_tune_options;

typedef struct clf_tune_result {
  double default_ms;  /* one call, CLBlast's own parameters for the device */
  double tuned_ms;    /* one call, with the profile found */
  double best_ms;     /* one call, the fastest seen under any set tried */
} clf_tune_result;

typedef struct clf_tune_report {
  double default_ms;  /* sum over the shapes x count, CLBlast's parameters */
  double tuned_ms;    /* the same with the profile found */
  unsigned tried;     /* parameter sets timed */
  unsigned rejected;  /* sets that failed to build or run, or were wrong */
  double seconds;     /* wall time of the search */
  char profile[4096]; /* the profile file written ("" if none was better) */
  /* The skinny kernel (M <= 8 rows a launch) per weight type: f32, f16,
   * q8, q4.  Its work-group (SPLIT x ROWS) before the search and after, and
   * one row's product with the shapes' weights (count-weighted sum, ms)
   * under each; tuned_* equal default_* when nothing was 2% faster, all 0
   * when the shapes have no weight the type can hold or on the CPU class
   * (there every [out, in] product runs the register-tiled kernel, which
   * has no group to search). */
  struct {
    unsigned split, rows, tuned_split, tuned_rows;
    double default_ms, tuned_ms;
  } skinny[4];
  /* The most rows of x the skinny path takes before CLBlast is faster,
   * per weight type and layout: f32, f16, q8, q4 ([out, in]) and f32
   * [in, out]; before the search and as measured (both 0 when it could
   * not be measured: no weight of the shapes fits, or out of time). */
  struct {
    unsigned before, measured;
  } rows[5];
} clf_tune_report;

/* Searches CLBlast's GEMM parameters (Xgemm, XgemmDirect and the switch
 * between them) for `shapes` on ctx's device, each candidate checked
 * against CLBlast's defaults for correctness, and the skinny kernel's
 * work-group for each weight type on one row times the shapes' weights
 * (n x k), and stores the best as a profile when it is faster than the
 * defaults.  `opts` may be NULL;
 * `per_shape` (may be NULL) receives n results.  ctx applies the profile at
 * once. */
CLF_API clf_status clf_tune_gemm(clf_context *ctx, const clf_gemm_shape *shapes,
                                 size_t n, const clf_tune_options *opts,
                                 clf_tune_result *per_shape,
                                 clf_tune_report *report);
/* The tuning profile applied to ctx: the path of the user's own, or
 * "shipped:<name>" for one shipped with the library that matches the
 * device (docs/tuning.md), or NULL when none. */
CLF_API const char *clf_context_gemm_profile(const clf_context *ctx);

/* ------------------------------------------------------------------------ */
/* Struct layouts, for bindings that declare the structs of this header on
 * their own side (the Python package's ctypes Structures, other FFIs): a
 * binding compares its copy with the library's when it loads it, and
 * refuses a library from another version instead of reading the wrong
 * bytes (as libuv's uv_handle_size serves its bindings).  Every struct of
 * this header with public fields is known, by its C name
 * ("clf_model_options"), and each of its fields by its C name ("weights"; a
 * nested struct or an array is one field: clf_tune_report's "skinny").
 * Each returns CLF_LAYOUT_UNKNOWN for a struct or field it does not know
 * (or NULL).  No context, no device; thread-safe. */

#define CLF_LAYOUT_UNKNOWN ((size_t)-1)

/* sizeof the struct. */
CLF_API size_t clf_struct_size(const char *struct_name);
/* offsetof the field in the struct. */
CLF_API size_t clf_field_offset(const char *struct_name, const char *field);
/* sizeof the field. */
CLF_API size_t clf_field_size(const char *struct_name, const char *field);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CLFORMER_H */
