"""_model.py - clformer.Model: one Hugging Face model directory on one
OpenCL device (a clf_context and a clf_model), its tokenizer, and what the
command line does with them (run, generate, embed, classify).

Threads: the C contract is one thread at a time per context, and ctypes
releases the GIL during a call, so every C call on the context holds the
model's lock; the tokenizer (host-only) has a lock of its own, so that one
thread may tokenize while another runs the model.  Freeing takes the lock
too (close(), the garbage collector's finalizer, interpreter exit), so the
context is never destroyed under a running call.
"""
from __future__ import annotations

import atexit
import ctypes
import json
import os
import threading
import time
import weakref
import sys
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence, Union

import numpy as np

from . import _arrays, _chat, _errors, _lib
from ._device import Device, DeviceLike, _device_from_desc, selector_of
from ._generate import GenerateSettings, GenerationSettings, Streamer, TextStream, settings_from

if TYPE_CHECKING:  # **kwargs typed by GenerationSettings (PEP 692), for editors and type checkers
    from ._engine import Engine
    if sys.version_info >= (3, 11):
        from typing import Unpack
    else:
        from typing_extensions import Unpack
from ._text import Tokenizer

PathLike = Union[str, "os.PathLike[str]"]


def _path_arg(name: str, value: Any) -> str:
    if isinstance(value, bytes) or not isinstance(value, (str, os.PathLike)):
        raise _errors.InvalidArgumentError(f"{name} must be a str or os.PathLike, not {type(value).__name__}")
    path = os.fspath(value)
    if not isinstance(path, str):
        raise _errors.InvalidArgumentError(f"{name} must name a path as str, not {type(path).__name__}")
    if "\0" in path:
        raise _errors.InvalidArgumentError(f"{name} contains a NUL character")
    if not path:
        raise _errors.InvalidArgumentError(f"{name} is empty")
    return path


class _Handles:
    """The C objects a Model owns, the lock every C call on them holds, and
    the flag that stops a running generation after its current token.  The
    garbage collector's finalizer holds this, never the Model."""

    def __init__(self) -> None:
        self.ctx = None
        self.model = None
        self.conversation = _chat.Conversation()  # borrows the model: freed first
        self.lock = threading.Lock()
        self.engine = None  # the open Engine's _Core: while set, the model runs nothing else
        self.template = None  # the chat_template given to Model(), parsed (conversations borrow it)
        self.stop = False  # closing or exiting: on_token callbacks end generation

    def destroy(self) -> None:
        """Frees the handles; call with the lock held."""
        lib = _lib.lib
        if self.engine is not None:  # it borrows the model: stopped and freed first
            self.engine.close()
            self.engine = None
        self.conversation.destroy()
        if self.template:
            lib.clf_chat_template_destroy(self.template)
        self.template = None
        if self.model:
            lib.clf_model_destroy(self.model)
        if self.ctx:
            lib.clf_context_destroy(self.ctx)
        self.model = self.ctx = None

    def release(self, timeout: float) -> bool:
        """Frees the handles once the running call (if any) has ended; False,
        freeing nothing, when the lock was not had within `timeout` seconds
        (a handle left to the OS is better than one freed under a call)."""
        self.stop = True
        if not self.lock.acquire(timeout=timeout):
            return False
        try:
            self.destroy()
        finally:
            self.lock.release()
        return True


# Interpreter exit.  weakref.finalize would free the handles at exit without
# the lock, under a daemon thread's running call (a segfault), so the models'
# finalizers are not run at exit (atexit = False) and this hook frees them
# instead: CPython 3.11 runs atexit callbacks after joining the non-daemon
# threads and before stopping the daemon ones, while a call that is running
# can still finish.  Every model's generation is asked to stop after its
# current token; a forward pass or a beam search (no on_token) ends by
# itself.  A model whose call has not ended within EXIT_WAIT_S (all models
# together) is left to the OS, not freed.
EXIT_WAIT_S = 30.0
_models: "weakref.WeakSet[Model]" = weakref.WeakSet()


def _at_exit() -> None:
    models = list(_models)
    for m in models:  # all first, so that their calls end together
        m._closed = True
        m._h.stop = True
    deadline = time.monotonic() + EXIT_WAIT_S
    for m in models:
        if m._finalizer.detach() is not None:
            m._h.release(max(0.0, deadline - time.monotonic()))


atexit.register(_at_exit)


