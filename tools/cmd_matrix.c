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

/* The suites that need a device: ops, model fixtures, generation, runtime. */
static const char *const default_suites[] = {"norm",   "dense",    "embed",  "movement", "attention",
                                             "patch",  "linear",   "models", "heads",    "llama",
                                             "generate", "vision", "weight_types", "runtime"};
enum { MAX_DEVICES = 32, MAX_SUITES = 64, MAX_SELECT = 16 };

typedef enum { RUN_OK, RUN_FAILED, RUN_CRASHED, RUN_TIMEOUT, RUN_ERROR } run_status;
static const char *const run_status_names[] = {"ok", "failed", "crashed", "timeout", "error"};

/* One test program on one device. */
typedef struct mx_run {
  run_status status;
  int code;        /* exit status, or the signal when crashed */
  double seconds;  /* wall time of the process */
  char log[PATH_MAX];
  char problem[512]; /* why the run as a whole is not clean, or "" */
  cJSON *report;     /* the harness's report, or NULL */
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
  clf_cli_strings devices; /* --device: selectors, or none for every device */
  clf_cli_strings suites;  /* --suite: names, or none for default_suites */
  const char *out, *tests, *fixtures;
  long timeout_s;
} mx_opts;

static const clf_cli_option matrix_options[] = {
    {"--device", "S", CLF_OPT_STRINGS, offsetof(mx_opts, devices), 0, 0, 0, MAX_SELECT, 0,
     "only the devices matching S (\"P:D\" or part of the name)"},
    {"--suite", "NAME", CLF_OPT_STRINGS, offsetof(mx_opts, suites), 0, 0, 0, MAX_SUITES, 0,
     "only the test program tests/test_NAME"},
    {"--out", "DIR", CLF_OPT_STRING, offsetof(mx_opts, out), 0, 0, 0, 0, 0, "where results go (default ./matrix)"},
    {"--tests", "DIR", CLF_OPT_STRING, offsetof(mx_opts, tests), 0, 0, 0, 0, 0,
     "the test programs (default: the build tree's tests/)"},
    {"--fixtures", "DIR", CLF_OPT_STRING, offsetof(mx_opts, fixtures), 0, 0, 0, 0, 0,
     "the fixtures (default $CLF_FIXTURES, else the source tree's)"},
    {"--timeout", "SEC", CLF_OPT_LONG, offsetof(mx_opts, timeout_s), 1, 604800, 1800, 0, 0,
     "seconds before a test program is killed"},
    {NULL}};

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int is_oclgrind(const clf_device_desc *d) { return clf_cli_contains_nocase(d->platform_name, "oclgrind"); }

/* "P:D" exactly, else a case-insensitive part of "platform / device". */
static int device_matches(const clf_device_desc *d, const char *sel) {
  int p, i, used = 0;
  if (sscanf(sel, "%d:%d%n", &p, &i, &used) == 2 && sel[used] == 0)
    return p == d->platform_index && i == d->device_index;
  char full[300];
  snprintf(full, sizeof full, "%s / %s", d->platform_name, d->device_name);
  return clf_cli_contains_nocase(full, sel);
}

/* ---- running one test program ---- */

static const char *signal_name(int sig) {
  switch (sig) {
  case SIGSEGV: return "SIGSEGV";
  case SIGABRT: return "SIGABRT";
  case SIGBUS: return "SIGBUS";
  case SIGFPE: return "SIGFPE";
  case SIGILL: return "SIGILL";
  case SIGKILL: return "SIGKILL";
  case SIGTERM: return "SIGTERM";
  default: return "signal";
  }
}

/* The environment of a child: ours, less the keys in `set`, plus `set`. */
static char **child_env(char *const *set, int n_set) {
  size_t n = 0;
  while (environ[n]) n++;
  char **env = malloc((n + n_set + 1) * sizeof *env);
  if (!env) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    int keep = 1;
    for (int j = 0; j < n_set && keep; j++) {
      size_t kl = strchr(set[j], '=') - set[j];
      keep = !(strncmp(environ[i], set[j], kl) == 0 && environ[i][kl] == '=');
    }
    if (keep) env[k++] = environ[i];
  }
  for (int j = 0; j < n_set; j++) env[k++] = set[j];
  env[k] = NULL;
  return env;
}

