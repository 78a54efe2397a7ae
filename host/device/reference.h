/* reference.h - CPU references of the ops, in double, short and plain.
 *
 * Self-validation (validate.c) compares each kernel variant with these, and
 * the op tests use the same functions where their reference is the same
 * math.  Inputs are the f32 data given to the device; outputs are double.
 * All buffers are the caller's, dense and row-major.
 */
#ifndef CLF_DEVICE_REFERENCE_H
#define CLF_DEVICE_REFERENCE_H

#include "clformer.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* s = x + r; y = (s - mean(s)) / sqrt(var(s) + eps) * g + b over rows of D.
 * r and b may be NULL (zero), sum may be NULL (not wanted). */
void clf__ref_layer_norm(const float *x, const float *r, const float *g, const float *b, double eps, size_t rows,
                         size_t D, double *sum, double *y);

/* s = x + r; y = s / sqrt(mean(s^2) + eps) * g over rows of D (RMS norm).
 * r may be NULL (zero), sum may be NULL (not wanted). */
void clf__ref_rms_norm(const float *x, const float *r, const float *g, double eps, size_t rows, size_t D, double *sum,
                       double *y);

/* Head split with rotary embeddings (clf_split_heads_rope): x [B, L, C],
 * head h of row (b, l) at column col + h*Dh; pos [B, L]; the angle
 * pos * inv_freq[j] rounded to f32 (as torch forms it), its cos and sin in
 * double, times scale; y [B, H, Lcap, Dh] rows dst..dst+L-1 written.  The
 * first 2 * half of each head rotated (inv_freq [half], half <= Dh / 2),
 * the rest copied. */
void clf__ref_rope_split(const float *x, size_t B, size_t L, size_t C, size_t col, const int64_t *pos,
                         const float *inv_freq, size_t half, double scale, size_t H, size_t Lcap, size_t Dh,
                         size_t dst, double *y);

/* y = softmax(scale * x) over rows of D; a row that is all -inf gives 0. */
void clf__ref_softmax(const float *x, size_t rows, size_t D, double scale, double *y);

/* One activation of x (CLF_ACT_NONE: x). */
double clf__ref_act(clf_activation act, double x);

/* C_z = alpha op(A_z) op(B_z) + beta C0_z for z < batch: op(A) [M, K] with A_z
 * M*K apart, op(B) [K, N] with B_z b_stride apart (0: shared), C [M, N];
 * ta/tb: A is [K, M] / B is [N, K].  beta 0 ignores C0 (as BLAS does). */
void clf__ref_gemm(int ta, int tb, size_t batch, size_t M, size_t N, size_t K, double alpha, const float *A,
                   const float *B, size_t b_stride, double beta, const float *C0, double *C);

/* Scaled dot-product attention with masks.  q [B, H, Lq, Dh]; k and v
 * [B, Hkv, Lcap, Dh] of which the first Lk rows are keys.  A key is dropped
 * when keep[b * Lk + j] is 0, when causal and j > i + Lk - Lq, when outside
 * the window, or when its score is -inf; a query with no key left gives 0. */
typedef struct clf__ref_attn {
  size_t B, H, Lq, Lk, Lcap, Dh;
  double scale;
  int causal;
  const int32_t *keep;       /* [B, Lk], or NULL: every key */
  const float *bias;         /* [n_win, bias_heads, Lq, Lk] added to the scores, or NULL */
  size_t n_win, bias_heads;  /* n_win divides B (batch b uses b % n_win); bias_heads 1 or H */
  int merged;                /* out [B, Lq, H * Dh] instead of [B, H, Lq, Dh] */
  size_t Hkv;                /* KV heads of k and v (0: H); query head h reads h / (H / Hkv) */
  size_t window;             /* > 0: also drop keys j <= i + Lk - Lq - window */
  double softcap;            /* > 0: each scaled score s made softcap * tanh(s / softcap), before the bias */
} clf__ref_attn;
void clf__ref_attention(const clf__ref_attn *a, const float *q, const float *k, const float *v, double *out);

/* y = x with its dims permuted: y's dim i is x's dim perm[i]; x has n dims
 * xs, elements of es bytes (copied, not converted). */
void clf__ref_permute(const void *x, const size_t *xs, int n, const int *perm, size_t es, void *y);

/* y = a + b with b broadcast against a (numpy rules, b no longer than a). */
void clf__ref_add(const float *a, int na, const size_t *as, const float *b, int nb, const size_t *bs, double *y);

/* out[i] = (out0 ? out0[i] : 0) + scale * table[ids[i]] over rows of D; an
 * id outside [0, V) adds nothing. */
void clf__ref_embedding(const float *table, size_t V, size_t D, const int64_t *ids, size_t n, double scale,
                        const float *out0, double *out);

/* x [rows, K] (K a multiple of 32) as the integer kernels see it: per
 * block of 32, d = max|x| / 127 and q = x * (1 / d) rounded to nearest
 * even, in f32 as kernels/linear.cl's quantize_q8 computes them (so that
 * only the product is judged); xq = d * q, exactly (in double). */
void clf__ref_quantize_q8(const float *x, size_t rows, size_t K, double *xq);

/* ggml's 32-element blocks with a min or fifth bits (Q4_1, Q5_0, Q5_1:
 * dt) decoded to f32 as ggml-common.h defines them: element j of a block
 * is q = nibble j % 16 of qs (low for j < 16) with, for Q5_x, bit j of qh
 * as its bit 4; then d q + m (Q4_1, Q5_1) or d (q - 16) (Q5_0).  The
 * integer path's self-validation decodes its weights with this, in the
 * device layer, apart from the io layer's GGUF reader. */
void clf__ref_dequantize_ggml32(clf_dtype dt, const unsigned char *blocks, size_t numel, float *out);

/* ggml's k-quant blocks (dt CLF_Q2_K to CLF_Q6_K, as a GGUF file stores
 * them: ggml-common.h) decoded to out [numel], each element d sc q - dmin
 * m (Q2_K, Q4_K, Q5_K), d sc q with q signed (Q3_K: -4..3, Q6_K: -32..31),
 * in double from the block's fields; 0 for another type. */
int clf__ref_dequant_k(clf_dtype dt, const unsigned char *blocks, size_t numel, double *out);

/* Seeded blocks of one of those types (K a multiple of 256) of N x K
 * elements into out (clf__dtype_bytes of them): random bytes with
 * moderate f16 scales (weights within about 6), one block's d in five
 * subnormal (validate.c; the tests use them too). */
void clf__kq_blocks(clf_dtype dt, size_t N, size_t K, uint32_t seed, unsigned char *out);

/* dst[i] = (float)src[i], for callers that compare in f32. */
void clf__ref_to_f32(const double *src, size_t n, float *dst);

#ifdef __cplusplus
}
#endif

#endif /* CLF_DEVICE_REFERENCE_H */
