/* test_engine.c - the engine (clf_engine, host/models/engine.c): many
 * sequences decoded together over a paged KV cache.
 *
 * Every sequence must give the tokens it gives alone: against
 * transformers' greedy goldens (the fixtures' generate cases, their
 * left-padded rows unpadded) with other sequences joining and leaving, and
 * against clf_model_generate (itself checked against transformers in
 * test_generate and test_llama) for greedy and seeded sampling over
 * staggered submissions, prompts fed in chunks, blocks of 4 positions,
 * preemption in a small pool, prefix reuse and cancellation.  Prefix
 * reuse happens within an isolation key and never across; a soak of 1,000
 * sequences leaves the pool empty; submission from another thread. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "fixture_util.h"
#include "harness.h"

enum { MAXTOK = 64 };

typedef struct out {
  int64_t tok[MAXTOK];
  size_t n;
  int why, done;
  size_t prompt, generated, cached; /* from its clf_sequence_end */
  clf_engine *cancel_in; /* cancel the sequence from its own callback after cancel_at tokens */
  size_t cancel_at;
} out;

static int on_tok(void *u, uint64_t id, int64_t t) {
  out *o = u;
  ck_assert_uint_lt(o->n, MAXTOK);
  o->tok[o->n++] = t;
  if (o->cancel_in && o->n == o->cancel_at) TH_OK(clf_engine_cancel(o->cancel_in, id));
  return 0;
}

static void on_done(void *u, uint64_t id, const clf_sequence_end *end) {
  out *o = u;
  (void)id;
  o->why = (int)end->why;
  o->prompt = end->prompt_tokens, o->generated = end->new_tokens, o->cached = end->cached_tokens;
  ck_assert_uint_eq(o->generated, o->n);
  ck_assert_msg((end->why == CLF_FINISH_ERROR) == (end->error != NULL), "error message with %s",
                clf_finish_name(end->why));
  o->done++;
}

/* Submission, cancellation and stats may run beside a stepping thread:
 * their failures are the calling thread's (clf_last_error(NULL)). */
