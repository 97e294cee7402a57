"""Every rule is pinned by fixtures: positives it must win, near misses it must not."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

import pytest

from catalogue import classifier
from catalogue.codes import CODES, UNCLASSIFIED, Confidence
from tests.catalogue.fixture_data import FIXTURES, NEAR_MISSES, POSITIVES, Fixture

CATALOGUE = classifier.default_catalogue()
RULE_IDS = {rule.id for rule in CATALOGUE.rules}


def _ids(fixtures: list[Fixture]) -> list[str]:
    return [f.label for f in fixtures]


def test_every_fixture_names_a_rule_that_exists() -> None:
    unknown = [
        f.label for f in FIXTURES if (f.raw.get("rule") or f.raw.get("near_miss")) not in RULE_IDS
    ]
    assert unknown == []


def test_every_rule_has_two_positive_fixtures_and_a_near_miss() -> None:
    positives = Counter(f.raw["rule"] for f in POSITIVES)
    near = Counter(f.raw["near_miss"] for f in NEAR_MISSES)
    thin = sorted(r for r in RULE_IDS if positives[r] < 2 or near[r] < 1)
    assert thin == [], "rules lacking 2 positives or a near miss"


@pytest.mark.parametrize("fixture", POSITIVES, ids=_ids(POSITIVES))
def test_positive_fixture_is_won_by_its_rule_and_pins_its_collisions(fixture: Fixture) -> None:
    explanation = CATALOGUE.explain(fixture.evidence)
    result = explanation.classification
    assert result.rule == fixture.raw["rule"], [r.id for r in explanation.matched]
    rule = next(r for r in CATALOGUE.rules if r.id == fixture.raw["rule"])
    # A low-confidence rule names what the evidence looked like but leaves it unclassified.
    assert result.code == (UNCLASSIFIED if rule.confidence is Confidence.LOW else rule.code)
    losers = sorted({r.id for r in explanation.matched} - {rule.id})
    assert losers == sorted(fixture.raw.get("also", [])), "pin the collision in 'also'"
    assert CATALOGUE.classify(fixture.evidence) == result


@pytest.mark.parametrize(
    "fixture",
    [f for f in POSITIVES if {"retry_after_s", "reset_at", "hint_source"} & f.raw.keys()],
    ids=lambda f: f.label,
)
def test_positive_fixture_timing_hints_are_extracted(fixture: Fixture) -> None:
    result = CATALOGUE.classify(fixture.evidence)
    if "retry_after_s" in fixture.raw:
        expected = fixture.raw["retry_after_s"]
        assert result.retry_after_s == (None if expected is None else pytest.approx(expected))
    if "reset_at" in fixture.raw:
        expected_at = fixture.raw["reset_at"]
        assert result.reset_at == (
            None if expected_at is None else datetime.fromisoformat(expected_at)
        )
    if "hint_source" in fixture.raw:
        assert result.hint_source == fixture.raw["hint_source"]


@pytest.mark.parametrize("fixture", NEAR_MISSES, ids=_ids(NEAR_MISSES))
def test_near_miss_is_not_classified_by_its_rule(fixture: Fixture) -> None:
    result = CATALOGUE.classify(fixture.evidence)
    assert result.rule != fixture.raw["near_miss"]
    expected = fixture.raw["expect"]
    assert expected == UNCLASSIFIED or expected in CODES
    assert result.code == expected
