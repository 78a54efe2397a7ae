/* test_weights.c - a model directory's weights: F16/BF16 to f32 conversion
 * (exhaustive against a formula, and through the device), shape checks,
 * pick(), sharded checkpoints and the errors of missing files and tensors
 * and of a file truncated while open. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "models/weights.h"

static char tmpdir[64];

typedef struct tw {
  const char *name, *dtype;
  int ndim;
  size_t shape[4];
  const void *data;
  size_t bytes;
} tw;

static const char *tpath(const char *name) {
  static char path[256];
  snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
  return path;
}

static void put_text(const char *name, const char *text) {
  FILE *f = fopen(tpath(name), "wb");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

static void put_bytes(const char *name, const void *bytes, size_t len) {
  FILE *f = fopen(tpath(name), "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(bytes, 1, len, f), len);
  fclose(f);
}

/* Writes a safetensors file of `n` tensors, in the given order. */
static void put_st(const char *name, const tw *t, size_t n) {
  char hdr[4096];
  size_t k = (size_t)snprintf(hdr, sizeof(hdr), "{\"__metadata__\":{\"format\":\"pt\"}");
  size_t off = 0;
  for (size_t i = 0; i < n; i++) {
    k += (size_t)snprintf(hdr + k, sizeof(hdr) - k, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t[i].name, t[i].dtype);
    for (int d = 0; d < t[i].ndim; d++)
      k += (size_t)snprintf(hdr + k, sizeof(hdr) - k, "%s%zu", d ? "," : "", t[i].shape[d]);
    k += (size_t)snprintf(hdr + k, sizeof(hdr) - k, "],\"data_offsets\":[%zu,%zu]}", off, off + t[i].bytes);
    off += t[i].bytes;
  }
  k += (size_t)snprintf(hdr + k, sizeof(hdr) - k, "}");
  FILE *f = fopen(tpath(name), "wb");
  ck_assert_ptr_nonnull(f);
  unsigned char len[8];
  for (int i = 0; i < 8; i++) len[i] = (unsigned char)((unsigned long long)k >> (8 * i));
  fwrite(len, 1, 8, f);
  fwrite(hdr, 1, k, f);
  for (size_t i = 0; i < n; i++)
    if (t[i].bytes) fwrite(t[i].data, 1, t[i].bytes, f);
  fclose(f);
}

/* Plain formulas for the reference values. */
static double ref_f16(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
  return s ? -v : v;
}
static double ref_bf16(uint16_t b) {
  int s = b >> 15, e = (b >> 7) & 255, m = b & 127;
  double v = e == 0 ? ldexp(m, -133) : e == 255 ? (m ? NAN : INFINITY) : ldexp(128 + m, e - 134);
  return s ? -v : v;
}

/* Same value, and the same sign for zeros; NaN for NaN. */
static int same_value(float got, double ref) {
  if (isnan(ref)) return isnan(got);
  return (double)got == ref && !signbit(got) == !signbit(ref);
}

START_TEST(w_conversion_exhaustive) {
  /* Every one of the 65536 bit patterns of F16 and BF16 converts exactly. */
  for (uint32_t u = 0; u < 65536; u++) {
    ck_assert_msg(same_value(clf__f16_bits_to_f32((uint16_t)u), ref_f16((uint16_t)u)), "f16 0x%04x", u);
    ck_assert_msg(same_value(clf__bf16_to_f32((uint16_t)u), ref_bf16((uint16_t)u)), "bf16 0x%04x", u);
  }
}
END_TEST

/* A model directory with F32, F16 and BF16 weights and an I64 buffer. */
static const uint16_t f16v[] = {0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x3C00, 0xC100, 0x7BFF,
                                0xFBFF, 0x7C00, 0xFC00, 0x8001, 0x3555, 0x7E00};
static const uint16_t bf16v[] = {0x0000, 0x8000, 0x0001, 0x007F, 0x0080, 0x3F80, 0xC040,
                                 0x7F7F, 0x7F80, 0xFF80, 0x8001, 0x3E20, 0x7FC0, 0x4049};
static float f32v[2 * 3 * 7];
static const int64_t i64v[3] = {1, 2, 3};

