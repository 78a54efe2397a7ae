"""test_api.py - devices, probe, the Model's description, array handling
(no copy for C-contiguous int64/float32, conversions otherwise, owned
outputs), threads, generation settings, the tokenizers against the
tokenizer fixtures (tests/fixtures/tokenizers/expected.json, from
transformers) and the installed layout."""
import inspect
import json
import os
import threading

import numpy as np
import pytest

import clformer

pytestmark = pytest.mark.device


def test_devices_describe_the_library_list():
    devs = clformer.devices()
    assert devs, "no device"
    for i, d in enumerate(devs):
        assert isinstance(d, clformer.Device) and d.index == i
        assert d.selector == f"{d.platform_index}:{d.device_index}"
        assert d.type in ("CPU", "GPU", "ACCELERATOR", "CUSTOM") or "|" in d.type
        assert d.name and d.platform and d.device_version.startswith("OpenCL")


def test_probe_is_the_cli_json(cli):
    d = clformer.devices()[0]
    j = clformer.probe(d, measure=False, validate=False)
    assert j["schema"] == "clformer-probe"
    assert j["clformer_version"] == clformer.__version__
    assert [x["selector"] if "selector" in x else None for x in j["devices"]]
    want = json.loads(cli("probe", "--json", "--no-measure", "--no-validate", "--device", d.selector).stdout)
    assert [x.get("name") for x in j["devices"]] == [x.get("name") for x in want["devices"]]
    with pytest.raises(clformer.DeviceNotFoundError):
        clformer.probe("no-such-device-anywhere", measure=False, validate=False)


def test_model_description(model_of):
    m = model_of("bert_seqcls")
    assert m.model_type == "bert"
    assert m.input_names[:3] == ["input_ids", "attention_mask", "token_type_ids"]
    assert m.output_names[0] == "logits"
    with open(os.path.join(m.path, "config.json")) as f:
        id2label = json.load(f)["id2label"]
    assert m.labels == [id2label[str(i)] for i in range(len(id2label))]
    assert not m.is_encoder_decoder and model_of("marian").is_encoder_decoder
    assert m.weight_bytes > 0 and m.device in clformer.devices()
    assert model_of("bert").labels == []


def test_device_choices_agree(fx):
    d = clformer.devices()[0]
    for choice in (None, 0, d, d.selector):
        with clformer.Model(os.path.join(fx, "bert"), device=choice) as m:
            assert m.device.selector in [x.selector for x in clformer.devices()]
            if choice is not None:
                assert m.device == d


def test_inputs_converted_once_and_outputs_owned(model_of, fx):
    m = model_of("bert")
    ids = np.load(os.path.join(fx, "bert", "padded.input_ids.npy"))
    mask = np.load(os.path.join(fx, "bert", "padded.attention_mask.npy"))
    ref = m(input_ids=ids, attention_mask=mask)
    # int32, lists, bool masks and non-contiguous views give the same bits
    wide = np.zeros((ids.shape[0], ids.shape[1] * 2), np.int64)
    wide[:, ::2] = ids
    variants = [dict(input_ids=ids.astype(np.int32), attention_mask=mask.astype(np.int32)),
                dict(input_ids=ids.tolist(), attention_mask=mask.astype(bool)),
                dict(input_ids=wide[:, ::2], attention_mask=np.asfortranarray(mask)),
                dict(input_ids=ids.astype(np.uint16), attention_mask=mask.astype(np.int8))]
    for v in variants:
        out = m(**v)
        for k in ref:
            assert out[k].tobytes() == ref[k].tobytes(), k
    for k, v in ref.items():
        assert v.flags.owndata and v.flags.c_contiguous and v.flags.writeable
    # a C-contiguous int64 input is passed as is (the library reads its memory)
    from clformer import _arrays
    assert _arrays.as_ids("x", ids).ctypes.data == ids.ctypes.data
    f = np.zeros((1, 3, 4, 4), np.float32)
    assert _arrays.as_floats("x", f).ctypes.data == f.ctypes.data


def test_pixel_values_float64_converted(model_of, fx):
    v = model_of("vit_cls")
    pv = np.load(os.path.join(fx, "vit_cls", "batch3.pixel_values.npy"))
    a = v(pixel_values=pv)["logits"]
    b = v(pixel_values=pv.astype(np.float64))["logits"]
    assert a.tobytes() == b.tobytes()


def test_threads_share_one_model(model_of, fx):
    """The serve app's case: calls from several threads on one Model are
    serialised by its lock and give the single-thread results, bit for bit."""
    m = model_of("gpt2")
    ids = np.load(os.path.join(fx, "gpt2", "left_padded.input_ids.npy"))
    mask = np.load(os.path.join(fx, "gpt2", "left_padded.attention_mask.npy"))
    ref = m(input_ids=ids, attention_mask=mask)["logits"]
    gref = m.generate(ids[:1], mask[:1], max_new_tokens=5)
    bad = []

    def work():
        for _ in range(4):
            if m(input_ids=ids, attention_mask=mask)["logits"].tobytes() != ref.tobytes():
                bad.append("forward")
            if not np.array_equal(m.generate(ids[:1], mask[:1], max_new_tokens=5), gref):
                bad.append("generate")

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert bad == []