#define FAILS_HERE(expr, status, needle)                                                                          \
  do {                                                                                                           \
    const clf_status st_ = (expr);                                                                               \
    ck_assert_msg(st_ == (status), "%s returned %s (%s)", #expr, clf_status_name(st_), clf_last_error(NULL));   \
    ck_assert_msg(strstr(clf_last_error(NULL), (needle)) != NULL, "error of %s is \"%s\", expected \"%s\"", #expr, \
                  clf_last_error(NULL), (needle));                                                               \
  } while (0)

static int64_t id_at(const clf_array *a, size_t i) {
  return a->dtype == CLF_I32 ? ((const int32_t *)a->data)[i] : ((const int64_t *)a->data)[i];
}

/* For engine_n_copies: copy (id - first id) of a request whose user
 * points at its first id: n_slots[that], or, for requests 0..2 whose user
 * is &ids[k] of their test, n_slots_of[k][that]. */
static out *n_slots;
static out *n_slots_of[3];
static uint64_t *n_first_ids;
static out *slot_of(void *u, uint64_t id) {
  const uint64_t first = *(uint64_t *)u;
  if (n_first_ids && (uint64_t *)u >= n_first_ids && (uint64_t *)u < n_first_ids + 3)
    return &n_slots_of[(uint64_t *)u - n_first_ids][id - first];
  return &n_slots[id - first];
}
static int on_tok_n(void *u, uint64_t id, int64_t t) { return on_tok(slot_of(u, id), id, t); }
static void on_done_n(void *u, uint64_t id, const clf_sequence_end *end) { on_done(slot_of(u, id), id, end); }

static void fixture_dir(const char *name, char *buf, size_t n) { snprintf(buf, n, "%s/%s", fixtures(), name); }

static uint64_t submit(clf_engine *e, const int64_t *ids, size_t n, const clf_generate_options *o, uint64_t iso,
                       out *res) {
  memset(res, 0, sizeof *res);
  const clf_engine_request r = {ids, n, o, iso, on_tok, on_done, res};
  uint64_t id = 0;
  TH_OK(clf_engine_submit(e, &r, &id));
  ck_assert_uint_ne(id, 0);
  return id;
}

/* The new tokens clf_model_generate gives for the prompt alone.  The mask
 * of ones keeps generate from taking a pad token in the prompt for padding
 * (as transformers does without a mask): the engine takes ids as given. */
static size_t alone(clf_model *m, const int64_t *ids, size_t n, const clf_generate_options *o, int64_t *tok) {
  int64_t ones[64];
  for (size_t i = 0; i < n; i++) ones[i] = 1;
  clf_array in = {"input_ids", CLF_I64, 2, {1, n}, (void *)ids}, mask = {"attention_mask", CLF_I64, 2, {1, n}, ones};
  clf_array seqs;
  TH_OK(clf_model_generate(m, &in, &mask, o, &seqs));
  const size_t k = seqs.shape[1] - n;
  memcpy(tok, (int64_t *)seqs.data + n, k * sizeof *tok);
  clf_array_free(&seqs);
  return k;
}

static void expect_alone(clf_model *m, const int64_t *ids, size_t n, const clf_generate_options *o, const out *got,
                         const char *what) {
  int64_t want[MAXTOK];
  const size_t k = alone(m, ids, n, o, want);
  ck_assert_msg(got->done == 1, "%s: on_done called %d times", what, got->done);
  ck_assert_msg(got->n == k, "%s: %zu tokens, alone %zu", what, got->n, k);
  for (size_t i = 0; i < k; i++)
    ck_assert_msg(got->tok[i] == want[i], "%s: token %zu is %lld, alone %lld", what, i, (long long)got->tok[i],
                  (long long)want[i]);
}

static clf_dtype kv_dtype = CLF_F32; /* the pools of the engines made below */

static clf_engine *engine(clf_model *m, size_t block, size_t rows, size_t kv_blocks) {
  clf_engine_options o;
  clf_engine_options_init(&o);
  o.kv_dtype = kv_dtype;
  o.block_size = block, o.max_step_rows = rows, o.max_sequences = 16;
  clf_engine *e;
  if (kv_blocks) { /* the pool's size in blocks: a block's bytes from a first engine */
    clf_engine_stats s;
    o.kv_bytes = 1 << 20;
    TH_OK(clf_engine_create(m, &o, &e));
    TH_OK(clf_engine_stats_get(e, &s));
    clf_engine_destroy(e);
    o.kv_bytes = kv_blocks * s.block_bytes;
  }
  TH_OK(clf_engine_create(m, &o, &e));
  return e;
}

static void expect_empty(clf_engine *e) {
  clf_engine_stats s;
  TH_OK(clf_engine_stats_get(e, &s));
  ck_assert_msg(s.blocks_used == 0 && s.running == 0 && s.waiting == 0,
                "after the run: %zu blocks held, %zu running, %zu waiting", s.blocks_used, s.running, s.waiting);
}

/* An end-of-sequence token no fixture's vocabulary reaches: every sequence
 * runs to its max_new_tokens. */
static const int64_t no_eos[1] = {127};

static const char *const decoders[] = {"gpt2", "llama_gqa3", "mistral", "qwen2", "qwen3", "qwen3_window", "gemma3", "gemma2", "phi3", "gguf_models/smollm_like",
                                       "gguf_models/llama_mixed"};

/* transformers' greedy goldens: the fixture's generate cases, each row
 * (left padding dropped) a sequence of one engine, all at once, prompts
 * fed in chunks of at most 5 rows a step over blocks of 4. */
START_TEST(engine_matches_transformers) {
  char dir[1024];
  fixture_dir(decoders[_i], dir, sizeof dir);
  clf_model *m = get_model(dir);
  clf_engine *e = engine(m, 4, 5, 0);
  cJSON *cases = load_cases(dir), *c;
  out res[8];
  int64_t *want[8];
  size_t want_n[8], n_seq = 0;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(cases, "cases")) {
    if (strcmp(cJSON_GetObjectItem(c, "kind")->valuestring, "generate") != 0) continue;
    const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
    char path[1200];
    clf_array ids, mask = {0}, seqs;
    snprintf(path, sizeof path, "%s/%s.input_ids.npy", dir, name);
    TH_OK(clf_npy_read(path, &ids));
    snprintf(path, sizeof path, "%s/%s.attention_mask.npy", dir, name);
    const int has_mask = access(path, F_OK) == 0;
    if (has_mask) TH_OK(clf_npy_read(path, &mask));
    snprintf(path, sizeof path, "%s/%s.sequences.npy", dir, name);
    TH_OK(clf_npy_read(path, &seqs));
    const size_t B = ids.shape[0], L = ids.shape[1], T = seqs.shape[1];
    const long mnt = (long)cJSON_GetObjectItem(cJSON_GetObjectItem(c, "generate_kwargs"), "max_new_tokens")->valuedouble;
    clf_generate_options o;
    clf_generate_options_init(&o);
    o.max_new_tokens = (size_t)mnt;
    for (size_t b = 0; b < B; b++) {
      int64_t row[64];
      size_t n = 0;
      for (size_t i = 0; i < L; i++)
        if (!has_mask || id_at(&mask, b * L + i)) row[n++] = id_at(&ids, b * L + i);
      ck_assert_uint_lt(n_seq, 8);
      submit(e, row, n, &o, 0, &res[n_seq]);
      want[n_seq] = malloc(T * sizeof(int64_t));
      want_n[n_seq] = T - L;
      for (size_t i = 0; i < T - L; i++) want[n_seq][i] = id_at(&seqs, b * T + L + i);
      n_seq++;
      /* a step between submissions: sequences join a running batch */
      TH_OK(clf_engine_step(e, NULL));
    }
    clf_array_free(&ids), clf_array_free(&mask), clf_array_free(&seqs);
  }
  TH_OK(clf_engine_run(e));
  ck_assert_uint_gt(n_seq, 0);
  for (size_t s = 0; s < n_seq; s++) {
    ck_assert_int_eq(res[s].done, 1);
    /* transformers pads a row that ended early; the engine stops at its EOS */
    ck_assert_msg(res[s].n <= want_n[s], "%s sequence %zu: %zu tokens, more than transformers' %zu", decoders[_i], s,
                  res[s].n, want_n[s]);
    for (size_t i = 0; i < res[s].n; i++)
      ck_assert_msg(res[s].tok[i] == want[s][i], "%s sequence %zu: token %zu is %lld, transformers %lld",
                    decoders[_i], s, i, (long long)res[s].tok[i], (long long)want[s][i]);
    ck_assert_msg(res[s].n == want_n[s] || res[s].why == CLF_FINISH_EOS, "%s sequence %zu stopped early (%d)",
                  decoders[_i], s, res[s].why);
    free(want[s]);
  }
  expect_empty(e);
  clf_engine_destroy(e);
  cJSON_Delete(cases);
}
END_TEST

