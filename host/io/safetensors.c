/* safetensors.c - a strict reader of the safetensors format: the header is
 * read with pread and validated on open, with the rules of the format's
 * reference reader (huggingface/safetensors); tensors are copied out with
 * pread (clf_safetensors_read), which reports a file that shrank since it
 * was opened as an error.  The file also stays memory-mapped read-only for
 * clf_st_info.data, which the library itself never touches: a page of the
 * mapping past a truncated file's new end faults (SIGBUS) when read. */
#include "base/file.h"
#include "base/status.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ST_MAX_HEADER 100000000ull /* the reference reader's MAX_HEADER_SIZE */
#define ST_MAX_DIMS 8

typedef struct st_entry {
  char *name;
  const char *dtype; /* static string from st_dtypes */
  int ndim;
  size_t shape[ST_MAX_DIMS];
  size_t begin, end; /* relative to the data section */
} st_entry;

typedef struct st_meta {
  char *key, *value;
} st_meta;

struct clf_safetensors {
  char *path;
  int fd;             /* open until closed: clf_safetensors_read */
  unsigned char *map; /* the whole file, for clf_st_info.data */
  size_t map_len;     /* the file's size when opened */
  size_t data_start; /* 8 + header length */
  st_entry *t;       /* in offset order */
  size_t n;
  const st_entry **by_name; /* into t, sorted by name */
  st_meta *meta;
  size_t n_meta;
};

/* The dtypes of the format with their size in bits. */
static const struct {
  const char *name;
  unsigned bits;
} st_dtypes[] = {
    {"BOOL", 8},    {"U8", 8},      {"I8", 8},          {"I16", 16},         {"U16", 16},
    {"I32", 32},    {"U32", 32},    {"I64", 64},        {"U64", 64},         {"F16", 16},
    {"BF16", 16},   {"F32", 32},    {"F64", 64},        {"C64", 64},         {"F8_E5M2", 8},
    {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8},  {"F4", 4},
    {"F6_E2M3", 6}, {"F6_E3M2", 6},
};

/* Valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
static int st_utf8_ok(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    size_t len;
    unsigned min;
    if (c < 0x80) { i++; continue; }
    if ((c & 0xE0) == 0xC0) { len = 2; min = 0x80; c &= 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; min = 0x800; c &= 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; min = 0x10000; c &= 0x07; }
    else return 0;
    if (n - i < len) return 0;
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xC0) != 0x80) return 0;
      c = (c << 6) | (s[i + k] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    i += len;
  }
  return 1;
}

/* A JSON number that is a non-negative integer exactly representable in a
 * double (< 2^53); cJSON keeps numbers as doubles. */
static int st_uint(const cJSON *j, size_t *out) {
  if (!cJSON_IsNumber(j)) return 0;
  double v = j->valuedouble;
  if (!(v >= 0) || v >= 9007199254740992.0 || floor(v) != v) return 0;
  if ((unsigned long long)v > (unsigned long long)SIZE_MAX) return 0;
  *out = (size_t)v;
  return 1;
}

static const char *st_json_type(const cJSON *j) {
  if (cJSON_IsNull(j)) return "null";
  if (cJSON_IsBool(j)) return "a boolean";
  if (cJSON_IsNumber(j)) return "a number";
  if (cJSON_IsString(j)) return "a string";
  if (cJSON_IsArray(j)) return "an array";
  if (cJSON_IsObject(j)) return "an object";
  return "invalid";
}

static int st_cmp_offsets(const void *a, const void *b) {
  const st_entry *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return strcmp(x->name, y->name);
}

static int st_cmp_names(const void *a, const void *b) {
  return strcmp((*(const st_entry *const *)a)->name, (*(const st_entry *const *)b)->name);
}

void clf_safetensors_close(clf_safetensors *st) {
  if (!st) return;
  if (st->map) munmap(st->map, st->map_len);
  if (st->fd >= 0) close(st->fd);
  for (size_t i = 0; i < st->n; i++) free(st->t[i].name);
  for (size_t i = 0; i < st->n_meta; i++) {
    free(st->meta[i].key);
    free(st->meta[i].value);
  }
  free(st->t);
  free(st->by_name);
  free(st->meta);
  free(st->path);
  free(st);
}

