/* probe_props.c - the property table of `clformer probe`: one row per
 * clGetPlatformInfo / clGetDeviceInfo query, read and printed the same way
 * for every device.  A query that fails shows its error in its row and the
 * table goes on (2.x and 3.0 queries fail that way on 1.2 devices). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CL/cl_ext.h>
#include <cjson/cJSON.h>

#include "cli.h"

/* Queries newer than the 1.2 headers this project targets (values from the
 * Khronos cl.h); a 1.2 device answers them with CL_INVALID_VALUE. */
#ifndef CL_DEVICE_SVM_CAPABILITIES
#define CL_DEVICE_SVM_CAPABILITIES 0x1053
#endif
#ifndef CL_DEVICE_IL_VERSION
#define CL_DEVICE_IL_VERSION 0x105B
#endif
#ifndef CL_DEVICE_MAX_NUM_SUB_GROUPS
#define CL_DEVICE_MAX_NUM_SUB_GROUPS 0x105C
#endif
#ifndef CL_DEVICE_SUB_GROUP_INDEPENDENT_FORWARD_PROGRESS
#define CL_DEVICE_SUB_GROUP_INDEPENDENT_FORWARD_PROGRESS 0x105D
#endif
#ifndef CL_DEVICE_PREFERRED_WORK_GROUP_SIZE_MULTIPLE
#define CL_DEVICE_PREFERRED_WORK_GROUP_SIZE_MULTIPLE 0x1067
#endif
#ifndef CL_DEVICE_GENERIC_ADDRESS_SPACE_SUPPORT
#define CL_DEVICE_GENERIC_ADDRESS_SPACE_SUPPORT 0x1069
#endif

typedef enum {
  K_STRING,
  K_UINT,
  K_ULONG,
  K_SIZE,
  K_SIZES,   /* size_t[] */
  K_BOOL,
  K_BITS,    /* a bitfield: the names of the set bits */
  K_ENUM,    /* one value out of a list */
} prop_kind;

typedef struct flag_name {
  cl_bitfield bit;
  const char *name;
} flag_name;

static const flag_name device_types[] = {
    {CL_DEVICE_TYPE_CPU, "CL_DEVICE_TYPE_CPU"}, {CL_DEVICE_TYPE_GPU, "CL_DEVICE_TYPE_GPU"},
    {CL_DEVICE_TYPE_ACCELERATOR, "CL_DEVICE_TYPE_ACCELERATOR"}, {CL_DEVICE_TYPE_CUSTOM, "CL_DEVICE_TYPE_CUSTOM"},
    {CL_DEVICE_TYPE_DEFAULT, "CL_DEVICE_TYPE_DEFAULT"}, {0, NULL}};
static const flag_name fp_config[] = {
    {CL_FP_DENORM, "CL_FP_DENORM"}, {CL_FP_INF_NAN, "CL_FP_INF_NAN"},
    {CL_FP_ROUND_TO_NEAREST, "CL_FP_ROUND_TO_NEAREST"}, {CL_FP_ROUND_TO_ZERO, "CL_FP_ROUND_TO_ZERO"},
    {CL_FP_ROUND_TO_INF, "CL_FP_ROUND_TO_INF"}, {CL_FP_FMA, "CL_FP_FMA"}, {CL_FP_SOFT_FLOAT, "CL_FP_SOFT_FLOAT"},
    {CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT, "CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT"}, {0, NULL}};
static const flag_name queue_props[] = {
    {CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, "CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE"},
    {CL_QUEUE_PROFILING_ENABLE, "CL_QUEUE_PROFILING_ENABLE"}, {0, NULL}};
static const flag_name exec_caps[] = {
    {CL_EXEC_KERNEL, "CL_EXEC_KERNEL"}, {CL_EXEC_NATIVE_KERNEL, "CL_EXEC_NATIVE_KERNEL"}, {0, NULL}};
static const flag_name svm_caps[] = {
    {1 << 0, "CL_DEVICE_SVM_COARSE_GRAIN_BUFFER"}, {1 << 1, "CL_DEVICE_SVM_FINE_GRAIN_BUFFER"},
    {1 << 2, "CL_DEVICE_SVM_FINE_GRAIN_SYSTEM"}, {1 << 3, "CL_DEVICE_SVM_ATOMICS"}, {0, NULL}};
