/* linear_r16.c - Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the k-quants Q2_K to
 * Q6_K: weights in the 16-row interleave (issue 42): the repacking a
 * model loader does for a CPU
 * device, and clf_linear's paths over such a weight (kernels/linear.cl):
 * skinny_r16f on x as it is (the float path, every type), skinny_r16 on
 * x's 8-bit blocks as skinny_int reads them (Q4_1, Q8_0; where the
 * integer path is asked for), and expand_r16 with CLBlast.
 *
 * Why a layout of its own: skinny_int reads one row's 20-byte block at a
 * time and sums its 32 products within SIMD lanes, about 17 instructions a
 * block and row on both CPU runtimes (docs/performance.md); with 16 rows'
 * words side by side the products run across rows, a 64-byte load and a
 * handful of pmaddwd per 128 products.  One row of Q4_1 3072 x 576 on
 * Intel's CPU runtime: 0.071 ms in skinny_int, 0.033 in skinny_r16
 * (throwaway bench, same process; docs/performance.md has the figures).
 * A GPU reads GGUF's layout well (a row's blocks are contiguous for a
 * sub-group), so the loader repacks for CPU devices only.
 */
#include "ops.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { R16_ROWS = 16, R16_TL = 8 };

/* The types: GGUF's blocks with their f16 scale (and min) and then
 * 32-bit words (Q5_x: qh, then qs; misaligned in the file, moved
 * bytewise): Q4_0 {d; qs[16]} (clformer's q4 too, its split layout put
 * back in blocks), Q4_1 {d; m; qs[16]}, Q5_0 {d; qh; qs[16]}, Q5_1 {d; m; qh;
 * qs[16]}, Q8_0 {d; qs[32]}; of 256 elements Q4_K {d; dmin; scales[12];
 * qs[128]}, Q5_K {d; dmin; scales[12]; qh[32]; qs[128]}, and with their
 * f16s last in the file (first in a group, as the others'): Q2_K
 * {scales[16]; qs[64]; d; dmin}, Q3_K {hmask[32]; qs[64]; scales[12]; d}
 * (110 bytes: its words misaligned in the file, moved bytewise), Q6_K
 * {ql[128]; qh[64]; scales[16]; d}.  A block's elements and bytes (the
 * dtype table's), its f16 head's bytes, and whether the head is last. */
static int r16_type(clf_dtype dt) {
  return dt == CLF_Q4_0 || dt == CLF_Q4_1 || dt == CLF_Q5_0 || dt == CLF_Q5_1 || dt == CLF_Q8_0 || dt == CLF_Q2_K ||
         dt == CLF_Q3_K || dt == CLF_Q4_K || dt == CLF_Q5_K || dt == CLF_Q6_K;
}
static size_t r16_elems(clf_dtype dt) { return clf__dtype_block(dt); }
static size_t r16_block_bytes(clf_dtype dt) { return clf__dtype_bytes(dt, clf__dtype_block(dt)); }
static size_t r16_head_bytes(clf_dtype dt) {
  return dt == CLF_Q8_0 || dt == CLF_Q4_0 || dt == CLF_Q5_0 || dt == CLF_Q3_K || dt == CLF_Q6_K ? 2 : 4;
}
static int r16_head_last(clf_dtype dt) { return dt == CLF_Q2_K || dt == CLF_Q3_K || dt == CLF_Q6_K; }
/* Rows padded to a whole group: a head of 50257 rows takes 3142 groups,
 * its last 15 rows zero blocks (scale 0) that no output is written of. */
static size_t r16_rows(size_t rows) { return (rows + R16_ROWS - 1) / R16_ROWS * R16_ROWS; }

int clf__r16_wanted(const clf_context *ctx, clf_dtype dt, size_t rows, size_t in) {
  if (!r16_type(dt) || rows == 0 || in == 0 || in % r16_elems(dt)) return 0;
  if (ctx->env.rows16 >= 0) return ctx->env.rows16;
  /* on a CPU every such type: the k-quants' one-row products there
   * (skinny_r16f's classes) run as fast as skinny_kq's integer ones over
   * the file's layout, their prompts faster (SmolLM2 Q4_K_M, a 200-token
   * prompt, decode then 64 tokens: Intel 516-520 against 609-617 ms to the
   * first token, 13.6-13.9 ms a token either way; PoCL 856-934 against
   * 930-940, 19.8-20.0 either way; docs/performance.md) */
  return ctx->caps.is_cpu;
}

