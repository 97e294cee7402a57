"""The web console, served by the API's app under `/console/` (`/` redirects there): the
policy editor (desktop and phone), live routes with their actions, circuits and retry
notices. Pages are rendered here and enhanced by plain scripts that call the JSON API
(actors/api/console/static); templates and static assets ship as package data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from actors.api.console.login import login_router
from actors.api.console.pages import console_router

STATIC: Final = Path(__file__).with_name("static")


def mount_static(app: FastAPI) -> None:
    """Serve the console's stylesheet and scripts under `/console/static/`."""
    app.mount("/console/static", StaticFiles(directory=STATIC), name="console-static")


__all__ = ["STATIC", "console_router", "login_router", "mount_static"]
