"""Circuits <-> Redis: the readable circuit hash and the apply script's request.

Every stored value is a plain string (as for routes): "" is unset, times are ISO-8601 UTC
with a `Z`, and the two times the Lua guards compare (`open_until`, the lease expiry) are
stored a second time as epoch seconds. The hash of one circuit:

    resource_id, provider, model, credential_fingerprint, label   what it is
    state               closed | open | half_open
    opened_at, open_until, open_until_epoch, reason
    failures            transient failures counted in the window (closed only)
    recent_failures     JSON list of those failures: at, route_id, code, reset_at
    backoff_step        failed probes since the circuit last closed (selects the backoff)
    probe_holder, probe_token, lease_acquired_at, lease_expires_at, lease_expires_epoch
    lease_epoch         leases handed out so far (owner tokens are never reused)
    version             the compare-and-set version (written by the script)
    updated_at

A change of state (closed, open, half_open) and every operator override also append one
event to the circuit events stream, in the same script (`event_fields`):

    event "circuit.changed", version (the circuit's after the change, written by the
    script), cause (what changed it: record_failure(s), acquire_probe, report_probe,
    abandon_probe, operator_open, operator_close), resource_id, label, from_state, state,
    open_until, reason, at
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from pydantic import ValidationError

from actors.errors import CorruptCircuitError
from actors.routes.circuit_models import CircuitView
from circuits import CircuitState, ProbeLease, ResourceKey
from circuits.marks import MARKS
from policy.decisions import utc_iso

IDENTITY_FIELDS: Final = ("provider", "model", "credential_fingerprint")
EVENT: Final = "circuit.changed"


def _iso(moment: datetime | None) -> str:
    return "" if moment is None else utc_iso(moment)


def _epoch(moment: datetime | None) -> str:
    """Epoch seconds as Lua's tonumber reads them back exactly (repr round-trips)."""
    return "" if moment is None else repr(moment.timestamp())


def circuit_fields(resource: ResourceKey, state: CircuitState, now: datetime) -> list[str]:
    """Every stored field of the circuit but `version`, as flat [name, value, ...]."""
    lease = state.lease
    marks = MARKS.dump_python(state.recent_failures, mode="json")
    fields = {
        "resource_id": resource.resource_id,
        "provider": resource.provider,
        "model": resource.model or "",
        "credential_fingerprint": resource.credential_fingerprint or "",
        "label": resource.label,
        "state": state.status.value,
        "opened_at": _iso(state.opened_at),
        "open_until": _iso(state.open_until),
        "open_until_epoch": _epoch(state.open_until),
        "reason": state.reason or "",
        "failures": str(len(state.recent_failures)),
        "recent_failures": json.dumps(marks, separators=(",", ":")),
        "backoff_step": str(state.failed_probes),
        "probe_holder": "" if lease is None else lease.holder,
        "probe_token": "" if lease is None else lease.owner_token,
        "lease_acquired_at": _iso(None if lease is None else lease.acquired_at),
        "lease_expires_at": _iso(None if lease is None else lease.expires_at),
        "lease_expires_epoch": _epoch(None if lease is None else lease.expires_at),
        "lease_epoch": str(state.lease_epoch),
        "updated_at": utc_iso(now),
    }
    return [text for pair in fields.items() for text in pair]


def event_fields(
    resource: ResourceKey, before: CircuitState, after: CircuitState, cause: str, now: datetime
) -> list[str]:
    """The event of a change from `before` to `after`, as flat [name, value, ...] (the
    script puts the new version first)."""
    fields = {
        "event": EVENT,
        "cause": cause,
        "resource_id": resource.resource_id,
        "label": resource.label,
        "from_state": before.status.value,
        "state": after.status.value,
        "open_until": _iso(after.open_until),
        "reason": after.reason or "",
        "at": utc_iso(now),
    }
    return [text for pair in fields.items() for text in pair]


def apply_request(
    resource: ResourceKey,
    expected: int,
    state: CircuitState,
    now: datetime,
    *,
    guard: str = "",
    token: str = "",
    parked: bool = False,
    event: list[str] | None = None,
    maxlen: int = 0,
) -> str:
    """ARGV[1] of circuit_apply.lua (`event`: the change's event, on a stream of about
    `maxlen` entries)."""
    request: dict[str, Any] = {
        "resource": resource.resource_id,
        "expected": expected,
        "fields": circuit_fields(resource, state, now),
        "now": now.timestamp(),
        "guard": guard,
        "token": token,
        "parked": parked,
    }
    if event is not None:  # absent, not null: cjson's null is a true value in Lua
        request["event"] = event
        request["maxlen"] = maxlen
    return json.dumps(request, separators=(",", ":"))


def decode_state(resource_id: str, raw: Mapping[str, str]) -> CircuitState:
    """The pure state stored in a circuit hash (an empty hash: a closed circuit)."""
    if not raw:
        return CircuitState()
    try:
        values: dict[str, Any] = {
            "status": raw["state"],
            "recent_failures": MARKS.validate_python(
                json.loads(raw.get("recent_failures") or "[]")
            ),
            "opened_at": raw.get("opened_at") or None,
            "open_until": raw.get("open_until") or None,
            "reason": raw.get("reason") or None,
            "failed_probes": int(raw.get("backoff_step") or 0),
            "lease_epoch": int(raw.get("lease_epoch") or 0),
        }
        if raw.get("probe_token"):
            values["lease"] = ProbeLease.model_validate(
                {
                    "holder": raw["probe_holder"],
                    "owner_token": raw["probe_token"],
                    "acquired_at": raw["lease_acquired_at"],
                    "expires_at": raw["lease_expires_at"],
                }
            )
        return CircuitState.model_validate(values)
    except (KeyError, ValueError, ValidationError) as error:
        raise CorruptCircuitError(resource_id, f"{type(error).__name__}: {error}") from None


def decode_resource(resource_id: str, raw: Mapping[str, str]) -> ResourceKey:
    """The resource a stored hash names, checked against the id its key carries."""
    try:
        resource = ResourceKey.model_validate(
            {name: raw.get(name) or None for name in IDENTITY_FIELDS}
        )
    except ValidationError as error:
        raise CorruptCircuitError(resource_id, f"resource: {error}") from None
    if resource.resource_id != resource_id:
        raise CorruptCircuitError(resource_id, f"stored resource is {resource.resource_id}")
    return resource


def decode_view(resource: ResourceKey, raw: Mapping[str, str], parked: int) -> CircuitView:
    resource_id = resource.resource_id
    try:
        return CircuitView.model_validate(
            {
                "resource": resource,
                "state": decode_state(resource_id, raw),
                "version": int(raw.get("version") or 0),
                "parked": parked,
                "updated_at": raw.get("updated_at") or None,
            }
        )
    except (ValueError, ValidationError) as error:
        raise CorruptCircuitError(resource_id, f"{type(error).__name__}: {error}") from None
