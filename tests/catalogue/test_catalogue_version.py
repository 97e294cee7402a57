"""The catalogue version is derived from the rules' content: any rule change changes it."""

from __future__ import annotations

import itertools
import re
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from catalogue import CATALOGUE_VERSION, Catalogue, Evidence, EvidenceKind, default_catalogue
from catalogue.codes import Confidence, Scope
from catalogue.rules import Rule, Tier, content_version, load_builtin_rules

RULES = load_builtin_rules()
VERSION = re.compile(rf"^{re.escape(CATALOGUE_VERSION)}\+[0-9a-f]{{12}}$")


def test_the_shipped_catalogue_version_is_the_digest_of_its_rules() -> None:
    version = default_catalogue().version
    assert VERSION.match(version), version
    assert version == content_version(RULES)


def test_every_classification_carries_the_version_of_the_catalogue_that_made_it() -> None:
    evidence = Evidence(kind=EvidenceKind.HTTP, http_status=529, body='{"type":"error"}')
    shipped = default_catalogue().classify(evidence, datetime(2026, 11, 29, tzinfo=UTC))
    assert shipped.catalogue_version == default_catalogue().version
    smaller = Catalogue(RULES[:-1])
    assert smaller.classify(evidence).catalogue_version == smaller.version
    assert smaller.version != shipped.catalogue_version


def test_the_same_rules_loaded_again_give_the_same_version() -> None:
    assert content_version(load_builtin_rules()) == content_version(RULES)
    assert Catalogue(load_builtin_rules()).version == default_catalogue().version


def test_reordering_rules_of_equal_rank_changes_the_version_as_it_changes_who_wins() -> None:
    first, second = next((a, b) for a, b in itertools.pairwise(RULES) if a.rank == b.rank)
    swapped = [second if r is first else first if r is second else r for r in RULES]
    assert content_version(swapped) != content_version(RULES)


def test_a_version_given_explicitly_is_kept() -> None:
    assert Catalogue(RULES, version="catalogue.v1+pinned").version == "catalogue.v1+pinned"


def _first(match: str) -> Rule:
    return next(r for r in RULES if r.id == match)


CHANGES: list[tuple[str, dict[str, Any]]] = [
    ("id", {"id": "anthropic.body.overloaded_error.v2"}),
    ("code", {"code": "provider_unavailable"}),
    ("tier", {"tier": Tier.EXACT}),
    ("confidence", {"confidence": Confidence.MEDIUM}),
    ("scope", {"scope": Scope.MODEL}),
    ("why", {"why": "reworded"}),
    ("keys", {"keys": frozenset({"overloaded_error", "overloaded"})}),
    ("match", {"match": (re.compile(r"\boverloaded_error\b|\boverloaded\b"),)}),
    ("unless", {"unless": (re.compile("maintenance"),)}),
    ("status", {"status": frozenset({529})}),
    ("providers", {"providers": frozenset({"anthropic"})}),
    ("headers", {"headers": (("retry-after", re.compile(r"^\d+$")),)}),
    ("wrapper", {"wrapper": True}),
    ("no_reset", {"no_reset": True}),
    ("priority", {"priority": 99}),
]


@pytest.mark.parametrize(("field", "change"), CHANGES, ids=[c[0] for c in CHANGES])
def test_changing_any_field_of_one_rule_changes_the_version(
    field: str, change: dict[str, Any]
) -> None:
    rule = _first("anthropic.body.overloaded_error.v1")
    assert getattr(rule, field) != next(iter(change.values()))
    changed = [replace(r, **change) if r is rule else r for r in RULES]
    assert content_version(changed) != content_version(RULES)


def test_adding_or_removing_a_rule_changes_the_version() -> None:
    assert content_version(RULES[1:]) != content_version(RULES)
    assert content_version([*RULES, RULES[0]]) != content_version(RULES)
