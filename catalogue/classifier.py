"""The deterministic classifier: evidence in, one Classification out.

Candidate rules are found by the prefilter (catalogue.prefilter: key words, HTTP status,
exit code, then the words the rule's patterns require), so the cost of a classification
grows with the evidence's length, not with the catalogue's size. Candidates are then
tried in rank order; see `catalogue.rules` for the ordering and for
wrapper rules. The combined text is lowercased once per classification, and searched
once (catalogue.substrings) for every literal the timing reader and the sanitiser would
otherwise test for one by one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime
from threading import Lock

from catalogue.classification import Classification, adopt_fields, field_template
from catalogue.codes import (
    UNCLASSIFIED,
    Confidence,
    ErrorClass,
    Scope,
    code_info,
)
from catalogue.evidence import MAX_EVIDENCE_CHARS, Evidence, EvidenceKind
from catalogue.matching import Subject, holds, is_short, plan_of, short_check
from catalogue.prefilter import Prefilter
from catalogue.rules import (
    Rule,
    Tier,
    check_unique,
    content_version,
    load_builtin_rules,
    ordered,
)
from catalogue.sanitize import REDACTION_TRIGGERS, sanitize, sanitize_scanned
from catalogue.substrings import Substrings
from catalogue.text import (
    make_views,
    report_lines,
    status_in_text,
    tokens_of,
    undecorated_lines,
    views_of,
)
from catalogue.timing import (
    TIMING_TRIGGERS,
    HintSource,
    headers_deny_reset,
    parse_header_timing,
    parse_lowered_timing,
)

NO_MATCH_RULE = "catalogue.no_match.v1"
PROSE_RULE = "catalogue.chunk_is_not_an_error_report.v1"
_new = tuple.__new__  # builds a NamedTuple without its Python-level __new__


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
        self._plans = tuple(plan_of(rule) for rule in self.rules)
        self._short_checks = tuple(short_check(plan) for plan in self._plans)
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
            if holds(rule, subject):
                yield rule

    def select(self, subject: Subject) -> tuple[Rule | None, tuple[Rule, ...]]:
        """The winning rule and, for explanation, every rule that held."""
        matched = tuple(self.matching(subject))
        return _winner(matched), matched

    def _first(self, subject: Subject) -> Rule | None:
        """The winning rule, as `select` finds it, on the hot path: candidates taken off the
        prefilter's bits in this loop (no generator), gates checked inline, stopping at the
        first decisive match; a short text is matched by the rule's `short_check`."""
        views = subject.views
        tokens = views.tokens
        prefilter = self._prefilter
        bits = prefilter.bits(tokens, subject.status, subject.evidence.exit_code)
        if not bits:
            return None
        short = is_short(views)
        flat, rules, checks = views.flat, self.rules, self._short_checks
        gate_words, gate_rest, single = prefilter.words, prefilter.rest, prefilter.single
        last = len(rules) - 1
        wrapper: Rule | None = None
        while bits:
            position = last - (bits.bit_length() - 1)
            bits ^= single[position]
            words = gate_words[position]
            if words is not None:
                if words.isdisjoint(tokens):
                    continue
                rest = gate_rest[position]
                if rest is not None and not any(map(tokens.__ge__, rest)):
                    continue
            rule = rules[position]
            if checks[position](subject, flat, tokens) if short else holds(rule, subject):
                if not rule.wrapper:
                    if wrapper is None or _overrides_wrapper(rule):
                        return rule
                elif wrapper is None:
                    wrapper = rule
        return wrapper

    # -- subjects -------------------------------------------------------------------------

    def subject_of(self, evidence: Evidence) -> Subject | None:
        """What the rules see, or None for a message chunk that is not an error report."""
        combined = evidence.combined_text()
        return self._subject(evidence, combined, combined.lower())

    def _subject(self, evidence: Evidence, combined: str, lowered: str) -> Subject | None:
        """`subject_of`, given the evidence's combined text and that text lowercased."""
        if evidence.kind is EvidenceKind.MESSAGE_CHUNK:
            text = self._error_report_of(combined)
            if not text:
                return None
            views = make_views(text)
            return Subject(evidence, text, views, status_in_text(views.flat), combined)
        views = views_of(lowered)
        status = evidence.http_status
        if status is None and evidence.kind is not EvidenceKind.EXIT:
            status = status_in_text(views.flat)
        return _new(Subject, (evidence, combined, views, status, combined))

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
        combined = evidence.combined_text()
        lowered = combined.lower()  # once, for the views, the timing hint and the excerpt
        subject = self._subject(evidence, combined, lowered)
        # What the timing reader and the sanitiser look for before they do anything, found
        # in one pass (most texts hold none of it).
        found = _TRIGGERS.found(lowered)
        if subject is None:
            return self._unclassified(evidence, PROSE_RULE, combined, found)
        rule = self._first(subject)
        if rule is None:
            return self._unclassified(evidence, NO_MATCH_RULE, combined, found)
        return self._classification(rule, subject, now, lowered, found)

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

    def _classification(
        self,
        rule: Rule,
        subject: Subject,
        now: datetime | None,
        lowered: str | None = None,
        found: AbstractSet[str] | None = None,
    ) -> Classification:
        """The classification `rule` gives `subject`; `lowered` and `found` (the evidence's
        combined text lowercased, and the TRIGGERS it holds) when the caller has them."""
        evidence = subject.evidence
        combined = subject.combined
        if lowered is None or found is None:
            lowered = combined.lower()
            found = _TRIGGERS.found(lowered)
        head = self._heads[rule.id]
        timing: _Timing = _NO_TIMING
        reference = evidence.observed_at or now
        if rule.id in self._reads_timing and reference is not None:
            timing = _timing(evidence, reference, combined, lowered, found)
        return self._result(head, evidence, timing, combined, found)

    def _unclassified(
        self,
        evidence: Evidence,
        rule_id: str,
        combined: str,
        found: AbstractSet[str] | None = None,
    ) -> Classification:
        return self._result(self._heads[rule_id], evidence, _NO_TIMING, combined, found)

    def _result(
        self,
        head: dict[str, object],
        evidence: Evidence,
        timing: _Timing,
        combined: str,
        found: AbstractSet[str] | None,
    ) -> Classification:
        """`head` (what the rule decides) completed by the evidence's identity, the timing
        hint and the excerpt: the evidence's `combined` text sanitised, once per
        classification, here (`found`: the triggers its lowercased text holds, if known)."""
        fields = head.copy()
        fields["provider"] = evidence.provider
        fields["model"] = evidence.model
        fields["phase"] = evidence.phase
        fields["occurred_at"] = evidence.observed_at
        if timing is not _NO_TIMING:
            fields["retry_after_s"], fields["reset_at"], fields["hint_source"] = timing
        fields["safe_excerpt"] = (
            sanitize(combined) if found is None else sanitize_scanned(combined, found)
        )
        return adopt_fields(fields)


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


