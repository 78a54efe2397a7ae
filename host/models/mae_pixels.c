/* mae_pixels.c - ViTMAE's predicted patches back to an image: the inverse of
 * the loss's per-patch normalisation and of its patchify order (p, q, c).
 */
#include "model.h"

#include "base/checked.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Mean and std (unbiased variance + 1e-6, as the loss) of patch (h, w) of
 * image x [C, H, W] over all its P*P*C values. */
static void patch_stats(const float *x, size_t C, size_t H, size_t W, size_t P, size_t h, size_t w, double *mean,
                        double *std) {
  double s = 0, s2 = 0;
  const size_t n = P * P * C;
  for (size_t c = 0; c < C; c++)
    for (size_t p = 0; p < P; p++)
      for (size_t q = 0; q < P; q++) {
        double v = x[(c * H + h * P + p) * W + w * P + q];
        s += v;
        s2 += v * v;
      }
  *mean = s / n;
  *std = sqrt((s2 - s * s / n) / (n - 1) + 1e-6); /* torch.var is unbiased */
}

static clf_status check_args(clf_model *m, const char *op, const clf_array *px, const clf_array *lg, size_t P,
                             size_t C) {
  if (!px || !lg || !px->data || !lg->data)
    return clf__fail(m->ctx, CLF_E_INVALID_ARG, "%s: pixel_values or logits is NULL", op);
  if (px->dtype != CLF_F32 || lg->dtype != CLF_F32)
    return clf__fail(m->ctx, CLF_E_DTYPE, "%s: pixel_values and logits must be f32", op);
  if (px->ndim != 4 || px->shape[1] != C || px->shape[2] % P || px->shape[3] % P || px->shape[2] == 0 ||
      px->shape[3] == 0)
    return clf__fail(m->ctx, CLF_E_SHAPE, "%s: pixel_values must be [B, %zu, H, W] with H and W multiples of %zu",
                     op, C, P);
  const size_t L = (px->shape[2] / P) * (px->shape[3] / P);
  if (lg->ndim != 3 || lg->shape[0] != px->shape[0] || lg->shape[1] != L || lg->shape[2] != P * P * C)
    return clf__fail(m->ctx, CLF_E_SHAPE, "%s: logits must be [%zu, %zu, %zu] for these pixel_values", op,
                     px->shape[0], L, P * P * C);
  return CLF_OK;
}

clf_status clf_model_mae_reconstruct(clf_model *m, const clf_array *pixel_values, const clf_array *logits,
                                     clf_array *out) {
  static const char op[] = "clf_model_mae_reconstruct";
  size_t P, C, bytes;
  int norm_pix;
  clf_status st;
  if (!out) return clf__fail(m ? m->ctx : NULL, CLF_E_INVALID_ARG, "%s: out is NULL", op);
  memset(out, 0, sizeof *out);
  if ((st = clf__vit_mae_geometry(m, op, &P, &C, &norm_pix)) != CLF_OK ||
      (st = check_args(m, op, pixel_values, logits, P, C)) != CLF_OK)
    return st;
  const size_t B = pixel_values->shape[0], H = pixel_values->shape[2], W = pixel_values->shape[3];
  const size_t nh = H / P, nw = W / P, F = P * P * C;
  if (!clf__mul_ok(clf_array_numel(pixel_values), sizeof(float), &bytes) || !(out->data = malloc(bytes)))
    return clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
  float *y = out->data;
  for (size_t b = 0; b < B; b++) {
    const float *x = (const float *)pixel_values->data + b * C * H * W;
    const float *pred = (const float *)logits->data + b * nh * nw * F;
    float *yb = y + b * C * H * W;
    for (size_t h = 0; h < nh; h++)
      for (size_t w = 0; w < nw; w++) {
        double mean = 0, std = 1;
        if (norm_pix) patch_stats(x, C, H, W, P, h, w, &mean, &std);
        const float *pp = pred + (h * nw + w) * F;
        for (size_t p = 0; p < P; p++)
          for (size_t q = 0; q < P; q++)
            for (size_t c = 0; c < C; c++)
              yb[(c * H + h * P + p) * W + w * P + q] = (float)(pp[(p * P + q) * C + c] * std + mean);
      }
  }
  snprintf(out->name, sizeof out->name, "reconstruction");
  out->dtype = CLF_F32;
  out->ndim = 4;
  memcpy(out->shape, pixel_values->shape, 4 * sizeof(size_t));
  return CLF_OK;
}
