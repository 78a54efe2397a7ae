/* linear.cl - the linear family: y = act(x W^T + bias) read straight from
 * the weight's storage type, for skinny x (M <= 8 rows a launch: decoding,
 * small batches) and, on a CPU, for any M in register tiles (skinny_tile);
 * and the expansion of a stored weight to f32 for CLBlast's GEMM where
 * CLBlast is measured faster.
 *
 * Weights are [N, K] (out, in), row-major, in one of the storage types
 * of clformer.h's CLF_DTYPE_MAP (which states the block formats).  The
 * host passes the map's constants (-DWT_F32, -DWT_Q4_K, ...), the
 * weights' one as WTYPE, and its elements and bytes a block as GB and
 * GBYTES:
 *   WT_F32; WT_F16 (read with vload_half: core OpenCL, no cl_khr_fp16
 *     needed);
 *   WT_Q8_0: int8 quants [N*K], then one f16 scale per 32 along K;
 *   WT_Q4_0: 16 bytes per 32 (element j low nibble, j + 16 high, minus 8),
 *     then the f16 scales;
 *   the others, ggml's blocks as a GGUF file stores them (ggml-common.h),
 *     scales inside each block: Q4_1, Q5_0, Q5_1 (blocks of 32); Q2_K,
 *     Q3_K, Q4_K, Q5_K, Q6_K (super-blocks of 256, read in chunks of 32),
 *     each decoded as ggml's dequantize_row_* does.
 * The weight buffer is passed at its element type WT (float, half, char,
 * uchar) and, for the block types, a second time as the halves of the
 * scales (offset s_off), so that no kernel casts a pointer (Oclgrind's
 * uninitialised-value checker crashes on such casts).
 *
 * skinny: a work-group of SPLIT x ROWS work-items computes ROWS outputs;
 * the SPLIT work-items of a row share its K (chunks of CH weights, strided
 * by SPLIT so that neighbours read neighbouring memory), accumulate in f32
 * for up to MMAX rows of x, and reduce through local memory.  Every weight
 * is read once; x (M x K floats) stays in cache.
 */

/* CLF_ONLY=1 with CLF_ONLY_<kernel>=1 (host/core/program.c, for each
 * kernel the host asks for): the program holds that kernel alone.  The
 * kernels' variants multiply by weight type, rows and options, and each
 * build compiled every kernel of the file: on Intel's CPU runtime a
 * k-quant type's 16-row program took 9 s to build for the one kernel it
 * ran.  Without CLF_ONLY (clf_context_prepare) every kernel is built. */
#ifndef CLF_ONLY
#define CLF_ONLY 0
#endif

#if !defined(WTYPE) || !defined(WT_F32)
#error "ops/linear.c passes WTYPE and the weight types' constants (-DWT_F32=0 ...)"
#endif
/* ggml's layout: the block types other than clformer's split Q8_0 / Q4_0;
 * among them ggml's blocks of 32 with a scale (and a min) per block. */
#define GGML_BLOCKS (GB > 1 && WTYPE != WT_Q8_0 && WTYPE != WT_Q4_0)
#define GGML_32 (WTYPE == WT_Q4_1 || WTYPE == WT_Q5_0 || WTYPE == WT_Q5_1)
#ifndef SPLIT
#define SPLIT 1
#endif
#ifndef ROWS
#define ROWS 4
#endif
#ifndef MMAX
#define MMAX 8
#endif
/* -DCLF_USE_FP16=1 (the variant linear.skinny_h: the device has cl_khr_fp16
 * and the variant passed self-validation): f16 weights load as half8
 * vectors, converted to float8 for the products; products in half would
 * round x to 11 bits, far outside the f32 tolerance the f16 path meets. */
#ifndef CLF_USE_FP16
#define CLF_USE_FP16 0
#endif
#if CLF_USE_FP16
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#endif
#if CLF_USE_SUBGROUPS && defined(cl_khr_subgroup_clustered_reduce)
#pragma OPENCL EXTENSION cl_khr_subgroup_clustered_reduce : enable
#endif

/* Weights per chunk: one vload8 for f32/f16, one block for Q8_0/Q4_0. */
#if GB == 1
#define CH 8
#else
#define CH 32
#endif
#if WTYPE == WT_F32
#define WT float
#elif WTYPE == WT_F16
#define WT half
#elif WTYPE == WT_Q8_0
#define WT char
#else
#define WT uchar
#endif
#define NV (CH / 8)

#if GGML_BLOCKS

/* Q4_K / Q5_K's 6-bit scale (.x) and min (.y) of sub-block j, from the 12
 * packed bytes at q. */
inline uint2 scale_min_k4(uint j, __global const uchar *q) {
  if (j < 4) return (uint2)(q[j] & 63, q[j + 4] & 63);
  return (uint2)((q[j + 4] & 15) | (q[j - 4] >> 6) << 4, (q[j + 4] >> 4) | (q[j] >> 6) << 4);
}

/* Q3_K's 6-bit scale of sub-block t (of 16), less 32, from the 12 packed
 * bytes at sc (ggml's dequantize_row_q3_K: the low 4 bits in scales[t %
 * 8], its nibble t / 8, the high 2 in scales[8 + t % 4] at 2 (t / 4)). */
inline int scale_q3k(uint t, __global const uchar *sc) {
  const uint lo = t < 8 ? sc[t] & 15 : sc[t - 8] >> 4, hi = (sc[8 + t % 4] >> (2 * (t / 4))) & 3;
  return (int)(lo | hi << 4) - 32;
}

/* Elements 8p..8p+7 of chunk c (32 elements) of row n, decoded. */
inline float8 ggml_part(__global const uchar *w, __global const half *s, uint n, uint c, uint p, uint K) {
  const uint j = c % (GB / 32); /* the chunk's place in its super-block */
  const size_t bo = ((size_t)n * (K / GB) + c / (GB / 32)) * GBYTES; /* the block's first byte */
  const uint8 e = (uint8)(0, 1, 2, 3, 4, 5, 6, 7) + 8 * p;        /* elements of the chunk */
#if GGML_32 /* Q4_1 {d; m; qs[16]}, Q5_0 {d; qh[4]; qs[16]}, Q5_1 {d; m; qh[4]; qs[16]} */
  const float d = vload_half(bo / 2, s);
  const uint qs_at = WTYPE == WT_Q4_1 ? 4 : WTYPE == WT_Q5_0 ? 6 : 8;
  const uchar8 qs = vload8(p & 1, w + bo + qs_at);
  uint8 x = convert_uint8(p < 2 ? qs & (uchar8)15 : qs >> (uchar8)4);
#if WTYPE != WT_Q4_1
  const uint hb = WTYPE == WT_Q5_0 ? 2 : 4;
  const uint qh = (uint)w[bo + hb] | (uint)w[bo + hb + 1] << 8 | (uint)w[bo + hb + 2] << 16 | (uint)w[bo + hb + 3] << 24;
  x |= (((uint8)(qh) >> e) & (uint8)1) << (uint8)4;
#endif
#if WTYPE == WT_Q5_0
  return convert_float8(convert_int8(x) - 16) * d;
#else /* an fma, as skinny_pair takes it (a * b + c is contracted or not as each compiler likes) */
  return fma(convert_float8(x), (float8)(d), (float8)(vload_half(bo / 2 + 1, s)));
#endif
#elif WTYPE == WT_Q2_K /* Q2_K {scales[16]; qs[64]; d; dmin} */
  const uint g = j / 4, sh = 2 * (j % 4);
  const uchar sc = w[bo + g * 8 + (j % 4) * 2 + p / 2];
  const float dl = vload_half((bo + 80) / 2, s) * (float)(sc & 15), ml = vload_half((bo + 82) / 2, s) * (float)(sc >> 4);
  const uchar8 q = vload8(p, w + bo + 16 + g * 32);
  return dl * convert_float8((q >> (uchar8)sh) & (uchar8)3) - ml;
#elif WTYPE == WT_Q3_K /* Q3_K {hmask[32]; qs[64]; scales[12]; d} */
  const uint g = j / 4, sh = 2 * (j % 4), is = g * 8 + (j % 4) * 2 + p / 2;
  const float dl = vload_half((bo + 108) / 2, s) * (float)scale_q3k(is, w + bo + 96);
  const uchar8 q = vload8(p, w + bo + 32 + g * 32), hm = vload8(p, w + bo);
  const int8 hbit = convert_int8((hm >> (uchar8)(g * 4 + j % 4)) & (uchar8)1);
  return dl * convert_float8(convert_int8((q >> (uchar8)sh) & (uchar8)3) - (1 - hbit) * 4);
#elif WTYPE == WT_Q4_K || WTYPE == WT_Q5_K /* Q4_K {d; dmin; scales[12]; qs[128]}, Q5_K {d; dmin; scales[12]; qh[32]; qs[128]} */
  const uint2 sm = scale_min_k4(j, w + bo + 4);
  const float d1 = vload_half(bo / 2, s) * (float)sm.x, m1 = vload_half(bo / 2 + 1, s) * (float)sm.y;
  const uchar8 q = vload8(p, w + bo + (WTYPE == WT_Q4_K ? 16 : 48) + (j / 2) * 32);
  uchar8 x = j % 2 ? q >> (uchar8)4 : q & (uchar8)15;
#if WTYPE == WT_Q5_K
  x |= ((vload8(p, w + bo + 16) >> (uchar8)j) & (uchar8)1) << (uchar8)4;
#endif
  return d1 * convert_float8(x) - m1;
#elif WTYPE == WT_Q6_K /* Q6_K {ql[128]; qh[64]; scales[16] (int8); d} */
  const uint g = j / 4, t = j % 4;
  const uchar8 ql = vload8(p, w + bo + g * 64 + (t & 1) * 32), qh = vload8(p, w + bo + 128 + g * 32);
  const uchar8 x = (t < 2 ? ql & (uchar8)15 : ql >> (uchar8)4) | ((qh >> (uchar8)(2 * t)) & (uchar8)3) << (uchar8)4;
  const float dl = vload_half((bo + 208) / 2, s) * (float)(char)w[bo + 192 + g * 8 + p / 2 + 2 * t];
  return dl * convert_float8(convert_int8(x) - 32);
#else
#error "ggml_part: no decoder for this WTYPE (a row added to CLF_DTYPE_MAP needs its branch here)"
#endif
}

/* All of chunk c of row n (v[0..3]): the 32-element blocks' scale, min
 * and fifth bits read once (the k-quants part by part: their scales change
 * every 16 elements). */
inline void ggml_chunk(__global const uchar *w, __global const half *s, uint n, uint c, uint K, float8 *v) {
#if GGML_32
  const size_t bo = ((size_t)n * (K / GB) + c) * GBYTES;
  const float d = vload_half(bo / 2, s), m = WTYPE == WT_Q5_0 ? 0.0f : vload_half(bo / 2 + 1, s);
  const uint qs_at = WTYPE == WT_Q4_1 ? 4 : WTYPE == WT_Q5_0 ? 6 : 8;
  const uchar8 q0 = vload8(0, w + bo + qs_at), q1 = vload8(1, w + bo + qs_at);
  uint8 x0 = convert_uint8(q0 & (uchar8)15), x1 = convert_uint8(q1 & (uchar8)15);
  uint8 x2 = convert_uint8(q0 >> (uchar8)4), x3 = convert_uint8(q1 >> (uchar8)4);
#if WTYPE != WT_Q4_1
  const uint hb = WTYPE == WT_Q5_0 ? 2 : 4;
  const uint8 qh = (uint8)((uint)w[bo + hb] | (uint)w[bo + hb + 1] << 8 | (uint)w[bo + hb + 2] << 16 |
                           (uint)w[bo + hb + 3] << 24);
  const uint8 e = (uint8)(0, 1, 2, 3, 4, 5, 6, 7);
  x0 |= ((qh >> e) & (uint8)1) << (uint8)4;
  x1 |= ((qh >> (e + 8)) & (uint8)1) << (uint8)4;
  x2 |= ((qh >> (e + 16)) & (uint8)1) << (uint8)4;
  x3 |= ((qh >> (e + 24)) & (uint8)1) << (uint8)4;
#endif
#if WTYPE == WT_Q5_0
  v[0] = convert_float8(convert_int8(x0) - 16) * d;
  v[1] = convert_float8(convert_int8(x1) - 16) * d;
  v[2] = convert_float8(convert_int8(x2) - 16) * d;
  v[3] = convert_float8(convert_int8(x3) - 16) * d;
#else
  v[0] = convert_float8(x0) * d + m;
  v[1] = convert_float8(x1) * d + m;
  v[2] = convert_float8(x2) * d + m;
  v[3] = convert_float8(x3) * d + m;
#endif
#else
  for (uint p = 0; p < 4; p++) v[p] = ggml_part(w, s, n, c, p, K);
#endif
}
#endif

/* Chunk c of row n as NV float8 (unscaled quants for the block types) and
 * its scale (1 for f32 / f16). */
inline float load_chunk(__global const WT *w, uint w_off, __global const half *s, uint s_off, uint n, uint c,
                        uint K, float8 *v) {
#if WTYPE == WT_F32
  v[0] = vload8(0, w + w_off + (size_t)n * K + (size_t)c * 8);
  return 1.0f;
#elif WTYPE == WT_F16 && CLF_USE_FP16
  v[0] = convert_float8(vload8(0, w + w_off + (size_t)n * K + (size_t)c * 8)); /* a half8, products in f32 */
  return 1.0f;
#elif WTYPE == WT_F16
  v[0] = vload_half8(0, w + w_off + (size_t)n * K + (size_t)c * 8);
  return 1.0f;
#elif GGML_BLOCKS
  ggml_chunk(w + w_off, s + s_off, n, c, K, v);
  return 1.0f;
#elif WTYPE == WT_Q8_0
  const size_t blk = (size_t)n * (K / 32) + c;
  /* 8-wide loads: Oclgrind 21.10 tracks only half of a 16-byte vload16 as
   * initialised */
  for (uint j = 0; j < 4; j++) v[j] = convert_float8(vload8(j, w + blk * 32));
  return vload_half(blk, s + s_off);
#else
  const size_t blk = (size_t)n * (K / 32) + c;
  /* in 8-wide halves: a float16 value is passed in two registers
   * without AVX-512, which clang warns about on PoCL */
  const uchar8 lo = vload8(0, w + blk * 16), hi = vload8(1, w + blk * 16);
  v[0] = convert_float8(lo & (uchar8)15) - 8.0f;
  v[1] = convert_float8(hi & (uchar8)15) - 8.0f;
  v[2] = convert_float8(lo >> (uchar8)4) - 8.0f;
  v[3] = convert_float8(hi >> (uchar8)4) - 8.0f;
  return vload_half(blk, s + s_off);
#endif
}

/* The sum of v's elements, through dot(): Oclgrind 21.10's
 * uninitialised-value checker crashes on extracting a vector's element. */
inline float sum8(float8 v) { return dot(v.lo + v.hi, (float4)(1.0f)); }

/* y [M, N] = act(x [M, K] W^T + bias), M <= MMAX; global (SPLIT, N rounded
 * up to ROWS), local (SPLIT, ROWS).  K is a multiple of CH.  red holds
 * ROWS x SPLIT floats; with sg (the variant linear.skinny_sg) each row's
 * SPLIT partial sums meet through sub_group_reduce_add where the sub-group
 * size divides SPLIT (a row is then whole sub-groups: work-items are
 * numbered r * SPLIT + lane), else through the local tree as without. */
