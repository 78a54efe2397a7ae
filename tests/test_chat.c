/* test_chat.c - conversations (clf_chat) and streamed text (clf_text_stream).
 *
 * The reference for a turn is clf_model_generate on the same prompt: the
 * conversation rendered with add_generation_prompt (the renderer is checked
 * against transformers in test_chat_template) and tokenized without special
 * tokens, decoded greedily from a fresh cache.  A turn that reuses the
 * cached tokens of the turns before must give the same tokens, which
 * test_llama's GGUF cases in turn check against transformers.  The model is
 * tests/fixtures/gguf_models/smollm_like (SmolLM2-Instruct's template and
 * ChatML specials, Q4_1 layers).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer.h"
#include "fixture_util.h"
#include "harness.h"

static char model_path[1024];
static clf_model *m, *ref; /* ref: the reference's own, whose generate() leaves m's caches alone */
static clf_tokenizer *tok;

static void setup(void) {
  snprintf(model_path, sizeof model_path, "%s/gguf_models/smollm_like/model.gguf", fixtures());
  TH_OK(clf_model_load(th_ctx, model_path, &m));
  TH_OK(clf_model_load(th_ctx, model_path, &ref));
  ck_assert_int_eq(clf_tokenizer_load(model_path, &tok), CLF_OK);
}

static void teardown(void) {
  clf_tokenizer_destroy(tok);
  clf_model_destroy(m);
  clf_model_destroy(ref);
  tok = NULL, m = NULL, ref = NULL;
}

/* ---- clf_text_stream ---- */

typedef struct collected {
  char text[4096];
  size_t len, pieces;
} collected;

static void add_piece(collected *c, const char *text, size_t len) {
  ck_assert_uint_lt(c->len + len, sizeof c->text);
  memcpy(c->text + c->len, text, len);
  c->len += len, c->pieces += len > 0;
  c->text[c->len] = '\0';
}

/* The pieces given out, joined, are the decoding of all the tokens, cut
 * before the first stop string; tokens after it are ignored. */
static void stream_case(const char *text, const char *stop) {
  int64_t *ids = NULL;
  size_t n = 0;
  ck_assert_int_eq(clf_tokenizer_encode(tok, text, 0, &ids, &n), CLF_OK);
  char *whole = NULL;
  ck_assert_int_eq(clf_tokenizer_decode(tok, ids, n, 1, &whole), CLF_OK);
  clf_text_stream *s = NULL;
  ck_assert_int_eq(clf_text_stream_create(tok, stop ? &stop : NULL, stop ? 1 : 0, &s), CLF_OK);
  collected got = {0};
  int stopped = 0;
  for (size_t i = 0; i < n; i++) {
    const char *piece;
    size_t len;
    ck_assert_int_eq(clf_text_stream_push(s, ids[i], &piece, &len, &stopped), CLF_OK);
    add_piece(&got, piece, len);
    /* what was given out never changes: it is a prefix of the whole */
    ck_assert_msg(!strncmp(whole, got.text, got.len) || stopped, "gave \"%s\", the text is \"%s\"", got.text, whole);
  }
  const char *rest;
  size_t len;
  ck_assert_int_eq(clf_text_stream_finish(s, &rest, &len), CLF_OK);
  add_piece(&got, rest, len);
  const char *cut = stop ? strstr(whole, stop) : NULL;
  const size_t want = cut ? (size_t)(cut - whole) : strlen(whole);
  ck_assert_int_eq(stopped, cut != NULL);
  ck_assert_int_eq(clf_text_stream_stopped(s), cut != NULL);
  ck_assert_uint_eq(got.len, want);
  ck_assert_msg(!strncmp(got.text, whole, want), "streamed \"%s\", decoded \"%s\"", got.text, whole);
  ck_assert_str_eq(clf_text_stream_text(s, NULL), got.text);
  ck_assert_uint_gt(got.pieces, n > 4 ? 1 : 0); /* it streamed: more than one piece */
  clf_text_stream_destroy(s);
  free(whole);
  free(ids);
}

START_TEST(text_stream_joins_to_the_decoding) {
  stream_case("hello there! this is the theater in the thin tin town.", NULL);
  stream_case("caf\xC3\xA9 na\xC3\xAFve \xE2\x82\xAC 5, then   spaces  and\nlines", NULL);
  stream_case("the cat sat on the mat, hello world", "hello");
  stream_case("the cat sat on the mat", "at on");
  stream_case("the cat sat on the mat", "never there");
}
END_TEST

