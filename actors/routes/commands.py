"""What can happen to a route, as values: the commands a route's transition function takes.

A route's logic is a pure function `plan(snapshot, command, context) -> Transition | None`
(actors/routes/plan.py); the service (actors/engine/service.py) reads the snapshot,
plans, and applies the one Transition to Redis. `context` carries the time and the
settings, so the function never reads a clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from actors.keys import AttemptFence, valid_host_id
from actors.routes.circuit_board import CircuitBoard
from actors.routes.profile_board import ProfileBoard
from actors.routes.profiles import RouteProfile
from catalogue import Classification, Evidence
from policy import TurnEvidence

DAY_S: Final = 24 * 3600

Classifier = Callable[[Evidence, datetime], Classification]


@dataclass(frozen=True, slots=True)
class RouteSettings:
    """`host_id`: the route host whose index every written route joins. Utility routes
    expire `utility_ttl_s` after their last write (a waiting one only after its deadline);
    closed routes `closed_ttl_s` after closing. `thoughts_block_replay`: observed thoughts
    make a turn unsafe to repeat, like output (policy.assess_turn)."""

    host_id: str | None = None
    utility_ttl_s: int = DAY_S
    closed_ttl_s: int = 7 * DAY_S
    thoughts_block_replay: bool = True

    def __post_init__(self) -> None:
        if self.host_id is not None:
            valid_host_id(self.host_id)
        for name in ("utility_ttl_s", "closed_ttl_s"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a whole number of seconds >= 1, got {value!r}")


@dataclass(frozen=True, slots=True)
class RouteContext:
    """The moment a command is planned at (aware UTC) and the settings it runs with.
    `classifier` classifies a report's evidence at `now` (None: catalogue.classify); a
    batch passes one that classifies each distinct evidence once (actors/engine/batch.py).
    `circuits`: the circuits of the round's routes, read (and probe leases taken) before
    planning (actors/routes/circuit_board.py); None plans as if every circuit were closed.
    `profiles`: the stored profiles the round's routes follow, read before planning
    (actors/routes/stored_profiles.py); a route that follows one is never planned without."""

    now: datetime
    settings: RouteSettings = field(default_factory=RouteSettings)
    classifier: Classifier | None = None
    circuits: CircuitBoard | None = None
    profiles: ProfileBoard | None = None

    def __post_init__(self) -> None:
        if self.now.utcoffset() is None:
            raise ValueError(f"a route context needs an aware time, got {self.now!r}")


class ForAttempt:
    """A command about one scheduled attempt of its route (its `generation` and attempt
    `ordinal`)."""

    __slots__ = ()
    generation: int
    ordinal: int

    def fence(self, route_id: str) -> AttemptFence:
        """The attempt this command is about, on route `route_id`."""
        return AttemptFence(route_id, self.generation, self.ordinal)


@dataclass(frozen=True, slots=True)
class Start:
    """A new route on the profile's first enabled candidate, generation 1.
    `caller`: the name of what drives the route (any name of a route id's shape).
    `provider_session_id`: the agent's own session id, when it has one; `task_id`: the
    orchestrator's task the session belongs to (its transcript notices are the task's).
    `utility`: a utility invocation's route (ephemeral, unique invocation; the caller name
    "utility" implies it). `recovery_deadline`: an aware time no wait of the route
    outlives (actors/routes/deadline.py). `profile_id` instead of `profile` (None): the
    route follows that stored profile, deciding each time with its current version
    (actors/routes/stored_profiles.py); give one of the two."""

    profile: RouteProfile | None
    caller: str
    invocation_id: str
    provider_session_id: str | None = None
    request_id: str | None = None
    task_id: str | None = None
    utility: bool = False
    recovery_deadline: datetime | None = None
    profile_id: str | None = None


@dataclass(frozen=True, slots=True)
class ReportFailure:
    """A failed turn. `evidence` is classified with the context's time unless it is
    already a Classification; `turn` is what was observed of the turn (None: nothing was
    recorded, which is unsafe). `provider_session_id`: the agent's own session id the
    turn ran in, if the report knows it (None keeps the one recorded). `attempt`: the
    attempt ordinal the caller saw (None: the route's current one); a report about an
    earlier attempt is refused (StaleOrdinalError). `utility`: the report is a utility
    invocation's (the route becomes one, if it was not)."""

    expected_generation: int
    evidence: Evidence | Classification
    turn: TurnEvidence | None
    caller: str
    invocation_id: str
    provider_session_id: str | None = None
    attempt: int | None = None
    request_id: str | None = None
    utility: bool = False


@dataclass(frozen=True, slots=True)
class ReportSuccess:
    expected_generation: int
    request_id: str | None = None


@dataclass(frozen=True, slots=True)
class FireDue(ForAttempt):
    """A timer for the attempt (generation, ordinal): fires only if that attempt is still
    the one pending and its deadline has come; otherwise nothing happens."""

    generation: int
    ordinal: int


@dataclass(frozen=True, slots=True)
class ReleaseParked:
    """A circuit closed: the route, if still parked on `circuit` (whatever attempt it
    waits with when this is applied, under its lock), gets its wave slot `at` as its new
    deadline; otherwise nothing happens."""

    circuit: str
    at: datetime


@dataclass(frozen=True, slots=True)
class ProbeParked:
    """The circuit's probe is due and its owner chose this route to ask for the lease:
    if the route still waits parked on `circuit` (not yet released), its pending attempt
    is due now, as the probe when the round takes the lease for it, else it parks again;
    otherwise nothing happens. Sent by the circuit's owner (actors/hosting/circuit_host.py)
    so that one parked route wakes at the probe time, not all of them."""

    circuit: str


@dataclass(frozen=True, slots=True)
class RetryNow:
    expected_generation: int
    request_id: str | None = None


@dataclass(frozen=True, slots=True)
class SkipNow:
    expected_generation: int
    request_id: str | None = None


@dataclass(frozen=True, slots=True)
class CancelWait:
    expected_generation: int
    request_id: str | None = None


@dataclass(frozen=True, slots=True)
class StopRoute:
    expected_generation: int
    request_id: str | None = None


@dataclass(frozen=True, slots=True)
class Resume:
    expected_generation: int
    request_id: str | None = None


@dataclass(frozen=True, slots=True)
class StartFresh:
    """A new generation and cycle on the first eligible candidate; `profile` replaces the
    stored one when given (the route then follows no stored profile), `profile_id` makes
    the route follow that stored profile; `recovery_deadline` replaces the route's
    recovery deadline."""

    expected_generation: int
    profile: RouteProfile | None = None
    request_id: str | None = None
    recovery_deadline: datetime | None = None
    profile_id: str | None = None


@dataclass(frozen=True, slots=True)
class Close:
    expected_generation: int
    request_id: str | None = None


@dataclass(frozen=True, slots=True)
class CompleteSwitch:
    """The route now runs on the candidate a skip selected: switching -> active."""

    generation: int


@dataclass(frozen=True, slots=True)
class UpdateProfile:
    """A profile edit: stored for the next decision; a pending schedule keeps its own."""

    profile: RouteProfile


@dataclass(frozen=True, slots=True)
class SettleDispatch(ForAttempt):
    """A dispatch job's verdict on attempt (generation, ordinal): `action_required` with
    `reason` (an ambiguous outcome, a dispatcher that cannot be loaded). With
    `keep_probe_lease` an attempt that was its circuit's probe keeps the lease to its TTL:
    the probe may have reached the provider, so another one now could be a second at once."""

    generation: int
    ordinal: int
    reason: str
    keep_probe_lease: bool = False


@dataclass(frozen=True, slots=True)
class ReturnUnsent(ForAttempt):
    """The dispatcher sent nothing for attempt (generation, ordinal): the same attempt is
    delivered again later (actors/routes/dispatch_outcomes.py). `detail`: what the
    dispatcher said; `retry_after_s`: its hint of when to deliver again (None: none)."""

    generation: int
    ordinal: int
    detail: str
    retry_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class Quarantine:
    """Stored data of the route was found corrupt (actors/routes/quarantine.py): the route
    goes to `action_required` with `reason` (`corrupt: <key> <field>: ...`) and its
    schedule is cleared, fenced on `field` of the `where` hash ("route" or "schedule")
    still holding `stored`, the text found. `excerpt`: a sanitised excerpt of that text,
    for the route's history."""

    where: str
    field: str
    stored: str
    reason: str
    excerpt: str | None = None


def request_id_of(command: object) -> str | None:
    """The caller's request id a command carries (None: none, or not a caller command).
    A request seen again (the same id, e.g. Ray re-sending a batch to a restarted host)
    is applied once; the replay answers the first outcome's snapshot."""
    found = getattr(command, "request_id", None)
    return found if isinstance(found, str) else None


RouteCommand = (
    Start
    | ReportFailure
    | ReportSuccess
    | FireDue
    | ReleaseParked
    | ProbeParked
    | RetryNow
    | SkipNow
    | CancelWait
    | StopRoute
    | Resume
    | StartFresh
    | Close
    | CompleteSwitch
    | UpdateProfile
    | SettleDispatch
    | ReturnUnsent
    | Quarantine
)
