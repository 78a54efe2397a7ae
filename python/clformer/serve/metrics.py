"""metrics.py - GET /metrics: the server's figures in Prometheus' text format
(prometheus-client), each application in a registry of its own, so that
several applications in one process (tests, one-process mode) never share
or collide on a metric.

The ingress counts what it answers (CountRequests, an ASGI middleware:
requests by endpoint and status code), the completions' tokens and their
timing (Metrics.observe, Metrics.follow); the engines' figures (KV pool,
running and waiting sequences) are read from the replicas at each scrape
(replica_figures) and written with a label naming the replica.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, Mapping

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

CONTENT_TYPE = CONTENT_TYPE_LATEST

# Time to first token: from the request's arrival at the ingress to its
# first generated token (queueing and the prompt's forward pass included).
TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0)
# Time per output token after the first: one decode step shared by the
# batch, from about a millisecond (a tiny model) to a second (a large one on
# a CPU runtime).
TPOT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.5)

# The engine's figures (clformer.EngineStats fields) written per replica:
# (metric, field, kind, help).  Gauges are what the engine holds now;
# counters what it did since it was made.
ENGINE_FIGURES = (
    ("clformer_kv_blocks_used", "blocks_used", "gauge", "KV pool blocks held by running sequences"),
    ("clformer_kv_blocks_cached", "blocks_cached", "gauge", "KV pool blocks free but holding a reusable prefix"),
    ("clformer_kv_blocks_total", "blocks", "gauge", "KV pool blocks in all"),
    ("clformer_kv_block_bytes", "block_bytes", "gauge", "device memory of one KV pool block"),
    ("clformer_kv_window_blocks_used", "window_blocks_used", "gauge",
     "windowed layers' KV pool blocks held by running sequences (a model mixing windowed and full layers)"),
    ("clformer_kv_window_blocks_total", "window_blocks", "gauge", "windowed layers' KV pool blocks in all"),
    ("clformer_sequences_running", "running", "gauge", "sequences decoding in the engine's steps"),
    ("clformer_sequences_waiting", "waiting", "gauge", "sequences queued for a place in the engine"),
    ("clformer_prefix_tokens_reused", "prefix_tokens_reused", "counter",
     "prompt positions taken from the KV cache instead of computed"),
    ("clformer_preemptions", "preemptions", "counter", "sequences preempted for want of KV blocks"),
    ("clformer_engine_steps", "steps", "counter", "engine steps run"),
)


class Metrics:
    """One application's metrics, in its own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("clformer_requests", "HTTP requests answered, by endpoint (the route's path) and "
                                "status code", ["endpoint", "status"], registry=r)
        self.prompt_tokens = Counter("clformer_prompt_tokens", "prompt tokens of the completions answered (a "
                                     "request's prompt once, whatever its n)", registry=r)
        self.generation_tokens = Counter("clformer_generation_tokens", "tokens generated, every choice's (the end "
                                         "token included, as usage counts it)", registry=r)
        self.ttft = Histogram("clformer_time_to_first_token_seconds", "from a completion request's arrival to its "
                              "first generated token", buckets=TTFT_BUCKETS, registry=r)
        self.tpot = Histogram("clformer_time_per_output_token_seconds", "a completion's time per generated token "
                              "after the first (its first choice's)", buckets=TPOT_BUCKETS, registry=r)
        self._engines: Mapping[str, Mapping] = {}
        r.register(_EngineCollector(self))

    def observe(self, prompt_tokens: int, generated: int, ttft_s: float | None = None,
                decode_s: float | None = None, first_choice_tokens: int = 0) -> None:
        """One completion answered: its usage, its time to first token and
        (with more than one token in its first choice) its time per output
        token, decode_s over the tokens after the first."""
        self.prompt_tokens.inc(max(0, prompt_tokens))
        self.generation_tokens.inc(max(0, generated))
        if ttft_s is not None:
            self.ttft.observe(max(0.0, ttft_s))
        if decode_s is not None and first_choice_tokens > 1:
            self.tpot.observe(max(0.0, decode_s) / (first_choice_tokens - 1))

    def follow(self, pieces: AsyncIterator, t0: float, prompt_tokens: int) -> "_Followed":
        """A stream's items (replica.stream's deltas and trailers, its header
        already taken) passed through as they come, timed: the first delta
        of a text is the first token; choice 0's trailer ends the decode.
        Observed once, when the stream ends or is closed, cut short or not
        (what was generated is counted).  Its aclose() closes `pieces`
        whether or not iteration began (an async generator's would not run
        its cleanup then, leaving the replica's generation running)."""
        return _Followed(self, pieces, t0, prompt_tokens)

    def render(self, engines: Mapping[str, Mapping | None]) -> bytes:
        """The exposition: this application's metrics and, per replica tag,
        the engine figures given (EngineStats as a dict; None or an error
        dict: that replica has no engine, and writes none)."""
        self._engines = {tag: st for tag, st in engines.items() if st and "error" not in st}
        try:
            return generate_latest(self.registry)
        finally:
            self._engines = {}


