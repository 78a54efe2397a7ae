/* harness.c - the shared test context, data helpers and the runner. */
#include "harness.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

clf_context *th_ctx;

int th_run(Suite *s) {
  clf_status st = clf_context_create(NULL, &th_ctx);
  if (st == CLF_E_NO_DEVICE) {
    const char *req = getenv("CLF_REQUIRE_DEVICE");
    if (req && strcmp(req, "1") == 0) {
      fprintf(stderr, "FAIL: no OpenCL device, and CLF_REQUIRE_DEVICE=1: %s\n", clf_last_error(NULL));
      return 1;
    }
    printf("SKIP: no OpenCL device on this machine (%s)\n", clf_last_error(NULL));
    return 77;
  }
  if (st != CLF_OK) {
    fprintf(stderr, "FAIL: cannot create a context: %s: %s\n", clf_status_name(st), clf_last_error(NULL));
    return 1;
  }
  const clf_device_desc *d = clf_context_device(th_ctx);
  printf("device %d:%d: %s / %s (%s)\n", d->platform_index, d->device_index, d->platform_name,
         d->device_name, d->driver_version);
  fflush(stdout);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  clf_context_destroy(th_ctx);
  th_ctx = NULL;
  return failed ? 1 : 0;
}

float *th_rand(size_t n, uint32_t seed, float lo, float hi) {
  float *v = malloc((n ? n : 1) * sizeof(float));
  ck_assert_ptr_nonnull(v);
  uint64_t x = 0x9e3779b97f4a7c15ull ^ ((uint64_t)seed * 0xbf58476d1ce4e5b9ull);
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = lo + (hi - lo) * (float)((x >> 40) / 16777216.0);
  }
  return v;
}

clf_tensor *th_empty(clf_dtype dtype, int ndim, const size_t *shape) {
  clf_tensor *t = NULL;
  TH_OK(clf_tensor_create(th_ctx, dtype, ndim, shape, &t));
  /* Written from the host with a sentinel (NaN for floats, 0x7f7f7f7f... for
   * ints) rather than left undefined: an element an op forgets to write then
   * fails the comparison, and Oclgrind 21.10's uninitialised-value checker,
   * which loses kernel stores into recycled or clEnqueueFillBuffer'd buffers,
   * sees defined memory. */
  size_t n = clf_tensor_bytes(t);
  unsigned char *h = malloc(n ? n : 1);
  ck_assert_ptr_nonnull(h);
  memset(h, 0x7f, n);
  if (dtype == CLF_F32) {
    float nan = NAN;
    for (size_t i = 0; i < n / 4; i++) memcpy(h + 4 * i, &nan, 4);
  }
  TH_OK(clf_tensor_upload(th_ctx, t, h, n));
  free(h);
  return t;
}

clf_tensor *th_tensor(clf_dtype dtype, int ndim, const size_t *shape, const void *data) {
  clf_tensor *t = th_empty(dtype, ndim, shape);
  TH_OK(clf_tensor_upload(th_ctx, t, data, clf_tensor_bytes(t)));
  return t;
}

void *th_download(const clf_tensor *t) {
  size_t n = clf_tensor_bytes(t);
  void *h = malloc(n ? n : 1);
  ck_assert_ptr_nonnull(h);
  TH_OK(clf_tensor_download(th_ctx, t, h, n));
  return h;
}

double th_max_abs(const float *a, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++)
    if (fabs(a[i]) > m) m = fabs(a[i]);
  return m;
}

double th_max_abs_diff(const float *a, const float *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    if (isnan(d)) return INFINITY; /* a NaN is never close */
    if (d > m) m = d;
  }
  return m;
}

void th_tmpdir_create(char *buf, size_t len, const char *tag) {
  const char *base = getenv("TMPDIR");
  snprintf(buf, len, "%s/clf-%s-XXXXXX", base && *base ? base : "/tmp", tag);
  ck_assert_ptr_nonnull(mkdtemp(buf));
}

void th_tmpdir_remove(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char p[4096];
  while (d && (e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
      unlink(p);
    }
  if (d) closedir(d);
  ck_assert_int_eq(rmdir(dir), 0);
}
