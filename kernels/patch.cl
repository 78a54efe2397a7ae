/* patch.cl - image patching (ViT, MAE), Swin windows, shifts, masks and
 * relative position bias, patch merging, and MAE random masking.
 *
 * Data movement kernels are indexed by their output so that writes are
 * coalesced; the innermost dim (channels, or the patch features) is the
 * fastest-varying global id.  Index dtypes of the MAE kernels come from -D
 * options: CLF_KEEP_I64 / CLF_REST_I64 (ids_keep / ids_restore are i64).
 */

#ifndef CLF_KEEP_I64
#define CLF_KEEP_I64 0
#endif
#ifndef CLF_REST_I64
#define CLF_REST_I64 0
#endif
#if CLF_KEEP_I64
#define KEEP_T long
#else
#define KEEP_T int
#endif
#if CLF_REST_I64
#define REST_T long
#else
#define REST_T int
#endif

/* Floats a patch work-group stages in local memory: 8 KiB, or an eighth of
 * the device's where that is less (an embedded-profile device's 1 KiB, or
 * CLFORMER_LIMITS local); patch_tile() in host/ops/patch.c mirrors it. */
#if CLF_LOCAL_MEM_BYTES / 8 < 2048
#define PATCH_TILE (CLF_LOCAL_MEM_BYTES / 8)
#else
#define PATCH_TILE 2048
#endif
/* Noise values the masking kernel stages per step. */
#define MAE_TILE 256

/* q = a / b and *r = a - q * b.  Written out rather than with `%` next to
 * `/`: LLVM pairs a udiv with a urem through a `freeze`, an instruction that
 * Oclgrind's uninitialised-value checker cannot execute. */
inline uint clf_divmod(uint a, uint b, uint *r) {
  const uint q = a / b;
  *r = a - q * b;
  return q;
}

/* ---- patchify / unpatchify ----
 * Patch P = b * N + n (n = py * Wn + px) is the F = C*p*p floats x[P*F ..]
 * and the block img[b, :, py*p .. +p, px*p .. +p].  A work-group moves G
 * consecutive patches through a local tile: the image side is walked in the
 * order (c, i, g, j), so the G*p pixels of one image row that the group's
 * patches share are read (or written) contiguously even for small p; the x
 * side is walked contiguously.  Feature f of a patch is (c, i, j) in CPQ
 * order, (i, j, c) in PQC order.  When one patch (F floats) exceeds the tile,
 * each group moves one patch element by element in x order instead. */

/* Offset in img of pixel (c, i, j) of patch P. */
inline uint patch_pixel(uint P, uint c, uint i, uint j, uint C, uint H, uint W, uint p) {
  const uint Wn = W / p, N = (H / p) * Wn;
  uint n, px;
  const uint b = clf_divmod(P, N, &n), py = clf_divmod(n, Wn, &px);
  return ((b * C + c) * H + py * p + i) * W + px * p + j;
}

/* (c, i, j) of feature f of a patch in either order. */
inline void patch_decode(uint f, uint C, uint p, uint pqc, uint *c, uint *i, uint *j) {
  uint t;
  if (pqc) {
    t = clf_divmod(f, C, c);
    *i = clf_divmod(t, p, j);
  } else {
    *c = clf_divmod(f, p * p, &t);
    *i = clf_divmod(t, p, j);
  }
}

/* (c, i, g, j) of element e of a tile walked in image order. */
inline void tile_decode(uint e, uint p, uint G, uint *c, uint *i, uint *g, uint *j) {
  uint t = clf_divmod(e, p, j);
  t = clf_divmod(t, G, g);
  *c = clf_divmod(t, p, i);
}

