/* test_validate.c - self-validation: every variant passes on the default
 * device; a kernel broken on purpose (a copy of kernels/ with one output
 * scaled by 1.01) fails, is not used, its op falls back and says so, and
 * the verdict is read back from disk; corrupt verdict files are ignored. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* validate.c's MAX_CASES: Intel's runtime lists 178 variants with the integer
 * path's extension builds and every k-quant's (session 37) */
#define MAX_RESULTS 320

/* The notices a context sent to its log callback. */
typedef struct log_capture {
  char text[8192];
  int count;
} log_capture;

/* Notices about self-validation.  The GEMM profile's notice at context
 * creation (a shipped profile applies on a fresh cache: test_tune.c checks
 * it) is not one of them. */
static void capture(void *user, const char *message) {
  log_capture *c = user;
  if (strncmp(message, "GEMM tuning profile ", 20) == 0) return;
  size_t n = strlen(c->text);
  snprintf(c->text + n, sizeof(c->text) - n, "%s\n", message);
  c->count++;
}

/* How many notices mention `needle`. */
static int log_mentions(const log_capture *c, const char *needle) {
  int n = 0;
  for (const char *p = strstr(c->text, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* Each test validates into a cache of its own (its verdicts its own), but
 * its program binaries come from the suite's cache ($CLFORMER_CACHE_DIR,
 * which meson and the matrix set) and go back to it at the end: only the
 * first test to run builds every variant (on Intel's CPU runtime each of
 * the four built them all, 200-260 s apiece).  A binary is keyed by its
 * source and options (cache.c), so the broken kernels of a test's kernel
 * directory never meet the good ones' binaries. */
static const char *suite_cache(void) { return getenv("CLFORMER_CACHE_DIR"); }
static int copy_files(const char *from, const char *to, const char *suffix, int link_first);
static void share_binaries(const char *from, const char *to) {
  if (from && to && access(to, F_OK) == 0) copy_files(from, to, ".clbin", 1); /* no cache yet: nothing to share */
}

static clf_context *make_ctx(const char *cache_dir, const char *kernel_dir, log_capture *log) {
  share_binaries(suite_cache(), cache_dir);
  clf_context_options o;
  clf_context_options_init(&o);
  o.cache_dir = cache_dir;
  o.kernel_dir = kernel_dir;
  o.log = capture;
  o.log_user = log;
  clf_context *ctx = NULL;
  clf_status st = clf_context_create(&o, &ctx);
  ck_assert_msg(st == CLF_OK, "clf_context_create: %s", clf_last_error(NULL));
  return ctx;
}

static const clf_variant_result *find_result(const clf_variant_result *r, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(r[i].name, name) == 0) return &r[i];
  return NULL;
}

/* The verdict file of cache_dir (there is one device, so one file). */
static int verdict_file(const char *cache_dir, char *path, size_t len) {
  char dir[4200];
  snprintf(dir, sizeof(dir), "%s/verdicts", cache_dir);
  DIR *d = opendir(dir);
  int found = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n > 4 && strcmp(e->d_name + n - 4, ".txt") == 0) {
      snprintf(path, len, "%s/%s", dir, e->d_name);
      found++;
    }
  }
  if (d) closedir(d);
  return found;
}

static void remove_cache(const char *cache_dir) {
  share_binaries(cache_dir, suite_cache());
  char dir[4200];
  snprintf(dir, sizeof(dir), "%s/verdicts", cache_dir);
  if (access(dir, F_OK) == 0) th_tmpdir_remove(dir);
  th_tmpdir_remove(cache_dir);
}

static char *read_text(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
  buf[n] = '\0';
  fclose(f);
  if (len) *len = (size_t)n;
  return buf;
}

static void write_text(const char *path, const char *text, size_t len) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(text, 1, len, f), len);
  fclose(f);
}

/* The files of `from` whose names end in `suffix` put in `to` where it
 * has none of that name: with link_first a hard link where one can be
 * made, else a copy written beside and renamed into place (`to` may be a
 * cache that another process reads).  How many were put there, or -1 when
 * `from` cannot be listed. */