class _Followed:
    """Metrics.follow's iterator."""

    def __init__(self, metrics: Metrics, pieces: AsyncIterator, t0: float, prompt_tokens: int):
        self.metrics, self.pieces, self.t0, self.prompt_tokens = metrics, pieces, t0, prompt_tokens
        self.first = self.end = None
        self.tokens = self.first_tokens = 0
        self.observed = False

    def __aiter__(self) -> "_Followed":
        return self

    async def __anext__(self) -> Any:
        try:
            item = await self.pieces.__anext__()
        except StopAsyncIteration:
            self._observe()
            raise
        if isinstance(item, dict):
            self.tokens += item.get("tokens", 0)
            if item.get("index", 0) == 0:
                self.end, self.first_tokens = time.monotonic(), item.get("tokens", 0)
        elif self.first is None:
            self.first = time.monotonic()
        return item

    async def aclose(self) -> None:
        try:
            await self.pieces.aclose()
        finally:
            self._observe()

    def _observe(self) -> None:
        if self.observed:
            return
        self.observed = True
        first = self.first
        self.metrics.observe(self.prompt_tokens, self.tokens, None if first is None else first - self.t0,
                             None if first is None or self.end is None else self.end - first, self.first_tokens)


class _EngineCollector:
    """The engines' figures of the scrape in progress (Metrics.render)."""

    def __init__(self, metrics: Metrics):
        self.metrics = metrics

    def describe(self) -> Iterable:
        return []  # the families are made at each scrape

    def collect(self) -> Iterable:
        engines = self.metrics._engines
        for name, field, kind, doc in ENGINE_FIGURES:
            fam = (GaugeMetricFamily if kind == "gauge" else CounterMetricFamily)(name, doc, labels=["replica"])
            for tag, st in sorted(engines.items()):
                v = st.get(field)
                if isinstance(v, (int, float)):
                    fam.add_metric([tag], v)
            yield fam


async def replica_figures(info: Callable[[], Awaitable[Mapping]], replicas: int,
                          timeout_s: float = 10.0) -> dict[str, Mapping | None]:
    """The engine figures of the replicas (tag -> EngineStats dict or None),
    from their info() call.  Ray Serve has no call that reaches every
    replica, so info() goes out 2 x replicas times at once and the router,
    which sends each call to the less loaded of two replicas, spreads them;
    a replica none of them reached is missing from this scrape (and comes
    back at the next).  A call that fails or does not answer in timeout_s
    is left out: a scrape never waits on a stuck replica."""
    async def one() -> Mapping | None:
        try:
            return await asyncio.wait_for(info(), timeout_s)
        except Exception:  # noqa: BLE001 - a statistic, not an answer
            return None

    out: dict[str, Mapping | None] = {}
    for r in await asyncio.gather(*[one() for _ in range(max(1, 2 * replicas if replicas > 1 else 1))]):
        if isinstance(r, Mapping) and isinstance(r.get("replica"), str):
            out[r["replica"]] = r.get("engine")
    return out


class CountRequests:
    """ASGI middleware counting each HTTP request by endpoint and status
    code in the application's Metrics (scope["app"].state.clformer_metrics;
    none set: nothing is counted).  The endpoint is the matched route's
    path ("/v1/models/{model_id}"), "other" for no route, so that a
    client's URLs cannot grow the label set.  Counted when the status line
    goes out (a streamed answer at its start), so that a client that has
    its answer finds it counted; a handler that raised, 500."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        state = getattr(scope.get("app"), "state", None)
        metrics = getattr(state, "clformer_metrics", None) if state is not None else None
        if metrics is None:
            await self.app(scope, receive, send)
            return
        counted = False

        def count(status: int) -> None:
            nonlocal counted
            if not counted:
                counted = True
                route = scope.get("route")
                metrics.requests.labels(getattr(route, "path", None) or "other", str(status)).inc()

        async def counting_send(message: dict) -> None:
            if message.get("type") == "http.response.start":
                count(int(message.get("status", 0)))
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        except Exception:  # (a cancelled request, its client gone, is not counted)
            count(500)
            raise
