/* fuzz_util.c - the temporary directory, input files and fixture copies
 * that the libFuzzer targets share (fuzz_util.h). */
#define _XOPEN_SOURCE 700
#include "fuzz_util.h"

#include <clformer.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CLF_FUZZ_FIXTURES
#define CLF_FUZZ_FIXTURES "tests/fixtures"
#endif

static char dir[256];
static char path[1024];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(p);
}

static void rm_dir(void) {
  if (dir[0]) nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void die(const char *what, const char *p) {
  fprintf(stderr, "fuzz harness: %s %s: %s\n", what, p, strerror(errno));
  abort();
}

const char *fz_dir(void) {
  if (dir[0]) return dir;
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/clf-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) die("cannot make", dir);
  atexit(rm_dir);
  return dir;
}

const char *fz_path(const char *name) {
  snprintf(path, sizeof path, "%s/%s", fz_dir(), name);
  return path;
}

void fz_mkdir(const char *name) {
  const char *p = fz_path(name);
  if (mkdir(p, 0700) != 0 && errno != EEXIST) die("cannot make", p);
}

void fz_write(const char *name, const void *data, size_t size) {
  const char *p = fz_path(name);
  FILE *f = fopen(p, "wb");
  if (!f) die("cannot write", p);
  const int short_write = size && fwrite(data, 1, size, f) != size;
  if (fclose(f) != 0 || short_write) die("cannot write", p);
}

void fz_copy_fixture(const char *rel, const char *name) {
  const char *root = getenv("CLF_FIXTURES");
  char src[1024];
  snprintf(src, sizeof src, "%s/%s", root && *root ? root : CLF_FUZZ_FIXTURES, rel);
  FILE *f = fopen(src, "rb");
  if (!f) die("cannot read the fixture", src);
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap && !(buf = realloc(buf, cap = cap ? 2 * cap : 65536))) die("out of memory copying", src);
    size_t got = fread(buf + n, 1, cap - n, f);
    if (got == 0) break;
    n += got;
  }
  fclose(f);
  fz_write(name, buf, n);
  free(buf);
}

void fz_remove(const char *name) { remove(fz_path(name)); }

char *fz_strndup(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s) abort();
  if (size) memcpy(s, data, size);
  s[size] = '\0';
  return s;
}

clf_context *fz_context(void) {
  static clf_context *ctx;
  if (ctx) return ctx;
  fz_mkdir("cache");
  setenv("CLFORMER_CACHE_DIR", fz_path("cache"), 1);
  setenv("CLFORMER_LOG", "off", 1);
  if (clf_context_create(NULL, &ctx) != CLF_OK) {
    fprintf(stderr, "fuzz harness: no context: %s\n", clf_last_error(NULL));
    abort();
  }
  return ctx;
}

void fz_note(const char *what, const char *message) {
  static int verbose = -1;
  if (verbose < 0) verbose = getenv("CLF_FUZZ_VERBOSE") != NULL;
  if (verbose) fprintf(stderr, "fuzz: %s: %s\n", what, message);
}
