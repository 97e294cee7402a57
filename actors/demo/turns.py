"""What one session's simulated candidates do on each attempt, seeded per session.

A session owns a `random.Random` seeded from the demo seed and its index, so the same
seed gives the same draws in the same order; only timing (what is due when) differs
between runs. Each attempt on a candidate either succeeds or fails with one failure kind
from the candidate's mix (`FAILURE_MIX`, by agent adapter):

- corpus kinds (actors/demo/corpus_pool.py): overload (a burst of 1-3 failures in a row on
  the same candidate), capacity, rate limits with a Retry-After moved to 1-4 s ahead, quota
  with a reset moved to 2-5 s ahead, auth and model errors, network errors;
- ACP kinds (actors/demo/acp_turns.py): Cursor's retriable stream reset, Cursor's reset
  after a tool call, Codex's capacity status, Claude's overloaded diagnostic pair;
- `unsafe_tool`: an overload reported after the turn ran a tool (the gate refuses any
  automatic recovery: action_required).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from actors.demo.acp_turns import replay_turn
from actors.demo.corpus_pool import CorpusPool, FailureKind
from actors.demo.errors import DemoError
from catalogue import Classification, Evidence
from policy import Candidate, TurnEvidence

FAIL_FIRST: Final = 0.5  # chance that a turn's first attempt fails
FAIL_AGAIN: Final = 0.3  # chance that a later attempt fails (bursts aside)
MAX_BURST_EXTRA: Final = 2

ACP_CURSOR_RESET: Final = "acp:cursor_retriable"
ACP_CURSOR_TOOL: Final = "acp:cursor_tool_then_reset"
ACP_CODEX_CAPACITY: Final = "acp:codex_capacity"
ACP_CLAUDE_OVERLOADED: Final = "acp:claude_overloaded"
UNSAFE_TOOL: Final = "unsafe_tool"

K = FailureKind
FAILURE_MIX: Final[dict[str, tuple[tuple[str, int], ...]]] = {
    "claude-acp": (
        (ACP_CLAUDE_OVERLOADED, 3), (K.OVERLOADED, 2), (K.QUOTA_RESET, 2), (K.RATE_LIMIT, 2),
        (K.AUTH, 1), (K.MODEL, 1), (UNSAFE_TOOL, 1),
    ),
    "codex-acp": (
        (ACP_CODEX_CAPACITY, 3), (K.CAPACITY, 1), (K.QUOTA_RESET, 2), (K.RATE_LIMIT, 1),
        (K.AUTH, 1), (K.NETWORK, 1),
    ),
    "gemini-acp": ((K.CAPACITY, 2), (K.RATE_LIMIT, 2), (K.OVERLOADED, 2), (K.AUTH, 1)),
    "cursor-acp": ((ACP_CURSOR_RESET, 5), (ACP_CURSOR_TOOL, 1), (K.AUTH, 1), (K.MODEL, 1)),
    "opencode-acp": ((K.RATE_LIMIT, 2), (K.QUOTA_RESET, 1), (K.OVERLOADED, 2), (K.MODEL, 1)),
    "copilot-acp": ((K.RATE_LIMIT, 1), (K.AUTH, 1), (K.NETWORK, 2)),
    "raw-api": (
        (K.OVERLOADED, 3), (K.RATE_LIMIT, 3), (K.QUOTA_RESET, 2), (K.CAPACITY, 1), (K.AUTH, 1),
        (K.MODEL, 1), (UNSAFE_TOOL, 1),
    ),
}  # fmt: skip
RATE_LIMIT_HINT_S: Final = (1, 4)
QUOTA_RESET_S: Final = (2, 5)


@dataclass(frozen=True, slots=True)
class TurnFailure:
    """One failed attempt as the orchestrator reports it. `source` names the corpus row or
    the ACP capture the evidence came from."""

    kind: str
    source: str
    evidence: Evidence | Classification
    turn: TurnEvidence
    provider_session_id: str | None = None


@dataclass
class SessionScript:
    """The seeded behaviour of one session's candidates."""

    seed: int
    index: int
    pool: CorpusPool
    rng: random.Random = field(init=False)
    prompts: int = 0
    _burst: tuple[str, int] | None = None  # (candidate id, overloads still to come)

    def __post_init__(self) -> None:
        # Not for security: a repeatable simulation.
        self.rng = random.Random(f"demo:{self.seed}:{self.index}")  # noqa: S311

    @property
    def execution_id(self) -> str:
        return f"demo-exec-{self.index}"

    def attempt(self, candidate: Candidate, now: datetime, *, first: bool) -> TurnFailure | None:
        """The outcome of one attempt on `candidate` at `now`: None is a success."""
        self.prompts += 1
        if self._burst is not None and self._burst[0] == candidate.id and self._burst[1] > 0:
            self._burst = (candidate.id, self._burst[1] - 1)
            return self._corpus(K.OVERLOADED, candidate, now)
        self._burst = None
        if self.rng.random() >= (FAIL_FIRST if first else FAIL_AGAIN):
            return None
        kinds, weights = zip(*FAILURE_MIX[candidate.agent], strict=True)
        kind = self.rng.choices(kinds, weights)[0]
        if kind == K.OVERLOADED:
            self._burst = (candidate.id, self.rng.randint(0, MAX_BURST_EXTRA))
        if kind.startswith("acp:"):
            return self._acp(kind, now)
        if kind == UNSAFE_TOOL:
            failure = self._corpus(K.OVERLOADED, candidate, now)
            tools = {"tool_call_started": True, "tool_call_completed": True}
            return TurnFailure(
                UNSAFE_TOOL, failure.source, failure.evidence, failure.turn.model_copy(update=tools)
            )
        return self._corpus(FailureKind(kind), candidate, now)

    def choose(self, options: tuple[str, ...], weights: tuple[int, ...]) -> str:
        """A seeded choice for the orchestrator's own decisions (e.g. a manual action)."""
        return self.rng.choices(options, weights)[0]

    def randint(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def uniform(self, low: float, high: float) -> float:
        return self.rng.uniform(low, high)

    def _corpus(self, kind: FailureKind, candidate: Candidate, now: datetime) -> TurnFailure:
        case = self.pool.draw(kind, candidate.provider or "", self.rng)
        low, high = QUOTA_RESET_S if kind == K.QUOTA_RESET else RATE_LIMIT_HINT_S
        evidence = case.evidence(self.rng.randint(low, high), now)
        return TurnFailure(kind.value, case.row_id, evidence, self._safe_turn())

    def _acp(self, kind: str, now: datetime) -> TurnFailure:
        capture = kind.removeprefix("acp:")
        verdict = replay_turn(capture, execution_id=self.execution_id, now=now)
        if verdict.classification is None:
            raise DemoError(f"capture {capture!r} does not fail")
        return TurnFailure(
            kind, capture, verdict.classification, verdict.turn, verdict.provider_session_id
        )

    def _safe_turn(self) -> TurnEvidence:
        return TurnEvidence(
            execution_id=self.execution_id, prompt_generation=self.prompts,
            output_observed=False, thoughts_observed=False, tool_call_started=False,
            tool_call_completed=False, partial_utility_result=False, ambiguous_delivery=False,
        )  # fmt: skip