START_TEST(text_stream_refusals) {
  clf_text_stream *s = (clf_text_stream *)1;
  const char *empty = "";
  ck_assert_int_eq(clf_text_stream_create(NULL, NULL, 0, &s), CLF_E_INVALID_ARG);
  ck_assert_ptr_null(s);
  ck_assert_int_eq(clf_text_stream_create(tok, &empty, 1, &s), CLF_E_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "empty"));
  ck_assert_int_eq(clf_text_stream_create(tok, NULL, 2, &s), CLF_E_INVALID_ARG);
  ck_assert_int_eq(clf_text_stream_create(tok, NULL, 0, NULL), CLF_E_INVALID_ARG);
  clf_text_stream_destroy(NULL);
}
END_TEST

/* ---- clf_chat ---- */

/* The reference: the conversation's prompt, as clf_chat renders it,
 * decoded greedily by clf_model_generate from a fresh cache; *reply_ids
 * the new tokens (malloc'd). */
static void reference_turn(const clf_chat_message *msgs, size_t n_msgs, size_t max_new, int64_t **reply_ids,
                           size_t *n_reply) {
  clf_chat_template *t = NULL;
  ck_assert_int_eq(clf_tokenizer_chat_template(tok, &t), CLF_OK);
  char *text = NULL;
  ck_assert_int_eq(clf_chat_template_render(t, msgs, n_msgs, 1, &text), CLF_OK);
  int64_t *ids = NULL;
  size_t n = 0;
  ck_assert_int_eq(clf_tokenizer_encode(tok, text, 0, &ids, &n), CLF_OK);
  clf_array in = {"input_ids", CLF_I64, 2, {1, n}, ids}, seq = {0};
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = max_new;
  o.do_sample = CLF_GENERATE_OFF;
  TH_OK(clf_model_generate(ref, &in, NULL, &o, &seq));
  *n_reply = seq.shape[1] - n;
  *reply_ids = malloc(*n_reply * sizeof **reply_ids + 1);
  memcpy(*reply_ids, (int64_t *)seq.data + n, *n_reply * sizeof **reply_ids);
  clf_array_free(&seq);
  free(ids);
  free(text);
  clf_chat_template_destroy(t);
}

/* A reply's text as the stream would give it for these tokens. */
static char *reply_text(const int64_t *ids, size_t n) {
  char *text = NULL;
  ck_assert_int_eq(clf_tokenizer_decode(tok, ids, n, 1, &text), CLF_OK);
  return text;
}

static int collect(void *user, const char *text, size_t len) {
  add_piece(user, text, len);
  return 0;
}

/* One turn of conversation c, checked against the reference on the same
 * messages (msgs, n_msgs: the conversation so far, the new user message
 * last); the reply joins msgs as the assistant's. */
static clf_chat_turn checked_turn(clf_chat *c, clf_chat_message *msgs, size_t *n_msgs, char **replies,
                                  size_t max_new) {
  int64_t *want_ids = NULL;
  size_t n_want = 0;
  reference_turn(msgs, *n_msgs, max_new, &want_ids, &n_want);
  char *want = reply_text(want_ids, n_want);
  clf_chat_options o;
  clf_chat_options_init(&o);
  o.generate.max_new_tokens = max_new;
  o.generate.do_sample = CLF_GENERATE_OFF;
  collected streamed = {0};
  o.on_text = collect, o.user = &streamed;
  char *reply = NULL;
  clf_chat_turn info;
  TH_OK(clf_chat_respond(c, &o, &reply, &info));
  ck_assert_str_eq(reply, want);
  ck_assert_str_eq(streamed.text, want);
  ck_assert_uint_eq(info.new_tokens, n_want);
  msgs[*n_msgs] = (clf_chat_message){"assistant", reply};
  replies[(*n_msgs)++] = reply;
  ck_assert_uint_eq(clf_chat_messages(c), *n_msgs);
  free(want);
  free(want_ids);
  return info;
}

