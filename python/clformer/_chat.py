"""_chat.py - conversations through the library's clf_chat: the messages
rendered by the C chat-template renderer (the one `clformer chat` and the
server use), the reply decoded and streamed by clf_chat_respond, and the
model's KV cache kept between calls (a conversation sent again with one more
message feeds only what is new)."""
from __future__ import annotations

import ctypes
import dataclasses
import json
import threading
from typing import Any, Mapping, Sequence

from . import _errors, _lib
from ._generate import GenerateSettings, PieceStream, piece_queue, queued_pieces

_libc = ctypes.CDLL(None)
_libc.free.argtypes = [ctypes.c_void_p]


def check_messages(messages: Any) -> list[str]:
    """messages (a list of dicts with a str "role", as transformers'
    apply_chat_template and OpenAI's API take them) as JSON texts."""
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise _errors.InvalidArgumentError("messages must be a list of {\"role\": ..., \"content\": ...} dicts")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
            raise _errors.InvalidArgumentError(f"messages[{i}] must be a dict with a str \"role\"")
        try:
            text = json.dumps(dict(m), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise _errors.InvalidArgumentError(f"messages[{i}] is not JSON-serializable: {e}") from None
        out.append(_lib.cstr(text, f"messages[{i}]"))
    return out


def check_stops(stop: str | Sequence[str]) -> list[bytes]:
    stops = [stop] if isinstance(stop, str) else list(stop)
    for x in stops:
        if not isinstance(x, str) or not x:
            raise _errors.InvalidArgumentError("stop strings must be non-empty str")
    return [_lib.cstr(x, "stop") for x in stops]


@dataclasses.dataclass(frozen=True)
class TemplateBudget:
    """What one rendering of a chat template may cost (the library's
    clf_template_budget; 0: the library's default).  A template is code from
    a downloaded file run with client text in it; past any of these a render
    raises LimitError naming the budget and the template's line:column.

    steps: loop iterations, calls, filters and tests, list items made, dict
        entries searched (default 1000000).
    bytes: bytes of text produced, copied or searched (default 128 MiB).
    memory: bytes of the render's values alive at once (default 64 MiB)."""

    steps: int = 0
    bytes: int = 0
    memory: int = 0

    def __post_init__(self) -> None:
        for k in ("steps", "bytes", "memory"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << 64:
                raise _errors.InvalidArgumentError(f"TemplateBudget.{k} must be an int in [0, 2**64), not {v!r}")

    def c(self) -> "_lib.TemplateBudget":
        return _lib.TemplateBudget(self.steps, self.bytes, self.memory)


def parse_for(tok: Any, source: bytes, budget: TemplateBudget | None) -> int:
    """Template `source` (UTF-8) with the tokenizer's special tokens as its
    variables (clf_tokenizer_chat_template_parse), its budget set: the handle."""
    lib = _lib.lib
    t = ctypes.c_void_p()
    with tok.locked() as h:
        _errors.check(lib.clf_tokenizer_chat_template_parse(h, source, ctypes.byref(t)))
    if budget is not None:
        st = lib.clf_chat_template_set_budget(t.value, ctypes.byref(budget.c()))
        if st != 0:
            lib.clf_chat_template_destroy(t.value)
            _errors.check(st)
    return t.value


def render(tok_handle: int, messages: list[bytes], add_generation_prompt: bool, variables: Mapping,
           budget: TemplateBudget | None = None, template: int | None = None) -> str:
    """The tokenizer's template (or `template`, a handle of parse_for's,
    borrowed) rendered with the messages (JSON texts) and extra variables
    (tools, documents, date_string, ...)."""
    lib = _lib.lib
    ctx = dict(variables)
    ctx["messages"] = [json.loads(m) for m in messages]
    ctx["add_generation_prompt"] = bool(add_generation_prompt)
    try:
        raw = json.dumps(ctx, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise _errors.InvalidArgumentError(f"the template's variables are not JSON-serializable: {e}") from None
    t = ctypes.c_void_p(template)
    if template is None:
        _errors.check(lib.clf_tokenizer_chat_template(tok_handle, ctypes.byref(t)))
    try:
        if budget is not None and template is None:
            _errors.check(lib.clf_chat_template_set_budget(t.value, ctypes.byref(budget.c())))
        out = ctypes.c_void_p()
        _errors.check(lib.clf_chat_template_render_json(t.value, _lib.cstr(raw, "messages"), ctypes.byref(out)))
        try:
            return ctypes.string_at(out.value).decode("utf-8", "replace") if out.value else ""
        finally:
            _libc.free(out)
    finally:
        if template is None:
            lib.clf_chat_template_destroy(t.value)


class Conversation:
    """The clf_chat a Model keeps (one: the KV cache holds one conversation)."""

    def __init__(self) -> None:
        self.handle: int | None = None
        self.tok: int | None = None  # the tokenizer handle it borrows
        self.budget: TemplateBudget | None = None  # its template's, when set
        self.template: int | None = None  # Model(chat_template=...)'s, borrowed; None: the tokenizer's

    def get(self, model_handle: int, tok_handle: int, ctx: int) -> int:
        """The conversation (made when first needed, or again for another
        tokenizer handle); call with the model's and the tokenizer's locks held."""
        lib = _lib.lib
        if self.handle is not None and self.tok == tok_handle:
            return self.handle
        self.destroy()
        h = ctypes.c_void_p()
        st = lib.clf_chat_create(model_handle, tok_handle, self.template, ctypes.byref(h))
        if st != 0:
            raise _errors.from_status(st, ctx)
        if self.budget is not None and self.template is None:  # a given template has its budget already
            st = lib.clf_chat_set_template_budget(h.value, ctypes.byref(self.budget.c()))
            if st != 0:
                lib.clf_chat_destroy(h.value)
                raise _errors.from_status(st, ctx)
        self.handle, self.tok = h.value, tok_handle
        return self.handle

    def destroy(self) -> None:
        if self.handle is not None:
            _lib.lib.clf_chat_destroy(self.handle)
        self.handle = self.tok = None


class ChatReply(str):
    """What Model.chat returns: the reply's text (a str), with the turn's
    counts: prompt_tokens, cached_tokens (of those, taken from the KV cache),
    completion_tokens, and finish_reason ("stop": an end token or a stop
    string; "length": max_new_tokens)."""

    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    finish_reason: str


def _reply(text: str, turn: _lib.ChatTurn) -> ChatReply:
    r = ChatReply(text)
    r.prompt_tokens, r.cached_tokens = int(turn.prompt_tokens), int(turn.reused_tokens)
    r.completion_tokens = int(turn.new_tokens)
    r.finish_reason = "stop" if turn.finished else "length"
    return r


def respond(model: Any, messages: list[bytes], settings: GenerateSettings, stops: list[bytes],
            on_text: Any = None) -> ChatReply:
    """One clf_chat_respond on the model's conversation, given these messages
    from the start (the cache keeps what they share with the last call's),
    under the model's and the tokenizer's locks."""
    lib = _lib.lib
    o = _lib.ChatOptions()
    lib.clf_chat_options_init(ctypes.byref(o))
    o.generate = settings.c_options()
    c_stops = (ctypes.c_char_p * max(1, len(stops)))(*stops)
    if stops:
        o.stop, o.n_stop = ctypes.cast(c_stops, ctypes.POINTER(ctypes.c_char_p)), len(stops)
    h, stopped = model._h, []

    def text_fn(user: Any, text: Any, length: int) -> int:
        if h.stop:
            stopped.append(True)
            return 1
        return on_text(ctypes.string_at(text, length)) if on_text else 0

    cb = _lib.TEXT_FN(text_fn)  # alive until the call returns
    o.on_text = cb
    reply = ctypes.c_void_p()
    turn = _lib.ChatTurn()
    with model._lock:
        m = model._runs("chat")
        with model._tok.locked() as tok:
            c = model._conversation.get(m, tok, model._h.ctx)
            lib.clf_chat_clear(c)
            for i, msg in enumerate(messages):
                st = lib.clf_chat_add_json(c, msg)
                if st != 0:
                    raise model._fail(st)
            st = lib.clf_chat_respond(c, ctypes.byref(o), ctypes.byref(reply), ctypes.byref(turn))
            if st != 0:
                raise model._fail(st)
    try:
        text = ctypes.string_at(reply.value).decode("utf-8", "replace") if reply.value else ""
    finally:
        _libc.free(reply)
    if stopped:
        raise model._closed_during("chat")
    return _reply(text, turn)


class ChatStream(PieceStream):
    """What Model.chat_stream returns: the reply's text in pieces as they
    come; once it has ended, `reply` is the ChatReply (counts and
    finish_reason).  close() (or cancel() from another thread) ends the
    reply after the current piece."""

    _END = object()

    def __init__(self, model: Any, messages: list[bytes], settings: GenerateSettings, stops: list[bytes]):
        self.reply: ChatReply | None = None
        q = piece_queue()
        cancel = threading.Event()

        def on_text(piece: bytes) -> int:
            q.put(piece.decode("utf-8", "replace"))
            return 1 if cancel.is_set() else 0

        def work() -> None:
            try:
                self.reply = respond(model, messages, settings, stops, on_text)
                q.put(self._END)
            except BaseException as e:  # handed to the iterating thread
                q.put(e)

        super().__init__(queued_pieces(work, q, cancel, self._END, "clformer-chat"), cancel)