/* Reads one tensor entry of the header into e. */
static clf_status st_parse_entry(const char *path, const cJSON *item, st_entry *e) {
  const char *name = item->string;
  if (!cJSON_IsObject(item))
    return clf__fail(NULL, CLF_E_FORMAT, "%s: tensor \"%s\": header entry is %s, expected an object", path,
                     name, st_json_type(item));
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
  const cJSON *sh = cJSON_GetObjectItemCaseSensitive(item, "shape");
  const cJSON *off = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
  if (!dt || !sh || !off)
    return clf__fail(NULL, CLF_E_FORMAT, "%s: tensor \"%s\": missing field \"%s\"", path, name,
                     !dt ? "dtype" : !sh ? "shape" : "data_offsets");
  if (!cJSON_IsString(dt))
    return clf__fail(NULL, CLF_E_FORMAT, "%s: tensor \"%s\": dtype is %s, expected a string", path, name,
                     st_json_type(dt));
  unsigned bits = 0;
  for (size_t i = 0; i < CLF__ARRAY_LEN(st_dtypes); i++)
    if (strcmp(dt->valuestring, st_dtypes[i].name) == 0) {
      e->dtype = st_dtypes[i].name;
      bits = st_dtypes[i].bits;
    }
  if (!bits)
    return clf__fail(NULL, CLF_E_FORMAT, "%s: tensor \"%s\": unknown dtype \"%.32s\"", path, name,
                     dt->valuestring);
  if (!cJSON_IsArray(sh))
    return clf__fail(NULL, CLF_E_FORMAT, "%s: tensor \"%s\": shape is %s, expected an array", path, name,
                     st_json_type(sh));
  int nd = cJSON_GetArraySize(sh);
  if (nd > ST_MAX_DIMS)
    return clf__fail(NULL, CLF_E_FORMAT, "%s: tensor \"%s\": shape has %d dims, more than %d", path, name, nd,
                     ST_MAX_DIMS);
  e->ndim = nd;
  size_t numel = 1;
  int overflow = 0;
  const cJSON *d;
  int k = 0;
  cJSON_ArrayForEach(d, sh) {
    if (!st_uint(d, &e->shape[k]))
      return clf__fail(NULL, CLF_E_FORMAT, "%s: tensor \"%s\": shape[%d] is not a non-negative integer", path,
                       name, k);
    if (e->shape[k] && numel > SIZE_MAX / e->shape[k]) overflow = 1;
    else numel *= e->shape[k];
    k++;
  }
  if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || !st_uint(off->child, &e->begin) ||
      !st_uint(off->child->next, &e->end))
    return clf__fail(NULL, CLF_E_FORMAT,
                     "%s: tensor \"%s\": data_offsets must be [begin, end], two non-negative integers", path,
                     name);
  if (e->end < e->begin)
    return clf__fail(NULL, CLF_E_FORMAT, "%s: tensor \"%s\": data_offsets [%zu, %zu] end before they begin",
                     path, name, e->begin, e->end);
  /* As in the reference reader's checked_mul fold, an overflow part-way
   * through the shape counts even when a later dim is 0. */
  if (overflow || numel > SIZE_MAX / bits)
    return clf__fail(NULL, CLF_E_FORMAT, "%s: tensor \"%s\": shape x dtype size overflows", path, name);
  size_t nbits = numel * bits;
  if (nbits % 8)
    return clf__fail(NULL, CLF_E_FORMAT, "%s: tensor \"%s\": %zu elements of %s do not fill whole bytes", path,
                     name, numel, e->dtype);
  if (nbits / 8 != e->end - e->begin)
    return clf__fail(NULL, CLF_E_FORMAT,
                     "%s: tensor \"%s\": shape x dtype size is %zu bytes but data_offsets [%zu, %zu] hold %zu",
                     path, name, nbits / 8, e->begin, e->end, e->end - e->begin);
  return CLF_OK;
}

#define ST_BAD(...) clf__fail(NULL, CLF_E_FORMAT, __VA_ARGS__)

/* Opens the file (kept open in st->fd) and takes its size; the file must be
 * a regular file of at least the 8-byte header length. */
