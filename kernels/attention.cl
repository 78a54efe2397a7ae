/* attention.cl - multi-head scaled dot-product attention.
 *
 * attn_softmax and attn_merge serve the GEMM path (CLBlast computes Q K^T and
 * P V around them); attn_fused is the flash-attention kernel, compiled only
 * when the host passes -DHEAD_DIM=Dh -DATT_BQ=.. -DATT_BK=.. (tile sizes)
 * -DATT_TR=.. (rows of its work-item grid: 8, 4 or 2); its shapes for
 * CPU-class devices are attn_fused_cpu (-DHEAD_DIM=Dh -DATT_CPU) and, for
 * key ranges of up to 64 or 128, attn_short_cpu (-DHEAD_DIM=Dh -DATT_SHORT
 * -DATT_SK=64 or 128).
 *
 * Masks shared by both paths, for batch b, head h, query i, key j < Lk:
 *   key padding  pad[b, j] == 0 (pad_kind 1: i32, 2: i64, 3: f32; 0: none;
 *                read as 32-bit words so one program serves every dtype)
 *   causal       j - i > Lk - Lq (query i sits at position Lk - Lq + i)
 *   window       j <= i + Lk - Lq - window (when window > 0: only the last
 *                `window` positions up to the query's own are seen)
 *   bias         bias[b % n_win, h or 0, i, j] is added to the scaled score;
 *                a score of -inf counts as masked.
 * Before them, where softcap > 0, the scaled score s becomes
 * softcap * tanh(s / softcap) (clf_softcap: Gemma 2's soft-capping).
 * Masked keys get probability 0; a row with no key left gives zeros.
 *
 * Grouped-query attention: k and v hold H / G heads; query head h reads KV
 * head h / G.  The G query heads of one KV head are consecutive in q
 * [B, H, Lq, Dh], so they form one block of G * Lq query rows: the GEMM
 * path multiplies that block by its K and V (each read once), and the fused
 * kernel tiles it as it tiles the queries of one head.
 */

/* Quotients and remainders are spelled out (q = a / b, r = a - q * b): a `%`
 * paired with a `/` becomes an LLVM `freeze`, which Oclgrind's
 * uninitialised-value checker cannot execute. */

/* Whether key j of a padding-mask row is attended (non-zero). */
inline int attn_key_kept(__global const uint *pad, int kind, uint j) {
  if (kind == 0) return 1;
  if (kind == 2) return (pad[2 * j] | pad[2 * j + 1]) != 0u;
  if (kind == 3) return (pad[j] & 0x7fffffffu) != 0u; /* -0.0f is zero too */
  return pad[j] != 0u;
}

/* exp(x) of a softmax weight, 0 where it would be subnormal (x below
 * ln FLT_MIN = -87.34; exp is then not evaluated there at all).  A masking
 * bias of -100 (Swin's shifted windows, as transformers builds them)
 * otherwise leaves weights near 4e-44, whose arithmetic x86 CPUs run
 * through microcode assists: Intel's CPU runtime took the shifted blocks'
 * attention 1.5-2.3x as long as the unshifted ones.  The weights dropped
 * are under 2^-126 of the row's largest (1); a NaN stays NaN. */
#define ATT_EXP_MIN (-87.33f)
inline float attn_exp(float x) {
  const int under = x < ATT_EXP_MIN;
  const float e = exp(under ? 0.0f : x);
  return under ? 0.0f : e;
}
inline float8 attn_exp8(float8 x) {
  const int8 under = x < (float8)(ATT_EXP_MIN);
  return select(exp(select(x, (float8)(0.0f), under)), (float8)(0.0f), under);
}

/* In-place masked softmax of the score rows s [B*H*Lq, Lk] (already scaled
 * by the GEMM's alpha).  One work-group per row (a power of two <=
 * CLF_RED_WG): each work-item keeps an online max and sum over its strided
 * share of the row, the group combines them, then the row is written. */
