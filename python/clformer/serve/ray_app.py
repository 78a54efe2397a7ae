"""ray_app.py - clformer.serve on Ray Serve (--replicas, --address): the
ingress of app.py as a deployment, in front of the model replicas
(replica.py, one OpenCL device each), reached through a deployment handle.

RayBackend keeps the client out of a replica's failures: when a replica dies
or cannot be reached (Ray restarts it), the call is retried on another one,
a bounded number of times within the request's deadline, and answered 503
when none could take it.  A stream cut by a dying replica is resumed on
another when the request decodes deterministically (greedy, or sampling
with a seed): the new replica's text is checked against what was already
sent and only the rest goes out.  One-process mode (single.py) never
imports this module, nor Ray.
"""
import asyncio
import time
from typing import Any, AsyncIterator, Callable

from ray import serve
from ray.exceptions import RayActorError, RayTaskError
from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError

from . import _http_guard
from .api import RequestError
from .app import Ingress, _within, make_app
from .local import local_ray, restrict_replica_grpc
from .options import ServeOptions
from .replica import ModelReplica

# A replica died, is restarting, or none is up: worth another try.  (A full
# queue, BackPressureError, is not: it is answered 429 at once.)
_RETRYABLE = (RayActorError, DeploymentUnavailableError)


def _full() -> RequestError:
    return RequestError(429, "the model replicas' queues are full; retry later")


def _replica_failure(e: RayTaskError) -> RequestError:
    """What the client gets for an exception raised inside a replica: the
    replica's own refusal (a RequestError) as it is, anything else 500."""
    if isinstance(e, RequestError):
        return e
    cause = getattr(e, "cause", None)
    if isinstance(cause, RequestError):
        return cause
    return RequestError(500, f"the model replica failed: {type(cause).__name__}: {str(cause)[:500]}")


async def _retried(ing: Any, attempt: Callable[[], AsyncIterator], deadline: float,
                   lost: Callable[[], str | None] | None = None) -> AsyncIterator:
    """The one retry path of replica calls: what attempt() yields, attempt()
    being one try on one replica.  When the replica dies or cannot be
    reached, attempt() runs again (on whichever replica Serve picks), at
    most opts.retries more times, backing off 0.25 s, 0.5 s, 1 s, ... within
    the deadline; lost(), called at each such failure, may instead end the
    request with a 503 giving its reason (a stream that cannot be resumed).
    A full queue is 429 at once, a replica's refusal goes to the client as
    it is, any other failure inside a replica is 500; none is retried.  503
    when no try succeeded."""
    last: BaseException | None = None
    for n in range(ing.opts.retries + 1):
        if n:
            await asyncio.sleep(min(0.25 * 2 ** (n - 1), max(0.0, deadline - time.monotonic())))
        if deadline - time.monotonic() <= 0:
            break
        items = attempt()
        try:
            async for item in items:
                yield item
            return
        except BackPressureError:
            ing.stats["answered_429"] += 1
            raise _full() from None
        except _RETRYABLE as e:
            last = e
            ing.stats["retried_calls"] += 1
            why = lost() if lost else None
            if why:
                ing.stats["answered_503"] += 1
                raise RequestError(503, why) from None
        except RayTaskError as e:
            raise _replica_failure(e) from None
        finally:
            await items.aclose()
    ing.stats["answered_503"] += 1
    raise RequestError(503, "no model replica could take the request "
                            f"({type(last).__name__ if last else 'deadline passed'}); retry later")


