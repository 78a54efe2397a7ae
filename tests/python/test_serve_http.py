"""clformer.serve over HTTP, in both of its modes (serve_modes.py): one
process (uvicorn on a thread here), then a local Ray (127.0.0.1, 2 CPUs, no
dashboard) and Serve, each started once for this module, serving these
bundled tiny models side by side (each one replica sharing the one PoCL
device):

  /bert  tests/fixtures/bert + the first 128 entries of the BERT tokenizer
         fixture's vocabulary (as tests/test_cli.c's embed test builds it)
  /gpt2  tests/fixtures/gpt2 + tests/fixtures/sampling/tokenizer (as the
         CLI's streaming test builds it; its ids fit the 128-token vocabulary)
  /vit   tests/fixtures/vit_cls (ViTForImageClassification, 5 labels)

Every answer is compared with clformer.Model run in this process on the same
directory: embeddings with Model.embed, completions with Model.generate's
greedy tokens decoded (and Model.stream's pieces), /run with model(**inputs),
classify with Model.classify; equal, not close: the server runs the same
library calls on the same device.  Every refusal is asserted with its status
and message, and the replicas that refused are the same, still running,
afterwards.
"""
import base64
import dataclasses
import json
import os
import shutil
import socket
import time

import numpy as np
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
from serve_modes import is_ray  # noqa: E402
from toolmodel import write_gpt2_weights  # noqa: E402

pytestmark = pytest.mark.device
TIMEOUT = 60
# OpenAI's error "type" per status (invalid_request_error for a bad request, an
# unknown URL or a bad key; "requests" for a rate limit; server_error), and this
# server's own for what OpenAI does not answer with (408, 504: timeout)
OPENAI_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
                405: "invalid_request_error", 408: "timeout", 413: "invalid_request_error",
                415: "invalid_request_error", 429: "requests", 500: "server_error", 503: "server_error",
                504: "timeout"}
BODY_TIMEOUT = 3.0


def _bert_dir(root):
    d = os.path.join(root, "bert")
    os.makedirs(d)
    for f in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(FX, "bert", f), d)
    with open(os.path.join(FX, "tokenizers", "bert", "vocab.txt"), encoding="utf-8") as src, \
            open(os.path.join(d, "vocab.txt"), "w", encoding="utf-8") as dst:
        dst.writelines(src.readlines()[:128])
    shutil.copy(os.path.join(FX, "tokenizers", "bert", "tokenizer_config.json"), d)
    return d


def _gpt2_dir(root):
    d = os.path.join(root, "gpt2")
    os.makedirs(d)
    for f in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy(os.path.join(FX, "gpt2", f), d)
    tok = os.path.join(FX, "sampling", "tokenizer")
    for f in os.listdir(tok):
        shutil.copy(os.path.join(tok, f), d)
    # A chat template for /v1/chat/completions, in characters whose ids fit
    # the model's 128-token vocabulary: "(user message)(reply)=".  Hostile
    # where the last message is "a-b" (a namespace holding itself, printed
    # and compared: a stack overflow once) or "a/b" (60 MB strings made in a
    # loop of 100000: hours once): issue 38.
    cfg_path = os.path.join(d, "tokenizer_config.json")
    cfg = json.load(open(cfg_path, encoding="utf-8"))
    cfg["chat_template"] = ("{% if messages[-1]['content'] == 'a-b' %}{% set ns = namespace() %}"
                            "{% set ns.x = ns %}{% if ns|string and ns == ns.x %}{% endif %}{% endif %}"
                            "{% if messages[-1]['content'] == 'a/b' %}{% for i in range(100000) %}"
                            "{% set x = 'a' * 60000000 %}{% endfor %}{% endif %}"
                            "{% for m in messages %}{% if m['role'] == 'system' %}[{{ m['content'] }}]"
                            "{% else %}({{ m['content'] }}){% endif %}{% endfor %}"
                            "{% if add_generation_prompt %}={% endif %}")
    json.dump(cfg, open(cfg_path, "w", encoding="utf-8"))
    return d


def _slow_gpt2_dir(root, width=512, layers=8, positions=1024):
    """A random GPT-2 as large as the one issue 21's tester used (512 wide, 8
    layers, 1024 positions; about 100 MB) with the sampling tokenizer, so that
    a long completion takes seconds.  The end token's embedding row is zero:
    its logit is 0 while the largest of the others is above 0, so greedy
    decoding never ends early."""
    d = os.path.join(root, "slow")
    os.makedirs(d)
    cfg = json.load(open(os.path.join(FX, "gpt2", "config.json")))
    cfg.update(n_embd=width, n_layer=layers, n_positions=positions, n_head=8)
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    shutil.copy(os.path.join(FX, "gpt2", "generation_config.json"), d)
    for f in os.listdir(os.path.join(FX, "sampling", "tokenizer")):
        shutil.copy(os.path.join(FX, "sampling", "tokenizer", f), d)
    write_gpt2_weights(d, np.random.default_rng(21), cfg["vocab_size"], width, layers, positions,
                       zero_rows=(cfg["eos_token_id"],))
    return d


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("serve-models"))
    return {"bert": _bert_dir(root), "gpt2": _gpt2_dir(root), "vit": os.path.join(FX, "vit_cls"),
            "slow": _slow_gpt2_dir(root)}


