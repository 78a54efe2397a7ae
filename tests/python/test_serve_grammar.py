"""response_format and tools (clformer.serve.grammar, tools, api): schemas and
tools checked before anything runs, replies constrained by llguidance
through the engine's token mask, tool calls rendered by the fixture chat
templates and parsed back, for each family: Hermes/Qwen (qwen2.5,
hermes-2-pro-tools), Llama 3.x (llama3.1, llama3.2), Mistral
(mistral-large-v3-tools, mistral-nemo).

The models are random (toolmodel.py: a GPT-2 with a byte-level tokenizer
and the families' special tokens; the GGUF fixture smollm_like), so the
tests check the form of every reply (it parses, validates against its
schema with jsonschema, names a given tool), never its sense.  The server
part runs a local Ray (127.0.0.1, 2 CPUs) once for the module and talks to
it with OpenAI's client.
"""
import json
import os

import numpy as np
import pytest

try:
    import jsonschema
    import llguidance  # noqa: F401
except ImportError:
    # tools/serve-test.sh installs them and sets CLF_REQUIRE_SERVE=1: there, a missing one fails.
    if os.environ.get("CLF_REQUIRE_SERVE") == "1":
        raise
    pytest.skip("llguidance and jsonschema are not installed (tools/serve-test.sh installs them)",
                allow_module_level=True)

import clformer  # noqa: E402
import toolmodel  # noqa: E402
from clformer.serve import api, grammar, tools  # noqa: E402
from clformer.serve.api import RequestError  # noqa: E402
from conftest import FIXTURES as FX  # noqa: E402
from conftest import require_device  # noqa: E402

GGUF = os.path.join(FX, "gguf_models", "smollm_like", "model.gguf")
LIMITS = api.Limits(max_new_tokens=200)

# Schemas bounded so that a random model finishes (every string has a
# maxLength, every array a maxItems): the replies then always end inside
# max_tokens and must parse and validate.
PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 3},
    "ok": {"type": "boolean"}}, "required": ["name", "age", "tags", "ok"], "additionalProperties": False}
NESTED = {"type": "object", "properties": {
    "point": {"type": "object", "properties": {"x": {"type": "integer", "minimum": -999, "maximum": 999},
                                                 "y": {"type": "integer", "minimum": 0, "maximum": 9}},
              "required": ["x", "y"], "additionalProperties": False},
    "kind": {"enum": ["a", "b"]}, "note": {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 5}]}},
    "required": ["point", "kind", "note"], "additionalProperties": False}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "the city", "maxLength": 10},
        "unit": {"type": "string", "description": "the unit", "enum": ["c", "f"]}},
        "required": ["city", "unit"], "additionalProperties": False}}}
ADD = {"type": "function", "function": {
    "name": "add", "description": "Adds two integers",
    "parameters": {"type": "object", "properties": {
        "a": {"type": "integer", "description": "a", "minimum": -99, "maximum": 99},
        "b": {"type": "integer", "description": "b", "minimum": -99, "maximum": 99}},
        "required": ["a", "b"], "additionalProperties": False}}}
TOOLS = [WEATHER, ADD]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}

FAMILIES = {"qwen2.5.jinja": "hermes", "hermes-2-pro-tools.jinja": "hermes", "llama3.1.jinja": "llama3",
            "llama3.2.jinja": "llama3", "mistral-large-v3-tools.jinja": "mistral", "mistral-nemo.jinja": "mistral",
            "smollm2.jinja": None, "zephyr.jinja": None}


def fmt(schema, name="thing"):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


# ------------------------------------------------------------ checks before anything runs

