/* model.h - what the model families share: the clf_model object with its
 * per-family hooks, and the helpers that turn host arrays into device inputs.
 */
#ifndef CLF_MODEL_H
#define CLF_MODEL_H

#include "io/config.h"
#include "rows.h"

#define CLF__MAX_IO 8

/* The workspace slots of the model runtime (after the blocks'); a family's
 * own start at CLF__WS_FAMILY. */
enum {
  CLF__WS_H = CLF__WS_BLOCK_SLOTS, /* the residual stream */
  CLF__WS_A,                       /* its normed copy (pre-LN) */
  CLF__WS_ENC,                     /* encoder states, or a stage's merged input */
  CLF__WS_ROW, CLF__WS_LOGITS,     /* the rows a head reads, its output */
  CLF__WS_IDS, CLF__WS_IDS2, CLF__WS_MASK, CLF__WS_POS,
  CLF__WS_IMAGE,                   /* pixel_values on the device */
  CLF__WS_FAMILY
};
_Static_assert(CLF__WS_FAMILY + 8 <= CLF__WS_COUNT, "room for a family's own workspace slots");

/* The inputs of one run, indexed like the model's input names (NULL: absent). */
typedef const clf_array *clf__inputs[CLF__MAX_IO];

/* The generation settings of a checkpoint, from config.json and
 * generation_config.json with transformers' defaults (model.c reads them,
 * generate.c uses them). */
typedef struct clf__gen_settings {
  long bos, eos[8], pad, dec_start, forced_eos, forced_bos, max_length, num_beams, min_length;
  size_t n_eos;
  int has_pad, has_dec_start, has_forced_eos, has_forced_bos;
  long bad_words[256];
  size_t n_bad_words;
  double length_penalty;
  int early_stopping; /* 1 true, 0 false, -1 "never" */
  /* sampling and penalties (GenerationConfig's defaults: false, 1.0, 50,
   * 1.0, None (-1), 1.0, 0) */
  int do_sample;
  double temperature, top_p, min_p, repetition_penalty;
  long top_k, no_repeat_ngram_size;
  const char *unsupported; /* a generation setting generate() does not implement, or NULL */
} clf__gen_settings;

struct clf_model {
  clf_context *ctx;
  const char *type; /* config.json's model_type */
  const char *const *in_names;
  size_t n_in;
  const char *const *out_names;
  size_t n_out;
  clf__params params;
  clf__ws ws, ws2; /* encoder / decoder workspaces */
  void *impl;
  /* One forward pass: results[i] gets output i when want[i]. */
  clf_status (*run)(clf_model *m, const clf__inputs in, const int *want, clf_array *results);
  void (*destroy)(clf_model *m);
  struct clf__decoder *dec; /* the generation runtime (decoder.h), inside impl; NULL: cannot generate */
  struct clf__alloc *allocs; /* host memory freed with the model (clf__model_calloc) */
  size_t vocab, in_vocab; /* the logits' vocabulary; the rows of input_ids' table */
  size_t max_positions; /* the position table's rows: the longest sequence generate() may make */
  int is_encdec;
  clf__gen_settings gen; /* filled by the loader from config.json / generation_config.json */
  char **labels;            /* config.json's id2label: labels[i] (NULL: no label i), n_labels of them */
  size_t n_labels;
  int pooling; /* clf_model_embed's pooling: CLF__POOL_*, numbered as a GGUF file's {arch}.pooling_type */
};

/* How clf_model_embed makes one vector of a text's hidden states: the
 * values of a GGUF file's {arch}.pooling_type (the file states it; a
 * Hugging Face directory is mean-pooled, as clformer always did). */
#define CLF__POOLING_MAP(X) X(NONE, "none") X(MEAN, "mean") X(CLS, "cls") X(LAST, "last") X(RANK, "rank")
#define CLF__POOL_ENUM(id, name) CLF__POOL_##id,
enum { CLF__POOLING_MAP(CLF__POOL_ENUM) CLF__POOL_COUNT };
#undef CLF__POOL_ENUM

/* CLF_E_INVALID_ARG naming the first id of a (checked by clf__check_ids;
 * NULL: none) outside [0, rows): a gather would read past its table
 * (transformers raises an IndexError). */
/* pixel_values [B, C, H, W] (4 dims, checked by the caller): at least one
 * image, and H x W within CLF_LIMIT_IMAGE_PIXELS, so the patch grid and
 * the position tables sized from it cannot wrap. */
clf_status clf__check_image_budget(clf_model *m, const char *op, const clf_array *a);
clf_status clf__check_id_range(clf_model *m, const char *op, const clf_array *a, const char *what, size_t rows);
/* Uploads a host array of ids/mask (i32 or i64, [B, L]) into workspace slot
 * `slot` as is.  A NULL array gives a tensor of `fill`. */
clf_status clf__upload_ids(clf_model *m, clf__ws *ws, int slot, const clf_array *a, size_t B, size_t L,
                           long fill, clf_tensor **out);
/* position_ids [B, L] into workspace slot CLF__WS_POS: `given` as is, or
 * (NULL) 0..L-1 in every row, transformers' default. */
clf_status clf__upload_positions(clf_model *m, clf__ws *ws, const clf_array *given, size_t B, size_t L,
                                 clf_tensor **out);
/* n x size zeroed bytes of host memory freed with m (NULL, with the error
 * recorded, when out of memory). */
void *clf__model_calloc(clf_model *m, size_t n, size_t size);
/* Element i of an ids-like array (i32 or i64, checked by clf__check_ids). */
int64_t clf__id_at(const clf_array *a, size_t i);
/* Downloads t into a fresh result array named `name` (data malloc'd). */
clf_status clf__download(clf_model *m, const clf_tensor *t, const char *name, clf_array *out);
/* Checks an ids-like input: i32/i64, 2-D; *B and *L set (or checked when
 * non-zero).  `what` names the input in errors. */
clf_status clf__check_ids(clf_model *m, const clf_array *a, const char *what, size_t *B, size_t *L);

/* `fmt` with the model's tensor prefix (as "model." or "") printed into buf. */
const char *clf__wn(char *buf, size_t len, const char *prefix, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#endif
