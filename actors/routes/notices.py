"""What the transcript shows of a route's retry loop: the retry notice and the manual-recovery
message, built from the route's failure facts. Pure.

The one retry notice of a session (kind `status`) carries `retrying: true` in its metadata
and, in its visible text, the failure's safe reason, the provider, the retry ordinal and its
maximum, the absolute UTC deadline and the Cancel action; the metadata repeats them for a
renderer. The reason is the catalogue's summary of the failure's code, never text the
provider sent (which may quote a prompt or a secret); the provider's name is sanitised.
The notice is a projection of the route's durable retry, not retry state of its own.

The manual-recovery message (kind `recovery`) is what a cancel during an active loop leaves:
Resume and Start fresh. It has no `retrying` key, so no notice cleanup ever removes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from pydantic import JsonValue

from actors.errors import InvalidCommandError
from catalogue.codes import CODES
from catalogue.sanitize import sanitize

__all__ = [
    "CANCEL",
    "RECOVERY_KIND",
    "RESUME",
    "RETRY_NOTICE_KIND",
    "START_FRESH",
    "NoticeContent",
    "RecoveryFacts",
    "RetryFacts",
    "recovery_message",
    "retry_notice",
    "safe_reason",
    "utc_text",
]

RETRY_NOTICE_KIND: Final = "status"
RECOVERY_KIND: Final = "recovery"
CANCEL: Final = "cancel"
RESUME: Final = "resume"
START_FRESH: Final = "start_fresh"

UNKNOWN_REASON: Final = "the provider failed"
UNKNOWN_PROVIDER: Final = "the provider"
MAX_PROVIDER_CHARS: Final = 64
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class RetryFacts:
    """A route's scheduled retry, as its failure transition committed it. `code` is the
    catalogue code (None or an unknown one shows a generic reason); `retry_ordinal` of
    `retry_max` is the policy's count ("retry 2 of 5"; 0 of 0 for the one attempt after a
    trusted reset); (`generation`, `attempt_ordinal`) names the pending attempt."""

    code: str | None
    provider: str | None
    retry_ordinal: int
    retry_max: int
    deadline: datetime
    generation: int
    attempt_ordinal: int


@dataclass(frozen=True, slots=True)
class RecoveryFacts:
    """A retry loop a cancel ended: its failure and the attempt that was pending."""

    code: str | None
    provider: str | None
    generation: int
    attempt_ordinal: int


@dataclass(frozen=True, slots=True)
class NoticeContent:
    """A transcript message to write: its kind, visible text and metadata."""

    kind: str
    content: str
    metadata: dict[str, JsonValue]


def safe_reason(code: str | None) -> str:
    """The catalogue's summary of `code`; a generic reason for None or an unknown code."""
    info = CODES.get(code) if code is not None else None
    return info.summary if info is not None else UNKNOWN_REASON


def utc_text(moment: datetime) -> str:
    """`2026-03-01 12:00:05 UTC`: an absolute time a reader in any zone can place."""
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def retry_notice(facts: RetryFacts) -> NoticeContent:
    """The session's retry notice for `facts` (kind `status`, `retrying: true`)."""
    deadline = _aware("deadline", facts.deadline)
    retry_ordinal = _count("retry_ordinal", facts.retry_ordinal)
    retry_max = _count("retry_max", facts.retry_max)
    if retry_ordinal > retry_max:
        raise InvalidCommandError("retry_ordinal", retry_ordinal, f"at most retry_max {retry_max}")
    generation = _count("generation", facts.generation, least=1)
    attempt = _count("attempt_ordinal", facts.attempt_ordinal)
    provider = _provider(facts.provider)
    which = (
        f"retry {retry_ordinal} of {retry_max}"
        if retry_ordinal >= 1
        else "retry after the provider's reset"
    )
    content = (
        f"Provider error on {provider}: {safe_reason(facts.code)}"
        f"{_code_suffix(facts.code)}. Automatic {which} at {utc_text(deadline)}. "
        "Select Cancel to stop retrying."
    )
    metadata: dict[str, JsonValue] = {
        "retrying": True,
        "code": _known(facts.code),
        "provider": provider,
        "retry_ordinal": retry_ordinal,
        "retry_max": retry_max,
        "deadline": _iso(deadline),
        "generation": generation,
        "attempt_ordinal": attempt,
        "actions": [CANCEL],
    }
    return NoticeContent(RETRY_NOTICE_KIND, content, metadata)


def recovery_message(facts: RecoveryFacts) -> NoticeContent:
    """The manual-recovery message a cancel of an active loop leaves (kind `recovery`,
    actions Resume and Start fresh, no `retrying` key)."""
    generation = _count("generation", facts.generation, least=1)
    attempt = _count("attempt_ordinal", facts.attempt_ordinal)
    provider = _provider(facts.provider)
    content = (
        f"Automatic retries on {provider} were cancelled ({safe_reason(facts.code)}"
        f"{_code_suffix(facts.code, brackets=False)}). Select Resume to continue on the same "
        "candidate, or Start fresh to begin again with the first eligible candidate."
    )
    metadata: dict[str, JsonValue] = {
        "recovery": True,
        "code": _known(facts.code),
        "provider": provider,
        "generation": generation,
        "attempt_ordinal": attempt,
        "actions": [RESUME, START_FRESH],
    }
    return NoticeContent(RECOVERY_KIND, content, metadata)


def _known(code: str | None) -> str | None:
    return code if code is not None and code in CODES else None


def _code_suffix(code: str | None, *, brackets: bool = True) -> str:
    known = _known(code)
    if known is None:
        return ""
    return f" ({known})" if brackets else f", {known}"


def _provider(provider: str | None) -> str:
    """The provider's name, sanitised (a free string of the evidence), on one line."""
    if not isinstance(provider, str):
        return UNKNOWN_PROVIDER
    shown = _SPACES.sub(" ", sanitize(provider)).strip()
    if len(shown) > MAX_PROVIDER_CHARS:
        shown = shown[: MAX_PROVIDER_CHARS - 1] + "…"
    return shown or UNKNOWN_PROVIDER


def _aware(field: str, moment: datetime) -> datetime:
    if not isinstance(moment, datetime) or moment.tzinfo is None:
        raise InvalidCommandError(field, moment, "an aware datetime")
    return moment.astimezone(UTC)


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _count(field: str, value: int, *, least: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InvalidCommandError(field, value, f"an integer >= {least}")
    return value
