/* linear.c - the linear layers that do not go straight to CLBlast: the
 * skinny path of kernels/linear.cl (launches of up to 8 rows of the
 * matrix-vector kernels; on a CPU whose profile says so, every product in
 * one launch of skinny_tile), and weights stored as f16 / Q8_0 / Q4_0 expanded to f32
 * for CLBlast when x has more rows than the skinny path takes; and
 * clf_linear, which checks its arguments and runs the plan made once for
 * its shape (the path, tile and work-group: clf__linear_plan).
 */
#include "ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* kernels/linear.cl's options for weights of type dt, all from
 * CLF_DTYPE_MAP: WTYPE (the type's constant), GB and GBYTES (elements and
 * bytes a block), then every type's constant (-DWT_Q4_K=9 ...) for the
 * kernel to compare WTYPE with. */
#define LINEAR_WT_NAME(NAME, value, name, wname, ggml, block, bytes, wtype, flags) " -DWT_" #NAME "=" #wtype
static const char linear_wt_names[] = CLF_DTYPE_MAP(LINEAR_WT_NAME);
#define LINEAR_WT_CASE(NAME, value, name, wname, ggml, block, bytes, wtype, flags) \
  case CLF_##NAME:                                                                   \
    return "-DWTYPE=" #wtype " -DGB=" #block " -DGBYTES=" #bytes;
static const char *linear_wtype(clf_dtype dt) {
  switch (dt) { CLF_DTYPE_MAP(LINEAR_WT_CASE) }
  return "";
}
#undef LINEAR_WT_NAME
#undef LINEAR_WT_CASE

/* The scales' offset in halves within a block-type weight's buffer (after
 * the quants; 0 for f32 / f16 and ggml's blocks, whose scales the kernels
 * read inside each block through the same buffer). */
static cl_uint scales_off(const clf_tensor *w) {
  const size_t numel = w->shape[0] * w->shape[1];
  return w->dtype == CLF_Q8_0 ? (cl_uint)(numel / 2) : w->dtype == CLF_Q4_0 ? (cl_uint)(numel / 4) : 0;
}

/* Weights per chunk of the kernels (their CH). */
static size_t linear_chunk(clf_dtype dt) { return clf__dtype_is_block(dt) ? CLF__QBLOCK : 8; }

/* A work-group shape (a, b): the default given, or the environment's
 * override `env` ("AxB", powers of two, read with the context; {0, 0}:
 * none), then halved (b first) to fit the device: its work-group limit, and
 * its local memory at `item` bytes of reduction space per work-item (0:
 * none).  The built kernel may allow fewer work-items still: skinny_fit. */
static void group_shape(const clf_context *ctx, const unsigned env[2], size_t a, size_t b, size_t item,
                        size_t *out_a, size_t *out_b) {
  const size_t wg = ctx->caps.max_wg, items = item ? (size_t)(ctx->caps.local_mem / item) : wg;
  const size_t most = wg < items ? wg : items;
  if (env[0] && env[1]) a = env[0], b = env[1];
  while (a * b > most && b > 1) b /= 2;
  while (a * b > most && a > 1) a /= 2;
  *out_a = a;
  *out_b = b;
}

/* The skinny kernel's work-group: SPLIT work-items share a row's K, ROWS
 * rows per group.  On a CPU a work-group is a loop on one core: one
 * work-item per row streams it (SPLIT 1) and ROWS rows amortise the group;
 * on a GPU a warp-sized split reads coalesced chunks.  The applied tuning
 * profile's "Skinny" line (probe --tune) replaces these defaults, and
 * $CLFORMER_SKINNY ("SPLITxROWS", powers of two) overrides both. */
void clf__skinny_shape(const clf_context *ctx, clf_dtype wt, size_t *split, size_t *rows) {
  /* PoCL on a 2-core Zen 5 (GPT-2's 50257 x 768 head, M = 1): f32 and f16
   * best at 1 x 8-16, Q8_0 / Q4_0 at 4 x 8 (their conversions then spread
   * over the lanes PoCL vectorises).  ggml's blocks, whose decoding is the
   * work, at 1 x 16: SmolLM2-135M Q4_1 decoding, device ms a token, PoCL
   * 19.3 (4 x 8: 25.8, 8 x 4: 30.2), Intel's runtime 18.2 (4 x 8: 19.8). */
  const int block = wt == CLF_Q8_0 || wt == CLF_Q4_0;
  size_t s = ctx->caps.is_cpu ? (block ? 4 : 1) : 32, r = ctx->caps.is_cpu ? (block ? 8 : 16) : 4;
  unsigned tuned[2];
  if (clf__skinny_tuned(ctx, wt, tuned) && tuned[1]) /* the applied profile's (probe --tune) */
    s = tuned[0], r = tuned[1];
  group_shape(ctx, ctx->env.skinny, s, r, sizeof(float), split, rows); /* red[ROWS][SPLIT] */
}

int clf__skinny_tuned(const clf_context *ctx, clf_dtype wt, unsigned group[2]) {
  return clf__tuned_group(ctx, CLF__SKINNY_TUNING, clf__weight_type_name(wt), group);
}

int clf__skinny_tune(clf_context *ctx, clf_dtype wt, const unsigned group[2]) {
  return clf__tuned_group_set(ctx, CLF__SKINNY_TUNING, clf__weight_type_name(wt), group);
}

const char *clf__skinny_rows_key(clf_dtype wt, int in_out) {
  return in_out ? "f32_in_out" : clf__weight_type_name(wt);
}

/* Where no measurement says otherwise: on PoCL (2-core Zen 5, the shipped
 * AVX2 profile) GPT-2 124M's forward pass over 16 tokens took 176-198 ms
 * in launches of 8 rows against 591-639 ms in CLBlast (its direct kernel
 * at about 6 GFLOP/s there), over 64 tokens 444-470 against 498 ms; a
 * GPU's GEMM is far ahead past 8 rows.  A device measured by `probe
 * --tune` carries its own crossover per weight type and layout. */
size_t clf__skinny_max_rows(const clf_context *ctx, clf_dtype wt, int in_out, const char **why) {
  size_t rows = ctx->caps.is_cpu ? 64 : CLF__SKINNY_MAX_M;
  const char *from = ctx->caps.is_cpu ? "the CPU default" : "the default";
  unsigned tuned[2];
  if (clf__tuned_group(ctx, CLF__ROWS_TUNING, clf__skinny_rows_key(wt, in_out), tuned) && !tuned[1] &&
      tuned[0] >= CLF__SKINNY_MAX_M)
    rows = tuned[0], from = "measured: the profile's " CLF__ROWS_TUNING " line";
  if (ctx->env.skinny_rows) rows = ctx->env.skinny_rows, from = "$CLFORMER_SKINNY_ROWS";
  if (why) *why = from;
  return rows;
}

unsigned clf__rows_crossing(unsigned won, double won_margin, unsigned lost, double lost_margin) {
  if (!(won_margin > 0) || !(lost_margin > 0) || lost <= won) return won;
  return won + (unsigned)((double)(lost - won) * won_margin / (won_margin + lost_margin));
}

int clf__linear_prefers_in_out(const clf_context *ctx) {
  unsigned oi[2], io[2];
  const int measured = clf__tuned_group(ctx, CLF__ROWS_TUNING, clf__skinny_rows_key(CLF_F32, 0), oi) && !oi[1] &&
                       clf__tuned_group(ctx, CLF__ROWS_TUNING, clf__skinny_rows_key(CLF_F32, 1), io) && !io[1];
  return !(measured && oi[0] > io[0]);
}

