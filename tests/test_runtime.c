/* test_runtime.c - devices, selection, contexts, errors, tensors and the
 * program cache (memory and disk), through the public API. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

START_TEST(status_strings_from_one_list) {
  const clf_status all[] = {
#define X(name, code, msg) CLF_##name,
      CLF_STATUS_MAP(X)
#undef X
  };
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
    ck_assert_str_ne(clf_strerror(all[i]), "unknown status");
    ck_assert_ptr_nonnull(strstr(clf_status_name(all[i]), "CLF_"));
    for (size_t j = 0; j < i; j++) ck_assert_str_ne(clf_strerror(all[i]), clf_strerror(all[j]));
  }
  ck_assert_str_eq(clf_strerror(CLF_E_SHAPE), "tensor shape mismatch");
  ck_assert_str_eq(clf_status_name(CLF_E_BUILD), "CLF_E_BUILD");
  ck_assert_str_eq(clf_strerror((clf_status)12345), "unknown status");
}
END_TEST

START_TEST(devices_listed_and_selected) {
  clf_device_desc devs[16], d;
  size_t n = 0;
  TH_OK(clf_list_devices(devs, 16, &n));
  ck_assert_uint_ge(n, 1);
  /* Strings longer than their field are truncated, not left empty (PoCL's
   * device version is over 64 characters). */
  ck_assert_msg(strncmp(devs[0].device_version, "OpenCL ", 7) == 0, "device_version \"%s\"", devs[0].device_version);
  ck_assert_str_ne(devs[0].device_name, "");
  ck_assert_str_ne(devs[0].platform_name, "");
  size_t n2 = 0;
  TH_OK(clf_list_devices(NULL, 0, &n2)); /* counting only */
  ck_assert_uint_eq(n, n2);
  char sel[32];
  snprintf(sel, sizeof(sel), "%d:%d", devs[0].platform_index, devs[0].device_index);
  TH_OK(clf_select_device(sel, &d));
  ck_assert_ptr_eq(d.device, devs[0].device);
  /* A substring of the device name, in another case, selects it too. */
  char part[8] = {0};
  for (int i = 0; i < 4 && devs[0].device_name[i]; i++) part[i] = (char)(devs[0].device_name[i] ^ 0x20 * (devs[0].device_name[i] >= 'a' && devs[0].device_name[i] <= 'z'));
  TH_OK(clf_select_device(part, &d));
  ck_assert_int_eq(clf_select_device("99:0", &d), CLF_E_DEVICE_NOT_FOUND);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "99:0"));
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), devs[0].device_name)); /* lists what exists */
  ck_assert_int_eq(clf_select_device("no-such-device-xyz", &d), CLF_E_DEVICE_NOT_FOUND);
  ck_assert_int_eq(clf_select_device("1:", &d), CLF_E_DEVICE_NOT_FOUND);
  ck_assert_int_eq(clf_list_devices(NULL, 0, NULL), CLF_E_INVALID_ARG);
}
END_TEST

START_TEST(context_with_bad_device_fails_cleanly) {
  clf_context_options o;
  clf_context_options_init(&o);
  o.device = "no-such-device-xyz";
  clf_context *c = (clf_context *)0x1;
  ck_assert_int_eq(clf_context_create(&o, &c), CLF_E_DEVICE_NOT_FOUND);
  ck_assert_ptr_null(c);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "no-such-device-xyz"));
  ck_assert_int_eq(clf_context_create(&o, NULL), CLF_E_INVALID_ARG);
  clf_context_destroy(NULL);
  ck_assert_int_eq(clf_finish(NULL), CLF_E_INVALID_ARG);
}
END_TEST

/* clf_context_options.device_class / $CLFORMER_DEVICE_CLASS and .limits /
 * $CLFORMER_LIMITS: what each accepts, the error naming what it does not,
 * and a small context that still runs. */
static void expect_bad(const char *device_class, const char *limits, const char *needle) {
  clf_context_options o;
  clf_context_options_init(&o);
  o.device_class = device_class;
  o.limits = limits;
  clf_context *c = (clf_context *)0x1;
  ck_assert_int_eq(clf_context_create(&o, &c), CLF_E_INVALID_ARG);
  ck_assert_ptr_null(c);
  ck_assert_msg(strstr(clf_last_error(NULL), needle) != NULL, "class %s limits %s: \"%s\" lacks \"%s\"",
                device_class ? device_class : "-", limits ? limits : "-", clf_last_error(NULL), needle);
}

