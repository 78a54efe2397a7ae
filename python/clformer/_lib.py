"""_lib.py - finds libclformer and declares the part of include/clformer.h
that the package calls, through ctypes (no compiler needed at install).

Where the library comes from, first found wins:
  1. $CLFORMER_LIBRARY, a path to libclformer.so;
  2. the copy the wheel carries, beside this file (meson installs it there
     when built with -Dpython=enabled, as `pip install .` does);
  3. the system's: pkg-config's libdir for clformer, then the dynamic
     loader's search path (ldconfig), as ctypes.util.find_library sees it.
The library found must be the one the package was written for: one that
lacks a function the package calls, or lays out a struct the package
mirrors (STRUCTS) otherwise (the library tells its layouts: clf_struct_size,
clf_field_offset, clf_field_size), is refused with LayoutError naming the
difference, not passed over for the next.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import subprocess
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int, c_int64, c_long, c_size_t,
                    c_uint64, c_void_p)

MAX_DIMS = 6

GENERATE_OFF = -1


class DeviceDesc(Structure):
    _clf_name_ = "clf_device_desc"
    _fields_ = [
        ("platform_index", c_int),
        ("device_index", c_int),
        ("platform", c_void_p),
        ("device", c_void_p),
        ("type", c_uint64),
        ("platform_name", c_char * 128),
        ("device_name", c_char * 128),
        ("vendor", c_char * 128),
        ("driver_version", c_char * 64),
        ("device_version", c_char * 64),
    ]


class DtypeDesc(Structure):
    """One row of the library's element types (clf_dtype_at)."""
    _clf_name_ = "clf_dtype_desc"
    _fields_ = [
        ("dtype", c_int),
        ("name", c_char_p),
        ("weight_name", c_char_p),
        ("ggml_type", c_int),
        ("block", c_size_t),
        ("block_bytes", c_size_t),
        ("weights_target", c_int),
        ("from_f32", c_int),
        ("ggml_layout", c_int),
        ("linear_weight", c_int),
    ]


class GenerateSetting(Structure):
    """One row of the library's generation settings (clf_generate_setting_at)."""
    _clf_name_ = "clf_generate_setting"
    _fields_ = [
        ("name", c_char_p),
        ("type", c_int),
        ("min", c_double),
        ("max", c_double),
        ("min_excluded", c_int),
        ("has_default", c_int),
        ("default_value", c_double),
        ("sampling", c_int),
        ("whole", c_int),
        ("metavar", c_char_p),
        ("default_text", c_char_p),
        ("help", c_char_p),
    ]


LOG_FN = CFUNCTYPE(None, c_void_p, c_char_p)
PROGRESS_FN = CFUNCTYPE(None, c_void_p, c_size_t, c_size_t)
TOKEN_FN = CFUNCTYPE(c_int, c_void_p, c_size_t, c_int64)
TEXT_FN = CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t)


class ContextOptions(Structure):
    _clf_name_ = "clf_context_options"
    _fields_ = [
        ("device", c_char_p),
        ("profiling", c_int),
        ("cache_dir", c_char_p),
        ("kernel_dir", c_char_p),
        ("log", LOG_FN),
        ("log_user", c_void_p),
        ("device_class", c_char_p),
        ("limits", c_char_p),
        ("progress", LOG_FN),  # (user, what): long work begins; what NULL: it ended
        ("progress_user", c_void_p),
    ]


class Array(Structure):
    _clf_name_ = "clf_array"
    _fields_ = [
        ("name", c_char * 64),
        ("dtype", c_int),
        ("ndim", c_int),
        ("shape", c_size_t * MAX_DIMS),
        ("data", c_void_p),
    ]


class ModelOptions(Structure):
    _clf_name_ = "clf_model_options"
    _fields_ = [
        ("weights", c_int),
        ("simulate", c_int),
        ("progress", PROGRESS_FN),
        ("progress_user", c_void_p),
    ]


class GenerateOptions(Structure):
    _clf_name_ = "clf_generate_options"
    _fields_ = [
        ("max_new_tokens", c_size_t),
        ("num_beams", c_size_t),
        ("do_sample", c_int),
        ("temperature", c_double),
        ("top_k", c_long),
        ("top_p", c_double),
        ("min_p", c_double),
        ("repetition_penalty", c_double),
        ("no_repeat_ngram_size", c_long),
        ("seed", c_uint64),
        ("on_token", TOKEN_FN),
        ("user", c_void_p),
        ("eos_token_ids", POINTER(c_int64)),
        ("n_eos_token_ids", c_size_t),
    ]


