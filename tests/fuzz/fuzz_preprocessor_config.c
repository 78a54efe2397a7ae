/* fuzz_preprocessor_config.c - libFuzzer target: the input as a vision
 * model's preprocessor_config.json through clf_image_processor_load, and a
 * small fixed image through clf_image_preprocess_with it (sizes the file
 * asks for beyond 64 x 64 are scaled down, to keep each run short). */
#include "fuzz_util.h"

#include <clformer.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_write("preprocessor_config.json", data, size);
  clf_image_processor p;
  if (clf_image_processor_load(fz_dir(), &p) != CLF_OK) return 0;
  if (p.width > 64) p.width = 64;
  if (p.height > 64) p.height = 64;
  unsigned char rgb[4 * 3 * 3];
  for (size_t i = 0; i < sizeof rgb; i++) rgb[i] = (unsigned char)(i * 37);
  const clf_image img = {4, 3, rgb};
  clf_array pv = {0};
  if (clf_image_preprocess_with(&img, &p, &pv) == CLF_OK) {
    const size_t n = clf_array_numel(&pv);
    volatile float sink = 0;
    for (size_t k = 0; k < n; k++) sink += ((const float *)pv.data)[k];
    (void)sink;
  }
  clf_array_free(&pv);
  return 0;
}
