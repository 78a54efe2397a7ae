/* probe_measure.c - the measurements of `clformer probe` (cmd_probe.c):
 * kernel build time (cold and from clformer's binary cache), memory
 * bandwidth, launch latency, SGEMM and attention throughput, and ops beside
 * their baselines as ratios (fused attention vs the GEMM path, layer norm vs
 * a copy); each the median of event-profiled runs after a warm-up, or, where
 * the driver's events carry no timestamps (Mesa's rusticl), of runs timed by
 * the host's clock around a finished queue, the clock named in the output. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"

#define MAX_RUNS 64
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Where a section writes: stdout text when human, `obj` when JSON. */
typedef struct out {
  int human;
  cJSON *obj;
} out;

typedef struct stats {
  double median, min, max;
  int runs;
} stats;

static stats summarize(double *t, int n) {
  clf_cli_sort_times(t, (size_t)n);
  stats s = {n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2, t[0], t[n - 1], n};
  return s;
}

static void add_stats(cJSON *parent, const char *key, stats s, const char *unit) {
  cJSON *o = cJSON_AddObjectToObject(parent, key);
  cJSON_AddNumberToObject(o, "median", s.median);
  cJSON_AddNumberToObject(o, "min", s.min);
  cJSON_AddNumberToObject(o, "max", s.max);
  cJSON_AddNumberToObject(o, "runs", s.runs);
  cJSON_AddStringToObject(o, "unit", unit);
}

/* One human row of the Measured section. */
static void print_row(const out *o, const char *label, double value, const char *unit, stats s, const char *s_unit) {
  if (!o->human) return;
  printf("    %-54s %10.3f %-8s (median %.4g %s, min %.4g, max %.4g, n=%d)\n", label, value, unit, s.median,
         s_unit, s.min, s.max, s.runs);
  clf_cli_status_flush_stdout(); /* slow devices: each row as it comes */
}

/* A measurement that could not be made: shown in its row, kept in JSON. */
static void print_error(const out *o, cJSON *json, const char *label, const char *msg) {
  if (o->human) {
    printf("    %-54s error: %s\n", label, msg);
    clf_cli_status_flush_stdout();
  }
  if (json) cJSON_AddStringToObject(json, "error", msg);
}

/* A timed op's row: GFLOP/s from `flops` over the median milliseconds, or
 * the error that stopped it. */
static void throughput_row(const out *o, cJSON *json, const char *label, const char *err, double flops,
                           const stats *s) {
  if (err) {
    print_error(o, json, label, err);
    return;
  }
  double gflops = s->median > 0 ? flops / (s->median * 1e6) : 0;
  print_row(o, label, gflops, "GFLOP/s", *s, "ms");
  if (json) {
    add_stats(json, "ms", *s, "ms");
    cJSON_AddNumberToObject(json, "gflops", gflops);
  }
}

static char errbuf[1024];

/* The clock of this probe: 0 the events' timestamps, 1 the host's (set by
 * clf_probe_measured). */
static int wall_clock;

const char *clf_probe_error(clf_context *ctx, clf_status st) {
  snprintf(errbuf, sizeof(errbuf), "%s: %s", clf_status_name(st), clf_last_error(ctx));
  for (char *p = errbuf; *p; p++)
    if (*p == '\n') *p = ' ';
  return errbuf;
}

/* ---- timing: event profiling around one op call ---- */

typedef clf_status (*op_fn)(clf_context *ctx, void *arg, cl_event *event);

static cl_int event_ns(cl_event e, cl_profiling_info what, cl_ulong *ns) {
  return clGetEventProfilingInfo(e, what, sizeof(*ns), ns, NULL);
}

/* Device milliseconds of `runs` calls of fn, after one warm-up call.  Each
 * call is enqueued behind a marker held by a user event, which is released
 * once the whole call is queued: the time from the marker's end to the end
 * of the call's last command is device time only (every command of a
 * multi-kernel op, not the host's enqueueing).  Ops never wait on the queue,
 * so the held queue cannot deadlock. */
