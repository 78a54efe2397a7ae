/* clformer.c - the clformer command line.
 *
 *   clformer devices              list every OpenCL platform and device
 *   clformer selfcheck [--device S]
 *                                 run attention and layer norm on a device
 *                                 and compare with a CPU reference
 *   clformer run | generate | embed MODEL_DIR ...
 *                                 Hugging Face models (see cmd_model.c)
 *   clformer bench [--device S] [--repeat N]
 *                                 time ops side by side with their baseline
 *                                 on the same device (ratios)
 *   clformer probe [--json] [--tune] ...
 *                                 what each device is and measures (cmd_probe.c)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "clformer.h"

static const char *type_name(cl_device_type t) {
  if (t & CL_DEVICE_TYPE_GPU) return "GPU";
  if (t & CL_DEVICE_TYPE_CPU) return "CPU";
  if (t & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
  return "other";
}

static int cmd_devices(void) {
  clf_device_desc devs[64], def;
  size_t n = 0;
  clf_status st = clf_list_devices(devs, 64, &n);
  if (st != CLF_OK) {
    fprintf(stderr, "clformer: %s\n", clf_last_error(NULL));
    return 1;
  }
  int have_def = clf_select_device(getenv("CLFORMER_DEVICE"), &def) == CLF_OK;
  printf("%zu OpenCL device%s:\n", n, n == 1 ? "" : "s");
  for (size_t i = 0; i < n && i < 64; i++) {
    int is_def = have_def && def.device == devs[i].device;
    printf(" %c %d:%d  %-11s %s / %s (driver %s, %s)\n", is_def ? '*' : ' ', devs[i].platform_index,
           devs[i].device_index, type_name(devs[i].type), devs[i].platform_name, devs[i].device_name,
           devs[i].driver_version, devs[i].device_version);
  }
  printf("(* = the default: CLFORMER_DEVICE, else the first GPU, else the first device)\n");
  return 0;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static float frand(unsigned *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)((*s >> 8) / 16777216.0) * 2.0f - 1.0f;
}

#define CHECK(expr)                                                                 \
  do {                                                                              \
    clf_status st_ = (expr);                                                        \
    if (st_ != CLF_OK) {                                                            \
      fprintf(stderr, "clformer: %s: %s\n", clf_status_name(st_), clf_last_error(ctx)); \
      goto out;                                                                     \
    }                                                                               \
  } while (0)

/* Layer norm then causal, padded multi-head attention on a small random
 * batch, on the device and on the CPU, with the largest difference. */