static int copy_files(const char *from, const char *to, const char *suffix, int link_first) {
  DIR *d = opendir(from);
  if (!d) return -1;
  const size_t ns = strlen(suffix);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    const size_t len = strlen(e->d_name);
    if (len <= ns || strcmp(e->d_name + len - ns, suffix) != 0) continue;
    char a[4400], b[4400], tmp[4420];
    snprintf(a, sizeof a, "%s/%s", from, e->d_name);
    snprintf(b, sizeof b, "%s/%s", to, e->d_name);
    if (access(b, F_OK) == 0) continue;
    if (!link_first || link(a, b) != 0) {
      size_t l;
      char *text = read_text(a, &l);
      snprintf(tmp, sizeof tmp, "%s.%ld.part", b, (long)getpid());
      write_text(tmp, text, l);
      free(text);
      ck_assert_msg(rename(tmp, b) == 0, "cannot rename %s to %s", tmp, b);
    }
    n++;
  }
  closedir(d);
  return n;
}

/* Replaces the first `needle` at or after `after` (NULL: the start) in the
 * file with `repl`. */
static void patch_file(const char *path, const char *after, const char *needle, const char *repl) {
  char *src = read_text(path, NULL);
  const char *from = after ? strstr(src, after) : src;
  ck_assert_msg(from != NULL, "%s has no \"%s\"", path, after);
  char *at = strstr(from, needle);
  ck_assert_msg(at != NULL, "%s has no \"%s\" after \"%s\"", path, needle, after ? after : "its start");
  size_t head = (size_t)(at - src), nl = strlen(needle), rl = strlen(repl), tail = strlen(at + nl);
  char *out = malloc(head + rl + tail + 1);
  memcpy(out, src, head);
  memcpy(out + head, repl, rl);
  memcpy(out + head + rl, at + nl, tail + 1);
  write_text(path, out, head + rl + tail);
  free(out);
  free(src);
}

/* The layer-norm kernel this device prefers: one row per work-item on CPUs. */
/* Whether the context chooses as a CPU does (its class: the device's, or
 * CLFORMER_DEVICE_CLASS's). */
static int device_is_cpu(void) { return strcmp(clf_context_device_class(th_ctx, NULL), "cpu") == 0; }

/* A copy of the source tree's kernels/ in a temp dir with three outputs
 * scaled by 1.01: the layer-norm kernel this device prefers, the fused
 * attention kernel (every head dim) and the row softmax. */
static void make_broken_kernels(char *kdir, size_t len) {
  const char *fx = getenv("CLF_FIXTURES");
  ck_assert_msg(fx != NULL, "CLF_FIXTURES is not set");
  char src[4096], a[8192];
  snprintf(src, sizeof(src), "%s/../../kernels", fx);
  th_tmpdir_create(kdir, len, "kernels");
  const int copied = copy_files(src, kdir, ".cl", 0);
  ck_assert_msg(copied >= 5, "%d kernel files copied from %s", copied, src);
  snprintf(a, sizeof(a), "%s/norm.cl", kdir);
  /* the work-group kernels (layer_norm, layer_norm_sg) share one body; the
   * row kernel stores 8 at a time, then a scalar tail */
  patch_file(a, device_is_cpu() ? "__kernel void layer_norm_rows" : "inline void clf_layer_norm_group",
             "y[d] = (s - mean)", "y[d] = 1.01f * (s - mean)");
  if (device_is_cpu())
    patch_file(a, "__kernel void layer_norm_rows", "vstore8((s - mean)", "vstore8(1.01f * (s - mean)");
  snprintf(a, sizeof(a), "%s/attention.cl", kdir);
  patch_file(a, NULL, "o[d] = acc[a][e] * inv;", "o[d] = acc[a][e] * inv * 1.01f;");
  patch_file(a, "void attn_fused_cpu", "ATT_STORE(acc[c] * inv,", "ATT_STORE(acc[c] * inv * 1.01f,"); /* CPU shape */
  patch_file(a, "void attn_short_cpu", "acc[c] *= inv;", "acc[c] *= inv * 1.01f;"); /* its short keys */
  snprintf(a, sizeof(a), "%s/elementwise.cl", kdir);
  patch_file(a, "inline void clf_softmax_row", "* inv;", "* inv * 1.01f;"); /* softmax_rows and _sg */
}

