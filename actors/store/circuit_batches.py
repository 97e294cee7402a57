"""A route round's circuit changes, several circuits at once (CircuitStore's
`record_failures_many`): the base's compare-and-set loop with every attempt's reads in
one pipeline and its writes in another (actors/store/circuit_changes.py has the loop
for one circuit)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from redis.exceptions import RedisError

from actors.errors import CircuitConflictError, CorruptCircuitError, RecoveryError
from actors.routes.circuit_models import CircuitView
from actors.store.circuit_changes import (
    Change,
    CircuitChanges,
    Written,
    unavailable,
    written_view,
)
from actors.store.circuit_codec import decode_view
from actors.store.scripts import run_scripts
from circuits import CircuitState, ResourceKey


class CircuitBatches(CircuitChanges):
    """Changes of several circuits in two round trips an attempt."""

    async def _views_apart(
        self, resources: Sequence[ResourceKey]
    ) -> list[CircuitView | RecoveryError]:
        """`views`, with a circuit whose keys cannot be read (a wrong type) or decoded in
        its place as its error: one bad circuit never fails the others. A failure of
        Redis itself raises."""
        reads = await self._read_apart([r.resource_id for r in resources], "views")
        found: list[CircuitView | RecoveryError] = []
        for resource, read in zip(resources, reads, strict=True):
            if isinstance(read, RecoveryError):
                found.append(read)
                continue
            try:
                found.append(decode_view(resource, *read))
            except CorruptCircuitError as error:
                found.append(error)
        return found

    async def _change_many(
        self, changes: Sequence[Change], now: datetime
    ) -> list[tuple[Written | None, CircuitView] | RecoveryError]:
        """`_change` for several circuits at once (no guard, no parked set): each is
        planned from its own read and fenced on its own version, but every attempt reads
        them all in one pipeline and writes the changed ones in another, so a round that
        touches N circuits costs two round trips, not 2N. Per change: (what was written or
        None, the view it was planned from), its CircuitConflictError after
        `max_attempts` lost compare-and-sets, or the CircuitStoreUnavailableError of its
        own script's error (a key of the wrong type). A failure of Redis itself raises for
        all of them (those already written stay written: planned again, a change that
        counted its failures counts them once)."""
        done: dict[int, tuple[Written | None, CircuitView] | RecoveryError] = {}
        pending = list(range(len(changes)))
        for _ in range(self.max_attempts):
            befores = await self._views_apart([changes[i].resource for i in pending])
            writing: list[tuple[int, CircuitView, CircuitState, str]] = []
            for index, before in zip(pending, befores, strict=True):
                if isinstance(before, RecoveryError):
                    done[index] = before  # its own hash unreadable; the others go on
                    continue
                after = changes[index].plan(before.state)
                if after == before.state:
                    done[index] = (None, before)
                else:
                    change = changes[index]
                    request = self._request(change.resource, change.operation, before, after, now)
                    writing.append((index, before, after, request))
            replies = await self._apply_all([(b, request) for _, b, _, request in writing])
            pending = []
            for (index, before, after, _), reply in zip(writing, replies, strict=True):
                if isinstance(reply, Exception):
                    done[index] = unavailable(changes[index].operation, reply)
                elif int(reply[0]) == 1:
                    done[index] = (
                        written_view(before, after, reply, now, with_parked=False),
                        before,
                    )
                else:
                    pending.append(index)  # stale version: read and plan again
            if not pending:
                break
        return [
            done[index] if index in done else CircuitConflictError(
                change.resource.resource_id, change.operation, self.max_attempts
            )
            for index, change in enumerate(changes)
        ]  # fmt: skip

    async def _apply_all(self, requests: Sequence[tuple[CircuitView, str]]) -> list[Any]:
        """`circuit_apply.lua` for each (view read, request) in one pipeline; the replies in
        order, a call's own error as its reply."""
        if not requests:
            return []
        calls = [(self._apply_keys(before.resource_id), [request]) for before, request in requests]
        try:
            return await run_scripts(self.client, self.apply_script, calls)
        except RedisError as error:
            raise unavailable("apply", error) from error
