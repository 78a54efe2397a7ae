/* icd.c - the OpenCL implementations this machine has, each an ICD library
 * to be loaded alone: those registered with the ICD loader (OCL_ICD_VENDORS,
 * else /etc/OpenCL/vendors), those tools/install-opencl.sh put in clformer's
 * prefix (rusticl, Intel's CPU runtime), and Oclgrind when it is installed
 * but registered nowhere.  `clformer matrix` runs each column in processes
 * whose OCL_ICD_VENDORS names one implementation's ICD file (two LLVM builds
 * in one process, Mesa's Clover beside Oclgrind say, can corrupt the heap);
 * `clformer CMD --device NAME` loads only the implementation NAME names. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

extern char **environ;

int clf_cli_contains_nocase(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay; hay++) {
    size_t i = 0;
    while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
    if (i == n) return 1;
  }
  return n == 0;
}

/* The library an ICD file names: its first line, trimmed. */
static int read_icd(const char *path, char *lib, size_t len) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[PATH_MAX];
  int ok = fgets(line, sizeof line, f) != NULL;
  fclose(f);
  if (!ok) return -1;
  char *s = line, *e;
  while (isspace((unsigned char)*s)) s++;
  e = s + strlen(s);
  while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
  if (!*s) return -1;
  snprintf(lib, len, "%s", s);
  return 0;
}

static const char *base_name(const char *path) {
  const char *b = strrchr(path, '/');
  return b ? b + 1 : path;
}

/* Whether the list already has the library (by file name: /usr/lib/x/libA.so
 * and libA.so are the same implementation). */
static int have_lib(const clf_cli_impl *v, int n, const char *lib) {
  for (int i = 0; i < n; i++)
    if (!strcmp(base_name(v[i].lib), base_name(lib))) return 1;
  return 0;
}

/* What an implementation's processes need in their environment, unless the
 * user set the variable: PoCL's second device, rusticl's software device. */
static void add_env(clf_cli_impl *im) {
  im->n_env = 0;
  if (clf_cli_contains_nocase(im->lib, "pocl")) im->env[im->n_env++] = "POCL_DEVICES=pthread basic";
  if (clf_cli_contains_nocase(im->lib, "rusticl")) im->env[im->n_env++] = "RUSTICL_ENABLE=llvmpipe";
}

static int add_icd(clf_cli_impl *v, int n, int max, const char *icd, int is_default) {
  char lib[PATH_MAX];
  if (n >= max || read_icd(icd, lib, sizeof lib) != 0 || have_lib(v, n, lib)) return n;
  clf_cli_impl *im = &v[n];
  memset(im, 0, sizeof *im);
  snprintf(im->icd, sizeof im->icd, "%s", icd);
  snprintf(im->lib, sizeof im->lib, "%s", lib);
  snprintf(im->name, sizeof im->name, "%s", base_name(icd));
  char *dot = strstr(im->name, ".icd");
  if (dot) *dot = 0;
  im->is_default = is_default;
  add_env(im);
  return n + 1;
}

