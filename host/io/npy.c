/* npy.c - NumPy .npy files: model inputs and outputs of the command line and
 * of the golden tests.  Reads formats 1.0-3.0 (little-endian f32, f16, i32,
 * i64, C order) and writes what numpy.save writes. */
#include "base/checked.h"
#include "base/file.h"
#include "base/status.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The largest .npy file read: 16 GiB (an input or a golden output, never
 * weights), or half of what size_t counts where that is less. */
#define CLF__NPY_MAX_BYTES ((uint64_t)SIZE_MAX / 2 < ((uint64_t)16 << 30) ? SIZE_MAX / 2 : (size_t)((uint64_t)16 << 30))

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

static const struct {
  const char *descr;
  clf_dtype dtype;
} npy_types[] = {{"<f4", CLF_F32}, {"<f2", CLF_F16}, {"<i4", CLF_I32}, {"<i8", CLF_I64}};

/* ---- header parsing: a Python dict literal such as
 * {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } ---- */

typedef struct npy_parser {
  const char *p, *end;
} npy_parser;

static void npy_ws(npy_parser *ps) {
  while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static int npy_eat(npy_parser *ps, char c) {
  npy_ws(ps);
  if (ps->p < ps->end && *ps->p == c) {
    ps->p++;
    return 1;
  }
  return 0;
}

/* A quoted string without escapes into buf. */
static int npy_string(npy_parser *ps, char *buf, size_t cap) {
  npy_ws(ps);
  if (ps->p >= ps->end || (*ps->p != '\'' && *ps->p != '"')) return 0;
  char q = *ps->p++;
  size_t n = 0;
  while (ps->p < ps->end && *ps->p != q) {
    if (*ps->p == '\\' || n + 1 >= cap) return 0;
    buf[n++] = *ps->p++;
  }
  if (ps->p >= ps->end) return 0;
  ps->p++;
  buf[n] = '\0';
  return 1;
}

static int npy_word(npy_parser *ps, const char *w) {
  npy_ws(ps);
  size_t n = strlen(w);
  if ((size_t)(ps->end - ps->p) < n || strncmp(ps->p, w, n) != 0) return 0;
  if ((size_t)(ps->end - ps->p) > n && (isalnum((unsigned char)ps->p[n]) || ps->p[n] == '_')) return 0;
  ps->p += n;
  return 1;
}

/* A tuple of non-negative integers: (), (5,), (2, 3), with an optional
 * trailing comma (required by Python for one element, accepted here). */
static int npy_tuple(npy_parser *ps, int *ndim, size_t *shape, int max_dims) {
  if (!npy_eat(ps, '(')) return 0;
  *ndim = 0;
  for (;;) {
    if (npy_eat(ps, ')')) return 1;
    npy_ws(ps);
    if (ps->p >= ps->end || !isdigit((unsigned char)*ps->p)) return 0;
    size_t v = 0;
    while (ps->p < ps->end && isdigit((unsigned char)*ps->p)) {
      unsigned d = (unsigned)(*ps->p++ - '0');
      if (v > (SIZE_MAX - d) / 10) return 0;
      v = v * 10 + d;
    }
    if (*ndim >= max_dims) return -1;
    shape[(*ndim)++] = v;
    if (npy_eat(ps, ',')) continue;
    if (npy_eat(ps, ')')) return *ndim == 1 ? 0 : 1; /* (5) is an int, not a tuple */
    return 0;
  }
}

static void npy_set_name(clf_array *a, const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t n = strlen(base);
  if (n >= 4 && strcmp(base + n - 4, ".npy") == 0) n -= 4;
  if (n >= sizeof(a->name)) n = sizeof(a->name) - 1;
  memcpy(a->name, base, n);
  a->name[n] = '\0';
}

#define NPY_BAD(...) clf__fail(NULL, CLF_E_FORMAT, __VA_ARGS__)

/* The magic, the version and the header length: the dict is at
 * buf[*hstart, *hstart + *hlen). */
static clf_status npy_preamble(const char *path, const unsigned char *buf, size_t len, size_t *hstart,
                               size_t *hlen) {
  if (len < 10 || memcmp(buf, npy_magic, 6) != 0) return NPY_BAD("%s: not a .npy file (bad magic)", path);
  unsigned major = buf[6];
  if (major == 1) {
    *hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
    *hstart = 10;
  } else if (major == 2 || major == 3) {
    if (len < 12) return NPY_BAD("%s: truncated .npy header", path);
    *hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
    *hstart = 12;
  } else {
    return NPY_BAD("%s: unsupported .npy format version %u.%u", path, major, (unsigned)buf[7]);
  }
  if (*hlen > len - *hstart)
    return NPY_BAD("%s: .npy header of %zu bytes runs past the end of the file (truncated?)", path, *hlen);
  return CLF_OK;
}

/* One "key: value" of the dict; have[] notes the keys seen (descr,
 * fortran_order, shape), each allowed once. */
static clf_status npy_dict_item(const char *path, npy_parser *ps, int have[3], char *descr, size_t descr_cap,
                                int *fortran, clf_array *out) {
  char key[32];
  if (!npy_string(ps, key, sizeof(key)) || !npy_eat(ps, ':')) return NPY_BAD("%s: malformed .npy header", path);
  if (strcmp(key, "descr") == 0 && !have[0]) {
    if (!npy_string(ps, descr, descr_cap))
      return clf__fail(NULL, CLF_E_DTYPE, "%s: unsupported .npy descr (not a simple type string)", path);
    have[0] = 1;
  } else if (strcmp(key, "fortran_order") == 0 && !have[1]) {
    if (npy_word(ps, "True")) *fortran = 1;
    else if (!npy_word(ps, "False")) return NPY_BAD("%s: malformed .npy fortran_order", path);
    have[1] = 1;
  } else if (strcmp(key, "shape") == 0 && !have[2]) {
    int r = npy_tuple(ps, &out->ndim, out->shape, CLF_MAX_DIMS);
    if (r < 0) return NPY_BAD("%s: .npy array has more than %d dims", path, CLF_MAX_DIMS);
    if (!r) return NPY_BAD("%s: malformed .npy shape", path);
    have[2] = 1;
  } else {
    return NPY_BAD("%s: unexpected or repeated key '%s' in the .npy header", path, key);
  }
  return CLF_OK;
}

/* The header dict {'descr': ..., 'fortran_order': ..., 'shape': ...} into
 * out's dtype, ndim and shape. */
static clf_status npy_parse_dict(const char *path, const char *text, size_t n, clf_array *out) {
  npy_parser ps = {text, text + n};
  char descr[32] = "";
  int have[3] = {0, 0, 0}, fortran = 0;
  clf_status st;
  if (!npy_eat(&ps, '{')) return NPY_BAD("%s: .npy header is not a dict", path);
  while (!npy_eat(&ps, '}')) {
    if ((st = npy_dict_item(path, &ps, have, descr, sizeof(descr), &fortran, out)) != CLF_OK) return st;
    if (!npy_eat(&ps, ',')) {
      if (!npy_eat(&ps, '}')) return NPY_BAD("%s: malformed .npy header", path);
      break;
    }
  }
  npy_ws(&ps);
  if (ps.p != ps.end) return NPY_BAD("%s: malformed .npy header (text after the dict)", path);
  if (!have[0] || !have[1] || !have[2])
    return NPY_BAD("%s: .npy header lacks '%s'", path, !have[0] ? "descr" : !have[1] ? "fortran_order" : "shape");
  int found = 0;
  for (size_t i = 0; i < CLF__ARRAY_LEN(npy_types); i++)
    if (strcmp(descr, npy_types[i].descr) == 0) {
      out->dtype = npy_types[i].dtype;
      found = 1;
    }
  if (!found)
    return clf__fail(NULL, CLF_E_DTYPE, "%s: unsupported .npy dtype '%s' (supported: '<f4', '<f2', '<i4', '<i8')",
                     path, descr);
  if (fortran) return NPY_BAD("%s: fortran_order True is not supported (save a C-order array)", path);
  return CLF_OK;
}

/* The bytes of a's data by its shape and dtype; 0 when that overflows. */
static int npy_data_bytes(const clf_array *a, size_t *bytes) {
  size_t numel = 1;
  for (int i = 0; i < a->ndim; i++)
    if (!clf__mul_ok(numel, a->shape[i], &numel)) return 0;
  return clf__mul_ok(numel, clf_dtype_size(a->dtype), bytes);
}

clf_status clf_npy_read(const char *path, clf_array *out) {
  if (!out) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_npy_read: out is NULL");
  memset(out, 0, sizeof(*out));
  if (!path) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_npy_read: path is NULL");
  char *text = NULL;
  size_t len = 0, hstart = 0, hlen = 0, bytes = 0;
  clf_status st = clf__read_file(NULL, "clf_npy_read", path, CLF__NPY_MAX_BYTES, &text, &len);
  if (st != CLF_OK) return st;
  const unsigned char *buf = (const unsigned char *)text;
  st = npy_preamble(path, buf, len, &hstart, &hlen);
  if (st == CLF_OK) st = npy_parse_dict(path, text + hstart, hlen, out);
  if (st == CLF_OK && !npy_data_bytes(out, &bytes)) st = NPY_BAD("%s: .npy shape overflows", path);
  size_t have = len - hstart - hlen;
  if (st == CLF_OK && have < bytes)
    st = NPY_BAD("%s: .npy data truncated: %zu bytes, expected %zu", path, have, bytes);
  else if (st == CLF_OK && have > bytes)
    st = NPY_BAD("%s: %zu extra bytes after the .npy data (expected %zu)", path, have - bytes, bytes);
  if (st == CLF_OK && !(out->data = malloc(bytes ? bytes : 1)))
    st = clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory for %zu bytes", path, bytes);
  if (st == CLF_OK) {
    memcpy(out->data, buf + hstart + hlen, bytes);
    npy_set_name(out, path);
  }
  free(text);
  return st;
}

/* head then data into a file of our own beside path, renamed over it: a
 * failed write leaves whatever was at path as it was. */
static clf_status npy_write_file(const char *path, const void *head, size_t hn, const void *data, size_t bytes) {
  char tmp[4200];
  if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >= (int)sizeof tmp)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_npy_write: path is too long: %.200s", path);
  FILE *f = fopen(tmp, "wb");
  if (!f) return clf__fail(NULL, CLF_E_IO, "clf_npy_write: cannot create %s: %s", path, strerror(errno));
  int ok = fwrite(head, 1, hn, f) == hn;
  if (ok && bytes) ok = fwrite(data, 1, bytes, f) == bytes;
  int e = errno;
  if (fclose(f) != 0 && ok) ok = 0, e = errno;
  if (ok && rename(tmp, path) != 0) ok = 0, e = errno;
  if (!ok) {
    remove(tmp);
    return clf__fail(NULL, CLF_E_IO, "clf_npy_write: writing %s failed: %s", path, strerror(e));
  }
  return CLF_OK;
}