static int cmd_selfcheck(const char *device) {
  enum { B = 2, H = 4, L = 33, DH = 16, D = H * DH };
  int rc = 1;
  clf_context *ctx = NULL;
  clf_tensor *tx = NULL, *tg = NULL, *tb = NULL, *ty = NULL;
  clf_context_options opts;
  clf_context_options_init(&opts);
  opts.device = device;
  double t0 = now_ms();
  if (clf_context_create(&opts, &ctx) != CLF_OK) {
    fprintf(stderr, "clformer: %s\n", clf_last_error(NULL));
    return 1;
  }
  const clf_device_desc *d = clf_context_device(ctx);
  printf("device %d:%d: %s / %s (driver %s)\n", d->platform_index, d->device_index, d->platform_name,
         d->device_name, d->driver_version);
  printf("kernel cache: %s\n", clf_context_cache_dir(ctx) ? clf_context_cache_dir(ctx) : "off");

  static float x[B * L * D], g[D], b[D], y[B * L * D];
  unsigned seed = 42;
  for (size_t i = 0; i < B * L * D; i++) x[i] = 3.0f * frand(&seed) + 1.0f;
  for (size_t i = 0; i < D; i++) { g[i] = 1.0f + 0.5f * frand(&seed); b[i] = 0.5f * frand(&seed); }
  const size_t sx[] = {B, L, D}, sd[] = {D};
  CHECK(clf_tensor_create(ctx, CLF_F32, 3, sx, &tx));
  CHECK(clf_tensor_create(ctx, CLF_F32, 1, sd, &tg));
  CHECK(clf_tensor_create(ctx, CLF_F32, 1, sd, &tb));
  CHECK(clf_tensor_create(ctx, CLF_F32, 3, sx, &ty));
  CHECK(clf_tensor_upload(ctx, tx, x, sizeof(x)));
  CHECK(clf_tensor_upload(ctx, tg, g, sizeof(g)));
  CHECK(clf_tensor_upload(ctx, tb, b, sizeof(b)));
  double t1 = now_ms();
  CHECK(clf_layer_norm(ctx, tx, NULL, tg, tb, 1e-5f, NULL, ty, NULL));
  CHECK(clf_tensor_download(ctx, ty, y, sizeof(y)));
  double t2 = now_ms();
  double err = 0;
  for (size_t r = 0; r < B * L; r++) {
    double mean = 0, var = 0;
    for (size_t i = 0; i < D; i++) mean += x[r * D + i];
    mean /= D;
    for (size_t i = 0; i < D; i++) var += (x[r * D + i] - mean) * (x[r * D + i] - mean);
    var /= D;
    for (size_t i = 0; i < D; i++) {
      double want = (x[r * D + i] - mean) / sqrt(var + 1e-5) * g[i] + b[i];
      double e = fabs(want - y[r * D + i]);
      if (!(e <= err)) err = e;
    }
  }
  int ok = err <= 1e-4;
  printf("layer_norm [%d, %d, %d]: max abs error %.2e vs CPU (tolerance 1e-4) %s (%.1f ms incl. build)\n", B, L,
         D, err, ok ? "PASS" : "FAIL", t2 - t1);
  if (!ok) goto out;

  /* Attention: q, k, v [B, H, L, DH] from x; causal, and the last 5 keys of
   * batch 1 padded; both implementations against the CPU. */
  {
    static float q[B * H * L * DH], kk[B * H * L * DH], v[B * H * L * DH], o[B * H * L * DH];
    static int32_t pad[B * L];
    for (size_t i = 0; i < B * H * L * DH; i++) { q[i] = frand(&seed); kk[i] = frand(&seed); v[i] = frand(&seed); }
    for (size_t b = 0; b < B; b++)
      for (size_t j = 0; j < L; j++) pad[b * L + j] = !(b == 1 && j >= L - 5);
    const size_t sh[] = {B, H, L, DH}, sp[] = {B, L};
    float scale = 1.0f / sqrtf((float)DH);
    clf_tensor *tq = NULL, *tk = NULL, *tv = NULL, *to = NULL, *tp = NULL;
    int attn_ok = 1;
    CHECK(clf_tensor_create(ctx, CLF_F32, 4, sh, &tq));
    CHECK(clf_tensor_create(ctx, CLF_F32, 4, sh, &tk));
    CHECK(clf_tensor_create(ctx, CLF_F32, 4, sh, &tv));
    CHECK(clf_tensor_create(ctx, CLF_F32, 4, sh, &to));
    CHECK(clf_tensor_create(ctx, CLF_I32, 2, sp, &tp));
    CHECK(clf_tensor_upload(ctx, tq, q, sizeof(q)));
    CHECK(clf_tensor_upload(ctx, tk, kk, sizeof(kk)));
    CHECK(clf_tensor_upload(ctx, tv, v, sizeof(v)));
    CHECK(clf_tensor_upload(ctx, tp, pad, sizeof(pad)));
    static const clf_attention_impl impls[] = {CLF_ATTN_FUSED, CLF_ATTN_GEMM};
    static const char *names[] = {"fused", "gemm"};
    for (int im = 0; im < 2; im++) {
      clf_attention_mask mask = {tp, 1, NULL};
      double a0 = now_ms();
      clf_status st = clf_attention(ctx, tq, tk, tv, 0, &mask, scale, impls[im], to, NULL);
      if (st == CLF_OK) st = clf_tensor_download(ctx, to, o, sizeof(o));
      double a1 = now_ms();
      if (st != CLF_OK) {
        printf("attention (%s): %s: %s FAIL\n", names[im], clf_status_name(st), clf_last_error(ctx));
        attn_ok = 0;
        continue;
      }
      double aerr = 0;
      for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
          for (size_t i = 0; i < L; i++) {
            const float *qi = &q[((b * H + h) * L + i) * DH];
            double w[L], mx = -1e300, sum = 0;
            for (size_t j = 0; j < L; j++) {
              w[j] = -1e300;
              if (j > i || !pad[b * L + j]) continue;
              double sdot = 0;
              for (size_t e = 0; e < DH; e++) sdot += qi[e] * kk[((b * H + h) * L + j) * DH + e];
              w[j] = sdot * scale;
              if (w[j] > mx) mx = w[j];
            }
            for (size_t j = 0; j < L; j++) { w[j] = w[j] <= -1e299 ? 0 : exp(w[j] - mx); sum += w[j]; }
            for (size_t e = 0; e < DH; e++) {
              double want = 0;
              for (size_t j = 0; j < L; j++) want += (sum > 0 ? w[j] / sum : 0) * v[((b * H + h) * L + j) * DH + e];
              double ae = fabs(want - o[((b * H + h) * L + i) * DH + e]);
              if (!(ae <= aerr)) aerr = ae;
            }
          }
      int pass = aerr <= 1e-5;
      attn_ok &= pass;
      printf("attention %s [B=%d H=%d L=%d Dh=%d] causal + key padding: max abs error %.2e vs CPU "
             "(tolerance 1e-5) %s (%.1f ms incl. build)\n",
             names[im], B, H, L, DH, aerr, pass ? "PASS" : "FAIL", a1 - a0);
    }
    clf_tensor_destroy(tq); clf_tensor_destroy(tk); clf_tensor_destroy(tv);
    clf_tensor_destroy(to); clf_tensor_destroy(tp);
    ok &= attn_ok;
  }

  clf_cache_stats cs;
  clf_context_cache_stats(ctx, &cs);
  printf("programs: %u built from source, %u from the disk cache, %.0f ms building; context %.0f ms\n",
         cs.programs_built, cs.programs_from_disk, cs.build_ms, t1 - t0);
  printf("selfcheck: %s\n", ok ? "PASS" : "FAIL");
  rc = ok ? 0 : 1;
out:
  clf_tensor_destroy(tx);
  clf_tensor_destroy(tg);
  clf_tensor_destroy(tb);
  clf_tensor_destroy(ty);
  clf_context_destroy(ctx);
  return rc;
}