inline void skinny_group(__global const float *x, uint x_off, __global const WT *w, uint w_off,
                         __global const half *s, uint s_off, __global const float *bias, uint b_off, int has_bias,
                         int act, __global float *y, uint y_off, uint M, uint N, uint K, __local float *red,
                         int sg) {
  const uint lane = get_local_id(0), r = get_local_id(1);
  const uint n = get_group_id(1) * ROWS + r;
  x += x_off;
  float8 acc[MMAX];
  for (uint m = 0; m < MMAX; m++) acc[m] = (float8)(0.0f);
  if (n < N) {
    const uint chunks = K / CH;
    for (uint c = lane; c < chunks; c += SPLIT) {
      float8 v[NV];
      const float d = load_chunk(w, w_off, s, s_off, n, c, K, v);
      for (uint m = 0; m < MMAX; m++) {
        if (m < M) {
          __global const float *xp = x + (size_t)m * K + (size_t)c * CH;
          float8 s = vload8(0, xp) * v[0];
          for (uint j = 1; j < NV; j++) s += vload8(j, xp) * v[j];
          acc[m] += d * s;
        }
      }
    }
  }
  float out[MMAX];
  for (uint m = 0; m < MMAX; m++) out[m] = sum8(acc[m]);
#if SPLIT > 1
  uint per = 0; /* sub-groups per row; 0: the local tree; CLUSTERED: rows within a sub-group */
#define CLUSTERED 0xffffffffu
#if CLF_USE_SUBGROUPS
  if (sg && SPLIT % get_max_sub_group_size() == 0) per = SPLIT / get_max_sub_group_size();
#ifdef cl_khr_subgroup_clustered_reduce
  else if (sg && get_max_sub_group_size() % SPLIT == 0) per = CLUSTERED;
#endif
#endif
  for (uint m = 0; m < MMAX; m++) {
    if (m < M) { /* M is uniform: every work-item meets the barriers */
#if CLF_USE_SUBGROUPS && defined(cl_khr_subgroup_clustered_reduce)
      if (per == CLUSTERED) { /* a sub-group holds whole rows: each cluster of SPLIT sums one */
        out[m] = sub_group_clustered_reduce_add(out[m], SPLIT);
        continue;
      }
#endif
#if CLF_USE_SUBGROUPS
      if (per) { /* uniform too */
        const float p = sub_group_reduce_add(out[m]);
        if (get_sub_group_local_id() == 0) red[get_sub_group_id()] = p;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lane == 0) {
          float t = 0.0f;
          for (uint i = 0; i < per; i++) t += red[r * per + i];
          out[m] = t;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        continue;
      }
#endif
      red[r * SPLIT + lane] = out[m];
      barrier(CLK_LOCAL_MEM_FENCE);
      for (uint h = SPLIT / 2; h > 0; h >>= 1) {
        if (lane < h) red[r * SPLIT + lane] += red[r * SPLIT + lane + h];
        barrier(CLK_LOCAL_MEM_FENCE);
      }
      out[m] = red[r * SPLIT];
      barrier(CLK_LOCAL_MEM_FENCE);
    }
  }
#endif
  if (lane != 0 || n >= N) return;
  const float b = has_bias ? bias[b_off + n] : 0.0f;
  for (uint m = 0; m < MMAX; m++)
    if (m < M) y[y_off + (size_t)m * N + n] = clf_act(out[m] + b, act);
}

#define SKINNY_PARAMS                                                                                            \
  __global const float *x, uint x_off, __global const WT *w, uint w_off, __global const half *s, uint s_off,    \
      __global const float *bias, uint b_off, int has_bias, int act, __global float *y, uint y_off, uint M,      \
      uint N, uint K
#define SKINNY_ARGS x, x_off, w, w_off, s, s_off, bias, b_off, has_bias, act, y, y_off, M, N, K

/* skinny: the kernel; skinny_h its build with -DCLF_USE_FP16=1 (f16
 * weights as half8); skinny_sg with -DCLF_USE_SUBGROUPS=1. */
#if CLF_USE_FP16
#define SKINNY_NAME skinny_h
#else
#define SKINNY_NAME skinny
#endif
#if !CLF_ONLY || CLF_ONLY_skinny || CLF_ONLY_skinny_h
__kernel __attribute__((reqd_work_group_size(SPLIT, ROWS, 1))) void SKINNY_NAME(SKINNY_PARAMS) {
  __local float red[SPLIT > 1 ? ROWS * SPLIT : 1];
  skinny_group(SKINNY_ARGS, red, 0);
}
#endif

#if CLF_USE_SUBGROUPS
#if !CLF_ONLY || CLF_ONLY_skinny_sg
__kernel __attribute__((reqd_work_group_size(SPLIT, ROWS, 1))) void skinny_sg(SKINNY_PARAMS) {
  __local float red[SPLIT > 1 ? ROWS * SPLIT : 1];
  skinny_group(SKINNY_ARGS, red, 1);
}
#endif
#endif

/* skinny_tile: y [M, N] = act(x [M, K] W^T + bias) for any M, the CPU shape
 * of the [N, K] product (where the profile says "Tiles on=1").  Each work-item holds a TM x TN
 * register tile: TM rows of x against TN rows of W, one float8 accumulator
 * per pair, every loop unrolled (PoCL keeps a loop-indexed private array in
 * memory otherwise).  Per 8 weights of K that is TN weight loads and TM x
 * loads for TM x TN FMAs, where skinny does one weight load and M x loads
 * for M FMAs; the 4 x 3 default fills AVX2's 16 vector registers.  The TL
 * work-items of a group take consecutive row blocks of x against the same
 * TN rows of W, so those stay in cache while x streams from L2: the weight
 * is read from memory once per launch, whatever M.  A block type's scale
 * multiplies the weights of its block once, as they are converted (Q8_0's
 * multiplies the block's sum of products instead).  global
 * (row blocks rounded up to TL, N / TN rounded up), local (TL, 1). */
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 3
#endif
#ifndef TL
#define TL 4
#endif
#ifndef SKINNY_ACT_PASS
#define SKINNY_ACT_PASS 0
#endif
#if WTYPE != WT_Q8_0 /* Q8_0: skinny_tile multiplies its integers first */
/* Part p (8 weights) of chunk c of row n, times its block's scale d. */
inline float8 load_part(__global const WT *w, uint w_off, __global const half *s, uint s_off, uint n, uint c, uint p,
                        uint K, float d) {
#if WTYPE == WT_F32
  return vload8(0, w + w_off + (size_t)n * K + (size_t)c * 8);
#elif WTYPE == WT_F16 && CLF_USE_FP16
  return convert_float8(vload8(0, w + w_off + (size_t)n * K + (size_t)c * 8));
#elif WTYPE == WT_F16
  return vload_half8(0, w + w_off + (size_t)n * K + (size_t)c * 8);
#elif GGML_BLOCKS
  return ggml_part(w + w_off, s + s_off, n, c, p, K);
#elif WTYPE == WT_Q4_0
  const uchar8 q = vload8(p & 1, w + ((size_t)n * (K / 32) + c) * 16);
  return d * (convert_float8(p < 2 ? q & (uchar8)15 : q >> (uchar8)4) - 8.0f);
#endif
}
#endif