static clf_status st_file(clf_safetensors *st, const char *path) {
  unsigned long long size;
  const clf_status status = clf__open_regular(path, &st->fd, &size);
  if (status != CLF_OK) return status;
  if (size < 8) return ST_BAD("%s: file is %llu bytes, too small for the 8-byte header length", path, size);
  if (size > (unsigned long long)SIZE_MAX) return clf__fail(NULL, CLF_E_IO, "%s: too large to map", path);
  st->map_len = (size_t)size;
  return CLF_OK;
}

/* Maps the whole file read-only into st->map (after the header is checked:
 * the library reads nothing through it). */
static clf_status st_map(clf_safetensors *st, const char *path) {
  void *m = mmap(NULL, st->map_len, PROT_READ, MAP_PRIVATE, st->fd, 0);
  if (m == MAP_FAILED) return clf__fail(NULL, CLF_E_IO, "%s: mmap failed: %s", path, strerror(errno));
  st->map = m;
  return CLF_OK;
}

/* A pread that ended early or failed: the file shrank since it was opened
 * (or its stat lied), or the read failed. */
static clf_status st_read_failed(const char *path, const char *what, int r, size_t got, unsigned long long off,
                                 size_t len) {
  if (r > 0)
    return clf__fail(NULL, CLF_E_IO, "%s: %s: the file ends at byte %llu, before byte %llu: it changed (shrank) "
                     "while being read", path, what, off + got, off + len);
  return clf__fail(NULL, CLF_E_IO, "%s: %s: read failed: %s", path, what, strerror(errno));
}

/* The JSON header after the 8-byte length, read with pread: checked (size,
 * UTF-8, no NUL or byte-order mark) and parsed into *root, a JSON object.
 * Sets data_start. */
static clf_status st_parse_header(clf_safetensors *st, const char *path, cJSON **root) {
  *root = NULL;
  unsigned char len8[8];
  size_t got = 0;
  int r = clf__pread_full(st->fd, len8, 8, 0, &got);
  if (r != 0) return st_read_failed(path, "reading the header length", r, got, 0, 8);
  unsigned long long hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | len8[i];
  if (hlen > ST_MAX_HEADER)
    return ST_BAD("%s: header length %llu is larger than the limit of %llu bytes", path, hlen, ST_MAX_HEADER);
  if (hlen > st->map_len - 8)
    return ST_BAD("%s: header length %llu runs past the end of the file (%zu bytes follow the length; truncated?)",
                  path, hlen, st->map_len - 8);
  st->data_start = 8 + (size_t)hlen;
  unsigned char *text = malloc((size_t)hlen + 1);
  if (!text)
    return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory for a %llu-byte header", path, hlen);
  if ((r = clf__pread_full(st->fd, text, (size_t)hlen, 8, &got)) != 0) {
    free(text);
    return st_read_failed(path, "reading the header", r, got, 8, (size_t)hlen);
  }
  text[hlen] = '\0';
  clf_status status = CLF_OK;
  cJSON *j = NULL;
  if (!st_utf8_ok(text, (size_t)hlen)) status = ST_BAD("%s: header is not valid UTF-8", path);
  /* cJSON would stop at a NUL and skip a byte-order mark; JSON allows neither. */
  else if (memchr(text, 0, (size_t)hlen) || (hlen >= 3 && text[0] == 0xEF && text[1] == 0xBB && text[2] == 0xBF))
    status = ST_BAD("%s: header is not valid JSON (a NUL byte or a byte-order mark)", path);
  else if (!(j = cJSON_ParseWithLengthOpts((const char *)text, (size_t)hlen + 1, NULL, 1))) {
    const char *at = cJSON_GetErrorPtr(), *t = (const char *)text;
    size_t pos = (at && at >= t && at <= t + hlen) ? (size_t)(at - t) : 0;
    status = ST_BAD("%s: header is not valid JSON (error near byte %zu of the header)", path, pos);
  } else if (!cJSON_IsObject(j)) {
    status = ST_BAD("%s: header is %s, expected a JSON object", path, st_json_type(j));
    cJSON_Delete(j);
    j = NULL;
  }
  free(text);
  *root = j;
  return status;
}

static int st_is_meta(const cJSON *item) { return strcmp(item->string, "__metadata__") == 0; }

