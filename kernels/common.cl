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

/* The activations, numbered as clf_activation. */
#define CLF_ACT_NONE 0
#define CLF_ACT_RELU 1
#define CLF_ACT_GELU 2
#define CLF_ACT_GELU_TANH 3
#define CLF_ACT_SILU 4
#define CLF_ACT_TANH 5

/* sqrt(2 / pi) */
#define CLF_GELU_K0 0.7978845608028654f

/* The activations, written to stay accurate in their tails:
 * gelu: 0.5 x (1 + erf(x/sqrt2)) = 0.5 x erfc(-x/sqrt2);
 * gelu_tanh: 0.5 x (1 + tanh(u)) = x * sigmoid(2u) = x / (1 + exp(-2u)).
 * relu keeps a NaN (as torch does). */
inline float clf_act(float x, int act) {
  switch (act) {
    case CLF_ACT_RELU: return x < 0.0f ? 0.0f : x;
    case CLF_ACT_GELU: return 0.5f * x * erfc(-x * M_SQRT1_2_F);
    case CLF_ACT_GELU_TANH: {
      const float u = CLF_GELU_K0 * (x + 0.044715f * x * x * x);
      return x / (1.0f + exp(-2.0f * u));
    }
    case CLF_ACT_SILU: return x / (1.0f + exp(-x));
    case CLF_ACT_TANH: return tanh(x);
    default: return x;
  }
}

inline float4 clf_act4(float4 x, int act) {
  switch (act) {
    case CLF_ACT_RELU: return select(x, (float4)(0.0f), x < 0.0f);
    case CLF_ACT_GELU: return 0.5f * x * erfc(-x * M_SQRT1_2_F);
    case CLF_ACT_GELU_TANH: {
      const float4 u = CLF_GELU_K0 * (x + 0.044715f * x * x * x);
      return x / (1.0f + exp(-2.0f * u));
    }
    case CLF_ACT_SILU: return x / (1.0f + exp(-x));
    case CLF_ACT_TANH: return tanh(x);
    default: return x;
  }
}