static clf_status time_op(clf_context *ctx, op_fn fn, void *arg, int runs, stats *out_stats) {
  cl_event e = NULL;
  clf_status st = fn(ctx, arg, &e);
  if (e) clReleaseEvent(e);
  if (st == CLF_OK) st = clf_finish(ctx);
  if (st != CLF_OK) return st;
  double t[MAX_RUNS];
  for (int r = 0; r < runs && wall_clock; r++) {
    /* The queue is empty: from the first enqueue to the end of the last
     * command, host enqueueing included. */
    double t0 = clf_cli_now_ms();
    st = fn(ctx, arg, NULL);
    if (st == CLF_OK) st = clf_finish(ctx);
    if (st != CLF_OK) return st;
    t[r] = clf_cli_now_ms() - t0;
  }
  for (int r = 0; r < runs && !wall_clock; r++) {
    cl_int err;
    cl_event gate = clCreateUserEvent(clf_context_cl(ctx), &err), start = NULL, end = NULL;
    if (!gate) {
      snprintf(errbuf, sizeof(errbuf), "clCreateUserEvent: %s (%d)", clf_cl_error_name(err), err);
      return CLF_E_OPENCL;
    }
    err = clEnqueueMarkerWithWaitList(clf_context_queue(ctx), 1, &gate, &start);
    if (err != CL_SUCCESS)
      snprintf(errbuf, sizeof(errbuf), "clEnqueueMarkerWithWaitList: %s (%d)", clf_cl_error_name(err), err);
    st = err == CL_SUCCESS ? fn(ctx, arg, &end) : CLF_E_OPENCL;
    clSetUserEventStatus(gate, CL_COMPLETE);
    clReleaseEvent(gate);
    clf_status fin = clf_finish(ctx);
    cl_ulong t0 = 0, t1 = 0;
    if (err == CL_SUCCESS && st == CLF_OK && fin == CLF_OK) {
      err = end ? event_ns(start, CL_PROFILING_COMMAND_END, &t0) : CL_INVALID_EVENT;
      if (err == CL_SUCCESS) err = event_ns(end, CL_PROFILING_COMMAND_END, &t1);
    }
    if (start) clReleaseEvent(start);
    if (end) clReleaseEvent(end);
    if (st != CLF_OK) return st;
    if (fin != CLF_OK) return fin;
    if (err != CL_SUCCESS) {
      snprintf(errbuf, sizeof(errbuf), "event profiling: %s (%d)", clf_cl_error_name(err), err);
      return CLF_E_OPENCL;
    }
    t[r] = t1 > t0 ? (t1 - t0) / 1e6 : 0;
  }
  *out_stats = summarize(t, runs);
  return CLF_OK;
}

/* Runs time_op and turns a failure into a message (in errbuf). */
static const char *timed(clf_context *ctx, op_fn fn, void *arg, int runs, stats *s) {
  errbuf[0] = '\0';
  clf_status st = time_op(ctx, fn, arg, runs, s);
  if (st == CLF_OK) return NULL;
  if (st == CLF_E_OPENCL && errbuf[0]) return errbuf;
  return clf_probe_error(ctx, st);
}

/* ---- kernel build time: cold, and from clformer's binary cache ---- */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb; (void)flag; (void)ftw;
  return remove(path);
}

/* A context on `selector` over cache directory `dir`, storing and loading
 * program binaries or not (CLFORMER_CACHE_BINARIES is read at creation). */
static clf_context *cache_context(const char *selector, const char *dir, int binaries) {
  setenv("CLFORMER_CACHE_BINARIES", binaries ? "1" : "0", 1);
  clf_context_options co;
  clf_context_options_init(&co);
  co.device = selector;
  co.cache_dir = dir;
  clf_context *ctx = NULL;
  clf_context_create(&co, &ctx);
  return ctx;
}

/* Each run builds the attention family with an option no cache has seen
 * (a random -DCLF_PROBE_NONCE, so neither clformer's cache nor the driver's
 * can serve it) in a context that stores no binaries: the cold time; a
 * second context stores its binary in a temporary cache directory, and a
 * fresh third loads it from there: the cached time. */
