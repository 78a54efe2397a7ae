/* test_gguf.c - the GGUF reader: files written by gguf-py, llama.cpp's own
 * writer (tests/fixtures/gguf, tools/fixtures/make_gguf_fixtures.py),
 * checked pair by pair and tensor by tensor against what gguf-py's reader
 * read back (expected.json); every prefix of one as a truncated file; and
 * files built here, one per rule broken, each checked for its status and
 * message; clf_gguf_read of a file truncated while open. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static char tmpdir[64];

static const char *fixture(const char *name) {
  static char path[512];
  const char *dir = getenv("CLF_FIXTURES");
  snprintf(path, sizeof path, "%s/gguf/%s", dir ? dir : "tests/fixtures", name);
  return path;
}

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  *len = (size_t)ftell(f);
  rewind(f);
  unsigned char *b = malloc(*len + 1);
  ck_assert_uint_eq(fread(b, 1, *len, f), *len);
  fclose(f);
  b[*len] = 0;
  return b;
}

static const char *put(const char *name, const void *bytes, size_t len) {
  static char path[256];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  if (len) ck_assert_uint_eq(fwrite(bytes, 1, len, f), len);
  fclose(f);
  return path;
}

static uint64_t fnv1a64(const unsigned char *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/* Opening `path` fails with `status` and a message holding `needle`. */
#define GG_FAILS(path, status, needle)                                                                              \
  do {                                                                                                              \
    clf_gguf *g_ = (clf_gguf *)1;                                                                                   \
    const clf_status st_ = clf_gguf_open((path), &g_);                                                              \
    ck_assert_msg(st_ == (status), "%s: %s, expected %s: %s", #needle, clf_status_name(st_),                        \
                  clf_status_name(status), clf_last_error(NULL));                                                   \
    ck_assert_ptr_null(g_);                                                                                         \
    ck_assert_msg(strstr(clf_last_error(NULL), (needle)) != NULL, "message \"%s\" lacks \"%s\"",                   \
                  clf_last_error(NULL), (needle));                                                                  \
  } while (0)

/* One pair against its expected.json entry. */
static void check_kv(const clf_gguf *g, size_t i, const cJSON *e) {
  clf_gguf_kv kv;
  TH_OK(clf_gguf_kv_at(g, i, &kv));
  const char *key = cJSON_GetObjectItem(e, "key")->valuestring;
  ck_assert_str_eq(kv.key, key);
  ck_assert_int_eq(clf_gguf_find(g, key), (long)i);
  ck_assert_int_eq(kv.type, cJSON_GetObjectItem(e, "type")->valueint);
  ck_assert_int_eq(kv.elem, cJSON_GetObjectItem(e, "elem")->valueint);
  const cJSON *vals = cJSON_GetObjectItem(e, "values");
  ck_assert_uint_eq(kv.count, (uint64_t)cJSON_GetArraySize(vals));
  for (uint64_t j = 0; j < kv.count; j++) {
    const cJSON *v = cJSON_GetArrayItem(vals, (int)j);
    if (kv.elem == CLF_GGUF_STRING) {
      const char *s;
      size_t len;
      TH_OK(clf_gguf_get_str(g, i, j, &s, &len));
      ck_assert_uint_eq(len, strlen(v->valuestring));
      ck_assert_str_eq(s, v->valuestring);
      int64_t n;
      ck_assert_int_eq(clf_gguf_get_int(g, i, j, &n), CLF_E_DTYPE);
    } else if (kv.elem == CLF_GGUF_F32 || kv.elem == CLF_GGUF_F64) {
      double d;
      TH_OK(clf_gguf_get_float(g, i, j, &d));
      ck_assert_msg(d == v->valuedouble, "%s[%llu]: %.17g, expected %.17g", key, (unsigned long long)j, d,
                    v->valuedouble);
      int64_t n;
      ck_assert_int_eq(clf_gguf_get_int(g, i, j, &n), CLF_E_DTYPE);
    } else if (v->valuedouble > 9.2e18) { /* u64 past INT64_MAX (cJSON holds it as a double) */
      int64_t n;
      ck_assert_int_eq(clf_gguf_get_int(g, i, j, &n), CLF_E_DTYPE);
      double d;
      TH_OK(clf_gguf_get_float(g, i, j, &d));
      ck_assert(d == v->valuedouble);
    } else {
      int64_t n;
      TH_OK(clf_gguf_get_int(g, i, j, &n));
      ck_assert_msg((double)n == v->valuedouble, "%s[%llu]: %lld, expected %.0f", key, (unsigned long long)j,
                    (long long)n, v->valuedouble);
      const char *s;
      ck_assert_int_eq(clf_gguf_get_str(g, i, j, &s, NULL), CLF_E_DTYPE);
    }
  }
  int64_t n;
  ck_assert_int_eq(clf_gguf_get_int(g, i, kv.count, &n), CLF_E_INVALID_ARG);
}

/* One tensor against its expected.json entry, its bytes read back. */
static void check_tensor(const clf_gguf *g, size_t i, const cJSON *e) {
  clf_gguf_tensor t;
  TH_OK(clf_gguf_tensor_at(g, i, &t));
  const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
  ck_assert_str_eq(t.name, name);
  ck_assert_int_eq(clf_gguf_find_tensor(g, name), (long)i);
  ck_assert_uint_eq(t.ggml_type, (unsigned)cJSON_GetObjectItem(e, "ggml_type")->valueint);
  ck_assert_str_eq(t.type_name, cJSON_GetObjectItem(e, "type_name")->valuestring);
  const cJSON *shape = cJSON_GetObjectItem(e, "shape");
  ck_assert_int_eq(t.ndim, cJSON_GetArraySize(shape));
  for (int d = 0; d < t.ndim; d++) ck_assert_uint_eq(t.shape[d], (uint64_t)cJSON_GetArrayItem(shape, d)->valuedouble);
  ck_assert_uint_eq(t.offset, (uint64_t)cJSON_GetObjectItem(e, "offset")->valuedouble);
  ck_assert_uint_eq(t.bytes, (uint64_t)cJSON_GetObjectItem(e, "bytes")->valuedouble);
  unsigned char *b = malloc(t.bytes + 1);
  ck_assert_int_eq(clf_gguf_read(g, i, b, t.bytes ? t.bytes - 1 : 0), t.bytes ? CLF_E_INVALID_ARG : CLF_OK);
  TH_OK(clf_gguf_read(g, i, b, t.bytes));
  char hex[17];
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)fnv1a64(b, t.bytes));
  ck_assert_str_eq(hex, cJSON_GetObjectItem(e, "fnv1a64")->valuestring);
  free(b);
}

