/* image.c - PNG and JPEG files as 8-bit RGB (libpng, libjpeg), PIL-exact
 * resizing (a port of Pillow's Resample.c) and ViTImageProcessor's
 * preprocessing into pixel_values. */
#include "base/checked.h"
#include "base/file.h"
#include "base/limits.h"
#include "base/status.h"
#include "config.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

void clf_image_free(clf_image *img) {
  if (!img) return;
  free(img->rgb);
  img->rgb = NULL;
  img->width = img->height = 0;
}

/* The largest image file read: far above a 65535 x 65535 JPEG or PNG of
 * any sense, low enough that a wrong path cannot exhaust memory. */
#define IMAGE_MAX_BYTES ((size_t)1 << 30)

/* An image's declared size against CLF_LIMIT_IMAGE_PIXELS (Pillow's
 * decompression-bomb threshold), checked from the header before the
 * decoder allocates: a few hundred bytes can declare 65500 x 65500. */
static clf_status image_budget(const char *path, const char *kind, size_t w, size_t h) {
  size_t px;
  if (!clf__mul_ok(w, h, &px) || px > CLF_LIMIT_IMAGE_PIXELS)
    return clf__fail(NULL, CLF_E_UNSUPPORTED, "image %s: %s of %zu x %zu is larger than the limit of %zu pixels "
                     "(a decompression bomb?)", path, kind, w, h, CLF_LIMIT_IMAGE_PIXELS);
  return CLF_OK;
}

/* ---- PNG ---- */

typedef struct png_err {
  jmp_buf jb;
  char msg[200];
} png_err;

static void png_on_error(png_structp png, png_const_charp msg) {
  png_err *e = (png_err *)png_get_error_ptr(png);
  snprintf(e->msg, sizeof(e->msg), "%s", msg);
  longjmp(e->jb, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg) {
  (void)png;
  (void)msg;
}

/* The file's bytes as libpng's input; running past the end is libpng's own
 * "Read Error", as with a truncated stdio file. */
typedef struct png_src {
  const unsigned char *p;
  size_t left;
} png_src;

static void png_read_mem(png_structp png, png_bytep dst, size_t n) {
  png_src *src = (png_src *)png_get_io_ptr(png);
  if (n > src->left) png_error(png, "Read Error");
  memcpy(dst, src->p, n);
  src->p += n;
  src->left -= n;
}

static clf_status read_png(const unsigned char *data, size_t len, const char *path, clf_image *out) {
  png_src src = {data, len};
  png_err err;
  err.msg[0] = '\0';
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &err, png_on_error, png_on_warning);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  unsigned char *volatile rgb = NULL;
  png_bytep *volatile rows = NULL;
  if (!png || !info) {
    png_destroy_read_struct(png ? &png : NULL, NULL, NULL);
    return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "image %s: out of memory", path);
  }
  if (setjmp(err.jb)) {
    png_destroy_read_struct(&png, &info, NULL);
    free(rgb);
    free(rows);
    return clf__fail(NULL, CLF_E_FORMAT, "image %s: corrupt or truncated PNG (%s)", path, err.msg);
  }
  png_set_read_fn(png, &src, png_read_mem);
  png_read_info(png, info);
  png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  clf_status budget = image_budget(path, "PNG", w, h);
  if (budget != CLF_OK) {
    png_destroy_read_struct(&png, &info, NULL);
    return budget;
  }
  /* PIL's convert("RGB"): palettes and low bit depths expanded, alpha and
   * tRNS dropped (no compositing), 16-bit samples keep the high byte. */
  png_set_expand(png);
  png_set_strip_16(png);
  png_set_strip_alpha(png);
  png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != (size_t)w * 3 || w > 65535 || h > 65535) {
    png_destroy_read_struct(&png, &info, NULL);
    return clf__fail(NULL, CLF_E_UNSUPPORTED, "image %s: unsupported PNG layout (%u x %u)", path,
                     (unsigned)w, (unsigned)h);
  }
  rgb = malloc((size_t)w * h * 3);
  rows = malloc(sizeof(png_bytep) * h);
  if (!rgb || !rows) {
    png_destroy_read_struct(&png, &info, NULL);
    free(rgb);
    free(rows);
    return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "image %s: out of memory", path);
  }
  for (png_uint_32 y = 0; y < h; y++) rows[y] = rgb + (size_t)y * w * 3;
  png_read_image(png, rows);
  png_read_end(png, NULL);
  png_destroy_read_struct(&png, &info, NULL);
  free(rows);
  out->width = (int)w;
  out->height = (int)h;
  out->rgb = rgb;
  return CLF_OK;
}

