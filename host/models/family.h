/* family.h - a model family as data: its model_type and architectures, its
 * config.json keys (read by one generic reader into the family's dims
 * struct), its loader, and the GEMMs of one forward pass (for tuning).
 */
#ifndef CLF_FAMILY_H
#define CLF_FAMILY_H

#include <stddef.h>

#include "io/gguf_model.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One config.json key: read into the dims struct at `at` as a long (INT),
 * double (FLOAT), int (BOOL) or borrowed const char * (STR); a key that is
 * not `required` takes dflt / sdflt when absent or null. */
typedef enum { CLF__KEY_INT, CLF__KEY_FLOAT, CLF__KEY_BOOL, CLF__KEY_STR } clf__key_type;
typedef struct clf__config_key {
  const char *name;
  clf__key_type type;
  size_t at;
  int required;
  double dflt;
  const char *sdflt;
} clf__config_key;

/* Rows of a key table for dims struct S. */
#define CLF__REQ(S, f, key, T) {key, CLF__KEY_##T, offsetof(S, f), 1, 0, NULL}
#define CLF__OPT(S, f, key, T, d) {key, CLF__KEY_##T, offsetof(S, f), 0, d, NULL}
#define CLF__OPT_STR(S, f, key, d) {key, CLF__KEY_STR, offsetof(S, f), 0, 0, d}

/* Reads every key of the table into dims; errors (CLF_E_FORMAT) name the
 * key and the file, as the clf__config_* readers do. */
clf_status clf__config_read(clf_context *ctx, const clf__config *c, const clf__config_key *keys, size_t n,
                            void *dims);
/* 1 when config.json's architectures lists `name`. */
int clf__config_has_arch(const clf__config *c, const char *name);

typedef struct clf__family {
  const char *type;           /* config.json model_type */
  const char *archs[8];       /* the architectures accepted, NULL-ended (outputs: see the family's file) */
  const clf__config_key *keys;
  size_t n_keys, dims_size;
  /* Fills m from the dims read by the key table (c for what tables do not cover). */
  clf_status (*load)(clf_model *m, const void *dims, const clf__config *c, const clf__weights *w);
  /* The GEMMs of one forward pass over T rows. */
  void (*gemms)(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l);
  /* The GGUF architecture the family reads, as rows (its arch is `type`), or NULL. */
  const clf__gguf_arch *gguf;
} clf__family;

/* The family of model_type `type`, or NULL. */
const clf__family *clf__family_find(const char *type);
/* The model_types supported, comma-separated in registry order, into buf
 * (cut to len): buf, for messages.  CLF__FAMILY_NAMES_LEN holds them all. */
#define CLF__FAMILY_NAMES_LEN 512
const char *clf__family_names(char *buf, size_t len);
/* The GGUF architectures of the families, in registry order, into out
 * (room for cap; CLF__FAMILY_MAX is room for all): how many. */
#define CLF__FAMILY_MAX 32
size_t clf__family_gguf(const clf__gguf_arch **out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