int clf__skinny_rows_tune(clf_context *ctx, clf_dtype wt, int in_out, const unsigned *rows) {
  const unsigned v[2] = {rows ? *rows : 0, 0};
  return clf__tuned_group_set(ctx, CLF__ROWS_TUNING, clf__skinny_rows_key(wt, in_out), rows ? v : NULL);
}

int clf__skinny_fits(const clf_context *ctx, clf_dtype wt, int in_out, size_t M, size_t K) {
  if (M < 1 || M > clf__skinny_max_rows(ctx, wt, in_out, NULL)) return 0;
  return in_out ? wt == CLF_F32 : K % linear_chunk(wt) == 0;
}

/* The [in, out] kernel's work-group: COLS work-items of 8 columns each,
 * KS of them sharing K.  A CPU runs a group as a loop on one core: KS 1,
 * and 16 strips (128 columns, 512 bytes of each weight row) per group; a
 * GPU splits K 8 ways over 256 columns.  $CLFORMER_SKINNY_T ("COLSxKS",
 * powers of two) overrides. */
void clf__skinny_t_shape(const clf_context *ctx, size_t *cols, size_t *ks) {
  group_shape(ctx, ctx->env.skinny_t, ctx->caps.is_cpu ? 16 : 32, ctx->caps.is_cpu ? 1 : 8, 8 * sizeof(float), cols,
              ks); /* red[KS][COLS] of float8 */
}

/* The kernels of the [N, K] product by variant kind (clf__skinny_kind),
 * with the options that build them. */
static const char *const skinny_kernels[] = {"skinny", "skinny_sg", "skinny_h"};
static const char *const skinny_kind_opts[] = {"", " -DCLF_USE_SUBGROUPS=1", " -DCLF_USE_FP16=1"};
static const char *const skinny_prefixes[] = {"linear.skinny", "linear.skinny_sg", "linear.skinny_h"};

/* The options of skinny (or skinny_t) of `kind` in an a x b group for up
 * to mmax rows of x. */
static void skinny_options(clf_dtype wt, int in_out, int kind, size_t a, size_t b, size_t mmax, char *buf,
                           size_t len) {
  if (in_out)
    snprintf(buf, len, "%s%s -DCOLS=%zu -DKS=%zu -DMMAX=%zu", linear_wtype(CLF_F32), linear_wt_names, a, b, mmax);
  else
    snprintf(buf, len, "%s%s -DSPLIT=%zu -DROWS=%zu -DMMAX=%zu%s", linear_wtype(wt), linear_wt_names, a, b, mmax,
             skinny_kind_opts[kind]);
}

clf_status clf__skinny_fit(clf_context *ctx, clf_dtype wt, int in_out, int kind, size_t mmax, clf__skinny_group *g) {
  if (in_out) clf__skinny_t_shape(ctx, &g->want[0], &g->want[1]);
  else clf__skinny_shape(ctx, wt, &g->want[0], &g->want[1]);
  size_t a = g->want[0], b = g->want[1];
  if (in_out) kind = CLF__SKINNY_BASE;
  const char *kname = in_out ? "skinny_t" : skinny_kernels[kind];
  g->kernel = NULL;
  g->want_limit = 0;
  /* The group is fixed at compile time (reqd_work_group_size), and what a
   * driver allows is known only once the kernel is built: build, ask, and
   * rebuild smaller while the kernel says no (rusticl allows 32 work-items
   * for every kernel although its device says 1024; it also counts twice
   * the local memory the kernel declares). */
  if (ctx->caps.max_item_sizes[0] && ctx->caps.max_item_sizes[1]) {
    while (a > ctx->caps.max_item_sizes[0] && a > 1) a /= 2;
    while (b > ctx->caps.max_item_sizes[1] && b > 1) b /= 2;
  }
  for (int first = 1;; first = 0) {
    char opts[512];
    clf__kernel *k;
    skinny_options(wt, in_out, kind, a, b, mmax, opts, sizeof opts);
    clf_status st = clf__get_kernel(ctx, "linear", opts, kname, &k);
    if (st != CLF_OK) return st;
    size_t most = k->max_wg; /* CL_KERNEL_WORK_GROUP_SIZE, within the context's limit */
    if (k->local_mem > ctx->caps.local_mem) { /* the items whose memory, as the driver counts it, fits */
      const size_t fit = (size_t)((double)(a * b) * (double)ctx->caps.local_mem / (double)k->local_mem);
      if (fit < most) most = fit;
    }
    if (first) g->want_limit = most;
    if (a * b <= most) {
      g->got[0] = a, g->got[1] = b;
      g->kernel = k;
      return CLF_OK;
    }
    if (a * b == 1)
      return clf__fail(ctx, CLF_E_UNSUPPORTED,
                       "kernel %s: the device allows no work-group of it, not even one work-item "
                       "(CL_KERNEL_WORK_GROUP_SIZE %zu, local memory %lu of %lu bytes)",
                       kname, k->max_wg, (unsigned long)k->local_mem, (unsigned long)ctx->caps.local_mem);
    while (a * b > most && b > 1) b /= 2;
    while (a * b > most && a > 1) a /= 2;
  }
}

int clf__skinny_variant(clf_context *ctx, clf_dtype wt, int in_out, int kind, char *buf, size_t len) {
  if (kind == CLF__SKINNY_H && (in_out || wt != CLF_F16 || !ctx->caps.has_fp16)) return 0;
  clf__skinny_group g;
  if (clf__skinny_fit(ctx, wt, in_out, CLF__SKINNY_BASE, CLF__SKINNY_MAX_M, &g) != CLF_OK) {
    /* named as asked all the same: validating it runs clf_linear, which
     * reports the failure */
    g.got[0] = g.want[0], g.got[1] = g.want[1];
  }
  /* sub-groups reduce the K split: none with one work-item per row */
  if (kind == CLF__SKINNY_SG && (in_out || !ctx->caps.has_subgroups || g.got[0] < 2)) return 0;
  if (in_out) return snprintf(buf, len, "linear.skinny_t f32 COLS=%zu KS=%zu", g.got[0], g.got[1]) < (int)len;
  return snprintf(buf, len, "%s %s SPLIT=%zu ROWS=%zu", skinny_prefixes[kind], clf__weight_type_name(wt), g.got[0],
                  g.got[1]) < (int)len;
}

int clf__skinny_kind(clf_context *ctx, clf_dtype wt, int in_out) {
  static const int order[] = {CLF__SKINNY_H, CLF__SKINNY_SG}; /* the first that passed */
  if (in_out || !(ctx->caps.has_subgroups || (ctx->caps.has_fp16 && wt == CLF_F16))) return CLF__SKINNY_BASE;
  for (size_t i = 0; i < CLF__ARRAY_LEN(order); i++) {
    char name[96];
    if (clf__skinny_variant(ctx, wt, 0, order[i], name, sizeof name) && clf__variant_passed(ctx, name))
      return order[i];
  }
  return CLF__SKINNY_BASE;
}

/* skinny_tile's register tile (TM rows of x by TN rows of W) and group (TL
 * row blocks): 4 x 3 float8 accumulators fill AVX2's 16 registers.  PoCL,
 * 2-core Zen 5, f32, in GFLOP/s: 64 x 768 by 3072 x 768 4x3 99, 2x5 80, 5x2
 * 77, 4x2 69; 197 x 768 by 3072 x 768 4x3 98 (CLBlast's tuned GEMM 42). */
