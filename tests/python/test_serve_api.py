"""clformer.serve's request checks (api.py) and device slots (devices.py),
without Ray: every refusal is asserted with its HTTP status and the words of
its message that name the problem."""
import base64
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from clformer.serve import api, devices
from clformer.serve.api import Limits, RequestError

L = Limits(max_inputs=4, max_new_tokens=20, max_run_elements=100, max_top_k=10)


def refused(fn, *args):
    with pytest.raises(RequestError) as e:
        fn(*args)
    return e.value


# ------------------------------------------------------------ JSON bodies

@pytest.mark.parametrize("raw, status, words", [
    (b"", 400, "body is empty"),
    (b"{bad", 400, "malformed JSON"),
    (b'{"a": 1', 400, "malformed JSON"),
    (b"\xff\xfe", 400, "not UTF-8"),
    (b"[1, 2]", 400, "must be a JSON object, not an array"),
    (b'"text"', 400, "not a string"),
    (b"[" * 100000 + b"]" * 100000, 400, "malformed JSON"),
])
def test_parse_json_refusals(raw, status, words):
    e = refused(api.parse_json, raw)
    assert e.status == status and words in e.message, e.message


def test_parse_json_huge_integer_is_400():
    # issue 21 item 3: a literal past Python's int_max_str_digits (4300) raised
    # ValueError through the handler: a plain-text 500 on every POST endpoint
    for raw in (b'{"max_tokens": ' + b"1" * 5000 + b"}", b'{"input": [' + b"9" * 4301 + b"]}"):
        e = refused(api.parse_json, raw)
        assert e.status == 400 and "unreadable JSON" in e.message and "digits" in e.message, e.message


def test_parse_json_object():
    assert api.parse_json(b'{"input": "x"}') == {"input": "x"}


def test_error_body_is_openai_shaped():
    e = RequestError(400, "input is missing", "input", "missing_required_parameter")
    assert e.body() == {"error": {"message": "input is missing", "type": "invalid_request_error",
                                  "param": "input", "code": "missing_required_parameter"}}
    # it travels through pickling (Ray) with its fields
    import pickle
    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.status, e2.message, e2.param, e2.code) == (400, "input is missing", "input",
                                                          "missing_required_parameter")
    # type and code as OpenAI's API spells them: a string or null, never the numeric status
    # (the spellings: OpenAI's error bodies, e.g. a 401's {"type": "invalid_request_error",
    # "code": "invalid_api_key"}, a 429's {"type": "requests", "code": "rate_limit_exceeded"})
    spelled = {status: RequestError(status, "x").body()["error"] for status in (400, 401, 404, 429, 500, 503)}
    assert {s: (b["type"], b["code"]) for s, b in spelled.items()} == {
        400: ("invalid_request_error", None), 401: ("invalid_request_error", "invalid_api_key"),
        404: ("invalid_request_error", None), 429: ("requests", "rate_limit_exceeded"),
        500: ("server_error", None), 503: ("server_error", None)}


@pytest.mark.parametrize("fn, body, status, code, param", [
    (api.parse_completion, {"prompt": "a", "model": "other"}, 404, "model_not_found", "model"),
    (api.parse_completion, {"prompt": "a", "model": 3}, 400, "invalid_type", "model"),
    (api.parse_completion, {"prompt": "a", "bogus": 1}, 400, "unknown_parameter", "bogus"),
    (api.parse_completion, {"prompt": "a", "max_tokens": 21}, 400, "integer_above_max_value", "max_tokens"),
    (api.parse_completion, {"prompt": "a", "max_tokens": 0}, 400, "integer_below_min_value", "max_tokens"),
    (api.parse_completion, {"prompt": "a", "max_tokens": "3"}, 400, "invalid_type", "max_tokens"),
    (api.parse_detokenize, {}, 400, "missing_required_parameter", "tokens"),
])
def test_refusals_carry_openai_codes(fn, body, status, code, param):
    e = refused(fn, body, "m", L)
    assert (e.status, e.code, e.param) == (status, code, param), e.message
    assert e.body()["error"]["code"] == code


# ------------------------------------------------------------ embeddings

@pytest.mark.parametrize("body, status, words", [
    ({}, 400, "input is missing"),
    ({"input": []}, 400, "non-empty array"),
    ({"input": 5}, 400, "a string or a non-empty array"),
    ({"input": ["a", 3]}, 400, "input[1] must be a string"),
    ({"input": [[1, 2]]}, 400, "token ids are not taken"),
    ({"input": ["a", ""]}, 400, "input[1] is an empty string"),
    ({"input": "a\0b"}, 400, "NUL"),
    ({"input": ["a"] * 5}, 400, "holds 5 items; at most 4"),
    ({"input": "a", "model": "other"}, 404, "'other' is not served here"),
    ({"input": "a", "model": 3}, 400, "model must be a string"),
    ({"input": "a", "encoding_format": "int8"}, 400, "encoding_format"),
    ({"input": "a", "dimensions": 8}, 400, "dimensions is not supported"),
    ({"input": "a", "inputs": "b"}, 400, "unknown field 'inputs'"),
    ({"input": "x" * 65537}, 400, "input[0] is 65537 characters long; at most 65536"),
    ({"input": ["a", "b\ud800c"]}, 400, "input[1] is not valid Unicode: a lone surrogate U+D800"),
])
def test_embeddings_refusals(body, status, words):
    e = refused(api.parse_embeddings, body, "m", L)
    assert e.status == status and words in e.message, e.message