def _checkpoint_beams(path: str) -> int | None:
    """num_beams as the library reads it (generation_config.json over
    config.json, default 1); None when a file or value is not plainly
    readable (then generation is not assumed to take an on_token callback)."""
    beams = 1
    if os.path.isfile(path):  # a GGUF file: no generation settings
        return beams
    for name in ("config.json", "generation_config.json"):
        try:
            with open(os.path.join(path, name), encoding="utf-8") as f:
                cfg = json.load(f)
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            return None
        if not isinstance(cfg, dict):
            return None
        v = cfg.get("num_beams", beams)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v):
            return None
        beams = int(v)
    return beams


class Model:
    """A Hugging Face model directory (config.json + model.safetensors) or a
    GGUF file (or a directory holding one) loaded onto an OpenCL device.

    >>> with clformer.Model("tests/fixtures/bert") as m:
    ...     out = m(input_ids=np.array([[2, 7, 3]]))
    ...     out["last_hidden_state"].shape
    (1, 3, 32)

    Args:
        path: the model directory, or a .gguf file (docs/gguf.md).
        device: None (the default device: $CLFORMER_DEVICE, else the first
            GPU, else the first device), an index into clformer.devices(), a
            clformer.Device, or a selector string ("0:1", or part of the
            "platform / device" name).
        weights: storage of the linear layers' weights: a weight type the
            library lists ("f32", "f16", "q8", "q4", "q4k", "q6k", "stored"
            today); "stored" (the default) keeps a GGUF file's blocks as the
            file stores them and a Hugging Face checkpoint's as f32.  "q4k"
            and "q6k" are llama.cpp's Q4_K and Q6_K blocks (docs/gguf.md).
        cache_dir: the program cache directory (None: $CLFORMER_CACHE_DIR,
            else ~/.cache/clformer; "off" disables it).
        template_budget: what one rendering of the chat template may cost
            (TemplateBudget; None: the library's defaults, docs/chat.md).
        chat_template: a chat template's Jinja source to use instead of the
            model's (a GGUF file may have none: Gemma 3 270M's), rendered
            with the tokenizer's special tokens (bos_token, ...); None: the
            model's.  A syntax error raises FormatError with its line:column.
    """

    def __init__(self, path: PathLike, device: DeviceLike = None, weights: str = "stored",
                 cache_dir: PathLike | None = None, template_budget: "_chat.TemplateBudget | None" = None,
                 chat_template: str | None = None):
        if template_budget is not None and not isinstance(template_budget, _chat.TemplateBudget):
            raise _errors.InvalidArgumentError("template_budget must be a clformer.TemplateBudget")
        c_template = _lib.cstr(chat_template, "chat_template") if chat_template is not None else None
        self._h = _Handles()
        self._h.conversation.budget = template_budget
        self._template_budget = template_budget
        self._closed = True
        self._lock = self._h.lock
        self.path = _path_arg("path", path)
        if not isinstance(weights, str) or "\0" in weights:
            names = ", ".join(f'"{w}"' for w in _lib.WEIGHT_TYPES)
            raise _errors.InvalidArgumentError(f"weights must be one of {names}, not {weights!r}")
        cache = _path_arg("cache_dir", cache_dir) if cache_dir is not None else None
        c_path = _lib.cpath(self.path)  # refusals before a context is made
        c_cache = _lib.cpath(cache, "cache_dir") if cache is not None else None
        sel = selector_of(device)
        c_sel = _lib.cstr(sel, "device") if sel is not None else None
        c_weights = _lib.cstr(weights, "weights")
        lib = _lib.lib
        mo = _lib.ModelOptions()
        lib.clf_model_options_init(ctypes.byref(mo))
        wt = ctypes.c_int(0)
        _errors.check(lib.clf_weight_type_from_name(c_weights, ctypes.byref(wt)))
        mo.weights = wt.value
        co = _lib.ContextOptions()
        lib.clf_context_options_init(ctypes.byref(co))
        co.device = c_sel
        co.cache_dir = c_cache
        ctx = ctypes.c_void_p()
        _errors.check(lib.clf_context_create(ctypes.byref(co), ctypes.byref(ctx)))
        self._h.ctx = ctx.value
        self._finalizer = weakref.finalize(self, self._h.release, EXIT_WAIT_S)
        self._finalizer.atexit = False  # _at_exit frees it, under the lock
        m = ctypes.c_void_p()
        st = lib.clf_model_load_with(self._h.ctx, c_path, ctypes.byref(mo), ctypes.byref(m))
        if st != 0:
            err = _errors.from_status(st, self._h.ctx)
            self._finalizer()
            raise err
        self._h.model = m.value
        self._closed = False
        self._beams = _checkpoint_beams(self.path)
        self._describe()
        self._tok = Tokenizer(self.path)
        _models.add(self)
        if c_template is not None:
            try:
                self._h.template = _chat.parse_for(self._tok, c_template, template_budget)
            except BaseException:
                self.close()
                raise
            self._h.conversation.template = self._h.template

    def _describe(self) -> None:
        lib, m, t = _lib.lib, self._h.model, _lib.text
        self.model_type: str = t(lib.clf_model_type(m))
        self.pooling: str = t(lib.clf_model_pooling(m))
        names = ctypes.POINTER(ctypes.c_char_p)()
        n = lib.clf_model_input_names(m, ctypes.byref(names))
        self.input_names: list[str] = [t(names[i]) for i in range(n)]
        n = lib.clf_model_output_names(m, ctypes.byref(names))
        self.output_names: list[str] = [t(names[i]) for i in range(n)]
        n = lib.clf_model_num_labels(m)
        self.labels: list[str] = [t(lib.clf_model_label(m, i)) or f"LABEL_{i}" for i in range(n)]
        self.is_encoder_decoder: bool = bool(lib.clf_model_is_encoder_decoder(m))
        self.weight_bytes: int = int(lib.clf_model_weight_bytes(m))
        # the longest sequence generation may make (n_positions, a GGUF's context_length); 0: it does not generate
        self.max_positions: int = int(lib.clf_model_max_positions(m))
        self.device: Device = _device_from_desc(lib.clf_context_device(self._h.ctx).contents)

    # ---- lifetime ----

    def close(self) -> None:
        """Frees the model, its context and its tokenizer.  Idempotent; any
        later use raises clformer.Error.  A call running in another thread
        is waited for: a generation (or stream) stops after its current
        token and raises clformer.Error ("closed"), a forward pass or a beam
        search ends first.  An open Engine is closed first (its sequences
        end "cancelled")."""
        self._closed = True
        self._h.stop = True
        with self._lock:
            if self._finalizer.detach() is not None:
                self._h.destroy()
        tok = getattr(self, "_tok", None)
        if tok is not None:
            tok.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"on {self.device.selector} {self.device.name}"
        return f"<clformer.Model {self.model_type or '?'} {self.path!r} {state}>"

    def _live(self) -> int:
        """The model handle; raises when closed (call with the lock held)."""
        if self._closed or not self._h.model:
            raise _errors.InvalidArgumentError(f"the clformer.Model of {self.path!r} is closed")
        return self._h.model

    def _runs(self, what: str) -> int:
        """The model handle for a call that runs the model; raises when
        closed, or while an Engine is open (call with the lock held)."""
        m = self._live()
        if self._h.engine is not None:
            raise _errors.InvalidArgumentError(
                f"the clformer.Model of {self.path!r} has an open clformer.Engine, which alone runs the model while "
                f"it is open: submit to the engine, or close it before {what}")
        return m

    def _check_open(self, runs: str | None = None) -> None:
        """Raises when closed; with `runs`, also while an Engine is open."""
        with self._lock:
            self._runs(runs) if runs else self._live()

    def _fail(self, st: int) -> _errors.Error:
        return _errors.from_status(st, self._h.ctx)

    # ---- forward ----

    def _inputs(self, inputs: Mapping[str, Any]) -> list[tuple[str, np.ndarray]]:
        if not inputs:
            raise _errors.InvalidArgumentError(f"no inputs given; this model takes {', '.join(self.input_names)}")
        out = []
        for name, value in inputs.items():
            if not isinstance(name, str) or name not in self.input_names:
                raise _errors.InvalidArgumentError(
                    f"unknown input {name!r}; this {self.model_type} model takes {', '.join(self.input_names)}")
            if name in _arrays.FLOAT_INPUTS:
                arr = _arrays.as_floats(name, value)
            else:
                arr = _arrays.as_ids(name, value, ndim=None)
            _arrays.check_rank(name, arr)
            out.append((name, arr))
        return out

    def run(self, inputs: Mapping[str, Any], outputs: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """One forward pass: `inputs` by transformers' forward() argument
        names, the `outputs` asked for (None: all of output_names) by their
        output field names.  Ids and masks are int64 (or int32), pixel values
        float32; other dtypes are converted once, wrong kinds refused."""
        if not isinstance(inputs, Mapping):
            raise _errors.InvalidArgumentError(f"inputs must be a mapping of name to array, not {type(inputs).__name__}")
        arrays = self._inputs(inputs)
        if outputs is None:
            outputs = list(self.output_names)
        elif isinstance(outputs, str) or not all(isinstance(o, str) for o in outputs):
            raise _errors.InvalidArgumentError("outputs must be a sequence of output names")
        for o in outputs:
            if o not in self.output_names:
                raise _errors.InvalidArgumentError(
                    f"unknown output {o!r}; this {self.model_type} model gives {', '.join(self.output_names)}")
        c_in = (_lib.Array * len(arrays))(*[_arrays.to_c(n, a) for n, a in arrays])
        c_names = (ctypes.c_char_p * max(len(outputs), 1))(*[_lib.cstr(o, "output name") for o in outputs])
        c_out = (_lib.Array * max(len(outputs), 1))()
        with self._lock:
            m = self._runs("a forward pass")
            st = _lib.lib.clf_model_run(m, c_in, len(arrays), c_names, len(outputs), c_out)
            if st != 0:
                raise self._fail(st)
        return {o: _arrays.take(c_out[i]) for i, o in enumerate(outputs)}

    def __call__(self, **inputs: Any) -> dict[str, np.ndarray]:
        """model(input_ids=..., attention_mask=...) -> {output name: array}:
        every output the model gives (see run() to ask for fewer)."""
        return self.run(inputs)

    # ---- generation ----

    def _takes_on_token(self, s: GenerateSettings) -> bool:
        """Whether this generation is known to be greedy or sampling (the
        library refuses an on_token callback with beam search)."""
        return (s.kw.get("num_beams") or self._beams) == 1

    def _closed_during(self, what: str) -> _errors.Error:
        return _errors.InvalidArgumentError(f"the clformer.Model of {self.path!r} was closed during {what}")

    def _generate(self, ids: np.ndarray, mask: np.ndarray | None, s: GenerateSettings,
                  on_token: Any = None) -> np.ndarray:
        """clf_model_generate under the lock.  on_token: the caller's
        callback (it must return nonzero once self._h.stop is set); without
        one, greedy and sampling get one that stops on self._h.stop."""
        o = s.c_options()
        h, stopped = self._h, []
        if on_token is None and self._takes_on_token(s):
            def stop_check(user: Any, row: int, token: int) -> int:
                if h.stop:
                    stopped.append(True)
                    return 1
                return 0
            on_token = _lib.TOKEN_FN(stop_check)  # alive until the call returns
        if on_token is not None:
            o.on_token = on_token
        c_ids = _arrays.to_c("input_ids", ids)
        c_mask = _arrays.to_c("attention_mask", mask) if mask is not None else None
        seq = _lib.Array()
        with self._lock:
            m = self._runs("generate")
            st = _lib.lib.clf_model_generate(m, ctypes.byref(c_ids), ctypes.byref(c_mask) if c_mask else None,
                                             ctypes.byref(o), ctypes.byref(seq))
            if st != 0:
                raise self._fail(st)
        out = _arrays.take(seq)
        if stopped:
            raise self._closed_during("generate")
        return out

    def generate(self, input_ids: Any, attention_mask: Any = None, **kwargs: Unpack[GenerationSettings]) -> np.ndarray:
        """Decoding as transformers' generate(): greedy, beam search
        (num_beams > 1) or sampling (do_sample=True).

        input_ids: [B, L] ids (a 1-D sequence is taken as B = 1), the prompt
        of a decoder-only model or the source of an encoder-decoder.
        Keyword settings (None or absent: the checkpoint's
        generation_config.json, else transformers' default): max_new_tokens,
        num_beams, do_sample, temperature (0: greedy), top_k (0: no top-k),
        top_p, min_p (0: off), repetition_penalty, no_repeat_ngram_size (0:
        off), seed (>= 0, the same as the CLI's --seed and the server's seed;
        None: a fresh one per call), eos_token_id (an int or a list of ints
        replacing the checkpoint's).  temperature, top_k, top_p or min_p
        given without do_sample turn sampling on, as in the CLI.

        Returns int64 [B, T]: the prompt (or the decoder start token) and the
        new tokens, finished rows padded with pad_token_id."""
        s = settings_from(kwargs)
        ids = _arrays.as_ids("input_ids", input_ids, ndim=None)
        if ids.ndim == 1:
            ids = ids[None, :]
        if ids.ndim != 2:
            raise _errors.ShapeError(f"input_ids must be [batch, length], got shape {list(ids.shape)}")
        mask = None
        if attention_mask is not None:
            mask = _arrays.as_ids("attention_mask", attention_mask, ndim=None)
            if mask.ndim == 1:
                mask = mask[None, :]
            if mask.shape != ids.shape:
                raise _errors.ShapeError(f"attention_mask {list(mask.shape)} must have input_ids' shape "
                                         f"{list(ids.shape)}")
        return self._generate(ids, mask, s)

    def stream(self, prompt: str, *, stop: str | Sequence[str] = (), **kwargs: Unpack[GenerationSettings]) -> TextStream:
        """The text generated from `prompt`, in pieces as the tokens come, as
        `clformer generate --prompt` prints it (without the prompt itself):
        a character split across tokens once whole, a word once the next
        space or the end shows it cannot change.  `stop`: generation ends
        before the first occurrence of any of these strings (not yielded).
        The settings are generate()'s.  With num_beams > 1 the text comes in
        one piece at the end.  Closing the iterator early stops generation
        after the current token.  Once it has ended, its `tokens` are the
        new token ids and `stopped_by_string` says whether a stop string
        ended it (the OpenAI-style finish reason: an end token or a stop
        string is "stop", else "length").  Without max_new_tokens a
        decoder-only model goes on to an end token or the end of its
        positions (at most 32768 new tokens), as `clformer generate
        --prompt`, chat() and the server do; generate() keeps transformers'
        max_length."""
        s = settings_from(kwargs)
        stops = [stop] if isinstance(stop, str) else list(stop)
        for x in stops:
            if not isinstance(x, str) or not x:
                raise _errors.InvalidArgumentError("stop strings must be non-empty str")
            _lib.cstr(x, "stop")
        self._check_open("stream")
        ids = self.tokenize(prompt)[None, :]
        left = self.max_positions - ids.shape[1]
        if s.kw.get("max_new_tokens") is None and not self.is_encoder_decoder and left > 0:
            s.kw["max_new_tokens"] = min(left, 32768)
        return Streamer(self, self._tok, ids, s, stops).pieces()

    # ---- chat ----

    @property
    def _conversation(self) -> "_chat.Conversation":
        return self._h.conversation

    def apply_chat_template(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = False,
                            **variables: Any) -> str:
        """The conversation rendered with the model's chat template
        (tokenizer_config.json's chat_template, or a GGUF file's), as
        transformers' tokenizer.apply_chat_template(messages, tokenize=False,
        add_generation_prompt=...) renders it; `variables` (tools=[...],
        documents, date_string, ...) reach the template as they are, over
        the special tokens (bos_token, eos_token, ...).  By the C renderer
        that chat() and the server use."""
        msgs = _chat.check_messages(messages)
        with self._tok.locked() as tok:
            return _chat.render(tok, msgs, add_generation_prompt, variables, self._template_budget, self._h.template)

    def chat(self, messages: Sequence[Mapping[str, Any]], *, stop: str | Sequence[str] = (),
             **kwargs: Unpack[GenerationSettings]) -> "_chat.ChatReply":
        """The assistant's reply to the conversation `messages` ([{"role":
        "user", "content": "..."}, ...]): rendered with the chat template and
        add_generation_prompt, tokenized without special tokens, decoded as
        generate() decodes (its keyword settings; unless max_new_tokens is
        given, up to the end of the model's positions), ended by an end token or
        before the first `stop` string.  The KV cache of the last
        conversation is kept: sending it again with the reply and a new
        message feeds only what is new.  Returns a str with
        prompt_tokens, cached_tokens, completion_tokens and finish_reason."""
        s = settings_from(kwargs)
        return _chat.respond(self, _chat.check_messages(messages), s, _chat.check_stops(stop))

    def chat_stream(self, messages: Sequence[Mapping[str, Any]], *, stop: str | Sequence[str] = (),
                    **kwargs: Unpack[GenerationSettings]) -> "_chat.ChatStream":
        """chat()'s reply in pieces as they come (as `clformer chat` prints
        it); once the iteration has ended, the stream's `reply` holds what
        chat() returns.  Closing it early ends the reply after the current
        token."""
        s = settings_from(kwargs)
        self._check_open("chat_stream")
        return _chat.ChatStream(self, _chat.check_messages(messages), s, _chat.check_stops(stop))

    # ---- the engine ----

    def engine(self, *, kv_bytes: int | None = None, block_size: int | None = None, max_step_rows: int | None = None,
               max_sequences: int | None = None, kv_dtype: str = "f32") -> "Engine":
        """An Engine over this decoder model: sequences submitted from any
        thread, decoded together by a thread the engine owns, each streaming
        its tokens (and text) as they come (docs/python.md).  The options are
        clf_engine_options' (None: the library's default): kv_bytes, the
        device memory of the paged KV pool (a quarter of what the weights
        leave); block_size, positions per block (16); max_step_rows, rows of
        one step (64 on a CPU device, else 256); max_sequences, running at once (64); kv_dtype, the
        pool's "f32" or "f16" (half the memory a position).  One engine at
        a time; while it is open, the methods that run the model (generate,
        stream, chat, forward passes, embed, classify) raise
        InvalidArgumentError instead of waiting for it.  An encoder-decoder
        model raises UnsupportedError."""
        from ._engine import Engine
        return Engine(self, kv_bytes=kv_bytes, block_size=block_size, max_step_rows=max_step_rows,
                      max_sequences=max_sequences, kv_dtype=kv_dtype)

    def _has_tokenizer(self) -> bool:
        """Whether the model's tokenizer loads (an engine then streams text)."""
        try:
            with self._tok.locked():
                return True
        except _errors.Error:
            return False

    # ---- tokenizer ----

    def tokenize(self, text: str, add_special_tokens: bool = True) -> np.ndarray:
        """text -> int64 ids with the model directory's tokenizer, as
        transformers' tokenizer(text)["input_ids"] (special tokens added unless
        add_special_tokens=False)."""
        self._check_open()
        return self._tok.encode(text, add_special_tokens)

    def decode(self, ids: Any, skip_special_tokens: bool = True) -> str:
        """ids (1-D) -> text, as transformers' tokenizer.decode."""
        self._check_open()
        return self._tok.decode(ids, skip_special_tokens)

    def token(self, id: int) -> str:
        """The vocabulary's entry for `id` (Tokenizer.token): NotFoundError
        when the vocabulary has no such id."""
        self._check_open()
        return self._tok.token(id)

    def batch_decode(self, sequences: Any, skip_special_tokens: bool = True) -> list[str]:
        """[B, T] ids -> B texts."""
        arr = _arrays.as_ids("sequences", sequences, ndim=2)
        return [self.decode(row, skip_special_tokens) for row in arr]

    # ---- embeddings and classification ----

    def embed(self, texts: str | Sequence[str]) -> np.ndarray:
        """Pooled, L2-normalised embeddings of `texts` (float32 [n, hidden]),
        the ones `clformer embed` takes the cosines of: each text tokenized
        with special tokens, the batch padded with config.json's
        pad_token_id, last_hidden_state averaged over each text's tokens
        (`pooling` "mean"), or a GGUF file's pooling: its first token's
        ("cls") or its last token's ("last"); "none" and "rank" raise
        clformer.UnsupportedError."""
        from ._tasks import embed
        self._check_open("embed")
        return embed(self, texts)

    def classify(self, images: Any, top_k: int = 5) -> list[list[tuple[str, float]]]:
        """The top_k (label, probability) of each input, most probable first,
        as `clformer classify` prints them.

        An image classifier (a model directory with preprocessor_config.json)
        takes images as the contents of a PNG or JPEG file (bytes, bytearray,
        memoryview) or RGB uint8 arrays [H, W, 3], one or a sequence: each
        preprocessed as preprocessor_config.json says, then the logits'
        softmax (clf_softmax_top_k).  It takes no paths: a str or
        os.PathLike is refused with clformer.InvalidArgumentError, so that
        text from elsewhere (a request) cannot name a file to open; local
        files go through classify_files().
        A text classifier (no preprocessor_config.json) takes texts (str),
        each classified alone.
        Labels are config.json's id2label, else "LABEL_i"."""
        from ._tasks import classify
        self._check_open("classify")
        return classify(self, images, top_k)

    def classify_files(self, paths: PathLike | Sequence[PathLike], top_k: int = 5) -> list[list[tuple[str, float]]]:
        """classify() of local PNG/JPEG files, named by str or os.PathLike
        (one or a sequence; bytes are refused, being classify()'s image
        contents), on an image classifier: `clformer classify DIR FILE...`."""
        from ._tasks import classify_files
        self._check_open("classify_files")
        return classify_files(self, paths, top_k)