static void put_model(void) {
  for (size_t i = 0; i < 42; i++) f32v[i] = (float)i * 0.5f - 3.0f;
  const tw t[] = {
      {"bert.embeddings.word_embeddings.weight", "F32", 3, {2, 3, 7}, f32v, sizeof(f32v)},
      {"half", "F16", 2, {2, 7}, f16v, sizeof(f16v)},
      {"brain", "BF16", 1, {14}, bf16v, sizeof(bf16v)},
      {"ids", "I64", 1, {3}, i64v, sizeof(i64v)},
      {"empty", "F32", 2, {0, 5}, NULL, 0},
      {"encoder.layer.0.LayerNorm.gamma", "F32", 1, {7}, f32v, 28},
  };
  put_st("model.safetensors", t, CLF__ARRAY_LEN(t));
}

static clf__weights *open_ok(void) {
  clf__weights *w = NULL;
  TH_OK(clf__weights_open(th_ctx, tmpdir, &w));
  ck_assert_ptr_nonnull(w);
  return w;
}

START_TEST(w_load_dtypes) {
  put_model();
  clf__weights *w = open_ok();
  clf_tensor *t = NULL;
  TH_OK(clf__weights_load(th_ctx, w, "bert.embeddings.word_embeddings.weight", 3, TH_SHAPE(2, 3, 7), &t));
  float *got = th_download(t);
  ck_assert_int_eq(memcmp(got, f32v, sizeof(f32v)), 0); /* F32 as is */
  free(got);
  clf_tensor_destroy(t);

  /* F16 and BF16 (subnormals, extremes, infinities, -0, NaN) are converted
   * exactly: compared with the formula, bit for bit. */
  TH_OK(clf__weights_load(th_ctx, w, "half", 2, TH_SHAPE(2, 7), &t));
  ck_assert_int_eq(clf_tensor_dtype(t), CLF_F32);
  got = th_download(t);
  for (size_t i = 0; i < 14; i++) ck_assert_msg(same_value(got[i], ref_f16(f16v[i])), "half[%zu]", i);
  ck_assert(got[2] == ldexpf(1.0f, -24) && got[9] == INFINITY && signbit(got[1]));
  free(got);
  clf_tensor_destroy(t);
  TH_OK(clf__weights_load(th_ctx, w, "brain", 1, TH_SHAPE(14), &t));
  got = th_download(t);
  for (size_t i = 0; i < 14; i++) ck_assert_msg(same_value(got[i], ref_bf16(bf16v[i])), "brain[%zu]", i);
  ck_assert(got[8] == INFINITY && got[9] == -INFINITY);
  free(got);
  clf_tensor_destroy(t);

  /* A zero-size tensor loads as an empty tensor. */
  TH_OK(clf__weights_load(th_ctx, w, "empty", 2, TH_SHAPE(0, 5), &t));
  ck_assert_uint_eq(clf_tensor_numel(t), 0);
  clf_tensor_destroy(t);

  /* I64 is not a weight dtype. */
  t = (clf_tensor *)1;
  TH_FAILS(clf__weights_load(th_ctx, w, "ids", 1, TH_SHAPE(3), &t), CLF_E_DTYPE, "tensor \"ids\"");
  ck_assert_ptr_null(t);
  TH_FAILS(clf__weights_load(th_ctx, w, "ids", 1, TH_SHAPE(3), &t), CLF_E_DTYPE, "is I64");
  /* ... but its description is there. */
  clf_st_info info;
  TH_OK(clf__weights_info(th_ctx, w, "ids", &info));
  ck_assert(info.bytes == 24 && strcmp(info.dtype, "I64") == 0);
  clf__weights_close(w);
  clf__weights_close(NULL);
}
END_TEST

/* Issue 21: model.safetensors truncated after the weights were opened (as
 * by another process while a model loads).  Reading a tensor wholly before
 * the new end works; one past it, F32 or F16, is CLF_E_IO naming the file,
 * as is loading it; the mapping is never read, so no SIGBUS (the loader
 * used to memcpy from it: the process died). */
