"""test_cli_equal.py - the package gives what the clformer command line
gives, bit for bit where it writes numbers (.npy from `run` and
`generate --out`) and character for character where it prints them
(`generate --prompt`, `embed`, `classify`).  The program is the one the
wheel carries (built from the same objects as the package's library)."""
import os
import shutil

import numpy as np
import pytest

import clformer
from conftest import require_device

pytestmark = pytest.mark.device


def same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("fixture,case", [("bert", "padded"), ("gpt2", "left_padded"), ("marian", "padded"),
                                          ("vit_cls", "batch3"), ("llama_gqa3", "right_padded"),
                                          ("vit_mae", "pretraining"), ("bert_qa", "ids_only")])
def test_run_equals_cli_npy(model_of, fx, cli, tmp_path, fixture, case):
    import json
    with open(os.path.join(fx, fixture, "cases.json")) as f:
        c = next(x for x in json.load(f)["cases"] if x["name"] == case)
    args = ["run", os.path.join(fx, fixture)]
    for name, file in c["inputs"].items():
        args += ["--in", f"{name}={os.path.join(fx, fixture, file)}"]
    for name in c["outputs"]:
        args += ["--out", f"{name}={tmp_path / (name + '.npy')}"]
    cli(*args)
    m = model_of(fixture)
    got = m.run({k: np.load(os.path.join(fx, fixture, v)) for k, v in c["inputs"].items()}, list(c["outputs"]))
    for name in c["outputs"]:
        assert same_bits(got[name], np.load(tmp_path / (name + ".npy"))), name


@pytest.mark.parametrize("fixture,case,flags,kwargs", [
    ("gpt2", "greedy_b2_left_padded", ["--max-new-tokens", "8"], {"max_new_tokens": 8}),
    ("marian", "beam3", ["--num-beams", "3", "--max-new-tokens", "8"], {"num_beams": 3, "max_new_tokens": 8}),
    ("gpt2", "greedy_b1", ["--do-sample", "--seed", "24", "--max-new-tokens", "12", "--top-k", "0", "--top-p",
                           "0.9", "--temperature", "0.7"],
     {"do_sample": True, "seed": 24, "max_new_tokens": 12, "top_k": 0, "top_p": 0.9, "temperature": 0.7}),
    # issue 43: seed 0 is a seed, a sampling setting alone samples, temperature 0 is greedy; the server
    # passes its seed and temperature 0 (do_sample False) to Model.generate as they are (test_serve_api)
    ("gpt2", "greedy_b1", ["--seed", "0", "--top-k", "0", "--max-new-tokens", "12"],
     {"seed": 0, "top_k": 0, "max_new_tokens": 12}),
    ("gpt2", "greedy_b1", ["--temperature", "0", "--max-new-tokens", "8"], {"temperature": 0, "max_new_tokens": 8}),
    ("llama_gqa3", "greedy_b1", ["--repetition-penalty", "1.3", "--no-repeat-ngram-size", "2",
                                 "--max-new-tokens", "6"],
     {"repetition_penalty": 1.3, "no_repeat_ngram_size": 2, "max_new_tokens": 6}),
])
def test_generate_equals_cli(model_of, fx, cli, tmp_path, fixture, case, flags, kwargs):
    d = os.path.join(fx, fixture)
    ids = os.path.join(d, f"{case}.input_ids.npy")
    mask = os.path.join(d, f"{case}.attention_mask.npy")
    args = ["generate", d, "--in", f"input_ids={ids}", "--out", f"sequences={tmp_path / 's.npy'}", *flags]
    if os.path.exists(mask):
        args += ["--in", f"attention_mask={mask}"]
    cli(*args)
    got = model_of(fixture).generate(np.load(ids), np.load(mask) if os.path.exists(mask) else None, **kwargs)
    assert same_bits(got, np.load(tmp_path / "s.npy"))


