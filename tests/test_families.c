/* test_families.c - the decoder families newer than transformers 4.46
 * (Qwen3, Gemma 2, Gemma 3, Phi-3) against the golden fixtures of
 * tools/fixtures/make_newer_fixtures.py (transformers 4.53.3 on PyTorch
 * 2.5.1): forward logits within 1e-4 of scale, greedy tokens identical,
 * from the Hugging Face directory and from the GGUF file the gguf package
 * wrote of the same checkpoint; and the errors of loading one.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer.h"
#include "fixture_util.h"
#include "harness.h"

/* Hugging Face directories and GGUF files (a directory with model.gguf). */
static const char *const all[] = {"qwen3",  "gguf_models/qwen3", "qwen3_window", "gemma3", "gguf_models/gemma3",
                                  "phi3",   "phi3_longrope",      "gguf_models/phi3",   "gguf_models/phi3_longrope",
                                  "phi3_partial", "gguf_models/phi3_partial", "gemma2", "gguf_models/gemma2"};
static const char *const types[] = {"qwen3", "qwen3", "qwen3", "gemma3_text", "gemma3", "phi3", "phi3",
                                    "phi3",  "phi3",  "phi3",  "phi3",        "gemma2", "gemma2"};

static void fixture_dir(const char *name, char *dir, size_t len) { snprintf(dir, len, "%s/%s", fixtures(), name); }

/* Forward logits and last_hidden_state within 1e-4 of scale of transformers. */
START_TEST(test_forward) {
  char dir[1024];
  fixture_dir(all[_i], dir, sizeof dir);
  clf_model *m = get_model(dir);
  ck_assert_str_eq(clf_model_type(m), types[_i]);
  check_forward_cases(m, dir, 1e-4, all[_i]);
}
END_TEST

/* Greedy (batch 1, left-padded batch 2 reaching eos): token for token. */
START_TEST(test_generate) {
  char dir[1024];
  fixture_dir(all[_i], dir, sizeof dir);
  check_generate_cases(get_model(dir), dir, all[_i]);
}
END_TEST

/* The per-head norms are read, by name and shape: without q_norm the load
 * names the tensor, and so it does with k_norm of the wrong size.  (Their
 * gammas, 1 + 0.2 N in the fixture, are pinned down by the goldens.) */
START_TEST(test_head_norms) {
  clf_model *m = NULL;
  char *dir = copy_fixture("qwen3", "model.layers.1.self_attn.q_norm.weight", NULL, 0, NULL);
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_NOT_FOUND, "model.layers.1.self_attn.q_norm.weight");
  remove_dir(dir);
  /* k_norm [16] stored as [2, 8] */
  dir = copy_fixture("qwen3", NULL, "model.layers.0.self_attn.k_norm.weight", 2, (size_t[]){2, 8});
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_SHAPE, "model.layers.0.self_attn.k_norm.weight");
  remove_dir(dir);
  ck_assert_ptr_null(m);
}
END_TEST

/* Gemma 3's settings each matter to the goldens (a forward pass past the
 * window of 4): the window, which layers have it, their own RoPE base, the
 * attention scale, the norms' 1 + weight (a GGUF file's norms read as
 * stored, so 1 + 1 + w), and final soft-capping once set. */
START_TEST(test_gemma3_settings_matter) {
  check_differs("gemma3", "long", "sliding_window", "64", NULL, NULL);
  check_differs("gemma3", "long", "layer_types", "[\"full_attention\", \"full_attention\", \"full_attention\", "
                "\"full_attention\", \"full_attention\", \"sliding_attention\"]", NULL, NULL);
  check_differs("gemma3", "long", "rope_local_base_freq", "1000000.0", NULL, NULL);
  check_differs("gemma3", "long", "query_pre_attn_scalar", "24", NULL, NULL);
  check_differs("gemma3", "long", "final_logit_softcapping", "3.0", NULL, NULL);
  check_differs("gemma3", "long", "attn_logit_softcapping", "1.0", NULL, NULL); /* Gemma 3 reads it too */
  /* without layer_types, sliding_window_pattern (6 by default) decides: the same model */
  check_same_with("gemma3", "layer_types", "null");
}
END_TEST

/* Qwen3's use_sliding_window (a forward pass of 15 past the window of 4):
 * the window, its size and the layers it covers each matter; without
 * layer_types, max_window_layers picks the same layers; the qwen3 fixture
 * with use_sliding_window is the same model (its layer_types are both
 * full, as transformers wrote them). */