START_TEST(gguf_files_written_by_gguf_py) {
  size_t len;
  char *text = (char *)slurp(fixture("expected.json"), &len);
  cJSON *root = cJSON_Parse(text);
  ck_assert_ptr_nonnull(root);
  for (const char *const *f = (const char *const[]){"types.gguf", "aligned64.gguf", NULL}; *f; f++) {
    const cJSON *want = cJSON_GetObjectItem(root, *f);
    clf_gguf *g;
    TH_OK(clf_gguf_open(fixture(*f), &g));
    ck_assert_uint_eq(clf_gguf_version(g), (unsigned)cJSON_GetObjectItem(want, "version")->valueint);
    const cJSON *kvs = cJSON_GetObjectItem(want, "kv"), *ts = cJSON_GetObjectItem(want, "tensors");
    ck_assert_uint_eq(clf_gguf_kv_count(g), (size_t)cJSON_GetArraySize(kvs));
    ck_assert_uint_eq(clf_gguf_tensor_count(g), (size_t)cJSON_GetArraySize(ts));
    for (size_t i = 0; i < clf_gguf_kv_count(g); i++) check_kv(g, i, cJSON_GetArrayItem(kvs, (int)i));
    for (size_t i = 0; i < clf_gguf_tensor_count(g); i++) check_tensor(g, i, cJSON_GetArrayItem(ts, (int)i));
    clf_gguf_kv kv;
    clf_gguf_tensor t;
    ck_assert_int_eq(clf_gguf_kv_at(g, clf_gguf_kv_count(g), &kv), CLF_E_INVALID_ARG);
    ck_assert_int_eq(clf_gguf_tensor_at(g, clf_gguf_tensor_count(g), &t), CLF_E_INVALID_ARG);
    ck_assert_int_eq(clf_gguf_find(g, "no.such.key"), -1);
    ck_assert_int_eq(clf_gguf_find_tensor(g, "no.such.tensor"), -1);
    clf_gguf_close(g);
  }
  cJSON_Delete(root);
  free(text);
}
END_TEST

/* clformer's element types (clf_dtype_at) against gguf-py's: every type
 * with a ggml number is in types.gguf (expected.json, gguf-py's reading),
 * under the same name (upper case) and with the bytes gguf-py counts for
 * the tensor's elements in blocks of the row's block and block bytes. */
START_TEST(gguf_dtype_list_matches_gguf_py) {
  size_t len;
  char *text = (char *)slurp(fixture("expected.json"), &len);
  cJSON *root = cJSON_Parse(text);
  ck_assert_ptr_nonnull(root);
  const cJSON *ts = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "types.gguf"), "tensors");
  size_t with_ggml = 0, found = 0;
  for (size_t i = 0; i < clf_dtype_count(); i++) {
    clf_dtype_desc d;
    TH_OK(clf_dtype_at(i, &d));
    if (d.ggml_type < 0) continue;
    with_ggml++;
    const cJSON *t;
    cJSON_ArrayForEach(t, ts) {
      if (cJSON_GetObjectItem(t, "ggml_type")->valueint != d.ggml_type) continue;
      char upper[16];
      snprintf(upper, sizeof upper, "%s", d.name);
      for (char *c = upper; *c; c++) *c = (char)(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
      ck_assert_str_eq(cJSON_GetObjectItem(t, "type_name")->valuestring, upper);
      double numel = 1;
      const cJSON *dim;
      cJSON_ArrayForEach(dim, cJSON_GetObjectItem(t, "shape")) numel *= dim->valuedouble;
      ck_assert_msg(cJSON_GetObjectItem(t, "bytes")->valuedouble == numel / (double)d.block * (double)d.block_bytes,
                    "%s: %g bytes in gguf-py, %g elements in blocks of %zu x %zu bytes here", d.name,
                    cJSON_GetObjectItem(t, "bytes")->valuedouble, numel, d.block, d.block_bytes);
      found++;
      break;
    }
  }
  ck_assert_uint_eq(with_ggml, 14); /* f32, f16, i32, i64, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k ... q6_k */
  ck_assert_uint_eq(found, with_ggml);
  cJSON_Delete(root);
  free(text);
}
END_TEST

/* Every prefix of a valid file is a truncated file: refused as malformed,
 * never read past its end (the sanitizers' stage runs this too). */
/* Every tensor of types.gguf decoded, against gguf-py's dequantization of
 * the same bytes (t_<name>.npy): an independent implementation of each
 * block layout.  Tolerance: 1e-6 of the tensor's largest magnitude (the two
 * may round a product in another order). */
