"""_generate.py - generate()'s keyword settings as clf_generate_options, and
the streaming of text pieces through the library's on_token callback."""
from __future__ import annotations

import ctypes
import math
import queue
import sys
import threading
from typing import Any, Iterator, Optional, Sequence, TypedDict, Union

import numpy as np

from . import _errors, _lib

OFF = _lib.GENERATE_OFF
WAIT_SLICE_S = 0.1  # the longest a pending Ctrl-C waits in queued_pieces


def piece_queue() -> "queue.SimpleQueue[Any]":
    """The queue between a stream's worker and the iterating thread: C's
    SimpleQueue, whose put and get hold no Python-level lock.  queue.Queue's
    get takes its mutex in Python code: a Ctrl-C taken by another thread
    while the main thread waited for that mutex was raised just after the
    acquire, leaving the mutex held, and the worker's next put then waited
    for it forever (CI, stop 58: a 20 s hang in test_shutdown)."""
    return queue.SimpleQueue()


class GenerationSettings(TypedDict, total=False):
    """The keyword settings of Model.generate, stream, chat and chat_stream,
    for editors and type checkers (`**kwargs: Unpack[GenerationSettings]`).
    Each may be left out or None: the checkpoint's generation_config.json,
    else transformers' default.  They are the library's list of generation
    settings (clf_generate_setting_at; `clformer.generation_settings()`
    gives each one's range, default and help), the same as `clformer
    generate`'s options and the server's fields; a test fails when this
    class and that list part.

    max_new_tokens: new tokens at most (1 .. 1000000).
    num_beams: beam search with this many beams (1: greedy or sampling).
    do_sample: multinomial sampling (False: greedy or beams, even where the
        checkpoint samples).
    temperature: scores divided by it; 0 is greedy (default 1).
    top_k: keep the k highest scores; 0: no top-k (default 50).
    top_p: nucleus in (0, 1]; 1: off (default).
    min_p: drop probabilities below min_p times the highest; 0: off (default).
    repetition_penalty: > 0; 1: off (default).
    no_repeat_ngram_size: no n-gram twice; 0: off (default).
    seed: 0 .. 9e18, the same as the CLI's --seed and the server's seed
        (default: a fresh one per call).
    eos_token_id: an id or up to 8 replacing the checkpoint's end tokens.
    temperature, top_k, top_p or min_p given without do_sample turn sampling on.
    """
    max_new_tokens: Optional[int]
    num_beams: Optional[int]
    do_sample: Optional[bool]
    temperature: Optional[float]
    top_k: Optional[int]
    top_p: Optional[float]
    min_p: Optional[float]
    repetition_penalty: Optional[float]
    no_repeat_ngram_size: Optional[int]
    seed: Optional[int]
    eos_token_id: Union[int, Sequence[int], None]


# The library's rows, by name: types, ranges, defaults, help.
TABLE = _lib.GENERATE_SETTINGS
# Settings only sampling uses: given without do_sample, they turn it on.
_SAMPLING_ONLY = tuple(n for n, g in TABLE.items() if g.sampling)
# One list: the library's, which GenerationSettings above must name
# (eos_token_id is checked apart).
SETTINGS = tuple(TABLE)


def _typed_as(name: str) -> int:
    """What GenerationSettings declares `name` as, in the library's type codes."""
    ann = str(GenerationSettings.__annotations__.get(name))
    return _lib.GEN_BOOL if "bool" in ann else _lib.GEN_INT if "int" in ann else _lib.GEN_REAL


def table_drift() -> list[str]:
    """Where GenerationSettings and the library's list part: names on one
    side only, or a type that is not the library's.  [] when they agree."""
    typed = [k for k in GenerationSettings.__annotations__ if k != "eos_token_id"]
    out = [f"{k}: in GenerationSettings, not in the library's list" for k in typed if k not in TABLE]
    out += [f"{k}: in the library's list, not in GenerationSettings" for k in TABLE if k not in typed]
    out += [f"{k}: GenerationSettings' type is not the library's" for k in typed
            if k in TABLE and _typed_as(k) != TABLE[k].type]
    return out


