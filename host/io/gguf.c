/* gguf.c - a strict reader of GGUF, llama.cpp's model file: header,
 * metadata and tensor table read with pread through a small window and
 * validated on open, with ggml's own reader's rules (ggml/src/gguf.cpp) and
 * the checks it leaves to its users: every tensor's data aligned, inside
 * the file and clear of the others.  Nothing is mapped; tensor bytes are
 * copied out with pread (clf_gguf_read), which reports a file that shrank
 * since it was opened as an error.  Little-endian files, versions 2 and 3.
 */
#include "gguf_types.h"

#include "base/file.h"
#include "base/status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
  GG_ARRAY = CLF_GGUF_ARRAY,
  GG_NTYPES = 13,
  GG_MAX_DIMS = 4,       /* GGML_MAX_DIMS */
  GG_MAX_NAME = 64,      /* GGML_MAX_NAME: a name is shorter */
  GG_MAX_KEY = 65535,    /* the format's key limit */
  GG_WINDOW = 1 << 16,   /* bytes read ahead while parsing */
  GG_ALIGN_DEFAULT = 32, /* without general.alignment */
};

/* Metadata value sizes by type (0: string and array, sized by content). */
static const unsigned gg_size[GG_NTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *const gg_type_names[GG_NTYPES] = {"u8",  "i8",     "u16",   "i16", "u32", "i32", "f32",
                                                     "bool", "string", "array", "u64", "i64", "f64"};

const char *clf__gguf_value_type_name(unsigned t) { return t < GG_NTYPES ? gg_type_names[t] : "unknown"; }

typedef struct gg_kv {
  char *key;
  uint32_t type, elem; /* elem: an array's element type, else type */
  uint64_t count;      /* an array's elements, else 1 */
  unsigned char *raw;  /* numbers: count x gg_size[elem] bytes, little-endian */
  char *blob;          /* strings: each NUL-terminated, back to back */
  uint64_t *at;        /* strings: count + 1 offsets into blob */
} gg_kv;

typedef struct gg_tensor {
  char *name;
  uint32_t type;
  int ndim;
  uint64_t ne[GG_MAX_DIMS]; /* innermost first, as stored */
  uint64_t offset, bytes;   /* offset: from the data section's start */
} gg_tensor;

struct clf_gguf {
  char *path;
  int fd;
  uint64_t size; /* of the file when opened */
  uint32_t version;
  uint64_t alignment, data_start;
  gg_kv *kv;
  size_t n_kv;
  gg_tensor *t;
  size_t n_t;
};

/* The parser's cursor: the file position and a window of bytes read ahead. */
typedef struct gg_cur {
  clf_gguf *g;
  uint64_t pos;
  unsigned char *win;
  uint64_t win_at;
  size_t win_len;
} gg_cur;

#define GG_BAD(g, ...) gg_bad((g)->path, __VA_ARGS__)
static clf_status gg_bad(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static clf_status gg_bad(const char *path, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return clf__fail(NULL, CLF_E_FORMAT, "%s: %s", path, msg);
}

/* pread of len bytes at off: 0 when all came, 1 at the end of the file,
 * -1 with errno on an error. */
static int gg_pread(int fd, void *dst, size_t len, uint64_t off) {
  size_t got;
  return clf__pread_full(fd, dst, len, off, &got);
}

static clf_status gg_read_failed(const clf_gguf *g, const char *what, int r, uint64_t off) {
  if (r > 0)
    return clf__fail(NULL, CLF_E_IO, "%s: %s: the file ends before byte %llu: it changed (shrank) since it was opened",
                     g->path, what, (unsigned long long)off);
  return clf__fail(NULL, CLF_E_IO, "%s: %s: read failed: %s", g->path, what, strerror(errno));
}

/* The next n bytes into dst (NULL: skipped), named `what` in errors: a
 * read past the end of the file is a truncated file. */
static clf_status gg_take(gg_cur *c, void *dst, uint64_t n, const char *what) {
  clf_gguf *g = c->g;
  if (n > g->size - c->pos)
    return GG_BAD(g, "truncated: %s at byte %llu needs %llu bytes, the file has %llu", what,
                  (unsigned long long)c->pos, (unsigned long long)n, (unsigned long long)(g->size - c->pos));
  unsigned char *out = dst;
  while (n > 0) {
    if (c->pos >= c->win_at + c->win_len || c->pos < c->win_at) { /* refill the window at pos */
      const uint64_t left = g->size - c->pos;
      const size_t len = left < GG_WINDOW ? (size_t)left : GG_WINDOW;
      const int r = gg_pread(g->fd, c->win, len, c->pos);
      if (r != 0) return gg_read_failed(g, what, r, c->pos + len);
      c->win_at = c->pos, c->win_len = len;
    }
    const uint64_t in = c->win_at + c->win_len - c->pos;
    const size_t k = (size_t)(n < in ? n : in);
    if (out) memcpy(out, c->win + (c->pos - c->win_at), k), out += k;
    c->pos += k, n -= k;
  }
  return CLF_OK;
}

static uint64_t gg_le(const unsigned char *p, unsigned size) {
  uint64_t v = 0;
  for (unsigned i = size; i-- > 0;) v = v << 8 | p[i];
  return v;
}

static clf_status gg_u32(gg_cur *c, uint32_t *v, const char *what) {
  unsigned char b[4];
  clf_status st = gg_take(c, b, 4, what);
  *v = (uint32_t)gg_le(b, 4);
  return st;
}

static clf_status gg_u64(gg_cur *c, uint64_t *v, const char *what) {
  unsigned char b[8];
  clf_status st = gg_take(c, b, 8, what);
  *v = gg_le(b, 8);
  return st;
}

/* A string's length, checked against the file and `max` (0: none). */
static clf_status gg_strlen(gg_cur *c, uint64_t *len, uint64_t max, const char *what) {
  clf_status st = gg_u64(c, len, what);
  if (st != CLF_OK) return st;
  if (*len > c->g->size - c->pos)
    return GG_BAD(c->g, "truncated: %s at byte %llu is %llu bytes long, past the end of the file", what,
                  (unsigned long long)(c->pos - 8), (unsigned long long)*len);
  if (max && *len > max)
    return GG_BAD(c->g, "%s at byte %llu is %llu bytes long, more than %llu", what, (unsigned long long)(c->pos - 8),
                  (unsigned long long)*len, (unsigned long long)max);
  return CLF_OK;
}

/* A name (key or tensor name): malloc'd, NUL-terminated, without NULs. */
static clf_status gg_name(gg_cur *c, char **out, uint64_t max, const char *what) {
  uint64_t len;
  clf_status st = gg_strlen(c, &len, max, what);
  if (st != CLF_OK) return st;
  const uint64_t at = c->pos;
  if (len == 0) return GG_BAD(c->g, "%s at byte %llu is empty", what, (unsigned long long)(at - 8));
  char *s = malloc((size_t)len + 1);
  if (!s) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory for %s", c->g->path, what);
  if ((st = gg_take(c, s, len, what)) != CLF_OK) return free(s), st;
  s[len] = '\0';
  if (strlen(s) != len) {
    free(s);
    return GG_BAD(c->g, "%s at byte %llu holds a NUL byte", what, (unsigned long long)at);
  }
  *out = s;
  return CLF_OK;
}

/* count strings into kv->blob and kv->at. */
static clf_status gg_strings(gg_cur *c, gg_kv *kv) {
  /* Each string costs at least its 8-byte length: a count the file cannot
   * hold is refused before anything is allocated for it. */
  if (kv->count > (c->g->size - c->pos) / 8)
    return GG_BAD(c->g, "truncated: \"%s\" has %llu strings, more than the rest of the file can hold", kv->key,
                  (unsigned long long)kv->count);
  kv->at = malloc(((size_t)kv->count + 1) * sizeof *kv->at);
  size_t cap = 64, used = 0;
  kv->blob = malloc(cap);
  if (!kv->at || !kv->blob) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", c->g->path);
  for (uint64_t i = 0; i < kv->count; i++) {
    uint64_t len;
    clf_status st = gg_strlen(c, &len, 0, "a string value");
    if (st != CLF_OK) return st;
    if (cap - used < len + 1) {
      while (cap - used < len + 1) cap *= 2;
      char *b = realloc(kv->blob, cap);
      if (!b) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", c->g->path);
      kv->blob = b;
    }
    if ((st = gg_take(c, kv->blob + used, len, "a string value")) != CLF_OK) return st;
    kv->at[i] = used;
    used += (size_t)len;
    kv->blob[used++] = '\0';
  }
  kv->at[kv->count] = used;
  return CLF_OK;
}

/* One metadata pair's type and value, after its key. */
static clf_status gg_value(gg_cur *c, gg_kv *kv) {
  clf_gguf *g = c->g;
  clf_status st = gg_u32(c, &kv->type, "a value type");
  if (st != CLF_OK) return st;
  kv->elem = kv->type, kv->count = 1;
  if (kv->type == GG_ARRAY) {
    if ((st = gg_u32(c, &kv->elem, "an array's type")) != CLF_OK ||
        (st = gg_u64(c, &kv->count, "an array's length")) != CLF_OK)
      return st;
    if (kv->elem == GG_ARRAY) return GG_BAD(g, "\"%s\" is an array of arrays, which GGUF readers refuse", kv->key);
  }
  if (kv->elem >= GG_NTYPES) return GG_BAD(g, "\"%s\" has value type %u, not a GGUF type", kv->key, kv->elem);
  if (kv->elem == CLF_GGUF_STRING) return gg_strings(c, kv);
  const unsigned size = gg_size[kv->elem];
  if (kv->count > (g->size - c->pos) / size)
    return GG_BAD(g, "truncated: \"%s\" has %llu values of %u bytes, past the end of the file", kv->key,
                  (unsigned long long)kv->count, size);
  const size_t bytes = (size_t)kv->count * size;
  if (!(kv->raw = malloc(bytes ? bytes : 1)))
    return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory for \"%s\"", g->path, kv->key);
  return gg_take(c, kv->raw, bytes, kv->key);
}

static clf_status gg_header(gg_cur *c, uint64_t *n_t, uint64_t *n_kv) {
  clf_gguf *g = c->g;
  unsigned char magic[4];
  clf_status st = gg_take(c, magic, 4, "the magic");
  if (st != CLF_OK) return st;
  if (memcmp(magic, "GGUF", 4) != 0) return GG_BAD(g, "not a GGUF file: it does not start with \"GGUF\"");
  if ((st = gg_u32(c, &g->version, "the version")) != CLF_OK) return st;
  if (g->version != 0 && (g->version & 0xffffu) == 0)
    return clf__fail(NULL, CLF_E_UNSUPPORTED, "%s: GGUF version %u reads as a big-endian file, which clformer does "
                     "not read", g->path, g->version);
  if (g->version < 2 || g->version > 3)
    return clf__fail(NULL, CLF_E_UNSUPPORTED, "%s: GGUF version %u; clformer reads versions 2 and 3", g->path,
                     g->version);
  if ((st = gg_u64(c, n_t, "the tensor count")) != CLF_OK || (st = gg_u64(c, n_kv, "the metadata count")) != CLF_OK)
    return st;
  /* A pair takes at least 8 + 1 + 4 bytes, a tensor 8 + 1 + 4 + 4 + 8. */
  if (*n_kv > (g->size - c->pos) / 13 || *n_t > (g->size - c->pos) / 25)
    return GG_BAD(g, "truncated: %llu tensors and %llu metadata pairs cannot fit in the file's %llu bytes",
                  (unsigned long long)*n_t, (unsigned long long)*n_kv, (unsigned long long)g->size);
  return CLF_OK;
}

/* Grows *p (*cap elements of `size`) to twice its room, the new part
 * zeroed: an array sized as entries are read, not by the count a file
 * claims.  0 out of memory (*p unchanged). */
static int gg_grow(void **p, size_t *cap, size_t size) {
  const size_t n = *cap ? 2 * *cap : 16;
  unsigned char *q = realloc(*p, n * size);
  if (!q) return 0;
  memset(q + *cap * size, 0, (n - *cap) * size);
  *p = q, *cap = n;
  return 1;
}

static int gg_cmp_keys(const void *a, const void *b) {
  return strcmp(((const gg_kv *)a)->key, ((const gg_kv *)b)->key);
}

static clf_status gg_metadata(gg_cur *c, uint64_t n) {
  clf_gguf *g = c->g;
  size_t cap = 0;
  for (uint64_t i = 0; i < n; i++) {
    if (g->n_kv == cap && !gg_grow((void **)&g->kv, &cap, sizeof *g->kv))
      return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", g->path);
    gg_kv *kv = &g->kv[g->n_kv++];
    clf_status st = gg_name(c, &kv->key, GG_MAX_KEY, "a metadata key");
    if (st == CLF_OK) st = gg_value(c, kv);
    if (st != CLF_OK) return st;
  }
  /* Duplicates, through a sorted copy of the keys (the file's order stays). */
  if (g->n_kv < 2) return CLF_OK;
  gg_kv *sorted = malloc(g->n_kv * sizeof *sorted);
  if (!sorted) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", g->path);
  memcpy(sorted, g->kv, g->n_kv * sizeof *sorted);
  qsort(sorted, g->n_kv, sizeof *sorted, gg_cmp_keys);
  for (size_t i = 1; i < g->n_kv; i++)
    if (strcmp(sorted[i - 1].key, sorted[i].key) == 0) {
      clf_status st = GG_BAD(g, "the metadata key \"%s\" appears twice", sorted[i].key);
      free(sorted);
      return st;
    }
  free(sorted);
  return CLF_OK;
}

long clf_gguf_find(const clf_gguf *g, const char *key) {
  if (!g || !key) return -1;
  for (size_t i = 0; i < g->n_kv; i++)
    if (strcmp(g->kv[i].key, key) == 0) return (long)i;
  return -1;
}

static clf_status gg_alignment(clf_gguf *g) {
  const long i = clf_gguf_find(g, "general.alignment");
  g->alignment = GG_ALIGN_DEFAULT;
  if (i < 0) return CLF_OK;
  const gg_kv *kv = &g->kv[i];
  if (kv->type != CLF_GGUF_U32)
    return GG_BAD(g, "general.alignment is a %s, not a u32", gg_type_names[kv->type]);
  g->alignment = gg_le(kv->raw, 4);
  if (g->alignment == 0 || (g->alignment & (g->alignment - 1)) != 0)
    return GG_BAD(g, "general.alignment is %llu, not a power of two", (unsigned long long)g->alignment);
  return CLF_OK;
}

/* One tensor's shape, type and size. */
static clf_status gg_tensor_shape(gg_cur *c, gg_tensor *t) {
  clf_gguf *g = c->g;
  uint32_t nd;
  clf_status st = gg_u32(c, &nd, "a tensor's dimension count");
  if (st != CLF_OK) return st;
  if (nd > GG_MAX_DIMS) return GG_BAD(g, "tensor \"%s\" has %u dimensions, more than %d", t->name, nd, GG_MAX_DIMS);
  t->ndim = (int)nd;
  uint64_t n = 1;
  int overflow = 0, empty = 0;
  for (int d = 0; d < GG_MAX_DIMS; d++) {
    t->ne[d] = 1;
    if (d < t->ndim && (st = gg_u64(c, &t->ne[d], "a tensor's dimension")) != CLF_OK) return st;
    if (t->ne[d] > (uint64_t)INT64_MAX) return GG_BAD(g, "tensor \"%s\": dimension %d is negative", t->name, d);
    if (t->ne[d] == 0) empty = 1;
    else if (n > (uint64_t)INT64_MAX / t->ne[d]) overflow = 1;
    else n *= t->ne[d];
  }
  if (overflow && !empty) return GG_BAD(g, "tensor \"%s\": its element count overflows", t->name);
  if (empty) n = 0;
  if ((st = gg_u32(c, &t->type, "a tensor's type")) != CLF_OK) return st;
  const clf__ggml_type *ty = clf__ggml_type_of(t->type);
  if (!ty)
    return clf__fail(NULL, CLF_E_UNSUPPORTED, "%s: tensor \"%s\" has ggml type %u, which clformer does not know",
                     g->path, t->name, t->type);
  const unsigned block = ty->block, bytes = ty->bytes;
  if (!block)
    return clf__fail(NULL, CLF_E_UNSUPPORTED, "%s: tensor \"%s\" has type %s, which clformer does not read",
                     g->path, t->name, ty->name);
  if (t->ne[0] % block)
    return GG_BAD(g, "tensor \"%s\": %llu elements a row is not a multiple of %s's block of %u", t->name,
                  (unsigned long long)t->ne[0], ty->name, block);
  if (n / block > UINT64_MAX / bytes) return GG_BAD(g, "tensor \"%s\": its size in bytes overflows", t->name);
  t->bytes = n / block * bytes;
  return gg_u64(c, &t->offset, "a tensor's offset");
}

static int gg_cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static clf_status gg_tensors(gg_cur *c, uint64_t n) {
  clf_gguf *g = c->g;
  size_t cap = 0;
  for (uint64_t i = 0; i < n; i++) {
    if (g->n_t == cap && !gg_grow((void **)&g->t, &cap, sizeof *g->t))
      return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", g->path);
    gg_tensor *t = &g->t[g->n_t++];
    clf_status st = gg_name(c, &t->name, GG_MAX_NAME - 1, "a tensor name");
    if (st == CLF_OK) st = gg_tensor_shape(c, t);
    if (st != CLF_OK) return st;
  }
  char **names = malloc((g->n_t ? g->n_t : 1) * sizeof *names);
  if (!names) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", g->path);
  for (size_t i = 0; i < g->n_t; i++) names[i] = g->t[i].name;
  qsort(names, g->n_t, sizeof *names, gg_cmp_names);
  clf_status st = CLF_OK;
  for (size_t i = 1; i < g->n_t && st == CLF_OK; i++)
    if (strcmp(names[i - 1], names[i]) == 0) st = GG_BAD(g, "the tensor name \"%s\" appears twice", names[i]);
  free(names);
  return st;
}

static int gg_cmp_offsets(const void *a, const void *b) {
  const gg_tensor *x = *(const gg_tensor *const *)a, *y = *(const gg_tensor *const *)b;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The data section after the tensor table (aligned): every tensor's bytes
 * aligned, inside the file, and clear of the others. */
static clf_status gg_layout(clf_gguf *g, uint64_t end_of_table) {
  const uint64_t a = g->alignment;
  g->data_start = end_of_table % a ? end_of_table + (a - end_of_table % a) : end_of_table;
  if (g->n_t && g->data_start > g->size)
    return GG_BAD(g, "truncated: the data section would start at byte %llu, past the end of the file",
                  (unsigned long long)g->data_start);
  const uint64_t room = g->n_t ? g->size - g->data_start : 0;
  const gg_tensor **by = malloc((g->n_t ? g->n_t : 1) * sizeof *by);
  if (!by) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", g->path);
  clf_status st = CLF_OK;
  for (size_t i = 0; i < g->n_t && st == CLF_OK; i++) {
    const gg_tensor *t = by[i] = &g->t[i];
    if (t->offset % a)
      st = GG_BAD(g, "tensor \"%s\": its data at offset %llu is not aligned to %llu bytes", t->name,
                  (unsigned long long)t->offset, (unsigned long long)a);
    else if (t->offset > room || t->bytes > room - t->offset)
      st = GG_BAD(g, "truncated: tensor \"%s\" (%llu bytes at offset %llu of the data) runs past the end of the "
                  "file", t->name, (unsigned long long)t->bytes, (unsigned long long)t->offset);
  }
  if (st == CLF_OK) qsort(by, g->n_t, sizeof *by, gg_cmp_offsets);
  for (size_t i = 1; i < g->n_t && st == CLF_OK; i++)
    if (by[i - 1]->offset + by[i - 1]->bytes > by[i]->offset)
      st = GG_BAD(g, "tensors \"%s\" and \"%s\" overlap in the data section", by[i - 1]->name, by[i]->name);
  free(by);
  return st;
}

void clf_gguf_close(clf_gguf *g) {
  if (!g) return;
  for (size_t i = 0; i < g->n_kv; i++) free(g->kv[i].key), free(g->kv[i].raw), free(g->kv[i].blob), free(g->kv[i].at);
  for (size_t i = 0; i < g->n_t; i++) free(g->t[i].name);
  free(g->kv);
  free(g->t);
  if (g->fd >= 0) close(g->fd);
  free(g->path);
  free(g);
}

static clf_status gg_file(clf_gguf *g, const char *path) {
  unsigned long long size;
  const clf_status st = clf__open_regular(path, &g->fd, &size);
  g->size = size;
  return st;
}

clf_status clf_gguf_open(const char *path, clf_gguf **out) {
  if (!out) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_gguf_open: out is NULL");
  *out = NULL;
  if (!path) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_gguf_open: path is NULL");
  clf_gguf *g = calloc(1, sizeof *g);
  gg_cur c = {g, 0, malloc(GG_WINDOW), 0, 0};
  if (!g || !c.win || !(g->path = strdup(path))) {
    free(c.win);
    if (g) free(g->path), free(g);
    return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", path);
  }
  g->fd = -1;
  uint64_t n_t = 0, n_kv = 0;
  clf_status st = gg_file(g, path);
  if (st == CLF_OK) st = gg_header(&c, &n_t, &n_kv);
  if (st == CLF_OK) st = gg_metadata(&c, n_kv);
  if (st == CLF_OK) st = gg_alignment(g);
  if (st == CLF_OK) st = gg_tensors(&c, n_t);
  if (st == CLF_OK) st = gg_layout(g, c.pos);
  free(c.win);
  if (st != CLF_OK) {
    clf_gguf_close(g);
    return st;
  }
  *out = g;
  return CLF_OK;
}

unsigned clf_gguf_version(const clf_gguf *g) { return g ? g->version : 0; }

size_t clf_gguf_kv_count(const clf_gguf *g) { return g ? g->n_kv : 0; }

clf_status clf_gguf_kv_at(const clf_gguf *g, size_t i, clf_gguf_kv *out) {
  if (!g || !out) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_gguf_kv_at: NULL argument");
  if (i >= g->n_kv)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_gguf_kv_at: index %zu, but %s has %zu metadata pairs", i,
                     g->path, g->n_kv);
  const gg_kv *kv = &g->kv[i];
  *out = (clf_gguf_kv){kv->key, (clf_gguf_type)kv->type, (clf_gguf_type)kv->elem, kv->count};
  return CLF_OK;
}

/* Element j of pair i, checked: the pair and the element exist, and hold
 * numbers (numeric) or strings (!numeric). */
static clf_status gg_elem(const clf_gguf *g, size_t i, uint64_t j, const char *op, int numeric, const gg_kv **kv) {
  if (!g) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: NULL file", op);
  if (i >= g->n_kv)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: index %zu, but %s has %zu metadata pairs", op, i, g->path,
                     g->n_kv);
  *kv = &g->kv[i];
  if (j >= (*kv)->count)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: \"%s\" has %llu values, not %llu", op, (*kv)->key,
                     (unsigned long long)(*kv)->count, (unsigned long long)j + 1);
  if (numeric != ((*kv)->elem != CLF_GGUF_STRING))
    return clf__fail(NULL, CLF_E_DTYPE, "%s: \"%s\" holds %s%s values", op, (*kv)->key,
                     (*kv)->type == GG_ARRAY ? "an array of " : "", gg_type_names[(*kv)->elem]);
  return CLF_OK;
}