clf_status clf_npy_write(const char *path, const clf_array *a) {
  if (!path) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_npy_write: path is NULL");
  if (!a) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_npy_write: array is NULL (writing %s)", path);
  const char *descr = NULL;
  for (size_t i = 0; i < CLF__ARRAY_LEN(npy_types); i++)
    if (a->dtype == npy_types[i].dtype) descr = npy_types[i].descr;
  if (!descr) return clf__fail(NULL, CLF_E_DTYPE, "clf_npy_write: %s: unknown dtype %d", path, (int)a->dtype);
  if (a->ndim < 0 || a->ndim > CLF_MAX_DIMS)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_npy_write: %s: ndim is %d, must be 0..%d", path, a->ndim,
                     CLF_MAX_DIMS);
  size_t bytes;
  if (!npy_data_bytes(a, &bytes))
    return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_npy_write: %s: shape overflows", path);
  if (bytes && !a->data) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_npy_write: %s: data is NULL", path);

  char dict[256];
  int n = snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int i = 0; i < a->ndim; i++)
    n += snprintf(dict + n, sizeof(dict) - (size_t)n, "%s%zu", i ? ", " : "", a->shape[i]);
  n += snprintf(dict + n, sizeof(dict) - (size_t)n, "%s), }", a->ndim == 1 ? "," : "");
  /* Version 1.0 (2-byte length); magic + version + length + header is padded
   * with spaces and a newline to a multiple of 64, as numpy does. */
  size_t pre = 10, total = pre + (size_t)n + 1;
  total = (total + 63) / 64 * 64;
  size_t hlen = total - pre;
  unsigned char head[320];
  memcpy(head, npy_magic, 6);
  head[6] = 1;
  head[7] = 0;
  head[8] = (unsigned char)(hlen & 0xFF);
  head[9] = (unsigned char)(hlen >> 8);
  memcpy(head + pre, dict, (size_t)n);
  memset(head + pre + n, ' ', hlen - (size_t)n - 1);
  head[total - 1] = '\n';

  return npy_write_file(path, head, total, a->data, bytes);
}
