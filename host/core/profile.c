/* profile.c - per-op device time from OpenCL profiling events: while a
 * context records (clf_profile_start .. clf_profile_stop), every kernel
 * launch, CLBlast call and buffer copy keeps its event, and stop sums them
 * by op. */
#include "core.h"

#include <stdlib.h>
#include <string.h>

cl_event *clf__prof_event(clf_context *ctx, cl_event *event, cl_event *local) {
  return ctx->recording && !event ? local : event;
}

void clf__prof_mark(clf_context *ctx) {
  if (!ctx->recording) return;
  if (ctx->prof_mark) clReleaseEvent(ctx->prof_mark);
  ctx->prof_mark = NULL;
  if (clEnqueueMarkerWithWaitList(ctx->queue, 0, NULL, &ctx->prof_mark) != CL_SUCCESS) ctx->prof_mark = NULL;
}

void clf__prof_note(clf_context *ctx, const char *op, cl_event *event, cl_event *local) {
  if (!ctx->recording) return;
  cl_event ev = event ? *event : *local, start = ctx->prof_mark;
  ctx->prof_mark = NULL;
  if (!ev) return;
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
  ctx->prof[ctx->n_prof++] = (clf__prof_rec){op, start, ev};
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

clf_status clf_profile_start(clf_context *ctx) {
  clf_status st = clf__check_ctx(ctx, "clf_profile_start");
  if (st != CLF_OK) return st;
  if (!ctx->profiling)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_profile_start: the context was created without profiling "
                     "(set clf_context_options.profiling)");
  clf__prof_clear(ctx);
  ctx->recording = 1;
  return CLF_OK;
}

static int by_time(const void *a, const void *b) {
  const double x = ((const clf_profile_entry *)a)->ms, y = ((const clf_profile_entry *)b)->ms;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* The record's device time in ms: from its marker's end (or its own start)
 * to its end. */
static cl_int rec_ms(const clf__prof_rec *r, double *ms) {
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
    cl_int err = rec_ms(&ctx->prof[i], &ms);
    if (err != CL_SUCCESS) {
      free(all);
      return clf__fail_cl(ctx, err, "clGetEventProfilingInfo", ctx->prof[i].op);
    }
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
