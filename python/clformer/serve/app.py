"""app.py - the HTTP application of clformer.serve, one for both of its modes:
an ingress (FastAPI, no device) that reads and checks each request (api.py),
hands it to the model through a backend, and writes the answer.

In one process (single.py, the default) the backend is LocalBackend: the
model replica (replica.py) lives in the same process, its engine on its own
threads.  On Ray Serve (ray_app.py: --replicas, --address) it is a
deployment handle to the replicas, with retries: when a replica dies or
cannot be reached (Ray restarts it), the call is retried on another one
within the request's deadline, and a stream cut by a dying replica is
resumed on another when the request decodes deterministically.  The routes,
the API key, the admission bounds, the body deadline and the answers are the
same code in both; Ray is imported by ray_app.py alone.
"""
import asyncio
import dataclasses
import hashlib
import hmac
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping

from fastapi import Depends, FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from . import _http_guard, api, metrics
from .api import RequestError
from .options import ServeOptions


class _Routes:
    """The endpoints, as a table filled by decorators on Ingress's methods
    (`@routes.post("/run")`); make_app binds them to one Ingress."""

    def __init__(self) -> None:
        self.table: list[tuple[str, str, str]] = []  # (method, path, Ingress method's name)

    def _add(self, method: str, path: str) -> Callable:
        def mark(fn: Callable) -> Callable:
            self.table.append((method, path, fn.__name__))
            return fn
        return mark

    def get(self, path: str) -> Callable:
        return self._add("GET", path)

    def post(self, path: str) -> Callable:
        return self._add("POST", path)


routes = _Routes()

# Paths that need no API key: a load balancer's liveness check.
_OPEN = ("/health",)

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


def _json(obj: Any, status: int = 200, replica: str | None = None, headers: dict | None = None) -> Response:
    headers = dict(headers or {})
    if replica:
        headers["X-Clformer-Replica"] = replica
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


async def _refused(request: Request, exc: RequestError) -> Response:
    return _error(exc)


async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    # Unknown paths and methods in the same error shape as everything else;
    # a 405 keeps its Allow header.
    what = {404: f"no such endpoint {request.url.path}", 405: f"{request.method} is not allowed on "
            f"{request.url.path}"}.get(exc.status_code, str(exc.detail))
    return _error(RequestError(exc.status_code, what), getattr(exc, "headers", None))


async def _unexpected(request: Request, exc: Exception) -> Response:
    # Whatever was missed above is still an answer in the API's error shape.
    return _error(RequestError(500, f"internal error: {type(exc).__name__}"))


async def _within(aw: Awaitable, deadline: float, timeout_s: float) -> Any:
    """`aw`'s result, or 504 when the request's deadline passes first."""
    try:
        return await asyncio.wait_for(aw, max(0.0, deadline - time.monotonic()))
    except asyncio.TimeoutError:
        raise RequestError(504, f"no answer within {timeout_s:g} s") from None


def _content_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def _need_json(request: Request) -> None:
    """JSON endpoints take application/json only: the types a browser sends
    cross-site without a preflight (text/plain, forms) are refused."""
    ctype = _content_type(request)
    if ctype != "application/json":
        raise RequestError(415, f"Content-Type {ctype or '(none)'!r}: this endpoint takes application/json")


def isolation_key(api_key: str, user: str | None) -> str:
    """The prefix-reuse isolation key of a request made with `api_key`: a
    digest of the key and the request's `user` within it, so that clients
    with different keys never share cached prefixes (nor learn, by timing,
    what another key's clients sent) and the key itself goes no further."""
    h = hashlib.sha256(b"clformer-isolation\0" + api_key.encode() + b"\0" + (user or "").encode())
    return "key:" + h.hexdigest()


