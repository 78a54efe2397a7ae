#!/bin/sh
# Sets up the peers tools/bench.py runs beside clformer (idempotent: a step
# already done is skipped):
#   - PyTorch: Debian's python3-torch with OpenBLAS (libopenblas0-pthread) as
#     the system BLAS; without it Debian falls back to the reference BLAS.
#   - /opt/clf-ref: a venv over the system torch with transformers 4.40.2
#     (the environment of tools/fixtures/README.md).
#   - /opt/clf-ort: ONNX Runtime, in a venv of its own (it needs NumPy 2,
#     Debian's torch needs the system NumPy 1).
#   - /opt/clf-llamacpp: llama.cpp through llama-cpp-python 0.3.36, built
#     from PyPI's source for this CPU (GGML_NATIVE: about 5 minutes), the
#     peer of GGUF models (tools/bench_gguf.py).
#   - llama.cpp's server (llama-server) from the same source distribution's
#     vendor/llama.cpp, for this CPU (about 10 minutes on 2 cores), in
#     $CLF_BENCH_CACHE/llama-server (default ~/.cache/clformer-bench, of the
#     user running this script): the peer of the engine (tools/bench_engine.py).
# usage: sudo tools/bench-env.sh        (root: apt-get and /opt)
#        tools/bench-env.sh llama-server  (only llama-server; needs cmake, g++,
#                                          no root)
set -eu
REF=${CLF_REF_VENV:-/opt/clf-ref}
ORT=${CLF_ORT_VENV:-/opt/clf-ort}
LCPP=${CLF_LLAMACPP_VENV:-/opt/clf-llamacpp}

# GGML_NATIVE on a CPU with AMX (Sapphire Rapids and later) compiles ggml's
# tile kernels, which llama-cpp-python 0.3.36 runs into SIGILL at its first
# prefill here (a `tilezero` on a tile configuration it did not load, the
# process holding the kernel's tile permission): they are left out, and the
# AVX-512 VNNI kernels every other product uses are kept.  The arguments are
# recorded so that a venv built with others is rebuilt.
lcpp_args="-DGGML_NATIVE=ON"
if grep -qw amx_tile /proc/cpuinfo; then
  noamx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  lcpp_args="$lcpp_args '-DCMAKE_C_FLAGS=$noamx' '-DCMAKE_CXX_FLAGS=$noamx'"
fi

# llama-server: built once from llama-cpp-python 0.3.36's sdist, its
# vendor/llama.cpp (the llama.cpp the venv above runs), with the same native
# arguments; the arguments are recorded beside the binary so that a build
# made with others is redone, and a build that is there is reused.
llama_server() {
  dir=${CLF_BENCH_CACHE:-$HOME/.cache/clformer-bench}/llama-server
  args="-DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release $lcpp_args"
  bin=$dir/build/bin/llama-server   # beside the shared libraries it loads
  if [ -x "$bin" ] && [ "$(cat "$dir/clf-cmake-args" 2>/dev/null)" = "$args" ]; then
    echo "bench-env: llama-server $bin ($("$bin" --version 2>&1 | grep -m1 version))"
    return
  fi
  for p in cmake g++; do command -v "$p" >/dev/null || { echo "bench-env: llama-server needs $p" >&2; exit 1; }; done
  mkdir -p "$dir"
  sdist=$dir/llama_cpp_python-0.3.36.tar.gz
  if [ ! -f "$sdist" ]; then
    python3 -m pip download --no-binary :all: --no-deps llama-cpp-python==0.3.36 -d "$dir.part"
    mv "$dir.part/llama_cpp_python-0.3.36.tar.gz" "$sdist" && rm -rf "$dir.part"
  fi
  # The sources are extracted once and the build directory kept, so that an
  # interrupted build resumes where it stopped.
  if [ ! -f "$dir/src/CMakeLists.txt" ]; then
    rm -rf "${dir:?}/src" && mkdir -p "$dir/src"
    tar xzf "$sdist" -C "$dir/src" --strip-components=3 llama_cpp_python-0.3.36/vendor/llama.cpp
    rm -f "$dir/src/.git"   # a submodule link into the sdist's .git, not extracted
  fi
  # shellcheck disable=SC2086
  eval cmake -S "\"$dir/src\"" -B "\"$dir/build\"" $args
  cmake --build "$dir/build" --target llama-server -j "$(nproc)"
  echo "$args" > "$dir/clf-cmake-args"
  echo "bench-env: llama-server built: $bin"
}
if [ "${1:-}" = llama-server ]; then
  llama_server
  exit 0
fi

need_apt=
for p in python3-torch python3-numpy python3-venv libopenblas0-pthread; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_apt="$need_apt $p"
done
if [ -n "$need_apt" ]; then
  apt-get update
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y $need_apt
fi

if ! "$REF/bin/python" -c "import torch, transformers, safetensors, sentencepiece, tokenizers; \
assert transformers.__version__ == '4.40.2'" 2>/dev/null; then
  [ -x "$REF/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$REF"
  "$REF/bin/pip" install transformers==4.40.2 safetensors sentencepiece 'tokenizers<0.20'
fi

if ! "$ORT/bin/python" -c "import onnxruntime, numpy" 2>/dev/null; then
  [ -x "$ORT/bin/python" ] || /usr/bin/python3 -m venv "$ORT"
  "$ORT/bin/pip" install onnxruntime numpy
fi

if ! "$LCPP/bin/python" -c "import llama_cpp, numpy; assert llama_cpp.__version__ == '0.3.36'" 2>/dev/null ||
   [ "$(cat "$LCPP/clf-cmake-args" 2>/dev/null)" != "$lcpp_args" ]; then
  need=
  for p in cmake g++; do command -v "$p" >/dev/null || need="$need $p"; done
  # shellcheck disable=SC2086
  [ -z "$need" ] || DEBIAN_FRONTEND=noninteractive apt-get install -y $need
  [ -x "$LCPP/bin/python" ] || /usr/bin/python3 -m venv "$LCPP"
  CMAKE_ARGS="$lcpp_args" "$LCPP/bin/pip" install --force-reinstall --no-cache-dir --no-binary llama-cpp-python \
    llama-cpp-python==0.3.36 numpy
  echo "$lcpp_args" > "$LCPP/clf-cmake-args"
fi

llama_server

# The system BLAS must be OpenBLAS, not the reference BLAS (tools/bench.py
# refuses to compare against the latter).
blas=$(readlink -f /etc/alternatives/libblas.so.3-$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu) 2>/dev/null || true)
case "$blas" in
  *openblas*) echo "bench-env: libblas.so.3 -> $blas" ;;
  *) echo "bench-env: libblas.so.3 -> ${blas:-?}, not OpenBLAS; run" \
          "update-alternatives --config libblas.so.3-x86_64-linux-gnu" >&2; exit 1 ;;
esac
"$REF/bin/python" -c "import torch, transformers; print('bench-env: torch', torch.__version__, 'transformers', transformers.__version__)"
"$ORT/bin/python" -c "import onnxruntime, numpy; print('bench-env: onnxruntime', onnxruntime.__version__, 'numpy', numpy.__version__)"
"$LCPP/bin/python" -c "import llama_cpp; print('bench-env: llama-cpp-python', llama_cpp.__version__)"
