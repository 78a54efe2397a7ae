/* cmd_batch.c - `clformer batch`: many prompts decoded together by the
 * library's engine (clf_engine: one forward pass over the rows of every
 * running sequence, a paged KV cache); the texts in submission order, then
 * the aggregate tokens per second, the time to the first token and the
 * pool's figures, or all of it as one JSON object. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "clformer.h"

/* What --prompts FILE may hold, and how many sequences a run may make. */
enum { MAX_PROMPTS = 10000, MAX_LINE = 65536, MAX_SEQUENCES = 100000 };

typedef struct batch_opts {
  clf_cli_strings prompt;
  const char *prompts, *kv_bytes, *device, *weights;
  long parallel, block_size, max_step_rows, max_sequences;
  int chat, json, kv_f16;
  clf_cli_sampling s;
} batch_opts;

static const clf_cli_option batch_options[] = {
    {"--prompt", "TEXT", CLF_OPT_STRINGS, offsetof(batch_opts, prompt), 0, 0, 0, CLF_CLI_MAX_LIST, 0,
     "a prompt, tokenized with MODEL's tokenizer", NULL, "none: --prompt or --prompts is required"},
    {"--prompts", "FILE", CLF_OPT_STRING, offsetof(batch_opts, prompts), 0, 0, 0, 0, 0,
     "the prompts of FILE, one a line (empty lines skipped; at most 10000 lines of 65536 bytes; - reads stdin)",
     NULL, "none: --prompt or --prompts is required"},
    {"--parallel", "N", CLF_OPT_LONG, offsetof(batch_opts, parallel), 1, 4096, 1, 0, 0,
     "each prompt submitted N times (with --seed S, copy C samples with seed S+C)"},
    {"--chat", NULL, CLF_OPT_FLAG, offsetof(batch_opts, chat), 0, 0, 0, 0, 0,
     "each prompt as one user message in MODEL's chat template, with the generation prompt"},
    CLF_CLI_SAMPLING_OPTIONS(batch_opts, s, CLF_GEN_WHOLE), /* the engine decodes one beam */
    {"--kv-bytes", "N", CLF_OPT_STRING, offsetof(batch_opts, kv_bytes), 0, 0, 0, 0, 0,
     "device memory of the KV block pool in bytes (K, M, G: powers of 1024)", NULL,
     "0: the library's, a quarter of the device's memory left after the weights, at most what --max-sequences "
     "sequences of the model's full length take"},
    {"--block-size", "N", CLF_OPT_LONG, offsetof(batch_opts, block_size), 0, 1024, 0, 0, 0,
     "positions per KV block", NULL, "0: the library's, 16"},
    {"--max-step-rows", "N", CLF_OPT_LONG, offsetof(batch_opts, max_step_rows), 0, 65536, 0, 0, 0,
     "rows of one step (a token of each decoding sequence, chunks of prompts)", NULL, "0: the library's: 64 on a CPU device (the rows one matrix-vector launch takes), else 256"},
    {"--max-sequences", "N", CLF_OPT_LONG, offsetof(batch_opts, max_sequences), 0, 4096, 0, 0, 0,
     "sequences running at once (the others wait)", NULL, "0: the library's, 64"},
    {"--kv-f16", NULL, CLF_OPT_FLAG, offsetof(batch_opts, kv_f16), 0, 0, 0, 0, 0,
     "keys and values kept in f16: twice the positions in the same --kv-bytes", NULL, "off: f32"},
    {"--json", NULL, CLF_OPT_FLAG, offsetof(batch_opts, json), 0, 0, 0, 0, 0,
     "one JSON object on stdout instead of the texts (the keys are in the description above)"},
    CLF_CLI_OPT_DEVICE(batch_opts),
    CLF_CLI_OPT_WEIGHTS(batch_opts),
    {NULL}};

/* One submitted sequence. */
typedef struct bseq {
  size_t index, prompt, copy;
  clf_text_stream *text;
  size_t tokens;
  double t_submit, t_first; /* clf_cli_now_ms() at submission and as its first token came */
  clf_finish_reason why;    /* 0 while it runs */
  char *error;              /* why it failed (malloc'd), or NULL */
  uint64_t id;
  size_t *ended; /* the run's count of sequences ended */
} bseq;

