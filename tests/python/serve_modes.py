"""serve_modes.py - the serve tests' two servers: the same models under the same
route prefixes, in one process (clformer.serve.single, uvicorn on a thread of
the test's process) or on a local Ray Serve (clformer.serve.ray_app), so that
every test of the HTTP surface runs against both modes."""
from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Iterator

MODES = ("one-process", "ray")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def one_process(apps: dict, header_timeout_s: float | None = None) -> Iterator[str]:
    """{route prefix ("/bert"): ServeOptions} served by one uvicorn in this
    process, behind the same guard as `python -m clformer.serve`; yields
    the base URL.  The models are closed at the end."""
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from clformer.serve import single

    loaded = []
    try:
        for prefix, opts in apps.items():
            loaded.append((prefix, single.Application(opts)))
        root = Starlette(routes=[Mount(prefix, app=a.asgi) for prefix, a in loaded])
        port = free_port()
        srv = single.server(single.guarded(root, header_timeout_s), "127.0.0.1", port)
        t = threading.Thread(target=srv.run, name="serve-test-uvicorn", daemon=True)
        t.start()
        t0 = time.monotonic()
        while not srv.started:
            assert t.is_alive() and time.monotonic() - t0 < 30, "uvicorn did not start"
            time.sleep(0.02)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            srv.should_exit = True
            t.join(30)
    finally:
        for _, a in loaded:
            a.close()


@contextlib.contextmanager
def ray_serve(apps: dict, timeout_s: float) -> Iterator[str]:
    """The same apps deployed on a local Ray Serve (one HTTP proxy); yields
    its base URL; Serve and Ray are shut down at the end."""
    import ray
    from ray import serve

    from clformer.serve.app import deploy, local_ray, start_http

    local_ray(num_cpus=2, resources={"opencl_device": 1})
    port = free_port()
    try:
        start_http("127.0.0.1", port, timeout_s + 10)
        for prefix, opts in apps.items():
            deploy(opts, app_name=prefix.strip("/") or "clformer", route_prefix=prefix)
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()
        ray.shutdown()


@contextlib.contextmanager
def server(mode: str, apps: dict, timeout_s: float) -> Iterator[str]:
    if mode == "ray":
        with ray_serve(apps, timeout_s) as url:
            yield url
    else:
        with one_process(apps) as url:
            yield url


def is_ray() -> bool:
    """Whether the server of the test running now is the Ray one."""
    import sys
    ray = sys.modules.get("ray")
    return bool(ray) and ray.is_initialized()
