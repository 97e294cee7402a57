"""The small pictures the console draws on the server: a circuit's state over the last
hour as coloured bands on a time axis. Pure: given the changes and "now"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from actors.api.models import CircuitChange

WINDOW: Final = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class Band:
    """One stretch of one state: where it starts and how wide it is, in percent of the
    window, and the state's name (the band's colour and its label)."""

    start: float
    width: float
    state: str
    since: datetime


def state_bands(
    changes: Sequence[CircuitChange], current: str, now: datetime, window: timedelta = WINDOW
) -> list[Band]:
    """The states over `window` up to `now`, oldest first. Before the first change in the
    window the circuit was in that change's `from_state` (`current` with no change)."""
    begin = now - window
    inside = [change for change in changes if begin < change.at <= now]
    state = inside[0].from_state if inside else current
    edges: list[tuple[datetime, str]] = [(begin, state)]
    edges += [(change.at, change.state) for change in inside]
    total = window.total_seconds()
    bands: list[Band] = []
    for index, (at, name) in enumerate(edges):
        until = edges[index + 1][0] if index + 1 < len(edges) else now
        start = (at - begin).total_seconds() / total * 100
        width = (until - at).total_seconds() / total * 100
        if width > 0 or index == len(edges) - 1:
            bands.append(Band(round(start, 3), round(max(width, 0.4), 3), name, at))
    return bands


__all__ = ["Band", "state_bands"]
