/* attention.c - multi-head scaled dot-product attention: the fused
 * flash-attention kernel (tiled through local memory on GPU-class devices,
 * one query row per work-item on CPU-class ones), and the GEMM path
 * (CLBlast Q K^T, masked softmax, CLBlast P V) for head dims the fused
 * kernel does not take.
 */
#include "ops.h"

#include "base/checked.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ATT_MAX_HEAD_DIM 256
/* The fused kernel's work-groups: an ATT_TR x 8 grid (see attention.cl) of
 * 64, 32 or 16 work-items, the largest the kernel may run on the device. */
#define ATT_FUSED_WG_MAX 64
#define ATT_FUSED_WG_MIN 16
/* Local memory the fused kernel may use: well under 32 KiB so that a GPU
 * keeps several work-groups resident per compute unit. */
#define ATT_LOCAL_BUDGET (28u * 1024u)

/* Everything the two paths need, resolved from the checked arguments. */
typedef struct attn_args {
  const clf_tensor *q, *k, *v, *pad, *bias;
  clf_tensor *out;
  size_t B, H, Lq, Lk, Lcap, Dh;
  size_t Hkv, G; /* KV heads, and query heads per KV head (H = G * Hkv) */
  cl_int pad_kind; /* 0 none, 1 i32, 2 i64, 3 f32 */
  cl_uint pad_off; /* in 32-bit words */
  cl_uint n_win, bias_bstride, bias_hstride;
  int causal, merged;
  cl_uint window; /* 0: none (a window of Lk or more masks nothing) */
  float scale;
  float softcap; /* mask->softcap: 0 none */
  /* Where the CPU shape reads (attn_fused_cpu; the other kernels take q, k
   * and v whole): the first float of each past its tensor's offset, and the
   * strides of q and of k and v (batch, head, row) in floats. */
  size_t q_col, k_col, v_col;
  size_t q_bs, q_hs, q_is, kv_bs, kv_hs, kv_is;
} attn_args;

/* Local bytes of the fused kernel for head dim dh and tiles bq x bk (the
 * arrays declared in attn_fused). */
static size_t attn_fused_local(size_t dh, size_t bq, size_t bk) {
  size_t str = dh | 1;
  return sizeof(float) * (bq * str + bk * str + bq * (bk + 1) + 2 * bq * 8) + sizeof(cl_int) * bk;
}

/* Tile sizes of the fused kernel with a work-group of wg work-items and
 * `budget` bytes of local memory: queries per work-group (bq, a multiple of
 * the wg / 8 rows of the grid) and keys per tile (bk, a multiple of 8).
 * Larger bq re-reads K and V less often; the head dim bounds both through
 * local memory, and bq is at most 4 queries per row of the grid (wg / 2),
 * so that a small group keeps its private arrays as small as the 64 one.
 * Up to 8 queries (decoding with a KV cache) take bq = 8, so little work
 * goes to absent query rows, and longer key tiles instead.  0 when nothing
 * fits. */
static int attn_fused_tiles(size_t budget, size_t dh, size_t lq, unsigned wg, unsigned *bq, unsigned *bk) {
  if (dh == 0 || dh > ATT_MAX_HEAD_DIM) return 0;
  unsigned q = dh <= 64 ? 32 : 16, kk = dh <= 64 ? 32 : dh <= 128 ? 16 : 8;
  if (lq <= 8) {
    q = 8;
    kk *= 2;
  }
  if (q > wg / 2) q = wg / 2;
  while (attn_fused_local(dh, q, kk) > budget) {
    if (kk > 8) kk /= 2;
    else if (q > wg / 8) q /= 2; /* down to one query per work-item row */
    else return 0;
  }
  *bq = q;
  *bk = kk;
  return 1;
}

/* The fused kernel's shape for one head dim and query count, worked out
 * once per launch. */
typedef struct attn_fused {
  int cpu;             /* a CPU shape (one work-item per query row), not the tiled kernel */
  unsigned sk;         /* cpu: attn_short_cpu's key lanes (64 or 128); 0: attn_fused_cpu */
  unsigned wg, bq, bk; /* the shape picked, or (kr NULL) the last one tried; bq = bk = 0 for cpu */
  clf__kernel *kr;     /* NULL: no shape applies on this device */
  char why[200];       /* when kr is NULL: why not */
} attn_fused;

/* The self-validation name of the fused variant of shape f: the work-group
 * is part of it, so each shape has its own verdict. */
static void attn_variant_name(size_t dh, const attn_fused *f, char *buf, size_t len) {
  if (f->cpu && f->sk) snprintf(buf, len, "attention.fused HEAD_DIM=%zu CPU SHORT SK=%u", dh, f->sk);
  else if (f->cpu) snprintf(buf, len, "attention.fused HEAD_DIM=%zu CPU WG=%u", dh, f->wg);
  else snprintf(buf, len, "attention.fused HEAD_DIM=%zu BQ=%u BK=%u WG=%u", dh, f->bq, f->bk, f->wg);
}

