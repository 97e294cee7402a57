"""The stateless endpoints answer what the CLI's `recovery classify`, `explain` and
`policy …` commands print for the same input, at the same injected time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import islice

import pytest
from fastapi.testclient import TestClient

from actors.cli.catalogue import classify_data
from actors.cli.policy import evaluate_data
from actors.clock import ManualClock
from catalogue.corpus import dev_corpus, evidence_from_row
from policy.legacy import normalize_policy
from policy.schema import policy_json_schema
from tests.actors.api.api_rigs import client_of, fake_backend
from tests.actors.api.payloads import document, dynamic, overloaded
from tests.actors.conftest import unique_keys

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.fixture
def client() -> Iterator[TestClient]:
    with client_of(fake_backend(unique_keys()), clock=ManualClock(NOW)) as made:
        yield made


def corpus_evidence(count: int) -> list[dict[str, object]]:
    rows = (json.loads(line) for line in dev_corpus().read_text().splitlines() if line)
    return [evidence_from_row(row).model_dump(mode="json") for row in islice(rows, count)]


def test_classify_answers_what_recovery_classify_prints(client: TestClient) -> None:
    for number, evidence in enumerate(corpus_evidence(40), start=1):
        answer = client.post("/classify", json=evidence)
        assert answer.status_code == 200, answer.text
        assert answer.json() == classify_data(evidence, number, NOW)


def test_classify_refuses_bad_evidence_naming_the_field(client: TestClient) -> None:
    answer = client.post("/classify", json={"kind": "http", "http_status": 99})
    assert answer.status_code == 422
    first = answer.json()["errors"][0]
    assert (first["field"], first["value"]) == ("http_status", 99)
    unknown = client.post("/classify", json={"kind": "carrier-pigeon"})
    assert unknown.json()["errors"][0]["field"] == "kind"


def test_explain_names_the_winning_rule_and_decides_under_a_policy(client: TestClient) -> None:
    answer = client.post("/explain", json={"evidence": overloaded("20"), "policy": dynamic("a")})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["classification"]["code"] == "provider_overloaded"
    assert body["matched"][0] == body["classification"]["rule"]
    assert body["why"]
    assert body["decision"]["decision"] == "retry"
    assert body["decision"]["retry_ordinal"] == 1
    bad = client.post("/explain", json={"evidence": overloaded(), "policy": {"candidates": []}})
    assert (bad.status_code, bad.json()["errors"][0]["field"]) == (422, "policy.candidates")


def test_evaluate_answers_what_recovery_policy_evaluate_prints(client: TestClient) -> None:
    lines = [
        {"builtin": "interactive", "failure": {"code": "rate_limited", "class": "transient"},
         "effect_safe": True},
        {"document": document(), "failure": {"code": "provider_overloaded", "class": "transient"},
         "effect_safe": True, "retry_ordinal": 3},
    ]  # fmt: skip
    for number, line in enumerate(lines, start=1):
        answer = client.post("/policy/evaluate", json=line)
        assert answer.status_code == 200, answer.text
        assert answer.json() == evaluate_data(line, number, NOW)
    bad = client.post("/policy/evaluate", json={"builtin": "nope", "failure": {}})
    assert bad.status_code == 422
    fields = [item["field"] for item in bad.json()["errors"]]
    assert "builtin" in fields
    assert "failure.code" in fields


def test_normalize_validate_preview_and_schema_answer_as_the_cli(client: TestClient) -> None:
    legacy = {"on_provider_error": "try_next", "quota_limited": "stop"}
    normalized = client.post("/policy/normalize", json=legacy)
    assert normalized.json() == normalize_policy(legacy).model_dump(mode="json")
    refused = client.post("/policy/normalize", json={"on_provider_error": "explode"})
    assert (refused.status_code, refused.json()["errors"][0]["field"]) == (
        422, "on_provider_error",
    )  # fmt: skip
    valid = client.post("/policy/validate", json=dynamic("a", "b")).json()
    assert valid["valid"] is True
    assert [c["id"] for c in valid["profile"]["candidates"]] == ["a", "b"]
    invalid = client.post("/policy/validate", json={"candidates": "none"})
    assert invalid.status_code == 200
    assert invalid.json()["valid"] is False
    assert invalid.json()["errors"][0]["field"] == "candidates"
    preview = client.post("/policy/preview", json=dynamic("a", "b")).json()
    assert preview["classes"][0]["class"] == "transient"
    assert preview["classes"][0]["retry_delays_s"] == [30, 60, 120]
    assert preview["lines"][0].startswith("profile ")
    assert client.get("/policy/schema").json() == policy_json_schema("profile")
    document = client.get("/policy/schema", params={"document": "true"}).json()
    assert document == policy_json_schema("document")
