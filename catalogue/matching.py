"""Whether one candidate rule holds on one piece of evidence: the classifier's inner loop.

A candidate reached here was found by the prefilter (catalogue.prefilter), so its keys
are among the text's tokens (or it has none). Its identity filters come first (set
lookups), then its match patterns by group (catalogue.rules.PatternGroup), then its
`require` and `unless` patterns. The commonest text is one short view (no terminal wrap,
under SHORT_VIEW characters): it takes a path of its own with no per-view loop, where each
group is one C-level alternation scan.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from functools import partial
from typing import NamedTuple

from catalogue.evidence import Evidence
from catalogue.rules import PatternGroup, Probe, Rule
from catalogue.text import TextViews

__all__ = [
    "SHORT_VIEW",
    "ShortCheck",
    "ShortPlan",
    "Subject",
    "holds",
    "holds_short",
    "matches",
    "plan_of",
    "short_check",
]

# Below this length one alternation scan beats a Python-level loop of substring checks.
SHORT_VIEW = 600


class Subject(NamedTuple):
    """Evidence reduced to what rules look at (a NamedTuple: cheap to build per call)."""

    evidence: Evidence
    text: str
    views: TextViews
    status: int | None
    combined: str  # the evidence's own text (`Evidence.combined_text`), for the excerpt


def holds(rule: Rule, subject: Subject) -> bool:
    """Whether every condition of a candidate rule holds."""
    if rule.filters_identity and not _identity_fits(rule, subject):
        return False
    views = subject.views
    short = views.joined is None and len(views.flat) < SHORT_VIEW
    texts = views.all
    if rule.bounded_bytes is not None:
        if not any(_bounded_match(rule, v) for v in texts):
            return False
    elif rule.match_any is not None:
        found = (
            _matches_short(rule, views.flat, views.tokens)
            if short
            else matches(rule, texts, views.tokens)
        )
        if not found:
            return False
    if rule.require_probes and not all(
        any(p.found_in(v) for v in texts) for p in rule.require_probes
    ):
        return False
    unless = rule.unless_any
    return unless is None or not _excluded(unless, rule.unless_probes, views, short)


class ShortPlan(NamedTuple):
    """What `holds_short` reads of a rule, unpacked in one step: the groups as (literal or
    word, alternation) pairs, so trying one costs a substring or set test and a scan, with
    no attribute look-ups and no set built per rule."""

    rule: Rule
    unanchored: re.Pattern[str] | None
    literal_groups: tuple[tuple[str, re.Pattern[str]], ...]
    # Up to WORD_PAIRS (word, alternation) pairs, tried in turn; None when the rule has
    # more, and the group words the tokens hold are found by one set intersection.
    word_groups: tuple[tuple[bytes, re.Pattern[str]], ...] | None
    require: tuple[Probe, ...]
    unless: re.Pattern[str] | None
    # The literals one of which any `unless` match contains (catalogue.literals), tested
    # before the alternation is scanned (most texts hold none: an exception is rare); None
    # when some pattern has none, or when there are too many to beat one scan.
    unless_literals: tuple[str, ...] | None


# Past this many group words, one C-level intersection beats a test per word.
WORD_PAIRS = 4
# Past this many literals, substring tests cost about what one scan of a short text does.
UNLESS_LITERALS = 7


def plan_of(rule: Rule) -> ShortPlan:
    words = rule.match_groups
    pairs = tuple((word, words[word].alternation) for word in sorted(rule.match_group_words))
    literals: tuple[str, ...] | None = tuple(
        dict.fromkeys(literal for probe in rule.unless_probes for literal in probe.literals or ())
    )
    if any(p.literals is None for p in rule.unless_probes) or len(literals or ()) > UNLESS_LITERALS:
        literals = None
    return ShortPlan(
        rule,
        None if rule.match_unanchored is None else rule.match_unanchored.alternation,
        tuple((literal, group.alternation) for literal, group in rule.match_literal_groups),
        pairs if len(pairs) <= WORD_PAIRS else None,
        rule.require_probes,
        rule.unless_any,
        literals,
    )


def is_short(views: TextViews) -> bool:
    """Whether the text is one short view: the commonest case, with a path of its own."""
    return views.joined is None and len(views.flat) < SHORT_VIEW


def holds_short(  # noqa: PLR0911, PLR0912 - the inner loop inline: helper calls cost ~10 %
    plan: ShortPlan, subject: Subject, flat: str, tokens: AbstractSet[bytes]
) -> bool:
    """`holds` on a subject whose text is one short view (`is_short`), `flat` and `tokens`
    being its view and tokens: the same answer, with each group scanned as one
    alternation."""
    rule, unanchored, literal_groups, word_groups, require, unless, unless_literals = plan
    if rule.filters_identity and not _identity_fits(rule, subject):
        return False
    if rule.bounded_bytes is not None:
        if not _bounded_match(rule, flat):
            return False
    elif rule.match_any is not None and (unanchored is None or unanchored.search(flat) is None):
        # No unanchored pattern matched: a group behind its literal, then by its word.
        for literal, alternation in literal_groups:
            if literal in flat and alternation.search(flat) is not None:
                break
        else:
            if word_groups is None:
                groups = rule.match_groups
                for word in rule.match_group_words.intersection(tokens):
                    if groups[word].alternation.search(flat) is not None:
                        break
                else:
                    return False
            else:
                for word, alternation in word_groups:
                    if word in tokens and alternation.search(flat) is not None:
                        break
                else:
                    return False
    for probe in require:
        if not probe.found_in(flat):
            return False
    if unless is None:
        return True
    if unless_literals is not None:
        for literal in unless_literals:
            if literal in flat:
                break
        else:
            return True
    return unless.search(flat) is None


# `holds_short` for one rule, its plan bound: (subject, flat view, tokens) -> whether it holds.
ShortCheck = Callable[[Subject, str, AbstractSet[bytes]], bool]
_Search = Callable[[str], "re.Match[str] | None"]


def short_check(plan: ShortPlan) -> ShortCheck:
    """`holds_short` bound to one rule's plan, as a closure shaped to the rule: most rules
    are one or two groups and nothing else, and their check is then one expression, with
    no step for the conditions they do not have. The same answer (a test compares them):
    a rule holds when some group's literal or word is there and its alternation matches
    (the groups' order does not change that), its `require` patterns hold and no `unless`
    pattern does; a word group is searched only when the text also holds one of its
    literals (`_word_group_search`), which every match contains. A rule of another shape is
    checked by `holds_short` itself."""
    rule, unanchored, literal_groups, word_groups, require, unless, unless_literals = plan
    if (
        rule.filters_identity
        or rule.bounded_bytes is not None
        or rule.match_any is None
        or unanchored is not None
    ):
        return partial(holds_short, plan)
    literals = tuple((literal, alternation.search) for literal, alternation in literal_groups)
    groups = rule.match_groups
    if word_groups is None:  # more group words than WORD_PAIRS: those held, by intersection
        searches: dict[bytes, _Search] = {
            word: _word_group_search(groups[word]) for word in rule.match_group_words
        }
        found = _many_words_check(literals, rule.match_group_words, searches)
    else:
        words = tuple((word, _word_group_search(groups[word])) for word, _ in word_groups)
        found = _found_check(literals, words)
    if require:
        found = _required_check(found, require)
    if unless is None:
        return found
    excluded = unless.search
    if unless_literals is None:

        def check(subject: Subject, flat: str, tokens: AbstractSet[bytes]) -> bool:
            return found(subject, flat, tokens) and excluded(flat) is None

        return check

    def check_literals(subject: Subject, flat: str, tokens: AbstractSet[bytes]) -> bool:
        if not found(subject, flat, tokens):
            return False
        for literal in unless_literals:
            if literal in flat:
                return excluded(flat) is None
        return True

    return check_literals


# Up to this many literals are tested before a word group's scan (every group of the
# catalogue has at most six); past it, the tests would cost about what a scan does.
GROUP_LITERALS = 6


def _word_group_search(group: PatternGroup) -> _Search:
    """The search of a word group's alternation, behind a test for the literals one of
    which every match of the group contains (catalogue.literals), when each of its patterns
    has some and they are few. The word says little when it is a common one ("limit" in a
    rate-limit text, "error" in most), and a group opening with no literal character is
    tried at every position: several microseconds on a short text, where testing that a
    literal is there costs tens of nanoseconds."""
    search = group.alternation.search
    literals = tuple(
        dict.fromkeys(literal for probe in group.probes for literal in probe.literals or ())
    )
    if any(p.literals is None for p in group.probes) or len(literals) > GROUP_LITERALS:
        return search
    if len(literals) == 1:
        (literal,) = literals

        def one_literal(text: str) -> re.Match[str] | None:
            return search(text) if literal in text else None

        return one_literal

    def some_literal(text: str) -> re.Match[str] | None:
        for literal in literals:
            if literal in text:
                return search(text)
        return None

    return some_literal


def _required_check(found: ShortCheck, require: tuple[Probe, ...]) -> ShortCheck:
    def check(subject: Subject, flat: str, tokens: AbstractSet[bytes]) -> bool:
        if not found(subject, flat, tokens):
            return False
        for probe in require:  # noqa: SIM110 - a loop: `all` of a generator costs a frame
            if not probe.found_in(flat):
                return False
        return True

    return check


def _many_words_check(
    literals: tuple[tuple[str, _Search], ...],
    words: frozenset[bytes],
    searches: dict[bytes, _Search],
) -> ShortCheck:
    def check(subject: Subject, flat: str, tokens: AbstractSet[bytes]) -> bool:
        for literal, search in literals:
            if literal in flat and search(flat) is not None:
                return True
        for word in words.intersection(tokens):  # noqa: SIM110 - as in `groups` below
            if searches[word](flat) is not None:
                return True
        return False

    return check


def _found_check(
    literals: tuple[tuple[str, _Search], ...], words: tuple[tuple[bytes, _Search], ...]
) -> ShortCheck:
    """Whether some group holds: its literal is in the flat view (or its word among the
    tokens) and its alternation matches."""
    if not literals and len(words) == 1:
        ((word, search),) = words

        def one_word(subject: Subject, flat: str, tokens: AbstractSet[bytes]) -> bool:
            return word in tokens and search(flat) is not None

        return one_word
    if not literals and len(words) == 2:
        (word, search), (other, other_search) = words

        def two_words(subject: Subject, flat: str, tokens: AbstractSet[bytes]) -> bool:
            return (word in tokens and search(flat) is not None) or (
                other in tokens and other_search(flat) is not None
            )

        return two_words
    if len(literals) == 1 and not words:
        ((literal, search),) = literals

        def one_literal(subject: Subject, flat: str, tokens: AbstractSet[bytes]) -> bool:
            return literal in flat and search(flat) is not None

        return one_literal

    def groups(subject: Subject, flat: str, tokens: AbstractSet[bytes]) -> bool:
        for literal, search in literals:
            if literal in flat and search(flat) is not None:
                return True
        for word, search in words:  # noqa: SIM110 - a loop: `any` of a generator costs a frame
            if word in tokens and search(flat) is not None:
                return True
        return False

    return groups


def _excluded(
    unless: re.Pattern[str], probes: tuple[Probe, ...], views: TextViews, short: bool
) -> bool:
    """Whether an `unless` pattern of a rule holds in some view."""
    if short:
        return unless.search(views.flat) is not None
    return any(_finds(unless, probes, v) for v in views.all)


def _identity_fits(rule: Rule, subject: Subject) -> bool:
    evidence = subject.evidence
    return not (
        (rule.kinds and evidence.kind not in rule.kinds)
        or (rule.providers and evidence.provider not in rule.providers)
        or (rule.agents and evidence.agent not in rule.agents)
        or (rule.status and subject.status not in rule.status)
        or (rule.exit_codes and evidence.exit_code not in rule.exit_codes)
        or (rule.headers and not _headers_fit(rule, evidence))
    )


def _headers_fit(rule: Rule, evidence: Evidence) -> bool:
    for name, pattern in rule.headers:
        value = evidence.headers.get(name)
        if not isinstance(value, str) or pattern.search(value.strip().lower()) is None:
            return False
    return True


def matches(rule: Rule, views: tuple[str, ...], tokens: AbstractSet[bytes]) -> bool:
    """Whether a `match` pattern of a rule that has some holds in some view. Only the
    patterns whose anchor word is among the text's tokens, or whose required literal the
    view contains, are scanned (a pattern cannot match without them; see
    catalogue.literals), and those with neither."""
    if len(views) == 1 and len(views[0]) < SHORT_VIEW:
        return _matches_short(rule, views[0], tokens)
    unanchored = rule.match_unanchored
    if unanchored is not None and _group_finds(unanchored, views):
        return True
    if rule.match_literal_groups:
        for view in views:
            for literal, group in rule.match_literal_groups:
                if literal in view and _group_finds(group, (view,)):
                    return True
    groups = rule.match_groups
    return any(_group_finds(groups[w], views) for w in rule.match_group_words.intersection(tokens))


def _matches_short(rule: Rule, view: str, tokens: AbstractSet[bytes]) -> bool:
    """`matches` on the commonest text: one short view, where each group is scanned as
    one alternation."""
    unanchored = rule.match_unanchored
    if unanchored is not None and unanchored.alternation.search(view) is not None:
        return True
    for literal, group in rule.match_literal_groups:
        if literal in view and group.alternation.search(view) is not None:
            return True
    groups = rule.match_groups
    for word in rule.match_group_words.intersection(tokens):
        if groups[word].alternation.search(view) is not None:
            return True
    return False


def _group_finds(group: PatternGroup, views: tuple[str, ...]) -> bool:
    for view in views:
        if len(view) < SHORT_VIEW:
            if group.alternation.search(view) is not None:
                return True
        elif any(p.found_in(view) for p in group.probes):
            return True
    return False


def _bounded_match(rule: Rule, view: str) -> bool:
    limit = rule.bounded_bytes or 0
    for probe in rule.match_probes:
        found = probe.pattern.search(view)
        if found is not None and 0 < len(found.group("bounded").encode("utf-8")) <= limit:
            return True
    return False


def _finds(alternation: re.Pattern[str] | None, probes: tuple[Probe, ...], view: str) -> bool:
    if alternation is None:
        return False
    if len(view) < SHORT_VIEW:
        return alternation.search(view) is not None
    return any(p.found_in(view) for p in probes)
