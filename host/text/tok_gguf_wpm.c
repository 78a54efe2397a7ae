/* tok_gguf_wpm.c - the WordPiece vocabulary of a GGUF file whose
 * tokenizer.ggml.model is "bert" (llama.cpp's WPM), as the vocab.txt it was
 * made from: convert_hf_to_gguf writes a word's first piece with U+2581
 * before it and a continuation ("##ing") without its "##", "[...]" tokens as
 * they are; this undoes that.  The rest is BertTokenizer's (tok_wordpiece.c)
 * with llama.cpp's settings: lower case, accents stripped, Chinese
 * characters split, the special tokens from tokenizer.ggml.*_token_id. */
#include "base/limits.h"
#include "base/status.h"
#include "tokenizer.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WPM_SPACE "\xe2\x96\x81" /* U+2581, a word's first piece */

/* tokenizer_config.json's names of the special tokens and the GGUF keys
 * of their ids: today's converter writes [CLS] as BOS and [SEP] as EOS as
 * well (gguf-py's SpecialVocab), older files tokenizer.ggml.cls_token_id. */
static const char *const wpm_special[][3] = {
    {"unk_token", "tokenizer.ggml.unknown_token_id", NULL},
    {"sep_token", "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.eos_token_id"},
    {"pad_token", "tokenizer.ggml.padding_token_id", NULL},
    {"cls_token", "tokenizer.ggml.cls_token_id", "tokenizer.ggml.bos_token_id"},
    {"mask_token", "tokenizer.ggml.mask_token_id", NULL},
};

/* Token i as vocab.txt had it, into buf (room for CLF_LIMIT_TOKEN_BYTES + 3). */
static size_t wpm_piece(const char *tok, size_t len, char *buf) {
  if (len >= 3 && memcmp(tok, WPM_SPACE, 3) == 0) {
    memcpy(buf, tok + 3, len - 3);
    return len - 3;
  }
  if (len >= 2 && tok[0] == '[' && tok[len - 1] == ']') {
    memcpy(buf, tok, len);
    return len;
  }
  memcpy(buf, "##", 2);
  memcpy(buf + 2, tok, len);
  return len + 2;
}

static clf_status wpm_vocab(clf_tokenizer *t, const clf_gguf *g, const char *file, long k, uint64_t n) {
  char buf[CLF_LIMIT_TOKEN_BYTES + 3];
  for (uint64_t i = 0; i < n; i++) {
    const char *tok;
    size_t len;
    if (clf_gguf_get_str(g, (size_t)k, i, &tok, &len) != CLF_OK)
      return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: tokenizer.ggml.tokens[%llu] is not a string", file,
                       (unsigned long long)i);
    if (len > CLF_LIMIT_TOKEN_BYTES)
      return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: tokenizer.ggml.tokens[%llu] is %zu bytes long, "
                       "past the limit of %zu bytes for one token", file, (unsigned long long)i, len,
                       CLF_LIMIT_TOKEN_BYTES);
    for (size_t j = 0; j < len;)
      if (clf__utf8_next(tok, len, &j) < 0 || memchr(tok, '\0', len))
        return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: tokenizer.ggml.tokens[%llu] is not valid UTF-8 "
                         "text", file, (unsigned long long)i);
    char *piece = buf;
    const size_t m = wpm_piece(tok, len, piece);
    const int64_t prev = clf__strmap_get(&t->vocab, piece, m);
    if (prev >= 0)
      return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: tokenizer.ggml.tokens[%llu] and [%lld] are both "
                       "the WordPiece \"%.*s\"", file, (unsigned long long)i, (long long)prev, (int)(m < 40 ? m : 40),
                       piece);
    if (clf__strmap_put(&t->vocab, piece, m, (int64_t)i) || clf__tok_set_token(t, (int64_t)i, piece, m))
      return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory");
  }
  return CLF_OK;
}

/* The settings clf__wordpiece_settings reads, as tokenizer_config.json
 * would hold them: each special token that the file names by id. */
static clf_status wpm_config(clf_tokenizer *t, const clf_gguf *g, const char *file, cJSON *cfg) {
  if (!cJSON_AddTrueToObject(cfg, "do_lower_case"))
    return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory");
  for (size_t k = 0; k < CLF__ARRAY_LEN(wpm_special); k++) {
    const char *key = wpm_special[k][1];
    long i = clf_gguf_find(g, key);
    if (i < 0 && wpm_special[k][2]) i = clf_gguf_find(g, key = wpm_special[k][2]);
    int64_t id = 0;
    if (i < 0) continue; /* BertTokenizer's default name ("[UNK]", ...) */
    if (clf_gguf_get_int(g, (size_t)i, 0, &id) != CLF_OK || id < 0 || (uint64_t)id >= t->n_ids ||
        !t->id_to_token[id])
      return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: %s is not the id of a token (0..%zu)", file,
                       key, t->n_ids ? t->n_ids - 1 : 0);
    if (!cJSON_AddStringToObject(cfg, wpm_special[k][0], t->id_to_token[id]))
      return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory");
  }
  return CLF_OK;
}

clf_status clf__gguf_wpm_load(clf_tokenizer *t, const clf_gguf *g, const char *file) {
  const long k = clf_gguf_find(g, "tokenizer.ggml.tokens");
  clf_gguf_kv kv;
  if (k < 0 || clf_gguf_kv_at(g, (size_t)k, &kv) != CLF_OK || kv.type != CLF_GGUF_ARRAY ||
      kv.elem != CLF_GGUF_STRING || kv.count == 0)
    return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: tokenizer.ggml.tokens (a list of strings) is "
                     "missing or empty", file);
  if (kv.count > CLF_LIMIT_VOCAB_ID)
    return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: tokenizer.ggml.tokens has %llu tokens, past the "
                     "limit of %zu", file, (unsigned long long)kv.count, CLF_LIMIT_VOCAB_ID);
  t->kind = CLF__TOK_WORDPIECE;
  t->clean_up_spaces = 1; /* BertTokenizer's clean_up_tokenization_spaces */
  clf_status st = wpm_vocab(t, g, file, k, kv.count);
  cJSON *cfg = st == CLF_OK ? cJSON_CreateObject() : NULL;
  if (st == CLF_OK && !cfg) st = clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory");
  if (st == CLF_OK) st = wpm_config(t, g, file, cfg);
  if (st == CLF_OK) st = clf__wordpiece_settings(t, cfg, file);
  cJSON_Delete(cfg);
  return st;
}
