/* test_config.c - config.json and generation_config.json: every getter,
 * defaults, missing keys, wrong types, lists, the override of
 * generation_config.json and malformed files, with their messages. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/config.h"
#include "harness.h"

static char tmpdir[64];
static char cfg_path[128], gen_path[128];

static void put(const char *name, const char *text) {
  char path[256];
  snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

static const char *config_json =
    "{\"model_type\": \"marian\", \"d_model\": 16, \"vocab_size\": 2.0e2, \"layer_norm_eps\": 1e-05,\n"
    " \"scale_embedding\": true, \"tie\": false, \"activation_function\": \"relu\", \"nothing\": null,\n"
    " \"half\": 1.5, \"big\": 1e300, \"count_str\": \"12\", \"flag_int\": 1, \"neg\": -3,\n"
    " \"eos_token_id\": 0, \"max_length\": 20, \"list\": [4, 5, 6], \"mixed\": [1, \"a\"],\n"
    " \"bad_words_ids\": [[58100], [7, 8]], \"id2label\": {\"0\": \"NEG\", \"1\": \"POS\"}}\n";
static const char *gen_json =
    "{\"eos_token_id\": [0, 2], \"max_length\": \"long\", \"num_beams\": 4,\n"
    " \"forced_eos_token_id\": null, \"tie\": true}\n";

static clf__config *load_ok(void) {
  clf__config *c = NULL;
  TH_OK(clf__config_load(th_ctx, tmpdir, &c));
  ck_assert_ptr_nonnull(c);
  return c;
}

START_TEST(cfg_getters) {
  put("config.json", config_json);
  clf__config *c = load_ok();
  long i;
  double f;
  int b;
  const char *s;
  TH_OK(clf__config_int(th_ctx, c, "d_model", &i));
  ck_assert_int_eq(i, 16);
  TH_OK(clf__config_int(th_ctx, c, "vocab_size", &i)); /* 2.0e2 is integral */
  ck_assert_int_eq(i, 200);
  TH_OK(clf__config_int(th_ctx, c, "neg", &i));
  ck_assert_int_eq(i, -3);
  TH_OK(clf__config_float(th_ctx, c, "layer_norm_eps", &f));
  ck_assert(f == 1e-5);
  TH_OK(clf__config_float(th_ctx, c, "d_model", &f)); /* an int is a number */
  ck_assert(f == 16.0);
  TH_OK(clf__config_bool(th_ctx, c, "scale_embedding", &b));
  ck_assert_int_eq(b, 1);
  TH_OK(clf__config_bool(th_ctx, c, "tie", &b));
  ck_assert_int_eq(b, 0);
  TH_OK(clf__config_str(th_ctx, c, "activation_function", &s));
  ck_assert_str_eq(s, "relu");
  ck_assert_int_eq(clf__config_has(c, "d_model"), 1);
  ck_assert_int_eq(clf__config_has(c, "nothing"), 0); /* null counts as absent */
  ck_assert_int_eq(clf__config_has(c, "absent"), 0);
  ck_assert_int_eq(clf__config_has(NULL, "d_model"), 0);

  /* Defaults for absent and null keys; present keys win over the default. */
  TH_OK(clf__config_int_or(th_ctx, c, "absent", 7, &i));
  ck_assert_int_eq(i, 7);
  TH_OK(clf__config_int_or(th_ctx, c, "nothing", 8, &i));
  ck_assert_int_eq(i, 8);
  TH_OK(clf__config_int_or(th_ctx, c, "d_model", 8, &i));
  ck_assert_int_eq(i, 16);
  TH_OK(clf__config_float_or(th_ctx, c, "absent", 0.5, &f));
  ck_assert(f == 0.5);
  TH_OK(clf__config_float_or(th_ctx, c, "half", 0.5, &f));
  ck_assert(f == 1.5);
  TH_OK(clf__config_bool_or(th_ctx, c, "absent", 1, &b));
  ck_assert_int_eq(b, 1);
  TH_OK(clf__config_bool_or(th_ctx, c, "tie", 1, &b));
  ck_assert_int_eq(b, 0);
  TH_OK(clf__config_str_or(th_ctx, c, "nothing", "gelu", &s));
  ck_assert_str_eq(s, "gelu");
  TH_OK(clf__config_str_or(th_ctx, c, "model_type", "x", &s));
  ck_assert_str_eq(s, "marian");

  /* The raw JSON for everything else. */
  const cJSON *j = clf__config_json(c);
  const cJSON *labels = cJSON_GetObjectItemCaseSensitive(j, "id2label");
  ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(labels, "1")->valuestring, "POS");
  clf__config_free(c);
  clf__config_free(NULL);
}
END_TEST