/* ---- JPEG ---- */

typedef struct jpg_err {
  struct jpeg_error_mgr mgr;
  jmp_buf jb;
  char msg[JMSG_LENGTH_MAX];
} jpg_err;

static void jpg_on_error(j_common_ptr cinfo) {
  jpg_err *e = (jpg_err *)cinfo->err;
  e->mgr.format_message(cinfo, e->msg);
  longjmp(e->jb, 1);
}

/* Warnings are ignored except running out of data, which PIL reports as a
 * truncated image too. */
static void jpg_on_message(j_common_ptr cinfo, int level) {
  jpg_err *e = (jpg_err *)cinfo->err;
  if (level < 0 && e->mgr.msg_code == JWRN_JPEG_EOF) {
    e->mgr.format_message(cinfo, e->msg);
    longjmp(e->jb, 1);
  }
}

static clf_status read_jpeg(const unsigned char *data, size_t len, const char *path, clf_image *out) {
  struct jpeg_decompress_struct cinfo;
  jpg_err err;
  unsigned char *volatile rgb = NULL;
  memset(&cinfo, 0, sizeof(cinfo));
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpg_on_error;
  err.mgr.emit_message = jpg_on_message;
  err.msg[0] = '\0';
  if (setjmp(err.jb)) {
    jpeg_destroy_decompress(&cinfo);
    free(rgb);
    return clf__fail(NULL, CLF_E_FORMAT, "image %s: corrupt or truncated JPEG (%s)", path, err.msg);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, (unsigned long)len);
  jpeg_read_header(&cinfo, TRUE);
  clf_status budget = image_budget(path, "JPEG", cinfo.image_width, cinfo.image_height);
  if (budget != CLF_OK) {
    jpeg_destroy_decompress(&cinfo);
    return budget;
  }
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    jpeg_destroy_decompress(&cinfo);
    return clf__fail(NULL, CLF_E_UNSUPPORTED, "image %s: CMYK JPEG is not supported", path);
  }
  cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&cinfo);
  if (cinfo.output_components != 3 || cinfo.output_width > 65535 || cinfo.output_height > 65535) {
    jpeg_destroy_decompress(&cinfo);
    return clf__fail(NULL, CLF_E_UNSUPPORTED, "image %s: unsupported JPEG layout", path);
  }
  size_t w = cinfo.output_width, h = cinfo.output_height;
  rgb = malloc(w * h * 3);
  if (!rgb) {
    jpeg_destroy_decompress(&cinfo);
    return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "image %s: out of memory", path);
  }
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = rgb + (size_t)cinfo.output_scanline * w * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  out->width = (int)w;
  out->height = (int)h;
  out->rgb = rgb;
  return CLF_OK;
}

clf_status clf_image_read(const char *path, clf_image *out) {
  if (!out) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_image_read: out is NULL");
  memset(out, 0, sizeof(*out));
  if (!path) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_image_read: path is NULL");
  char *text;
  size_t n;
  clf_status st = clf__read_file(NULL, "image", path, IMAGE_MAX_BYTES, &text, &n);
  if (st != CLF_OK) return st;
  const unsigned char *data = (const unsigned char *)text;
  if (n >= 8 && !png_sig_cmp(data, 0, 8))
    st = read_png(data, n, path, out);
  else if (n >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF)
    st = read_jpeg(data, n, path, out);
  else
    st = clf__fail(NULL, CLF_E_FORMAT, "image %s: not a PNG or JPEG image", path);
  free(text);
  return st;
}

