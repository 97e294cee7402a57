"""Bearer tokens: who may call the HTTP API, and as which principal.

Tokens come from `RECOVERY_API_TOKEN` (principal `api`) and from a token file
(`RECOVERY_API_TOKEN_FILE`): one `<principal> <token>` per line, `#` comments and blank
lines ignored. The principal is what the runtime's authoriser is handed (a cancel of a
session's transient retry is authorised for it: actors/engine/authorisers.py).

With at least one token, every request but `GET /openapi.json`, `GET /docs` and the web
console's login form and static assets must carry `Authorization: Bearer <token>` (or,
from a browser, the console's cookie: `cookie_token`); without it or with a wrong one the
answer is 401 and nothing is read (the check runs before routing, in an ASGI middleware,
so no endpoint and no body parser runs). A presented token is compared in constant time
with every known token's SHA-256 digest, all of them every time, so how long a refusal
takes says nothing of which token came close. No token is ever logged, stored, echoed or
put in an error.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from actors.errors import RecoveryError

ENV_PRINCIPAL: Final = "api"
MIN_TOKEN_CHARS: Final = 16
PRINCIPAL_PATTERN: Final = r"[A-Za-z0-9._:@-]{1,128}"
_PRINCIPAL: Final = re.compile(PRINCIPAL_PATTERN)
_TOKEN: Final = re.compile(r"[\x21-\x7e]+")  # printable ASCII, no space: a header's token68
OPEN_PATHS: Final = frozenset({"/openapi.json", "/docs", "/console/login", "/console/logout"})
OPEN_PREFIXES: Final = ("/console/static/",)  # stylesheets and scripts: nothing of the runtime
CONSOLE_COOKIE: Final = "recovery_console"
"""The web console's login cookie: the token itself, HttpOnly and SameSite=Strict, so no
script reads it and no other site's request carries it."""
CSRF_HEADER: Final = b"x-requested-with"
"""What a state-changing request authenticated by the cookie must carry: a custom header
that a cross-site form cannot send (and a cross-site script cannot without a CORS
preflight, which this app never allows)."""


def is_open(path: str) -> bool:
    """Whether `path` is served without a token (the schema, the console's login and its
    static assets)."""
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)


class TokenError(RecoveryError):
    """A token setting that cannot be used: `source` names where it came from. The
    token itself is never part of the message."""

    def __init__(self, source: str, reason: str) -> None:
        self.source = source
        self.reason = reason
        super().__init__(f"{source}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.source, self.reason))


@dataclass(frozen=True, slots=True)
class Tokens:
    """The API's tokens, kept as digests, each with its principal."""

    _digests: tuple[tuple[bytes, str], ...] = field(default=(), repr=False)

    @property
    def required(self) -> bool:
        """Whether requests must carry a token (at least one is configured)."""
        return bool(self._digests)

    @property
    def principals(self) -> tuple[str, ...]:
        return tuple(principal for _, principal in self._digests)

    def principal_of(self, presented: str) -> str | None:
        """The principal of `presented`, or None when it is no token of ours. Every
        known digest is compared, whatever matched first."""
        digest = _digest(presented)
        found: str | None = None
        for known, principal in self._digests:
            if hmac.compare_digest(known, digest) and found is None:
                found = principal
        return found

    @classmethod
    def of(cls, pairs: Mapping[str, str]) -> Tokens:
        """Tokens from `{token: principal}` (tests, and the loaders below)."""
        return cls(tuple((_digest(token), principal) for token, principal in pairs.items()))


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


def load_tokens(env_token: str | None, token_file: Path | None) -> Tokens:
    """The tokens of the settings: `env_token` (RECOVERY_API_TOKEN, principal `api`) and
    the lines of `token_file`. TokenError naming the source and line for a token shorter
    than MIN_TOKEN_CHARS, a malformed line, a bad principal or a token given twice."""
    pairs: dict[str, str] = {}
    if env_token is not None:
        _add(pairs, env_token.strip(), ENV_PRINCIPAL, "RECOVERY_API_TOKEN")
    if token_file is not None:
        for number, line in enumerate(_lines(token_file), start=1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            source = f"{token_file}: line {number}"
            parts = text.split()
            if len(parts) != 2:
                raise TokenError(source, "must be '<principal> <token>'")
            principal, token = parts
            if not _PRINCIPAL.fullmatch(principal):
                raise TokenError(source, f"principal {principal!r} must match {PRINCIPAL_PATTERN}")
            _add(pairs, token, principal, source)
    return Tokens.of(pairs)


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise TokenError(str(path), f"cannot read the token file: {reason}") from None


def _add(pairs: dict[str, str], token: str, principal: str, source: str) -> None:
    if len(token) < MIN_TOKEN_CHARS or not _TOKEN.fullmatch(token):
        raise TokenError(
            source, f"a token must be at least {MIN_TOKEN_CHARS} printable ASCII characters"
        )
    if token in pairs:
        raise TokenError(source, "this token is given twice")
    pairs[token] = principal


def cookie_token(header: bytes | None) -> str | None:
    """The console cookie's token in a `Cookie` header value, else None."""
    if header is None:
        return None
    for part in header.decode("latin-1").split(";"):
        name, _, value = part.strip().partition("=")
        if name == CONSOLE_COOKIE and value:
            return value
    return None


def bearer(header: bytes | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header value, else None."""
    if header is None:
        return None
    scheme, _, token = header.decode("latin-1").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()
