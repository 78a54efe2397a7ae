"""tools.py - OpenAI's tools / tool_choice for chat completions: the request's
tools checked, the conversation's tool calls and results handed to the
model's chat template, the family of the template's call format found, the
call format as a grammar (tool_choice "required" or a named tool), and the
model's output parsed back into OpenAI's tool_calls.

Families (the format a template renders an assistant's tool call in, which
is the one its model was trained to write):
  hermes   <tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>
           (Hermes 2 Pro, Qwen 2.5)
  llama3   {"name": ..., "parameters": {...}}, optionally after <|python_tag|>
           (Llama 3.1, 3.2)
  mistral  [TOOL_CALLS][{"name": ..., "arguments": {...}}]
           (Mistral v3 / Nemo; call ids of 9 letters and digits)
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import secrets
import string
from typing import Any

from . import api, grammar

MAX_TOOLS = 128
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_FIELDS = {"type", "function"}
_FUNCTION_FIELDS = {"name", "description", "parameters", "strict"}


@dataclasses.dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict  # its JSON schema (an object schema; {} when none was given)

    def spec(self) -> dict:
        """As the chat templates take it (OpenAI's shape)."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}


def _err(msg: str, param: str) -> Exception:
    return api.RequestError(400, msg, param)


def parse_tools(tools: Any, choice: Any, parallel: Any) -> tuple[tuple, Any]:
    """The request's tools (each's parameters compiled now: a schema
    llguidance refuses is a 400 naming the tool) and tool_choice: "none",
    "auto", "required" or the forced tool's name.  Without tools the choice
    is "none"; with them it defaults to "auto", as OpenAI's."""
    if parallel is not None and not isinstance(parallel, bool):
        raise _err("parallel_tool_calls must be a boolean", "parallel_tool_calls")
    if tools in (None, []):
        if choice not in (None, "none"):
            raise _err("tool_choice needs tools", "tool_choice")
        return (), "none"
    if not isinstance(tools, list):
        raise _err("tools must be an array of {\"type\": \"function\", \"function\": {...}} objects", "tools")
    if len(tools) > MAX_TOOLS:
        raise _err(f"tools holds {len(tools)} items; at most {MAX_TOOLS}", "tools")
    out, names = [], set()
    for i, t in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(t.get("function"), dict):
            raise _err(f"{where} must be {{\"type\": \"function\", \"function\": {{\"name\", ...}}}}", "tools")
        extra = sorted(set(t) - _FIELDS) or sorted(set(t["function"]) - _FUNCTION_FIELDS)
        if extra:
            raise _err(f"unknown field {extra[0]!r} in {where}", "tools")
        f = t["function"]
        name = f.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise _err(f"{where}.function.name must be 1 to 64 letters, digits, _ or -", "tools")
        if name in names:
            raise _err(f"{where}.function.name {name!r} is given twice", "tools")
        names.add(name)
        desc = f.get("description", "")
        if not isinstance(desc, str):
            raise _err(f"{where}.function.description must be a string", "tools")
        params = f.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, dict) or params.get("type", "object") != "object":
            raise _err(f"{where}.function.parameters must be a JSON schema of an object", "tools")
        try:
            grammar.json_schema_grammar(params)
        except grammar.GrammarError as e:
            raise _err(f"{where}.function.parameters cannot be used for constrained decoding: {e}", "tools") \
                from None
        out.append(Tool(name, desc, params))
    if choice is None:
        choice = "auto"
    if isinstance(choice, dict):
        fn = choice.get("function")
        if choice.get("type") != "function" or not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise _err("tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                       "\"function\": {\"name\": ...}}", "tool_choice")
        if fn["name"] not in names:
            raise _err(f"tool_choice names {fn['name']!r}, which is not among the tools", "tool_choice")
        choice = fn["name"]
    elif choice not in ("none", "auto", "required"):
        raise _err("tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                   "\"function\": {\"name\": ...}}", "tool_choice")
    return tuple(out), choice


