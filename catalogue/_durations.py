"""Readers for the numbers, durations, instants and zones that timing hints are made of.

Providers state delays as English phrases ("2 days 17 hours 14 minutes") or Go durations
("8m45.312s", "644ms"); both are runs of <number><unit> parts, read here by one bounded
loop rather than one repeated regex, so no pattern can backtrack over an unbounded
repetition. Every reader returns None instead of raising: hints come from untrusted text.
All readers expect lowercased input.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from functools import cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

# A bare number of seconds this large is an instant, not a delay: no provider asks for a
# wait of ten years, and every real epoch (seconds) since 1980 is above it.
EPOCH_SECONDS_FLOOR = 10 * 365 * 86400
# Above this, a bare number is an epoch in milliseconds (1e12 ms is 2001; 1e12 s is 33658).
EPOCH_MS_FLOOR = 10**12

# Unit word -> (multiplier, divisor) in seconds. Sub-second units divide, so "644ms" gives
# the float nearest 0.644 rather than 644 * 0.001.
_UNITS: dict[str, tuple[int, int]] = {
    **dict.fromkeys(("d", "day", "days"), (86400, 1)),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), (3600, 1)),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), (60, 1)),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), (1, 1)),
    **dict.fromkeys(("ms", "msec", "msecs", "millisecond", "milliseconds"), (1, 1000)),
    **dict.fromkeys(("us", "µs", "μs", "microsecond", "microseconds"), (1, 10**6)),
    **dict.fromkeys(("ns", "nanosecond", "nanoseconds"), (1, 10**9)),
}
_UNIT_PATTERN = "|".join(sorted(map(re.escape, _UNITS), key=len, reverse=True))

# One part: optional separators, a number, optional spaces, a unit not followed by a letter
# ("2 more minutes" is not "2 m"). Separators, digits and letters are disjoint classes.
_PART = re.compile(
    rf"[\s,]*(?:and\s+)?(\d{{1,12}}(?:\.\d{{1,12}})?)\s*({_UNIT_PATTERN})(?![^\W\d_])"
)
_NUMBER = re.compile(r"\s*(\d{1,16}(?:\.\d{1,9})?)\s*")
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[t ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?"
    r"\s*(z|utc|gmt|[+-]\d{2}(?::?\d{2})?)"
)


def read_duration(text: str, pos: int = 0) -> tuple[float, int] | None:
    """(seconds, end) of the duration starting at `pos`, or None when there is none.

    Units must shrink from part to part ("1h2m3s", "2 days 17 hours"): that is how people
    and Go write durations, and it bounds the loop to seven parts whatever follows.
    """
    total = 0.0
    end = pos
    last_size: float | None = None
    while (part := _PART.match(text, end)) is not None:
        multiplier, divisor = _UNITS[part.group(2)]
        size = multiplier / divisor
        if last_size is not None and size >= last_size:
            break
        total += float(part.group(1)) * multiplier / divisor
        last_size = size
        end = part.end()
    return None if last_size is None else (total, end)


def read_full_duration(value: str) -> float | None:
    """Seconds of a value that is nothing but a duration ("6m0s", "120ms"), else None."""
    value = value.strip()
    parsed = read_duration(value)
    if parsed is None or parsed[1] != len(value):
        return None
    return parsed[0]


def read_number(value: str) -> float | None:
    """A plain non-negative decimal ("30", "1.5"), else None (no signs, exponents, inf)."""
    match = _NUMBER.fullmatch(value)
    return None if match is None else float(match.group(1))


def from_epoch(seconds: float) -> datetime | None:
    """The UTC instant `seconds` after 1970, or None when it is not representable."""
    try:
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds)
    except OverflowError:
        return None


def epoch_instant(value: float) -> datetime | None:
    """Read a bare number as an epoch in seconds or milliseconds, told apart by magnitude;
    None when it is too small to be an epoch at all."""
    if value >= EPOCH_MS_FLOOR:
        return from_epoch(value / 1000)
    if value >= EPOCH_SECONDS_FLOOR:
        return from_epoch(value)
    return None


def read_rfc3339(text: str, pos: int = 0, *, whole: bool = False) -> datetime | None:
    """The UTC instant of an ISO-8601 / RFC 3339 timestamp with a zone at `pos` (the whole
    of `text` when `whole`), or None. A timestamp without a zone is not an instant."""
    match = _RFC3339.fullmatch(text, pos) if whole else _RFC3339.match(text, pos)
    if match is None:
        return None
    year, month, day, hour, minute = (int(match.group(i)) for i in range(1, 6))
    second = int(match.group(6) or 0)
    micro = int((match.group(7) or "0")[:6].ljust(6, "0"))
    zone = match.group(8)
    try:
        if zone in ("z", "utc", "gmt"):
            tzinfo: timezone = UTC
        else:
            sign = -1 if zone[0] == "-" else 1
            digits = zone[1:].replace(":", "")
            offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
            tzinfo = timezone(sign * offset)
        local = datetime(year, month, day, hour, minute, second, micro, tzinfo=tzinfo)
        return local.astimezone(UTC)
    except (ValueError, OverflowError):
        return None


def safe_date(year: int, month: int, day: int) -> date | None:
    """The date, or None for Feb 30 and years out of range."""
    try:
        return date(year, month, day)
    except ValueError:
        return None


def instants_of(wall: datetime) -> list[datetime]:
    """The UTC instants a zoned wall-clock time may denote: two around a DST change (an
    ambiguous time occurs twice; a skipped one has two readings), else one."""
    other = wall.replace(fold=1)
    if other.utcoffset() == wall.utcoffset():
        return [wall.astimezone(UTC)]
    return [wall.astimezone(UTC), other.astimezone(UTC)]


# North American zone abbreviations that name one fixed offset each (a printed "PST" is
# UTC-8 whatever the season). Ambiguous ones ("CST": US Central or China) are left out.
_FIXED_ABBREVIATIONS = {"pst": -8, "pdt": -7, "mst": -7, "mdt": -6, "est": -5, "edt": -4}
_OFFSET = re.compile(r"(?:gmt|utc)\s?([+\-−])\s?(\d{1,2})(?::?(\d{2}))?")


def fixed_offset(name: str) -> tzinfo | None:
    """The fixed zone a printed offset names ("gmt-3", "utc+5:30", "gmt", "pst"), else None.
    "GMT-3" is read as people write it: three hours behind UTC (not the POSIX sign)."""
    name = name.strip()
    if name in ("gmt", "utc"):
        return UTC
    if name in _FIXED_ABBREVIATIONS:
        return timezone(timedelta(hours=_FIXED_ABBREVIATIONS[name]))
    match = _OFFSET.fullmatch(name)
    if match is None:
        return None
    hours, minutes = int(match.group(2)), int(match.group(3) or 0)
    if hours > 14 or minutes > 59:
        return None
    sign = 1 if match.group(1) == "+" else -1
    return timezone(sign * timedelta(hours=hours, minutes=minutes))


def zone_named(name: str) -> tzinfo | None:
    """The zone named case-insensitively (IANA, or UTC/GMT), else None. Only listed names
    are looked up, so no text can steer zoneinfo to an arbitrary file."""
    if name in ("utc", "gmt", "z"):
        return UTC
    canonical = _zone_names().get(name)
    if canonical is None:
        return None
    try:
        return ZoneInfo(canonical)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # a listed but unreadable file
        return None


@cache
def _zone_names() -> dict[str, str]:
    # Built once per process (~20 ms): zone names in text come in any case. "localtime"
    # and "posixrules" are host settings, not places, so they name no zone here.
    host_settings = {"localtime", "posixrules"}
    return {zone.lower(): zone for zone in available_timezones() if zone not in host_settings}
