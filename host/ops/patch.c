/* patch.c - image patching and patch embedding (ViT, MAE), Swin's rolls,
 * windows, shifted-window masks, relative position bias and patch merging,
 * and MAE's random masking and decoder unshuffle (kernels/patch.cl).
 */
#include "ops.h"

#include "base/checked.h"

#include <limits.h>
#include <stdio.h>

/* Floats of local tile per patch work-group (PATCH_TILE in patch.cl): 8 KiB,
 * or an eighth of the local memory where that is less. */
static size_t patch_tile(const clf_context *ctx) {
  return ctx->caps.local_mem / 8 < 2048 ? (size_t)(ctx->caps.local_mem / 8) : 2048;
}


/* Ops that read one tensor while writing another at other places cannot run
 * in place: refuse outputs that share memory with an input. */
static clf_status no_overlap(clf_context *ctx, const char *op, const char *arg_in, const clf_tensor *in,
                             const char *arg_out, const clf_tensor *out) {
  size_t na = clf_tensor_numel(in), nb = clf_tensor_numel(out);
  if (in->buf == out->buf && na && nb && in->offset < out->offset + nb && out->offset < in->offset + na)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: %s overlaps %s (this op cannot run in place)", op, arg_out,
                     arg_in);
  return CLF_OK;
}

/* A 2-D local size for kernels whose gid0 runs along a row of `inner`
 * elements: 128 items in one of four shapes (128x1, 32x4, 8x16, 4x32), the
 * row as wide as it fills well (Swin's 96-channel rows take 32x4, 49-token
 * rows 32x4, ViT's 768-wide rows 128x1). */
static void wg_rows(const clf_context *ctx, const clf__kernel *k, size_t inner, size_t local[2]) {
  size_t total = clf__wg_1d(ctx, k, 128);
  size_t l0 = (inner >= 512 || inner % 128 == 0) ? 128 : inner >= 24 ? 32 : inner >= 6 ? 8 : 4;
  if (l0 > total) l0 = total;
  local[0] = l0;
  local[1] = total / l0;
}

/* The row kernels' build (window partition/reverse, patch merge): on a CPU
 * with -DCLF_ROW_ITEMS=1, a work-item per row (kernels/patch.cl). */
static clf_status row_kernel(clf_context *ctx, const char *name, clf__kernel **k) {
  return clf__get_kernel(ctx, "patch", ctx->caps.is_cpu ? "-DCLF_ROW_ITEMS=1" : NULL, name, k);
}

static clf_status launch_rows(clf_context *ctx, clf__kernel *k, size_t inner, size_t rows, cl_event *event) {
  size_t local[2], global[2] = {inner, rows};
  wg_rows(ctx, k, inner, local);
  return clf__launch(ctx, k, 2, global, local, event);
}

/* Their launch over rows of `inner` channels: a work-item per row on a CPU,
 * else per element as launch_rows. */
static clf_status launch_row_items(clf_context *ctx, clf__kernel *k, size_t inner, size_t rows, cl_event *event) {
  if (!ctx->caps.is_cpu) return launch_rows(ctx, k, inner, rows, event);
  const size_t wg = clf__wg_1d(ctx, k, 16), g = (rows + wg - 1) / wg * wg;
  return clf__launch(ctx, k, 1, &g, &wg, event);
}

/* Checks an f32 [B, C, H, W] image with H and W multiples of `patch`. */
static clf_status check_image(clf_context *ctx, const char *op, const char *arg, const clf_tensor *img,
                              size_t patch) {
  clf_status st;
  if ((st = clf__check_tensor(ctx, op, arg, img, CLF_F32, 4, 4)) != CLF_OK) return st;
  if (patch == 0) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: patch is 0", op);
  if (img->shape[2] % patch || img->shape[3] % patch) {
    char b[96];
    return clf__fail(ctx, CLF_E_SHAPE, "%s: %s has shape %s: H and W must be multiples of the patch %zu", op,
                     arg, clf__shape_str(img, b, sizeof(b)), patch);
  }
  return clf__check_fits_u32(ctx, op, arg, img);
}

