#!/bin/sh
# Measures what the program cache buys a second process, on one device:
# `clformer probe --no-measure` (whose self-validation builds every kernel
# family) runs in fresh processes with empty and with warm caches, with
# clformer's binary cache on and off (on PoCL the driver keeps its own cache
# under POCL_CACHE_DIR too).
# Prints one line per run: configuration, wall seconds, clformer's build ms.
# usage: tools/bench-cache.sh [BUILD_DIR] [REPEATS] [DEVICE]
# (DEVICE: default the one `clformer devices` marks with *)
set -eu
build=${1:-build}
reps=${2:-3}
exe="$build/tools/clformer"
device=${3:-$("$exe" devices | sed -n 's/^ \* \([0-9]*:[0-9]*\) .*/\1/p')}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clf-bench-cache.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
run() { # label binaries pocl_dir clf_dir
  out=$( { /usr/bin/time -f "wall %e" env POCL_CACHE_DIR="$3" CLFORMER_CACHE_DIR="$4" \
           CLFORMER_CACHE_BINARIES="$2" "$exe" probe --device "$device" --no-measure; } 2>&1 )
  wall=$(printf '%s\n' "$out" | sed -n 's/^wall //p')
  bms=$(printf '%s\n' "$out" | sed -n 's/.* \([0-9.]*\) ms building.*/\1/p')
  printf '%-34s wall %6s s  build %7s ms\n' "$1" "$wall" "$bms"
}
for r in $(seq "$reps"); do
  for b in 0 1; do
    d="$tmp/b$b-$r"; mkdir -p "$d/pocl" "$d/clf"
    run "binaries=$b first process" "$b" "$d/pocl" "$d/clf"
    run "binaries=$b second process" "$b" "$d/pocl" "$d/clf"
    rm -rf "$d/pocl"; mkdir -p "$d/pocl"
    [ "$b" = 1 ] && run "binaries=1 driver cache emptied" 1 "$d/pocl" "$d/clf"
  done
done