/* Whether the fused kernel takes its CPU shape: on CPU-class devices, or
 * as $CLFORMER_ATTN_FUSED says ("cpu" or "tiled"; the tests force each). */
static int attn_cpu_shape(const clf_context *ctx) {
  if (ctx->env.attn_cpu >= 0) return ctx->env.attn_cpu;
  return ctx->caps.is_cpu != 0;
}

/* attn_fused_cpu's work-group: its items share nothing, so it only sets
 * how many rows a core takes at a time (1 to 64 measured alike on PoCL and
 * Intel's runtime, 2026-11-26).  Up to 4 rows per KV head (decoding) take
 * groups of 4, so fewer items idle; self-validation's cases (40 rows over
 * 40, 100 and 160 keys, and 3 rows) then cover every name a launch can
 * have. */
#define ATT_CPU_WG 8

/* attn_short_cpu (keys in vector lanes, K transposed into local memory
 * per work-group): where kv_len fits its 64 or 128 lanes, its local arrays
 * fit ATT_SHORT_LOCAL and the device, a KV head has ATT_SHORT_ROWS query
 * rows or more to share the transposition (decoding's one row per head
 * reads each key once either way), and no causal mask or window bands the
 * rows (the short kernel scores every key of a row, the row kernel stops
 * at the band's edge: GPT-2's causal prefill of 128 tokens, 12 heads,
 * took 0.45-0.58 ms with the short kernel against 0.36-0.51).
 * $CLFORMER_ATTN_SHORT=0 never takes it, =1 wherever it fits, whatever the
 * rows and masks (the tests force each). */
#define ATT_SHORT_LOCAL (64u * 1024u)
#define ATT_SHORT_ROWS 8

/* The short kernel's key lanes for head dim dh, lq rows per KV head, lk
 * keys and `banded` (a causal mask over several rows, or a window): 64 or
 * 128, or 0 where attn_fused_cpu takes the launch. */
static unsigned attn_short_lanes(const clf_context *ctx, size_t dh, size_t lq, size_t lk, int banded) {
  const int force = ctx->env.attn_short == 1;
  if (ctx->env.attn_short == 0) return 0;
  const unsigned sk = lk <= 64 ? 64u : lk <= 128 ? 128u : 0u;
  size_t budget = (size_t)ctx->caps.local_mem;
  if (budget > ATT_SHORT_LOCAL) budget = ATT_SHORT_LOCAL;
  if (sk == 0 || (dh + 1) * sk * sizeof(float) > budget) return 0;
  return force || (lq >= ATT_SHORT_ROWS && !banded) ? sk : 0u;
}

/* The CPU shape of the fused kernel for head dim dh, lq rows per KV head,
 * lk keys and `banded`: attn_short_cpu where attn_short_lanes says, else
 * attn_fused_cpu (one work-item per query row): no local memory, any head
 * dim. */
static clf_status attn_fused_pick_cpu(clf_context *ctx, size_t dh, size_t lq, size_t lk, int banded,
                                      attn_fused *f) {
  char opts[64];
  clf__kernel *k;
  clf_status st;
  f->cpu = 1;
  f->sk = attn_short_lanes(ctx, dh, lq, lk, banded);
  if (f->sk) {
    /* A group takes a KV head's rows whole, up to one a lane. */
    snprintf(opts, sizeof(opts), "-DHEAD_DIM=%zu -DATT_SHORT=1 -DATT_SK=%u", dh, f->sk);
    if ((st = clf__get_kernel(ctx, "attention", opts, "attn_short_cpu", &k)) != CLF_OK) return st;
    if (clf__local_fits(ctx, k)) {
      f->wg = (unsigned)clf__wg_1d(ctx, k, lq < f->sk ? (lq + 7) / 8 * 8 : f->sk);
      f->kr = k;
      return CLF_OK;
    }
    f->sk = 0; /* the driver counts more local memory than the device has: the row kernel */
  }
  snprintf(opts, sizeof(opts), "-DHEAD_DIM=%zu -DATT_CPU=1", dh);
  f->wg = lq <= ATT_CPU_WG / 2 ? ATT_CPU_WG / 2 : ATT_CPU_WG;
  if ((st = clf__get_kernel(ctx, "attention", opts, "attn_fused_cpu", &k)) != CLF_OK) return st;
  f->wg = (unsigned)clf__wg_1d(ctx, k, f->wg);
  f->kr = k;
  return CLF_OK;
}

/* The largest work-group the fused kernel tries: 64, or $CLFORMER_ATTN_WG
 * (16, 32 or 64; the tests force each shape with it). */
static unsigned attn_wg_cap(const clf_context *ctx) {
  return ctx->env.attn_wg ? ctx->env.attn_wg : ATT_FUSED_WG_MAX;
}

