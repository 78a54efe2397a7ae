/* cmd_probe.c - `clformer probe`: what each OpenCL device is (the property
 * table of probe_props.c), what it measures at (probe_measure.c: kernel
 * builds, memory bandwidth, launch latency, SGEMM and attention throughput,
 * ops beside their baselines as ratios), whether clformer's kernels pass
 * their self-validation there, and the GEMM tuning profile (--tune searches
 * one).  Human-readable by default, --json for machines. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

typedef struct probe_opts {
  const char *device;
  int json, no_measure, no_validate, quick, tune;
  const char *model;    /* the KV pool the engine gives it; --tune: its GEMM shapes, else common ones */
  clf_cli_sizes tokens; /* --tokens N[,N...]: the rows of the shapes tuned */
  double budget_s;
  int runs;             /* timed runs per measurement (not an option) */
} probe_opts;

static const clf_cli_option probe_options[] = {
    CLF_CLI_OPT_DEVICE(probe_opts),
    {"--json", NULL, CLF_OPT_FLAG, offsetof(probe_opts, json), 0, 0, 0, 0, 0, "JSON on stdout, progress on stderr"},
    {"--quick", NULL, CLF_OPT_FLAG, offsetof(probe_opts, quick), 0, 0, 0, 0, 0, "3 runs and fewer shapes"},
    {"--no-measure", NULL, CLF_OPT_FLAG, offsetof(probe_opts, no_measure), 0, 0, 0, 0, 0, "skip the measurements"},
    {"--no-validate", NULL, CLF_OPT_FLAG, offsetof(probe_opts, no_validate), 0, 0, 0, 0, 0,
     "skip the self-validation"},
    {"--tune", NULL, CLF_OPT_FLAG, offsetof(probe_opts, tune), 0, 0, 0, 0, 0, "search a GEMM tuning profile first"},
    {"--model", "MODEL", CLF_OPT_STRING, offsetof(probe_opts, model), 0, 0, 0, 0, 0,
     "a model directory or GGUF file: the KV pool the engine would get for it; with --tune, the GEMMs tuned are "
     "its", NULL, "no KV pool; --tune: BERT-base and GPT-2 sized layers"},
    {"--tokens", "N[,N...]", CLF_OPT_SIZES, offsetof(probe_opts, tokens), 1, 1000000, 0, 8, 0,
     "--tune: the token counts; default 128"},
    {"--budget", "SECONDS", CLF_OPT_DOUBLE, offsetof(probe_opts, budget_s), 0, HUGE_VAL, 0, 0, 0,
     "--tune: seconds the search may take; default 300"},
    {NULL}};

/* Where a section writes: stdout text when human, `obj` when JSON. */
typedef struct out {
  int human;
  cJSON *obj;
} out;

/* ---- self-validation and GEMM tuning ---- */

/* What building the programs cost this context so far (tools/bench-cache.sh
 * reads the "ms building" of the human line). */
static void report_programs(clf_context *ctx, const out *o, cJSON *j) {
  clf_cache_stats cs;
  clf_context_cache_stats(ctx, &cs);
  if (o->human)
    printf("    programs: %u built from source, %u from the disk cache, %.0f ms building\n", cs.programs_built,
           cs.programs_from_disk, cs.build_ms);
  if (j) {
    cJSON *p = cJSON_AddObjectToObject(j, "programs");
    cJSON_AddNumberToObject(p, "built", cs.programs_built);
    cJSON_AddNumberToObject(p, "from_disk", cs.programs_from_disk);
    cJSON_AddNumberToObject(p, "build_ms", cs.build_ms);
  }
}

/* The device features some variants need, and which variants use them:
 * those of the table whose name says so ("_sg": sub-groups; "_h": fp16)
 * and that passed.  None listed: the device lacks the feature, or the
 * context's limits turned it off (the library lists such variants only
 * where it would build them). */
