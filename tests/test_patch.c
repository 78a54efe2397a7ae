/* test_patch.c - patchify/unpatchify, patch embedding, roll, Swin windows,
 * shifted-window masks, relative position bias, patch merging and MAE masking
 * against plain CPU references that follow the Hugging Face code.
 *
 * The references follow transformers' modeling_vit_mae.py (ViTMAEEmbeddings.
 * random_masking, ViTMAEForPreTraining.patchify/unpatchify, ViTMAEDecoder's
 * gather of ids_restore) and modeling_swin.py (SwinLayer.maybe_pad / torch.roll
 * / window_partition / window_reverse / get_attn_mask, SwinSelfAttention's
 * relative_position_index, SwinPatchMerging), written out as loops.
 * Data movement is exact, so those tests demand bit equality (tolerance 0).
 */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "harness.h"
#include "ops/ops.h" /* clf__scratch, for the Oclgrind workaround in patch_embed_vs_conv */

static int small(void) { return getenv("CLF_TEST_UNDER_OCLGRIND") != NULL; }

static float *falloc(size_t n) {
  float *p = calloc(n ? n : 1, sizeof(float));
  ck_assert_ptr_nonnull(p);
  return p;
}

/* A tensor holding v everywhere, written from the host.  Outputs start as a
 * sentinel (-12345) so that an element an op fails to write shows in the
 * comparison.  Writing it with clEnqueueWriteBuffer (not a fill) also keeps
 * Oclgrind 21.10's --uninitialized checker right: it loses track of kernel
 * stores into a buffer that reuses the id of a smaller released one, and of
 * buffers set with clEnqueueFillBuffer, and would then report a kernel that
 * reads another kernel's output as reading uninitialised memory. */
static clf_tensor *host_tensor(clf_dtype dt, int ndim, const size_t *shape, const long *vals, double v) {
  size_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  char *h = malloc((n ? n : 1) * 8);
  ck_assert_ptr_nonnull(h);
  for (size_t i = 0; i < n; i++) {
    double x = vals ? (double)vals[i] : v;
    if (dt == CLF_F32) ((float *)h)[i] = (float)x;
    else if (dt == CLF_I32) ((int32_t *)h)[i] = (int32_t)x;
    else ((int64_t *)h)[i] = (int64_t)x;
  }
  clf_tensor *t = th_tensor(dt, ndim, shape, h);
  free(h);
  return t;
}
static clf_tensor *filled(clf_dtype dt, int ndim, const size_t *shape, double v) {
  return host_tensor(dt, ndim, shape, NULL, v);
}
static clf_tensor *zeros(clf_dtype dt, int ndim, const size_t *shape) { return filled(dt, ndim, shape, 0.0); }
#define SENTINEL (-12345.0)

/* Asserts an op's event came back, waits for it and releases it. */
static void wait_event(cl_event ev) {
  ck_assert_ptr_nonnull(ev);
  ck_assert_int_eq(clWaitForEvents(1, &ev), CL_SUCCESS);
  clReleaseEvent(ev);
}

/* Python's a % n (result in [0, n)). */
static long pmod(long a, long n) { return ((a % n) + n) % n; }

/* ------------------------------------------------------------------------ */
/* patchify / unpatchify */

/* img.reshape(B, C, Hn, p, Wn, p) permuted to (b, h, w, [c, i, j] or
 * [i, j, c]) ("nchpwq->nhwpqc" for PQC; the Conv2d weight order for CPQ). */
static void ref_patchify(const float *img, size_t B, size_t C, size_t H, size_t W, size_t p, int pqc,
                         float *out, int inverse) {
  size_t Hn = H / p, Wn = W / p, N = Hn * Wn, F = C * p * p;
  for (size_t b = 0; b < B; b++)
    for (size_t py = 0; py < Hn; py++)
      for (size_t px = 0; px < Wn; px++)
        for (size_t c = 0; c < C; c++)
          for (size_t i = 0; i < p; i++)
            for (size_t j = 0; j < p; j++) {
              size_t f = pqc ? (i * p + j) * C + c : (c * p + i) * p + j;
              size_t o = (b * N + py * Wn + px) * F + f, s = ((b * C + c) * H + py * p + i) * W + px * p + j;
              if (inverse) ((float *)img)[s] = out[o];
              else out[o] = img[s];
            }
}

static void check_patchify(size_t B, size_t C, size_t H, size_t W, size_t p, int pqc) {
  size_t n = B * C * H * W, N = (H / p) * (W / p), F = C * p * p;
  float *img = th_rand(n, 11 + (uint32_t)p, -1.0f, 1.0f), *x = th_rand(n, 12 + (uint32_t)p, -1.0f, 1.0f);
  float *ref = falloc(n), *ref_img = falloc(n);
  clf_patch_order order = pqc ? CLF_PATCH_PQC : CLF_PATCH_CPQ;
  ref_patchify(img, B, C, H, W, p, pqc, ref, 0);
  clf_tensor *ti = th_tensor(CLF_F32, 4, TH_SHAPE(B, C, H, W), img);
  clf_tensor *to = filled(CLF_F32, 3, TH_SHAPE(B, N, F), SENTINEL);
  clf_tensor *tx = th_tensor(CLF_F32, 3, TH_SHAPE(B, N, F), x);
  clf_tensor *tr = filled(CLF_F32, 4, TH_SHAPE(B, C, H, W), SENTINEL);
  TH_OK(clf_patchify(th_ctx, ti, p, order, to, NULL));
  float *got = th_download(to);
  ck_assert_msg(th_max_abs_diff(got, ref, n) == 0.0, "patchify B%zu C%zu %zux%zu p%zu %s", B, C, H, W, p,
                pqc ? "PQC" : "CPQ");
  /* Round trip: unpatchify(patchify(img)) == img. */
  TH_OK(clf_unpatchify(th_ctx, to, p, order, tr, NULL));
  float *back = th_download(tr);
  TH_CLOSE(back, img, n, 0.0);
  free(back);
  /* unpatchify of arbitrary patches vs the reference's inverse. */
  ref_patchify(ref_img, B, C, H, W, p, pqc, x, 1);
  TH_OK(clf_unpatchify(th_ctx, tx, p, order, tr, NULL));
  back = th_download(tr);
  TH_CLOSE(back, ref_img, n, 0.0);
  free(back); free(got); free(img); free(x); free(ref); free(ref_img);
  clf_tensor_destroy(ti); clf_tensor_destroy(to); clf_tensor_destroy(tx); clf_tensor_destroy(tr);
}

START_TEST(patchify_orders_and_sizes) {
  static const size_t ps[] = {1, 2, 4, 16};
  for (int pqc = 0; pqc < 2; pqc++)
    for (size_t k = 0; k < 4; k++)
      for (size_t C = 1; C <= 3; C += 2) {
        size_t p = ps[k];
        /* Non-square grids; for p = 1 a 7-wide row makes groups span rows. */
        size_t hn = p == 16 ? (small() ? 1 : 3) : 5, wn = p == 16 ? 2 : 7;
        check_patchify(2, C, hn * p, wn * p, p, pqc);
      }
  /* F = 3 * 32 * 32 > the local tile: the untiled path. */
  check_patchify(1, 3, 32, 64, 32, 0);
  check_patchify(1, 3, 32, 64, 32, 1);
  /* Batch 3 with one patch per image, and a single pixel. */
  check_patchify(3, 3, 4, 4, 4, 1);
  check_patchify(1, 1, 1, 1, 1, 0);
}
END_TEST

/* Patchify and its inverse on the context th_with_context made. */
static void patch_small_cases(void) {
  check_patchify(2, 3, 8, 12, 4, 0); /* F 48: tiled, several patches a group */
  check_patchify(1, 3, 32, 16, 16, 1); /* F 768 */
  check_patchify(1, 3, 32, 64, 32, 0); /* F 3072: untiled */
}

/* A GPU's choices under an embedded-profile device's 1 KiB of local memory
 * and 32 work-items: the tile shrinks to 128 floats (8 KiB of it would not
 * launch), and F = 768 takes the untiled path. */
