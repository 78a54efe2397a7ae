/* test_npy.c - .npy files: round trips of every dtype and of 0-6 dims,
 * byte-for-byte agreement with numpy.save (tests/fixtures/loader), and
 * malformed files (magic, header, fortran order, truncation, dtypes). */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static char tmpdir[64];

static const char *tpath(const char *name) {
  static char path[256];
  snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
  return path;
}

static const char *put(const char *name, const void *bytes, size_t len) {
  const char *path = tpath(name);
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  if (len) ck_assert_uint_eq(fwrite(bytes, 1, len, f), len);
  fclose(f);
  return path;
}

/* A v1.0 .npy with header text `dict` (padded to 64 bytes) and `dlen` data
 * bytes. */
static const char *put_npy(const char *name, const char *dict, size_t dlen) {
  size_t n = strlen(dict), total = (10 + n + 1 + 63) / 64 * 64, hl = total - 10;
  unsigned char *b = calloc(total + dlen + 1, 1);
  memcpy(b, "\x93NUMPY\x01\x00", 8);
  b[8] = (unsigned char)(hl & 0xFF);
  b[9] = (unsigned char)(hl >> 8);
  memcpy(b + 10, dict, n);
  memset(b + 10 + n, ' ', hl - n - 1);
  b[total - 1] = '\n';
  const char *p = put(name, b, total + dlen);
  free(b);
  return p;
}

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  fseek(f, 0, SEEK_END);
  *len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc(*len + 1);
  ck_assert_uint_eq(fread(b, 1, *len, f), *len);
  fclose(f);
  return b;
}

/* Reading must fail with `status` and a message naming `needle` and the
 * file; out.data stays NULL.  These errors have no context. */
#define NPY_FAILS(path, status, needle)                                                         \
  do {                                                                                          \
    clf_array a_;                                                                               \
    const char *p_ = (path);                                                                    \
    clf_status s_ = clf_npy_read(p_, &a_);                                                      \
    ck_assert_msg(s_ == (status), "%s: got %s, expected %s (%s)", p_, clf_status_name(s_),     \
                  clf_status_name(status), clf_last_error(NULL));                               \
    ck_assert_ptr_null(a_.data);                                                                \
    ck_assert_msg(strstr(clf_last_error(NULL), (needle)), "message \"%s\" lacks \"%s\"",       \
                  clf_last_error(NULL), (needle));                                              \
    ck_assert_msg(strstr(clf_last_error(NULL), p_), "message \"%s\" does not name the file",   \
                  clf_last_error(NULL));                                                        \
  } while (0)

START_TEST(npy_round_trip) {
  /* Every dtype with 0 (scalar) to 6 dims, odd sizes and a zero-size dim. */
  static const size_t shapes[][6] = {{0}, {7}, {1, 33}, {3, 1, 5}, {2, 3, 1, 7}, {1, 2, 1, 3, 2}, {2, 1, 3, 1, 2, 3}};
  const clf_dtype dts[] = {CLF_F32, CLF_F16, CLF_I32, CLF_I64};
  for (size_t d = 0; d < 4; d++)
    for (int nd = 0; nd <= 6; nd++)
      for (int empty = 0; empty < (nd ? 2 : 1); empty++) {
        clf_array a = {.dtype = dts[d], .ndim = nd};
        for (int i = 0; i < nd; i++) a.shape[i] = shapes[nd][i];
        if (empty) a.shape[nd - 1] = 0;
        size_t bytes = clf_array_numel(&a) * clf_dtype_size(dts[d]);
        unsigned char *data = malloc(bytes + 1);
        for (size_t i = 0; i < bytes; i++) data[i] = (unsigned char)(i * 37 + d);
        a.data = data;
        char name[64];
        snprintf(name, sizeof(name), "rt_%zu_%d_%d.npy", d, nd, empty);
        const char *p = tpath(name);
        ck_assert_msg(clf_npy_write(p, &a) == CLF_OK, "%s", clf_last_error(NULL));
        clf_array b;
        ck_assert_msg(clf_npy_read(p, &b) == CLF_OK, "%s", clf_last_error(NULL));
        ck_assert_int_eq(b.dtype, dts[d]);
        ck_assert_int_eq(b.ndim, nd);
        for (int i = 0; i < nd; i++) ck_assert_uint_eq(b.shape[i], a.shape[i]);
        ck_assert_uint_eq(clf_array_numel(&b), clf_array_numel(&a));
        ck_assert_ptr_nonnull(b.data);
        ck_assert_int_eq(memcmp(b.data, data, bytes), 0);
        snprintf(name, sizeof(name), "rt_%zu_%d_%d", d, nd, empty);
        ck_assert_str_eq(b.name, name);
        clf_array_free(&b);
        ck_assert_ptr_null(b.data);
        free(data);
      }
  clf_array_free(NULL);
}
END_TEST