/* ---- CPU references ---- */

static void ref_layer_norm(const float *x, const float *g, const float *b, size_t rows, size_t D, float *y) {
  for (size_t i = 0; i < rows; i++) {
    double mean = 0, var = 0;
    for (size_t d = 0; d < D; d++) mean += x[i * D + d];
    mean /= D;
    for (size_t d = 0; d < D; d++) var += (x[i * D + d] - mean) * (x[i * D + d] - mean);
    var /= D;
    for (size_t d = 0; d < D; d++) y[i * D + d] = (float)((x[i * D + d] - mean) / sqrt(var + 1e-5) * g[d] + b[d]);
  }
}

/* Causal attention, q, k, v [BH, L, Dh]. */
static void ref_attention(const float *q, const float *k, const float *v, size_t BH, size_t L, size_t Dh,
                          float scale, float *out) {
  double p[64];
  for (size_t h = 0; h < BH; h++)
    for (size_t i = 0; i < L; i++) {
      double mx = -INFINITY, sum = 0;
      for (size_t j = 0; j <= i; j++) {
        double s = 0;
        for (size_t d = 0; d < Dh; d++) s += (double)q[(h * L + i) * Dh + d] * k[(h * L + j) * Dh + d];
        p[j] = s * scale;
        if (p[j] > mx) mx = p[j];
      }
      for (size_t j = 0; j <= i; j++) sum += p[j] = exp(p[j] - mx);
      for (size_t d = 0; d < Dh; d++) {
        double acc = 0;
        for (size_t j = 0; j <= i; j++) acc += p[j] * v[(h * L + j) * Dh + d];
        out[(h * L + i) * Dh + d] = (float)(acc / sum);
      }
    }
}

static clf_tensor *tensor_on(clf_context *ctx, int nd, const size_t *shape, const float *data) {
  clf_tensor *t = NULL;
  ck_assert_int_eq(clf_tensor_create(ctx, CLF_F32, nd, shape, &t), CLF_OK);
  if (data) ck_assert_int_eq(clf_tensor_upload(ctx, t, data, clf_tensor_bytes(t)), CLF_OK);
  return t;
}

static float *download(clf_context *ctx, const clf_tensor *t) {
  float *h = malloc(clf_tensor_bytes(t));
  ck_assert_int_eq(clf_tensor_download(ctx, t, h, clf_tensor_bytes(t)), CLF_OK);
  return h;
}

/* clf_layer_norm on ctx matches the CPU reference. */
static void check_layer_norm(clf_context *ctx) {
  const size_t R = 5, D = 96;
  float *x = th_rand(R * D, 81, -2, 3), *g = th_rand(D, 82, 0.5f, 1.5f), *b = th_rand(D, 83, -0.5f, 0.5f);
  float *ref = malloc(R * D * sizeof(float));
  ref_layer_norm(x, g, b, R, D, ref);
  clf_tensor *tx = tensor_on(ctx, 2, TH_SHAPE(R, D), x), *tg = tensor_on(ctx, 1, TH_SHAPE(D), g);
  clf_tensor *tb = tensor_on(ctx, 1, TH_SHAPE(D), b), *ty = tensor_on(ctx, 2, TH_SHAPE(R, D), NULL);
  clf_status st = clf_layer_norm(ctx, tx, NULL, tg, tb, 1e-5f, NULL, ty, NULL);
  ck_assert_msg(st == CLF_OK, "clf_layer_norm: %s", clf_last_error(ctx));
  float *y = download(ctx, ty);
  TH_CLOSE(y, ref, R * D, 2e-5);
  free(y);
  clf_tensor_destroy(tx);
  clf_tensor_destroy(tg);
  clf_tensor_destroy(tb);
  clf_tensor_destroy(ty);
  free(ref);
  free(x);
  free(g);
  free(b);
}

/* clf_attention (causal, head dim 64) on ctx matches the CPU reference with
 * `impl`. */