/* Checks `t` is f32 [d0, d1, d2]. */
static clf_status check_3d(clf_context *ctx, const char *op, const char *arg, const clf_tensor *t, size_t d0,
                           size_t d1, size_t d2) {
  clf_status st;
  if ((st = clf__check_tensor(ctx, op, arg, t, CLF_F32, 3, 3)) != CLF_OK) return st;
  if ((st = clf__check_dim(ctx, op, arg, t, 0, d0)) != CLF_OK) return st;
  if ((st = clf__check_dim(ctx, op, arg, t, 1, d1)) != CLF_OK) return st;
  if ((st = clf__check_dim(ctx, op, arg, t, 2, d2)) != CLF_OK) return st;
  return clf__check_fits_u32(ctx, op, arg, t);
}

/* Enqueues the patch gather (to_img 0) or scatter (to_img 1) between an
 * image [B, C, H, W] and patches x (B*N rows of C*p*p at x_buf/x_off). */
static clf_status patch_shuffle(clf_context *ctx, const clf_tensor *img, size_t patch, clf_patch_order order,
                                cl_mem x_buf, size_t x_off, int to_img, cl_event *event) {
  clf__kernel *k;
  clf_status st;
  const size_t B = img->shape[0], C = img->shape[1], H = img->shape[2], W = img->shape[3];
  if (ctx->caps.is_cpu) { /* a work-item per patch row (patch_rows in kernels/patch.cl) */
    if ((st = clf__get_kernel(ctx, "patch", NULL, "patch_rows", &k)) != CLF_OK) return st;
    cl_uint c32 = (cl_uint)C, h32 = (cl_uint)H, w32 = (cl_uint)W, p32 = (cl_uint)patch;
    cl_uint pqc = order == CLF_PATCH_PQC, dir = (cl_uint)to_img, xo = (cl_uint)x_off;
    st = clf__set_args(ctx, k, 10, CLF__TARG(img), CLF__ARG(x_buf), CLF__ARG(xo), CLF__ARG(c32), CLF__ARG(h32),
                       CLF__ARG(w32), CLF__ARG(p32), CLF__ARG(pqc), CLF__ARG(dir));
    if (st != CLF_OK) return st;
    const size_t global[3] = {W / patch, C * patch, B * (H / patch)};
    size_t local[3] = {clf__wg_1d(ctx, k, 16), 1, 1};
    if (local[0] > global[0] && global[0]) local[0] = global[0];
    return clf__launch(ctx, k, 3, global, local, event);
  }
  if ((st = clf__get_kernel(ctx, "patch", NULL, "patch_shuffle", &k)) != CLF_OK) return st;
  const size_t F = C * patch * patch, n_patches = B * (H / patch) * (W / patch);
  /* Enough patches per group for ~1024 floats of work, within the tile. */
  const size_t tile = patch_tile(ctx), work = tile < 1024 ? tile : 1024;
  cl_uint use_tile = F <= tile;
  size_t G = F ? work / F : 1;
  if (G < 1) G = 1;
  if (G > n_patches) G = n_patches ? n_patches : 1;
  cl_uint c32 = (cl_uint)C, h32 = (cl_uint)H, w32 = (cl_uint)W, p32 = (cl_uint)patch;
  cl_uint pqc = order == CLF_PATCH_PQC, dir = (cl_uint)to_img, np32 = (cl_uint)n_patches, g32 = (cl_uint)G;
  cl_uint xo = (cl_uint)x_off;
  st = clf__set_args(ctx, k, 13, CLF__TARG(img), CLF__ARG(x_buf), CLF__ARG(xo), CLF__ARG(c32), CLF__ARG(h32),
                     CLF__ARG(w32), CLF__ARG(p32), CLF__ARG(pqc), CLF__ARG(dir), CLF__ARG(np32), CLF__ARG(g32),
                     CLF__ARG(use_tile));
  if (st != CLF_OK) return st;
  size_t local = clf__wg_1d(ctx, k, 128);
  size_t groups = F ? (n_patches + G - 1) / G : 0;
  size_t global = groups * local;
  return clf__launch(ctx, k, 1, &global, &local, event);
}

