/* test_safetensors.c - the safetensors reader: a file written by the
 * reference writer (tests/fixtures/loader), valid files written here, and
 * one malformed file per rule, each checked for its status and message;
 * clf_safetensors_read, also of a file truncated while open. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static char tmpdir[64];

/* Writes `len` bytes to tmpdir/name; returns the path (static buffer). */
static const char *put(const char *name, const void *bytes, size_t len) {
  static char path[256];
  snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  if (len) ck_assert_uint_eq(fwrite(bytes, 1, len, f), len);
  fclose(f);
  return path;
}

/* A safetensors file: 8-byte length (`hlen_override` if not ~0), the header
 * text, then `dlen` data bytes (0, 1, 2, ...). */
static const char *put_st(const char *name, const char *header, size_t dlen, unsigned long long hlen_override) {
  size_t hl = strlen(header);
  unsigned char *buf = malloc(8 + hl + dlen + 1);
  unsigned long long n = hlen_override != ~0ull ? hlen_override : hl;
  for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(n >> (8 * i));
  memcpy(buf + 8, header, hl);
  for (size_t i = 0; i < dlen; i++) buf[8 + hl + i] = (unsigned char)i;
  const char *p = put(name, buf, 8 + hl + dlen);
  free(buf);
  return p;
}

/* Opening must fail with `status`, a message holding `needle` and the file's
 * path, and leave *out NULL.  Errors of this API have no context. */
#define ST_FAILS(path, status, needle)                                                            \
  do {                                                                                            \
    clf_safetensors *st_ = (clf_safetensors *)1;                                                  \
    const char *p_ = (path);                                                                      \
    clf_status s_ = clf_safetensors_open(p_, &st_);                                               \
    ck_assert_msg(s_ == (status), "%s: got %s, expected %s (%s)", p_, clf_status_name(s_),       \
                  clf_status_name(status), clf_last_error(NULL));                                 \
    ck_assert_ptr_null(st_);                                                                      \
    ck_assert_msg(strstr(clf_last_error(NULL), (needle)), "message \"%s\" lacks \"%s\"",         \
                  clf_last_error(NULL), (needle));                                                \
    ck_assert_msg(strstr(clf_last_error(NULL), p_), "message \"%s\" does not name the file",     \
                  clf_last_error(NULL));                                                          \
  } while (0)

/* A header of one tensor "t" of U8 [n] at [b, e]. */
static const char *one_u8(char *buf, size_t cap, size_t n, size_t b, size_t e) {
  snprintf(buf, cap, "{\"t\":{\"dtype\":\"U8\",\"shape\":[%zu],\"data_offsets\":[%zu,%zu]}}", n, b, e);
  return buf;
}

