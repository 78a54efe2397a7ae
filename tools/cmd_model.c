/* cmd_model.c - `clformer run`, `generate` and `embed`: Hugging Face model
 * directories on a device, with NumPy .npy files or text in and out. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "clformer.h"

#define MAX_IO 16
#define MAX_TEXTS 64

/* "NAME=FILE" -> name (into buf) and file. */
static int split_pair(const char *arg, char *name, size_t len, const char **file) {
  const char *eq = strchr(arg, '=');
  if (!eq || eq == arg || !eq[1] || (size_t)(eq - arg) >= len) return 0;
  memcpy(name, arg, (size_t)(eq - arg));
  name[eq - arg] = '\0';
  *file = eq + 1;
  return 1;
}

static clf_context *open_context(const char *device, int profiling) {
  clf_context_options o;
  clf_context_options_init(&o);
  o.device = device;
  o.profiling = profiling;
  clf_cli_show_builds(&o);
  clf_context *ctx = NULL;
  if (clf_context_create(&o, &ctx) != CLF_OK) {
    fprintf(stderr, "clformer: %s\n", clf_last_error(NULL));
    return NULL;
  }
  return ctx;
}

clf_context *clf_cli_open_context(const char *device) { return open_context(device, 0); }

int clf_cli_profile_start(clf_context *ctx, const char *cmd) {
  if (clf_profile_start(ctx) == CLF_OK) return 1;
  fprintf(stderr, "clformer %s: %s\n", cmd, clf_last_error(ctx));
  return 0;
}

int clf_cli_profile_print(clf_context *ctx, const char *cmd, const char *per, double units) {
  clf_profile_entry e[64];
  size_t n = 0;
  unsigned long commands = 0;
  if (clf_profile_stop(ctx, e, 64, &n, &commands) != CLF_OK) {
    fprintf(stderr, "clformer %s: %s\n", cmd, clf_last_error(ctx));
    return 0;
  }
  double total = 0;
  for (size_t i = 0; i < n && i < 64; i++) total += e[i].ms;
  const char *clock = clf_profile_clock(ctx);
  int wall = clock && !strcmp(clock, "wall");
  fprintf(stderr, "profile: %s by op (%s)\n  %-28s %8s %12s %7s\n", wall ? "time" : "device time",
          wall ? "wall clock around each command, the queue finished before and after: the driver's events "
                 "carry no timestamps, or CLFORMER_PROFILE_CLOCK=wall"
               : "OpenCL profiling events",
          "op", "count", "total ms", "share");
  for (size_t i = 0; i < n && i < 64; i++)
    fprintf(stderr, "  %-28s %8lu %12.3f %6.1f%%\n", e[i].op, e[i].count, e[i].ms,
            total > 0 ? 100.0 * e[i].ms / total : 0.0);
  fprintf(stderr, "  %-28s %8lu %12.3f %6.1f%%\n", "all", commands, total, 100.0);
  fprintf(stderr, "profile: per %s: %.3f ms of %s time, %.1f launches\n", per, total / units, wall ? "wall" : "device",
          commands / units);
  const size_t paths = clf_profile_paths(ctx, 0, NULL, NULL, NULL);
  if (paths)
    fprintf(stderr, "profile: linear layers, the path each product took and why\n  %6s %10s %6s  %s\n", "calls",
            "total ms", "share", "product: path (why)");
  for (size_t i = 0; i < paths; i++) {
    const char *line;
    unsigned long count;
    double ms;
    clf_profile_paths(ctx, i, &line, &count, &ms);
    fprintf(stderr, "  %6lu %10.3f %5.1f%%  %s\n", count, ms, total > 0 ? 100.0 * ms / total : 0.0, line);
  }
  return 1;
}

/* "loading MODEL: 45%" redrawn in place on a terminal, erased when done. */
static void load_progress(void *user, size_t done, size_t total) {
  fprintf(stderr, "\rclformer: loading %s: %3d%%", (const char *)user, total ? (int)(100.0 * done / total) : 100);
}

void clf_cli_weight_types(char *buf, size_t len) {
  size_t n = 0;
  clf_dtype_desc d;
  buf[0] = '\0';
  for (size_t i = 0; i < clf_dtype_count() && clf_dtype_at(i, &d) == CLF_OK; i++)
    if (d.weights_target) {
      snprintf(buf + n, len - n, "%s%s", n ? ", " : "", d.weight_name);
      n += strlen(buf + n);
    }
}

