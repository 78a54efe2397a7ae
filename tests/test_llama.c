/* test_llama.c - the Llama family (llama, mistral, qwen2) against the golden
 * fixtures of tools/fixtures/make_llama_fixtures.py (transformers 4.46.3):
 * RoPE frequencies, forward logits, greedy and beam generation, weight
 * types, the base model, and the errors of loading and running one; and
 * GGUF files (tools/fixtures/make_gguf_model_fixtures.py: every tensor type
 * clformer reads, a tied head, qwen2's biases; make_gguf_gpt2_fixture.py:
 * a gpt2 file) against transformers 4.46.3 loading the same files.
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer.h"
#include "fixture_util.h"
#include "harness.h"
#include "models/llama.h"
#include "models/model.h"
#include "ops/ops.h"

static const char *const all[] = {"llama_gqa4",        "llama_gqa3",         "qwen2",            "mistral",
                                  "llama_rope_linear", "llama_rope_dynamic", "llama_rope_llama3"};

static void fixture_dir(const char *name, char *dir, size_t len) { snprintf(dir, len, "%s/%s", fixtures(), name); }

static double num(const cJSON *o, const char *key, double dflt) {
  const cJSON *v = cJSON_GetObjectItem(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* The fixture's config.json read into a clf__rope, as llama.c's loader does. */
static clf__rope rope_of(const char *dir) {
  char path[1100];
  snprintf(path, sizeof path, "%s/config.json", dir);
  char *text = read_text(path);
  ck_assert_ptr_nonnull(text);
  cJSON *c = cJSON_Parse(text);
  free(text);
  const double D = num(c, "hidden_size", 0), H = num(c, "num_attention_heads", 1);
  clf__rope r = {CLF__ROPE_DEFAULT, (size_t)num(c, "head_dim", D / H), num(c, "rope_theta", 1e4), 1, 0, 0, 0,
                 (size_t)num(c, "max_position_embeddings", 0)};
  const cJSON *rs = cJSON_GetObjectItem(c, "rope_scaling");
  if (cJSON_IsObject(rs)) {
    const char *t = cJSON_GetObjectItem(rs, "rope_type")->valuestring;
    r.type = !strcmp(t, "linear") ? CLF__ROPE_LINEAR : !strcmp(t, "dynamic") ? CLF__ROPE_DYNAMIC : CLF__ROPE_LLAMA3;
    r.factor = num(rs, "factor", 1), r.low = num(rs, "low_freq_factor", 0), r.high = num(rs, "high_freq_factor", 0);
    r.orig_max = (size_t)num(rs, "original_max_position_embeddings", 0);
  }
  cJSON_Delete(c);
  return r;
}

static void check_freqs(const clf__rope *r, size_t seq_len, const cJSON *want, const char *what) {
  float got[512];
  clf__rope_inv_freq(r, seq_len, got);
  ck_assert_int_eq(cJSON_GetArraySize(want), (int)(r->dim / 2));
  for (size_t i = 0; i < r->dim / 2; i++) {
    const float w = (float)cJSON_GetArrayItem(want, (int)i)->valuedouble;
    ck_assert_msg(got[i] == w, "%s: inv_freq[%zu] (seq_len %zu) is %.9g, transformers %.9g", what, i, seq_len,
                  (double)got[i], (double)w);
  }
}

/* inv_freq bit for bit as transformers 4.46 computes it, for every rope type
 * (dynamic: also after growing to 17, 20 and 24 positions). */
START_TEST(test_inv_freq) {
  for (size_t f = 0; f < sizeof all / sizeof *all; f++) {
    char dir[1024];
    fixture_dir(all[f], dir, sizeof dir);
    const clf__rope r = rope_of(dir);
    cJSON *cases = load_cases(dir), *by = cJSON_GetObjectItem(cases, "inv_freq_by_seq_len"), *e;
    check_freqs(&r, 0, cJSON_GetObjectItem(cases, "inv_freq"), all[f]);
    cJSON_ArrayForEach(e, by) check_freqs(&r, (size_t)atol(e->string), e, all[f]);
    cJSON_Delete(cases);
  }
}
END_TEST

