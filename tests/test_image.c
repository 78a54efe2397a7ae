/* test_image.c - PNG/JPEG reading and writing, PIL-exact resizing and
 * ViTImageProcessor preprocessing against the committed fixtures of
 * tools/fixtures/make_image_fixtures.py, and `clformer classify` /
 * `reconstruct` argument handling. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* Image functions have no context: their errors are in clf_last_error(NULL). */
#define IMG_FAILS(expr, status, needle)                                                              \
  do {                                                                                               \
    clf_status st_ = (expr);                                                                         \
    ck_assert_msg(st_ == (status), "%s returned %s, expected %s (%s)", #expr, clf_status_name(st_), \
                  clf_status_name(status), clf_last_error(NULL));                                    \
    ck_assert_msg(strstr(clf_last_error(NULL), (needle)) != NULL, "error of %s is \"%s\", not \"%s\"", \
                  #expr, clf_last_error(NULL), (needle));                                            \
  } while (0)

static const char *fx_dir(void) {
  const char *fx = getenv("CLF_FIXTURES");
  ck_assert_msg(fx != NULL, "CLF_FIXTURES must be set (meson test sets it)");
  return fx;
}

static void fx_path(char *buf, size_t n, const char *rel) { snprintf(buf, n, "%s/images/%s", fx_dir(), rel); }

static const char *images[] = {"test.png", "test.jpg", "grey.png", "rgba.png", "palette.png"};

/* "test.png" -> "test_png" (the fixture's .npy stem). */
static void stem(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "%s", name);
  char *dot = strchr(buf, '.');
  if (dot) *dot = '_';
}

/* Decoding equals PIL's Image.open(f).convert("RGB") byte for byte (the
 * JPEG too: Debian's PIL and clformer use the same libjpeg-turbo). */
START_TEST(read_matches_pil) {
  for (size_t i = 0; i < sizeof(images) / sizeof(images[0]); i++) {
    char path[1024], s[64], npy[1024];
    fx_path(path, sizeof(path), images[i]);
    stem(s, sizeof(s), images[i]);
    snprintf(npy, sizeof(npy), "%s/images/%s.npy", fx_dir(), s);
    clf_image img;
    clf_array want;
    ck_assert_msg(clf_image_read(path, &img) == CLF_OK, "%s", clf_last_error(NULL));
    ck_assert_int_eq(clf_npy_read(npy, &want), CLF_OK);
    ck_assert_int_eq(want.ndim, 3);
    ck_assert_uint_eq(want.shape[0], (size_t)img.height);
    ck_assert_uint_eq(want.shape[1], (size_t)img.width);
    ck_assert_uint_eq(want.shape[2], 3);
    const int32_t *w = want.data;
    size_t bad = 0;
    for (size_t k = 0; k < clf_array_numel(&want); k++) bad += w[k] != img.rgb[k];
    ck_assert_msg(bad == 0, "%s: %zu bytes differ from PIL", images[i], bad);
    clf_array_free(&want);
    clf_image_free(&img);
  }
}
END_TEST

/* pixel_values equal ViTImageProcessor's for six configs (224 bilinear
 * upscale, 32x32 bilinear with ImageNet mean/std, 17x13 bicubic downscale,
 * and lanczos, box and hamming on test.png).
 * The resize is integer-exact and the float steps are done in the same
 * order and precision as transformers (rescale in f64 then f32, normalize in
 * f32), so the values must be bit-identical: tolerance 0. */
START_TEST(preprocess_matches_transformers) {
  static const char *configs[] = {"vit224", "down32", "bicubic", "lanczos", "box", "hamming"};
  for (size_t c = 0; c < sizeof(configs) / sizeof(configs[0]); c++) {
    char dir[1024];
    fx_path(dir, sizeof(dir), configs[c]);
    for (size_t i = 0; i < sizeof(images) / sizeof(images[0]); i++) {
      char path[1024], s[64], npy[1200];
      stem(s, sizeof(s), images[i]);
      snprintf(npy, sizeof(npy), "%s/%s.npy", dir, s);
      if (access(npy, R_OK) != 0) continue; /* some configs have fewer images */
      fx_path(path, sizeof(path), images[i]);
      clf_image img;
      clf_array got, want;
      ck_assert_int_eq(clf_image_read(path, &img), CLF_OK);
      ck_assert_msg(clf_image_preprocess(&img, dir, &got) == CLF_OK, "%s", clf_last_error(NULL));
      ck_assert_int_eq(clf_npy_read(npy, &want), CLF_OK);
      ck_assert_str_eq(got.name, "pixel_values");
      ck_assert_int_eq(got.dtype, CLF_F32);
      ck_assert_int_eq(got.ndim, 4);
      for (int d = 0; d < 4; d++) ck_assert_uint_eq(got.shape[d], want.shape[d]);
      TH_CLOSE((const float *)got.data, (const float *)want.data, clf_array_numel(&want), 0.0);
      clf_array_free(&got);
      clf_array_free(&want);
      clf_image_free(&img);
    }
  }
}
END_TEST

