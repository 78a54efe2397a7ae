/* cmd_vision.c - `clformer classify` (top-K labels of an image classifier)
 * and `clformer reconstruct` (ViTMAE's masked input and reconstruction side
 * by side as a PNG), from PNG/JPEG files preprocessed as the checkpoint says. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "clformer.h"

/* MODEL_DIR/config.json parsed, or NULL (message printed). */
static cJSON *read_config(const char *cmd, const char *dir) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/config.json", dir);
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "clformer %s: cannot open %s\n", cmd, path);
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *text = malloc(cap);
  size_t got;
  while (text && (got = fread(text + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (n + 1 == cap) {
      char *t = realloc(text, cap *= 2);
      if (!t) free(text);
      text = t;
    }
  }
  fclose(f);
  cJSON *root = NULL;
  if (text) {
    text[n] = '\0';
    root = cJSON_Parse(text);
    free(text);
  }
  if (!cJSON_IsObject(root)) {
    fprintf(stderr, "clformer %s: %s is not a JSON object\n", cmd, path);
    cJSON_Delete(root);
    return NULL;
  }
  return root;
}

/* ---- classify ---- */

static const char classify_usage[] =
    "usage: clformer classify MODEL_DIR IMAGE... [--device S] [--top K]\n"
    "Classifies PNG or JPEG images with the image classification model in\n"
    "MODEL_DIR (ViTForImageClassification, SwinForImageClassification, ...):\n"
    "each image is preprocessed as MODEL_DIR/preprocessor_config.json says\n"
    "(resize, rescale, normalize), the model's logits go through a softmax, and\n"
    "the K (default 5) most probable labels of config.json's id2label are\n"
    "printed with their probabilities, one block per image:\n"
    "  IMAGE\n"
    "    0.8123  label (id)\n";

typedef struct scored {
  double p;
  int id;
} scored;

static int cmp_scored(const void *a, const void *b) {
  const scored *x = a, *y = b;
  if (x->p != y->p) return x->p < y->p ? 1 : -1;
  return x->id - y->id;
}

int clf_cli_classify(int argc, char **argv) {
  const char *dir = NULL, *device = NULL;
  const char **paths = calloc((size_t)argc + 1, sizeof(char *));
  size_t n_img = 0;
  long top = 5;
  if (!paths) return 1;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(classify_usage, stdout);
      free(paths);
      return 0;
    } else if (!strcmp(a, "--device") && i + 1 < argc) {
      device = argv[++i];
    } else if (!strcmp(a, "--top") && i + 1 < argc) {
      char *end;
      top = strtol(argv[++i], &end, 10);
      if (*end || top < 1 || top > 100000) {
        fprintf(stderr, "clformer classify: --top takes a count of at least 1, got \"%s\"\n", argv[i]);
        free(paths);
        return 2;
      }
    } else if (a[0] != '-' && !dir) {
      dir = a;
    } else if (a[0] != '-') {
      paths[n_img++] = a;
    } else {
      fprintf(stderr, "clformer classify: unexpected argument %s\n%s", a, classify_usage);
      free(paths);
      return 2;
    }
  }
  if (!dir || n_img == 0) {
    fputs(classify_usage, stderr);
    free(paths);
    return 2;
  }

  int rc = 1;
  clf_image_processor proc;
  clf_array pv, logits;
  memset(&pv, 0, sizeof(pv));
  memset(&logits, 0, sizeof(logits));
  clf_context *ctx = NULL;
  clf_model *m = NULL;
  cJSON *config = NULL;
  /* Images first, so a bad file is reported before any model work; the
   * batch is [N, 3, H, W] (every image is resized to the processor's size). */
  if (clf_image_processor_load(dir, &proc) != CLF_OK) {
    fprintf(stderr, "clformer classify: %s\n", clf_last_error(NULL));
    goto out;
  }
  for (size_t i = 0; i < n_img; i++) {
    clf_image img;
    clf_array one;
    if (clf_image_read(paths[i], &img) != CLF_OK || clf_image_preprocess_with(&img, &proc, &one) != CLF_OK) {
      fprintf(stderr, "clformer classify: %s\n", clf_last_error(NULL));
      clf_image_free(&img);
      goto out;
    }
    clf_image_free(&img);
    size_t per = clf_array_numel(&one);
    if (i == 0) {
      pv = one;
      pv.shape[0] = n_img;
      void *d = realloc(pv.data, per * n_img * sizeof(float));
      if (!d) {
        fprintf(stderr, "clformer classify: out of memory\n");
        goto out;
      }
      pv.data = d;
    } else {
      if (one.shape[2] != pv.shape[2] || one.shape[3] != pv.shape[3]) {
        fprintf(stderr, "clformer classify: %s: preprocessed size differs from the first image's\n", paths[i]);
        clf_array_free(&one);
        goto out;
      }
      memcpy((float *)pv.data + per * i, one.data, per * sizeof(float));
      clf_array_free(&one);
    }
  }
  if (!(config = read_config("classify", dir))) goto out;
  if (!(ctx = clf_cli_open_context(device))) goto out;
  if (clf_model_load(ctx, dir, &m) != CLF_OK) {
    fprintf(stderr, "clformer classify: %s\n", clf_last_error(ctx));
    goto out;
  }
  const char *outs[1] = {"logits"};
  if (clf_model_run(m, &pv, 1, outs, 1, &logits) != CLF_OK) {
    fprintf(stderr, "clformer classify: %s\n", clf_last_error(ctx));
    goto out;
  }
  if (logits.dtype != CLF_F32 || logits.ndim != 2 || logits.shape[0] != n_img || logits.shape[1] == 0) {
    fprintf(stderr, "clformer classify: the model's logits are not [%zu, num_labels]\n", n_img);
    goto out;
  }
  size_t nl = logits.shape[1], k = (size_t)top < nl ? (size_t)top : nl;
  scored *s = malloc(sizeof(scored) * nl);
  if (!s) goto out;
  const cJSON *id2label = cJSON_GetObjectItemCaseSensitive(config, "id2label");
  for (size_t i = 0; i < n_img; i++) {
    const float *l = (const float *)logits.data + i * nl;
    double mx = l[0], sum = 0;
    for (size_t j = 1; j < nl; j++) mx = l[j] > mx ? l[j] : mx;
    for (size_t j = 0; j < nl; j++) sum += exp((double)l[j] - mx);
    for (size_t j = 0; j < nl; j++) s[j] = (scored){exp((double)l[j] - mx) / sum, (int)j};
    qsort(s, nl, sizeof(scored), cmp_scored);
    printf("%s\n", paths[i]);
    for (size_t j = 0; j < k; j++) {
      char key[32];
      snprintf(key, sizeof(key), "%d", s[j].id);
      const cJSON *lab = cJSON_GetObjectItemCaseSensitive(id2label, key);
      if (cJSON_IsString(lab))
        printf("  %.4f  %s (%d)\n", s[j].p, lab->valuestring, s[j].id);
      else
        printf("  %.4f  LABEL_%d (%d)\n", s[j].p, s[j].id, s[j].id);
    }
  }
  free(s);
  rc = 0;
