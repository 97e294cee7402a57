"""Bounded, redacted excerpts of provider error text: the ``safe_excerpt``. Pure, stdlib only.

``sanitize`` is the project's one sanitiser: every text that crosses into Redis, logs, CLI
output or process arguments passes it. It strips control, zero-width and bidi characters,
collapses blank-line runs, redacts credentials (by shape: catalogue/key_shapes.py; by name,
catalogue/secret_names.py: headers, assignments quoted or escaped in any way,
connection-string keys, bearer tokens; URL user info and queries), e-mail addresses and
home-path user names, and cuts to ``MAX_EXCERPT_BYTES`` of UTF-8 ending with "…". It is
idempotent: redaction repeats to a fixed point and a cut excerpt is returned only once it
is one. ``masked_url`` is the form in which the project prints a URL (its password masked,
the rest kept).

It runs in every classification, so every redaction pattern is linear and starts with a
literal (CPython then scans with a fast substring search); word boundaries are checked
after the literal or in Python, never by a leading look-behind (a slow scan).
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from catalogue.key_shapes import (
    BLOCK_TRIGGERS,
    MARK,
    SHAPE_TRIGGERS,
    redact_key_blocks,
    redact_key_shapes,
)
from catalogue.secret_names import NAMES, Edit, after_escape, redact_named, rewrite
from catalogue.substrings import Substrings

__all__ = [
    "MAX_EXCERPT_BYTES",
    "REDACTION_TRIGGERS",
    "masked_url",
    "sanitize",
    "sanitize_scanned",
]

MAX_EXCERPT_BYTES = 4096

_ELLIPSIS = "…"
_EMAIL_MARK = "[EMAIL]"
_MASK = "***"  # a password in a URL the project prints (masked_url)
# Longer inputs are cut to this many characters before any pattern runs; the partial token
# at the cut is dropped so a secret straddling it cannot survive as an unrecognised stub.
_PRECUT_CHARS = 16 * 1024
_BUDGET = MAX_EXCERPT_BYTES - len(_ELLIPSIS.encode())

_PRINTABLE_ASCII = bytes(range(0x20, 0x7F)) + b"\t\n"
# C0/C1 controls except \t and \n, bidi overrides, zero-width and invisible format characters
# (a key split by them is whole again) and lone surrogates; an ESC takes its ANSI
# CSI / OSC sequence with it. Intermediates (" ") are left out so "\x1b[ Bearer x" keeps its
# "B". The character class comes first so CPython scans for it quickly.
_CONTROL = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u034f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2069"
    r"\ufeff\ud800-\udfff]"
    r"(?:(?<=\x1b)(?:\[[0-?]*[@-~]|\][^\x07\x1b\n]*\x07?))?"
)
_BLANK_LINES = re.compile(r"\n(?:[ \t]*\n){3,}")
# The same invisible characters escaped as text (`\u200b` in JSON or a repr): a key split
# by one is whole again once it is gone. Removed in the redaction loop (a removal can join
# the text around it into another).
_ESCAPED_INVISIBLE = re.compile(
    r"\\u(?:00[aA][dD]|034[fF]|061[cC]|180[eE]|200[b-fB-F]|202[a-eA-E]|206[0-9]|[fF][eE][fF][fF])"
)
# ASCII characters a secret token may contain (every pattern that needs a whole token to
# recognise it is ASCII); matched on the reversed text from position 0.
_TOKEN_RUN = re.compile(r"[A-Za-z0-9!#$%&*+./:=?@\\^_|~-]*")

_USERINFO = re.compile(r"://(?P<v>[^\s/?#\"'<>]+)@")  # to the last @: p@ss@host
# A URL-ish run and a query value; queries are found by _redact_queries, one pass per run.
_URL_RUN = re.compile(r"://[^\s#\"'<>]*")
_QUERY_VALUE = re.compile(r"[^\s…#\"'<>)][^\s#\"'<>)]*")
_EMAIL_DOMAIN = re.compile(r"@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}(?![A-Za-z0-9-])")
_LETTERS = frozenset(string.ascii_letters)
_EMAIL_LOCAL = frozenset(string.ascii_letters + string.digits + "._%+-")
_HOME_SLASH = re.compile(r"/(?:home|Users)/{1,2}[^/\\\s\"'<>:]+|/root(?![\w.-])")
_HOME_BACKSLASH = re.compile(r"\\{1,2}Users[\\/]{1,2}[^/\\\s\"'<>:]+")


def _escaped_invisible(match: re.Match[str], text: str, last: int) -> Edit | None:
    """Remove the escape with every backslash before it (`\\\\u200b`, escaped twice)."""
    start = match.start()
    while start > last and text[start - 1] == "\\":
        start -= 1
    return (start, match.end(), "")


def _email(match: re.Match[str], text: str, last: int) -> Edit | None:
    start = match.start()
    while start > last and text[start - 1] in _EMAIL_LOCAL:
        start -= 1
    return None if start == match.start() else (start, match.end(), _EMAIL_MARK)


def _starts_path(text: str, i: int) -> bool:
    return i == 0 or not (text[i - 1].isalnum() or text[i - 1] in "_.~-") or after_escape(text, i)


def _home(match: re.Match[str], text: str, last: int) -> Edit | None:
    start = match.start()
    drive = start - 2  # C:\Users\name or C:/Users/name
    is_drive = drive >= last and text[start - 1] == ":" and text[drive] in _LETTERS
    if is_drive and _starts_path(text, drive):
        return (drive, match.end(), "~")
    if text.startswith("\\", start) or not _starts_path(text, start):
        return None  # inside a longer path or word: src/home/x, /api/Users/1
    return (start, match.end(), "~")


def _url_value(match: re.Match[str]) -> str:
    """Mark a URL's user info or query, unless already marked (by us or by masked_url)."""
    whole, base = match.group(0), match.start()
    start, end = match.start("v") - base, match.end("v") - base
    value = whole[start:end]
    if value in (MARK, _MASK) or value.endswith(":" + _MASK):
        return whole
    return whole[:start] + MARK + whole[end:]


