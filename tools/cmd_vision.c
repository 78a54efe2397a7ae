/* cmd_vision.c - `clformer classify` (top-K labels of an image classifier,
 * or of a text classifier: cmd_text.c)
 * and `clformer reconstruct` (ViTMAE's masked input and reconstruction side
 * by side as a PNG), from PNG/JPEG files preprocessed as the checkpoint says. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "clformer.h"

/* ---- classify ---- */

typedef struct classify_opts {
  long top;
  const char *device, *weights;
} classify_opts;

static const clf_cli_option classify_options[] = {
    {"--top", "K", CLF_OPT_LONG, offsetof(classify_opts, top), 1, 100000, 5, 0, 0, "the K most probable labels"},
    CLF_CLI_OPT_DEVICE(classify_opts),
    CLF_CLI_OPT_WEIGHTS(classify_opts),
    {NULL}};

/* The images preprocessed into one [N, 3, H, W] batch (every image is
 * resized to the processor's size), before any model work so that a bad file
 * is reported first. */
static int load_batch(const char *dir, char **paths, size_t n, clf_array *pv) {
  clf_image_processor proc;
  if (clf_image_processor_load(dir, &proc) != CLF_OK) {
    fprintf(stderr, "clformer classify: %s\n", clf_last_error(NULL));
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    clf_image img;
    clf_array one;
    clf_status st = clf_image_read(paths[i], &img);
    if (st == CLF_OK) st = clf_image_preprocess_with(&img, &proc, &one);
    clf_image_free(&img);
    if (st != CLF_OK) {
      fprintf(stderr, "clformer classify: %s\n", clf_last_error(NULL));
      return 0;
    }
    size_t per = clf_array_numel(&one);
    if (i == 0) {
      *pv = one;
      pv->shape[0] = n;
      void *d = realloc(pv->data, per * n * sizeof(float));
      if (!d) {
        fprintf(stderr, "clformer classify: out of memory\n");
        return 0;
      }
      pv->data = d;
      continue;
    }
    int same = one.shape[2] == pv->shape[2] && one.shape[3] == pv->shape[3];
    if (same) memcpy((float *)pv->data + per * i, one.data, per * sizeof(float));
    clf_array_free(&one);
    if (!same) {
      fprintf(stderr, "clformer classify: %s: preprocessed size differs from the first image's\n", paths[i]);
      return 0;
    }
  }
  return 1;
}

/* The checkpoint's label of id (config.json's id2label), else "LABEL_id" as
 * transformers names it. */
static const char *label_of(const clf_model *m, int id, char *buf, size_t len) {
  const char *lab = clf_model_label(m, (size_t)id);
  if (lab) return lab;
  snprintf(buf, len, "LABEL_%d", id);
  return buf;
}

/* One image's block: the softmax of its logits, the k most probable
 * (clf_softmax_top_k, as the Python package's classify()); 0 after saying
 * why not. */
static int print_top(const char *path, const float *l, size_t nl, size_t k, double *p, size_t *top,
                     const clf_model *m) {
  if (clf_softmax_top_k(l, nl, k, p, top) != CLF_OK) {
    fprintf(stderr, "clformer classify: %s\n", clf_last_error(NULL));
    return 0;
  }
  printf("%s\n", path);
  for (size_t j = 0; j < k; j++) {
    char buf[32];
    printf("  %.4f  %s (%d)\n", p[top[j]], label_of(m, (int)top[j], buf, sizeof(buf)), (int)top[j]);
  }
  return 1;
}

/* A text's block, as an image's. */
static void print_text(const char *text, const double *p, const size_t *top, size_t k, const clf_model *m) {
  printf("%s\n", text);
  for (size_t j = 0; j < k; j++) {
    char buf[32];
    printf("  %.4f  %s (%d)\n", p[top[j]], label_of(m, (int)top[j], buf, sizeof(buf)), (int)top[j]);
  }
}

static int classify_main(const void *opts, int argc, char **argv) {
  const classify_opts *o = opts;
  const char *dir = argv[0];
  char pre[4096];
  snprintf(pre, sizeof(pre), "%s/preprocessor_config.json", dir);
  if (access(pre, F_OK) != 0) /* no image processor: a text classifier */
    return clf_cli_classify_text(dir, argv + 1, (size_t)argc - 1, o->top, o->device, o->weights, print_text);
  char **paths = argv + 1;
  size_t n_img = (size_t)argc - 1;
  int rc = 1;
  clf_array pv, logits;
  memset(&pv, 0, sizeof(pv));
  memset(&logits, 0, sizeof(logits));
  clf_context *ctx = NULL;
  clf_model *m = NULL;
  const char *outs[1] = {"logits"};
  if (!load_batch(dir, paths, n_img, &pv) || !clf_cli_open_model("classify", dir, o->device, o->weights, 0, &ctx, &m)) {
    /* said why */
  } else if (clf_model_run(m, &pv, 1, outs, 1, &logits) != CLF_OK) {
    fprintf(stderr, "clformer classify: %s\n", clf_last_error(ctx));
  } else if (logits.dtype != CLF_F32 || logits.ndim != 2 || logits.shape[0] != n_img || logits.shape[1] == 0) {
    fprintf(stderr, "clformer classify: the model's logits are not [%zu, num_labels]\n", n_img);
  } else {
    size_t nl = logits.shape[1], k = (size_t)o->top < nl ? (size_t)o->top : nl;
    double *p = malloc(sizeof(double) * nl);
    size_t *top = malloc(sizeof(size_t) * nl);
    rc = p && top ? 0 : 1;
    for (size_t i = 0; i < n_img && !rc; i++)
      rc = print_top(paths[i], (const float *)logits.data + i * nl, nl, k, p, top, m) ? 0 : 1;
    free(p), free(top);
  }
  clf_array_free(&pv);
  clf_array_free(&logits);
  clf_model_destroy(m);
  clf_context_destroy(ctx);
  return rc;
}