/* Every filter keeps a constant image constant (weights sum to one), and
 * an identical size is a copy; the processor defaults are ViT's. */
START_TEST(resize_filters_and_defaults) {
  unsigned char px[7 * 5 * 3];
  for (size_t i = 0; i < sizeof(px); i++) px[i] = (unsigned char)(i % 3 == 0 ? 200 : i % 3 == 1 ? 17 : 0);
  clf_image in = {7, 5, px}, out;
  for (int f = 1; f <= 5; f++) {
    static const int sizes[][2] = {{1, 1}, {3, 9}, {33, 2}, {7, 5}};
    for (int s = 0; s < 4; s++) {
      ck_assert_int_eq(clf_image_resize(&in, sizes[s][0], sizes[s][1], f, &out), CLF_OK);
      for (int k = 0; k < sizes[s][0] * sizes[s][1]; k++) {
        ck_assert_int_eq(out.rgb[k * 3], 200);
        ck_assert_int_eq(out.rgb[k * 3 + 1], 17);
        ck_assert_int_eq(out.rgb[k * 3 + 2], 0);
      }
      clf_image_free(&out);
    }
  }
  IMG_FAILS(clf_image_resize(&in, 3, 3, CLF_RESAMPLE_NEAREST, &out), CLF_E_UNSUPPORTED, "resample 0");
  ck_assert_ptr_null(out.rgb);
  IMG_FAILS(clf_image_resize(&in, 0, 3, CLF_RESAMPLE_BILINEAR, &out), CLF_E_INVALID_ARG, "size");
  IMG_FAILS(clf_image_resize(NULL, 3, 3, CLF_RESAMPLE_BILINEAR, &out), CLF_E_INVALID_ARG, "input");

  /* A directory without preprocessor_config.json, then one with bad keys. */
  clf_image_processor p;
  char dir[] = "/tmp/clf-img-XXXXXX", file[256];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  IMG_FAILS(clf_image_processor_load(dir, &p), CLF_E_NOT_FOUND, "preprocessor_config.json");
  snprintf(file, sizeof(file), "%s/preprocessor_config.json", dir);
  static const struct { const char *json, *needle; clf_status st; } bad[] = {
      {"{}", NULL, CLF_OK},
      {"[1]", "not a JSON object", CLF_E_FORMAT},
      {"{", "not valid JSON", CLF_E_FORMAT},
      {"{\"size\": {\"shortest_edge\": 224}}", "height", CLF_E_UNSUPPORTED},
      {"{\"size\": 2.5}", "size", CLF_E_FORMAT},
      {"{\"image_mean\": [1, 2]}", "image_mean", CLF_E_FORMAT},
      {"{\"do_resize\": 1}", "do_resize", CLF_E_FORMAT},
      {"{\"resample\": \"bilinear\"}", "resample", CLF_E_FORMAT},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fputs(bad[i].json, f);
    fclose(f);
    if (bad[i].st == CLF_OK) {
      ck_assert_int_eq(clf_image_processor_load(dir, &p), CLF_OK);
      ck_assert(p.do_resize && p.width == 224 && p.height == 224 && p.resample == CLF_RESAMPLE_BILINEAR);
      ck_assert(p.do_rescale && p.rescale_factor == 1.0 / 255 && p.do_normalize);
      ck_assert(p.mean[0] == 0.5 && p.std[2] == 0.5);
    } else {
      IMG_FAILS(clf_image_processor_load(dir, &p), bad[i].st, bad[i].needle);
    }
  }
  /* Preprocessing without resize keeps the image's size; std 0 is refused. */
  p.do_resize = 0;
  clf_array pv;
  ck_assert_int_eq(clf_image_preprocess_with(&in, &p, &pv), CLF_OK);
  ck_assert_uint_eq(pv.shape[2], 5);
  ck_assert_uint_eq(pv.shape[3], 7);
  /* (200/255 - 0.5) / 0.5 for red, in f32. */
  ck_assert_float_eq_tol(((float *)pv.data)[0], (float)((200.0 / 255 - 0.5) / 0.5), 1e-6);
  clf_array_free(&pv);
  p.std[1] = 0;
  IMG_FAILS(clf_image_preprocess_with(&in, &p, &pv), CLF_E_INVALID_ARG, "image_std[1]");
  remove(file);
  rmdir(dir);
}
END_TEST

