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
    e = RequestError(400, "input is missing", "input")
    assert e.body() == {"error": {"message": "input is missing", "type": "invalid_request_error",
                                  "param": "input", "code": 400}}
    # it travels through pickling (Ray) with its fields
    import pickle
    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.status, e2.message, e2.param) == (400, "input is missing", "input")


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
    assert r.max_tokens == 20 and r.settings == {"max_new_tokens": 20, "do_sample": False} and r.stop == ("z",)
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
