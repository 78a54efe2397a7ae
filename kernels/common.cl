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

/* Sub-group reductions, built only into the variants that the host asks
 * for with -DCLF_USE_SUBGROUPS=1 (the device has cl_khr_subgroups or
 * cl_intel_subgroups, and the variant passed self-validation): each
 * sub-group reduces with one built-in, then every work-item combines the
 * per-sub-group partials from red (get_num_sub_groups() of them, in one
 * order, so all get the same value).  Correct for any sub-group size the
 * implementation chooses.  clf_red_sum / clf_red_max pick them when sg is
 * set (a compile-time constant where they are called). */
#ifndef CLF_USE_SUBGROUPS
#define CLF_USE_SUBGROUPS 0
#endif
#if CLF_USE_SUBGROUPS
#ifdef cl_khr_subgroups
#pragma OPENCL EXTENSION cl_khr_subgroups : enable
#endif
inline float clf_sg_wg_sum(float v, __local float *red) {
  const float p = sub_group_reduce_add(v);
  if (get_sub_group_local_id() == 0) red[get_sub_group_id()] = p;
  barrier(CLK_LOCAL_MEM_FENCE);
  float r = 0.0f;
  for (uint i = 0, n = get_num_sub_groups(); i < n; i++) r += red[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

inline float clf_sg_wg_max(float v, __local float *red) {
  const float p = sub_group_reduce_max(v);
  if (get_sub_group_local_id() == 0) red[get_sub_group_id()] = p;
  barrier(CLK_LOCAL_MEM_FENCE);
  float r = -INFINITY;
  for (uint i = 0, n = get_num_sub_groups(); i < n; i++) r = fmax(r, red[i]);
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}
#endif

inline float clf_red_sum(float v, __local float *red, int sg) {
#if CLF_USE_SUBGROUPS
  if (sg) return clf_sg_wg_sum(v, red);
#endif
  return clf_wg_sum(v, red);
}

inline float clf_red_max(float v, __local float *red, int sg) {
#if CLF_USE_SUBGROUPS
  if (sg) return clf_sg_wg_max(v, red);
#endif
  return clf_wg_max(v, red);
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

/* erf(z) as z P(z^2) / Q(z^2) on z clamped to [-4, 4] (past 4, erf is 1 in
 * float): a rational fitted to erf on [0, 4] for this library (weighted
 * least squares, float coefficients).  Its error evaluated in float is at
 * most 4e-7 (about 4 ulp of erf's value); libm's erfc, which PoCL runs one
 * element at a time, cost 17x a bias pass, this 2-3x.  Branch-free, so it
 * vectorises. */
#define CLF_ERF_P(z2)                                                             \
  mad(mad(mad(mad(mad(mad(1.921702975e-08f, z2, -1.990275450e-06f), z2,           \
                      1.555296767e-04f), z2, 4.292799626e-03f), z2, 5.243271589e-02f), \
          z2, 2.139390558e-01f), z2, 1.128378630e+00f)
#define CLF_ERF_Q(z2) \
  mad(mad(mad(mad(1.097972854e-03f, z2, 1.555059757e-02f), z2, 1.207972839e-01f), z2, 5.229262114e-01f), z2, 1.0f)
inline float clf_erf(float z) {
  z = clamp(z, -4.0f, 4.0f);
  const float z2 = z * z;
  return z * CLF_ERF_P(z2) / CLF_ERF_Q(z2);
}
inline float4 clf_erf4(float4 z) {
  z = clamp(z, -4.0f, 4.0f);
  const float4 z2 = z * z;
  return z * CLF_ERF_P(z2) / CLF_ERF_Q(z2);
}

/* The activations:
 * gelu: 0.5 x (1 + erf(x/sqrt2)), as torch computes it (within 2e-7 |x|);
 * gelu_tanh: 0.5 x (1 + tanh(u)) = x * sigmoid(2u) = x / (1 + exp(-2u)),
 * accurate in its tails.
 * relu keeps a NaN (as torch does). */
inline float clf_act(float x, int act) {
  switch (act) {
    case CLF_ACT_RELU: return x < 0.0f ? 0.0f : x;
    case CLF_ACT_GELU: return 0.5f * x * (1.0f + clf_erf(x * M_SQRT1_2_F));
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
    case CLF_ACT_GELU: return 0.5f * x * (1.0f + clf_erf4(x * M_SQRT1_2_F));
    case CLF_ACT_GELU_TANH: {
      const float4 u = CLF_GELU_K0 * (x + 0.044715f * x * x * x);
      return x / (1.0f + exp(-2.0f * u));
    }
    case CLF_ACT_SILU: return x / (1.0f + exp(-x));
    case CLF_ACT_TANH: return tanh(x);
    default: return x;
  }
}

/* x's block of 32 (v[0..3]) quantized as the integer path of the linear
 * op reads it (issue 42): q[0..31] = rint(v / d) in int8 with d = max|v| /
 * 127 (0 for an all-zero block: quants 0), ds[0] = d, ds[1] = the quants'
 * sum as a float; the operations of ggml's quantize_row_q8_1 (1 / d, then
 * a multiply), rounded to nearest even.  Here because two kernels make
 * these blocks, linear.cl's quantize_q8 and norm.cl's layer_norm_rows
 * built with NORM_Q8, and the tests' reference (clf__ref_quantize_q8)
 * repeats exactly these operations. */
inline void clf_q8_block(const float8 *v, __global char *q, __global float *ds) {
  float8 a = fabs(v[0]);
  for (uint i = 1; i < 4; i++) a = fmax(a, fabs(v[i]));
  float t[8]; /* through memory: Oclgrind 21.10 crashes extracting a vector's element */
  vstore8(a, 0, t);
  float amax = 0.0f;
  for (uint i = 0; i < 8; i++) amax = fmax(amax, t[i]);
  const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  float8 sum = (float8)(0.0f);
  for (uint i = 0; i < 4; i++) {
    const int8 qi = convert_int8_sat_rte(v[i] * id);
    vstore8(convert_char8_sat(qi), i, q);
    sum += convert_float8(qi);
  }
  ds[0] = d;
  ds[1] = dot(sum.lo + sum.hi, (float4)(1.0f));
}

/* Soft-capping of an attention score (Gemma 2's attn_logit_softcapping):
 * cap * tanh(x / cap), applied to the scaled score before the bias and the
 * masks; cap 0 (or less): x as it is.  One definition for attention.cl and
 * paged.cl, so that the contiguous and the paged paths cannot differ. */
inline float clf_softcap(float x, float cap) { return cap > 0.0f ? cap * tanh(x / cap) : x; }
inline float8 clf_softcap8(float8 x, float cap) { return cap > 0.0f ? cap * tanh(x / cap) : x; }

/* `bytes` bytes from p asked for ahead (a hint: nothing is read).  PoCL
 * compiles for the host's triple (__x86_64__) and makes OpenCL's prefetch
 * nothing, so there clang's builtin asks for each 64-byte line; elsewhere
 * OpenCL's prefetch, which a GPU may take as a hint or as nothing.  Used by
 * the one-row products' weight blocks (linear.cl) and the CPU attention's
 * key and value blocks (paged.cl). */
#if defined(__x86_64__) && defined(__clang__)
#define CLF_PREFETCH(p, bytes)                                                                   \
  do {                                                                                           \
    __global const uchar *p_ = (__global const uchar *)(p);                                      \
    for (uint l_ = 0; l_ < (uint)(bytes); l_ += 64) __builtin_prefetch(p_ + l_);                   \
  } while (0)
#else
#define CLF_PREFETCH(p, bytes) prefetch((__global const uchar *)(p), (bytes))
#endif
