/* clformer.c - the clformer command line: the table of subcommands, from
 * which `clformer --help` is written and by which arguments are dispatched
 * (parsing in options.c, the commands in cmd_*.c), and `clformer devices`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <stddef.h>
#include <unistd.h>

#include "cli.h"
#include "clformer.h"

static const char *type_name(cl_device_type t) {
  if (t & CL_DEVICE_TYPE_GPU) return "GPU";
  if (t & CL_DEVICE_TYPE_CPU) return "CPU";
  if (t & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
  return "other";
}

/* A device's string property whole, into buf (else `cut`, the
 * clf_device_desc copy); buf. */
static const char *whole(cl_device_id d, cl_device_info param, const char *cut, char *buf, size_t len) {
  if (clGetDeviceInfo(d, param, len, buf, NULL) != CL_SUCCESS) snprintf(buf, len, "%s", cut);
  return buf;
}

typedef struct devices_opts {
  int json;
} devices_opts;

/* The implementations not loaded by default (tools/install-opencl.sh's,
 * Oclgrind), each listed by a child process that loads it alone. */
static void list_other_impls(void) {
  clf_cli_impl v[16];
  char tmp[4096], exe[4096], out[4096 + 32], vendors[4096 + 32];
  int n = clf_cli_find_impls(v, 16, tmp, sizeof tmp), shown = 0;
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  const char *tdir = getenv("TMPDIR");
  for (int i = 0; i < n && len > 0 && !getenv("OCL_ICD_VENDORS"); i++) {
    if (v[i].is_default) continue;
    exe[len] = 0;
    snprintf(out, sizeof out, "%s/clformer-devices-%d.json", tdir && *tdir ? tdir : "/tmp", (int)getpid());
    char *set[4];
    int ns = clf_cli_impl_env(&v[i], vendors, sizeof vendors, set, 4);
    char **env = clf_cli_child_env(set, ns);
    char *argv[] = {exe, "devices", "--json", NULL};
    clf_cli_exit ex;
    int started = env && clf_cli_spawn(argv, env, out, 60, &ex) == 0;
    free(env);
    cJSON *j = started && !ex.signal && !ex.code ? clf_cli_read_json(out) : NULL;
    unlink(out);
    if (!shown++) printf("Not loaded by default (clformer --device NAME loads one alone):\n");
    const cJSON *d;
    int k = 0;
    cJSON_ArrayForEach(d, cJSON_GetObjectItem(j, "devices")) {
      printf("   %-9s %s / %s (driver %s)\n", k++ ? "" : v[i].name,
             cJSON_GetStringValue(cJSON_GetObjectItem(d, "platform")),
             cJSON_GetStringValue(cJSON_GetObjectItem(d, "device")),
             cJSON_GetStringValue(cJSON_GetObjectItem(d, "driver")));
    }
    if (!j)
      printf("   %-9s %s: %s\n", v[i].name, v[i].icd,
             !started ? "cannot list its devices" : ex.signal ? clf_cli_signal_name(ex.signal) : "no devices");
    cJSON_Delete(j);
  }
  clf_cli_remove_icd_dir(tmp);
}

/* Whether the ICD loader finds a platform at all. */
static int has_platform(void) {
  cl_uint n = 0;
  return clGetPlatformIDs(0, NULL, &n) == CL_SUCCESS && n > 0;
}

static int cmd_devices(const void *opts, int argc, char **argv) {
  (void)argc; (void)argv;
  const devices_opts *o = opts;
  clf_device_desc devs[64], def;
  static char drivers[64][512], versions[64][512];
  size_t n = 0;
  clf_status st = clf_list_devices(devs, 64, &n);
  /* With --json, platforms that have no device here are an empty list, not
   * an error: `matrix` then makes no column for the implementation (Mesa's
   * Clover without its GPUs, which Debian's mesa-opencl-icd registers
   * beside rusticl).  No platform at all is still an error. */
  if (st == CLF_E_NO_DEVICE && o->json && has_platform()) {
    n = 0;
    st = CLF_OK;
  }
  if (st != CLF_OK) {
    fprintf(stderr, "clformer: %s\n", clf_last_error(NULL));
    return 1;
  }
  if (o->json) {
    cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "devices");
    for (size_t i = 0; i < n && i < 64; i++) {
      cJSON *d = cJSON_CreateObject();
      cJSON_AddNumberToObject(d, "platform_index", devs[i].platform_index);
      cJSON_AddNumberToObject(d, "device_index", devs[i].device_index);
      cJSON_AddStringToObject(d, "platform", devs[i].platform_name);
      cJSON_AddStringToObject(d, "device", devs[i].device_name);
      char full[512];
      cJSON_AddStringToObject(d, "driver", whole(devs[i].device, CL_DRIVER_VERSION, devs[i].driver_version, full,
                                                 sizeof full));
      cJSON_AddStringToObject(d, "opencl", whole(devs[i].device, CL_DEVICE_VERSION, devs[i].device_version, full,
                                                 sizeof full));
      cJSON_AddStringToObject(d, "type", type_name(devs[i].type));
      cJSON_AddItemToArray(arr, d);
    }
    char *text = cJSON_PrintUnformatted(root);
    int ok = text && puts(text) >= 0;
    free(text);
    cJSON_Delete(root);
    return ok ? 0 : 1;
  }
  int have_def = clf_select_device(getenv("CLFORMER_DEVICE"), &def) == CLF_OK;
  /* The whole strings: clf_device_desc keeps 63 bytes of each
   * ("OpenCL 3.0 PoCL HSTR: ...skylake-avx51"). */
  for (size_t i = 0; i < n && i < 64; i++) {
    whole(devs[i].device, CL_DRIVER_VERSION, devs[i].driver_version, drivers[i], sizeof drivers[i]);
    whole(devs[i].device, CL_DEVICE_VERSION, devs[i].device_version, versions[i], sizeof versions[i]);
  }
  printf("%zu OpenCL device%s:\n", n, n == 1 ? "" : "s");
  for (size_t i = 0; i < n && i < 64; i++) {
    int is_def = have_def && def.device == devs[i].device;
    printf(" %c %d:%d  %-11s %s / %s (driver %s, %s)\n", is_def ? '*' : ' ', devs[i].platform_index,
           devs[i].device_index, type_name(devs[i].type), devs[i].platform_name, devs[i].device_name,
           drivers[i], versions[i]);
  }
  printf("(* = the default: CLFORMER_DEVICE, else the first GPU, else the first device)\n");
  fflush(stdout);
  list_other_impls();
  return 0;
}