int clf_cli_open_model(const char *cmd, const char *dir, const char *device, const char *weights, int profile,
                       clf_context **ctx, clf_model **m) {
  clf_model_options mo;
  clf_model_options_init(&mo);
  if (isatty(2)) {
    mo.progress = load_progress;
    mo.progress_user = (void *)dir;
  }
  if (weights && clf_weight_type_from_name(weights, &mo.weights) != CLF_OK) {
    fprintf(stderr, "clformer %s: --weights: %s\n", cmd, clf_last_error(NULL));
    return 0;
  }
  struct stat sb;
  if (stat(dir, &sb) != 0) {
    fprintf(stderr, "clformer %s: %s: %s (MODEL is a model directory or a .gguf file)\n", cmd, dir, strerror(errno));
    return 0;
  }
  if (!(*ctx = open_context(device, profile))) return 0;
  const clf_status st = clf_model_load_with(*ctx, dir, &mo, m);
  if (mo.progress) fprintf(stderr, "\r\033[K");
  if (st != CLF_OK) {
    fprintf(stderr, "clformer %s: %s%s\n", cmd, clf_last_error(*ctx),
            S_ISDIR(sb.st_mode) ? " (MODEL is a model directory with config.json, or a .gguf file)" : "");
    return 0;
  }
  if (weights)
    fprintf(stderr, "clformer %s: weights %s, %.1f MiB on the device\n", cmd, clf_dtype_name(mo.weights),
            clf_model_weight_bytes(*m) / 1048576.0);
  return 1;
}

/* ---- run ---- */

typedef struct run_opts {
  clf_cli_strings in, out;
  long repeat;
  const char *device, *weights;
  int profile;
} run_opts;

static const clf_cli_option run_options[] = {
    {"--in", "NAME=FILE.npy", CLF_OPT_STRINGS, offsetof(run_opts, in), 0, 0, 0, MAX_IO, 1,
     "an argument of forward() from a .npy file"},
    {"--out", "NAME=FILE.npy", CLF_OPT_STRINGS, offsetof(run_opts, out), 0, 0, 0, MAX_IO, 1,
     "an output field written to a .npy file"},
    {"--repeat", "N", CLF_OPT_LONG, offsetof(run_opts, repeat), 0, 100000, 0, 0, 0,
     "N more passes, timed (forward_ms on stderr)", NULL, "0: one pass, not timed"},
    CLF_CLI_OPT_DEVICE(run_opts),
    CLF_CLI_OPT_WEIGHTS(run_opts),
    {"--profile", NULL, CLF_OPT_FLAG, offsetof(run_opts, profile), 0, 0, 0, 0, 0,
     "one more pass with per-op device time on stderr (OpenCL profiling events)"},
    {NULL}};

/* The NAME=FILE pairs of --in and --out, and the arrays read and produced. */
typedef struct run_io {
  char in_names[MAX_IO][64], out_names[MAX_IO][64];
  const char *in_files[MAX_IO], *out_files[MAX_IO], *outs[MAX_IO];
  size_t n_in, n_out;
  clf_array inputs[MAX_IO], results[MAX_IO];
} run_io;

/* Splits each "NAME=FILE" of `list`; returns -1, or 2 after a usage error. */
static int split_pairs(const char *opt, const clf_cli_strings *list, char (*names)[64], const char **files) {
  for (int i = 0; i < list->n; i++)
    if (!split_pair(list->v[i], names[i], 64, &files[i]))
      return clf_cli_usage_error(&clf_cli_run_command, "%s takes NAME=FILE.npy, got \"%s\"", opt, list->v[i]);
  return -1;
}

static int read_inputs(run_io *io) {
  for (size_t i = 0; i < io->n_in; i++) {
    if (clf_npy_read(io->in_files[i], &io->inputs[i]) != CLF_OK) {
      fprintf(stderr, "clformer run: %s\n", clf_last_error(NULL));
      return 0;
    }
    snprintf(io->inputs[i].name, sizeof(io->inputs[i].name), "%s", io->in_names[i]);
  }
  return 1;
}

static int write_results(const run_io *io) {
  for (size_t i = 0; i < io->n_out; i++) {
    if (clf_npy_write(io->out_files[i], &io->results[i]) != CLF_OK) {
      fprintf(stderr, "clformer run: %s\n", clf_last_error(NULL));
      return 0;
    }
  }
  return 1;
}