static void report_features(clf_context *ctx, const out *o, const clf_variant_result *res, size_t count, cJSON *j) {
  static const struct { const char *name, *tag, *ext[2]; } feats[] = {
      {"subgroups", "_sg ", {"cl_khr_subgroups", "cl_intel_subgroups"}},
      {"fp16", "_h ", {"cl_khr_fp16", NULL}},
  };
  char ext[8192] = "";
  clGetDeviceInfo(clf_context_device(ctx)->device, CL_DEVICE_EXTENSIONS, sizeof ext - 1, ext, NULL);
  cJSON *fj = j ? cJSON_AddObjectToObject(j, "features") : NULL;
  for (size_t f = 0; f < sizeof feats / sizeof *feats; f++) {
    char used[1024] = "", failed[512] = "", has[64] = "";
    for (int e = 0; e < 2 && feats[f].ext[e]; e++)
      if (strstr(ext, feats[f].ext[e]) && !has[0]) snprintf(has, sizeof has, "%s", feats[f].ext[e]);
    cJSON *arr = NULL, *fo = fj ? cJSON_AddObjectToObject(fj, feats[f].name) : NULL;
    if (fo) arr = cJSON_AddArrayToObject(fo, "used_by");
    for (size_t i = 0; i < count; i++) {
      char nm[sizeof res->name + 2];
      snprintf(nm, sizeof nm, "%.95s ", res[i].name); /* "norm.layer_norm_sg" ends at the name's end too */
      if (!strstr(nm, feats[f].tag)) continue;
      char *list = res[i].passed ? used : failed;
      const size_t cap = res[i].passed ? sizeof used : sizeof failed, at = strlen(list);
      snprintf(list + at, cap - at, "%s%s", at ? ", " : "", res[i].name);
      if (arr && res[i].passed) cJSON_AddItemToArray(arr, cJSON_CreateString(res[i].name));
    }
    const char *state = used[0] ? "used" : failed[0] ? "not used: its variants failed" : has[0] ? "not used: turned off (limits or class)" : "not available";
    if (o->human) {
      printf("    %s: %s", feats[f].name, state);
      if (has[0]) printf(" (%s)", has);
      if (used[0]) printf(" by %s", used);
      if (failed[0]) printf("; failed: %s", failed);
      printf("\n");
    }
    if (fo) {
      cJSON_AddStringToObject(fo, "state", used[0] ? "used" : failed[0] ? "failed" : has[0] ? "off" : "not available");
      cJSON_AddStringToObject(fo, "extension", has);
    }
  }
}

/* Driver defects the library works around, each checked on the device by
 * the smallest kernel that shows it, and named when found. */
static const char sext_source[] =
    "__kernel void sext(__global const int *i, __global int *y) { y[0] = (long)i[0] < 0; }\n";

/* 1 when the driver has the defect, 0 when not, -1 when it could not be run. */
static int sext_defect(clf_context *ctx) {
  cl_context cl = clf_context_cl(ctx);
  cl_device_id dev = clf_context_device(ctx)->device;
  const char *src = sext_source;
  cl_int err, in = -1, out = -7;
  int rc = -1;
  cl_program p = clCreateProgramWithSource(cl, 1, &src, NULL, &err);
  cl_kernel k = p && clBuildProgram(p, 1, &dev, "-cl-std=CL1.2", NULL, NULL) == CL_SUCCESS
                    ? clCreateKernel(p, "sext", &err) : NULL;
  cl_mem bi = k ? clCreateBuffer(cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof in, &in, &err) : NULL;
  cl_mem by = bi ? clCreateBuffer(cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof out, &out, &err) : NULL;
  const size_t one = 1;
  if (by && clSetKernelArg(k, 0, sizeof bi, &bi) == CL_SUCCESS && clSetKernelArg(k, 1, sizeof by, &by) == CL_SUCCESS &&
      clEnqueueNDRangeKernel(clf_context_queue(ctx), k, 1, NULL, &one, &one, 0, NULL, NULL) == CL_SUCCESS &&
      clEnqueueReadBuffer(clf_context_queue(ctx), by, CL_TRUE, 0, sizeof out, &out, 0, NULL, NULL) == CL_SUCCESS)
    rc = out == 1 ? 0 : 1;
  if (by) clReleaseMemObject(by);
  if (bi) clReleaseMemObject(bi);
  if (k) clReleaseKernel(k);
  if (p) clReleaseProgram(p);
  return rc;
}

