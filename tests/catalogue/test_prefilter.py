"""The prefilter never drops a rule that would hold: the rules that hold among its
candidates are exactly those that hold among every keyed rule, in the same order."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from catalogue import Evidence, EvidenceKind, default_catalogue
from catalogue.classifier import Catalogue
from catalogue.corpus import dev_corpus, evidence_from_row
from catalogue.matching import Subject, holds
from catalogue.prefilter import Prefilter, gate_of
from catalogue.rules import Rule, parse_rule
from tests.catalogue.fixture_data import load_fixtures

CATALOGUE = default_catalogue()
KEYS = sorted({key for rule in CATALOGUE.rules for key in rule.keys})
WORDS = sorted(
    {w.decode() for gate in map(gate_of, CATALOGUE.rules) for ws in gate or () for w in ws}
)
GLUE = [" ", "_", "-", ".", ": ", "\n  ", "'", '"', "{", "}", "429", "503"]


def exhaustive(catalogue: Catalogue, subject: Subject) -> list[Rule]:
    """Every rule the old index reached (a key among the tokens, or a keyless rule by
    status or exit code) that holds, in rank order."""
    tokens, evidence = subject.views.tokens, subject.evidence
    out = []
    for rule in catalogue.rules:
        if rule.keys:
            reached = not rule.key_bytes.isdisjoint(tokens)
        else:
            reached = subject.status in rule.status or evidence.exit_code in rule.exit_codes
        if reached and holds(rule, subject):
            out.append(rule)
    return out


def prefiltered(catalogue: Catalogue, subject: Subject) -> list[Rule]:
    return [rule for rule in catalogue._candidates(subject) if holds(rule, subject)]


def _agree(evidence: Evidence) -> None:
    subject = CATALOGUE.subject_of(evidence)
    if subject is not None:
        assert prefiltered(CATALOGUE, subject) == exhaustive(CATALOGUE, subject)


def test_prefiltered_matching_agrees_with_exhaustive_matching_on_the_corpus() -> None:
    for line in dev_corpus().read_text(encoding="utf-8").splitlines():
        _agree(evidence_from_row(json.loads(line)))


def test_prefiltered_matching_agrees_with_exhaustive_matching_on_every_fixture() -> None:
    for fixture in load_fixtures():
        _agree(fixture.evidence)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.one_of(st.sampled_from(KEYS), st.sampled_from(WORDS), st.sampled_from(GLUE))),
    st.sampled_from([None, 400, 401, 429, 500, 503, 529]),
    st.sampled_from(list(EvidenceKind)),
)
def test_prefiltered_matching_agrees_with_exhaustive_matching_on_keyword_mixtures(
    pieces: list[str], status: int | None, kind: EvidenceKind
) -> None:
    text = " ".join(pieces)
    http_status = status if kind in (EvidenceKind.HTTP, EvidenceKind.SDK_EXCEPTION) else None
    _agree(Evidence(kind=kind, text=text, http_status=http_status, exit_code=1))


def test_candidates_come_in_rank_order_and_only_keyed_or_indexed_rules() -> None:
    evidence = Evidence(kind=EvidenceKind.HTTP, http_status=529, body="overloaded_error api")
    subject = CATALOGUE.subject_of(evidence)
    assert subject is not None
    candidates = list(CATALOGUE._candidates(subject))
    ranks = [CATALOGUE.rules.index(rule) for rule in candidates]
    assert ranks == sorted(ranks)
    assert all(
        not rule.key_bytes.isdisjoint(subject.views.tokens) or 529 in rule.status
        for rule in candidates
    )


def _rule(number: int, word: str) -> Rule:
    raw = {
        "id": f"test.gate{number}.v1",
        "code": "rate_limited",
        "tier": "neutral",
        "keys": [word],
        "match": [rf"\b{word} limit\b"],
        "why": "a rule for the prefilter tests",
    }
    return parse_rule(raw, "test")


def test_a_keyed_rule_whose_pattern_words_are_absent_is_no_candidate() -> None:
    prefilter = Prefilter([_rule(1, "alpha")])
    tokens = {b"alpha", b"speed"}
    assert list(prefilter.candidates(tokens, None, None)) == []
    assert [r.id for r in prefilter.candidates({b"alpha", b"limit"}, None, None)] == [
        "test.gate1.v1"
    ]