def generation_settings() -> list[dict[str, Any]]:
    """The library's generation settings (clf_generate_setting_at), in its
    order, each as {"name", "type" (int, float or bool), "min", "max",
    "min_excluded", "default" (None: no value, see default_text),
    "default_text", "sampling" (only sampling uses it, and giving it turns
    sampling on), "whole" (decodes whole sequences: not in chat or the
    server), "help"}: what GenerationSettings, `clformer generate`'s options
    and the server's fields take."""
    kinds = {_lib.GEN_INT: int, _lib.GEN_REAL: float, _lib.GEN_BOOL: bool}
    return [{"name": n, "type": kinds[g.type], "min": g.min, "max": g.max, "min_excluded": bool(g.min_excluded),
             "default": kinds[g.type](g.default_value) if g.has_default else None,
             "default_text": _lib.text(g.default_text), "sampling": bool(g.sampling), "whole": bool(g.whole),
             "help": _lib.text(g.help)} for n, g in TABLE.items()]


def check_setting(name: str, v: Any) -> Any:
    """One setting checked against the library's row: its type and range."""
    g = TABLE[name]
    if g.type == _lib.GEN_BOOL:
        if not isinstance(v, (bool, np.bool_)):
            raise _errors.InvalidArgumentError(f"{name} must be a bool, not {type(v).__name__}")
        return bool(v)
    if g.type == _lib.GEN_INT:
        return _int(name, v, int(g.min), int(g.max))
    return _float(name, v, g.min, g.max, bool(g.min_excluded))


