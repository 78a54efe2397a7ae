#!/usr/bin/env python3
"""serve_load_test.py - load test of clformer.serve in both of its modes: in one
process (`python -m clformer.serve DIR`, a child of this one) and on a local
Ray (127.0.0.1 only, no dashboard) with --replicas replicas sharing the
machine's one device; the tiny GPT-2 fixture (with the sampling fixture's
tokenizer) serving embeddings and streamed greedy completions.

Phase "clean" sends --requests requests from --concurrency client threads,
embeddings and streamed completions alternating; phase "kill" does the same
and kills one model replica (ray.kill of its actor, or SIGKILL to its pid
with --kill-with signal) when half are answered.  Phase "burst" sends 100
concurrent 8 MB bodies that must be refused, with valid requests among them
that must still be answered within 2 s, and checks that no replica was
replaced and that the serving processes' memory comes back (issue 21).
Phase "churn" (issue 41) sends --churn streamed completions from
--concurrency clients, one in four abandoned after its first chunk and one
in four given up by its client before any answer (a 5 ms read deadline),
twice: every other stream must be answered whole and right, the engine must
then run nothing and hold no KV block (/stats), and the serving processes'
memory must not grow from the first round to the second.  Phase "kill" is
Ray's alone.
Every answer is checked against clformer.Model run in this process on the
same directory (Model.embed; Model.stream's pieces joined); a client retries
on 503, a connection error, a timeout or a stream cut without [DONE], at most
--retries times; every attempt has a timeout and the phase a deadline, so
nothing hangs.  Prints p50/p99 latency per kind and the throughput; exits 1
when an answer is wrong, a request failed past its retries, or Ray did not
bring the killed replica back.

    tools/serve_load_test.py [--requests 200] [--concurrency 16] [--replicas 2] [--phases clean,kill]
                             [--modes one-process,ray] [--single-phases churn,burst]
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FX = os.environ.get("CLF_FIXTURES") or os.path.join(HERE, "..", "tests", "fixtures")
# Characters whose tokens fit the tiny GPT-2's 128-entry vocabulary with the sampling fixture's tokenizer.
ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789()+*=-"


def model_dir(root):
    d = os.path.join(root, "gpt2")
    os.makedirs(d)
    for f in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy(os.path.join(FX, "gpt2", f), d)
    tok = os.path.join(FX, "sampling", "tokenizer")
    for f in os.listdir(tok):
        shutil.copy(os.path.join(tok, f), d)
    return d


def prompts(m, n, seed=7):
    """n distinct random texts whose token ids all fit the model's vocabulary."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        t = "".join(rng.choice(list(ALPHABET), size=int(rng.integers(3, 10))))
        if t not in out and int(m.tokenize(t).max()) < 128:
            out.append(t)
    return out


class Client:
    """One request with bounded retries; returns (outcome, latency, attempts, detail)."""

    def __init__(self, base, timeout, retries, max_tokens):
        self.base, self.timeout, self.retries, self.max_tokens = base, timeout, retries, max_tokens
        self.local = threading.local()
        self.lock = threading.Lock()
        self.replicas = []  # the replica of each request taken, in order

    def session(self):
        import requests
        if not hasattr(self.local, "s"):
            self.local.s = requests.Session()
        return self.local.s

    def seen(self, r):
        """Notes which replica took a request (the X-Clformer-Replica header)."""
        with self.lock:
            self.replicas.append(r.headers.get("X-Clformer-Replica", "?"))

    def stats(self):
        return self.session().get(self.base + "/stats", timeout=(5, self.timeout)).json()

    def embed(self, text):
        r = self.session().post(self.base + "/v1/embeddings", json={"input": text}, timeout=(5, self.timeout))
        if r.status_code != 200:
            return r.status_code, r.text
        self.seen(r)
        return 200, np.array(r.json()["data"][0]["embedding"], dtype=np.float32)

    def stream(self, prompt):
        t0 = time.monotonic()
        body = {"prompt": prompt, "max_tokens": self.max_tokens, "temperature": 0, "stream": True}
        with self.session().post(self.base + "/v1/completions", json=body, stream=True,
                                 timeout=(5, self.timeout)) as r:
            if r.status_code != 200:
                return r.status_code, r.text
            self.seen(r)
            pieces, done = [], False
            for line in r.iter_lines(decode_unicode=True):
                if time.monotonic() - t0 > self.timeout:
                    return "timeout", "the stream ran past the timeout"
                if not line:
                    continue
                data = line[len("data: "):]
                if data == "[DONE]":
                    done = True
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    # an error after the stream was accepted: the replica failed (500: the device, 503:
                    # it died and none could resume the text); both say retry, and have OpenAI's type
                    # server_error (no numeric status travels in the event)
                    err = chunk["error"]
                    return (503 if err.get("type") == "server_error" else err.get("type")), err["message"]
                pieces.append(chunk["choices"][0]["text"])
            if not done:
                return "cut", "the stream ended without [DONE]"
            return 200, "".join(pieces)

    def request(self, kind, arg):
        import requests
        t0 = time.monotonic()
        last = None
        for attempt in range(self.retries + 1):
            try:
                status, got = (self.embed if kind == "embeddings" else self.stream)(arg)
            except (requests.ConnectionError, requests.Timeout) as e:
                status, got = "connection", str(e)[:200]
            if status == 200:
                return "ok", time.monotonic() - t0, attempt + 1, got
            last = (status, got)
            if status not in (503, "connection", "timeout", "cut"):
                break  # a 4xx or 500 is an answer, not a failure to retry
            time.sleep(min(0.2 * 2 ** attempt, 2.0))
        outcome = "refused" if last[0] == 503 else "failed"
        return outcome, time.monotonic() - t0, attempt + 1, f"{last[0]}: {last[1]}"


