/* harness.c - the shared test context, data helpers, the runner and its
 * per-test JSON report (CLF_TH_REPORT). */
#include "harness.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#undef suite_create
#undef tcase_create

clf_context *th_ctx;

/* One record per test run, opened by the harness's checked setup (the first
 * setup of every TCase) and closed by its teardown (the last), in the order
 * Check runs them (CK_NOFORK: one at a time), which is also the order of
 * srunner_results(). */
typedef struct th_record {
  const char *test; /* Check's name of the test (static), or "checked_setup" */
  double ms;
  double err, tol; /* worst noted comparison; err < 0: none */
} th_record;

static struct {
  const char *suite;
  char device[300];
  char device_class[32], limits[200];
  SRunner *sr;
  th_record *rec;
  size_t n, cap;
  int open;             /* rec[n - 1] is still running */
  const char *name_at_open; /* tcase_name() when it was opened */
  double t0;
} th_rep;

static double th_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void th_note_error(double rel_err, double tol) {
  if (!th_rep.open) return;
  th_record *r = &th_rep.rec[th_rep.n - 1];
  /* NaN counts as infinitely far (th_max_abs_diff already maps it so). */
  double key = isnan(rel_err) ? INFINITY : rel_err / (tol > 0 ? tol : 1e-300);
  double cur = r->err / (r->tol > 0 ? r->tol : 1e-300);
  if (r->err < 0 || key > cur) {
    r->err = isnan(rel_err) ? INFINITY : rel_err;
    r->tol = tol;
  }
}

/* Closes the running record.  When Check started no test since it was
 * opened (tcase_name() unchanged), a setup failed and the teardowns were
 * skipped: Check reports that run as "checked_setup", and so do we. */
static void th_close_record(void) {
  th_record *r = &th_rep.rec[th_rep.n - 1];
  const char *name = tcase_name();
  r->test = name && name != th_rep.name_at_open ? name : "checked_setup";
  r->ms = th_now_ms() - th_rep.t0;
  th_rep.open = 0;
}

static const char *th_result_name(int rtype) {
  return rtype == CK_PASS ? "pass" : rtype == CK_FAILURE ? "fail" : "error";
}

/* Writes the closed records with Check's results so far to $CLF_TH_REPORT
 * (through a temporary file and rename, so a reader never sees half). */
static void th_write_report(int complete) {
  const char *path = getenv("CLF_TH_REPORT");
  if (!path || !*path || !th_rep.sr) return;
  int n_res = srunner_ntests_run(th_rep.sr);
  TestResult **res = srunner_results(th_rep.sr);
  size_t closed = th_rep.n - (th_rep.open ? 1 : 0);
  cJSON *root = cJSON_CreateObject(), *tests = cJSON_CreateArray();
  cJSON_AddNumberToObject(root, "schema", 1);
  cJSON_AddStringToObject(root, "suite", th_rep.suite ? th_rep.suite : "");
  cJSON_AddStringToObject(root, "device", th_rep.device);
  /* What the matrix checks its column's settings against. */
  cJSON_AddStringToObject(root, "device_class", th_rep.device_class);
  cJSON_AddStringToObject(root, "limits", th_rep.limits);
  cJSON_AddBoolToObject(root, "complete", complete);
  cJSON_AddItemToObject(root, "tests", tests);
  for (int i = 0; i < n_res; i++) {
    const th_record *r = (size_t)i < closed ? &th_rep.rec[i] : NULL;
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "suite", th_rep.suite ? th_rep.suite : "");
    cJSON_AddStringToObject(t, "tcase", tr_tcname(res[i]));
    cJSON_AddStringToObject(t, "test", r ? r->test : "unchecked_fixture");
    cJSON_AddStringToObject(t, "result", th_result_name(tr_rtype(res[i])));
    cJSON_AddStringToObject(t, "message", tr_rtype(res[i]) == CK_PASS ? "" : tr_msg(res[i]));
    if (r) cJSON_AddNumberToObject(t, "ms", r->ms);
    else cJSON_AddNullToObject(t, "ms");
    if (!r || r->err < 0) {
      cJSON_AddNullToObject(t, "max_error");
      cJSON_AddNullToObject(t, "tolerance");
    } else {
      if (isfinite(r->err)) cJSON_AddNumberToObject(t, "max_error", r->err);
      else cJSON_AddStringToObject(t, "max_error", "inf");
      cJSON_AddNumberToObject(t, "tolerance", r->tol);
    }
    cJSON_AddItemToArray(tests, t);
  }
  free(res);
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = text ? fopen(tmp, "w") : NULL;
  int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
  if (f && fclose(f) != 0) ok = 0;
  if (!ok || rename(tmp, path) != 0) fprintf(stderr, "harness: cannot write the report %s\n", path);
  free(text);
}