class RayBackend:
    """The model replicas behind a deployment handle, every call through _retried."""

    watch_disconnect = False  # Serve's proxy cancels the calls of a client that left

    def __init__(self, model: Any):
        self.model = model

    async def call(self, ing: Any, method: str, *args: Any, deadline: float) -> Any:
        """The answer of one replica method."""
        async def attempt() -> AsyncIterator:
            yield await _within(getattr(self.model, method).remote(*args), deadline, ing.limits.request_timeout_s)

        answers = _retried(ing, attempt, deadline)
        try:
            return await answers.__anext__()
        finally:
            await answers.aclose()

    async def replica_info(self) -> dict:
        return await self.model.info.remote()

    def broken(self) -> str | None:
        return None  # Serve checks each replica's health and replaces it

    def pieces(self, ing: Any, req: Any, deadline: float) -> AsyncIterator:
        """The replica's header, then the choices' deltas and trailers,
        through _retried: a stream cut by a dying replica is resumed on
        another when the request is deterministic; each choice's text (and
        logprob entries) from the new replica is checked against what the
        client has, and only the rest goes out."""
        sent: dict[int, str] = {}        # text the client has, per choice
        sent_lps: dict[int, int] = {}    # logprob entries the client has, per choice
        ended: set[int] = set()          # choices whose trailer went out
        header_sent = False

        async def attempt() -> AsyncIterator:
            nonlocal header_sent
            gen = self.model.options(stream=True).stream.remote(req)
            produced: dict[int, str] = {}
            produced_lps: dict[int, list] = {}
            first = True
            try:
                while True:
                    try:
                        item = await _within(gen.__anext__(), deadline, ing.limits.request_timeout_s)
                    except StopAsyncIteration:
                        return
                    if first:  # each replica's stream starts with its header; the client gets the first only
                        first = False
                        if not header_sent:
                            header_sent = True
                            yield item
                        continue
                    if isinstance(item, dict):  # a choice's trailer, after its whole text
                        i = item.get("index", 0)
                        if i not in ended:
                            ended.add(i)
                            yield item
                        continue
                    i, text, entries = item
                    p = produced[i] = produced.get(i, "") + text
                    have = sent.get(i, "")
                    if len(p) <= len(have):  # a replica that took over, still behind the client
                        if not have.startswith(p):
                            raise RequestError(503, "the replica that took over generated another text; retry")
                        new = ""
                    else:
                        if not p.startswith(have):
                            raise RequestError(503, "the replica that took over generated another text; retry")
                        new, sent[i] = p[len(have):], p
                    new_lps = None
                    if entries is not None:
                        lps = produced_lps.setdefault(i, [])
                        lps.extend(entries)
                        new_lps = lps[sent_lps.get(i, 0):]
                        sent_lps[i] = max(sent_lps.get(i, 0), len(lps))
                    if new or new_lps:
                        yield (i, new, new_lps)
            finally:
                gen.cancel()

        def lost() -> str | None:
            if not any(sent.values()) and not any(sent_lps.values()):
                return None  # no text went out: run it again from the start
            if not req.deterministic:
                return ("the model replica failed mid-stream, and a sampled text without a seed cannot be "
                        "resumed; retry")
            ing.stats["resumed_streams"] += 1
            return None

        return _retried(ing, attempt, deadline, lost)




@serve.ingress()
class RayIngress(Ingress):
    """The Ingress as Serve's deployment: its ASGI application is built on the
    replica, once the Ingress exists (Serve calls __serve_build_asgi_app__)."""

    def __init__(self, model: Any, opts: ServeOptions):
        restrict_replica_grpc()
        super().__init__(RayBackend(model), opts)

    def __serve_build_asgi_app__(self) -> Any:
        return make_app(self)


def build_app(opts: ServeOptions) -> Any:
    """The application: Ingress bound to opts.replicas model replicas, each
    taking 1/replicas_per_device of the custom resource opts.resource."""
    replica = serve.deployment(ModelReplica, name="ModelReplica").options(
        num_replicas=opts.replicas,
        ray_actor_options={"num_cpus": opts.replica_cpus, "resources": opts.replica_resources()},
        max_ongoing_requests=opts.max_ongoing_requests,
        max_queued_requests=opts.max_queued_requests,
        health_check_period_s=5,
        health_check_timeout_s=30,
        graceful_shutdown_timeout_s=5,
    )
    ingress = serve.deployment(RayIngress, name="Ingress").options(
        num_replicas=1, ray_actor_options={"num_cpus": 0}, max_ongoing_requests=1000)
    return ingress.bind(replica.bind(opts), opts)


def start_http(host: str = "127.0.0.1", port: int = 8000, request_timeout_s: float = 130.0,
               keep_alive_timeout_s: int = 5) -> None:
    """Starts Serve's HTTP proxy on host:port (Ray must be initialised), with
    idle keep-alive connections closed after keep_alive_timeout_s (Serve's
    default is 90) and _http_guard's header deadline and body budget in the
    proxy (local_ray's environment already carries them; on a cluster they
    travel in the controller's runtime_env, to the proxies it starts)."""
    serve.start(http_options={"host": host, "port": port, "request_timeout_s": request_timeout_s,
                              "keep_alive_timeout_s": keep_alive_timeout_s},
                controller_options={"runtime_env": {"env_vars": _http_guard.proxy_env()}})


def deploy(opts: ServeOptions, app_name: str = "clformer", route_prefix: str = "/") -> None:
    """Deploys the application under route_prefix; returns once every replica is up."""
    serve.run(build_app(opts), name=app_name, route_prefix=route_prefix, blocking=False)


def start(opts: ServeOptions, *, host: str = "127.0.0.1", port: int = 8000, app_name: str = "clformer",
          route_prefix: str = "/") -> None:
    """start_http, then deploy."""
    start_http(host, port, opts.limits.request_timeout_s + 10)
    deploy(opts, app_name, route_prefix)


__all__ = ["build_app", "deploy", "start", "start_http", "local_ray", "RayIngress", "RayBackend", "ModelReplica"]
