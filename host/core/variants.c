/* variants.c - self-validation verdicts: storage, lookup and their file.
 *
 * The verdicts of the context's device live in ctx->verdicts and in
 * <cache>/verdicts/<key>.txt, the key hashing device, driver, library,
 * CLBlast and the kernel sources the context builds.  Ops ask
 * clf__variant_pick (two variants) or, through clf__get_kernel,
 * clf__variant_gate (one variant) before they use a kernel; the device
 * layer's clf_validate fills the table through clf__verdict_record.
 */
#include "core.h"

#include "base/file.h"

#include <clblast_c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define VERDICT_FORMAT "clformer-verdicts 1"
#define VERDICT_MAX_BYTES (1u << 20)

typedef struct verdict {
  char name[96];
  int passed;
  double error, tolerance;
  int logged; /* its fallback or refusal was logged in this context */
} verdict;

struct clf__verdicts {
  verdict *v;
  size_t n, cap;
  size_t failed;      /* verdicts with passed == 0 */
  uint64_t key;       /* names the verdict file */
  int ignore;         /* $CLFORMER_VALIDATION=ignore: use failed single variants anyway */
  int validating;     /* clf_validate is running: verdicts are not consulted */
  const char *pinned; /* while validating: the variant under test */
};

/* Variants with an alternative, and what replaces each. */
static const struct { const char *prefix, *fallback; } fallbacks[] = {
    {"norm.layer_norm_sg", "norm.layer_norm"},
    {"elementwise.softmax_sg", "elementwise.softmax"},
    {"linear.skinny_sg", "linear.skinny"},
    {"linear.skinny_h", "linear.skinny"},
    {"linear.skinny_t", "linear.gemm"},
    {"linear.skinny_idot", "linear.skinny_int"},
    {"linear.skinny_int", "linear.skinny"},
    {"norm.layer_norm_rows", "norm.layer_norm"},
    {"norm.layer_norm", "norm.layer_norm_rows"},
    {"attention.fused", "attention.gemm"},
    {"attention.gemm", "attention.fused"},
    {"movement.permute_tiled", "movement.copy_strided"},
    {"linear.skinny", "linear.gemm"},
};

/* Kernels that ops use without an alternative, by the variants that test
 * them: a failed one makes clf__get_kernel refuse the kernel. */
static const struct { const char *prefix, *family, *kernel; } gated[] = {
    {"movement.copy_strided", "movement", "copy_strided"},
    {"elementwise.softmax", "elementwise", "softmax_rows"},
    {"elementwise.bias_act", "elementwise", "bias_act"},
    {"elementwise.add", "elementwise", "add_bcast"},
    {"embed.gather", "embed", "gather_rows"},
    {"linear.gemm", "linear", "expand_t"},
};

/* Whether name is the variant `prefix` or one of its shapes ("linear.skinny
 * f32 SPLIT=1 ROWS=16"): the prefix ends at the end or at a space, so that
 * "elementwise.softmax" does not take in "elementwise.softmax_sg". */
static int has_prefix(const char *s, const char *prefix) {
  const size_t n = strlen(prefix);
  return strncmp(s, prefix, n) == 0 && (s[n] == '\0' || s[n] == ' ');
}

const char *clf__variant_fallback(const char *name) {
  for (size_t i = 0; i < CLF__ARRAY_LEN(fallbacks); i++)
    if (has_prefix(name, fallbacks[i].prefix)) return fallbacks[i].fallback;
  return "";
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const verdict *)a)->name, ((const verdict *)b)->name);
}

/* vs->v is kept sorted by name: a lookup is a binary search, and a file of
 * many entries loads in n log n (it was quadratic: 35,000 entries added
 * 2 s to every context). */
static verdict *find(const struct clf__verdicts *vs, const char *name) {
  verdict key;
  snprintf(key.name, sizeof key.name, "%s", name);
  return vs->n ? bsearch(&key, vs->v, vs->n, sizeof *vs->v, by_name) : NULL;
}

static verdict *find_failed(const struct clf__verdicts *vs, const char *name) {
  verdict *v = find(vs, name);
  return v && !v->passed ? v : NULL;
}

