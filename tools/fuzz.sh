#!/bin/sh
# Runs the libFuzzer targets of tests/fuzz (docs/fuzzing.md): configures and
# builds build-fuzz (clang, ASan + UBSan, -Dfuzz=true) when needed, seeds a
# corpus per target from tests/fixtures, runs each target in turn for
# $FUZZ_SECONDS (default 60) seconds in one process (no -jobs: the cores
# are shared, and -jobs would write fuzz-N.log into the working directory),
# $FUZZ_PARALLEL targets at a time (default 1; CI runs 2, one a core), and
# prints per target, in order, the executions it ran.  Exits 1 if any target found a
# crash, a leak, a sanitizer report, an input past 10 s or memory past its
# limit (rss_limit below); the input that did it is left in
# build-fuzz/crashes/<target>/ and the log in build-fuzz/fuzz-logs/.
# A finding becomes a Check test of that exact input (docs/fuzzing.md).
# usage: tools/fuzz.sh [TARGET...]    (default: every target)
# env:   FUZZ_SECONDS, FUZZ_PARALLEL, FUZZ_BUILD (default build-fuzz), FUZZ_ARGS (extra
#        libFuzzer flags), FUZZ_KEEP_CORPUS=1 (keep the corpus grown so far
#        instead of reseeding it from the fixtures)
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
build=${FUZZ_BUILD:-build-fuzz}
secs=${FUZZ_SECONDS:-60}
par=${FUZZ_PARALLEL:-1}
case $par in ''|*[!0-9]*|0) echo "fuzz.sh: FUZZ_PARALLEL must be a count of targets, not \"$par\"" >&2; exit 2 ;; esac
fx=tests/fixtures
all="safetensors gguf shard_index config generation_config preprocessor_config npy
     tok_vocab_txt tok_vocab_json tok_merges tok_spm tok_marian_vocab tok_config tok_json tok_gguf
     png jpeg cache verdicts profile chat_template jinja_grammar"
targets=${*:-$all}

if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ meson setup "$build" -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi
meson compile -C "$build" fuzz >/dev/null

# The OpenCL drivers' own leaks are suppressed by name (tests/lsan-drivers.supp);
# UBSan stops at its first report, so that libFuzzer counts it as a crash.
export LSAN_OPTIONS="suppressions=$root/tests/lsan-drivers.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# intercept_tls_get_addr=0: see .ci/run (LSan tracer crash with GCC 12).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:intercept_tls_get_addr=0}"
export CLFORMER_LOG=off
# The targets' temporary directories: one killed by a finding cannot remove
# its own, so they go here, emptied on every run, not into /tmp.
export TMPDIR="$root/$build/fuzz-tmp"
rm -rf "$TMPDIR"; mkdir -p "$TMPDIR"

# put DIR FILE... : copies fixtures into a corpus directory
put() { d=$1; shift; for f in "$@"; do cp "$f" "$d/$(echo "$f" | tr / _)"; done; }
# prefixed DIR BYTE FILE... : the files with one selector byte before them
prefixed() {
  d=$1; b=$2; shift 2
  for f in "$@"; do { printf "\\$b"; cat "$f"; } > "$d/$b-$(echo "$f" | tr / _)"; done
}

seed_json_index() {
  d=$1
  s1=model-00001-of-00002.safetensors s2=model-00002-of-00002.safetensors
  printf '{"metadata": {"total_size": 500}, "weight_map": {"a.f32": "%s", "b.f16": "%s", "c.bf16": "%s", "d.i64": "%s", "e.empty": "%s"}}' \
    $s1 $s1 $s1 $s1 $s1 > "$d/one-shard.json"
  printf '{"weight_map": {"a.f32": "%s", "embeddings.LayerNorm.bias": "%s", "embeddings.word_embeddings.weight": "%s", "pooler.dense.weight": "%s"}}' \
    $s1 $s2 $s2 $s2 > "$d/two-shards.json"
  printf '{"weight_map": {}}' > "$d/empty.json"
}

