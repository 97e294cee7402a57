"""Required words of a regular expression: whole tokens a text must hold for it to match.

A text's tokens (catalogue.text.tokens_of: maximal runs of ASCII letters, digits and
underscores) are computed once per classification. A pattern such as
`\\b529\\b.{0,40}overloaded` cannot match a text whose tokens lack `529`: a run of word
characters that the pattern bounds on both sides (by a non-word character, a class of
them, `\\b`, `^` or `$`) is a whole token of any text it matches. Checking that a set of
words is a subset of the tokens is one C-level operation, so the prefilter
(catalogue.prefilter) rejects most rules without running a pattern.

`required_words` gives the alternatives: sets of words one of which the tokens must
contain whole. An alternative the analysis cannot bound (every word of it open at an
edge, or behind a repeat, a class or a group reference) makes the answer None: the
pattern is then gated by its literals or not at all. The analysis is conservative: it
may miss a requirement, never invent one (a Hypothesis test compares it with the
pattern on mixtures of its own words).
"""

from __future__ import annotations

import re
from re import _constants as sre  # type: ignore[attr-defined, unused-ignore]  # stdlib internals (typeshed has some), stable in 3.11+
from re import _parser as sre_parse  # type: ignore[attr-defined, unused-ignore]  # idem
from typing import Any

__all__ = ["required_words"]

# Alternatives kept per pattern: a product of required alternations past this is dropped
# (a weaker but still sound requirement).
MAX_ALTERNATIVES = 16