/* Pools of f16: transformers' greedy goldens still, and half the bytes a
 * block. */
START_TEST(engine_f16_pool) {
  char dir[1024];
  fixture_dir("gpt2", dir, sizeof dir);
  clf_model *m = get_model(dir);
  clf_engine_stats a, b;
  clf_engine *e = engine(m, 4, 64, 0);
  TH_OK(clf_engine_stats_get(e, &a));
  clf_engine_destroy(e);
  kv_dtype = CLF_F16;
  e = engine(m, 4, 64, 0);
  TH_OK(clf_engine_stats_get(e, &b));
  clf_engine_destroy(e);
  ck_assert_uint_eq(2 * b.block_bytes, a.block_bytes);
  for (size_t i = 0; i < sizeof decoders / sizeof decoders[0]; i++) engine_matches_transformers_fn((int)i);
  kv_dtype = CLF_F32;
  clf_engine_options o;
  clf_engine_options_init(&o);
  o.kv_dtype = CLF_Q8_0;
  TH_FAILS(clf_engine_create(m, &o, &e), CLF_E_INVALID_ARG, "f32 or f16");
}
END_TEST

/* The --weights types of blocks of up to 32 (f32, f16, q8_0, q4_0, q4_1
 * ...): Qwen2 (hidden 32) loaded as each, its sequences beside each other
 * greedy as alone (the one-row runtime), through the step's products of
 * that type.  The k-quants' blocks of 256 need wider layers than the
 * safetensors fixtures have: the GGUF fixture llama_mixed carries them
 * (engine_matches_transformers). */
START_TEST(engine_weight_types) {
  char dir[1024];
  fixture_dir("qwen2", dir, sizeof dir);
  clf_dtype_desc d;
  ck_assert_int_eq(clf_dtype_at((size_t)_i, &d), CLF_OK);
  if (!d.weights_target || d.block > 32) return; /* not a --weights type, or a k-quant (above) */
  clf_model_options mo;
  clf_model_options_init(&mo);
  mo.weights = d.dtype;
  clf_model *m = NULL;
  TH_OK(clf_model_load_with(th_ctx, dir, &mo, &m));
  clf_engine *e = engine(m, 4, 7, 0);
  int64_t p[3][9];
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 6, o.eos_token_ids = no_eos, o.n_eos_token_ids = 1;
  out res[3];
  for (size_t s = 0; s < 3; s++) {
    for (size_t i = 0; i < 9; i++) p[s][i] = (int64_t)((s * 23 + i * 11 + 4) % 89 + 1);
    submit(e, p[s], 3 + 3 * s, &o, 0, &res[s]);
  }
  TH_OK(clf_engine_run(e));
  for (size_t s = 0; s < 3; s++) {
    char what[64];
    snprintf(what, sizeof what, "weights %s, sequence %zu", d.name, s);
    expect_alone(m, p[s], 3 + 3 * s, &o, &res[s], what);
  }
  expect_empty(e);
  clf_engine_destroy(e);
  clf_model_destroy(m);
}
END_TEST

/* A decode step (every row its sequence's last) hands the head the
 * stack's rows as they lie: one gather_rows fewer than the prompt step,
 * whose last rows are gathered (the embeddings take the others: 2 a step
 * for GPT-2's token and position tables).  The tokens stay those of
 * generate alone. */
START_TEST(engine_decode_reads_rows_in_place) {
  th_profiled_begin(NULL);
  char dir[1024];
  fixture_dir("gpt2", dir, sizeof dir);
  clf_model *m = NULL;
  TH_OK(clf_model_load_with(th_ctx, dir, NULL, &m));
  clf_engine *e = engine(m, 4, 8, 0);
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 3, o.eos_token_ids = no_eos, o.n_eos_token_ids = 1;
  const int64_t p[2][4] = {{5, 17, 3, 0}, {9, 2, 40, 11}};
  out res[2];
  submit(e, p[0], 3, &o, 0, &res[0]);
  submit(e, p[1], 4, &o, 0, &res[1]);
  (void)th_profiled_count("gather_rows");
  TH_OK(clf_engine_step(e, NULL)); /* both prompts: 7 rows, rows 2 and 6 to the head */
  const unsigned long prompt = th_profiled_count("gather_rows");
  TH_OK(clf_engine_step(e, NULL)); /* one new token of each */
  const unsigned long decode = th_profiled_count("gather_rows");
  ck_assert_msg(prompt == 3 && decode == 2, "gather_rows: %lu launches in the prompt step, %lu in the decode step "
                "(expected 3 and 2)", prompt, decode);
  TH_OK(clf_engine_run(e));
  expect_alone(m, p[0], 3, &o, &res[0], "sequence 0");
  expect_alone(m, p[1], 4, &o, &res[1], "sequence 1");
  clf_engine_destroy(e);
  clf_model_destroy(m);
  th_profiled_expect("gather_rows", NULL, 1);
}
END_TEST

/* Greedy and seeded sampling beside each other, sequences joining while
 * others decode: each gives the tokens it gives alone. */
