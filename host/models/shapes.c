/* shapes.c - the GEMMs of one forward pass of a model, from its config.json
 * and its family row: what `clformer probe --tune` searches CLBlast's
 * parameters for.
 */
#include "family.h"

#include <stdlib.h>

clf_status clf_model_gemm_shapes(const char *model_dir, size_t tokens, clf_gemm_shape *out, size_t capacity,
                                 size_t *count) {
  static const char op[] = "clf_model_gemm_shapes";
  if (count) *count = 0;
  if (!model_dir || !count || (capacity > 0 && !out))
    return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: model_dir, count or out is NULL", op);
  if (tokens == 0) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: tokens is 0", op);
  clf__config *c = NULL;
  clf_status st = clf__config_load(NULL, model_dir, &c);
  if (st != CLF_OK) return st;
  const char *type;
  const clf__family *f = NULL;
  void *dims = NULL;
  clf__gemm_list *l = calloc(1, sizeof *l);
  if (!l) st = clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
  else if ((st = clf__config_str(NULL, c, "model_type", &type)) == CLF_OK && !(f = clf__family_find(type)))
    st = clf__fail(NULL, CLF_E_UNSUPPORTED, "%s: model_type \"%s\" in %s/config.json is not supported (%s)", op, type,
                   model_dir, clf__family_names());
  if (st == CLF_OK && !(dims = calloc(1, f->dims_size)))
    st = clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
  if (st == CLF_OK && (st = clf__config_read(NULL, c, f->keys, f->n_keys, dims)) == CLF_OK) {
    f->gemms(dims, c, tokens, l);
    for (size_t i = 0; i < l->n && i < capacity && i < CLF__ARRAY_LEN(l->v); i++) out[i] = l->v[i];
    *count = l->n;
  }
  free(dims);
  free(l);
  clf__config_free(c);
  return st;
}
