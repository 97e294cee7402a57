"""An operator's overrides of a circuit, as pure transitions: values in, values out.

    any ──operator_open(until)──▶ open until `until` (reason "operator")
    any ──operator_close──▶ closed (as a probe success closes it)

An operator knows what the evidence cannot (the provider's status page, a new key, a
maintenance window), so an override wins over what failures and probes decided:
- `operator_open` opens the circuit, or keeps it open, until exactly `until`, earlier or
  later than before (a failure's trusted reset only ever moves open-until later). A probe
  lease in flight is dropped: its verdict, arriving later, is not the live lease's and
  changes nothing (circuits.machine fences verdicts by owner token). The backoff step is
  kept, so the first failed probe after the override backs off as it would have.
  `until` must be after `now` and within `max_open_s` of it, as every open period is.
- `operator_close` closes it and forgets its counted failures, exactly the state a probe
  success leaves (the lease numbering goes on, so no owner token is reused). Closing a
  closed circuit with nothing counted changes nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from circuits.machine import CircuitState, CircuitStatus
from circuits.settings import CircuitSettings, to_utc

OPERATOR_REASON: Final = "operator"


def operator_open(
    state: CircuitState, until: datetime, now: datetime, settings: CircuitSettings
) -> CircuitState:
    """The circuit open until `until`, whatever it was. Raises ValueError naming `until`
    when it is not after `now` or lies beyond `max_open_s` from it."""
    now, until = to_utc(now), to_utc(until)
    if until <= now:
        raise ValueError(f"until {until.isoformat()} must be after now ({now.isoformat()})")
    longest = now + timedelta(seconds=settings.max_open_s)
    if until > longest:
        raise ValueError(
            f"until {until.isoformat()} is beyond max_open_s ({settings.max_open_s:g} s) "
            f"from now: at most {longest.isoformat()}"
        )
    opened_at = now if state.status is CircuitStatus.CLOSED else state.opened_at
    return state.model_copy(
        update={
            "status": CircuitStatus.OPEN,
            "recent_failures": (),
            "opened_at": opened_at,
            "open_until": until,
            "reason": OPERATOR_REASON,
            "lease": None,
        }
    )


def operator_close(state: CircuitState) -> CircuitState:
    """The circuit closed with nothing counted, as a probe success leaves it."""
    return CircuitState(lease_epoch=state.lease_epoch)
