"""The profile editor in a real browser, at a desktop viewport and on a Pixel 5: one draft
and no "Add profile" while creating, two candidates with both class policies, the
schedule following the values, every limit tripped with the backend's message at its
field, save, reload, the same values; on the phone one column, no horizontal overflow,
44 px controls and one scroll owner."""

from __future__ import annotations

from typing import Any, Final

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from tests.actors.api.console.conftest import LiveConsole, logged_in, screenshot

pytestmark = pytest.mark.integration

LIMIT_MESSAGES: Final = {
    "transient.retry.max_retries": "must be between 1 and 10, got 11",
    "transient.retry.initial_interval_seconds": "must be between 1 and 3600, got 3601",
    "hard.wait_for_reset.max_wait_seconds": "must be between 1 and 604800, got 604801",
}


def row(page: Page, index: int) -> Locator:
    return page.locator("[data-candidate]").nth(index)


def control(candidate: Locator, path: str) -> Locator:
    return candidate.locator(f'[data-field="{path}"]')


def set_number(candidate: Locator, path: str, value: int) -> None:
    control(candidate, path).fill(str(value))


def fill_candidate(candidate: Locator, cid: str, agent: str) -> None:
    control(candidate, "id").fill(cid)
    control(candidate, "agent").fill(agent)
    details = candidate.locator("details.policy")
    if details.get_attribute("open") is None:
        details.locator("summary").click()


def create_two_candidates(page: Page, profile_id: str) -> None:
    page.goto("/console/profiles/new")
    expect(page.get_by_role("heading", name="New profile")).to_be_visible()
    expect(page.get_by_role("link", name="Add profile")).to_have_count(0)
    expect(page.locator("[data-candidate]")).to_have_count(1)  # one draft
    page.locator("#profile-id").fill(profile_id)
    fill_candidate(row(page, 0), "claude", "claude-acp")
    page.get_by_role("button", name="Add candidate").click()
    fill_candidate(row(page, 1), "codex", "codex-acp")
    for index in (0, 1):
        for heading in ("Transient errors", "Hard errors"):
            section = row(page, index).get_by_role("heading", name=heading)
            expect(section).to_be_visible()
        explain = row(page, index).locator(".class-policy .explain")
        expect(explain.first).to_contain_text("HTTP 529")  # concrete examples, visible
        expect(explain.nth(1)).to_contain_text("usage limit reached")


