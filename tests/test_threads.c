/* test_threads.c - the threading contract (docs/threads-and-faults.md):
 * contexts created, models loaded and run on several threads at once give
 * what one thread gives; a context is used by one thread at a time, any
 * thread; errors without a context are the calling thread's; a tokenizer is
 * read-only once loaded.  Issue 11's defect 7 (two threads creating the
 * process's first contexts crashed) is run in fresh processes of this
 * program (`test_threads --first-contexts N`), since a process enumerates
 * its devices for the first time only once.  tools/tsan.sh runs this suite
 * under ThreadSanitizer.
 */
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture_util.h"
#include "harness.h"

extern char **environ;

#define MAX_THREADS 4

/* ---- what a thread runs (no Check assertion off the main thread: Check's
 * failure longjmps into the main thread's runner) ---- */

/* The outputs a thread compares: BERT's "padded" case (last_hidden_state,
 * pooler_output), GPT-2's "right_padded" (logits), and greedy generation
 * of 4 tokens from GPT-2's "greedy_b1" prompt. */
typedef struct outputs {
  clf_array out[2];
  size_t n_out;
  clf_array seq; /* GPT-2 only */
} outputs;

static void outputs_free(outputs *o) {
  for (size_t i = 0; i < o->n_out; i++) clf_array_free(&o->out[i]);
  if (o->seq.data) clf_array_free(&o->seq);
  memset(o, 0, sizeof *o);
}

/* fixtures()/fixture/file.npy named `name`; 0 on failure (why says). */
static int read_npy(const char *fixture, const char *file, const char *name, clf_array *a, char *why, size_t n) {
  char p[1200];
  snprintf(p, sizeof p, "%s/%s/%s", fixtures(), fixture, file);
  if (clf_npy_read(p, a) != CLF_OK) {
    snprintf(why, n, "%s", clf_last_error(NULL));
    return 0;
  }
  snprintf(a->name, sizeof a->name, "%s", name);
  return 1;
}

/* Runs the case of model m (a "bert" or "gpt2" fixture, on ctx) into *o:
 * CLF_OK, or the status with why filled. */
static clf_status run_case(clf_context *ctx, clf_model *m, int gpt2, outputs *o, char *why, size_t n) {
  const char *fx = gpt2 ? "gpt2" : "bert", *cs = gpt2 ? "right_padded" : "padded";
  static const char *const bert_out[] = {"last_hidden_state", "pooler_output"}, *const gpt2_out[] = {"logits"};
  clf_array in[3];
  char f[3][128];
  const char *names[3] = {"input_ids", "attention_mask", "token_type_ids"};
  const size_t n_in = gpt2 ? 2 : 3;
  memset(o, 0, sizeof *o);
  for (size_t i = 0; i < n_in; i++) {
    snprintf(f[i], sizeof f[i], "%s.%s.npy", cs, names[i]);
    if (!read_npy(fx, f[i], names[i], &in[i], why, n)) return CLF_E_IO;
  }
  o->n_out = gpt2 ? 1 : 2;
  clf_status st = clf_model_run(m, in, n_in, gpt2 ? gpt2_out : bert_out, o->n_out, o->out);
  if (st != CLF_OK) o->n_out = 0;
  for (size_t i = 0; i < n_in; i++) clf_array_free(&in[i]);
  if (st == CLF_OK && gpt2) {
    clf_array prompt;
    if (!read_npy(fx, "greedy_b1.input_ids.npy", "input_ids", &prompt, why, n)) return CLF_E_IO;
    clf_generate_options g;
    clf_generate_options_init(&g);
    g.max_new_tokens = 4;
    st = clf_model_generate(m, &prompt, NULL, &g, &o->seq);
    clf_array_free(&prompt);
  }
  if (st != CLF_OK) snprintf(why, n, "%s: %s", clf_status_name(st), clf_last_error(ctx));
  return st;
}

/* 1 when every output of a equals b's bit for bit (same device, kernels
 * and inputs: the same operations in the same order); else 0, why says. */
