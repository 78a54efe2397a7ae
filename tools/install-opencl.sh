#!/bin/sh
# Installs the two OpenCL implementations that Debian's default packages
# lack, into a prefix of clformer's own, each with its own ICD file, so that
# `clformer matrix` and `clformer --device NAME` find them (docs/matrix.md)
# without their being registered system-wide:
#
#   rusticl  Mesa's rusticl on llvmpipe, from Debian's mesa-opencl-icd: its
#            shared libraries' dependencies are installed with apt (root or
#            sudo), the package itself is unpacked into PREFIX/mesa.  Mesa's
#            older Clover ICD, in the same package, is not registered: it
#            brings a second LLVM into every OpenCL process, and with
#            Oclgrind in the same process it corrupts the heap at exit.
#   intel    Intel's OpenCL runtime for x86 CPUs (AMD's too), from the PyPI
#            wheels intel-opencl-rt, intel-cmplr-lib-rt and tbb at pinned
#            versions and hashes, unpacked into PREFIX/intel/lib (no root;
#            libintelocl.so finds the others through its $ORIGIN runpath).
#
# PREFIX: --prefix DIR, else $CLFORMER_OPENCL_PREFIX, else
# ${XDG_DATA_HOME:-$HOME/.local/share}/clformer/opencl.  The ICD files go to
# PREFIX/vendors/{rusticl,intel-cpu}.icd.  An implementation already present
# (its ICD file there, or rusticl registered in /etc/OpenCL/vendors) is left
# as it is.
#
# usage: tools/install-opencl.sh [--prefix DIR] [rusticl] [intel]
set -eu

prefix=${CLFORMER_OPENCL_PREFIX:-${XDG_DATA_HOME:-$HOME/.local/share}/clformer/opencl}
want=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift ;;
    --prefix=*) prefix=${1#--prefix=} ;;
    rusticl|intel) want="$want $1" ;;
    *) echo "usage: tools/install-opencl.sh [--prefix DIR] [rusticl] [intel]" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$want" ] || want="rusticl intel"
mkdir -p "$prefix/vendors"
prefix=$(cd "$prefix" && pwd)
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clformer-opencl.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

apt_install() {
  missing=""
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
  done
  [ -z "$missing" ] && return 0
  echo "installing:$missing"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
}

install_rusticl() {
  if [ -f "$prefix/vendors/rusticl.icd" ] && [ -f "$(cat "$prefix/vendors/rusticl.icd")" ]; then
    echo "rusticl: $prefix/vendors/rusticl.icd (already installed)"
    return 0
  fi
  if [ -f /etc/OpenCL/vendors/rusticl.icd ]; then
    echo "rusticl: /etc/OpenCL/vendors/rusticl.icd (registered system-wide)"
    return 0
  fi
  # The package's run-time dependencies, as Debian states them, less the
  # ICD loader (ocl-icd is already there).
  deps=$(apt-cache depends mesa-opencl-icd | awk '$1 == "Depends:" && $2 !~ /^[<|]/ && $2 !~ /opencl/ {print $2}' | sort -u)
  # shellcheck disable=SC2086
  apt_install $deps
  # (apt-get download needs the package lists: updated once more if it fails)
  (cd "$tmp" && apt-get download mesa-opencl-icd >/dev/null 2>&1) ||
    { $sudo apt-get update -qq && (cd "$tmp" && apt-get download mesa-opencl-icd >/dev/null); } || {
      echo "install-opencl.sh: apt-get download mesa-opencl-icd failed" >&2
      return 1
    }
  rm -rf "$prefix/mesa"
  dpkg-deb -x "$tmp"/mesa-opencl-icd_*.deb "$prefix/mesa"
  lib=$(find "$prefix/mesa" -name 'libRusticlOpenCL.so.1' | head -n 1)
  [ -n "$lib" ] || { echo "install-opencl.sh: no libRusticlOpenCL.so.1 in mesa-opencl-icd" >&2; return 1; }
  echo "$lib" > "$prefix/vendors/rusticl.icd"
  echo "rusticl: $prefix/vendors/rusticl.icd -> $lib ($(dpkg-deb -f "$tmp"/mesa-opencl-icd_*.deb Version))"
}

install_intel() {
  if [ -f "$prefix/vendors/intel-cpu.icd" ] && [ -f "$(cat "$prefix/vendors/intel-cpu.icd")" ]; then
    echo "intel: $prefix/vendors/intel-cpu.icd (already installed)"
    return 0
  fi
  python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
  cat > "$tmp/intel.txt" <<'EOF'
intel-opencl-rt==2026.2.0 --hash=sha256:6b6215a420598b4999ee01caca6d5cbe106aa4155c46c52377619c5aafce9f67
intel-cmplr-lib-rt==2026.2.0 --hash=sha256:9f713083073a820d2496a6da8e8d4f3482aba6640f74521d25ea48dcebe72748
tbb==2023.2.0 --hash=sha256:7d80615b6e970f11671fa05b6eaa9483ac864fbfe525ac280271a78b37870b7c
EOF
  python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
    --require-hashes -r "$tmp/intel.txt" -d "$tmp/wheels"
  rm -rf "$prefix/intel"
  mkdir -p "$prefix/intel/lib"
  # Each wheel keeps its libraries under NAME.data/data/lib/; they go to one
  # folder, and the copies that stand for symbolic links (wheels have none)
  # become links again.
  python3 - "$tmp/wheels" "$prefix/intel/lib" <<'EOF'
import glob, hashlib, os, sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
seen = {}
for whl in sorted(glob.glob(os.path.join(src, "*.whl"))):
    with zipfile.ZipFile(whl) as z:
        for info in z.infolist():
            parts = info.filename.split("/")
            if len(parts) != 4 or parts[1:3] != ["data", "lib"] or not parts[3] or info.is_dir():
                continue
            data = z.read(info)
            digest = hashlib.sha256(data).hexdigest()
            out = os.path.join(dst, parts[3])
            if digest in seen and len(data) > 65536:
                os.symlink(seen[digest], out)
                continue
            seen[digest] = parts[3]
            with open(out, "wb") as f:
                f.write(data)
            os.chmod(out, 0o755 if ".so" in parts[3] else 0o644)
EOF
  [ -e "$prefix/intel/lib/libintelocl.so" ] || { echo "install-opencl.sh: no libintelocl.so in the wheels" >&2; return 1; }
  echo "$prefix/intel/lib/libintelocl.so" > "$prefix/vendors/intel-cpu.icd"
  echo "intel: $prefix/vendors/intel-cpu.icd (intel-opencl-rt 2026.2.0)"
}

for w in $want; do
  case "$w" in
    rusticl) install_rusticl ;;
    intel) install_intel ;;
  esac
done
