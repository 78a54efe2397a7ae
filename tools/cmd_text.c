/* cmd_text.c - `clformer fill-mask` (the most probable tokens at each mask
 * of a text, as transformers' fill-mask pipeline), `clformer tokenize` (a
 * text's ids and tokens) and the text side of `clformer classify` (a
 * sequence classifier's labels for each text). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "clformer.h"
#include "cli.h"

/* One text as m's inputs (clf_model_encode_text: the library's rule, which
 * Python's classify() follows too); says why on failure. */
static int encode_one(const char *cmd, clf_context *ctx, clf_tokenizer *tok,
                      clf_model *m, const char *text, clf_array in[3],
                      size_t *n_in) {
  if (clf_model_encode_text(m, tok, text, in, n_in) == CLF_OK)
    return 1;
  fprintf(stderr, "clformer %s: %s\n", cmd, clf_last_error(ctx));
  return 0;
}

static void free_inputs(clf_array in[3]) {
  for (int k = 0; k < 3; k++)
    clf_array_free(&in[k]);
}

/* ---- classify (text) ---- */

int clf_cli_classify_text(const char *dir, char **texts, size_t n, long top,
                          const char *device, const char *weights,
                          void (*print)(const char *what, const double *p,
                                        const size_t *top, size_t k,
                                        const clf_model *m)) {
  clf_tokenizer *tok = NULL;
  clf_context *ctx = NULL;
  clf_model *m = NULL;
  int rc = 1;
  const char *outs[1] = {"logits"};
  if (clf_tokenizer_load(dir, &tok) != CLF_OK) {
    fprintf(stderr,
            "clformer classify: %s has no preprocessor_config.json (an image "
            "classifier) and no tokenizer "
            "(a text classifier): %s\n",
            dir, clf_last_error(NULL));
  } else if (clf_cli_open_model("classify", dir, device, weights, 0, &ctx,
                                &m)) {
    rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
      clf_array in[3], logits;
      size_t n_in;
      memset(&logits, 0, sizeof logits);
      rc = 1;
      if (!encode_one("classify", ctx, tok, m, texts[i], in, &n_in)) {
        /* said why */
      } else if (clf_model_run(m, in, n_in, outs, 1, &logits) != CLF_OK) {
        fprintf(stderr, "clformer classify: %s\n", clf_last_error(ctx));
      } else if (logits.dtype != CLF_F32 || logits.ndim != 2 ||
                 logits.shape[0] != 1 || logits.shape[1] == 0) {
        fprintf(stderr, "clformer classify: the model's logits are not [1, "
                        "num_labels] (not a sequence classifier)\n");
      } else {
        const size_t nl = logits.shape[1],
                     k = (size_t)top < nl ? (size_t)top : nl;
        double *p = malloc(nl * sizeof *p);
        size_t *idx = malloc(nl * sizeof *idx);
        if (p && idx) {
          if (clf_softmax_top_k(logits.data, nl, k, p, idx) == CLF_OK) {
            print(texts[i], p, idx, k, m);
            rc = 0;
          } else {
            fprintf(stderr, "clformer classify: %s\n", clf_last_error(NULL));
          }
        }
        free(p), free(idx);
      }
      free_inputs(in);
      clf_array_free(&logits);
    }
  }
  clf_tokenizer_destroy(tok);
  clf_model_destroy(m);
  clf_context_destroy(ctx);
  return rc;
}

/* ---- fill-mask ---- */

typedef struct fill_opts {
  long top;
  const char *device, *weights;
} fill_opts;

static const clf_cli_option fill_options[] = {
    {"--top-k", "K", CLF_OPT_LONG, offsetof(fill_opts, top), 1, 100000, 5, 0, 0,
     "the K most probable tokens"},
    CLF_CLI_OPT_DEVICE(fill_opts),
    CLF_CLI_OPT_WEIGHTS(fill_opts),
    {NULL}};

/* The tokenizer's mask token as tokenizer_config.json (else
 * special_tokens_map.json) names it: mask_token, a string or an added
 * token's {"content": ...}.  0 when neither names one. */
static int mask_name(const char *dir, char *name, size_t len) {
  static const char *const files[] = {"tokenizer_config.json",
                                      "special_tokens_map.json"};
  for (int f = 0; f < 2; f++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, files[f]);
    cJSON *j = clf_cli_read_json(path);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "mask_token");
    if (cJSON_IsObject(t))
      t = cJSON_GetObjectItemCaseSensitive(t, "content");
    const int ok =
        cJSON_IsString(t) && *t->valuestring && strlen(t->valuestring) < len;
    if (ok)
      snprintf(name, len, "%s", t->valuestring);
    cJSON_Delete(j);
    if (ok)
      return 1;
  }
  return 0;
}