/* Q5_x's fifth bits (qh, a little-endian word) in the interleave's order
 * (to_group) or back: element j = 4 k + b + 16 h (quant word k, byte b,
 * high nibble h) at bit 8 b + 4 h + k, where GGUF has it at bit j.  So
 * shifting the word left by 4 - k puts word k's low-nibble elements' bits
 * beside their nibbles (bit 4 of byte b), and right by k its high ones':
 * skinny_r16f's one-row classes join each 5-bit value in two operations
 * a word (kernels/linear.cl). */
static void r16_qh(unsigned char *word, int to_group) {
  const uint32_t v = (uint32_t)word[0] | (uint32_t)word[1] << 8 | (uint32_t)word[2] << 16 | (uint32_t)word[3] << 24;
  uint32_t o = 0;
  for (unsigned j = 0; j < 32; j++) {
    const unsigned p = 8 * (j % 4) + 4 * (j / 16) + (j % 16) / 4;
    if (to_group) o |= ((v >> j) & 1u) << p;
    else o |= ((v >> p) & 1u) << j;
  }
  for (int i = 0; i < 4; i++) word[i] = (unsigned char)(o >> (8 * i));
}

/* Every block between the layouts (to_group: GGUF's into the
 * interleave's): the f16 scale (and min) to the group's scales (and
 * mins), each 32-bit word k after them to the group's word plane k.  The
 * source is only read (the casts drop a const the direction decides). */
static void r16_copy(clf_dtype dt, unsigned char *gguf, unsigned char *inter, size_t rows, size_t in, int to_group) {
  const size_t nb = in / r16_elems(dt), bb = r16_block_bytes(dt), head = r16_head_bytes(dt), words = (bb - head) / 4;
  const size_t head_at = r16_head_last(dt) ? bb - head : 0, words_at = r16_head_last(dt) ? 0 : head;
  for (size_t n = 0; n < rows; n++)
    for (size_t c = 0; c < nb; c++) {
      unsigned char *f = gguf + (n * nb + c) * bb, *g = inter + ((n / R16_ROWS) * nb + c) * R16_ROWS * bb;
      const size_t r = n % R16_ROWS;
      for (size_t h = 0; h < head; h += 2) {
        unsigned char *a = f + head_at + h, *b = g + 16 * h + 2 * r;
        memcpy(to_group ? b : a, to_group ? a : b, 2);
      }
      for (size_t k = 0; k < words; k++) {
        unsigned char *a = f + words_at + 4 * k, *b = g + R16_ROWS * head + 64 * k + 4 * r;
        memcpy(to_group ? b : a, to_group ? a : b, 4);
        if (k == 0 && (dt == CLF_Q5_0 || dt == CLF_Q5_1)) r16_qh(to_group ? b : a, to_group);
      }
    }
}

size_t clf__r16_bytes(clf_dtype dt, size_t rows, size_t in) { return clf__dtype_bytes(dt, r16_rows(rows) * in); }

void clf__r16_pack(clf_dtype dt, const unsigned char *blocks, size_t rows, size_t in, unsigned char *out) {
  /* a last group of fewer than 16 rows: zero first, its padding rows lie among the others' words */
  const size_t whole = clf__dtype_bytes(dt, rows / R16_ROWS * R16_ROWS * in);
  memset(out + whole, 0, clf__r16_bytes(dt, rows, in) - whole);
  r16_copy(dt, (unsigned char *)blocks, out, rows, in, 1);
}

clf_status clf__r16_tensor(clf_context *ctx, clf_dtype dt, size_t rows, size_t in, const unsigned char *packed,
                           clf_tensor **out) {
  clf_tensor *t = NULL;
  clf_status st = clf_tensor_create(ctx, dt, 2, (size_t[]){r16_rows(rows), in}, &t);
  if (st == CLF_OK && (st = clf_tensor_upload(ctx, t, packed, clf__r16_bytes(dt, rows, in))) != CLF_OK)
    clf_tensor_destroy(t), t = NULL;
  if (t) t->shape[0] = rows, t->r16 = 1; /* its rows; the buffer holds the last group's padding too */
  *out = t;
  return st;
}