static void check_attention(clf_context *ctx, clf_attention_impl impl) {
  const size_t B = 1, H = 2, L = 37, Dh = 64, n = B * H * L * Dh;
  float *q = th_rand(n, 91, -1, 1), *k = th_rand(n, 92, -1, 1), *v = th_rand(n, 93, -1, 1);
  float *ref = malloc(n * sizeof(float));
  const float scale = 0.125f;
  ref_attention(q, k, v, B * H, L, Dh, scale, ref);
  const size_t *sh = TH_SHAPE(B, H, L, Dh);
  clf_tensor *tq = tensor_on(ctx, 4, sh, q), *tk = tensor_on(ctx, 4, sh, k), *tv = tensor_on(ctx, 4, sh, v);
  clf_tensor *to = tensor_on(ctx, 4, sh, NULL);
  clf_attention_mask mask = {NULL, 1, NULL};
  clf_status st = clf_attention(ctx, tq, tk, tv, 0, &mask, scale, impl, to, NULL);
  ck_assert_msg(st == CLF_OK, "clf_attention(impl %d): %s", (int)impl, clf_last_error(ctx));
  float *o = download(ctx, to);
  TH_CLOSE(o, ref, n, 1e-5);
  free(o);
  clf_tensor_destroy(tq);
  clf_tensor_destroy(tk);
  clf_tensor_destroy(tv);
  clf_tensor_destroy(to);
  free(ref);
  free(q);
  free(k);
  free(v);
}

/* clf_softmax's status on ctx (its only kernel may be refused). */
static clf_status run_softmax(clf_context *ctx) {
  float x[3 * 10];
  for (int i = 0; i < 30; i++) x[i] = (float)(i % 7) * 0.3f;
  clf_tensor *tx = tensor_on(ctx, 2, TH_SHAPE(3, 10), x), *ty = tensor_on(ctx, 2, TH_SHAPE(3, 10), NULL);
  clf_status st = clf_softmax(ctx, tx, 1.0f, ty, NULL);
  if (st == CLF_OK) st = clf_finish(ctx);
  clf_tensor_destroy(tx);
  clf_tensor_destroy(ty);
  return st;
}

/* ---- tests ---- */

START_TEST(every_variant_passes_and_is_stored) {
  char cache[4096], path[8192];
  th_tmpdir_create(cache, sizeof(cache), "verdicts");
  log_capture log = {{0}, 0};
  clf_context *ctx = make_ctx(cache, NULL, &log);
  clf_variant_result r[MAX_RESULTS];
  size_t n = 0;
  TH_OK(clf_validate(ctx, r, MAX_RESULTS, &n));
  ck_assert_uint_gt(n, 10);
  /* below the library's own list size too (validate.c's MAX_CASES, the
   * same 192), which would drop the variants past it */
  ck_assert_uint_lt(n, MAX_RESULTS);
  printf("self-validation on %s:\n", clf_context_device(ctx)->device_name);
  for (size_t i = 0; i < n; i++) {
    printf("  %-44s %s  error %.3g  tolerance %.3g  %.1f ms\n", r[i].name, r[i].passed ? "pass" : "FAIL",
           r[i].max_error, r[i].tolerance, r[i].ms);
    ck_assert_msg(r[i].passed, "%s failed: %s", r[i].name, r[i].message);
    ck_assert_msg(r[i].max_error <= r[i].tolerance, "%s: error %g", r[i].name, r[i].max_error);
    ck_assert_str_eq(r[i].message, "");
    ck_assert(!clf_variant_disabled(ctx, r[i].name));
    for (size_t j = 0; j < i; j++) ck_assert_str_ne(r[i].name, r[j].name);
  }
  /* The variants the brief names are all there. */
  const char *must[] = {"norm.layer_norm", "norm.layer_norm_rows", "attention.gemm", "movement.permute_tiled",
                        "movement.copy_strided", "elementwise.softmax", "elementwise.bias_act gelu",
                        "embed.gather i32", "gemm.clblast direct", "gemm.clblast indirect"};
  for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++) {
    /* CLBlast's database may route every size validation tries (up to
     * 1024^3) directly on a GPU (an H100 does): there is then no indirect
     * path to validate; CPUs go indirect from 256. */
    if (!strcmp(must[i], "gemm.clblast indirect") && !device_is_cpu() && !find_result(r, n, must[i])) {
      printf("  (no GEMM up to 1024^3 takes CLBlast's indirect path on this device)\n");
      continue;
    }
    ck_assert_msg(find_result(r, n, must[i]) != NULL, "no variant %s", must[i]);
  }
  int fused = 0;
  for (size_t i = 0; i < n; i++) fused += strncmp(r[i].name, "attention.fused HEAD_DIM=", 25) == 0;
  ck_assert_int_ge(fused, 6); /* head dims 32, 64, 128 at least, prefill and decode tiles */
  ck_assert_str_eq(find_result(r, n, "norm.layer_norm_rows")->fallback, "norm.layer_norm");
  ck_assert_str_eq(find_result(r, n, "elementwise.softmax")->fallback, "");

  /* Stored: one file, a line per variant, all "pass". */
  ck_assert_int_eq(verdict_file(cache, path, sizeof(path)), 1);
  char *text = read_text(path, NULL);
  ck_assert_ptr_nonnull(strstr(text, "clformer-verdicts 1\n"));
  char want[160];
  snprintf(want, sizeof(want), "\nend %zu\n", n);
  ck_assert_ptr_nonnull(strstr(text, want));
  ck_assert_ptr_null(strstr(text, "\tfail\t"));
  free(text);
  ck_assert_int_eq(log.count, 0);

  /* Counting only. */
  size_t n2 = 0;
  TH_OK(clf_validate(ctx, NULL, 0, &n2));
  ck_assert_uint_eq(n2, n);
  clf_context_destroy(ctx);
  remove_cache(cache);
}
END_TEST

