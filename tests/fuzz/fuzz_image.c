/* fuzz_image.c - libFuzzer target: the input as an image file through
 * clf_image_read (PNG or JPEG, told apart by the first bytes).  Built
 * twice, as fuzz_png and fuzz_jpeg, which differ only in their seeds.  A
 * decoded image has every byte read (ASan bounds it) and, up to 2^22
 * pixels, is resized as the image processor would, to a small size.
 * Larger ones are not: a 674-byte JPEG declaring 5624 x 11116 decodes
 * (the missing data grey, as PIL does) within CLF_LIMIT_IMAGE_PIXELS, and
 * resizing its 62.5 million pixels took 11 s under the sanitizers, past
 * the fuzzer's time limit (docs/fuzzing.md). */
#include "fuzz_util.h"

#include <clformer.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_write("image", data, size);
  clf_image img = {0};
  if (clf_image_read(fz_path("image"), &img) == CLF_OK) {
    if (img.width < 1 || img.height < 1 || !img.rgb) abort();
    const size_t bytes = (size_t)img.width * (size_t)img.height * 3;
    volatile unsigned char sink = 0;
    for (size_t k = 0; k < bytes; k++) sink ^= img.rgb[k];
    (void)sink;
    clf_image small = {0};
    if (bytes <= ((size_t)3 << 22) && clf_image_resize(&img, 7, 5, CLF_RESAMPLE_BICUBIC, &small) == CLF_OK) clf_image_free(&small);
  } else if (img.rgb) {
    abort(); /* on failure out->rgb is NULL */
  }
  clf_image_free(&img);
  return 0;
}
