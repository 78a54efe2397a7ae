/* fuzz_gguf.c - libFuzzer target: the input as a .gguf file through
 * clf_gguf_open, then every metadata value by index (as an integer, a
 * float and a string: each either succeeds or refuses the type), every key
 * and tensor by name, and every tensor read.  Besides the sanitizers it
 * checks what the reader promises: find(key) and find_tensor(name) give
 * the index they came from, and each tensor's bytes lie inside the file,
 * aligned tensors clear of each other.  A file the reader takes then goes
 * through what reads a model's metadata: the tokenizer built from
 * tokenizer.ggml.* (encoding and decoding a text when it loads) and the
 * config of clf_model_gemm_shapes. */
#include "fuzz_util.h"

#include <clformer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what, size_t i) {
  fprintf(stderr, "fuzz_gguf: %zu: %s\n", i, what);
  abort();
}

static void check_kvs(const clf_gguf *g) {
  for (size_t i = 0; i < clf_gguf_kv_count(g); i++) {
    clf_gguf_kv kv;
    if (clf_gguf_kv_at(g, i, &kv) != CLF_OK) fail("kv_at failed", i);
    if (clf_gguf_find(g, kv.key) != (long)i) fail("find(key) is another pair", i);
    const int str = kv.elem == CLF_GGUF_STRING;
    for (uint64_t j = 0; j < kv.count && j < 64; j++) {
      int64_t n;
      double d;
      const char *s;
      size_t len;
      const clf_status si = clf_gguf_get_int(g, i, j, &n), sf = clf_gguf_get_float(g, i, j, &d);
      const clf_status ss = clf_gguf_get_str(g, i, j, &s, &len);
      if ((ss == CLF_OK) != str || (str && (si == CLF_OK || sf == CLF_OK))) fail("a value of the wrong type", i);
      if (!str && sf != CLF_OK) fail("a number that get_float refuses", i);
      if (ss == CLF_OK && s[len] != '\0') fail("a string without its NUL", i);
    }
  }
}

static void check_tensors(const clf_gguf *g, size_t file_size) {
  const size_t n = clf_gguf_tensor_count(g);
  for (size_t i = 0; i < n; i++) {
    clf_gguf_tensor t;
    if (clf_gguf_tensor_at(g, i, &t) != CLF_OK) fail("tensor_at failed", i);
    if (clf_gguf_find_tensor(g, t.name) != (long)i) fail("find_tensor(name) is another tensor", i);
    if (t.ndim < 0 || t.ndim > 4 || strlen(t.name) >= 64) fail("ndim or name out of range", i);
    if (t.offset > file_size || t.bytes > file_size - t.offset) fail("data past the end of the file", i);
    for (size_t k = 0; k < i; k++) {
      clf_gguf_tensor u;
      if (clf_gguf_tensor_at(g, k, &u) != CLF_OK) fail("tensor_at failed", k);
      if (t.bytes && u.bytes && t.offset < u.offset + u.bytes && u.offset < t.offset + t.bytes)
        fail("two tensors overlap", i);
    }
    unsigned char *b = malloc(t.bytes ? t.bytes : 1);
    if (!b) fail("out of memory", i);
    if (clf_gguf_read(g, i, b, t.bytes) != CLF_OK) fail("read failed", i);
    free(b);
  }
}

static void check_metadata_readers(const char *path) {
  clf_tokenizer *tok = NULL;
  if (clf_tokenizer_load(path, &tok) == CLF_OK) {
    int64_t *ids = NULL;
    size_t n = 0;
    char *text = NULL;
    if (clf_tokenizer_encode(tok, "Hello world! 12345 caf\xc3\xa9 <s>", 1, &ids, &n) == CLF_OK &&
        clf_tokenizer_decode(tok, ids, n, 0, &text) == CLF_OK)
      free(text);
    free(ids);
    clf_tokenizer_destroy(tok);
  }
  clf_gemm_shape shapes[64];
  size_t count = 0;
  clf_model_gemm_shapes(path, 3, shapes, 64, &count);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_write("model.gguf", data, size);
  clf_gguf *g = NULL;
  const int ok = clf_gguf_open(fz_path("model.gguf"), &g) == CLF_OK;
  if (ok) {
    check_kvs(g);
    check_tensors(g, size);
  }
  clf_gguf_close(g);
  if (ok) check_metadata_readers(fz_path("model.gguf"));
  return 0;
}
