#!/usr/bin/env python3
"""bench_llamacpp_agreement.py - next-token agreement of clformer with
llama.cpp on a GGUF file along bench_gguf.py's text, beside llama.cpp's
agreement with itself across its settings (issue 42).

    PYTHONPATH=python CLFORMER_LIBRARY=build/libclformer.so python3 tools/bench_llamacpp_agreement.py
        MODEL.gguf [--tokens 200] [--build build] [--device S ...] [--json OUT]
        [--server ~/.cache/clformer-bench/llama-server/build/bin/llama-server]

(the Python binding as docs/python.md imports it from a build tree, and
NumPy: /opt/clf-py/bin/python has both.)

The text is tokenized by llama.cpp (its /tokenize, special tokens added as
the file says) and cut to --tokens + 1 ids; both sides read those ids, and
clformer's own tokenization of the text is compared with them.  Position i
(0 <= i < --tokens) is the next token after ids[0..i]: each way below gives
the argmax of the logits there and the gap between its top two logits.

llama.cpp: its llama-server (tools/bench-env.sh llama-server builds it),
one slot, one thread (-t 1 -tb 1), -b 512, --swa-full (else it cannot
reuse its cache on Gemma 3's windowed layers, and evaluates every prefix
whole), on 127.0.0.1, once per setting:
  - flash attention: its default (`-fa auto`, on for the CPU), or off;
    with it on, llama.cpp casts an F32 KV cache to F16 before attending
    (src/llama-graph.cpp), so F32 is measured with it off;
  - KV cache F16 (its default) or F32 (-ctk/-ctv f32);
  - physical batch -ub 512 (each prefix one batch) or -ub 1 (one row a
    pass; the server refuses -b 1);
and per setting one or both of two ways:
  - decode: prefix ids[:i+1] sent with cache_prompt after ids[:i], so each
    position is one row decoded onto the cache (checked: the server reports
    one row evaluated, the rest cached); the same rows whatever -ub;
  - whole: each prefix evaluated from an empty cache (cache_prompt false;
    checked: nothing cached), in passes of -ub rows.
The ways (SETTINGS): FA F16 -ub 512 decode and whole (the default), FA F16
-ub 1 whole, and with FA off F16 and F32 -ub 512, decode and whole.  Their
top-2 gaps are llama.cpp's n_probs log-probs.

clformer, on each --device in turn (default: the library's default device):
  - prefill: `clformer run` on all --tokens + 1 ids, every position's
    logits from one forward pass (products over many rows: the float path);
  - decode: the Python binding's Engine (max_step_rows=1) teacher-forced:
    one sequence with prompt ids[:1], max_new_tokens --tokens, whose
    `allowed` mask permits only the text's next token at each step, so
    each step decodes one row (the one-row products: on a CPU device, for
    Q5_0, Q5_1 and the k-quants, activations rounded to 8-bit blocks as
    llama.cpp does) onto an f32 KV pool; the argmax and gap come from each step's top_logprobs,
    which the engine takes before the mask.  It runs in a child process of
    this script (one OpenCL implementation per process): a --device that
    names an ICD file of clformer's OpenCL prefix (`intel` ->
    vendors/intel-cpu.icd) gets OCL_ICD_VENDORS set to it there, as the
    CLI's --device does, unless OCL_ICD_VENDORS is set already.

Printed, as a Markdown table whose columns are the llama.cpp ways: the
agreement (fraction of positions with the same argmax) of every pair of
llama.cpp ways, and of each clformer path with each way; then llama.cpp's
lowest self-agreement, each clformer path's lowest agreement with a way and
whether it is at least that, the agreement of clformer's two paths, and the
positions where a clformer path differs from llama.cpp's default (FA F16
-ub 512; its decode way beside clformer's decode, whole beside prefill),
with both top-2 gaps.  --json OUT writes all of it, with every way's tokens
and gaps.
"""
import argparse
import glob
import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_gguf  # noqa: E402  (its text)

# (-fa, KV cache type, -ub, ways): llama.cpp's default first
SETTINGS = [("auto", "f16", 512, ("decode", "whole")), ("auto", "f16", 1, ("whole",)),
            ("off", "f16", 512, ("decode", "whole")), ("off", "f32", 512, ("decode", "whole"))]
DEFAULT = {"prefill": "FA F16 ub512 whole", "decode": "FA F16 ub512 decode"}  # beside each clformer path


def free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