def test_embeddings_request_and_answer():
    req = api.parse_embeddings({"input": "one", "model": "m"}, "m", L)
    assert req.texts == ["one"] and req.encoding_format == "float"
    v = np.array([[0.25, -1.5, 3.0e-8]], dtype=np.float32)
    out = api.embeddings_answer(v, 7, req, "m")
    assert out["data"][0]["embedding"] == [0.25, -1.5, float(np.float32(3.0e-8))]
    assert out["usage"] == {"prompt_tokens": 7, "total_tokens": 7} and out["object"] == "list"
    req64 = api.parse_embeddings({"input": ["one"], "encoding_format": "base64"}, "m", L)
    b = api.embeddings_answer(v, 7, req64, "m")["data"][0]["embedding"]
    assert np.array_equal(np.frombuffer(base64.b64decode(b), dtype="<f4"), v[0])


# ------------------------------------------------------------ completions

@pytest.mark.parametrize("body, status, words", [
    ({}, 400, "prompt is missing"),
    ({"prompt": ["a", "b"]}, 400, "holds 2 items; at most 1"),
    ({"prompt": "a", "max_tokens": 0}, 400, "max_tokens must be in [1, 20]"),
    ({"prompt": "a", "max_tokens": 21}, 400, "max_tokens must be in [1, 20]"),
    ({"prompt": "a", "max_tokens": 2.5}, 400, "max_tokens must be an integer"),
    ({"prompt": "a", "max_tokens": True}, 400, "max_tokens must be an integer"),
    # the ranges are the library's (clf_generate_setting_at), as the CLI's and Python's
    ({"prompt": "a", "temperature": -1}, 400, "temperature must be in [0, 1e+06]"),
    ({"prompt": "a", "temperature": 2e6}, 400, "temperature must be in [0, 1e+06]"),
    ({"prompt": "a", "top_k": 2 ** 31}, 400, "top_k must be in [0, 100000000]"),
    ({"prompt": "a", "seed": 2 ** 63 - 1}, 400, "seed must be in [0, 9000000000000000000]"),
    ({"prompt": "a", "no_repeat_ngram_size": -1}, 400, "no_repeat_ngram_size must be in [0, 100000]"),
    ({"prompt": "a", "num_beams": 2}, 400, "unknown field 'num_beams'"),
    ({"prompt": "a", "do_sample": True}, 400, "unknown field 'do_sample'"),
    ({"prompt": "a", "temperature": "hot"}, 400, "temperature must be a finite number"),
    ({"prompt": "a", "top_p": 0}, 400, "top_p must be in (0, 1]"),
    ({"prompt": "a", "temperature": 0, "top_p": 2}, 400, "top_p must be in (0, 1]"),
    ({"prompt": "a", "n": 9}, 400, "n must be in [1, 8]"),
    ({"prompt": "a", "n": 0}, 400, "n must be in [1, 8]"),
    ({"prompt": "a", "n": 2, "best_of": 3}, 400, "best_of must be n"),
    ({"prompt": "a", "logprobs": 6}, 400, "logprobs must be in [0, 5]"),
    ({"prompt": "a", "logprobs": True}, 400, "logprobs must be an integer"),
    ({"prompt": "a", "logprobs": 1, "echo": True}, 400, "echo with logprobs is not supported"),
    ({"prompt": "a", "presence_penalty": 0.5}, 400, "presence_penalty is not supported"),
    ({"prompt": "a", "stream": "yes"}, 400, "stream must be a boolean"),
    ({"prompt": "a", "stream_options": {"include_usage": True}}, 400, "only allowed with stream: true"),
    ({"prompt": "a", "stream": True, "stream_options": {"include_usage": 1}}, 400,
     "include_usage must be a boolean"),
    ({"prompt": "a", "stream": True, "stream_options": {"usage": True}}, 400, "may only hold include_usage"),
    ({"prompt": "a", "stop": ["x"] * 5}, 400, "at most 4"),
    ({"prompt": "a", "stop": [""]}, 400, "stop must be a non-empty string"),
    # issue 21 item 4: refused here, before any stream starts (and not passed over without streaming)
    ({"prompt": "a", "stop": ["\ud800"]}, 400, "stop[0] is not valid Unicode"),
    ({"prompt": "a", "stop": ["\ud800"], "stream": True}, 400, "stop[0] is not valid Unicode"),
    ({"prompt": "a\udfff"}, 400, "prompt[0] is not valid Unicode"),
    ({"prompt": "a" * 65537}, 400, "65537 characters long"),
    ({"prompt": "a", "echo": 1}, 400, "echo must be a boolean"),
    ({"prompt": "a", "seed": -1}, 400, "seed must be in"),
    ({"prompt": "a", "frequency": 1}, 400, "unknown field 'frequency'"),
])
def test_completion_refusals(body, status, words):
    e = refused(api.parse_completion, body, "m", L)
    assert e.status == status and words in e.message, e.message