/* Room for one more verdict; 0 when out of memory. */
static int reserve(struct clf__verdicts *vs) {
  if (vs->n < vs->cap) return 1;
  size_t cap = vs->cap ? vs->cap * 2 : 32;
  verdict *nv = realloc(vs->v, cap * sizeof(*nv));
  if (!nv) return 0;
  vs->v = nv;
  vs->cap = cap;
  return 1;
}

static void set(struct clf__verdicts *vs, verdict *v, int passed, double error, double tol) {
  if (v->passed != passed) v->logged = 0;
  if (v->passed && !passed) vs->failed++;
  if (!v->passed && passed) vs->failed--;
  v->passed = passed;
  v->error = error;
  v->tolerance = tol;
}

/* Adds or replaces the verdict of `name`, in name order; 0 when out of
 * memory. */
static int record(struct clf__verdicts *vs, const char *name, int passed, double error, double tol) {
  verdict *v = find(vs, name);
  if (!v) {
    if (!reserve(vs)) return 0;
    size_t at = 0;
    while (at < vs->n && strcmp(vs->v[at].name, name) < 0) at++;
    memmove(&vs->v[at + 1], &vs->v[at], (vs->n - at) * sizeof *vs->v);
    vs->n++;
    v = &vs->v[at];
    memset(v, 0, sizeof(*v));
    snprintf(v->name, sizeof(v->name), "%s", name);
    v->passed = 1;
  }
  set(vs, v, passed, error, tol);
  return 1;
}

/* ---- verdicts as ops see them ---- */

clf_status clf__variant_pick(clf_context *ctx, const char *op, const char *preferred, const char *other,
                             int *use_preferred) {
  struct clf__verdicts *vs = ctx->verdicts;
  *use_preferred = 1;
  if (!vs) return CLF_OK;
  if (vs->validating) {
    if (other && vs->pinned && strcmp(vs->pinned, other) == 0) *use_preferred = 0;
    return CLF_OK;
  }
  verdict *p = vs->failed ? find_failed(vs, preferred) : NULL;
  if (!p) return CLF_OK;
  if (other && !find_failed(vs, other)) {
    *use_preferred = 0;
    if (!p->logged)
      clf__log(ctx, "%s: kernel variant \"%s\" failed self-validation on this device (max error %.2g, tolerance "
               "%.2g); using %s", op, preferred, p->error, p->tolerance, other);
    p->logged = 1;
    return CLF_OK;
  }
  if (vs->ignore) return CLF_OK;
  return clf__fail(ctx, CLF_E_UNSUPPORTED,
                   "%s: kernel variant \"%s\"%s%s failed self-validation on this device (max error %.2g, tolerance "
                   "%.2g): not used, as wrong output is worse than none (see `clformer probe`; "
                   "CLFORMER_VALIDATION=ignore uses it anyway)",
                   op, preferred, other ? " and its alternative " : "", other ? other : "", p->error, p->tolerance);
}

int clf__variant_validating(const clf_context *ctx, const char *name) {
  const struct clf__verdicts *vs = ctx->verdicts;
  return vs && vs->validating && vs->pinned && strcmp(vs->pinned, name) == 0;
}

int clf__validating(const clf_context *ctx) { return ctx->verdicts && ctx->verdicts->validating; }

int clf__variant_passed(const clf_context *ctx, const char *name) {
  const struct clf__verdicts *vs = ctx->verdicts;
  if (!vs || !vs->n) return vs && vs->validating && clf__variant_validating(ctx, name);
  if (vs->validating) return clf__variant_validating(ctx, name);
  const verdict *v = find(vs, name);
  return v && v->passed;
}

int clf__variants_failed(const clf_context *ctx) {
  const struct clf__verdicts *vs = ctx->verdicts;
  return vs && (vs->failed || vs->validating);
}

clf_status clf__variant_gate(clf_context *ctx, const char *family, const char *kernel) {
  const struct clf__verdicts *vs = ctx->verdicts;
  if (!vs || !vs->failed || vs->validating || vs->ignore) return CLF_OK;
  for (size_t g = 0; g < CLF__ARRAY_LEN(gated); g++) {
    if (strcmp(gated[g].kernel, kernel) != 0 || strcmp(gated[g].family, family) != 0) continue;
    for (size_t i = 0; i < vs->n; i++) {
      const verdict *v = &vs->v[i];
      if (!v->passed && has_prefix(v->name, gated[g].prefix))
        return clf__fail(ctx, CLF_E_UNSUPPORTED,
                         "kernel %s: its variant \"%s\" failed self-validation on this device (max error %.2g, "
                         "tolerance %.2g) and has no alternative: not used, as wrong output is worse than none "
                         "(see `clformer probe`; CLFORMER_VALIDATION=ignore uses it anyway)",
                         kernel, v->name, v->error, v->tolerance);
    }
  }
  return CLF_OK;
}

