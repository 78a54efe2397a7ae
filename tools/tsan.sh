#!/bin/sh
# Runs the threads suite (tests/test_threads.c) and the runtime suite under
# ThreadSanitizer, in its own build directory (build-tsan), and fails on any
# report about clformer's code.  PoCL, LLVM and CLBlast are not built with
# TSan; tests/tsan.supp names the libraries whose reports are theirs
# (docs/threads-and-faults.md says which and why).
# usage: tools/tsan.sh [BUILD_DIR] [SUITE...]   (default: build-tsan threads runtime)
set -eu
cd "$(dirname "$0")/.."
build=${1:-build-tsan}
[ $# -gt 0 ] && shift
suites=${*:-threads runtime}
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" -Db_sanitize=thread -Db_lundef=false >/dev/null
fi
# Only the test programs run here (the whole project would double the time).
targets=""
for s in $suites; do targets="$targets tests/test_$s"; done
# shellcheck disable=SC2086
meson compile -C "$build" $targets
# halt_on_error: the first report fails the test (TSan's exit code 66);
# second_deadlock_stack for readable lock-order reports.
export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
# TSan's shadow memory needs the address layout it was built for: with more
# than 28 bits of mmap randomisation (Linux >= 6.5 defaults to 32 on some
# distributions) it fails at start, so randomisation is turned off for it.
run=""
if [ "$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 28)" -gt 28 ] && command -v setarch >/dev/null; then
  run="setarch $(uname -m) -R"
fi
# shellcheck disable=SC2086
$run meson test -C "$build" --no-rebuild --print-errorlogs --timeout-multiplier 4 $suites
