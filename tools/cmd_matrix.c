/* cmd_matrix.c - `clformer matrix`: the conformance suites (the Check test
 * programs) on every OpenCL device, each device and suite in its own process
 * so that a crashing driver costs one cell, gathered into out/matrix.md and
 * out/matrix.json from the per-test reports the harness writes
 * (tests/harness.h, CLF_TH_REPORT).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "clformer.h"

extern char **environ;

/* The suites that need a device: ops, model fixtures, generation,
 * conversations, runtime. */
static const char *const default_suites[] = {"norm",     "dense",    "embed",         "movement", "attention",
                                             "patch",    "linear",   "linear_int",    "paged",    "models",
                                             "heads",    "llama",    "families",      "generate", "engine",
                                             "engine_window", "gguf_embed", "chat", "vision", "weight_types",
                                             "runtime"};
/* What the simulator's checked column runs: the op suites (the model
 * suites run on every other column; under the simulator they cost minutes
 * each). */
static const char *const op_suites[] = {"norm",  "dense",  "embed",      "movement", "attention",
                                        "patch", "linear", "linear_int", "paged",    NULL};
/* What the race-checked simulator column runs: the op suites of our own
 * kernels with local memory and barriers (dense is CLBlast's GEMMs and
 * element-wise kernels: minutes under the race checker, for nothing of ours
 * that shares memory). */
static const char *const race_suites[] = {"norm", "embed", "movement", "attention", "patch", "linear", "paged", NULL};
/* The op suites and the model fixtures: the mobile-limits column. */
static const char *const limit_suites[] = {"norm",  "dense",  "embed",  "movement", "attention", "patch", "linear",
                                           "linear_int", "paged", "models", "heads", "engine", "vision", NULL};
enum { MAX_IMPLS = 16, MAX_COLUMNS = 32, MAX_SUITES = 64, MAX_SELECT = 16, MAX_COL_ENV = 8 };

/* The limits of the mobile column: an Adreno-class device (docs/matrix.md). */
#define MOBILE_LIMITS "wg=128,local=16k,alloc=256m,fp16=0,subgroups=0"
/* Oclgrind's checks, as its `oclgrind --check-api --uninitialized
 * [--data-races]` sets them; OCLGRIND_LOG is added per run. */
#define OCLGRIND_CHECKS "OCLGRIND_CHECK_API=1", "OCLGRIND_UNINITIALIZED=1"

typedef enum { RUN_OK, RUN_FAILED, RUN_CRASHED, RUN_TIMEOUT, RUN_ERROR, RUN_SKIPPED } run_status;
static const char *const run_status_names[] = {"ok", "failed", "crashed", "timeout", "error", "not in column"};

/* One column: a device of one implementation, loaded alone, with the
 * settings the column adds (a device class, limits, Oclgrind's checks). */
typedef struct mx_col {
  const clf_cli_impl *impl;
  int platform_index, device_index;
  char platform[128], device[160], driver[96], opencl[160], type[16];
  char label[64];                /* "pocl pthread", "rusticl", "pocl pthread gpu-class", ... */
  const char *env[MAX_COL_ENV];  /* KEY=VALUE the column adds */
  int n_env;
  const char *const *suites;     /* NULL: every suite of the run */
  int oclgrind_checks;           /* Oclgrind's findings (OCLGRIND_LOG) fail the run */
  char settings[200];            /* the column's settings, for the table */
} mx_col;

/* One test program in one column. */
typedef struct mx_run {
  run_status status;
  int code;        /* exit status, or the signal when crashed */
  double seconds;  /* wall time of the process */
  char log[PATH_MAX];
  char problem[512]; /* why the run as a whole is not clean, or "" */
  cJSON *report;     /* the harness's report, or NULL */
  char report_path[PATH_MAX], oclog[PATH_MAX], dev[32];
  clf_cli_child child; /* while it runs */
} mx_run;

/* A table row: one test of one suite, as the reports name it, or (test
 * NULL) what became of the runs of the suite that left no complete report. */
typedef struct mx_row {
  const char *suite, *tcase, *test; /* borrowed from a report */
} mx_row;

typedef enum { CELL_PASS, CELL_FAIL, CELL_NOT_RUN, CELL_NONE } cell_kind;

/* What a cell shows, from a report's test entry or the run's fate. */
typedef struct mx_cell {
  char result[48]; /* pass, FAIL, ERROR, not run, crashed (SIGSEGV), timeout, error, "" */
  cell_kind kind;  /* CELL_FAIL counts against the exit status */
  const cJSON *test; /* the report's entry, or NULL */
} mx_cell;

typedef struct mx_opts {
  clf_cli_strings devices; /* --device: selectors, or none for every column */
  clf_cli_strings suites;  /* --suite: names, or none for default_suites */
  const char *out, *tests, *fixtures;
  long timeout_s;
  int no_variants;
  long jobs;
} mx_opts;

static const clf_cli_option matrix_options[] = {
    {"--device", "S", CLF_OPT_STRINGS, offsetof(mx_opts, devices), 0, 0, 0, MAX_SELECT, 0,
     "only the columns matching S (part of the column's label or of \"platform / device\")", NULL,
     "every column"},
    {"--suite", "NAME", CLF_OPT_STRINGS, offsetof(mx_opts, suites), 0, 0, 0, MAX_SUITES, 0,
     "only the test program tests/test_NAME", NULL, "every suite"},
    {"--out", "DIR", CLF_OPT_STRING, offsetof(mx_opts, out), 0, 0, 0, 0, 0, "where results go (default ./matrix)"},
    {"--tests", "DIR", CLF_OPT_STRING, offsetof(mx_opts, tests), 0, 0, 0, 0, 0,
     "the test programs (default: the build tree's tests/)"},
    {"--fixtures", "DIR", CLF_OPT_STRING, offsetof(mx_opts, fixtures), 0, 0, 0, 0, 0,
     "the fixtures (default $CLF_FIXTURES, else the source tree's)"},
    {"--timeout", "SEC", CLF_OPT_LONG, offsetof(mx_opts, timeout_s), 1, 604800, 1800, 0, 0,
     "seconds before a test program is killed"},
    {"--jobs", "N", CLF_OPT_LONG, offsetof(mx_opts, jobs), 1, 16, 1, 0, 0,
     "test programs run at once (a kernel build is mostly one core's work)"},
    {"--no-variants", NULL, CLF_OPT_FLAG, offsetof(mx_opts, no_variants), 0, 0, 0, 0, 0,
     "only each device as it is: no GPU-class, mobile-limits or checked Oclgrind column"},
    {NULL}};

