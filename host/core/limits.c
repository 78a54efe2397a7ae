/* limits.c - the device class and the limits that the library's choices
 * follow, when they are not the device's own.
 *
 * clf_context_options.device_class ($CLFORMER_DEVICE_CLASS: "cpu", "gpu",
 * "accelerator") makes every host choice as on a device of that class: the
 * skinny kernels' groups, the work-group layer norm, the tuner's search,
 * the shipped GEMM profile, -DCLF_IS_CPU.  clf_context_options.limits
 * ($CLFORMER_LIMITS: "wg=128,local=16k,alloc=256m,fp16=0,subgroups=0")
 * lowers the device's limits to a smaller device's (a phone's GPU), so that
 * those choices can run on any device.  Both rewrite ctx->caps before
 * anything is built: the kernels' -D options, and so the program cache,
 * the self-validation verdicts and the tuning profile, follow them.
 */
#include "core.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *clf__bytes_str(unsigned long long bytes, char *buf, size_t len) {
  static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) {
    snprintf(buf, len, "%llu bytes", bytes);
    return buf;
  }
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024.0 && u < 4) v /= 1024.0, u++;
  if (v == (double)(unsigned long long)v) snprintf(buf, len, "%llu %s", (unsigned long long)v, units[u]);
  else snprintf(buf, len, "%.2f %s", v, units[u]);
  return buf;
}

/* ---- the device class ---- */

static const struct {
  const char *name;
  cl_device_type type;
} classes[] = {
    {"cpu", CL_DEVICE_TYPE_CPU},
    {"gpu", CL_DEVICE_TYPE_GPU},
    {"accelerator", CL_DEVICE_TYPE_ACCELERATOR},
};

const char *clf__class_name(cl_device_type t) {
  for (size_t i = 0; i < CLF__ARRAY_LEN(classes); i++)
    if (t & classes[i].type) return classes[i].name;
  return "custom";
}

/* The device's own class, as one bit (a device that reports several takes
 * the first of CPU, GPU, accelerator). */
static cl_device_type own_class(cl_device_type t) {
  for (size_t i = 0; i < CLF__ARRAY_LEN(classes); i++)
    if (t & classes[i].type) return classes[i].type;
  return CL_DEVICE_TYPE_CUSTOM;
}

static clf_status apply_class(clf_context *ctx, const char *src, const char *v) {
  clf__device_caps *c = &ctx->caps;
  c->cls = own_class(ctx->dev.type);
  if (!v || !*v) return CLF_OK;
  for (size_t i = 0; i < CLF__ARRAY_LEN(classes); i++) {
    const char *a = classes[i].name, *b = v;
    while (*a && tolower((unsigned char)*b) == *a) a++, b++;
    if (*a || *b) continue;
    c->cls = classes[i].type;
    c->class_forced = 1;
    return CLF_OK;
  }
  return clf__fail(NULL, CLF_E_INVALID_ARG,
                   "%s is \"%.64s\": not a device class (accepted: cpu, gpu, accelerator; empty: the device's own)",
                   src, v);
}

/* ---- the limits ---- */

typedef enum { L_COUNT, L_BYTES, L_FLAG } lkind;

static const struct {
  const char *key;
  unsigned bit;
  lkind kind;
  const char *what;
} keys[] = {
    {"wg", CLF__LIMIT_WG, L_COUNT, "work-items per work-group"},
    {"local", CLF__LIMIT_LOCAL, L_BYTES, "bytes of local memory"},
    {"alloc", CLF__LIMIT_ALLOC, L_BYTES, "bytes in one allocation"},
    {"fp16", CLF__LIMIT_FP16, L_FLAG, "cl_khr_fp16"},
    {"subgroups", CLF__LIMIT_SUBGROUPS, L_FLAG, "subgroups"},
};

/* A number with an optional binary suffix (k, m, g; "kib", "mb", ... too)
 * for bytes; 0 when malformed or out of range. */