START_TEST(st_reference_file) {
  /* Written by safetensors.torch.save_file (make_loader_fixtures.py). */
  char path[512];
  snprintf(path, sizeof(path), "%s/loader/ref.safetensors", getenv("CLF_FIXTURES"));
  clf_safetensors *st = NULL;
  ck_assert_msg(clf_safetensors_open(path, &st) == CLF_OK, "%s", clf_last_error(NULL));
  ck_assert_uint_eq(clf_safetensors_count(st), 6);
  ck_assert_str_eq(clf_safetensors_metadata(st, "format"), "pt");
  ck_assert_str_eq(clf_safetensors_metadata(st, "note"), "loader test");
  ck_assert_ptr_null(clf_safetensors_metadata(st, "absent"));

  /* info() goes in offset order: the writer put I64 first. */
  clf_st_info in;
  ck_assert_int_eq(clf_safetensors_info(st, 0, &in), CLF_OK);
  ck_assert_str_eq(in.name, "d.i64");
  ck_assert_str_eq(in.dtype, "I64");
  int64_t i64[3];
  memcpy(i64, in.data, sizeof(i64));
  ck_assert(i64[0] == -1 && i64[1] == 0 && i64[2] == (int64_t)1 << 40);

  ck_assert_int_eq(clf_safetensors_find(st, "a.f32", &in), CLF_OK);
  ck_assert_str_eq(in.dtype, "F32");
  ck_assert_int_eq(in.ndim, 2);
  ck_assert(in.shape[0] == 2 && in.shape[1] == 3 && in.bytes == 24);
  for (int i = 0; i < 6; i++) {
    float v;
    memcpy(&v, (const char *)in.data + 4 * i, 4);
    ck_assert(v == i * 0.5f - 1.0f);
  }
  ck_assert_int_eq(clf_safetensors_find(st, "e.empty", &in), CLF_OK);
  ck_assert(in.ndim == 2 && in.shape[0] == 0 && in.shape[1] == 4 && in.bytes == 0);
  ck_assert_int_eq(clf_safetensors_find(st, "b.f16", &in), CLF_OK);
  ck_assert(in.bytes == 16 && strcmp(in.dtype, "F16") == 0);
  uint16_t h[8];
  memcpy(h, in.data, sizeof(h));
  ck_assert_uint_eq(h[2], 0x3C00); /* 1.0 */
  ck_assert_uint_eq(h[6], 0x7C00); /* inf */
  ck_assert_int_eq(clf_safetensors_find(st, "c.bf16", &in), CLF_OK);
  ck_assert(strcmp(in.dtype, "BF16") == 0 && in.bytes == 8);
  ck_assert_int_eq(clf_safetensors_find(st, "f.u8", &in), CLF_OK);
  ck_assert(in.bytes == 7 && ((const unsigned char *)in.data)[6] == 6);

  ck_assert_int_eq(clf_safetensors_find(st, "missing", &in), CLF_E_NOT_FOUND);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "tensor \"missing\" not found in"));
  ck_assert_int_eq(clf_safetensors_info(st, 6, &in), CLF_E_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "index 6 out of range"));
  ck_assert_int_eq(clf_safetensors_find(st, NULL, &in), CLF_E_INVALID_ARG);
  ck_assert_int_eq(clf_safetensors_info(NULL, 0, &in), CLF_E_INVALID_ARG);
  ck_assert_uint_eq(clf_safetensors_count(NULL), 0);
  clf_safetensors_close(st);
  clf_safetensors_close(NULL);
}
END_TEST

START_TEST(st_valid_variants) {
  /* Keys out of offset order (allowed: the reference reader sorts them by
   * offsets), leading and trailing whitespace, a zero-size tensor between two
   * others, a scalar, an 8-dim tensor, a sub-byte dtype, null metadata, and
   * extra fields in an entry (ignored, as the reference reader does). */
  const char *hdr =
      "  {\"z\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[6,10]},"
      "\"__metadata__\":null,"
      "\"y\":{\"dtype\":\"F16\",\"shape\":[0,3],\"data_offsets\":[6,6],\"extra\":1},"
      "\"x\":{\"dtype\":\"I16\",\"shape\":[1,1,1,1,1,1,1,3],\"data_offsets\":[0,6]},"
      "\"w\":{\"dtype\":\"F4\",\"shape\":[2,2],\"data_offsets\":[10,12]}}  \n";
  const char *p = put_st("valid.safetensors", hdr, 12, ~0ull);
  clf_safetensors *st = NULL;
  ck_assert_msg(clf_safetensors_open(p, &st) == CLF_OK, "%s", clf_last_error(NULL));
  ck_assert_uint_eq(clf_safetensors_count(st), 4);
  const char *order[] = {"x", "y", "z", "w"};
  for (size_t i = 0; i < 4; i++) {
    clf_st_info in;
    ck_assert_int_eq(clf_safetensors_info(st, i, &in), CLF_OK);
    ck_assert_str_eq(in.name, order[i]);
  }
  clf_st_info in;
  ck_assert_int_eq(clf_safetensors_find(st, "z", &in), CLF_OK);
  ck_assert(in.ndim == 0 && in.bytes == 4 && ((const unsigned char *)in.data)[0] == 6);
  ck_assert_int_eq(clf_safetensors_find(st, "x", &in), CLF_OK);
  ck_assert(in.ndim == 8 && in.shape[7] == 3);
  ck_assert_int_eq(clf_safetensors_find(st, "y", &in), CLF_OK);
  ck_assert(in.bytes == 0 && in.shape[0] == 0 && in.shape[1] == 3);
  clf_safetensors_close(st);

  /* No tensors at all: "{}" and an empty data section. */
  p = put_st("empty.safetensors", "{}", 0, ~0ull);
  ck_assert_int_eq(clf_safetensors_open(p, &st), CLF_OK);
  ck_assert_uint_eq(clf_safetensors_count(st), 0);
  ck_assert_int_eq(clf_safetensors_find(st, "t", &in), CLF_E_NOT_FOUND);
  clf_safetensors_close(st);
}
END_TEST

