"""Timing hints: when a provider says its caller may try again.

A hint parks a route until a deadline, so it is only used when it can be trusted: a hint
that is unparseable, already past, or absurdly far away (more than 30 days) is dropped,
and nothing here raises, whatever the text. Client-side countdowns ("Retrying in 4
seconds… attempt 4/10") are the agent's own backoff, not the server's word, and are never
read as hints. Clock times count only with an explicit zone: "resets 3pm" alone names no
instant.

Pure: `now` is always passed in. `parse_timing` runs on every classified error, so each
regex runs only where a cheap substring search of the lowercased text found a keyword.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from email.utils import parsedate_to_datetime
from typing import Final, Literal

from catalogue._durations import (
    epoch_instant,
    fixed_offset,
    instants_of,
    read_duration,
    read_full_duration,
    read_number,
    read_rfc3339,
    safe_date,
    zone_named,
)
from catalogue._foreign_timing import HINT_WORDS, foreign_delay
from catalogue._structured import (
    UNIFIED,
    codex_reset,
    codex_window_reset,
    rate_limit_event_reset,
    unified_out_of_credits,
    unified_reset,
)
from catalogue.substrings import Substrings

__all__ = [
    "MAX_HINT_SECONDS",
    "TIMING_TRIGGERS",
    "TimingHint",
    "headers_deny_reset",
    "parse_header_timing",
    "parse_lowered_timing",
    "parse_timing",
]

HintSource = Literal["header", "body", "text", "structured"]


@dataclass(frozen=True, slots=True)
class TimingHint:
    """Exactly one of `retry_after_s` (a relative delay) or `reset_at` (an aware UTC
    instant) is set."""

    retry_after_s: float | None
    reset_at: datetime | None
    source: HintSource


MAX_HINT_SECONDS = 30 * 24 * 3600
_MAX_HINT = timedelta(seconds=MAX_HINT_SECONDS)

# Gemini RetryInfo, as JSON (quotes possibly escaped once or more), as a Python dict repr
# ({'retryDelay': '47s'}, as google-genai's ClientError prints it, its value possibly on the
# next line of a rich traceback box: "'retryDelay':   │ │\n│ │   '59s'") or as protobuf text.
_RETRY_DELAY_JSON = re.compile(
    r"""\\*["']retrydelay\\*["']\s*:[\s│┃]*\\*["'](\d{1,12}(?:\.\d{1,12})?)s\\*["']"""
)
_RETRY_DELAY_PROTO = re.compile(
    r"retry_delay\s*\{\s*seconds:\s*(\d{1,12})(?:\s+nanos:\s*(\d{1,9}))?\s*\}"
)
# RetryInfo as Go prints a decoded map ("map[@type:type.googleapis.com/google.rpc.RetryInfo
# retryDelay:12s]", charmbracelet/crush's log).
_RETRY_DELAY_GO_MAP = re.compile(r"(?<![\w\\\"'])retrydelay:(\d{1,12}(?:\.\d{1,12})?)s(?![\w.])")
# Hugging Face's serverless inference loading a model: '{"error": "Model X is currently
# loading", "estimated_time": 44.49}' (seconds, as JSON or a Python dict repr): when the
# server expects the model to answer.
_ESTIMATED_TIME = re.compile(
    r"""\\*["']estimated_time\\*["']\s*:\s*(\d{1,12}(?:\.\d{1,20})?)(?![\d.])"""
)
# A relay's cooldown of its credentials for a model, in seconds, beside its message
# (CLIProxyAPI's 429 '{"error":{"code":"model_cooldown","message":"All credentials for model
# coder-model are cooling down",...,"reset_seconds":25803,"reset_time":"7h10m2s"}}',
# router-for-me/CLIProxyAPI#2018): when the server the agent talks to can answer again.
_RESET_SECONDS = re.compile(r"""\\*["']reset_seconds\\*["']\s*:\s*(\d{1,12})(?![\d.])""")
# A 429 whose delay is a bare count of seconds after "retry after", as Telegram's Bot API
# words it ("Too Many Requests: retry after 35", relayed by n8n): no unit to read.
_BEFORE_BARE_SECONDS: Final = "too many requests: "
_BARE_SECONDS_AFTER_429 = re.compile(
    r"too many requests: retry after (\d{1,7})(?![\d.,]|[ \t]*[a-zµμ])"
)
# Phrases a server uses before a delay, matched only where `_lead_starts` found a keyword
# (str.find is ~20x faster than searching for an alternation). "Retrying in" (a client
# countdown) matches none: "retry" must be followed by whitespace. The lookbehind keeps
# "await" and "preset" out, and an identifier that ends in "retry": tenacity's and
# LangChain's "Retrying <module>._completion_with_retry in 4.0 seconds as it raised ..."
# names the client's own function, then its own backoff.
_DELAY_LEAD = re.compile(
    r"(?<![^\W\d])(?:try\s+again\s+in|retry\s+(?:in|after)|resets?\s+(?:in|after)"
    # "please try again after 1 seconds" (Moonshot) is the server's; "if you fixed this,
    # try again after 5 minutes" is advice.
    r"|(?<=please\s)try\s+again\s+after|wait(?:\s+for)?"
    # A client relaying the delay its provider asked for ("Provider requested 1800000ms
    # wait, exceeds retry.maxDelayMs", can1357/oh-my-pi): the server's hint, not the
    # client's own backoff.
    r"|(?<=provider\s)requested|(?<=server\s)requested|(?<=upstream\s)requested)\b"
    # "Resets in: 2m27s", "Wait ~30s", "wait about 5 minutes": a colon or an approximation
    # between the lead and the delay.
    r"(?::|\s*~|\s+(?:about|approximately|approx\.|around|roughly))?"
)
# A delay followed by an attempt counter ("in 5s (attempt 2/5)") is a client countdown.
_ATTEMPT_AFTER = re.compile(r"[\s.…·,;:()\[\]-]{0,16}attempt\b")
# Claude Code: "Claude AI usage limit reached|1748268000" (epoch seconds or milliseconds).
_EPOCH_AFTER_PIPE = re.compile(r"limit\s+reached\s*\|\s*(\d{1,16})(?![\d.])")
# Phrases a server uses before an instant, matched like `_DELAY_LEAD`.
# "Retry after" is a delay lead too: an instant follows it where the delay reader found no
# duration (Sourcegraph's Go-printed "Retry after 2024-06-27 03:57:26 +0000 UTC").
_INSTANT_LEAD = re.compile(
    r"(?<![^\W\d_])(?:resets?|(?:try\s+again|retry|available)\s+at|retry\s+after)"
    r"\s+(?:at\s+|on\s+)?"
)
# Keywords that start a lead phrase ("try" also finds "retry", two characters earlier).
_LEAD_KEYWORDS = ("try", "reset", "wait", "available", "requested")
_RETRY_DELAY_WORDS = frozenset({"retrydelay", "retry_delay"})
# Every word one of which some reader needs in the text before it can read anything: the
# structured signals, the lead keywords, Claude Code's "limit reached|<epoch>" and the
# foreign retry phrases' words. They are found together in one pass (most texts hold none).
TIMING_TRIGGERS: Final = (
    *("rate_limit_event", "resets_", *sorted(_RETRY_DELAY_WORDS), *_LEAD_KEYWORDS, "reached"),
    "estimated_time",
    "reset_seconds",
    *HINT_WORDS,
)
_TRIGGER_SET = frozenset(TIMING_TRIGGERS)
_TRIGGERS = Substrings(TIMING_TRIGGERS)
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
# "[Oct 24[, 2026][,| at ]]3pm (Europe/Paris)", matched right after an instant lead.
# Adjacent quantifiers never range over the same characters, so matching stays linear.
_CLOCK = re.compile(
    rf"(?:(?P<mon>{'|'.join(_MONTHS)})[a-z]*\.?\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?"
    r"(?:,?\s+(?P<year>\d{4}))?(?:\s*,\s*|\s+at\s+|\s+))?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?(?:\s*(?P<ampm>[ap])\.?m\b\.?)?"
    r"(?:\s*\(\s*(?P<zone>[a-z][a-z0-9_+\-]{0,40}(?:/[a-z0-9_+\-]{1,40}){0,3})\s*\)"
    r"|\s+(?P<offset>(?:gmt|utc)(?:\s?[+\-−]\s?\d{1,2}(?::?\d{2})?)?|[pme][sd]t)(?![\w+\-]))?"
)
# Reset headers and the name of their remaining-count partner, e.g. x-ratelimit-reset-tokens
# -> x-ratelimit-remaining-tokens, anthropic-ratelimit-tokens-reset -> ...-tokens-remaining.
_RESET_HEADER = re.compile(
    r"(?P<pre>(?:x-)?rate-?limit)-reset(?P<bucket>(?:-[a-z0-9]+)*)"
    r"|(?P<anthropic>anthropic-ratelimit-[a-z0-9-]+)-reset"
)


