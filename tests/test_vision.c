/* test_vision.c - the vision families (vit, swin, vit_mae) against the golden
 * fixtures made with transformers (tests/fixtures/<model>/cases.json), MAE's
 * masking without a noise input, the errors of bad pixel/noise inputs, the
 * id2label labels and MAE's reconstruction from its logits.
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer.h"
#include "fixture_util.h"
#include "harness.h"

static void fixture_dir(char *dir, size_t n, const char *name) { snprintf(dir, n, "%s/%s", fixtures(), name); }

/* Every forward case of fixture `name`: f32 outputs within
 * max |got - expected| <= 1e-4 x max(1, max|expected|) (the fixtures' own
 * rule: f32 accumulation order differs from PyTorch's, ~10x margin over what
 * these tiny models accumulate); mask and ids_restore exactly. */
static void run_fixture(const char *name) {
  char dir[1024];
  fixture_dir(dir, sizeof dir, name);
  check_forward_cases(get_model(dir), dir, 1e-4, name);
}

START_TEST(test_vit) { run_fixture("vit"); }
END_TEST
START_TEST(test_vit_cls) { run_fixture("vit_cls"); }
END_TEST
START_TEST(test_vit_mae) { run_fixture("vit_mae"); }
END_TEST
START_TEST(test_vit_mae_pre) { run_fixture("vit_mae_pre"); }
END_TEST
START_TEST(test_swin) { run_fixture("swin"); }
END_TEST
START_TEST(test_swin_cls) { run_fixture("swin_cls"); }
END_TEST

/* Without noise: a valid masking (each row keeps exactly `keep` patches,
 * ids_restore a permutation consistent with the mask), and the generator
 * advances between runs. */
START_TEST(test_mae_no_noise) {
  char dir[1024];
  fixture_dir(dir, sizeof dir, "vit_mae");
  clf_model *m = get_model(dir);
  const size_t B = 2, L = 16, keep = 4;
  float *px = th_rand(B * 3 * 32 * 32, 7, -1.0f, 1.0f);
  clf_array in = {.name = "pixel_values", .dtype = CLF_F32, .ndim = 4, .shape = {B, 3, 32, 32}, .data = px};
  const char *outs[] = {"mask", "ids_restore", "loss"};
  clf_array r1[3], r2[3];
  TH_OK(clf_model_run(m, &in, 1, outs, 3, r1));
  TH_OK(clf_model_run(m, &in, 1, outs, 3, r2));
  const float *mk = r1[0].data;
  const int64_t *ir = r1[1].data;
  for (size_t b = 0; b < B; b++) {
    size_t ones = 0, seen[16] = {0};
    for (size_t l = 0; l < L; l++) {
      ones += mk[b * L + l] == 1.0f;
      ck_assert(ir[b * L + l] >= 0 && ir[b * L + l] < (int64_t)L);
      seen[ir[b * L + l]]++;
      ck_assert_int_eq(mk[b * L + l] == 0.0f, ir[b * L + l] < (int64_t)keep);
    }
    ck_assert_uint_eq(ones, L - keep);
    for (size_t l = 0; l < L; l++) ck_assert_uint_eq(seen[l], 1);
  }
  ck_assert(isfinite(*(float *)r1[2].data));
  ck_assert_msg(memcmp(r1[1].data, r2[1].data, B * L * sizeof(int64_t)) != 0, "two runs drew the same noise");
  for (int i = 0; i < 3; i++) clf_array_free(&r1[i]), clf_array_free(&r2[i]);
  free(px);
}
END_TEST

