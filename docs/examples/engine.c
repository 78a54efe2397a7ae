/* engine.c - the worked example of docs/engine.md: three prompts decoded
 * together by one engine, their text streamed as it comes, one stopped at
 * a stop string, two clients kept apart by isolation keys.  Built and run
 * with the tests (tests/meson.build: `example_engine` on a GGUF fixture).
 *
 *   engine MODEL          (a model directory or a .gguf file)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer.h"

/* One sequence's text, streamed through the tokenizer. */
typedef struct stream {
  const char *name;
  clf_text_stream *text;
  clf_finish_reason why;
  size_t cached; /* prompt positions its prefix had in the cache */
  int done;
} stream;

/* Called on the stepping thread with each new token: the text that became
 * final is printed; non-zero (a stop string seen) ends the sequence. */
static int on_token(void *user, uint64_t id, int64_t token) {
  stream *s = user;
  const char *text;
  size_t len;
  int stopped = 0;
  (void)id;
  if (clf_text_stream_push(s->text, token, &text, &len, &stopped) != CLF_OK) return 1;
  if (len) printf("[%s] %.*s\n", s->name, (int)len, text);
  return stopped;
}

static void on_done(void *user, uint64_t id, const clf_sequence_end *end) {
  stream *s = user;
  (void)id;
  s->why = end->why;
  s->cached = end->cached_tokens;
  s->done = 1;
  if (end->error) fprintf(stderr, "[%s] failed: %s\n", s->name, end->error);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: engine MODEL\n");
    return 2;
  }
  clf_context *ctx = NULL;
  clf_model *m = NULL;
  clf_tokenizer *tok = NULL;
  clf_engine *e = NULL;
  stream s[3] = {{"alice 1"}, {"alice 2"}, {"bob"}};
  int rc = 1;
  if (clf_context_create(NULL, &ctx) != CLF_OK || clf_model_load(ctx, argv[1], &m) != CLF_OK ||
      clf_tokenizer_load(argv[1], &tok) != CLF_OK) {
    fprintf(stderr, "engine: %s\n", clf_last_error(ctx));
    goto out;
  }

  /* The pool: 4 MiB of blocks of 16 positions (0 would take a quarter of
   * the device's memory left after the weights). */
  clf_engine_options eo;
  clf_engine_options_init(&eo);
  eo.kv_bytes = 4u << 20;
  if (clf_engine_create(m, &eo, &e) != CLF_OK) {
    fprintf(stderr, "engine: %s\n", clf_last_error(ctx));
    goto out;
  }

  /* Two clients: alice's two prompts share a system text, and the second
   * reuses the blocks the first filled with it; bob's is the first's text
   * under another key, so it shares nothing with alice's (no one learns
   * from timing what another sent). */
#define SYSTEM "You are a terse assistant. You answer in one short line, without greetings or lists. "
  const char *prompts[3] = {SYSTEM "Say hi.", SYSTEM "Say bye.", SYSTEM "Say hi."};
  const uint64_t keys[3] = {1, 1, 2};
  static const char *const stop[1] = {"\n\n"};
  clf_generate_options go;
  clf_generate_options_init(&go);
  go.max_new_tokens = 12;
  for (int i = 0; i < 3; i++) {
    int64_t *ids = NULL;
    size_t n = 0;
    if (clf_text_stream_create(tok, stop, 1, &s[i].text) != CLF_OK ||
        clf_tokenizer_encode(tok, prompts[i], 1, &ids, &n) != CLF_OK) {
      fprintf(stderr, "engine: %s\n", clf_last_error(NULL));
      free(ids);
      goto out;
    }
    const clf_engine_request r = {ids, n, &go, keys[i], on_token, on_done, &s[i]};
    const clf_status st = clf_engine_submit(e, &r, NULL); /* the ids are copied */
    free(ids);
    /* One step after the first: its prompt's blocks are in the cache when
     * the second comes (sequences join a running engine at any time). */
    if (st != CLF_OK || (i == 0 && clf_engine_step(e, NULL) != CLF_OK)) {
      /* a submission's failure is this thread's; a step's, the context's */
      fprintf(stderr, "engine: %s\n", st != CLF_OK ? clf_last_error(NULL) : clf_last_error(ctx));
      goto out;
    }
  }

  /* Step until every sequence has ended (another thread could submit or
   * cancel meanwhile). */
  if (clf_engine_run(e) != CLF_OK) {
    fprintf(stderr, "engine: %s\n", clf_last_error(ctx));
    goto out;
  }
  rc = 0;
  for (int i = 0; i < 3; i++) {
    printf("[%s] ended: %s, %zu prompt positions from the cache\n", s[i].name,
           s[i].done ? clf_finish_name(s[i].why) : "not at all", s[i].cached);
    if (!s[i].done || s[i].why == CLF_FINISH_ERROR) rc = 1;
  }

  clf_engine_stats st;
  clf_engine_stats_get(e, &st);
  printf("pool: %zu blocks of %zu positions, %zu bytes each; %zu steps of %zu rows in all; %zu prompt positions "
         "reused\n", st.blocks, st.block_size, st.block_bytes, st.steps, st.rows, st.prefix_tokens_reused);
out:
  clf_engine_destroy(e); /* sequences still running would hear CLF_FINISH_CANCELLED */
  for (int i = 0; i < 3; i++) clf_text_stream_destroy(s[i].text);
  clf_tokenizer_destroy(tok);
  clf_model_destroy(m);
  clf_context_destroy(ctx);
  return rc;
}