_WORD = frozenset(map(ord, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"))
_REPEATS = frozenset({sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT})
_ZERO_WIDTH = frozenset({sre.ASSERT, sre.ASSERT_NOT})
# Zero-width positions that separate tokens when a word character stands beside them:
# `\b`, and the edges of the text or of a line (a line break is not a word character).
_BOUNDARY_AT = frozenset(
    {
        sre.AT_BOUNDARY,
        sre.AT_BEGINNING,
        sre.AT_BEGINNING_STRING,
        sre.AT_BEGINNING_LINE,
        sre.AT_END,
        sre.AT_END_STRING,
        sre.AT_END_LINE,
        sre.AT_UNI_BOUNDARY,
        sre.AT_LOC_BOUNDARY,
    }
)
# Character categories with no ASCII word character in them.
_NON_WORD_CATEGORIES = frozenset(
    {sre.CATEGORY_SPACE, sre.CATEGORY_NOT_WORD, sre.CATEGORY_UNI_SPACE, sre.CATEGORY_UNI_NOT_WORD}
)

Words = frozenset[str]
Alternatives = list[Words]  # one of which must hold; [frozenset()] means no requirement
_NONE: Alternatives = [frozenset()]


def _flatten(items: Any) -> list[Any]:
    """The items of a sequence with its plain groups opened (a group is just a sequence);
    a group that changes flags (case folding) is kept whole, and so ends words."""
    out: list[Any] = []
    for op, arg in items:
        if op is sre.SUBPATTERN and not arg[1] and not arg[2]:
            out.extend(_flatten(arg[-1]))
        elif op is sre.ATOMIC_GROUP:
            out.extend(_flatten(arg))
        else:
            out.append((op, arg))
    return out


def _non_word_class(items: Any) -> bool:
    """Whether an `[...]` class holds only characters that end a token."""
    for op, arg in items:
        if op is sre.LITERAL:
            if arg in _WORD:
                return False
        elif op is sre.RANGE:
            low, high = arg
            if any(c in _WORD for c in range(low, min(high, 127) + 1)):
                return False
        elif op is sre.CATEGORY:
            if arg not in _NON_WORD_CATEGORIES:
                return False
        else:  # NEGATE and anything else
            return False
    return True


def _is_separator(op: Any, arg: Any) -> bool:
    """An item that matches at least one character, none of which is a word character, or
    a zero-width token boundary: what stands beside a whole token."""
    if op is sre.LITERAL:
        return arg not in _WORD
    if op is sre.IN:
        return _non_word_class(arg)
    if op is sre.AT:
        return arg in _BOUNDARY_AT
    if op in _REPEATS:
        low, _high, body = arg
        inner = _flatten(body)
        if low < 1 or len(inner) != 1 or inner[0][0] is sre.AT:
            return False
        return _is_separator(*inner[0])
    return False


def _ends_with_separator(items: list[Any], from_end: bool) -> bool:
    """Whether the last (or first) character an item sequence consumes is a non-word one."""
    ordered = reversed(items) if from_end else iter(items)
    for op, arg in ordered:
        if op in _ZERO_WIDTH or (op is sre.AT and arg not in _BOUNDARY_AT):
            continue
        return _is_separator(op, arg) and op is not sre.AT
    return False


def _bounded(items: list[Any], start: int, step: int, edge: bool) -> bool:
    """Whether the position before (step -1) or after (step 1) index `start` is a token
    boundary: walk over zero-width items and optional ones that end in a separator."""
    i = start
    while 0 <= i < len(items):
        op, arg = items[i]
        if _is_separator(op, arg):
            return True
        if op in _ZERO_WIDTH:
            i += step
            continue
        if op in _REPEATS and arg[0] == 0:
            if not _ends_with_separator(_flatten(arg[2]), from_end=step < 0):
                return False
            i += step
            continue
        return False
    return edge


def _product(left: Alternatives, right: Alternatives) -> Alternatives:
    """Both requirements: every pairing of their alternatives, or the stronger one alone
    when the pairing grows too large."""
    if right == _NONE:
        return left
    if left == _NONE:
        return right
    if len(left) * len(right) > MAX_ALTERNATIVES:
        return min(left, right, key=len)
    return list(dict.fromkeys(a | b for a in left for b in right))


def _sequence(items: Any, left_edge: bool, right_edge: bool) -> Alternatives:
    """The alternatives of a sequence whose edges are (or are not) token boundaries."""
    flat = _flatten(items)
    required: Alternatives = _NONE
    words: set[str] = set()
    run: list[str] = []
    run_start = 0
    for i, (op, arg) in enumerate([*flat, (None, None)]):
        if op is sre.LITERAL and arg in _WORD:
            if not run:
                run_start = i
            run.append(chr(arg))
            continue
        if run:
            if _bounded(flat, run_start - 1, -1, left_edge) and _bounded(flat, i, 1, right_edge):
                words.add("".join(run))
            run = []
        if op is sre.BRANCH:
            left = _bounded(flat, i - 1, -1, left_edge)
            right = _bounded(flat, i + 1, 1, right_edge)
            required = _product(required, _branches(arg[1], left, right))
        elif op in _REPEATS and arg[0] >= 1:
            required = _product(required, _sequence(arg[2], False, False))
    if words:
        required = _product(required, [frozenset(words)])
    return required


def _branches(branches: Any, left_edge: bool, right_edge: bool) -> Alternatives:
    out: Alternatives = []
    for branch in branches:
        found = _sequence(branch, left_edge, right_edge)
        if found == _NONE:
            return _NONE  # this branch needs no word: the alternation needs none
        out.extend(found)
    return list(dict.fromkeys(out))


def required_words(pattern: re.Pattern[str]) -> tuple[frozenset[bytes], ...] | None:
    """Sets of words one of which any text the pattern matches holds as whole tokens
    (as the tokenizer yields them: ASCII bytes), or None when none can be derived."""
    if pattern.flags & re.IGNORECASE:
        return None  # a folded literal can match a character the tokens do not show
    try:
        parsed = sre_parse.parse(pattern.pattern, pattern.flags)
    except (re.error, RecursionError):
        return None
    found = _sequence(parsed, False, False)
    if found == _NONE or not all(found):
        return None
    return tuple(frozenset(w.encode("ascii") for w in alternative) for alternative in found)