clf_status clf_image_write_png(const char *path, const clf_image *img) {
  if (!path || !img || !img->rgb || img->width < 1 || img->height < 1)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_image_write_png: NULL path or empty image");
  png_image pi;
  memset(&pi, 0, sizeof(pi));
  pi.version = PNG_IMAGE_VERSION;
  pi.width = (png_uint_32)img->width;
  pi.height = (png_uint_32)img->height;
  pi.format = PNG_FORMAT_RGB;
  /* Written to a file of our own next to it, then renamed over it: a failed
   * write removes only that file, never what path names (an empty
   * directory given as the output was deleted by remove(path)). */
  char tmp[4200];
  if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >= (int)sizeof tmp)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_image_write_png: path is too long (%zu bytes)", strlen(path));
  if (!png_image_write_to_file(&pi, tmp, 0, img->rgb, 0, NULL)) {
    clf_status st = clf__fail(NULL, CLF_E_IO, "image %s: cannot write PNG: %s", path, pi.message);
    png_image_free(&pi);
    remove(tmp);
    return st;
  }
  if (rename(tmp, path) != 0) {
    clf_status st = clf__fail(NULL, CLF_E_IO, "image %s: cannot write PNG: %s", path, strerror(errno));
    remove(tmp);
    return st;
  }
  return CLF_OK;
}

/* ---- resizing: Pillow's Resample.c (ImagingResample for 8-bit RGB) ---- */

static double f_box(double x) { return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0; }
static double f_bilinear(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}
static double f_hamming(double x) {
  if (x < 0.0) x = -x;
  if (x == 0.0) return 1.0;
  if (x >= 1.0) return 0.0;
  x = x * M_PI;
  return sin(x) / x * (0.54 + 0.46 * cos(x));
}
static double f_bicubic(double x) {
  const double a = -0.5; /* as Pillow */
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}
static double sinc(double x) {
  if (x == 0.0) return 1.0;
  x = x * M_PI;
  return sin(x) / x;
}
static double f_lanczos(double x) { return (-3.0 <= x && x < 3.0) ? sinc(x) * sinc(x / 3) : 0.0; }

#define PRECISION_BITS (32 - 8 - 2)

/* Fixed-point weights for one axis: bounds[2 * o] = first input index,
 * bounds[2 * o + 1] = count; kk[o * ksize + i] the weights. */
static int precompute(int in_size, int out_size, double (*filter)(double), double support0, int **bounds_out,
                      int **kk_out) {
  double scale = (double)in_size / out_size;
  double filterscale = scale < 1.0 ? 1.0 : scale;
  double support = support0 * filterscale;
  int ksize = (int)ceil(support) * 2 + 1;
  double *pre = malloc(sizeof(double) * (size_t)out_size * ksize);
  int *kk = malloc(sizeof(int) * (size_t)out_size * ksize);
  int *bounds = malloc(sizeof(int) * (size_t)out_size * 2);
  if (!pre || !kk || !bounds) {
    free(pre);
    free(kk);
    free(bounds);
    return -1;
  }
  for (int xx = 0; xx < out_size; xx++) {
    double center = (xx + 0.5) * scale, ww = 0.0, ss = 1.0 / filterscale;
    int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5);
    if (xmin < 0) xmin = 0;
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double *k = &pre[(size_t)xx * ksize];
    int x;
    for (x = 0; x < xmax; x++) {
      double w = filter((x + xmin - center + 0.5) * ss);
      k[x] = w;
      ww += w;
    }
    for (x = 0; x < xmax; x++)
      if (ww != 0.0) k[x] /= ww;
    for (; x < ksize; x++) k[x] = 0;
    bounds[xx * 2] = xmin;
    bounds[xx * 2 + 1] = xmax;
  }
  for (size_t i = 0; i < (size_t)out_size * ksize; i++)
    kk[i] = pre[i] < 0 ? (int)(-0.5 + pre[i] * (1 << PRECISION_BITS)) : (int)(0.5 + pre[i] * (1 << PRECISION_BITS));
  free(pre);
  *bounds_out = bounds;
  *kk_out = kk;
  return ksize;
}

