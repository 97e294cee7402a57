"""The circuit reads and changes a dispatch job needs, synchronously (redis-py, as rq is).

The same keys, the same `lua/circuit_apply.lua` and `lua/circuit_park.lua`, and the same
pure machine as the async CircuitStore (actors/store/circuit_changes.py): read the circuit and
its version, plan with circuits.machine, compare-and-set in Lua, read again on a lost
race. Only what a dispatch job does lives here: read the circuits its re-evaluation
plans with, abandon the probe lease of an attempt the dispatcher did not send, and park
a route the re-evaluation left waiting on a circuit.

A Redis error raises CircuitStoreUnavailableError, as in the async store.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from redis import Redis
from redis.exceptions import RedisError

from actors.keys import KeySpace, valid_resource_id, valid_route_id
from actors.routes.circuit_models import CircuitView, aware, valid_resource
from actors.store.circuit_changes import text, unavailable
from actors.store.circuit_codec import apply_request, decode_resource, decode_view
from actors.store.scripts import script
from circuits import ResourceKey, machine

MAX_ATTEMPTS: Final = 8


def read_views(
    connection: Redis, keys: KeySpace, resources: Sequence[ResourceKey]
) -> list[CircuitView]:
    """The circuits of `resources` in one pipeline, in order (closed when never written)."""
    checked = [valid_resource(r) for r in resources]
    if not checked:
        return []
    try:
        pipe = connection.pipeline(transaction=False)
        for resource in checked:
            pipe.hgetall(keys.circuit(resource.resource_id))
            pipe.zcard(keys.parked(resource.resource_id))
        replies: list[Any] = pipe.execute()
    except RedisError as error:
        raise unavailable("views", error) from error
    pairs = zip(replies[0::2], replies[1::2], strict=True)
    return [
        decode_view(resource, {text(k): text(v) for k, v in raw.items()}, int(parked))
        for resource, (raw, parked) in zip(checked, pairs, strict=True)
    ]


def abandon_probe(
    connection: Redis, keys: KeySpace, resource_id: str, owner_token: str, now: datetime
) -> bool:
    """End the probe lease `owner_token` holds on circuit `resource_id` now, so the next
    caller may probe (circuits.machine.abandon_probe). False when it is not (or no longer)
    that lease: nothing is written."""
    resource_id = valid_resource_id(resource_id)
    now = aware("now", now)
    apply = connection.register_script(script("circuit_apply").source)
    circuit_keys = [keys.circuit(resource_id), keys.circuits, keys.parked(resource_id)]
    for _ in range(MAX_ATTEMPTS):
        try:
            raw = {text(k): text(v) for k, v in connection.hgetall(circuit_keys[0]).items()}
        except RedisError as error:
            raise unavailable("abandon_probe", error) from error
        if not raw:
            return False
        view = decode_view(decode_resource(resource_id, raw), raw, 0)
        after = machine.abandon_probe(view.state, owner_token, now)
        if after == view.state:
            return False
        request = apply_request(
            view.resource, view.version, after, now, guard="owner", token=owner_token
        )
        try:
            reply = apply(keys=circuit_keys, args=[request])
        except RedisError as error:
            raise unavailable("abandon_probe", error) from error
        if int(reply[0]) == 1:
            return True
        if text(reply[2]) == "not_owner":
            return False
    return False  # lost every race: the lease still expires at its TTL


def park(connection: Redis, keys: KeySpace, resource_id: str, route_id: str, now: datetime) -> bool:
    """Park `route_id` on an open or half-open circuit (as CircuitStore.park); False when
    the circuit is closed (the route may dispatch at its deadline instead)."""
    resource_id = valid_resource_id(resource_id)
    score = repr(aware("now", now).timestamp())
    park_script = connection.register_script(script("circuit_park").source)
    circuit_keys = [keys.circuit(resource_id), keys.parked(resource_id)]
    try:
        reply = park_script(keys=circuit_keys, args=[score, valid_route_id(route_id)])
    except RedisError as error:
        raise unavailable("park", error) from error
    return bool(reply[0])
