"""replica.py - the model replica: one clformer.Model on one OpenCL device,
behind Ray Serve (app.py turns the class into a deployment).

The replica claims its device slot (devices.py), loads the model (a Hugging
Face directory, a GGUF file or a directory holding one), and answers the
ingress's calls: completions and chat completions of a decoder-only model
as sequences of one clformer.Engine, opened at start, so that concurrent
requests decode together (an encoder-decoder, or a model the engine
refuses, generates one request at a time under the model's lock, as
before); embeddings and classification through _batch.batch (requests that
arrive together run as one padded batch, up to a bound that fits the
device's memory); /run as given.  A reply held to a response_format or a
forced tool call decodes under a grammar's token mask (grammar.py), and
tool calls are rendered and parsed by the template's family (tools.py).
While the engine is open the model runs
nothing else, so a decoder's forward passes (/run, embeddings) go to a
second instance of the same weights, loaded on first use.  The library's
calls block, so they run on worker threads and the replica's event loop
stays free for Serve's health checks and for streaming.  A library error
that a request caused comes back as RequestError (4xx); one that says the
device or context failed marks the replica unhealthy, so that Ray replaces
it.
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import secrets
import threading
import time
from typing import Any, AsyncIterator

import numpy as np

from . import devices, grammar, tools
from ._batch import batch
from .api import (ChatRequest, ClassifyRequest, CompletionRequest, DetokenizeRequest, RequestError, RunRequest,
                  TokenizeRequest, tokenize_answer, usage_of, with_max_tokens)
from .local import restrict_replica_grpc
from .options import ServeOptions, gguf_file

# Architectures whose logits are a language-model head (completions).
_LM_SUFFIXES = ("LMHeadModel", "ForCausalLM", "MTModel", "ForConditionalGeneration")
# The poolings that make one vector of a text (Model.pooling; a GGUF file's
# pooling_type "none" or "rank" makes none).
_POOLINGS = ("mean", "cls", "last")


def _padded_tokens(items: list) -> int:
    """A batch's size for _batch.batch: rows x the longest row, as embed() pads it."""
    return len(items) * max(n for _, n in items)


def _image_units(items: list) -> int:
    return len(items)


def _config_of(path: str) -> dict:
    """A Hugging Face directory's config.json; {} for a GGUF model, whose
    metadata the library reads (what the replica needs of it comes from the
    loaded Model)."""
    if gguf_file(path) is not None:
        return {}
    with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
        return json.load(f)


# The engine's finish reasons as OpenAI's: an end token or a stop string is
# "stop"; max_tokens or the model's positions "length".
_FINISH = {"eos": "stop", "stop_string": "stop", "length": "length", "context": "length"}