/* Runs `prog` with `env`, stdout and stderr to run->log, killing its process
 * group after timeout_s; fills status, code and seconds. */
static void run_child(const char *prog, char **env, long timeout_s, mx_run *run) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, run->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  char *argv[] = {(char *)prog, NULL};
  pid_t pid;
  double t0 = mono_s();
  int err = posix_spawn(&pid, prog, &fa, &attr, argv, env);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (err) {
    run->status = RUN_ERROR;
    snprintf(run->problem, sizeof run->problem, "cannot start %.300s: %s", prog, strerror(err));
    return;
  }
  int st = 0, timed_out = 0;
  for (;;) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) break;
    if (!timed_out && mono_s() - t0 > timeout_s) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      timed_out = 1;
    }
    nanosleep(&(struct timespec){0, 20000000}, NULL);
  }
  run->seconds = mono_s() - t0;
  if (timed_out) {
    run->status = RUN_TIMEOUT;
    snprintf(run->problem, sizeof run->problem, "timeout: killed after %ld s", timeout_s);
  } else if (WIFSIGNALED(st)) {
    run->status = RUN_CRASHED;
    run->code = WTERMSIG(st);
    snprintf(run->problem, sizeof run->problem, "crashed (%s)", signal_name(run->code));
  } else {
    run->code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    run->status = run->code == 0 ? RUN_OK : RUN_FAILED;
  }
}

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

