#!/bin/sh
# Installs the Debian packages clformer needs to build and test, skipping
# those already present.  Uses sudo when not run as root.
# usage: tools/install-deps.sh [--fuzz]
set -eu
pkgs="meson ninja-build pkg-config gcc g++ python3 ocl-icd-opencl-dev opencl-headers
      libclblast-dev check pocl-opencl-icd oclgrind clinfo libcjson-dev libsentencepiece-dev libpcre2-dev libpng-dev libjpeg-dev nettle-dev"
# --fuzz (or CLF_FUZZ_DEPS=1) adds what tools/fuzz.sh needs: clang, its
# libFuzzer and sanitizer runtimes, and llvm-symbolizer for readable reports.
if [ "${1:-}" = --fuzz ] || [ "${CLF_FUZZ_DEPS:-0}" = 1 ]; then pkgs="$pkgs clang libclang-rt-dev llvm"; fi
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