class ChatOptions(Structure):
    _clf_name_ = "clf_chat_options"
    _fields_ = [
        ("generate", GenerateOptions),
        ("stop", POINTER(c_char_p)),
        ("n_stop", c_size_t),
        ("on_text", TEXT_FN),
        ("user", c_void_p),
    ]


class TemplateBudget(Structure):
    _clf_name_ = "clf_template_budget"
    _fields_ = [("steps", c_uint64), ("bytes", c_uint64), ("memory", c_uint64)]


class ChatTurn(Structure):
    _clf_name_ = "clf_chat_turn"
    _fields_ = [
        ("prompt_tokens", c_size_t),
        ("reused_tokens", c_size_t),
        ("new_tokens", c_size_t),
        ("finished", c_int),
    ]


class Image(Structure):
    _clf_name_ = "clf_image"
    _fields_ = [("width", c_int), ("height", c_int), ("rgb", c_void_p)]


class ImageProcessor(Structure):
    _clf_name_ = "clf_image_processor"
    _fields_ = [
        ("do_resize", c_int),
        ("width", c_int),
        ("height", c_int),
        ("resample", c_int),
        ("do_rescale", c_int),
        ("rescale_factor", c_double),
        ("do_normalize", c_int),
        ("mean", c_double * 3),
        ("std", c_double * 3),
    ]


class SequenceEnd(Structure):
    _clf_name_ = "clf_sequence_end"
    _fields_ = [
        ("why", c_int),
        ("error", c_char_p),
        ("prompt_tokens", c_size_t),
        ("new_tokens", c_size_t),
        ("cached_tokens", c_size_t),
    ]


class TokenInfo(Structure):
    _clf_name_ = "clf_token_info"
    _fields_ = [
        ("token", c_int64),
        ("logprob", c_float),
        ("n_top", c_size_t),
        ("top_tokens", POINTER(c_int64)),
        ("top_logprobs", POINTER(c_float)),
    ]


ENGINE_TOKEN_FN = CFUNCTYPE(c_int, c_void_p, c_uint64, c_int64)  # (user, id, token) -> non-zero: stop it
ENGINE_DONE_FN = CFUNCTYPE(None, c_void_p, c_uint64, POINTER(SequenceEnd))  # (user, id, how it ended)
ENGINE_INFO_FN = CFUNCTYPE(c_int, c_void_p, c_uint64, POINTER(TokenInfo))  # (user, id, token and logprobs)
# (user, id, tokens, n, mask, vocab) -> non-zero: stop it
ENGINE_ALLOWED_FN = CFUNCTYPE(c_int, c_void_p, c_uint64, POINTER(c_int64), c_size_t, POINTER(ctypes.c_uint32), c_size_t)


class EngineOptions(Structure):
    _clf_name_ = "clf_engine_options"
    _fields_ = [
        ("kv_bytes", c_size_t),
        ("block_size", c_size_t),
        ("max_step_rows", c_size_t),
        ("max_sequences", c_size_t),
        ("kv_dtype", c_int),
    ]


class EngineRequest(Structure):
    _clf_name_ = "clf_engine_request"
    _fields_ = [
        ("ids", POINTER(c_int64)),
        ("n_ids", c_size_t),
        ("options", POINTER(GenerateOptions)),
        ("isolation", c_uint64),
        ("on_token", ENGINE_TOKEN_FN),
        ("on_done", ENGINE_DONE_FN),
        ("user", c_void_p),
        ("n", c_size_t),
        ("on_token_info", ENGINE_INFO_FN),
        ("top_logprobs", c_size_t),
        ("allowed", ENGINE_ALLOWED_FN),
    ]


class EngineStats(Structure):
    _clf_name_ = "clf_engine_stats"
    _fields_ = [(n, c_size_t) for n in ("blocks", "block_size", "block_bytes", "blocks_used", "blocks_cached",
                                         "running", "waiting", "prefix_tokens_reused", "preemptions",
                                         "blocks_copied", "steps", "rows", "window_blocks",
                                         "window_block_bytes", "window_blocks_used")]