int clf_variant_disabled(const clf_context *ctx, const char *name) {
  if (!ctx || !ctx->verdicts || !name) return 0;
  return find_failed(ctx->verdicts, name) != NULL;
}

/* ---- the verdict file ---- */

/* Hash of what a verdict depends on: device, driver, library, CLBlast, the
 * device options and the kernel sources this context builds (its
 * kernel_dir's when it has one). */
static uint64_t verdict_key(clf_context *ctx) {
  const clf_device_desc *d = &ctx->dev;
  char head[1536];
  int n = snprintf(head, sizeof(head),
                   "clformer %s verdicts\nplatform: %s\ndevice: %s\nvendor: %s\ndriver: %s\ndevice-version: %s\n"
                   "options: %.500s\nclblast: %d.%d.%d\n",
                   CLF_VERSION_STRING, d->platform_name, d->device_name, d->vendor, d->driver_version,
                   d->device_version, ctx->base_options, CLBLAST_VERSION_MAJOR, CLBLAST_VERSION_MINOR,
                   CLBLAST_VERSION_PATCH);
  uint64_t h = clf__hash64(head, n > 0 ? strlen(head) : 0, 0);
  const int had_error = ctx->err.status != CLF_OK;
  for (size_t i = 0; i < clf__kernel_source_count; i++) {
    const char *fam = clf__kernel_sources[i].family;
    char *src = NULL;
    size_t len = 0;
    h = clf__hash64(fam, strlen(fam), h);
    if (clf__load_source(ctx, fam, &src, &len) == CLF_OK) h = clf__hash64(src, len, h);
    else h ^= 0x9e3779b97f4a7c15ull; /* unreadable: still a distinct key */
    free(src);
  }
  if (!had_error) clf_clear_error(ctx);
  return h;
}

static void verdict_path(const clf_context *ctx, char *buf, size_t len) {
  snprintf(buf, len, "%s/verdicts/%016llx.txt", ctx->cache_dir, (unsigned long long)ctx->verdicts->key);
}

/* Parses a verdict file: the format line, a device line, one line per
 * variant ("name\tpass|fail\terror\ttolerance") and "end <count>".  Returns
 * 0 (with the bad line in *line_no) when anything is off. */
static int parse_verdicts(struct clf__verdicts *vs, char *text, size_t *line_no) {
  size_t count = 0;
  *line_no = 1;
  char *save = NULL, *line = strtok_r(text, "\n", &save);
  if (!line || strcmp(line, VERDICT_FORMAT) != 0) return 0;
  *line_no = 2;
  line = strtok_r(NULL, "\n", &save);
  if (!line || strncmp(line, "device: ", 8) != 0) return 0;
  for (*line_no = 3; (line = strtok_r(NULL, "\n", &save)) != NULL; (*line_no)++) {
    if (strncmp(line, "end ", 4) == 0) {
      char *end;
      unsigned long want = strtoul(line + 4, &end, 10);
      return *end == '\0' && want == count && strtok_r(NULL, "\n", &save) == NULL;
    }
    char *f[4], *fs = NULL;
    int nf = 0;
    for (char *t = strtok_r(line, "\t", &fs); t && nf < 4; t = strtok_r(NULL, "\t", &fs)) f[nf++] = t;
    if (nf != 4 || strtok_r(NULL, "\t", &fs) || strlen(f[0]) >= sizeof(vs->v->name)) return 0;
    int passed = strcmp(f[1], "pass") == 0;
    if (!passed && strcmp(f[1], "fail") != 0) return 0;
    char *e1, *e2;
    double err = strtod(f[2], &e1), tol = strtod(f[3], &e2);
    if (*e1 || *e2 || e1 == f[2] || e2 == f[3] || !(tol >= 0)) return 0;
    if (!reserve(vs)) return 0;
    verdict *v = &vs->v[vs->n++];
    memset(v, 0, sizeof(*v));
    snprintf(v->name, sizeof(v->name), "%s", f[0]);
    v->passed = 1;
    set(vs, v, passed, err, tol);
    count++;
  }
  return 0; /* no "end" line: truncated */
}