static clf_status check_order(clf_context *ctx, const char *op, clf_patch_order order) {
  if (order != CLF_PATCH_CPQ && order != CLF_PATCH_PQC)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: order is %d, expected CLF_PATCH_CPQ or CLF_PATCH_PQC", op,
                     (int)order);
  return CLF_OK;
}

/* The checks patchify and unpatchify share: img [B, C, H, W] of whole
 * patches, a valid order, and `arg` (t) its patches [B, N, C * patch^2]. */
static clf_status check_patches_of(clf_context *ctx, const char *op, const clf_tensor *img, size_t patch,
                                   clf_patch_order order, const char *arg, const clf_tensor *t) {
  clf_status st;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = check_image(ctx, op, "img", img, patch)) != CLF_OK) return st;
  if ((st = check_order(ctx, op, order)) != CLF_OK) return st;
  const size_t B = img->shape[0], C = img->shape[1], N = (img->shape[2] / patch) * (img->shape[3] / patch);
  return check_3d(ctx, op, arg, t, B, N, C * patch * patch);
}

clf_status clf_patchify(clf_context *ctx, const clf_tensor *img, size_t patch, clf_patch_order order,
                        clf_tensor *out, cl_event *event) {
  static const char op[] = "clf_patchify";
  clf_status st;
  if ((st = check_patches_of(ctx, op, img, patch, order, "out", out)) != CLF_OK) return st;
  if ((st = no_overlap(ctx, op, "img", img, "out", out)) != CLF_OK) return st;
  return patch_shuffle(ctx, img, patch, order, out->buf, out->offset, 0, event);
}

clf_status clf_unpatchify(clf_context *ctx, const clf_tensor *x, size_t patch, clf_patch_order order,
                          clf_tensor *img, cl_event *event) {
  static const char op[] = "clf_unpatchify";
  clf_status st;
  if ((st = check_patches_of(ctx, op, img, patch, order, "x", x)) != CLF_OK) return st;
  if ((st = no_overlap(ctx, op, "x", x, "img", img)) != CLF_OK) return st;
  return patch_shuffle(ctx, img, patch, order, x->buf, x->offset, 1, event);
}

