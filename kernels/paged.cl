/* paged.cl - attention over a paged KV cache (host/ops/paged.c).
 *
 * The cache of one layer is a pool of blocks, K and V each
 * [n_blocks, Hkv, BS, Dh]: position j of a sequence lives in block
 * table[seq, j / BS] at offset j - (j / BS) * BS.  The T rows of a step
 * belong to different sequences (one new token of each decoding sequence,
 * a chunk of prompt of each starting one); row t is at absolute position
 * pos[t] of sequence seq[t] and sees that sequence's positions 0..pos[t]
 * (causal), or the last `window` of them.  Each score, scaled, is
 * soft-capped where softcap > 0 (clf_softcap in common.cl).
 *
 * Metadata is one i64 buffer (the step's single upload): pos, seq, slot at
 * offsets the host gives, the block table [S, max_blocks] at table_off.
 *
 * The pools hold f32, or f16 with -DKV_HALF (half the memory; vload_half
 * and vstore_half_rte are core OpenCL, so any device takes them).
 *
 * Options: -DHEAD_DIM=Dh -DPG_WG=n (a power of two <= CLF_RED_WG, the
 * work-group of paged_attention: one group per (row, head), PG_WG keys a
 * tile); paged_attention_cpu, the CPU shape, needs only -DHEAD_DIM
 * (-DPG_SCALAR: its scalar loop where eight lanes divide the head, for
 * Oclgrind 21.10, which crashes running the eight-lane one).
 * Quotients and remainders are spelled out, as in attention.cl.
 */

#ifdef KV_HALF
#define KV_T half
#define KV_LOAD(p, i) vload_half((i), (p))
#define KV_LOAD8(p, i) vload_half8((i), (p))
#define KV_STORE(p, i, v) vstore_half_rte((v), (i), (p))
#else
#define KV_T float
#define KV_LOAD(p, i) ((p)[i])
#define KV_LOAD8(p, i) vload8((i), (p))
#define KV_STORE(p, i, v) ((p)[i] = (v))
#endif

/* kpool[slot[t]] = ks[h, t, :] and vpool[slot[t]] = the values of head
 * h in row t of the projection, for every row t and KV head h: the step's
 * new keys [Hkv, T, Dh], already split and rotated, and its values read
 * where the projection holds them (row t at vs_off + t * vs_row, head h
 * Dh further on), into their blocks, in one launch.  One work-item per
 * (t, h) row of Dh, h < Hkv the keys', the rest the values'. */
__kernel void kv_scatter(__global const float *ks, uint ks_off, __global const float *vs, uint vs_off, uint vs_row,
                         __global const long *meta, uint slot_off, __global KV_T *kpool, uint kp_off,
                         __global KV_T *vpool, uint vp_off, uint T, uint Hkv, uint Dh, uint BS) {
  const uint t = get_global_id(0), hv = get_global_id(1);
  if (t >= T || hv >= 2 * Hkv) return;
  const uint h = hv < Hkv ? hv : hv - Hkv;
  const ulong slot = (ulong)meta[slot_off + t];
  const ulong blk = slot / BS, off = slot - blk * BS;
  __global const float *s = hv < Hkv ? ks + ks_off + ((ulong)h * T + t) * Dh
                                     : vs + vs_off + (ulong)t * vs_row + (ulong)h * Dh;
  __global KV_T *d = (hv < Hkv ? kpool + kp_off : vpool + vp_off) + ((blk * Hkv + h) * BS + off) * Dh;
  for (uint i = 0; i < Dh; i++) KV_STORE(d, i, s[i]);
}

#ifdef HEAD_DIM
/* n of the pool's elements from p asked for ahead (common.cl). */
#define PG_PREFETCH(p, n) CLF_PREFETCH((p), (n) * sizeof(KV_T))

/* paged_attention's CPU shape: one work-item per (row, head), item id
 * t * H + h, walking the row's keys in order with an online softmax in
 * registers: no local memory and no barriers, which a CPU runtime runs as
 * loops over the work-group (on PoCL the group kernel spent 19% of a
 * 16-sequence decode step there). */
