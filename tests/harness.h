/* harness.h - what every Check suite of clformer shares.
 *
 * One context per test program (th_ctx) on the default device (or
 * CLFORMER_DEVICE), seeded random data, upload/download helpers, and the
 * comparison that every op test makes against its CPU reference:
 *   max |got - ref| <= tol * max(1, max |ref|).
 * A program with no OpenCL device exits 77 (meson's "skipped"), unless
 * CLF_REQUIRE_DEVICE=1 (set by CI), where it fails.
 *
 * Every TCase gets a checked fixture from the harness (tcase_create below),
 * which times each test and keeps the worst TH_CLOSE of it; with
 * CLF_TH_REPORT=path, th_run writes them with Check's results as JSON
 * (rewritten before each test, so a crash leaves the tests done so far):
 *   {"schema": 1, "suite", "device", "complete": bool, "tests": [{"suite",
 *    "tcase", "test", "result": "pass"|"fail"|"error", "message", "ms",
 *    "max_error" (of the worst TH_CLOSE, relative to the reference's scale;
 *    null when the test made none, "inf" for a NaN), "tolerance"}]}
 */
#ifndef CLF_TEST_HARNESS_H
#define CLF_TEST_HARNESS_H

#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "clformer.h"

/* The harness's wrappers call the real ones (harness.c #undefs these). */
Suite *th_suite_create(const char *name);
TCase *th_tcase_create(const char *name);
#define suite_create(name) th_suite_create(name)
#define tcase_create(name) th_tcase_create(name)

extern clf_context *th_ctx;

/* Creates th_ctx, runs the suite without forking (OpenCL drivers keep
 * threads that do not survive fork), prints Check's summary, frees all. */
int th_run(Suite *s);

/* Runs fn with th_ctx replaced by a context on the same device created
 * with clf_context_options.device_class and .limits (NULL: their
 * environment variables), then destroys it and puts th_ctx back (the next
 * test's setup does that too if fn failed an assertion).  Lets a suite run
 * its checks as a GPU would choose on a CPU runtime ("gpu"), and under a
 * small device's limits. */
void th_with_context(const char *device_class, const char *limits, void (*fn)(void));
/* For the variants that need a device feature: th_ctx replaced, as by
 * th_with_context, by a context that records a profile, its features
 * restricted by `limits`, without the disk cache (so without verdicts an
 * earlier probe stored); recording started.  th_profiled_expect stops the
 * profile and asserts that kernel `ran` was launched and `not` (may be
 * NULL) was not; then puts th_ctx back when `end`, else records again. */
void th_profiled_begin(const char *limits);
void th_profiled_expect(const char *ran, const char *not, int end);
/* How many commands of kernel `op` the profile holds since it began (or
 * since the last call); then records again. */
unsigned long th_profiled_count(const char *op);

/* n uniform floats in [lo, hi) from a fixed seed (malloc'd). */
float *th_rand(size_t n, uint32_t seed, float lo, float hi);
/* A tensor of th_ctx holding `data` (which must hold numel elements). */
clf_tensor *th_tensor(clf_dtype dtype, int ndim, const size_t *shape, const void *data);
/* An uninitialised tensor of th_ctx. */
clf_tensor *th_empty(clf_dtype dtype, int ndim, const size_t *shape);
/* The tensor's contents (malloc'd); waits for the queue. */
void *th_download(const clf_tensor *t);

/* A fresh directory $TMPDIR/clf-TAG-XXXXXX (or /tmp) written into buf. */
void th_tmpdir_create(char *buf, size_t len, const char *tag);
/* Removes the files in dir, then dir itself (asserting it is gone). */
void th_tmpdir_remove(const char *dir);

double th_max_abs(const float *a, size_t n);
double th_max_abs_diff(const float *a, const float *b, size_t n);
/* Notes a comparison of the running test for the report: error relative to
 * the reference's scale, and its tolerance; the test keeps the one nearest
 * to (or furthest past) its tolerance. */
void th_note_error(double rel_err, double tol);

/* Asserts an op returned CLF_OK, printing the context's last error if not. */
#define TH_OK(expr)                                                         \
  do {                                                                      \
    clf_status th_st_ = (expr);                                             \
    ck_assert_msg(th_st_ == CLF_OK, "%s returned %s: %s", #expr,            \
                  clf_status_name(th_st_), clf_last_error(th_ctx));         \
  } while (0)

/* Asserts `expr` fails with `status` and that the message contains `needle`. */
#define TH_FAILS(expr, status, needle)                                       \
  do {                                                                       \
    clf_status th_st_ = (expr);                                              \
    ck_assert_msg(th_st_ == (status), "%s returned %s, expected %s (%s)",    \
                  #expr, clf_status_name(th_st_), clf_status_name(status),   \
                  clf_last_error(th_ctx));                                   \
    ck_assert_msg(strstr(clf_last_error(th_ctx), (needle)) != NULL,          \
                  "error of %s is \"%s\", expected it to mention \"%s\"",    \
                  #expr, clf_last_error(th_ctx), (needle));                  \
  } while (0)

/* Compares n floats against the reference: max abs error relative to the
 * reference's scale must stay within tol. */
#define TH_CLOSE(got, ref, n, tol)                                           \
  do {                                                                       \
    double th_scale_ = th_max_abs((ref), (n));                               \
    double th_err_ = th_max_abs_diff((got), (ref), (n));                     \
    if (th_scale_ < 1.0) th_scale_ = 1.0;                                    \
    th_note_error(th_err_ / th_scale_, (tol));                               \
    ck_assert_msg(th_err_ <= (tol) * th_scale_,                              \
                  "max abs error %.3g > %.3g x scale %.3g (%s vs %s, n=%zu)", \
                  th_err_, (double)(tol), th_scale_, #got, #ref, (size_t)(n)); \
  } while (0)

#define TH_SHAPE(...) ((const size_t[]){__VA_ARGS__})

#endif