START_TEST(test_qwen3_window_matters) {
  check_differs("qwen3_window", "long", "use_sliding_window", "false", NULL, NULL);
  check_differs("qwen3_window", "long", "sliding_window", "64", NULL, NULL);
  check_differs("qwen3_window", "long", "sliding_window", "null", NULL, NULL);
  check_differs("qwen3_window", "long", "layer_types", "null", "max_window_layers", "0");
  check_same_with("qwen3_window", "layer_types", "null");
  check_same_with("qwen3", "use_sliding_window", "true");
}
END_TEST

/* Soft-capping bounds every logit by the cap (tanh), where set. */
START_TEST(test_gemma3_softcap) {
  char *dir = copy_fixture("gemma3", NULL, NULL, 0, NULL), src[1024], path[1200];
  fixture_dir("gemma3", src, sizeof src);
  set_config(dir, "final_logit_softcapping", "2.5");
  clf_model *m = NULL;
  clf_array ids, got, want;
  TH_OK(clf_model_load(th_ctx, dir, &m));
  snprintf(path, sizeof path, "%s/long.input_ids.npy", src);
  TH_OK(clf_npy_read(path, &ids));
  snprintf(path, sizeof path, "%s/long.logits.npy", src);
  TH_OK(clf_npy_read(path, &want));
  snprintf(ids.name, sizeof ids.name, "input_ids");
  const char *logits = "logits";
  TH_OK(clf_model_run(m, &ids, 1, &logits, 1, &got));
  ck_assert_uint_eq(clf_array_numel(&got), clf_array_numel(&want));
  for (size_t i = 0; i < clf_array_numel(&got); i++) {
    const double g = ((float *)got.data)[i], w = 2.5 * tanh(((float *)want.data)[i] / 2.5);
    ck_assert_msg(fabs(g - w) <= 1e-4 * 2.5, "logit %zu: %g, 2.5 tanh(%g / 2.5) = %g", i, g,
                  (double)((float *)want.data)[i], w);
  }
  clf_array_free(&ids), clf_array_free(&got), clf_array_free(&want);
  clf_model_destroy(m);
  remove_dir(dir);
}
END_TEST

/* Phi-3's longrope switches to its long factors once the positions pass
 * original_max_position_embeddings (8 here): generating from 5 tokens
 * across it, every new token is the argmax of a forward pass over all the
 * tokens before it (the caches fed again at the switch; transformers'
 * generate does not give this, see make_newer_fixtures.py). */
START_TEST(test_longrope_switch) {
  char dir[1024];
  fixture_dir("phi3_longrope", dir, sizeof dir);
  clf_model *m = get_model(dir);
  int64_t ids[5] = {5, 17, 33, 3, 60};
  clf_array in = {.name = "input_ids", .dtype = CLF_I64, .ndim = 2, .shape = {1, 5}, .data = ids}, seq, lg;
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 7, o.do_sample = CLF_GENERATE_OFF;
  o.eos_token_ids = (const int64_t[]){127}, o.n_eos_token_ids = 1; /* no early end */
  TH_OK(clf_model_generate(m, &in, NULL, &o, &seq));
  ck_assert_uint_eq(seq.shape[1], 12);
  const int64_t *t = seq.data;
  const char *outs[] = {"logits"};
  for (size_t n = 5; n < 12; n++) {
    clf_array prefix = {.name = "input_ids", .dtype = CLF_I64, .ndim = 2, .shape = {1, n}, .data = (void *)t};
    TH_OK(clf_model_run(m, &prefix, 1, outs, 1, &lg));
    const float *l = (const float *)lg.data + (n - 1) * 96;
    size_t best = 0;
    for (size_t v = 1; v < 96; v++)
      if (l[v] > l[best]) best = v;
    ck_assert_msg((int64_t)best == t[n], "token %zu: generated %lld, a forward pass of %zu tokens says %zu", n,
                  (long long)t[n], n, best);
    clf_array_free(&lg);
  }
  clf_array_free(&seq);
}
END_TEST

/* A copy of fixture `name`'s model.gguf in a temp dir (free with
 * remove_dir) with the n bytes `from` replaced by `to` wherever they are. */
static char *patched_gguf(const char *name, const void *from, const void *to, size_t n) {
  char src[1200], *dir = malloc(1024), path[1200];
  size_t len = 0, hits = 0;
  snprintf(src, sizeof src, "%s/%s/model.gguf", fixtures(), name);
  unsigned char *buf = (unsigned char *)read_file_len(src, &len);
  ck_assert_msg(buf && len > 0, "cannot read %s", src);
  for (size_t i = 0; i + n <= len; i++)
    if (!memcmp(buf + i, from, n)) memcpy(buf + i, to, n), hits++;
  ck_assert_uint_ge(hits, 1);
  th_tmpdir_create(dir, 1024, "families");
  snprintf(path, sizeof path, "%s/model.gguf", dir);
  write_bytes(path, buf, len);
  free(buf);
  return dir;
}