clf_status clf_patch_embed(clf_context *ctx, const clf_tensor *img, const clf_tensor *weight,
                           const clf_tensor *bias, clf_tensor *out, cl_event *event) {
  static const char op[] = "clf_patch_embed";
  clf_status st;
  char b1[96], b2[96];
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "weight", weight, CLF_F32, 4, 4)) != CLF_OK) return st;
  const size_t E = weight->shape[0], p = weight->shape[2];
  if (p == 0 || weight->shape[3] != p)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: weight has shape %s, expected [E, C, p, p] with p >= 1", op,
                     clf__shape_str(weight, b1, sizeof(b1)));
  if ((st = check_image(ctx, op, "img", img, p)) != CLF_OK) return st;
  const size_t B = img->shape[0], C = img->shape[1], N = (img->shape[2] / p) * (img->shape[3] / p);
  if (weight->shape[1] != C)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: weight has shape %s but img has shape %s: channel counts differ", op,
                     clf__shape_str(weight, b1, sizeof(b1)), clf__shape_str(img, b2, sizeof(b2)));
  if (bias) {
    if ((st = clf__check_tensor(ctx, op, "bias", bias, CLF_F32, 1, 1)) != CLF_OK) return st;
    if ((st = clf__check_dim(ctx, op, "bias", bias, 0, E)) != CLF_OK) return st;
  }
  if ((st = check_3d(ctx, op, "out", out, B, N, E)) != CLF_OK) return st;
  if ((st = no_overlap(ctx, op, "img", img, "out", out)) != CLF_OK) return st;
  if ((st = no_overlap(ctx, op, "weight", weight, "out", out)) != CLF_OK) return st;
  if (bias && (st = no_overlap(ctx, op, "bias", bias, "out", out)) != CLF_OK) return st;

  const size_t F = C * p * p, rows = B * N;
  if (F == 0 && !bias && rows && E) return clf_tensor_fill(ctx, out, 0.0, event); /* no channels: zeros */
  cl_mem patches = NULL;
  size_t n_patch;
  if (!clf__mul_ok(rows, F, &n_patch) || !clf__fits_u32(0, n_patch))
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: %zu patches of %zu floats exceed 2^32 - 1 elements", op, rows, F);
  if (rows && F) {
    if ((st = clf__scratch(ctx, CLF__SCRATCH_PATCH, rows * F * sizeof(float), &patches)) != CLF_OK) return st;
    if ((st = patch_shuffle(ctx, img, p, CLF_PATCH_CPQ, patches, 0, 0, NULL)) != CLF_OK) return st;
  }
  float beta = 0.0f;
  if (bias) {
    clf__kernel *k;
    if ((st = clf__get_kernel(ctx, "patch", NULL, "fill_rows", &k)) != CLF_OK) return st;
    cl_uint e32 = (cl_uint)E, r32 = (cl_uint)rows;
    st = clf__set_args(ctx, k, 6, CLF__TARG(bias), CLF__TARG(out), CLF__ARG(e32), CLF__ARG(r32));
    if (st != CLF_OK) return st;
    if (F == 0) return launch_rows(ctx, k, E, rows, event);
    if ((st = launch_rows(ctx, k, E, rows, NULL)) != CLF_OK) return st;
    beta = 1.0f;
  }
  /* out [rows, E] = patches [rows, F] @ weight[E, F]^T (+ out). */
  return clf__sgemm(ctx, 0, 1, rows, E, F, 1.0f, patches, 0, F, 0, weight->buf, weight->offset, F, 0, beta,
                    out->buf, out->offset, E, 0, 1, event);
}

/* shift mod n as a non-negative amount (n > 0). */
static size_t wrap_shift(long shift, size_t n) {
  long m = (long)(n > (size_t)LONG_MAX ? LONG_MAX : n);
  long r = shift % m;
  return (size_t)(r < 0 ? r + m : r);
}

clf_status clf_roll(clf_context *ctx, const clf_tensor *x, long shift_h, long shift_w, clf_tensor *y,
                    cl_event *event) {
  static const char op[] = "clf_roll";
  clf_status st;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "x", x, CLF_F32, 4, 4)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "x", x)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "y", y, CLF_F32, 4, 4)) != CLF_OK) return st;
  if ((st = clf__check_same_shape(ctx, op, "x", x, "y", y)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "y", y)) != CLF_OK) return st;
  if ((st = no_overlap(ctx, op, "x", x, "y", y)) != CLF_OK) return st;
  const size_t B = x->shape[0], H = x->shape[1], W = x->shape[2], C = x->shape[3];
  clf__kernel *k;
  if ((st = clf__get_kernel(ctx, "patch", NULL, "roll_hw", &k)) != CLF_OK) return st;
  cl_uint h32 = (cl_uint)H, w32 = (cl_uint)W, c32 = (cl_uint)C, rows = (cl_uint)(B * H);
  cl_uint sh = H ? (cl_uint)wrap_shift(shift_h, H) : 0, sw = W ? (cl_uint)wrap_shift(shift_w, W) : 0;
  st = clf__set_args(ctx, k, 10, CLF__TARG(x), CLF__TARG(y), CLF__ARG(h32), CLF__ARG(w32), CLF__ARG(c32),
                     CLF__ARG(sh), CLF__ARG(sw), CLF__ARG(rows));
  if (st != CLF_OK) return st;
  return launch_rows(ctx, k, W * C, B * H, event);
}

