"""Catalogue rules: data files in `catalogue/rules/`, loaded and checked once.

A rule is a set of conditions over one piece of evidence. Rules are ordered by tier
(structured metadata, exact provider or agent signatures, provider-neutral signatures,
bare HTTP status, broad patterns) and then by an explicit priority; the first rule whose
conditions all hold wins. A *wrapper* rule (a transport-loss or process-exit line that
usually wraps the real cause) only wins when no other signature matches.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from enum import IntEnum
from importlib import resources
from typing import Any, TypeVar

from catalogue.codes import CATALOGUE_VERSION, CODES, Confidence, Scope, code_info
from catalogue.errors import RecoveryError
from catalogue.evidence import EvidenceKind
from catalogue.literals import anchor_words, required_literals
from catalogue.scan import branches, scanning

RULE_ID = re.compile(r"^[a-z0-9_\-]+(\.[a-z0-9_\-]+)*\.v[0-9]+$")
KEY = re.compile(r"^[a-z0-9_]+$")


class Tier(IntEnum):
    STRUCTURED = 1
    EXACT = 2
    NEUTRAL = 3
    STATUS = 4
    BROAD = 5


_DEFAULT_CONFIDENCE = {
    Tier.STRUCTURED: Confidence.HIGH,
    Tier.EXACT: Confidence.HIGH,
    Tier.NEUTRAL: Confidence.HIGH,
    Tier.STATUS: Confidence.MEDIUM,
    Tier.BROAD: Confidence.MEDIUM,
}


# From this length a top-level alternation is scanned branch by branch (Probe.found_in).
LONG_TEXT = 600


@dataclass(frozen=True, slots=True)
class Probe:
    """A pattern, the literals one of which any match contains, and the words (tokens) one
    of which any match contains: a set lookup, then a substring check, then the scan (with
    `scan`, the pattern rewritten to search from a literal prefix: catalogue.scan)."""

    pattern: re.Pattern[str]
    literals: tuple[str, ...] | None
    anchors: frozenset[bytes] | None
    scan: re.Pattern[str] = field(compare=False, hash=False, repr=False)
    # A top-level alternation's branches, scanned one by one on a long text (catalogue.scan).
    branches: tuple[re.Pattern[str], ...] = field(default=(), compare=False, hash=False, repr=False)

    @classmethod
    def of(cls, pattern: re.Pattern[str]) -> Probe:
        literals = required_literals(pattern)
        words = anchor_words(literals)
        anchors = None if words is None else frozenset(w.encode("ascii") for w in words)
        return cls(pattern, literals, anchors, scanning(pattern), branches(pattern))

    def possible(self, tokens: AbstractSet[bytes]) -> bool:
        return self.anchors is None or not self.anchors.isdisjoint(tokens)

    def found_in(self, text: str) -> bool:
        literals = self.literals
        if literals is not None and not any(map(text.__contains__, literals)):
            return False
        if self.branches and len(text) >= LONG_TEXT:
            return any(branch.search(text) is not None for branch in self.branches)
        return self.scan.search(text) is not None


@dataclass(frozen=True, slots=True)
class PatternGroup:
    """Some of a rule's match patterns: as one alternation (one C-level scan, cheapest on a
    short text) and as probes (each behind its substring check, cheapest on a long one)."""

    alternation: re.Pattern[str]
    probes: tuple[Probe, ...]


def _group(probes: Sequence[Probe]) -> PatternGroup:
    alternation = scanning(re.compile("|".join(f"(?:{p.pattern.pattern})" for p in probes)))
    return PatternGroup(alternation, tuple(probes))


_Groups = tuple[
    dict[bytes, PatternGroup], tuple[tuple[str, PatternGroup], ...], PatternGroup | None
]


def _match_groups(probes: Sequence[Probe]) -> _Groups:
    by_word: dict[bytes, list[Probe]] = {}
    by_literal: dict[str, list[Probe]] = {}
    unanchored = []
    for probe in probes:
        if probe.anchors is not None:
            for word in sorted(probe.anchors):
                by_word.setdefault(word, []).append(probe)
        elif probe.literals is not None:
            for literal in probe.literals:
                by_literal.setdefault(literal, []).append(probe)
        else:
            unanchored.append(probe)
    return (
        {word: _group(members) for word, members in by_word.items()},
        tuple((literal, _group(members)) for literal, members in by_literal.items()),
        _group(unanchored) if unanchored else None,
    )


class RuleError(RecoveryError, ValueError):
    """A rule file that cannot be loaded; the message names the file, rule and field.
    Also a ValueError, as it always was."""


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    code: str
    tier: Tier
    confidence: Confidence
    scope: Scope
    why: str
    keys: frozenset[str] = frozenset()
    key_bytes: frozenset[bytes] = frozenset()  # the same keys, as the tokenizer yields them
    match: tuple[re.Pattern[str], ...] = ()
    require: tuple[re.Pattern[str], ...] = ()
    unless: tuple[re.Pattern[str], ...] = ()
    # The same patterns in two shapes, chosen by text length in `Rule.finds`: each behind
    # a cheap substring check (see catalogue.literals), and all of an any-of list as one
    # alternation (one C-level scan: cheaper than many Python calls on short texts).
    match_probes: tuple[Probe, ...] = ()
    require_probes: tuple[Probe, ...] = ()
    unless_probes: tuple[Probe, ...] = ()
    match_any: re.Pattern[str] | None = None
    unless_any: re.Pattern[str] | None = None
    # Words one of which any match contains (None when some pattern has no anchor word):
    # a rule whose anchors are all absent from a text is rejected with one set operation.
    match_anchors: frozenset[bytes] | None = None
    # The match patterns grouped by anchor word (a pattern with several anchors is in each
    # of their groups), each group as one alternation beside its probes; the patterns with
    # no anchor word grouped the same way by required literal, and those with neither as
    # one group. Only the groups whose word a text holds (or whose literal it contains) are
    # scanned.
    match_groups: Mapping[bytes, PatternGroup] = field(
        default_factory=dict, compare=False, hash=False
    )
    match_group_words: frozenset[bytes] = frozenset()
    match_literal_groups: tuple[tuple[str, PatternGroup], ...] = field(
        default=(), compare=False, hash=False
    )
    match_unanchored: PatternGroup | None = field(default=None, compare=False, hash=False)
    filters_identity: bool = False  # any kinds/providers/agents/status/exit-code condition
    status: frozenset[int] = frozenset()
    exit_codes: frozenset[int] = frozenset()
    kinds: frozenset[EvidenceKind] = frozenset()
    providers: frozenset[str] = frozenset()
    agents: frozenset[str] = frozenset()
    # Response headers that must be present, each with a pattern its lowercased value must
    # contain (header names lowercased): structured metadata a status alone cannot carry.
    headers: tuple[tuple[str, re.Pattern[str]], ...] = ()
    wrapper: bool = False
    # The evidence this rule matches states that no reset will lift the failure (a quota
    # of zero, overage without credits): no timing hint is read, whatever the text says.
    no_reset: bool = False
    priority: int = 100
    # When set, a match counts only if its named group `bounded` is non-empty and at most
    # this many bytes of UTF-8 (a regex counts characters; some signatures bound bytes).
    bounded_bytes: int | None = None
    source: str = field(default="", compare=False)

    @property
    def rank(self) -> tuple[int, int]:
        return (int(self.tier), self.priority)


_ALLOWED_FIELDS = frozenset(
    {
        "id", "code", "tier", "confidence", "scope", "why", "keys", "match", "require",
        "unless", "status", "exit_codes", "kinds", "providers", "agents", "headers", "wrapper",
        "no_reset", "priority", "bounded_bytes",
    }
)  # fmt: skip


def _strings(raw: Mapping[str, Any], name: str, where: str) -> tuple[str, ...]:
    value = raw.get(name, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RuleError(f"{where}.{name}: must be a string or a list of strings, got {value!r}")
    return tuple(value)


def _patterns(raw: Mapping[str, Any], name: str, where: str) -> tuple[re.Pattern[str], ...]:
    compiled = []
    for text in _strings(raw, name, where):
        literal_part = text.replace("(?P<", "(?<").replace("(?P=", "(?=")  # group syntax
        if literal_part != literal_part.lower() and "\\" not in text:
            raise RuleError(f"{where}.{name}: patterns match lowercase text, got {text!r}")
        try:
            compiled.append(re.compile(text))
        except re.error as exc:
            raise RuleError(f"{where}.{name}: invalid regular expression {text!r}: {exc}") from exc
    return tuple(compiled)


def _header_patterns(raw: Mapping[str, Any], where: str) -> tuple[tuple[str, re.Pattern[str]], ...]:
    table = raw.get("headers", {})
    if not isinstance(table, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in table.items()
    ):
        raise RuleError(f"{where}.headers: must be a table of header name = pattern strings")
    out = []
    for name, text in sorted(table.items()):
        where_header = f"{where}.headers.{name}"
        if text != text.lower() and "\\" not in text:
            raise RuleError(f"{where_header}: patterns match lowercase text, got {text!r}")
        try:
            out.append((name.strip().lower(), re.compile(text)))
        except re.error as exc:
            raise RuleError(f"{where_header}: invalid regular expression {text!r}: {exc}") from exc
    return tuple(out)


def _statuses(raw: Mapping[str, Any], name: str, where: str) -> frozenset[int]:
    out: set[int] = set()
    values = raw.get(name, [])
    if not isinstance(values, list):
        values = [values]
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool):
            out.add(value)
        elif isinstance(value, str) and re.fullmatch(r"\d{3}-\d{3}", value):
            low, high = (int(v) for v in value.split("-"))
            out.update(range(low, high + 1))
        else:
            raise RuleError(f"{where}.{name}: expected a status or 'low-high', got {value!r}")
    return frozenset(out)


_E = TypeVar("_E", Confidence, Scope)


def _enum_value(enum: type[_E], raw: Mapping[str, Any], name: str, where: str, default: _E) -> _E:
    if name not in raw:
        return default
    try:
        return enum(raw[name])
    except ValueError:
        allowed = ", ".join(m.value for m in enum)
        raise RuleError(f"{where}.{name}: must be one of {allowed}, got {raw[name]!r}") from None


def parse_rule(raw: Mapping[str, Any], source: str) -> Rule:
    rule_id = raw.get("id")
    where = f"{source}[{rule_id or '?'}]"
    if not isinstance(rule_id, str) or not RULE_ID.match(rule_id):
        raise RuleError(f"{where}.id: must be a versioned dotted id like 'a.b.v1', got {rule_id!r}")
    unknown = set(raw) - _ALLOWED_FIELDS
    if unknown:
        raise RuleError(f"{where}: unknown field(s) {sorted(unknown)}")
    code = raw.get("code")
    if not isinstance(code, str) or code not in CODES:
        raise RuleError(f"{where}.code: not in the code registry, got {code!r}")
    tier_name = raw.get("tier")
    try:
        tier = Tier[str(tier_name).upper()]
    except KeyError:
        names = ", ".join(t.name.lower() for t in Tier)
        raise RuleError(f"{where}.tier: must be one of {names}, got {tier_name!r}") from None
    why = raw.get("why")
    if not isinstance(why, str) or not why.strip():
        raise RuleError(f"{where}.why: every rule says why it exists")
    keys = frozenset(k.lower() for k in _strings(raw, "keys", where))
    bad_keys = [k for k in keys if not KEY.match(k)]
    if bad_keys:
        raise RuleError(f"{where}.keys: keys are single ASCII words [a-z0-9_], got {bad_keys!r}")
    rule = Rule(
        id=rule_id,
        code=code,
        tier=tier,
        confidence=_enum_value(Confidence, raw, "confidence", where, _DEFAULT_CONFIDENCE[tier]),
        scope=_enum_value(Scope, raw, "scope", where, code_info(code).scope),
        why=why.strip(),
        keys=keys,
        key_bytes=frozenset(k.encode("ascii") for k in keys),
        match=_patterns(raw, "match", where),
        require=_patterns(raw, "require", where),
        unless=_patterns(raw, "unless", where),
        status=_statuses(raw, "status", where),
        exit_codes=_statuses(raw, "exit_codes", where),
        kinds=frozenset(EvidenceKind(k) for k in _strings(raw, "kinds", where)),
        providers=frozenset(p.lower() for p in _strings(raw, "providers", where)),
        agents=frozenset(a.lower() for a in _strings(raw, "agents", where)),
        headers=_header_patterns(raw, where),
        wrapper=bool(raw.get("wrapper", False)),
        no_reset=bool(raw.get("no_reset", False)),
        priority=int(raw.get("priority", 100)),
        bounded_bytes=_bounded_bytes(raw, where),
        source=source,
    )
    if rule.bounded_bytes is not None and any("bounded" not in p.groupindex for p in rule.match):
        raise RuleError(f"{where}.bounded_bytes: every match pattern needs a (?P<bounded>…) group")
    _check_indexable(rule, where)
    rule = replace(
        rule,
        match_probes=tuple(Probe.of(p) for p in rule.match),
        require_probes=tuple(Probe.of(p) for p in rule.require),
        unless_probes=tuple(Probe.of(p) for p in rule.unless),
        match_any=_alternation(rule.match),
        unless_any=_alternation(rule.unless),
    )
    groups, literal_groups, unanchored = _match_groups(rule.match_probes)
    return replace(
        rule,
        match_anchors=_anchor_union(rule.match_probes),
        match_groups=groups,
        match_group_words=frozenset(groups),
        match_literal_groups=literal_groups,
        match_unanchored=unanchored,
        filters_identity=bool(
            rule.kinds
            or rule.providers
            or rule.agents
            or rule.status
            or rule.exit_codes
            or rule.headers
        ),
    )


def _anchor_union(probes: tuple[Probe, ...]) -> frozenset[bytes] | None:
    if not probes or any(p.anchors is None for p in probes):
        return None
    return frozenset().union(*(p.anchors for p in probes if p.anchors is not None))


def _alternation(patterns: tuple[re.Pattern[str], ...]) -> re.Pattern[str] | None:
    if not patterns:
        return None
    return scanning(re.compile("|".join(f"(?:{p.pattern})" for p in patterns)))


def _bounded_bytes(raw: Mapping[str, Any], where: str) -> int | None:
    value = raw.get("bounded_bytes")
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RuleError(f"{where}.bounded_bytes: must be a positive whole number, got {value!r}")
    return value


def _check_indexable(rule: Rule, where: str) -> None:
    # Every rule must be reachable through the index: by a key word, a status or an exit
    # code. A rule with text patterns needs keys so it is never evaluated on every input.
    if rule.match and not rule.keys:
        raise RuleError(f"{where}.keys: a rule with text patterns needs index keys")
    if not (rule.keys or rule.status or rule.exit_codes):
        raise RuleError(f"{where}: needs keys, a status or exit codes to be indexable")


def load_rule_file(name: str, text: str) -> list[Rule]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RuleError(f"{name}: not valid TOML: {exc}") from exc
    raws = data.get("rule", [])
    if not isinstance(raws, list):
        raise RuleError(f"{name}: expected [[rule]] tables")
    return [parse_rule(raw, name) for raw in raws]


def load_builtin_rules() -> list[Rule]:
    """Every rule shipped in `catalogue/rules/*.toml`; ids must be unique."""
    folder = resources.files("catalogue") / "rules"
    rules: list[Rule] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            rules.extend(load_rule_file(entry.name, entry.read_text(encoding="utf-8")))
    check_unique(rules)
    return rules


def check_unique(rules: Sequence[Rule]) -> None:
    seen: dict[str, str] = {}
    for rule in rules:
        if rule.id in seen:
            raise RuleError(f"{rule.source}[{rule.id}].id: also defined in {seen[rule.id]}")
        seen[rule.id] = rule.source


def ordered(rules: Iterable[Rule]) -> list[Rule]:
    """Rules in evaluation order: tier, then priority, then file order (stable)."""
    return sorted(rules, key=lambda r: r.rank)


# How many hex digits of the rules' digest a catalogue version carries: enough that two
# rule sets in one deployment's history never share one by accident.
VERSION_DIGEST_CHARS = 12


def content_version(rules: Iterable[Rule]) -> str:
    """The catalogue version of a rule set: `catalogue.v1+<digest>`, the digest taken over
    every field that decides what a rule matches and yields (and why it says it does), in
    evaluation order. Any rule change changes it; the same rules always give the same one,
    whichever file or process loaded them."""
    digest = hashlib.sha256()
    for rule in ordered(rules):
        digest.update(_rule_content(rule).encode("utf-8"))
        digest.update(b"\x00")
    return f"{CATALOGUE_VERSION}+{digest.hexdigest()[:VERSION_DIGEST_CHARS]}"


def _rule_content(rule: Rule) -> str:
    groups = (rule.match, rule.require, rule.unless)
    patterns = [tuple(p.pattern for p in group) for group in groups]
    fields = (
        rule.id, rule.code, rule.tier.name, rule.confidence.value, rule.scope.value, rule.why,
        sorted(rule.keys), patterns, sorted(rule.status), sorted(rule.exit_codes),
        sorted(k.value for k in rule.kinds), sorted(rule.providers), sorted(rule.agents),
        [(name, p.pattern) for name, p in rule.headers], rule.wrapper, rule.no_reset, rule.priority,
        rule.bounded_bytes,
    )  # fmt: skip
    return repr(fields)
