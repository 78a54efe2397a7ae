/* weights.c - a model directory's tensors (one safetensors file or the
 * shards of an index), looked up by name and uploaded as f32 device tensors,
 * with F16/BF16 converted on the host and shapes checked. */
#include "weights.h"

#include "base/file.h"
#include "io/gguf_model.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct w_name {
  const char *name; /* borrowed from the index JSON or the shard; GGUF: owned */
  size_t shard;     /* GGUF: the tensor's index in the file */
  int tr;           /* GGUF: the file holds the transpose (a Conv1D weight; CLF__GGUF_T) */
  int perm;         /* GGUF: its rows are permuted per head: 0 no, 1 by heads[0], 2 by heads[1] */
  int minus_one;    /* GGUF: the file holds 1 + the values (CLF__GGUF_MINUS_ONE) */
} w_name;

struct clf__weights {
  char *dir;
  char *source;           /* DIR/model.safetensors or DIR/model.safetensors.index.json */
  clf_safetensors **shards;
  char **shard_files;
  size_t n_shards;
  w_name *names; /* sorted by name */
  size_t n_names;
  cJSON *index; /* keeps the index's strings alive */
  clf_gguf *gguf; /* a GGUF file instead of safetensors */
  const clf__gguf_arch *arch; /* GGUF: the architecture's rows (the family's, static) */
  long heads[2];  /* GGUF: attention.head_count(_kv), where rows CLF__GGUF_PERMUTE_Q / _K permute */
  unsigned char *used; /* GGUF: a flag per tensor of the file, set when the model looks it up (clf__weights_info) */
};

static char *w_join(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s%s%s", dir, (dir[0] && dir[strlen(dir) - 1] == '/') ? "" : "/", name);
  return p;
}

/* Whether dir/name is there, even if it cannot be opened (a link loop is
 * then reported by the open, not as a missing file). */
static int w_exists(const char *dir, const char *name) {
  char *p = w_join(dir, name);
  int r = clf__path_present(p);
  free(p);
  return r;
}

void clf__weights_close(clf__weights *w) {
  if (!w) return;
  for (size_t i = 0; i < w->n_shards; i++) {
    clf_safetensors_close(w->shards[i]);
    free(w->shard_files[i]);
  }
  free(w->shards);
  free(w->shard_files);
  for (size_t i = 0; w->gguf && i < w->n_names; i++) free((char *)w->names[i].name);
  clf_gguf_close(w->gguf);
  free(w->used);
  free(w->names);
  cJSON_Delete(w->index);
  free(w->source);
  free(w->dir);
  free(w);
}

static int w_cmp(const void *a, const void *b) {
  return strcmp(((const w_name *)a)->name, ((const w_name *)b)->name);
}

static const w_name *w_find(const clf__weights *w, const char *name) {
  if (!w || !name) return NULL;
  w_name key = {name, 0};
  return bsearch(&key, w->names, w->n_names, sizeof(w_name), w_cmp);
}

static clf_dtype w_block_type(unsigned ggml);

/* Copies the thread's error (from clf_safetensors_open) to ctx. */
static clf_status w_forward(clf_context *ctx, clf_status st) {
  if (ctx) clf__fail(ctx, st, "%s", clf_last_error(NULL));
  return st;
}

/* Opens the shard `file` (a name inside dir) unless already open. */
static clf_status w_shard(clf_context *ctx, clf__weights *w, const char *file, size_t *idx) {
  for (size_t i = 0; i < w->n_shards; i++)
    if (strcmp(w->shard_files[i], file) == 0) {
      *idx = i;
      return CLF_OK;
    }
  if (!file[0] || strchr(file, '/') || strcmp(file, "..") == 0)
    return clf__fail(ctx, CLF_E_FORMAT, "weights: %s names shard \"%s\", which is not a file name in %s",
                     w->source, file, w->dir);
  char *path = w_join(w->dir, file);
  if (!path) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "weights: out of host memory");
  clf_safetensors *st = NULL;
  clf_status s = clf_safetensors_open(path, &st);
  if (s == CLF_E_NOT_FOUND)
    s = clf__fail(ctx, CLF_E_NOT_FOUND, "weights: shard %s listed in %s is missing", path, w->source);
  else if (s != CLF_OK)
    w_forward(ctx, s);
  free(path);
  if (s != CLF_OK) return s;
  w->shards[w->n_shards] = st;
  if (!(w->shard_files[w->n_shards] = strdup(file))) {
    clf_safetensors_close(st);
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "weights: out of host memory");
  }
  *idx = w->n_shards++;
  return CLF_OK;
}