def test_the_desktop_editor_creates_validates_saves_and_reloads_a_profile(
    browser: Browser, live: LiveConsole
) -> None:
    context = logged_in(browser, live)
    page = context.new_page()
    create_two_candidates(page, "fleet-desktop")
    first, second = row(page, 0), row(page, 1)
    transient = first.locator('[data-schedule="transient"]')
    expect(transient).to_have_text("Transient errors: no retry and no wait: skip to codex")
    control(first, "transient.retry.enabled").check()
    set_number(first, "transient.retry.max_retries", 3)
    set_number(first, "transient.retry.initial_interval_seconds", 5)
    expect(transient).to_have_text(
        "Transient errors: retry 3× after 5 s, 10 s, 20 s; then skip to codex"
    )
    set_number(first, "transient.retry.max_retries", 4)
    expect(transient).to_contain_text("retry 4× after 5 s, 10 s, 20 s, 40 s")
    control(first, "hard.wait_for_reset.enabled").check()
    set_number(first, "hard.wait_for_reset.max_wait_seconds", 7200)
    first.locator('[data-field="hard.on_exhausted"][value="stop"]').check()
    expect(first.locator('[data-schedule="hard"]')).to_have_text(
        "Hard errors: if a trusted reset ≤ 2 h away is reported, wait for it once; "
        "then stop for manual recovery"
    )
    control(second, "transient.retry.enabled").check()
    set_number(second, "transient.retry.max_retries", 2)
    set_number(second, "transient.retry.initial_interval_seconds", 30)
    expect(second.locator('[data-schedule="transient"]')).to_contain_text(
        "retry 2× after 30 s, 1 min; then skip; no candidate is left"
    )
    expect(first.locator(".note").first).to_contain_text("trusted future reset time")

    # Each limit tripped: Save asks the backend, whose message stands at its field.
    set_number(first, "transient.retry.max_retries", 11)
    set_number(first, "transient.retry.initial_interval_seconds", 3601)
    set_number(first, "hard.wait_for_reset.max_wait_seconds", 604801)
    for path, message in LIMIT_MESSAGES.items():  # inline first, in the backend's words
        shown = first.locator(f'[data-error-for="{path}"]')
        expect(shown).to_have_text(message)
        expect(shown).to_have_attribute("data-source", "browser")
    expect(transient).to_have_text("Transient errors: fix the values above to see the schedule")
    page.get_by_role("button", name="Save profile").click()
    expect(page.locator("#status")).to_contain_text("Not saved")
    for path, message in LIMIT_MESSAGES.items():
        shown = first.locator(f'[data-error-for="{path}"]')
        expect(shown).to_have_text(message)
        expect(shown).to_have_attribute("data-source", "server")
        expect(control(first, path)).to_have_attribute("aria-invalid", "true")
    assert live.http.get("/profiles/fleet-desktop").status_code == 404  # nothing stored
    first.locator(".class-policy").first.scroll_into_view_if_needed()
    screenshot(page, "editor-desktop-errors.png")

    set_number(first, "transient.retry.max_retries", 3)
    set_number(first, "transient.retry.initial_interval_seconds", 5)
    set_number(first, "hard.wait_for_reset.max_wait_seconds", 7200)
    page.get_by_role("button", name="Save profile").click()
    expect(page.locator("#status")).to_have_text("Saved: version 1, as stored.")
    expect(page.locator("#saved-json")).to_contain_text('"initial_interval_seconds": 5')
    page.wait_for_url("**/console/profiles/fleet-desktop")
    assert_form(page)  # the form shows the document as stored
    screenshot(page, "editor-desktop-full.png", full_page=True)
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "editor-desktop.png")

    stored = live.http.get("/profiles/fleet-desktop").json()["document"]
    assert_stored(stored)
    page.reload()
    expect(page.locator("[data-candidate]")).to_have_count(2)
    assert_form(page)
    context.close()


def assert_stored(document: dict[str, Any]) -> None:
    claude, codex = document["candidates"]
    assert (claude["id"], codex["id"]) == ("claude", "codex")
    assert claude["transient"]["retry"] == {
        "enabled": True, "max_retries": 3, "initial_interval_seconds": 5}  # fmt: skip
    assert claude["hard"]["wait_for_reset"] == {"enabled": True, "max_wait_seconds": 7200}
    assert claude["hard"]["on_exhausted"] == "stop"
    assert codex["transient"]["retry"]["initial_interval_seconds"] == 30
    assert codex["hard"]["retry"] == {
        "enabled": False, "max_retries": 0, "initial_interval_seconds": 0}  # fmt: skip


def assert_form(page: Page) -> None:
    first, second = row(page, 0), row(page, 1)
    expect(control(first, "id")).to_have_value("claude")
    expect(control(second, "agent")).to_have_value("codex-acp")
    expect(control(first, "transient.retry.enabled")).to_be_checked()
    expect(control(first, "transient.retry.max_retries")).to_have_value("3")
    expect(control(first, "transient.retry.initial_interval_seconds")).to_have_value("5")
    expect(control(first, "hard.wait_for_reset.max_wait_seconds")).to_have_value("7200")
    expect(first.locator('[data-field="hard.on_exhausted"][value="stop"]')).to_be_checked()
    expect(control(second, "transient.retry.initial_interval_seconds")).to_have_value("30")
    expect(control(second, "hard.retry.enabled")).not_to_be_checked()