void clf__unsplit_blocks(clf_dtype dt, const unsigned char *split, size_t blocks, unsigned char *out) {
  const size_t qb = dt == CLF_Q8_0 ? 32 : 16;
  const unsigned char *scales = split + blocks * qb;
  for (size_t b = 0; b < blocks; b++) {
    memcpy(out + b * (qb + 2), scales + 2 * b, 2);
    memcpy(out + b * (qb + 2) + 2, split + b * qb, qb);
  }
}

clf_status clf_linear_weight_prepare(clf_context *ctx, const clf_tensor *w, clf_tensor **out) {
  static const char op[] = "clf_linear_weight_prepare";
  clf_status st = clf__check_ctx(ctx, op);
  if (st != CLF_OK) return st;
  if (!out) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: out is NULL", op);
  *out = NULL;
  if (w && w->r16)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: w is already in clformer's 16-row interleave", op);
  if ((st = clf__check_tensor(ctx, op, "w", w, -2, 2, 2)) != CLF_OK) return st;
  const clf_dtype dt = w->dtype;
  if (!clf__dtype_is_linear(dt))
    return clf__fail(ctx, CLF_E_DTYPE, "%s: w is %s, which clf_linear reads no weights of", op, clf_dtype_name(dt));
  const size_t rows = w->shape[0], in = w->shape[1], bytes = clf_tensor_bytes(w);
  const int inter = clf__r16_wanted(ctx, dt, rows, in);
  unsigned char *host = malloc(bytes + 1), *blocks = NULL, *packed = NULL;
  if (!host) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory for w's %zu bytes", op, bytes);
  if ((st = clf_tensor_download(ctx, w, host, bytes)) != CLF_OK) goto done;
  if (!inter) { /* as it is: a copy */
    if ((st = clf_tensor_create(ctx, dt, 2, w->shape, out)) == CLF_OK &&
        (st = clf_tensor_upload(ctx, *out, host, bytes)) != CLF_OK)
      clf_tensor_destroy(*out), *out = NULL;
    goto done;
  }
  blocks = host;
  if (!clf__dtype_is_ggml(dt)) { /* clformer's Q8_0 / Q4_0 split layout back in ggml's blocks */
    if (!(blocks = malloc(bytes + 1))) {
      st = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory for w's blocks", op);
      goto done;
    }
    clf__unsplit_blocks(dt, host, rows * in / CLF__QBLOCK, blocks);
  }
  if (!(packed = malloc(clf__r16_bytes(dt, rows, in) + 1))) {
    st = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory repacking w", op);
    goto done;
  }
  clf__r16_pack(dt, blocks, rows, in, packed);
  st = clf__r16_tensor(ctx, dt, rows, in, packed, out);
done:
  if (blocks != host) free(blocks);
  free(host);
  free(packed);
  return st;
}

void clf__r16_unpack(clf_dtype dt, const unsigned char *in16, size_t rows, size_t in, unsigned char *blocks) {
  r16_copy(dt, blocks, (unsigned char *)in16, rows, in, 0);
}

static void r16_opts(clf_dtype dt, size_t mmax, char *buf, size_t len) {
  char types[384];
  clf__linear_type_opts(dt, types, sizeof types);
  snprintf(buf, len, "%s -DINT_KERNEL=1 -DR16_KERNEL=1 -DMMAX=%zu -DTL=%d", types, mmax, R16_TL);
}

size_t clf__r16_mmax(const clf_context *ctx, size_t M, int exact) {
  /* past 8 rows, 16 a launch on the float path where the CPU's compiler
   * asks for explicit vectors (a preferred float width of 16: PoCL on
   * AVX-512): each weight's value then made once for 16 rows.  Intel's
   * runtime (width 1: it vectorizes across work-items) ran those launches
   * 1.4x as slow, PoCL 1.06x as fast (SmolLM2 Q4_K_M, 200 rows) */
  if (exact && M > 8 && ctx->caps.is_cpu && ctx->caps.pref_vec_float >= 16) return 16;
  return clf__int_mmax(M);
}

int clf__r16_variant(const clf_context *ctx, clf_dtype dt, size_t M, int exact, char *buf, size_t len) {
  if (!r16_type(dt) || M < 1 || M > 16 || (!exact && M > CLF__SKINNY_MAX_M)) return 0;
  if (!exact && dt != CLF_Q4_1 && dt != CLF_Q8_0) return 0; /* skinny_r16's types */
  return snprintf(buf, len, "linear.skinny_r16%s %s MMAX=%zu TL=%d", exact ? "f" : "", clf__weight_type_name(dt),
                  clf__r16_mmax(ctx, M, exact), R16_TL) < (int)len;
}