/* Picks the fused kernel for head dim dh and lq query rows: the first of
 * the 64, 32 and 16 work-item shapes whose tiles fit the local memory and
 * whose kernel, once built, the device runs at that size
 * (CL_KERNEL_WORK_GROUP_SIZE, which a driver may set below the device's
 * limit: Mesa 22.3's rusticl gives 32 on llvmpipe) within its local memory
 * (CL_KERNEL_LOCAL_MEM_SIZE).  A driver that counts more local memory than
 * the kernel's arrays declare (that rusticl reports twice as much) gets
 * tiles smaller in proportion.  f->kr NULL, with f->why, when nothing
 * fits; a failed build is an error. */
static clf_status attn_fused_pick(clf_context *ctx, size_t dh, size_t lq, size_t lk, int banded, attn_fused *f) {
  f->kr = NULL;
  f->cpu = 0;
  f->sk = 0;
  f->wg = f->bq = f->bk = 0;
  if (dh == 0 || dh > ATT_MAX_HEAD_DIM) {
    snprintf(f->why, sizeof f->why, "the head dim exceeds %d", ATT_MAX_HEAD_DIM);
    return CLF_OK;
  }
  if (attn_cpu_shape(ctx)) return attn_fused_pick_cpu(ctx, dh, lq, lk, banded, f);
  const size_t dev_local = (size_t)ctx->caps.local_mem;
  snprintf(f->why, sizeof f->why, "the device has too little local memory (%zu bytes)", dev_local);
  for (unsigned wg = attn_wg_cap(ctx); wg >= ATT_FUSED_WG_MIN; wg /= 2) {
    size_t budget = dev_local < ATT_LOCAL_BUDGET ? dev_local : ATT_LOCAL_BUDGET;
    unsigned bq, bk;
    for (int tries = 0; tries < 3 && attn_fused_tiles(budget, dh, lq, wg, &bq, &bk); tries++) {
      f->wg = wg;
      f->bq = bq;
      f->bk = bk;
      char opts[96];
      snprintf(opts, sizeof(opts), "-DHEAD_DIM=%zu -DATT_BQ=%u -DATT_BK=%u -DATT_TR=%u", dh, bq, bk, wg / 8);
      clf__kernel *k;
      clf_status st = clf__get_kernel(ctx, "attention", opts, "attn_fused", &k);
      if (st != CLF_OK) return st;
      if (clf__wg_1d(ctx, k, wg) < wg) {
        snprintf(f->why, sizeof f->why,
                 "the device runs the kernel with at most %zu work-items per group (CL_KERNEL_WORK_GROUP_SIZE), "
                 "fewer than the %u of its smallest shape",
                 k->max_wg < ctx->caps.max_wg ? k->max_wg : ctx->caps.max_wg, wg);
        break; /* smaller tiles keep the group: the next shape */
      }
      cl_ulong used = 0;
      if (clGetKernelWorkGroupInfo(k->kernel, ctx->dev.device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof(used), &used,
                                   NULL) != CL_SUCCESS)
        used = 0;
      if (used <= dev_local) {
        f->kr = k;
        return CLF_OK;
      }
      snprintf(f->why, sizeof f->why,
               "the kernel uses %lu bytes of local memory (CL_KERNEL_LOCAL_MEM_SIZE) with %u work-items and tiles "
               "of %u x %u, more than the device's %zu",
               (unsigned long)used, wg, bq, bk, dev_local);
      /* Tiles whose count by the driver's measure fits. */
      budget = (size_t)((double)attn_fused_local(dh, bq, bk) * (double)dev_local / (double)used);
    }
  }
  return CLF_OK;
}

int clf__attn_fused_variant(clf_context *ctx, size_t dh, size_t lq, size_t lk, int banded, char *buf, size_t len) {
  attn_fused f;
  /* A shape that fails to build is named all the same: validating it runs
   * clf_attention, which reports the build failure. */
  if (attn_fused_pick(ctx, dh, lq, lk, banded, &f) != CLF_OK ? f.wg == 0 && f.sk == 0 : f.kr == NULL) return 0;
  attn_variant_name(dh, &f, buf, len);
  return 1;
}

/* ---- kernel arguments, each list in the order of its kernel's signature
 * in kernels/attention.cl (the one place that order is written here) ---- */

typedef struct attn_karg {
  size_t size;
  const void *val;
} attn_karg;
#define KARG(x) {sizeof(x), &(x)}

/* Sets a kernel's arguments first, first + 1, ... from `args`. */
static clf_status attn_set_args_at(clf_context *ctx, clf__kernel *kr, cl_uint first, const attn_karg *args,
                                   cl_uint n) {
  for (cl_uint i = 0; i < n; i++) {
    cl_int err = clSetKernelArg(kr->kernel, first + i, args[i].size, args[i].val);
    if (err != CL_SUCCESS) {
      char what[160];
      snprintf(what, sizeof(what), "%s, arg %u", kr->name, (unsigned)(first + i));
      return clf__fail_cl(ctx, err, "clSetKernelArg", what);
    }
  }
  return CLF_OK;
}

static clf_status attn_set_args(clf_context *ctx, clf__kernel *kr, const attn_karg *args, cl_uint n) {
  return attn_set_args_at(ctx, kr, 0, args, n);
}

