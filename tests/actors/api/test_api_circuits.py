"""`GET /circuits`: each circuit as `recovery circuits --json` shows it, with its state
history read back from the circuit events stream (at least the last hour's), on
fakeredis[lua] with the circuit store's own write path."""

from __future__ import annotations

import asyncio
import time

import fakeredis
from fakeredis.aioredis import FakeRedis

from actors.keys import KeySpace
from actors.routes.circuit_models import CloseCircuit
from actors.store.circuit_store import CircuitStore
from tests.actors.api.api_rigs import client_of, fake_backend
from tests.actors.circuit_fixtures import RESOURCE, hard
from tests.actors.conftest import unique_keys
from tests.actors.route_builders import T0

HOUR_MS = 3600 * 1000


async def open_then_close(server: fakeredis.FakeServer, keys: KeySpace) -> None:
    """A quota failure opens the circuit at once; an operator closes it."""
    client = FakeRedis(server=server, decode_responses=True)
    async with CircuitStore(client, keys=keys, owns_client=True) as store:
        await store.record_failure(RESOURCE, hard(reset_in_s=600), "route-1", T0)
        await store.override(RESOURCE, CloseCircuit(), T0)


def test_circuits_show_their_state_and_the_changes_of_the_last_hour() -> None:
    server, keys = fakeredis.FakeServer(), unique_keys()
    raw = fakeredis.FakeRedis(server=server, decode_responses=True)
    now_ms = int(time.time() * 1000)
    over_an_hour_ago = f"{now_ms - HOUR_MS - 60_000}-0"
    raw.xadd(keys.circuit_events, {
        "event": "circuit.changed", "cause": "record_failure", "version": "0",
        "resource_id": RESOURCE.resource_id, "label": RESOURCE.label,
        "from_state": "closed", "state": "open", "open_until": "", "reason": "",
        "at": "2026-01-01T00:00:00Z",
    }, id=over_an_hour_ago)  # fmt: skip
    raw.xadd(keys.circuit_events, {"event": "not one of ours"})  # does not decode: skipped
    asyncio.run(open_then_close(server, keys))
    with client_of(fake_backend(keys, server=server)) as client:
        answer = client.get("/circuits")
    assert answer.status_code == 200, answer.text
    [circuit] = answer.json()["circuits"]
    assert circuit["resource_id"] == RESOURCE.resource_id
    assert circuit["label"] == RESOURCE.label
    assert (circuit["state"], circuit["parked"], circuit["probe_holder"]) == ("closed", 0, None)
    history = [(c["cause"], c["from_state"], c["state"]) for c in circuit["history"]]
    assert history == [
        ("record_failure", "closed", "open"),
        ("operator_close", "open", "closed"),
    ]
    assert circuit["history"][0]["open_until"] is not None
    assert circuit["history"][0]["at"] == "2026-03-01T12:00:00Z"  # the writer's clock
