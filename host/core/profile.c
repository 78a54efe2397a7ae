/* profile.c - per-op device time from OpenCL profiling events: while a
 * context records (clf_profile_start .. clf_profile_stop), every kernel
 * launch, CLBlast call and buffer copy keeps its event, and stop sums them
 * by op.  Where the driver's events carry no timestamps (all zero: Mesa's
 * rusticl), each command is timed on the host's monotonic clock instead,
 * the queue finished before it is enqueued and after. */
#include "core.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { CLOCK_EVENTS = 1, CLOCK_WALL = 2 };

static double wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

cl_event *clf__prof_event(clf_context *ctx, cl_event *event, cl_event *local) {
  if (ctx->recording && ctx->prof_clock == CLOCK_WALL) {
    clFinish(ctx->queue); /* what came before is not this command's time */
    ctx->prof_t0 = wall_ms();
  }
  return ctx->recording && !event ? local : event;
}

void clf__prof_mark(clf_context *ctx) {
  if (!ctx->recording || ctx->prof_clock == CLOCK_WALL) return;
  if (ctx->prof_mark) clReleaseEvent(ctx->prof_mark);
  ctx->prof_mark = NULL;
  if (clEnqueueMarkerWithWaitList(ctx->queue, 0, NULL, &ctx->prof_mark) != CL_SUCCESS) ctx->prof_mark = NULL;
}

void clf__prof_note(clf_context *ctx, const char *op, cl_event *event, cl_event *local) {
  if (!ctx->recording) return;
  cl_event ev = event ? *event : *local, start = ctx->prof_mark;
  ctx->prof_mark = NULL;
  if (!ev) return;
  double ms = 0;
  if (ctx->prof_clock == CLOCK_WALL) {
    clFinish(ctx->queue);
    ms = wall_ms() - ctx->prof_t0;
  }
  if (event) clRetainEvent(ev); /* the caller's: it releases its own reference */
  if (ctx->n_prof == ctx->cap_prof) {
    size_t cap = ctx->cap_prof ? 2 * ctx->cap_prof : 256;
    clf__prof_rec *r = realloc(ctx->prof, cap * sizeof *r);
    if (!r) {
      ctx->prof_oom = 1;
      clReleaseEvent(ev);
      if (start) clReleaseEvent(start);
      return;
    }
    ctx->prof = r;
    ctx->cap_prof = cap;
  }
  ctx->prof[ctx->n_prof++] = (clf__prof_rec){op, start, ev, ms, ctx->prof_path};
}

void clf__prof_path(clf_context *ctx, const char *line) {
  ctx->prof_path = -1;
  if (!ctx->recording) return;
  for (size_t i = 0; i < ctx->n_paths; i++)
    if (strcmp(ctx->paths[i], line) == 0) {
      ctx->path_counts[i]++;
      ctx->prof_path = (long)i;
      return;
    }
  if (ctx->n_paths == ctx->cap_paths) {
    const size_t cap = ctx->cap_paths ? 2 * ctx->cap_paths : 32;
    char **p = realloc(ctx->paths, cap * sizeof *p);
    if (p) ctx->paths = p;
    unsigned long *c = p ? realloc(ctx->path_counts, cap * sizeof *c) : NULL;
    if (c) ctx->path_counts = c;
    double *t = c ? realloc(ctx->path_ms, cap * sizeof *t) : NULL;
    if (t) ctx->path_ms = t;
    if (!p || !c || !t) return (void)(ctx->prof_oom = 1);
    ctx->cap_paths = cap;
  }
  char *copy = malloc(strlen(line) + 1);
  if (!copy) return (void)(ctx->prof_oom = 1);
  ctx->paths[ctx->n_paths] = strcpy(copy, line);
  ctx->path_ms[ctx->n_paths] = 0;
  ctx->path_counts[ctx->n_paths] = 1;
  ctx->prof_path = (long)ctx->n_paths++;
}

void clf__prof_path_end(clf_context *ctx) { ctx->prof_path = -1; }

void clf__prof_paths_clear(clf_context *ctx) {
  for (size_t i = 0; i < ctx->n_paths; i++) free(ctx->paths[i]);
  free(ctx->paths);
  free(ctx->path_counts);
  free(ctx->path_ms);
  ctx->paths = NULL;
  ctx->path_counts = NULL;
  ctx->path_ms = NULL;
  ctx->n_paths = ctx->cap_paths = 0;
  ctx->prof_path = -1;
}

size_t clf_profile_paths(const clf_context *ctx, size_t i, const char **line, unsigned long *count, double *ms) {
  if (!ctx) return 0;
  if (i < ctx->n_paths) {
    if (line) *line = ctx->paths[i];
    if (count) *count = ctx->path_counts[i];
    if (ms) *ms = ctx->path_ms[i];
  }
  return ctx->n_paths;
}

void clf__prof_clear(clf_context *ctx) {
  for (size_t i = 0; i < ctx->n_prof; i++) {
    clReleaseEvent(ctx->prof[i].ev);
    if (ctx->prof[i].start) clReleaseEvent(ctx->prof[i].start);
  }
  if (ctx->prof_mark) clReleaseEvent(ctx->prof_mark);
  ctx->prof_mark = NULL;
  free(ctx->prof);
  ctx->prof = NULL;
  ctx->n_prof = ctx->cap_prof = 0;
  ctx->prof_oom = 0;
}