/* The mask token's id: its name (mask_name: "[MASK]" for BERT, "<mask>" for
 * RoBERTa; when none is named, "[MASK]" then "<mask>") encoded alone to one
 * id.  `name` receives the name. */
static int mask_id(const char *dir, clf_tokenizer *tok, int64_t *id, char *name,
                   size_t len) {
  const char *forms[2] = {"[MASK]", "<mask>"};
  const int named = mask_name(dir, name, len);
  for (int f = 0; f < (named ? 1 : 2); f++) {
    int64_t *ids = NULL;
    size_t n = 0;
    if (!named)
      snprintf(name, len, "%s", forms[f]);
    if (clf_tokenizer_encode(tok, name, 0, &ids, &n) == CLF_OK && n == 1)
      *id = ids[0];
    free(ids);
    if (n == 1)
      return 1;
  }
  if (!named)
    snprintf(name, len, "[MASK] or <mask>");
  return 0;
}

/* One block per mask: the top K tokens with their softmax scores. */
static int print_masks(clf_tokenizer *tok, const clf_array *in,
                       const clf_array *logits, int64_t mask,
                       const char *mask_str, size_t top) {
  const size_t L = in->shape[1], V = logits->shape[2], k = top < V ? top : V;
  const int64_t *ids = in->data;
  double *p = malloc(V * sizeof *p);
  size_t *idx = malloc(V * sizeof *idx), n_masks = 0;
  int ok = p && idx;
  for (size_t pos = 0; pos < L && ok; pos++) {
    if (ids[pos] != mask)
      continue;
    if (clf_softmax_top_k((const float *)logits->data + pos * V, V, k, p, idx) != CLF_OK) {
      fprintf(stderr, "clformer fill-mask: %s\n", clf_last_error(NULL));
      ok = 0;
      break;
    }
    printf("mask %zu (token %zu)\n", ++n_masks, pos);
    for (size_t j = 0; j < k && ok; j++) {
      char *s = NULL;
      const int64_t id = (int64_t)idx[j];
      ok = clf_tokenizer_decode(tok, &id, 1, 0, &s) == CLF_OK;
      if (ok)
        printf("  %.4f  %s (%lld)\n", p[idx[j]], s, (long long)id);
      free(s);
    }
  }
  if (ok && !n_masks)
    fprintf(stderr, "clformer fill-mask: the text has no mask token (%s)\n",
            mask_str);
  free(p), free(idx);
  return ok && n_masks;
}

/* BertForPreTraining's prediction_logits, else logits. */
static const char *mlm_output(const clf_model *m) {
  const char *const *names;
  const size_t n = clf_model_output_names(m, &names);
  const char *found = NULL;
  for (size_t i = 0; i < n; i++)
    if (!strcmp(names[i], "prediction_logits") ||
        (!found && !strcmp(names[i], "logits")))
      found = names[i];
  return found;
}

static int fill_main(const void *opts, int argc, char **argv) {
  const fill_opts *o = opts;
  const char *dir = argv[0];
  (void)argc;
  clf_tokenizer *tok = NULL;
  clf_context *ctx = NULL;
  clf_model *m = NULL;
  clf_array in[3], logits;
  size_t n_in;
  int64_t mask = -1;
  char mask_str[256];
  int rc = 1;
  memset(in, 0, sizeof in);
  memset(&logits, 0, sizeof logits);
  const char *outs[1] = {"logits"};
  if (clf_tokenizer_load(dir, &tok) != CLF_OK) {
    fprintf(stderr, "clformer fill-mask: %s\n", clf_last_error(NULL));
  } else if (!mask_id(dir, tok, &mask, mask_str, sizeof mask_str)) {
    fprintf(stderr,
            "clformer fill-mask: the tokenizer of %s has no mask token (%s "
            "does not encode to one id)\n",
            dir, mask_str);
  } else if (!clf_cli_open_model("fill-mask", dir, o->device, o->weights, 0,
                                 &ctx, &m) ||
             !encode_one("fill-mask", ctx, tok, m, argv[1], in, &n_in)) {
    /* said why */
  } else if ((outs[0] = mlm_output(m)) == NULL) {
    fprintf(stderr,
            "clformer fill-mask: %s is not a masked language model (no output "
            "\"logits\")\n",
            dir);
  } else if (clf_model_run(m, in, n_in, outs, 1, &logits) != CLF_OK) {
    fprintf(stderr, "clformer fill-mask: %s\n", clf_last_error(ctx));
  } else if (logits.ndim != 3 || logits.shape[1] != in[0].shape[1] ||
             logits.shape[2] == 0) {
    fprintf(stderr, "clformer fill-mask: the model's logits are not [1, "
                    "length, vocab] (not a masked LM)\n");
  } else {
    rc = print_masks(tok, &in[0], &logits, mask, mask_str, (size_t)o->top) ? 0
                                                                           : 1;
  }
  free_inputs(in);
  clf_array_free(&logits);
  clf_tokenizer_destroy(tok);
  clf_model_destroy(m);
  clf_context_destroy(ctx);
  return rc;
}

