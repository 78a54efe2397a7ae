/* fuzz_safetensors.c - libFuzzer target: the input as a .safetensors file
 * through clf_safetensors_open, then every tensor by index and by name.
 * Besides the sanitizers it checks what the reader promises: ranges in
 * offset order without gaps or overlaps inside the file's data, and
 * find(name) giving the tensor that info(index) gave, and read() copying
 * the bytes that data maps.  The file is mapped, where ASan does not see
 * reads, so the ranges are checked here. */
#include "fuzz_util.h"

#include <clformer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what, size_t i) {
  fprintf(stderr, "fuzz_safetensors: tensor %zu: %s\n", i, what);
  abort();
}

static void check_all(const clf_safetensors *st, size_t file_size) {
  const size_t n = clf_safetensors_count(st);
  const unsigned char *base = NULL, *at = NULL;
  volatile unsigned char sink = 0;
  for (size_t i = 0; i < n; i++) {
    clf_st_info a, b;
    if (clf_safetensors_info(st, i, &a) != CLF_OK) fail("info failed", i);
    if (clf_safetensors_find(st, a.name, &b) != CLF_OK) fail("find(name) failed", i);
    if (b.data != a.data || b.bytes != a.bytes || b.ndim != a.ndim) fail("find(name) is another tensor", i);
    if (a.ndim < 0 || a.ndim > 8) fail("ndim out of range", i);
    if (!base) base = at = a.data;
    if ((const unsigned char *)a.data != at) fail("a gap or an overlap before it", i);
    at += a.bytes;
    if ((size_t)(at - base) > file_size) fail("data past the end of the file", i);
    for (size_t k = 0; k < a.bytes; k += 4096) sink ^= ((const unsigned char *)a.data)[k];
    if (a.bytes) sink ^= ((const unsigned char *)a.data)[a.bytes - 1];
    unsigned char *copy = malloc(a.bytes ? a.bytes : 1);
    if (!copy) fail("out of memory", i);
    if (clf_safetensors_read(st, &a, copy) != CLF_OK) fail("read failed", i);
    if (a.bytes && memcmp(copy, a.data, a.bytes) != 0) fail("read() differs from data", i);
    free(copy);
  }
  clf_st_info none;
  if (clf_safetensors_info(st, n, &none) == CLF_OK) fail("info past the count succeeded", n);
  (void)clf_safetensors_metadata(st, "format");
  (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_write("model.safetensors", data, size);
  clf_safetensors *st = NULL;
  if (clf_safetensors_open(fz_path("model.safetensors"), &st) == CLF_OK) check_all(st, size);
  clf_safetensors_close(st);
  return 0;
}
