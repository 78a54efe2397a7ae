/* cli.h - the subcommands of the clformer command line, one file each group,
 * as rows of the command table in clformer.c (options.h describes a row). */
#ifndef CLF_CLI_H
#define CLF_CLI_H

#include "clformer.h"
#include "options.h"

extern const clf_cli_command clf_cli_run_command;         /* cmd_model.c */
extern const clf_cli_command clf_cli_generate_command;    /* cmd_model.c */
extern const clf_cli_command clf_cli_embed_command;       /* cmd_model.c */
extern const clf_cli_command clf_cli_classify_command;    /* cmd_vision.c */
extern const clf_cli_command clf_cli_reconstruct_command; /* cmd_vision.c */
extern const clf_cli_command clf_cli_fill_mask_command;   /* cmd_text.c */
/* cmd_text.c, for classify: each of the n texts classified alone by the
 * text sequence classifier in dir, its top K labels printed by `print`
 * (p: the softmax; top: label ids, most probable first); 0, or 1 after
 * saying why. */
int clf_cli_classify_text(const char *dir, char **texts, size_t n, long top, const char *device, const char *weights,
                          void (*print)(const char *what, const double *p, const size_t *top, size_t k,
                                        const clf_model *m));
extern const clf_cli_command clf_cli_probe_command;       /* cmd_probe.c */
extern const clf_cli_command clf_cli_matrix_command;      /* cmd_matrix.c */

/* A context on `device` (NULL: the default), or NULL after printing why
 * (cmd_model.c). */
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

/* matrix_icd.c, for cmd_matrix.c: whether `needle` is in `hay`, ignoring
 * case; POCL_DEVICES and OCL_ICD_VENDORS set so that PoCL's basic device and
 * an installed Oclgrind are listed (before the first OpenCL call), with the
 * temporary directory to remove written to icd_dir ("" when none); returns
 * 0, or -1 after saying why.  clf_cli_remove_icd_dir removes it. */
int clf_cli_contains_nocase(const char *hay, const char *needle);
int clf_cli_expose_devices(char *icd_dir, size_t len);
void clf_cli_remove_icd_dir(const char *dir);

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
/* The context's last error (NULL: the thread's) as one line, in a static
 * buffer that the next call overwrites. */
const char *clf_probe_error(clf_context *ctx, clf_status st);

#endif
