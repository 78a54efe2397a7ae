/* ops.h - the op layer: what the op families share with each other and
 * with the layers above, beyond the public ops.
 * Ops use the core only.
 */
#ifndef CLF_OPS_H
#define CLF_OPS_H

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the ops' scratch slots (core.h's clf__scratch) ---- */
enum {
  CLF__SCRATCH_ATTN = CLF__SCRATCH_FIRST, /* attention scores on the GEMM path (attention.c) */
  CLF__SCRATCH_PATCH,                     /* patch_embed's patches (patch.c) */
  CLF__SCRATCH_WEIGHT,                    /* a stored weight expanded to f32 for CLBlast (linear.c) */
  CLF__SCRATCH_XQ,                        /* x quantized to 8-bit blocks for the integer kernels (linear.c) */
  CLF__SCRATCH_OPS_END                    /* the first slot the ops leave free */
};
#ifdef __cplusplus
static_assert((int)CLF__SCRATCH_OPS_END <= (int)CLF__SCRATCH_COUNT, "the ops' scratch slots fit the context's");
#else
_Static_assert((int)CLF__SCRATCH_OPS_END <= (int)CLF__SCRATCH_COUNT, "the ops' scratch slots fit the context's");
#endif

/* ---- row gather (embed.c) ---- */
/* Row gather shared by clf_embedding and clf_gather_rows (movement.c):
 * out[b, y_row0 + k, :] = (accumulate ? out : 0) + scale *
 * (0 <= id < n_valid ? x[b, x_row0 + id, :] : 0), id = ids[b, k], for
 * `batches` batches of K ids (strides in elements).  Arguments already
 * checked by the caller. */
clf_status clf__embed_gather(clf_context *ctx, const clf_tensor *x, size_t x_bstride, size_t x_row0,
                             size_t n_valid, const clf_tensor *ids, size_t batches, size_t K, size_t D,
                             float scale, int accumulate, clf_tensor *out, size_t y_bstride, size_t y_row0,
                             cl_event *event);

/* ---- heads and columns (movement.c) ---- */
/* dst[r, col + c] = src[r, c]: the rows of src [.., n] into columns
 * [col, col + n) of the rows of dst [.., N], the same count of rows (a
 * linear layer stored in parts writing its columns of the fused output).
 * f32; one launch of the row copy.  CLF_E_SHAPE, naming op, otherwise.
 * (Not clEnqueueCopyBufferRect: Oclgrind 21.10's uninitialised-value
 * checker loses what a rectangle copy wrote.) */
clf_status clf__copy_cols(clf_context *ctx, const char *op, const clf_tensor *src, clf_tensor *dst, size_t col);
/* dst[r, c] = src[r, col + c]: the reverse of clf__copy_cols, columns
 * [col, col + n) of the rows of src [.., N] into the rows of dst [.., n]
 * (a fused projection's part taken out to be worked on alone). */
clf_status clf__take_cols(clf_context *ctx, const char *op, const clf_tensor *src, size_t col, clf_tensor *dst);

/* ---- attention (attention.c) ---- */
/* The variant name of the fused attention kernel for head dim dh, lq
 * queries (per KV head), lk keys and `banded` (a causal mask over several
 * queries, or a sliding window) on ctx's device ("attention.fused
 * HEAD_DIM=64 BQ=32 BK=32 WG=64"), or 0 when it does not apply.  Builds the
 * kernel: its work-group follows the kernel's limits on the device
 * (attention.c). */
int clf__attn_fused_variant(clf_context *ctx, size_t dh, size_t lq, size_t lk, int banded, char *buf, size_t len);

/* Self-attention straight from its projection proj [B, L, (H + 2 Hkv) Dh]
 * (the H query heads, then Hkv key and Hkv value heads, each Dh wide) into
 * out [B, L, H Dh], as clf_attention would on the split heads with kv_len 0
 * and impl CLF_ATTN_AUTO.  Only the CPU shape of the fused kernel reads
 * strided heads: elsewhere *done = 0 and nothing is enqueued, and the
 * caller splits the heads itself. */
clf_status clf__attention_proj(clf_context *ctx, const clf_tensor *proj, size_t H, size_t Hkv, size_t Dh,
                               const clf_attention_mask *mask, float scale, clf_tensor *out, int *done);

