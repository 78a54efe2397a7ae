/* test_plan.c - clf_linear's kernel plan (host/ops/linear.c, kept by
 * host/core/plan.c): for every shape it is what clf_linear chose on each
 * call before plans (the same questions asked in the same order, written
 * out again here), it is made once per shape and context and only looked
 * up after (a GPT-2 decode makes none after its first step), it is made
 * again when what it came from changes, and the environment's overrides
 * are read, and a bad one refused, when a context is made. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture_util.h"
#include "harness.h"
#include "ops/ops.h"

static void env_set(const char *name, const char *value) {
  if (value) setenv(name, value, 1);
  else unsetenv(name);
  if (th_ctx) TH_OK(clf__env_reload(th_ctx));
}

/* The choice clf_linear made on every call before plans: its body, and
 * linear_tile's and skinny_kernel's, as they were (self-validation with a
 * say aside: no plan is kept then). */
static void choice_before_plans(clf_context *ctx, clf_dtype wt, int in_out, int aligned, size_t M, size_t K,
                                size_t N, clf__plan *c) {
  memset(c, 0, sizeof *c);
  c->path = CLF__LINEAR_GEMM;
  c->most = clf__skinny_max_rows(ctx, wt, in_out, &c->src);
  if (clf__skinny_fits(ctx, wt, in_out, M, K) && N > 0) {
    const int kq = clf__kq_kind(ctx, wt, in_out, aligned, M, K); /* the k-quants' integer path, first */
    if (kq >= 0) {
      clf__kq_plan(M, kq, clf__skinny_act_pass(ctx), c);
    } else if (clf__skinny_tiles(ctx, in_out, M)) {
      clf_tensor w;
      memset(&w, 0, sizeof w);
      w.dtype = wt, w.offset = aligned ? 0 : 64;
      const int one = M == 1, pair = clf__skinny_pair_runs(ctx, &w, M);
      const int f32 = wt == CLF_F32, f16 = wt == CLF_F16;
      c->path = pair ? CLF__LINEAR_PAIR : CLF__LINEAR_TILE;
      c->act_pass = one && clf__skinny_act_pass(ctx);
      c->tile[0] = one ? 1 : 4;
      c->tile[1] = pair ? 4 : one ? (f32 ? 4 : f16 ? 8 : 1) : 3;
      c->tile[2] = pair ? 1 : one ? (f32 ? 8 : f16 ? 8 : 16) : 4;
    } else {
      size_t mmax = 1;
      while (mmax < M && mmax < CLF__SKINNY_MAX_M) mmax *= 2;
      clf__skinny_group g;
      c->path = CLF__LINEAR_SKINNY;
      c->kind = clf__skinny_kind(ctx, wt, in_out);
      c->mmax = mmax;
      TH_OK(clf__skinny_fit(ctx, wt, in_out, c->kind, mmax, &g));
      c->group[0] = g.got[0], c->group[1] = g.got[1];
    }
  } else if (M >= 1 && M <= c->most) {
    c->why = "K is not a multiple of the skinny kernel's chunk";
  }
}