/* The mask arguments that attn_softmax and attn_fused share, in signature
 * order.  An absent tensor passes q's buffer, never read. */
typedef struct attn_mask_kargs {
  cl_mem pad;
  cl_uint pad_off;
  cl_int pad_kind;
  cl_mem bias;
  cl_uint bias_off;
  cl_int has_bias;
  cl_uint n_win, bias_bstride, bias_hstride;
} attn_mask_kargs;
#define MASK_KARGS(m)                                                                                          \
  KARG((m).pad), KARG((m).pad_off), KARG((m).pad_kind), KARG((m).bias), KARG((m).bias_off), KARG((m).has_bias), \
      KARG((m).n_win), KARG((m).bias_bstride), KARG((m).bias_hstride)

static attn_mask_kargs attn_mask_of(const attn_args *a) {
  attn_mask_kargs m = {a->pad ? a->pad->buf : a->q->buf,
                       a->pad_off,
                       a->pad_kind,
                       a->bias ? a->bias->buf : a->q->buf,
                       a->bias ? (cl_uint)a->bias->offset : 0u,
                       a->bias != NULL,
                       a->n_win,
                       a->bias_bstride,
                       a->bias_hstride};
  return m;
}

/* attn_fused(q, q_off, k, k_off, v, v_off, <mask>, out, out_off, out_h,
 * out_i, n_bkv, H, G, Lq, Lk, Lcap, causal, window, scale, softcap), and for
 * attn_fused_cpu (cpu) then q_bs, q_hs, q_is, kv_bs, kv_hs, kv_is. */
static clf_status attn_fused_set_args(clf_context *ctx, clf__kernel *kr, const attn_args *a, int cpu) {
  const attn_mask_kargs m = attn_mask_of(a);
  const cl_uint q_off = (cl_uint)(a->q->offset + a->q_col), k_off = (cl_uint)(a->k->offset + a->k_col);
  const cl_uint v_off = (cl_uint)(a->v->offset + a->v_col);
  const cl_uint out_off = (cl_uint)a->out->offset;
  const cl_uint out_h = (cl_uint)(a->merged ? a->Dh : a->Lq * a->Dh);
  const cl_uint out_i = (cl_uint)(a->merged ? a->H * a->Dh : a->Dh);
  const cl_uint n_bkv = (cl_uint)(a->B * a->Hkv), H = (cl_uint)a->H, G = (cl_uint)a->G, Lq = (cl_uint)a->Lq;
  const cl_uint Lk = (cl_uint)a->Lk, Lcap = (cl_uint)a->Lcap, window = a->window;
  const cl_int causal = a->causal;
  const float scale = a->scale;
  const attn_karg args[] = {KARG(a->q->buf), KARG(q_off),   KARG(a->k->buf),   KARG(k_off),   KARG(a->v->buf),
                            KARG(v_off),     MASK_KARGS(m), KARG(a->out->buf), KARG(out_off), KARG(out_h),
                            KARG(out_i),     KARG(n_bkv),   KARG(H),           KARG(G),       KARG(Lq),
                            KARG(Lk),        KARG(Lcap),    KARG(causal),      KARG(window),  KARG(scale),
                            KARG(a->softcap)};
  clf_status st = attn_set_args(ctx, kr, args, (cl_uint)CLF__ARRAY_LEN(args));
  if (st != CLF_OK || !cpu) return st;
  const cl_uint q_bs = (cl_uint)a->q_bs, q_hs = (cl_uint)a->q_hs, q_is = (cl_uint)a->q_is;
  const cl_uint kv_bs = (cl_uint)a->kv_bs, kv_hs = (cl_uint)a->kv_hs, kv_is = (cl_uint)a->kv_is;
  const attn_karg strides[] = {KARG(q_bs), KARG(q_hs), KARG(q_is), KARG(kv_bs), KARG(kv_hs), KARG(kv_is)};
  return attn_set_args_at(ctx, kr, (cl_uint)CLF__ARRAY_LEN(args), strides, (cl_uint)CLF__ARRAY_LEN(strides));
}

/* attn_softmax(s, s_off, <mask>, n_rows, H, Lq, Lk, causal, window, softcap) on the
 * scores s (at offset 0). */
static clf_status attn_softmax_set_args(clf_context *ctx, clf__kernel *kr, const attn_args *a, cl_mem s) {
  const attn_mask_kargs m = attn_mask_of(a);
  const cl_uint s_off = 0, n_rows = (cl_uint)(a->B * a->H * a->Lq), H = (cl_uint)a->H, Lq = (cl_uint)a->Lq;
  const cl_uint Lk = (cl_uint)a->Lk;
  const cl_uint window = a->window;
  const cl_int causal = a->causal;
  const attn_karg args[] = {KARG(s),  KARG(s_off), MASK_KARGS(m), KARG(n_rows), KARG(H),
                            KARG(Lq), KARG(Lk),    KARG(causal),  KARG(window), KARG(a->softcap)};
  return attn_set_args(ctx, kr, args, (cl_uint)CLF__ARRAY_LEN(args));
}

