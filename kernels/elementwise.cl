/* elementwise.cl - the dense family's kernels: bias + activation, gated
 * linear units, broadcast
 * add, scale, softmax over the last dim, dtype casts, and the beta-scaling
 * of C that a GEMM with K = 0 reduces to.
 *
 * One program, no -D variants: the activation is a uniform runtime argument.
 * The f32 element-wise kernels handle 4 consecutive elements per work-item
 * (vload4/vstore4 need only float alignment, so any view offset works) and
 * fall back to scalars where a row boundary or the end splits the 4.
 */

/* The activations (clf_act, clf_act4) are in common.cl. */

/* y = act(x + bias[i % D]) over n elements (bias only when has_bias). */
__kernel void bias_act(__global const float *x, uint x_off,
                       __global const float *bias, uint b_off, int has_bias,
                       int act, __global float *y, uint y_off, uint n,
                       uint D) {
  const uint i = get_global_id(0) * 4;
  if (i >= n) return;
  x += x_off;
  bias += b_off;
  y += y_off;
  const uint col = i % D;
  if (i + 4 <= n && col + 4 <= D) {
    float4 v = vload4(0, x + i);
    if (has_bias) v += vload4(0, bias + col);
    vstore4(clf_act4(v, act), 0, y + i);
  } else {
    for (uint j = 0; j < 4 && i + j < n; j++) {
      const float v = x[i + j] + (has_bias ? bias[(i + j) % D] : 0.0f);
      y[i + j] = clf_act(v, act);
    }
  }
}

/* Gated linear unit: y[r, f] = act(g[r, f]) * g[r, F + f] for y [rows, F],
 * g [rows, 2F] ([gate | up]); n = rows * F. */
__kernel void glu(__global const float *g, uint g_off, int act,
                  __global float *y, uint y_off, uint n, uint F) {
  const uint i = get_global_id(0) * 4;
  if (i >= n) return;
  g += g_off;
  y += y_off;
  const uint r = i / F, f = i - r * F;
  __global const float *gr = g + (size_t)r * 2 * F;
  if (i + 4 <= n && f + 4 <= F) {
    vstore4(clf_act4(vload4(0, gr + f), act) * vload4(0, gr + F + f), 0, y + i);
  } else {
    for (uint j = 0; j < 4 && i + j < n; j++) {
      const uint rj = (i + j) / F, fj = i + j - rj * F;
      y[i + j] = clf_act(g[(size_t)rj * 2 * F + fj], act) * g[(size_t)rj * 2 * F + F + fj];
    }
  }
}

/* glu, and y's 8-bit blocks of 32 for the integer product that reads it
 * (down_proj), as linear.cl's quantize_q8 makes them (common.cl's
 * clf_q8_block), in the one launch: a work-item a block, F a multiple of
 * 32 (the host checks).  global (rows * F / 32). */
__kernel void glu_q8(__global const float *g, uint g_off, int act, __global float *y, uint y_off, uint rows, uint F,
                     __global char *q, __global float *ds, uint ds_off) {
  const uint b = get_global_id(0), nb = F / 32;
  if (b >= rows * nb) return;
  const uint r = b / nb, c = b - r * nb;
  __global const float *gr = g + g_off + (size_t)r * 2 * F + 32 * c;
  float8 v[4];
  for (uint i = 0; i < 4; i++) {
    const float4 lo = clf_act4(vload4(2 * i, gr), act) * vload4(2 * i, gr + F);
    const float4 hi = clf_act4(vload4(2 * i + 1, gr), act) * vload4(2 * i + 1, gr + F);
    v[i] = (float8)(lo, hi);
    vstore8(v[i], 0, y + y_off + (size_t)b * 32 + 8 * i);
  }
  clf_q8_block(v, q + (size_t)b * 32, ds + ds_off + 2 * (size_t)b);
}

/* y = alpha * x over n elements. */
__kernel void scale(__global const float *x, uint x_off, float alpha,
                    __global float *y, uint y_off, uint n) {
  const uint i = get_global_id(0) * 4;
  if (i >= n) return;
  x += x_off;
  y += y_off;
  if (i + 4 <= n) {
    vstore4(alpha * vload4(0, x + i), 0, y + i);
  } else {
    for (uint j = i; j < n; j++) y[j] = alpha * x[j];
  }
}

/* b's element for a's flat index i.  a's shape is given as nd merged dims,
 * innermost first (dims.s0 ... dims.s5); bstr holds b's stride for each (0
 * where b broadcasts).  Unrolled over the vector components so that nothing
 * lands in private arrays. */