START_TEST(engine_matches_alone) {
  char dir[1024];
  fixture_dir(decoders[_i], dir, sizeof dir);
  clf_model *m = get_model(dir);
  const size_t V = 90; /* below every fixture's vocabulary */
  const size_t lens[6] = {1, 3, 6, 9, 13, 17};
  int64_t prompts[6][20];
  clf_generate_options o[6];
  out res[6];
  for (size_t s = 0; s < 6; s++) {
    for (size_t i = 0; i < lens[s]; i++) prompts[s][i] = (int64_t)((s * 31 + i * 17 + 3) % V + 1); /* never 0 (pad) */
    clf_generate_options_init(&o[s]);
    o[s].max_new_tokens = 10;
    o[s].eos_token_ids = no_eos; /* no early stop: every token compared */
    o[s].n_eos_token_ids = 1;
    /* sampled on the f32 fixtures: the GGUF one's quantized one-row products
     * round otherwise than the batched ones, within what greedy tolerates
     * but not what a draw does */
    if (s % 2 && !strstr(decoders[_i], "gguf")) o[s].do_sample = 1, o[s].temperature = 0.9, o[s].top_k = 20, o[s].seed = 1000 + s;
  }
  /* the float path: on a CPU the GGUF fixture's k-quant products of one or
   * two rows take the integer path by default, which rounds x where the
   * steps' batched products do not (docs/tuning.md), and a greedy token
   * of these random weights flips */
  setenv("CLFORMER_SKINNY_INT", "0", 1);
  TH_OK(clf__env_reload(th_ctx));
  clf_engine *e = engine(m, 4, 7, 0);
  for (size_t s = 0; s < 3; s++) submit(e, prompts[s], lens[s], &o[s], 0, &res[s]);
  TH_OK(clf_engine_step(e, NULL));
  TH_OK(clf_engine_step(e, NULL));
  for (size_t s = 3; s < 6; s++) {
    submit(e, prompts[s], lens[s], &o[s], 0, &res[s]);
    TH_OK(clf_engine_step(e, NULL));
  }
  TH_OK(clf_engine_run(e));
  for (size_t s = 0; s < 6; s++) {
    char what[96];
    snprintf(what, sizeof what, "%s sequence %zu (%s)", decoders[_i], s, o[s].do_sample ? "sampled" : "greedy");
    expect_alone(m, prompts[s], lens[s], &o[s], &res[s], what);
    ck_assert_int_eq(res[s].why, CLF_FINISH_LENGTH);
  }
  expect_empty(e);
  clf_engine_destroy(e);
  unsetenv("CLFORMER_SKINNY_INT");
  TH_OK(clf__env_reload(th_ctx));
}
END_TEST

/* A pool of 10 blocks for four sequences of 5 blocks each: the newest are
 * sent back to wait and recomputed, with the same tokens. */
START_TEST(engine_preemption) {
  char dir[1024];
  fixture_dir("llama_gqa3", dir, sizeof dir);
  clf_model *m = get_model(dir);
  clf_engine *e = engine(m, 4, 64, 10);
  int64_t p[4][6];
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 14;
  o.eos_token_ids = no_eos;
  o.n_eos_token_ids = 1;
  out res[4];
  for (size_t s = 0; s < 4; s++) {
    for (size_t i = 0; i < 6; i++) p[s][i] = (int64_t)((s * 13 + i * 7 + 1) % 89 + 1);
    submit(e, p[s], 6, &o, 0, &res[s]);
  }
  TH_OK(clf_engine_run(e));
  clf_engine_stats st;
  TH_OK(clf_engine_stats_get(e, &st));
  ck_assert_msg(st.preemptions > 0, "no sequence was preempted in a pool of %zu blocks", st.blocks);
  for (size_t s = 0; s < 4; s++) expect_alone(m, p[s], 6, &o, &res[s], "preempted run");
  expect_empty(e);
  clf_engine_destroy(e);
}
END_TEST

/* A prompt that starts as an earlier one did reuses its full blocks under
 * the same isolation key, and nothing under another. */
START_TEST(engine_prefix_reuse) {
  char dir[1024];
  fixture_dir("gpt2", dir, sizeof dir);
  clf_model *m = get_model(dir);
  clf_engine *e = engine(m, 4, 64, 0);
  int64_t a[24];
  for (size_t i = 0; i < 24; i++) a[i] = (int64_t)((i * 11 + 5) % 99 + 1);
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 4;
  o.eos_token_ids = no_eos;
  o.n_eos_token_ids = 1;
  out r1, r2, r3, r4;
  clf_engine_stats st;
  submit(e, a, 18, &o, 7, &r1);
  TH_OK(clf_engine_run(e));
  TH_OK(clf_engine_stats_get(e, &st));
  ck_assert_uint_eq(st.prefix_tokens_reused, 0);
  ck_assert_uint_ge(st.blocks_cached, 4);
  /* the same 18 tokens then 6 more: blocks 0-3 (16 positions) are the first's */
  submit(e, a, 24, &o, 7, &r2);
  TH_OK(clf_engine_run(e));
  TH_OK(clf_engine_stats_get(e, &st));
  ck_assert_uint_eq(st.prefix_tokens_reused, 16);
  ck_assert_uint_eq(r2.cached, 16);
  ck_assert_uint_eq(r2.prompt, 24);
  expect_alone(m, a, 24, &o, &r2, "a prompt on a reused prefix");
  /* another client's key: computed anew */
  submit(e, a, 24, &o, 8, &r3);
  TH_OK(clf_engine_run(e));
  TH_OK(clf_engine_stats_get(e, &st));
  ck_assert_uint_eq(st.prefix_tokens_reused, 16);
  ck_assert_uint_eq(r3.cached, 0);
  expect_alone(m, a, 24, &o, &r3, "another isolation key");
  /* a prompt that differs inside block 2: blocks 0-1 reused */
  int64_t b[24];
  memcpy(b, a, sizeof b);
  b[9] = (b[9] + 1) % 100;
  submit(e, b, 20, &o, 7, &r4);
  TH_OK(clf_engine_run(e));
  TH_OK(clf_engine_stats_get(e, &st));
  ck_assert_uint_eq(st.prefix_tokens_reused, 16 + 8);
  expect_alone(m, b, 20, &o, &r4, "a prompt differing in its third block");
  expect_alone(m, a, 18, &o, &r1, "the first prompt");
  expect_empty(e);
  clf_engine_destroy(e);
}
END_TEST