static void bad_pixels(const char *name, const char *out) {
  char dir[1024];
  fixture_dir(dir, sizeof dir, name);
  clf_model *m = get_model(dir);
  const size_t P = 8; /* the vit and vit_mae fixtures' patch size */
  float *px = calloc(2 * 4 * 40 * 40, sizeof *px);
  const char *outs[] = {out};
  clf_array res[1];
  clf_array in = {.name = "pixel_values", .dtype = CLF_F32, .ndim = 4, .shape = {2, 4, 32, 32}, .data = px};
  TH_FAILS(clf_model_run(m, &in, 1, outs, 1, res), CLF_E_SHAPE, "4 channels");
  TH_FAILS(clf_model_run(m, &in, 1, outs, 1, res), CLF_E_SHAPE, "num_channels is 3");
  in.shape[1] = 3, in.shape[2] = 4 * P + 3;
  if (strcmp(name, "swin") != 0) /* Swin pads instead, as transformers does */
    TH_FAILS(clf_model_run(m, &in, 1, outs, 1, res), CLF_E_SHAPE, "not a multiple of the patch size");
  in.shape[2] = 32, in.ndim = 3;
  TH_FAILS(clf_model_run(m, &in, 1, outs, 1, res), CLF_E_SHAPE, "pixel_values");
  in.ndim = 4, in.dtype = CLF_I32;
  TH_FAILS(clf_model_run(m, &in, 1, outs, 1, res), CLF_E_DTYPE, "pixel_values");
  TH_FAILS(clf_model_run(m, NULL, 0, outs, 1, res), CLF_E_INVALID_ARG, "needs input \"pixel_values\"");
  /* issue 11: (0, 3, 2^40, 2^40) with no data wrapped the patch count */
  in.dtype = CLF_F32, in.shape[0] = 0, in.shape[2] = in.shape[3] = (size_t)1 << 40;
  TH_FAILS(clf_model_run(m, &in, 1, outs, 1, res), CLF_E_SHAPE, "size overflows");
  in.shape[2] = in.shape[3] = 64 * P;
  TH_FAILS(clf_model_run(m, &in, 1, outs, 1, res), CLF_E_SHAPE, "holds no images (batch 0)");
  in.shape[0] = 1, in.shape[2] = in.shape[3] = 2000 * P; /* 256 M pixels; the data is never read */
  TH_FAILS(clf_model_run(m, &in, 1, outs, 1, res), CLF_E_SHAPE, "larger than the limit of 178956970 pixels");
  free(px);
}

START_TEST(test_bad_inputs) {
  bad_pixels("vit", "last_hidden_state");
  bad_pixels("vit_mae", "mask");
  bad_pixels("swin", "last_hidden_state");
  char dir[1024];
  fixture_dir(dir, sizeof dir, "vit_mae");
  clf_model *m = get_model(dir);
  ck_assert_str_eq(clf_model_type(m), "vit_mae");
  float *px = calloc(2 * 3 * 40 * 40, sizeof *px), noise[2 * 17] = {0};
  clf_array in[2] = {{.name = "pixel_values", .dtype = CLF_F32, .ndim = 4, .shape = {2, 3, 32, 32}, .data = px},
                     {.name = "noise", .dtype = CLF_F32, .ndim = 2, .shape = {2, 17}, .data = noise}};
  const char *outs[] = {"logits"};
  clf_array res[1];
  TH_FAILS(clf_model_run(m, in, 2, outs, 1, res), CLF_E_SHAPE, "\"noise\" has shape [2, 17], expected [2, 16]");
  in[1].shape[0] = 1, in[1].shape[1] = 16;
  TH_FAILS(clf_model_run(m, in, 2, outs, 1, res), CLF_E_SHAPE, "\"noise\" has shape [1, 16]");
  in[1].shape[0] = 2, in[1].dtype = CLF_F16;
  TH_FAILS(clf_model_run(m, in, 2, outs, 1, res), CLF_E_DTYPE, "noise");
  in[1].dtype = CLF_F32, in[0].shape[2] = 40, in[0].shape[3] = 40;
  TH_FAILS(clf_model_run(m, in, 2, outs, 1, res), CLF_E_SHAPE, "image_size 32x32");
  free(px);
}
END_TEST

/* id2label as the fixture's config.json writes it (vit_cls: 5 labels); a
 * model whose config has none gives 0 and NULL. */
START_TEST(test_labels) {
  char dir[1024];
  static const char *const want[] = {"tabby cat", "golden retriever", "sports car", "daisy", "teapot"};
  fixture_dir(dir, sizeof dir, "vit_cls");
  clf_model *m = get_model(dir);
  ck_assert_uint_eq(clf_model_num_labels(m), 5);
  for (size_t i = 0; i < 5; i++) ck_assert_str_eq(clf_model_label(m, i), want[i]);
  ck_assert_ptr_null(clf_model_label(m, 5));
  fixture_dir(dir, sizeof dir, "vit");
  m = get_model(dir);
  ck_assert_uint_eq(clf_model_num_labels(m), 0);
  ck_assert_ptr_null(clf_model_label(m, 0));
  ck_assert_uint_eq(clf_model_num_labels(NULL), 0);
}
END_TEST

static clf_array read_fixture_npy(const char *fixture, const char *file, const char *name) {
  char p[1200];
  clf_array a;
  snprintf(p, sizeof p, "%s/%s/%s", fixtures(), fixture, file);
  ck_assert_msg(clf_npy_read(p, &a) == CLF_OK, "%s", clf_last_error(NULL));
  snprintf(a.name, sizeof a.name, "%s", name);
  return a;
}

