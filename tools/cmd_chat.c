/* cmd_chat.c - `clformer chat`: a conversation with a language model on the
 * terminal (clf_chat): each line read is a user message, the reply streams
 * to stdout as it is decoded, and the KV cache of the conversation so far is
 * kept between turns. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct chat_opts {
  const char *device, *weights, *system;
  int quiet;
  clf_cli_sampling s;
} chat_opts;

static const clf_cli_option chat_options[] = {
    {"--system", "TEXT", CLF_OPT_STRING, offsetof(chat_opts, system), 0, 0, 0, 0, 0,
     "a system message first (where the template takes one)"},
    CLF_CLI_SAMPLING_OPTIONS(chat_opts, s),
    {"--quiet", NULL, CLF_OPT_FLAG, offsetof(chat_opts, quiet), 0, 0, 0, 0, 0,
     "no per-turn speed on stderr"},
    CLF_CLI_OPT_DEVICE(chat_opts),
    CLF_CLI_OPT_WEIGHTS(chat_opts),
    {NULL}};

static int print_piece(void *user, const char *text, size_t len) {
  (void)user;
  fwrite(text, 1, len, stdout);
  fflush(stdout);
  return 0;
}

/* A line of stdin without its line end into *line (getline's buffer);
 * 0 at the end of the input. */
static int read_line(char **line, size_t *cap) {
  ssize_t n = getline(line, cap, stdin);
  if (n < 0) return 0;
  while (n > 0 && ((*line)[n - 1] == '\n' || (*line)[n - 1] == '\r')) (*line)[--n] = '\0';
  return 1;
}

/* One turn: the user's message, the streamed reply, the speed on stderr.
 * 1, or 0 after printing why not (the conversation is left as it was). */
static int chat_turn(const chat_opts *o, clf_context *ctx, clf_chat *c, const char *message) {
  clf_chat_options co;
  clf_chat_options_init(&co);
  clf_cli_sampling_settings(&o->s, &co.generate);
  co.stop = o->s.stop.v, co.n_stop = (size_t)o->s.stop.n;
  co.on_text = print_piece;
  if (clf_chat_add(c, "user", message) != CLF_OK) {
    fprintf(stderr, "clformer chat: %s\n", clf_last_error(ctx));
    return 0;
  }
  char *reply = NULL;
  clf_chat_turn info;
  const double t0 = clf_cli_now_ms();
  const clf_status st = clf_chat_respond(c, &co, &reply, &info);
  const double ms = clf_cli_now_ms() - t0;
  printf("\n");
  fflush(stdout); /* the reply's last line, before anything on stderr */
  free(reply);
  if (st != CLF_OK) {
    fprintf(stderr, "clformer chat: %s\n", clf_last_error(ctx));
    clf_chat_pop(c); /* the message goes unanswered: the next one takes its place */
    return 0;
  }
  if (!o->quiet)
    fprintf(stderr, "clformer chat: %zu tokens in %.3f s, %.1f tokens/s; prompt %zu tokens, %zu of them cached%s\n",
            info.new_tokens, ms / 1e3, ms > 0 ? info.new_tokens / (ms / 1e3) : 0.0, info.prompt_tokens,
            info.reused_tokens, info.finished ? "" : " (max-new-tokens reached)");
  return 1;
}

/* The conversation, one user message a line until the end of the input;
 * "/reset" starts it again. */
static int chat_loop(const chat_opts *o, clf_context *ctx, clf_chat *c) {
  const int tty = isatty(STDIN_FILENO);
  char *line = NULL;
  size_t cap = 0;
  int ok = 1;
  for (;;) {
    if (tty) fputs("> ", stdout), fflush(stdout);
    if (!read_line(&line, &cap)) break;
    if (!line[0]) continue;
    if (!strcmp(line, "/reset")) {
      clf_chat_clear(c);
      if (o->system && clf_chat_add(c, "system", o->system) != CLF_OK) ok = 0;
      continue;
    }
    if (!chat_turn(o, ctx, c, line)) ok = 0;
  }
  free(line);
  return ok;
}

static int chat_main(const void *opts, int argc, char **argv) {
  const chat_opts *o = opts;
  (void)argc;
  int rc = clf_cli_sampling_check(&clf_cli_chat_command, &o->s);
  if (rc >= 0) return rc;
  clf_context *ctx = NULL;
  clf_model *m = NULL;
  clf_tokenizer *tok = NULL;
  clf_chat *c = NULL;
  rc = 1;
  if (!clf_cli_open_model("chat", argv[0], o->device, o->weights, 0, &ctx, &m)) goto done;
  if (clf_tokenizer_load(argv[0], &tok) != CLF_OK) {
    fprintf(stderr, "clformer chat: %s\n", clf_last_error(NULL));
    goto done;
  }
  if (clf_chat_create(m, tok, NULL, &c) != CLF_OK ||
      (o->system && clf_chat_add(c, "system", o->system) != CLF_OK)) {
    fprintf(stderr, "clformer chat: %s\n", clf_last_error(ctx));
    goto done;
  }
  rc = chat_loop(o, ctx, c) ? 0 : 1;
done:
  clf_chat_destroy(c);
  clf_tokenizer_destroy(tok);
  clf_model_destroy(m);
  clf_context_destroy(ctx);
  return rc;
}

const clf_cli_command clf_cli_chat_command = {
    .name = "chat",
    .summary = "a conversation with a language model, its chat template applied",
    .synopsis = "MODEL [--system TEXT] [options]",
    .details =
        "Each line of standard input is a user message; the model's reply is printed as\n"
        "it is decoded, then a new line.  The conversation is rendered with the model's\n"
        "chat template (tokenizer_config.json's chat_template, or a GGUF file's\n"
        "tokenizer.chat_template) as transformers' apply_chat_template renders it, and\n"
        "the reply decoded as `clformer generate` decodes (the checkpoint's settings,\n"
        "then the options; --max-new-tokens defaults to 512 here, or what the model's\n"
        "positions leave).  The KV cache of the conversation is kept between turns: a\n"
        "turn feeds only what follows the tokens already cached.  \"/reset\" on a line\n"
        "of its own starts the conversation again.  Per turn, the tokens per second and\n"
        "the prompt tokens taken from the cache go to stderr (--quiet: not).  Exit\n"
        "status 1 when a turn failed.\n",
    .options = chat_options,
    .opts_size = sizeof(chat_opts),
    .min_args = 1,
    .max_args = 1,
    .handler = chat_main,
};