@pytest.fixture(scope="module")
def ref(dirs):
    models = {k: clformer.Model(v) for k, v in dirs.items() if k != "slow"}
    yield models
    for m in models.values():
        m.close()


@pytest.fixture(scope="module", params=serve_modes.MODES)
def server(request, dirs):
    limits = Limits(max_body_bytes=256 << 10, max_inputs=8, max_new_tokens=24, request_timeout_s=TIMEOUT,
                    body_timeout_s=BODY_TIMEOUT)
    apps = {}
    for name, d in dirs.items():
        # four models share the one device: a quarter of its resource each
        lim = dataclasses.replace(limits, max_new_tokens=1000) if name == "slow" else limits
        apps["/" + name] = ServeOptions(model_dir=d, name=name, replicas=1, replicas_per_device=4, limits=lim)
    with serve_modes.server(request.param, apps, TIMEOUT) as url:
        yield url


def post(server, path, **kw):
    return requests.post(server + path, timeout=TIMEOUT, **kw)


def replica_actors():
    return sorted(a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if "ModelReplica" in a["name"])


def replicas(server):
    """What says which replicas serve the apps: on Ray their actors' names;
    in one process each app's replica (its process, and that it is healthy)."""
    if is_ray():
        return replica_actors()
    out = []
    for app in ("bert", "gpt2", "vit", "slow"):
        h = requests.get(f"{server}/{app}/health", timeout=TIMEOUT)
        pid = requests.get(f"{server}/{app}/stats", timeout=TIMEOUT).json()["replica"]["pid"]
        out.append(f"{app}: {h.status_code} in {pid}")
    return out


def running(app):
    """On Ray, the app's one replica is running (in one process /health says so: replicas())."""
    if is_ray():
        from ray import serve
        st = serve.status().applications[app].deployments["ModelReplica"]
        assert dict(st.replica_states) == {"RUNNING": 1}, (app, st)


# ------------------------------------------------------------ embeddings

TEXTS = ["hello world", "the quick brown fox", "a", "paris is the capital of france"]


def test_embeddings_equal_model_embed(server, ref):
    m = ref["bert"]
    for t in TEXTS:
        r = post(server, "/bert/v1/embeddings", json={"input": t, "model": "bert"})
        assert r.status_code == 200, r.text
        got = np.array(r.json()["data"][0]["embedding"], dtype=np.float32)
        assert np.array_equal(got, m.embed([t])[0]), t
    r = post(server, "/bert/v1/embeddings", json={"input": TEXTS})
    # the replica that answered, by Serve's id (the tail of its actor's name); "local" in one process
    if is_ray():
        assert any(n.endswith("#" + r.headers["X-Clformer-Replica"]) for n in replica_actors())
    else:
        assert r.headers["X-Clformer-Replica"] == "local"
    body = r.json()
    assert [d["index"] for d in body["data"]] == [0, 1, 2, 3] and body["model"] == "bert"
    got = np.array([d["embedding"] for d in body["data"]], dtype=np.float32)
    assert np.array_equal(got, m.embed(TEXTS))
    assert body["usage"]["prompt_tokens"] == sum(len(m.tokenize(t)) for t in TEXTS)
    r = post(server, "/bert/v1/embeddings", json={"input": TEXTS[:2], "encoding_format": "base64"})
    got = np.stack([np.frombuffer(base64.b64decode(d["embedding"]), "<f4") for d in r.json()["data"]])
    assert np.array_equal(got, m.embed(TEXTS[:2]))


def test_embeddings_of_a_decoder_model(server, ref):
    r = post(server, "/gpt2/v1/embeddings", json={"input": ["a+b=c", "(a+b)*c=d"]})
    assert r.status_code == 200, r.text
    got = np.array([d["embedding"] for d in r.json()["data"]], dtype=np.float32)
    assert np.array_equal(got, ref["gpt2"].embed(["a+b=c", "(a+b)*c=d"]))


# ------------------------------------------------------------ completions

PROMPTS = ["a+b=c", "(a+b)*c=d", "x*y", "(c)"]


