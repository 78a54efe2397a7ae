"""_tasks.py - embed(), classify() and classify_files(): what `clformer
embed` and `clformer classify` compute, through the same library calls
(clf_model_embed, clf_model_encode_text, clf_softmax_top_k), so that both
give the same numbers bit for bit.  classify() never takes a path (a server
passes it what clients send); local files go through classify_files()."""
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
        m = model._runs("embed")
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


def _image_of_file(name: str, path: str, img: _lib.Image) -> None:
    _errors.check(_lib.lib.clf_image_read(_lib.cpath(path, name), ctypes.byref(img)))


def _image_of_bytes(name: str, data: Any, img: _lib.Image) -> None:
    """Decodes the bytes of a PNG/JPEG file.  The library reads files, so the
    bytes go through a temporary one in a directory of their own (mode 0700,
    the file 0600, made with O_EXCL), removed before this returns."""
    with tempfile.TemporaryDirectory(prefix="clformer-") as d:
        tmp = os.path.join(d, "image")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        st = _lib.lib.clf_image_read(_lib.cpath(tmp), ctypes.byref(img))
        if st != 0:
            raise _errors.from_status(st, message=f"{name}: the bytes are not a readable PNG or JPEG: "
                                      + _lib.text(_lib.lib.clf_last_error(None)).replace(tmp, "<bytes>"))


def _image_of_array(name: str, image: np.ndarray, img: _lib.Image) -> np.ndarray:
    """Points img at the array's pixels; returns the array that holds them."""
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
    return arr


_NOT_A_PATH = ("{name}: an image classifier's classify() takes an image's bytes or an RGB array, not a {type} "
               "(a path is never opened there: use classify_files() for local files)")


def _pixels(name: str, image: Any, proc: _lib.ImageProcessor, is_path: bool) -> np.ndarray:
    """One image preprocessed to pixel_values [1, 3, H, W]: a file when
    is_path (classify_files), else the bytes of one or an RGB array."""
    lib = _lib.lib
    img = _lib.Image()
    owned = False
    pixels = None  # an array img points into, alive until the end
    try:
        if is_path:
            _image_of_file(name, image, img)
            owned = True
        elif isinstance(image, (bytes, bytearray, memoryview)):
            _image_of_bytes(name, image, img)
            owned = True
        elif isinstance(image, np.ndarray):
            pixels = _image_of_array(name, image, img)
        elif isinstance(image, (str, os.PathLike)):
            raise _errors.InvalidArgumentError(_NOT_A_PATH.format(name=name, type=type(image).__name__))
        else:
            raise _errors.InvalidArgumentError(f"{name}: an image is the bytes of a PNG/JPEG file or a uint8 array "
                                               f"[H, W, 3], not {type(image).__name__}")
        pv = _lib.Array()
        _errors.check(lib.clf_image_preprocess_with(ctypes.byref(img), ctypes.byref(proc), ctypes.byref(pv)))
        del pixels
        return _arrays.take(pv)
    finally:
        if owned:
            lib.clf_image_free(ctypes.byref(img))


def _label(model: Any, j: int) -> str:
    return model.labels[j] if j < len(model.labels) else f"LABEL_{j}"


def _rank(model: Any, logits: np.ndarray, n: int, top_k: int) -> list[list[tuple[str, float]]]:
    if logits.ndim != 2 or logits.shape[0] != n or logits.shape[1] == 0:
        raise _errors.UnsupportedError(f"the model's logits are {list(logits.shape)}, not [{n}, num_labels] "
                                       "(not a classifier)")
    k = min(int(top_k), logits.shape[1])
    return [[(_label(model, j), p) for j, p in softmax_top(row, k)] for row in logits]


def _encode_text(model: Any, text: str, what: str) -> dict[str, np.ndarray]:
    """One text as the model's inputs by the library's rule
    (clf_model_encode_text), the one `clformer classify` follows."""
    c = c_text(text, what)
    arrays = (_lib.Array * 3)()
    n_in = ctypes.c_size_t()
    with model._lock:
        m = model._live()
        with model._tok.locked() as tok:
            st = _lib.lib.clf_model_encode_text(m, tok, c, arrays, ctypes.byref(n_in))
        if st != 0:
            raise model._fail(st)
    return {arrays[k].name.decode(): _arrays.take(arrays[k]) for k in range(n_in.value)}