def parse_timing(text: str, now: datetime, zone: tzinfo | None = None) -> TimingHint | None:
    """Timing hint stated in error text (source 'text', or 'structured' for Gemini RetryInfo
    retryDelay, Claude Code's rate_limit_event, Codex's resets_at, Hugging Face's
    estimated_time for a model it is loading and a relay's reset_seconds for its cooling
    credentials). None when there is none, it is unparseable, in the past, or more than 30
    days away. Structured beats text. Among text hints the latest trusted reset wins, as
    among headers and structured windows: a text naming several exhausted windows ("session
    limit · resets 5pm (Europe/Paris)", "weekly limit · resets Dec 3 …") can only be retried
    once the last of them has reset (at an equal instant, the first stated). A statement
    that is no hint (a client countdown, a zone-less clock time, one in the past) takes no
    part. `zone` is the zone of the machine the agent ran on: a clock time naming no zone
    ("try again at 9:15 AM") is read in it, and dropped without it. When no English lead
    phrase states a hint, a retry or wait phrase in another language with English units ("请在
    30s 后重试", "Réessayez dans 45s") is read (catalogue._foreign_timing)."""
    return parse_lowered_timing(text.lower(), now, zone, None)


def parse_lowered_timing(
    t: str, now: datetime, zone: tzinfo | None, found: AbstractSet[str] | None
) -> TimingHint | None:
    """`parse_timing` on text already lowercased (`t`), for a caller that may also have
    searched it for TIMING_TRIGGERS (catalogue.substrings): `found`, when given, holds every
    one of them `t` holds (and may hold other words). Saves the reader its own search."""
    if now.tzinfo is None:  # `_as_utc`, inline: this runs on every classified error
        now = now.replace(tzinfo=UTC)
    hint = _hint_in(t, now, zone, found)
    if hint is None and "\n" in t:
        # A terminal wrap inside a word of the lead phrase ("please try a\ngain after 1
        # seconds", Moonshot's 429 as kimi-cli prints it): read again with each line break
        # between two letters removed. Only when nothing was read: a break between words
        # stays a break, so a client's countdown on a line of its own is still told apart.
        rejoined = _MID_WORD_BREAK.sub("", t)
        if rejoined != t:
            hint = _hint_in(rejoined, now, zone)
    return hint


