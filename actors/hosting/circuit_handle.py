"""`CircuitHandle`: an operator's overrides of one circuit, sent to the actor that owns it.

    runtime = RecoveryRuntime.attach()
    circuit = circuit_handle(runtime, view.resource)        # a CircuitView's resource
    outcome = await circuit.open_until(datetime.now(UTC) + timedelta(minutes=10))
    outcome = await circuit.close()                          # releases its parked routes

A circuit's transitions have one owner, its logical circuit actor on the circuit host
the installation's circuit ring picks (actors/hosting/names.py, as `recovery circuits`
shows it). An override is a command to that host (`CircuitHost.override`), which applies
it with the store's fenced write (the Lua compare-and-set stays the fence) and records it
on the circuit events stream; a close releases the parked routes as a probe success does.
Nothing here writes Redis.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from actors.errors import RecoveryError
from actors.hosting.names import Owners
from actors.routes.circuit_models import (
    CircuitOverride,
    CloseCircuit,
    OpenCircuit,
    OverrideOutcome,
    aware,
)
from circuits import ResourceKey

if TYPE_CHECKING:
    from actors.hosting.runtime import RecoveryRuntime


class NoCircuitHostsError(RecoveryError):
    """The installation has no circuit hosts (`circuit_hosts` 0: its route hosts write
    circuits themselves), so no actor owns a circuit to take an override."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        super().__init__(
            f"installation {prefix!r} has no circuit hosts (circuit_hosts = 0): no circuit "
            "actor can take an override"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.prefix,))


@dataclass(frozen=True, slots=True)
class CircuitHandle:
    """The overrides of one circuit, called on the circuit host that owns it. Each
    answers the circuit as the override left it (OverrideOutcome) or raises the host's
    refusal: InvalidCircuitInputError naming `until`, StoreUnavailableError (nothing
    written)."""

    resource: ResourceKey
    host: Any  # a Ray actor handle of CircuitHost

    async def open_until(self, until: datetime) -> OverrideOutcome:
        """Open the circuit until `until` (aware; after now, within max_open_s), earlier
        or later than it was, whatever opened it; a probe in flight is ended (its verdict
        then changes nothing)."""
        return await self._send(OpenCircuit(aware("until", until)))

    async def close(self) -> OverrideOutcome:
        """Close the circuit, forgetting its counted failures; the routes parked on it are
        released in budgeted waves, as after a probe success."""
        return await self._send(CloseCircuit())

    async def _send(self, override: CircuitOverride) -> OverrideOutcome:
        answer: OverrideOutcome | RecoveryError = await self.host.override.remote(
            self.resource, override
        )
        if isinstance(answer, RecoveryError):
            raise answer
        return answer


def circuit_handle(runtime: RecoveryRuntime, resource: ResourceKey) -> CircuitHandle:
    """The handle of `resource`'s circuit in a started or attached runtime, bound to the
    circuit host that owns it. Raises NoCircuitHostsError when the installation has none."""
    hosts = runtime.circuit_host_handles
    if not hosts:
        raise NoCircuitHostsError(runtime.key_prefix)
    owner = Owners(len(hosts), kind="circuit").index_of(resource.resource_id)
    return CircuitHandle(resource, hosts[owner])