@pytest.mark.parametrize("rf, says", [
    ("json", "must be an object"),
    ({"type": "xml"}, "must be \"text\", \"json_object\" or \"json_schema\""),
    ({"type": "json_object", "schema": {}}, "unknown field 'schema'"),
    ({"type": "json_schema"}, "json_schema must be an object"),
    ({"type": "json_schema", "json_schema": {"schema": PERSON}}, "name must be 1 to 64"),
    ({"type": "json_schema", "json_schema": {"name": "a b", "schema": PERSON}}, "name must be 1 to 64"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": [1]}}, "must be a JSON schema"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": PERSON, "strict": "yes"}}, "strict"),
    (fmt({"type": "frob"}), "cannot be used for constrained decoding: .*frob"),
    (fmt({"type": "string", "pattern": "(a"}), "cannot be used for constrained decoding: .*unclosed group"),
])
def test_bad_response_formats_are_400_naming_why(rf, says):
    for parse, body in ((api.parse_chat_completion, {"messages": [{"role": "user", "content": "x"}]}),
                        (api.parse_completion, {"prompt": "x"})):
        with pytest.raises(RequestError, match=says) as e:
            parse(dict(body, response_format=rf), "m", LIMITS)
        assert e.value.status == 400 and e.value.param == "response_format"


def test_response_formats_parse():
    body = {"messages": [{"role": "user", "content": "x"}]}
    assert api.parse_chat_completion(dict(body, response_format={"type": "text"}), "m", LIMITS).response_format is None
    r = api.parse_chat_completion(dict(body, response_format={"type": "json_object"}), "m", LIMITS).response_format
    assert r.kind == "json_object" and r.grammar
    r = api.parse_completion({"prompt": "x", "response_format": fmt(PERSON, "person")}, "m", LIMITS).response_format
    assert (r.kind, r.name, r.schema) == ("json_schema", "person", PERSON)


@pytest.mark.parametrize("fields, says, param", [
    ({"tools": {"x": 1}}, "tools must be an array", "tools"),
    ({"tools": [{"type": "code"}]}, "must be {\"type\": \"function\"", "tools"),
    ({"tools": [{"type": "function", "function": {"name": "a b"}}]}, "name must be 1 to 64", "tools"),
    ({"tools": [WEATHER, WEATHER]}, "given twice", "tools"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "x": {"type": "frob"}}}}}]}, r"tools\[0\].function.parameters cannot be used", "tools"),
    ({"tools": [WEATHER], "tool_choice": "always"}, "tool_choice must be", "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "'nope', which is not among the tools", "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice needs tools", "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": "required", "response_format": {"type": "json_object"}},
     "do not go together", "response_format"),
])
def test_bad_tools_are_400_naming_why(fields, says, param):
    body = dict({"messages": [{"role": "user", "content": "x"}]}, **fields)
    with pytest.raises(RequestError, match=says) as e:
        api.parse_chat_completion(body, "m", LIMITS)
    assert e.value.status == 400 and e.value.param == param


@pytest.mark.parametrize("msg, says", [
    ({"role": "tool", "content": "r"}, "tool_call_id must be the id"),
    ({"role": "user", "content": "r", "tool_call_id": "c"}, "belongs to a tool message only"),
    ({"role": "user", "content": "", "tool_calls": [{"id": "c", "function": {"name": "f"}}]}, "only an assistant"),
    ({"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
                                                             "function": {"name": "f", "arguments": "{x"}}]},
     "arguments is not JSON"),
    ({"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
                                                             "function": {"name": "f", "arguments": "[1]"}}]},
     "must be a JSON object"),
])
def test_bad_tool_messages_are_400(msg, says):
    body = {"messages": [{"role": "user", "content": "x"}, msg]}
    with pytest.raises(RequestError, match=says):
        api.parse_chat_completion(body, "m", LIMITS)


def test_tool_messages_reach_the_template_as_it_takes_them():
    call = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 1, \"b\": 2}"}}
    r = api.parse_chat_completion({"messages": [
        {"role": "user", "content": "1+2?"}, {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "3"}], "tools": TOOLS}, "m", LIMITS)
    # arguments parsed into an object: templates iterate it (llama3.1) or tojson it
    assert r.messages[1]["tool_calls"] == [dict(call, function={"name": "add", "arguments": {"a": 1, "b": 2}})]
    assert r.messages[2] == {"role": "tool", "content": "3", "tool_call_id": "call_1"}
    assert r.tool_choice == "auto" and [t.name for t in r.tools] == ["get_weather", "add"]
    # Mistral's templates want nine-character ids: the same id maps to the same nine
    m = tools.template_messages(r.messages, "mistral")
    assert len(m[1]["tool_calls"][0]["id"]) == 9 and m[1]["tool_calls"][0]["id"] == m[2]["tool_call_id"]