def greedy_text(m, prompt, n):
    """What a greedy completion must be: Model.generate's new tokens up to
    the end token, decoded; and whether the end token came."""
    ids = m.tokenize(prompt)
    new = m.generate(ids[None, :], max_new_tokens=n, do_sample=False)[0, len(ids):]
    eos = json.load(open(os.path.join(m.path, "generation_config.json")))["eos_token_id"]
    hits = [i for i, t in enumerate(new) if t == eos]
    end = hits[0] + 1 if hits else len(new)
    return m.decode(new[:end]), ("stop" if hits else "length"), end


def sse_texts(r, finish):
    """The text pieces of a completions stream, checking its framing and
    that its last chunk is OpenAI's: no text, finish_reason `finish`."""
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    events = [e for e in r.text.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events), events
    assert events[-1] == "data: [DONE]", events[-1]
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert all(c["object"] == "text_completion" and c["id"] == chunks[0]["id"] for c in chunks)
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * (len(chunks) - 1) + [finish], chunks
    assert chunks[-1]["choices"][0]["text"] == ""
    return [c["choices"][0]["text"] for c in chunks[:-1]]


def test_completions_greedy_equal_generate(server, ref):
    m = ref["gpt2"]
    for p in PROMPTS:
        want, finish, n = greedy_text(m, p, 12)
        r = post(server, "/gpt2/v1/completions", json={"prompt": p, "max_tokens": 12, "temperature": 0})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["choices"][0]["text"] == want, p
        assert body["choices"][0]["finish_reason"] == finish, p
        plen = len(m.tokenize(p))
        # each request's prefix reuse is its own (no `user`): nothing is cached
        assert body["usage"] == {"prompt_tokens": plen, "completion_tokens": n, "total_tokens": plen + n,
                                 "prompt_tokens_details": {"cached_tokens": 0}}
    # "x*y" meets the end token (33) before 12 tokens: the source of the "stop" above
    assert greedy_text(m, "x*y", 12)[1] == "stop"


def test_completions_streamed_equal_generate(server, ref):
    m = ref["gpt2"]
    for p in PROMPTS:
        want, finish, _ = greedy_text(m, p, 12)
        r = post(server, "/gpt2/v1/completions", json={"prompt": p, "max_tokens": 12, "temperature": 0,
                                                       "stream": True})
        pieces = sse_texts(r, finish)
        assert "".join(pieces) == want, p
        assert pieces == list(m.stream(p, max_new_tokens=12, do_sample=False)), p


def test_completions_stop_and_seeded_sampling(server, ref):
    m = ref["gpt2"]
    want = "".join(m.stream("a+b=c", stop=["D"], max_new_tokens=12, do_sample=False))
    assert want == greedy_text(m, "a+b=c", 12)[0].split("D")[0]
    for stream in (False, True):
        r = post(server, "/gpt2/v1/completions", json={"prompt": "a+b=c", "max_tokens": 12, "temperature": 0,
                                                       "stop": "D", "stream": stream})
        got = "".join(sse_texts(r, "stop")) if stream else r.json()["choices"][0]["text"]
        assert got == want
    # sampling with the API's seed 24 is Model.generate's seed 24
    ids = m.tokenize("(a+b)*c=d")
    seq = m.generate(ids[None, :], max_new_tokens=10, do_sample=True, temperature=0.9, seed=24)
    new = seq[0, len(ids):]
    stop_at = [i for i, t in enumerate(new) if t == 33]
    want = m.decode(new[:stop_at[0] + 1] if stop_at else new)
    for stream in (False, True):
        r = post(server, "/gpt2/v1/completions", json={"prompt": "(a+b)*c=d", "max_tokens": 10,
                                                       "temperature": 0.9, "seed": 24, "stream": stream})
        finish = "stop" if stop_at else "length"
        got = "".join(sse_texts(r, finish)) if stream else r.json()["choices"][0]["text"]
        assert got == want
        if not stream:
            assert r.json()["choices"][0]["finish_reason"] == finish


# Issue 43: one meaning for each setting in the three interfaces.  Each case
# is the library's settings by name (clformer.generation_settings()), given
# as they are to `clformer generate --prompt` (--top-k for top_k), to
# Model.stream and to /v1/completions (max_new_tokens as max_tokens): greedy
# by temperature 0 (and with no_repeat_ngram_size, which each takes), seed 0
# sampled, a sampling setting alone (the server's temperature is OpenAI's 1,
# the others' the checkpoint's, else 1: the same), and every warper with a
# fixed seed.
SAME_SETTINGS = [
    {"temperature": 0, "max_new_tokens": 12},
    {"temperature": 0, "no_repeat_ngram_size": 2, "max_new_tokens": 12},
    {"temperature": 0.9, "seed": 0, "max_new_tokens": 12},
    {"top_k": 0, "seed": 0, "max_new_tokens": 12},
    {"temperature": 0.7, "top_k": 5, "top_p": 0.9, "min_p": 0.05, "repetition_penalty": 1.2, "seed": 24,
     "max_new_tokens": 12},
]