#define CLF_BCAST_STEP(K)                                 \
  if (nd > K) {                                           \
    const uint q = rem / dims.s##K;                       \
    bi += (rem - q * dims.s##K) * bstr.s##K;              \
    rem = q;                                              \
  }
inline uint clf_bcast_index(uint i, uint nd, uint8 dims, uint8 bstr) {
  uint rem = i, bi = 0;
  CLF_BCAST_STEP(0)
  CLF_BCAST_STEP(1)
  CLF_BCAST_STEP(2)
  CLF_BCAST_STEP(3)
  CLF_BCAST_STEP(4)
  CLF_BCAST_STEP(5)
  return bi;
}

/* y = a + b with b broadcast against a (see clf_bcast_index).  When the 4
 * elements stay in one innermost run, b's 4 are consecutive (bstr.s0 == 1)
 * or one value (bstr.s0 == 0). */
__kernel void add_bcast(__global const float *a, uint a_off,
                        __global const float *b, uint b_off,
                        __global float *y, uint y_off, uint n, uint nd,
                        uint8 dims, uint8 bstr) {
  const uint i = get_global_id(0) * 4;
  if (i >= n) return;
  a += a_off;
  b += b_off;
  y += y_off;
  const uint bi = clf_bcast_index(i, nd, dims, bstr);
  const uint c0 = i - i / dims.s0 * dims.s0; /* position in the innermost run */
  if (i + 4 <= n && c0 + 4 <= dims.s0) {
    const float4 bv = bstr.s0 ? vload4(0, b + bi) : (float4)(b[bi]);
    vstore4(vload4(0, a + i) + bv, 0, y + i);
  } else {
    y[i] = a[i] + b[bi];
    for (uint j = i + 1; j < i + 4 && j < n; j++)
      y[j] = a[j] + b[clf_bcast_index(j, nd, dims, bstr)];
  }
}

/* y = softmax(scale * x) over rows of D, one work-group per row, in three
 * coalesced sweeps of the row: max, sum of exp(v - max), write.  The row is
 * re-read from cache; on PoCL this measured faster (52 vs 72 ms for
 * 48x197x197) than an online (max, sum) pass, whose data-dependent rescaling
 * diverges.  -INFINITY entries contribute 0; a row with every entry
 * -INFINITY gets zeros.  y may be x (each element is read and written by the
 * same work-item). */
inline void clf_softmax_row(__global const float *x, uint x_off, __global float *y, uint y_off, uint D,
                            float scale, __local float *red, int sg) {
  const uint row = get_group_id(0), lid = get_local_id(0),
             nl = get_local_size(0);
  x += x_off + (size_t)row * D;
  y += y_off + (size_t)row * D;

  float m = -INFINITY;
  for (uint d = lid; d < D; d += nl) m = fmax(m, scale * x[d]);
  const float gmax = clf_red_max(m, red, sg);
  float s = 0.0f;
  if (gmax != -INFINITY)
    for (uint d = lid; d < D; d += nl) s += exp(scale * x[d] - gmax);
  const float sum = clf_red_sum(s, red, sg);
  if (gmax == -INFINITY) {
    for (uint d = lid; d < D; d += nl) y[d] = 0.0f;
    return;
  }
  const float inv = 1.0f / sum;
  for (uint d = lid; d < D; d += nl) y[d] = exp(scale * x[d] - gmax) * inv;
}

__kernel void softmax_rows(__global const float *x, uint x_off,
                           __global float *y, uint y_off, uint D,
                           float scale) {
  __local float red[CLF_RED_WG];
  clf_softmax_row(x, x_off, y, y_off, D, scale, red, 0);
}

/* The same, its reductions through sub-groups (elementwise.softmax_sg). */
#if CLF_USE_SUBGROUPS
__kernel void softmax_rows_sg(__global const float *x, uint x_off,
                              __global float *y, uint y_off, uint D,
                              float scale) {
  __local float red[CLF_RED_WG];
  clf_softmax_row(x, x_off, y, y_off, D, scale, red, 1);
}
#endif

/* ---- casts: cast_<src>_<dst> for every pair of f32, f16, i32, i64 ----
 * Each work-item converts CLF_CAST_PER_ITEM elements, a work-group's
 * accesses being consecutive for each of them.  f16 goes through float with
 * vload_half / vstore_half_rte (core OpenCL 1.2); float -> int truncates
 * toward zero and saturates (NaN -> 0); i64 -> i32 wraps modulo 2^32. */
#define CLF_CAST_PER_ITEM 4

#define CLF_LOAD_f32(p, i) ((p)[i])
#define CLF_LOAD_f16(p, i) vload_half((i), (p))
#define CLF_LOAD_i32(p, i) ((p)[i])
#define CLF_LOAD_i64(p, i) ((p)[i])
#define CLF_STORE_f32(p, i, v) ((p)[i] = (v))
#define CLF_STORE_f16(p, i, v) vstore_half_rte((v), (i), (p))
#define CLF_STORE_i32(p, i, v) ((p)[i] = (v))
#define CLF_STORE_i64(p, i, v) ((p)[i] = (v))

/* The spec sends NaN to 0 in saturating conversions; not every
 * implementation does (Oclgrind), so it is explicit. */
inline int clf_float_to_int(float v) { return isnan(v) ? 0 : convert_int_sat_rtz(v); }
inline long clf_float_to_long(float v) { return isnan(v) ? 0 : convert_long_sat_rtz(v); }

/* Conversions between the loaded values (f16 loads as float). */
#define CLF_CVT_f32_f32(v) (v)
#define CLF_CVT_f32_f16(v) (v)
#define CLF_CVT_f32_i32(v) clf_float_to_int(v)
#define CLF_CVT_f32_i64(v) clf_float_to_long(v)
#define CLF_CVT_f16_f32(v) (v)
#define CLF_CVT_f16_f16(v) (v)
#define CLF_CVT_f16_i32(v) clf_float_to_int(v)
#define CLF_CVT_f16_i64(v) clf_float_to_long(v)
#define CLF_CVT_i32_f32(v) convert_float_rte(v)
#define CLF_CVT_i32_f16(v) convert_float_rte(v)
#define CLF_CVT_i32_i32(v) (v)
#define CLF_CVT_i32_i64(v) convert_long(v)
#define CLF_CVT_i64_f32(v) convert_float_rte(v)
#define CLF_CVT_i64_f16(v) convert_float_rte(v)
#define CLF_CVT_i64_i32(v) as_int(convert_uint(as_ulong(v)))
#define CLF_CVT_i64_i64(v) (v)

/* Storage types (f16 as half, which OpenCL 1.2 allows behind a pointer). */
#define CLF_T_f32 float
#define CLF_T_f16 half
#define CLF_T_i32 int
#define CLF_T_i64 long

#define CLF_CAST_KERNEL(S, D)                                                 \
  __kernel void cast_##S##_##D(__global const CLF_T_##S *x, uint x_off,       \
                               __global CLF_T_##D *y, uint y_off, uint n) {   \
    const uint nl = get_local_size(0);                                        \
    const uint base = get_group_id(0) * nl * CLF_CAST_PER_ITEM +              \
                      get_local_id(0);                                        \
    x += x_off;                                                               \
    y += y_off;                                                               \
    for (uint j = 0; j < CLF_CAST_PER_ITEM; j++) {                            \
      const uint i = base + j * nl;                                           \
      if (i < n) CLF_STORE_##D(y, i, CLF_CVT_##S##_##D(CLF_LOAD_##S(x, i)));  \
    }                                                                         \
  }