/* Checks the map [B, H, W, C] and window of a partition/reverse pair. */
static clf_status check_map(clf_context *ctx, const char *op, const char *arg, const clf_tensor *t,
                            size_t window) {
  clf_status st;
  if ((st = clf__check_tensor(ctx, op, arg, t, CLF_F32, 4, 4)) != CLF_OK) return st;
  if (window == 0) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: window is 0", op);
  return clf__check_fits_u32(ctx, op, arg, t);
}

/* Shared by partition (to_windows 1) and reverse (0). */
static clf_status window_op(clf_context *ctx, const char *op, const clf_tensor *map, const clf_tensor *win,
                            size_t window, size_t shift, int to_windows, cl_event *event) {
  clf_status st;
  const size_t B = map->shape[0], H = map->shape[1], W = map->shape[2], C = map->shape[3];
  const size_t nwh = (H + window - 1) / window, nww = (W + window - 1) / window;
  const size_t T = window * window;
  if ((st = check_3d(ctx, op, to_windows ? "out" : "windows", win, B * nwh * nww, T, C)) != CLF_OK) return st;
  if (to_windows) st = no_overlap(ctx, op, "x", map, "out", win);
  else st = no_overlap(ctx, op, "windows", win, "out", map);
  if (st != CLF_OK) return st;
  clf__kernel *k;
  if ((st = row_kernel(ctx, to_windows ? "window_partition" : "window_reverse", &k)) != CLF_OK) return st;
  const size_t Hp = nwh * window, Wp = nww * window;
  cl_uint sh = Hp ? (cl_uint)(shift % Hp) : 0, sw = Wp ? (cl_uint)(shift % Wp) : 0;
  cl_uint h32 = (cl_uint)H, w32 = (cl_uint)W, c32 = (cl_uint)C, ws = (cl_uint)window;
  cl_uint nh32 = (cl_uint)nwh, nw32 = (cl_uint)nww;
  size_t rows = to_windows ? B * nwh * nww * T : B * H * W;
  cl_uint r32 = (cl_uint)rows;
  const clf_tensor *src = to_windows ? map : win, *dst = to_windows ? win : map;
  st = clf__set_args(ctx, k, 13, CLF__TARG(src), CLF__TARG(dst), CLF__ARG(h32), CLF__ARG(w32), CLF__ARG(c32),
                     CLF__ARG(ws), CLF__ARG(nh32), CLF__ARG(nw32), CLF__ARG(sh), CLF__ARG(sw), CLF__ARG(r32));
  if (st != CLF_OK) return st;
  return launch_row_items(ctx, k, C, rows, event);
}

clf_status clf_window_partition(clf_context *ctx, const clf_tensor *x, size_t window, size_t shift,
                                clf_tensor *out, cl_event *event) {
  static const char op[] = "clf_window_partition";
  clf_status st;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = check_map(ctx, op, "x", x, window)) != CLF_OK) return st;
  return window_op(ctx, op, x, out, window, shift, 1, event);
}

clf_status clf_window_reverse(clf_context *ctx, const clf_tensor *windows, size_t window, size_t shift,
                              clf_tensor *out, cl_event *event) {
  static const char op[] = "clf_window_reverse";
  clf_status st;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = check_map(ctx, op, "out", out, window)) != CLF_OK) return st;
  return window_op(ctx, op, out, windows, window, shift, 0, event);
}

clf_status clf_shifted_window_mask(clf_context *ctx, size_t hp, size_t wp, size_t window, size_t shift,
                                   clf_tensor *out, cl_event *event) {
  static const char op[] = "clf_shifted_window_mask";
  clf_status st;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if (window == 0) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: window is 0", op);
  if (hp % window || wp % window)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: the padded map %zu x %zu is not a multiple of the window %zu", op, hp,
                     wp, window);
  if (hp > UINT_MAX / 2 || wp > UINT_MAX / 2)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: hp and wp must be below 2^31", op);
  /* A shift past both sides puts every row and column in region 2, as the
   * largest side does: clamp it so the kernel's y + shift cannot wrap. */
  const size_t side = hp > wp ? hp : wp;
  if (shift > side) shift = side;
  const size_t T = window * window, nW = (hp / window) * (wp / window);
  if ((st = check_3d(ctx, op, "out", out, nW, T, T)) != CLF_OK) return st;
  clf__kernel *k;
  if ((st = clf__get_kernel(ctx, "patch", NULL, "shifted_window_mask", &k)) != CLF_OK) return st;
  cl_uint h32 = (cl_uint)hp, w32 = (cl_uint)wp, ws = (cl_uint)window, s32 = (cl_uint)shift;
  cl_uint rows = (cl_uint)(nW * T);
  st = clf__set_args(ctx, k, 7, CLF__TARG(out), CLF__ARG(h32), CLF__ARG(w32), CLF__ARG(ws), CLF__ARG(s32),
                     CLF__ARG(rows));
  if (st != CLF_OK) return st;
  return launch_rows(ctx, k, T, nW * T, event);
}