void clf__r16_prepare(clf_context *ctx, clf_dtype dt, size_t M) {
  char opts[512];
  clf__kernel *k;
  if (!r16_type(dt)) return;
  r16_opts(dt, clf__r16_mmax(ctx, M, 1), opts, sizeof opts);
  (void)clf__get_kernel(ctx, "linear", opts, "skinny_r16f", &k); /* a failure is reported where the kernel is used */
}

/* y = act(x W^T + bias) in launches of up to CLF__SKINNY_MAX_M rows:
 * skinny_r16f on x as it is (exact), or skinny_r16 on x's 8-bit blocks
 * (made, or held from the op that wrote x). */
static clf_status r16_skinny(clf_context *ctx, const clf_tensor *x, const clf_tensor *w, const clf_tensor *bias,
                             clf_activation act, clf_tensor *y, size_t M, size_t N, size_t K, int exact,
                             cl_event *event) {
  char opts[512];
  const char *kname = exact ? "skinny_r16f" : "skinny_r16";
  const size_t mmax = clf__r16_mmax(ctx, M, exact);
  r16_opts(w->dtype, mmax, opts, sizeof opts);
  clf__kernel *k;
  clf_status st = clf__get_kernel(ctx, "linear", opts, kname, &k);
  if (st != CLF_OK) return st;
  if (k->max_wg < R16_TL)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "kernel %s: the device allows %zu work-items of it, not %d", kname,
                     k->max_wg, R16_TL);
  cl_mem xq = NULL;
  cl_uint ds_off = 0;
  if (!exact && (st = clf__linear_x_q8(ctx, x, M, K, &xq, &ds_off)) != CLF_OK) return st;
  const clf_tensor *bb = bias ? bias : x;
  cl_int has_bias = bias != NULL, act32 = (cl_int)act;
  cl_uint n32 = (cl_uint)N, k32 = (cl_uint)K;
  const size_t groups = r16_rows(N) / R16_ROWS, local[2] = {R16_TL, 1};
  const size_t global[2] = {(groups + R16_TL - 1) / R16_TL * R16_TL, (M + mmax - 1) / mmax};
  if (exact) { /* every block of mmax rows in one launch, its second index */
    const cl_uint m32 = (cl_uint)M;
    st = clf__set_args(ctx, k, 13, CLF__TARG(x), CLF__ARG(w->buf), CLF__ARG(w->buf), CLF__TARG(bb), CLF__ARG(has_bias),
                       CLF__ARG(act32), CLF__TARG(y), CLF__ARG(m32), CLF__ARG(n32), CLF__ARG(k32));
    return st == CLF_OK ? clf__launch(ctx, k, 2, global, local, event) : st;
  }
  for (size_t r0 = 0; r0 < M && st == CLF_OK; r0 += mmax) {
    clf_tensor xc = *x, yc = *y;
    xc.offset += r0 * K, yc.offset += r0 * N;
    cl_uint row = (cl_uint)r0, m32 = (cl_uint)(M - r0 < mmax ? M - r0 : mmax);
    st = clf__set_args(ctx, k, 15, CLF__ARG(xq), CLF__ARG(xq), CLF__ARG(ds_off), CLF__ARG(row), CLF__ARG(w->buf),
                       CLF__ARG(w->buf), CLF__TARG(bb), CLF__ARG(has_bias), CLF__ARG(act32), CLF__TARG(&yc),
                       CLF__ARG(m32), CLF__ARG(n32), CLF__ARG(k32));
    if (st == CLF_OK) st = clf__launch(ctx, k, 1, global, local, r0 + mmax >= M ? event : NULL);
  }
  return st;
}

