/* family.c - the list of model families and what reads their rows: the
 * generic config.json key reader and the GEMM shape list.
 */
#include "family.h"

#include <cjson/cJSON.h>
#include <string.h>

/* Each defined in its own file. */
extern const clf__family clf__bert_family, clf__roberta_family, clf__xlm_roberta_family, clf__distilbert_family,
    clf__gpt2_family, clf__marian_family, clf__vit_family, clf__vit_mae_family, clf__swin_family, clf__llama_family,
    clf__mistral_family, clf__qwen2_family;

static const clf__family *const families[] = {
    &clf__bert_family,   &clf__roberta_family, &clf__xlm_roberta_family, &clf__distilbert_family,
    &clf__gpt2_family,   &clf__marian_family,  &clf__vit_family,         &clf__vit_mae_family,
    &clf__swin_family,   &clf__llama_family,   &clf__mistral_family,     &clf__qwen2_family};

_Static_assert(CLF__ARRAY_LEN(families) <= CLF__FAMILY_MAX, "CLF__FAMILY_MAX is room for every family");

const clf__family *clf__family_find(const char *type) {
  for (size_t i = 0; type && i < CLF__ARRAY_LEN(families); i++)
    if (strcmp(families[i]->type, type) == 0) return families[i];
  return NULL;
}

size_t clf__family_gguf(const clf__gguf_arch **out, size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i < CLF__ARRAY_LEN(families); i++)
    if (families[i]->gguf && n < cap) out[n++] = families[i]->gguf;
  return n;
}

const char *clf__family_names(void) {
  return "bert, roberta, xlm-roberta, distilbert, gpt2, marian, vit, vit_mae, swin, llama, mistral, qwen2";
}

clf_status clf__config_read(clf_context *ctx, const clf__config *c, const clf__config_key *keys, size_t n,
                            void *dims) {
  clf_status st = CLF_OK;
  for (size_t i = 0; i < n && st == CLF_OK; i++) {
    const clf__config_key *k = &keys[i];
    void *at = (char *)dims + k->at;
    switch (k->type) {
      case CLF__KEY_INT:
        st = k->required ? clf__config_int(ctx, c, k->name, at) : clf__config_int_or(ctx, c, k->name, (long)k->dflt, at);
        break;
      case CLF__KEY_FLOAT:
        st = k->required ? clf__config_float(ctx, c, k->name, at) : clf__config_float_or(ctx, c, k->name, k->dflt, at);
        break;
      case CLF__KEY_BOOL:
        st = k->required ? clf__config_bool(ctx, c, k->name, at) : clf__config_bool_or(ctx, c, k->name, (int)k->dflt, at);
        break;
      case CLF__KEY_STR:
        st = k->required ? clf__config_str(ctx, c, k->name, at) : clf__config_str_or(ctx, c, k->name, k->sdflt, at);
        break;
    }
  }
  return st;
}

int clf__config_has_arch(const clf__config *c, const char *name) {
  const cJSON *archs = cJSON_GetObjectItemCaseSensitive(clf__config_json(c), "architectures");
  const cJSON *a;
  cJSON_ArrayForEach(a, archs) if (cJSON_IsString(a) && strcmp(a->valuestring, name) == 0) return 1;
  return 0;
}
