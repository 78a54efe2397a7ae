/* model.c - clf_model: loading a Hugging Face directory, choosing the family
 * from config.json, and running a forward pass on host arrays by name.
 */
#include "decoder.h"
#include "family.h"

#include "base/checked.h"
#include "base/limits.h"
#include "io/gguf_model.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct clf__alloc {
  struct clf__alloc *next;
  max_align_t data[];
};

void *clf__model_calloc(clf_model *m, size_t n, size_t size) {
  size_t bytes;
  struct clf__alloc *a = NULL;
  if (clf__mul_ok(n, size, &bytes) && bytes < SIZE_MAX - sizeof *a) a = calloc(1, sizeof *a + bytes);
  if (!a) {
    clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_load: out of host memory");
    return NULL;
  }
  a->next = m->allocs;
  m->allocs = a;
  return a->data;
}

int64_t clf__id_at(const clf_array *a, size_t i) {
  return a->dtype == CLF_I64 ? ((const int64_t *)a->data)[i] : ((const int32_t *)a->data)[i];
}

const char *clf__wn(char *buf, size_t len, const char *prefix, const char *fmt, ...) {
  size_t n = (size_t)snprintf(buf, len, "%s", prefix);
  va_list ap;
  va_start(ap, fmt);
  if (n < len) vsnprintf(buf + n, len - n, fmt, ap);
  va_end(ap);
  return buf;
}

/* do_sample, temperature, top_k, top_p, min_p, repetition_penalty and
 * no_repeat_ngram_size with GenerationConfig's defaults (null: the
 * default; min_p -1: None).  Their ranges are checked by generate(), where
 * they are used. */
static clf_status load_sampling_settings(clf_model *m, const clf__config *c) {
  clf_context *ctx = m->ctx;
  clf_status st;
  const cJSON *ds = cJSON_GetObjectItemCaseSensitive(clf__config_json(c), "do_sample");
  if (ds && !cJSON_IsBool(ds) && !cJSON_IsNull(ds))
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: the config's do_sample is not true or false");
  m->gen.do_sample = cJSON_IsTrue(ds);
  static const struct { const char *key; double def; size_t off; } num[] = {
      {"temperature", 1.0, offsetof(clf__gen_settings, temperature)}, {"top_p", 1.0, offsetof(clf__gen_settings, top_p)},
      {"min_p", -1.0, offsetof(clf__gen_settings, min_p)},
      {"repetition_penalty", 1.0, offsetof(clf__gen_settings, repetition_penalty)}};
  for (size_t i = 0; i < CLF__ARRAY_LEN(num); i++) {
    double *d = (double *)((char *)&m->gen + num[i].off);
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(clf__config_json(c), num[i].key);
    if (cJSON_IsNull(x)) *d = num[i].def;
    else if ((st = clf__config_float_or(ctx, c, num[i].key, num[i].def, d)) != CLF_OK) return st;
  }
  const cJSON *k = cJSON_GetObjectItemCaseSensitive(clf__config_json(c), "top_k");
  if (cJSON_IsNull(k)) m->gen.top_k = 0;
  else if ((st = clf__config_int_or(ctx, c, "top_k", 50, &m->gen.top_k)) != CLF_OK) return st;
  const cJSON *ng = cJSON_GetObjectItemCaseSensitive(clf__config_json(c), "no_repeat_ngram_size");
  if (cJSON_IsNull(ng)) m->gen.no_repeat_ngram_size = 0;
  else if ((st = clf__config_int_or(ctx, c, "no_repeat_ngram_size", 0, &m->gen.no_repeat_ngram_size)) != CLF_OK)
    return st;
  return CLF_OK;
}