static clf_status w_open_index(clf_context *ctx, clf__weights *w) {
  clf_status s;
  char *buf = NULL;
  size_t n = 0;
  /* an index lists names only: 64 MiB is far beyond any real one */
  if ((s = clf__read_file(ctx, "weights index", w->source, (size_t)64 << 20, &buf, &n)) != CLF_OK) return s;
  w->index = cJSON_ParseWithLengthOpts(buf, n + 1, NULL, 1);
  free(buf);
  const cJSON *map = w->index ? cJSON_GetObjectItemCaseSensitive(w->index, "weight_map") : NULL;
  if (!cJSON_IsObject(map))
    return clf__fail(ctx, CLF_E_FORMAT, "weights: %s is not a JSON object with a \"weight_map\" object",
                     w->source);
  size_t count = (size_t)cJSON_GetArraySize(map);
  w->names = calloc(count ? count : 1, sizeof(w_name));
  w->shards = calloc(count ? count : 1, sizeof(*w->shards));
  w->shard_files = calloc(count ? count : 1, sizeof(*w->shard_files));
  if (!w->names || !w->shards || !w->shard_files)
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "weights: out of host memory reading %s", w->source);
  const cJSON *e;
  cJSON_ArrayForEach(e, map) {
    if (!cJSON_IsString(e))
      return clf__fail(ctx, CLF_E_FORMAT, "weights: %s: weight_map entry \"%s\" is not a file name", w->source,
                       e->string);
    size_t idx;
    if ((s = w_shard(ctx, w, e->valuestring, &idx)) != CLF_OK) return s;
    clf_st_info info;
    if (clf_safetensors_find(w->shards[idx], e->string, &info) != CLF_OK)
      return clf__fail(ctx, CLF_E_FORMAT, "weights: %s places tensor \"%s\" in %s, which lacks it", w->source,
                       e->string, e->valuestring);
    w->names[w->n_names].name = e->string;
    w->names[w->n_names++].shard = idx;
  }
  return CLF_OK;
}

clf_status clf__weights_open(clf_context *ctx, const char *model_dir, clf__weights **out) {
  if (!out) return clf__fail(ctx, CLF_E_INVALID_ARG, "clf__weights_open: out is NULL");
  *out = NULL;
  if (!model_dir) return clf__fail(ctx, CLF_E_INVALID_ARG, "clf__weights_open: model_dir is NULL");
  clf__weights *w = calloc(1, sizeof(*w));
  if (!w || !(w->dir = strdup(model_dir))) {
    free(w);
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "weights: out of host memory");
  }
  clf_status s;
  /* Like transformers: the single file first, then the index. */
  if (w_exists(model_dir, "model.safetensors")) {
    w->source = w_join(model_dir, "model.safetensors");
    w->shards = calloc(1, sizeof(*w->shards));
    w->shard_files = calloc(1, sizeof(*w->shard_files));
    if (!w->source || !w->shards || !w->shard_files) {
      s = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "weights: out of host memory");
    } else {
      size_t idx;
      s = w_shard(ctx, w, "model.safetensors", &idx);
      size_t n = s == CLF_OK ? clf_safetensors_count(w->shards[0]) : 0;
      if (s == CLF_OK && !(w->names = calloc(n ? n : 1, sizeof(w_name))))
        s = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "weights: out of host memory");
      for (size_t i = 0; s == CLF_OK && i < n; i++) {
        clf_st_info info;
        clf_safetensors_info(w->shards[0], i, &info);
        w->names[w->n_names].name = info.name;
        w->names[w->n_names++].shard = 0;
      }
    }
  } else if (w_exists(model_dir, "model.safetensors.index.json")) {
    w->source = w_join(model_dir, "model.safetensors.index.json");
    s = w->source ? w_open_index(ctx, w) : clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "weights: out of host memory");
  } else {
    static const char *const others[] = {"pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5",
                                         "flax_model.msgpack", NULL};
    const char *other = NULL;
    for (int i = 0; others[i] && !other; i++)
      if (w_exists(model_dir, others[i])) other = others[i];
    if (other)
      s = clf__fail(ctx, CLF_E_NOT_FOUND,
                    "weights: %s has %s but no model.safetensors: clformer reads safetensors only (convert "
                    "the checkpoint, e.g. save_pretrained(dir, safe_serialization=True))",
                    model_dir, other);
    else
      s = clf__fail(ctx, CLF_E_NOT_FOUND,
                    "weights: no model.safetensors or model.safetensors.index.json in %s (safetensors is "
                    "required)",
                    model_dir);
  }
  if (s != CLF_OK) {
    clf__weights_close(w);
    return s;
  }
  qsort(w->names, w->n_names, sizeof(w_name), w_cmp);
  *out = w;
  return CLF_OK;
}