# A line break (with the indentation after it) between two letters: a terminal wrap that
# split one word.
# Found from the line break (a literal: a fast scan), the letter before it (and an optional
# CR) checked by a look-behind after it: `(?<=[^\W\d_])\r?\n[ \t]*(?=[^\W\d_])`, the same
# matches, where a leading look-behind made the engine try every position.
_MID_WORD_BREAK = re.compile(r"(?:\r\n(?<=[^\W\d_]\r\n)|\n(?<=[^\W\d_]\n))[ \t]*(?=[^\W\d_])")


def _hint_in(
    t: str, now: datetime, zone: tzinfo | None, found: AbstractSet[str] | None = None
) -> TimingHint | None:
    """`parse_timing` on lowercased text, `now` in UTC; `found` as for
    `parse_lowered_timing`."""
    if found is None:
        found = _TRIGGERS.found(t)
    if found.isdisjoint(_TRIGGER_SET):
        return None  # the commonest case: no reader has a word to start from
    if (hint := _structured_hint(t, now, found)) is not None:
        return hint
    stated: list[tuple[int, TimingHint]] = []
    starts = _lead_starts(t, found)
    if starts:
        # Clock times name a zone in parentheses (or take the given one) and ISO instants
        # have colons: without either, only delays can follow a lead phrase.
        instants = zone is not None or "(" in t or ":" in t or "am" in t or "pm" in t
        for start in starts:
            hint = _delay_at(t, start) or (_instant_at(t, start, now, zone) if instants else None)
            if hint is not None:
                stated.append((start, hint))
    if "reached" in found and "|" in t:
        stated.extend(_epoch_hints(t, now))
        stated.sort(key=lambda item: item[0])
    # A delay in another language's retry phrase, with English units ("请在 30s 后重试").
    foreign = None if stated or found.isdisjoint(HINT_WORDS) else foreign_delay(t)
    if foreign is not None and (hint := _relative(foreign[0], "text")) is not None:
        stated.append((foreign[1], hint))
    latest: tuple[datetime, TimingHint] | None = None
    for _, hint in stated:
        latest = _later(latest, hint, now)
    return None if latest is None else latest[1]


