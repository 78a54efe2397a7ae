#!/usr/bin/env python3
"""bench_vs_torch.py - a model's forward pass in clformer and in PyTorch, side
by side in one run, as a ratio.

Makes random inputs of the given batch and length, times transformers'
forward() in PyTorch (eval, no grad, median of N after a warm-up) and
`clformer run --repeat N` on the same .npy inputs (its forward_ms median),
checks that both give the same last_hidden_state (max abs error), and prints
one line per shape.  Needs torch and transformers (e.g. the /opt/clf-ref
environment of tools/fixtures/README.md).

This script stays as it was (a model directory of your own, several shapes,
PyTorch only, no check of PyTorch's BLAS or threads).  For figures to quote
use its sibling tools/bench.py: the standard models beside PyTorch AND ONNX
Runtime at their checked best configurations, plus GPT-2 decoding.

    python tools/bench_vs_torch.py MODEL_DIR [--build build] [--repeat 10]
        [--shapes 1x32,8x128] [--device S] [--threads 2]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from transformers import AutoModel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--build", default="build")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--shapes", default="1x32,8x128")
    ap.add_argument("--device", default=None)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = AutoModel.from_pretrained(a.model_dir).eval()
    vocab = model.config.vocab_size
    exe = os.path.join(a.build, "tools", "clformer")
    print(f"model {a.model_dir}; torch {torch.__version__} with {a.threads} threads; "
          f"median of {a.repeat}")
    print(f"{'batch x len':>12} {'torch ms':>10} {'clformer ms':>12} {'torch/clformer':>15} {'max abs diff':>13}")
    rng = np.random.default_rng(0)
    for shape in a.shapes.split(","):
        B, L = (int(x) for x in shape.split("x"))
        ids = rng.integers(1000, min(vocab, 20000), size=(B, L)).astype(np.int64)
        mask = np.ones((B, L), np.int64)
        with tempfile.TemporaryDirectory() as tmp:
            np.save(f"{tmp}/ids.npy", ids)
            np.save(f"{tmp}/mask.npy", mask)
            cmd = [exe, "run", a.model_dir, "--in", f"input_ids={tmp}/ids.npy",
                   "--in", f"attention_mask={tmp}/mask.npy",
                   "--out", f"last_hidden_state={tmp}/h.npy", "--repeat", str(a.repeat)]
            if a.device:
                cmd += ["--device", a.device]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"clformer failed: {r.stderr}")
            m = re.search(r"forward_ms median=([0-9.]+)", r.stderr)
            ours = float(m.group(1))
            got = np.load(f"{tmp}/h.npy")
        ti, tm = torch.from_numpy(ids), torch.from_numpy(mask)
        with torch.no_grad():
            want = model(input_ids=ti, attention_mask=tm).last_hidden_state.numpy()
            times = []
            for _ in range(a.repeat):
                t0 = time.perf_counter()
                model(input_ids=ti, attention_mask=tm)
                times.append((time.perf_counter() - t0) * 1e3)
        theirs = statistics.median(times)
        diff = float(np.abs(got - want).max())
        print(f"{shape:>12} {theirs:>10.2f} {ours:>12.2f} {theirs / ours:>14.2f}x {diff:>13.2e}")


if __name__ == "__main__":
    main()