__kernel void attn_softmax(__global float *s, uint s_off,
                           __global const uint *pad, uint pad_off, int pad_kind,
                           __global const float *bias, uint bias_off, int has_bias,
                           uint n_win, uint bias_bstride, uint bias_hstride,
                           uint n_rows, uint H, uint Lq, uint Lk, int causal, uint window, float softcap) {
  __local float red[CLF_RED_WG];
  const uint row = get_group_id(0), lid = get_local_id(0), n = get_local_size(0);
  if (row >= n_rows) return; /* uniform over the group */
  const uint bh = row / Lq, i = row - bh * Lq, b = bh / H, h = bh - b * H;
  s += s_off + row * Lk;
  pad += pad_off + b * Lk * (pad_kind == 2 ? 2u : 1u);
  bias += bias_off + (b % n_win) * bias_bstride + h * bias_hstride + i * Lk;

  /* Keys past `vis` are hidden by the causal mask, keys before `lo` by the
   * window. */
  const long pos = (long)i + (long)Lk - (long)Lq; /* the query's position */
  uint vis = Lk, lo = 0;
  if (causal) vis = pos < 0 ? 0u : (uint)min((long)Lk, pos + 1);
  if (window) lo = (uint)clamp(pos - (long)window + 1, 0L, (long)Lk);

  float m = -INFINITY, l = 0.0f;
  for (uint j = lo + lid; j < vis; j += n) {
    if (!attn_key_kept(pad, pad_kind, j)) continue;
    const float x = clf_softcap(s[j], softcap) + (has_bias ? bias[j] : 0.0f);
    if (x == -INFINITY) continue;
    if (x > m) {
      l = l * attn_exp(m - x) + 1.0f;
      m = x;
    } else {
      l += attn_exp(x - m);
    }
  }
  const float mx = clf_wg_max(m, red);
  const float sum = clf_wg_sum(m == -INFINITY ? 0.0f : l * attn_exp(m - mx), red);
  const float inv = mx == -INFINITY ? 0.0f : 1.0f / sum;

  for (uint j = lid; j < Lk; j += n) {
    float p = 0.0f;
    if (j >= lo && j < vis && attn_key_kept(pad, pad_kind, j)) {
      const float x = clf_softcap(s[j], softcap) + (has_bias ? bias[j] : 0.0f);
      if (x != -INFINITY) p = attn_exp(x - mx) * inv;
    }
    s[j] = p;
  }
}

/* Head merge for the GEMM path: y [B, Lq, H*Dh] from x [B, H, Lq, Dh].
 * One work-item per output element, so writes are coalesced. */
__kernel void attn_merge(__global const float *x, uint x_off, __global float *y, uint y_off,
                         uint H, uint Lq, uint Dh, uint n) {
  const uint gid = get_global_id(0);
  if (gid >= n) return;
  const uint t = gid / Dh, d = gid - t * Dh, bi = t / H, h = t - bi * H, b = bi / Lq, i = bi - b * Lq;
  y[y_off + gid] = x[x_off + ((b * H + h) * Lq + i) * Dh + d];
}

/* The arguments of both shapes of the fused kernel (attn_fused,
 * attn_fused_cpu): the host sets them alike (attn_fused_set_args). */
#define ATT_FUSED_PARAMS                                                                              \
  __global const float *q, uint q_off, __global const float *k, uint k_off, __global const float *v,  \
      uint v_off, __global const uint *pad, uint pad_off, int pad_kind, __global const float *bias,   \
      uint bias_off, int has_bias, uint n_win, uint bias_bstride, uint bias_hstride,                   \
      __global float *out, uint out_off, uint out_h, uint out_i, uint n_bkv, uint H, uint G, uint Lq, \
      uint Lk, uint Lcap, int causal, uint window, float scale, float softcap