# Every struct the package mirrors; _load checks each against the library's
# layout (clf_struct_size, clf_field_offset, clf_field_size).
STRUCTS = (DeviceDesc, DtypeDesc, GenerateSetting, ContextOptions, Array, ModelOptions, GenerateOptions, ChatOptions, TemplateBudget,
           ChatTurn, Image, ImageProcessor, EngineOptions, EngineRequest, EngineStats, SequenceEnd, TokenInfo)

# name: (restype, argtypes).  c_void_p stands for the opaque handles.
_PROTOTYPES = {
    "clf_strerror": (c_char_p, [c_int]),
    "clf_status_name": (c_char_p, [c_int]),
    "clf_cl_error_name": (c_char_p, [c_int]),
    "clf_list_devices": (c_int, [POINTER(DeviceDesc), c_size_t, POINTER(c_size_t)]),
    "clf_select_device": (c_int, [c_char_p, POINTER(DeviceDesc)]),
    "clf_context_options_init": (None, [POINTER(ContextOptions)]),
    "clf_context_create": (c_int, [POINTER(ContextOptions), POINTER(c_void_p)]),
    "clf_context_destroy": (None, [c_void_p]),
    "clf_last_error": (c_char_p, [c_void_p]),
    "clf_last_cl_error": (c_int, [c_void_p]),
    "clf_last_build_log": (c_char_p, [c_void_p]),
    "clf_clear_error": (None, [c_void_p]),
    "clf_context_device": (POINTER(DeviceDesc), [c_void_p]),
    "clf_context_cache_dir": (c_char_p, [c_void_p]),
    "clf_weight_type_from_name": (c_int, [c_char_p, POINTER(c_int)]),
    "clf_dtype_count": (c_size_t, []),
    "clf_dtype_at": (c_int, [c_size_t, POINTER(DtypeDesc)]),
    "clf_generate_setting_count": (c_size_t, []),
    "clf_generate_setting_at": (c_int, [c_size_t, POINTER(GenerateSetting)]),
    "clf_array_free": (None, [POINTER(Array)]),
    "clf_model_options_init": (None, [POINTER(ModelOptions)]),
    "clf_model_load_with": (c_int, [c_void_p, c_char_p, POINTER(ModelOptions), POINTER(c_void_p)]),
    "clf_model_destroy": (None, [c_void_p]),
    "clf_model_weight_bytes": (c_size_t, [c_void_p]),
    "clf_model_max_positions": (c_size_t, [c_void_p]),
    "clf_model_type": (c_char_p, [c_void_p]),
    "clf_model_pooling": (c_char_p, [c_void_p]),
    "clf_model_input_names": (c_size_t, [c_void_p, POINTER(POINTER(c_char_p))]),
    "clf_model_output_names": (c_size_t, [c_void_p, POINTER(POINTER(c_char_p))]),
    "clf_model_run": (c_int, [c_void_p, POINTER(Array), c_size_t, POINTER(c_char_p), c_size_t, POINTER(Array)]),
    "clf_model_num_labels": (c_size_t, [c_void_p]),
    "clf_model_label": (c_char_p, [c_void_p, c_size_t]),
    "clf_model_is_encoder_decoder": (c_int, [c_void_p]),
    "clf_generate_options_init": (None, [POINTER(GenerateOptions)]),
    "clf_model_generate": (c_int, [c_void_p, POINTER(Array), POINTER(Array), POINTER(GenerateOptions),
                                   POINTER(Array)]),
    "clf_engine_options_init": (None, [POINTER(EngineOptions)]),
    "clf_engine_create": (c_int, [c_void_p, POINTER(EngineOptions), POINTER(c_void_p)]),
    "clf_engine_submit": (c_int, [c_void_p, POINTER(EngineRequest), POINTER(c_uint64)]),
    "clf_engine_cancel": (c_int, [c_void_p, c_uint64]),
    "clf_engine_step": (c_int, [c_void_p, POINTER(c_size_t)]),
    "clf_engine_stats_get": (c_int, [c_void_p, POINTER(EngineStats)]),
    "clf_engine_destroy": (None, [c_void_p]),
    "clf_finish_name": (c_char_p, [c_int]),
    "clf_tokenizer_load": (c_int, [c_char_p, POINTER(c_void_p)]),
    "clf_tokenizer_destroy": (None, [c_void_p]),
    "clf_tokenizer_encode": (c_int, [c_void_p, c_char_p, c_int, POINTER(POINTER(c_int64)), POINTER(c_size_t)]),
    "clf_tokenizer_decode": (c_int, [c_void_p, POINTER(c_int64), c_size_t, c_int, POINTER(c_void_p)]),
    "clf_tokenizer_token": (c_int, [c_void_p, c_int64, POINTER(c_char_p)]),
    "clf_text_stream_create": (c_int, [c_void_p, POINTER(c_char_p), c_size_t, POINTER(c_void_p)]),
    "clf_text_stream_push": (c_int, [c_void_p, c_int64, POINTER(c_void_p), POINTER(c_size_t), POINTER(c_int)]),
    "clf_text_stream_finish": (c_int, [c_void_p, POINTER(c_void_p), POINTER(c_size_t)]),
    "clf_text_stream_stopped": (c_int, [c_void_p]),
    "clf_text_stream_destroy": (None, [c_void_p]),
    "clf_tokenizer_chat_template": (c_int, [c_void_p, POINTER(c_void_p)]),
    "clf_chat_template_render_json": (c_int, [c_void_p, c_char_p, POINTER(c_void_p)]),
    "clf_chat_template_destroy": (None, [c_void_p]),
    "clf_chat_template_set_budget": (c_int, [c_void_p, POINTER(TemplateBudget)]),
    "clf_chat_set_template_budget": (c_int, [c_void_p, POINTER(TemplateBudget)]),
    "clf_chat_options_init": (None, [POINTER(ChatOptions)]),
    "clf_chat_create": (c_int, [c_void_p, c_void_p, c_void_p, POINTER(c_void_p)]),
    "clf_tokenizer_chat_template_parse": (c_int, [c_void_p, c_char_p, POINTER(c_void_p)]),
    "clf_chat_destroy": (None, [c_void_p]),
    "clf_chat_add_json": (c_int, [c_void_p, c_char_p]),
    "clf_chat_clear": (None, [c_void_p]),
    "clf_chat_respond": (c_int, [c_void_p, POINTER(ChatOptions), POINTER(c_void_p), POINTER(ChatTurn)]),
    "clf_model_embed": (c_int, [c_void_p, c_void_p, POINTER(c_char_p), c_size_t, POINTER(Array)]),
    "clf_model_encode_text": (c_int, [c_void_p, c_void_p, c_char_p, POINTER(Array), POINTER(c_size_t)]),
    "clf_softmax_top_k": (c_int, [POINTER(ctypes.c_float), c_size_t, c_size_t, POINTER(c_double), POINTER(c_size_t)]),
    "clf_image_read": (c_int, [c_char_p, POINTER(Image)]),
    "clf_image_free": (None, [POINTER(Image)]),
    "clf_image_processor_load": (c_int, [c_char_p, POINTER(ImageProcessor)]),
    "clf_image_preprocess_with": (c_int, [POINTER(Image), POINTER(ImageProcessor), POINTER(Array)]),
    "clf_struct_size": (c_size_t, [c_char_p]),
    "clf_field_offset": (c_size_t, [c_char_p, c_char_p]),
    "clf_field_size": (c_size_t, [c_char_p, c_char_p]),
}

