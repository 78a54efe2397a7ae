/* paged.c - attention over a paged KV cache (ops.h, kernels/paged.cl): the
 * step's new keys and values scattered into their blocks, and attention
 * of rows from many sequences, each through its own block table. */
#include "ops.h"

#include <stdio.h>
#include <math.h>
#include <string.h>

/* The work-group of paged_attention: 64 work-items (a tile of 64 keys),
 * fewer where the device allows fewer; a power of two. */
static size_t pg_wg(const clf_context *ctx) {
  size_t wg = 64;
  while (wg > 1 && ctx->caps.max_wg && wg > ctx->caps.max_wg) wg /= 2;
  return wg;
}

/* Every array of pm inside its i64 buffer. */
static clf_status check_meta(clf_context *ctx, const char *op, const clf__paged_meta *pm) {
  clf_status st;
  if ((st = clf__check_tensor(ctx, op, "meta", pm->meta, CLF_I64, 1, CLF_MAX_DIMS)) != CLF_OK ||
      (st = clf__check_fits_u32(ctx, op, "meta", pm->meta)) != CLF_OK)
    return st;
  const size_t n = clf_tensor_numel(pm->meta), tab = pm->S * pm->max_blocks;
  if (pm->pos > n || pm->T > n - pm->pos || pm->seq > n || pm->T > n - pm->seq || pm->slot > n ||
      pm->T > n - pm->slot || pm->table > n || tab > n - pm->table || !pm->block)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: the row metadata (%zu rows, %zu x %zu table) does not fit its %zu-entry "
                     "buffer", op, pm->T, pm->S, pm->max_blocks, n);
  return CLF_OK;
}

/* pool [NB, Hkv, BS, Dh] (f32 or f16) of the block size pm gives. */
static clf_status check_pool(clf_context *ctx, const char *op, const char *arg, const clf_tensor *pool, size_t Hkv,
                             size_t Dh, const clf__paged_meta *pm) {
  clf_status st;
  if ((st = clf__check_tensor(ctx, op, arg, pool, -1, 4, 4)) != CLF_OK) return st;
  if (pool->dtype != CLF_F32 && pool->dtype != CLF_F16)
    return clf__fail(ctx, CLF_E_DTYPE, "%s: %s is %s, expected f32 or f16", op, arg, clf_dtype_name(pool->dtype));
  if (
      (st = clf__check_dim(ctx, op, arg, pool, 1, Hkv)) != CLF_OK ||
      (st = clf__check_dim(ctx, op, arg, pool, 2, pm->block)) != CLF_OK ||
      (st = clf__check_dim(ctx, op, arg, pool, 3, Dh)) != CLF_OK)
    return st;
  return clf__check_fits_u32(ctx, op, arg, pool);
}

clf_status clf__kv_scatter(clf_context *ctx, const clf_tensor *ks, const clf_tensor *proj, size_t v_col,
                           const clf__paged_meta *pm, clf_tensor *kpool, clf_tensor *vpool) {
  static const char op[] = "clf__kv_scatter";
  clf_status st;
  if ((st = clf__check_tensor(ctx, op, "k", ks, CLF_F32, 4, 4)) != CLF_OK ||
      (st = clf__check_dim(ctx, op, "k", ks, 0, 1)) != CLF_OK ||
      (st = clf__check_dim(ctx, op, "k", ks, 2, pm->T)) != CLF_OK ||
      (st = clf__check_fits_u32(ctx, op, "k", ks)) != CLF_OK ||
      (st = clf__check_tensor(ctx, op, "proj", proj, CLF_F32, 3, 3)) != CLF_OK ||
      (st = clf__check_dim(ctx, op, "proj", proj, 0, 1)) != CLF_OK ||
      (st = clf__check_dim(ctx, op, "proj", proj, 1, pm->T)) != CLF_OK ||
      (st = clf__check_fits_u32(ctx, op, "proj", proj)) != CLF_OK || (st = check_meta(ctx, op, pm)) != CLF_OK)
    return st;
  const size_t Hkv = ks->shape[1], Dh = ks->shape[3], C = proj->shape[2];
  if (v_col > C || Hkv * Dh > C - v_col)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: the values' %zu columns from column %zu do not fit proj's %zu", op,
                     Hkv * Dh, v_col, C);
  if ((st = check_pool(ctx, op, "kpool", kpool, Hkv, Dh, pm)) != CLF_OK ||
      (st = check_pool(ctx, op, "vpool", vpool, Hkv, Dh, pm)) != CLF_OK)
    return st;
  if (vpool->dtype != kpool->dtype)
    return clf__fail(ctx, CLF_E_DTYPE, "%s: kpool is %s and vpool %s", op, clf_dtype_name(kpool->dtype),
                     clf_dtype_name(vpool->dtype));
  if (pm->T == 0 || Hkv == 0 || Dh == 0) return CLF_OK;
  clf__kernel *k;
  if ((st = clf__get_kernel(ctx, "paged", kpool->dtype == CLF_F16 ? "-DKV_HALF=1" : NULL, "kv_scatter", &k)) !=
      CLF_OK)
    return st;
  const cl_uint v_off = (cl_uint)(proj->offset + v_col), row = (cl_uint)C;
  const cl_uint slot = (cl_uint)(pm->meta->offset + pm->slot), T = (cl_uint)pm->T, H = (cl_uint)Hkv,
                D = (cl_uint)Dh, BS = (cl_uint)pm->block;
  if ((st = clf__set_args(ctx, k, 15, CLF__TARG(ks), CLF__ARG(proj->buf), CLF__ARG(v_off), CLF__ARG(row),
                          CLF__ARG(pm->meta->buf), CLF__ARG(slot), CLF__TARG(kpool), CLF__TARG(vpool), CLF__ARG(T),
                          CLF__ARG(H), CLF__ARG(D), CLF__ARG(BS))) != CLF_OK)
    return st;
  const size_t wg = clf__wg_1d(ctx, k, 16), global[2] = {(pm->T + wg - 1) / wg * wg, 2 * Hkv}, local[2] = {wg, 1};
  return clf__launch(ctx, k, 2, global, local, NULL);
}

