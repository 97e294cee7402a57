"""A circuit's stored failure marks: written and read back as they were, and a mark that
was corrupted in Redis refused with the field it breaks named."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from actors.errors import CorruptCircuitError
from actors.store.circuit_codec import circuit_fields, decode_state
from circuits import CircuitState, FailureMark, ResourceKey

NOW = datetime(2026, 12, 8, 1, 0, tzinfo=UTC)
RESOURCE = ResourceKey(
    provider="anthropic", model="claude-sonnet-4", credential_fingerprint="f" * 64
)
PARIS = timezone(timedelta(hours=1))


def stored(state: CircuitState) -> dict[str, str]:
    flat = circuit_fields(RESOURCE, state, NOW)
    return dict(zip(flat[::2], flat[1::2], strict=True))


def marks_field(marks: list[object]) -> dict[str, str]:
    raw = stored(CircuitState())
    raw["recent_failures"] = json.dumps(marks)
    return raw


GOOD = {"at": "2026-12-08T00:59:00Z", "route_id": "r1", "code": "provider_overloaded"}


def test_marks_are_read_back_as_written_in_utc() -> None:
    marks = (
        FailureMark(at=NOW.astimezone(PARIS), route_id="r1", code="provider_overloaded",
                    reset_at=(NOW + timedelta(minutes=5)).astimezone(PARIS), model="m1",
                    opens=True, min_models=2),
        FailureMark(at=NOW, route_id="r2", code="rate_limited"),
    )  # fmt: skip
    state = CircuitState(recent_failures=marks)
    raw = stored(state)
    assert json.loads(raw["recent_failures"])[0]["at"] == "2026-12-08T01:00:00Z"
    read = decode_state(RESOURCE.resource_id, raw)
    assert read == state
    assert read.recent_failures[0].reset_at == NOW + timedelta(minutes=5)
    assert read.recent_failures[0].at.tzinfo is UTC


@pytest.mark.parametrize(
    ("marks", "field"),
    [
        ([{**GOOD, "route_id": ""}], "route_id"),
        ([{**GOOD, "at": "2026-12-08T00:59:00"}], "at"),  # no zone
        ([{**GOOD, "at": "yesterday"}], "at"),
        ([{**GOOD, "min_models": 0}], "min_models"),
        ([{**GOOD, "surplus": 1}], "surplus"),
        ([{"at": GOOD["at"], "code": "x"}], "route_id"),
        ({"0": GOOD}, "tuple"),
        (["not a mark"], "FailureMark"),
    ],
)
def test_a_corrupt_mark_is_refused_naming_the_field(marks: object, field: str) -> None:
    with pytest.raises(CorruptCircuitError, match=field):
        decode_state(RESOURCE.resource_id, marks_field(marks))  # type: ignore[arg-type]


def test_a_mark_made_in_code_is_checked_too() -> None:
    with pytest.raises(ValueError, match="route_id"):
        FailureMark(at=NOW, route_id="", code="rate_limited")
    with pytest.raises(ValueError, match="min_models 0"):
        FailureMark(at=NOW, route_id="r", code="rate_limited", min_models=0)
    mark = FailureMark(at=NOW.astimezone(PARIS), route_id="r", code="rate_limited")
    assert mark.at.tzinfo is UTC
    assert mark == FailureMark(at=NOW, route_id="r", code="rate_limited")
