"""The deterministic classifier: evidence in, one Classification out.

Candidate rules are found by the prefilter (catalogue.prefilter: key words, HTTP status,
exit code, then the words the rule's patterns require), so the cost of a classification
grows with the evidence's length, not with the catalogue's size. Candidates are then
tried in rank order; see `catalogue.rules` for the ordering and for
wrapper rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import NamedTuple

from catalogue.classification import Classification, adopt_fields, field_template
from catalogue.codes import (
    UNCLASSIFIED,
    Confidence,
    ErrorClass,
    Scope,
    code_info,
)
from catalogue.evidence import Evidence, EvidenceKind
from catalogue.prefilter import Prefilter
from catalogue.rules import (
    PatternGroup,
    Probe,
    Rule,
    Tier,
    check_unique,
    content_version,
    load_builtin_rules,
    ordered,
)
from catalogue.sanitize import sanitize
from catalogue.text import (
    TextViews,
    make_views,
    report_lines,
    status_in_text,
    tokens_of,
    undecorated_lines,
)
from catalogue.timing import HintSource, headers_deny_reset, parse_header_timing, parse_timing

NO_MATCH_RULE = "catalogue.no_match.v1"
PROSE_RULE = "catalogue.chunk_is_not_an_error_report.v1"


class Subject(NamedTuple):
    """Evidence reduced to what rules look at (a NamedTuple: cheap to build per call)."""

    evidence: Evidence
    text: str
    views: TextViews
    status: int | None
    combined: str  # the evidence's own text (`Evidence.combined_text`), for the excerpt


@dataclass(frozen=True, slots=True)
class Explanation:
    classification: Classification
    winner: Rule | None
    matched: tuple[Rule, ...]
    subject: Subject


class Catalogue:
    """An ordered, indexed rule set. Immutable once built. Its `version` is derived from
    the rules' content (`catalogue.rules.content_version`) unless one is given."""

    def __init__(self, rules: Sequence[Rule], version: str | None = None) -> None:
        self.rules: tuple[Rule, ...] = tuple(ordered(rules))
        check_unique(self.rules)  # a classification names its rule by id
        self.version = version if version is not None else content_version(self.rules)
        by_key: dict[bytes, list[int]] = {}
        for position, rule in enumerate(self.rules):
            for key in rule.keys:
                by_key.setdefault(key.encode("ascii"), []).append(position)
        self._by_key = {k: tuple(v) for k, v in by_key.items()}
        self._prefilter = Prefilter(self.rules)
        # What each rule (and each way of matching none) puts in a classification, built
        # once: a low-confidence rule's match is unclassified for policy, and its id says
        # what the evidence looked like.
        # Each head is every field of the classification in field order (its template),
        # so a result is one copy of it with the evidence's fields filled in.
        self._heads = {rule.id: field_template(**self._head_of(rule)) for rule in self.rules}
        for rule_id in (NO_MATCH_RULE, PROSE_RULE):
            self._heads[rule_id] = field_template(**self._unclassified_head(rule_id))
        # Rules whose classifications read timing hints: their code uses them, they do not
        # say no reset lifts the failure, and they are not weak evidence (unclassified).
        self._reads_timing = frozenset(
            rule.id
            for rule in self.rules
            if code_info(rule.code).uses_timing
            and not rule.no_reset
            and rule.confidence is not Confidence.LOW
        )

    def _head_of(self, rule: Rule) -> dict[str, object]:
        if rule.confidence is Confidence.LOW:
            return self._unclassified_head(rule.id)
        return {
            "code": rule.code,
            "error_class": code_info(rule.code).error_class,
            "confidence": rule.confidence,
            "scope": rule.scope,
            "rule": rule.id,
            "catalogue_version": self.version,
        }

    def _unclassified_head(self, rule_id: str) -> dict[str, object]:
        return {
            "code": UNCLASSIFIED,
            "error_class": ErrorClass.UNCLASSIFIED,
            "confidence": Confidence.LOW,
            "scope": Scope.REQUEST,
            "rule": rule_id,
            "catalogue_version": self.version,
        }

    # -- matching -------------------------------------------------------------------------

    def _candidates(self, subject: Subject) -> Iterator[Rule]:
        return self._prefilter.candidates(
            subject.views.tokens, subject.status, subject.evidence.exit_code
        )

    def matching(self, subject: Subject) -> Iterator[Rule]:
        """Every rule whose conditions hold, in rank order."""
        for rule in self._candidates(subject):
            if _holds(rule, subject):
                yield rule

    def select(self, subject: Subject) -> tuple[Rule | None, tuple[Rule, ...]]:
        """The winning rule and, for explanation, every rule that held."""
        matched = tuple(self.matching(subject))
        return _winner(matched), matched

    def _first(self, subject: Subject) -> Rule | None:
        # The hot path: stop at the first decisive match instead of collecting them all.
        wrapper: Rule | None = None
        for rule in self._candidates(subject):
            if not _holds(rule, subject):
                continue
            if rule.wrapper:
                wrapper = wrapper or rule
            elif wrapper is None or _overrides_wrapper(rule):
                return rule
        return wrapper

    # -- subjects -------------------------------------------------------------------------

    def subject_of(self, evidence: Evidence) -> Subject | None:
        """What the rules see, or None for a message chunk that is not an error report."""
        combined = evidence.combined_text()
        if evidence.kind is EvidenceKind.MESSAGE_CHUNK:
            text = self._error_report_of(combined)
            if not text:
                return None
            views = make_views(text)
            return Subject(evidence, text, views, status_in_text(views.flat), combined)
        views = make_views(combined)
        status = evidence.http_status
        if status is None and evidence.kind is not EvidenceKind.EXIT:
            status = status_in_text(views.flat)
        return Subject(evidence, combined, views, status, combined)

    def _error_report_of(self, chunk: str) -> str:
        # Assistant prose is never evidence: keep only lines that open with an error
        # prefix, or that a signature rule matches from their first character.
        kept = report_lines(chunk)
        for line in undecorated_lines(chunk):
            if line not in kept and self._anchored_signature(line):
                kept.append(line)
        return "\n".join(kept)

    def _anchored_signature(self, line: str) -> bool:
        positions: set[int] = set()
        for token in tokens_of(line):
            positions.update(self._by_key.get(token, ()))
        for position in positions:
            rule = self.rules[position]
            if rule.tier <= Tier.NEUTRAL and any(p.match(line) for p in rule.match):
                return True
        return False

    # -- results --------------------------------------------------------------------------

    def classify(self, evidence: Evidence, now: datetime | None = None) -> Classification:
        """Classify one piece of evidence. `now` is the reference time for relative and
        clock-time hints when the evidence has no `observed_at`; with neither, no timing
        hint is produced (it could not be validated)."""
        subject = self.subject_of(evidence)
        if subject is None:
            return self._unclassified(evidence, PROSE_RULE, evidence.combined_text())
        rule = self._first(subject)
        if rule is None:
            return self._unclassified(evidence, NO_MATCH_RULE, subject.combined)
        return self._classification(rule, subject, now)

    def explain(self, evidence: Evidence, now: datetime | None = None) -> Explanation:
        subject = self.subject_of(evidence)
        if subject is None:
            combined = evidence.combined_text()
            subject = Subject(evidence, "", make_views(""), None, combined)
            result = self._unclassified(evidence, PROSE_RULE, combined)
            return Explanation(result, None, (), subject)
        winner, matched = self.select(subject)
        if winner is None:
            result = self._unclassified(evidence, NO_MATCH_RULE, subject.combined)
        else:
            result = self._classification(winner, subject, now)
        return Explanation(result, winner, matched, subject)

    def _classification(self, rule: Rule, subject: Subject, now: datetime | None) -> Classification:
        evidence = subject.evidence
        head = self._heads[rule.id]
        timing: _Timing = _NO_TIMING
        reference = evidence.observed_at or now
        if rule.id in self._reads_timing and reference is not None:
            timing = _timing(evidence, reference)
        return self._result(head, evidence, timing, subject.combined)

    def _unclassified(self, evidence: Evidence, rule_id: str, combined: str) -> Classification:
        return self._result(self._heads[rule_id], evidence, _NO_TIMING, combined)

    def _result(
        self, head: dict[str, object], evidence: Evidence, timing: _Timing, combined: str
    ) -> Classification:
        """`head` (what the rule decides) completed by the evidence's identity, the timing
        hint and the excerpt: the evidence's `combined` text sanitised, once per
        classification, here."""
        fields = head.copy()
        fields["provider"] = evidence.provider
        fields["model"] = evidence.model
        fields["phase"] = evidence.phase
        fields["occurred_at"] = evidence.observed_at
        if timing is not _NO_TIMING:
            fields["retry_after_s"], fields["reset_at"], fields["hint_source"] = timing
        fields["safe_excerpt"] = sanitize(combined)
        return adopt_fields(fields)