#if !CLF_ONLY || CLF_ONLY_skinny_tile
__kernel __attribute__((reqd_work_group_size(TL, 1, 1))) void skinny_tile(SKINNY_PARAMS) {
#if TM == 1 /* one row (decoding): a group's TL work-items take consecutive rows of W */
  const uint m0 = get_global_id(1), n0 = get_global_id(0) * TN;
#else
  const uint m0 = get_global_id(0) * TM, n0 = get_global_id(1) * TN;
#endif
  if (m0 >= M || n0 >= N) return;
  x += x_off;
  uint rn[TN], rm[TM]; /* rows past the end repeat the last; their sums are not stored */
  _Pragma("unroll") for (uint j = 0; j < TN; j++) rn[j] = min(n0 + j, N - 1);
  _Pragma("unroll") for (uint i = 0; i < TM; i++) rm[i] = min(m0 + i, M - 1);
  float8 acc[TM][TN];
  _Pragma("unroll") for (uint i = 0; i < TM; i++)
    _Pragma("unroll") for (uint j = 0; j < TN; j++) acc[i][j] = (float8)(0.0f);
  const uint chunks = K / CH;
  for (uint c = 0; c < chunks; c++) {
    float d[TN];
    _Pragma("unroll") for (uint j = 0; j < TN; j++) {
#if WTYPE == WT_Q8_0 || WTYPE == WT_Q4_0
      d[j] = vload_half((size_t)rn[j] * chunks + c, s + s_off);
#else
      d[j] = 1.0f;
#endif
    }
#if WTYPE == WT_Q8_0
    /* Q8_0: the block's products on the stored integers, its scale once
     * (one fma a block instead of a multiply a weight).  GPT-2's head, one
     * row: Intel's runtime 2.2 -> 1.1 ms, PoCL 2.5 -> 1.6; 64 rows x 3072 x
     * 768 the same or up to 8% faster.  (Q4_0 so, its -8 as 8 times the
     * block's sum of x, took one row 1.2-1.4x faster but 64 rows 10-30%
     * slower, on both runtimes.) */
    float8 ps[TM][TN];
    _Pragma("unroll") for (uint i = 0; i < TM; i++)
      _Pragma("unroll") for (uint j = 0; j < TN; j++) ps[i][j] = (float8)(0.0f);
    _Pragma("unroll") for (uint p = 0; p < NV; p++) {
      float8 wv[TN];
      _Pragma("unroll") for (uint j = 0; j < TN; j++)
        wv[j] = convert_float8(vload8(p, w + ((size_t)rn[j] * chunks + c) * 32));
      _Pragma("unroll") for (uint i = 0; i < TM; i++) {
        const float8 xv = vload8(c * NV + p, x + (size_t)rm[i] * K);
        _Pragma("unroll") for (uint j = 0; j < TN; j++) ps[i][j] = fma(xv, wv[j], ps[i][j]);
      }
    }
    _Pragma("unroll") for (uint i = 0; i < TM; i++)
      _Pragma("unroll") for (uint j = 0; j < TN; j++) acc[i][j] = fma((float8)(d[j]), ps[i][j], acc[i][j]);
#else
    _Pragma("unroll") for (uint p = 0; p < NV; p++) {
      float8 wv[TN];
      _Pragma("unroll") for (uint j = 0; j < TN; j++) wv[j] = load_part(w, w_off, s, s_off, rn[j], c, p, K, d[j]);
      _Pragma("unroll") for (uint i = 0; i < TM; i++) {
        const float8 xv = vload8(c * NV + p, x + (size_t)rm[i] * K);
        _Pragma("unroll") for (uint j = 0; j < TN; j++) acc[i][j] = fma(xv, wv[j], acc[i][j]);
      }
    }
#endif
  }
#if TM == 1 && SKINNY_ACT_PASS
  /* One row, -DSKINNY_ACT_PASS=1 (the profile's "Tiles act_pass=1"): the
   * sums plus bias only; the host applies an activation in a pass of its
   * own (bias_act, in lanes of clf_act4 as the tiles do: the same bits).
   * Intel's CPU compiler runs the loop above 1.4-1.6x slower when the
   * kernel holds the activation's exp or division at all, even in a branch
   * not taken or after a barrier (GPT-2's head, 50257 x 768: q4 3.7 -> 2.5
   * ms, q8 3.5 -> 2.2); PoCL runs q8 5-10% slower without them. */
  _Pragma("unroll") for (uint j = 0; j < TN; j++)
    if (n0 + j < N) y[y_off + n0 + j] = sum8(acc[0][j]) + (has_bias ? bias[b_off + n0 + j] : 0.0f);
#else
  _Pragma("unroll") for (uint j = 0; j < TN; j++) {
    if (n0 + j >= N) continue;
    const float b = has_bias ? bias[b_off + n0 + j] : 0.0f;
    /* the activation 4 rows at a time (a row alone in lane 0): one code
     * path for every output, vectorised (PoCL's scalar exp in GPT-2's
     * activation cost 11 of the 34 ms of the product it follows) */
    _Pragma("unroll") for (uint i = 0; i < TM; i += 4) {
      float o[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      _Pragma("unroll") for (uint q = 0; q < 4; q++) if (i + q < TM) o[q] = sum8(acc[i + q][j]) + b;
      vstore4(clf_act4(vload4(0, o), act), 0, o);
      _Pragma("unroll") for (uint q = 0; q < 4; q++)
        if (i + q < TM && m0 + i + q < M) y[y_off + (size_t)(m0 + i + q) * N + n0 + j] = o[q];
    }
  }
#endif
}
#endif

/* skinny_pair: y [1, N] = act(x [1, K] W^T + bias), one row of x (decoding)
 * against 4-bit blocks (Q4_0, Q4_1) on a CPU, unless the profile's
 * Tiles line says "pairs_off=1".  A work-item takes TN rows of W (TN even) in pairs,
 * a pair's two float8 accumulators side by side in one float16: each row's
 * arithmetic is skinny_tile's (the same weights, the same fma chain over K,
 * the same sum8), so the bits are those of the tiles, but the nibbles of
 * both rows are converted and scaled in one 16-lane operation, and no
 * work-item shares its rows with another (skinny_tile's one-row build
 * leaves the vectors to the compiler, which spreads 16 rows over the lanes
 * and reads their bytes lane by lane).  GPT-2's head (50257 x 768, q4),
 * ms: PoCL 3.3 -> 2.4, Intel's runtime 2.6 -> 1.7; GPT-2 q4 decode, device
 * ms a token: PoCL 13.8 -> 10.5-11.5, Intel 11.5-13.0 -> 7.8-8.5.  The
 * blocks are read as 32-bit words (wu: the weight buffer again, so that no
 * pointer is cast; w_off is 0, as the host checks), the scales through
 * scale_at (su: the buffer as 16-bit words; a scale read in a 32-bit word
 * could reach 2 bytes past a Q4_0 buffer's end).  global (N / TN rounded
 * up to TL), local (TL). */
/* The 32-element types the integer kernels take (skinny_int below); their
 * scales are read through scale_at there and in skinny_pair. */
#define INT_TYPES \
  (WTYPE == WT_Q8_0 || WTYPE == WT_Q4_0 || WTYPE == WT_Q4_1 || WTYPE == WT_Q5_0 || WTYPE == WT_Q5_1)
/* ggml's k-quants the integer path takes (skinny_kq, at the end) */
#define KQ_TYPES (WTYPE == WT_Q2_K || WTYPE == WT_Q3_K || WTYPE == WT_Q4_K || WTYPE == WT_Q5_K || WTYPE == WT_Q6_K)
#if INT_TYPES || KQ_TYPES
/* f16 bits to f32, exactly, and no subnormal f32 on the way (a subnormal
 * operand costs x86 a microcode assist: scaling the bits by 2^112 instead
 * made products whose scales are subnormal halves, as a checkpoint with
 * small weights has, 2x slower) */
inline float clf_h2f(uint h) {
  const uint e = h & 0x7c00u, m = h & 0x3ffu;
  const uint nrm = ((h & 0x7fffu) << 13) + 0x38000000u; /* the exponent rebiased */
  const uint bits = e == 0 ? as_uint((float)m * 0x1p-24f) : e == 0x7c00u ? 0x7f800000u | m << 13 : nrm;
  return as_float(bits | (h & 0x8000u) << 16);
}
/* The f16 at half index i of the weight buffer: vload_half where the device
 * has half arithmetic (a conversion instruction), else clf_h2f (PoCL's
 * vload_half is some 20 scalar instructions a value); both exact. */
inline float scale_at(__global const half *s, __global const ushort *su, size_t i) {
#if CLF_HAS_FP16
  return vload_half(i, s);
#else
  return clf_h2f(su[i]);
#endif
}
#endif

#if TM == 1 && TN % 2 == 0 && (WTYPE == WT_Q4_0 || WTYPE == WT_Q4_1)
/* a in lanes 0-7, b in 8-15 (element by element: Oclgrind 21.10's
 * uninitialised-value checker crashes on two float8 joined) */
inline float16 pair16(float a, float b) { return (float16)(a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b); }
/* Chunk c (32 weights) of rows a and b as 4 float16 (a in lanes 0-7):
 * part p is skinny_tile's load_part of each row, d (q - 8) for Q4_0,
 * fma(q, d, m) for Q4_1.  Inlined by force: PoCL's compiler otherwise
 * calls it, passing v through memory. */
inline __attribute__((always_inline)) void pair_chunk(__global const half *s, __global const ushort *su, uint s_off,
                                                      __global const uint *wu, uint a, uint b, uint c, uint K,
                                                      float16 *v) {
  const size_t ba = (size_t)a * (K / 32) + c, bb = (size_t)b * (K / 32) + c; /* the blocks */
#if WTYPE == WT_Q4_0 /* 4 words a block, the scales after the quants */
  const float16 d = pair16(scale_at(s, su, s_off + ba), scale_at(s, su, s_off + bb)), m = (float16)(-8.0f);
  __global const uint *qa = wu + ba * 4, *qb = wu + bb * 4;
#else /* Q4_1 {d; m; qs[16]}: 5 words a block */
  const float16 d = pair16(scale_at(s, su, ba * 10), scale_at(s, su, bb * 10));
  const float16 m = pair16(scale_at(s, su, ba * 10 + 1), scale_at(s, su, bb * 10 + 1));
  __global const uint *qa = wu + ba * 5 + 1, *qb = wu + bb * 5 + 1;
#endif
  /* bytes 0-7 of a and of b, then 8-15 (in halves: Oclgrind 21.10 tracks
   * the .hi of a 16-byte vector as uninitialised) */
  const uint4 wa = vload4(0, qa), wb = vload4(0, qb);
  const uchar16 u0 = as_uchar16((uint4)(wa.s01, wb.s01)), u1 = as_uchar16((uint4)(wa.s23, wb.s23));
#if WTYPE == WT_Q4_0 /* d (q - 8), as load_part computes it (fma(q, d, -8 d) is the same value only where fma is fused) */
  v[0] = d * (convert_float16(u0 & (uchar16)15) + m);
  v[1] = d * (convert_float16(u1 & (uchar16)15) + m);
  v[2] = d * (convert_float16(u0 >> (uchar16)4) + m); /* 16-23 */
  v[3] = d * (convert_float16(u1 >> (uchar16)4) + m);
#else
  v[0] = fma(convert_float16(u0 & (uchar16)15), d, m);
  v[1] = fma(convert_float16(u1 & (uchar16)15), d, m);
  v[2] = fma(convert_float16(u0 >> (uchar16)4), d, m);
  v[3] = fma(convert_float16(u1 >> (uchar16)4), d, m);
#endif
}

#if !CLF_ONLY || CLF_ONLY_skinny_pair
__kernel __attribute__((reqd_work_group_size(TL, 1, 1))) void skinny_pair(SKINNY_PARAMS, __global const uint *wu,
                                                                                 __global const ushort *su) {
  const uint n0 = get_global_id(0) * TN;
  if (n0 >= N) return;
  x += x_off;
  uint rn[TN]; /* rows past the end repeat the last; their sums are not stored */
  _Pragma("unroll") for (uint j = 0; j < TN; j++) rn[j] = min(n0 + j, N - 1);
  float16 acc[TN / 2];
  _Pragma("unroll") for (uint h = 0; h < TN / 2; h++) acc[h] = (float16)(0.0f);
  for (uint c = 0; c < K / 32; c++) {
    float16 v[TN / 2][4];
    _Pragma("unroll") for (uint h = 0; h < TN / 2; h++)
      pair_chunk(s, su, s_off, wu, rn[2 * h], rn[2 * h + 1], c, K, v[h]);
    _Pragma("unroll") for (uint p = 0; p < 4; p++) {
      const float8 xv = vload8(c * 4 + p, x);
      const float16 xx = (float16)(xv, xv);
      _Pragma("unroll") for (uint h = 0; h < TN / 2; h++) acc[h] = fma(xx, v[h][p], acc[h]);
    }
  }
  float o[TN], t[16];
  _Pragma("unroll") for (uint h = 0; h < TN / 2; h++) {
    vstore16(acc[h], 0, t); /* each row's float8 through memory: Oclgrind 21.10 tracks .hi as uninitialised */
    o[2 * h] = sum8(vload8(0, t)) + (has_bias ? bias[b_off + rn[2 * h]] : 0.0f);
    o[2 * h + 1] = sum8(vload8(1, t)) + (has_bias ? bias[b_off + rn[2 * h + 1]] : 0.0f);
  }
#if !SKINNY_ACT_PASS /* the activation in lanes of clf_act4, as skinny_tile applies it: the same bits */
  _Pragma("unroll") for (uint j = 0; j < TN; j += 4) {
    float q[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    _Pragma("unroll") for (uint e = 0; e < 4; e++) if (j + e < TN) q[e] = o[j + e];
    vstore4(clf_act4(vload4(0, q), act), 0, q);
    _Pragma("unroll") for (uint e = 0; e < 4; e++) if (j + e < TN) o[j + e] = q[e];
  }
#endif
  _Pragma("unroll") for (uint j = 0; j < TN; j++) if (n0 + j < N) y[y_off + n0 + j] = o[j];
}
#endif
#endif

/* ------------------------------------------------------------------------
 * The integer path (issue 42): x quantized per block of 32 to int8 with
 * one f32 scale (ggml's Q8_1 activations), then the weights' integers
 * times x's integers summed in int per block and scaled once a block,
 * where the float kernels above convert every weight to float: a fourth
 * of the arithmetic per weight byte on 8-bit lanes.  Built with
 * -DINT_KERNEL=1 only (its own programs: the float builds stay as they
 * were).
 * ------------------------------------------------------------------------ */
#if INT_KERNEL

/* quantize_q8: x [M, K] (K a multiple of 32) into the scratch buffer the
 * linear op owns: q [M, K] int8 quants, q = rint(x / d) with d = max|x| /
 * 127 over the block (0 when the block is all zero: quants 0), and ds
 * [M, K / 32] pairs (d, sum of the block's quants) at float ds_off.  The
 * sum is kept as an integer-valued float rather than llama.cpp's d * sum:
 * Q4_0's -8 is then exact in the integer sum, and Q4_1's min term takes
 * one multiply more a block.  global (K / 32 rounded up, M). */
#if !CLF_ONLY || CLF_ONLY_quantize_q8
__kernel void quantize_q8(__global const float *x, uint x_off, __global char *q, __global float *ds, uint ds_off,
                          uint K) {
  const uint b = get_global_id(0), m = get_global_id(1), nb = K / 32;
  if (b >= nb) return;
  const size_t blk = (size_t)m * nb + b;
  __global const float *xp = x + x_off + blk * 32;
  float8 v[4];
  _Pragma("unroll") for (uint i = 0; i < 4; i++) v[i] = vload8(i, xp);
  clf_q8_block(v, q + blk * 32, ds + ds_off + 2 * blk); /* common.cl */
}
#endif
#endif

#if INT_KERNEL && INT_TYPES

/* skinny_int: y [M, N] = act(x [M, K] W^T + bias), M <= MMAX <= 8, for the
 * 32-element types (Q8_0, Q4_0 as clformer stores them, Q4_1, Q5_0, Q5_1 as GGUF
 * does), from x quantized by quantize_q8 (xq: its quants as 32-bit words;
 * xd: the buffer again as floats, the pairs from xd_off).  A work-item
 * takes TN rows of W (rows past the end repeat the last, their sums not
 * stored) against the M rows of x, block by block: per block and pair of
 * rows the integer sum isum = sum qw qx, then acc += d_w d_x isum (Q4_0's
 * -8 and Q5_0's -16 within the integers: with the extension as -8 or -16
 * times the block's sum of x's quants, without it on the quants); Q4_1's
 * and Q5_1's min adds m_w d_x sum(qx); Q5_x's fifth bits join the nibbles
 * as bit 4 before the products (0..31 fit the lanes as the nibbles do).  Built with -DINT_DOT=1 (skinny_idot) the sums are
 * cl_khr_integer_dot_product's dot_acc_sat_4x8packed_{ss,us}_int (never
 * saturating here: |isum| <= 32 * 128 * 128); without it (skinny_int),
 * 16 products in short lanes added pairwise into int lanes, the pattern
 * compilers turn into pmaddwd / vpdpwssd, the block's 8 lane sums scaled
 * as a float8 so that no lane is summed across until the end (with
 * -DINT_L16=1, 16 lanes and a float16: see int_lanes).  The weights are
 * read as 32-bit words (wu: the weight buffer again; w_off is 0, as the
 * host checks), the scales through int_scales (su: the buffer as 16-bit
 * words).  global (N / TN rounded up to TL), local (TL). */
#ifndef INT_DOT
#define INT_DOT 0
#endif
#ifndef INT_L16
#define INT_L16 0
#endif
#if INT_DOT
#pragma OPENCL EXTENSION cl_khr_integer_dot_product : enable
#define INT_NAME skinny_idot
#else
#define INT_NAME skinny_int
#endif
#if WTYPE == WT_Q8_0
#define WQ uint8 /* 32 int8 quants */
#else
#define WQ uint4 /* 16 bytes: element j the low nibble of byte j, j + 16 the high one */
#endif

/* Q4_1 and Q5_1: a min per block (m_w d_x sum(qx) apart); Q5_0 and Q5_1:
 * a fifth bit per element, qh's bit j for element j. */
#define INT_HAS_MIN (WTYPE == WT_Q4_1 || WTYPE == WT_Q5_1)
#define INT_QH (WTYPE == WT_Q5_0 || WTYPE == WT_Q5_1)

/* Block c of row n: its words and (Q5_0, Q5_1) fifth bits. */
inline __attribute__((always_inline)) WQ int_block(__global const uint *wu, __global const ushort *su, uint n, uint c,
                                                   uint nb, uint *qh) {
  const size_t blk = (size_t)n * nb + c;
  *qh = 0;
#if WTYPE == WT_Q8_0
  return vload8(blk, wu);
#elif WTYPE == WT_Q4_0
  return vload4(blk, wu);
#elif WTYPE == WT_Q4_1 /* {d; m; qs[16]}: 5 words a block */
  return vload4(0, wu + blk * 5 + 1);
#elif WTYPE == WT_Q5_0 /* {d; qh[4]; qs[16]}: 11 halfwords a block, so read as halfwords */
  const size_t h = blk * 11;
  *qh = (uint)su[h + 1] | (uint)su[h + 2] << 16;
  return as_uint4(vload8(0, su + h + 3));
#else /* Q5_1 {d; m; qh[4]; qs[16]}: 6 words a block */
  *qh = wu[blk * 6 + 1];
  return vload4(0, wu + blk * 6 + 2);
#endif
}

#if INT_QH
/* Elements 0-15 (lo) or 16-31 of a block: the nibbles of u with their
 * fifth bits from qh's 16 bits at `from` (0 or 16) as bit 4. */
inline uchar16 int_five(uchar16 nib, uint qh, uint from) {
  const uint16 e = (uint16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15) + (uint16)from;
  return nib | convert_uchar16((((uint16)(qh) >> e) & (uint16)1) << (uint16)4);
}
#endif

/* The f16 index of block c's scale in row n (Q4_1, Q5_1: the min the
 * next). */
inline size_t int_scale_index(uint s_off, uint n, uint c, uint nb) {
  const size_t blk = (size_t)n * nb + c;
  return WTYPE == WT_Q4_1 ? blk * 10 : WTYPE == WT_Q5_0 ? blk * 11 : WTYPE == WT_Q5_1 ? blk * 12 : s_off + blk;
}

/* Block c's scales (and Q4_1's, Q5_1's mins) of the TN rows rn. */
inline __attribute__((always_inline)) void int_scales(__global const half *s, __global const ushort *su, uint s_off,
                                                      const uint *rn, uint c, uint nb, float *dw, float *mw) {
#if CLF_HAS_FP16
  _Pragma("unroll") for (uint j = 0; j < TN; j++) {
    const size_t i = int_scale_index(s_off, rn[j], c, nb);
    dw[j] = vload_half(i, s);
    mw[j] = INT_HAS_MIN ? vload_half(i + 1, s) : 0.0f;
  }
#else /* clf_h2f (8 lanes of it with selects over 4 rows' scales and mins
       * ran 0.85x as fast on PoCL: a 3072 x 576 Q4_1 product's CPU time) */
  _Pragma("unroll") for (uint j = 0; j < TN; j++) {
    const size_t i = int_scale_index(s_off, rn[j], c, nb);
    dw[j] = clf_h2f(su[i]);
    mw[j] = INT_HAS_MIN ? clf_h2f(su[i + 1]) : 0.0f;
  }
#endif
}

#if INT_DOT
/* The block's integer sum (Q4_0's -8s and Q5_0's -16s included). */
inline int int_sum(WQ w, uint qh, uint8 x, float xsum) {
#if WTYPE == WT_Q8_0
  int is = dot_acc_sat_4x8packed_ss_int(w.s0, x.s0, 0);
  is = dot_acc_sat_4x8packed_ss_int(w.s1, x.s1, is);
  is = dot_acc_sat_4x8packed_ss_int(w.s2, x.s2, is);
  is = dot_acc_sat_4x8packed_ss_int(w.s3, x.s3, is);
  is = dot_acc_sat_4x8packed_ss_int(w.s4, x.s4, is);
  is = dot_acc_sat_4x8packed_ss_int(w.s5, x.s5, is);
  is = dot_acc_sat_4x8packed_ss_int(w.s6, x.s6, is);
  return dot_acc_sat_4x8packed_ss_int(w.s7, x.s7, is);
#else
#if INT_QH
  const uint4 lo = as_uint4(int_five(as_uchar16(w & (uint4)0x0f0f0f0fu), qh, 0));
  const uint4 hi = as_uint4(int_five(as_uchar16((w >> (uint4)4) & (uint4)0x0f0f0f0fu), qh, 16));
#else
  const uint4 lo = w & (uint4)0x0f0f0f0fu, hi = (w >> (uint4)4) & (uint4)0x0f0f0f0fu;
#endif
  int is = dot_acc_sat_4x8packed_us_int(lo.s0, x.s0, 0);
  is = dot_acc_sat_4x8packed_us_int(lo.s1, x.s1, is);
  is = dot_acc_sat_4x8packed_us_int(lo.s2, x.s2, is);
  is = dot_acc_sat_4x8packed_us_int(lo.s3, x.s3, is);
  is = dot_acc_sat_4x8packed_us_int(hi.s0, x.s4, is);
  is = dot_acc_sat_4x8packed_us_int(hi.s1, x.s5, is);
  is = dot_acc_sat_4x8packed_us_int(hi.s2, x.s6, is);
  is = dot_acc_sat_4x8packed_us_int(hi.s3, x.s7, is);
#if WTYPE == WT_Q4_0
  is -= 8 * (int)xsum;
#elif WTYPE == WT_Q5_0
  is -= 16 * (int)xsum;
#endif
  return is;
#endif
}
#define ACC float
#else
/* 16 products of int8, added pairwise into 8 int lanes: products of
 * sign-extended values with 17 sign bits, which LLVM's x86 back-end turns
 * into pmaddwd.  (Products in short lanes, then widened, ran 0.67-0.83x
 * as fast on PoCL for Q8_0 one row: GPT-2 widths, same run.  pmaddubsw's
 * pattern, add_sat of unsigned-by-signed byte products in short lanes,
 * Q8_0 through |w| and x with w's sign as llama.cpp's AVX2 code does:
 * 0.13-0.77x of the float path on PoCL and 0.5-1.0x on Intel's runtime,
 * where this one ran 0.82-1.06x and 1.05-2.4x, one row, same run.) */
inline int8 pmadd16(char16 a, char16 b) {
  const int16 p = convert_int16(a) * convert_int16(b);
  return p.even + p.odd;
}
#if WTYPE != WT_Q8_0
/* The block's lo and hi halves as signed quants (Q4_0 less 8, Q5_0 less
 * 16, Q5_x's fifth bits joined). */
inline void int_halves(WQ w, uint qh, char16 *lo, char16 *hi) {
  const uchar16 u = as_uchar16(w);
  const char16 off = (char16)(WTYPE == WT_Q4_0 ? 8 : WTYPE == WT_Q5_0 ? 16 : 0);
#if INT_QH
  *lo = as_char16(int_five(u & (uchar16)15, qh, 0)) - off;
  *hi = as_char16(int_five(u >> (uchar16)4, qh, 16)) - off;
#else
  *lo = as_char16(u & (uchar16)15) - off;
  *hi = as_char16(u >> (uchar16)4) - off;
#endif
}
#endif
#if INT_L16
/* -DINT_L16=1 (the plan's choice, from the profile's Tiles int_lanes=16):
 * each product in an int lane of its own, lane l summing elements l and
 * l + 16, the block scaled as a float16.  PoCL 3.1 compiles the pairs
 * above into a pmaddwd over 32-bit lanes and two shuffles (vpermd,
 * vpmovqd) to add them; these into the same pmaddwd and one add: one row
 * of Q4_1 3072 x 576, 1.08 -> 1.17x the float path's speed (CPU time).
 * Intel's runtime compiles these into 32-bit multiplies (1.46 -> 1.01x)
 * and the pairs into a pmaddwd over 16-bit lanes. */
inline int16 int_mul(char16 a, char16 b) { return convert_int16(a) * convert_int16(b); }
#define INT_LANES int16
#define ACC float16
#define ACC_CVT convert_float16
#define ACC_SUM(a) sum8((a).lo + (a).hi)
#else
/* 8 int lanes: the products added pairwise (pmadd16). */
inline int8 int_mul(char16 a, char16 b) { return pmadd16(a, b); }
#define INT_LANES int8
#define ACC float8
#define ACC_CVT convert_float8
#define ACC_SUM(a) sum8(a)
#endif
/* The block's products in INT_LANES int lanes.  Q4_0's quants less 8
 * before the products (-8..7 fit a char): the -8 * sum(qx) term apart, in
 * f32, came out of a sum 8 times the result's size, 1e-5 off at K = 768. */
inline INT_LANES int_lanes(WQ w, uint qh, uint8 x) {
#if WTYPE == WT_Q8_0
  return int_mul(as_char16(w.lo), as_char16(x.lo)) + int_mul(as_char16(w.hi), as_char16(x.hi));
#else
  char16 lo, hi;
  int_halves(w, qh, &lo, &hi);
  return int_mul(lo, as_char16(x.lo)) + int_mul(hi, as_char16(x.hi));
#endif
}
#endif

#if !CLF_ONLY || CLF_ONLY_skinny_int || CLF_ONLY_skinny_idot
__kernel __attribute__((reqd_work_group_size(TL, 1, 1))) void INT_NAME(
    __global const uint *xq, __global const float *xd, uint xd_off, __global const uint *wu, __global const half *s,
    __global const ushort *su, uint s_off, __global const float *bias, uint b_off, int has_bias, int act,
    __global float *y, uint y_off, uint M, uint N, uint K) {
  const uint n0 = get_global_id(0) * TN, nb = K / 32;
  if (n0 >= N) return;
  uint rn[TN];
  _Pragma("unroll") for (uint j = 0; j < TN; j++) rn[j] = min(n0 + j, N - 1);
  ACC acc[MMAX][TN];
  float accm[MMAX][TN]; /* Q4_1, Q5_1: the mins' share */
  _Pragma("unroll") for (uint i = 0; i < MMAX; i++) _Pragma("unroll") for (uint j = 0; j < TN; j++) {
    acc[i][j] = (ACC)(0.0f);
    accm[i][j] = 0.0f;
  }
  for (uint c = 0; c < nb; c++) {
    WQ wq[TN];
    float dw[TN], mw[TN];
    uint qh[TN];
    _Pragma("unroll") for (uint j = 0; j < TN; j++) wq[j] = int_block(wu, su, rn[j], c, nb, &qh[j]);
    int_scales(s, su, s_off, rn, c, nb, dw, mw);
    _Pragma("unroll") for (uint i = 0; i < MMAX; i++) {
      if (i < M) { /* uniform */
        const size_t xb = (size_t)i * nb + c;
        const uint8 xw = vload8(xb, xq);
        const float dx = xd[xd_off + 2 * xb], sx = xd[xd_off + 2 * xb + 1];
        _Pragma("unroll") for (uint j = 0; j < TN; j++) {
          const float dd = dw[j] * dx;
#if INT_DOT
          acc[i][j] = fma(dd, (float)int_sum(wq[j], qh[j], xw, sx), acc[i][j]);
#else
          acc[i][j] = fma((ACC)(dd), ACC_CVT(int_lanes(wq[j], qh[j], xw)), acc[i][j]);
#endif
#if INT_HAS_MIN
          accm[i][j] = fma(mw[j] * dx, sx, accm[i][j]);
#endif
        }
      }
    }
  }
  _Pragma("unroll") for (uint j = 0; j < TN; j++) {
    if (n0 + j >= N) continue;
    const float b = has_bias ? bias[b_off + n0 + j] : 0.0f;
    _Pragma("unroll") for (uint i = 0; i < MMAX; i++) {
      if (i >= M) continue;
#if INT_DOT
      const float o = acc[i][j] + accm[i][j] + b;
#else
      const float o = ACC_SUM(acc[i][j]) + accm[i][j] + b;
#endif
#if SKINNY_ACT_PASS
      y[y_off + (size_t)i * N + n0 + j] = o;
#else
      y[y_off + (size_t)i * N + n0 + j] = clf_act(o, act);
#endif
    }
  }
}
#endif
#endif

/* y [M, N] = act(x [M, K] W + bias) with W f32 [K, N] ([in, out]: the
 * layout CLBlast reads without a copy, so an encoder keeps one copy of each
 * weight for both paths), M <= MMAX.  Work-item (c, ks) holds the 8
 * adjacent columns from 8c (one vload8 per row of W) and takes every KS-th
 * row of W from ks on, four rows in flight; the KS partial sums meet in
 * local memory.  x's elements multiply whole strips as scalars, so M rows
 * cost one weight load per M FMAs: a small GEMM rather than M dot products
 * (on PoCL, 8 rows run 2-3x faster than with skinny on [N, K]; one row
 * runs 1.3-2x slower, which is why decoders keep [N, K]).  On a GPU (KS >
 * 1) a warp's loads of one row coalesce.  global (N / 8 rounded up to
 * COLS, KS), local (COLS, KS). */
#ifndef COLS
#define COLS 16
#endif
#ifndef KS
#define KS 1
#endif
#if !CLF_ONLY || CLF_ONLY_skinny_t
__kernel __attribute__((reqd_work_group_size(COLS, KS, 1)))
void skinny_t(__global const float *x, uint x_off, __global const float *w, uint w_off,
              __global const float *bias, uint b_off, int has_bias, int act, __global float *y, uint y_off,
              uint M, uint N, uint K) {
  const uint c = get_global_id(0), ks = get_local_id(1);
  const uint n0 = c * 8;
  x += x_off;
  w += w_off;
  float8 acc[MMAX];
  for (uint m = 0; m < MMAX; m++) acc[m] = (float8)(0.0f);
  if (n0 + 8 <= N) {
    uint k = ks;
    for (; k + 3 * KS < K; k += 4 * KS) {
      const float8 w0 = vload8(0, w + (size_t)k * N + n0), w1 = vload8(0, w + (size_t)(k + KS) * N + n0);
      const float8 w2 = vload8(0, w + (size_t)(k + 2 * KS) * N + n0);
      const float8 w3 = vload8(0, w + (size_t)(k + 3 * KS) * N + n0);
      for (uint m = 0; m < MMAX; m++)
        if (m < M) {
          __global const float *xm = x + (size_t)m * K + k;
          acc[m] += (xm[0] * w0 + xm[KS] * w1) + (xm[2 * KS] * w2 + xm[3 * KS] * w3);
        }
    }
    for (; k < K; k += KS) {
      const float8 w0 = vload8(0, w + (size_t)k * N + n0);
      for (uint m = 0; m < MMAX; m++)
        if (m < M) acc[m] += x[(size_t)m * K + k] * w0;
    }
  } else if (n0 < N) { /* the last, partial strip */
    for (uint k = ks; k < K; k += KS) {
      float e[8];
      for (uint j = 0; j < 8; j++) e[j] = n0 + j < N ? w[(size_t)k * N + n0 + j] : 0.0f;
      const float8 w0 = vload8(0, e);
      for (uint m = 0; m < MMAX; m++)
        if (m < M) acc[m] += x[(size_t)m * K + k] * w0;
    }
  }
#if KS > 1
  __local float8 red[KS][COLS];
  const uint l = get_local_id(0);
  for (uint m = 0; m < MMAX; m++) {
    if (m < M) { /* M is uniform: every work-item meets the barriers */
      red[ks][l] = acc[m];
      barrier(CLK_LOCAL_MEM_FENCE);
      for (uint h = KS / 2; h > 0; h >>= 1) {
        if (ks < h) red[ks][l] += red[ks + h][l];
        barrier(CLK_LOCAL_MEM_FENCE);
      }
      acc[m] = red[0][l];
      barrier(CLK_LOCAL_MEM_FENCE);
    }
  }
#endif
  if (ks != 0 || n0 >= N) return;
  float o[8];
  for (uint m = 0; m < MMAX; m++) {
    if (m >= M) continue;
    vstore8(acc[m], 0, o);
    for (uint j = 0; j < 8 && n0 + j < N; j++) {
      const float b = has_bias ? bias[b_off + n0 + j] : 0.0f;
      y[y_off + (size_t)m * N + n0 + j] = clf_act(o[j] + b, act);
    }
  }
}
#endif

/* out [K, N] f32 = the stored weight [N, K], transposed ([in, out]: the
 * operand CLBlast reads without a copy of its own); work-item (n, c)
 * expands chunk c of row n (global: N rounded up to the work-group, K / CH),
 * so the work-items of a group write adjacent floats of each out row.  2-D
 * rather than i / chunks and i % chunks, whose fused form LLVM marks with a
 * `freeze` that Oclgrind 21.10 cannot check. */
#if !CLF_ONLY || CLF_ONLY_expand_t
__kernel void expand_t(__global const WT *w, uint w_off, __global const half *s, uint s_off, __global float *out,
                       uint o_off, uint N, uint K) {
  const uint n = get_global_id(0), c = get_global_id(1);
  if (c >= K / CH || n >= N) return;
  float8 v[NV];
  const float d = load_chunk(w, w_off, s, s_off, n, c, K, v);
  __global float *o = out + o_off + (size_t)c * CH * N + n;
  for (uint j = 0; j < NV; j++) {
    const float8 e = d * v[j];
    __global float *r = o + (size_t)j * 8 * N;
    r[0] = e.s0;
    r[N] = e.s1;
    r[2 * N] = e.s2;
    r[3 * N] = e.s3;
    r[4 * N] = e.s4;
    r[5 * N] = e.s5;
    r[6 * N] = e.s6;
    r[7 * N] = e.s7;
  }
}
#endif

/* ------------------------------------------------------------------------
 * The integer path for ggml's k-quants (Q2_K to Q6_K: the tensors of
 * Q2_K, Q3_K_M, Q4_K_M, Q5_K_M files), from the same 8-bit blocks of x as skinny_int
 * (quantize_q8's, or the norm's and glu's: one quantization of an
 * activation serves its Q4_1, Q8_0 and k-quant products alike).  A
 * super-block's sub-blocks line up with x's blocks of 32: Q4_K / Q5_K's
 * sub-block j of 32 (6-bit scale and min) is x's block 8b + j, so per
 * block isum = sum qw qx and acc += d sc_j d_x isum, min term
 * dmin m_j d_x sum(qx), as Q4_1's; Q6_K's two sub-blocks of 16 (int8
 * scales) are the halves of x's block, each half's integer sum times its
 * scale in the integers, then d d_x once (its quants less 32 before the
 * products: -32..31 fit a char, and no per-16 sums of x are needed);
 * Q3_K's likewise (-4..3, 6-bit scales less 32), and Q2_K's (0..3, 4-bit
 * scales) with a min per 16: the sum of x's first half's quants, the
 * second half's the block's sum less it.
 * llama.cpp's CUDA MMVQ multiplies its k-quants by Q8_1 blocks of 32
 * likewise; its CPU path rounds x per 256 (Q8_K) instead, which would
 * need a second copy of x.  Built with -DINT_KERNEL=1 (skinny_kq) or also
 * -DINT_DOT=1 (skinny_kqdot: the sums through cl_khr_integer_dot_product).
 * The weights are read as 32-bit words (wu: Q2_K, Q4_K, Q5_K, whose blocks are
 * 84, 144 and 176 bytes), as 16-bit ones (su: Q3_K's 110-byte and Q6_K's 210-byte blocks, and
 * every f16 through scale_at) and as bytes (wb: the scales); the buffer
 * passed four times, so that no pointer is cast.  A work-item takes TN
 * rows of W against the M <= MMAX rows of x, super-block by super-block.
 * global (N / TN rounded up to TL), local (TL).
 * ------------------------------------------------------------------------ */
#if INT_KERNEL && KQ_TYPES
#ifndef INT_DOT
#define INT_DOT 0
#endif
/* Whether the type's values have mins (value = d sc q - dmin m). */
#define KQ_MIN (WTYPE == WT_Q2_K || WTYPE == WT_Q4_K || WTYPE == WT_Q5_K)

#if INT_DOT
#pragma OPENCL EXTENSION cl_khr_integer_dot_product : enable
#define KQ_NAME skinny_kqdot
#define KQ_ACC float
/* Sub-block (wl: elements 0-15, wh: 16-31, signed) times x's block, each
 * half's sum times its integer scale. */
inline int kq_dot(char16 wl, char16 wh, int sl, int sh, uint8 x) {
  const uint4 a = as_uint4(wl), b = as_uint4(wh);
  int l = dot_acc_sat_4x8packed_ss_int(a.s0, x.s0, 0);
  l = dot_acc_sat_4x8packed_ss_int(a.s1, x.s1, l);
  l = dot_acc_sat_4x8packed_ss_int(a.s2, x.s2, l);
  l = dot_acc_sat_4x8packed_ss_int(a.s3, x.s3, l);
  int h = dot_acc_sat_4x8packed_ss_int(b.s0, x.s4, 0);
  h = dot_acc_sat_4x8packed_ss_int(b.s1, x.s5, h);
  h = dot_acc_sat_4x8packed_ss_int(b.s2, x.s6, h);
  h = dot_acc_sat_4x8packed_ss_int(b.s3, x.s7, h);
  return l * sl + h * sh;
}
/* The sum of x's first 16 quants (Q2_K's first half's min). */
inline float kq_half_sum(uint8 x) {
  int l = dot_acc_sat_4x8packed_ss_int(x.s0, 0x01010101u, 0);
  l = dot_acc_sat_4x8packed_ss_int(x.s1, 0x01010101u, l);
  l = dot_acc_sat_4x8packed_ss_int(x.s2, 0x01010101u, l);
  return (float)dot_acc_sat_4x8packed_ss_int(x.s3, 0x01010101u, l);
}
#define KQ_SUM(a) (a)
#else
#define KQ_NAME skinny_kq
#define KQ_ACC float8
/* skinny_int's pattern (pmaddwd): 16 products in int lanes added pairwise */
inline int8 kq_pmadd(char16 a, char16 b) {
  const int16 p = convert_int16(a) * convert_int16(b);
  return p.even + p.odd;
}
inline int8 kq_dot(char16 wl, char16 wh, int sl, int sh, uint8 x) {
  return kq_pmadd(wl, as_char16(x.lo)) * sl + kq_pmadd(wh, as_char16(x.hi)) * sh;
}
/* The sum of x's first 16 quants (Q2_K's first half's min), in the same
 * pattern (a horizontal sum of the bytes widened as such crashed
 * Oclgrind 21.10's uninitialised-value checker). */
inline float kq_half_sum(uint8 x) { return sum8(convert_float8(kq_pmadd(as_char16(x.lo), (char16)(1)))); }
#define KQ_SUM(a) sum8(a)
#endif

#if !CLF_ONLY || CLF_ONLY_skinny_kq || CLF_ONLY_skinny_kqdot
__kernel __attribute__((reqd_work_group_size(TL, 1, 1))) void KQ_NAME(
    __global const uint *xq, __global const float *xd, uint xd_off, __global const uint *wu, __global const ushort *su,
    __global const uchar *wb, __global const half *s, __global const float *bias, uint b_off, int has_bias, int act,
    __global float *y, uint y_off, uint M, uint N, uint K) {
  const uint n0 = get_global_id(0) * TN, nb = K / 32, nsb = K / GB;
  if (n0 >= N) return;
  uint rn[TN]; /* rows past the end repeat the last; their sums are not stored */
  _Pragma("unroll") for (uint j = 0; j < TN; j++) rn[j] = min(n0 + j, N - 1);
  KQ_ACC acc[MMAX][TN];
  float accm[MMAX][TN]; /* Q2_K, Q4_K, Q5_K: the mins' share */
  _Pragma("unroll") for (uint i = 0; i < MMAX; i++) _Pragma("unroll") for (uint j = 0; j < TN; j++) {
    acc[i][j] = (KQ_ACC)(0.0f);
    accm[i][j] = 0.0f;
  }
  for (uint b = 0; b < nsb; b++) {
    size_t bo[TN]; /* each row's block, in bytes */
    float d[TN];
#if KQ_MIN
    float dm[TN];
#endif
#if WTYPE == WT_Q5_K
    uint8 qh[TN]; /* bit j of byte l: element l's fifth bit in sub-block j */
#elif WTYPE == WT_Q3_K
    uchar16 hm0[TN], hm1[TN]; /* bit 4 n + j of byte l: element 128 n + 32 j + l's third bit */
#endif
    _Pragma("unroll") for (uint j = 0; j < TN; j++) {
      bo[j] = ((size_t)rn[j] * nsb + b) * GBYTES;
#if WTYPE == WT_Q6_K /* {ql[128]; qh[64]; scales[16]; d} */
      d[j] = scale_at(s, su, bo[j] / 2 + 104);
#elif WTYPE == WT_Q2_K /* {scales[16]; qs[64]; d; dmin} */
      d[j] = scale_at(s, su, bo[j] / 2 + 40);
      dm[j] = scale_at(s, su, bo[j] / 2 + 41);
#elif WTYPE == WT_Q3_K /* {hmask[32]; qs[64]; scales[12]; d}: 110 bytes, read in 16-bit words */
      d[j] = scale_at(s, su, bo[j] / 2 + 54);
      hm0[j] = as_uchar16(vload8(0, su + bo[j] / 2));
      hm1[j] = as_uchar16(vload8(1, su + bo[j] / 2));
#else /* {d; dmin; scales[12]; (Q5_K: qh[32];) qs[128]} */
      d[j] = scale_at(s, su, bo[j] / 2);
      dm[j] = scale_at(s, su, bo[j] / 2 + 1);
#endif
#if WTYPE == WT_Q5_K
      qh[j] = vload8(0, wu + bo[j] / 4 + 4);
#endif
    }
    _Pragma("unroll") for (uint sb = 0; sb < 8; sb++) { /* sub-block sb of 32: x's block 8b + sb */
      char16 wl[TN], wh[TN];
      int sl[TN], sh[TN];
      float dd[TN], mm[TN];
#if WTYPE == WT_Q2_K
      int ml[TN], mh[TN]; /* the halves' mins */
#endif
      _Pragma("unroll") for (uint j = 0; j < TN; j++) {
#if WTYPE == WT_Q2_K || WTYPE == WT_Q3_K
        /* elements 128 n + 32 jj + l: qs byte 32 n + l, bits 2 jj; the
         * halves' scales (and Q2_K's mins) are those of sub-blocks of 16
         * t = 2 sb and 2 sb + 1 (ggml's dequantize_row_q2_K / _q3_K) */
        const uint n = sb / 4, jj = sb % 4;
#if WTYPE == WT_Q2_K
        const uint8 q = vload8(0, wu + bo[j] / 4 + 4 + 8 * n);
        wl[j] = as_char16((as_uchar16(q.lo) >> (uchar16)(2 * jj)) & (uchar16)3);
        wh[j] = as_char16((as_uchar16(q.hi) >> (uchar16)(2 * jj)) & (uchar16)3);
        const uint s0 = wb[bo[j] + 2 * sb], s1 = wb[bo[j] + 2 * sb + 1];
        sl[j] = s0 & 15, sh[j] = s1 & 15, ml[j] = s0 >> 4, mh[j] = s1 >> 4;
        mm[j] = dm[j];
#else /* the hmask bit set: q; clear: q - 4 */
        const size_t qo = bo[j] / 2 + 16 + 16 * n;
        const uchar16 q0 = as_uchar16(vload8(0, su + qo)), q1 = as_uchar16(vload8(1, su + qo));
        const uchar16 hb = (uchar16)(4 * n + jj);
        wl[j] = as_char16(((q0 >> (uchar16)(2 * jj)) & (uchar16)3) | ((hm0[j] >> hb) & (uchar16)1) << (uchar16)2) - (char16)4;
        wh[j] = as_char16(((q1 >> (uchar16)(2 * jj)) & (uchar16)3) | ((hm1[j] >> hb) & (uchar16)1) << (uchar16)2) - (char16)4;
        sl[j] = scale_q3k(2 * sb, wb + bo[j] + 96);
        sh[j] = scale_q3k(2 * sb + 1, wb + bo[j] + 96);
        mm[j] = 0.0f;
#endif
        dd[j] = d[j];
#elif WTYPE == WT_Q6_K
        const uint g = sb / 4, t = sb % 4; /* elements 32t..32t+31 of half g */
        const size_t hq = bo[j] / 2 + g * 32 + (t & 1) * 16, hh = bo[j] / 2 + 64 + g * 16;
        const uchar16 l0 = as_uchar16(vload8(0, su + hq)), l1 = as_uchar16(vload8(1, su + hq));
        const uchar16 h0 = as_uchar16(vload8(0, su + hh)), h1 = as_uchar16(vload8(1, su + hh));
        const uchar16 q0 = (t < 2 ? l0 & (uchar16)15 : l0 >> (uchar16)4) | ((h0 >> (uchar16)(2 * t)) & (uchar16)3) << (uchar16)4;
        const uchar16 q1 = (t < 2 ? l1 & (uchar16)15 : l1 >> (uchar16)4) | ((h1 >> (uchar16)(2 * t)) & (uchar16)3) << (uchar16)4;
        wl[j] = as_char16(q0) - (char16)32;
        wh[j] = as_char16(q1) - (char16)32;
        sl[j] = (char)wb[bo[j] + 192 + g * 8 + 2 * t];
        sh[j] = (char)wb[bo[j] + 192 + g * 8 + 2 * t + 1];
        dd[j] = d[j];
        mm[j] = 0.0f;
#else
        const uint8 q = vload8(0, wu + bo[j] / 4 + (WTYPE == WT_Q4_K ? 4 : 12) + (sb / 2) * 8);
        uchar16 q0 = as_uchar16(q.lo), q1 = as_uchar16(q.hi);
        q0 = sb % 2 ? q0 >> (uchar16)4 : q0 & (uchar16)15;
        q1 = sb % 2 ? q1 >> (uchar16)4 : q1 & (uchar16)15;
#if WTYPE == WT_Q5_K
        q0 |= ((as_uchar16(qh[j].lo) >> (uchar16)sb) & (uchar16)1) << (uchar16)4;
        q1 |= ((as_uchar16(qh[j].hi) >> (uchar16)sb) & (uchar16)1) << (uchar16)4;
#endif
        wl[j] = as_char16(q0);
        wh[j] = as_char16(q1);
        const uint2 sm = scale_min_k4(sb, wb + bo[j] + 4);
        sl[j] = sh[j] = 1; /* the scale in the float below: one multiply a block */
        dd[j] = d[j] * (float)sm.x;
        mm[j] = dm[j] * (float)sm.y;
#endif
      }
      _Pragma("unroll") for (uint i = 0; i < MMAX; i++) {
        if (i < M) { /* uniform */
          const size_t xb = (size_t)i * nb + 8 * b + sb;
          const uint8 xw = vload8(xb, xq);
          const float dx = xd[xd_off + 2 * xb], sx = xd[xd_off + 2 * xb + 1];
#if WTYPE == WT_Q2_K /* the sums of x's halves, for the halves' mins */
          const float xlo = kq_half_sum(xw), xhi = sx - xlo;
#endif
          _Pragma("unroll") for (uint j = 0; j < TN; j++) {
#if INT_DOT
            acc[i][j] = fma(dd[j] * dx, (float)kq_dot(wl[j], wh[j], sl[j], sh[j], xw), acc[i][j]);
#else
            acc[i][j] = fma((float8)(dd[j] * dx), convert_float8(kq_dot(wl[j], wh[j], sl[j], sh[j], xw)), acc[i][j]);
#endif
#if WTYPE == WT_Q2_K
            accm[i][j] = fma(mm[j] * dx, (float)ml[j] * xlo + (float)mh[j] * xhi, accm[i][j]);
#elif KQ_MIN
            accm[i][j] = fma(mm[j] * dx, sx, accm[i][j]);
#endif
          }
        }
      }
    }
  }
  _Pragma("unroll") for (uint j = 0; j < TN; j++) {
    if (n0 + j >= N) continue;
    const float bj = has_bias ? bias[b_off + n0 + j] : 0.0f;
    _Pragma("unroll") for (uint i = 0; i < MMAX; i++) {
      if (i >= M) continue;
      const float o = KQ_SUM(acc[i][j]) - accm[i][j] + bj;
#if SKINNY_ACT_PASS
      y[y_off + (size_t)i * N + n0 + j] = o;
#else
      y[y_off + (size_t)i * N + n0 + j] = clf_act(o, act);
#endif
    }
  }
}
#endif
#endif

/* ------------------------------------------------------------------------
 * Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 in a 16-row interleave (issue 42;
 * host/ops/linear_r16.c): on a CPU, GGUF's blocks of 32 of these types
 * are repacked at load so that 16 rows' blocks lie together, a group of
 * rows and block taking 16 times a block's bytes: the 16 f16 scales (Q4_1,
 * Q5_1: then the 16 f16 mins), then for each 32-bit word k of the block
 * after them the 16 rows' words side by side (Q5_x: k = 0 the fifth bits,
 * qh; then Q4_x's and Q5_x's 4 words of qs, bytes 4k..4k+3, elements
 * 4k..4k+3 in the low nibbles and 16+4k..19+4k in the high ones; Q8_0's 8,
 * elements 4k..4k+3).
 * A work-item takes 16 rows; its loads are whole 64-byte lines and its
 * products run across the rows in int lanes: per word and row, the pairs
 * (elements j, j + 2) as two shorts times x's, added (the pattern
 * compilers turn into pmaddwd, vpdpwssd where the CPU has VNNI), where
 * skinny_int reads one row's block at a time and sums within it (Q4_1 and
 * Q8_0; skinny_r16f, the float path below, takes every type).  Built
 * with -DINT_KERNEL=1 -DR16_KERNEL=1 and the type's WTYPE (quantize_q8 of
 * the same program makes x's blocks).  M <= MMAX rows of x from x's
 * blocks' row x_row on (y from y_off: its rows in launches of MMAX); N
 * any (the last group's rows past N are zero padding, not written).
 * global (N / 16 rounded up, then to TL), local (TL).
 * ------------------------------------------------------------------------ */
#if INT_KERNEL && R16_KERNEL
/* A group's 32-bit words, where its quant words start, whether it has
 * mins, and where Q5_x's fifth bits are (a word a row, as the file's qh). */
#if WTYPE == WT_Q8_0
#define R16_WORDS 136 /* 8 of scales, 8 x 16 of quants */
#define R16_QOFF 8
#define R16_MIN 0
#elif WTYPE == WT_Q4_0
#define R16_WORDS 72 /* 8 of scales, 4 x 16 of quants */
#define R16_QOFF 8
#define R16_MIN 0
#elif WTYPE == WT_Q5_0
#define R16_WORDS 88 /* 8 of scales, 16 of fifth bits, 4 x 16 of quants */
#define R16_QOFF 24
#define R16_QH 8
#define R16_MIN 0
#elif WTYPE == WT_Q5_1
#define R16_WORDS 96 /* 16 of scales and mins, 16 of fifth bits, 4 x 16 of quants */
#define R16_QOFF 32
#define R16_QH 16
#define R16_MIN 1
#elif WTYPE == WT_Q4_K /* super-blocks of 256 (R16_K) */
#define R16_K 1
#define R16_WORDS 576 /* 16 of d and dmin, 3 x 16 of 6-bit scales and mins, 32 x 16 of quants */
#define R16_QOFF 16
#elif WTYPE == WT_Q5_K
#define R16_K 1
#define R16_WORDS 704 /* 16 of d and dmin, 3 x 16 of 6-bit scales and mins, 8 x 16 of qh, 32 x 16 of qs */
#define R16_QOFF 16
#elif WTYPE == WT_Q2_K
#define R16_K 1
#define R16_WORDS 336 /* 16 of d and dmin (the file's last), 4 x 16 of 4-bit scales and mins, 16 x 16 of qs */
#define R16_QOFF 16
#elif WTYPE == WT_Q3_K
#define R16_K 1
#define R16_WORDS 440 /* 8 of d (the file's last), 8 x 16 of hmask, 16 x 16 of qs, 3 x 16 of scales */
#define R16_QOFF 8
#elif WTYPE == WT_Q6_K
#define R16_K 1
#define R16_WORDS 840 /* 8 of d (the file's last), 32 x 16 of ql, 16 x 16 of qh, 4 x 16 of scales */
#define R16_QOFF 8
#else /* Q4_1 */
#define R16_WORDS 80 /* 16 of scales and mins, 4 x 16 of quants */
#define R16_QOFF 16
#define R16_MIN 1
#endif
#ifndef R16_K
#define R16_K 0
#endif
/* The weight's block R16_PF blocks on (about 4 KB on), asked for while
 * this one is multiplied.  Each work-item reads its groups' blocks in
 * order, yet with the hardware's prefetch alone one-row products ran at
 * 15-17 GB/s where a bare read of the same layout ran at 27-29 (Intel's
 * CPU runtime, GPT-2's Q8_0 head, 246 MB of copies in turn; 22-23 with
 * it), and GPT-2 q8 decoded at 11-13 ms a token against 8-9 with it on
 * both runtimes (1 KB on: 10-11).  last: the weight's last block, where
 * the address stops (a prefetch past the buffer is left to no
 * implementation).  Only products of up to R16_PF_ROWS rows ask
 * (so the MMAX > 8 branches never do): longer ones are bound by
 * arithmetic, not by memory (common.cl's CLF_PREFETCH: a line at a
 * time on PoCL). */
#define R16_PF_ROWS 4
#define R16_PF (R16_WORDS >= 1024 ? 1 : (1024 + R16_WORDS / 2) / R16_WORDS)
#define R16_PREFETCH(base, last) CLF_PREFETCH(w + min((base) + R16_PF * R16_WORDS, (last)), 4 * R16_WORDS)

/* y's outputs of group g from y_off, those of its 16 rows below N:
 * act(acc + bias), the activation in lanes of clf_act4 (the bits the
 * other kernels' epilogues give), a whole group's in four vector stores.
 * A scalar clf_act an output took PoCL's scalar exp: GPT-2's 3072 x 768
 * fc1 (gelu_new) product, in cache, 70-74 us against 47-60 this way
 * (docs/performance.md, session 38).  Four vstore4s, not one float16
 * built of four clf_act4s: Oclgrind 21.10's uninitialised-value checker
 * crashes (SIGSEGV) on that. */
inline void r16_store(float16 acc, uint g, __global const float *bias, uint b_off, int has_bias, int act,
                      __global float *y, uint y_off, uint N) {
  const uint n0 = g * 16;
  if (n0 + 16 <= N) {
    if (has_bias) acc += vload16(0, bias + b_off + n0);
    __global float *o = y + y_off + n0;
    vstore4(clf_act4(acc.s0123, act), 0, o);
    vstore4(clf_act4(acc.s4567, act), 1, o);
    vstore4(clf_act4(acc.s89ab, act), 2, o);
    vstore4(clf_act4(acc.scdef, act), 3, o);
    return;
  }
  float o[16];
  vstore16(acc, 0, o);
  _Pragma("unroll") for (uint r = 0; r < 16; r += 4) {
    _Pragma("unroll") for (uint q = 0; q < 4; q++)
      if (has_bias && n0 + r + q < N) o[r + q] += bias[b_off + n0 + r + q];
    vstore4(clf_act4(vload4(0, o + r), act), 0, o + r);
  }
  for (uint r = 0; n0 + r < N; r++) y[y_off + n0 + r] = o[r];
}
/* expand_r16's 16 values of group g at o (a row of out [K, N]), those of
 * rows below N. */
inline void r16_put(float16 v, uint g, uint N, __global float *o) {
  if (g * 16 + 16 <= N) {
    vstore16(v, 0, o);
    return;
  }
  float t[16];
  vstore16(v, 0, t);
  for (uint r = 0; g * 16 + r < N; r++) o[r] = t[r];
}

/* The bits v & mask (below bit 23) of the 16 rows made floats in the
 * mantissa of 2^23, less c: (v & mask) ^ (0x4b000000 | flip) is exactly
 * 2^23 + the bits' value (flip: a signed byte's sign bit, turning q into
 * q + 128 where it lies), so c = 2^23 (+ the flip's value, + a type's
 * offset where the bits lie) leaves the quant times its place, exactly.
 * An and and an xor (one vpternlogd on AVX-512) and a subtract, on
 * either vector port, where shifting a value out and converting it took
 * operations AVX-512 runs on one port only: skinny_r16f's one-row
 * products were bound by that port, not by the weight read (GPT-2's Q8_0
 * head in a harness: 1.70 -> 0.83 ms on Intel's runtime, 2.60 -> 1.04
 * on PoCL; docs/performance.md, session 34). */
inline float16 r16_mant(uint16 v, uint mask, uint flip, float c) {
  return as_float16((v & (uint16)mask) ^ (uint16)(0x4b000000u | flip)) - (float16)(c);
}
/* Q8_0's quant word u (elements 4 k .. 4 k + 3 of the 16 rows): q[b]
 * its byte b, the odd ones times 2^8 (bytes 2 and 3 after a shift by
 * 16). */
inline void r16_q8_word(uint16 u, float16 *q) {
  const uint16 v = u >> (uint16)16;
  q[0] = r16_mant(u, 0xffu, 0x80u, 0x1.0001p+23f);
  q[1] = r16_mant(u, 0xff00u, 0x8000u, 0x1.01p+23f);
  q[2] = r16_mant(v, 0xffu, 0x80u, 0x1.0001p+23f);
  q[3] = r16_mant(v, 0xff00u, 0x8000u, 0x1.01p+23f);
}
/* Byte `odd` (0 or 1) of the 16 rows' word v, an unsigned q, as q - off,
 * exactly: byte 0 through r16_mant, byte 1's 2^8 q brought to scale in an
 * fma ((2^23 + 2^8 q) 2^-8 - 2^15 - off).  Bytes 2 and 3 after a shift by
 * 16. */
inline float16 r16_ubyte(uint16 v, uint odd, float off) {
  return odd ? fma(r16_mant(v, 0xff00u, 0, 0.0f), (float16)(0x1p-8f), (float16)(-0x1p+15f - off))
             : r16_mant(v, 0xffu, 0, 0x1p+23f + off);
}

#if !R16_K /* the blocks of 32 */
/* Bytes sh / 8 and sh / 8 + 2 of x's word xw, sign-extended, as the two
 * shorts of an int. */
inline uint r16_pair(uint xw, uint sh) {
  return ((uint)(int)(char)(xw >> sh) & 0xffffu) | ((uint)(int)(char)(xw >> (sh + 16)) << 16);
}
/* Lane r: a.s(2r) b.s(2r) + a.s(2r+1) b.s(2r+1), 8 lanes. */
inline int8 r16_madd(uint8 a, uint8 b) {
  const int16 p = convert_int16(as_short16(a)) * convert_int16(as_short16(b));
  return p.even + p.odd;
}
/* The integer sums of the 16 rows' block (base: its first word) against
 * x's block at xb (8 words). */
inline int16 r16_block(__global const uint *w, size_t base, __global const uint *xq, size_t xb) {
  int8 s0 = (int8)(0), s1 = (int8)(0);
#if WTYPE == WT_Q8_0
  _Pragma("unroll") for (uint k = 0; k < 8; k++) {
    const int16 u = as_int16(vload16(0, w + base + R16_QOFF + 16 * k));
    const uint xw = xq[xb + k];
    const uint8 xe = (uint8)(r16_pair(xw, 0)), xo = (uint8)(r16_pair(xw, 8));
    /* per row: bytes 0 and 2, 1 and 3, sign-extended into the halves of an int */
    const uint16 e = (as_uint16((u << (int16)24) >> (int16)24) & (uint16)0xffffu) | as_uint16(((u << (int16)8) >> (int16)24) << (int16)16);
    const uint16 o = (as_uint16((u << (int16)16) >> (int16)24) & (uint16)0xffffu) | as_uint16((u >> (int16)24) << (int16)16);
    s0 += r16_madd(e.lo, xe) + r16_madd(o.lo, xo);
    s1 += r16_madd(e.hi, xe) + r16_madd(o.hi, xo);
  }
#else
  _Pragma("unroll") for (uint k = 0; k < 4; k++) {
    const uint16 u = vload16(0, w + base + R16_QOFF + 16 * k);
    const uint xl = xq[xb + k], xh = xq[xb + 4 + k];
    const uint8 le = (uint8)(r16_pair(xl, 0)), lo = (uint8)(r16_pair(xl, 8));
    const uint8 he = (uint8)(r16_pair(xh, 0)), ho = (uint8)(r16_pair(xh, 8));
    /* per row: elements 4k, 4k+2 | 4k+1, 4k+3 (low nibbles), then the high */
    const uint16 a = u & (uint16)0x000f000fu, b = (u >> (uint16)8) & (uint16)0x000f000fu;
    const uint16 c = (u >> (uint16)4) & (uint16)0x000f000fu, d = (u >> (uint16)12) & (uint16)0x000f000fu;
    s0 += r16_madd(a.lo, le) + r16_madd(b.lo, lo) + r16_madd(c.lo, he) + r16_madd(d.lo, ho);
    s1 += r16_madd(a.hi, le) + r16_madd(b.hi, lo) + r16_madd(c.hi, he) + r16_madd(d.hi, ho);
  }
#endif
  return (int16)(s0, s1);
}

/* Where the interleave keeps element j's fifth bit (linear_r16.c's
 * r16_qh: quant word k = (j % 16) / 4, byte j % 4, high nibble j / 16). */
#define R16_QHBIT(j) (8 * ((j) % 4) + 4 * ((j) / 16) + ((j) % 16) / 4)
/* The 16 rows' values of element j (< 32) of the block, as the file's
 * integers (Q4_0: -8..7, Q4_1: 0..15, Q8_0: -128..127, Q5_0: -16..15,
 * Q5_1: 0..31); u
 * the quant word j holds, qh the rows' fifth bits (Q5_x). */
inline float16 r16_value(uint16 u, uint16 qh, uint j) {
#if WTYPE == WT_Q8_0
  return convert_float16((as_int16(u) << (int16)(24 - 8 * (j % 4))) >> (int16)24);
#else
  uint16 q = (u >> (uint16)(8 * (j % 4) + (j >= 16 ? 4 : 0))) & (uint16)15;
#if WTYPE == WT_Q5_0 || WTYPE == WT_Q5_1
  q |= ((qh >> (uint16)R16_QHBIT(j)) & (uint16)1) << (uint16)4;
#endif
  return convert_float16(q) - (WTYPE == WT_Q5_0 ? 16.0f : WTYPE == WT_Q4_0 ? 8.0f : 0.0f);
#endif
}
#if WTYPE != WT_Q8_0
/* Quant word k's 8 values a row, a byte each (then r16_byte): lo byte b
 * element 4 k + b, hi byte b element 16 + 4 k + b, the file's integers
 * less R16_OFF; Q5_x's fifth bits joined as the one-row classes join them
 * (R16_QHBIT's order).  Taking the values a word at a time costs a shift
 * and an and a value where r16_value's each took the word's shift, the
 * fifth bit's three operations and the offset. */
#define R16_OFF (WTYPE == WT_Q4_0 ? 8.0f : WTYPE == WT_Q5_0 ? 16.0f : 0.0f)
inline void r16_lohi(uint16 u, uint16 qh, uint k, uint16 *lo, uint16 *hi) {
  *lo = u & (uint16)0x0f0f0f0fu;
  *hi = (u >> (uint16)4) & (uint16)0x0f0f0f0fu;
#if WTYPE == WT_Q5_0 || WTYPE == WT_Q5_1
  *lo |= (qh << (uint16)(4 - k)) & (uint16)0x10101010u;
  *hi |= (qh >> (uint16)k) & (uint16)0x10101010u;
#endif
}
#define r16_byte(v, b) (convert_float16(((v) >> (uint16)(8 * (b))) & (uint16)0xff) - (float16)(R16_OFF))
#endif
/* The 16 rows' mins of the group's block at base (Q4_1, Q5_1), else 0. */
#if R16_MIN
#define R16_MINS(base) vload_half16(1, wh + 2 * (base))
#else
#define R16_MINS(base) ((float16)(0.0f))
#endif
#ifdef R16_QH
#define R16_BITS(base) vload16(0, w + (base) + R16_QH)
#else
#define R16_BITS(base) ((uint16)(0))
#endif
/* The quant word of element j. */
#define R16_WORD(j) (WTYPE == WT_Q8_0 ? (j) / 4 : ((j) % 16) / 4)

#if WTYPE == WT_Q8_0 || WTYPE == WT_Q4_1 /* the integer kernel's types */
#if !CLF_ONLY || CLF_ONLY_skinny_r16
__kernel __attribute__((reqd_work_group_size(TL, 1, 1))) void skinny_r16(
    __global const uint *xq, __global const float *xd, uint xd_off, uint x_row, __global const uint *w,
    __global const half *wh, __global const float *bias, uint b_off, int has_bias, int act, __global float *y,
    uint y_off, uint M, uint N, uint K) {
  const uint g = get_global_id(0), nb = K / 32;
  if (g * 16 >= N) return;
  float16 acc[MMAX];
  _Pragma("unroll") for (uint i = 0; i < MMAX; i++) acc[i] = (float16)(0.0f);
  for (uint c = 0; c < nb; c++) {
    const size_t base = ((size_t)g * nb + c) * R16_WORDS;
    const float16 d = vload_half16(0, wh + 2 * base);
#if R16_MIN
    const float16 m = vload_half16(1, wh + 2 * base);
#endif
    _Pragma("unroll") for (uint i = 0; i < MMAX; i++) {
      if (i < M) { /* uniform */
        const size_t xb = (size_t)(x_row + i) * nb + c;
        const float dx = xd[xd_off + 2 * xb];
        const float16 is = convert_float16(r16_block(w, base, xq, 8 * xb));
#if R16_MIN /* Q4_1's value d q + m, times x's dx qx: d dx isum + m dx sum(qx) */
        acc[i] = fma(d * dx, is, fma(m, (float16)(dx * xd[xd_off + 2 * xb + 1]), acc[i]));
#else
        acc[i] = fma(d * dx, is, acc[i]);
#endif
      }
    }
  }
  _Pragma("unroll") for (uint i = 0; i < MMAX; i++)
    if (i < M) r16_store(acc[i], g, bias, b_off, has_bias, act, y, y_off + i * N, N);
}
#endif

#endif

/* skinny_r16f: the same product on the float path (exact as the float
 * kernels are: x as it is, each weight d q (+ m) in f32), for more rows
 * of x than the integer path takes: per block and row of x, s = sum q x
 * over the 16 rows in a float16 (each quant converted once for the MMAX
 * rows), then d s (+ m sum(x)).  Arguments as skinny_r16's, x f32 [M, K]
 * from x_off in place of its blocks, M all the product's rows: every block
 * of MMAX rows in one launch.  global (N / 16 rounded up, then to TL;
 * M / MMAX rounded up), local (TL, 1). */
/* One row of x over 4- and 5-bit quants: a block's elements in classes
 * by where they lie in their words (below); more rows keep the plain
 * form (their class sums cost registers: PoCL prefilled SmolLM2 Q4_1
 * 0.83x as fast with them at 8 rows). */
#define R16_CLASSES (MMAX == 1 && (WTYPE == WT_Q4_0 || WTYPE == WT_Q4_1 || WTYPE == WT_Q5_0 || WTYPE == WT_Q5_1))
#if !CLF_ONLY || CLF_ONLY_skinny_r16f
__kernel __attribute__((reqd_work_group_size(TL, 1, 1))) void skinny_r16f(
    __global const float *x, uint x_off, __global const uint *w, __global const half *wh, __global const float *bias,
    uint b_off, int has_bias, int act, __global float *y, uint y_off, uint M, uint N, uint K) {
  /* rows MMAX rb .. MMAX rb + MMAX - 1 of x and y (rb the second index:
   * every block of rows in one launch) */
  const uint g = get_global_id(0), nb = K / 32, rb = get_global_id(1);
  if (g * 16 >= N || rb * MMAX >= M) return;
  const int pf = M <= R16_PF_ROWS; /* the whole product's rows */
  x_off += rb * MMAX * K, y_off += rb * MMAX * N, M = min(M - rb * MMAX, (uint)MMAX);
  const size_t last = ((size_t)((N + 15) / 16) * nb - 1) * R16_WORDS;
  float16 acc[MMAX];
  _Pragma("unroll") for (uint i = 0; i < MMAX; i++) acc[i] = (float16)(0.0f);
#if MMAX > 8
  /* Many rows of x: each weight's value d q (+ m) made once, in f32 as
   * expand_r16 makes it, then an fma a row (no per-block sums: their
   * registers go to the rows) */
  for (uint c = 0; c < nb; c++) {
    const size_t base = ((size_t)g * nb + c) * R16_WORDS;
    if (pf) R16_PREFETCH(base, last);
    const float16 d = vload_half16(0, wh + 2 * base), m = R16_MINS(base);
    const uint16 qh = R16_BITS(base);
#if WTYPE == WT_Q8_0
    _Pragma("unroll") for (uint j = 0; j < 32; j++) {
      const float16 v = fma(d, r16_value(vload16(0, w + base + R16_QOFF + 16 * R16_WORD(j)), qh, j), m);
      _Pragma("unroll") for (uint i = 0; i < MMAX; i++)
        if (i < M) acc[i] = fma(v, (float16)(x[x_off + (size_t)i * K + (size_t)c * 32 + j]), acc[i]); /* uniform */
    }
#else
    _Pragma("unroll") for (uint k = 0; k < 4; k++) {
      uint16 lo, hi;
      r16_lohi(vload16(0, w + base + R16_QOFF + 16 * k), qh, k, &lo, &hi);
      _Pragma("unroll") for (uint e = 0; e < 8; e++) {
        const uint j = 4 * k + e % 4 + 16 * (e / 4);
        const float16 v = fma(d, r16_byte(e < 4 ? lo : hi, e % 4), m);
        _Pragma("unroll") for (uint i = 0; i < MMAX; i++)
          if (i < M) acc[i] = fma(v, (float16)(x[x_off + (size_t)i * K + (size_t)c * 32 + j]), acc[i]); /* uniform */
      }
    }
#endif
  }
#else
  for (uint c = 0; c < nb; c++) {
    const size_t base = ((size_t)g * nb + c) * R16_WORDS;
    if (pf) R16_PREFETCH(base, last);
    const float16 d = vload_half16(0, wh + 2 * base);
    float16 s[MMAX];
    float xs[MMAX];
    const uint16 qh = R16_BITS(base);
    _Pragma("unroll") for (uint i = 0; i < MMAX; i++) s[i] = (float16)(0.0f), xs[i] = 0.0f;
#if R16_CLASSES && (WTYPE == WT_Q4_0 || WTYPE == WT_Q4_1)
    /* The nibbles where they lie (r16_mant; the upper half's shifted
     * down 16 first): (q - R16_OFF) 2^sh, Q4_0's 8 in the constant; each
     * of the 8 classes of 4 elements (byte b, low or high nibble; sh = 8 b
     * + 4 hi) sums it times x, scaled by 2^-sh once.  No running sum of x
     * for Q4_0's 8, whose chain of dependent adds the block waited on (a
     * vector sum for Q4_1's min).  GPT-2's Q4_0 head (50257 x 768) in a
     * harness: 1.13 -> 0.79 ms on Intel's runtime, 2.07 -> 1.08 on PoCL
     * (docs/performance.md, session 34) */
    _Pragma("unroll") for (uint h = 0; h < 8; h++) {
      const uint sh = 8 * (h % 4) + 4 * (h / 4), sl = sh % 16;
      float16 t = (float16)(0.0f);
      _Pragma("unroll") for (uint k = 0; k < 4; k++) {
        const uint16 u = vload16(0, w + base + R16_QOFF + 16 * k);
        const float16 q = r16_mant(sh >= 16 ? u >> (uint16)16 : u, 15u << sl, 0, 0x1p+23f + R16_OFF * (float)(1u << sl));
        t = fma(q, (float16)(x[x_off + (size_t)c * 32 + 4 * k + h % 4 + 16 * (h / 4)]), t);
      }
      s[0] = fma(t, (float16)(1.0f / (float)(1u << sl)), s[0]);
    }
#if R16_MIN
    {
      const float16 xv = vload16(0, x + x_off + (size_t)c * 32) + vload16(1, x + x_off + (size_t)c * 32);
      xs[0] = sum8(xv.lo + xv.hi);
    }
#endif
#elif R16_CLASSES /* Q5_0, Q5_1 */
    /* The same classes, each word's 5-bit values joined first: the fifth
     * bits, in the interleave's order (R16_QHBIT), shifted left 4 - k
     * beside word k's low nibbles and right k beside its high ones, so
     * that byte b of lo and hi holds elements 4 k + b and 16 + 4 k + b
     * whole; bytes 0 and 1 (2 and 3 after a shift by 16) through
     * r16_mant, (q - 16) 2^(8 b) for Q5_0, q 2^(8 b) for Q5_1 (whose min
     * takes a vector sum of x) */
    float16 t[4];
    _Pragma("unroll") for (uint b = 0; b < 4; b++) t[b] = (float16)(0.0f);
    _Pragma("unroll") for (uint k = 0; k < 4; k++) {
      const uint16 u = vload16(0, w + base + R16_QOFF + 16 * k);
      const uint16 lo = (u & (uint16)0x0f0f0f0fu) | ((qh << (uint16)(4 - k)) & (uint16)0x10101010u);
      const uint16 hi = ((u >> (uint16)4) & (uint16)0x0f0f0f0fu) | ((qh >> (uint16)k) & (uint16)0x10101010u);
      const uint16 lv = lo >> (uint16)16, hv = hi >> (uint16)16;
      _Pragma("unroll") for (uint b = 0; b < 4; b++) {
        const uint m = 31u << (8 * (b % 2));
        const float c0 = 0x1p+23f + R16_OFF * (float)(1u << (8 * (b % 2)));
        const float16 ql = r16_mant(b >= 2 ? lv : lo, m, 0, c0), qu = r16_mant(b >= 2 ? hv : hi, m, 0, c0);
        const float a0 = x[x_off + (size_t)c * 32 + 4 * k + b], a1 = x[x_off + (size_t)c * 32 + 16 + 4 * k + b];
        t[b] = fma(qu, (float16)(a1), fma(ql, (float16)(a0), t[b]));
      }
    }
    s[0] = fma(t[1] + t[3], (float16)(0x1p-8f), t[0] + t[2]);
#if R16_MIN
    {
      const float16 xv = vload16(0, x + x_off + (size_t)c * 32) + vload16(1, x + x_off + (size_t)c * 32);
      xs[0] = sum8(xv.lo + xv.hi);
    }
#endif
#elif WTYPE == WT_Q8_0 && MMAX == 1
    /* One row of x over 8-bit quants (r16_q8_word): a sum for each byte
     * (the odd ones' scaled by 2^-8 once a block), where one sum waited
     * on 32 dependent fmas a block */
    float16 s1 = (float16)(0.0f), s2 = (float16)(0.0f), s3 = (float16)(0.0f);
    _Pragma("unroll") for (uint k = 0; k < 8; k++) {
      float16 q[4];
      r16_q8_word(vload16(0, w + base + R16_QOFF + 16 * k), q);
      __global const float *xk = x + x_off + (size_t)c * 32 + 4 * k;
      s[0] = fma(q[0], (float16)(xk[0]), s[0]);
      s1 = fma(q[1], (float16)(xk[1]), s1);
      s2 = fma(q[2], (float16)(xk[2]), s2);
      s3 = fma(q[3], (float16)(xk[3]), s3);
    }
    s[0] = fma(s1 + s3, (float16)(0x1p-8f), s[0] + s2);
#else
    /* A few rows of x (MMAX 2 to 8): the one row's values through
     * r16_mant (Q8_0's bytes, Q4_x's and Q5_x's values joined a byte each
     * by r16_lohi), made once for the MMAX rows; each row's sum in two, the even bytes' and the odd
     * ones', so that no row waits on 32 dependent fmas a block, and Q4_1's
     * and Q5_1's sum of x a vector sum up to 4 rows (a running sum at 8:
     * PoCL's 8-row Q4_1 took 1.2x as long with the vector sums, Intel's
     * runtime 0.9x).  GPT-2's head in a harness, 2 and 4 rows, Intel's
     * runtime: Q8_0 2.16 -> 1.92 and 3.02 -> 2.65 ms, Q4_0 1.64 -> 1.22
     * and 2.45 -> 2.27, Q4_1 1.73 -> 1.48 and 2.85 -> 2.42; 8 rows the
     * same or faster on both runtimes */
    float16 s1[MMAX];
    _Pragma("unroll") for (uint i = 0; i < MMAX; i++) s1[i] = (float16)(0.0f);
#if WTYPE == WT_Q8_0
    _Pragma("unroll") for (uint k = 0; k < 8; k++) {
      float16 q[4];
      r16_q8_word(vload16(0, w + base + R16_QOFF + 16 * k), q);
      _Pragma("unroll") for (uint i = 0; i < MMAX; i++) {
        if (i < M) { /* uniform */
          __global const float *xk = x + x_off + (size_t)i * K + (size_t)c * 32 + 4 * k;
          s[i] = fma(q[2], (float16)(xk[2]), fma(q[0], (float16)(xk[0]), s[i]));
          s1[i] = fma(q[3], (float16)(xk[3]), fma(q[1], (float16)(xk[1]), s1[i]));
        }
      }
    }
    _Pragma("unroll") for (uint i = 0; i < MMAX; i++) s[i] = fma(s1[i], (float16)(0x1p-8f), s[i]);
#else
    _Pragma("unroll") for (uint k = 0; k < 4; k++) {
      uint16 lo, hi;
      r16_lohi(vload16(0, w + base + R16_QOFF + 16 * k), qh, k, &lo, &hi);
      const uint16 lv = lo >> (uint16)16, hv = hi >> (uint16)16;
      _Pragma("unroll") for (uint e = 0; e < 8; e++) {
        const uint j = 4 * k + e % 4 + 16 * (e / 4), b = e % 4;
        const uint16 src = e < 4 ? (b >= 2 ? lv : lo) : (b >= 2 ? hv : hi);
        const float16 q = r16_ubyte(src, b % 2, R16_OFF);
        _Pragma("unroll") for (uint i = 0; i < MMAX; i++) {
          if (i < M) { /* uniform */
            const float a = x[x_off + (size_t)i * K + (size_t)c * 32 + j];
            if (b % 2) s1[i] = fma(q, (float16)(a), s1[i]);
            else s[i] = fma(q, (float16)(a), s[i]);
#if R16_MIN && MMAX > 4
            xs[i] += a;
#endif
          }
        }
      }
    }
#if R16_MIN && MMAX <= 4
    _Pragma("unroll") for (uint i = 0; i < MMAX; i++) {
      if (i < M) { /* uniform */
        __global const float *xc = x + x_off + (size_t)i * K + (size_t)c * 32;
        const float16 xv = vload16(0, xc) + vload16(1, xc);
        xs[i] = sum8(xv.lo + xv.hi);
      }
    }
#endif
    _Pragma("unroll") for (uint i = 0; i < MMAX; i++) s[i] += s1[i];
#endif
#endif
#if R16_MIN
    const float16 m = vload_half16(1, wh + 2 * base);
    _Pragma("unroll") for (uint i = 0; i < MMAX; i++) acc[i] = fma(d, s[i], fma(m, (float16)(xs[i]), acc[i]));
#else
    _Pragma("unroll") for (uint i = 0; i < MMAX; i++) acc[i] = fma(d, s[i], acc[i]);
#endif
  }
#endif
  _Pragma("unroll") for (uint i = 0; i < MMAX; i++)
    if (i < M) r16_store(acc[i], g, bias, b_off, has_bias, act, y, y_off + i * N, N);
}
#endif

/* out [K, N] f32 = the interleaved weight [N, K] expanded and transposed
 * (the operand CLBlast reads, as expand_t's): work-item (g, c) writes
 * block c of the 16 rows of group g, 16 adjacent floats a row of out
 * (fewer in a last group past N).  global (N / 16 rounded up, K / 32). */
#if !CLF_ONLY || CLF_ONLY_expand_r16
__kernel void expand_r16(__global const uint *w, __global const half *wh, __global float *out, uint N, uint K) {
  const uint g = get_global_id(0), c = get_global_id(1), nb = K / 32;
  if (g * 16 >= N || c >= nb) return;
  const size_t base = ((size_t)g * nb + c) * R16_WORDS;
  const float16 d = vload_half16(0, wh + 2 * base), m = R16_MINS(base);
  __global float *o = out + (size_t)c * 32 * N + g * 16;
  const uint16 qh = R16_BITS(base);
  for (uint j = 0; j < 32; j++)
    r16_put(fma(d, r16_value(vload16(0, w + base + R16_QOFF + 16 * R16_WORD(j)), qh, j), m), g, N, o + (size_t)j * N);
}
#endif
#else /* the k-quants: super-blocks of 256, in 16 sub-blocks of 16 */
/* Whether a type's values have a min (value = a q - b), and the offset
 * its integers carry in r16k_word's bytes (Q6_K's 32, Q3_K's 4: the
 * bytes less it are the file's signed values). */
#define R16K_MIN (WTYPE == WT_Q2_K || WTYPE == WT_Q4_K || WTYPE == WT_Q5_K)
#define R16K_OFF (WTYPE == WT_Q6_K ? 32.0f : WTYPE == WT_Q3_K ? 4.0f : 0.0f)
/* The 16 rows' words of word plane p (counted from R16_QOFF). */
#define r16k_plane(w, base, p) vload16(0, (w) + (base) + R16_QOFF + 16 * (p))
/* The 16 rows' byte b of the words from word plane p on. */
inline uint16 r16k_byte(__global const uint *w, size_t base, uint p, uint b) {
  return (r16k_plane(w, base, p + b / 4) >> (uint16)(8 * (b % 4))) & (uint16)0xff;
}
/* Sub-block t's scale a and offset b of the 16 rows (value = a q - b, q
 * the element's integer, r16k_word's byte less R16K_OFF): Q4_K's and
 * Q5_K's d sc_j and dmin m_j of the 6-bit pair j = t / 2 (ggml's
 * get_scale_min_k4; planes 0-2), Q2_K's d (sc & 15) and dmin (sc >> 4) of
 * scales[t] (planes 0-3), Q3_K's d (s - 32) of its 6-bit s (low 4 bits
 * from scales[t % 8], its nibble t / 8, the high 2 from scales[8 + t % 4]
 * at 2 (t / 4): ggml's dequantize_row_q3_K; planes 24-26), Q6_K's d
 * scales[t] (plane 48 on). */
inline void r16k_scale(__global const uint *w, __global const half *wh, size_t base, uint t, float16 *a, float16 *b) {
  const float16 d = vload_half16(0, wh + 2 * base);
#if WTYPE == WT_Q4_K || WTYPE == WT_Q5_K
  const uint j = t / 2;
  uint16 sc, m;
  if (j < 4) {
    sc = r16k_byte(w, base, 0, j) & (uint16)63;
    m = r16k_byte(w, base, 0, j + 4) & (uint16)63;
  } else {
    const uint16 hi = r16k_byte(w, base, 0, j + 4);
    sc = (hi & (uint16)15) | ((r16k_byte(w, base, 0, j - 4) >> (uint16)6) << (uint16)4);
    m = (hi >> (uint16)4) | ((r16k_byte(w, base, 0, j) >> (uint16)6) << (uint16)4);
  }
  *a = d * convert_float16(sc);
  *b = vload_half16(1, wh + 2 * base) * convert_float16(m);
#elif WTYPE == WT_Q2_K
  const uint16 sc = r16k_byte(w, base, 0, t);
  *a = d * convert_float16(sc & (uint16)15);
  *b = vload_half16(1, wh + 2 * base) * convert_float16(sc >> (uint16)4);
#elif WTYPE == WT_Q3_K
  const uint16 lo = t < 8 ? r16k_byte(w, base, 24, t) & (uint16)15 : r16k_byte(w, base, 24, t - 8) >> (uint16)4;
  const uint16 hi = (r16k_byte(w, base, 24, 8 + t % 4) >> (uint16)(2 * (t / 4))) & (uint16)3;
  *a = d * (convert_float16(lo | hi << (uint16)4) - 32.0f);
  *b = (float16)(0.0f);
#else
  *a = d * convert_float16(as_char16(convert_uchar16(r16k_byte(w, base, 48, t))));
  *b = (float16)(0.0f);
#endif
}

/* Elements 16 t + 4 k .. + 3 of the super-block (sub-block t's word k)
 * of the 16 rows, a byte each, the element's integer plus R16K_OFF:
 * Q4_K's nibbles (chunk t / 4 of 64, the high nibbles where (t / 2) % 2;
 * qs from plane 3), Q5_K's the same with the fifth bit (qs from plane 11,
 * qh from 3: byte l of the 32-element sub-block's element l, bit t / 2),
 * Q2_K's 2 bits (l = 128 n + 32 j + 16 s + ll: qs byte 32 n + 16 s + ll,
 * bits 2 j; plane 4 on), Q3_K's the same 2 bits (plane 8 on) and the
 * hmask bit above them (hmask byte 16 s + ll, bit 4 n + j; plane 0 on:
 * ggml's q - 4 where the bit is clear, so the value is the 3 bits less 4),
 * Q6_K's 6 bits (ql's nibble and qh's 2 bits joined; l = 128 n + 32 gg +
 * ll: ql byte 64 n + 32 (gg % 2) + ll, nibble gg / 2, qh byte 32 n + ll,
 * bits 2 gg). */
inline uint16 r16k_word(__global const uint *w, size_t base, uint t, uint k) {
#if WTYPE == WT_Q4_K || WTYPE == WT_Q5_K
  const uint q = t / 4, hi = (t / 2) % 2, e0 = 16 * (t % 2);
  const uint16 u = (r16k_plane(w, base, (WTYPE == WT_Q4_K ? 3 : 11) + q * 8 + e0 / 4 + k) >> (uint16)(4 * hi)) &
                   (uint16)0x0f0f0f0fu;
#if WTYPE == WT_Q5_K
  return u | ((r16k_plane(w, base, 3 + e0 / 4 + k) >> (uint16)(t / 2)) & (uint16)0x01010101u) << (uint16)4;
#else
  return u;
#endif
#elif WTYPE == WT_Q2_K || WTYPE == WT_Q3_K
  const uint n = t / 8, j = (t % 8) / 2, s = t % 2;
  const uint16 u = (r16k_plane(w, base, (WTYPE == WT_Q2_K ? 4 : 8) + 8 * n + 4 * s + k) >> (uint16)(2 * j)) &
                   (uint16)0x03030303u;
#if WTYPE == WT_Q3_K
  return u | ((r16k_plane(w, base, 4 * s + k) >> (uint16)(4 * n + j)) & (uint16)0x01010101u) << (uint16)2;
#else
  return u;
#endif
#else
  const uint n = t / 8, gg = (t % 8) / 2, l0 = 16 * (t % 2);
  const uint16 ql = r16k_plane(w, base, 16 * n + 8 * (gg % 2) + l0 / 4 + k);
  const uint16 qh = r16k_plane(w, base, 32 + 8 * n + l0 / 4 + k);
  return ((ql >> (uint16)(4 * (gg / 2))) & (uint16)0x0f0f0f0fu) |
         (((qh >> (uint16)(2 * gg)) & (uint16)0x03030303u) << (uint16)4);
#endif
}
/* Byte b of such a word: the element's integer. */
#define r16k_byte_q(u, b) (convert_float16(((u) >> (uint16)(8 * (b))) & (uint16)0xff) - (float16)(R16K_OFF))
/* The 16 rows' integer of element l (< 256) of the super-block. */
inline float16 r16k_q(__global const uint *w, size_t base, uint l) {
  return r16k_byte_q(r16k_word(w, base, l / 16, (l % 16) / 4), l % 4);
}
/* The sum of x's 16 floats at p. */
inline float r16k_sum16(__global const float *p) {
  const float16 v = vload16(0, p);
  return sum8(v.lo + v.hi);
}

#if !CLF_ONLY || CLF_ONLY_skinny_r16f
__kernel __attribute__((reqd_work_group_size(TL, 1, 1))) void skinny_r16f(
    __global const float *x, uint x_off, __global const uint *w, __global const half *wh, __global const float *bias,
    uint b_off, int has_bias, int act, __global float *y, uint y_off, uint M, uint N, uint K) {
  /* rows MMAX rb .. MMAX rb + MMAX - 1 of x and y (rb the second index:
   * every block of rows in one launch) */
  const uint g = get_global_id(0), nb = K / 256, rb = get_global_id(1);
  if (g * 16 >= N || rb * MMAX >= M) return;
  const int pf = M <= R16_PF_ROWS; /* the whole product's rows */
  x_off += rb * MMAX * K, y_off += rb * MMAX * N, M = min(M - rb * MMAX, (uint)MMAX);
  const size_t last = ((size_t)((N + 15) / 16) * nb - 1) * R16_WORDS;
  float16 acc[MMAX];
  _Pragma("unroll") for (uint i = 0; i < MMAX; i++) acc[i] = (float16)(0.0f);
#if MMAX == 1
  /* One row of x: Q4_K and Q5_K by chunks of 64 (below); the others a
   * sub-block at a time, its bytes (r16k_word: the bits joined) through
   * r16_mant where they lie (bytes 2 and 3 after a shift by 16), the
   * type's offset in the constant: a sum for each byte, and Q2_K's min
   * times a vector sum of the sub-block's x (Q3_K and Q6_K have none). */
  if (M == 1) {
#if WTYPE == WT_Q4_K || WTYPE == WT_Q5_K
    /* A chunk of 64 elements (8 words of qs) at a time: its low nibbles
     * are sub-blocks 4 q and 4 q + 1 (scale pair j = 2 q), its high
     * nibbles 4 q + 2 and 4 q + 3 (pair 2 q + 1), so the scales are made
     * once a pair, each word loaded once for both nibbles, and each value
     * goes through r16_mant where it lies.  Q4_K's nibbles need no shift
     * or mask to bring them down (as Q4_0's classes); Q5_K's are joined
     * with their fifth bits first (qh's word k, bits 2 q and 2 q + 1, to
     * bit 4 of each byte: as Q5_0's classes). */
    for (uint c = 0; c < nb; c++) {
      const size_t base = ((size_t)g * nb + c) * R16_WORDS;
      if (pf) R16_PREFETCH(base, last);
      __global const float *xc = x + x_off + (size_t)c * 256;
      for (uint q = 0; q < 4; q++) {
        float16 cl[8];
        _Pragma("unroll") for (uint h = 0; h < 8; h++) cl[h] = (float16)(0.0f);
        _Pragma("unroll") for (uint k = 0; k < 8; k++) {
          __global const float *xk = xc + 64 * q + 4 * k;
#if WTYPE == WT_Q4_K
          const uint16 u = r16k_plane(w, base, 3 + 8 * q + k), v = u >> (uint16)16;
          _Pragma("unroll") for (uint h = 0; h < 8; h++) { /* byte h % 4, the high nibble where h >= 4 */
            const uint sl = 8 * (h % 2) + 4 * (h / 4);
            cl[h] = fma(r16_mant(h % 4 >= 2 ? v : u, 15u << sl, 0, 0x1p+23f), (float16)(xk[32 * (h / 4) + h % 4]), cl[h]);
          }
#else
          const uint16 u = r16k_plane(w, base, 11 + 8 * q + k), qh = r16k_plane(w, base, 3 + k);
          const uint16 lo = (u & (uint16)0x0f0f0f0fu) | ((qh >> (uint16)(2 * q)) & (uint16)0x01010101u) << (uint16)4;
          const uint16 hi = ((u >> (uint16)4) & (uint16)0x0f0f0f0fu) |
                            ((qh >> (uint16)(2 * q + 1)) & (uint16)0x01010101u) << (uint16)4;
          const uint16 lv = lo >> (uint16)16, hv = hi >> (uint16)16;
          _Pragma("unroll") for (uint h = 0; h < 8; h++) { /* byte h % 4 of lo, or of hi where h >= 4 */
            const uint16 src = h < 4 ? (h % 4 >= 2 ? lv : lo) : (h % 4 >= 2 ? hv : hi);
            cl[h] = fma(r16_mant(src, 31u << (8 * (h % 2)), 0, 0x1p+23f), (float16)(xk[32 * (h / 4) + h % 4]), cl[h]);
          }
#endif
        }
        float16 a0, b0, a1, b1;
        r16k_scale(w, wh, base, 4 * q, &a0, &b0);
        r16k_scale(w, wh, base, 4 * q + 2, &a1, &b1);
        const float16 s0 = fma(cl[1] + cl[3], (float16)(0x1p-8f), cl[0] + cl[2]);
#if WTYPE == WT_Q4_K /* the high nibbles lie 4 bits up */
        const float16 s1 = fma(cl[5] + cl[7], (float16)(0x1p-12f), (cl[4] + cl[6]) * (float16)(0x1p-4f));
#else
        const float16 s1 = fma(cl[5] + cl[7], (float16)(0x1p-8f), cl[4] + cl[6]);
#endif
        const float16 x0 = vload16(0, xc + 64 * q) + vload16(1, xc + 64 * q);
        const float16 x1 = vload16(2, xc + 64 * q) + vload16(3, xc + 64 * q);
        acc[0] = fma(a0, s0, fma(-b0, (float16)(sum8(x0.lo + x0.hi)), acc[0]));
        acc[0] = fma(a1, s1, fma(-b1, (float16)(sum8(x1.lo + x1.hi)), acc[0]));
      }
    }
#else
    for (uint c = 0; c < nb; c++) {
      const size_t base = ((size_t)g * nb + c) * R16_WORDS;
      if (pf) R16_PREFETCH(base, last);
      __global const float *xc = x + x_off + (size_t)c * 256;
      for (uint t = 0; t < 16; t++) {
        float16 a, b;
        r16k_scale(w, wh, base, t, &a, &b);
        float16 cl[4];
        _Pragma("unroll") for (uint h = 0; h < 4; h++) cl[h] = (float16)(0.0f);
        _Pragma("unroll") for (uint k = 0; k < 4; k++) {
          const uint16 u = r16k_word(w, base, t, k), v = u >> (uint16)16;
          __global const float *xk = xc + 16 * t + 4 * k;
          _Pragma("unroll") for (uint h = 0; h < 4; h++) {
            const float16 q = r16_mant(h >= 2 ? v : u, 0xffu << (8 * (h % 2)), 0,
                                       0x1p+23f + R16K_OFF * (float)(1u << (8 * (h % 2))));
            cl[h] = fma(q, (float16)(xk[h]), cl[h]);
          }
        }
#if R16K_MIN
        acc[0] = fma(-b, (float16)(r16k_sum16(xc + 16 * t)), acc[0]);
#endif
        acc[0] = fma(a, fma(cl[1] + cl[3], (float16)(0x1p-8f), cl[0] + cl[2]), acc[0]);
      }
    }
#endif
    r16_store(acc[0], g, bias, b_off, has_bias, act, y, y_off, N);
    return;
  }
#endif
#if MMAX > 8
  for (uint c = 0; c < nb; c++) {
    const size_t base = ((size_t)g * nb + c) * R16_WORDS;
    if (pf) R16_PREFETCH(base, last);
    for (uint t = 0; t < 16; t++) {
      float16 a, b;
      r16k_scale(w, wh, base, t, &a, &b);
      _Pragma("unroll") for (uint k = 0; k < 4; k++) {
        const uint16 u = r16k_word(w, base, t, k);
        _Pragma("unroll") for (uint h = 0; h < 4; h++) {
          const float16 v = fma(a, r16k_byte_q(u, h), -b);
          _Pragma("unroll") for (uint i = 0; i < MMAX; i++)
            if (i < M) /* uniform */
              acc[i] = fma(v, (float16)(x[x_off + (size_t)i * K + (size_t)c * 256 + 16 * t + 4 * k + h]), acc[i]);
        }
      }
    }
  }
#else
  /* A few rows of x (MMAX 2 to 8), as the blocks of 32's: a sub-block's
   * bytes through r16_mant, made once for the MMAX rows (the odd ones
   * brought to scale in an fma, exact), the type's offset in the
   * constant; each row's sum in two, the even bytes' and the odd ones'.
   * Q3_K and Q6_K take no sum of x (they have no min), Q2_K, Q4_K and
   * Q5_K a vector sum of the sub-block's x up to 4 rows and a running one
   * at 8 (as Q4_1's). */
  const float off = R16K_OFF;
  for (uint c = 0; c < nb; c++) {
    const size_t base = ((size_t)g * nb + c) * R16_WORDS;
    if (pf) R16_PREFETCH(base, last);
    __global const float *xc = x + x_off + (size_t)c * 256;
    for (uint t = 0; t < 16; t++) {
      float16 a, b, s[MMAX], s1[MMAX];
      float xs[MMAX];
      r16k_scale(w, wh, base, t, &a, &b);
      _Pragma("unroll") for (uint i = 0; i < MMAX; i++) s[i] = s1[i] = (float16)(0.0f), xs[i] = 0.0f;
      _Pragma("unroll") for (uint k = 0; k < 4; k++) {
        const uint16 u = r16k_word(w, base, t, k), v = u >> (uint16)16;
        _Pragma("unroll") for (uint h = 0; h < 4; h++) {
          const float16 q = r16_ubyte(h >= 2 ? v : u, h % 2, off);
          _Pragma("unroll") for (uint i = 0; i < MMAX; i++) {
            if (i < M) { /* uniform */
              const float xv = xc[(size_t)i * K + 16 * t + 4 * k + h];
              if (h % 2) s1[i] = fma(q, (float16)(xv), s1[i]);
              else s[i] = fma(q, (float16)(xv), s[i]);
#if R16K_MIN && MMAX > 4
              xs[i] += xv;
#endif
            }
          }
        }
      }
#if R16K_MIN
#if MMAX <= 4
      _Pragma("unroll") for (uint i = 0; i < MMAX; i++)
        if (i < M) xs[i] = r16k_sum16(xc + (size_t)i * K + 16 * t); /* uniform */
#endif
      _Pragma("unroll") for (uint i = 0; i < MMAX; i++) acc[i] = fma(a, s[i] + s1[i], fma(-b, (float16)(xs[i]), acc[i]));
#else
      _Pragma("unroll") for (uint i = 0; i < MMAX; i++) acc[i] = fma(a, s[i] + s1[i], acc[i]);
#endif
    }
  }
#endif
  _Pragma("unroll") for (uint i = 0; i < MMAX; i++)
    if (i < M) r16_store(acc[i], g, bias, b_off, has_bias, act, y, y_off + i * N, N);
}
#endif

/* out [K, N] f32 = the interleaved weight expanded and transposed, as the
 * blocks of 32's: work-item (g, c) writes sub-block c (of 16) of the 16
 * rows of group g.  global (N / 16 rounded up, K / 16). */
#if !CLF_ONLY || CLF_ONLY_expand_r16
__kernel void expand_r16(__global const uint *w, __global const half *wh, __global float *out, uint N, uint K) {
  const uint g = get_global_id(0), c = get_global_id(1), nb = K / 256;
  if (g * 16 >= N || c >= K / 16) return;
  const size_t base = ((size_t)g * nb + c / 16) * R16_WORDS;
  float16 a, b;
  r16k_scale(w, wh, base, c % 16, &a, &b);
  __global float *o = out + (size_t)c * 16 * N + g * 16;
  for (uint e = 0; e < 16; e++) r16_put(fma(a, r16k_q(w, base, 16 * (c % 16) + e), -b), g, N, o + (size_t)e * N);
}
#endif
#endif
#endif
