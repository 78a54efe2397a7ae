"""_engine.py - clformer.Engine: many sequences of one decoder model decoded
together (the library's clf_engine), stepped by a thread the Engine owns;
clformer.Sequence: one submitted request, its tokens and text as they come.

Threads.  submit(), cancel() and stats() may be called from any thread; one
thread, the Engine's, steps (clf_engine_step), started on the first submit,
asleep on a condition while no sequence is live, stopped by close().  The
library calls back on the stepping thread (or on the one that destroys the
engine): the callbacks only append to the sequence's tokens, text and
log-probabilities and wake its readers; they never raise into C.  One
submit() may make n sequences (copies sharing the prompt, consecutive ids):
the callbacks find each copy by its id.  While the engine is open the
model runs nothing else (the library's rule): Model methods that run the
model raise instead of waiting, since an engine typically lives as long as
a server and a wait would be a hang.
"""
from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import sys
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Iterator, Sequence as Seq, Union

import numpy as np

from . import _arrays, _errors, _lib
from ._generate import WAIT_SLICE_S, GenerationSettings, Streamer, settings_from

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from typing import Unpack
    else:
        from typing_extensions import Unpack
    from ._model import Model

# clf_finish_reason by value, named by the library (clf_finish_name); a
# sequence this package stops is stopped by its stop strings.
_PY_NAMES = {"stopped": "stop_string"}
_ERROR = 6
# clformer.h's CLF_ENGINE_MAX_N (a macro, not asked of the library): checked
# here only so that a huge n fails before a text stream is made per copy;
# the library's own check and message stand behind it.
_MAX_N = 128


def finish_reason(why: int) -> str:
    name = _lib.text(_lib.lib.clf_finish_name(why))
    return _PY_NAMES.get(name, name)

Isolation = Union[int, str, bytes, None]


def isolation_key(key: Isolation) -> int:
    """An isolation key as the library's uint64: an int in [0, 2**64) as it
    is, a str or bytes (a client's identity) by BLAKE2b's first 8 bytes,
    None as 0."""
    if key is None:
        return 0
    if isinstance(key, str):
        key = key.encode("utf-8", "surrogatepass")
    if isinstance(key, (bytes, bytearray)):
        return int.from_bytes(hashlib.blake2b(bytes(key), digest_size=8, person=b"clf-isolation").digest(), "little")
    if isinstance(key, bool) or not isinstance(key, (int, np.integer)) or not 0 <= int(key) < 2 ** 64:
        raise _errors.InvalidArgumentError(f"isolation must be an int in [0, 2**64), a str or bytes, not {key!r}")
    return int(key)


def _size(name: str, v: Any) -> int:
    """An engine option: None (0, the library's default) or a positive int."""
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 1 <= int(v) < 2 ** 63:
        raise _errors.InvalidArgumentError(f"{name} must be a positive int or None, not {v!r}")
    return int(v)


@dataclasses.dataclass(frozen=True)
class EngineStats:
    """clf_engine_stats: the pool (blocks of block_size positions,
    block_bytes of device memory each; held by running sequences, or free
    but holding a reusable prefix), the sequences running and waiting, and
    since the engine was made: prompt positions taken from the cache instead
    of computed, preemptions, steps and their rows; for a model whose layers
    mix windowed and full ones, the windowed layers' own pool (window_*:
    blocks, bytes of one, held), the fields above being the full layers'."""
    blocks: int
    block_size: int
    block_bytes: int
    blocks_used: int
    blocks_cached: int
    running: int
    waiting: int
    prefix_tokens_reused: int
    preemptions: int
    blocks_copied: int
    steps: int
    rows: int
    window_blocks: int
    window_block_bytes: int
    window_blocks_used: int


@dataclasses.dataclass(frozen=True)
class TokenLogprob:
    """A generated token with its log-probability under the model (the
    log-softmax of its raw logits, before any sampling setting: what the
    model thinks, not what the sampler drew from) and, when asked for, the
    most probable tokens at that step: (id, logprob) pairs, most probable
    first, ties by lower id (clf_token_info)."""
    token: int
    logprob: float
    top: tuple = ()