/* Writing a PNG and reading it back gives the same bytes. */
START_TEST(write_png_round_trip) {
  char path[1024];
  fx_path(path, sizeof(path), "test.jpg");
  clf_image img, back;
  ck_assert_int_eq(clf_image_read(path, &img), CLF_OK);
  char dir[] = "/tmp/clf-img-XXXXXX", out[64];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(out, sizeof(out), "%s/w.png", dir);
  ck_assert_int_eq(clf_image_write_png(out, &img), CLF_OK);
  ck_assert_int_eq(clf_image_read(out, &back), CLF_OK);
  ck_assert_int_eq(back.width, img.width);
  ck_assert_int_eq(back.height, img.height);
  ck_assert_mem_eq(back.rgb, img.rgb, (size_t)img.width * img.height * 3);
  clf_image_free(&back);
  remove(out);
  /* an empty directory as the output: refused, and left where it was
   * (issue 11: the failed write removed it), with no file left beside it */
  ck_assert_int_eq(mkdir(out, 0700), 0);
  IMG_FAILS(clf_image_write_png(out, &img), CLF_E_IO, out);
  struct stat sb;
  ck_assert_msg(stat(out, &sb) == 0 && S_ISDIR(sb.st_mode), "%s is gone", out);
  ck_assert_int_eq(rmdir(out), 0);
  ck_assert_int_eq(rmdir(dir), 0); /* empty: no temporary file left */
  IMG_FAILS(clf_image_write_png("/nonexistent-dir/x.png", &img), CLF_E_IO, "/nonexistent-dir/x.png");
  clf_image_free(&img);
  clf_image empty = {0, 0, NULL};
  IMG_FAILS(clf_image_write_png(out, &empty), CLF_E_INVALID_ARG, "empty");
}
END_TEST

START_TEST(read_errors) {
  char path[1024];
  clf_image img;
  fx_path(path, sizeof(path), "not_image.png");
  IMG_FAILS(clf_image_read(path, &img), CLF_E_FORMAT, "not_image.png: not a PNG or JPEG");
  ck_assert_ptr_null(img.rgb);
  fx_path(path, sizeof(path), "truncated.png");
  IMG_FAILS(clf_image_read(path, &img), CLF_E_FORMAT, "truncated.png: corrupt or truncated PNG");
  ck_assert_ptr_null(img.rgb);
  fx_path(path, sizeof(path), "truncated.jpg");
  IMG_FAILS(clf_image_read(path, &img), CLF_E_FORMAT, "truncated.jpg: corrupt or truncated JPEG");
  ck_assert_ptr_null(img.rgb);
  fx_path(path, sizeof(path), "missing.png");
  IMG_FAILS(clf_image_read(path, &img), CLF_E_NOT_FOUND, "missing.png");
  fx_path(path, sizeof(path), "");
  IMG_FAILS(clf_image_read(path, &img), CLF_E_IO, "is not a regular file"); /* a directory */
  IMG_FAILS(clf_image_read(NULL, &img), CLF_E_INVALID_ARG, "path");
  /* A FIFO with no writer is refused at once, not waited on. */
  char dir[64];
  th_tmpdir_create(dir, sizeof(dir), "image");
  snprintf(path, sizeof(path), "%s/fifo.png", dir);
  ck_assert_int_eq(mkfifo(path, 0600), 0);
  IMG_FAILS(clf_image_read(path, &img), CLF_E_IO, "fifo.png is not a regular file");
  th_tmpdir_remove(dir);
}
END_TEST

/* ---- decompression bombs (issue 11): a small file that declares a huge
 * image is refused from its header, before the decoder allocates */

static unsigned char *load_bytes(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  static unsigned char buf[1 << 20];
  *n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  ck_assert_uint_lt(*n, sizeof buf);
  return buf;
}

static void save_bytes(const char *path, const unsigned char *p, size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(p, 1, n, f), n);
  ck_assert_int_eq(fclose(f), 0);
}

static void put_be(unsigned char *p, unsigned v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * (bytes - 1 - i)));
}

/* PNG's chunk CRC (ISO 3309, as in the PNG specification's sample code). */
static unsigned png_crc(const unsigned char *p, size_t n) {
  unsigned c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
  }
  return c ^ 0xffffffffu;
}