@pytest.mark.parametrize("settings", SAME_SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_same_settings_same_tokens_in_cli_python_and_server(server, ref, dirs, cli, settings):
    names = {r["name"] for r in clformer.generation_settings()}
    assert set(settings) <= names  # the cases speak the library's names
    m = ref["gpt2"]
    argv = ["generate", dirs["gpt2"]]
    for k, v in settings.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    for prompt in ("a+b=c", "(a+b)*c=d"):
        stream = m.stream(prompt, **settings)
        python_text = "".join(stream)
        assert stream.tokens, prompt  # something was generated
        got_cli = cli(*argv, "--prompt", prompt).stdout
        assert got_cli == prompt + python_text + "\n", (prompt, got_cli, python_text)
        body = {("max_tokens" if k == "max_new_tokens" else k): v for k, v in settings.items()}
        r = post(server, "/gpt2/v1/completions", json={"prompt": prompt, **body})
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["text"] == python_text, (prompt, settings)
    if settings.get("temperature") == 0:  # temperature 0 is do_sample=False: the same tokens
        kw = {k: v for k, v in settings.items() if k != "temperature"}
        a, b = m.stream("a+b=c", **settings), m.stream("a+b=c", do_sample=False, **kw)
        assert "".join(a) == "".join(b) and a.tokens == b.tokens


# ------------------------------------------------------------ /run and classify

def test_run_equal_model_call(server, ref):
    names = ("input_ids", "attention_mask", "token_type_ids")
    inputs = {n: np.load(os.path.join(FX, "bert", f"padded.{n}.npy")) for n in names}
    r = post(server, "/bert/run", json={"inputs": {k: v.tolist() for k, v in inputs.items()}})
    assert r.status_code == 200, r.text
    body = r.json()
    want = ref["bert"](**inputs)
    assert sorted(body["outputs"]) == sorted(want)
    for k, v in want.items():
        assert body["shapes"][k] == list(v.shape) and body["dtypes"][k] == str(v.dtype)
        assert np.array_equal(np.array(body["outputs"][k], dtype=v.dtype), v), k
    pv = np.load(os.path.join(FX, "vit_cls", "batch3.pixel_values.npy"))
    r = post(server, "/vit/run", json={"inputs": {"pixel_values": pv.tolist()}, "outputs": ["logits"]})
    assert r.status_code == 200, r.text
    want = ref["vit"].run({"pixel_values": pv}, ["logits"])["logits"]
    assert np.array_equal(np.array(r.json()["outputs"]["logits"], dtype=np.float32), want)


def test_classify_equal_model_classify(server, ref):
    for name in ("test.png", "test.jpg"):
        raw = open(os.path.join(FX, "images", name), "rb").read()
        want = ref["vit"].classify(raw, top_k=3)[0]
        ctype = "image/png" if name.endswith("png") else "image/jpeg"
        r = post(server, "/vit/v1/classify?top_k=3", data=raw, headers={"Content-Type": ctype})
        assert r.status_code == 200, r.text
        got = [(x["label"], x["score"]) for x in r.json()["data"][0]["labels"]]
        assert got == want, name
    raws = [open(os.path.join(FX, "images", n), "rb").read() for n in ("test.png", "test.jpg")]
    r = post(server, "/vit/v1/classify", json={"images": [base64.b64encode(b).decode() for b in raws]})
    got = [[(x["label"], x["score"]) for x in d["labels"]] for d in r.json()["data"]]
    assert got == [ref["vit"].classify(b, top_k=5)[0] for b in raws]


# ------------------------------------------------------------ refusals

def _bad_requests(ref):
    long_text = " ".join(["hello"] * 40)  # past the config's max_position_embeddings, 32
    n_long = len(ref["bert"].tokenize(long_text))
    assert n_long > 32
    not_image = open(os.path.join(FX, "images", "not_image.png"), "rb").read()
    png = open(os.path.join(FX, "images", "test.png"), "rb").read()
    j = {"Content-Type": "application/json"}
    return [
        # (path, request kwargs, status, words of the message)
        ("/bert/v1/embeddings", {"data": b"{bad", "headers": j}, 400, "malformed JSON"),
        ("/bert/v1/embeddings", {"data": b"[1]", "headers": j}, 400, "must be a JSON object"),
        ("/bert/v1/embeddings", {"json": {"input": "x" * (300 << 10)}}, 413, "at most 262144"),
        ("/bert/v1/embeddings", {"json": {"inputs": "x"}}, 400, "unknown field 'inputs'"),
        ("/bert/v1/embeddings", {"json": {"input": "x", "model": "gpt-4"}}, 404, "'gpt-4' is not served here"),
        ("/bert/v1/embeddings", {"json": {"input": long_text}}, 400,
         f"input[0] is {n_long} tokens long; this model takes at most 32"),
        ("/bert/v1/embeddings", {"json": {"input": ["a"] * 9}}, 400, "at most 8 per request"),
        ("/bert/v1/completions", {"json": {"prompt": "a"}}, 400, "does not serve completions"),
        ("/gpt2/v1/completions", {"json": {"prompt": "a+b", "max_tokens": 30}}, 400, "max_tokens must be in [1, 24]"),
        ("/gpt2/v1/completions", {"json": {"prompt": "(a+b)*c=d" * 3, "max_tokens": 20}}, 400,
         "past this model's context of 32 tokens"),
        ("/gpt2/v1/completions", {"json": {"prompt": "(a+b)*c=d" * 3, "max_tokens": 20, "stream": True}}, 400,
         "past this model's context of 32 tokens"),
        ("/gpt2/v1/completions", {"json": {"prompt": "hello", "max_tokens": 2}}, 400,
         "past this model's vocabulary of 128"),
        ("/gpt2/v1/completions", {"json": {"prompt": "a", "n": 9}}, 400, "n must be in [1, 8]"),
        ("/bert/run", {"json": {"inputs": {"ids": [[1]]}}}, 400, "unknown input 'ids'; this model takes input_ids"),
        ("/bert/run", {"json": {"inputs": {"input_ids": [[1, 2], [3]]}}}, 400, "ragged"),
        ("/bert/run", {"json": {"inputs": {"input_ids": [[[1, 2]]]}}}, 400, "CLF_E_SHAPE"),
        ("/bert/run", {"json": {"inputs": {"input_ids": [[1, 500]]}}}, 400, "outside the table of 128"),
        ("/bert/run", {"json": {"inputs": {"input_ids": [list(range(40))]}}}, 400, "CLF_E_"),
        ("/bert/run", {"json": {"inputs": {"input_ids": [[1]]}, "outputs": ["logits"]}}, 400,
         "unknown output 'logits'"),
        ("/vit/run", {"json": {"inputs": {"pixel_values": [[[[0.5] * 32] * 32] * 2]}}}, 400, "CLF_E_SHAPE"),
        ("/vit/v1/classify", {"data": not_image, "headers": {"Content-Type": "image/png"}}, 400,
         "not a PNG or JPEG file"),
        ("/vit/v1/classify", {"data": png[:100], "headers": {"Content-Type": "image/png"}}, 400, "CLF_E_"),
        ("/vit/v1/classify", {"data": b"", "headers": {"Content-Type": "image/png"}}, 400, "body is empty"),
        ("/vit/v1/classify?top_k=0", {"data": png, "headers": {"Content-Type": "image/png"}}, 400,
         "top_k must be in [1, 1000]"),
        ("/vit/v1/classify", {"data": png, "headers": {"Content-Type": "text/plain"}}, 415, "Content-Type"),
        ("/gpt2/v1/classify", {"data": png, "headers": {"Content-Type": "image/png"}}, 400,
         "does not serve image classification"),
        ("/bert/v1/nothing", {"json": {}}, 404, "no such endpoint"),
    ]


def test_bad_requests_get_4xx_and_replicas_live_on(server, dirs, ref):
    before = replicas(server)
    assert len(before) == 4 and (is_ray() or all(": 200 in" in x for x in before)), before
    for path, kw, status, words in _bad_requests(ref):
        r = post(server, path, **kw)
        assert r.status_code == status, (path, r.status_code, r.text)
        err = r.json()["error"]
        assert words in err["message"] and err["type"] == OPENAI_TYPES[status], (path, err)
        assert err["code"] is None or isinstance(err["code"], str), (path, err)  # OpenAI's: a string, never the status
    r = requests.get(server + "/bert/v1/embeddings", timeout=TIMEOUT)
    assert r.status_code == 405 and "GET is not allowed" in r.json()["error"]["message"]
    # the refusals killed nothing: the same replicas, running, answer correctly
    assert replicas(server) == before
    for app in ("bert", "gpt2", "vit", "slow"):
        running(app)
    r = post(server, "/bert/v1/embeddings", json={"input": "hello world"})
    assert np.array_equal(np.array(r.json()["data"][0]["embedding"], dtype=np.float32),
                          ref["bert"].embed(["hello world"])[0])


# ------------------------------------------------------------ issue 21: hostile clients

def _error(r, status, words):
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"] == "application/json", r.headers
    err = r.json()["error"]
    assert words in err["message"] and err["type"] == OPENAI_TYPES[status], err
    assert err["code"] is None or isinstance(err["code"], str), err
    return err


def test_classify_never_opens_a_server_path(server, ref):
    """Item 1: a JSON string was taken as an image path on the server: the
    answer told which files exist, a server PNG was classified, and a
    directory made a 500 that replaced the replica.  Now no string is a path:
    an image model refuses texts, and base64 must decode to a PNG/JPEG file."""
    before = replicas(server)
    png_path = os.path.join(FX, "images", "test.png")
    answers = set()
    for s in ("/etc/passwd", "/nonexistent", "/tmp", "/dev/zero", png_path):
        r = post(server, "/vit/v1/classify", json={"input": s})
        answers.add(_error(r, 400, "does not serve text classification")["message"])
        r = post(server, "/vit/v1/classify", json={"images": [s]})  # "/tmp" is valid base64, "/etc/passwd" not
        assert _error(r, 400, "images[0] is not")["message"] in (
            "images[0] is not valid base64 (images come as base64 PNG/JPEG data; a path is not taken)",
            "images[0] is not a PNG or JPEG file (its first bytes are neither signature)")
        r = post(server, "/vit/v1/classify", json={"images": [base64.b64encode(s.encode()).decode()]})
        _error(r, 400, "images[0] is not a PNG or JPEG file")
    assert len(answers) == 1  # the same words whether the file exists or not
    assert replicas(server) == before


def test_huge_integer_literal_is_400_everywhere(server):
    """Item 3: an integer of more than 4,300 digits raised ValueError in the
    JSON parser: a plain-text 500 on every POST endpoint."""
    big = b"1" * 5000
    for path in ("/bert/v1/embeddings", "/gpt2/v1/completions", "/bert/run", "/vit/v1/classify"):
        r = post(server, path, data=b'{"top_k": ' + big + b', "max_tokens": ' + big + b"}",
                 headers={"Content-Type": "application/json"})
        _error(r, 400, "unreadable JSON")


# ------------------------------------------------------------ chat completions

def chat_chunks(r, finish):
    """The content pieces of a chat completions stream, checking its
    framing: a first chunk naming the role, content deltas, a last chunk
    with an empty delta and finish_reason `finish`, then [DONE]."""
    assert r.status_code == 200, r.text
    events = [e for e in r.text.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]", events
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"] for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * (len(chunks) - 1) + [finish], chunks
    assert chunks[-1]["choices"][0]["delta"] == {}
    return [c["choices"][0]["delta"]["content"] for c in chunks[1:-1]]


CHATS = [[{"role": "user", "content": "a+b"}],
         [{"role": "system", "content": "c"}, {"role": "user", "content": "a*b"}],
         [{"role": "user", "content": "a+b"}, {"role": "assistant", "content": "c"}, {"role": "user", "content": "x*y"}]]


def test_chat_completions_equal_model_chat(server, ref):
    m = ref["gpt2"]
    for msgs in CHATS:
        want = m.chat(msgs, max_new_tokens=12, do_sample=False)
        r = post(server, "/gpt2/v1/chat/completions", json={"messages": msgs, "max_tokens": 12, "temperature": 0})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
        assert body["choices"][0]["message"] == {"role": "assistant", "content": str(want)}, msgs
        assert body["choices"][0]["finish_reason"] == want.finish_reason
        assert body["usage"] == {"prompt_tokens": want.prompt_tokens, "completion_tokens": want.completion_tokens,
                                 "total_tokens": want.prompt_tokens + want.completion_tokens,
                                 "prompt_tokens_details": {"cached_tokens": 0}}
        r = post(server, "/gpt2/v1/chat/completions", json={"messages": msgs, "max_tokens": 12, "temperature": 0,
                                                            "stream": True})
        pieces = chat_chunks(r, want.finish_reason)
        assert "".join(pieces) == want
        assert pieces == list(m.chat_stream(msgs, max_new_tokens=12, do_sample=False))
    # a stop string ends the reply before it
    want = m.chat(CHATS[0], max_new_tokens=12, do_sample=False)
    stop = want[1:3]
    r = post(server, "/gpt2/v1/chat/completions", json={"messages": CHATS[0], "max_tokens": 12, "temperature": 0,
                                                        "stop": stop})
    assert r.json()["choices"][0]["message"]["content"] == want[:want.index(stop)]
    assert r.json()["choices"][0]["finish_reason"] == "stop"


def test_hostile_template_keeps_the_replica(server, ref):
    """A template that prints a cycle or bombs the render on a client's
    text: the cycle renders (as Jinja2 does), the bomb is a 400 naming the
    budget within a second, and the replica is the same one afterwards."""
    before = replicas(server)
    msgs = [{"role": "user", "content": "a-b"}]
    want = ref["gpt2"].chat(msgs, max_new_tokens=4, do_sample=False)
    r = post(server, "/gpt2/v1/chat/completions", json={"messages": msgs, "max_tokens": 4, "temperature": 0})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == str(want)
    t0 = time.monotonic()
    r = post(server, "/gpt2/v1/chat/completions", json={"messages": [{"role": "user", "content": "a/b"}],
                                                        "max_tokens": 4})
    assert time.monotonic() - t0 < 5, time.monotonic() - t0
    err = _error(r, 400, "budget")
    assert "CLF_E_LIMIT" in err["message"], err
    r = post(server, "/gpt2/v1/chat/completions", json={"messages": msgs, "max_tokens": 4, "temperature": 0})
    assert r.status_code == 200, r.text
    assert replicas(server) == before
    running("gpt2")


def test_chat_completions_refusals(server):
    msgs = CHATS[0]
    for body, status, words in [
            ({}, 400, "messages is missing"),
            ({"messages": []}, 400, "non-empty array"),
            ({"messages": [{"role": "robot", "content": "x"}]}, 400, "role must be one of"),
            ({"messages": [{"role": "tool", "content": "x", "tool_call_id": "1"}]}, 400, "tool"),
            ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}, 400,
             "only text parts"),
            ({"messages": msgs, "tools": [{"type": "function"}]}, 400, 'tools[0] must be {"type": "function"'),
            ({"messages": msgs, "n": 9}, 400, "n must be in [1, 8]"),
            ({"messages": msgs, "max_tokens": 25}, 400, "max_tokens must be in [1, 24]"),
            ({"messages": [{"role": "user", "content": "hello"}]}, 400, "past this model's vocabulary"),
            ({"messages": msgs, "model": "other"}, 404, "is not served here")]:
        for stream in (False, True):
            r = post(server, "/gpt2/v1/chat/completions", json=dict(body, stream=stream))
            _error(r, status, words)
    # text parts are joined; a model without a chat template says so
    r = post(server, "/gpt2/v1/chat/completions",
             json={"messages": [{"role": "user", "content": [{"type": "text", "text": "a+"}, {"type": "text",
                                                                                          "text": "b"}]}],
                   "max_tokens": 4, "temperature": 0})
    assert r.status_code == 200, r.text
    _error(post(server, "/bert/v1/chat/completions", json={"messages": msgs}), 400, "does not serve chat")


