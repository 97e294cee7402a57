"""`recovery policy evaluate|normalize|validate|preview|schema` and the policy part of
`recovery explain --policy FILE --at TIME`."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from actors.cli.jsonlines import errors_json, line_error, map_json_lines
from catalogue import Classification
from policy.document import DynamicProfile, PolicyDocument
from policy.errors import FieldError, PolicyError
from policy.legacy import normalize_policy
from policy.lint import lint_profile
from policy.preview import preview_lines, preview_profile
from policy.profile import parse_profile
from policy.requests import candidate_policy, decide, decision_under
from policy.schema import policy_json_schema

EXIT_INVALID = 2


def register(commands: Any) -> None:
    policy_cmd = commands.add_parser(
        "policy", help="evaluate, normalise, validate and preview recovery policies"
    )
    actions = policy_cmd.add_subparsers(dest="policy_command", required=True, metavar="ACTION")

    evaluate_cmd = actions.add_parser(
        "evaluate", help="decide for JSON lines from stdin, one decision JSON line each"
    )
    evaluate_cmd.add_argument(
        "--now", type=aware_datetime, help="reference time for lines without `now`"
    )
    evaluate_cmd.set_defaults(run=run_evaluate)

    normalize_cmd = actions.add_parser(
        "normalize", help="legacy rules (or a v1 document) JSON → the v1 document JSON"
    )
    normalize_cmd.add_argument("file", nargs="?", type=Path, help="JSON file (default: stdin)")
    normalize_cmd.set_defaults(run=run_normalize)

    validate_cmd = actions.add_parser(
        "validate", help="check a dynamic profile; print it normalised with lint warnings"
    )
    validate_cmd.add_argument("file", type=Path, help="dynamic profile JSON file")
    validate_cmd.set_defaults(run=run_validate)

    preview_cmd = actions.add_parser(
        "preview", help="the schedule a dynamic profile implies, in words and offsets"
    )
    preview_cmd.add_argument("file", type=Path, help="dynamic profile JSON file")
    preview_cmd.add_argument("--json", action="store_true", help="print JSON")
    preview_cmd.set_defaults(run=run_preview)

    schema_cmd = actions.add_parser("schema", help="print the JSON Schema of the documents")
    schema_cmd.add_argument(
        "--document",
        action="store_true",
        help="one candidate's v1 policy document instead of a whole dynamic profile",
    )
    schema_cmd.set_defaults(run=run_schema)


def aware_datetime(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO-8601 time: {text!r}") from None
    if value.utcoffset() is None:
        raise argparse.ArgumentTypeError(f"needs a time zone, got {text!r}")
    return value


# -- evaluate -----------------------------------------------------------------------------


def run_evaluate(args: argparse.Namespace) -> int:
    write_decisions(sys.stdin, sys.stdout, args.now)
    return 0


def write_decisions(source: IO[str], sink: IO[str], now: datetime | None) -> None:
    map_json_lines(source, sink, lambda data, number: evaluate_data(data, number, now))


def evaluate_data(
    data: dict[str, Any], number: int, default_now: datetime | None
) -> dict[str, Any]:
    """One input line's decision (policy/requests.py decides), or its error line."""
    try:
        return decide(data, default_now or datetime.now(UTC))
    except PolicyError as exc:
        return _errors_line(number, list(exc.errors))


def _errors_line(number: int, errors: list[FieldError]) -> dict[str, Any]:
    first, rest = errors[0], errors[1:]
    message = first.message
    if rest:
        message += "; also " + "; ".join(str(error) for error in rest)
    return line_error(number, message, first.field)


# -- normalize / validate / preview / schema ------------------------------------------------


def run_normalize(args: argparse.Namespace) -> int:
    try:
        data = _read_json(args.file)
        document = normalize_policy(data)
    except PolicyError as exc:
        return _print_errors(exc)
    _print_json(document.model_dump(mode="json"))
    return 0


def run_validate(args: argparse.Namespace) -> int:
    try:
        profile = load_profile(args.file)
    except PolicyError as exc:
        return _print_errors(exc, valid=False)
    _print_json(
        {
            "valid": True,
            "warnings": [warning.as_json() for warning in lint_profile(profile)],
            "profile": profile.model_dump(mode="json"),
        }
    )
    return 0


def run_preview(args: argparse.Namespace) -> int:
    try:
        profile = load_profile(args.file)
    except PolicyError as exc:
        return _print_errors(exc)
    warnings = lint_profile(profile)
    if args.json:
        _print_json(
            {
                "classes": [preview.as_json() for preview in preview_profile(profile)],
                "warnings": [warning.as_json() for warning in warnings],
            }
        )
        return 0
    for line in preview_lines(profile):
        print(line)
    for warning in warnings:
        print(f"warning: {warning}")
    return 0


def run_schema(args: argparse.Namespace) -> int:
    _print_json(policy_json_schema("document" if args.document else "profile"), indent=2)
    return 0


def load_profile(path: Path) -> DynamicProfile:
    return parse_profile(_read_json(path))


def load_policy(path: Path, candidate_id: str | None) -> PolicyDocument:
    """One candidate's document from FILE: a dynamic profile (the candidate named, else the
    first enabled one), a v1 document, or legacy rules."""
    return candidate_policy(_read_json(path), candidate_id)


def _read_json(path: Path | None) -> Any:
    name = "stdin" if path is None else str(path)
    try:
        text = sys.stdin.read() if path is None else path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError.single(None, f"cannot read {name}: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PolicyError.single(
            None, f"{name} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None


def _print_errors(exc: PolicyError, *, valid: bool | None = None) -> int:
    payload: dict[str, Any] = {} if valid is None else {"valid": valid}
    payload["errors"] = errors_json(exc.errors)
    _print_json(payload)
    return EXIT_INVALID


def _print_json(payload: Any, indent: int | None = None) -> None:
    print(json.dumps(payload, ensure_ascii=False, indent=indent))


# -- explain --policy -----------------------------------------------------------------------


def explain_decision(
    classification: Classification,
    policy_file: Path,
    at: datetime,
    *,
    retry_ordinal: int = 0,
    candidate_id: str | None = None,
) -> dict[str, Any]:
    """The decision line an error gets under a candidate's document at `at`, the turn
    assumed effect-safe and the cycle's reset wait unused."""
    document = load_policy(policy_file, candidate_id)
    return decision_under(
        classification, document, at, retry_ordinal=retry_ordinal,
        assumed="assumed effect-safe by `recovery explain`",
    )  # fmt: skip