static int parse_number(const char *s, size_t n, int bytes, unsigned long long *out) {
  char buf[40];
  if (n == 0 || n >= sizeof buf || !isdigit((unsigned char)s[0])) return 0;
  memcpy(buf, s, n);
  buf[n] = '\0';
  char *end;
  errno = 0;
  unsigned long long v = strtoull(buf, &end, 10);
  if (errno) return 0;
  unsigned shift = 0;
  if (bytes && *end) {
    const char u = (char)tolower((unsigned char)*end);
    shift = u == 'k' ? 10 : u == 'm' ? 20 : u == 'g' ? 30 : 0;
    if (shift) {
      end++;
      if (tolower((unsigned char)end[0]) == 'i' && tolower((unsigned char)end[1]) == 'b') end += 2;
      else if (tolower((unsigned char)end[0]) == 'b') end++;
    }
  }
  if (*end || (shift && v > (~0ull >> shift))) return 0;
  *out = v << shift;
  return 1;
}

/* Lowers one limit of c to v, or says why not (*why, for the message). */
static int lower(clf__device_caps *c, size_t key, unsigned long long v, char *why, size_t len, int *notice) {
  char a[32], b[32];
  switch (keys[key].bit) {
    case CLF__LIMIT_WG:
      if (v < 1) return snprintf(why, len, "a work-group has at least 1 work-item"), 0;
      if (v > c->max_wg)
        return snprintf(why, len, "above the device's CL_DEVICE_MAX_WORK_GROUP_SIZE (%zu)", c->max_wg), 0;
      c->max_wg = (size_t)v;
      for (int i = 0; i < 3; i++)
        if (c->max_item_sizes[i] > v) c->max_item_sizes[i] = (size_t)v;
      return 1;
    case CLF__LIMIT_LOCAL:
      if (v < 1024)
        return snprintf(why, len, "below OpenCL's smallest local memory (1 KiB, for embedded-profile devices)"), 0;
      if (v > c->local_mem)
        return snprintf(why, len, "above the device's CL_DEVICE_LOCAL_MEM_SIZE (%s)",
                        clf__bytes_str(c->local_mem, a, sizeof a)), 0;
      *notice = v < 32 * 1024;
      c->local_mem = v;
      return 1;
    case CLF__LIMIT_ALLOC:
      if (v < (1u << 20))
        return snprintf(why, len, "below OpenCL's smallest largest-allocation (1 MiB, for embedded-profile "
                        "devices)"), 0;
      if (v > c->max_alloc)
        return snprintf(why, len, "above the device's CL_DEVICE_MAX_MEM_ALLOC_SIZE (%s)",
                        clf__bytes_str(c->max_alloc, b, sizeof b)), 0;
      c->max_alloc = v;
      return 1;
    default: {
      int *flag = keys[key].bit == CLF__LIMIT_FP16 ? &c->has_fp16 : &c->has_subgroups;
      if (v > 1) return snprintf(why, len, "want 0 (off) or 1 (the device's own)"), 0;
      if (v == 1 && !*flag) return snprintf(why, len, "the device has no %s", keys[key].what), 0;
      *flag = (int)v;
      return 1;
    }
  }
}

/* Parses `text` ("key=value,...") into ctx->caps and ctx->limits (the
 * normalised text).  Errors name src, the entry and why. */
