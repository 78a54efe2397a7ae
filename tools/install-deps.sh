#!/bin/sh
# Installs the Debian packages clformer needs to build and test, skipping
# those already present.  Uses sudo when not run as root.
# usage: tools/install-deps.sh [--fuzz] [--python]
set -eu
pkgs="meson ninja-build pkg-config gcc g++ python3 ocl-icd-opencl-dev opencl-headers
      libclblast-dev check pocl-opencl-icd oclgrind clinfo libcjson-dev libsentencepiece-dev libpcre2-dev libpng-dev libjpeg-dev nettle-dev
      libedit-dev"
# --fuzz (or CLF_FUZZ_DEPS=1) adds what tools/fuzz.sh needs: clang, its
# libFuzzer and sanitizer runtimes, and llvm-symbolizer for readable reports.
# --python adds what tools/python-tests.sh needs to make its venv from
# Debian's python3 (numpy, pytest, meson-python and ninja then come from PyPI
# into the venv; no Python headers: the package is ctypes, no extension).
fuzz=${CLF_FUZZ_DEPS:-0}
python=0
for a in "$@"; do
  case "$a" in
    --fuzz) fuzz=1 ;;
    --python) python=1 ;;
    *) echo "usage: tools/install-deps.sh [--fuzz] [--python]" >&2; exit 2 ;;
  esac
done
if [ "$fuzz" = 1 ]; then pkgs="$pkgs clang libclang-rt-dev llvm"; fi
if [ "$python" = 1 ]; then pkgs="$pkgs python3-venv python3-pip"; fi
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing:$missing"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