START_TEST(st_truncated) {
  char h[160];
  one_u8(h, sizeof(h), 4, 0, 4);
  /* The header cut short: its length says more than the file holds. */
  ST_FAILS(put_st("cut_header.safetensors", h, 0, strlen(h) + 10), CLF_E_FORMAT, "runs past the end of the file");
  /* The data cut short. */
  ST_FAILS(put_st("cut_data.safetensors", h, 3, ~0ull), CLF_E_FORMAT, "run past the end of the data");
  /* Not even the length. */
  ST_FAILS(put("tiny.safetensors", "abc", 3), CLF_E_FORMAT, "too small for the 8-byte header length");
  ST_FAILS(put("zero.safetensors", "", 0), CLF_E_FORMAT, "too small");
}
END_TEST

START_TEST(st_header_length) {
  char h[160];
  one_u8(h, sizeof(h), 4, 0, 4);
  /* The reference reader's cap is 100,000,000 bytes. */
  ST_FAILS(put_st("cap.safetensors", h, 4, 100000001ull), CLF_E_FORMAT, "larger than the limit of 100000000");
  ST_FAILS(put_st("huge.safetensors", h, 4, ~0ull - 1), CLF_E_FORMAT, "larger than the limit");
  /* Under the cap but longer than the file. */
  ST_FAILS(put_st("long.safetensors", h, 4, 5000), CLF_E_FORMAT, "header length 5000 runs past the end");
}
END_TEST

START_TEST(st_invalid_json) {
  ST_FAILS(put_st("json1.safetensors", "{\"t\":{\"dtype\":", 0, ~0ull), CLF_E_FORMAT, "not valid JSON");
  ST_FAILS(put_st("json2.safetensors", "{} x", 0, ~0ull), CLF_E_FORMAT, "not valid JSON");
  ST_FAILS(put_st("json3.safetensors", "", 0, ~0ull), CLF_E_FORMAT, "not valid JSON");
  /* A NUL inside the header (cJSON would stop there). */
  const char nul[] = "{}\0 ";
  unsigned char buf[12] = {4, 0, 0, 0, 0, 0, 0, 0};
  memcpy(buf + 8, nul, 4);
  ST_FAILS(put("nul.safetensors", buf, 12), CLF_E_FORMAT, "not valid JSON");
  /* Invalid UTF-8. */
  ST_FAILS(put_st("utf8.safetensors", "{\"\xff\":1}", 0, ~0ull), CLF_E_FORMAT, "not valid UTF-8");
}
END_TEST

START_TEST(st_not_object) {
  ST_FAILS(put_st("arr.safetensors", "[1, 2]", 0, ~0ull), CLF_E_FORMAT, "header is an array, expected a JSON object");
  ST_FAILS(put_st("entry.safetensors", "{\"t\": 3}", 0, ~0ull), CLF_E_FORMAT,
           "tensor \"t\": header entry is a number, expected an object");
  ST_FAILS(put_st("meta1.safetensors", "{\"__metadata__\": [1]}", 0, ~0ull), CLF_E_FORMAT,
           "\"__metadata__\" is an array, expected an object");
  ST_FAILS(put_st("meta2.safetensors", "{\"__metadata__\": {\"k\": 1}}", 0, ~0ull), CLF_E_FORMAT,
           "\"__metadata__\" value \"k\" is a number, expected a string");
}
END_TEST