const clf_cli_command clf_cli_fill_mask_command = {
    .name = "fill-mask",
    .summary = "the most probable tokens at each mask token of a text "
               "([MASK], <mask>: a masked LM)",
    .synopsis = "MODEL_DIR TEXT [options]",
    .details =
        "Tokenizes TEXT with MODEL_DIR's tokenizer, runs the masked language "
        "model\n"
        "(BertForMaskedLM, BertForPreTraining, RobertaForMaskedLM,\n"
        "XLMRobertaForMaskedLM, DistilBertForMaskedLM) and prints, for each "
        "mask token\n"
        "(the tokenizer's mask_token: [MASK], <mask>),\n"
        "the K (default 5) most probable tokens with their softmax scores, as\n"
        "transformers' fill-mask pipeline ranks them:\n"
        "  mask 1 (token 4)\n"
        "    0.8458  capital (2364)\n",
    .options = fill_options,
    .opts_size = sizeof(fill_opts),
    .min_args = 2,
    .max_args = 2,
    .free_text = 1,
    .handler = fill_main,
};

/* ---- tokenize ---- */

typedef struct tokenize_opts {
  int no_special;
} tokenize_opts;

static const clf_cli_option tokenize_options[] = {
    {"--no-special", NULL, CLF_OPT_FLAG, offsetof(tokenize_opts, no_special), 0, 0, 0, 0, 0,
     "without the special tokens the model's tokenizer adds ([CLS] .. [SEP], <s>, ...)"},
    {NULL}};

/* s with its control characters and backslashes escaped (\n, \t, \r, \\,
 * \xNN), so that each token prints on one line. */
static void print_escaped(const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '\n') fputs("\\n", stdout);
    else if (*p == '\t') fputs("\\t", stdout);
    else if (*p == '\r') fputs("\\r", stdout);
    else if (*p == '\\') fputs("\\\\", stdout);
    else if (*p < 0x20 || *p == 0x7f) printf("\\x%02x", *p);
    else putchar(*p);
  }
}

static int tokenize_main(const void *opts, int argc, char **argv) {
  const tokenize_opts *o = opts;
  (void)argc;
  clf_tokenizer *tok = NULL;
  int64_t *ids = NULL;
  size_t n = 0;
  int rc = 1;
  if (clf_tokenizer_load(argv[0], &tok) != CLF_OK ||
      clf_tokenizer_encode(tok, argv[1], !o->no_special, &ids, &n) != CLF_OK) {
    fprintf(stderr, "clformer tokenize: %s\n", clf_last_error(NULL));
  } else {
    rc = 0;
    for (size_t i = 0; i < n; i++) {
      const char *t;
      printf("%lld\t", (long long)ids[i]);
      if (clf_tokenizer_token(tok, ids[i], &t) == CLF_OK) print_escaped(t);
      putchar('\n');
    }
  }
  free(ids);
  clf_tokenizer_destroy(tok);
  return rc;
}

const clf_cli_command clf_cli_tokenize_command = {
    .name = "tokenize",
    .summary = "a text's token ids and tokens, as the model's tokenizer makes them",
    .synopsis = "MODEL TEXT [options]",
    .details =
        "Tokenizes TEXT with MODEL's tokenizer (the files clformer generate and run\n"
        "read, or a GGUF file's tokenizer.ggml.* metadata) and prints one line per\n"
        "token: its id, a tab, and the token as the vocabulary spells it\n"
        "(transformers' convert_ids_to_tokens), control characters and backslashes\n"
        "escaped:\n"
        "  15496\tHello\n"
        "  995\t\u0120world\n"
        "The model's special tokens are added as it would see the text, unless\n"
        "--no-special.\n",
    .options = tokenize_options,
    .opts_size = sizeof(tokenize_opts),
    .min_args = 2,
    .max_args = 2,
    .free_text = 1,
    .handler = tokenize_main,
};