# CLF_LAYOUT_UNKNOWN, the layout functions' answer for a name they do not know.
_LAYOUT_UNKNOWN = 2 ** (8 * ctypes.sizeof(c_size_t)) - 1


class LayoutError(ImportError):
    """The library lays out a struct the package mirrors differently (or
    lacks a function the package calls): the two are from different
    versions, and the package would read and write the wrong bytes."""


def layout_problems(library: ctypes.CDLL, structs) -> list[str]:
    """How the library's layout of each ctypes Structure in `structs` (named
    by its _clf_name_, the C name) differs from the Structure's: a missing
    struct or field, a field at another offset or of another size, another
    struct size; [] when they agree."""
    problems = []
    for cls in structs:
        name = cls._clf_name_
        size = library.clf_struct_size(name.encode())
        if size == _LAYOUT_UNKNOWN:
            problems.append(f"the library has no struct {name}")
            continue
        for field, *_ in cls._fields_:
            mine = getattr(cls, field)
            offset = library.clf_field_offset(name.encode(), field.encode())
            if offset == _LAYOUT_UNKNOWN:
                problems.append(f"the library's {name} has no field {field}, this package expects one at offset "
                                f"{mine.offset}")
            elif offset != mine.offset:
                problems.append(f"the library's {name}.{field} is at offset {offset}, this package expects "
                                f"{mine.offset}")
            else:
                fsize = library.clf_field_size(name.encode(), field.encode())
                if fsize != mine.size:
                    problems.append(f"the library's {name}.{field} is {fsize} bytes, this package expects "
                                    f"{mine.size}")
        if size != ctypes.sizeof(cls):
            problems.append(f"the library's {name} is {size} bytes, this package expects {ctypes.sizeof(cls)}")
    return problems


