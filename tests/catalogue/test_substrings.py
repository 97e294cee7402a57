"""Trigger literals found in one pass (catalogue.substrings), and the stages that skip
their work on a text holding none of theirs: the sanitiser's redaction steps and the
timing reader. Skipping must never change a result, so each trigger list is checked
against what its step does on texts made of real secrets, lead phrases and their pieces."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalogue.key_shapes import BLOCK_TRIGGERS, SHAPE_TRIGGERS
from catalogue.sanitize import _STEPS as STEPS
from catalogue.sanitize import REDACTION_TRIGGERS, _redact, sanitize, sanitize_scanned
from catalogue.substrings import Substrings
from catalogue.timing import _MID_WORD_BREAK as MID_WORD_BREAK
from catalogue.timing import TIMING_TRIGGERS, parse_lowered_timing, parse_timing
from tests.secret_shapes import SHAPES

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def test_found_is_every_literal_the_text_holds_overlaps_included() -> None:
    found = Substrings(["try", "retry", "re", "zzz", "é"]).found("Please rétry: retry")
    assert found == {"try", "retry", "re", "é"}
    assert Substrings(["é", "x"]).found("un délai") == {"é"}
    assert Substrings(["abc"]).found("") == frozenset()


def test_a_lone_surrogate_is_searched_one_literal_at_a_time() -> None:
    literals = Substrings(["token", "key"])
    assert literals.found("a \ud800 token") == {"token"}
    assert literals.any_in("\udfff key")
    assert not literals.any_in("\udfff none")


def test_empty_literals_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="literals"):
        Substrings(["a", ""])
    with pytest.raises(ValueError, match="literals"):
        Substrings([])


WORDS = ["token", "key", "try", "retry", "reset", "é", "错误", "a", "ab", "ba", "-", "_"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), st.data())
def test_one_pass_agrees_with_a_test_per_literal(literals: list[str], data: st.DataObject) -> None:
    text = "".join(data.draw(st.lists(st.sampled_from([*WORDS, " ", "x", "\n"]), max_size=12)))
    one_pass, each = Substrings(literals), Substrings(literals, one_pass=False)
    assert one_pass.found(text) == each.found(text) == {w for w in literals if w in text}
    assert one_pass.any_in(text) == each.any_in(text) == any(w in text for w in literals)


# Pieces of what the sanitiser redacts: real secret shapes, each trigger with its first or
# last character cut or its case changed (near misses), and the glue around them.
_RNG = random.Random(16)
SECRETS = [shape.planted(_RNG)[0] for shape in SHAPES]
NEAR = sorted(
    {t[1:] for t in REDACTION_TRIGGERS if len(t) > 2}
    | {t[:-1] for t in REDACTION_TRIGGERS if len(t) > 2}
    | {t.upper() for t in REDACTION_TRIGGERS}
    | {t.title() for t in REDACTION_TRIGGERS}
)
GLUE = [" ", "=", ": ", '"', "'", "\\", "\\n", "\n", "/", "@", "?", "~", ".", "-", "_", "A", "J"]
GLUE += ["x" * 24, "Ab3" * 8, "\u200b", "\x1b[0m", "\x00", "\x7f", "\t", "://", "Users", "home"]
PIECES = st.one_of(
    st.sampled_from(SECRETS), st.sampled_from(NEAR), st.sampled_from(GLUE), st.text(max_size=4)
)


def _ungated(text: str) -> str:
    """The redaction loop with every step run on every text: what `_redact` must equal."""
    for _ in range(8):
        redacted = text
        for _triggers, step in STEPS:
            redacted = step(redacted)
        if redacted == text:
            break
        text = redacted
    return text


def test_the_triggers_are_every_steps_own_and_the_shapes_and_names() -> None:
    assert set(REDACTION_TRIGGERS) == {t for triggers, _ in STEPS for t in triggers}
    assert set(SHAPE_TRIGGERS) | set(BLOCK_TRIGGERS) <= set(REDACTION_TRIGGERS)
    assert all(t == t.lower() for t in REDACTION_TRIGGERS)


@pytest.mark.parametrize("text", SECRETS, ids=[shape.name for shape in SHAPES])
def test_every_secret_shape_holds_a_trigger_of_the_step_that_redacts_it(text: str) -> None:
    lowered = text.lower()
    for triggers, step in STEPS:
        if step(text) != text:
            assert any(t in lowered for t in triggers), (step.__name__, text)
    assert _redact(text) == _ungated(text)
    assert sanitize(text) != text


@settings(max_examples=1500, deadline=None)
@given(st.lists(PIECES, max_size=10))
def test_a_step_whose_triggers_the_text_lacks_leaves_it_as_it_is(pieces: list[str]) -> None:
    text = "".join(pieces)
    lowered = text.lower()
    for triggers, step in STEPS:
        if not any(t in lowered for t in triggers):
            assert step(text) == text, (step.__name__, text)
    found = Substrings(REDACTION_TRIGGERS).found(lowered)
    assert _redact(text) == _ungated(text)
    assert sanitize_scanned(text, found | {"try"}) == sanitize(text)


# Pieces of timing statements: every trigger, lead phrases and delays, near misses.
TIMING_PIECES = [*TIMING_TRIGGERS, " again in ", " after ", "5s", "30 seconds", "2m30s"]
TIMING_PIECES += ["|1764417600", " at 3pm (utc)", "retrydelay': '47s'", " ", "\n", "a\nb", "tr"]
TIMING_PIECES += ["y again in 5s", "请在 30s 后重试", "réessayez dans 45s", ":", "(", "limit "]


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(TIMING_PIECES), max_size=8))
def test_the_timing_reader_reads_the_same_given_what_a_scan_found(pieces: list[str]) -> None:
    text = "".join(pieces)
    lowered = text.lower()
    expected = parse_timing(text, NOW)
    found = Substrings(TIMING_TRIGGERS).found(lowered)
    assert parse_lowered_timing(lowered, NOW, None, found) == expected
    # A superset of what the text holds (the combined text's, other stages' words) too.
    assert parse_lowered_timing(lowered, NOW, None, found | {"token", "wait"}) == expected
    if not found and "\n" not in text:
        assert expected is None


OLD_MID_WORD_BREAK = re.compile(r"(?<=[^\W\d_])\r?\n[ \t]*(?=[^\W\d_])")


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["a", "é", "1", "_", "\r", "\n", " ", "\t", "b\r\n"]), max_size=12))
def test_the_mid_word_break_rewrite_matches_where_the_look_behind_form_did(
    pieces: list[str],
) -> None:
    text = "".join(pieces)
    spans = [m.span() for m in MID_WORD_BREAK.finditer(text)]
    assert spans == [m.span() for m in OLD_MID_WORD_BREAK.finditer(text)]
    assert MID_WORD_BREAK.sub("", text) == OLD_MID_WORD_BREAK.sub("", text)