/* to_img 0: x[P, f] = img[..] (patchify); 1: img[..] = x[P, f]. */
__kernel void patch_shuffle(__global float *img, uint img_off, __global float *x, uint x_off, uint C,
                            uint H, uint W, uint p, uint pqc, uint to_img, uint n_patches, uint G,
                            uint use_tile) {
  __local float tile[PATCH_TILE];
  const uint lid = get_local_id(0), nl = get_local_size(0);
  const uint P0 = get_group_id(0) * G;
  const uint F = C * p * p;
  img += img_off;
  x += x_off;
  if (!use_tile) {
    /* One patch per group, no staging: walk x contiguously. */
    if (P0 >= n_patches) return;
    for (uint f = lid; f < F; f += nl) {
      uint c, i, j;
      patch_decode(f, C, p, pqc, &c, &i, &j);
      const uint io = patch_pixel(P0, c, i, j, C, H, W, p);
      if (to_img) img[io] = x[P0 * F + f];
      else x[P0 * F + f] = img[io];
    }
    return;
  }
  const uint total = G * F;
  if (!to_img) {
    /* Image side, order (c, i, g, j), into the tile. */
    for (uint e = lid; e < total; e += nl) {
      uint c, i, g, j;
      tile_decode(e, p, G, &c, &i, &g, &j);
      if (P0 + g < n_patches) tile[e] = img[patch_pixel(P0 + g, c, i, j, C, H, W, p)];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint t = lid; t < total; t += nl) {
      uint f, c, i, j;
      const uint g = clf_divmod(t, F, &f);
      if (P0 + g >= n_patches) break;
      patch_decode(f, C, p, pqc, &c, &i, &j);
      x[P0 * F + t] = tile[((c * p + i) * G + g) * p + j];
    }
  } else {
    for (uint t = lid; t < total; t += nl) {
      uint f, c, i, j;
      const uint g = clf_divmod(t, F, &f);
      if (P0 + g >= n_patches) break;
      patch_decode(f, C, p, pqc, &c, &i, &j);
      tile[((c * p + i) * G + g) * p + j] = x[P0 * F + t];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint e = lid; e < total; e += nl) {
      uint c, i, g, j;
      tile_decode(e, p, G, &c, &i, &g, &j);
      if (P0 + g < n_patches) img[patch_pixel(P0 + g, c, i, j, C, H, W, p)] = tile[e];
    }
  }
}

/* The same move on a CPU: a work-item per patch row, the p pixels (c, i, 0
 * .. p-1) of one image row, with gid0 = px, gid1 = c * p + i, gid2 = b * Hn
 * + py: two divisions per work-item instead of patch_shuffle's seven per
 * element (on PoCL, vector lanes divide one at a time), and each image read
 * p contiguous floats.  Indexed by (Wn, C * p, B * Hn), gid0 rounded up. */
__kernel void patch_rows(__global float *img, uint img_off, __global float *x, uint x_off, uint C, uint H,
                         uint W, uint p, uint pqc, uint to_img) {
  const uint px = get_global_id(0), Wn = W / p, Hn = H / p;
  if (px >= Wn) return;
  uint i, py;
  const uint c = clf_divmod(get_global_id(1), p, &i), b = clf_divmod(get_global_id(2), Hn, &py);
  const uint F = C * p * p;
  __global float *src = img + img_off + ((b * C + c) * H + py * p + i) * W + px * p;
  __global float *dst = x + x_off + (get_global_id(2) * Wn + px) * F + (pqc ? i * p * C + c : (c * p + i) * p);
  const uint step = pqc ? C : 1;
  if (to_img)
    for (uint j = 0; j < p; j++) src[j] = dst[j * step];
  else
    for (uint j = 0; j < p; j++) dst[j * step] = src[j];
}

/* out[r, e] = bias[e] for r < rows: the bias that patch_embed's GEMM then
 * accumulates onto (beta = 1).  gid0 = e, gid1 = r. */
__kernel void fill_rows(__global const float *bias, uint b_off, __global float *out, uint o_off, uint E,
                        uint rows) {
  const uint e = get_global_id(0), r = get_global_id(1);
  if (e >= E || r >= rows) return;
  out[o_off + r * E + e] = bias[b_off + e];
}

