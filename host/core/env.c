/* env.c - the environment overrides a context honours, read once when it
 * is made (and again only by clf__env_reload, for tests), each checked
 * there: a value that names no known kernel, shape or setting is refused
 * with CLF_E_INVALID_ARG naming the variable and its value.  The ops read
 * ctx->env, never the environment.  This file is the library's only
 * reader of the environment (docs/environment.md lists what it reads).
 */
#include "core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static clf_status refuse(const char *var, const char *val, const char *want) {
  return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_context_create: %s=\"%.40s\" is not %s", var, val, want);
}

/* "0" or "1" into *out; unset or empty: -1. */
static clf_status read_bool(const char *var, int *out) {
  const char *v = getenv(var);
  *out = -1;
  if (!v || !*v) return CLF_OK;
  if (strcmp(v, "0") && strcmp(v, "1")) return refuse(var, v, "0 or 1");
  *out = v[0] == '1';
  return CLF_OK;
}

/* "AxB", powers of two, into out; unset or empty: {0, 0}. */
static clf_status read_group(const char *var, unsigned out[2]) {
  const char *v = getenv(var);
  unsigned a, b;
  char end;
  out[0] = out[1] = 0;
  if (!v || !*v) return CLF_OK;
  if (sscanf(v, "%ux%u%c", &a, &b, &end) != 2 || !a || !b || (a & (a - 1)) || (b & (b - 1)))
    return refuse(var, v, "a work-group AxB of powers of two");
  out[0] = a, out[1] = b;
  return CLF_OK;
}

/* One of `words` into *out (its index); unset or empty: -1. */
static clf_status read_word(const char *var, const char *const *words, int n, const char *want, int *out) {
  const char *v = getenv(var);
  *out = -1;
  if (!v || !*v) return CLF_OK;
  for (int i = 0; i < n; i++)
    if (!strcmp(v, words[i])) return *out = i, CLF_OK;
  return refuse(var, v, want);
}

/* A number in [lo, hi] into *out; unset or empty: 0. */
static clf_status read_count(const char *var, unsigned lo, unsigned hi, const char *want, unsigned *out) {
  const char *v = getenv(var);
  unsigned n;
  char end;
  *out = 0;
  if (!v || !*v) return CLF_OK;
  if (sscanf(v, "%u%c", &n, &end) != 1 || n < lo || n > hi) return refuse(var, v, want);
  *out = n;
  return CLF_OK;
}

clf_status clf__env_read(clf__env *e) {
  static const char *const fused[] = {"tiled", "cpu"};
  static const char *const clocks[] = {"events", "wall"};
  unsigned wg;
  clf_status st;
  memset(e, 0, sizeof *e);
  if ((st = read_group("CLFORMER_SKINNY", e->skinny)) != CLF_OK) return st;
  if ((st = read_group("CLFORMER_SKINNY_T", e->skinny_t)) != CLF_OK) return st;
  if ((st = read_count("CLFORMER_SKINNY_ROWS", 8, 4096, "a row count from 8 to 4096", &e->skinny_rows)) != CLF_OK)
    return st;
  if ((st = read_bool("CLFORMER_SKINNY_TILE", &e->skinny_tile)) != CLF_OK) return st;
  if ((st = read_bool("CLFORMER_SKINNY_ACT_PASS", &e->skinny_act_pass)) != CLF_OK) return st;
  if ((st = read_bool("CLFORMER_SKINNY_PAIR", &e->skinny_pair)) != CLF_OK) return st;
  static const char *const ints[] = {"0", "1", "dot"};
  if ((st = read_word("CLFORMER_SKINNY_INT", ints, 3, "0, 1 or dot", &e->skinny_int)) != CLF_OK) return st;
  if ((st = read_bool("CLFORMER_ROWS16", &e->rows16)) != CLF_OK) return st;
  if ((st = read_word("CLFORMER_ATTN_FUSED", fused, 2, "a fused-attention shape (cpu, tiled)", &e->attn_cpu)) !=
      CLF_OK)
    return st;
  if ((st = read_bool("CLFORMER_ATTN_SHORT", &e->attn_short)) != CLF_OK) return st;
  if ((st = read_count("CLFORMER_ATTN_WG", 16, 64, "a work-group of 16, 32 or 64", &wg)) != CLF_OK) return st;
  if (wg && wg != 16 && wg != 32 && wg != 64)
    return refuse("CLFORMER_ATTN_WG", getenv("CLFORMER_ATTN_WG"), "16, 32 or 64");
  e->attn_wg = wg;
  if ((st = read_word("CLFORMER_PROFILE_CLOCK", clocks, 2, "a clock (events, wall)", &e->profile_clock)) != CLF_OK)
    return st;
  /* as before: any other value of these two is the default */
  const char *v = getenv("CLFORMER_VALIDATION");
  e->validation_ignore = v && !strcmp(v, "ignore");
  v = getenv("CLFORMER_TUNING");
  e->tuning = !v ? -1 : !strcmp(v, "off") ? 0 : !strcmp(v, "user") ? 1 : -1;
  e->log_level = clf__env_log_level();
  return CLF_OK;
}

void clf__env_create_read(clf__env_create *c) {
  c->device = getenv("CLFORMER_DEVICE");
  c->device_class = getenv("CLFORMER_DEVICE_CLASS");
  c->limits = getenv("CLFORMER_LIMITS");
  c->cache_dir = getenv("CLFORMER_CACHE_DIR");
  c->xdg_cache_home = getenv("XDG_CACHE_HOME");
  c->home = getenv("HOME");
  c->kernel_dir = getenv("CLFORMER_KERNEL_DIR");
  c->cache_binaries = getenv("CLFORMER_CACHE_BINARIES");
}

const char *clf__env_driver_cpu_arch(void) { return getenv("CL_CONFIG_CPU_TARGET_ARCH"); }

int clf__env_log_level(void) {
  const char *v = getenv("CLFORMER_LOG");
  return !v ? 0 : !strcmp(v, "off") ? -1 : !strcmp(v, "info") ? 1 : 0;
}

clf_status clf__env_reload(clf_context *ctx) {
  clf__env e;
  clf_status st = clf__env_read(&e);
  if (st != CLF_OK) return st;
  ctx->env = e;
  clf__plans_forget(ctx);
  return CLF_OK;
}
