/* cli.h - the subcommands of the clformer command line, one file each group. */
#ifndef CLF_CLI_H
#define CLF_CLI_H

/* Each takes the arguments after the subcommand name and returns the exit
 * status (0 ok, 1 failure, 2 usage). */
int clf_cli_run(int argc, char **argv);
int clf_cli_generate(int argc, char **argv);
int clf_cli_embed(int argc, char **argv);
int clf_cli_classify(int argc, char **argv);
int clf_cli_reconstruct(int argc, char **argv);

#endif