START_TEST(chat_turns_reuse_the_cache) {
  clf_chat *c = NULL;
  TH_OK(clf_chat_create(m, tok, NULL, &c));
  clf_chat_message msgs[16];
  char *replies[16] = {0};
  size_t n = 0;
  static const char *const user[] = {"hello there", "what is the cat doing on the mat?", "and then?"};
  TH_OK(clf_chat_add(c, "system", "you are terse."));
  msgs[n++] = (clf_chat_message){"system", "you are terse."};
  clf_chat_turn first = {0};
  for (int t = 0; t < 3; t++) {
    TH_OK(clf_chat_add(c, "user", user[t]));
    msgs[n++] = (clf_chat_message){"user", user[t]};
    const clf_chat_turn info = checked_turn(c, msgs, &n, replies, 12);
    if (t == 0) {
      first = info;
      ck_assert_uint_eq(info.reused_tokens, 0);
    } else {
      /* everything before the last reply, at least, came from the cache */
      ck_assert_uint_ge(info.reused_tokens, first.prompt_tokens);
      ck_assert_uint_lt(info.reused_tokens, info.prompt_tokens);
    }
  }
  /* another generate() on the model takes the caches: the next turn feeds
   * the whole prompt again, and still answers the same */
  int64_t two[2] = {1, 2};
  clf_array in = {"input_ids", CLF_I64, 2, {1, 2}, two}, seq = {0};
  clf_generate_options go;
  clf_generate_options_init(&go);
  go.max_new_tokens = 2;
  TH_OK(clf_model_generate(m, &in, NULL, &go, &seq));
  clf_array_free(&seq);
  TH_OK(clf_chat_add(c, "user", "one more"));
  msgs[n++] = (clf_chat_message){"user", "one more"};
  const clf_chat_turn info = checked_turn(c, msgs, &n, replies, 12);
  ck_assert_uint_eq(info.reused_tokens, 0);
  for (size_t i = 0; i < n; i++) free(replies[i]);
  clf_chat_destroy(c);
}
END_TEST

/* A conversation given again from its start (a stateless server's request)
 * reuses the tokens the last one left; clear forgets only the messages. */
START_TEST(chat_clear_keeps_the_cache) {
  clf_chat *c = NULL;
  TH_OK(clf_chat_create(m, tok, NULL, &c));
  clf_chat_message msgs[8];
  char *replies[8] = {0};
  size_t n = 0;
  TH_OK(clf_chat_add(c, "user", "hello there"));
  msgs[n++] = (clf_chat_message){"user", "hello there"};
  checked_turn(c, msgs, &n, replies, 8);
  clf_chat_clear(c);
  ck_assert_uint_eq(clf_chat_messages(c), 0);
  for (size_t i = 0; i < n; i++) TH_OK(clf_chat_add(c, msgs[i].role, msgs[i].content));
  TH_OK(clf_chat_add(c, "user", "go on"));
  msgs[n++] = (clf_chat_message){"user", "go on"};
  const clf_chat_turn info = checked_turn(c, msgs, &n, replies, 8);
  ck_assert_uint_gt(info.reused_tokens, 0);
  clf_chat_pop(c);
  ck_assert_uint_eq(clf_chat_messages(c), n - 1);
  for (size_t i = 0; i < n; i++) free(replies[i]);
  clf_chat_destroy(c);
}
END_TEST

/* Stop strings end the reply before them; on_text may end it. */
static int stop_after_first(void *user, const char *text, size_t len) {
  add_piece(user, text, len);
  return 1;
}

START_TEST(chat_stop_and_streaming_end) {
  clf_chat_message msgs[2] = {{"user", "hello there"}};
  int64_t *ids = NULL;
  size_t k = 0;
  reference_turn(msgs, 1, 16, &ids, &k);
  char *want = reply_text(ids, k);
  ck_assert_uint_gt(strlen(want), 4);
  char stop[3] = {want[2], want[3], 0}; /* two bytes from inside the reply */
  const char *stops[1] = {stop};
  clf_chat *c = NULL;
  TH_OK(clf_chat_create(m, tok, NULL, &c));
  TH_OK(clf_chat_add(c, "user", "hello there"));
  clf_chat_options o;
  clf_chat_options_init(&o);
  o.generate.max_new_tokens = 16, o.generate.do_sample = CLF_GENERATE_OFF;
  o.stop = stops, o.n_stop = 1;
  char *reply = NULL;
  clf_chat_turn info;
  TH_OK(clf_chat_respond(c, &o, &reply, &info));
  ck_assert_uint_eq(strlen(reply), (size_t)(strstr(want, stop) - want));
  ck_assert(!strncmp(reply, want, strlen(reply)));
  ck_assert_int_eq(info.finished, 1);
  free(reply);
  clf_chat_pop(c);
  o.n_stop = 0;
  collected got = {0};
  o.on_text = stop_after_first, o.user = &got;
  TH_OK(clf_chat_respond(c, &o, &reply, &info));
  ck_assert_str_eq(reply, got.text);
  ck_assert_uint_lt(info.new_tokens, k);
  free(reply);
  free(want);
  free(ids);
  clf_chat_destroy(c);
}
END_TEST

