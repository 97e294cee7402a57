"""Issue 15's provider fault scenarios: what the fake provider answers, which requests an
orchestrator sends, and what must hold afterwards (from the provider's own call record
and how each request ended).

Every scenario runs one route per request on [primary, fallback]; both candidates:
transient failures retry 2x from 1 s, trusted resets are waited for up to 60 s, then
skip; hard failures wait for a trusted reset, then skip. Each scenario has accounts of
its own, so its circuits are its own and all scenarios run at once on one runtime.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from policy import (
    Candidate,
    ClassPolicy,
    DynamicProfile,
    Outcome,
    RetryPolicy,
    WaitForResetPolicy,
)
from tests.actors.faults.fake_openai import (
    CONTEXT_TOO_LONG,
    OVERLOADED,
    RATE_LIMITED,
    RESET,
    SERVER_ERROR,
    Answer,
    Behaviour,
    Call,
    completion,
    error,
    quota_exceeded,
)
from tests.actors.faults.orchestrator import Served

PRIMARY: Final = "gpt-4o"
FALLBACK: Final = "gpt-4o-mini"
OUTAGE_S: Final = 60.0
OUTAGE_EVERY_S: Final = 4.0
OUTAGE_REQUESTS: Final = 24  # one every 4 s: 92 s of requests, 32 s past recovery
QUOTA_RESET_S: Final = 20
QUOTA_FROM_S: Final = 5.0  # after the run's first burst of starts, so "at once" means it


def class_policy(*, retries: int) -> ClassPolicy:
    retry = (
        RetryPolicy(enabled=True, max_retries=retries, initial_interval_seconds=1)
        if retries
        else RetryPolicy.disabled()
    )
    reset = WaitForResetPolicy(enabled=True, max_wait_seconds=60)
    return ClassPolicy(retry=retry, wait_for_reset=reset, on_exhausted=Outcome.SKIP)


def issue_profile(account: str, fallback_provider: str = "openai") -> DynamicProfile:
    def candidate(name: str, provider: str, model: str) -> Candidate:
        return Candidate(
            id=name,
            agent="openai-api",
            provider=provider,
            model=model,
            account=account,
            transient=class_policy(retries=2),
            hard=class_policy(retries=0),
        )

    return DynamicProfile(
        candidates=(
            candidate("primary", "openai", PRIMARY),
            candidate("fallback", fallback_provider, FALLBACK),
        )
    )


def first(answer: Answer, times: int = 1) -> Behaviour:
    return lambda call: answer if call.index < times else completion(call.model)


def always(answer: Answer) -> Behaviour:
    return lambda _call: answer


def until(seconds: float, answer: Answer) -> Behaviour:
    return lambda call: answer if call.at < seconds else completion(call.model)


def serving(call: Call) -> Answer:
    return completion(call.model)


@dataclass(frozen=True)
class Scenario:
    """Requests (seconds from the run's start, account, fallback provider) and what the
    provider answers each (account, model)."""

    name: str
    behaviours: dict[tuple[str, str], Behaviour]
    requests: tuple[tuple[float, str, str], ...]
    check: Callable[[Scenario, Sequence[Call], Sequence[Served]], dict[str, Any]]


def primary_calls(calls: Sequence[Call], account: str) -> list[float]:
    return [c.at for c in calls if c.account == account and c.model == PRIMARY]


def most_within(times: Sequence[float], span_s: float) -> int:
    """The most of `times` inside any window of `span_s` seconds."""
    ordered = sorted(times)
    return max(
        (sum(1 for t in ordered[i:] if t - start <= span_s) for i, start in enumerate(ordered)),
        default=0,
    )


def _once_retried(
    scenario: Scenario, calls: Sequence[Call], served: Sequence[Served]
) -> dict[str, Any]:
    times = primary_calls(calls, scenario.requests[0][1])
    gaps = [round(b - a, 2) for a, b in itertools.pairwise(times)]
    figures = {"primary_attempts": len(times), "gaps_s": gaps, "served_by": served[0].served_by}
    figures["ok"] = served[0].served_by == "primary" and len(times) == 2
    return figures


def _retry_after(
    scenario: Scenario, calls: Sequence[Call], served: Sequence[Served]
) -> dict[str, Any]:
    figures = _once_retried(scenario, calls, served)
    figures["ok"] = figures["ok"] and figures["gaps_s"][0] >= 2.0
    return figures


def _persistent(
    scenario: Scenario, calls: Sequence[Call], served: Sequence[Served]
) -> dict[str, Any]:
    times = primary_calls(calls, scenario.requests[0][1])
    one = served[0]
    waited = None if one.served_at is None else round(one.served_at - one.began_at, 2)
    most = most_within(times, 3.0)
    figures: dict[str, Any] = {
        "primary_attempts": len(times),
        "most_in_3s": most,
        "served_by": one.served_by,
        "served_after_s": waited,
    }
    figures["ok"] = (
        len(times) <= 6
        and most <= 4
        and one.served_by == "fallback"
        and waited is not None
        and waited <= 40
    )
    return figures


def _context(scenario: Scenario, calls: Sequence[Call], served: Sequence[Served]) -> dict[str, Any]:
    times = primary_calls(calls, scenario.requests[0][1])
    figures = {"primary_attempts": len(times), "served_by": served[0].served_by}
    figures["ok"] = len(times) == 1 and served[0].served_by == "fallback"
    return figures


def _outage(scenario: Scenario, calls: Sequence[Call], served: Sequence[Served]) -> dict[str, Any]:
    account = scenario.requests[0][1]
    times = primary_calls(calls, account)
    first_two_done = max((s.served_at or 0.0) for s in served[:2])
    while_down = [t for t in times if first_two_done < t < OUTAGE_S]
    back = [
        s.served_at
        for s in served
        if s.served_by == "primary" and s.served_at is not None and s.served_at >= OUTAGE_S
    ]
    first_back = min(back, default=None)
    figures = {
        "requests": len(served),
        "served": sum(1 for s in served if s.served_by is not None),
        "primary_attempts": len(times),
        "primary_attempts_while_open": len(while_down),
        "primary_serves_again_after_s": None
        if first_back is None
        else round(first_back - OUTAGE_S, 2),
        "served_after_s": [round((s.served_at or 1e9) - s.began_at, 1) for s in served],
    }
    figures["ok"] = (
        figures["served"] == len(served)
        and first_back is not None
        and first_back - OUTAGE_S <= 30
        and len(while_down) <= 1
    )
    return figures


def _accounts(
    scenario: Scenario, calls: Sequence[Call], served: Sequence[Served]
) -> dict[str, Any]:
    """Account a is out of quota for QUOTA_RESET_S (its answers say so with Retry-After):
    its routes park until the reset, and only the ones that started before its circuit
    opened are sent meanwhile; account b's routes are served at once."""
    by_account: dict[str, list[Served]] = {}
    for (_, account, _), one in zip(scenario.requests, served, strict=True):
        by_account.setdefault(account, []).append(one)
    limited, other = sorted(by_account)
    quick = [round((s.served_at or 1e9) - s.began_at, 2) for s in by_account[other]]
    refused = [c.at for c in calls if c.account == limited and c.answer == "429"]
    figures: dict[str, Any] = {
        f"{other}_served_after_s": quick,
        f"{limited}_served_at_s": [round(s.served_at or 1e9, 2) for s in by_account[limited]],
        f"{limited}_quota_answers": len(refused),
        f"{limited}_primary_attempts": len(primary_calls(calls, limited)),
    }
    figures["ok"] = (
        all(q < 2.0 for q in quick)  # at once
        and all(c.answer == "200" for c in calls if c.account == other)
        and all(
            (s.served_at or 1e9) >= QUOTA_FROM_S + QUOTA_RESET_S - 1 for s in by_account[limited]
        )
        and all(s.served_by is not None for s in served)
        and len(refused) <= 2
    )
    return figures


def scenarios() -> list[Scenario]:
    """Every scenario of issue 15's must-show, on accounts of their own."""

    def one(name: str, behaviour: Behaviour, check: Any) -> Scenario:
        account = f"acct-{name}"
        return Scenario(
            name,
            {(account, PRIMARY): behaviour, (account, FALLBACK): serving},
            ((0.0, account, "openai"),),
            check,
        )

    outages = []
    for fallback in ("openai", "deepseek"):
        account = f"acct-outage-{fallback}"
        requests = tuple((n * OUTAGE_EVERY_S, account, fallback) for n in range(OUTAGE_REQUESTS))
        outages.append(
            Scenario(
                f"outage_fallback_{fallback}",
                {(account, PRIMARY): until(OUTAGE_S, OVERLOADED), (account, FALLBACK): serving},
                requests,
                _outage,
            )
        )
    limited, other = "acct-quota-a", "acct-quota-b"
    accounts = Scenario(
        "two_accounts",
        {
            (limited, PRIMARY): until(
                QUOTA_FROM_S + QUOTA_RESET_S - 1, quota_exceeded(QUOTA_RESET_S)
            ),
            (limited, FALLBACK): serving,
            (other, PRIMARY): serving,
            (other, FALLBACK): serving,
        },
        tuple(
            (QUOTA_FROM_S + n * 0.5, limited if n % 2 == 0 else other, "openai") for n in range(6)
        ),
        _accounts,
    )
    hint = error(
        429,
        "Rate limit reached for requests",
        "requests",
        "rate_limit_exceeded",
        headers={"retry-after": "2"},
    )
    return [
        one("retry_after_2", first(hint), _retry_after),
        one("persistent_429", always(RATE_LIMITED), _persistent),
        one("persistent_503", always(OVERLOADED), _persistent),
        one("server_error_once", first(SERVER_ERROR), _once_retried),
        one("reset_once", first(RESET), _once_retried),
        one("context_length", always(CONTEXT_TOO_LONG), _context),
        accounts,
        *outages,
    ]
