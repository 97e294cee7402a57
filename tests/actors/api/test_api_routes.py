"""The route API over HTTP, on RouteService and fakeredis (no Ray): the same snapshots a
handle returns, Idempotency-Key as the request id, 409 with the snapshot, 422 naming the
field, listings with filters and a cursor."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from actors.keys import KeySpace
from actors.routes.models import RouteSnapshot
from tests.actors.api.api_rigs import client_of, fake_backend
from tests.actors.api.payloads import dynamic, failure, overloaded, start
from tests.actors.conftest import unique_keys


@pytest.fixture
def keys() -> KeySpace:
    return unique_keys()


@pytest.fixture
def client(keys: KeySpace) -> Iterator[TestClient]:
    with client_of(fake_backend(keys)) as made:
        yield made


def test_a_new_installation_lists_an_empty_page(client: TestClient) -> None:
    answer = client.get("/routes")
    assert answer.status_code == 200
    assert answer.json() == {"routes": [], "next_cursor": None}
    assert client.get("/schedules").json() == {"schedules": []}
    assert client.get("/circuits").json() == {"circuits": []}


def test_a_route_never_started_reads_as_the_handle_reads_it(client: TestClient) -> None:
    answer = client.get("/routes/never-started")
    assert answer.status_code == 200
    assert RouteSnapshot.model_validate(answer.json()) == RouteSnapshot.absent("never-started")
    assert answer.json()["next_step"] == "done"
    assert client.get("/routes/never-started/history").json() == []


def test_start_fail_retry_now_and_succeed_answer_each_snapshot_with_its_next_step(
    client: TestClient,
) -> None:
    started = client.post("/routes/s-1/start", json=start())
    assert started.status_code == 200, started.text
    assert (started.json()["state"], started.json()["next_step"]) == ("active", "run")
    failed = client.post("/routes/s-1/failure", json=failure(1, overloaded("20")))
    assert failed.status_code == 200, failed.text
    assert failed.json()["next_step"] == "wait"
    assert failed.json()["code"] == "provider_overloaded"
    assert failed.json()["deadline"] is not None
    assert [e["route_id"] for e in client.get("/schedules").json()["schedules"]] == ["s-1"]
    retried = client.post("/routes/s-1/actions/retry-now", json={"generation": 1})
    assert (retried.json()["state"], retried.json()["next_step"]) == ("retrying", "wait")
    done = client.post("/routes/s-1/success", json={"generation": 1})
    assert (done.json()["state"], done.json()["next_step"]) == ("active", "done")
    decisions = [record["decision"] for record in client.get("/routes/s-1/history").json()]
    assert decisions[0] == "start"
    assert decisions[-2:] == ["retry_now", "success"]


def test_a_replayed_idempotency_key_answers_the_first_outcome_and_changes_nothing(
    client: TestClient,
) -> None:
    client.post("/routes/s-1/start", json=start())
    key = {"Idempotency-Key": "report-7f3a"}
    first = client.post("/routes/s-1/failure", json=failure(1), headers=key)
    client.post("/routes/s-1/actions/retry-now", json={"generation": 1})
    before = (client.get("/routes/s-1").json(), client.get("/routes/s-1/history").json())
    again = client.post("/routes/s-1/failure", json=failure(1), headers=key)
    assert again.status_code == 200
    assert again.json() == first.json()  # the first outcome, though the route moved on
    assert (client.get("/routes/s-1").json(), client.get("/routes/s-1/history").json()) == before


def test_a_stale_generation_is_409_with_the_authoritative_snapshot(client: TestClient) -> None:
    client.post("/routes/s-1/start", json=start())
    before = client.get("/routes/s-1").json()
    for path, body in [
        ("/routes/s-1/success", {"generation": 4}),
        ("/routes/s-1/failure", failure(2)),
        ("/routes/s-1/actions/stop", {"generation": 0}),
    ]:
        answer = client.post(path, json=body)
        assert answer.status_code == 409, (path, answer.text)
        problem = answer.json()
        assert problem["error"] == "stale_generation"
        assert "expected generation" in problem["message"]
        assert problem["snapshot"] == before
    assert client.get("/routes/s-1").json() == before


def test_an_action_the_state_cannot_take_is_409_invalid_state(client: TestClient) -> None:
    client.post("/routes/s-1/start", json=start())
    answer = client.post("/routes/s-1/actions/resume", json={"generation": 1})
    assert answer.status_code == 409
    assert answer.json()["error"] == "invalid_state"
    assert answer.json()["snapshot"]["state"] == "active"


@pytest.mark.parametrize(
    ("path", "body", "headers", "field", "location", "value"),
    [
        ("/routes/s-1/start", {**start(), "caller": "bad name!"}, {}, "caller", "body",
         "bad name!"),
        ("/routes/s-1/start", start(), {"Idempotency-Key": "no spaces"}, "Idempotency-Key",
         "header", "no spaces"),
        ("/routes/bad$id/start", start(), {}, "route_id", "path", "bad$id"),
        ("/routes/s-1/failure", {**failure(1), "generation": "1"}, {}, "generation", "body", "1"),
        ("/routes/s-1/failure", {**failure(1), "evidence": {"kind": "smoke"}}, {},
         "evidence.kind", "body", "smoke"),
        ("/routes/s-1/start", {**start(), "colour": "red"}, {}, "colour", "body", None),
        ("/routes/s-1/start", start({"kind": "concrete", "id": "c"}), {}, "profile.agent",
         "body", None),
        ("/routes/s-1/actions/skip", {"generation": -1}, {}, "generation", "body", -1),
    ],
)  # fmt: skip
def test_a_bad_field_is_422_naming_the_field_where_it_was_and_the_value(  # noqa: PLR0917 - parametrized
    client: TestClient, path: str, body: dict[str, Any], headers: dict[str, str], field: str,
    location: str, value: object,
) -> None:  # fmt: skip
    answer = client.post(path, json=body, headers=headers)
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    assert problem["error"] == "invalid_request"
    assert problem["snapshot"] is None
    first = problem["errors"][0]
    assert (first["field"], first["location"], first["value"]) == (field, location, value)
    assert problem["message"].startswith(f"{field}: ")
    assert client.get("/routes/s-1").json()["state"] == "none"  # nothing written


@pytest.mark.parametrize(("text", "shown"), [("NaN", "nan"), ("Infinity", "inf"), ("1e400", "inf")])
def test_a_number_json_cannot_answer_is_shown_as_text(
    client: TestClient, text: str, shown: str
) -> None:
    """Found by hand: Python's JSON reader takes NaN and overflows to infinity, and the
    error that showed the value back could not be written (a 500)."""
    body = f'{{"generation": {text}}}'.encode()
    answer = client.post(
        "/routes/s-1/success", content=body, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 422
    assert answer.json()["errors"][0]["value"] == shown


def test_a_bad_dynamic_profile_is_422_with_every_problem_field_addressed(
    client: TestClient,
) -> None:
    profile = dynamic("a", "b")
    profile["candidates"][0]["transient"]["retry"]["max_retries"] = 99
    profile["candidates"][1]["hard"]["on_exhausted"] = "explode"
    answer = client.post("/routes/s-1/start", json=start(profile))
    assert answer.status_code == 422
    fields = [item["field"] for item in answer.json()["errors"]]
    assert fields == [
        "profile.candidates[0].transient.retry.max_retries",
        "profile.candidates[1].hard.on_exhausted",
    ]


def test_a_classification_the_catalogue_could_not_have_made_is_422_naming_its_field(
    client: TestClient,
) -> None:
    client.post("/routes/s-1/start", json=start())
    made_up = {
        "code": "provider_overloaded", "error_class": "transient", "confidence": "high",
        "scope": "provider", "rule": "no.such.rule.v1",
    }  # fmt: skip
    body = {**failure(1), "evidence": None, "classification": made_up}
    answer = client.post("/routes/s-1/failure", json=body)
    assert answer.status_code == 422, answer.text
    first = answer.json()["errors"][0]
    assert first["field"] == "classification.rule"
    assert "no.such.rule.v1" in str(first["value"])
    neither = client.post("/routes/s-1/failure", json={**failure(1), "evidence": None})
    assert neither.json()["errors"][0]["field"] == "evidence"
    assert client.get("/routes/s-1").json()["state"] == "active"


def test_only_a_start_fresh_takes_a_profile(client: TestClient) -> None:
    client.post("/routes/s-1/start", json=start())
    client.post("/routes/s-1/actions/stop", json={"generation": 1})
    refused = client.post(
        "/routes/s-1/actions/resume", json={"generation": 1, "profile": dynamic("x")}
    )
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["field"] == "profile"
    fresh = client.post(
        "/routes/s-1/actions/start-fresh", json={"generation": 1, "profile": dynamic("x", "y")}
    )
    assert fresh.status_code == 200, fresh.text
    assert (fresh.json()["generation"], fresh.json()["candidate_id"]) == (2, "x")
    assert fresh.json()["next_step"] == "run"


def test_routes_filter_by_state_code_candidate_and_caller_a_page_at_a_time(
    client: TestClient,
) -> None:
    for index in range(5):
        route = f"r-{index}"
        caller = "ci" if index % 2 else "kanban"
        client.post(f"/routes/{route}/start", json=start(dynamic("a", "b"), caller=caller))
        if index < 3:
            client.post(f"/routes/{route}/failure", json={**failure(1), "caller": caller})
    waiting = client.get("/routes", params={"state": "retry_wait"}).json()
    assert [r["route_id"] for r in waiting["routes"]] == ["r-0", "r-1", "r-2"]
    assert all(r["code"] == "provider_overloaded" for r in waiting["routes"])
    by_caller = client.get("/routes", params={"caller": "ci"}).json()["routes"]
    assert [r["route_id"] for r in by_caller] == ["r-1", "r-3"]
    coded = client.get("/routes", params={"code": "provider_overloaded", "candidate": "a"})
    assert len(coded.json()["routes"]) == 3
    pages, cursor = [], None
    while True:
        params: dict[str, Any] = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = client.get("/routes", params=params).json()
        pages.append([r["route_id"] for r in page["routes"]])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == [["r-0", "r-1"], ["r-2", "r-3"], ["r-4"]]
    bad = client.get("/routes", params={"limit": 0})
    assert (bad.status_code, bad.json()["errors"][0]["field"]) == (422, "limit")
    assert bad.json()["errors"][0]["location"] == "query"


def test_an_unknown_path_and_method_answer_in_the_same_shape(client: TestClient) -> None:
    missing = client.get("/no/such/path")
    assert (missing.status_code, missing.json()["error"]) == (404, "not_found")
    wrong = client.delete("/routes/s-1")
    assert (wrong.status_code, wrong.json()["error"]) == (405, "method_not_allowed")
