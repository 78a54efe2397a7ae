/* file.c - whole files into memory, the one way host/ reads them (file.h). */
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int clf__is_file(const char *path) {
  struct stat st;
  return path && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int clf__path_present(const char *path) {
  struct stat st;
  return path && (stat(path, &st) == 0 || (errno != ENOENT && errno != ENOTDIR));
}

clf_status clf__open_regular(const char *path, int *fd, unsigned long long *size) {
  /* O_NONBLOCK: opening a FIFO must not wait for a writer. */
  *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (*fd < 0)
    return clf__fail(NULL, errno == ENOENT ? CLF_E_NOT_FOUND : CLF_E_IO, "%s: cannot open: %s", path,
                     strerror(errno));
  struct stat sb;
  clf_status st = CLF_OK;
  if (fstat(*fd, &sb) != 0) st = clf__fail(NULL, CLF_E_IO, "%s: cannot stat: %s", path, strerror(errno));
  else if (!S_ISREG(sb.st_mode)) st = clf__fail(NULL, CLF_E_IO, "%s: not a regular file", path);
  if (st != CLF_OK) {
    close(*fd);
    *fd = -1;
    return st;
  }
  *size = (unsigned long long)sb.st_size;
  return CLF_OK;
}

int clf__pread_full(int fd, void *dst, size_t len, unsigned long long off, size_t *got) {
  unsigned char *p = dst;
  size_t done = 0;
  while (done < len) {
    const size_t want = len - done < ((size_t)1 << 30) ? len - done : (size_t)1 << 30;
    const ssize_t n = pread(fd, p + done, want, (off_t)(off + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    done += (size_t)n;
  }
  *got = done;
  return done < len;
}

/* Reads exactly n bytes (fewer only at end of file: *got says how many). */
static int read_all(int fd, char *buf, size_t n, size_t *got) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = read(fd, buf + done, n - done);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    done += (size_t)r;
  }
  *got = done;
  return 0;
}

clf_status clf__read_file(clf_context *ctx, const char *what, const char *path, size_t max_bytes, char **out,
                          size_t *len) {
  *out = NULL;
  if (len) *len = 0;
  /* O_NONBLOCK: opening a FIFO must not wait for a writer. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return clf__fail(ctx, errno == ENOENT ? CLF_E_NOT_FOUND : CLF_E_IO, "%s: cannot open %s: %s", what, path,
                     strerror(errno));
  struct stat st;
  clf_status status = CLF_OK;
  char *buf = NULL;
  size_t got = 0;
  if (fstat(fd, &st) != 0) {
    status = clf__fail(ctx, CLF_E_IO, "%s: cannot stat %s: %s", what, path, strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    status = clf__fail(ctx, CLF_E_IO, "%s: %s is not a regular file", what, path);
  } else if ((unsigned long long)st.st_size > max_bytes) {
    status = clf__fail(ctx, CLF_E_IO, "%s: %s has %lld bytes, more than the %zu allowed", what, path,
                       (long long)st.st_size, max_bytes);
  } else if (!(buf = malloc((size_t)st.st_size + 1))) {
    status = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory for %s (%lld bytes)", what, path,
                       (long long)st.st_size);
  } else if (read_all(fd, buf, (size_t)st.st_size, &got) != 0) {
    status = clf__fail(ctx, CLF_E_IO, "%s: cannot read %s: %s", what, path, strerror(errno));
  }
  close(fd);
  if (status != CLF_OK) {
    free(buf);
    return status;
  }
  buf[got] = '\0'; /* a file that shrank meanwhile gives what was there */
  *out = buf;
  if (len) *len = got;
  return CLF_OK;
}
