"""Bearer tokens: 401 without or with a wrong token and nothing read, each token's
principal handed to the authoriser, the open paths, constant-time digests, token files
checked without ever showing a token; the body bound and the request metrics."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.api import TokenError, Tokens, load_tokens
from actors.api.auth import bearer
from tests.actors.api.api_rigs import (
    OTHER_TOKEN,
    PRINCIPALS,
    TOKEN,
    RecordedMetrics,
    client_of,
    fake_backend,
    recording_backend,
)
from tests.actors.api.payloads import start
from tests.actors.conftest import unique_keys

TOKENS = Tokens.of(PRINCIPALS)
WRONG = [{}, {"Authorization": "Bearer not-the-token-at-all-123"}, {"Authorization": TOKEN},
         {"Authorization": f"Basic {TOKEN}"}, {"Authorization": f"Bearer {TOKEN}x"}]  # fmt: skip


@pytest.mark.parametrize("headers", WRONG, ids=["none", "wrong", "no-scheme", "basic", "longer"])
@pytest.mark.parametrize(
    ("method", "path", "body"),
    [("GET", "/routes", None), ("GET", "/routes/s-1", None),
     ("POST", "/routes/s-1/start", start()), ("GET", "/schedules", None),
     ("GET", "/circuits", None), ("GET", "/events", None), ("POST", "/classify", {}),
     ("GET", "/profiles", None), ("PUT", "/profiles/fleet", {"version": 1, "profile": {}}),
     ("DELETE", "/profiles/fleet", None), ("GET", "/no/such/path", None)],
)  # fmt: skip
def test_without_or_with_a_wrong_token_a_request_is_401_and_nothing_is_read(
    headers: dict[str, str], method: str, path: str, body: object
) -> None:
    backend, touched = recording_backend(unique_keys())
    with client_of(backend, tokens=TOKENS) as client:
        touched.commands.clear()  # the app's startup made its clients: no request yet
        answer = client.request(method, path, json=body, headers=headers)
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"] == "Bearer"
        assert answer.json()["error"] == "unauthorised"
        assert TOKEN not in answer.text
        assert (touched.routes, touched.calls, touched.commands) == ([], [], [])


def test_with_the_token_the_same_requests_reach_the_runtime() -> None:
    backend, touched = recording_backend(unique_keys())
    with client_of(backend, tokens=TOKENS) as client:
        answer = client.get("/routes/s-1", headers={"Authorization": f"Bearer {TOKEN}"})
        assert answer.status_code == 200
        assert touched.calls == ["snapshot"]
        listed = client.get("/routes", headers={"Authorization": f"bearer {OTHER_TOKEN}"})
        assert listed.status_code == 200
        assert touched.commands  # the listing read Redis


def test_openapi_and_docs_need_no_token() -> None:
    with client_of(fake_backend(unique_keys()), tokens=TOKENS) as client:
        schema = client.get("/openapi.json")
        assert schema.status_code == 200
        assert "/routes/{route_id}/failure" in schema.json()["paths"]
        assert client.get("/docs").status_code == 200
        assert client.get("/docs/extra").status_code == 401


def test_each_token_hands_its_own_principal_to_the_authoriser() -> None:
    backend, touched = recording_backend(unique_keys())
    with client_of(backend, tokens=TOKENS) as client:
        for token in (TOKEN, OTHER_TOKEN):
            answer = client.post(
                "/sessions/s-1/cancel-transient-retry", json={"task_id": "task-1"},
                headers={"Authorization": f"Bearer {token}"},
            )  # fmt: skip
            assert answer.status_code == 200, answer.text
            assert answer.json() == {"active": False, "snapshot": answer.json()["snapshot"]}
    assert [c for c in touched.calls if c.startswith("principal=")] == [
        "principal=alice", "principal=bob",
    ]  # fmt: skip


def test_a_token_maps_to_its_principal_comparing_every_digest() -> None:
    tokens = Tokens.of({"a" * 20: "one", "b" * 20: "two"})
    assert tokens.required
    assert tokens.principal_of("b" * 20) == "two"
    assert tokens.principal_of("a" * 19) is None
    assert tokens.principal_of("") is None
    assert not Tokens().required
    assert "a" * 20 not in repr(tokens)
    assert bearer(b"Bearer  xyz ") == "xyz"
    assert bearer(b"Token xyz") is None
    assert bearer(None) is None


def test_a_token_file_maps_principals_and_its_problems_never_show_a_token(
    tmp_path: Path,
) -> None:
    good = tmp_path / "tokens"
    good.write_text(f"# operators\nalice {TOKEN}\n\nci-bot {OTHER_TOKEN}\n", encoding="utf-8")
    tokens = load_tokens("env-token-0123456789", good)
    assert tokens.principals == ("api", "alice", "ci-bot")
    assert tokens.principal_of(OTHER_TOKEN) == "ci-bot"
    short = "tiny-secret"
    for text, expected in [
        (f"alice {short}\n", "line 1: a token must be at least 16"),
        (f"alice {TOKEN} extra\n", "line 1: must be '<principal> <token>'"),
        (f"al ice {TOKEN}\n", "line 1: must be '<principal> <token>'"),
        (f"bad/name {TOKEN}\n", "principal 'bad/name' must match"),
        (f"alice {TOKEN}\nbob {TOKEN}\n", "line 2: this token is given twice"),
    ]:
        bad = tmp_path / "bad"
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(TokenError) as caught:
            load_tokens(None, bad)
        assert expected in str(caught.value)
        assert TOKEN not in str(caught.value)
        assert short not in str(caught.value)
    with pytest.raises(TokenError, match="RECOVERY_API_TOKEN: a token must be"):
        load_tokens(short, None)
    with pytest.raises(TokenError, match="cannot read the token file"):
        load_tokens(None, tmp_path / "missing")


def test_a_body_beyond_the_bound_is_413_before_it_is_read() -> None:
    with client_of(fake_backend(unique_keys())) as client:
        huge = {"kind": "stderr", "text": "x" * (1 << 20)}
        answer = client.post("/classify", json=huge)
        assert answer.status_code == 413
        assert answer.json()["error"] == "too_large"


def test_a_body_sent_as_a_form_is_415_naming_json() -> None:
    with client_of(fake_backend(unique_keys())) as client:
        body = b'{"kind": "stderr"}'
        form_type = {"Content-Type": "application/x-www-form-urlencoded"}
        form = client.post("/classify", content=body, headers=form_type)
        assert (form.status_code, form.json()["error"]) == (415, "unsupported_media_type")
        assert "application/json" in form.json()["message"]
        json_type = {"Content-Type": "application/json; charset=utf-8"}
        typed = client.post("/classify", content=body, headers=json_type)
        assert typed.status_code == 200


def test_requests_are_counted_by_route_template_method_and_status() -> None:
    metrics = RecordedMetrics()
    with client_of(fake_backend(unique_keys()), tokens=TOKENS, metrics=metrics) as client:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        client.post("/routes/s-1/start", json=start(), headers=auth)
        client.post("/routes/s-1/success", json={"generation": 9}, headers=auth)
        client.get("/routes/s-1")
        client.get("/nope", headers=auth)
    assert metrics.seen == [
        ("/routes/{route_id}/start", "POST", 200),
        ("/routes/{route_id}/success", "POST", 409),
        ("unmatched", "GET", 401),
        ("unmatched", "GET", 404),
    ]