enum { TILE_M = 4, TILE_N = 3, TILE_L = 4 };
/* One row (decoding): f32 in 1 x 4 tiles, 8 work-items a group over
 * consecutive weight rows (dimension 0); f16 in 1 x 8 (below); the other
 * types 1 x 1, 16 a group (PoCL then vectorises the conversions across
 * work-items), Q4_0 and Q4_1 in skinny_pair's (clf__skinny_pair).  Each output's
 * arithmetic is the same as in the 4 x 3 tiles (the same fma chain over K,
 * the same final sum), so a row's result does not depend on how many rows
 * share its launch: one image classified alone equals it classified in a
 * batch.  PoCL, one row times GPT-2's head (50257 x 768), ms: f32 1x4x8
 * 8.1-10.0, 1x1x16 12.5, the skinny kernel 10.2-13.0; q8 1x1x16 5.2, 1x4x8
 * 7.4-8.6, skinny (1x4 group) 5.5; f16 1x1x16 7.1, 1x4x8 8.4-10.1, skinny
 * 5.3 (f32 3072 x 768: 1x4x8 0.16-0.25, skinny 0.44). */
enum { TILE1_N = 4, TILE1_L = 8 };
/* f16, one row: 1 x 8 tiles, 8 work-items a group.  GPT-2 f16 decode,
 * device ms a token (generate --profile, three alternated runs each), the
 * 1 x 1 x 16 of the block types against 1 x 8 x 8: Intel's runtime
 * 18.3-19.3 / 15.1-17.0, PoCL 18.6-19.3 / 15.7-16.0 (1 x 4 x 4: 16.8-17.7
 * and 15.8-17.0). */
enum { TILE1H_N = 8, TILE1H_L = 8 };

int clf__skinny_tiles(const clf_context *ctx, int in_out, size_t M) {
  if (!ctx->caps.is_cpu || in_out || M < 1) return 0;
  if (ctx->env.skinny_tile >= 0) return ctx->env.skinny_tile;
  unsigned v[2];
  if (clf__tuned_group(ctx, CLF__TILES_TUNING, "off", v)) return 0;
  return clf__tuned_group(ctx, CLF__TILES_TUNING, "on", v) && !v[1] && v[0] == 1;
}

int clf__skinny_act_pass(const clf_context *ctx) {
  if (ctx->env.skinny_act_pass >= 0) return ctx->env.skinny_act_pass;
  unsigned v[2];
  return clf__tuned_group(ctx, CLF__TILES_TUNING, "act_pass", v) && !v[1] && v[0] == 1;
}

int clf__skinny_pair(const clf_context *ctx, clf_dtype wt) {
  if (wt != CLF_Q4_0 && wt != CLF_Q4_1) return 0;
  if (ctx->env.skinny_pair >= 0) return ctx->env.skinny_pair;
  unsigned v[2];
  return !clf__tuned_group(ctx, CLF__TILES_TUNING, "pairs_off", v);
}

int clf__skinny_pair_runs(const clf_context *ctx, const clf_tensor *w, size_t M) {
  return M == 1 && w->offset == 0 && clf__skinny_pair(ctx, w->dtype);
}

/* skinny_pair's rows a work-item (in pairs) and group: 4 rows, one work-
 * item a group.  GPT-2 q4 decode, device ms a token (generate --profile),
 * skinny_tile's 1 x 1 x 16 against pairs 4 x 1, 4 x 4, 8 x 1: Intel's runtime
 * 11.5 / 8.5, 8.6, 8.9; PoCL 13.9 / 10.7, 10.9, 11.2. */
enum { PAIR_N = 4, PAIR_L = 1 };

/* ------------------------------------------------------------------------ */
/* The integer path: x quantized to 8-bit blocks, integer products
 * (kernels/linear.cl's quantize_q8 and skinny_int / skinny_idot) */

/* skinny_int's rows of W a work-item by MMAX (the rows of x, rounded up to
 * a power of two), and work-items a group.  One row: 4 rows of W, 8
 * work-items a group (Intel's runtime, one row of Q4_1 3072 x 576 and Q8_0
 * 49152 x 576: 8 a group 0.09 and 1.9 ms against 1 a group 0.08 and 1.7,
 * within the noise of a loaded machine; PoCL alike; 8 rows of W a
 * work-item no faster).  More rows of x hold more accumulators (a float8
 * each in the portable build), so fewer rows of W: with 4 rows of x and
 * one row of W a work-item, PoCL spent 1.5 ms on 3072 x 768 in 3072
 * one-item groups. */
size_t clf__int_tn(size_t mmax) { return mmax <= 2 ? 4 : mmax == 4 ? 2 : 1; }
enum { INT_TL = 8 };

size_t clf__int_mmax(size_t M) {
  size_t mmax = 1;
  while (mmax < M && mmax < CLF__SKINNY_MAX_M) mmax *= 2;
  return mmax;
}

/* The portable build's lanes: 8 (products added pairwise, as pmaddwd
 * adds them) unless the profile's Tiles line says "int_lanes=16" (each
 * product in its own int lane, a block's two halves added: 16 lanes).
 * The compilers differ: PoCL 3.1 (LLVM 15, skylake-avx512) makes of the
 * pairs a 32-bit-lane pmaddwd and two shuffles, and of the 16 lanes
 * two pmaddwd and an add; Intel's runtime makes of the pairs a pmaddwd on
 * 16-bit lanes, and of the 16 lanes 32-bit multiplies.  One row of Q4_1
 * 3072 x 576 against the float path, CPU time (docs/performance.md):
 * PoCL 1.08x with 8 lanes, 1.17x with 16; Intel 1.46x and 1.01x. */
static int int_lanes(const clf_context *ctx) {
  unsigned v[2];
  return clf__tuned_group(ctx, CLF__TILES_TUNING, "int_lanes", v) && !v[1] && v[0] == 16 ? 16 : 8;
}

int clf__skinny_int_variant(const clf_context *ctx, clf_dtype wt, size_t M, int dot, char *buf, size_t len) {
  if (wt != CLF_Q8_0 && wt != CLF_Q4_0 && wt != CLF_Q4_1 && wt != CLF_Q5_0 && wt != CLF_Q5_1) return 0;
  if (M < 1 || M > CLF__SKINNY_MAX_M || (dot && !ctx->caps.has_int_dot)) return 0;
  const size_t mmax = clf__int_mmax(M);
  return snprintf(buf, len, "linear.skinny_%s %s MMAX=%zu TN=%zu TL=%d%s", dot ? "idot" : "int",
                  clf__weight_type_name(wt), mmax, clf__int_tn(mmax), INT_TL,
                  !dot && int_lanes(ctx) == 16 ? " lanes=16" : "") < (int)len;
}

int clf__skinny_int_wanted(const clf_context *ctx, size_t M, int *dot) {
  *dot = 0;
  if (ctx->env.skinny_int >= 0) return *dot = ctx->env.skinny_int == 2, ctx->env.skinny_int > 0;
  unsigned v[2], d[2];
  *dot = clf__tuned_group(ctx, CLF__TILES_TUNING, "int_dot", d) && !d[1] && d[0] == 1;
  return clf__tuned_group(ctx, CLF__TILES_TUNING, "int", v) && !v[1] && M <= v[0];
}

/* The types whose float path decodes each block through ggml_part's
 * generic decoder (Q5_0, Q5_1 and the k-quants): their integer products
 * were measured faster than it at one and two rows on both CPU runtimes
 * (docs/performance.md, session 28: SmolLM2's Q4_K_M requantization, whose
 * q, k, o, gate and up are Q5_0, decoded at 0.54 -> 0.71 of llama.cpp's
 * speed on Intel's runtime and 0.44 -> 0.50 on PoCL with the integer path
 * on; k-quant products 2.2-8.2x); Q8_0, Q4_0 and Q4_1 have float kernels
 * of their own (skinny_tile, skinny_pair) that the integer path only
 * matches, so they keep the float path unless asked. */
