"""The words a pattern requires must be whole tokens of every text it matches."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalogue import default_catalogue
from catalogue.required_words import required_words
from catalogue.text import tokens_of


def _words(*alternatives: str) -> tuple[frozenset[bytes], ...]:
    return tuple(frozenset(w.encode() for w in a.split()) for a in alternatives)


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"\b529\b.{0,40}overloaded", _words("529")),
        (r"\bresource_exhausted\b", _words("resource_exhausted")),
        ("you didn't provide an api key", _words("didn t provide an api")),
        (r"^error: (?:rate|quota) limit\b", _words("error rate limit", "error quota limit")),
        (r"\b(?:\d+[- ]hour|weekly) limit reached", _words("hour limit", "weekly limit")),
        (r"\bstatus (?:is )?(?:bad|good) now", _words("status bad", "status good")),
        (r"status (?:is )?(?:bad|good) now", _words("bad", "good")),  # open at both edges
        (r"limit\s+reached", None),  # both words may run on outside the match
        (r"api[ _-]?key is missing", _words("is")),  # `api_key`, `apikey`: one token each
        (r"x(?:is )?foo bar", None),  # skipped, the group leaves `xfoo`
        (r"ab|cdef", None),  # an alternative with no word
        (r"(?i)\berror\b", None),  # case folding can match what the tokens do not show
    ],
)
def test_required_words_are_derived_from_the_pattern(
    pattern: str, expected: tuple[frozenset[bytes], ...] | None
) -> None:
    found = required_words(re.compile(pattern))
    assert (None if found is None else set(found)) == (None if expected is None else set(expected))


SHAPES = [
    r"\bab\b c",
    r"(?:ab|ba) c\b",
    r"\b(?:ab|b_a)\b",
    r"a\s+b\b",
    r"\bab (?:c )?ba\b",
    r"^ab\.c$",
    r"(?:ab )+c",
    r"\bab[-.]c\b",
    r"a[ _]b\b",
    r"\bab\W+c\b",
    r"(?:ab|c)(?:\b|_)ba\b",
    r"\bab(?=c)",
    r"\b(ab|ba)-\1\b",
]


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(SHAPES), st.text(alphabet="abc _-.\né", max_size=40))
def test_a_match_always_holds_one_word_set_on_arbitrary_text(pattern: str, text: str) -> None:
    compiled = re.compile(pattern, re.MULTILINE)
    sets = required_words(compiled)
    if sets is not None and compiled.search(text):
        assert any(words <= tokens_of(text) for words in sets), (pattern, text, sets)


RULE_PATTERNS = sorted(
    {p.pattern for rule in default_catalogue().rules for p in rule.match + rule.require}
)
GLUE = [" ", "_", "-", ".", ": ", "\n", "x", "'", '"', "429 ", "é"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(RULE_PATTERNS), st.data())
def test_a_rule_pattern_never_matches_without_one_of_its_word_sets(
    pattern: str, data: st.DataObject
) -> None:
    compiled = re.compile(pattern)
    sets = required_words(compiled)
    if sets is None:
        return
    own = sorted({w.decode() for words in sets for w in words})
    piece = st.one_of(st.sampled_from(own), st.sampled_from(GLUE))
    text = "".join(data.draw(st.lists(piece, max_size=12)))
    if compiled.search(text):
        assert any(words <= tokens_of(text) for words in sets), (pattern, text)