START_TEST(gguf_dequantize_matches_gguf_py) {
  clf_gguf *g;
  TH_OK(clf_gguf_open(fixture("types.gguf"), &g));
  for (size_t i = 0; i < clf_gguf_tensor_count(g); i++) {
    clf_gguf_tensor t;
    TH_OK(clf_gguf_tensor_at(g, i, &t));
    char npy[128];
    snprintf(npy, sizeof npy, "%s.npy", t.name);
    for (char *c = npy; *c; c++)
      if (*c == '.' && strcmp(c, ".npy") != 0) *c = '_';
    clf_array want;
    TH_OK(clf_npy_read(fixture(npy), &want));
    uint64_t n = 1;
    for (int d = 0; d < t.ndim; d++) n *= t.shape[d];
    ck_assert_uint_eq(clf_array_numel(&want), n);
    unsigned char *raw = malloc(t.bytes + 1);
    float *got = malloc(n * sizeof(float) + 1);
    TH_OK(clf_gguf_read(g, i, raw, t.bytes));
    TH_OK(clf_gguf_dequantize(t.ggml_type, raw, n, got));
    const float *w = want.data;
    const double scale = th_max_abs(w, n), err = th_max_abs_diff(got, w, n);
    ck_assert_msg(scale > 0, "%s: all zero", t.name);
    ck_assert_msg(err <= 1e-6 * scale, "%s (%s): max |got - gguf-py| %g of %g", t.name, t.type_name, err, scale);
    th_note_error(err / scale, 1e-6);
    if (t.shape[t.ndim - 1] > 1) /* a row that is not whole blocks */
      ck_assert_int_eq(clf_gguf_dequantize(t.ggml_type, raw, n - 1, got),
                       strstr(t.type_name, "_") ? CLF_E_INVALID_ARG : CLF_OK);
    free(raw);
    free(got);
    clf_array_free(&want);
  }
  clf_gguf_close(g);
  float y;
  ck_assert_int_eq(clf_gguf_dequantize(16, "", 0, &y), CLF_E_UNSUPPORTED); /* IQ2_XXS */
  ck_assert_int_eq(clf_gguf_dequantize(9, "", 0, &y), CLF_E_UNSUPPORTED);  /* Q8_1: no tensor type */
  ck_assert_int_eq(clf_gguf_dequantize(8, NULL, 32, &y), CLF_E_INVALID_ARG);
}
END_TEST

START_TEST(gguf_every_prefix_truncated) {
  size_t len;
  unsigned char *b = slurp(fixture("types.gguf"), &len);
  clf_gguf_tensor last;
  clf_gguf *g;
  TH_OK(clf_gguf_open(fixture("types.gguf"), &g));
  TH_OK(clf_gguf_tensor_at(g, clf_gguf_tensor_count(g) - 1, &last));
  clf_gguf_close(g);
  ck_assert_uint_eq(last.offset + last.bytes, len); /* no padding after the last tensor */
  for (size_t n = 0; n < len; n += n < 2048 ? 1 : 7) {
    const char *p = put("prefix.gguf", b, n);
    GG_FAILS(p, CLF_E_FORMAT, "truncated");
  }
  free(b);
}
END_TEST

/* A GGUF file built here: header, pairs and tensor infos appended in order. */
typedef struct gb {
  unsigned char b[4096];
  size_t n;
} gb;

static void gb_raw(gb *g, const void *p, size_t n) {
  ck_assert_uint_le(g->n + n, sizeof g->b);
  memcpy(g->b + g->n, p, n);
  g->n += n;
}
static void gb_u32(gb *g, uint32_t v) {
  for (int i = 0; i < 4; i++) g->b[g->n++] = (unsigned char)(v >> 8 * i);
}
static void gb_u64(gb *g, uint64_t v) {
  for (int i = 0; i < 8; i++) g->b[g->n++] = (unsigned char)(v >> 8 * i);
}
static void gb_str(gb *g, const char *s, size_t len) {
  gb_u64(g, len);
  gb_raw(g, s, len);
}
static void gb_head(gb *g, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
  g->n = 0;
  gb_raw(g, "GGUF", 4);
  gb_u32(g, version);
  gb_u64(g, n_tensors);
  gb_u64(g, n_kv);
}
static void gb_kv_u32(gb *g, const char *key, uint32_t v) {
  gb_str(g, key, strlen(key));
  gb_u32(g, CLF_GGUF_U32);
  gb_u32(g, v);
}
/* A tensor info: dims innermost first. */
static void gb_tensor(gb *g, const char *name, uint32_t nd, const uint64_t *ne, uint32_t type, uint64_t offset) {
  gb_str(g, name, strlen(name));
  gb_u32(g, nd);
  for (uint32_t d = 0; d < nd; d++) gb_u64(g, ne[d]);
  gb_u32(g, type);
  gb_u64(g, offset);
}
/* Pads to `align` and appends `bytes` data bytes. */
static const char *gb_put(gb *g, size_t align, size_t bytes) {
  while (g->n % align) g->b[g->n++] = 0;
  for (size_t i = 0; i < bytes; i++) g->b[g->n++] = (unsigned char)i;
  return put("built.gguf", g->b, g->n);
}

START_TEST(gguf_header_rules) {
  gb g;
  gb_head(&g, 3, 0, 0);
  memcpy(g.b, "GGML", 4);
  GG_FAILS(gb_put(&g, 1, 0), CLF_E_FORMAT, "not a GGUF file");
  gb_head(&g, 1, 0, 0);
  GG_FAILS(gb_put(&g, 1, 0), CLF_E_UNSUPPORTED, "version 1");
  gb_head(&g, 4, 0, 0);
  GG_FAILS(gb_put(&g, 1, 0), CLF_E_UNSUPPORTED, "versions 2 and 3");
  gb_head(&g, 0x03000000u, 0, 0);
  GG_FAILS(gb_put(&g, 1, 0), CLF_E_UNSUPPORTED, "big-endian");
  gb_head(&g, 3, 0, 1ull << 40);
  GG_FAILS(gb_put(&g, 1, 0), CLF_E_FORMAT, "cannot fit");
  gb_head(&g, 3, 1ull << 62, 0);
  GG_FAILS(gb_put(&g, 1, 0), CLF_E_FORMAT, "cannot fit");
  /* The smallest valid files: version 2 and 3, nothing in them. */
  for (uint32_t v = 2; v <= 3; v++) {
    gb_head(&g, v, 0, 0);
    clf_gguf *f;
    TH_OK(clf_gguf_open(gb_put(&g, 1, 0), &f));
    ck_assert_uint_eq(clf_gguf_version(f), v);
    ck_assert_uint_eq(clf_gguf_kv_count(f) + clf_gguf_tensor_count(f), 0);
    clf_gguf_close(f);
  }
}
END_TEST