clf_status clf_gguf_get_int(const clf_gguf *g, size_t i, uint64_t j, int64_t *out) {
  static const char op[] = "clf_gguf_get_int";
  const gg_kv *kv;
  clf_status st = gg_elem(g, i, j, op, 1, &kv);
  if (st != CLF_OK) return st;
  if (!out) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: out is NULL", op);
  const uint32_t e = kv->elem;
  if (e == CLF_GGUF_F32 || e == CLF_GGUF_F64)
    return clf__fail(NULL, CLF_E_DTYPE, "%s: \"%s\" holds %s values, not integers", op, kv->key, gg_type_names[e]);
  const unsigned size = gg_size[e];
  const uint64_t v = gg_le(kv->raw + j * size, size);
  const int is_signed = e == CLF_GGUF_I8 || e == CLF_GGUF_I16 || e == CLF_GGUF_I32 || e == CLF_GGUF_I64;
  if (e == CLF_GGUF_BOOL) *out = v != 0;
  else if (is_signed && size < 8 && (v >> (8 * size - 1)) & 1) *out = (int64_t)(v | ~0ull << (8 * size));
  else if (!is_signed && v > (uint64_t)INT64_MAX)
    return clf__fail(NULL, CLF_E_DTYPE, "%s: \"%s\" is %llu, past the range of a signed 64-bit integer", op,
                     kv->key, (unsigned long long)v);
  else *out = (int64_t)v;
  return CLF_OK;
}