/* ---- paged KV cache (paged.c, kernels/paged.cl) ---- */
/* The rows of one step over a paged cache: arrays in one i64 tensor (the
 * step's single upload), at element offsets from the tensor's start.  Row
 * t (of T) is at absolute position pos[t] of sequence seq[t] (a row of the
 * block table [S, max_blocks]); its new key and value go to pool slot
 * slot[t] = block * `block` + offset.  The caller keeps slots and table
 * entries inside the pool (they are on the device, not checked here). */
typedef struct clf__paged_meta {
  const clf_tensor *meta;
  size_t pos, seq, slot, table;
  size_t T, S, max_blocks, block;
} clf__paged_meta;

/* clf_split_heads_rope into y, and (y2 non-NULL) the heads whose columns
 * follow y's in x into y2 (of y's Lcap and Dh), in one launch: a layer's
 * queries and keys. */
clf_status clf__split_heads_rope2(clf_context *ctx, const clf_tensor *x, size_t col_offset, size_t dst_pos,
                                  const clf_tensor *positions, const clf_tensor *inv_freq, float scale, clf_tensor *y,
                                  clf_tensor *y2, cl_event *event);
/* kpool[slot[t]][h] = ks[0, h, t, :] and vpool[slot[t]][h] =
 * proj[0, t, v_col + h Dh ..]: the step's keys ks [1, Hkv, T, Dh], split
 * and rotated, and its values where the projection proj [1, T, C] holds
 * them (Hkv Dh columns from v_col), into kpool, vpool [NB, Hkv, block,
 * Dh] (both f32 or both f16), in one launch. */
clf_status clf__kv_scatter(clf_context *ctx, const clf_tensor *ks, const clf_tensor *proj, size_t v_col,
                           const clf__paged_meta *pm, clf_tensor *kpool, clf_tensor *vpool);

/* out [1, T, H Dh] (heads merged) = softmax(cap(scale q k^T)) v for q
 * [1, H, T, Dh], each row over its sequence's positions 0..pos[t] (the
 * last `window` of them when window > 0) read through the block table
 * from the pools k, v [NB, Hkv, block, Dh]; query head h reads KV head
 * h / (H / Hkv).  cap(s) = softcap * tanh(s / softcap) where softcap > 0
 * (clf_attention_mask's softcap), else s. */
clf_status clf__paged_attention(clf_context *ctx, const clf_tensor *q, const clf_tensor *kpool,
                                const clf_tensor *vpool, const clf__paged_meta *pm, size_t window, float scale,
                                float softcap, clf_tensor *out);

/* ---- variants that need a device feature ---- */
/* The layer norm's work-group kernel and the row softmax with their
 * reductions through sub-groups (cl_khr_subgroups / cl_intel_subgroups):
 * whether ctx uses them (the device has sub-groups and the variant passed
 * self-validation, or is being validated). */
#define CLF__NORM_SG "norm.layer_norm_sg"
#define CLF__SOFTMAX_SG "elementwise.softmax_sg"
int clf__norm_sg(const clf_context *ctx);
int clf__softmax_sg(const clf_context *ctx);

/* ---- norms (norm.c) ---- */
/* clf_layer_norm (clf_rms_norm when rms, beta NULL) of x + (residual +
 * res_bias): res_bias [D] (may be NULL) is the bias of the layer that made
 * residual, added here as that layer would have (same rounding), so that
 * layer needs no pass of its own for it. */
clf_status clf__norm_res_bias(clf_context *ctx, const clf_tensor *x, const clf_tensor *residual,
                              const clf_tensor *res_bias, const clf_tensor *gamma, const clf_tensor *beta, float eps,
                              int rms, clf_tensor *sum_out, clf_tensor *y);

/* ---- linear layers off CLBlast's direct path (linear.c) ---- */
/* The most rows of x one launch of the matrix-vector kernel takes. */
#define CLF__SKINNY_MAX_M 8
/* The most rows x may have for the skinny path (launches of up to 8 rows
 * each) with weights of type wt ([N, K], or f32 [K, N] when in_out) on
 * ctx's device, from 8 up; past them, CLBlast.  From, in order:
 * $CLFORMER_SKINNY_ROWS (8 to 4096), the applied tuning profile's line
 * CLF__ROWS_TUNING ("Rows f32=48 f32_in_out=64 q8=96", keyed by
 * clf__skinny_rows_key: where `probe --tune` measured CLBlast overtaking
 * the skinny path on this device), the device class's default (CPU 64,
 * else 8).  *why (may be NULL) names which. */