/* ---- roll, windows, merging ---- */

/* y[b, (h + sh) % H, (w + sw) % W, c] = x[b, h, w, c], with sh < H and
 * sw < W already reduced.  gid0 runs along a row of W*C floats, gid1 over the
 * B*H rows; the source row is contiguous but for one wrap. */
__kernel void roll_hw(__global const float *x, uint x_off, __global float *y, uint y_off, uint H, uint W,
                      uint C, uint sh, uint sw, uint rows) {
  const uint e = get_global_id(0), r = get_global_id(1), WC = W * C;
  if (e >= WC || r >= rows) return;
  uint h;
  const uint b = clf_divmod(r, H, &h);
  const uint hs = h >= sh ? h - sh : h + H - sh;
  const uint sc = sw * C;
  const uint es = e >= sc ? e - sc : e + WC - sc;
  y[y_off + r * WC + e] = x[x_off + (b * H + hs) * WC + es];
}

/* The row kernels below (window partition/reverse, patch merge) move rows
 * of C channels: dst[c] = in ? src[c] : 0.  By default a work-item per
 * element (gid0 = c, gid1 = row); with -DCLF_ROW_ITEMS=1 (a CPU) a
 * work-item per row (gid0 = row), its position decoded once and its C
 * channels copied 8 at a time (a CPU runtime vectorises across work-items
 * otherwise, and neighbouring items' rows lie C floats apart: gathers, 5 ms
 * of Swin-T's window partition on Intel's runtime). */
#if CLF_ROW_ITEMS
#define CLF_ROW_ID get_global_id(0)
inline void clf_copy_row(__global float *dst, __global const float *src, uint C, int in) {
  uint c = 0;
  for (; c + 8 <= C; c += 8) vstore8(in ? vload8(0, src + c) : (float8)(0.0f), 0, dst + c);
  for (; c < C; c++) dst[c] = in ? src[c] : 0.0f;
}
#else
#define CLF_ROW_ID get_global_id(1)
inline void clf_copy_row(__global float *dst, __global const float *src, uint C, int in) {
  const uint c = get_global_id(0);
  if (c < C) dst[c] = in ? src[c] : 0.0f;
}
#endif

/* out[win, t, c]: window win = (b, wy, wx), token t = (ty, tx) of the
 * zero-padded (Hp x Wp) map rolled by (-sh, -sw): the source is
 * (wy*ws + ty + sh) mod Hp, (wx*ws + tx + sw) mod Wp, zero if in the padding.
 * gid0 = c, gid1 = win * ws*ws + t. */
__kernel void window_partition(__global const float *x, uint x_off, __global float *out, uint o_off, uint H,
                               uint W, uint C, uint ws, uint nwh, uint nww, uint sh, uint sw, uint rows) {
  const uint r = CLF_ROW_ID;
  if (r >= rows) return;
  const uint T = ws * ws, Hp = nwh * ws, Wp = nww * ws;
  uint t, tx, wi, wx;
  const uint win = clf_divmod(r, T, &t), ty = clf_divmod(t, ws, &tx);
  const uint b = clf_divmod(win, nwh * nww, &wi), wy = clf_divmod(wi, nww, &wx);
  uint h = wy * ws + ty + sh, w = wx * ws + tx + sw;
  if (h >= Hp) h -= Hp;
  if (w >= Wp) w -= Wp;
  const int in = h < H && w < W;
  __global const float *src = x + x_off + (in ? ((b * H + h) * W + w) * C : 0);
  clf_copy_row(out + o_off + r * C, src, C, in);
}

/* The inverse: out[b, h, w, c] for h < H, w < W comes from the rolled map's
 * position ((h - sh) mod Hp, (w - sw) mod Wp).  gid0 = c, gid1 = pixel. */
