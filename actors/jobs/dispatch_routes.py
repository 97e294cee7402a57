"""The route transitions a dispatch job writes, synchronously (redis-py, as rq is).

A dispatch job settles its attempt (route, generation, attempt ordinal) in one of two
ways, each planned from the route it read and fenced exactly on it (generation, state
`retrying` and attempt ordinal), so a job for an attempt the route has left writes
nothing:

- `require_action`: the outcome is ambiguous (the dispatcher raised, or its worker died
  inside it), or the dispatcher cannot even be loaded (a configuration error would only
  repeat): the route goes to `action_required` with a reason.
- `reevaluate_not_dispatched`: the dispatcher raised `NotDispatched`, so nothing was
  sent, and the attempt goes back to the policy (docs/CONTRACTS.md, Routes) as a failure
  reported before any partial result — a turn with no output, no thoughts, no tool
  call, delivery known not to have happened: effect-safe. It goes through the same
  planner a report does (`plan` with a ReportFailure, i.e. `failure_transition`), so
  the policy decides: retry again (the next retry ordinal and attempt ordinal, with its
  deadline: the budget runs out and `on_exhausted` applies, so it cannot loop), wait for
  a reset, skip to the next candidate (then the switch completes to `active`, as
  RouteService does), or stop.

  The failure re-evaluated is the one the route is recovering from: the code, class,
  rule and catalogue version its snapshot stores, not a new classification of the
  NotDispatched. Why: NotDispatched is not a provider failure (no code in the registry
  describes it; as evidence it would be `unclassified` and stop every route), and the
  retry budget, reset-wait usage and `on_exhausted` the policy applies are those of the
  failure being recovered from. Its detail is kept as the history record's safe excerpt
  (sanitised) and in the dispatch ledger; the transition's cause is `not_dispatched`.
  The stored failure has no confidence, scope or timing hint: confidence is `high` (the
  policy acted on it, so it was not low; policy treats medium alike), the scope is the
  code's registry scope, and there is no hint (a trusted reset is waited once per class
  and cycle, and was already).

With circuits (the installation's CircuitBinding), the re-evaluation plans as a host
round does (`dispatch_board`): the circuits of the route's candidate and of every
candidate a skip could choose, read in one pipeline, so a retry parks on an open circuit
within its policy and a skip passes over open candidates (actors/routes/eligibility.py).
The failure is not counted again (it was when it was reported), and a probe that was
not sent gives no verdict: its lease is abandoned before the board is read
(`abandon_unsent_probe`), so the route, if it waits, parks until it can probe again. A
route left parked joins the circuit's parked set (circuit_park.lua).

The new schedule, if the policy waits, is written in Redis with the transition (the
schedule hash and sorted set) and published on the events stream with cause
`not_dispatched`; the host's in-process timer does not know it, so the durable backstop
(or a host watching the events stream) must fire it.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any, Final

from redis import Redis
from redis.exceptions import RedisError

from actors.errors import RecoveryError, StoreUnavailableError, TransitionRejectedError
from actors.keys import AttemptFence, KeySpace
from actors.routes.circuit_board import CircuitBinding, CircuitBoard, candidate_key, covering
from actors.routes.commands import CompleteSwitch, ReportFailure, RouteContext
from actors.routes.eligibility import candidate_resources
from actors.routes.models import RouteSnapshot, Transition, attempt_retrying
from actors.routes.plan import plan
from actors.routes.profiles import profile_from_json
from actors.routes.steps import WAITING, step, updated
from actors.store import sync_reads
from actors.store.circuit_sync import abandon_probe, park, read_views
from actors.store.route_codec import transition_request, transition_result
from actors.store.route_store import DEFAULT_EVENTS_MAXLEN
from actors.store.scripts import script
from catalogue import Classification, Confidence, code_info, sanitize
from catalogue.codes import UnknownCodeError
from circuits import ResourceKey
from policy import TurnEvidence

REASON_NOT_DISPATCHED: Final = "dispatcher reported not dispatched"
REASON_NOTHING_TO_REEVALUATE: Final = (
    "dispatcher reported not dispatched; the route stores no failure to re-evaluate"
)
CAUSE_NOT_DISPATCHED: Final = "not_dispatched"

log = logging.getLogger(__name__)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _now() -> datetime:
    return datetime.now(UTC)


def read_route(connection: Redis, keys: KeySpace, route_id: str) -> RouteSnapshot:
    try:
        return sync_reads.read_route(connection, keys, route_id)
    except RedisError as error:
        raise StoreUnavailableError("dispatch snapshot", f"{type(error).__name__}") from error


def apply_transition(
    connection: Redis, keys: KeySpace, transition: Transition, at: datetime
) -> RouteSnapshot | None:
    """Apply one transition with transition.lua: the snapshot it wrote, or None when the
    fence refused it (another writer moved the route first). A Redis failure raises
    StoreUnavailableError."""
    route_id = transition.route_id
    route_keys = [
        keys.route(route_id), keys.attempts(route_id), keys.schedule(route_id), keys.schedules,
        keys.events,
    ]  # fmt: skip
    if transition.host_id is not None:
        route_keys.append(keys.host_routes(transition.host_id))
    argv = transition_request(transition, at, DEFAULT_EVENTS_MAXLEN)
    transition_script = connection.register_script(script("transition").source)
    try:
        reply = transition_script(keys=route_keys, args=argv)
    except RedisError as error:
        raise StoreUnavailableError("dispatch transition", type(error).__name__) from error
    texts = [_text(v) if isinstance(v, bytes) else v for v in reply]
    result = transition_result(transition, texts, at)
    if isinstance(result, TransitionRejectedError):
        return None
    return result


def require_action(
    connection: Redis,
    keys: KeySpace,
    fence: AttemptFence,
    *,
    reason: str,
    now: datetime | None = None,
) -> RouteSnapshot | None:
    """Move the route to `action_required` with `reason` if it is still retrying attempt
    `fence`; fenced on what was read. The applied snapshot, else None."""
    snapshot = read_route(connection, keys, fence.route_id)
    if not attempt_retrying(snapshot, fence):
        return None
    at = (now or _now()).astimezone(UTC)
    route = updated(snapshot, state="action_required", pending_outcome="stop", reason=reason)
    transition = step(snapshot, RouteContext(at), cause="dispatch", route=route, decision="stop")
    return apply_transition(connection, keys, transition, at)


def reevaluate_not_dispatched(
    connection: Redis,
    keys: KeySpace,
    fence: AttemptFence,
    *,
    detail: str,
    now: datetime | None = None,
    binding: CircuitBinding | None = None,
) -> RouteSnapshot | None:
    """Give attempt `fence`, which the dispatcher did not send, back to the
    policy if the route is still retrying it (module docstring). The snapshot written
    (after a skip, the route active on its next candidate), else None. With `binding`, it
    plans with the circuits (dispatch_board) as a host does."""
    snapshot = read_route(connection, keys, fence.route_id)
    if not attempt_retrying(snapshot, fence):
        return None
    at = (now or _now()).astimezone(UTC)
    report = not_dispatched_report(snapshot, detail, at)
    if report is None:
        return require_action(connection, keys, fence, reason=REASON_NOTHING_TO_REEVALUATE, now=at)
    board = None if binding is None else dispatch_board(connection, keys, snapshot, binding)
    context = RouteContext(at, circuits=board)
    # the probe, if this attempt was one, ended unsent (abandon_unsent_probe): no verdict
    planned = plan(snapshot.model_copy(update={"probe_token": None}), report, context)
    if planned is None:  # a failure report always plans a transition; kept for the type
        return None
    transition = planned.model_copy(update={"cause": CAUSE_NOT_DISPATCHED})
    applied = apply_transition(connection, keys, transition, at)
    if applied is not None and applied.state in WAITING and applied.circuit is not None:
        _park(connection, keys, applied, at)
    if applied is None or applied.state != "switching":
        return applied
    return _complete_switch(connection, keys, applied, context)


def dispatch_board(
    connection: Redis, keys: KeySpace, snapshot: RouteSnapshot, binding: CircuitBinding
) -> CircuitBoard | None:
    """The circuits a re-evaluation plans with, read in one pipeline as a host round reads
    them: the route's candidate's and every candidate a skip could choose. Its failure
    was counted when it was reported, so the board folds none in again. None (plan as if
    every circuit were closed) when they cannot be read: the re-evaluation must not fail
    for a circuit read."""
    wanted: dict[str, ResourceKey] = {}
    key = candidate_key(snapshot, binding)
    if key is not None:
        wanted.update(covering(key))
    try:
        profile = profile_from_json(snapshot.route_id, snapshot.profile)
        wanted.update(candidate_resources(binding, profile, snapshot.cycle.skipped))
        views = read_views(connection, keys, list(wanted.values()))
    except RecoveryError as error:
        log.warning("circuits of route %s not read: %s", snapshot.route_id, error)
        return None
    return CircuitBoard(binding, views, counts_failures=False)


def abandon_unsent_probe(
    connection: Redis, keys: KeySpace, snapshot: RouteSnapshot, at: datetime
) -> None:
    """The attempt held its circuit's probe lease and was not sent: end the lease now so
    the next caller can probe (else it would wait out the TTL with no probe running)."""
    if snapshot.probe_token is None or snapshot.circuit is None:
        return
    try:
        abandon_probe(connection, keys, snapshot.circuit, snapshot.probe_token, at)
    except RecoveryError as error:  # the lease still ends at its TTL
        log.warning("probe lease of route %s not abandoned: %s", snapshot.route_id, error)


def _park(connection: Redis, keys: KeySpace, route: RouteSnapshot, at: datetime) -> None:
    """Join the parked set of the circuit the route now waits on, so a close releases it
    in a wave (a missing entry is covered by the hashed slot at its deadline)."""
    assert route.circuit is not None  # checked by the caller
    try:
        park(connection, keys, route.circuit, route.route_id, at)
    except RecoveryError as error:
        log.warning("route %s not parked on its circuit: %s", route.route_id, error)


def not_dispatched_report(
    snapshot: RouteSnapshot, detail: str, at: datetime
) -> ReportFailure | None:
    """The route's stored failure reported again, as of a turn that never started; None
    when the route stores no complete failure (or one the registry no longer knows)."""
    stored = (snapshot.code, snapshot.error_class, snapshot.rule, snapshot.catalogue_version)
    code, error_class, rule, version = stored
    if code is None or error_class is None or rule is None or version is None:
        return None
    if snapshot.caller is None or snapshot.invocation_id is None:
        return None
    try:
        scope = code_info(code).scope
    except UnknownCodeError:
        return None
    failure = Classification(
        code=code, error_class=error_class, confidence=Confidence.HIGH, scope=scope, rule=rule,
        catalogue_version=version, occurred_at=at,
        safe_excerpt=sanitize(f"{REASON_NOT_DISPATCHED}: {detail}"),
    )  # fmt: skip
    return ReportFailure(
        snapshot.generation, failure, unsent_turn(snapshot), snapshot.caller,
        snapshot.invocation_id,
    )  # fmt: skip


def unsent_turn(snapshot: RouteSnapshot) -> TurnEvidence:
    """What was observed of an attempt the dispatcher never sent: nothing at all."""
    return TurnEvidence(
        execution_id=f"{snapshot.route_id}:{snapshot.generation}:{snapshot.attempt_ordinal}",
        prompt_generation=snapshot.attempt_ordinal, output_observed=False,
        thoughts_observed=False, tool_call_started=False, tool_call_completed=False,
        partial_utility_result=False, ambiguous_delivery=False,
    )  # fmt: skip


def _complete_switch(
    connection: Redis, keys: KeySpace, switching: RouteSnapshot, context: RouteContext
) -> RouteSnapshot:
    """The skip is durable; the route now runs on its next candidate (as RouteService
    completes a switch). If another writer moved it first, the route as it is."""
    transition = plan(switching, CompleteSwitch(switching.generation), context)
    if transition is None:
        return switching
    applied = apply_transition(connection, keys, transition, context.now)
    return applied or read_route(connection, keys, switching.route_id)
