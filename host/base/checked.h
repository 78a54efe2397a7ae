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

/* The most elements one 32-bit index range holds: 2^32 less room for a
 * global size rounded up to its work-group and for kernels that take 4 or
 * 8 elements a work-item (get_global_id(0) * 4 stays below 2^32). */
#define CLF__U32_MAX_ELEMENTS ((size_t)0xFFF00000u)

/* 1 when every index of [offset, offset + n) fits the 32-bit unsigned
 * indices the kernels take (cl_uint), n within CLF__U32_MAX_ELEMENTS. */
static inline int clf__fits_u32(size_t offset, size_t n) {
  return offset <= UINT32_MAX && n <= CLF__U32_MAX_ELEMENTS && n <= (size_t)UINT32_MAX - offset;
}

#endif /* CLF_BASE_CHECKED_H */