/* The generation settings of the checkpoint, with transformers' defaults. */
static clf_status load_gen_settings(clf_model *m, const clf__config *c) {
  clf_context *ctx = m->ctx;
  clf_status st;
  long v;
  if ((st = clf__config_int_list(ctx, c, "eos_token_id", m->gen.eos, 8, &m->gen.n_eos)) != CLF_OK) {
    if (clf__config_has(c, "eos_token_id")) return st;
    m->gen.n_eos = 0;
    clf_clear_error(ctx);
  }
  m->gen.has_pad = clf__config_has(c, "pad_token_id");
  if ((st = clf__config_int_or(ctx, c, "pad_token_id", -1, &m->gen.pad)) != CLF_OK) return st;
  if (m->gen.pad < 0) m->gen.has_pad = 0;
  if ((st = clf__config_int_or(ctx, c, "bos_token_id", -1, &m->gen.bos)) != CLF_OK) return st;
  if ((st = clf__config_int_or(ctx, c, "decoder_start_token_id", -1, &m->gen.dec_start)) != CLF_OK) return st;
  m->gen.has_dec_start = m->gen.dec_start >= 0;
  if ((st = clf__config_int_or(ctx, c, "forced_eos_token_id", -1, &m->gen.forced_eos)) != CLF_OK) return st;
  m->gen.has_forced_eos = m->gen.forced_eos >= 0;
  if ((st = clf__config_int_or(ctx, c, "forced_bos_token_id", -1, &m->gen.forced_bos)) != CLF_OK) return st;
  m->gen.has_forced_bos = m->gen.forced_bos >= 0;
  if ((st = clf__config_int_or(ctx, c, "max_length", 20, &m->gen.max_length)) != CLF_OK) return st;
  if ((st = clf__config_int_or(ctx, c, "min_length", 0, &m->gen.min_length)) != CLF_OK) return st;
  if ((st = clf__config_int_or(ctx, c, "num_beams", 1, &m->gen.num_beams)) != CLF_OK) return st;
  if ((st = clf__config_float_or(ctx, c, "length_penalty", 1.0, &m->gen.length_penalty)) != CLF_OK) return st;
  m->gen.n_bad_words = 0;
  if (clf__config_has(c, "bad_words_ids") &&
      (st = clf__config_int_lists(ctx, c, "bad_words_ids", m->gen.bad_words, 256, &m->gen.n_bad_words)) != CLF_OK)
    return st;
  m->gen.early_stopping = 0;
  const cJSON *es = cJSON_GetObjectItemCaseSensitive(clf__config_json(c), "early_stopping");
  if (cJSON_IsBool(es)) m->gen.early_stopping = cJSON_IsTrue(es);
  else if (cJSON_IsString(es) && strcmp(es->valuestring, "never") == 0) m->gen.early_stopping = -1;
  if ((st = load_sampling_settings(m, c)) != CLF_OK) return st;
  /* Settings that change the results and are not implemented: generate() refuses them. */
  static const struct { const char *key; double neutral; } unsup[] = {
      {"encoder_no_repeat_ngram_size", 0}, {"encoder_repetition_penalty", 1}, {"num_beam_groups", 1},
      {"diversity_penalty", 0}, {"penalty_alpha", 0}, {"min_new_tokens", 0}, {"exponential_decay_length_penalty", 0},
      {"typical_p", 1}, {"epsilon_cutoff", 0}, {"eta_cutoff", 0}};
  const cJSON *j = clf__config_json(c);
  m->gen.unsupported = NULL;
  for (size_t i = 0; i < CLF__ARRAY_LEN(unsup) && !m->gen.unsupported; i++) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, unsup[i].key);
    if ((cJSON_IsNumber(x) && x->valuedouble != unsup[i].neutral) || cJSON_IsTrue(x) ||
        (cJSON_IsArray(x) && cJSON_GetArraySize(x) > 0))
      m->gen.unsupported = unsup[i].key;
  }
  (void)v;
  return CLF_OK;
}

/* config.json's id2label ({"0": "cat", ...}) into m->labels: n_labels is one
 * past the largest index given; indices not given stay NULL.  Entries that
 * are not "<index>": "<label>" are ignored (they never stopped a load). */
static int label_index(const cJSON *it, size_t *i) {
  char *end;
  unsigned long v = strtoul(it->string, &end, 10);
  *i = (size_t)v;
  return cJSON_IsString(it) && end != it->string && !*end && v < (1ul << 24);
}

