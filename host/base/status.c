/* status.c - status codes, their messages, and the detailed last error.
 *
 * The enum and the strings come from the one list CLF_STATUS_MAP in the
 * public header, so they cannot drift apart.
 */
#include "status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *clf_strerror(clf_status status) {
  switch (status) {
#define CLF__STATUS_MSG(name, code, msg) \
  case CLF_##name:                       \
    return msg;
    CLF_STATUS_MAP(CLF__STATUS_MSG)
#undef CLF__STATUS_MSG
  }
  return "unknown status";
}

const char *clf_status_name(clf_status status) {
  switch (status) {
#define CLF__STATUS_NAME(name, code, msg) \
  case CLF_##name:                        \
    return "CLF_" #name;
    CLF_STATUS_MAP(CLF__STATUS_NAME)
#undef CLF__STATUS_NAME
  }
  return "CLF_UNKNOWN";
}

/* Failures that happen before a context exists land here. */
static _Thread_local clf__errstate clf__tls_err;

clf__errstate *clf__err(const clf_context *ctx) {
  return ctx ? (clf__errstate *)(void *)ctx : &clf__tls_err;
}

clf_status clf__fail(clf_context *ctx, clf_status status, const char *fmt, ...) {
  clf__errstate *e = clf__err(ctx);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
  va_end(ap);
  e->status = status;
  e->cl = 0;
  return status;
}

clf_status clf__fail_cl(clf_context *ctx, cl_int err, const char *call, const char *what) {
  clf_status st = (err == CL_OUT_OF_HOST_MEMORY || err == CL_MEM_OBJECT_ALLOCATION_FAILURE ||
                   err == CL_OUT_OF_RESOURCES)
                      ? CLF_E_OUT_OF_MEMORY
                      : CLF_E_OPENCL;
  clf__fail(ctx, st, "%s%s%s%s failed: %s (%d)", call, what ? "(" : "", what ? what : "", what ? ")" : "",
            clf_cl_error_name(err), (int)err);
  clf__err(ctx)->cl = err;
  return st;
}

void clf__set_build_log(clf_context *ctx, const char *log) {
  if (!ctx) return;
  clf__errstate *e = clf__err(ctx);
  free(e->log);
  e->log = log ? strdup(log) : NULL;
}

const char *clf_last_error(const clf_context *ctx) { return clf__err(ctx)->msg; }

cl_int clf_last_cl_error(const clf_context *ctx) { return clf__err(ctx)->cl; }

const char *clf_last_build_log(const clf_context *ctx) {
  const clf__errstate *e = clf__err(ctx);
  return e->log ? e->log : "";
}

void clf_clear_error(clf_context *ctx) {
  clf__errstate *e = clf__err(ctx);
  e->status = CLF_OK;
  e->cl = 0;
  e->msg[0] = '\0';
  free(e->log);
  e->log = NULL;
}

const char *clf_cl_error_name(cl_int err) {
  switch (err) {
#define E(x) \
  case x:    \
    return #x;
    E(CL_SUCCESS) E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE)
    E(CL_COMPILER_NOT_AVAILABLE) E(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
    E(CL_PROFILING_INFO_NOT_AVAILABLE) E(CL_MEM_COPY_OVERLAP)
    E(CL_IMAGE_FORMAT_MISMATCH) E(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    E(CL_BUILD_PROGRAM_FAILURE) E(CL_MAP_FAILURE)
    E(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    E(CL_COMPILE_PROGRAM_FAILURE) E(CL_LINKER_NOT_AVAILABLE)
    E(CL_LINK_PROGRAM_FAILURE) E(CL_DEVICE_PARTITION_FAILED)
    E(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) E(CL_INVALID_VALUE)
    E(CL_INVALID_DEVICE_TYPE) E(CL_INVALID_PLATFORM) E(CL_INVALID_DEVICE)
    E(CL_INVALID_CONTEXT) E(CL_INVALID_QUEUE_PROPERTIES)
    E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_HOST_PTR)
    E(CL_INVALID_MEM_OBJECT) E(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    E(CL_INVALID_IMAGE_SIZE) E(CL_INVALID_SAMPLER) E(CL_INVALID_BINARY)
    E(CL_INVALID_BUILD_OPTIONS) E(CL_INVALID_PROGRAM)
    E(CL_INVALID_PROGRAM_EXECUTABLE) E(CL_INVALID_KERNEL_NAME)
    E(CL_INVALID_KERNEL_DEFINITION) E(CL_INVALID_KERNEL)
    E(CL_INVALID_ARG_INDEX) E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE)
    E(CL_INVALID_KERNEL_ARGS) E(CL_INVALID_WORK_DIMENSION)
    E(CL_INVALID_WORK_GROUP_SIZE) E(CL_INVALID_WORK_ITEM_SIZE)
    E(CL_INVALID_GLOBAL_OFFSET) E(CL_INVALID_EVENT_WAIT_LIST)
    E(CL_INVALID_EVENT) E(CL_INVALID_OPERATION) E(CL_INVALID_GL_OBJECT)
    E(CL_INVALID_BUFFER_SIZE) E(CL_INVALID_MIP_LEVEL)
    E(CL_INVALID_GLOBAL_WORK_SIZE) E(CL_INVALID_PROPERTY)
    E(CL_INVALID_IMAGE_DESCRIPTOR) E(CL_INVALID_COMPILER_OPTIONS)
    E(CL_INVALID_LINKER_OPTIONS) E(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef E
    case -1001:
      return "CL_PLATFORM_NOT_FOUND_KHR";
  }
  return "unknown OpenCL error";
}