class LocalBackend:
    """The model replica in this process (one-process mode): its methods
    called directly, within the request's deadline (past it the call is
    cancelled, which ends its generation after the current token)."""

    watch_disconnect = True  # nothing else cancels what a client that left asked for

    def __init__(self, replica: Any):
        self.replica = replica

    async def call(self, ing: "Ingress", method: str, *args: Any, deadline: float) -> Any:
        return await _within(getattr(self.replica, method)(*args), deadline, ing.limits.request_timeout_s)

    async def pieces(self, ing: "Ingress", req: Any, deadline: float) -> AsyncIterator:
        gen = self.replica.stream(req)
        try:
            while True:
                try:
                    yield await _within(gen.__anext__(), deadline, ing.limits.request_timeout_s)
                except StopAsyncIteration:
                    return
        finally:
            await gen.aclose()

    async def replica_info(self) -> dict:
        return await self.replica.info()

    def broken(self) -> str | None:
        return self.replica.broken


class Ingress:
    """The endpoints of one application over a backend (LocalBackend, or
    ray_app.RayBackend); make_app turns one into an ASGI application."""

    def __init__(self, backend: Any, opts: ServeOptions):
        self.backend = backend
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
        self.metrics = metrics.Metrics()  # GET /metrics (make_app puts it in the application's state)
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

    async def _call(self, method: str, *args: Any, deadline: float, request: Request | None = None) -> Any:
        """The answer of one replica method, through the backend.  With
        `request` (its body read) on a backend that asks for it, the call is
        cancelled when the client goes away, as Ray's proxy cancels what it
        called for a client that left (in one process nothing else would)."""
        call = self.backend.call(self, method, *args, deadline=deadline)
        if request is None or not self.backend.watch_disconnect:
            return await call
        task = asyncio.ensure_future(call)

        async def gone() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass
        watch = asyncio.ensure_future(gone())
        try:
            await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                task.cancel()
                raise RequestError(499, "the client went away")  # nobody reads it
            return task.result()
        finally:
            watch.cancel()
            if not task.done():
                task.cancel()

    def authorize(self, request: Request) -> None:
        """With an API key set, every endpoint but /health needs
        `Authorization: Bearer KEY`, compared in constant time; 401 otherwise."""
        key = self.opts.api_key
        if not key:
            return
        got = request.headers.get("authorization", "")
        scheme, _, token = got.partition(" ")
        if not (scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), key.encode())):
            raise RequestError(401, "missing or wrong API key: send the header 'Authorization: Bearer KEY'"
                               if got else "this server needs an API key: send the header "
                               "'Authorization: Bearer KEY'", None, "invalid_api_key")

    def _isolated(self, req: Any) -> Any:
        """The request with its `user` made the isolation key of its API key
        (unchanged without a key)."""
        if not self.opts.api_key:
            return req
        return dataclasses.replace(req, user=isolation_key(self.opts.api_key, req.user))

    async def info(self, deadline: float) -> dict:
        if self._info is None:
            self._info = await self._call("info", deadline=deadline)
        return self._info

    def _deadline(self) -> float:
        return time.monotonic() + self.limits.request_timeout_s

    # ------------------------------------------------------------ endpoints

    @routes.get("/health")
    async def health(self) -> Response:
        broken = self.backend.broken()
        if broken:  # one process: nobody replaces the replica (Ray checks its own)
            return _json({"status": "failed", "reason": broken}, 503)
        return _json({"status": "ok"})

    @routes.get("/stats")
    async def get_stats(self) -> Response:
        """Replica calls retried, streams resumed on another replica, 503s and
        429s, requests in progress; "replica": what one model replica reports
        of itself (ModelReplica.info: its device, batch bounds, generations
        cancelled because their caller went away).  The HTTP layer in front
        (_http_guard.Refusals: in this process, or Ray's proxy) adds
        "refusals", every answer of 400 or more by status and the
        connections it cut, wherever they were refused."""
        out: dict = dict(self.stats, inflight=self.inflight)
        try:
            out["replica"] = await asyncio.wait_for(self.backend.replica_info(), 10)
        except Exception as e:  # noqa: BLE001 - a statistic, not an answer
            out["replica"] = {"error": f"{type(e).__name__}"}
        return _json(out, headers={_http_guard.STATS_HEADER: "1"})

    @routes.get("/metrics")
    async def get_metrics(self) -> Response:
        """Prometheus' text format (metrics.py), the replicas' engine figures
        read now."""
        figures = await metrics.replica_figures(self.backend.replica_info, self.opts.replicas)
        return Response(self.metrics.render(figures), media_type=metrics.CONTENT_TYPE)

    def _model_card(self) -> dict:
        return {"id": self.name, "object": "model", "created": self.created, "owned_by": "clformer"}

    @routes.get("/v1/models")
    async def models(self) -> Response:
        return _json({"object": "list", "data": [self._model_card()]})

    @routes.get("/v1/models/{model_id:path}")
    async def model(self, model_id: str) -> Response:
        if model_id != self.name:
            raise RequestError(404, f"model {model_id!r} is not served here; this server serves {self.name!r}",
                               "model", "model_not_found")
        return _json(self._model_card())

    @routes.post("/tokenize")
    async def tokenize(self, request: Request) -> Response:
        return await self._tokens(request, "tokenize", api.parse_tokenize)

    @routes.post("/detokenize")
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

    @routes.post("/v1/embeddings")
    async def embeddings(self, request: Request) -> Response:
        size = self._admit(request)
        try:
            dl = self._deadline()
            req = api.parse_embeddings(await self._json_body(request), self.name, self.limits)
            vectors, tokens, tag = await self._call("embed", req.texts, deadline=dl, request=request)
            return _json(api.embeddings_answer(vectors, tokens, req, self.name), replica=tag)
        finally:
            self._leave(size)

    @routes.post("/v1/classify")
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
            results, tag = await self._call("classify", req, deadline=dl, request=request)
            return _json(api.classify_answer(results, self.name), replica=tag)
        finally:
            self._leave(size)

    @routes.post("/run")
    async def run(self, request: Request) -> Response:
        size = self._admit(request)
        try:
            dl = self._deadline()
            body = await self._json_body(request)
            info = await self.info(dl)
            req = api.parse_run(body, info["input_names"], info["output_names"], self.name, self.limits)
            outputs, tag = await self._call("run", req, deadline=dl, request=request)
            return _json(api.run_answer(outputs, self.name), replica=tag)
        finally:
            self._leave(size)

    @routes.post("/v1/completions")
    async def completions(self, request: Request) -> Response:
        return await self._completion(request, chat=False)

    @routes.post("/v1/chat/completions")
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
            req = self._isolated(req)
            if not req.stream:
                t_call = time.monotonic()
                r = await self._call("complete", req, deadline=dl, request=request)
                self._observe(r, t_call - t0)
                return _json(answer(cid, r["choices"], r["usage"], self.name), replica=r["replica"])
            pieces = self.backend.pieces(self, req, dl)
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