/* Reads fixture `name` (written by numpy.save), checks its dtype and shape,
 * writes it back and compares the bytes with numpy's. */
static clf_array check_numpy_file(const char *name, clf_dtype dt, int ndim, const size_t *shape) {
  char path[512];
  snprintf(path, sizeof(path), "%s/loader/%s", getenv("CLF_FIXTURES"), name);
  clf_array a;
  ck_assert_msg(clf_npy_read(path, &a) == CLF_OK, "%s", clf_last_error(NULL));
  ck_assert_int_eq(a.dtype, dt);
  ck_assert_int_eq(a.ndim, ndim);
  for (int i = 0; i < ndim; i++) ck_assert_uint_eq(a.shape[i], shape[i]);
  ck_assert_int_eq(clf_npy_write(tpath(name), &a), CLF_OK);
  size_t n1, n2;
  unsigned char *ref = slurp(path, &n1), *got = slurp(tpath(name), &n2);
  ck_assert_uint_eq(n1, n2);
  ck_assert_msg(memcmp(ref, got, n1) == 0, "%s: bytes differ from numpy.save's", name);
  free(ref);
  free(got);
  return a;
}

START_TEST(npy_matches_numpy) {
  clf_array a = check_numpy_file("f32_2x3.npy", CLF_F32, 2, TH_SHAPE(2, 3));
  for (int i = 0; i < 6; i++) ck_assert(((float *)a.data)[i] == i * 0.25f - 0.5f);
  clf_array_free(&a);
  a = check_numpy_file("f16_5.npy", CLF_F16, 1, TH_SHAPE(5));
  static const uint16_t h[5] = {0xC000, 0xBC00, 0x0000, 0x3C00, 0x4000}; /* -2 -1 0 1 2 */
  ck_assert_int_eq(memcmp(a.data, h, sizeof(h)), 0);
  clf_array_free(&a);
  a = check_numpy_file("i32_3x1x2.npy", CLF_I32, 3, TH_SHAPE(3, 1, 2));
  for (int i = 0; i < 6; i++) ck_assert_int_eq(((int32_t *)a.data)[i], 7 * i - 20);
  clf_array_free(&a);
  a = check_numpy_file("i64_scalar.npy", CLF_I64, 0, NULL);
  ck_assert(((int64_t *)a.data)[0] == (int64_t)1 << 40);
  ck_assert_uint_eq(clf_array_numel(&a), 1);
  clf_array_free(&a);
  a = check_numpy_file("i64_0x3.npy", CLF_I64, 2, TH_SHAPE(0, 3));
  ck_assert_uint_eq(clf_array_numel(&a), 0);
  clf_array_free(&a);
  /* numpy's bool: the descr is named in the error. */
  char path[512];
  snprintf(path, sizeof(path), "%s/loader/bool_2.npy", getenv("CLF_FIXTURES"));
  NPY_FAILS(path, CLF_E_DTYPE, "unsupported .npy dtype '|b1'");
}
END_TEST

