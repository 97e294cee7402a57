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
        self._init_status_watch()
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

    def _init_status_watch(self) -> None:
        """What a caller that reads a status stated in the text only when it is needed
        (`status_watch`) asks: which keyless status rules can hold on evidence with no
        response headers (one that asks for a header cannot), where the first of them
        ranks, and which keyed rules have a status condition."""
        last = len(self.rules) - 1
        headerless: dict[int, int] = {}
        first = {True: last + 1, False: last + 1}
        needed = 0
        for position, rule in enumerate(self.rules):
            if not rule.status:
                continue
            if rule.keys:
                needed |= self.single[position]
                continue
            first[True] = min(first[True], position)
            if not rule.headers:
                first[False] = min(first[False], position)
                for status in rule.status:
                    headerless[status] = headerless.get(status, 0) | self.single[position]
        self._headerless_status_bits = headerless
        self._first_status = first
        self._status_needed = needed

    def status_bits(self, status: int | None, headers: bool) -> int:
        """The keyless rules of `status`: all of them when the evidence has response
        headers (`headers`), else those that ask for none."""
        if status is None:
            return 0
        table = self._status_bits if headers else self._headerless_status_bits
        return table.get(status, 0)

    def status_watch(self, bits: int, headers: bool) -> int:
        """For candidates `bits` found with no status (`bits(tokens, None, ...)`), the first
        position at which a caller must know the evidence's status: the best-ranked keyless
        status rule (see `status_bits`) or a candidate with a status condition, whichever
        comes first; past the last rule when neither is there."""
        watch = self._first_status[headers]
        needed = bits & self._status_needed
        if needed:
            watch = min(watch, len(self.rules) - needed.bit_length())
        return watch

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