/* attn_merge(x, x_off, y, y_off, H, Lq, Dh, n): [B, H, Lq, Dh] at x_off of
 * x into a's merged out. */
static clf_status attn_merge_set_args(clf_context *ctx, clf__kernel *kr, const attn_args *a, cl_mem x, size_t x_at,
                                      size_t n_out) {
  const cl_uint x_off = (cl_uint)x_at, y_off = (cl_uint)a->out->offset, H = (cl_uint)a->H, Lq = (cl_uint)a->Lq;
  const cl_uint Dh = (cl_uint)a->Dh, n = (cl_uint)n_out;
  const attn_karg args[] = {KARG(x), KARG(x_off), KARG(a->out->buf), KARG(y_off),
                            KARG(H), KARG(Lq),    KARG(Dh),          KARG(n)};
  return attn_set_args(ctx, kr, args, (cl_uint)CLF__ARRAY_LEN(args));
}

/* ---- the two paths ---- */

static clf_status attn_run_fused(clf_context *ctx, const attn_args *a, const attn_fused *f, cl_event *event) {
  clf_status st = attn_fused_set_args(ctx, f->kr, a, f->cpu);
  if (st != CLF_OK) return st;
  if (f->cpu) {
    /* One work-item per query row of a KV head's G heads. */
    const size_t global[2] = {(a->G * a->Lq + f->wg - 1) / f->wg * f->wg, a->B * a->Hkv};
    const size_t local[2] = {f->wg, 1};
    return clf__launch(ctx, f->kr, 2, global, local, event);
  }
  /* One work-group per block of bq query rows of a KV head's G heads. */
  const size_t global[2] = {(a->G * a->Lq + f->bq - 1) / f->bq * f->wg, a->B * a->Hkv};
  const size_t local[2] = {f->wg, 1};
  return clf__launch(ctx, f->kr, 2, global, local, event);
}

static clf_status attn_run_gemm(clf_context *ctx, const attn_args *a, cl_event *event) {
  const size_t BH = a->B * a->H;
  /* Batches of (b, KV head), each of M = G * Lq query rows (its G query
   * heads are consecutive in q): every K and V is read by one product. */
  const size_t BKV = a->B * a->Hkv, M = a->G * a->Lq;
  size_t nS = 0;
  /* Merged output: the heads of one batch index are Dh apart with row
   * stride H*Dh, which one strided batch covers only when Lq == 1 (rows are
   * heads, Dh apart) or B == G == 1 (batches are heads); otherwise P V goes
   * to scratch (after the scores) and attn_merge moves it. */
  const int direct = !a->merged || a->Lq == 1 || (a->B == 1 && a->G == 1);
  const size_t nO = direct ? 0 : BH * a->Lq * a->Dh;
  if (!clf__mul_ok(BH * a->Lq, a->Lk, &nS) || !clf__fits_u32(nS, nO))
    return clf__fail(ctx, CLF_E_UNSUPPORTED,
                     "clf_attention: the GEMM path's %zu x %zu x %zu score buffer exceeds 2^32 elements", BH,
                     a->Lq, a->Lk);
  /* Kernels and scratch first, so that a failure enqueues nothing. */
  clf__kernel *ks, *km = NULL;
  clf_status st = clf__get_kernel(ctx, "attention", NULL, "attn_softmax", &ks);
  if (st != CLF_OK) return st;
  if (!direct && (st = clf__get_kernel(ctx, "attention", NULL, "attn_merge", &km)) != CLF_OK) return st;
  cl_mem s;
  if ((st = clf__scratch(ctx, CLF__SCRATCH_ATTN, (nS + nO) * sizeof(float), &s)) != CLF_OK) return st;

  /* scores = scale * q k^T: [Lq, Dh] x [Lk, Dh]^T per (b, h); k's batch
   * stride is Lcap * Dh so a KV cache longer than kv_len works. */
  st = clf__sgemm(ctx, 0, 1, M, a->Lk, a->Dh, a->scale, a->q->buf, a->q->offset, a->Dh, M * a->Dh, a->k->buf,
                  a->k->offset, a->Dh, a->Lcap * a->Dh, 0.0f, s, 0, a->Lk, M * a->Lk, BKV, NULL);
  if (st != CLF_OK) return st;

  if ((st = attn_softmax_set_args(ctx, ks, a, s)) != CLF_OK) return st;
  /* One work-group per row; wider groups for long rows. */
  size_t local = clf__wg_1d(ctx, ks, a->Lk >= 1024 ? 256 : a->Lk >= 256 ? 128 : 64);
  size_t global = BH * a->Lq * local;
  if ((st = clf__launch(ctx, ks, 1, &global, &local, NULL)) != CLF_OK) return st;

  /* out = P v: [Lq, Lk] x [Lk, Dh] per (b, h). */
  cl_mem c = a->out->buf;
  size_t c_off = a->out->offset, ldc = a->Dh, stride_c = M * a->Dh;
  if (!direct) {
    c = s;
    c_off = nS;
  } else if (a->merged && a->Lq == 1) {
    stride_c = a->G * a->Dh; /* rows: the G heads, Dh apart */
  } else if (a->merged) {
    ldc = a->H * a->Dh; /* B == G == 1: batches are the heads */
    stride_c = a->Dh;
  }
  st = clf__sgemm(ctx, 0, 0, M, a->Dh, a->Lk, 1.0f, s, 0, a->Lk, M * a->Lk, a->v->buf, a->v->offset, a->Dh,
                  a->Lcap * a->Dh, 0.0f, c, c_off, ldc, stride_c, BKV, direct ? event : NULL);
  if (st != CLF_OK || direct) return st;

  if ((st = attn_merge_set_args(ctx, km, a, s, nS, nO)) != CLF_OK) return st;
  size_t mlocal = clf__wg_1d(ctx, km, 256), mglobal = nO;
  return clf__launch(ctx, km, 1, &mglobal, &mlocal, event);
}