START_TEST(broken_variants_fall_back_and_are_remembered) {
  char kdir[4096], cache[4096];
  make_broken_kernels(kdir, sizeof(kdir));
  th_tmpdir_create(cache, sizeof(cache), "verdicts");
  const char *ln_bad = device_is_cpu() ? "norm.layer_norm_rows" : "norm.layer_norm";
  const char *ln_good = device_is_cpu() ? "norm.layer_norm" : "norm.layer_norm_rows";

  log_capture log = {{0}, 0};
  clf_context *ctx = make_ctx(cache, kdir, &log);
  clf_variant_result r[MAX_RESULTS];
  size_t n = 0;
  TH_OK(clf_validate(ctx, r, MAX_RESULTS, &n));
  const clf_variant_result *bad = find_result(r, n, ln_bad), *good = find_result(r, n, ln_good);
  ck_assert_ptr_nonnull(bad);
  ck_assert_ptr_nonnull(good);
  /* y = 1.01 LN(s): an error near 0.01 of the output's scale. */
  ck_assert_msg(!bad->passed && bad->max_error > 1e-3 && bad->max_error < 2e-2, "%s: passed %d, error %g",
                bad->name, bad->passed, bad->max_error);
  ck_assert_ptr_nonnull(strstr(bad->message, "exceeds the tolerance"));
  ck_assert_str_eq(bad->fallback, ln_good);
  ck_assert_msg(good->passed, "%s: %s", good->name, good->message);
  int fused = 0;
  for (size_t i = 0; i < n; i++) {
    /* the sub-group variants (where the device has them) share the broken bodies */
    const int broken = strncmp(r[i].name, "attention.fused", 15) == 0 || strcmp(r[i].name, ln_bad) == 0 ||
                       (!device_is_cpu() && strcmp(r[i].name, "norm.layer_norm_sg") == 0) ||
                       strcmp(r[i].name, "elementwise.softmax") == 0 || strcmp(r[i].name, "elementwise.softmax_sg") == 0;
    fused += strncmp(r[i].name, "attention.fused", 15) == 0;
    ck_assert_msg(r[i].passed == !broken, "%s: passed %d, error %g (%s)", r[i].name, r[i].passed, r[i].max_error,
                  r[i].message);
    ck_assert_int_eq(clf_variant_disabled(ctx, r[i].name), broken);
    if (broken) ck_assert_msg(r[i].max_error > r[i].tolerance, "%s: error %g", r[i].name, r[i].max_error);
  }
  ck_assert_int_ge(fused, 6);
  ck_assert_int_eq(log.count, 0); /* validation itself logs nothing */

  /* The ops fall back, give the reference result, and say so once. */
  check_layer_norm(ctx);
  check_layer_norm(ctx);
  char quoted[64];
  snprintf(quoted, sizeof quoted, "\"%s\"", ln_bad); /* "norm.layer_norm" is also the start of ..._rows */
  ck_assert_msg(log_mentions(&log, quoted) == 1, "log: %s", log.text);
  ck_assert_ptr_nonnull(strstr(log.text, "failed self-validation"));
  check_attention(ctx, CLF_ATTN_AUTO);
  check_attention(ctx, CLF_ATTN_FUSED);
  check_attention(ctx, CLF_ATTN_GEMM);
  ck_assert_msg(log_mentions(&log, "\"attention.fused HEAD_DIM=64 ") == 1, "log: %s", log.text);
  ck_assert_ptr_nonnull(strstr(log.text, "using attention.gemm"));
  /* softmax has one kernel: refused, naming the variant and the probe. */
  ck_assert_int_eq(run_softmax(ctx), CLF_E_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(clf_last_error(ctx), "elementwise.softmax"));
  ck_assert_ptr_nonnull(strstr(clf_last_error(ctx), "clformer probe"));
  clf_context_destroy(ctx);

  /* A new context on the same kernels reads the verdicts from disk. */
  log_capture log2 = {{0}, 0};
  ctx = make_ctx(cache, kdir, &log2);
  for (size_t i = 0; i < n; i++) ck_assert_int_eq(clf_variant_disabled(ctx, r[i].name), !r[i].passed);
  check_layer_norm(ctx);
  check_attention(ctx, CLF_ATTN_FUSED);
  ck_assert_msg(log_mentions(&log2, quoted) == 1, "log: %s", log2.text);
  ck_assert_int_eq(run_softmax(ctx), CLF_E_UNSUPPORTED);
  clf_context_destroy(ctx);

  /* CLFORMER_VALIDATION=ignore runs the refused kernel anyway. */
  setenv("CLFORMER_VALIDATION", "ignore", 1);
  ctx = make_ctx(cache, kdir, &log2);
  unsetenv("CLFORMER_VALIDATION");
  ck_assert_int_eq(run_softmax(ctx), CLF_OK);
  clf_context_destroy(ctx);

  /* The embedded kernels are other sources: no verdict applies to them. */
  log_capture log3 = {{0}, 0};
  ctx = make_ctx(cache, NULL, &log3);
  ck_assert(!clf_variant_disabled(ctx, ln_bad));
  ck_assert_int_eq(run_softmax(ctx), CLF_OK);
  ck_assert_int_eq(log3.count, 0);
  clf_context_destroy(ctx);

  remove_cache(cache);
  th_tmpdir_remove(kdir);
}
END_TEST

