"""Live progress of the demo fleet, refreshed from Redis: sessions by route state, pending
schedules and dispatches so far. On a terminal it is a rich Live table; otherwise (a pipe,
a CI log) one plain line every few seconds; with `--json`, nothing.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from redis.asyncio import Redis
from rich.console import Console
from rich.live import Live
from rich.table import Table

from actors.demo.demo_keys import DemoKeys
from actors.keys import KeySpace

STATE_ORDER: Final = (
    "not started", "active", "retry_wait", "waiting_for_reset", "retrying", "switching",
    "action_required", "closed",
)  # fmt: skip
PLAIN_EVERY_S: Final = 5.0


@dataclass(frozen=True, slots=True)
class FleetView:
    elapsed_s: float
    phase: str
    states: Counter[str]
    pending: int
    dispatches: int


async def read_view(
    client: Redis, prefix: str, route_ids: Sequence[str], elapsed_s: float, phase: str
) -> FleetView:
    keys, demo = KeySpace(prefix), DemoKeys(prefix)
    async with client.pipeline(transaction=False) as pipeline:
        for route_id in route_ids:
            pipeline.hget(keys.route(route_id), "state")
        pipeline.zcard(keys.schedules)
        pipeline.llen(demo.dispatches)
        replies = await pipeline.execute()
    states = Counter(_state(reply) for reply in replies[: len(route_ids)])
    return FleetView(elapsed_s, phase, states, int(replies[-2]), int(replies[-1]))


def _state(reply: object) -> str:
    if reply is None:
        return "not started"
    return reply.decode() if isinstance(reply, bytes) else str(reply)


def view_table(view: FleetView) -> Table:
    table = Table(title=f"recovery demo: {view.phase}, {view.elapsed_s:.0f} s", min_width=44)
    table.add_column("sessions by route state")
    table.add_column("count", justify="right")
    for state in STATE_ORDER:
        table.add_row(state, str(view.states.get(state, 0)))
    table.add_section()
    table.add_row("pending schedules", str(view.pending))
    table.add_row("dispatches", str(view.dispatches))
    return table


def view_line(view: FleetView) -> str:
    states = ", ".join(f"{s} {view.states[s]}" for s in STATE_ORDER if view.states.get(s))
    return (
        f"[{view.elapsed_s:5.0f} s] {view.phase}: {states}; pending schedules {view.pending}, "
        f"dispatches {view.dispatches}"
    )


class ProgressDisplay:
    """Shows views as they come: live on a terminal, a line now and then elsewhere."""

    def __init__(self, console: Console | None) -> None:
        self._console = console
        self._live: Live | None = None
        self._last_line = 0.0

    def __enter__(self) -> ProgressDisplay:
        if self._console is not None and self._console.is_terminal:
            self._live = Live(console=self._console, auto_refresh=False, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)

    def show(self, view: FleetView, *, final: bool = False) -> None:
        if self._console is None:
            return
        if self._live is not None:
            self._live.update(view_table(view), refresh=True)
            return
        now = time.monotonic()
        if final or now - self._last_line >= PLAIN_EVERY_S:
            self._last_line = now
            self._console.print(view_line(view), highlight=False, soft_wrap=True)