/* A GGUF tensor a model of `arch` reads: one with a Hugging Face name
 * (clf__gguf_hf_name) in blocks 0..blocks-1; a copy the converter writes
 * (a CLF__GGUF_COPY row) is skipped on purpose (*skip).  Otherwise
 * CLF_E_FORMAT naming the tensor. */
static clf_status w_gguf_known(clf_context *ctx, const clf__weights *w, const char *arch, int64_t blocks,
                               const char *name, const char *hf, unsigned flags, int *skip) {
  *skip = hf && (flags & CLF__GGUF_COPY);
  if (*skip) return CLF_OK;
  if (!hf)
    return clf__fail(ctx, CLF_E_FORMAT, "weights: %s: tensor \"%s\" is not used by %s (no %s model has it)", w->source,
                     name, arch, arch);
  const size_t digits = strncmp(name, "blk.", 4) == 0 ? strspn(name + 4, "0123456789") : 0;
  if (digits && strtoull(name + 4, NULL, 10) >= (unsigned long long)blocks)
    return clf__fail(ctx, CLF_E_FORMAT, "weights: %s: tensor \"%s\" is not used by %s with %lld block%s (%s.block_count)",
                     w->source, name, arch, (long long)blocks, blocks == 1 ? "" : "s", arch);
  return CLF_OK;
}

/* The head counts by which rows CLF__GGUF_PERMUTE_Q / _K are permuted. */
static clf_status w_gguf_heads(clf_context *ctx, clf__weights *w, const char *arch) {
  char key[128];
  int64_t h = 0, kv = 0;
  snprintf(key, sizeof key, "%s.attention.head_count", arch);
  if (clf__gguf_meta_int(ctx, w->gguf, w->source, key, 0, &h) < 0) return CLF_E_FORMAT;
  snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
  if (clf__gguf_meta_int(ctx, w->gguf, w->source, key, h, &kv) < 0) return CLF_E_FORMAT;
  if (h <= 0 || kv <= 0 || h > 65536 || kv > 65536)
    return clf__fail(ctx, CLF_E_FORMAT, "weights: %s: head counts %lld / %lld are not in 1..65536", w->source,
                     (long long)h, (long long)kv);
  w->heads[0] = (long)h, w->heads[1] = (long)kv;
  return CLF_OK;
}

/* GGUF: every tensor under its Hugging Face name by the architecture's
 * rows, each one a tensor the architecture reads (w_gguf_known), and the
 * head counts that undo a row permutation where a row says so. */
