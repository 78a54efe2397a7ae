"""Progress on a terminal, nothing in a pipe (issue 43): `clformer probe
--quick --no-validate` on a pseudo-terminal shows a status line naming each
section, n of N, redrawn in place, with the kernel programs built on a cold
cache; the rows it prints never share a line with it; with stdout and
stderr in pipes the same probe writes no status line at all.

usage: test_progress_tty.py  (CLF_CLI: the clformer executable)
"""
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time

ERASE = "\r\x1b[K"
# clf_probe_section's steps with --quick --no-validate: properties, device
# class, the 7 of clf_probe_measured, the tuning profile.
SECTIONS = ["properties", "device class", "kernel build time", "memory bandwidth", "launch latency",
            "SGEMM throughput", "attention throughput", "one-row products by weight type",
            "attention beside the GEMM path",
            "layer norm beside a copy", "GEMM tuning profile"]


def on_pty(args, env, timeout=300):
    """Runs args with stdout and stderr on one pseudo-terminal; (exit code, screen)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(args[0], args, env)
    raw, end = b"", time.time() + timeout
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 1.0)
        if r:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the child has gone
                data = b""
            if not data:
                break
            raw += data
    else:
        os.kill(pid, 9)
        raise AssertionError(f"probe did not end in {timeout} s; the screen:\n{raw[-2000:]!r}")
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), raw.decode("utf-8", "replace")


def main():
    exe = os.environ["CLF_CLI"]
    tmp = tempfile.mkdtemp(prefix="clf-progress-tty-")
    # a cold cache: the kernel builds show on the status line too
    env = dict(os.environ, TERM="xterm", CLFORMER_CACHE_DIR=os.path.join(tmp, "cache"))
    # Under LeakSanitizer (the ASan build) the table of the drivers' matched
    # suppressions goes to stderr at exit: the screen checked here is the
    # program's own.  Without a sanitizer the variable is not read.
    env["LSAN_OPTIONS"] = ":".join(x for x in (env.get("LSAN_OPTIONS", ""), "print_suppressions=0") if x)
    args = [exe, "probe", "--quick", "--no-validate"]
    try:
        code, screen = on_pty(args, env)
        assert code == 0, screen[-2000:]
        shown = re.findall(r"clformer probe: ([^\r\n(]+?) \((\d+) of (\d+)\)", screen)
        steps = []
        for what, n, total in shown:
            if not steps or steps[-1] != (what, int(n)):
                steps.append((what, int(n)))
            assert int(total) == len(SECTIONS), (what, n, total)
        assert steps == [(w, i + 1) for i, w in enumerate(SECTIONS)], steps
        assert re.search(r"clformer probe: [^\r\n]+ \(\d+ of \d+\): building kernel program \w+ \(\d+\)", screen), \
            "no kernel build on the status line of a cold probe"
        # Every status line is erased before a row is printed: after the last
        # erase on a line there is a row of the report, or nothing.
        for line in screen.split("\n"):
            tail = line.rsplit(ERASE, 1)[-1].rstrip("\r")
            assert not tail.startswith("clformer probe") or tail == "", repr(line)
            if ERASE in line and tail:
                assert tail.startswith(("  ", "== device")), repr(line)  # a row of the report
        assert "global memory bandwidth" in screen and "GEMM tuning profile" in screen
        # The same probe in pipes: the report, and no status line.
        p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        assert "global memory bandwidth" in p.stdout
        assert "\r" not in p.stderr and "of 10" not in p.stderr and "building" not in p.stderr, repr(p.stderr)
        print("progress_tty: the status line named the 10 sections in order on a pty, none in pipes")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
    sys.exit(0)