static int add_icd_dir(clf_cli_impl *v, int n, int max, const char *dir, int is_default) {
  char pat[PATH_MAX];
  glob_t g;
  snprintf(pat, sizeof pat, "%s/*.icd", dir);
  if (glob(pat, 0, NULL, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; i++) n = add_icd(v, n, max, g.gl_pathv[i], is_default);
  globfree(&g);
  return n;
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

void clf_cli_opencl_prefix(char *buf, size_t len) {
  const char *p = getenv("CLFORMER_OPENCL_PREFIX"), *x = getenv("XDG_DATA_HOME"), *h = getenv("HOME");
  if (p && *p) snprintf(buf, len, "%s", p);
  else if (x && *x) snprintf(buf, len, "%s/clformer/opencl", x);
  else snprintf(buf, len, "%s/.local/share/clformer/opencl", h && *h ? h : ".");
}

int clf_cli_find_impls(clf_cli_impl *v, int max, char *tmp_dir, size_t len) {
  int n = 0;
  tmp_dir[0] = 0;
  const char *user = getenv("OCL_ICD_VENDORS");
  struct stat sb;
  if (user && *user && stat(user, &sb) == 0 && S_ISREG(sb.st_mode)) n = add_icd(v, n, max, user, 1);
  else n = add_icd_dir(v, n, max, user && *user ? user : "/etc/OpenCL/vendors", 1);
  char dir[PATH_MAX];
  clf_cli_opencl_prefix(dir, sizeof dir - 16);
  strcat(dir, "/vendors");
  n = add_icd_dir(v, n, max, dir, 0);
  char lib[PATH_MAX];
  if (n < max && find_oclgrind_icd_lib(lib, sizeof lib) && !have_lib(v, n, lib)) {
    /* Registered nowhere: an ICD file of our own, in a directory to remove. */
    const char *tmp = getenv("TMPDIR");
    snprintf(tmp_dir, len, "%s/clformer-icd-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    char icd[PATH_MAX + 16];
    FILE *f = NULL;
    if (mkdtemp(tmp_dir)) {
      snprintf(icd, sizeof icd, "%s/oclgrind.icd", tmp_dir);
      f = fopen(icd, "w");
    }
    if (!f || fprintf(f, "%s\n", lib) < 0 || fclose(f) != 0) {
      fprintf(stderr, "clformer: cannot write an ICD file for Oclgrind under %s: %s\n", tmp_dir, strerror(errno));
      clf_cli_remove_icd_dir(tmp_dir);
      tmp_dir[0] = 0;
    } else {
      n = add_icd(v, n, max, icd, 0);
    }
  }
  return n;
}

int clf_cli_impl_env(const clf_cli_impl *im, char *vendors, size_t vlen, char **set, int max) {
  int k = 0;
  snprintf(vendors, vlen, "OCL_ICD_VENDORS=%s", im->icd);
  if (k < max) set[k++] = vendors;
  for (int i = 0; i < im->n_env && k < max; i++) {
    size_t kl = strcspn(im->env[i], "=");
    char key[64];
    snprintf(key, sizeof key, "%.*s", (int)kl, im->env[i]);
    if (!getenv(key)) set[k++] = (char *)im->env[i];
  }
  return k;
}

static char route_tmp[PATH_MAX];
static void remove_route_tmp(void) { clf_cli_remove_icd_dir(route_tmp); }

void clf_cli_route_device(const char *selector) {
  if (!selector || !*selector || getenv("OCL_ICD_VENDORS")) return;
  int p, d, used = 0;
  if (sscanf(selector, "%d:%d%n", &p, &d, &used) == 2 && selector[used] == 0) return;
  clf_cli_impl v[16];
  int n = clf_cli_find_impls(v, 16, route_tmp, sizeof route_tmp), pick = -1;
  /* Only an implementation the loader would not load by default (those
   * are there anyway), and only when the selector names one of them. */
  for (int i = 0; i < n; i++)
    if (!v[i].is_default && (clf_cli_contains_nocase(v[i].name, selector) ||
                             clf_cli_contains_nocase(base_name(v[i].lib), selector)))
      pick = pick == -1 ? i : -2;
  if (pick >= 0) {
    /* Read by the ICD loader at the first OpenCL call. */
    setenv("OCL_ICD_VENDORS", v[pick].icd, 1);
    for (int i = 0; i < v[pick].n_env; i++) {
      size_t kl = strcspn(v[pick].env[i], "=");
      char key[64];
      snprintf(key, sizeof key, "%.*s", (int)kl, v[pick].env[i]);
      setenv(key, v[pick].env[i] + kl + 1, 0);
    }
  }
  /* Oclgrind's ICD file, when made, lives as long as this process. */
  if (pick >= 0 && route_tmp[0] && !strncmp(v[pick].icd, route_tmp, strlen(route_tmp))) atexit(remove_route_tmp);
  else remove_route_tmp();
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

/* The environment of a child: ours, less the keys in `set`, plus `set`. */
char **clf_cli_child_env(char *const *set, int n_set) {
  size_t n = 0;
  while (environ[n]) n++;
  char **env = malloc((n + n_set + 1) * sizeof *env);
  if (!env) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    int keep = 1;
    for (int j = 0; j < n_set && keep; j++) {
      size_t kl = strcspn(set[j], "=");
      keep = !(strncmp(environ[i], set[j], kl) == 0 && environ[i][kl] == '=');
    }
    if (keep) env[k++] = environ[i];
  }
  for (int j = 0; j < n_set; j++)
    if (strchr(set[j], '=')) env[k++] = set[j];
  env[k] = NULL;
  return env;
}

int clf_cli_start(char *const *argv, char **env, const char *out, long timeout_s, clf_cli_child *ch) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  memset(ch, 0, sizeof *ch);
  ch->timeout_s = timeout_s;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  ch->t0 = clf_cli_now_ms() / 1e3;
  int err = posix_spawn(&ch->pid, argv[0], &fa, &attr, argv, env);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (err) {
    errno = err;
    return -1;
  }
  return 0;
}

int clf_cli_poll(clf_cli_child *ch) {
  int st = 0;
  pid_t r = waitpid(ch->pid, &st, WNOHANG);
  if (r == 0 || (r < 0 && errno == EINTR)) {
    if (!ch->ex.timed_out && clf_cli_now_ms() / 1e3 - ch->t0 > ch->timeout_s) {
      kill(-ch->pid, SIGKILL);
      kill(ch->pid, SIGKILL);
      ch->ex.timed_out = 1;
    }
    return 0;
  }
  ch->ex.seconds = clf_cli_now_ms() / 1e3 - ch->t0;
  if (r == ch->pid && WIFSIGNALED(st)) ch->ex.signal = WTERMSIG(st);
  else ch->ex.code = r == ch->pid && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return 1;
}

int clf_cli_spawn(char *const *argv, char **env, const char *out, long timeout_s, clf_cli_exit *ex) {
  clf_cli_child ch;
  if (clf_cli_start(argv, env, out, timeout_s, &ch) != 0) return -1;
  while (!clf_cli_poll(&ch)) nanosleep(&(struct timespec){0, 20000000}, NULL);
  *ex = ch.ex;
  return 0;
}

const char *clf_cli_signal_name(int sig) {
  switch (sig) {
  case SIGSEGV: return "SIGSEGV";
  case SIGABRT: return "SIGABRT";
  case SIGBUS: return "SIGBUS";
  case SIGFPE: return "SIGFPE";
  case SIGILL: return "SIGILL";
  case SIGKILL: return "SIGKILL";
  case SIGTERM: return "SIGTERM";
  default: return "signal";
  }
}