static clf_status load_labels(clf_model *m, const clf__config *c) {
  const cJSON *map = cJSON_GetObjectItemCaseSensitive(clf__config_json(c), "id2label");
  const cJSON *it;
  size_t n = 0, i;
  if (!cJSON_IsObject(map)) return CLF_OK;
  cJSON_ArrayForEach(it, map) if (label_index(it, &i) && i + 1 > n) n = i + 1;
  if (!n) return CLF_OK;
  if (!(m->labels = calloc(n, sizeof *m->labels)))
    return clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_load: out of host memory");
  m->n_labels = n;
  cJSON_ArrayForEach(it, map) {
    if (!label_index(it, &i)) continue;
    free(m->labels[i]);
    if (!(m->labels[i] = strdup(it->valuestring)))
      return clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_load: out of host memory");
  }
  return CLF_OK;
}

void clf_model_options_init(clf_model_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->weights = CLF_STORED;
}

/* The weight types of fewer bits a weight than wt's (f32's for
 * CLF_STORED), in CLF_DTYPE_MAP's order: "f16, q8, q4, q4k, q6k". */
static void smaller_types(clf_dtype wt, char *buf, size_t len) {
  const clf__dtype_row *r = clf__dtype(wt);
  const double bits = r && r->block ? 8.0 * r->bytes / r->block : 32.0;
  size_t n = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < clf_dtype_count(); i++) {
    clf_dtype_desc d;
    if (clf_dtype_at(i, &d) != CLF_OK || !d.weights_target || !d.block || 8.0 * d.block_bytes / d.block >= bits)
      continue;
    snprintf(buf + n, len - n, "%s%s", n ? ", " : "", d.weight_name);
    n += strlen(buf + n);
  }
}

/* The weights in type wt must fit in the device's global memory (a lower
 * bound of them: clf__weights_bytes_as), checked before any upload. */
static clf_status check_fits(clf_context *ctx, const clf__weights *w, clf_dtype wt, const char *model_dir) {
  const size_t need = clf__weights_bytes_as(w, wt);
  const cl_ulong have = ctx->caps.global_mem;
  if ((cl_ulong)need <= have) return CLF_OK;
  char smaller[128];
  smaller_types(wt, smaller, sizeof smaller);
  return clf__fail(ctx, CLF_E_OUT_OF_MEMORY,
                   "clf_model_load: the weights of %s need at least %zu MiB as %s, more than the device's %llu MiB "
                   "of global memory%s%s%s",
                   model_dir, need >> 20, clf__weight_type_name(wt), (unsigned long long)(have >> 20),
                   *smaller ? " (try smaller weights: " : "", smaller, *smaller ? ")" : "");
}

/* The model's config and weights: a Hugging Face directory's config.json
 * and safetensors, or a GGUF file's metadata and tensors. */
typedef struct model_source {
  char *gguf_file; /* NULL: a Hugging Face directory */
  clf_gguf *gguf;  /* open until the weights take it */
} model_source;

static clf_status source_config(clf_context *ctx, const char *model_dir, model_source *src, clf__config **c) {
  clf_status st = clf__gguf_model_file(ctx, model_dir, &src->gguf_file);
  if (st != CLF_OK) return st;
  if (!src->gguf_file) return clf__config_load(ctx, model_dir, c);
  if ((st = clf_gguf_open(src->gguf_file, &src->gguf)) != CLF_OK)
    return clf__fail(ctx, st, "%s", clf_last_error(NULL));
  const clf__gguf_arch *archs[CLF__FAMILY_MAX];
  const size_t n = clf__family_gguf(archs, CLF__FAMILY_MAX);
  return clf__gguf_config(ctx, src->gguf, src->gguf_file, archs, n, c);
}

/* A GGUF file's tensors by the rows of family f (whose arch made the config). */
static clf_status source_weights(clf_context *ctx, const char *model_dir, model_source *src, const clf__family *f,
                                 clf__weights **w) {
  if (!src->gguf_file) return clf__weights_open(ctx, model_dir, w);
  if (!f->gguf)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_model_load: %s: the %s family reads no GGUF file", src->gguf_file,
                     f->type);
  clf_gguf *g = src->gguf;
  src->gguf = NULL;
  return clf__weights_from_gguf(ctx, g, src->gguf_file, f->gguf, w);
}

