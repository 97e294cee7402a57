"""Invariants over arbitrary and adversarial input (docs/DESIGN.md §5)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalogue import Evidence, EvidenceKind, classify, default_catalogue
from catalogue.sanitize import MAX_EXCERPT_BYTES

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
# Only catastrophic backtracking breaks this; typical inputs take microseconds.
CATASTROPHE_BOUND_S = 5.0

KINDS = st.sampled_from(list(EvidenceKind))
STATUSES = st.none() | st.integers(min_value=100, max_value=599)
# Words the rules look for, so generated text actually reaches the rule patterns.
RULE_WORDS = sorted({key for rule in default_catalogue().rules for key in rule.keys})
TEXTY = st.lists(st.sampled_from(RULE_WORDS) | st.text(max_size=12), max_size=40).map(" ".join)


def _check(result_code: str, excerpt: str) -> None:
    assert result_code
    assert len(excerpt.encode("utf-8")) <= MAX_EXCERPT_BYTES


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=2000) | TEXTY, kind=KINDS, status=STATUSES)
def test_arbitrary_text_never_raises(text: str, kind: EvidenceKind, status: int | None) -> None:
    result = classify(Evidence(kind=kind, text=text, http_status=status), NOW)
    _check(result.code, result.safe_excerpt)


@settings(max_examples=200, deadline=None)
@given(raw=st.binary(max_size=4096), kind=KINDS)
def test_arbitrary_bytes_decoded_with_replacement_never_raise(
    raw: bytes, kind: EvidenceKind
) -> None:
    text = raw.decode("utf-8", errors="replace")
    result = classify(Evidence(kind=kind, text=text, body=text), NOW)
    _check(result.code, result.safe_excerpt)


ADVERSARIAL_UNITS = [
    "a", " ", "\n", "9", "rate limit ", "try again in 1 day ", "resets ", "|", "sk-", "a@",
    "/home/", "Bearer ", "api error: 5", "{\"error\":", "\\\"", "error: ", "overloaded ",
    "stream disconnected before completion: ", "dial tcp ", "exceeds the context ",
    "model `", "x-ratelimit-", "…", "é", "\u200b", "⎿ ",
]  # fmt: skip


@pytest.mark.parametrize("unit", ADVERSARIAL_UNITS)
def test_adversarial_repetitions_up_to_a_mebibyte_finish_quickly(unit: str) -> None:
    text = unit * (1024 * 1024 // len(unit.encode("utf-8")))
    for kind in (EvidenceKind.STDERR, EvidenceKind.MESSAGE_CHUNK, EvidenceKind.HTTP):
        started = time.perf_counter()
        result = classify(Evidence(kind=kind, text=text, http_status=429), NOW)
        assert time.perf_counter() - started < CATASTROPHE_BOUND_S, (unit, kind)
        _check(result.code, result.safe_excerpt)


CANARIES = st.sampled_from(
    [
        "sk-ant-api03-{s}",
        "sk-proj-{s}",
        "AKIA{u}",
        "ghp_{s}",
        "AIza{s}",
        "gsk_{s}",
        "Authorization: Bearer {s}",
        "password={s}",
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    template=CANARIES,
    secret=st.text(
        alphabet="abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789",
        min_size=36,
        max_size=40,
    ),
    before=st.sampled_from(["", "API Error: 401 ", "invalid x-api-key: ", "x" * 4090]),
    after=st.sampled_from(["", " (request id req_011CX)", " overloaded_error"]),
)
def test_seeded_secret_canaries_never_reach_the_excerpt(
    template: str, secret: str, before: str, after: str
) -> None:
    upper = "".join(c for c in secret.upper() if c.isalnum())[:16].ljust(16, "Q")
    planted = template.format(s=secret, u=upper)
    result = classify(Evidence(kind=EvidenceKind.STDERR, text=before + planted + after), NOW)
    body = secret if "{s}" in template else upper
    windows = {body[i : i + 12] for i in range(len(body) - 11)}
    assert not any(w in result.safe_excerpt for w in windows), result.safe_excerpt