@pytest.fixture(scope="module")
def gpt2_sampling_dir(fx, tmp_path_factory):
    """The tiny GPT-2 with the tokenizer of tests/fixtures/sampling/tokenizer,
    whose greedy continuation of "(a+b)*c=d" splits U+0139 across two tokens
    (tools/fixtures/make_sampling_fixtures.py; test_cli.c's streaming test)."""
    require_device()
    d = tmp_path_factory.mktemp("gpt2tok")
    for f in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy(os.path.join(fx, "gpt2", f), d)
    tok = os.path.join(fx, "sampling", "tokenizer")
    for f in os.listdir(tok):
        shutil.copy(os.path.join(tok, f), d)
    with clformer.Model(d) as m:
        yield str(d), m


PROMPT = "(a+b)*c=d"


@pytest.mark.parametrize("flags,kwargs", [
    ([], {}),
    (["--stop", "zzzz", "--stop", "N"], {"stop": ["zzzz", "N"]}),
    (["--do-sample", "--seed", "24"], {"do_sample": True, "seed": 24}),
    (["--greedy"], {"do_sample": False}),
    (["--num-beams", "2"], {"num_beams": 2}),
])
def test_stream_equals_cli_prompt(gpt2_sampling_dir, cli, flags, kwargs):
    d, m = gpt2_sampling_dir
    out = cli("generate", d, "--prompt", PROMPT, "--max-new-tokens", "20", *flags).stdout
    pieces = list(m.stream(PROMPT, max_new_tokens=20, **kwargs))
    assert all(isinstance(p, str) and p for p in pieces)
    assert out == PROMPT + "".join(pieces) + "\n"


def test_stream_splits_no_character_and_comes_in_pieces(gpt2_sampling_dir):
    d, m = gpt2_sampling_dir
    ids = m.tokenize(PROMPT)
    seq = m.generate(ids, max_new_tokens=20)
    # the fixture's promise: the first two new tokens are the bytes of U+0139
    assert list(seq[0, len(ids):len(ids) + 2]) == [98, 18]
    pieces = list(m.stream(PROMPT, max_new_tokens=20))
    text = m.decode(seq[0, len(ids):])
    assert text.startswith("\u0139") and "".join(pieces) == text
    assert pieces[0].startswith("\u0139")  # not a U+FFFD for a half character
    assert len(pieces) > 1, pieces


def test_stream_tells_its_tokens_and_stop(gpt2_sampling_dir):
    d, m = gpt2_sampling_dir
    ids = m.tokenize(PROMPT)
    new = m.generate(ids, max_new_tokens=20)[0, len(ids):]
    it = m.stream(PROMPT, max_new_tokens=20)
    text = "".join(it)
    # generate() pads the rows that ended; the stream's tokens end at the end token
    assert it.tokens == [int(t) for t in new[:len(it.tokens)]] and len(it.tokens) >= 1
    assert not it.stopped_by_string and text == m.decode(new)
    assert len(text) >= 4, text
    stop = text[2:4]
    cut = m.stream(PROMPT, max_new_tokens=20, stop=stop)
    assert "".join(cut) == text[:text.find(stop)] and cut.stopped_by_string
    assert cut.tokens == it.tokens[:len(cut.tokens)]  # greedy: the same tokens, fewer


def test_stream_closed_early_stops(gpt2_sampling_dir):
    d, m = gpt2_sampling_dir
    it = m.stream(PROMPT, max_new_tokens=20)
    first = next(it)
    it.close()  # stops generation after the current token; the model is usable again
    assert first
    assert m.generate(m.tokenize(PROMPT), max_new_tokens=2).shape == (1, len(m.tokenize(PROMPT)) + 2)


