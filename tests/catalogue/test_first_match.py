"""The hot path (`Catalogue.classify`: candidates taken off the prefilter's bits, stopping at
the first decisive rule, the status a text states read only once a rule that asks for a
status is reached) gives the classification `explain` gives, which reads the status first
and tries every candidate."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from catalogue import Evidence, EvidenceKind, default_catalogue
from catalogue.corpus import dev_corpus, evidence_from_row
from tests.catalogue.fixture_data import load_fixtures

CATALOGUE = default_catalogue()
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
KEYS = sorted({key for rule in CATALOGUE.rules for key in rule.keys})
# What states a status in prose, and numbers that are one or are inside longer ones.
STATUS_PIECES = [
    "status code ", "api error: ", "http ", "error: ", "[", "(", "code: ", "status: ",
    "400", "401", "403", "404", "429", "500", "502", "503", "529", "4290", "1.503", "503,5",
    " too many requests", " service unavailable", " not found", " overloaded", "\n",
]  # fmt: skip
# Headers that rules ask for (a keyless status rule can hold only with them).
HEADERS = [
    {},
    {"anthropic-ratelimit-unified-status": "rejected"},
    {"anthropic-ratelimit-unified-overage-disabled-reason": "out_of_credits"},
    {"x-codex-primary-used-percent": "100"},
]


def _agree(evidence: Evidence) -> None:
    classified = CATALOGUE.classify(evidence, NOW)
    explained = CATALOGUE.explain(evidence, NOW).classification
    assert classified == explained, evidence


def test_classify_agrees_with_explain_on_every_corpus_row() -> None:
    for line in dev_corpus().read_text(encoding="utf-8").splitlines():
        _agree(evidence_from_row(json.loads(line)))


def test_classify_agrees_with_explain_on_every_fixture() -> None:
    for fixture in load_fixtures():
        _agree(fixture.evidence)


def test_a_status_stated_in_the_text_still_decides_when_no_keyed_rule_holds() -> None:
    result = CATALOGUE.classify(Evidence(kind=EvidenceKind.STDERR, text="HTTP 529"), NOW)
    assert result.rule == "http.status.529.v1"


def test_a_status_inside_a_longer_number_decides_nothing() -> None:
    result = CATALOGUE.classify(Evidence(kind=EvidenceKind.STDERR, text="HTTP 5290"), NOW)
    assert result.rule == "catalogue.no_match.v1"


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.one_of(st.sampled_from(KEYS), st.sampled_from(STATUS_PIECES)), max_size=12),
    st.sampled_from(list(EvidenceKind)),
    st.sampled_from([None, 429, 503]),
    st.sampled_from(HEADERS),
)
def test_classify_agrees_with_explain_on_status_and_keyword_mixtures(
    pieces: list[str],
    kind: EvidenceKind,
    status: int | None,
    headers: dict[str, str],
) -> None:
    text = " ".join(pieces)
    _agree(Evidence(kind=kind, text=text, http_status=status, headers=headers, exit_code=1))
