"""_http_guard.py - a deadline for a request's headers in Ray Serve's HTTP
proxy (uvicorn), which has none: a connection that sends nothing, or the
start of a request line and then nothing, is held open for ever.

install() wraps uvicorn's two HTTP/1.1 protocol classes (HttpToolsProtocol,
which uvicorn takes when httptools imports, and H11Protocol) in place: a
timer starts when a connection opens and again when a response ends and
uvicorn waits for the next request (when it arms its keep-alive timer); it
stops when a request's headers are complete (a new request cycle exists)
or the connection was handed to another protocol (a WebSocket).  When it
fires, the connection is closed.  The request body is the ingress's
business (it reads it with a deadline of its own).

BodyBudget, an ASGI middleware in front of the proxy, bounds the request
bodies the proxy takes in at once: Serve's proxy reads every body whole,
as fast as it arrives, whatever the deployment will make of it, so a burst
of large bodies costs the proxy their whole size in memory and time.  A
body over 64 KiB that would take the bodies in progress past the budget
($CLFORMER_SERVE_PROXY_BODY_BUDGET bytes, default 32 MiB; 0: no bound) is
answered 429 (Retry-After, Connection: close) before any of it is read;
small bodies always pass, so a burst of large ones cannot keep an ordinary
request out.  The ingress has the same bound per application (app.py).

Refusals, the outermost middleware, counts every answer of 400 or more by
status, with the connections the guard cut ("header_timeout") and the
malformed requests uvicorn answered 400 itself; it adds those counts to the
ingress's GET /stats answer (marked by STATS_HEADER) as "refusals", so that
/stats shows what the proxy refused as well as what the ingress did (one
process: the one server's counts; Ray: those of the proxy that carried it).

A client that sends its request and then shuts down its write side
(half-close) still gets its answer: the end of its input while a request is
in progress keeps the connection open for the response (closed after it);
to tell a client that went away altogether from one that half-closed, the
connection is probed (an interim "100 Continue" before a response starts,
then TCP_INFO's state, every 0.25 s): a peer that is gone answers with a
reset, and the connection is closed, which cancels its request.

It must run in the proxy's process.  Serve calls the function named by
$RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH there before uvicorn starts;
proxy_env() gives the variables that make it call proxy_callback(), which
installs the guard and returns the middleware (and calls a callback the
user had set there before).
"""
from __future__ import annotations

import collections
import importlib
import json
import os
import socket
from typing import Any

ENV_TIMEOUT = "CLFORMER_SERVE_HEADER_TIMEOUT_S"     # seconds; default 10; 0 turns the guard off
ENV_NEXT = "CLFORMER_SERVE_PROXY_CALLBACK_NEXT"      # a callback that was set before ours
ENV_BODY_BUDGET = "CLFORMER_SERVE_PROXY_BODY_BUDGET"  # bytes of large bodies in progress; default 32 MiB
DEFAULT_BODY_BUDGET = 32 << 20
SMALL_BODY = 64 << 10
ENV_SERVE_CALLBACK = "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"
CALLBACK = "clformer.serve._http_guard.proxy_callback"
DEFAULT_TIMEOUT_S = 10.0

_TIMER = "_clf_header_timer"
_CYCLE = "_clf_header_cycle"
_EOF = "_clf_eof"
STATS_HEADER = "x-clformer-stats"  # on the ingress's /stats answer: Refusals adds its counts to it

# What this process's HTTP layer refused: status (as a string) -> answers;
# "header_timeout" -> connections cut by the header deadline.
COUNTS: collections.Counter = collections.Counter()


def _env_number(name: str, kind: type, default: float, unit: str, zero: str) -> Any:
    """$name as a number >= 0 of `kind` (default when unset); ValueError
    naming the variable otherwise."""
    raw = os.environ.get(name, "")
    try:
        v = kind(raw) if raw.strip() else default
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number of {unit}") from None
    if v < 0 or v != v:
        raise ValueError(f"{name}={raw!r}: must be >= 0 (0 {zero})")
    return v


def header_timeout_s() -> float:
    return _env_number(ENV_TIMEOUT, float, DEFAULT_TIMEOUT_S, "seconds", "turns the header deadline off")


def body_budget() -> int:
    return _env_number(ENV_BODY_BUDGET, int, DEFAULT_BODY_BUDGET, "bytes", "takes the bound off")