__kernel void window_reverse(__global const float *win_in, uint w_off, __global float *out, uint o_off,
                             uint H, uint W, uint C, uint ws, uint nwh, uint nww, uint sh, uint sw,
                             uint rows) {
  const uint r = CLF_ROW_ID;
  if (r >= rows) return;
  const uint Hp = nwh * ws, Wp = nww * ws;
  uint w, h, ty, tx;
  const uint b = clf_divmod(clf_divmod(r, W, &w), H, &h);
  const uint hp = h >= sh ? h - sh : h + Hp - sh;
  const uint wp = w >= sw ? w - sw : w + Wp - sw;
  const uint wy = clf_divmod(hp, ws, &ty), wx = clf_divmod(wp, ws, &tx);
  const uint win = (b * nwh + wy) * nww + wx;
  __global const float *src = win_in + w_off + ((win * ws + ty) * ws + tx) * C;
  clf_copy_row(out + o_off + r * C, src, C, 1);
}

/* out[b, oy*W2 + ox, q*C + c] = x[b, 2*oy + dy, 2*ox + dx, c] (0 outside x)
 * with q = 0: (0,0), 1: (1,0), 2: (0,1), 3: (1,1) as (dy, dx).
 * gid0 = c, gid1 = 4 * out_row + q. */
__kernel void patch_merge(__global const float *x, uint x_off, __global float *out, uint o_off, uint H,
                          uint W, uint C, uint H2, uint W2, uint rows4) {
  const uint rq = CLF_ROW_ID;
  if (rq >= rows4) return;
  const uint q = rq & 3u, r = rq >> 2;
  uint ox, oy;
  const uint b = clf_divmod(clf_divmod(r, W2, &ox), H2, &oy);
  const uint y = 2 * oy + (q & 1u), xx = 2 * ox + (q >> 1);
  const int in = y < H && xx < W;
  __global const float *src = x + x_off + (in ? ((b * H + y) * W + xx) * C : 0);
  clf_copy_row(out + o_off + rq * C, src, C, in);
}

/* ---- Swin masks and biases ---- */

/* Region (0, 1, 2) of coordinate y along a padded side of length n: the last
 * of Python's slices (0, -ws), (-ws, -s), (-s, None) that holds y.  Negative
 * bounds count from the end and clip at 0; "-0" is 0, so shift 0 puts the
 * whole side in region 2. */
inline uint swin_region(uint y, uint n, uint ws, uint s) {
  /* y >= max(n - s, 0) and y >= max(n - ws, 0), without subtractions (a
   * saturating one becomes llvm.usub.sat, which Oclgrind cannot run). */
  return (s == 0 || y + s >= n) ? 2u : (y + ws >= n ? 1u : 0u);
}

inline uint swin_label(uint win, uint t, uint ws, uint nww, uint hp, uint wp, uint s) {
  uint wx, tx;
  const uint wy = clf_divmod(win, nww, &wx), ty = clf_divmod(t, ws, &tx);
  return swin_region(wy * ws + ty, hp, ws, s) * 3u + swin_region(wx * ws + tx, wp, ws, s);
}

/* out[w, i, j] = label(w, j) != label(w, i) ? -100 : 0.
 * gid0 = j, gid1 = w * T + i. */
__kernel void shifted_window_mask(__global float *out, uint o_off, uint hp, uint wp, uint ws, uint s,
                                  uint rows) {
  const uint j = get_global_id(0), r = get_global_id(1), T = ws * ws;
  if (j >= T || r >= rows) return;
  uint i;
  const uint w = clf_divmod(r, T, &i), nww = wp / ws;
  const uint li = swin_label(w, i, ws, nww, hp, wp, s), lj = swin_label(w, j, ws, nww, hp, wp, s);
  out[o_off + r * T + j] = li != lj ? -100.0f : 0.0f;
}

/* out[h, i, j] = table[idx(i, j), h] with
 * idx = (yi - yj + ws - 1) * (2ws - 1) + (xi - xj + ws - 1).
 * gid0 = j, gid1 = h * T + i. */
