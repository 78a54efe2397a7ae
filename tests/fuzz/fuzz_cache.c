/* fuzz_cache.c - libFuzzer target: the input as an entry of the program
 * binary cache (host/core/cache.c), read by clf__cache_load for the key the
 * entry's file name belongs to.  The context is a real one (PoCL), made
 * once; the entry's path is found by storing a binary under the key with
 * clf__cache_store, so the target does not restate the naming rule.
 * With CLF_FUZZ_MAKE_SEED=<file> the target copies that valid entry (magic,
 * format, key, digest: what no mutation could forge) there and exits:
 * tools/fuzz.sh seeds the corpus with it. */
#include "fuzz_util.h"

#include "core/core.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *key;
static char entry[256]; /* relative to fz_dir() */

static void find_entry(void) {
  DIR *d = opendir(fz_path("cache"));
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    if (n > 6 && strcmp(e->d_name + n - 6, ".clbin") == 0) snprintf(entry, sizeof entry, "cache/%s", e->d_name);
  }
  if (d) closedir(d);
  if (!entry[0]) {
    fprintf(stderr, "fuzz_cache: clf__cache_store wrote no entry\n");
    abort();
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  clf_context *ctx = fz_context();
  static const char src[] = "kernel void k(global float *x) { x[0] = 1.0f; }";
  static const unsigned char bin[] = "a program binary, as the driver would return it";
  if (!ctx->cache_dir || !(key = clf__cache_key(ctx, src, sizeof src - 1, "-DCLF_FUZZ")) ||
      !clf__cache_store(ctx, key, bin, sizeof bin)) {
    fprintf(stderr, "fuzz_cache: the context has no writable cache directory\n");
    abort();
  }
  find_entry();
  const char *seed = getenv("CLF_FUZZ_MAKE_SEED");
  if (seed && *seed) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", fz_path(entry), seed);
    exit(system(cmd) == 0 ? 0 : 1);
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_write(entry, data, size);
  size_t n = 0;
  int rejected = -1;
  unsigned char *b = clf__cache_load(fz_context(), key, &n, &rejected);
  fz_note("cache entry", b ? "accepted" : "rejected");
  if (b) {
    /* accepted: a binary of n bytes that the entry held */
    if (rejected || n == 0 || n > size) abort();
    volatile unsigned char sink = 0;
    for (size_t k = 0; k < n; k++) sink ^= b[k];
    (void)sink;
    free(b);
  } else if (rejected != 1) {
    abort(); /* the entry is there: absent is not an answer */
  }
  return 0;
}