#define CLF__ROWS_TUNING "Rows"
size_t clf__skinny_max_rows(const clf_context *ctx, clf_dtype wt, int in_out, const char **why);
const char *clf__skinny_rows_key(clf_dtype wt, int in_out);
/* The Rows value `probe --tune` keeps between the last row count `won` the
 * skinny path won, CLBlast's time there less the skinny path's being
 * `won_margin` (> 0), and the next it measured, `lost`, where CLBlast was
 * `lost_margin` (> 0) faster: where the two times, as straight lines
 * between the two points, cross (won when won_margin is not > 0). */
unsigned clf__rows_crossing(unsigned won, double won_margin, unsigned lost, double lost_margin);
/* Whether f32 weights that many rows at once multiply (encoders) are best
 * stored [in, out] on ctx's device: yes (CLBlast reads them in place and
 * skinny_t takes the few-row products), unless the applied profile
 * measured the skinny kernel on [out, in] outlasting CLBlast further than
 * skinny_t on [in, out] (its Rows f32 above its Rows f32_in_out): then
 * CLBlast is the slow path on that device and [out, in] keeps products on
 * the kernel that is not.  Intel's CPU runtime on AVX2 measures 192
 * against 16 rows: a 12-layer encoder of width 768 over 128 tokens took
 * 416 ms stored [out, in] against 1208 ms [in, out]; PoCL 48 against 96
 * (425 ms [in, out], 716 [out, in]). */
int clf__linear_prefers_in_out(const clf_context *ctx);
/* Sets ctx's measured rows of (wt, in_out) (NULL: the default again), as
 * the tuning search does while it times; 0 when out of memory. */
int clf__skinny_rows_tune(clf_context *ctx, clf_dtype wt, int in_out, const unsigned *rows);
/* Whether the skinny path takes an [M, K] product with [N, K] weights (any
 * type) in one launch of skinny_tile (register tiles, kernels/linear.cl)
 * rather than launches of up to CLF__SKINNY_MAX_M rows: on the CPU class,
 * for every M (one row in 1 x 4 tiles, more in 4 x 3, each output computed
 * alike, so that a row's result does not depend on its batch), where the
 * applied profile says "Tiles on=1" and not "Tiles off=1" (measured by
 * clf_tune_gemm on CPU-class devices, which writes one of the two: the
 * shipped PoCL AVX2 and Intel AVX2 profiles say on; rusticl's llvmpipe,
 * also a CPU, runs the tiles several times slower than the launches);
 * $CLFORMER_SKINNY_TILE "1" or "0" overrides the profile. */
#define CLF__TILES_TUNING "Tiles"
int clf__skinny_tiles(const clf_context *ctx, int in_out, size_t M);
/* Whether skinny_tile's one-row build leaves the activation to a bias_act
 * pass of its own (kernels/linear.cl, -DSKINNY_ACT_PASS): where the
 * applied profile's Tiles line says "act_pass=1" (measured by
 * clf_tune_gemm: the one-row products of the shapes, each build; Intel's
 * CPU runtime runs q8 and q4 1.4-1.6x faster so); $CLFORMER_SKINNY_ACT_PASS
 * "1" or "0" overrides the profile. */
int clf__skinny_act_pass(const clf_context *ctx);
/* Whether one row against weights of type wt takes skinny_pair (rows in
 * pairs, kernels/linear.cl) instead of skinny_tile's one-row build, where
 * the tiles run: for the 4-bit block types Q4_0 and Q4_1 (their nibbles
 * are what the one-row build spends its time on), unless the applied
 * profile's Tiles line says "pairs_off=1" (clf_tune_gemm times both on the
 * shapes' one-row Q4_0 products and writes "pair=1" or "pairs_off=1");
 * $CLFORMER_SKINNY_PAIR "1" or "0" overrides the profile.  The same bits
 * either way. */