seed_verdicts() {
  d=$1
  printf 'clformer-verdicts 1\ndevice: PoCL / cpu / driver 3.1\nattention.fused HEAD_DIM=64 BQ=32 BK=32\tfail\t3.500000e-01\t1.000000e-03\nnorm.layer_norm\tpass\t1.200000e-07\t1.000000e-05\nmovement.copy_strided\tfail\tnan\t1.000000e-05\nend 3\n' > "$d/three.txt"
  printf 'clformer-verdicts 1\ndevice: x\nend 0\n' > "$d/none.txt"
}

# seed TARGET DIR: the corpus of one target
seed() {
  t=$1; d=$2
  case $t in
    safetensors) put "$d" $fx/loader/ref.safetensors $fx/bert/model.safetensors ;;
    gguf) put "$d" $fx/gguf/*.gguf $fx/gguf_tokenizers/*.gguf ;;
    shard_index) seed_json_index "$d" ;;
    config) put "$d" $fx/*/config.json ;;
    generation_config)
      prefixed "$d" 000 $fx/gpt2/generation_config.json $fx/gpt2_legacy/generation_config.json
      prefixed "$d" 001 $fx/marian/generation_config.json $fx/marian_paper/generation_config.json $fx/marian/config.json ;;
    preprocessor_config) put "$d" $fx/*/preprocessor_config.json $fx/images/*/preprocessor_config.json ;;
    npy) put "$d" $fx/loader/*.npy $fx/images/classify_vit_cls.npy $fx/images/mae_noise.npy $fx/bert/padded.input_ids.npy ;;
    tok_vocab_txt) put "$d" $fx/tokenizers/bert/vocab.txt $fx/tokenizers/bert_cased/vocab.txt ;;
    tok_vocab_json) put "$d" $fx/tokenizers/gpt2/vocab.json ;;
    tok_merges) put "$d" $fx/tokenizers/gpt2/merges.txt ;;
    tok_spm) put "$d" $fx/tokenizers/marian/source.spm $fx/tokenizers/marian/target.spm ;;
    tok_marian_vocab) put "$d" $fx/tokenizers/marian/vocab.json ;;
    tok_config)
      prefixed "$d" 000 $fx/tokenizers/bert/tokenizer_config.json $fx/tokenizers/bert_cased/tokenizer_config.json
      prefixed "$d" 001 $fx/tokenizers/gpt2/tokenizer_config.json
      prefixed "$d" 002 $fx/tokenizers/marian/tokenizer_config.json ;;
    tok_json) put "$d" $fx/tokenizers_json/*/tokenizer.json ;;
    tok_gguf) put "$d" $fx/gguf_tokenizers/*.gguf $fx/gguf_models/*/model.gguf ;;
    png) put "$d" $fx/images/*.png ;;
    jpeg) put "$d" $fx/images/*.jpg ;;
    cache) CLF_FUZZ_MAKE_SEED="$d/valid.clbin" "$build/tests/fuzz/fuzz_cache"
           head -c 60 "$d/valid.clbin" > "$d/truncated.clbin" ;;
    verdicts) seed_verdicts "$d" ;;
    profile) CLF_FUZZ_MAKE_SEED="$d/valid.profile" "$build/tests/fuzz/fuzz_profile"
             put "$d" profiles/*.profile ;;
    chat_template)
      # each fixture template, alone and with a NUL and a context
      for f in $fx/chat_templates/templates/*.jinja; do
        cp "$f" "$d/$(basename "$f")"
        { cat "$f"; printf '\000{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": "a", "tool_calls": [{"id": "call12345", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]}, {"role": "tool", "tool_call_id": "call12345", "content": "r"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}], "add_generation_prompt": true, "bos_token": "<s>"}'; } > "$d/ctx-$(basename "$f")"
      done ;;
    jinja_grammar)
      # The input is a list of choices, not text: any bytes are an input.
      # The fixture templates' first 64 bytes give varied ones; runs of
      # 0x01, 0x05 and 0x07 start with a print, a for loop, a namespace.
      for f in $fx/chat_templates/templates/*.jinja; do head -c 64 "$f" > "$d/$(basename "$f")"; done
      for b in 001 005 007; do head -c 64 /dev/zero | tr '\000' "\\$b" > "$d/run-$b"; done ;;
    *) echo "fuzz.sh: no target $t (targets: $(echo $all))" >&2; exit 2 ;;
  esac
}

# rss_limit TARGET: the memory (MiB, and the largest single malloc) past
# which an input is a finding.  Baselines under ASan, 2026-12-05: 70-530
# MiB for the readers; up to 840 MiB in 16 s for the targets that hold a
# PoCL context (LLVM, compiled kernels); the image readers accept up to
# Pillow's pixel limit by design (docs/fuzzing.md), a few hundred MiB.
rss_limit() {
  case $1 in
    config|generation_config|cache|verdicts|profile|png|jpeg) echo 2048 ;;
    *) echo 1024 ;;
  esac
}

# timeout TARGET: the seconds one input may take before it is a finding.
# A chat template's render is bounded by its budget (docs/chat.md: the
# hostile renders stop within 0.5 s without sanitizers), so 5 s under ASan
# is a hang; the readers keep 10.
timeout_s() {
  case $1 in
    chat_template|jinja_grammar) echo 5 ;;
    *) echo 10 ;;
  esac
}

# fuzz_one TARGET: runs it; its line of the report goes to $log.result,
# and $log.failed marks a finding.
fuzz_one() {
  t=$1
  corpus="$build/corpus/$t" crashes="$build/crashes/$t" log="$build/fuzz-logs/$t.log"
  rm -f "$log.result" "$log.failed"
  if [ "${FUZZ_KEEP_CORPUS:-0}" != 1 ] || [ ! -d "$corpus" ]; then
    rm -rf "$corpus"; mkdir -p "$corpus"; seed "$t" "$corpus"
  fi
  rm -rf "$crashes"; mkdir -p "$crashes"
  seeds=$(ls "$corpus" | wc -l)
  rc=0
  # shellcheck disable=SC2086
  "$build/tests/fuzz/fuzz_$t" -max_total_time="$secs" -rss_limit_mb="$(rss_limit "$t")" -timeout="$(timeout_s "$t")" \
    -print_final_stats=1 -artifact_prefix="$crashes/" ${FUZZ_ARGS:-} "$corpus" > "$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1 runs in \2 s/p' "$log" | tail -1)
  if [ "$rc" -ne 0 ] || [ -n "$(ls "$crashes")" ]; then
    : > "$log.failed"
    { echo "$t: FAILED (exit $rc): $(ls "$crashes" | tr '\n' ' ')in $crashes/, log $log"
      grep -m3 -E '^==[0-9]+==ERROR|runtime error|ALARM|out-of-memory|^SUMMARY' "$log" | sed 's/^/  /' || true
    } > "$log.result"
  else
    echo "$t: ${runs:-? runs} from $seeds seeds, corpus now $(ls "$corpus" | wc -l), no findings" > "$log.result"
  fi
}

for t in $targets; do
  case " $(echo $all) " in *" $t "*) ;; *) echo "fuzz.sh: no target $t (targets: $(echo $all))" >&2; exit 2 ;; esac
done
mkdir -p "$build/fuzz-logs" "$build/crashes" "$build/corpus"
# In batches of $par (the targets all run $secs, so a batch ends together).
batch=""
n=0
for t in $targets; do
  fuzz_one "$t" &
  batch="$batch $t"
  n=$((n + 1))
  if [ "$n" -ge "$par" ]; then
    wait
    for b in $batch; do cat "$build/fuzz-logs/$b.log.result" 2>/dev/null || echo "$b: no verdict (see above)"; done
    batch="" n=0
  fi
done
wait
for b in $batch; do cat "$build/fuzz-logs/$b.log.result" 2>/dev/null || echo "$b: no verdict (see above)"; done
# A target with no report line stopped before its verdict (its seeding
# failed): that fails the run too.
failed=0
for t in $targets; do
  if [ -e "$build/fuzz-logs/$t.log.failed" ] || [ ! -e "$build/fuzz-logs/$t.log.result" ]; then failed=1; fi
done
exit $failed