START_TEST(gguf_metadata_rules) {
  gb g;
  gb_head(&g, 3, 0, 2);
  gb_kv_u32(&g, "a.key", 1);
  gb_kv_u32(&g, "a.key", 2);
  GG_FAILS(gb_put(&g, 1, 0), CLF_E_FORMAT, "\"a.key\" appears twice");
  gb_head(&g, 3, 0, 1);
  gb_str(&g, "", 0);
  gb_u32(&g, CLF_GGUF_U32);
  gb_u32(&g, 1);
  GG_FAILS(gb_put(&g, 1, 0), CLF_E_FORMAT, "empty");
  gb_head(&g, 3, 0, 1);
  gb_str(&g, "a\0b", 3);
  gb_u32(&g, CLF_GGUF_U32);
  gb_u32(&g, 1);
  GG_FAILS(gb_put(&g, 1, 0), CLF_E_FORMAT, "NUL");
  gb_head(&g, 3, 0, 1);
  gb_str(&g, "k", 1);
  gb_u32(&g, 13);
  gb_u32(&g, 0);
  GG_FAILS(gb_put(&g, 1, 0), CLF_E_FORMAT, "value type 13");
  gb_head(&g, 3, 0, 1);
  gb_str(&g, "nested", 6);
  gb_u32(&g, CLF_GGUF_ARRAY);
  gb_u32(&g, CLF_GGUF_ARRAY);
  gb_u64(&g, 0);
  GG_FAILS(gb_put(&g, 1, 0), CLF_E_FORMAT, "array of arrays");
  gb_head(&g, 3, 0, 1);
  gb_str(&g, "big", 3);
  gb_u32(&g, CLF_GGUF_ARRAY);
  gb_u32(&g, CLF_GGUF_STRING);
  gb_u64(&g, 1ull << 60);
  GG_FAILS(gb_put(&g, 1, 0), CLF_E_FORMAT, "more than the rest of the file");
  gb_head(&g, 3, 0, 1);
  gb_str(&g, "long", 4);
  gb_u32(&g, CLF_GGUF_STRING);
  gb_u64(&g, 1ull << 50);
  GG_FAILS(gb_put(&g, 1, 0), CLF_E_FORMAT, "past the end of the file");
  gb_head(&g, 3, 0, 1);
  gb_u64(&g, 70000);
  GG_FAILS(gb_put(&g, 1, 0), CLF_E_FORMAT, "truncated");
  /* Empty strings and arrays, which gguf-py does not write as pairs, are valid. */
  gb_head(&g, 3, 0, 2);
  gb_str(&g, "s", 1);
  gb_u32(&g, CLF_GGUF_STRING);
  gb_str(&g, "", 0);
  gb_str(&g, "arr", 3);
  gb_u32(&g, CLF_GGUF_ARRAY);
  gb_u32(&g, CLF_GGUF_I32);
  gb_u64(&g, 0);
  clf_gguf *f;
  TH_OK(clf_gguf_open(gb_put(&g, 1, 0), &f));
  const char *s;
  size_t len = 9;
  TH_OK(clf_gguf_get_str(f, 0, 0, &s, &len));
  ck_assert_uint_eq(len, 0);
  ck_assert_str_eq(s, "");
  clf_gguf_kv kv;
  TH_OK(clf_gguf_kv_at(f, 1, &kv));
  ck_assert(kv.type == CLF_GGUF_ARRAY && kv.elem == CLF_GGUF_I32 && kv.count == 0);
  int64_t n;
  ck_assert_int_eq(clf_gguf_get_int(f, 1, 0, &n), CLF_E_INVALID_ARG);
  clf_gguf_close(f);
}
END_TEST

START_TEST(gguf_alignment_rules) {
  gb g;
  gb_head(&g, 3, 0, 1);
  gb_kv_u32(&g, "general.alignment", 48);
  GG_FAILS(gb_put(&g, 1, 0), CLF_E_FORMAT, "not a power of two");
  gb_head(&g, 3, 0, 1);
  gb_kv_u32(&g, "general.alignment", 0);
  GG_FAILS(gb_put(&g, 1, 0), CLF_E_FORMAT, "not a power of two");
  gb_head(&g, 3, 0, 1);
  gb_str(&g, "general.alignment", 17);
  gb_u32(&g, CLF_GGUF_U64);
  gb_u64(&g, 64);
  GG_FAILS(gb_put(&g, 1, 0), CLF_E_FORMAT, "not a u32");
  /* Alignment 8: a tensor at offset 8 after one of 4 bytes. */
  const uint64_t four[1] = {1}, two[1] = {2};
  gb_head(&g, 3, 2, 1);
  gb_kv_u32(&g, "general.alignment", 8);
  gb_tensor(&g, "x", 1, four, 0, 0);
  gb_tensor(&g, "y", 1, two, 0, 8);
  clf_gguf *f;
  TH_OK(clf_gguf_open(gb_put(&g, 8, 16), &f));
  clf_gguf_tensor t;
  TH_OK(clf_gguf_tensor_at(f, 1, &t));
  ck_assert_uint_eq(t.offset % 8, 0);
  ck_assert_uint_eq(t.bytes, 8);
  clf_gguf_close(f);
}
END_TEST

