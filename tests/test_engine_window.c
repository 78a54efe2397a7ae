/* test_engine_window.c - the engine's blocks on models whose layers are
 * windowed (docs/engine.md, "Windows"): a sequence gives back the blocks
 * every layer's window has passed.
 *
 * The logits stay transformers' (the fixtures' `long` case, past the
 * window of 5 positions) and the one-sequence runtime's while blocks go
 * back, the blocks held after each token are the count the design gives,
 * sequences whose whole length would not fit run in a small pool (with
 * preemption), and prefix reuse and copies share blocks the window
 * releases without handing them to another sequence early. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fixture_util.h"
#include "harness.h"

enum { MAXTOK = 64, BS = 2, ROWS = 5 };

/* An end-of-sequence token no fixture's vocabulary (96) reaches. */
static const int64_t no_eos[1] = {127};

static void fixture_dir(const char *name, char *buf, size_t n) { snprintf(buf, n, "%s/%s", fixtures(), name); }

static clf_engine *engine(clf_model *m, size_t kv_blocks) {
  clf_engine_options o;
  clf_engine_options_init(&o);
  o.block_size = BS, o.max_step_rows = ROWS, o.max_sequences = 16;
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

static size_t blocks_used(clf_engine *e) {
  clf_engine_stats s;
  TH_OK(clf_engine_stats_get(e, &s));
  return s.blocks_used;
}

static size_t window_blocks_used(clf_engine *e) {
  clf_engine_stats s;
  TH_OK(clf_engine_stats_get(e, &s));
  return s.window_blocks_used;
}

/* ---- logits and block counts of one forced sequence ---- */

typedef struct forced {
  clf_engine *e;
  const int64_t *want; /* the sequence the tokens are forced to */
  size_t n;            /* tokens so far */
  size_t V;
  int64_t top[MAXTOK][CLF_ENGINE_MAX_TOP_LOGPROBS];
  float lp[MAXTOK][CLF_ENGINE_MAX_TOP_LOGPROBS], forced_lp[MAXTOK];
  size_t held[MAXTOK], held_w[MAXTOK]; /* blocks_used and window_blocks_used when each token came */
  size_t n_tok;
} forced;

/* Only the sequence's next token is allowed: the engine is fed the
 * fixture's sequence, and reports the model's scores at each position. */
static int only_next(void *u, uint64_t id, const int64_t *t, size_t n, uint32_t *mask, size_t V) {
  forced *f = u;
  (void)id, (void)t;
  memset(mask, 0, (V + 31) / 32 * sizeof *mask);
  mask[f->want[n] / 32] |= 1u << (f->want[n] % 32);
  return 0;
}

static int on_info(void *u, uint64_t id, const clf_token_info *info) {
  forced *f = u;
  (void)id;
  ck_assert_uint_lt(f->n_tok, MAXTOK);
  ck_assert_uint_eq(info->n_top, CLF_ENGINE_MAX_TOP_LOGPROBS);
  f->forced_lp[f->n_tok] = info->logprob;
  memcpy(f->top[f->n_tok], info->top_tokens, info->n_top * sizeof *info->top_tokens);
  memcpy(f->lp[f->n_tok], info->top_logprobs, info->n_top * sizeof *info->top_logprobs);
  f->held_w[f->n_tok] = window_blocks_used(f->e);
  f->held[f->n_tok++] = blocks_used(f->e);
  return 0;
}

/* log-softmax of x [V] at each of ids [k] into out. */
static void log_softmax_at(const float *x, size_t V, const int64_t *ids, size_t k, float *out) {
  double mx = -INFINITY, sum = 0;
  for (size_t v = 0; v < V; v++) mx = x[v] > mx ? x[v] : mx;
  for (size_t v = 0; v < V; v++) sum += exp((double)x[v] - mx);
  for (size_t i = 0; i < k; i++) out[i] = (float)(x[ids[i]] - mx - log(sum));
}

/* The fixture's window, whether full layers are mixed in (their own pool
 * then, keeping every block, and the windowed layers' apart), and the
 * most blocks of the window's pool the forced sequence below holds: 4
 * for a window of 5 (3 a decode step, 4 while the prompt's last chunk of
 * 2 passes), 3 for a window of 4. */
static const struct {
  const char *name;
  size_t window;
  int mixed;
  size_t most;
} windowed[] = {{"phi3", 5, 0, 4}, {"mistral", 5, 0, 4}, {"gemma3", 4, 1, 3}, {"qwen3_window", 4, 1, 3}};

/* The fixture's `long` sequence fed through the engine (its first 7
 * tokens a prompt, in chunks of 5, the rest forced one a step): at every
 * position the top 20 log-probabilities and the forced token's are
 * transformers' (long.logits) and clf_model_run's within 1e-4 of scale,
 * and the window's pool holds floor(p / BS) - window_first + 1 blocks
 * after the row at position p, where window_first = floor((start + 1 - W)
 * / BS) for the step's first row `start`; a mixed model's full layers
 * hold all floor(p / BS) + 1. */
START_TEST(window_logits_and_blocks) {
  char dir[1024], path[1200];
  fixture_dir(windowed[_i].name, dir, sizeof dir);
  const size_t W = windowed[_i].window;
  const int mixed = windowed[_i].mixed;
  clf_model *m = get_model(dir);
  clf_array ids, logits, run[1];
  snprintf(path, sizeof path, "%s/long.input_ids.npy", dir);
  TH_OK(clf_npy_read(path, &ids));
  snprintf(path, sizeof path, "%s/long.logits.npy", dir);
  TH_OK(clf_npy_read(path, &logits));
  const size_t L = ids.shape[1], V = logits.shape[2], P = 7;
  ck_assert_uint_gt(L, P + 4); /* the sequence runs past the window */
  int64_t seq[MAXTOK];
  for (size_t i = 0; i < L; i++) seq[i] = ids.dtype == CLF_I32 ? ((int32_t *)ids.data)[i] : ((int64_t *)ids.data)[i];
  clf_array in = {"input_ids", CLF_I64, 2, {1, L}, seq};
  const char *const want[1] = {"logits"};
  TH_OK(clf_model_run(m, &in, 1, want, 1, run));
  ck_assert_uint_eq(run[0].shape[2], V);

  clf_engine *e = engine(m, 0);
  forced f = {.e = e, .want = seq, .V = V};
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = L - P;
  o.eos_token_ids = no_eos, o.n_eos_token_ids = 1;
  const clf_engine_request r = {seq, P, &o, 0, NULL, NULL, &f, 0, on_info, CLF_ENGINE_MAX_TOP_LOGPROBS, only_next};
  TH_OK(clf_engine_submit(e, &r, NULL));
  TH_OK(clf_engine_run(e));
  ck_assert_uint_eq(f.n_tok, L - P);
  size_t most = 0;
  for (size_t i = 0; i < f.n_tok; i++) {
    const size_t p = P - 1 + i; /* the row whose scores chose token i */
    const float *tf = (const float *)logits.data + p * V, *ours = (const float *)run[0].data + p * V;
    float ref[CLF_ENGINE_MAX_TOP_LOGPROBS + 1];
    int64_t at[CLF_ENGINE_MAX_TOP_LOGPROBS + 1];
    float got[CLF_ENGINE_MAX_TOP_LOGPROBS + 1];
    memcpy(at, f.top[i], sizeof f.top[i]);
    memcpy(got, f.lp[i], sizeof f.lp[i]);
    at[CLF_ENGINE_MAX_TOP_LOGPROBS] = seq[p + 1], got[CLF_ENGINE_MAX_TOP_LOGPROBS] = f.forced_lp[i];
    log_softmax_at(tf, V, at, CLF_ENGINE_MAX_TOP_LOGPROBS + 1, ref);
    TH_CLOSE(got, ref, CLF_ENGINE_MAX_TOP_LOGPROBS + 1, 1e-4);
    log_softmax_at(ours, V, at, CLF_ENGINE_MAX_TOP_LOGPROBS + 1, ref);
    TH_CLOSE(got, ref, CLF_ENGINE_MAX_TOP_LOGPROBS + 1, 1e-4);
    /* the step's first row: the prompt's last chunk, then one row a step */
    const size_t start = i ? p : (P - 1) / ROWS * ROWS;
    const size_t first = start + 1 > W ? (start + 1 - W) / BS : 0;
    const size_t win = mixed ? f.held_w[i] : f.held[i];
    ck_assert_msg(win == p / BS - first + 1, "%s, position %zu: %zu blocks of the window's pool held, expected %zu",
                  windowed[_i].name, p, win, p / BS - first + 1);
    if (mixed)
      ck_assert_msg(f.held[i] == p / BS + 1, "%s, position %zu: %zu blocks of the full layers held, expected %zu",
                    windowed[_i].name, p, f.held[i], p / BS + 1);
    else
      ck_assert_uint_eq(f.held_w[i], 0);
    most = win > most ? win : most;
  }
  ck_assert_uint_eq(most, windowed[_i].most);
  ck_assert_uint_eq(blocks_used(e), 0);
  ck_assert_uint_eq(window_blocks_used(e), 0);
  clf_engine_destroy(e);
  clf_array_free(&ids), clf_array_free(&logits), clf_array_free(&run[0]);
}
END_TEST

/* ---- many sequences in a small pool ---- */

typedef struct out {
  int64_t tok[MAXTOK];
  size_t n, cached;
  int done, why;
} out;

static int on_tok(void *u, uint64_t id, int64_t t) {
  out *o = u;
  (void)id;
  ck_assert_uint_lt(o->n, MAXTOK);
  o->tok[o->n++] = t;
  return 0;
}

static void on_done(void *u, uint64_t id, const clf_sequence_end *end) {
  out *o = u;
  (void)id;
  o->why = (int)end->why, o->cached = end->cached_tokens;
  o->done++;
}

static void submit(clf_engine *e, const int64_t *ids, size_t n, const clf_generate_options *o, out *res) {
  memset(res, 0, sizeof *res);
  const clf_engine_request r = {ids, n, o, 0, on_tok, on_done, res};
  TH_OK(clf_engine_submit(e, &r, NULL));
}

/* The copies of one request: copy (id - first) writes to slot[that]. */
typedef struct copies {
  uint64_t first;
  out slot[3];
} copies;
static int on_tok_copy(void *u, uint64_t id, int64_t t) {
  copies *c = u;
  ck_assert_uint_lt(id - c->first, 3);
  return on_tok(&c->slot[id - c->first], id, t);
}
static void on_done_copy(void *u, uint64_t id, const clf_sequence_end *end) {
  copies *c = u;
  ck_assert_uint_lt(id - c->first, 3);
  on_done(&c->slot[id - c->first], id, end);
}

/* The tokens clf_model_generate gives for the prompt alone. */
static void expect_alone(clf_model *m, const int64_t *ids, size_t n, const clf_generate_options *o, const out *got,
                         const char *what) {
  int64_t ones[MAXTOK];
  for (size_t i = 0; i < n; i++) ones[i] = 1;
  clf_array in = {"input_ids", CLF_I64, 2, {1, n}, (void *)ids}, mask = {"attention_mask", CLF_I64, 2, {1, n}, ones};
  clf_array seqs;
  TH_OK(clf_model_generate(m, &in, &mask, o, &seqs));
  const size_t k = seqs.shape[1] - n;
  ck_assert_msg(got->done == 1 && got->why == CLF_FINISH_LENGTH, "%s: on_done %d times, why %d", what, got->done,
                got->why);
  ck_assert_msg(got->n == k, "%s: %zu tokens, alone %zu", what, got->n, k);
  for (size_t i = 0; i < k; i++)
    ck_assert_msg(got->tok[i] == ((int64_t *)seqs.data)[n + i], "%s: token %zu is %lld, alone %lld", what, i,
                  (long long)got->tok[i], (long long)((int64_t *)seqs.data)[n + i]);
  clf_array_free(&seqs);
}

static const char *const small_pool[] = {"phi3", "mistral"};

/* A pool of 8 blocks of 2 positions: each sequence reaches 22 or 26
 * positions (11 or 13 blocks whole, more than the pool: refused before
 * windows gave blocks back), and holds at most 5 at once (the window's 4
 * positions before a step's 5 rows).  Four short prompts decoding
 * together need 3 blocks each, 12 > 8, so some are preempted and
 * recomputed; every sequence gives the tokens it gives alone, and the
 * pool ends empty.  A pool of 4 blocks cannot hold the 5 and refuses. */
START_TEST(window_small_pool) {
  char dir[1024];
  fixture_dir(small_pool[_i], dir, sizeof dir);
  clf_model *m = get_model(dir);
  clf_engine *e = engine(m, 8);
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 20;
  o.eos_token_ids = no_eos, o.n_eos_token_ids = 1;
  int64_t p[6][12];
  const size_t len[6] = {2, 2, 2, 2, 6, 6};
  out res[6];
  for (size_t s = 0; s < 6; s++) {
    for (size_t i = 0; i < len[s]; i++) p[s][i] = (int64_t)((s * 13 + i * 7 + 1) % 89 + 1);
    submit(e, p[s], len[s], &o, &res[s]);
  }
  TH_OK(clf_engine_run(e));
  clf_engine_stats st;
  TH_OK(clf_engine_stats_get(e, &st));
  ck_assert_uint_eq(st.blocks, 8);
  for (size_t s = 0; s < 6; s++) ck_assert_uint_gt((len[s] + o.max_new_tokens + BS - 1) / BS, st.blocks);
  ck_assert_msg(st.preemptions > 0, "no preemption: four sequences of 3 blocks each fit in %zu", st.blocks);
  for (size_t s = 0; s < 6; s++) expect_alone(m, p[s], len[s], &o, &res[s], "a windowed sequence in a small pool");
  ck_assert_uint_eq(blocks_used(e), 0);
  clf_engine_destroy(e);

  e = engine(m, 4);
  const clf_engine_request r = {p[0], 2, &o, 0, on_tok, on_done, &res[0]};
  ck_assert_int_eq(clf_engine_submit(e, &r, NULL), CLF_E_INVALID_ARG);
  ck_assert_msg(strstr(clf_last_error(NULL), "needs 5 blocks at once, more than the pool's 4") != NULL, "%s",
                clf_last_error(NULL));
  clf_engine_destroy(e);
}
END_TEST

/* Prefix reuse and copies on windowed models (Phi-3, window 5; Gemma 3
 * and Qwen3, window 4 in all layers but one; blocks of 2): a prompt run
 * before is found whole (4 blocks, 8 positions: its first blocks, released
 * by the window, stayed in the prefix table, and a mixed model's windowed
 * layers kept the window's blocks before position 8), a prompt shared
 * while its first holder runs on past it stays the second holder's, and
 * three sampled copies sharing their prompt's blocks each give what they
 * give alone with seed + i. */
static const char *const prefix_models[] = {"phi3", "gemma3", "qwen3_window"};

START_TEST(window_prefix_and_copies) {
  char dir[1024];
  fixture_dir(prefix_models[_i], dir, sizeof dir);
  clf_model *m = get_model(dir);
  clf_engine *e = engine(m, 0);
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 12;
  o.eos_token_ids = no_eos, o.n_eos_token_ids = 1;
  int64_t a[10], b[10];
  for (size_t i = 0; i < 10; i++) a[i] = (int64_t)((i * 11 + 5) % 89 + 1), b[i] = (int64_t)((i * 17 + 3) % 89 + 1);
  out r1, r2, r3, r4;
  copies c = {0};
  submit(e, a, 10, &o, &r1);
  TH_OK(clf_engine_run(e));
  submit(e, a, 10, &o, &r2);
  TH_OK(clf_engine_run(e));
  ck_assert_uint_eq(r1.cached, 0);
  ck_assert_uint_eq(r2.cached, 8);
  expect_alone(m, a, 10, &o, &r1, "the first prompt");
  expect_alone(m, a, 10, &o, &r2, "the same prompt from the prefix cache");
  /* b's prompt computed (two chunks of 5), then the same prompt while the
   * first goes on: the second takes blocks the first's window gives back */
  submit(e, b, 10, &o, &r3);
  TH_OK(clf_engine_step(e, NULL));
  TH_OK(clf_engine_step(e, NULL));
  submit(e, b, 10, &o, &r4);
  TH_OK(clf_engine_run(e));
  ck_assert_uint_eq(r4.cached, 8);
  expect_alone(m, b, 10, &o, &r3, "the first holder of a shared prefix");
  expect_alone(m, b, 10, &o, &r4, "the second holder of a shared prefix");
  ck_assert_uint_eq(blocks_used(e), 0);
  /* copies */
  clf_generate_options so = o;
  so.do_sample = 1, so.seed = 41;
  int64_t q[9] = {3, 14, 15, 92, 65, 35, 89, 79, 32};
  const clf_engine_request r = {q, 9, &so, 0, on_tok_copy, on_done_copy, &c, 3};
  TH_OK(clf_engine_submit(e, &r, &c.first));
  TH_OK(clf_engine_run(e));
  for (size_t i = 0; i < 3; i++) {
    clf_generate_options alone_o = so;
    alone_o.seed = so.seed + i;
    expect_alone(m, q, 9, &alone_o, &c.slot[i], "a sampled copy of a windowed prompt");
  }
  ck_assert_uint_eq(blocks_used(e), 0);
  clf_engine_destroy(e);
}
END_TEST

/* A model mixing full and windowed layers: kv_bytes of 80 blocks of the
 * full layers and 30 of the windowed ones (6 sequences x the 5 a window of
 * 4 holds at most, blocks of 2, steps of 5 rows) makes those two pools.
 * Six sequences of 26 positions (13 blocks each, 78 in all) then run
 * without a preemption, to the tokens they give alone: with every layer
 * keeping every block, the same bytes would hold 38 blocks. */
static const char *const mixed_models[] = {"gemma3", "qwen3_window"};

START_TEST(window_mixed_pools) {
  char dir[1024];
  fixture_dir(mixed_models[_i], dir, sizeof dir);
  clf_model *m = get_model(dir);
  clf_engine_options eo;
  clf_engine_options_init(&eo);
  eo.block_size = BS, eo.max_step_rows = ROWS, eo.max_sequences = 6, eo.kv_bytes = 1 << 20;
  clf_engine *e;
  clf_engine_stats st;
  TH_OK(clf_engine_create(m, &eo, &e));
  TH_OK(clf_engine_stats_get(e, &st));
  clf_engine_destroy(e);
  ck_assert_uint_gt(st.window_block_bytes, 0);
  eo.kv_bytes = 80 * st.block_bytes + 30 * st.window_block_bytes;
  ck_assert_uint_lt(eo.kv_bytes / (st.block_bytes + st.window_block_bytes), 78);
  TH_OK(clf_engine_create(m, &eo, &e));
  TH_OK(clf_engine_stats_get(e, &st));
  ck_assert_uint_eq(st.blocks, 80);
  ck_assert_uint_eq(st.window_blocks, 30);
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 20;
  o.eos_token_ids = no_eos, o.n_eos_token_ids = 1;
  int64_t p[6][6];
  out res[6];
  for (size_t s = 0; s < 6; s++) {
    for (size_t i = 0; i < 6; i++) p[s][i] = (int64_t)((s * 13 + i * 7 + 1) % 89 + 1);
    submit(e, p[s], 6, &o, &res[s]);
  }
  size_t pending = 1, most_w = 0;
  while (pending) {
    TH_OK(clf_engine_step(e, &pending));
    const size_t u = window_blocks_used(e);
    most_w = u > most_w ? u : most_w;
  }
  TH_OK(clf_engine_stats_get(e, &st));
  ck_assert_uint_eq(st.preemptions, 0);
  for (size_t s = 0; s < 6; s++) expect_alone(m, p[s], 6, &o, &res[s], "a sequence of a mixed model");
  ck_assert_uint_eq(blocks_used(e), 0);
  ck_assert_uint_eq(window_blocks_used(e), 0);
  clf_engine_destroy(e);
}
END_TEST

/* A prefix hit on a mixed model needs the windowed layers' blocks of the
 * window before it.  With one sequence at a time, the windowed pool has
 * the 5 blocks one window holds; a second prompt's run takes them all
 * again, so the first prompt, asked again, finds its full layers' blocks
 * (60 in their pool) but not its window's: nothing is reused (the prefix is
 * cut back to none) and the tokens are those alone. */
START_TEST(window_mixed_prefix_cut) {
  char dir[1024];
  fixture_dir(mixed_models[_i], dir, sizeof dir);
  clf_model *m = get_model(dir);
  clf_engine_options eo;
  clf_engine_options_init(&eo);
  eo.block_size = BS, eo.max_step_rows = ROWS, eo.max_sequences = 1, eo.kv_bytes = 1 << 20;
  clf_engine *e;
  clf_engine_stats st;
  TH_OK(clf_engine_create(m, &eo, &e));
  TH_OK(clf_engine_stats_get(e, &st));
  clf_engine_destroy(e);
  eo.kv_bytes = 60 * st.block_bytes + 5 * st.window_block_bytes;
  TH_OK(clf_engine_create(m, &eo, &e));
  TH_OK(clf_engine_stats_get(e, &st));
  ck_assert_uint_eq(st.blocks, 60);
  ck_assert_uint_eq(st.window_blocks, 5);
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 12;
  o.eos_token_ids = no_eos, o.n_eos_token_ids = 1;
  int64_t a[10], c[10];
  for (size_t i = 0; i < 10; i++) a[i] = (int64_t)((i * 11 + 5) % 89 + 1), c[i] = (int64_t)((i * 19 + 7) % 89 + 1);
  out r1, r2, r3;
  submit(e, a, 10, &o, &r1);
  TH_OK(clf_engine_run(e));
  submit(e, c, 10, &o, &r2);
  TH_OK(clf_engine_run(e));
  submit(e, a, 10, &o, &r3);
  TH_OK(clf_engine_run(e));
  ck_assert_uint_eq(r3.cached, 0);
  expect_alone(m, a, 10, &o, &r1, "the first prompt");
  expect_alone(m, c, 10, &o, &r2, "the prompt between");
  expect_alone(m, a, 10, &o, &r3, "the first prompt again, its window's blocks gone");
  ck_assert_uint_eq(blocks_used(e), 0);
  ck_assert_uint_eq(window_blocks_used(e), 0);
  clf_engine_destroy(e);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("engine_window");
  TCase *tc = tcase_create("engine_window");
  tcase_set_timeout(tc, 600);
  tcase_add_unchecked_fixture(tc, NULL, free_models);
  tcase_add_loop_test(tc, window_logits_and_blocks, 0, (int)(sizeof windowed / sizeof *windowed));
  tcase_add_loop_test(tc, window_small_pool, 0, (int)(sizeof small_pool / sizeof *small_pool));
  tcase_add_loop_test(tc, window_prefix_and_copies, 0, (int)(sizeof prefix_models / sizeof *prefix_models));
  tcase_add_loop_test(tc, window_mixed_pools, 0, (int)(sizeof mixed_models / sizeof *mixed_models));
  tcase_add_loop_test(tc, window_mixed_prefix_cut, 0, (int)(sizeof mixed_models / sizeof *mixed_models));
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