/* Whether the driver's events carry timestamps: a 16 MiB fill takes more
 * than 100 ns between start and end (160 TB/s would be faster than any
 * device).  Rusticl 22.3 answers 0, 1, 2 and 3 for queued, submit, start
 * and end (and a timer resolution of 0). */
static int events_have_time(clf_context *ctx) {
  size_t BYTES = (size_t)1 << 24;
  if (ctx->caps.max_alloc && ctx->caps.max_alloc < BYTES) BYTES = (size_t)ctx->caps.max_alloc / 4 * 4;
  cl_int err;
  cl_mem m = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, BYTES, NULL, &err);
  if (!m) return 0;
  cl_event ev = NULL;
  cl_ulong t0 = 0, t1 = 0;
  const float zero = 0;
  err = clEnqueueFillBuffer(ctx->queue, m, &zero, sizeof zero, 0, BYTES, 0, NULL, &ev);
  if (err == CL_SUCCESS) err = clWaitForEvents(1, &ev);
  if (err == CL_SUCCESS) err = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
  if (err == CL_SUCCESS) err = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
  if (ev) clReleaseEvent(ev);
  clReleaseMemObject(m);
  return err == CL_SUCCESS && t1 > t0 + 100;
}

clf_status clf_profile_start(clf_context *ctx) {
  clf_status st = clf__check_ctx(ctx, "clf_profile_start");
  if (st != CLF_OK) return st;
  if (!ctx->profiling)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_profile_start: the context was created without profiling "
                     "(set clf_context_options.profiling)");
  clf__prof_clear(ctx);
  clf__prof_paths_clear(ctx);
  ctx->prof_clock = ctx->env.profile_clock == 1 ? CLOCK_WALL : events_have_time(ctx) ? CLOCK_EVENTS : CLOCK_WALL;
  ctx->recording = 1;
  return CLF_OK;
}

const char *clf_profile_clock(const clf_context *ctx) {
  if (!ctx || !ctx->prof_clock) return NULL;
  return ctx->prof_clock == CLOCK_WALL ? "wall" : "events";
}

static int by_time(const void *a, const void *b) {
  const double x = ((const clf_profile_entry *)a)->ms, y = ((const clf_profile_entry *)b)->ms;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* The record's time in ms: from its marker's end (or its own start) to its
 * end, or as the wall clock measured it. */
static cl_int rec_ms(const clf__prof_rec *r, int clock, double *ms) {
  if (clock == CLOCK_WALL) {
    *ms = r->wall_ms;
    return CL_SUCCESS;
  }
  cl_ulong t0 = 0, t1 = 0;
  cl_int err = clGetEventProfilingInfo(r->ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
  if (err == CL_SUCCESS)
    err = r->start ? clGetEventProfilingInfo(r->start, CL_PROFILING_COMMAND_END, sizeof t0, &t0, NULL)
                   : clGetEventProfilingInfo(r->ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
  *ms = err == CL_SUCCESS && t1 > t0 ? (double)(t1 - t0) / 1e6 : 0.0;
  return err;
}

/* Sums the records by op into out (capacity cap); the number of ops. */
static clf_status prof_sum(clf_context *ctx, clf_profile_entry *out, size_t cap, size_t *n_ops) {
  clf_profile_entry *all = calloc(ctx->n_prof ? ctx->n_prof : 1, sizeof *all);
  if (!all) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "clf_profile_stop: out of host memory");
  size_t n = 0;
  for (size_t i = 0; i < ctx->n_prof; i++) {
    double ms;
    cl_int err = rec_ms(&ctx->prof[i], ctx->prof_clock, &ms);
    if (err != CL_SUCCESS) {
      free(all);
      return clf__fail_cl(ctx, err, "clGetEventProfilingInfo", ctx->prof[i].op);
    }
    const long path = ctx->prof[i].path;
    if (path >= 0 && (size_t)path < ctx->n_paths) ctx->path_ms[path] += ms;
    size_t j = 0;
    while (j < n && strcmp(all[j].op, ctx->prof[i].op) != 0) j++;
    if (j == n) all[n++].op = ctx->prof[i].op;
    all[j].count++;
    all[j].ms += ms;
  }
  qsort(all, n, sizeof *all, by_time);
  if (out) memcpy(out, all, (n < cap ? n : cap) * sizeof *all);
  free(all);
  *n_ops = n;
  return CLF_OK;
}

clf_status clf_profile_stop(clf_context *ctx, clf_profile_entry *out, size_t capacity, size_t *n_ops,
                            unsigned long *commands) {
  static const char op[] = "clf_profile_stop";
  clf_status st = clf__check_ctx(ctx, op);
  if (st != CLF_OK) return st;
  if (!ctx->recording) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: not recording (call clf_profile_start)", op);
  if (!n_ops) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: n_ops is NULL", op);
  if (capacity && !out) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: out is NULL with capacity %zu", op, capacity);
  ctx->recording = 0;
  cl_int err = clFinish(ctx->queue);
  if (err != CL_SUCCESS) st = clf__fail_cl(ctx, err, "clFinish", op);
  else if (ctx->prof_oom) st = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "%s: records were lost for want of host memory", op);
  else st = prof_sum(ctx, out, capacity, n_ops);
  if (st == CLF_OK && commands) *commands = (unsigned long)ctx->n_prof;
  clf__prof_clear(ctx);
  return st;
}