START_TEST(corrupt_verdicts_are_ignored) {
  char kdir[4096], cache[4096], path[8192];
  make_broken_kernels(kdir, sizeof(kdir));
  th_tmpdir_create(cache, sizeof(cache), "verdicts");
  const char *ln_bad = device_is_cpu() ? "norm.layer_norm_rows" : "norm.layer_norm";
  log_capture log = {{0}, 0};
  clf_context *ctx = make_ctx(cache, kdir, &log);
  size_t n = 0;
  TH_OK(clf_validate(ctx, NULL, 0, &n));
  clf_context_destroy(ctx);
  ck_assert_int_eq(verdict_file(cache, path, sizeof(path)), 1);
  size_t len;
  char *good = read_text(path, &len);

  /* Truncated mid-line and at a line end, bytes that are not text, a wrong
   * format line, an unknown verdict word, empty. */
  char *cut_line = strstr(good, ln_bad);
  ck_assert_ptr_nonnull(cut_line);
  char *last_nl = strstr(good, "\nend ");
  ck_assert_ptr_nonnull(last_nl);
  char *bad_word = strdup(good);
  memcpy(strstr(bad_word, "\tfail\t"), "\tfa!l\t", 6);
  static const char binary[] = "clformer-verdicts 1\ndevice: x\n\0\xff\xfe\tpass\t0\t0\nend 1\n";
  struct {
    const char *what;
    const char *text;
    size_t len;
  } cases[] = {
      {"truncated mid-line", good, (size_t)(cut_line - good) + 5},
      {"truncated at a line end", good, (size_t)(last_nl - good) + 1},
      {"binary", binary, sizeof(binary) - 1},
      {"wrong format", "clformer-verdicts 99\ndevice: x\nend 0\n", 37},
      {"bad verdict word", bad_word, len},
      {"empty", "", 0},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    write_text(path, cases[i].text, cases[i].len);
    log_capture l = {{0}, 0};
    ctx = make_ctx(cache, kdir, &l);
    ck_assert_msg(!clf_variant_disabled(ctx, ln_bad), "%s: a verdict was read", cases[i].what);
    ck_assert_msg(l.count == 1 && strstr(l.text, "malformed"), "%s: log \"%s\"", cases[i].what, l.text);
    clf_context_destroy(ctx);
  }

  /* A name twice is malformed too (the table is sorted and searched). */
  char *twice = malloc(2 * len + 64);
  const char *first = strstr(good, "\n") + 1, *entries = strstr(first, "\n") + 1;
  size_t head = (size_t)(entries - good), body = (size_t)(last_nl + 1 - entries);
  size_t tn = (size_t)snprintf(twice, 2 * len + 64, "%.*s%.*s%.*s", (int)head, good, (int)body, entries, (int)body,
                               entries);
  size_t lines = 0;
  for (const char *c = entries; c < last_nl + 1; c++) lines += *c == '\n';
  tn += (size_t)sprintf(twice + tn, "end %zu\n", 2 * lines);
  write_text(path, twice, tn);
  log_capture l2 = {{0}, 0};
  ctx = make_ctx(cache, kdir, &l2);
  ck_assert_msg(l2.count == 1 && strstr(l2.text, "malformed"), "duplicates: log \"%s\"", l2.text);
  clf_context_destroy(ctx);
  free(twice);

  /* issue 11: 35,000 entries (parsing was quadratic: 2 s a context) are
   * read, and the failed verdict among them is found. */
  size_t cap = len + 35000 * 32, bn = head + body;
  char *big = malloc(cap);
  memcpy(big, good, bn);
  for (int i = 0; i < 35000; i++) bn += (size_t)sprintf(big + bn, "zz.filler.%05d\tpass\t0\t0\n", i);
  bn += (size_t)sprintf(big + bn, "end %zu\n", lines + 35000);
  write_text(path, big, bn);
  log_capture l3 = {{0}, 0};
  ctx = make_ctx(cache, kdir, &l3);
  ck_assert_msg(l3.count == 0, "35,000 verdicts: log \"%s\"", l3.text);
  ck_assert(clf_variant_disabled(ctx, ln_bad));
  clf_context_destroy(ctx);
  free(big);

  /* The intact file still works. */
  write_text(path, good, len);
  ctx = make_ctx(cache, kdir, &log);
  ck_assert(clf_variant_disabled(ctx, ln_bad));
  clf_context_destroy(ctx);
  free(bad_word);
  free(good);
  remove_cache(cache);
  th_tmpdir_remove(kdir);
}
END_TEST


