/* test_generate.c - greedy and beam-search generation against the sequences
 * transformers' generate() produced for the fixtures (token for token), and
 * the argument errors of clf_model_generate.
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clformer.h"
#include "fixture_util.h"
#include "harness.h"

/* The fixture helpers below are the same as test_models.c's (each suite is
 * one self-contained program). */
/* Every generate case: the sequences must equal the expected ones exactly. */
static void run_generate_cases(const char *model_dir, const char *case_dir) {
  check_generate_cases(get_model(model_dir), case_dir, case_dir);
}

static void run_fixture(const char *name) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/%s", fixtures(), name);
  run_generate_cases(dir, dir);
}

START_TEST(test_gpt2_greedy) { run_fixture("gpt2"); }
END_TEST

START_TEST(test_gpt2_legacy_greedy) { run_fixture("gpt2_legacy"); }
END_TEST

START_TEST(test_marian_greedy_and_beam) { run_fixture("marian"); }
END_TEST

START_TEST(test_marian_paper_greedy_and_beam) {
  char *dir = make_paper_dir(), cases[1024];
  snprintf(cases, sizeof cases, "%s/marian_paper", fixtures());
  run_generate_cases(dir, cases);
  remove_dir(dir);
}
END_TEST

/* Generating twice from one model, and a forward pass between, gives the same
 * sequences (the caches are rebuilt each time). */
START_TEST(test_repeat_and_interleave) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/gpt2", fixtures());
  clf_model *m = get_model(dir);
  int32_t ids[4] = {5, 17, 99, 3};
  clf_array in = {.name = "input_ids", .dtype = CLF_I32, .ndim = 2, .shape = {1, 4}, .data = ids}, a, b, lg;
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 5;
  TH_OK(clf_model_generate(m, &in, NULL, &o, &a));
  const char *outs[] = {"logits"};
  TH_OK(clf_model_run(m, &in, 1, outs, 1, &lg));
  TH_OK(clf_model_generate(m, &in, NULL, &o, &b));
  ck_assert_uint_eq(a.shape[1], 9);
  ck_assert_uint_eq(b.shape[1], 9);
  ck_assert(memcmp(a.data, b.data, 9 * sizeof(int64_t)) == 0);
  ck_assert(memcmp(a.data, (int64_t[]){5, 17, 99, 3}, 4 * sizeof(int64_t)) == 0);
  /* the first new token is the argmax of the forward pass's last logits */
  const float *l = (const float *)lg.data + 3 * 128;
  size_t best = 0;
  for (size_t v = 1; v < 128; v++)
    if (l[v] > l[best]) best = v;
  ck_assert_int_eq(((int64_t *)a.data)[4], (int64_t)best);
  clf_array_free(&a);
  clf_array_free(&b);
  clf_array_free(&lg);
}
END_TEST

START_TEST(test_bad_arguments) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/marian", fixtures());
  clf_model *m = get_model(dir);
  int64_t ids[6] = {1, 2, 3, 4, 5, 6};
  float f[6] = {0};
  clf_array in = {.name = "input_ids", .dtype = CLF_I64, .ndim = 2, .shape = {2, 3}, .data = ids}, seq;
  clf_array fl = {.name = "input_ids", .dtype = CLF_F32, .ndim = 2, .shape = {2, 3}, .data = f};
  clf_array mk = in;
  mk.shape[1] = 2;
  TH_FAILS(clf_model_generate(m, NULL, NULL, NULL, &seq), CLF_E_INVALID_ARG, "input_ids");
  TH_FAILS(clf_model_generate(m, &in, NULL, NULL, NULL), CLF_E_INVALID_ARG, "sequences");
  TH_FAILS(clf_model_generate(m, &fl, NULL, NULL, &seq), CLF_E_DTYPE, "input_ids");
  TH_FAILS(clf_model_generate(m, &in, &mk, NULL, &seq), CLF_E_SHAPE, "attention_mask");
  /* defaults from the checkpoint: greedy up to max_length 10 */
  TH_OK(clf_model_generate(m, &in, NULL, NULL, &seq));
  ck_assert_uint_eq(seq.shape[0], 2);
  ck_assert_uint_le(seq.shape[1], 10);
  ck_assert_int_eq(((int64_t *)seq.data)[0], 95); /* decoder_start_token_id */
  clf_array_free(&seq);
  TH_FAILS(clf_model_generate(NULL, &in, NULL, NULL, &seq), CLF_E_INVALID_ARG, "model");
  /* a setting that would change the result and is not implemented is refused */
  char *tmp = copy_fixture("gpt2", NULL, NULL, 0, NULL);
  set_config(tmp, "repetition_penalty", "1.3");
  TH_OK(clf_model_load(th_ctx, tmp, &m));
  TH_FAILS(clf_model_generate(m, &in, NULL, NULL, &seq), CLF_E_UNSUPPORTED, "repetition_penalty");
  clf_model_destroy(m);
  remove_dir(tmp);
}
END_TEST