/* Counts the tensors and the metadata strings, checking "__metadata__"
 * (at most once; null or an object of strings). */
static clf_status st_count(const char *path, const cJSON *root, size_t *n, size_t *n_meta) {
  const cJSON *item, *kv;
  int have_meta = 0;
  *n = *n_meta = 0;
  cJSON_ArrayForEach(item, root) {
    if (!st_is_meta(item)) {
      (*n)++;
      continue;
    }
    if (have_meta) return ST_BAD("%s: \"__metadata__\" appears twice in the header", path);
    have_meta = 1;
    if (cJSON_IsNull(item)) continue;
    if (!cJSON_IsObject(item))
      return ST_BAD("%s: \"__metadata__\" is %s, expected an object", path, st_json_type(item));
    cJSON_ArrayForEach(kv, item) {
      if (!cJSON_IsString(kv))
        return ST_BAD("%s: \"__metadata__\" value \"%s\" is %s, expected a string", path, kv->string,
                      st_json_type(kv));
      (*n_meta)++;
    }
  }
  return CLF_OK;
}

/* Copies the metadata and reads every tensor entry of the header into st. */
static clf_status st_read_entries(clf_safetensors *st, const char *path, const cJSON *root) {
  size_t n, n_meta;
  clf_status status = st_count(path, root, &n, &n_meta);
  if (status != CLF_OK) return status;
  st->t = calloc(n ? n : 1, sizeof(*st->t));
  st->by_name = calloc(n ? n : 1, sizeof(*st->by_name));
  st->meta = calloc(n_meta ? n_meta : 1, sizeof(*st->meta));
  if (!st->t || !st->by_name || !st->meta)
    return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory for %zu tensors", path, n);
  const cJSON *item, *kv;
  cJSON_ArrayForEach(item, root) {
    if (st_is_meta(item)) {
      if (!cJSON_IsObject(item)) continue;
      cJSON_ArrayForEach(kv, item) {
        st_meta *md = &st->meta[st->n_meta++];
        md->key = strdup(kv->string);
        md->value = strdup(kv->valuestring);
        if (!md->key || !md->value) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", path);
      }
      continue;
    }
    st_entry *e = &st->t[st->n++];
    if (!(e->name = strdup(item->string))) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", path);
    if ((status = st_parse_entry(path, item, e)) != CLF_OK) return status;
  }
  return CLF_OK;
}

/* Sorts the entries by offsets and indexes them by name (unique). */
static clf_status st_index(clf_safetensors *st, const char *path) {
  /* Like the reference reader, the entries may come in any order: sort them
   * by offsets (ties, zero-size tensors, by name). */
  qsort(st->t, st->n, sizeof(st_entry), st_cmp_offsets);
  for (size_t i = 0; i < st->n; i++) st->by_name[i] = &st->t[i];
  qsort(st->by_name, st->n, sizeof(*st->by_name), st_cmp_names);
  /* cJSON keeps both copies of a repeated key; a name must be unique. */
  for (size_t i = 1; i < st->n; i++)
    if (strcmp(st->by_name[i]->name, st->by_name[i - 1]->name) == 0)
      return ST_BAD("%s: tensor \"%s\": the name appears twice in the header", path, st->by_name[i]->name);
  return CLF_OK;
}

/* In offset order the ranges must tile the data section exactly. */
static clf_status st_check_tiling(const clf_safetensors *st, const char *path) {
  size_t pos = 0, data_len = st->map_len - st->data_start;
  for (size_t i = 0; i < st->n; i++) {
    const st_entry *e = &st->t[i];
    if (e->begin < pos)
      return ST_BAD("%s: tensor \"%s\": data_offsets [%zu, %zu] overlap the previous tensor, which ends at %zu",
                    path, e->name, e->begin, e->end, pos);
    if (e->begin > pos)
      return ST_BAD("%s: tensor \"%s\": data_offsets [%zu, %zu] leave a gap: bytes %zu..%zu belong to no tensor",
                    path, e->name, e->begin, e->end, pos, e->begin);
    if (e->end > data_len)
      return ST_BAD("%s: tensor \"%s\": data_offsets [%zu, %zu] run past the end of the data (%zu bytes; "
                    "truncated?)", path, e->name, e->begin, e->end, data_len);
    pos = e->end;
  }
  if (pos != data_len)
    return ST_BAD("%s: the tensors cover %zu bytes of data but the file holds %zu: bytes after the last tensor",
                  path, pos, data_len);
  return CLF_OK;
}

