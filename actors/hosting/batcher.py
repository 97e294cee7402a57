"""Coalescing route calls into one Ray call per host.

A Ray call costs ~1 ms and ~1.2 ms of CPU across caller and host (docs/DESIGN.md §5a), so one
call per report tops out near 1.4k reports/s whatever Redis does. A `HostBatcher` sits in
the calling process, one per host and event loop: a call is queued, and a sender takes
everything queued when it runs (at most `max_batch` items) as ONE `run_batch` call. With
nothing in flight the first call goes out at once (a lone report pays no wait); while
`max_in_flight` batches are in flight, new calls gather for the next one. On the host
the batch becomes one pipelined read and one pipelined write (actors/engine/batch.py).

Items are route requests as values: a RouteCommand, or a read (ReadSnapshot,
ReadHistory). Answers are per item: a host returns each item's exception as a value, and
the batcher raises it to that item's caller only. A RouteHost answers through
`run_compact` (each distinct document once per batch: actors/hosting/wire.py), which
keeps a batch of 256 snapshots under Ray's 100 KB limit for inline replies; a host
without it through `run_batch`. A failure of the Ray call itself (the
host cannot be reached, or a task error) is raised to every caller of that batch; a
RecoveryError inside a RayTaskError is raised as itself.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import ray

from actors.errors import RecoveryError
from actors.hosting.wire import unpack
from actors.routes.commands import RouteCommand

DEFAULT_MAX_BATCH: Final = 1024
DEFAULT_MAX_IN_FLIGHT: Final = 2


@dataclass(frozen=True, slots=True)
class ReadSnapshot:
    """Read the route's snapshot."""


@dataclass(frozen=True, slots=True)
class ReadHistory:
    """Read the route's attempt history."""


HostRequest = RouteCommand | ReadSnapshot | ReadHistory
BatchItem = tuple[str, HostRequest]


def unwrap(error: BaseException) -> BaseException:
    """A RecoveryError raised on the host, as itself; anything else unchanged."""
    if isinstance(error, ray.exceptions.RayTaskError) and isinstance(error.cause, RecoveryError):
        return error.cause
    return error


@dataclass
class HostBatcher:
    """Queues route requests for one host and sends them as batches (see the module)."""

    host: Any  # a Ray actor handle with `run_batch`
    max_batch: int = DEFAULT_MAX_BATCH
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    batches_sent: int = 0
    # batch size -> batches sent (a pool's batchers share their pool's tally)
    sizes: Counter[int] = field(default_factory=Counter)
    _queue: deque[tuple[BatchItem, asyncio.Future[Any]]] = field(default_factory=deque)
    _in_flight: int = 0
    _compact: bool | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {self.max_batch}")
        if self.max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {self.max_in_flight}")

    async def call(self, route_id: str, request: HostRequest) -> Any:
        """The host's answer to one request; its error raised here."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append(((route_id, request), future))
        self._start_sender()
        return await future

    def _start_sender(self) -> None:
        if self._in_flight >= self.max_in_flight or not self._queue:
            return
        self._in_flight += 1
        task = asyncio.get_running_loop().create_task(self._send())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self) -> None:
        # Taken when the sender runs, not when it was started: calls made in the same
        # loop iteration as the first one ride along.
        batch = [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]
        try:
            if batch:
                await self._deliver(batch)
        finally:
            self._in_flight -= 1
            self._start_sender()

    async def _deliver(self, batch: Sequence[tuple[BatchItem, asyncio.Future[Any]]]) -> None:
        self.batches_sent += 1
        self.sizes[len(batch)] += 1
        items = [item for item, _ in batch]
        try:
            if self._compact is None:  # a host that answers compact replies, or a plain one
                self._compact = hasattr(self.host, "run_compact")
            if self._compact:
                answers = unpack(await self.host.run_compact.remote(items))
            else:
                answers = await self.host.run_batch.remote(items)
        except Exception as error:  # the call itself failed: every caller learns it
            failure = unwrap(error)
            for _, future in batch:
                if not future.done():
                    future.set_exception(failure)
            return
        for (_, future), answer in zip(batch, answers, strict=True):
            if future.done():  # its caller was cancelled
                continue
            if isinstance(answer, Exception):
                future.set_exception(answer)
            else:
                future.set_result(answer)


class BatcherPool:
    """One HostBatcher per host and event loop (a batcher's futures belong to a loop)."""

    def __init__(self, *, max_batch: int = DEFAULT_MAX_BATCH, max_in_flight: int = 2) -> None:
        self.max_batch = max_batch
        self.max_in_flight = max_in_flight
        self._sizes: Counter[int] = Counter()
        self._by_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[int, HostBatcher]
        ] = weakref.WeakKeyDictionary()

    def for_host(self, host: Any) -> HostBatcher:
        batchers = self._by_loop.setdefault(asyncio.get_running_loop(), {})
        batcher = batchers.get(id(host))
        if batcher is None or batcher.host is not host:
            batcher = HostBatcher(host, self.max_batch, self.max_in_flight, sizes=self._sizes)
            batchers[id(host)] = batcher
        return batcher

    def batch_sizes(self) -> Counter[int]:
        """How many batches of each size this pool's batchers sent, in every loop."""
        return Counter(self._sizes)

    def clear(self) -> None:
        self._by_loop = weakref.WeakKeyDictionary()
