/* stream.c - generated tokens to text as they come (clf_text_stream).
 *
 * Each token is appended and the new tokens so far are decoded again; what
 * lies past the bytes already given out is given out, less what may still
 * change: a character whose bytes are not all there yet (decoded as
 * U+FFFD), the text after the last space (clean_up_tokenization_spaces may
 * rewrite " ," or " 's"), and the last bytes a stop string could still be
 * completing.  A stop string cuts the text before it, and nothing after it
 * is given out.  Decoding everything again each time costs O(n^2) in the
 * reply's length, which a reply of a few thousand tokens does not notice
 * beside a forward pass per token; it is what makes the text exactly
 * clf_tokenizer_decode's.
 */
#include "tokenizer.h"
#include "base/status.h"

#include <stdlib.h>
#include <string.h>

struct clf_text_stream {
  clf_tokenizer *tok;
  char **stop;
  size_t n_stop, max_stop;
  clf__ids ids;
  char *text;            /* the last decoding */
  size_t text_len;       /* its length up to a stop string */
  size_t given;          /* bytes of it given out */
  int stopped;
};

void clf_text_stream_destroy(clf_text_stream *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n_stop; i++) free(s->stop[i]);
  free(s->stop);
  free(s->ids.v);
  free(s->text);
  free(s);
}

clf_status clf_text_stream_create(clf_tokenizer *tok, const char *const *stop, size_t n_stop,
                                  clf_text_stream **out) {
  static const char op[] = "clf_text_stream_create";
  if (!out) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: out is NULL", op);
  *out = NULL;
  if (!tok) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: tokenizer is NULL", op);
  if (n_stop && !stop) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: %zu stop strings but stop is NULL", op, n_stop);
  for (size_t i = 0; i < n_stop; i++)
    if (!stop[i] || !stop[i][0])
      return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: stop string %zu is %s", op, i, stop[i] ? "empty" : "NULL");
  clf_text_stream *s = calloc(1, sizeof *s);
  if (!s || (n_stop && !(s->stop = calloc(n_stop, sizeof *s->stop)))) {
    free(s);
    return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of memory", op);
  }
  s->tok = tok;
  for (; s->n_stop < n_stop; s->n_stop++) {
    if (!(s->stop[s->n_stop] = strdup(stop[s->n_stop]))) {
      clf_text_stream_destroy(s);
      return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of memory", op);
    }
    const size_t len = strlen(stop[s->n_stop]);
    if (len > s->max_stop) s->max_stop = len;
  }
  *out = s;
  return CLF_OK;
}

/* The length of the text that is safe to give out now. */
static size_t safe_end(const clf_text_stream *s) {
  const char *text = s->text;
  size_t end = s->text_len;
  while (end >= 3 && !memcmp(text + end - 3, "\xEF\xBF\xBD", 3)) end -= 3;
  if (s->max_stop > 1) end = end > s->max_stop - 1 ? end - (s->max_stop - 1) : 0;
  while (end > 0 && ((unsigned char)text[end] & 0xC0) == 0x80) end--;
  for (size_t i = end; i > s->given; i--)
    if (text[i - 1] == ' ') return i - 1;
  return end > s->given ? end : s->given;
}

/* Decodes the tokens so far into s->text, cut before the first stop string. */
static clf_status redecode(clf_text_stream *s) {
  char *text = NULL;
  clf_status st = clf_tokenizer_decode(s->tok, s->ids.v, s->ids.n, 1, &text);
  if (st != CLF_OK) return st;
  free(s->text);
  s->text = text;
  s->text_len = strlen(text);
  for (size_t i = 0; i < s->n_stop; i++) {
    const char *p = strstr(text, s->stop[i]);
    if (p && (size_t)(p - text) < s->text_len) s->text_len = (size_t)(p - text), s->stopped = 1;
  }
  text[s->text_len] = '\0';
  return CLF_OK;
}

/* The text from s->given to `end`, given out. */
static void give(clf_text_stream *s, size_t end, const char **text, size_t *len) {
  if (end < s->given) end = s->given;
  *text = s->text ? s->text + s->given : "";
  *len = end - s->given;
  s->given = end;
}

clf_status clf_text_stream_push(clf_text_stream *s, int64_t token, const char **text, size_t *len, int *stopped) {
  static const char op[] = "clf_text_stream_push";
  if (!s || !text || !len) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: NULL argument", op);
  *text = "", *len = 0;
  if (stopped) *stopped = s->stopped;
  if (s->stopped) return CLF_OK;
  if (clf__ids_push(&s->ids, token) != 0) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of memory", op);
  clf_status st = redecode(s);
  if (st != CLF_OK) {
    s->ids.n--;
    return st;
  }
  give(s, s->stopped ? s->text_len : safe_end(s), text, len);
  if (stopped) *stopped = s->stopped;
  return CLF_OK;
}

clf_status clf_text_stream_finish(clf_text_stream *s, const char **text, size_t *len) {
  if (!s || !text || !len) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_text_stream_finish: NULL argument");
  give(s, s->text_len, text, len);
  return CLF_OK;
}

const char *clf_text_stream_text(const clf_text_stream *s, size_t *len) {
  if (len) *len = s && s->text ? s->text_len : 0;
  return s && s->text ? s->text : "";
}

size_t clf_text_stream_tokens(const clf_text_stream *s) { return s ? s->ids.n : 0; }

int clf_text_stream_stopped(const clf_text_stream *s) { return s ? s->stopped : 0; }