# Every literal the timing reader and the sanitiser test for before they read anything.
_TRIGGERS = Substrings((*TIMING_TRIGGERS, *REDACTION_TRIGGERS))


def _timing(
    evidence: Evidence, now: datetime, combined: str, lowered: str, found: AbstractSet[str]
) -> _Timing:
    """The timing hint of `evidence`; `lowered` and `found` as for `_classification`."""
    if evidence.headers and headers_deny_reset(evidence.headers):
        return None, None, None  # e.g. out of credits: nothing the text says can reset it
    hint = parse_header_timing(evidence.headers, now) if evidence.headers else None
    zone = None if evidence.timezone is None else evidence.zone()  # most name none
    text, body = evidence.text, evidence.body
    # Text and body are parts of the combined text unless it was cut: what it holds of
    # TRIGGERS covers what they hold, and with no body it is the text itself.
    whole: AbstractSet[str] | None = found if len(combined) < MAX_EVIDENCE_CHARS else None
    if hint is None and text:
        t = lowered if not body and whole is not None else text.lower()
        hint = parse_lowered_timing(t, now, zone, whole)
    source: HintSource | None = hint.source if hint else None
    if hint is None and body:
        hint = parse_lowered_timing(body.lower(), now, zone, whole)
        if hint is not None:
            source = "structured" if hint.source == "structured" else "body"
    if hint is None:
        return None, None, None
    return hint.retry_after_s, hint.reset_at, source


_DEFAULT: list[Catalogue] = []
_DEFAULT_BUILDING = Lock()


def default_catalogue() -> Catalogue:
    """The catalogue built from the shipped rule files (built once per process: a caller
    that finds another thread building it waits for that one, ~1 s of CPU, instead of
    building a second)."""
    if _DEFAULT:
        return _DEFAULT[0]
    with _DEFAULT_BUILDING:
        if not _DEFAULT:
            _DEFAULT.append(Catalogue(load_builtin_rules()))
    return _DEFAULT[0]


def classify(evidence: Evidence, now: datetime | None = None) -> Classification:
    """Classify with the shipped catalogue."""
    return default_catalogue().classify(evidence, now)


def explain(evidence: Evidence, now: datetime | None = None) -> Explanation:
    return default_catalogue().explain(evidence, now)