int clf__skinny_pair(const clf_context *ctx, clf_dtype wt);
/* The integer path (issue 42): x quantized per block of 32 to int8 and
 * one f32 scale on the device (quantize_q8), then the weights' integers
 * times x's (skinny_int; skinny_idot through cl_khr_integer_dot_product),
 * for Q8_0, Q4_0 and Q4_1 weights at offset 0 of their buffer, 1 to
 * CLF__SKINNY_MAX_M rows.  It rounds x as ggml's Q8_1 activations are, so its results
 * differ from the float path's by that rounding (about 2^-8 of a block's
 * largest |x| an element).  Whether an [M, K] product takes it
 * (clf__skinny_int_wanted; *dot: the extension's build asked):
 * $CLFORMER_SKINNY_INT "0" (the float path), "1" (the portable build, 1
 * to 8 rows) or "dot" (the extension's build where it passed
 * self-validation, else the portable one); else the applied profile's
 * Tiles line: "int=R" the integer path up to R rows (where it was measured
 * faster), "int_dot=1" the extension's build; else the float path.
 * clf__skinny_int_variant names the variant of M rows ("linear.skinny_int
 * q4 MMAX=1 TN=4 TL=8", dot: "linear.skinny_idot ..."), 0 where it does not
 * apply (other types, M out of range, dot without the extension). */
int clf__skinny_int_wanted(const clf_context *ctx, size_t M, int *dot);
/* Whether a product of type wt over M rows takes the integer path (skinny_int
 * or skinny_kq): as clf__skinny_int_wanted where $CLFORMER_SKINNY_INT or
 * the profile's "int=R" says; else, on a CPU, Q5_0, Q5_1 and the k-quants
 * for up to 2 rows (measured: linear.c). */
int clf__int_default_wanted(const clf_context *ctx, clf_dtype wt, size_t M, int *dot);
/* The same rule for any type that takes the integer path by default: the
 * norm and glu ask it whether to write x's 8-bit blocks. */
int clf__int_rows_wanted(const clf_context *ctx, size_t M, int *dot);
/* skinny_int's and skinny_kq's MMAX for M rows (M rounded up to a power
 * of two, at most CLF__SKINNY_MAX_M) and rows of W a work-item by MMAX. */
size_t clf__int_mmax(size_t M);
size_t clf__int_tn(size_t mmax);
/* The caller promises that x's values do not change until
 * clf__linear_release_x (nor does its buffer go) except through an op
 * that says so (clf__linear_x_written: the norms), so that the integer
 * path quantizes x once for all the products that read it between the two
 * (q, k and v; gate and up) instead of once a product, or not at all
 * where the op that makes x made its blocks.  Up to 4 held at a time (a
 * layer's input, its MLP's glu), one copy of one of them kept; holding one
 * already held keeps its copy and returns 0, as does a fifth (not held:
 * its products quantize it each); 1: a new hold, which the caller
 * releases.  Products of
 * other activations in between are allowed (they quantize theirs as
 * before). */
int clf__linear_hold_x(clf_context *ctx, const clf_tensor *x);
void clf__linear_release_x(clf_context *ctx, const clf_tensor *x);
/* Whether a product of M rows over w may read x's 8-bit blocks (so that
 * holding x pays): a weight in the 16-row interleave where clf__r16_path
 * picks the integer kernel; any other weight (or none) yes, as its plan
 * may. */
int clf__linear_reads_blocks(clf_context *ctx, const clf_tensor *w, size_t M);
/* For an op that writes y (the norm before a projection, glu before
 * down_proj) in a kernel of its own that makes the blocks too (variant:
 * its self-validated name): *use 1 when y is the held x, its copy not
 * made yet, that variant not failed, and the integer path is wanted
 * for [M, K] (K a multiple of 32, M at most CLF__SKINNY_MAX_M) as it is for
 * the types that take it by default (clf__int_rows_wanted: on a CPU up to
 * 2 rows, the k-quants' and Q5_x's; a product on the float path next
 * ignores the blocks); then *xq
 * is the scratch to write x's 8-bit blocks into, as quantize_q8 does
 * (quants, then (d, sum) pairs from float *ds_off).  After the write,
 * clf__linear_x_written says whether the blocks were made (0: y changed
 * without them, so a copy held for y is stale). */
clf_status clf__linear_x_slot(clf_context *ctx, const char *variant, const clf_tensor *y, size_t M, size_t K,
                              cl_mem *xq, cl_uint *ds_off, int *use);
void clf__linear_x_written(clf_context *ctx, const clf_tensor *y, int quantized, size_t M, size_t K);
/* The variants that make those blocks (self-validated; where one failed,
 * the products quantize x themselves): the per-row norm, and glu. */
