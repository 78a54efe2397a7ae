"""clformer.serve's completions on the engine, and GGUF models, in both modes
(serve_modes.py: one process, then a local Ray on 127.0.0.1 and Serve), each
started once for this module, serving

  /slow      a random 100 MB GPT-2 (test_serve_http's, 512 wide, 8 layers,
             1024 positions) with a chat template, so that a long
             completion takes seconds
  /gguf_file tests/fixtures/gguf_models/smollm_like/model.gguf, by its path
  /gguf_dir  the same, by the folder that holds it (no config.json)

Concurrent requests decode together: four chats sent while a long
completion streams each join its steps (the engine's rows per step, read
from /stats, count every row of theirs beside the long one's), and each
answer is the one the same request gets alone.  A client that goes away
mid-stream ends its sequence: the engine runs nothing and holds no block
afterwards.  Prefix reuse is shared only by requests naming the same
`user`.  A GGUF model is served by file or folder, named after its file.
"""
import concurrent.futures
import json
import os
import time

import pytest

try:
    import ray
    import requests
except ImportError:
    # tools/serve-test.sh installs ray[serve] and sets CLF_REQUIRE_SERVE=1: there, a missing Ray fails.
    if os.environ.get("CLF_REQUIRE_SERVE") == "1":
        raise
    pytest.skip("ray[serve] is not installed (tools/serve-test.sh installs it)", allow_module_level=True)

import clformer  # noqa: E402
import serve_modes  # noqa: E402
from clformer.serve import Limits, ServeOptions  # noqa: E402
from conftest import FIXTURES as FX  # noqa: E402
from test_serve_http import _slow_gpt2_dir, chat_chunks  # noqa: E402

pytestmark = pytest.mark.device
TIMEOUT = 60
GGUF_DIR = os.path.join(FX, "gguf_models", "smollm_like")
CHATS = [[{"role": "user", "content": c}] for c in ("a+b", "a*b", "x*y", "(c)")]


@pytest.fixture(scope="module")
def slow_dir(tmp_path_factory):
    d = _slow_gpt2_dir(str(tmp_path_factory.mktemp("serve-engine")))
    cfg_path = os.path.join(d, "tokenizer_config.json")
    cfg = json.load(open(cfg_path, encoding="utf-8"))
    cfg["chat_template"] = ("{% for m in messages %}({{ m['content'] }}){% endfor %}"
                            "{% if add_generation_prompt %}={% endif %}")
    json.dump(cfg, open(cfg_path, "w", encoding="utf-8"))
    return d


@pytest.fixture(scope="module")
def ref(slow_dir):
    models = {"slow": clformer.Model(slow_dir), "gguf": clformer.Model(os.path.join(GGUF_DIR, "model.gguf"))}
    yield models
    for m in models.values():
        m.close()


@pytest.fixture(scope="module", params=serve_modes.MODES)
def server(request, slow_dir):
    limits = Limits(max_new_tokens=1000, request_timeout_s=TIMEOUT)
    apps = {}
    for app, path in (("slow", slow_dir), ("gguf_file", os.path.join(GGUF_DIR, "model.gguf")),
                      ("gguf_dir", GGUF_DIR)):
        name = "slow" if app == "slow" else ""  # the GGUF apps: named after the file
        apps["/" + app] = ServeOptions(model_dir=path, name=name, replicas=1, replicas_per_device=3, limits=limits)
    with serve_modes.server(request.param, apps, TIMEOUT) as url:
        yield url


def post(server, path, **kw):
    return requests.post(server + path, timeout=TIMEOUT, **kw)