static void measure_build(const char *selector, int runs, const out *o, cJSON *measured) {
  static const char *family = "attention";
  cJSON *j = o->obj ? cJSON_AddObjectToObject(measured, "kernel_build") : NULL;
  if (j) cJSON_AddStringToObject(j, "family", family);
  char dir[512], label[96];
  snprintf(dir, sizeof(dir), "%s/clformer-probe-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  snprintf(label, sizeof(label), "kernel build (%s), cold", family);
  if (!mkdtemp(dir)) {
    print_error(o, j, label, "cannot create a temporary cache directory");
    return;
  }
  const char *saved = getenv("CLFORMER_CACHE_BINARIES");
  char *saved_copy = saved ? strdup(saved) : NULL;
  clf_context *cold = cache_context(selector, dir, 0), *writer = cache_context(selector, dir, 1);
  double tc[MAX_RUNS], tw[MAX_RUNS];
  const char *err = !cold || !writer ? clf_last_error(NULL) : NULL;
  unsigned nonce = (unsigned)time(NULL) ^ ((unsigned)getpid() << 16) ^ (unsigned)(clf_cli_now_ms() * 1e3);
  for (int r = 0; r < runs && !err; r++) {
    char opt[64];
    snprintf(opt, sizeof(opt), "-DCLF_PROBE_NONCE=%u", nonce + (unsigned)r * 7919u);
    double t0 = clf_cli_now_ms();
    clf_status st = clf_context_prepare(cold, family, opt);
    tc[r] = clf_cli_now_ms() - t0;
    if (st != CLF_OK) { err = clf_probe_error(cold, st); break; }
    st = clf_context_prepare(writer, family, opt);
    if (st != CLF_OK) { err = clf_probe_error(writer, st); break; }
    clf_context *reader = cache_context(selector, dir, 1);
    if (!reader) { err = clf_last_error(NULL); break; }
    t0 = clf_cli_now_ms();
    st = clf_context_prepare(reader, family, opt);
    tw[r] = clf_cli_now_ms() - t0;
    clf_cache_stats cs;
    clf_context_cache_stats(reader, &cs);
    if (st != CLF_OK) err = clf_probe_error(reader, st);
    else if (cs.programs_from_disk != 1) err = "the binary was not loaded from the disk cache";
    clf_context_destroy(reader);
  }
  if (saved_copy) setenv("CLFORMER_CACHE_BINARIES", saved_copy, 1);
  else unsetenv("CLFORMER_CACHE_BINARIES");
  free(saved_copy);
  if (err) {
    print_error(o, j, label, err);
  } else {
    stats c = summarize(tc, runs), w = summarize(tw, runs);
    print_row(o, label, c.median, "ms", c, "ms");
    print_row(o, "kernel build, from clformer's binary cache", w.median, "ms", w, "ms");
    if (j) {
      add_stats(j, "cold_ms", c, "ms");
      add_stats(j, "cached_ms", w, "ms");
    }
  }
  clf_context_destroy(cold);
  clf_context_destroy(writer);
  nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* ---- memory bandwidth and launch latency ---- */

typedef struct copy_arg {
  clf_tensor *src, *dst;
} copy_arg;

static clf_status run_copy(clf_context *ctx, void *p, cl_event *e) {
  copy_arg *a = p;
  return clf_tensor_copy(ctx, a->src, a->dst, e);
}

/* A device-to-device copy of up to 64 MiB (a quarter of the largest
 * allocation at most): read + write bytes over device time. */
static double measure_bandwidth(clf_context *ctx, int runs, const out *o, cJSON *measured) {
  cl_ulong max_alloc = 0;
  clGetDeviceInfo(clf_context_device(ctx)->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof(max_alloc), &max_alloc,
                  NULL);
  size_t bytes = (size_t)64 << 20;
  if (max_alloc / 4 < bytes) bytes = (size_t)(max_alloc / 4);
  size_t shape[1] = {bytes / sizeof(float)};
  char label[96];
  snprintf(label, sizeof(label), "global memory bandwidth (copy %.3g MiB)", bytes / 1048576.0);
  cJSON *j = o->obj ? cJSON_AddObjectToObject(measured, "bandwidth") : NULL;
  copy_arg a = {0};
  stats s;
  const char *err = NULL;
  clf_status st = clf_tensor_create(ctx, CLF_F32, 1, shape, &a.src);
  if (st == CLF_OK) st = clf_tensor_create(ctx, CLF_F32, 1, shape, &a.dst);
  if (st == CLF_OK) st = clf_tensor_fill(ctx, a.src, 1.0, NULL);
  if (st != CLF_OK) err = clf_probe_error(ctx, st);
  else err = timed(ctx, run_copy, &a, runs, &s);
  double gbs = 0;
  if (err) {
    print_error(o, j, label, err);
  } else {
    gbs = s.median > 0 ? 2.0 * bytes / (s.median * 1e6) : 0;
    print_row(o, label, gbs, "GB/s", s, "ms");
    if (j) {
      cJSON_AddNumberToObject(j, "bytes", (double)bytes);
      add_stats(j, "ms", s, "ms");
      cJSON_AddNumberToObject(j, "gb_per_s", gbs);
    }
  }
  clf_tensor_destroy(a.src);
  clf_tensor_destroy(a.dst);
  return gbs;
}

/* A one-element fill: the host's enqueue-and-wait round trip (wall clock)
 * and the device's queued -> start delay (profiling). */
static void measure_latency(clf_context *ctx, int runs, const out *o, cJSON *measured) {
  cJSON *j = o->obj ? cJSON_AddObjectToObject(measured, "launch_latency") : NULL;
  clf_tensor *t = NULL;
  size_t one[1] = {1};
  double host[MAX_RUNS], dev[MAX_RUNS];
  const char *err = NULL;
  clf_status st = clf_tensor_create(ctx, CLF_F32, 1, one, &t);
  for (int r = -1; r < runs && st == CLF_OK; r++) { /* r = -1: warm-up */
    cl_event e = NULL;
    double t0 = clf_cli_now_ms();
    st = clf_tensor_fill(ctx, t, 0.0, &e);
    if (st == CLF_OK) st = clf_finish(ctx);
    double t1 = clf_cli_now_ms();
    cl_ulong q = 0, s = 0;
    cl_int cerr = CL_SUCCESS;
    if (st == CLF_OK) {
      cerr = event_ns(e, CL_PROFILING_COMMAND_QUEUED, &q);
      if (cerr == CL_SUCCESS) cerr = event_ns(e, CL_PROFILING_COMMAND_START, &s);
    }
    if (e) clReleaseEvent(e);
    if (cerr != CL_SUCCESS) {
      snprintf(errbuf, sizeof(errbuf), "event profiling: %s (%d)", clf_cl_error_name(cerr), cerr);
      err = errbuf;
      break;
    }
    if (r >= 0) {
      host[r] = (t1 - t0) * 1e3;
      dev[r] = s > q ? (s - q) / 1e3 : 0;
    }
  }
  if (st != CLF_OK) err = clf_probe_error(ctx, st);
  if (err) {
    print_error(o, j, "launch latency", err);
  } else {
    stats h = summarize(host, runs), d = summarize(dev, runs);
    print_row(o, "launch latency: host enqueue + wait", h.median, "us", h, "us");
    if (wall_clock && o->human)
      printf("    %-54s not measured: the driver's events carry no timestamps\n", "launch latency: device queued -> start");
    else print_row(o, "launch latency: device queued -> start", d.median, "us", d, "us");
    if (j) {
      add_stats(j, "host_round_trip_us", h, "us");
      add_stats(j, "queued_to_start_us", d, "us");
    }
  }
  clf_tensor_destroy(t);
}

/* ---- SGEMM and attention throughput ---- */

static float frand(unsigned *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)((*s >> 8) / 16777216.0) * 2.0f - 1.0f;
}

/* An f32 tensor with uniform values in [-1, 1) from a fixed seed. */
static clf_status random_tensor(clf_context *ctx, int ndim, const size_t *shape, clf_tensor **t) {
  clf_status st = clf_tensor_create(ctx, CLF_F32, ndim, shape, t);
  if (st != CLF_OK) return st;
  size_t n = clf_tensor_numel(*t);
  float *h = malloc(n * sizeof(float) + 1);
  if (!h) return CLF_E_OUT_OF_MEMORY;
  unsigned seed = 7;
  for (size_t i = 0; i < n; i++) h[i] = frand(&seed);
  st = clf_tensor_upload(ctx, *t, h, n * sizeof(float));
  free(h);
  return st;
}

typedef struct gemm_arg {
  clf_tensor *a, *b, *c;
} gemm_arg;

static clf_status run_gemm(clf_context *ctx, void *p, cl_event *e) {
  gemm_arg *g = p;
  return clf_gemm(ctx, 0, 0, 1.0f, g->a, g->b, 0.0f, g->c, e);
}

static void measure_sgemm(clf_context *ctx, int runs, int quick, const out *o, cJSON *measured) {
  static const struct { const char *name; size_t m, n, k; int quick; } shapes[] = {
      {"attention projection, 128 tokens", 128, 768, 768, 1},
      {"FFN up, 128 tokens", 128, 3072, 768, 1},
      {"FFN down, 128 tokens", 128, 768, 3072, 0},
      {"FFN up, decode (1 token)", 1, 3072, 768, 1},
      {"square 1024", 1024, 1024, 1024, 0},
  };
  cJSON *arr = o->obj ? cJSON_AddArrayToObject(measured, "sgemm") : NULL;
  for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
    if (quick && !shapes[i].quick) continue;
    size_t m = shapes[i].m, n = shapes[i].n, k = shapes[i].k;
    char label[96];
    snprintf(label, sizeof(label), "SGEMM %zux%zux%zu %s", m, n, k, shapes[i].name);
    cJSON *j = NULL;
    if (arr) {
      j = cJSON_CreateObject();
      cJSON_AddItemToArray(arr, j);
      cJSON_AddStringToObject(j, "name", shapes[i].name);
      cJSON_AddNumberToObject(j, "m", (double)m);
      cJSON_AddNumberToObject(j, "n", (double)n);
      cJSON_AddNumberToObject(j, "k", (double)k);
    }
    gemm_arg g = {0};
    stats s;
    const char *err = NULL;
    clf_status st = random_tensor(ctx, 2, (size_t[]){m, k}, &g.a);
    if (st == CLF_OK) st = random_tensor(ctx, 2, (size_t[]){k, n}, &g.b);
    if (st == CLF_OK) st = clf_tensor_create(ctx, CLF_F32, 2, (size_t[]){m, n}, &g.c);
    err = st != CLF_OK ? clf_probe_error(ctx, st) : timed(ctx, run_gemm, &g, runs, &s);
    throughput_row(o, j, label, err, 2.0 * m * n * k, &s);
    clf_tensor_destroy(g.a);
    clf_tensor_destroy(g.b);
    clf_tensor_destroy(g.c);
  }
}