def make_app(ing: Ingress) -> FastAPI:
    """The ASGI application of one Ingress: its routes (every one but
    /health behind the API key when one is set) and the error answers in
    OpenAI's shape.  No redirects at all: Starlette's trailing-slash redirect
    builds its Location from the request's Host header."""
    app = FastAPI(title="clformer", docs_url=None, redoc_url=None, openapi_url=None, redirect_slashes=False)
    app.add_middleware(metrics.CountRequests)  # /metrics' requests by endpoint and status
    app.state.clformer_metrics = ing.metrics
    app.add_exception_handler(RequestError, _refused)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
    key = [Depends(ing.authorize)]
    for method, path, name in routes.table:
        app.add_api_route(path, getattr(ing, name), methods=[method], dependencies=None if path in _OPEN else key)
    return app


# Ray Serve's side (ray_app.py), here under the names it has always had.

def build_app(opts: ServeOptions) -> Any:
    from . import ray_app
    return ray_app.build_app(opts)


def start_http(*args: Any, **kwargs: Any) -> None:
    from . import ray_app
    return ray_app.start_http(*args, **kwargs)


def deploy(opts: ServeOptions, app_name: str = "clformer", route_prefix: str = "/") -> None:
    from . import ray_app
    return ray_app.deploy(opts, app_name, route_prefix)


def start(opts: ServeOptions, **kwargs: Any) -> None:
    from . import ray_app
    return ray_app.start(opts, **kwargs)


def local_ray(*args: Any, **kwargs: Any) -> None:
    from .local import local_ray as _local_ray
    return _local_ray(*args, **kwargs)


__all__ = ["Ingress", "LocalBackend", "make_app", "routes", "build_app", "deploy", "start", "start_http",
           "local_ray"]