@dataclasses.dataclass(frozen=True)
class Delta:
    """One step of a sequence (Sequence.deltas()): its new token (tokens,
    a list of one) with the text that token released (Model.stream's rule:
    "" while a character or a possible stop string is incomplete, and
    without a tokenizer) and its TokenLogprob (logprobs, a list of one;
    None when the sequence was submitted without logprobs); or, last, the
    text the stream held back until the end, with no token."""
    text: str
    tokens: list
    logprobs: list | None


@dataclasses.dataclass(frozen=True)
class SequenceResult:
    """How a sequence ended: its new token ids (an end token included when
    one ended it), its text (None without a tokenizer: the streamed pieces
    joined, cut before a stop string), the prompt's length and why it
    ended: "eos" (an end token), "length" (max_new_tokens), "context" (the
    model's positions), "stop_string", "cancelled"; and how many of the
    prompt's positions came from the prefix cache (cached_tokens); with
    logprobs, one TokenLogprob per token of `tokens` (else None)."""
    tokens: list
    text: str | None
    finish_reason: str
    prompt_tokens: int
    cached_tokens: int = 0
    logprobs: list | None = None


class Sequence:
    """One request submitted to an Engine.  Iterating it gives its text in
    pieces as the tokens come (Model.stream's rule; the model needs a
    tokenizer), tokens() its token ids; both may be iterated more than once,
    from any thread, and end when the sequence ends (a failure is raised at
    the end).  Leaving an iteration early does not end the sequence:
    cancel() does."""

    def __init__(self, engine: "Engine", prompt_len: int, streamer: Streamer | None, logprobs: bool = False):
        self._engine = engine  # alive while a sequence is
        self._cond = threading.Condition()
        self._tokens: list[int] = []
        self._pieces: list[str] = []  # the non-empty pieces
        self._released: list[str] = []  # per token, the piece it released ("" for none)
        self._tail = ""  # what was released at the end, after the last token
        self._logprobs: list[TokenLogprob] | None = [] if logprobs else None
        self._streamer = streamer
        self._reason: str | None = None
        self._error: _errors.Error | None = None
        self.prompt_tokens = prompt_len
        self.cached_tokens = 0  # set when it ends
        self.id = 0  # the library's, once submitted
        self._allowed: Any = None  # its token mask callback (Engine.submit's allowed), or None

    # ---- called on the stepping thread (never raising into C) ----

    def _push(self, token: int, info: TokenLogprob | None = None) -> bool:
        """Adds a token (and its log-probabilities); True when a stop string
        has been reached."""
        piece = ""
        stop = False
        if self._streamer is not None:
            piece = self._streamer.push(token).decode("utf-8", "replace")
            stop = self._streamer.stopped
        with self._cond:
            self._tokens.append(token)
            self._released.append(piece)
            if self._logprobs is not None and info is not None:
                self._logprobs.append(info)
            if piece:
                self._pieces.append(piece)
            self._cond.notify_all()
        return stop

    def _finish(self, reason: str, error: _errors.Error | None = None) -> None:
        if self._reason is not None:  # ended already (a callback's failure, then the library's end)
            return
        piece = ""
        st = self._streamer
        if st is not None:
            try:
                if error is None and not st.stopped:
                    piece = st.push(None, final=True).decode("utf-8", "replace")
            except _errors.Error as e:
                error, reason = e, "error"
            finally:
                st.close()
        with self._cond:
            if self._reason is not None:
                return
            if piece:
                self._pieces.append(piece)
                self._tail = piece
            self._reason, self._error = reason, error
            self._cond.notify_all()

    # ---- the caller's side ----

    def _wait(self, ready: Any, timeout: float | None) -> bool:
        """Waits (in slices, so that Ctrl-C is taken) until ready() under the lock."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not ready():
                left = WAIT_SLICE_S if deadline is None else min(WAIT_SLICE_S, deadline - time.monotonic())
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def _follow(self, items: list) -> Iterator[Any]:
        i = 0
        while True:
            self._wait(lambda: i < len(items) or self._reason is not None, None)
            with self._cond:
                new, reason, error = items[i:], self._reason, self._error
            i += len(new)
            yield from new
            if reason is not None and i >= len(items):
                if error is not None:
                    raise error
                return

    def __iter__(self) -> Iterator[str]:
        if self._streamer is None:
            raise _errors.InvalidArgumentError("this engine's model has no tokenizer: iterate seq.tokens() instead")
        return self._follow(self._pieces)

    def tokens(self) -> Iterator[int]:
        """The new token ids as they come (the end token included when one
        ended the sequence)."""
        return self._follow(self._tokens)

    def deltas(self) -> Iterator[Delta]:
        """The sequence step by step, as it comes: a Delta per token (its
        id, the text it released, its TokenLogprob), then one with the text
        held back until the end, if any.  A reader that sends text and
        logprobs together (a server's chunk) sends them in step; the
        non-empty texts are iter(seq)'s pieces."""
        i = 0
        while True:
            self._wait(lambda: i < len(self._tokens) or self._reason is not None, None)
            with self._cond:
                tokens, texts, reason, error = self._tokens[i:], self._released[i:], self._reason, self._error
                lps = None if self._logprobs is None else self._logprobs[i:i + len(tokens)]
                tail = self._tail
            for k, t in enumerate(tokens):
                yield Delta(texts[k], [t], None if lps is None else lps[k:k + 1])
            i += len(tokens)
            if reason is not None:  # every token came before the end
                if tail:
                    yield Delta(tail, [], None if lps is None else [])
                if error is not None:
                    raise error
                return

    @property
    def logprobs(self) -> list | None:
        """The TokenLogprob of each token so far (None when submitted
        without logprobs)."""
        with self._cond:
            return None if self._logprobs is None else list(self._logprobs)

    @property
    def done(self) -> bool:
        return self._reason is not None

    @property
    def finish_reason(self) -> str | None:
        """Why it ended (see SequenceResult); None while it runs."""
        return self._reason

    def cancel(self) -> None:
        """Ends the sequence at the engine's next step (finish reason
        "cancelled", its tokens so far kept); nothing once it has ended."""
        if self._reason is None:
            self._engine._core.cancel(self.id)

    def result(self, timeout: float | None = None) -> SequenceResult:
        """Waits for the end (TimeoutError after `timeout` seconds) and
        returns it; a failed step raises the library's error."""
        if not self._wait(lambda: self._reason is not None, timeout):
            raise TimeoutError(f"sequence {self.id} has not ended within {timeout} s")
        if self._error is not None:
            raise self._error
        text = "".join(self._pieces) if self._streamer is not None else None
        return SequenceResult(list(self._tokens), text, self._reason or "", self.prompt_tokens, self.cached_tokens,
                              self.logprobs)

    def __repr__(self) -> str:
        return f"<clformer.Sequence {self.id} {self._reason or 'running'}, {len(self._tokens)} tokens>"


class _Group:
    """The sequences of one submission (its n copies), found by id: copy i
    is the library's id base + i.  A callback may come before
    clf_engine_submit has returned the base (the stepping thread can take
    the request at once); it then waits for `ready`, which submit sets right
    after that call (which takes no lock the stepping thread holds)."""

    __slots__ = ("seqs", "base", "ready", "left")

    def __init__(self, seqs: list):
        self.seqs = seqs
        self.base = 0
        self.ready = threading.Event()
        self.left = len(seqs)  # not yet done

    def of(self, sid: int) -> "Sequence | None":
        if len(self.seqs) == 1:
            return self.seqs[0]
        self.ready.wait()
        i = sid - self.base
        return self.seqs[i] if 0 <= i < len(self.seqs) else None


class _Core:
    """The C engine, the thread that steps it and the live sequences; what
    the model's handles hold (never the Engine, whose finalizer closes it)."""

    def __init__(self, handles: Any, engine: int):
        self.h, self.e = handles, engine
        self.lock = threading.Lock()  # every C call but step, and destroy: none after it
        self.cond = threading.Condition()  # live, closing: the stepping thread sleeps on it
        self.seqs: dict[int, _Group] = {}  # user key -> its sequences, from before submit to the last on_done
        self.next_key = 1
        self.live = 0  # submitted, not yet done
        self.closing = False
        self.destroyed = threading.Event()
        self.thread: threading.Thread | None = None
        self.failed: list[Sequence] = []  # ended by the running step's failure
        # the library holds these pointers as long as the engine: alive with self
        self.on_token = _lib.ENGINE_TOKEN_FN(self._on_token)
        self.on_token_info = _lib.ENGINE_INFO_FN(self._on_token_info)
        self.on_done = _lib.ENGINE_DONE_FN(self._on_done)
        self.allowed = _lib.ENGINE_ALLOWED_FN(self._allowed)

    # ---- callbacks (stepping thread, or the one destroying) ----

    def _seq(self, user: Any, sid: int) -> "Sequence | None":
        g = self.seqs.get(user or 0)
        return None if g is None else g.of(sid)

    def _push(self, s: "Sequence", sid: int, token: int, info: TokenLogprob | None) -> int:
        try:
            return 1 if s._push(token, info) else 0
        except BaseException as e:  # must not cross the C frame: the sequence ends with it
            s._finish("error", e if isinstance(e, _errors.Error) else
                      _errors.Error(f"sequence {sid}: {type(e).__name__}: {e}"))
            return 1

    def _on_token(self, user: Any, sid: int, token: int) -> int:
        try:
            s = self._seq(user, sid)
        except BaseException:  # must not cross the C frame
            return 1
        return 0 if s is None else self._push(s, sid, int(token), None)

    def _on_token_info(self, user: Any, sid: int, info: Any) -> int:
        try:
            s = self._seq(user, sid)
            if s is None:
                return 0
            c = info.contents
            k = int(c.n_top)
            top = tuple((int(c.top_tokens[i]), float(c.top_logprobs[i])) for i in range(k))
            lp = TokenLogprob(int(c.token), float(c.logprob), top)
        except BaseException:  # must not cross the C frame; unreadable info stops the sequence
            return 1
        return self._push(s, sid, lp.token, lp)

    def _allowed(self, user: Any, sid: int, tokens: Any, n: int, mask: Any, vocab: int) -> int:
        """The sequence's allowed(new_tokens, mask) over views of the
        library's buffers (no copy: the mask is written in place); a raise
        ends the sequence with that error."""
        s = None
        try:
            s = self._seq(user, sid)
            if s is None or s._allowed is None:
                return 0
            toks = np.ctypeslib.as_array(tokens, shape=(n,))[s.prompt_tokens:]
            bits = np.ctypeslib.as_array(mask, shape=((vocab + 31) // 32,))
            return 1 if s._allowed(toks, bits) else 0
        except BaseException as e:  # must not cross the C frame: the sequence ends with it
            if s is not None:
                s._finish("error", e if isinstance(e, _errors.Error) else
                          _errors.Error(f"sequence {sid}: the allowed callback raised {type(e).__name__}: {e}"))
            return 1

    def _on_done(self, user: Any, sid: int, end: Any) -> None:
        try:
            why, error = end.contents.why, end.contents.error
            key = user or 0
            g = self.seqs.get(key)
            s = None if g is None else g.of(sid)
            if g is not None:
                g.left -= 1
                if g.left <= 0:
                    del self.seqs[key]
            if s is not None:
                s.cached_tokens = int(end.contents.cached_tokens)
                if why == _ERROR:  # finished once step returns its status (_loop)
                    s._error = _errors.Error(_lib.text(error))
                    self.failed.append(s)
                else:
                    s._finish(finish_reason(why))
            with self.cond:
                self.live -= 1
                self.cond.notify_all()
        except BaseException:  # must not cross the C frame
            pass

    # ---- the stepping thread ----

    def _loop(self) -> None:
        pending = ctypes.c_size_t(0)
        try:
            while True:
                with self.cond:
                    while not self.closing and self.live <= 0:
                        self.cond.wait()
                    if self.closing:
                        return
                st = _lib.lib.clf_engine_step(self.e, ctypes.byref(pending))
                for s in self.failed:  # the library's status, with the message on_done passed
                    msg = s._error.message if s._error else ""
                    s._finish("error", _errors.from_status(st or -1, message=msg))
                self.failed.clear()
        except BaseException as e:  # nothing steps any more: refuse submissions, fail the live sequences
            with self.cond:
                self.closing = True
            for s in [s for g in list(self.seqs.values()) for s in g.seqs]:
                s._finish("error", _errors.Error(f"the engine's thread failed: {type(e).__name__}: {e}"))
        finally:
            if self.thread_closes:
                self._destroy()

    thread_closes = False  # close() was called on the stepping thread: it destroys on its way out

    # ---- any thread ----

    def submit(self, req: _lib.EngineRequest, seqs: list) -> None:
        """Submits req as len(seqs) copies (req.n), seqs[i] getting id + i."""
        with self.lock:
            if self.destroyed.is_set() or self.closing:
                raise _errors.InvalidArgumentError("the clformer.Engine is closed")
            key = self.next_key
            self.next_key += 1
            req.user = key
            req.n = len(seqs)
            req.on_token, req.on_done = self.on_token, self.on_done
            if seqs[0]._logprobs is not None:
                req.on_token_info = self.on_token_info  # called instead of on_token
            if seqs[0]._allowed is not None:
                req.allowed = self.allowed
            g = self.seqs[key] = _Group(seqs)  # before the C call: the first token may come before it returns
            sid = ctypes.c_uint64(0)
            st = _lib.lib.clf_engine_submit(self.e, ctypes.byref(req), ctypes.byref(sid))
            if st != 0:
                del self.seqs[key]
                raise _errors.from_status(st, None)  # the calling thread's record (clformer.h: engine threads)
            for i, s in enumerate(seqs):
                s.id = sid.value + i
            g.base = sid.value
            g.ready.set()
            with self.cond:
                self.live += len(seqs)
                if self.thread is None:
                    self.thread = threading.Thread(target=self._loop, name="clformer-engine", daemon=True)
                    self.thread.start()
                self.cond.notify_all()

    def cancel(self, sid: int) -> None:
        with self.lock:
            if not self.destroyed.is_set():
                # "no such sequence": it ended meanwhile, which is what was asked
                _lib.lib.clf_engine_cancel(self.e, sid)

    def stats(self) -> EngineStats:
        c = _lib.EngineStats()
        with self.lock:
            if self.destroyed.is_set():
                raise _errors.InvalidArgumentError("the clformer.Engine is closed")
            st = _lib.lib.clf_engine_stats_get(self.e, ctypes.byref(c))
            if st != 0:
                raise _errors.from_status(st, None)
        return EngineStats(**{n: int(getattr(c, n)) for n, _ in _lib.EngineStats._fields_})

    def _destroy(self) -> None:
        with self.lock:
            if not self.destroyed.is_set():
                _lib.lib.clf_engine_destroy(self.e)  # the rest end "cancelled", through on_done
                self.destroyed.set()
        if self.h.engine is self:
            self.h.engine = None  # the model runs other work again

    def close(self) -> None:
        """Stops the thread after its current step, then destroys the engine
        (what is left ends "cancelled").  On the stepping thread itself (a
        finalizer run there) the thread destroys it on its way out."""
        with self.cond:
            self.closing = True
            self.cond.notify_all()
            t = self.thread
            if t is threading.current_thread():
                self.thread_closes = True
                return
        if t is not None:
            t.join()
        self._destroy()


def _allowed_list(allowed: Any, copies: int) -> list:
    """Engine.submit's allowed as one callable (or None) per copy."""
    if allowed is None:
        return [None] * copies
    if callable(allowed):
        if copies > 1:
            raise _errors.InvalidArgumentError(f"allowed: n={copies} copies need a list of {copies} callables, "
                                               "one each (a mask's state is its copy's)")
        return [allowed]
    if isinstance(allowed, (list, tuple)) and len(allowed) == copies and all(callable(a) for a in allowed):
        return list(allowed)
    raise _errors.InvalidArgumentError(f"allowed must be a callable (tokens, mask) -> bool, or a list of {copies} "
                                       f"of them (one per copy), not {type(allowed).__name__}")


class Engine:
    """Many sequences of one decoder model decoded together (clf_engine):
    each step of its thread runs one forward pass over the rows of every
    running sequence and hands each its next token.  Made by Model.engine();
    see docs/python.md.  While it is open the model runs nothing else."""

    def __init__(self, model: "Model", *, kv_bytes: int | None = None, block_size: int | None = None,
                 max_step_rows: int | None = None, max_sequences: int | None = None, kv_dtype: str = "f32"):
        o = _lib.EngineOptions()
        _lib.lib.clf_engine_options_init(ctypes.byref(o))
        if kv_dtype not in ("f32", "f16"):
            raise _errors.InvalidArgumentError(f"kv_dtype {kv_dtype!r}: the KV pool holds 'f32' or 'f16'")
        o.kv_dtype = _lib.DTYPES[kv_dtype].dtype
        o.kv_bytes = _size("kv_bytes", kv_bytes)
        o.block_size = _size("block_size", block_size)
        o.max_step_rows = _size("max_step_rows", max_step_rows)
        o.max_sequences = _size("max_sequences", max_sequences)
        self._model = model
        h = model._h
        with model._lock:
            m = model._live()
            if h.engine is not None:
                raise _errors.InvalidArgumentError(f"the clformer.Model of {model.path!r} has an engine open already "
                                                   "(one at a time: close it first)")
            e = ctypes.c_void_p()
            st = _lib.lib.clf_engine_create(m, ctypes.byref(o), ctypes.byref(e))
            if st != 0:
                raise model._fail(st)
            self._core = h.engine = _Core(h, e.value)
        self._finalizer = weakref.finalize(self, self._core.close)
        self._finalizer.atexit = False  # at exit the model's handles close it, under the model's lock
        self._text = model._has_tokenizer()

    @property
    def model(self) -> "Model":
        return self._model

    @property
    def closed(self) -> bool:
        return self._core.closing or self._core.destroyed.is_set()

    def submit(self, prompt: str | Seq[int] | np.ndarray, *, stop: str | Seq[str] = (), isolation: Isolation = None,
               n: int | None = None, logprobs: bool = False, top_logprobs: int = 0, allowed: Any = None,
               **kwargs: Unpack[GenerationSettings]) -> Union[Sequence, list]:
        """Queues a sequence and returns it at once; the engine's thread
        decodes it beside the others.

        prompt: text (tokenized with special tokens, as Model.stream does)
            or token ids (1-D).
        stop: generation ends before the first occurrence of any of these
            strings (not in the text; finish reason "stop_string"); needs a
            tokenizer.
        isolation: prefix reuse happens only between sequences of the same
            key: an int in [0, 2**64), or a str or bytes such as a client's
            identity (hashed to 64 bits); None is the key 0.
        n: None gives one Sequence; an int (1 to 128) gives a list of n
            Sequences, copies of the request that share its prompt (computed
            once, its blocks shared until a copy writes to one), with
            consecutive ids; with a seed S, copy i samples as the same
            request with seed S + i would alone (without one, each draws
            from a fresh seed; greedy copies are all the same).
        logprobs: record each new token's log-probability under the model
            (Sequence.logprobs, SequenceResult.logprobs, Delta.logprobs);
            top_logprobs (0 to 20, needs logprobs) adds that many of the
            most probable tokens at each step.
        allowed: constrained decoding.  A callable allowed(tokens, mask)
            called on the engine's thread before each token is chosen, with
            the sequence's new tokens so far (int64, a view) and the mask
            (uint32, ceil(vocab / 32) words, all bits set; a view over the
            library's buffer): clearing bit t % 32 of word t // 32 forbids
            token t.  A true result ends the sequence (finish reason
            "stop_string"); a raise ends it with that error; a mask that
            forbids every token ends it with an error.  With n copies, a
            list of n callables, one per copy (a grammar's state is its
            copy's).  It runs on the stepping thread: every sequence waits
            for it, so it should be quick (a grammar library's mask).
        The settings are Model.generate's (one beam): the same settings and
        seed give the tokens Model.generate and Model.stream give alone."""
        s = settings_from(kwargs)
        stops = [stop] if isinstance(stop, str) else list(stop)
        for x in stops:
            if not isinstance(x, str) or not x:
                raise _errors.InvalidArgumentError("stop strings must be non-empty str")
        if stops and not self._text:
            raise _errors.InvalidArgumentError("stop strings need a tokenizer, and this engine's model has none")
        if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= _MAX_N):
            raise _errors.InvalidArgumentError(f"n must be an int in [1, {_MAX_N}] or None, not {n!r}")
        if not isinstance(logprobs, bool):
            raise _errors.InvalidArgumentError(f"logprobs must be a bool, not {logprobs!r}")
        if isinstance(top_logprobs, bool) or not isinstance(top_logprobs, (int, np.integer)) or top_logprobs < 0:
            raise _errors.InvalidArgumentError(f"top_logprobs must be an int >= 0, not {top_logprobs!r}")
        if top_logprobs and not logprobs:
            raise _errors.InvalidArgumentError("top_logprobs needs logprobs=True")
        copies = 1 if n is None else int(n)
        masks = _allowed_list(allowed, copies)
        key = isolation_key(isolation)
        if self.closed:
            raise _errors.InvalidArgumentError("the clformer.Engine is closed")
        if isinstance(prompt, str):
            ids = self._model.tokenize(prompt).astype(np.int64)
        else:
            ids = _arrays.as_ids("prompt", prompt, ndim=1).astype(np.int64, copy=False)
        ids = np.ascontiguousarray(ids)
        streamers: list[Streamer] = []
        try:
            seqs = []
            for _ in range(copies):  # each copy its own text stream (its own stop strings' state)
                streamer = None
                if self._text:
                    streamer = Streamer(self._model, self._model._tok, ids, s, stops)
                    streamer.open()
                    streamers.append(streamer)
                seqs.append(Sequence(self, len(ids), streamer, logprobs))
                seqs[-1]._allowed = masks[len(seqs) - 1]
            o = s.c_options()  # s keeps the eos array alive through the call
            req = _lib.EngineRequest()
            req.ids = ids.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))
            req.n_ids = len(ids)
            req.options = ctypes.pointer(o)
            req.isolation = key
            req.top_logprobs = int(top_logprobs)
            self._core.submit(req, seqs)
        except BaseException:
            for st in streamers:
                st.close()
            raise
        return seqs[0] if n is None else seqs

    def stats(self) -> EngineStats:
        """The pool and the sequences now, and the totals so far."""
        return self._core.stats()

    def close(self) -> None:
        """Stops the thread after its current step and frees the engine: the
        sequences still queued or running end "cancelled" (their tokens so
        far kept).  The model then runs other work again.  Idempotent."""
        self._finalizer()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<clformer.Engine of {self._model.path!r}{' closed' if self.closed else ''}>"