def test_completion_settings():
    greedy = api.parse_completion({"prompt": "a", "temperature": 0, "max_tokens": 5, "stop": "x"}, "m", L)
    assert greedy.settings == {"max_new_tokens": 5, "do_sample": False} and greedy.stop == ("x",)
    assert greedy.deterministic and not greedy.stream
    # OpenAI's default temperature is 1: sampling; the API's seed is the package's (and the CLI's): 0 is a seed
    s = api.parse_completion({"prompt": ["a"], "seed": 0, "top_k": 4, "stream": True}, "m", L)
    assert s.settings == {"max_new_tokens": 16, "do_sample": True, "temperature": 1.0, "top_k": 4, "seed": 0}
    assert s.deterministic and s.stream
    assert not api.parse_completion({"prompt": "a", "temperature": 0.5}, "m", L).deterministic
    # no_repeat_ngram_size: the library's list names it, so the server takes it (greedy too)
    g = api.parse_completion({"prompt": "a", "temperature": 0, "no_repeat_ngram_size": 2}, "m", L)
    assert g.settings == {"max_new_tokens": 16, "do_sample": False, "no_repeat_ngram_size": 2}
    # temperature 0 with sampling settings is greedy, as in the CLI and Python (checked, not used)
    g = api.parse_completion({"prompt": "a", "temperature": 0, "seed": 3, "top_p": 0.5, "top_k": 4}, "m", L)
    assert g.settings == {"max_new_tokens": 16, "do_sample": False} and g.deterministic


def test_request_fields_are_the_librarys_settings():
    """Issue 43: the decoding fields are the library's list less num_beams
    (a reply streams), do_sample (temperature decides) and max_new_tokens
    (max_tokens); each is checked against the list's range."""
    import clformer
    rows = {r["name"]: r for r in clformer.generation_settings()}
    assert set(api.SETTING_FIELDS) == set(rows) - {"num_beams", "do_sample", "max_new_tokens"}
    for name in api.SETTING_FIELDS:
        r = rows[name]
        ok = {"prompt": "a", name: r["max"] if r["type"] is float else int(r["max"])}
        assert api.parse_completion(ok, "m", L).settings[name] == r["max"], name
        bad = r["max"] * 2 if r["type"] is float else int(r["max"]) * 2
        e = refused(api.parse_completion, {"prompt": "a", name: bad}, "m", L)
        assert e.status == 400 and e.param == name and "must be in" in e.message, e.message


