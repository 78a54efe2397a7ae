#!/bin/sh
# Builds the clformer wheel the way users get it (`pip install .`: meson-python,
# the library and the CLI inside the package), installs it into a venv and runs
# the Python suite tests/python/ against the INSTALLED package, from outside the
# source tree.  Prints pytest's summary line; exits with pytest's status.
# usage: tools/python-tests.sh [VENV]   (default /opt/clf-py; made if missing)
# Needs the Debian packages of tools/install-deps.sh --python.  The venv is
# Debian's /usr/bin/python3 (3.11): numpy, pytest, meson-python, meson and
# ninja come from PyPI.  The meson build directory (VENV/clformer-build) and the
# kernel cache (VENV/kernel-cache) are kept, so a second run rebuilds only what
# changed.  CLF_REQUIRE_DEVICE=1: no OpenCL device fails the tests (no skips).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-/opt/clf-py}
py=/usr/bin/python3
[ -x "$py" ] || py=python3
t0=$(date +%s)
if [ ! -x "$venv/bin/python" ]; then
  echo "python-tests: making the venv $venv ($("$py" --version))"
  "$py" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check numpy pytest meson-python meson ninja
t1=$(date +%s)
# The real wheel build, not editable; no build isolation: the venv has the
# build requirements, and the kept build directory makes rebuilds incremental.
PATH="$venv/bin:$PATH" "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation \
  --force-reinstall --no-deps --config-settings=build-dir="$venv/clformer-build" "$repo"
t2=$(date +%s)
echo "python-tests: venv $((t1 - t0))s, wheel build + install $((t2 - t1))s; $("$venv/bin/python" -c \
  'import clformer; print("clformer", clformer.__version__, "from", clformer.library_path)')"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
unset CLFORMER_LIBRARY CLFORMER_CLI
export CLFORMER_CACHE_DIR="${CLFORMER_CACHE_DIR:-$venv/kernel-cache}"
export CLF_FIXTURES="${CLF_FIXTURES:-$repo/tests/fixtures}"
set +e
# The serve modules are tools/serve-test.sh's (it installs Ray and makes a
# missing Ray a failure); here they would only show as skips.
"$venv/bin/python" -m pytest -q -p no:cacheprovider --rootdir="$repo/tests/python" \
  --ignore="$repo/tests/python/test_serve_api.py" --ignore="$repo/tests/python/test_serve_retry.py" \
  --ignore="$repo/tests/python/test_serve_http.py" --ignore="$repo/tests/python/test_serve_local.py" \
  --ignore="$repo/tests/python/test_serve_engine.py" --ignore="$repo/tests/python/test_serve_grammar.py" \
  --ignore="$repo/tests/python/test_serve_single.py" --ignore="$repo/tests/python/test_serve_models.py" \
  "$repo/tests/python"
rc=$?
echo "python-tests: pytest $(( $(date +%s) - t2 ))s, total $(( $(date +%s) - t0 ))s"
exit $rc
