/* test_tune.c - GEMM tuning: the GEMM shapes of the fixture models against
 * their config.json; the shipped profiles (ISA from device names, matching,
 * malformed entries, applied on a fresh cache); and one short search whose
 * profile a new context applies over the shipped one, ignores with
 * CLFORMER_TUNING=off, and ignores when corrupt. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "ops/ops.h"
#include "harness.h"

static cJSON *config_of(const char *model) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s/config.json", getenv("CLF_FIXTURES"), model);
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  static char text[1 << 16];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  cJSON *j = cJSON_Parse(text);
  ck_assert_ptr_nonnull(j);
  return j;
}

static long num(const cJSON *j, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
  ck_assert_msg(cJSON_IsNumber(v), "config key %s", key);
  return (long)v->valuedouble;
}

static clf_gemm_shape shapes[32];
static size_t count;

static void load_shapes(const char *model, size_t tokens) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/%s", getenv("CLF_FIXTURES"), model);
  TH_OK(clf_model_gemm_shapes(dir, tokens, shapes, 32, &count));
}

/* The FLOPs of one shape list, count-weighted: what the config implies. */
static double flops(void) {
  double f = 0;
  for (size_t i = 0; i < count; i++) f += 2.0 * shapes[i].m * shapes[i].n * shapes[i].k * shapes[i].count;
  return f;
}

static void has(size_t m, size_t n, size_t k, int trans_b, unsigned cnt) {
  for (size_t i = 0; i < count; i++)
    if (shapes[i].m == m && shapes[i].n == n && shapes[i].k == k && shapes[i].trans_b == trans_b &&
        !shapes[i].trans_a) {
      ck_assert_uint_eq(shapes[i].count, cnt);
      return;
    }
  ck_abort_msg("no shape m=%zu n=%zu k=%zu trans_b=%d", m, n, k, trans_b);
}

START_TEST(shapes_of_models) {
  const size_t T = 10;
  /* BERT and ViT: q, k, v fused at load [3D, D], o [D, D], fc1 [F, D], fc2
   * [D, F], nn.Linear, stored [in, out] (trans_b 0) as encoders' are. */
  const char *enc[] = {"bert", "vit"};
  for (int e = 0; e < 2; e++) {
    cJSON *j = config_of(enc[e]);
    const long D = num(j, "hidden_size"), F = num(j, "intermediate_size"), L = num(j, "num_hidden_layers");
    ck_assert_int_ne(F, 3 * D); /* else two rows merge */
    load_shapes(enc[e], T);
    ck_assert_uint_eq(count, 4);
    has(T, 3 * D, D, 0, L);
    has(T, D, D, 0, L);
    has(T, F, D, 0, L);
    has(T, D, F, 0, L);
    cJSON_Delete(j);
  }
  /* GPT-2: Conv1D [in, out] transposed to [out, in] at load, n_inner null
   * means 4 n_embd, fused c_attn [3D, D], and the LM head over the tied wte
   * [V, D] (the fixture's V = 128 = 4 D: the head adds to fc1's row). */
  cJSON *j = config_of("gpt2");
  const long D = num(j, "n_embd"), L = num(j, "n_layer"), V = num(j, "vocab_size");
  ck_assert(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "n_inner")));
  ck_assert_int_eq(V, 4 * D);
  load_shapes("gpt2", T);
  ck_assert_uint_eq(count, 4);
  has(T, 3 * D, D, 1, L);
  has(T, D, D, 1, L);
  has(T, 4 * D, D, 1, L + 1);
  has(T, D, 4 * D, 1, L);
  cJSON_Delete(j);
  /* Marian: encoder q k v (fused) and o + decoder self q k v (fused), o,
   * cross q, k v (fused), o, both FFNs, the LM head; compared as the total
   * of FLOPs and the attention shapes. */
  j = config_of("marian");
  const long Dm = num(j, "d_model"), Ne = num(j, "encoder_layers"), Nd = num(j, "decoder_layers"),
             Fe = num(j, "encoder_ffn_dim"), Fd = num(j, "decoder_ffn_dim"), Vd = num(j, "decoder_vocab_size");
  load_shapes("marian", T);
  /* the fixture's vocabulary 96 = 3 d_model: the head adds to the decoder's
   * qkv row; the encoder's weights are [in, out] (trans_b 0) */
  ck_assert_int_eq(Vd, 3 * Dm);
  has(T, 3 * Dm, Dm, 1, Nd + 1);
  has(T, 3 * Dm, Dm, 0, Ne);
  has(T, Dm, Dm, 1, 3 * Nd);
  has(T, Dm, Dm, 0, Ne);
  const double want = 2.0 * T * ((4.0 * Ne + 8.0 * Nd) * Dm * Dm + 2.0 * Ne * Fe * Dm + 2.0 * Nd * Fd * Dm + Vd * Dm);
  ck_assert_double_eq_tol(flops(), want, 0.5);
  cJSON_Delete(j);
  /* Capacity smaller than the list: the full count, only capacity written. */
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/gpt2", getenv("CLF_FIXTURES"));
  size_t n = 0;
  TH_OK(clf_model_gemm_shapes(dir, T, shapes, 1, &n));
  ck_assert_uint_eq(n, 4);
  /* A directory without config.json: the message names the file. */
  ck_assert_int_eq(clf_model_gemm_shapes("/nonexistent-clf-dir", T, shapes, 32, &n), CLF_E_NOT_FOUND);
  ck_assert_msg(strstr(clf_last_error(NULL), "config.json") != NULL, "%s", clf_last_error(NULL));
}
END_TEST

/* ViTMAE (missing from the list before the family rows): its encoder's
 * fused q, k, v [3D, D] and o [D, D] over the rows given.  And the
 * reference list that `probe --tune` uses without --model: one layer of
 * bert-base-uncased (hidden 768, intermediate 3072) and of GPT-2 124M
 * (n_embd 768, c_attn [768, 2304], n_inner 4 x 768), as their published
 * config.json files give them: with q, k, v fused and Conv1D transposed at
 * load, the two layers issue the same four sizes, BERT's with the weight
 * [in, out] (an encoder's f32 layout), GPT-2's [out, in]. */