static void report_driver_defects(clf_context *ctx, const out *o, cJSON *j) {
  const int sext = sext_defect(ctx);
  const char *what = sext == 1   ? "found: (long)i < 0 is false for an int i = -1 (the sign extension compared "
                                   "unsigned; Mesa 22.3 rusticl on LLVM 15); worked around: ids are range-tested "
                                   "in their own type (embed.cl)"
                     : sext == 0 ? "none found (checked: int-to-long sign extension in comparisons)"
                                 : "could not be checked (the check kernel did not run)";
  if (o->human) printf("    driver defects: %s\n", what);
  if (j) {
    cJSON *d = cJSON_AddObjectToObject(j, "driver_defects");
    cJSON_AddStringToObject(d, "sign_extension_compare", sext == 1 ? "found" : sext == 0 ? "absent" : "unchecked");
  }
}

/* Returns the number of variants that failed. */
static int section_validation(clf_context *ctx, const out *o, cJSON *dev) {
  enum { CAP = 256 };
  static clf_variant_result res[CAP];
  size_t count = 0;
  if (o->human) printf("  Self-validation\n");
  cJSON *j = o->obj ? cJSON_AddObjectToObject(dev, "validation") : NULL;
  clf_status st = clf_validate(ctx, res, CAP, &count);
  if (st != CLF_OK) {
    const char *msg = clf_probe_error(ctx, st);
    if (o->human) printf("    could not run: %s\n", msg);
    if (j) cJSON_AddStringToObject(j, "error", msg);
    return 0;
  }
  if (count > CAP) count = CAP;
  int failed = 0;
  if (o->human)
    printf("    %-48s %-6s %10s %10s %9s  %s\n", "variant", "result", "max error", "tolerance", "ms", "fallback / message");
  cJSON *arr = j ? cJSON_AddArrayToObject(j, "variants") : NULL;
  for (size_t i = 0; i < count; i++) {
    const clf_variant_result *r = &res[i];
    failed += !r->passed;
    if (o->human) {
      printf("    %-48s %-6s %10.2e %10.2e %9.1f", r->name, r->passed ? "pass" : "FAIL", r->max_error, r->tolerance,
             r->ms);
      if (!r->passed) printf("  -> %s: %s", r->fallback[0] ? r->fallback : "(no fallback)", r->message);
      printf("\n");
    }
    if (arr) {
      cJSON *v = cJSON_CreateObject();
      cJSON_AddItemToArray(arr, v);
      cJSON_AddStringToObject(v, "name", r->name);
      cJSON_AddBoolToObject(v, "passed", r->passed);
      cJSON_AddNumberToObject(v, "max_error", r->max_error);
      cJSON_AddNumberToObject(v, "tolerance", r->tolerance);
      cJSON_AddNumberToObject(v, "ms", r->ms);
      cJSON_AddStringToObject(v, "fallback", r->fallback);
      cJSON_AddStringToObject(v, "message", r->message);
    }
  }
  if (o->human) printf("    %zu variants, %d failed\n", count, failed);
  if (j) cJSON_AddNumberToObject(j, "failed", failed);
  report_features(ctx, o, res, count, j);
  report_driver_defects(ctx, o, j);
  report_programs(ctx, o, j);
  return failed;
}

static void tune_progress(void *user, const char *line) {
  (void)user;
  clf_cli_status_note("clformer probe: tune: %s", line);
}

