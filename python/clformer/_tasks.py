"""_tasks.py - embed() and classify(): what `clformer embed` and `clformer
classify` compute, through the same library calls (clf_model_embed,
clf_softmax_top_k), so that both give the same numbers bit for bit."""
from __future__ import annotations

import ctypes
import os
import tempfile
from typing import Any, Sequence

import numpy as np

from . import _arrays, _errors, _lib
from ._text import c_text


def _texts(texts: Any) -> list[str]:
    if isinstance(texts, str):
        return [texts]
    if texts is None or isinstance(texts, (bytes, bytearray)) or not isinstance(texts, Sequence):
        raise _errors.InvalidArgumentError(f"texts must be a str or a sequence of str, not {type(texts).__name__}")
    out = list(texts)
    if not out:
        raise _errors.InvalidArgumentError("texts is empty")
    for i, t in enumerate(out):
        c_text(t, f"texts[{i}]")
    return out


def embed(model: Any, texts: Any) -> np.ndarray:
    items = [c_text(t, f"texts[{i}]") for i, t in enumerate(_texts(texts))]
    c_texts = (ctypes.c_char_p * len(items))(*items)
    out = _lib.Array()
    with model._lock:
        m = model._live()
        with model._tok.locked() as tok:
            st = _lib.lib.clf_model_embed(m, tok, c_texts, len(items), ctypes.byref(out))
        if st != 0:
            raise model._fail(st)
    return _arrays.take(out)


def softmax_top(logits: np.ndarray, k: int) -> list[tuple[int, float]]:
    """(index, probability) of the k most probable, as clf_softmax_top_k ranks them."""
    row = np.ascontiguousarray(logits, dtype=np.float32)
    n = row.size
    p = (ctypes.c_double * n)()
    top = (ctypes.c_size_t * max(k, 1))()
    _errors.check(_lib.lib.clf_softmax_top_k(row.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), n, k, p, top))
    return [(int(top[j]), float(p[top[j]])) for j in range(k)]


def _pixels(name: str, image: Any, proc: _lib.ImageProcessor) -> np.ndarray:
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
            _errors.check(lib.clf_image_read(_lib.cpath(p, name), ctypes.byref(img)))
            owned = True
        elif isinstance(image, (bytes, bytearray, memoryview)):
            # the library reads files; the bytes go through a private temporary one
            fd, tmp = tempfile.mkstemp(prefix="clformer-", suffix=".img")
            with os.fdopen(fd, "wb") as f:
                f.write(bytes(image))
            st = lib.clf_image_read(_lib.cpath(tmp), ctypes.byref(img))
            if st != 0:
                raise _errors.from_status(st, message=f"{name}: the bytes are not a readable PNG or JPEG: "
                                                      + _lib.text(lib.clf_last_error(None)).replace(tmp, "<bytes>"))
            owned = True
        elif isinstance(image, np.ndarray):
            if image.dtype.kind not in "iu":
                raise _errors.DtypeError(f"{name}: an image array holds uint8 RGB values, got {image.dtype}")
            if image.dtype != np.uint8:  # other integers: converted once when every value is a byte
                if image.size and (image.min() < 0 or image.max() > 255):
                    raise _errors.InvalidArgumentError(f"{name}: image values must be in [0, 255]")
                image = image.astype(np.uint8)
            if image.ndim != 3 or image.shape[2] != 3 or image.shape[0] < 1 or image.shape[1] < 1:
                raise _errors.ShapeError(f"{name}: an image array must be [height, width, 3] RGB, got "
                                         f"{list(image.shape)}")
            if max(image.shape[0], image.shape[1]) > 2 ** 31 - 1:
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


def _label(model: Any, j: int) -> str:
    return model.labels[j] if j < len(model.labels) else f"LABEL_{j}"


def _rank(model: Any, logits: np.ndarray, n: int, top_k: int) -> list[list[tuple[str, float]]]:
    if logits.ndim != 2 or logits.shape[0] != n or logits.shape[1] == 0:
        raise _errors.UnsupportedError(f"the model's logits are {list(logits.shape)}, not [{n}, num_labels] "
                                       "(not a classifier)")
    k = min(int(top_k), logits.shape[1])
    return [[(_label(model, j), p) for j, p in softmax_top(row, k)] for row in logits]


def _classify_texts(model: Any, texts: list[str], top_k: int) -> list[list[tuple[str, float]]]:
    """Each text alone, as `clformer classify` does for a text classifier."""
    gpt2 = model.model_type == "gpt2"
    names = model.input_names
    out = []
    for t in texts:
        ids = model.tokenize(t, not gpt2)[None, :]
        inp = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if not gpt2 and len(names) > 2 and names[2] == "token_type_ids":
            inp["token_type_ids"] = np.zeros_like(ids)
        out += _rank(model, model.run(inp, ["logits"])["logits"], 1, top_k)
    return out


def classify(model: Any, images: Any, top_k: int = 5) -> list[list[tuple[str, float]]]:
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1:
        raise _errors.InvalidArgumentError(f"top_k must be an int >= 1, got {top_k!r}")
    single = isinstance(images, (str, os.PathLike, bytes, bytearray, memoryview, np.ndarray))
    items = [images] if single else list(images) if isinstance(images, Sequence) else None
    if not items:
        raise _errors.InvalidArgumentError("images must be an image or a non-empty sequence of images")
    if "logits" not in model.output_names:
        raise _errors.UnsupportedError(f"this {model.model_type} model gives no logits (not a classifier)")
    if not os.path.exists(os.path.join(model.path, "preprocessor_config.json")):
        # no image processor: a text classifier, as `clformer classify` decides
        return _classify_texts(model, _texts(items), top_k)
    proc = _lib.ImageProcessor()
    _errors.check(_lib.lib.clf_image_processor_load(_lib.cpath(model.path), ctypes.byref(proc)))
    pv = [_pixels(f"images[{i}]", im, proc) for i, im in enumerate(items)]
    if any(p.shape != pv[0].shape for p in pv):
        raise _errors.ShapeError("the preprocessed images differ in size")
    logits = model.run({"pixel_values": np.concatenate(pv, axis=0)}, ["logits"])["logits"]
    return _rank(model, logits, len(items), top_k)