/* Rewrites verdict `name` in the file at path as failed with error 0.5. */
static void mark_failed(const char *path, const char *name) {
  char *text = read_text(path, NULL), line[160];
  snprintf(line, sizeof(line), "\n%s\tpass\t", name);
  char *at = strstr(text, line);
  ck_assert_msg(at != NULL, "no passing verdict %s in %s", name, path);
  char *eol = strchr(at + 1, '\n');
  size_t head = (size_t)(at - text), tail = strlen(eol);
  char *out = malloc(head + strlen(name) + 64 + tail + 1);
  ck_assert_ptr_nonnull(out);
  int k = sprintf(out, "%.*s\n%s\tfail\t5.000000e-01\t1.000000e-05", (int)head, text, name);
  memcpy(out + k, eol, tail + 1);
  write_text(path, out, strlen(out));
  free(out);
  free(text);
}

/* C[i] = A[i] B[i], on the CPU. */
static void ref_gemm(const float *a, const float *b, size_t batch, size_t m, size_t n, size_t k, float *c) {
  for (size_t i = 0; i < batch * m; i++)
    for (size_t j = 0; j < n; j++) {
      double s = 0;
      for (size_t e = 0; e < k; e++) s += (double)a[i * k + e] * b[(i / m * k + e) * n + j];
      c[i * n + j] = (float)s;
    }
}