typedef struct attn_arg {
  clf_tensor *q, *k, *v, *o;
  int causal;
  clf_attention_impl impl;
} attn_arg;

static clf_status run_attention(clf_context *ctx, void *p, cl_event *e) {
  attn_arg *a = p;
  clf_attention_mask mask = {NULL, a->causal, NULL};
  return clf_attention(ctx, a->q, a->k, a->v, 0, &mask, 0.125f, a->impl, a->o, e);
}

/* q [b, h, lq, dh], k and v [b, h, lk, dh] random, o the same shape as q. */
static clf_status make_attention(clf_context *ctx, size_t b, size_t h, size_t lq, size_t lk, size_t dh,
                                 attn_arg *a) {
  clf_status st = random_tensor(ctx, 4, (size_t[]){b, h, lq, dh}, &a->q);
  if (st == CLF_OK) st = random_tensor(ctx, 4, (size_t[]){b, h, lk, dh}, &a->k);
  if (st == CLF_OK) st = random_tensor(ctx, 4, (size_t[]){b, h, lk, dh}, &a->v);
  if (st == CLF_OK) st = clf_tensor_create(ctx, CLF_F32, 4, (size_t[]){b, h, lq, dh}, &a->o);
  return st;
}

static void free_attention(attn_arg *a) {
  clf_tensor_destroy(a->q);
  clf_tensor_destroy(a->k);
  clf_tensor_destroy(a->v);
  clf_tensor_destroy(a->o);
}