static clf_context *th_main_ctx; /* th_ctx while th_with_context swaps it */

static void th_restore_ctx(void) {
  if (!th_main_ctx) return;
  clf_context_destroy(th_ctx);
  th_ctx = th_main_ctx;
  th_main_ctx = NULL;
}

static void th_setup(void) {
  if (th_rep.open) th_close_record();
  th_write_report(0);
  if (th_rep.n == th_rep.cap) {
    size_t cap = th_rep.cap ? 2 * th_rep.cap : 64;
    th_record *rec = realloc(th_rep.rec, cap * sizeof *rec);
    ck_assert_msg(rec != NULL, "out of memory for the test report");
    th_rep.rec = rec;
    th_rep.cap = cap;
  }
  th_rep.rec[th_rep.n++] = (th_record){"checked_setup", 0, -1, 0};
  th_rep.open = 1;
  th_rep.name_at_open = tcase_name();
  th_rep.t0 = th_now_ms();
  th_restore_ctx(); /* a th_with_context that an assertion left */
}

void th_with_context(const char *device_class, const char *limits, void (*fn)(void)) {
  clf_context_options o;
  clf_context_options_init(&o);
  o.device_class = device_class;
  o.limits = limits;
  clf_context *c = NULL;
  clf_status st = clf_context_create(&o, &c);
  ck_assert_msg(st == CLF_OK, "context with class %s, limits %s: %s: %s", device_class ? device_class : "(env)",
                limits ? limits : "(env)", clf_status_name(st), clf_last_error(NULL));
  th_main_ctx = th_ctx;
  th_ctx = c;
  fn();
  th_restore_ctx();
}

void th_profiled_begin(const char *limits) {
  clf_context_options o;
  clf_context_options_init(&o);
  o.profiling = 1;
  o.limits = limits;
  /* No disk cache: no verdict that an earlier `clformer probe` stored, so
   * a variant is unvalidated until the test records its verdict. */
  o.cache_dir = "off";
  clf_context *c = NULL;
  ck_assert_msg(clf_context_create(&o, &c) == CLF_OK, "%s", clf_last_error(NULL));
  th_main_ctx = th_ctx;
  th_ctx = c;
  TH_OK(clf_profile_start(th_ctx));
}

void th_profiled_expect(const char *ran, const char *not, int end) {
  clf_profile_entry e[64];
  size_t n = 0;
  TH_OK(clf_profile_stop(th_ctx, e, 64, &n, NULL));
  int saw = 0, saw_not = 0;
  for (size_t i = 0; i < n && i < 64; i++) {
    saw |= strcmp(e[i].op, ran) == 0;
    saw_not |= not && strcmp(e[i].op, not) == 0;
  }
  ck_assert_msg(saw && !saw_not, "kernel %s %s, %s %s", ran, saw ? "ran" : "did not run", not ? not : "-",
                saw_not ? "ran" : "did not run");
  if (end) th_restore_ctx();
  else TH_OK(clf_profile_start(th_ctx));
}

unsigned long th_profiled_count(const char *op) {
  clf_profile_entry e[64];
  size_t n = 0;
  TH_OK(clf_profile_stop(th_ctx, e, 64, &n, NULL));
  unsigned long c = 0;
  for (size_t i = 0; i < n && i < 64; i++)
    if (strcmp(e[i].op, op) == 0) c = e[i].count;
  TH_OK(clf_profile_start(th_ctx));
  return c;
}

static void th_teardown(void) {
  if (th_rep.open) th_close_record();
}

Suite *th_suite_create(const char *name) {
  th_rep.suite = name;
  return suite_create(name);
}

TCase *th_tcase_create(const char *name) {
  TCase *tc = tcase_create(name);
  /* Added first: its setup runs before the TCase's own, its teardown after. */
  tcase_add_checked_fixture(tc, th_setup, th_teardown);
  return tc;
}

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
  snprintf(th_rep.device, sizeof th_rep.device, "%d:%d %s / %s", d->platform_index, d->device_index,
           d->platform_name, d->device_name);
  int overridden = 0;
  snprintf(th_rep.device_class, sizeof th_rep.device_class, "%s", clf_context_device_class(th_ctx, &overridden));
  snprintf(th_rep.limits, sizeof th_rep.limits, "%s", clf_context_limits(th_ctx));
  if (overridden || th_rep.limits[0])
    printf("choosing as a %s device%s%s\n", th_rep.device_class, th_rep.limits[0] ? ", under the limits " : "",
           th_rep.limits);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_NOFORK);
  th_rep.sr = sr;
  srunner_run_all(sr, CK_NORMAL);
  if (th_rep.open) th_close_record();
  th_write_report(1);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  free(th_rep.rec);
  th_rep.rec = NULL;
  th_rep.sr = NULL;
  th_restore_ctx();
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
