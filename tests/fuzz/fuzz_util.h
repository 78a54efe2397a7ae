/* fuzz_util.h - what the libFuzzer targets of tests/fuzz share: a private
 * temporary directory per process (removed at exit), writing the fuzz input
 * there under the name the reader under test expects, and copying the
 * fixed companion files from tests/fixtures beside it. */
#ifndef CLF_FUZZ_UTIL_H
#define CLF_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The libFuzzer entry points the targets define. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* This process's directory (mkdtemp under $TMPDIR or /tmp, created on the
 * first call, removed with its contents at exit).  Aborts when it cannot be
 * made: a harness that cannot write its input finds nothing. */
const char *fz_dir(void);
/* fz_dir()/name (name may hold '/'); the string lives until the next call. */
const char *fz_path(const char *name);
/* Makes fz_dir()/name a directory (0700; existing is fine). */
void fz_mkdir(const char *name);
/* Writes bytes to fz_dir()/name, replacing it; aborts on I/O errors. */
void fz_write(const char *name, const void *data, size_t size);
/* Copies tests/fixtures/<rel> ($CLF_FIXTURES overrides the directory) to
 * fz_dir()/name; aborts when the fixture is missing. */
void fz_copy_fixture(const char *rel, const char *name);
/* Removes fz_dir()/name if present. */
void fz_remove(const char *name);
/* One context for the whole run (PoCL on this machine), created on the
 * first call with its cache in fz_dir()/cache and notices off; aborts when
 * none can be made.  The readers of the cache, the verdicts and the GEMM
 * profile and the model loader need one; creating it per input would
 * cost more than the input. */
struct clf_context *fz_context(void);
/* With $CLF_FUZZ_VERBOSE set, prints "fuzz: <what>: <message>" to stderr
 * (to see how far a seed gets); silent otherwise. */
void fz_note(const char *what, const char *message);
/* A NUL-terminated malloc'd copy of data (the caller frees it). */
char *fz_strndup(const uint8_t *data, size_t size);

#ifdef __cplusplus
}
#endif

#endif
