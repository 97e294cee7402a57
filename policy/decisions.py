"""Decisions are values: the shell matches on `Retry | WaitForReset | Skip | Stop`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Retry(BaseModel):
    """Retry the same candidate at `deadline`. `ordinal` counts the retries used for this
    candidate and class in the cycle once this one is scheduled (1 for the first)."""

    model_config = _FROZEN

    kind: Literal["retry"] = "retry"
    deadline: AwareDatetime
    ordinal: int = Field(ge=1)
    reason: str


class WaitForReset(BaseModel):
    """Wait for a trusted reset, then attempt the same candidate once. Neither the wait nor
    that attempt uses the retry budget."""

    model_config = _FROZEN

    kind: Literal["wait_for_reset"] = "wait_for_reset"
    deadline: AwareDatetime
    reason: str


class Skip(BaseModel):
    """Exclude the candidate for the rest of the cycle and evaluate the next one."""

    model_config = _FROZEN

    kind: Literal["skip"] = "skip"
    reason: str


class Stop(BaseModel):
    """Stop automatic recovery: the route needs a manual action."""

    model_config = _FROZEN

    kind: Literal["stop"] = "stop"
    reason: str


Decision = Retry | WaitForReset | Skip | Stop


def decision_json(decision: Decision, retry_ordinal: int) -> dict[str, Any]:
    """The docs/CONTRACTS.md line: `retry_ordinal` is the value after the decision (`retry_ordinal`
    is the count used before it)."""
    match decision:
        case Retry(deadline=deadline, ordinal=ordinal):
            return _line("retry", utc_iso(deadline), ordinal, decision.reason)
        case WaitForReset(deadline=deadline):
            return _line("wait_for_reset", utc_iso(deadline), retry_ordinal, decision.reason)
        case Skip():
            return _line("skip", None, retry_ordinal, decision.reason)
        case Stop():
            return _line("stop", None, retry_ordinal, decision.reason)


def _line(kind: str, deadline: str | None, ordinal: int, reason: str) -> dict[str, Any]:
    return {"decision": kind, "deadline": deadline, "retry_ordinal": ordinal, "reason": reason}


def utc_iso(moment: datetime) -> str:
    """ISO-8601 in UTC with a `Z`, as `recovery classify` prints times."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