static void one_run(const mx_opts *o, const clf_device_desc *d, const char *suite, const char *tag,
                    const char *cache_dir, mx_run *run) {
  char prog[PATH_MAX], report[PATH_MAX];
  memset(run, 0, sizeof *run);
  snprintf(prog, sizeof prog, "%s/test_%s", o->tests, suite);
  snprintf(run->log, sizeof run->log, "%s/logs/%s-%s.log", o->out, tag, suite);
  snprintf(report, sizeof report, "%s/reports/%s-%s.json", o->out, tag, suite);
  unlink(report);
  if (access(prog, X_OK) != 0) {
    run->status = RUN_ERROR;
    snprintf(run->problem, sizeof run->problem, "no test program %.300s", prog);
    return;
  }
  char dev[32], e_dev[64], e_rep[PATH_MAX + 16], e_fix[PATH_MAX + 16], e_cache[PATH_MAX + 64];
  snprintf(dev, sizeof dev, "%d:%d", d->platform_index, d->device_index);
  snprintf(e_dev, sizeof e_dev, "CLFORMER_DEVICE=%s", dev);
  snprintf(e_rep, sizeof e_rep, "CLF_TH_REPORT=%s", report);
  snprintf(e_fix, sizeof e_fix, "CLF_FIXTURES=%s", o->fixtures);
  snprintf(e_cache, sizeof e_cache, "CLFORMER_CACHE_DIR=%s", cache_dir);
  char *set[] = {e_dev, "CLF_REQUIRE_DEVICE=1", e_rep, e_fix, e_cache, "CLF_TEST_UNDER_OCLGRIND=1"};
  char **env = child_env(set, is_oclgrind(d) ? 6 : 5);
  if (!env) {
    run->status = RUN_ERROR;
    snprintf(run->problem, sizeof run->problem, "out of memory");
    return;
  }
  run_child(prog, env, o->timeout_s, run);
  free(env);
  run->report = clf_cli_read_json(report);
  const cJSON *rd = cJSON_GetObjectItem(run->report, "device");
  size_t dl = strlen(dev);
  if (run->report && (!cJSON_IsString(rd) || strncmp(rd->valuestring, dev, dl) || rd->valuestring[dl] != ' ')) {
    run->status = RUN_ERROR;
    snprintf(run->problem, sizeof run->problem, "ran on \"%s\", not on %s",
             cJSON_IsString(rd) ? rd->valuestring : "?", dev);
  }
  int complete = cJSON_IsTrue(cJSON_GetObjectItem(run->report, "complete"));
  if (run->status == RUN_OK && !complete) {
    run->status = RUN_ERROR;
    snprintf(run->problem, sizeof run->problem, "exited 0 without a complete report");
  } else if (run->status == RUN_FAILED && !complete) {
    run->status = RUN_ERROR;
    char why[400];
    log_reason(run->log, why, sizeof why);
    snprintf(run->problem, sizeof run->problem, "exited with status %d: %s", run->code, why);
  }
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

/* A test the report has shows its result; one it lacks is "not run": left
 * out by the program on this device when the report is complete (not a
 * failure), cut off when it is not.  The suite's last row shows why a run
 * left no complete report. */
static void make_cell(const mx_run *r, const mx_row *row, mx_cell *c) {
  memset(c, 0, sizeof *c);
  c->test = row->test ? find_test(r, row->test) : NULL;
  if (c->test) {
    const char *res = jstr(c->test, "result");
    int pass = strcmp(res, "pass") == 0;
    snprintf(c->result, sizeof c->result, "%s", pass ? "pass" : strcmp(res, "fail") == 0 ? "FAIL" : "ERROR");
    c->kind = pass ? CELL_PASS : CELL_FAIL;
  } else if (row->test) {
    snprintf(c->result, sizeof c->result, "not run");
    c->kind = run_complete(r) ? CELL_NOT_RUN : CELL_FAIL;
  } else if (!run_complete(r)) {
    snprintf(c->result, sizeof c->result, "%.40s",
             r->status == RUN_CRASHED ? r->problem : r->status == RUN_TIMEOUT ? "timeout" : "error");
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
    for (int d = 0; d < n_dev; d++) incomplete |= !run_complete(&runs[d * o->suites.n + s]);
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
  const clf_device_desc *devs;
  int n_dev;
  mx_run *runs; /* [device][suite] */
  const mx_row *rows;
  size_t n_rows;
  const char *date, *host;
  mx_sum sum[MAX_DEVICES];
  int all_pass;
} mx_results;

static mx_run *run_of(const mx_results *r, int d, int s) { return &r->runs[d * r->o->suites.n + s]; }

/* One line: newlines and table bars would break the Markdown. */
static void one_line(const char *in, char *out, size_t len) {
  size_t k = 0;
  for (; *in && k + 1 < len; in++) out[k++] = (*in == '\n' || *in == '\r') ? ' ' : *in;
  out[k] = 0;
}

static void device_id(const clf_device_desc *d, char *buf, size_t len) {
  snprintf(buf, len, "%d:%d", d->platform_index, d->device_index);
}

/* Title, the devices and the header of the results table. */
static void md_header(FILE *md, const mx_results *r) {
  fprintf(md, "# clformer test matrix\n\n%s on %s. Cells: result, max error relative to the "
          "reference's scale (of the test's worst comparison), time.\n\n", r->date, r->host);
  fprintf(md, "| column | platform | device | driver | OpenCL |\n| --- | --- | --- | --- | --- |\n");
  for (int d = 0; d < r->n_dev; d++) {
    const clf_device_desc *dv = &r->devs[d];
    /* "OpenCL 3.0 PoCL HSTR: ..." -> "OpenCL 3.0" */
    const char *v = dv->device_version, *sp = strchr(v, ' ');
    int vlen = sp && strchr(sp + 1, ' ') ? (int)(strchr(sp + 1, ' ') - v) : (int)strlen(v);
    fprintf(md, "| %d:%d | %s | %s | %s | %.*s |\n", dv->platform_index, dv->device_index, dv->platform_name,
            dv->device_name, dv->driver_version, vlen, v);
  }
  fprintf(md, "\n| suite | test |");
  for (int d = 0; d < r->n_dev; d++) {
    /* The column's short name: the device name up to its first '-' or ' '. */
    int len = (int)strcspn(r->devs[d].device_name, "- ");
    fprintf(md, " %d:%d %.*s |", r->devs[d].platform_index, r->devs[d].device_index, len, r->devs[d].device_name);
  }
  fprintf(md, "\n| --- | --- |");
  for (int d = 0; d < r->n_dev; d++) fprintf(md, " --- |");
  fprintf(md, "\n");
}

/* One cell's JSON: the report's fields of the test, or the run's problem. */
static cJSON *json_cell(const mx_results *r, int d, int si, const mx_cell *c) {
  char id[32];
  cJSON *jc = cJSON_CreateObject();
  device_id(&r->devs[d], id, sizeof id);
  cJSON_AddStringToObject(jc, "device", id);
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
      fprintf(md, "\n%d:%d: %d test%s not run (left out by the program on this device, e.g. "
              "CLF_TEST_UNDER_OCLGRIND on Oclgrind).\n", r->devs[d].platform_index, r->devs[d].device_index,
              r->sum[d].not_run, r->sum[d].not_run == 1 ? "" : "s");
}

/* Failures: each failed test's message, then each run that went wrong. */
static void md_failures(FILE *md, const mx_results *r) {
  char msg[1200];
  int any = 0;
  fprintf(md, "\n## Failures\n\n");
  for (int d = 0; d < r->n_dev; d++)
    for (int s = 0; s < r->o->suites.n; s++) {
      const mx_run *run = run_of(r, d, s);
      const clf_device_desc *dv = &r->devs[d];
      const cJSON *t;
      cJSON_ArrayForEach(t, report_tests(run)) {
        if (strcmp(jstr(t, "result"), "pass") == 0) continue;
        one_line(jstr(t, "message"), msg, sizeof msg);
        fprintf(md, "- %s / %s on %d:%d (%s): %s\n", r->o->suites.v[s], jstr(t, "test"), dv->platform_index,
                dv->device_index, dv->device_name, msg);
        any = 1;
      }
      if (run->problem[0]) {
        one_line(run->problem, msg, sizeof msg);
        fprintf(md, "- %s on %d:%d (%s): %s (log: %s)\n", r->o->suites.v[s], dv->platform_index, dv->device_index,
                dv->device_name, msg, run->log);
        any = 1;
      }
    }
  if (!any) fprintf(md, "None.\n");
}

/* The devices with their totals and every run, into the JSON root. */
static void json_devices_and_runs(cJSON *root, const mx_results *r) {
  cJSON *jdevs = cJSON_GetObjectItem(root, "devices"), *jruns = cJSON_GetObjectItem(root, "runs");
  char id[32];
  for (int d = 0; d < r->n_dev; d++) {
    const clf_device_desc *dv = &r->devs[d];
    cJSON *jd = cJSON_CreateObject();
    device_id(dv, id, sizeof id);
    cJSON_AddStringToObject(jd, "id", id);
    cJSON_AddStringToObject(jd, "platform", dv->platform_name);
    cJSON_AddStringToObject(jd, "device", dv->device_name);
    cJSON_AddStringToObject(jd, "driver", dv->driver_version);
    cJSON_AddStringToObject(jd, "opencl", dv->device_version);
    cJSON_AddNumberToObject(jd, "passed", r->sum[d].passed);
    cJSON_AddNumberToObject(jd, "failed", r->sum[d].failed);
    cJSON_AddNumberToObject(jd, "not_run", r->sum[d].not_run);
    cJSON_AddNumberToObject(jd, "seconds", r->sum[d].seconds);
    cJSON_AddItemToArray(jdevs, jd);
    for (int s = 0; s < r->o->suites.n; s++) {
      const mx_run *run = run_of(r, d, s);
      cJSON *jr = cJSON_CreateObject();
      cJSON_AddStringToObject(jr, "device", id);
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
  r->all_pass = 1;
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
  cJSON_AddArrayToObject(root, "devices");
  cJSON_AddNumberToObject(root, "schema", 1);
  cJSON_AddStringToObject(root, "date", r->date);
  cJSON_AddStringToObject(root, "host", r->host);
  cJSON_AddArrayToObject(root, "runs");
  cJSON *jrows = cJSON_AddArrayToObject(root, "rows");
  md_header(md, r);
  for (size_t i = 0; i < r->n_rows; i++) cJSON_AddItemToArray(jrows, table_row(md, r, i));
  md_summary(md, r);
  md_failures(md, r);
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

/* The devices the --device selectors match (all without any); 0 when none
 * (said why). */
static int select_devices(const mx_opts *o, clf_device_desc *devs) {
  clf_device_desc all[MAX_DEVICES];
  size_t n_all = 0;
  int n_dev = 0;
  if (clf_list_devices(all, MAX_DEVICES, &n_all) != CLF_OK) {
    fprintf(stderr, "clformer: matrix: %s\n", clf_last_error(NULL));
    return 0;
  }
  for (size_t i = 0; i < n_all && i < MAX_DEVICES; i++) {
    int keep = o->devices.n == 0;
    for (int k = 0; k < o->devices.n && !keep; k++) keep = device_matches(&all[i], o->devices.v[k]);
    if (keep) devs[n_dev++] = all[i];
  }
  if (!n_dev) fprintf(stderr, "clformer: matrix: no device matches the --device selectors\n");
  return n_dev;
}

/* Every suite on every device, one process each, with a progress line. */
static void run_all(const mx_opts *o, const clf_device_desc *devs, int n_dev, mx_run *runs) {
  const char *cache = getenv("CLFORMER_CACHE_DIR");
  char cache_dir[PATH_MAX + 16];
  snprintf(cache_dir, sizeof cache_dir, "%s/kernel-cache", o->out);
  if (!cache) cache = cache_dir;
  int k = 0;
  for (int d = 0; d < n_dev; d++)
    for (int s = 0; s < o->suites.n; s++) {
      char tag[32];
      snprintf(tag, sizeof tag, "p%dd%d", devs[d].platform_index, devs[d].device_index);
      fprintf(stderr, "[%d/%d] %d:%d %s: %s ...", ++k, n_dev * o->suites.n, devs[d].platform_index,
              devs[d].device_index, devs[d].device_name, o->suites.v[s]);
      mx_run *r = &runs[d * o->suites.n + s];
      one_run(o, &devs[d], o->suites.v[s], tag, cache, r);
      int pass = 0, total = 0;
      const cJSON *t;
      cJSON_ArrayForEach(t, report_tests(r)) { total++; pass += strcmp(jstr(t, "result"), "pass") == 0; }
      fprintf(stderr, " %d/%d passed (%.1f s)%s%s\n", pass, total, r->seconds, r->problem[0] ? ": " : "", r->problem);
    }
}

static int matrix_main(const void *opts, int argc, char **argv) {
  (void)argc; (void)argv;
  mx_opts o = *(const mx_opts *)opts;
  char tests_dir[PATH_MAX - 32], icd_dir[PATH_MAX], host[400], date[64];
  if (!o.out) o.out = "matrix";
  int rc = prepare(&o, tests_dir, sizeof tests_dir);
  if (rc >= 0) return rc;
  if (clf_cli_expose_devices(icd_dir, sizeof icd_dir) != 0) return 1;
  clf_device_desc devs[MAX_DEVICES];
  int n_dev = select_devices(&o, devs);
  mx_run *runs = n_dev ? calloc((size_t)n_dev * o.suites.n, sizeof *runs) : NULL;
  if (!runs) {
    clf_cli_remove_icd_dir(icd_dir);
    return 1;
  }
  struct utsname u;
  if (uname(&u) == 0) snprintf(host, sizeof host, "%s (%s %s %s)", u.nodename, u.sysname, u.release, u.machine);
  else snprintf(host, sizeof host, "unknown host");
  time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
  run_all(&o, devs, n_dev, runs);
  clf_cli_remove_icd_dir(icd_dir);

  static mx_results res;
  memset(&res, 0, sizeof res);
  res = (mx_results){.o = &o, .devs = devs, .n_dev = n_dev, .runs = runs, .date = date, .host = host};
  mx_row *rows = collect_rows(&o, runs, n_dev, &res.n_rows);
  res.rows = rows;
  rc = rows ? write_outputs(&res) : -1;
  if (rc >= 0) fprintf(stderr, "clformer: matrix: %s; wrote %s/matrix.md and %s/matrix.json\n",
                       rc ? "every test passed" : "FAILURES (see the Failures section)", o.out, o.out);
  free(rows);
  for (int i = 0; i < n_dev * o.suites.n; i++) cJSON_Delete(runs[i].report);
  free(runs);
  return rc == 1 ? 0 : 1;
}

const clf_cli_command clf_cli_matrix_command = {
    .name = "matrix",
    .summary = "the test suites on every device, each in its own process (matrix.md, matrix.json)",
    .synopsis = "[--device S]... [--suite NAME]... [--out DIR] [--tests DIR] [--fixtures DIR] [--timeout SEC]",
    .details = "Runs the test programs tests/test_NAME on every device (or those named), each in its\n"
               "own process, and writes DIR/matrix.md and DIR/matrix.json (default DIR: ./matrix).\n",
    .options = matrix_options,
    .opts_size = sizeof(mx_opts),
    .min_args = 0,
    .max_args = 0,
    .handler = matrix_main,
};