/* Forward logits and last_hidden_state within the fixtures' 1e-4 of scale. */
START_TEST(test_forward) {
  char dir[1024];
  fixture_dir(all[_i], dir, sizeof dir);
  check_forward_cases(get_model(dir), dir, 1e-4, all[_i]);
}
END_TEST

/* Greedy (batch 1, left-padded batch 2 with eos) and beam: token for token. */
START_TEST(test_generate) {
  char dir[1024];
  fixture_dir(all[_i], dir, sizeof dir);
  check_generate_cases(get_model(dir), dir, all[_i]);
}
END_TEST

/* gpt2: Conv1D weights transposed in the file, Q8_0; llama3_rope_freqs: Llama 3.1's frequency factors as a
 * tensor (rope_freqs.weight), against the goldens of the checkpoint it was written from (llama_rope_llama3) */
static const char *const gguf[] = {"gguf_models/llama_mixed", "gguf_models/smollm_like", "gguf_models/qwen2_q8",
                                   "gguf_models/gpt2", "gguf_models/llama3_rope_freqs"};

/* A GGUF file (the directory holds model.gguf and no config.json): its
 * config from the metadata, every tensor type decoded, llama's q/k rows put
 * back; logits and last_hidden_state within 1e-4 of scale of transformers
 * on the same file, greedy tokens identical. */
START_TEST(test_gguf_forward) {
  char dir[1024];
  fixture_dir(gguf[_i], dir, sizeof dir);
  check_forward_cases(get_model(dir), dir, 1e-4, gguf[_i]);
  check_generate_cases(get_model(dir), dir, gguf[_i]);
}
END_TEST

/* The file itself as the model path: the same model, type and vocabulary.
 * Its weights as stored (the default: Q4_1 layers, the tied head a Q8_0
 * copy of token_embd's blocks) and as f32 meet the same goldens; stored
 * takes under half the bytes. */
START_TEST(test_gguf_file_path) {
  char dir[1024], file[1100];
  fixture_dir(gguf[1], dir, sizeof dir);
  snprintf(file, sizeof file, "%s/model.gguf", dir);
  clf_model *m = NULL, *f = NULL;
  TH_OK(clf_model_load(th_ctx, file, &m));
  ck_assert_str_eq(clf_model_type(m), "llama");
  ck_assert_int_eq(clf_model_weight_type(m), CLF_STORED);
  check_forward_cases(m, dir, 1e-4, "smollm_like by its file name");
  clf_model_options o;
  clf_model_options_init(&o);
  ck_assert_int_eq(o.weights, CLF_STORED);
  o.weights = CLF_F32;
  TH_OK(clf_model_load_with(th_ctx, file, &o, &f));
  check_forward_cases(f, dir, 1e-4, "smollm_like as f32");
  ck_assert_uint_lt(2 * clf_model_weight_bytes(m), clf_model_weight_bytes(f));
  clf_model_destroy(m);
  clf_model_destroy(f);
  /* a Hugging Face directory's stored type is f32 */
  fixture_dir("qwen2", dir, sizeof dir);
  ck_assert_int_eq(clf_model_weight_type(get_model(dir)), CLF_F32);
}
END_TEST

/* The device bytes a GGUF model takes with its weights as stored: the
 * file's bytes for every 2-D weight a kernel reads in its type (F16 and the
 * block types), f32 for the rest (norms, biases, position tables, F32 and
 * BF16 weights, the token table that rows are gathered from), and with no
 * output.weight the tied head as the token table's own bytes.  *kept: the
 * weights counted at their file size; *qv: the types of blk.0's attn_q and
 * attn_v (or of its attn_qkv twice). */
