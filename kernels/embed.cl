/* embed.cl - row gathers (token embeddings, clf_gather_rows), learned and
 * sinusoidal position embeddings.
 *
 * Options: -DCLF_IDX64=1 reads ids as long (i64), else int (i32).
 * -DCLF_SIN_F32=1 (set by the host on devices without fp64) computes the
 * sinusoid angles in float-float arithmetic instead of double.
 *
 * The kernels run one item per output element: range dim 0 walks the D
 * elements of a row (coalesced reads and writes), dims 1 and 2 index rows
 * and batches directly, so no item divides.
 */

#if CLF_IDX64
#define CLF_IDX_T long
#define CLF_IDX_U ulong
#else
#define CLF_IDX_T int
#define CLF_IDX_U uint
#endif

/* out[b, y_row0 + k, d] = (accumulate ? out : 0) + scale * src, where src
 * is x[b, x_row0 + id, d] when 0 <= id < n_valid and 0 otherwise, with
 * id = ids[b * K + k].  Range: (d, k, b).  Token embeddings use one batch
 * (x_bstride = y_bstride = 0). */
__kernel void gather_rows(__global const float *x, uint x_off,
                          __global const CLF_IDX_T *ids, uint ids_off,
                          __global float *y, uint y_off,
                          uint D, uint K,
                          uint x_bstride, uint x_row0, uint n_valid,
                          uint y_bstride, uint y_row0,
                          float scale, int accumulate) {
  const uint d = get_global_id(0), k = get_global_id(1), b = get_global_id(2);
  if (d >= D || k >= K) return;
  /* The id is tested in its own type, never widened first: Mesa 22.3's
   * rusticl on llvmpipe compares a sign-extended int with a constant as if
   * unsigned ((long)i < 0 is false for i = -1), so id -1 passed the test and
   * read row x_row0 - 1 (wrapped: row 2^32 - 1 and a crash when x_row0 is
   * 0).  tests/test_embed.c (driver_sext_compare) keeps the kernel that
   * shows it. */
  const CLF_IDX_T id = ids[ids_off + b * K + k];
  __global float *o = y + y_off + (size_t)b * y_bstride + (size_t)(y_row0 + k) * D + d;
  if (id < 0 || (CLF_IDX_U)id >= n_valid) { /* a row of zeros */
    if (!accumulate) *o = 0.0f;
    return;
  }
  const float v = scale * x[x_off + (size_t)b * x_bstride + (size_t)(x_row0 + (uint)id) * D + d];
  *o = accumulate ? *o + v : v;
}

/* y[b, l, d] = (accumulate ? y : 0) + table[start + l, d].  Range: (d, l, b). */
__kernel void position_embedding(__global const float *table, uint t_off,
                                 __global float *y, uint y_off,
                                 uint D, uint L, uint start, int accumulate) {
  const uint d = get_global_id(0), l = get_global_id(1), b = get_global_id(2);
  if (d >= D || l >= L) return;
  const float v = table[t_off + (size_t)(start + l) * D + d];
  __global float *o = y + y_off + ((size_t)b * L + l) * D + d;
  *o = accumulate ? *o + v : v;
}

/* ---- sinusoids ---- */

#if CLF_HAS_FP64 && !defined(CLF_SIN_F32)
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

/* sin or cos of p / 10000^(2i / D) in double (as numpy builds Marian's and
 * the paper's tables), rounded once to float.  exp(-(2i/D) ln 10000) is
 * within a few double ulps of numpy's pow and about twice as fast. */
inline float clf_sinusoid(uint p, uint i, uint D, int is_cos, float2 base, float2 inv_pi) {
  const double angle = (double)p * exp((double)(2 * i) / (double)D * -9.2103403719761836);
  return (float)(is_cos ? cos(angle) : sin(angle));
}

#else
/* Float path.  A float angle near p = 1000 carries an error of ~3e-5, so the
 * angle is formed in float-float (a hi + lo pair, ~44 bits): w = base^i / pi
 * by square-and-multiply from base = 10000^(-2/D) and 1/pi given by the host
 * as float-float pairs, then t = p * w (the turns of pi), reduced exactly
 * modulo 2 before sinpi/cospi. */
#pragma OPENCL FP_CONTRACT OFF

inline float2 clf_ff_mul(float2 a, float2 b) {
  const float p = a.x * b.x;
  float e = fma(a.x, b.x, -p);
  e += a.x * b.y + a.y * b.x;
  const float s = p + e;
  return (float2)(s, e - (s - p));
}

inline float clf_sinusoid(uint p, uint i, uint D, int is_cos, float2 base, float2 inv_pi) {
  float2 w = inv_pi, pw = base;
  for (uint e = i; e; e >>= 1) {
    if (e & 1u) w = clf_ff_mul(w, pw);
    pw = clf_ff_mul(pw, pw);
  }
  const float pf = (float)p; /* exact for p < 2^24 */
  const float th = pf * w.x;
  const float tl = fma(pf, w.x, -th) + pf * w.y;
  /* th - 2 * rint(th / 2) is exact: a multiple of ulp(th) below 1 in size. */
  const float r = (th - 2.0f * rint(0.5f * th)) + tl;
  return is_cos ? cospi(r) : sinpi(r);
}
#endif

/* y[b, l, c] = (accumulate ? y : 0) + PE(start + l, c) for b < B, rows of
 * [B, L, D].  PE: interleaved (halves = 0): pair i = c / 2, sin for even c,
 * cos for odd c; halves: c < ceil(D/2) is sin of pair c, the rest cos of
 * pair c - ceil(D/2).  Range: (c, l); each item writes its value to all B. */
__kernel void sinusoidal_embedding(__global float *y, uint y_off,
                                   uint D, uint L, uint B, uint start,
                                   int halves, int accumulate,
                                   float base_hi, float base_lo,
                                   float inv_pi_hi, float inv_pi_lo) {
  const uint c = get_global_id(0), l = get_global_id(1);
  if (c >= D || l >= L) return;
  const uint n_sin = (D + 1) / 2; /* columns of sines in the halves layout */
  uint i;
  int is_cos;
  if (halves) {
    is_cos = c >= n_sin;
    i = is_cos ? c - n_sin : c;
  } else {
    is_cos = c & 1u;
    i = c >> 1;
  }
  const float v = clf_sinusoid(start + l, i, D, is_cos, (float2)(base_hi, base_lo),
                               (float2)(inv_pi_hi, inv_pi_lo));
  const size_t plane = (size_t)L * D;
  __global float *o = y + y_off + (size_t)l * D + c;
  for (uint b = 0; b < B; b++, o += plane) *o = accumulate ? *o + v : v;
}