clf_status clf_model_load(clf_context *ctx, const char *model_dir, clf_model **out) {
  return clf_model_load_with(ctx, model_dir, NULL, out);
}

/* A decoder's one-row products' programs, one per type of its weights in
 * the 16-row interleave, made as it loads rather than at its second
 * generated token (every step after the prompt takes one row). */
static void prepare_decode(clf_model *m) {
  unsigned seen = 0;
  for (size_t i = 0; i < m->params.n; i++) {
    const clf_tensor *t = m->params.t[i];
    if (!t || !t->r16 || (unsigned)t->dtype >= 32 || (seen >> (unsigned)t->dtype & 1u)) continue;
    seen |= 1u << (unsigned)t->dtype;
    clf__r16_prepare(m->ctx, t->dtype, 1);
  }
}

/* (long: one sequence of checked steps, each jumping to the shared cleanup) */
clf_status clf_model_load_with(clf_context *ctx, const char *model_dir, const clf_model_options *opts,
                               clf_model **out) {
  static const char op[] = "clf_model_load";
  clf_status st;
  if (!out) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: out is NULL", op);
  *out = NULL;
  if ((st = clf__check_ctx(ctx, op)) != CLF_OK) return st;
  if (!model_dir) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: model_dir is NULL", op);
  clf_dtype wt = opts ? opts->weights : CLF_STORED;
  const clf__dtype_row *wr = clf__dtype(wt);
  if (!wr || !(wr->flags & CLF_DTYPE_WEIGHTS)) {
    char names[256];
    clf__weight_type_names(names, sizeof names);
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: weight type %d is not one of %s", op, (int)wt, names);
  }
  clf__config *c = NULL;
  clf__weights *w = NULL;
  clf_model *m = NULL;
  void *dims = NULL;
  model_source src = {0};
  if ((st = source_config(ctx, model_dir, &src, &c)) != CLF_OK) goto done;
  const char *type = NULL;
  if ((st = clf__config_str(ctx, c, "model_type", &type)) != CLF_OK) goto done;
  const clf__family *f = clf__family_find(type);
  if (!f) {
    char names[CLF__FAMILY_NAMES_LEN];
    st = clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: model_type \"%s\" in %s/config.json is not supported (supported: %s)",
                   op, type, model_dir, clf__family_names(names, sizeof names));
    goto done;
  }
  const cJSON *archs = cJSON_GetObjectItemCaseSensitive(clf__config_json(c), "architectures");
  if (cJSON_IsArray(archs)) {
    const cJSON *a;
    cJSON_ArrayForEach(a, archs) {
      int ok = 0;
      for (int j = 0; cJSON_IsString(a) && f->archs[j]; j++)
        ok |= strcmp(a->valuestring, f->archs[j]) == 0;
      if (!ok) {
        st = clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: architecture \"%s\" in %s/config.json is not supported for %s",
                       op, cJSON_IsString(a) ? a->valuestring : "(not a string)", model_dir, type);
        goto done;
      }
    }
  }
  if ((st = source_weights(ctx, model_dir, &src, f, &w)) != CLF_OK) goto done;
  if (wt == CLF_STORED && !src.gguf_file) wt = CLF_F32; /* a Hugging Face checkpoint's stored type: f32 */
  if ((st = check_fits(ctx, w, wt, model_dir)) != CLF_OK || (st = clf__weights_fit_alloc(ctx, w, wt)) != CLF_OK)
    goto done;
  m = calloc(1, sizeof *m);
  if (!m) {
    st = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
    goto done;
  }
  m->ctx = ctx;
  m->type = f->type;
  m->pooling = CLF__POOL_MEAN; /* what clf_model_embed always did; a family that reads a pooling sets its own */
  m->params.wtype = wt;
  m->params.simulate = opts && opts->simulate;
  if (opts && opts->progress) {
    m->params.progress = opts->progress;
    m->params.progress_user = opts->progress_user;
    m->params.total = clf__weights_bytes_as(w, CLF_F32);
  }
  if ((st = load_gen_settings(m, c)) != CLF_OK || (st = load_labels(m, c)) != CLF_OK) goto done;
  if (!(dims = calloc(1, f->dims_size))) {
    st = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
    goto done;
  }
  if ((st = clf__config_read(ctx, c, f->keys, f->n_keys, dims)) != CLF_OK) goto done;
  if ((st = f->load(m, dims, c, w)) != CLF_OK) goto done;
  if (src.gguf_file && (st = clf__weights_all_used(ctx, w, type)) != CLF_OK) goto done;
  if (m->dec) prepare_decode(m);
  *out = m;
  m = NULL;
