#!/usr/bin/env python3
"""bench_llamacpp_agreement.py - next-token agreement of clformer with
llama.cpp on a GGUF file, along bench_gguf.py's text, beside llama.cpp's
agreement with itself.

    python3 tools/bench_llamacpp_agreement.py MODEL.gguf [--tokens 200] [--build build]
        [--server ~/.cache/clformer-bench/llama-server/build/bin/llama-server]

llama.cpp is its llama-server (tools/bench-env.sh llama-server builds it),
started here on 127.0.0.1 with one thread and stopped at the end.  The text
is tokenized by llama.cpp (BOS added, as its /tokenize does) and clformer's
own tokenization of it is compared with that.  clformer: `clformer run` on
the first --tokens + 1 ids, the argmax at every position.  llama.cpp, two
ways: each prefix decoded a token at a time onto its cache (cache_prompt),
and each prefix evaluated whole (no cache); printed: the fraction of
positions where clformer's next token is each way's, and where the two
ways of llama.cpp agree with each other.
"""
import argparse
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


def free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("model")
  ap.add_argument("--tokens", type=int, default=200)
  ap.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"))
  ap.add_argument("--server", default=os.path.expanduser("~/.cache/clformer-bench/llama-server/build/bin/llama-server"))
  a = ap.parse_args()
  cli = os.path.join(a.build, "tools", "clformer")
  port = free_port()
  srv = subprocess.Popen([a.server, "-m", a.model, "--host", "127.0.0.1", "--port", str(port), "-t", "1", "-c",
                          str(max(512, a.tokens + 16))], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

  def post(path, body):
    r = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                               {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(r, timeout=120))

  try:
    for _ in range(120):  # the server is up once /health answers 200
      try:
        if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200:
          break
      except OSError:
        time.sleep(0.5)
    ids = post("/tokenize", {"content": bench_gguf.TEXT, "add_special": True})["tokens"][:a.tokens + 1]
    with tempfile.TemporaryDirectory() as d:
      np.save(f"{d}/ids.npy", np.array([ids], dtype=np.int64))
      subprocess.run([cli, "run", a.model, "--in", f"input_ids={d}/ids.npy", "--out", f"logits={d}/lg.npy"],
                     check=True, capture_output=True)
      ours = np.load(f"{d}/lg.npy")[0].argmax(-1)[:len(ids) - 1]
    tok = subprocess.run([cli, "tokenize", a.model, bench_gguf.TEXT], capture_output=True, text=True, check=True)
    cl_ids = [int(line.split("\t")[0]) for line in tok.stdout.splitlines() if line.strip()][:len(ids)]
    ways = {}
    for name, cache in (("decode", True), ("prefill", False)):
      ways[name] = np.array([post("/completion", {"prompt": ids[:i], "n_predict": 1, "temperature": 0,
                                                  "cache_prompt": cache, "return_tokens": True})["tokens"][0]
                             for i in range(1, len(ids))])
  finally:
    srv.terminate()
    srv.wait()
  print(f"{os.path.basename(a.model)}: {len(ours)} positions; clformer's tokens are llama.cpp's: {cl_ids == ids}")
  for name, ref in ways.items():
    print(f"  clformer vs llama.cpp {name}: {float(np.mean(ours == ref)):.3f}")
  print(f"  llama.cpp decode vs prefill: {float(np.mean(ways['decode'] == ways['prefill'])):.3f}")


if __name__ == "__main__":
  sys.exit(main())