PHONE_LAYOUT: Final = """() => {
  const controls = Array.from(document.querySelectorAll(
    "input, select, button, textarea, summary, .top a, .card > a"))
    .filter((element) => element.type !== "hidden" && element.getClientRects().length > 0);
  const short = controls
    .filter((element) => element.getBoundingClientRect().height < 44)
    .map((element) => element.outerHTML.slice(0, 80));
  const owners = Array.from(document.querySelectorAll("body *")).filter((element) => {
    const style = getComputedStyle(element);
    const scrolls = /(auto|scroll)/.test(style.overflowY + style.overflowX);
    return scrolls && (element.scrollHeight > element.clientHeight
                       || element.scrollWidth > element.clientWidth);
  }).map((element) => element.tagName);
  // One column: inside every grid the editor lays out, the children stack (one left edge).
  const columns = Array.from(document.querySelectorAll(".candidate-fields, .pair, .classes"))
    .map((grid) => new Set(Array.from(grid.children)
      .filter((element) => element.getClientRects().length > 0)
      .map((element) => Math.round(element.getBoundingClientRect().left))).size);
  return {
    scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
    scrolls: document.scrollingElement.scrollHeight > window.innerHeight,
    short, owners, columns: Math.max(...columns), grids: columns.length,
    controls: controls.length,
  };
}"""


def test_the_phone_editor_is_one_column_without_overflow_with_44px_controls(
    browser: Browser, live: LiveConsole, pixel_5: dict[str, Any]
) -> None:
    context = logged_in(browser, live, **pixel_5)
    page = context.new_page()
    create_two_candidates(page, "fleet-phone")
    first = row(page, 0)
    control(first, "transient.retry.enabled").tap()
    set_number(first, "transient.retry.max_retries", 2)
    set_number(first, "transient.retry.initial_interval_seconds", 10)
    expect(first.locator('[data-schedule="transient"]')).to_have_text(
        "Transient errors: retry 2× after 10 s, 20 s; then skip to codex"
    )
    outcome = '[data-field="transient.on_exhausted"][value="{}"]'
    first.locator(outcome.format("stop")).tap()  # the outcome's picker, by touch
    expect(first.locator('[data-schedule="transient"]')).to_have_text(
        "Transient errors: retry 2× after 10 s, 20 s; then stop for manual recovery"
    )
    first.locator(outcome.format("skip")).tap()
    expect(first.locator('[data-schedule="transient"]')).to_contain_text("then skip to codex")
    set_number(first, "transient.retry.max_retries", 0)
    page.get_by_role("button", name="Save profile").tap()
    expect(first.locator('[data-error-for="transient.retry.max_retries"]')).to_have_text(
        "must be between 1 and 10, got 0"
    )
    set_number(first, "transient.retry.max_retries", 2)
    page.get_by_role("button", name="Save profile").tap()
    expect(page.locator("#status")).to_have_text("Saved: version 1, as stored.")
    page.reload()
    for index in (0, 1):  # both policy areas open: the longest page this editor makes
        details = row(page, index).locator("details.policy")
        if details.get_attribute("open") is None:
            details.locator("summary").tap()
    expect(control(row(page, 0), "transient.retry.max_retries")).to_have_value("2")
    layout = page.evaluate(PHONE_LAYOUT)
    assert layout["scrollWidth"] <= layout["innerWidth"], layout
    assert layout["short"] == [], layout
    assert layout["owners"] == [], layout  # the document is the one scroll owner
    assert layout["scrolls"], layout
    assert (layout["columns"], layout["grids"] > 6) == (1, True), layout
    assert layout["controls"] > 40
    screenshot(page, "editor-phone-full.png", full_page=True)
    row(page, 0).locator(".class-policy").first.evaluate("element => element.scrollIntoView()")
    screenshot(page, "editor-phone.png")
    context.close()
