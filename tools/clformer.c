/* clformer.c - the clformer command line: the table of subcommands, from
 * which `clformer --help` is written and by which arguments are dispatched
 * (parsing in options.c, the commands in cmd_*.c), and `clformer devices`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "clformer.h"

static const char *type_name(cl_device_type t) {
  if (t & CL_DEVICE_TYPE_GPU) return "GPU";
  if (t & CL_DEVICE_TYPE_CPU) return "CPU";
  if (t & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
  return "other";
}

static int cmd_devices(const void *opts, int argc, char **argv) {
  (void)opts; (void)argc; (void)argv;
  clf_device_desc devs[64], def;
  size_t n = 0;
  clf_status st = clf_list_devices(devs, 64, &n);
  if (st != CLF_OK) {
    fprintf(stderr, "clformer: %s\n", clf_last_error(NULL));
    return 1;
  }
  int have_def = clf_select_device(getenv("CLFORMER_DEVICE"), &def) == CLF_OK;
  printf("%zu OpenCL device%s:\n", n, n == 1 ? "" : "s");
  for (size_t i = 0; i < n && i < 64; i++) {
    int is_def = have_def && def.device == devs[i].device;
    printf(" %c %d:%d  %-11s %s / %s (driver %s, %s)\n", is_def ? '*' : ' ', devs[i].platform_index,
           devs[i].device_index, type_name(devs[i].type), devs[i].platform_name, devs[i].device_name,
           devs[i].driver_version, devs[i].device_version);
  }
  printf("(* = the default: CLFORMER_DEVICE, else the first GPU, else the first device)\n");
  return 0;
}

static const clf_cli_option devices_options[] = {{NULL}};

static const clf_cli_command devices_command = {
    .name = "devices",
    .summary = "list OpenCL platforms and devices",
    .synopsis = "",
    .details = "Lists every OpenCL platform and device with the \"P:D\" indices --device takes;\n"
               "the default device is marked with *.\n",
    .options = devices_options,
    .opts_size = 1,
    .min_args = 0,
    .max_args = 0,
    .handler = cmd_devices,
};

/* Every subcommand, in the order `clformer --help` lists them. */
static const clf_cli_command *const commands[] = {
    &devices_command,          &clf_cli_run_command,   &clf_cli_generate_command, &clf_cli_embed_command,
    &clf_cli_classify_command, &clf_cli_fill_mask_command, &clf_cli_reconstruct_command, &clf_cli_probe_command, &clf_cli_matrix_command,
};
enum { N_COMMANDS = sizeof(commands) / sizeof(commands[0]) };

static void usage(FILE *f) {
  fprintf(f, "usage: clformer COMMAND [options]   (clformer COMMAND --help for its options)\n");
  for (int i = 0; i < N_COMMANDS; i++)
    fprintf(f, "  %s%s%s\n      %s\n", commands[i]->name, *commands[i]->synopsis ? " " : "", commands[i]->synopsis,
            commands[i]->summary);
  fprintf(f, "A device S is \"P:D\" (indices) or part of its platform/device name;\n"
             "the default is $CLFORMER_DEVICE, else the first GPU, else the first device.\n");
}

static const clf_cli_command *find_command(const char *name) {
  for (int i = 0; i < N_COMMANDS; i++)
    if (!strcmp(commands[i]->name, name)) return commands[i];
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const clf_cli_command *cmd = find_command(argv[1]);
  if (!cmd) {
    fprintf(stderr, "clformer: unknown command %s\n", argv[1]);
    usage(stderr);
    return 2;
  }
  void *opts = calloc(1, cmd->opts_size);
  char **pos = calloc((size_t)argc, sizeof(char *));
  int npos = 0, rc = 1;
  if (!opts || !pos) fprintf(stderr, "clformer: out of memory\n");
  else if ((rc = clf_cli_parse(cmd, argc - 2, argv + 2, opts, pos, &npos)) < 0)
    rc = cmd->handler(opts, npos, pos);
  free(opts);
  free(pos);
  return rc;
}
