/* shapes.c - the GEMMs of one forward pass of a model, from its config.json
 * and its family row: what `clformer probe --tune` searches CLBlast's
 * parameters for.
 */
#include "family.h"
#include "base/file.h"
#include "io/gguf_model.h"

#include <stdio.h>
#include <stdlib.h>

/* The GEMMs of config c (named `label` in messages) over `tokens` rows,
 * added to l by the family row of its model_type. */
static clf_status config_gemms(const clf__config *c, const char *label, size_t tokens, clf__gemm_list *l) {
  const char *type;
  clf_status st = clf__config_str(NULL, c, "model_type", &type);
  if (st != CLF_OK) return st;
  const clf__family *f = clf__family_find(type);
  if (!f) {
    char names[CLF__FAMILY_NAMES_LEN];
    return clf__fail(NULL, CLF_E_UNSUPPORTED, "clf_model_gemm_shapes: model_type \"%s\" in %s is not supported (%s)",
                     type, label, clf__family_names(names, sizeof names));
  }
  void *dims = calloc(1, f->dims_size);
  if (!dims) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_model_gemm_shapes: out of host memory");
  if ((st = clf__config_read(NULL, c, f->keys, f->n_keys, dims)) == CLF_OK) f->gemms(dims, c, tokens, l);
  free(dims);
  return st;
}

static void copy_out(const clf__gemm_list *l, clf_gemm_shape *out, size_t capacity, size_t *count) {
  for (size_t i = 0; i < l->n && i < capacity && i < CLF__ARRAY_LEN(l->v); i++) out[i] = l->v[i];
  *count = l->n;
}

static clf_status check_out(const char *op, size_t tokens, clf_gemm_shape *out, size_t capacity, size_t *count) {
  if (count) *count = 0;
  if (!count || (capacity > 0 && !out)) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: count or out is NULL", op);
  if (tokens == 0) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: tokens is 0", op);
  return CLF_OK;
}

clf_status clf_model_gemm_shapes(const char *model_dir, size_t tokens, clf_gemm_shape *out, size_t capacity,
                                 size_t *count) {
  static const char op[] = "clf_model_gemm_shapes";
  clf_status st = check_out(op, tokens, out, capacity, count);
  if (st != CLF_OK) return st;
  if (!model_dir) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: model_dir is NULL", op);
  clf__config *c = NULL;
  clf__gemm_list *l = calloc(1, sizeof *l);
  const clf__gguf_arch *archs[CLF__FAMILY_MAX];
  char label[4200];
  snprintf(label, sizeof label, "%s%s", model_dir, clf__is_file(model_dir) ? "" : "/config.json");
  if (!l) st = clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
  else if ((st = clf__config_load_model(NULL, model_dir, archs, clf__family_gguf(archs, CLF__FAMILY_MAX), &c)) ==
               CLF_OK &&
           (st = config_gemms(c, label, tokens, l)) == CLF_OK)
    copy_out(l, out, capacity, count);
  free(l);
  clf__config_free(c);
  return st;
}

/* One layer of each reference checkpoint, as its published config.json
 * gives it: bert-base-uncased (nn.Linear weights) and GPT-2 124M (fused
 * c_attn, Conv1D weights). */
static const char *const reference_configs[] = {
    "{\"model_type\": \"bert\", \"architectures\": [\"BertModel\"], \"vocab_size\": 30522, \"hidden_size\": 768, "
    "\"num_attention_heads\": 12, \"num_hidden_layers\": 1, \"intermediate_size\": 3072}",
    "{\"model_type\": \"gpt2\", \"architectures\": [\"GPT2Model\"], \"vocab_size\": 50257, \"n_embd\": 768, "
    "\"n_head\": 12, \"n_layer\": 1, \"n_positions\": 1024}",
};

clf_status clf_reference_gemm_shapes(size_t tokens, clf_gemm_shape *out, size_t capacity, size_t *count) {
  static const char op[] = "clf_reference_gemm_shapes";
  clf_status st = check_out(op, tokens, out, capacity, count);
  if (st != CLF_OK) return st;
  clf__gemm_list *l = calloc(1, sizeof *l);
  if (!l) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
  for (size_t i = 0; st == CLF_OK && i < CLF__ARRAY_LEN(reference_configs); i++) {
    clf__config *c = NULL;
    if ((st = clf__config_parse(NULL, "a reference config", reference_configs[i], &c)) == CLF_OK)
      st = config_gemms(c, "a reference config", tokens, l);
    clf__config_free(c);
  }
  if (st == CLF_OK) copy_out(l, out, capacity, count);
  free(l);
  return st;
}