static void measure_attention(clf_context *ctx, int runs, const out *o, cJSON *measured) {
  static const struct { const char *name; size_t b, h, lq, lk, dh; int causal; } shapes[] = {
      {"BERT-base L=128", 1, 12, 128, 128, 64, 0},
      {"GPT-2 decode Lq=1 Lk=256 causal", 1, 12, 1, 256, 64, 1},
  };
  cJSON *arr = o->obj ? cJSON_AddArrayToObject(measured, "attention") : NULL;
  for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
    size_t b = shapes[i].b, h = shapes[i].h, lq = shapes[i].lq, lk = shapes[i].lk, dh = shapes[i].dh;
    char label[96];
    snprintf(label, sizeof(label), "attention %s", shapes[i].name);
    cJSON *j = NULL;
    if (arr) {
      j = cJSON_CreateObject();
      cJSON_AddItemToArray(arr, j);
      cJSON_AddStringToObject(j, "name", shapes[i].name);
      const char *keys[] = {"B", "H", "Lq", "Lk", "Dh"};
      size_t vals[] = {b, h, lq, lk, dh};
      for (int d = 0; d < 5; d++) cJSON_AddNumberToObject(j, keys[d], (double)vals[d]);
      cJSON_AddBoolToObject(j, "causal", shapes[i].causal);
    }
    attn_arg a = {.causal = shapes[i].causal, .impl = CLF_ATTN_AUTO};
    stats s;
    clf_status st = make_attention(ctx, b, h, lq, lk, dh, &a);
    const char *err = st != CLF_OK ? clf_probe_error(ctx, st) : timed(ctx, run_attention, &a, runs, &s);
    /* q k^T and p v: 2 flops per multiply-add each (causal decode sees every key). */
    throughput_row(o, j, label, err, 4.0 * b * h * lq * lk * dh, &s);
    free_attention(&a);
  }
}

/* ---- ops beside their baselines, as ratios ---- */

typedef struct ln_arg {
  clf_tensor *x, *g, *b, *y;
} ln_arg;

static clf_status run_layer_norm(clf_context *ctx, void *p, cl_event *e) {
  ln_arg *a = p;
  return clf_layer_norm(ctx, a->x, NULL, a->g, a->b, 1e-5f, NULL, a->y, e);
}

/* One row "NUM / DEN": the ratio of the medians, both timings kept.  keys:
 * the JSON names of NUM, DEN and the ratio, then the words for NUM and DEN. */