clf_status clf_safetensors_open(const char *path, clf_safetensors **out) {
  if (!out) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_safetensors_open: out is NULL");
  *out = NULL;
  if (!path) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_safetensors_open: path is NULL");
  clf_safetensors *st = calloc(1, sizeof(*st));
  if (!st || !(st->path = strdup(path))) {
    free(st);
    return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", path);
  }
  st->fd = -1;
  cJSON *root = NULL;
  clf_status status = st_file(st, path);
  if (status == CLF_OK) status = st_parse_header(st, path, &root);
  if (status == CLF_OK) status = st_read_entries(st, path, root);
  cJSON_Delete(root);
  if (status == CLF_OK) status = st_index(st, path);
  if (status == CLF_OK) status = st_check_tiling(st, path);
  if (status == CLF_OK) status = st_map(st, path);
  if (status != CLF_OK) {
    clf_safetensors_close(st);
    return status;
  }
  *out = st;
  return CLF_OK;
}

size_t clf_safetensors_count(const clf_safetensors *st) { return st ? st->n : 0; }

static void st_fill(const clf_safetensors *st, const st_entry *e, clf_st_info *out) {
  memset(out, 0, sizeof(*out));
  out->name = e->name;
  out->dtype = e->dtype;
  out->ndim = e->ndim;
  for (int i = 0; i < e->ndim; i++) out->shape[i] = e->shape[i];
  out->data = st->map + st->data_start + e->begin;
  out->bytes = e->end - e->begin;
}

clf_status clf_safetensors_info(const clf_safetensors *st, size_t index, clf_st_info *out) {
  if (!st) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_safetensors_info: st is NULL");
  if (!out) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_safetensors_info: out is NULL");
  if (index >= st->n)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_safetensors_info: index %zu out of range (%s has %zu tensors)",
                     index, st->path, st->n);
  st_fill(st, &st->t[index], out);
  return CLF_OK;
}

/* The entry called name, or NULL. */
static const st_entry *st_lookup(const clf_safetensors *st, const char *name) {
  size_t lo = 0, hi = st->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(st->by_name[mid]->name, name);
    if (c == 0) return st->by_name[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

clf_status clf_safetensors_find(const clf_safetensors *st, const char *name, clf_st_info *out) {
  if (!st) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_safetensors_find: st is NULL");
  if (!name) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_safetensors_find: name is NULL");
  if (!out) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_safetensors_find: out is NULL");
  const st_entry *e = st_lookup(st, name);
  if (!e) return clf__fail(NULL, CLF_E_NOT_FOUND, "tensor \"%s\" not found in %s", name, st->path);
  st_fill(st, e, out);
  return CLF_OK;
}

clf_status clf_safetensors_read(const clf_safetensors *st, const clf_st_info *info, void *dst) {
  static const char op[] = "clf_safetensors_read";
  if (!st) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: st is NULL", op);
  if (!info || !info->name) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: info or its name is NULL", op);
  const st_entry *e = st_lookup(st, info->name);
  if (!e || e->end - e->begin != info->bytes)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: %s has no tensor \"%s\" of %zu bytes (info from another file?)",
                     op, st->path, info->name, info->bytes);
  if (!info->bytes) return CLF_OK;
  if (!dst) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: dst is NULL (tensor \"%s\")", op, info->name);
  const unsigned long long off = (unsigned long long)st->data_start + e->begin;
  size_t got = 0;
  const int r = clf__pread_full(st->fd, dst, info->bytes, off, &got);
  if (r == 0) return CLF_OK;
  char what[256];
  snprintf(what, sizeof what, "tensor \"%.200s\"", e->name);
  return st_read_failed(st->path, what, r, got, off, info->bytes);
}

const char *clf_safetensors_metadata(const clf_safetensors *st, const char *key) {
  if (!st || !key) return NULL;
  for (size_t i = 0; i < st->n_meta; i++)
    if (strcmp(st->meta[i].key, key) == 0) return st->meta[i].value;
  return NULL;
}