def test_generate_settings_reach_the_library(model_of, fx):
    g = model_of("gpt2")
    ids = np.load(os.path.join(fx, "gpt2", "greedy_b1.input_ids.npy"))
    want = np.load(os.path.join(fx, "gpt2", "greedy_b1.sequences.npy"))
    L = ids.shape[1]
    assert np.array_equal(g.generate(ids[0], max_new_tokens=8), want)  # 1-D: one row
    # eos_token_id replaces the checkpoint's: stop at the first new token
    first = int(want[0, L])
    got = g.generate(ids, max_new_tokens=8, eos_token_id=first)
    assert got.shape == (1, L + 1) and got[0, L] == first
    got = g.generate(ids, max_new_tokens=8, eos_token_id=[first, 1])
    assert got.shape == (1, L + 1)
    # a seed makes sampling repeatable; another seed may differ, never crashes
    a = g.generate(ids, do_sample=True, seed=7, max_new_tokens=8, top_k=0)
    assert np.array_equal(a, g.generate(ids, do_sample=True, seed=7, max_new_tokens=8, top_k=0))
    assert g.generate(ids, do_sample=True, seed=9 * 10 ** 18, max_new_tokens=3, min_p=0.1).shape == (1, L + 3)
    # issue 43: seed 0 is a seed; temperature 0 is greedy; a sampling setting alone samples
    z = g.generate(ids, do_sample=True, seed=0, max_new_tokens=8, top_k=0)
    assert np.array_equal(z, g.generate(ids, do_sample=True, seed=0, max_new_tokens=8, top_k=0))
    assert np.array_equal(g.generate(ids, temperature=0, max_new_tokens=8), want)
    assert np.array_equal(g.generate(ids, top_k=0, seed=7, max_new_tokens=8), a)


@pytest.mark.parametrize("temperature", [1e-300, 1e-45, 5e-324, 1e-40])
def test_tiny_temperature_and_top_p_are_their_limits(model_of, fx, temperature):
    """Issue 21 item 5: a temperature below ~1e-38 became 0 as a float and
    sampling returned ids [1, 0, 0, 0] for "a+b" where greedy gives
    [35, 37, 46, 46]; the library takes t -> 0+ as its limit, greedy, and a
    top_p whose cut rounds to 1 as the nucleus of one."""
    g = model_of("gpt2")
    ids = np.array([[65, 11, 66]])  # "a+b" in tests/fixtures/sampling/tokenizer
    greedy = g.generate(ids, do_sample=False, max_new_tokens=4)
    assert greedy[0, 3:].tolist() == [35, 37, 46, 46]
    got = g.generate(ids, do_sample=True, temperature=temperature, seed=1, max_new_tokens=4, top_k=0)
    assert np.array_equal(got, greedy)
    got = g.generate(ids, do_sample=True, temperature=0.7, top_p=1e-300, seed=1, max_new_tokens=4, top_k=0)
    assert np.array_equal(got, greedy)