def _later(
    best: tuple[datetime, TimingHint] | None, hint: TimingHint, now: datetime
) -> tuple[datetime, TimingHint]:
    """`best` or `hint`, whichever resets later (with its instant); `best` on a tie."""
    at = (
        hint.reset_at
        if hint.reset_at is not None
        else now + timedelta(seconds=hint.retry_after_s or 0.0)
    )
    return (at, hint) if best is None or at > best[0] else best


def headers_deny_reset(headers: Mapping[str, str]) -> bool:
    """Whether the headers say no reset will lift this refusal (Anthropic's unified
    `overage-disabled-reason: out_of_credits` with no exhausted window): then no hint from
    any source may stand, whatever a Retry-After or the text says."""
    lowered = {str(name).strip().lower(): value for name, value in headers.items()}
    return unified_out_of_credits(lowered)


def parse_header_timing(headers: Mapping[str, str], now: datetime) -> TimingHint | None:
    """Timing hint from response headers (any name case). Source 'header'. Priority:
    retry-after-ms, retry-after, the latest reset among Anthropic's exhausted unified
    windows, then the latest reset among exhausted buckets. None when the headers deny a
    reset (`headers_deny_reset`)."""
    now = _as_utc(now)
    lowered = {str(name).strip().lower(): value for name, value in headers.items()}
    if unified_out_of_credits(lowered):
        return None
    millis = lowered.get("retry-after-ms")
    if isinstance(millis, str) and (hint := _retry_after_ms_hint(millis)) is not None:
        return hint
    value = lowered.get("retry-after")
    if isinstance(value, str) and (hint := _retry_after_hint(value, now)) is not None:
        return hint
    if (window_reset := unified_reset(lowered) or codex_window_reset(lowered, now)) is not None:
        return _absolute(window_reset, now, "header")
    return _reset_headers_hint(lowered, now)


def _structured_hint(t: str, now: datetime, found: AbstractSet[str]) -> TimingHint | None:
    if not found.isdisjoint(_RETRY_DELAY_WORDS) and (hint := _retry_delay_hint(t)) is not None:
        return hint
    if "rate_limit_event" in found and (at := rate_limit_event_reset(t)) is not None:
        return _absolute(at, now, "structured")
    if "resets_" in found:
        reset_at, delay = codex_reset(t)
        hint = None if reset_at is None else _absolute(reset_at, now, "structured")
        if hint is None and delay is not None:
            hint = _relative(delay, "structured")
        return hint
    if "estimated_time" in found and (match := _ESTIMATED_TIME.search(t)) is not None:
        return _relative(float(match.group(1)), "structured")
    if "reset_seconds" in found and (match := _RESET_SECONDS.search(t)) is not None:
        return _relative(float(match.group(1)), "structured")
    return None


def _retry_delay_hint(t: str) -> TimingHint | None:
    for match in _RETRY_DELAY_JSON.finditer(t):
        if (hint := _relative(float(match.group(1)), "structured")) is not None:
            return hint
    for match in _RETRY_DELAY_PROTO.finditer(t):
        seconds = int(match.group(1)) + int(match.group(2) or 0) / 10**9
        if (hint := _relative(seconds, "structured")) is not None:
            return hint
    for match in _RETRY_DELAY_GO_MAP.finditer(t):
        if (hint := _relative(float(match.group(1)), "structured")) is not None:
            return hint
    return None


def _delay_at(t: str, start: int) -> TimingHint | None:
    if (lead := _DELAY_LEAD.match(t, start)) is None or _client_retry_line(t, start):
        return None
    if _relay_pool_countdown(t, start):
        return None
    parsed = read_duration(t, lead.end())
    if parsed is None:
        bare = _BARE_SECONDS_AFTER_429.match(t, max(0, start - len(_BEFORE_BARE_SECONDS)))
        return None if bare is None else _relative(float(bare.group(1)), "text")
    if _ATTEMPT_AFTER.match(t, parsed[1]):
        return None
    return _relative(parsed[0], "text")


