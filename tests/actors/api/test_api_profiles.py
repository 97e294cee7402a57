"""`/profiles…` over HTTP on the profile store (fakeredis, no Ray): create answers the
normalised document, a bad field is 422 addressed under `profile`, an edit on a stale
version is 409 and changes nothing, a delete is 204 and the profile is gone; edits are
authorised for the token's principal; a stored document that cannot be decided from is
409 and starts no route; a route started by profile id follows its current version."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import fakeredis
import pytest
from fastapi.testclient import TestClient

from actors.api import Tokens
from tests.actors.api.api_rigs import OTHER_TOKEN, PRINCIPALS, TOKEN, client_of, fake_backend
from tests.actors.api.payloads import dynamic, failure, start
from tests.actors.conftest import unique_keys


@pytest.fixture
def client() -> Iterator[TestClient]:
    with client_of(fake_backend(unique_keys())) as made:
        yield made


def test_a_new_installation_lists_no_profiles(client: TestClient) -> None:
    answer = client.get("/profiles")
    assert answer.status_code == 200
    assert answer.json() == {"profiles": [], "unreadable": [], "next_cursor": None}


def test_create_answers_the_normalised_document_and_get_reads_it_back(
    client: TestClient,
) -> None:
    legacy = {
        "version": 1,
        "candidates": [
            {"id": "claude", "agent": "claude-acp", "rules": {"on_provider_error": "try_next"}}
        ],
    }
    created = client.post("/profiles", json={"id": "fleet", "profile": legacy})
    assert created.status_code == 201, created.text
    stored = created.json()
    assert stored["version"] == 1
    transient = stored["document"]["candidates"][0]["transient"]
    assert transient["on_exhausted"] == "skip"
    assert transient["retry"] == {"enabled": False, "max_retries": 0,
                                  "initial_interval_seconds": 0}  # fmt: skip
    assert client.get("/profiles/fleet").json() == stored
    assert [p["profile_id"] for p in client.get("/profiles").json()["profiles"]] == ["fleet"]
    again = client.post("/profiles", json={"id": "fleet", "profile": legacy})
    assert (again.status_code, again.json()["error"]) == (409, "profile_exists")


def test_a_bad_limit_is_422_at_its_field_under_profile(client: TestClient) -> None:
    profile = dynamic("claude", "codex", retries=11)
    answer = client.post("/profiles", json={"id": "fleet", "profile": profile})
    assert answer.status_code == 422
    fields = {item["field"] for item in answer.json()["errors"]}
    assert "profile.candidates[1].hard.retry.max_retries" in fields
    assert client.get("/profiles/fleet").status_code == 404


def test_an_update_on_a_stale_version_is_409_and_changes_nothing(client: TestClient) -> None:
    client.post("/profiles", json={"id": "fleet", "profile": dynamic("claude")})
    updated = client.put(
        "/profiles/fleet", json={"version": 1, "profile": dynamic("claude", "codex")}
    )
    assert (updated.status_code, updated.json()["version"]) == (200, 2)
    stale = client.put("/profiles/fleet", json={"version": 1, "profile": dynamic("x")})
    assert (stale.status_code, stale.json()["error"]) == (409, "stale_profile_version")
    assert client.get("/profiles/fleet").json() == updated.json()


def test_a_delete_is_204_and_the_profile_is_gone(client: TestClient) -> None:
    client.post("/profiles", json={"id": "fleet", "profile": dynamic("claude")})
    assert client.delete("/profiles/fleet?version=1").status_code == 204
    missing = client.get("/profiles/fleet")
    assert (missing.status_code, missing.json()["error"]) == (404, "profile_not_found")


def stopping(*ids: str) -> dict[str, Any]:
    """A dynamic profile whose candidates stop at their first failure of either class."""
    profile = dynamic(*ids)
    for candidate in profile["candidates"]:
        for name in ("transient", "hard"):
            candidate[name] = {**candidate[name], "on_exhausted": "stop",
                               "retry": {"enabled": False, "max_retries": 0,
                                         "initial_interval_seconds": 0}}  # fmt: skip
    return profile


def test_a_route_started_by_profile_id_decides_with_its_current_version(
    client: TestClient,
) -> None:
    client.post("/profiles", json={"id": "fleet", "profile": dynamic("claude", "codex")})
    body = {**start(), "profile": None, "profile_id": "fleet"}
    started = client.post("/routes/f-1/start", json=body)
    assert started.status_code == 200, started.text
    assert (started.json()["profile_id"], started.json()["profile_version"]) == ("fleet", 1)
    assert started.json()["candidate_id"] == "claude"
    edited = client.put("/profiles/fleet", json={"version": 1, "profile": stopping("claude")})
    assert edited.json()["version"] == 2
    stopped = client.post("/routes/f-1/failure", json=failure(1))
    assert stopped.status_code == 200, stopped.text
    assert (stopped.json()["state"], stopped.json()["profile_version"]) == ("action_required", 2)
    history = client.get("/routes/f-1/history").json()
    assert [(r["decision"], r["profile_id"], r["profile_version"]) for r in history] == [
        ("start", "fleet", 1), ("stop", "fleet", 2),
    ]  # fmt: skip


def test_a_route_command_on_a_profile_that_is_gone_is_409_naming_it_and_changes_nothing(
    client: TestClient,
) -> None:
    missing = client.post("/routes/f-1/start", json={**start(), "profile": None,
                                                     "profile_id": "nowhere"})  # fmt: skip
    assert (missing.status_code, missing.json()["error"]) == (409, "profile_not_found")
    assert "'nowhere'" in missing.json()["message"]
    assert client.get("/routes/f-1").json()["state"] == "none"
    client.post("/profiles", json={"id": "fleet", "profile": stopping("claude")})
    client.post("/routes/f-1/start", json={**start(), "profile": None, "profile_id": "fleet"})
    client.post("/routes/f-1/failure", json=failure(1))
    before = client.get("/routes/f-1").json()
    assert before["state"] == "action_required"
    client.delete("/profiles/fleet")
    for action in ("resume", "start-fresh"):
        refused = client.post(f"/routes/f-1/actions/{action}", json={"generation": 1})
        assert (refused.status_code, refused.json()["error"]) == (409, "profile_not_found")
    assert client.get("/routes/f-1").json() == before


@pytest.mark.parametrize(
    ("extra", "field"),
    [({"profile_id": "fleet"}, "profile_id"), ({"profile": None}, "profile")],
)
def test_a_start_takes_exactly_one_of_profile_and_profile_id(
    client: TestClient, extra: dict[str, Any], field: str
) -> None:
    answer = client.post("/routes/f-1/start", json={**start(dynamic("claude")), **extra})
    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"][0]["field"] == field
    assert client.get("/routes/f-1").json()["state"] == "none"


class OnlyBob:
    """An authoriser that lets `bob` edit profiles and records whom it was asked about."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, str | None]] = []

    async def authorise_profile_edit(
        self, action: str, profile_id: str, principal: str | None
    ) -> bool:
        self.asked.append((action, profile_id, principal))
        return principal == "bob"


