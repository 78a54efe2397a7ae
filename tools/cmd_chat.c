/* cmd_chat.c - `clformer chat`: a conversation with a language model on the
 * terminal (clf_chat): each line read is a user message, the reply streams
 * to stdout as it is decoded, and the KV cache of the conversation so far is
 * kept between turns. */
#include "cli.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

typedef struct chat_opts {
  const char *device, *weights, *system, *template_budget, *template_file;
  int quiet;
  clf_cli_sampling s;
} chat_opts;

static const clf_cli_option chat_options[] = {
    {"--system", "TEXT", CLF_OPT_STRING, offsetof(chat_opts, system), 0, 0, 0, 0, 0,
     "a system message first (where the template takes one)", NULL, "none (a template may add its own)"},
    CLF_CLI_SAMPLING_OPTIONS(chat_opts, s, CLF_GEN_WHOLE), /* a reply streams: no beams */
    {"--quiet", NULL, CLF_OPT_FLAG, offsetof(chat_opts, quiet), 0, 0, 0, 0, 0,
     "no per-turn speed on stderr (default: a line after each reply)"},
    {"--chat-template", "FILE", CLF_OPT_STRING, offsetof(chat_opts, template_file), 0, 0, 0, 0, 0,
     "the chat template (Jinja) in FILE instead of the model's (for a file without one: a GGUF file may lack "
     "tokenizer.chat_template)", NULL, "the model's"},
    {"--template-budget", "steps=N,bytes=N,memory=N", CLF_OPT_STRING, offsetof(chat_opts, template_budget), 0, 0, 0,
     0, 0, "what one rendering of the chat template may cost (K, M, G suffixes; default 1000000 steps, 128M bytes, "
     "64M memory; docs/chat.md)"},
    CLF_CLI_OPT_DEVICE(chat_opts),
    CLF_CLI_OPT_WEIGHTS(chat_opts),
    {NULL}};

/* The conversation as the command line holds it: the options (which /set
 * changes), the library's conversation and the same messages as JSON, for
 * /save and for building the conversation again after /system or /load. */
typedef struct chat_state {
  chat_opts o;
  clf_context *ctx;
  clf_chat *c;
  cJSON *messages; /* [{"role": ..., "content": ...}, ...] */
  char *owned[64]; /* the strings /set and /system gave o, freed at the end */
  int n_owned;
  int leave;
} chat_state;

static int print_piece(void *user, const char *text, size_t len) {
  double *t_first = user;
  if (*t_first == 0) *t_first = clf_cli_now_ms();
  clf_cli_status_line = 0;
  fwrite(text, 1, len, stdout);
  fflush(stdout);
  return clf_cli_chat_interrupted(); /* Ctrl-C ends the reply here */
}

/* The library's conversation made again from st->messages; 1, or 0 after
 * printing why not. */
static int rebuild(chat_state *st) {
  clf_chat_clear(st->c);
  const cJSON *m;
  cJSON_ArrayForEach(m, st->messages) {
    char *json = cJSON_PrintUnformatted(m);
    const clf_status rc = json ? clf_chat_add_json(st->c, json) : CLF_E_OUT_OF_MEMORY;
    free(json);
    if (rc != CLF_OK) {
      fprintf(stderr, "clformer chat: %s\n", clf_last_error(st->ctx));
      return 0;
    }
  }
  return 1;
}

static void add_message(chat_state *st, const char *role, const char *content) {
  cJSON *m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "role", role);
  cJSON_AddStringToObject(m, "content", content);
  cJSON_AddItemToArray(st->messages, m);
}

/* One turn: the user's message, the streamed reply, the speed on stderr.
 * 1, or 0 after printing why not (the conversation is left as it was). */
