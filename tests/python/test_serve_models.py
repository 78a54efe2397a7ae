"""Models served that the package's own tests (tools/python-tests.sh, no
server installed) load directly: an embedding GGUF's vectors through
/v1/embeddings (test_gguf_embed.py: bert, and nomic-bert against llama.cpp's) and a chat template from a file through
`--chat-template` (test_chat_template_file.py), in one process.  Run by
tools/serve-test.sh, where the server's packages are installed."""
import numpy as np
import requests

import clformer
import serve_modes
from clformer.serve.options import ServeOptions
from test_chat_template_file import GGUF as CHAT_GGUF, HI, RENDERED, _source
from test_gguf_embed import GGUF as EMBED_GGUF, NOMIC, TEXTS, _with_pooling, close_to, nomic_expected


def test_embedding_gguf_served(tmp_path):
    none = str(_with_pooling(EMBED_GGUF, tmp_path / "none.gguf", 0))
    apps = {"/e": ServeOptions(model_dir=EMBED_GGUF, name="e", replicas=1),
            "/n": ServeOptions(model_dir=none, name="n", replicas=1)}
    with clformer.Model(EMBED_GGUF) as g, serve_modes.one_process(apps) as url:
        r = requests.post(url + "/e/v1/embeddings", json={"input": TEXTS}, timeout=120)
        assert r.status_code == 200, r.text
        got = np.array([d["embedding"] for d in r.json()["data"]], dtype=np.float32)
        assert np.array_equal(got, g.embed(TEXTS))
        r = requests.post(url + "/n/v1/embeddings", json={"input": "hello"}, timeout=120)
        assert r.status_code == 400 and "states pooling 'none'" in r.json()["error"]["message"], r.text


def test_nomic_gguf_served():
    e = nomic_expected()
    apps = {"/m": ServeOptions(model_dir=NOMIC, name="m", replicas=1)}
    with clformer.Model(NOMIC) as g, serve_modes.one_process(apps) as url:
        r = requests.post(url + "/m/v1/embeddings", json={"input": e["texts"]}, timeout=120)
        assert r.status_code == 200, r.text
        got = np.array([d["embedding"] for d in r.json()["data"]], dtype=np.float32)
        assert np.array_equal(got, g.embed(e["texts"]))
        assert close_to(got, e["pooled"]["mean"], e["tolerance"])


def test_chat_template_file_served():
    apps = {"/t": ServeOptions(model_dir=CHAT_GGUF, name="t", chat_template=_source()),
            "/n": ServeOptions(model_dir=CHAT_GGUF, name="n")}
    with clformer.Model(CHAT_GGUF) as m, serve_modes.one_process(apps) as url:
        body = {"messages": HI, "max_tokens": 3, "temperature": 0}
        r = requests.post(url + "/t/v1/chat/completions", json=body, timeout=120)
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["prompt_tokens"] == len(m.tokenize(RENDERED, add_special_tokens=False))
        r = requests.post(url + "/n/v1/chat/completions", json=body, timeout=120)
        assert r.status_code == 400 and "no chat template" in r.json()["error"]["message"], r.text