static int same_str(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

/* Every shape below: the plan equals the choice before plans, field by
 * field; returns how many shapes were compared. */
static size_t compare_shapes(const char *what) {
  static const clf_dtype types[] = {CLF_F32, CLF_F16, CLF_Q8_0, CLF_Q4_0, CLF_Q4_1, CLF_Q4_K};
  static const size_t Ms[] = {0, 1, 2, 3, 5, 8, 9, 17, 64, 65, 300}, Ks[] = {64, 100, 256, 768}, Ns[] = {37, 3072};
  size_t n = 0;
  ck_assert(!clf__variants_failed(th_ctx));
  for (size_t t = 0; t < sizeof types / sizeof *types; t++)
    for (int in_out = 0; in_out < (types[t] == CLF_F32 ? 2 : 1); in_out++)
      for (int aligned = 0; aligned < 2; aligned++)
        for (size_t m = 0; m < sizeof Ms / sizeof *Ms; m++)
          for (size_t k = 0; k < sizeof Ks / sizeof *Ks; k++)
            for (size_t j = 0; j < sizeof Ns / sizeof *Ns; j++, n++) {
              clf__plan want, got;
              const size_t M = Ms[m], K = Ks[k], N = Ns[j];
              choice_before_plans(th_ctx, types[t], in_out, aligned, M, K, N, &want);
              TH_OK(clf__linear_plan(th_ctx, "test", types[t], in_out, aligned, M, K, N, &got));
              ck_assert_msg(got.path == want.path && got.kind == want.kind && got.mmax == want.mmax &&
                                got.group[0] == want.group[0] && got.group[1] == want.group[1] &&
                                got.tile[0] == want.tile[0] && got.tile[1] == want.tile[1] &&
                                got.tile[2] == want.tile[2] && got.most == want.most &&
                                (want.path < CLF__LINEAR_TILE || got.act_pass == want.act_pass) &&
                                same_str(got.src, want.src) && same_str(got.why, want.why),
                            "%s: %s in_out %d aligned %d, M %zu K %zu N %zu: plan path %d kind %d group %zux%zu tile "
                            "%zux%zux%zu pass %d most %zu; before plans path %d kind %d group %zux%zu tile "
                            "%zux%zux%zu pass %d most %zu",
                            what, clf_dtype_name(types[t]), in_out, aligned, M, K, N, got.path, got.kind,
                            got.group[0], got.group[1], got.tile[0], got.tile[1], got.tile[2], got.act_pass,
                            got.most, want.path, want.kind, want.group[0], want.group[1], want.tile[0], want.tile[1],
                            want.tile[2], want.act_pass, want.most);
            }
  return n;
}

static void compare_gpu_class(void) { compare_shapes("GPU class"); }

/* The plan equals the choice before plans for 6 types x layouts x 2
 * alignments x 11 row counts x 4 Ks x 2 Ns (1232 shapes a setting), under
 * the defaults, each of the environment's switches, a profile's Rows
 * line and the GPU class. */
START_TEST(plan_is_the_choice_before_plans) {
  static const struct {
    const char *var, *value;
  } settings[] = {{NULL, NULL},
                  {"CLFORMER_SKINNY_TILE", "1"},
                  {"CLFORMER_SKINNY_TILE", "0"},
                  {"CLFORMER_SKINNY_PAIR", "0"},
                  {"CLFORMER_SKINNY_ACT_PASS", "1"},
                  {"CLFORMER_SKINNY_ROWS", "64"},
                  {"CLFORMER_SKINNY", "4x2"}};
  for (size_t i = 0; i < sizeof settings / sizeof *settings; i++) {
    if (settings[i].var) env_set(settings[i].var, settings[i].value);
    ck_assert_uint_eq(compare_shapes(settings[i].var ? settings[i].var : "defaults"), 1232);
    if (settings[i].var) env_set(settings[i].var, NULL);
  }
  const unsigned rows = 24;
  ck_assert(clf__skinny_rows_tune(th_ctx, CLF_F32, 0, &rows));
  compare_shapes("Rows f32=24");
  ck_assert(clf__skinny_rows_tune(th_ctx, CLF_F32, 0, NULL));
  th_with_context("gpu", NULL, compare_gpu_class);
}
END_TEST

/* Ten calls of three shapes make three plans and look them up thirty
 * times; a tuned work-group set or the environment read again forgets
 * them, and the next call makes its plan again. */
START_TEST(plans_made_once) {
  const size_t K = 64, N = 48, Ms[] = {1, 5, 40};
  float *x = th_rand(40 * K, 1, -1.0f, 1.0f), *w = th_rand(N * K, 2, -1.0f, 1.0f);
  clf_tensor *tw = th_tensor(CLF_F32, 2, TH_SHAPE(N, K), w);
  clf_tensor *tx[3], *ty[3];
  for (int i = 0; i < 3; i++)
    tx[i] = th_tensor(CLF_F32, 2, TH_SHAPE(Ms[i], K), x), ty[i] = th_empty(CLF_F32, 2, TH_SHAPE(Ms[i], N));
  clf__plans_forget(th_ctx);
  clf__plan_stats s0, s1;
  clf__plan_stats_get(th_ctx, &s0);
  for (int r = 0; r < 10; r++)
    for (int i = 0; i < 3; i++)
      TH_OK(clf_linear(th_ctx, tx[i], tw, CLF_WEIGHT_OUT_IN, NULL, CLF_ACT_NONE, ty[i], NULL));
  clf__plan_stats_get(th_ctx, &s1);
  ck_assert_uint_eq(s1.made - s0.made, 3);
  ck_assert_uint_eq(s1.lookups - s0.lookups, 30);
  const unsigned g[2] = {1, 8};
  ck_assert(clf__skinny_tune(th_ctx, CLF_F32, g)); /* a tuning search's candidate */
  TH_OK(clf_linear(th_ctx, tx[0], tw, CLF_WEIGHT_OUT_IN, NULL, CLF_ACT_NONE, ty[0], NULL));
  ck_assert(clf__skinny_tune(th_ctx, CLF_F32, NULL));
  TH_OK(clf__env_reload(th_ctx));
  TH_OK(clf_linear(th_ctx, tx[0], tw, CLF_WEIGHT_OUT_IN, NULL, CLF_ACT_NONE, ty[0], NULL));
  clf__plan_stats_get(th_ctx, &s0);
  ck_assert_uint_eq(s0.made - s1.made, 2);
  ck_assert_uint_eq(s0.forgotten - s1.forgotten, 3);
  for (int i = 0; i < 3; i++) clf_tensor_destroy(tx[i]), clf_tensor_destroy(ty[i]);
  clf_tensor_destroy(tw);
  free(x), free(w);
}
END_TEST

/* GPT-2 decoding (the tiny fixture, 2 rows, 12 new tokens): the first step
 * and the prompt make the plans; every later step looks its layers' plans
 * up (4 linear layers a block, 2 blocks, and the head: at least 9 a step)
 * and makes none. */
typedef struct {
  size_t tokens;
  clf__plan_stats at2;
} decode_watch;

static int on_token(void *user, size_t row, int64_t token) {
  decode_watch *d = user;
  (void)token;
  if (row == 0 && ++d->tokens == 2) clf__plan_stats_get(th_ctx, &d->at2);
  return 0;
}

START_TEST(gpt2_decode_makes_no_plans) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/gpt2", fixtures());
  clf_model *m = get_model(dir);
  static int64_t ids[6] = {5, 17, 99, 40, 41, 42};
  clf_array in = {.name = "input_ids", .dtype = CLF_I64, .ndim = 2, .shape = {2, 3}, .data = ids}, seq;
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 12;
  decode_watch d = {0};
  o.on_token = on_token;
  o.user = &d;
  TH_OK(clf_model_generate(m, &in, NULL, &o, &seq));
  clf__plan_stats end;
  clf__plan_stats_get(th_ctx, &end);
  ck_assert_uint_eq(d.tokens, 12);
  ck_assert_uint_eq(end.made, d.at2.made);
  ck_assert_uint_eq(end.forgotten, d.at2.forgotten);
  ck_assert_uint_ge(end.lookups - d.at2.lookups, 10 * 9);
  fprintf(stderr, "note: GPT-2 decode, tokens 3 to 12: %lu plan look-ups, %lu made\n", end.lookups - d.at2.lookups,
          end.made - d.at2.made);
  clf_array_free(&seq);
}
END_TEST

