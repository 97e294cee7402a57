"""Live routes in a real browser: a route driven into `retry_wait` appears in the table
from the event stream; Cancel wait on its page moves it to `action_required` (and the
table follows); a stale action shows the fresh snapshot with a clear message; a retry
notice is one inline card with Cancel on a desktop and on a Pixel 5, gone from both
when the notice is deleted; circuits with their last hour as a chart."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import pytest
from playwright.sync_api import Browser, Page, expect
from redis.asyncio import Redis as AsyncRedis

from actors.routes.circuit_models import CloseCircuit
from actors.store.circuit_store import CircuitStore
from tests.actors.api.console.conftest import LiveConsole, logged_in, screenshot
from tests.actors.api.payloads import dynamic, failure, overloaded, start
from tests.actors.circuit_fixtures import OTHER, RESOURCE, hard

pytestmark = pytest.mark.integration


def waiting_route(live: LiveConsole, route_id: str, **extra: Any) -> dict[str, Any]:
    """A route on claude then codex, failed once with a 529: `retry_wait` on claude
    (nothing fires it: this rig runs no timers, so the test decides what happens)."""
    body = {**start(dynamic("claude", "codex")), **extra}
    live.post(f"/routes/{route_id}/start", body)
    snapshot: dict[str, Any] = live.post(f"/routes/{route_id}/failure", failure(1))
    assert snapshot["state"] == "retry_wait", snapshot
    return snapshot


def routes_page(page: Page) -> None:
    page.goto("/console/routes")
    expect(page.locator("#live")).to_have_text("live")  # the event stream is open


def test_a_waiting_route_appears_live_and_cancel_wait_moves_it_to_action_required(
    browser: Browser, live: LiveConsole
) -> None:
    context = logged_in(browser, live)
    table = context.new_page()
    routes_page(table)
    waiting_route(live, "live-1")
    row = table.locator('tr[data-route="live-1"]')
    expect(row).to_have_attribute("data-state", "retry_wait")
    expect(row.locator('[data-label="State"]')).to_have_text("retry_wait")
    expect(row.locator('[data-label="Candidate"]')).to_have_text("claude")
    expect(row.locator('[data-label="Class"]')).to_have_text("transient")
    expect(row.locator('[data-label="Cause"]')).to_contain_text("(provider_overloaded)")
    expect(row.locator('[data-label="Retry"]')).to_have_text("1 / 3")
    expect(row.locator("[data-countdown]")).to_contain_text("in ")
    expect(row.locator('[data-label="Next"]')).to_have_text("retry")
    expect(row.locator('[data-label="Caller"]')).to_have_text("go-orchestrator")
    table.locator("#filter-state").select_option("active")
    expect(row).to_be_hidden()
    table.locator("#filter-state").select_option("retry_wait")
    expect(row).to_be_visible()
    screenshot(table, "routes-table.png")

    route = context.new_page()
    route.goto("/console/routes/live-1")
    expect(route.get_by_role("heading", name="Attempt timeline")).to_be_visible()
    expect(route.locator("#timeline svg circle")).to_have_count(2)  # start, retry
    route.get_by_role("button", name="Cancel wait").click()
    expect(route.locator('[data-fact="state"]')).to_have_text("action_required")
    expect(route.locator("#message")).to_contain_text("Cancel wait: done")
    expect(route.get_by_role("button", name="Resume")).to_be_visible()
    expect(route.get_by_role("button", name="Start fresh")).to_be_visible()
    expect(route.locator("#timeline svg circle")).to_have_count(3)
    expect(row).to_have_attribute("data-state", "action_required")  # the table followed
    assert live.http.get("/routes/live-1").json()["state"] == "action_required"
    screenshot(route, "route-timeline.png")
    context.close()


def test_a_stale_action_shows_the_fresh_snapshot_and_says_so(
    browser: Browser, live: LiveConsole
) -> None:
    context = logged_in(browser, live)
    page = context.new_page()
    waiting_route(live, "stale-1")
    page.goto("/console/routes/stale-1")
    expect(page.locator('[data-fact="generation"]')).to_have_text("1")
    skipped = live.post("/routes/stale-1/actions/skip", {"generation": 1})  # someone else
    assert skipped["generation"] == 2
    expect(page.locator("#changed")).to_contain_text("generation 2 now")  # said, not applied
    expect(page.locator('[data-fact="generation"]')).to_have_text("1")
    page.get_by_role("button", name="Retry now").click()
    expect(page.locator("#message")).to_contain_text("was not applied")
    expect(page.locator("#message")).to_contain_text("generation 2")
    expect(page.locator('[data-fact="generation"]')).to_have_text("2")
    expect(page.locator('[data-fact="state"]')).to_have_text(skipped["state"])
    expect(page.locator('[data-fact="candidate_id"]')).to_have_text("codex")
    expect(page.get_by_role("button", name="Retry now")).to_have_count(0)
    expect(page.locator("#changed")).to_be_hidden()
    assert live.http.get("/routes/stale-1").json() == skipped  # the stale click did nothing
    context.close()


def test_a_retry_notice_is_one_card_with_cancel_on_desktop_and_phone_until_deleted(
    browser: Browser, live: LiveConsole, pixel_5: dict[str, Any]
) -> None:
    waiting_route(live, "notice-1", task_id="task-1")
    desktop = logged_in(browser, live).new_page()
    phone = logged_in(browser, live, **pixel_5).new_page()
    for page in (desktop, phone):
        page.goto("/console/routes/notice-1")
        card = page.locator("#notices .notice")
        expect(card).to_have_count(1)
        expect(card).to_contain_text("Automatic retry 1 of 3")
        expect(card.get_by_role("button", name="Cancel")).to_be_visible()
        assert card.get_by_role("button", name="Cancel").bounding_box()["height"] >= 44  # type: ignore[index]  # visible: a box
    widths = phone.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], widths  # the route page fits the phone too
    screenshot(phone, "notice-phone.png")
    desktop.locator("#notices").get_by_role("button", name="Cancel").click()
    for page in (desktop, phone):  # the deletion event reaches both
        expect(page.locator("#notices .notice")).to_have_count(0)
    expect(desktop.locator('[data-fact="state"]')).to_have_text("action_required")
    assert live.http.get("/sessions/notice-1/notices").json() == {"notices": []}
    desktop.context.close()
    phone.context.close()


def test_the_circuits_page_shows_each_circuits_state_and_its_last_hour(
    browser: Browser, live: LiveConsole
) -> None:
    now = datetime.now(UTC)
    in_a_thread(write_circuits(live, now))  # the circuit store's own write path
    page = logged_in(browser, live).new_page()
    page.goto("/console/circuits")
    cards = page.locator("#circuits .circuit")
    expect(cards).to_have_count(2)
    closed = page.locator(f'[data-circuit="{RESOURCE.resource_id}"]')
    expect(closed.locator(".state")).to_have_text("closed")
    expect(closed.locator("rect.band-open")).to_have_count(1)  # open 30 to 10 min ago
    expect(closed.locator("rect.band-closed")).to_have_count(2)
    opened = page.locator(f'[data-circuit="{OTHER.resource_id}"]')
    expect(opened.locator(".state")).to_have_text("open")
    expect(opened.locator("time[data-deadline]")).not_to_be_empty()
    expect(opened).to_contain_text("Parked routes")
    screenshot(page, "circuits.png")
    page.context.close()


async def write_circuits(live: LiveConsole, now: datetime) -> None:
    """One circuit opened by a quota failure 30 minutes ago and closed 10 minutes ago by
    an operator, one opened 5 minutes ago for an hour."""
    client = AsyncRedis.from_url(live.redis_url, decode_responses=True)
    async with CircuitStore(client, keys=live.keys, owns_client=True) as store:
        await store.record_failure(RESOURCE, hard(600), "route-1", now - timedelta(minutes=30))
        await store.override(RESOURCE, CloseCircuit(), now - timedelta(minutes=10))
        await store.record_failure(OTHER, hard(3600), "route-2", now - timedelta(minutes=5))


def in_a_thread(work: Coroutine[Any, Any, None]) -> None:
    """Run `work` on a loop of its own: Playwright's sync API holds this thread's loop."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, work).result()