/* The prompts (borrowed from argv or owned lines of --prompts). */
typedef struct prompt_list {
  char **v;
  size_t n;
  int owned;
} prompt_list;

static void prompts_free(prompt_list *p) {
  for (size_t i = 0; p->owned && i < p->n; i++) free(p->v[i]);
  free(p->v);
}

/* --prompts FILE: one prompt a line, empty lines skipped; 1, or 0 after
 * printing why not. */
static int read_prompts(const char *file, prompt_list *p) {
  FILE *f = strcmp(file, "-") ? fopen(file, "rb") : stdin;
  if (!f) {
    fprintf(stderr, "clformer batch: --prompts %s: %s\n", file, strerror(errno));
    return 0;
  }
  p->owned = 1;
  p->v = calloc(MAX_PROMPTS, sizeof *p->v);
  char *line = NULL;
  size_t cap = 0, lineno = 0;
  ssize_t len;
  int ok = p->v != NULL;
  while (ok && (len = getline(&line, &cap, f)) >= 0) {
    lineno++;
    if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
    if (len > 0 && line[len - 1] == '\r') line[--len] = '\0';
    if ((size_t)len > MAX_LINE)
      fprintf(stderr, "clformer batch: --prompts %s: line %zu is longer than %d bytes\n", file, lineno, MAX_LINE), ok = 0;
    else if (strlen(line) != (size_t)len)
      fprintf(stderr, "clformer batch: --prompts %s: line %zu contains a NUL character\n", file, lineno), ok = 0;
    else if (len && p->n == MAX_PROMPTS)
      fprintf(stderr, "clformer batch: --prompts %s: more than %d prompts\n", file, MAX_PROMPTS), ok = 0;
    else if (len && !(p->v[p->n++] = strdup(line)))
      fprintf(stderr, "clformer batch: out of memory\n"), ok = 0;
  }
  if (ok && ferror(f)) fprintf(stderr, "clformer batch: --prompts %s: %s\n", file, strerror(errno)), ok = 0;
  if (ok && !p->n) fprintf(stderr, "clformer batch: --prompts %s: no prompts (every line is empty)\n", file), ok = 0;
  if (!p->v) fprintf(stderr, "clformer batch: out of memory\n");
  free(line);
  if (f != stdin) fclose(f);
  return ok;
}

/* --kv-bytes "N[K|M|G]"; 1, or 0 when it is not one. */
static int parse_bytes(const char *s, size_t *out) {
  char *end;
  errno = 0;
  if (!(*s >= '0' && *s <= '9')) return 0;
  unsigned long long v = strtoull(s, &end, 10);
  const unsigned shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20 : *end == 'G' || *end == 'g' ? 30 : 0;
  if (shift) end++;
  if (*end || errno || v > (SIZE_MAX >> shift)) return 0;
  *out = (size_t)v << shift;
  return 1;
}

/* Usage errors; -1 when none, else 2 after printing it. */
static int batch_check(const batch_opts *o, clf_engine_options *eo) {
  const clf_cli_command *cmd = &clf_cli_batch_command;
  if (!o->prompt.n == !o->prompts) return clf_cli_usage_error(cmd, "give either --prompt TEXT (repeatable) or --prompts FILE");
  for (int i = 0; i < o->prompt.n; i++)
    if (!o->prompt.v[i][0]) return clf_cli_usage_error(cmd, "--prompt: the text is empty");
  clf_engine_options_init(eo);
  if (o->kv_bytes && !parse_bytes(o->kv_bytes, &eo->kv_bytes))
    return clf_cli_usage_error(cmd, "--kv-bytes: expected a number of bytes (K, M or G allowed), got \"%s\"", o->kv_bytes);
  eo->block_size = (size_t)o->block_size;
  eo->max_step_rows = (size_t)o->max_step_rows;
  eo->max_sequences = (size_t)o->max_sequences;
  eo->kv_dtype = o->kv_f16 ? CLF_F16 : CLF_F32;
  return clf_cli_sampling_check(cmd, &o->s);
}

