"""`python -m clformer.serve MODEL` in one process (issue 41): the command
with neither --replicas nor --address, on the GGUF fixture, run with `ray`
made unimportable and a fresh HOME, TMPDIR and XDG_RUNTIME_DIR: it answers
OpenAI's client (chat, plain and streamed), starts no other process, listens
on loopback only, writes nothing in those directories, and stops on SIGINT
with status 0.  The API key (every endpoint but /health, 401 in OpenAI's
shape; prefix reuse isolated by key and user), the refusal of a reachable
address without a key, and the asyncio batcher that replaced @serve.batch.
"""
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

try:
    import requests
    import openai
except ImportError:
    if os.environ.get("CLF_REQUIRE_SERVE") == "1":
        raise
    pytest.skip("requests and openai are not installed (tools/serve-test.sh installs them)", allow_module_level=True)

from conftest import FIXTURES as FX
from test_serve_local import _descendants, _listeners, _loopback, _socket_inodes

GGUF = os.path.join(FX, "gguf_models", "smollm_like", "model.gguf")
KEY = "sk-test-0123456789"
# the command, with every import of Ray failing (sys.modules[name] = None makes `import ray` raise)
NO_RAY = "import sys; sys.modules['ray'] = None; from clformer.serve.__main__ import main; sys.exit(main())"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """The one-process server with an API key ($CLFORMER_SERVE_API_KEY), its
    seconds from start to the first answered chat, and its private dirs."""
    from conftest import require_device
    require_device()
    root = tmp_path_factory.mktemp("single")
    dirs = {k: root / k for k in ("home", "tmp", "run")}
    for d in dirs.values():
        d.mkdir(mode=0o700)
    port = _free_port()
    # PoCL keeps compiled kernels of its own in $POCL_CACHE_DIR, default ~/.cache/pocl: the OpenCL
    # runtime's, not clformer's (docs/serving.md); here the real HOME's, so that it stays warm
    env = dict(os.environ, HOME=str(dirs["home"]), TMPDIR=str(dirs["tmp"]), XDG_RUNTIME_DIR=str(dirs["run"]),
               CLFORMER_SERVE_API_KEY=KEY, POCL_CACHE_DIR=os.environ.get("POCL_CACHE_DIR") or
               os.path.join(os.path.expanduser("~"), ".cache", "pocl"))
    log = open(root / "serve.log", "w+b")
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-c", NO_RAY, GGUF, "--port", str(port)], env=env, stdout=log,
                         stderr=subprocess.STDOUT, cwd=str(root))
    url = f"http://127.0.0.1:{port}"
    took = None
    try:
        while time.monotonic() - t0 < 60 and p.poll() is None:
            try:
                r = requests.post(url + "/v1/chat/completions", timeout=30, headers={"Authorization": f"Bearer {KEY}"},
                                  json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
                if r.status_code == 200:
                    took = time.monotonic() - t0
                    break
            except requests.ConnectionError:
                time.sleep(0.05)
        log.seek(0)
        assert took is not None, f"no answer within 60 s (exit {p.poll()}):\n{log.read().decode(errors='replace')}"
        print(f"one process: start to the first answered chat {took:.2f} s")
        yield {"url": url, "port": port, "proc": p, "took": took, "dirs": dirs, "log": log}
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(30)
        log.close()


def test_answers_openai_in_one_process_without_ray(single):
    p, url = single["proc"], single["url"]
    assert single["took"] < 20, single["took"]  # issue 41's target is 5 s on a warm kernel cache (docs/serving.md)
    client = openai.OpenAI(base_url=url + "/v1", api_key=KEY, timeout=60, max_retries=0)
    msgs = [{"role": "user", "content": "a+b"}]
    r = client.chat.completions.create(model="model", messages=msgs, max_tokens=6, temperature=0)
    assert r.choices[0].finish_reason in ("stop", "length") and r.usage.completion_tokens >= 1
    chunks = list(client.chat.completions.create(model="model", messages=msgs, max_tokens=6, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == r.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == r.usage.completion_tokens
    # one process, nothing else started; every socket of it on loopback
    tree = _descendants(p.pid)
    assert list(tree) == [p.pid], tree
    listening = _listeners()
    mine = [listening[i] for i in _socket_inodes(p.pid) & listening.keys()]
    assert mine and all(_loopback(a) for a, _ in mine) and any(port == single["port"] for _, port in mine), mine
    # the header deadline and the body budget are there too: /stats counts refusals
    st = requests.get(url + "/stats", headers={"Authorization": f"Bearer {KEY}"}, timeout=30).json()
    assert "refusals" in st and st["replica"]["pid"] == p.pid and st["replica"]["engine"]["blocks_used"] == 0, st


def test_api_key_on_every_endpoint_but_health(single):
    url = single["url"]
    assert requests.get(url + "/health", timeout=30).status_code == 200
    for how in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}, {"Authorization": f"Basic {KEY}"}):
        for method, path in (("GET", "/v1/models"), ("GET", "/stats"), ("POST", "/v1/chat/completions"),
                             ("POST", "/v1/completions"), ("POST", "/v1/embeddings"), ("POST", "/run")):
            r = requests.request(method, url + path, headers=how, json={"prompt": "a"}, timeout=30)
            assert r.status_code == 401, (how, path, r.status_code, r.text)
            err = r.json()["error"]
            assert "API key" in err["message"] and "Authorization: Bearer" in err["message"], err
    ok = requests.get(url + "/v1/models", headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    assert ok.status_code == 200 and ok.json()["data"][0]["id"] == "model", ok.text
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=url + "/v1", api_key="sk-wrong", max_retries=0).models.list()


def test_prefix_reuse_is_isolated_by_key_and_user(single):
    """With a key, requests without `user` share the key's prefixes; a
    `user` within it has its own."""
    url, h = single["url"], {"Authorization": f"Bearer {KEY}"}
    prompt = "the quick brown fox jumps over the lazy dog " * 6

    def cached(user=None):
        body = {"prompt": prompt, "max_tokens": 1, "temperature": 0, **({"user": user} if user else {})}
        r = requests.post(url + "/v1/completions", json=body, headers=h, timeout=60)
        assert r.status_code == 200, r.text
        return r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached() == 0
    assert cached() > 0             # the key's own prefix
    assert cached("alice") == 0     # alice within the key: apart from the key's
    assert cached("alice") > 0
    assert cached("bob") == 0


def test_half_closed_stream_is_answered_whole(single):
    """Issue 41: a client that shuts its write side after its request got no
    answer; a streamed chat now runs to [DONE], the connection closed after."""
    body = json.dumps({"messages": [{"role": "user", "content": "a+b"}], "max_tokens": 8, "temperature": 0,
                       "stream": True}).encode()
    with socket.create_connection(("127.0.0.1", single["port"]), timeout=60) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s" % (KEY.encode(), len(body), body))
        s.shutdown(socket.SHUT_WR)
        got = b""
        while (d := s.recv(65536)):
            got += d
    interim = b"HTTP/1.1 100 Continue\r\n\r\n"  # the probe for a client gone altogether (docs/serving.md)
    if got.startswith(interim):
        got = got[len(interim):]
    assert got.startswith(b"HTTP/1.1 200 "), got[:200]
    # the whole stream: the last event, then the chunked body's end
    assert b"data: [DONE]" in got and got.endswith(b"0\r\n\r\n"), got[-300:]
    assert b'"finish_reason":"length"' in got.replace(b" ", b""), got[-600:]


def test_isolation_key_depends_on_key_and_user():
    from clformer.serve.app import isolation_key
    keys = {isolation_key(k, u) for k in ("k1", "k2") for u in (None, "alice", "bob")}
    assert len(keys) == 6 and isolation_key("k1", None) == isolation_key("k1", "")
    assert all("k1" not in k for k in keys)  # the key itself goes nowhere


def test_sigint_stops_it_and_nothing_was_written(single):
    p = single["proc"]
    p.send_signal(signal.SIGINT)
    assert p.wait(30) == 0
    for name, d in single["dirs"].items():
        assert _files(d) == [], (name, _files(d))
    single["log"].seek(0)
    out = single["log"].read().decode(errors="replace")
    assert "one process, API key required" in out and KEY not in out, out


@pytest.mark.parametrize("argv, refused", [
    (["--host", "0.0.0.0"], True), (["--host", "192.0.2.1"], True), (["--host", "example.com"], True),
    (["--host", "0.0.0.0", "--insecure-no-key"], False), (["--host", "0.0.0.0", "--api-key", "k"], False),
    (["--host", "127.0.0.1"], False), (["--host", "::1"], False), (["--host", "localhost"], False),
    (["--api-key", "two words"], True)])
def test_reachable_address_needs_a_key(argv, refused, capsys, monkeypatch):
    from clformer.serve.__main__ import parse
    monkeypatch.delenv("CLFORMER_SERVE_API_KEY", raising=False)
    if not refused:
        a = parse([GGUF] + argv)
        assert not a.ray
        return
    with pytest.raises(SystemExit) as e:
        parse([GGUF] + argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert ("--insecure-no-key" in err) or ("printable ASCII" in err), err


def test_replicas_or_address_choose_ray():
    from clformer.serve.__main__ import parse
    assert parse([GGUF, "--replicas", "2"]).ray and parse([GGUF, "--address", "auto"]).ray
    assert parse([GGUF, "--replicas", "0"]).ray  # 0: every device unit the cluster advertises


def test_batcher_groups_bounds_and_fails_alike():
    """_batch.batch: calls that arrive together run as one batch within
    max_batch_size by batch_size_fn; an exception reaches every caller of
    its batch; a caller cancelled before its batch is left out of it."""
    from clformer.serve._batch import batch

    class M:
        def __init__(self):
            self.batches = []

        @batch(max_batch_size=6, batch_wait_timeout_s=0.05, batch_size_fn=lambda items: sum(items))
        async def double(self, items):
            self.batches.append(list(items))
            if -1 in items:
                raise ValueError("bad item")
            return [2 * i for i in items]

    async def run():
        m = M()
        out = await asyncio.gather(*[m.double(i) for i in (1, 2, 3, 4)])
        assert out == [2, 4, 6, 8] and m.batches == [[1, 2, 3], [4]], m.batches
        m.batches.clear()
        res = await asyncio.gather(m.double(1), m.double(-1), return_exceptions=True)
        assert res[0].args == ("bad item",) and res[1].args == ("bad item",)
        m.batches.clear()
        gone = asyncio.ensure_future(m.double(5))
        kept = asyncio.ensure_future(m.double(1))
        await asyncio.sleep(0)
        gone.cancel()
        assert await kept == 2 and m.batches == [[1]], m.batches
        m.double.set_max_batch_size(1)
        m.batches.clear()
        await asyncio.gather(m.double(1), m.double(1))
        assert m.batches == [[1], [1]]
        other = M()  # each instance batches its own calls
        await asyncio.gather(m.double(1), other.double(1))
        assert other.batches == [[1]]
    asyncio.run(run())
