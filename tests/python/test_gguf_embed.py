"""An embedding GGUF (llama.cpp's "bert", tests/fixtures/gguf_models/bert_embed,
made by tools/fixtures/make_gguf_bert_fixture.py of tests/fixtures/bert and
the 128-token vocabulary test_cli_equal's bert_embed_dir gives it) through
Model.embed, `clformer embed` and the server's /v1/embeddings: the
directory's vectors to 1e-5, the pooling the file states, and a file that
states none refused with the pooling named.  llama.cpp's "nomic-bert"
(tests/fixtures/gguf_models/nomic_embed, tools/fixtures/make_gguf_nomic_fixture.py):
llama.cpp's own hidden states, ids and vectors (expected.json) to its
tolerance, 1e-4 of each output's largest magnitude."""
import json
import os

import numpy as np
import pytest

import clformer
from conftest import FIXTURES
from test_cli_equal import bert_embed_dir  # noqa: F401 - the fixture

GGUF = os.path.join(FIXTURES, "gguf_models", "bert_embed", "model.gguf")
TEXTS = ["hello world!", "The quick brown fox, jumping.", "a", "Héllo, WORLD... 123"]
NOMIC_DIR = os.path.join(FIXTURES, "gguf_models", "nomic_embed")
NOMIC = os.path.join(NOMIC_DIR, "model.gguf")


def nomic_expected():
    """llama.cpp's outputs for the nomic-bert fixture (make_gguf_nomic_fixture.py)."""
    with open(os.path.join(NOMIC_DIR, "expected.json")) as f:
        return json.load(f)


def close_to(got, want, tol):
    """Within tol of each row's largest magnitude (at least 1), as the C suite's TH_CLOSE."""
    want = np.asarray(want, dtype=np.float64)
    scale = np.maximum(np.abs(want).max(axis=-1, keepdims=True), 1.0)
    return float((np.abs(np.asarray(got, dtype=np.float64) - want) / scale).max()) <= tol


def _with_pooling(src, dst, value, key=b"bert.pooling_type"):
    """A copy of src with key (a u32 after the key and its type) set to value."""
    data = bytearray(open(src, "rb").read())
    at = data.index(key) + len(key)
    data[at + 4:at + 8] = int(value).to_bytes(4, "little")
    open(dst, "wb").write(bytes(data))
    return dst


def test_same_vectors_as_directory(bert_embed_dir):  # noqa: F811
    with clformer.Model(bert_embed_dir) as hf, clformer.Model(GGUF) as g:
        assert (g.model_type, g.pooling, hf.pooling) == ("bert", "mean", "mean")
        for t in TEXTS:
            assert list(g.tokenize(t)) == list(hf.tokenize(t)), t
        a, b = hf.embed(TEXTS), g.embed(TEXTS)
        assert b.shape == (len(TEXTS), 32) and b.dtype == np.float32
        assert float(np.abs(a - b).max()) <= 1e-5
        assert np.allclose(np.linalg.norm(b, axis=1), 1, atol=1e-5)


def test_cls_pooling_and_none_refused(tmp_path, bert_embed_dir):  # noqa: F811
    with clformer.Model(bert_embed_dir) as hf, clformer.Model(_with_pooling(GGUF, tmp_path / "cls.gguf", 2)) as g:
        assert g.pooling == "cls"
        for t in TEXTS:
            ids = hf.tokenize(t)  # [CLS] .. [SEP]: the first row of the text's hidden states
            h = hf(input_ids=np.array([ids]), attention_mask=np.ones((1, len(ids)), np.int64),
                   token_type_ids=np.zeros((1, len(ids)), np.int64))["last_hidden_state"][0, 0]
            assert float(np.abs(g.embed(t)[0] - h / np.linalg.norm(h)).max()) <= 1e-5, t
    with clformer.Model(_with_pooling(GGUF, tmp_path / "none.gguf", 0)) as g:
        assert g.pooling == "none"
        with pytest.raises(clformer.UnsupportedError, match='pooling "none".*a vector per token'):
            g.embed("hello")


def test_cli_prints_the_pooling(cli):
    r = cli("embed", GGUF, "hello world", "the cat")
    assert r.stdout.splitlines()[0] == "cosine similarity of mean-pooled embeddings (bert, dim 32):"
    r = cli("embed", NOMIC, "hello world", "the cat")
    assert r.stdout.splitlines()[0] == "cosine similarity of mean-pooled embeddings (nomic-bert, dim 64):"


def test_nomic_matches_llamacpp():
    e = nomic_expected()
    with clformer.Model(NOMIC) as g:
        assert (g.model_type, g.pooling) == ("nomic-bert", "mean")
        for ids, hidden in zip(e["ids"], e["hidden"]):
            h = g(input_ids=np.array([ids]), attention_mask=np.ones((1, len(ids)), np.int64))["last_hidden_state"][0]
            assert close_to(h, hidden, e["tolerance"]), ids
        assert [list(g.tokenize(t)) for t in e["texts"]] == e["text_ids"]
        v = g.embed(e["texts"])
        assert v.shape == (len(e["texts"]), 64) and close_to(v, e["pooled"]["mean"], e["tolerance"])


@pytest.mark.parametrize("value,how", [(2, "cls"), (3, "last")])
def test_nomic_cls_and_last(tmp_path, value, how):
    e = nomic_expected()
    path = _with_pooling(NOMIC, tmp_path / f"{how}.gguf", value, b"nomic-bert.pooling_type")
    with clformer.Model(path) as g:
        assert g.pooling == how
        assert close_to(g.embed(e["texts"]), e["pooled"][how], e["tolerance"])