START_TEST(context_class_and_limits) {
  const char *env_class = getenv("CLFORMER_DEVICE_CLASS");
  char *saved = env_class ? strdup(env_class) : NULL;
  expect_bad("tpu", NULL, "clf_context_options.device_class is \"tpu\": not a device class (accepted: cpu, gpu, "
             "accelerator");
  setenv("CLFORMER_DEVICE_CLASS", "TPU", 1);
  expect_bad(NULL, NULL, "CLFORMER_DEVICE_CLASS is \"TPU\"");
  setenv("CLFORMER_DEVICE_CLASS", "GPU", 1);
  clf_context_options o;
  clf_context_options_init(&o);
  clf_context *c = NULL;
  int forced = 0;
  ck_assert_int_eq(clf_context_create(&o, &c), CLF_OK);
  ck_assert_str_eq(clf_context_device_class(c, &forced), "gpu");
  ck_assert_int_eq(forced, 1);
  clf_context_destroy(c);
  o.device_class = ""; /* the option wins over the variable: the device's own */
  ck_assert_int_eq(clf_context_create(&o, &c), CLF_OK);
  const cl_device_type t = clf_context_device(c)->type;
  ck_assert_str_eq(clf_context_device_class(c, &forced), t & CL_DEVICE_TYPE_CPU ? "cpu"
                                                         : t & CL_DEVICE_TYPE_GPU ? "gpu"
                                                         : t & CL_DEVICE_TYPE_ACCELERATOR ? "accelerator"
                                                                                          : "custom");
  ck_assert_int_eq(forced, 0);
  clf_context_destroy(c);
  if (saved) setenv("CLFORMER_DEVICE_CLASS", saved, 1);
  else unsetenv("CLFORMER_DEVICE_CLASS");
  free(saved);

  static const char *const bad[][2] = {
      {"wg=0", "wg=0 (0 work-items per work-group): a work-group has at least 1 work-item"},
      {"wg=99999999", "above the device's CL_DEVICE_MAX_WORK_GROUP_SIZE"},
      {"wg=abc", "wg=\"abc\" is not a number"},
      {"wg=64k", "wg=\"64k\" is not a number"},
      {"wg=18446744073709551616", "is not a number"},
      {"local=512", "below OpenCL's smallest local memory (1 KiB"},
      {"local=1g", "above the device's CL_DEVICE_LOCAL_MEM_SIZE"},
      {"alloc=1k", "below OpenCL's smallest largest-allocation (1 MiB"},
      {"alloc=64x", "alloc=\"64x\" is not a size"},
      {"alloc=99999999999g", "is not a size"},
      {"alloc=", "is not a size"},
      {"speed=9", "\"speed=9\" is not a limit (accepted: wg="},
      {"wg", "\"wg\" is not a limit"},
      {"wg=8,wg=16", "wg is given twice"},
      {"fp16=2", "want 0 (off) or 1"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    expect_bad(NULL, bad[i][0], "clf_context_options.limits: ");
    expect_bad(NULL, bad[i][0], bad[i][1]);
  }

  /* A small device: 8 work-items, 2 KiB of local memory, 1 MiB buffers. */
  o.device_class = NULL;
  o.limits = " wg=8 , local=2k,alloc=1m,fp16=0,subgroups=0";
  ck_assert_msg(clf_context_create(&o, &c) == CLF_OK, "%s", clf_last_error(NULL));
  ck_assert_str_eq(clf_context_limits(c), "wg=8,local=2048,alloc=1048576,fp16=0,subgroups=0");
  ck_assert_str_eq(clf_context_limits(th_ctx), getenv("CLFORMER_LIMITS") && *getenv("CLFORMER_LIMITS")
                                                   ? clf_context_limits(th_ctx) : "");
  clf_tensor *big = NULL, *x = NULL, *y = NULL;
  ck_assert_int_eq(clf_tensor_create(c, CLF_F32, 1, TH_SHAPE((1u << 18) + 1), &big), CLF_E_OUT_OF_MEMORY);
  ck_assert_msg(strstr(clf_last_error(c), "(1 MiB, clf_context_options.limits alloc)") != NULL, "%s",
                clf_last_error(c));
  float h[1000];
  for (int i = 0; i < 1000; i++) h[i] = (float)i;
  ck_assert_int_eq(clf_tensor_create(c, CLF_F32, 1, TH_SHAPE(1u << 18), &big), CLF_OK);
  ck_assert_int_eq(clf_tensor_from_f32(c, CLF_F32, 2, TH_SHAPE(10, 100), h, &x), CLF_OK);
  ck_assert_int_eq(clf_tensor_create(c, CLF_F32, 2, TH_SHAPE(10, 100), &y), CLF_OK);
  ck_assert_msg(clf_add(c, x, x, y, NULL) == CLF_OK, "%s", clf_last_error(c));
  float got[1000];
  ck_assert_int_eq(clf_tensor_download(c, y, got, sizeof got), CLF_OK);
  for (int i = 0; i < 1000; i++) ck_assert_float_eq(got[i], 2.0f * (float)i);
  clf_tensor_destroy(big); clf_tensor_destroy(x); clf_tensor_destroy(y);
  clf_context_destroy(c);
}
END_TEST

START_TEST(tensor_create_and_shape_errors) {
  clf_tensor *t = NULL;
  TH_FAILS(clf_tensor_create(th_ctx, CLF_F32, 0, TH_SHAPE(1), &t), CLF_E_SHAPE, "ndim is 0");
  TH_FAILS(clf_tensor_create(th_ctx, CLF_F32, 7, TH_SHAPE(1, 1, 1, 1, 1, 1, 1), &t), CLF_E_SHAPE, "ndim is 7");
  TH_FAILS(clf_tensor_create(th_ctx, CLF_F32, 2, NULL, &t), CLF_E_INVALID_ARG, "shape is NULL");
  TH_FAILS(clf_tensor_create(th_ctx, (clf_dtype)40, 1, TH_SHAPE(4), &t), CLF_E_DTYPE, "dtype");
  TH_FAILS(clf_tensor_create(th_ctx, CLF_STORED, 1, TH_SHAPE(4), &t), CLF_E_DTYPE, "dtype"); /* options only */
  TH_FAILS(clf_tensor_create(th_ctx, CLF_F32, 3, TH_SHAPE(1u << 20, 1u << 20, 1u << 10), &t), CLF_E_SHAPE,
           "too large");
  ck_assert_int_eq(clf_tensor_create(NULL, CLF_F32, 1, TH_SHAPE(4), &t), CLF_E_INVALID_ARG);
  /* One element more than the device can allocate at once
   * (CL_DEVICE_MAX_MEM_ALLOC_SIZE: PoCL 1 GiB, an 80 GB H100 20 GB): an
   * out-of-memory error naming it.  A shape holds fewer than 2^32 elements, so
   * a device whose largest allocation is about 32 GiB or more cannot be asked for
   * more by shape; there the largest shape must still not crash. */
  cl_ulong max_alloc = 0;
  ck_assert_int_eq(clGetDeviceInfo(clf_context_device(th_ctx)->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE,
                                   sizeof max_alloc, &max_alloc, NULL), CL_SUCCESS);
  const size_t past = (size_t)(max_alloc / 8) + 1;
  if (past <= (size_t)UINT32_MAX) {
    TH_FAILS(clf_tensor_create(th_ctx, CLF_I64, 1, TH_SHAPE(past), &t), CLF_E_OUT_OF_MEMORY, "largest allocation");
    ck_assert_ptr_null(t);
  } else {
    printf("largest allocation %llu bytes: past the largest shape, not asked for\n", (unsigned long long)max_alloc);
    const clf_status big = clf_tensor_create(th_ctx, CLF_I64, 1, TH_SHAPE((size_t)UINT32_MAX), &t);
    ck_assert(big == CLF_OK || big == CLF_E_OUT_OF_MEMORY);
    clf_tensor_destroy(t);
    t = NULL;
  }
  /* Zero-size tensors are legal and transfer nothing. */
  TH_OK(clf_tensor_create(th_ctx, CLF_F32, 2, TH_SHAPE(0, 5), &t));
  ck_assert_uint_eq(clf_tensor_numel(t), 0);
  TH_OK(clf_tensor_upload(th_ctx, t, NULL, 0));
  TH_OK(clf_tensor_fill(th_ctx, t, 1.0, NULL));
  clf_tensor_destroy(t);
  TH_OK(clf_tensor_create(th_ctx, CLF_I64, 3, TH_SHAPE(2, 3, 4), &t));
  ck_assert_int_eq(clf_tensor_ndim(t), 3);
  ck_assert_uint_eq(clf_tensor_dim(t, -1), 4);
  ck_assert_uint_eq(clf_tensor_dim(t, 0), 2);
  ck_assert_uint_eq(clf_tensor_bytes(t), 2 * 3 * 4 * 8);
  int64_t host[24];
  TH_FAILS(clf_tensor_upload(th_ctx, t, host, 23 * 8), CLF_E_SHAPE, "184 bytes given");
  TH_FAILS(clf_tensor_download(th_ctx, t, NULL, sizeof(host)), CLF_E_INVALID_ARG, "NULL");
  clf_tensor_destroy(t);
  clf_tensor_destroy(NULL);
}
END_TEST

START_TEST(tensor_roundtrip_fill_view_copy) {
  float v[12];
  for (int i = 0; i < 12; i++) v[i] = (float)i * 0.5f;
  clf_tensor *t = th_tensor(CLF_F32, 2, TH_SHAPE(3, 4), v), *view = NULL, *dst = th_empty(CLF_F32, 1, TH_SHAPE(4));
  /* Row 1 as a 1-D view: elements 4..7. */
  TH_OK(clf_tensor_view(t, 4, 1, TH_SHAPE(4), &view));
  ck_assert_uint_eq(clf_tensor_offset(view), 4);
  float *got = th_download(view);
  for (int i = 0; i < 4; i++) ck_assert_float_eq(got[i], v[4 + i]);
  free(got);
  TH_OK(clf_tensor_copy(th_ctx, view, dst, NULL));
  got = th_download(dst);
  for (int i = 0; i < 4; i++) ck_assert_float_eq(got[i], v[4 + i]);
  free(got);
  /* Filling the view writes only its elements. */
  TH_OK(clf_tensor_fill(th_ctx, view, -2.0, NULL));
  got = th_download(t);
  for (int i = 0; i < 12; i++) ck_assert_float_eq(got[i], (i >= 4 && i < 8) ? -2.0f : v[i]);
  free(got);
  clf_tensor *bad = NULL;
  TH_FAILS(clf_tensor_view(t, 10, 1, TH_SHAPE(4), &bad), CLF_E_SHAPE, "do not fit");
  ck_assert_ptr_null(bad);
  /* A view outlives its base. */
  clf_tensor_destroy(t);
  got = th_download(view);
  ck_assert_float_eq(got[0], -2.0f);
  free(got);
  clf_tensor *d3 = th_empty(CLF_F32, 1, TH_SHAPE(3));
  TH_FAILS(clf_tensor_copy(th_ctx, view, d3, NULL), CLF_E_SHAPE, "differ in size");
  clf_tensor_destroy(view); clf_tensor_destroy(dst); clf_tensor_destroy(d3);
}
END_TEST

START_TEST(tensor_fill_each_dtype) {
  clf_tensor *h = th_empty(CLF_F16, 1, TH_SHAPE(3)), *i32 = th_empty(CLF_I32, 1, TH_SHAPE(3)),
             *i64 = th_empty(CLF_I64, 1, TH_SHAPE(3));
  TH_OK(clf_tensor_fill(th_ctx, h, 1.5, NULL));
  TH_OK(clf_tensor_fill(th_ctx, i32, -7, NULL));
  TH_OK(clf_tensor_fill(th_ctx, i64, 5e10, NULL));
  uint16_t *hh = th_download(h);
  int32_t *ii = th_download(i32);
  int64_t *ll = th_download(i64);
  for (int i = 0; i < 3; i++) {
    ck_assert_uint_eq(hh[i], 0x3E00); /* IEEE half of 1.5 */
    ck_assert_int_eq(ii[i], -7);
    ck_assert_int_eq(ll[i], 50000000000LL);
  }
  free(hh); free(ii); free(ll);
  clf_tensor_fill(th_ctx, h, 65504.0, NULL); /* largest half */
  hh = th_download(h);
  ck_assert_uint_eq(hh[0], 0x7BFF);
  free(hh);
  clf_tensor_destroy(h); clf_tensor_destroy(i32); clf_tensor_destroy(i64);
}
END_TEST

/* ---- program cache ---- */

static char cache_dir[256];

static void make_tmp_dir(char *buf, size_t len, const char *tag) {
  snprintf(buf, len, "%s/clf-test-%s-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", tag);
  ck_assert_ptr_nonnull(mkdtemp(buf));
}

/* Creates a context with the binary cache forced on in `dir`, builds the
 * norm family and returns its counters. */
static clf_cache_stats build_norm_in(const char *dir, const char *kernel_dir, clf_status *st) {
  clf_context_options o;
  clf_context_options_init(&o);
  o.cache_dir = dir;
  o.kernel_dir = kernel_dir;
  clf_context *c = NULL;
  TH_OK(clf_context_create(&o, &c));
  *st = clf_context_prepare(c, "norm", "");
  clf_cache_stats s;
  clf_context_cache_stats(c, &s);
  clf_context_destroy(c);
  return s;
}

static int count_entries(const char *dir, char *last, size_t len) {
  char cmd[512];
  snprintf(cmd, sizeof(cmd), "ls %s | grep -c '\\.clbin$'", dir);
  FILE *p = popen(cmd, "r");
  int n = 0;
  if (p) { if (fscanf(p, "%d", &n) != 1) n = 0; pclose(p); }
  if (last) {
    snprintf(cmd, sizeof(cmd), "ls %s/*.clbin | tail -n 1", dir);
    p = popen(cmd, "r");
    last[0] = '\0';
    if (p) { if (!fgets(last, (int)len, p)) last[0] = '\0'; pclose(p); }
    last[strcspn(last, "\n")] = '\0';
  }
  return n;
}

START_TEST(disk_cache_hit_corrupt_and_stale) {
  setenv("CLFORMER_CACHE_BINARIES", "1", 1);
  make_tmp_dir(cache_dir, sizeof(cache_dir), "cache");
  clf_status st;
  /* First: compiled from source and written. */
  clf_cache_stats s = build_norm_in(cache_dir, NULL, &st);
  ck_assert_int_eq(st, CLF_OK);
  ck_assert_uint_eq(s.programs_built, 1);
  ck_assert_uint_eq(s.programs_from_disk, 0);
  ck_assert_uint_eq(s.disk_written, 1);
  char entry[512];
  ck_assert_int_eq(count_entries(cache_dir, entry, sizeof(entry)), 1);
  /* Second: loaded from disk. */
  s = build_norm_in(cache_dir, NULL, &st);
  ck_assert_int_eq(st, CLF_OK);
  ck_assert_uint_eq(s.programs_from_disk, 1);
  ck_assert_uint_eq(s.programs_built, 0);
  /* Corrupt one byte of the binary: rejected, rebuilt, rewritten. */
  FILE *f = fopen(entry, "r+b");
  ck_assert_ptr_nonnull(f);
  fseek(f, -1, SEEK_END);
  int c = fgetc(f);
  fseek(f, -1, SEEK_END);
  fputc(c ^ 0xff, f);
  fclose(f);
  s = build_norm_in(cache_dir, NULL, &st);
  ck_assert_int_eq(st, CLF_OK);
  ck_assert_uint_eq(s.disk_rejected, 1);
  ck_assert_uint_eq(s.programs_built, 1);
  ck_assert_uint_eq(s.disk_written, 1);
  /* Truncated to half: rejected too. */
  struct stat sb;
  ck_assert_int_eq(stat(entry, &sb), 0);
  ck_assert_int_eq(truncate(entry, sb.st_size / 2), 0);
  s = build_norm_in(cache_dir, NULL, &st);
  ck_assert_uint_eq(s.disk_rejected, 1);
  ck_assert_uint_eq(s.programs_built, 1);
  /* Garbage with the right name: rejected. */
  f = fopen(entry, "wb");
  fputs("not a cache entry", f);
  fclose(f);
  s = build_norm_in(cache_dir, NULL, &st);
  ck_assert_uint_eq(s.disk_rejected, 1);
  ck_assert_uint_eq(s.programs_built, 1);
  s = build_norm_in(cache_dir, NULL, &st);
  ck_assert_uint_eq(s.programs_from_disk, 1);
  /* Other options are another key, so another entry. */
  clf_context_options o;
  clf_context_options_init(&o);
  o.cache_dir = cache_dir;
  clf_context *ctx = NULL;
  TH_OK(clf_context_create(&o, &ctx));
  ck_assert_int_eq(clf_context_prepare(ctx, "norm", "-DCLF_TEST_VARIANT=1"), CLF_OK);
  clf_context_destroy(ctx);
  ck_assert_int_eq(count_entries(cache_dir, NULL, 0), 2);
  unsetenv("CLFORMER_CACHE_BINARIES");
}
END_TEST

/* issue 11: entries carry a SHA-256 of key and payload, so a payload cut
 * short with its length fields made to agree is rejected (and dropped and
 * rebuilt); the directory is created private, and one that others can
 * write to is not used, with a notice. */
static void note(void *user, const char *msg) {
  char *buf = user;
  snprintf(buf + strlen(buf), 2048 - strlen(buf), "%s\n", msg);
}

START_TEST(disk_cache_trust) {
  setenv("CLFORMER_CACHE_BINARIES", "1", 1);
  char base[256], dir[320], entry[512];
  make_tmp_dir(base, sizeof(base), "trust");
  snprintf(dir, sizeof(dir), "%s/a/b", base);
  clf_status st;
  build_norm_in(dir, NULL, &st);
  ck_assert_int_eq(st, CLF_OK);
  struct stat sb;
  ck_assert_int_eq(stat(dir, &sb), 0);
  ck_assert_uint_eq(sb.st_mode & 0777, 0700);
  ck_assert_int_eq(count_entries(dir, entry, sizeof(entry)), 1);
  /* Drop the last 100 bytes and make bin_len (at 16) say so. */
  ck_assert_int_eq(stat(entry, &sb), 0);
  FILE *f = fopen(entry, "r+b");
  ck_assert_ptr_nonnull(f);
  unsigned char len8[8];
  ck_assert_int_eq(fseek(f, 16, SEEK_SET), 0);
  ck_assert_uint_eq(fread(len8, 1, 8, f), 8);
  unsigned long long blen = 0;
  for (int i = 7; i >= 0; i--) blen = blen << 8 | len8[i];
  ck_assert_uint_gt(blen, 100);
  blen -= 100;
  for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(blen >> (8 * i));
  ck_assert_int_eq(fseek(f, 16, SEEK_SET), 0);
  ck_assert_uint_eq(fwrite(len8, 1, 8, f), 8);
  fclose(f);
  ck_assert_int_eq(truncate(entry, sb.st_size - 100), 0);
  clf_cache_stats s = build_norm_in(dir, NULL, &st);
  ck_assert_uint_eq(s.disk_rejected, 1);
  ck_assert_uint_eq(s.programs_built, 1);
  ck_assert_int_eq(stat(entry, &sb), 0);
  s = build_norm_in(dir, NULL, &st); /* the rewritten entry is whole */
  ck_assert_uint_eq(s.programs_from_disk, 1);
  /* group-writable: refused with a notice; the context works uncached */
  ck_assert_int_eq(chmod(dir, 0770), 0);
  char log[2048] = "";
  clf_context_options o;
  clf_context_options_init(&o);
  o.cache_dir = dir;
  o.log = note;
  o.log_user = log;
  clf_context *c = NULL;
  TH_OK(clf_context_create(&o, &c));
  ck_assert_ptr_null(clf_context_cache_dir(c));
  ck_assert_msg(strstr(log, "not using the cache directory") && strstr(log, "others can write to it (mode 770)"),
                "log: %s", log);
  TH_OK(clf_context_prepare(c, "norm", NULL));
  clf_context_destroy(c);
  unsetenv("CLFORMER_CACHE_BINARIES");
  char cmd[400];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(disk_cache_off) {
  clf_context_options o;
  clf_context_options_init(&o);
  o.cache_dir = "off";
  clf_context *c = NULL;
  TH_OK(clf_context_create(&o, &c));
  ck_assert_ptr_null(clf_context_cache_dir(c));
  TH_OK(clf_context_prepare(c, "norm", NULL));
  clf_cache_stats s;
  clf_context_cache_stats(c, &s);
  ck_assert_uint_eq(s.programs_built, 1);
  ck_assert_uint_eq(s.disk_written, 0);
  /* The second request for the same variant is served from memory. */
  TH_OK(clf_context_prepare(c, "norm", NULL));
  clf_context_cache_stats(c, &s);
  ck_assert_uint_eq(s.programs_built, 1);
  clf_context_destroy(c);
}
END_TEST

static void write_file(const char *dir, const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

START_TEST(kernel_build_failure_is_reported) {
  char kdir[256];
  make_tmp_dir(kdir, sizeof(kdir), "kernels");
  write_file(kdir, "common.cl", "/* empty */\n");
  write_file(kdir, "norm.cl", "__kernel void layer_norm(__global float *x) { x[0] = undeclared_thing; }\n");
  clf_context_options o;
  clf_context_options_init(&o);
  o.kernel_dir = kdir;
  o.cache_dir = "off";
  clf_context *c = NULL;
  TH_OK(clf_context_create(&o, &c));
  clf_tensor *x = NULL, *g = NULL;
  TH_OK(clf_tensor_create(c, CLF_F32, 2, TH_SHAPE(2, 4), &x));
  TH_OK(clf_tensor_create(c, CLF_F32, 1, TH_SHAPE(4), &g));
  ck_assert_int_eq(clf_layer_norm(c, x, NULL, g, NULL, 1e-5f, NULL, x, NULL), CLF_E_BUILD);
  ck_assert_ptr_nonnull(strstr(clf_last_error(c), "\"norm\" failed to build"));
  ck_assert_ptr_nonnull(strstr(clf_last_build_log(c), "undeclared_thing"));
  /* The failed variant is remembered: same error, no second compile. */
  clf_clear_error(c);
  ck_assert_int_eq(clf_layer_norm(c, x, NULL, g, NULL, 1e-5f, NULL, x, NULL), CLF_E_BUILD);
  ck_assert_ptr_nonnull(strstr(clf_last_build_log(c), "undeclared_thing"));
  clf_cache_stats s;
  clf_context_cache_stats(c, &s);
  ck_assert_uint_eq(s.build_failures, 1);
  /* A family missing from the kernel directory is an I/O error naming it. */
  ck_assert_int_eq(clf_context_prepare(c, "attention", NULL), CLF_E_IO);
  ck_assert_ptr_nonnull(strstr(clf_last_error(c), "attention.cl"));
  clf_tensor_destroy(x);
  clf_tensor_destroy(g);
  clf_context_destroy(c);
  /* With the embedded sources, an unknown family is not found. */
  TH_FAILS(clf_context_prepare(th_ctx, "no_such_family", NULL), CLF_E_NOT_FOUND, "no_such_family");
}
END_TEST

START_TEST(kernel_dir_overrides_embedded_source) {
  /* A kernel directory with a working norm.cl that scales differently shows
   * the sources are read from it. */
  char kdir[256];
  make_tmp_dir(kdir, sizeof(kdir), "kernels2");
  write_file(kdir, "common.cl", "#define CLF_RED_WG 256\n");
  /* Both layer norm kernels (GPU and CPU variants), each writing 42. */
  write_file(kdir, "norm.cl",
             "__kernel void layer_norm(__global const float *x, uint x_off, __global const float *r, uint r_off,"
             " int has_res, __global const float *rb, uint rb_off, int has_rb,"
             " __global const float *g, uint g_off, __global const float *b, uint b_off, int hb,"
             " __global float *s, uint s_off, int hs, __global float *y, uint y_off, uint D, float eps, int rms)"
             " { if (get_local_id(0) == 0) y[y_off + get_group_id(0) * D] = 42.0f; }\n"
             "__kernel void layer_norm_rows(__global const float *x, uint x_off, __global const float *r,"
             " uint r_off, int has_res, __global const float *rb, uint rb_off, int has_rb,"
             " __global const float *g, uint g_off, __global const float *b, uint b_off,"
             " int hb, __global float *s, uint s_off, int hs, __global float *y, uint y_off, uint D, float eps,"
             " int rms, uint rows) { if (get_global_id(0) < rows) y[y_off + get_global_id(0) * D] = 42.0f; }\n");
  clf_context_options o;
  clf_context_options_init(&o);
  o.kernel_dir = kdir;
  o.cache_dir = "off";
  clf_context *c = NULL;
  TH_OK(clf_context_create(&o, &c));
  clf_tensor *x = NULL, *g = NULL;
  TH_OK(clf_tensor_create(c, CLF_F32, 2, TH_SHAPE(1, 4), &x));
  TH_OK(clf_tensor_create(c, CLF_F32, 1, TH_SHAPE(4), &g));
  TH_OK(clf_tensor_fill(c, x, 1.0, NULL));
  TH_OK(clf_tensor_fill(c, g, 1.0, NULL));
  ck_assert_int_eq(clf_layer_norm(c, x, NULL, g, NULL, 1e-5f, NULL, x, NULL), CLF_OK);
  float h[4];
  ck_assert_int_eq(clf_tensor_download(c, x, h, sizeof(h)), CLF_OK);
  ck_assert_float_eq(h[0], 42.0f);
  clf_tensor_destroy(x);
  clf_tensor_destroy(g);
  clf_context_destroy(c);
}
END_TEST

/* clf_profile_*: each recorded command counted under its op, with device
 * time within the wall time around it; the errors. */
START_TEST(profile_counts_ops) {
  clf_context_options o;
  clf_context_options_init(&o);
  o.profiling = 1;
  o.device = getenv("CLFORMER_DEVICE");
  clf_context *ctx = NULL;
  TH_OK(clf_context_create(&o, &ctx));
  float *a = th_rand(64 * 64, 1, -1, 1);
  clf_tensor *ta = NULL, *tb = NULL, *tc = NULL;
  TH_OK(clf_tensor_from_f32(ctx, CLF_F32, 2, TH_SHAPE(64, 64), a, &ta));
  TH_OK(clf_tensor_from_f32(ctx, CLF_F32, 2, TH_SHAPE(64, 64), a, &tb));
  TH_OK(clf_tensor_from_f32(ctx, CLF_F32, 2, TH_SHAPE(64, 64), a, &tc));
  TH_OK(clf_gemm(ctx, 0, 1, 1.0f, ta, tb, 0.0f, tc, NULL)); /* builds outside the record */
  TH_OK(clf_softmax(ctx, tc, 1.0f, tc, NULL));
  TH_OK(clf_finish(ctx));
  TH_OK(clf_profile_start(ctx));
  for (int i = 0; i < 2; i++) TH_OK(clf_gemm(ctx, 0, 1, 1.0f, ta, tb, 0.0f, tc, NULL));
  cl_event ev = NULL;
  TH_OK(clf_softmax(ctx, tc, 1.0f, tc, &ev)); /* the caller's event is kept too */
  TH_OK(clf_tensor_copy(ctx, tc, ta, NULL));
  clf_profile_entry e[8], one;
  size_t n = 0;
  unsigned long commands = 0;
  TH_OK(clf_profile_stop(ctx, e, 8, &n, &commands));
  ck_assert_int_eq(clWaitForEvents(1, &ev), CL_SUCCESS);
  clReleaseEvent(ev);
  ck_assert_uint_eq(n, 3);
  ck_assert_uint_eq(commands, 4);
  int seen = 0;
  for (size_t i = 0; i < n; i++) {
    ck_assert(e[i].ms > 0 && (i == 0 || e[i].ms <= e[i - 1].ms));
    const int which = !strcmp(e[i].op, "clblast_gemm") ? 1 : !strcmp(e[i].op, "softmax_rows") ? 2
                      : !strcmp(e[i].op, "copy") ? 4 : 0;
    ck_assert_msg(which, "unexpected op %s", e[i].op);
    ck_assert_uint_eq(e[i].count, which == 1 ? 2 : 1);
    seen |= which;
  }
  ck_assert_int_eq(seen, 7);
  /* a capacity below the count: the longest ops, and the full count */
  TH_OK(clf_profile_start(ctx));
  TH_OK(clf_softmax(ctx, tc, 1.0f, tc, NULL));
  TH_OK(clf_tensor_copy(ctx, tc, ta, NULL));
  TH_OK(clf_profile_stop(ctx, &one, 1, &n, NULL));
  ck_assert_uint_eq(n, 2);
  ck_assert_int_eq(clf_profile_stop(ctx, &one, 1, &n, NULL), CLF_E_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(clf_last_error(ctx), "not recording"));
  TH_FAILS(clf_profile_start(th_ctx), CLF_E_UNSUPPORTED, "without profiling");
  clf_tensor_destroy(ta); clf_tensor_destroy(tb); clf_tensor_destroy(tc);
  free(a);
  clf_context_destroy(ctx);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("runtime");
  TCase *tc = tcase_create("runtime");
  tcase_add_test(tc, status_strings_from_one_list);
  tcase_add_test(tc, devices_listed_and_selected);
  tcase_add_test(tc, context_with_bad_device_fails_cleanly);
  tcase_add_test(tc, context_class_and_limits);
  tcase_add_test(tc, tensor_create_and_shape_errors);
  tcase_add_test(tc, tensor_roundtrip_fill_view_copy);
  tcase_add_test(tc, tensor_fill_each_dtype);
  tcase_add_test(tc, profile_counts_ops);
  suite_add_tcase(s, tc);
  TCase *cache = tcase_create("program_cache");
  tcase_add_test(cache, disk_cache_hit_corrupt_and_stale);
  tcase_add_test(cache, disk_cache_trust);
  tcase_add_test(cache, disk_cache_off);
  tcase_add_test(cache, kernel_build_failure_is_reported);
  tcase_add_test(cache, kernel_dir_overrides_embedded_source);
  suite_add_tcase(s, cache);
  return s;
}

int main(void) { return th_run(suite()); }