#if defined(HEAD_DIM) && !defined(ATT_CPU) && !defined(ATT_SHORT)
/* Flash attention.  One work-group of ATT_WG = 8 * ATT_TR work-items (64,
 * 32 or 16: the host takes the largest the kernel may run on the device)
 * per (b, KV head, block of ATT_BQ query rows of its G heads), seen as an
 * ATT_TR x 8 grid (tr, tc).  The query block sits in local memory
 * (pre-scaled); keys and values stream through one local tile of ATT_BK
 * rows (each tile a contiguous, coalesced read).  Work-item (tr, tc)
 * computes the scores of queries tr + ATT_TR a and keys tc + 8c of a tile,
 * and owns the output dims tc + 8e of the same queries, so the accumulators
 * stay in private memory.  Online softmax: per query a running max m and
 * sum l; the accumulator is rescaled by exp(m_old - m_new) at each tile. */
#ifndef ATT_TR
#define ATT_TR 8
#endif
#define ATT_WG (8 * ATT_TR)
#define ATT_RA (ATT_BQ / ATT_TR)      /* queries per work-item */
#define ATT_CB (ATT_BK / 8)           /* keys per work-item in a score tile */
#define ATT_DE ((HEAD_DIM + 7) / 8)   /* output dims per work-item */
#define ATT_STR (HEAD_DIM | 1)        /* odd row stride: rows in distinct banks */
#define ATT_PSTR (ATT_BK + 1)

#if (ATT_TR != 2 && ATT_TR != 4 && ATT_TR != 8) || ATT_BQ % ATT_TR || ATT_BK % 8
#error "ATT_TR must be 2, 4 or 8, ATT_BQ a multiple of it and ATT_BK a multiple of 8"
#endif