START_TEST(w_truncated_while_open) {
  static float big[32768];
  static uint16_t big16[32768];
  for (size_t i = 0; i < 32768; i++) big[i] = (float)i, big16[i] = 0x3C00; /* 1.0 */
  const tw t[] = {
      {"small", "F32", 1, {7}, f32v, 28},
      {"big", "F32", 2, {256, 128}, big, sizeof(big)},
      {"big16", "F16", 2, {256, 128}, big16, sizeof(big16)},
  };
  for (size_t i = 0; i < 7; i++) f32v[i] = (float)i - 3.0f;
  put_st("model.safetensors", t, CLF__ARRAY_LEN(t));
  clf__weights *w = open_ok();
  /* untouched: all three read */
  float *got = NULL;
  size_t shape[8];
  TH_OK(clf__weights_read(th_ctx, w, "big16", 2, NULL, &got, shape));
  ck_assert(got[0] == 1.0f && got[32767] == 1.0f);
  free(got);
  /* one page left: the header and "small" (under 400 bytes) */
  ck_assert_int_eq(truncate(tpath("model.safetensors"), 4096), 0);
  TH_OK(clf__weights_read(th_ctx, w, "small", 1, TH_SHAPE(7), &got, shape));
  ck_assert_int_eq(memcmp(got, f32v, 28), 0);
  free(got);
  char msg[300];
  snprintf(msg, sizeof(msg), "%s/model.safetensors: tensor \"big\": the file ends at byte 4096", tmpdir);
  got = (float *)1;
  TH_FAILS(clf__weights_read(th_ctx, w, "big", 2, NULL, &got, shape), CLF_E_IO, msg);
  ck_assert_ptr_null(got);
  TH_FAILS(clf__weights_read(th_ctx, w, "big16", 2, NULL, &got, shape), CLF_E_IO,
           "changed (shrank) while being read");
  clf_tensor *tt = NULL;
  TH_FAILS(clf__weights_load(th_ctx, w, "big", 2, TH_SHAPE(256, 128), &tt), CLF_E_IO, msg);
  ck_assert_ptr_null(tt);
  clf__weights_close(w);
}
END_TEST

START_TEST(w_shapes_and_names) {
  put_model();
  clf__weights *w = open_ok();
  clf_tensor *t = NULL;
  const char *emb = "bert.embeddings.word_embeddings.weight";
  /* 0 matches any size; shape NULL accepts any shape of that ndim. */
  TH_OK(clf__weights_load(th_ctx, w, emb, 3, TH_SHAPE(2, 0, 7), &t));
  ck_assert_uint_eq(clf_tensor_dim(t, 1), 3);
  clf_tensor_destroy(t);
  TH_OK(clf__weights_load(th_ctx, w, "half", 2, NULL, &t));
  ck_assert(clf_tensor_dim(t, 0) == 2 && clf_tensor_dim(t, 1) == 7);
  clf_tensor_destroy(t);
  TH_FAILS(clf__weights_load(th_ctx, w, emb, 3, TH_SHAPE(2, 3, 8), &t), CLF_E_SHAPE,
           "tensor \"bert.embeddings.word_embeddings.weight\" has shape [2, 3, 7], expected [2, 3, 8]");
  TH_FAILS(clf__weights_load(th_ctx, w, emb, 2, TH_SHAPE(6, 0), &t), CLF_E_SHAPE,
           "has shape [2, 3, 7], expected [6, *]");
  TH_FAILS(clf__weights_load(th_ctx, w, "half", 2, TH_SHAPE(7, 2), &t), CLF_E_SHAPE, "expected [7, 2]");
  TH_FAILS(clf__weights_load(th_ctx, w, "half", 0, NULL, &t), CLF_E_INVALID_ARG, "ndim 0 must be 1..6");
  TH_FAILS(clf__weights_load(th_ctx, w, "half", 2, NULL, NULL), CLF_E_INVALID_ARG, "out is NULL");
  TH_FAILS(clf__weights_load(th_ctx, NULL, "half", 2, NULL, &t), CLF_E_INVALID_ARG, "weights is NULL");
  TH_FAILS(clf__weights_load(th_ctx, w, NULL, 2, NULL, &t), CLF_E_INVALID_ARG, "name is NULL");

  /* Not found, naming the file. */
  char msg[300];
  snprintf(msg, sizeof(msg), "tensor \"pooler.dense.weight\" not found in %s/model.safetensors", tmpdir);
  TH_FAILS(clf__weights_load(th_ctx, w, "pooler.dense.weight", 2, NULL, &t), CLF_E_NOT_FOUND, msg);
  int nd;
  size_t shape[8];
  TH_FAILS(clf__weights_shape(th_ctx, w, "nope", &nd, shape), CLF_E_NOT_FOUND, "tensor \"nope\" not found");

  /* shape() for deducing sizes. */
  TH_OK(clf__weights_shape(th_ctx, w, emb, &nd, shape));
  ck_assert(nd == 3 && shape[0] == 2 && shape[1] == 3 && shape[2] == 7 && shape[3] == 0);

  /* has() and pick(): the first alternative present wins. */
  ck_assert_int_eq(clf__weights_has(w, "half"), 1);
  ck_assert_int_eq(clf__weights_has(w, "hal"), 0);
  ck_assert_int_eq(clf__weights_has(NULL, "half"), 0);
  const char *const word[] = {"embeddings.word_embeddings.weight", emb, "half", NULL};
  ck_assert_str_eq(clf__weights_pick(w, word), emb);
  const char *const ln[] = {"encoder.layer.0.LayerNorm.weight", "encoder.layer.0.LayerNorm.gamma", NULL};
  ck_assert_str_eq(clf__weights_pick(w, ln), "encoder.layer.0.LayerNorm.gamma");
  const char *const none[] = {"a", "b", NULL};
  ck_assert_ptr_null(clf__weights_pick(w, none));
  const char *const empty[] = {NULL};
  ck_assert_ptr_null(clf__weights_pick(w, empty));
  ck_assert_ptr_null(clf__weights_pick(w, NULL));
  clf__weights_close(w);
}
END_TEST