/* Cancelled while waiting, while running, and from its own callback; the
 * others are untouched. */
START_TEST(engine_cancel) {
  char dir[1024];
  fixture_dir("gpt2", dir, sizeof dir);
  clf_model *m = get_model(dir);
  clf_engine *e = engine(m, 4, 64, 0);
  int64_t p[4][5];
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 12;
  o.eos_token_ids = no_eos;
  o.n_eos_token_ids = 1;
  out res[4];
  uint64_t id[4];
  for (size_t s = 0; s < 4; s++) {
    for (size_t i = 0; i < 5; i++) p[s][i] = (int64_t)((s * 29 + i * 3 + 2) % 99 + 1);
    id[s] = submit(e, p[s], 5, &o, 0, &res[s]);
  }
  res[3].cancel_in = e, res[3].cancel_at = 2;
  TH_OK(clf_engine_cancel(e, id[0])); /* still queued */
  TH_OK(clf_engine_step(e, NULL));
  TH_OK(clf_engine_step(e, NULL));
  TH_OK(clf_engine_cancel(e, id[1])); /* running */
  TH_OK(clf_engine_run(e));
  ck_assert_int_eq(res[0].why, CLF_FINISH_CANCELLED);
  ck_assert_uint_eq(res[0].n, 0);
  ck_assert_int_eq(res[1].why, CLF_FINISH_CANCELLED);
  ck_assert_uint_eq(res[1].n, 2);
  ck_assert_int_eq(res[3].why, CLF_FINISH_CANCELLED);
  ck_assert_uint_eq(res[3].n, 2);
  for (size_t s = 0; s < 4; s++) ck_assert_int_eq(res[s].done, 1);
  expect_alone(m, p[2], 5, &o, &res[2], "beside cancelled sequences");
  FAILS_HERE(clf_engine_cancel(e, id[1]), CLF_E_INVALID_ARG, "no sequence");
  expect_empty(e);
  /* destroyed with sequences left: each hears CANCELLED */
  out left;
  submit(e, p[2], 5, &o, 0, &left);
  TH_OK(clf_engine_step(e, NULL));
  clf_engine_destroy(e);
  ck_assert_int_eq(left.done, 1);
  ck_assert_int_eq(left.why, CLF_FINISH_CANCELLED);
}
END_TEST

/* n copies of one request: the prompt computed once, its last partly
 * filled block copied on write, copy i sampling as seed + i would alone. */
START_TEST(engine_n_copies) {
  char dir[1024];
  fixture_dir("gpt2", dir, sizeof dir);
  clf_model *m = get_model(dir);
  clf_engine *e = engine(m, 4, 64, 0);
  int64_t p[10];
  for (size_t i = 0; i < 10; i++) p[i] = (int64_t)(i * 9 % 99 + 1);
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 8, o.do_sample = 1, o.temperature = 0.9, o.seed = 500;
  o.eos_token_ids = no_eos, o.n_eos_token_ids = 1;
  out res[3];
  memset(res, 0, sizeof res);
  /* one user pointer for all three: the id tells them apart */
  uint64_t id0 = 0;
  const clf_engine_request r = {p, 10, &o, 0, NULL, NULL, NULL, 3};
  clf_engine_request rr = r;
  n_slots = res;
  rr.on_token = on_tok_n, rr.on_done = on_done_n, rr.user = &id0;
  TH_OK(clf_engine_submit(e, &rr, &id0));
  TH_OK(clf_engine_run(e));
  clf_engine_stats st;
  TH_OK(clf_engine_stats_get(e, &st));
  ck_assert_uint_eq(st.blocks_copied, 2); /* block 2 (positions 8-9) copied for two of the three */
  ck_assert_uint_eq(st.rows, 10 + 3 * 7);  /* the prompt once, then each copy's tokens */
  for (size_t i = 0; i < 3; i++) {
    clf_generate_options oi = o;
    oi.seed = 500 + i;
    char what[64];
    snprintf(what, sizeof what, "copy %zu of 3", i);
    expect_alone(m, p, 10, &oi, &res[i], what);
  }
  expect_empty(e);
  /* copies count against max_sequences: 3 requests of 3 copies in an
   * engine of 4 run one request at a time, each copy as alone */
  clf_engine_options eo;
  clf_engine_options_init(&eo);
  eo.block_size = 4, eo.max_sequences = 4;
  clf_engine *e4;
  TH_OK(clf_engine_create(m, &eo, &e4));
  out many[3][3];
  uint64_t ids[3];
  n_first_ids = ids;
  for (size_t k = 0; k < 3; k++) {
    memset(many[k], 0, sizeof many[k]);
    n_slots_of[k] = many[k];
    clf_engine_request rk = rr;
    rk.user = &ids[k];
    TH_OK(clf_engine_submit(e4, &rk, &ids[k]));
  }
  for (size_t pending = 1; pending;) {
    TH_OK(clf_engine_step(e4, &pending));
    clf_engine_stats s4;
    TH_OK(clf_engine_stats_get(e4, &s4));
    ck_assert_uint_le(s4.running, 4);
  }
  for (size_t k = 0; k < 3; k++)
    for (size_t i = 0; i < 3; i++) {
      clf_generate_options oi = o;
      oi.seed = 500 + i;
      expect_alone(m, p, 10, &oi, &many[k][i], "a copy beside other requests' copies");
    }
  rr.n = 5;
  FAILS_HERE(clf_engine_submit(e4, &rr, NULL), CLF_E_INVALID_ARG, "more than the engine's max_sequences 4");
  rr.n = 3;
  n_first_ids = NULL;
  clf_engine_destroy(e4);
  /* cancelled before its prompt is computed: every copy ends */
  memset(res, 0, sizeof res);
  TH_OK(clf_engine_submit(e, &rr, &id0));
  TH_OK(clf_engine_cancel(e, id0));
  TH_OK(clf_engine_run(e));
  for (size_t i = 0; i < 3; i++) {
    ck_assert_int_eq(res[i].done, 1);
    ck_assert_int_eq(res[i].why, CLF_FINISH_CANCELLED);
  }
  expect_empty(e);
  clf_engine_destroy(e);
}
END_TEST