__kernel __attribute__((reqd_work_group_size(ATT_WG, 1, 1)))
void attn_fused(ATT_FUSED_PARAMS) {
  __local float qs[ATT_BQ * ATT_STR];
  __local float kvs[ATT_BK * ATT_STR]; /* the K tile, then the V tile */
  __local float ps[ATT_BQ * ATT_PSTR];
  __local float pmax[ATT_BQ * 8], psum[ATT_BQ * 8];
  __local int kept[ATT_BK];

  const uint lid = get_local_id(0), tr = lid >> 3, tc = lid & 7;
  /* Rows t < G * Lq of this KV head: query i = t % Lq of head hk * G + t / Lq. */
  const uint n_rows = G * Lq;
  const uint q0 = get_group_id(0) * ATT_BQ, bkv = get_group_id(1);
  if (q0 >= n_rows || bkv >= n_bkv) return; /* uniform over the group */
  const uint Hkv = H / G, b = bkv / Hkv, hk = bkv - b * Hkv;
  const uint nq = min((uint)ATT_BQ, n_rows - q0);
  q += q_off + (bkv * n_rows + q0) * HEAD_DIM;
  k += k_off + bkv * Lcap * HEAD_DIM;
  v += v_off + bkv * Lcap * HEAD_DIM;
  pad += pad_off + b * Lk * (pad_kind == 2 ? 2u : 1u);
  bias += bias_off + (b % n_win) * bias_bstride;
  out += out_off + b * H * Lq * HEAD_DIM;

  /* Query i sits at position i + coff and may see keys lo_i <= j <= hi_i
   * (causal: hi_i = i + coff; window: lo_i = i + coff - window + 1).  Keys
   * outside [j_first, nkeys), seen by no query of the block, are skipped. */
  const long coff = (long)Lk - (long)Lq;
  const uint g_first = q0 / Lq, g_last = (q0 + nq - 1) / Lq;
  const uint i_min = g_first == g_last ? q0 - g_first * Lq : 0u;
  const uint i_max = g_first == g_last ? q0 + nq - 1 - g_last * Lq : Lq - 1u;
  uint nkeys = Lk, j_first = 0;
  if (causal) nkeys = (uint)clamp((long)i_max + coff + 1, 0L, (long)Lk);
  if (window) j_first = (uint)clamp((long)i_min + coff - (long)window + 1, 0L, (long)Lk);

  /* Per row of this work-item: its offsets into the bias and the output
   * (by head and query), and its visible key range. */
  uint row_bias[ATT_RA], row_out[ATT_RA];
  long row_lo[ATT_RA], row_hi[ATT_RA];
#pragma unroll
  for (uint a = 0; a < ATT_RA; a++) {
    const uint t = q0 + tr + ATT_TR * a, hg = t / Lq, i = t - hg * Lq, h = hk * G + hg;
    row_bias[a] = h * bias_hstride + i * Lk;
    row_out[a] = h * out_h + i * out_i;
    row_hi[a] = causal ? (long)i + coff : (long)Lk;
    row_lo[a] = window ? (long)i + coff - (long)window + 1 : 0L;
  }

  for (uint x = lid; x < ATT_BQ * HEAD_DIM; x += ATT_WG) {
    const uint r = x / HEAD_DIM, d = x - r * HEAD_DIM;
    qs[r * ATT_STR + d] = r < nq ? q[x] * scale : 0.0f;
  }

  float m[ATT_RA], l[ATT_RA], corr[ATT_RA], acc[ATT_RA][ATT_DE];
#pragma unroll
  for (uint a = 0; a < ATT_RA; a++) {
    m[a] = -INFINITY;
    l[a] = 0.0f;
#pragma unroll
    for (uint e = 0; e < ATT_DE; e++) acc[a][e] = 0.0f;
  }

  for (uint j0 = j_first; j0 < nkeys; j0 += ATT_BK) {
    const uint nk = min((uint)ATT_BK, Lk - j0);
    __global const float *kt = k + j0 * HEAD_DIM;
    for (uint x = lid; x < ATT_BK * HEAD_DIM; x += ATT_WG) {
      const uint c = x / HEAD_DIM, d = x - c * HEAD_DIM;
      kvs[c * ATT_STR + d] = c < nk ? kt[x] : 0.0f;
    }
    for (uint c = lid; c < ATT_BK; c += ATT_WG) kept[c] = c < nk && attn_key_kept(pad, pad_kind, j0 + c);
    barrier(CLK_LOCAL_MEM_FENCE);

    /* Scores of this work-item's (query, key) pairs. */
    float s[ATT_RA][ATT_CB];
#pragma unroll
    for (uint a = 0; a < ATT_RA; a++)
#pragma unroll
      for (uint c = 0; c < ATT_CB; c++) s[a][c] = 0.0f;
    for (uint d = 0; d < HEAD_DIM; d++) {
      float qa[ATT_RA], kc[ATT_CB];
#pragma unroll
      for (uint a = 0; a < ATT_RA; a++) qa[a] = qs[(tr + ATT_TR * a) * ATT_STR + d];
#pragma unroll
      for (uint c = 0; c < ATT_CB; c++) kc[c] = kvs[(tc + 8 * c) * ATT_STR + d];
#pragma unroll
      for (uint a = 0; a < ATT_RA; a++)
#pragma unroll
        for (uint c = 0; c < ATT_CB; c++) s[a][c] += qa[a] * kc[c];
    }

    /* Masks and bias, then each query's partial max over this tile. */
#pragma unroll
    for (uint a = 0; a < ATT_RA; a++) {
      const uint r = tr + ATT_TR * a;
      float mx = -INFINITY;
#pragma unroll
      for (uint c = 0; c < ATT_CB; c++) {
        const uint cc = tc + 8 * c, j = j0 + cc;
        float x = -INFINITY;
        if (r < nq && kept[cc] && (long)j <= row_hi[a] && (long)j >= row_lo[a]) {
          x = clf_softcap(s[a][c], softcap);
          if (has_bias) x += bias[row_bias[a] + j];
        }
        s[a][c] = x;
        mx = fmax(mx, x);
      }
      pmax[r * 8 + tc] = mx;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* New running max; probabilities of the tile and their partial sums. */
#pragma unroll
    for (uint a = 0; a < ATT_RA; a++) {
      const uint r = tr + ATT_TR * a;
      float mt = m[a];
#pragma unroll
      for (uint t = 0; t < 8; t++) mt = fmax(mt, pmax[r * 8 + t]);
      const float mu = mt == -INFINITY ? 0.0f : mt; /* all masked so far: p = 0 */
      corr[a] = attn_exp(m[a] - mu);
      m[a] = mt;
      float sum = 0.0f;
#pragma unroll
      for (uint c = 0; c < ATT_CB; c++) {
        const float p = attn_exp(s[a][c] - mu);
        ps[r * ATT_PSTR + tc + 8 * c] = p;
        sum += p;
      }
      psum[r * 8 + tc] = sum;
    }
    /* Nobody reads the K tile any more: the V tile takes its place. */
    __global const float *vt = v + j0 * HEAD_DIM;
    for (uint x = lid; x < ATT_BK * HEAD_DIM; x += ATT_WG) {
      const uint c = x / HEAD_DIM, d = x - c * HEAD_DIM;
      kvs[c * ATT_STR + d] = c < nk ? vt[x] : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

#pragma unroll
    for (uint a = 0; a < ATT_RA; a++) {
      const uint r = tr + ATT_TR * a;
      float sum = 0.0f;
#pragma unroll
      for (uint t = 0; t < 8; t++) sum += psum[r * 8 + t];
      l[a] = l[a] * corr[a] + sum;
#pragma unroll
      for (uint e = 0; e < ATT_DE; e++) acc[a][e] *= corr[a];
    }
    for (uint c = 0; c < ATT_BK; c++) {
      float pa[ATT_RA], ve[ATT_DE];
#pragma unroll
      for (uint a = 0; a < ATT_RA; a++) pa[a] = ps[(tr + ATT_TR * a) * ATT_PSTR + c];
#pragma unroll
      for (uint e = 0; e < ATT_DE; e++) ve[e] = kvs[c * ATT_STR + min(tc + 8 * e, (uint)HEAD_DIM - 1)];
#pragma unroll
      for (uint a = 0; a < ATT_RA; a++)
#pragma unroll
        for (uint e = 0; e < ATT_DE; e++) acc[a][e] += pa[a] * ve[e];
    }
    barrier(CLK_LOCAL_MEM_FENCE); /* before the next tile overwrites kvs, ps */
  }

#pragma unroll
  for (uint a = 0; a < ATT_RA; a++) {
    const uint r = tr + ATT_TR * a;
    if (r >= nq) continue;
    const float inv = l[a] > 0.0f ? 1.0f / l[a] : 0.0f;
    __global float *o = out + row_out[a];
#pragma unroll
    for (uint e = 0; e < ATT_DE; e++) {
      const uint d = tc + 8 * e;
      if (d < HEAD_DIM) o[d] = acc[a][e] * inv;
    }
  }
}
#endif /* HEAD_DIM, !ATT_CPU, !ATT_SHORT */

#if defined(HEAD_DIM) && (defined(ATT_CPU) || defined(ATT_SHORT))
/* The CPU shapes' vectors along the head dim: ATT_VW floats (float8,
 * float4, or scalars for other head dims). */
#if HEAD_DIM % 8 == 0
#define ATT_VW 8
#define attv float8
#define ATT_LOAD(i, p) vload8((i), (p))
#define ATT_STORE(x, i, p) vstore8((x), (i), (p))
/* Sums through dot(): Oclgrind 21.10's uninitialised-value checker crashes
 * on extracting a vector's element. */
#define ATT_SUM(x) dot((x).lo + (x).hi, (float4)(1.0f))
#elif HEAD_DIM % 4 == 0
#define ATT_VW 4
#define attv float4
#define ATT_LOAD(i, p) vload4((i), (p))
#define ATT_STORE(x, i, p) vstore4((x), (i), (p))
#define ATT_SUM(x) dot((x), (float4)(1.0f))
#else
#define ATT_VW 1
#define attv float
#define ATT_LOAD(i, p) ((p)[i])
#define ATT_STORE(x, i, p) ((p)[i] = (x))
#define ATT_SUM(x) (x)
#endif
#define ATT_NV (HEAD_DIM / ATT_VW)
#define ATT_KB 8

#ifdef ATT_CPU
/* Flash attention shaped for CPUs (-DATT_CPU, the host's pick where the
 * device is CPU-class): one work-item per query row, no local memory and no
 * barriers.  A CPU runs a work-group's items one after another on one core,
 * so the tiled kernel's local tiles are copies from cache to cache and its
 * barriers loop splits; here the row's query and its accumulator stay in
 * private vectors of ATT_VW floats (float8, float4, or scalars for other
 * head dims) and each key and value row is read straight from global
 * memory, which a row of the same head read just before left in cache.
 * Keys go ATT_KB at a time: their ATT_KB dot products are independent
 * chains, their exponentials one vector call, and the accumulator is
 * rescaled only when the running max grows.  8 keys, not 4: PoCL computes
 * a vector exp one lane at a time, and the wider call with half the
 * rescale checks took ViT-B/16's attention from 28 to 22 ms there, Swin-T's
 * from 9.2-10.8 to 7.8-8.0 (Intel's runtime alike within noise, AVX-512
 * and AVX2; 16 keys wasted a third of the last block at Swin's 49 keys). */

/* Global (rows of a KV head's G heads, G * Lq rounded up to the group;
 * B * H / G); the arguments are attn_fused's, then the strides of q (batch,
 * head, row) and of k and v, in floats: [B, H, Lq, Dh] and [B, H / G, Lcap,
 * Dh] tensors, or the columns of one projection [B, L, Q + 2 KV] that
 * self-attention reads without splitting its heads first. */
__kernel void attn_fused_cpu(ATT_FUSED_PARAMS, uint q_bs, uint q_hs, uint q_is, uint kv_bs, uint kv_hs,
                             uint kv_is) {
  /* Row t < G * Lq of this KV head: query i = t % Lq of head hk * G + t / Lq. */
  const uint n_rows = G * Lq, t = get_global_id(0), bkv = get_global_id(1);
  if (t >= n_rows || bkv >= n_bkv) return;
  const uint Hkv = H / G, b = bkv / Hkv, hk = bkv - b * Hkv, hg = t / Lq, i = t - hg * Lq, h = hk * G + hg;
  const uint nw = b / n_win, w = b - nw * n_win;
  q += q_off + b * q_bs + h * q_hs + i * q_is;
  k += k_off + b * kv_bs + hk * kv_hs;
  v += v_off + b * kv_bs + hk * kv_hs;
  pad += pad_off + b * Lk * (pad_kind == 2 ? 2u : 1u);
  bias += bias_off + w * bias_bstride + h * bias_hstride + i * Lk;
  out += out_off + b * H * Lq * HEAD_DIM + h * out_h + i * out_i;

  /* The query sits at position i + Lk - Lq and sees keys lo <= j < hi. */
  const long pos = (long)i + (long)Lk - (long)Lq;
  const uint hi = causal ? (uint)clamp(pos + 1, 0L, (long)Lk) : Lk;
  const uint lo = window ? (uint)clamp(pos - (long)window + 1, 0L, (long)Lk) : 0u;

  attv qv[ATT_NV], acc[ATT_NV];
#pragma unroll
  for (uint c = 0; c < ATT_NV; c++) {
    qv[c] = ATT_LOAD(c, q) * scale;
    acc[c] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (uint j0 = lo; j0 < hi; j0 += ATT_KB) {
    /* Keys past hi repeat the last one, masked. */
    __global const float *kr[ATT_KB];
    float s[ATT_KB];
    attv d[ATT_KB];
#pragma unroll
    for (uint e = 0; e < ATT_KB; e++) {
      kr[e] = k + min(j0 + e, hi - 1u) * kv_is;
      d[e] = 0.0f;
    }
#pragma unroll
    for (uint c = 0; c < ATT_NV; c++)
#pragma unroll
      for (uint e = 0; e < ATT_KB; e++) d[e] = fma(qv[c], ATT_LOAD(c, kr[e]), d[e]);
    float mt = m;
#pragma unroll
    for (uint e = 0; e < ATT_KB; e++) {
      const uint j = j0 + e;
      float x = -INFINITY;
      if (j < hi && attn_key_kept(pad, pad_kind, j)) x = clf_softcap(ATT_SUM(d[e]), softcap) + (has_bias ? bias[j] : 0.0f);
      s[e] = x;
      mt = fmax(mt, x);
    }
    if (mt == -INFINITY) continue; /* every key so far masked: nothing to add */
    if (mt > m) {
      const float corr = attn_exp(m - mt); /* 0 for the first visible key */
      l *= corr;
#pragma unroll
      for (uint c = 0; c < ATT_NV; c++) acc[c] *= corr;
      m = mt;
    }
    float p[ATT_KB];
    vstore8(attn_exp8(vload8(0, s) - mt), 0, p);
#pragma unroll
    for (uint e = 0; e < ATT_KB; e++) l += p[e];
    __global const float *vr[ATT_KB];
#pragma unroll
    for (uint e = 0; e < ATT_KB; e++) vr[e] = v + min(j0 + e, hi - 1u) * kv_is;
#pragma unroll
    for (uint c = 0; c < ATT_NV; c++) {
      attv x = acc[c];
#pragma unroll
      for (uint e = 0; e < ATT_KB; e++) x = fma((attv)(p[e]), ATT_LOAD(c, vr[e]), x);
      acc[c] = x;
    }
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
  for (uint c = 0; c < ATT_NV; c++) ATT_STORE(acc[c] * inv, c, out);
}
#endif /* ATT_CPU */

#ifdef ATT_SHORT
/* The CPU shape for short key ranges (-DATT_SHORT, kv_len <= ATT_SK, 64 or
 * 128: Swin's windows of 49 keys, short sequences), the host's pick where
 * a work-group has rows enough to share one transposition and no causal
 * mask or window bands them (the row kernel stops at a band's edge).  A
 * work-group takes up to its size of one KV head's query rows and first
 * writes that head's K transposed into local memory (kt[d][j], keys past
 * kv_len 0) with each key's padding verdict (0, or -inf).  A work-item's
 * row then has its scores with the keys in lanes, 8 a vector: HEAD_DIM
 * vector fmas of a broadcast q[d] (32 x 8 for Swin's heads) instead of a
 * dot product and a reduction a key (16 lanes a vector measured alike);
 * its softmax takes the whole row at once (no running max), and P V adds
 * the row's keys' value rows.  Swin-T's attention on PoCL 8.2-8.4 -> 5.4-5.9
 * ms, on Intel's CPU runtime 8.6-8.9 -> 5.6-6.0 (64 windows x 3 heads alone
 * 1.4 -> 1.0 ms there). */
#ifndef ATT_SK
#define ATT_SK 64
#endif
#define ATT_SV (ATT_SK / 8)

/* Global (the G * Lq rows of a KV head rounded up to the group, B * H /
 * G), local (up to ATT_SK, 1); arguments as attn_fused_cpu's. */
__kernel void attn_short_cpu(ATT_FUSED_PARAMS, uint q_bs, uint q_hs, uint q_is, uint kv_bs, uint kv_hs,
                             uint kv_is) {
  __local float kt[HEAD_DIM * ATT_SK];
  __local float kept[ATT_SK];
  const uint n_rows = G * Lq, t = get_global_id(0), bkv = get_global_id(1);
  const uint lid = get_local_id(0), wg = get_local_size(0);
  const uint Hkv = H / G, b = bkv / Hkv, hk = bkv - b * Hkv;
  k += k_off + b * kv_bs + hk * kv_hs;
  pad += pad_off + b * Lk * (pad_kind == 2 ? 2u : 1u);
  for (uint e = lid; e < ATT_SK * HEAD_DIM; e += wg) {
    const uint j = e / HEAD_DIM, d = e - j * HEAD_DIM;
    kt[d * ATT_SK + j] = j < Lk ? k[j * kv_is + d] : 0.0f;
  }
  for (uint j = lid; j < ATT_SK; j += wg) kept[j] = j < Lk && attn_key_kept(pad, pad_kind, j) ? 0.0f : -INFINITY;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (t >= n_rows) return;
  const uint hg = t / Lq, i = t - hg * Lq, h = hk * G + hg;
  const uint nw = b / n_win, w = b - nw * n_win;
  q += q_off + b * q_bs + h * q_hs + i * q_is;
  v += v_off + b * kv_bs + hk * kv_hs;
  bias += bias_off + w * bias_bstride + h * bias_hstride + i * Lk;
  out += out_off + b * H * Lq * HEAD_DIM + h * out_h + i * out_i;
  /* The query sits at position i + Lk - Lq and sees keys lo <= j < hi. */
  const long pos = (long)i + (long)Lk - (long)Lq;
  const uint hi = causal ? (uint)clamp(pos + 1, 0L, (long)Lk) : Lk;
  const uint lo = window ? (uint)clamp(pos - (long)window + 1, 0L, (long)Lk) : 0u;

  float8 dv[ATT_SV];
#pragma unroll
  for (uint c = 0; c < ATT_SV; c++) dv[c] = 0.0f;
  for (uint d = 0; d < HEAD_DIM; d++) {
    const float8 qd = (float8)(q[d] * scale);
#pragma unroll
    for (uint c = 0; c < ATT_SV; c++) dv[c] = fma(qd, vload8(c, kt + d * ATT_SK), dv[c]);
  }
  /* The row's scores, masked (-inf), in private memory: the bias and the
   * causal and window bounds go key by key, the max through vectors. */
  float sp[ATT_SK];
#pragma unroll
  for (uint c = 0; c < ATT_SV; c++) vstore8(clf_softcap8(dv[c], softcap) + vload8(c, kept), c, sp);
  if (has_bias)
    for (uint j = 0; j < Lk; j++) sp[j] += bias[j];
  for (uint j = 0; j < lo; j++) sp[j] = -INFINITY;
  for (uint j = hi; j < Lk; j++) sp[j] = -INFINITY;
  float8 mv = vload8(0, sp);
#pragma unroll
  for (uint c = 1; c < ATT_SV; c++) mv = fmax(mv, vload8(c, sp));
  float mr[8];
  vstore8(mv, 0, mr);
  float m = mr[0];
  for (uint e = 1; e < 8; e++) m = fmax(m, mr[e]);
  attv acc[ATT_NV];
#pragma unroll
  for (uint c = 0; c < ATT_NV; c++) acc[c] = 0.0f;
  if (m != -INFINITY) { /* else every key is masked: zeros */
    float8 lv = 0.0f;
#pragma unroll
    for (uint c = 0; c < ATT_SV; c++) {
      const float8 p = attn_exp8(vload8(c, sp) - m);
      lv += p;
      vstore8(p, c, sp);
    }
    for (uint j = lo; j < hi; j++) {
      const attv pj = (attv)(sp[j]);
      __global const float *vr = v + j * kv_is;
#pragma unroll
      for (uint c = 0; c < ATT_NV; c++) acc[c] = fma(pj, ATT_LOAD(c, vr), acc[c]);
    }
    const float inv = 1.0f / dot(lv.lo + lv.hi, (float4)(1.0f));
#pragma unroll
    for (uint c = 0; c < ATT_NV; c++) acc[c] *= inv;
  }
#pragma unroll
  for (uint c = 0; c < ATT_NV; c++) ATT_STORE(acc[c], c, out);
}
#endif /* ATT_SHORT */
#endif /* HEAD_DIM, ATT_CPU or ATT_SHORT */