/* The parsed entries into name order; 0 when a name appears twice. */
static int sort_verdicts(struct clf__verdicts *vs) {
  if (vs->n) qsort(vs->v, vs->n, sizeof *vs->v, by_name);
  for (size_t i = 1; i < vs->n; i++)
    if (strcmp(vs->v[i - 1].name, vs->v[i].name) == 0) return 0;
  return 1;
}

static void forget_all(struct clf__verdicts *vs) {
  vs->n = 0;
  vs->failed = 0;
}

void clf__verdicts_load(clf_context *ctx) {
  struct clf__verdicts *vs = calloc(1, sizeof(*vs));
  if (!vs) return; /* no verdicts: every variant is used, as before validation */
  ctx->verdicts = vs;
  vs->ignore = ctx->env.validation_ignore;
  vs->key = verdict_key(ctx);
  if (!ctx->cache_dir) return;
  char path[4200];
  verdict_path(ctx, path, sizeof(path));
  if (!clf__is_file(path)) return; /* never validated here */
  size_t n = 0, line_no = 0;
  char why[1024];
  char *text = clf__read_cached_file(ctx, "self-validation verdicts", path, VERDICT_MAX_BYTES, &n, why, sizeof(why));
  if (!text) {
    clf__log(ctx, "ignoring %s; `clformer probe` rewrites them", why);
    return;
  }
  if (strlen(text) == n && parse_verdicts(vs, text, &line_no) && sort_verdicts(vs)) {
    free(text);
    return;
  }
  forget_all(vs);
  clf__log(ctx, "ignoring the malformed self-validation verdicts in %s (line %zu); `clformer probe` rewrites them",
           path, line_no);
  free(text);
}

void clf__verdicts_free(clf_context *ctx) {
  if (!ctx->verdicts) return;
  free(ctx->verdicts->v);
  free(ctx->verdicts);
  ctx->verdicts = NULL;
}

void clf__verdicts_store(clf_context *ctx) {
  const struct clf__verdicts *vs = ctx->verdicts;
  char dir[4200], path[4200], tmp[4300];
  if (!vs || !ctx->cache_dir) return;
  snprintf(dir, sizeof(dir), "%s/verdicts", ctx->cache_dir);
  mkdir(dir, 0700);
  verdict_path(ctx, path, sizeof(path));
  snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) return;
  const clf_device_desc *d = &ctx->dev;
  int ok = fprintf(f, "%s\ndevice: %s / %s / driver %s\n", VERDICT_FORMAT, d->platform_name, d->device_name,
                   d->driver_version) > 0;
  for (size_t i = 0; ok && i < vs->n; i++)
    ok = fprintf(f, "%s\t%s\t%.6e\t%.6e\n", vs->v[i].name, vs->v[i].passed ? "pass" : "fail", vs->v[i].error,
                 vs->v[i].tolerance) > 0;
  ok = ok && fprintf(f, "end %zu\n", vs->n) > 0;
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp, path) != 0) remove(tmp);
}

/* ---- a validation run (device/validate.c drives it) ---- */

clf_status clf__validation_begin(clf_context *ctx, const char *op) {
  if (!ctx->verdicts) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "%s: the context has no verdict table", op);
  ctx->verdicts->validating = 1;
  ctx->verdicts->pinned = NULL;
  clf__plans_forget(ctx); /* plans made under the verdicts; a run asks them afresh */
  return CLF_OK;
}

void clf__validation_pin(clf_context *ctx, const char *variant) { ctx->verdicts->pinned = variant; }

void clf__validation_end(clf_context *ctx) {
  ctx->verdicts->validating = 0;
  ctx->verdicts->pinned = NULL;
  clf__plans_forget(ctx);
}

int clf__verdict_record(clf_context *ctx, const char *name, int passed, double error, double tolerance) {
  clf__plans_forget(ctx);
  return record(ctx->verdicts, name, passed, error, tolerance);
}