START_TEST(patchify_small_device) {
  th_with_context("gpu", "wg=32,local=1k", patch_small_cases);
  th_with_context("gpu", "local=16k", patch_small_cases);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* patch_embed: a direct strided convolution */

/* A view at element offset `off` of a new tensor whose first off elements are
 * 99 and whose rest holds data (n floats). */
static clf_tensor *at_offset(const float *data, size_t n, size_t off, int ndim, const size_t *shape) {
  float *h = falloc(off + n);
  for (size_t i = 0; i < off + n; i++) h[i] = i < off ? 99.0f : data[i - off];
  clf_tensor *base = th_tensor(CLF_F32, 1, TH_SHAPE(off + n), h), *v = NULL;
  TH_OK(clf_tensor_view(base, off, ndim, shape, &v));
  clf_tensor_destroy(base);
  free(h);
  return v;
}

/* flags: 1 with bias, 2 every tensor a view at an odd element offset. */
static void check_patch_embed(size_t B, size_t C, size_t H, size_t W, size_t p, size_t E, int flags) {
  const int with_bias = flags & 1;
  const size_t off = flags & 2 ? 7 : 0;
  size_t Hn = H / p, Wn = W / p, N = Hn * Wn;
  float *img = th_rand(B * C * H * W, 21, -1.0f, 1.0f), *w = th_rand(E * C * p * p, 22, -0.2f, 0.2f);
  float *bias = th_rand(E, 23, -1.0f, 1.0f), *ref = falloc(B * N * E);
  /* Conv2d(C, E, kernel = stride = p), flattened and transposed to [B, N, E]. */
  for (size_t b = 0; b < B; b++)
    for (size_t py = 0; py < Hn; py++)
      for (size_t px = 0; px < Wn; px++)
        for (size_t e = 0; e < E; e++) {
          double acc = with_bias ? bias[e] : 0.0;
          for (size_t c = 0; c < C; c++)
            for (size_t i = 0; i < p; i++)
              for (size_t j = 0; j < p; j++)
                acc += (double)w[((e * C + c) * p + i) * p + j] * img[((b * C + c) * H + py * p + i) * W + px * p + j];
          ref[(b * N + py * Wn + px) * E + e] = (float)acc;
        }
  float *sent = falloc(B * N * E);
  for (size_t i = 0; i < B * N * E; i++) sent[i] = (float)SENTINEL;
  clf_tensor *ti = at_offset(img, B * C * H * W, off, 4, TH_SHAPE(B, C, H, W));
  clf_tensor *tw = at_offset(w, E * C * p * p, off + 2, 4, TH_SHAPE(E, C, p, p));
  clf_tensor *tb = at_offset(bias, E, off + 4, 1, TH_SHAPE(E));
  clf_tensor *to = at_offset(sent, B * N * E, off, 3, TH_SHAPE(B, N, E));
  free(sent);
  TH_OK(clf_patch_embed(th_ctx, ti, tw, with_bias ? tb : NULL, to, NULL));
  float *got = th_download(to);
  /* f32 GEMM over K = C*p*p <= 768 products of magnitude <= 0.2: ~1e-5 of
   * the output's scale; 1e-4 leaves room for CLBlast's summation order. */
  TH_CLOSE(got, ref, B * N * E, 1e-4);
  free(got); free(img); free(w); free(bias); free(ref);
  clf_tensor_destroy(ti); clf_tensor_destroy(tw); clf_tensor_destroy(tb); clf_tensor_destroy(to);
}

START_TEST(patch_embed_vs_conv) {
  /* Under Oclgrind, grow the patch scratch once to the largest size used
   * here and fill it from the host, so the buffer the patches are written
   * to does not hit the Oclgrind bug described at filled(). */
  if (small()) {
    cl_mem m;
    size_t n = 2 * 6 * 768;
    float *z = falloc(n);
    TH_OK(clf__scratch(th_ctx, CLF__SCRATCH_PATCH, n * sizeof(float), &m));
    cl_int err = clEnqueueWriteBuffer(clf_context_queue(th_ctx), m, CL_TRUE, 0, n * sizeof(float), z, 0, NULL, NULL);
    ck_assert_int_eq(err, CL_SUCCESS);
    free(z);
  }
  check_patch_embed(2, 3, 32, 48, 16, small() ? 7 : 33, 1);
  check_patch_embed(2, 3, 32, 48, 16, 7, 0);
  check_patch_embed(1, 1, 12, 8, 4, 5, 1);
  check_patch_embed(2, 3, 8, 12, 4, 9, 3); /* views at offsets */
  check_patch_embed(3, 3, 7, 5, 1, 4, 0);
  if (!small()) check_patch_embed(1, 3, 64, 64, 16, 197, 1);
  /* No channels: out is the bias. */
  check_patch_embed(1, 0, 4, 4, 2, 3, 1);
  check_patch_embed(1, 0, 4, 4, 2, 3, 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* roll */

/* torch.roll(x, (sh, sw), dims=(1, 2)) on [B, H, W, C]. */
static void ref_roll(const float *x, size_t B, size_t H, size_t W, size_t C, long sh, long sw, float *y) {
  for (size_t b = 0; b < B; b++)
    for (size_t h = 0; h < H; h++)
      for (size_t w = 0; w < W; w++)
        for (size_t c = 0; c < C; c++) {
          size_t h2 = (size_t)pmod((long)h + sh, (long)H), w2 = (size_t)pmod((long)w + sw, (long)W);
          y[((b * H + h2) * W + w2) * C + c] = x[((b * H + h) * W + w) * C + c];
        }
}

static void check_roll(size_t B, size_t H, size_t W, size_t C, long sh, long sw) {
  size_t n = B * H * W * C;
  float *x = th_rand(n, 31, -1.0f, 1.0f), *ref = falloc(n);
  ref_roll(x, B, H, W, C, sh, sw, ref);
  clf_tensor *tx = th_tensor(CLF_F32, 4, TH_SHAPE(B, H, W, C), x);
  clf_tensor *ty = filled(CLF_F32, 4, TH_SHAPE(B, H, W, C), SENTINEL);
  TH_OK(clf_roll(th_ctx, tx, sh, sw, ty, NULL));
  float *got = th_download(ty);
  ck_assert_msg(th_max_abs_diff(got, ref, n) == 0.0, "roll %zux%zu by (%ld, %ld)", H, W, sh, sw);
  free(got); free(x); free(ref);
  clf_tensor_destroy(tx); clf_tensor_destroy(ty);
}

START_TEST(roll_shifts) {
  /* Zero, positive, negative and larger-than-size shifts. */
  static const long shifts[][2] = {{0, 0}, {1, 2}, {-3, 5}, {10, -13}, {-5, -7}, {-12, 22}};
  for (size_t s = 0; s < sizeof(shifts) / sizeof(shifts[0]); s++) check_roll(2, 5, 7, 3, shifts[s][0], shifts[s][1]);
  check_roll(1, 3, 33, small() ? 8 : 96, -1, -17); /* a wide row: W * C = 33 * 96 */
  check_roll(1, 1, 1, 1, 5, -3);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Swin windows */

/* Copies the top-left min(H, Hd) x min(W, Wd) of src [B, H, W, C] into dst
 * [B, Hd, Wd, C] (zeros elsewhere): maybe_pad, or the crop after a reverse. */
static void ref_pad_crop(const float *src, size_t B, size_t H, size_t W, size_t C, float *dst, size_t Hd,
                         size_t Wd) {
  memset(dst, 0, B * Hd * Wd * C * sizeof(float));
  for (size_t b = 0; b < B; b++)
    for (size_t h = 0; h < H && h < Hd; h++)
      for (size_t w = 0; w < W && w < Wd; w++)
        for (size_t c = 0; c < C; c++) dst[((b * Hd + h) * Wd + w) * C + c] = src[((b * H + h) * W + w) * C + c];
}

/* window_partition (to_win) or window_reverse between map [B, Hp, Wp, C] and
 * windows: map.view(B, Hp/ws, ws, Wp/ws, ws, C).permute(0, 1, 3, 2, 4, 5). */
static void ref_windows(float *map, size_t B, size_t Hp, size_t Wp, size_t C, size_t ws, float *win, int to_win) {
  size_t nh = Hp / ws, nw = Wp / ws;
  for (size_t b = 0; b < B; b++)
    for (size_t wy = 0; wy < nh; wy++)
      for (size_t wx = 0; wx < nw; wx++)
        for (size_t ty = 0; ty < ws; ty++)
          for (size_t tx = 0; tx < ws; tx++)
            for (size_t c = 0; c < C; c++) {
              size_t wi = ((((b * nh + wy) * nw + wx) * ws + ty) * ws + tx) * C + c;
              size_t mi = ((b * Hp + wy * ws + ty) * Wp + wx * ws + tx) * C + c;
              if (to_win) win[wi] = map[mi];
              else map[mi] = win[wi];
            }
}

/* SwinLayer: maybe_pad (zeros at the bottom/right), torch.roll(-s, -s),
 * window_partition. */
static void ref_window_partition(const float *x, size_t B, size_t H, size_t W, size_t C, size_t ws, size_t s,
                                 float *out) {
  size_t Hp = (H + ws - 1) / ws * ws, Wp = (W + ws - 1) / ws * ws;
  float *pad = falloc(B * Hp * Wp * C), *rolled = falloc(B * Hp * Wp * C);
  ref_pad_crop(x, B, H, W, C, pad, Hp, Wp);
  ref_roll(pad, B, Hp, Wp, C, -(long)s, -(long)s, rolled);
  ref_windows(rolled, B, Hp, Wp, C, ws, out, 1);
  free(pad); free(rolled);
}

/* window_reverse, torch.roll(+s, +s), crop to H x W. */
static void ref_window_reverse(const float *win, size_t B, size_t H, size_t W, size_t C, size_t ws, size_t s,
                               float *out) {
  size_t Hp = (H + ws - 1) / ws * ws, Wp = (W + ws - 1) / ws * ws;
  float *map = falloc(B * Hp * Wp * C), *rolled = falloc(B * Hp * Wp * C);
  ref_windows(map, B, Hp, Wp, C, ws, (float *)win, 0);
  ref_roll(map, B, Hp, Wp, C, (long)s, (long)s, rolled);
  ref_pad_crop(rolled, B, Hp, Wp, C, out, H, W);
  free(map); free(rolled);
}

static void check_windows(size_t B, size_t H, size_t W, size_t C, size_t ws, size_t s) {
  size_t nW = B * ((H + ws - 1) / ws) * ((W + ws - 1) / ws), n = B * H * W * C, nw_el = nW * ws * ws * C;
  float *x = th_rand(n, 41, -1.0f, 1.0f), *wr = th_rand(nw_el, 42, -1.0f, 1.0f);
  float *ref = falloc(nw_el), *ref_back = falloc(n);
  ref_window_partition(x, B, H, W, C, ws, s, ref);
  ref_window_reverse(wr, B, H, W, C, ws, s, ref_back);
  clf_tensor *tx = th_tensor(CLF_F32, 4, TH_SHAPE(B, H, W, C), x);
  clf_tensor *tw = filled(CLF_F32, 3, TH_SHAPE(nW, ws * ws, C), SENTINEL);
  clf_tensor *twr = th_tensor(CLF_F32, 3, TH_SHAPE(nW, ws * ws, C), wr);
  clf_tensor *ty = filled(CLF_F32, 4, TH_SHAPE(B, H, W, C), SENTINEL);
  cl_event ev = NULL;
  TH_OK(clf_window_partition(th_ctx, tx, ws, s, tw, &ev));
  wait_event(ev);
  float *got = th_download(tw);
  ck_assert_msg(th_max_abs_diff(got, ref, nw_el) == 0.0, "partition %zux%zu ws %zu shift %zu", H, W, ws, s);
  TH_OK(clf_window_reverse(th_ctx, tw, ws, s, ty, NULL));
  float *back = th_download(ty);
  ck_assert_msg(th_max_abs_diff(back, x, n) == 0.0, "round trip %zux%zu ws %zu shift %zu", H, W, ws, s);
  free(back);
  TH_OK(clf_window_reverse(th_ctx, twr, ws, s, ty, NULL));
  back = th_download(ty);
  ck_assert_msg(th_max_abs_diff(back, ref_back, n) == 0.0, "reverse %zux%zu ws %zu shift %zu", H, W, ws, s);
  free(back); free(got); free(x); free(wr); free(ref); free(ref_back);
  clf_tensor_destroy(tx); clf_tensor_destroy(tw); clf_tensor_destroy(twr); clf_tensor_destroy(ty);
}

START_TEST(windows_partition_reverse) {
  check_windows(2, 7, 10, 3, 4, 0); /* needs padding to 8 x 12 */
  check_windows(2, 7, 10, 3, 4, 2);
  check_windows(1, 8, 8, 5, 4, 2);  /* no padding */
  check_windows(1, 14, 14, small() ? 8 : 96, 7, 3);
  check_windows(3, 5, 3, 2, 7, 3); /* window larger than the map */
  check_windows(1, 9, 9, 1, 1, 0); /* 1x1 windows */
  check_windows(1, 6, 9, 4, 3, 5); /* shift beyond the window: torch.roll still defines it */
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Shifted-window mask */

/* A Python slice bound for a sequence of length n: negative counts from the
 * end; the result is clipped to [0, n]. */
static long py_bound(long v, long n) {
  if (v < 0) v += n;
  return v < 0 ? 0 : v > n ? n : v;
}

/* SwinLayer.get_attn_mask: img_mask regions from the slices (0, -ws),
 * (-ws, -s), (-s, None), counted row-major; window_partition; attn_mask =
 * mw.unsqueeze(1) - mw.unsqueeze(2), i.e. [w, i, j] = mw[w, j] - mw[w, i],
 * then != 0 -> -100, == 0 -> 0.  (HF skips it for shift 0: all zeros.) */
static void ref_swin_mask(size_t hp, size_t wp, size_t ws, size_t s, float *out) {
  float *img = falloc(hp * wp);
  /* The slices as (start, stop); stop LONG_MAX is None.  -0 is 0. */
  long sl[3][2] = {{0, -(long)ws}, {-(long)ws, -(long)s}, {-(long)s, LONG_MAX}}, H = (long)hp, W = (long)wp;
  float count = 0;
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++, count += 1)
      for (long y = py_bound(sl[a][0], H); y < (sl[a][1] == LONG_MAX ? H : py_bound(sl[a][1], H)); y++)
        for (long x = py_bound(sl[b][0], W); x < (sl[b][1] == LONG_MAX ? W : py_bound(sl[b][1], W)); x++)
          img[y * W + x] = count;
  size_t nh = hp / ws, nw = wp / ws, T = ws * ws;
  float *mw = falloc(nh * nw * T);
  ref_windows(img, 1, hp, wp, 1, ws, mw, 1);
  for (size_t w = 0; w < nh * nw; w++)
    for (size_t i = 0; i < T; i++)
      for (size_t j = 0; j < T; j++) {
        float d = s ? mw[w * T + j] - mw[w * T + i] : 0.0f;
        out[(w * T + i) * T + j] = d != 0.0f ? -100.0f : 0.0f;
      }
  free(img); free(mw);
}

/* Runs the op and returns the mask (malloc'd), checked against the reference. */
static float *check_mask(size_t hp, size_t wp, size_t ws, size_t s) {
  size_t nW = (hp / ws) * (wp / ws), T = ws * ws, n = nW * T * T;
  float *ref = falloc(n);
  ref_swin_mask(hp, wp, ws, s, ref);
  clf_tensor *t = filled(CLF_F32, 3, TH_SHAPE(nW, T, T), SENTINEL);
  TH_OK(clf_shifted_window_mask(th_ctx, hp, wp, ws, s, t, NULL));
  float *got = th_download(t);
  ck_assert_msg(th_max_abs_diff(got, ref, n) == 0.0, "mask %zux%zu ws %zu shift %zu", hp, wp, ws, s);
  free(ref);
  clf_tensor_destroy(t);
  return got;
}

START_TEST(swin_shifted_mask) {
  free(check_mask(8, 8, 4, 2));
  free(check_mask(8, 12, 4, 2));
  free(check_mask(4, 4, 4, 2)); /* one window: the (0, -ws) slice is empty */
  free(check_mask(21, 14, 7, 3));
  free(check_mask(8, 8, 4, 5)); /* shift beyond the window: Python's slice semantics */
  free(check_mask(8, 12, 4, 13)); /* beyond both sides */
  float *z = check_mask(8, 8, 4, 0);
  ck_assert_msg(th_max_abs(z, 4 * 16 * 16) == 0.0, "shift 0 must give all zeros");
  free(z);
  /* 14x14, ws 7, shift 3: per window the count of -100 entries.  Window (0,0)
   * is one region; (0,1) and (1,0) split 28/21 tokens: 2*28*21 = 1176;
   * (1,1) has groups 16/12/12/9: 49^2 - (256+144+144+81) = 1776. */
  float *m = check_mask(14, 14, 7, 3);
  static const size_t want[4] = {0, 1176, 1176, 1776};
  for (size_t w = 0; w < 4; w++) {
    size_t cnt = 0;
    for (size_t e = 0; e < 49 * 49; e++) {
      float v = m[w * 49 * 49 + e];
      ck_assert(v == 0.0f || v == -100.0f);
      cnt += v != 0.0f;
    }
    ck_assert_msg(cnt == want[w], "window %zu has %zu masked pairs, expected %zu", w, cnt, want[w]);
  }
  /* Token 0 of window 3 (region (1,1)) is masked from token 48 (region (2,2)). */
  ck_assert(m[3 * 49 * 49 + 48] == -100.0f && m[3 * 49 * 49 + 0] == 0.0f);
  free(m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Relative position bias */

START_TEST(swin_relative_position_bias) {
  static const size_t wss[] = {1, 2, 7};
  for (size_t k = 0; k < 3; k++) {
    size_t ws = wss[k], nh = k == 1 ? 1 : 3, T = ws * ws, rows = (2 * ws - 1) * (2 * ws - 1);
    float *table = th_rand(rows * nh, 51 + (uint32_t)k, -1.0f, 1.0f), *ref = falloc(nh * T * T);
    /* coords = stack(meshgrid(arange(ws), arange(ws), 'ij')).flatten(1);
     * rel = coords[:, :, None] - coords[:, None, :] permuted to [T, T, 2];
     * rel[..., 0] += ws-1; rel[..., 1] += ws-1; rel[..., 0] *= 2ws-1; sum. */
    for (size_t i = 0; i < T; i++)
      for (size_t j = 0; j < T; j++) {
        /* coords[:, t] = (t // ws, t % ws) */
        long r0 = (long)(i / ws) - (long)(j / ws), r1 = (long)(i % ws) - (long)(j % ws);
        r0 += (long)ws - 1;
        r1 += (long)ws - 1;
        r0 *= 2 * (long)ws - 1;
        long idx = r0 + r1;
        ck_assert(idx >= 0 && idx < (long)rows);
        for (size_t h = 0; h < nh; h++) ref[(h * T + i) * T + j] = table[idx * (long)nh + (long)h];
      }
    clf_tensor *tt = th_tensor(CLF_F32, 2, TH_SHAPE(rows, nh), table);
    clf_tensor *to = filled(CLF_F32, 4, TH_SHAPE(1, nh, T, T), SENTINEL);
    TH_OK(clf_relative_position_bias(th_ctx, tt, ws, to, NULL));
    float *got = th_download(to);
    ck_assert_msg(th_max_abs_diff(got, ref, nh * T * T) == 0.0, "relative bias ws %zu", ws);
    free(got); free(table); free(ref);
    clf_tensor_destroy(tt); clf_tensor_destroy(to);
  }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Patch merging */

/* SwinPatchMerging: maybe_pad to even H, W; cat(x[0::2,0::2], x[1::2,0::2],
 * x[0::2,1::2], x[1::2,1::2], -1).view(B, -1, 4C). */
static void check_merge(size_t B, size_t H, size_t W, size_t C) {
  size_t Hp = H + H % 2, Wp = W + W % 2, H2 = Hp / 2, W2 = Wp / 2, n = B * H * W * C, no = B * H2 * W2 * 4 * C;
  float *x = th_rand(n, 61, -1.0f, 1.0f), *pad = falloc(B * Hp * Wp * C), *ref = falloc(no);
  ref_pad_crop(x, B, H, W, C, pad, Hp, Wp);
  static const size_t dy[4] = {0, 1, 0, 1}, dx[4] = {0, 0, 1, 1};
  for (size_t b = 0; b < B; b++)
    for (size_t oy = 0; oy < H2; oy++)
      for (size_t ox = 0; ox < W2; ox++)
        for (size_t q = 0; q < 4; q++)
          for (size_t c = 0; c < C; c++)
            ref[((b * H2 + oy) * W2 + ox) * 4 * C + q * C + c] =
                pad[((b * Hp + 2 * oy + dy[q]) * Wp + 2 * ox + dx[q]) * C + c];
  clf_tensor *tx = th_tensor(CLF_F32, 4, TH_SHAPE(B, H, W, C), x);
  clf_tensor *to = filled(CLF_F32, 3, TH_SHAPE(B, H2 * W2, 4 * C), SENTINEL);
  TH_OK(clf_patch_merge(th_ctx, tx, to, NULL));
  float *got = th_download(to);
  ck_assert_msg(th_max_abs_diff(got, ref, no) == 0.0, "merge %zux%zu C %zu", H, W, C);
  free(got); free(x); free(pad); free(ref);
  clf_tensor_destroy(tx); clf_tensor_destroy(to);
}

START_TEST(swin_patch_merge) {
  check_merge(2, 5, 7, 3); /* odd H and W */
  check_merge(1, 4, 6, 8);
  check_merge(1, 1, 1, 1);
  check_merge(2, 7, 4, small() ? 8 : 96);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* MAE random masking and unshuffle */

/* Reads an i32 or i64 tensor as longs (malloc'd). */
static long *download_ids(const clf_tensor *t) {
  size_t n = clf_tensor_numel(t);
  void *raw = th_download(t);
  long *v = malloc((n ? n : 1) * sizeof(long));
  for (size_t i = 0; i < n; i++)
    v[i] = clf_tensor_dtype(t) == CLF_I64 ? (long)((int64_t *)raw)[i] : (long)((int32_t *)raw)[i];
  free(raw);
  return v;
}

/* Sort order of torch.sort: ascending, NaN last; equal values by index
 * (a stable sort), as the API promises. */
static int noise_before(float u, size_t j, float v, size_t i) {
  if (isnan(u) || isnan(v)) return isnan(u) && isnan(v) ? j < i : isnan(v);
  return u < v || (u == v && j < i);
}

/* ViTMAEEmbeddings.random_masking: ids_shuffle = argsort(noise) (here by a
 * stable insertion sort), ids_restore = argsort(ids_shuffle), ids_keep =
 * ids_shuffle[:, :keep], mask = gather([0]*keep + [1]*(L-keep), ids_restore). */
static void ref_mae(const float *noise, size_t B, size_t L, size_t keep, long *ids_keep, long *ids_restore,
                    float *mask) {
  size_t *sh = malloc((L ? L : 1) * sizeof(size_t));
  for (size_t b = 0; b < B; b++) {
    const float *nz = noise + b * L;
    for (size_t i = 0; i < L; i++) {
      size_t k = i;
      while (k > 0 && noise_before(nz[i], i, nz[sh[k - 1]], sh[k - 1])) {
        sh[k] = sh[k - 1];
        k--;
      }
      sh[k] = i;
    }
    for (size_t r = 0; r < L; r++) {
      ids_restore[b * L + sh[r]] = (long)r;
      mask[b * L + sh[r]] = r < keep ? 0.0f : 1.0f;
      if (r < keep) ids_keep[b * keep + r] = (long)sh[r];
    }
  }
  free(sh);
}

/* Runs the masking with the outputs selected by `which` (bit 0 ids_keep,
 * bit 1 ids_restore, bit 2 mask) and checks each against the reference. */
static void check_mae(const float *noise, size_t B, size_t L, size_t keep, clf_dtype kdt, clf_dtype rdt,
                      int which) {
  long *rk = malloc((B * keep + 1) * sizeof(long)), *rr = malloc((B * L + 1) * sizeof(long));
  float *rm = falloc(B * L);
  ref_mae(noise, B, L, keep, rk, rr, rm);
  clf_tensor *tn = th_tensor(CLF_F32, 2, TH_SHAPE(B, L), noise);
  clf_tensor *tk = filled(kdt, 2, TH_SHAPE(B, keep), SENTINEL), *tr = filled(rdt, 2, TH_SHAPE(B, L), SENTINEL);
  clf_tensor *tm = filled(CLF_F32, 2, TH_SHAPE(B, L), SENTINEL);
  TH_OK(clf_mae_random_masking(th_ctx, tn, keep, (which & 1) ? tk : NULL, (which & 2) ? tr : NULL,
                               (which & 4) ? tm : NULL, NULL));
  for (int o = 0; o < 2; o++) {
    if (!(which & (1 << o))) continue;
    long *g = download_ids(o ? tr : tk), *r = o ? rr : rk;
    for (size_t i = 0; i < B * (o ? L : keep); i++)
      ck_assert_msg(g[i] == r[i], "%s[%zu] = %ld, expected %ld (L %zu keep %zu)", o ? "ids_restore" : "ids_keep", i,
                    g[i], r[i], L, keep);
    free(g);
  }
  if (which & 4) {
    float *g = th_download(tm);
    TH_CLOSE(g, rm, B * L, 0.0);
    free(g);
  }
  free(rk); free(rr); free(rm);
  clf_tensor_destroy(tn); clf_tensor_destroy(tk); clf_tensor_destroy(tr); clf_tensor_destroy(tm);
}

START_TEST(mae_masking_vs_sort) {
  size_t B = 3, L = 37;
  float *noise = th_rand(B * L, 71, 0.0f, 1.0f);
  check_mae(noise, B, L, 9, CLF_I32, CLF_I32, 7);
  check_mae(noise, B, L, 9, CLF_I64, CLF_I64, 7);
  check_mae(noise, B, L, 9, CLF_I64, CLF_I32, 7);
  check_mae(noise, B, L, 9, CLF_I32, CLF_I64, 7);
  /* Every output optional: each alone, pairs, none. */
  for (int which = 0; which < 7; which++) check_mae(noise, B, L, 20, CLF_I64, CLF_I32, which);
  check_mae(noise, B, L, 0, CLF_I32, CLF_I32, 7);
  check_mae(noise, B, L, L, CLF_I32, CLF_I32, 7);
  /* Ties: values from {0, 0.25, 0.5}, ranked by index; all equal: identity. */
  for (size_t i = 0; i < B * L; i++) noise[i] = floorf(noise[i] * 3.0f) * 0.25f;
  check_mae(noise, B, L, 12, CLF_I32, CLF_I64, 7);
  for (size_t i = 0; i < B * L; i++) noise[i] = 0.5f;
  check_mae(noise, B, L, 12, CLF_I64, CLF_I32, 7);
  /* NaN sorts last, as in torch.sort. */
  noise[3] = NAN;
  noise[L + 1] = NAN;
  noise[L + 2] = -INFINITY;
  check_mae(noise, B, L, 30, CLF_I32, CLF_I32, 7);
  free(noise);
  /* Rows longer than the work-group and the local tile (ViT-B/16: 196). */
  size_t L2 = small() ? 300 : 1000, B2 = 2;
  float *n2 = th_rand(B2 * L2, 72, 0.0f, 1.0f);
  check_mae(n2, B2, L2, L2 / 4, CLF_I64, CLF_I64, 7);
  free(n2);
  float *n3 = th_rand(4 * 196, 73, 0.0f, 1.0f);
  check_mae(n3, 4, 196, 49, CLF_I64, CLF_I64, 7);
  free(n3);
}
END_TEST

static void check_unshuffle(clf_dtype dt, size_t B, size_t L, size_t keep, size_t D, size_t src_row,
                            size_t dst_row, int bad_ids) {
  size_t Lx = src_row + keep + 2, Lo = dst_row + L + 1;
  float *x = th_rand(B * Lx * D, 81, -1.0f, 1.0f), *tok = th_rand(D, 82, 2.0f, 3.0f);
  float *init = th_rand(B * Lo * D, 83, 5.0f, 6.0f), *ref = falloc(B * Lo * D);
  long *ids = malloc(B * L * sizeof(long));
  /* Per row a permutation of [0, L) (rotate by b, reversed). */
  for (size_t b = 0; b < B; b++)
    for (size_t i = 0; i < L; i++) ids[b * L + i] = (long)((L - 1 - i + b) % L);
  if (bad_ids && L >= 2) { ids[0] = -1; ids[1] = (long)L + 5; }
  memcpy(ref, init, B * Lo * D * sizeof(float));
  /* x_ = cat(x[:, src_row : src_row + keep], mask tokens); gather(x_, ids). */
  for (size_t b = 0; b < B; b++)
    for (size_t i = 0; i < L; i++) {
      long r = ids[b * L + i];
      for (size_t d = 0; d < D; d++)
        ref[(b * Lo + dst_row + i) * D + d] =
            r >= 0 && r < (long)keep ? x[(b * Lx + src_row + (size_t)r) * D + d] : tok[d];
    }
  clf_tensor *tx = th_tensor(CLF_F32, 3, TH_SHAPE(B, Lx, D), x), *tt = th_tensor(CLF_F32, 1, TH_SHAPE(D), tok);
  clf_tensor *ti = host_tensor(dt, 2, TH_SHAPE(B, L), ids, 0), *to = th_tensor(CLF_F32, 3, TH_SHAPE(B, Lo, D), init);
  TH_OK(clf_mae_unshuffle(th_ctx, tx, src_row, tt, ti, keep, to, dst_row, NULL));
  float *got = th_download(to);
  /* Rows outside [dst_row, dst_row + L) keep their contents. */
  TH_CLOSE(got, ref, B * Lo * D, 0.0);
  free(got); free(x); free(tok); free(init); free(ref); free(ids);
  clf_tensor_destroy(tx); clf_tensor_destroy(tt); clf_tensor_destroy(ti); clf_tensor_destroy(to);
}

START_TEST(mae_unshuffle_rows) {
  check_unshuffle(CLF_I32, 2, 7, 3, 33, 1, 1, 0); /* CLS row at 0 on both sides, as the decoder */
  check_unshuffle(CLF_I64, 2, 7, 3, 33, 0, 2, 0);
  check_unshuffle(CLF_I64, 3, 16, 4, small() ? 16 : 128, 1, 1, 0);
  check_unshuffle(CLF_I32, 1, 5, 5, 1, 2, 0, 0);  /* keep everything */
  check_unshuffle(CLF_I32, 1, 5, 0, 8, 0, 0, 0);  /* keep nothing */
  check_unshuffle(CLF_I64, 2, 6, 3, 9, 1, 1, 1);  /* out-of-range ids give the mask token */
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Empty tensors and events */

START_TEST(empty_and_events) {
  cl_event e1 = NULL, e2 = NULL, e3 = NULL, e4 = NULL, e5 = NULL;
  clf_tensor *img = th_empty(CLF_F32, 4, TH_SHAPE(0, 3, 8, 8)), *pat = th_empty(CLF_F32, 3, TH_SHAPE(0, 4, 48));
  clf_tensor *w = zeros(CLF_F32, 4, TH_SHAPE(5, 3, 4, 4)), *emb = th_empty(CLF_F32, 3, TH_SHAPE(0, 4, 5));
  clf_tensor *m0 = th_empty(CLF_F32, 4, TH_SHAPE(2, 0, 5, 3)), *m1 = th_empty(CLF_F32, 4, TH_SHAPE(2, 0, 5, 3));
  clf_tensor *wins = th_empty(CLF_F32, 3, TH_SHAPE(0, 16, 3)), *mg = th_empty(CLF_F32, 3, TH_SHAPE(2, 0, 12));
  clf_tensor *mask0 = th_empty(CLF_F32, 3, TH_SHAPE(0, 16, 16)), *nz = th_empty(CLF_F32, 2, TH_SHAPE(0, 9));
  clf_tensor *rk = th_empty(CLF_I32, 2, TH_SHAPE(0, 3)), *n1 = filled(CLF_F32, 2, TH_SHAPE(1, 1), 0.5);
  TH_OK(clf_patchify(th_ctx, img, 4, CLF_PATCH_CPQ, pat, &e1));
  TH_OK(clf_unpatchify(th_ctx, pat, 4, CLF_PATCH_PQC, img, NULL));
  TH_OK(clf_patch_embed(th_ctx, img, w, NULL, emb, &e2));
  TH_OK(clf_roll(th_ctx, m0, 3, -1, m1, NULL));
  TH_OK(clf_window_partition(th_ctx, m0, 4, 2, wins, NULL));
  TH_OK(clf_window_reverse(th_ctx, wins, 4, 2, m0, &e3));
  TH_OK(clf_patch_merge(th_ctx, m0, mg, NULL));
  TH_OK(clf_shifted_window_mask(th_ctx, 0, 8, 4, 2, mask0, NULL));
  TH_OK(clf_mae_random_masking(th_ctx, nz, 3, rk, NULL, NULL, &e4));
  /* No output at all: nothing to do, the event still comes. */
  TH_OK(clf_mae_random_masking(th_ctx, n1, 1, NULL, NULL, NULL, &e5));
  wait_event(e1); wait_event(e2); wait_event(e3); wait_event(e4); wait_event(e5);
  clf_tensor *objs[] = {img, pat, w, emb, m0, m1, wins, mg, mask0, nz, rk, n1};
  for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++) clf_tensor_destroy(objs[i]);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Bad arguments */

START_TEST(bad_patch_arguments) {
  clf_tensor *img = zeros(CLF_F32, 4, TH_SHAPE(2, 3, 8, 12)), *out = zeros(CLF_F32, 3, TH_SHAPE(2, 6, 48));
  clf_tensor *img_odd = zeros(CLF_F32, 4, TH_SHAPE(2, 3, 9, 12)), *img_i = zeros(CLF_I32, 4, TH_SHAPE(2, 3, 8, 12));
  clf_tensor *img3 = zeros(CLF_F32, 3, TH_SHAPE(3, 8, 12)), *out_n = zeros(CLF_F32, 3, TH_SHAPE(2, 5, 48));
  clf_tensor *out_f = zeros(CLF_F32, 3, TH_SHAPE(2, 6, 16)), *out_b = zeros(CLF_F32, 3, TH_SHAPE(1, 6, 48));
  TH_FAILS(clf_patchify(th_ctx, NULL, 4, CLF_PATCH_CPQ, out, NULL), CLF_E_INVALID_ARG, "img is NULL");
  TH_FAILS(clf_patchify(th_ctx, img, 4, CLF_PATCH_CPQ, NULL, NULL), CLF_E_INVALID_ARG, "out is NULL");
  TH_FAILS(clf_patchify(th_ctx, img_i, 4, CLF_PATCH_CPQ, out, NULL), CLF_E_DTYPE, "img is i32");
  TH_FAILS(clf_patchify(th_ctx, img3, 4, CLF_PATCH_CPQ, out, NULL), CLF_E_SHAPE, "img has shape [3, 8, 12]");
  TH_FAILS(clf_patchify(th_ctx, img_odd, 4, CLF_PATCH_CPQ, out, NULL), CLF_E_SHAPE, "multiples of the patch 4");
  TH_FAILS(clf_patchify(th_ctx, img, 0, CLF_PATCH_CPQ, out, NULL), CLF_E_INVALID_ARG, "patch is 0");
  TH_FAILS(clf_patchify(th_ctx, img, 4, (clf_patch_order)7, out, NULL), CLF_E_INVALID_ARG, "order");
  TH_FAILS(clf_patchify(th_ctx, img, 4, CLF_PATCH_CPQ, out_n, NULL), CLF_E_SHAPE, "out has shape [2, 5, 48]");
  TH_FAILS(clf_patchify(th_ctx, img, 4, CLF_PATCH_CPQ, out_f, NULL), CLF_E_SHAPE, "out has shape [2, 6, 16]");
  TH_FAILS(clf_patchify(th_ctx, img, 4, CLF_PATCH_CPQ, out_b, NULL), CLF_E_SHAPE, "out has shape [1, 6, 48]");
  ck_assert_int_eq(clf_patchify(NULL, img, 4, CLF_PATCH_CPQ, out, NULL), CLF_E_INVALID_ARG);
  TH_FAILS(clf_unpatchify(th_ctx, NULL, 4, CLF_PATCH_PQC, img, NULL), CLF_E_INVALID_ARG, "x is NULL");
  TH_FAILS(clf_unpatchify(th_ctx, out, 4, CLF_PATCH_PQC, NULL, NULL), CLF_E_INVALID_ARG, "img is NULL");
  TH_FAILS(clf_unpatchify(th_ctx, out_f, 4, CLF_PATCH_PQC, img, NULL), CLF_E_SHAPE, "x has shape [2, 6, 16]");
  TH_FAILS(clf_unpatchify(th_ctx, out, 4, CLF_PATCH_PQC, img_odd, NULL), CLF_E_SHAPE, "multiples of the patch");
  /* In place is impossible: img and out share memory. */
  clf_tensor *alias = NULL;
  TH_OK(clf_tensor_view(img, 0, 3, TH_SHAPE(2, 6, 48), &alias));
  TH_FAILS(clf_patchify(th_ctx, img, 4, CLF_PATCH_CPQ, alias, NULL), CLF_E_INVALID_ARG, "out overlaps img");

  /* patch_embed */
  clf_tensor *w = zeros(CLF_F32, 4, TH_SHAPE(5, 3, 4, 4)), *bias = zeros(CLF_F32, 1, TH_SHAPE(5));
  clf_tensor *emb = zeros(CLF_F32, 3, TH_SHAPE(2, 6, 5)), *w_c = zeros(CLF_F32, 4, TH_SHAPE(5, 2, 4, 4));
  clf_tensor *w_r = zeros(CLF_F32, 4, TH_SHAPE(5, 3, 4, 2)), *w2 = zeros(CLF_F32, 2, TH_SHAPE(5, 48));
  clf_tensor *bias4 = zeros(CLF_F32, 1, TH_SHAPE(4)), *emb_e = zeros(CLF_F32, 3, TH_SHAPE(2, 6, 4));
  TH_OK(clf_patch_embed(th_ctx, img, w, bias, emb, NULL));
  TH_FAILS(clf_patch_embed(th_ctx, NULL, w, bias, emb, NULL), CLF_E_INVALID_ARG, "img is NULL");
  TH_FAILS(clf_patch_embed(th_ctx, img, NULL, bias, emb, NULL), CLF_E_INVALID_ARG, "weight is NULL");
  TH_FAILS(clf_patch_embed(th_ctx, img, w, bias, NULL, NULL), CLF_E_INVALID_ARG, "out is NULL");
  TH_FAILS(clf_patch_embed(th_ctx, img, w_c, bias, emb, NULL), CLF_E_SHAPE, "channel counts differ");
  TH_FAILS(clf_patch_embed(th_ctx, img, w_r, bias, emb, NULL), CLF_E_SHAPE, "weight has shape [5, 3, 4, 2]");
  TH_FAILS(clf_patch_embed(th_ctx, img, w2, bias, emb, NULL), CLF_E_SHAPE, "weight has shape [5, 48]");
  TH_FAILS(clf_patch_embed(th_ctx, img_odd, w, bias, emb, NULL), CLF_E_SHAPE, "multiples of the patch 4");
  TH_FAILS(clf_patch_embed(th_ctx, img, w, bias4, emb, NULL), CLF_E_SHAPE, "bias has shape [4]");
  TH_FAILS(clf_patch_embed(th_ctx, img, w, img, emb, NULL), CLF_E_SHAPE, "bias has shape [2, 3, 8, 12]");
  TH_FAILS(clf_patch_embed(th_ctx, img, w, bias, emb_e, NULL), CLF_E_SHAPE, "out has shape [2, 6, 4]");
  TH_FAILS(clf_patch_embed(th_ctx, img_i, w, bias, emb, NULL), CLF_E_DTYPE, "img is i32");

  clf_tensor *objs[] = {img, out, img_odd, img_i, img3, out_n, out_f, out_b, alias,
                        w, bias, emb, w_c, w_r, w2, bias4, emb_e};
  for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++) clf_tensor_destroy(objs[i]);
}
END_TEST

START_TEST(bad_swin_arguments) {
  clf_tensor *x = zeros(CLF_F32, 4, TH_SHAPE(2, 7, 10, 3)), *y = zeros(CLF_F32, 4, TH_SHAPE(2, 7, 10, 3));
  clf_tensor *y2 = zeros(CLF_F32, 4, TH_SHAPE(2, 7, 10, 4)), *x3 = zeros(CLF_F32, 3, TH_SHAPE(7, 10, 3));
  clf_tensor *xi = zeros(CLF_I32, 4, TH_SHAPE(2, 7, 10, 3));
  /* roll */
  TH_FAILS(clf_roll(th_ctx, NULL, 1, 1, y, NULL), CLF_E_INVALID_ARG, "x is NULL");
  TH_FAILS(clf_roll(th_ctx, x, 1, 1, NULL, NULL), CLF_E_INVALID_ARG, "y is NULL");
  TH_FAILS(clf_roll(th_ctx, x, 1, 1, y2, NULL), CLF_E_SHAPE, "y has shape [2, 7, 10, 4]");
  TH_FAILS(clf_roll(th_ctx, x3, 1, 1, y, NULL), CLF_E_SHAPE, "x has shape [7, 10, 3]");
  TH_FAILS(clf_roll(th_ctx, xi, 1, 1, y, NULL), CLF_E_DTYPE, "x is i32");
  TH_FAILS(clf_roll(th_ctx, x, 1, 1, x, NULL), CLF_E_INVALID_ARG, "y overlaps x");
  ck_assert_int_eq(clf_roll(NULL, x, 1, 1, y, NULL), CLF_E_INVALID_ARG);
  /* window partition / reverse: 7x10 with ws 4 pads to 8x12, 2*2*3 windows */
  clf_tensor *win = zeros(CLF_F32, 3, TH_SHAPE(12, 16, 3)), *win_n = zeros(CLF_F32, 3, TH_SHAPE(8, 16, 3));
  clf_tensor *win_t = zeros(CLF_F32, 3, TH_SHAPE(12, 9, 3)), *win_c = zeros(CLF_F32, 3, TH_SHAPE(12, 16, 2));
  TH_OK(clf_window_partition(th_ctx, x, 4, 2, win, NULL));
  TH_FAILS(clf_window_partition(th_ctx, NULL, 4, 2, win, NULL), CLF_E_INVALID_ARG, "x is NULL");
  TH_FAILS(clf_window_partition(th_ctx, x, 4, 2, NULL, NULL), CLF_E_INVALID_ARG, "out is NULL");
  TH_FAILS(clf_window_partition(th_ctx, x, 0, 0, win, NULL), CLF_E_INVALID_ARG, "window is 0");
  TH_FAILS(clf_window_partition(th_ctx, x, 4, 2, win_n, NULL), CLF_E_SHAPE, "out has shape [8, 16, 3]");
  TH_FAILS(clf_window_partition(th_ctx, x, 4, 2, win_t, NULL), CLF_E_SHAPE, "out has shape [12, 9, 3]");
  TH_FAILS(clf_window_partition(th_ctx, x, 4, 2, win_c, NULL), CLF_E_SHAPE, "out has shape [12, 16, 2]");
  TH_FAILS(clf_window_partition(th_ctx, x3, 4, 2, win, NULL), CLF_E_SHAPE, "x has shape [7, 10, 3]");
  TH_FAILS(clf_window_partition(th_ctx, xi, 4, 2, win, NULL), CLF_E_DTYPE, "x is i32");
  TH_FAILS(clf_window_reverse(th_ctx, NULL, 4, 2, y, NULL), CLF_E_INVALID_ARG, "windows is NULL");
  TH_FAILS(clf_window_reverse(th_ctx, win, 4, 2, NULL, NULL), CLF_E_INVALID_ARG, "out is NULL");
  TH_FAILS(clf_window_reverse(th_ctx, win, 0, 2, y, NULL), CLF_E_INVALID_ARG, "window is 0");
  TH_FAILS(clf_window_reverse(th_ctx, win_n, 4, 2, y, NULL), CLF_E_SHAPE, "windows has shape [8, 16, 3]");
  TH_FAILS(clf_window_reverse(th_ctx, win, 4, 2, y2, NULL), CLF_E_SHAPE, "windows has shape [12, 16, 3]");
  /* shifted mask */
  clf_tensor *mask = zeros(CLF_F32, 3, TH_SHAPE(4, 16, 16)), *mask_b = zeros(CLF_F32, 3, TH_SHAPE(4, 16, 15));
  TH_FAILS(clf_shifted_window_mask(th_ctx, 8, 8, 4, 2, NULL, NULL), CLF_E_INVALID_ARG, "out is NULL");
  TH_FAILS(clf_shifted_window_mask(th_ctx, 8, 8, 0, 2, mask, NULL), CLF_E_INVALID_ARG, "window is 0");
  TH_FAILS(clf_shifted_window_mask(th_ctx, 7, 8, 4, 2, mask, NULL), CLF_E_SHAPE, "not a multiple of the window 4");
  TH_FAILS(clf_shifted_window_mask(th_ctx, 8, 8, 4, 2, mask_b, NULL), CLF_E_SHAPE, "out has shape [4, 16, 15]");
  TH_FAILS(clf_shifted_window_mask(th_ctx, 8, 16, 4, 2, mask, NULL), CLF_E_SHAPE, "out has shape [4, 16, 16], dim 0");
  /* relative position bias: ws 2 -> table [9, H], out [1, H, 4, 4] */
  clf_tensor *tab = zeros(CLF_F32, 2, TH_SHAPE(9, 3)), *tab_b = zeros(CLF_F32, 2, TH_SHAPE(8, 3));
  clf_tensor *rb = zeros(CLF_F32, 4, TH_SHAPE(1, 3, 4, 4)), *rb_h = zeros(CLF_F32, 4, TH_SHAPE(1, 2, 4, 4));
  clf_tensor *rb_3 = zeros(CLF_F32, 3, TH_SHAPE(3, 4, 4)), *rb_b = zeros(CLF_F32, 4, TH_SHAPE(2, 3, 4, 4));
  TH_OK(clf_relative_position_bias(th_ctx, tab, 2, rb, NULL));
  TH_FAILS(clf_relative_position_bias(th_ctx, NULL, 2, rb, NULL), CLF_E_INVALID_ARG, "table is NULL");
  TH_FAILS(clf_relative_position_bias(th_ctx, tab, 2, NULL, NULL), CLF_E_INVALID_ARG, "out is NULL");
  TH_FAILS(clf_relative_position_bias(th_ctx, tab, 0, rb, NULL), CLF_E_INVALID_ARG, "window is 0");
  TH_FAILS(clf_relative_position_bias(th_ctx, tab_b, 2, rb, NULL), CLF_E_SHAPE, "table has shape [8, 3]");
  TH_FAILS(clf_relative_position_bias(th_ctx, tab, 3, rb, NULL), CLF_E_SHAPE, "[9, 3], dim 0 must be 25");
  TH_FAILS(clf_relative_position_bias(th_ctx, tab, 2, rb_h, NULL), CLF_E_SHAPE, "out has shape [1, 2, 4, 4]");
  TH_FAILS(clf_relative_position_bias(th_ctx, tab, 2, rb_3, NULL), CLF_E_SHAPE, "out has shape [3, 4, 4]");
  TH_FAILS(clf_relative_position_bias(th_ctx, tab, 2, rb_b, NULL), CLF_E_SHAPE, "out has shape [2, 3, 4, 4]");
  /* patch merge: 7x10 -> 4*5 rows of 12 */
  clf_tensor *mg = zeros(CLF_F32, 3, TH_SHAPE(2, 20, 12)), *mg_r = zeros(CLF_F32, 3, TH_SHAPE(2, 15, 12));
  clf_tensor *mg_c = zeros(CLF_F32, 3, TH_SHAPE(2, 20, 6));
  TH_OK(clf_patch_merge(th_ctx, x, mg, NULL));
  TH_FAILS(clf_patch_merge(th_ctx, NULL, mg, NULL), CLF_E_INVALID_ARG, "x is NULL");
  TH_FAILS(clf_patch_merge(th_ctx, x, NULL, NULL), CLF_E_INVALID_ARG, "out is NULL");
  TH_FAILS(clf_patch_merge(th_ctx, x, mg_r, NULL), CLF_E_SHAPE, "out has shape [2, 15, 12]");
  TH_FAILS(clf_patch_merge(th_ctx, x, mg_c, NULL), CLF_E_SHAPE, "out has shape [2, 20, 6]");
  TH_FAILS(clf_patch_merge(th_ctx, xi, mg, NULL), CLF_E_DTYPE, "x is i32");
  TH_FAILS(clf_patch_merge(th_ctx, x3, mg, NULL), CLF_E_SHAPE, "x has shape [7, 10, 3]");
  clf_tensor *objs[] = {x, y, y2, x3, xi, win, win_n, win_t, win_c, mask, mask_b, tab, tab_b, rb, rb_h, rb_3,
                        rb_b, mg, mg_r, mg_c};
  for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++) clf_tensor_destroy(objs[i]);
}
END_TEST

START_TEST(bad_mae_arguments) {
  clf_tensor *nz = zeros(CLF_F32, 2, TH_SHAPE(2, 9)), *nz_i = zeros(CLF_I32, 2, TH_SHAPE(2, 9));
  clf_tensor *nz3 = zeros(CLF_F32, 3, TH_SHAPE(2, 9, 1));
  clf_tensor *keep = zeros(CLF_I64, 2, TH_SHAPE(2, 3)), *keep_b = zeros(CLF_I64, 2, TH_SHAPE(2, 4));
  clf_tensor *keep_f = zeros(CLF_F32, 2, TH_SHAPE(2, 3)), *rest = zeros(CLF_I32, 2, TH_SHAPE(2, 9));
  clf_tensor *rest_b = zeros(CLF_I32, 2, TH_SHAPE(1, 9)), *mask = zeros(CLF_F32, 2, TH_SHAPE(2, 9));
  clf_tensor *mask_b = zeros(CLF_F32, 2, TH_SHAPE(2, 8)), *mask_i = zeros(CLF_I32, 2, TH_SHAPE(2, 9));
  TH_FAILS(clf_mae_random_masking(th_ctx, NULL, 3, keep, rest, mask, NULL), CLF_E_INVALID_ARG, "noise is NULL");
  TH_FAILS(clf_mae_random_masking(th_ctx, nz_i, 3, keep, rest, mask, NULL), CLF_E_DTYPE, "noise is i32");
  TH_FAILS(clf_mae_random_masking(th_ctx, nz3, 3, keep, rest, mask, NULL), CLF_E_SHAPE, "noise has shape [2, 9, 1]");
  TH_FAILS(clf_mae_random_masking(th_ctx, nz, 10, NULL, rest, mask, NULL), CLF_E_INVALID_ARG, "keep is 10");
  TH_FAILS(clf_mae_random_masking(th_ctx, nz, 3, keep_b, rest, mask, NULL), CLF_E_SHAPE, "ids_keep has shape [2, 4]");
  TH_FAILS(clf_mae_random_masking(th_ctx, nz, 3, keep_f, rest, mask, NULL), CLF_E_DTYPE, "ids_keep is f32");
  TH_FAILS(clf_mae_random_masking(th_ctx, nz, 3, keep, rest_b, mask, NULL), CLF_E_SHAPE, "ids_restore has shape [1,");
  TH_FAILS(clf_mae_random_masking(th_ctx, nz, 3, keep, rest, mask_b, NULL), CLF_E_SHAPE, "mask has shape [2, 8]");
  TH_FAILS(clf_mae_random_masking(th_ctx, nz, 3, keep, rest, mask_i, NULL), CLF_E_DTYPE, "mask is i32");
  TH_FAILS(clf_mae_random_masking(th_ctx, nz, 3, keep, rest, nz, NULL), CLF_E_INVALID_ARG, "mask overlaps noise");
  ck_assert_int_eq(clf_mae_random_masking(NULL, nz, 3, keep, rest, mask, NULL), CLF_E_INVALID_ARG);
  /* unshuffle: x [2, 4, 5] with src_row 1 and keep 3; ids [2, 9]; out [2, 10, 5] */
  clf_tensor *x = zeros(CLF_F32, 3, TH_SHAPE(2, 4, 5)), *tok = zeros(CLF_F32, 1, TH_SHAPE(5));
  clf_tensor *tok_b = zeros(CLF_F32, 1, TH_SHAPE(4)), *out = zeros(CLF_F32, 3, TH_SHAPE(2, 10, 5));
  clf_tensor *out_d = zeros(CLF_F32, 3, TH_SHAPE(2, 10, 4)), *out_b = zeros(CLF_F32, 3, TH_SHAPE(3, 10, 5));
  clf_tensor *ids_f = zeros(CLF_F32, 2, TH_SHAPE(2, 9));
  TH_FAILS(clf_mae_unshuffle(th_ctx, NULL, 1, tok, rest, 3, out, 1, NULL), CLF_E_INVALID_ARG, "x is NULL");
  TH_FAILS(clf_mae_unshuffle(th_ctx, x, 1, NULL, rest, 3, out, 1, NULL), CLF_E_INVALID_ARG, "mask_token is NULL");
  TH_FAILS(clf_mae_unshuffle(th_ctx, x, 1, tok, NULL, 3, out, 1, NULL), CLF_E_INVALID_ARG, "ids_restore is NULL");
  TH_FAILS(clf_mae_unshuffle(th_ctx, x, 1, tok, rest, 3, NULL, 1, NULL), CLF_E_INVALID_ARG, "out is NULL");
  TH_FAILS(clf_mae_unshuffle(th_ctx, x, 2, tok, rest, 3, out, 1, NULL), CLF_E_SHAPE, "src_row 2 + keep 3");
  TH_FAILS(clf_mae_unshuffle(th_ctx, x, 1, tok, rest, 3, out, 2, NULL), CLF_E_SHAPE, "dst_row 2 + L 9");
  TH_FAILS(clf_mae_unshuffle(th_ctx, x, 1, tok_b, rest, 3, out, 1, NULL), CLF_E_SHAPE, "mask_token has shape [4]");
  TH_FAILS(clf_mae_unshuffle(th_ctx, x, 1, tok, rest_b, 3, out, 1, NULL), CLF_E_SHAPE, "ids_restore has shape [1, 9]");
  TH_FAILS(clf_mae_unshuffle(th_ctx, x, 1, tok, ids_f, 3, out, 1, NULL), CLF_E_DTYPE, "ids_restore is f32");
  TH_FAILS(clf_mae_unshuffle(th_ctx, x, 1, tok, rest, 3, out_d, 1, NULL), CLF_E_SHAPE, "out has shape [2, 10, 4]");
  TH_FAILS(clf_mae_unshuffle(th_ctx, x, 1, tok, rest, 3, out_b, 1, NULL), CLF_E_SHAPE, "out has shape [3, 10, 5]");
  TH_FAILS(clf_mae_unshuffle(th_ctx, nz, 1, tok, rest, 3, out, 1, NULL), CLF_E_SHAPE, "x has shape [2, 9]");
  ck_assert_int_eq(clf_mae_unshuffle(NULL, x, 1, tok, rest, 3, out, 1, NULL), CLF_E_INVALID_ARG);
  clf_tensor *objs[] = {nz, nz_i, nz3, keep, keep_b, keep_f, rest, rest_b, mask, mask_b, mask_i, x, tok, tok_b,
                        out, out_d, out_b, ids_f};
  for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++) clf_tensor_destroy(objs[i]);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("patch");
  TCase *tc = tcase_create("patch");
  tcase_add_test(tc, patchify_orders_and_sizes);
  tcase_add_test(tc, patchify_small_device);
  tcase_add_test(tc, patch_embed_vs_conv);
  tcase_add_test(tc, roll_shifts);
  tcase_add_test(tc, windows_partition_reverse);
  tcase_add_test(tc, swin_shifted_mask);
  tcase_add_test(tc, swin_relative_position_bias);
  tcase_add_test(tc, swin_patch_merge);
  tcase_add_test(tc, mae_masking_vs_sort);
  tcase_add_test(tc, mae_unshuffle_rows);
  tcase_add_test(tc, empty_and_events);
  tcase_add_test(tc, bad_patch_arguments);
  tcase_add_test(tc, bad_swin_arguments);
  tcase_add_test(tc, bad_mae_arguments);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