static clf_status apply_limits(clf_context *ctx, const char *src, const char *text) {
  clf__device_caps *c = &ctx->caps;
  char norm[256] = "";
  ctx->limits_src = src;
  int local_notice = 0;
  for (const char *p = text; p && *p;) {
    while (*p == ' ' || *p == ',') p++;
    if (!*p) break;
    size_t n = strcspn(p, ",");
    while (n && p[n - 1] == ' ') n--;
    const char *eq = memchr(p, '=', n);
    size_t key = CLF__ARRAY_LEN(keys);
    for (size_t i = 0; eq && i < CLF__ARRAY_LEN(keys); i++)
      if (strlen(keys[i].key) == (size_t)(eq - p) && strncmp(keys[i].key, p, (size_t)(eq - p)) == 0) key = i;
    if (key == CLF__ARRAY_LEN(keys))
      return clf__fail(NULL, CLF_E_INVALID_ARG,
                       "%s: \"%.*s\" is not a limit (accepted: wg=N work-items, local=BYTES, alloc=BYTES, fp16=0, "
                       "subgroups=0; BYTES may end in k, m or g)",
                       src, (int)(n < 64 ? n : 64), p);
    if (c->limited & keys[key].bit)
      return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: %s is given twice", src, keys[key].key);
    unsigned long long v;
    const char *val = eq + 1;
    const size_t vn = n - (size_t)(val - p);
    if (!parse_number(val, vn, keys[key].kind == L_BYTES, &v))
      return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: %s=\"%.*s\" is not %s", src, keys[key].key,
                       (int)(vn < 40 ? vn : 40), val,
                       keys[key].kind == L_BYTES   ? "a size (a number of bytes, may end in k, m or g)"
                       : keys[key].kind == L_COUNT ? "a number"
                                                   : "0 or 1");
    char why[160], what[80] = "";
    if (keys[key].kind != L_FLAG) snprintf(what, sizeof what, " (%llu %s)", v, keys[key].what);
    if (!lower(c, key, v, why, sizeof why, &local_notice))
      return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: %s=%.*s%s: %s", src, keys[key].key, (int)(vn < 40 ? vn : 40),
                       val, what, why);
    c->limited |= keys[key].bit;
    const size_t at = strlen(norm);
    snprintf(norm + at, sizeof norm - at, "%s%s=%llu", at ? "," : "", keys[key].key, v);
    p += strcspn(p, ",");
  }
  if (c->limited && !(ctx->limits = strdup(norm)))
    return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_context_create: out of host memory");
  /* Said once per process: every context of a run under the same limits
   * would repeat it. */
  static int local_noticed;
  if (local_notice && !__atomic_exchange_n(&local_noticed, 1, __ATOMIC_RELAXED)) {
    char a[32];
    clf__log(ctx, "%s: local=%s is below OpenCL's minimum for full-profile devices (32 KiB); only "
             "embedded-profile devices have so little",
             src, clf__bytes_str(c->local_mem, a, sizeof a));
  }
  return CLF_OK;
}

clf_status clf__caps_restrict(clf_context *ctx, const char *device_class, const char *limits,
                              const clf__env_create *env) {
  const char *csrc = "clf_context_options.device_class", *lsrc = "clf_context_options.limits";
  if (!device_class) device_class = env->device_class, csrc = "CLFORMER_DEVICE_CLASS";
  if (!limits) limits = env->limits, lsrc = "CLFORMER_LIMITS";
  clf_status st = apply_class(ctx, csrc, device_class);
  if (st != CLF_OK) return st;
  ctx->caps.is_cpu = ctx->caps.cls == CL_DEVICE_TYPE_CPU;
  return apply_limits(ctx, lsrc, limits);
}

const char *clf_context_device_class(const clf_context *ctx, int *overridden) {
  if (overridden) *overridden = ctx ? ctx->caps.class_forced : 0;
  return ctx ? clf__class_name(ctx->caps.cls) : NULL;
}

const char *clf_context_limits(const clf_context *ctx) {
  if (!ctx) return NULL;
  return ctx->limits ? ctx->limits : "";
}

const char *clf__alloc_limit_str(const clf_context *ctx, char *buf, size_t len) {
  char a[32];
  const int lim = (ctx->caps.limited & CLF__LIMIT_ALLOC) != 0;
  snprintf(buf, len, "%s, %s%s", clf__bytes_str(ctx->caps.max_alloc, a, sizeof a),
           lim ? ctx->limits_src : "CL_DEVICE_MAX_MEM_ALLOC_SIZE", lim ? " alloc" : "");
  return buf;
}
