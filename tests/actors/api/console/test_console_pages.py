"""The console's pages without a browser (fakeredis, no Ray): served under /console/ with
their sections in the HTML, the policy package's limits embedded, values escaped; the
login form and its cookie (HttpOnly, SameSite=Strict), the cross-site guard on writes
authenticated by it, and no token in any page."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from actors.api import Tokens
from actors.api.console.charts import state_bands
from actors.api.models import CircuitChange
from policy.document import MAX_INITIAL_INTERVAL_SECONDS, MAX_RETRIES, MAX_WAIT_SECONDS
from tests.actors.api.api_rigs import client_of, fake_backend
from tests.actors.api.payloads import dynamic, failure, start
from tests.actors.conftest import unique_keys

TOKEN = "pages-token-0123456789abcdef"


@pytest.fixture
def client() -> Iterator[TestClient]:
    with client_of(fake_backend(unique_keys())) as made:
        yield made


@pytest.fixture
def guarded() -> Iterator[TestClient]:
    with client_of(fake_backend(unique_keys()), tokens=Tokens.of({TOKEN: "alice"})) as made:
        yield made


def headings(html: str) -> list[str]:
    return [
        re.sub(r"<[^>]+>", "", h).strip() for h in re.findall(r"<h[12][^>]*>(.*?)</h[12]>", html)
    ]


def test_the_root_redirects_to_the_console_whose_home_is_the_live_routes(
    client: TestClient,
) -> None:
    answer = client.get("/", follow_redirects=False)
    assert (answer.status_code, answer.headers["location"]) == (307, "/console/")
    home = client.get("/console/")
    assert home.status_code == 200
    assert home.headers["content-type"].startswith("text/html")
    assert "Live routes" in headings(home.text)
    assert '<th scope="col">Deadline</th>' in home.text


def test_the_new_profile_editor_has_one_draft_both_class_sections_and_no_add_profile(
    client: TestClient,
) -> None:
    html = client.get("/console/profiles/new").text
    assert headings(html)[:3] == ["New profile", "Profile", "Candidates"]
    assert 'id="add-profile"' not in html
    assert "Add profile" not in html
    rows = html.split('<template id="candidate-template">')[0]
    assert rows.count("data-candidate") == 1
    for text in ("Transient errors", "Hard errors", "HTTP 529", "usage limit reached",
                 "Skip candidate", "Stop", "trusted future reset time"):  # fmt: skip
        assert text in rows
    limits = json.loads(re.findall(r'id="limits">(.*?)</script>', html, re.S)[0])
    assert limits["max_retries"] == [1, MAX_RETRIES]
    assert limits["initial_interval_seconds"] == [1, MAX_INITIAL_INTERVAL_SECONDS]
    assert limits["max_wait_seconds"] == [1, MAX_WAIT_SECONDS]
    assert f'max="{MAX_WAIT_SECONDS}"' in rows
    assert "Add profile" in client.get("/console/profiles").text  # on the list, not here


def test_a_stored_profile_opens_in_the_editor_with_its_values_escaped(
    client: TestClient,
) -> None:
    profile = {**dynamic("claude", "codex", retries=4, interval=7), "name": "<img src=x>"}
    assert client.post("/profiles", json={"id": "fleet", "profile": profile}).status_code == 201
    html = client.get("/console/profiles/fleet").text
    assert "&lt;img src=x&gt;" in html
    assert "<img src=x>" not in html
    assert 'data-field="transient.retry.max_retries" value="4"' in re.sub(r"\s+", " ", html)
    assert client.get("/console/profiles/missing").status_code == 404


def test_a_route_page_offers_the_actions_of_its_state_and_its_timeline(
    client: TestClient,
) -> None:
    client.post("/routes/r-1/start", json=start(dynamic("claude", "codex")))
    client.post("/routes/r-1/failure", json=failure(1))
    html = client.get("/console/routes/r-1").text
    assert {"State", "Actions", "Attempt timeline"} <= set(headings(html))
    actions = re.findall(r'data-action="([a-z-]+)"', html)
    assert actions == ["retry-now", "skip", "cancel", "stop"]
    assert "the provider is shedding load" in html  # the safe cause, the catalogue's words
    listed = client.get("/console/routes?state=retry_wait").text
    assert 'data-route="r-1"' in listed
    assert 'data-route="r-1"' not in client.get("/console/routes?state=active").text


def test_the_circuits_page_and_its_chart_of_the_last_hour(client: TestClient) -> None:
    assert "All circuits" in headings(client.get("/console/circuits").text)
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    def change(minutes_ago: int, old: str, new: str) -> CircuitChange:
        return CircuitChange(event_id="1-0", cause="c", from_state=old, state=new,
                             at=now - timedelta(minutes=minutes_ago))  # fmt: skip

    bands = state_bands([change(90, "closed", "open"), change(45, "open", "half_open"),
                         change(15, "half_open", "closed")], "closed", now)  # fmt: skip
    assert [(b.state, b.start, b.width) for b in bands] == [
        ("open", 0.0, 25.0), ("half_open", 25.0, 50.0), ("closed", 75.0, 25.0)]  # fmt: skip
    assert [(b.state, b.width) for b in state_bands([], "open", now)] == [("open", 100.0)]


def test_without_a_token_a_page_goes_to_the_login_form_and_the_api_is_401(
    guarded: TestClient,
) -> None:
    answer = guarded.get("/console/routes?state=active", follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/console/login?next=%2Fconsole%2Froutes%3Fstate%3Dactive"
    assert guarded.get("/routes").status_code == 401
    assert guarded.get("/events").status_code == 401
    assert guarded.get("/console/static/console.js").status_code == 200
    assert guarded.get("/console/login").status_code == 200
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert guarded.get("/console/routes", headers=bearer).status_code == 200


def test_the_login_form_sets_an_httponly_strict_cookie_and_never_shows_the_token(
    guarded: TestClient,
) -> None:
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    wrong = guarded.post("/console/login", content=f"token=not-{TOKEN}", headers=form)
    assert wrong.status_code == 401
    assert TOKEN not in wrong.text
    assert "set-cookie" not in wrong.headers
    away = f"token={TOKEN}&next=https%3A%2F%2Fevil.example%2F"
    elsewhere = guarded.post("/console/login", headers=form, follow_redirects=False, content=away)
    assert elsewhere.headers["location"] == "/console/"
    answer = guarded.post("/console/login", headers=form, follow_redirects=False,
                          content=f"token={TOKEN}&next=%2Fconsole%2Fcircuits")  # fmt: skip
    assert (answer.status_code, answer.headers["location"]) == (303, "/console/circuits")
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("recovery_console=")
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert "Path=/" in cookie
    page = guarded.get("/console/profiles/new")
    assert page.status_code == 200
    assert TOKEN not in page.text
    assert "Log out" in page.text


def test_a_write_by_cookie_needs_the_consoles_header_and_its_own_origin(
    guarded: TestClient,
) -> None:
    guarded.cookies.set("recovery_console", TOKEN)
    assert guarded.get("/routes").status_code == 200  # a read by cookie
    body = {"id": "fleet", "profile": dynamic("claude")}
    refused = guarded.post("/profiles", json=body)
    assert (refused.status_code, refused.json()["error"]) == (403, "cross_site")
    foreign = {"X-Requested-With": "console", "Origin": "https://evil.example"}
    assert guarded.post("/profiles", json=body, headers=foreign).status_code == 403
    assert guarded.get("/profiles/fleet").status_code == 404  # nothing was written
    own = {"X-Requested-With": "console", "Origin": "http://testserver"}
    assert guarded.post("/profiles", json=body, headers=own).status_code == 201
    guarded.cookies.clear()
    bearer = {"Authorization": f"Bearer {TOKEN}"}  # a bearer token needs no such header
    assert guarded.put("/profiles/fleet", json={"version": 1, "profile": dynamic("x")},
                       headers=bearer).status_code == 200  # fmt: skip


def test_every_page_loads_its_scripts_and_styles_from_the_app_itself(client: TestClient) -> None:
    """Nothing is fetched from a CDN or any other host at run time: every script and
    stylesheet a page names is one of the console's own static files, which are served."""
    client.post("/profiles", json={"id": "fleet", "profile": dynamic("claude")})
    client.post("/routes/r-1/start", json=start(dynamic("claude")))
    pages = ["/console/", "/console/routes/r-1", "/console/circuits", "/console/profiles",
             "/console/profiles/new", "/console/profiles/fleet", "/console/login"]  # fmt: skip
    for path in pages:
        html = client.get(path).text
        assert not re.search(r'(src|href)="(https?:)?//', html), path
        assets = re.findall(r'<(?:script|link)[^>]*(?:src|href)="([^"]+)"', html)
        assert assets, path
        for asset in assets:
            assert asset.startswith("/console/static/"), (path, asset)
            assert client.get(asset).status_code == 200, asset
    listed = client.get("/console/profiles").text
    assert 'href="/console/profiles/fleet"' in listed  # the stored profiles, each a link