def _classify_texts(model: Any, texts: list[str], top_k: int) -> list[list[tuple[str, float]]]:
    """Each text alone, as `clformer classify` does for a text classifier."""
    out = []
    for i, t in enumerate(texts):
        inp = _encode_text(model, t, f"texts[{i}]")
        out += _rank(model, model.run(inp, ["logits"])["logits"], 1, top_k)
    return out


def _top_k(top_k: Any) -> int:
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1:
        raise _errors.InvalidArgumentError(f"top_k must be an int >= 1, got {top_k!r}")
    return int(top_k)


def _is_image_classifier(model: Any) -> bool:
    if "logits" not in model.output_names:
        raise _errors.UnsupportedError(f"this {model.model_type} model gives no logits (not a classifier)")
    # no image processor: a text classifier, as `clformer classify` decides
    return os.path.exists(os.path.join(model.path, "preprocessor_config.json"))


def _classify_images(model: Any, items: list, top_k: int, is_path: bool) -> list[list[tuple[str, float]]]:
    proc = _lib.ImageProcessor()
    _errors.check(_lib.lib.clf_image_processor_load(_lib.cpath(model.path), ctypes.byref(proc)))
    pv = [_pixels(f"images[{i}]", im, proc, is_path) for i, im in enumerate(items)]
    if any(p.shape != pv[0].shape for p in pv):
        raise _errors.ShapeError("the preprocessed images differ in size")
    logits = model.run({"pixel_values": np.concatenate(pv, axis=0)}, ["logits"])["logits"]
    return _rank(model, logits, len(items), top_k)


def classify(model: Any, inputs: Any, top_k: int = 5) -> list[list[tuple[str, float]]]:
    """Images as bytes or arrays (an image classifier), texts (a text
    classifier); never a path."""
    top_k = _top_k(top_k)
    if not _is_image_classifier(model):
        return _classify_texts(model, _texts(inputs), top_k)
    single = isinstance(inputs, (str, os.PathLike, bytes, bytearray, memoryview, np.ndarray))
    items = [inputs] if single else list(inputs) if isinstance(inputs, Sequence) else None
    if not items:
        raise _errors.InvalidArgumentError("images must be an image or a non-empty sequence of images")
    for i, im in enumerate(items):  # all refused before any is decoded
        if isinstance(im, (str, os.PathLike)):
            raise _errors.InvalidArgumentError(_NOT_A_PATH.format(name=f"images[{i}]", type=type(im).__name__))
    return _classify_images(model, items, top_k, False)


def classify_files(model: Any, paths: Any, top_k: int = 5) -> list[list[tuple[str, float]]]:
    """Local PNG/JPEG files (str or os.PathLike) on an image classifier."""
    top_k = _top_k(top_k)
    single = isinstance(paths, (str, os.PathLike, bytes, bytearray, memoryview))
    items = [paths] if single else list(paths) if isinstance(paths, Sequence) else None
    if not items:
        raise _errors.InvalidArgumentError("paths must be a path or a non-empty sequence of paths")
    out = []
    for i, p in enumerate(items):
        if not isinstance(p, (str, os.PathLike)):
            raise _errors.InvalidArgumentError(
                f"paths[{i}]: classify_files() takes paths (str or os.PathLike), not {type(p).__name__}; "
                "use classify() for an image's bytes or pixels")
        path = os.fspath(p)
        if not isinstance(path, str):
            raise _errors.InvalidArgumentError(f"paths[{i}]: a path as str, not {type(path).__name__}")
        if "\0" in path or not path:
            raise _errors.InvalidArgumentError(f"paths[{i}]: not a usable path")
        out.append(path)
    if not _is_image_classifier(model):
        raise _errors.UnsupportedError(f"this {model.model_type} model is a text classifier (no "
                                       "preprocessor_config.json): classify() takes its texts")
    return _classify_images(model, out, top_k, True)