START_TEST(chat_refusals) {
  clf_chat *c = NULL;
  ck_assert_int_eq(clf_chat_create(NULL, tok, NULL, &c), CLF_E_INVALID_ARG);
  ck_assert_int_eq(clf_chat_create(m, NULL, NULL, &c), CLF_E_INVALID_ARG);
  ck_assert_int_eq(clf_chat_create(m, tok, NULL, NULL), CLF_E_INVALID_ARG);
  /* a tokenizer without a template */
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/sampling/tokenizer", fixtures());
  clf_tokenizer *plain = NULL;
  ck_assert_int_eq(clf_tokenizer_load(dir, &plain), CLF_OK);
  ck_assert_int_eq(clf_chat_create(m, plain, NULL, &c), CLF_E_NOT_FOUND);
  ck_assert_ptr_null(c);
  clf_tokenizer_destroy(plain);
  /* an encoder is no language model */
  snprintf(dir, sizeof dir, "%s/bert", fixtures());
  clf_model *bert = NULL;
  TH_OK(clf_model_load(th_ctx, dir, &bert));
  ck_assert_int_eq(clf_chat_create(bert, tok, NULL, &c), CLF_E_UNSUPPORTED);
  clf_model_destroy(bert);
  TH_OK(clf_chat_create(m, tok, NULL, &c));
  ck_assert_int_eq(clf_chat_add(c, "user", NULL), CLF_E_INVALID_ARG);
  TH_OK(clf_chat_add(c, "user", "hello"));
  /* a NUL in a message: refused as the server refuses it (it cut the text) */
  ck_assert_int_eq(clf_chat_add_json(c, "{\"role\": \"user\", \"content\": \"a\\u0000b\"}"), CLF_E_INVALID_ARG);
  ck_assert_msg(strstr(clf_last_error(th_ctx), "messages[1].content contains a NUL character") != NULL, "%s",
                clf_last_error(th_ctx));
  ck_assert_uint_eq(clf_chat_messages(c), 1);
  clf_chat_options o;
  clf_chat_options_init(&o);
  char *reply = NULL;
  /* the template's budget: too small, the turn fails with CLF_E_LIMIT; the default again, it renders */
  clf_template_budget tiny = {5, 0, 0};
  TH_OK(clf_chat_set_template_budget(c, &tiny));
  o.generate.max_new_tokens = 2, o.generate.do_sample = CLF_GENERATE_OFF;
  ck_assert_int_eq(clf_chat_respond(c, &o, &reply, NULL), CLF_E_LIMIT);
  ck_assert_msg(strstr(clf_last_error(th_ctx), "steps budget (5 ") != NULL, "%s", clf_last_error(th_ctx));
  TH_OK(clf_chat_set_template_budget(c, NULL));
  ck_assert_int_eq(clf_chat_set_template_budget(NULL, NULL), CLF_E_INVALID_ARG);
  o.generate.num_beams = 2, o.generate.max_new_tokens = 4;
  ck_assert_int_eq(clf_chat_respond(c, &o, &reply, NULL), CLF_E_INVALID_ARG);
  ck_assert_msg(strstr(clf_last_error(th_ctx), "num_beams") != NULL, "%s", clf_last_error(th_ctx));
  o.generate.num_beams = 0;
  o.generate.max_new_tokens = 1000000;
  ck_assert_int_eq(clf_chat_respond(c, &o, &reply, NULL), CLF_E_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(clf_last_error(th_ctx), "positions"));
  ck_assert_ptr_null(reply);
  ck_assert_uint_eq(clf_chat_messages(c), 1); /* unchanged */
  /* unset, max_new_tokens is what the model's 256 positions leave (not 512) */
  o.generate.max_new_tokens = 0, o.generate.do_sample = CLF_GENERATE_OFF;
  clf_chat_turn info;
  TH_OK(clf_chat_respond(c, &o, &reply, &info));
  ck_assert_uint_le(info.prompt_tokens + info.new_tokens, 256);
  free(reply);
  clf_chat_pop(c);
  /* the template's own refusal (SmolLM2's accepts any roles: a template that
   * raises is in test_chat_template) reaches the caller with its text */
  ck_assert_int_eq(clf_chat_respond(NULL, &o, &reply, NULL), CLF_E_INVALID_ARG);
  ck_assert_int_eq(clf_chat_respond(c, &o, NULL, NULL), CLF_E_INVALID_ARG);
  clf_chat_destroy(c);
  clf_chat_destroy(NULL);
}
END_TEST

static Suite *chat_suite(void) {
  Suite *s = suite_create("chat");
  TCase *tc = tcase_create("stream");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, text_stream_joins_to_the_decoding);
  tcase_add_test(tc, text_stream_refusals);
  suite_add_tcase(s, tc);
  tc = tcase_create("chat");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, chat_turns_reuse_the_cache);
  tcase_add_test(tc, chat_clear_keeps_the_cache);
  tcase_add_test(tc, chat_stop_and_streaming_end);
  tcase_add_test(tc, chat_refusals);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(chat_suite()); }
