"""The value parsers of the runtime's settings (actors/engine/config.py): each takes what a
TOML file (typed) or the environment (text) gives and returns the setting's value, or
raises ValueError saying what the value must be (the loader names the source and setting).
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final, Self
from urllib.parse import urlsplit

from pydantic import BeforeValidator

from actors.engine.settings import CIRCUIT_HOSTS_RANGE, DISPATCH_TIMEOUT_RANGE_S
from actors.errors import RecoveryError
from actors.keys import PREFIX_PATTERN, KeySpace
from catalogue.sanitize import masked_url

REDIS_SCHEMES: Final = ("redis://", "rediss://", "unix://")
_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED = rf"{_IDENTIFIER}(?:\.{_IDENTIFIER})*"
_DISPATCHER = re.compile(rf"{_DOTTED}:{_DOTTED}")
_QUEUE = re.compile(r"[A-Za-z0-9._:-]{1,128}")
MIN_WEBHOOK_SECRET_CHARS: Final = 16
_TRUE: Final = frozenset({"true", "yes", "on", "1"})
_FALSE: Final = frozenset({"false", "no", "off", "0"})
DEFAULT_API_ADDRESS: Final = "127.0.0.1:8484"
API_OFF: Final = "off"
LOOPBACK_NAMES: Final = frozenset({"localhost"})


def parse_positive_int(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    if (
        isinstance(value, str)
        and value.strip().isascii()
        and value.strip().isdigit()
        and int(value) >= 1
    ):
        return int(value)
    raise ValueError(f"must be an integer >= 1, got {value!r}")


def parse_count(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    text = value.strip() if isinstance(value, str) else ""
    if text.isascii() and text.isdigit():
        return int(text)
    raise ValueError(f"must be an integer >= 0, got {value!r}")


def parse_circuit_hosts(value: object) -> int:
    low, high = CIRCUIT_HOSTS_RANGE
    try:
        count = parse_count(value)
    except ValueError:
        count = -1
    if low <= count <= high:
        return count
    raise ValueError(f"must be an integer from {low} to {high}, got {value!r}")


def parse_positive_float(value: object) -> float:
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is not None and math.isfinite(number) and number > 0:
        return number
    raise ValueError(f"must be a number of seconds > 0, got {value!r}")


def parse_dispatch_timeout(value: object) -> float:
    low, high = DISPATCH_TIMEOUT_RANGE_S
    try:
        seconds = parse_positive_float(value)
    except ValueError:
        seconds = math.nan
    if low <= seconds <= high:
        return seconds
    raise ValueError(f"must be a number of seconds from {low:g} to {high:g}, got {value!r}")


def parse_boolean(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"must be a boolean (true/false, yes/no, on/off, 1/0), got {value!r}")


def parse_text(value: object) -> str:
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise ValueError(f"must be a non-empty string, got {value!r}")


def parse_redis_url(value: object) -> str:
    url = parse_text(value)
    if not url.startswith(REDIS_SCHEMES):
        shown = masked_url(url)  # never the password of a mistyped URL
        raise ValueError(f"must be a redis://, rediss:// or unix:// URL, got {shown!r}")
    return url


def parse_import_path(value: object) -> str:
    if isinstance(value, str) and _DISPATCHER.fullmatch(value.strip()):
        return value.strip()
    raise ValueError(f"must be an import path 'package.module:callable', got {value!r}")


def parse_dispatcher(value: object) -> str:
    """A dispatcher: `webhook` (the built-in one) or an import path."""
    if isinstance(value, str) and value.strip() == "webhook":
        return "webhook"
    try:
        return parse_import_path(value)
    except ValueError:
        raise ValueError(
            f"must be 'webhook' or an import path 'package.module:callable', got {value!r}"
        ) from None


def parse_webhook_url(value: object) -> str:
    """An http(s) URL with a host and no credentials in it (they belong in the secret)."""
    text = value.strip() if isinstance(value, str) else ""
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"must be an http:// or https:// URL with a host, got {value!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError("must not carry credentials (put them in webhook_secret)")
    try:
        parts.port  # noqa: B018 - reading it validates it
    except ValueError:
        raise ValueError(f"has a bad port, got {value!r}") from None
    return text


def parse_webhook_secret(value: object) -> str:
    """A shared secret of at least 16 characters (never shown)."""
    if isinstance(value, str) and len(value.strip()) >= MIN_WEBHOOK_SECRET_CHARS:
        return value.strip()
    raise ValueError(f"must be at least {MIN_WEBHOOK_SECRET_CHARS} characters")


def parse_webhook_timeout(value: object) -> float:
    """Seconds from 0.1 to 600."""
    seconds = parse_positive_float(value)
    if not 0.1 <= seconds <= 600:
        raise ValueError(f"must be between 0.1 and 600 seconds, got {value!r}")
    return seconds


def parse_queue(value: object) -> str:
    if isinstance(value, str) and _QUEUE.fullmatch(value.strip()):
        return value.strip()
    raise ValueError(f"must match [A-Za-z0-9._:-]{{1,128}}, got {value!r}")


def parse_key_prefix(value: object) -> str:
    if isinstance(value, str):
        try:
            return KeySpace(value.strip()).prefix
        except RecoveryError:
            pass
    raise ValueError(f"must match {PREFIX_PATTERN} and not end with ':', got {value!r}")


def parse_path(value: object) -> Path:
    if isinstance(value, Path):
        return value
    return Path(parse_text(value))


def parse_paths(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(part for part in value.split(os.pathsep) if part)
    if isinstance(value, list | tuple) and all(isinstance(p, str) and p for p in value):
        return tuple(value)
    raise ValueError(f"must be a list of folder paths, got {value!r}")


@dataclass(frozen=True, slots=True)
class ApiAddress:
    """Where the API listens: a host (a name, an IPv4 address, or an IPv6 one) and port."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Self:
        """`HOST:PORT` or `[IPV6]:PORT` (port 0: any free one); ValueError otherwise."""
        host, colon, port = text.strip().rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not colon or not host or not port.isascii() or not port.isdigit():
            raise ValueError(f"must be HOST:PORT (or {API_OFF!r}), got {text!r}")
        number = int(port)
        if number > 65535:
            raise ValueError(f"the port must be from 0 to 65535, got {text!r}")
        return cls(host, number)

    @property
    def loopback(self) -> bool:
        """Whether only this machine can reach it (127.0.0.0/8, ::1, localhost)."""
        if self.host.lower() in LOOPBACK_NAMES:
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False  # a name that may resolve anywhere

    def url(self, port: int | None = None) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port if port is None else port}"


def parse_api_address(value: object) -> str:
    """`HOST:PORT`, `[IPV6]:PORT` or `off`, as given (ApiAddress parses it)."""
    text = parse_text(value)
    if text.lower() == API_OFF:
        return API_OFF
    ApiAddress.parse(text)
    return text


def parse_optional(parse: Callable[[object], Any]) -> Callable[[object], Any]:
    return lambda value: None if value is None else parse(value)


PositiveInt = Annotated[int, BeforeValidator(parse_positive_int)]
PositiveSeconds = Annotated[float, BeforeValidator(parse_positive_float)]
