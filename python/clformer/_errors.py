"""_errors.py - the library's clf_status codes as Python exceptions.

One class per status of CLF_STATUS_MAP (include/clformer.h), all under
clformer.Error; tests/python/test_errors.py checks this list against the
library's clf_status_name() so the two cannot drift apart.
"""
from __future__ import annotations

from . import _lib


class Error(Exception):
    """A failure reported by libclformer (or refused by the package before the
    C call, with the status the library would have given).

    Attributes:
        status: the status name, e.g. ``"CLF_E_SHAPE"``.
        code: the clf_status value (negative).
        message: the library's detailed message (clf_last_error).
        cl_error: the OpenCL error code of the failure, or None.
        build_log: the OpenCL compiler's log when a kernel failed to build, or None.
    """

    status = "CLF_E_UNKNOWN"
    code = 0

    def __init__(self, message: str, *, cl_error: int | None = None, build_log: str | None = None):
        super().__init__(message)
        self.message = message
        self.cl_error = cl_error or None
        self.build_log = build_log or None

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, status={self.status})"


def _status(name: str, code: int, doc: str, *bases: type) -> type:
    cls = type(name, (Error, *bases), {"__doc__": doc, "status": "CLF_" + _NAMES[code], "code": code,
                                        "__module__": "clformer"})
    # Builtin bases such as OSError take over __str__ and __init__; keep ours.
    cls.__str__ = Error.__str__
    cls.__init__ = Error.__init__
    return cls


# code -> the name in CLF_STATUS_MAP, as clf_status_name spells it after "CLF_".
_NAMES = {
    -1: "E_INVALID_ARG", -2: "E_SHAPE", -3: "E_DTYPE", -4: "E_NO_DEVICE", -5: "E_DEVICE_NOT_FOUND",
    -6: "E_OPENCL", -7: "E_BUILD", -8: "E_OUT_OF_MEMORY", -9: "E_BLAS", -10: "E_UNSUPPORTED", -11: "E_IO",
    -12: "E_FORMAT", -13: "E_NOT_FOUND", -14: "E_LIMIT",
}

InvalidArgumentError = _status("InvalidArgumentError", -1, "CLF_E_INVALID_ARG: an invalid argument.", ValueError)
ShapeError = _status("ShapeError", -2, "CLF_E_SHAPE: a tensor or array of the wrong shape.", ValueError)
DtypeError = _status("DtypeError", -3, "CLF_E_DTYPE: an unsupported or mismatched data type.", TypeError)
NoDeviceError = _status("NoDeviceError", -4, "CLF_E_NO_DEVICE: no OpenCL device found.", RuntimeError)
DeviceNotFoundError = _status("DeviceNotFoundError", -5, "CLF_E_DEVICE_NOT_FOUND: no device matches the selector.",
                              LookupError)
OpenCLError = _status("OpenCLError", -6, "CLF_E_OPENCL: an OpenCL call failed (see .cl_error).", RuntimeError)
BuildError = _status("BuildError", -7, "CLF_E_BUILD: an OpenCL kernel failed to build (see .build_log).",
                     RuntimeError)
OutOfMemoryError = _status("OutOfMemoryError", -8, "CLF_E_OUT_OF_MEMORY: host or device memory ran out.",
                           MemoryError)
BlasError = _status("BlasError", -9, "CLF_E_BLAS: a CLBlast call failed.", RuntimeError)
UnsupportedError = _status("UnsupportedError", -10,
                           "CLF_E_UNSUPPORTED: not supported on this device, model or configuration.",
                           NotImplementedError)
IOFailedError = _status("IOFailedError", -11, "CLF_E_IO: a file could not be read or written.", OSError)
FormatError = _status("FormatError", -12, "CLF_E_FORMAT: a malformed file or data.", ValueError)
NotFoundError = _status("NotFoundError", -13, "CLF_E_NOT_FOUND: a file, tensor or item is missing.",
                        FileNotFoundError)
LimitError = _status("LimitError", -14,
                     "CLF_E_LIMIT: a limit on work or memory was reached (a chat template's budget).",
                     RuntimeError)

BY_CODE: dict[int, type] = {c.code: c for c in (
    InvalidArgumentError, ShapeError, DtypeError, NoDeviceError, DeviceNotFoundError, OpenCLError, BuildError,
    OutOfMemoryError, BlasError, UnsupportedError, IOFailedError, FormatError, NotFoundError, LimitError)}


def from_status(status: int, ctx: int | None = None, message: str | None = None) -> Error:
    """The exception for `status`, with the detailed error that the library
    recorded on `ctx` (None: the calling thread's context-free record)."""
    lib = _lib.lib
    msg = message if message is not None else _lib.text(lib.clf_last_error(ctx))
    if not msg:
        msg = _lib.text(lib.clf_strerror(status))
    cl = lib.clf_last_cl_error(ctx) if message is None else 0
    log = _lib.text(lib.clf_last_build_log(ctx)) if message is None else ""
    cls = BY_CODE.get(status)
    if cls is None:
        err = Error(f"{msg} (status {status})", cl_error=cl, build_log=log)
        err.code = status
        return err
    return cls(msg, cl_error=cl, build_log=log)


def check(status: int, ctx: int | None = None) -> None:
    """Raises the exception of `status` unless it is CLF_OK."""
    if status != 0:
        raise from_status(status, ctx)
