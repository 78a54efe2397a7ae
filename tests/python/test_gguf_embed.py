"""An embedding GGUF (llama.cpp's "bert", tests/fixtures/gguf_models/bert_embed,
made by tools/fixtures/make_gguf_bert_fixture.py of tests/fixtures/bert and
the 128-token vocabulary test_cli_equal's bert_embed_dir gives it) through
Model.embed, `clformer embed` and the server's /v1/embeddings: the
directory's vectors to 1e-5, the pooling the file states, and a file that
states none refused with the pooling named."""
import os

import numpy as np
import pytest

import clformer
from conftest import FIXTURES
from test_cli_equal import bert_embed_dir  # noqa: F401 - the fixture

GGUF = os.path.join(FIXTURES, "gguf_models", "bert_embed", "model.gguf")
TEXTS = ["hello world!", "The quick brown fox, jumping.", "a", "Héllo, WORLD... 123"]


def _with_pooling(src, dst, value):
    """A copy of src with bert.pooling_type (a u32 after its key and type) set to value."""
    data = bytearray(open(src, "rb").read())
    at = data.index(b"bert.pooling_type") + len("bert.pooling_type")
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