/* `repeat` more passes; prints "forward_ms median=X min=Y max=Z" on stderr. */
static int time_passes(clf_model *m, clf_context *ctx, const run_io *io, long repeat) {
  double *t = malloc(sizeof(double) * (size_t)repeat);
  if (!t) return 0;
  for (long r = 0; r < repeat; r++) {
    clf_array again[MAX_IO];
    memset(again, 0, sizeof(again));
    double t0 = clf_cli_now_ms();
    clf_status st = clf_model_run(m, io->inputs, io->n_in, io->outs, io->n_out, again);
    t[r] = clf_cli_now_ms() - t0; /* clf_model_run returns with the queue finished */
    for (size_t i = 0; i < io->n_out; i++) clf_array_free(&again[i]);
    if (st != CLF_OK) {
      fprintf(stderr, "clformer run: %s\n", clf_last_error(ctx));
      free(t);
      return 0;
    }
  }
  clf_cli_sort_times(t, (size_t)repeat);
  fprintf(stderr, "forward_ms median=%.3f min=%.3f max=%.3f\n", t[repeat / 2], t[0], t[repeat - 1]);
  free(t);
  return 1;
}

/* One more pass, recorded: its ops' device time. */
static int profile_pass(clf_model *m, clf_context *ctx, run_io *io) {
  clf_array again[MAX_IO];
  memset(again, 0, sizeof(again));
  if (!clf_cli_profile_start(ctx, "run")) return 0;
  const clf_status st = clf_model_run(m, io->inputs, io->n_in, io->outs, io->n_out, again);
  for (size_t i = 0; i < io->n_out; i++) clf_array_free(&again[i]);
  if (st != CLF_OK) {
    fprintf(stderr, "clformer run: %s\n", clf_last_error(ctx));
    return 0;
  }
  return clf_cli_profile_print(ctx, "run", "forward pass", 1.0);
}

static int run_main(const void *opts, int argc, char **argv) {
  const run_opts *o = opts;
  (void)argc;
  static run_io io;
  memset(&io, 0, sizeof(io));
  io.n_in = (size_t)o->in.n;
  io.n_out = (size_t)o->out.n;
  int rc = split_pairs("--in", &o->in, io.in_names, io.in_files);
  if (rc < 0) rc = split_pairs("--out", &o->out, io.out_names, io.out_files);
  if (rc >= 0) return rc;
  for (size_t i = 0; i < io.n_out; i++) io.outs[i] = io.out_names[i];
  rc = 1;
  clf_model *m = NULL;
  clf_context *ctx = NULL;
  if (read_inputs(&io) && clf_cli_open_model("run", argv[0], o->device, o->weights, o->profile, &ctx, &m)) {
    if (clf_model_run(m, io.inputs, io.n_in, io.outs, io.n_out, io.results) != CLF_OK)
      fprintf(stderr, "clformer run: %s\n", clf_last_error(ctx));
    else if (write_results(&io) && (o->repeat == 0 || time_passes(m, ctx, &io, o->repeat)) &&
             (!o->profile || profile_pass(m, ctx, &io)))
      rc = 0;
  }
  for (size_t i = 0; i < MAX_IO; i++) {
    clf_array_free(&io.inputs[i]);
    clf_array_free(&io.results[i]);
  }
  clf_model_destroy(m);
  clf_context_destroy(ctx);
  return rc;
}

const clf_cli_command clf_cli_run_command = {
    .name = "run",
    .summary = "one forward pass of a Hugging Face model directory or a GGUF file",
    .synopsis = "MODEL --in NAME=FILE.npy ... --out NAME=FILE.npy ... [options]",
    .details =
        "Runs one forward pass of MODEL: a Hugging Face model directory (config.json +\n"
        "model.safetensors), or a GGUF file (or a directory holding one and no\n"
        "config.json).  Inputs and outputs are named as the model's forward()\n"
        "arguments and output fields (input_ids, attention_mask, token_type_ids,\n"
        "decoder_input_ids, pixel_values, ...; last_hidden_state, pooler_output,\n"
        "logits, ...).  Files are .npy: int64/int32 ids, float32 data, C order.\n"
        "--repeat N runs N more passes and prints on stderr\n"
        "  forward_ms median=X min=Y max=Z\n"
        "over those N (load and kernel builds excluded).\n",
    .options = run_options,
    .opts_size = sizeof(run_opts),
    .min_args = 1,
    .max_args = 1,
    .handler = run_main,
};

/* ---- generate ---- */

typedef struct gen_opts {
  clf_cli_strings in;
  const char *out, *prompt, *device, *weights;
  int profile;
  clf_cli_sampling s;
} gen_opts;