static clf_status w_gguf_names(clf_context *ctx, clf__weights *w, const clf__gguf_arch *a) {
  const char *arch = a->arch;
  const size_t n = clf_gguf_tensor_count(w->gguf);
  if (!(w->names = calloc(n ? n : 1, sizeof(w_name))) || !(w->used = calloc(n ? n : 1, 1)))
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "weights: out of host memory");
  char key[128];
  int64_t blocks = 0;
  int permuted = 0;
  snprintf(key, sizeof key, "%s.block_count", arch);
  if (clf__gguf_meta_int(ctx, w->gguf, w->source, key, 0, &blocks) < 0) return CLF_E_FORMAT;
  for (size_t i = 0; i < n; i++) {
    clf_gguf_tensor t;
    char hf[256];
    int skip = 0;
    unsigned flags = 0;
    clf_status st;
    if (clf_gguf_tensor_at(w->gguf, i, &t) != CLF_OK) continue;
    const int named = clf__gguf_hf_name(a, t.name, hf, sizeof hf, &flags);
    if ((st = w_gguf_known(ctx, w, arch, blocks, t.name, named ? hf : NULL, flags, &skip)) != CLF_OK) return st;
    if (skip) {
      w->used[i] = 1;
      continue;
    }
    if (w_find(w, hf))
      return clf__fail(ctx, CLF_E_FORMAT, "weights: %s: two tensors map to %s", w->source, hf);
    if (!(w->names[w->n_names].name = strdup(hf)))
      return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "weights: out of host memory");
    w->names[w->n_names].tr = (flags & CLF__GGUF_T) != 0;
    w->names[w->n_names].minus_one = (flags & CLF__GGUF_MINUS_ONE) != 0;
    w->names[w->n_names].perm = flags & CLF__GGUF_PERMUTE_Q ? 1 : flags & CLF__GGUF_PERMUTE_K ? 2 : 0;
    permuted |= w->names[w->n_names].perm != 0;
    w->names[w->n_names++].shard = i;
    qsort(w->names, w->n_names, sizeof(w_name), w_cmp); /* kept sorted for the duplicate check */
  }
  return permuted ? w_gguf_heads(ctx, w, arch) : CLF_OK;
}

clf_status clf__weights_from_gguf(clf_context *ctx, clf_gguf *g, const char *file, const clf__gguf_arch *arch,
                                  clf__weights **out) {
  *out = NULL;
  clf__weights *w = calloc(1, sizeof(*w));
  if (!w || !(w->dir = strdup(file)) || !(w->source = strdup(file))) {
    if (w) free(w->dir);
    free(w);
    clf_gguf_close(g);
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "weights: out of host memory");
  }
  w->gguf = g;
  w->arch = arch;
  clf_status s = w_gguf_names(ctx, w, arch);
  if (s != CLF_OK) {
    clf__weights_close(w);
    return s;
  }
  *out = w;
  return CLF_OK;
}

int clf__weights_has(const clf__weights *w, const char *name) { return w_find(w, name) != NULL; }

const char *clf__weights_pick(const clf__weights *w, const char *const *names) {
  for (size_t i = 0; names && names[i]; i++)
    if (w_find(w, names[i])) return names[i];
  return NULL;
}

/* Entry e's description; GGUF: dtype is the ggml type's name, data NULL. */
static clf_status w_info(const clf__weights *w, const w_name *e, clf_st_info *out) {
  if (!w->gguf) return clf_safetensors_find(w->shards[e->shard], e->name, out);
  clf_gguf_tensor t;
  if (clf_gguf_tensor_at(w->gguf, e->shard, &t) != CLF_OK) return CLF_E_NOT_FOUND;
  *out = (clf_st_info){.name = e->name, .dtype = t.type_name, .ndim = t.ndim, .bytes = (size_t)t.bytes};
  for (int d = 0; d < t.ndim; d++) out->shape[d] = (size_t)t.shape[e->tr && t.ndim == 2 ? 1 - d : d];
  return CLF_OK;
}

clf_status clf__weights_info(clf_context *ctx, const clf__weights *w, const char *name, clf_st_info *out) {
  if (!w) return clf__fail(ctx, CLF_E_INVALID_ARG, "weights: weights is NULL");
  if (!name) return clf__fail(ctx, CLF_E_INVALID_ARG, "weights: name is NULL");
  if (!out) return clf__fail(ctx, CLF_E_INVALID_ARG, "weights: out is NULL (tensor \"%s\")", name);
  const w_name *e = w_find(w, name);
  char gname[256];
  if (!e && w->gguf && clf__gguf_file_name(w->arch, name, gname, sizeof gname))
    return clf__fail(ctx, CLF_E_NOT_FOUND, "tensor \"%s\" (\"%s\" in transformers) not found in %s", gname, name,
                     w->source);
  if (!e) return clf__fail(ctx, CLF_E_NOT_FOUND, "tensor \"%s\" not found in %s", name, w->source);
  if (w_info(w, e, out) != CLF_OK) return w_forward(ctx, CLF_E_NOT_FOUND);
  if (w->used) w->used[e->shard] = 1;
  return CLF_OK;
}