# A client announcing what it will do itself ("429; will retry in 10s", "going to try again
# in 30 seconds"): its own backoff, where a server asks the caller ("please retry in").
_CLIENT_WILL = re.compile(r"(?:\bwill|'ll|\bgoing\s+to|\bshall)\s+(?:auto(?:matically)?\s+)?$")


# A relay that pools accounts or keys describing its own pool's state ("all 1 active
# accounts rate limited (reset after 5s)", OmniRoute's log, diegosouzapw/OmniRoute#1649):
# the relay's cooldown, not the provider's reset. Only a "reset(s) in/after" that describes
# the pool; a relay asking its caller to wait ("All accounts are currently limited. Please
# wait 8s.", lbjlaq/Antigravity-Manager#766) is the hint of the server the agent talks to.
# Looked for on the lead's own line, in the 120 characters before it.
_RELAY_POOL = re.compile(
    r"\ball\s+(?:\d+\s+)?(?:(?:active|available|enabled|upstream)\s+)?"
    r"(?:accounts|credentials|keys|api\s+keys|channels)\b[^\n]*$"
)


def _relay_pool_countdown(t: str, start: int) -> bool:
    if not t.startswith("reset", start):
        return False
    line_start = t.rfind("\n", max(0, start - 120), start) + 1
    return _RELAY_POOL.search(t, max(line_start, start - 120), start) is not None


def _client_will(t: str, start: int) -> bool:
    """Whether the 24 characters before `start` end with a client's "will", "'ll", "going
    to" or "shall" (`_CLIENT_WILL`)."""
    reach = max(0, start - 24)
    # Every branch of the pattern holds "ll" or "going": most windows hold neither, and two
    # substring tests cost a fraction of the scan (its branches open with a word boundary,
    # so it is tried at every position of the window).
    window = t[reach:start]
    if "ll" not in window and "going" not in window:
        return False
    # Searched in `t` itself, not the window: a word boundary at the window's start looks
    # at the character before it.
    return _CLIENT_WILL.search(t, reach, start) is not None


def _client_retry_line(t: str, start: int) -> bool:
    """Whether a "retry in/after" lead opens a line of its own after other output: a
    client's backoff line printed under the error (aider's "Retry in 0.7 seconds."), where a
    server states its delay inside its message ("Please retry in 38s"); or whether a client
    announces it will retry by itself ("will retry in 10s")."""
    if t.startswith(("retry", "try"), start) and _client_will(t, start):
        return True  # "your quota will reset after 53s" is the server's
    if not t.startswith("retry", start):
        return False
    at = start - 1
    while at >= 0 and t[at] in " \t":
        at -= 1
    return at >= 0 and t[at] == "\n"


def _instant_at(t: str, start: int, now: datetime, zone: tzinfo | None) -> TimingHint | None:
    if (lead := _INSTANT_LEAD.match(t, start)) is None:
        return None
    at = read_rfc3339(t, lead.end())
    if at is None and (clock := _CLOCK.match(t, lead.end())) is not None:
        at = _clock_instant(clock, now, zone)
    return None if at is None else _absolute(at, now, "text")


def _lead_starts(t: str, found: AbstractSet[str]) -> list[int]:
    """Positions, in text order, where a lead phrase may start (`found`: the triggers `t`
    holds)."""
    starts: list[int] = []
    for keyword in _LEAD_KEYWORDS:
        if keyword not in found:  # the commonest case
            continue
        at = t.find(keyword)
        while at >= 0:
            starts.append(at - 2 if keyword == "try" and t.startswith("re", at - 2) else at)
            at = t.find(keyword, at + 1)
    starts.sort()
    return starts


def _epoch_hints(t: str, now: datetime) -> list[tuple[int, TimingHint]]:
    hints = []
    for match in _EPOCH_AFTER_PIPE.finditer(t):
        at = epoch_instant(int(match.group(1)))
        if at is not None and (hint := _absolute(at, now, "text")) is not None:
            hints.append((match.start(), hint))
    return hints


