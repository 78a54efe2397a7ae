/* half.h - IEEE half precision (f16) and bfloat16 bits <-> float, on the
 * host: the weight storage types, safetensors and GGUF tensors, .npy files. */
#ifndef CLF_BASE_HALF_H
#define CLF_BASE_HALF_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

uint16_t clf__f32_to_f16(float f); /* round to nearest even */
float clf__f16_bits_to_f32(uint16_t h);
float clf__bf16_to_f32(uint16_t b); /* exact */

#ifdef __cplusplus
}
#endif

#endif /* CLF_BASE_HALF_H */
