/* config.h - a Hugging Face model's config.json, with generation_config.json
 * (when present) merged over it: typed getters whose errors name the key and
 * the file it came from.  Internal to clformer. */
#ifndef CLF_CONFIG_H
#define CLF_CONFIG_H

#include "base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON;

/* The largest JSON configuration file read (config.json,
 * generation_config.json, preprocessor_config.json): far above any real
 * one, low enough that a wrong path cannot exhaust memory. */
#define CLF__JSON_CONFIG_MAX_BYTES ((size_t)64 << 20)

typedef struct clf__config clf__config;

/* Parses MODEL_DIR/config.json (required: CLF_E_NOT_FOUND when absent,
 * CLF_E_FORMAT when not a JSON object) and, if it exists,
 * MODEL_DIR/generation_config.json, whose keys override config.json's.
 * Errors are recorded on ctx (may be NULL). */
clf_status clf__config_load(clf_context *ctx, const char *model_dir, clf__config **out);
/* A config from JSON text (no generation_config.json); `label` stands for
 * the file name in messages. */
clf_status clf__config_parse(clf_context *ctx, const char *label, const char *json, clf__config **out);
/* NULL is accepted. */
void clf__config_free(clf__config *c);
/* 1 when `key` is present with a value other than JSON null, else 0. */
int clf__config_has(const clf__config *c, const char *key);

/* Required values: CLF_E_FORMAT naming the key and the file when the key is
 * missing, null or of the wrong type.  An int is a JSON number with an
 * integral value (1.0 is accepted, 1.5 is not) within the range of long; a
 * float is any finite number; a bool is true or false (not 0/1). */
clf_status clf__config_int(clf_context *ctx, const clf__config *c, const char *key, long *out);
clf_status clf__config_float(clf_context *ctx, const clf__config *c, const char *key, double *out);
clf_status clf__config_bool(clf_context *ctx, const clf__config *c, const char *key, int *out);
/* *out is borrowed from c. */
clf_status clf__config_str(clf_context *ctx, const clf__config *c, const char *key, const char **out);

/* Optional values: `dflt` when the key is absent or null; a wrong type
 * still fails as above. */
clf_status clf__config_int_or(clf_context *ctx, const clf__config *c, const char *key, long dflt, long *out);
clf_status clf__config_float_or(clf_context *ctx, const clf__config *c, const char *key, double dflt,
                                double *out);
clf_status clf__config_bool_or(clf_context *ctx, const clf__config *c, const char *key, int dflt, int *out);
clf_status clf__config_str_or(clf_context *ctx, const clf__config *c, const char *key, const char *dflt,
                              const char **out);

/* An int or a list of ints (eos_token_id can be either): *n is the count.
 * Absent or null gives *n = 0 (no error).  More than `cap` values is
 * CLF_E_FORMAT; with out NULL only *n is set (to size a buffer). */
clf_status clf__config_int_list(clf_context *ctx, const clf__config *c, const char *key, long *out, size_t cap,
                                size_t *n);
/* A list of lists of non-negative ints (bad_words_ids), flattened with a -1
 * after each inner list: [[1, 2], [3]] -> 1 2 -1 3 -1, *n = 5.  Absent or
 * null gives *n = 0; cap and out NULL as for clf__config_int_list. */
clf_status clf__config_int_lists(clf_context *ctx, const clf__config *c, const char *key, long *out, size_t cap,
                                 size_t *n);

/* The merged JSON object for anything else (id2label, ...); borrowed. */
const struct cJSON *clf__config_json(const clf__config *c);

#ifdef __cplusplus
}
#endif

#endif