def _redact_queries(text: str) -> str:
    """Mark the query of every URL: from the first "?" after its "://" (no space, "#",
    quote or angle bracket between) to the end of the value. Each URL-ish run is scanned
    once, so text made of many "://" costs linear time."""
    parts: list[str] = []
    last = 0
    for run in _URL_RUN.finditer(text):
        at, end = run.start(), run.end()
        while (at := text.find("://", at, end)) >= 0:
            mark = text.find("?", at + 3, end)
            if mark < 0:
                break
            value = _QUERY_VALUE.match(text, mark + 1, end)
            at = value.end() if value else mark + 1
            if value and value.group() != MARK:
                parts += (text[last : mark + 1], MARK)
                last = value.end()
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)


def _redact(text: str, found: AbstractSet[str] | None = None) -> str:
    """Redact until nothing changes: a marker can give a later match the boundary it lacked.
    The first pass runs only the steps whose triggers the text holds (`found`, when the
    caller has searched for them); most texts hold none: then nothing is redacted, and
    nothing more is scanned."""
    if found is None:
        found = _TRIGGERS.found(text.lower())
    if found.isdisjoint(_TRIGGER_SET):
        return text
    for _ in range(8):
        redacted = _redact_once(text, found)
        if redacted == text:
            break
        text, found = redacted, None  # `found` was the first text's
    return text


def _escaped_invisibles(text: str) -> str:
    if "\\u" in text:
        return rewrite(text, _ESCAPED_INVISIBLE.finditer(text), _escaped_invisible)
    return text


def _urls(text: str) -> str:
    if "://" in text:
        if "@" in text:
            text = _USERINFO.sub(_url_value, text)
        if "?" in text:
            text = _redact_queries(text)
    return text


def _emails(text: str) -> str:
    if "@" in text:
        return rewrite(text, _EMAIL_DOMAIN.finditer(text), _email)
    return text


def _home_paths(text: str) -> str:
    if "/" in text and _HOME_SLASH.search(text):
        text = rewrite(text, _HOME_SLASH.finditer(text), _home)
    if "\\" in text and "Users" in text:
        text = rewrite(text, _HOME_BACKSLASH.finditer(text), _home)
    return text


# Every redaction in order, with the lowercase literals one of which the lowercased text
# holds whenever the step can change it (each step also checks for itself).
_STEPS: tuple[tuple[frozenset[str], Callable[[str], str]], ...] = (
    (frozenset({"\\u"}), _escaped_invisibles),
    (frozenset(BLOCK_TRIGGERS), redact_key_blocks),
    (frozenset(NAMES), redact_named),
    (frozenset(SHAPE_TRIGGERS), redact_key_shapes),
    (frozenset({"://"}), _urls),
    (frozenset({"@"}), _emails),
    (frozenset({"/home", "/users", "/root", "\\users"}), _home_paths),
)
# Every step's triggers: a text (lowercased) that holds none of them is left as it is.
REDACTION_TRIGGERS: Final = tuple(
    dict.fromkeys(trigger for triggers, _ in _STEPS for trigger in sorted(triggers))
)
_TRIGGER_SET = frozenset(REDACTION_TRIGGERS)
_TRIGGERS = Substrings(REDACTION_TRIGGERS)


