/* family.c - the list of model families and what reads their rows: the
 * generic config.json key reader and the GEMM shape list.
 */
#include "family.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

/* The registry: one X(name) a family, whose clf__family clf__name_family
 * its own file defines, in the order model_types are looked up and listed.
 * A new family is a line here (and its file in meson.build's lib_sources);
 * the declarations, the table and the list of names come from it. */
#define CLF__FAMILIES(X) \
  X(bert)                \
  X(roberta)             \
  X(xlm_roberta)         \
  X(distilbert)          \
  X(gpt2)                \
  X(marian)              \
  X(vit)                 \
  X(vit_mae)             \
  X(swin)                \
  X(llama)               \
  X(mistral)             \
  X(qwen2)               \
  X(qwen3)               \
  X(gemma2)              \
  X(gemma3_text)         \
  X(gemma3)              \
  X(phi3)                \
  X(nomic_bert)

#define CLF__FAMILY_DECLARE(name) extern const clf__family clf__##name##_family;
CLF__FAMILIES(CLF__FAMILY_DECLARE)
#define CLF__FAMILY_ENTRY(name) &clf__##name##_family,
static const clf__family *const families[] = {CLF__FAMILIES(CLF__FAMILY_ENTRY)};

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

const char *clf__family_names(char *buf, size_t len) {
  size_t at = 0;
  if (len) buf[0] = '\0';
  for (size_t i = 0; i < CLF__ARRAY_LEN(families) && at < len; i++) {
    const int k = snprintf(buf + at, len - at, "%s%s", i ? ", " : "", families[i]->type);
    at = k < 0 ? len : at + (size_t)k;
  }
  return buf;
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
