#!/bin/sh
# Installs the Debian packages clformer needs to build and test, skipping
# those already present.  Uses sudo when not run as root.
set -eu
pkgs="meson ninja-build pkg-config gcc g++ python3 ocl-icd-opencl-dev opencl-headers
      libclblast-dev check pocl-opencl-icd oclgrind clinfo libcjson-dev libsentencepiece-dev libpng-dev libjpeg-dev nettle-dev"
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
