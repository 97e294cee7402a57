"""The failures a closed circuit remembers, and the rules that open it on them.

A closed circuit keeps marks of its recent qualifying failures in its stored hash, and
every report that touches the circuit reads and writes them. So it keeps only the marks
that can still change a decision (`retained`), not every failure of the window: a busy
provider-wide circuit fed by one model's failures never opens, and kept up to
`max_recent_failures` marks, each decoded and re-encoded on every report.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Final

from pydantic import ConfigDict, Field, TypeAdapter

from circuits.settings import CircuitSettings, UtcDatetime, to_utc


@dataclass(frozen=True, slots=True)
class FailureMark:
    """One counted transient failure while closed. A slotted dataclass, not a model: the
    machine makes one for every report on a closed circuit (a model's validation cost
    ~7 µs of it), and only its stored form (`MARKS`) is validated as input."""

    __pydantic_config__ = ConfigDict(extra="forbid")

    at: UtcDatetime
    route_id: Annotated[str, Field(min_length=1)]
    code: str
    reset_at: UtcDatetime | None = None
    model: str | None = None
    opens: bool = False
    # The distinct failing models this mark's circuit needs to open (circuits.resource's
    # failure_targets): 1 for a failure that counts on this circuit directly, more for a
    # model's failure on the provider-wide circuit, which must never count directly.
    min_models: Annotated[int, Field(ge=1)] = 1

    def __post_init__(self) -> None:
        if not self.route_id:
            raise ValueError("a failure mark needs a route_id")
        if self.min_models < 1:
            raise ValueError(f"min_models {self.min_models} must be at least 1")
        # Stored and compared in UTC (what the machine passes already costs nothing here).
        if self.at.tzinfo is not UTC:
            object.__setattr__(self, "at", to_utc(self.at))
        if self.reset_at is not None and self.reset_at.tzinfo is not UTC:
            object.__setattr__(self, "reset_at", to_utc(self.reset_at))


Marks = tuple[FailureMark, ...]
# A circuit's stored marks, validated as they are read back (circuit_codec) and encoded.
MARKS: Final = TypeAdapter(Marks)


def qualifies(marks: Marks, settings: CircuitSettings) -> bool:
    """The transient threshold: enough failures, from enough distinct routes."""
    routes = {m.route_id for m in marks}
    return len(marks) >= settings.transient_threshold and (
        len(routes) >= settings.min_distinct_routes
    )


def directly_qualify(marks: Marks, settings: CircuitSettings) -> bool:
    """The transient threshold over the marks that count on the circuit directly."""
    return qualifies(tuple(m for m in marks if m.min_models <= 1), settings)


def models_qualify(marks: Marks, settings: CircuitSettings, min_models: int) -> bool:
    """At least `min_models` distinct models each have failures that would open their
    own circuit: a hard (opening) one, or the transient threshold."""
    failing = sum(
        1
        for found in _by_model(marks).values()
        if any(m.opens for m in found) or qualifies(found, settings)
    )
    return failing >= min_models


def latest_reset(marks: Marks, now: datetime) -> datetime | None:
    """The latest trusted reset among `marks` that is still ahead of `now`."""
    return max((m.reset_at for m in marks if m.reset_at is not None and m.reset_at > now),
               default=None)  # fmt: skip


def retained(marks: Marks, settings: CircuitSettings) -> Marks:
    """The marks (oldest first) that decide exactly as all of `marks` do, for any later
    window and any newer marks: per model, and within it apart for the marks that count
    directly, the newest `transient_threshold` marks, the newest mark of each of the
    newest `min_distinct_routes` routes and the newest opening mark; and every mark whose
    reset is later than that of every newer mark (so the latest reset left in any window
    is kept). A window drops the oldest marks first, so what is newest now stays newest
    among the survivors. At most `max_recent_failures`."""
    keep: set[int] = set()
    for indexes in _indexes_by_rule(marks).values():
        keep.update(indexes[-settings.transient_threshold :])
        routes: set[str] = set()
        opening_kept = False
        for index in reversed(indexes):
            mark = marks[index]
            if mark.route_id not in routes and len(routes) < settings.min_distinct_routes:
                routes.add(mark.route_id)
                keep.add(index)
            if mark.opens and not opening_kept:
                opening_kept = True
                keep.add(index)
    newest_later: datetime | None = None
    for index in range(len(marks) - 1, -1, -1):
        reset = marks[index].reset_at
        if reset is not None and (newest_later is None or reset > newest_later):
            newest_later = reset
            keep.add(index)
    return tuple(marks[index] for index in sorted(keep))[-settings.max_recent_failures :]


def _by_model(marks: Marks) -> dict[str, Marks]:
    return {
        model: tuple(marks[i] for i in indexes)
        for model, indexes in _indexes_by_model(marks).items()
        if model is not None
    }


def _indexes_by_model(marks: Marks) -> dict[str | None, list[int]]:
    found: dict[str | None, list[int]] = {}
    for index, mark in enumerate(marks):
        found.setdefault(mark.model, []).append(index)
    return found


def _indexes_by_rule(marks: Marks) -> dict[tuple[str | None, bool], list[int]]:
    """Mark indexes by model and by whether they count directly (each rule's subsets)."""
    found: dict[tuple[str | None, bool], list[int]] = {}
    for index, mark in enumerate(marks):
        found.setdefault((mark.model, mark.min_models <= 1), []).append(index)
    return found
