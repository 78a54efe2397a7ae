/* fuzz_config.c - libFuzzer target: the input as a model's config.json.
 * First through clf_model_gemm_shapes (clf__config_load, the family's key
 * table, its GEMM shapes: host only, any sizes), then through
 * clf_model_load beside the fixture weights of the family the config names
 * (tests/fixtures/<family>/model.safetensors), so hostile values that agree
 * with the weights reach the family's loader. */
#include "fuzz_util.h"

#include <clformer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const families[] = {"bert", "gpt2", "marian", "vit", "swin", "vit_mae"};
#define N_FAMILIES (sizeof families / sizeof families[0])

/* Each family's fixture weights in fz_dir()/<family>/model.safetensors. */
static void setup(void) {
  static int done;
  if (done) return;
  done = 1;
  char rel[128];
  for (size_t i = 0; i < N_FAMILIES; i++) {
    fz_mkdir(families[i]);
    snprintf(rel, sizeof rel, "%s/model.safetensors", families[i]);
    fz_copy_fixture(rel, rel);
  }
  (void)fz_context();
}

/* The family directory whose name follows "model_type": in the text, else
 * the first one (the loader then reports the mismatch or the missing key). */
static const char *family_of(const char *text) {
  const char *at = strstr(text, "\"model_type\"");
  for (size_t i = 0; at && i < N_FAMILIES; i++) {
    char want[64];
    snprintf(want, sizeof want, "\"%s\"", families[i]);
    const char *v = strstr(at, want);
    if (v && v - at < 32) return families[i];
  }
  return families[0];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  setup();
  char *text = fz_strndup(data, size);
  const char *fam = family_of(text);
  free(text);
  char rel[128];
  snprintf(rel, sizeof rel, "%s/config.json", fam);
  fz_write(rel, data, size);
  snprintf(rel, sizeof rel, "%s", fam);
  char dir[1024];
  snprintf(dir, sizeof dir, "%s", fz_path(rel));
  clf_gemm_shape shapes[64];
  size_t n = 0;
  if (clf_model_gemm_shapes(dir, 64, shapes, 64, &n) != CLF_OK) fz_note("clf_model_gemm_shapes", clf_last_error(NULL));
  clf_model *m = NULL;
  if (clf_model_load(fz_context(), dir, &m) == CLF_OK) {
    fz_note("clf_model_load", "loaded");
    clf_model_destroy(m);
  } else {
    fz_note("clf_model_load", clf_last_error(fz_context()));
  }
  return 0;
}
