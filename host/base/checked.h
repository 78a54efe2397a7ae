/* checked.h - overflow-safe size arithmetic, the one place host/ does it.
 *
 * Every size that comes from a file or an argument goes through these
 * before it is multiplied, added or passed to a kernel as a 32-bit index.
 */
#ifndef CLF_BASE_CHECKED_H
#define CLF_BASE_CHECKED_H

#include <stddef.h>
#include <stdint.h>

/* *out = a * b; 0 when it overflows size_t (then *out is unchanged). */
static inline int clf__mul_ok(size_t a, size_t b, size_t *out) {
  if (a != 0 && b > SIZE_MAX / a) return 0;
  *out = a * b;
  return 1;
}

/* *out = a + b; 0 when it overflows size_t. */
static inline int clf__add_ok(size_t a, size_t b, size_t *out) {
  if (b > SIZE_MAX - a) return 0;
  *out = a + b;
  return 1;
}

/* 1 when every index of [offset, offset + n) fits the 32-bit unsigned
 * indices the kernels take (cl_uint). */
static inline int clf__fits_u32(size_t offset, size_t n) {
  return offset <= UINT32_MAX && n <= (size_t)UINT32_MAX - offset;
}

#endif /* CLF_BASE_CHECKED_H */