/* The sections of the device being probed, for the status line. */
static struct {
  int n, total;
} sections;

void clf_probe_section(const char *what) {
  /* What the last section printed goes out below its status line, which
   * then names the next (stdout is held while one shows: probe_main). */
  clf_cli_status_flush_stdout();
  clf_cli_status_begin("probe", what, ++sections.n, sections.total);
}

/* The GEMMs to tune: those of --model at each --tokens count, else one
 * layer each of the reference checkpoints (bert-base-uncased, GPT-2), as the
 * library's family rows give them.  Returns an error message, or NULL. */
static const char *tune_shapes(const probe_opts *po, clf_gemm_shape *use, size_t cap, size_t *n) {
  *n = 0;
  for (int t = 0; t < po->tokens.n; t++) {
    size_t got = 0;
    clf_status st = po->model ? clf_model_gemm_shapes(po->model, po->tokens.v[t], use + *n, cap - *n, &got)
                              : clf_reference_gemm_shapes(po->tokens.v[t], use + *n, cap - *n, &got);
    if (st != CLF_OK) return clf_probe_error(NULL, st);
    *n += got < cap - *n ? got : cap - *n;
  }
  return NULL;
}

static void print_tune_result(const clf_gemm_shape *use, size_t n, const clf_tune_result *per,
                              const clf_tune_report *rep, double gain) {
  printf("    %-8s %-8s %-8s %-5s %-5s %-6s %12s %12s %9s %13s\n", "m", "n", "k", "ta", "tb", "count", "default ms",
         "tuned ms", "GFLOP/s", "of best seen");
  for (size_t i = 0; i < n; i++) {
    const double flop = 2.0 * use[i].m * use[i].n * use[i].k;
    printf("    %-8zu %-8zu %-8zu %-5d %-5d %-6u %12.4f %12.4f %9.1f %12.0f%%\n", use[i].m, use[i].n, use[i].k,
           use[i].trans_a, use[i].trans_b, use[i].count ? use[i].count : 1, per[i].default_ms, per[i].tuned_ms,
           per[i].tuned_ms > 0 ? flop / per[i].tuned_ms * 1e-6 : 0.0,
           per[i].tuned_ms > 0 ? 100 * per[i].best_ms / per[i].tuned_ms : 0.0);
  }
  printf("    search: %u sets timed, %u rejected, %.1f s; forward pass GEMMs %.3f ms -> %.3f ms (%.2fx)\n", rep->tried,
         rep->rejected, rep->seconds, rep->default_ms, rep->tuned_ms, gain);
  static const char *const types[] = {"f32", "f16", "q8", "q4"};
  for (int t = 0; t < 4; t++)
    if (rep->skinny[t].default_ms > 0)
      printf("    skinny %-3s (one row x the shapes' weights): SPLITxROWS %ux%u %.3f ms -> %ux%u %.3f ms (%.2fx)\n",
             types[t], rep->skinny[t].split, rep->skinny[t].rows, rep->skinny[t].default_ms, rep->skinny[t].tuned_split,
             rep->skinny[t].tuned_rows, rep->skinny[t].tuned_ms, rep->skinny[t].default_ms / rep->skinny[t].tuned_ms);
  static const char *const kinds[] = {"f32", "f16", "q8", "q4", "f32 [in, out]"};
  for (int t = 0; t < 5; t++)
    if (rep->rows[t].measured)
      printf("    skinny path %-13s up to %u rows, CLBlast past them (was %u)\n", kinds[t], rep->rows[t].measured,
             rep->rows[t].before);
  printf("    profile written: %s\n", rep->profile[0] ? rep->profile : "none (the defaults were as fast)");
}