static int chat_turn(chat_state *st, const char *message) {
  const chat_opts *o = &st->o;
  clf_chat_options co;
  clf_chat_options_init(&co);
  clf_cli_sampling_settings(&o->s, &co.generate);
  co.stop = o->s.stop.v, co.n_stop = (size_t)o->s.stop.n;
  double t_first = 0; /* when the reply's first text came */
  co.on_text = print_piece, co.user = &t_first;
  if (clf_chat_add(st->c, "user", message) != CLF_OK) {
    fprintf(stderr, "clformer chat: %s\n", clf_last_error(st->ctx));
    return 0;
  }
  char *reply = NULL;
  clf_chat_turn info;
  clf_cli_chat_clear_interrupt();
  const double t0 = clf_cli_now_ms();
  const clf_status rc = clf_chat_respond(st->c, &co, &reply, &info);
  const double ms = clf_cli_now_ms() - t0;
  const int stopped = clf_cli_chat_interrupted();
  clf_cli_chat_clear_interrupt();
  printf("\n");
  fflush(stdout); /* the reply's last line, before anything on stderr */
  clf_cli_status_line = 1;
  if (rc != CLF_OK) {
    fprintf(stderr, "clformer chat: %s\n", clf_last_error(st->ctx));
    clf_chat_pop(st->c); /* the message goes unanswered: the next one takes its place */
    free(reply);
    return 0;
  }
  add_message(st, "user", message);
  add_message(st, "assistant", reply);
  free(reply);
  if (stopped) fprintf(stderr, "clformer chat: stopped by Ctrl-C; the reply so far stays in the conversation\n");
  /* The pace from the first text on; the time before it (the prompt, and
   * kernel builds on a first turn) apart. */
  const double first = t_first > 0 ? t_first - t0 : ms, after = t_first > 0 ? t0 + ms - t_first : 0;
  if (!o->quiet)
    fprintf(stderr, "clformer chat: %zu tokens in %.3f s: the first text after %.3f s (the prompt, kernel builds), then "
            "%.1f tokens/s; prompt %zu tokens, %zu of them cached%s\n",
            info.new_tokens, ms / 1e3, first / 1e3, after > 0 && info.new_tokens > 1 ? (info.new_tokens - 1) / (after / 1e3) : 0.0,
            info.prompt_tokens, info.reused_tokens,
            info.finished ? "" : o->s.v[CLF_GEN_MAX_NEW_TOKENS].given ? "; stopped by --max-new-tokens" : "; stopped at the model's positions");
  return 1;
}

static const char chat_help[] =
    "  /help                 this list\n"
    "  /exit, /bye           leave (also Ctrl-D, or Ctrl-C twice at an empty prompt)\n"
    "  /reset                start the conversation again (the system message stays)\n"
    "  /system TEXT          the system message becomes TEXT; /system alone: show it\n"
    "  /save FILE            the conversation to FILE as JSON ([{\"role\": ..., \"content\": ...}, ...])\n"
    "  /load FILE            the conversation from such a file (replacing this one)\n"
    "  /set                  the decoding settings; /set NAME VALUE changes one (/set temperature 0.7,\n"
    "                        /set greedy, /set do-sample, /set max-new-tokens 200, /set seed 42, ...)\n"
    "  \"\"\"                   a message of several lines, up to a line ending in \"\"\"\n"
    "Ctrl-C during a reply stops it (the reply so far stays in the conversation).\n";

/* Whether an option row is one of the decoding settings /set may change. */
static int is_setting(const clf_cli_option *r) {
  return r->offset >= offsetof(chat_opts, s) && r->offset < offsetof(chat_opts, s) + sizeof(clf_cli_sampling);
}

static void show_settings(const chat_opts *o) {
  const clf_cli_option *rows[128];
  const int n = clf_cli_option_rows(&clf_cli_chat_command, rows, 128);
  for (int i = 0; i < n; i++) {
    const clf_cli_option *r = rows[i];
    if (!is_setting(r)) continue;
    const char *f = (const char *)o + r->offset;
    printf("  %-22s ", r->name + 2);
    if (r->setting) {
      const clf_cli_setting *v = (const clf_cli_setting *)f;
      if (!v->given) printf("(default: %s)\n", r->def_text);
      else if (r->kind == CLF_OPT_FLAG) printf("on\n");
      else if (r->kind == CLF_OPT_LONG) printf("%lld\n", v->i);
      else printf("%g\n", v->r);
    } else if (r->kind == CLF_OPT_FLAG) {
      printf("%s\n", *(const int *)f ? "on" : "off");
    } else if (r->kind == CLF_OPT_STRINGS) {
      const clf_cli_strings *l = (const clf_cli_strings *)f;
      for (int k = 0; k < l->n; k++) printf("%s\"%s\"", k ? ", " : "", l->v[k]);
      printf("%s\n", l->n ? "" : "(none)");
    } else {
      printf("\n");
    }
  }
}

