"""What a caller does next with a route: the `next_step` every snapshot carries
(docs/CONTRACTS.md, Routes)."""

from __future__ import annotations

from typing import Final, Literal

NextStep = Literal["run", "wait", "manual", "done"]
"""What the caller does next with a route (docs/CONTRACTS.md, Routes): `run` launch the turn
now on the route's candidate; `wait` nothing, a dispatch comes at the deadline (or is under
way); `manual` a person decides (action_required); `done` nothing, the recovery is over (a
success, a closed route, a route never started)."""

STATE_NEXT_STEP: Final[dict[str, NextStep]] = {
    "none": "done",
    "active": "run",
    "retry_wait": "wait",
    "waiting_for_reset": "wait",
    "retrying": "wait",
    "switching": "run",
    "action_required": "manual",
    "closed": "done",
}
"""The next step a state implies. Only `active` depends on how the route got there: after
a start, a skip, a Resume or a Start fresh it is `run`, after a success `done`
(actors/routes/steps.py)."""
