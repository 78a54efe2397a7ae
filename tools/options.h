/* options.h - the clformer command line as a table: each subcommand is one
 * clf_cli_command row (name, summary, synopsis, options, handler), its
 * options are rows too, and one parser (options.c) reads every command's
 * arguments, checks numbers against their stated ranges and writes the usage
 * texts, so that errors read the same everywhere:
 *   clformer run: --repeat: expected an integer from 0 to 100000, got "x"
 */
#ifndef CLF_CLI_OPTIONS_H
#define CLF_CLI_OPTIONS_H

#include <stddef.h>
#include <stdio.h>
#include "clformer.h"

typedef enum {
  CLF_OPT_FLAG,    /* int, set to 1 */
  CLF_OPT_STRING,  /* const char *, the argument as given (borrowed from argv) */
  CLF_OPT_LONG,    /* long, an integer within [min, max] */
  CLF_OPT_DOUBLE,  /* double, a number greater than min and at most max */
  CLF_OPT_STRINGS, /* clf_cli_strings: the option repeated, up to `count` times */
  CLF_OPT_SIZES,   /* clf_cli_sizes: "N[,N...]", up to `count` integers within [min, max] */
  CLF_OPT_SETTINGS, /* clf_cli_sampling: the library's generation settings, one option each
                     * (clf_generate_setting_at; `count`: the CLF_GEN_ flags of those left out) */
} clf_cli_opt_kind;

enum { CLF_CLI_MAX_LIST = 64 };

typedef struct clf_cli_command clf_cli_command;

typedef struct clf_cli_strings {
  const char *v[CLF_CLI_MAX_LIST];
  int n;
} clf_cli_strings;

typedef struct clf_cli_sizes {
  size_t v[CLF_CLI_MAX_LIST];
  int n;
} clf_cli_sizes;

/* One option of one command.  `offset` places its value in the command's
 * options struct; `def` is the starting value of a number (shown in the help
 * when not 0 and within the range: a def below min marks "not given");
 * `required` makes the command refuse to run without it. */
typedef struct clf_cli_option {
  const char *name;    /* "--repeat"; NULL ends a table */
  const char *metavar; /* "N", or NULL for a flag */
  clf_cli_opt_kind kind;
  size_t offset;
  double min, max;
  double def;
  int count; /* CLF_OPT_STRINGS, CLF_OPT_SIZES: at most this many values; CLF_OPT_DOUBLE: 1 when min is allowed */
  int required;
  const char *help;
  void (*values)(char *buf, size_t len); /* a string option: writes the values it takes ("a, b"), or NULL */
  const char *def_text;                  /* the default in words, for the help ("the checkpoint's, else 50"), or NULL */
  /* A library generation setting's row (CLF_OPT_SETTINGS made it): the
   * field at offset is a clf_cli_setting, kind LONG, DOUBLE or FLAG. */
  const clf_generate_setting *setting;
} clf_cli_option;

/* One generation setting as the command line took it. */
typedef struct clf_cli_setting {
  int given;
  long long i; /* CLF_GEN_INT, CLF_GEN_BOOL (1) */
  double r;    /* CLF_GEN_REAL */
} clf_cli_setting;

/* The decoding options generate and chat share: the library's settings
 * (v[CLF_GEN_TOP_K] ...), --greedy (do_sample off, spelled as a flag) and
 * --stop. */
typedef struct clf_cli_sampling {
  clf_cli_setting v[CLF_GEN_SETTING_COUNT];
  int greedy;
  clf_cli_strings stop;
} clf_cli_sampling;

/* Their rows in a command's option table, for the clf_cli_sampling field
 * `field` of the options struct `type`, less the settings whose CLF_GEN_
 * flags are in `leave_out` (chat: CLF_GEN_WHOLE, no beams). */
