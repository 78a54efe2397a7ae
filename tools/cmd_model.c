/* cmd_model.c - `clformer run`, `generate` and `embed`: Hugging Face model
 * directories on a device, with NumPy .npy files or text in and out. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "clformer.h"

#define MAX_IO 16

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* "NAME=FILE" -> name (into buf) and file. */
static int split_pair(const char *arg, char *name, size_t len, const char **file) {
  const char *eq = strchr(arg, '=');
  if (!eq || eq == arg || !eq[1] || (size_t)(eq - arg) >= len) return 0;
  memcpy(name, arg, (size_t)(eq - arg));
  name[eq - arg] = '\0';
  *file = eq + 1;
  return 1;
}

clf_context *clf_cli_open_context(const char *device) {
  clf_context_options o;
  clf_context_options_init(&o);
  o.device = device;
  clf_context *ctx = NULL;
  if (clf_context_create(&o, &ctx) != CLF_OK) {
    fprintf(stderr, "clformer: %s\n", clf_last_error(NULL));
    return NULL;
  }
  return ctx;
}

static const char run_usage[] =
    "usage: clformer run MODEL_DIR --in NAME=FILE.npy ... --out NAME=FILE.npy ...\n"
    "                    [--device S] [--repeat N]\n"
    "Runs one forward pass of the Hugging Face model in MODEL_DIR (config.json +\n"
    "model.safetensors).  Inputs and outputs are named as the model's forward()\n"
    "arguments and output fields (input_ids, attention_mask, token_type_ids,\n"
    "decoder_input_ids, pixel_values, ...; last_hidden_state, pooler_output,\n"
    "logits, ...).  Files are .npy: int64/int32 ids, float32 data, C order.\n"
    "--repeat N runs N more passes and prints on stderr\n"
    "  forward_ms median=X min=Y max=Z\n"
    "over those N (load and kernel builds excluded).\n";

int clf_cli_run(int argc, char **argv) {
  const char *dir = NULL, *device = NULL, *in_files[MAX_IO], *out_files[MAX_IO];
  char in_names[MAX_IO][64], out_names[MAX_IO][64];
  const char *outs[MAX_IO];
  size_t n_in = 0, n_out = 0;
  long repeat = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(run_usage, stdout); return 0; }
    if ((!strcmp(a, "--in") || !strcmp(a, "--out")) && i + 1 < argc) {
      int is_in = a[2] == 'i';
      size_t *n = is_in ? &n_in : &n_out;
      if (*n >= MAX_IO) { fprintf(stderr, "clformer run: at most %d %s\n", MAX_IO, a); return 2; }
      char(*names)[64] = is_in ? in_names : out_names;
      const char **files = is_in ? in_files : out_files;
      if (!split_pair(argv[++i], names[*n], 64, &files[*n])) {
        fprintf(stderr, "clformer run: %s takes NAME=FILE.npy, got \"%s\"\n", a, argv[i]);
        return 2;
      }
      (*n)++;
    } else if (!strcmp(a, "--device") && i + 1 < argc) {
      device = argv[++i];
    } else if (!strcmp(a, "--repeat") && i + 1 < argc) {
      char *end;
      repeat = strtol(argv[++i], &end, 10);
      if (*end || repeat < 0 || repeat > 100000) { fprintf(stderr, "clformer run: bad --repeat\n"); return 2; }
    } else if (a[0] != '-' && !dir) {
      dir = a;
    } else {
      fprintf(stderr, "clformer run: unexpected argument %s\n%s", a, run_usage);
      return 2;
    }
  }
  if (!dir || n_in == 0 || n_out == 0) { fputs(run_usage, stderr); return 2; }

  int rc = 1;
  clf_array inputs[MAX_IO], results[MAX_IO];
  memset(inputs, 0, sizeof(inputs));
  memset(results, 0, sizeof(results));
  clf_model *m = NULL;
  clf_context *ctx = NULL;
  for (size_t i = 0; i < n_in; i++) {
    if (clf_npy_read(in_files[i], &inputs[i]) != CLF_OK) {
      fprintf(stderr, "clformer run: %s\n", clf_last_error(NULL));
      goto out;
    }
    snprintf(inputs[i].name, sizeof(inputs[i].name), "%s", in_names[i]);
  }
  for (size_t i = 0; i < n_out; i++) outs[i] = out_names[i];
  if (!(ctx = clf_cli_open_context(device))) goto out;
  if (clf_model_load(ctx, dir, &m) != CLF_OK) {
    fprintf(stderr, "clformer run: %s\n", clf_last_error(ctx));
    goto out;
  }
  if (clf_model_run(m, inputs, n_in, outs, n_out, results) != CLF_OK) {
    fprintf(stderr, "clformer run: %s\n", clf_last_error(ctx));
    goto out;
  }
  for (size_t i = 0; i < n_out; i++) {
    if (clf_npy_write(out_files[i], &results[i]) != CLF_OK) {
      fprintf(stderr, "clformer run: %s\n", clf_last_error(NULL));
      goto out;
    }
  }
  if (repeat > 0) {
    double *t = malloc(sizeof(double) * (size_t)repeat);
    if (!t) goto out;
    for (long r = 0; r < repeat; r++) {
      clf_array again[MAX_IO];
      memset(again, 0, sizeof(again));
      double t0 = now_ms();
      clf_status st = clf_model_run(m, inputs, n_in, outs, n_out, again);
      t[r] = now_ms() - t0; /* clf_model_run returns with the queue finished */
      for (size_t i = 0; i < n_out; i++) clf_array_free(&again[i]);
      if (st != CLF_OK) {
        fprintf(stderr, "clformer run: %s\n", clf_last_error(ctx));
        free(t);
        goto out;
      }
    }
    qsort(t, (size_t)repeat, sizeof(double), cmp_double);
    fprintf(stderr, "forward_ms median=%.3f min=%.3f max=%.3f\n", t[repeat / 2], t[0], t[repeat - 1]);
    free(t);
  }
  rc = 0;