static const clf_cli_option gen_options[] = {
    {"--in", "NAME=FILE.npy", CLF_OPT_STRINGS, offsetof(gen_opts, in), 0, 0, 0, 2, 0,
     "input_ids (and attention_mask) from .npy files", NULL, "none: --in input_ids or --prompt is required"},
    {"--prompt", "TEXT", CLF_OPT_STRING, offsetof(gen_opts, prompt), 0, 0, 0, 0, 0,
     "text, tokenized with MODEL's tokenizer; the new text is printed as it comes", NULL,
     "none: --prompt or --in input_ids is required"},
    CLF_CLI_SAMPLING_OPTIONS(gen_opts, s, 0),
    {"--out", "sequences=FILE.npy", CLF_OPT_STRING, offsetof(gen_opts, out), 0, 0, 0, 0, 0,
     "the sequences to a .npy file (default: the text printed, or the ids without a tokenizer)"},
    CLF_CLI_OPT_DEVICE(gen_opts),
    CLF_CLI_OPT_WEIGHTS(gen_opts),
    {"--profile", NULL, CLF_OPT_FLAG, offsetof(gen_opts, profile), 0, 0, 0, 0, 0,
     "per-op device time of the generation on stderr, and per new token"},
    {NULL}};

/* The files of --in and --out; returns -1, or 2 after a usage error. */
static int gen_files(const gen_opts *o, const char **ids_file, const char **mask_file, const char **out_file) {
  const clf_cli_command *cmd = &clf_cli_generate_command;
  char name[64];
  const char *file;
  for (int i = 0; i < o->in.n; i++) {
    if (!split_pair(o->in.v[i], name, sizeof(name), &file))
      return clf_cli_usage_error(cmd, "--in takes NAME=FILE.npy, got \"%s\"", o->in.v[i]);
    if (!strcmp(name, "input_ids")) *ids_file = file;
    else if (!strcmp(name, "attention_mask")) *mask_file = file;
    else return clf_cli_usage_error(cmd, "inputs are input_ids and attention_mask, not %s", name);
  }
  if (o->out && (!split_pair(o->out, name, sizeof(name), out_file) || strcmp(name, "sequences")))
    return clf_cli_usage_error(cmd, "the output is sequences=FILE.npy, not \"%s\"", o->out);
  if (!o->prompt == !*ids_file)
    return clf_cli_usage_error(cmd, "give either --in input_ids=FILE.npy or --prompt TEXT");
  if (o->s.stop.n && !o->prompt) return clf_cli_usage_error(cmd, "--stop needs --prompt (text to look in)");
  return clf_cli_sampling_check(cmd, &o->s);
}

/* The prompt's ids as a [1, n] i64 array (with the tokenizer's special
 * tokens, as transformers' tokenizer(text) gives them: none for GPT-2, </s>
 * after a Marian source), or the --in files. */
static int gen_inputs(const char *dir, const char *prompt, const char *ids_file, const char *mask_file,
                      clf_tokenizer **tok, clf_array *ids, clf_array *mask) {
  int64_t *v = NULL;
  size_t n = 0;
  if (!prompt) {
    if (clf_npy_read(ids_file, ids) == CLF_OK && (!mask_file || clf_npy_read(mask_file, mask) == CLF_OK)) return 1;
  } else if (clf_tokenizer_load(dir, tok) == CLF_OK && clf_tokenizer_encode(*tok, prompt, 1, &v, &n) == CLF_OK) {
    snprintf(ids->name, sizeof(ids->name), "input_ids");
    ids->dtype = CLF_I64;
    ids->ndim = 2;
    ids->shape[0] = 1;
    ids->shape[1] = n;
    ids->data = v;
    return 1;
  }
  fprintf(stderr, "clformer generate: %s\n", clf_last_error(NULL));
  return 0;
}

/* Without a tokenizer: the ids, one sequence a line. */
static void print_ids(const clf_array *seq) {
  const int64_t *s = seq->data;
  for (size_t b = 0; b < seq->shape[0]; b++) {
    for (size_t t = 0; t < seq->shape[1]; t++) printf("%s%lld", t ? " " : "", (long long)s[b * seq->shape[1] + t]);
    printf("\n");
  }
}

/* Streaming text (clf_text_stream): what can no longer change is printed
 * as the tokens come; a --stop string cuts the text before it. */
typedef struct streamer {
  const char *prompt; /* printed before the first token (not before an error) */
  clf_text_stream *text;
  size_t n;
  int failed;
  size_t steps;          /* new tokens of row 0 so far */
  double t_first, t_last; /* clf_cli_now_ms() as the first and the last came */
} streamer;

/* The time of each new token of row 0: decoding's pace, apart from the
 * prompt's pass and from the process's start-up. */
static void step_time(streamer *s, size_t row) {
  if (row) return;
  const double t = clf_cli_now_ms();
  if (!s->steps++) s->t_first = t;
  s->t_last = t;
}

static int time_token(void *user, size_t row, int64_t token) {
  (void)token;
  step_time(user, row);
  return 0;
}

static void stream_write(const char *text, size_t len) {
  if (!len) return;
  clf_cli_status_line = 0;
  fwrite(text, 1, len, stdout);
  fflush(stdout);
}

