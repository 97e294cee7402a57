"""What a route store reads and writes: snapshots, attempt records, schedules, events.

All of these cross a storage boundary (Redis) and later a process boundary (Ray), so they
are pydantic models, frozen, extra=forbid. Times are aware datetimes normalised to UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal, Self, get_args

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from actors.keys import AttemptFence, CallerName, HostId, ProfileId, RouteId, TaskId
from actors.routes.next_steps import STATE_NEXT_STEP, NextStep
from catalogue.codes import ErrorClass
from policy.cycle import CycleUsage

_FROZEN = ConfigDict(frozen=True, extra="forbid")

Document = Any
"""A JSON document a route carries (its profile, a policy snapshot): what the codec decoded
from its stored text or what a model dumped. The route models hold it as it is; its
content is validated by its own parser when it is used (actors/routes/profiles.py,
policy), so one bad document never makes the whole route unreadable."""

RouteState = Literal[
    "none",  # never written (or expired): generation 0
    "active",
    "retry_wait",
    "waiting_for_reset",
    "retrying",
    "switching",
    "action_required",
    "closed",  # terminal; expires after the configured retention
]
ROUTE_STATES: Final[tuple[RouteState, ...]] = get_args(RouteState)
WAITING_STATES: Final[frozenset[RouteState]] = frozenset({"retry_wait", "waiting_for_reset"})

UTILITY_CALLER: Final = "utility"
"""The caller name that implies the utility flag (the name the first orchestrator used)."""

PendingOutcome = Literal["retry", "retry_after_reset", "skip", "stop"]
"""What the route will do next without a new report: retry the same candidate at the
deadline, retry once after a trusted reset, move to the next candidate, or stop."""

AttemptDecision = Literal[
    # the policy's decisions (policy.Decision)
    "retry",
    "wait_for_reset",
    "skip",
    "stop",
    # the runtime's own steps and the manual actions (docs/CONTRACTS.md, Routes)
    "start",
    "deadline_reached",
    "success",
    "park",
    "retry_now",
    "skip_now",
    "cancel_wait",
    "resume",
    "start_fresh",
    "close",
    "quarantine",  # stored data found corrupt (actors/routes/quarantine.py)
    "not_dispatched",  # the dispatcher sent nothing: the same attempt is redelivered
]


def _to_utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)


UtcDatetime = Annotated[AwareDatetime, AfterValidator(_to_utc)]
Label = Annotated[str, StringConstraints(min_length=1, max_length=256)]
Text = Annotated[str, StringConstraints(min_length=1, max_length=4096)]
Token = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_.]{0,63}$")]
ResourceId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")]


class RetryUsage(BaseModel):
    model_config = _FROZEN

    candidate_id: Label
    error_class: ErrorClass
    used: int = Field(ge=0)


class ClassUse(BaseModel):
    model_config = _FROZEN

    candidate_id: Label
    error_class: ErrorClass


class CycleRecord(BaseModel):
    """policy.CycleUsage as stored with the route, so a restarted host resumes the cycle."""

    model_config = _FROZEN

    retries: tuple[RetryUsage, ...] = ()
    reset_waits: tuple[ClassUse, ...] = ()
    skipped: tuple[Label, ...] = ()

    @classmethod
    def from_usage(cls, usage: CycleUsage) -> Self:
        return cls(
            retries=tuple(
                RetryUsage(candidate_id=c, error_class=k, used=n)
                for (c, k), n in sorted(usage.retries.items())
            ),
            reset_waits=tuple(
                ClassUse(candidate_id=c, error_class=k) for c, k in sorted(usage.reset_waits)
            ),
            skipped=tuple(sorted(usage.skipped)),
        )

    def to_usage(self) -> CycleUsage:
        return CycleUsage(
            retries={(r.candidate_id, r.error_class): r.used for r in self.retries},
            reset_waits=frozenset((u.candidate_id, u.error_class) for u in self.reset_waits),
            skipped=frozenset(self.skipped),
        )


class RouteFields(BaseModel):
    """A route's durable state apart from its identity, generation and write time.

    `retry_ordinal` / `retry_max`: the policy's count of retries used for the current
    candidate and class in this cycle, and its budget ("retry 2 of 3"). `attempt_ordinal`:
    how many attempts (retries and post-reset attempts) were scheduled in this generation;
    it names the pending attempt (its timers are fenced on it, its dispatch is keyed by
    it) and is never reused within a generation, unlike the retry ordinal, which a reset
    wait keeps and a success restarts. `profile`: the profile the route runs with, read
    at each decision (so an edit affects the next decision); `policy_snapshot`: the one
    candidate policy the latest decision used. `provider_session_id`: the agent's own
    session id for the current candidate (from the latest start or report that named
    one), offered to the dispatcher for a provider-native resume; a switch to another
    candidate or a fresh start forgets it. `next_step`: what the caller does next, set by
    every transition. `caller`: the name of what drives the route, recorded, never
    consulted; `utility`: a utility invocation's route (ephemeral, refuses another
    invocation's reports). `recovery_deadline`: no wait outlives it
    (actors/routes/deadline.py). `redeliveries`: the NotDispatched answers for the
    pending attempt (actors/routes/dispatch_outcomes.py). `circuit`: the resource id of
    the circuit the route is parked on (waiting, reason `circuit_open`) or probes (retrying with
    `probe_token`, the owner token of the circuit's probe lease); every other step
    forgets both (actors/routes/circuit_board.py). `task_id`: the orchestrator's task
    the session (the route) belongs to, recorded at start and kept for the route's life:
    its transcript notices are written for that task, and the default authoriser of a
    cancel checks it. `profile_id`: the stored profile the route follows (None: it runs
    with its own); `profile_version`: that profile's version its latest decision used,
    whose copy `profile` then holds (actors/routes/stored_profiles.py).
    """

    model_config = _FROZEN

    state: RouteState
    candidate_id: Label | None = None
    candidate_index: int | None = Field(default=None, ge=0)
    code: Label | None = None
    error_class: ErrorClass | None = None
    rule: Label | None = None
    catalogue_version: Label | None = None
    retry_ordinal: int = Field(default=0, ge=0)
    retry_max: int = Field(default=0, ge=0)
    attempt_ordinal: int = Field(default=0, ge=0)
    deadline: UtcDatetime | None = None
    pending_outcome: PendingOutcome | None = None
    reason: Text | None = None
    next_step: NextStep | None = None
    caller: CallerName | None = None
    utility: bool = False
    invocation_id: Label | None = None
    provider_session_id: Label | None = None
    task_id: TaskId | None = None
    recovery_deadline: UtcDatetime | None = None
    redeliveries: int = Field(default=0, ge=0)
    circuit: ResourceId | None = None
    probe_token: Label | None = None
    policy_snapshot: Document = None
    cycle: CycleRecord = CycleRecord()
    profile: Document = None
    profile_id: ProfileId | None = None
    profile_version: int | None = Field(default=None, ge=1)


class RouteUpdate(RouteFields):
    """The state a transition writes. A deadline means a pending schedule, which only a
    waiting route has; the store writes or clears the schedule from it."""

    @model_validator(mode="after")
    def _coherent(self) -> Self:
        if self.state == "none":
            raise ValueError("a transition cannot write the state 'none'")
        if self.deadline is not None and self.state not in WAITING_STATES:
            raise ValueError(f"a deadline needs a waiting state, not {self.state!r}")
        return self


class RouteSnapshot(RouteFields):
    """The authoritative state of one route. A route never written has state "none" and
    generation 0."""

    route_id: RouteId
    generation: int = Field(ge=0)
    updated_at: UtcDatetime | None = None

    @model_validator(mode="before")
    @classmethod
    def _with_next_step(cls, values: Any) -> Any:
        """A route stored before `next_step` existed (or never written) gets the one its
        state implies."""
        if isinstance(values, dict) and values.get("next_step") is None:
            state = values.get("state")
            if state in STATE_NEXT_STEP:
                values = {**values, "next_step": STATE_NEXT_STEP[state]}
        return values

    @classmethod
    def absent(cls, route_id: str) -> Self:
        return cls(route_id=route_id, state="none", generation=0)

    @property
    def attempt(self) -> AttemptFence:
        """The route's latest scheduled attempt (ordinal 0: none yet in this generation)."""
        return AttemptFence(self.route_id, self.generation, self.attempt_ordinal)


def holds_attempt(snapshot: RouteSnapshot, fence: AttemptFence) -> bool:
    """Whether `fence` is the route's current attempt (same route, generation, ordinal).
    Compared field by field: a timer asks this on every fire, and builds nothing."""
    return (
        snapshot.attempt_ordinal == fence.ordinal
        and snapshot.generation == fence.generation
        and snapshot.route_id == fence.route_id
    )


def attempt_due(snapshot: RouteSnapshot, fence: AttemptFence, now: datetime) -> bool:
    """Whether the route still waits for exactly attempt `fence` and its deadline has
    come: what a timer, a backstop or a probe check asks before firing it."""
    return (
        snapshot.state in WAITING_STATES
        and holds_attempt(snapshot, fence)
        and snapshot.deadline is not None
        and snapshot.deadline <= now
    )


def attempt_retrying(snapshot: RouteSnapshot, fence: AttemptFence) -> bool:
    """Whether the route is `retrying` attempt `fence`: what a dispatch job asks before
    it dispatches the attempt or settles its outcome."""
    return snapshot.state == "retrying" and holds_attempt(snapshot, fence)


class AttemptRecord(BaseModel):
    """One entry of a route's append-only history: the decision and everything it was
    based on at that moment, including the policy snapshot and, for a route following a
    stored profile, that profile's id and the version the decision used."""

    model_config = _FROZEN

    generation: int = Field(ge=1)
    ordinal: int = Field(ge=0)
    candidate_id: Label | None = None
    code: Label | None = None
    error_class: ErrorClass | None = None
    rule: Label | None = None
    catalogue_version: Label | None = None
    policy_snapshot: Document = None
    profile_id: ProfileId | None = None
    profile_version: int | None = Field(default=None, ge=1)
    decision: AttemptDecision
    deadline: UtcDatetime | None = None
    reason: Text | None = None
    safe_excerpt: Text | None = None
    at: UtcDatetime


class ScheduleEntry(BaseModel):
    """A pending schedule as stored in its human-readable hash. `ordinal` is the route's
    attempt ordinal: (route, generation, ordinal) names the one attempt it will start."""

    model_config = _FROZEN

    route_id: RouteId
    generation: int = Field(ge=1)
    state: RouteState
    deadline: UtcDatetime
    candidate_id: Label | None = None
    code: Label | None = None
    error_class: ErrorClass | None = None
    ordinal: int = Field(ge=0)
    pending_outcome: PendingOutcome | None = None
    reason: Text | None = None

    @property
    def fence(self) -> AttemptFence:
        """The one attempt this schedule will start."""
        return AttemptFence(self.route_id, self.generation, self.ordinal)


class RouteEvent(BaseModel):
    """One transition as published on the events stream: what an Office or Kanban view
    shows (no policy document, no raw evidence)."""

    model_config = _FROZEN

    event_id: str
    event: Literal["route.transition"]
    route_id: RouteId
    cause: Token
    decision: AttemptDecision | None = None
    from_state: RouteState
    from_generation: int = Field(ge=0)
    state: RouteState
    generation: int = Field(ge=1)
    candidate_id: Label | None = None
    candidate_index: int | None = Field(default=None, ge=0)
    code: Label | None = None
    error_class: ErrorClass | None = None
    rule: Label | None = None
    catalogue_version: Label | None = None
    retry_ordinal: int = Field(ge=0)
    retry_max: int = Field(ge=0)
    attempt_ordinal: int = Field(default=0, ge=0)
    deadline: UtcDatetime | None = None
    pending_outcome: PendingOutcome | None = None
    reason: Text | None = None
    next_step: NextStep | None = None
    caller: CallerName | None = None
    invocation_id: Label | None = None
    profile_id: ProfileId | None = None
    profile_version: int | None = Field(default=None, ge=1)
    at: UtcDatetime


class StoredField(BaseModel):
    """A quarantine's fence (actors/routes/quarantine.py): `field` of the route's hash
    (`where` "route") or of its schedule hash ("schedule") still holds `text` (an absent
    field reads as ""). Corrupt data has no generation or state to trust, so this is what
    the write is fenced on."""

    model_config = _FROZEN

    where: Literal["route", "schedule"]
    field: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    text: str


class Transition(BaseModel):
    """One fenced step of a route: applied only if the route is at `expected_generation`
    and in one of `allowed_from`; then the route becomes `route`, `attempt` (if any) is
    appended to its history, its schedule is set (deadline) or cleared, and an event is
    published — all in one Lua script. With `expected_ordinal` the route's
    `attempt_ordinal` must equal it too: what a timer fences on, and what makes a
    read-then-write exact (generation and state alone come back unchanged once a retry
    has fired and failed again).

    The new generation is 1 for a route created from "none", else the expected one, plus
    one with `bump_generation` (a skip, a Start fresh, a restart). `host_id` adds the route
    to that host's index (and removes it once closed). `expire_after_s` makes the route and
    its history expire (utility routes, closed routes); without it they persist. A pending
    schedule never expires, so give a waiting route an expiry beyond its deadline.
    With `unchanged` (a quarantine) the fence is that stored field instead of the
    generation, state and ordinal, which may be what cannot be read.
    """

    model_config = _FROZEN

    route_id: RouteId
    expected_generation: int = Field(ge=0)
    allowed_from: frozenset[RouteState] = Field(min_length=1)
    cause: Token
    route: RouteUpdate
    bump_generation: bool = False
    expected_ordinal: int | None = Field(default=None, ge=0)
    attempt: AttemptRecord | None = None
    host_id: HostId | None = None
    expire_after_s: int | None = Field(default=None, gt=0)
    unchanged: StoredField | None = None

    @property
    def generation(self) -> int:
        """The generation once applied."""
        if self.expected_generation == 0:
            return 1
        return self.expected_generation + int(self.bump_generation)
