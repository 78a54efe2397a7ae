/* norm.cl - layer normalisation over the last dim, with a fused residual add.
 *
 * One work-group per row.  Two passes over the row (mean, then the variance
 * of the centred values) keep the variance accurate for rows with a large
 * mean, as PyTorch's LayerNorm does.
 */

/* s = x + r (when has_res); sum_out = s (when has_sum);
 * y = (s - mean) * rsqrt(var + eps) * gamma + beta (beta when has_beta). */
__kernel void layer_norm(__global const float *x, uint x_off,
                         __global const float *r, uint r_off, int has_res,
                         __global const float *gamma, uint g_off,
                         __global const float *beta, uint b_off, int has_beta,
                         __global float *sum_out, uint s_off, int has_sum,
                         __global float *y, uint y_off,
                         uint D, float eps) {
  __local float red[CLF_RED_WG];
  const uint row = get_group_id(0), lid = get_local_id(0), n = get_local_size(0);
  const size_t base = (size_t)row * D;
  x += x_off + base;
  r += r_off + base;
  gamma += g_off;
  beta += b_off;
  sum_out += s_off + base;
  y += y_off + base;

  float acc = 0.0f;
  for (uint d = lid; d < D; d += n) acc += has_res ? x[d] + r[d] : x[d];
  const float mean = clf_wg_sum(acc, red) / (float)D;

  acc = 0.0f;
  for (uint d = lid; d < D; d += n) {
    const float c = (has_res ? x[d] + r[d] : x[d]) - mean;
    acc += c * c;
  }
  const float rstd = rsqrt(clf_wg_sum(acc, red) / (float)D + eps);

  for (uint d = lid; d < D; d += n) {
    const float s = has_res ? x[d] + r[d] : x[d];
    if (has_sum) sum_out[d] = s;
    y[d] = (s - mean) * rstd * gamma[d] + (has_beta ? beta[d] : 0.0f);
  }
}