START_TEST(cfg_missing_and_wrong_types) {
  put("config.json", config_json);
  clf__config *c = load_ok();
  long i;
  double f;
  int b;
  const char *s;
  TH_FAILS(clf__config_int(th_ctx, c, "hidden_size", &i), CLF_E_FORMAT, "key \"hidden_size\" missing in");
  TH_FAILS(clf__config_int(th_ctx, c, "hidden_size", &i), CLF_E_FORMAT, cfg_path);
  TH_FAILS(clf__config_float(th_ctx, c, "eps", &f), CLF_E_FORMAT, "key \"eps\" missing");
  TH_FAILS(clf__config_bool(th_ctx, c, "absent", &b), CLF_E_FORMAT, "key \"absent\" missing");
  TH_FAILS(clf__config_str(th_ctx, c, "absent", &s), CLF_E_FORMAT, "key \"absent\" missing");
  TH_FAILS(clf__config_int(th_ctx, c, "nothing", &i), CLF_E_FORMAT, "key \"nothing\" in");
  TH_FAILS(clf__config_int(th_ctx, c, "nothing", &i), CLF_E_FORMAT, "is null");

  TH_FAILS(clf__config_int(th_ctx, c, "half", &i), CLF_E_FORMAT, "is a number, expected an integer");
  TH_FAILS(clf__config_int(th_ctx, c, "big", &i), CLF_E_FORMAT, "expected an integer");
  TH_FAILS(clf__config_int(th_ctx, c, "count_str", &i), CLF_E_FORMAT, "key \"count_str\" in");
  TH_FAILS(clf__config_int(th_ctx, c, "count_str", &i), CLF_E_FORMAT, "is a string, expected an integer");
  TH_FAILS(clf__config_int(th_ctx, c, "scale_embedding", &i), CLF_E_FORMAT, "is a boolean, expected an integer");
  TH_FAILS(clf__config_float(th_ctx, c, "model_type", &f), CLF_E_FORMAT, "is a string, expected a number");
  TH_FAILS(clf__config_bool(th_ctx, c, "flag_int", &b), CLF_E_FORMAT, "is a number, expected true or false");
  TH_FAILS(clf__config_str(th_ctx, c, "d_model", &s), CLF_E_FORMAT, "is a number, expected a string");
  TH_FAILS(clf__config_str(th_ctx, c, "list", &s), CLF_E_FORMAT, "is a list, expected a string");
  TH_FAILS(clf__config_str(th_ctx, c, "id2label", &s), CLF_E_FORMAT, "is an object, expected a string");
  /* The optional getters still check the type. */
  TH_FAILS(clf__config_int_or(th_ctx, c, "half", 1, &i), CLF_E_FORMAT, "key \"half\"");
  TH_FAILS(clf__config_float_or(th_ctx, c, "model_type", 1, &f), CLF_E_FORMAT, "expected a number");
  TH_FAILS(clf__config_bool_or(th_ctx, c, "d_model", 1, &b), CLF_E_FORMAT, "expected true or false");
  TH_FAILS(clf__config_str_or(th_ctx, c, "tie", "x", &s), CLF_E_FORMAT, "is a boolean, expected a string");
  /* Bad arguments. */
  TH_FAILS(clf__config_int(th_ctx, NULL, "d_model", &i), CLF_E_INVALID_ARG, "config is NULL");
  TH_FAILS(clf__config_int(th_ctx, c, NULL, &i), CLF_E_INVALID_ARG, "key is NULL");
  TH_FAILS(clf__config_int(th_ctx, c, "d_model", NULL), CLF_E_INVALID_ARG, "out is NULL");
  clf__config_free(c);
}
END_TEST

