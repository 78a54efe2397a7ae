"""conftest.py - what the Python tests share: the golden fixtures of the C
suites (tests/fixtures, or $CLF_FIXTURES), the installed clformer package,
the clformer program the wheel carries (for equality with the command
line), and the device rule of tests/harness.c: with no OpenCL device the
tests that need one are skipped, unless CLF_REQUIRE_DEVICE=1, where the
run fails."""
import os
import subprocess

import numpy as np
import pytest

import clformer

FIXTURES = os.environ.get("CLF_FIXTURES") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                           "fixtures")
FIXTURES = os.path.abspath(FIXTURES)


def pytest_sessionstart(session):
    # The library's notices (a GEMM profile applied) would fill the output.
    os.environ.setdefault("CLFORMER_LOG", "off")


_HAVE_DEVICE = None


@pytest.fixture(autouse=True)
def _device_rule(request):
    """Tests marked `device` skip without an OpenCL device, or fail under
    CLF_REQUIRE_DEVICE=1 (as tests/harness.c does)."""
    global _HAVE_DEVICE
    if "device" not in request.keywords:
        return
    if _HAVE_DEVICE is None:
        _HAVE_DEVICE = bool(clformer.devices())
    if not _HAVE_DEVICE:
        if os.environ.get("CLF_REQUIRE_DEVICE") == "1":
            pytest.fail("no OpenCL device, and CLF_REQUIRE_DEVICE=1")
        pytest.skip("no OpenCL device on this machine")


def pytest_configure(config):
    config.addinivalue_line("markers", "device: needs an OpenCL device")


@pytest.fixture(scope="session")
def fx():
    """The fixtures directory."""
    assert os.path.isdir(os.path.join(FIXTURES, "bert")), f"no fixtures at {FIXTURES} (set CLF_FIXTURES)"
    return FIXTURES


_models = {}


@pytest.fixture(scope="session")
def model_of(fx):
    """model_of("bert") -> a clformer.Model of the fixture, loaded once per session."""
    def get(name, **kw):
        key = (name, tuple(sorted(kw.items())))
        if key not in _models:
            _models[key] = clformer.Model(os.path.join(fx, name), **kw)
        return _models[key]
    yield get
    for m in _models.values():
        m.close()


@pytest.fixture(scope="session")
def cli():
    """run the bundled clformer program: cli("run", DIR, ...) -> CompletedProcess."""
    path = clformer._device.cli_path()

    def run(*args, check=True):
        p = subprocess.run([path, *map(str, args)], capture_output=True, text=True, check=False)
        if check:
            assert p.returncode == 0, f"clformer {' '.join(map(str, args))}: {p.stderr}"
        return p
    return run


def close_rule(got, want, max_abs, rel):
    """The fixtures' tolerance (cases.json): max |got - want| <= rel * max(1, max_abs)."""
    err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if want.size else 0.0
    return err, rel * max(1.0, max_abs)