clf_status clf_relative_position_bias(clf_context *ctx, const clf_tensor *table, size_t window, clf_tensor *out,
                                      cl_event *event) {
  static const char op[] = "clf_relative_position_bias";
  clf_status st;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if (window == 0) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: window is 0", op);
  if ((st = clf__check_tensor(ctx, op, "table", table, CLF_F32, 2, 2)) != CLF_OK) return st;
  const size_t side = 2 * window - 1, nh = table->shape[1], T = window * window;
  if ((st = clf__check_dim(ctx, op, "table", table, 0, side * side)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "table", table)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "out", out, CLF_F32, 4, 4)) != CLF_OK) return st;
  if ((st = clf__check_dim(ctx, op, "out", out, 0, 1)) != CLF_OK) return st;
  if ((st = clf__check_dim(ctx, op, "out", out, 1, nh)) != CLF_OK) return st;
  if ((st = clf__check_dim(ctx, op, "out", out, 2, T)) != CLF_OK) return st;
  if ((st = clf__check_dim(ctx, op, "out", out, 3, T)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "out", out)) != CLF_OK) return st;
  if ((st = no_overlap(ctx, op, "table", table, "out", out)) != CLF_OK) return st;
  clf__kernel *k;
  if ((st = clf__get_kernel(ctx, "patch", NULL, "relative_position_bias", &k)) != CLF_OK) return st;
  cl_uint ws = (cl_uint)window, nh32 = (cl_uint)nh;
  st = clf__set_args(ctx, k, 6, CLF__TARG(table), CLF__TARG(out), CLF__ARG(ws), CLF__ARG(nh32));
  if (st != CLF_OK) return st;
  return launch_rows(ctx, k, T, nh * T, event);
}

clf_status clf_patch_merge(clf_context *ctx, const clf_tensor *x, clf_tensor *out, cl_event *event) {
  static const char op[] = "clf_patch_merge";
  clf_status st;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "x", x, CLF_F32, 4, 4)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "x", x)) != CLF_OK) return st;
  const size_t B = x->shape[0], H = x->shape[1], W = x->shape[2], C = x->shape[3];
  const size_t H2 = (H + 1) / 2, W2 = (W + 1) / 2;
  if ((st = check_3d(ctx, op, "out", out, B, H2 * W2, 4 * C)) != CLF_OK) return st;
  if ((st = no_overlap(ctx, op, "x", x, "out", out)) != CLF_OK) return st;
  clf__kernel *k;
  if ((st = row_kernel(ctx, "patch_merge", &k)) != CLF_OK) return st;
  cl_uint h32 = (cl_uint)H, w32 = (cl_uint)W, c32 = (cl_uint)C, h2 = (cl_uint)H2, w2 = (cl_uint)W2;
  cl_uint rows4 = (cl_uint)(B * H2 * W2 * 4);
  st = clf__set_args(ctx, k, 10, CLF__TARG(x), CLF__TARG(out), CLF__ARG(h32), CLF__ARG(w32), CLF__ARG(c32),
                     CLF__ARG(h2), CLF__ARG(w2), CLF__ARG(rows4));
  if (st != CLF_OK) return st;
  return launch_row_items(ctx, k, C, B * H2 * W2 * 4, event);
}

