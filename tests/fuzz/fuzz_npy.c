/* fuzz_npy.c - libFuzzer target: the input as a .npy file through
 * clf_npy_read.  On success every element is read (ASan bounds the
 * malloc'd data) and the array is written back and read again, which must
 * give the same bytes. */
#include "fuzz_util.h"

#include <clformer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t dtype_bytes(clf_dtype dt) {
  switch (dt) {
    case CLF_F32: case CLF_I32: return 4;
    case CLF_F16: return 2;
    case CLF_I64: return 8;
    default: return 0;
  }
}

static void round_trip(const clf_array *a, size_t bytes) {
  if (clf_npy_write(fz_path("again.npy"), a) != CLF_OK) {
    fprintf(stderr, "fuzz_npy: writing back failed: %s\n", clf_last_error(NULL));
    abort();
  }
  clf_array b = {0};
  if (clf_npy_read(fz_path("again.npy"), &b) != CLF_OK || b.dtype != a->dtype || b.ndim != a->ndim ||
      memcmp(b.shape, a->shape, sizeof b.shape) != 0 || (bytes && memcmp(a->data, b.data, bytes) != 0)) {
    fprintf(stderr, "fuzz_npy: the array written back reads differently: %s\n", clf_last_error(NULL));
    abort();
  }
  clf_array_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_write("x.npy", data, size);
  clf_array a = {0};
  if (clf_npy_read(fz_path("x.npy"), &a) == CLF_OK) {
    size_t esize = dtype_bytes(a.dtype), bytes = clf_array_numel(&a) * esize;
    if (!esize || a.ndim < 0 || a.ndim > CLF_MAX_DIMS || (bytes && !a.data) || bytes > size) abort();
    volatile unsigned char sink = 0;
    for (size_t k = 0; k < bytes; k++) sink ^= ((const unsigned char *)a.data)[k];
    (void)sink;
    round_trip(&a, bytes);
  } else if (a.data) {
    abort(); /* on failure out->data is NULL */
  }
  clf_array_free(&a);
  return 0;
}