enum { INT_DEFAULT_ROWS = 2 };

int clf__int_rows_wanted(const clf_context *ctx, size_t M, int *dot) {
  unsigned v[2];
  if (ctx->env.skinny_int >= 0 || clf__tuned_group(ctx, CLF__TILES_TUNING, "int", v))
    return clf__skinny_int_wanted(ctx, M, dot);
  *dot = 0;
  return ctx->caps.is_cpu && M <= INT_DEFAULT_ROWS;
}

int clf__int_default_wanted(const clf_context *ctx, clf_dtype wt, size_t M, int *dot) {
  unsigned v[2];
  if (ctx->env.skinny_int >= 0 || clf__tuned_group(ctx, CLF__TILES_TUNING, "int", v))
    return clf__skinny_int_wanted(ctx, M, dot);
  const int generic = wt == CLF_Q5_0 || wt == CLF_Q5_1 || clf__kq_type(wt);
  return clf__int_rows_wanted(ctx, M, dot) && generic;
}

/* The integer kernel an [M, K] product with w of type wt runs (1 with the
 * extension, 0 the portable one), or -1: the float path.  While
 * self-validation runs, the variant it checks and nothing else; else
 * where clf__skinny_int_wanted, the extension's build where that asks for
 * it, the device has it and it passed self-validation (an opt-in variant,
 * as skinny_h), else the portable one unless it failed. */
static int int_kind(clf_context *ctx, clf_dtype wt, int in_out, int aligned, size_t M, size_t K) {
  char pn[96], dn[96];
  if (in_out || !aligned || K % 32 || !clf__skinny_int_variant(ctx, wt, M, 0, pn, sizeof pn)) return -1;
  const int dot = clf__skinny_int_variant(ctx, wt, M, 1, dn, sizeof dn);
  if (clf__validating(ctx)) return dot && clf__variant_validating(ctx, dn) ? 1 : clf__variant_validating(ctx, pn) ? 0 : -1;
  int want_dot = 0;
  if (!clf__int_default_wanted(ctx, wt, M, &want_dot)) return -1;
  if (want_dot && dot && clf__variant_passed(ctx, dn)) return 1;
  return clf_variant_disabled(ctx, pn) ? -1 : 0;
}

/* x quantized once for several products (clf__linear_hold_x), or by the
 * op that wrote it (the norm, glu): the formats of the quantized copy in
 * CLF__SCRATCH_XQ, and which held x's copy is there.  Without it every
 * product launched quantize_q8: where q, k, v (or gate, up) are separate
 * weights, three times the same x; SmolLM2's Q4_1 file, whose are fused,
 * four launches a layer for four activations (515 launches a token
 * against the float path's 394; 425 with the norm's and glu's blocks). */
enum { XQ_Q8_32 = 1 };
/* The integer plan's kinds: 0 the portable build in 8 lanes, these the
 * others (int_kind answers 0 or 1). */
enum { INT_DOT_KIND = 1, INT_L16_KIND = 2 };

/* x's index among the held activations, or -1. */
static int x_is_held(const clf_context *ctx, const clf_tensor *x) {
  for (int i = 0; i < ctx->x_held.n; i++)
    if (ctx->x_held.buf[i] == x->buf && ctx->x_held.offset[i] == x->offset) return i;
  return -1;
}

int clf__linear_hold_x(clf_context *ctx, const clf_tensor *x) {
  const int n = ctx->x_held.n;
  if (x_is_held(ctx, x) >= 0 || n == (int)CLF__ARRAY_LEN(ctx->x_held.buf)) return 0;
  ctx->x_held.buf[n] = x->buf, ctx->x_held.offset[n] = x->offset;
  ctx->x_held.n = n + 1;
  return 1;
}

int clf__linear_reads_blocks(clf_context *ctx, const clf_tensor *w, size_t M) {
  return !w || !w->r16 || clf__r16_path(ctx, w->dtype, M) == CLF__R16_INT;
}

void clf__linear_release_x(clf_context *ctx, const clf_tensor *x) {
  const int i = x_is_held(ctx, x), last = ctx->x_held.n - 1;
  if (i < 0) return;
  if (ctx->x_held.ready == i + 1) ctx->x_held.ready = 0;
  if (ctx->x_held.ready == last + 1) ctx->x_held.ready = i + 1; /* the last one moves to i */
  ctx->x_held.buf[i] = ctx->x_held.buf[last], ctx->x_held.offset[i] = ctx->x_held.offset[last];
  ctx->x_held.n = last;
}

/* Whether the scratch holds x's copy (held, of that format and shape). */
static int x_reused(const clf_context *ctx, const clf_tensor *x, int fmt, size_t M, size_t K) {
  const int i = x_is_held(ctx, x);
  return i >= 0 && ctx->x_held.ready == i + 1 && ctx->x_held.fmt == fmt && ctx->x_held.rows == M &&
         ctx->x_held.cols == K;
}

/* After a quantization into the slot: the held x's copy is there, any
 * other x's replaced it. */
static void x_quantized(clf_context *ctx, const clf_tensor *x, int fmt, size_t M, size_t K) {
  ctx->x_held.ready = x_is_held(ctx, x) + 1;
  ctx->x_held.fmt = fmt, ctx->x_held.rows = M, ctx->x_held.cols = K;
}

/* The scratch of x's 8-bit blocks: M * K quants, then M * K / 32 (d, sum)
 * pairs from float *ds_off. */
static clf_status xq_scratch(clf_context *ctx, size_t M, size_t K, cl_mem *xq, cl_uint *ds_off) {
  *ds_off = (cl_uint)(M * K / sizeof(float));
  return clf__scratch(ctx, CLF__SCRATCH_XQ, M * K + 2 * M * (K / 32) * sizeof(float), xq);
}

clf_status clf__linear_x_slot(clf_context *ctx, const char *variant, const clf_tensor *y, size_t M, size_t K,
                              cl_mem *xq, cl_uint *ds_off, int *use) {
  int dot;
  const int i = x_is_held(ctx, y);
  *use = i >= 0 && ctx->x_held.ready != i + 1 && K % 32 == 0 && M >= 1 && M <= CLF__SKINNY_MAX_M &&
         (clf__validating(ctx) ? clf__variant_validating(ctx, variant)
                               : clf__int_rows_wanted(ctx, M, &dot) && !clf_variant_disabled(ctx, variant));
  return *use ? xq_scratch(ctx, M, K, xq, ds_off) : CLF_OK;
}

void clf__linear_x_written(clf_context *ctx, const clf_tensor *y, int quantized, size_t M, size_t K) {
  const int i = x_is_held(ctx, y);
  if (quantized) x_quantized(ctx, y, XQ_Q8_32, M, K);
  else if (i >= 0 && ctx->x_held.ready == i + 1) ctx->x_held.ready = 0;
}

clf_status clf__linear_x_blocks(clf_context *ctx, const clf_tensor *x, size_t M, size_t K, float *out) {
  if (!x_reused(ctx, x, XQ_Q8_32, M, K))
    return clf__fail(ctx, CLF_E_INVALID_ARG, "clf_linear: no 8-bit copy of that x [%zu, %zu] is held", M, K);
  const size_t nq = M * K, nd = 2 * M * (K / 32);
  signed char *q = malloc(nq);
  float *ds = malloc(nd * sizeof(float));
  cl_int err = q && ds ? clEnqueueReadBuffer(ctx->queue, ctx->scratch[CLF__SCRATCH_XQ], CL_TRUE, 0, nq, q, 0, NULL,
                                             NULL)
                       : CL_OUT_OF_HOST_MEMORY;
  if (err == CL_SUCCESS)
    err = clEnqueueReadBuffer(ctx->queue, ctx->scratch[CLF__SCRATCH_XQ], CL_TRUE, nq, nd * sizeof(float), ds, 0, NULL,
                              NULL);
  for (size_t i = 0; err == CL_SUCCESS && i < nq; i++) out[i] = (float)q[i] * ds[2 * (i / 32)];
  free(q);
  free(ds);
  return err == CL_SUCCESS ? CLF_OK : clf__fail_cl(ctx, err, "clEnqueueReadBuffer", "clf_linear");
}