static char *keep(chat_state *st, const char *s) {
  if (st->n_owned == (int)(sizeof st->owned / sizeof st->owned[0])) return NULL;
  return st->owned[st->n_owned++] = strdup(s);
}

/* /set NAME [VALUE]: one decoding setting, checked as on the command line. */
static void set_setting(chat_state *st, char *args) {
  char *name = strtok(args, " \t"), *value = strtok(NULL, "");
  if (!name) return show_settings(&st->o);
  while (value && (*value == ' ' || *value == '\t')) value++;
  char opt[64], err[512];
  snprintf(opt, sizeof opt, "--%s", name);
  chat_opts next = st->o;
  const char *v = value && *value ? keep(st, value) : NULL;
  const clf_cli_option *r = clf_cli_set_option(&clf_cli_chat_command, opt, v, &next, err, sizeof err);
  if (r && !is_setting(r)) r = NULL, snprintf(err, sizeof err, "%s is not a decoding setting", name);
  if (!r) {
    printf("/set: %s (/set lists the settings)\n", err);
    return;
  }
  if (r->offset == offsetof(chat_opts, s.greedy)) next.s.v[CLF_GEN_DO_SAMPLE].given = 0;
  if (r->offset == offsetof(chat_opts, s.v[CLF_GEN_DO_SAMPLE])) next.s.greedy = 0;
  st->o = next;
  printf("%s %s\n", name, v ? v : "on");
}

/* /system [TEXT] */
static void set_system(chat_state *st, const char *text) {
  cJSON *first = cJSON_GetArrayItem(st->messages, 0);
  const int has = first && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(first, "role")), "system");
  if (!*text) {
    printf("%s\n", has ? cJSON_GetStringValue(cJSON_GetObjectItem(first, "content")) : "(no system message)");
    return;
  }
  if (has) cJSON_DeleteItemFromArray(st->messages, 0);
  cJSON *m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "role", "system");
  cJSON_AddStringToObject(m, "content", text);
  cJSON_InsertItemInArray(st->messages, 0, m);
  st->o.system = keep(st, text);
  if (rebuild(st)) printf("system message set\n");
}

static void save(chat_state *st, const char *file) {
  char *text = cJSON_Print(st->messages);
  FILE *f = *file ? fopen(file, "w") : NULL;
  const int ok = text && f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
  if (f && fclose(f) != 0) printf("/save: cannot write %s\n", file);
  else if (ok) printf("%d messages saved to %s\n", cJSON_GetArraySize(st->messages), file);
  else printf("/save: %s\n", *file ? "cannot write the file" : "expected /save FILE");
  free(text);
}

static void load(chat_state *st, const char *file) {
  cJSON *j = *file ? clf_cli_read_json(file) : NULL, *list = cJSON_IsObject(j) ? cJSON_GetObjectItem(j, "messages") : j;
  const cJSON *m;
  int ok = cJSON_IsArray(list);
  cJSON_ArrayForEach(m, list) ok = ok && cJSON_IsString(cJSON_GetObjectItem(m, "role"));
  if (!ok) {
    printf("/load: %s\n", !*file ? "expected /load FILE"
                          : j    ? "expected a JSON list of messages, each with a \"role\""
                                 : "cannot read the file as JSON");
    cJSON_Delete(j);
    return;
  }
  cJSON *old = st->messages;
  st->messages = cJSON_Duplicate(list, 1);
  cJSON_Delete(j);
  if (rebuild(st)) {
    cJSON_Delete(old);
    printf("%d messages loaded from %s\n", cJSON_GetArraySize(st->messages), file);
  } else { /* the conversation as it was */
    cJSON_Delete(st->messages);
    st->messages = old;
    rebuild(st);
  }
}

