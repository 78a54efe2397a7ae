/* cli.h - the subcommands of the clformer command line, one file each group,
 * as rows of the command table in clformer.c (options.h describes a row). */
#ifndef CLF_CLI_H
#define CLF_CLI_H

#include "clformer.h"
#include "options.h"

extern const clf_cli_command clf_cli_run_command;         /* cmd_model.c */
extern const clf_cli_command clf_cli_generate_command;    /* cmd_model.c */
extern const clf_cli_command clf_cli_chat_command;        /* cmd_chat.c */
extern const clf_cli_command clf_cli_batch_command;       /* cmd_batch.c */
extern const clf_cli_command clf_cli_embed_command;       /* cmd_model.c */
extern const clf_cli_command clf_cli_classify_command;    /* cmd_vision.c */
extern const clf_cli_command clf_cli_reconstruct_command; /* cmd_vision.c */
extern const clf_cli_command clf_cli_fill_mask_command;   /* cmd_text.c */
extern const clf_cli_command clf_cli_tokenize_command;    /* cmd_text.c */
/* cmd_text.c, for classify: each of the n texts classified alone by the
 * text sequence classifier in dir, its top K labels printed by `print`
 * (p: the softmax; top: label ids, most probable first); 0, or 1 after
 * saying why. */
int clf_cli_classify_text(const char *dir, char **texts, size_t n, long top, const char *device, const char *weights,
                          void (*print)(const char *what, const double *p, const size_t *top, size_t k,
                                        const clf_model *m));
extern const clf_cli_command clf_cli_probe_command;       /* cmd_probe.c */
extern const clf_cli_command clf_cli_matrix_command;      /* cmd_matrix.c */

/* The options as clf_generate_options (max_new_tokens, sampling, seed). */
void clf_cli_sampling_settings(const clf_cli_sampling *o, clf_generate_options *go);
/* Usage errors among them: -1 when none, else 2 after printing it. */
int clf_cli_sampling_check(const clf_cli_command *cmd, const clf_cli_sampling *o);

/* status.c: the status line of long work on a terminal's stderr, redrawn
 * in place and erased when done; nothing when stderr is not a terminal.
 * 1 while stdout's line is empty, so that the status line may be drawn
 * and erased; a command streaming text sets it 0, and 1 again after a line
 * end (cmd_model.c, cmd_chat.c). */
extern int clf_cli_status_line;
/* On a terminal (stderr), o's progress draws kernel builds on the status
 * line: "clformer: building kernel program attention (3)", or after the
 * step of clf_cli_status_begin when one is shown. */
void clf_cli_show_builds(clf_context_options *o);
/* "clformer probe: memory bandwidth (3 of 11)" on the status line until
 * the next begin or clf_cli_status_end (which erases it); `cmd` and `what`
 * are copied. */
void clf_cli_status_begin(const char *cmd, const char *what, int n, int total);
void clf_cli_status_end(void);
/* stdout's held text out (fflush) below the status line: the line erased
 * first and drawn again after, so that the two never share a line. */
void clf_cli_status_flush_stdout(void);
/* A line of its own on stderr while a status line may be shown: the
 * status line erased, the line, the status line drawn again. */
