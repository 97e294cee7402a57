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
from catalogue.corpus_timing import score_timing

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
    assert "timing hints invented: 0" in out


def _timing_row(rid: str, text: str, timing: dict[str, object] | None) -> str:
    row = {
        "id": rid, "provider": "openai", "tool": "openai-python", "kind": "http_status+body",
        "text": text, "http_status": 429, "headers": None, "code": "rate_limited",
        "class": "transient", "timing": timing, "notes": None,
    }  # fmt: skip
    return json.dumps(row)


def test_corpus_prints_the_timing_figures_corpus_score_computes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "timing.jsonl"
    rows = [
        _timing_row(
            "read-20s",
            "Rate limit reached for requests. Please try again in 20s.",
            {"seconds": 20, "source": "message_text"},
        ),
        _timing_row(  # the label's hint came in a header the row does not carry
            "missed-header",
            "Rate limit reached for requests.",
            {"seconds": 55, "source": "x-ratelimit-reset-requests header"},
        ),
        _timing_row(
            "invented-30s", "Rate limit reached for requests. Please try again in 30s.", None
        ),
        _timing_row(  # a client countdown is no server hint, and none is read from it
            "countdown",
            "Rate limit reached. Retrying in 4 seconds (attempt 4/10)",
            {"seconds": 4, "source": "client_backoff"},
        ),
    ]
    corpus.write_text("\n".join(rows) + "\n", encoding="utf-8")
    assert main(["corpus", "--corpus", str(corpus)]) == 0
    lines = capsys.readouterr().out.splitlines()
    timing = lines[lines.index("server timing hints read: 1/2 = 50.0%") :]
    assert timing == [
        "server timing hints read: 1/2 = 50.0%",
        "  missed: missed-header",
        "timing hints invented: 1",
        "  invented: invented-30s",
    ]
    figures = score_timing([json.loads(row) for row in rows], default_catalogue().classify)
    assert (figures.read, figures.expected, figures.invented) == (1, 2, ["invented-30s"])


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