def check_layouts(library: ctypes.CDLL, structs, where: str) -> None:
    """Raises LayoutError naming every difference layout_problems finds
    between `structs` and the library at `where`."""
    problems = layout_problems(library, structs)
    if problems:
        raise LayoutError(f"clformer: {'; '.join(problems)}: the package and {where} are from different versions")


def _pkg_config_libdir() -> str | None:
    try:
        out = subprocess.run(["pkg-config", "--variable=libdir", "clformer"], capture_output=True, text=True,
                             timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _candidates() -> list[str]:
    env = os.environ.get("CLFORMER_LIBRARY")
    if env:
        return [env]  # an explicit choice is not second-guessed
    here = os.path.dirname(os.path.abspath(__file__))
    found = sorted(glob.glob(os.path.join(here, "libclformer.so*")), key=len)
    libdir = _pkg_config_libdir()
    if libdir:
        found += sorted(glob.glob(os.path.join(libdir, "libclformer.so*")), key=len)
    system = ctypes.util.find_library("clformer")
    if system:
        found.append(system)
    return found


def _load() -> tuple[ctypes.CDLL, str]:
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path}: {e}")
            continue
        for name, (res, args) in _PROTOTYPES.items():
            try:
                fn = getattr(lib, name)
            except AttributeError:
                # found, but not what this package was written for: refused, not passed over
                raise LayoutError(f"clformer: the library has no function {name}: the package and {path} are "
                                  "from different versions") from None
            fn.restype = res
            fn.argtypes = args
        check_layouts(lib, STRUCTS, path)
        return lib, path
    where = "; ".join(tried) if tried else "none found"
    raise ImportError("clformer: cannot load libclformer (set $CLFORMER_LIBRARY to its path, install the wheel, "
                      f"or install the library where pkg-config or ldconfig find it): {where}")


lib, path = _load()


def _dtypes() -> dict[str, DtypeDesc]:
    rows = {}
    for i in range(lib.clf_dtype_count()):
        d = DtypeDesc()
        if lib.clf_dtype_at(i, ctypes.byref(d)) == 0:
            rows[d.name.decode()] = d
    return rows


# clf_dtype as the library lists it (clf_dtype_at), by name ("q4_k"); the
# values the package passes; and the names clf_model_options.weights takes
# (--weights: "f32", ..., "stored"), in the library's order.
DTYPES = _dtypes()
F32, F16, I32, I64 = (DTYPES[n].dtype for n in ("f32", "f16", "i32", "i64"))
WEIGHT_TYPES = tuple(d.weight_name.decode() for d in DTYPES.values() if d.weights_target)


def _generate_settings() -> dict[str, GenerateSetting]:
    rows = {}
    for i in range(lib.clf_generate_setting_count()):
        g = GenerateSetting()
        if lib.clf_generate_setting_at(i, ctypes.byref(g)) == 0:
            rows[g.name.decode()] = g
    return rows


# The generation settings as the library lists them (clf_generate_setting_at),
# by name ("top_k"), in its order: their types, ranges, defaults and help.
GENERATE_SETTINGS = _generate_settings()
GEN_INT, GEN_REAL, GEN_BOOL = 0, 1, 2  # clf_generate_setting_type


def text(b: bytes | None) -> str:
    """A C string from the library as str (invalid UTF-8 replaced)."""
    return b.decode("utf-8", "replace") if b else ""


def cpath(path: str, what: str = "path") -> bytes:
    """A path as the bytes the C library opens (os.fsencode), or
    InvalidArgumentError when it has none."""
    try:
        return os.fsencode(path)
    except UnicodeEncodeError as e:
        from . import _errors
        raise _errors.InvalidArgumentError(f"{what} cannot be encoded for the file system: {e}") from None


def cstr(value: str, what: str) -> bytes:
    """A str as NUL-terminated UTF-8, or InvalidArgumentError."""
    from . import _errors
    if "\0" in value:
        raise _errors.InvalidArgumentError(f"{what} contains a NUL character")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise _errors.InvalidArgumentError(f"{what} is not valid Unicode: {e}") from None