START_TEST(shapes_of_mae_and_reference) {
  const size_t T = 10;
  cJSON *j = config_of("vit_mae");
  const long D = num(j, "hidden_size"), L = num(j, "num_hidden_layers");
  load_shapes("vit_mae", T);
  has(T, 3 * D, D, 0, L);
  has(T, D, D, 0, L);
  cJSON_Delete(j);
  TH_OK(clf_reference_gemm_shapes(T, shapes, 32, &count));
  ck_assert_uint_eq(count, 8);
  for (int tb = 0; tb <= 1; tb++) { /* BERT's [in, out], GPT-2's [out, in] */
    has(T, 2304, 768, tb, 1);
    has(T, 768, 768, tb, 1);
    has(T, 3072, 768, tb, 1);
    has(T, 768, 3072, tb, 1);
  }
  ck_assert_int_eq(clf_reference_gemm_shapes(0, shapes, 32, &count), CLF_E_INVALID_ARG);
}
END_TEST

/* ---- shipped profiles: traits, matching, malformed entries ---- */

static const char *isa(const char *platform, const char *name, int cpu) {
  static char b[64];
  clf__gemm_isa(platform, name, cpu, b, sizeof b);
  return b;
}

/* PoCL names its CPU device "<driver>-<LLVM CPU>-<model name>" (PoCL 3.1 on
 * this machine: "pthread-haswell-AMD EPYC"; PoCL 4+: "cpu-..."). */
START_TEST(shipped_isa_of_names) {
  const char *pocl = "Portable Computing Language";
  ck_assert_str_eq(isa(pocl, "pthread-haswell-AMD EPYC", 1), "haswell");
  ck_assert_str_eq(isa(pocl, "cpu-skylake-avx512-AMD EPYC 9R45 96-Core Processor", 1), "skylake-avx512");
  ck_assert_str_eq(isa(pocl, "cpu-x86-64-v3-Intel(R) Xeon(R) CPU", 1), "x86-64-v3");
  ck_assert_str_eq(isa(pocl, "cpu-minimal-znver4-AMD Ryzen 9", 1), "znver4");
  ck_assert_str_eq(isa(pocl, "basic-haswell-AMD EPYC", 1), "haswell");
  /* GPUs, and other platforms' CPUs, have no ISA string. */
  ck_assert_str_eq(isa("NVIDIA CUDA", "NVIDIA GeForce RTX 3080", 0), "");
  ck_assert_str_eq(isa(pocl, "NVIDIA GeForce RTX 3080", 0), "");
  ck_assert_str_eq(isa("Some Other CL", "pthread-haswell-x", 1), "");
  /* Intel's CPU runtime: the ISA it compiles for, its own setting
   * $CL_CONFIG_CPU_TARGET_ARCH first, else the host's widest. */
  const char *old = getenv("CL_CONFIG_CPU_TARGET_ARCH");
  char *saved = old ? strdup(old) : NULL;
  setenv("CL_CONFIG_CPU_TARGET_ARCH", "core-avx2", 1);
  ck_assert_str_eq(isa("Intel(R) OpenCL", "AMD EPYC", 1), "avx2");
  setenv("CL_CONFIG_CPU_TARGET_ARCH", "skx", 1);
  ck_assert_str_eq(isa("Intel(R) OpenCL", "AMD EPYC", 1), "avx512");
  unsetenv("CL_CONFIG_CPU_TARGET_ARCH");
#if defined(__x86_64__)
  __builtin_cpu_init();
  ck_assert_str_eq(isa("Intel(R) OpenCL", "AMD EPYC", 1), __builtin_cpu_supports("avx512f") ? "avx512"
                                                          : __builtin_cpu_supports("avx2")  ? "avx2"
                                                          : __builtin_cpu_supports("avx")   ? "avx"
                                                                                            : "sse4");
#endif
  ck_assert_str_eq(isa("Intel(R) OpenCL", "Intel(R) Iris(R) Xe Graphics", 0), ""); /* its GPUs: none */
  if (saved) setenv("CL_CONFIG_CPU_TARGET_ARCH", saved, 1);
  free(saved);
}
END_TEST

#define PARAMS                                                                                                       \
  "Xgemm GEMMK=0 KREG=1 KWG=16 KWI=2 MDIMA=16 MDIMC=8 MWG=128 NDIMB=32 NDIMC=16 NWG=128 SA=0 SB=0 STRM=1 STRN=1 "   \
  "VWM=8 VWN=4\nXgemmDirect KWID=2 MDIMAD=8 MDIMCD=8 NDIMBD=32 NDIMCD=8 PADA=1 PADB=0 VWMD=8 VWND=2 WGD=64\n"      \
  "GemmRoutine XGEMM_MIN_INDIRECT_SIZE=167\n"
#define HEAD "clformer-gemm-profile 1\n"
#define HASWELL "match platform=Portable Computing Language device_type=CPU isa=haswell\n"

static clf_device_desc fake_dev(const char *name, cl_device_type type) {
  clf_device_desc d;
  memset(&d, 0, sizeof d);
  snprintf(d.platform_name, sizeof d.platform_name, "Portable Computing Language");
  snprintf(d.device_name, sizeof d.device_name, "%s", name);
  snprintf(d.driver_version, sizeof d.driver_version, "3.1+debian");
  d.type = type;
  return d;
}

static clf__device_caps fake_caps(size_t local_kib, unsigned cus) {
  clf__device_caps c;
  memset(&c, 0, sizeof c);
  c.local_mem = local_kib * 1024;
  c.max_wg = 4096;
  c.max_item_sizes[0] = c.max_item_sizes[1] = c.max_item_sizes[2] = 4096;
  c.compute_units = cus;
  c.is_cpu = 1;
  c.is_pocl = 1;
  return c;
}

static int check(const char *text, const clf_device_desc *d, const clf__device_caps *c, char *why) {
  return clf__gemm_shipped_check(th_ctx, text, d, c, why, 256);
}