def _clock_instant(
    clock: re.Match[str], now: datetime, default_zone: tzinfo | None
) -> datetime | None:
    """The next instant strictly after `now` showing this wall-clock time (and date, when
    given) in the named zone, else in `default_zone`; DST gaps and folds are zoneinfo's.
    A named zone that is not a zone drops the hint (it never falls back)."""
    if clock["zone"] is not None:
        zone = zone_named(clock["zone"])
    elif clock["offset"] is not None:
        zone = fixed_offset(clock["offset"])
    else:
        zone = default_zone
    hour, minute, ampm = int(clock["hour"]), int(clock["minute"] or 0), clock["ampm"]
    if zone is None or (ampm is None and clock["minute"] is None):
        return None  # a bare number is not a clock time
    if ampm is not None:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if ampm == "p" else 0)
    if hour > 23 or minute > 59:
        return None
    try:
        return _next_wall_clock(clock, hour, minute, zone, now)
    except (OverflowError, ValueError):
        return None  # dates at the edge of datetime's range


def _next_wall_clock(
    clock: re.Match[str], hour: int, minute: int, zone: tzinfo, now: datetime
) -> datetime | None:
    local_now = now.astimezone(zone)
    if clock["mon"] is None:
        days = [local_now.date() + timedelta(days=n) for n in range(3)]
    else:
        month, day = _MONTHS.index(clock["mon"]) + 1, int(clock["day"])
        years = [int(clock["year"])] if clock["year"] else [local_now.year, local_now.year + 1]
        days = [d for year in years if (d := safe_date(year, month, day)) is not None]
    for day_ in days:
        wall = datetime(day_.year, day_.month, day_.day, hour, minute, tzinfo=zone)
        later = [at for at in instants_of(wall) if at > now]
        if later:
            return min(later)
    return None


def _retry_after_ms_hint(value: str) -> TimingHint | None:
    millis = read_number(value)
    return None if millis is None else _relative(millis / 1000, "header")


def _retry_after_hint(value: str, now: datetime) -> TimingHint | None:
    seconds = read_number(value)
    if seconds is not None:
        return _relative(seconds, "header")
    if len(value) > 64:
        return None  # no HTTP-date is this long; do not feed garbage to the date parser
    try:
        at = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return _absolute(at if at.tzinfo else at.replace(tzinfo=UTC), now, "header")


def _reset_headers_hint(lowered: Mapping[str, object], now: datetime) -> TimingHint | None:
    """The latest reset among exhausted buckets: the caller can only proceed once every
    exhausted bucket has refilled. Buckets with a non-zero remaining count are ignored."""
    best: tuple[datetime, TimingHint] | None = None
    for name, value in lowered.items():
        match = _RESET_HEADER.fullmatch(name)
        if match is None or not isinstance(value, str) or name.startswith(UNIFIED):
            continue  # unified windows have a status, not a remaining count: read above
        if match["anthropic"]:
            remaining = lowered.get(f"{match['anthropic']}-remaining")
        else:
            remaining = lowered.get(f"{match['pre']}-remaining{match['bucket']}")
        if isinstance(remaining, str) and (left := read_number(remaining)) is not None and left:
            continue
        candidate = _reset_value_hint(value.strip().lower(), now)
        if candidate is not None and (best is None or candidate[0] > best[0]):
            best = candidate
    return None if best is None else best[1]


def _reset_value_hint(value: str, now: datetime) -> tuple[datetime, TimingHint] | None:
    """A reset header value (RFC 3339, epoch s/ms, bare seconds or a Go duration) as an
    absolute instant for comparison, with the hint in its own form."""
    number = read_number(value)
    if number is not None and (at := epoch_instant(number)) is not None:
        hint = _absolute(at, now, "header")
        return None if hint is None else (at, hint)
    if number is None and (at := read_rfc3339(value, whole=True)) is not None:
        hint = _absolute(at, now, "header")
        return None if hint is None else (at, hint)
    seconds = number if number is not None else read_full_duration(value)
    if not seconds or (hint := _relative(seconds, "header")) is None:
        return None  # a reset of 0 (Azure's placeholder beside -1 counts) names no reset
    return now + timedelta(seconds=seconds), hint


def _relative(seconds: float, source: HintSource) -> TimingHint | None:
    if 0 <= seconds <= MAX_HINT_SECONDS:
        return TimingHint(retry_after_s=float(seconds), reset_at=None, source=source)
    return None


def _absolute(at: datetime, now: datetime, source: HintSource) -> TimingHint | None:
    if timedelta(0) < at - now <= _MAX_HINT:
        return TimingHint(retry_after_s=None, reset_at=at.astimezone(UTC), source=source)
    return None


def _as_utc(now: datetime) -> datetime:
    """`now` as aware UTC; a naive value is taken to be UTC already."""
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now
