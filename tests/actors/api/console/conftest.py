"""The console's browser rig: one Debian chromium driven by Playwright for this package's
tests (package-scoped, not session-scoped: Playwright's sync API keeps an event loop
running in the main thread while it is open, and later tests call `asyncio.run`), and a
real app on a loopback port (the API's own server, ApiServer) on the session's Redis,
with a bearer token, so the browser meets what `recovery up` serves.

Playwright cannot download browsers here; it drives the system's `chromium`. Without one
the browser tests skip, except in CI (`CI` set), where a missing chromium fails them."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    Page,
    Playwright,
    expect,
    sync_playwright,
)

from actors.api import Tokens, create_app
from actors.api.server import ApiServer, bind
from actors.engine.config_values import ApiAddress
from actors.keys import KeySpace
from tests.actors.api.api_rigs import redis_backend
from tests.actors.conftest import _delete_prefix, unique_keys

TOKEN: Final = "console-token-0123456789abcdef"
ARTEFACTS: Final = Path(__file__).resolve().parents[3] / "artefacts"
CHROMIUM_ARGS: Final = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
DESKTOP: Final[dict[str, Any]] = {"viewport": {"width": 1280, "height": 900}}
WAIT_MS: Final = 15_000  # a guard against a hang; every wait is on a condition
expect.set_options(timeout=WAIT_MS)


def chromium_path() -> str:
    """Debian's chromium; skipped without one outside CI, a failure inside it."""
    found = shutil.which("chromium")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI needs Debian's chromium for the console's browser tests")
        pytest.skip("needs Debian's chromium (apt-get install chromium)")
    return found


@pytest.fixture(scope="package")
def playwright_driver() -> Iterator[Playwright]:
    path = chromium_path()
    assert path
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="package")
def browser(playwright_driver: Playwright) -> Iterator[Browser]:
    launched = playwright_driver.chromium.launch(
        executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS
    )
    yield launched
    launched.close()


@pytest.fixture(scope="package")
def pixel_5(playwright_driver: Playwright) -> dict[str, Any]:
    """Playwright's Pixel 5: its viewport, scale, touch and mobile user agent."""
    return dict(playwright_driver.devices["Pixel 5"])


@dataclass
class LiveConsole:
    """The app on its loopback port, and an HTTP client with its token (the test's own
    orchestrator)."""

    url: str
    keys: KeySpace
    redis_url: str
    http: httpx.Client

    def post(self, path: str, body: Any) -> Any:
        answer = self.http.post(path, json=body)
        assert answer.status_code < 300, answer.text
        return answer.json()


@pytest.fixture(scope="module")
def live(redis_url: str) -> Iterator[LiveConsole]:
    keys = unique_keys()
    app = create_app(
        redis_backend(redis_url, keys, notices=True), tokens=Tokens.of({TOKEN: "alice"})
    )
    address = ApiAddress("127.0.0.1", 0)
    # `app.state.streams` exists once the app has started: looked up when the server stops.
    streams_stop = lambda: app.state.streams.stop()  # noqa: E731, PLW0108 - see above
    server = ApiServer(app, bind(address), address, stopping=streams_stop)
    server.start()
    http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"},
                        timeout=WAIT_MS / 1000)  # fmt: skip
    try:
        yield LiveConsole(server.url, keys, redis_url, http)
    finally:
        http.close()
        server.stop()
        _delete_prefix(redis_url, keys)


def logged_in(browser: Browser, live: LiveConsole, **device: Any) -> BrowserContext:
    """A browser context logged in through the console's form (the cookie it sets)."""
    context = browser.new_context(base_url=live.url, **(device or DESKTOP))
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    page.goto("/console/profiles")
    assert "/console/login" in page.url  # no cookie yet: the form, not the page
    page.get_by_label("API token").fill(TOKEN)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/console/profiles")
    page.close()
    return context


def screenshot(page: Page, name: str, *, full_page: bool = False) -> Path:
    """A picture of the page as the test left it (the viewport, or the whole page), in
    tests/artefacts/."""
    ARTEFACTS.mkdir(exist_ok=True)
    path = ARTEFACTS / name
    page.screenshot(path=str(path), full_page=full_page)
    return path
