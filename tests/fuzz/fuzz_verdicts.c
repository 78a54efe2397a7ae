/* fuzz_verdicts.c - libFuzzer target: the input as the self-validation
 * verdict file of the context's device (<cache>/verdicts/<key>.txt), read
 * by clf__verdicts_load (host/core/variants.c) into a real context (PoCL,
 * made once), then consulted the ways ops do (clf_variant_disabled,
 * clf__variant_pick, clf__variant_gate).  The verdicts loaded are stored
 * and loaded again: what the library writes it must read back, so the
 * second file stored must equal the first. */
#include "fuzz_util.h"

#include "core/core.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char file[256]; /* relative to fz_dir() */

/* The verdict file's name: clf__verdicts_store writes it. */
static void find_file(clf_context *ctx) {
  clf__verdict_record(ctx, "norm.layer_norm", 1, 0.0, 1e-5);
  clf__verdicts_store(ctx);
  DIR *d = opendir(fz_path("cache/verdicts"));
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL)
    if (strstr(e->d_name, ".txt")) snprintf(file, sizeof file, "cache/verdicts/%s", e->d_name);
  if (d) closedir(d);
  if (!file[0]) {
    fprintf(stderr, "fuzz_verdicts: clf__verdicts_store wrote no file\n");
    abort();
  }
}

static char *slurp(const char *rel, size_t *n) {
  FILE *f = fopen(fz_path(rel), "rb");
  if (!f) return NULL;
  char *buf = malloc(1 << 21);
  *n = buf ? fread(buf, 1, 1 << 21, f) : 0;
  fclose(f);
  return buf;
}

/* Stores what is loaded now and returns the file's bytes. */
static char *store(clf_context *ctx, size_t *n) {
  clf__verdicts_store(ctx);
  return slurp(file, n);
}

static void consult(clf_context *ctx) {
  static const char *const names[] = {"norm.layer_norm", "attention.fused", "attention.gemm",
                                      "movement.copy_strided", "linear.skinny", "x"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) (void)clf_variant_disabled(ctx, names[i]);
  int use = 0;
  (void)clf__variant_pick(ctx, "fuzz", "attention.fused", "attention.gemm", &use);
  (void)clf__variant_pick(ctx, "fuzz", "linear.skinny", NULL, &use);
  (void)clf__variant_gate(ctx, "movement", "copy_strided");
  (void)clf__variant_gate(ctx, "embed", "gather_rows");
  (void)clf__variants_failed(ctx);
  clf_clear_error(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  clf_context *ctx = fz_context();
  if (!file[0]) find_file(ctx);
  fz_write(file, data, size);
  clf__verdicts_free(ctx);
  clf__verdicts_load(ctx);
  consult(ctx);
  size_t n1 = 0, n2 = 0;
  char *first = store(ctx, &n1);
  clf__verdicts_free(ctx);
  clf__verdicts_load(ctx);
  char *second = store(ctx, &n2);
  if (!first || !second || n1 != n2 || memcmp(first, second, n1) != 0) {
    fprintf(stderr, "fuzz_verdicts: the verdicts stored do not load back as they were\n");
    abort();
  }
  free(first);
  free(second);
  return 0;
}
