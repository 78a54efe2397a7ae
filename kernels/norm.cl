/* norm.cl - layer normalisation and RMS normalisation over the last dim,
 * with a fused residual add (and the bias of the layer that made the
 * residual branch, so that layer needs no pass of its own for it).
 *
 * One work-group per row.  Two passes over the row (mean, then the variance
 * of the centred values) keep the variance accurate for rows with a large
 * mean, as PyTorch's LayerNorm does.  With rms set the mean is taken as 0,
 * so the second pass is mean(s^2), as Llama's RMSNorm.
 */

/* s = x + (r + rb) (r when has_res, rb [D] when has_rb: the bias of the
 * layer that made r, added as that layer would have); sum_out = s (when
 * has_sum);
 * y = (s - mean) * rsqrt(var + eps) * gamma + beta (beta when has_beta);
 * rms: mean = 0 and var = mean(s^2). */
/* Element d of s: x + (r + rb), as far as given. */
inline float clf_ln_in(__global const float *x, __global const float *r, int has_res, __global const float *rb,
                       int has_rb, uint d) {
  if (!has_res) return x[d];
  return x[d] + (has_rb ? r[d] + rb[d] : r[d]);
}

inline void clf_layer_norm_group(__global const float *x, uint x_off,
                                 __global const float *r, uint r_off, int has_res,
                                 __global const float *rb, uint rb_off, int has_rb,
                                 __global const float *gamma, uint g_off,
                                 __global const float *beta, uint b_off, int has_beta,
                                 __global float *sum_out, uint s_off, int has_sum,
                                 __global float *y, uint y_off,
                                 uint D, float eps, int rms, __local float *red, int sg) {
  const uint row = get_group_id(0), lid = get_local_id(0), n = get_local_size(0);
  const size_t base = (size_t)row * D;
  x += x_off + base;
  r += r_off + base;
  rb += rb_off;
  gamma += g_off;
  beta += b_off;
  sum_out += s_off + base;
  y += y_off + base;

  float acc = 0.0f, mean = 0.0f;
  if (!rms) { /* uniform over the launch */
    for (uint d = lid; d < D; d += n) acc += clf_ln_in(x, r, has_res, rb, has_rb, d);
    mean = clf_red_sum(acc, red, sg) / (float)D;
  }

  acc = 0.0f;
  for (uint d = lid; d < D; d += n) {
    const float c = clf_ln_in(x, r, has_res, rb, has_rb, d) - mean;
    acc += c * c;
  }
  const float rstd = rsqrt(clf_red_sum(acc, red, sg) / (float)D + eps);

  for (uint d = lid; d < D; d += n) {
    const float s = clf_ln_in(x, r, has_res, rb, has_rb, d);
    if (has_sum) sum_out[d] = s;
    y[d] = (s - mean) * rstd * gamma[d] + (has_beta ? beta[d] : 0.0f);
  }
}

#define CLF_LN_PARAMS                                                                                         \
  __global const float *x, uint x_off, __global const float *r, uint r_off, int has_res,                     \
      __global const float *rb, uint rb_off, int has_rb, __global const float *gamma, uint g_off,           \
      __global const float *beta, uint b_off, int has_beta, __global float *sum_out, uint s_off, int has_sum, \
      __global float *y, uint y_off, uint D, float eps, int rms
#define CLF_LN_ARGS                                                                                             \
  x, x_off, r, r_off, has_res, rb, rb_off, has_rb, gamma, g_off, beta, b_off, has_beta, sum_out, s_off, has_sum, \
      y, y_off, D, eps, rms

/* The host runs layer_norm with at most 128 work-items (norm.c): a
 * reduction array of 128 floats, 512 bytes, fits a device (or limit) of
 * 1 KiB of local memory with what a driver adds to a kernel's count
 * (NVIDIA's: 256 floats came to more than 1 KiB). */
#define CLF_LN_RED_WG 128
__kernel void layer_norm(CLF_LN_PARAMS) {
  __local float red[CLF_LN_RED_WG];
  clf_layer_norm_group(CLF_LN_ARGS, red, 0);
}

/* The same, its two reductions through sub-groups (the variant
 * norm.layer_norm_sg). */
#if CLF_USE_SUBGROUPS
__kernel void layer_norm_sg(CLF_LN_PARAMS) {
  __local float red[CLF_LN_RED_WG];
  clf_layer_norm_group(CLF_LN_ARGS, red, 1);
}
#endif