START_TEST(gguf_tensor_rules) {
  gb g;
  const uint64_t ne5[5] = {1, 1, 1, 1, 1}, neg[2] = {4, ~0ull}, row32[2] = {32, 2}, row16[1] = {16};
  const uint64_t huge[4] = {1ull << 32, 1ull << 32, 1, 1}, one[1] = {8};
  gb_head(&g, 3, 1, 0);
  gb_tensor(&g, "t", 5, ne5, 0, 0);
  GG_FAILS(gb_put(&g, 32, 4), CLF_E_FORMAT, "5 dimensions");
  gb_head(&g, 3, 1, 0);
  gb_tensor(&g, "t", 2, neg, 0, 0);
  GG_FAILS(gb_put(&g, 32, 64), CLF_E_FORMAT, "negative");
  gb_head(&g, 3, 1, 0);
  gb_tensor(&g, "t", 4, huge, 0, 0);
  GG_FAILS(gb_put(&g, 32, 4), CLF_E_FORMAT, "overflows");
  gb_head(&g, 3, 1, 0);
  gb_tensor(&g, "t", 1, row16, 8, 0); /* Q8_0: a row of 16 is not whole blocks */
  GG_FAILS(gb_put(&g, 32, 34), CLF_E_FORMAT, "not a multiple of Q8_0's block of 32");
  gb_head(&g, 3, 1, 0);
  gb_tensor(&g, "iq", 2, row32, 16, 0);
  GG_FAILS(gb_put(&g, 32, 256), CLF_E_UNSUPPORTED, "type IQ2_XXS");
  gb_head(&g, 3, 1, 0);
  gb_tensor(&g, "t", 2, row32, 4, 0); /* 4: Q4_2, removed from ggml */
  GG_FAILS(gb_put(&g, 32, 256), CLF_E_UNSUPPORTED, "ggml type 4");
  gb_head(&g, 3, 1, 0);
  gb_tensor(&g, "t", 2, row32, 1000, 0);
  GG_FAILS(gb_put(&g, 32, 256), CLF_E_UNSUPPORTED, "ggml type 1000");
  char long_name[80];
  memset(long_name, 'n', 64);
  long_name[64] = '\0';
  gb_head(&g, 3, 1, 0);
  gb_tensor(&g, long_name, 1, one, 0, 0);
  GG_FAILS(gb_put(&g, 32, 32), CLF_E_FORMAT, "more than 63");
  gb_head(&g, 3, 2, 0);
  gb_tensor(&g, "t", 1, one, 0, 0);
  gb_tensor(&g, "t", 1, one, 0, 32);
  GG_FAILS(gb_put(&g, 32, 64), CLF_E_FORMAT, "\"t\" appears twice");
}
END_TEST

START_TEST(gguf_data_rules) {
  gb g;
  const uint64_t eight[1] = {8}, zero[2] = {0, 3};
  gb_head(&g, 3, 1, 0);
  gb_tensor(&g, "t", 1, eight, 0, 16);
  GG_FAILS(gb_put(&g, 32, 64), CLF_E_FORMAT, "not aligned");
  gb_head(&g, 3, 2, 0);
  gb_tensor(&g, "a", 1, eight, 0, 0);
  gb_tensor(&g, "b", 1, eight, 0, 0);
  GG_FAILS(gb_put(&g, 32, 64), CLF_E_FORMAT, "overlap");
  gb_head(&g, 3, 2, 0);
  gb_tensor(&g, "a", 1, eight, 0, 32);
  gb_tensor(&g, "b", 1, eight, 0, 0);
  clf_gguf *f;
  TH_OK(clf_gguf_open(gb_put(&g, 32, 64), &f)); /* out of order but apart: fine */
  clf_gguf_close(f);
  gb_head(&g, 3, 1, 0);
  gb_tensor(&g, "t", 1, eight, 0, 32);
  GG_FAILS(gb_put(&g, 32, 40), CLF_E_FORMAT, "runs past the end");
  gb_head(&g, 3, 1, 0);
  gb_tensor(&g, "t", 1, eight, 0, 1ull << 62);
  GG_FAILS(gb_put(&g, 32, 40), CLF_E_FORMAT, "runs past the end");
  /* A tensor with no elements takes no bytes. */
  gb_head(&g, 3, 1, 0);
  gb_tensor(&g, "empty", 2, zero, 0, 0);
  TH_OK(clf_gguf_open(gb_put(&g, 32, 0), &f));
  clf_gguf_tensor t;
  TH_OK(clf_gguf_tensor_at(f, 0, &t));
  ck_assert(t.bytes == 0 && t.ndim == 2 && t.shape[0] == 3 && t.shape[1] == 0);
  TH_OK(clf_gguf_read(f, 0, NULL, 0));
  clf_gguf_close(f);
}
END_TEST

START_TEST(gguf_files_and_args) {
  char p[300];
  snprintf(p, sizeof p, "%s/absent.gguf", tmpdir);
  GG_FAILS(p, CLF_E_NOT_FOUND, "cannot open");
  GG_FAILS(tmpdir, CLF_E_IO, "not a regular file");
  clf_gguf *g = NULL;
  ck_assert_int_eq(clf_gguf_open(NULL, &g), CLF_E_INVALID_ARG);
  ck_assert_int_eq(clf_gguf_open(fixture("types.gguf"), NULL), CLF_E_INVALID_ARG);
  clf_gguf_close(NULL);
  ck_assert_uint_eq(clf_gguf_kv_count(NULL) + clf_gguf_tensor_count(NULL) + clf_gguf_version(NULL), 0);
  ck_assert_int_eq(clf_gguf_find(NULL, "x"), -1);
  int64_t n;
  ck_assert_int_eq(clf_gguf_get_int(NULL, 0, 0, &n), CLF_E_INVALID_ARG);
}
END_TEST

/* The file shrinks after it was opened: reading a tensor past its new end
 * is an I/O error naming the tensor, not a crash. */
START_TEST(gguf_read_truncated_while_open) {
  size_t len;
  unsigned char *b = slurp(fixture("types.gguf"), &len);
  const char *p = put("shrinks.gguf", b, len);
  clf_gguf *g;
  TH_OK(clf_gguf_open(p, &g));
  ck_assert_int_eq(truncate(p, (off_t)(len / 2)), 0);
  const size_t last = clf_gguf_tensor_count(g) - 1;
  clf_gguf_tensor t;
  TH_OK(clf_gguf_tensor_at(g, last, &t));
  unsigned char *dst = malloc(t.bytes);
  ck_assert_int_eq(clf_gguf_read(g, last, dst, t.bytes), CLF_E_IO);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), t.name));
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "shrank"));
  free(dst);
  clf_gguf_close(g);
  free(b);
}
END_TEST