clf_status clf__weights_all_used(clf_context *ctx, const clf__weights *w, const char *arch) {
  const size_t n = w && w->gguf ? clf_gguf_tensor_count(w->gguf) : 0;
  for (size_t i = 0; i < n; i++) {
    clf_gguf_tensor t;
    if (w->used[i] || clf_gguf_tensor_at(w->gguf, i, &t) != CLF_OK) continue;
    return clf__fail(ctx, CLF_E_FORMAT, "weights: %s: tensor \"%s\" is not used by %s as its metadata configures it",
                     w->source, t.name, arch);
  }
  return CLF_OK;
}

clf_status clf__weights_shape(clf_context *ctx, const clf__weights *w, const char *name, int *ndim,
                              size_t shape[8]) {
  clf_st_info info;
  clf_status s = clf__weights_info(ctx, w, name, &info);
  if (s != CLF_OK) return s;
  if (!ndim || !shape) return clf__fail(ctx, CLF_E_INVALID_ARG, "weights: ndim or shape is NULL (\"%s\")", name);
  *ndim = info.ndim;
  for (int i = 0; i < 8; i++) shape[i] = i < info.ndim ? info.shape[i] : 0;
  return CLF_OK;
}

static const char *w_shape_str(int ndim, const size_t *shape, int wild, char *buf, size_t len) {
  size_t n = (size_t)snprintf(buf, len, "[");
  for (int i = 0; i < ndim && n < len; i++) {
    if (wild && (!shape || shape[i] == 0)) n += (size_t)snprintf(buf + n, len - n, "%s*", i ? ", " : "");
    else n += (size_t)snprintf(buf + n, len - n, "%s%zu", i ? ", " : "", shape[i]);
  }
  if (n < len) snprintf(buf + n, len - n, "]");
  return buf;
}

/* A safetensors tensor as f32 (*out malloc'd). */
static clf_status w_read_st(clf_context *ctx, const clf__weights *w, const char *name, const clf_st_info *info_,
                            float **out) {
  const clf_st_info info = *info_;
  clf_status s;
  int f32 = strcmp(info.dtype, "F32") == 0, f16 = strcmp(info.dtype, "F16") == 0,
      bf16 = strcmp(info.dtype, "BF16") == 0;
  if (!f32 && !f16 && !bf16)
    return clf__fail(ctx, CLF_E_DTYPE, "tensor \"%s\" in %s is %s; weights must be F32, F16 or BF16", name,
                     w->source, info.dtype);
  size_t numel = f32 ? info.bytes / 4 : info.bytes / 2;
  float *conv = malloc(numel ? numel * sizeof(float) : 1);
  if (!conv) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "weights: out of host memory reading \"%s\"", name);
  /* Read with pread, not through the mapping: a file truncated since it was
   * opened is then CLF_E_IO, not SIGBUS.  F16/BF16 (n elements) land in the
   * upper half of conv and widen front to back, in place: conv[i] (bytes
   * 4i..4i+3) is written after element i (bytes 2n+2i..) is read and ends
   * before element i+1 (byte 2n+2i+2, as i < n). */
  unsigned char *raw = (unsigned char *)conv + (f32 ? 0 : numel * sizeof(uint16_t));
  if ((s = clf_safetensors_read(w->shards[w_find(w, name)->shard], &info, raw)) != CLF_OK) {
    free(conv);
    return w_forward(ctx, s);
  }
  if (!f32)
    for (size_t i = 0; i < numel; i++) {
      const uint16_t v = (uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8);
      conv[i] = f16 ? clf__f16_bits_to_f32(v) : clf__bf16_to_f32(v);
    }
  *out = conv;
  return CLF_OK;
}