# ------------------------------------------------------------ parsing the families' output

@pytest.mark.parametrize("family, text", [
    # the formats the fixture templates render an assistant's call in
    ("hermes", '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call><|im_end|>'),
    ("llama3", '{"name": "add", "parameters": {"a": 1, "b": 2}}<|eot_id|>'),
    ("llama3", '<|python_tag|>{"name": "add", "parameters": {"a": 1, "b": 2}}<|eom_id|>'),
    ("mistral", '[TOOL_CALLS][{"name": "add", "arguments": {"a": 1, "b": 2}}]</s>'),
])
def test_each_family_s_call_parses(family, text):
    tl, _ = tools.parse_tools(TOOLS, "auto", None)
    content, calls = tools.parse_calls(family, text, tl)
    assert content is None and len(calls) == 1
    c = calls[0]
    assert c["id"].startswith("call_") and c["type"] == "function" and c["function"]["name"] == "add"
    assert json.loads(c["function"]["arguments"]) == {"a": 1, "b": 2}
    # text that is no call stays text; a call to a tool not given is not one
    assert tools.parse_calls(family, "just words", tl) == ("just words", [])
    assert tools.parse_calls(family, text.replace('"add"', '"sub"'), tl)[1] == []


# ------------------------------------------------------------ the engine under a grammar

@pytest.fixture(scope="module")
def tool_models(tmp_path_factory):
    require_device()
    root = str(tmp_path_factory.mktemp("toolmodels"))
    return {t: toolmodel.make(root, t) for t in FAMILIES}


def test_families_are_read_from_the_templates(tool_models):
    for t, d in tool_models.items():
        with clformer.Model(d) as m:
            assert tools.family_of(m) == FAMILIES[t], t


class _Holder:
    pass


def _constrained(m, ids, g, seeds, eos, max_new_tokens=120):
    v = grammar.vocabulary_of(_Holder(), m, 0, eos)
    out = []
    with m.engine(kv_bytes=32 << 20) as e:
        seqs = [e.submit(ids, max_new_tokens=max_new_tokens, temperature=1.0, seed=s,
                         allowed=grammar.Matcher(v, g)) for s in seeds]
        for s in seqs:
            r = s.result(timeout=300)
            out.append((r, m.decode(r.tokens, skip_special_tokens=False)))
    return out


@pytest.mark.parametrize("schema", [PERSON, NESTED, {"type": "object"}])
def test_every_json_reply_parses_and_validates(tool_models, schema):
    """Eight sampled replies of each model under the schema: all end by the
    grammar (finish "stop_string": it is complete, nothing may follow), and
    every one parses and validates.  {"type": "object"} is json_object's."""
    g = grammar.json_schema_grammar(schema)
    for path in (GGUF, tool_models["qwen2.5.jinja"]):
        with clformer.Model(path) as m:
            ids = m.tokenize("Describe a person as JSON:", add_special_tokens=False)
            for r, raw in _constrained(m, ids, g, range(8), [], max_new_tokens=150):
                if schema == {"type": "object"} and r.finish_reason == "length":
                    continue  # any object may nest on past max_tokens: the length case below
                assert r.finish_reason == "stop_string", (path, raw)
                jsonschema.validate(json.loads(r.text), schema)


def test_max_tokens_reached_is_length_and_cut():
    """An unbounded string does not close within 12 tokens of this model
    (its random weights keep writing characters): the reply ends on its
    max_new_tokens, cut (it does not parse), which the server reports as
    finish_reason "length"."""
    g = grammar.json_schema_grammar({"type": "object", "properties": {"s": {"type": "string"}},
                                     "required": ["s"], "additionalProperties": False})
    require_device()
    with clformer.Model(GGUF) as m:
        (r, raw), = _constrained(m, m.tokenize("x", add_special_tokens=False), g, [0], [], max_new_tokens=12)
    assert r.finish_reason == "length" and len(r.tokens) == 12 and raw.startswith('{"s": "')
    with pytest.raises(json.JSONDecodeError):
        json.loads(raw)


