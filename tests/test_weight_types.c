/* test_weight_types.c - models loaded with f16 / q8 / q4 weights.
 *
 * Two checks per fixture and type.  (1) Exactness of the path: the model
 * with stored weights against the same model with f32 weights holding the
 * same rounded values (clf_model_options.simulate), within the fixtures'
 * f32 tolerance 1e-4: the storage, fusion, transposition and the kernels
 * add nothing to the rounding.  (2) The rounding itself, against the golden
 * outputs of transformers (of max(1, max|expected|)): f16 within 2e-3; q8
 * within 5e-2 (measured up to 4.5e-2 on these 2-layer models with 32-wide
 * layers and sharp attention, whose every output sums only 32 products; on
 * all-MiniLM-L6-v2 the main job's cosines move by at most 0.004, see
 * docs/performance.md); q4 is not held to transformers here (measured 0.3
 * to 1.0 of the scale on these models: 4 bits with a block scale is that
 * coarse), only to (1).  Also: GPT-2's greedy tokens unchanged with f16,
 * the device memory each type takes, and the errors of a type a model
 * cannot use, an unknown type and a device too small for the weights. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "clformer.h"
#include "core/core.h"
#include "fixture_util.h"
#include "harness.h"

static const struct {
  clf_dtype dt;
  double tol;
} types[] = {{CLF_F16, 2e-3}, {CLF_Q8_0, 5e-2}, {CLF_Q4_0, 0 /* (1) only */}};

static clf_model *load_sim(const char *name, clf_dtype dt, int simulate, char *dir, size_t len) {
  snprintf(dir, len, "%s/%s", fixtures(), name);
  clf_model_options o;
  clf_model_options_init(&o);
  o.weights = dt;
  o.simulate = simulate;
  clf_model *m = NULL;
  TH_OK(clf_model_load_with(th_ctx, dir, &o, &m));
  ck_assert_int_eq(clf_model_weight_type(m), dt);
  return m;
}

static clf_model *load(const char *name, clf_dtype dt, char *dir, size_t len) {
  return load_sim(name, dt, 0, dir, len);
}

/* The fixture with the first n_types of types[]. */
static void run_types(const char *name, size_t n_types) {
  for (size_t t = 0; t < n_types; t++) {
    char dir[1024], what[128];
    clf_model *m = load(name, types[t].dt, dir, sizeof dir), *sim = load_sim(name, types[t].dt, 1, dir, sizeof dir);
    snprintf(what, sizeof what, "%s with %s weights", name, clf_dtype_name(types[t].dt));
    check_forward_same(m, sim, dir, 1e-4, what);
    if (types[t].tol > 0) check_forward_cases(m, dir, types[t].tol, what);
    clf_model_destroy(m);
    clf_model_destroy(sim);
  }
}

START_TEST(text_models) {
  run_types("bert", 3);
  run_types("gpt2", 3);
  run_types("marian", 3);
}
END_TEST

START_TEST(vision_models) {
  run_types("vit", 3);
  run_types("vit_cls", 3);
  /* widths of 16 and 8: f16 only (the block types need 32, below) */
  run_types("swin", 1);
  run_types("swin_cls", 1);
  run_types("vit_mae", 1);
}
END_TEST

START_TEST(gpt2_greedy_f16) {
  char dir[1024];
  clf_model *m = load("gpt2", CLF_F16, dir, sizeof dir);
  check_generate_cases(m, dir, "gpt2 with f16 weights");
  clf_model_destroy(m);
}
END_TEST

START_TEST(device_memory_shrinks) {
  char dir[1024];
  size_t bytes[4];
  const clf_dtype all[] = {CLF_F32, CLF_F16, CLF_Q8_0, CLF_Q4_0};
  for (int t = 0; t < 4; t++) {
    clf_model *m = load("gpt2", all[t], dir, sizeof dir);
    bytes[t] = clf_model_weight_bytes(m);
    clf_model_destroy(m);
  }
  /* gpt2: V 128, D 32, 2 layers of 12 D^2 linear weights; the f32 wte and
   * wpe stay, the tied head becomes a copy in the type (V x D). */
  const size_t lin = 2 * 12 * 32 * 32 + 128 * 32;
  ck_assert_uint_eq(bytes[0] - bytes[1], lin * 4 - lin * 2 - 128 * 32 * 4);
  ck_assert_uint_eq(bytes[1] - bytes[2], lin * 2 - (lin + lin / 16));
  ck_assert_uint_eq(bytes[2] - bytes[3], lin / 2);
}
END_TEST

/* clf_model_options.progress: called once per device tensor with the f32
 * bytes so far, never decreasing, against the checkpoint's f32 total. */
typedef struct progress_log {
  size_t calls, last, total;
  int monotone;
} progress_log;

static void on_progress(void *user, size_t done, size_t total) {
  progress_log *p = user;
  if (done < p->last) p->monotone = 0;
  p->calls++, p->last = done, p->total = total;
}

START_TEST(load_progress) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/bert", fixtures());
  progress_log log = {0, 0, 0, 1};
  clf_model_options o;
  clf_model_options_init(&o);
  o.progress = on_progress;
  o.progress_user = &log;
  clf_model *m = NULL;
  TH_OK(clf_model_load_with(th_ctx, dir, &o, &m));
  ck_assert(log.monotone);
  ck_assert_uint_gt(log.calls, 0);
  /* f32: every tensor of the fixture (all F32) is read once and held as is:
   * the last call reports the whole checkpoint, which the device holds */
  ck_assert_uint_eq(log.last, log.total);
  ck_assert_uint_eq(log.last, clf_model_weight_bytes(m));
  clf_model_destroy(m);
}
END_TEST

START_TEST(bad_weight_types) {
  char dir[1024];
  clf_model_options o;
  clf_model *m = NULL;
  clf_model_options_init(&o);
  snprintf(dir, sizeof dir, "%s/swin", fixtures());
  o.weights = CLF_Q8_0;
  TH_FAILS(clf_model_load_with(th_ctx, dir, &o, &m), CLF_E_UNSUPPORTED, "q8 weights need in-features that are a "
           "multiple of 32");
  ck_assert_ptr_null(m);
  snprintf(dir, sizeof dir, "%s/vit_mae", fixtures());
  o.weights = CLF_Q4_0;
  TH_FAILS(clf_model_load_with(th_ctx, dir, &o, &m), CLF_E_UNSUPPORTED, "decoder");
  o.weights = CLF_I32;
  TH_FAILS(clf_model_load_with(th_ctx, dir, &o, &m), CLF_E_INVALID_ARG, "weight type 2 is not one of");
  /* a device that cannot hold them: the check runs before any upload */
  const cl_ulong saved = th_ctx->caps.global_mem;
  th_ctx->caps.global_mem = 4096;
  o.weights = CLF_F16;
  TH_FAILS(clf_model_load_with(th_ctx, dir, &o, &m), CLF_E_OUT_OF_MEMORY, "as f16, more than the device's");
  th_ctx->caps.global_mem = saved;
  ck_assert_ptr_null(m);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("weight_types");
  TCase *c = tcase_create("fixtures");
  tcase_set_timeout(c, 0);
  tcase_add_test(c, text_models);
  tcase_add_test(c, vision_models);
  tcase_add_test(c, gpt2_greedy_f16);
  tcase_add_test(c, device_memory_shrinks);
  tcase_add_test(c, load_progress);
  tcase_add_test(c, bad_weight_types);
  suite_add_tcase(s, c);
  return s;
}

int main(void) { return th_run(suite()); }
