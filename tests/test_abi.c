/* test_abi.c - the struct layouts the library tells bindings
 * (clf_struct_size, clf_field_offset, clf_field_size) are the ones a
 * program compiled against the public header sees, and unknown names get
 * CLF_LAYOUT_UNKNOWN; the element types' list (clf_dtype_at) holds the
 * enum's values and agrees with the one-type functions.  Built as users
 * build: public header, shared library; needs no device. */
#include <check.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <clformer.h>

#define FIELD_SIZE(T, f) sizeof(((T *)0)->f)
#define CHECK_FIELD(T, f)                                                    \
  do {                                                                       \
    ck_assert_uint_eq(clf_field_offset(#T, #f), offsetof(T, f));             \
    ck_assert_uint_eq(clf_field_size(#T, #f), FIELD_SIZE(T, f));             \
  } while (0)

START_TEST(layouts_match_the_header) {
  ck_assert_uint_eq(clf_struct_size("clf_model_options"), sizeof(clf_model_options));
  CHECK_FIELD(clf_model_options, weights);
  CHECK_FIELD(clf_model_options, progress_user);
  ck_assert_uint_eq(clf_struct_size("clf_generate_options"), sizeof(clf_generate_options));
  CHECK_FIELD(clf_generate_options, temperature);
  CHECK_FIELD(clf_generate_options, n_eos_token_ids);
  ck_assert_uint_eq(clf_struct_size("clf_device_desc"), sizeof(clf_device_desc));
  CHECK_FIELD(clf_device_desc, device_version);
  ck_assert_uint_eq(clf_struct_size("clf_array"), sizeof(clf_array));
  CHECK_FIELD(clf_array, shape);
  ck_assert_uint_eq(clf_struct_size("clf_image_processor"), sizeof(clf_image_processor));
  CHECK_FIELD(clf_image_processor, std);
  ck_assert_uint_eq(clf_struct_size("clf_tune_report"), sizeof(clf_tune_report));
  CHECK_FIELD(clf_tune_report, skinny);
  CHECK_FIELD(clf_tune_report, rows);
  ck_assert_uint_eq(clf_struct_size("clf_dtype_desc"), sizeof(clf_dtype_desc));
  CHECK_FIELD(clf_dtype_desc, weight_name);
  CHECK_FIELD(clf_dtype_desc, linear_weight);
  ck_assert_uint_eq(clf_struct_size("clf_engine_options"), sizeof(clf_engine_options));
  CHECK_FIELD(clf_engine_options, max_sequences);
  ck_assert_uint_eq(clf_struct_size("clf_engine_request"), sizeof(clf_engine_request));
  CHECK_FIELD(clf_engine_request, isolation);
  CHECK_FIELD(clf_engine_request, on_done);
  CHECK_FIELD(clf_engine_request, user);
  ck_assert_uint_eq(clf_struct_size("clf_engine_stats"), sizeof(clf_engine_stats));
  CHECK_FIELD(clf_engine_stats, prefix_tokens_reused);
  CHECK_FIELD(clf_engine_stats, rows);
  ck_assert_uint_eq(clf_struct_size("clf_attention_mask"), sizeof(clf_attention_mask));
  CHECK_FIELD(clf_attention_mask, window);
  CHECK_FIELD(clf_attention_mask, softcap);
}
END_TEST

START_TEST(unknown_names) {
  ck_assert_uint_eq(clf_struct_size("clf_no_such_struct"), CLF_LAYOUT_UNKNOWN);
  ck_assert_uint_eq(clf_struct_size(NULL), CLF_LAYOUT_UNKNOWN);
  ck_assert_uint_eq(clf_struct_size("clf_context"), CLF_LAYOUT_UNKNOWN); /* opaque */
  ck_assert_uint_eq(clf_field_offset("clf_model_options", "no_such_field"), CLF_LAYOUT_UNKNOWN);
  ck_assert_uint_eq(clf_field_offset("clf_image", "weights"), CLF_LAYOUT_UNKNOWN); /* another struct's */
  ck_assert_uint_eq(clf_field_offset("clf_model_options", NULL), CLF_LAYOUT_UNKNOWN);
  ck_assert_uint_eq(clf_field_size(NULL, "weights"), CLF_LAYOUT_UNKNOWN);
  ck_assert_uint_eq(clf_field_size("clf_model_options", ""), CLF_LAYOUT_UNKNOWN);
}
END_TEST

/* The element types' list: the enum's values are the ones bindings and
 * saved files were built with (part of the ABI, so written out here, not
 * taken from the list), and each row's names and sizes agree with the
 * functions that answer them one type at a time. */
START_TEST(dtype_list) {
  static const struct { clf_dtype dt; int value; const char *name, *weight_name; } want[] = {
      {CLF_F32, 0, "f32", "f32"},      {CLF_F16, 1, "f16", "f16"},      {CLF_I32, 2, "i32", "i32"},
      {CLF_I64, 3, "i64", "i64"},      {CLF_Q8_0, 4, "q8_0", "q8"},     {CLF_Q4_0, 5, "q4_0", "q4"},
      {CLF_Q4_1, 6, "q4_1", "q4_1"},   {CLF_Q5_0, 7, "q5_0", "q5_0"},   {CLF_Q5_1, 8, "q5_1", "q5_1"},
      {CLF_Q2_K, 9, "q2_k", "q2_k"},   {CLF_Q3_K, 10, "q3_k", "q3_k"},  {CLF_Q4_K, 11, "q4_k", "q4k"},
      {CLF_Q5_K, 12, "q5_k", "q5_k"},  {CLF_Q6_K, 13, "q6_k", "q6k"},   {CLF_STORED, 64, "stored", "stored"},
  };
  const size_t n = sizeof want / sizeof want[0];
  ck_assert_uint_eq(clf_dtype_count(), n);
  clf_dtype_desc d;
  for (size_t i = 0; i < n; i++) {
    ck_assert_int_eq(clf_dtype_at(i, &d), CLF_OK);
    ck_assert_int_eq((int)want[i].dt, want[i].value);
    ck_assert_int_eq((int)d.dtype, want[i].value);
    ck_assert_str_eq(d.name, want[i].name);
    ck_assert_str_eq(d.weight_name, want[i].weight_name);
    ck_assert_str_eq(clf_dtype_name(d.dtype), d.name);
    /* clf_dtype_size: an element type's size, 0 for blocks and CLF_STORED */
    ck_assert_uint_eq(clf_dtype_size(d.dtype), d.block == 1 ? d.block_bytes : 0);
    /* a weight type round-trips through either name; the others are refused */
    clf_dtype got = (clf_dtype)-1;
    const clf_status want_st = d.weights_target ? CLF_OK : CLF_E_INVALID_ARG;
    ck_assert_int_eq(clf_weight_type_from_name(d.weight_name, &got), want_st);
    ck_assert_int_eq(clf_weight_type_from_name(d.name, &got), want_st);
    if (d.weights_target) ck_assert_int_eq(got, d.dtype);
    /* clf_linear reads every weight type a model may ask for */
    if (d.weights_target && d.dtype != CLF_STORED) ck_assert(d.linear_weight);
    /* ggml's layout: blocks of 32 or 256 with a ggml type number */
    if (d.ggml_layout) ck_assert(d.ggml_type > 0 && (d.block == 32 || d.block == 256));
  }
  ck_assert_int_eq(clf_dtype_at(n, &d), CLF_E_INVALID_ARG);
  ck_assert_int_eq(clf_dtype_at(0, NULL), CLF_E_INVALID_ARG);
  ck_assert_str_eq(clf_dtype_name((clf_dtype)14), "unknown");
}
END_TEST

/* The generation settings' list (issue 43): the names the command line,
 * Python and the server take, in the order of clf_generate_setting_id;
 * every default inside its range; the integers' bounds exact and within a
 * long long; every row with help and a default in words. */
START_TEST(generate_setting_list) {
  static const char *want[] = {"max_new_tokens", "num_beams", "do_sample", "temperature", "top_k",
                               "top_p", "min_p", "repetition_penalty", "no_repeat_ngram_size", "seed"};
  const size_t n = sizeof want / sizeof want[0];
  ck_assert_uint_eq(clf_generate_setting_count(), n);
  ck_assert_uint_eq(CLF_GEN_SETTING_COUNT, n);
  ck_assert_int_eq(CLF_GEN_TOP_K, 4);
  clf_generate_setting g;
  int sampling = 0;
  for (size_t i = 0; i < n; i++) {
    ck_assert_int_eq(clf_generate_setting_at(i, &g), CLF_OK);
    ck_assert_str_eq(g.name, want[i]);
    ck_assert(g.min <= g.max);
    ck_assert(g.help && *g.help && g.default_text && *g.default_text);
    ck_assert_msg((g.metavar == NULL) == (g.type == CLF_GEN_BOOL), "%s", g.name);
    if (g.has_default)
      ck_assert_msg(g.default_value <= g.max && (g.default_value > g.min || (!g.min_excluded && g.default_value == g.min)),
                    "%s: default %g outside its range", g.name, g.default_value);
    if (g.type == CLF_GEN_INT) ck_assert(g.max < 9.3e18 && g.max == (double)(long long)g.max);
    sampling += g.sampling;
  }
  /* temperature, top_k, top_p, min_p: given, they turn sampling on */
  ck_assert_int_eq(sampling, 4);
  ck_assert_int_eq(clf_generate_setting_at(CLF_GEN_NUM_BEAMS, &g), CLF_OK);
  ck_assert(g.whole);
  ck_assert_int_eq(clf_generate_setting_at(n, &g), CLF_E_INVALID_ARG);
  ck_assert_int_eq(clf_generate_setting_at(0, NULL), CLF_E_INVALID_ARG);
}
END_TEST

int main(void) {
  Suite *s = suite_create("abi");
  TCase *tc = tcase_create("layouts");
  tcase_add_test(tc, layouts_match_the_header);
  tcase_add_test(tc, unknown_names);
  tcase_add_test(tc, dtype_list);
  tcase_add_test(tc, generate_setting_list);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
