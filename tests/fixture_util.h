/* fixture_util.h - helpers the model suites share: the golden fixtures
 * under CLF_FIXTURES (cases.json, .npy files), temp copies of a fixture with
 * a tensor dropped or reshaped or a config key changed, the paper-config
 * Marian regenerated from tools/fixtures/paper_weights.h, and a per-program
 * cache of loaded models. */
#ifndef CLF_TEST_FIXTURE_UTIL_H
#define CLF_TEST_FIXTURE_UTIL_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "clformer.h"

/* A safetensors file of F32/other tensors, written in the order given. */
typedef struct st_entry {
  const char *name, *dtype;
  int ndim;
  size_t shape[8];
  const void *data;
  size_t bytes;
} st_entry;

/* The model in `dir`, loaded on th_ctx once per program (kept until
 * free_models: under Oclgrind, destroying a model that has run and then
 * loading another makes Oclgrind flag the new weights as uninitialised). */
clf_model *get_model(const char *dir);
void free_models(void);
/* A file's contents, NUL-terminated (malloc'd), or NULL; *len its bytes
 * (len may be NULL). */
char *read_file_len(const char *path, size_t *len);
char *read_text(const char *path);
void write_bytes(const char *path, const void *data, size_t n);
/* $CLF_FIXTURES. */
const char *fixtures(void);
/* DIR/cases.json parsed (free with cJSON_Delete). */
cJSON *load_cases(const char *dir);
void write_safetensors(const char *path, const st_entry *e, size_t n);
/* A temp copy of fixture `name` with tensor `drop` left out and tensor
 * `reshape` given new_shape (either may be NULL); free with remove_dir. */
char *copy_fixture(const char *name, const char *drop, const char *reshape, int ndim, const size_t *new_shape);
/* A temp copy of fixture `name` with tensor `extra` added; free with remove_dir. */
char *copy_fixture_adding(const char *name, const st_entry *extra);
void remove_dir(char *dir);
/* Sets config.json's `key` to the JSON text `json` in `dir`. */
void set_config(const char *dir, const char *key, const char *json);
/* The marian_paper fixture with its weights regenerated into a temp dir. */
char *make_paper_dir(void);

/* Every forward case of case_dir/cases.json run on m: f32 outputs within
 * max |got - expected| <= tol x max(1, max|expected|) (rows whose
 * attention_mask is 0 skipped when the case says compare_mask), i64 outputs
 * and "mask" exactly.  `what` names the run in failure messages. */
void check_forward_cases(clf_model *m, const char *case_dir, double tol, const char *what);
/* Every forward case of case_dir run on both a and b: their f32 outputs
 * within tol x max(1, max|b's|). */
void check_forward_same(clf_model *a, clf_model *b, const char *case_dir, double tol, const char *what);
/* Every generate case: the sequences equal the expected ones exactly. */
void check_generate_cases(clf_model *m, const char *case_dir, const char *what);
/* That a fixture exercises a setting: with config.json's `key` set to the
 * JSON `json` (and key2 to json2 where not NULL) in a copy, forward case
 * `cname`'s logits are off by more than 1e-2 of their scale. */
void check_differs(const char *name, const char *cname, const char *key, const char *json, const char *key2,
                   const char *json2);
/* That a setting changes nothing: with config.json's `key` set to `json`
 * in a copy, every forward case of fixture `name` still within 1e-4. */
void check_same_with(const char *name, const char *key, const char *json);
/* That a copy of fixture `name` with config.json's `key` set to `json`
 * (and key2 to json2 where not NULL) fails to load with `want`, the
 * message holding `msg`, and leaves no model. */
void load_fails2(const char *name, const char *key, const char *json, const char *key2, const char *json2,
                 clf_status want, const char *msg);
void load_fails(const char *name, const char *key, const char *json, clf_status want, const char *msg);

#endif
