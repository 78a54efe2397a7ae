"""_batch.py - requests that arrive together run as one batch, on asyncio
alone: what @serve.batch did for the model replica, without Ray, so that the
replica runs the same way in one process (serve/single.py) and on Ray Serve.

    @batch(max_batch_size=512, batch_wait_timeout_s=0.005, batch_size_fn=rows)
    async def _embed_batch(self, items: list) -> list: ...

    out = await self._embed_batch(item)   # one item in, its result out

A call waits up to batch_wait_timeout_s for others (less when the batch is
full first), then the method runs once on the items' list and must return
one result per item, in order.  A batch takes items in arrival order while
batch_size_fn of them stays within max_batch_size (the first always goes,
whatever its size).  One batch runs at a time per instance.  An exception of
the method goes to every caller of that batch; a caller that went away
(cancelled) before its batch started is left out of it.
"""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable


class _Queue:
    """One instance's pending items and the task that runs their batches."""

    def __init__(self, fn: Callable[[Any, list], Awaitable[list]], owner: Any, max_size: int, wait_s: float,
                 size_fn: Callable[[list], int] | None):
        self.fn, self.owner = fn, owner
        self.max_size, self.wait_s = max_size, wait_s
        self.size_fn = size_fn or len
        self.pending: list[tuple[Any, asyncio.Future]] = []
        self.more = asyncio.Event()
        self.task: asyncio.Task | None = None

    def _full(self) -> bool:
        return self.size_fn([i for i, _ in self.pending]) >= self.max_size

    def _take(self) -> list[tuple[Any, asyncio.Future]]:
        n = 1
        while n < len(self.pending) and self.size_fn([i for i, _ in self.pending[:n + 1]]) <= self.max_size:
            n += 1
        batch, self.pending = self.pending[:n], self.pending[n:]
        return [(i, f) for i, f in batch if not f.done()]  # done: its caller was cancelled

    async def submit(self, item: Any) -> Any:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self.pending.append((item, fut))
        self.more.set()
        if self.task is None or self.task.done():
            self.task = loop.create_task(self._run())
        return await fut

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self.pending:
            until = loop.time() + self.wait_s
            while not self._full() and (left := until - loop.time()) > 0:
                self.more.clear()
                try:
                    await asyncio.wait_for(self.more.wait(), left)
                except asyncio.TimeoutError:
                    break
            batch = self._take()
            if not batch:
                continue
            try:
                out = await self.fn(self.owner, [i for i, _ in batch])
                if len(out) != len(batch):
                    raise RuntimeError(f"a batch of {len(batch)} items gave {len(out)} results")
            except BaseException as e:  # noqa: BLE001 - every caller of the batch gets it
                for _, f in batch:
                    if not f.done():
                        f.set_exception(e)
                if isinstance(e, asyncio.CancelledError):
                    for _, f in self.pending:  # the instance is going away: nobody runs the rest
                        if not f.done():
                            f.set_exception(e)
                    self.pending = []
                    raise
                continue
            for (_, f), r in zip(batch, out):
                if not f.done():
                    f.set_result(r)


class batch:
    """The decorator (see the module's text); set_max_batch_size and
    set_batch_wait_timeout_s on the bound method change one instance's bounds,
    as @serve.batch's do."""

    def __init__(self, max_batch_size: int = 10, batch_wait_timeout_s: float = 0.0,
                 batch_size_fn: Callable[[list], int] | None = None):
        if max_batch_size < 1 or batch_wait_timeout_s < 0:
            raise ValueError("max_batch_size must be >= 1 and batch_wait_timeout_s >= 0")
        self.max_size, self.wait_s, self.size_fn = max_batch_size, batch_wait_timeout_s, batch_size_fn

    def __call__(self, fn: Callable[[Any, list], Awaitable[list]]) -> "batch":
        self.fn, self.name = fn, "_clf_batch_" + fn.__name__
        return self

    def __get__(self, owner: Any, cls: type | None = None) -> Any:
        if owner is None:
            return self
        q = owner.__dict__.get(self.name)
        if q is None:
            q = owner.__dict__[self.name] = _Queue(self.fn, owner, self.max_size, self.wait_s, self.size_fn)
        return _Bound(q)


class _Bound:
    __slots__ = ("q",)

    def __init__(self, q: _Queue):
        self.q = q

    def __call__(self, item: Any) -> Awaitable[Any]:
        return self.q.submit(item)

    def set_max_batch_size(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"max_batch_size {n}: must be >= 1")
        self.q.max_size = n

    def set_batch_wait_timeout_s(self, s: float) -> None:
        if s < 0:
            raise ValueError(f"batch_wait_timeout_s {s}: must be >= 0")
        self.q.wait_s = s
