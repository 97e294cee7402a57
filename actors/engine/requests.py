"""Request ids in a batch round: the record each planned transition carries, the first
outcome a refused replay answers, and the record of a request that changed nothing
(docs/CONTRACTS.md, Routes: a request is applied once; a replay answers its first outcome)."""

from __future__ import annotations

from collections.abc import Sequence

from actors.errors import StoreUnavailableError, TransitionRejectedError
from actors.routes.commands import RouteCommand, request_id_of
from actors.routes.models import RouteSnapshot
from actors.store.route_codec import RequestRecord
from actors.store.route_store import RouteStore

Outcome = RouteSnapshot | Exception
"""One item of a batch: the route's snapshot once the command took effect, or its error."""


def request_record(items: Sequence[tuple[str, RouteCommand]], index: int) -> RequestRecord | None:
    if index >= len(items):
        return None
    request_id = request_id_of(items[index][1])
    return None if request_id is None else RequestRecord(request_id)


async def answer_replays(
    store: RouteStore, items: Sequence[tuple[str, RouteCommand]], outcomes: list[Outcome]
) -> None:
    """A refused command whose request the route applied before is a replay (its
    first outcome moved the route on): it answers that first outcome's snapshot."""
    for index, ((route_id, command), outcome) in enumerate(zip(items, outcomes, strict=True)):
        request_id = request_id_of(command)
        if request_id is None or not isinstance(outcome, TransitionRejectedError):
            continue
        try:
            first = await store.first_outcome(route_id, request_id)
        except StoreUnavailableError:
            continue  # the rejection stands: nothing was written
        if first is not None:
            outcomes[index] = first


async def record_unchanged(
    store: RouteStore,
    items: Sequence[tuple[str, RouteCommand]],
    snapshots: Sequence[RouteSnapshot],
    outcomes: list[Outcome],
) -> None:
    """A request that had nothing to do is recorded too, with the route as it found
    it: sent again later, when it might have something to do, it answers that."""
    unchanged = [
        (index, RequestRecord(request_id))
        for index, ((_, command), outcome) in enumerate(zip(items, outcomes, strict=True))
        if outcome is snapshots[index] and (request_id := request_id_of(command)) is not None
    ]
    if not unchanged:
        return
    try:
        first = await store.record_unchanged(
            [(request, snapshots[index]) for index, request in unchanged]
        )
    except StoreUnavailableError as error:
        for index, _ in unchanged:
            outcomes[index] = error  # nothing changed, but its answer is not durable
        return
    for (index, _), answer in zip(unchanged, first, strict=True):
        outcomes[index] = answer