/* Checks the optional masks against the resolved sizes and fills a's mask
 * fields. */
static clf_status attn_check_mask(clf_context *ctx, const char *op, const clf_attention_mask *mask, attn_args *a) {
  clf_status st;
  char sb[96];
  a->pad = a->bias = NULL;
  a->pad_kind = 0;
  a->pad_off = 0;
  a->n_win = 1;
  a->bias_bstride = a->bias_hstride = 0;
  a->causal = 0;
  a->window = 0;
  a->softcap = 0.0f;
  if (!mask) return CLF_OK;
  if (!isfinite(mask->softcap) || mask->softcap < 0.0f)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: mask->softcap is %g, must be finite and not negative (0: none)", op,
                     (double)mask->softcap);
  a->softcap = mask->softcap;
  a->causal = mask->causal != 0;
  /* A window of kv_len or more hides nothing (every position is < kv_len). */
  a->window = mask->window < a->Lk ? (cl_uint)mask->window : 0u;
  const clf_tensor *p = mask->key_padding;
  if (p) {
    if ((st = clf__check_tensor(ctx, op, "mask->key_padding", p, -1, 2, 2)) != CLF_OK) return st;
    if (p->dtype != CLF_I32 && p->dtype != CLF_I64 && p->dtype != CLF_F32)
      return clf__fail(ctx, CLF_E_DTYPE, "%s: mask->key_padding is %s, expected i32, i64 or f32", op,
                       clf_dtype_name(p->dtype));
    if (p->shape[0] != a->B || p->shape[1] != a->Lk)
      return clf__fail(ctx, CLF_E_SHAPE, "%s: mask->key_padding has shape %s, expected [B, kv_len] = [%zu, %zu]",
                       op, clf__shape_str(p, sb, sizeof(sb)), a->B, a->Lk);
    /* The kernel reads i64 as pairs of 32-bit words. */
    const size_t words = p->dtype == CLF_I64 ? 2 : 1;
    size_t off_w, n_w;
    if (!clf__mul_ok(p->offset, words, &off_w) || !clf__mul_ok(clf_tensor_numel(p), words, &n_w) ||
        !clf__fits_u32(off_w, n_w))
      return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: mask->key_padding is too large for 32-bit indexing", op);
    a->pad = p;
    a->pad_kind = p->dtype == CLF_I32 ? 1 : p->dtype == CLF_I64 ? 2 : 3;
    a->pad_off = (cl_uint)(p->offset * words);
  }
  const clf_tensor *bs = mask->bias;
  if (bs) {
    if ((st = clf__check_tensor(ctx, op, "mask->bias", bs, CLF_F32, 4, 4)) != CLF_OK) return st;
    size_t nw = bs->shape[0], hb = bs->shape[1];
    if (nw == 0 || a->B % nw != 0 || (hb != a->H && hb != 1) || bs->shape[2] != a->Lq || bs->shape[3] != a->Lk)
      return clf__fail(ctx, CLF_E_SHAPE,
                       "%s: mask->bias has shape %s, expected [nW, %zu or 1, %zu, %zu] (H, Lq, kv_len) "
                       "with nW dividing B = %zu",
                       op, clf__shape_str(bs, sb, sizeof(sb)), a->H, a->Lq, a->Lk, a->B);
    if ((st = clf__check_fits_u32(ctx, op, "mask->bias", bs)) != CLF_OK) return st;
    a->bias = bs;
    a->n_win = (cl_uint)nw;
    a->bias_bstride = (cl_uint)(hb * a->Lq * a->Lk);
    a->bias_hstride = hb == 1 ? 0u : (cl_uint)(a->Lq * a->Lk);
  }
  return CLF_OK;
}