START_TEST(st_fields) {
  ST_FAILS(put_st("f1.safetensors", "{\"t\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1, ~0ull), CLF_E_FORMAT,
           "tensor \"t\": missing field \"dtype\"");
  ST_FAILS(put_st("f2.safetensors", "{\"t\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1, ~0ull), CLF_E_FORMAT,
           "missing field \"shape\"");
  ST_FAILS(put_st("f3.safetensors", "{\"t\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, ~0ull), CLF_E_FORMAT,
           "missing field \"data_offsets\"");
  ST_FAILS(put_st("f4.safetensors", "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,1]}}", 1, ~0ull),
           CLF_E_FORMAT, "data_offsets must be [begin, end]");
  ST_FAILS(put_st("f5.safetensors", "{\"t\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[1,0]}}", 1, ~0ull),
           CLF_E_FORMAT, "end before they begin");
  ST_FAILS(put_st("f6.safetensors", "{\"t\":{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,1]}}", 1, ~0ull),
           CLF_E_FORMAT, "shape[0] is not a non-negative integer");
  ST_FAILS(put_st("f7.safetensors", "{\"t\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1, ~0ull),
           CLF_E_FORMAT, "shape[0] is not a non-negative integer");
  ST_FAILS(put_st("f8.safetensors", "{\"t\":{\"dtype\":\"U8\",\"shape\":\"1\",\"data_offsets\":[0,1]}}", 1, ~0ull),
           CLF_E_FORMAT, "shape is a string, expected an array");
  ST_FAILS(put_st("f9.safetensors",
                  "{\"t\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1, ~0ull),
           CLF_E_FORMAT, "shape has 9 dims, more than 8");
  ST_FAILS(put_st("f10.safetensors", "{\"t\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2, ~0ull),
           CLF_E_FORMAT, "do not fill whole bytes");
  ST_FAILS(put_st("f11.safetensors", "{\"t\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,1]}}", 1, ~0ull),
           CLF_E_FORMAT, "dtype is a number, expected a string");
}
END_TEST

START_TEST(st_unknown_dtype) {
  ST_FAILS(put_st("dt1.safetensors", "{\"t\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, ~0ull),
           CLF_E_FORMAT, "tensor \"t\": unknown dtype \"f32\"");
  ST_FAILS(put_st("dt2.safetensors", "{\"t\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, ~0ull),
           CLF_E_FORMAT, "unknown dtype \"Q4\"");
}
END_TEST

START_TEST(st_size_mismatch) {
  ST_FAILS(put_st("sz.safetensors", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, ~0ull),
           CLF_E_FORMAT, "tensor \"t\": shape x dtype size is 8 bytes but data_offsets [0, 4] hold 4");
  ST_FAILS(put_st("sz2.safetensors", "{\"t\":{\"dtype\":\"BF16\",\"shape\":[3,0],\"data_offsets\":[0,2]}}", 2, ~0ull),
           CLF_E_FORMAT, "is 0 bytes but data_offsets [0, 2] hold 2");
}
END_TEST

START_TEST(st_overflow) {
  /* 2^32 cubed overflows 64 bits; so does 2^62 elements of 8 bytes. */
  ST_FAILS(put_st("of1.safetensors",
                  "{\"t\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,1]}}",
                  1, ~0ull),
           CLF_E_FORMAT, "tensor \"t\": shape x dtype size overflows");
  ST_FAILS(put_st("of2.safetensors",
                  "{\"t\":{\"dtype\":\"F64\",\"shape\":[4611686018427387,1000],\"data_offsets\":[0,1]}}", 1, ~0ull),
           CLF_E_FORMAT, "overflows");
  /* Numbers past 2^53 cannot be held exactly: rejected, not rounded. */
  ST_FAILS(put_st("of3.safetensors",
                  "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,18446744073709551616]}}", 1, ~0ull),
           CLF_E_FORMAT, "data_offsets must be [begin, end]");
}
END_TEST

START_TEST(st_offsets) {
  /* Overlap: b starts inside a. */
  ST_FAILS(put_st("ov.safetensors",
                  "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
                  "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]}}",
                  12, ~0ull),
           CLF_E_FORMAT, "tensor \"b\": data_offsets [4, 12] overlap the previous tensor");
  /* The same range twice is an overlap too. */
  ST_FAILS(put_st("ov2.safetensors",
                  "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                  "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
                  4, ~0ull),
           CLF_E_FORMAT, "overlap");
  /* A gap between a and b. */
  ST_FAILS(put_st("gap.safetensors",
                  "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                  "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,12]}}",
                  12, ~0ull),
           CLF_E_FORMAT, "tensor \"b\": data_offsets [8, 12] leave a gap");
  /* Data that starts late (a gap at 0). */
  char h[160];
  ST_FAILS(put_st("gap0.safetensors", one_u8(h, sizeof(h), 4, 2, 6), 6, ~0ull), CLF_E_FORMAT, "leave a gap");
  /* Offsets past the data. */
  ST_FAILS(put_st("past.safetensors", one_u8(h, sizeof(h), 8, 0, 8), 4, ~0ull), CLF_E_FORMAT,
           "tensor \"t\": data_offsets [0, 8] run past the end of the data (4 bytes");
  /* Bytes after the last tensor (the reference reader's incomplete buffer). */
  ST_FAILS(put_st("tail.safetensors", one_u8(h, sizeof(h), 4, 0, 4), 6, ~0ull), CLF_E_FORMAT,
           "bytes after the last tensor");
}
END_TEST

START_TEST(st_duplicates) {
  /* The reference reader keeps the last of two equal keys; clformer rejects
   * the file, so that no tensor silently hides another. */
  ST_FAILS(put_st("dup.safetensors",
                  "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]},"
                  "\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}",
                  2, ~0ull),
           CLF_E_FORMAT, "tensor \"a\": the name appears twice");
  ST_FAILS(put_st("dupm.safetensors", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, ~0ull), CLF_E_FORMAT,
           "\"__metadata__\" appears twice");
}
END_TEST

START_TEST(st_files_and_args) {
  char p[256];
  snprintf(p, sizeof(p), "%s/absent.safetensors", tmpdir);
  ST_FAILS(p, CLF_E_NOT_FOUND, "cannot open");
  ST_FAILS(tmpdir, CLF_E_IO, "not a regular file");
  /* issue 11: a FIFO with no writer hung the open; a device read on */
  snprintf(p, sizeof(p), "%s/fifo.safetensors", tmpdir);
  ck_assert_int_eq(mkfifo(p, 0600), 0);
  ST_FAILS(p, CLF_E_IO, "fifo.safetensors: not a regular file");
  ST_FAILS("/dev/zero", CLF_E_IO, "/dev/zero: not a regular file");
  snprintf(p, sizeof(p), "%s/absent.safetensors", tmpdir);
  clf_safetensors *st = NULL;
  ck_assert_int_eq(clf_safetensors_open(NULL, &st), CLF_E_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "path is NULL"));
  ck_assert_int_eq(clf_safetensors_open(p, NULL), CLF_E_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "out is NULL"));
}
END_TEST

/* Issue 21: a file truncated to half while open.  clf_safetensors_read of
 * the tensor before the new end still copies it; of the tensor past it,
 * CLF_E_IO naming the file and saying it shrank (through the mapping, the
 * same bytes would be SIGBUS).  Its arguments are checked. */
START_TEST(st_read_truncated_while_open) {
  char h[256];
  snprintf(h, sizeof h,
           "{\"a\":{\"dtype\":\"U8\",\"shape\":[100],\"data_offsets\":[0,100]},"
           "\"b\":{\"dtype\":\"U8\",\"shape\":[5,4000],\"data_offsets\":[100,20100]}}");
  const size_t size = 8 + strlen(h) + 20100;
  char path[256];
  snprintf(path, sizeof path, "%s", put_st("shrinks.safetensors", h, 20100, ~0ull));
  clf_safetensors *st = NULL;
  ck_assert_msg(clf_safetensors_open(path, &st) == CLF_OK, "%s", clf_last_error(NULL));
  clf_st_info a, b;
  ck_assert_int_eq(clf_safetensors_find(st, "a", &a), CLF_OK);
  ck_assert_int_eq(clf_safetensors_find(st, "b", &b), CLF_OK);
  unsigned char *buf = malloc(b.bytes);
  /* before: both read, the data bytes 0, 1, 2, ... (mod 256) of put_st */
  ck_assert_int_eq(clf_safetensors_read(st, &b, buf), CLF_OK);
  for (size_t i = 0; i < b.bytes; i++) ck_assert_uint_eq(buf[i], (unsigned char)(100 + i));
  ck_assert_int_eq(truncate(path, (off_t)(size / 2)), 0);
  memset(buf, 0xAA, b.bytes);
  ck_assert_int_eq(clf_safetensors_read(st, &a, buf), CLF_OK);
  for (size_t i = 0; i < a.bytes; i++) ck_assert_uint_eq(buf[i], (unsigned char)i);
  ck_assert_int_eq(clf_safetensors_read(st, &b, buf), CLF_E_IO);
  const char *msg = clf_last_error(NULL);
  ck_assert_msg(strstr(msg, path) && strstr(msg, "tensor \"b\"") && strstr(msg, "shrank"), "message: %s", msg);
  char at[64]; /* where the file now ends */
  snprintf(at, sizeof at, "ends at byte %zu, before byte %zu", size / 2, size);
  ck_assert_msg(strstr(msg, at), "message \"%s\" lacks \"%s\"", msg, at);
  /* arguments */
  clf_st_info other = b;
  other.name = "c";
  ck_assert_int_eq(clf_safetensors_read(st, &other, buf), CLF_E_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "no tensor \"c\" of 20000 bytes"));
  other = a, other.bytes = 99; /* a's name, another size: not this file's */
  ck_assert_int_eq(clf_safetensors_read(st, &other, buf), CLF_E_INVALID_ARG);
  ck_assert_int_eq(clf_safetensors_read(NULL, &a, buf), CLF_E_INVALID_ARG);
  ck_assert_int_eq(clf_safetensors_read(st, NULL, buf), CLF_E_INVALID_ARG);
  ck_assert_int_eq(clf_safetensors_read(st, &a, NULL), CLF_E_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "dst is NULL"));
  free(buf);
  clf_safetensors_close(st);
  /* a zero-size tensor reads (nothing) into NULL */
  ck_assert_int_eq(clf_safetensors_open(put_st("z.safetensors", "{\"z\":{\"dtype\":\"F32\",\"shape\":[0],"
                                                                  "\"data_offsets\":[0,0]}}", 0, ~0ull), &st),
                   CLF_OK);
  ck_assert_int_eq(clf_safetensors_info(st, 0, &a), CLF_OK);
  ck_assert_int_eq(clf_safetensors_read(st, &a, NULL), CLF_OK);
  clf_safetensors_close(st);
}
END_TEST

static void setup(void) { th_tmpdir_create(tmpdir, sizeof(tmpdir), "st"); }

static void teardown(void) { th_tmpdir_remove(tmpdir); }

static Suite *suite(void) {
  Suite *s = suite_create("safetensors");
  TCase *tc = tcase_create("safetensors");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, st_reference_file);
  tcase_add_test(tc, st_valid_variants);
  tcase_add_test(tc, st_truncated);
  tcase_add_test(tc, st_header_length);
  tcase_add_test(tc, st_invalid_json);
  tcase_add_test(tc, st_not_object);
  tcase_add_test(tc, st_fields);
  tcase_add_test(tc, st_unknown_dtype);
  tcase_add_test(tc, st_size_mismatch);
  tcase_add_test(tc, st_overflow);
  tcase_add_test(tc, st_offsets);
  tcase_add_test(tc, st_duplicates);
  tcase_add_test(tc, st_files_and_args);
  tcase_add_test(tc, st_read_truncated_while_open);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