static void json_tune_result(cJSON *j, const clf_gemm_shape *use, size_t n, const clf_tune_result *per,
                             const clf_tune_report *rep, double gain) {
  cJSON *sarr = cJSON_AddArrayToObject(j, "shapes");
  for (size_t i = 0; i < n; i++) {
    cJSON *s = cJSON_CreateObject();
    cJSON_AddItemToArray(sarr, s);
    const char *keys[] = {"m", "n", "k", "trans_a", "trans_b", "count"};
    double vals[] = {(double)use[i].m, (double)use[i].n, (double)use[i].k, use[i].trans_a, use[i].trans_b,
                     use[i].count};
    for (int d = 0; d < 6; d++) cJSON_AddNumberToObject(s, keys[d], vals[d]);
    cJSON_AddNumberToObject(s, "default_ms", per[i].default_ms);
    cJSON_AddNumberToObject(s, "tuned_ms", per[i].tuned_ms);
    cJSON_AddNumberToObject(s, "best_seen_ms", per[i].best_ms);
  }
  const char *keys[] = {"default_ms", "tuned_ms", "gain", "tried", "rejected", "seconds"};
  double vals[] = {rep->default_ms, rep->tuned_ms, gain, rep->tried, rep->rejected, rep->seconds};
  for (int d = 0; d < 6; d++) cJSON_AddNumberToObject(j, keys[d], vals[d]);
  static const char *const types[] = {"f32", "f16", "q8", "q4"};
  cJSON *sk = cJSON_AddObjectToObject(j, "skinny");
  for (int t = 0; t < 4; t++) {
    if (!(rep->skinny[t].default_ms > 0)) continue;
    cJSON *e = cJSON_AddObjectToObject(sk, types[t]);
    const char *ks[] = {"split", "rows", "tuned_split", "tuned_rows", "default_ms", "tuned_ms"};
    double vs[] = {rep->skinny[t].split, rep->skinny[t].rows, rep->skinny[t].tuned_split, rep->skinny[t].tuned_rows,
                   rep->skinny[t].default_ms, rep->skinny[t].tuned_ms};
    for (int d = 0; d < 6; d++) cJSON_AddNumberToObject(e, ks[d], vs[d]);
  }
  static const char *const kinds[] = {"f32", "f16", "q8", "q4", "f32_in_out"};
  cJSON *rows = cJSON_AddObjectToObject(j, "skinny_rows");
  for (int t = 0; t < 5; t++) {
    if (!rep->rows[t].measured) continue;
    cJSON *e = cJSON_AddObjectToObject(rows, kinds[t]);
    cJSON_AddNumberToObject(e, "before", rep->rows[t].before);
    cJSON_AddNumberToObject(e, "measured", rep->rows[t].measured);
  }
  cJSON_AddStringToObject(j, "profile_written", rep->profile);
}

/* --tune: searches a profile for the shapes; returns 1 when it failed. */
static int run_tune(clf_context *ctx, const probe_opts *po, const out *o, cJSON *j) {
  clf_gemm_shape use[64];
  clf_tune_result per[64];
  clf_tune_report rep;
  memset(&rep, 0, sizeof(rep));
  size_t n = 0;
  const char *err = tune_shapes(po, use, COUNT(use), &n);
  if (!err) {
    clf_tune_options to = {po->budget_s, 1, tune_progress, NULL};
    clf_status st = clf_tune_gemm(ctx, use, n, &to, per, &rep);
    if (st != CLF_OK) err = clf_probe_error(ctx, st);
  }
  if (err) {
    if (o->human) printf("    search failed: %s\n", err);
    if (j) cJSON_AddStringToObject(j, "error", err);
    return 1;
  }
  double gain = rep.tuned_ms > 0 ? rep.default_ms / rep.tuned_ms : 0;
  if (o->human) print_tune_result(use, n, per, &rep, gain);
  if (j) json_tune_result(j, use, n, per, &rep, gain);
  return 0;
}

/* Prints the profile in use; with --tune, searches one first.  Returns 1
 * when a requested search failed. */