static unsigned char clip8(int v) {
  v >>= PRECISION_BITS; /* arithmetic shift, as Pillow's lookup index */
  return (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* The filter of a PIL resample code and its support; 0 when unknown. */
static int pick_filter(int resample, double (**filter)(double), double *support) {
  static const struct {
    int resample;
    double (*filter)(double);
    double support;
  } filters[] = {
      {CLF_RESAMPLE_BOX, f_box, 0.5},         {CLF_RESAMPLE_BILINEAR, f_bilinear, 1.0},
      {CLF_RESAMPLE_HAMMING, f_hamming, 1.0}, {CLF_RESAMPLE_BICUBIC, f_bicubic, 2.0},
      {CLF_RESAMPLE_LANCZOS, f_lanczos, 3.0},
  };
  for (size_t i = 0; i < CLF__ARRAY_LEN(filters); i++)
    if (filters[i].resample == resample) {
      *filter = filters[i].filter;
      *support = filters[i].support;
      return 1;
    }
  return 0;
}

/* Horizontal pass: `rows` rows of width iw from `src` into dst, width ow,
 * with the weights of precompute (8-bit result, as Pillow). */
static void resample_rows(const unsigned char *src, size_t iw, size_t rows, unsigned char *dst, size_t ow,
                          const int *bounds, const int *kk, int ksize) {
  for (size_t y = 0; y < rows; y++) {
    const unsigned char *line = src + y * iw * 3;
    unsigned char *o = dst + y * ow * 3;
    for (size_t xx = 0; xx < ow; xx++) {
      int xmin = bounds[xx * 2], xmax = bounds[xx * 2 + 1];
      const int *k = &kk[xx * (size_t)ksize];
      int s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
      for (int x = 0; x < xmax; x++) {
        const unsigned char *p = line + (size_t)(x + xmin) * 3;
        s0 += p[0] * k[x];
        s1 += p[1] * k[x];
        s2 += p[2] * k[x];
      }
      o[xx * 3] = clip8(s0);
      o[xx * 3 + 1] = clip8(s1);
      o[xx * 3 + 2] = clip8(s2);
    }
  }
}

/* Vertical pass: rows of width w from src (whose row 0 is input row y0)
 * into oh rows of dst. */
static void resample_cols(const unsigned char *src, size_t w, size_t y0, unsigned char *dst, size_t oh,
                          const int *bounds, const int *kk, int ksize) {
  for (size_t yy = 0; yy < oh; yy++) {
    int ymin = bounds[yy * 2] - (int)y0, ymax = bounds[yy * 2 + 1];
    const int *k = &kk[yy * (size_t)ksize];
    unsigned char *o = dst + yy * w * 3;
    for (size_t xx = 0; xx < w * 3; xx++) {
      int s = 1 << (PRECISION_BITS - 1);
      for (int y = 0; y < ymax; y++) s += src[((size_t)(y + ymin) * w) * 3 + xx] * k[y];
      o[xx] = clip8(s);
    }
  }
}

/* Pillow's two passes into out->rgb (allocated, of the output size):
 * horizontal over the input rows the vertical pass uses, then vertical.
 * 0 when out of memory. */
static int resample_two_pass(const clf_image *in, clf_image *out, double (*filter)(double), double support) {
  size_t iw = (size_t)in->width, ih = (size_t)in->height, ow = (size_t)out->width, oh = (size_t)out->height;
  int *bh = NULL, *kh = NULL, *bv = NULL, *kv = NULL;
  int ksh = precompute(in->width, out->width, filter, support, &bh, &kh);
  int ksv = ksh < 0 ? -1 : precompute(in->height, out->height, filter, support, &bv, &kv);
  unsigned char *tmp = NULL;
  const unsigned char *src = in->rgb;
  size_t y0 = 0;
  if (ksv >= 0 && iw != ow) {
    y0 = (size_t)bv[0];
    size_t rows = (size_t)(bv[(oh - 1) * 2] + bv[(oh - 1) * 2 + 1]) - y0;
    tmp = malloc(ow * rows * 3);
    if (tmp) {
      resample_rows(in->rgb + y0 * iw * 3, iw, rows, ih == oh ? out->rgb : tmp, ow, bh, kh, ksh);
      src = tmp;
    }
  }
  if (ksv >= 0 && (tmp || iw == ow) && ih != oh) resample_cols(src, ow, y0, out->rgb, oh, bv, kv, ksv);
  int ok = !(ksv < 0 || (!tmp && iw != ow));
  free(tmp);
  free(bh);
  free(kh);
  free(bv);
  free(kv);
  return ok;
}

clf_status clf_image_resize(const clf_image *in, int width, int height, int resample, clf_image *out) {
  if (!out) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_image_resize: out is NULL");
  memset(out, 0, sizeof(*out));
  if (!in || !in->rgb || in->width < 1 || in->height < 1)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_image_resize: NULL or empty input image");
  if (width < 1 || height < 1)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_image_resize: bad output size %d x %d", width, height);
  double (*filter)(double);
  double support;
  if (!pick_filter(resample, &filter, &support))
    return clf__fail(NULL, CLF_E_UNSUPPORTED,
                     "clf_image_resize: resample %d is not supported (1 lanczos, 2 bilinear, 3 bicubic, "
                     "4 box, 5 hamming)",
                     resample);
  size_t iw = (size_t)in->width, ih = (size_t)in->height, ow = (size_t)width, oh = (size_t)height;
  out->rgb = malloc(ow * oh * 3);
  if (!out->rgb) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_image_resize: out of memory");
  out->width = width;
  out->height = height;
  if (iw == ow && ih == oh) { /* PIL returns a copy */
    memcpy(out->rgb, in->rgb, iw * ih * 3);
    return CLF_OK;
  }
  if (!resample_two_pass(in, out, filter, support)) {
    clf_image_free(out);
    return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_image_resize: out of memory");
  }
  return CLF_OK;
}

/* ---- preprocessor_config.json ---- */

static clf_status num_list(const char *file, const cJSON *v, const char *key, double *dst) {
  if (cJSON_IsNumber(v)) {
    dst[0] = dst[1] = dst[2] = v->valuedouble;
    return CLF_OK;
  }
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 3)
    return clf__fail(NULL, CLF_E_FORMAT, "%s: \"%s\" must be a list of 3 numbers", file, key);
  for (int i = 0; i < 3; i++) {
    const cJSON *e = cJSON_GetArrayItem(v, i);
    if (!cJSON_IsNumber(e)) return clf__fail(NULL, CLF_E_FORMAT, "%s: \"%s\" must be a list of 3 numbers", file, key);
    dst[i] = e->valuedouble;
  }
  return CLF_OK;
}

static clf_status get_bool(const char *file, const cJSON *root, const char *key, int *dst) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
  if (!v || cJSON_IsNull(v)) return CLF_OK;
  if (!cJSON_IsBool(v)) return clf__fail(NULL, CLF_E_FORMAT, "%s: \"%s\" must be true or false", file, key);
  *dst = cJSON_IsTrue(v);
  return CLF_OK;
}

