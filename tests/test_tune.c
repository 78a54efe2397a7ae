/* test_tune.c - GEMM tuning: the GEMM shapes of the fixture models against
 * their config.json, and one short search whose profile a new context
 * applies, ignores with CLFORMER_TUNING=off, and ignores when corrupt. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
  /* BERT and ViT: q, k, v, o [D, D], fc1 [F, D], fc2 [D, F], nn.Linear. */
  const char *enc[] = {"bert", "vit"};
  for (int e = 0; e < 2; e++) {
    cJSON *j = config_of(enc[e]);
    const long D = num(j, "hidden_size"), F = num(j, "intermediate_size"), L = num(j, "num_hidden_layers");
    load_shapes(enc[e], T);
    ck_assert_uint_eq(count, 3);
    has(T, D, D, 1, 4 * L);
    has(T, F, D, 1, L);
    has(T, D, F, 1, L);
    cJSON_Delete(j);
  }
  /* GPT-2: Conv1D [in, out] (no transpose), n_inner null means 4 n_embd,
   * fused c_attn [D, 3D], and the LM head over the tied wte [V, D]. */
  cJSON *j = config_of("gpt2");
  const long D = num(j, "n_embd"), L = num(j, "n_layer"), V = num(j, "vocab_size");
  ck_assert(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "n_inner")));
  load_shapes("gpt2", T);
  ck_assert_uint_eq(count, 5);
  has(T, 3 * D, D, 0, L);
  has(T, D, D, 0, L);
  has(T, 4 * D, D, 0, L);
  has(T, D, 4 * D, 0, L);
  has(T, V, D, 1, 1);
  cJSON_Delete(j);
  /* Marian: encoder q k v o + decoder self and cross q k v o, both FFNs,
   * the LM head; compared as the total of FLOPs and the attention shape. */
  j = config_of("marian");
  const long Dm = num(j, "d_model"), Ne = num(j, "encoder_layers"), Nd = num(j, "decoder_layers"),
             Fe = num(j, "encoder_ffn_dim"), Fd = num(j, "decoder_ffn_dim"), Vd = num(j, "decoder_vocab_size");
  load_shapes("marian", T);
  has(T, Dm, Dm, 1, 4 * Ne + 8 * Nd);
  has(T, Vd, Dm, 1, 1);
  const double want = 2.0 * T * ((4.0 * Ne + 8.0 * Nd) * Dm * Dm + 2.0 * Ne * Fe * Dm + 2.0 * Nd * Fd * Dm + Vd * Dm);
  ck_assert_double_eq_tol(flops(), want, 0.5);
  cJSON_Delete(j);
  /* Capacity smaller than the list: the full count, only capacity written. */
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/gpt2", getenv("CLF_FIXTURES"));
  size_t n = 0;
  TH_OK(clf_model_gemm_shapes(dir, T, shapes, 1, &n));
  ck_assert_uint_eq(n, 5);
  /* A directory without config.json: the message names the file. */
  ck_assert_int_eq(clf_model_gemm_shapes("/nonexistent-clf-dir", T, shapes, 32, &n), CLF_E_NOT_FOUND);
  ck_assert_msg(strstr(clf_last_error(NULL), "config.json") != NULL, "%s", clf_last_error(NULL));
}
END_TEST

/* ViTMAE (missing from the list before the family rows): its encoder's
 * q, k, v, o [D, D] over the rows given.  And the reference list that
 * `probe --tune` uses without --model: one layer of bert-base-uncased
 * (hidden 768, intermediate 3072, nn.Linear) and of GPT-2 124M (n_embd 768,
 * Conv1D, fused c_attn [768, 2304], n_inner 4 x 768), as their published
 * config.json files give them. */