def percentile(xs, q):
    return float(np.percentile(np.array(xs), q)) * 1000 if xs else float("nan")


def replica_names(ray):
    """The model replicas: Ray's actor names, or in one process the server's pid (`ray` is its Popen)."""
    if isinstance(ray, subprocess.Popen):
        return [f"pid {ray.pid}"] if ray.poll() is None else []
    return sorted(a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if "ModelReplica" in a["name"])


def run_phase(name, args, client, texts, want_emb, want_text, ray, kill):
    n = args.requests
    jobs = [("embeddings" if i % 2 == 0 else "completions", texts[i % len(texts)]) for i in range(n)]
    results = [None] * n
    done_count = [0]
    lock = threading.Lock()
    killed = {}

    def one(i):
        kind, text = jobs[i]
        results[i] = client.request(kind, text)
        with lock:
            done_count[0] += 1

    def killer():
        while done_count[0] < int(n * args.kill_after) and time.monotonic() < t_end:
            time.sleep(0.05)
        # the replica that took most of the last 32 requests: it has some in flight
        with client.lock:
            recent = client.replicas[-32:]
        tag = max(set(recent), key=recent.count) if recent else None
        names = replica_names(ray)
        victim = next((x for x in names if x.endswith("#" + str(tag))), names[0])
        actor = ray.get_actor(victim, namespace="serve")
        if args.kill_with == "signal":
            # SIGKILL to its process, as a crash would end it
            pid = ray.get(actor.__ray_call__.remote(lambda self: os.getpid()), timeout=10)
            os.kill(pid, signal.SIGKILL)
            victim += f" (pid {pid}, SIGKILL)"
        else:
            ray.kill(actor, no_restart=True)
        killed.update(name=victim, at=done_count[0], t=time.monotonic())

    stats0 = client.stats()
    taken0 = len(client.replicas)
    t0 = time.monotonic()
    t_end = t0 + args.phase_deadline
    kt = threading.Thread(target=killer, daemon=True) if kill else None
    with ThreadPoolExecutor(args.concurrency) as pool:
        if kt:
            kt.start()
        futs = [pool.submit(one, i) for i in range(n)]
        _, pending = wait(futs, timeout=args.phase_deadline)
        hung = len(pending)
        for f in pending:
            f.cancel()
    wall = time.monotonic() - t0

    ok = wrong = refused = failed = retried = 0
    max_diff = 0.0
    lat = {"embeddings": [], "completions": []}
    problems = []
    for i, r in enumerate(results):
        if r is None:
            continue
        outcome, latency, attempts, got = r
        kind, text = jobs[i]
        retried += attempts > 1
        if outcome == "ok":
            if kind == "embeddings":
                diff = float(np.abs(got - want_emb[text]).max())
                max_diff = max(max_diff, diff)
                good = diff <= 1e-5
            else:
                good = got == want_text[text]
            if good:
                ok += 1
                lat[kind].append(latency)
            else:
                wrong += 1
                problems.append(f"#{i} {kind} {text!r}: wrong answer {str(got)[:80]!r}")
        elif outcome == "refused":
            refused += 1
        else:
            failed += 1
            problems.append(f"#{i} {kind} {text!r}: {got[:200]}")
    print(f"== phase {name}: {n} requests ({args.concurrency} clients, {args.replicas} replicas), wall {wall:.1f} s")
    if kill:
        print(f"   killed {killed.get('name', 'nothing')} after {killed.get('at', '?')} answers")
    print(f"   correct {ok}, wrong {wrong}, refused with 503 {refused}, failed {failed}, hung {hung}; "
          f"retried {retried}")
    for kind, xs in lat.items():
        print(f"   {kind:11s} n={len(xs):3d} p50 {percentile(xs, 50):7.1f} ms  p99 {percentile(xs, 99):7.1f} ms")
    print(f"   throughput {ok / wall:.1f} answers/s; embeddings max |served - Model.embed| = {max_diff:.3g}")
    taken = client.replicas[taken0:]
    print("   requests taken per replica: " + ", ".join(f"{t} {taken.count(t)}" for t in sorted(set(taken))))
    stats1 = client.stats()
    print("   ingress: " + ", ".join(f"{k} {stats1[k] - stats0.get(k, 0)}" for k in sorted(stats1)
                                   if isinstance(stats1[k], int)))
    for p in problems[:10]:
        print("   " + p)
    return wrong == 0 and failed == 0 and hung == 0 and ok + refused == n, killed