const clf_cli_command clf_cli_classify_command = {
    .name = "classify",
    .summary = "top-K labels of PNG/JPEG images (ViT, Swin) or of texts (BERT, GPT-2)",
    .synopsis = "MODEL_DIR IMAGE... | MODEL_DIR TEXT... [options]",
    .details =
        "Classifies PNG or JPEG images with the image classification model in\n"
        "MODEL_DIR (ViTForImageClassification, SwinForImageClassification, ...):\n"
        "each image is preprocessed as MODEL_DIR/preprocessor_config.json says\n"
        "(resize, rescale, normalize), the model's logits go through a softmax, and\n"
        "the K (default 5) most probable labels of config.json's id2label are\n"
        "printed with their probabilities, one block per image:\n"
        "  IMAGE\n"
        "    0.8123  label (id)\n"
        "A MODEL_DIR without preprocessor_config.json holds a text classifier\n"
        "(BertForSequenceClassification, GPT2ForSequenceClassification): each TEXT\n"
        "is tokenized with its tokenizer and classified alone, printed the same way.\n",
    .options = classify_options,
    .opts_size = sizeof(classify_opts),
    .min_args = 2,
    .max_args = -1,
    .handler = classify_main,
};

/* ---- reconstruct ---- */

typedef struct reconstruct_opts {
  const char *out, *noise, *device, *weights;
} reconstruct_opts;

static const clf_cli_option reconstruct_options[] = {
    {"--out", "FILE.png", CLF_OPT_STRING, offsetof(reconstruct_opts, out), 0, 0, 0, 0, 1, "the three panels"},
    {"--noise", "FILE.npy", CLF_OPT_STRING, offsetof(reconstruct_opts, noise), 0, 0, 0, 0, 0,
     "masking noise [1, num_patches] (float32) for a reproducible mask", NULL, "none: a random mask"},
    CLF_CLI_OPT_DEVICE(reconstruct_opts),
    CLF_CLI_OPT_WEIGHTS(reconstruct_opts),
    {NULL}};