class BodyBudget:
    """ASGI middleware: at most `budget` bytes of bodies over 64 KiB in
    progress at once (by their Content-Length; a chunked body counts as a
    quarter of the budget); past it, 429 before the body is read."""

    def __init__(self, app: Any, budget: int = DEFAULT_BODY_BUDGET):
        self.app, self.budget, self.held = app, budget, 0

    def _size(self, scope: dict) -> int:
        length = chunked = None
        for k, v in scope.get("headers") or ():
            if k == b"content-length":
                length = v
            elif k == b"transfer-encoding":
                chunked = v
        if length is not None:
            try:
                return int(length)
            except ValueError:
                return 0  # uvicorn has refused it already
        return self.budget // 4 if chunked is not None else 0

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or not self.budget:
            return await self.app(scope, receive, send)
        size = self._size(scope)
        if size <= SMALL_BODY:
            return await self.app(scope, receive, send)
        if self.held and self.held + size > self.budget:
            from .api import RequestError, json_bytes
            body = json_bytes(RequestError(429, f"the server is taking in {self.held} bytes of request bodies "
                                                "already; retry later").body())
            await send({"type": "http.response.start", "status": 429,
                        "headers": [(b"content-type", b"application/json"), (b"retry-after", b"1"),
                                    (b"connection", b"close"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        self.held += size
        try:
            await self.app(scope, receive, send)
        finally:
            self.held -= size


class Refusals:
    """ASGI middleware: counts every answer of 400 or more in COUNTS, and
    adds COUNTS to the /stats answer of the application behind it."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            return await self.app(scope, receive, send)
        held: dict = {}

        async def counted(message: dict) -> None:
            if message["type"] == "http.response.start":
                status = message.get("status", 200)
                if status >= 400:
                    COUNTS[str(status)] += 1
                if any(k == STATS_HEADER.encode() for k, _ in message.get("headers") or ()):
                    held["start"] = message  # the body is rewritten: hold the start until it is whole
                    held["body"] = b""
                    return
            elif message["type"] == "http.response.body" and "start" in held:
                held["body"] += message.get("body", b"")
                if message.get("more_body"):
                    return
                body = _with_refusals(held.pop("body"))
                start = held.pop("start")
                start["headers"] = [(k, v) for k, v in start.get("headers") or ()
                                    if k not in (b"content-length", STATS_HEADER.encode())] + [
                                   (b"content-length", str(len(body)).encode())]
                await send(start)
                message = {"type": "http.response.body", "body": body}
            await send(message)

        await self.app(scope, receive, counted)


def _with_refusals(body: bytes) -> bytes:
    try:
        out = json.loads(body)
        out["refusals"] = dict(sorted(COUNTS.items()))
        return json.dumps(out).encode()
    except (ValueError, TypeError):
        return body  # not the ingress's JSON: as it is


def proxy_env(timeout_s: float | None = None, environ: dict | None = None) -> dict[str, str]:
    """The environment variables that install the guard in Serve's proxy:
    for os.environ before a local Ray starts, for `ray start`'s environment,
    or for serve.start(controller_options={"runtime_env": {"env_vars": ...}})."""
    environ = os.environ if environ is None else environ
    env = {ENV_SERVE_CALLBACK: CALLBACK,
           ENV_TIMEOUT: f"{header_timeout_s() if timeout_s is None else timeout_s:g}",
           ENV_BODY_BUDGET: str(body_budget())}
    before = environ.get(ENV_SERVE_CALLBACK, "")
    if before and before != CALLBACK:
        env[ENV_NEXT] = before
    elif environ.get(ENV_NEXT):
        env[ENV_NEXT] = environ[ENV_NEXT]
    return env


def proxy_callback() -> list:
    """For $RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH: installs the guard and
    returns Refusals, BodyBudget and the Starlette middlewares of the callback set
    before it, if any."""
    from starlette.middleware import Middleware
    install()
    # Serve wraps the proxy's application in each of these in turn: the last is the outermost, so
    # that Refusals sees BodyBudget's answers and the proxy's own (its backpressure 429s)
    ours = [Middleware(BodyBudget, budget=body_budget()), Middleware(Refusals)]
    nxt = os.environ.get(ENV_NEXT, "")
    if not nxt or nxt == CALLBACK:
        return ours
    module, _, name = nxt.rpartition(".")
    return ours + list(getattr(importlib.import_module(module), name)() or [])


def _tcp_state(transport: Any) -> int | None:
    """The connection's TCP state (Linux's TCP_INFO; None elsewhere)."""
    sock = transport.get_extra_info("socket")
    if sock is None or not hasattr(socket, "TCP_INFO"):
        return None
    try:
        return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]
    except OSError:
        return None


_TCP_CLOSE_WAIT = 8  # the peer sent FIN and nothing else: it may still read


def _probe(proto: Any, sent_continue: bool) -> None:
    """After a client's end of input while its request runs: closes the
    connection once the peer has reset it (it went away altogether), else
    looks again in 0.25 s, until the response is complete."""
    t = getattr(proto, "transport", None)
    if t is None or t.is_closing() or getattr(proto, _EOF, None) is None:
        return
    cycle = proto.cycle
    if cycle is None or cycle.response_complete:
        return
    if not sent_continue and not cycle.response_started:
        # an interim answer every HTTP/1.1 client skips; a peer that closed gets a reset for it
        if cycle.scope.get("http_version") == "1.1":
            t.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        sent_continue = True
    state = _tcp_state(t)
    if state is not None and state != _TCP_CLOSE_WAIT:
        COUNTS["client_gone"] += 1
        t.close()  # uvicorn tells the application: http.disconnect
        return
    proto.loop.call_later(0.25, _probe, proto, sent_continue)


def _expire(proto: Any) -> None:
    setattr(proto, _TIMER, None)
    t = getattr(proto, "transport", None)
    if t is None or t.is_closing():
        return
    if proto.cycle is not getattr(proto, _CYCLE) or t.get_protocol() is not proto:
        return  # headers came (or a WebSocket took over) as the timer fired
    COUNTS["header_timeout"] += 1
    t.close()


def _disarm(proto: Any) -> None:
    timer = getattr(proto, _TIMER, None)
    if timer is not None:
        timer.cancel()
        setattr(proto, _TIMER, None)


def _arm(proto: Any, seconds: float) -> None:
    _disarm(proto)
    setattr(proto, _CYCLE, proto.cycle)
    setattr(proto, _TIMER, proto.loop.call_later(seconds, _expire, proto))


def _check(proto: Any) -> None:
    """Stops the timer once a request's headers are complete: uvicorn has
    made a new request cycle since the timer started."""
    if getattr(proto, _TIMER, None) is not None and proto.cycle is not getattr(proto, _CYCLE):
        _disarm(proto)


def _wrap(cls: type, seconds: float) -> None:
    if getattr(cls, "_clf_guarded", None) == seconds:
        return
    orig = getattr(cls, "_clf_original", None)
    if orig is None:
        orig = {n: getattr(cls, n) for n in ("connection_made", "connection_lost", "data_received",
                                             "on_response_complete", "eof_received", "send_400_response")}
        cls._clf_original = orig

    def connection_made(self, transport, *a, **kw):
        orig["connection_made"](self, transport, *a, **kw)
        _arm(self, seconds)

    def data_received(self, data):
        orig["data_received"](self, data)
        _check(self)

    def on_response_complete(self):
        orig["on_response_complete"](self)
        if getattr(self, _EOF, None) is not None:  # the client half-closed: nothing more comes
            setattr(self, _EOF, None)
            self.transport.close()
            return
        # uvicorn arms its keep-alive timer exactly when it waits for the
        # next request (none pipelined); so does the guard.
        if seconds > 0 and self.timeout_keep_alive_task is not None and not self.transport.is_closing():
            _arm(self, seconds)
        else:
            _check(self)

    def connection_lost(self, exc):
        _disarm(self)
        orig["connection_lost"](self, exc)

    def eof_received(self):
        """The client's end of input: while a whole request of its runs,
        the connection stays open for the answer (True), probed for a
        client that went away altogether (_probe)."""
        cycle = getattr(self, "cycle", None)
        # only after a whole request (its body complete): a client that stops halfway through
        # its body has gone, as before (uvicorn tells the application it disconnected)
        if (cycle is not None and not cycle.response_complete and not getattr(cycle, "more_body", True)
                and getattr(self, _EOF, None) is None):
            setattr(self, _EOF, True)
            _probe(self, False)
            return True
        return orig["eof_received"](self)

    def send_400_response(self, msg):
        COUNTS["400"] += 1
        orig["send_400_response"](self, msg)

    # the half-close answer and the counts hold whatever the deadline (0: none)
    cls.eof_received, cls.send_400_response = eof_received, send_400_response
    cls.on_response_complete = on_response_complete
    if seconds > 0:
        cls.connection_made, cls.data_received = connection_made, data_received
        cls.connection_lost = connection_lost
    else:
        for n in ("connection_made", "data_received", "connection_lost"):
            setattr(cls, n, orig[n])
    cls._clf_guarded = seconds


def install(timeout_s: float | None = None) -> float:
    """Puts the header deadline (default $CLFORMER_SERVE_HEADER_TIMEOUT_S, else
    10 s; 0 takes it off) on uvicorn's HTTP protocols in this process;
    returns the deadline.  Idempotent."""
    seconds = header_timeout_s() if timeout_s is None else float(timeout_s)
    from uvicorn.protocols.http.h11_impl import H11Protocol
    _wrap(H11Protocol, seconds)
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # no httptools: uvicorn takes H11Protocol
        pass
    else:
        _wrap(HttpToolsProtocol, seconds)
    return seconds