static int is_oclgrind(const mx_col *c) { return clf_cli_contains_nocase(c->platform, "oclgrind"); }

/* Part of the column's label, or of "platform / device". */
static int column_matches(const mx_col *c, const char *sel) {
  char full[300];
  snprintf(full, sizeof full, "%s / %s", c->platform, c->device);
  return clf_cli_contains_nocase(c->label, sel) || clf_cli_contains_nocase(full, sel);
}

static int column_has_suite(const mx_col *c, const char *suite) {
  if (!c->suites) return 1;
  for (const char *const *s = c->suites; *s; s++)
    if (!strcmp(*s, suite)) return 1;
  return 0;
}

/* ---- running one test program ---- */

cJSON *clf_cli_read_json(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *text = NULL;
  size_t len = 0, cap = 0, n;
  char buf[65536];
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
    if (len + n + 1 > cap) {
      cap = 2 * (len + n + 1);
      char *t = realloc(text, cap);
      if (!t) break;
      text = t;
    }
    memcpy(text + len, buf, n);
    len += n;
  }
  fclose(f);
  if (!text) return NULL;
  text[len] = 0;
  cJSON *j = cJSON_Parse(text);
  free(text);
  return j;
}

/* The last non-empty line of the log that is not Check's summary, as the
 * reason of a run that left no (complete) report. */
static void log_reason(const char *log, char *out, size_t len) {
  FILE *f = fopen(log, "r");
  char line[512];
  out[0] = 0;
  while (f && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    if (line[0] && !strstr(line, "%: Checks:")) snprintf(out, len, "%.300s", line);
  }
  if (f) fclose(f);
}

/* The first line of Oclgrind's log of a run, or 0 when it is empty. */
static int oclgrind_finding(const char *log, char *out, size_t len) {
  FILE *f = fopen(log, "r");
  char line[400];
  int any = 0;
  while (f && !any && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    if (line[0]) any = snprintf(out, len, "%s", line) > 0;
  }
  if (f) fclose(f);
  return any;
}

/* What became of a finished run: its exit, the report it left (on the
 * right device, complete, with the column's settings in force) and
 * Oclgrind's log. */
static void run_outcome(const mx_opts *o, const mx_col *c, mx_run *run) {
  const char *dev = run->dev, *report = run->report_path, *oclog = run->oclog;
  const clf_cli_exit *ex = &run->child.ex;
  run->seconds = ex->seconds;
  if (ex->timed_out) {
    run->status = RUN_TIMEOUT;
    snprintf(run->problem, sizeof run->problem, "timeout: killed after %ld s", o->timeout_s);
  } else if (ex->signal) {
    run->status = RUN_CRASHED;
    run->code = ex->signal;
    snprintf(run->problem, sizeof run->problem, "crashed (%s)", clf_cli_signal_name(ex->signal));
  } else {
    run->code = ex->code;
    run->status = ex->code == 0 ? RUN_OK : RUN_FAILED;
  }
  run->report = clf_cli_read_json(report);
  const cJSON *rd = cJSON_GetObjectItem(run->report, "device");
  size_t dl = strlen(dev);
  if (run->report && (!cJSON_IsString(rd) || strncmp(rd->valuestring, dev, dl) || rd->valuestring[dl] != ' ')) {
    run->status = RUN_ERROR;
    snprintf(run->problem, sizeof run->problem, "ran on \"%s\", not on %s",
             cJSON_IsString(rd) ? rd->valuestring : "?", dev);
  }
  /* The column's device class and limits took effect in the program. */
  for (int i = 0; run->report && !run->problem[0] && i < c->n_env; i++) {
    const char *e = c->env[i], *key = NULL, *want = NULL;
    if (!strncmp(e, "CLFORMER_DEVICE_CLASS=", 22)) key = "device_class", want = e + 22;
    else if (!strncmp(e, "CLFORMER_LIMITS=", 16)) key = "limits", want = "";
    if (!key) continue;
    const char *got = cJSON_GetStringValue(cJSON_GetObjectItem(run->report, key));
    if (!got || (*want ? strcmp(got, want) != 0 : !*got)) {
      run->status = RUN_ERROR;
      snprintf(run->problem, sizeof run->problem, "the column's %s did not take effect (report: %s \"%s\")", e, key,
               got ? got : "absent");
    }
  }
  int complete = cJSON_IsTrue(cJSON_GetObjectItem(run->report, "complete"));
  char why[400];
  if (run->status == RUN_OK && !complete) {
    run->status = RUN_ERROR;
    snprintf(run->problem, sizeof run->problem, "exited 0 without a complete report");
  } else if (run->status == RUN_FAILED && !complete) {
    run->status = RUN_ERROR;
    log_reason(run->log, why, sizeof why);
    snprintf(run->problem, sizeof run->problem, "exited with status %d: %s", run->code, why);
  }
  if (c->oclgrind_checks && !run->problem[0] && oclgrind_finding(oclog, why, sizeof why)) {
    run->status = RUN_FAILED;
    snprintf(run->problem, sizeof run->problem, "Oclgrind: %.200s (log: %.280s)", why, oclog);
  }
}

/* Starts the test program of `suite` in column c; 1 when it runs (poll
 * run->child, then run_outcome), 0 when it does not (run->status says why). */