def _cosines(emb, texts, model_type):
    """The matrix as tools/cmd_model.c's print_cosines prints it (sums in double)."""
    n, D = emb.shape
    lines = [f"cosine similarity of mean-pooled embeddings ({model_type}, dim {D}):"]
    for i in range(n):
        row = f"[{i}]"
        for j in range(n):
            c = 0.0
            for d in range(D):
                c += float(emb[i, d]) * float(emb[j, d])
            row += f" {c:7.4f}"
        lines.append(row + "  " + texts[i])
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def bert_embed_dir(fx, tmp_path_factory):
    """The tiny BERT with the first 128 entries of the tokenizer fixture's
    vocabulary (test_cli.c's embed test: every id fits)."""
    d = tmp_path_factory.mktemp("bertembed")
    for f in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(fx, "bert", f), d)
    shutil.copy(os.path.join(fx, "tokenizers", "bert", "tokenizer_config.json"), d)
    with open(os.path.join(fx, "tokenizers", "bert", "vocab.txt")) as src, open(d / "vocab.txt", "w") as dst:
        dst.writelines(src.readlines()[:128])
    return str(d)


TEXTS = ["the quick brown fox", "a lazy dog, again!", "hello world"]


@pytest.mark.parametrize("which", ["bert", "distilbert_mlm", "roberta_mlm"])
def test_embed_equals_cli(fx, cli, bert_embed_dir, which):
    d = bert_embed_dir if which == "bert" else os.path.join(fx, which)
    out = cli("embed", d, *TEXTS).stdout
    with clformer.Model(d) as m:
        emb = m.embed(TEXTS)
        assert emb.dtype == np.float32 and emb.shape == (3, 32)
        np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, rtol=1e-6)
        assert out == _cosines(emb, TEXTS, m.model_type)
        one = m.embed(TEXTS[2])  # a text alone, no padding: the same vector to float rounding
        np.testing.assert_allclose(one[0], emb[2], atol=1e-5)


def _printed(blocks, names, labels):
    out = ""
    for name, block in zip(names, blocks):
        out += f"{name}\n"
        for label, p in block:
            out += f"  {p:.4f}  {label} ({labels.index(label)})\n"
    return out


def test_classify_images_equals_cli(fx, cli, model_of):
    d = os.path.join(fx, "vit_cls")
    paths = [os.path.join(fx, "images", "test.png"), os.path.join(fx, "images", "test.jpg")]
    out = cli("classify", d, *paths, "--top", "3").stdout
    m = model_of("vit_cls")
    got = m.classify_files(paths, top_k=3)
    assert out == _printed(got, paths, m.labels)
    # the same images as file bytes and as decoded RGB arrays (the fixtures'
    # PIL decodes, tests/fixtures/images/*_png.npy) classify the same
    contents = []
    for p in paths:
        with open(p, "rb") as f:
            contents.append(f.read())
    assert m.classify(contents, top_k=3) == got
    assert m.classify(contents[0], top_k=3) == got[:1]
    rgb = np.load(os.path.join(fx, "images", "test_png.npy"))
    assert m.classify(rgb, top_k=3) == got[:1]
    assert m.classify(np.asfortranarray(rgb), top_k=3) == got[:1]  # not C-contiguous: converted


@pytest.mark.parametrize("fixture", ["bert_seqcls", "gpt2_seqcls", "roberta_seqcls"])
def test_classify_texts_equals_cli(fx, cli, model_of, fixture):
    texts = ["this movie was great", "i hate this film."]
    out = cli("classify", os.path.join(fx, fixture), *texts).stdout
    m = model_of(fixture)
    assert out == _printed(m.classify(texts), texts, m.labels)


def test_stream_raises_the_library_error(fx, tmp_path):
    """GPT-2's own vocabulary with the tiny 128-token model: the prompt's ids
    do not fit (test_cli.c's case; transformers raises an IndexError)."""
    for f in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy(os.path.join(fx, "gpt2", f), tmp_path)
    for f in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        shutil.copy(os.path.join(fx, "tokenizers", "gpt2", f), tmp_path)
    with clformer.Model(tmp_path) as m:
        with pytest.raises(clformer.InvalidArgumentError) as ei:
            list(m.stream("The quick brown fox", max_new_tokens=4))
        assert "305" in str(ei.value)
        assert list(m.stream("(a+b)*c=d", max_new_tokens=2))  # usable afterwards
