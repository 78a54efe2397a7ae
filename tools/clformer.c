/* clformer.c - the clformer command line.
 *
 *   clformer devices              list every OpenCL platform and device
 *   clformer selfcheck [--device S]
 *                                 run attention and layer norm on a device
 *                                 and compare with a CPU reference
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
  clf_cache_stats cs;
  clf_context_cache_stats(ctx, &cs);
  printf("programs: %u built from source, %u from the disk cache, %.0f ms building; context %.0f ms\n",
         cs.programs_built, cs.programs_from_disk, cs.build_ms, t1 - t0);
  rc = ok ? 0 : 1;
out:
  clf_tensor_destroy(tx);
  clf_tensor_destroy(tg);
  clf_tensor_destroy(tb);
  clf_tensor_destroy(ty);
  clf_context_destroy(ctx);
  return rc;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: clformer COMMAND [options]\n"
          "  devices                 list OpenCL platforms and devices\n"
          "  selfcheck [--device S]  run ops on a device against a CPU reference\n"
          "A device S is \"P:D\" (indices) or part of its platform/device name;\n"
          "the default is $CLFORMER_DEVICE, else the first GPU, else the first device.\n");
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const char *device = NULL;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
    else { fprintf(stderr, "clformer: unknown argument %s\n", argv[i]); usage(stderr); return 2; }
  }
  if (!strcmp(argv[1], "devices")) return cmd_devices();
  if (!strcmp(argv[1], "selfcheck")) return cmd_selfcheck(device);
  fprintf(stderr, "clformer: unknown command %s\n", argv[1]);
  usage(stderr);
  return 2;
}