/* Writes dir/generation_config.json with the given body. */
static void write_gen_config(const char *dir, const char *body) {
  char path[1200];
  snprintf(path, sizeof path, "%s/generation_config.json", dir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(body, f);
  fclose(f);
}

/* Sizes from generation settings and arguments are checked against the
 * model and the limits before anything is allocated (issue 11: max_length
 * or num_beams of 2^61 overflowed the sizes; 2e8 / 1e6 allocated 0.8-1.6 GB
 * first; Marian generated past its position table). */
START_TEST(test_budgets) {
  int64_t ids[2] = {5, 17}, bad[2] = {5, 128};
  clf_array in = {.name = "input_ids", .dtype = CLF_I64, .ndim = 2, .shape = {1, 2}, .data = ids}, seq;
  clf_generate_options o;
  char *tmp = copy_fixture("gpt2", NULL, NULL, 0, NULL);
  clf_model *m = NULL;
  write_gen_config(tmp, "{\"bos_token_id\": 33, \"eos_token_id\": 33, \"max_length\": 2305843009213693952}");
  TH_OK(clf_model_load(th_ctx, tmp, &m));
  TH_FAILS(clf_model_generate(m, &in, NULL, NULL, &seq), CLF_E_INVALID_ARG,
           "max_length makes sequences of 2305843009213693952 tokens, more than the model's 32 positions");
  clf_model_destroy(m);
  write_gen_config(tmp, "{\"bos_token_id\": 33, \"eos_token_id\": 33, \"num_beams\": 2305843009213693952}");
  TH_OK(clf_model_load(th_ctx, tmp, &m));
  TH_FAILS(clf_model_generate(m, &in, NULL, NULL, &seq), CLF_E_INVALID_ARG,
           "num_beams 2305843009213693952 is more than the limit of 1024");
  clf_generate_options_init(&o);
  /* within the beam limit: runs (1000 x 128 logits; fewer on Oclgrind's
   * simulation) */
  o.num_beams = getenv("CLF_TEST_UNDER_OCLGRIND") ? 16 : 1000;
  o.max_new_tokens = 2;
  TH_OK(clf_model_generate(m, &in, NULL, &o, &seq));
  clf_array_free(&seq);
  clf_generate_options_init(&o);
  o.num_beams = 1; /* greedy, over the checkpoint's num_beams */
  o.max_new_tokens = 31; /* 2 + 31 > n_positions 32 */
  TH_FAILS(clf_model_generate(m, &in, NULL, &o, &seq), CLF_E_INVALID_ARG,
           "max_new_tokens makes sequences of 33 tokens, more than the model's 32 positions");
  o.max_new_tokens = (size_t)-1;
  TH_FAILS(clf_model_generate(m, &in, NULL, &o, &seq), CLF_E_INVALID_ARG, "overflows");
  o.max_new_tokens = 30; /* exactly the table */
  TH_OK(clf_model_generate(m, &in, NULL, &o, &seq));
  ck_assert_uint_eq(seq.shape[1], 32);
  clf_array_free(&seq);
  in.data = bad; /* vocab_size 128 */
  TH_FAILS(clf_model_generate(m, &in, NULL, &o, &seq), CLF_E_INVALID_ARG,
           "input_ids[0][1] is 128, outside the table of 128 rows");
  clf_model_destroy(m);
  remove_dir(tmp);
  /* Marian: 64 positions, sinusoidal; decoder start + 100 new tokens */
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/marian", fixtures());
  m = get_model(dir);
  in.data = ids;
  clf_generate_options_init(&o);
  o.max_new_tokens = 100;
  TH_FAILS(clf_model_generate(m, &in, NULL, &o, &seq), CLF_E_INVALID_ARG,
           "sequences of 101 tokens, more than the model's 64 positions");
  o.max_new_tokens = 63;
  TH_OK(clf_model_generate(m, &in, NULL, &o, &seq));
  ck_assert_uint_le(seq.shape[1], 64);
  clf_array_free(&seq);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("generate");
  TCase *tc = tcase_create("generate");
  tcase_set_timeout(tc, 600);
  tcase_add_unchecked_fixture(tc, NULL, free_models);
  tcase_add_test(tc, test_gpt2_greedy);
  tcase_add_test(tc, test_gpt2_legacy_greedy);
  tcase_add_test(tc, test_marian_greedy_and_beam);
  if (!getenv("CLF_TEST_UNDER_OCLGRIND")) tcase_add_test(tc, test_marian_paper_greedy_and_beam);
  tcase_add_test(tc, test_repeat_and_interleave);
  tcase_add_test(tc, test_bad_arguments);
  tcase_add_test(tc, test_budgets);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