START_TEST(w_sharded) {
  float a[6] = {1, 2, 3, 4, 5, 6}, b[2] = {7, 8};
  const uint16_t c[3] = {0x3C00, 0x4000, 0x0001};
  const tw s1[] = {{"a", "F32", 2, {2, 3}, a, sizeof(a)}, {"c", "F16", 1, {3}, c, sizeof(c)}};
  const tw s2[] = {{"b", "F32", 1, {2}, b, sizeof(b)}, {"unlisted", "F32", 1, {2}, b, sizeof(b)}};
  put_st("model-00001-of-00002.safetensors", s1, 2);
  put_st("model-00002-of-00002.safetensors", s2, 2);
  put_text("model.safetensors.index.json",
           "{\"metadata\": {\"total_size\": 38}, \"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\","
           " \"b\": \"model-00002-of-00002.safetensors\", \"c\": \"model-00001-of-00002.safetensors\"}}");
  clf__weights *w = open_ok();
  clf_tensor *t;
  TH_OK(clf__weights_load(th_ctx, w, "a", 2, TH_SHAPE(2, 3), &t));
  float *got = th_download(t);
  ck_assert_int_eq(memcmp(got, a, sizeof(a)), 0);
  free(got);
  clf_tensor_destroy(t);
  TH_OK(clf__weights_load(th_ctx, w, "b", 1, TH_SHAPE(2), &t));
  got = th_download(t);
  ck_assert(got[0] == 7 && got[1] == 8);
  free(got);
  clf_tensor_destroy(t);
  TH_OK(clf__weights_load(th_ctx, w, "c", 1, TH_SHAPE(3), &t));
  got = th_download(t);
  ck_assert(got[0] == 1 && got[1] == 2 && got[2] == ldexpf(1, -24));
  free(got);
  clf_tensor_destroy(t);
  /* Only the index's names are visible. */
  ck_assert_int_eq(clf__weights_has(w, "unlisted"), 0);
  char msg[300];
  snprintf(msg, sizeof(msg), "tensor \"unlisted\" not found in %s/model.safetensors.index.json", tmpdir);
  TH_FAILS(clf__weights_load(th_ctx, w, "unlisted", 1, NULL, &t), CLF_E_NOT_FOUND, msg);
  clf__weights_close(w);

  /* A tensor placed in a shard that lacks it. */
  put_text("model.safetensors.index.json",
           "{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\","
           " \"b\": \"model-00001-of-00002.safetensors\"}}");
  TH_FAILS(clf__weights_open(th_ctx, tmpdir, &w), CLF_E_FORMAT,
           "places tensor \"b\" in model-00001-of-00002.safetensors, which lacks it");
  ck_assert_ptr_null(w);
  /* A missing shard. */
  put_text("model.safetensors.index.json",
           "{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\", \"z\": \"model-00003.safetensors\"}}");
  snprintf(msg, sizeof(msg), "shard %s/model-00003.safetensors listed in", tmpdir);
  TH_FAILS(clf__weights_open(th_ctx, tmpdir, &w), CLF_E_NOT_FOUND, msg);
  TH_FAILS(clf__weights_open(th_ctx, tmpdir, &w), CLF_E_NOT_FOUND, "is missing");
  /* Shard names must stay inside the directory. */
  put_text("model.safetensors.index.json", "{\"weight_map\": {\"a\": \"../model.safetensors\"}}");
  TH_FAILS(clf__weights_open(th_ctx, tmpdir, &w), CLF_E_FORMAT, "is not a file name in");
  /* Malformed indexes. */
  put_text("model.safetensors.index.json", "{\"weight_map\": [1]}");
  TH_FAILS(clf__weights_open(th_ctx, tmpdir, &w), CLF_E_FORMAT, "with a \"weight_map\" object");
  put_text("model.safetensors.index.json", "{\"weight_map\": {\"a\": 1}}");
  TH_FAILS(clf__weights_open(th_ctx, tmpdir, &w), CLF_E_FORMAT, "weight_map entry \"a\" is not a file name");
  put_text("model.safetensors.index.json", "{\"weight_map\": ");
  TH_FAILS(clf__weights_open(th_ctx, tmpdir, &w), CLF_E_FORMAT, "model.safetensors.index.json is not a JSON");
  /* A malformed shard: the reader's message reaches the context. */
  put_text("model.safetensors.index.json", "{\"weight_map\": {\"a\": \"bad.safetensors\"}}");
  put_bytes("bad.safetensors", "\x05\x00\x00\x00\x00\x00\x00\x00[1,2]", 13);
  TH_FAILS(clf__weights_open(th_ctx, tmpdir, &w), CLF_E_FORMAT, "bad.safetensors: header is an array");
}
END_TEST