static int same_outputs(const outputs *a, const outputs *b, char *why, size_t n) {
  if (a->n_out != b->n_out) return snprintf(why, n, "%zu outputs, expected %zu", a->n_out, b->n_out), 0;
  for (size_t i = 0; i < a->n_out + 1; i++) {
    const clf_array *x = i < a->n_out ? &a->out[i] : &a->seq, *y = i < a->n_out ? &b->out[i] : &b->seq;
    if (!y->data) continue;
    const size_t bytes = clf_array_numel(y) * clf_dtype_size(y->dtype);
    if (!x->data || clf_array_numel(x) != clf_array_numel(y) || memcmp(x->data, y->data, bytes) != 0)
      return snprintf(why, n, "output %s differs from the single-threaded run", y->name), 0;
  }
  return 1;
}

/* ---- the first contexts of a process (defect 7), in a child process ---- */

typedef struct worker {
  int id, gpt2, rounds;
  pthread_barrier_t *start;
  const outputs *ref; /* NULL: compare nothing (the child process) */
  clf_context *ctx;   /* given: use it; NULL: create one */
  pthread_mutex_t *lock; /* held around each use of a shared ctx/model */
  clf_model *model;      /* given with ctx, or NULL */
  int ok;
  char why[1200];
} worker;

/* Creates a context (unless given), loads the model (unless given), runs
 * it `rounds` times, compares each with the reference. */
static void *work(void *arg) {
  worker *w = arg;
  char dir[1024];
  outputs o;
  if (w->start) pthread_barrier_wait(w->start);
  clf_context *ctx = w->ctx;
  clf_model *m = w->model;
  clf_status st = ctx ? CLF_OK : clf_context_create(NULL, &ctx);
  if (st != CLF_OK) {
    snprintf(w->why, sizeof w->why, "thread %d: clf_context_create: %s: %s", w->id, clf_status_name(st),
             clf_last_error(NULL));
    return NULL;
  }
  snprintf(dir, sizeof dir, "%s/%s", fixtures(), w->gpt2 ? "gpt2" : "bert");
  if (!m && (st = clf_model_load(ctx, dir, &m)) != CLF_OK)
    snprintf(w->why, sizeof w->why, "thread %d: clf_model_load: %s", w->id, clf_last_error(ctx));
  for (int r = 0; st == CLF_OK && r < w->rounds; r++) {
    if (w->lock) pthread_mutex_lock(w->lock);
    st = run_case(ctx, m, w->gpt2, &o, w->why, sizeof w->why);
    if (w->lock) pthread_mutex_unlock(w->lock);
    if (st == CLF_OK && w->ref && !same_outputs(&o, w->ref, w->why, sizeof w->why)) st = CLF_E_SHAPE;
    outputs_free(&o);
  }
  w->ok = st == CLF_OK;
  if (!w->model) clf_model_destroy(m);
  if (!w->ctx) clf_context_destroy(ctx);
  return NULL;
}

/* Child: n threads create the process's first contexts at once (nothing
 * has listed the devices), load BERT and run it.  Exit 0 when all did. */
static int first_contexts(int n) {
  pthread_t t[MAX_THREADS];
  worker w[MAX_THREADS];
  pthread_barrier_t start;
  if (n < 1 || n > MAX_THREADS) return 2;
  pthread_barrier_init(&start, NULL, (unsigned)n);
  for (int i = 0; i < n; i++) {
    w[i] = (worker){.id = i, .gpt2 = 0, .rounds = 1, .start = &start};
    pthread_create(&t[i], NULL, work, &w[i]);
  }
  int bad = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(t[i], NULL);
    if (!w[i].ok) fprintf(stderr, "first contexts: %s\n", w[i].why), bad = 1;
  }
  pthread_barrier_destroy(&start);
  return bad;
}

/* 10 fresh processes, 2 to 4 threads each, every one creating its first
 * context at once: each process exits 0 (before the fix, 40 of 40 runs of
 * two threads crashed inside PoCL or found no device). */
