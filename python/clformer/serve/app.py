"""app.py - the Ray Serve application: an HTTP ingress (FastAPI, no device)
in front of the model replicas (replica.py, one OpenCL device each).

The ingress reads and checks each request (api.py), calls a replica through
a deployment handle, and writes the answer.  It keeps the client out of a
replica's failures: when a replica dies or cannot be reached (Ray restarts
it), the call is retried on another one, a bounded number of times within
the request's deadline, and answered 503 when none could take it.  A stream
cut by a dying replica is resumed on another when the request decodes
deterministically (greedy, or sampling with a seed): the new replica's text
is checked against what was already sent and only the rest goes out.
"""
import asyncio
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping

from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from ray import serve
from ray.exceptions import RayActorError, RayTaskError
from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError
from starlette.exceptions import HTTPException as StarletteHTTPException

from . import _http_guard, api, metrics
from .api import RequestError
from .local import local_ray, restrict_replica_grpc
from .options import ServeOptions
from .replica import ModelReplica

# A replica died, is restarting, or none is up: worth another try.  (A full
# queue, BackPressureError, is not: it is answered 429 at once.)
_RETRYABLE = (RayActorError, DeploymentUnavailableError)

# No redirects at all: Starlette's trailing-slash redirect builds its Location
# from the request's Host header.
fastapi_app = FastAPI(title="clformer", docs_url=None, redoc_url=None, openapi_url=None, redirect_slashes=False)
fastapi_app.add_middleware(metrics.CountRequests)  # /metrics' requests by endpoint and status

# Bodies above this are parsed on a worker thread, off the ingress's event loop.
_THREAD_PARSE_BYTES = 64 << 10


def _give_back_memory() -> None:
    """Returns the C heap's free pages to the system (glibc's malloc_trim).
    A large body's copies (bytes, text, parsed JSON) are freed when its
    request ends, but glibc keeps freed heap memory for reuse, and once a
    multi-megabyte block has been freed it serves later ones from the heap
    rather than mmap: without this, each burst of large bodies left the
    ingress tens of MB larger.  Elsewhere than glibc, nothing happens."""
    global _trim
    if _trim is None:
        try:
            import ctypes
            _trim = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError):
            _trim = False
    if _trim:
        _trim(0)


_trim: Any = None


def _json(obj: Any, status: int = 200, replica: str | None = None) -> Response:
    headers = {"X-Clformer-Replica": replica} if replica else None
    return Response(api.json_bytes(obj), status_code=status, media_type="application/json", headers=headers)


def _error(e: RequestError, headers: Mapping[str, str] | None = None) -> Response:
    h = dict(headers or {})
    if e.status in (429, 503):
        h["Retry-After"] = "1"
    if e.status in (408, 413, 429):
        # answered before the body was read (or while it trickles): the
        # connection is closed, so that the rest of the body is not read
        h["Connection"] = "close"
    return Response(api.json_bytes(e.body()), status_code=e.status, media_type="application/json", headers=h)


@fastapi_app.exception_handler(RequestError)
async def _refused(request: Request, exc: RequestError) -> Response:
    return _error(exc)


@fastapi_app.exception_handler(StarletteHTTPException)
async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    # Unknown paths and methods in the same error shape as everything else;
    # a 405 keeps its Allow header.
    what = {404: f"no such endpoint {request.url.path}", 405: f"{request.method} is not allowed on "
            f"{request.url.path}"}.get(exc.status_code, str(exc.detail))
    return _error(RequestError(exc.status_code, what), getattr(exc, "headers", None))


@fastapi_app.exception_handler(Exception)
async def _unexpected(request: Request, exc: Exception) -> Response:
    # Whatever was missed above is still an answer in the API's error shape.
    return _error(RequestError(500, f"internal error: {type(exc).__name__}"))


def _replica_failure(e: RayTaskError) -> RequestError:
    """What the client gets for an exception raised inside a replica: the
    replica's own refusal (a RequestError) as it is, anything else 500."""
    if isinstance(e, RequestError):
        return e
    cause = getattr(e, "cause", None)
    if isinstance(cause, RequestError):
        return cause
    return RequestError(500, f"the model replica failed: {type(cause).__name__}: {str(cause)[:500]}")


async def _within(aw: Awaitable, deadline: float, timeout_s: float) -> Any:
    """`aw`'s result, or 504 when the request's deadline passes first."""
    try:
        return await asyncio.wait_for(aw, max(0.0, deadline - time.monotonic()))
    except asyncio.TimeoutError:
        raise RequestError(504, f"no answer within {timeout_s:g} s") from None