static int section_tuning(clf_context *ctx, const probe_opts *po, const out *o, cJSON *dev) {
  if (o->human) printf("  GEMM tuning profile\n");
  cJSON *j = o->obj ? cJSON_AddObjectToObject(dev, "tuning") : NULL;
  int rc = po->tune ? run_tune(ctx, po, o, j) : 0;
  const char *profile = clf_context_gemm_profile(ctx);
  if (o->human)
    printf("    applied: %s\n", profile ? profile : "none (CLBlast's defaults; `clformer probe --tune` searches one)");
  if (j) {
    if (profile) cJSON_AddStringToObject(j, "applied", profile);
    else cJSON_AddNullToObject(j, "applied");
  }
  return rc;
}

/* ---- the KV pool of a model ---- */

/* What clf_engine_create gives po->model on this device with the default
 * options (as `clformer batch` makes it): the blocks, their size, the
 * memory, and how many sequences of the model's full length fit at once.
 * Returns 1 when the model could not be loaded; a model the engine cannot
 * run is said in the section (clinfo's way: the probe goes on). */
static int section_kv_pool(clf_context *ctx, const char *model, const out *o, cJSON *dev) {
  if (o->human) printf("  KV pool of %s (the engine's, default options)\n", model);
  cJSON *j = o->obj ? cJSON_AddObjectToObject(dev, "kv_pool") : NULL;
  clf_model *m = NULL;
  clf_engine *e = NULL;
  clf_engine_stats s;
  clf_status st = clf_model_load(ctx, model, &m);
  const int rc = st != CLF_OK;
  if (st == CLF_OK && (st = clf_engine_create(m, NULL, &e)) == CLF_OK) st = clf_engine_stats_get(e, &s);
  if (st != CLF_OK) {
    const char *msg = clf_probe_error(ctx, st);
    if (o->human) printf("    %s: %s\n", rc ? "not loaded" : "none", msg);
    if (j) cJSON_AddStringToObject(j, "error", msg);
  } else {
    const size_t positions = clf_model_max_positions(m), per_seq = (positions + s.block_size - 1) / s.block_size;
    const size_t fit = per_seq ? s.blocks / per_seq : 0;
    /* (and the windowed layers' own blocks, where the layers mix windowed and full ones) */
    const double bytes = (double)s.blocks * s.block_bytes + (double)s.window_blocks * s.window_block_bytes,
                 mib = bytes / 1048576.0;
    if (o->human)
      printf("    %zu blocks of %zu positions, %.1f KiB each: %.1f MiB (weights %.1f MiB); %zu sequences of the "
             "model's full %zu positions at once\n", s.blocks, s.block_size, s.block_bytes / 1024.0, mib,
             clf_model_weight_bytes(m) / 1048576.0, fit, positions);
    if (j) {
      const char *keys[] = {"blocks", "block_size", "block_bytes", "bytes", "max_positions", "full_sequences"};
      const double vals[] = {(double)s.blocks, (double)s.block_size, (double)s.block_bytes,
                             bytes, (double)positions, (double)fit};
      for (int k = 0; k < 6; k++) cJSON_AddNumberToObject(j, keys[k], vals[k]);
    }
  }
  clf_engine_destroy(e);
  clf_model_destroy(m);
  return rc;
}

/* ---- one device, then all ---- */

/* The class the library's choices followed and the limits it ran under
 * (CLFORMER_DEVICE_CLASS, CLFORMER_LIMITS): "device_class",
 * "device_class_overridden" and "limits" of the device's JSON object. */
