/* file.h - whole files into memory, the one way host/ reads them.
 *
 * A file is opened without blocking, checked to be a regular file, sized
 * with fstat and read up to a cap, so a FIFO, a device or a file that grows
 * while it is read cannot hang the caller or exhaust memory.
 */
#ifndef CLF_BASE_FILE_H
#define CLF_BASE_FILE_H

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads all of `path` into *out (malloc'd, NUL-terminated after *len bytes;
 * len may be NULL).  `what` names the file's role in messages ("config",
 * "kernel source").  Errors, recorded on ctx (may be NULL): CLF_E_NOT_FOUND
 * when it does not exist (*out NULL); CLF_E_IO when it is not a regular
 * file, cannot be read, or is larger than `max_bytes`; CLF_E_OUT_OF_MEMORY. */
clf_status clf__read_file(clf_context *ctx, const char *what, const char *path, size_t max_bytes, char **out,
                          size_t *len);

/* Opens `path` read-only for pread (O_CLOEXEC; O_NONBLOCK, so a FIFO is
 * refused rather than waited on) and checks that it is a regular file:
 * *fd (to close), and its size in *size.  Errors, recorded on this
 * thread (clf_last_error(NULL)), naming the path: CLF_E_NOT_FOUND when it
 * does not exist, CLF_E_IO otherwise (*fd is then -1). */
clf_status clf__open_regular(const char *path, int *fd, unsigned long long *size);

/* pread of `len` bytes at `off` into dst, on through EINTR and short reads:
 * 0 when all came, 1 when the file ended first (*got says how many came),
 * -1 with errno set. */
int clf__pread_full(int fd, void *dst, size_t len, unsigned long long off, size_t *got);

/* 1 when `path` names a regular file (following links), else 0. */
int clf__is_file(const char *path);

/* 1 when something is at `path`, even what cannot be opened (a symbolic
 * link loop, a directory without permission): the caller then opens it and
 * reports why it failed, rather than calling it missing. */
int clf__path_present(const char *path);

#ifdef __cplusplus
}
#endif

#endif /* CLF_BASE_FILE_H */