static int run_start(const mx_opts *o, const mx_col *c, int ci, const char *suite, const char *cache_dir,
                     mx_run *run) {
  char prog[PATH_MAX];
  memset(run, 0, sizeof *run);
  if (!column_has_suite(c, suite)) {
    run->status = RUN_SKIPPED;
    return 0;
  }
  snprintf(prog, sizeof prog, "%s/test_%s", o->tests, suite);
  snprintf(run->log, sizeof run->log, "%s/logs/c%d-%s.log", o->out, ci, suite);
  snprintf(run->report_path, sizeof run->report_path, "%s/reports/c%d-%s.json", o->out, ci, suite);
  snprintf(run->oclog, sizeof run->oclog, "%s/logs/c%d-%s.oclgrind.log", o->out, ci, suite);
  unlink(run->report_path);
  unlink(run->oclog);
  if (access(prog, X_OK) != 0) {
    run->status = RUN_ERROR;
    snprintf(run->problem, sizeof run->problem, "no test program %.300s", prog);
    return 0;
  }
  char e_dev[64], e_rep[PATH_MAX + 16], e_fix[PATH_MAX + 16], e_cache[PATH_MAX + 64], e_vendors[PATH_MAX + 32],
      e_oclog[PATH_MAX + 16];
  snprintf(run->dev, sizeof run->dev, "%d:%d", c->platform_index, c->device_index);
  snprintf(e_dev, sizeof e_dev, "CLFORMER_DEVICE=%s", run->dev);
  snprintf(e_rep, sizeof e_rep, "CLF_TH_REPORT=%s", run->report_path);
  snprintf(e_fix, sizeof e_fix, "CLF_FIXTURES=%s", o->fixtures);
  snprintf(e_cache, sizeof e_cache, "CLFORMER_CACHE_DIR=%s", cache_dir);
  snprintf(e_oclog, sizeof e_oclog, "OCLGRIND_LOG=%s", run->oclog);
  char *set[16 + MAX_COL_ENV];
  int n = clf_cli_impl_env(c->impl, e_vendors, sizeof e_vendors, set, 4);
  /* Check's filters would leave tests out of the table. */
  char *fixed[] = {e_dev, "CLF_REQUIRE_DEVICE=1", e_rep, e_fix, e_cache, "CK_RUN_SUITE", "CK_RUN_CASE"};
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) set[n++] = fixed[i];
  if (is_oclgrind(c)) set[n++] = "CLF_TEST_UNDER_OCLGRIND=1";
  if (c->oclgrind_checks) set[n++] = e_oclog;
  for (int i = 0; i < c->n_env; i++) set[n++] = (char *)c->env[i];
  char **env = clf_cli_child_env(set, n);
  char *argv[] = {prog, NULL};
  if (!env || clf_cli_start(argv, env, run->log, o->timeout_s, &run->child) != 0) {
    run->status = RUN_ERROR;
    snprintf(run->problem, sizeof run->problem, "cannot start %.300s: %s", prog,
             env ? strerror(errno) : "out of memory");
    free(env);
    return 0;
  }
  free(env); /* posix_spawn copied it */
  return 1;
}

/* ---- the table ---- */

static const cJSON *report_tests(const mx_run *r) { return cJSON_GetObjectItem(r->report, "tests"); }

static const cJSON *find_test(const mx_run *r, const char *test) {
  const cJSON *t;
  cJSON_ArrayForEach(t, report_tests(r)) {
    const cJSON *n = cJSON_GetObjectItem(t, "test");
    if (cJSON_IsString(n) && strcmp(n->valuestring, test) == 0) return t;
  }
  return NULL;
}

static const char *jstr(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItem(o, key);
  return cJSON_IsString(v) ? v->valuestring : "";
}

static int run_complete(const mx_run *r) { return cJSON_IsTrue(cJSON_GetObjectItem(r->report, "complete")); }

/* Whether a run needs the suite's last row: it left no complete report, or
 * something besides its tests failed it (an Oclgrind finding). */
static int run_needs_row(const mx_run *r) {
  return r->status != RUN_SKIPPED && (!run_complete(r) || r->problem[0]);
}

/* A test the report has shows its result; one it lacks is "not run": left
 * out by the program on this device when the report is complete (not a
 * failure), cut off when it is not.  The suite's last row shows why a run
 * left no complete report, or what else failed it. */
static void make_cell(const mx_run *r, const mx_row *row, mx_cell *c) {
  memset(c, 0, sizeof *c);
  if (r->status == RUN_SKIPPED) {
    snprintf(c->result, sizeof c->result, "–");
    c->kind = CELL_NONE;
    return;
  }
  c->test = row->test ? find_test(r, row->test) : NULL;
  if (c->test) {
    const char *res = jstr(c->test, "result");
    int pass = strcmp(res, "pass") == 0;
    snprintf(c->result, sizeof c->result, "%s", pass ? "pass" : strcmp(res, "fail") == 0 ? "FAIL" : "ERROR");
    c->kind = pass ? CELL_PASS : CELL_FAIL;
  } else if (row->test) {
    snprintf(c->result, sizeof c->result, "not run");
    c->kind = run_complete(r) ? CELL_NOT_RUN : CELL_FAIL;
  } else if (run_needs_row(r)) {
    snprintf(c->result, sizeof c->result, "%.40s",
             r->status == RUN_CRASHED ? r->problem : r->status == RUN_TIMEOUT ? "timeout"
                                                 : run_complete(r)          ? "FAIL (Oclgrind finding)"
                                                                            : "error");
    c->kind = CELL_FAIL;
  } else {
    c->kind = CELL_NONE;
  }
}

static void fmt_ms(double ms, char *buf, size_t len) {
  if (ms >= 10000) snprintf(buf, len, "%.1f s", ms / 1000);
  else if (ms >= 10) snprintf(buf, len, "%.0f ms", ms);
  else snprintf(buf, len, "%.1f ms", ms);
}