static const flag_name local_mem_types[] = {
    {CL_NONE, "CL_NONE"}, {CL_LOCAL, "CL_LOCAL"}, {CL_GLOBAL, "CL_GLOBAL"}, {0, NULL}};

typedef struct prop_row {
  const char *name;   /* the raw CL_* name: the JSON key */
  const char *label;  /* what the human table shows */
  cl_uint param;
  prop_kind kind;
  const char *unit;   /* "bytes", "MHz", ... or NULL */
  const flag_name *flags;
} prop_row;

#define ROW(param, label, kind, unit, flags) {#param, label, param, kind, unit, flags}

static const prop_row platform_rows[] = {
    ROW(CL_PLATFORM_NAME, "platform", K_STRING, NULL, NULL),
    ROW(CL_PLATFORM_VENDOR, "platform vendor", K_STRING, NULL, NULL),
    ROW(CL_PLATFORM_VERSION, "platform version", K_STRING, NULL, NULL),
    ROW(CL_PLATFORM_PROFILE, "platform profile", K_STRING, NULL, NULL),
};

static const prop_row device_rows[] = {
    ROW(CL_DEVICE_NAME, "name", K_STRING, NULL, NULL),
    ROW(CL_DEVICE_VENDOR, "vendor", K_STRING, NULL, NULL),
    ROW(CL_DEVICE_VENDOR_ID, "vendor id", K_UINT, NULL, NULL),
    ROW(CL_DRIVER_VERSION, "driver version", K_STRING, NULL, NULL),
    ROW(CL_DEVICE_VERSION, "OpenCL version", K_STRING, NULL, NULL),
    ROW(CL_DEVICE_OPENCL_C_VERSION, "OpenCL C version", K_STRING, NULL, NULL),
    ROW(CL_DEVICE_PROFILE, "profile", K_STRING, NULL, NULL),
    ROW(CL_DEVICE_TYPE, "type", K_BITS, NULL, device_types),
    ROW(CL_DEVICE_MAX_COMPUTE_UNITS, "compute units", K_UINT, NULL, NULL),
    ROW(CL_DEVICE_MAX_CLOCK_FREQUENCY, "max clock", K_UINT, "MHz", NULL),
    ROW(CL_DEVICE_GLOBAL_MEM_SIZE, "global memory", K_ULONG, "bytes", NULL),
    ROW(CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, "global memory cache", K_ULONG, "bytes", NULL),
    ROW(CL_DEVICE_GLOBAL_MEM_CACHELINE_SIZE, "cache line", K_UINT, "bytes", NULL),
    ROW(CL_DEVICE_MAX_MEM_ALLOC_SIZE, "max allocation", K_ULONG, "bytes", NULL),
    ROW(CL_DEVICE_MEM_BASE_ADDR_ALIGN, "base address alignment", K_UINT, "bits", NULL),
    ROW(CL_DEVICE_LOCAL_MEM_TYPE, "local memory type", K_ENUM, NULL, local_mem_types),
    ROW(CL_DEVICE_LOCAL_MEM_SIZE, "local memory", K_ULONG, "bytes", NULL),
    ROW(CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE, "constant buffer", K_ULONG, "bytes", NULL),
    ROW(CL_DEVICE_MAX_CONSTANT_ARGS, "constant arguments", K_UINT, NULL, NULL),
    ROW(CL_DEVICE_MAX_PARAMETER_SIZE, "kernel parameter size", K_SIZE, "bytes", NULL),
    ROW(CL_DEVICE_MAX_WORK_GROUP_SIZE, "max work-group size", K_SIZE, NULL, NULL),
    ROW(CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, "work-item dimensions", K_UINT, NULL, NULL),
    ROW(CL_DEVICE_MAX_WORK_ITEM_SIZES, "max work-item sizes", K_SIZES, NULL, NULL),
    ROW(CL_DEVICE_PREFERRED_WORK_GROUP_SIZE_MULTIPLE, "preferred work-group multiple", K_SIZE, NULL, NULL),
    ROW(CL_DEVICE_PREFERRED_VECTOR_WIDTH_CHAR, "preferred vector: char", K_UINT, NULL, NULL),
    ROW(CL_DEVICE_PREFERRED_VECTOR_WIDTH_SHORT, "preferred vector: short", K_UINT, NULL, NULL),
    ROW(CL_DEVICE_PREFERRED_VECTOR_WIDTH_INT, "preferred vector: int", K_UINT, NULL, NULL),
    ROW(CL_DEVICE_PREFERRED_VECTOR_WIDTH_LONG, "preferred vector: long", K_UINT, NULL, NULL),
    ROW(CL_DEVICE_PREFERRED_VECTOR_WIDTH_HALF, "preferred vector: half", K_UINT, NULL, NULL),
    ROW(CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, "preferred vector: float", K_UINT, NULL, NULL),
    ROW(CL_DEVICE_PREFERRED_VECTOR_WIDTH_DOUBLE, "preferred vector: double", K_UINT, NULL, NULL),
    ROW(CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, "native vector: float", K_UINT, NULL, NULL),
    ROW(CL_DEVICE_NATIVE_VECTOR_WIDTH_HALF, "native vector: half", K_UINT, NULL, NULL),
    ROW(CL_DEVICE_SINGLE_FP_CONFIG, "fp32 config", K_BITS, NULL, fp_config),
    ROW(CL_DEVICE_HALF_FP_CONFIG, "fp16 config", K_BITS, NULL, fp_config),
    ROW(CL_DEVICE_DOUBLE_FP_CONFIG, "fp64 config", K_BITS, NULL, fp_config),
    ROW(CL_DEVICE_MAX_NUM_SUB_GROUPS, "max subgroups per work-group", K_UINT, NULL, NULL),
    ROW(CL_DEVICE_SUB_GROUP_INDEPENDENT_FORWARD_PROGRESS, "subgroup forward progress", K_BOOL, NULL, NULL),
    ROW(CL_DEVICE_SUB_GROUP_SIZES_INTEL, "subgroup sizes (Intel)", K_SIZES, NULL, NULL),
    ROW(CL_DEVICE_IMAGE_SUPPORT, "images", K_BOOL, NULL, NULL),
    ROW(CL_DEVICE_IMAGE2D_MAX_WIDTH, "image2d max width", K_SIZE, NULL, NULL),
    ROW(CL_DEVICE_IMAGE2D_MAX_HEIGHT, "image2d max height", K_SIZE, NULL, NULL),
    ROW(CL_DEVICE_HOST_UNIFIED_MEMORY, "host unified memory", K_BOOL, NULL, NULL),
    ROW(CL_DEVICE_ERROR_CORRECTION_SUPPORT, "error correction", K_BOOL, NULL, NULL),
    ROW(CL_DEVICE_ENDIAN_LITTLE, "little endian", K_BOOL, NULL, NULL),
    ROW(CL_DEVICE_PROFILING_TIMER_RESOLUTION, "profiling timer resolution", K_SIZE, "ns", NULL),
    ROW(CL_DEVICE_QUEUE_PROPERTIES, "queue properties", K_BITS, NULL, queue_props),
    ROW(CL_DEVICE_EXECUTION_CAPABILITIES, "execution capabilities", K_BITS, NULL, exec_caps),
    ROW(CL_DEVICE_SVM_CAPABILITIES, "shared virtual memory", K_BITS, NULL, svm_caps),
    ROW(CL_DEVICE_GENERIC_ADDRESS_SPACE_SUPPORT, "generic address space", K_BOOL, NULL, NULL),
    ROW(CL_DEVICE_IL_VERSION, "IL versions", K_STRING, NULL, NULL),
    ROW(CL_DEVICE_PRINTF_BUFFER_SIZE, "printf buffer", K_SIZE, "bytes", NULL),
    ROW(CL_DEVICE_BUILT_IN_KERNELS, "built-in kernels", K_STRING, NULL, NULL),
};