/* A value the library does not know refuses the context, naming the
 * variable and the value; the variable unset, the context is made. */
START_TEST(bad_override_refused) {
  static const char *const bad[][2] = {
      {"CLFORMER_SKINNY_PAIR", "2"},      {"CLFORMER_SKINNY_TILE", "yes"}, {"CLFORMER_SKINNY_ACT_PASS", "on"},
      {"CLFORMER_SKINNY", "3x4"},         {"CLFORMER_SKINNY_T", "32"},     {"CLFORMER_SKINNY_ROWS", "4"},
      {"CLFORMER_ATTN_FUSED", "gpu"},     {"CLFORMER_ATTN_SHORT", "2"},    {"CLFORMER_ATTN_WG", "48"},
      {"CLFORMER_PROFILE_CLOCK", "sundial"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    clf_context *ctx = NULL;
    setenv(bad[i][0], bad[i][1], 1);
    const clf_status st = clf_context_create(NULL, &ctx);
    unsetenv(bad[i][0]);
    char quoted[64];
    snprintf(quoted, sizeof quoted, "%s=\"%s\"", bad[i][0], bad[i][1]);
    ck_assert_msg(st == CLF_E_INVALID_ARG && !ctx && strstr(clf_last_error(NULL), quoted), "%s: %s, %s", quoted,
                  clf_status_name(st), clf_last_error(NULL));
  }
  setenv("CLFORMER_SKINNY_PAIR", "1", 1);
  clf_context *ctx = NULL;
  TH_OK(clf_context_create(NULL, &ctx));
  unsetenv("CLFORMER_SKINNY_PAIR");
  ck_assert_int_eq(ctx->env.skinny_pair, 1);
  clf_context_destroy(ctx);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("plan");
  TCase *c = tcase_create("plan");
  tcase_set_timeout(c, 0);
  tcase_add_unchecked_fixture(c, NULL, free_models);
  tcase_add_test(c, bad_override_refused);
  tcase_add_test(c, plans_made_once);
  tcase_add_test(c, plan_is_the_choice_before_plans);
  tcase_add_test(c, gpt2_decode_makes_no_plans);
  suite_add_tcase(s, c);
  return s;
}

int main(void) { return th_run(suite()); }
