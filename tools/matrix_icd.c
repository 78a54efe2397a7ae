/* matrix_icd.c - for `clformer matrix` (cmd_matrix.c): every device the
 * machine has made visible to the ICD loader, PoCL's basic device and
 * Oclgrind included, through a temporary OCL_ICD_VENDORS directory. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

int clf_cli_contains_nocase(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay; hay++) {
    size_t i = 0;
    while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
    if (i == n) return 1;
  }
  return n == 0;
}

static int file_contains(const char *path, const char *needle) {
  char buf[1024];
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  return clf_cli_contains_nocase(buf, needle);
}

/* An .icd file is one line naming a library: copied rather than linked, so
 * that a relative OCL_ICD_VENDORS still resolves. */
static int copy_file(const char *from, const char *to) {
  char buf[4096];
  FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
  size_t n = in ? fread(buf, 1, sizeof buf, in) : 0;
  int ok = out && fwrite(buf, 1, n, out) == n;
  if (out && fclose(out) != 0) ok = 0;
  if (in) fclose(in);
  return ok ? 0 : -1;
}

static const char *find_oclgrind_icd_lib(char *buf, size_t len) {
  static const char *const patterns[] = {"/usr/lib/oclgrind/liboclgrind-rt-icd.so",
                                         "/usr/lib*/oclgrind/liboclgrind-rt-icd.so",
                                         "/usr/lib/*/oclgrind/liboclgrind-rt-icd.so",
                                         "/usr/local/lib*/oclgrind/liboclgrind-rt-icd.so",
                                         "/usr/local/lib*/liboclgrind-rt-icd.so"};
  for (size_t i = 0; i < sizeof patterns / sizeof *patterns; i++) {
    glob_t g;
    int found = glob(patterns[i], 0, NULL, &g) == 0 && g.gl_pathc > 0;
    if (found) snprintf(buf, len, "%s", g.gl_pathv[0]);
    globfree(&g);
    if (found) return buf;
  }
  return NULL;
}

/* Sets POCL_DEVICES="pthread basic" unless the user chose, and when Oclgrind
 * is installed but no registered ICD names it, points OCL_ICD_VENDORS at a
 * temporary directory holding copies of the registered *.icd files plus an
 * oclgrind.icd.  Must run before the first OpenCL call (the ICD loader reads
 * the vendors once).  Writes the directory to remove into icd_dir ("" when
 * none) and returns 0, or -1 with a message. */
int clf_cli_expose_devices(char *icd_dir, size_t len) {
  icd_dir[0] = 0;
  if (!getenv("POCL_DEVICES")) setenv("POCL_DEVICES", "pthread basic", 1);
  char lib[PATH_MAX];
  if (!find_oclgrind_icd_lib(lib, sizeof lib)) return 0;
  const char *user = getenv("OCL_ICD_VENDORS");
  struct stat sb;
  int user_file = user && stat(user, &sb) == 0 && S_ISREG(sb.st_mode);
  const char *src = user && !user_file ? user : "/etc/OpenCL/vendors";
  char path[PATH_MAX];
  glob_t g = {0};
  if (user_file) {
    if (file_contains(user, "oclgrind")) return 0;
  } else {
    snprintf(path, sizeof path, "%s/*.icd", src);
    glob(path, 0, NULL, &g);
    for (size_t i = 0; i < g.gl_pathc; i++)
      if (file_contains(g.gl_pathv[i], "oclgrind")) {
        globfree(&g);
        return 0;
      }
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(icd_dir, len, "%s/clformer-icd-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  int rc = 0;
  if (!mkdtemp(icd_dir)) {
    fprintf(stderr, "clformer: matrix: cannot create %s: %s\n", icd_dir, strerror(errno));
    icd_dir[0] = 0;
    rc = -1;
  }
  for (size_t i = 0; rc == 0 && i < (user_file ? 1 : g.gl_pathc); i++) {
    const char *icd = user_file ? user : g.gl_pathv[i];
    const char *base = strrchr(icd, '/') ? strrchr(icd, '/') + 1 : icd;
    snprintf(path, sizeof path, "%s/%s", icd_dir, base);
    rc = copy_file(icd, path);
  }
  globfree(&g);
  if (rc == 0) {
    snprintf(path, sizeof path, "%s/oclgrind.icd", icd_dir);
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%s\n", lib) < 0 || fclose(f) != 0) rc = -1;
  }
  if (rc == 0) setenv("OCL_ICD_VENDORS", icd_dir, 1);
  else if (icd_dir[0]) fprintf(stderr, "clformer: matrix: cannot set up %s for Oclgrind\n", icd_dir);
  return rc;
}

void clf_cli_remove_icd_dir(const char *dir) {
  if (!dir[0]) return;
  DIR *d = opendir(dir);
  struct dirent *e;
  char p[PATH_MAX];
  while (d && (e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      unlink(p);
    }
  if (d) closedir(d);
  rmdir(dir);
}