/* The extensions whose presence changes what clformer can do. */
static const char *const interesting_extensions[] = {
    "cl_khr_fp16", "cl_khr_fp64", "cl_khr_subgroups", "cl_intel_subgroups", "cl_intel_required_subgroup_size",
    "cl_khr_global_int32_base_atomics", "cl_khr_local_int32_base_atomics", "cl_khr_int64_base_atomics",
    "cl_khr_il_program", "cl_khr_spir", "cl_qcom_reqd_sub_group_size", "cl_arm_integer_dot_product_int8",
};

/* One query into a malloc'd buffer (its size asked first); NULL on error. */
static void *query(int platform, cl_platform_id p, cl_device_id d, cl_uint param, size_t *size, cl_int *err) {
  *size = 0;
  *err = platform ? clGetPlatformInfo(p, param, 0, NULL, size) : clGetDeviceInfo(d, param, 0, NULL, size);
  if (*err != CL_SUCCESS) return NULL;
  unsigned char *buf = calloc(1, *size + 1);
  if (!buf) {
    *err = CL_OUT_OF_HOST_MEMORY;
    return NULL;
  }
  *err = platform ? clGetPlatformInfo(p, param, *size, buf, NULL) : clGetDeviceInfo(d, param, *size, buf, NULL);
  if (*err != CL_SUCCESS) {
    free(buf);
    return NULL;
  }
  return buf;
}

