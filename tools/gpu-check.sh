#!/bin/sh
# The checks a lent GPU machine gets (issue 42's GPU figures), as one
# prepared run: that machine reaches nothing outside itself, has no meson,
# CLBlast or OpenCL loader of Debian's, and takes a working tree of at most
# 64 MiB, so the binaries travel built and stripped with the libraries they
# need, and the models are made there at their real shapes with random
# weights (tools/synth_model.py: speed depends on shapes and bytes, not
# values).
#
#   tools/gpu-check.sh pack [DIR]      here, after a build: DIR (default
#                                      build-gpu, ignored by git) gets bin/
#                                      (clformer and the device suites,
#                                      stripped) and lib/ (their libraries
#                                      beyond glibc and libstdc++)
#   tools/gpu-check.sh run [DIR] OUT   there: each step under a time limit,
#                                      its output in OUT, a summary in
#                                      OUT/summary.md
#
# With the device tool: run(command="tools/gpu-check.sh run build-gpu $OUT",
# carry=["build-gpu"], timeout_s=600).
#
# run finds NVIDIA's OpenCL driver (libnvidia-opencl.so.1: ldconfig's
# cache, /usr/local/nvidia, /usr/lib) and registers it for the loader it
# brings, unless OCL_ICD_VENDORS is set (then that device: how the script
# is tried on a CPU here).  The steps, most wanted first:
#   1. clformer devices; the probe (--json, full: properties, copy
#      bandwidth, SGEMM, attention, one-row products by weight type,
#      self-validation)
#   2. GPT-2 124M and SmolLM2-135M shaped models: greedy decode of 128
#      tokens after an 8-token prompt at f32, f16, q8, q4, q4k, q6k, ms a
#      token (clformer generate --profile)
#   3. the device suites (Check's summary line each)
# env: GPU_CHECK_LAYERS (the models' layers; default their own: 12, 30),
#      GPU_CHECK_SUITES (default below), GPU_CHECK_WEIGHTS (default
#      "f32 f16 q8 q4 q4k q6k"), GPU_CHECK_TOKENS (default 128).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
suites_default="norm embed movement dense patch attention linear linear_int paged weight_types models heads llama
  families generate engine engine_window gguf_embed chat vision validate"