/* "pass 2.1e-06 · 35 ms" */
static void cell_text(const mx_cell *c, char *buf, size_t len) {
  size_t k = snprintf(buf, len, "%s", c->result);
  if (!c->test) return;
  const cJSON *e = cJSON_GetObjectItem(c->test, "max_error"), *ms = cJSON_GetObjectItem(c->test, "ms");
  if (cJSON_IsNumber(e)) k += snprintf(buf + k, len - k, " %.1e", e->valuedouble);
  else if (cJSON_IsString(e)) k += snprintf(buf + k, len - k, " %s", e->valuestring);
  if (cJSON_IsNumber(ms) && k < len) {
    char t[32];
    fmt_ms(ms->valuedouble, t, sizeof t);
    snprintf(buf + k, len - k, " · %s", t);
  }
}

/* Rows: every test any report of the suite names, in the order first seen,
 * then one without a test when a run of the suite left no complete report. */
static mx_row *collect_rows(const mx_opts *o, mx_run *runs, int n_dev, size_t *n_rows) {
  size_t cap = 64, n = 0;
  mx_row *rows = malloc(cap * sizeof *rows);
  for (int s = 0; rows && s < o->suites.n; s++) {
    size_t first = n;
    for (int d = 0; d < n_dev; d++) {
      const cJSON *t;
      cJSON_ArrayForEach(t, report_tests(&runs[d * o->suites.n + s])) {
        const char *name = jstr(t, "test");
        int seen = 0;
        for (size_t i = first; i < n && !seen; i++) seen = strcmp(rows[i].test, name) == 0;
        if (seen) continue;
        if (n == cap) {
          mx_row *r = realloc(rows, (cap *= 2) * sizeof *rows);
          if (!r) { free(rows); return NULL; }
          rows = r;
        }
        rows[n++] = (mx_row){o->suites.v[s], jstr(t, "tcase"), name};
      }
    }
    int incomplete = 0;
    for (int d = 0; d < n_dev; d++) incomplete |= run_needs_row(&runs[d * o->suites.n + s]);
    if (incomplete) {
      if (n == cap) {
        mx_row *r = realloc(rows, (cap *= 2) * sizeof *rows);
        if (!r) { free(rows); return NULL; }
        rows = r;
      }
      rows[n++] = (mx_row){o->suites.v[s], "", NULL};
    }
  }
  *n_rows = n;
  return rows;
}

typedef struct mx_sum {
  int passed, failed, not_run;
  double seconds;
} mx_sum;

/* Everything one `matrix` run gathered, for the writers below. */
typedef struct mx_results {
  const mx_opts *o;
  const mx_col *cols;
  int n_dev; /* columns */
  mx_run *runs; /* [column][suite] */
  const char *const *problems; /* implementations that could not list their devices */
  int n_problems;
  const mx_row *rows;
  size_t n_rows;
  const char *date, *host;
  mx_sum sum[MAX_COLUMNS];
  int all_pass;
} mx_results;

static mx_run *run_of(const mx_results *r, int d, int s) { return &r->runs[d * r->o->suites.n + s]; }

/* One line: newlines and table bars would break the Markdown. */
static void one_line(const char *in, char *out, size_t len) {
  size_t k = 0;
  for (; *in && k + 1 < len; in++) out[k++] = (*in == '\n' || *in == '\r') ? ' ' : *in;
  out[k] = 0;
}

static void device_id(const mx_results *r, int d, char *buf, size_t len) {
  snprintf(buf, len, "%s", r->cols[d].label);
}

/* Title, the columns and the header of the results table. */
static void md_header(FILE *md, const mx_results *r) {
  fprintf(md, "# clformer test matrix\n\n%s on %s. Cells: result, max error relative to the "
          "reference's scale (of the test's worst comparison), time; – where the column does not run "
          "the suite. Each column runs in processes that load only its implementation's ICD.\n\n",
          r->date, r->host);
  fprintf(md, "| column | ICD | platform | device | driver | OpenCL | settings |\n"
              "| --- | --- | --- | --- | --- | --- | --- |\n");
  for (int d = 0; d < r->n_dev; d++) {
    const mx_col *c = &r->cols[d];
    /* "OpenCL 3.0 PoCL HSTR: ..." -> "OpenCL 3.0" */
    const char *v = c->opencl, *sp = strchr(v, ' ');
    int vlen = sp && strchr(sp + 1, ' ') ? (int)(strchr(sp + 1, ' ') - v) : (int)strlen(v);
    fprintf(md, "| %s | %s | %s | %s | %s | %.*s | %s |\n", c->label, c->impl->name, c->platform, c->device,
            c->driver, vlen, v, c->settings[0] ? c->settings : "as reported");
  }
  fprintf(md, "\n| suite | test |");
  for (int d = 0; d < r->n_dev; d++) fprintf(md, " %s |", r->cols[d].label);
  fprintf(md, "\n| --- | --- |");
  for (int d = 0; d < r->n_dev; d++) fprintf(md, " --- |");
  fprintf(md, "\n");
}

/* One cell's JSON: the report's fields of the test, or the run's problem. */
static cJSON *json_cell(const mx_results *r, int d, int si, const mx_cell *c) {
  char id[64];
  cJSON *jc = cJSON_CreateObject();
  device_id(r, d, id, sizeof id);
  cJSON_AddStringToObject(jc, "column", id);
  cJSON_AddStringToObject(jc, "result", c->result);
  if (c->test) {
    const char *keys[] = {"message", "ms", "max_error", "tolerance"};
    for (int k = 0; k < 4; k++) {
      const cJSON *v = cJSON_GetObjectItem(c->test, keys[k]);
      cJSON_AddItemToObject(jc, keys[k], v ? cJSON_Duplicate(v, 1) : cJSON_CreateNull());
    }
  } else {
    cJSON_AddStringToObject(jc, "message", run_of(r, d, si)->problem);
  }
  return jc;
}

