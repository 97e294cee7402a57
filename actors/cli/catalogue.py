"""`recovery classify`, `recovery explain` and `recovery corpus` (the catalogue's commands)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from actors.cli.jsonlines import errors_json, line_error, map_json_lines
from actors.cli.policy import explain_decision
from catalogue import Evidence, EvidenceKind, classify, default_catalogue, explain
from catalogue.classification import Classification
from catalogue.corpus import dev_corpus, evidence_from_row, score_rows
from catalogue.corpus_timing import score_timing
from policy.errors import PolicyError


def register(commands: Any) -> None:
    classify_cmd = commands.add_parser(
        "classify",
        help="classify Evidence JSON lines from stdin, one Classification JSON line each",
    )
    classify_cmd.add_argument(
        "--now", type=_aware_datetime, help="reference time when evidence has no observed_at"
    )
    classify_cmd.set_defaults(run=run_classify)

    explain_cmd = commands.add_parser("explain", help="classify one text and say why")
    explain_cmd.add_argument("text", help="the error text")
    explain_cmd.add_argument("--status", type=int, help="HTTP status")
    explain_cmd.add_argument("--agent", help="agent adapter, e.g. claude-acp")
    explain_cmd.add_argument("--provider", help="model provider, e.g. anthropic")
    explain_cmd.add_argument(
        "--kind", default="stderr", choices=[k.value for k in EvidenceKind], help="evidence kind"
    )
    explain_cmd.add_argument("--now", type=_aware_datetime, help="reference time for hints")
    explain_cmd.add_argument("--json", action="store_true", help="print JSON")
    explain_cmd.add_argument(
        "--policy",
        type=Path,
        metavar="FILE",
        help="also print the decision under this policy (dynamic profile, v1 document or "
        "legacy rules JSON); the turn is assumed effect-safe",
    )
    explain_cmd.add_argument(
        "--at", type=_aware_datetime, metavar="TIME", help="decision time (default: --now)"
    )
    explain_cmd.add_argument("--candidate", help="candidate id in a profile (default: first)")
    explain_cmd.add_argument(
        "--retry-ordinal", type=int, default=0, help="retries already used (default 0)"
    )
    explain_cmd.set_defaults(run=run_explain)

    corpus_cmd = commands.add_parser(
        "corpus", help="run the classifier over the development corpus and print a summary"
    )
    corpus_cmd.add_argument(
        "--corpus", type=Path, metavar="PATH",
        help="labelled corpus JSON lines (default: the development corpus in the package)",
    )  # fmt: skip
    corpus_cmd.set_defaults(run=run_corpus)


def _aware_datetime(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    if value.utcoffset() is None:
        raise argparse.ArgumentTypeError(f"needs a time zone, got {text!r}")
    return value


# -- classify -----------------------------------------------------------------------------


def run_classify(args: argparse.Namespace) -> int:
    write_classifications(sys.stdin, sys.stdout, args.now)
    return 0


def write_classifications(source: IO[str], sink: IO[str], now: datetime | None) -> None:
    map_json_lines(source, sink, lambda data, number: classify_data(data, number, now))


def classify_data(data: dict[str, Any], number: int, now: datetime | None) -> dict[str, Any]:
    try:
        evidence = Evidence.model_validate(data)
    except ValidationError as exc:
        field, message = _first_error(exc)
        return line_error(number, message, field)
    return classification_json(classify(evidence, now or datetime.now(UTC)))


def classification_json(result: Classification) -> dict[str, Any]:
    return result.model_dump(mode="json")


def _first_error(exc: ValidationError) -> tuple[str | None, str]:
    error = exc.errors()[0]
    field = ".".join(str(p) for p in error["loc"]) or None
    message = error["msg"][0].lower() + error["msg"][1:]
    if error["type"] != "extra_forbidden" and "input" in error:
        message = f"{message}, got {error['input']!r}"
    elif error["type"] == "extra_forbidden":
        message = f"unknown field {field!r}"
    return field, message


# -- explain ------------------------------------------------------------------------------


def run_explain(args: argparse.Namespace) -> int:
    evidence = Evidence(
        kind=EvidenceKind(args.kind),
        text=args.text,
        http_status=args.status,
        agent=args.agent,
        provider=args.provider,
    )
    now = args.now or args.at or datetime.now(UTC)
    result = explain(evidence, now)
    out = result.classification
    decision = None
    if args.policy is not None:
        try:
            decision = explain_decision(
                out,
                args.policy,
                args.at or now,
                retry_ordinal=args.retry_ordinal,
                candidate_id=args.candidate,
            )
        except PolicyError as exc:
            print(json.dumps({"errors": errors_json(exc.errors)}), file=sys.stderr)
            return 2
    if args.json:
        payload = classification_json(out)
        payload["matched"] = [rule.id for rule in result.matched]
        payload["why"] = result.winner.why if result.winner else None
        if decision is not None:
            payload["decision"] = decision
        print(json.dumps(payload, ensure_ascii=False))
        return 0
    for line in _explanation_lines(result):
        print(line)
    if decision is not None:
        deadline = f" at {decision['deadline']}" if decision["deadline"] else ""
        print(f"decision:   {decision['decision']}{deadline}: {decision['reason']}")
    return 0


def _explanation_lines(result: Any) -> Iterator[str]:
    out = result.classification
    yield (
        f"code:       {out.code} ({out.error_class}, {out.confidence} confidence, "
        f"scope {out.scope})"
    )
    yield f"rule:       {out.rule}"
    if result.winner is not None:
        tier = result.winner.tier.name.lower()
        yield f"why:        {result.winner.why} [{tier} tier]"
    else:
        yield "why:        no rule matched; automatic recovery stops and the excerpt is kept"
    losers = [r for r in result.matched if r is not result.winner]
    for rule in losers:
        reason = "a wrapper; the inner cause wins" if rule.wrapper else "ranks lower"
        yield f"also:       {rule.id} ({rule.code}, {rule.tier.name.lower()} tier): {reason}"
    if result.subject.status is not None:
        yield f"status:     {result.subject.status}"
    if out.retry_after_s is not None:
        yield f"retry in:   {out.retry_after_s:g} s ({out.hint_source})"
    if out.reset_at is not None:
        yield f"resets at:  {out.reset_at.isoformat()} ({out.hint_source})"
    yield f"catalogue:  {out.catalogue_version}"
    yield f"excerpt:    {out.safe_excerpt}"


# -- corpus -------------------------------------------------------------------------------


def run_corpus(args: argparse.Namespace) -> int:
    path: Traversable = args.corpus or dev_corpus()
    if not path.is_file():
        print(f"recovery corpus: corpus not found: {path}", file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    catalogue = default_catalogue()
    now = datetime.now(UTC)
    score = score_rows(rows, lambda e: catalogue.classify(e, now))
    print(f"provider-recovery {catalogue.version}: {len(catalogue.rules)} rules")
    print(f"corpus: {path} ({score.total} rows)\n")
    print(f"{'label':<26}{'rows':>6}{'right':>7}")
    for label, total in sorted(score.total_by_label.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{label:<26}{total:>6}{score.right_by_label[label]:>7}")
    print(f"\n{'predicted code':<26}{'rows':>6}")
    for code, count in score.by_code.most_common():
        print(f"{code:<26}{count:>6}")
    print(f"\naccuracy: {score.right}/{score.total} = {score.accuracy:.1%}")
    print(f"false auto-recoveries: {len(score.false_auto_recoveries)}")
    for rid, label, predicted in score.wrong:
        row = next(r for r in rows if r["id"] == rid)
        rule = catalogue.explain(evidence_from_row(row), now).classification.rule
        print(f"  wrong: {rid}: label {label}, predicted {predicted} by {rule}")
    # The timing figures bench/corpus_score.py prints (catalogue/corpus_timing.py): each
    # row classified at its own reference time.
    timing = score_timing(rows, catalogue.classify)
    print(
        f"\nserver timing hints read: {timing.read}/{timing.expected} = {timing.read_fraction:.1%}"
    )
    for rid in timing.missed:
        print(f"  missed: {rid}")
    print(f"timing hints invented: {len(timing.invented)}")
    for rid in timing.invented:
        print(f"  invented: {rid}")
    return 0
