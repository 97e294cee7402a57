"""Required literals of a regular expression, for a cheap `in` check before a scan.

Scanning a text with a pattern that has bounded gaps (`.{0,40}`) costs tens of steps per
position; asking whether the text contains a substring the pattern cannot match without
is a single C-level search. For each pattern we derive the literal runs it requires: one
per top-level alternative (the text must contain at least one of them), or nothing when
some alternative has no usable literal.
"""

from __future__ import annotations

import re
from re import _constants as sre  # type: ignore[attr-defined, unused-ignore]  # stdlib internals (typeshed has some), stable in 3.11+
from re import _parser as sre_parse  # type: ignore[attr-defined, unused-ignore]  # idem
from typing import Any

MIN_LITERAL = 3
# A run with a character beyond ASCII is usable from one character: a CJK character ("缺" of
# "缺少|缺失", which the parser splits off as a common prefix) or two-character word ("余额",
# "欠费") is as rare in error text as a three-letter ASCII run is common, and CJK patterns
# are mostly made of such words. Without it those patterns have no literal and are scanned
# at every position of every non-ASCII text (one with a "⎿" or a "…").
MIN_FOREIGN_LITERAL = 1


def _longest_run(items: Any) -> str:
    best, run = "", []
    for op, arg in items:
        if op is sre.LITERAL:
            run.append(chr(arg))
            continue
        if op is sre.AT:
            continue  # zero-width: the literals on both sides stay adjacent
        if op is sre.SUBPATTERN and _single_sequence(arg[-1]):
            inner = _longest_run(arg[-1])
            best = max(best, "".join(run), inner, key=len)
            run = []
            continue
        best = max(best, "".join(run), key=len)
        run = []
    return max(best, "".join(run), key=len)


def _single_sequence(items: Any) -> bool:
    return not any(op is sre.BRANCH for op, _ in items)


def _branch_literals(branches: Any) -> tuple[str, ...] | None:
    literals: list[str] = []
    for branch in branches:
        found = _requirement(list(branch))
        if found is None:
            return None
        literals.extend(found)
    return tuple(dict.fromkeys(literals))


def _requirement(items: list[Any]) -> tuple[str, ...] | None:
    """The longest required literal run, else the literals of a required alternation."""
    run = _longest_run(items)
    if len(run) >= MIN_LITERAL or (len(run) >= MIN_FOREIGN_LITERAL and not run.isascii()):
        return (run,)
    alternations = [_branch_literals(branches) for branches in _alternations(items)]
    if not alternations:
        return None
    first = alternations[0]
    if first is None or any(literal.isascii() for literal in first):
        # Another required alternation of words beyond ASCII only is the better check when
        # the first has ASCII words ("(?:api ?key|token|令牌)(?:已)?(?:无效|过期)"): those
        # are in many texts, a CJK word is in few.
        for literals in alternations[1:]:
            if literals is not None and not any(literal.isascii() for literal in literals):
                return literals
    return first


def _alternations(items: list[Any]) -> list[Any]:
    """The branches of each alternation that `items` requires, in order: a top-level one,
    or one that is a group's only content."""
    out = []
    for op, arg in items:
        if op is sre.BRANCH:
            out.append(arg[1])
        elif op is sre.SUBPATTERN and not _single_sequence(arg[-1]):
            inner = list(arg[-1])
            if len(inner) == 1 and inner[0][0] is sre.BRANCH:
                out.append(inner[0][1][1])
    return out


def required_literals(pattern: re.Pattern[str]) -> tuple[str, ...] | None:
    """Literals one of which every match contains, or None if none can be derived."""
    try:
        parsed = sre_parse.parse(pattern.pattern, pattern.flags)
    except (re.error, RecursionError):
        return None
    return _requirement(list(parsed))


_ASCII_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def complete_words(literal: str) -> list[str]:
    """ASCII words that stand whole inside `literal`: bounded by non-word characters on
    both sides within it. (The first and last runs may continue outside the literal.)"""
    words, current, bounded_left = [], [], False
    for char in literal:
        if char in _ASCII_WORD:
            current.append(char)
            continue
        if current and bounded_left:
            words.append("".join(current))
        current, bounded_left = [], True
    return words


def anchor_words(literals: tuple[str, ...] | None) -> frozenset[str] | None:
    """One word per literal that a text containing that literal must hold as a token (the
    longest whole word of each), or None when some literal has no whole word."""
    if literals is None:
        return None
    anchors = set()
    for literal in literals:
        words = complete_words(literal)
        if not words:
            return None
        anchors.add(max(words, key=len))
    return frozenset(anchors)
