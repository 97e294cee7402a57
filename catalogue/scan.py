"""Patterns rewritten to scan fast: the same matches, found from a literal prefix.

CPython's regex engine skips to the next occurrence of a pattern's literal prefix when it
has one, and tries every position of the text when it has none. A rule pattern that opens
with `\\b` (`\\bresource_exhausted\\b`, `\\b(?:cancell?ed|aborted)\\b`) has none, so each
scan costs tens of steps per character. `scanning` moves such a leading boundary behind
the literal run it guards, as a look-behind: `\\bword` becomes `word(?<!\\wword)`, which
matches exactly where `\\bword` does (the character before the word is no word character,
or there is none), with the same span and groups; an alternation whose branches each open
so gets a first-character set instead. Rewritten on the parsed pattern (no text is
re-escaped); a test compares every rule pattern with its rewrite on real and random text.
"""

from __future__ import annotations

import re
from re import _compiler as sre_compile  # type: ignore[attr-defined, unused-ignore]  # stdlib internals (typeshed has some), stable in 3.11+
from re import _constants as sre  # type: ignore[attr-defined, unused-ignore]  # idem
from re import _parser as sre_parse  # type: ignore[attr-defined, unused-ignore]  # idem
from typing import Any

__all__ = ["branches", "scanning"]

_WORD = frozenset(map(ord, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"))
_BOUNDARY = (sre.AT, sre.AT_BOUNDARY)


def _guarded(state: Any, items: list[Any]) -> list[Any] | None:
    """`items` opening with `\\b` and a word character, rewritten; None when they do not
    open so (or some branch of an alternation right after the boundary does not)."""
    if len(items) < 2 or tuple(items[0]) != _BOUNDARY:
        return None
    op, arg = items[1]
    if op is sre.LITERAL and arg in _WORD:
        end = 1
        while end < len(items) and items[end][0] is sre.LITERAL:
            end += 1
        run = list(items[1:end])
        word_before = (sre.IN, [(sre.CATEGORY, sre.CATEGORY_WORD)])
        behind = sre_parse.SubPattern(state, [word_before, *run])
        return [*run, (sre.ASSERT_NOT, (-1, behind)), *items[end:]]
    if op is sre.BRANCH:
        branches = []
        for branch in arg[1]:
            rewritten = _guarded(state, [_BOUNDARY, *branch.data])
            if rewritten is None:
                return None
            branches.append(sre_parse.SubPattern(state, rewritten))
        return [(sre.BRANCH, (None, branches)), *items[2:]]
    return None


def _rewritten(state: Any, items: list[Any]) -> list[Any] | None:
    guarded = _guarded(state, items)
    if guarded is not None or len(items) != 1 or items[0][0] is not sre.BRANCH:
        return guarded
    # A top-level alternation: each branch on its own.
    branches, changed = [], False
    for branch in items[0][1][1]:
        rewritten = _guarded(state, list(branch.data))
        changed = changed or rewritten is not None
        branches.append(branch if rewritten is None else sre_parse.SubPattern(state, rewritten))
    return [(sre.BRANCH, (None, branches))] if changed else None


def scanning(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """A pattern that searches exactly like `pattern` (the same match, span and groups
    everywhere), rewritten to open with a literal when it opens with `\\b`; `pattern`
    itself when there is nothing to rewrite."""
    if pattern.flags & re.IGNORECASE:
        return pattern
    try:
        parsed = sre_parse.parse(pattern.pattern, pattern.flags)
        rewritten = _rewritten(parsed.state, list(parsed.data))
        if rewritten is None:
            return pattern
        compiled: re.Pattern[str] = sre_compile.compile(
            sre_parse.SubPattern(parsed.state, rewritten), 0
        )
    except (re.error, RecursionError, OverflowError):
        return pattern
    return compiled


def branches(pattern: re.Pattern[str]) -> tuple[re.Pattern[str], ...]:
    """The branches of a pattern that is one top-level alternation (`per ?day|perday|
    \\bdaily\\b`), each compiled on its own and rewritten as `scanning` rewrites: the text
    holds a match of `pattern` exactly when it holds one of some branch. Scanning a long
    text branch by branch lets each search skip to its own literal, where the alternation
    as a whole has no common one and is tried at every position. Empty when the pattern is
    no alternation (or cannot be split)."""
    if pattern.flags & re.IGNORECASE:
        return ()
    try:
        parsed = sre_parse.parse(pattern.pattern, pattern.flags)
        items = list(parsed.data)
        if len(items) != 1 or items[0][0] is not sre.BRANCH:
            return ()
        out = []
        for branch in items[0][1][1]:
            data = list(branch.data)
            rewritten = _guarded(parsed.state, data)
            sub = sre_parse.SubPattern(parsed.state, data if rewritten is None else rewritten)
            compiled: re.Pattern[str] = sre_compile.compile(sub, 0)
            out.append(compiled)
    except (re.error, RecursionError, OverflowError):
        return ()
    return tuple(out)