static size_t gguf_stored_bytes(const char *dir, size_t *kept, char qv[2][16]) {
  char file[1100];
  snprintf(file, sizeof file, "%s/model.gguf", dir);
  clf_gguf *g = NULL;
  ck_assert_int_eq(clf_gguf_open(file, &g), CLF_OK);
  size_t want = 0, table = 0;
  int tied = 1;
  *kept = 0;
  for (size_t i = 0; i < clf_gguf_tensor_count(g); i++) {
    clf_gguf_tensor t;
    ck_assert_int_eq(clf_gguf_tensor_at(g, i, &t), CLF_OK);
    uint64_t numel = 1;
    for (int d = 0; d < t.ndim; d++) numel *= t.shape[d];
    const unsigned k = t.ggml_type; /* F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K */
    const int kernel_type = k == 1 || k == 2 || k == 3 || k == 6 || k == 7 || k == 8 || (k >= 10 && k <= 14);
    const size_t n = strlen(t.name);
    const int is_table = strcmp(t.name, "token_embd.weight") == 0;
    const int weight = t.ndim == 2 && n > 7 && strcmp(t.name + n - 7, ".weight") == 0 && !is_table &&
                       strcmp(t.name, "position_embd.weight") != 0;
    want += weight && kernel_type ? (size_t)t.bytes : (size_t)numel * sizeof(float);
    *kept += weight && kernel_type;
    if (is_table) table = kernel_type ? (size_t)t.bytes : (size_t)numel * sizeof(float);
    tied &= strcmp(t.name, "output.weight") != 0;
    if (!strcmp(t.name, "blk.0.attn_q.weight") || !strcmp(t.name, "blk.0.attn_qkv.weight"))
      snprintf(qv[0], 16, "%s", t.type_name);
    if (!strcmp(t.name, "blk.0.attn_v.weight") || !strcmp(t.name, "blk.0.attn_qkv.weight"))
      snprintf(qv[1], 16, "%s", t.type_name);
  }
  clf_gguf_close(g);
  return want + (tied ? table : 0);
}

/* A fused linear whose parts the file stores in different types (every
 * layer of llama_mixed: q Q5_0, k F16, v BF16 in layer 0; gate Q2_K, up
 * Q3_K) keeps each part as stored, as an unfused one would be: the model
 * takes gguf_stored_bytes and the rotary frequencies (head_dim / 2
 * floats).  Until parts were kept apart such a layer went to f32 whole
 * (3.7 MiB here against 1.3; a Q4_K_M Llama 2 7B's Q6_K attn_v layers
 * some 2.7 GB).  The goldens of the same file (test_gguf_forward) check
 * the parts' products, over one row and over several. */
START_TEST(test_gguf_mixed_parts) {
  char dir[1024], qv[2][16] = {"", ""};
  fixture_dir(gguf[0], dir, sizeof dir);
  size_t kept = 0, want = gguf_stored_bytes(dir, &kept, qv);
  char file[1100];
  snprintf(file, sizeof file, "%s/model.gguf", dir);
  clf_gguf *g = NULL;
  int64_t D = 0, H = 0;
  ck_assert_int_eq(clf_gguf_open(file, &g), CLF_OK);
  ck_assert_int_eq(clf_gguf_get_int(g, (size_t)clf_gguf_find(g, "llama.embedding_length"), 0, &D), CLF_OK);
  ck_assert_int_eq(clf_gguf_get_int(g, (size_t)clf_gguf_find(g, "llama.attention.head_count"), 0, &H), CLF_OK);
  clf_gguf_close(g);
  want += (size_t)(D / H / 2) * sizeof(float);
  ck_assert_str_ne(qv[0], qv[1]); /* the fixture does mix them */
  ck_assert_uint_gt(kept, 10);
  ck_assert_uint_eq(clf_model_weight_bytes(get_model(dir)), want);
}
END_TEST

/* gpt2's Conv1D weights, which a GGUF file holds transposed ([out, in],
 * Q8_0 in the fixture), stay in their blocks as [out, in] (until
 * 2026-11-28 they were read as transformers' [in, out] and kept in f32);
 * the tied head is the F16 token table's bytes.  The goldens
 * (test_gguf_forward) check the products. */
START_TEST(test_gguf_gpt2_stored) {
  char dir[1024], qv[2][16] = {"", ""};
  fixture_dir(gguf[3], dir, sizeof dir);
  size_t kept = 0;
  const size_t want = gguf_stored_bytes(dir, &kept, qv);
  ck_assert_str_eq(qv[0], "Q8_0");
  ck_assert_uint_eq(kept, 8); /* 2 layers' c_attn, c_proj, c_fc, mlp c_proj */
  ck_assert_uint_eq(clf_model_weight_bytes(get_model(dir)), want);
}
END_TEST

