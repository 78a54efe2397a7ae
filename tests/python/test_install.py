"""test_install.py - where the package finds libclformer (python/clformer/
_lib.py): the wheel's copy, $CLFORMER_LIBRARY, pkg-config's libdir, the
dynamic loader's path; and what it says when there is none.  Each case runs
a fresh interpreter on a copy of the package without the library inside."""
import os
import shutil
import subprocess
import sys

import pytest

import clformer

PROBE = "import clformer; print(clformer.library_path); print(len(clformer.devices()) >= 0)"


@pytest.fixture
def bare(tmp_path):
    """A copy of the installed package's Python files only, and the library
    alone in tmp/lib."""
    pkg = os.path.dirname(clformer.__file__)
    dst = tmp_path / "site" / "clformer"
    dst.mkdir(parents=True)
    for f in os.listdir(pkg):
        if f.endswith(".py"):
            shutil.copy(os.path.join(pkg, f), dst)
    lib = tmp_path / "lib"
    lib.mkdir()
    shutil.copy(clformer.library_path, lib / "libclformer.so")
    return tmp_path


def run(bare, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("CLFORMER_LIBRARY", "PKG_CONFIG_PATH", "LD_LIBRARY_PATH")}
    e.update(PYTHONPATH=str(bare / "site"), **env)
    return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=e, cwd=str(bare))


def test_wheel_copy_first():
    if os.environ.get("CLFORMER_LIBRARY"):
        pytest.skip("$CLFORMER_LIBRARY chooses the library here")
    assert os.path.dirname(clformer.library_path) == os.path.dirname(clformer.__file__)


def test_environment_variable(bare):
    p = run(bare, CLFORMER_LIBRARY=str(bare / "lib" / "libclformer.so"))
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == str(bare / "lib" / "libclformer.so")


def test_pkg_config(bare):
    if not shutil.which("pkg-config"):
        pytest.skip("no pkg-config")
    pc = bare / "pc"
    pc.mkdir()
    (pc / "clformer.pc").write_text(f"prefix={bare}\nlibdir={bare / 'lib'}\n\nName: clformer\nDescription: x\n"
                                    "Version: 0.1.0\nLibs: -L${libdir} -lclformer\n")
    p = run(bare, PKG_CONFIG_PATH=str(pc))
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == str(bare / "lib" / "libclformer.so")


def test_loader_path(bare):
    p = run(bare, LD_LIBRARY_PATH=str(bare / "lib"), PKG_CONFIG_PATH=str(bare / "none"))
    assert p.returncode == 0, p.stderr
    assert "libclformer.so" in p.stdout.splitlines()[0]


def test_none_found_says_how(bare):
    p = run(bare, CLFORMER_LIBRARY=str(bare / "missing.so"))
    assert p.returncode != 0
    assert "ImportError" in p.stderr and "CLFORMER_LIBRARY" in p.stderr and "missing.so" in p.stderr