static unsigned char to_byte(double v) {
  v = floor(v + 0.5);
  return (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* What the panels are drawn from: the input, the model's outputs and the
 * prediction as pixels. */
typedef struct mae_view {
  clf_image_processor proc;
  clf_image shown; /* the original at the model's size */
  clf_array in[2]; /* pixel_values [1, 3, H, W], noise */
  size_t n_in;
  clf_array res[2]; /* logits [1, L, P*P*3], mask [1, L] */
  clf_array pred;   /* the prediction [1, 3, H, W] in pixel_values' space */
  size_t P, H, W;   /* patch size, image size */
} mae_view;

static int mae_inputs(const char *dir, const char *path, const char *noise, mae_view *v) {
  clf_image img = {0, 0, NULL};
  clf_status st = clf_image_read(path, &img);
  if (st == CLF_OK) st = clf_image_processor_load(dir, &v->proc);
  if (st == CLF_OK) st = clf_image_preprocess_with(&img, &v->proc, &v->in[0]);
  if (st == CLF_OK)
    st = v->proc.do_resize ? clf_image_resize(&img, v->proc.width, v->proc.height, v->proc.resample, &v->shown)
                           : clf_image_resize(&img, img.width, img.height, CLF_RESAMPLE_BILINEAR, &v->shown);
  clf_image_free(&img);
  v->n_in = 1;
  if (st == CLF_OK && noise) {
    st = clf_npy_read(noise, &v->in[1]);
    snprintf(v->in[1].name, sizeof(v->in[1].name), "noise");
    v->n_in = 2;
  }
  if (st != CLF_OK) fprintf(stderr, "clformer reconstruct: %s\n", clf_last_error(NULL));
  return st == CLF_OK;
}

/* The model's logits and mask, and its prediction as pixels; the patch size
 * is that of the logits [1, L, P*P*3]. */
static int mae_run(clf_model *m, clf_context *ctx, mae_view *v) {
  const char *outs[2] = {"logits", "mask"};
  v->H = v->in[0].shape[2];
  v->W = v->in[0].shape[3];
  if (clf_model_run(m, v->in, v->n_in, outs, 2, v->res) != CLF_OK ||
      clf_model_mae_reconstruct(m, &v->in[0], &v->res[0], &v->pred) != CLF_OK) {
    fprintf(stderr, "clformer reconstruct: %s\n", clf_last_error(ctx));
    return 0;
  }
  v->P = (size_t)(sqrt(v->res[0].shape[2] / 3.0) + 0.5);
  size_t L = v->res[0].shape[1];
  if (v->in[0].shape[1] != 3 || v->res[1].dtype != CLF_F32 || clf_array_numel(&v->res[1]) != L ||
      v->pred.shape[0] != 1) {
    fprintf(stderr, "clformer reconstruct: the model's mask is not [1, %zu] (a ViTMAEForPreTraining model with 3 "
            "channels is needed)\n", L);
    return 0;
  }
  return 1;
}

/* A predicted pixel of channel c (in pixel_values' space) as a byte of the
 * image: the processor's normalisation and rescaling undone. */
static unsigned char predicted_byte(const mae_view *v, size_t y, size_t x, size_t c) {
  double val = ((const float *)v->pred.data)[(c * v->H + y) * v->W + x];
  if (v->proc.do_normalize) val = val * v->proc.std[c] + v->proc.mean[c];
  if (v->proc.do_rescale && v->proc.rescale_factor != 0) val /= v->proc.rescale_factor;
  return to_byte(val);
}

/* One patch into the three panels: original, masked input (grey where
 * masked), reconstruction (the prediction where masked). */
static void draw_patch(const mae_view *v, size_t h, size_t w, size_t gap, clf_image *panel) {
  size_t P = v->P, W = v->W, PW = (size_t)panel->width, nw = W / P, l = h * nw + w;
  int masked = ((const float *)v->res[1].data)[l] > 0.5f;
  for (size_t p = 0; p < P; p++)
    for (size_t q = 0; q < P; q++) {
      size_t y = h * P + p, x = w * P + q;
      const unsigned char *orig = v->shown.rgb + (y * W + x) * 3;
      unsigned char *a = panel->rgb + (y * PW + x) * 3;
      unsigned char *b = a + (W + gap) * 3, *r = b + (W + gap) * 3;
      for (size_t c = 0; c < 3; c++) {
        a[c] = orig[c];
        b[c] = masked ? 128 : orig[c];
        r[c] = masked ? predicted_byte(v, y, x, c) : orig[c];
      }
    }
}

/* Three panels with 4 white columns between them. */
static int draw_panels(const mae_view *v, clf_image *panel) {
  size_t gap = 4, PW = 3 * v->W + 2 * gap;
  panel->width = (int)PW;
  panel->height = (int)v->H;
  panel->rgb = malloc(PW * v->H * 3);
  if (!panel->rgb) return 0;
  memset(panel->rgb, 255, PW * v->H * 3);
  for (size_t h = 0; h < v->H / v->P; h++)
    for (size_t w = 0; w < v->W / v->P; w++) draw_patch(v, h, w, gap, panel);
  return 1;
}

static int reconstruct_main(const void *opts, int argc, char **argv) {
  const reconstruct_opts *o = opts;
  (void)argc;
  static mae_view v;
  memset(&v, 0, sizeof(v));
  clf_image panel = {0, 0, NULL};
  clf_context *ctx = NULL;
  clf_model *m = NULL;
  int rc = 1;
  if (mae_inputs(argv[0], argv[1], o->noise, &v) && clf_cli_open_model("reconstruct", argv[0], o->device, o->weights, 0, &ctx, &m) && mae_run(m, ctx, &v) &&
      draw_panels(&v, &panel)) {
    if (clf_image_write_png(o->out, &panel) != CLF_OK)
      fprintf(stderr, "clformer reconstruct: %s\n", clf_last_error(NULL));
    else
      rc = 0;
  }
  for (int i = 0; i < 2; i++) {
    clf_array_free(&v.in[i]);
    clf_array_free(&v.res[i]);
  }
  clf_array_free(&v.pred);
  clf_image_free(&v.shown);
  clf_image_free(&panel);
  clf_model_destroy(m);
  clf_context_destroy(ctx);
  return rc;
}

const clf_cli_command clf_cli_reconstruct_command = {
    .name = "reconstruct",
    .summary = "ViTMAE's masked input and reconstruction side by side",
    .synopsis = "MODEL_DIR IMAGE --out FILE.png [options]",
    .details =
        "Runs the ViTMAEForPreTraining model in MODEL_DIR on a PNG or JPEG image\n"
        "(preprocessed as preprocessor_config.json says) and writes FILE.png with\n"
        "three panels side by side: the resized original, the masked input (masked\n"
        "patches grey) and the reconstruction (visible patches from the input,\n"
        "masked ones from the model's prediction, un-normalised with the\n"
        "processor's mean and std; with norm_pix_loss, with each patch's own mean\n"
        "and variance too).  --noise gives the masking noise [1, num_patches]\n"
        "(float32 .npy) for a reproducible mask; without it the mask is random.\n",
    .options = reconstruct_options,
    .opts_size = sizeof(reconstruct_opts),
    .min_args = 2,
    .max_args = 2,
    .handler = reconstruct_main,
};