static void gb_kv_str(gb *g, const char *key, const char *v) {
  gb_str(g, key, strlen(key));
  gb_u32(g, CLF_GGUF_STRING);
  gb_str(g, v, strlen(v));
}

/* A model's metadata and tensors: the architecture `arch`, then every key
 * of keys[] (NULL-terminated; "name=123" a u32, "name=s:text" a string,
 * "name=f:1.5" an f32 (strtod's "nan", "inf" too), "name=[2,2]" an array of
 * u32), then every tensor of tensors[] (NULL-terminated, or NULL: none),
 * each f32 [8]. */
static const char *gb_model_with(gb *g, const char *file, const char *arch, const char *const *keys,
                                 const char *const *tensors) {
  size_t n = 0, nt = 0;
  while (keys[n]) n++;
  while (tensors && tensors[nt]) nt++;
  gb_head(g, 3, nt, n + 1);
  gb_kv_str(g, "general.architecture", arch);
  for (size_t i = 0; i < n; i++) {
    char key[128];
    const char *eq = strchr(keys[i], '=');
    snprintf(key, sizeof key, "%.*s", (int)(eq - keys[i]), keys[i]);
    if (strncmp(eq + 1, "s:", 2) == 0) {
      gb_kv_str(g, key, eq + 3);
    } else if (strncmp(eq + 1, "f:", 2) == 0) {
      const float f = strtof(eq + 3, NULL);
      uint32_t bits;
      memcpy(&bits, &f, 4);
      gb_str(g, key, strlen(key));
      gb_u32(g, CLF_GGUF_F32);
      gb_u32(g, bits);
    } else if (eq[1] == '[') {
      gb_str(g, key, strlen(key));
      gb_u32(g, CLF_GGUF_ARRAY);
      gb_u32(g, CLF_GGUF_U32);
      gb_u64(g, 2);
      gb_u32(g, 2);
      gb_u32(g, 2);
    } else {
      gb_kv_u32(g, key, (uint32_t)strtoul(eq + 1, NULL, 10));
    }
  }
  for (size_t i = 0; i < nt; i++) gb_tensor(g, tensors[i], 1, (const uint64_t[]){8}, 0, 32 * i);
  while (nt && g->n % 32) g->b[g->n++] = 0;
  for (size_t i = 0; i < 32 * nt; i++) g->b[g->n++] = 0;
  return put(file, g->b, g->n);
}

static const char *gb_model(gb *g, const char *file, const char *arch, const char *const *keys) {
  return gb_model_with(g, file, arch, keys, NULL);
}

#define MODEL_FAILS(path, status, text)                                                            \
  do {                                                                                             \
    clf_model *m_ = NULL;                                                                          \
    ck_assert_int_eq(clf_model_load(th_ctx, (path), &m_), (status));                               \
    ck_assert_ptr_null(m_);                                                                        \
    ck_assert_msg(strstr(clf_last_error(th_ctx), (text)) != NULL, "\"%s\" lacks \"%s\"",        \
                  clf_last_error(th_ctx), (text));                                                 \
  } while (0)

/* A GGUF model that cannot run is refused at load, naming the key, the
 * tensor or the file: another architecture, a missing size, RoPE scaling
 * or per-layer head counts not supported, missing tensors; a directory
 * with two GGUF files and no config.json; a part of a split model. */
START_TEST(gguf_model_refusals) {
  static const char *const sizes[] = {"llama.block_count=1", "llama.embedding_length=64",
                                      "llama.feed_forward_length=128", "llama.attention.head_count=4", NULL};
  gb g;
  MODEL_FAILS(gb_model(&g, "falcon.gguf", "falcon", sizes + 4), CLF_E_UNSUPPORTED, "architecture \"falcon\" is not supported");
  MODEL_FAILS(gb_model(&g, "nb.gguf", "llama", sizes + 1), CLF_E_FORMAT, "llama.block_count is missing");
  const char *yarn[] = {sizes[0], sizes[1], sizes[2], sizes[3], "llama.rope.scaling.type=s:yarn", NULL};
  MODEL_FAILS(gb_model(&g, "yarn.gguf", "llama", yarn), CLF_E_UNSUPPORTED, "rope.scaling.type \"yarn\"");
  const char *per_layer[] = {sizes[0], sizes[1], sizes[2], sizes[3], "llama.attention.head_count_kv=[2,2]", NULL};
  MODEL_FAILS(gb_model(&g, "kv.gguf", "llama", per_layer), CLF_E_UNSUPPORTED, "head_count_kv is an array");
  const char *no_vocab[] = {sizes[0], sizes[1], sizes[2], sizes[3], NULL};
  MODEL_FAILS(gb_model(&g, "nv.gguf", "llama", no_vocab), CLF_E_FORMAT, "no vocabulary size");
  const char *ok[] = {sizes[0], sizes[1], sizes[2], sizes[3], "llama.vocab_size=32", NULL};
  char p[300];
  snprintf(p, sizeof p, "%s", gb_model(&g, "empty.gguf", "llama", ok));
  MODEL_FAILS(p, CLF_E_NOT_FOUND, "tensor \"token_embd.weight\" (\"embed_tokens.weight\" in transformers) not found");
  MODEL_FAILS(p, CLF_E_NOT_FOUND, "empty.gguf");
  static const char *const gpt2[] = {"gpt2.block_count=1", "gpt2.embedding_length=32", "gpt2.context_length=8",
                                     "gpt2.attention.head_count=4", "gpt2.vocab_size=16", NULL};
  MODEL_FAILS(gb_model(&g, "gpt2.gguf", "gpt2", gpt2), CLF_E_NOT_FOUND,
              "tensor \"token_embd.weight\" (\"wte.weight\" in transformers) not found");
  MODEL_FAILS(tmpdir, CLF_E_FORMAT, "several GGUF files"); /* and no config.json */
  MODEL_FAILS(put("m-00001-of-00002.gguf", g.b, g.n), CLF_E_UNSUPPORTED, "split GGUF model");
  gb_head(&g, 3, 0, 0);
  MODEL_FAILS(put("bare.gguf", g.b, g.n), CLF_E_FORMAT, "general.architecture (a string) is missing");
  MODEL_FAILS(put("junk.gguf", "not gguf", 8), CLF_E_FORMAT, "not a GGUF file");
  clf_gemm_shape shapes[16];
  size_t count = 0;
  TH_OK(clf_model_gemm_shapes(p, 4, shapes, 16, &count)); /* the tuner reads the same config */
  ck_assert_uint_gt(count, 0);
}
END_TEST

