"""api.py - the HTTP API's request checks and answer bodies, without Ray.

Every check a request body goes through before it reaches a model, and the
JSON of the answers (OpenAI's shapes for /v1/embeddings, /v1/completions and
/v1/chat/completions),
as plain functions over parsed bodies.  app.py calls them on the ingress;
tests call them without starting Ray.  A refused request raises
RequestError, which carries the HTTP status and a message naming the field.
"""
from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import math
import time
import uuid
from typing import Any, Mapping

import numpy as np

from .. import _lib
from .._generate import TABLE as _SETTINGS
from . import grammar, tools

# OpenAI's error "type" and default "code" for each status this server
# answers with, as OpenAI's API spells them (an unknown URL is
# invalid_request_error with code null; a rate limit is type "requests", code
# rate_limit_exceeded; a bad key invalid_api_key); a RequestError may name a
# more precise code (model_not_found, context_length_exceeded,
# unknown_parameter, missing_required_parameter, invalid_type,
# integer_above_max_value, ...).  Statuses OpenAI does not answer with keep a
# type of their own and a null code.
_ERRORS = {400: ("invalid_request_error", None), 401: ("invalid_request_error", "invalid_api_key"),
           404: ("invalid_request_error", None), 405: ("invalid_request_error", None),
           408: ("timeout", None), 413: ("invalid_request_error", None), 415: ("invalid_request_error", None),
           429: ("requests", "rate_limit_exceeded"), 500: ("server_error", None), 503: ("server_error", None),
           504: ("timeout", None)}


class RequestError(Exception):
    """A request the server refuses or cannot answer: the HTTP status, a
    message for the client, the body field it is about (or None) and
    OpenAI's error code for it (None: the status's default, _ERRORS).
    Picklable, so that a model replica can raise it through Ray."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None):
        super().__init__(status, message, param, code)
        self.status = status
        self.message = message
        self.param = param
        self.code = code

    def __reduce__(self):
        return (RequestError, (self.status, self.message, self.param, self.code))

    def __str__(self) -> str:
        return f"{self.status}: {self.message}"

    def body(self) -> dict:
        """The answer's JSON body, as OpenAI's API writes errors: "type" and
        "code" strings (code may be null), never the numeric status."""
        kind, code = _ERRORS.get(self.status, ("invalid_request_error", None))
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code or code}}


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one request may ask for; the server refuses more with a 4xx."""

    max_body_bytes: int = 8 << 20       #: request body size (413 past it)
    max_inputs: int = 256               #: texts in one embeddings request, images in one classify request
    max_input_chars: int = 65536        #: characters in one text or prompt, checked before tokenizing (400)
    max_concurrent: int = 64            #: requests the ingress holds at once (429 with Retry-After past it)
    body_timeout_s: float = 30.0        #: reading one request body (408 past it: a slow client)
    max_new_tokens: int = 0             #: the largest max_tokens, and the default of chat's (0: the context)
    max_run_elements: int = 1 << 22     #: elements of all /run inputs together
    max_top_k: int = 1000               #: classify's top_k
    request_timeout_s: float = 120.0    #: one request end to end on the ingress (504 past it)


# ---------------------------------------------------------------- bodies

def parse_json(raw: bytes) -> dict:
    """The body as a JSON object, or 400 saying why not."""
    if not raw:
        raise RequestError(400, "the request body is empty; send a JSON object")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RequestError(400, "the request body is not UTF-8 text (JSON is UTF-8)") from None
    try:
        body = json.loads(text)
    except json.JSONDecodeError as e:
        raise RequestError(400, f"malformed JSON in the request body: {e.msg} at line {e.lineno} "
                                f"column {e.colno}") from None
    except RecursionError:
        raise RequestError(400, "malformed JSON in the request body: nested too deeply") from None
    except ValueError as e:
        # e.g. an integer literal past Python's int_max_str_digits (4300 digits)
        raise RequestError(400, f"unreadable JSON in the request body: {str(e)[:200]}") from None
    if not isinstance(body, dict):
        raise RequestError(400, f"the request body must be a JSON object, not {_json_kind(body)}")
    return body


def _json_kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "an array"
    return "an object"


def _check_fields(body: Mapping, known: set[str], where: str) -> None:
    unknown = sorted(k for k in body if k not in known)
    if unknown:
        raise RequestError(400, f"unknown field {unknown[0]!r} in the {where} request; the fields are "
                                f"{', '.join(sorted(known))}", unknown[0], "unknown_parameter")


def _check_model(body: Mapping, served: str) -> None:
    model = body.get("model")
    if model is None:
        return
    if not isinstance(model, str):
        raise RequestError(400, f"model must be a string, not {_json_kind(model)}", "model", "invalid_type")
    if model != served:
        raise RequestError(404, f"model {model!r} is not served here; this server serves {served!r}", "model",
                           "model_not_found")


def _int_field(body: Mapping, name: str, default: int | None, lo: int, hi: int) -> int | None:
    v = body.get(name)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise RequestError(400, f"{name} must be an integer, not {_json_kind(v)}", name, "invalid_type")
    if not lo <= v <= hi:
        raise RequestError(400, f"{name} must be in [{lo}, {hi}], got {v}", name,
                           "integer_below_min_value" if v < lo else "integer_above_max_value")
    return v


def _float_field(body: Mapping, name: str, default: float | None, lo: float, hi: float,
                 lo_open: bool = False) -> float | None:
    v = body.get(name)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise RequestError(400, f"{name} must be a finite number, not {_json_kind(v)}", name)
    if v > hi or v < lo or (lo_open and v == lo):
        raise RequestError(400, f"{name} must be in {'(' if lo_open else '['}{lo:g}, {hi:g}], got {v}", name)
    return float(v)