__kernel void relative_position_bias(__global const float *table, uint t_off, __global float *out,
                                     uint o_off, uint ws, uint nh) {
  const uint j = get_global_id(0), r = get_global_id(1), T = ws * ws;
  if (j >= T || r >= nh * T) return;
  uint i, xi, xj;
  const uint h = clf_divmod(r, T, &i);
  const uint yi = clf_divmod(i, ws, &xi), yj = clf_divmod(j, ws, &xj);
  const uint idx = (yi + ws - 1 - yj) * (2 * ws - 1) + (xi + ws - 1 - xj);
  out[o_off + r * T + j] = table[t_off + idx * nh + h];
}

/* ---- MAE ---- */

/* Whether noise value u at index j sorts before v at index i: ascending,
 * NaN after every number (as torch.sort), ties by index. */
inline int mae_before(float u, uint j, float v, uint i) {
  const int un = isnan(u), vn = isnan(v);
  if (un || vn) return (un && vn) ? j < i : vn;
  return u < v || (u == v && j < i);
}

/* One work-group per row of noise [B, L].  The rank of patch i is the number
 * of patches sorting before it, counted against the row staged through local
 * memory MAE_TILE values at a time (every work-item reads the same value:
 * a broadcast).  Then ids_restore[i] = rank, mask[i] = rank >= keep, and
 * ids_keep[rank] = i for rank < keep.  The has_* flags skip NULL outputs. */
__kernel void mae_random_masking(__global const float *noise, uint n_off, uint L, uint keep,
                                 __global KEEP_T *ids_keep, uint k_off, int has_keep,
                                 __global REST_T *ids_restore, uint r_off, int has_restore,
                                 __global float *mask, uint m_off, int has_mask) {
  __local float tile[MAE_TILE];
  const uint row = get_group_id(0), lid = get_local_id(0), nl = get_local_size(0);
  noise += n_off + row * L;
  for (uint base = 0; base < L; base += nl) {
    const uint i = base + lid;
    const int valid = i < L;
    const float v = valid ? noise[i] : 0.0f;
    uint rank = 0;
    for (uint t0 = 0; t0 < L; t0 += MAE_TILE) {
      const uint cnt = min((uint)MAE_TILE, L - t0);
      barrier(CLK_LOCAL_MEM_FENCE);
      for (uint t = lid; t < cnt; t += nl) tile[t] = noise[t0 + t];
      barrier(CLK_LOCAL_MEM_FENCE);
      if (valid)
        for (uint t = 0; t < cnt; t++) rank += mae_before(tile[t], t0 + t, v, i);
    }
    if (valid) {
      if (has_restore) ids_restore[r_off + row * L + i] = (REST_T)rank;
      if (has_mask) mask[m_off + row * L + i] = rank < keep ? 0.0f : 1.0f;
      if (has_keep && rank < keep) ids_keep[k_off + row * keep + rank] = (KEEP_T)i;
    }
  }
}

/* out[b, dst_row + i, d] = 0 <= r < keep ? x[b, src_row + r, d] : mask_token[d]
 * with r = ids_restore[b, i].  gid0 = d, gid1 = b * L + i. */
__kernel void mae_unshuffle(__global const float *x, uint x_off, __global const float *tok, uint t_off,
                            __global const REST_T *ids, uint i_off, __global float *out, uint o_off, uint D,
                            uint L, uint Lx, uint Lo, uint src_row, uint dst_row, uint keep, uint rows) {
  const uint d = get_global_id(0), r = get_global_id(1);
  if (d >= D || r >= rows) return;
  uint i;
  const uint b = clf_divmod(r, L, &i);
  const REST_T k = ids[i_off + r];
  float v;
  if (k >= 0 && k < (REST_T)keep) v = x[x_off + (b * Lx + src_row + (uint)k) * D + d];
  else v = tok[t_off + d];
  out[o_off + (b * Lo + dst_row + i) * D + d] = v;
}
