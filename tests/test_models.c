/* test_models.c - the model families against the golden fixtures made with
 * transformers (tests/fixtures/<model>/cases.json), and the errors of loading
 * and running a model (bad inputs, bad configs, missing or misshaped tensors).
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clformer.h"
#include "fixture_util.h"
#include "harness.h"

/* The fixtures' own tolerance: max |got - expected| <= 1e-4 x
 * max(1, max|expected|) (f32 accumulation order differs from PyTorch's;
 * 1e-4 leaves a margin of ~10x over what a 2-layer model accumulates). */
static void run_forward_cases(const char *model_dir, const char *case_dir) {
  check_forward_cases(get_model(model_dir), case_dir, 1e-4, case_dir);
}

static void run_fixture(const char *name) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/%s", fixtures(), name);
  run_forward_cases(dir, dir);
}

START_TEST(test_bert) { run_fixture("bert"); }
END_TEST

START_TEST(test_bert_legacy) { run_fixture("bert_legacy"); }
END_TEST

START_TEST(test_gpt2) { run_fixture("gpt2"); }
END_TEST

START_TEST(test_gpt2_legacy) { run_fixture("gpt2_legacy"); }
END_TEST

START_TEST(test_marian) { run_fixture("marian"); }
END_TEST

START_TEST(test_marian_paper) {
  char *dir = make_paper_dir(), cases[1024];
  snprintf(cases, sizeof cases, "%s/marian_paper", fixtures());
  run_forward_cases(dir, cases);
  remove_dir(dir);
}
END_TEST

/* Names, types and the generic input/output checks. */
START_TEST(test_names_and_bad_inputs) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/bert", fixtures());
  clf_model *m = get_model(dir);
  ck_assert_str_eq(clf_model_type(m), "bert");
  const char *const *names;
  ck_assert_uint_eq(clf_model_input_names(m, &names), 4);
  ck_assert_str_eq(names[0], "input_ids");
  ck_assert_uint_eq(clf_model_output_names(m, &names), 2);
  ck_assert_str_eq(names[1], "pooler_output");

  int64_t ids[6] = {1, 2, 3, 4, 5, 6};
  float fids[6] = {0};
  clf_array in = {.name = "input_ids", .dtype = CLF_I64, .ndim = 2, .shape = {2, 3}, .data = ids};
  clf_array res[2];
  const char *out_ok[] = {"last_hidden_state"}, *out_bad[] = {"logits"};
  TH_FAILS(clf_model_run(m, &in, 1, out_bad, 1, res), CLF_E_INVALID_ARG, "last_hidden_state, pooler_output");
  TH_FAILS(clf_model_run(m, &in, 1, out_bad, 1, res), CLF_E_INVALID_ARG, "\"logits\"");
  TH_FAILS(clf_model_run(m, NULL, 0, out_ok, 1, res), CLF_E_INVALID_ARG, "input_ids");
  clf_array unk = in;
  snprintf(unk.name, sizeof unk.name, "pixel_values");
  TH_FAILS(clf_model_run(m, &unk, 1, out_ok, 1, res), CLF_E_INVALID_ARG, "pixel_values");
  TH_FAILS(clf_model_run(m, &unk, 1, out_ok, 1, res), CLF_E_INVALID_ARG, "token_type_ids");
  clf_array fl = {.name = "input_ids", .dtype = CLF_F32, .ndim = 2, .shape = {2, 3}, .data = fids};
  TH_FAILS(clf_model_run(m, &fl, 1, out_ok, 1, res), CLF_E_DTYPE, "input_ids");
  clf_array two[2] = {in, in};
  snprintf(two[1].name, sizeof two[1].name, "attention_mask");
  two[1].shape[0] = 3, two[1].shape[1] = 2;
  TH_FAILS(clf_model_run(m, two, 2, out_ok, 1, res), CLF_E_SHAPE, "attention_mask");
  clf_array flat = in;
  flat.ndim = 1, flat.shape[0] = 6;
  TH_FAILS(clf_model_run(m, &flat, 1, out_ok, 1, res), CLF_E_SHAPE, "input_ids");
  /* ids outside their tables are refused, naming the place (issue 11: 10^12 or
   * -5 ran, the gather reading a zero row or memory it does not own) */
  int64_t big[6] = {1, 2, 3, 4, 1000000000000LL, 6}, neg[6] = {1, -5, 3, 4, 5, 6}, five[6] = {0, 0, 0, 5, 0, 0};
  clf_array oob[2] = {in, in};
  oob[0].data = big;
  TH_FAILS(clf_model_run(m, oob, 1, out_ok, 1, res), CLF_E_INVALID_ARG,
           "input_ids[1][1] is 1000000000000, outside the table of");
  oob[0].data = neg;
  TH_FAILS(clf_model_run(m, oob, 1, out_ok, 1, res), CLF_E_INVALID_ARG, "input_ids[0][1] is -5");
  oob[0].data = ids;
  oob[1].data = five;
  snprintf(oob[1].name, sizeof oob[1].name, "token_type_ids");
  TH_FAILS(clf_model_run(m, oob, 2, out_ok, 1, res), CLF_E_INVALID_ARG, "token_type_ids[1][0] is 5");
  snprintf(oob[1].name, sizeof oob[1].name, "position_ids");
  five[3] = 32; /* the fixture's max_position_embeddings */
  TH_FAILS(clf_model_run(m, oob, 2, out_ok, 1, res), CLF_E_INVALID_ARG, "position_ids[1][0] is 32");
  /* the same output twice gets two copies */
  const char *twice[] = {"pooler_output", "pooler_output"};
  TH_OK(clf_model_run(m, &in, 1, twice, 2, res));
  ck_assert_int_eq(res[0].ndim, 2);
  ck_assert_uint_eq(res[0].shape[1], 32);
  ck_assert(memcmp(res[0].data, res[1].data, 2 * 32 * sizeof(float)) == 0);
  ck_assert_ptr_ne(res[0].data, res[1].data);
  clf_array_free(&res[0]);
  clf_array_free(&res[1]);
  /* an empty batch runs and gives empty outputs */
  clf_array empty = in;
  empty.shape[0] = 0;
  TH_OK(clf_model_run(m, &empty, 1, twice, 1, res));
  ck_assert_uint_eq(res[0].shape[0], 0);
  clf_array_free(&res[0]);
  /* BertModel cannot generate */
  clf_array seq;
  TH_FAILS(clf_model_generate(m, &in, NULL, NULL, &seq), CLF_E_UNSUPPORTED, "bert");
  clf_model_destroy(NULL);
}
END_TEST