static void section_class(clf_context *ctx, const clf_device_desc *d, const out *o, cJSON *j) {
  int forced = 0;
  const char *cls = clf_context_device_class(ctx, &forced), *lim = clf_context_limits(ctx);
  const char *own = d->type & CL_DEVICE_TYPE_CPU ? "cpu" : d->type & CL_DEVICE_TYPE_GPU ? "gpu"
                    : d->type & CL_DEVICE_TYPE_ACCELERATOR ? "accelerator" : "custom";
  if (o->human) {
    printf("  Device class: %s", cls);
    if (forced) printf(" (overridden by CLFORMER_DEVICE_CLASS; the device is %s)", own);
    printf("\n");
    if (*lim) printf("  Limits: %s (CLFORMER_LIMITS, below the device's own)\n", lim);
  }
  if (j) {
    cJSON_AddStringToObject(j, "device_class", cls);
    cJSON_AddBoolToObject(j, "device_class_overridden", forced);
    cJSON_AddStringToObject(j, "limits", lim);
  }
}

/* Returns 0 when the device was probed and nothing failed validation. */
static int probe_device(const clf_device_desc *d, const probe_opts *po, cJSON *devices) {
  char selector[32];
  snprintf(selector, sizeof(selector), "%d:%d", d->platform_index, d->device_index);
  out o = {!po->json, NULL};
  if (devices) {
    o.obj = cJSON_CreateObject();
    cJSON_AddItemToArray(devices, o.obj);
    cJSON_AddStringToObject(o.obj, "selector", selector);
    fprintf(stderr, "clformer probe: %s %s / %s\n", selector, d->platform_name, d->device_name);
  }
  sections.n = 0;
  sections.total = 3 + (po->no_measure ? 0 : CLF_PROBE_MEASURE_SECTIONS) + !po->no_validate + !!po->model;
  clf_probe_section("properties");
  if (o.human) printf("== device %s: %s / %s\n  Properties\n", selector, d->platform_name, d->device_name);
  clf_probe_properties(d->platform, d->device, o.human, o.obj);

  clf_context_options co;
  clf_context_options_init(&co);
  co.device = selector;
  co.profiling = 1;
  clf_cli_show_builds(&co); /* the sections wait on kernel builds: say which */
  clf_context *ctx = NULL;
  clf_probe_section("device class");
  if (clf_context_create(&co, &ctx) != CLF_OK) {
    clf_cli_status_end();
    const char *msg = clf_last_error(NULL);
    if (o.human) printf("  no context on this device: %s\n\n", msg);
    else fprintf(stderr, "clformer probe: %s: %s\n", selector, msg);
    if (o.obj) cJSON_AddStringToObject(o.obj, "error", msg);
    return 1;
  }
  int rc = 0;
  section_class(ctx, d, &o, o.obj);
  if (!po->no_measure) clf_probe_measured(ctx, selector, po->runs, po->quick, o.human, o.obj);
  if (!po->no_validate) clf_probe_section("self-validation of the kernel variants");
  if (!po->no_validate && section_validation(ctx, &o, o.obj) > 0) rc = 1;
  clf_probe_section(po->tune ? "GEMM tuning search" : "GEMM tuning profile");
  if (section_tuning(ctx, po, &o, o.obj)) rc = 1;
  if (po->model) clf_probe_section("KV pool of the model");
  if (po->model && section_kv_pool(ctx, po->model, &o, o.obj)) rc = 1;
  clf_cli_status_end();
  if (o.human) printf("\n");
  clf_context_destroy(ctx);
  return rc;
}