/* A longrope GGUF's parts each matter: without its attention factor key the
 * factor is transformers' sqrt(1 + ln 4 / ln 8), the one the converter
 * wrote (the same goldens); a factor not finite and positive is refused by
 * name; and the long factors are the ones read past 8 positions (the
 * short ones in their place change the logits of 10). */
START_TEST(test_longrope_gguf) {
  char src[1024];
  fixture_dir("gguf_models/phi3_longrope", src, sizeof src);
  clf_model *m = NULL;
  char *dir = patched_gguf("gguf_models/phi3_longrope", "rope.scaling.attn_factor", "rope.scaling.attn_factox", 24);
  TH_OK(clf_model_load(th_ctx, dir, &m));
  check_forward_cases(m, src, 1e-4, "phi3_longrope gguf without attn_factor");
  clf_model_destroy(m), m = NULL;
  remove_dir(dir);
  /* the long factors 1.5, 3, 6, 12 with the last made -12 */
  const float lf[4] = {1.5f, 3.0f, 6.0f, 12.0f}, bad[4] = {1.5f, 3.0f, 6.0f, -12.0f};
  dir = patched_gguf("gguf_models/phi3_longrope", lf, bad, sizeof lf);
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_FORMAT, "rope_factors_long.weight[3] is -12");
  ck_assert_ptr_null(m);
  remove_dir(dir);
  /* the short ones [1, 1.25, 1.5, 2] read as the long ones: 10 positions (past 8) move */
  const float sf[4] = {1.0f, 1.25f, 1.5f, 2.0f};
  dir = patched_gguf("gguf_models/phi3_longrope", lf, sf, sizeof lf);
  TH_OK(clf_model_load(th_ctx, dir, &m));
  clf_array ids, got, want;
  char path[1200];
  snprintf(path, sizeof path, "%s/right_padded.input_ids.npy", src);
  TH_OK(clf_npy_read(path, &ids));
  snprintf(ids.name, sizeof ids.name, "input_ids");
  ck_assert_uint_gt(ids.shape[1], 8);
  const char *logits = "logits";
  TH_OK(clf_model_run(m, &ids, 1, &logits, 1, &got));
  TH_OK(clf_model_run(get_model(src), &ids, 1, &logits, 1, &want));
  double worst = 0;
  for (size_t i = 0; i < clf_array_numel(&got); i++)
    worst = fmax(worst, fabs(((float *)got.data)[i] - ((float *)want.data)[i]));
  ck_assert_msg(worst > 1e-2, "the long factors changed nothing (max difference %g)", worst);
  clf_array_free(&ids), clf_array_free(&got), clf_array_free(&want);
  clf_model_destroy(m);
  remove_dir(dir);
}
END_TEST

/* Phi-4-mini's partial rotary: rotating all 8 dimensions of a head, or 4
 * of them, the goldens (6 of 8) move. */
START_TEST(test_partial_rotary_matters) {
  check_differs("phi3_partial", "long", "partial_rotary_factor", "1.0", NULL, NULL);
  check_differs("phi3_partial", "long", "partial_rotary_factor", "0.5", NULL, NULL);
}
END_TEST

/* Gemma 2's settings each matter to the goldens (15 positions, window 4):
 * the attention cap (2; absent it is Gemma2Config's 50, null none), the
 * logits' cap (15), the window, which layers have it, the attention scale;
 * without layer_types every other layer is windowed: the same model. */
START_TEST(test_gemma2_settings_matter) {
  check_differs("gemma2", "long", "attn_logit_softcapping", "null", NULL, NULL);
  check_differs("gemma2", "long", "attn_logit_softcapping", "50.0", NULL, NULL);
  check_differs("gemma2", "long", "final_logit_softcapping", "null", NULL, NULL);
  check_differs("gemma2", "long", "sliding_window", "64", NULL, NULL);
  check_differs("gemma2", "long", "layer_types", "[\"full_attention\", \"sliding_attention\", \"full_attention\", "
                "\"sliding_attention\"]", NULL, NULL);
  check_differs("gemma2", "long", "query_pre_attn_scalar", "24", NULL, NULL);
  check_same_with("gemma2", "layer_types", "null");
}
END_TEST

/* A GGUF file's rope.dimension_count below the head size is
 * partial_rotary_factor for phi3 only: a llama file saying 8 of 16 is
 * refused by name (its model would rotate all 16). */