START_TEST(cfg_lists) {
  put("config.json", config_json);
  clf__config *c = load_ok();
  long v[8];
  size_t n = 99;
  TH_OK(clf__config_int_list(th_ctx, c, "eos_token_id", v, 8, &n)); /* a single int */
  ck_assert(n == 1 && v[0] == 0);
  TH_OK(clf__config_int_list(th_ctx, c, "list", v, 8, &n));
  ck_assert(n == 3 && v[0] == 4 && v[1] == 5 && v[2] == 6);
  TH_OK(clf__config_int_list(th_ctx, c, "list", NULL, 0, &n)); /* counting only */
  ck_assert_uint_eq(n, 3);
  TH_OK(clf__config_int_list(th_ctx, c, "absent", v, 8, &n));
  ck_assert_uint_eq(n, 0);
  TH_OK(clf__config_int_list(th_ctx, c, "nothing", v, 8, &n));
  ck_assert_uint_eq(n, 0);
  TH_FAILS(clf__config_int_list(th_ctx, c, "list", v, 2, &n), CLF_E_FORMAT, "key \"list\" in");
  TH_FAILS(clf__config_int_list(th_ctx, c, "list", v, 2, &n), CLF_E_FORMAT, "more than 2 values");
  TH_FAILS(clf__config_int_list(th_ctx, c, "mixed", v, 8, &n), CLF_E_FORMAT, "a list of integers only");
  TH_FAILS(clf__config_int_list(th_ctx, c, "model_type", v, 8, &n), CLF_E_FORMAT,
           "expected an integer or a list of integers");
  TH_FAILS(clf__config_int_list(th_ctx, c, "half", v, 8, &n), CLF_E_FORMAT, "expected an integer or a list");

  /* bad_words_ids: [[58100], [7, 8]] -> 58100 -1 7 8 -1. */
  TH_OK(clf__config_int_lists(th_ctx, c, "bad_words_ids", v, 8, &n));
  ck_assert_uint_eq(n, 5);
  ck_assert(v[0] == 58100 && v[1] == -1 && v[2] == 7 && v[3] == 8 && v[4] == -1);
  TH_OK(clf__config_int_lists(th_ctx, c, "bad_words_ids", NULL, 0, &n));
  ck_assert_uint_eq(n, 5);
  TH_OK(clf__config_int_lists(th_ctx, c, "absent", v, 8, &n));
  ck_assert_uint_eq(n, 0);
  TH_FAILS(clf__config_int_lists(th_ctx, c, "bad_words_ids", v, 4, &n), CLF_E_FORMAT, "more than 4 values");
  TH_FAILS(clf__config_int_lists(th_ctx, c, "list", v, 8, &n), CLF_E_FORMAT, "expected a list of lists");
  TH_FAILS(clf__config_int_lists(th_ctx, c, "d_model", v, 8, &n), CLF_E_FORMAT, "expected a list of lists");
  TH_FAILS(clf__config_int_list(th_ctx, c, "list", v, 8, NULL), CLF_E_INVALID_ARG, "n is NULL");
  clf__config_free(c);

  /* Negative ids inside bad_words_ids would collide with the separator. */
  put("config.json", "{\"bad_words_ids\": [[1, -1]]}");
  c = load_ok();
  TH_FAILS(clf__config_int_lists(th_ctx, c, "bad_words_ids", v, 8, &n), CLF_E_FORMAT, "non-negative");
  clf__config_free(c);
}
END_TEST

START_TEST(cfg_generation_override) {
  put("config.json", config_json);
  put("generation_config.json", gen_json);
  clf__config *c = load_ok();
  long v[4], i;
  size_t n;
  int b;
  /* generation_config.json's eos_token_id [0, 2] replaces config.json's 0. */
  TH_OK(clf__config_int_list(th_ctx, c, "eos_token_id", v, 4, &n));
  ck_assert(n == 2 && v[0] == 0 && v[1] == 2);
  TH_OK(clf__config_int(th_ctx, c, "num_beams", &i)); /* only in generation_config.json */
  ck_assert_int_eq(i, 4);
  TH_OK(clf__config_bool(th_ctx, c, "tie", &b));
  ck_assert_int_eq(b, 1);
  TH_OK(clf__config_int(th_ctx, c, "d_model", &i)); /* only in config.json */
  ck_assert_int_eq(i, 16);
  ck_assert_int_eq(clf__config_has(c, "forced_eos_token_id"), 0);
  /* An error on an overriding key names generation_config.json. */
  TH_FAILS(clf__config_int(th_ctx, c, "max_length", &i), CLF_E_FORMAT, gen_path);
  TH_FAILS(clf__config_int(th_ctx, c, "max_length", &i), CLF_E_FORMAT, "is a string, expected an integer");
  TH_FAILS(clf__config_str(th_ctx, c, "d_model", NULL), CLF_E_INVALID_ARG, "out is NULL");
  const char *s;
  TH_FAILS(clf__config_str(th_ctx, c, "d_model", &s), CLF_E_FORMAT, cfg_path);
  /* The merged JSON has the override too. */
  ck_assert(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(clf__config_json(c), "eos_token_id")));
  clf__config_free(c);
}
END_TEST