def _text_ok(t: str, where: str, param: str, max_chars: int) -> None:
    """A text the library can take: UTF-8 (no lone surrogates, which JSON's
    \\ud800 escapes make), no NUL, at most max_chars characters (0: no limit)."""
    if max_chars and len(t) > max_chars:
        raise RequestError(400, f"{where} is {len(t)} characters long; at most {max_chars} per text", param)
    if "\0" in t:
        raise RequestError(400, f"{where} contains a NUL character", param)
    try:
        t.encode("utf-8")
    except UnicodeEncodeError as e:
        raise RequestError(400, f"{where} is not valid Unicode: a lone surrogate U+{ord(t[e.start]):04X} at "
                                f"character {e.start}", param) from None


def _texts(v: Any, name: str, limit: int, max_chars: int = 0) -> list[str]:
    """A string or a non-empty array of strings, each non-empty, valid
    Unicode and at most max_chars characters long."""
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not v:
        raise RequestError(400, f"{name} must be a string or a non-empty array of strings", name)
    if len(v) > limit:
        raise RequestError(400, f"{name} holds {len(v)} items; at most {limit} per request", name)
    for i, t in enumerate(v):
        if not isinstance(t, str):
            hint = " (token ids are not taken: send text)" if isinstance(t, (int, list)) else ""
            raise RequestError(400, f"{name}[{i}] must be a string, not {_json_kind(t)}{hint}", name)
        if not t:
            raise RequestError(400, f"{name}[{i}] is an empty string", name)
        _text_ok(t, f"{name}[{i}]", name, max_chars)
    return v


# ---------------------------------------------------------------- embeddings

@dataclasses.dataclass(frozen=True)
class EmbeddingsRequest:
    texts: list[str]
    encoding_format: str  # "float" or "base64"


def parse_embeddings(body: Mapping, served: str, limits: Limits) -> EmbeddingsRequest:
    """POST /v1/embeddings: {"input": str | [str], "model"?, "encoding_format"?: "float" | "base64"}."""
    _check_fields(body, {"input", "model", "encoding_format", "user", "dimensions"}, "embeddings")
    _check_model(body, served)
    if "input" not in body:
        raise RequestError(400, "input is missing: a string or an array of strings to embed", "input")
    texts = _texts(body["input"], "input", limits.max_inputs, limits.max_input_chars)
    fmt = body.get("encoding_format") or "float"
    if fmt not in ("float", "base64"):
        raise RequestError(400, f"encoding_format must be \"float\" or \"base64\", got {fmt!r}", "encoding_format")
    if body.get("dimensions") is not None:
        raise RequestError(400, "dimensions is not supported: the embedding has the model's hidden size",
                           "dimensions")
    return EmbeddingsRequest(texts, fmt)