/* A line that starts with '/': 1 when it was a command (done here). */
static int command(chat_state *st, char *line) {
  char *args = line + strcspn(line, " \t");
  if (*args) *args++ = '\0';
  while (*args == ' ' || *args == '\t') args++;
  if (!strcmp(line, "/help") || !strcmp(line, "/?")) fputs(chat_help, stdout);
  else if (!strcmp(line, "/exit") || !strcmp(line, "/bye") || !strcmp(line, "/quit")) st->leave = 1;
  else if (!strcmp(line, "/reset")) {
    cJSON *first = cJSON_DetachItemFromArray(st->messages, 0);
    cJSON_Delete(st->messages);
    st->messages = cJSON_CreateArray();
    if (first && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(first, "role")), "system"))
      cJSON_AddItemToArray(st->messages, first);
    else cJSON_Delete(first);
    return rebuild(st);
  } else if (!strcmp(line, "/system")) set_system(st, args);
  else if (!strcmp(line, "/save")) save(st, args);
  else if (!strcmp(line, "/load")) load(st, args);
  else if (!strcmp(line, "/set")) set_setting(st, args);
  else printf("unknown command %s: /help lists them (a message that starts with '/': in \"\"\" ... \"\"\")\n", line);
  fflush(stdout);
  return 1;
}

/* The conversation, one message a line (or a """ block, or a paste) until
 * the end of the input, Ctrl-D or /exit. */
static int chat_loop(chat_state *st) {
  const int terminal = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
  clf_cli_prompt *p = clf_cli_prompt_open(terminal, clf_context_cache_dir(st->ctx));
  if (!p) {
    fprintf(stderr, "clformer chat: cannot start the line editor\n");
    return 0;
  }
  if (terminal) printf("clformer chat: /help lists the commands; Ctrl-D leaves\n");
  int ok = 1, literal;
  char *msg;
  while (!st->leave && (msg = clf_cli_prompt_read(p, &literal))) {
    if (!msg[0]) ;
    else if (!literal && msg[0] == '/') {
      if (!command(st, msg)) ok = 0;
    } else if (!chat_turn(st, msg)) ok = 0;
    free(msg);
  }
  clf_cli_prompt_close(p);
  return ok;
}

/* The template in `path` (at most 1 MiB of UTF-8), parsed into *out and
 * its text into *source (malloc'd: parsed again with the tokenizer's
 * special tokens once it is loaded); 0 with the reason on stderr. */
static int load_template(const char *path, clf_chat_template **out, char **source) {
  FILE *f = fopen(path, "rb");
  char *text = NULL;
  size_t n = 0;
  int ok = 0;
  if (!f) {
    fprintf(stderr, "clformer chat: --chat-template %s: %s\n", path, strerror(errno));
    return 0;
  }
  if ((text = malloc((1u << 20) + 2)) != NULL) n = fread(text, 1, (1u << 20) + 1, f);
  if (!text || ferror(f))
    fprintf(stderr, "clformer chat: --chat-template %s: cannot read it\n", path);
  else if (n > (1u << 20))
    fprintf(stderr, "clformer chat: --chat-template %s: larger than 1 MiB\n", path);
  else if (text[n] = '\0', clf_chat_template_parse(text, out) != CLF_OK)
    fprintf(stderr, "clformer chat: --chat-template %s: %s\n", path, clf_last_error(NULL));
  else
    ok = 1, *source = text, text = NULL;
  free(text);
  fclose(f);
  return ok;
}