out:
  for (size_t i = 0; i < MAX_IO; i++) {
    clf_array_free(&inputs[i]);
    clf_array_free(&results[i]);
  }
  clf_model_destroy(m);
  clf_context_destroy(ctx);
  return rc;
}

/* ---- generate ---- */

static const char gen_usage[] =
    "usage: clformer generate MODEL_DIR (--in input_ids=FILE.npy [--in attention_mask=FILE.npy]\n"
    "                         | --prompt TEXT) [--max-new-tokens N] [--num-beams K]\n"
    "                         [--out sequences=FILE.npy] [--device S]\n"
    "Deterministic decoding as transformers' generate(do_sample=False) for GPT-2\n"
    "(a continuation of the prompt) and Marian (a translation of the source):\n"
    "greedy, or beam search with --num-beams K > 1.  The checkpoint's generation\n"
    "settings apply (decoder_start_token_id, eos_token_id, bad_words_ids,\n"
    "forced_eos_token_id, max_length).  With --prompt the text is tokenized with\n"
    "the model directory's tokenizer and the result is printed as text.\n";

/* Ids of `text` as a [1, n] i64 array. */
static int encode_prompt(clf_tokenizer *tok, const char *text, int add_special, clf_array *ids) {
  int64_t *v = NULL;
  size_t n = 0;
  if (clf_tokenizer_encode(tok, text, add_special, &v, &n) != CLF_OK) {
    fprintf(stderr, "clformer: %s\n", clf_last_error(NULL));
    return 0;
  }
  memset(ids, 0, sizeof(*ids));
  snprintf(ids->name, sizeof(ids->name), "input_ids");
  ids->dtype = CLF_I64;
  ids->ndim = 2;
  ids->shape[0] = 1;
  ids->shape[1] = n;
  ids->data = v;
  return 1;
}