START_TEST(failed_gemm_paths_are_not_used) {
  char cache[4096], path[8192];
  th_tmpdir_create(cache, sizeof(cache), "verdicts");
  log_capture log = {{0}, 0};
  clf_context *ctx = make_ctx(cache, NULL, &log);
  size_t n = 0;
  clf_variant_result r[MAX_RESULTS];
  TH_OK(clf_validate(ctx, r, MAX_RESULTS, &n));
  clf_context_destroy(ctx);
  /* See every_variant_passes_and_is_stored: a GPU may have no indirect path. */
  const int indirect = find_result(r, n, "gemm.clblast indirect") != NULL;
  ck_assert(indirect || !device_is_cpu());
  ck_assert_int_eq(verdict_file(cache, path, sizeof(path)), 1);
  mark_failed(path, "gemm.clblast direct batched");
  if (indirect) mark_failed(path, "gemm.clblast indirect");

  ctx = make_ctx(cache, NULL, &log);
  ck_assert(clf_variant_disabled(ctx, "gemm.clblast direct batched"));
  ck_assert(!clf_variant_disabled(ctx, "gemm.clblast direct"));
  /* A small batch (CLBlast's direct path) runs one GEMM per batch index. */
  enum { B = 3, M = 8, N = 12, K = 10 };
  float *a = th_rand(B * M * K, 1, -1, 1), *b = th_rand(B * K * N, 2, -1, 1), ref[B * M * N];
  ref_gemm(a, b, B, M, N, K, ref);
  clf_tensor *ta = tensor_on(ctx, 3, TH_SHAPE(B, M, K), a), *tb = tensor_on(ctx, 3, TH_SHAPE(B, K, N), b),
             *tc = tensor_on(ctx, 3, TH_SHAPE(B, M, N), NULL);
  clf_status st = clf_gemm_batched(ctx, 0, 0, 1.0f, ta, tb, 0.0f, tc, NULL);
  ck_assert_msg(st == CLF_OK, "%s", clf_last_error(ctx));
  float *got = download(ctx, tc);
  TH_CLOSE(got, ref, (size_t)B * M * N, 1e-5);
  ck_assert_int_eq(log_mentions(&log, "\"gemm.clblast direct batched\" failed self-validation"), 1);
  free(got);
  /* A GEMM on the indirect path has no alternative: refused. */
  const size_t L = 1024;
  clf_tensor *la = tensor_on(ctx, 2, TH_SHAPE(L, L), NULL), *lc = tensor_on(ctx, 2, TH_SHAPE(L, L), NULL);
  st = clf_gemm(ctx, 0, 0, 1.0f, la, la, 0.0f, lc, NULL);
  if (indirect) {
    ck_assert_int_eq(st, CLF_E_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(clf_last_error(ctx), "gemm.clblast indirect"));
  } else {
    ck_assert_msg(st == CLF_OK, "%s", clf_last_error(ctx)); /* the direct path, validated */
  }
  clf_tensor_destroy(ta);
  clf_tensor_destroy(tb);
  clf_tensor_destroy(tc);
  clf_tensor_destroy(la);
  clf_tensor_destroy(lc);
  free(a);
  free(b);
  clf_context_destroy(ctx);
  remove_cache(cache);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("validate");
  TCase *tc = tcase_create("validate");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, every_variant_passes_and_is_stored);
  tcase_add_test(tc, broken_variants_fall_back_and_are_remembered);
  tcase_add_test(tc, corrupt_verdicts_are_ignored);
  tcase_add_test(tc, failed_gemm_paths_are_not_used);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
