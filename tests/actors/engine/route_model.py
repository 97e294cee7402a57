"""A reference model of one route, written from docs/DESIGN.md §4 and docs/CONTRACTS.md
(Routes) for tests/actors/engine/test_route_model.py. It imports nothing of the runtime:
it is what a reader of those two documents expects a route to do, for one fixed profile
(two candidates, each retrying a transient failure twice, then skipping to the next).

What it tracks is what the snapshot shows (state, generation, candidate, attempt ordinal)
and the decisions the attempt history records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

CANDIDATES: Final = ("claude", "codex")
RETRIES: Final = 2
WAITING: Final = frozenset({"retry_wait", "waiting_for_reset"})
REPORTABLE: Final = frozenset({"active", "retrying"})
LIVE: Final = frozenset({"active", "retrying", "retry_wait", "waiting_for_reset",
                         "action_required"})  # fmt: skip


class RefusedError(Exception):
    """The model's verdict that the runtime must refuse the call (no effect)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind  # "stale_generation" | "invalid_state"
        super().__init__(kind)


@dataclass
class ModelRoute:
    state: str = "none"
    generation: int = 0
    candidate: str | None = None
    attempt_ordinal: int = 0
    retries_used: dict[str, int] = field(default_factory=dict)
    skipped: set[str] = field(default_factory=set)  # excluded for this cycle
    failed: bool = False  # a failure on record since the cycle began
    decisions: list[str] = field(default_factory=list)

    def view(self) -> tuple[str, int, str | None, int]:
        return (self.state, self.generation, self.candidate, self.attempt_ordinal)

    # -- what a caller sends -------------------------------------------------------------

    def start(self) -> None:
        if self.state != "none":
            raise RefusedError("stale_generation")  # it exists already
        self.state, self.generation, self.candidate = "active", 1, CANDIDATES[0]
        self._new_cycle()
        self.decisions.append("start")

    def fail(self, generation: int) -> None:
        self._fence(generation, REPORTABLE)
        assert self.candidate is not None
        self.failed = True
        used = self.retries_used.get(self.candidate, 0)
        if used < RETRIES:
            self.retries_used[self.candidate] = used + 1
            self.state = "retry_wait"
            self.attempt_ordinal += 1
            self.decisions.append("retry")
            return
        self.skipped.add(self.candidate)
        self._switch("skip")

    def succeed(self, generation: int) -> None:
        self._fence(generation, REPORTABLE)
        if self.state == "active" and not self.failed and not self.skipped:
            return  # nothing to forget: a success on a clean route writes nothing
        self.state = "active"
        self._new_cycle()
        self.decisions.append("success")

    def retry_now(self, generation: int) -> None:
        self._fence(generation, WAITING)
        self.state = "retrying"
        self.decisions.append("retry_now")

    def skip_now(self, generation: int) -> None:
        self._fence(generation, WAITING)
        assert self.candidate is not None
        self.skipped.add(self.candidate)
        self._switch("skip_now")

    def cancel_wait(self, generation: int) -> None:
        self._fence(generation, LIVE | {"closed"})  # idempotent: nothing pending, nothing done
        if self.state in WAITING:
            self.state = "action_required"
            self.decisions.append("cancel_wait")

    def stop(self, generation: int) -> None:
        self._fence(generation, LIVE)
        if self.state != "action_required":
            self.state = "action_required"
            self.decisions.append("stop")

    def resume(self, generation: int) -> None:
        self._fence(generation, {"action_required"})
        self.state = "active"
        self.decisions.append("resume")

    def start_fresh(self, generation: int) -> None:
        self._fence(generation, {"action_required"})
        self.state, self.candidate = "active", CANDIDATES[0]
        self._new_generation()
        self._new_cycle()
        self.decisions.append("start_fresh")

    def close(self, generation: int) -> None:
        self._fence(generation, LIVE | {"closed"})
        if self.state != "closed":
            self.state = "closed"
            self.decisions.append("close")

    # -- what time does --------------------------------------------------------------------

    def deadline_reached(self) -> None:
        """Its pending attempt's deadline came (a timer or the backstop fired it)."""
        if self.state in WAITING:
            self.state = "retrying"
            self.decisions.append("deadline_reached")

    # -- the rules behind them -------------------------------------------------------------

    def _fence(self, generation: int, allowed: frozenset[str] | set[str]) -> None:
        if generation != self.generation:
            raise RefusedError("stale_generation")
        if self.state not in allowed:
            raise RefusedError("invalid_state")

    def _switch(self, decision: str) -> None:
        left = [c for c in CANDIDATES if c not in self.skipped]
        self.decisions.append(decision)
        if not left:
            self.state = "action_required"
            return
        self.candidate = left[0]
        self._new_generation()
        self.state = "active"

    def _new_generation(self) -> None:
        """Attempt ordinals count the scheduled attempts of one generation."""
        self.generation += 1
        self.attempt_ordinal = 0

    def _new_cycle(self) -> None:
        self.retries_used = {}
        self.skipped = set()
        self.failed = False
