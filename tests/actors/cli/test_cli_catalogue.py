"""`recovery classify` / `explain` / `corpus` keep the docs/CONTRACTS.md JSON contract."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from actors.cli.catalogue import write_classifications
from actors.cli.main import main
from catalogue import default_catalogue

CONTRACT_FIELDS = {
    "code", "error_class", "confidence", "rule", "catalogue_version", "scope",
    "retry_after_s", "reset_at", "hint_source", "safe_excerpt",
}  # fmt: skip


def run_classify(lines: list[str]) -> list[dict[str, object]]:
    out = io.StringIO()
    write_classifications(io.StringIO("\n".join(lines) + "\n"), out, None)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_classify_writes_one_classification_per_line_in_order() -> None:
    results = run_classify(
        [
            json.dumps({"kind": "http", "http_status": 529, "body": {"type": "error"}}),
            json.dumps({"kind": "stderr", "text": "Selected model is at capacity."}),
        ]
    )
    assert [r["code"] for r in results] == ["provider_overloaded", "model_capacity"]
    for result in results:
        assert result.keys() >= CONTRACT_FIELDS
        assert result["catalogue_version"] == default_catalogue().version


def test_classify_skips_blank_lines_and_reports_bad_ones_then_goes_on() -> None:
    results = run_classify(
        ["", "{not json", '{"kind": "stderr", "http_status": "x"}', "[]", '{"kind": "exit"}']
    )
    assert results[0] == {"line": 2, "error": results[0]["error"], "field": None}
    assert results[1]["line"] == 3
    assert results[1]["field"] == "http_status"
    assert "'x'" in str(results[1]["error"])
    assert results[2] == {"line": 4, "error": "expected a JSON object, got list", "field": None}
    assert results[3]["code"] == "unclassified"


def test_classify_uses_observed_at_as_now_and_prints_reset_in_utc() -> None:
    line = json.dumps(
        {
            "kind": "stderr",
            "text": "You've hit your session limit · resets 3pm (Europe/Paris)",
            "observed_at": "2026-11-29T12:00:00+01:00",
        }
    )
    (result,) = run_classify([line])
    assert result["code"] == "quota_limited"
    assert result["reset_at"] == "2026-11-29T14:00:00Z"


def test_unknown_field_is_named() -> None:
    (result,) = run_classify(['{"kind": "stderr", "colour": "red"}'])
    assert result["field"] == "colour"


def test_explain_names_the_winning_rule_and_why(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "API Error: 400 Your credit balance is too low"]) == 0
    out = capsys.readouterr().out
    assert "quota_limited" in out
    assert "anthropic.credit_balance_too_low.v1" in out
    assert "http.status.400.v1" in out  # the misleading status it beat


def test_explain_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "ECONNRESET", "--json", "--provider", "openai"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["code"] == "network_unavailable"
    assert payload["provider"] == "openai"
    assert payload["why"]


def test_corpus_prints_the_corpus_summary(capsys: pytest.CaptureFixture[str]) -> None:
    corpus = Path(__file__).parents[3] / "catalogue" / "data" / "real_errors.dev.jsonl"
    assert main(["corpus", "--corpus", str(corpus)]) == 0
    out = capsys.readouterr().out
    assert "accuracy:" in out
    assert "false auto-recoveries: 0" in out


def test_the_console_script_is_installed() -> None:
    result = subprocess.run(
        [str(Path(sys.executable).with_name("recovery")), "classify"],
        input='{"kind": "stderr", "text": "ECONNREFUSED"}\n',
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(result.stdout)["code"] == "network_unavailable"
