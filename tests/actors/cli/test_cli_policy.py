"""`recovery policy …` and `recovery explain --policy` keep the docs/CONTRACTS.md JSON shapes."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from actors.cli.main import main
from actors.cli.policy import write_decisions
from tests.policy.builders import NOW, document_json, section_json

DOCUMENT = document_json(
    transient=section_json(retries=3, interval=5, outcome="skip"),
    hard=section_json(wait=300, outcome="stop"),
)
DECISION_FIELDS = {"decision", "deadline", "retry_ordinal", "reason"}


def line(**fields: Any) -> str:
    base: dict[str, Any] = {
        "document": DOCUMENT,
        "failure": {"code": "model_capacity", "class": "transient"},
        "effect_safe": True,
        "retry_ordinal": 0,
        "reset_wait_used": False,
        "now": "2026-11-29T12:00:00Z",
    }
    return json.dumps({**base, **fields})


def run_evaluate(lines: list[str]) -> list[dict[str, Any]]:
    out = io.StringIO()
    write_decisions(io.StringIO("\n".join(lines) + "\n"), out, None)
    return [json.loads(text) for text in out.getvalue().splitlines()]


def test_evaluate_writes_one_decision_per_line_in_the_contract_shape() -> None:
    results = run_evaluate([line(retry_ordinal=n) for n in range(4)])
    assert all(set(r) == DECISION_FIELDS for r in results)
    assert [r["decision"] for r in results] == ["retry", "retry", "retry", "skip"]
    assert [r["deadline"] for r in results] == [
        "2026-11-29T12:00:05Z",
        "2026-11-29T12:00:10Z",
        "2026-11-29T12:00:20Z",
        None,
    ]
    assert [r["retry_ordinal"] for r in results] == [1, 2, 3, 3]


@pytest.mark.parametrize(
    ("failure", "used", "decision", "deadline"),
    [
        ({"reset_at": "2026-11-29T12:01:00Z"}, False, "wait_for_reset", "2026-11-29T12:01:00Z"),
        ({"retry_after_s": 60}, ["hard"], "stop", None),
        ({"retry_after_s": 60}, True, "stop", None),
        ({"retry_after_s": 60}, ["transient"], "wait_for_reset", "2026-11-29T12:01:00Z"),
        ({"reset_at": "2026-11-29T18:00:00Z"}, False, "stop", None),
    ],
)
def test_evaluate_honours_reset_hints_and_reset_wait_usage(
    failure: dict[str, Any], used: object, decision: str, deadline: str | None
) -> None:
    fail = {"code": "quota_limited", "class": "hard", **failure}
    (result,) = run_evaluate([line(failure=fail, reset_wait_used=used)])
    assert (result["decision"], result["deadline"]) == (decision, deadline)


def test_evaluate_accepts_a_classification_as_recovery_classify_prints_it() -> None:
    classification = {
        "code": "rate_limited", "error_class": "transient", "confidence": "high",
        "scope": "account", "rule": "openai.429.v1", "catalogue_version": "catalogue.v1",
        "provider": "openai", "model": None, "phase": None, "occurred_at": None,
        "retry_after_s": 2.5, "reset_at": None, "hint_source": "header", "safe_excerpt": "429",
    }  # fmt: skip
    (result,) = run_evaluate([line(failure=classification, document=document_json(
        transient=section_json(wait=10, retries=1, interval=5)))])  # fmt: skip
    assert result["decision"] == "wait_for_reset"
    assert result["deadline"] == "2026-11-29T12:00:02.500000Z"


def test_evaluate_stops_when_the_turn_is_not_reported_effect_safe() -> None:
    results = run_evaluate([line(effect_safe=False), line(effect_safe=None), line()])
    assert results[0]["decision"] == "stop"
    assert "not effect-safe" in results[0]["reason"]
    assert results[1]["field"] == "effect_safe"
    assert results[2]["decision"] == "retry"


def test_evaluate_without_effect_safe_assumes_the_turn_is_unsafe() -> None:
    data = json.loads(line())
    del data["effect_safe"]
    (result,) = run_evaluate([json.dumps(data)])
    assert result["decision"] == "stop"


def test_agent_transport_lost_that_would_skip_stops_instead() -> None:
    fail = {"code": "agent_transport_lost", "class": "transient"}
    (result,) = run_evaluate([line(failure=fail, retry_ordinal=3)])
    assert result["decision"] == "stop"
    assert "never authorises switching candidates" in result["reason"]


def test_evaluate_runs_the_builtin_interactive_policy() -> None:
    data = json.loads(line(retry_ordinal=4))
    del data["document"]
    data["builtin"] = "interactive"
    (result,) = run_evaluate([json.dumps(data)])
    assert result["deadline"] == "2026-11-29T12:01:00Z"  # 80 s capped at 60 s
    assert result["retry_ordinal"] == 5


def test_bad_lines_name_the_line_and_field_and_processing_goes_on() -> None:
    bad_document = {**DOCUMENT, "hard": {**DOCUMENT["hard"], "on_exhausted": "retry"}}
    results = run_evaluate(
        [
            "{oops",
            "",
            "[1]",
            line(document=bad_document),
            line(retry_ordinal=-1),
            line(now="2026-11-29T12:00:00"),
            line(failure={"code": "rate_limited"}),
            line(reset_wait_used=["none"]),
            line(colour="red"),
            line(),
        ]
    )
    assert results[0]["line"] == 1
    assert results[0]["field"] is None
    assert results[1] == {"line": 3, "error": "expected a JSON object, got list", "field": None}
    assert results[2] == {
        "line": 4,
        "error": "unknown outcome 'retry'; expected skip or stop",
        "field": "document.hard.on_exhausted",
    }
    assert results[3]["field"] == "retry_ordinal"
    assert "-1" in results[3]["error"]
    assert results[4]["field"] == "now"
    assert results[5] == {
        "line": 7,
        "error": "missing; give class or error_class",
        "field": "failure.error_class",
    }
    assert results[6]["field"] == "reset_wait_used"
    assert results[7] == {"line": 9, "error": "unknown field 'colour'", "field": "colour"}
    assert results[8]["decision"] == "retry"


def test_a_line_with_several_errors_reports_them_all() -> None:
    (result,) = run_evaluate([line(retry_ordinal=-1, effect_safe="yes")])
    assert result["field"] == "effect_safe"
    assert "also retry_ordinal" in result["error"]


def test_evaluate_uses_the_now_option_when_a_line_has_none() -> None:
    data = json.loads(line())
    del data["now"]
    out = io.StringIO()
    write_decisions(io.StringIO(json.dumps(data) + "\n"), out, NOW)
    assert json.loads(out.getvalue())["deadline"] == "2026-11-29T12:00:05Z"


# -- normalize / validate / preview / schema ----------------------------------------------------


def run(
    argv: list[str], capsys: pytest.CaptureFixture[str], stdin: str | None = None,
    monkeypatch: pytest.MonkeyPatch | None = None,
) -> tuple[int, str]:  # fmt: skip
    if stdin is not None and monkeypatch is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(argv)
    return code, capsys.readouterr().out


def test_normalize_prints_the_v1_document(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = '{"auth_required": "stop", "on_provider_error": "try_next"}'
    code, out = run(["policy", "normalize"], capsys, rules, monkeypatch)
    assert code == 0
    document = json.loads(out)
    assert document["transient"]["on_exhausted"] == "skip"
    assert document["hard"]["on_exhausted"] == "stop"
    # Normalising the output again changes nothing.
    code, again = run(["policy", "normalize"], capsys, out, monkeypatch)
    assert json.loads(again) == document


def test_normalize_exits_2_with_every_field_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = '{"task_error": "stop", "quota_limited": "retry"}'
    code, out = run(["policy", "normalize"], capsys, rules, monkeypatch)
    assert code == 2
    assert json.loads(out) == {
        "errors": [
            {
                "field": "task_error",
                "message": "'task_error' is not a provider error; it cannot have a recovery rule",
            },
            {
                "field": "quota_limited",
                "message": "unknown action 'retry'; expected try_next, stop or retry_same",
            },
        ]
    }


def test_normalize_reports_invalid_json(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out = run(["policy", "normalize"], capsys, "{", monkeypatch)
    assert code == 2
    assert json.loads(out)["errors"][0]["message"].startswith("stdin is not valid JSON")


@pytest.fixture
def profile_file(tmp_path: Path) -> Path:
    path = tmp_path / "profile.json"
    opus = {"id": "opus", "agent": "claude-acp", "transient": DOCUMENT["transient"]}
    opus["hard"] = DOCUMENT["hard"]
    codex = {"id": "codex", "agent": "codex-acp", "rules": {"quota_limited": "stop"}}
    path.write_text(json.dumps({"name": "fleet", "candidates": [opus, codex]}), encoding="utf-8")
    return path


HARD_STOP_WARNING = {
    "field": "candidates[0].hard.on_exhausted",
    "message": "stop ends recovery here, so candidates[1] never run after a hard failure",
}


def test_validate_prints_the_normalised_profile_and_warnings(
    profile_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(["policy", "validate", str(profile_file)], capsys)
    assert code == 0
    result = json.loads(out)
    assert result["valid"] is True
    codex = result["profile"]["candidates"][1]
    assert codex["hard"]["on_exhausted"] == "stop"
    assert "rules" not in codex
    assert result["warnings"] == [HARD_STOP_WARNING]


def test_validate_exits_2_listing_every_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.json"
    hard = section_json(retries=3, interval=5)
    hard["retry"]["max_retries"] = 11
    candidates = [
        {"id": str(n), "agent": "x", "transient": section_json(), "hard": hard} for n in range(3)
    ]
    candidates[1]["hard"] = section_json()
    candidates[0]["hard"] = section_json()
    path.write_text(json.dumps({"candidates": candidates}), encoding="utf-8")
    code, out = run(["policy", "validate", str(path)], capsys)
    assert code == 2
    assert json.loads(out) == {
        "valid": False,
        "errors": [
            {
                "field": "candidates[2].hard.retry.max_retries",
                "message": "must be between 1 and 10, got 11",
            }
        ],
    }


def test_validate_reports_a_missing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(["policy", "validate", str(tmp_path / "nope.json")], capsys)
    assert code == 2
    assert "cannot read" in json.loads(out)["errors"][0]["message"]


def test_preview_prints_the_schedule_and_warnings(
    profile_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(["policy", "preview", str(profile_file)], capsys)
    assert code == 0
    assert "retry 3× after 5 s, 10 s, 20 s (at +5 s, +15 s, +35 s); then skip to candidate 2" in out
    assert "if a trusted reset ≤ 5 min away is reported, wait for it once" in out
    assert f"warning: {HARD_STOP_WARNING['field']}: {HARD_STOP_WARNING['message']}" in out


def test_preview_json(profile_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(["policy", "preview", str(profile_file), "--json"], capsys)
    assert code == 0
    result = json.loads(out)
    assert result["classes"][0]["retry_offsets_s"] == [5, 15, 35]
    assert result["warnings"] == [HARD_STOP_WARNING]


def test_schema_prints_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(["policy", "schema"], capsys)
    assert code == 0
    assert json.loads(out)["title"] == "DynamicProfile"
    code, out = run(["policy", "schema", "--document"], capsys)
    assert json.loads(out)["title"] == "PolicyDocument"


# -- explain --policy ----------------------------------------------------------------------------


def test_explain_with_a_policy_prints_the_decision_at_that_time(
    profile_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["explain", "API Error: 529 Overloaded", "--policy", str(profile_file)]
    code, out = run([*argv, "--at", "2026-11-29T12:00:00Z"], capsys)
    assert code == 0
    assert "decision:   retry at 2026-11-29T12:00:05Z: provider_overloaded (transient)" in out


def test_explain_json_carries_the_decision_and_honours_the_ordinal_and_candidate(
    profile_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["explain", "API Error: 529 Overloaded", "--policy", str(profile_file), "--json"]
    code, out = run([*argv, "--at", "2026-11-29T12:00:00Z", "--retry-ordinal", "3"], capsys)
    assert code == 0
    assert json.loads(out)["decision"]["decision"] == "skip"
    code, out = run([*argv, "--at", "2026-11-29T12:00:00Z", "--candidate", "codex"], capsys)
    assert json.loads(out)["decision"]["decision"] == "skip"  # legacy default: try_next


def test_explain_with_a_reset_hint_waits_within_the_document_maximum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "document.json"
    path.write_text(json.dumps(DOCUMENT), encoding="utf-8")
    text = "You've hit your session limit · resets 3pm (Europe/Paris)"
    argv = ["explain", text, "--policy", str(path), "--json"]
    code, out = run([*argv, "--at", "2026-11-29T13:58:00Z"], capsys)
    assert code == 0
    decision = json.loads(out)["decision"]
    assert decision["decision"] == "wait_for_reset"
    assert decision["deadline"] == "2026-11-29T14:00:00Z"


def test_explain_with_an_invalid_policy_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"task_error": "stop"}', encoding="utf-8")
    code = main(["explain", "ECONNRESET", "--policy", str(path)])
    assert code == 2
    assert "task_error" in capsys.readouterr().err