/* Row i of the table, in Markdown and as JSON; counts its cells. */
static cJSON *table_row(FILE *md, mx_results *r, size_t i) {
  const mx_row *row = &r->rows[i];
  char buf[600];
  int si = 0;
  while (strcmp(r->o->suites.v[si], row->suite)) si++;
  const char *label = row->test ? row->test
                      : i > 0 && !strcmp(r->rows[i - 1].suite, row->suite) ? "(rest of the suite)"
                                                                            : "(whole suite)";
  fprintf(md, "| %s | %s |", row->suite, label);
  cJSON *jr = cJSON_CreateObject(), *jcells = cJSON_CreateArray();
  cJSON_AddStringToObject(jr, "suite", row->suite);
  cJSON_AddStringToObject(jr, "tcase", row->tcase);
  if (row->test) cJSON_AddStringToObject(jr, "test", row->test);
  else cJSON_AddNullToObject(jr, "test");
  for (int d = 0; d < r->n_dev; d++) {
    mx_cell c;
    make_cell(run_of(r, d, si), row, &c);
    cell_text(&c, buf, sizeof buf);
    fprintf(md, " %s |", buf);
    r->sum[d].passed += c.kind == CELL_PASS;
    r->sum[d].failed += c.kind == CELL_FAIL;
    r->sum[d].not_run += c.kind == CELL_NOT_RUN;
    r->all_pass &= c.kind != CELL_FAIL;
    cJSON_AddItemToArray(jcells, json_cell(r, d, si, &c));
  }
  fprintf(md, "\n");
  cJSON_AddItemToObject(jr, "cells", jcells);
  return jr;
}

static void md_summary(FILE *md, const mx_results *r) {
  fprintf(md, "| **summary** | |");
  for (int d = 0; d < r->n_dev; d++) {
    int total = r->sum[d].passed + r->sum[d].failed;
    fprintf(md, " **%d/%d passed** · %.1f s |", r->sum[d].passed, total, r->sum[d].seconds);
  }
  fprintf(md, "\n");
  for (int d = 0; d < r->n_dev; d++)
    if (r->sum[d].not_run)
      fprintf(md, "\n%s: %d test%s not run (left out by the program on this device, e.g. "
              "CLF_TEST_UNDER_OCLGRIND on Oclgrind).\n", r->cols[d].label, r->sum[d].not_run,
              r->sum[d].not_run == 1 ? "" : "s");
}

/* Driver defects the programs found and worked around: their "note: this
 * driver has ..." lines, once per column and note. */
static void md_driver_notes(FILE *md, const mx_results *r) {
  int any = 0;
  char line[600];
  fprintf(md, "\n## Driver defects met (worked around)\n\n");
  for (int d = 0; d < r->n_dev; d++)
    for (int s = 0; s < r->o->suites.n; s++) {
      const mx_run *run = run_of(r, d, s);
      FILE *f = run->status == RUN_SKIPPED || !run->log[0] ? NULL : fopen(run->log, "r");
      while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "note: this driver has ", 22)) continue;
        line[strcspn(line, "\r\n")] = 0;
        fprintf(md, "- %s, %s: %s\n", r->cols[d].label, r->o->suites.v[s], line + 6);
        any = 1;
      }
      if (f) fclose(f);
    }
  if (!any) fprintf(md, "None.\n");
}

/* Failures: each failed test's message, then each run that went wrong. */
static void md_failures(FILE *md, const mx_results *r) {
  char msg[1200];
  int any = 0;
  fprintf(md, "\n## Failures\n\n");
  for (int i = 0; i < r->n_problems; i++) {
    one_line(r->problems[i], msg, sizeof msg);
    fprintf(md, "- %s\n", msg);
    any = 1;
  }
  for (int d = 0; d < r->n_dev; d++)
    for (int s = 0; s < r->o->suites.n; s++) {
      const mx_run *run = run_of(r, d, s);
      const mx_col *c = &r->cols[d];
      const cJSON *t;
      cJSON_ArrayForEach(t, report_tests(run)) {
        if (strcmp(jstr(t, "result"), "pass") == 0) continue;
        one_line(jstr(t, "message"), msg, sizeof msg);
        fprintf(md, "- %s / %s on %s (%s): %s\n", r->o->suites.v[s], jstr(t, "test"), c->label, c->device, msg);
        any = 1;
      }
      if (run->problem[0]) {
        one_line(run->problem, msg, sizeof msg);
        fprintf(md, "- %s on %s (%s): %s (log: %s)\n", r->o->suites.v[s], c->label, c->device, msg, run->log);
        any = 1;
      }
    }
  if (!any) fprintf(md, "None.\n");
}

/* The columns with their totals and every run, into the JSON root. */
static void json_devices_and_runs(cJSON *root, const mx_results *r) {
  cJSON *jdevs = cJSON_GetObjectItem(root, "columns"), *jruns = cJSON_GetObjectItem(root, "runs");
  char id[64];
  for (int d = 0; d < r->n_dev; d++) {
    const mx_col *c = &r->cols[d];
    cJSON *jd = cJSON_CreateObject();
    device_id(r, d, id, sizeof id);
    cJSON_AddStringToObject(jd, "column", id);
    cJSON_AddStringToObject(jd, "icd", c->impl->name);
    cJSON_AddStringToObject(jd, "icd_library", c->impl->lib);
    snprintf(id, sizeof id, "%d:%d", c->platform_index, c->device_index);
    cJSON_AddStringToObject(jd, "id", id);
    cJSON_AddStringToObject(jd, "platform", c->platform);
    cJSON_AddStringToObject(jd, "device", c->device);
    cJSON_AddStringToObject(jd, "driver", c->driver);
    cJSON_AddStringToObject(jd, "opencl", c->opencl);
    cJSON_AddStringToObject(jd, "settings", c->settings);
    device_id(r, d, id, sizeof id);
    cJSON_AddNumberToObject(jd, "passed", r->sum[d].passed);
    cJSON_AddNumberToObject(jd, "failed", r->sum[d].failed);
    cJSON_AddNumberToObject(jd, "not_run", r->sum[d].not_run);
    cJSON_AddNumberToObject(jd, "seconds", r->sum[d].seconds);
    cJSON_AddItemToArray(jdevs, jd);
    for (int s = 0; s < r->o->suites.n; s++) {
      const mx_run *run = run_of(r, d, s);
      cJSON *jr = cJSON_CreateObject();
      cJSON_AddStringToObject(jr, "column", id);
      cJSON_AddStringToObject(jr, "suite", r->o->suites.v[s]);
      cJSON_AddStringToObject(jr, "status", run_status_names[run->status]);
      cJSON_AddNumberToObject(jr, run->status == RUN_CRASHED ? "signal" : "exit_code", run->code);
      cJSON_AddNumberToObject(jr, "seconds", run->seconds);
      cJSON_AddStringToObject(jr, "log", run->log);
      cJSON_AddStringToObject(jr, "problem", run->problem);
      cJSON_AddItemToArray(jruns, jr);
    }
  }
}