class Server:
  """One llama-server with one setting, stopped on leaving."""

  def __init__(self, a, fa, kv, ub):
    self.port = free_port()
    self.proc = subprocess.Popen([a.server, "-m", a.model, "--host", "127.0.0.1", "--port", str(self.port),
                                  "-t", "1", "-tb", "1", "-np", "1", "-c", str(max(512, a.tokens + 16)),
                                  "-b", "512", "-ub", str(ub), "-fa", fa, "-ctk", kv, "-ctv", kv, "--swa-full"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

  def __enter__(self):
    for _ in range(240):  # up once /health answers 200
      if self.proc.poll() is not None:
        raise RuntimeError(f"llama-server exited with {self.proc.returncode}")
      try:
        if urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2).status == 200:
          return self
      except OSError:
        time.sleep(0.5)
    raise RuntimeError("llama-server did not come up in 120 s")

  def __exit__(self, *exc):
    self.proc.terminate()
    self.proc.wait()

  def post(self, path, body):
    r = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", json.dumps(body).encode(),
                               {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(r, timeout=600))

  def way(self, ids, cache):
    """Each prefix's greedy next token and top-2 log-prob gap; cache: decode onto the cache, else whole."""
    toks, gaps = [], []
    for i in range(1, len(ids)):
      r = self.post("/completion", {"prompt": ids[:i], "n_predict": 1, "temperature": 0, "cache_prompt": cache,
                                    "return_tokens": True, "n_probs": 2})
      t = r["timings"]
      if (t["prompt_n"], t["cache_n"]) != ((1, i - 1) if cache else (i, 0)):
        raise RuntimeError(f"prefix {i}: {t['prompt_n']} rows evaluated, {t['cache_n']} cached")
      top = r["completion_probabilities"][0]["top_logprobs"]
      toks.append(r["tokens"][0])
      gaps.append(top[0]["logprob"] - top[1]["logprob"])
    return np.array(toks), np.array(gaps)


def llamacpp(a):
  """The text's ids and llama.cpp's ways: name -> (tokens, gaps)."""
  ways, ids = {}, None
  for fa, kv, ub, names in SETTINGS:
    with Server(a, fa, kv, ub) as s:
      if ids is None:
        ids = s.post("/tokenize", {"content": bench_gguf.TEXT, "add_special": True})["tokens"][:a.tokens + 1]
      for name in names:
        ways[f"{'FA' if fa == 'auto' else 'noFA'} {kv.upper()} ub{ub} {name}"] = s.way(ids, name == "decode")
      print(f"  llama.cpp -fa {fa} {kv} -ub {ub} done", file=sys.stderr, flush=True)
  return ids, ways


def agree(x, y):
  return float(np.mean(x == y))


def top2(logits):
  """Argmax and top-2 gap of each row."""
  part = np.sort(logits, -1)
  return logits.argmax(-1), part[:, -1] - part[:, -2]


def route_icd(device):
  """OCL_ICD_VENDORS for a --device that names an ICD file of clformer's OpenCL prefix, as the CLI routes."""
  if not device or os.environ.get("OCL_ICD_VENDORS") or ":" in device:
    return {}
  prefix = os.environ.get("CLFORMER_OPENCL_PREFIX") or os.path.join(
      os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share"), "clformer", "opencl")
  hits = [f for f in glob.glob(os.path.join(prefix, "vendors", "*.icd")) if device.lower() in os.path.basename(f)]
  return {"OCL_ICD_VENDORS": hits[0]} if len(hits) == 1 else {}


def decode_child(model, device, ids_path, out_path):
  """clformer's decode path, teacher-forced: a step a row, only the text's next token allowed."""
  import clformer
  ids = [int(x) for x in np.load(ids_path)[0]]

  def allowed(new, mask):
    t = ids[1 + len(new)]
    mask[:] = 0
    mask[t // 32] = np.uint32(1 << (t % 32))
    return False

  with clformer.Model(model, device=device or None) as m, m.engine(max_step_rows=1) as e:
    r = e.submit(ids[:1], max_new_tokens=len(ids) - 1, do_sample=False, logprobs=True, top_logprobs=2,
                 allowed=allowed).result()
    if r.tokens != ids[1:]:
      raise RuntimeError(f"the forced sequence ended {r.finish_reason} after {len(r.tokens)} tokens, off the text")
    np.savez(out_path, tokens=[lp.top[0][0] for lp in r.logprobs],
             gaps=[lp.top[0][1] - lp.top[1][1] for lp in r.logprobs], device=str(m.device))


def clformer_paths(a, device, ids, d):
  """clformer's two paths on one device: path -> (tokens, gaps), and the device's name."""
  cli = os.path.join(a.build, "tools", "clformer")
  dev = ["--device", device] if device else []
  np.save(f"{d}/ids.npy", np.array([ids], dtype=np.int64))
  subprocess.run([cli, "run", a.model, "--in", f"input_ids={d}/ids.npy", "--out", f"logits={d}/lg.npy"] + dev,
                 check=True, capture_output=True)
  paths = {"prefill": top2(np.load(f"{d}/lg.npy")[0][:len(ids) - 1])}
  subprocess.run([sys.executable, os.path.abspath(__file__), a.model, "--decode-child", f"{d}/ids.npy",
                  f"{d}/dec.npz"] + dev, check=True, env={**os.environ, **route_icd(device)})
  z = np.load(f"{d}/dec.npz")
  paths["decode"] = (z["tokens"], z["gaps"])
  return paths, str(z["device"])


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("model")
  ap.add_argument("--tokens", type=int, default=200)
  ap.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"))
  ap.add_argument("--device", action="append", help="clformer device(s), in turn; default the library's default")
  ap.add_argument("--json", help="write every figure, and each way's tokens and gaps, here")
  ap.add_argument("--server", default=os.path.expanduser("~/.cache/clformer-bench/llama-server/build/bin/llama-server"))
  ap.add_argument("--decode-child", nargs=2, metavar=("IDS", "OUT"), help=argparse.SUPPRESS)
  a = ap.parse_args()
  if a.decode_child:
    return decode_child(a.model, (a.device or [""])[0], *a.decode_child)

  ids, ways = llamacpp(a)
  cli = os.path.join(a.build, "tools", "clformer")
  tok = subprocess.run([cli, "tokenize", a.model, bench_gguf.TEXT], capture_output=True, text=True, check=True)
  cl_ids = [int(line.split("\t")[0]) for line in tok.stdout.splitlines() if line.strip()][:len(ids)]
  n = len(ids) - 1
  self_pairs = {f"{p} / {q}": agree(ways[p][0], ways[q][0]) for p, q in itertools.combinations(ways, 2)}
  lowest_self = min(self_pairs.values())
  out = {"model": os.path.basename(a.model), "positions": n, "tokens_match": cl_ids == ids, "ids": ids,
         "llamacpp": {k: {"tokens": v[0].tolist(), "gaps": v[1].tolist()} for k, v in ways.items()},
         "llamacpp_self": self_pairs, "llamacpp_lowest_self": lowest_self, "clformer": {}}
  rows = [(f"llama.cpp {k}", v[0]) for k, v in ways.items()]
  with tempfile.TemporaryDirectory() as d:
    for device in a.device or [""]:
      paths, name = clformer_paths(a, device, ids, d)
      cell = out["clformer"][device or "default"] = {"device": name}
      cell["prefill_vs_decode"] = agree(paths["prefill"][0], paths["decode"][0])
      for path, (toks, gaps) in paths.items():
        vs = {k: agree(toks, v[0]) for k, v in ways.items()}
        ref_toks, ref_gaps = ways[DEFAULT[path]]
        diff = [{"position": int(i), "clformer": int(toks[i]), "llamacpp": int(ref_toks[i]),
                 "clformer_gap": float(gaps[i]), "llamacpp_gap": float(ref_gaps[i])}
                for i in np.nonzero(toks != ref_toks)[0]]
        cell[path] = {"tokens": toks.tolist(), "gaps": gaps.tolist(), "vs": vs, "lowest": min(vs.values()),
                      "at_least_lowest_self": min(vs.values()) >= lowest_self, "differs_from_default": diff}
        rows.append((f"clformer {path}, {device or 'default'}", toks))

  print(f"{out['model']}: {n} positions; clformer's tokens are llama.cpp's: {out['tokens_match']}; "
        f"columns: llama.cpp " + ", ".join(f"({j}) {k}" for j, k in enumerate(ways, 1)))
  print("| | " + " | ".join(f"({j})" for j in range(1, len(ways) + 1)) + " |")
  print("|---" * (len(ways) + 1) + "|")
  for j, (label, toks) in enumerate(rows, 1):
    cells = ["-" if j == k else f"{agree(toks, v[0]):.3f}" for k, v in enumerate(ways.values(), 1)]
    print(f"| {f'({j}) ' if j <= len(ways) else ''}{label} | " + " | ".join(cells) + " |")
  print(f"llama.cpp's lowest self-agreement: {lowest_self:.3f}")
  for device, cell in out["clformer"].items():
    print(f"clformer on {cell['device']}: prefill / decode {cell['prefill_vs_decode']:.3f}")
    for path in ("prefill", "decode"):
      c = cell[path]
      print(f"  {path}: lowest {c['lowest']:.3f}, at least llama.cpp's lowest self-agreement: "
            f"{'yes' if c['at_least_lowest_self'] else 'NO'}; {len(c['differs_from_default'])} positions differ "
            f"from {DEFAULT[path]} (top-2 gaps clformer, llama.cpp): " +
            "; ".join(f"{x['position']} ({x['clformer_gap']:.3f}, {x['llamacpp_gap']:.3f})"
                      for x in c["differs_from_default"]))
  if a.json:
    with open(a.json, "w") as f:
      json.dump(out, f, indent=1)


if __name__ == "__main__":
  sys.exit(main())