/* A decoder's one-row programs over its interleaved weights are made as it
 * loads (model.c's prepare_decode), not in the middle of its first
 * generated tokens (22-34 ms each on PoCL): after the load, asking for
 * each weight type's one-row skinny_r16f program builds and loads
 * nothing.  A fresh context, so that no earlier test made them; on a GPU
 * the weights stay in the file's layout. */
static void decode_programs_fn(void) {
  char dir[1024];
  fixture_dir(gguf[1], dir, sizeof dir); /* smollm_like: Q8_0, Q4_0 / Q4_1 blocks */
  clf_model *m = NULL;
  ck_assert_int_eq(clf_model_load(th_ctx, dir, &m), CLF_OK);
  clf_cache_stats s0, s1;
  clf_context_cache_stats(th_ctx, &s0);
  size_t r16 = 0;
  for (size_t i = 0; i < m->params.n; i++)
    if (m->params.t[i]->r16) r16++, clf__r16_prepare(th_ctx, m->params.t[i]->dtype, 1);
  clf_context_cache_stats(th_ctx, &s1);
  ck_assert_uint_eq(s1.programs_built, s0.programs_built);
  ck_assert_uint_eq(s1.programs_from_disk, s0.programs_from_disk);
  if (th_ctx->caps.is_cpu) ck_assert_uint_gt(r16, 0);
  else ck_assert_uint_eq(r16, 0);
  clf_model_destroy(m);
}

START_TEST(test_decode_programs_at_load) {
  th_with_context(NULL, NULL, decode_programs_fn);
}
END_TEST

START_TEST(test_settings_matter) {
  check_differs("mistral", "long", "sliding_window", "null", NULL, NULL);
  /* plain RoPE, with room for the 24 positions */
  check_differs("llama_rope_dynamic", "long", "rope_scaling", "null", "max_position_embeddings", "32");
  /* Qwen2: a window of 3 applies with use_sliding_window ... */
  check_differs("qwen2", "ids_only", "sliding_window", "3", "use_sliding_window", "true");
  /* ... and not without (transformers 4.46's Qwen2Config drops it) */
  check_same_with("qwen2", "sliding_window", "3");
}
END_TEST

/* model types and names */
START_TEST(test_types) {
  char dir[1024];
  fixture_dir("qwen2", dir, sizeof dir);
  ck_assert_str_eq(clf_model_type(get_model(dir)), "qwen2");
  fixture_dir("mistral", dir, sizeof dir);
  ck_assert_str_eq(clf_model_type(get_model(dir)), "mistral");
  fixture_dir("llama_gqa4", dir, sizeof dir);
  ck_assert_str_eq(clf_model_type(get_model(dir)), "llama");
}
END_TEST

/* A LlamaModel (no lm_head, architectures LlamaModel): last_hidden_state
 * only, the same as the causal LM's; asking for logits names the outputs. */
START_TEST(test_base_model) {
  char src[1024];
  fixture_dir("llama_gqa4", src, sizeof src);
  char *dir = copy_fixture("llama_gqa4", "lm_head.weight", NULL, 0, NULL);
  set_config(dir, "architectures", "[\"LlamaModel\"]");
  clf_model *m = NULL;
  TH_OK(clf_model_load(th_ctx, dir, &m));
  const int64_t ids[6] = {5, 17, 3, 99, 42, 7};
  clf_array in = {"input_ids", CLF_I64, 2, {1, 6}, (void *)ids}, a, b;
  const char *hidden = "last_hidden_state", *logits = "logits";
  TH_OK(clf_model_run(m, &in, 1, &hidden, 1, &a));
  TH_OK(clf_model_run(get_model(src), &in, 1, &hidden, 1, &b));
  ck_assert_int_eq(clf_array_numel(&a), 6 * 64);
  ck_assert_mem_eq(a.data, b.data, clf_array_numel(&a) * sizeof(float));
  clf_array_free(&a);
  clf_array_free(&b);
  TH_FAILS(clf_model_run(m, &in, 1, &logits, 1, &a), CLF_E_INVALID_ARG, "produces no output \"logits\"");
  clf_model_destroy(m);
  remove_dir(dir);
}
END_TEST