START_TEST(npy_header_variants) {
  /* Keys in another order, double quotes, no trailing comma. */
  const char *p = put_npy("v1.npy", "{\"shape\": (2,), 'fortran_order': False, 'descr': '<i4'}", 8);
  clf_array a;
  ck_assert_msg(clf_npy_read(p, &a) == CLF_OK, "%s", clf_last_error(NULL));
  ck_assert(a.dtype == CLF_I32 && a.ndim == 1 && a.shape[0] == 2);
  clf_array_free(&a);
  /* Format 2.0: a 4-byte header length. */
  const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1), }";
  unsigned char b[128] = "\x93NUMPY\x02\x00";
  size_t hl = 128 - 12 - 4;
  b[8] = (unsigned char)hl;
  memcpy(b + 12, dict, strlen(dict));
  memset(b + 12 + strlen(dict), ' ', hl - strlen(dict) - 1);
  b[12 + hl - 1] = '\n';
  float one = 1.0f;
  memcpy(b + 12 + hl, &one, 4);
  p = put("v2.npy", b, 128);
  ck_assert_msg(clf_npy_read(p, &a) == CLF_OK, "%s", clf_last_error(NULL));
  ck_assert(a.dtype == CLF_F32 && a.ndim == 2 && ((float *)a.data)[0] == 1.0f);
  clf_array_free(&a);
}
END_TEST

