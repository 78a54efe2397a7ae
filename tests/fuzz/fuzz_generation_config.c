/* fuzz_generation_config.c - libFuzzer target: the input as
 * generation_config.json beside the GPT-2 fixture's config.json and
 * weights, read by clf_model_load (config.c merges it over config.json;
 * model.c's load_gen_settings reads eos/pad/bos, max_length, num_beams,
 * bad_words_ids, length_penalty, early_stopping ...), then used by
 * clf_model_generate for at most 3 new tokens from a 2-token prompt.
 * Inputs whose first byte is odd use the Marian fixture instead
 * (encoder-decoder: decoder_start_token_id, forced_bos/eos); the rest of
 * the input is the file. */
#include "fuzz_util.h"

#include <clformer.h>
#include <stdio.h>

static void setup(void) {
  static int done;
  if (done) return;
  done = 1;
  static const char *const fams[] = {"gpt2", "marian"};
  static const char *const files[] = {"config.json", "model.safetensors"};
  char rel[128];
  for (int f = 0; f < 2; f++) {
    fz_mkdir(fams[f]);
    for (int i = 0; i < 2; i++) {
      snprintf(rel, sizeof rel, "%s/%s", fams[f], files[i]);
      fz_copy_fixture(rel, rel);
    }
  }
  (void)fz_context();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  setup();
  const char *fam = (data[0] & 1) ? "marian" : "gpt2";
  char rel[128], dir[1024];
  snprintf(rel, sizeof rel, "%s/generation_config.json", fam);
  fz_write(rel, data + 1, size - 1);
  snprintf(dir, sizeof dir, "%s", fz_path(fam));
  clf_model *m = NULL;
  if (clf_model_load(fz_context(), dir, &m) != CLF_OK) {
    fz_note("clf_model_load", clf_last_error(fz_context()));
    return 0;
  }
  int64_t ids[2] = {5, 7};
  clf_array in = {"input_ids", CLF_I64, 2, {1, 2}, ids};
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 3;
  clf_array out = {0};
  if (clf_model_generate(m, &in, NULL, &o, &out) != CLF_OK) {
    fz_note("clf_model_generate", clf_last_error(fz_context()));
  } else {
    const int64_t *seq = out.data;
    volatile int64_t sink = 0;
    for (size_t k = 0; k < clf_array_numel(&out); k++) sink += seq[k];
    (void)sink;
  }
  clf_array_free(&out);
  clf_model_destroy(m);
  return 0;
}