static clf_status get_int(const char *file, const cJSON *v, const char *key, int lo, int *dst) {
  if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo ||
      v->valuedouble > 65535)
    return clf__fail(NULL, CLF_E_FORMAT, "%s: \"%s\" must be an integer in [%d, 65535]", file, key, lo);
  *dst = (int)v->valuedouble;
  return CLF_OK;
}

static clf_status parse_processor(const char *file, const cJSON *root, clf_image_processor *p) {
  clf_status st;
  const cJSON *v;
  if (!cJSON_IsObject(root)) return clf__fail(NULL, CLF_E_FORMAT, "%s: not a JSON object", file);
  if ((st = get_bool(file, root, "do_resize", &p->do_resize)) != CLF_OK) return st;
  if ((st = get_bool(file, root, "do_rescale", &p->do_rescale)) != CLF_OK) return st;
  if ((st = get_bool(file, root, "do_normalize", &p->do_normalize)) != CLF_OK) return st;
  if ((v = cJSON_GetObjectItemCaseSensitive(root, "size")) && !cJSON_IsNull(v)) {
    if (cJSON_IsNumber(v)) {
      if ((st = get_int(file, v, "size", 1, &p->width)) != CLF_OK) return st;
      p->height = p->width;
    } else if (cJSON_IsObject(v)) {
      const cJSON *hh = cJSON_GetObjectItemCaseSensitive(v, "height");
      const cJSON *ww = cJSON_GetObjectItemCaseSensitive(v, "width");
      if (!hh || !ww)
        return clf__fail(NULL, CLF_E_UNSUPPORTED, "%s: \"size\" must have \"height\" and \"width\" "
                         "(ViTImageProcessor)", file);
      if ((st = get_int(file, hh, "size.height", 1, &p->height)) != CLF_OK) return st;
      if ((st = get_int(file, ww, "size.width", 1, &p->width)) != CLF_OK) return st;
    } else {
      return clf__fail(NULL, CLF_E_FORMAT, "%s: \"size\" must be an object or an integer", file);
    }
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(root, "resample")) && !cJSON_IsNull(v))
    if ((st = get_int(file, v, "resample", 0, &p->resample)) != CLF_OK) return st;
  if ((v = cJSON_GetObjectItemCaseSensitive(root, "rescale_factor")) && !cJSON_IsNull(v)) {
    if (!cJSON_IsNumber(v)) return clf__fail(NULL, CLF_E_FORMAT, "%s: \"rescale_factor\" must be a number", file);
    p->rescale_factor = v->valuedouble;
  }
  if ((v = cJSON_GetObjectItemCaseSensitive(root, "image_mean")) && !cJSON_IsNull(v))
    if ((st = num_list(file, v, "image_mean", p->mean)) != CLF_OK) return st;
  if ((v = cJSON_GetObjectItemCaseSensitive(root, "image_std")) && !cJSON_IsNull(v))
    if ((st = num_list(file, v, "image_std", p->std)) != CLF_OK) return st;
  return CLF_OK;
}