def _expected():
    from conftest import FIXTURES
    with open(os.path.join(FIXTURES, "tokenizers", "expected.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("kind", ["bert", "bert_cased", "gpt2", "roberta", "xlmr"])
def test_tokenizer_matches_transformers(fx, kind):
    exp = _expected()
    with clformer.Tokenizer(os.path.join(fx, "tokenizers", kind)) as tok:
        for case in exp[kind]:
            if "text" not in case:
                continue
            assert tok.tokenize(case["text"], add_special_tokens=False).tolist() == case["ids"], case["text"]
            if "ids_special" in case:
                assert tok.tokenize(case["text"]).tolist() == case["ids_special"]
            if "decoded_skip" in case:
                assert tok.decode(case["ids_special"] if "ids_special" in case else case["ids"]) == \
                    case["decoded_skip"]
        for case in exp.get(kind + "_decode", []):
            assert tok.decode(case["ids"], skip_special_tokens=False) == case["decoded"]
            assert tok.decode(np.array(case["ids"], np.int32), True) == case["decoded_skip"]


def test_tokenizer_refusals(fx):
    tok = clformer.Tokenizer(os.path.join(fx, "tokenizers", "gpt2"))
    for bad in (None, b"bytes", 5, "a\0b", "\ud800"):
        with pytest.raises(clformer.InvalidArgumentError):
            tok.tokenize(bad)
    with pytest.raises(clformer.ShapeError):
        tok.decode([[1, 2]])
    with pytest.raises(clformer.DtypeError):
        tok.decode([1.5])
    with pytest.raises(clformer.InvalidArgumentError):  # GPT-2 refuses ids outside its vocabulary
        tok.decode([10 ** 9])
    assert tok.decode([]) == ""
    assert tok.tokenize("").tolist() == []
    tok.close()
    with pytest.raises(clformer.Error):
        tok.tokenize("x")
    with pytest.raises(clformer.NotFoundError):
        clformer.Tokenizer(os.path.join(fx, "bert")).tokenize("x")


def test_model_tokenizer_roundtrip(model_of):
    m = model_of("bert_seqcls")
    ids = m.tokenize("this movie was great")
    assert ids.dtype == np.int64 and ids.ndim == 1
    assert m.decode(ids) == "this movie was great"
    assert m.batch_decode(np.stack([ids, ids])) == ["this movie was great"] * 2


def test_installed_package_carries_library_and_cli():
    """Run from the wheel: the library and the program live in the package."""
    if os.environ.get("CLFORMER_LIBRARY") or os.environ.get("CLFORMER_CLI"):
        pytest.skip("a library or program chosen by the environment, not the wheel's")
    pkg = os.path.dirname(clformer.__file__)
    assert os.path.dirname(clformer.library_path) == pkg
    assert clformer._device.cli_path() == os.path.join(pkg, "clformer")


def test_installed_package_carries_every_module():
    """Every module of python/clformer is in the installed package (meson.build
    lists them one by one: a new module left out of the list is missing from
    the wheel, as clformer.serve's local.py and _http_guard.py once were)."""
    from conftest import FIXTURES
    src = os.path.join(FIXTURES, "..", "..", "python", "clformer")
    pkg = os.path.dirname(clformer.__file__)
    if os.path.samefile(os.path.realpath(pkg), os.path.realpath(src)):
        pytest.skip("clformer imported from the source tree, not an installed package")
    missing = []
    for root, _, files in os.walk(src):
        rel = os.path.relpath(root, src)
        for f in files:
            if f.endswith(".py") or f == "py.typed":
                if not os.path.isfile(os.path.join(pkg, rel, f)):
                    missing.append(os.path.normpath(os.path.join(rel, f)))
    assert missing == [], f"not in the installed package (add them to meson.build): {missing}"


def test_generation_settings_are_typed(model_of):
    """Issue 43: the settings were **kwargs: Any; GenerationSettings (a
    TypedDict for Unpack) names each, and generate() takes exactly those."""
    assert set(clformer.GenerationSettings.__annotations__) == {
        "max_new_tokens", "num_beams", "do_sample", "temperature", "top_k", "top_p", "min_p",
        "repetition_penalty", "no_repeat_ngram_size", "seed", "eos_token_id"}
    assert "Unpack[GenerationSettings]" in str(inspect.signature(clformer.Model.generate))
    # ... and they are the library's list (clf_generate_setting_at), each typed as it says and
    # described in the docstring editors show: a setting added to one side alone fails here
    from clformer import _generate
    assert _generate.table_drift() == []
    rows = clformer.generation_settings()
    assert [r["name"] for r in rows] == [k for k in clformer.GenerationSettings.__annotations__ if k != "eos_token_id"]
    for r in rows:
        assert f"\n    {r['name']}: " in clformer.GenerationSettings.__doc__, r["name"]
    assert {r["name"] for r in rows if r["sampling"]} == {"temperature", "top_k", "top_p", "min_p"}
    assert next(r for r in rows if r["name"] == "top_k")["default"] == 50
    # README's table states each setting's default as the library does
    from conftest import FIXTURES
    readme = os.path.join(FIXTURES, "..", "..", "README.md")
    if os.path.isfile(readme):
        text = open(readme, encoding="utf-8").read()
        for r in rows:
            assert f"| `{r['name']}` (`--{r['name'].replace('_', '-')}`) | {r['help']} |" in text, r["name"]
            assert f"| {r['default_text']} |" in text, r["name"]
    g = model_of("gpt2")
    with pytest.raises(clformer.InvalidArgumentError, match="unknown generation setting"):
        g.generate(np.array([[65, 11, 66]]), max_new_token=3)


def test_tokenizer_token_is_the_vocabulary_entry(fx):
    """Tokenizer.token / Model.token: an id's entry as vocab.json spells it
    (transformers' convert_ids_to_tokens); an id no token has is
    NotFoundError naming it (decode drops such ids: this is the check)."""
    d = os.path.join(fx, "tokenizers", "gpt2")
    with open(os.path.join(d, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    by_id = {i: t for t, i in vocab.items()}
    with clformer.Tokenizer(d) as tok:
        for i in (0, 1, 220, 995, max(by_id)):
            if i in by_id:
                assert tok.token(i) == by_id[i], i
        for bad in (-1, max(by_id) + 1000, 1 << 40):
            with pytest.raises(clformer.NotFoundError, match=str(bad)):
                tok.token(bad)