done:
  free(dims);
  clf_model_destroy(m);
  clf__weights_close(w);
  clf__config_free(c);
  clf_gguf_close(src.gguf);
  free(src.gguf_file);
  return st;
}

void clf_model_destroy(clf_model *m) {
  if (!m) return;
  clf__decoder_free(m);
  if (m->destroy) m->destroy(m);
  for (struct clf__alloc *a = m->allocs, *next; a; a = next) {
    next = a->next;
    free(a);
  }
  clf__ws_free(&m->ws);
  clf__ws_free(&m->ws2);
  clf__params_free(&m->params);
  for (size_t i = 0; i < m->n_labels; i++) free(m->labels[i]);
  free(m->labels);
  free(m);
}

size_t clf_model_weight_bytes(const clf_model *m) {
  size_t n = 0;
  for (size_t i = 0; m && i < m->params.n; i++) n += clf_tensor_bytes(m->params.t[i]);
  return n;
}

clf_dtype clf_model_weight_type(const clf_model *m) { return m ? m->params.wtype : CLF_F32; }

size_t clf_model_max_positions(const clf_model *m) { return m ? m->max_positions : 0; }

size_t clf_model_num_labels(const clf_model *m) { return m ? m->n_labels : 0; }

const char *clf_model_label(const clf_model *m, size_t i) { return m && i < m->n_labels ? m->labels[i] : NULL; }

const char *clf_model_type(const clf_model *m) { return m ? m->type : NULL; }

#define POOL_NAME(id, name) name,
static const char *const pool_names[CLF__POOL_COUNT] = {CLF__POOLING_MAP(POOL_NAME)};
#undef POOL_NAME
const char *clf_model_pooling(const clf_model *m) { return m ? pool_names[m->pooling] : NULL; }

size_t clf_model_input_names(const clf_model *m, const char *const **names) {
  if (!m) return 0;
  if (names) *names = m->in_names;
  return m->n_in;
}

size_t clf_model_output_names(const clf_model *m, const char *const **names) {
  if (!m) return 0;
  if (names) *names = m->out_names;
  return m->n_out;
}

static void list_names(char *buf, size_t len, const char *const *names, size_t n) {
  size_t at = 0;
  buf[0] = 0;
  for (size_t i = 0; i < n && at < len; i++) at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "", names[i]);
}

/* 1 when a's dims are 0 to CLF_MAX_DIMS and its bytes, all dims and the
 * dtype multiplied, fit size_t (checked before any dim is multiplied,
 * even when one of them is 0). */
static int input_size_ok(const clf_array *a) {
  if (a->ndim < 0 || a->ndim > CLF_MAX_DIMS) return 0;
  size_t n = clf_dtype_size(a->dtype);
  for (int d = 0; d < a->ndim; d++)
    if (!clf__mul_ok(n, a->shape[d] ? a->shape[d] : 1, &n)) return 0;
  return 1;
}