int clf_cli_generate(int argc, char **argv) {
  const char *dir = NULL, *device = NULL, *prompt = NULL, *ids_file = NULL, *mask_file = NULL, *out_file = NULL;
  clf_generate_options go;
  clf_generate_options_init(&go);
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    char name[64];
    const char *file;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(gen_usage, stdout); return 0; }
    if (!strcmp(a, "--in") && i + 1 < argc && split_pair(argv[i + 1], name, sizeof(name), &file)) {
      i++;
      if (!strcmp(name, "input_ids")) ids_file = file;
      else if (!strcmp(name, "attention_mask")) mask_file = file;
      else { fprintf(stderr, "clformer generate: inputs are input_ids and attention_mask, not %s\n", name); return 2; }
    } else if (!strcmp(a, "--out") && i + 1 < argc && split_pair(argv[i + 1], name, sizeof(name), &file)) {
      i++;
      if (strcmp(name, "sequences")) { fprintf(stderr, "clformer generate: the output is sequences, not %s\n", name); return 2; }
      out_file = file;
    } else if ((!strcmp(a, "--max-new-tokens") || !strcmp(a, "--num-beams")) && i + 1 < argc) {
      char *end;
      long v = strtol(argv[++i], &end, 10);
      if (*end || v < 1 || v > 100000) { fprintf(stderr, "clformer generate: bad %s %s\n", a, argv[i]); return 2; }
      if (a[2] == 'm') go.max_new_tokens = (size_t)v;
      else go.num_beams = (size_t)v;
    } else if (!strcmp(a, "--prompt") && i + 1 < argc) {
      prompt = argv[++i];
    } else if (!strcmp(a, "--device") && i + 1 < argc) {
      device = argv[++i];
    } else if (a[0] != '-' && !dir) {
      dir = a;
    } else {
      fprintf(stderr, "clformer generate: unexpected argument %s\n%s", a, gen_usage);
      return 2;
    }
  }
  if (!dir || (!prompt && !ids_file) || (prompt && ids_file)) { fputs(gen_usage, stderr); return 2; }

  int rc = 1;
  clf_array ids, mask, seq;
  memset(&ids, 0, sizeof(ids));
  memset(&mask, 0, sizeof(mask));
  memset(&seq, 0, sizeof(seq));
  clf_tokenizer *tok = NULL;
  clf_context *ctx = NULL;
  clf_model *m = NULL;
  if (!(ctx = clf_cli_open_context(device))) goto out;
  if (clf_model_load(ctx, dir, &m) != CLF_OK) {
    fprintf(stderr, "clformer generate: %s\n", clf_last_error(ctx));
    goto out;
  }
  if (prompt) {
    if (clf_tokenizer_load(dir, &tok) != CLF_OK) {
      fprintf(stderr, "clformer generate: %s\n", clf_last_error(NULL));
      goto out;
    }
    /* Marian's source ends with </s>; GPT-2 prompts carry no special tokens. */
    if (!encode_prompt(tok, prompt, strcmp(clf_model_type(m), "gpt2") != 0, &ids)) goto out;
  } else {
    if (clf_npy_read(ids_file, &ids) != CLF_OK || (mask_file && clf_npy_read(mask_file, &mask) != CLF_OK)) {
      fprintf(stderr, "clformer generate: %s\n", clf_last_error(NULL));
      goto out;
    }
  }
  if (clf_model_generate(m, &ids, mask.data ? &mask : NULL, &go, &seq) != CLF_OK) {
    fprintf(stderr, "clformer generate: %s\n", clf_last_error(ctx));
    goto out;
  }
  if (out_file && clf_npy_write(out_file, &seq) != CLF_OK) {
    fprintf(stderr, "clformer generate: %s\n", clf_last_error(NULL));
    goto out;
  }
  if (tok) {
    const int64_t *s = seq.data;
    size_t T = seq.shape[1];
    /* GPT-2 returns the prompt too; print only what was generated. */
    size_t skip = strcmp(clf_model_type(m), "gpt2") == 0 ? ids.shape[1] : 0;
    char *text = NULL;
    if (clf_tokenizer_decode(tok, s + skip, T - skip, 1, &text) != CLF_OK) {
      fprintf(stderr, "clformer generate: %s\n", clf_last_error(NULL));
      goto out;
    }
    printf("%s%s\n", skip ? prompt : "", text);
    free(text);
  } else if (!out_file) {
    const int64_t *s = seq.data;
    for (size_t b = 0; b < seq.shape[0]; b++) {
      for (size_t t = 0; t < seq.shape[1]; t++) printf("%s%lld", t ? " " : "", (long long)s[b * seq.shape[1] + t]);
      printf("\n");
    }
  }
  rc = 0;
out:
  clf_array_free(&ids);
  clf_array_free(&mask);
  clf_array_free(&seq);
  clf_tokenizer_destroy(tok);
  clf_model_destroy(m);
  clf_context_destroy(ctx);
  return rc;
}

/* ---- embed ---- */

