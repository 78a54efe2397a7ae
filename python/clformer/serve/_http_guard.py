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

It must run in the proxy's process.  Serve calls the function named by
$RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH there before uvicorn starts;
proxy_env() gives the variables that make it call proxy_callback(), which
installs the guard and returns the middleware (and calls a callback the
user had set there before).
"""
from __future__ import annotations

import importlib
import os
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
    returns BodyBudget and the Starlette middlewares of the callback set
    before it, if any."""
    from starlette.middleware import Middleware
    install()
    ours = [Middleware(BodyBudget, budget=body_budget())]
    nxt = os.environ.get(ENV_NEXT, "")
    if not nxt or nxt == CALLBACK:
        return ours
    module, _, name = nxt.rpartition(".")
    return ours + list(getattr(importlib.import_module(module), name)() or [])


def _expire(proto: Any) -> None:
    setattr(proto, _TIMER, None)
    t = getattr(proto, "transport", None)
    if t is None or t.is_closing():
        return
    if proto.cycle is not getattr(proto, _CYCLE) or t.get_protocol() is not proto:
        return  # headers came (or a WebSocket took over) as the timer fired
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
                                             "on_response_complete")}
        cls._clf_original = orig

    def connection_made(self, transport, *a, **kw):
        orig["connection_made"](self, transport, *a, **kw)
        _arm(self, seconds)

    def data_received(self, data):
        orig["data_received"](self, data)
        _check(self)

    def on_response_complete(self):
        orig["on_response_complete"](self)
        # uvicorn arms its keep-alive timer exactly when it waits for the
        # next request (none pipelined); so does the guard.
        if self.timeout_keep_alive_task is not None and not self.transport.is_closing():
            _arm(self, seconds)
        else:
            _check(self)

    def connection_lost(self, exc):
        _disarm(self)
        orig["connection_lost"](self, exc)

    if seconds > 0:
        cls.connection_made, cls.data_received = connection_made, data_received
        cls.on_response_complete, cls.connection_lost = on_response_complete, connection_lost
    else:
        for n, f in orig.items():
            setattr(cls, n, f)
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