START_TEST(decompression_bombs) {
  char src[1024], dir[64], path[1100];
  size_t n;
  th_tmpdir_create(dir, sizeof(dir), "bomb");
  /* test.png with IHDR saying 20000 x 20000 (400 M pixels), CRC redone */
  fx_path(src, sizeof(src), "test.png");
  unsigned char *png = load_bytes(src, &n);
  ck_assert_mem_eq(png + 12, "IHDR", 4);
  put_be(png + 16, 20000, 4);
  put_be(png + 20, 20000, 4);
  put_be(png + 29, png_crc(png + 12, 17), 4);
  snprintf(path, sizeof(path), "%s/bomb.png", dir);
  save_bytes(path, png, n);
  clf_image img;
  IMG_FAILS(clf_image_read(path, &img), CLF_E_UNSUPPORTED,
            "PNG of 20000 x 20000 is larger than the limit of 178956970 pixels");
  ck_assert_ptr_null(img.rgb);
  /* test.jpg with its frame header saying 65500 x 65500 */
  fx_path(src, sizeof(src), "test.jpg");
  unsigned char *jpg = load_bytes(src, &n);
  size_t sof = 2;
  while (sof + 9 < n && !(jpg[sof] == 0xFF && (jpg[sof + 1] == 0xC0 || jpg[sof + 1] == 0xC2)))
    sof += 2 + ((size_t)jpg[sof + 2] << 8 | jpg[sof + 3]);
  ck_assert_msg(sof + 9 < n, "no SOF0/SOF2 marker in test.jpg");
  put_be(jpg + sof + 5, 65500, 2);
  put_be(jpg + sof + 7, 65500, 2);
  snprintf(path, sizeof(path), "%s/bomb.jpg", dir);
  save_bytes(path, jpg, n);
  IMG_FAILS(clf_image_read(path, &img), CLF_E_UNSUPPORTED,
            "JPEG of 65500 x 65500 is larger than the limit of 178956970 pixels");
  ck_assert_ptr_null(img.rgb);
  th_tmpdir_remove(dir);
}
END_TEST

/* ---- the command line: $CLF_CLI, else ../tools/clformer beside this test */

static char cli[PATH_MAX + 32], tmp[256];

static int run_cli(const char *args) {
  char cmd[16384];
  snprintf(cmd, sizeof(cmd), "'%s' %s >'%s/stdout' 2>'%s/stderr'", cli, args, tmp, tmp);
  int rc = system(cmd);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static const char *slurp(const char *name) {
  static char buf[65536];
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", tmp, name);
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

START_TEST(cli_arguments) {
  if (getenv("CLF_CLI")) {
    snprintf(cli, sizeof(cli), "%s", getenv("CLF_CLI"));
  } else {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    ck_assert_int_gt(n, 0);
    self[n] = '\0';
    *strrchr(self, '/') = '\0';
    snprintf(cli, sizeof(cli), "%s/../tools/clformer", self);
  }
  if (access(cli, X_OK) != 0) return; /* built without tools */
  snprintf(tmp, sizeof(tmp), "/tmp/clf-img-cli-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmp));
  char args[4096], img[1024], notimg[1024], dir[1024];
  fx_path(img, sizeof(img), "test.png");
  fx_path(notimg, sizeof(notimg), "not_image.png");
  fx_path(dir, sizeof(dir), "vit224");

  ck_assert_int_eq(run_cli("classify --help"), 0);
  ck_assert_ptr_nonnull(strstr(slurp("stdout"), "id2label"));
  ck_assert_int_eq(run_cli("reconstruct --help"), 0);
  ck_assert_ptr_nonnull(strstr(slurp("stdout"), "--noise"));
  ck_assert_int_eq(run_cli("--help"), 0);
  ck_assert_ptr_nonnull(strstr(slurp("stdout"), "classify"));
  /* Usage errors exit 2. */
  ck_assert_int_eq(run_cli("classify"), 2);
  ck_assert_int_eq(run_cli("classify somedir"), 2); /* no image */
  snprintf(args, sizeof(args), "classify %s %s --top 0", dir, img);
  ck_assert_int_eq(run_cli(args), 2);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "--top"));
  snprintf(args, sizeof(args), "classify %s %s --top", dir, img);
  ck_assert_int_eq(run_cli(args), 2);
  snprintf(args, sizeof(args), "classify %s %s --bogus", dir, img);
  ck_assert_int_eq(run_cli(args), 2);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "--bogus"));
  ck_assert_int_eq(run_cli("reconstruct"), 2);
  snprintf(args, sizeof(args), "reconstruct %s %s", dir, img); /* no --out */
  ck_assert_int_eq(run_cli(args), 2);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "--out"));
  /* Failures exit 1 and name the file: images are read before the model. */
  snprintf(args, sizeof(args), "classify %s %s", dir, notimg);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "not_image.png"));
  snprintf(args, sizeof(args), "classify %s %s/missing.png", dir, tmp);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "missing.png"));
  snprintf(args, sizeof(args), "reconstruct %s %s --out %s/r.png", dir, notimg, tmp);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "not_image.png"));
  /* A directory with a processor config but no model: config.json named. */
  snprintf(args, sizeof(args), "classify %s %s", dir, img);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "config.json"));
  snprintf(args, sizeof(args), "rm -rf '%s'", tmp);
  ck_assert_int_eq(system(args), 0);
}
END_TEST