START_TEST(test_partial_rotary_gguf_refused) {
  static const char key[] = "llama.rope.dimension_count";
  unsigned char from[sizeof key - 1 + 8], to[sizeof from];
  const uint32_t u32 = 4, full = 16, half = 8; /* GGUF_TYPE_UINT32, then the value */
  memcpy(from, key, sizeof key - 1), memcpy(from + sizeof key - 1, &u32, 4), memcpy(to, from, sizeof from);
  memcpy(from + sizeof key + 3, &full, 4), memcpy(to + sizeof key + 3, &half, 4);
  char *dir = patched_gguf("gguf_models/llama3_rope_freqs", from, to, sizeof from);
  clf_model *m = NULL;
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_UNSUPPORTED, "llama.rope.dimension_count 8 is not the head size 16 "
           "(partial rotary embeddings are not supported for this architecture)");
  ck_assert_ptr_null(m);
  remove_dir(dir);
}
END_TEST

START_TEST(test_bad_configs) {
  load_fails("qwen3_window", "max_window_layers", "-1", CLF_E_FORMAT, "max_window_layers -1 is negative");
  load_fails("qwen3_window", "layer_types", "[\"full_attention\"]", CLF_E_FORMAT,
             "layer_types is not a list of num_hidden_layers (3)");
  load_fails("qwen3", "head_dim", "15", CLF_E_UNSUPPORTED, "head_dim 15");
  load_fails("qwen3", "num_key_value_heads", "3", CLF_E_FORMAT, "num_attention_heads 4 is not a multiple of "
             "num_key_value_heads 3");
  load_fails("qwen3", "architectures", "[\"Qwen3ForSequenceClassification\"]", CLF_E_UNSUPPORTED,
             "architecture \"Qwen3ForSequenceClassification\"");
  load_fails("gemma3", "layer_types", "[\"full_attention\"]", CLF_E_FORMAT,
             "layer_types is not a list of num_hidden_layers (6)");
  load_fails("gemma3", "layer_types", "[\"full_attention\", \"full_attention\", \"full_attention\", "
             "\"full_attention\", \"full_attention\", \"chunked_attention\"]", CLF_E_UNSUPPORTED,
             "layer_types[5] is \"chunked_attention\"");
  load_fails("gemma3", "sliding_window", "0", CLF_E_FORMAT, "sliding_window 0 is not a positive size");
  load_fails("gemma2", "attn_logit_softcapping", "-1.0", CLF_E_FORMAT, "attn_logit_softcapping -1 or "
             "final_logit_softcapping 15 is not a finite number of at least 0");
  load_fails("phi3", "partial_rotary_factor", "0.125", CLF_E_UNSUPPORTED, "partial_rotary_factor 0.125 of head_dim "
             "8 rotates 1 dimensions: it must rotate an even number, at least 2");
  load_fails("phi3", "partial_rotary_factor", "1.5", CLF_E_UNSUPPORTED, "partial_rotary_factor 1.5");
  load_fails("phi3_longrope", "rope_scaling", "{\"type\": \"longrope\", \"short_factor\": [1, 1], \"long_factor\": "
             "[1, 1, 1, 1]}", CLF_E_FORMAT, "needs \"short_factor\", a list of the rotary head_dim / 2 (4) numbers");
  load_fails("phi3_longrope", "rope_scaling", "{\"type\": \"su\", \"short_factor\": [1, 1, 1, 1], \"long_factor\": "
             "[1, 1, -1, 1]}", CLF_E_FORMAT, "long_factor[2] is not a finite positive number");
  load_fails("gemma3", "hidden_activation", "\"swishy\"", CLF_E_UNSUPPORTED, "hidden_activation \"swishy\"");
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("families");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 600);
  tcase_add_unchecked_fixture(tc, NULL, free_models);
  tcase_add_loop_test(tc, test_forward, 0, (int)(sizeof all / sizeof *all));
  tcase_add_loop_test(tc, test_generate, 0, (int)(sizeof all / sizeof *all));
  tcase_add_test(tc, test_head_norms);
  tcase_add_test(tc, test_bad_configs);
  tcase_add_test(tc, test_gemma3_settings_matter);
  tcase_add_test(tc, test_qwen3_window_matters);
  tcase_add_test(tc, test_gemma3_softcap);
  tcase_add_test(tc, test_gemma2_settings_matter);
  tcase_add_test(tc, test_longrope_switch);
  tcase_add_test(tc, test_longrope_gguf);
  tcase_add_test(tc, test_partial_rotary_matters);
  tcase_add_test(tc, test_partial_rotary_gguf_refused);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
