"""_tasks.py - embed() and classify(): what `clformer embed` and `clformer
classify` compute, on a Model."""
from __future__ import annotations

import ctypes
import json
import os
import tempfile
from typing import Any, Sequence

import numpy as np

from . import _arrays, _errors, _lib


def _texts(texts: Any) -> list[str]:
    if isinstance(texts, str):
        return [texts]
    if texts is None or isinstance(texts, (bytes, bytearray)) or not isinstance(texts, Sequence):
        raise _errors.InvalidArgumentError(f"texts must be a str or a sequence of str, not {type(texts).__name__}")
    out = list(texts)
    if not out:
        raise _errors.InvalidArgumentError("texts is empty")
    for t in out:
        if not isinstance(t, str):
            raise _errors.InvalidArgumentError(f"texts must hold str, not {type(t).__name__}")
    return out


def _pad_id(path: str) -> int:
    """config.json's pad_token_id (0 when absent or not a number >= 0)."""
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            v = json.load(f).get("pad_token_id")
    except (OSError, ValueError, AttributeError):
        return 0
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 else 0


def embed(model: Any, texts: Any) -> np.ndarray:
    items = _texts(texts)
    ids = [model.tokenize(t, True) for t in items]
    L = max(len(x) for x in ids)
    n = len(items)
    pad = _pad_id(model.path)
    inp = {"input_ids": np.full((n, L), pad, dtype=np.int64), "attention_mask": np.zeros((n, L), dtype=np.int64)}
    for i, x in enumerate(ids):
        inp["input_ids"][i, :len(x)] = x
        inp["attention_mask"][i, :len(x)] = 1
    if "token_type_ids" in model.input_names:
        inp["token_type_ids"] = np.zeros((n, L), dtype=np.int64)
    h = model.run(inp, ["last_hidden_state"])["last_hidden_state"]
    D = h.shape[2]
    emb = np.empty((n, D), dtype=np.float32)
    for i, x in enumerate(ids):
        s = np.zeros(D, dtype=np.float64)
        for j in range(len(x)):
            s += h[i, j].astype(np.float64)
        e = (s / len(x)).astype(np.float32)
        norm = 0.0
        for d in range(D):
            norm += float(e[d]) * float(e[d])
        emb[i] = e / np.float32(np.sqrt(norm) + 1e-12)
    return emb


def _softmax_top(logits: np.ndarray, k: int) -> list[tuple[int, float]]:
    l64 = logits.astype(np.float64)
    ex = np.exp(l64 - l64.max())
    p = ex / ex.sum()
    order = sorted(range(len(p)), key=lambda j: (-p[j], j))
    return [(j, float(p[j])) for j in order[:k]]


def _rgb(name: str, image: Any, path: str, proc: _lib.ImageProcessor) -> np.ndarray:
    """One image preprocessed to pixel_values [1, 3, H, W]."""
    lib = _lib.lib
    img = _lib.Image()
    tmp = None
    owned = False
    try:
        if isinstance(image, (str, os.PathLike)):
            p = os.fspath(image)
            if not isinstance(p, str) or "\0" in p:
                raise _errors.InvalidArgumentError(f"{name}: not a usable path")
            _errors.check(lib.clf_image_read(p.encode(), ctypes.byref(img)))
            owned = True
        elif isinstance(image, (bytes, bytearray, memoryview)):
            fd, tmp = tempfile.mkstemp(prefix="clformer-", suffix=".img")
            with os.fdopen(fd, "wb") as f:
                f.write(bytes(image))
            _errors.check(lib.clf_image_read(tmp.encode(), ctypes.byref(img)))
            owned = True
        elif isinstance(image, np.ndarray):
            if image.dtype != np.uint8:
                raise _errors.DtypeError(f"{name}: an image array must be uint8, got {image.dtype}")
            if image.ndim != 3 or image.shape[2] != 3 or image.shape[0] < 1 or image.shape[1] < 1:
                raise _errors.ShapeError(f"{name}: an image array must be [height, width, 3] RGB, got "
                                         f"{list(image.shape)}")
            if image.shape[0] > 2 ** 31 - 1 or image.shape[1] > 2 ** 31 - 1:
                raise _errors.ShapeError(f"{name}: the image is too large")
            arr = np.ascontiguousarray(image)
            img.width, img.height, img.rgb = arr.shape[1], arr.shape[0], arr.ctypes.data
        else:
            raise _errors.InvalidArgumentError(f"{name}: an image is a path, the bytes of a PNG/JPEG file or a "
                                               f"uint8 array [H, W, 3], not {type(image).__name__}")
        pv = _lib.Array()
        _errors.check(lib.clf_image_preprocess_with(ctypes.byref(img), ctypes.byref(proc), ctypes.byref(pv)))
        return _arrays.take(pv)
    finally:
        if owned:
            lib.clf_image_free(ctypes.byref(img))
        if tmp:
            os.unlink(tmp)


def classify(model: Any, images: Any, top_k: int = 5) -> list[list[tuple[str, float]]]:
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1:
        raise _errors.InvalidArgumentError(f"top_k must be an int >= 1, got {top_k!r}")
    single = isinstance(images, (str, os.PathLike, bytes, bytearray, memoryview, np.ndarray))
    items = [images] if single else list(images) if isinstance(images, Sequence) else None
    if not items:
        raise _errors.InvalidArgumentError("images must be an image or a non-empty sequence of images")
    proc = _lib.ImageProcessor()
    _errors.check(_lib.lib.clf_image_processor_load(model.path.encode(), ctypes.byref(proc)))
    pv = [_rgb(f"images[{i}]", im, model.path, proc) for i, im in enumerate(items)]
    batch = np.concatenate(pv, axis=0)
    logits = model.run({"pixel_values": batch}, ["logits"])["logits"]
    if logits.ndim != 2 or logits.shape[0] != len(items) or logits.shape[1] == 0:
        raise _errors.UnsupportedError(f"the model's logits are {list(logits.shape)}, not [{len(items)}, num_labels]")
    k = min(int(top_k), logits.shape[1])
    labels = model.labels
    return [[(labels[j] if j < len(labels) else f"LABEL_{j}", p) for j, p in _softmax_top(row, k)] for row in logits]