static int write_json(cJSON *root, const char *path) {
  char *text = cJSON_Print(root);
  FILE *js = text ? fopen(path, "w") : NULL;
  int ok = js && fputs(text, js) >= 0 && fputc('\n', js) != EOF;
  if (js && fclose(js) != 0) ok = 0;
  free(text);
  return ok;
}

/* Writes out/matrix.md and out/matrix.json; returns 1 when every test
 * passed, 0 when not, -1 when the files could not be written. */
static int write_outputs(mx_results *r) {
  char path[PATH_MAX];
  const mx_opts *o = r->o;
  r->all_pass = r->n_problems == 0;
  for (int d = 0; d < r->n_dev; d++)
    for (int s = 0; s < o->suites.n; s++) {
      r->sum[d].seconds += run_of(r, d, s)->seconds;
      if (run_of(r, d, s)->problem[0]) r->all_pass = 0;
    }
  snprintf(path, sizeof path, "%s/matrix.md", o->out);
  FILE *md = fopen(path, "w");
  if (!md) {
    fprintf(stderr, "clformer: matrix: cannot write %s: %s\n", path, strerror(errno));
    return -1;
  }
  cJSON *root = cJSON_CreateObject();
  cJSON_AddArrayToObject(root, "columns");
  cJSON_AddNumberToObject(root, "schema", 2);
  cJSON_AddStringToObject(root, "date", r->date);
  cJSON_AddStringToObject(root, "host", r->host);
  cJSON_AddArrayToObject(root, "runs");
  cJSON *jrows = cJSON_AddArrayToObject(root, "rows");
  md_header(md, r);
  for (size_t i = 0; i < r->n_rows; i++) cJSON_AddItemToArray(jrows, table_row(md, r, i));
  md_summary(md, r);
  md_failures(md, r);
  md_driver_notes(md, r);
  int md_ok = fclose(md) == 0;
  json_devices_and_runs(root, r);
  cJSON_AddBoolToObject(root, "all_passed", r->all_pass);
  snprintf(path, sizeof path, "%s/matrix.json", o->out);
  int js_ok = write_json(root, path);
  cJSON_Delete(root);
  if (!md_ok || !js_ok) {
    fprintf(stderr, "clformer: matrix: cannot write the results under %s\n", o->out);
    return -1;
  }
  return r->all_pass;
}

/* ---- the command ---- */

static int make_dir(const char *path) {
  return mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

/* Suite names checked or defaulted, the test programs' and fixtures'
 * directories found, out/, out/logs and out/reports made.  Returns -1, or
 * the exit status after saying what is wrong. */
static int prepare(mx_opts *o, char *tests_dir, size_t len) {
  for (int s = 0; s < o->suites.n; s++)
    if (strchr(o->suites.v[s], '/') || !o->suites.v[s][0])
      return clf_cli_usage_error(&clf_cli_matrix_command, "bad suite name \"%s\"", o->suites.v[s]);
  if (!o->suites.n)
    for (size_t s = 0; s < sizeof default_suites / sizeof *default_suites; s++)
      o->suites.v[o->suites.n++] = default_suites[s];
  if (!o->tests) {
    /* The build tree: tools/clformer beside tests/test_*. */
    char exe[PATH_MAX - 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return clf_cli_usage_error(&clf_cli_matrix_command, "cannot find the build tree; pass --tests DIR");
    exe[n] = 0;
    *strrchr(exe, '/') = 0;
    snprintf(tests_dir, len, "%s/../tests", exe);
    o->tests = tests_dir;
  }
  if (!o->fixtures) o->fixtures = getenv("CLF_FIXTURES") ? getenv("CLF_FIXTURES") : CLF_SOURCE_FIXTURES;
  char sub[PATH_MAX + 16];
  int dirs_ok = make_dir(o->out) == 0;
  snprintf(sub, sizeof sub, "%s/logs", o->out);
  dirs_ok = dirs_ok && make_dir(sub) == 0;
  snprintf(sub, sizeof sub, "%s/reports", o->out);
  dirs_ok = dirs_ok && make_dir(sub) == 0;
  if (!dirs_ok) {
    fprintf(stderr, "clformer: matrix: cannot create %s: %s\n", sub, strerror(errno));
    return 1;
  }
  return -1;
}

/* The devices of one implementation, listed by `clformer devices --json` in a
 * process that loads it alone; NULL after writing why into `why`. */
static cJSON *impl_devices(const mx_opts *o, const clf_cli_impl *im, char *why, size_t len) {
  char exe[PATH_MAX], out[PATH_MAX], vendors[PATH_MAX + 32];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    snprintf(why, len, "%.64s: cannot find the clformer executable", im->name);
    return NULL;
  }
  exe[n] = 0;
  snprintf(out, sizeof out, "%.3000s/logs/devices-%.64s.json", o->out, im->name);
  char *set[4];
  int ns = clf_cli_impl_env(im, vendors, sizeof vendors, set, 4);
  char **env = clf_cli_child_env(set, ns);
  char *argv[] = {exe, "devices", "--json", NULL};
  clf_cli_exit ex;
  int started = env && clf_cli_spawn(argv, env, out, 120, &ex) == 0;
  free(env);
  cJSON *j = started && !ex.signal && !ex.timed_out && ex.code == 0 ? clf_cli_read_json(out) : NULL;
  if (!j) {
    char reason[300] = "";
    if (started && ex.code) log_reason(out, reason, sizeof reason);
    snprintf(why, len, "%.64s (%.200s): listing its devices %s%s%.200s (log: %.100s)", im->name, im->icd,
             !started ? "could not start" : ex.timed_out ? "timed out" : ex.signal ? "crashed: " : "failed: ",
             ex.signal ? clf_cli_signal_name(ex.signal) : "", reason, out);
  }
  return j;
}

static void copy_str(char *dst, size_t len, const cJSON *o, const char *key) {
  const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(o, key));
  snprintf(dst, len, "%s", v ? v : "?");
}