/* Appends to a growing text (best effort: truncates at cap). */
static void append(char *text, size_t cap, const char *s) {
  size_t n = strlen(text);
  if (n + 1 < cap) snprintf(text + n, cap - n, "%s", s);
}

static void human_bytes(char *text, size_t cap, unsigned long long v) {
  static const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
  char buf[64];
  if (v < 1024) return;
  double x = (double)v;
  int u = -1;
  while (x >= 1024 && u < 3) { x /= 1024; u++; }
  snprintf(buf, sizeof(buf), " (%.4g %s)", x, units[u]);
  append(text, cap, buf);
}

/* Reads one row: its human text into `text`, its JSON value into *json.
 * Returns the OpenCL error of the query (CL_SUCCESS when it answered). */
static cl_int read_row(const prop_row *r, int platform, cl_platform_id p, cl_device_id d, char *text, size_t cap,
                       cJSON **json) {
  size_t size;
  cl_int err;
  unsigned char *buf = query(platform, p, d, r->param, &size, &err);
  text[0] = '\0';
  *json = NULL;
  if (!buf) return err;
  char num[64];
  switch (r->kind) {
  case K_STRING:
    append(text, cap, buf[0] ? (const char *)buf : "(empty)");
    *json = cJSON_CreateString((const char *)buf);
    break;
  case K_UINT:
  case K_ULONG:
  case K_SIZE: {
    unsigned long long v = r->kind == K_UINT    ? *(const cl_uint *)buf
                           : r->kind == K_ULONG ? *(const cl_ulong *)buf
                                                : *(const size_t *)buf;
    snprintf(num, sizeof(num), "%llu", v);
    append(text, cap, num);
    if (r->unit && strcmp(r->unit, "bytes") == 0) human_bytes(text, cap, v);
    else if (r->unit) { append(text, cap, " "); append(text, cap, r->unit); }
    *json = cJSON_CreateNumber((double)v);
    break;
  }
  case K_SIZES: {
    *json = cJSON_CreateArray();
    for (size_t i = 0; i < size / sizeof(size_t); i++) {
      size_t v = ((const size_t *)buf)[i];
      snprintf(num, sizeof(num), "%s%zu", i ? " x " : "", v);
      append(text, cap, num);
      cJSON_AddItemToArray(*json, cJSON_CreateNumber((double)v));
    }
    if (size < sizeof(size_t)) append(text, cap, "(none)");
    break;
  }
  case K_BOOL:
    append(text, cap, *(const cl_bool *)buf ? "yes" : "no");
    *json = cJSON_CreateBool(*(const cl_bool *)buf);
    break;
  case K_BITS:
  case K_ENUM: {
    cl_bitfield v = size >= sizeof(cl_bitfield) ? *(const cl_bitfield *)buf : *(const cl_uint *)buf;
    if (r->kind == K_ENUM) v = *(const cl_uint *)buf;
    *json = cJSON_CreateArray();
    for (const flag_name *f = r->flags; f->name; f++) {
      int hit = r->kind == K_ENUM ? v == f->bit : (v & f->bit) != 0;
      if (!hit) continue;
      if (text[0]) append(text, cap, " ");
      append(text, cap, f->name);
      cJSON_AddItemToArray(*json, cJSON_CreateString(f->name));
    }
    if (!text[0]) {
      snprintf(num, sizeof(num), r->kind == K_ENUM ? "0x%llx" : "(none; 0x%llx)", (unsigned long long)v);
      append(text, cap, num);
    }
    if (r->kind == K_ENUM) {
      cJSON *one = cJSON_GetArrayItem(*json, 0);
      cJSON *val = one ? cJSON_CreateString(one->valuestring) : cJSON_CreateNumber((double)v);
      cJSON_Delete(*json);
      *json = val;
    }
    break;
  }
  }
  free(buf);
  return CL_SUCCESS;
}