def embeddings_answer(vectors: np.ndarray, tokens: int, req: EmbeddingsRequest, served: str) -> dict:
    data = []
    for i, v in enumerate(np.asarray(vectors, dtype=np.float32)):
        emb: Any = (base64.b64encode(v.astype("<f4").tobytes()).decode() if req.encoding_format == "base64"
                    else v.tolist())
        data.append({"object": "embedding", "index": i, "embedding": emb})
    return {"object": "list", "data": data, "model": served,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


# ---------------------------------------------------------------- completions

@dataclasses.dataclass(frozen=True)
class CompletionRequest:
    prompt: str
    max_tokens: int
    stream: bool
    stop: tuple[str, ...]
    echo: bool
    settings: dict  # Model.generate / Model.stream keyword settings
    user: str | None = None  # OpenAI's end-user id: the isolation key of prefix reuse
    n: int = 1  # choices: copies of the request sharing its prompt (engine only)
    logprobs: int | None = None  # None: none; k: each token's logprob and its k most probable alternatives
    include_usage: bool = False  # stream_options.include_usage: a last chunk with the usage
    response_format: "ResponseFormat | None" = None  # None: text

    @property
    def deterministic(self) -> bool:
        """Whether running it again gives the same text (greedy, or sampling
        with a seed): a stream cut by a failed replica can then be resumed."""
        return not self.settings.get("do_sample") or self.settings.get("seed") is not None


# The decoding settings a request takes, from the library's list
# (clf_generate_setting_at): every one but those that decode whole
# sequences (num_beams: a reply streams), do_sample (OpenAI's temperature
# decides: 0 greedy, else sampling) and max_new_tokens (OpenAI's max_tokens).
SETTING_FIELDS = tuple(n for n, g in _SETTINGS.items() if not g.whole and n not in ("do_sample", "max_new_tokens"))
# Those that only sampling uses: checked and left out beside temperature 0.
_SAMPLING_FIELDS = tuple(n for n in SETTING_FIELDS if n != "temperature" and (_SETTINGS[n].sampling or n == "seed"))

_COMPLETION_FIELDS = {"model", "prompt", "max_tokens", "stop", "stream", "echo", "n", "best_of", "logprobs",
                      "presence_penalty", "frequency_penalty", "user", "suffix", "stream_options",
                      "logit_bias", "response_format"} | set(SETTING_FIELDS)


def _setting_field(body: Mapping, name: str) -> Any:
    """A decoding setting checked as the library's list states it: its type
    and range (the same as `clformer generate`'s option and Python's keyword)."""
    g = _SETTINGS[name]
    if g.type == _lib.GEN_INT:
        return _int_field(body, name, None, int(g.min), int(g.max))
    return _float_field(body, name, None, g.min, g.max, lo_open=bool(g.min_excluded))


# max_tokens' ceiling where the server sets none (Limits.max_new_tokens 0):
# past any model's positions, so that the model's context is what refuses
# (context_length_exceeded), and an integer that every layer below takes.
MAX_TOKENS = 1 << 24

# n: a request's choices are sequences of the engine (copies sharing the
# prompt's blocks), each holding blocks of its own once it diverges and a
# place among the engine's running sequences (64 by default).  8 keeps one
# request to an eighth of those, so that one client's request cannot crowd
# out the others' (OpenAI takes up to 128).
MAX_N = 8
# Completions' legacy logprobs (OpenAI: at most 5) and chat's top_logprobs
# (OpenAI and the library, CLF_ENGINE_MAX_TOP_LOGPROBS: at most 20).
MAX_COMPLETION_LOGPROBS = 5
MAX_TOP_LOGPROBS = 20


@dataclasses.dataclass(frozen=True)
class _Decoding:
    stream: bool
    stop: tuple
    settings: dict
    n: int
    include_usage: bool


def _decoding(body: Mapping, limits: Limits, max_tokens: int | None) -> _Decoding:
    """The fields completions and chat completions share: stream,
    stream_options, stop, n, the refused OpenAI settings, and the decoding
    settings as Model.generate takes them.  temperature 0 decodes greedily
    (do_sample=False); above 0 it samples (top_p, and the extensions top_k,
    min_p, repetition_penalty, seed; an unset one is the checkpoint's, then
    transformers' default).  With n > 1 and a seed S, choice i samples with
    seed S + i."""
    n = _int_field(body, "n", 1, 1, MAX_N)
    if body.get("best_of") not in (None, n):
        raise RequestError(400, "best_of must be n (or absent): the choices are not ranked", "best_of")
    if body.get("logit_bias") not in (None, {}):
        raise RequestError(400, "logit_bias is not supported", "logit_bias")
    for name in ("presence_penalty", "frequency_penalty"):
        if _float_field(body, name, 0.0, -2.0, 2.0) != 0.0:
            raise RequestError(400, f"{name} is not supported (repetition_penalty is)", name)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError(400, f"stream must be a boolean, not {_json_kind(stream)}", "stream")
    opts = body.get("stream_options")
    if opts is not None:
        if not stream:
            raise RequestError(400, "stream_options is only allowed with stream: true", "stream_options")
        if not isinstance(opts, dict) or any(k != "include_usage" for k in opts):
            raise RequestError(400, "stream_options may only hold include_usage", "stream_options")
        if not isinstance(opts.get("include_usage", False), bool):
            raise RequestError(400, "stream_options.include_usage must be a boolean", "stream_options")
    include_usage = bool(opts and opts.get("include_usage"))
    stop = body.get("stop")
    if stop is None:
        stops: tuple[str, ...] = ()
    else:
        if isinstance(stop, str):
            stop = [stop]
        if not isinstance(stop, list) or len(stop) > 4 or not all(isinstance(s, str) and s for s in stop):
            raise RequestError(400, "stop must be a non-empty string or an array of at most 4 of them", "stop")
        for i, s in enumerate(stop):
            _text_ok(s, f"stop[{i}]", "stop", 1024)
        stops = tuple(stop)

    temperature = _setting_field(body, "temperature")
    settings: dict[str, Any] = {"max_new_tokens": max_tokens}  # None (left out below): with_max_tokens sets it
    if temperature == 0.0:
        # greedy: the sampling settings are checked and not used, as the
        # CLI and Python take them beside temperature 0
        settings["do_sample"] = False
        for name in _SAMPLING_FIELDS:
            _setting_field(body, name)
    else:  # OpenAI's default temperature is 1: sampling
        settings.update(do_sample=True, temperature=1.0 if temperature is None else temperature)
    # The package's seed, as the CLI's: 0 is a seed (the library's s + 1).
    for name in SETTING_FIELDS:
        if name != "temperature" and (temperature != 0.0 or name not in _SAMPLING_FIELDS):
            settings[name] = _setting_field(body, name)
    return _Decoding(stream, stops, {k: v for k, v in settings.items() if v is not None}, n, include_usage)


def _user(body: Mapping) -> str | None:
    """OpenAI's `user`, the end-user id: a string (the key that isolates
    prefix reuse in the engine, docs/serving.md), or absent."""
    v = body.get("user")
    if v is None:
        return None
    if not isinstance(v, str):
        raise RequestError(400, f"user must be a string, not {_json_kind(v)}", "user")
    _text_ok(v, "user", "user", 256)
    return v


def parse_completion(body: Mapping, served: str, limits: Limits) -> CompletionRequest:
    """POST /v1/completions, OpenAI's fields (the decoding ones as _decoding
    reads them)."""
    _check_fields(body, _COMPLETION_FIELDS, "completions")
    _check_model(body, served)
    if "prompt" not in body:
        raise RequestError(400, "prompt is missing", "prompt")
    prompts = _texts(body["prompt"], "prompt", 1, limits.max_input_chars)
    prompt = prompts[0]
    max_tokens = _int_field(body, "max_tokens", 16, 1, limits.max_new_tokens or MAX_TOKENS)
    if body.get("suffix") not in (None, ""):
        raise RequestError(400, "suffix is not supported", "suffix")
    echo = body.get("echo", False)
    if not isinstance(echo, bool):
        raise RequestError(400, f"echo must be a boolean, not {_json_kind(echo)}", "echo")
    # OpenAI's legacy logprobs: an integer, the alternatives given beside each token
    logprobs = None if body.get("logprobs") is False else _int_field(body, "logprobs", None, 0,
                                                                       MAX_COMPLETION_LOGPROBS)
    if logprobs is not None and echo:
        raise RequestError(400, "echo with logprobs is not supported: the prompt's log-probabilities are not "
                                "computed", "logprobs")
    d = _decoding(body, limits, max_tokens)
    return CompletionRequest(prompt, max_tokens, d.stream, d.stop, echo, d.settings, _user(body), d.n, logprobs,
                             d.include_usage, parse_response_format(body.get("response_format")))


# ---------------------------------------------------------------- response_format

@dataclasses.dataclass(frozen=True)
class ResponseFormat:
    """A response_format the reply is constrained to: "json_object" (any
    JSON object) or "json_schema" (`schema`, named `name`); `grammar` is
    llguidance's compiled form, checked when the request was parsed."""
    kind: str
    grammar: str
    schema: dict | None = None
    name: str | None = None


_SCHEMA_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def parse_response_format(v: Any) -> ResponseFormat | None:
    """OpenAI's response_format: {"type": "text"} (None: no constraint),
    {"type": "json_object"} or {"type": "json_schema", "json_schema":
    {"name", "schema", "strict"?, "description"?}}.  The schema is compiled
    now, so that one llguidance cannot take (an unknown type, an
    unsupported keyword, a bad pattern) is a 400 naming why before anything
    runs."""
    if v is None:
        return None
    where = "response_format"
    if not isinstance(v, dict):
        raise RequestError(400, f"{where} must be an object such as {{\"type\": \"json_object\"}}, not "
                                f"{_json_kind(v)}", where)
    kind = v.get("type")
    allowed = {"text": {"type"}, "json_object": {"type"}, "json_schema": {"type", "json_schema"}}
    if kind not in allowed:
        raise RequestError(400, f"{where}.type must be \"text\", \"json_object\" or \"json_schema\", not {kind!r}",
                           where)
    extra = sorted(set(v) - allowed[kind])
    if extra:
        raise RequestError(400, f"unknown field {extra[0]!r} in {where} of type {kind!r}", where)
    try:
        if kind == "text":
            return None
        if kind == "json_object":
            return ResponseFormat("json_object", grammar.json_object_grammar())
        js = v.get("json_schema")
        if not isinstance(js, dict):
            raise RequestError(400, f"{where}.json_schema must be an object {{\"name\", \"schema\", \"strict\"}}",
                               where)
        extra = sorted(set(js) - {"name", "schema", "strict", "description"})
        if extra:
            raise RequestError(400, f"unknown field {extra[0]!r} in {where}.json_schema", where)
        name = js.get("name")
        if not isinstance(name, str) or not 1 <= len(name) <= 64 or not set(name) <= _SCHEMA_NAME_CHARS:
            raise RequestError(400, f"{where}.json_schema.name must be 1 to 64 letters, digits, _ or -", where)
        if not isinstance(js.get("strict", False), (bool, type(None))):
            raise RequestError(400, f"{where}.json_schema.strict must be a boolean", where)
        if js.get("description") is not None and not isinstance(js["description"], str):
            raise RequestError(400, f"{where}.json_schema.description must be a string", where)
        schema = js.get("schema")
        if not isinstance(schema, dict):
            raise RequestError(400, f"{where}.json_schema.schema must be a JSON schema (an object), not "
                                    f"{_json_kind(schema)}", where)
        return ResponseFormat("json_schema", grammar.json_schema_grammar(schema), schema, name)
    except grammar.GrammarError as e:
        raise RequestError(400, f"{where}: the schema cannot be used for constrained decoding: {e}", where) \
            from None


# ---------------------------------------------------------------- chat completions

@dataclasses.dataclass(frozen=True)
class ChatRequest:
    messages: tuple  # of dicts: {"role", "content"} (content a string), as Model.chat takes them
    max_tokens: int | None  # None: what the context leaves (with_max_tokens)
    stream: bool
    stop: tuple[str, ...]
    settings: dict  # Model.chat / Model.chat_stream keyword settings
    user: str | None = None  # as CompletionRequest.user
    n: int = 1  # as CompletionRequest's
    logprobs: int | None = None
    include_usage: bool = False
    response_format: "ResponseFormat | None" = None  # None: text
    tools: tuple = ()  # of tools.Tool, as parse_tools checked them
    tool_choice: Any = "none"  # "none", "auto", "required" or a tool's name (str, forced)

    @property
    def deterministic(self) -> bool:
        return not self.settings.get("do_sample") or self.settings.get("seed") is not None


def with_max_tokens(req: CompletionRequest | ChatRequest, prompt_tokens: int, context: int | None,
                    cap: int) -> CompletionRequest | ChatRequest:
    """The request with its max_tokens settled against the model's context
    (its positions; None: unknown) once the prompt's length is known: an
    absent max_tokens becomes what the context leaves, capped at `cap` (the
    server's --max-new-tokens; 0: none); one past what the context leaves is
    refused (400 context_length_exceeded), before any token is generated."""
    left = None if context is None else context - prompt_tokens
    what = "the conversation" if isinstance(req, ChatRequest) else "the prompt"
    if left is not None and left < 1:
        raise RequestError(400, f"{what} is {prompt_tokens} tokens long: it fills this model's context of {context} "
                                "tokens and leaves none to generate", "messages" if isinstance(req, ChatRequest)
                           else "prompt", "context_length_exceeded")
    if req.max_tokens is None:
        n = min(x for x in (left, cap or None, MAX_TOKENS) if x is not None)
    else:
        n = req.max_tokens
        if left is not None and n > left:
            # (prompt_tokens 0: an encoder-decoder's reply, whose positions are its own)
            head = f"{what} is {prompt_tokens} tokens and max_tokens {n}: together" if prompt_tokens else \
                f"max_tokens {n} is"
            raise RequestError(400, f"{head} past this model's context of {context} tokens (at most {left} can be "
                                    "generated)", "max_tokens", "context_length_exceeded")
    return dataclasses.replace(req, max_tokens=n, settings=dict(req.settings, max_new_tokens=n))


_CHAT_FIELDS = {"model", "messages", "max_tokens", "max_completion_tokens", "stop", "stream", "n", "logprobs",
                "top_logprobs", "presence_penalty", "frequency_penalty", "user", "stream_options", "logit_bias",
                "tools", "tool_choice", "response_format", "parallel_tool_calls"} | set(SETTING_FIELDS)
_ROLES = ("system", "developer", "user", "assistant", "tool")
_MESSAGE_FIELDS = {"role", "content", "name", "tool_call_id", "tool_calls"}


def _content(v: Any, where: str, limits: Limits) -> str:
    """A message's content: a string, or OpenAI's array of text parts
    (joined as they come; other parts are refused)."""
    if v is None:
        return ""
    if isinstance(v, list):
        texts = []
        for j, part in enumerate(v):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                kind = part.get("type") if isinstance(part, dict) else _json_kind(part)
                raise RequestError(400, f"{where}[{j}] is a {kind!r} part; only text parts are taken", "messages")
            texts.append(part["text"])
        v = "".join(texts)
    if not isinstance(v, str):
        raise RequestError(400, f"{where} must be a string or an array of text parts, not {_json_kind(v)}",
                           "messages")
    _text_ok(v, where, "messages", limits.max_input_chars)
    return v


def _messages(v: Any, limits: Limits) -> tuple:
    if not isinstance(v, list) or not v:
        raise RequestError(400, "messages must be a non-empty array of {\"role\", \"content\"} objects", "messages")
    if len(v) > limits.max_inputs:
        raise RequestError(400, f"messages holds {len(v)} items; at most {limits.max_inputs} per request",
                           "messages")
    out = []
    for i, m in enumerate(v):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise RequestError(400, f"{where} must be an object, not {_json_kind(m)}", "messages")
        unknown = sorted(k for k in m if k not in _MESSAGE_FIELDS)
        if unknown:
            raise RequestError(400, f"unknown field {unknown[0]!r} in {where}", "messages")
        role = m.get("role")
        if role not in _ROLES:
            raise RequestError(400, f"{where}.role must be one of {', '.join(_ROLES)}, not {role!r}", "messages")
        msg = {"role": "system" if role == "developer" else role,
               "content": _content(m.get("content"), f"{where}.content", limits)}
        if m.get("tool_calls") not in (None, []):
            if role != "assistant":
                raise RequestError(400, f"{where}.tool_calls: only an assistant message makes tool calls", "messages")
            msg["tool_calls"] = tools.message_calls(m["tool_calls"], where, limits.max_input_chars)
        if role == "tool":
            tid = m.get("tool_call_id")
            if not isinstance(tid, str) or not tid:
                raise RequestError(400, f"{where}.tool_call_id must be the id of the call it answers (a string)",
                                   "messages")
            _text_ok(tid, f"{where}.tool_call_id", "messages", 256)
            msg["tool_call_id"] = tid
        elif m.get("tool_call_id") is not None:
            raise RequestError(400, f"{where}.tool_call_id belongs to a tool message only", "messages")
        if m.get("name") is not None:
            if not isinstance(m["name"], str):
                raise RequestError(400, f"{where}.name must be a string", "messages")
            _text_ok(m["name"], f"{where}.name", "messages", 256)
            msg["name"] = m["name"]
        out.append(msg)
    return tuple(out)


def parse_chat_completion(body: Mapping, served: str, limits: Limits) -> ChatRequest:
    """POST /v1/chat/completions, OpenAI's fields: messages (system,
    developer (taken as system), user, assistant (with tool_calls) and tool
    (with tool_call_id); content a string or text parts), max_tokens or
    max_completion_tokens (default None: the replica gives it what the
    context leaves, capped at the server's max_new_tokens; replica.py,
    with_max_tokens), the decoding fields of /v1/completions, logprobs (a
    boolean) with top_logprobs (0 to 20, needs logprobs), response_format
    (as parse_response_format) and tools with tool_choice (tools.parse_tools)."""
    _check_fields(body, _CHAT_FIELDS, "chat completions")
    _check_model(body, served)
    if "messages" not in body:
        raise RequestError(400, "messages is missing", "messages")
    messages = _messages(body["messages"], limits)
    fmt = parse_response_format(body.get("response_format"))
    tool_list, choice = tools.parse_tools(body.get("tools"), body.get("tool_choice"), body.get("parallel_tool_calls"))
    if fmt is not None and choice != "none":
        raise RequestError(400, "response_format and tool calls do not go together: send tool_choice \"none\" "
                                "or no response_format", "response_format")
    want = body.get("logprobs")
    if want is not None and not isinstance(want, bool):
        raise RequestError(400, f"logprobs must be a boolean, not {_json_kind(want)}", "logprobs")
    top = _int_field(body, "top_logprobs", None, 0, MAX_TOP_LOGPROBS)
    if top is not None and not want:
        raise RequestError(400, "top_logprobs needs logprobs: true", "top_logprobs")
    logprobs = (top or 0) if want else None
    if body.get("max_tokens") is not None and body.get("max_completion_tokens") is not None:
        raise RequestError(400, "give max_tokens or max_completion_tokens, not both", "max_completion_tokens")
    name = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    max_tokens = _int_field(body, name, None, 1, limits.max_new_tokens or MAX_TOKENS)
    d = _decoding(body, limits, max_tokens)
    return ChatRequest(messages, max_tokens, d.stream, d.stop, d.settings, _user(body), d.n, logprobs,
                       d.include_usage, fmt, tool_list, choice)


def chat_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex


def completion_id() -> str:
    return "cmpl-" + uuid.uuid4().hex


# A choice's log-probabilities travel from the replica as a list of entries
# (token text, logprob, [(alternative text, logprob), ...]) per generated
# token, the end token included (as usage counts it); the text of a token is
# the tokenizer's decoding of it alone, special tokens kept (vLLM's rule: a
# token that splits a character decodes to U+FFFD, and `bytes` are that
# text's UTF-8).

def _top_entry(text: str, lp: float) -> dict:
    return {"token": text, "logprob": lp, "bytes": list(text.encode("utf-8"))}


def logprobs_of(entries: list | None, chat: bool, offset: int = 0) -> dict | None:
    """A choice's (or a chunk's) `logprobs` from the replica's entries: for
    chat {"content": [{"token", "logprob", "bytes", "top_logprobs"}]}; for
    completions OpenAI's legacy object, whose top_logprobs map each
    alternative's text to its logprob (the chosen token's among them) and
    whose text_offset counts the token texts from `offset` (the characters
    of the choice's text before them)."""
    if entries is None:
        return None
    if chat:
        return {"content": [dict(_top_entry(t, lp), top_logprobs=[_top_entry(a, alp) for a, alp in top])
                            for t, lp, top in entries], "refusal": None}
    offsets = []
    for t, _, _ in entries:
        offsets.append(offset)
        offset += len(t)
    return {"tokens": [t for t, _, _ in entries], "token_logprobs": [lp for _, lp, _ in entries],
            "top_logprobs": [dict([*top, (t, lp)]) for t, lp, top in entries], "text_offset": offsets}


def _message(c: Mapping) -> dict:
    """A choice's assistant message: its text, or its tool calls (content
    then the text before them, or null)."""
    if c.get("tool_calls"):
        return {"role": "assistant", "content": c.get("text"), "tool_calls": c["tool_calls"]}
    return {"role": "assistant", "content": c["text"]}


def tool_call_chunks(cid: str, trailer: Mapping, served: str, index: int = 0, include_usage: bool = False) -> list:
    """A choice's tool calls (its trailer's "tool_calls"; none: []) streamed
    as OpenAI streams them: the text before them (its "content") if any,
    then per call a delta naming it (index, id, type, function.name, empty
    arguments) and one carrying its arguments."""
    calls = trailer.get("tool_calls") or []
    out = []
    if calls and trailer.get("content"):
        out.append(chat_chunk(cid, {"content": trailer["content"]}, None, served, index, include_usage=include_usage))
    for k, c in enumerate(calls):
        fn = c["function"]
        out.append(chat_chunk(cid, {"tool_calls": [{"index": k, "id": c["id"], "type": "function",
                                                    "function": {"name": fn["name"], "arguments": ""}}]},
                              None, served, index, include_usage=include_usage))
        out.append(chat_chunk(cid, {"tool_calls": [{"index": k, "function": {"arguments": fn["arguments"]}}]},
                              None, served, index, include_usage=include_usage))
    return out


def chat_answer(cid: str, choices: list, usage: dict, served: str) -> dict:
    """choices: {"text", "finish_reason", "logprobs" (entries or None), "tool_calls"?} each, in index order."""
    return {"id": cid, "object": "chat.completion", "created": int(time.time()), "model": served,
            "choices": [{"index": i, "message": _message(c),
                         "logprobs": logprobs_of(c.get("logprobs"), True), "finish_reason": c["finish_reason"]}
                        for i, c in enumerate(choices)],
            "usage": usage}


def completion_answer(cid: str, choices: list, usage: dict | None, served: str) -> dict:
    out = {"id": cid, "object": "text_completion", "created": int(time.time()), "model": served,
           "choices": [{"text": c["text"], "index": i, "logprobs": logprobs_of(c.get("logprobs"), False),
                        "finish_reason": c["finish_reason"]} for i, c in enumerate(choices)]}
    if usage is not None:
        out["usage"] = usage
    return out


def chat_chunk(cid: str, delta: dict, finish_reason: str | None, served: str, index: int = 0,
               logprobs: dict | None = None, include_usage: bool = False) -> dict:
    """One chunk of a streamed chat completion: a choice's first delta
    carries the role, the others the content's pieces, its last an empty
    delta and the finish reason.  With include_usage every chunk has
    "usage": null and a last one (usage_chunk) the usage, as OpenAI's."""
    out = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": served,
           "choices": [{"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}]}
    if include_usage:
        out["usage"] = None
    return out


def stream_chunk(cid: str, piece: str, finish_reason: str | None, chat: bool, served: str, index: int = 0,
                 logprobs: dict | None = None, include_usage: bool = False) -> dict:
    """One streamed event's JSON for choice `index`: a text_completion, or a
    chat.completion.chunk whose delta carries the content (empty with the
    finish reason); `logprobs` (logprobs_of) those of the tokens it carries."""
    if not chat:
        out = {"id": cid, "object": "text_completion", "created": int(time.time()), "model": served,
               "choices": [{"text": piece, "index": index, "logprobs": logprobs, "finish_reason": finish_reason}]}
        if include_usage:
            out["usage"] = None
        return out
    return chat_chunk(cid, {"content": piece} if finish_reason is None else {}, finish_reason, served, index,
                      logprobs, include_usage)


def usage_chunk(cid: str, usage: dict, chat: bool, served: str) -> dict:
    """stream_options.include_usage's last chunk: no choices, the usage of
    the whole request."""
    return {"id": cid, "object": "chat.completion.chunk" if chat else "text_completion", "created": int(time.time()),
            "model": served, "choices": [], "usage": usage}


def usage_of(prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> dict:
    """OpenAI's usage: the prompt counted once, the completion tokens of
    every choice summed."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens}}


def sse(obj: Any) -> bytes:
    """One server-sent event carrying `obj` as JSON (or "[DONE]")."""
    data = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


# ---------------------------------------------------------------- tokenize / detokenize

@dataclasses.dataclass(frozen=True)
class TokenizeRequest:
    prompt: str | None            # a text, or
    messages: tuple | None        # a conversation, rendered with the chat template (as _messages checks it)
    add_special_tokens: bool
    add_generation_prompt: bool
    return_token_strs: bool


@dataclasses.dataclass(frozen=True)
class DetokenizeRequest:
    tokens: tuple  # of ints in [0, 2^63); the vocabulary is checked by the replica


def _bool_field(body: Mapping, name: str, default: bool) -> bool:
    v = body.get(name, default)
    if not isinstance(v, bool):
        raise RequestError(400, f"{name} must be a boolean, not {_json_kind(v)}", name, "invalid_type")
    return v


def parse_tokenize(body: Mapping, served: str, limits: Limits) -> TokenizeRequest:
    """POST /tokenize, as vLLM's server takes it: {"model"?, "prompt": str,
    "add_special_tokens"? (default true)} or {"model"?, "messages": [...],
    "add_generation_prompt"? (default true), "add_special_tokens"? (default
    false: the template writes them)}; "return_token_strs"? adds each id's
    vocabulary entry.  Bounded as completions' prompt and chat's messages."""
    _check_fields(body, {"model", "prompt", "messages", "add_special_tokens", "add_generation_prompt",
                         "return_token_strs"}, "tokenize")
    _check_model(body, served)
    if ("prompt" in body) == ("messages" in body):
        raise RequestError(400, "give either prompt (a text) or messages (a conversation), not both or neither",
                           "prompt", "missing_required_parameter" if "prompt" not in body else None)
    strs = _bool_field(body, "return_token_strs", False)
    if "prompt" in body:
        if body.get("add_generation_prompt") is not None:
            raise RequestError(400, "add_generation_prompt goes with messages, not prompt", "add_generation_prompt")
        prompt = body["prompt"]
        if not isinstance(prompt, str):
            raise RequestError(400, f"prompt must be a string, not {_json_kind(prompt)}", "prompt", "invalid_type")
        _text_ok(prompt, "prompt", "prompt", limits.max_input_chars)
        return TokenizeRequest(prompt, None, _bool_field(body, "add_special_tokens", True), False, strs)
    return TokenizeRequest(None, _messages(body["messages"], limits), _bool_field(body, "add_special_tokens", False),
                           _bool_field(body, "add_generation_prompt", True), strs)


def parse_detokenize(body: Mapping, served: str, limits: Limits) -> DetokenizeRequest:
    """POST /detokenize: {"model"?, "tokens": [id, ...]}, at most
    Limits.max_input_chars ids (the bound of a text's characters: a text
    has no more tokens than characters, so no more are needed to write any
    text the server takes)."""
    _check_fields(body, {"model", "tokens"}, "detokenize")
    _check_model(body, served)
    if "tokens" not in body:
        raise RequestError(400, "tokens is missing: an array of token ids", "tokens", "missing_required_parameter")
    tokens = body["tokens"]
    if not isinstance(tokens, list):
        raise RequestError(400, f"tokens must be an array of token ids, not {_json_kind(tokens)}", "tokens",
                           "invalid_type")
    if len(tokens) > limits.max_input_chars:
        raise RequestError(400, f"tokens holds {len(tokens)} ids; at most {limits.max_input_chars} per request",
                           "tokens", "array_above_max_length")
    for i, t in enumerate(tokens):
        if isinstance(t, bool) or not isinstance(t, int):
            raise RequestError(400, f"tokens[{i}] must be an integer token id, not {_json_kind(t)}", "tokens",
                               "invalid_type")
        if not 0 <= t < 1 << 63:
            raise RequestError(400, f"tokens[{i}] is {t}: no token has that id", "tokens", "invalid_value")
    return DetokenizeRequest(tuple(tokens))


def tokenize_answer(ids: list, max_model_len: int | None, token_strs: list | None) -> dict:
    return {"count": len(ids), "max_model_len": max_model_len, "tokens": ids, "token_strs": token_strs}


# ---------------------------------------------------------------- classify

@dataclasses.dataclass(frozen=True)
class ClassifyRequest:
    items: list  # the bytes of PNG/JPEG files (kind "images"), or texts (kind "texts")
    top_k: int
    kind: str = "images"


_PNG = b"\x89PNG\r\n\x1a\n"
_JPEG = b"\xff\xd8\xff"


def image_bytes(data: Any, where: str, param: str | None = "images") -> bytes:
    """`data` as the bytes of a PNG or JPEG file, or 400.  Images reach a
    model only as bytes: no string from a request is ever a path."""
    if not isinstance(data, (bytes, bytearray)):
        raise RequestError(400, f"{where} must be the bytes of a PNG or JPEG file", param)
    if not data:
        raise RequestError(400, f"{where} is empty; send a PNG or JPEG file", param)
    if not (data.startswith(_PNG) or data.startswith(_JPEG)):
        raise RequestError(400, f"{where} is not a PNG or JPEG file (its first bytes are neither signature)", param)
    return bytes(data)


def parse_classify_json(body: Mapping, served: str, limits: Limits) -> ClassifyRequest:
    """POST /v1/classify with a JSON body: {"images": [base64 PNG/JPEG, ...]}
    or, for a text classifier, {"input": str | [str]}; "top_k"? (default 5)."""
    _check_fields(body, {"images", "input", "top_k", "model"}, "classify")
    _check_model(body, served)
    top_k = _int_field(body, "top_k", 5, 1, limits.max_top_k)
    if ("images" in body) == ("input" in body):
        raise RequestError(400, "give either images (base64 PNG/JPEG files) or input (texts), not both or neither")
    if "input" in body:
        return ClassifyRequest(_texts(body["input"], "input", limits.max_inputs, limits.max_input_chars), top_k,
                               "texts")
    imgs = body["images"]
    if isinstance(imgs, str):
        imgs = [imgs]
    if not isinstance(imgs, list) or not imgs:
        raise RequestError(400, "images must be a base64 string or a non-empty array of them", "images")
    if len(imgs) > limits.max_inputs:
        raise RequestError(400, f"images holds {len(imgs)} items; at most {limits.max_inputs} per request",
                           "images")
    items = []
    for i, s in enumerate(imgs):
        if not isinstance(s, str):
            raise RequestError(400, f"images[{i}] must be a base64 string, not {_json_kind(s)}", "images")
        try:
            raw = base64.b64decode(s, validate=True)
        except (binascii.Error, ValueError):
            raise RequestError(400, f"images[{i}] is not valid base64 (images come as base64 PNG/JPEG data; "
                                    "a path is not taken)", "images") from None
        items.append(image_bytes(raw, f"images[{i}]"))
    return ClassifyRequest(items, top_k, "images")


def parse_top_k(query: Mapping[str, str], limits: Limits) -> int:
    """top_k from the query string of a raw-image classify request."""
    raw = query.get("top_k")
    if raw is None:
        return 5
    try:
        k = int(raw)
    except ValueError:
        raise RequestError(400, f"top_k must be an integer, got {raw!r}", "top_k") from None
    if not 1 <= k <= limits.max_top_k:
        raise RequestError(400, f"top_k must be in [1, {limits.max_top_k}], got {k}", "top_k")
    return k


def classify_answer(results: list, served: str) -> dict:
    return {"object": "list", "model": served,
            "data": [{"index": i, "labels": [{"label": lab, "score": float(p)} for lab, p in r]}
                     for i, r in enumerate(results)]}


# ---------------------------------------------------------------- /run

@dataclasses.dataclass(frozen=True)
class RunRequest:
    inputs: dict  # name -> np.ndarray
    outputs: list | None


# JSON numbers of the inputs that hold floats become float32; every other
# input holds ids or a mask (int64), as clformer.Model takes them.
FLOAT_INPUTS = frozenset({"pixel_values", "noise", "inputs_embeds"})


def parse_run(body: Mapping, input_names: list[str], output_names: list[str], served: str,
              limits: Limits) -> RunRequest:
    """POST /run: {"inputs": {name: nested array}, "outputs"?: [name]}; names
    as the model's forward() takes and gives them."""
    _check_fields(body, {"inputs", "outputs", "model"}, "run")
    _check_model(body, served)
    inputs = body.get("inputs")
    if not isinstance(inputs, dict) or not inputs:
        raise RequestError(400, f"inputs must be an object of named arrays; this model takes "
                                f"{', '.join(input_names)}", "inputs")
    arrays, total = {}, 0
    for name, value in inputs.items():
        if name not in input_names:
            raise RequestError(400, f"unknown input {name!r}; this model takes {', '.join(input_names)}", "inputs")
        arr = _array(name, value)
        total += arr.size
        if total > limits.max_run_elements:
            raise RequestError(413, f"the inputs hold more than {limits.max_run_elements} numbers", "inputs")
        arrays[name] = arr
    outputs = body.get("outputs")
    if outputs is not None:
        if (not isinstance(outputs, list) or not outputs or not all(isinstance(o, str) for o in outputs)):
            raise RequestError(400, "outputs must be a non-empty array of output names", "outputs")
        for o in outputs:
            if o not in output_names:
                raise RequestError(400, f"unknown output {o!r}; this model gives {', '.join(output_names)}",
                                   "outputs")
    return RunRequest(arrays, outputs)


def _array(name: str, value: Any) -> np.ndarray:
    floats = name in FLOAT_INPUTS
    if not isinstance(value, list):
        raise RequestError(400, f"input {name!r} must be a (nested) array of numbers, not {_json_kind(value)}",
                           "inputs")
    try:
        arr = np.array(value)
    except (ValueError, OverflowError):
        raise RequestError(400, f"input {name!r} is ragged: every row must have the same length", "inputs") from None
    if arr.dtype == np.bool_ or arr.dtype.kind == "O" or arr.dtype.kind in "US":
        what = "ragged or holds what is not a number" if arr.dtype.kind == "O" else "holds what is not a number"
        raise RequestError(400, f"input {name!r} {what}", "inputs")
    if floats:
        return arr.astype(np.float32)
    if arr.dtype.kind == "f":
        if arr.size:
            raise RequestError(400, f"input {name!r} holds ids or a mask: integers, not fractions", "inputs")
        arr = arr.astype(np.int64)
    return arr.astype(np.int64)


def run_answer(outputs: Mapping[str, np.ndarray], served: str) -> dict:
    return {"model": served,
            "outputs": {k: v.tolist() for k, v in outputs.items()},
            "shapes": {k: list(v.shape) for k, v in outputs.items()},
            "dtypes": {k: str(v.dtype) for k, v in outputs.items()}}


def json_bytes(obj: Any) -> bytes:
    """The answer body; non-finite floats (a model can produce them) are
    written as NaN / Infinity, as Python's json reads them."""
    return json.dumps(obj, separators=(",", ":")).encode()