#define CLF__NORM_Q8 "norm.layer_norm_rows q8"
#define CLF__GLU_Q8 "elementwise.glu q8"
/* The held x's 8-bit copy [M, K] read back as floats (quant times its
 * block's scale) into out, for self-validation; CLF_E_INVALID_ARG when
 * no copy of x of that shape is held. */
clf_status clf__linear_x_blocks(clf_context *ctx, const clf_tensor *x, size_t M, size_t K, float *out);
int clf__skinny_int_variant(const clf_context *ctx, clf_dtype wt, size_t M, int dot, char *buf, size_t len);
/* Whether an [M, K] product with w (where the tiles run) launches
 * skinny_pair: one row, clf__skinny_pair for w's type, and w a buffer of
 * its own (offset 0: the kernel reads the blocks as words from its start).
 * What linear_tile launches and the profile's path line says. */
int clf__skinny_pair_runs(const clf_context *ctx, const clf_tensor *w, size_t M);
/* Whether an [M, K] product with weights of type wt ([N, K], or f32 [K, N]
 * when in_out) takes the skinny path (1 <= M <= clf__skinny_max_rows; for
 * [N, K], K a multiple of its chunk). */
int clf__skinny_fits(const clf_context *ctx, clf_dtype wt, int in_out, size_t M, size_t K);
/* The work-group shapes asked on ctx's device of the [N, K] kernel and of
 * the [K, N] one (within the device's limits; the built kernel may allow
 * less: clf__skinny_fit), and the variant name of either, in the shape it
 * runs ("linear.skinny q8 SPLIT=1 ROWS=4", "linear.skinny_t f32 COLS=16
 * KS=1"); 0 when buf is too short.  The [N, K] kernel's group comes from,
 * in order: $CLFORMER_SKINNY, the applied tuning profile's line
 * CLF__SKINNY_TUNING ("Skinny f32=1x16 q8=4x8": SPLIT x ROWS by weight
 * type name; core.h's clf__tuned_group), the device's default. */
void clf__skinny_shape(const clf_context *ctx, clf_dtype wt, size_t *split, size_t *rows);
#define CLF__SKINNY_TUNING "Skinny"
/* The tuned SPLIT x ROWS of weight type wt on ctx: 1 with group set, or 0
 * (the device's default); and setting it (group NULL: the default again),
 * as the tuning search does, 0 when out of memory. */
int clf__skinny_tuned(const clf_context *ctx, clf_dtype wt, unsigned group[2]);
int clf__skinny_tune(clf_context *ctx, clf_dtype wt, const unsigned group[2]);
void clf__skinny_t_shape(const clf_context *ctx, size_t *cols, size_t *ks);
int clf__skinny_variant(clf_context *ctx, clf_dtype wt, int in_out, int kind, char *buf, size_t len);
/* Kinds of the [N, K] kernel: as written; its K split reduced through
 * sub-groups ("linear.skinny_sg", where the device has them and SPLIT > 1);
 * f16 weights loaded as half vectors ("linear.skinny_h", where it has
 * cl_khr_fp16).  clf__skinny_variant answers 0 where a kind does not apply;
 * clf__skinny_kind is the kind ctx runs: the first of _h, _sg that applies
 * and passed self-validation (or is being validated), else the base. */
enum { CLF__SKINNY_BASE = 0, CLF__SKINNY_SG = 1, CLF__SKINNY_H = 2 };
int clf__skinny_kind(clf_context *ctx, clf_dtype wt, int in_out);
/* The group a skinny kernel runs in: the shape asked and the one the built
 * kernel allows. */
typedef struct clf__skinny_group {
  size_t want[2];    /* asked: SPLIT x ROWS or COLS x KS (clf__skinny_shape / _t_shape) */
  size_t want_limit; /* the work-items the kernel built in `want` allows (CL_KERNEL_WORK_GROUP_SIZE,
                        CL_KERNEL_LOCAL_MEM_SIZE) */
  size_t got[2];     /* used: want, halved (ROWS / KS first) and rebuilt until its kernel allows it */
  clf__kernel *kernel; /* built in `got` */
} clf__skinny_group;
/* Builds skinny of `kind` (w [N, K] of type wt) or skinny_t (in_out) for up to mmax
 * rows in the largest group, from the one asked, that the built kernel
 * allows; CLF_E_UNSUPPORTED when not even one work-item fits. */