def _int(name: str, v: Any, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise _errors.InvalidArgumentError(f"{name} must be an int, not {type(v).__name__}")
    v = int(v)
    if not lo <= v <= hi:
        raise _errors.InvalidArgumentError(f"{name} must be in [{lo}, {hi}], got {v}")
    return v


def _float(name: str, v: Any, lo: float, hi: float, lo_open: bool) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise _errors.InvalidArgumentError(f"{name} must be a number, not {type(v).__name__}")
    v = float(v)
    if math.isnan(v) or v > hi or v < lo or (lo_open and v == lo):
        raise _errors.InvalidArgumentError(f"{name} must be in {'(' if lo_open else '['}{lo:g}, {hi:g}], got {v}")
    return v


class GenerateSettings:
    """Checked settings; None means unset (the checkpoint's, else transformers' default)."""

    def __init__(self, **kw: Any):
        self.kw = kw

    def c_options(self) -> _lib.GenerateOptions:
        o = _lib.GenerateOptions()
        _lib.lib.clf_generate_options_init(ctypes.byref(o))
        k = self.kw
        if k.get("max_new_tokens") is not None:
            o.max_new_tokens = k["max_new_tokens"]
        if k.get("num_beams") is not None:
            o.num_beams = k["num_beams"]
        if k.get("temperature") == 0:  # temperature 0 is greedy, as in the CLI and the server
            o.do_sample = OFF
        elif k.get("do_sample") is not None:
            o.do_sample = 1 if k["do_sample"] else OFF
        elif any(k.get(n) is not None for n in _SAMPLING_ONLY):
            o.do_sample = 1  # a sampling setting given turns sampling on, as in the CLI
        if k.get("temperature"):
            o.temperature = k["temperature"]
        if k.get("top_k") is not None:
            o.top_k = k["top_k"] if k["top_k"] > 0 else OFF
        if k.get("top_p") is not None:
            o.top_p = k["top_p"]
        if k.get("min_p") is not None:
            o.min_p = k["min_p"] if k["min_p"] > 0 else OFF
        if k.get("repetition_penalty") is not None:
            o.repetition_penalty = k["repetition_penalty"]
        if k.get("no_repeat_ngram_size") is not None:
            o.no_repeat_ngram_size = k["no_repeat_ngram_size"] if k["no_repeat_ngram_size"] > 0 else OFF
        if k.get("seed") is not None:
            o.seed = k["seed"] + 1  # the library's 0 is "a fresh seed": seed s is its s + 1, 0 a seed
        if k.get("eos_token_id"):
            self._eos = (ctypes.c_int64 * len(k["eos_token_id"]))(*k["eos_token_id"])  # alive with self
            o.eos_token_ids = ctypes.cast(self._eos, ctypes.POINTER(ctypes.c_int64))
            o.n_eos_token_ids = len(k["eos_token_id"])
        return o


def settings_from(kwargs: dict) -> GenerateSettings:
    """generate()'s keyword arguments checked, before any C call."""
    unknown = [k for k in kwargs if k not in SETTINGS and k != "eos_token_id"]
    if unknown:
        raise _errors.InvalidArgumentError(f"unknown generation setting {unknown[0]!r}; the settings are "
                                           f"{', '.join(SETTINGS)}, eos_token_id")
    kw = {k: v for k, v in kwargs.items() if v is not None}
    out: dict[str, Any] = {}
    if "eos_token_id" in kw:
        eos = kw["eos_token_id"]
        eos = [eos] if isinstance(eos, (int, np.integer)) and not isinstance(eos, bool) else eos
        if isinstance(eos, (str, bytes)) or not hasattr(eos, "__iter__"):
            raise _errors.InvalidArgumentError(f"eos_token_id must be an int or a list of ints, not {eos!r}")
        eos = [_int("eos_token_id", e, 0, 2 ** 63 - 1) for e in eos]
        if not 1 <= len(eos) <= 8:
            raise _errors.InvalidArgumentError(f"eos_token_id: 1 to 8 ids, got {len(eos)}")
        out["eos_token_id"] = eos
    for name in SETTINGS:
        if name in kw:
            out[name] = check_setting(name, kw[name])
    if out.get("temperature") == 0 and out.get("do_sample"):
        raise _errors.InvalidArgumentError("temperature 0 is greedy decoding: sampling takes a temperature above 0")
    return GenerateSettings(**out)


class Streamer:
    """The text of the new tokens as they come, through the library's
    clf_text_stream (the rule `clformer generate --prompt` and chat print
    by): a character whose bytes are not all there is held back, so is the
    text after the last space (clean-up may rewrite " ," or " 's") and the
    last bytes a stop string could still be completing; the text ends
    before the first stop string."""

    _END = object()

    def __init__(self, model: Any, tok: Any, ids: np.ndarray, settings: GenerateSettings, stops: list[str]):
        self.model, self.tok, self.ids, self.settings = model, tok, ids, settings
        self.stops = [_lib.cstr(s, "stop") for s in stops]
        self.new: list[int] = []
        self.stopped = False
        self._stream: int | None = None

    def open(self) -> None:
        """Makes the clf_text_stream (over the tokenizer's handle)."""
        c_stops = (ctypes.c_char_p * max(1, len(self.stops)))(*self.stops)
        h = ctypes.c_void_p()
        with self.tok.locked() as tok:
            st = _lib.lib.clf_text_stream_create(tok, c_stops, len(self.stops), ctypes.byref(h))
        if st != 0:
            raise _errors.from_status(st)
        self._stream = h.value

    def close(self) -> None:
        if self._stream is not None:
            _lib.lib.clf_text_stream_destroy(self._stream)
            self._stream = None

    def __del__(self) -> None:
        self.close()

    def push(self, token: int | None, final: bool = False) -> bytes:
        """Adds a token (None: none; final: the end, everything held back
        given out); returns the bytes that may be handed out now."""
        text, n, stopped = ctypes.c_void_p(), ctypes.c_size_t(0), ctypes.c_int(0)
        lib = _lib.lib
        with self.tok.locked():  # the stream decodes with the tokenizer
            st = 0
            if token is not None:
                self.new.append(int(token))
                st = lib.clf_text_stream_push(self._stream, int(token), ctypes.byref(text), ctypes.byref(n),
                                              ctypes.byref(stopped))
            piece = ctypes.string_at(text.value, n.value) if st == 0 and n.value else b""
            if st == 0 and final:
                st = lib.clf_text_stream_finish(self._stream, ctypes.byref(text), ctypes.byref(n))
                piece += ctypes.string_at(text.value, n.value) if st == 0 and n.value else b""
        if st != 0:
            raise _errors.from_status(st)
        self.stopped = self.stopped or bool(lib.clf_text_stream_stopped(self._stream))
        return piece

    def pieces(self) -> Iterator[str]:
        """The worker thread runs the generation (under the model's lock) and
        queues the pieces; the generator hands them out.  Generation stops
        after the current token when the generator is closed or the stream
        cancelled (`cancel`), or when the model is closed or the interpreter
        exits (model._h.stop)."""
        q = piece_queue()
        cancel = threading.Event()
        failure: list[BaseException] = []
        h = self.model._h
        closed: list[bool] = []

        def on_token(user: Any, row: int, token: int) -> int:
            try:
                if h.stop:
                    closed.append(True)
                    return 1
                if cancel.is_set():
                    return 1
                piece = self.push(token)
                if piece:
                    q.put(piece.decode("utf-8", "replace"))
                return 1 if self.stopped else 0
            except BaseException as e:  # an exception must not cross the C frame
                failure.append(e)
                return 1

        callback = _lib.TOKEN_FN(on_token)

        self.open()

        def work() -> None:
            try:
                beams = not self.model._takes_on_token(self.settings)
                seq = self.model._generate(self.ids, None, self.settings, None if beams else callback)
                if failure:
                    raise failure[0]
                if closed:
                    raise self.model._closed_during("stream")
                out = b""
                if beams:  # the best sequence's tokens, known only at the end
                    start = 0 if self.model.is_encoder_decoder else self.ids.shape[1]
                    for t in seq[0, start:]:
                        if self.stopped:
                            break
                        out += self.push(int(t))
                if not self.stopped:
                    out += self.push(None, final=True)
                if out:
                    q.put(out.decode("utf-8", "replace"))
                q.put(self._END)
            except BaseException as e:
                q.put(e)
            finally:
                self.close()

        def generator() -> Iterator[str]:
            return queued_pieces(work, q, cancel, self._END, "clformer-stream")

        self.cancel = cancel
        return TextStream(self, generator())


def queued_pieces(work: Any, q: "queue.SimpleQueue[Any]", cancel: threading.Event, end: object,
                  name: str) -> Iterator[str]:
    """Runs work() on a worker thread and yields what it queues on q (a
    piece_queue()): text pieces, until `end` (an exception queued is raised
    here).  When the iteration ends, early or not, `cancel` is set and the
    worker joined: it ends after its current token (or its beam search).
    Not while the interpreter finalizes (a module's global stream closed at
    exit): no other thread runs Python code then, and the model was freed,
    or left, at exit.

    The waits are timed (WAIT_SLICE_S): an untimed lock wait is not woken by
    a Ctrl-C that the main thread takes just before it blocks, or that
    another thread takes, and the KeyboardInterrupt then came only with the
    next piece, which a long run of held-back text may delay to the end."""
    worker = threading.Thread(target=work, name=name, daemon=True)
    worker.start()
    try:
        while True:
            try:
                item = q.get(timeout=WAIT_SLICE_S)
            except queue.Empty:
                continue
            if item is end:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        cancel.set()
        if not sys.is_finalizing():
            while worker.is_alive():
                worker.join(WAIT_SLICE_S)


class PieceStream(Iterator[str]):
    """Text pieces from queued_pieces: iterate, close() from the iterating
    thread, or cancel() from any; either ends the work after its current
    token, and the iteration then ends with the text so far."""

    def __init__(self, gen: Iterator[str], cancel: threading.Event):
        self._gen, self._cancel = gen, cancel

    def __iter__(self) -> "PieceStream":
        return self

    def __next__(self) -> str:
        return next(self._gen)

    def close(self) -> None:
        self._gen.close()  # type: ignore[attr-defined]

    def cancel(self) -> None:
        self._cancel.set()


class TextStream(PieceStream):
    """What Model.stream returns: an iterator of text pieces.  Once it has
    ended, `tokens` holds the new token ids as they came (the end token
    included, when one came) and `stopped_by_string` whether a stop string
    ended it, from which a caller tells an end token or stop string from the
    length limit.  close() stops generation after the current token."""

    def __init__(self, streamer: Streamer, gen: Iterator[str]):
        super().__init__(gen, streamer.cancel)
        self._streamer = streamer

    @property
    def tokens(self) -> list[int]:
        return list(self._streamer.new)

    @property
    def stopped_by_string(self) -> bool:
        return self._streamer.stopped
