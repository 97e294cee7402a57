"""`GET /circuits`: every circuit as `recovery circuits --json` shows it, with its history.

The circuits are read as the CircuitStore reads them (`all_circuits`); their history comes
from the circuit events stream (`<prefix>:circuit-events`, written by the circuit store in
the same script as each change of state: actors/store/circuit_changes.py), read back over
`HISTORY_S` at least — the stream's ids are Redis's own clock — and at most
`HISTORY_ENTRIES` entries in all, so one request's memory is bounded however busy the
circuits were.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from redis.asyncio import Redis

from actors.api.models import CircuitChange, CircuitOut
from actors.keys import KeySpace
from actors.routes.circuit_models import CircuitView
from actors.store.circuit_reads import read_circuit_changes
from actors.store.circuit_store import CircuitStore

HISTORY_S: Final = 3600.0
HISTORY_ENTRIES: Final = 10_000
PER_CIRCUIT: Final = 200


class CircuitReads:
    """The circuit reads of one app, on an asyncio client of the app's loop."""

    def __init__(self, client: Redis, keys: KeySpace, owner: Callable[[str], str | None]) -> None:
        self.client = client
        self.keys = keys
        self.store = CircuitStore(client, keys=keys)
        self.owner = owner

    async def all(self) -> list[CircuitOut]:
        views = await self.store.all_circuits()
        changes = await read_circuit_changes(
            self.client, self.keys, since_s=HISTORY_S, count=HISTORY_ENTRIES
        )
        by_resource: dict[str, list[CircuitChange]] = {}
        for change in changes:
            kept = by_resource.setdefault(change.resource_id, [])
            kept.append(CircuitChange(
                event_id=change.event_id, cause=change.cause, from_state=change.from_state,
                state=change.state, open_until=change.open_until, reason=change.reason,
                at=change.at,
            ))  # fmt: skip
        return [
            circuit_out(view, self.owner(view.resource_id),
                        by_resource.get(view.resource_id, [])[-PER_CIRCUIT:])
            for view in views
        ]  # fmt: skip

    async def aclose(self) -> None:
        await self.client.aclose()


def circuit_out(view: CircuitView, host: str | None, history: list[CircuitChange]) -> CircuitOut:
    """One circuit with the fields of `recovery circuits --json`."""
    state = view.state
    lease = state.lease
    return CircuitOut(
        resource_id=view.resource_id, label=view.resource.label,
        provider=view.resource.provider, model=view.resource.model,
        credential_fingerprint=view.resource.credential_fingerprint,
        state=state.status.value, open_until=state.open_until, reason=state.reason,
        failures=len(state.recent_failures), backoff_step=state.failed_probes,
        probe_holder=None if lease is None else lease.holder,
        lease_expires_at=None if lease is None else lease.expires_at,
        parked=view.parked, host=host, version=view.version, updated_at=view.updated_at,
        history=history,
    )  # fmt: skip