/* The same, one work-item per row, for CPU devices: no barriers (which a
 * CPU runtime turns into loop fission around every reduction step), and the
 * row read 8 floats at a time (a scalar tail past the last 8).  A CPU
 * runtime vectorises across work-items otherwise, and neighbouring items
 * read rows D apart: gathers, at a third of the speed on Intel's runtime
 * (Swin-T's norms 20 ms against 7) and half on PoCL.  Same arguments plus
 * the row count. */
inline float8 clf_ln_in8(__global const float *x, __global const float *r, int has_res, __global const float *rb,
                         int has_rb, uint d8) {
  if (!has_res) return vload8(d8, x);
  return vload8(d8, x) + (has_rb ? vload8(d8, r) + vload8(d8, rb) : vload8(d8, r));
}

/* The sum of a float8's lanes, through dot() (Oclgrind 21.10's
 * uninitialised-value checker crashes on extracting a vector's element). */
inline float clf_sum8(float8 v) { return dot(v.lo + v.hi, (float4)(1.0f)); }

__kernel void layer_norm_rows(__global const float *x, uint x_off,
                              __global const float *r, uint r_off, int has_res,
                              __global const float *rb, uint rb_off, int has_rb,
                              __global const float *gamma, uint g_off,
                              __global const float *beta, uint b_off, int has_beta,
                              __global float *sum_out, uint s_off, int has_sum,
                              __global float *y, uint y_off,
                              uint D, float eps, int rms, uint rows
#if NORM_Q8
                              , __global char *q, __global float *ds, uint ds_off
#endif
                              ) {
  const uint row = get_global_id(0);
  if (row >= rows) return;
  const size_t base = (size_t)row * D;
  x += x_off + base;
  r += r_off + base;
  rb += rb_off;
  gamma += g_off;
  beta += b_off;
  sum_out += s_off + base;
  y += y_off + base;
  const uint D8 = D / 8, tail = D8 * 8;
  float8 a = 0.0f;
  float t = 0.0f, mean = 0.0f;
  if (!rms) {
    for (uint d = 0; d < D8; d++) a += clf_ln_in8(x, r, has_res, rb, has_rb, d);
    for (uint d = tail; d < D; d++) t += clf_ln_in(x, r, has_res, rb, has_rb, d);
    mean = (clf_sum8(a) + t) / (float)D;
    a = 0.0f;
    t = 0.0f;
  }
  for (uint d = 0; d < D8; d++) {
    const float8 c = clf_ln_in8(x, r, has_res, rb, has_rb, d) - mean;
    a = fma(c, c, a);
  }
  for (uint d = tail; d < D; d++) {
    const float c = clf_ln_in(x, r, has_res, rb, has_rb, d) - mean;
    t = fma(c, c, t);
  }
  const float rstd = rsqrt((clf_sum8(a) + t) / (float)D + eps);
#if NORM_Q8
  /* y also quantized to 8-bit blocks of 32 for the integer products that
   * read it (D a multiple of 32, as the host checks): the blocks the
   * linear op's quantize_q8 would make from y, without its launch */
  q += (size_t)row * D;
  ds += ds_off + (size_t)row * (D / 32) * 2;
  for (uint c = 0; c < D / 32; c++) {
    float8 v[4];
    for (uint i = 0; i < 4; i++) {
      const uint d = 4 * c + i;
      const float8 s = clf_ln_in8(x, r, has_res, rb, has_rb, d);
      if (has_sum) vstore8(s, d, sum_out);
      v[i] = (s - mean) * rstd * vload8(d, gamma) + (has_beta ? vload8(d, beta) : (float8)(0.0f));
      vstore8(v[i], d, y);
    }
    clf_q8_block(v, q + 32 * c, ds + 2 * c);
  }
  return;
#endif
  for (uint d = 0; d < D8; d++) {
    const float8 s = clf_ln_in8(x, r, has_res, rb, has_rb, d);
    if (has_sum) vstore8(s, d, sum_out);
    vstore8((s - mean) * rstd * vload8(d, gamma) + (has_beta ? vload8(d, beta) : (float8)(0.0f)), d, y);
  }
  for (uint d = tail; d < D; d++) {
    const float s = clf_ln_in(x, r, has_res, rb, has_rb, d);
    if (has_sum) sum_out[d] = s;
    y[d] = (s - mean) * rstd * gamma[d] + (has_beta ? beta[d] : 0.0f);
  }
}
