"""`clformer chat` on a terminal, as a person types: a pseudo-terminal drives
it on the tiny GGUF chat fixture through editing keys, history, a \"\"\" block,
a bracketed paste, Ctrl-C in the middle of a reply, every /command and the
ways out, and reads the screen and the files /save writes.

usage: test_chat_tty.py  (CLF_CLI: the clformer executable, CLF_FIXTURES)
"""
import fcntl
import json
import os
import pty
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time

LEFT, UP, CTRL_C, CTRL_D = "\x1b[D", "\x1b[A", "\x03", "\x04"
PASTE = "\x1b[200~{}\x1b[201~"


class Chat:
    """One `clformer chat` on a pseudo-terminal; `screen` is all it wrote."""

    def __init__(self, args, env):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execve(args[0], args, env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        self.raw, self.screen, self.seen = b"", "", 0

    def read(self, timeout):
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # the child has gone: EIO
            return None
        if not data:
            return None
        self.raw += data
        # the bracketed-paste switches around each prompt are not text
        self.screen = self.raw.decode("utf-8", "replace").replace("\x1b[?2004h", "").replace("\x1b[?2004l", "")
        return True

    def expect(self, text, timeout=120):
        """Waits for `text` after what earlier expects matched; the screen since."""
        end = time.time() + timeout
        while text not in self.screen[self.seen:]:
            got = self.read(max(0.0, end - time.time()))
            if time.time() > end or got is None:
                how = "it left" if got is None else "timed out"
                raise AssertionError(f"expected {text!r} ({how}); the screen since:\n{self.screen[self.seen:]!r}")
        at = self.screen.index(text, self.seen) + len(text)
        since, self.seen = self.screen[self.seen:at], at
        return since

    def send(self, keys):
        # libedit prints the prompt, then puts the terminal in raw mode before
        # its first read: keys typed in between meet the cooked terminal (a
        # Ctrl-D there is the line discipline's end of file, and lost).  A
        # person is never that quick; the test waits as long as one would.
        time.sleep(0.05)
        os.write(self.fd, keys.encode())

    def turn(self, keys, timeout=120):
        """Keys ending a message; the screen up to the next prompt."""
        self.send(keys)
        return self.expect("\n> ", timeout)

    def wait(self, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                while self.read(0.1):
                    pass
                return os.waitstatus_to_exitcode(status)
            self.read(0.1)
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError(f"chat did not leave; the screen:\n{self.screen[-2000:]!r}")


def saved(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def contents(messages, role):
    return [m["content"] for m in messages if m["role"] == role]


def main():
    exe = os.environ["CLF_CLI"]
    model = os.path.join(os.environ["CLF_FIXTURES"], "gguf_models", "smollm_like", "model.gguf")
    tmp = tempfile.mkdtemp(prefix="clf-chat-tty-")
    env = dict(os.environ, TERM="xterm", CLFORMER_CACHE_DIR=os.path.join(tmp, "cache"))
    args = [exe, "chat", model, "--greedy", "--max-new-tokens", "3", "--quiet"]
    f = [os.path.join(tmp, f"f{i}.json") for i in range(5)]
    try:
        c = Chat(args, env)
        c.expect("/help lists the commands")
        c.expect("> ")
        # Editing: "hllo", three left arrows, "e": the message is "hello".
        c.turn("hllo" + LEFT * 3 + "e\r")
        # History: the up arrow brings "hello" back, then " again".
        c.turn(UP + " again\r")
        c.turn(f"/save {f[1]}\r")
        assert contents(saved(f[1]), "user") == ["hello", "hello again"], saved(f[1])
        assert len(saved(f[1])) == 4, saved(f[1])
        # A """ block and a paste of several lines: one message each.
        c.turn("/reset\r")
        c.send('"""line one\r')
        c.expect("... ")
        c.turn('line two"""\r')
        c.turn(PASTE.format("first\rsecond\rthird"))  # a terminal pastes line ends as \\r
        c.turn(f"/save {f[2]}\r")
        assert contents(saved(f[2]), "user") == ["line one\nline two", "first\nsecond\nthird"], saved(f[2])
        # Ctrl-C in the middle of a reply stops it; the conversation goes on.
        c.turn("/reset\r")
        c.turn("/set max-new-tokens 120\r")
        stopped = False
        for attempt in range(5):  # the fixture decodes 120 tokens in ~0.2 s
            c.send(f"story {attempt}\r")
            c.expect(f"story {attempt}\r\n")
            while len(c.screen) == c.seen:
                c.read(30)
            os.kill(c.pid, signal.SIGSTOP)  # the reply is under way: hold it there
            c.send(CTRL_C)
            time.sleep(0.2)
            os.kill(c.pid, signal.SIGCONT)
            out = c.expect("\n> ")
            # On a loaded machine the reply may have ended before the Ctrl-C,
            # which then meets the prompt and prints a hint and a prompt more:
            # take everything written until it is quiet, so the next turn's
            # "> " is its own.
            while c.read(0.5):
                pass
            out += c.screen[c.seen:]
            c.seen = len(c.screen)
            if "stopped by Ctrl-C" in out:
                stopped = True
                break
            c.turn("/reset\r")
        assert stopped, c.screen[-3000:]
        c.turn("/set max-new-tokens 3\r")
        c.turn("and then?\r")
        c.turn(f"/save {f[3]}\r")
        conv = saved(f[3])
        assert [m["role"] for m in conv] == ["user", "assistant", "user", "assistant"], conv
        assert conv[2]["content"] == "and then?", conv
        # The commands.
        out = c.turn("/help\r")
        for command in ("/exit", "/bye", "/reset", "/system TEXT", "/save FILE", "/load FILE", "/set", '"""'):
            assert command in out, out
        assert "system message set" in c.turn("/system be brief\r")
        assert "be brief" in c.turn("/system\r")
        out = c.turn("/set\r")
        assert "max-new-tokens         3" in out and "temperature            (default: the checkpoint's, else 1)" in out, out
        assert "temperature 0.5" in c.turn("/set temperature 0.5\r")
        assert "temperature            0.5" in c.turn("/set\r")
        assert "/set:" in c.turn("/set top-p 2\r")  # out of range: refused, as on the command line
        assert "unknown command /nope" in c.turn("/nope\r")
        assert "4 messages loaded" in c.turn(f"/load {f[1]}\r")
        c.turn(f"/save {f[4]}\r")
        assert saved(f[4]) == saved(f[1])
        # Ctrl-C at an empty prompt says how to leave; Ctrl-D leaves, on a new line.
        assert "Ctrl-C again or Ctrl-D leaves" in c.turn(CTRL_C)
        c.send(CTRL_D)
        assert c.wait() == 0
        assert c.screen.endswith("\n"), repr(c.screen[-200:])
        with open(os.path.join(tmp, "cache", "chat_history"), encoding="utf-8", errors="replace") as h:
            history = h.read()
        assert "hello" in history and "again" in history, history

        # Ctrl-C twice at an empty prompt leaves; so does /bye.
        c = Chat(args, env)
        c.expect("> ")
        c.turn(CTRL_C)
        c.send(CTRL_C)
        assert c.wait() == 0
        c = Chat(args, env)
        c.expect("> ")
        c.send("/bye\r")
        assert c.wait() == 0
        print("chat on a terminal: editing, history, \"\"\", paste, Ctrl-C, commands, exits: ok")

        # Kernel builds show a status line on a terminal (a fresh cache
        # directory: every program is built), and nothing in a pipe.
        env["CLFORMER_CACHE_DIR"] = os.path.join(tmp, "cache2")
        gen = [exe, "generate", model, "--prompt", "hi", "--max-new-tokens", "2", "--greedy"]
        c = Chat(gen, env)
        assert c.wait() == 0
        assert "\r\x1b[Kclformer: building kernel program " in c.screen, c.screen[-2000:]
        # once the text streams, the status line keeps off its line
        assert "\x1b[K" not in c.screen[c.screen.index("hi"):], c.screen[-2000:]
        env["CLFORMER_CACHE_DIR"] = os.path.join(tmp, "cache3")
        p = subprocess.run(gen, env=env, capture_output=True, text=True, check=True)
        assert "building" not in p.stderr and "\r" not in p.stderr, p.stderr
        print("a status line for kernel builds on a terminal, none in a pipe: ok")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