START_TEST(shapes_of_mae_and_reference) {
  const size_t T = 10;
  cJSON *j = config_of("vit_mae");
  const long D = num(j, "hidden_size"), L = num(j, "num_hidden_layers");
  load_shapes("vit_mae", T);
  has(T, D, D, 1, 4 * L);
  cJSON_Delete(j);
  TH_OK(clf_reference_gemm_shapes(T, shapes, 32, &count));
  ck_assert_uint_eq(count, 7);
  has(T, 768, 768, 1, 4);
  has(T, 3072, 768, 1, 1);
  has(T, 768, 3072, 1, 1);
  has(T, 2304, 768, 0, 1);
  has(T, 768, 768, 0, 1);
  has(T, 3072, 768, 0, 1);
  has(T, 768, 3072, 0, 1);
  ck_assert_int_eq(clf_reference_gemm_shapes(0, shapes, 32, &count), CLF_E_INVALID_ARG);
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
static void progress_fn(void *user, const char *line) {
  (void)user;
  (void)line;
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

START_TEST(tune_and_apply) {
  char dir[256], sub[300];
  th_tmpdir_create(dir, sizeof dir, "tune");
  snprintf(sub, sizeof sub, "%s/clblast", dir);
  clf_context *ctx = context_on(dir);
  ck_assert_ptr_null(clf_context_gemm_profile(ctx));

  /* A tiny budget: the defaults, one XgemmDirect and one Xgemm candidate,
   * then the combination as it will run. */
  const clf_gemm_shape s = {M, N, K, 0, 1, 1};
  clf_tune_options o = {1.0, 7, progress_fn, NULL};
  clf_tune_result r;
  clf_tune_report rep;
  ck_assert_msg(clf_tune_gemm(ctx, &s, 1, &o, &r, &rep) == CLF_OK, "%s", clf_last_error(ctx));
  ck_assert_uint_ge(rep.tried, 2);
  ck_assert_uint_le(rep.rejected, rep.tried);
  ck_assert_uint_ge(progress_lines, rep.tried);
  ck_assert(rep.default_ms > 0 && rep.tuned_ms > 0 && rep.seconds > 0);
  ck_assert_double_eq(r.default_ms, rep.default_ms); /* one shape, count 1 */
  ck_assert_double_eq(r.tuned_ms, rep.tuned_ms);
  /* Written exactly when faster (by the 2% margin), and applied at once. */
  const int written = rep.profile[0] != '\0';
  ck_assert_int_eq(written, rep.tuned_ms < 0.98 * rep.default_ms);
  /* PoCL runs CLBlast's defaults for this shape (XgemmDirect WGD=16 with no
   * vectors) several times slower than the CPU seeds tried first: there a
   * profile must come out.  A device CLBlast's database knows may keep its
   * defaults within this budget: then nothing is stored or applied, and the
   * profile handling below cannot be exercised on it. */
  int pocl = strstr(clf_context_device(ctx)->platform_name, "Portable Computing Language") != NULL;
#ifdef __SANITIZE_ADDRESS__
  pocl = 0; /* instrumented host code can make the host side dominate the timings */
#endif
  ck_assert_msg(written || !pocl, "no faster parameters found on PoCL: default %.3f ms, best %.3f ms",
                rep.default_ms, rep.tuned_ms);
  if (!written) {
    ck_assert_ptr_null(clf_context_gemm_profile(ctx));
    gemm_matches_cpu(ctx);
    clf_context_destroy(ctx);
    rmdir(sub); /* may not exist */
    th_tmpdir_remove(dir);
    return;
  }
  ck_assert_str_eq(clf_context_gemm_profile(ctx), rep.profile);
  gemm_matches_cpu(ctx);
  clf_context_destroy(ctx);

  /* A new context on the same cache applies it. */
  ctx = context_on(dir);
  ck_assert_ptr_nonnull(clf_context_gemm_profile(ctx));
  ck_assert_str_eq(clf_context_gemm_profile(ctx), rep.profile);
  ck_assert_msg(strstr(notices, "applied") != NULL, "notices: %s", notices);
  gemm_matches_cpu(ctx);
  clf_context_destroy(ctx);

  /* CLFORMER_TUNING=off: not applied, CLBlast's own parameters back. */
  setenv("CLFORMER_TUNING", "off", 1);
  ctx = context_on(dir);
  unsetenv("CLFORMER_TUNING");
  ck_assert_ptr_null(clf_context_gemm_profile(ctx));
  ck_assert_msg(strstr(notices, "restored") != NULL, "notices: %s", notices);
  gemm_matches_cpu(ctx);
  clf_context_destroy(ctx);

  /* A profile naming a parameter CLBlast does not have: ignored, logged. */
  char *text = slurp(rep.profile);
  char *x = strstr(text, "\nXgemm ");
  ck_assert_ptr_nonnull(x);
  char *bad = malloc(strlen(text) + 32);
  sprintf(bad, "%.*s\nXgemm BOGUS=3 %s", (int)(x - text), text, x + 7);
  put(rep.profile, bad);
  ctx = context_on(dir);
  ck_assert_ptr_null(clf_context_gemm_profile(ctx));
  ck_assert_msg(strstr(notices, "ignored") && strstr(notices, "BOGUS"), "notices: %s", notices);
  gemm_matches_cpu(ctx);
  clf_context_destroy(ctx);

  /* Garbage: ignored, logged. */
  put(rep.profile, "not a profile\n\x01\x02");
  ctx = context_on(dir);
  ck_assert_ptr_null(clf_context_gemm_profile(ctx));
  ck_assert_msg(strstr(notices, "ignored") != NULL, "notices: %s", notices);
  gemm_matches_cpu(ctx);
  clf_context_destroy(ctx);

  free(text);
  free(bad);
  th_tmpdir_remove(sub);
  th_tmpdir_remove(dir);
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
  tcase_add_test(tc, tune_and_apply);
  suite_add_tcase(s, tc);
  return th_run(s);
}