/* The canonical options string of the MAE index dtypes (i32 is the default,
 * so at most four variants of the family exist). */
static const char *mae_options(int keep64, int rest64) {
  static const char *const opts[4] = {NULL, "-DCLF_REST_I64=1", "-DCLF_KEEP_I64=1",
                                      "-DCLF_KEEP_I64=1 -DCLF_REST_I64=1"};
  return opts[(keep64 ? 2 : 0) + (rest64 ? 1 : 0)];
}

/* Checks an i32/i64 index tensor [d0, d1]. */
static clf_status check_ids(clf_context *ctx, const char *op, const char *arg, const clf_tensor *t, size_t d0,
                            size_t d1) {
  clf_status st;
  if ((st = clf__check_tensor(ctx, op, arg, t, -1, 2, 2)) != CLF_OK) return st;
  if (t->dtype != CLF_I32 && t->dtype != CLF_I64)
    return clf__fail(ctx, CLF_E_DTYPE, "%s: %s is %s, expected i32 or i64", op, arg, clf_dtype_name(t->dtype));
  if ((st = clf__check_dim(ctx, op, arg, t, 0, d0)) != CLF_OK) return st;
  if ((st = clf__check_dim(ctx, op, arg, t, 1, d1)) != CLF_OK) return st;
  return clf__check_fits_u32(ctx, op, arg, t);
}

clf_status clf_mae_random_masking(clf_context *ctx, const clf_tensor *noise, size_t keep, clf_tensor *ids_keep,
                                  clf_tensor *ids_restore, clf_tensor *mask, cl_event *event) {
  static const char op[] = "clf_mae_random_masking";
  clf_status st;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "noise", noise, CLF_F32, 2, 2)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "noise", noise)) != CLF_OK) return st;
  const size_t B = noise->shape[0], L = noise->shape[1];
  if (keep > L) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: keep is %zu but noise has only %zu patches per row",
                                 op, keep, L);
  if (ids_keep && (st = check_ids(ctx, op, "ids_keep", ids_keep, B, keep)) != CLF_OK) return st;
  if (ids_restore && (st = check_ids(ctx, op, "ids_restore", ids_restore, B, L)) != CLF_OK) return st;
  if (mask) {
    if ((st = clf__check_tensor(ctx, op, "mask", mask, CLF_F32, 2, 2)) != CLF_OK) return st;
    if ((st = clf__check_same_shape(ctx, op, "noise", noise, "mask", mask)) != CLF_OK) return st;
  }
  const clf_tensor *outs[3] = {ids_keep, ids_restore, mask};
  static const char *const names[3] = {"ids_keep", "ids_restore", "mask"};
  for (int i = 0; i < 3; i++) {
    if (!outs[i]) continue;
    if ((st = no_overlap(ctx, op, "noise", noise, names[i], outs[i])) != CLF_OK) return st;
    for (int j = 0; j < i; j++)
      if (outs[j] && (st = no_overlap(ctx, op, names[j], outs[j], names[i], outs[i])) != CLF_OK) return st;
  }
  const int keep64 = ids_keep && ids_keep->dtype == CLF_I64;
  const int rest64 = ids_restore && ids_restore->dtype == CLF_I64;
  clf__kernel *k;
  if ((st = clf__get_kernel(ctx, "patch", mae_options(keep64, rest64), "mae_random_masking", &k)) != CLF_OK)
    return st;
  /* A NULL output is replaced by the noise buffer and its flag cleared. */
  const clf_tensor *pk = ids_keep ? ids_keep : noise, *pr = ids_restore ? ids_restore : noise;
  const clf_tensor *pm = mask ? mask : noise;
  cl_int hk = ids_keep != NULL, hr = ids_restore != NULL, hm = mask != NULL;
  cl_uint l32 = (cl_uint)L, k32 = (cl_uint)keep;
  st = clf__set_args(ctx, k, 13, CLF__TARG(noise), CLF__ARG(l32), CLF__ARG(k32), CLF__TARG(pk), CLF__ARG(hk),
                     CLF__TARG(pr), CLF__ARG(hr), CLF__TARG(pm), CLF__ARG(hm));
  if (st != CLF_OK) return st;
  /* One group per row; 256 items rank a row of 196 (ViT-B/16) in one pass. */
  size_t local = clf__wg_1d(ctx, k, 256);
  size_t global = (hk || hr || hm) && L ? B * local : 0;
  return clf__launch(ctx, k, 1, &global, &local, event);
}

