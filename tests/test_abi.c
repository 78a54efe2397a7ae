/* test_abi.c - the struct layouts the library tells bindings
 * (clf_struct_size, clf_field_offset, clf_field_size) are the ones a
 * program compiled against the public header sees, and unknown names get
 * CLF_LAYOUT_UNKNOWN.  Built as users build: public header, shared library;
 * needs no device. */
#include <check.h>
#include <stddef.h>
#include <stdlib.h>

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

int main(void) {
  Suite *s = suite_create("abi");
  TCase *tc = tcase_create("layouts");
  tcase_add_test(tc, layouts_match_the_header);
  tcase_add_test(tc, unknown_names);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