/* quantize_q8, which makes x's 8-bit blocks for every type and row count,
 * from one program a context: built with the products' options it was a
 * program of its own for each of them (the linear family builds a kernel
 * a program: 80 of test_linear_int's 240 builds on PoCL). */
static clf_status quantize_kernel(clf_context *ctx, clf__kernel **kq) {
  char opts[512];
  snprintf(opts, sizeof opts, "%s%s -DINT_KERNEL=1", linear_wtype(CLF_Q8_0), linear_wt_names); /* any type's */
  return clf__get_kernel(ctx, "linear", opts, "quantize_q8", kq);
}

/* y = act(x W^T + bias) on the integer path: x quantized into the
 * op's scratch slot (int8 quants, then (d, sum) pairs), then one launch of
 * skinny_int or skinny_idot (and bias_act where the plan says). */
static clf_status run_int(clf_context *ctx, const clf__plan *p, const clf_tensor *x, const clf_tensor *w,
                          const clf_tensor *bias, clf_activation act, clf_tensor *y, size_t M, size_t N, size_t K,
                          cl_event *event) {
  const size_t nb = K / 32, tn = p->tile[1], tl = p->tile[2];
  cl_mem xq;
  cl_uint ds_off;
  clf_status st = xq_scratch(ctx, M, K, &xq, &ds_off);
  if (st != CLF_OK) return st;
  char opts[512];
  /* the packed built-ins are declared for OpenCL C 3.0 only (Intel's CPU
   * compiler: not found under the base options' -cl-std=CL1.2); the last
   * -cl-std given is the one that counts */
  const int dot = p->kind == INT_DOT_KIND;
  snprintf(opts, sizeof opts, "%s%s -DINT_KERNEL=1 -DMMAX=%zu -DTN=%zu -DTL=%zu -DINT_DOT=%d -DINT_L16=%d%s%s",
           linear_wtype(w->dtype), linear_wt_names, p->mmax, tn, tl, dot, p->kind == INT_L16_KIND,
           p->act_pass ? " -DSKINNY_ACT_PASS=1" : "", dot ? " -cl-std=CL3.0" : "");
  clf__kernel *kq, *k;
  if ((st = quantize_kernel(ctx, &kq)) != CLF_OK) return st;
  if ((st = clf__get_kernel(ctx, "linear", opts, dot ? "skinny_idot" : "skinny_int", &k)) != CLF_OK) return st;
  if (k->max_wg < tl)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "kernel skinny_int: the device allows %zu work-items of it, not %zu",
                     k->max_wg, tl);
  cl_uint k32 = (cl_uint)K, n32 = (cl_uint)N, m32 = (cl_uint)M;
  if (!x_reused(ctx, x, XQ_Q8_32, M, K)) {
    st = clf__set_args(ctx, kq, 6, CLF__TARG(x), CLF__ARG(xq), CLF__ARG(xq), CLF__ARG(ds_off), CLF__ARG(k32));
    if (st != CLF_OK) return st;
    const size_t ql = nb < 8 ? nb : 8, qlocal[2] = {ql, 1}, qglobal[2] = {(nb + ql - 1) / ql * ql, M};
    if ((st = clf__launch(ctx, kq, 2, qglobal, qlocal, NULL)) != CLF_OK) return st;
    x_quantized(ctx, x, XQ_Q8_32, M, K);
  }
  const clf_tensor *bb = bias ? bias : x;
  cl_int has_bias = bias != NULL, act32 = (cl_int)act;
  cl_uint soff = scales_off(w);
  st = clf__set_args(ctx, k, 16, CLF__ARG(xq), CLF__ARG(xq), CLF__ARG(ds_off), CLF__ARG(w->buf), CLF__ARG(w->buf),
                     CLF__ARG(w->buf), CLF__ARG(soff), CLF__TARG(bb), CLF__ARG(has_bias), CLF__ARG(act32),
                     CLF__TARG(y), CLF__ARG(m32), CLF__ARG(n32), CLF__ARG(k32));
  if (st != CLF_OK) return st;
  const size_t nt = (N + tn - 1) / tn, local[1] = {tl}, global[1] = {(nt + tl - 1) / tl * tl};
  const int pass = p->act_pass && act != CLF_ACT_NONE;
  if ((st = clf__launch(ctx, k, 1, global, local, pass ? NULL : event)) != CLF_OK || !pass) return st;
  return clf__bias_act(ctx, y, NULL, act, y, event);
}

/* For linear_kq.c (the k-quants' integer kernels): the build options
 * naming w's type, and x's 8-bit blocks in the scratch slot, made by
 * quantize_q8 unless the held x's copy is there already. */
void clf__linear_type_opts(clf_dtype dt, char *buf, size_t len) {
  snprintf(buf, len, "%s%s", linear_wtype(dt), linear_wt_names);
}

clf_status clf__linear_x_q8(clf_context *ctx, const clf_tensor *x, size_t M, size_t K, cl_mem *xq, cl_uint *ds_off) {
  clf_status st = xq_scratch(ctx, M, K, xq, ds_off);
  if (st != CLF_OK || x_reused(ctx, x, XQ_Q8_32, M, K)) return st;
  clf__kernel *kq;
  if ((st = quantize_kernel(ctx, &kq)) != CLF_OK) return st;
  const cl_uint k32 = (cl_uint)K;
  st = clf__set_args(ctx, kq, 6, CLF__TARG(x), CLF__ARG(*xq), CLF__ARG(*xq), CLF__ARG(*ds_off), CLF__ARG(k32));
  if (st != CLF_OK) return st;
  const size_t nb = K / 32, ql = nb < 8 ? nb : 8, qlocal[2] = {ql, 1}, qglobal[2] = {(nb + ql - 1) / ql * ql, M};
  if ((st = clf__launch(ctx, kq, 2, qglobal, qlocal, NULL)) != CLF_OK) return st;
  x_quantized(ctx, x, XQ_Q8_32, M, K);
  return CLF_OK;
}

/* ------------------------------------------------------------------------ */
/* The plan: which kernel runs a shape, in which tile or group */


/* The skinny part of a plan for w of type wt (`aligned`: at offset 0 of
 * its buffer) and x [M, K], N outputs, where clf__skinny_fits: skinny_tile
 * or skinny_pair in one launch where clf__skinny_tiles says, with their
 * tile and the activation in a pass of its own or not; else launches of up
 * to mmax rows of the kind clf__skinny_kind picks, in the group its built
 * kernel allows (clf__skinny_fit). */