/* Checks q, k, v, kv_len and out and fills a's sizes and tensors. */
static clf_status attn_check_qkv(clf_context *ctx, const char *op, const clf_tensor *q, const clf_tensor *k,
                                 const clf_tensor *v, size_t kv_len, clf_tensor *out, attn_args *a) {
  clf_status st;
  char sb[96];
  if ((st = clf__check_tensor(ctx, op, "q", q, CLF_F32, 4, 4)) != CLF_OK) return st;
  a->q = q;
  a->B = q->shape[0];
  a->H = q->shape[1];
  a->Lq = q->shape[2];
  a->Dh = q->shape[3];
  if ((st = clf__check_tensor(ctx, op, "k", k, CLF_F32, 4, 4)) != CLF_OK) return st;
  if ((st = clf__check_dim(ctx, op, "k", k, 0, a->B)) != CLF_OK) return st;
  a->Hkv = k->shape[1];
  if (a->Hkv == 0 ? a->H != 0 : a->H % a->Hkv != 0)
    return clf__fail(ctx, CLF_E_SHAPE,
                     "%s: q has %zu heads and k %s has %zu: the query heads must be a multiple of the KV heads", op,
                     a->H, clf__shape_str(k, sb, sizeof(sb)), a->Hkv);
  a->G = a->Hkv ? a->H / a->Hkv : 1;
  if ((st = clf__check_dim(ctx, op, "k", k, 3, a->Dh)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "v", v, CLF_F32, 4, 4)) != CLF_OK) return st;
  if ((st = clf__check_same_shape(ctx, op, "k", k, "v", v)) != CLF_OK) return st;
  a->k = k;
  a->v = v;
  a->Lcap = k->shape[2];
  if (kv_len > a->Lcap)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: kv_len %zu exceeds the %zu rows of k %s", op, kv_len, a->Lcap,
                     clf__shape_str(k, sb, sizeof(sb)));
  a->Lk = kv_len ? kv_len : a->Lcap;
  a->q_bs = a->H * a->Lq * a->Dh, a->q_hs = a->Lq * a->Dh, a->q_is = a->Dh;
  a->kv_bs = a->Hkv * a->Lcap * a->Dh, a->kv_hs = a->Lcap * a->Dh, a->kv_is = a->Dh;
  if ((st = clf__check_tensor(ctx, op, "out", out, CLF_F32, 3, 4)) != CLF_OK) return st;
  a->out = out;
  a->merged = out->ndim == 3;
  if (a->merged ? (out->shape[0] != a->B || out->shape[1] != a->Lq || out->shape[2] != a->H * a->Dh)
                : (out->shape[0] != a->B || out->shape[1] != a->H || out->shape[2] != a->Lq || out->shape[3] != a->Dh))
    return clf__fail(ctx, CLF_E_SHAPE, "%s: out has shape %s, expected [%zu, %zu, %zu, %zu] or [%zu, %zu, %zu]", op,
                     clf__shape_str(out, sb, sizeof(sb)), a->B, a->H, a->Lq, a->Dh, a->B, a->Lq, a->H * a->Dh);
  return CLF_OK;
}

/* The kernels index with uints, and Lq and Lk must fit an int. */
static clf_status attn_check_sizes(clf_context *ctx, const char *op, const attn_args *a) {
  clf_status st;
  if ((st = clf__check_fits_u32(ctx, op, "q", a->q)) != CLF_OK || (st = clf__check_fits_u32(ctx, op, "k", a->k)) != CLF_OK ||
      (st = clf__check_fits_u32(ctx, op, "v", a->v)) != CLF_OK ||
      (st = clf__check_fits_u32(ctx, op, "out", a->out)) != CLF_OK)
    return st;
  if (a->Lq > INT_MAX || a->Lk > INT_MAX || a->G * a->Lq > INT_MAX)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: Lq %zu (times %zu query heads per KV head) or kv_len %zu exceeds "
                     "2^31 - 1", op, a->Lq, a->G, a->Lk);
  return CLF_OK;
}

/* Whether to run the fused kernel (*use_fused, its shape in *f) for
 * `impl`: the fused kernel and the GEMM path stand in for each other where
 * one failed self-validation. */
static clf_status attn_choose(clf_context *ctx, const char *op, const attn_args *a, clf_attention_impl impl,
                              attn_fused *f, int *use_fused) {
  static const char gemm_v[] = "attention.gemm";
  char fused_v[128];
  int pref;
  clf_status st;
  *use_fused = impl != CLF_ATTN_GEMM;
  f->kr = NULL;
  snprintf(f->why, sizeof f->why, "not asked for");
  /* The GEMM path asked for, and no verdict to consult: no fused kernel to
   * build. */
  if (impl == CLF_ATTN_GEMM && !clf__variants_failed(ctx)) return CLF_OK;
  const int had_error = ctx->err.status != CLF_OK;
  const int banded = (a->causal && a->Lq > 1) || a->window != 0;
  if ((st = attn_fused_pick(ctx, a->Dh, a->G * a->Lq, a->Lk, banded, f)) != CLF_OK) {
    if (impl != CLF_ATTN_GEMM) return st;
    /* Only the alternative of the path asked for failed to build. */
    f->kr = NULL;
    if (!had_error) clf_clear_error(ctx);
  }
  if (!f->kr) return clf__variant_pick(ctx, op, gemm_v, NULL, &pref);
  attn_variant_name(a->Dh, f, fused_v, sizeof(fused_v));
  st = clf__variant_pick(ctx, op, *use_fused ? fused_v : gemm_v, *use_fused ? gemm_v : fused_v, &pref);
  if (st == CLF_OK) *use_fused = pref == *use_fused;
  return st;
}