START_TEST(shipped_matching) {
  char why[256];
  const clf_device_desc hsw = fake_dev("pthread-haswell-AMD EPYC", CL_DEVICE_TYPE_CPU),
                        skx = fake_dev("cpu-skylake-avx512-AMD EPYC", CL_DEVICE_TYPE_CPU),
                        gpu = fake_dev("NVIDIA GeForce RTX 3080", CL_DEVICE_TYPE_GPU);
  const clf__device_caps caps = fake_caps(512, 2);
  /* Every trait matches, and the parameters keep CLBlast's constraints. */
  const char *t = HEAD HASWELL "match local_mem_kib=64- compute_units=1-8\n" PARAMS;
  ck_assert_msg(check(t, &hsw, &caps, why) == 1, "%s", why);
  /* Another ISA, a GPU, too many compute units, too little local memory. */
  ck_assert_int_eq(check(t, &skx, &caps, why), 0);
  ck_assert_int_eq(check(t, &gpu, &caps, why), 0);
  const clf__device_caps many = fake_caps(512, 64), small = fake_caps(32, 2);
  ck_assert_int_eq(check(t, &hsw, &many, why), 0);
  ck_assert_int_eq(check(t, &hsw, &small, why), 0);
  /* The driver is a prefix. */
  ck_assert_int_eq(check(HEAD HASWELL "match driver=3.1\n" PARAMS, &hsw, &caps, why), 1);
  ck_assert_int_eq(check(HEAD HASWELL "match driver=5.\n" PARAMS, &hsw, &caps, why), 0);
  /* Matching traits but parameters over the device's work-group limit. */
  clf__device_caps tiny_wg = caps;
  tiny_wg.max_wg = 64;
  ck_assert_int_eq(check(t, &hsw, &tiny_wg, why), 0);
  ck_assert_msg(strstr(why, "constraints") != NULL, "%s", why);
  /* Tiles past the bounds, though every multiple holds (issue 11: 2048
   * kept the GEMM compile running for over 5 minutes, 2^20 failed every
   * GEMM); Xgemm tiles of 256 are accepted. */
  static const char *const tiles[] = {"2048", "1048576"};
  for (size_t i = 0; i < 2; i++) {
    char big[1024];
    snprintf(big, sizeof big, HEAD HASWELL "Xgemm GEMMK=0 KREG=1 KWG=%s KWI=2 MDIMA=16 MDIMC=8 MWG=%s NDIMB=32 "
             "NDIMC=16 NWG=%s SA=0 SB=0 STRM=1 STRN=1 VWM=8 VWN=4\nXgemmDirect KWID=2 MDIMAD=8 MDIMCD=8 NDIMBD=32 "
             "NDIMCD=8 PADA=1 PADB=0 VWMD=8 VWND=2 WGD=%s\nGemmRoutine XGEMM_MIN_INDIRECT_SIZE=167\n", tiles[i],
             tiles[i], tiles[i], i ? "64" : tiles[i]);
    ck_assert_int_eq(check(big, &hsw, &caps, why), 0);
    ck_assert_msg(strstr(why, "constraints") != NULL, "%s", why);
  }
  ck_assert_int_eq(check(HEAD HASWELL "Xgemm GEMMK=0 KREG=1 KWG=32 KWI=2 MDIMA=16 MDIMC=16 MWG=256 NDIMB=32 NDIMC=16 "
                         "NWG=256 SA=0 SB=0 STRM=1 STRN=1 VWM=8 VWN=4\nXgemmDirect KWID=2 MDIMAD=8 MDIMCD=16 "
                         "NDIMBD=32 NDIMCD=16 PADA=1 PADB=0 VWMD=8 VWND=2 WGD=128\n"
                         "GemmRoutine XGEMM_MIN_INDIRECT_SIZE=167\n", &hsw, &caps, why), 1);
  /* Each shipped profile parses, and keeps CLBlast's constraints on the
   * device it is for (PoCL reports 512 KiB local memory here, 1 MiB on the
   * AVX-512 machine). */
  ck_assert_uint_ge(clf__shipped_profiles_count, 4);
  /* Intel's CPU runtime (its ISA from $CL_CONFIG_CPU_TARGET_ARCH here, so
   * that the test does not depend on this host's CPU) */
  clf_device_desc intel = fake_dev("AMD EPYC", CL_DEVICE_TYPE_CPU);
  snprintf(intel.platform_name, sizeof intel.platform_name, "Intel(R) OpenCL");
  snprintf(intel.driver_version, sizeof intel.driver_version, "2026.22.10.0.01_160000");
  const char *old = getenv("CL_CONFIG_CPU_TARGET_ARCH");
  char *saved = old ? strdup(old) : NULL;
  setenv("CL_CONFIG_CPU_TARGET_ARCH", "core-avx2", 1);
  for (size_t i = 0; i < clf__shipped_profiles_count; i++) {
    const char *name = clf__shipped_profiles[i].family;
    const int wide = strstr(name, "avx512") != NULL;
    const clf_device_desc *d = !strncmp(name, "intel", 5) ? &intel : wide ? &skx : &hsw;
    /* Intel's profiles each for the ISA it compiles for, and for no other */
    const char *arch = wide ? "skx" : "core-avx2", *other = wide ? "core-avx2" : "skx";
    if (d == &intel) setenv("CL_CONFIG_CPU_TARGET_ARCH", arch, 1);
    ck_assert_msg(check(clf__shipped_profiles[i].text, d, &caps, why) == 1, "%s: %s", name, why);
    if (d == &intel) { /* and not on the other ISA, nor on PoCL */
      setenv("CL_CONFIG_CPU_TARGET_ARCH", other, 1);
      ck_assert_int_eq(check(clf__shipped_profiles[i].text, d, &caps, why), 0);
      setenv("CL_CONFIG_CPU_TARGET_ARCH", arch, 1);
      ck_assert_int_eq(check(clf__shipped_profiles[i].text, wide ? &skx : &hsw, &caps, why), 0);
    }
  }
  if (saved) setenv("CL_CONFIG_CPU_TARGET_ARCH", saved, 1);
  else unsetenv("CL_CONFIG_CPU_TARGET_ARCH");
  free(saved);
}
END_TEST