clf_status clf_mae_unshuffle(clf_context *ctx, const clf_tensor *x, size_t src_row, const clf_tensor *mask_token,
                             const clf_tensor *ids_restore, size_t keep, clf_tensor *out, size_t dst_row,
                             cl_event *event) {
  static const char op[] = "clf_mae_unshuffle";
  clf_status st;
  char b1[96];
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "x", x, CLF_F32, 3, 3)) != CLF_OK) return st;
  if ((st = clf__check_fits_u32(ctx, op, "x", x)) != CLF_OK) return st;
  const size_t B = x->shape[0], Lx = x->shape[1], D = x->shape[2];
  if (src_row > Lx || keep > Lx - src_row)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: x has shape %s: src_row %zu + keep %zu exceeds its %zu rows", op,
                     clf__shape_str(x, b1, sizeof(b1)), src_row, keep, Lx);
  if ((st = clf__check_tensor(ctx, op, "mask_token", mask_token, CLF_F32, 1, 1)) != CLF_OK) return st;
  if ((st = clf__check_dim(ctx, op, "mask_token", mask_token, 0, D)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "ids_restore", ids_restore, -1, 2, 2)) != CLF_OK) return st;
  const size_t L = ids_restore->shape[1];
  if ((st = check_ids(ctx, op, "ids_restore", ids_restore, B, L)) != CLF_OK) return st;
  if ((st = clf__check_tensor(ctx, op, "out", out, CLF_F32, 3, 3)) != CLF_OK) return st;
  if ((st = clf__check_dim(ctx, op, "out", out, 0, B)) != CLF_OK) return st;
  if ((st = clf__check_dim(ctx, op, "out", out, 2, D)) != CLF_OK) return st;
  const size_t Lo = out->shape[1];
  if (dst_row > Lo || L > Lo - dst_row)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: out has shape %s: dst_row %zu + L %zu exceeds its %zu rows", op,
                     clf__shape_str(out, b1, sizeof(b1)), dst_row, L, Lo);
  if ((st = clf__check_fits_u32(ctx, op, "out", out)) != CLF_OK) return st;
  if ((st = no_overlap(ctx, op, "x", x, "out", out)) != CLF_OK) return st;
  if ((st = no_overlap(ctx, op, "mask_token", mask_token, "out", out)) != CLF_OK) return st;
  if ((st = no_overlap(ctx, op, "ids_restore", ids_restore, "out", out)) != CLF_OK) return st;
  clf__kernel *k;
  const char *opts = mae_options(0, ids_restore->dtype == CLF_I64);
  if ((st = clf__get_kernel(ctx, "patch", opts, "mae_unshuffle", &k)) != CLF_OK) return st;
  cl_uint d32 = (cl_uint)D, l32 = (cl_uint)L, lx = (cl_uint)Lx, lo = (cl_uint)Lo, sr = (cl_uint)src_row;
  cl_uint dr = (cl_uint)dst_row, k32 = (cl_uint)keep, rows = (cl_uint)(B * L);
  st = clf__set_args(ctx, k, 16, CLF__TARG(x), CLF__TARG(mask_token), CLF__TARG(ids_restore), CLF__TARG(out),
                     CLF__ARG(d32), CLF__ARG(l32), CLF__ARG(lx), CLF__ARG(lo), CLF__ARG(sr), CLF__ARG(dr),
                     CLF__ARG(k32), CLF__ARG(rows));
  if (st != CLF_OK) return st;
  return launch_rows(ctx, k, D, B * L, event);
}
