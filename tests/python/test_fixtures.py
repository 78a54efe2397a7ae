"""test_fixtures.py - every case of the golden fixtures (tests/fixtures/*/
cases.json and the GGUF files' tests/fixtures/gguf_models/*/cases.json,
made by Hugging Face transformers: tools/fixtures/README.md)
through Model.__call__ and Model.generate, at the tolerance cases.json
states, as tests/test_models.c, test_heads.c, test_generate.c,
test_llama.c and test_vision.c read them."""
import json
import os

import numpy as np
import pytest

from conftest import FIXTURES, close_rule

pytestmark = pytest.mark.device


def _cases(kind):
    out = []
    names = sorted(os.listdir(FIXTURES)) + sorted("gguf_models/" + n for n in os.listdir(os.path.join(FIXTURES,
                                                                                                     "gguf_models")))
    for name in names:
        path = os.path.join(FIXTURES, name, "cases.json")
        weights = ("model.safetensors", "model.gguf")
        if not os.path.isfile(path) or not any(os.path.isfile(os.path.join(FIXTURES, name, w)) for w in weights):
            continue
        with open(path) as f:
            j = json.load(f)
        for c in j.get("cases", []):
            if c.get("kind") == kind:
                out.append(pytest.param(name, c, j["tolerance"]["rel"], id=f"{name}-{c['name']}"))
    return out


@pytest.mark.parametrize("fixture,case,rel", _cases("forward"))
def test_forward_matches_transformers(model_of, fx, fixture, case, rel):
    m = model_of(fixture)
    inputs = {k: np.load(os.path.join(fx, fixture, v)) for k, v in case["inputs"].items()}
    got = m.run(inputs, list(case["outputs"]))
    mask = inputs[case["compare_mask"]] if case.get("compare_mask") else None
    for name, file in case["outputs"].items():
        want = np.load(os.path.join(fx, fixture, file))
        assert got[name].shape == want.shape, name
        assert got[name].dtype == want.dtype, name
        g, w = got[name], want
        if mask is not None and g.ndim >= 2 and g.shape[:2] == mask.shape:
            g, w = g[mask.astype(bool)], w[mask.astype(bool)]  # positions transformers leaves undefined
        if w.dtype.kind in "iu":
            np.testing.assert_array_equal(g, w, err_msg=name)
        else:
            err, tol = close_rule(g, w, case["max_abs"][name], rel)
            assert err <= tol, f"{fixture}/{case['name']}/{name}: max error {err:.3g} > {tol:.3g}"


@pytest.mark.parametrize("fixture,case,rel", _cases("generate"))
def test_generate_matches_transformers(model_of, fx, fixture, case, rel):
    m = model_of(fixture)
    ids = np.load(os.path.join(fx, fixture, case["inputs"]["input_ids"]))
    mask_file = case["inputs"].get("attention_mask")
    mask = np.load(os.path.join(fx, fixture, mask_file)) if mask_file else None
    want = np.load(os.path.join(fx, fixture, case["outputs"]["sequences"]))
    got = m.generate(ids, mask, **case.get("generate_kwargs", {}))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)