clf_status clf_model_run(clf_model *m, const clf_array *inputs, size_t n_inputs, const char *const *outputs,
                         size_t n_outputs, clf_array *results) {
  static const char op[] = "clf_model_run";
  if (!m) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: model is NULL", op);
  clf_context *ctx = m->ctx;
  char valid[512];
  if ((n_inputs && !inputs) || (n_outputs && (!outputs || !results)))
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: inputs, outputs or results is NULL", op);
  for (size_t i = 0; i < n_outputs; i++) memset(&results[i], 0, sizeof results[i]);
  clf__inputs in = {0};
  for (size_t i = 0; i < n_inputs; i++) {
    size_t j = 0;
    while (j < m->n_in && strcmp(inputs[i].name, m->in_names[j]) != 0) j++;
    if (j == m->n_in) {
      list_names(valid, sizeof valid, m->in_names, m->n_in);
      return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: %s takes no input \"%s\" (inputs: %s)", op, m->type,
                       inputs[i].name, valid);
    }
    if (in[j]) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: input \"%s\" given twice", op, inputs[i].name);
    if (!input_size_ok(&inputs[i]))
      return clf__fail(ctx, CLF_E_SHAPE, "%s: input \"%s\" has %d dims whose size overflows (or more than %d)", op,
                       inputs[i].name, inputs[i].ndim, CLF_MAX_DIMS);
    if (!inputs[i].data && clf_array_numel(&inputs[i]))
      return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: input \"%s\" has no data", op, inputs[i].name);
    in[j] = &inputs[i];
  }
  int want[CLF__MAX_IO] = {0};
  size_t slot[CLF__MAX_IO * 4];
  if (n_outputs > CLF__ARRAY_LEN(slot))
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: %zu outputs asked, at most %zu", op, n_outputs,
                     CLF__ARRAY_LEN(slot));
  for (size_t i = 0; i < n_outputs; i++) {
    size_t j = 0;
    while (outputs[i] && j < m->n_out && strcmp(outputs[i], m->out_names[j]) != 0) j++;
    if (j == m->n_out) {
      list_names(valid, sizeof valid, m->out_names, m->n_out);
      return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: %s produces no output \"%s\" (outputs: %s)", op, m->type,
                       outputs[i] ? outputs[i] : "(null)", valid);
    }
    want[j] = 1;
    slot[i] = j;
  }
  clf_array res[CLF__MAX_IO];
  memset(res, 0, sizeof res);
  clf_status st = m->run(m, in, want, res);
  if (st == CLF_OK) {
    /* Each output's data moves to the first result that asked for it (no
     * copy of a large output such as a decoder's logits); the same output
     * asked again gets its own copy of that. */
    size_t first[CLF__MAX_IO];
    for (size_t j = 0; j < CLF__MAX_IO; j++) first[j] = SIZE_MAX;
    for (size_t i = 0; i < n_outputs; i++) {
      const size_t j = slot[i];
      clf_array *r = &res[j];
      results[i] = *r;
      if (first[j] == SIZE_MAX) {
        first[j] = i;
        r->data = NULL;
        continue;
      }
      const clf_array *src = &results[first[j]];
      if (src->data) {
        size_t bytes = clf_array_numel(src) * clf_dtype_size(src->dtype);
        void *d = malloc(bytes ? bytes : 1);
        if (!d) {
          results[i].data = NULL;
          st = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
          break;
        }
        memcpy(d, src->data, bytes);
        results[i].data = d;
      }
    }
  }
  for (size_t j = 0; j < CLF__MAX_IO; j++) clf_array_free(&res[j]);
  if (st != CLF_OK)
    for (size_t i = 0; i < n_outputs; i++) clf_array_free(&results[i]);
  return st;
}

clf_status clf__check_ids(clf_model *m, const clf_array *a, const char *what, size_t *B, size_t *L) {
  static const char op[] = "clf_model_run";
  if (a->dtype != CLF_I32 && a->dtype != CLF_I64)
    return clf__fail(m->ctx, CLF_E_DTYPE, "%s: input \"%s\" is %s, expected i32 or i64", op, what,
                     clf_dtype_name(a->dtype));
  if (a->ndim != 2 || (*B && a->shape[0] != *B) || (*L && a->shape[1] != *L)) {
    if (a->ndim != 2)
      return clf__fail(m->ctx, CLF_E_SHAPE, "%s: input \"%s\" has %d dims, expected 2 [batch, length]", op, what,
                       a->ndim);
    return clf__fail(m->ctx, CLF_E_SHAPE, "%s: input \"%s\" has shape [%zu, %zu], expected [%zu, %zu]", op, what,
                     a->shape[0], a->shape[1], *B ? *B : a->shape[0], *L ? *L : a->shape[1]);
  }
  *B = a->shape[0];
  *L = a->shape[1];
  return CLF_OK;
}

