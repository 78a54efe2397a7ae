/* fuzz_shard_index.c - libFuzzer target: the input as
 * model.safetensors.index.json in a directory whose shards are two fixture
 * files (model-00001-of-00002.safetensors: tests/fixtures/loader/
 * ref.safetensors, every dtype; model-00002-of-00002.safetensors: the BERT
 * fixture's weights), opened by clf__weights_open (host/models/weights.c).
 * Every name the index lists is then looked up, its shape and raw info
 * taken and, for the float dtypes, read as f32 on the host. */
#include "fuzz_util.h"

#include "models/weights.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

static void setup(void) {
  static int done;
  if (done) return;
  done = 1;
  fz_mkdir("sharded");
  fz_copy_fixture("loader/ref.safetensors", "sharded/model-00001-of-00002.safetensors");
  fz_copy_fixture("bert/model.safetensors", "sharded/model-00002-of-00002.safetensors");
}

/* What the model loader asks of a tensor it was told exists. */
static void use_tensor(const clf__weights *w, const char *name) {
  if (!clf__weights_has(w, name)) return;
  int ndim = 0;
  size_t shape[8];
  if (clf__weights_shape(NULL, w, name, &ndim, shape) != CLF_OK) return;
  clf_st_info info;
  if (clf__weights_info(NULL, w, name, &info) != CLF_OK) abort(); /* has() said it is there */
  if (ndim < 1 || ndim > CLF_MAX_DIMS) return;
  float *x = NULL;
  size_t got[8];
  if (clf__weights_read(NULL, w, name, ndim, NULL, &x, got) == CLF_OK) {
    size_t n = 1;
    for (int d = 0; d < ndim; d++) n *= got[d];
    volatile float sink = 0;
    for (size_t k = 0; k < n; k++) sink += x[k];
    (void)sink;
  }
  free(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  setup();
  fz_write("sharded/model.safetensors.index.json", data, size);
  clf__weights *w = NULL;
  if (clf__weights_open(NULL, fz_path("sharded"), &w) != CLF_OK) return 0;
  (void)clf__weights_bytes_as(w, CLF_Q8_0);
  cJSON *j = cJSON_ParseWithLength((const char *)data, size);
  const cJSON *e, *map = cJSON_GetObjectItemCaseSensitive(j, "weight_map");
  cJSON_ArrayForEach(e, map) use_tensor(w, e->string);
  use_tensor(w, "a.f32"); /* listed or not: an unlisted one must stay invisible */
  cJSON_Delete(j);
  clf__weights_close(w);
  return 0;
}