def test_stream_refusals_are_statuses(server):
    """Item 4: with stream true, a prompt outside the vocabulary or a stop
    string with a lone surrogate answered 200 and then an error event
    without [DONE]; without streaming the bad stop string passed."""
    for stream in (True, False):
        r = post(server, "/gpt2/v1/completions", json={"prompt": "hello", "max_tokens": 2, "stream": stream})
        _error(r, 400, "past this model's vocabulary of 128")
        r = post(server, "/gpt2/v1/completions", data=b'{"prompt": "a+b", "max_tokens": 2, "stop": ["\\ud800"], '
                 b'"stream": ' + (b"true" if stream else b"false") + b"}", headers={"Content-Type": "application/json"})
        _error(r, 400, "stop[0] is not valid Unicode")


@pytest.mark.parametrize("temperature", [1e-300, 1e-45, 5e-324, 1e-40])
def test_tiny_temperatures_are_greedy(server, ref, temperature):
    """Item 5: a temperature below ~1e-38 became 0 as a float and sampling
    picked a low id ("!" where greedy gives "CENN"); its limit is greedy."""
    want, finish, _ = greedy_text(ref["gpt2"], "a+b", 4)
    r = post(server, "/gpt2/v1/completions", json={"prompt": "a+b", "temperature": temperature, "seed": 1,
                                                   "max_tokens": 4})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["text"] == want
    r = post(server, "/gpt2/v1/completions", json={"prompt": "a+b", "temperature": 0.7, "top_p": 1e-300,
                                                   "seed": 1, "max_tokens": 4})
    assert r.json()["choices"][0]["text"] == want  # the nucleus of one