@pytest.mark.parametrize("template", [t for t, f in FAMILIES.items() if f])
@pytest.mark.parametrize("choice", ["required", "add"])
def test_forced_calls_parse_and_validate_for_each_family(tool_models, template, choice):
    family = FAMILIES[template]
    tl, choice = tools.parse_tools(TOOLS, choice if choice == "required" else
                                   {"type": "function", "function": {"name": choice}}, None)
    with clformer.Model(tool_models[template]) as m:
        text = m.apply_chat_template([{"role": "user", "content": "What is 2 + 3?"}], add_generation_prompt=True,
                                     tools=[t.spec() for t in tl])
        ids = m.tokenize(text, add_special_tokens=False)
        v = grammar.vocabulary_of(_Holder(), m, 0, [])
        g = tools.call_grammar(family, tl, choice, v)
        for r, raw in _constrained(m, ids, g, range(4), []):
            content, calls = tools.parse_calls(family, raw, tl)
            assert r.finish_reason == "stop_string" and len(calls) == 1, raw
            name = calls[0]["function"]["name"]
            assert name == "add" if choice == "add" else name in SCHEMAS
            jsonschema.validate(json.loads(calls[0]["function"]["arguments"]), SCHEMAS[name])


@pytest.mark.parametrize("template", [t for t, f in FAMILIES.items() if f])
def test_each_template_renders_the_round_trip(tool_models, template):
    """The conversation as a client sends it back (api's parse: arguments a
    JSON string, OpenAI's call id) rendered by each tool template: the
    tools' schemas, the call's name and arguments and the tool's result are
    all in the prompt, where the template puts them."""
    call = {"id": "call_0123456789abcdef", "type": "function",
            "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 3}"}}
    r = api.parse_chat_completion({"messages": [
        {"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "RESULT-5"}], "tools": TOOLS}, "m", LIMITS)
    family = FAMILIES[template]
    with clformer.Model(tool_models[template]) as m:
        text = m.apply_chat_template(tools.template_messages(r.messages, family), add_generation_prompt=True,
                                     tools=[t.spec() for t in r.tools])
    assert "RESULT-5" in text and "get_weather" in text and '"a": 2' in text
    marker = {"hermes": "<tool_call>", "llama3": '{"name": "add"', "mistral": "[TOOL_CALLS]"}[family]
    assert text.index(marker) < text.index("RESULT-5"), text


def test_a_model_without_end_tokens_never_samples_the_stand_in():
    """A vocabulary given no end token gets a stand-in for llguidance, whose
    bit every mask clears: a grammar that may stop or go on (an integer
    after its first digit) never lets the stand-in out; the reply ends by
    the grammar (at its maximum's digits) or max_tokens."""
    require_device()
    g = grammar.json_schema_grammar({"type": "integer", "minimum": 0, "maximum": 10 ** 12})
    with clformer.Model(GGUF) as m:
        v = grammar.vocabulary_of(_Holder(), m, 0, [])
        assert v.eos == [] and v.stand_in is not None
        for r, raw in _constrained(m, m.tokenize("x", add_special_tokens=False), g, range(4), [],
                                   max_new_tokens=150):
            assert v.stand_in not in r.tokens, raw
            assert r.finish_reason in ("stop_string", "length") and 0 <= int(r.text) <= 10 ** 12


def test_a_real_chat_model_writes_valid_json():
    """SmolLM2-135M-Instruct (Q4_1, tools/bench-env.sh's cache) where it is
    cached: sampled replies to a real request under PERSON all validate."""
    d = os.path.expanduser("~/.cache/clformer-bench/smollm2")
    path = next((os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".gguf")), None) \
        if os.path.isdir(d) else None
    if path is None:
        why = "the SmolLM2 GGUF is not cached (tools/serve-test.sh fetches it)"
        if os.environ.get("CLF_REQUIRE_SERVE") == "1":
            pytest.fail(why)
        pytest.skip(why)
    require_device()
    g = grammar.json_schema_grammar(PERSON)
    with clformer.Model(path) as m:
        text = m.apply_chat_template([{"role": "user", "content": "Invent a person; answer in JSON."}],
                                     add_generation_prompt=True)
        ids = m.tokenize(text, add_special_tokens=False)
        for r, raw in _constrained(m, ids, g, range(4), tools.end_of_turn(m), max_new_tokens=100):
            assert r.finish_reason == "stop_string", raw
            jsonschema.validate(json.loads(r.text), PERSON)


# ------------------------------------------------------------ through the server, with OpenAI's client

SERVED = {"qwen": "qwen2.5.jinja", "llama": "llama3.1.jinja", "mistral": "mistral-large-v3-tools.jinja"}
TIMEOUT = 120


@pytest.fixture(scope="module", params=("one-process", "ray"))
def server(request, tool_models):
    """The tool models and the GGUF fixture in both modes (serve_modes.py)."""
    if os.environ.get("CLF_REQUIRE_SERVE") != "1":
        pytest.importorskip("ray" if request.param == "ray" else "uvicorn")
    import serve_modes
    from clformer.serve import Limits, ServeOptions
    limits = Limits(max_new_tokens=400, request_timeout_s=TIMEOUT)
    apps = dict({k: tool_models[t] for k, t in SERVED.items()}, gguf=GGUF)
    opts = {"/" + app: ServeOptions(model_dir=path, name=app, replicas=1, replicas_per_device=4, kv_bytes=32 << 20,
                                    limits=limits) for app, path in apps.items()}
    with serve_modes.server(request.param, opts, TIMEOUT) as url:
        yield url


def client(server, app):
    import openai
    return openai.OpenAI(base_url=f"{server}/{app}/v1", api_key="none", timeout=TIMEOUT, max_retries=0)


def test_openai_client_json_schema_chat_and_completions(server):
    c = client(server, "gguf")
    rf = fmt(PERSON, "person")
    msgs = [{"role": "user", "content": "a person, please"}]
    for seed in range(4):
        r = c.chat.completions.create(model="gguf", messages=msgs, response_format=rf, max_tokens=150, seed=seed,
                                      temperature=1.0)
        ch = r.choices[0]
        assert ch.finish_reason == "stop", ch
        jsonschema.validate(json.loads(ch.message.content), PERSON)
    # streamed: the pieces joined are the object
    text, finish = "", None
    for chunk in c.chat.completions.create(model="gguf", messages=msgs, response_format=rf, max_tokens=150, seed=7,
                                           temperature=1.0, stream=True):
        for ch in chunk.choices:
            text += ch.delta.content or ""
            finish = ch.finish_reason or finish
    assert finish == "stop"
    jsonschema.validate(json.loads(text), PERSON)
    # completions take response_format too (an extension: OpenAI's have none)
    r = c.completions.create(model="gguf", prompt="JSON:", max_tokens=150, seed=1, temperature=1.0,
                             extra_body={"response_format": {"type": "json_object"}, "n": 2})
    for ch in r.choices:
        if ch.finish_reason == "stop":
            assert isinstance(json.loads(ch.text), dict)
        else:  # any object may nest past max_tokens
            assert ch.finish_reason == "length"
    # max_tokens too few for the object: "length", the text cut
    r = c.chat.completions.create(model="gguf", messages=msgs, response_format=rf, max_tokens=5)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 5


def test_openai_client_refusals(server):
    import openai
    c = client(server, "gguf")
    with pytest.raises(openai.BadRequestError, match="frob"):
        c.chat.completions.create(model="gguf", messages=[{"role": "user", "content": "x"}],
                                  response_format=fmt({"type": "frob"}))
    # the GGUF fixture's template (SmolLM's) renders no tool calls
    with pytest.raises(openai.BadRequestError, match="defines no tool-call format"):
        c.chat.completions.create(model="gguf", messages=[{"role": "user", "content": "x"}], tools=TOOLS)


@pytest.mark.parametrize("app", list(SERVED))
@pytest.mark.parametrize("stream", [False, True])
def test_tool_calls_round_trip_for_each_family(server, app, stream):
    """A forced call (tool_choice naming `add`) comes back as tool_calls
    (finish "tool_calls", id "call_...", arguments valid JSON for its
    schema); the conversation sent again with that call and the tool's
    result is rendered by the family's template and answered."""
    c = client(server, app)
    msgs = [{"role": "user", "content": "What is 2 + 3?"}]
    force = {"type": "function", "function": {"name": "add"}}
    kw = dict(model=app, messages=msgs, tools=TOOLS, tool_choice=force, max_tokens=100, seed=3, temperature=1.0)
    if not stream:
        r = c.chat.completions.create(**kw)
        ch = r.choices[0]
        assert ch.finish_reason == "tool_calls", ch
        calls = [{"id": t.id, "type": t.type, "function": {"name": t.function.name,
                                                            "arguments": t.function.arguments}}
                 for t in ch.message.tool_calls]
    else:
        calls, finish = {}, None
        for chunk in c.chat.completions.create(stream=True, **kw):
            for ch in chunk.choices:
                finish = ch.finish_reason or finish
                for d in ch.delta.tool_calls or ():
                    t = calls.setdefault(d.index, {"id": None, "type": "function",
                                                   "function": {"name": "", "arguments": ""}})
                    t["id"] = d.id or t["id"]
                    if d.function is not None:
                        t["function"]["name"] += d.function.name or ""
                        t["function"]["arguments"] += d.function.arguments or ""
        assert finish == "tool_calls"
        calls = [calls[k] for k in sorted(calls)]
    assert len(calls) == 1 and calls[0]["id"].startswith("call_") and calls[0]["function"]["name"] == "add"
    args = json.loads(calls[0]["function"]["arguments"])
    jsonschema.validate(args, SCHEMAS["add"])
    # required: any of the tools
    r = c.chat.completions.create(**dict(kw, tool_choice="required"))
    t = r.choices[0].message.tool_calls[0]
    jsonschema.validate(json.loads(t.function.arguments), SCHEMAS[t.function.name])
    # auto: the model may answer in text (this one's noise never spells a call)
    r = c.chat.completions.create(**dict(kw, tool_choice="auto", max_tokens=6))
    ch = r.choices[0]
    assert (ch.finish_reason, ch.message.tool_calls) in (("length", None), ("stop", None))
    assert isinstance(ch.message.content, str)
    # the round trip: the call and its result back in
    back = msgs + [{"role": "assistant", "content": None, "tool_calls": calls},
                   {"role": "tool", "tool_call_id": calls[0]["id"], "content": str(args["a"] + args["b"])}]
    r = c.chat.completions.create(model=app, messages=back, tools=TOOLS, tool_choice="none", max_tokens=8,
                                  temperature=0)
    ch = r.choices[0]
    assert ch.finish_reason in ("stop", "length") and isinstance(ch.message.content, str)
    assert ch.message.tool_calls is None and r.usage.prompt_tokens > 0


def test_tool_call_chunks_are_openai_s_stream_shape():
    calls = [{"id": "call_a", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 1, \"b\": 2}"}}]
    chunks = api.tool_call_chunks("c1", {"tool_calls": calls, "content": "Let me add."}, "m")
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas == [{"content": "Let me add."},
                      {"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                                       "function": {"name": "add", "arguments": ""}}]},
                      {"tool_calls": [{"index": 0, "function": {"arguments": "{\"a\": 1, \"b\": 2}"}}]}]
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks)
    assert api.tool_call_chunks("c1", {"finish_reason": "stop"}, "m") == []
    # the plain answer: content the text before the calls (null when none)
    msg = api.chat_answer("c1", [{"text": None, "finish_reason": "tool_calls", "tool_calls": calls}], {}, "m")
    assert msg["choices"][0]["message"] == {"role": "assistant", "content": None, "tool_calls": calls}