clf_status clf__paged_attention(clf_context *ctx, const clf_tensor *q, const clf_tensor *kpool,
                                const clf_tensor *vpool, const clf__paged_meta *pm, size_t window, float scale,
                                float softcap, clf_tensor *out) {
  static const char op[] = "clf__paged_attention";
  clf_status st;
  if ((st = clf__check_tensor(ctx, op, "q", q, CLF_F32, 4, 4)) != CLF_OK ||
      (st = clf__check_dim(ctx, op, "q", q, 0, 1)) != CLF_OK ||
      (st = clf__check_dim(ctx, op, "q", q, 2, pm->T)) != CLF_OK ||
      (st = clf__check_fits_u32(ctx, op, "q", q)) != CLF_OK || (st = check_meta(ctx, op, pm)) != CLF_OK)
    return st;
  const size_t H = q->shape[1], Dh = q->shape[3];
  if ((st = clf__check_tensor(ctx, op, "k", kpool, -1, 4, 4)) != CLF_OK) return st;
  const size_t Hkv = kpool->shape[1];
  if (Hkv == 0 || H % Hkv)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: %zu query heads are not a multiple of %zu KV heads", op, H, Hkv);
  if ((st = check_pool(ctx, op, "k", kpool, Hkv, Dh, pm)) != CLF_OK ||
      (st = check_pool(ctx, op, "v", vpool, Hkv, Dh, pm)) != CLF_OK ||
      (vpool->dtype != kpool->dtype &&
       (st = clf__fail(ctx, CLF_E_DTYPE, "%s: k is %s and v %s", op, clf_dtype_name(kpool->dtype),
                       clf_dtype_name(vpool->dtype))) != CLF_OK) ||
      (st = clf__check_tensor(ctx, op, "out", out, CLF_F32, 3, 3)) != CLF_OK ||
      (st = clf__check_dim(ctx, op, "out", out, 0, 1)) != CLF_OK ||
      (st = clf__check_dim(ctx, op, "out", out, 1, pm->T)) != CLF_OK ||
      (st = clf__check_dim(ctx, op, "out", out, 2, H * Dh)) != CLF_OK ||
      (st = clf__check_fits_u32(ctx, op, "out", out)) != CLF_OK)
    return st;
  if (!isfinite(softcap) || softcap < 0.0f)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: softcap is %g, must be finite and not negative (0: none)", op,
                     (double)softcap);
  if (pm->T == 0 || H == 0 || Dh == 0) return CLF_OK;
  /* On a CPU a work-item per (row, head); elsewhere the group kernel, its
   * group halved while the built kernel allows fewer work-items (its
   * registers or local memory). */
  const int cpu = ctx->caps.is_cpu;
  size_t wg = cpu ? 0 : pg_wg(ctx);
  clf__kernel *k;
  char opts[80];
  const char *half = kpool->dtype == CLF_F16 ? " -DKV_HALF=1" : "";
  /* Oclgrind 21.10 crashes (SIGSEGV) running the CPU shape's eight-lane
   * loop (private float8 arrays); the scalar loop is the same sums. */
  const char *scalar = strstr(ctx->dev.platform_name, "Oclgrind") ? " -DPG_SCALAR=1" : "";
  for (;;) {
    if (cpu) snprintf(opts, sizeof opts, "-DHEAD_DIM=%zu%s%s", Dh, half, scalar);
    else snprintf(opts, sizeof opts, "-DHEAD_DIM=%zu -DPG_WG=%zu%s", Dh, wg, half);
    if ((st = clf__get_kernel(ctx, "paged", opts, cpu ? "paged_attention_cpu" : "paged_attention", &k)) != CLF_OK)
      return st;
    if (cpu || (clf__wg_1d(ctx, k, wg) >= wg && clf__local_fits(ctx, k)) || wg == 1) break;
    wg /= 2;
  }
  const cl_uint base = (cl_uint)pm->meta->offset, pos = base + (cl_uint)pm->pos, seq = base + (cl_uint)pm->seq,
                tab = base + (cl_uint)pm->table, maxb = (cl_uint)pm->max_blocks, T = (cl_uint)pm->T,
                Hq = (cl_uint)H, Hk = (cl_uint)Hkv, BS = (cl_uint)pm->block, W = (cl_uint)window;
  if ((st = clf__set_args(ctx, k, 20, CLF__TARG(q), CLF__TARG(kpool), CLF__TARG(vpool), CLF__ARG(pm->meta->buf),
                          CLF__ARG(pos), CLF__ARG(seq), CLF__ARG(tab), CLF__ARG(maxb), CLF__TARG(out), CLF__ARG(T),
                          CLF__ARG(Hq), CLF__ARG(Hk), CLF__ARG(BS), CLF__ARG(W), CLF__ARG(scale),
                          CLF__ARG(softcap))) != CLF_OK)
    return st;
  if (cpu) wg = clf__wg_1d(ctx, k, 8);
  const size_t global = cpu ? pm->T * H : pm->T * H * wg;
  return clf__launch(ctx, k, 1, &global, &wg, NULL);
}