def message_calls(calls: Any, where: str, max_chars: int) -> list:
    """An assistant message's tool_calls as the templates take them: id,
    type and function {name, arguments}, the arguments (a JSON string in
    OpenAI's API) parsed into an object, which templates iterate or tojson."""
    if not isinstance(calls, list):
        raise _err(f"{where}.tool_calls must be an array", "messages")
    out = []
    for j, c in enumerate(calls):
        w = f"{where}.tool_calls[{j}]"
        if not isinstance(c, dict) or not isinstance(c.get("function"), dict):
            raise _err(f"{w} must be {{\"id\", \"type\": \"function\", \"function\": {{\"name\", \"arguments\"}}}}",
                       "messages")
        cid, f = c.get("id"), c["function"]
        if not isinstance(cid, str) or not 1 <= len(cid) <= 256:
            raise _err(f"{w}.id must be a string", "messages")
        if not isinstance(f.get("name"), str) or not _NAME.match(f["name"]):
            raise _err(f"{w}.function.name must be 1 to 64 letters, digits, _ or -", "messages")
        args = f.get("arguments", "{}")
        if isinstance(args, str):
            if max_chars and len(args) > max_chars:
                raise _err(f"{w}.function.arguments is {len(args)} characters long; at most {max_chars}", "messages")
            try:
                args = json.loads(args)
            except (ValueError, RecursionError):
                raise _err(f"{w}.function.arguments is not JSON", "messages") from None
        if not isinstance(args, dict):
            raise _err(f"{w}.function.arguments must be a JSON object", "messages")
        out.append({"id": cid, "type": "function", "function": {"name": f["name"], "arguments": args}})
    return out


# ---------------------------------------------------------------- families

_PROBE_ID = "abcdefghi"  # nine letters: Mistral's templates check a call id's length
_PROBE = [{"role": "user", "content": "probe"},
          {"role": "assistant", "content": None, "tool_calls": [
              {"id": _PROBE_ID, "type": "function", "function": {"name": "probe_fn", "arguments": {"x": 1}}}]},
          {"role": "tool", "tool_call_id": _PROBE_ID, "content": "probe result"}]
_PROBE_TOOLS = [Tool("probe_fn", "a probe", {"type": "object", "properties": {"x": {"type": "integer"}}}).spec()]


def family_of(model: Any) -> str | None:
    """The family of the model's chat template, read from how it renders an
    assistant's tool call (None: it renders none, or refuses tools)."""
    try:
        out = model.apply_chat_template(_PROBE, add_generation_prompt=True, tools=_PROBE_TOOLS)
    except Exception:  # noqa: BLE001 - a template that cannot render tool calls has no family
        return None
    if "probe_fn" not in out:
        return None
    if "[TOOL_CALLS]" in out:
        return "mistral"
    if "<tool_call>" in out:
        return "hermes"
    if re.search(r'\{"name": "probe_fn", "parameters": ', out):
        return "llama3"
    return None


def _mistral_id(cid: str) -> str:
    """OpenAI's call id as the nine letters and digits Mistral's templates
    require (the same id always maps to the same nine)."""
    if len(cid) == 9 and cid.isalnum():
        return cid
    digest = hashlib.blake2b(cid.encode("utf-8"), digest_size=16).digest()
    alphabet = string.ascii_letters + string.digits
    return "".join(alphabet[b % len(alphabet)] for b in digest[:9])


def template_messages(messages: Any, family: str | None) -> list:
    """The conversation for the template: Mistral's call ids mapped to its
    nine characters (in calls and in the tool results that answer them)."""
    if family != "mistral":
        return list(messages)
    out = []
    for m in messages:
        m = dict(m)
        if "tool_calls" in m:
            m["tool_calls"] = [dict(c, id=_mistral_id(c["id"])) for c in m["tool_calls"]]
        if "tool_call_id" in m:
            m["tool_call_id"] = _mistral_id(m["tool_call_id"])
        out.append(m)
    return out


def _call_schema(tools: tuple, choice: str, args_key: str) -> dict:
    """One call: {"name": <a tool's>, args_key: <its parameters>}."""
    chosen = [t for t in tools if choice in ("required", "auto") or t.name == choice]
    alts = [{"type": "object", "properties": {"name": {"const": t.name}, args_key: t.parameters},
             "required": ["name", args_key], "additionalProperties": False} for t in chosen]
    one = dict(alts[0]) if len(alts) == 1 else {"anyOf": alts}
    one["x-guidance"] = grammar.JSON_OPTIONS  # compact: no run of blanks between tokens
    return one


def _lit(vocab: grammar.Vocabulary, text: str) -> str:
    """A Lark literal for `text`, or the special token spelled so (<[id]>)."""
    tid = vocab.token_of(text)
    return f"<[{tid}]>" if tid is not None else json.dumps(text)