pack() {
  dir=${1:-build-gpu}
  case $dir in /*) ;; *) dir="$repo/$dir" ;; esac
  [ -x "$repo/build/tools/clformer" ] || { echo "gpu-check: build first (meson setup build && ninja -C build)" >&2; exit 2; }
  rm -rf "$dir"
  mkdir -p "$dir/bin" "$dir/lib"
  bins="$repo/build/tools/clformer"
  for s in $suites_default; do bins="$bins $repo/build/tests/test_$s"; done
  for b in $bins; do
    [ -x "$b" ] || { echo "gpu-check: $b is missing" >&2; exit 2; }
    strip --strip-debug -o "$dir/bin/$(basename "$b")" "$b"
  done
  # the libraries beyond the C and C++ runtimes, which the GPU machine's
  # newer system has (Debian 12's glibc 2.36; that image's is newer)
  for lib in $(for b in $bins; do ldd "$b"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u); do
    case $(basename "$lib") in
      libc.so.*|libm.so.*|libstdc++.so.*|libgcc_s.so.*|ld-linux*|libdl.so.*|libpthread.so.*|librt.so.*) ;;
      *) cp -L "$lib" "$dir/lib/" ;;
    esac
  done
  strip --strip-debug "$dir"/lib/* 2>/dev/null || true
  size=$(du -sm "$dir" | cut -f1)
  echo "gpu-check: packed $(ls "$dir/bin" | wc -l) programs and $(ls "$dir/lib" | wc -l) libraries into $dir ($size MiB)"
  if [ "$size" -gt 44 ]; then
    echo "gpu-check: $size MiB with the tree's own would pass the 64 MiB the device tool carries" >&2
    exit 1
  fi
}

# nvidia_icd DIR: writes DIR/nvidia.icd naming NVIDIA's OpenCL driver; 1 if none
nvidia_icd() {
  lib=$(ldconfig -p 2>/dev/null | awk '/libnvidia-opencl\.so\.1/ {print $NF; exit}')
  if [ -z "$lib" ]; then
    for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
      if [ -e "$d/libnvidia-opencl.so.1" ]; then lib="$d/libnvidia-opencl.so.1"; break; fi
    done
  fi
  [ -n "$lib" ] || return 1
  echo "$lib" > "$1/nvidia.icd"
}

run() {
  if [ $# -eq 1 ]; then dir=build-gpu out=$1; else dir=$1 out=$2; fi
  case $dir in /*) ;; *) dir="$repo/$dir" ;; esac
  [ -x "$dir/bin/clformer" ] || { echo "gpu-check: no $dir/bin/clformer (tools/gpu-check.sh pack first, and carry it)" >&2; exit 2; }
  mkdir -p "$out"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if [ -z "${OCL_ICD_VENDORS:-}" ]; then
    mkdir -p "$work/vendors"
    if nvidia_icd "$work/vendors"; then
      export OCL_ICD_VENDORS="$work/vendors"
      echo "gpu-check: NVIDIA's OpenCL driver: $(cat "$work/vendors/nvidia.icd")"
    else
      echo "gpu-check: no libnvidia-opencl.so.1 found; the loader's default vendors" >&2
    fi
  fi
  export CLF_FIXTURES="$repo/tests/fixtures" CLFORMER_CACHE_DIR="$work/kernel-cache" CLF_REQUIRE_DEVICE=1
  sum="$out/summary.md"
  bin="$dir/bin"
  py=$(command -v python3)
  {
    echo "# gpu-check $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)"
    echo
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/GPU: /' || true
    echo
  } > "$sum"

  echo "== devices"
  "$bin/clformer" devices > "$out/devices.txt" 2>&1 || true
  { echo '```'; cat "$out/devices.txt"; echo '```'; echo; } >> "$sum"
  cat "$out/devices.txt"

  echo "== probe"
  rc=0
  timeout 240 "$bin/clformer" probe --json > "$out/probe.json" 2> "$out/probe.err" || rc=$?
  "$py" - "$out/probe.json" "$rc" >> "$sum" <<'EOF' || echo "probe: exit $rc, no JSON (probe.err)" >> "$sum"
import json, sys
rc = sys.argv[2]
d = json.load(open(sys.argv[1]))["devices"][0]
m = d.get("measured", {})
bw = m.get("bandwidth", {}).get("gb_per_s", 0)
print(f"probe (exit {rc}): copy {bw:.1f} GB/s (read + write)")
for g in m.get("sgemm", []):
    print(f"- SGEMM {g['m']}x{g['n']}x{g['k']}: {g.get('gflops', 0):.0f} GFLOP/s")
print()
print("| type | weights MiB | ms | GB/s | of the copy's |")
print("| --- | --- | --- | --- | --- |")
for e in m.get("decode_by_type", []):
    if "error" in e:
        print(f"| {e['type']} | | error: {e['error']} | | |")
    else:
        print(f"| {e['type']} | {e['weight_bytes'] / 2**20:.1f} | {e['ms']['median']:.4g} | {e['gb_per_s']:.1f} | {e['of_copy']:.2f} |")
v = d.get("validation", {})
bad = [x["name"] for x in v.get("variants", []) if not x.get("passed")]
print()
print(f"self-validation: {len(v.get('variants', []))} variants, {v.get('failed', '?')} failed"
      + (f": {', '.join(bad)}" if bad else "") + (f" ({v['error']})" if "error" in v else ""))
print()
EOF
  tail -25 "$sum"

  echo "== models"
  layers=${GPU_CHECK_LAYERS:-}
  tokens=${GPU_CHECK_TOKENS:-128}
  "$py" -c "import numpy as np; np.save('$work/ids.npy', np.arange(1000, 1008, dtype=np.int64)[None])"
  {
    echo "Greedy decode, $tokens new tokens after 8, random weights at the real shapes (tools/synth_model.py):"
    echo
    echo "| model | weights | MiB on the device | ms a token | launches a token | new tokens |"
    echo "| --- | --- | --- | --- | --- | --- |"
  } >> "$sum"
  for m in gpt2 smollm2; do
    "$py" "$repo/tools/synth_model.py" "$m" "$work/$m" ${layers:+--layers "$layers"}
    for w in ${GPU_CHECK_WEIGHTS:-f32 f16 q8 q4 q4k q6k}; do
      log="$out/generate-$m-$w.txt"
      rc=0
      timeout 150 "$bin/clformer" generate "$work/$m" --in input_ids="$work/ids.npy" --max-new-tokens "$tokens" \
        --greedy --weights "$w" --profile > /dev/null 2> "$log" || rc=$?
      mib=$(sed -n 's/.*weights [a-z0-9_]*, \([0-9.]*\) MiB on the device.*/\1/p' "$log" | head -1)
      ms=$(sed -n 's/.* then \([0-9.]*\) ms a token.*/\1/p' "$log" | head -1)
      launches=$(sed -n 's/.*ms of device time, \([0-9.]*\) launches.*/\1/p' "$log" | head -1)
      new=$(sed -n 's/.*: \([0-9]*\) new tokens, the first.*/\1/p' "$log" | head -1)
      [ "$rc" -eq 0 ] || ms="exit $rc ($(tail -1 "$log" | cut -c1-80))"
      echo "| $m | $w | ${mib:-?} | ${ms:-?} | ${launches:-?} | ${new:-?} |" | tee -a "$sum"
    done
    rm -rf "${work:?}/$m"
  done
  echo >> "$sum"

  echo "== suites"
  echo "Device suites (Check's summary):" >> "$sum"
  echo >> "$sum"
  for s in ${GPU_CHECK_SUITES:-$suites_default}; do
    rc=0
    (cd "$work" && timeout 300 "$bin/test_$s") > "$out/suite-$s.txt" 2>&1 || rc=$?
    line=$(grep -E '^[0-9]+%: Checks' "$out/suite-$s.txt" | tail -1)
    echo "- $s: ${line:-no summary} (exit $rc)" | tee -a "$sum"
  done
  # $OUT brings back 8 files: the summary, the probe, and the logs in one archive
  tar -C "$out" -czf "$work/logs.tgz" --exclude=summary.md --exclude=probe.json . && mv "$work/logs.tgz" "$out/logs.tgz"
  find "$out" -maxdepth 1 -type f ! -name summary.md ! -name probe.json ! -name logs.tgz -delete
  echo "gpu-check: $sum"
}

case ${1:-} in
  pack) shift; pack "$@" ;;
  run) shift; [ $# -ge 1 ] || { echo "usage: tools/gpu-check.sh run [DIR] OUT" >&2; exit 2; }; run "$@" ;;
  *) echo "usage: tools/gpu-check.sh pack [DIR] | run [DIR] OUT" >&2; exit 2 ;;
esac
