"""_arrays.py - NumPy arrays to clf_array and back.

Inputs are checked here, before any C call: names, dtypes (integers for ids
and masks, floats for pixel values) and ranks, each refused with the
status the library would give and a message naming the input.  C-contiguous
int64 / int32 / float32 arrays are passed without a copy; anything else is
converted once.  Outputs are copied into NumPy arrays that own their memory
and the library's buffer is freed at once (clf_array_free).
"""
from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from . import _errors, _lib

# Inputs that hold floats; every other model input holds ids or a mask.
FLOAT_INPUTS = frozenset({"pixel_values", "noise", "inputs_embeds"})

# What an empty array points at (the library reads none of it, but wants non-NULL).
_EMPTY = ctypes.c_int64(0)

_TO_NUMPY = {_lib.F32: np.float32, _lib.F16: np.float16, _lib.I32: np.int32, _lib.I64: np.int64}


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of {value.dtype} {list(value.shape)}"
    return f"a {type(value).__name__}"


def as_ids(name: str, value: Any, *, ndim: int | None = 2, allow_int32: bool = True) -> np.ndarray:
    """`value` as a C-contiguous int64 (or int32) array of ids, refusing floats,
    objects and values outside int64."""
    if value is None:
        raise _errors.InvalidArgumentError(f"{name}: expected an array of integer ids, got None")
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError, OverflowError) as e:
        raise _errors.InvalidArgumentError(f"{name}: not an array of integer ids ({e})") from None
    if arr.dtype == np.bool_:
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "O" and arr.size and all(isinstance(v, int) for v in arr.flat):
            raise _errors.InvalidArgumentError(f"{name}: an id does not fit in int64")
        if arr.size or arr.dtype.kind not in "f":
            raise _errors.DtypeError(f"{name} must hold integers (int64 or int32), got {_describe(value)}")
        arr = arr.astype(np.int64)  # an empty list comes as float64
    if arr.dtype.kind == "u" and arr.dtype.itemsize >= 8:
        if arr.size and arr.max() > np.iinfo(np.int64).max:
            raise _errors.InvalidArgumentError(f"{name}: an id does not fit in int64")
    if ndim is not None and arr.ndim != ndim:
        raise _errors.ShapeError(f"{name} must be {ndim}-D, got shape {list(arr.shape)}")
    if not (allow_int32 and arr.dtype == np.int32) and arr.dtype != np.int64:
        arr = arr.astype(np.int64)
    return np.ascontiguousarray(arr)


def as_floats(name: str, value: Any) -> np.ndarray:
    """`value` as a C-contiguous float32 array (other real dtypes converted)."""
    if value is None:
        raise _errors.InvalidArgumentError(f"{name}: expected an array of floats, got None")
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError, OverflowError) as e:
        raise _errors.InvalidArgumentError(f"{name}: not an array of floats ({e})") from None
    if arr.dtype.kind not in "fiub" or (arr.dtype.kind == "f" and arr.dtype.itemsize > 8):
        raise _errors.DtypeError(f"{name} must hold real numbers (float32), got {_describe(value)}")
    return np.ascontiguousarray(arr, dtype=np.float32)


def check_rank(name: str, arr: np.ndarray) -> None:
    if not 1 <= arr.ndim <= _lib.MAX_DIMS:
        raise _errors.ShapeError(f"{name} must have 1 to {_lib.MAX_DIMS} dimensions, got shape {list(arr.shape)}")


def to_c(name: str, arr: np.ndarray) -> _lib.Array:
    """A clf_array borrowing `arr`'s memory (keep arr alive during the call)."""
    dtype = {np.dtype(np.float32): _lib.F32, np.dtype(np.int64): _lib.I64, np.dtype(np.int32): _lib.I32}[arr.dtype]
    raw = name.encode()
    if len(raw) >= 64:
        raise _errors.InvalidArgumentError(f"input name {name[:70]!r} is longer than 63 bytes")
    c = _lib.Array()
    c.name = raw
    c.dtype = dtype
    c.ndim = arr.ndim
    for i, d in enumerate(arr.shape):
        c.shape[i] = d
    # An empty array may have no buffer; the library reads none of it.
    c.data = arr.ctypes.data if arr.size else ctypes.addressof(_EMPTY)
    return c


def take(c: _lib.Array) -> np.ndarray:
    """The library-filled `c` copied into an owned NumPy array; c is freed."""
    try:
        dtype = _TO_NUMPY.get(c.dtype)
        if dtype is None:
            raise _errors.DtypeError(f"the library returned {c.name.decode(errors='replace')} as dtype {c.dtype}, "
                                     "which has no NumPy equivalent")
        shape = tuple(c.shape[i] for i in range(c.ndim))
        out = np.empty(shape, dtype=dtype)
        if out.nbytes:
            ctypes.memmove(out.ctypes.data, c.data, out.nbytes)
        return out
    finally:
        _lib.lib.clf_array_free(ctypes.byref(c))
