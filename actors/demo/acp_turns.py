"""ACP turns of the demo: recorded captures replayed in-process through the ACP observer.

Each capture (actors/demo/captures/<script>.jsonl) is the wire transcript of one live
session of a scripted ACP agent (tests/acp_agent.py, recorded by
tests/actors/demo_recorder.py). A demo turn replays one capture through
`catalogue.acp.AcpReplay` — the code path of `recovery acp-replay` — with the turn's own
execution id and time, and gets the observer's verdict: the turn completed, or it failed
with a classification and the turn evidence the effect-safety gate reads. Replaying costs
a fraction of a millisecond; starting an agent subprocess per turn would cost ~1 s of CPU.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, Final

from catalogue import Classification
from catalogue.acp import AcpReplay, TurnCompleted, TurnFailed, TurnSnapshot
from policy import TurnEvidence

CAPTURES_DIR: Final = Path(__file__).resolve().parent / "captures"


@dataclass(frozen=True, slots=True)
class AcpCapture:
    """One recorded session: the agent script that produced it and the adapter it is."""

    script: str
    adapter: str


CAPTURES: Final = {
    "cursor_retriable": AcpCapture("cursor-retriable", "cursor-acp"),
    "cursor_tool_then_reset": AcpCapture("cursor-tool-then-reset", "cursor-acp"),
    "codex_capacity": AcpCapture("codex-capacity", "codex-acp"),
    "claude_overloaded": AcpCapture("claude-overloaded", "claude-acp"),
    "clean": AcpCapture("clean", "claude-acp"),
}


@dataclass(frozen=True, slots=True)
class AcpVerdict:
    """What the observer concluded about one replayed turn. `classification` is None when
    the turn completed."""

    capture: str
    turn: TurnEvidence
    classification: Classification | None
    provider_session_id: str | None


@cache
def capture_lines(script: str) -> tuple[dict[str, Any], ...]:
    path = CAPTURES_DIR / f"{script}.jsonl"
    text = path.read_text(encoding="utf-8")
    return tuple(json.loads(line) for line in text.splitlines() if line.strip())


def replay_turn(name: str, *, execution_id: str, now: datetime) -> AcpVerdict:
    """Replay capture `name` as one turn of execution `execution_id` at `now`."""
    capture = CAPTURES[name]
    replay = AcpReplay(capture.adapter, execution_id=execution_id)
    events = []
    for line in capture_lines(capture.script):
        events.extend(replay.feed(line, now))
    events.extend(replay.finish(now))
    ends = [event for event in events if isinstance(event, TurnCompleted | TurnFailed)]
    if len(ends) != 1:
        raise ValueError(f"capture {name!r} ends {len(ends)} turns, expected one")
    end = ends[0]
    if isinstance(end, TurnCompleted):
        turn = next(e.evidence for e in events if isinstance(e, TurnSnapshot))
        return AcpVerdict(name, turn, None, end.session_id)
    return AcpVerdict(name, end.evidence, end.classification, end.session_id)