static void ratio_row(const out *o, cJSON *j, const char *label, const char *err, const char *const keys[5],
                      const stats *num, const stats *den) {
  if (err) {
    print_error(o, j, label, err);
    return;
  }
  double ratio = den->median > 0 ? num->median / den->median : 0;
  if (o->human) {
    printf("    %-54s %10.2f x        (%s %.4g ms, %s %.4g ms, median of %d)\n", label, ratio, keys[3],
           num->median, keys[4], den->median, num->runs);
    clf_cli_status_flush_stdout();
  }
  if (j) {
    add_stats(j, keys[0], *num, "ms");
    add_stats(j, keys[1], *den, "ms");
    cJSON_AddNumberToObject(j, keys[2], ratio);
  }
}

/* The fused attention kernel against the CLBlast GEMM path (QK^T, masked
 * softmax, PV) on the shapes of common models. */
static void ratio_attention(clf_context *ctx, int runs, int quick, const out *o, cJSON *ratios) {
  static const struct { const char *name; size_t b, h, lq, lk, dh; int causal, quick; } shapes[] = {
      {"BERT-base L=128", 1, 12, 128, 128, 64, 0, 1},
      {"ViT-B/16 L=197", 1, 12, 197, 197, 64, 0, 0},
      {"GPT-2 prefill L=256 causal", 1, 12, 256, 256, 64, 1, 0},
      {"GPT-2 decode Lq=1 Lk=256", 1, 12, 1, 256, 64, 1, 1},
      {"Swin-T windows 64x3 L=49 Dh=32", 64, 3, 49, 49, 32, 0, 0},
  };
  static const char *const keys[5] = {"gemm_ms", "fused_ms", "gemm_over_fused", "GEMM", "fused"};
  cJSON *arr = o->obj ? cJSON_AddArrayToObject(ratios, "attention") : NULL;
  for (size_t i = 0; i < COUNT(shapes); i++) {
    if (quick && !shapes[i].quick) continue;
    char label[96];
    snprintf(label, sizeof(label), "attention GEMM path / fused, %s", shapes[i].name);
    cJSON *j = arr ? cJSON_CreateObject() : NULL;
    if (j) {
      cJSON_AddItemToArray(arr, j);
      cJSON_AddStringToObject(j, "name", shapes[i].name);
      const char *dims[] = {"B", "H", "Lq", "Lk", "Dh"};
      size_t vals[] = {shapes[i].b, shapes[i].h, shapes[i].lq, shapes[i].lk, shapes[i].dh};
      for (int d = 0; d < 5; d++) cJSON_AddNumberToObject(j, dims[d], (double)vals[d]);
      cJSON_AddBoolToObject(j, "causal", shapes[i].causal);
    }
    attn_arg a = {.causal = shapes[i].causal, .impl = CLF_ATTN_FUSED};
    stats fused, gemm;
    clf_status st = make_attention(ctx, shapes[i].b, shapes[i].h, shapes[i].lq, shapes[i].lk, shapes[i].dh, &a);
    const char *err = st != CLF_OK ? clf_probe_error(ctx, st) : timed(ctx, run_attention, &a, runs, &fused);
    a.impl = CLF_ATTN_GEMM;
    if (!err) err = timed(ctx, run_attention, &a, runs, &gemm);
    ratio_row(o, j, label, err, keys, &gemm, &fused);
    free_attention(&a);
  }
}

/* Layer norm against a plain device copy of the same bytes: the memory bound
 * it cannot beat (it reads its input more often than a copy does). */
static void ratio_layer_norm(clf_context *ctx, int runs, int quick, const out *o, cJSON *ratios) {
  static const size_t shapes[][2] = {{128, 768}, {197 * 8, 768}, {1024, 1024}};
  static const char *const keys[5] = {"layer_norm_ms", "copy_ms", "layer_norm_over_copy", "LN", "copy"};
  cJSON *arr = o->obj ? cJSON_AddArrayToObject(ratios, "layer_norm") : NULL;
  for (size_t i = 0; i < (quick ? 1 : COUNT(shapes)); i++) {
    size_t rows = shapes[i][0], cols = shapes[i][1];
    char label[96];
    snprintf(label, sizeof(label), "layer norm / copy, [%zu, %zu]", rows, cols);
    cJSON *j = arr ? cJSON_CreateObject() : NULL;
    if (j) {
      cJSON_AddItemToArray(arr, j);
      cJSON_AddNumberToObject(j, "rows", (double)rows);
      cJSON_AddNumberToObject(j, "cols", (double)cols);
    }
    ln_arg a = {0};
    stats ln, copy;
    clf_status st = random_tensor(ctx, 2, (size_t[]){rows, cols}, &a.x);
    if (st == CLF_OK) st = random_tensor(ctx, 2, (size_t[]){rows, cols}, &a.y);
    if (st == CLF_OK) st = random_tensor(ctx, 1, (size_t[]){cols}, &a.g);
    if (st == CLF_OK) st = random_tensor(ctx, 1, (size_t[]){cols}, &a.b);
    copy_arg c = {a.x, a.y};
    const char *err = st != CLF_OK ? clf_probe_error(ctx, st) : timed(ctx, run_layer_norm, &a, runs, &ln);
    if (!err) err = timed(ctx, run_copy, &c, runs, &copy);
    ratio_row(o, j, label, err, keys, &ln, &copy);
    clf_tensor_destroy(a.x);
    clf_tensor_destroy(a.y);
    clf_tensor_destroy(a.g);
    clf_tensor_destroy(a.b);
  }
}

