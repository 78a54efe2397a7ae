/* movement.cl - data movement: strided copies (permute, head split/merge,
 * row copies), a tiled transpose for permutes that move the innermost dim,
 * and the head split with rotary position embeddings.
 *
 * Options: -DCLF_ELEM=ushort|uint|ulong, the element moved (by dtype size:
 * the kernels copy bits, so f32 and i32 share the uint variant).
 * -DCLF_IDX64=1 reads rope_split's positions as long (i64), else int (i32).
 */

#ifndef CLF_ELEM
#define CLF_ELEM uint
#endif
#if CLF_IDX64
#define CLF_IDX_T long
#else
#define CLF_IDX_T int
#endif

/* n / d for the invariant divisor d, as a multiply-high: m and the shifts
 * (s1 | s2 << 8) come from the host (Granlund & Montgomery 1994, fig. 4.1;
 * exact for every uint n).  A division per work-item is slow on GPUs and,
 * on CPU drivers, keeps the work-item loop from being vectorised. */
inline uint clf_udiv(uint n, uint m, uint sh) {
  const uint t = mul_hi(n, m);
  return (t + ((n - t) >> (sh & 0xffu))) >> (sh >> 8);
}

/* Splits r into coordinates over up to 5 dims (innermost first; unused dims
 * have size 1 and strides 0) and adds coordinate times stride to xo, yo. */