/* The reconstruction of the vit_mae_pre fixture (norm_pix_loss) from its
 * transformers logits, against the CPU: pixel (b, c, y, x) is the logit of
 * patch (y/P, x/P) at (p, q, c) = (y%P, x%P, c), times the target patch's
 * sqrt(unbiased var + 1e-6) plus its mean (two-pass here, in double).
 * Tolerance 1e-5 x max(1, |expected|): the library sums in one pass. */
START_TEST(test_mae_reconstruct) {
  char dir[1024];
  fixture_dir(dir, sizeof dir, "vit_mae_pre");
  clf_model *m = get_model(dir);
  clf_array px = read_fixture_npy("vit_mae_pre", "pretraining.pixel_values.npy", "pixel_values");
  clf_array lg = read_fixture_npy("vit_mae_pre", "pretraining.logits.npy", "logits");
  clf_array out;
  TH_OK(clf_model_mae_reconstruct(m, &px, &lg, &out));
  const size_t B = 2, C = 3, S = 40, P = 8, G = S / P, F = P * P * C;
  ck_assert_int_eq(out.dtype, CLF_F32);
  ck_assert_int_eq(out.ndim, 4);
  ck_assert(out.shape[0] == B && out.shape[1] == C && out.shape[2] == S && out.shape[3] == S);
  const float *x = px.data, *pred = lg.data, *got = out.data;
  double err = 0;
  for (size_t b = 0; b < B; b++)
    for (size_t l = 0; l < G * G; l++) {
      const size_t y0 = l / G * P, x0 = l % G * P;
      double mean = 0, var = 0;
      for (size_t c = 0; c < C; c++)
        for (size_t p = 0; p < P * P; p++) mean += x[((b * C + c) * S + y0 + p / P) * S + x0 + p % P];
      mean /= F;
      for (size_t c = 0; c < C; c++)
        for (size_t p = 0; p < P * P; p++) {
          double d = x[((b * C + c) * S + y0 + p / P) * S + x0 + p % P] - mean;
          var += d * d;
        }
      const double sd = sqrt(var / (F - 1) + 1e-6);
      for (size_t c = 0; c < C; c++)
        for (size_t p = 0; p < P * P; p++) {
          const double want = pred[(b * G * G + l) * F + p * C + c] * sd + mean;
          const double g = got[((b * C + c) * S + y0 + p / P) * S + x0 + p % P];
          err = fmax(err, fabs(g - want) / fmax(1.0, fabs(want)));
        }
    }
  th_note_error(err, 1e-5);
  ck_assert_msg(err <= 1e-5, "reconstruction: max relative error %.3g > 1e-5", err);
  clf_array_free(&out);

  /* wrong shapes and a model that is not vit_mae name the problem */
  lg.shape[1] = 24;
  TH_FAILS(clf_model_mae_reconstruct(m, &px, &lg, &out), CLF_E_SHAPE, "logits is not [2, 25, 192]");
  ck_assert_ptr_null(out.data);
  lg.shape[1] = 25, px.shape[1] = 4;
  TH_FAILS(clf_model_mae_reconstruct(m, &px, &lg, &out), CLF_E_SHAPE, "4 channels");
  px.shape[1] = 3, lg.dtype = CLF_I32;
  TH_FAILS(clf_model_mae_reconstruct(m, &px, &lg, &out), CLF_E_DTYPE, "logits is i32");
  lg.dtype = CLF_F32;
  fixture_dir(dir, sizeof dir, "vit");
  TH_FAILS(clf_model_mae_reconstruct(get_model(dir), &px, &lg, &out), CLF_E_UNSUPPORTED, "not vit_mae");
  TH_FAILS(clf_model_mae_reconstruct(m, &px, NULL, &out), CLF_E_INVALID_ARG, "logits");
  clf_array_free(&px);
  clf_array_free(&lg);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("vision");
  TCase *tc = tcase_create("vision");
  tcase_set_timeout(tc, 600);
  tcase_add_unchecked_fixture(tc, NULL, free_models);
  tcase_add_test(tc, test_vit);
  tcase_add_test(tc, test_vit_cls);
  tcase_add_test(tc, test_vit_mae);
  tcase_add_test(tc, test_vit_mae_pre);
  tcase_add_test(tc, test_swin);
  tcase_add_test(tc, test_swin_cls);
  tcase_add_test(tc, test_mae_no_noise);
  tcase_add_test(tc, test_bad_inputs);
  tcase_add_test(tc, test_labels);
  tcase_add_test(tc, test_mae_reconstruct);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