def serve_processes():
    """pid -> role of the serving processes on this machine (Ray sets their
    titles): the HTTP proxy, the ingress, the model replicas."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        for role, mark in (("proxy", "ray::ProxyActor"), ("ingress", ":Ingress"), ("replica", ":ModelReplica")):
            if cmd.startswith("ray::") and mark in cmd:
                out[int(pid)] = role
    return out


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def rss_by_role(server=None):
    """RSS in MB of the serving processes by role (one process: "server")."""
    if isinstance(server, subprocess.Popen):
        return {"server": rss_mb(server.pid)}
    by = {}
    for pid, role in serve_processes().items():
        by[role] = by.get(role, 0.0) + rss_mb(pid)
    return by


def churn_round(args, client, texts, want_text):
    """--churn streamed completions from --concurrency clients: i % 4 == 0
    read one chunk and hang up, i % 4 == 1 give up before any answer (a
    5 ms read deadline), the others read to [DONE] (Client.request, with
    its retries).  Returns (complete and right, wrong or lost, abandoned)."""
    import requests
    counts = {"ok": 0, "lost": 0, "abandoned": 0}
    lock = threading.Lock()
    problems = []

    def one(i):
        text = texts[i % len(texts)]
        body = {"prompt": text, "max_tokens": args.max_tokens, "temperature": 0, "stream": True}
        kind = "abandoned"
        if i % 4 == 0:
            try:
                with requests.post(client.base + "/v1/completions", json=body, stream=True, timeout=(5, 30)) as r:
                    next(r.iter_lines(), None)  # the first chunk, then the connection is closed
            except requests.RequestException:
                pass
        elif i % 4 == 1:
            try:
                requests.post(client.base + "/v1/completions", json=body, stream=True, timeout=(5, 0.005)).close()
            except requests.RequestException:
                pass
        else:
            outcome, _, _, got = client.request("completions", text)
            kind = "ok" if outcome == "ok" and got == want_text[text] else "lost"
            if kind == "lost":
                problems.append(f"{text!r}: {outcome} {str(got)[:120]}")
        with lock:
            counts[kind] += 1

    with ThreadPoolExecutor(args.concurrency) as pool:
        for f in [pool.submit(one, i) for i in range(args.churn)]:
            f.result(timeout=args.phase_deadline)
    for p in problems[:5]:
        print("   " + p)
    return counts


def engine_idle(client, replicas, seconds=30.0):
    """Whether every replica's engine runs and queues nothing and holds no
    KV block within `seconds`: /stats answers for one replica at a time
    (Serve picks it), so on Ray each is asked for until all have said so."""
    t0, idle, last = time.monotonic(), set(), None
    while time.monotonic() - t0 < seconds:
        st = client.stats()["replica"]
        last = st.get("engine") or {}
        if last.get("running") == 0 and last.get("waiting") == 0 and last.get("blocks_used") == 0:
            idle.add(st.get("replica"))
            if len(idle) >= replicas:
                return True, last
        time.sleep(0.1)
    return False, last


def run_churn(args, client, texts, want_text, server, replicas):
    """Phase churn (see the module's text), --churn-rounds rounds."""
    ok = True
    rss = [rss_by_role(server)]
    for k in range(args.churn_rounds):
        t0 = time.monotonic()
        counts = churn_round(args, client, texts, want_text)
        wall = time.monotonic() - t0
        idle, eng = engine_idle(client, replicas)
        time.sleep(1)
        rss.append(rss_by_role(server))
        print(f"== phase churn, round {k + 1}: {args.churn} streams ({args.concurrency} clients), wall {wall:.1f} s")
        print(f"   answered whole and right {counts['ok']}, lost or wrong {counts['lost']}, abandoned "
              f"{counts['abandoned']}; engine afterwards: running {eng.get('running')}, waiting "
              f"{eng.get('waiting')}, KV blocks used {eng.get('blocks_used')}")
        print("   RSS MB before -> after: " + ", ".join(f"{r} {rss[-2].get(r, 0):.0f} -> {rss[-1].get(r, 0):.0f}"
                                                       for r in sorted(rss[-1])))
        ok &= counts["lost"] == 0 and counts["ok"] + counts["abandoned"] == args.churn
        if not idle:
            print("   the engine did not come back to idle within 30 s: a sequence or its blocks leaked")
            ok = False
        if k >= 1:
            grown = {r: rss[-1].get(r, 0) - rss[-2].get(r, 0) for r in rss[-1]}
            if any(g > args.churn_rss_mb for g in grown.values()):
                print(f"   memory grew past {args.churn_rss_mb:g} MB in this round: {grown}")
                ok = False
    return ok


def burst_round(args, client, texts, want_emb, body):
    """One burst: --burst bad bodies at once and, while they arrive, 8 valid
    embeddings requests one after another.  Returns (answers to the bad
    bodies by status, valid latencies, wrong valid answers, wall seconds)."""
    import requests
    answers = {}
    lock = threading.Lock()

    def bad(_):
        try:
            r = requests.post(client.base + "/v1/embeddings", data=body, timeout=(5, 60),
                              headers={"Content-Type": "application/json"})
            key = r.status_code
        except requests.ConnectionError:
            key = "reset"  # a 429 closes the connection while the body is still being sent
        except requests.Timeout:
            key = "timeout"
        with lock:
            answers[key] = answers.get(key, 0) + 1

    lat, wrong = [], 0
    t0 = time.monotonic()
    with ThreadPoolExecutor(args.burst) as pool:
        futs = [pool.submit(bad, i) for i in range(args.burst)]
        time.sleep(0.3)  # the bodies are on their way
        for t in texts[:8]:
            t1 = time.monotonic()
            outcome, _, _, got = client.request("embeddings", t)
            lat.append(time.monotonic() - t1)
            if outcome != "ok" or float(np.abs(got - want_emb[t]).max()) > 1e-5:
                wrong += 1
        wait(futs, timeout=args.phase_deadline)
    return answers, lat, wrong, time.monotonic() - t0


def run_burst(args, client, texts, want_emb, ray):
    """Issue 21's burst, --burst-rounds times: --burst concurrent bodies of
    --burst-mb MB, each one text past the ingress's character bound (a 400
    each, or a 429 when the ingress holds enough large bodies already), with
    valid requests among them.  Passes when every valid answer is right and
    came within --burst-latency s, no bad body got anything but 400/413/429
    (or a reset connection after a 429), no replica was replaced, and the
    serving processes' memory, --burst-rss-mb MB at most above its level
    before the first round, does not grow from one round to the next (the
    allocator keeps what the first round took for the next: 64 MB of slack)."""
    for t in texts[:2]:  # warm: the burst is to measure, not the first call of a new replica
        client.request("embeddings", t)
    names0 = replica_names(ray)
    size = int(args.burst_mb * (1 << 20)) - 16
    body = b'{"input": "' + b"a" * size + b'"}'
    rss = [rss_by_role(ray)]
    ok = True
    for k in range(args.burst_rounds):
        answers, lat, wrong, wall = burst_round(args, client, texts, want_emb, body)
        time.sleep(3)  # what the burst took is given back
        rss.append(rss_by_role(ray))
        print(f"== phase burst, round {k + 1}: {args.burst} bodies of {args.burst_mb:g} MB (one text past the "
              f"character bound) and 8 valid requests, wall {wall:.1f} s")
        print("   bad bodies answered: " + ", ".join(f"{a}: {n}" for a, n in sorted(answers.items(), key=str)))
        print(f"   valid requests: {len(lat) - wrong} correct of {len(lat)}, latency max {max(lat) * 1e3:.0f} ms, "
              f"p50 {percentile(lat, 50):.0f} ms ({', '.join(f'{x * 1e3:.0f}' for x in lat)})")
        print("   RSS MB before -> after: " + ", ".join(f"{r} {rss[-2].get(r, 0):.0f} -> {rss[-1].get(r, 0):.0f}"
                                                       for r in sorted(rss[-1])))
        ok &= wrong == 0 and max(lat) <= args.burst_latency
        ok &= set(answers) <= {400, 413, 429, "reset"} and sum(answers.values()) == args.burst
        limit = args.burst_rss_mb if k == 0 else 64
        grown = {r: rss[-1].get(r, 0) - rss[-2].get(r, 0) for r in rss[-1]}
        if any(g > limit for g in grown.values()):
            print(f"   memory grew past {limit:g} MB in this round: {grown}")
            ok = False
    names1 = replica_names(ray)
    print(f"   replicas before: {', '.join(names0)}; after: {', '.join(names1)}")
    return ok and names0 == names1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=200, help="requests per phase (default 200)")
    p.add_argument("--concurrency", type=int, default=16, help="client threads (default 16)")
    p.add_argument("--replicas", type=int, default=2, help="model replicas, all on this machine's device")
    p.add_argument("--phases", default="clean,kill,burst,churn",
                   help="the phases of the Ray mode, comma-separated: clean, kill, burst, churn (default all four)")
    p.add_argument("--max-tokens", type=int, default=12, help="tokens per completion (default 12)")
    p.add_argument("--prompts", type=int, default=24, help="distinct texts (default 24)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds one attempt may take (default 30)")
    p.add_argument("--retries", type=int, default=5, help="client retries per request (default 5)")
    p.add_argument("--phase-deadline", type=float, default=180.0, help="seconds one phase may take (default 180)")
    p.add_argument("--kill-with", choices=["ray", "signal"], default="ray",
                   help="ray.kill of a replica actor (default), or SIGKILL to a replica's pid")
    p.add_argument("--kill-after", type=float, default=0.5,
                   help="the kill comes when this fraction of the phase's requests is answered (default 0.5)")
    p.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local Ray (default 2)")
    p.add_argument("--burst", type=int, default=100, help="bad bodies sent at once in phase burst (default 100)")
    p.add_argument("--burst-mb", type=float, default=8.0, help="size of each bad body in MB (default 8)")
    p.add_argument("--burst-latency", type=float, default=2.0,
                   help="seconds a valid request may take during the burst (default 2)")
    p.add_argument("--burst-rss-mb", type=float, default=300.0,
                   help="MB the proxy, ingress or replicas may hold more after the first burst (default 300)")
    p.add_argument("--burst-rounds", type=int, default=2, help="bursts in phase burst (default 2)")
    p.add_argument("--churn", type=int, default=64, help="streams per round of phase churn (default 64)")
    p.add_argument("--churn-rounds", type=int, default=2, help="rounds of phase churn (default 2)")
    p.add_argument("--churn-rss-mb", type=float, default=32.0,
                   help="MB the serving processes may grow in a churn round after the first (default 32)")
    p.add_argument("--modes", default="one-process,ray", help="comma-separated: one-process, ray (default both)")
    p.add_argument("--single-phases", default="churn,burst",
                   help="the phases of the one-process mode (default churn,burst; kill is Ray's alone)")
    args = p.parse_args()
    phases = [x for x in args.phases.split(",") if x]
    single_phases = [x for x in args.single_phases.split(",") if x]
    modes = [x for x in args.modes.split(",") if x]
    if (not set(phases) <= {"clean", "kill", "burst", "churn"} or not set(single_phases) <= {"clean", "burst", "churn"}
            or not set(modes) <= {"one-process", "ray"} or args.requests < 2 or args.concurrency < 1):
        p.error("--phases takes clean, kill, burst and/or churn (--single-phases the same but kill); --modes "
                "one-process and/or ray; --requests >= 2; --concurrency >= 1")

    import clformer

    t_start = time.monotonic()
    root = tempfile.mkdtemp(prefix="clf-serve-load-")
    all_ok = True
    try:
        d = model_dir(root)
        with clformer.Model(d) as m:
            texts = prompts(m, args.prompts)
            want_emb = {t: m.embed([t])[0] for t in texts}
            want_text = {t: "".join(m.stream(t, max_new_tokens=args.max_tokens, do_sample=False)) for t in texts}
        if "one-process" in modes:
            all_ok &= one_process(args, d, single_phases, texts, want_emb, want_text)
        if "ray" in modes:
            all_ok &= on_ray(args, d, phases, texts, want_emb, want_text)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load test {'passed' if all_ok else 'FAILED'} in {time.monotonic() - t_start:.1f} s")
    return 0 if all_ok else 1


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_phases(args, phases, client, texts, want_emb, want_text, server, replicas):
    ok = True
    for ph in phases:
        if ph == "burst":
            ok &= run_burst(args, client, texts, want_emb, server)
        elif ph == "churn":
            ok &= run_churn(args, client, texts, want_text, server, replicas)
        elif ph == "clean":
            ok &= run_phase(ph, args, client, texts, want_emb, want_text, server, False)[0]
    return ok