static int on_token(void *user, uint64_t id, int64_t token) {
  (void)id;
  bseq *q = user;
  if (!q->tokens++) q->t_first = clf_cli_now_ms();
  const char *piece;
  size_t len;
  int stopped = 0;
  if (clf_text_stream_push(q->text, token, &piece, &len, &stopped) != CLF_OK) {
    q->error = strdup(clf_last_error(NULL));
    return 1; /* ends it; on_done's "stopped" becomes the error */
  }
  return stopped;
}

static void on_done(void *user, uint64_t id, const clf_sequence_end *end) {
  (void)id;
  bseq *q = user;
  q->why = q->error ? CLF_FINISH_ERROR : end->why;
  if (end->error && !q->error) q->error = strdup(end->error);
  if (q->why == CLF_FINISH_ERROR && !q->error) q->error = strdup("failed");
  ++*q->ended;
}

/* A prompt's ids: as generate tokenizes it (the tokenizer's special tokens
 * added), or with --chat the chat template's rendering of one user message
 * with the generation prompt (whose special tokens are in the text). */
static clf_status prompt_ids(clf_tokenizer *tok, const clf_chat_template *tmpl, const char *prompt, int64_t **ids,
                             size_t *n) {
  if (!tmpl) return clf_tokenizer_encode(tok, prompt, 1, ids, n);
  const clf_chat_message msg = {"user", prompt};
  char *text = NULL;
  clf_status st = clf_chat_template_render(tmpl, &msg, 1, 1, &text);
  if (st == CLF_OK) st = clf_tokenizer_encode(tok, text, 0, ids, n);
  free(text);
  return st;
}

/* The run: the engine, its sequences and what came of them. */
typedef struct batch_run {
  const batch_opts *o;
  clf_context *ctx;
  clf_model *m;
  clf_tokenizer *tok;
  clf_engine *e;
  bseq *q;
  size_t n, next_print, ended;
  double t0, t_end;
} batch_run;

/* Sequence q's submission: on failure it ends at once with the error. */
static void submit_one(batch_run *b, bseq *q, const int64_t *ids, size_t n_ids, const clf_generate_options *go) {
  clf_engine_request r = {ids, n_ids, go, 0, on_token, on_done, q};
  q->t_submit = clf_cli_now_ms();
  clf_status st = clf_text_stream_create(b->tok, b->o->s.stop.v, (size_t)b->o->s.stop.n, &q->text);
  if (st != CLF_OK) q->error = strdup(clf_last_error(NULL));
  else if (!n_ids) q->error = strdup("the prompt has no tokens");
  else if (clf_engine_submit(b->e, &r, &q->id) != CLF_OK) q->error = strdup(clf_last_error(NULL));
  if (q->error) q->why = CLF_FINISH_ERROR, b->ended++;
}

/* Every prompt tokenized and submitted --parallel times; 1, or 0 after
 * printing why not. */
static int submit_all(batch_run *b, const prompt_list *p) {
  const batch_opts *o = b->o;
  clf_chat_template *tmpl = NULL;
  if (o->chat && clf_tokenizer_chat_template(b->tok, &tmpl) != CLF_OK) {
    fprintf(stderr, "clformer batch: --chat: %s\n", clf_last_error(NULL));
    return 0;
  }
  clf_generate_options go;
  clf_cli_sampling_settings(&o->s, &go);
  const int seeded = o->s.v[CLF_GEN_SEED].given;
  const uint64_t seed = go.seed;
  b->t0 = clf_cli_now_ms();
  for (size_t i = 0; i < p->n; i++) {
    int64_t *ids = NULL;
    size_t n_ids = 0;
    const clf_status st = prompt_ids(b->tok, tmpl, p->v[i], &ids, &n_ids);
    for (size_t c = 0; c < (size_t)o->parallel; c++) {
      bseq *q = &b->q[i * (size_t)o->parallel + c];
      q->index = i * (size_t)o->parallel + c, q->prompt = i, q->copy = c;
      q->ended = &b->ended;
      if (st != CLF_OK) {
        q->why = CLF_FINISH_ERROR, b->ended++;
        q->error = strdup(clf_last_error(NULL));
        continue;
      }
      go.seed = seeded ? seed + c : 0; /* the library's seed S + 1 is the command line's S */
      submit_one(b, q, ids, n_ids, &go);
    }
    free(ids);
  }
  clf_chat_template_destroy(tmpl);
  return 1;
}