/* A hyper-parameter that is not finite or not in range, or a key of the
 * wrong type, is refused naming the key and the value (issue 38). */
START_TEST(gguf_model_hyperparameters) {
  static const char *const llama[] = {"llama.block_count=1", "llama.embedding_length=64",
                                      "llama.feed_forward_length=128", "llama.attention.head_count=4",
                                      "llama.vocab_size=32", NULL};
  static const struct {
    const char *key, *want;
  } bad[] = {
      {"llama.rope.freq_base=f:nan", "llama.rope.freq_base = nan is not a finite positive number"},
      {"llama.rope.freq_base=f:inf", "llama.rope.freq_base = inf is not a finite positive number"},
      {"llama.rope.freq_base=f:-inf", "llama.rope.freq_base = -inf is not a finite positive number"},
      {"llama.rope.freq_base=f:0", "llama.rope.freq_base = 0 is not a finite positive number"},
      {"llama.attention.layer_norm_rms_epsilon=f:nan", "llama.attention.layer_norm_rms_epsilon = nan is not"},
      {"llama.attention.layer_norm_rms_epsilon=f:-1", "llama.attention.layer_norm_rms_epsilon = -1 is not"},
      {"llama.rope.scaling.type=2", "llama.rope.scaling.type is of type u32, expected a string"},
      {"llama.rope.freq_base=s:1e4", "llama.rope.freq_base is of type string, expected a number"},
      {"llama.context_length=0", "llama.context_length = 0 is too small (at least 1)"},
      {"llama.context_length=f:2048", "llama.context_length is of type f32, expected an integer"},
      {"llama.attention.head_count_kv=0", "llama.attention.head_count_kv = 0 is too small (at least 1)"},
      {"llama.attention.head_count=1073741824", "llama.attention.head_count = 1073741824 is too large (at most 4096)"},
      {"llama.block_count=4097", "llama.block_count = 4097 is too large (at most 4096)"},
      {"llama.embedding_length=0", "llama.embedding_length = 0 is too small (at least 1)"},
  };
  gb g;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *keys[8], *eq = strchr(bad[i].key, '=');
    size_t n = 0;
    for (size_t k = 0; llama[k]; k++) /* the bad value in place of the good one */
      if (strncmp(llama[k], bad[i].key, (size_t)(eq - bad[i].key) + 1) != 0) keys[n++] = llama[k];
    keys[n++] = bad[i].key, keys[n] = NULL;
    MODEL_FAILS(gb_model(&g, "hp.gguf", "llama", keys), CLF_E_FORMAT, bad[i].want);
  }
  const char *linear[] = {llama[0], llama[1], llama[2], llama[3], llama[4], "llama.rope.scaling.type=s:linear",
                          "llama.rope.scaling.factor=f:nan", NULL};
  MODEL_FAILS(gb_model(&g, "lin.gguf", "llama", linear), CLF_E_FORMAT,
              "llama.rope.scaling.factor = nan is not a finite number of at least 1");
  static const char *const gpt2[] = {"gpt2.block_count=1", "gpt2.embedding_length=32", "gpt2.context_length=8",
                                     "gpt2.attention.head_count=4", "gpt2.vocab_size=16",
                                     "gpt2.attention.layer_norm_epsilon=f:nan", NULL};
  MODEL_FAILS(gb_model(&g, "gpt2.gguf", "gpt2", gpt2), CLF_E_FORMAT, "gpt2.attention.layer_norm_epsilon = nan is not");
  /* in range, the model goes on to its tensors */
  const char *fine[] = {llama[0], llama[1], llama[2], llama[3], llama[4], "llama.rope.freq_base=f:500000",
                        "llama.attention.layer_norm_rms_epsilon=f:1e-5", "llama.context_length=131072", NULL};
  MODEL_FAILS(gb_model(&g, "fine.gguf", "llama", fine), CLF_E_NOT_FOUND, "token_embd.weight");
}
END_TEST

/* nomic-bert (head size 64 / 4 = 16): what its rows do not take is refused
 * by name before any tensor is read: a key_length other than the head size
 * (the adapter reads the sizes from the metadata, whatever config names the
 * rows give them), partial rotary dims, RoPE scaling, separate q / k / v
 * (the file's attn_qkv is the fused one), a position table, a layer past
 * block_count.  (The vocabulary: a list of two tokens.) */
