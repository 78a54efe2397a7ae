/* fuzz_tokenizer.c - libFuzzer targets for every tokenizer file kind, one
 * executable per kind (FUZZ_TOK_KIND, set by meson.build): the input is
 * written as the file under test into a directory that holds the fixed
 * companion files of its tokenizer (tests/fixtures/tokenizers/<name>/), the
 * directory is loaded with clf_tokenizer_load, and a short text is encoded
 * (with and without special tokens) and its ids decoded, so the vocabulary
 * just read is used.
 *   0 tok_vocab_txt     vocab.txt        (BERT WordPiece)
 *   1 tok_vocab_json    vocab.json       (GPT-2 BPE)
 *   2 tok_merges        merges.txt       (GPT-2 BPE)
 *   3 tok_spm           source.spm       (Marian SentencePiece)
 *   4 tok_marian_vocab  vocab.json       (Marian SentencePiece)
 *   5 tok_config        tokenizer_config.json; the input's first byte
 *                       picks BERT, GPT-2 or Marian companions (mod 3)
 *   6 tok_json          tokenizer.json (BPE pipelines of the Llama family),
 *                       beside Llama 3's tokenizer_config.json
 *   7 tok_gguf          model.gguf alone in its directory: the tokenizer of
 *                       its tokenizer.ggml.* metadata (host/text/tok_gguf.c),
 *                       without the other readers fuzz_gguf.c runs first */
#include "fuzz_util.h"

#include <clformer.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef FUZZ_TOK_KIND
#error "FUZZ_TOK_KIND must be set (tests/fuzz/meson.build)"
#endif

static const char *const dirs[] = {"bert", "gpt2", "marian", "llama3", "gguf"};
static const char *const companions[5][5] = {
    {"vocab.txt", "tokenizer_config.json", "special_tokens_map.json", NULL},
    {"vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json", NULL},
    {"source.spm", "target.spm", "vocab.json", "tokenizer_config.json", "special_tokens_map.json"},
    {"tokenizer_config.json", NULL},
    {NULL},
};
/* kind -> (companion directory, file the input becomes) */
static const struct { int dir; const char *file; } kinds[] = {
    {0, "vocab.txt"}, {1, "vocab.json"}, {1, "merges.txt"}, {2, "source.spm"}, {2, "vocab.json"},
    {-1, "tokenizer_config.json"}, {3, "tokenizer.json"}, {4, "model.gguf"}};

static void setup(void) {
  static int done;
  if (done) return;
  done = 1;
  char src[256], dst[256];
  for (int d = 0; d < 5; d++) {
    fz_mkdir(dirs[d]);
    for (int i = 0; i < 5 && companions[d][i]; i++) {
      snprintf(src, sizeof src, "%s/%s/%s", d < 3 ? "tokenizers" : "tokenizers_json", dirs[d], companions[d][i]);
      snprintf(dst, sizeof dst, "%s/%s", dirs[d], companions[d][i]);
      fz_copy_fixture(src, dst);
    }
  }
}

static void use(clf_tokenizer *t) {
  static const char *const texts[] = {
      "Hello, world! [CLS] a [SEP] <|endoftext|> </s> <unk> na\xc3\xafve caf\xc3\xa9 \xe6\x9d\xb1\xe4\xba\xac don't .",
      "  x\ty\n", ""};
  for (int i = 0; i < 3; i++) {
    for (int special = 0; special < 2; special++) {
      int64_t *ids = NULL;
      size_t n = 0;
      if (clf_tokenizer_encode(t, texts[i], special, &ids, &n) == CLF_OK) {
        char *text = NULL;
        if (clf_tokenizer_decode(t, ids, n, special, &text) == CLF_OK) free(text);
      }
      free(ids);
    }
  }
  const int64_t odd[] = {0, 1, 2, 3, 95, 127, 1 << 20, -1};
  char *text = NULL;
  if (clf_tokenizer_decode(t, odd, sizeof odd / sizeof odd[0], 0, &text) == CLF_OK) free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  setup();
  int d = kinds[FUZZ_TOK_KIND].dir;
  if (d < 0) {
    if (size < 1) return 0;
    d = data[0] % 3;
    data++;
    size--;
  }
  char rel[256];
  snprintf(rel, sizeof rel, "%s/%s", dirs[d], kinds[FUZZ_TOK_KIND].file);
  fz_write(rel, data, size);
  clf_tokenizer *t = NULL;
  if (clf_tokenizer_load(fz_path(dirs[d]), &t) == CLF_OK) use(t);
  clf_tokenizer_destroy(t);
  return 0;
}
