/* common.cl - prepended to every kernel family.
 *
 * Plain OpenCL C 1.2: helpers shared by the families.  Device features
 * arrive as -D options from the host (CLF_HAS_FP16, CLF_LOCAL_MEM_BYTES,
 * CLF_MAX_WG, ...); nothing here needs an extension.
 *
 * Convention: every tensor argument is a pair (__global T *p, uint p_off),
 * the buffer and the tensor's offset in elements within it.
 */

/* The largest work-group a reduction kernel in this library is launched
 * with; the host never asks for more. */
#define CLF_RED_WG 256

/* Sum of v over the work-group (its size a power of two, <= CLF_RED_WG);
 * every work-item gets the result. */
inline float clf_wg_sum(float v, __local float *red) {
  const uint lid = get_local_id(0), n = get_local_size(0);
  red[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = n / 2; s > 0; s >>= 1) {
    if (lid < s) red[lid] += red[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = red[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

/* Maximum of v over the work-group, as clf_wg_sum. */
inline float clf_wg_max(float v, __local float *red) {
  const uint lid = get_local_id(0), n = get_local_size(0);
  red[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = n / 2; s > 0; s >>= 1) {
    if (lid < s) red[lid] = fmax(red[lid], red[lid + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = red[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}