def test_http_hygiene(server):
    """Item 9: no Host-derived redirect, Allow on 405, JSON endpoints take
    application/json only (text/plain and forms are what a browser sends
    cross-site without a preflight)."""
    r = requests.get(server + "/bert/health/", headers={"Host": "evil.example"}, allow_redirects=False,
                     timeout=TIMEOUT)
    assert r.status_code == 404 and "location" not in r.headers, (r.status_code, r.headers)
    r = requests.get(server + "/bert/v1/embeddings", timeout=TIMEOUT)
    assert r.status_code == 405 and r.headers.get("allow") == "POST", r.headers
    for path in ("/bert/v1/embeddings", "/gpt2/v1/completions", "/bert/run"):
        r = post(server, path, data=json.dumps({"input": "a"}), headers={"Content-Type": "text/plain"})
        _error(r, 415, "takes application/json")
        r = post(server, path, data={"input": "a"})  # a form
        _error(r, 415, "takes application/json")
    r = post(server, "/vit/v1/classify", data=b"\x89PNG\r\n\x1a\n", headers={"Content-Type": ""})
    _error(r, 415, "Content-Type")


def test_slow_body_is_cut(server):
    """Item 9: a body sent at 1 byte/s held its connection (and a place at
    the ingress) indefinitely; past Limits.body_timeout_s it is answered 408
    and the connection is closed."""
    host, port = server.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as c:
        c.sendall(b"POST /bert/v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000\r\n\r\n{")
        t0, got = time.monotonic(), b""
        c.settimeout(0.5)
        while time.monotonic() - t0 < BODY_TIMEOUT + 20:
            try:
                data = c.recv(65536)
            except socket.timeout:
                c.sendall(b" ")  # a byte every half second
                continue
            except ConnectionError:
                break
            if not data:
                break
            got += data
        took = time.monotonic() - t0
    assert got.startswith(b"HTTP/1.1 408"), got[:200]
    assert b"did not arrive within 3 s" in got
    print(f"slow body: 408 and closed after {took:.1f} s")
    assert took < BODY_TIMEOUT + 10


