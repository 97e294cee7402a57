"""A pattern rewritten to scan from a literal (catalogue.scan) finds exactly what the
pattern finds: the same match, span and groups, on real and random text."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalogue import default_catalogue
from catalogue.corpus import dev_corpus, evidence_from_row
from catalogue.literals import required_literals
from catalogue.scan import branches, scanning
from catalogue.text import make_views
from tests.catalogue.fixture_data import load_fixtures

RULES = default_catalogue().rules
# Every rule pattern, and each rule's patterns as the one alternation rules.py scans.
PATTERNS = sorted(
    {p.pattern for rule in RULES for p in rule.match + rule.require + rule.unless}
    | {
        "|".join(f"(?:{p.pattern})" for p in group)
        for rule in RULES
        for group in (rule.match, rule.unless)
        if group
    }
)


def _same(pattern: re.Pattern[str], text: str, scan: re.Pattern[str] | None = None) -> None:
    expected, found = pattern.search(text), (scan or scanning(pattern)).search(text)
    if expected is None:
        assert found is None, (pattern.pattern, text)
        return
    assert found is not None, (pattern.pattern, text)
    assert found.span() == expected.span(), (pattern.pattern, text)
    assert found.groupdict() == expected.groupdict(), (pattern.pattern, text)


def _views() -> list[str]:
    lines = dev_corpus().read_text(encoding="utf-8").splitlines()
    evidence = [evidence_from_row(json.loads(line)) for line in lines if line]
    evidence += [fixture.evidence for fixture in load_fixtures()]
    return [view for e in evidence for view in make_views(e.combined_text()).all]


def test_every_rewritten_rule_pattern_finds_what_it_finds_on_the_corpus_and_fixtures() -> None:
    views = _views()
    rewritten = 0
    for text in PATTERNS:
        pattern = re.compile(text)
        scan = scanning(pattern)
        if scan is pattern:
            continue  # nothing rewritten: the very same pattern
        rewritten += 1
        for view in views:
            _same(pattern, view, scan)
    assert rewritten > 100


@pytest.mark.parametrize(
    ("pattern", "rewritten"),
    [
        (r"\bresource_exhausted\b", True),
        (r"\b(?:cancell?ed|aborted)\b", True),
        (r"\b529\b.{0,40}overloaded|\bquota\b", True),
        (r"\b\d+ tokens", False),  # no literal after the boundary
        (r"\b(?P<bounded>abc)", False),  # a capture group: left as it is
        (r"overloaded", False),  # a literal prefix already
    ],
)
def test_only_a_boundary_before_a_word_literal_is_rewritten(pattern: str, rewritten: bool) -> None:
    compiled = re.compile(pattern)
    assert (scanning(compiled) is not compiled) is rewritten


SHAPES = [
    r"\bab\b",
    r"\bab|\bba c",
    r"\b(?:ab|b_a)\b",
    r"\ba(?:b|c)+\b",
    r"\bab.{0,3}ba",
    r"\b_a",
    r"\b9a",
]


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(SHAPES), st.text(alphabet="ab_9 .\néç", max_size=24))
def test_a_rewritten_pattern_agrees_on_arbitrary_text(pattern: str, text: str) -> None:
    _same(re.compile(pattern), text)


GLUE = [" ", "_", "-", ".", ": ", "\n", "x", "é", "'", '"', "9"]
LITERALS = sorted({lit for text in PATTERNS for lit in required_literals(re.compile(text)) or ()})


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(PATTERNS), st.data())
def test_a_rewritten_rule_pattern_agrees_on_mixtures_of_rule_literals(
    pattern: str, data: st.DataObject
) -> None:
    piece = st.one_of(st.sampled_from(LITERALS), st.sampled_from(GLUE))
    _same(re.compile(pattern), "".join(data.draw(st.lists(piece, max_size=10))))


# Every rule pattern that is one top-level alternation, with its branches (compiled once).
SPLIT = {text: parts for text in PATTERNS if (parts := branches(re.compile(text)))}


def _found_by_branches(pattern: str, text: str) -> bool:
    return any(branch.search(text) is not None for branch in SPLIT[pattern])


def test_a_split_rule_pattern_finds_a_match_exactly_where_its_branches_do() -> None:
    assert SPLIT  # the rule set has top-level alternations
    views = _views()
    for text in SPLIT:
        pattern = re.compile(text)
        for view in views:
            assert _found_by_branches(text, view) == bool(pattern.search(view)), (text, view)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(SPLIT)), st.data())
def test_a_split_rule_pattern_agrees_on_mixtures_of_rule_literals(
    pattern: str, data: st.DataObject
) -> None:
    piece = st.one_of(st.sampled_from(LITERALS), st.sampled_from(GLUE))
    text = "".join(data.draw(st.lists(piece, max_size=10)))
    assert _found_by_branches(pattern, text) == bool(re.compile(pattern).search(text))


@pytest.mark.parametrize(
    ("pattern", "count"),
    [(r"per ?day|perday|\bdaily\b", 3), (r"(?:a|b)c", 0), (r"plain", 0), (r"(?i)a|b", 0)],
)
def test_only_a_top_level_alternation_is_split(pattern: str, count: int) -> None:
    assert len(branches(re.compile(pattern))) == count