/* The sequences that ended, in submission order as far as every earlier one
 * has ended: "--- sequence I (prompt P, copy C): FINISH ---", the new text. */
static void print_ready(batch_run *b) {
  for (; b->next_print < b->n && b->q[b->next_print].why; b->next_print++) {
    bseq *q = &b->q[b->next_print];
    if (q->error) fprintf(stderr, "clformer batch: sequence %zu: %s\n", q->index, q->error);
    if (b->o->json) continue;
    const char *rest;
    size_t len = 0;
    if (q->text && q->why != CLF_FINISH_ERROR) clf_text_stream_finish(q->text, &rest, &len);
    const char *text = q->why == CLF_FINISH_ERROR ? "" : clf_text_stream_text(q->text, &len);
    clf_cli_status_line = 0;
    printf("--- sequence %zu (prompt %zu, copy %zu): %s ---\n", q->index, q->prompt, q->copy, clf_finish_name(q->why));
    fwrite(text, 1, len, stdout);
    printf("\n");
    fflush(stdout);
    clf_cli_status_line = 1;
  }
}

/* Steps until every sequence has ended.  A failed step ends the sequences
 * it ran (each reports its error); one that ended none cancels the rest,
 * so that a failure that repeats cannot loop. */
static void run_all(batch_run *b) {
  size_t pending = 1, ended = b->ended;
  print_ready(b);
  while (pending) {
    const clf_status st = clf_engine_step(b->e, &pending);
    if (st != CLF_OK && b->ended == ended) {
      fprintf(stderr, "clformer batch: %s; the sequences left are cancelled\n", clf_last_error(b->ctx));
      for (size_t i = 0; i < b->n; i++)
        if (!b->q[i].why) (void)clf_engine_cancel(b->e, b->q[i].id);
    }
    ended = b->ended;
    print_ready(b);
  }
  b->t_end = clf_cli_now_ms();
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The aggregate figures of a run. */
typedef struct batch_totals {
  size_t tokens;
  double seconds, tokens_per_s, decode_tokens_per_s, ttft_median_ms;
} batch_totals;

/* Tokens over the time since the first submission; decoding: the tokens
 * after each sequence's first over the time from the first token any
 * sequence got to the end; the median of the sequences' times from
 * submission to their first token. */
static batch_totals totals(const batch_run *b) {
  batch_totals t = {0};
  double *ttft = malloc((b->n + 1) * sizeof *ttft), first = 0;
  size_t n_ttft = 0, after_first = 0;
  for (size_t i = 0; i < b->n; i++) {
    const bseq *q = &b->q[i];
    t.tokens += q->tokens;
    if (!q->tokens) continue;
    after_first += q->tokens - 1;
    if (!first || q->t_first < first) first = q->t_first;
    if (ttft) ttft[n_ttft++] = q->t_first - q->t_submit;
  }
  t.seconds = (b->t_end - b->t0) / 1e3;
  t.tokens_per_s = t.seconds > 0 ? t.tokens / t.seconds : 0;
  t.decode_tokens_per_s = first && b->t_end > first ? after_first / ((b->t_end - first) / 1e3) : 0;
  if (n_ttft) {
    qsort(ttft, n_ttft, sizeof *ttft, cmp_double);
    t.ttft_median_ms = n_ttft % 2 ? ttft[n_ttft / 2] : (ttft[n_ttft / 2 - 1] + ttft[n_ttft / 2]) / 2;
  }
  free(ttft);
  return t;
}

static void print_summary(const batch_run *b, const batch_totals *t, const clf_engine_stats *s) {
  fprintf(stderr, "clformer batch: %zu sequences, %zu new tokens in %.3f s: %.1f tokens/s; the first token after a "
          "median of %.1f ms; %.1f tokens/s decoding\n", b->n, t->tokens, t->seconds, t->tokens_per_s,
          t->ttft_median_ms, t->decode_tokens_per_s);
  fprintf(stderr, "clformer batch: KV pool of %zu blocks of %zu positions (%.1f MiB), %zu prefix tokens reused, %zu "
          "preemptions; %zu steps of %zu rows in all\n", s->blocks, s->block_size,
          ((double)s->blocks * s->block_bytes + (double)s->window_blocks * s->window_block_bytes) / 1048576.0,
          s->prefix_tokens_reused, s->preemptions, s->steps, s->rows);
}

/* --json: the run as one object on stdout (tools/bench_engine.py reads
 * these keys). */
static int print_json(const batch_run *b, const batch_totals *t, const clf_engine_stats *s) {
  cJSON *root = cJSON_CreateObject(), *seqs = cJSON_AddArrayToObject(root, "sequences");
  for (size_t i = 0; i < b->n; i++) {
    const bseq *q = &b->q[i];
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToArray(seqs, j);
    cJSON_AddNumberToObject(j, "prompt", (double)q->prompt);
    cJSON_AddNumberToObject(j, "copy", (double)q->copy);
    size_t len = 0;
    const char *text = q->why == CLF_FINISH_ERROR ? "" : clf_text_stream_text(q->text, &len);
    cJSON_AddStringToObject(j, "text", text);
    cJSON_AddNumberToObject(j, "tokens", (double)q->tokens);
    cJSON_AddStringToObject(j, "finish", clf_finish_name(q->why));
    if (q->tokens) cJSON_AddNumberToObject(j, "ttft_ms", q->t_first - q->t_submit);
    else cJSON_AddNullToObject(j, "ttft_ms");
    if (q->error) cJSON_AddStringToObject(j, "error", q->error);
  }
  cJSON_AddNumberToObject(root, "new_tokens", (double)t->tokens);
  cJSON_AddNumberToObject(root, "seconds", t->seconds);
  cJSON_AddNumberToObject(root, "tokens_per_s", t->tokens_per_s);
  cJSON_AddNumberToObject(root, "decode_tokens_per_s", t->decode_tokens_per_s);
  cJSON_AddNumberToObject(root, "ttft_ms_median", t->ttft_median_ms);
  cJSON *kv = cJSON_AddObjectToObject(root, "kv");
  cJSON_AddNumberToObject(kv, "blocks", (double)s->blocks);
  cJSON_AddNumberToObject(kv, "block_size", (double)s->block_size);
  cJSON_AddNumberToObject(kv, "block_bytes", (double)s->block_bytes);
  cJSON_AddNumberToObject(kv, "prefix_tokens_reused", (double)s->prefix_tokens_reused);
  cJSON_AddNumberToObject(kv, "preemptions", (double)s->preemptions);
  cJSON_AddNumberToObject(root, "steps", (double)s->steps);
  cJSON_AddNumberToObject(root, "rows", (double)s->rows);
  char *out = cJSON_PrintUnformatted(root);
  const int ok = out && puts(out) >= 0 && fflush(stdout) == 0;
  if (!ok) fprintf(stderr, "clformer batch: cannot write the JSON output\n");
  free(out);
  cJSON_Delete(root);
  return ok;
}

/* The model, its tokenizer and an engine over it; the sequences' table. */
static int batch_open(batch_run *b, const char *model, const clf_engine_options *eo, size_t n_prompts) {
  const batch_opts *o = b->o;
  if ((size_t)o->parallel > MAX_SEQUENCES / n_prompts) {
    fprintf(stderr, "clformer batch: %zu prompts x --parallel %ld is more than %d sequences\n", n_prompts, o->parallel,
            MAX_SEQUENCES);
    return 0;
  }
  b->n = n_prompts * (size_t)o->parallel;
  if (!(b->q = calloc(b->n, sizeof *b->q))) {
    fprintf(stderr, "clformer batch: out of memory\n");
    return 0;
  }
  if (!clf_cli_open_model("batch", model, o->device, o->weights, 0, &b->ctx, &b->m)) return 0;
  if (clf_engine_create(b->m, eo, &b->e) != CLF_OK) { /* first: it names a model it cannot run */
    fprintf(stderr, "clformer batch: %s\n", clf_last_error(b->ctx));
    return 0;
  }
  if (clf_tokenizer_load(model, &b->tok) != CLF_OK) {
    fprintf(stderr, "clformer batch: %s\n", clf_last_error(NULL));
    return 0;
  }
  return 1;
}

static int batch_main(const void *opts, int argc, char **argv) {
  const batch_opts *o = opts;
  (void)argc;
  clf_engine_options eo;
  int rc = batch_check(o, &eo);
  if (rc >= 0) return rc;
  prompt_list p = {0};
  batch_run b = {0};
  b.o = o;
  rc = 1;
  if (o->prompts) {
    if (!read_prompts(o->prompts, &p)) goto done;
  } else {
    p.v = (char **)o->prompt.v, p.n = (size_t)o->prompt.n;
  }
  if (!batch_open(&b, argv[0], &eo, p.n) || !submit_all(&b, &p)) goto done;
  run_all(&b);
  clf_engine_stats s;
  clf_engine_stats_get(b.e, &s);
  const batch_totals t = totals(&b);
  int ok = 1;
  for (size_t i = 0; i < b.n; i++) ok = ok && b.q[i].why != CLF_FINISH_ERROR;
  if (o->json && !print_json(&b, &t, &s)) ok = 0;
  print_summary(&b, &t, &s);
  rc = ok ? 0 : 1;
done:
  clf_engine_destroy(b.e);
  for (size_t i = 0; b.q && i < b.n; i++) {
    clf_text_stream_destroy(b.q[i].text);
    free(b.q[i].error);
  }
  free(b.q);
  if (o->prompts) prompts_free(&p);
  clf_tokenizer_destroy(b.tok);
  clf_model_destroy(b.m);
  clf_context_destroy(b.ctx);
  return rc;
}

const clf_cli_command clf_cli_batch_command = {
    .name = "batch",
    .summary = "many prompts decoded together by the engine (continuous batching, a paged KV cache)",
    .synopsis = "MODEL (--prompt TEXT [--prompt TEXT ...] | --prompts FILE) [options]",
    .details =
        "Decodes many sequences of one decoder-only model together (clf_engine): each\n"
        "step runs one forward pass over a new token of every decoding sequence and\n"
        "chunks of the prompts starting, with keys and values in a pool of fixed-size\n"
        "blocks; sequences whose prompts begin alike share those blocks.  Each prompt\n"
        "(repeated --prompt, or the lines of --prompts FILE) is tokenized with MODEL's\n"
        "tokenizer (a GGUF file's from its metadata) as `generate --prompt` does, or\n"
        "with --chat rendered by the chat template as one user message, and submitted\n"
        "--parallel N times; copy C of a prompt samples with seed S+C under --seed S (a\n"
        "fresh seed each without).  Each sequence decodes as `generate` would decode it\n"
        "alone (greedy: the same tokens), until an end-of-sequence token, --max-new-tokens,\n"
        "the end of the model's positions (no limit given) or a --stop string.\n"
        "Output: the new text of each sequence in submission order, numbered from 0, under\n"
        "  --- sequence I (prompt P, copy C): FINISH ---\n"
        "(FINISH: eos, length, context, stopped, cancelled or error); then on stderr\n"
        "  clformer batch: N sequences, T new tokens in S s: X tokens/s; the first token\n"
        "  after a median of Y ms; D tokens/s decoding\n"
        "and the pool's blocks, prefix tokens reused and preemptions.  The time runs from\n"
        "the first submission (after the model is loaded), so kernel builds on a cold\n"
        "cache count in the time to the first token; decoding is the tokens after each\n"
        "sequence's first over the time from the first token to the end.  --json prints\n"
        "instead {\"sequences\": [{\"prompt\", \"copy\", \"text\", \"tokens\", \"finish\",\n"
        "\"ttft_ms\"}, ...], \"new_tokens\", \"seconds\", \"tokens_per_s\",\n"
        "\"decode_tokens_per_s\", \"ttft_ms_median\", \"kv\": {\"blocks\", \"block_size\",\n"
        "\"block_bytes\", \"prefix_tokens_reused\", \"preemptions\"}, \"steps\", \"rows\"}.\n"
        "At most 64 --prompt, 10000 prompts in a file and 100000 sequences.  Exit\n"
        "status 1 when a sequence ended with an error (its header and stderr say why).\n",
    .options = batch_options,
    .opts_size = sizeof(batch_opts),
    .min_args = 1,
    .max_args = 1,
    .handler = batch_main,
};