static void print_prompt(streamer *s) {
  if (s->prompt) stream_write(s->prompt, strlen(s->prompt));
  s->prompt = NULL;
}

static int stream_token(void *user, size_t row, int64_t token) {
  streamer *s = user;
  const char *piece;
  size_t len;
  int stopped = 0;
  step_time(s, row);
  print_prompt(s);
  s->n++;
  if (clf_text_stream_push(s->text, token, &piece, &len, &stopped) != CLF_OK) {
    fprintf(stderr, "clformer generate: %s\n", clf_last_error(NULL));
    s->failed = 1;
    return 1;
  }
  stream_write(piece, len);
  return stopped;
}

/* The generation's ops, and per new token (a decoder-only model's sequences
 * hold the prompt, an encoder-decoder's the decoder start token). */
static int profile_tokens(clf_context *ctx, const clf_model *m, const clf_array *ids, const clf_array *seq) {
  const size_t prefix = clf_model_is_encoder_decoder(m) ? 1 : ids->shape[1];
  const size_t fresh = seq->shape[1] > prefix ? seq->shape[1] - prefix : 1;
  return clf_cli_profile_print(ctx, "generate", "new token", (double)fresh);
}

/* Whether a setting that only sampling uses was given (the table's
 * CLF_GEN_SAMPLING rows): it turns sampling on unless --greedy (or a
 * temperature of 0) says otherwise. */
static int sampling_given(const clf_cli_sampling *o) {
  clf_generate_setting g;
  for (size_t i = 0; i < CLF_GEN_SETTING_COUNT; i++)
    if (o->v[i].given && clf_generate_setting_at(i, &g) == CLF_OK && g.sampling &&
        !(i == CLF_GEN_TEMPERATURE && o->v[i].r == 0))
      return 1;
  return 0;
}

/* A setting's value as the library's field holds it: 0 (unset) when not
 * given, CLF_GENERATE_OFF for a given 0 that means "off". */
static long long given_or_off(const clf_cli_setting *v) { return !v->given ? 0 : v->i ? v->i : CLF_GENERATE_OFF; }

void clf_cli_sampling_settings(const clf_cli_sampling *o, clf_generate_options *go) {
  const clf_cli_setting *v = o->v;
  clf_generate_options_init(go);
  go->max_new_tokens = v[CLF_GEN_MAX_NEW_TOKENS].given ? (size_t)v[CLF_GEN_MAX_NEW_TOKENS].i : 0;
  go->num_beams = v[CLF_GEN_NUM_BEAMS].given ? (size_t)v[CLF_GEN_NUM_BEAMS].i : 0;
  const int temperature_0 = v[CLF_GEN_TEMPERATURE].given && v[CLF_GEN_TEMPERATURE].r == 0;
  go->do_sample = o->greedy || temperature_0 ? CLF_GENERATE_OFF : v[CLF_GEN_DO_SAMPLE].given || sampling_given(o);
  go->temperature = v[CLF_GEN_TEMPERATURE].given ? v[CLF_GEN_TEMPERATURE].r : 0;
  go->top_p = v[CLF_GEN_TOP_P].given ? v[CLF_GEN_TOP_P].r : 0;
  go->min_p = !v[CLF_GEN_MIN_P].given ? 0 : v[CLF_GEN_MIN_P].r > 0 ? v[CLF_GEN_MIN_P].r : CLF_GENERATE_OFF;
  go->repetition_penalty = v[CLF_GEN_REPETITION_PENALTY].given ? v[CLF_GEN_REPETITION_PENALTY].r : 0;
  go->top_k = (long)given_or_off(&v[CLF_GEN_TOP_K]);
  go->no_repeat_ngram_size = (long)given_or_off(&v[CLF_GEN_NO_REPEAT_NGRAM_SIZE]);
  /* The library's 0 is "a fresh seed": a seed S is its S + 1, as in Python
   * and the server, so that 0 is a seed like any other. */
  go->seed = v[CLF_GEN_SEED].given ? (uint64_t)v[CLF_GEN_SEED].i + 1 : 0;
}

int clf_cli_sampling_check(const clf_cli_command *cmd, const clf_cli_sampling *o) {
  const clf_cli_setting *v = o->v;
  if (o->greedy && v[CLF_GEN_DO_SAMPLE].given) return clf_cli_usage_error(cmd, "give --greedy or --do-sample, not both");
  if (v[CLF_GEN_TEMPERATURE].given && v[CLF_GEN_TEMPERATURE].r == 0 && v[CLF_GEN_DO_SAMPLE].given)
    return clf_cli_usage_error(cmd, "--temperature 0 is greedy decoding: give --do-sample a temperature above 0");
  for (int i = 0; i < o->stop.n; i++)
    if (!o->stop.v[i][0]) return clf_cli_usage_error(cmd, "--stop: the string is empty");
  return -1;
}