static clf_status plan_skinny(clf_context *ctx, clf_dtype wt, int in_out, int aligned, size_t M, size_t K,
                              clf__plan *p) {
  const int kq = clf__kq_kind(ctx, wt, in_out, aligned, M, K); /* the k-quants' (linear_kq.c) */
  if (kq >= 0) return clf__kq_plan(M, kq, clf__skinny_act_pass(ctx), p), CLF_OK;
  const int ik = int_kind(ctx, wt, in_out, aligned, M, K);
  if (ik >= 0) {
    p->path = CLF__LINEAR_INT;
    p->kind = ik == 0 && int_lanes(ctx) == 16 ? INT_L16_KIND : ik;
    p->mmax = clf__int_mmax(M);
    p->tile[0] = 1, p->tile[1] = clf__int_tn(p->mmax), p->tile[2] = INT_TL;
    p->act_pass = M == 1 && clf__skinny_act_pass(ctx);
    return CLF_OK;
  }
  if (clf__skinny_tiles(ctx, in_out, M)) {
    const int one = M == 1, pair = one && aligned && clf__skinny_pair(ctx, wt);
    const int f32 = wt == CLF_F32, f16 = wt == CLF_F16;
    p->path = pair ? CLF__LINEAR_PAIR : CLF__LINEAR_TILE;
    p->act_pass = one && clf__skinny_act_pass(ctx);
    p->tile[0] = one ? 1 : TILE_M;
    p->tile[1] = pair ? PAIR_N : one ? (f32 ? TILE1_N : f16 ? TILE1H_N : 1) : TILE_N;
    p->tile[2] = pair ? PAIR_L : one ? (f32 ? TILE1_L : f16 ? TILE1H_L : 16) : TILE_L;
    return CLF_OK;
  }
  size_t mmax = 1;
  while (mmax < M && mmax < CLF__SKINNY_MAX_M) mmax *= 2;
  clf__skinny_group g;
  p->path = CLF__LINEAR_SKINNY;
  p->kind = in_out ? CLF__SKINNY_BASE : clf__skinny_kind(ctx, wt, in_out);
  p->mmax = mmax;
  clf_status st = clf__skinny_fit(ctx, wt, in_out, p->kind, mmax, &g);
  if (st != CLF_OK) return st;
  p->group[0] = g.got[0], p->group[1] = g.got[1];
  return CLF_OK;
}

static void plan_key(clf__plan_key *key, clf_dtype wt, int in_out, int aligned, size_t M, size_t K, size_t N) {
  memset(key, 0, sizeof *key);
  key->op = CLF__PLAN_OP_LINEAR, key->dtype = (int)wt, key->flags = (in_out ? 1 : 0) | (aligned ? 2 : 0);
  key->m = M, key->k = K, key->n = N;
}

/* The whole plan of clf_linear: the skinny kernels where they take M rows
 * of K (and self-validation does not rule them out), else CLBlast, with
 * the reasons the profile's note gives. */
static clf_status plan_make(clf_context *ctx, const char *op, clf_dtype wt, int in_out, int aligned, size_t M,
                            size_t K, size_t N, clf__plan *p) {
  memset(p, 0, sizeof *p);
  plan_key(&p->key, wt, in_out, aligned, M, K, N);
  p->path = CLF__LINEAR_GEMM;
  p->most = clf__skinny_max_rows(ctx, wt, in_out, &p->src);
  if (clf__skinny_fits(ctx, wt, in_out, M, K) && N > 0) {
    int use = 1;
    if (clf__variants_failed(ctx)) {
      char name[96], other[32];
      clf__skinny_variant(ctx, wt, in_out, CLF__SKINNY_BASE, name, sizeof name);
      snprintf(other, sizeof other, "linear.gemm %s", clf__weight_type_name(wt));
      clf_status st = clf__variant_pick(ctx, op, name, other, &use);
      if (st != CLF_OK) return st;
      if (!use) p->why = "the skinny kernel failed self-validation";
    }
    if (use) return plan_skinny(ctx, wt, in_out, aligned, M, K, p);
  } else if (M >= 1 && M <= p->most) { /* [out, in] only: in_out fits whenever M does */
    p->why = "K is not a multiple of the skinny kernel's chunk";
  }
  return CLF_OK;
}

/* The plan over a weight in the 16-row interleave (linear_r16.c): its own
 * key (flag 4), the path clf__r16_path picks as its kind. */
static clf_status plan_r16(clf_context *ctx, clf_dtype wt, size_t M, size_t K, size_t N, clf__plan *out) {
  const int keep = !clf__variants_failed(ctx); /* as clf__linear_plan's */
  clf__plan_key key;
  plan_key(&key, wt, 0, 1, M, K, N);
  key.flags |= 4;
  const clf__plan *found = keep ? clf__plan_find(ctx, &key) : NULL;
  if (found) return *out = *found, CLF_OK;
  memset(out, 0, sizeof *out);
  out->key = key;
  out->path = CLF__LINEAR_R16;
  out->kind = clf__r16_path(ctx, wt, M);
  if (keep) clf__plan_keep(ctx, out);
  return CLF_OK;
}

clf_status clf__linear_plan(clf_context *ctx, const char *op, clf_dtype wt, int in_out, int aligned, size_t M,
                            size_t K, size_t N, clf__plan *out) {
  /* Not kept while self-validation has a say: its verdicts pin and log per call. */
  const int keep = !clf__variants_failed(ctx);
  if (keep) {
    clf__plan_key key;
    plan_key(&key, wt, in_out, aligned, M, K, N);
    const clf__plan *p = clf__plan_find(ctx, &key);
    if (p) return *out = *p, CLF_OK;
  }
  clf_status st = plan_make(ctx, op, wt, in_out, aligned, M, K, N, out);
  if (st == CLF_OK && keep) clf__plan_keep(ctx, out);
  return st;
}

/* ------------------------------------------------------------------------ */
/* Running a plan */

/* y = act(x W^T + bias), W [N, K], in one launch of skinny_tile or, one row
 * of a 4-bit type, skinny_pair (with an activation in a pass of its own
 * where the plan says: and one of bias_act). */
static clf_status run_tile(clf_context *ctx, const clf__plan *p, const clf_tensor *x, const clf_tensor *w,
                           const clf_tensor *bias, clf_activation act, clf_tensor *y, size_t M, size_t N, size_t K,
                           cl_event *event) {
  char opts[512];
  const int one = M == 1, pass = p->act_pass, pair = p->path == CLF__LINEAR_PAIR;
  const size_t tm = p->tile[0], tn = p->tile[1], tl = p->tile[2];
  const char *kname = pair ? "skinny_pair" : "skinny_tile";
  snprintf(opts, sizeof opts, "%s%s -DTM=%zu -DTN=%zu -DTL=%zu%s", linear_wtype(w->dtype), linear_wt_names, tm, tn, tl,
           pass ? " -DSKINNY_ACT_PASS=1" : "");
  clf__kernel *k;
  clf_status st = clf__get_kernel(ctx, "linear", opts, kname, &k);
  if (st != CLF_OK) return st;
  if (k->max_wg < tl)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "kernel %s: the device allows %zu work-items of it, not %zu", kname,
                     k->max_wg, tl);
  const clf_tensor *bb = bias ? bias : x;
  cl_int has_bias = bias != NULL, act32 = (cl_int)act;
  cl_uint m32 = (cl_uint)M, n32 = (cl_uint)N, k32 = (cl_uint)K, soff = scales_off(w);
  if (pair)
    st = clf__set_args(ctx, k, 17, CLF__TARG(x), CLF__TARG(w), CLF__ARG(w->buf), CLF__ARG(soff), CLF__TARG(bb),
                       CLF__ARG(has_bias), CLF__ARG(act32), CLF__TARG(y), CLF__ARG(m32), CLF__ARG(n32),
                       CLF__ARG(k32), CLF__ARG(w->buf), CLF__ARG(w->buf));
  else
    st = clf__set_args(ctx, k, 15, CLF__TARG(x), CLF__TARG(w), CLF__ARG(w->buf), CLF__ARG(soff), CLF__TARG(bb),
                       CLF__ARG(has_bias), CLF__ARG(act32), CLF__TARG(y), CLF__ARG(m32), CLF__ARG(n32), CLF__ARG(k32));
  if (st != CLF_OK) return st;
  const size_t blocks = (M + tm - 1) / tm, nb = (N + tn - 1) / tn;
  size_t local[2] = {tl, 1}, global[2] = {(blocks + tl - 1) / tl * tl, nb};
  if (one) global[0] = (nb + tl - 1) / tl * tl, global[1] = 1;
  if (!pass || act == CLF_ACT_NONE) return clf__launch(ctx, k, 2, global, local, event);
  if ((st = clf__launch(ctx, k, 2, global, local, NULL)) != CLF_OK) return st;
  return clf__bias_act(ctx, y, NULL, act, y, event);
}

