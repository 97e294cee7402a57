"""The effect-safety gate: may a failed turn be repeated, or handed to another candidate?

Classification never authorises recovery by itself. Only a known, current turn with no
assistant output and no tool activity is safe; anything not recorded counts as unsafe.
A provider's guarantee of a resumable retry for the same native session and generation
covers output, thoughts and ambiguous delivery, but only for the same candidate, and never
tool activity or a partial utility result. Profile settings cannot reach this gate.

The lifecycle phase the failure was observed in matters for transport losses: during
launch (before the prompt was delivered) nothing can have happened, so the launch is
safe to repeat (`launch_safety`); during a turn the turn's own evidence decides.
"""

from __future__ import annotations

from typing import Final, Self

from pydantic import BaseModel, ConfigDict, Field

_FROZEN = ConfigDict(frozen=True, extra="forbid")

# Evidence.phase of a failure observed while the agent was being launched, before the
# prompt was delivered (starting the process, ACP initialize, session/new).
LAUNCH_PHASE: Final = "launch"
# Failures that say the transport to the agent or provider was lost: the only ones a
# launch phase makes safe to repeat (a provider's answer means the request got through).
LAUNCH_SAFE_CODES: Final = frozenset({"network_unavailable", "agent_transport_lost"})


class ResumableRetry(BaseModel):
    """A provider's promise that this exact native session and generation can be resumed."""

    model_config = _FROZEN

    provider_session_id: str = Field(min_length=1)
    prompt_generation: int = Field(ge=0)


class TurnEvidence(BaseModel):
    """An immutable snapshot of what was observed of one prompt turn, taken before the
    failure is evaluated. A field left as None was not recorded and counts as unsafe.

    `matched_acp_diagnostic` says the only output observed is an ACP diagnostic that matched
    the terminal provider error: it is not assistant output. Later progress clears it.
    """

    model_config = _FROZEN

    execution_id: str | None = None
    prompt_generation: int | None = Field(default=None, ge=0)
    provider_session_id: str | None = None
    output_observed: bool | None = None
    thoughts_observed: bool | None = None
    tool_call_started: bool | None = None
    tool_call_completed: bool | None = None
    partial_utility_result: bool | None = None
    ambiguous_delivery: bool | None = None
    matched_acp_diagnostic: bool = False
    resumable_retry: ResumableRetry | None = None

    @classmethod
    def before_any_output(
        cls, *, execution_id: str, prompt_generation: int, provider_session_id: str | None = None
    ) -> Self:
        """A known, current turn that failed before anything was observed: no output, no
        thoughts, no tool call, no partial result, delivery not in doubt."""
        return cls(
            execution_id=execution_id, prompt_generation=prompt_generation,
            provider_session_id=provider_session_id, output_observed=False,
            thoughts_observed=False, tool_call_started=False, tool_call_completed=False,
            partial_utility_result=False, ambiguous_delivery=False,
        )  # fmt: skip


class EffectSafety(BaseModel):
    """The gate's verdict. `same_candidate`: the turn may be repeated on the candidate that
    failed. `other_candidate`: its prompt may be delivered to another candidate."""

    model_config = _FROZEN

    same_candidate: bool
    other_candidate: bool
    reason: str

    @classmethod
    def safe(cls, reason: str = "known, current turn with no output and no tool activity") -> Self:
        return cls(same_candidate=True, other_candidate=True, reason=reason)

    @classmethod
    def unsafe(cls, reason: str) -> Self:
        return cls(same_candidate=False, other_candidate=False, reason=reason)


def assess_turn(
    evidence: TurnEvidence | None,
    *,
    execution_id: str,
    prompt_generation: int,
    thoughts_block_replay: bool = True,
) -> EffectSafety:
    """The verdict for a failure of the current execution and prompt generation.

    `thoughts_block_replay` (default, as for Cursor-style replay of the cached prompt):
    observed thoughts make the turn unsafe, like output.
    """
    problem = (
        "no turn evidence was recorded"
        if evidence is None
        else _staleness(evidence, execution_id, prompt_generation) or _effects(evidence)
    )
    if problem or evidence is None:
        return EffectSafety.unsafe(f"not effect-safe: {problem}")
    pre_result = _pre_result_problem(evidence, thoughts_block_replay)
    if pre_result is None:
        return EffectSafety.safe()
    guarantee = evidence.resumable_retry
    if (
        guarantee is not None
        and evidence.provider_session_id is not None
        and guarantee.provider_session_id == evidence.provider_session_id
        and guarantee.prompt_generation == prompt_generation
    ):
        return EffectSafety(
            same_candidate=True,
            other_candidate=False,
            reason=(
                f"{pre_result}, but the provider guarantees a resumable retry of session "
                f"{guarantee.provider_session_id!r} generation {prompt_generation}"
            ),
        )
    return EffectSafety.unsafe(f"not effect-safe: {pre_result}")


def _staleness(evidence: TurnEvidence, execution_id: str, prompt_generation: int) -> str | None:
    if evidence.execution_id is None:
        return "turn evidence has no execution id"
    if evidence.prompt_generation is None:
        return "turn evidence has no prompt generation"
    if evidence.execution_id != execution_id:
        return (
            f"turn evidence is for execution {evidence.execution_id!r}, "
            f"not the current {execution_id!r}"
        )
    if evidence.prompt_generation != prompt_generation:
        return (
            f"turn evidence is for prompt generation {evidence.prompt_generation}, "
            f"not the current {prompt_generation}"
        )
    return None


Check = tuple[bool | None, str, str]


def _effects(evidence: TurnEvidence) -> str | None:
    """Effects nothing can make safe to repeat."""
    return _first_problem(
        [
            (evidence.tool_call_started, "a tool call started", "a tool call started"),
            (evidence.tool_call_completed, "a tool call completed", "a tool call completed"),
            (
                evidence.partial_utility_result,
                "a partial utility result was produced",
                "a partial utility result was produced",
            ),
        ]
    )


def _pre_result_problem(evidence: TurnEvidence, thoughts_block_replay: bool) -> str | None:
    output = evidence.output_observed
    if output and evidence.matched_acp_diagnostic:
        output = False  # the matched diagnostic is not assistant output
    checks: list[Check] = [(output, "assistant output was observed", "assistant output appeared")]
    if thoughts_block_replay:
        checks.append(
            (evidence.thoughts_observed, "assistant thoughts were observed", "thoughts appeared")
        )
    checks.append(
        (
            evidence.ambiguous_delivery,
            "prompt delivery is ambiguous",
            "prompt delivery is ambiguous",
        )
    )
    return _first_problem(checks)


def _first_problem(checks: list[Check]) -> str | None:
    for observed, seen, question in checks:
        if observed is None:
            return f"turn evidence does not record whether {question}"
        if observed:
            return seen
    return None


def launch_safety(phase: str | None, code: str) -> EffectSafety | None:
    """The verdict for a transport loss during launch, or None when the phase or code does
    not make one (the turn's evidence then decides, `assess_turn`). Launch-safe: the prompt
    was never delivered, so neither repeating it nor handing it on can duplicate work."""
    if phase is None or phase.strip().lower() != LAUNCH_PHASE or code not in LAUNCH_SAFE_CODES:
        return None
    return EffectSafety(
        same_candidate=True,
        other_candidate=True,
        reason=f"{code} during launch, before the prompt was delivered: launch-safe",
    )