typedef struct lp_out {
  clf_token_info first;
  int64_t ids[5];
  float lps[5];
  size_t n;
} lp_out;

static int on_info(void *u, uint64_t id, const clf_token_info *info) {
  lp_out *o = u;
  (void)id;
  if (o->n++ == 0) {
    o->first = *info;
    memcpy(o->ids, info->top_tokens, info->n_top * sizeof *o->ids);
    memcpy(o->lps, info->top_logprobs, info->n_top * sizeof *o->lps);
  }
  return 0;
}

/* Log-probabilities: the log-softmax of the model's logits at the prompt's
 * last position (clf_model_run), the top 5 in order. */
START_TEST(engine_logprobs) {
  char dir[1024];
  fixture_dir("gpt2", dir, sizeof dir);
  clf_model *m = get_model(dir);
  clf_engine *e = engine(m, 4, 64, 0);
  int64_t p[6] = {5, 17, 29, 41, 53, 65};
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 3;
  lp_out lo = {0};
  const clf_engine_request r = {p, 6, &o, 0, NULL, NULL, &lo, 0, on_info, 5};
  TH_OK(clf_engine_submit(e, &r, NULL));
  TH_OK(clf_engine_run(e));
  ck_assert_uint_eq(lo.n, 3);
  ck_assert_uint_eq(lo.first.n_top, 5);
  clf_array in = {"input_ids", CLF_I64, 2, {1, 6}, p}, out[1];
  const char *const want[1] = {"logits"};
  TH_OK(clf_model_run(m, &in, 1, want, 1, out));
  const size_t V = out[0].shape[2];
  const float *x = (const float *)out[0].data + 5 * V;
  double mx = -INFINITY, sum = 0;
  for (size_t v = 0; v < V; v++) mx = x[v] > mx ? x[v] : mx;
  for (size_t v = 0; v < V; v++) sum += exp(x[v] - mx);
  const double lse = mx + log(sum);
  ck_assert_int_eq(lo.first.token, lo.ids[0]); /* greedy: the most probable */
  ck_assert_msg(fabs(lo.first.logprob - (x[lo.first.token] - lse)) < 1e-4, "logprob %g, expected %g",
                lo.first.logprob, x[lo.first.token] - lse);
  for (size_t i = 0; i < 5; i++) {
    ck_assert_msg(fabs(lo.lps[i] - (x[lo.ids[i]] - lse)) < 1e-4, "top %zu: %g, expected %g", i, lo.lps[i],
                  x[lo.ids[i]] - lse);
    if (i) ck_assert(lo.lps[i] <= lo.lps[i - 1]);
  }
  /* no token outside the top 5 is more probable than the fifth */
  for (size_t v = 0; v < V; v++) {
    int in_top = 0;
    for (size_t i = 0; i < 5; i++) in_top |= lo.ids[i] == (int64_t)v;
    if (!in_top) ck_assert(x[v] - lse <= lo.lps[4] + 1e-6);
  }
  clf_array_free(&out[0]);
  clf_engine_destroy(e);
}
END_TEST

static int even_only(void *u, uint64_t id, const int64_t *t, size_t n, uint32_t *mask, size_t V) {
  (void)u, (void)id, (void)t, (void)n;
  for (size_t v = 1; v < V; v += 2) mask[v / 32] &= ~(1u << (v % 32));
  return 0;
}

static int nothing(void *u, uint64_t id, const int64_t *t, size_t n, uint32_t *mask, size_t V) {
  (void)u, (void)id, (void)t, (void)n;
  memset(mask, 0, (V + 31) / 32 * sizeof *mask);
  return 0;
}

static int stop_now(void *u, uint64_t id, const int64_t *t, size_t n, uint32_t *mask, size_t V) {
  (void)u, (void)id, (void)t, (void)n, (void)mask, (void)V;
  return 1;
}

/* A token mask (constrained decoding): greedy and sampled tokens obey it;
 * a mask with nothing left is an error; a non-zero return stops. */