START_TEST(first_contexts_in_fresh_processes) {
  /* Under AddressSanitizer: LLVM (inside PoCL) gives the thread that first
   * initialises it a signal stack from malloc, and ASan, unmapping a
   * thread's signal stack when the thread ends, aborts on that one.  In the
   * child that thread is a worker, so the child runs without ASan's signal
   * stacks (it only reads ASAN_OPTIONS at start; elsewhere this is unused). */
  const char *asan = getenv("ASAN_OPTIONS");
  char *saved = asan ? strdup(asan) : NULL, opts[1024];
  snprintf(opts, sizeof opts, "%s%suse_sigaltstack=0", asan ? asan : "", asan && *asan ? ":" : "");
  setenv("ASAN_OPTIONS", opts, 1);
  for (int run = 0; run < 10; run++) {
    char n[8];
    snprintf(n, sizeof n, "%d", 2 + run % 3);
    char *argv[] = {"test_threads", "--first-contexts", n, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ);
    ck_assert_msg(rc == 0, "posix_spawn: %s", strerror(rc));
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(!WIFSIGNALED(status), "run %d, %s threads: killed by signal %d (%s)", run, n, WTERMSIG(status),
                  strsignal(WTERMSIG(status)));
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "run %d, %s threads: exit %d (stderr above)",
                  run, n, WEXITSTATUS(status));
  }
  if (saved) setenv("ASAN_OPTIONS", saved, 1);
  else unsetenv("ASAN_OPTIONS");
  free(saved);
}
END_TEST

/* ---- contexts, models and runs on several threads at once ---- */

static outputs ref[2]; /* [0] BERT, [1] GPT-2, run on th_ctx by this thread */

static void make_refs(void) {
  char why[1200];
  for (int g = 0; g < 2; g++) {
    if (ref[g].n_out) continue;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", fixtures(), g ? "gpt2" : "bert");
    ck_assert_msg(run_case(th_ctx, get_model(dir), g, &ref[g], why, sizeof why) == CLF_OK, "%s", why);
  }
}

/* N threads, each with its own context and model (BERT and GPT-2 in turn),
 * started together, 3 forward passes each (and GPT-2's generation): every
 * output equal, bit for bit, to the single-threaded run's. */
static void parallel(int n) {
  make_refs();
  pthread_t t[MAX_THREADS];
  worker w[MAX_THREADS];
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)n);
  for (int i = 0; i < n; i++) {
    w[i] = (worker){.id = i, .gpt2 = i % 2, .rounds = 3, .start = &start, .ref = &ref[i % 2]};
    ck_assert_int_eq(pthread_create(&t[i], NULL, work, &w[i]), 0);
  }
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&start);
  for (int i = 0; i < n; i++) ck_assert_msg(w[i].ok, "%d threads: %s", n, w[i].why);
}

START_TEST(two_threads_own_contexts) { parallel(2); }
END_TEST

START_TEST(four_threads_own_contexts) { parallel(4); }
END_TEST

/* One context and model shared by two threads that take turns (a lock of
 * the caller's around each run): allowed, and the same results. */
START_TEST(shared_context_taking_turns) {
  make_refs();
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/gpt2", fixtures());
  clf_context *ctx;
  clf_model *m;
  TH_OK(clf_context_create(NULL, &ctx));
  ck_assert_int_eq(clf_model_load(ctx, dir, &m), CLF_OK);
  pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_t t[2];
  worker w[2];
  for (int i = 0; i < 2; i++) {
    w[i] = (worker){.id = i, .gpt2 = 1, .rounds = 3, .ref = &ref[1], .ctx = ctx, .lock = &lock, .model = m};
    ck_assert_int_eq(pthread_create(&t[i], NULL, work, &w[i]), 0);
  }
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 2; i++) ck_assert_msg(w[i].ok, "%s", w[i].why);
  clf_model_destroy(m);
  clf_context_destroy(ctx);
}
END_TEST

/* A context created on one thread, used on a second and destroyed on the
 * main one (each after the other: a hand-over). */
static void *create_bert(void *arg) {
  worker *w = arg;
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/bert", fixtures());
  if (clf_context_create(NULL, &w->ctx) == CLF_OK && clf_model_load(w->ctx, dir, &w->model) != CLF_OK)
    snprintf(w->why, sizeof w->why, "%s", clf_last_error(w->ctx));
  return NULL;
}

START_TEST(context_handed_between_threads) {
  make_refs();
  worker w = {.id = 0, .gpt2 = 0, .rounds = 2, .ref = &ref[0]};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, create_bert, &w), 0);
  pthread_join(t, NULL);
  ck_assert_msg(w.model != NULL, "creating on a thread: %s", w.why);
  ck_assert_int_eq(pthread_create(&t, NULL, work, &w), 0);
  pthread_join(t, NULL);
  ck_assert_msg(w.ok, "%s", w.why);
  /* An error recorded on the context by another thread is the context's. */
  clf_array bad = {.name = "input_ids", .dtype = CLF_F32, .ndim = 2, .shape = {1, 1}, .data = (float[]){0}};
  clf_array res;
  const char *out[] = {"last_hidden_state"};
  ck_assert_int_eq(clf_model_run(w.model, &bad, 1, out, 1, &res), CLF_E_DTYPE);
  ck_assert_ptr_nonnull(strstr(clf_last_error(w.ctx), "input_ids"));
  clf_model_destroy(w.model);
  clf_context_destroy(w.ctx);
}
END_TEST