/* ---- bench: each op next to a baseline on the same device, as ratios ---- */

typedef clf_status (*bench_fn)(clf_context *ctx, void *arg);

/* Median milliseconds of one call of fn over `reps` timed rounds of `inner`
 * calls each, after a warm-up round; the queue is finished before each clock
 * reading. */
static double bench_ms(clf_context *ctx, bench_fn fn, void *arg, int reps, int inner) {
  double t[64];
  if (reps > 64) reps = 64;
  for (int i = 0; i < inner; i++)
    if (fn(ctx, arg) != CLF_OK) return -1;
  if (clf_finish(ctx) != CLF_OK) return -1;
  for (int r = 0; r < reps; r++) {
    double t0 = now_ms();
    for (int i = 0; i < inner; i++)
      if (fn(ctx, arg) != CLF_OK) return -1;
    if (clf_finish(ctx) != CLF_OK) return -1;
    t[r] = (now_ms() - t0) / inner;
  }
  for (int i = 1; i < reps; i++)
    for (int j = i; j > 0 && t[j - 1] > t[j]; j--) { double x = t[j]; t[j] = t[j - 1]; t[j - 1] = x; }
  return t[reps / 2];
}

typedef struct attn_arg {
  clf_tensor *q, *k, *v, *out, *pad;
  clf_attention_impl impl;
  int causal;
} attn_arg;

static clf_status run_attn(clf_context *ctx, void *p) {
  attn_arg *a = p;
  clf_attention_mask m = {a->pad, a->causal, NULL};
  return clf_attention(ctx, a->q, a->k, a->v, 0, &m, 0.125f, a->impl, a->out, NULL);
}

typedef struct ln_arg { clf_tensor *x, *g, *b, *y; } ln_arg;
static clf_status run_ln(clf_context *ctx, void *p) {
  ln_arg *a = p;
  return clf_layer_norm(ctx, a->x, NULL, a->g, a->b, 1e-5f, NULL, a->y, NULL);
}
static clf_status run_copy(clf_context *ctx, void *p) {
  ln_arg *a = p;
  return clf_tensor_copy(ctx, a->x, a->y, NULL);
}