/* Malformed shipped entries: rejected, and the message names the problem. */
START_TEST(shipped_malformed) {
  char why[256];
  const clf_device_desc hsw = fake_dev("pthread-haswell-AMD EPYC", CL_DEVICE_TYPE_CPU);
  const clf__device_caps caps = fake_caps(512, 2);
  const struct {
    const char *text, *says;
  } bad[] = {
      {HEAD "match colour=blue\n" PARAMS, "colour"},
      {HEAD "match compute_units=8-2\n" PARAMS, "compute_units"},
      {HEAD "match device_type=FPGA\n" PARAMS, "device_type"},
      {HEAD "match isa\n" PARAMS, "key=value"},
      {HEAD PARAMS, "no match line"},
      {HEAD HASWELL "GemmRoutine XGEMM_MIN_INDIRECT_SIZE=167\n", "no Xgemm line"},
      {HEAD HASWELL PARAMS "XgemmDirect WGD=64\n", "missing"},
      {HEAD HASWELL PARAMS "Xgemm MWG=64 BOGUS=1\n", "BOGUS"},
      {"clformer-gemm-profile 2\n" HASWELL PARAMS, "first line"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ck_assert_msg(check(bad[i].text, &hsw, &caps, why) == -1, "case %zu accepted", i);
    ck_assert_msg(strstr(why, bad[i].says) != NULL, "case %zu: \"%s\" does not say %s", i, why, bad[i].says);
  }
}
END_TEST

/* ---- a short search and its profile ---- */

static char notices[8192];
static void log_fn(void *user, const char *msg) {
  (void)user;
  strncat(notices, msg, sizeof notices - strlen(notices) - 2);
  strcat(notices, "\n");
}
static unsigned progress_lines;
/* Counts the search's lines and prints them: where an assertion on its
 * result fails (a slow or loaded machine), the log shows what it did. */
static void progress_fn(void *user, const char *line) {
  (void)user;
  fprintf(stderr, "tune: %s\n", line);
  progress_lines++;
}

static clf_context *context_on(const char *cache) {
  clf_context_options o;
  clf_context_options_init(&o);
  o.cache_dir = cache;
  o.log = log_fn;
  notices[0] = '\0';
  clf_context *c = NULL;
  ck_assert_int_eq(clf_context_create(&o, &c), CLF_OK);
  return c;
}

enum { M = 128, N = 384, K = 384 };

/* C = A B^T on ctx against a CPU reference. */
static void gemm_matches_cpu(clf_context *ctx) {
  float *a = th_rand(M * K, 11, -1, 1), *b = th_rand(N * K, 12, -1, 1), *got = malloc(sizeof(float) * M * N),
        *ref = malloc(sizeof(float) * M * N);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = 0;
      for (int p = 0; p < K; p++) s += (double)a[i * K + p] * b[j * K + p];
      ref[i * N + j] = (float)s;
    }
  clf_tensor *ta, *tb, *tc;
  ck_assert_int_eq(clf_tensor_create(ctx, CLF_F32, 2, TH_SHAPE(M, K), &ta), CLF_OK);
  ck_assert_int_eq(clf_tensor_create(ctx, CLF_F32, 2, TH_SHAPE(N, K), &tb), CLF_OK);
  ck_assert_int_eq(clf_tensor_create(ctx, CLF_F32, 2, TH_SHAPE(M, N), &tc), CLF_OK);
  ck_assert_int_eq(clf_tensor_upload(ctx, ta, a, sizeof(float) * M * K), CLF_OK);
  ck_assert_int_eq(clf_tensor_upload(ctx, tb, b, sizeof(float) * N * K), CLF_OK);
  ck_assert_msg(clf_gemm(ctx, 0, 1, 1.0f, ta, tb, 0.0f, tc, NULL) == CLF_OK, "%s", clf_last_error(ctx));
  ck_assert_int_eq(clf_tensor_download(ctx, tc, got, sizeof(float) * M * N), CLF_OK);
  TH_CLOSE(got, ref, (size_t)M * N, 1e-4);
  clf_tensor_destroy(ta);
  clf_tensor_destroy(tb);
  clf_tensor_destroy(tc);
  free(a), free(b), free(got), free(ref);
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  char *t = calloc(1, 1 << 16);
  fread(t, 1, (1 << 16) - 1, f);
  fclose(f);
  return t;
}

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

/* The shipped profile this device should get (PoCL's CPU device is
 * "pthread-haswell-..." on an AVX2 machine, "pthread-skylake-avx512-..."
 * on an AVX-512 one); NULL where none is shipped. */
static const char *shipped_for_this_device(void) {
  const clf_device_desc *d = clf_context_device(th_ctx);
  char b[64];
  /* the class the context chooses as (CLFORMER_DEVICE_CLASS=gpu: no PoCL ISA, no shipped profile) */
  clf__gemm_isa(d->platform_name, d->device_name, strcmp(clf_context_device_class(th_ctx, NULL), "cpu") == 0, b,
                sizeof b);
  if (!strcmp(d->platform_name, "Intel(R) OpenCL"))
    return !strcmp(b, "avx2") ? "shipped:intel-cpu-avx2" : !strcmp(b, "avx512") ? "shipped:intel-cpu-avx512" : NULL;
  return !strcmp(b, "haswell") ? "shipped:pocl-cpu-avx2" : !strcmp(b, "skylake-avx512") ? "shipped:pocl-cpu-avx512" : NULL;
}

/* A fresh cache: the shipped profile of the device's kind applies (logged
 * with its traits) and GEMMs through it match the CPU reference;
 * CLFORMER_TUNING=user applies none. */
START_TEST(shipped_applied) {
  char dir[256];
  th_tmpdir_create(dir, sizeof dir, "shipped");
  const char *want = shipped_for_this_device();
  clf_context *ctx = context_on(dir);
  const char *got = clf_context_gemm_profile(ctx);
  if (want) {
    ck_assert_msg(got && !strcmp(got, want), "applied %s, want %s", got ? got : "none", want);
    ck_assert_msg(strstr(notices, want) && strstr(notices, "applied") && strstr(notices, "isa="), "notices: %s",
                  notices);
  } else {
    ck_assert_ptr_null(got);
  }
  gemm_matches_cpu(ctx);
  clf_context_destroy(ctx);
  setenv("CLFORMER_TUNING", "user", 1);
  ctx = context_on(dir);
  unsetenv("CLFORMER_TUNING");
  ck_assert_ptr_null(clf_context_gemm_profile(ctx));
  gemm_matches_cpu(ctx);
  clf_context_destroy(ctx);
  th_tmpdir_remove(dir);
}
END_TEST