/* Permuted q/k rows (of row_bytes bytes each) back in Hugging Face order:
 * convert_hf_to_gguf stores row h*hd + 2i + j of each head from row
 * h*hd + j*hd/2 + i. */
static clf_status w_unpermute_rows(clf_context *ctx, const char *name, unsigned char *x, size_t rows,
                                   size_t row_bytes, long heads) {
  if (rows % (size_t)heads || (rows / (size_t)heads) % 2)
    return clf__fail(ctx, CLF_E_SHAPE, "tensor \"%s\": %zu rows are not %ld heads of an even size", name, rows,
                     heads);
  const size_t hd = rows / (size_t)heads, half = hd / 2;
  unsigned char *tmp = malloc(hd * row_bytes + 1);
  if (!tmp) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "weights: out of host memory reading \"%s\"", name);
  for (size_t h = 0; h < (size_t)heads; h++) {
    unsigned char *head = x + h * hd * row_bytes;
    memcpy(tmp, head, hd * row_bytes);
    for (size_t i = 0; i < half; i++)
      for (size_t j = 0; j < 2; j++) memcpy(head + (j * half + i) * row_bytes, tmp + (2 * i + j) * row_bytes, row_bytes);
  }
  free(tmp);
  return CLF_OK;
}

/* The row permutation's head count of entry e (0: none). */
static long w_permuted(const clf__weights *w, const w_name *e) { return e->perm ? w->heads[e->perm - 1] : 0; }

/* A GGUF tensor decoded to f32 (clf_gguf_dequantize), q/k unpermuted. */
static clf_status w_read_gguf(clf_context *ctx, const clf__weights *w, const w_name *e, const clf_st_info *info,
                              float **out) {
  clf_gguf_tensor t;
  clf_gguf_tensor_at(w->gguf, e->shard, &t);
  size_t numel = 1;
  for (int d = 0; d < info->ndim; d++) numel *= info->shape[d];
  void *raw = malloc(t.bytes ? (size_t)t.bytes : 1);
  float *conv = malloc(numel ? numel * sizeof(float) : 1);
  clf_status s = CLF_OK;
  if (!raw || !conv) s = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "weights: out of host memory reading \"%s\"", e->name);
  else if ((s = clf_gguf_read(w->gguf, e->shard, raw, (size_t)t.bytes)) != CLF_OK) w_forward(ctx, s);
  else if ((t.ggml_type >= 24 && t.ggml_type <= 27) /* I8..I64 */ ||
           (s = clf_gguf_dequantize(t.ggml_type, raw, numel, conv)) != CLF_OK)
    s = clf__fail(ctx, CLF_E_DTYPE, "tensor \"%s\" (%s) in %s is %s, which is not read as weights", e->name, t.name,
                  w->source, t.type_name);
  if (s == CLF_OK && e->minus_one)
    for (size_t i = 0; i < numel; i++) conv[i] -= 1.0f;
  const long heads = s == CLF_OK ? w_permuted(w, e) : 0;
  if (heads)
    s = w_unpermute_rows(ctx, e->name, (unsigned char *)conv, info->shape[0],
                         (info->ndim == 2 ? info->shape[1] : 1) * sizeof(float), heads);
  if (s == CLF_OK && e->tr && info->ndim == 2) { /* the file's [out, in] as transformers' [in, out] */
    float *t2 = malloc(numel * sizeof(float) + 1);
    if (!t2) {
      s = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "weights: out of host memory reading \"%s\"", e->name);
    } else {
      const size_t in = info->shape[0], out = info->shape[1];
      for (size_t o = 0; o < out; o++)
        for (size_t i = 0; i < in; i++) t2[i * out + o] = conv[o * in + i];
      free(conv);
      conv = t2;
    }
  }
  free(raw);
  if (s != CLF_OK) free(conv);
  else *out = conv;
  return s;
}

