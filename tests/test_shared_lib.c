/* test_shared_lib.c - a program built the way users build theirs: only the
 * public header, linked against the installed-style shared libclformer
 * (whose only exported names are clf_*).  Runs one op end to end. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clformer.h>

static clf_context *ctx;

START_TEST(public_api_round_trip) {
  /* softmax([0, ln 3]) = [1/4, 3/4], exactly representable up to rounding. */
  const float x[2] = {0.0f, logf(3.0f)};
  float y[2] = {0};
  clf_tensor *t = NULL;
  ck_assert_int_eq(clf_tensor_create(ctx, CLF_F32, 2, (const size_t[]){1, 2}, &t), CLF_OK);
  ck_assert_int_eq(clf_tensor_upload(ctx, t, x, sizeof(x)), CLF_OK);
  ck_assert_int_eq(clf_softmax(ctx, t, 1.0f, t, NULL), CLF_OK);
  ck_assert_int_eq(clf_tensor_download(ctx, t, y, sizeof(y)), CLF_OK);
  ck_assert_float_eq_tol(y[0], 0.25f, 1e-6f);
  ck_assert_float_eq_tol(y[1], 0.75f, 1e-6f);
  ck_assert_int_eq(clf_softmax(ctx, NULL, 1.0f, t, NULL), CLF_E_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(clf_last_error(ctx), "NULL"));
  clf_tensor_destroy(t);
}
END_TEST

int main(void) {
  if (clf_context_create(NULL, &ctx) != CLF_OK) {
    const char *req = getenv("CLF_REQUIRE_DEVICE");
    printf("%s: %s\n", req && req[0] == '1' ? "FAIL" : "SKIP", clf_last_error(NULL));
    return req && req[0] == '1' ? 1 : 77;
  }
  Suite *s = suite_create("shared_lib");
  TCase *tc = tcase_create("public_api");
  tcase_add_test(tc, public_api_round_trip);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  clf_context_destroy(ctx);
  return failed ? 1 : 0;
}