START_TEST(test_bad_configs) {
  clf_model *m = (clf_model *)1;
  char *dir = copy_fixture("bert", NULL, NULL, 0, NULL);
  set_config(dir, "model_type", "\"t5\"");
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_UNSUPPORTED, "\"t5\"");
  ck_assert_ptr_null(m);
  set_config(dir, "model_type", "\"bert\"");
  set_config(dir, "architectures", "[\"BertForMultipleChoice\"]");
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_UNSUPPORTED, "BertForMultipleChoice");
  set_config(dir, "architectures", "[\"BertModel\"]");
  set_config(dir, "hidden_act", "\"mish2\"");
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_UNSUPPORTED, "mish2");
  set_config(dir, "hidden_act", "\"gelu\"");
  set_config(dir, "hidden_size", "\"big\"");
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_FORMAT, "hidden_size");
  set_config(dir, "hidden_size", "32");
  TH_OK(clf_model_load(th_ctx, dir, &m));
  clf_model_destroy(m);
  remove_dir(dir);

  /* issue 11: Swin's mlp_ratio of 1e300 converted to size_t undefined */
  dir = copy_fixture("swin", NULL, NULL, 0, NULL);
  set_config(dir, "mlp_ratio", "1e300");
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_FORMAT, "swin mlp_ratio 1e+300 gives an intermediate size");
  set_config(dir, "mlp_ratio", "-2");
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_FORMAT, "swin mlp_ratio -2");
  set_config(dir, "mlp_ratio", "2.0"); /* the fixture's: loads */
  TH_OK(clf_model_load(th_ctx, dir, &m));
  clf_model_destroy(m);
  set_config(dir, "embed_dim", "4611686018427387904");
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_FORMAT, "swin config has invalid sizes");
  remove_dir(dir);

  dir = copy_fixture("gpt2", NULL, NULL, 0, NULL);
  set_config(dir, "activation_function", "\"swishy\"");
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_UNSUPPORTED, "swishy");
  remove_dir(dir);
  dir = copy_fixture("marian", NULL, NULL, 0, NULL);
  set_config(dir, "activation_function", "\"tanh_x\"");
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_UNSUPPORTED, "tanh_x");
  remove_dir(dir);
  TH_FAILS(clf_model_load(th_ctx, "/nonexistent/model", &m), CLF_E_NOT_FOUND, "/nonexistent/model/config.json");
}
END_TEST

START_TEST(test_bad_tensors) {
  clf_model *m = NULL;
  char *dir = copy_fixture("bert", "encoder.layer.1.attention.self.key.weight", NULL, 0, NULL);
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_NOT_FOUND, "encoder.layer.1.attention.self.key.weight");
  remove_dir(dir);
  dir = copy_fixture("bert", NULL, "pooler.dense.weight", 2, (size_t[]){16, 64});
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_SHAPE, "pooler.dense.weight");
  remove_dir(dir);
  dir = copy_fixture("gpt2", "transformer.h.0.attn.c_attn.bias", NULL, 0, NULL);
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_NOT_FOUND, "transformer.h.0.attn.c_attn.bias");
  remove_dir(dir);
  /* Conv1D weights are [in, out]: the transposed shape is an error */
  dir = copy_fixture("gpt2", NULL, "transformer.h.1.mlp.c_fc.weight", 2, (size_t[]){128, 32});
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_SHAPE, "transformer.h.1.mlp.c_fc.weight");
  remove_dir(dir);
  dir = copy_fixture("marian", "model.decoder.layers.1.encoder_attn_layer_norm.weight", NULL, 0, NULL);
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_NOT_FOUND, "model.decoder.layers.1.encoder_attn_layer_norm");
  remove_dir(dir);
  ck_assert_ptr_null(m);
}
END_TEST