/* The launches of skinny (w [N, K], any type, in the plan's kind) or
 * skinny_t (w f32 [K, N]) of up to the plan's mmax rows each, x and y
 * advanced on stack copies. */
static clf_status run_launches(clf_context *ctx, const clf__plan *p, const clf_tensor *x, const clf_tensor *w,
                               int in_out, const clf_tensor *bias, clf_activation act, clf_tensor *y, size_t M,
                               size_t N, size_t K, cl_event *event) {
  const size_t a = p->group[0], b = p->group[1], mmax = p->mmax;
  char opts[512];
  skinny_options(w->dtype, in_out, p->kind, a, b, mmax, opts, sizeof opts);
  clf__kernel *k;
  clf_status st = clf__get_kernel(ctx, "linear", opts, in_out ? "skinny_t" : skinny_kernels[p->kind], &k);
  if (st != CLF_OK) return st;
  size_t local[2] = {a, b}, global[2];
  if (in_out) global[0] = ((N + 7) / 8 + a - 1) / a * a, global[1] = b;
  else global[0] = a, global[1] = (N + b - 1) / b * b;
  const clf_tensor *bb = bias ? bias : x;
  cl_int has_bias = bias != NULL, act32 = (cl_int)act;
  cl_uint n32 = (cl_uint)N, k32 = (cl_uint)K, soff = scales_off(w);
  for (size_t r0 = 0; r0 < M; r0 += mmax) {
    clf_tensor xc = *x, yc = *y;
    xc.offset += r0 * K, yc.offset += r0 * N;
    cl_uint m32 = (cl_uint)(M - r0 < mmax ? M - r0 : mmax);
    if (in_out)
      st = clf__set_args(ctx, k, 13, CLF__TARG(&xc), CLF__TARG(w), CLF__TARG(bb), CLF__ARG(has_bias),
                         CLF__ARG(act32), CLF__TARG(&yc), CLF__ARG(m32), CLF__ARG(n32), CLF__ARG(k32));
    else
      st = clf__set_args(ctx, k, 15, CLF__TARG(&xc), CLF__TARG(w), CLF__ARG(w->buf), CLF__ARG(soff), CLF__TARG(bb),
                         CLF__ARG(has_bias), CLF__ARG(act32), CLF__TARG(&yc), CLF__ARG(m32), CLF__ARG(n32),
                         CLF__ARG(k32));
    if (st == CLF_OK) st = clf__launch(ctx, k, 2, global, local, r0 + mmax >= M ? event : NULL);
    if (st != CLF_OK) return st;
  }
  return CLF_OK;
}

static clf_status run_skinny(clf_context *ctx, const clf__plan *p, const clf_tensor *x, const clf_tensor *w,
                             int in_out, const clf_tensor *bias, clf_activation act, clf_tensor *y, size_t M,
                             size_t N, size_t K, cl_event *event) {
  if (p->path == CLF__LINEAR_SKINNY) return run_launches(ctx, p, x, w, in_out, bias, act, y, M, N, K, event);
  if (p->path == CLF__LINEAR_INT) return run_int(ctx, p, x, w, bias, act, y, M, N, K, event);
  if (p->path == CLF__LINEAR_INTK) return clf__run_kq(ctx, p, x, w, bias, act, y, M, N, K, event);
  return run_tile(ctx, p, x, w, bias, act, y, M, N, K, event);
}

clf_status clf__linear_skinny(clf_context *ctx, const clf_tensor *x, const clf_tensor *w, int in_out,
                              const clf_tensor *bias, clf_activation act, clf_tensor *y, size_t M, size_t N, size_t K,
                              cl_event *event) {
  clf__plan p; /* the skinny part alone, made afresh: a tuning search changes what it is made from */
  memset(&p, 0, sizeof p);
  clf_status st = plan_skinny(ctx, w->dtype, in_out, w->offset == 0, M, K, &p);
  if (st != CLF_OK) return st;
  return run_skinny(ctx, &p, x, w, in_out, bias, act, y, M, N, K, event);
}

clf_status clf__linear_expand(clf_context *ctx, const clf_tensor *w, cl_mem *out) {
  const size_t N = w->shape[0], K = w->shape[1], chunks = K / linear_chunk(w->dtype);
  clf_status st = clf__scratch(ctx, CLF__SCRATCH_WEIGHT, N * K * sizeof(float), out);
  if (st != CLF_OK) return st;
  char opts[512];
  snprintf(opts, sizeof opts, "%s%s", linear_wtype(w->dtype), linear_wt_names);
  clf__kernel *k;
  if ((st = clf__get_kernel(ctx, "linear", opts, "expand_t", &k)) != CLF_OK) return st;
  cl_uint zero = 0, n32 = (cl_uint)N, k32 = (cl_uint)K, soff = scales_off(w);
  st = clf__set_args(ctx, k, 8, CLF__TARG(w), CLF__ARG(w->buf), CLF__ARG(soff), CLF__ARG(*out), CLF__ARG(zero),
                     CLF__ARG(n32), CLF__ARG(k32));
  if (st != CLF_OK) return st;
  const size_t wg = clf__wg_1d(ctx, k, 64);
  const size_t local[2] = {wg, 1}, global[2] = {(N + wg - 1) / wg * wg, chunks};
  return clf__launch(ctx, k, 2, global, local, NULL);
}

/* ------------------------------------------------------------------------ */
/* clf_linear */

/* While recording: the plan clf_linear ran for x [M, K] and w (the skinny
 * kernels or CLBlast), and why: the plan's reason, or else M against the
 * skinny path's most rows, and where that number came from
 * (clf_profile_paths). */
