"""single.py - clformer.serve in one process, the default on one machine: the
application of app.py under uvicorn, the model replica (replica.py) in the
same process, its engine on its own threads.  No Ray is imported, nothing is
written but the kernel cache; ready once the model is loaded.

The HTTP defences are the same as under Ray Serve's proxy: _http_guard's
header deadline on uvicorn's protocols, its body budget and refusal counts
as middleware, idle keep-alive connections closed after 5 s; the ingress's
own bounds (body deadline, max-concurrent, byte budget, deadline 504) are
app.py's, shared by both modes.
"""
from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from typing import Any, Callable

from . import _http_guard
from .app import Ingress, LocalBackend, make_app
from .options import ServeOptions


class Application:
    """One model served in this process: its replica, its Ingress and the
    ASGI application of that Ingress (`asgi`); close() frees the model."""

    def __init__(self, opts: ServeOptions):
        from .replica import ModelReplica
        self.replica = ModelReplica(opts, in_process=True)
        self.ingress = Ingress(LocalBackend(self.replica), opts)
        self.asgi = make_app(self.ingress)

    def close(self) -> None:
        self.replica.close()


def guarded(app: Any, header_timeout_s: float | None = None) -> Any:
    """`app` behind the defences Ray Serve's proxy puts in front of a
    deployment (_http_guard): the header deadline installed on uvicorn, the
    body budget, the refusal counts."""
    _http_guard.install(header_timeout_s)
    return _http_guard.Refusals(_http_guard.BodyBudget(app, _http_guard.body_budget()))


def server(app: Any, host: str, port: int, request_timeout_s: float = 130.0) -> Any:
    """A uvicorn.Server for `app` (already guarded) on host:port.  SIGINT and
    SIGTERM stop it (a second one at once), and the process then exits with
    its own status: uvicorn would raise the signal again once stopped."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            before = {s: signal.signal(s, self.handle_exit) for s in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for s, h in before.items():
                    signal.signal(s, h)

    config = uvicorn.Config(app, host=host, port=port, lifespan="off", access_log=False, log_level="warning",
                            timeout_keep_alive=5, timeout_graceful_shutdown=5, server_header=False)
    return Server(config)


async def _announce(srv: Any, ready: Callable[[], None]) -> None:
    while not srv.started:
        if srv.should_exit:
            return
        await asyncio.sleep(0.02)
    ready()


def run(opts: ServeOptions, host: str, port: int, header_timeout_s: float | None = None,
        ready: Callable[[], None] | None = None) -> int:
    """Serves `opts` on host:port until SIGINT or SIGTERM (uvicorn's handlers);
    ready() once the socket listens.  Returns 0, or 1 when the socket could
    not be opened (uvicorn has said why)."""
    app = Application(opts)
    try:
        srv = server(guarded(app.asgi, header_timeout_s), host, port, opts.limits.request_timeout_s + 10)

        async def main() -> None:
            tell = asyncio.ensure_future(_announce(srv, ready or (lambda: None)))
            try:
                await srv.serve()
            finally:
                tell.cancel()
        asyncio.run(main())
        return 0 if srv.started else 1
    finally:
        app.close()