static const clf_cli_option devices_options[] = {
    {"--json", NULL, CLF_OPT_FLAG, offsetof(devices_opts, json), 0, 0, 0, 0, 0,
     "the devices as JSON ({\"devices\": [...]}), those loaded by default only"},
    {NULL}};

static const clf_cli_command devices_command = {
    .name = "devices",
    .summary = "list OpenCL platforms and devices",
    .synopsis = "[--json]",
    .details = "Lists every OpenCL platform and device with the \"P:D\" indices --device takes;\n"
               "the default device is marked with *.  Then the implementations the ICD loader does\n"
               "not load by default (tools/install-opencl.sh's prefix, an unregistered Oclgrind),\n"
               "each listed by a process that loads it alone: --device NAME selects one.\n",
    .options = devices_options,
    .opts_size = sizeof(devices_opts),
    .min_args = 0,
    .max_args = 0,
    .handler = cmd_devices,
};

/* Every subcommand, in the order `clformer --help` lists them. */
static const clf_cli_command *const commands[] = {
    &devices_command,           &clf_cli_run_command,      &clf_cli_generate_command, &clf_cli_chat_command,
    &clf_cli_batch_command,     &clf_cli_embed_command,     &clf_cli_classify_command, &clf_cli_fill_mask_command, &clf_cli_tokenize_command,
    &clf_cli_reconstruct_command, &clf_cli_probe_command,  &clf_cli_matrix_command,
};
enum { N_COMMANDS = sizeof(commands) / sizeof(commands[0]) };

static void usage(FILE *f) {
  fprintf(f, "usage: clformer COMMAND [options]   (clformer COMMAND --help for its options)\n");
  for (int i = 0; i < N_COMMANDS; i++)
    fprintf(f, "  %s%s%s\n      %s\n", commands[i]->name, *commands[i]->synopsis ? " " : "", commands[i]->synopsis,
            commands[i]->summary);
  fprintf(f, "clformer help COMMAND or clformer COMMAND --help: its options; clformer --version: the version;\n"
             "-v on any command: the library's notices too (CLFORMER_LOG=info).\n");
  fprintf(f, "A device S is \"P:D\" (indices) or part of its platform/device name;\n"
             "the default is $CLFORMER_DEVICE, else the first GPU, else the first device.\n");
}

static const clf_cli_command *find_command(const char *name) {
  for (int i = 0; i < N_COMMANDS; i++)
    if (!strcmp(commands[i]->name, name)) return commands[i];
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    const clf_cli_command *about = argc > 2 ? find_command(argv[2]) : NULL;
    if (about) clf_cli_print_help(about, stdout); /* clformer help COMMAND */
    else usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
    printf("clformer %s\n", CLF_VERSION_STRING);
    return 0;
  }
  const clf_cli_command *cmd = find_command(argv[1]);
  if (!cmd) {
    fprintf(stderr, "clformer: unknown command %s\n", argv[1]);
    usage(stderr);
    return 2;
  }
  /* --device NAME may name an implementation that is loaded alone. */
  const char *sel = getenv("CLFORMER_DEVICE");
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--")) break;
    if (!strcmp(argv[i], "--device") && i + 1 < argc) sel = argv[++i];
    else if (!strncmp(argv[i], "--device=", 9)) sel = argv[i] + 9;
  }
  if (strcmp(cmd->name, "matrix") != 0) clf_cli_route_device(sel);
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
