"""What `python -m clformer.serve` exposes on the machine it runs on
(issue 21): the device lock files (no Ray), the header deadline of Serve's
HTTP proxy (a local Serve of the ViT fixture), and local mode as a command:
its own Ray whatever $RAY_ADDRESS or /tmp/ray/ray_current_cluster say, and
every socket it and its descendants listen on bound to loopback.
"""
import fcntl
import ipaddress
import os
import select
import signal
import socket
import subprocess
import sys
import time

import pytest

from clformer.serve import devices
from conftest import FIXTURES as FX

VIT = os.path.join(FX, "vit_cls")


class FakeDevice:
    def __init__(self, sel):
        self.selector, self.index, self.name = sel, int(sel.split(":")[1]), "fake"


def _ray_or_skip():
    try:
        import ray  # noqa: F401
        import requests  # noqa: F401
    except ImportError:
        if os.environ.get("CLF_REQUIRE_SERVE") == "1":
            raise
        pytest.skip("ray[serve] is not installed (tools/serve-test.sh installs it)")


# ------------------------------------------------------------ device lock files

def test_lock_dir_is_private_and_per_user(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(devices.tempfile, "gettempdir", lambda: str(tmp_path))
    d = devices.lock_dir("0123abcd")
    assert d == str(tmp_path / f"clformer-serve-{os.geteuid()}" / "0123abcd")
    for p in (d, os.path.dirname(d)):
        st = os.lstat(p)
        assert st.st_uid == os.geteuid() and st.st_mode & 0o077 == 0, oct(st.st_mode)
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    assert devices.lock_dir("0123abcd") == str(run / "clformer-serve" / "0123abcd")
    with pytest.raises(ValueError, match="not a Ray node id"):
        devices.lock_dir("../../etc")


def test_planted_symlink_is_not_followed(tmp_path):
    d = devices.lock_dir("node", base=str(tmp_path / "locks"))
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    os.symlink(victim, os.path.join(d, "device-0-0.slot-0.lock"))
    with pytest.raises(devices.UnsafeLockDir, match="symbolic link; it was not followed"):
        devices.claim([FakeDevice("0:0")], 1, d)
    assert victim.read_bytes() == b"precious\n"
    assert os.path.islink(os.path.join(d, "device-0-0.slot-0.lock"))


def _umask():
    m = os.umask(0)
    os.umask(m)
    return m


@pytest.mark.parametrize("which", ["base", "node"])
def test_lock_dir_of_another_user_is_refused(tmp_path, which):
    if os.geteuid() != 0:
        pytest.skip("making a directory another user's needs root")
    base = tmp_path / "locks"
    base.mkdir(mode=0o700)
    (base / "node").mkdir(mode=0o700)
    os.chown(base if which == "base" else base / "node", 65534, 65534)
    with pytest.raises(devices.UnsafeLockDir, match="belongs to uid 65534"):
        devices.lock_dir("node", base=str(base))
    if which == "node":
        with pytest.raises(devices.UnsafeLockDir, match="belongs to uid 65534"):
            devices.claim([FakeDevice("0:0")], 1, str(base / "node"))
    assert os.listdir(base / "node") == []


def test_world_writable_lock_dir_is_refused(tmp_path):
    base = tmp_path / "locks"
    base.mkdir()
    os.chmod(base, 0o777)
    with pytest.raises(devices.UnsafeLockDir, match=r"writable by group or others \(mode 0777\)"):
        devices.lock_dir("node", base=str(base))
    os.chmod(base, 0o700)
    node = base / "node"
    node.mkdir()
    os.chmod(node, 0o1777)
    with pytest.raises(devices.UnsafeLockDir, match="writable by group or others"):
        devices.claim([FakeDevice("0:0")], 1, str(node))
    assert os.listdir(node) == []


def test_lock_dir_that_is_a_symlink_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    base = tmp_path / "locks"
    base.mkdir(mode=0o700)
    os.symlink(real, base / "node")
    with pytest.raises(devices.UnsafeLockDir, match="not a directory"):
        devices.lock_dir("node", base=str(base))
    with pytest.raises(devices.UnsafeLockDir, match="not a directory"):
        devices.claim([FakeDevice("0:0")], 1, str(base / "node"))
    assert os.listdir(real) == []


def test_one_slot_one_replica_and_release_removes_file_and_dir(tmp_path):
    d = devices.lock_dir("node", base=str(tmp_path / "locks"))
    a = devices.claim([FakeDevice("0:0")], 1, d)
    assert a.path == os.path.join(d, "device-0-0.slot-0.lock")
    st = os.lstat(a.path)
    assert st.st_mode & 0o777 == 0o600 & ~_umask()
    with open(a.path, encoding="ascii") as f:
        assert f.read() == f"{os.getpid()}\n"
    with pytest.raises(devices.NoFreeDevice, match="all 1 replica slots of this node are taken"):
        devices.claim([FakeDevice("0:0")], 1, d)
    a.release()
    assert not os.path.exists(d)                        # file and the then empty node directory
    assert os.path.isdir(os.path.dirname(d))            # the per-user base stays
    b = devices.claim([FakeDevice("0:0")], 1, d)        # recreated
    assert b.index == 0
    b.release()


def test_release_keeps_the_directory_of_other_slots(tmp_path):
    d = devices.lock_dir("node", base=str(tmp_path / "locks"))
    devs = [FakeDevice("0:0"), FakeDevice("0:1")]
    a, b = devices.claim(devs, 1, d), devices.claim(devs, 1, d)
    a.release()
    assert os.listdir(d) == ["device-0-1.slot-0.lock"]
    b.release()
    assert not os.path.exists(d)


@pytest.mark.parametrize("neighbour", [False, True], ids=["directory-removed", "directory-kept"])
def test_release_between_open_and_lock_cannot_give_one_slot_twice(tmp_path, monkeypatch, neighbour):
    """B opens slot 0's file while A holds it; A releases (removes the file,
    and the directory when no other slot's file keeps it) before B's flock;
    B's lock is then on a file no longer named: it must take the name's new
    file, else C would claim the same slot."""
    d = devices.lock_dir("node", base=str(tmp_path / "locks"))
    other = devices.claim([FakeDevice("0:1")], 1, d) if neighbour else None
    a = devices.claim([FakeDevice("0:0")], 1, d)
    real_flock = fcntl.flock
    raced = []

    def flock(fd, op):
        if not raced:
            a.release()
            raced.append(os.fstat(fd).st_nlink)  # 0: B's fd is A's removed file
        return real_flock(fd, op)

    monkeypatch.setattr(devices.fcntl, "flock", flock)
    b = devices.claim([FakeDevice("0:0")], 1, d)
    monkeypatch.setattr(devices.fcntl, "flock", real_flock)
    assert raced == [0]
    assert b.path == a.path and os.lstat(b.path).st_ino == os.fstat(b.fd).st_ino  # B holds the named file
    with pytest.raises(devices.NoFreeDevice):
        devices.claim([FakeDevice("0:0")], 1, d)
    b.release()
    if other:
        other.release()
    assert not os.path.exists(d)


def test_sweep_all_removes_what_killed_runs_left(tmp_path):
    base = str(tmp_path / "locks")
    held = devices.claim([FakeDevice("0:0")], 1, devices.lock_dir("live", base=base))
    stale = devices.lock_dir("dead", base=base)
    with open(os.path.join(stale, "device-0-0.slot-0.lock"), "w", encoding="ascii") as f:
        f.write("1\n")
    devices.sweep_all(base)
    assert os.listdir(base) == ["live"] and os.listdir(os.path.join(base, "live")) == ["device-0-0.slot-0.lock"]
    held.release()


def test_sweep_removes_the_files_of_killed_replicas(tmp_path):
    d = devices.lock_dir("node", base=str(tmp_path / "locks"))
    code = ("import sys, time; from clformer.serve import devices\n"
            "class D: selector='0:0'; index=0; name='x'\n"
            f"s = devices.claim([D()], 1, {d!r}); print(s.index, flush=True); time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "0"
        assert devices.sweep(d) is False                  # held by a live replica: kept
        assert os.listdir(d) == ["device-0-0.slot-0.lock"]
        p.kill()
        p.wait(10)
        assert devices.sweep(d) is True
        assert not os.path.exists(d)
    finally:
        p.kill()
        p.wait(10)


# ------------------------------------------------------------ the proxy's header deadline

HEADER_S = 2      # CLFORMER_SERVE_HEADER_TIMEOUT_S in this module's Serve
SLACK = 3


BODY_BUDGET = 1 << 20  # CLFORMER_SERVE_PROXY_BODY_BUDGET in this module's servers
BODY_S = 5             # Limits.body_timeout_s (longer than HEADER_S + 1.5: see below)


@pytest.fixture(scope="module", params=["one-process", "ray"])
def proxy(request):
    """The ViT fixture served at / with a 2 s header deadline and a 1 MiB
    body budget: in one process (uvicorn here), then behind Serve's proxy
    (the guard installed there through the environment)."""
    _ray_or_skip()
    from conftest import require_device
    require_device()
    import serve_modes
    from clformer.serve import Limits, ServeOptions
    saved = {k: os.environ.get(k) for k in ("CLFORMER_SERVE_HEADER_TIMEOUT_S", "CLFORMER_SERVE_PROXY_BODY_BUDGET")}
    os.environ["CLFORMER_SERVE_HEADER_TIMEOUT_S"] = str(HEADER_S)
    os.environ["CLFORMER_SERVE_PROXY_BODY_BUDGET"] = str(BODY_BUDGET)
    opts = ServeOptions(model_dir=VIT, name="vit", replicas=1, limits=Limits(request_timeout_s=50, body_timeout_s=BODY_S))
    node = None
    try:
        if request.param == "ray":
            import ray
            with serve_modes.ray_serve({"/": opts}, 50) as url:
                node = ray.get_runtime_context().get_node_id()
                yield int(url.rsplit(":", 1)[1])
        else:
            with serve_modes.one_process({"": opts}, HEADER_S) as url:
                yield int(url.rsplit(":", 1)[1])
    finally:
        if node:
            devices.sweep(os.path.join(devices.lock_base(), node), wait_s=5.0)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _until_closed(s, limit):
    """(seconds until the server closed the connection, what it sent);
    (None, ...) when it was still open after `limit` seconds."""
    t0, got = time.monotonic(), b""
    s.settimeout(0.2)
    while time.monotonic() - t0 < limit:
        try:
            d = s.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return time.monotonic() - t0, got
        if not d:
            return time.monotonic() - t0, got
        got += d
    return None, got


def test_body_budget_refuses_large_bodies_before_reading_them():
    """Issue 21 item 2: Serve's proxy reads every body whole as it arrives;
    100 concurrent 8 MB bodies cost it their size.  BodyBudget answers 429
    (Connection: close) before reading a large body that would take the
    bodies in progress past the budget; small bodies always pass."""
    import asyncio
    import json
    from clformer.serve import _http_guard
    entered, sent = [], []
    release = asyncio.Event()

    async def app(scope, receive, send):
        entered.append(scope["path"])
        await release.wait()

    mw = _http_guard.BodyBudget(app, budget=20 << 20)

    def scope(path, length):
        return {"type": "http", "path": path, "headers": [(b"content-length", str(length).encode())]}

    async def never_read():
        raise AssertionError("a refused body must not be read")

    async def send(msg):
        sent.append(msg)

    async def run():
        a = asyncio.ensure_future(mw(scope("/a", 8 << 20), never_read, send))
        b = asyncio.ensure_future(mw(scope("/b", 8 << 20), never_read, send))
        await asyncio.sleep(0)
        await mw(scope("/c", 8 << 20), never_read, send)  # 24 MiB > 20: refused
        small = asyncio.ensure_future(mw(scope("/small", 1000), never_read, send))
        await asyncio.sleep(0)
        assert mw.held == 16 << 20
        release.set()
        await asyncio.gather(a, b, small)
        assert mw.held == 0
    asyncio.run(run())
    assert entered == ["/a", "/b", "/small"]
    start = sent[0]
    assert start["status"] == 429
    headers = dict(start["headers"])
    assert headers[b"connection"] == b"close" and headers[b"retry-after"] == b"1"
    err = json.loads(sent[1]["body"])["error"]
    assert (err["type"], err["code"]) == ("requests", "rate_limit_exceeded"), err  # OpenAI's spelling



@pytest.mark.parametrize("sent", [b"", b"GET /health HTTP/1.1\r\nHost: x\r\n", b"G"],
                         ids=["nothing", "partial-headers", "one-byte"])
def test_connection_without_complete_headers_is_closed(proxy, sent):
    with socket.create_connection(("127.0.0.1", proxy)) as s:
        s.sendall(sent)
        took, got = _until_closed(s, HEADER_S + SLACK)
    assert took is not None, f"still open {HEADER_S + SLACK} s after {sent!r}"
    assert took >= HEADER_S - 0.5 and got == b""


def test_idle_keep_alive_and_partial_next_request_are_closed(proxy):
    with socket.create_connection(("127.0.0.1", proxy)) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        took, got = _until_closed(s, HEADER_S + SLACK)
    assert got.startswith(b"HTTP/1.1 200 ") and took is not None, got[:80]
    # The next request started after the first response, then nothing:
    # uvicorn's own keep-alive timer stops at its first byte; the deadline does not.
    with socket.create_connection(("127.0.0.1", proxy)) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /hea")
        took, got = _until_closed(s, HEADER_S + SLACK)
    assert got.count(b"HTTP/1.1 200 ") == 1 and took is not None, got[:80]


def test_request_with_complete_headers_is_not_cut(proxy):
    """The deadline is the headers': a body that comes later than it (but
    within the ingress's body deadline) is read and answered."""
    with socket.create_connection(("127.0.0.1", proxy)) as s:
        s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 2\r\n\r\n")
        readable, _, _ = select.select([s], [], [], HEADER_S + 1.5)
        assert not readable, "the server answered or closed before the body came"
        s.sendall(b"{}")
        s.settimeout(30)
        got = s.recv(65536)
    assert got.startswith(b"HTTP/1.1 400 "), got[:200]  # "input is missing": the body was read


def _stats(port):
    import requests
    r = requests.get(f"http://127.0.0.1:{port}/stats", timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["refusals"]


def test_stats_count_every_refusal(proxy):
    """Issue 41: /stats showed answered_429: 0 after 192 of the proxy's 429s.
    Its "refusals" count what the HTTP layer refused as well as the
    ingress: the header deadline's cuts, uvicorn's 400 for a malformed
    request, the body budget's 429, the ingress's 413, 404 and 408."""
    before = _stats(proxy)
    with socket.create_connection(("127.0.0.1", proxy)) as s:  # the header deadline
        assert _until_closed(s, HEADER_S + SLACK)[0] is not None
    with socket.create_connection(("127.0.0.1", proxy)) as s:  # not HTTP at all
        s.sendall(b"\x00\x01 nonsense\r\n\r\n")
        assert _until_closed(s, 10)[1].startswith(b"HTTP/1.1 400 ")
    big = BODY_BUDGET * 3 // 4  # two of them are past the budget
    head = (b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
            b"Content-Length: %d\r\n\r\n" % big)
    with socket.create_connection(("127.0.0.1", proxy)) as held, \
            socket.create_connection(("127.0.0.1", proxy)) as refused:
        held.sendall(head + b"x")  # its body is in progress: the budget holds it
        time.sleep(0.5)
        refused.sendall(head)
        assert _until_closed(refused, 10)[1].startswith(b"HTTP/1.1 429 ")
        held.sendall(b"x" * (big - 1))  # the whole body: not an image, 400
        held.settimeout(30)
        assert held.recv(65536).startswith(b"HTTP/1.1 400 ")
    time.sleep(1)  # Serve's proxy lets the held body go once its call unwinds
    # the ingress's 413, before the body (no large body in progress: the budget lets it through)
    with socket.create_connection(("127.0.0.1", proxy)) as s:
        s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 999999999\r\n\r\n")
        assert _until_closed(s, 10)[1].startswith(b"HTTP/1.1 413 ")
    with socket.create_connection(("127.0.0.1", proxy)) as s:  # a body that stops coming: 408
        s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100\r\n\r\n{")
        took, got = _until_closed(s, BODY_S + 10 + SLACK)
        assert got.startswith(b"HTTP/1.1 408 "), got[:100]
    import requests
    assert requests.get(f"http://127.0.0.1:{proxy}/nowhere", timeout=30).status_code == 404
    after = _stats(proxy)
    grew = {k: after.get(k, 0) - before.get(k, 0) for k in set(after) | set(before)}
    print("refusals:", grew)
    want = {"header_timeout": 1, "400": 2, "429": 1, "413": 1, "408": 1, "404": 1}
    assert {k: grew.get(k, 0) for k in want} == want, grew


def test_half_closed_connection_gets_its_answer(proxy):
    """Issue 41: a client that sends its request and shuts its write side
    (shutdown(SHUT_WR)) got no answer; it gets the whole answer now, the
    connection closed after it."""
    import json
    body = json.dumps({"input": "x"}).encode()
    with socket.create_connection(("127.0.0.1", proxy)) as s:
        s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        s.shutdown(socket.SHUT_WR)
        took, got = _until_closed(s, 30)
    assert took is not None, "the connection stayed open"
    if got.startswith(b"HTTP/1.1 100 "):  # the probe for a client that left altogether
        got = got.split(b"\r\n\r\n", 1)[1]
    # the ViT model embeds no text: its answer is the ingress's 400, whole
    head, _, rest = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), got[:300]
    assert "does not serve embeddings" in json.loads(rest)["error"]["message"], rest


def test_two_requests_on_one_connection(proxy):
    """A keep-alive connection used again within the deadline serves both."""
    import requests
    with requests.Session() as http:
        for _ in range(2):
            assert http.get(f"http://127.0.0.1:{proxy}/health", timeout=30).status_code == 200
            time.sleep(HEADER_S / 2)


# ------------------------------------------------------------ local mode as a command

def _stat(pid):
    """(parent pid, start time) of a process, from /proc/PID/stat; None when gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return int(rest[1]), int(rest[19])
    except (OSError, IndexError, ValueError):
        return None


def _descendants(root):
    """{pid: start time} of `root` and every process below it."""
    children, started = {}, {}
    for p in os.listdir("/proc"):
        if p.isdigit() and (st := _stat(int(p))):
            children.setdefault(st[0], []).append(int(p))
            started[int(p)] = st[1]
    out, todo = {}, [root]
    while todo:
        pid = todo.pop()
        out[pid] = started.get(pid)
        todo.extend(children.get(pid, []))
    return out


def _listeners():
    """{socket inode: (address, port)} of every listening TCP socket."""
    found = {}
    for name, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        with open(name, encoding="ascii") as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] != "0A":  # TCP_LISTEN
                    continue
                hexaddr, hexport = cols[1].split(":")
                raw = bytes.fromhex(hexaddr)
                # /proc prints the address as 32-bit words in host order
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                found[int(cols[9])] = (ipaddress.ip_address(raw), int(hexport, 16))
    return found


def _socket_inodes(pid):
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(int(link[8:-1]))
    except OSError:
        pass
    return inodes


def _loopback(addr):
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped:
        addr = addr.ipv4_mapped
    return addr.is_loopback


def _comm(pid):
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return "?"


def test_local_mode_ignores_other_clusters_and_listens_on_loopback_only(tmp_path):
    """$RAY_ADDRESS naming a dead address and a planted ray_current_cluster
    (what a long-stopped `ray start --head` leaves): Ray mode (--replicas 1)
    without --address starts its own
    Ray anyway, answers /health, every socket of it and its descendants
    listens on loopback (the HTTP proxy, GCS, raylet, agents, the replicas'
    gRPC), it stops on SIGINT with status 0, and leaves no lock directory."""
    _ray_or_skip()
    from conftest import require_device
    require_device()
    import requests
    from ray._common.utils import get_ray_address_file
    current = get_ray_address_file(None)
    planted = not os.path.exists(current)
    if planted:
        os.makedirs(os.path.dirname(current), exist_ok=True)
        with open(current, "w", encoding="ascii") as f:
            f.write("127.0.0.1:9")
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    port = _free_port()
    env = dict(os.environ, RAY_ADDRESS="127.0.0.1:9", XDG_RUNTIME_DIR=str(run_dir), RAY_USAGE_STATS_ENABLED="0")
    log = open(tmp_path / "serve.log", "w+b")
    p = subprocess.Popen([sys.executable, "-m", "clformer.serve", VIT, "--port", str(port), "--num-cpus", "2",
                          "--replicas", "1"],
                         env=env, stdout=log, stderr=subprocess.STDOUT)
    tree = {}
    try:
        deadline, up = time.monotonic() + 90, False
        while time.monotonic() < deadline and p.poll() is None:
            try:
                up = requests.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
            except requests.RequestException:
                pass
            if up:
                break
            time.sleep(1)
        log.seek(0)
        assert up, f"no 200 from /health within 90 s (exit {p.poll()}):\n" + log.read().decode(errors="replace")[-3000:]
        tree = _descendants(p.pid)
        listening = _listeners()
        seen, bad = [], []
        for pid in tree:
            for ino in _socket_inodes(pid) & listening.keys():
                addr, lport = listening[ino]
                seen.append((_comm(pid), str(addr), lport))
                if not _loopback(addr):
                    bad.append(seen[-1])
        print("listeners:", sorted(seen))
        assert not bad, f"listening beyond loopback: {bad}"
        names = " ".join(c for c, _, _ in seen)
        assert any(lp == port for _, _, lp in seen), seen                # the HTTP proxy was found
        assert "gcs_server" in names and "raylet" in names, seen
        assert names.count("ray::ServeRepli") >= 2, seen                 # the replicas' gRPC servers
        # The replica's device slot: one lock file in this node's directory
        # of the per-user base ($XDG_RUNTIME_DIR/clformer-serve, 0700).
        # /health is the ingress's: the replica claims its slot as it
        # starts, which on a loaded machine can come after (CI, 2026-12-06:
        # no directory yet right after the 200)
        base = run_dir / "clformer-serve"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (base.is_dir() and any(os.listdir(base / n) for n in os.listdir(base))):
            time.sleep(0.5)
        nodes = os.listdir(base)
        assert len(nodes) == 1 and os.listdir(base / nodes[0]) == ["device-0-0.slot-0.lock"], nodes
        assert os.lstat(base).st_mode & 0o077 == 0 and os.lstat(base / nodes[0]).st_mode & 0o077 == 0
        p.send_signal(signal.SIGINT)
        assert p.wait(60) == 0
        assert os.listdir(base) == []                                    # the node's lock directory is gone
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(30)
        for pid, started in tree.items():  # whatever of its Ray outlived it (the same processes)
            st = _stat(pid)
            if pid != p.pid and st and st[1] == started:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        log.close()
        if planted:
            os.remove(current)