static const char embed_usage[] =
    "usage: clformer embed MODEL_DIR TEXT TEXT... [--device S]\n"
    "Embeds each text with the BERT-style model in MODEL_DIR (mean of\n"
    "last_hidden_state over the tokens, as sentence-transformers does) and prints\n"
    "the matrix of cosine similarities.\n";

int clf_cli_embed(int argc, char **argv) {
  const char *dir = NULL, *device = NULL, *texts[64];
  size_t n = 0;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { fputs(embed_usage, stdout); return 0; }
    if (!strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
    else if (!dir) dir = argv[i];
    else if (n < 64) texts[n++] = argv[i];
    else { fprintf(stderr, "clformer embed: at most 64 texts\n"); return 2; }
  }
  if (!dir || n == 0) { fputs(embed_usage, stderr); return 2; }
  int rc = 1;
  clf_tokenizer *tok = NULL;
  clf_context *ctx = NULL;
  clf_model *m = NULL;
  int64_t *tok_ids[64] = {0};
  size_t lens[64] = {0}, L = 0;
  clf_array in[3], res;
  memset(in, 0, sizeof(in));
  memset(&res, 0, sizeof(res));
  float *emb = NULL;
  if (clf_tokenizer_load(dir, &tok) != CLF_OK) {
    fprintf(stderr, "clformer embed: %s\n", clf_last_error(NULL));
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    if (clf_tokenizer_encode(tok, texts[i], 1, &tok_ids[i], &lens[i]) != CLF_OK) {
      fprintf(stderr, "clformer embed: %s\n", clf_last_error(NULL));
      goto out;
    }
    if (lens[i] > L) L = lens[i];
  }
  /* [n, L] ids padded with 0 ([PAD] in BERT vocabularies), mask, segments. */
  static const char *names[3] = {"input_ids", "attention_mask", "token_type_ids"};
  for (int k = 0; k < 3; k++) {
    snprintf(in[k].name, sizeof(in[k].name), "%s", names[k]);
    in[k].dtype = CLF_I64;
    in[k].ndim = 2;
    in[k].shape[0] = n;
    in[k].shape[1] = L;
    in[k].data = calloc(n * L + 1, sizeof(int64_t));
    if (!in[k].data) goto out;
  }
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < lens[i]; j++) {
      ((int64_t *)in[0].data)[i * L + j] = tok_ids[i][j];
      ((int64_t *)in[1].data)[i * L + j] = 1;
    }
  if (!(ctx = clf_cli_open_context(device))) goto out;
  if (clf_model_load(ctx, dir, &m) != CLF_OK) {
    fprintf(stderr, "clformer embed: %s\n", clf_last_error(ctx));
    goto out;
  }
  const char *outs[1] = {"last_hidden_state"};
  if (clf_model_run(m, in, 3, outs, 1, &res) != CLF_OK) {
    fprintf(stderr, "clformer embed: %s\n", clf_last_error(ctx));
    goto out;
  }
  size_t D = res.shape[2];
  emb = calloc(n * D, sizeof(float));
  if (!emb) goto out;
  const float *h = res.data;
  for (size_t i = 0; i < n; i++) {
    double norm = 0;
    for (size_t d = 0; d < D; d++) {
      double s = 0;
      for (size_t j = 0; j < lens[i]; j++) s += h[(i * L + j) * D + d];
      emb[i * D + d] = (float)(s / (double)lens[i]);
      norm += (double)emb[i * D + d] * emb[i * D + d];
    }
    for (size_t d = 0; d < D; d++) emb[i * D + d] /= (float)(sqrt(norm) + 1e-12);
  }
  printf("cosine similarity of mean-pooled embeddings (%s, dim %zu):\n", clf_model_type(m), D);
  for (size_t i = 0; i < n; i++) {
    printf("[%zu]", i);
    for (size_t j = 0; j < n; j++) {
      double c = 0;
      for (size_t d = 0; d < D; d++) c += (double)emb[i * D + d] * emb[j * D + d];
      printf(" %7.4f", c);
    }
    printf("  %s\n", texts[i]);
  }
  rc = 0;
out:
  for (size_t i = 0; i < n; i++) free(tok_ids[i]);
  for (int k = 0; k < 3; k++) clf_array_free(&in[k]);
  clf_array_free(&res);
  free(emb);
  clf_tokenizer_destroy(tok);
  clf_model_destroy(m);
  clf_context_destroy(ctx);
  return rc;
}