/* The gpt2 fixture with a 16384-token table (2 MiB of f32: its 128 rows
 * repeated), in a temp directory (remove_dir it). */
static char *big_vocab_gpt2(void) {
  enum { V = 16384 };
  char *dir = copy_fixture("gpt2", NULL, NULL, 0, NULL), src[1024], dst[1200];
  snprintf(src, sizeof src, "%s/gpt2/model.safetensors", fixtures());
  clf_safetensors *st = NULL;
  ck_assert_msg(clf_safetensors_open(src, &st) == CLF_OK, "%s", clf_last_error(NULL));
  const size_t n = clf_safetensors_count(st);
  st_entry *e = calloc(n, sizeof *e);
  float *table = NULL;
  for (size_t i = 0; i < n; i++) {
    clf_st_info info;
    ck_assert(clf_safetensors_info(st, i, &info) == CLF_OK);
    e[i] = (st_entry){info.name, info.dtype, info.ndim, {0}, info.data, info.bytes};
    memcpy(e[i].shape, info.shape, sizeof info.shape);
    if (strcmp(info.name, "transformer.wte.weight") != 0) continue;
    table = malloc((size_t)V * info.shape[1] * sizeof *table);
    for (size_t r = 0; r < V; r++)
      memcpy(table + r * info.shape[1], (const float *)info.data + (r % info.shape[0]) * info.shape[1],
             info.shape[1] * sizeof *table);
    e[i].shape[0] = V;
    e[i].data = table;
    e[i].bytes = (size_t)V * info.shape[1] * sizeof *table;
  }
  ck_assert_ptr_nonnull(table);
  snprintf(dst, sizeof dst, "%s/model.safetensors", dir);
  write_safetensors(dst, e, n);
  free(table);
  free(e);
  clf_safetensors_close(st);
  set_config(dir, "vocab_size", "16384");
  return dir;
}

static void count_progress(void *user, size_t done, size_t total) {
  (void)done, (void)total;
  ++*(int *)user;
}

/* A weight larger than the largest allocation (CLFORMER_LIMITS alloc, as a
 * phone's GPU has) is refused by name before any weight is uploaded: as
 * f32 by the check of the whole file, and under q4 (where the table could
 * fit as a linear weight, but the embedding keeps it f32) before it is
 * read.  Under a limit it fits, the model loads. */
START_TEST(test_weight_over_alloc_limit) {
  static const char want[] = "weight transformer.wte.weight (2 MiB) is larger than the device's largest allocation "
                             "(1 MiB, clf_context_options.limits alloc)";
  char *dir = big_vocab_gpt2();
  clf_context_options o;
  clf_context_options_init(&o);
  o.limits = "alloc=1m";
  clf_context *c = NULL;
  ck_assert_msg(clf_context_create(&o, &c) == CLF_OK, "%s", clf_last_error(NULL));
  ck_assert_str_eq(clf_context_limits(c), "alloc=1048576");
  clf_model *m = NULL;
  int uploads = 0;
  clf_model_options mo;
  clf_model_options_init(&mo);
  mo.progress = count_progress;
  mo.progress_user = &uploads;
  for (int q4 = 0; q4 < 2; q4++) {
    mo.weights = q4 ? CLF_Q4_0 : CLF_F32;
    ck_assert_int_eq(clf_model_load_with(c, dir, &mo, &m), CLF_E_OUT_OF_MEMORY);
    ck_assert_msg(strstr(clf_last_error(c), want) != NULL, "%s", clf_last_error(c));
    ck_assert_ptr_null(m);
    ck_assert_int_eq(uploads, 0);
  }
  clf_context_destroy(c);
  o.limits = "alloc=4m";
  ck_assert_msg(clf_context_create(&o, &c) == CLF_OK, "%s", clf_last_error(NULL));
  ck_assert_msg(clf_model_load(c, dir, &m) == CLF_OK, "%s", clf_last_error(c));
  clf_model_destroy(m);
  clf_context_destroy(c);
  remove_dir(dir);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("models");
  TCase *tc = tcase_create("models");
  tcase_set_timeout(tc, 600);
  tcase_add_unchecked_fixture(tc, NULL, free_models);
  tcase_add_test(tc, test_bert);
  tcase_add_test(tc, test_bert_legacy);
  tcase_add_test(tc, test_gpt2);
  tcase_add_test(tc, test_gpt2_legacy);
  tcase_add_test(tc, test_marian);
  if (!getenv("CLF_TEST_UNDER_OCLGRIND")) tcase_add_test(tc, test_marian_paper);
  tcase_add_test(tc, test_names_and_bad_inputs);
  tcase_add_test(tc, test_bad_configs);
  tcase_add_test(tc, test_bad_tensors);
  tcase_add_test(tc, test_weight_over_alloc_limit);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
