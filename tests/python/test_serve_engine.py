"""clformer.serve's completions on the engine, and GGUF models: a local Ray
(127.0.0.1, 2 CPUs) and Serve started once for this module, serving

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
from clformer.serve import Limits, ServeOptions  # noqa: E402
from conftest import FIXTURES as FX  # noqa: E402
from test_serve_http import _free_port, _slow_gpt2_dir, chat_chunks  # noqa: E402

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


@pytest.fixture(scope="module")
def server(slow_dir):
    from ray import serve
    from clformer.serve.app import deploy, local_ray, start_http
    local_ray(num_cpus=2, resources={"opencl_device": 1})
    port = _free_port()
    limits = Limits(max_new_tokens=1000, request_timeout_s=TIMEOUT)
    try:
        start_http("127.0.0.1", port, TIMEOUT + 10)
        for app, path in (("slow", slow_dir), ("gguf_file", os.path.join(GGUF_DIR, "model.gguf")),
                          ("gguf_dir", GGUF_DIR)):
            name = "slow" if app == "slow" else ""  # the GGUF apps: named after the file
            deploy(ServeOptions(model_dir=path, name=name, replicas=1, replicas_per_device=3, limits=limits),
                   app_name=app, route_prefix="/" + app)
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()
        ray.shutdown()


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