/* End to end on the vision fixtures (when present): `classify` prints
 * transformers' softmax probabilities of ViTForImageClassification (printed
 * with 4 decimals: tolerance 1e-4 for the model plus 5e-5 for the print),
 * labels in decreasing order; `reconstruct` writes the PNG that the fixture
 * script draws from ViTMAEForPreTraining with the same noise (each byte
 * within 1: the model's 1e-4 tolerance can flip a rounding). */
START_TEST(cli_end_to_end) {
  char args[4096], path[1024];
  snprintf(path, sizeof(path), "%s/vit_cls/config.json", fx_dir());
  if (access(cli, X_OK) != 0 || access(path, R_OK) != 0) return;
  snprintf(tmp, sizeof(tmp), "/tmp/clf-img-cli-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmp));
  const char *fx = fx_dir();
  snprintf(args, sizeof(args), "classify %s/vit_cls %s/images/test.png %s/images/test.png --top 3", fx, fx, fx);
  ck_assert_int_eq(run_cli(args), 0);
  clf_array probs;
  snprintf(path, sizeof(path), "%s/images/classify_vit_cls.npy", fx);
  ck_assert_int_eq(clf_npy_read(path, &probs), CLF_OK);
  const float *pr = probs.data;
  const char *out = slurp("stdout");
  int lines = 0;
  double last = 2;
  for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
    double p;
    if (strncmp(l, "  ", 2) != 0) {
      ck_assert_ptr_nonnull(strstr(l, "test.png"));
      last = 2;
      continue;
    }
    ck_assert_int_eq(sscanf(l, "%lf", &p), 1);
    const char *paren = strchr(l, '(');
    ck_assert_ptr_nonnull(paren);
    int id = atoi(paren + 1);
    ck_assert(id >= 0 && (size_t)id < probs.shape[0]);
    ck_assert_msg(fabs(p - pr[id]) <= 1.5e-4, "label %d: %g vs transformers %g", id, p, pr[id]);
    ck_assert(p <= last);
    last = p;
    lines++;
  }
  ck_assert_int_eq(lines, 6); /* two images, top 3 */
  clf_array_free(&probs);

  snprintf(args, sizeof(args), "reconstruct %s/vit_mae_pre %s/images/test.png --noise %s/images/mae_noise.npy --out %s/r.png",
           fx, fx, fx, tmp);
  ck_assert_int_eq(run_cli(args), 0);
  clf_image got, want;
  snprintf(path, sizeof(path), "%s/r.png", tmp);
  ck_assert_int_eq(clf_image_read(path, &got), CLF_OK);
  snprintf(path, sizeof(path), "%s/images/reconstruct_vit_mae_pre.png", fx);
  ck_assert_int_eq(clf_image_read(path, &want), CLF_OK);
  ck_assert_int_eq(got.width, want.width);
  ck_assert_int_eq(got.height, want.height);
  for (size_t i = 0; i < (size_t)got.width * got.height * 3; i++)
    ck_assert_msg(abs(got.rgb[i] - want.rgb[i]) <= 1, "byte %zu: %d vs %d", i, got.rgb[i], want.rgb[i]);
  clf_image_free(&got);
  clf_image_free(&want);
  /* A noise of the wrong length is the model's error. */
  snprintf(args, sizeof(args), "reconstruct %s/vit_mae_pre %s/images/test.png --noise %s/images/test_png.npy --out %s/r.png",
           fx, fx, fx, tmp);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "noise"));
  snprintf(args, sizeof(args), "rm -rf '%s'", tmp);
  ck_assert_int_eq(system(args), 0);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("image");
  TCase *tc = tcase_create("image");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, read_matches_pil);
  tcase_add_test(tc, preprocess_matches_transformers);
  tcase_add_test(tc, resize_filters_and_defaults);
  tcase_add_test(tc, write_png_round_trip);
  tcase_add_test(tc, read_errors);
  tcase_add_test(tc, decompression_bombs);
  tcase_add_test(tc, cli_arguments);
  tcase_add_test(tc, cli_end_to_end);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