def one_process(args, d, phases, texts, want_emb, want_text):
    """`python -m clformer.serve DIR` as a user starts it, the phases against it."""
    import requests
    t0 = time.monotonic()
    port = _port()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-m", "clformer.serve", d, "--name", "gpt2", "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        while proc.poll() is None and time.monotonic() - t0 < 60:
            try:
                if requests.get(url + "/health", timeout=5).status_code == 200:
                    break
            except requests.ConnectionError:
                time.sleep(0.05)
        if proc.poll() is not None or time.monotonic() - t0 >= 60:
            log.seek(0)
            print("one process: the server did not come up:\n" + log.read().decode(errors="replace")[-2000:])
            return False
        print(f"== one process up in {time.monotonic() - t0:.1f} s (pid {proc.pid}), {url}", flush=True)
        client = Client(url, args.timeout, args.retries, args.max_tokens)
        return run_phases(args, phases, client, texts, want_emb, want_text, proc, 1)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            rc = proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        log.close()
        if rc != 0:
            print(f"one process: exit status {rc} after SIGINT")


def on_ray(args, d, phases, texts, want_emb, want_text):
    import clformer
    import ray
    from ray import serve
    from clformer.serve import ServeOptions
    from clformer.serve.app import local_ray, start

    t_start = time.monotonic()
    port = _port()
    local_ray(num_cpus=args.num_cpus, resources={"opencl_device": 1})
    all_ok = True
    try:
        opts = ServeOptions(model_dir=d, name="gpt2", replicas=args.replicas, replicas_per_device=args.replicas)
        start(opts, port=port)
        print(f"== Ray Serve up in {time.monotonic() - t_start:.1f} s: {args.replicas} replicas on "
              f"{clformer.devices()[0].name}, http://127.0.0.1:{port}", flush=True)
        client = Client(f"http://127.0.0.1:{port}", args.timeout, args.retries, args.max_tokens)
        for ph in phases:
            if ph != "kill":
                all_ok &= run_phases(args, [ph], client, texts, want_emb, want_text, ray, args.replicas)
                continue
            ok, killed = run_phase(ph, args, client, texts, want_emb, want_text, ray, True)
            all_ok &= ok
            # Ray brings the killed replica back: the deployment is whole again
            t0 = time.monotonic()
            while time.monotonic() - t0 < 60:
                names = replica_names(ray)
                st = serve.status().applications["clformer"].deployments["ModelReplica"]
                if (len(names) == args.replicas and killed.get("name") not in names
                        and dict(st.replica_states) == {"RUNNING": args.replicas}):
                    break
                time.sleep(0.5)
            else:
                print("   the killed replica was not replaced within 60 s")
                all_ok = False
            print(f"   replicas running again {time.monotonic() - killed.get('t', t0):.1f} s after the kill: "
                  f"{', '.join(replica_names(ray))}")
    finally:
        serve.shutdown()
        ray.shutdown()
    return all_ok


if __name__ == "__main__":
    sys.exit(main())
