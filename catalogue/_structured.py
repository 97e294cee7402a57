"""Readers for the machine-readable reset signals agents and providers put beside an error.

Each returns the reset as an aware UTC instant or a delay in seconds, or None; none raises,
whatever the text. They see lowercased text (`catalogue.timing` lowercases once) and
lowercased header names.

- Anthropic's subscription windows, as response headers: `anthropic-ratelimit-unified-status`
  (allowed | allowed_warning | rejected), per window `anthropic-ratelimit-unified-<w>-status`
  and `-<w>-reset` (w = 5h, 7d, 7d_oi, ...; the reset in epoch seconds or RFC 3339), the
  overall `anthropic-ratelimit-unified-reset`, and the overage state
  (`anthropic-ratelimit-unified-overage-disabled-reason: out_of_credits` means no window
  reopening lifts the refusal: a hard quota with no reset).
- Claude Code's stream-json `{"type":"rate_limit_event","rate_limit_info":{"status":
  "rejected","resetsAt":<epoch s>,"rateLimitType":"five_hour", "unifiedWindows":{...}}}`:
  only a rejected event (or rejected window) says when work may resume; an allowed one is
  informational and never a hint.
- Codex's usage windows as response headers (`x-codex-primary-used-percent: 100`,
  `x-codex-primary-reset-at: <epoch s>`, `x-codex-primary-reset-after-seconds`, the same for
  `secondary`): a window at 100 % is exhausted until its reset.
- Codex's structured usage limit `{"error":{"type":"usage_limit_reached",...,"resets_at":
  <epoch s>,"resets_in_seconds":<s>}}`.

When several windows are exhausted at once the latest reset wins: the caller can only
proceed once every exhausted window has reopened.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

from catalogue._durations import epoch_instant, read_number, read_rfc3339

UNIFIED = "anthropic-ratelimit-unified-"
OUT_OF_CREDITS = "out_of_credits"
_UNIFIED_WINDOW_STATUS = re.compile(r"anthropic-ratelimit-unified-(?P<window>[a-z0-9_]+)-status")
_RESETS_AT = re.compile(r'\\*"resets_at\\*"\s*:\s*\\*"?(\d{9,16})(?![\d.])')
_RESETS_IN = re.compile(r'\\*"resets_in_seconds\\*"\s*:\s*(\d{1,12})(?![\d.])')
# A JSON line carrying a rate_limit_event; bounded so a huge line is never parsed.
_MAX_EVENT_CHARS = 16 * 1024


def unified_out_of_credits(lowered: Mapping[str, object]) -> bool:
    """Whether Anthropic's unified headers say overage is off for want of credits and no
    window of the subscription is itself exhausted: then nothing resets the refusal."""
    reason = lowered.get(f"{UNIFIED}overage-disabled-reason")
    if not isinstance(reason, str) or reason.strip().lower() != OUT_OF_CREDITS:
        return False
    return not any(True for _ in _rejected_windows(lowered))


def unified_reset(lowered: Mapping[str, object]) -> datetime | None:
    """The latest reset among the exhausted (rejected) unified windows; the overall reset
    when the overall status is rejected and no single window says so. None otherwise."""
    if unified_out_of_credits(lowered):
        return None
    resets = [at for window in _rejected_windows(lowered) if (at := _unified_at(lowered, window))]
    if resets:
        return max(resets)
    status = lowered.get(f"{UNIFIED}status")
    if isinstance(status, str) and status.strip().lower() == "rejected":
        return _unified_at(lowered, None)
    return None


def _rejected_windows(lowered: Mapping[str, object]) -> Iterator[str]:
    for name, value in lowered.items():
        if not name.startswith(UNIFIED) or not isinstance(value, str):
            continue
        match = _UNIFIED_WINDOW_STATUS.fullmatch(name)
        if match is not None and match["window"] != "overage" and value.strip() == "rejected":
            yield match["window"]


def _unified_at(lowered: Mapping[str, object], window: str | None) -> datetime | None:
    name = f"{UNIFIED}{window}-reset" if window else f"{UNIFIED}reset"
    value = lowered.get(name)
    if not isinstance(value, str):
        return None
    value = value.strip().lower()
    number = read_number(value)
    if number is not None:
        return epoch_instant(number)
    return read_rfc3339(value, whole=True)


def rate_limit_event_reset(t: str) -> datetime | None:
    """The reset a rejected Claude Code `rate_limit_event` names (the latest among its
    rejected windows), or None."""
    resets: list[datetime] = []
    for line in t.splitlines():
        if "rate_limit_event" not in line:
            continue
        event = _json_object(line)
        info = event.get("rate_limit_info") if event else None
        if isinstance(info, dict):
            resets.extend(_event_resets(info))
    return max(resets) if resets else None


def _event_resets(info: Mapping[str, Any]) -> Iterator[datetime]:
    if info.get("status") == "rejected" and (at := _epoch_field(info, "resetsat")) is not None:
        yield at
    windows = info.get("unifiedwindows")
    if not isinstance(windows, dict):
        return
    for window in windows.values():
        if not isinstance(window, dict):
            continue
        utilization = window.get("utilization")
        full = isinstance(utilization, int | float) and utilization >= 1
        if (window.get("status") == "rejected" or full) and (
            at := _epoch_field(window, "resetsat")
        ) is not None:
            yield at


def _epoch_field(data: Mapping[str, Any], name: str) -> datetime | None:
    value = data.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    number = read_number(value) if isinstance(value, str) else float(value)
    return None if number is None or number < 0 else epoch_instant(number)


def _json_object(line: str) -> dict[str, Any] | None:
    start, end = line.find("{"), line.rfind("}")
    if start < 0 or end <= start or end - start > _MAX_EVENT_CHARS:
        return None
    try:
        value = json.loads(line[start : end + 1])
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def codex_reset(t: str) -> tuple[datetime | None, float | None]:
    """Codex's structured `resets_at` (an instant) and `resets_in_seconds` (a delay), each
    None when absent; the caller prefers the instant."""
    at = None
    for match in _RESETS_AT.finditer(t):
        if (at := epoch_instant(int(match.group(1)))) is not None:
            break
    delay = None
    if (found := _RESETS_IN.search(t)) is not None:
        delay = float(found.group(1))
    return at, delay


_CODEX_WINDOWS = ("primary", "secondary")


def codex_window_reset(lowered: Mapping[str, object], now: datetime) -> datetime | None:
    """The latest reset among Codex's exhausted (100 % used) header windows, or None."""
    resets = []
    for window in _CODEX_WINDOWS:
        used = _header_number(lowered, f"x-codex-{window}-used-percent")
        if used is None or used < 100:
            continue
        at = _header_number(lowered, f"x-codex-{window}-reset-at")
        if at is not None and (instant := epoch_instant(at)) is not None:
            resets.append(instant)
            continue
        after = _header_number(lowered, f"x-codex-{window}-reset-after-seconds")
        if after is not None and after <= 10**8:
            resets.append(now + timedelta(seconds=after))
    return max(resets) if resets else None


def _header_number(lowered: Mapping[str, object], name: str) -> float | None:
    value = lowered.get(name)
    return read_number(value) if isinstance(value, str) else None