START_TEST(engine_allowed_mask) {
  char dir[1024];
  fixture_dir("gpt2", dir, sizeof dir);
  clf_model *m = get_model(dir);
  clf_engine *e = engine(m, 4, 64, 0);
  int64_t p[5] = {3, 9, 27, 81, 4};
  clf_generate_options o[2];
  clf_generate_options_init(&o[0]);
  o[0].max_new_tokens = 12, o[0].eos_token_ids = no_eos, o[0].n_eos_token_ids = 1;
  o[1] = o[0];
  o[1].do_sample = 1, o[1].seed = 77, o[1].temperature = 1.5;
  out res[4];
  memset(res, 0, sizeof res);
  for (size_t i = 0; i < 2; i++) {
    clf_engine_request r = {p, 5, &o[i], 0, on_tok, on_done, &res[i]};
    r.allowed = even_only;
    TH_OK(clf_engine_submit(e, &r, NULL));
  }
  clf_engine_request r = {p, 5, &o[0], 0, on_tok, on_done, &res[2]};
  r.allowed = nothing;
  TH_OK(clf_engine_submit(e, &r, NULL));
  r.user = &res[3], r.allowed = stop_now;
  TH_OK(clf_engine_submit(e, &r, NULL));
  TH_OK(clf_engine_run(e));
  for (size_t i = 0; i < 2; i++) {
    ck_assert_uint_eq(res[i].n, 12);
    for (size_t k = 0; k < res[i].n; k++)
      ck_assert_msg(res[i].tok[k] % 2 == 0, "sequence %zu token %zu is %lld, odd", i, k, (long long)res[i].tok[k]);
  }
  ck_assert_int_eq(res[2].why, CLF_FINISH_ERROR);
  ck_assert_uint_eq(res[2].n, 0);
  ck_assert_int_eq(res[3].why, CLF_FINISH_STOPPED);
  ck_assert_uint_eq(res[3].n, 0);
  expect_empty(e);
  clf_engine_destroy(e);
}
END_TEST

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, rss = 0;
  if (f && fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
  if (f) fclose(f);
  return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* 1,000 sequences of random lengths and settings, a tenth cancelled at a
 * random step, in a pool small enough to preempt: every one ends once,
 * the pool is empty after, and host memory is flat from the second half
 * on. */
START_TEST(engine_soak) {
  char dir[1024];
  fixture_dir("gpt2", dir, sizeof dir);
  clf_model *m = get_model(dir);
  clf_engine *e = engine(m, 4, 48, 24);
  enum { N = 1000, LIVE = 24 };
  out *res = calloc(N, sizeof *res);
  uint64_t *ids = calloc(N, sizeof *ids);
  int *cancel_step = calloc(N, sizeof *cancel_step);
  uint32_t x = 12345;
#define RND(k) ((x = x * 1664525u + 1013904223u), (x >> 8) % (k))
  size_t next = 0, steps = 0;
  long rss_half = 0;
  for (;;) {
    clf_engine_stats st;
    TH_OK(clf_engine_stats_get(e, &st));
    while (next < N && st.running + st.waiting < LIVE) {
      int64_t p[16];
      const size_t n = 1 + RND(14);
      for (size_t i = 0; i < n; i++) p[i] = (int64_t)RND(120);
      clf_generate_options o;
      clf_generate_options_init(&o);
      o.max_new_tokens = 1 + RND(10);
      if (RND(2)) o.do_sample = 1, o.temperature = 0.5 + 0.1 * (double)RND(10), o.seed = 1 + RND(1000);
      ids[next] = submit(e, p, n, &o, RND(3), &res[next]);
      cancel_step[next] = RND(10) == 0 ? (int)(steps + 1 + RND(6)) : -1;
      next++, st.waiting++;
    }
    for (size_t i = 0; i < next; i++)
      if (cancel_step[i] == (int)steps && !res[i].done) clf_engine_cancel(e, ids[i]); /* may have just ended */
    size_t pending;
    TH_OK(clf_engine_step(e, &pending));
    steps++;
    if (next == N / 2 && !rss_half) rss_half = rss_kib();
    if (next == N && !pending) break;
  }
#undef RND
  size_t cancelled = 0;
  for (size_t i = 0; i < N; i++) {
    ck_assert_msg(res[i].done == 1, "sequence %zu ended %d times", i, res[i].done);
    cancelled += res[i].why == CLF_FINISH_CANCELLED;
  }
  ck_assert_uint_gt(cancelled, 10);
  clf_engine_stats st;
  TH_OK(clf_engine_stats_get(e, &st));
  ck_assert_uint_gt(st.preemptions, 0);
  expect_empty(e);
  const long rss_end = rss_kib();
#if defined(__SANITIZE_ADDRESS__)
  /* AddressSanitizer keeps freed memory in quarantine (up to 256 MiB), so
   * the resident size grows whatever the engine does; LeakSanitizer checks
   * instead, at exit, that nothing it allocated is left (the ASan stage). */
  (void)rss_half, (void)rss_end;
#else
  ck_assert_msg(rss_end - rss_half < 2048, "host memory grew %ld KiB over the second 500 sequences",
                rss_end - rss_half);
#endif
  clf_engine_destroy(e);
  free(res), free(ids), free(cancel_step);
}
END_TEST

typedef struct feeder {
  clf_engine *e;
  out res[40];
  int64_t p[40][4];
  volatile int submitted;
} feeder;

static void *feed(void *u) {
  feeder *f = u;
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 5;
  for (size_t s = 0; s < 40; s++) {
    for (size_t i = 0; i < 4; i++) f->p[s][i] = (int64_t)((s * 7 + i) % 100 + 1);
    memset(&f->res[s], 0, sizeof f->res[s]);
    const clf_engine_request r = {f->p[s], 4, &o, s % 2, on_tok, on_done, &f->res[s]};
    if (clf_engine_submit(f->e, &r, NULL) != CLF_OK) break;
    __atomic_add_fetch(&f->submitted, 1, __ATOMIC_SEQ_CST);
    nanosleep(&(struct timespec){0, 500000}, NULL);
  }
  return NULL;
}

/* Another thread submits while this one steps. */
START_TEST(engine_threads) {
  char dir[1024];
  fixture_dir("gpt2", dir, sizeof dir);
  clf_model *m = get_model(dir);
  feeder *f = calloc(1, sizeof *f);
  f->e = engine(m, 4, 32, 0);
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, feed, f), 0);
  size_t pending = 0;
  while (__atomic_load_n(&f->submitted, __ATOMIC_SEQ_CST) < 40 || pending) TH_OK(clf_engine_step(f->e, &pending));
  pthread_join(t, NULL);
  TH_OK(clf_engine_run(f->e));
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 5;
  for (size_t s = 0; s < 40; s++) {
    char what[64];
    snprintf(what, sizeof what, "sequence %zu submitted from a thread", s);
    expect_alone(m, f->p[s], 4, &o, &f->res[s], what);
  }
  expect_empty(f->e);
  clf_engine_destroy(f->e);
  free(f);
}
END_TEST

