"""_text.py - the model directory's tokenizer (clf_tokenizer), loaded on
first use, behind a lock of its own (host-only: no context)."""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import threading
from typing import Any, Iterator

import numpy as np

from . import _arrays, _errors, _lib

# The library's strings are malloc'd; free() them with the C library's free.
_libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
_libc.free.argtypes = [ctypes.c_void_p]
_libc.free.restype = None


def c_text(text: Any, what: str = "text") -> bytes:
    """`text` as the NUL-terminated UTF-8 the C API takes."""
    if not isinstance(text, str):
        raise _errors.InvalidArgumentError(f"{what} must be a str, not {type(text).__name__}")
    return _lib.cstr(text, what)


class Tokenizer:
    """The tokenizer of a Hugging Face model directory (clf_tokenizer: vocab.txt,
    vocab.json + merges.txt, .spm files or tokenizer.json), loaded when first
    used; no device needed.  Model.tokenize / Model.decode use the model
    directory's.  Thread-safe (one lock)."""

    def __init__(self, path: Any):
        if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)) or "\0" in os.fspath(path):
            raise _errors.InvalidArgumentError(f"path must be a str or os.PathLike, not {type(path).__name__}")
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._h = None
        self._closed = False

    def _handle(self) -> int:
        # call with the lock held
        if self._closed:
            raise _errors.InvalidArgumentError(f"the tokenizer of {self.path!r} is closed")
        if self._h is None:
            h = ctypes.c_void_p()
            st = _lib.lib.clf_tokenizer_load(_lib.cpath(self.path), ctypes.byref(h))
            if st != 0:
                raise _errors.from_status(st)
            self._h = h.value
        return self._h

    @contextlib.contextmanager
    def locked(self) -> Iterator[int]:
        """`with tok.locked() as handle:` the clf_tokenizer, loaded, its lock
        held.  The lock is taken by a with statement, which a Ctrl-C cannot
        come between the acquire and the block of: an acquire() and then a
        try could leave the lock held for good (a KeyboardInterrupt raised
        as the acquire returned).  One raised once this generator holds the
        lock ends it, releasing the lock, when the generator is dropped."""
        with self._lock:
            yield self._handle()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._h:
                _lib.lib.clf_tokenizer_destroy(self._h)
            self._h = None

    def __del__(self) -> None:
        # Unreachable, so no call of this process holds the lock, except a
        # daemon thread stopped inside one at interpreter exit: then the
        # handle is left to the OS rather than freed under it.
        try:
            if not self._h or not self._lock.acquire(blocking=False):
                return
        except Exception:  # interpreter shutdown, or __init__ refused the path
            return
        try:
            if self._h:
                _lib.lib.clf_tokenizer_destroy(self._h)
            self._h = None
        except Exception:  # interpreter shutdown
            pass
        finally:
            self._lock.release()

    def encode(self, text: str, add_special: bool = True) -> np.ndarray:
        raw = c_text(text)
        ids = ctypes.POINTER(ctypes.c_int64)()
        n = ctypes.c_size_t(0)
        with self._lock:
            st = _lib.lib.clf_tokenizer_encode(self._handle(), raw, 1 if add_special else 0, ctypes.byref(ids),
                                               ctypes.byref(n))
            if st != 0:
                raise _errors.from_status(st)
        try:
            out = np.empty(n.value, dtype=np.int64)
            if n.value:
                ctypes.memmove(out.ctypes.data, ids, out.nbytes)
        finally:
            _libc.free(ids)
        return out

    def decode_bytes(self, ids: Any, skip_special_tokens: bool = True) -> bytes:
        arr = _arrays.as_ids("ids", ids, ndim=None, allow_int32=False)
        if arr.ndim == 0:
            arr = arr.reshape(1)
        if arr.ndim != 1:
            raise _errors.ShapeError(f"ids must be 1-D (one sequence), got shape {list(arr.shape)}; "
                                     "use batch_decode for several")
        text = ctypes.c_void_p()
        ptr = arr.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)) if arr.size else \
            ctypes.cast(ctypes.addressof(_arrays._EMPTY), ctypes.POINTER(ctypes.c_int64))
        with self._lock:
            st = _lib.lib.clf_tokenizer_decode(self._handle(), ptr, arr.size, 1 if skip_special_tokens else 0,
                                               ctypes.byref(text))
            if st != 0:
                raise _errors.from_status(st)
        try:
            return ctypes.string_at(text.value) if text.value else b""
        finally:
            _libc.free(text)

    def decode(self, ids: Any, skip_special_tokens: bool = True) -> str:
        """ids (1-D) -> text, as transformers' tokenizer.decode (special tokens
        dropped unless skip_special_tokens=False; bytes that are not UTF-8
        become U+FFFD)."""
        return self.decode_bytes(ids, skip_special_tokens).decode("utf-8", "replace")

    def tokenize(self, text: str, add_special_tokens: bool = True) -> "np.ndarray":
        """text -> int64 ids, as transformers' tokenizer(text)["input_ids"]."""
        return self.encode(text, add_special_tokens)

    def token(self, id: int) -> str:
        """The vocabulary's entry for `id` as the vocabulary spells it
        (transformers' convert_ids_to_tokens: "\u0120world", "##ing");
        NotFoundError naming the id when no token has it (decode drops such
        ids silently, so this is how a caller checks them)."""
        out = ctypes.c_char_p()
        with self._lock:
            st = _lib.lib.clf_tokenizer_token(self._handle(), int(id), ctypes.byref(out))
            if st != 0:
                raise _errors.from_status(st)
            return (out.value or b"").decode("utf-8", "replace")

    def __enter__(self) -> "Tokenizer":
        with self._lock:
            self._handle()  # load now: a missing tokenizer fails here
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