out:
  clf_array_free(&pv);
  clf_array_free(&logits);
  clf_model_destroy(m);
  clf_context_destroy(ctx);
  cJSON_Delete(config);
  free(paths);
  return rc;
}

/* ---- reconstruct ---- */

static const char reconstruct_usage[] =
    "usage: clformer reconstruct MODEL_DIR IMAGE --out FILE.png [--noise FILE.npy]\n"
    "                            [--device S]\n"
    "Runs the ViTMAEForPreTraining model in MODEL_DIR on a PNG or JPEG image\n"
    "(preprocessed as preprocessor_config.json says) and writes FILE.png with\n"
    "three panels side by side: the resized original, the masked input (masked\n"
    "patches grey) and the reconstruction (visible patches from the input,\n"
    "masked ones from the model's prediction, un-normalised with the\n"
    "processor's mean and std; with norm_pix_loss, with each patch's own mean\n"
    "and variance too).  --noise gives the masking noise [1, num_patches]\n"
    "(float32 .npy) for a reproducible mask; without it the mask is random.\n";

static unsigned char to_byte(double v) {
  v = floor(v + 0.5);
  return (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
}

int clf_cli_reconstruct(int argc, char **argv) {
  const char *dir = NULL, *path = NULL, *out_path = NULL, *noise_path = NULL, *device = NULL;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(reconstruct_usage, stdout);
      return 0;
    } else if (!strcmp(a, "--out") && i + 1 < argc) {
      out_path = argv[++i];
    } else if (!strcmp(a, "--noise") && i + 1 < argc) {
      noise_path = argv[++i];
    } else if (!strcmp(a, "--device") && i + 1 < argc) {
      device = argv[++i];
    } else if (a[0] != '-' && !dir) {
      dir = a;
    } else if (a[0] != '-' && !path) {
      path = a;
    } else {
      fprintf(stderr, "clformer reconstruct: unexpected argument %s\n%s", a, reconstruct_usage);
      return 2;
    }
  }
  if (!dir || !path || !out_path) {
    if (dir && path) fprintf(stderr, "clformer reconstruct: --out FILE.png is required\n");
    fputs(reconstruct_usage, stderr);
    return 2;
  }
  int rc = 1;
  clf_image_processor proc;
  clf_image img = {0, 0, NULL}, shown = {0, 0, NULL}, panel = {0, 0, NULL};
  clf_array in[2], res[2];
  memset(in, 0, sizeof(in));
  memset(res, 0, sizeof(res));
  size_t n_in = 1;
  clf_context *ctx = NULL;
  clf_model *m = NULL;
  cJSON *config = NULL;
  if (clf_image_read(path, &img) != CLF_OK || clf_image_processor_load(dir, &proc) != CLF_OK ||
      clf_image_preprocess_with(&img, &proc, &in[0]) != CLF_OK ||
      (proc.do_resize ? clf_image_resize(&img, proc.width, proc.height, proc.resample, &shown)
                      : clf_image_resize(&img, img.width, img.height, CLF_RESAMPLE_BILINEAR, &shown)) != CLF_OK) {
    fprintf(stderr, "clformer reconstruct: %s\n", clf_last_error(NULL));
    goto out;
  }
  if (noise_path) {
    if (clf_npy_read(noise_path, &in[1]) != CLF_OK) {
      fprintf(stderr, "clformer reconstruct: %s\n", clf_last_error(NULL));
      goto out;
    }
    snprintf(in[1].name, sizeof(in[1].name), "noise");
    n_in = 2;
  }
  if (!(config = read_config("reconstruct", dir))) goto out;
  const cJSON *ps = cJSON_GetObjectItemCaseSensitive(config, "patch_size");
  const cJSON *npl = cJSON_GetObjectItemCaseSensitive(config, "norm_pix_loss");
  int norm_pix = cJSON_IsTrue(npl);
  size_t P = cJSON_IsNumber(ps) && ps->valuedouble >= 1 ? (size_t)ps->valuedouble : 0;
  size_t H = in[0].shape[2], W = in[0].shape[3];
  if (!P || H % P || W % P) {
    fprintf(stderr, "clformer reconstruct: %s/config.json: patch_size missing or not dividing %zu x %zu\n", dir,
            H, W);
    goto out;
  }
  if (!(ctx = clf_cli_open_context(device))) goto out;
  if (clf_model_load(ctx, dir, &m) != CLF_OK) {
    fprintf(stderr, "clformer reconstruct: %s\n", clf_last_error(ctx));
    goto out;
  }
  const char *outs[2] = {"logits", "mask"};
  if (clf_model_run(m, in, n_in, outs, 2, res) != CLF_OK) {
    fprintf(stderr, "clformer reconstruct: %s\n", clf_last_error(ctx));
    goto out;
  }
  size_t nh = H / P, nw = W / P, L = nh * nw, C = 3;
  if (res[0].dtype != CLF_F32 || res[0].ndim != 3 || res[0].shape[1] != L || res[0].shape[2] != P * P * C ||
      res[1].dtype != CLF_F32 || clf_array_numel(&res[1]) != L) {
    fprintf(stderr, "clformer reconstruct: the model's logits are not [1, %zu, %zu] (a ViTMAEForPreTraining "
            "model with 3 channels is needed)\n", L, P * P * C);
    goto out;
  }
  /* Three panels with 4 white columns between them. */
  size_t gap = 4, PW = 3 * W + 2 * gap;
  panel.width = (int)PW;
  panel.height = (int)H;
  panel.rgb = malloc(PW * H * 3);
  if (!panel.rgb) goto out;
  memset(panel.rgb, 255, PW * H * 3);
  const float *pred = res[0].data, *mask = res[1].data, *x = in[0].data;
  for (size_t h = 0; h < nh; h++) {
    for (size_t w = 0; w < nw; w++) {
      size_t l = h * nw + w;
      int masked = mask[l] > 0.5f;
      /* With norm_pix_loss the prediction is in units of the patch's own
       * (target) mean and variance, per channel-mixed patch as ViTMAE's loss. */
      double pm = 0, pv = 1;
      if (norm_pix) {
        double s = 0, s2 = 0;
        size_t n = P * P * C;
        for (size_t p = 0; p < P; p++)
          for (size_t q = 0; q < P; q++)
            for (size_t c = 0; c < C; c++) {
              double v = x[(c * H + h * P + p) * W + w * P + q];
              s += v;
              s2 += v * v;
            }
        pm = s / n;
        pv = sqrt((s2 - s * s / n) / (n - 1) + 1e-6); /* torch.var is unbiased */
      }
      for (size_t p = 0; p < P; p++) {
        for (size_t q = 0; q < P; q++) {
          size_t y = h * P + p, xx = w * P + q;
          const unsigned char *orig = shown.rgb + (y * W + xx) * 3;
          unsigned char *a = panel.rgb + (y * PW + xx) * 3;
          unsigned char *b = a + (W + gap) * 3, *r = b + (W + gap) * 3;
          for (size_t c = 0; c < C; c++) {
            a[c] = orig[c];
            b[c] = masked ? 128 : orig[c];
            if (!masked) {
              r[c] = orig[c];
              continue;
            }
            /* MAE's patch order: (p, q, c) within a patch. */
            double v = pred[l * P * P * C + (p * P + q) * C + c] * pv + pm;
            if (proc.do_normalize) v = v * proc.std[c] + proc.mean[c];
            if (proc.do_rescale && proc.rescale_factor != 0) v /= proc.rescale_factor;
            r[c] = to_byte(v);
          }
        }
      }
    }
  }
  if (clf_image_write_png(out_path, &panel) != CLF_OK) {
    fprintf(stderr, "clformer reconstruct: %s\n", clf_last_error(NULL));
    goto out;
  }
  rc = 0;
out:
  for (int i = 0; i < 2; i++) {
    clf_array_free(&in[i]);
    clf_array_free(&res[i]);
  }
  clf_image_free(&img);
  clf_image_free(&shown);
  clf_image_free(&panel);
  clf_model_destroy(m);
  clf_context_destroy(ctx);
  cJSON_Delete(config);
  return rc;
}