clf_status clf__weights_read(clf_context *ctx, const clf__weights *w, const char *name, int ndim,
                             const size_t *shape, float **out, size_t got[8]) {
  if (!out) return clf__fail(ctx, CLF_E_INVALID_ARG, "weights: out is NULL (tensor \"%s\")", name ? name : "?");
  *out = NULL;
  if (ndim < 1 || ndim > CLF_MAX_DIMS)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "weights: tensor \"%s\": ndim %d must be 1..%d", name ? name : "?",
                     ndim, CLF_MAX_DIMS);
  clf_st_info info;
  clf_status s = clf__weights_info(ctx, w, name, &info);
  if (s != CLF_OK) return s;
  int ok = info.ndim == ndim;
  for (int i = 0; ok && i < ndim; i++) ok = !shape || shape[i] == 0 || shape[i] == info.shape[i];
  if (!ok) {
    char a[160], b[160];
    return clf__fail(ctx, CLF_E_SHAPE, "tensor \"%s\" has shape %s, expected %s", name,
                     w_shape_str(info.ndim, info.shape, 0, a, sizeof(a)), w_shape_str(ndim, shape, 1, b, sizeof(b)));
  }
  float *conv = NULL;
  s = w->gguf ? w_read_gguf(ctx, w, w_find(w, name), &info, &conv) : w_read_st(ctx, w, name, &info, &conv);
  if (s != CLF_OK) return s;
  for (int i = 0; i < 8; i++) got[i] = i < ndim ? info.shape[i] : 0;
  *out = conv;
  return CLF_OK;
}


/* The clformer type a ggml type's blocks are kept in: the type of that
 * ggml number (CLF_DTYPE_MAP) where clf_linear reads it; CLF_F32: none. */
static clf_dtype w_block_type(unsigned ggml) {
  const clf__dtype_row *r = clf__dtype_of_ggml(ggml);
  return r && r->wtype >= 0 ? r->dt : CLF_F32;
}

clf_status clf__weights_blocks(clf_context *ctx, const clf__weights *w, const char *name, size_t rows, size_t in,
                               int in_out, clf_dtype *dt, unsigned char **raw, size_t *bytes) {
  *dt = CLF_F32, *raw = NULL, *bytes = 0;
  clf_st_info info;
  clf_status s = clf__weights_info(ctx, w, name, &info);
  if (s != CLF_OK || !w->gguf) return s;
  const size_t want0 = in_out ? in : rows, want1 = in_out ? rows : in;
  if (info.ndim != 2 || info.shape[0] != want0 || info.shape[1] != want1) {
    float *h = NULL; /* the shape error, as a read gives it */
    size_t got[8];
    s = clf__weights_read(ctx, w, name, 2, (size_t[]){want0, want1}, &h, got);
    free(h);
    return s;
  }
  const w_name *e = w_find(w, name);
  clf_gguf_tensor t;
  clf_gguf_tensor_at(w->gguf, e->shard, &t);
  /* the file's bytes are [rows, in] where it transposes what in_out names */
  const clf_dtype bt = e->tr != in_out ? CLF_F32 : w_block_type(t.ggml_type);
  if (bt == CLF_F32) return CLF_OK;
  unsigned char *b = malloc(t.bytes ? (size_t)t.bytes : 1);
  if (!b) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "weights: out of host memory reading \"%s\"", name);
  if ((s = clf_gguf_read(w->gguf, e->shard, b, (size_t)t.bytes)) != CLF_OK) {
    free(b);
    return w_forward(ctx, s);
  }
  const long heads = w_permuted(w, e); /* whole rows of blocks move: the byte rows, as the f32 ones */
  if (heads && (s = w_unpermute_rows(ctx, name, b, rows, (size_t)t.bytes / rows, heads)) != CLF_OK) {
    free(b);
    return s;
  }
  *dt = bt, *raw = b, *bytes = (size_t)t.bytes;
  return CLF_OK;
}

