"""Profiles, evidence and turns for route-logic tests, and an in-memory runner of `plan`.

The evidence is real provider wording the shipped catalogue classifies (Anthropic 529,
Claude Code's usage limit with its reset epoch, Anthropic's exhausted credits, the
agent process exiting), so the tests go through classification as production does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from actors.clock import ManualClock
from actors.engine.service import RouteService
from actors.keys import AttemptFence
from actors.routes.commands import CompleteSwitch, RouteCommand, RouteContext, RouteSettings
from actors.routes.models import AttemptRecord, RouteSnapshot, Transition
from actors.routes.plan import plan
from actors.routes.profile_board import ProfileBoard
from actors.routes.profiles import RouteProfile
from actors.store.route_codec import applied_snapshot
from catalogue import Evidence
from policy import (
    Candidate,
    ClassPolicy,
    DynamicProfile,
    Outcome,
    RetryPolicy,
    TurnEvidence,
    WaitForResetPolicy,
)

EXECUTION: Final = "exec-1"

OVERLOADED_BODY: Final = (
    '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
)
CREDITS_BODY: Final = (
    '{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance '
    "is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or "
    'purchase credits."}}'
)


def overloaded() -> Evidence:
    """provider_overloaded (transient), no timing hint."""
    return Evidence(kind="http", http_status=529, provider="anthropic", body=OVERLOADED_BODY)


def usage_limit(resets_at: datetime) -> Evidence:
    """quota_limited (hard) with a trusted reset at `resets_at`."""
    text = f"Claude AI usage limit reached|{int(resets_at.timestamp())}"
    return Evidence(kind="stderr", agent="claude-acp", text=text)


def out_of_credits() -> Evidence:
    """quota_limited (hard), no reset: exhausted credits."""
    return Evidence(kind="http", http_status=400, provider="anthropic", body=CREDITS_BODY)


def transport_lost() -> Evidence:
    """agent_transport_lost (transient): the agent process exited."""
    text = "SDK query error: Error: Claude Code process exited with code 1"
    return Evidence(kind="sdk_exception", text=text)


def unknown_error() -> Evidence:
    """Nothing in the catalogue matches: unclassified."""
    return Evidence(kind="stderr", text="frobnicator jammed while reticulating splines (E1742)")


def safe_turn(*, execution_id: str = EXECUTION, prompt_generation: int = 1) -> TurnEvidence:
    """A known, current turn with no output and no tool activity."""
    return TurnEvidence(
        execution_id=execution_id, prompt_generation=prompt_generation, output_observed=False,
        thoughts_observed=False, tool_call_started=False, tool_call_completed=False,
        partial_utility_result=False, ambiguous_delivery=False,
    )  # fmt: skip


def tool_turn() -> TurnEvidence:
    """A turn in which a tool call had started before the failure."""
    return safe_turn().model_copy(update={"tool_call_started": True})


def retries(max_retries: int, initial_s: int, then: Outcome) -> ClassPolicy:
    return ClassPolicy(
        retry=RetryPolicy(
            enabled=True, max_retries=max_retries, initial_interval_seconds=initial_s
        ),
        wait_for_reset=WaitForResetPolicy.disabled(),
        on_exhausted=then,
    )


def reset_wait(max_wait_s: int, then: Outcome, *, retry: RetryPolicy | None = None) -> ClassPolicy:
    return ClassPolicy(
        retry=retry or RetryPolicy.disabled(),
        wait_for_reset=WaitForResetPolicy(enabled=True, max_wait_seconds=max_wait_s),
        on_exhausted=then,
    )


def immediately(outcome: Outcome) -> ClassPolicy:
    return ClassPolicy.immediately(outcome)


def candidate(
    candidate_id: str,
    *,
    transient: ClassPolicy | None = None,
    hard: ClassPolicy | None = None,
    enabled: bool = True,
) -> Candidate:
    return Candidate(
        id=candidate_id, agent=f"{candidate_id}-acp", provider=candidate_id, enabled=enabled,
        transient=transient or immediately(Outcome.SKIP), hard=hard or immediately(Outcome.SKIP),
    )  # fmt: skip


def profile(*candidates: Candidate) -> DynamicProfile:
    return DynamicProfile(candidates=candidates)


def seed_profile() -> DynamicProfile:
    """The seed's profile: three transient retries from 5 s then skip; a hard reset wait
    of at most 5 min then stop; a second candidate to skip to."""
    return profile(
        candidate(
            "claude",
            transient=retries(3, 5, Outcome.SKIP),
            hard=reset_wait(300, Outcome.STOP),
        ),
        candidate("codex", transient=retries(2, 5, Outcome.STOP), hard=immediately(Outcome.STOP)),
    )


@dataclass
class MemoryRoutes:
    """`plan` over snapshots held in memory, the fences checked as the store checks them:
    the service's logic without Redis, for the unit tier. `profiles`: the stored
    profiles each command is planned with (as a round would have read them)."""

    clock: ManualClock
    settings: RouteSettings = field(default_factory=RouteSettings)
    profiles: ProfileBoard | None = None
    routes: dict[str, RouteSnapshot] = field(default_factory=dict)
    histories: dict[str, list[AttemptRecord]] = field(default_factory=dict)
    applied: list[Transition] = field(default_factory=list)

    def snapshot(self, route_id: str) -> RouteSnapshot:
        return self.routes.get(route_id) or RouteSnapshot.absent(route_id)

    def run(self, route_id: str, command: RouteCommand) -> RouteSnapshot:
        before = self.snapshot(route_id)
        context = RouteContext(self.clock.now(), self.settings, profiles=self.profiles)
        transition = plan(before, command, context)
        if transition is None:
            return before
        after = self._apply(before, transition)
        if after.state == "switching":
            return self.run(route_id, CompleteSwitch(after.generation))
        return after

    def _apply(self, before: RouteSnapshot, transition: Transition) -> RouteSnapshot:
        assert transition.expected_generation == before.generation
        assert before.state in transition.allowed_from
        assert transition.expected_ordinal in (None, before.attempt_ordinal)
        after = applied_snapshot(transition, self.clock.now())
        RouteSnapshot.model_validate(after.model_dump())  # what a read would accept
        self.routes[before.route_id] = after
        if transition.attempt is not None:
            self.histories.setdefault(before.route_id, []).append(transition.attempt)
        self.applied.append(transition)
        return after


@dataclass
class Session:
    """One orchestrator session driving a route through a RouteService, as a caller
    would: each report carries the generation it last saw."""

    service: RouteService
    clock: ManualClock
    route_id: str
    caller: str = "kanban"

    @property
    def invocation_id(self) -> str:
        return f"inv-{self.route_id}"

    async def start(self, chosen: RouteProfile | None = None) -> RouteSnapshot:
        return await self.service.start(
            self.route_id, chosen or seed_profile(), caller=self.caller,
            invocation_id=self.invocation_id,
        )  # fmt: skip

    async def fail(self, evidence: Evidence, turn: TurnEvidence | None = None) -> RouteSnapshot:
        generation = (await self.service.snapshot(self.route_id)).generation
        return await self.service.report_failure(
            self.route_id, generation, evidence, turn or safe_turn(), caller=self.caller,
            invocation_id=self.invocation_id,
        )  # fmt: skip

    async def fire(self) -> RouteSnapshot:
        """Advance the clock to the pending deadline and fire that attempt's timer."""
        pending = await self.service.snapshot(self.route_id)
        assert pending.deadline is not None, pending
        self.clock.set(pending.deadline)
        return await self.service.fire_due(
            AttemptFence(self.route_id, pending.generation, pending.attempt_ordinal)
        )

    async def decisions(self) -> list[str]:
        return [r.decision for r in await self.service.history(self.route_id)]