/* ---- one-row products by weight type: decoding's bound ---- */

/* A weight [rows, K] of the type d describes, laid out as the models lay
 * theirs out (clf_linear_weight_prepare: the 16-row interleave on a CPU):
 * random floats for f32 and f16; for the block types random bytes below
 * 0x40, so that every f16 field (a scale, a min), wherever a layout puts
 * it, is finite and under 2, and no NaN or infinity runs; the quants'
 * values do not change the work. */
static clf_status decode_weight(clf_context *ctx, const clf_dtype_desc *d, size_t rows, size_t k, clf_tensor **out) {
  clf_tensor *w = NULL;
  clf_status st;
  unsigned seed = 11;
  if (d->block == 1) {
    float *h = malloc(rows * k * sizeof(float) + 1);
    if (!h) return CLF_E_OUT_OF_MEMORY;
    for (size_t i = 0; i < rows * k; i++) h[i] = frand(&seed);
    st = clf_tensor_from_f32(ctx, d->dtype, 2, (size_t[]){rows, k}, h, &w);
    free(h);
  } else {
    const size_t bytes = rows * k / d->block * d->block_bytes;
    unsigned char *h = malloc(bytes + 1);
    if (!h) return CLF_E_OUT_OF_MEMORY;
    for (size_t i = 0; i < bytes; i++) h[i] = (unsigned char)((seed = seed * 1664525u + 1013904223u) >> 26);
    st = clf_tensor_create(ctx, d->dtype, 2, (size_t[]){rows, k}, &w);
    if (st == CLF_OK) st = clf_tensor_upload(ctx, w, h, bytes);
    free(h);
  }
  if (st == CLF_OK) st = clf_linear_weight_prepare(ctx, w, out);
  clf_tensor_destroy(w);
  return st;
}

typedef struct linear_arg {
  clf_tensor *x, *w, *y;
} linear_arg;

static clf_status run_linear(clf_context *ctx, void *p, cl_event *e) {
  linear_arg *a = p;
  return clf_linear(ctx, a->x, a->w, CLF_WEIGHT_OUT_IN, NULL, CLF_ACT_NONE, a->y, e);
}

/* One row of x through a weight of each type clf_linear reads (--quick:
 * the types --weights makes from a checkpoint, q8, q4, q4k, q6k), K = 4096
 * and as many rows as make about 64 MiB of weights (16 with --quick; at
 * most a quarter of the largest allocation), laid out as models lay
 * theirs: the weight bytes read over the median time, and that against
 * the copy above (its read + write bytes a second): 1 is a product as
 * fast as the copy's floor. */