START_TEST(gguf_model_nomic_refusals) {
  static const char *const base[] = {"nomic-bert.block_count=1", "nomic-bert.embedding_length=64",
                                     "nomic-bert.feed_forward_length=96", "nomic-bert.attention.head_count=4",
                                     "nomic-bert.context_length=16", "nomic-bert.attention.layer_norm_epsilon=f:1e-12",
                                     "tokenizer.ggml.token_type_count=2", "tokenizer.ggml.tokens=[2]", NULL};
  static const struct {
    const char *key, *tensor;
    clf_status st;
    const char *want;
  } bad[] = {
      {"nomic-bert.attention.key_length=8", NULL, CLF_E_UNSUPPORTED,
       "nomic-bert with a head size (8) other than hidden / heads"},
      {"nomic-bert.rope.dimension_count=8", NULL, CLF_E_UNSUPPORTED,
       "nomic-bert.rope.dimension_count 8 is not the head size 16"},
      {"nomic-bert.rope.scaling.type=s:yarn", NULL, CLF_E_UNSUPPORTED, "nomic-bert.rope.scaling.type \"yarn\""},
      {"nomic-bert.rope.freq_base=f:0", NULL, CLF_E_FORMAT, "nomic-bert.rope.freq_base = 0 is not a finite positive"},
      {NULL, "blk.0.attn_q.weight", CLF_E_FORMAT, "tensor \"blk.0.attn_q.weight\" is not used by nomic-bert"},
      {NULL, "position_embd.weight", CLF_E_FORMAT, "tensor \"position_embd.weight\" is not used by nomic-bert"},
      {NULL, "blk.1.attn_qkv.weight", CLF_E_FORMAT, "is not used by nomic-bert with 1 block"},
  };
  gb g;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *keys[16], *t[] = {bad[i].tensor, NULL};
    size_t n = 0;
    for (size_t k = 0; base[k]; k++) keys[n++] = base[k];
    if (bad[i].key) keys[n++] = bad[i].key;
    keys[n] = NULL;
    MODEL_FAILS(gb_model_with(&g, "nomic.gguf", "nomic-bert", keys, bad[i].tensor ? t : NULL), bad[i].st,
                bad[i].want);
  }
  /* linear scaling passes the adapter (it writes rope_scaling) and the family refuses it */
  const char *lin[16];
  size_t n = 0;
  for (size_t k = 0; base[k]; k++) lin[n++] = base[k];
  lin[n++] = "nomic-bert.rope.scaling.type=s:linear", lin[n++] = "nomic-bert.rope.scaling.factor=f:2", lin[n] = NULL;
  MODEL_FAILS(gb_model(&g, "nomic.gguf", "nomic-bert", lin), CLF_E_UNSUPPORTED, "nomic-bert with RoPE scaling");
  /* in range, the model goes on to its tensors */
  MODEL_FAILS(gb_model(&g, "nomic.gguf", "nomic-bert", base), CLF_E_NOT_FOUND, "token_embd.weight");
}
END_TEST

/* A tensor the architecture does not use is refused by name: a layer past
 * the block count, a name no llama model has.  gpt2's output.weight (a
 * copy of the token table the converter writes) is not read, on purpose. */
START_TEST(gguf_model_stray_tensors) {
  static const char *const llama[] = {"llama.block_count=2", "llama.embedding_length=64",
                                      "llama.feed_forward_length=128", "llama.attention.head_count=4",
                                      "llama.vocab_size=32", NULL};
  static const struct {
    const char *tensor, *want;
  } bad[] = {
      {"blk.99.attn_q.weight", "tensor \"blk.99.attn_q.weight\" is not used by llama with 2 blocks"},
      {"blk.999999.ffn_up.weight", "tensor \"blk.999999.ffn_up.weight\" is not used by llama with 2 blocks"},
      {"blk.2.attn_norm.weight", "tensor \"blk.2.attn_norm.weight\" is not used by llama with 2 blocks"},
      {"blk.0.ffn_gate_exps.weight", "tensor \"blk.0.ffn_gate_exps.weight\" is not used by llama"},
      {"blk.1234567.attn_q.weight", "tensor \"blk.1234567.attn_q.weight\" is not used by llama"},
      {"position_embd.weight", "tensor \"position_embd.weight\" is not used by llama"},
  };
  gb g;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *t[] = {"blk.1.attn_norm.weight", bad[i].tensor, NULL};
    MODEL_FAILS(gb_model_with(&g, "stray.gguf", "llama", llama, t), CLF_E_FORMAT, bad[i].want);
  }
  static const char *const gpt2[] = {"gpt2.block_count=1", "gpt2.embedding_length=32", "gpt2.context_length=8",
                                     "gpt2.attention.head_count=4", "gpt2.vocab_size=16", NULL};
  const char *out[] = {"output.weight", NULL}, *stray[] = {"blk.1.ffn_up.bias", NULL};
  MODEL_FAILS(gb_model_with(&g, "gpt2.gguf", "gpt2", gpt2, out), CLF_E_NOT_FOUND, "token_embd.weight");
  MODEL_FAILS(gb_model_with(&g, "gpt2.gguf", "gpt2", gpt2, stray), CLF_E_FORMAT,
              "tensor \"blk.1.ffn_up.bias\" is not used by gpt2 with 1 block");
}
END_TEST

static void setup(void) { th_tmpdir_create(tmpdir, sizeof(tmpdir), "gguf"); }

static void teardown(void) { th_tmpdir_remove(tmpdir); }

static Suite *suite(void) {
  Suite *s = suite_create("gguf");
  TCase *tc = tcase_create("gguf");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, gguf_files_written_by_gguf_py);
  tcase_add_test(tc, gguf_dequantize_matches_gguf_py);
  tcase_add_test(tc, gguf_dtype_list_matches_gguf_py);
  tcase_add_test(tc, gguf_every_prefix_truncated);
  tcase_add_test(tc, gguf_header_rules);
  tcase_add_test(tc, gguf_metadata_rules);
  tcase_add_test(tc, gguf_alignment_rules);
  tcase_add_test(tc, gguf_tensor_rules);
  tcase_add_test(tc, gguf_data_rules);
  tcase_add_test(tc, gguf_files_and_args);
  tcase_add_test(tc, gguf_read_truncated_while_open);
  tcase_add_test(tc, gguf_model_refusals);
  tcase_add_test(tc, gguf_model_hyperparameters);
  tcase_add_test(tc, gguf_model_stray_tensors);
  tcase_add_test(tc, gguf_model_nomic_refusals);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