/* LlamaModel as save_pretrained writes it (no "model." prefix, no head):
 * last_hidden_state within 1e-4; no logits, no generation. */
START_TEST(test_base_fixture) {
  char dir[1024];
  fixture_dir("llama_base", dir, sizeof dir);
  clf_model *m = get_model(dir);
  check_forward_cases(m, dir, 1e-4, "llama_base");
  const int64_t ids[3] = {5, 17, 3};
  clf_array in = {"input_ids", CLF_I64, 2, {1, 3}, (void *)ids}, out;
  const char *logits = "logits";
  TH_FAILS(clf_model_run(m, &in, 1, &logits, 1, &out), CLF_E_INVALID_ARG, "produces no output \"logits\"");
  clf_generate_options o;
  clf_generate_options_init(&o);
  TH_FAILS(clf_model_generate(m, &in, NULL, &o, &out), CLF_E_UNSUPPORTED, "no language-model head");
}
END_TEST

static const struct {
  clf_dtype dt;
  double tol;
} types[] = {{CLF_F16, 5e-3}, {CLF_Q8_0, 0}, {CLF_Q4_0, 0}};

static clf_model *load_as(const char *dir, clf_dtype dt, int simulate) {
  clf_model_options o;
  clf_model_options_init(&o);
  o.weights = dt, o.simulate = simulate;
  clf_model *m = NULL;
  TH_OK(clf_model_load_with(th_ctx, dir, &o, &m));
  ck_assert_int_eq(clf_model_weight_type(m), dt);
  return m;
}

/* f16 / q8_0 / q4_0 weights on every linear layer: the device types equal
 * their f32 simulation (1e-4), so what is left is the weights' rounding:
 * f16 within 5e-3 of transformers (looser than test_weight_types' 2e-3:
 * these fixtures' large q/k weights make attention scores ~8 wide and so
 * peaked that rounding moves it; measured 2.6e-3 on llama_gqa4), f16
 * greedy generation still token for token.  q8_0 / q4_0 only against their
 * simulation: on these fixtures their rounding moves logits by ~10% (1.79
 * of 16.6 for q8_0), a property of the random weights, not of the device. */
static void run_types(const char *name, size_t n_types) {
  char dir[1024], what[128];
  fixture_dir(name, dir, sizeof dir);
  for (size_t t = 0; t < n_types; t++) {
    clf_model *m = load_as(dir, types[t].dt, 0), *sim = load_as(dir, types[t].dt, 1);
    snprintf(what, sizeof what, "%s with %s weights", name, clf_dtype_name(types[t].dt));
    check_forward_same(m, sim, dir, 1e-4, what);
    if (types[t].tol > 0) check_forward_cases(m, dir, types[t].tol, what);
    if (types[t].dt == CLF_F16) check_generate_cases(m, dir, what);
    clf_model_destroy(m);
    clf_model_destroy(sim);
  }
}

START_TEST(test_weight_types) {
  run_types("llama_gqa4", 3);
  run_types("qwen2", 3); /* tied: the head a copy of embed_tokens in the type */
  run_types("llama_gqa3", 1); /* hidden 48: not a multiple of the blocks' 32 */
}
END_TEST