#define CLF_CAST_FROM(S) \
  CLF_CAST_KERNEL(S, f32) \
  CLF_CAST_KERNEL(S, f16) \
  CLF_CAST_KERNEL(S, i32) \
  CLF_CAST_KERNEL(S, i64)

CLF_CAST_FROM(f32)
CLF_CAST_FROM(f16)
CLF_CAST_FROM(i32)
CLF_CAST_FROM(i64)

/* C_b[r, c] = beta * C_b[r, c] for b < batch, r < m, c < n (row stride ldc,
 * batch stride stride_c): what C = alpha op(A) op(B) + beta C is when K = 0.
 * beta 0 writes zeros without reading C, as BLAS does. */
__kernel void gemm_beta(__global float *c, uint c_off, uint m, uint n,
                        uint ldc, uint stride_c, uint batch, float beta) {
  const uint i = get_global_id(0);
  if (i >= batch * m * n) return;
  /* Quotients and remainders spelled out: a / paired with a % becomes an
   * LLVM `freeze` that Oclgrind's uninitialised-value checker rejects. */
  const uint rest = i / n, col = i - rest * n, b = rest / m, r = rest - b * m;
  __global float *p = c + c_off + (size_t)b * stride_c + (size_t)r * ldc + col;
  *p = beta == 0.0f ? 0.0f : beta * *p;
}