clf_status clf__skinny_fit(clf_context *ctx, clf_dtype wt, int in_out, int kind, size_t mmax, clf__skinny_group *g);
/* y [M, N] = act(x [M, K] w^T + bias) with w [N, K] of any weight type,
 * or y = act(x w + bias) with w f32 [K, N] when in_out; arguments already
 * checked, clf__skinny_fits true. */
clf_status clf__linear_skinny(clf_context *ctx, const clf_tensor *x, const clf_tensor *w, int in_out,
                              const clf_tensor *bias, clf_activation act, clf_tensor *y, size_t M, size_t N, size_t K,
                              cl_event *event);
/* The same product through CLBlast (w not f32: expanded first, then read
 * as [in, out]), with bias and activation after it; arguments checked. */
clf_status clf__linear_gemm(clf_context *ctx, const clf_tensor *x, const clf_tensor *w, int in_out,
                            const clf_tensor *bias, clf_activation act, clf_tensor *y, size_t M, size_t N, size_t K,
                            cl_event *event);
/* The plan clf_linear runs for w of type wt (`aligned`: at offset 0 of its
 * buffer; the layout [in, out] when in_out) and x [M, K], N outputs: its
 * path (CLBlast, the skinny launches, skinny_tile or skinny_pair), the
 * activation in a pass of its own, the tile or the work-group and kernel
 * variant, made from the tuned work-groups, the self-validation verdicts
 * and ctx->env once per shape and kept in ctx (plan.c); op names the
 * caller in a failure. */
enum { CLF__LINEAR_GEMM = 0, CLF__LINEAR_SKINNY, CLF__LINEAR_TILE, CLF__LINEAR_PAIR, CLF__LINEAR_INT,
       CLF__LINEAR_INTK, CLF__LINEAR_R16 }; /* .path (R16: a weight in the 16-row interleave, .kind clf__r16_path's) */
clf_status clf__linear_plan(clf_context *ctx, const char *op, clf_dtype wt, int in_out, int aligned, size_t M,
                            size_t K, size_t N, clf__plan *out);
/* The integer path for ggml's k-quants Q4_K, Q5_K, Q6_K (linear_kq.c,
 * kernels/linear.cl's skinny_kq and skinny_kqdot), over the same 8-bit
 * blocks of x as skinny_int, taken where it would be
 * (clf__int_default_wanted: as skinny_int's, and by default on a CPU for
 * up to 2 rows): clf__kq_type says which types;
 * clf__skinny_kq_variant names the variant of M rows ("linear.skinny_kq
 * q4k MMAX=1 TN=4 TL=8", dot: "linear.skinny_kqdot ..."), 0 where it does
 * not apply; clf__kq_kind is the build an [M, K] product runs (1 the
 * extension's, 0 the portable one, -1 the float path), chosen as
 * skinny_int's; clf__kq_plan fills a plan for it (path CLF__LINEAR_INTK)
 * and clf__run_kq runs it.  linear.c lends them the build options of a
 * weight type and x's blocks in the scratch slot (clf__linear_x_q8:
 * quantize_q8 launched unless the held x's copy is there). */
int clf__kq_type(clf_dtype wt);
int clf__skinny_kq_variant(const clf_context *ctx, clf_dtype wt, size_t M, int dot, char *buf, size_t len);
int clf__kq_kind(clf_context *ctx, clf_dtype wt, int in_out, int aligned, size_t M, size_t K);
void clf__kq_plan(size_t M, int kind, int act_pass, clf__plan *p);
clf_status clf__run_kq(clf_context *ctx, const clf__plan *p, const clf_tensor *x, const clf_tensor *w,
                       const clf_tensor *bias, clf_activation act, clf_tensor *y, size_t M, size_t N, size_t K,
                       cl_event *event);
void clf__linear_type_opts(clf_dtype dt, char *buf, size_t len);
/* Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K and Q6_K weights in the 16-row
 * interleave (linear_r16.c): whether a loader should repack a [rows, in]
 * linear weight of type dt for ctx ($CLFORMER_ROWS16, else on a CPU
 * device; in a multiple of the type's block, Q4_K and
 * Q6_K's 256; any rows, the last group padded with zero rows); the bytes
 * of the repacked weight (the padding included); the repacking of GGUF's
 * blocks into it (out clf__r16_bytes long) and back (blocks as long as the
 * rows'); a tensor of such bytes (its shape [rows, in], its buffer the
 * padded size, r16 set);
 * the rows a launch of M rows takes (clf__r16_mmax: up to 8, the float
 * path's 16 past 8 where the CPU's compiler asks for explicit vectors);
 * the variant name of M rows ("linear.skinny_r16 q4_1 MMAX=1 TL=8", exact:
 * "linear.skinny_r16f ..."; 0 past that launch's rows or for another type,
 * and for the integer kernel's other than Q4_1 and Q8_0);
 * and clf_linear's product over such a weight (w->r16) on the path
 * clf__r16_path picked (its plan's kind). */