#define CLF_COORD(c)                                  \
  {                                                   \
    const uint q = clf_udiv(r, dm.s##c, dsh.s##c);    \
    const uint k = r - q * dn.s##c;                   \
    r = q;                                            \
    xo += k * xs.s##c;                                \
    yo += k * ys.s##c;                                \
  }
#define CLF_COORDS \
  CLF_COORD(0)     \
  CLF_COORD(1)     \
  CLF_COORD(2)     \
  CLF_COORD(3)     \
  CLF_COORD(4)

/* y[yo + i] = x[xo + i * x_inner_stride] for i < n and row < rows: range
 * dim 0 is i, dim 1 the row, whose coordinates over the outer dims (dn, with
 * division magic dm/dsh, strides xs/ys) give xo and yo.  The output's inner
 * dim is contiguous, so writes are coalesced; reads are too when
 * x_inner_stride is 1 (head split/merge, row copies, permutes that keep the
 * last dim). */
__kernel void copy_strided(__global const CLF_ELEM *x, uint x_off,
                           __global CLF_ELEM *y, uint y_off,
                           uint n, uint x_inner_stride, uint rows,
                           uint8 dn, uint8 dm, uint8 dsh, uint8 xs, uint8 ys) {
  const uint i = get_global_id(0), row = get_global_id(1);
  if (i >= n || row >= rows) return;
  uint r = row, xo = x_off, yo = y_off;
  CLF_COORDS
  y[yo + i] = x[xo + i * x_inner_stride];
}

/* copy_strided's CPU shape: one work-item per row (global: rows), whose
 * coordinates are decoded once and whose n elements are copied in a loop,
 * contiguous rows 4 at a time.  On a CPU a work-item per element decoded
 * the row's coordinates for every element: Swin-T's head splits (rows of
 * 32) took 24 ms of a 278 ms forward pass on Intel's runtime. */
__kernel void copy_rows(__global const CLF_ELEM *x, uint x_off, __global CLF_ELEM *y, uint y_off, uint n,
                        uint x_inner_stride, uint rows, uint8 dn, uint8 dm, uint8 dsh, uint8 xs, uint8 ys) {
  const uint row = get_global_id(0);
  if (row >= rows) return;
  uint r = row, xo = x_off, yo = y_off;
  CLF_COORDS
  __global const CLF_ELEM *xr = x + xo;
  __global CLF_ELEM *yr = y + yo;
  uint i = 0;
  if (x_inner_stride == 1)
    for (; i + 4 <= n; i += 4) vstore4(vload4(0, xr + i), 0, yr + i);
  for (; i < n; i++) yr[i] = xr[(size_t)i * x_inner_stride];
}

#define CLF_TILE 32

/* A batched transpose for permutes whose output's innermost dim (X: nx
 * elements, input stride sx) is not the input's innermost dim (Y: ny
 * elements, input stride 1, output stride ty).  A 32 x 32 tile goes through
 * local memory so that reads run along Y and writes along X, both coalesced.
 * Local size (32, L1, 1); group (gx, gy, z): z spans the other dims (at
 * most 4) as the row does in copy_strided. */
__kernel void permute_tiled(__global const CLF_ELEM *x, uint x_off,
                            __global CLF_ELEM *y, uint y_off,
                            uint nx, uint sx, uint ny, uint ty,
                            uint8 dn, uint8 dm, uint8 dsh, uint8 xs, uint8 ys) {
  __local CLF_ELEM tile[CLF_TILE][CLF_TILE + 1];
  uint r = get_group_id(2), xo = x_off, yo = y_off;
  CLF_COORDS
  const uint lx = get_local_id(0), ly = get_local_id(1), step = get_local_size(1);
  const uint x0 = get_group_id(0) * CLF_TILE, y0 = get_group_id(1) * CLF_TILE;
  /* Load: consecutive items read consecutive Y (input stride 1). */
  for (uint j = ly; j < CLF_TILE; j += step) {
    const uint xx = x0 + j, yy = y0 + lx;
    if (xx < nx && yy < ny) tile[j][lx] = x[xo + xx * sx + yy];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  /* Store: consecutive items write consecutive X (output stride 1). */
  for (uint j = ly; j < CLF_TILE; j += step) {
    const uint xx = x0 + lx, yy = y0 + j;
    if (xx < nx && yy < ny) y[yo + yy * ty + xx] = tile[lx][j];
  }
}

/* ---- head split with rotary position embeddings ---- */

/* Products and sums rounded one by one, as torch's q * cos +
 * rotate_half(q) * sin (three tensors, each rounded to f32). */
#pragma OPENCL FP_CONTRACT OFF

/* Head split with RoPE (clf_split_heads_rope): for x [B, L, C] (from
 * column col_offset, in x_off), y [B, H, Lcap, 2 * half_dh], the first
 * 2 * rh rotated (rh <= half_dh; less: partial rotary), p = pos[b, l],
 * a = p * inv_freq[j] in float, c = cos(a) * scale, s = sin(a) * scale:
 *   y[b, h, dst + l, j]        = x[b, l, h*Dh + j] * c - x[.. + rh + j] * s
 *   y[b, h, dst + l, j + rh]   = x[.. + rh + j] * c + x[b, l, h*Dh + j] * s
 * and the columns from 2 * rh on copied as they are (two per work item
 * j >= rh); and the H2 heads after those columns into y2 [B, H2, Lcap,
 * 2 * half_dh] alike (a layer's keys after its queries: one launch for
 * both; H2 0: none).  cos and sin are the accurate built-ins (large
 * angles must match torch's float32 results), taken once for all heads: a
 * work item walks the heads of its (j, l, b), whose angle is the same (per
 * head, the built-ins were a tenth of a prefill's device time on PoCL).
 * Range: (j < half_dh, l, b). */
__kernel void rope_split(__global const float *x, uint x_off,
                         __global const CLF_IDX_T *pos, uint pos_off,
                         __global const float *inv_freq, uint f_off,
                         __global float *y, uint y_off, __global float *y2, uint y2_off, uint H2,
                         uint C, uint H, uint L, uint Lcap, uint half_dh, uint dst, float scale, uint rh) {
  const uint j = get_global_id(0), l = get_global_id(1), b = get_global_id(2);
  if (j >= half_dh || l >= L) return;
  const uint dh = 2 * half_dh;
  __global const float *xr = x + x_off + ((size_t)b * L + l) * C;
  __global float *yr = y + y_off + ((size_t)b * H * Lcap + dst + l) * dh;
  __global float *yr2 = y2 + y2_off + ((size_t)b * H2 * Lcap + dst + l) * dh;
  const size_t y_head = (size_t)Lcap * dh;
#define ROPE_OUT(h) ((h) < H ? yr + (h) * y_head : yr2 + ((h) - H) * y_head)
  if (j >= rh) { /* the pass-through part */
    const uint c0 = 2 * j;
    for (uint h = 0; h < H + H2; h++) {
      ROPE_OUT(h)[c0] = xr[h * dh + c0];
      ROPE_OUT(h)[c0 + 1] = xr[h * dh + c0 + 1];
    }
    return;
  }
  const float angle = (float)pos[pos_off + b * L + l] * inv_freq[f_off + j];
  const float c = cos(angle) * scale, s = sin(angle) * scale;
  for (uint h = 0; h < H + H2; h++) {
    const float x1 = xr[h * dh + j], x2 = xr[h * dh + j + rh];
    ROPE_OUT(h)[j] = x1 * c - x2 * s;
    ROPE_OUT(h)[j + rh] = x2 * c + x1 * s;
  }
#undef ROPE_OUT
}