def test_an_edit_is_authorised_for_the_tokens_principal_and_a_refusal_writes_nothing() -> None:
    authoriser = OnlyBob()
    backend = fake_backend(unique_keys(), authoriser=authoriser)
    with client_of(backend, tokens=Tokens.of(PRINCIPALS)) as client:
        alice, bob = ({"Authorization": f"Bearer {token}"} for token in (TOKEN, OTHER_TOKEN))
        body = {"id": "fleet", "profile": dynamic("claude")}
        refused = client.post("/profiles", json=body, headers=alice)
        assert (refused.status_code, refused.json()["error"]) == (403, "not_authorised")
        assert client.get("/profiles/fleet", headers=alice).status_code == 404
        assert client.post("/profiles", json=body, headers=bob).status_code == 201
        changed = {"version": 1, "profile": dynamic("codex")}
        assert client.put("/profiles/fleet", json=changed, headers=alice).status_code == 403
        assert client.delete("/profiles/fleet", headers=alice).status_code == 403
        assert client.get("/profiles/fleet", headers=alice).json()["version"] == 1
    assert authoriser.asked == [
        ("create", "fleet", "alice"), ("create", "fleet", "bob"), ("update", "fleet", "alice"),
        ("delete", "fleet", "alice"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    "document",
    [
        '{"version": 1, "candidates": [{"id": "claude", "agent": "claude-acp",'
        ' "rules": {"on_provider_error": "try_next"}}]}',
        "{not json",
    ],
    ids=["legacy", "not-json"],
)
def test_a_stored_document_that_cannot_be_decided_from_is_409_and_authorises_no_route(
    document: str,
) -> None:
    server, keys = fakeredis.FakeServer(), unique_keys()
    with client_of(fake_backend(keys, server=server)) as client:
        client.post("/profiles", json={"id": "fleet", "profile": dynamic("claude")})
        raw = fakeredis.FakeRedis(server=server, decode_responses=True)
        raw.hset(keys.profile("fleet"), "document", document)  # written around the store
        read = client.get("/profiles/fleet")
        assert (read.status_code, read.json()["error"]) == (409, "invalid_stored_profile")
        assert "write it again" in read.json()["message"]
        listed = client.get("/profiles").json()
        assert listed["profiles"] == []
        assert [item["profile_id"] for item in listed["unreadable"]] == ["fleet"]
        body = {**start(), "profile": None, "profile_id": "fleet"}
        refused = client.post("/routes/f-1/start", json=body)
        assert (refused.status_code, refused.json()["error"]) == (409, "invalid_stored_profile")
        assert client.get("/routes/f-1").json()["state"] == "none"
        assert raw.hget(keys.profile("fleet"), "document") == document  # never normalised