/* Whether a profile's Tiles line has the key=value kv, wherever it stands
 * (the keys are written in their order: "Tiles int_lanes=16 on=1" where the
 * shipped profile said int_lanes=16). */
static int tiles_key(const char *text, const char *kv) {
  const char *t = strstr(text, "\nTiles ");
  if (!t) return 0;
  const size_t n = strcspn(t + 1, "\n");
  char line[512], key[64];
  snprintf(line, sizeof line, "%.*s ", (int)n, t + 1);
  snprintf(key, sizeof key, " %s ", kv);
  return strstr(line, key) != NULL;
}

START_TEST(tune_and_apply) {
  char dir[256], sub[300];
  th_tmpdir_create(dir, sizeof dir, "tune");
  snprintf(sub, sizeof sub, "%s/clblast", dir);
  const char *shipped = shipped_for_this_device();
  clf_context *ctx = context_on(dir);
  if (shipped) ck_assert_str_eq(clf_context_gemm_profile(ctx), shipped);

  /* A budget each phase overruns with its first candidate: the defaults,
   * one XgemmDirect and one Xgemm candidate, then the combination as it
   * will run.  (With a second to spend, a search whose first candidate
   * came from the kernel cache went on to build another, cold: under ASan
   * in CI that was four of its minutes.) */
  const clf_gemm_shape s = {M, N, K, 0, 1, 1};
  clf_tune_options o = {0.01, 7, progress_fn, NULL};
  /* The tiles' choice before: on a CPU the search measures it, and a
   * choice that changes, or that no line recorded, is written. */
  const int tiles_before = clf__skinny_tiles(ctx, 0, 1);
  unsigned g[2];
  const int had_on = clf__tuned_group(ctx, CLF__TILES_TUNING, "on", g);
  const int had_off = clf__tuned_group(ctx, CLF__TILES_TUNING, "off", g);
  const int measures_tiles =
      strcmp(clf_context_device_class(ctx, NULL), "cpu") == 0 && !getenv("CLFORMER_SKINNY_TILE");
  const int pass_before = clf__skinny_act_pass(ctx);
  const int pair_before = clf__skinny_pair(ctx, CLF_Q4_0);
  const int pair_line_before = clf__tuned_group(ctx, CLF__TILES_TUNING, pair_before ? "pair" : "pairs_off", g);
  /* the integer path's rows (Tiles int=R; none: the float path) */
  const unsigned int_before = clf__tuned_group(ctx, CLF__TILES_TUNING, "int", g) && !g[1] ? g[0] : 0;
  clf_tune_result r;
  clf_tune_report rep;
  ck_assert_msg(clf_tune_gemm(ctx, &s, 1, &o, &r, &rep) == CLF_OK, "%s", clf_last_error(ctx));
  ck_assert_uint_ge(rep.tried, 2);
  ck_assert_uint_le(rep.rejected, rep.tried);
  ck_assert_uint_ge(progress_lines, rep.tried);
  ck_assert(rep.default_ms > 0 && rep.tuned_ms > 0 && rep.seconds > 0);
  ck_assert_double_eq(r.default_ms, rep.default_ms); /* one shape, count 1 */
  ck_assert_double_eq(r.tuned_ms, rep.tuned_ms);
  /* The skinny kernel, timed on the shape's weight [N, K] for each type:
   * the group in use, then a faster one or the same; not searched where
   * every [out, in] product runs skinny_tile (the CPU class), which has no
   * group: then the report's figures are 0. */
  int skinny_better = 0;
  const int tiles = clf__skinny_tiles(ctx, 0, 1);
  for (int t = 0; t < 4; t++) {
    const size_t split0 = rep.skinny[t].split, rows0 = rep.skinny[t].rows;
    if (tiles) {
      ck_assert(split0 == 0 && rows0 == 0 && rep.skinny[t].default_ms == 0 && rep.skinny[t].tuned_ms == 0);
      continue;
    }
    size_t s0, r0;
    clf__skinny_shape(ctx, (clf_dtype[]){CLF_F32, CLF_F16, CLF_Q8_0, CLF_Q4_0}[t], &s0, &r0);
    ck_assert_msg(rep.skinny[t].default_ms > 0 && rep.skinny[t].tuned_ms <= rep.skinny[t].default_ms,
                  "type %d: %.3f -> %.3f ms", t, rep.skinny[t].default_ms, rep.skinny[t].tuned_ms);
    ck_assert_uint_gt(split0 * rows0, 0);
    if (rep.skinny[t].tuned_ms < rep.skinny[t].default_ms) {
      skinny_better = 1;
      ck_assert(rep.skinny[t].tuned_split != split0 || rep.skinny[t].tuned_rows != rows0);
      if (rep.profile[0]) /* applied at once */
        ck_assert(s0 == rep.skinny[t].tuned_split && r0 == rep.skinny[t].tuned_rows);
    } else {
      ck_assert(rep.skinny[t].tuned_split == split0 && rep.skinny[t].tuned_rows == rows0);
    }
  }
  /* Where CLBlast overtakes the skinny path, per weight type and layout:
   * measured from 8 rows up (the shape's weight fits every kind), and in
   * force at once when a profile was written. */
  int rows_changed = 0;
  for (int t = 0; t < 5; t++) {
    const clf_dtype wt = (clf_dtype[]){CLF_F32, CLF_F16, CLF_Q8_0, CLF_Q4_0, CLF_F32}[t];
    /* f32 [in, out] comes first, with its share of the time counted past
     * its kernels' builds; the others may run out of their share of the
     * time on a slow device */
    if (t == 4) ck_assert_uint_ge(rep.rows[t].measured, 8);
    if (!rep.rows[t].measured) continue;
    ck_assert_uint_ge(rep.rows[t].measured, 8);
    ck_assert_uint_ge(rep.rows[t].before, 8);
    rows_changed |= rep.rows[t].measured != rep.rows[t].before;
    if (rep.profile[0]) {
      const char *why = NULL;
      ck_assert_uint_eq(clf__skinny_max_rows(ctx, wt, t == 4, &why), rep.rows[t].measured);
      ck_assert_msg(strstr(why, "measured"), "%s", why);
    }
  }
  /* Written exactly when faster (by the 2% margin), a crossover moved or
   * the tiles' choice changed, and applied at once. */
  const int written = rep.profile[0] != '\0';
  const int tiles_changed = measures_tiles && (tiles != tiles_before || !(tiles ? had_on : had_off));
  /* where the tiles run, the one-row build's activation too (act_pass) */
  const int pass = clf__skinny_act_pass(ctx);
  if (!tiles || getenv("CLFORMER_SKINNY_ACT_PASS")) ck_assert_int_eq(pass, pass_before);
  /* and the pairs of the one-row q4 products, measured: "pair=1" or
   * "pairs_off=1" after the search (one of them), a new or changed one
   * written */
  const int pair = clf__skinny_pair(ctx, CLF_Q4_0), pair_measured = tiles && !getenv("CLFORMER_SKINNY_PAIR");
  if (pair_measured)
    ck_assert(clf__tuned_group(ctx, CLF__TILES_TUNING, pair ? "pair" : "pairs_off", g) &&
              !clf__tuned_group(ctx, CLF__TILES_TUNING, pair ? "pairs_off" : "pair", g));
  else ck_assert_int_eq(pair, pair_before);
  const int pair_changed = pair_measured && (!pair_line_before || pair != pair_before);
  /* the integer path measured at 1, 2, 4 and 8 rows: int=R one of them, or
   * no int key */
  const unsigned int_after = clf__tuned_group(ctx, CLF__TILES_TUNING, "int", g) && !g[1] ? g[0] : 0;
  if (getenv("CLFORMER_SKINNY_INT")) ck_assert_uint_eq(int_after, int_before);
  else ck_assert(int_after == 0 || int_after == 1 || int_after == 2 || int_after == 4 || int_after == 8);
  const int int_changed = int_after != int_before;
  if (tiles_changed || rows_changed || pass != pass_before || pair_changed || int_changed) ck_assert(written);
  else ck_assert_int_eq(written, rep.tuned_ms < 0.98 * rep.default_ms || skinny_better);
  /* On a CPU the search measured the tiles against the launches, and a
   * profile it writes says which it chose. */
  if (written && measures_tiles) {
    char *text = slurp(rep.profile);
    ck_assert_msg(tiles_key(text, tiles ? "on=1" : "off=1"), "%s", text);
    ck_assert_int_eq(strstr(text, " act_pass=1") != NULL, pass);
    if (pair_measured) ck_assert_msg(strstr(text, pair ? " pair=1" : " pairs_off=1") != NULL, "%s", text);
    char int_key[24];
    snprintf(int_key, sizeof int_key, " int=%u", int_after);
    ck_assert_msg(int_after ? strstr(text, int_key) != NULL : strstr(text, " int=") == NULL, "%s", text);
    free(text);
  }
  /* PoCL runs CLBlast's defaults for this shape (XgemmDirect WGD=16 with no
   * vectors) several times slower than the CPU seeds tried first: there a
   * profile must come out.  A device CLBlast's database knows may keep its
   * defaults within this budget: then nothing is stored or applied, and the
   * profile handling below cannot be exercised on it.  A GPU-class context
   * (CLFORMER_DEVICE_CLASS=gpu) tries the GPU seeds first, which PoCL's CPU
   * runs no faster: no profile need come out there either. */
  int pocl = strstr(clf_context_device(ctx)->platform_name, "Portable Computing Language") != NULL &&
             strcmp(clf_context_device_class(ctx, NULL), "cpu") == 0;
#ifdef __SANITIZE_ADDRESS__
  pocl = 0; /* instrumented host code can make the host side dominate the timings */
#endif
  ck_assert_msg(written || !pocl, "no faster parameters found on PoCL: default %.3f ms, best %.3f ms",
                rep.default_ms, rep.tuned_ms);
  if (!written) {
    if (!shipped) ck_assert_ptr_null(clf_context_gemm_profile(ctx));
    gemm_matches_cpu(ctx);
    clf_context_destroy(ctx);
    rmdir(sub); /* may not exist */
    th_tmpdir_remove(dir);
    return;
  }
  ck_assert_str_eq(clf_context_gemm_profile(ctx), rep.profile);
  gemm_matches_cpu(ctx);
  clf_context_destroy(ctx);

  /* A new context on the same cache applies it: the user's own profile
   * wins over the shipped one that matches the device too. */
  ctx = context_on(dir);
  ck_assert_ptr_nonnull(clf_context_gemm_profile(ctx));
  ck_assert_str_eq(clf_context_gemm_profile(ctx), rep.profile);
  ck_assert_msg(strstr(notices, "applied") != NULL && !strstr(notices, "shipped"), "notices: %s", notices);
  gemm_matches_cpu(ctx);
  clf_context_destroy(ctx);

  /* A "Skinny" line sets the skinny kernel's groups by type (a later line
   * wins over the one the search wrote); a linear on one row then runs
   * with them and still matches the CPU.  The core keeps a group line of
   * any name for whoever reads it ("Other"), apart from the op's. */
  char *orig = slurp(rep.profile), *sk = malloc(strlen(orig) + 64);
  sprintf(sk, "%sSkinny f32=2x4 q8=8x2\nOther f32=16x1\n", orig);
  put(rep.profile, sk);
  ctx = context_on(dir);
  ck_assert_str_eq(clf_context_gemm_profile(ctx), rep.profile);
  size_t sp, ro;
  clf__skinny_shape(ctx, CLF_F32, &sp, &ro);
  ck_assert(sp == 2 && ro == 4);
  clf__skinny_shape(ctx, CLF_Q8_0, &sp, &ro);
  ck_assert(sp == 8 && ro == 2);
  unsigned other[2];
  ck_assert(clf__tuned_group(ctx, "Other", "f32", other) && other[0] == 16 && other[1] == 1);
  clf_context_destroy(ctx);
  /* A "Rows" line: the most rows of the skinny path by type and layout
   * (counts, not groups); $CLFORMER_SKINNY_ROWS still wins. */
  sprintf(sk, "%sRows f32=24 f32_in_out=40 q8=96\n", orig);
  put(rep.profile, sk);
  ctx = context_on(dir);
  {
    const char *why = NULL;
    ck_assert_uint_eq(clf__skinny_max_rows(ctx, CLF_F32, 0, &why), 24);
    ck_assert_msg(strstr(why, "measured"), "%s", why);
    ck_assert_uint_eq(clf__skinny_max_rows(ctx, CLF_F32, 1, NULL), 40);
    ck_assert_int_eq(clf__linear_prefers_in_out(ctx), 1); /* [out, in] outlasts CLBlast less: encoders [in, out] */
    const unsigned long_oi = 96, short_io = 16;  /* as on Intel's CPU runtime */
    ck_assert(clf__skinny_rows_tune(ctx, CLF_F32, 0, &long_oi) && clf__skinny_rows_tune(ctx, CLF_F32, 1, &short_io));
    ck_assert_int_eq(clf__linear_prefers_in_out(ctx), 0);
    ck_assert(clf__skinny_rows_tune(ctx, CLF_F32, 1, NULL)); /* one of the two unmeasured: [in, out] */
    ck_assert_int_eq(clf__linear_prefers_in_out(ctx), 1);
    ck_assert_uint_eq(clf__skinny_max_rows(ctx, CLF_Q8_0, 0, NULL), 96);
    ck_assert(clf__skinny_fits(ctx, CLF_Q8_0, 0, 96, K) && !clf__skinny_fits(ctx, CLF_Q8_0, 0, 97, K));
    setenv("CLFORMER_SKINNY_ROWS", "16", 1);
    ck_assert_int_eq(clf__env_reload(ctx), CLF_OK); /* read when a context is made */
    ck_assert_uint_eq(clf__skinny_max_rows(ctx, CLF_Q8_0, 0, &why), 16);
    unsetenv("CLFORMER_SKINNY_ROWS");
    ck_assert_int_eq(clf__env_reload(ctx), CLF_OK);
    ck_assert_str_eq(why, "$CLFORMER_SKINNY_ROWS");
  }
  clf_context_destroy(ctx);
  /* "Tiles off=1" (the search's record that the launches won) turns the
   * tiles off on a CPU, whatever an "on" line before it says. */
  sprintf(sk, "%sTiles on=1\nTiles off=1\n", orig);
  put(rep.profile, sk);
  ctx = context_on(dir);
  if (!getenv("CLFORMER_SKINNY_TILE")) ck_assert_int_eq(clf__skinny_tiles(ctx, 0, 1), 0);
  clf_context_destroy(ctx);
  sprintf(sk, "%sTiles on=1\n", orig);
  put(rep.profile, sk);
  ctx = context_on(dir);
  if (!getenv("CLFORMER_SKINNY_TILE") && !tiles_key(orig, "off=1"))
    ck_assert_int_eq(clf__skinny_tiles(ctx, 0, 1), strcmp(clf_context_device_class(ctx, NULL), "cpu") == 0);
  clf_context_destroy(ctx);
  sprintf(sk, "%sRows f32=0\n", orig); /* 0 rows: malformed, the whole profile ignored */
  put(rep.profile, sk);
  ctx = context_on(dir);
  ck_assert_msg(strstr(notices, "ignored") && strstr(notices, "f32=0"), "notices: %s", notices);
  clf_context_destroy(ctx);
  sprintf(sk, "%sSkinny f32=2x4 q8=8x2\nOther f32=16x1\n", orig);
  put(rep.profile, sk);
  ctx = context_on(dir);
  ck_assert(!clf__tuned_group(ctx, "Other", "q8", other));
  {
    float *x = th_rand(K, 21, -1, 1), *w = th_rand(N * K, 22, -1, 1), *y = malloc(sizeof(float) * N),
          *ref = malloc(sizeof(float) * N);
    for (int j = 0; j < N; j++) {
      double s = 0;
      for (int p = 0; p < K; p++) s += (double)x[p] * w[j * K + p];
      ref[j] = (float)s;
    }
    clf_tensor *tx, *tw, *ty;
    ck_assert_int_eq(clf_tensor_from_f32(ctx, CLF_F32, 2, TH_SHAPE(1, K), x, &tx), CLF_OK);
    ck_assert_int_eq(clf_tensor_from_f32(ctx, CLF_F32, 2, TH_SHAPE(N, K), w, &tw), CLF_OK);
    ck_assert_int_eq(clf_tensor_create(ctx, CLF_F32, 2, TH_SHAPE(1, N), &ty), CLF_OK);
    ck_assert_msg(clf_linear(ctx, tx, tw, CLF_WEIGHT_OUT_IN, NULL, CLF_ACT_NONE, ty, NULL) == CLF_OK, "%s",
                  clf_last_error(ctx));
    ck_assert_int_eq(clf_tensor_download(ctx, ty, y, sizeof(float) * N), CLF_OK);
    TH_CLOSE(y, ref, (size_t)N, 1e-4);
    clf_tensor_destroy(tx), clf_tensor_destroy(tw), clf_tensor_destroy(ty);
    free(x), free(w), free(y), free(ref);
  }
  clf_context_destroy(ctx);
  /* A malformed one: the profile is ignored, the notice names the line. */
  sprintf(sk, "%sSkinny f32=3x4\n", orig);
  put(rep.profile, sk);
  ctx = context_on(dir);
  ck_assert_msg(strstr(notices, "ignored") && strstr(notices, "Skinny") && strstr(notices, "3x4"), "notices: %s",
                notices);
  clf__skinny_shape(ctx, CLF_F32, &sp, &ro);
  ck_assert(!(sp == 2 && ro == 4) && !(sp == 3));
  clf_context_destroy(ctx);
  put(rep.profile, orig);
  free(orig);
  free(sk);

  /* CLFORMER_TUNING=off: not applied, CLBlast's own parameters back. */
  setenv("CLFORMER_TUNING", "off", 1);
  ctx = context_on(dir);
  unsetenv("CLFORMER_TUNING");
  ck_assert_ptr_null(clf_context_gemm_profile(ctx));
  /* Said when parameters were in force: the shipped profile, which the
   * context before applied after ignoring the malformed one.  Without a
   * shipped profile for the device (a GPU; CLFORMER_DEVICE_CLASS=gpu) that
   * context already restored CLBlast's own, and there is nothing to say. */
  ck_assert_msg(!shipped || strstr(notices, "restored") != NULL, "notices: %s", notices);
  gemm_matches_cpu(ctx);
  clf_context_destroy(ctx);

  /* A profile naming a parameter CLBlast does not have: ignored, logged,
   * and the shipped profile (if any) applies instead. */
  char *text = slurp(rep.profile);
  char *x = strstr(text, "\nXgemm ");
  ck_assert_ptr_nonnull(x);
  char *bad = malloc(strlen(text) + 32);
  sprintf(bad, "%.*s\nXgemm BOGUS=3 %s", (int)(x - text), text, x + 7);
  put(rep.profile, bad);
  ctx = context_on(dir);
  ck_assert_int_eq(clf_context_gemm_profile(ctx) != NULL, shipped != NULL);
  if (shipped) ck_assert_str_eq(clf_context_gemm_profile(ctx), shipped);
  ck_assert_msg(strstr(notices, "ignored") && strstr(notices, "BOGUS"), "notices: %s", notices);
  gemm_matches_cpu(ctx);
  clf_context_destroy(ctx);

  /* Garbage: ignored, logged. */
  put(rep.profile, "not a profile\n\x01\x02");
  ctx = context_on(dir);
  ck_assert_int_eq(clf_context_gemm_profile(ctx) != NULL, shipped != NULL);
  ck_assert_msg(strstr(notices, "ignored") != NULL, "notices: %s", notices);
  gemm_matches_cpu(ctx);
  clf_context_destroy(ctx);

  free(text);
  free(bad);
  th_tmpdir_remove(sub);
  th_tmpdir_remove(dir);
}
END_TEST