START_TEST(test_bad_configs) {
  load_fails2("llama_gqa4", "num_attention_heads", "6", "head_dim", "null", CLF_E_FORMAT, "hidden_size 64 is not a multiple of "
             "num_attention_heads 6");
  load_fails2("llama_gqa4", "num_key_value_heads", "3", NULL, NULL, CLF_E_FORMAT, "num_attention_heads 8 is not a multiple of "
             "num_key_value_heads 3");
  load_fails("llama_gqa4", "rope_scaling", "{\"rope_type\": \"yarn\", \"factor\": 4.0}", CLF_E_UNSUPPORTED,
             "rope_scaling type \"yarn\" is not supported");
  load_fails("llama_gqa4", "rope_scaling", "{\"type\": \"linear\"}", CLF_E_FORMAT, "needs \"factor\"");
  load_fails("llama_rope_llama3", "rope_scaling", "{\"rope_type\": \"llama3\", \"factor\": 8.0}", CLF_E_FORMAT,
             "needs \"low_freq_factor\"");
  load_fails("llama_rope_llama3", "rope_scaling",
             "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
             "\"original_max_position_embeddings\": 2.2e57}",
             CLF_E_FORMAT, "original_max_position_embeddings 2.2e+57 is above 2^31"); /* a fuzzer's find (UB casting it) */
  load_fails("llama_gqa4", "rope_scaling", "7", CLF_E_FORMAT, "rope_scaling is not an object");
  load_fails("llama_gqa4", "hidden_act", "\"swishy\"", CLF_E_UNSUPPORTED, "hidden_act \"swishy\"");
  load_fails("llama_gqa3", "head_dim", "15", CLF_E_UNSUPPORTED, "head_dim 15");
  load_fails("mistral", "sliding_window", "-3", CLF_E_FORMAT, "sliding_window is not a positive integer");
  load_fails("qwen2", "architectures", "[\"Qwen2ForSequenceClassification\"]", CLF_E_UNSUPPORTED,
             "architecture \"Qwen2ForSequenceClassification\"");
}
END_TEST

/* Fixture `name` with frequency factors model.rope_freqs.weight (n floats)
 * added, as a GGUF file's rope_freqs.weight reaches the model; free with
 * remove_dir. */
static char *with_rope_freqs(const char *name, const float *f, size_t n) {
  const st_entry e = {"model.rope_freqs.weight", "F32", 1, {n}, f, n * sizeof *f};
  return copy_fixture_adding(name, &e);
}

/* Frequency factors (tests/fixtures/gguf_models/llama3_rope_freqs has the
 * real thing): each divides its frequency, so factors of 1 change nothing;
 * a rope_scaling that computes its own (llama3) or rescales with the length
 * (dynamic) is refused beside them, as are a factor that is not finite and
 * positive and a count that is not head_dim / 2. */
START_TEST(test_rope_freqs) {
  char fixture[1024];
  fixture_dir("llama_gqa4", fixture, sizeof fixture);
  clf_model *m = NULL;
  float ones[512], bad[512];
  for (size_t i = 0; i < 512; i++) ones[i] = 1.0f, bad[i] = 1.0f;
  const size_t half = 4; /* llama_gqa4: head_dim 8 */
  char *dir = with_rope_freqs("llama_gqa4", ones, half);
  TH_OK(clf_model_load(th_ctx, dir, &m));
  check_forward_cases(m, fixture, 1e-4, "llama_gqa4 with factors of 1");
  clf_model_destroy(m), m = NULL;
  set_config(dir, "rope_scaling", "{\"rope_type\": \"dynamic\", \"factor\": 2.0}");
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_FORMAT, "rope_scaling of type \"dynamic\"");
  remove_dir(dir);
  dir = with_rope_freqs("llama_rope_llama3", ones, 8); /* head_dim 16 */
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_FORMAT, "they would scale the frequencies twice");
  remove_dir(dir);
  bad[3] = 0.0f;
  dir = with_rope_freqs("llama_gqa4", bad, half);
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_FORMAT, "model.rope_freqs.weight[3] is 0");
  remove_dir(dir);
  bad[3] = NAN;
  dir = with_rope_freqs("llama_gqa4", bad, half);
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_FORMAT, "finite and positive");
  remove_dir(dir);
  dir = with_rope_freqs("llama_gqa4", ones, half + 1);
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_SHAPE, "model.rope_freqs.weight");
  remove_dir(dir);
  ck_assert_ptr_null(m);
}
END_TEST

