"""Which of a fixed set of substrings a text holds, found in one pass.

Each stage of a classification used to ask "is this literal in the text?" one literal at a
time, a C-level scan per question: a sanitiser with some forty redaction triggers, a
timing reader with its lead words. A `Substrings` set answers all of them with one
Aho-Corasick scan (the `ahocorasick_rs` wheel), so a stage whose triggers the text does
not hold is skipped after one call, and one that does learns which.

Without the wheel (or for a text it cannot encode: a lone surrogate) the answer comes
from one substring test per literal: the same answer, slower. A test compares the two.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

try:
    from ahocorasick_rs import AhoCorasick

    _ONE_PASS = True
except ImportError:  # pragma: no cover - the wheel is a dependency; kept usable without it
    _ONE_PASS = False

__all__ = ["Substrings"]

_NONE: frozenset[str] = frozenset()


class Substrings:
    """A fixed set of non-empty literals, searched for together. Immutable once built."""

    def __init__(self, literals: Iterable[str], *, one_pass: bool = True) -> None:
        self.literals: tuple[str, ...] = tuple(dict.fromkeys(literals))
        if not self.literals or not all(self.literals):
            raise ValueError(f"literals: need non-empty strings, got {self.literals!r}")
        self._find: Callable[..., list[str]] | None = None
        if one_pass and _ONE_PASS:
            # Patterns stored: each match comes back as the literal's own str object.
            automaton = AhoCorasick(list(self.literals), store_patterns=True)
            self._find = automaton.find_matches_as_strings

    def found(self, text: str) -> frozenset[str]:
        """The literals `text` contains (as substrings), empty for most texts."""
        if self._find is not None:
            try:
                # Overlapping matches: a literal inside another ("try" in "retry") counts.
                matches = self._find(text, True)
                return frozenset(matches) if matches else _NONE
            except UnicodeEncodeError:  # a lone surrogate: not UTF-8, searched below
                pass
        return frozenset(literal for literal in self.literals if literal in text)

    def any_in(self, text: str) -> bool:
        """Whether `text` contains one of the literals."""
        if self._find is not None:
            try:
                return bool(self._find(text))
            except UnicodeEncodeError:
                pass
        return any(literal in text for literal in self.literals)