clf_status clf__weights_load(clf_context *ctx, const clf__weights *w, const char *name, int ndim,
                             const size_t *shape, clf_tensor **out) {
  if (!out) return clf__fail(ctx, CLF_E_INVALID_ARG, "weights: out is NULL (tensor \"%s\")", name ? name : "?");
  *out = NULL;
  if (!ctx) return clf__fail(NULL, CLF_E_INVALID_ARG, "weights: context is NULL (tensor \"%s\")", name ? name : "?");
  float *host = NULL;
  size_t got[8];
  clf_st_info info; /* refused before it is read when it cannot fit one buffer as f32 */
  clf_status s = clf__weights_info(ctx, w, name, &info);
  if (s == CLF_OK) {
    size_t numel = 1;
    for (int d = 0; d < info.ndim; d++) numel *= info.shape[d];
    s = clf__weight_fits_alloc(ctx, name, numel * sizeof(float));
  }
  if (s == CLF_OK) s = clf__weights_read(ctx, w, name, ndim, shape, &host, got);
  if (s != CLF_OK) return s;
  s = clf_tensor_from_f32(ctx, CLF_F32, ndim, got, host, out);
  free(host);
  if (s != CLF_OK) {
    char msg[sizeof(ctx->err.msg)];
    const cl_int cl = clf_last_cl_error(ctx); /* clf__fail clears it: keep the OpenCL code */
    snprintf(msg, sizeof(msg), "%s", clf_last_error(ctx));
    clf__fail(ctx, s, "weights: loading tensor \"%s\": %s", name, msg);
    clf__err(ctx)->cl = cl;
    return s;
  }
  return CLF_OK;
}

clf_dtype clf__weight_type_for(clf_dtype wt, size_t in) {
  if ((wt == CLF_Q4_K || wt == CLF_Q6_K) && in % 256 != 0)
    return in % 32 != 0 ? CLF_F16 : wt == CLF_Q4_K ? CLF_Q5_0 : CLF_Q8_0;
  return wt;
}

/* The fewest device bytes entry e takes with linear weights in wt: 2-D
 * tensors wt can hold at wt's size (CLF_STORED: the file's blocks where a
 * kernel reads them), the rest f32. */
static size_t w_least(const clf__weights *w, const w_name *e, const clf_st_info *info, clf_dtype wt, int block_rule) {
  size_t numel = 1;
  for (int d = 0; d < info->ndim; d++) numel *= info->shape[d];
  if (info->ndim != 2) return numel * sizeof(float);
  if (wt == CLF_STORED) {
    clf_gguf_tensor t;
    if (w->gguf && clf_gguf_tensor_at(w->gguf, e->shard, &t) == CLF_OK &&
        w_block_type(t.ggml_type) != CLF_F32)
      return (size_t)t.bytes;
    return numel * sizeof(float);
  }
  const clf_dtype as = clf__weight_type_for(wt, info->shape[1]);
  const int stored = block_rule ? !clf__dtype_is_block(as) || info->shape[1] % CLF__QBLOCK == 0
                                : info->shape[1] % 32 == 0;
  return stored ? clf__dtype_bytes(as, numel) : numel * sizeof(float);
}

size_t clf__weights_bytes_as(const clf__weights *w, clf_dtype wt) {
  size_t total = 0;
  for (size_t i = 0; w && i < w->n_names; i++) {
    clf_st_info info;
    if (w_info(w, &w->names[i], &info) == CLF_OK) total += w_least(w, &w->names[i], &info, wt, 0);
  }
  return total;
}

clf_status clf__weight_fits_alloc(clf_context *ctx, const char *name, size_t bytes) {
  if ((cl_ulong)bytes <= ctx->caps.max_alloc) return CLF_OK;
  char a[32], b[96];
  return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "weight %s (%s) is larger than the device's largest allocation (%s)",
                   name, clf__bytes_str(bytes, a, sizeof a), clf__alloc_limit_str(ctx, b, sizeof b));
}

clf_status clf__weights_fit_alloc(clf_context *ctx, const clf__weights *w, clf_dtype wt) {
  size_t worst = 0;
  const char *name = NULL;
  for (size_t i = 0; i < w->n_names; i++) {
    clf_st_info info;
    if (w_info(w, &w->names[i], &info) != CLF_OK) continue;
    const size_t least = w_least(w, &w->names[i], &info, wt, 1);
    if (least > worst) worst = least, name = w->names[i].name;
  }
  return name ? clf__weight_fits_alloc(ctx, name, worst) : CLF_OK;
}