START_TEST(w_missing_files) {
  clf__weights *w = (clf__weights *)1;
  TH_FAILS(clf__weights_open(th_ctx, tmpdir, &w), CLF_E_NOT_FOUND,
           "no model.safetensors or model.safetensors.index.json in");
  ck_assert_ptr_null(w);
  put_text("pytorch_model.bin", "PK");
  TH_FAILS(clf__weights_open(th_ctx, tmpdir, &w), CLF_E_NOT_FOUND,
           "has pytorch_model.bin but no model.safetensors: clformer reads safetensors only");
  /* A broken model.safetensors: the reader's error, on the context. */
  put_bytes("model.safetensors", "\x10\x00\x00\x00\x00\x00\x00\x00{}", 10);
  TH_FAILS(clf__weights_open(th_ctx, tmpdir, &w), CLF_E_FORMAT, "model.safetensors: header length 16 runs past");
  /* issue 11: a link loop was reported as no model.safetensors; a FIFO
   * hung the open */
  char p[256];
  snprintf(p, sizeof(p), "%s/model.safetensors", tmpdir);
  ck_assert_int_eq(unlink(p), 0);
  ck_assert_int_eq(symlink(p, p), 0);
  TH_FAILS(clf__weights_open(th_ctx, tmpdir, &w), CLF_E_IO, "Too many levels of symbolic links");
  ck_assert_int_eq(unlink(p), 0);
  ck_assert_int_eq(mkfifo(p, 0600), 0);
  TH_FAILS(clf__weights_open(th_ctx, tmpdir, &w), CLF_E_IO, "model.safetensors: not a regular file");
  ck_assert_int_eq(unlink(p), 0);
  TH_FAILS(clf__weights_open(th_ctx, NULL, &w), CLF_E_INVALID_ARG, "model_dir is NULL");
  TH_FAILS(clf__weights_open(th_ctx, tmpdir, NULL), CLF_E_INVALID_ARG, "out is NULL");
  /* model.safetensors wins over an index, as in transformers. */
  put_model();
  put_text("model.safetensors.index.json", "garbage");
  w = open_ok();
  ck_assert_int_eq(clf__weights_has(w, "half"), 1);
  clf__weights_close(w);
}
END_TEST

static void setup(void) { th_tmpdir_create(tmpdir, sizeof(tmpdir), "w"); }

static void teardown(void) { th_tmpdir_remove(tmpdir); }

static Suite *suite(void) {
  Suite *s = suite_create("weights");
  TCase *tc = tcase_create("weights");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, w_conversion_exhaustive);
  tcase_add_test(tc, w_load_dtypes);
  tcase_add_test(tc, w_shapes_and_names);
  tcase_add_test(tc, w_sharded);
  tcase_add_test(tc, w_missing_files);
  tcase_add_test(tc, w_truncated_while_open);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