/* The column's env and settings text from a NULL-ended list. */
static void col_set(mx_col *c, const char *const *env) {
  size_t k = strlen(c->settings);
  for (; *env && c->n_env < MAX_COL_ENV; env++) {
    c->env[c->n_env++] = *env;
    if (!strncmp(*env, "OCLGRIND_", 9)) continue;
    k += snprintf(c->settings + k, sizeof c->settings - k, "%s%s", k ? ", " : "", *env);
    if (k >= sizeof c->settings) k = sizeof c->settings - 1;
  }
}

/* A column beside `base`: the same device with settings added; appended
 * when `keep` or a --device selector names it. */
static void add_variant(const mx_opts *o, mx_col *cols, int *n, int keep, const mx_col *base, const char *suffix,
                        const char *const *env, const char *const *suites, int checks, const char *what) {
  mx_col c = *base;
  c.n_env = 0;
  c.settings[0] = 0;
  snprintf(c.label, sizeof c.label, "%.40s %s", base->label, suffix);
  col_set(&c, env);
  if (what) {
    size_t k = strlen(c.settings);
    snprintf(c.settings + k, sizeof c.settings - k, "%s%s", k ? "; " : "", what);
  }
  c.suites = suites;
  c.oclgrind_checks = checks;
  for (int k = 0; k < o->devices.n && !keep; k++) keep = column_matches(&c, o->devices.v[k]);
  if (keep && *n < MAX_COLUMNS) cols[(*n)++] = c;
}

/* Every column: each device of each implementation as it is, then (unless
 * --no-variants) PoCL's pthread device in GPU class and under mobile
 * limits, and Oclgrind in GPU class with its race checks.  Implementations
 * that cannot list their devices go to `problems`. */
static int find_columns(const mx_opts *o, const clf_cli_impl *impls, int n_impl, mx_col *cols,
                        char problems[][1024], int *n_problems) {
  static const char *const gpu[] = {"CLFORMER_DEVICE_CLASS=gpu", NULL};
  static const char *const mobile[] = {"CLFORMER_DEVICE_CLASS=gpu", "CLFORMER_LIMITS=" MOBILE_LIMITS, NULL};
  static const char *const checked[] = {OCLGRIND_CHECKS, NULL};
  static const char *const races[] = {"CLFORMER_DEVICE_CLASS=gpu", OCLGRIND_CHECKS, "OCLGRIND_DATA_RACES=1", NULL};
  int n = 0;
  for (int i = 0; i < n_impl; i++) {
    cJSON *j = impl_devices(o, &impls[i], problems[*n_problems], 1024);
    if (!j) {
      /* A failure counts unless the selectors leave the implementation out. */
      int named = o->devices.n == 0;
      for (int k = 0; k < o->devices.n && !named; k++)
        named = clf_cli_contains_nocase(impls[i].name, o->devices.v[k]) ||
                clf_cli_contains_nocase(impls[i].lib, o->devices.v[k]);
      *n_problems += named;
      continue;
    }
    const cJSON *devs = cJSON_GetObjectItem(j, "devices"), *d;
    int n_devs = cJSON_GetArraySize(devs);
    cJSON_ArrayForEach(d, devs) {
      if (n >= MAX_COLUMNS) break;
      mx_col *c = &cols[n];
      memset(c, 0, sizeof *c);
      c->impl = &impls[i];
      c->platform_index = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(d, "platform_index"));
      c->device_index = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(d, "device_index"));
      copy_str(c->platform, sizeof c->platform, d, "platform");
      copy_str(c->device, sizeof c->device, d, "device");
      copy_str(c->driver, sizeof c->driver, d, "driver");
      copy_str(c->opencl, sizeof c->opencl, d, "opencl");
      copy_str(c->type, sizeof c->type, d, "type");
      /* "pocl pthread": the implementation, and the device's first word
       * where it has several. */
      int w = (int)strcspn(c->device, "- ");
      if (n_devs > 1) snprintf(c->label, sizeof c->label, "%.30s %.*s", impls[i].name, w > 24 ? 24 : w, c->device);
      else snprintf(c->label, sizeof c->label, "%.40s", impls[i].name);
      int oclgrind = is_oclgrind(c);
      if (oclgrind) {
        col_set(c, checked);
        snprintf(c->settings, sizeof c->settings, "Oclgrind --check-api --uninitialized");
        c->oclgrind_checks = 1;
        c->suites = op_suites;
      }
      int keep = o->devices.n == 0;
      for (int k = 0; k < o->devices.n && !keep; k++) keep = column_matches(c, o->devices.v[k]);
      const mx_col base = *c;
      n += keep;
      if (o->no_variants) continue;
      /* Variants: kept with their device, or when a selector names them. */
      if (clf_cli_contains_nocase(impls[i].lib, "pocl") &&
          (!strncmp(base.device, "pthread", 7) || !strncmp(base.device, "cpu", 3))) {
        add_variant(o, cols, &n, keep, &base, "gpu-class", gpu, NULL, 0, NULL);
        add_variant(o, cols, &n, keep, &base, "mobile", mobile, limit_suites, 0, NULL);
      } else if (oclgrind) {
        add_variant(o, cols, &n, keep, &base, "gpu-class races", races, race_suites, 1,
                    "Oclgrind --check-api --uninitialized --data-races");
      }
    }
    cJSON_Delete(j);
  }
  if (!n && !*n_problems) fprintf(stderr, "clformer: matrix: no column matches the --device selectors\n");
  return n;
}

