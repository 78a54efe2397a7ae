/* chat.c - a conversation with a decoder-only model (clf_chat).
 *
 * Each turn renders the whole conversation with the chat template (as
 * transformers' apply_chat_template with add_generation_prompt), tokenizes
 * it without special tokens (the template writes them), and decodes the
 * reply as clf_model_generate would from that prompt.  The model's KV cache
 * is kept between turns: it holds the tokens fed so far, and a turn feeds
 * only what follows the longest common prefix of those and the new prompt
 * (llama.cpp's prompt cache does the same), so a reply costs the new
 * message, not the conversation.  The reply's tokens are not always the
 * tokens the next rendering gives for the same text (a template may write
 * the reply differently, and tokenization is not unique), which the common
 * prefix absorbs: what differs is fed again.
 */
#include "decoder.h"

#include "base/status.h"
#include "text/tokenizer.h"

#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A reply's new tokens when the options leave max_new_tokens unset: what
 * the model's positions leave, up to this many (a RoPE model whose
 * positions have no end: 512 then). */
#define CHAT_DEFAULT_MAX_NEW 32768
#define CHAT_DEFAULT_NO_LIMIT 512

struct clf_chat {
  clf_model *m;
  clf_tokenizer *tok;
  clf_chat_template *own; /* the tokenizer's template, when none was given */
  const clf_chat_template *tmpl;
  cJSON *messages;
  int64_t *cached; /* the tokens the model's caches hold for this conversation */
  size_t n_cached;
  unsigned long owner;
};

void clf_chat_options_init(clf_chat_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  clf_generate_options_init(&o->generate);
}

void clf_chat_destroy(clf_chat *c) {
  if (!c) return;
  if (clf__decoder_owned(c->m, c->owner)) clf__decoder_end(c->m);
  clf_chat_template_destroy(c->own);
  cJSON_Delete(c->messages);
  free(c->cached);
  free(c);
}

clf_status clf_chat_create(clf_model *m, clf_tokenizer *tok, const clf_chat_template *tmpl, clf_chat **out) {
  static const char op[] = "clf_chat_create";
  static _Atomic unsigned long conversations;
  if (!out) return clf__fail(m ? m->ctx : NULL, CLF_E_INVALID_ARG, "%s: out is NULL", op);
  *out = NULL;
  if (!m || !tok) return clf__fail(m ? m->ctx : NULL, CLF_E_INVALID_ARG, "%s: %s is NULL", op, m ? "tok" : "model");
  if (!m->dec || !m->dec->head || m->is_encdec)
    return clf__fail(m->ctx, CLF_E_UNSUPPORTED, "%s: this %s model is not a decoder-only language model", op,
                     m->type);
  clf_chat *c = calloc(1, sizeof *c);
  if (!c || !(c->messages = cJSON_CreateArray())) {
    free(c);
    return clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "%s: out of memory", op);
  }
  c->m = m, c->tok = tok, c->tmpl = tmpl;
  c->owner = ++conversations;
  if (!tmpl) {
    clf_status st = clf_tokenizer_chat_template(tok, &c->own);
    if (st != CLF_OK) {
      clf_chat_destroy(c);
      return clf__fail(m->ctx, st, "%s: %s", op, clf_last_error(NULL));
    }
    c->tmpl = c->own;
  }
  *out = c;
  return CLF_OK;
}

clf_status clf_chat_add(clf_chat *c, const char *role, const char *content) {
  static const char op[] = "clf_chat_add";
  if (!c || !role || !content)
    return clf__fail(c ? c->m->ctx : NULL, CLF_E_INVALID_ARG, "%s: %s is NULL", op,
                     !c ? "chat" : !role ? "role" : "content");
  cJSON *msg = cJSON_CreateObject();
  if (!msg || !cJSON_AddStringToObject(msg, "role", role) || !cJSON_AddStringToObject(msg, "content", content) ||
      !cJSON_AddItemToArray(c->messages, msg)) {
    cJSON_Delete(msg);
    return clf__fail(c->m->ctx, CLF_E_OUT_OF_MEMORY, "%s: out of memory", op);
  }
  return CLF_OK;
}

