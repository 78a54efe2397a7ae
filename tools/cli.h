/* cli.h - the subcommands of the clformer command line, one file each group. */
#ifndef CLF_CLI_H
#define CLF_CLI_H

#include "clformer.h"

/* Each takes the arguments after the subcommand name and returns the exit
 * status (0 ok, 1 failure, 2 usage). */
int clf_cli_run(int argc, char **argv);
int clf_cli_generate(int argc, char **argv);
int clf_cli_embed(int argc, char **argv);
int clf_cli_classify(int argc, char **argv);
int clf_cli_reconstruct(int argc, char **argv);
int clf_cli_probe(int argc, char **argv);
int clf_cli_matrix(int argc, char **argv);

/* A context on `device` (NULL: the default), or NULL after printing why
 * (cmd_model.c). */
clf_context *clf_cli_open_context(const char *device);

/* An f32 tensor of ctx with uniform values in [-1, 1) from a fixed seed
 * (clformer.c; bench and probe use it). */
clf_status clf_cli_random_tensor(clf_context *ctx, int ndim, const size_t *shape, clf_tensor **t);

/* probe_props.c, for cmd_probe.c: the property table of one device, printed
 * when `human`, added to `dev` (a cJSON object) when not NULL. */
struct cJSON;
void clf_probe_properties(cl_platform_id platform, cl_device_id device, int human, struct cJSON *dev);

#endif