static void measure_decode(clf_context *ctx, int runs, int quick, double copy_gbs, const out *o,
                           cJSON *measured) {
  cl_ulong max_alloc = 0;
  clGetDeviceInfo(clf_context_device(ctx)->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof(max_alloc), &max_alloc,
                  NULL);
  size_t target = (size_t)(quick ? 16 : 64) << 20;
  if (max_alloc / 4 < target) target = (size_t)(max_alloc / 4);
  const size_t K = 4096;
  cJSON *arr = o->obj ? cJSON_AddArrayToObject(measured, "decode_by_type") : NULL;
  for (size_t i = 0; i < clf_dtype_count(); i++) {
    clf_dtype_desc d;
    if (clf_dtype_at(i, &d) != CLF_OK || !d.linear_weight) continue;
    if (quick && !(d.weights_target && d.block > 1)) continue;
    const size_t row_bytes = K / d.block * d.block_bytes;
    size_t rows = target / row_bytes / 16 * 16;
    if (rows < 16) rows = 16;
    const double bytes = (double)rows * (double)row_bytes;
    char label[96];
    snprintf(label, sizeof(label), "one row x %s [%zu, %zu] (%.3g MiB)", d.name, rows, K, bytes / 1048576.0);
    cJSON *j = NULL;
    if (arr) {
      j = cJSON_CreateObject();
      cJSON_AddItemToArray(arr, j);
      cJSON_AddStringToObject(j, "type", d.name);
      cJSON_AddNumberToObject(j, "rows", (double)rows);
      cJSON_AddNumberToObject(j, "cols", (double)K);
      cJSON_AddNumberToObject(j, "weight_bytes", bytes);
    }
    linear_arg a = {0};
    stats s;
    clf_status st = decode_weight(ctx, &d, rows, K, &a.w);
    if (st == CLF_OK) st = random_tensor(ctx, 2, (size_t[]){1, K}, &a.x);
    if (st == CLF_OK) st = clf_tensor_create(ctx, CLF_F32, 2, (size_t[]){1, rows}, &a.y);
    const char *err = st != CLF_OK ? clf_probe_error(ctx, st) : timed(ctx, run_linear, &a, runs, &s);
    if (err) {
      print_error(o, j, label, err);
    } else {
      const double gbs = s.median > 0 ? bytes / (s.median * 1e6) : 0, of_copy = copy_gbs > 0 ? gbs / copy_gbs : 0;
      if (o->human) {
        printf("    %-54s %10.3f %-8s (median %.4g ms, min %.4g, max %.4g, n=%d; %.2f x the copy's)\n", label, gbs,
               "GB/s", s.median, s.min, s.max, s.runs, of_copy);
        clf_cli_status_flush_stdout();
      }
      if (j) {
        add_stats(j, "ms", s, "ms");
        cJSON_AddNumberToObject(j, "gb_per_s", gbs);
        cJSON_AddNumberToObject(j, "of_copy", of_copy);
      }
    }
    clf_tensor_destroy(a.x);
    clf_tensor_destroy(a.w);
    clf_tensor_destroy(a.y);
  }
}

/* Whether the driver's events carry timestamps: a 16 MiB fill takes more
 * than 100 ns between start and end (rusticl 22.3 answers 0, 1, 2 and 3 for
 * queued, submit, start and end). */
static int events_have_time(clf_context *ctx) {
  clf_tensor *t = NULL;
  size_t n[1] = {1 << 22};
  cl_event e = NULL;
  cl_ulong t0 = 0, t1 = 0;
  int ok = clf_tensor_create(ctx, CLF_F32, 1, n, &t) == CLF_OK && clf_tensor_fill(ctx, t, 0.0, &e) == CLF_OK &&
           clf_finish(ctx) == CLF_OK && e && event_ns(e, CL_PROFILING_COMMAND_START, &t0) == CL_SUCCESS &&
           event_ns(e, CL_PROFILING_COMMAND_END, &t1) == CL_SUCCESS && t1 > t0 + 100;
  if (e) clReleaseEvent(e);
  clf_tensor_destroy(t);
  return ok;
}

void clf_probe_measured(clf_context *ctx, const char *selector, int runs, int quick, int human, cJSON *dev) {
  out ob = {human, dev}, *o = &ob;
  const char *forced = getenv("CLFORMER_PROFILE_CLOCK");
  wall_clock = (forced && !strcmp(forced, "wall")) || !events_have_time(ctx);
  if (o->human)
    printf("  Measured (%s, after a warm-up)\n",
           wall_clock ? "clock: the host's monotonic clock around each call, the queue finished before and after; "
                        "the driver's events carry no timestamps"
                      : "clock: device time from event profiling");
  cJSON *m = dev ? cJSON_AddObjectToObject(dev, "measured") : NULL;
  if (m) cJSON_AddStringToObject(m, "clock", wall_clock ? "wall" : "events");
  /* CLF_PROBE_MEASURE_SECTIONS of them */
  clf_probe_section("kernel build time");
  measure_build(selector, quick ? 1 : 3, o, m);
  clf_probe_section("memory bandwidth");
  const double copy_gbs = measure_bandwidth(ctx, runs, o, m);
  clf_probe_section("launch latency");
  measure_latency(ctx, runs * 3, o, m);
  clf_probe_section("SGEMM throughput");
  measure_sgemm(ctx, runs, quick, o, m);
  clf_probe_section("attention throughput");
  measure_attention(ctx, runs, o, m);
  clf_probe_section("one-row products by weight type");
  measure_decode(ctx, runs, quick, copy_gbs, o, m);
  clf_probe_section("attention beside the GEMM path");
  if (o->human) printf("  Beside a baseline (ratio of median %s times)\n", wall_clock ? "wall" : "device");
  cJSON *r = m ? cJSON_AddObjectToObject(m, "ratios") : NULL;
  ratio_attention(ctx, runs, quick, o, r);
  clf_probe_section("layer norm beside a copy");
  ratio_layer_norm(ctx, runs, quick, o, r);
}
