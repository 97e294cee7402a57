"""Failure evidence for the demo, drawn from the labelled development corpus.

Rows become Evidence exactly as the corpus is scored (catalogue.corpus.evidence_from_row),
then their timing hints are rewritten to a few seconds ahead so a fleet finishes within a
minute: relative hints ("try again in 9m38.016s", "retry after 20 seconds", Gemini's
`retryDelay`, reset headers) become "N seconds", and Claude's "usage limit reached|<epoch>"
gets an epoch N seconds after the moment of the report. The wording around a hint is
kept. A row is used only if its rewritten evidence still classifies to its label and,
when it carries a hint, one N seconds away (checked once, when the pool loads); a
clock-time reset such as "resets 5:20am (America/Denver)" cannot be moved that close and
is left out.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from importlib.resources.abc import Traversable
from typing import Any, Final

from actors.demo.errors import DemoError
from catalogue import Evidence, classify
from catalogue.corpus import accepted_codes, evidence_from_row

PROBE_HINT_S: Final = 3
HINT_TOLERANCE_S: Final = 1.5

_DURATION: Final = r"\d+(?:\.\d+)?\s*(?:days?|hours?|minutes?|mins?|seconds?|secs?|ms|h|m|s)"
_RELATIVE: Final = re.compile(
    rf"(?i)\b(try again in|retry after|retry in)\s+((?:{_DURATION}(?![a-z])[\s,]*)+)"
)
_EPOCH: Final = re.compile(r"(?i)(usage limit reached\|)\d{10,13}")
_RETRY_DELAY: Final = re.compile(r'(retryDelay\\*"\s*:\s*\\*")\d+(?:\.\d+)?s')
_RESET_HEADER: Final = re.compile(r"(?i)^(retry-after|x-rate-?limit-reset.*|.*ratelimit.*reset)$")


class FailureKind(StrEnum):
    """The corpus buckets the demo draws from (by the rows' labels)."""

    OVERLOADED = "overloaded"
    CAPACITY = "capacity"
    RATE_LIMIT = "rate_limit"
    QUOTA_RESET = "quota_reset"
    AUTH = "auth"
    MODEL = "model"
    NETWORK = "network"


_LABELS: Final = {
    "provider_overloaded": FailureKind.OVERLOADED,
    "provider_unavailable": FailureKind.OVERLOADED,
    "model_capacity": FailureKind.CAPACITY,
    "rate_limited": FailureKind.RATE_LIMIT,
    "quota_limited": FailureKind.QUOTA_RESET,
    "auth_required": FailureKind.AUTH,
    "missing_credentials": FailureKind.AUTH,
    "model_unavailable": FailureKind.MODEL,
    "network_unavailable": FailureKind.NETWORK,
}
# Buckets whose point is the hint: a row without one does not belong there.
_NEEDS_HINT: Final = frozenset({FailureKind.RATE_LIMIT, FailureKind.QUOTA_RESET})


def _relative(match: re.Match[str], seconds: int) -> str:
    trailing = match.group(2)[len(match.group(2).rstrip(" ,")) :]
    return f"{match.group(1)} {seconds} seconds{trailing}"


def rewrite_text(text: str, seconds: int, now: datetime) -> str:
    """`text` with every timing hint moved to `seconds` after `now`."""
    text = _RELATIVE.sub(lambda m: _relative(m, seconds), text)
    text = _EPOCH.sub(lambda m: f"{m.group(1)}{int(now.timestamp()) + seconds + 1}", text)
    return _RETRY_DELAY.sub(lambda m: f"{m.group(1)}{seconds}s", text)


def rewrite_headers(headers: Mapping[str, str], seconds: int) -> dict[str, str]:
    def value(name: str, old: str) -> str:
        if not _RESET_HEADER.match(name):
            return old
        return str(seconds * 1000) if name.lower().endswith("-ms") else str(seconds)

    return {name: value(name, old) for name, old in headers.items()}


@dataclass(frozen=True, slots=True)
class CorpusCase:
    """One corpus row the demo may report, and the bucket it is in."""

    row_id: str
    label: str
    kind: FailureKind
    row: Mapping[str, Any]

    def evidence(self, seconds: int, now: datetime) -> Evidence:
        """The row's Evidence with its hints `seconds` after `now`, observed at `now`."""
        base = evidence_from_row(self.row)
        changes: dict[str, Any] = {"observed_at": now}
        if base.text is not None:
            changes["text"] = rewrite_text(base.text, seconds, now)
        if isinstance(base.body, str):
            changes["body"] = rewrite_text(base.body, seconds, now)
        if base.headers:
            changes["headers"] = rewrite_headers(base.headers, seconds)
        return Evidence.model_validate({**base.model_dump(), **changes})


def _usable(case: CorpusCase, now: datetime) -> bool:
    result = classify(case.evidence(PROBE_HINT_S, now), now)
    if result.code not in accepted_codes(case.row):
        return False
    offsets = []
    if result.retry_after_s is not None:
        offsets.append(result.retry_after_s)
    if result.reset_at is not None:
        offsets.append((result.reset_at - now).total_seconds())
    if not offsets:
        return case.kind not in _NEEDS_HINT
    return all(abs(offset - PROBE_HINT_S) <= HINT_TOLERANCE_S for offset in offsets)


@dataclass(frozen=True, slots=True)
class CorpusPool:
    """Usable corpus cases by bucket, in row-id order (so a seeded draw is repeatable)."""

    cases: Mapping[FailureKind, tuple[CorpusCase, ...]]

    @classmethod
    def load(cls, path: Traversable, now: datetime) -> CorpusPool:
        if not path.is_file():
            raise DemoError(f"corpus not found: {path}")
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
        found: dict[FailureKind, list[CorpusCase]] = {kind: [] for kind in FailureKind}
        for row in sorted(rows, key=lambda r: str(r["id"])):
            kind = _LABELS.get(row["code"])
            if kind is None:
                continue
            case = CorpusCase(str(row["id"]), str(row["code"]), kind, row)
            if _usable(case, now):
                found[kind].append(case)
        empty = sorted(kind.value for kind, cases in found.items() if not cases)
        if empty:
            raise DemoError(f"no usable corpus rows for {', '.join(empty)} in {path}")
        return cls({kind: tuple(cases) for kind, cases in found.items()})

    def draw(self, kind: FailureKind, provider: str, rng: random.Random) -> CorpusCase:
        """A case of `kind`, from the candidate's provider when the corpus has one."""
        cases = self.cases[kind]
        own = [case for case in cases if evidence_from_row(case.row).provider == provider]
        return rng.choice(own or list(cases))