/* ---- one sequence on the engine ---- */

/* The sequence's tokens as the engine gives them, handed on to go's
 * on_token as row 0's. */
typedef struct one_seq {
  const clf_generate_options *go;
  int64_t *tok;
  size_t n, cap;
  clf_finish_reason why;
  char *error;
} one_seq;

static int one_token(void *user, uint64_t id, int64_t token) {
  one_seq *q = user;
  (void)id;
  if (q->n < q->cap) q->tok[q->n++] = token;
  return q->go->on_token ? q->go->on_token(q->go->user, 0, token) : 0;
}

static void one_done(void *user, uint64_t id, const clf_sequence_end *end) {
  one_seq *q = user;
  (void)id;
  q->why = end->why;
  if (end->error) q->error = strdup(end->error);
}

/* A decoder-only prompt of one row, one beam, a token limit and no mask
 * runs on the engine (the path the server's requests take), in a pool of
 * one sequence: *seq the prompt and the new tokens, as clf_model_generate
 * gives them.  Returns 0 when it cannot (the model's engine is refused:
 * *st CLF_OK), or 1 with *st the outcome and *msg (may be NULL) the
 * message of a failure that is not the context's. */
static int generate_on_engine(clf_model *m, const clf_array *ids, const clf_array *mask, const clf_generate_options *go,
                              clf_array *seq, clf_status *st, char **msg) {
  *st = CLF_OK, *msg = NULL;
  if (mask || ids->shape[0] != 1 || go->num_beams > 1 || !go->max_new_tokens || clf_model_is_encoder_decoder(m))
    return 0;
  clf_engine_options eo;
  clf_engine_options_init(&eo);
  eo.max_sequences = 1;
  clf_engine *e = NULL;
  if (clf_engine_create(m, &eo, &e) != CLF_OK) return 0; /* refused (rope_scaling dynamic): the one-row path */
  const size_t L = ids->shape[1];
  int64_t *all = malloc((L + go->max_new_tokens) * sizeof *all);
  one_seq q = {go, all ? all + L : NULL, 0, go->max_new_tokens, 0, NULL};
  for (size_t i = 0; all && i < L; i++)
    all[i] = ids->dtype == CLF_I32 ? ((const int32_t *)ids->data)[i] : ((const int64_t *)ids->data)[i];
  clf_engine_request r = {all, L, go, 0, one_token, one_done, &q};
  if (!all) {
    *st = CLF_E_OUT_OF_MEMORY, *msg = strdup("out of host memory");
  } else if ((*st = clf_engine_submit(e, &r, NULL)) != CLF_OK) {
    *msg = strdup(clf_last_error(NULL)); /* a submission's failure is this thread's */
  } else if ((*st = clf_engine_run(e)) == CLF_OK && q.why == CLF_FINISH_ERROR) {
    *st = CLF_E_INVALID_ARG, *msg = q.error, q.error = NULL;
  }
  clf_engine_destroy(e);
  free(q.error);
  if (*st == CLF_OK) {
    memset(seq, 0, sizeof *seq);
    snprintf(seq->name, sizeof seq->name, "sequences");
    seq->dtype = CLF_I64, seq->ndim = 2, seq->shape[0] = 1, seq->shape[1] = L + q.n;
    seq->data = all;
  } else {
    free(all);
  }
  return 1;
}

/* Generates; with a tokenizer (and one beam) the text streams to stdout as
 * it comes, the prompt first for a decoder-only model, and the speed goes
 * to stderr. */