def engine_stats(server, app):
    r = requests.get(f"{server}/{app}/stats", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()["replica"]


def wait_idle(server, app, seconds=20.0):
    """The engine's stats once it runs and queues nothing and holds no
    block (fails after `seconds`)."""
    t0 = time.monotonic()
    while True:
        st = engine_stats(server, app)["engine"]
        if st["running"] == 0 and st["waiting"] == 0 and st["blocks_used"] == 0:
            return st
        assert time.monotonic() - t0 < seconds, f"the engine is not idle after {seconds} s: {st}"
        time.sleep(0.2)


def chat(server, msgs, stream, **kw):
    r = post(server, "/slow/v1/chat/completions", json={"messages": msgs, "max_tokens": 12, "temperature": 0,
                                                        "stream": stream, **kw})
    if stream:
        return "".join(chat_chunks(r, "length")), None
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"], r.json()["usage"]


def open_stream(server, path, body):
    """A streamed request whose first content has arrived: the response and
    its event iterator."""
    r = requests.post(server + path, json=dict(body, stream=True), stream=True, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    events = (e for e in r.iter_lines() if e)
    for e in events:
        c = json.loads(e[6:])["choices"][0]
        if c.get("text") or (c.get("delta") or {}).get("content"):
            return r, events
    pytest.fail("the stream ended before any text")


# ------------------------------------------------------------ the engine

def test_concurrent_chats_decode_together(server, ref):
    info = engine_stats(server, "slow")
    assert info["engine"] is not None and info["engine_refused"] is None, info
    alone = []
    for msgs in CHATS:
        want = ref["slow"].chat(msgs, max_new_tokens=12, do_sample=False)
        text, usage = chat(server, msgs, False)
        assert text == want and usage["completion_tokens"] == want.completion_tokens, msgs
        alone.append((text, usage))
    # A long completion streams meanwhile: while it is still running after
    # the four have ended, each of their rows went into a step beside its row.
    long, events = open_stream(server, "/slow/v1/completions", {"prompt": "a+b", "max_tokens": 1000,
                                                                 "temperature": 0})
    try:
        before = engine_stats(server, "slow")["engine"]
        assert before["running"] == 1, before
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            plain = list(pool.map(lambda m: chat(server, m, False), CHATS))
            streamed = list(pool.map(lambda m: chat(server, m, True)[0], CHATS))
        after = engine_stats(server, "slow")["engine"]
        assert after["running"] == 1, ("the long completion ended before the chats: make it longer", after)
    finally:
        long.close()
    assert [t for t, _ in plain] == [t for t, _ in alone]
    assert [u for _, u in plain] == [u for _, u in alone]
    assert streamed == [t for t, _ in alone]
    # rows beyond one per step: at least every prompt row of the eight chats
    extra = (after["rows"] - before["rows"]) - (after["steps"] - before["steps"])
    prompts = 2 * sum(u["prompt_tokens"] for _, u in alone)
    print(f"8 chats beside a long completion: {after['steps'] - before['steps']} steps, "
          f"{after['rows'] - before['rows']} rows ({prompts} prompt rows of the chats)")
    assert extra >= prompts, (before, after)
    wait_idle(server, "slow")


def test_disconnect_mid_stream_ends_the_sequence(server):
    cancelled = engine_stats(server, "slow")["cancelled_generations"]
    for path, body in (("/slow/v1/completions", {"prompt": "a+b", "max_tokens": 1000, "temperature": 0}),
                       ("/slow/v1/chat/completions", {"messages": CHATS[0], "max_tokens": 1000, "temperature": 0})):
        r, events = open_stream(server, path, body)
        for _ in range(3):
            next(events)
        assert engine_stats(server, "slow")["engine"]["running"] == 1
        r.close()  # the client goes away
        st = wait_idle(server, "slow")
        print(f"{path}: idle after the disconnect, {st}")
    assert engine_stats(server, "slow")["cancelled_generations"] == cancelled + 2


def test_prefix_reuse_is_isolated_by_user(server, ref):
    prompt = "(a+b)*c=d" * 4
    n = len(ref["slow"].tokenize(prompt))
    assert n > 16  # more than one block of 16 positions

    def cached(**kw):
        r = post(server, "/slow/v1/completions", json={"prompt": prompt, "max_tokens": 2, "temperature": 0, **kw})
        assert r.status_code == 200, r.text
        return r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]

    assert [cached(), cached()] == [0, 0]  # no user: each request keeps its own
    assert cached(user="alice") == 0
    assert cached(user="alice") >= 16  # the same user reuses its prompt's full blocks
    assert cached(user="bob") == 0     # another learns nothing of it
    r = post(server, "/slow/v1/completions", json={"prompt": prompt, "max_tokens": 2, "user": 7})
    assert r.status_code == 400 and "user must be a string" in r.json()["error"]["message"], r.text


def test_forward_passes_of_a_decoder_beside_its_engine(server, ref):
    """/run and embeddings on a decoder whose engine is open run on a second
    instance of its weights, loaded on the first such request."""
    import numpy as np
    r = post(server, "/slow/v1/embeddings", json={"input": ["a+b=c", "(a+b)*c=d"]})
    assert r.status_code == 200, r.text
    got = np.array([d["embedding"] for d in r.json()["data"]], dtype=np.float32)
    assert np.array_equal(got, ref["slow"].embed(["a+b=c", "(a+b)*c=d"]))
    ids = np.array([[1, 2, 3]])
    r = post(server, "/slow/run", json={"inputs": {"input_ids": ids.tolist()}, "outputs": ["logits"]})
    assert r.status_code == 200, r.text
    want = ref["slow"].run({"input_ids": ids}, ["logits"])["logits"]
    assert np.array_equal(np.array(r.json()["outputs"]["logits"], dtype=np.float32), want)
    info = engine_stats(server, "slow")
    assert info["second_model"] and info["engine"] is not None


# ------------------------------------------------------------ GGUF

@pytest.mark.parametrize("app", ["gguf_file", "gguf_dir"])
def test_gguf_served_by_file_and_folder(server, ref, app):
    r = requests.get(f"{server}/{app}/v1/models", timeout=TIMEOUT)
    assert [d["id"] for d in r.json()["data"]] == ["model"]  # model.gguf's name
    info = engine_stats(server, app)
    assert info["gguf"] and info["chat"] and info["engine"] is not None, info
    m = ref["gguf"]
    msgs = [{"role": "user", "content": "hi"}]
    want = m.chat(msgs, max_new_tokens=8, do_sample=False)
    r = post(server, f"/{app}/v1/chat/completions", json={"model": "model", "messages": msgs, "max_tokens": 8,
                                                          "temperature": 0})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model"] == "model" and body["choices"][0]["message"]["content"] == str(want)
    assert body["usage"]["prompt_tokens"] == want.prompt_tokens
    assert body["usage"]["completion_tokens"] == want.completion_tokens
    r = post(server, f"/{app}/v1/chat/completions", json={"messages": msgs, "max_tokens": 8, "temperature": 0,
                                                          "stream": True})
    assert chat_chunks(r, want.finish_reason) == list(m.chat_stream(msgs, max_new_tokens=8, do_sample=False))
    r = post(server, f"/{app}/v1/completions", json={"prompt": "hello", "max_tokens": 6, "temperature": 0})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["text"] == "".join(m.stream("hello", max_new_tokens=6, do_sample=False))
    r = post(server, f"/{app}/v1/chat/completions", json={"model": "smollm_like", "messages": msgs})
    assert r.status_code == 404, r.text


# ------------------------------------------------------------ n, logprobs, include_usage (issue 41)

def sse_chunks(r):
    """A stream's chunks (the JSON of every event before [DONE])."""
    assert r.status_code == 200, r.text
    events = [e for e in r.text.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]", events
    return [json.loads(e[6:]) for e in events[:-1]]


def streamed_choices(chunks, chat):
    """Per choice index: its text, finish reason and logprobs entries (chat's
    content entries, or the legacy object's lists joined)."""
    out = {}
    for c in chunks:
        for ch in c["choices"]:
            o = out.setdefault(ch["index"], {"text": "", "finish_reason": None, "lp": []})
            assert o["finish_reason"] is None, ("a chunk after the choice's finish", c)
            o["text"] += (ch["delta"].get("content") or "") if chat else ch["text"]
            o["finish_reason"] = ch["finish_reason"]
            lp = ch["logprobs"]
            if lp is not None:
                o["lp"] += lp["content"] if chat else list(zip(lp["tokens"], lp["token_logprobs"],
                                                                lp["top_logprobs"], lp["text_offset"]))
    return [out[i] for i in sorted(out)]


@pytest.mark.parametrize("chat", [False, True])
def test_n_choices_are_the_request_with_seeds_s_plus_i(server, chat):
    """n = 2 with seed S: choice i is the same request with n = 1 and seed
    S + i alone, plain and streamed; usage counts the prompt once and sums
    the choices' tokens; include_usage ends the stream with it."""
    # the GGUF fixture: the slow GPT-2's random logits are too sharp for two seeds to draw apart
    path = "/gguf_file/v1/chat/completions" if chat else "/gguf_file/v1/completions"
    base = {"max_tokens": 10, "temperature": 0.9}
    base.update({"messages": [{"role": "user", "content": "hi there"}]} if chat else {"prompt": "once upon a time"})

    def text(c):
        return c["message"]["content"] if chat else c["text"]
    alone = []
    for i in range(2):
        r = post(server, path, json=dict(base, seed=3 + i))
        assert r.status_code == 200, r.text
        alone.append((text(r.json()["choices"][0]), r.json()["choices"][0]["finish_reason"], r.json()["usage"]))
    assert alone[0][0] != alone[1][0]  # two seeds, two draws
    r = post(server, path, json=dict(base, seed=3, n=2))
    assert r.status_code == 200, r.text
    body = r.json()
    assert [c["index"] for c in body["choices"]] == [0, 1]
    assert [(text(c), c["finish_reason"]) for c in body["choices"]] == [(t, f) for t, f, _ in alone]
    u = body["usage"]
    assert u["prompt_tokens"] == alone[0][2]["prompt_tokens"]
    assert u["completion_tokens"] == sum(a[2]["completion_tokens"] for a in alone)
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    r = post(server, path, json=dict(base, seed=3, n=2, stream=True, stream_options={"include_usage": True}))
    chunks = sse_chunks(r)
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == u["completion_tokens"]
    assert chunks[-1]["usage"]["prompt_tokens"] == u["prompt_tokens"]
    assert all(c["usage"] is None for c in chunks[:-1])
    got = streamed_choices(chunks[:-1], chat)
    assert [(g["text"], g["finish_reason"]) for g in got] == [(t, f) for t, f, _ in alone]
    if chat:  # each choice's first chunk names the role
        assert [c["choices"][0]["delta"] for c in chunks[:2]] == [{"role": "assistant", "content": ""}] * 2
        assert [c["choices"][0]["index"] for c in chunks[:2]] == [0, 1]
    # without include_usage, no usage chunk and no usage field
    chunks = sse_chunks(post(server, path, json=dict(base, seed=3, n=2, stream=True)))
    assert all("usage" not in c and c["choices"] for c in chunks)
    wait_idle(server, "gguf_file")


def model_logprobs(m, ids, tokens, k):
    """The log-softmax of Model.run's logits after ids + tokens[:t], for each
    t: (the token's logprob, the top k (id, logprob) pairs)."""
    import numpy as np
    out = []
    for t in range(len(tokens)):
        x = np.array([list(ids) + tokens[:t]], dtype=np.int64)
        z = m.run({"input_ids": x}, ["logits"])["logits"][0, -1].astype(np.float64)
        ls = z - z.max() - np.log(np.exp(z - z.max()).sum())
        top = sorted(range(len(ls)), key=lambda i: (-ls[i], i))[:k]
        out.append((ls[tokens[t]], [(i, ls[i]) for i in top]))
    return out


def test_chat_logprobs_are_the_model_s(server, ref):
    """logprobs + top_logprobs (chat): one entry per generated token; a
    greedy token is its top list's first; the values are the log-softmax of
    Model.run's logits; the texts are the tokenizer's decoding of each id."""
    import numpy as np
    m = ref["slow"]
    msgs = CHATS[2]
    want = m.chat(msgs, max_new_tokens=8, do_sample=False)
    ids = m.tokenize(m.apply_chat_template(msgs, add_generation_prompt=True), add_special_tokens=False)
    tokens = [int(t) for t in m.tokenize(str(want), add_special_tokens=False)]
    body = {"messages": msgs, "max_tokens": 8, "temperature": 0, "logprobs": True, "top_logprobs": 3}
    r = post(server, "/slow/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    c = r.json()["choices"][0]
    content = c["logprobs"]["content"]
    assert c["message"]["content"] == str(want) and len(content) == r.json()["usage"]["completion_tokens"]
    assert "".join(e["token"] for e in content) == str(want)
    for e in content:
        assert len(e["top_logprobs"]) == 3 and e["bytes"] == list(e["token"].encode())
        assert e["top_logprobs"][0] == {"token": e["token"], "logprob": e["logprob"], "bytes": e["bytes"]}
        assert e["logprob"] == max(t["logprob"] for t in e["top_logprobs"])
    ref_lp = model_logprobs(m, ids, tokens, 3)
    assert len(ref_lp) == len(content)
    for e, (lp, top) in zip(content, ref_lp):
        np.testing.assert_allclose(e["logprob"], lp, rtol=1e-3, atol=1e-3)
        assert [t["token"] for t in e["top_logprobs"]] == [m.decode([i], skip_special_tokens=False) for i, _ in top]
        np.testing.assert_allclose([t["logprob"] for t in e["top_logprobs"]], [v for _, v in top], rtol=1e-3,
                                   atol=1e-3)
    streamed = streamed_choices(sse_chunks(post(server, "/slow/v1/chat/completions", json=dict(body, stream=True))),
                                True)
    assert streamed[0]["text"] == str(want) and streamed[0]["lp"] == content
    # no top_logprobs: the chosen tokens' alone
    r = post(server, "/slow/v1/chat/completions", json=dict(body, top_logprobs=None))
    assert [e["top_logprobs"] for e in r.json()["choices"][0]["logprobs"]["content"]] == [[]] * len(content)


def test_completion_logprobs_legacy_object(server, ref):
    """Completions' logprobs k: tokens, token_logprobs, top_logprobs (k
    alternatives and the chosen token, text -> logprob) and text_offset,
    plain and streamed alike; n = 2 gives each choice its own."""
    m = ref["slow"]
    body = {"prompt": "a+b", "max_tokens": 6, "temperature": 0, "logprobs": 2}
    r = post(server, "/slow/v1/completions", json=body)
    assert r.status_code == 200, r.text
    c = r.json()["choices"][0]
    lp = c["logprobs"]
    want = "".join(m.stream("a+b", max_new_tokens=6, do_sample=False))
    assert c["text"] == want == "".join(lp["tokens"])
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 6
    assert lp["text_offset"] == [sum(len(t) for t in lp["tokens"][:i]) for i in range(6)]
    for t, v, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]):
        assert len(top) <= 3 and top[t] == v == max(top.values())  # greedy: the chosen token is the most probable
    chunks = sse_chunks(post(server, "/slow/v1/completions", json=dict(body, stream=True)))
    got = streamed_choices(chunks, False)[0]
    assert got["text"] == want
    assert got["lp"] == list(zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"], lp["text_offset"]))
    r = post(server, "/slow/v1/completions", json=dict(body, n=2))
    assert [x["logprobs"] for x in r.json()["choices"]] == [lp, lp]  # greedy copies are the same
    assert r.json()["usage"]["completion_tokens"] == 12


@pytest.mark.parametrize("body, words", [
    ({"n": 9}, "n must be in [1, 8]"),
    ({"logprobs": 6}, "logprobs must be in [0, 5]"),
    ({"logprobs": 1, "echo": True}, "echo with logprobs"),
    ({"stream": True, "stream_options": {"include_usage": "yes"}}, "include_usage must be a boolean"),
    ({"stream_options": {"include_usage": True}}, "only allowed with stream: true"),
    ({"n": 2, "best_of": 3}, "best_of must be n"),
])
def test_out_of_range_choices_and_logprobs_are_400(server, body, words):
    r = post(server, "/slow/v1/completions", json=dict({"prompt": "a+b", "max_tokens": 2}, **body))
    assert r.status_code == 400 and words in r.json()["error"]["message"], r.text


@pytest.mark.parametrize("body, words", [
    ({"n": 0}, "n must be in [1, 8]"),
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs must be in [0, 20]"),
    ({"top_logprobs": 2}, "top_logprobs needs logprobs"),
    ({"logprobs": 1}, "logprobs must be a boolean"),
])
def test_out_of_range_chat_fields_are_400(server, body, words):
    r = post(server, "/slow/v1/chat/completions", json=dict({"messages": CHATS[0], "max_tokens": 2}, **body))
    assert r.status_code == 400 and words in r.json()["error"]["message"], r.text


def test_n_and_logprobs_without_an_engine_are_400():
    """A model served without the engine (an encoder-decoder) refuses n > 1
    and logprobs with a 400 that says why, before anything runs."""
    from types import SimpleNamespace
    from clformer.serve.api import CompletionRequest, RequestError
    from clformer.serve.replica import ModelReplica
    rep = SimpleNamespace(engine=None, engine_refused=None)
    for kw, param in (({"n": 2}, "n"), ({"logprobs": 0}, "logprobs")):
        req = CompletionRequest("a", 4, False, (), False, {}, None, **kw)
        with pytest.raises(RequestError) as e:
            ModelReplica._submit(rep, req, None)
        assert e.value.status == 400 and e.value.param == param and "needs the library's engine" in e.value.message
        assert "encoder-decoder" in e.value.message
    assert ModelReplica._submit(rep, CompletionRequest("a", 4, False, (), False, {}), None) is None


def test_openai_client_n_and_logprobs(server):
    """OpenAI's own client (tools/serve-test.sh installs it): chat with n = 2,
    logprobs and top_logprobs, and a stream with include_usage."""
    import openai
    client = openai.OpenAI(base_url=server + "/slow/v1", api_key="none", timeout=TIMEOUT, max_retries=0)
    r = client.chat.completions.create(model="slow", messages=CHATS[0], max_tokens=6, n=2, seed=1, temperature=0.8,
                                       logprobs=True, top_logprobs=2)
    assert [c.index for c in r.choices] == [0, 1]
    for c in r.choices:
        assert len(c.logprobs.content) >= 1 and all(len(e.top_logprobs) == 2 for e in c.logprobs.content)
    assert r.usage.completion_tokens == sum(len(c.logprobs.content) for c in r.choices)
    stream = client.chat.completions.create(model="slow", messages=CHATS[0], max_tokens=6, n=2, seed=1,
                                            temperature=0.8, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[-1].usage.completion_tokens == r.usage.completion_tokens and not chunks[-1].choices
    texts = ["", ""]
    for ch in chunks[:-1]:
        for c in ch.choices:
            texts[c.index] += c.delta.content or ""
    assert texts == [c.message.content for c in r.choices]


# ------------------------------------------------------------ operations (issue 41): /metrics, /tokenize,
# /detokenize, max_tokens against the context, created, OpenAI's error codes

def scrape(server, app):
    """/metrics parsed (prometheus_client's own parser): {(name, labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families
    r = requests.get(f"{server}/{app}/metrics", timeout=TIMEOUT)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain"), r.text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(r.text) for s in fam.samples}


def requests_total(m, endpoint, status):
    return m.get(("clformer_requests_total", (("endpoint", endpoint), ("status", str(status)))), 0)


def test_metrics_move_by_the_requests_answered(server):
    app = "gguf_file"
    wait_idle(server, app)
    before = scrape(server, app)
    msgs = [{"role": "user", "content": "hi"}]
    r = post(server, f"/{app}/v1/chat/completions", json={"messages": msgs, "max_tokens": 8, "temperature": 0})
    assert r.status_code == 200, r.text
    u1 = r.json()["usage"]
    r = post(server, f"/{app}/v1/completions", json={"prompt": "hello", "max_tokens": 5, "temperature": 0,
                                                     "stream": True, "stream_options": {"include_usage": True}})
    u2 = sse_chunks(r)[-1]["usage"]
    assert post(server, f"/{app}/v1/completions", json={"prompt": "a", "model": "nope"}).status_code == 404
    assert post(server, f"/{app}/v1/completions", json={"prompt": "a", "max_tokens": 0}).status_code == 400
    wait_idle(server, app)
    after = scrape(server, app)

    def moved(key):
        return after.get(key, 0) - before.get(key, 0)
    for endpoint, status, n in (("/v1/chat/completions", 200, 1), ("/v1/completions", 200, 1),
                                ("/v1/completions", 404, 1), ("/v1/completions", 400, 1)):
        assert requests_total(after, endpoint, status) - requests_total(before, endpoint, status) == n, \
            (endpoint, status, after)
    # the scrape in between counted itself
    assert requests_total(after, "/metrics", 200) - requests_total(before, "/metrics", 200) == 1
    assert moved(("clformer_prompt_tokens_total", ())) == u1["prompt_tokens"] + u2["prompt_tokens"]
    assert moved(("clformer_generation_tokens_total", ())) == u1["completion_tokens"] + u2["completion_tokens"]
    assert moved(("clformer_time_to_first_token_seconds_count", ())) == 2
    assert moved(("clformer_time_to_first_token_seconds_sum", ())) > 0
    # both ran more than one token (8 and 5, the tiny model ends no earlier): a time per output token each
    assert u1["completion_tokens"] > 1 and u2["completion_tokens"] > 1
    assert moved(("clformer_time_per_output_token_seconds_count", ())) == 2
    # the engine's pool, from the replica: back to no block used, nothing running or waiting
    tags = {dict(k[1])["replica"] for k in after if k[0] == "clformer_kv_blocks_total"}
    assert len(tags) == 1, after
    rep = (("replica", tags.pop()),)
    assert after[("clformer_kv_blocks_total", rep)] > 0
    assert after[("clformer_kv_blocks_used", rep)] == 0
    assert after[("clformer_sequences_running", rep)] == 0 and after[("clformer_sequences_waiting", rep)] == 0
    assert after[("clformer_engine_steps_total", rep)] > before[("clformer_engine_steps_total", rep)]


def test_metrics_show_a_running_sequence_and_its_blocks(server):
    """While a long completion streams, /metrics shows it running with blocks
    held; once the client goes away, none."""
    wait_idle(server, "slow")
    r, _ = open_stream(server, "/slow/v1/completions", {"prompt": "a+b", "max_tokens": 1000, "temperature": 0})
    m = scrape(server, "slow")
    rep = next(k[1] for k in m if k[0] == "clformer_sequences_running")
    assert m[("clformer_sequences_running", rep)] == 1 and m[("clformer_kv_blocks_used", rep)] >= 1, m
    r.close()
    wait_idle(server, "slow")
    m = scrape(server, "slow")
    assert m[("clformer_kv_blocks_used", rep)] == 0 and m[("clformer_sequences_running", rep)] == 0


def test_tokenize_and_detokenize(server, ref):
    m, app = ref["gguf"], "gguf_file"
    r = post(server, f"/{app}/tokenize", json={"model": "model", "prompt": "hello world"})
    assert r.status_code == 200, r.text
    want = [int(i) for i in m.tokenize("hello world")]
    assert r.json() == {"tokens": want, "count": len(want), "max_model_len": m.max_positions, "token_strs": None}
    r = post(server, f"/{app}/tokenize", json={"prompt": "hello world", "add_special_tokens": False,
                                                "return_token_strs": True})
    plain = [int(i) for i in m.tokenize("hello world", add_special_tokens=False)]
    assert r.json()["tokens"] == plain and r.json()["token_strs"] == [m.token(i) for i in plain]
    # a conversation: the ids chat completions feed (its usage.prompt_tokens counts them)
    msgs = [{"role": "user", "content": "hi"}]
    r = post(server, f"/{app}/tokenize", json={"messages": msgs})
    conv = [int(i) for i in m.tokenize(m.apply_chat_template(msgs, add_generation_prompt=True),
                                       add_special_tokens=False)]
    assert r.json()["tokens"] == conv
    c = post(server, f"/{app}/v1/chat/completions", json={"messages": msgs, "max_tokens": 1})
    assert c.json()["usage"]["prompt_tokens"] == len(conv)
    r = post(server, f"/{app}/tokenize", json={"messages": msgs, "add_generation_prompt": False})
    assert r.json()["tokens"] == [int(i) for i in m.tokenize(m.apply_chat_template(msgs), add_special_tokens=False)]
    r = post(server, f"/{app}/detokenize", json={"model": "model", "tokens": conv})
    assert r.status_code == 200 and r.json() == {"prompt": m.decode(conv, skip_special_tokens=False)}, r.text
    # an id the vocabulary (512 ids) does not have: named, not dropped
    r = post(server, f"/{app}/detokenize", json={"tokens": [1, 512]})
    assert r.status_code == 400 and "tokens[1] is 512" in r.json()["error"]["message"], r.text
    assert r.json()["error"]["code"] == "invalid_value" and r.json()["error"]["param"] == "tokens"
    for body, words in (({"prompt": "x" * 65537}, "at most 65536"), ({"tokens": [1]}, "unknown field 'tokens'")):
        r = post(server, f"/{app}/tokenize", json=body)
        assert r.status_code == 400 and words in r.json()["error"]["message"], r.text


def test_max_tokens_defaults_to_the_context(server, ref):
    """No max_tokens: the reply runs to the end token or the model's context
    (256 positions); more than the context leaves: 400
    context_length_exceeded, before a stream starts."""
    m, app = ref["gguf"], "gguf_file"
    msgs = [{"role": "user", "content": "hi"}]
    prompt = len(m.tokenize(m.apply_chat_template(msgs, add_generation_prompt=True), add_special_tokens=False))
    left = m.max_positions - prompt
    want = m.chat(msgs, max_new_tokens=left, do_sample=False)
    r = post(server, f"/{app}/v1/chat/completions", json={"messages": msgs, "temperature": 0})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == str(want)
    assert r.json()["usage"]["completion_tokens"] == want.completion_tokens <= left
    r = post(server, f"/{app}/v1/chat/completions", json={"messages": msgs, "temperature": 0, "max_tokens": left})
    assert r.status_code == 200, r.text
    for stream in (False, True):
        r = post(server, f"/{app}/v1/chat/completions", json={"messages": msgs, "max_tokens": left + 1,
                                                              "stream": stream})
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert (err["code"], err["param"], err["type"]) == ("context_length_exceeded", "max_tokens",
                                                            "invalid_request_error"), err
        assert f"at most {left} can be generated" in err["message"], err
    long = post(server, f"/{app}/v1/completions", json={"prompt": "hello " * 300})
    assert long.status_code == 400 and long.json()["error"]["code"] == "context_length_exceeded", long.text


def test_models_list_created_and_openai_error_codes(server):
    import openai
    t = time.time()
    client = openai.OpenAI(base_url=server + "/gguf_file/v1", api_key="none", timeout=TIMEOUT, max_retries=0)
    models = client.models.list().data
    assert [x.id for x in models] == ["model"]
    assert isinstance(models[0].created, int) and 0 < t - models[0].created < 3600, models[0]
    one = client.models.retrieve("model")
    assert (one.id, one.created) == ("model", models[0].created)
    with pytest.raises(openai.NotFoundError) as e:
        client.models.retrieve("other")
    assert e.value.code == "model_not_found"
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="other", messages=[{"role": "user", "content": "hi"}])
    assert e.value.code == "model_not_found" and e.value.param == "model"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="model", messages=[{"role": "user", "content": "hi"}], max_tokens=900)
    assert e.value.code == "context_length_exceeded" and e.value.type == "invalid_request_error"
