"""`recovery policy evaluate|normalize|validate|preview|schema` and the policy part of
`recovery explain --policy FILE --at TIME`."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, field_validator

from actors.cli.jsonlines import errors_json, line_error, map_json_lines
from catalogue import Classification, ErrorClass
from policy.decisions import decision_json
from policy.document import DynamicProfile, PolicyDocument
from policy.errors import FieldError, PolicyError
from policy.evaluate import evaluate
from policy.failure import Failure
from policy.gate import EffectSafety
from policy.legacy import normalize_policy
from policy.lint import lint_profile
from policy.preview import preview_lines, preview_profile
from policy.profile import parse_profile
from policy.schedule import BUILTIN_POLICIES, NamedPolicy
from policy.schema import policy_json_schema
from policy.validation import parse_document

EXIT_INVALID = 2
CLASS_NAMES = frozenset({ErrorClass.TRANSIENT.value, ErrorClass.HARD.value})
UNSAFE_BY_CALLER = EffectSafety.unsafe(
    "not effect-safe: the caller did not report the turn as effect-safe"
)


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


class EvaluateLine(BaseModel):
    """One `recovery policy evaluate` input line (docs/CONTRACTS.md). `document` is checked by
    `parse_document`; `builtin` names a built-in policy instead (e.g. `interactive`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    document: Any = None
    builtin: Any = None
    failure: Failure
    effect_safe: bool = Field(default=False, strict=True)
    retry_ordinal: int = Field(default=0, ge=0, strict=True)
    reset_wait_used: bool | frozenset[str] = False
    now: AwareDatetime | None = None

    @field_validator("reset_wait_used", mode="before")
    @classmethod
    def _flag_or_classes(cls, value: Any) -> bool | frozenset[str]:
        if isinstance(value, bool):
            return value
        if isinstance(value, list) and all(item in CLASS_NAMES for item in value):
            return frozenset(value)
        raise ValueError(
            "must be true, false or a list of classes (transient, hard), "
            f"got {json.dumps(value, default=str)}"
        )

    def reset_wait_used_for(self, error_class: ErrorClass) -> bool:
        used = self.reset_wait_used
        return used if isinstance(used, bool) else error_class.value in used


def run_evaluate(args: argparse.Namespace) -> int:
    write_decisions(sys.stdin, sys.stdout, args.now)
    return 0


def write_decisions(source: IO[str], sink: IO[str], now: datetime | None) -> None:
    map_json_lines(source, sink, lambda data, number: evaluate_data(data, number, now))


def evaluate_data(
    data: dict[str, Any], number: int, default_now: datetime | None
) -> dict[str, Any]:
    errors: list[FieldError] = []
    try:
        request: EvaluateLine | None = EvaluateLine.model_validate(data)
    except ValidationError as exc:
        request, errors = None, field_errors(exc)
    try:
        policy = line_policy(data.get("document"), data.get("builtin"))
    except PolicyError as exc:
        errors.extend(exc.errors)
    if errors or request is None:
        return _errors_line(number, errors)
    try:
        decision = evaluate(
            policy,
            request.failure,
            now=request.now or default_now or datetime.now(UTC),
            safety=EffectSafety.safe() if request.effect_safe else UNSAFE_BY_CALLER,
            retry_ordinal=request.retry_ordinal,
            reset_wait_used=request.reset_wait_used_for(request.failure.error_class),
        )
    except PolicyError as exc:
        return _errors_line(number, list(exc.errors))
    return decision_json(decision, request.retry_ordinal)


def line_policy(document: object, builtin: object) -> PolicyDocument | NamedPolicy:
    """The line's v1 `document`, or the built-in policy `builtin` names."""
    if builtin is not None:
        if document is not None:
            raise PolicyError.single("builtin", "give either document or builtin, not both")
        if not isinstance(builtin, str) or builtin not in BUILTIN_POLICIES:
            known = ", ".join(sorted(BUILTIN_POLICIES))
            raise PolicyError.single(
                "builtin", f"unknown built-in policy {json.dumps(builtin)}; expected {known}"
            )
        return BUILTIN_POLICIES[builtin]
    if document is None:
        raise PolicyError.single("document", "missing; give a v1 document or a builtin name")
    try:
        return parse_document(document)
    except PolicyError as exc:
        raise exc.prefixed("document") from None


def _errors_line(number: int, errors: list[FieldError]) -> dict[str, Any]:
    first, rest = errors[0], errors[1:]
    message = first.message
    if rest:
        message += "; also " + "; ".join(str(error) for error in rest)
    return line_error(number, message, first.field)


def field_errors(exc: ValidationError) -> list[FieldError]:
    """Pydantic's errors as field-addressed, lowercase messages naming the bad value."""
    found = []
    for error in exc.errors():
        field = _path(error["loc"])
        field_is_class = error["loc"][-1:] == ("error_class",)
        if error["type"] == "extra_forbidden":
            message = f"unknown field {str(error['loc'][-1])!r}"
        elif error["type"] == "missing":
            message = "missing; give class or error_class" if field_is_class else "missing"
        elif error["type"] == "value_error":
            message = error["msg"].removeprefix("Value error, ")
        else:
            message = error["msg"][0].lower() + error["msg"][1:]
            if "input" in error and not isinstance(error["input"], dict | list):
                message += f", got {json.dumps(error['input'], default=str)}"
        found.append(FieldError(field, message))
    return found


def _path(loc: tuple[int | str, ...]) -> str | None:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or None


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
    data = _read_json(path)
    if isinstance(data, dict) and "candidates" in data:
        profile = parse_profile(data)
        for candidate in profile.candidates:
            if candidate.id == candidate_id or (candidate_id is None and candidate.enabled):
                return candidate.policy
        wanted = "no enabled candidate" if candidate_id is None else f"no {candidate_id!r}"
        raise PolicyError.single("candidates", f"the profile has {wanted}")
    return normalize_policy(data)


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
    decision = evaluate(
        document,
        Failure.from_classification(classification),
        now=at,
        safety=EffectSafety.safe("assumed effect-safe by `recovery explain`"),
        retry_ordinal=retry_ordinal,
    )
    return decision_json(decision, retry_ordinal)