static int gen_run(const gen_opts *o, clf_context *ctx, clf_model *m, clf_tokenizer *tok, const clf_array *ids,
                   const clf_array *mask, clf_array *seq) {
  clf_generate_options go;
  clf_cli_sampling_settings(&o->s, &go);
  streamer st = {0};
  if (tok && clf_text_stream_create(tok, o->s.stop.v, (size_t)o->s.stop.n, &st.text) != CLF_OK) {
    fprintf(stderr, "clformer generate: %s\n", clf_last_error(NULL));
    return 0;
  }
  const int streaming = tok && go.num_beams <= 1;
  if (streaming) go.on_token = stream_token, go.user = &st;
  else if (go.num_beams <= 1) go.on_token = time_token, go.user = &st;
  /* No limit given: a prompt's continuation goes on to the end of the text
   * or of the model's positions (as llama.cpp's and Ollama's do), not to
   * transformers' max_length of 20. */
  const size_t positions = clf_model_max_positions(m), prompt_len = ids->shape[1];
  const int to_the_end = !go.max_new_tokens && tok && !clf_model_is_encoder_decoder(m) && positions > prompt_len;
  if (to_the_end) go.max_new_tokens = positions - prompt_len < 32768 ? positions - prompt_len : 32768;
  if (tok && !clf_model_is_encoder_decoder(m)) st.prompt = o->prompt;
  const double t0 = clf_cli_now_ms();
  char *msg = NULL;
  clf_status rc;
  if (!generate_on_engine(m, ids, mask, &go, seq, &rc, &msg)) rc = clf_model_generate(m, ids, mask, &go, seq);
  const double ms = clf_cli_now_ms() - t0;
  if (rc != CLF_OK) {
    fflush(stdout); /* the text so far, before the error (one pipe for both keeps the order) */
    fprintf(stderr, "clformer generate: %s\n", msg ? msg : clf_last_error(ctx));
  } else if (tok && !streaming) { /* beams: the best sequence at the end */
    const size_t skip = clf_model_is_encoder_decoder(m) ? 0 : ids->shape[1];
    for (size_t t = skip; t < seq->shape[1] && !st.failed && !clf_text_stream_stopped(st.text); t++)
      stream_token(&st, 0, ((int64_t *)seq->data)[t]);
  }
  if (rc == CLF_OK && tok && !st.failed) {
    const char *rest;
    size_t len;
    print_prompt(&st); /* no new token came */
    if (clf_text_stream_finish(st.text, &rest, &len) == CLF_OK) stream_write(rest, len);
    printf("\n");
    fflush(stdout); /* the text's last line, before the speed on stderr */
    /* Decoding's pace from the first token on: the time before it (the
     * prompt's pass, and kernel builds on a cold cache) is shown apart. */
    const double first = st.steps ? st.t_first - t0 : ms, pace = st.steps > 1 ? st.t_last - st.t_first : 0;
    fprintf(stderr, "clformer generate: %zu tokens in %.3f s: the first after %.3f s (the prompt, kernel builds), "
            "then %.1f tokens/s\n", st.n, ms / 1e3, first / 1e3, pace > 0 ? (st.steps - 1) / (pace / 1e3) : 0.0);
    if (go.max_new_tokens && st.n >= go.max_new_tokens && !clf_text_stream_stopped(st.text)) {
      if (to_the_end) fprintf(stderr, "clformer generate: stopped at the end of the model's %zu positions\n", positions);
      else fprintf(stderr, "clformer generate: stopped after --max-new-tokens %zu\n", go.max_new_tokens);
    }
  }
  if (rc == CLF_OK && st.steps >= 2) /* what tools/bench.py and bench_gguf.py read */
    fprintf(stderr, "clformer generate: %zu new tokens, the first after %.1f ms, then %.3f ms a token\n", st.steps,
            st.t_first - t0, (st.t_last - st.t_first) / (double)(st.steps - 1));
  clf_text_stream_destroy(st.text);
  free(msg);
  return rc == CLF_OK && !st.failed;
}

static int generate_main(const void *opts, int argc, char **argv) {
  const gen_opts *o = opts;
  (void)argc;
  const char *ids_file = NULL, *mask_file = NULL, *out_file = NULL;
  int rc = gen_files(o, &ids_file, &mask_file, &out_file);
  if (rc >= 0) return rc;
  clf_array ids, mask, seq;
  memset(&ids, 0, sizeof(ids));
  memset(&mask, 0, sizeof(mask));
  memset(&seq, 0, sizeof(seq));
  clf_tokenizer *tok = NULL;
  clf_context *ctx = NULL;
  clf_model *m = NULL;
  rc = 1;
  if (clf_cli_open_model("generate", argv[0], o->device, o->weights, o->profile, &ctx, &m) &&
      gen_inputs(argv[0], o->prompt, ids_file, mask_file, &tok, &ids, &mask) &&
      (!o->profile || clf_cli_profile_start(ctx, "generate"))) {
    if (!gen_run(o, ctx, m, tok, &ids, mask.data ? &mask : NULL, &seq))
      rc = 1;
    else if (o->profile && !profile_tokens(ctx, m, &ids, &seq))
      rc = 1;
    else if (out_file && clf_npy_write(out_file, &seq) != CLF_OK)
      fprintf(stderr, "clformer generate: %s\n", clf_last_error(NULL));
    else
      rc = 0;
    if (rc == 0 && !tok && !out_file) print_ids(&seq);
  }
  clf_array_free(&ids);
  clf_array_free(&mask);
  clf_array_free(&seq);
  clf_tokenizer_destroy(tok);
  clf_model_destroy(m);
  clf_context_destroy(ctx);
  return rc;
}