/* One finished run's progress line. */
static void report_run(const mx_col *c, const char *suite, const mx_run *r, int k, int total) {
  int pass = 0, n = 0;
  const cJSON *t;
  cJSON_ArrayForEach(t, report_tests(r)) { n++; pass += strcmp(jstr(t, "result"), "pass") == 0; }
  fprintf(stderr, "[%d/%d] %s: %s: %d/%d passed (%.1f s)%s%s\n", k, total, c->label, suite, pass, n, r->seconds,
          r->problem[0] ? ": " : "", r->problem);
}

/* Every suite in every column, one process each, up to --jobs at once, a
 * progress line as each ends. */
static void run_all(const mx_opts *o, const mx_col *cols, int n_col, mx_run *runs) {
  const char *cache = getenv("CLFORMER_CACHE_DIR");
  char cache_dir[PATH_MAX + 16];
  snprintf(cache_dir, sizeof cache_dir, "%s/kernel-cache", o->out);
  if (!cache) cache = cache_dir;
  const int n_suites = o->suites.n, n_runs = n_col * n_suites;
  int total = 0, done = 0, next = 0, running = 0;
  for (int i = 0; i < n_runs; i++) total += column_has_suite(&cols[i / n_suites], o->suites.v[i % n_suites]);
  int *active = calloc((size_t)(o->jobs > 0 ? o->jobs : 1), sizeof *active);
  const int jobs = active && o->jobs > 0 ? (int)o->jobs : 1;
  int one_slot = 0;
  if (!active) active = &one_slot;
  while (next < n_runs || running) {
    while (running < jobs && next < n_runs) {
      const int i = next++, d = i / n_suites;
      mx_run *r = &runs[i];
      if (run_start(o, &cols[d], d, o->suites.v[i % n_suites], cache, r)) active[running++] = i;
      else if (r->status != RUN_SKIPPED) report_run(&cols[d], o->suites.v[i % n_suites], r, ++done, total);
    }
    int ended = 0;
    for (int j = 0; j < running; j++) {
      const int i = active[j], d = i / n_suites;
      if (!clf_cli_poll(&runs[i].child)) continue;
      run_outcome(o, &cols[d], &runs[i]);
      report_run(&cols[d], o->suites.v[i % n_suites], &runs[i], ++done, total);
      active[j--] = active[--running];
      ended = 1;
    }
    if (!ended && running) nanosleep(&(struct timespec){0, 20000000}, NULL);
  }
  if (active != &one_slot) free(active);
}

static int matrix_main(const void *opts, int argc, char **argv) {
  (void)argc; (void)argv;
  mx_opts o = *(const mx_opts *)opts;
  char tests_dir[PATH_MAX - 32], icd_dir[PATH_MAX], host[400], date[64];
  if (!o.out) o.out = "matrix";
  int rc = prepare(&o, tests_dir, sizeof tests_dir);
  if (rc >= 0) return rc;
  static clf_cli_impl impls[MAX_IMPLS];
  static mx_col cols[MAX_COLUMNS];
  static char problems[MAX_IMPLS][1024];
  const char *problem_ptrs[MAX_IMPLS];
  int n_problems = 0;
  int n_impl = clf_cli_find_impls(impls, MAX_IMPLS, icd_dir, sizeof icd_dir);
  int n_col = find_columns(&o, impls, n_impl, cols, problems, &n_problems);
  for (int i = 0; i < n_problems; i++) {
    problem_ptrs[i] = problems[i];
    fprintf(stderr, "clformer: matrix: %s\n", problems[i]);
  }
  mx_run *runs = calloc((size_t)(n_col ? n_col : 1) * o.suites.n, sizeof *runs);
  if (!runs || (!n_col && !n_problems)) {
    clf_cli_remove_icd_dir(icd_dir);
    free(runs);
    return 1;
  }
  struct utsname u;
  if (uname(&u) == 0) snprintf(host, sizeof host, "%s (%s %s %s)", u.nodename, u.sysname, u.release, u.machine);
  else snprintf(host, sizeof host, "unknown host");
  time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
  run_all(&o, cols, n_col, runs);
  clf_cli_remove_icd_dir(icd_dir);

  static mx_results res;
  memset(&res, 0, sizeof res);
  res = (mx_results){.o = &o, .cols = cols, .n_dev = n_col, .runs = runs, .date = date, .host = host,
                     .problems = problem_ptrs, .n_problems = n_problems};
  mx_row *rows = collect_rows(&o, runs, n_col, &res.n_rows);
  res.rows = rows;
  rc = rows ? write_outputs(&res) : -1;
  if (rc >= 0) fprintf(stderr, "clformer: matrix: %s; wrote %s/matrix.md and %s/matrix.json\n",
                       rc ? "every test passed" : "FAILURES (see the Failures section)", o.out, o.out);
  free(rows);
  for (int i = 0; i < n_col * o.suites.n; i++) cJSON_Delete(runs[i].report);
  free(runs);
  return rc == 1 ? 0 : 1;
}

const clf_cli_command clf_cli_matrix_command = {
    .name = "matrix",
    .summary = "the test suites on every device, each in its own process (matrix.md, matrix.json)",
    .synopsis = "[--device S]... [--suite NAME]... [--out DIR] [--tests DIR] [--fixtures DIR] [--timeout SEC] "
                "[--jobs N] [--no-variants]",
    .details = "Runs the test programs tests/test_NAME in every column (or those named), each in its\n"
               "own process, and writes DIR/matrix.md and DIR/matrix.json (default DIR: ./matrix).\n"
               "A column is a device of one OpenCL implementation (the registered ICDs, those of\n"
               "tools/install-opencl.sh, Oclgrind), its processes loading that implementation alone;\n"
               "then PoCL's pthread device in GPU class (CLFORMER_DEVICE_CLASS=gpu) and under mobile\n"
               "limits (CLFORMER_LIMITS=" MOBILE_LIMITS "), and Oclgrind in GPU class\n"
               "with its data-race checks (docs/matrix.md).\n",
    .options = matrix_options,
    .opts_size = sizeof(mx_opts),
    .min_args = 0,
    .max_args = 0,
    .handler = matrix_main,
};