void clf_cli_status_note(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* A context on `device` (NULL: the default), or NULL after printing why
 * (cmd_model.c); on a terminal, kernel builds draw a status line. */
clf_context *clf_cli_open_context(const char *device);
/* A context on `device` and the model in `dir`; returns 0 after printing why
 * not ("clformer CMD: ..."), leaving what was made for the caller to free. */
int clf_cli_open_model(const char *cmd, const char *dir, const char *device, const char *weights, int profile,
                       clf_context **ctx, clf_model **m);
/* --profile: starts recording, or prints why not (0); then prints the ops
 * recorded (count, device ms, share) and the device ms and launches per
 * `per` (dividing by units) on stderr, or why not (0). */
int clf_cli_profile_start(clf_context *ctx, const char *cmd);
int clf_cli_profile_print(clf_context *ctx, const char *cmd, const char *per, double units);

/* icd.c: the OpenCL implementations of this machine, each an ICD library
 * that a process may load alone (OCL_ICD_VENDORS naming its ICD file). */
typedef struct clf_cli_impl {
  char name[64];      /* the ICD file's name less ".icd": "pocl", "rusticl", "intel-cpu", "oclgrind" */
  char icd[4096];     /* the ICD file */
  char lib[4096];     /* the library it names */
  const char *env[2]; /* KEY=VALUE its processes get unless the user set KEY */
  int n_env;
  int is_default;     /* registered where the ICD loader looks without OCL_ICD_VENDORS */
} clf_cli_impl;
/* Whether `needle` is in `hay`, ignoring case. */
int clf_cli_contains_nocase(const char *hay, const char *needle);
/* clformer's own prefix for OpenCL implementations (tools/install-opencl.sh):
 * $CLFORMER_OPENCL_PREFIX, else ${XDG_DATA_HOME:-$HOME/.local/share}/clformer/opencl. */
void clf_cli_opencl_prefix(char *buf, size_t len);
/* Up to max implementations: the registered ones (OCL_ICD_VENDORS, a file
 * or a directory, else /etc/OpenCL/vendors), then PREFIX/vendors/NAME.icd, then
 * Oclgrind when registered nowhere (its ICD file in a temporary directory,
 * written to tmp_dir, "" when none: clf_cli_remove_icd_dir removes it). */
int clf_cli_find_impls(clf_cli_impl *impls, int max, char *tmp_dir, size_t len);
void clf_cli_remove_icd_dir(const char *dir);
/* The variables a process of `im` gets (OCL_ICD_VENDORS, written into
 * vendors, then im->env less what the user set) into set; returns how many. */
int clf_cli_impl_env(const clf_cli_impl *im, char *vendors, size_t vlen, char **set, int max);
/* For a command's --device S (before the first OpenCL call): when S names
 * exactly one implementation that is not loaded by default ("rusticl",
 * "intel"), this process loads that one alone.  Nothing when the user set
 * OCL_ICD_VENDORS or S is "P:D". */
void clf_cli_route_device(const char *selector);
/* The environment for a child: ours with `set` (KEY=VALUE) in place, and
 * without the variables of `set` that are a bare KEY. */
char **clf_cli_child_env(char *const *set, int n_set);
/* How a child ended. */
typedef struct clf_cli_exit {
  int code, signal, timed_out;
  double seconds;
} clf_cli_exit;
/* Runs argv[0] with env, stdin from /dev/null, stdout and stderr to `out`,
 * its process group killed after timeout_s; 0, or -1 (errno) when it could
 * not start. */
int clf_cli_spawn(char *const *argv, char **env, const char *out, long timeout_s, clf_cli_exit *ex);
/* The same in two steps, for several children at once: start (0, or -1
 * with errno), then poll until it returns 1 with ch->ex filled (a child
 * past its timeout is killed by the poll that finds it so). */
typedef struct clf_cli_child {
  int pid;
  double t0;
  long timeout_s;
  clf_cli_exit ex;
} clf_cli_child;
int clf_cli_start(char *const *argv, char **env, const char *out, long timeout_s, clf_cli_child *ch);
int clf_cli_poll(clf_cli_child *ch);
const char *clf_cli_signal_name(int sig);

/* chat_prompt.c, for cmd_chat.c: where the messages come from.  On a
 * terminal (terminal 1) a line editor with its history in cache_dir/chat_history
 * (cache_dir NULL: none kept) and Ctrl-C caught; else lines of stdin. */
typedef struct clf_cli_prompt clf_cli_prompt;
clf_cli_prompt *clf_cli_prompt_open(int terminal, const char *cache_dir);
/* The next message (malloc'd): a line, a `"""` block of lines or a paste of
 * several lines (*literal 1: never a /command).  NULL at the end: Ctrl-D, the
 * end of stdin, or a second Ctrl-C at an empty prompt. */
char *clf_cli_prompt_read(clf_cli_prompt *p, int *literal);
void clf_cli_prompt_close(clf_cli_prompt *p);
/* Whether Ctrl-C was pressed since the last clear (a reply checks it). */
int clf_cli_chat_interrupted(void);
void clf_cli_chat_clear_interrupt(void);

/* timing.c: the monotonic clock in milliseconds, and run times sorted in
 * place (ascending) for their median and range. */
double clf_cli_now_ms(void);
void clf_cli_sort_times(double *t, size_t n);

/* probe_props.c, for cmd_probe.c: the property table of one device, printed
 * when `human`, added to `dev` (a cJSON object) when not NULL. */
struct cJSON;
/* The JSON file at path parsed (cJSON_Delete it), or NULL when it cannot be
 * read or parsed. */
struct cJSON *clf_cli_read_json(const char *path);
void clf_probe_properties(cl_platform_id platform, cl_device_id device, int human, struct cJSON *dev);

/* probe_measure.c, for cmd_probe.c: the Measured and "Beside a baseline"
 * sections of one device (ctx with profiling on; selector names its device
 * for the build measurement's own contexts), `runs` timed runs each, fewer
 * shapes when `quick`; printed when `human`, added to `dev` (a cJSON object)
 * as "measured" when not NULL. */
void clf_probe_measured(clf_context *ctx, const char *selector, int runs, int quick, int human, struct cJSON *dev);
/* The steps of clf_probe_measured, each announced by clf_probe_section. */
enum { CLF_PROBE_MEASURE_SECTIONS = 8 };
/* cmd_probe.c: the next section of a device's probe begins ("memory
 * bandwidth"): on a terminal, the status line says which, n of N. */
void clf_probe_section(const char *what);
/* The context's last error (NULL: the thread's) as one line, in a static
 * buffer that the next call overwrites. */
const char *clf_probe_error(clf_context *ctx, clf_status st);

#endif