def _redact_once(text: str, found: AbstractSet[str] | None = None) -> str:
    """Apply every redaction once. With `found`, the triggers the lowercased `text` holds,
    a step none of whose triggers is found is skipped, until a step changes the text."""
    original = text
    for triggers, step in _STEPS:
        if found is None or text is not original:
            text = step(text)
        elif found.isdisjoint(triggers):
            continue
        elif step is redact_named:
            text = redact_named(text, found)  # which names to look for, too
        else:
            text = step(text)
    return text


def _drop_partial_token(text: str) -> str:
    """Drop the trailing run of token characters (a possibly cut secret or marker)."""
    run = _TOKEN_RUN.match(text[::-1])
    return text[: len(text) - run.end()] if run else text


def _truncate(text: str) -> str:
    """Cut to the byte budget and end with the ellipsis, returning only a fixed point."""
    encoded = text.encode("utf-8")
    head = encoded[:_BUDGET].decode("utf-8", "ignore")
    if len(encoded) > _BUDGET:
        head = _drop_partial_token(head)
    for _ in range(8):
        candidate = head + _ELLIPSIS
        if _redact(candidate) == candidate:
            return candidate
        head = _drop_partial_token(head[:-1])
    return _ELLIPSIS


def sanitize(text: str) -> str:
    """Return the bounded, redacted excerpt of `text` (≤ MAX_EXCERPT_BYTES of UTF-8)."""
    return _sanitized(text, None)


def sanitize_scanned(text: str, found: AbstractSet[str]) -> str:
    """`sanitize(text)`, for a caller that has already searched the lowercased `text` for
    REDACTION_TRIGGERS (catalogue.substrings): `found` holds every one of them it holds
    (and may hold other words). Saves the sanitiser its own search."""
    return _sanitized(text, found)


def _sanitized(text: str, found: AbstractSet[str] | None) -> str:
    cut = len(text) > _PRECUT_CHARS
    if cut:  # a cut holds no trigger its text did not: `found` still covers it
        text = _drop_partial_token(text[:_PRECUT_CHARS])
    if not text.isascii() or text.encode("ascii").translate(None, _PRINTABLE_ASCII):
        kept = _CONTROL.sub("", text)
        if kept is not text:  # removing a character can join a trigger
            text, found = kept, None
    if "\n" in text and text.count("\n") > 3:  # a run to collapse has four line breaks
        collapsed = _BLANK_LINES.sub("\n\n\n", text)
        if collapsed is not text:
            text, found = collapsed, None
    text = _redact(text, found)
    if cut or (len(text) * 4 > MAX_EXCERPT_BYTES and len(text.encode()) > MAX_EXCERPT_BYTES):
        return _truncate(text)
    return text


_SECRET_PARAMETERS = ("pass", "pwd", "token", "secret", "key", "sig", "auth", "credential")


def masked_url(url: str) -> str:
    """`url` as the project prints it (the one helper for that): the password of its user
    info, or the whole user info when it has no password part (a token as user name), and
    the values of secret-looking query parameters (`?password=`) become `***`; scheme, user
    name, host, port and path are kept. Text that is not a URL is sanitised instead, and
    what comes before an "@" in text that is not URL-shaped (`redis//:pw@db`) is masked."""
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return sanitize(url)
    if not parts.netloc and "@" in url:  # not URL-shaped: keep only what follows the "@"
        return sanitize(f"{_MASK}@{url.rpartition('@')[2]}")
    userinfo, at, host = parts.netloc.rpartition("@")
    secret_query = any(_secret_parameter(name) for name, _ in query)
    if not (at or secret_query):
        return url
    netloc = parts.netloc
    if at:
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}:{_MASK}@{host}" if colon else f"{_MASK}@{host}"
    if secret_query:
        masked = [(n, _MASK if _secret_parameter(n) else v) for n, v in query]
        parts = parts._replace(query=urlencode(masked, safe="*"))
    head = f"{parts.scheme}://{netloc}" if parts.scheme else f"//{netloc}"
    return head + urlunsplit(parts._replace(scheme="", netloc=""))


def _secret_parameter(name: str) -> bool:
    return any(word in name.lower() for word in _SECRET_PARAMETERS)