static int probe_main(const void *opts, int argc, char **argv) {
  (void)argc; (void)argv;
  probe_opts po = *(const probe_opts *)opts;
  if ((po.tokens.n || po.budget_s > 0) && !po.tune)
    return clf_cli_usage_error(&clf_cli_probe_command, "--tokens and --budget go with --tune");
  if (!po.tokens.n) po.tokens.v[po.tokens.n++] = 128;
  po.runs = po.quick ? 3 : 7;
  /* A status line on the terminal says which section runs; the rows the
   * sections print to the same terminal are held and let out below it as
   * each is done (clf_cli_status_flush_stdout), so that the two never share
   * a line.  Nothing changes in a pipe. */
  static char held[1 << 20];
  if (isatty(STDERR_FILENO) && isatty(STDOUT_FILENO)) setvbuf(stdout, held, _IOFBF, sizeof held);

  enum { MAX_DEVICES = 64 };
  static clf_device_desc devs[MAX_DEVICES];
  size_t n = 0;
  clf_status st = po.device ? clf_select_device(po.device, &devs[0]) : clf_list_devices(devs, MAX_DEVICES, &n);
  if (po.device && st == CLF_OK) n = 1;
  if (st != CLF_OK) {
    fprintf(stderr, "clformer probe: %s\n", clf_last_error(NULL));
    return 1;
  }
  if (n > MAX_DEVICES) n = MAX_DEVICES;

  cJSON *root = NULL, *devices = NULL;
  if (po.json) {
    root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "schema", "clformer-probe");
    cJSON_AddNumberToObject(root, "schema_version", 1);
    cJSON_AddStringToObject(root, "clformer_version", CLF_VERSION_STRING);
    devices = cJSON_AddArrayToObject(root, "devices");
  }
  int rc = 0;
  for (size_t i = 0; i < n; i++) rc |= probe_device(&devs[i], &po, devices);
  if (root && n == 1) { /* one device: its class at the top level too */
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(devices, 0), "device_class");
    if (cJSON_IsString(cls)) cJSON_AddStringToObject(root, "device_class", cls->valuestring);
  }
  if (root) {
    char *text = cJSON_Print(root);
    if (text) puts(text);
    else rc = 1;
    free(text);
    cJSON_Delete(root);
  }
  return rc;
}

const clf_cli_command clf_cli_probe_command = {
    .name = "probe",
    .summary = "device properties, measured throughput and ratios, self-validation",
    .synopsis = "[--device S] [--json] [--quick] [--no-measure] [--no-validate] [--model MODEL]\n"
                "                      [--tune [--tokens N[,N...]] [--budget SECONDS]]",
    .details =
        "Describes every OpenCL device (or the one --device picks): its properties,\n"
        "measured kernel build time (cold and from clformer's binary cache), memory\n"
        "bandwidth, launch latency, SGEMM and attention throughput (median device time\n"
        "of 7 event-profiled runs after a warm-up; 3 and fewer shapes with --quick),\n"
        "ops beside their baselines on the same device as ratios (the fused attention\n"
        "kernel vs the GEMM path, layer norm vs a copy of the same bytes),\n"
        "clformer's self-validation of its kernel variants against CPU references,\n"
        "and the GEMM tuning profile in use.  --model adds the KV pool that the engine\n"
        "(`clformer batch`) would get for MODEL with its default options: blocks, their\n"
        "positions and bytes, and how many sequences of the model's full length fit.\n"
        "--tune first searches CLBlast's GEMM\n"
        "parameters for the GEMMs of --model's model at each N tokens (default 128),\n"
        "else for BERT-base/GPT-2 sized layers, and the work-group of the skinny\n"
        "kernel (1-8 rows: decoding) for each weight type on the same weights, within\n"
        "SECONDS (default 300), and stores the profile.\n"
        "--json prints {\"schema\": \"clformer-probe\", \"schema_version\": 1, ...} on stdout\n"
        "with the raw CL_DEVICE_* names and every measured number; each device's\n"
        "\"device_class\" is the class clformer's choices followed (CLFORMER_DEVICE_CLASS\n"
        "overrides the device's; also at the top level when one device is probed) and\n"
        "\"limits\" the CLFORMER_LIMITS it ran under; progress goes to\n"
        "stderr.  Exit status: 0, or 1 when a device could not be probed, a kernel\n"
        "variant failed validation, a requested --tune failed or --model's model could not\n"
        "be loaded; 2 for usage errors.\n",
    .options = probe_options,
    .opts_size = sizeof(probe_opts),
    .min_args = 0,
    .max_args = 0,
    .handler = probe_main,
};
