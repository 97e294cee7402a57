"""The console's login form: a browser trades the API's token for the console's cookie
(actors/api/auth.py, CONSOLE_COOKIE), HttpOnly and SameSite=Strict, so its scripts never
hold the token and no other site's request carries it. The form is the only page served
without a token; the token never appears in a page, a redirect or a log.
"""

from __future__ import annotations

from typing import Annotated, Final
from urllib.parse import parse_qs

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from actors.api.auth import CONSOLE_COOKIE, Tokens
from actors.api.console.templating import render

HOME: Final = "/console/"
MAX_FORM: Final = 4096


def login_router(tokens: Tokens) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/console/login", response_class=HTMLResponse)
    def login_form(
        request: Request, wanted: Annotated[str, Query(alias="next")] = HOME
    ) -> Response:
        return render(request, "login.html", title="Log in", nav="", next=_local(wanted),
                      required=tokens.required, error=None)  # fmt: skip

    @router.post("/console/login", response_class=HTMLResponse)
    async def login(request: Request) -> Response:
        fields = parse_qs((await request.body())[:MAX_FORM].decode("utf-8", "replace"))
        token = (fields.get("token") or [""])[0].strip()
        wanted = _local((fields.get("next") or [HOME])[0])
        if tokens.required and tokens.principal_of(token) is None:
            return render(request, "login.html", 401, title="Log in", nav="", next=wanted,
                          required=True, error="That token is not one of this API's.")  # fmt: skip
        answer = RedirectResponse(wanted, status_code=303)
        if tokens.required:
            answer.set_cookie(CONSOLE_COOKIE, token, httponly=True, samesite="strict", path="/")
        return answer

    @router.post("/console/logout")
    def logout() -> Response:
        answer = RedirectResponse("/console/login", status_code=303)
        answer.delete_cookie(CONSOLE_COOKIE, path="/", httponly=True, samesite="strict")
        return answer

    return router


def _local(target: str) -> str:
    """Only a path of this console: a login never sends a browser elsewhere."""
    if target.startswith("/console") and not target.startswith("//") and "\\" not in target:
        return target
    return HOME


__all__ = ["login_router"]