/* Prints and/or records the rows of one table. */
static void emit_rows(const prop_row *rows, size_t n, int platform, cl_platform_id p, cl_device_id d, int human,
                      cJSON *obj) {
  char text[4096];
  for (size_t i = 0; i < n; i++) {
    cJSON *val = NULL;
    cl_int err = read_row(&rows[i], platform, p, d, text, sizeof(text), &val);
    /* CL_INVALID_VALUE: a query of an extension or version the driver does
     * not have (SUB_GROUP_SIZES_INTEL without cl_intel_subgroups), not a
     * failure. */
    int unsupported = err == CL_INVALID_VALUE;
    if (unsupported) snprintf(text, sizeof(text), "not supported (the driver does not answer this query)");
    else if (err != CL_SUCCESS) snprintf(text, sizeof(text), "error: %s (%d)", clf_cl_error_name(err), err);
    if (human) printf("    %-30s %-50s %s\n", rows[i].label, rows[i].name, text);
    if (!obj) {
      cJSON_Delete(val);
      continue;
    }
    cJSON *row = cJSON_AddObjectToObject(obj, rows[i].name);
    if (unsupported) {
      cJSON_AddBoolToObject(row, "supported", 0);
    } else if (err != CL_SUCCESS) {
      cJSON_AddStringToObject(row, "error", text + strlen("error: "));
      cJSON_AddNumberToObject(row, "cl_error", err);
    } else {
      cJSON_AddItemToObject(row, "value", val);
      if (rows[i].unit) cJSON_AddStringToObject(row, "unit", rows[i].unit);
    }
  }
}

/* Extensions: the whole list in JSON, a yes/no row for those that matter. */
static void emit_extensions(cl_device_id d, int human, cJSON *props, cJSON *dev) {
  size_t size;
  cl_int err;
  char *ext = query(0, NULL, d, CL_DEVICE_EXTENSIONS, &size, &err);
  cJSON *row = props ? cJSON_AddObjectToObject(props, "CL_DEVICE_EXTENSIONS") : NULL;
  if (!ext) {
    if (human)
      printf("    %-30s %-50s error: %s (%d)\n", "extensions", "CL_DEVICE_EXTENSIONS", clf_cl_error_name(err),
             err);
    if (row) {
      cJSON_AddStringToObject(row, "error", clf_cl_error_name(err));
      cJSON_AddNumberToObject(row, "cl_error", err);
    }
    return;
  }
  cJSON *list = cJSON_CreateArray();
  int count = 0;
  for (char *tok = strtok(ext, " "); tok; tok = strtok(NULL, " "), count++)
    cJSON_AddItemToArray(list, cJSON_CreateString(tok));
  free(ext);
  if (human) printf("    %-30s %-50s %d (--json lists them)\n", "extensions", "CL_DEVICE_EXTENSIONS", count);
  cJSON *interest = dev ? cJSON_AddObjectToObject(dev, "extensions_of_interest") : NULL;
  for (size_t i = 0; i < sizeof(interesting_extensions) / sizeof(interesting_extensions[0]); i++) {
    int has = 0;
    for (cJSON *e = list->child; e && !has; e = e->next) has = !strcmp(e->valuestring, interesting_extensions[i]);
    if (human) printf("    %-30s %-50s %s\n", "", interesting_extensions[i], has ? "yes" : "no");
    if (interest) cJSON_AddBoolToObject(interest, interesting_extensions[i], has);
  }
  if (row) cJSON_AddItemToObject(row, "value", list);
  else cJSON_Delete(list);
}

void clf_probe_properties(cl_platform_id platform, cl_device_id device, int human, struct cJSON *dev) {
  cJSON *pj = dev ? cJSON_AddObjectToObject(dev, "platform") : NULL;
  cJSON *dj = dev ? cJSON_AddObjectToObject(dev, "properties") : NULL;
  emit_rows(platform_rows, sizeof(platform_rows) / sizeof(platform_rows[0]), 1, platform, device, human, pj);
  emit_rows(device_rows, sizeof(device_rows) / sizeof(device_rows[0]), 0, platform, device, human, dj);
  emit_extensions(device, human, dj, dev);
}
