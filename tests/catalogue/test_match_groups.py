"""A rule's match patterns are scanned by group (anchor word, required literal): exactly
when one of them matches, as the plain alternation of all of them would say. On a short
text each rule is checked by a closure shaped to it (`short_check`): it says what
`holds_short` says."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from catalogue import Evidence, EvidenceKind, default_catalogue
from catalogue.matching import ShortPlan, holds_short, is_short, matches, plan_of, short_check
from catalogue.rules import Rule
from catalogue.text import TextViews, make_views
from tests.catalogue.fixture_data import FIXTURES, load_fixtures

RULES = [r for r in default_catalogue().rules if r.match_any is not None and not r.bounded_bytes]
# Pieces real errors are made of: every literal a rule pattern requires, and fixture text.
LITERALS = sorted({lit for r in RULES for p in r.match_probes for lit in (p.literals or ())})
TEXTS = ["\n".join(str(f.raw["evidence"].get(k) or "") for k in ("text", "body")) for f in FIXTURES]


def _agrees(rule: Rule, views: TextViews) -> bool:
    alternation = rule.match_any
    assert alternation is not None
    expected = any(alternation.search(view) for view in views.all)
    return matches(rule, views.all, views.tokens) == expected


def test_grouped_matching_agrees_with_the_alternation_on_every_fixture() -> None:
    disagreements = []
    for text in TEXTS:
        views = make_views(text)
        disagreements += [(rule.id, text[:60]) for rule in RULES if not _agrees(rule, views)]
    assert disagreements == []


GLUE = [" ", "_", "-", ".", ": ", "\n  ", "x", "'", '"']


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(RULES), st.data())
def test_grouped_matching_agrees_with_the_alternation_on_literal_mixtures(
    rule: Rule, data: st.DataObject
) -> None:
    own = sorted({lit for p in rule.match_probes for lit in (p.literals or ())})
    # A rule whose patterns yield no literal (neutral.model_id_not_found_404.v1: an
    # alternation of model families) has none of its own to draw: sampling from an empty
    # list is an error, not a disagreement.
    mine = [st.sampled_from(own)] if own else []
    piece = st.one_of(*mine, st.sampled_from(LITERALS), st.sampled_from(GLUE))
    text = "".join(data.draw(st.lists(piece, max_size=8)))
    assert _agrees(rule, make_views(text)), (rule.id, text)
    # Past SHORT_VIEW the groups are scanned probe by probe, each behind its literal.
    assert _agrees(rule, make_views(text * 40)), (rule.id, "long view")


CATALOGUE = default_catalogue()
PLANS = [plan_of(rule) for rule in CATALOGUE.rules]
EVIDENCE = [fixture.evidence for fixture in load_fixtures()]


def _checks_agree(evidence: Evidence, plans: list[ShortPlan]) -> list[str]:
    """Ids of the `plans`' rules whose `short_check` disagrees with `holds_short` on
    `evidence`, when its views are short (the only texts a short check sees)."""
    subject = CATALOGUE.subject_of(evidence)
    if subject is None or not is_short(subject.views):
        return []
    flat, tokens = subject.views.flat, subject.views.tokens
    return [
        plan.rule.id
        for plan in plans
        if short_check(plan)(subject, flat, tokens) != holds_short(plan, subject, flat, tokens)
    ]


def test_every_rules_short_check_agrees_with_holds_short_on_every_fixture() -> None:
    checked = [e for e in EVIDENCE if is_short(make_views(e.combined_text()))]
    assert len(checked) > 100
    disagreements = [(e.text[:60], ids) for e in checked if (ids := _checks_agree(e, PLANS))]
    assert disagreements == []


UNLESS_LITERALS = sorted({lit for p in PLANS for lit in (p.unless_literals or ())})
# Identities the rules filter on (and one none does), so identity filters fit and fail.
PROVIDERS = [*sorted({p for r in CATALOGUE.rules for p in r.providers}), "acme"]
AGENTS = [*sorted({a for r in CATALOGUE.rules for a in r.agents}), "acme-acp"]
STATUSES = sorted({s for r in CATALOGUE.rules for s in r.status if s % 100 < 10} | {200})


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(PLANS), st.data())
def test_a_rules_short_check_agrees_with_holds_short_on_literal_mixtures(
    plan: ShortPlan, data: st.DataObject
) -> None:
    rule = plan.rule
    probes = rule.match_probes + rule.require_probes + rule.unless_probes
    own = sorted({lit for p in probes for lit in (p.literals or ())})
    pieces = [*GLUE, *own] if own else GLUE
    piece = st.one_of(
        st.sampled_from(pieces), st.sampled_from(LITERALS), st.sampled_from(UNLESS_LITERALS)
    )
    evidence = Evidence(
        kind=data.draw(st.sampled_from(sorted(rule.kinds) or list(EvidenceKind))),
        text="".join(data.draw(st.lists(piece, max_size=8))),
        http_status=data.draw(st.sampled_from([None, *sorted(rule.status)[:3], *STATUSES])),
        provider=data.draw(st.sampled_from([None, *sorted(rule.providers), *PROVIDERS])),
        agent=data.draw(st.sampled_from([None, *sorted(rule.agents), *AGENTS])),
        exit_code=data.draw(st.sampled_from([None, *sorted(rule.exit_codes)[:2], 1])),
    )
    assert _checks_agree(evidence, [plan]) == [], evidence