clf_status clf_attention(clf_context *ctx, const clf_tensor *q, const clf_tensor *k, const clf_tensor *v,
                         size_t kv_len, const clf_attention_mask *mask, float scale, clf_attention_impl impl,
                         clf_tensor *out, cl_event *event) {
  static const char op[] = "clf_attention";
  clf_status st;
  attn_args a = {0};
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = attn_check_qkv(ctx, op, q, k, v, kv_len, out, &a)) != CLF_OK) return st;
  if ((st = attn_check_mask(ctx, op, mask, &a)) != CLF_OK) return st;
  if (impl != CLF_ATTN_AUTO && impl != CLF_ATTN_FUSED && impl != CLF_ATTN_GEMM)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: impl %d is not a clf_attention_impl", op, (int)impl);
  if (!isfinite(scale)) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: scale is %g, must be finite", op, (double)scale);
  if ((st = attn_check_sizes(ctx, op, &a)) != CLF_OK) return st;
  a.scale = scale;

  if (clf_tensor_numel(out) == 0) {
    /* Nothing to compute; still honour the event. */
    if (event) {
      cl_int err = clEnqueueMarkerWithWaitList(ctx->queue, 0, NULL, event);
      if (err != CL_SUCCESS) return clf__fail_cl(ctx, err, "clEnqueueMarkerWithWaitList", op);
    }
    return CLF_OK;
  }

  attn_fused fused;
  int use_fused;
  if ((st = attn_choose(ctx, op, &a, impl, &fused, &use_fused)) != CLF_OK) return st;
  if (use_fused) {
    if (fused.kr) return attn_run_fused(ctx, &a, &fused, event);
    if (impl == CLF_ATTN_FUSED)
      return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: the fused kernel does not apply to head dim %zu: %s", op, a.Dh,
                       fused.why);
  }
  /* No key at all: every row is fully masked, so the output is zeros. */
  if (a.Lk == 0) return clf_tensor_fill(ctx, out, 0.0, event);
  return attn_run_gemm(ctx, &a, event);
}

/* Self-attention read straight from the projection (see ops.h). */
clf_status clf__attention_proj(clf_context *ctx, const clf_tensor *proj, size_t H, size_t Hkv, size_t Dh,
                               const clf_attention_mask *mask, float scale, clf_tensor *out, int *done) {
  static const char op[] = "clf_attention";
  clf_status st;
  char sb[96];
  *done = 0;
  if (!attn_cpu_shape(ctx) || clf_tensor_numel(out) == 0) return CLF_OK;
  if ((st = clf__check_tensor(ctx, op, "proj", proj, CLF_F32, 3, 3)) != CLF_OK) return st;
  const size_t B = proj->shape[0], L = proj->shape[1], W = proj->shape[2];
  if (Dh > ATT_MAX_HEAD_DIM) return CLF_OK; /* no fused kernel: the GEMM path's */
  if (Dh == 0 || Hkv == 0 || H % Hkv != 0 || W != (H + 2 * Hkv) * Dh)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: projection %s does not hold %zu query and 2 x %zu KV heads of %zu", op,
                     clf__shape_str(proj, sb, sizeof(sb)), H, Hkv, Dh);
  attn_args a = {.q = proj, .k = proj, .v = proj, .out = out, .B = B, .H = H, .Lq = L, .Lk = L, .Lcap = L,
                 .Dh = Dh, .Hkv = Hkv, .G = H / Hkv, .merged = 1, .scale = scale};
  if ((st = clf__check_tensor(ctx, op, "out", out, CLF_F32, 3, 3)) != CLF_OK) return st;
  if (out->shape[0] != B || out->shape[1] != L || out->shape[2] != H * Dh)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: out has shape %s, expected [%zu, %zu, %zu]", op,
                     clf__shape_str(out, sb, sizeof(sb)), B, L, H * Dh);
  a.q_col = 0, a.k_col = H * Dh, a.v_col = (H + Hkv) * Dh;
  a.q_bs = a.kv_bs = L * W, a.q_hs = a.kv_hs = Dh, a.q_is = a.kv_is = W;
  if ((st = attn_check_mask(ctx, op, mask, &a)) != CLF_OK || (st = attn_check_sizes(ctx, op, &a)) != CLF_OK)
    return st;
  attn_fused fused;
  int use_fused;
  if ((st = attn_choose(ctx, op, &a, CLF_ATTN_AUTO, &fused, &use_fused)) != CLF_OK) return st;
  /* Elsewhere (the fused kernel failed self-validation, or is the tiled
   * one) the caller splits the heads for clf_attention. */
  if (!use_fused || !fused.kr || !fused.cpu) return CLF_OK;
  *done = 1;
  return attn_run_fused(ctx, &a, &fused, NULL);
}
