/* test_gguf_example.c - docs/architecture.md's worked example of adding a
 * GGUF architecture, run: docs/examples/opt.c's rows (compiled in here, and
 * registered nowhere) handed to io/gguf_model.c's adapter make OPT's
 * config.json from a GGUF file's metadata, which the family's own key table
 * then reads, and name its tensors both ways.  No device. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "../docs/examples/opt.c"

/* A GGUF v3 file of metadata only: general.architecture "opt" and u32 keys. */
static void put_str(FILE *f, const char *s) {
  const uint64_t n = strlen(s);
  fwrite(&n, 8, 1, f), fwrite(s, 1, n, f);
}

static void write_gguf(const char *path, const char *const keys[], const uint32_t values[], size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  const uint32_t version = 3, t_str = 8, t_u32 = 4;
  const uint64_t tensors = 0, kvs = n + 1;
  fwrite("GGUF", 1, 4, f), fwrite(&version, 4, 1, f), fwrite(&tensors, 8, 1, f), fwrite(&kvs, 8, 1, f);
  put_str(f, "general.architecture"), fwrite(&t_str, 4, 1, f), put_str(f, "opt");
  for (size_t i = 0; i < n; i++) put_str(f, keys[i]), fwrite(&t_u32, 4, 1, f), fwrite(&values[i], 4, 1, f);
  fclose(f);
}

/* The sizes of facebook/opt-125m, as the rows put them in config.json. */
START_TEST(opt_rows_make_its_config) {
  static const char *const keys[] = {"opt.block_count", "opt.embedding_length", "opt.feed_forward_length",
                                     "opt.attention.head_count", "opt.context_length", "opt.vocab_size"};
  static const uint32_t values[] = {12, 768, 3072, 12, 2048, 50272};
  char path[] = "/tmp/clf_gguf_example_XXXXXX";
  const int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  close(fd);
  write_gguf(path, keys, values, 6);
  clf_gguf *g = NULL;
  ck_assert_int_eq(clf_gguf_open(path, &g), CLF_OK);
  const clf__gguf_arch *archs[] = {clf__opt_family.gguf};
  clf__config *c = NULL;
  ck_assert_int_eq(clf__gguf_config(NULL, g, path, archs, 1, &c), CLF_OK);
  const cJSON *j = clf__config_json(c);
  ck_assert_str_eq(cJSON_GetObjectItem(j, "model_type")->valuestring, "opt");
  ck_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "architectures"), 0)->valuestring, "OPTForCausalLM");
  opt_dims d = {0};
  ck_assert_int_eq(clf__config_read(NULL, c, opt_keys, CLF__ARRAY_LEN(opt_keys), &d), CLF_OK);
  ck_assert_int_eq(d.N, 12);
  ck_assert_int_eq(d.D, 768);
  ck_assert_int_eq(d.F, 3072);
  ck_assert_int_eq(d.H, 12);
  ck_assert_int_eq(d.P, 2048);
  ck_assert_int_eq(d.V, 50272);
  ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(j, "tie_word_embeddings"))); /* no output.weight */
  clf__config_free(c);
  /* Without OPT's rows the same file is another architecture. */
  const clf__gguf_arch *none[] = {NULL};
  ck_assert_int_eq(clf__gguf_config(NULL, g, path, none, 0, &c), CLF_E_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "architecture \"opt\" is not supported"));
  clf_gguf_close(g);
  unlink(path);
}
END_TEST

/* llama.cpp's names to transformers' and back, by the rows alone. */
START_TEST(opt_rows_name_its_tensors) {
  static const char *const pairs[][2] = {
      {"token_embd.weight", "model.decoder.embed_tokens.weight"},
      {"position_embd.weight", "model.decoder.embed_positions.weight"},
      {"blk.3.attn_q.bias", "model.decoder.layers.3.self_attn.q_proj.bias"},
      {"blk.11.ffn_down.weight", "model.decoder.layers.11.fc2.weight"},
      {"output_norm.bias", "model.decoder.final_layer_norm.bias"},
      {"output.weight", "lm_head.weight"},
  };
  const clf__gguf_arch *a = clf__opt_family.gguf;
  char hf[256], back[256];
  unsigned flags = 99;
  for (size_t i = 0; i < CLF__ARRAY_LEN(pairs); i++) {
    ck_assert_int_eq(clf__gguf_hf_name(a, pairs[i][0], hf, sizeof hf, &flags), 1);
    ck_assert_str_eq(hf, pairs[i][1]);
    ck_assert_uint_eq(flags, 0); /* nothing transposed, permuted or copied */
    ck_assert_int_eq(clf__gguf_file_name(a, hf, back, sizeof back), 1);
    ck_assert_str_eq(back, pairs[i][0]);
  }
  ck_assert_int_eq(clf__gguf_hf_name(a, "blk.0.attn_qkv.weight", hf, sizeof hf, &flags), 0); /* gpt2's, not OPT's */
  ck_assert_int_eq(clf__gguf_file_name(a, "layers.2.fc1.weight", back, sizeof back), 1); /* without the prefix */
  ck_assert_str_eq(back, "blk.2.ffn_up.weight");
}
END_TEST

int main(void) {
  Suite *s = suite_create("gguf_example");
  TCase *tc = tcase_create("opt");
  tcase_add_test(tc, opt_rows_make_its_config);
  tcase_add_test(tc, opt_rows_name_its_tensors);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  const int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