@pytest.mark.parametrize("body, status, words", [
    ({}, 400, "messages is missing"),
    ({"messages": "hello"}, 400, "non-empty array"),
    ({"messages": []}, 400, "non-empty array"),
    ({"messages": [{"role": "user", "content": "a"}] * 5}, 400, "at most 4"),
    ({"messages": ["a"]}, 400, "messages[0] must be an object"),
    ({"messages": [{"content": "a"}]}, 400, "messages[0].role must be one of"),
    ({"messages": [{"role": "user", "content": "a", "extra": 1}]}, 400, "unknown field 'extra' in messages[0]"),
    ({"messages": [{"role": "user", "content": 3}]}, 400, "must be a string or an array of text parts"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "only text parts"),
    ({"messages": [{"role": "user", "content": "a\ud800"}]}, 400, "not valid Unicode"),
    # tools and response_format are taken (test_serve_grammar.py); malformed ones are refused
    ({"messages": [{"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]}]}, 400,
     "messages[0].tool_calls[0] must be"),
    ({"messages": [{"role": "user", "content": "a"}], "tools": [{}]}, 400, "tools[0] must be"),
    ({"messages": [{"role": "user", "content": "a"}], "response_format": {"type": "yaml"}}, 400,
     "response_format.type must be"),
    ({"messages": [{"role": "user", "content": "a"}], "max_tokens": 2, "max_completion_tokens": 2}, 400, "not both"),
    ({"messages": [{"role": "user", "content": "a"}], "max_completion_tokens": 21}, 400,
     "max_completion_tokens must be in [1, 20]"),
    ({"messages": [{"role": "user", "content": "a"}], "n": 9}, 400, "n must be in [1, 8]"),
    ({"messages": [{"role": "user", "content": "a"}], "logprobs": 2}, 400, "logprobs must be a boolean"),
    ({"messages": [{"role": "user", "content": "a"}], "logprobs": True, "top_logprobs": 21}, 400,
     "top_logprobs must be in [0, 20]"),
    ({"messages": [{"role": "user", "content": "a"}], "top_logprobs": 2}, 400, "top_logprobs needs logprobs"),
    ({"messages": [{"role": "user", "content": "a"}], "logprobs": False, "top_logprobs": 2}, 400,
     "top_logprobs needs logprobs"),
    ({"messages": [{"role": "user", "content": "a"}], "prompt": "a"}, 400, "unknown field 'prompt'"),
])
def test_chat_refusals(body, status, words):
    e = refused(api.parse_chat_completion, body, "m", L)
    assert e.status == status and words in e.message, e.message


def test_chat_request_and_answers():
    r = api.parse_chat_completion({"messages": [{"role": "developer", "content": "be brief"},
                                                {"role": "user", "content": [{"type": "text", "text": "a"},
                                                                             {"type": "text", "text": "b"}],
                                                 "name": "x"}],
                                   "temperature": 0, "stop": ["z"]}, "m", L)
    assert r.messages == ({"role": "system", "content": "be brief"}, {"role": "user", "content": "ab", "name": "x"})
    # no max_tokens: None, settled by the replica against the context (with_max_tokens)
    assert r.max_tokens is None and r.settings == {"do_sample": False} and r.stop == ("z",)
    a = api.chat_answer("chatcmpl-1", [{"text": "hi", "finish_reason": "stop"}], {"prompt_tokens": 3}, "m")
    assert a["object"] == "chat.completion" and a["choices"][0]["message"] == {"role": "assistant", "content": "hi"}
    assert a["choices"][0]["logprobs"] is None
    c = api.chat_chunk("chatcmpl-1", {"content": "h"}, None, "m")
    assert c["object"] == "chat.completion.chunk" and c["choices"][0]["delta"] == {"content": "h"}
    assert "usage" not in c and api.chat_chunk("x", {}, None, "m", 1, include_usage=True)["usage"] is None


def test_n_logprobs_and_include_usage_are_parsed():
    msgs = [{"role": "user", "content": "a"}]
    r = api.parse_chat_completion({"messages": msgs, "n": 3, "logprobs": True, "top_logprobs": 4, "stream": True,
                                   "stream_options": {"include_usage": True}, "seed": 7}, "m", L)
    assert (r.n, r.logprobs, r.include_usage, r.settings["seed"]) == (3, 4, True, 7)
    r = api.parse_chat_completion({"messages": msgs, "logprobs": True}, "m", L)
    assert (r.n, r.logprobs, r.include_usage) == (1, 0, False)
    assert api.parse_chat_completion({"messages": msgs, "logprobs": False}, "m", L).logprobs is None
    r = api.parse_completion({"prompt": "a", "n": 2, "best_of": 2, "logprobs": 0}, "m", L)
    assert (r.n, r.logprobs) == (2, 0)
    assert api.parse_completion({"prompt": "a", "logprobs": False}, "m", L).logprobs is None
    assert api.parse_completion({"prompt": "a", "stream": True, "stream_options": {"include_usage": False}}, "m",
                                L).include_usage is False


def test_logprobs_shapes():
    entries = [("a", -0.5, [("a", -0.5), ("é", -1.5)]), (" b", -0.25, [("c", -0.1)])]
    chat = api.logprobs_of(entries, True)
    assert chat["content"][0] == {"token": "a", "logprob": -0.5, "bytes": [97],
                                  "top_logprobs": [{"token": "a", "logprob": -0.5, "bytes": [97]},
                                                   {"token": "é", "logprob": -1.5, "bytes": [0xc3, 0xa9]}]}
    assert chat["content"][1]["top_logprobs"] == [{"token": "c", "logprob": -0.1, "bytes": [99]}]
    legacy = api.logprobs_of(entries, False, offset=3)
    # the chosen token is among each position's top_logprobs, as OpenAI's legacy object has it
    assert legacy == {"tokens": ["a", " b"], "token_logprobs": [-0.5, -0.25],
                      "top_logprobs": [{"a": -0.5, "é": -1.5}, {"c": -0.1, " b": -0.25}], "text_offset": [3, 4]}
    assert api.logprobs_of(None, True) is None
    u = api.usage_chunk("cmpl-1", api.usage_of(5, 7, 2), False, "m")
    assert u["choices"] == [] and u["usage"] == {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12,
                                                 "prompt_tokens_details": {"cached_tokens": 2}}


def test_sse_framing():
    assert api.sse("[DONE]") == b"data: [DONE]\n\n"
    assert api.sse({"a": 1}) == b'data: {"a":1}\n\n'


# ------------------------------------------------------------ classify

@pytest.mark.parametrize("body, status, words", [
    ({}, 400, "give either images"),
    ({"images": []}, 400, "non-empty array"),
    ({"images": ["@@@"]}, 400, "images[0] is not valid base64"),
    ({"images": [""]}, 400, "images[0] is empty"),
    ({"images": [3]}, 400, "images[0] must be a base64 string"),
    ({"images": ["AA=="] * 5}, 400, "at most 4"),
    ({"images": "AA==", "top_k": 0}, 400, "top_k must be in [1, 10]"),
    # issue 21 item 1: no string of a request is a path; base64 of a path, or
    # of anything but a PNG/JPEG file, is refused before it reaches a model
    ({"images": ["/etc/passwd"]}, 400, "images[0] is not valid base64"),
    ({"images": [base64.b64encode(b"/etc/passwd").decode()]}, 400, "images[0] is not a PNG or JPEG file"),
    ({"images": [base64.b64encode(b"GIF89a....").decode()]}, 400, "images[0] is not a PNG or JPEG file"),
    ({"input": "x\ud800"}, 400, "lone surrogate"),
])
def test_classify_refusals(body, status, words):
    e = refused(api.parse_classify_json, body, "m", L)
    assert e.status == status and words in e.message, e.message


def test_classify_json_and_query():
    png = b"\x89PNG\r\n\x1a\n...."
    req = api.parse_classify_json({"images": base64.b64encode(png).decode(), "top_k": 2}, "m", L)
    assert req.items == [png] and req.top_k == 2 and req.kind == "images"
    req = api.parse_classify_json({"input": ["/etc/passwd", "some text"]}, "m", L)
    assert req.kind == "texts" and req.items == ["/etc/passwd", "some text"]  # texts, for a text classifier only
    assert api.image_bytes(b"\xff\xd8\xff\xe0..", "x") == b"\xff\xd8\xff\xe0.."
    for bad in (b"", b"/etc/passwd", "/etc/passwd"):
        assert refused(api.image_bytes, bad, "the body").status == 400
    assert api.parse_top_k({}, L) == 5 and api.parse_top_k({"top_k": "3"}, L) == 3
    e = refused(api.parse_top_k, {"top_k": "x"}, L)
    assert e.status == 400 and "top_k must be an integer" in e.message
    ans = api.classify_answer([[("cat", 0.75), ("dog", 0.25)]], "m")
    assert ans["data"] == [{"index": 0, "labels": [{"label": "cat", "score": 0.75}, {"label": "dog", "score": 0.25}]}]


# ------------------------------------------------------------ /run

NAMES_IN, NAMES_OUT = ["input_ids", "attention_mask", "pixel_values"], ["last_hidden_state", "logits"]


@pytest.mark.parametrize("body, status, words", [
    ({}, 400, "inputs must be an object"),
    ({"inputs": {}}, 400, "inputs must be an object"),
    ({"inputs": {"token_ids": [[1]]}}, 400, "unknown input 'token_ids'; this model takes input_ids"),
    ({"inputs": {"input_ids": [[1, 2], [3]]}}, 400, "ragged"),
    ({"inputs": {"input_ids": [[1, "a"]]}}, 400, "not a number"),
    ({"inputs": {"input_ids": 3}}, 400, "must be a (nested) array"),
    ({"inputs": {"input_ids": [[1.5]]}}, 400, "integers, not fractions"),
    ({"inputs": {"input_ids": [[True]]}}, 400, "not a number"),
    ({"inputs": {"input_ids": [list(range(101))]}}, 413, "more than 100 numbers"),
    ({"inputs": {"input_ids": [[1]]}, "outputs": ["hidden"]}, 400, "unknown output 'hidden'"),
    ({"inputs": {"input_ids": [[1]]}, "outputs": "logits"}, 400, "outputs must be a non-empty array"),
])
def test_run_refusals(body, status, words):
    e = refused(api.parse_run, body, NAMES_IN, NAMES_OUT, "m", L)
    assert e.status == status and words in e.message, e.message


def test_run_arrays_and_answer():
    req = api.parse_run({"inputs": {"input_ids": [[1, 2]], "pixel_values": [[0, 1.5]]}, "outputs": ["logits"]},
                        NAMES_IN, NAMES_OUT, "m", L)
    assert req.inputs["input_ids"].dtype == np.int64 and req.inputs["pixel_values"].dtype == np.float32
    assert req.outputs == ["logits"]
    out = api.run_answer({"logits": np.array([[0.1, 2.0]], dtype=np.float32)}, "m")
    assert out["shapes"] == {"logits": [1, 2]} and out["dtypes"] == {"logits": "float32"}
    back = np.array(json.loads(api.json_bytes(out))["outputs"]["logits"], dtype=np.float32)
    assert np.array_equal(back, np.array([[0.1, 2.0]], dtype=np.float32))  # float32 survives JSON exactly


# ------------------------------------------------------------ device slots

class FakeDevice:
    def __init__(self, sel, name="fake"):
        self.selector, self.index, self.name = sel, int(sel.split(":")[1]), name
        self.platform_index, self.device_index = (int(x) for x in sel.split(":"))


def test_claim_spreads_over_devices_then_shares(tmp_path):
    devs = [FakeDevice("0:0"), FakeDevice("0:1")]
    a = devices.claim(devs, 2, str(tmp_path))
    b = devices.claim(devs, 2, str(tmp_path))
    c = devices.claim(devs, 2, str(tmp_path))
    d = devices.claim(devs, 2, str(tmp_path))
    assert [(s.device.selector, s.index) for s in (a, b, c, d)] == [("0:0", 0), ("0:1", 0), ("0:0", 1), ("0:1", 1)]
    with pytest.raises(devices.NoFreeDevice, match="all 4 replica slots of this node are taken"):
        devices.claim(devs, 2, str(tmp_path))
    b.release()
    again = devices.claim(devs, 2, str(tmp_path))
    assert (again.device.selector, again.index) == ("0:1", 0)
    for s in (a, c, d, again):
        s.release()


def test_slot_freed_when_its_process_dies(tmp_path):
    """A replica killed with SIGKILL leaves no stale claim: the kernel drops its flock."""
    code = ("import sys, time; from clformer.serve import devices\n"
            "class D: selector='0:0'; index=0; name='x'\n"
            f"s = devices.claim([D()], 1, {str(tmp_path)!r}); print(s.index, flush=True); time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ))
    try:
        assert p.stdout.readline().strip() == "0"
        with pytest.raises(devices.NoFreeDevice):
            devices.claim([FakeDevice("0:0")], 1, str(tmp_path))
        p.kill()
        p.wait(10)
        s = devices.claim([FakeDevice("0:0")], 1, str(tmp_path))
        assert s.index == 0
        s.release()
    finally:
        p.kill()
        p.wait(10)


@pytest.mark.device
def test_node_devices_filter():
    import clformer
    found = clformer.devices()
    assert found, "no OpenCL device: these tests need one (PoCL)"
    assert devices.node_devices("") == found
    assert devices.node_devices(found[0].selector) == [found[0]]
    assert devices.node_devices("0") == [found[0]]
    with pytest.raises(devices.NoFreeDevice, match="names '9:9', which is none of this node's devices"):
        devices.node_devices("9:9")


def test_batch_bound_from_memory():
    cfg = {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4, "max_position_embeddings": 32}
    per_token = 4 * (8 * 32 + 2 * 64 + 4 * 32)  # the estimate's own formula: 2048 bytes
    assert devices.batch_tokens(cfg, 1 << 20, share=0.25) == (1 << 18) // per_token  # 128 tokens
    assert devices.batch_tokens(cfg, 0) == 32  # never below one full-length sequence
    assert devices.batch_tokens(cfg, 1 << 40) == 16384  # capped


@pytest.mark.device
def test_global_mem_of_the_real_device():
    import clformer
    d = clformer.devices()[0]
    mem = devices.global_mem_bytes(d)
    assert mem is not None and mem > 1 << 20
    assert devices.global_mem_bytes(FakeDevice("0:0", name="not this one")) is None


def test_command_line_refuses_bad_arguments(tmp_path):
    """python -m clformer.serve checks its arguments before it starts Ray."""
    def run(*args):
        return subprocess.run([sys.executable, "-m", "clformer.serve", *args], capture_output=True, text=True,
                              timeout=60)
    r = run(str(tmp_path))
    assert r.returncode == 2 and "has neither config.json nor a .gguf file: not a model" in r.stderr, r.stderr
    r = run(str(tmp_path / "missing.gguf"))
    assert r.returncode == 2 and "missing.gguf: no such file or directory" in r.stderr, r.stderr
    (tmp_path / "a.gguf").write_bytes(b"")
    (tmp_path / "b.gguf").write_bytes(b"")
    r = run(str(tmp_path))
    assert r.returncode == 2 and "holds 2 .gguf files and no config.json: name the file" in r.stderr, r.stderr
    r = run(str(tmp_path), "--kv-bytes", "-1")
    assert r.returncode == 2 and "--kv-bytes must be >= 0" in r.stderr, r.stderr
    r = run(str(tmp_path), "--max-new-tokens", "-1")
    assert r.returncode == 2 and "--max-new-tokens must be >= 0" in r.stderr, r.stderr
    (tmp_path / "config.json").write_text("{}")
    r = run(str(tmp_path), "--replicas-per-device", "0")
    assert r.returncode == 2 and "--replicas-per-device >= 1" in r.stderr, r.stderr
    r = run(str(tmp_path), "--weights", "q3")
    assert r.returncode == 2 and "invalid choice: 'q3'" in r.stderr, r.stderr
    for bad in (["--max-concurrent", "0"], ["--body-timeout", "0"], ["--max-input-chars", "0"]):
        r = run(str(tmp_path), *bad)
        assert r.returncode == 2 and "--max-input-chars and --max-concurrent must be >= 1" in r.stderr, r.stderr


def test_model_paths_and_served_names(tmp_path):
    """What `clformer chat` takes, the server takes (issue 41): a .gguf
    file, a folder holding one (and no config.json), a Hugging Face
    directory; the name clients send is the GGUF file's without .gguf, else
    the directory's, unless --name gives one."""
    from clformer.serve.__main__ import not_a_model
    from clformer.serve.options import ServeOptions, gguf_file
    folder = tmp_path / "SmolLM2"
    folder.mkdir()
    f = folder / "SmolLM2-135M-Instruct.Q4_1.gguf"
    f.write_bytes(b"")
    for path in (f, folder):
        assert not_a_model(str(path)) is None
        assert gguf_file(str(path)) == str(f)
        assert ServeOptions(model_dir=str(path)).served_name() == "SmolLM2-135M-Instruct.Q4_1"
        assert ServeOptions(model_dir=str(path), name="smol").served_name() == "smol"
    (folder / "config.json").write_text("{}")  # a Hugging Face directory: config.json decides
    assert gguf_file(str(folder)) is None and ServeOptions(model_dir=str(folder) + "/").served_name() == "SmolLM2"


# ------------------------------------------------------------ max_tokens against the context

def _chat(**kw):
    return api.parse_chat_completion({"messages": [{"role": "user", "content": "a"}], **kw}, "m",
                                     Limits(max_new_tokens=0))


def test_max_tokens_default_is_what_the_context_leaves():
    # issue 41: no max_tokens runs to the end of text or the context; 600 on an
    # 8192-position model is taken (the server sets no cap by default)
    r = api.with_max_tokens(_chat(), 100, 8192, 0)
    assert r.max_tokens == 8092 and r.settings["max_new_tokens"] == 8092
    r = api.with_max_tokens(_chat(max_tokens=600), 100, 8192, 0)
    assert r.max_tokens == 600 and r.settings["max_new_tokens"] == 600
    # the server's cap (--max-new-tokens) bounds the default
    assert api.with_max_tokens(_chat(), 100, 8192, 256).max_tokens == 256
    # a completion's default stays OpenAI's 16
    c = api.parse_completion({"prompt": "a"}, "m", Limits())
    assert api.with_max_tokens(c, 3, 8192, 0).max_tokens == 16


@pytest.mark.parametrize("prompt, max_tokens, param, words", [
    (100, 8093, "max_tokens", "at most 8092 can be generated"),
    (8192, None, "messages", "leaves none to generate"),
    (9000, 5, "messages", "leaves none to generate"),
])
def test_past_the_context_is_context_length_exceeded(prompt, max_tokens, param, words):
    e = refused(api.with_max_tokens, _chat(max_tokens=max_tokens), prompt, 8192, 0)
    assert (e.status, e.code, e.param) == (400, "context_length_exceeded", param) and words in e.message, e.message


def test_encoder_decoder_reply_is_bounded_by_its_positions():
    # replica.py passes an encoder-decoder's reply 0 prompt tokens: its positions are the reply's own
    assert api.with_max_tokens(_chat(), 0, 512, 0).max_tokens == 512
    e = refused(api.with_max_tokens, _chat(max_tokens=513), 0, 512, 0)
    assert e.code == "context_length_exceeded" and e.message.startswith("max_tokens 513 is past"), e.message


def test_max_tokens_past_the_servers_cap_is_refused():
    e = refused(api.parse_chat_completion, {"messages": [{"role": "user", "content": "a"}], "max_tokens": 601}, "m",
                Limits(max_new_tokens=600))
    assert e.code == "integer_above_max_value" and "max_tokens must be in [1, 600]" in e.message
    # without a cap: bounded still (api.MAX_TOKENS), the context refusing first
    e = refused(api.parse_chat_completion, {"messages": [{"role": "user", "content": "a"}],
                                            "max_tokens": api.MAX_TOKENS + 1}, "m", Limits())
    assert e.code == "integer_above_max_value"


# ------------------------------------------------------------ /tokenize, /detokenize

def test_tokenize_and_detokenize_requests():
    t = api.parse_tokenize({"model": "m", "prompt": "hi"}, "m", L)
    assert (t.prompt, t.messages, t.add_special_tokens, t.return_token_strs) == ("hi", None, True, False)
    t = api.parse_tokenize({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": False}, "m", L)
    assert t.messages == ({"role": "user", "content": "hi"},) and not t.add_special_tokens
    assert not t.add_generation_prompt
    assert api.parse_detokenize({"tokens": [0, 5, 2 ** 40]}, "m", L).tokens == (0, 5, 2 ** 40)
    assert api.parse_detokenize({"tokens": []}, "m", L).tokens == ()
    assert api.tokenize_answer([1, 2], 256, None) == {"count": 2, "max_model_len": 256, "tokens": [1, 2],
                                                      "token_strs": None}


@pytest.mark.parametrize("fn, body, status, words", [
    (api.parse_tokenize, {}, 400, "either prompt"),
    (api.parse_tokenize, {"prompt": "a", "messages": []}, 400, "either prompt"),
    (api.parse_tokenize, {"prompt": 5}, 400, "prompt must be a string"),
    (api.parse_tokenize, {"prompt": "x" * 65537}, 400, "at most 65536"),
    (api.parse_tokenize, {"prompt": "a\0b"}, 400, "NUL"),
    (api.parse_tokenize, {"prompt": "a", "add_special_tokens": 1}, 400, "add_special_tokens must be a boolean"),
    (api.parse_tokenize, {"prompt": "a", "add_generation_prompt": True}, 400, "goes with messages"),
    (api.parse_tokenize, {"messages": [{"role": "bot", "content": "a"}]}, 400, "role must be one of"),
    (api.parse_tokenize, {"messages": [{"role": "user", "content": "a"}] * 5}, 400, "at most 4"),
    (api.parse_tokenize, {"prompt": "a", "model": "n"}, 404, "not served here"),
    (api.parse_tokenize, {"prompt": "a", "input": "b"}, 400, "unknown field 'input'"),
    (api.parse_detokenize, {"tokens": "12"}, 400, "tokens must be an array"),
    (api.parse_detokenize, {"tokens": [1, -1]}, 400, "tokens[1] is -1"),
    (api.parse_detokenize, {"tokens": [2 ** 63]}, 400, "no token has that id"),
    (api.parse_detokenize, {"tokens": [1, 2.0]}, 400, "tokens[1] must be an integer"),
    (api.parse_detokenize, {"tokens": [True]}, 400, "tokens[0] must be an integer"),
    (api.parse_detokenize, {"tokens": [1] * 65537}, 400, "at most 65536"),
])
def test_tokenize_and_detokenize_refusals(fn, body, status, words):
    e = refused(fn, body, "m", L)
    assert e.status == status and words in e.message, e.message


# ------------------------------------------------------------ /metrics

def _parsed(metrics_obj, engines):
    from prometheus_client.parser import text_string_to_metric_families
    out = {}
    for fam in text_string_to_metric_families(metrics_obj.render(engines).decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_render_parses_and_apps_do_not_collide():
    from clformer.serve import metrics
    a, b = metrics.Metrics(), metrics.Metrics()  # two applications in one process: own registries
    a.observe(7, 12, ttft_s=0.3, decode_s=1.1, first_choice_tokens=12)  # 11 tokens after the first: 0.1 s each
    a.requests.labels("/v1/completions", "200").inc()
    st = {"blocks": 64, "block_size": 16, "block_bytes": 4096, "blocks_used": 3, "blocks_cached": 2, "running": 1,
          "waiting": 4, "prefix_tokens_reused": 16, "preemptions": 0, "blocks_copied": 0, "steps": 9, "rows": 20}
    got = _parsed(a, {"r1": st, "r2": None, "r3": {"error": "closed"}})
    assert got[("clformer_prompt_tokens_total", ())] == 7 and got[("clformer_generation_tokens_total", ())] == 12
    assert got[("clformer_requests_total", (("endpoint", "/v1/completions"), ("status", "200")))] == 1
    assert got[("clformer_time_to_first_token_seconds_count", ())] == 1
    assert got[("clformer_time_to_first_token_seconds_bucket", (("le", "0.25"),))] == 0
    assert got[("clformer_time_to_first_token_seconds_bucket", (("le", "0.5"),))] == 1
    assert got[("clformer_time_per_output_token_seconds_sum", ())] == pytest.approx(0.1)
    r1 = (("replica", "r1"),)
    assert (got[("clformer_kv_blocks_used", r1)], got[("clformer_kv_blocks_cached", r1)],
            got[("clformer_kv_blocks_total", r1)]) == (3, 2, 64)
    assert (got[("clformer_sequences_running", r1)], got[("clformer_sequences_waiting", r1)]) == (1, 4)
    assert got[("clformer_prefix_tokens_reused_total", r1)] == 16
    assert not any(dict(labels).get("replica") in ("r2", "r3") for _, labels in got)  # no engine, no figures
    other = _parsed(b, {})
    assert other[("clformer_prompt_tokens_total", ())] == 0 and ("clformer_kv_blocks_used", r1) not in other


def test_metrics_follow_times_a_stream():
    import asyncio
    from clformer.serve import metrics
    m = metrics.Metrics()

    async def pieces():
        yield (0, "a", None)
        yield (1, "b", None)
        yield {"index": 1, "tokens": 2}
        yield {"index": 0, "tokens": 3}

    async def run():
        return [x async for x in m.follow(pieces(), 0.0, 5)]
    assert len(asyncio.run(run())) == 4

    closed = []

    async def never_started():
        try:
            yield (0, "a", None)
        finally:
            closed.append(True)

    async def close_unstarted():
        inner = never_started()
        await inner.__anext__()  # started, as the ingress's stream is once its header is taken
        await m.follow(inner, 0.0, 0).aclose()
    asyncio.run(close_unstarted())
    assert closed == [True]  # closing the follower before it ran closed the stream under it
    got = _parsed(m, {})
    assert got[("clformer_prompt_tokens_total", ())] == 5 and got[("clformer_generation_tokens_total", ())] == 5
    assert got[("clformer_time_to_first_token_seconds_count", ())] == 1
    assert got[("clformer_time_per_output_token_seconds_count", ())] == 1


def test_count_requests_by_route_and_status():
    """CountRequests counts at the status line, by the route's path (not the
    URL: a client cannot grow the labels), 500 for a handler that raised."""
    import asyncio
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from clformer.serve import metrics

    async def item(request):
        return JSONResponse({}, status_code=201)

    async def boom(request):
        raise RuntimeError("x")
    app = Starlette(routes=[Route("/items/{id}", item), Route("/boom", boom)])
    app.add_middleware(metrics.CountRequests)
    m = metrics.Metrics()
    app.state.clformer_metrics = m

    async def get(path):
        sent = []

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(msg):
            sent.append(msg)
        scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": b"",
                 "headers": [], "root_path": "", "scheme": "http", "server": ("127.0.0.1", 80),
                 "http_version": "1.1"}
        try:
            await app(scope, receive, send)
        except RuntimeError:
            pass
        return sent[0]["status"] if sent else None

    async def run():
        return [await get(p) for p in ("/items/1", "/items/2", "/nowhere", "/boom")]
    assert asyncio.run(run()) == [201, 201, 404, 500]
    got = _parsed(m, {})
    assert got[("clformer_requests_total", (("endpoint", "/items/{id}"), ("status", "201")))] == 2
    assert got[("clformer_requests_total", (("endpoint", "other"), ("status", "404")))] == 1
    assert got[("clformer_requests_total", (("endpoint", "/boom"), ("status", "500")))] == 1