START_TEST(test_bad_tensors) {
  clf_model *m = NULL;
  char *dir = copy_fixture("llama_gqa4", "model.layers.1.self_attn.k_proj.weight", NULL, 0, NULL);
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_NOT_FOUND, "model.layers.1.self_attn.k_proj.weight");
  remove_dir(dir);
  /* untied: lm_head.weight is needed (architectures still the causal LM) */
  dir = copy_fixture("llama_gqa4", "lm_head.weight", NULL, 0, NULL);
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_NOT_FOUND, "lm_head.weight");
  remove_dir(dir);
  dir = copy_fixture("qwen2", "model.layers.0.self_attn.v_proj.bias", NULL, 0, NULL);
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_NOT_FOUND, "model.layers.0.self_attn.v_proj.bias");
  remove_dir(dir);
  /* k_proj [16, 64] (2 KV heads of 8) stored as [32, 32] */
  dir = copy_fixture("llama_gqa4", NULL, "model.layers.0.self_attn.k_proj.weight", 2, (size_t[]){32, 32});
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_SHAPE, "model.layers.0.self_attn.k_proj.weight");
  remove_dir(dir);
  dir = copy_fixture("mistral", "model.norm.weight", NULL, 0, NULL);
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_NOT_FOUND, "model.norm.weight");
  remove_dir(dir);
  ck_assert_ptr_null(m);
}
END_TEST

/* ---- a GGUF fixture with one tensor more ------------------------------- */

static uint64_t le(const unsigned char *b, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | b[at + (size_t)i];
  return v;
}

/* The byte past the metadata value of type t at `at` in b. */
static size_t skip_value(const unsigned char *b, size_t at, uint32_t t) {
  static const int size[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  if (t == 8) return at + 8 + (size_t)le(b, at, 8);
  if (t != 9) return at + (size_t)size[t];
  const uint32_t e = (uint32_t)le(b, at, 4);
  const uint64_t n = le(b, at + 4, 8);
  at += 12;
  for (uint64_t i = 0; i < n; i++) at = skip_value(b, at, e);
  return at;
}

static void put_le(unsigned char *b, size_t *n, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) b[(*n)++] = (unsigned char)(v >> 8 * i);
}

/* A temp directory holding gguf_models/`name`'s model.gguf with f32
 * tensor `tensor` [len] (zeros) added after the others (alignment 32, as
 * the fixtures have); free with remove_dir. */
static char *gguf_adding(const char *name, const char *tensor, size_t len) {
  char src[1024], dst[1100];
  snprintf(src, sizeof src, "%s/gguf_models/%s/model.gguf", fixtures(), name);
  FILE *f = fopen(src, "rb");
  ck_assert_ptr_nonnull(f);
  fseek(f, 0, SEEK_END);
  const size_t size = (size_t)ftell(f);
  rewind(f);
  unsigned char *b = malloc(size);
  ck_assert_uint_eq(fread(b, 1, size, f), size);
  fclose(f);
  const uint64_t nt = le(b, 8, 8), nkv = le(b, 16, 8);
  size_t at = 24;
  for (uint64_t i = 0; i < nkv; i++) {
    at += 8 + (size_t)le(b, at, 8);
    at = skip_value(b, at + 4, (uint32_t)le(b, at, 4));
  }
  for (uint64_t i = 0; i < nt; i++) {
    at += 8 + (size_t)le(b, at, 8);
    at += 4 + 8 * (size_t)le(b, at, 4) + 4 + 8;
  }
  const size_t data = (at + 31) / 32 * 32, old = size - data, off = (old + 31) / 32 * 32;
  unsigned char *o = calloc(size + 4 * len + 256 + strlen(tensor), 1);
  size_t n = 0;
  memcpy(o, b, at);
  n = 8;
  put_le(o, &n, nt + 1, 8);
  n = at;
  put_le(o, &n, strlen(tensor), 8);
  memcpy(o + n, tensor, strlen(tensor));
  n += strlen(tensor);
  put_le(o, &n, 1, 4);
  put_le(o, &n, len, 8);
  put_le(o, &n, 0, 4); /* F32 */
  put_le(o, &n, off, 8);
  n = (n + 31) / 32 * 32;
  memcpy(o + n, b + data, old);
  n += off + 4 * len; /* the new tensor's zeros */
  char *dir = malloc(64);
  th_tmpdir_create(dir, 64, "gguf-add");
  snprintf(dst, sizeof dst, "%s/model.gguf", dir);
  write_bytes(dst, o, n);
  free(o);
  free(b);
  return dir;
}