clf_status clf__check_id_range(clf_model *m, const char *op, const clf_array *a, const char *what, size_t rows) {
  if (!a) return CLF_OK;
  const size_t L = a->shape[1], n = a->shape[0] * L; /* checked by clf__check_ids */
  for (size_t i = 0; i < n; i++) {
    const int64_t v = clf__id_at(a, i);
    if (v < 0 || (uint64_t)v >= rows)
      return clf__fail(m->ctx, CLF_E_INVALID_ARG, "%s: %s[%zu][%zu] is %lld, outside the table of %zu rows (0 to "
                       "%zu)", op, what, i / L, i % L, (long long)v, rows, rows - 1);
  }
  return CLF_OK;
}

clf_status clf__check_image_budget(clf_model *m, const char *op, const clf_array *a) {
  const size_t B = a->shape[0], H = a->shape[2], W = a->shape[3];
  size_t px;
  if (!B) return clf__fail(m->ctx, CLF_E_SHAPE, "%s: input \"pixel_values\" holds no images (batch 0)", op);
  if (!clf__mul_ok(H, W, &px) || px > CLF_LIMIT_IMAGE_PIXELS)
    return clf__fail(m->ctx, CLF_E_SHAPE, "%s: input \"pixel_values\" image of %zux%zu is larger than the limit of "
                     "%zu pixels", op, H, W, CLF_LIMIT_IMAGE_PIXELS);
  return CLF_OK;
}

clf_status clf__upload_ids(clf_model *m, clf__ws *ws, int slot, const clf_array *a, size_t B, size_t L, long fill,
                           clf_tensor **out) {
  clf_status st;
  clf_dtype dt = a ? a->dtype : CLF_I32;
  if ((st = clf__ws_get(m->ctx, ws, slot, dt, 2, (size_t[]){B, L}, out)) != CLF_OK) return st;
  if (a) return clf_tensor_upload(m->ctx, *out, a->data, B * L * clf_dtype_size(dt));
  /* written from the host (not clEnqueueFillBuffer, which Oclgrind's
   * uninitialised-memory tracking does not see) */
  int32_t *v = malloc(B * L * sizeof *v + 1);
  if (!v) return clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_run: out of host memory");
  for (size_t i = 0; i < B * L; i++) v[i] = (int32_t)fill;
  st = clf_tensor_upload(m->ctx, *out, v, B * L * sizeof *v);
  free(v);
  return st;
}

clf_status clf__upload_positions(clf_model *m, clf__ws *ws, const clf_array *given, size_t B, size_t L,
                                 clf_tensor **out) {
  if (given) return clf__upload_ids(m, ws, CLF__WS_POS, given, B, L, 0, out);
  clf_array a = {"position_ids", CLF_I64, 2, {B, L}, malloc(B * L * sizeof(int64_t) + 1)};
  if (!a.data) return clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_run: out of host memory");
  for (size_t i = 0; i < B * L; i++) ((int64_t *)a.data)[i] = (int64_t)(i % L);
  clf_status st = clf__upload_ids(m, ws, CLF__WS_POS, &a, B, L, 0, out);
  free(a.data);
  return st;
}

clf_status clf__download(clf_model *m, const clf_tensor *t, const char *name, clf_array *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s", name);
  out->dtype = t->dtype;
  out->ndim = t->ndim;
  memcpy(out->shape, t->shape, sizeof out->shape);
  size_t bytes = clf_tensor_bytes(t);
  out->data = malloc(bytes ? bytes : 1);
  if (!out->data) return clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_run: out of host memory for %s", name);
  clf_status st = clf_tensor_download(m->ctx, t, out->data, bytes);
  if (st != CLF_OK) clf_array_free(out);
  return st;
}