int clf__r16_wanted(const clf_context *ctx, clf_dtype dt, size_t rows, size_t in);
size_t clf__r16_bytes(clf_dtype dt, size_t rows, size_t in);
void clf__r16_pack(clf_dtype dt, const unsigned char *blocks, size_t rows, size_t in, unsigned char *out);
void clf__r16_unpack(clf_dtype dt, const unsigned char *in16, size_t rows, size_t in, unsigned char *blocks);
/* Q8_0 / Q4_0 in clformer's split layout (every block's quants, then every
 * scale) back in ggml's blocks ({d; qs} each), for the interleave. */
void clf__unsplit_blocks(clf_dtype dt, const unsigned char *split, size_t blocks, unsigned char *out);
clf_status clf__r16_tensor(clf_context *ctx, clf_dtype dt, size_t rows, size_t in, const unsigned char *packed,
                           clf_tensor **out);
size_t clf__r16_mmax(const clf_context *ctx, size_t M, int exact);
/* Builds (or loads from the disk cache) skinny_r16f's program for M rows
 * over type dt ahead of its first product: a decoder's one-row variants
 * at load, where loading each took 22-34 ms on PoCL in the middle of the
 * first decoded tokens.  A failure is left for the product to report. */
void clf__r16_prepare(clf_context *ctx, clf_dtype dt, size_t M);
int clf__r16_variant(const clf_context *ctx, clf_dtype dt, size_t M, int exact, char *buf, size_t len);
clf_status clf__r16_linear(clf_context *ctx, const clf_tensor *x, const clf_tensor *w, const clf_tensor *bias,
                           clf_activation act, clf_tensor *y, size_t M, size_t N, size_t K, int path,
                           cl_event *event);
/* The path M rows take over such a weight of type dt: skinny_r16
 * (integer, over x's 8-bit blocks) where the integer path is asked for
 * (clf__skinny_int_wanted: $CLFORMER_SKINNY_INT, the profile's int=R),
 * else skinny_r16f (the float path, in launches of up to
 * CLF__SKINNY_MAX_M rows): on a CPU at every row count unless
 * $CLFORMER_SKINNY_ROWS caps it, elsewhere up to the skinny path's most
 * rows; past that expand_r16 and CLBlast; a variant that failed
 * self-validation is passed over. */
enum { CLF__R16_INT, CLF__R16_FLOAT, CLF__R16_GEMM };
int clf__r16_path(clf_context *ctx, clf_dtype dt, size_t M);
clf_status clf__linear_x_q8(clf_context *ctx, const clf_tensor *x, size_t M, size_t K, cl_mem *xq, cl_uint *ds_off);
/* The checks the dense ops share: act a clf_activation; bias NULL or f32
 * [D]. */
clf_status clf__check_act(clf_context *ctx, const char *op, clf_activation act);
clf_status clf__check_bias(clf_context *ctx, const char *op, const clf_tensor *bias, size_t D);
/* Honours `event` (a marker) when an op has nothing to enqueue. */
clf_status clf__nothing(clf_context *ctx, const char *op, cl_event *event);
/* y = act(x + bias) over x's last dim (bias may be NULL; y may be x), the
 * pass clf_bias_act launches; arguments checked. */
clf_status clf__bias_act(clf_context *ctx, const clf_tensor *x, const clf_tensor *bias, clf_activation act,
                         clf_tensor *y, cl_event *event);
/* w [N, K] (f16 or a block type) expanded to f32 [K, N] (transposed) in
 * the context's weight scratch buffer, returned in *out (valid until the
 * next expansion). */
clf_status clf__linear_expand(clf_context *ctx, const clf_tensor *w, cl_mem *out);

#ifdef __cplusplus
}
#endif

#endif /* CLF_OPS_H */
