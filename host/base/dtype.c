/* dtype.c - the element types: the rows of clformer.h's CLF_DTYPE_MAP as
 * the library looks them up (by clf_dtype, by ggml's number), and the
 * public functions that name, size and list them.  Every other table of a
 * type's facts is derived from the same list, not from this file's order.
 */
#include "status.h"

#include <stdio.h>
#include <string.h>

/* Each row's place in the map, and their count. */
enum {
#define CLF__DTYPE_IDX(NAME, value, name, wname, ggml, block, bytes, wtype, flags) ROW_##NAME,
  CLF_DTYPE_MAP(CLF__DTYPE_IDX)
#undef CLF__DTYPE_IDX
      ROW_COUNT
};

static const clf__dtype_row rows[] = {
#define CLF__DTYPE_ROW(NAME, value, name, wname, ggml, block, bytes, wtype, flags) \
  {CLF_##NAME, name, wname, ggml, block, bytes, wtype, flags},
    CLF_DTYPE_MAP(CLF__DTYPE_ROW)
#undef CLF__DTYPE_ROW
};
_Static_assert(CLF__ARRAY_LEN(rows) == ROW_COUNT && (int)ROW_COUNT == (int)CLF__DTYPE_COUNT, "one row per CLF_DTYPE_MAP entry");

/* A switch, so that two rows with one value do not compile. */
const clf__dtype_row *clf__dtype(clf_dtype dt) {
  switch (dt) {
#define CLF__DTYPE_CASE(NAME, value, name, wname, ggml, block, bytes, wtype, flags) \
  case CLF_##NAME:                                                                   \
    return &rows[ROW_##NAME];
    CLF_DTYPE_MAP(CLF__DTYPE_CASE)
#undef CLF__DTYPE_CASE
  }
  return NULL;
}

const clf__dtype_row *clf__dtype_of_ggml(unsigned ggml) {
  for (size_t i = 0; i < ROW_COUNT; i++)
    if (rows[i].ggml >= 0 && (unsigned)rows[i].ggml == ggml) return &rows[i];
  return NULL;
}

size_t clf_dtype_size(clf_dtype dtype) {
  const clf__dtype_row *r = clf__dtype(dtype);
  return r && r->block == 1 ? r->bytes : 0;
}

const char *clf_dtype_name(clf_dtype dtype) {
  const clf__dtype_row *r = clf__dtype(dtype);
  return r ? r->name : "unknown";
}

const char *clf__weight_type_name(clf_dtype wt) {
  const clf__dtype_row *r = clf__dtype(wt);
  return r ? r->weight_name : "unknown";
}

void clf__weight_type_names(char *buf, size_t len) {
  if (!len) return;
  size_t n = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < ROW_COUNT; i++)
    if (rows[i].flags & CLF_DTYPE_WEIGHTS) {
      snprintf(buf + n, len - n, "%s%s", n ? ", " : "", rows[i].weight_name);
      n += strlen(buf + n);
    }
}

clf_status clf_weight_type_from_name(const char *name, clf_dtype *out) {
  if (!out) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_weight_type_from_name: out is NULL");
  for (size_t i = 0; i < ROW_COUNT && name; i++) {
    if (!(rows[i].flags & CLF_DTYPE_WEIGHTS)) continue;
    if (strcmp(name, rows[i].weight_name) == 0 || strcmp(name, rows[i].name) == 0) {
      *out = rows[i].dt;
      return CLF_OK;
    }
  }
  char names[256];
  clf__weight_type_names(names, sizeof names);
  return clf__fail(NULL, CLF_E_INVALID_ARG, "weight type \"%s\" is not one of %s", name ? name : "(null)", names);
}

size_t clf_dtype_count(void) { return ROW_COUNT; }

clf_status clf_dtype_at(size_t i, clf_dtype_desc *out) {
  if (!out || i >= ROW_COUNT)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_dtype_at: %s", out ? "no such row" : "out is NULL");
  const clf__dtype_row *r = &rows[i];
  *out = (clf_dtype_desc){.dtype = r->dt,
                          .name = r->name,
                          .weight_name = r->weight_name,
                          .ggml_type = r->ggml,
                          .block = r->block,
                          .block_bytes = r->bytes,
                          .weights_target = (r->flags & CLF_DTYPE_WEIGHTS) != 0,
                          .from_f32 = (r->flags & CLF_DTYPE_FROM_F32) != 0,
                          .ggml_layout = (r->flags & CLF_DTYPE_GGML) != 0,
                          .linear_weight = r->wtype >= 0};
  return CLF_OK;
}