def test_abandoned_completion_is_cancelled(server):
    """Item 9: a non-streamed completion whose client went away generated to
    its end (five abandoned 500-token requests delayed the next by 17 s).
    A 1000-token request on the larger model is abandoned after 1 s; the
    next request does not wait for it, and the replica counts it cancelled."""
    t0 = time.monotonic()
    r = post(server, "/slow/v1/completions", json={"prompt": "a+b", "max_tokens": 40, "temperature": 0})
    per_token = (time.monotonic() - t0) / 40
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 40, r.text
    print(f"slow model: {per_token * 1e3:.1f} ms/token over HTTP")
    assert per_token * 1000 > 3.0, "the model is too fast for this test to tell anything"
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.post(server + "/slow/v1/completions", json={"prompt": "a+b", "max_tokens": 1000, "temperature": 0},
                      timeout=1.0)
    t1 = time.monotonic()
    r = post(server, "/slow/v1/completions", json={"prompt": "(a)", "max_tokens": 4, "temperature": 0})
    waited = time.monotonic() - t1
    assert r.status_code == 200, r.text
    print(f"the request after the abandoned one: {waited:.2f} s (the rest of that one: "
          f"{per_token * 1000 - 1:.1f} s)")
    assert waited < min(3.0, per_token * 1000 / 2)
    stats = requests.get(server + "/slow/stats", timeout=TIMEOUT).json()
    assert stats["replica"]["cancelled_generations"] == 1, stats