async def _retried(ing: "Ingress", attempt: Callable[[], AsyncIterator], deadline: float,
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


def _content_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def _need_json(request: Request) -> None:
    """JSON endpoints take application/json only: the types a browser sends
    cross-site without a preflight (text/plain, forms) are refused."""
    ctype = _content_type(request)
    if ctype != "application/json":
        raise RequestError(415, f"Content-Type {ctype or '(none)'!r}: this endpoint takes application/json")


def _full() -> RequestError:
    return RequestError(429, "the model replicas' queues are full; retry later")


@serve.ingress(fastapi_app)
class Ingress:
    def __init__(self, model: Any, opts: ServeOptions):
        restrict_replica_grpc()
        self.model = model
        self.opts = opts
        self.limits = opts.limits
        self.name = opts.served_name()
        self._info: dict | None = None
        # Requests held now and the body bytes they declared: past either
        # bound a request is answered 429 before its body is read.
        self.inflight = 0
        self.inflight_bytes = 0
        # What the ingress did about failures and load, for GET /stats.
        self.stats = {"retried_calls": 0, "resumed_streams": 0, "answered_503": 0, "answered_429": 0}
        self.metrics = metrics.Metrics()  # GET /metrics
        fastapi_app.state.clformer_metrics = self.metrics
        self.created = int(time.time())  # /v1/models' "created": when this server started serving the model

    # ------------------------------------------------------------ plumbing

    def _admit(self, request: Request) -> int:
        """Takes a place for the request, or answers 429 before its body is
        read: past Limits.max_concurrent requests, or when its body (its
        Content-Length; without one, the largest allowed) would take the
        bodies in progress past 4 x max_body_bytes (at least 32 MiB).  Small
        bodies are not held to that budget, so a burst of large ones cannot
        keep an ordinary request out.  Returns the bytes to give back with
        _leave."""
        limit = self.limits.max_body_bytes
        declared = request.headers.get("content-length")
        try:
            size = int(declared) if declared is not None else limit
        except ValueError:
            raise RequestError(400, f"Content-Length {declared!r} is not a number") from None
        if size > limit:
            raise RequestError(413, f"the request body is {size} bytes; at most {limit}")
        budget = max(4 * limit, 32 << 20)
        if self.inflight >= self.limits.max_concurrent or (
                size > _THREAD_PARSE_BYTES and self.inflight_bytes + size > budget):
            self.stats["answered_429"] += 1
            raise RequestError(429, f"the server is busy ({self.inflight} requests, {self.inflight_bytes} body bytes "
                                    "in progress); retry later")
        self.inflight += 1
        self.inflight_bytes += size
        return size

    def _leave(self, size: int) -> None:
        self.inflight -= 1
        self.inflight_bytes -= size
        if size > _THREAD_PARSE_BYTES and self.inflight_bytes == 0:
            _give_back_memory()  # the last large body in progress is done

    async def _body(self, request: Request) -> bytes:
        limit = self.limits.max_body_bytes

        async def read() -> bytes:
            chunks, size = [], 0
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise RequestError(413, f"the request body is over {limit} bytes")
                chunks.append(chunk)
            return b"".join(chunks)

        try:
            return await asyncio.wait_for(read(), self.limits.body_timeout_s)
        except asyncio.TimeoutError:
            raise RequestError(408, f"the request body did not arrive within {self.limits.body_timeout_s:g} s")

    async def _json_body(self, request: Request) -> dict:
        _need_json(request)
        raw = await self._body(request)
        if len(raw) > _THREAD_PARSE_BYTES:
            return await asyncio.to_thread(api.parse_json, raw)
        return api.parse_json(raw)

    async def _call(self, method: str, *args: Any, deadline: float) -> Any:
        """The answer of one replica method, through _retried."""
        async def attempt() -> AsyncIterator:
            yield await _within(getattr(self.model, method).remote(*args), deadline, self.limits.request_timeout_s)

        answers = _retried(self, attempt, deadline)
        try:
            return await answers.__anext__()
        finally:
            await answers.aclose()

    async def info(self, deadline: float) -> dict:
        if self._info is None:
            self._info = await self._call("info", deadline=deadline)
        return self._info

    def _deadline(self) -> float:
        return time.monotonic() + self.limits.request_timeout_s

    # ------------------------------------------------------------ endpoints

    @fastapi_app.get("/health")
    async def health(self) -> Response:
        return _json({"status": "ok"})

    @fastapi_app.get("/stats")
    async def get_stats(self) -> Response:
        """Replica calls retried, streams resumed on another replica, 503s and
        429s, requests in progress; "replica": what one model replica reports
        of itself (ModelReplica.info: its device, batch bounds, generations
        cancelled because their caller went away)."""
        out: dict = dict(self.stats, inflight=self.inflight)
        try:
            out["replica"] = await asyncio.wait_for(self.model.info.remote(), 10)
        except Exception as e:  # noqa: BLE001 - a statistic, not an answer
            out["replica"] = {"error": f"{type(e).__name__}"}
        return _json(out)

    @fastapi_app.get("/metrics")
    async def get_metrics(self) -> Response:
        """Prometheus' text format (metrics.py), the replicas' engine figures
        read now."""
        figures = await metrics.replica_figures(lambda: self.model.info.remote(), self.opts.replicas)
        return Response(self.metrics.render(figures), media_type=metrics.CONTENT_TYPE)

    def _model_card(self) -> dict:
        return {"id": self.name, "object": "model", "created": self.created, "owned_by": "clformer"}

    @fastapi_app.get("/v1/models")
    async def models(self) -> Response:
        return _json({"object": "list", "data": [self._model_card()]})

    @fastapi_app.get("/v1/models/{model_id:path}")
    async def model(self, model_id: str) -> Response:
        if model_id != self.name:
            raise RequestError(404, f"model {model_id!r} is not served here; this server serves {self.name!r}",
                               "model", "model_not_found")
        return _json(self._model_card())

    @fastapi_app.post("/tokenize")
    async def tokenize(self, request: Request) -> Response:
        return await self._tokens(request, "tokenize", api.parse_tokenize)

    @fastapi_app.post("/detokenize")
    async def detokenize(self, request: Request) -> Response:
        return await self._tokens(request, "detokenize", api.parse_detokenize)

    async def _tokens(self, request: Request, method: str, parse: Callable) -> Response:
        size = self._admit(request)
        try:
            dl = self._deadline()
            req = parse(await self._json_body(request), self.name, self.limits)
            answer, tag = await self._call(method, req, deadline=dl)
            return _json(answer, replica=tag)
        finally:
            self._leave(size)

    @fastapi_app.post("/v1/embeddings")
    async def embeddings(self, request: Request) -> Response:
        size = self._admit(request)
        try:
            dl = self._deadline()
            req = api.parse_embeddings(await self._json_body(request), self.name, self.limits)
            vectors, tokens, tag = await self._call("embed", req.texts, deadline=dl)
            return _json(api.embeddings_answer(vectors, tokens, req, self.name), replica=tag)
        finally:
            self._leave(size)

    @fastapi_app.post("/v1/classify")
    async def classify(self, request: Request) -> Response:
        size = self._admit(request)
        try:
            dl = self._deadline()
            ctype = _content_type(request)
            if ctype == "application/json":
                req = api.parse_classify_json(await self._json_body(request), self.name, self.limits)
            elif ctype.startswith("image/") or ctype == "application/octet-stream":
                req = api.ClassifyRequest([api.image_bytes(await self._body(request), "the request body", None)],
                                          api.parse_top_k(request.query_params, self.limits), "images")
            else:
                raise RequestError(415, f"Content-Type {ctype or '(none)'!r}: send the image's bytes (image/png, "
                                        "image/jpeg, application/octet-stream) or JSON with base64 images")
            results, tag = await self._call("classify", req, deadline=dl)
            return _json(api.classify_answer(results, self.name), replica=tag)
        finally:
            self._leave(size)

    @fastapi_app.post("/run")
    async def run(self, request: Request) -> Response:
        size = self._admit(request)
        try:
            dl = self._deadline()
            body = await self._json_body(request)
            info = await self.info(dl)
            req = api.parse_run(body, info["input_names"], info["output_names"], self.name, self.limits)
            outputs, tag = await self._call("run", req, deadline=dl)
            return _json(api.run_answer(outputs, self.name), replica=tag)
        finally:
            self._leave(size)

    @fastapi_app.post("/v1/completions")
    async def completions(self, request: Request) -> Response:
        return await self._completion(request, chat=False)

    @fastapi_app.post("/v1/chat/completions")
    async def chat_completions(self, request: Request) -> Response:
        return await self._completion(request, chat=True)

    async def _completion(self, request: Request, chat: bool) -> Response:
        """A completion or chat completion: answered whole, or streamed as
        server-sent events."""
        t0 = time.monotonic()
        size = self._admit(request)
        streaming = False
        try:
            dl = self._deadline()
            body = await self._json_body(request)
            if chat:
                req = api.parse_chat_completion(body, self.name, self.limits)
                cid, answer = api.chat_id(), api.chat_answer
            else:
                req = api.parse_completion(body, self.name, self.limits)
                cid, answer = api.completion_id(), api.completion_answer
            if not req.stream:
                t_call = time.monotonic()
                r = await self._call("complete", req, deadline=dl)
                self._observe(r, t_call - t0)
                return _json(answer(cid, r["choices"], r["usage"], self.name), replica=r["replica"])
            pieces = self._pieces(req, dl)
            try:
                # The replica's header: it has checked everything the request
                # can get wrong, so a refusal still gets its status line.
                header = await pieces.__anext__()
            except BaseException:
                await pieces.aclose()
                raise
            pieces = self.metrics.follow(pieces, t0, header.get("prompt_tokens", 0))
            streaming = True
            return StreamingResponse(self._events(cid, pieces, size, chat, req, header),
                                     media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Clformer-Replica": header["replica"]})
        finally:
            if not streaming:
                self._leave(size)

    def _observe(self, r: Mapping, waited_s: float) -> None:
        """/metrics of a whole completion: its usage and the replica's timing
        (from its call), with waited_s, the ingress's time before the call."""
        t, u = r.get("timing") or {}, r["usage"]
        first = t.get("first_token_s")
        self.metrics.observe(u["prompt_tokens"], u["completion_tokens"], None if first is None else waited_s + first,
                             t.get("decode_s"), t.get("first_choice_tokens", 0))

    # ------------------------------------------------------------ streaming

    async def _events(self, cid: str, pieces: AsyncIterator, size: int, chat: bool = False, req: Any = None,
                      header: Mapping | None = None) -> AsyncIterator[bytes]:
        """The stream's events: per choice (its index in each chunk) the
        text and logprobs of each delta, then an empty chunk with its finish
        reason; with stream_options.include_usage a last chunk with no
        choices and the usage (the prompt once, every choice's tokens)."""
        n = req.n if req is not None else 1
        usage = req is not None and req.include_usage
        offsets = [0] * n  # per choice, the token texts' characters so far: completions' text_offset
        tokens = cached = 0
        try:
            try:
                if chat:  # OpenAI's first chunk of a choice names the role
                    for i in range(n):
                        yield api.sse(api.chat_chunk(cid, {"role": "assistant", "content": ""}, None, self.name, i,
                                                     include_usage=usage))
                async for item in pieces:
                    if isinstance(item, dict):  # a choice's trailer: its last chunk, empty text and the reason
                        i = item.get("index", 0)
                        tokens += item.get("tokens", 0)
                        cached = item.get("cached", 0) if i == 0 else cached
                        for chunk in api.tool_call_chunks(cid, item, self.name, i, usage):
                            yield api.sse(chunk)
                        yield api.sse(api.stream_chunk(cid, "", item["finish_reason"], chat, self.name, i,
                                                       include_usage=usage))
                    else:
                        i, text, entries = item
                        lps = api.logprobs_of(entries, chat, offsets[i])
                        offsets[i] += sum(len(e[0]) for e in entries or ())
                        yield api.sse(api.stream_chunk(cid, text, None, chat, self.name, i, lps, usage))
                if usage:
                    yield api.sse(api.usage_chunk(cid, api.usage_of((header or {}).get("prompt_tokens", 0), tokens,
                                                                    cached), chat, self.name))
            except RequestError as e:
                # The status line has gone out: only a failure after the
                # request was accepted (the device, a replica that died and
                # could not be replaced) gets here; it travels as an event.
                yield api.sse(e.body())
            yield api.sse("[DONE]")
        finally:
            self._leave(size)
            await pieces.aclose()

    def _pieces(self, req: api.CompletionRequest | api.ChatRequest, deadline: float) -> AsyncIterator:
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
                        item = await _within(gen.__anext__(), deadline, self.limits.request_timeout_s)
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
            self.stats["resumed_streams"] += 1
            return None

        return _retried(self, attempt, deadline, lost)


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
    ingress = serve.deployment(Ingress, name="Ingress").options(
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


__all__ = ["build_app", "deploy", "start", "start_http", "local_ray", "Ingress", "ModelReplica"]