/* The Rows value between two measured row counts: where the two paths'
 * times, as straight lines, cross.  The figures are the logged ones of the
 * `probe --tune` runs that the shipped AVX-512 profiles come from (their
 * comments quote them), and the profiles carry what the rule gives. */
static const char *shipped_text(const char *family) {
  for (size_t i = 0; i < clf__shipped_profiles_count; i++)
    if (strcmp(clf__shipped_profiles[i].family, family) == 0) return clf__shipped_profiles[i].text;
  ck_abort_msg("no shipped profile %s", family);
  return NULL;
}

START_TEST(rows_crossing) {
  /* rows won, CLBlast's time less the skinny path's there, the next rows, the skinny path's less CLBlast's */
  static const struct {
    const char *family, *key;
    unsigned won;
    double sk_won, ge_won;
    unsigned lost;
    double sk_lost, ge_lost;
    unsigned want;
  } runs[] = {
      {"pocl-cpu-avx512", "f32", 3072, 2835.856, 2963.525, 4096, 5407.065, 5044.703, 3338},
      {"pocl-cpu-avx512", "q8", 256, 200.379, 235.694, 384, 388.676, 356.661, 323},
      {"pocl-cpu-avx512", "q4", 192, 275.822, 305.019, 256, 374.406, 285.215, 207},
      {"pocl-cpu-avx512", "f32_in_out", 96, 135.476, 136.639, 128, 122.584, 104.907, 97},
      {"intel-cpu-avx512", "q4", 128, 95.613, 105.097, 192, 149.903, 144.743, 169},
      {"intel-cpu-avx512", "f32_in_out", 32, 49.308, 57.567, 48, 88.763, 75.737, 38},
      {"pocl-cpu-avx2", "q8", 3072, 4919, 5312, 4096, 8878, 8402, 3535},
      {"pocl-cpu-avx2", "q4", 192, 378, 527, 256, 551, 539, 251},
  };
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    const unsigned got = clf__rows_crossing(runs[i].won, runs[i].ge_won - runs[i].sk_won, runs[i].lost,
                                            runs[i].sk_lost - runs[i].ge_lost);
    ck_assert_uint_eq(got, runs[i].want);
    char line[64];
    snprintf(line, sizeof line, " %s=%u", runs[i].key, got);
    const char *rows = strstr(shipped_text(runs[i].family), "\nRows ");
    ck_assert_msg(rows && strstr(rows, line) && strstr(rows, line) < strchr(rows + 1, '\n'), "%s: %s",
                  runs[i].family, line);
  }
  /* Between the two, never past the lost one; no margin measured: the rows won */
  ck_assert_uint_eq(clf__rows_crossing(64, 1.0, 96, 1e-9), 95);
  ck_assert_uint_eq(clf__rows_crossing(64, 1e-9, 96, 1.0), 64);
  ck_assert_uint_eq(clf__rows_crossing(64, 0.0, 96, 5.0), 64);
  ck_assert_uint_eq(clf__rows_crossing(8, 2.0, 16, 2.0), 12);
}
END_TEST

START_TEST(tune_bad_arguments) {
  clf_tune_report rep;
  const clf_gemm_shape zero = {0, 4, 4, 0, 0, 1};
  TH_FAILS(clf_tune_gemm(th_ctx, NULL, 0, NULL, NULL, &rep), CLF_E_INVALID_ARG, "no shapes");
  TH_FAILS(clf_tune_gemm(th_ctx, &zero, 1, NULL, NULL, &rep), CLF_E_INVALID_ARG, "shapes[0]");
}
END_TEST

int main(void) {
  Suite *s = suite_create("tune");
  TCase *tc = tcase_create("tune");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, shapes_of_models);
  tcase_add_test(tc, shapes_of_mae_and_reference);
  tcase_add_test(tc, tune_bad_arguments);
  tcase_add_test(tc, rows_crossing);
  tcase_add_test(tc, shipped_isa_of_names);
  tcase_add_test(tc, shipped_matching);
  tcase_add_test(tc, shipped_malformed);
  tcase_add_test(tc, shipped_applied);
  tcase_add_test(tc, tune_and_apply);
  suite_add_tcase(s, tc);
  return th_run(s);
}