clf_status clf_chat_add_json(clf_chat *c, const char *message_json) {
  static const char op[] = "clf_chat_add_json";
  if (!c || !message_json)
    return clf__fail(c ? c->m->ctx : NULL, CLF_E_INVALID_ARG, "%s: %s is NULL", op, c ? "message_json" : "chat");
  cJSON *msg = cJSON_Parse(message_json);
  if (!msg) return clf__fail(c->m->ctx, CLF_E_INVALID_ARG, "%s: the message is not valid JSON", op);
  char where[32], path[200];
  snprintf(where, sizeof(where), "messages[%d]", cJSON_GetArraySize(c->messages));
  if (clf__json_nul_path(message_json, where, path, sizeof(path))) {
    cJSON_Delete(msg);
    return clf__fail(c->m->ctx, CLF_E_INVALID_ARG, "%s: %s contains a NUL character", op, path);
  }
  const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
  if (!cJSON_IsObject(msg) || !cJSON_IsString(role)) {
    cJSON_Delete(msg);
    return clf__fail(c->m->ctx, CLF_E_INVALID_ARG, "%s: a message is a JSON object with a string \"role\"", op);
  }
  if (!cJSON_AddItemToArray(c->messages, msg)) {
    cJSON_Delete(msg);
    return clf__fail(c->m->ctx, CLF_E_OUT_OF_MEMORY, "%s: out of memory", op);
  }
  return CLF_OK;
}

clf_status clf_chat_set_template_budget(clf_chat *c, const clf_template_budget *budget) {
  static const char op[] = "clf_chat_set_template_budget";
  if (!c) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: chat is NULL", op);
  if (!c->own)
    return clf__fail(c->m->ctx, CLF_E_INVALID_ARG,
                     "%s: the conversation's template is the caller's: set its budget with clf_chat_template_set_budget",
                     op);
  return clf_chat_template_set_budget(c->own, budget);
}

void clf_chat_pop(clf_chat *c) {
  const int n = c ? cJSON_GetArraySize(c->messages) : 0;
  if (n > 0) cJSON_DeleteItemFromArray(c->messages, n - 1);
}

void clf_chat_clear(clf_chat *c) {
  if (!c) return;
  while (cJSON_GetArraySize(c->messages) > 0) cJSON_DeleteItemFromArray(c->messages, 0);
}

size_t clf_chat_messages(const clf_chat *c) { return c ? (size_t)cJSON_GetArraySize(c->messages) : 0; }

/* The conversation rendered for a reply (add_generation_prompt) and
 * tokenized: *ids malloc'd. */
static clf_status chat_prompt(clf_chat *c, int64_t **ids, size_t *n) {
  static const char op[] = "clf_chat_respond";
  cJSON *ctx = cJSON_CreateObject();
  char *json = NULL, *text = NULL;
  clf_status st = CLF_E_OUT_OF_MEMORY;
  if (ctx && cJSON_AddItemReferenceToObject(ctx, "messages", c->messages) &&
      cJSON_AddBoolToObject(ctx, "add_generation_prompt", 1) && (json = cJSON_PrintUnformatted(ctx))) {
    if ((st = clf_chat_template_render_json(c->tmpl, json, &text)) == CLF_OK)
      st = clf_tokenizer_encode(c->tok, text, 0, ids, n);
    if (st != CLF_OK) st = clf__fail(c->m->ctx, st, "%s: %s", op, clf_last_error(NULL));
  } else {
    st = clf__fail(c->m->ctx, st, "%s: out of memory", op);
  }
  if (st == CLF_OK && *n == 0) {
    free(*ids), *ids = NULL;
    st = clf__fail(c->m->ctx, CLF_E_INVALID_ARG, "%s: the chat template rendered no tokens", op);
  }
  free(text);
  free(json);
  cJSON_Delete(ctx);
  return st;
}

/* What one turn's generation streams into. */
typedef struct turn {
  clf_text_stream *stream;
  const clf_chat_options *o;
  size_t n_new;
  clf_status failed;
  int user_stopped;
} turn;

static int on_token(void *user, size_t row, int64_t token) {
  turn *t = user;
  const char *piece;
  size_t len;
  int stopped = 0;
  (void)row;
  t->n_new++;
  if ((t->failed = clf_text_stream_push(t->stream, token, &piece, &len, &stopped)) != CLF_OK) return 1;
  if (len && t->o && t->o->on_text && t->o->on_text(t->o->user, piece, len)) t->user_stopped = 1;
  return stopped || t->user_stopped;
}

/* The cache's size for a prompt of n tokens and a reply of max_new: room
 * for the next turns too (the caches are made anew, and the conversation
 * fed again, when it outgrows them), within the model's positions. */
static size_t chat_cap(const clf_model *m, size_t n, size_t max_new) {
  size_t cap = 2 * (n + max_new);
  cap = (cap + 255) / 256 * 256;
  if (m->dec->limit && cap > m->dec->limit) cap = m->dec->limit;
  return cap;
}

/* After a turn: the fed tokens (the sequence less its last) are what the
 * caches hold; the reply joins the conversation. */
static clf_status chat_keep(clf_chat *c, const clf_array *seq, const char *reply) {
  const size_t T = seq->shape[1];
  int64_t *kept = malloc(T * sizeof *kept + 1);
  if (!kept) return clf__fail(c->m->ctx, CLF_E_OUT_OF_MEMORY, "clf_chat_respond: out of memory");
  memcpy(kept, seq->data, (T - 1) * sizeof *kept);
  free(c->cached);
  c->cached = kept, c->n_cached = T - 1;
  return clf_chat_add(c, "assistant", reply);
}

