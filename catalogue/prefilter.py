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
checked only when it is reached: one C-level `isdisjoint` with one word of each of its
sets (the rarest), then one C-level `any` over the sets. A caller that stops at its first
decisive rule checks none past it, and a rule set grown by rules whose keys never occur
costs nothing per text but a larger key set to intersect.
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


# Words most error texts hold (English function words and the vocabulary of any error
# report): a set is represented by one of them only when it has no other word.
_COMMON = (
    "a an and are as at be been by can could do does for from has have in is it its no "
    "not of on or please the this that to try was were will with you your "
    "again api code error errors failed http https message request status type"
)
COMMON_WORDS = frozenset(word.encode("ascii") for word in _COMMON.split())


def _gate_words(gates: Sequence[Gate]) -> tuple[frozenset[bytes], ...]:
    """Per gate, one word of each of its sets (a set the tokens hold has its word among
    them, so a gate none of whose words is a token holds no set): the word fewest sets of
    the catalogue hold, not a common word when the set has another."""
    counts: dict[bytes, int] = {}
    for gate in gates:
        for words in gate or ():
            for word in words:
                counts[word] = counts.get(word, 0) + 1

    def rarest(words: frozenset[bytes]) -> bytes:
        return min(sorted(words), key=lambda w: (w in COMMON_WORDS, counts[w], -len(w)))

    return tuple(frozenset(rarest(words) for words in gate or ()) for gate in gates)


class Prefilter:
    """The candidate rules of a text, in rank order. Immutable once built."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)
        key_bits: dict[bytes, int] = {}
        status_bits: dict[int, int] = {}
        exit_bits: dict[int, int] = {}
        # The best-ranked rule is the highest bit: a candidate is found with one
        # `bit_length` and cleared with one XOR (the lowest bit would take two more
        # integer operations to isolate).
        last = len(self.rules) - 1
        self.single = tuple(1 << (last - position) for position in range(last + 1))
        for position, rule in enumerate(self.rules):
            bit = self.single[position]
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
        # Per rule, one word of each of its gate's sets (None: no gate), and what is left
        # to check once one of those words is a token: nothing (None) when each set is
        # that one word, else the gate's sets.
        self.words: tuple[frozenset[bytes] | None, ...] = tuple(
            None if gate is None else words
            for gate, words in zip(self.gates, _gate_words(self.gates), strict=True)
        )
        self.rest: tuple[Gate, ...] = tuple(
            None if gate is None or all(len(words) == 1 for words in gate) else gate
            for gate in self.gates
        )

    def bits(self, tokens: AbstractSet[bytes], status: int | None, exit_code: int | None) -> int:
        """The rules one of whose keys is a token (or, keyless, whose status or exit code is
        the evidence's), as bits: the best-ranked the highest (see `single`)."""
        key_bits = self._key_bits
        bits = 0
        for token in self._keys.intersection(tokens):
            bits |= key_bits[token]
        if status is not None:
            bits |= self._status_bits.get(status, 0)
        if exit_code is not None:
            bits |= self._exit_bits.get(exit_code, 0)
        return bits

    def possible(self, position: int, tokens: AbstractSet[bytes]) -> bool:
        """Whether the gate of the rule at `position` lets it through: one C-level
        `isdisjoint` with one word of each of its sets, then (when some set has more words)
        one C-level `any` over the sets."""
        words = self.words[position]
        if words is None:
            return True
        rest = self.rest[position]
        return not words.isdisjoint(tokens) and (rest is None or any(map(tokens.__ge__, rest)))

    def candidates(
        self, tokens: AbstractSet[bytes], status: int | None, exit_code: int | None
    ) -> Iterator[Rule]:
        """The rules that could hold, in rank order (the order they are tried in), found
        lazily: a caller that stops at its first decisive rule checks no gate past it."""
        bits = self.bits(tokens, status, exit_code)
        rules, possible, single, last = self.rules, self.possible, self.single, len(self.rules) - 1
        while bits:
            position = last - (bits.bit_length() - 1)
            bits ^= single[position]
            if possible(position, tokens):
                yield rules[position]
