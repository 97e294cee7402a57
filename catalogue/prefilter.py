"""The rule prefilter: the rules that could hold on a text, found before any pattern runs.

A rule is a candidate when one of its keys is among the text's tokens (or, keyless, when
its HTTP status or exit code is the evidence's) and, if it has match patterns, one of
them is possible: the tokens hold every word of one of the pattern's required-word sets
(catalogue.required_words). That is a necessary condition of a match, so the prefilter
never drops a rule that would hold (a test compares it with trying every keyed rule). A
rule with a pattern that has no required words passes whenever it is keyed: its own
pattern groups, behind their literal checks, decide.

Rules are bits of one integer in rank order: the keyed rules are one OR per key token,
and come out in the order they are tried with a few integer operations. A rule's gate is
checked only when it is reached (one C-level `any` over its word sets), so a caller that
stops at its first decisive rule checks none past it, and a rule set grown by rules whose
keys never occur costs nothing per text but a larger key set to intersect.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet

from catalogue.required_words import required_words
from catalogue.rules import Rule

__all__ = ["Prefilter"]

# A rule's gate: the required-word sets of all its match patterns, one of which the tokens
# must hold; None when some pattern has none (the rule is then tried whenever it is keyed).
Gate = tuple[frozenset[bytes], ...] | None


def gate_of(rule: Rule) -> Gate:
    """The required-word sets of a rule's match patterns, or None if some pattern (or the
    rule, having none) cannot be gated by words."""
    sets: list[frozenset[bytes]] = []
    for pattern in rule.match:
        alternatives = required_words(pattern)
        if alternatives is None:
            return None
        sets += alternatives
    # Smallest sets first: the likeliest to be held, so `any` stops early.
    return tuple(sorted(dict.fromkeys(sets), key=lambda w: (len(w), sorted(w)))) or None


class Prefilter:
    """The candidate rules of a text, in rank order. Immutable once built."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)
        key_bits: dict[bytes, int] = {}
        status_bits: dict[int, int] = {}
        exit_bits: dict[int, int] = {}
        for position, rule in enumerate(self.rules):
            bit = 1 << position
            for key in rule.key_bytes:
                key_bits[key] = key_bits.get(key, 0) | bit
            if not rule.keys:
                for status in rule.status:
                    status_bits[status] = status_bits.get(status, 0) | bit
                for exit_code in rule.exit_codes:
                    exit_bits[exit_code] = exit_bits.get(exit_code, 0) | bit
        self._key_bits = key_bits
        self._keys = frozenset(key_bits)
        self._status_bits = status_bits
        self._exit_bits = exit_bits
        self.gates: tuple[Gate, ...] = tuple(gate_of(rule) for rule in self.rules)

    def keyed(self, tokens: AbstractSet[bytes]) -> int:
        """The rules one of whose keys is a token, as bits."""
        key_bits = self._key_bits
        keyed = 0
        for token in self._keys.intersection(tokens):
            keyed |= key_bits[token]
        return keyed

    def candidates(
        self, tokens: AbstractSet[bytes], status: int | None, exit_code: int | None
    ) -> Iterator[Rule]:
        """The rules that could hold, in rank order (the order they are tried in), found
        lazily: a caller that stops at its first decisive rule checks no gate past it."""
        bits = self.keyed(tokens)
        if status is not None:
            bits |= self._status_bits.get(status, 0)
        if exit_code is not None:
            bits |= self._exit_bits.get(exit_code, 0)
        rules, gates, held = self.rules, self.gates, tokens.__ge__
        while bits:
            low = bits & -bits
            bits ^= low
            position = low.bit_length() - 1
            gate = gates[position]
            if gate is None or any(map(held, gate)):
                yield rules[position]
