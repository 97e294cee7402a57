"""The Must-show figure: the development corpus, scored as docs/CONTRACTS.md says."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from catalogue import default_catalogue
from catalogue.corpus import (
    accepted_codes,
    dev_corpus,
    evidence_from_row,
    is_right,
    score_rows,
)

CORPUS = dev_corpus()
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _rows() -> list[dict[str, object]]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line]


def test_corpus_accuracy_is_at_least_90_percent_with_no_false_auto_recovery() -> None:
    catalogue = default_catalogue()
    score = score_rows(_rows(), lambda e: catalogue.classify(e, NOW))
    print(f"corpus accuracy {score.right}/{score.total} = {score.accuracy:.1%}")
    assert score.total == 157
    assert score.accuracy >= 0.90, score.wrong
    assert score.false_auto_recoveries == []


def test_alt_codes_in_notes_are_accepted() -> None:
    row = {"code": "rate_limited", "notes": "TRICKY: something. alt: quota_limited."}
    assert accepted_codes(row) == {"rate_limited", "quota_limited"}
    row = {"code": "auth_required", "notes": "alt: auth_required/subscription_required/unknown."}
    assert "subscription_required" in accepted_codes(row)


def test_not_provider_rows_accept_any_non_provider_code_or_unclassified() -> None:
    row = {"code": "not_provider_error", "notes": None}
    assert is_right(row, "task_error")
    assert is_right(row, "unclassified")
    assert not is_right(row, "invalid_request")


def test_rows_become_evidence_as_the_contract_says() -> None:
    row = {
        "kind": "header", "tool": "codex", "provider": "azure-openai", "text": "t",
        "http_status": 429, "headers": {"X-A": "1"},
    }  # fmt: skip
    evidence = evidence_from_row(row)
    assert (evidence.kind, evidence.agent, evidence.provider) == ("http", "codex-acp", "azure")
    assert (evidence.body, evidence.http_status, evidence.header("x-a")) == ("t", 429, "1")
    stderr = evidence_from_row({**row, "kind": "cli_stderr", "provider": "none"})
    assert (stderr.text, stderr.http_status, stderr.provider) == ("t", None, None)