class _Outcome:
    """One item's result in a batch, or the error that item alone caused."""

    __slots__ = ("value", "error")

    def __init__(self, value: Any = None, error: BaseException | None = None):
        self.value, self.error = value, error

    def get(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


class ModelReplica:
    def __init__(self, opts: ServeOptions, in_process: bool = False):
        """On Ray Serve, a replica claims a device slot of its node; in one
        process (in_process, serve/single.py: no Ray imported) it is the only
        replica and takes the first device opts.devices allows."""
        import clformer
        self.clformer = clformer
        self.opts = opts
        if in_process:
            found = devices.node_devices(opts.devices)
            if not found:
                raise devices.NoFreeDevice("this machine has no OpenCL device")
            self.slot = devices.Slot(found[0], 0, "", -1)
        else:
            restrict_replica_grpc()
            import ray
            node = ray.get_runtime_context().get_node_id()
            self.slot = devices.claim(devices.node_devices(opts.devices), opts.replicas_per_device,
                                      devices.lock_dir(node))
        self.engine = None
        self._texts: dict = {}  # token id -> its text, for logprobs (_token_text)
        self.side = None  # the second Model of a decoder whose engine is open (_runner)
        self._side_lock = threading.Lock()
        try:
            self.model = self._load()
            self.config = _config_of(opts.model_dir)
            self._describe()
            mem = devices.global_mem_bytes(self.slot.device)
            self._open_engine(mem)
        except BaseException:
            model = getattr(self, "model", None)
            if model is not None:
                model.close()
            self.slot.release()
            raise
        self.broken: str | None = None
        # Which replica answered (the X-Clformer-Replica header): Serve's id,
        # the tail of the replica actor's name; "local" in one process.
        if in_process:
            self.tag = "local"
        else:
            from ray import serve
            self.tag = serve.get_replica_context().replica_id.unique_id
        if opts.max_batch_tokens:
            self.batch_tokens = opts.max_batch_tokens
        else:
            # This replica's share of the device, less its weights.
            free = (mem // opts.replicas_per_device if mem else 1 << 30) - self.model.weight_bytes
            self.batch_tokens = devices.batch_tokens(self.config, max(free, 0))
        self.batch_images = max(1, min(opts.max_batch_images, self.batch_tokens // max(1, self._image_tokens())))
        self._embed_batch.set_max_batch_size(self.batch_tokens)
        self._embed_batch.set_batch_wait_timeout_s(opts.batch_wait_s)
        self._classify_batch.set_max_batch_size(self.batch_images)
        self._classify_batch.set_batch_wait_timeout_s(opts.batch_wait_s)

    def _load(self):
        return self.clformer.Model(self.opts.model_dir, device=self.slot.device.selector, weights=self.opts.weights,
                                   template_budget=self.clformer.TemplateBudget(*self.opts.template_budget),
                                   chat_template=self.opts.chat_template or None)

    def _open_engine(self, mem: int) -> None:
        """The engine of a decoder-only language model (self.engine; None
        otherwise, or where the engine refuses the model: engine_refused says
        why, and completions run one at a time on the model as before).  Its
        KV pool is the library's default (a quarter of the device's memory
        left after the weights, capped at 64 sequences of the model's full
        length), but no more than a quarter of this replica's share of the
        device when replicas share it; ServeOptions.kv_bytes sets it."""
        self.engine_refused: str | None = None
        if not self.can_complete or self.model.is_encoder_decoder:
            return
        cf, opts = self.clformer, self.opts
        try:
            engine = self.model.engine(kv_bytes=opts.kv_bytes or None)
            if not opts.kv_bytes and opts.replicas_per_device > 1 and mem:
                share = (mem // opts.replicas_per_device - self.model.weight_bytes) // 4
                st = engine.stats()
                if st.block_bytes <= share < st.blocks * st.block_bytes:
                    engine.close()
                    engine = self.model.engine(kv_bytes=share)
        except (cf.UnsupportedError, cf.InvalidArgumentError, cf.OutOfMemoryError) as e:
            self.engine_refused = f"{e.status}: {e}"
            return
        self.engine = engine

    def _runner(self):
        """The Model that runs forward passes (/run, embeddings,
        classification): the replica's own, or, while its engine holds that
        one, a second instance of the same weights on the same device,
        loaded on the first such request (on a worker thread)."""
        if self.engine is None:
            return self.model
        with self._side_lock:
            if self.side is None:
                self.side = self._load()
            return self.side

    async def _run_on(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """_runner().<method>(...) on a worker thread."""
        return await self._call(lambda: getattr(self._runner(), method)(*args, **kwargs))

    # ------------------------------------------------------------ description

    def _describe(self) -> None:
        m, cfg = self.model, self.config
        try:
            m.tokenize("a")
            self.has_tokenizer = True
        except self.clformer.Error:
            self.has_tokenizer = False
        arch = (cfg.get("architectures") or [""])[0]
        self.gguf = gguf_file(self.opts.model_dir) is not None
        self.architecture = arch or (f"{m.model_type} (GGUF)" if self.gguf else "")
        # a GGUF file with logits holds a decoder-only language model (an embedding GGUF has none)
        self.can_complete = (self.has_tokenizer and "logits" in m.output_names and
                             (arch.endswith(_LM_SUFFIXES) or (self.gguf and not m.labels)))
        self.can_chat = self.can_complete and not m.is_encoder_decoder and self._has_template()
        self.can_embed = self.has_tokenizer and "last_hidden_state" in m.output_names and m.pooling in _POOLINGS
        classifier = bool(m.labels) and "logits" in m.output_names
        has_processor = os.path.isfile(os.path.join(self.opts.model_dir, "preprocessor_config.json"))
        self.can_classify = classifier and "pixel_values" in m.input_names and has_processor
        # Model.classify takes texts where the directory has no image processor
        self.can_classify_text = (classifier and self.has_tokenizer and "input_ids" in m.input_names
                                  and not has_processor and not arch.endswith(_LM_SUFFIXES))
        vocab = cfg.get("vocab_size")
        self.vocab_size = vocab if isinstance(vocab, int) and vocab > 0 else None
        # Generations cut short because their caller went away (GET /stats of a replica, tests).
        self.cancelled = 0
        limit = devices.max_positions(cfg) or m.max_positions or None
        if limit and m.model_type in ("roberta", "xlm-roberta"):
            limit -= int(cfg.get("pad_token_id") or 1) + 1  # positions count from padding_idx + 1
        self.max_input_tokens = limit
        eos = cfg.get("eos_token_id")
        gen_path = os.path.join(self.opts.model_dir, "generation_config.json")
        if os.path.isfile(gen_path):
            with open(gen_path, encoding="utf-8") as f:
                eos = json.load(f).get("eos_token_id", eos)
        self.eos_ids = set(eos if isinstance(eos, list) else [eos] if isinstance(eos, int) else [])

    def _has_template(self) -> bool:
        try:
            self.model.apply_chat_template([{"role": "user", "content": "hello"}], add_generation_prompt=True)
            return True
        except self.clformer.NotFoundError:
            return False
        except self.clformer.Error:
            return True  # a template that refuses this conversation still serves others

    def _image_tokens(self) -> int:
        size = self.config.get("image_size") or 224
        patch = self.config.get("patch_size") or 16
        return (int(size) // int(patch)) ** 2 + 1

    async def info(self) -> dict:
        m = self.model
        return {"model_type": m.model_type, "architecture": self.architecture, "gguf": self.gguf,
                "input_names": m.input_names,
                "output_names": m.output_names, "labels": len(m.labels), "is_encoder_decoder": m.is_encoder_decoder,
                "device": str(m.device), "slot": self.slot.index, "pid": os.getpid(), "replica": self.tag,
                "embeddings": self.can_embed, "completions": self.can_complete, "chat": self.can_chat, "classify": self.can_classify,
                "classify_text": self.can_classify_text, "cancelled_generations": self.cancelled,
                "max_input_tokens": self.max_input_tokens, "batch_tokens": self.batch_tokens,
                "batch_images": self.batch_images, "engine": self._engine_stats(),
                "engine_refused": self.engine_refused, "second_model": self.side is not None}

    def _engine_stats(self) -> dict | None:
        """clformer.EngineStats as a dict (None without an engine): its
        pool, the sequences running and waiting, steps and rows so far."""
        if self.engine is None:
            return None
        try:
            return dataclasses.asdict(self.engine.stats())
        except self.clformer.Error as e:
            return {"error": f"{e.status}: {e}"}

    def check_health(self) -> None:
        """Serve calls this every few seconds; raising makes Ray replace the replica."""
        if self.broken:
            raise RuntimeError(f"the replica's OpenCL context failed: {self.broken}")

    def close(self) -> None:
        for name in ("side", "model"):  # the model closes its engine (what runs ends "cancelled")
            model = getattr(self, name, None)
            if model is not None:
                model.close()
        slot = getattr(self, "slot", None)
        if slot is not None:
            slot.release()

    __del__ = close

    # ------------------------------------------------------------ errors

    def _refusal(self, e: BaseException) -> BaseException:
        """What a library error becomes for the client."""
        cf = self.clformer
        if isinstance(e, RequestError):
            return e
        if isinstance(e, cf.OutOfMemoryError):
            return RequestError(413, f"the request does not fit the device's memory: {e}")
        if isinstance(e, (cf.InvalidArgumentError, cf.ShapeError, cf.DtypeError, cf.FormatError, cf.NotFoundError,
                          cf.UnsupportedError, cf.LimitError)):  # LimitError: the chat template's budget
            return RequestError(400, f"{e} ({e.status})")
        if isinstance(e, (cf.OpenCLError, cf.BlasError, cf.NoDeviceError, cf.DeviceNotFoundError)):
            # the device or its context failed: this replica is done for
            self.broken = f"{e.status}: {e}"
            return RequestError(500, f"the model failed on the device ({e.status}: {e}); the replica is being "
                                     "replaced")
        if isinstance(e, cf.Error):
            return RequestError(500, f"the model failed ({e.status}: {e})")
        return e

    async def _call(self, fn, *args, **kwargs) -> Any:
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except Exception as e:  # noqa: BLE001 - mapped to the client's answer
            raise self._refusal(e) from None

    def _need(self, what: str, ok: bool) -> None:
        if not ok:
            raise RequestError(400, f"this model ({self.model.model_type}, {self.architecture or 'no architecture'}) "
                                    f"does not serve {what}")

    async def _tokenize(self, text: str) -> np.ndarray:
        """The tokenizer's ids, on a worker thread: the event loop stays free
        for Serve's health checks and other requests (the text's length was
        bounded by the ingress, Limits.max_input_chars)."""
        try:
            return await asyncio.to_thread(self.model.tokenize, text)
        except Exception as e:  # noqa: BLE001
            raise self._refusal(e) from None

    async def _count(self, text: str, what: str) -> int:
        n = len(await self._tokenize(text))
        if self.max_input_tokens and n > self.max_input_tokens:
            raise RequestError(400, f"{what} is {n} tokens long; this model takes at most {self.max_input_tokens}")
        return n

    # ------------------------------------------------------------ embeddings

    async def embed(self, texts: list[str]) -> tuple[np.ndarray, int, str]:
        """Pooled, normalised embeddings (Model.embed: mean, or the pooling a
        GGUF file states), batched with whatever else arrives within
        batch_wait_s; the token count; the tag."""
        if self.model.pooling not in _POOLINGS:
            raise RequestError(400, f"this model states pooling {self.model.pooling!r} (a GGUF file's pooling_type): "
                                    "it makes no one vector of a text, so it serves no embeddings")
        self._need("embeddings", self.can_embed)
        counts = [await self._count(t, f"input[{i}]") for i, t in enumerate(texts)]
        rows = await asyncio.gather(*[self._embed_batch((t, n)) for t, n in zip(texts, counts)])
        return np.stack([r.get() for r in rows]), sum(counts), self.tag

    @batch(max_batch_size=512, batch_wait_timeout_s=0.005, batch_size_fn=_padded_tokens)
    async def _embed_batch(self, items: list) -> list:
        texts = [t for t, _ in items]
        try:
            out = await self._run_on("embed", texts)
            return [_Outcome(row) for row in out]
        except RequestError as e:
            if len(texts) == 1 or e.status >= 500:
                raise
        # One item spoiled the batch: each alone, so that only it fails.
        outs = []
        for t in texts:
            try:
                outs.append(_Outcome((await self._run_on("embed", [t]))[0]))
            except RequestError as e:
                outs.append(_Outcome(error=e))
        return outs

    # ------------------------------------------------------------ classify

    async def classify(self, req: ClassifyRequest) -> tuple[list, str]:
        if req.kind == "texts":
            self._need("text classification (it classifies images: send images)" if self.can_classify
                       else "text classification", self.can_classify_text)
            for i, t in enumerate(req.items):
                await self._count(t, f"input[{i}]")
            return await self._run_on("classify", list(req.items), top_k=req.top_k), self.tag
        self._need("image classification", self.can_classify)
        if not all(isinstance(im, bytes) for im in req.items):  # never a path
            raise RequestError(400, "images are the bytes of PNG or JPEG files")
        rows = await asyncio.gather(*[self._classify_batch((im, req.top_k)) for im in req.items])
        return [r.get() for r in rows], self.tag

    @batch(max_batch_size=8, batch_wait_timeout_s=0.005, batch_size_fn=_image_units)
    async def _classify_batch(self, items: list) -> list:
        k = max(k for _, k in items)
        try:
            out = await self._run_on("classify", [im for im, _ in items], top_k=k)
            return [_Outcome(r[:kk]) for r, (_, kk) in zip(out, items)]
        except RequestError as e:
            if len(items) == 1 or e.status >= 500:
                raise
        outs = []
        for i, (im, kk) in enumerate(items):
            try:
                outs.append(_Outcome((await self._run_on("classify", [im], top_k=kk))[0]))
            except RequestError as e:
                outs.append(_Outcome(error=e))
        return outs

    # ------------------------------------------------------------ tokenize

    async def tokenize(self, req: TokenizeRequest) -> tuple[dict, str]:
        """/tokenize: a prompt's ids (add_special_tokens as asked), or a
        conversation's as chat completions feed it (rendered with the chat
        template, add_generation_prompt as asked)."""
        self._need("tokenization (it has no tokenizer)", self.has_tokenizer)
        if req.messages is not None:
            self._need("chat templates", self.can_chat)

        def ids() -> np.ndarray:
            text = req.prompt
            if req.messages is not None:
                text = self.model.apply_chat_template(list(req.messages),
                                                      add_generation_prompt=req.add_generation_prompt)
            return self.model.tokenize(text, add_special_tokens=req.add_special_tokens)

        out = [int(i) for i in await self._call(ids)]
        strs = await self._call(lambda: [self.model.token(i) for i in out]) if req.return_token_strs else None
        return tokenize_answer(out, self.max_input_tokens, strs), self.tag

    async def detokenize(self, req: DetokenizeRequest) -> tuple[dict, str]:
        """/detokenize: the ids' text, special tokens kept (vLLM's); an id
        the vocabulary does not have is refused naming it (decoding would
        drop it silently)."""
        self._need("detokenization (it has no tokenizer)", self.has_tokenizer)

        def text() -> str:
            for i, t in enumerate(req.tokens):
                try:
                    self.model.token(t)
                except self.clformer.NotFoundError:
                    raise RequestError(400, f"tokens[{i}] is {t}: this model's vocabulary has no such id", "tokens",
                                       "invalid_value") from None
            return self.model.decode(list(req.tokens), skip_special_tokens=False)

        return {"prompt": await self._call(text)}, self.tag

    # ------------------------------------------------------------ /run

    async def run(self, req: RunRequest) -> tuple[dict, str]:
        return await self._run_on("run", req.inputs, req.outputs), self.tag

    # ------------------------------------------------------------ completions

    async def _chat_ids(self, req: ChatRequest) -> np.ndarray:
        """The conversation's ids as Model.chat will feed them: rendered with
        the chat template (whose refusals, raise_exception's among them, are
        the client's 400) and tokenized without special tokens."""
        self._need("chat completions (the model has no chat template)" if self.can_complete
                   else "chat completions", self.can_chat)

        def ids() -> np.ndarray:
            extra: dict = {}
            messages = list(req.messages)
            if req.tools or any("tool_calls" in m or m["role"] == "tool" for m in messages):
                family = self._tool_family()
                if family is None:
                    raise RequestError(400, "this model's chat template defines no tool-call format (tools need "
                                            "a Hermes/Qwen, Llama 3.x or Mistral template)",
                                       "tools" if req.tools else "messages")
                messages = tools.template_messages(messages, family)
                if req.tools:
                    extra["tools"] = [t.spec() for t in req.tools]
            text = self.model.apply_chat_template(messages, add_generation_prompt=True, **extra)
            return self.model.tokenize(text, add_special_tokens=False)
        return await self._call(ids)

    def _tool_family(self) -> str | None:
        """The family of the chat template's tool calls (tools.family_of), found once."""
        if not hasattr(self, "_family"):
            self._family = tools.family_of(self.model)
        return self._family

    def _vocabulary(self) -> grammar.Vocabulary:
        """The vocabulary for constrained decoding, built on first use (a
        worker thread): the tokenizer's ids as bytes, and the ids that end
        a reply (the checkpoint's end tokens and the template's turn end)."""
        eos = set(self.eos_ids) | set(tools.end_of_turn(self.model) if self.can_chat else [])
        return grammar.vocabulary_of(self, self.model, self.vocab_size or 0, sorted(e for e in eos if e is not None))

    def _grammar_of(self, req: CompletionRequest | ChatRequest) -> str | None:
        """The grammar a request's reply is held to: its response_format's,
        or with tool_choice "required" or a named tool, the family's call
        format; None when it is free."""
        if req.response_format is not None:
            return req.response_format.grammar
        if isinstance(req, ChatRequest) and req.tools and req.tool_choice not in ("none", "auto"):
            try:
                return tools.call_grammar(self._tool_family(), req.tools, req.tool_choice, self._vocabulary())
            except grammar.GrammarError as e:
                raise RequestError(400, f"the tools cannot be used for constrained decoding: {e}", "tools") \
                    from None
        return None

    async def _matchers(self, req: CompletionRequest | ChatRequest) -> list | None:
        """One grammar Matcher per choice (None when the reply is free), made
        on a worker thread (the vocabulary is built on the first)."""
        if self.engine is None and (req.response_format is not None or (isinstance(req, ChatRequest) and req.tools)):
            raise RequestError(400, "response_format and tools need the library's engine, which this model is not "
                                    "served on", "response_format" if req.response_format is not None else "tools")

        def make() -> list | None:
            g = self._grammar_of(req)
            if g is None:
                return None
            v = self._vocabulary()
            try:
                return [grammar.Matcher(v, g) for _ in range(req.n)]
            except grammar.GrammarError as e:
                raise RequestError(400, f"the grammar cannot be used with this model's vocabulary: {e}",
                                   "response_format") from None
        return await self._call(make)

    async def _prompt(self, req: CompletionRequest | ChatRequest) -> tuple:
        """The prompt's ids, checked for everything the request can get wrong
        before any token is generated or any byte of a stream is sent, and
        the request with its max_tokens settled against the context
        (api.with_max_tokens: absent, what the context leaves)."""
        if isinstance(req, ChatRequest):
            ids = await self._chat_ids(req)
        else:
            self._need("completions", self.can_complete)
            ids = await self._tokenize(req.prompt)
        if ids.size and self.vocab_size and int(ids.max()) >= self.vocab_size:
            raise RequestError(400, f"the prompt's token id {int(ids.max())} is past this model's vocabulary of "
                                    f"{self.vocab_size} (its tokenizer does not fit its weights)", "prompt")
        ctx, cap = self.max_input_tokens, self.opts.limits.max_new_tokens
        if self.model.is_encoder_decoder:
            # the context bounds the encoder's input; the decoder's positions, the reply
            if ctx and len(ids) > ctx:
                raise RequestError(400, f"the prompt is {len(ids)} tokens long; this model takes at most {ctx}",
                                   "prompt", "context_length_exceeded")
            return ids, with_max_tokens(req, 0, ctx, cap)
        return ids, with_max_tokens(req, len(ids), ctx, cap)

    def _pieces_of(self, req: CompletionRequest | ChatRequest):
        """Without an engine: the text stream of a request (Model.stream or
        Model.chat_stream) and, once it has ended, its trailer."""
        if isinstance(req, ChatRequest):
            it = self.model.chat_stream(list(req.messages), stop=list(req.stop), **req.settings)

            def trailer() -> dict:
                r = it.reply
                return {"index": 0, "finish_reason": r.finish_reason, "tokens": r.completion_tokens,
                        "cached": r.cached_tokens}
            return it, trailer
        it = self.model.stream(req.prompt, stop=list(req.stop), **req.settings)

        def ended() -> dict:
            tokens = it.tokens
            done = it.stopped_by_string or bool(tokens and tokens[-1] in self.eos_ids)
            return {"index": 0, "finish_reason": "stop" if done else "length", "tokens": len(tokens), "cached": 0}
        return it, ended

    def _submit(self, req: CompletionRequest | ChatRequest, ids: np.ndarray,
                matchers: list | None = None) -> list | None:
        """With an engine, the request as its n sequences (None without one,
        where n > 1 and logprobs are refused): its prompt's ids (as _prompt
        made them), stop strings, settings and logprobs, and `matchers`
        (_matchers: one grammar per choice, or None) as the engine's token
        mask; the engine's refusals (a prompt and max_tokens past its whole pool) are the
        client's, before a stream starts.  Prefix reuse is isolated by
        client: the request's `user` when it names one, else a key of its
        own, so that by default no request reuses (and so learns by timing)
        another's prompt."""
        if self.engine is None:
            if req.n > 1 or req.logprobs is not None:
                what = "n > 1" if req.n > 1 else "logprobs"
                why = (f"the engine refused it: {self.engine_refused}" if self.engine_refused
                       else "an encoder-decoder model generates one request at a time, outside the engine")
                raise RequestError(400, f"{what} needs the library's engine, which this model is not served on "
                                        f"({why})", "n" if req.n > 1 else "logprobs")
            return None
        key = req.user if req.user else secrets.token_bytes(16)
        try:
            allowed = None if matchers is None else matchers[0] if req.n == 1 else matchers
            seqs = self.engine.submit(ids, stop=list(req.stop), isolation=key, n=req.n,
                                      logprobs=req.logprobs is not None, top_logprobs=req.logprobs or 0,
                                      allowed=allowed, **req.settings)
            return seqs
        except Exception as e:  # noqa: BLE001 - mapped to the client's answer
            raise self._refusal(e) from None

    def _token_text(self, token: int) -> str:
        """A token's text for logprobs: the tokenizer's decoding of it alone,
        special tokens kept (vLLM's; api.logprobs_of).  Cached: a vocabulary
        is at most a few hundred thousand short strings."""
        t = self._texts.get(token)
        if t is None:
            t = self._texts[token] = self.model.decode([token], skip_special_tokens=False)
        return t

    def _entries(self, lps: list) -> list:
        """Engine TokenLogprobs as api.logprobs_of's entries."""
        tt = self._token_text
        return [(tt(lp.token), lp.logprob, [(tt(t), v) for t, v in lp.top]) for lp in lps]

    async def _generation(self, req: CompletionRequest | ChatRequest, seqs: list | None) -> AsyncIterator:
        """The request's choices as they come: (index, text, logprob entries
        or None) deltas, and a trailer {"index", "finish_reason", "tokens",
        "cached"} as each choice ends; of `seqs`, its sequences on the engine
        (a worker thread follows each), or without one (_pieces_of) of a
        generation on the model (one choice).  The threads hand the items to
        the event loop.  Leaving early (the caller went away, or its deadline
        passed: Serve cancels this coroutine) ends the sequences or the
        generation after the current token instead of letting them run to
        max_tokens."""
        loop = asyncio.get_running_loop()
        q: asyncio.Queue = asyncio.Queue()
        done = object()
        holder: list = []  # what cancel() ends
        cancel = threading.Event()

        def put(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(q.put_nowait, item)
            except RuntimeError:  # the loop is gone (the replica is shutting down): nobody is reading
                pass

        if seqs is not None:
            holder.extend(seqs)

            # With tools the reply is held until it ends: it may be a call
            # (parsed then), or text, sent whole.
            tooling = isinstance(req, ChatRequest) and bool(req.tools) and req.tool_choice != "none"

            def follow(i: int, seq: Any) -> None:
                try:
                    for d in seq.deltas():  # a token at a time: a chunk each, as Model.stream's pieces
                        if d.logprobs is not None:
                            put((i, "" if tooling else d.text, self._entries(d.logprobs)))
                        elif d.text and not tooling:
                            put((i, d.text, None))
                    r = seq.result()
                    if r.finish_reason not in _FINISH:  # "cancelled" by nobody here: the engine was closed
                        raise RequestError(503, "the model replica is shutting down; retry")
                    end = {"index": i, "finish_reason": _FINISH[r.finish_reason], "tokens": len(r.tokens),
                           "cached": r.cached_tokens}
                    if tooling:
                        raw = self.model.decode(r.tokens, skip_special_tokens=False)
                        content, calls = tools.parse_calls(self._tool_family(), raw, req.tools)
                        if calls:
                            end.update(finish_reason="tool_calls", tool_calls=calls, content=content)
                        elif r.text:
                            put((i, r.text, None))
                    put(end)
                    put(done)
                except BaseException as e:  # noqa: BLE001 - handed to the event loop
                    put(e)
            works = [lambda i=i, seq=seq: follow(i, seq) for i, seq in enumerate(seqs)]
        else:
            def work() -> None:
                it = None
                try:
                    it, trailer = self._pieces_of(req)
                    holder.append(it)
                    if cancel.is_set():
                        it.cancel()
                    for piece in it:
                        put((0, piece, None))
                    put(trailer())
                    put(done)
                except BaseException as e:  # noqa: BLE001 - handed to the event loop
                    put(e)
                finally:
                    if it is not None:
                        it.close()
            works = [work]

        for w in works:
            threading.Thread(target=w, name="clformer-serve-generate", daemon=True).start()
        finished = False
        running = len(works)
        try:
            while True:
                item = await q.get()
                if item is done:
                    running -= 1
                    if running == 0:
                        finished = True
                        return
                    continue
                if isinstance(item, BaseException):
                    finished = True
                    raise self._refusal(item)
                yield item
        finally:
            if not finished:
                self.cancelled += 1
            if running:  # left early, or one choice failed: the others end too
                cancel.set()
                for h in holder:
                    h.cancel()  # thread-safe: it ends after the current token

    async def complete(self, req: CompletionRequest | ChatRequest) -> dict:
        """A whole completion: each choice's new tokens up to the end token
        decoded, cut before the first stop string (generation ends there
        too), with its logprob entries when asked for; "timing": seconds
        from this call to the first generated token and from there to the
        first choice's end, and that choice's tokens (the ingress's
        /metrics)."""
        t0 = time.monotonic()
        first = end = None
        first_tokens = 0
        ids, req = await self._prompt(req)
        choices = [{"text": req.prompt if isinstance(req, CompletionRequest) and req.echo else "",
                    "finish_reason": "length", "logprobs": None if req.logprobs is None else []}
                   for _ in range(req.n)]
        tokens = cached = 0
        gen = self._generation(req, self._submit(req, ids, await self._matchers(req)))
        try:
            async for item in gen:
                if isinstance(item, dict):
                    c = choices[item["index"]]
                    c["finish_reason"] = item["finish_reason"]
                    if item.get("tool_calls"):
                        c["tool_calls"], c["text"] = item["tool_calls"], item.get("content")
                    tokens += item["tokens"]
                    if item["index"] == 0:
                        cached = item["cached"]  # the prompt's, shared by the copies
                        end, first_tokens = time.monotonic(), item["tokens"]
                else:
                    first = first or time.monotonic()
                    i, text, entries = item
                    choices[i]["text"] += text
                    if entries:
                        choices[i]["logprobs"].extend(entries)
        finally:
            await gen.aclose()
        timing = {"first_token_s": None if first is None else first - t0,
                  "decode_s": None if first is None or end is None else end - first,
                  "first_choice_tokens": first_tokens}
        return {"choices": choices, "replica": self.tag, "usage": usage_of(len(ids), tokens, cached),
                "timing": timing}

    async def stream(self, req: CompletionRequest | ChatRequest) -> AsyncIterator:
        """The request's deltas as they come (_generation's items).  The
        first item is a header (a dict: prompt_tokens, replica) sent once the
        request is accepted, so that the ingress can still answer a refusal
        with its status; the deltas (index, text, logprob entries) follow,
        and a trailer (a dict: index, finish_reason, tokens, cached) ends
        each choice that ran to its end: "stop" for an end token or a stop
        string, as complete()."""
        ids, req = await self._prompt(req)
        seqs = self._submit(req, ids, await self._matchers(req))
        gen = self._generation(req, seqs)
        try:
            yield {"prompt_tokens": len(ids), "replica": self.tag}
            if isinstance(req, CompletionRequest) and req.echo:
                for i in range(req.n):
                    yield (i, req.prompt, None)
            async for item in gen:
                yield item
        finally:
            await gen.aclose()
            for seq in seqs or ():
                seq.cancel()  # left before its generation started; nothing once it has ended