#define CLF_CLI_SAMPLING_OPTIONS(type, field, leave_out)                                                  \
  {"--settings", NULL, CLF_OPT_SETTINGS, offsetof(type, field), 0, 0, 0, leave_out, 0, NULL},              \
  {"--greedy", NULL, CLF_OPT_FLAG, offsetof(type, field.greedy), 0, 0, 0, 0, 0,                            \
   "no sampling (do_sample off), even where the checkpoint's generation_config.json samples or a sampling " \
   "option is given"},                                                                                    \
  {"--stop", "STRING", CLF_OPT_STRINGS, offsetof(type, field.stop), 0, 0, 0, 8, 0,                         \
   "stop where the new text first contains STRING (not printed)", NULL, "none"}

/* The rows of cmd's table with each CLF_OPT_SETTINGS row spelled out as
 * one row per setting ("--top-k"), up to max into rows; returns how many. */
int clf_cli_option_rows(const clf_cli_command *cmd, const clf_cli_option **rows, int max);

/* --device S, the same on every command that opens a context. */
#define CLF_CLI_OPT_DEVICE(type)                                                                          \
  {"--device", "S", CLF_OPT_STRING, offsetof(type, device), 0, 0, 0, 0, 0,                                \
   "the OpenCL device: \"P:D\" or part of its platform/device name", NULL,                                \
   "$CLFORMER_DEVICE, else the first GPU, else the first device"}

/* The weight types --weights takes, as the library lists them
 * (clf_dtype_at's weight targets): "f32, f16, q8, q4, q4k, q6k, stored". */
void clf_cli_weight_types(char *buf, size_t len);

/* --weights T, the same on every command that loads a model. */
#define CLF_CLI_OPT_WEIGHTS(type)                                                                         \
  {"--weights", "T", CLF_OPT_STRING, offsetof(type, weights), 0, 0, 0, 0, 0,                              \
   "storage of the linear layers' weights: stored (default: a GGUF file's blocks as they are, else f32) "   \
   "or a type converted at load (q4k and q6k: llama.cpp's Q4_K and Q6_K, a layer whose width is not a "     \
   "multiple of 256 in Q5_0 and Q8_0)",                                                                   \
   clf_cli_weight_types}

/* One subcommand.  The parser fills a zeroed struct of `opts_size` bytes from
 * `options` and gives the handler that struct and the positional arguments
 * (between min_args and max_args of them; max_args -1: no limit). */
struct clf_cli_command {
  const char *name;
  const char *summary;  /* one line, for `clformer --help` */
  const char *synopsis; /* what follows "clformer NAME" in the usage line */
  const char *details;  /* paragraphs for `clformer NAME --help`, or NULL */
  const clf_cli_option *options;
  size_t opts_size;
  int min_args, max_args;
  int free_text; /* arguments starting with '-' that name no option are positional */
  int (*handler)(const void *opts, int argc, char **argv);
};

/* Parses argv (the arguments after the command's name) into opts (opts_size
 * bytes) and collects the positional ones into pos (room for argc) and
 * *npos.  Returns -1 when the command should run; otherwise the exit status:
 * 0 after printing the help (--help, -h), 2 after printing a usage error on
 * stderr naming the option and what it expected. */
int clf_cli_parse(const clf_cli_command *cmd, int argc, char **argv, void *opts, char **pos, int *npos);

/* One option of cmd's table set in opts (already filled) from `value`
 * (NULL for a flag), as on the command line; the option's row, or NULL with
 * what was wrong in err ("--top-p: expected a number ..."). */
const clf_cli_option *clf_cli_set_option(const clf_cli_command *cmd, const char *name, const char *value, void *opts,
                                         char *err, size_t elen);

/* --template-budget's "steps=N,bytes=N,memory=N" (any of them; N with an
 * optional K, M or G: powers of 1024) into *b, what is left out 0 (the
 * library's default); 1, or 0 with what was wrong in err. */
int clf_cli_template_budget(const char *s, clf_template_budget *b, char *err, size_t elen);

/* `clformer NAME --help`: usage line, details, options with ranges. */
void clf_cli_print_help(const clf_cli_command *cmd, FILE *f);

/* "clformer NAME: " + the message + "\n" on stderr, then the usage line and
 * a pointer to --help; returns 2, the usage exit status. */
int clf_cli_usage_error(const clf_cli_command *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