/* Failures with no context (clf_last_error(NULL)) belong to the thread
 * that had them. */
static void *fail_select(void *arg) {
  clf_device_desc d;
  char *msg = arg;
  clf_select_device("other-thread-xyz", &d);
  snprintf(msg, 1024, "%s", clf_last_error(NULL));
  return NULL;
}

START_TEST(errors_without_context_are_per_thread) {
  clf_device_desc d;
  char theirs[1024] = "";
  ck_assert_int_eq(clf_select_device("main-thread-xyz", &d), CLF_E_DEVICE_NOT_FOUND);
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, fail_select, theirs), 0);
  pthread_join(t, NULL);
  ck_assert_ptr_nonnull(strstr(theirs, "other-thread-xyz"));
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "main-thread-xyz"));
  ck_assert_ptr_null(strstr(clf_last_error(NULL), "other-thread-xyz"));
}
END_TEST

/* ---- tokenizers: read-only once loaded ---- */

typedef struct tok_job {
  clf_tokenizer *tok;
  const char *const *texts;
  size_t n_texts;
  int64_t *const *want;
  const size_t *n_want;
  int ok;
} tok_job;

static void *encode_all(void *arg) {
  tok_job *j = arg;
  j->ok = 1;
  for (int round = 0; round < 20; round++)
    for (size_t i = 0; i < j->n_texts; i++) {
      int64_t *ids;
      size_t n;
      if (clf_tokenizer_encode(j->tok, j->texts[i], 1, &ids, &n) != CLF_OK) {
        j->ok = 0;
        continue;
      }
      if (n != j->n_want[i] || memcmp(ids, j->want[i], n * sizeof *ids) != 0) j->ok = 0;
      free(ids);
    }
  return NULL;
}

/* One tokenizer (WordPiece, then byte-level BPE) shared by two threads
 * encoding at once: the ids one thread got alone. */
START_TEST(tokenizer_shared_by_threads) {
  static const char *const texts[] = {"Hello world!", "Café naïve résumé Ångström FAÇADE",
                                      "北京欢迎你 and 東京は日本", "I'm sure they'll say we've done it."};
  enum { NT = sizeof texts / sizeof *texts };
  for (int k = 0; k < 2; k++) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tokenizers/%s", fixtures(), k ? "gpt2" : "bert");
    clf_tokenizer *tok;
    ck_assert_msg(clf_tokenizer_load(dir, &tok) == CLF_OK, "%s", clf_last_error(NULL));
    int64_t *want[NT];
    size_t n_want[NT];
    for (size_t i = 0; i < NT; i++) ck_assert_int_eq(clf_tokenizer_encode(tok, texts[i], 1, &want[i], &n_want[i]), CLF_OK);
    tok_job j[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
      j[i] = (tok_job){tok, texts, NT, want, n_want, 0};
      ck_assert_int_eq(pthread_create(&t[i], NULL, encode_all, &j[i]), 0);
    }
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) ck_assert_msg(j[i].ok, "%s tokenizer, thread %d: ids differ", k ? "gpt2" : "bert", i);
    for (size_t i = 0; i < NT; i++) free(want[i]);
    clf_tokenizer_destroy(tok);
  }
}
END_TEST

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--first-contexts") == 0) return first_contexts(atoi(argv[2]));
  Suite *s = suite_create("threads");
  TCase *tc = tcase_create("threads");
  tcase_add_test(tc, first_contexts_in_fresh_processes);
  tcase_add_test(tc, errors_without_context_are_per_thread);
  tcase_add_test(tc, two_threads_own_contexts);
  tcase_add_test(tc, four_threads_own_contexts);
  tcase_add_test(tc, shared_context_taking_turns);
  tcase_add_test(tc, context_handed_between_threads);
  tcase_add_test(tc, tokenizer_shared_by_threads);
  suite_add_tcase(s, tc);
  int rc = th_run(s);
  for (int g = 0; g < 2; g++) outputs_free(&ref[g]);
  free_models();
  return rc;
}
