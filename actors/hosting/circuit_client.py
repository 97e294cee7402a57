"""A route host's way to its circuits' owners: the circuit hosts (Ray actors).

`ActorCircuits` is the CircuitPort (actors/engine/circuit_round.py) of a route host: a
round's CircuitRound is cut by owner (the circuit ring over resource ids,
actors/hosting/names.py) and each part goes to its circuit host as ONE Ray call, the
parts in parallel. A part the call could not deliver (the host unreachable, or its Redis
away) comes back as the undelivered rest, which the route host sends again
(actors/engine/redelivery.py). A probe lease the owner cannot be asked for is denied for
a second (the route waits on the circuit a little longer rather than probe unfenced).

Circuit hosts run with `max_restarts=-1, max_task_retries=-1`: a call in flight when its
host dies is sent again to the restarted host, which is safe since a round is idempotent.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Final

import ray

from actors.engine.circuit_round import Applied, CircuitRound
from actors.hosting.names import NAMESPACE, Owners, circuit_host_name
from circuits import DenialReason, ProbeDenied, ProbeGrant, ResourceKey

UNREACHABLE_RETRY_S: Final = 1.0

log = logging.getLogger(__name__)


def joined(parts: list[CircuitRound], now: datetime) -> CircuitRound | None:
    """Parts of one round (one `now`) as one round; None when there are none."""
    whole = CircuitRound(now)
    for part in parts:
        whole = replace(
            whole, verdicts=whole.verdicts + part.verdicts, failures=whole.failures + part.failures,
            parks=whole.parks + part.parks, unparks=whole.unparks + part.unparks,
        )  # fmt: skip
    return whole if whole else None


class ActorCircuits:
    """The circuit hosts of the installation under `prefix`, found by name."""

    remote = True  # a circuit host releases what its rounds close

    def __init__(self, prefix: str, count: int) -> None:
        self.prefix = prefix
        self.owners = Owners(count, kind="circuit")
        self._hosts: dict[int, Any] = {}

    def owner_of(self, resource: ResourceKey) -> int:
        return self.owners.index_of(resource.resource_id)

    async def acquire_probe(
        self, resource: ResourceKey, holder: str, now: datetime, ttl_s: float
    ) -> ProbeGrant | ProbeDenied:
        index = self.owner_of(resource)
        try:
            found: ProbeGrant | ProbeDenied = await self._host(index).acquire_probe.remote(
                resource, holder, now, ttl_s
            )
        except Exception as error:  # Ray's or the host's: nobody granted a lease
            self._forget(index, error)
            retry_at = now + timedelta(seconds=UNREACHABLE_RETRY_S)
            return ProbeDenied(reason=DenialReason.COOLING_DOWN, retry_at=retry_at)
        return found

    async def apply_round(self, round_: CircuitRound) -> Applied:
        parts = round_.split(self.owners.index_of)
        rests = await asyncio.gather(*(self._apply(i, part) for i, part in parts.items()))
        return Applied(undelivered=joined([r for r in rests if r is not None], round_.now))

    async def _apply(self, index: int, part: CircuitRound) -> CircuitRound | None:
        try:
            rest: CircuitRound | None = await self._host(index).apply_round.remote(part)
        except Exception as error:  # undelivered: the route host sends it again
            self._forget(index, error)
            return part
        return rest

    def _host(self, index: int) -> Any:
        host = self._hosts.get(index)
        if host is None:
            name = circuit_host_name(self.prefix, index)
            host = self._hosts[index] = ray.get_actor(name, namespace=NAMESPACE)
        return host

    def _forget(self, index: int, error: BaseException) -> None:
        """Look the host up again next time (the keeper may have recreated it)."""
        log.warning(
            "circuit host %s not reached: %s: %s", index, type(error).__name__, str(error)[:200]
        )
        self._hosts.pop(index, None)