START_TEST(cfg_bad_files) {
  clf__config *c = (clf__config *)1;
  TH_FAILS(clf__config_load(th_ctx, tmpdir, &c), CLF_E_NOT_FOUND, "config.json");
  ck_assert_ptr_null(c);
  TH_FAILS(clf__config_load(th_ctx, tmpdir, &c), CLF_E_NOT_FOUND, cfg_path);
  put("config.json", "{\"d_model\": 16,}");
  TH_FAILS(clf__config_load(th_ctx, tmpdir, &c), CLF_E_FORMAT, "is not valid JSON");
  put("config.json", "[1, 2]");
  TH_FAILS(clf__config_load(th_ctx, tmpdir, &c), CLF_E_FORMAT, "does not hold a JSON object");
  put("config.json", "{} {}");
  TH_FAILS(clf__config_load(th_ctx, tmpdir, &c), CLF_E_FORMAT, "is not valid JSON");
  put("config.json", "");
  TH_FAILS(clf__config_load(th_ctx, tmpdir, &c), CLF_E_FORMAT, cfg_path);
  put("config.json", "{\"d_model\": 16}");
  put("generation_config.json", "{\"eos_token_id\": }");
  TH_FAILS(clf__config_load(th_ctx, tmpdir, &c), CLF_E_FORMAT, gen_path);
  put("generation_config.json", "7");
  TH_FAILS(clf__config_load(th_ctx, tmpdir, &c), CLF_E_FORMAT, "generation_config.json does not hold a JSON object");
  TH_FAILS(clf__config_load(th_ctx, NULL, &c), CLF_E_INVALID_ARG, "model_dir is NULL");
  TH_FAILS(clf__config_load(th_ctx, tmpdir, NULL), CLF_E_INVALID_ARG, "out is NULL");
  /* A large config (more than the first read buffer) loads. */
  size_t big = 100000;
  char *text = malloc(big + 64);
  ck_assert_ptr_nonnull(text);
  size_t k = (size_t)sprintf(text, "{\"pad\": \"");
  memset(text + k, 'x', big);
  sprintf(text + k + big, "\", \"d_model\": 5}");
  put("config.json", text);
  free(text);
  put("generation_config.json", "{}");
  c = load_ok();
  long i;
  TH_OK(clf__config_int(th_ctx, c, "d_model", &i));
  ck_assert_int_eq(i, 5);
  clf__config_free(c);
}
END_TEST

/* A directory or a FIFO where a config file belongs is refused at once
 * (CLF_E_IO naming the file); a FIFO with no writer must not hang. */
START_TEST(cfg_not_regular_files) {
  clf__config *c = (clf__config *)1;
  char path[256];
  snprintf(path, sizeof(path), "%s/config.json", tmpdir);
  ck_assert_int_eq(mkdir(path, 0700), 0);
  TH_FAILS(clf__config_load(th_ctx, tmpdir, &c), CLF_E_IO, "is not a regular file");
  TH_FAILS(clf__config_load(th_ctx, tmpdir, &c), CLF_E_IO, cfg_path);
  ck_assert_ptr_null(c);
  ck_assert_int_eq(rmdir(path), 0);
  ck_assert_int_eq(mkfifo(path, 0600), 0);
  TH_FAILS(clf__config_load(th_ctx, tmpdir, &c), CLF_E_IO, "is not a regular file");
  TH_FAILS(clf__config_load(th_ctx, tmpdir, &c), CLF_E_IO, cfg_path);
  ck_assert_int_eq(unlink(path), 0);
  /* issue 11: /dev/zero as config.json read until memory ran out */
  ck_assert_int_eq(symlink("/dev/zero", path), 0);
  TH_FAILS(clf__config_load(th_ctx, tmpdir, &c), CLF_E_IO, "config.json is not a regular file");
  ck_assert_int_eq(unlink(path), 0);
  /* The optional generation_config.json: present but not a file is an error too. */
  put("config.json", "{\"d_model\": 16}");
  snprintf(path, sizeof(path), "%s/generation_config.json", tmpdir);
  ck_assert_int_eq(mkfifo(path, 0600), 0);
  TH_FAILS(clf__config_load(th_ctx, tmpdir, &c), CLF_E_IO, gen_path);
  ck_assert_ptr_null(c);
}
END_TEST

static void setup(void) {
  th_tmpdir_create(tmpdir, sizeof(tmpdir), "cfg");
  snprintf(cfg_path, sizeof(cfg_path), "%s/config.json", tmpdir);
  snprintf(gen_path, sizeof(gen_path), "%s/generation_config.json", tmpdir);
}

static void teardown(void) { th_tmpdir_remove(tmpdir); }

static Suite *suite(void) {
  Suite *s = suite_create("config");
  TCase *tc = tcase_create("config");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, cfg_getters);
  tcase_add_test(tc, cfg_missing_and_wrong_types);
  tcase_add_test(tc, cfg_lists);
  tcase_add_test(tc, cfg_generation_override);
  tcase_add_test(tc, cfg_bad_files);
  tcase_add_test(tc, cfg_not_regular_files);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