START_TEST(engine_errors) {
  char dir[1024];
  clf_engine *e = NULL;
  fixture_dir("marian", dir, sizeof dir);
  TH_FAILS(clf_engine_create(get_model(dir), NULL, &e), CLF_E_UNSUPPORTED, "not a decoder-only");
  fixture_dir("llama_rope_dynamic", dir, sizeof dir);
  TH_FAILS(clf_engine_create(get_model(dir), NULL, &e), CLF_E_UNSUPPORTED, "dynamic");
  fixture_dir("bert", dir, sizeof dir);
  TH_FAILS(clf_engine_create(get_model(dir), NULL, &e), CLF_E_UNSUPPORTED, "not a decoder-only");
  fixture_dir("gpt2", dir, sizeof dir);
  clf_model *m = get_model(dir);
  clf_engine_options eo;
  clf_engine_options_init(&eo);
  eo.kv_bytes = 100;
  TH_FAILS(clf_engine_create(m, &eo, &e), CLF_E_INVALID_ARG, "holds no block");
  eo.kv_bytes = 0, eo.block_size = 5000;
  TH_FAILS(clf_engine_create(m, &eo, &e), CLF_E_INVALID_ARG, "block_size");
  e = engine(m, 4, 16, 3); /* 12 positions */
  int64_t p[40] = {0};
  const clf_engine_request none = {NULL, 0};
  FAILS_HERE(clf_engine_submit(e, &none, NULL), CLF_E_INVALID_ARG, "no prompt");
  clf_engine_request r = {p, 32};
  FAILS_HERE(clf_engine_submit(e, &r, NULL), CLF_E_INVALID_ARG, "leaves no position");
  p[2] = 128, r.n_ids = 4;
  FAILS_HERE(clf_engine_submit(e, &r, NULL), CLF_E_INVALID_ARG, "ids[2] is 128");
  p[2] = 1;
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.num_beams = 2;
  r.options = &o;
  FAILS_HERE(clf_engine_submit(e, &r, NULL), CLF_E_UNSUPPORTED, "num_beams");
  o.num_beams = 0, o.do_sample = 1, o.temperature = -1;
  FAILS_HERE(clf_engine_submit(e, &r, NULL), CLF_E_INVALID_ARG, "temperature");
  clf_generate_options_init(&o); /* up to 32 positions: 8 blocks, the pool has 3 */
  FAILS_HERE(clf_engine_submit(e, &r, NULL), CLF_E_INVALID_ARG, "more than the pool's 3");
  o.max_new_tokens = 8;
  TH_OK(clf_engine_submit(e, &r, NULL));
  TH_OK(clf_engine_run(e));
  expect_empty(e);
  clf_engine_destroy(e);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("engine");
  TCase *tc = tcase_create("engine");
  tcase_set_timeout(tc, 600);
  tcase_add_unchecked_fixture(tc, NULL, free_models);
  const int n = (int)(sizeof decoders / sizeof decoders[0]);
  tcase_add_loop_test(tc, engine_matches_transformers, 0, n);
  tcase_add_loop_test(tc, engine_matches_alone, 0, n);
  tcase_add_test(tc, engine_f16_pool);
  tcase_add_test(tc, engine_decode_reads_rows_in_place);
  tcase_add_loop_test(tc, engine_weight_types, 0, (int)clf_dtype_count());
  tcase_add_test(tc, engine_preemption);
  tcase_add_test(tc, engine_prefix_reuse);
  tcase_add_test(tc, engine_cancel);
  tcase_add_test(tc, engine_n_copies);
  tcase_add_test(tc, engine_logprobs);
  tcase_add_test(tc, engine_allowed_mask);
  tcase_add_test(tc, engine_soak);
  tcase_add_test(tc, engine_threads);
  tcase_add_test(tc, engine_errors);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