def call_grammar(family: str, tools: tuple, choice: str, vocab: grammar.Vocabulary) -> str:
    """The Lark grammar (llguidance's) of one call in the family's format
    to one of the tools (tool_choice "required") or the named one."""
    if family == "hermes":
        lark = (f'start: {_lit(vocab, "<tool_call>")} "\\n" call "\\n" {_lit(vocab, "</tool_call>")}\n'
                f'call: %json {json.dumps(_call_schema(tools, choice, "arguments"))}\n')
    elif family == "llama3":
        lark = f'start: call\ncall: %json {json.dumps(_call_schema(tools, choice, "parameters"))}\n'
    elif family == "mistral":
        lark = (f'start: {_lit(vocab, "[TOOL_CALLS]")} "[" call "]"\n'
                f'call: %json {json.dumps(_call_schema(tools, choice, "arguments"))}\n')
    else:
        raise grammar.GrammarError(f"no tool-call format for family {family!r}")
    return grammar.lark_grammar(lark)


# ---------------------------------------------------------------- parsing

def _objects(text: str) -> list:
    """The JSON values one after another in text (separated by blanks, ; or ,)."""
    dec, out, i = json.JSONDecoder(), [], 0
    while i < len(text):
        while i < len(text) and text[i] in " \t\r\n;,":
            i += 1
        if i >= len(text):
            break
        try:
            v, i = dec.raw_decode(text, i)
        except ValueError:
            break
        out.append(v)
    return out


def _call(obj: Any, args_keys: tuple, names: set) -> dict | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or obj["name"] not in names:
        return None
    args = next((obj[k] for k in args_keys if k in obj), {})
    if isinstance(args, str):  # some models write the arguments as a JSON string already
        try:
            args = json.loads(args)
        except ValueError:
            return None
    if not isinstance(args, dict):
        return None
    return {"id": "call_" + secrets.token_hex(12), "type": "function",
            "function": {"name": obj["name"], "arguments": json.dumps(args, ensure_ascii=False)}}


def parse_calls(family: str | None, text: str, tools: tuple) -> tuple[str | None, list]:
    """The model's raw output (special tokens kept) as (content, tool_calls):
    the calls to the request's tools in the family's format, in OpenAI's
    shape (id "call_...", type "function", function {name, arguments as a
    JSON string}), and the text before them (None when empty).  No call
    found: (text, [])."""
    names = {t.name for t in tools}
    calls: list = []
    head = text
    if family == "hermes" and "<tool_call>" in text:
        head = text.split("<tool_call>", 1)[0]
        for body in re.findall(r"<tool_call>(.*?)(?:</tool_call>|$)", text, re.S):
            for obj in _objects(body.strip()):
                c = _call(obj, ("arguments", "parameters"), names)
                if c:
                    calls.append(c)
    elif family == "mistral" and "[TOOL_CALLS]" in text:
        head, rest = text.split("[TOOL_CALLS]", 1)
        for v in _objects(rest.strip()):
            for obj in (v if isinstance(v, list) else [v]):
                c = _call(obj, ("arguments", "parameters"), names)
                if c:
                    calls.append(c)
    elif family == "llama3":
        body = text.split("<|python_tag|>", 1)
        head, rest = (body[0], body[1]) if len(body) == 2 else ("", text)
        if rest.lstrip().startswith("{"):
            for obj in _objects(rest.strip()):
                c = _call(obj, ("parameters", "arguments"), names)
                if c:
                    calls.append(c)
    if not calls:
        return text, []
    head = head.strip()
    return (head or None), calls


def end_of_turn(model: Any) -> list:
    """The token ids that end an assistant turn in the model's template: what
    follows an assistant message's text, up to the first token (e.g.
    <|im_end|>, <|eot_id|>, </s>); [] when none is found."""
    mark = "Zq7Zq"
    try:
        out = model.apply_chat_template([{"role": "user", "content": "a"}, {"role": "assistant", "content": mark}])
    except Exception:  # noqa: BLE001 - no template, no turn end
        return []
    tail = out.split(mark, 1)[-1] if mark in out else ""
    ids = model.tokenize(tail, add_special_tokens=False) if tail.strip() else []
    return [int(ids[0])] if len(ids) else []