@pytest.mark.parametrize("server", ["ray"], indirect=True)  # Ray's alone: one process has one replica, itself
def test_killed_replica_is_replaced(server, ref, fx):
    """ray.kill of the vit app's only replica: the request sent right after
    is answered, either by the replacement (the ingress retried) or with 503
    and Retry-After; Ray then brings a new replica up, which answers as
    Model.classify does."""
    assert is_ray()
    from ray import serve
    png = open(os.path.join(fx, "images", "test.png"), "rb").read()
    want = [[(lab, p) for lab, p in ref["vit"].classify(png, top_k=5)[0]]]
    victim = [n for n in replica_actors() if n.startswith("SERVE_REPLICA::vit#")]
    assert len(victim) == 1
    ray.kill(ray.get_actor(victim[0], namespace="serve"), no_restart=True)
    r = post(server, "/vit/v1/classify", data=png, headers={"Content-Type": "image/png"})
    print(f"the request after the kill: {r.status_code} in {r.elapsed.total_seconds():.1f} s")
    if r.status_code == 503:
        assert "no model replica could take the request" in r.json()["error"]["message"]
        assert r.headers["Retry-After"] == "1"
    else:
        assert r.status_code == 200, r.text
        assert [[(x["label"], x["score"]) for x in r.json()["data"][0]["labels"]]] == want
    t0 = time.monotonic()
    while time.monotonic() - t0 < 60:
        names = [n for n in replica_actors() if n.startswith("SERVE_REPLICA::vit#")]
        st = serve.status().applications["vit"].deployments["ModelReplica"]
        if names and victim[0] not in names and dict(st.replica_states) == {"RUNNING": 1}:
            break
        time.sleep(0.5)
    else:
        pytest.fail("Ray did not replace the killed replica within 60 s")
    r = post(server, "/vit/v1/classify", data=png, headers={"Content-Type": "image/png"})
    assert r.status_code == 200, r.text
    assert [[(x["label"], x["score"]) for x in r.json()["data"][0]["labels"]]] == want