clf_status clf_image_processor_load(const char *model_dir, clf_image_processor *p) {
  if (!model_dir || !p) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_image_processor_load: NULL argument");
  *p = (clf_image_processor){1, 224, 224, CLF_RESAMPLE_BILINEAR, 1, 1.0 / 255, 1, {0.5, 0.5, 0.5}, {0.5, 0.5, 0.5}};
  char file[4096];
  snprintf(file, sizeof(file), "%s/preprocessor_config.json", model_dir);
  char *text;
  clf_status st = clf__read_file(NULL, "image processor", file, CLF__JSON_CONFIG_MAX_BYTES, &text, NULL);
  if (st != CLF_OK) return st;
  cJSON *root = cJSON_Parse(text);
  free(text);
  if (!root) return clf__fail(NULL, CLF_E_FORMAT, "%s: not valid JSON", file);
  st = parse_processor(file, root, p);
  cJSON_Delete(root);
  return st;
}

clf_status clf_image_preprocess_with(const clf_image *img, const clf_image_processor *p, clf_array *pv) {
  if (!pv) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_image_preprocess: pixel_values is NULL");
  memset(pv, 0, sizeof(*pv));
  if (!img || !img->rgb || img->width < 1 || img->height < 1 || !p)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_image_preprocess: NULL or empty image or processor");
  for (int c = 0; c < 3; c++)
    if (p->do_normalize && p->std[c] == 0.0)
      return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_image_preprocess: image_std[%d] is 0", c);
  clf_image r = {0, 0, NULL};
  const clf_image *src = img;
  if (p->do_resize) {
    clf_status st = clf_image_resize(img, p->width, p->height, p->resample, &r);
    if (st != CLF_OK) return st;
    src = &r;
  }
  size_t w = (size_t)src->width, h = (size_t)src->height;
  float *out = malloc(sizeof(float) * 3 * w * h);
  if (!out) {
    clf_image_free(&r);
    return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_image_preprocess: out of memory");
  }
  /* As transformers 4.40 computes it: rescale in float64 then cast to
   * float32; normalize in float32 with mean and std cast to float32. */
  for (int c = 0; c < 3; c++) {
    float mean = (float)p->mean[c], std = (float)p->std[c];
    for (size_t i = 0; i < w * h; i++) {
      float x = src->rgb[i * 3 + c];
      if (p->do_rescale) x = (float)((double)src->rgb[i * 3 + c] * p->rescale_factor);
      if (p->do_normalize) {
        volatile float d = x - mean; /* no fused or wider evaluation */
        x = d / std;
      }
      out[(size_t)c * w * h + i] = x;
    }
  }
  clf_image_free(&r);
  snprintf(pv->name, sizeof(pv->name), "pixel_values");
  pv->dtype = CLF_F32;
  pv->ndim = 4;
  pv->shape[0] = 1;
  pv->shape[1] = 3;
  pv->shape[2] = h;
  pv->shape[3] = w;
  pv->data = out;
  return CLF_OK;
}

clf_status clf_image_preprocess(const clf_image *img, const char *model_dir, clf_array *pv) {
  if (pv) memset(pv, 0, sizeof(*pv));
  clf_image_processor p;
  clf_status st = clf_image_processor_load(model_dir, &p);
  if (st != CLF_OK) return st;
  return clf_image_preprocess_with(img, &p, pv);
}
