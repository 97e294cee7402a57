"""Properties: allowed edges only, open-until bounds, release plans are bounded permutations."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from catalogue import CODES
from circuits import (
    ALLOWED_EDGES,
    CircuitState,
    CircuitStatus,
    ProbeGrant,
    Severity,
    acquire_probe,
    plan_release,
    record_failure,
    record_probe_result,
    severity,
    trusted_reset,
)
from tests.circuits.builders import SETTINGS, T0, TTL, at, failure

CODE_NAMES = sorted(CODES)
ROUTE_IDS = st.sampled_from(["a", "b", "c", "d"])
MAX_OPEN = timedelta(seconds=SETTINGS.max_open_s)


@dataclass(frozen=True)
class Fail:
    code: str
    route: str
    reset_s: float | None


@dataclass(frozen=True)
class Acquire:
    caller: str


@dataclass(frozen=True)
class Report:
    use_latest_token: bool
    success: bool
    reset_s: float | None


RESETS = st.none() | st.floats(min_value=-100, max_value=40 * 86_400, allow_nan=False)
EVENTS = st.one_of(
    st.builds(Fail, st.sampled_from(CODE_NAMES), ROUTE_IDS, RESETS),
    st.builds(Acquire, ROUTE_IDS),
    st.builds(Report, st.booleans(), st.booleans(), RESETS),
)
STEPS = st.lists(st.tuples(st.floats(min_value=0, max_value=7200), EVENTS), max_size=40)


@settings(max_examples=300, deadline=None)
@given(STEPS)
def test_the_machine_only_moves_along_allowed_edges_and_bounds_open_until(
    steps: list[tuple[float, Fail | Acquire | Report]],
) -> None:
    state = CircuitState()
    now = T0
    tokens = ["0:nobody"]
    for advance, event in steps:
        now += timedelta(seconds=advance)
        before = state
        reset = None
        match event:
            case Fail(code, route, reset_s):
                reset = None if reset_s is None else now + timedelta(seconds=reset_s)
                state = record_failure(state, failure(code, reset_at=reset), route, now, SETTINGS)
            case Acquire(caller):
                state, result = acquire_probe(state, caller, now, TTL)
                if isinstance(result, ProbeGrant):
                    tokens.append(result.owner_token)
            case Report(latest, success, reset_s):
                token = tokens[-1] if latest else tokens[0]
                reset = None if reset_s is None else now + timedelta(seconds=reset_s)
                state = record_probe_result(state, token, success, now, SETTINGS, reset_at=reset)
        assert (before.status, state.status) in ALLOWED_EDGES
        assert CircuitState.model_validate_json(state.model_dump_json()) == state
        assert state.lease_epoch >= before.lease_epoch
        if state.open_until is not None and state.open_until != before.open_until:
            assert state.open_until <= now + MAX_OPEN
            assert state.open_until > now
        honours_reset = (
            isinstance(event, Fail) and severity(failure(event.code), now) is not Severity.IGNORED
        )
        if (
            honours_reset
            and state.status is CircuitStatus.OPEN
            and reset is not None
            and reset > now
        ):
            assert state.open_until is not None
            assert state.open_until >= min(reset, now + MAX_OPEN)


@settings(max_examples=200, deadline=None)
@given(
    code=st.sampled_from(["quota_limited", "auth_required", "rate_limited", "model_unavailable"]),
    reset_s=st.floats(min_value=0.001, max_value=60 * 86_400, allow_nan=False),
)
def test_open_until_is_never_before_a_trusted_reset_nor_beyond_the_cap(
    code: str, reset_s: float
) -> None:
    hint = failure(code, retry_after_s=reset_s)
    state = record_failure(CircuitState(), hint, "a", T0, SETTINGS)
    reset = trusted_reset(hint, T0)
    assert state.status is CircuitStatus.OPEN
    assert state.open_until is not None
    assert reset is not None
    assert min(reset, T0 + MAX_OPEN) <= state.open_until <= T0 + MAX_OPEN
    jitter = SETTINGS.reset_jitter_span_s(reset_s)
    assert state.open_until <= reset + timedelta(seconds=jitter)  # the hint, not a backoff


@settings(max_examples=200, deadline=None)
@given(
    routes=st.lists(st.text(min_size=1, max_size=6), max_size=300),
    seed=st.integers(min_value=0, max_value=2**32),
    fraction=st.floats(min_value=0.01, max_value=1.0),
)
def test_release_plans_are_permutations_with_bounded_waves(
    routes: list[str], seed: int, fraction: float
) -> None:
    plan = plan_release(routes, T0, seed=seed, wave_fraction=fraction)
    unique = list(dict.fromkeys(routes))
    assert sorted(slot.route_id for slot in plan.slots) == sorted(unique)
    assert plan.budget == max(1, int(len(unique) * fraction + 1e-9))
    assert all(0 < len(wave) <= plan.budget for wave in plan.waves)
    wave_s = 1.1  # one interval plus the 10 % headroom
    for index, wave in enumerate(plan.waves):
        assert all(
            at(index * wave_s - 1e-6) <= slot.release_at < at((index + 1) * wave_s) for slot in wave
        )
        times = [slot.release_at for slot in wave]
        assert times == sorted(times)
    # any window of one second, aligned on a release or not, closed: within the budget
    releases = sorted(slot.release_at for slot in plan.slots)
    for first, begin in enumerate(releases):
        within = sum(1 for t in releases[first:] if t <= begin + timedelta(seconds=1))
        assert within <= plan.budget