def _holds(rule: Rule, subject: Subject) -> bool:
    """Whether every condition of a candidate rule holds. (A candidate's keys are among the
    text's tokens: `Catalogue._candidates` found it through them, or it has none.)"""
    if rule.filters_identity and not _identity_fits(rule, subject):
        return False
    views = subject.views
    texts = views.all
    if rule.bounded_bytes is not None:
        if not any(_bounded_match(rule, v) for v in texts):
            return False
    elif rule.match_any is not None and not _matches(rule, texts, views.tokens):
        return False
    if rule.require_probes and not all(
        any(p.found_in(v) for v in texts) for p in rule.require_probes
    ):
        return False
    unless = rule.unless_any
    return unless is None or not any(_finds(unless, rule.unless_probes, v) for v in texts)


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


def _matches(rule: Rule, views: tuple[str, ...], tokens: AbstractSet[bytes]) -> bool:
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
    """`_matches` on the commonest text: one short view, where each group is scanned as
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


# Below this length one alternation scan beats a Python-level loop of substring checks.
SHORT_VIEW = 600


def _finds(alternation: re.Pattern[str] | None, probes: tuple[Probe, ...], view: str) -> bool:
    if alternation is None:
        return False
    if len(view) < SHORT_VIEW:
        return alternation.search(view) is not None
    return any(p.found_in(view) for p in probes)


def _winner(matched: Sequence[Rule]) -> Rule | None:
    wrapper: Rule | None = None
    for rule in matched:
        if rule.wrapper:
            wrapper = wrapper or rule
        elif wrapper is None or _overrides_wrapper(rule):
            return rule
    return wrapper


def _overrides_wrapper(rule: Rule) -> bool:
    """Whether a rule that holds beside a (transient) wrapper decides instead of it: a
    signature that states a cause always does; a bare status or a weak pattern does when
    it says the wrapped failure is not transient. A wrapper never makes a hard, invalid or
    non-provider failure transient: a weak (low-confidence) cause makes the result
    unclassified rather than a transient guess."""
    if rule.tier is not Tier.STATUS and rule.confidence is not Confidence.LOW:
        return True
    return code_info(rule.code).error_class is not ErrorClass.TRANSIENT


_Timing = tuple[float | None, datetime | None, HintSource | None]
_NO_TIMING: _Timing = (None, None, None)


def _timing(evidence: Evidence, now: datetime) -> _Timing:
    if evidence.headers and headers_deny_reset(evidence.headers):
        return None, None, None  # e.g. out of credits: nothing the text says can reset it
    hint = parse_header_timing(evidence.headers, now) if evidence.headers else None
    zone = evidence.zone()
    if hint is None and evidence.text:
        hint = parse_timing(evidence.text, now, zone)
    source: HintSource | None = hint.source if hint else None
    if hint is None and evidence.body:
        hint = parse_timing(evidence.body, now, zone)
        if hint is not None:
            source = "structured" if hint.source == "structured" else "body"
    if hint is None:
        return None, None, None
    return hint.retry_after_s, hint.reset_at, source


@cache
def default_catalogue() -> Catalogue:
    """The catalogue built from the shipped rule files (loaded once per process)."""
    return Catalogue(load_builtin_rules())


def classify(evidence: Evidence, now: datetime | None = None) -> Classification:
    """Classify with the shipped catalogue."""
    return default_catalogue().classify(evidence, now)


def explain(evidence: Evidence, now: datetime | None = None) -> Explanation:
    return default_catalogue().explain(evidence, now)