def test_a_countdown_that_ends_only_says_so_and_the_browser_sends_nothing(
    browser: Browser, live: LiveConsole
) -> None:
    """This rig runs no timers: whatever moved the route past its deadline would be the
    browser's doing. The page says the deadline is due and leaves it to the runtime."""
    body = {**start(dynamic("claude", "codex", interval=1))}
    live.post("/routes/due-1/start", body)
    waiting = live.post("/routes/due-1/failure", failure(1))
    assert waiting["state"] == "retry_wait", waiting
    context = logged_in(browser, live)
    sent: list[str] = []
    context.on("request", lambda request: sent.append(f"{request.method} {request.url}"))
    table, route = context.new_page(), context.new_page()
    routes_page(table)
    route.goto("/console/routes/due-1")
    for countdown in (
        table.locator('tr[data-route="due-1"] [data-countdown]'),
        route.locator('[data-fact="deadline"] [data-countdown]'),
    ):
        expect(countdown).to_have_text("(due: the runtime fires it)")
    assert [line for line in sent if not line.startswith("GET ")] == []
    assert live.http.get("/routes/due-1").json() == waiting
    context.close()


SECRET: Final = "sk-ant-api03-" + "Zq7" * 30
PROVIDER_TEXT: Final = "zebra-quartz overloaded_error <b>bold</b>"


def test_no_page_shows_the_providers_own_text_or_a_secret_it_carried(
    browser: Browser, live: LiveConsole
) -> None:
    """A provider's message (with a key in it) is classified; the console shows the
    catalogue's words for its code, never the message, and no page holds the key."""
    evidence = overloaded()
    evidence["body"] = json.dumps({"type": "error", "error": {
        "type": "overloaded_error", "message": f"{PROVIDER_TEXT} key={SECRET}"}})  # fmt: skip
    waiting_route(live, "text-1", task_id="task-text")
    live.post("/routes/text-1/actions/retry-now", {"generation": 1})
    live.post("/routes/text-1/failure", failure(1, evidence))
    context = logged_in(browser, live)
    table, route = context.new_page(), context.new_page()
    routes_page(table)
    route.goto("/console/routes/text-1")
    expect(table.locator('tr[data-route="text-1"] [data-label="Cause"]')).to_contain_text(
        "(provider_overloaded)"
    )
    expect(route.locator("#history li")).to_have_count(len(live.http.get(
        "/routes/text-1/history").json()))  # fmt: skip
    for page in (table, route):
        assert SECRET not in page.content()
        shown = page.locator("body").inner_text()
        assert "zebra-quartz" not in shown
        assert "<b>" not in shown
    context.close()