static int chat_main(const void *opts, int argc, char **argv) {
  chat_state st;
  memset(&st, 0, sizeof st);
  st.o = *(const chat_opts *)opts;
  (void)argc;
  int rc = clf_cli_sampling_check(&clf_cli_chat_command, &st.o.s);
  if (rc >= 0) return rc;
  clf_template_budget budget = {0, 0, 0};
  char err[200];
  if (st.o.template_budget && !clf_cli_template_budget(st.o.template_budget, &budget, err, sizeof err))
    return clf_cli_usage_error(&clf_cli_chat_command, "%s", err);
  clf_model *m = NULL;
  clf_tokenizer *tok = NULL;
  clf_chat_template *tmpl = NULL;
  char *source = NULL;
  rc = 1;
  st.messages = cJSON_CreateArray();
  if (st.o.template_file && !load_template(st.o.template_file, &tmpl, &source)) goto done; /* its errors first */
  if (st.o.system) add_message(&st, "system", st.o.system);
  if (!clf_cli_open_model("chat", argv[0], st.o.device, st.o.weights, 0, &st.ctx, &m)) goto done;
  if (clf_tokenizer_load(argv[0], &tok) != CLF_OK) {
    fprintf(stderr, "clformer chat: %s\n", clf_last_error(NULL));
    goto done;
  }
  if (tmpl) { /* again with the tokenizer's bos_token, eos_token, ...; a caller's template has its own budget */
    clf_chat_template_destroy(tmpl);
    tmpl = NULL;
    if (clf_tokenizer_chat_template_parse(tok, source, &tmpl) != CLF_OK ||
        clf_chat_template_set_budget(tmpl, &budget) != CLF_OK) {
      fprintf(stderr, "clformer chat: --chat-template %s: %s\n", st.o.template_file, clf_last_error(NULL));
      goto done;
    }
  }
  if (clf_chat_create(m, tok, tmpl, &st.c) != CLF_OK || (!tmpl && clf_chat_set_template_budget(st.c, &budget) != CLF_OK) ||
      !rebuild(&st)) {
    fprintf(stderr, "clformer chat: %s\n", clf_last_error(st.ctx));
    goto done;
  }
  rc = chat_loop(&st) ? 0 : 1;
done:
  clf_chat_destroy(st.c);
  clf_chat_template_destroy(tmpl);
  free(source);
  clf_tokenizer_destroy(tok);
  clf_model_destroy(m);
  clf_context_destroy(st.ctx);
  cJSON_Delete(st.messages);
  for (int i = 0; i < st.n_owned; i++) free(st.owned[i]);
  return rc;
}

const clf_cli_command clf_cli_chat_command = {
    .name = "chat",
    .summary = "a conversation with a language model, its chat template applied",
    .synopsis = "MODEL [--system TEXT] [options]",
    .details =
        "A conversation: each message typed is sent to the model with those before it,\n"
        "and the reply is printed as it is decoded.  On a terminal the prompt is a line\n"
        "editor (libedit: arrow keys, Ctrl-A/E, history with the up arrow, kept in the\n"
        "cache directory's chat_history); Ctrl-C stops a reply (what came stays in the\n"
        "conversation); Ctrl-D, /exit or Ctrl-C twice at an empty prompt leaves.  Text\n"
        "pasted on several lines is one message, and so are the lines between \"\"\" and a\n"
        "line ending in \"\"\".  Commands: /help, /exit (/bye), /reset, /system TEXT,\n"
        "/save FILE and /load FILE (the messages as a JSON list), /set NAME VALUE (the\n"
        "decoding options below, /set alone lists them).  Other input (a pipe) is read\n"
        "a line a message, with the same \"\"\" blocks and commands.\n"
        "The conversation is rendered with the model's chat template\n"
        "(tokenizer_config.json's chat_template, or a GGUF file's\n"
        "tokenizer.chat_template) as transformers' apply_chat_template renders it, and\n"
        "the reply decoded as `clformer generate` decodes (the checkpoint's settings,\n"
        "then the options; without --max-new-tokens a reply goes on until an end token\n"
        "or the end of the model's positions).  The KV cache of the conversation is kept between turns: a\n"
        "turn feeds only what follows the tokens already cached.  Per turn, the tokens\n"
        "per second and the prompt tokens taken from the cache go to stderr (--quiet:\n"
        "not).  Exit status 1 when a turn failed.\n",
    .options = chat_options,
    .opts_size = sizeof(chat_opts),
    .min_args = 1,
    .max_args = 1,
    .handler = chat_main,
};