clf_status clf_cli_random_tensor(clf_context *ctx, int ndim, const size_t *shape, clf_tensor **t) {
  clf_status st = clf_tensor_create(ctx, CLF_F32, ndim, shape, t);
  if (st != CLF_OK) return st;
  size_t n = clf_tensor_numel(*t);
  float *h = malloc(n * sizeof(float) + 1);
  if (!h) return CLF_E_OUT_OF_MEMORY;
  unsigned seed = 7;
  for (size_t i = 0; i < n; i++) h[i] = frand(&seed);
  st = clf_tensor_upload(ctx, *t, h, n * sizeof(float));
  free(h);
  return st;
}

static int cmd_bench(const char *device, int reps) {
  clf_context *ctx = NULL;
  clf_context_options opts;
  clf_context_options_init(&opts);
  opts.device = device;
  if (clf_context_create(&opts, &ctx) != CLF_OK) {
    fprintf(stderr, "clformer: %s\n", clf_last_error(NULL));
    return 1;
  }
  const clf_device_desc *d = clf_context_device(ctx);
  printf("device %d:%d: %s / %s (driver %s); median of %d rounds\n", d->platform_index, d->device_index,
         d->platform_name, d->device_name, d->driver_version, reps);
  int rc = 0;
  /* Attention: the fused kernel against the CLBlast GEMM path. */
  static const struct { const char *name; size_t B, H, Lq, Lk, Dh; int causal; } shapes[] = {
      {"BERT-base L=128", 1, 12, 128, 128, 64, 0},  {"ViT-B/16 L=197", 1, 12, 197, 197, 64, 0},
      {"GPT-2 prefill L=256 causal", 1, 12, 256, 256, 64, 1}, {"GPT-2 decode Lq=1 Lk=256", 1, 12, 1, 256, 64, 1},
      {"Swin-T windows 64x3 L=49 Dh=32", 64, 3, 49, 49, 32, 0},
  };
  printf("%-34s %12s %12s %8s\n", "attention", "fused ms", "gemm ms", "gemm/fused");
  for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
    attn_arg a = {0};
    size_t sq[] = {shapes[i].B, shapes[i].H, shapes[i].Lq, shapes[i].Dh};
    size_t sk[] = {shapes[i].B, shapes[i].H, shapes[i].Lk, shapes[i].Dh};
    a.causal = shapes[i].causal;
    double tf = -1, tg = -1;
    if (clf_cli_random_tensor(ctx, 4, sq, &a.q) == CLF_OK && clf_cli_random_tensor(ctx, 4, sk, &a.k) == CLF_OK &&
        clf_cli_random_tensor(ctx, 4, sk, &a.v) == CLF_OK && clf_cli_random_tensor(ctx, 4, sq, &a.out) == CLF_OK) {
      a.impl = CLF_ATTN_FUSED;
      tf = bench_ms(ctx, run_attn, &a, reps, 5);
      a.impl = CLF_ATTN_GEMM;
      tg = bench_ms(ctx, run_attn, &a, reps, 5);
    }
    if (tf < 0 || tg < 0) {
      printf("%-34s failed: %s\n", shapes[i].name, clf_last_error(ctx));
      rc = 1;
    } else {
      printf("%-34s %12.3f %12.3f %8.2fx\n", shapes[i].name, tf, tg, tg / tf);
    }
    clf_tensor_destroy(a.q); clf_tensor_destroy(a.k); clf_tensor_destroy(a.v); clf_tensor_destroy(a.out);
  }
  /* Layer norm against a plain device copy of the same bytes (the memory
   * bound it cannot beat: LN reads x twice more than a copy does). */
  static const size_t ln_shapes[][2] = {{128, 768}, {197 * 8, 768}, {1024, 1024}};
  printf("%-34s %12s %12s %8s\n", "layer norm", "LN ms", "copy ms", "LN/copy");
  for (size_t i = 0; i < sizeof(ln_shapes) / sizeof(ln_shapes[0]); i++) {
    ln_arg a = {0};
    size_t sx[] = {ln_shapes[i][0], ln_shapes[i][1]}, sg[] = {ln_shapes[i][1]};
    double tl = -1, tc = -1;
    if (clf_cli_random_tensor(ctx, 2, sx, &a.x) == CLF_OK && clf_cli_random_tensor(ctx, 2, sx, &a.y) == CLF_OK &&
        clf_cli_random_tensor(ctx, 1, sg, &a.g) == CLF_OK && clf_cli_random_tensor(ctx, 1, sg, &a.b) == CLF_OK) {
      tl = bench_ms(ctx, run_ln, &a, reps, 10);
      tc = bench_ms(ctx, run_copy, &a, reps, 10);
    }
    char name[64];
    snprintf(name, sizeof(name), "[%zu, %zu]", ln_shapes[i][0], ln_shapes[i][1]);
    if (tl < 0 || tc < 0) {
      printf("%-34s failed: %s\n", name, clf_last_error(ctx));
      rc = 1;
    } else {
      printf("%-34s %12.3f %12.3f %8.2fx\n", name, tl, tc, tl / tc);
    }
    clf_tensor_destroy(a.x); clf_tensor_destroy(a.y); clf_tensor_destroy(a.g); clf_tensor_destroy(a.b);
  }
  clf_context_destroy(ctx);
  return rc;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: clformer COMMAND [options]\n"
          "  devices                 list OpenCL platforms and devices\n"
          "  selfcheck [--device S]  run ops on a device against a CPU reference\n"
          "  run MODEL_DIR --in NAME=FILE.npy ... --out NAME=FILE.npy ... [--repeat N]\n"
          "                          one forward pass of a Hugging Face model directory\n"
          "  generate MODEL_DIR (--in input_ids=FILE.npy | --prompt TEXT) [--max-new-tokens N]\n"
          "                          [--num-beams K] [--out sequences=FILE.npy]\n"
          "                          greedy or beam decoding (GPT-2, Marian)\n"
          "  embed MODEL_DIR TEXT TEXT...\n"
          "                          cosine similarities of mean-pooled embeddings (BERT)\n"
          "  classify MODEL_DIR IMAGE... [--top K]\n"
          "                          top-K labels of PNG/JPEG images (ViT, Swin)\n"
          "  reconstruct MODEL_DIR IMAGE --out FILE.png [--noise FILE.npy]\n"
          "                          ViTMAE's masked input and reconstruction side by side\n"
          "  bench [--device S] [--repeat N]\n"
          "                          time ops beside their baselines on one device\n"
          "  probe [--device S] [--json] [--quick] [--tune [--model DIR]] ...\n"
          "                          device properties, measured throughput, self-validation\n"
          "  matrix [--device S]... [--suite NAME]... [--out DIR] [--timeout SEC]\n"
          "                          the test suites on every device, each in its own process:\n"
          "                          DIR/matrix.md and DIR/matrix.json (cmd_matrix.c)\n"
          "A device S is \"P:D\" (indices) or part of its platform/device name;\n"
          "the default is $CLFORMER_DEVICE, else the first GPU, else the first device.\n");
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "run")) return clf_cli_run(argc - 2, argv + 2);
  if (!strcmp(argv[1], "generate")) return clf_cli_generate(argc - 2, argv + 2);
  if (!strcmp(argv[1], "embed")) return clf_cli_embed(argc - 2, argv + 2);
  if (!strcmp(argv[1], "classify")) return clf_cli_classify(argc - 2, argv + 2);
  if (!strcmp(argv[1], "reconstruct")) return clf_cli_reconstruct(argc - 2, argv + 2);
  if (!strcmp(argv[1], "probe")) return clf_cli_probe(argc - 2, argv + 2);
  if (!strcmp(argv[1], "matrix")) return clf_cli_matrix(argc - 2, argv + 2);
  const char *device = NULL;
  int reps = 7;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
    else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
      reps = atoi(argv[++i]);
      if (reps < 1 || reps > 64) { fprintf(stderr, "clformer: --repeat takes 1..64\n"); return 2; }
    }
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
    else { fprintf(stderr, "clformer: unknown argument %s\n", argv[i]); usage(stderr); return 2; }
  }
  if (!strcmp(argv[1], "devices")) return cmd_devices();
  if (!strcmp(argv[1], "selfcheck")) return cmd_selfcheck(device);
  if (!strcmp(argv[1], "bench")) return cmd_bench(device, reps);
  fprintf(stderr, "clformer: unknown command %s\n", argv[1]);
  usage(stderr);
  return 2;
}