/* w expanded to f32 [K, N] in the weight scratch (as clf__linear_expand). */
static clf_status r16_expand(clf_context *ctx, const clf_tensor *w, size_t N, size_t K, cl_mem *out) {
  clf_status st = clf__scratch(ctx, CLF__SCRATCH_WEIGHT, N * K * sizeof(float), out);
  if (st != CLF_OK) return st;
  char opts[512];
  r16_opts(w->dtype, 1, opts, sizeof opts);
  clf__kernel *k;
  if ((st = clf__get_kernel(ctx, "linear", opts, "expand_r16", &k)) != CLF_OK) return st;
  cl_uint n32 = (cl_uint)N, k32 = (cl_uint)K;
  st = clf__set_args(ctx, k, 5, CLF__ARG(w->buf), CLF__ARG(w->buf), CLF__ARG(*out), CLF__ARG(n32), CLF__ARG(k32));
  if (st != CLF_OK) return st;
  const size_t wg = clf__wg_1d(ctx, k, 8), groups = r16_rows(N) / R16_ROWS;
  const size_t local[2] = {wg, 1}, global[2] = {(groups + wg - 1) / wg * wg, K / (r16_elems(w->dtype) == 32 ? 32 : 16)};
  return clf__launch(ctx, k, 2, global, local, NULL);
}

int clf__r16_path(clf_context *ctx, clf_dtype dt, size_t M) {
  char name[96], fname[96];
  const size_t m = M < 16 ? M : 16, mi = M < CLF__SKINNY_MAX_M ? M : CLF__SKINNY_MAX_M;
  if (!clf__r16_variant(ctx, dt, m, 1, fname, sizeof fname)) return CLF__R16_GEMM;
  const int has_int = clf__r16_variant(ctx, dt, mi, 0, name, sizeof name);
  if (clf__validating(ctx))
    return clf__variant_validating(ctx, fname) || !has_int ? CLF__R16_FLOAT : CLF__R16_INT;
  /* the integer path where it is asked for ($CLFORMER_SKINNY_INT, the
   * profile's int=R), else the float one: on the interleave, skinny_r16f
   * ran as fast as skinny_r16 on Intel's runtime and faster on PoCL
   * (SmolLM2 Q4_1 decode 10.5-10.7 against 10.4-10.5 ms a token, and
   * 13.8-14.2 against 16.3-17.1; docs/performance.md), and it is exact */
  int dot = 0;
  if (has_int && M <= CLF__SKINNY_MAX_M && clf__skinny_int_wanted(ctx, M, &dot) && !clf_variant_disabled(ctx, name))
    return CLF__R16_INT;
  /* the float path at every row count on a CPU, unless $CLFORMER_SKINNY_ROWS
   * caps it: against expand_r16 and CLBlast it prefilled SmolLM2 Q4_1 2.4x
   * as fast on PoCL and 1.6x on Intel's runtime at 200 rows, 2.4x and 1.4x
   * at 512, 2.3x and 1.6x at 1024 (docs/performance.md); the profile's
   * Rows line was measured for the kernels over the file's layout */
  const size_t most = ctx->caps.is_cpu && !ctx->env.skinny_rows ? (size_t)-1 : clf__skinny_max_rows(ctx, dt, 0, NULL);
  if ((M <= CLF__SKINNY_MAX_M || M <= most) && !clf_variant_disabled(ctx, fname)) return CLF__R16_FLOAT;
  return CLF__R16_GEMM; /* expand_r16 and CLBlast */
}

clf_status clf__r16_linear(clf_context *ctx, const clf_tensor *x, const clf_tensor *w, const clf_tensor *bias,
                           clf_activation act, clf_tensor *y, size_t M, size_t N, size_t K, int path,
                           cl_event *event) {
  if (w->offset != 0 || K % r16_elems(w->dtype))
    return clf__fail(ctx, CLF_E_INVALID_ARG,
                     "clf_linear: w (%s in the 16-row interleave) must start its buffer and have in features a "
                     "multiple of its block, %zu (offset %zu, shape [%zu, %zu])",
                     clf_dtype_name(w->dtype), r16_elems(w->dtype), w->offset, N, K);
  if (M == 0 || N == 0) return clf__nothing(ctx, "clf_linear", event);
  if (path != CLF__R16_GEMM) return r16_skinny(ctx, x, w, bias, act, y, M, N, K, path == CLF__R16_FLOAT, event);
  cl_mem wf;
  clf_status st = r16_expand(ctx, w, N, K, &wf);
  if (st != CLF_OK) return st;
  const int epilogue = bias != NULL || act != CLF_ACT_NONE;
  st = clf__sgemm(ctx, 0, 0, M, N, K, 1.0f, x->buf, x->offset, K, 0, wf, 0, N, 0, 0.0f, y->buf, y->offset, N, 0, 1,
                  epilogue ? NULL : event);
  if (st != CLF_OK || !epilogue) return st;
  return clf__bias_act(ctx, y, bias, act, y, event);
}