clf_status clf_gguf_get_float(const clf_gguf *g, size_t i, uint64_t j, double *out) {
  static const char op[] = "clf_gguf_get_float";
  const gg_kv *kv;
  clf_status st = gg_elem(g, i, j, op, 1, &kv);
  if (st != CLF_OK) return st;
  if (!out) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: out is NULL", op);
  if (kv->elem == CLF_GGUF_F32 || kv->elem == CLF_GGUF_F64) {
    const uint64_t v = gg_le(kv->raw + j * gg_size[kv->elem], gg_size[kv->elem]);
    if (kv->elem == CLF_GGUF_F64) {
      double d;
      memcpy(&d, &v, 8);
      *out = d;
    } else {
      const uint32_t v32 = (uint32_t)v;
      float f;
      memcpy(&f, &v32, 4);
      *out = f;
    }
    return CLF_OK;
  }
  if (kv->elem == CLF_GGUF_U64) {
    *out = (double)gg_le(kv->raw + j * 8, 8);
    return CLF_OK;
  }
  int64_t n;
  if ((st = clf_gguf_get_int(g, i, j, &n)) != CLF_OK) return st;
  *out = (double)n;
  return CLF_OK;
}

clf_status clf_gguf_get_str(const clf_gguf *g, size_t i, uint64_t j, const char **s, size_t *len) {
  static const char op[] = "clf_gguf_get_str";
  const gg_kv *kv;
  clf_status st = gg_elem(g, i, j, op, 0, &kv);
  if (st != CLF_OK) return st;
  if (!s) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: s is NULL", op);
  *s = kv->blob + kv->at[j];
  if (len) *len = (size_t)(kv->at[j + 1] - kv->at[j] - 1);
  return CLF_OK;
}

