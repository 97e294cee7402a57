"""The console's templates: one Jinja environment, autoescaping every value, and what
every page is given (the policy's limits, the catalogue's safe summaries, who is logged in).

The limits come from the policy package, so the editor's inline checks and the backend's
validation can never disagree on a number; the summaries are the catalogue's own words
for each code, the only "cause" the console shows (never a provider's text).
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any, Final

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, select_autoescape

from actors.routes.notices import safe_reason
from catalogue.codes import CODES
from policy.document import (
    MAX_CANDIDATE_ID_CHARS,
    MAX_CANDIDATES,
    MAX_INITIAL_INTERVAL_SECONDS,
    MAX_RETRIES,
    MAX_WAIT_SECONDS,
)
from policy.schedule import MAX_RETRY_DELAY_SECONDS

LIMITS: Final = {
    "max_retries": [1, MAX_RETRIES],
    "initial_interval_seconds": [1, MAX_INITIAL_INTERVAL_SECONDS],
    "max_wait_seconds": [1, MAX_WAIT_SECONDS],
    "delay_cap_seconds": MAX_RETRY_DELAY_SECONDS,
    "candidate_id_chars": MAX_CANDIDATE_ID_CHARS,
    "candidates": MAX_CANDIDATES,
}
"""The backend's limits as the editor reads them (policy/document.py, policy/schedule.py)."""


@cache
def environment() -> Environment:
    """The templates shipped in the package (actors/api/console/templates)."""
    env = Environment(
        loader=PackageLoader("actors.api.console", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["iso"] = iso
    env.filters["cause"] = cause
    env.globals["limits"] = LIMITS
    return env


def iso(moment: datetime | None) -> str:
    """An aware time as ISO-8601 UTC (the browser shows it in its own zone)."""
    return "" if moment is None else moment.isoformat().replace("+00:00", "Z")


def cause(code: str | None) -> str:
    """The safe cause of a code: the catalogue's summary, never provider text."""
    return "" if code is None else safe_reason(code)


def summaries() -> dict[str, str]:
    """Every code's safe summary, for the scripts that draw live rows."""
    return {code: info.summary for code, info in CODES.items()}


def render(
    request: Request, template_name: str, status: int = 200, /, **context: Any
) -> HTMLResponse:
    """The page `template_name` with `context`; the request's login state for the header."""
    template = environment().get_template(template_name)
    logged_in = getattr(request.state, "principal", None) is not None
    html = template.render(request=request, logged_in=logged_in, **context)
    return HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})