/* A GGUF tensor the model, as its metadata configures it, never reads is
 * refused by name (a llama file's attention bias: clformer's llama has
 * none without attention_bias, which GGUF metadata cannot say); one it
 * reads is not (qwen2's). */
START_TEST(test_gguf_unused_tensor) {
  clf_model *m = NULL;
  char *dir = gguf_adding("llama_mixed", "blk.0.attn_q.bias", 256);
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_FORMAT,
           "tensor \"blk.0.attn_q.bias\" is not used by llama as its metadata configures it");
  remove_dir(dir);
  dir = gguf_adding("gpt2", "blk.1.attn_q.weight", 32);
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_FORMAT, "tensor \"blk.1.attn_q.weight\" is not used by gpt2");
  remove_dir(dir);
  dir = gguf_adding("smollm_like", "blk.2.attn_norm.weight", 256);
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_FORMAT,
           "tensor \"blk.2.attn_norm.weight\" is not used by llama with 2 blocks");
  remove_dir(dir);
  ck_assert_ptr_null(m);
  dir = gguf_adding("gpt2", "output.weight", 8); /* the converter's copy of the token table: skipped */
  TH_OK(clf_model_load(th_ctx, dir, &m));
  clf_model_destroy(m);
  remove_dir(dir);
}
END_TEST

/* Sequences and positions past max_position_embeddings (64 for llama_gqa4;
 * dynamic RoPE: 2 x 16). */
START_TEST(test_too_long) {
  char dir[1024];
  fixture_dir("llama_gqa4", dir, sizeof dir);
  clf_model *m = get_model(dir);
  int64_t ids[65] = {0}, pos[6] = {0, 1, 2, 3, 4, 64};
  clf_array in[2] = {{"input_ids", CLF_I64, 2, {1, 65}, ids}, {"position_ids", CLF_I64, 2, {1, 6}, pos}}, out;
  const char *logits = "logits";
  TH_FAILS(clf_model_run(m, in, 1, &logits, 1, &out), CLF_E_SHAPE, "65 positions, more than the 64");
  in[0].shape[1] = 6;
  TH_FAILS(clf_model_run(m, in, 2, &logits, 1, &out), CLF_E_INVALID_ARG, "position_ids[0][5] is 64, outside 0 to 63");
  pos[5] = 5;
  TH_OK(clf_model_run(m, in, 2, &logits, 1, &out));
  clf_array_free(&out);
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 60;
  TH_FAILS(clf_model_generate(m, &in[0], NULL, &o, &out), CLF_E_INVALID_ARG, "66");
  fixture_dir("llama_rope_dynamic", dir, sizeof dir);
  in[0].shape[1] = 33;
  TH_FAILS(clf_model_run(get_model(dir), in, 1, &logits, 1, &out), CLF_E_SHAPE, "33 positions, more than the 32");
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("llama");
  TCase *tc = tcase_create("llama");
  tcase_set_timeout(tc, 900);
  tcase_add_unchecked_fixture(tc, NULL, free_models);
  tcase_add_test(tc, test_inv_freq);
  tcase_add_loop_test(tc, test_forward, 0, (int)(sizeof all / sizeof *all));
  tcase_add_loop_test(tc, test_generate, 0, (int)(sizeof all / sizeof *all));
  tcase_add_loop_test(tc, test_gguf_forward, 0, (int)(sizeof gguf / sizeof *gguf));
  tcase_add_test(tc, test_rope_freqs);
  tcase_add_test(tc, test_gguf_file_path);
  tcase_add_test(tc, test_gguf_mixed_parts);
  tcase_add_test(tc, test_gguf_gpt2_stored);
  tcase_add_test(tc, test_decode_programs_at_load);
  tcase_add_test(tc, test_gguf_unused_tensor);
  tcase_add_test(tc, test_types);
  tcase_add_test(tc, test_settings_matter);
  tcase_add_test(tc, test_base_model);
  tcase_add_test(tc, test_base_fixture);
  tcase_add_test(tc, test_bad_configs);
  tcase_add_test(tc, test_bad_tensors);
  tcase_add_test(tc, test_too_long);
  if (!getenv("CLF_TEST_UNDER_OCLGRIND")) tcase_add_test(tc, test_weight_types);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