__kernel void paged_attention_cpu(__global const float *q, uint q_off, __global const KV_T *kp, uint k_off,
                                  __global const KV_T *vp, uint v_off, __global const long *meta, uint pos_off,
                                  uint seq_off, uint table_off, uint max_blocks, __global float *out, uint out_off,
                                  uint T, uint H, uint Hkv, uint BS, uint window, float scale, float softcap) {
  const uint g = get_global_id(0);
  const uint t = g / H, h = g - t * H;
  if (t >= T) return;
  const uint hk = h / (H / Hkv);
  const long p = meta[pos_off + t];
  __global const long *table = meta + table_off + (ulong)meta[seq_off + t] * max_blocks;
  const long lo = window > 0 && p + 1 > (long)window ? p + 1 - (long)window : 0;
#if HEAD_DIM % 8 == 0 && !defined(PG_SCALAR)
  /* Eight lanes at a time: a work-item's own loads and products are
   * vectors (the CPU compilers otherwise vectorise across work-items,
   * whose key counts differ). */
#define PG_V (HEAD_DIM / 8)
  float8 qr[PG_V], acc[PG_V];
  __global const float *qrow = q + q_off + ((ulong)h * T + t) * HEAD_DIM;
  for (uint i = 0; i < PG_V; i++) {
    qr[i] = vload8(i, qrow) * scale;
    acc[i] = (float8)(0.0f);
  }
  /* The keys block by block (no division a key), PG_T at a time: their
   * scores first, then one rescale of the sums to the tile's max and the
   * tile's exps as one vector (a key at a time took two exps and a 64-bit
   * division each: a quarter of a prefill's device time on PoCL) */
#define PG_T 8
  float m = -INFINITY, l = 0.0f;
  /* The first block's keys and values, then each next block's, asked for
   * while a block is read: a work-item's keys come from DRAM (a step's
   * weights pass through the cache between its layers), one 64-byte line
   * after another.  GPT-2 q8 decode on PoCL, 256 tokens after 16: 0.77-0.83
   * -> 0.51-0.53 ms of attention a token; 48 tokens: 0.26-0.31 -> 0.20-0.24
   * (Intel's CPU runtime at 256: 0.47-0.51 -> 0.37-0.47; session 39) */
  {
    const ulong b0 = ((ulong)table[lo / (long)BS] * Hkv + hk) * BS * HEAD_DIM;
    PG_PREFETCH(kp + k_off + b0, BS * HEAD_DIM);
    PG_PREFETCH(vp + v_off + b0, BS * HEAD_DIM);
  }
  for (long b = lo / (long)BS; b * (long)BS <= p; b++) {
    const ulong blk = ((ulong)table[b] * Hkv + hk) * BS * HEAD_DIM;
    if ((b + 1) * (long)BS <= p) {
      const ulong nb = ((ulong)table[b + 1] * Hkv + hk) * BS * HEAD_DIM;
      PG_PREFETCH(kp + k_off + nb, BS * HEAD_DIM);
      PG_PREFETCH(vp + v_off + nb, BS * HEAD_DIM);
    }
    const long first = b * (long)BS, j0 = lo > first ? lo : first, j1 = p + 1 < first + BS ? p + 1 : first + BS;
    for (long jt = j0; jt < j1; jt += PG_T) {
      const uint n = j1 - jt < PG_T ? (uint)(j1 - jt) : PG_T;
      __global const KV_T *k = kp + k_off + blk + (ulong)(jt - first) * HEAD_DIM;
      __global const KV_T *v = vp + v_off + blk + (ulong)(jt - first) * HEAD_DIM;
      float s[PG_T], e[PG_T], mt = m;
      for (uint u = 0; u < PG_T; u++) {
        s[u] = -INFINITY; /* past the tile's keys: exp 0 */
        if (u < n) {
          float8 s8 = (float8)(0.0f);
          for (uint i = 0; i < PG_V; i++) s8 += qr[i] * KV_LOAD8(k + u * HEAD_DIM, i);
          const float4 s4 = s8.lo + s8.hi;
          const float2 s2 = s4.lo + s4.hi;
          s[u] = clf_softcap(s2.x + s2.y, softcap);
          mt = fmax(mt, s[u]);
        }
      }
      const float corr = exp(m - mt);
      const float8 e8 = exp(vload8(0, s) - mt); /* the tile's exps as one vector */
      vstore8(e8, 0, e);
      const float4 e4 = e8.lo + e8.hi;
      const float2 e2 = e4.lo + e4.hi;
      l = l * corr + (e2.x + e2.y);
      for (uint i = 0; i < PG_V; i++) acc[i] *= corr;
      for (uint u = 0; u < n; u++)
        for (uint i = 0; i < PG_V; i++) acc[i] += e[u] * KV_LOAD8(v + u * HEAD_DIM, i);
      m = mt;
    }
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  __global float *orow = out + out_off + ((ulong)t * H + h) * HEAD_DIM;
  for (uint i = 0; i < PG_V; i++) vstore8(acc[i] * inv, i, orow);
#else
  float qr[HEAD_DIM], acc[HEAD_DIM];
  for (uint d = 0; d < HEAD_DIM; d++) {
    qr[d] = q[q_off + ((ulong)h * T + t) * HEAD_DIM + d] * scale;
    acc[d] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (long j = lo; j <= p; j++) {
    const long b = j / BS;
    const ulong at = (((ulong)table[b] * Hkv + hk) * BS + (ulong)(j - b * BS)) * HEAD_DIM;
    __global const KV_T *k = kp + k_off + at, *v = vp + v_off + at;
    float s = 0.0f;
    for (uint d = 0; d < HEAD_DIM; d++) s += qr[d] * KV_LOAD(k, d);
    s = clf_softcap(s, softcap);
    const float mn = fmax(m, s), corr = exp(m - mn), e = exp(s - mn);
    l = l * corr + e;
    for (uint d = 0; d < HEAD_DIM; d++) acc[d] = acc[d] * corr + e * KV_LOAD(v, d);
    m = mn;
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (uint d = 0; d < HEAD_DIM; d++) out[out_off + ((ulong)t * H + h) * HEAD_DIM + d] = acc[d] * inv;
#endif
}

#ifdef PG_WG
#define PG_ACC ((HEAD_DIM + PG_WG - 1) / PG_WG)

/* Sum (op 0) or max (op 1) of red[0..PG_WG) into red[0]; uniform. */
inline float pg_reduce(__local float *red, int op) {
  const uint lid = get_local_id(0);
  for (uint s = PG_WG / 2; s > 0; s >>= 1) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < s) red[lid] = op ? fmax(red[lid], red[lid + s]) : red[lid] + red[lid + s];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const float r = red[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

/* out[t, h * Dh + d] = softmax_j(cap(scale * q[h, t] . k[j])) v[j][d] over the
 * positions j the row sees, its keys read through the block table.  One
 * work-group of PG_WG per (t, h), group id t * H + h: a tile of PG_WG keys
 * a step (one per work-item), an online softmax across tiles, each
 * work-item owning output dims lid, lid + PG_WG, ...  Query head h reads
 * KV head h / (H / Hkv). */
__kernel void paged_attention(__global const float *q, uint q_off, __global const KV_T *kp, uint k_off,
                              __global const KV_T *vp, uint v_off, __global const long *meta, uint pos_off, uint seq_off,
                              uint table_off, uint max_blocks, __global float *out, uint out_off, uint T, uint H,
                              uint Hkv, uint BS, uint window, float scale, float softcap) {
  __local float qs[HEAD_DIM];
  __local float w[PG_WG];
  __local float red[PG_WG];
  const uint g = get_group_id(0), lid = get_local_id(0);
  const uint t = g / H, h = g - t * H;
  if (t >= T) return; /* uniform over the group */
  const uint hk = h / (H / Hkv);
  kp += k_off;
  vp += v_off;
  const long p = meta[pos_off + t];
  __global const long *table = meta + table_off + (ulong)meta[seq_off + t] * max_blocks;
  const long lo = window > 0 && p + 1 > (long)window ? p + 1 - (long)window : 0;
  const long end = p + 1;
  for (uint d = lid; d < HEAD_DIM; d += PG_WG) qs[d] = q[q_off + ((ulong)h * T + t) * HEAD_DIM + d];
  float acc[PG_ACC];
  for (uint i = 0; i < PG_ACC; i++) acc[i] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (long j0 = lo; j0 < end; j0 += PG_WG) {
    const long j = j0 + lid;
    float s = -INFINITY;
    if (j < end) {
      const long b = j / BS;
      const ulong blk = (ulong)table[b], off = (ulong)(j - b * BS);
      __global const KV_T *k = kp + ((blk * Hkv + hk) * BS + off) * HEAD_DIM;
      float dot = 0.0f;
      for (uint d = 0; d < HEAD_DIM; d++) dot += qs[d] * KV_LOAD(k, d);
      s = clf_softcap(dot * scale, softcap);
    }
    red[lid] = s;
    const float mt = pg_reduce(red, 1);
    const float mn = fmax(m, mt), corr = exp(m - mn);
    const float e = j < end ? exp(s - mn) : 0.0f;
    w[lid] = e;
    red[lid] = e;
    const float lt = pg_reduce(red, 0);
    l = l * corr + lt;
    m = mn;
    const uint n = end - j0 < PG_WG ? (uint)(end - j0) : PG_WG;
    for (uint i = 0; i < PG_ACC; i++) {
      const uint d = lid + i * PG_WG;
      float a = acc[i] * corr;
      if (d < HEAD_DIM)
        for (uint jj = 0; jj < n; jj++) {
          const long jx = j0 + jj, b = jx / BS;
          const ulong blk = (ulong)table[b], off = (ulong)(jx - b * BS);
          a += w[jj] * KV_LOAD(vp, ((blk * Hkv + hk) * BS + off) * HEAD_DIM + d);
        }
      acc[i] = a;
    }
    barrier(CLK_LOCAL_MEM_FENCE); /* w is rewritten by the next tile */
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (uint i = 0; i < PG_ACC; i++) {
    const uint d = lid + i * PG_WG;
    if (d < HEAD_DIM) out[out_off + ((ulong)t * H + h) * HEAD_DIM + d] = acc[i] * inv;
  }
}
#endif
#endif