START_TEST(npy_bad_files) {
  NPY_FAILS(put("magic.npy", "\x93NUMPX\x01\x00\x10\x00{}", 12), CLF_E_FORMAT, "bad magic");
  NPY_FAILS(put("short.npy", "\x93NUM", 4), CLF_E_FORMAT, "bad magic");
  NPY_FAILS(put("version.npy", "\x93NUMPY\x09\x00\x10\x00{}", 12), CLF_E_FORMAT, "format version 9.0");
  NPY_FAILS(put("hlen.npy", "\x93NUMPY\x01\x00\x50\x00{}", 12), CLF_E_FORMAT, "runs past the end of the file");
  NPY_FAILS(put_npy("fortran.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16),
            CLF_E_FORMAT, "fortran_order True is not supported");
  NPY_FAILS(put_npy("trunc.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20),
            CLF_E_FORMAT, "data truncated: 20 bytes, expected 24");
  NPY_FAILS(put_npy("extra.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", 9), CLF_E_FORMAT,
            "1 extra bytes after the .npy data");
  NPY_FAILS(put_npy("be.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", 4), CLF_E_DTYPE,
            "unsupported .npy dtype '>f4'");
  NPY_FAILS(put_npy("u1.npy", "{'descr': '<u1', 'fortran_order': False, 'shape': (1,), }", 1), CLF_E_DTYPE,
            "'<u1'");
  NPY_FAILS(put_npy("f8.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", 8), CLF_E_DTYPE,
            "'<f8'");
  NPY_FAILS(put_npy("struct.npy", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", 4),
            CLF_E_DTYPE, "not a simple type string");
  NPY_FAILS(put_npy("dims.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1), }", 4),
            CLF_E_FORMAT, "more than 6 dims");
  NPY_FAILS(put_npy("nokey.npy", "{'descr': '<f4', 'shape': (1,), }", 4), CLF_E_FORMAT, "lacks 'fortran_order'");
  NPY_FAILS(put_npy("badkey.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4),
            CLF_E_FORMAT, "unexpected or repeated key 'x'");
  NPY_FAILS(put_npy("badshape.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1), }", 4), CLF_E_FORMAT,
            "malformed .npy shape");
  NPY_FAILS(put_npy("negshape.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 4),
            CLF_E_FORMAT, "malformed .npy shape");
  NPY_FAILS(put_npy("notdict.npy", "['descr']", 4), CLF_E_FORMAT, "not a dict");
  NPY_FAILS(put_npy("garbage.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x", 4),
            CLF_E_FORMAT, "text after the dict");
  NPY_FAILS(tpath("absent.npy"), CLF_E_NOT_FOUND, "cannot open");
  clf_array a;
  ck_assert_int_eq(clf_npy_read(NULL, &a), CLF_E_INVALID_ARG);
  ck_assert_int_eq(clf_npy_read(tpath("absent.npy"), NULL), CLF_E_INVALID_ARG);
}
END_TEST

/* A directory or a FIFO given as the .npy file is refused at once
 * (CLF_E_IO naming it); a FIFO with no writer must not hang. */
START_TEST(npy_not_regular_files) {
  const char *p = tpath("dir.npy");
  ck_assert_int_eq(mkdir(p, 0700), 0);
  NPY_FAILS(p, CLF_E_IO, "is not a regular file");
  ck_assert_int_eq(rmdir(p), 0);
  p = tpath("fifo.npy");
  ck_assert_int_eq(mkfifo(p, 0600), 0);
  NPY_FAILS(p, CLF_E_IO, "is not a regular file");
}
END_TEST

START_TEST(npy_write_errors) {
  float x[2] = {1, 2};
  clf_array a = {.dtype = CLF_F32, .ndim = 1, .shape = {2}, .data = x};
  ck_assert_int_eq(clf_npy_write(NULL, &a), CLF_E_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "path is NULL"));
  ck_assert_int_eq(clf_npy_write(tpath("w.npy"), NULL), CLF_E_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "array is NULL"));
  a.dtype = (clf_dtype)9;
  ck_assert_int_eq(clf_npy_write(tpath("w.npy"), &a), CLF_E_DTYPE);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "unknown dtype 9"));
  a.dtype = CLF_F32;
  a.ndim = 7;
  ck_assert_int_eq(clf_npy_write(tpath("w.npy"), &a), CLF_E_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "ndim is 7"));
  a.ndim = 1;
  a.data = NULL;
  ck_assert_int_eq(clf_npy_write(tpath("w.npy"), &a), CLF_E_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "data is NULL"));
  a.data = x;
  char bad[300];
  snprintf(bad, sizeof(bad), "%s/no/such/dir/w.npy", tmpdir);
  ck_assert_int_eq(clf_npy_write(bad, &a), CLF_E_IO);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "cannot create"));
  /* a directory where the file goes: refused and left as it was, with no
   * temporary file beside it (issue 11, as for PNG writes) */
  const char *d = tpath("adir.npy");
  ck_assert_int_eq(mkdir(d, 0700), 0);
  ck_assert_int_eq(clf_npy_write(d, &a), CLF_E_IO);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "adir.npy failed"));
  struct stat sb;
  ck_assert(stat(d, &sb) == 0 && S_ISDIR(sb.st_mode));
  ck_assert_int_eq(rmdir(d), 0);
  char cmd[400];
  snprintf(cmd, sizeof(cmd), "ls %s | grep -c tmp", tmpdir);
  FILE *ls = popen(cmd, "r");
  int leftovers = -1;
  ck_assert_int_eq(fscanf(ls, "%d", &leftovers), 1);
  pclose(ls);
  ck_assert_int_eq(leftovers, 0);
  /* Writing over an existing file replaces it. */
  ck_assert_int_eq(clf_npy_write(tpath("w.npy"), &a), CLF_OK);
  a.shape[0] = 1;
  ck_assert_int_eq(clf_npy_write(tpath("w.npy"), &a), CLF_OK);
  clf_array b;
  ck_assert_int_eq(clf_npy_read(tpath("w.npy"), &b), CLF_OK);
  ck_assert(b.shape[0] == 1 && ((float *)b.data)[0] == 1.0f);
  clf_array_free(&b);
}
END_TEST

static void setup(void) { th_tmpdir_create(tmpdir, sizeof(tmpdir), "npy"); }

static void teardown(void) { th_tmpdir_remove(tmpdir); }

static Suite *suite(void) {
  Suite *s = suite_create("npy");
  TCase *tc = tcase_create("npy");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, npy_round_trip);
  tcase_add_test(tc, npy_matches_numpy);
  tcase_add_test(tc, npy_header_variants);
  tcase_add_test(tc, npy_bad_files);
  tcase_add_test(tc, npy_not_regular_files);
  tcase_add_test(tc, npy_write_errors);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