const clf_cli_command clf_cli_generate_command = {
    .name = "generate",
    .summary = "greedy, sampled or beam decoding, streaming text",
    .synopsis = "MODEL (--in input_ids=FILE.npy [--in attention_mask=FILE.npy] | --prompt TEXT) [options]",
    .details =
        "Decoding as transformers' generate() for decoder-only models (a continuation\n"
        "of the prompt) and encoder-decoders (a translation of the source): greedy,\n"
        "sampling with --do-sample (--temperature, --top-k, --top-p, --min-p, --seed),\n"
        "or beam search with --num-beams K > 1; --repetition-penalty and\n"
        "--no-repeat-ngram-size apply to all three.  A sampling option (--temperature,\n"
        "--top-k, --top-p, --min-p) turns sampling on unless --greedy; --temperature 0 is\n"
        "greedy.  With --prompt, a decoder-only model goes on until an end-of-sequence\n"
        "token or the end of its positions unless --max-new-tokens is given, and a line\n"
        "on stderr says when a limit stopped it.  Options not given take the\n"
        "checkpoint's generation settings (generation_config.json), then transformers'\n"
        "defaults (a GGUF file has none).  MODEL is a model directory or a GGUF file.\n"
        "With --prompt the text is tokenized with the model's tokenizer (a GGUF\n"
        "file's from its metadata) and the new text is printed as the tokens come (a character split\n"
        "across tokens once whole; a word once the next space or the end shows it\n"
        "cannot change), stopping at an end-of-sequence token or before the first\n"
        "--stop string (which is not printed); the tokens per second go to stderr.\n"
        "With beams the text is printed at the end.\n",
    .options = gen_options,
    .opts_size = sizeof(gen_opts),
    .min_args = 1,
    .max_args = 1,
    .handler = generate_main,
};

/* ---- embed ---- */

typedef struct embed_opts {
  const char *device, *weights;
} embed_opts;

static const clf_cli_option embed_options[] = {CLF_CLI_OPT_DEVICE(embed_opts), CLF_CLI_OPT_WEIGHTS(embed_opts), {NULL}};

static void print_cosines(const char *type, const char *pooling, const float *emb, size_t n, size_t D, char **texts) {
  printf("cosine similarity of %s-pooled embeddings (%s, dim %zu):\n", pooling, type, D);
  for (size_t i = 0; i < n; i++) {
    printf("[%zu]", i);
    for (size_t j = 0; j < n; j++) {
      double c = 0;
      for (size_t d = 0; d < D; d++) c += (double)emb[i * D + d] * emb[j * D + d];
      printf(" %7.4f", c);
    }
    printf("  %s\n", texts[i]);
  }
}

static int embed_main(const void *opts, int argc, char **argv) {
  const embed_opts *o = opts;
  const char *dir = argv[0];
  char **texts = argv + 1;
  const size_t n = (size_t)argc - 1;
  int rc = 1;
  clf_tokenizer *tok = NULL;
  clf_context *ctx = NULL;
  clf_model *m = NULL;
  clf_array emb;
  memset(&emb, 0, sizeof(emb));
  if (clf_tokenizer_load(dir, &tok) != CLF_OK) {
    fprintf(stderr, "clformer embed: %s\n", clf_last_error(NULL));
  } else if (clf_cli_open_model("embed", dir, o->device, o->weights, 0, &ctx, &m)) {
    /* the library pools (clf_model_embed), as the Python package's embed() */
    if (clf_model_embed(m, tok, (const char *const *)texts, n, &emb) != CLF_OK) {
      fprintf(stderr, "clformer embed: %s\n", clf_last_error(ctx));
    } else {
      print_cosines(clf_model_type(m), clf_model_pooling(m), emb.data, n, emb.shape[1], texts);
      rc = 0;
    }
  }
  clf_array_free(&emb);
  clf_tokenizer_destroy(tok);
  clf_model_destroy(m);
  clf_context_destroy(ctx);
  return rc;
}

const clf_cli_command clf_cli_embed_command = {
    .name = "embed",
    .summary = "cosine similarities of pooled embeddings (BERT: mean; a GGUF: its pooling_type)",
    .synopsis = "MODEL_DIR TEXT TEXT... [options]",
    .details =
        "Embeds each text with the BERT-style model in MODEL_DIR (mean of\n"
        "last_hidden_state over the tokens, as sentence-transformers does) and prints\n"
        "the matrix of cosine similarities.  At most 64 texts.\n",
    .options = embed_options,
    .opts_size = sizeof(embed_opts),
    .min_args = 2,
    .max_args = 1 + MAX_TEXTS,
    .free_text = 1,
    .handler = embed_main,
};