static void linear_note(clf_context *ctx, const clf__plan *p, const clf_tensor *x, const clf_tensor *w, int in_out,
                        size_t M, clf_activation act) {
  char line[448], sw[64], reason[160];
  const size_t K = x->shape[x->ndim - 1];
  const size_t launches = (M + CLF__SKINNY_MAX_M - 1) / CLF__SKINNY_MAX_M;
  const int skinny = p->path != CLF__LINEAR_GEMM;
  if (p->why) snprintf(reason, sizeof reason, "%s", p->why);
  else snprintf(reason, sizeof reason, "%zu rows %s %zu: %s", M, skinny ? "<=" : ">", p->most, p->src);
  const char *layout = in_out ? "[in, out]" : "[out, in]";
  clf__shape_str(w, sw, sizeof sw);
  if (p->path == CLF__LINEAR_R16)
    snprintf(line, sizeof line, "x [%zu, %zu] w %s (16-row interleave) %s %s: %s", M, K, clf_dtype_name(w->dtype), sw,
             layout,
             p->kind == CLF__R16_INT     ? "quantize_q8 and skinny_r16"
             : p->kind == CLF__R16_FLOAT ? (clf__r16_mmax(ctx, M, 1) > 8 ? "skinny_r16f, a launch a block of 16 rows"
                                                                : "skinny_r16f, a launch a block of 8 rows")
                                         : "expand_r16 to f32 [in, out], CLBlast");
  else if (p->path == CLF__LINEAR_INT || p->path == CLF__LINEAR_INTK)
    snprintf(line, sizeof line, "x [%zu, %zu] w %s %s %s: quantize_q8 and %s, 2 launches%s (%s)", M, K,
             clf_dtype_name(w->dtype), sw, layout,
             p->path == CLF__LINEAR_INTK ? (p->kind ? "skinny_kqdot" : "skinny_kq")
             : p->kind == INT_DOT_KIND ? "skinny_idot" : p->kind == INT_L16_KIND ? "skinny_int (16 lanes)" : "skinny_int",
             M == 1 && act != CLF_ACT_NONE && p->act_pass ? " and a bias_act pass" : "", reason);
  else if (p->path == CLF__LINEAR_TILE || p->path == CLF__LINEAR_PAIR)
    snprintf(line, sizeof line, "x [%zu, %zu] w %s %s %s: %s, 1 launch%s (%s)", M, K, clf_dtype_name(w->dtype), sw,
             layout, p->path == CLF__LINEAR_PAIR ? "skinny_pair" : "skinny_tile",
             M == 1 && act != CLF_ACT_NONE && p->act_pass ? " and a bias_act pass" : "", reason);
  else if (skinny)
    snprintf(line, sizeof line, "x [%zu, %zu] w %s %s %s: %s, %zu launch%s of up to %d rows (%s)", M, K,
             clf_dtype_name(w->dtype), sw, layout, in_out ? "skinny_t" : "skinny", launches,
             launches == 1 ? "" : "es", CLF__SKINNY_MAX_M, reason);
  else
    snprintf(line, sizeof line, "x [%zu, %zu] w %s %s %s: %sCLBlast%s (%s)", M, K, clf_dtype_name(w->dtype), sw,
             layout, w->dtype != CLF_F32 ? "expanded to f32 [in, out], " : "",
             w->dtype == CLF_F32 && !in_out ? ", w transposed" : "", reason);
  clf__prof_path(ctx, line);
}

/* Checks clf_linear's arguments; M and the in and out features on success. */
static clf_status linear_check(clf_context *ctx, const char *op, const clf_tensor *x, const clf_tensor *w,
                               clf_weight_layout layout, const clf_tensor *bias, clf_activation act,
                               const clf_tensor *y, size_t *in, size_t *out) {
  clf_status st;
  char sx[96], sw[96], sy[96];
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "x", x, CLF_F32, 1, CLF_MAX_DIMS)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "w", w, -3, 2, 2)) != CLF_OK) return st;
  if (layout != CLF_WEIGHT_OUT_IN && layout != CLF_WEIGHT_IN_OUT)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: layout is %d, not a clf_weight_layout", op, (int)layout);
  const int in_out = layout == CLF_WEIGHT_IN_OUT;
  if (w->dtype != CLF_F32 && (in_out || !clf__dtype_is_linear(w->dtype)))
    return clf__fail(ctx, CLF_E_DTYPE, "%s: w is %s%s: weights are f32, or f16 / q8_0 / q4_0 / ggml's blocks [out, in]", op,
                     clf_dtype_name(w->dtype), in_out ? " with layout CLF_WEIGHT_IN_OUT" : "");
  *in = x->shape[x->ndim - 1];
  const size_t w_in = w->shape[in_out ? 0 : 1];
  *out = w->shape[in_out ? 1 : 0];
  if (w_in != *in)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: w has shape %s (%s) but x has shape %s: in features disagree (%zu vs %zu)",
                     op, clf__shape_str(w, sw, sizeof(sw)), in_out ? "[in, out]" : "[out, in]",
                     clf__shape_str(x, sx, sizeof(sx)), w_in, *in);
  if ((st = clf__check_bias(ctx, op, bias, *out)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "y", y, CLF_F32, x->ndim, x->ndim)) != CLF_OK) return st;
  for (int i = 0; i < x->ndim; i++) {
    size_t want = i == x->ndim - 1 ? *out : x->shape[i];
    if (y->shape[i] != want)
      return clf__fail(ctx, CLF_E_SHAPE, "%s: y has shape %s, expected x's leading dims and %zu outputs (x %s, w %s): "
                       "dim %d disagrees", op, clf__shape_str(y, sy, sizeof(sy)), *out,
                       clf__shape_str(x, sx, sizeof(sx)), clf__shape_str(w, sw, sizeof(sw)), i);
  }
  if ((st = clf__check_act(ctx, op, act)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "x", x)) != CLF_OK) return st; /* the kernels index it in 32 bits too */
  return clf__check_fits_u32(ctx, op, "y", y);
}

clf_status clf_linear(clf_context *ctx, const clf_tensor *x, const clf_tensor *w, clf_weight_layout layout,
                      const clf_tensor *bias, clf_activation act, clf_tensor *y, cl_event *event) {
  static const char op[] = "clf_linear";
  size_t in = 0, out = 0;
  clf_status st = linear_check(ctx, op, x, w, layout, bias, act, y, &in, &out);
  if (st != CLF_OK) return st;
  const int in_out = layout == CLF_WEIGHT_IN_OUT;
  const size_t M = clf__numel_range(x, 0, x->ndim - 1);
  clf__plan p; /* made for this shape once, then looked up */
  if (w->r16) st = plan_r16(ctx, w->dtype, M, in, out, &p); /* [out, in] only: linear_check */
  else st = clf__linear_plan(ctx, op, w->dtype, in_out, w->offset == 0, M, in, out, &p);
  if (st != CLF_OK) return st;
  if (ctx->recording && M > 0 && out > 0) linear_note(ctx, &p, x, w, in_out, M, act);
  if (p.path == CLF__LINEAR_R16) {
    st = clf__r16_linear(ctx, x, w, bias, act, y, M, out, in, p.kind, event);
    clf__prof_path_end(ctx);
    return st;
  }
  if (p.path != CLF__LINEAR_GEMM) st = run_skinny(ctx, &p, x, w, in_out, bias, act, y, M, out, in, event);
  else st = clf__linear_gemm(ctx, x, w, in_out, bias, act, y, M, out, in, event);
  clf__prof_path_end(ctx);
  return st;
}

clf_status clf__linear_gemm(clf_context *ctx, const clf_tensor *x, const clf_tensor *w, int in_out,
                            const clf_tensor *bias, clf_activation act, clf_tensor *y, size_t M, size_t out,
                            size_t in, cl_event *event) {
  clf_status st;
  const int epilogue = bias != NULL || act != CLF_ACT_NONE;
  cl_mem wbuf = w->buf;
  size_t woff = w->offset, ldw = w->shape[1];
  int w_in_out = in_out;
  if (w->dtype != CLF_F32 && M > 0 && out > 0) {
    /* Expanded as [in, out]: the layout CLBlast reads without a copy. */
    if ((st = clf__linear_expand(ctx, w, &wbuf)) != CLF_OK) return st;
    woff = 0, ldw = out, w_in_out = 1;
  }
  /* y [M, out] = x [M, in] @ op(W): W [out, in] transposed, or W [in, out]. */
  st = clf__sgemm(ctx, 0, !w_in_out, M, out, in, 1.0f, x->buf, x->offset, in, 0, wbuf, woff, ldw, 0, 0.0f,
                  y->buf, y->offset, out, 0, 1, epilogue ? NULL : event);
  if (st != CLF_OK || !epilogue) return st;
  if (clf_tensor_numel(y) == 0) return clf__nothing(ctx, "clf_linear", event);
  return clf__bias_act(ctx, y, bias, act, y, event);
}