/* Whether the sequence's last token ends it (the options' end-of-sequence
 * tokens, else the checkpoint's). */
static int ends_with_eos(const clf_model *m, const clf_generate_options *go, const clf_array *seq) {
  const int64_t last = ((const int64_t *)seq->data)[seq->shape[1] - 1];
  if (go->n_eos_token_ids) {
    for (size_t i = 0; i < go->n_eos_token_ids; i++)
      if (go->eos_token_ids[i] == last) return 1;
    return 0;
  }
  for (size_t i = 0; i < m->gen.n_eos; i++)
    if (m->gen.eos[i] == last) return 1;
  return 0;
}

static size_t common_prefix(const int64_t *a, size_t na, const int64_t *b, size_t nb) {
  size_t i = 0;
  while (i < na && i < nb && a[i] == b[i]) i++;
  return i;
}

/* Renders, decodes and streams one reply (long: the checks before the
 * decoding, then its outcome recorded). */
clf_status clf_chat_respond(clf_chat *c, const clf_chat_options *o, char **reply, clf_chat_turn *info) {
  static const char op[] = "clf_chat_respond";
  if (!c || !reply) return clf__fail(c ? c->m->ctx : NULL, CLF_E_INVALID_ARG, "%s: %s is NULL", op,
                                     c ? "reply" : "chat");
  *reply = NULL;
  if (info) memset(info, 0, sizeof *info);
  clf_model *m = c->m;
  clf_generate_options go;
  if (o) go = o->generate;
  else clf_generate_options_init(&go);
  const int unset = !go.max_new_tokens;
  if (!go.num_beams) go.num_beams = 1;
  int64_t *ids = NULL;
  size_t n = 0;
  clf_status st = chat_prompt(c, &ids, &n);
  if (st != CLF_OK) return st;
  if (unset) /* until the end of the text or of the model's positions */
    go.max_new_tokens = !m->dec->limit ? CHAT_DEFAULT_NO_LIMIT
                        : m->dec->limit > n && m->dec->limit - n < CHAT_DEFAULT_MAX_NEW ? m->dec->limit - n
                                                                                        : CHAT_DEFAULT_MAX_NEW;
  if (m->dec->limit && (n >= m->dec->limit || go.max_new_tokens > m->dec->limit - n)) {
    free(ids);
    return clf__fail(m->ctx, CLF_E_INVALID_ARG, "%s: the conversation's %zu tokens and max_new_tokens %zu exceed "
                     "%s's %zu positions (%s)", op, n, go.max_new_tokens, m->type, m->dec->limit,
                     m->dec->limit_key);
  }
  size_t keep = clf__decoder_owned(m, c->owner) ? common_prefix(c->cached, c->n_cached, ids, n) : 0;
  if (keep == n) keep = n - 1; /* the last prompt token is fed to get its logits */
  turn t = {.o = o};
  if ((st = clf_text_stream_create(c->tok, o ? o->stop : NULL, o ? o->n_stop : 0, &t.stream)) != CLF_OK) {
    free(ids);
    return clf__fail(m->ctx, st, "%s: %s", op, clf_last_error(NULL));
  }
  go.on_token = on_token, go.user = &t;
  clf__gen_cont cont = {keep, chat_cap(m, n, go.max_new_tokens), c->owner, 0};
  clf_array in = {"input_ids", CLF_I64, 2, {1, n}, ids}, seq = {0};
  st = clf__generate_continue(m, &in, &go, &cont, &seq);
  if (st == CLF_OK && t.failed != CLF_OK) st = clf__fail(m->ctx, t.failed, "%s: %s", op, clf_last_error(NULL));
  const char *rest;
  size_t rest_len;
  if (st == CLF_OK && clf_text_stream_finish(t.stream, &rest, &rest_len) == CLF_OK && rest_len && o && o->on_text)
    o->on_text(o->user, rest, rest_len);
  const char *text = clf_text_stream_text(t.stream, NULL);
  if (st == CLF_OK && !(*reply = strdup(text))) st = clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "%s: out of memory", op);
  if (st == CLF_OK && (st = chat_keep(c, &seq, text)) != CLF_OK) free(*reply), *reply = NULL;
  if (st != CLF_OK) c->n_cached = 0;
  if (st == CLF_OK && info) {
    info->prompt_tokens = n, info->reused_tokens = cont.kept;
    info->new_tokens = t.n_new;
    info->finished = t.n_new < go.max_new_tokens || clf_text_stream_stopped(t.stream) || t.user_stopped ||
                     ends_with_eos(m, &go, &seq);
  }
  clf_text_stream_destroy(t.stream);
  clf_array_free(&seq);
  free(ids);
  return st;
}