size_t clf_gguf_tensor_count(const clf_gguf *g) { return g ? g->n_t : 0; }

clf_status clf_gguf_tensor_at(const clf_gguf *g, size_t i, clf_gguf_tensor *out) {
  if (!g || !out) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_gguf_tensor_at: NULL argument");
  if (i >= g->n_t)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_gguf_tensor_at: index %zu, but %s has %zu tensors", i, g->path,
                     g->n_t);
  const gg_tensor *t = &g->t[i];
  memset(out, 0, sizeof *out);
  out->name = t->name;
  out->ggml_type = t->type;
  out->type_name = clf__ggml_type_of(t->type)->name;
  out->ndim = t->ndim;
  for (int d = 0; d < t->ndim; d++) out->shape[d] = t->ne[t->ndim - 1 - d];
  out->offset = g->data_start + t->offset;
  out->bytes = t->bytes;
  return CLF_OK;
}

long clf_gguf_find_tensor(const clf_gguf *g, const char *name) {
  if (!g || !name) return -1;
  for (size_t i = 0; i < g->n_t; i++)
    if (strcmp(g->t[i].name, name) == 0) return (long)i;
  return -1;
}

clf_status clf_gguf_read(const clf_gguf *g, size_t i, void *dst, size_t capacity) {
  if (!g) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_gguf_read: NULL file");
  if (i >= g->n_t)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_gguf_read: index %zu, but %s has %zu tensors", i, g->path, g->n_t);
  const gg_tensor *t = &g->t[i];
  if (capacity < t->bytes || (!dst && t->bytes))
    return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_gguf_read: tensor \"%s\" is %llu bytes, dst holds %zu", t->name,
                     (unsigned long long)t->bytes, dst ? capacity : 0);
  if (t->bytes > SIZE_MAX)
    return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_gguf_read: tensor \"%s\" too large", t->name);
  const uint64_t off = g->data_start + t->offset;
  const int r = gg_pread(g->fd, dst, (size_t)t->bytes, off);
  if (r != 0) return gg_read_failed(g, t->name, r, off + t->bytes);
  return CLF_OK;
}
