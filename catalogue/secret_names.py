"""Credentials found by their names: header values (`Authorization:`, `Cookie:`),
assignments (`token=…`, `"api_key": "…"`, escaped or quoted in any way, `(b'k', b'v')`
pairs), a long opaque value in prose right after a name ("Invalid API key 3f9c…") and
bearer or basic credentials. Pure, stdlib only; used by catalogue/sanitize.py (which also
finds credentials by their shape, catalogue/key_shapes.py), with `rewrite`, the one way it
applies edits to a text.

Names are found by `str.find` on the lower-cased text and checked in Python (a whole key
name, not `monkey`); the pattern then runs from that position only, so a text full of
rejected names costs linear time.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet

from catalogue.key_shapes import MARK

__all__ = ["NAMES", "Decide", "Edit", "after_escape", "redact_named", "rewrite"]

# Name/value patterns run on the lower-cased text, matched only where str.find saw the name.
# The separator covers `k=v`, `k: v`, `"k": "v"`, `\"k\": \"v\"` (escaped once or more) and
# `(b'k', b'v')`; quoted values end at their quote, bare ones at a delimiter, header values
# at the end of the line. A value's tail past a quote inside it (`'a'b'`) is found by _TAIL.
_SEP = r"(?:(?:\\*[\"'])?[ \t]*[:=][ \t]*|(?P<comma>\\*[\"'][ \t]*,[ \t]*))"
_QUOTED = (
    r"b?\"(?P<dq>(?:[^\"\\\n]|\\.)*)|b?'(?P<sq>(?:[^'\\\n]|\\.)*)"
    r"|\\+\"(?P<eq>[^\\\"\n]*)|\\+'(?P<es>[^\\'\n]*)|`(?P<bq>[^`\n]*)"
)
_HEADER_VALUE = _SEP + rf"(?:{_QUOTED}|(?P<bare>[^\s…][^\r\n]*))"
_SCHEMES = r"(?:bearer[ \t]+|basic[ \t]+)*"  # "Bearer x" as a value is one credential
# A bare value may open with a bracket (`password=(x)`), never with "[" (the marker's).
_BARE = r"[^\s…\"'`,;&>)\[\]}\\][^\s\"'`,;&<>()\[\]{}\\]*"
_ASSIGN_VALUE = rf"{_SEP}(?:{_QUOTED}|(?P<bare>{_SCHEMES}{_BARE}))"
# In prose, a long opaque value shortly after the name: "Invalid API key 3f9c0a…". A pass of
# its own, so a rejected prose match cannot hide a `password=` inside its value.
_PROSE_VALUE = r"s?[^\w\n]{1,4}(?P<v>[a-z0-9+/_.=-]{20,})"
_BEARER_VALUE = rf"[ \t]+{_SCHEMES}(?P<v>[a-z0-9._~+/=-]+)"
_QUOTED_VALUES = ("dq", "sq", "eq", "es", "bq")
_KEY_AFTER = re.compile(r"\\*[\"']:(?!/)")
# What is left of a value after a quote inside it: quote runs each followed by more value.
# A quote may be escaped (`\'`), but no other escape is crossed (`\n` ends the value).
_TAIL = re.compile(r"(?:(?:\\*[\"'`])+[^\s\"'`\\,;&<>()\[\]{}]+)+(?:\\*[\"'`])*")
_QUOTES = "\"'`\\"
# `pwd`/`sig`: connection strings (PWD=) and shared access signatures (sig=).
_ASSIGN_NAMES = ("token", "secret", "key", "pass(?:word|wd|phrase)", "pwd", "sig")
_KEY_OWNERS = (
    *("api", "access", "secret", "private", "account", "subscription", "client", "master"),
    *("signing", "encryption", "shared", "auth", "session"),
)
_NOT_TOKENS = {  # "Bearer token is missing" is prose, not a credential
    *("token", "tokens", "auth", "authentication", "authorization", "scheme", "header"),
    *("credential", "credentials", "realm", "required", "is", "was", "missing", "invalid"),
}
_DIGITS = frozenset(string.digits)

Edit = tuple[int, int, str]
Decide = Callable[[re.Match[str], str, int], Edit | None]


def rewrite(text: str, matches: Iterable[re.Match[str]], decide: Decide) -> str:
    """Apply `decide`'s edits for `matches` (in text order) to `text`, skipping overlaps."""
    parts: list[str] = []
    last = 0
    for match in matches:
        if match.start() < last:
            continue
        edit = decide(match, text, last)
        if edit is not None:
            start, end, new = edit
            parts += (text[last:start], new)
            last = end
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)


def _name_ok(text: str, low: str, start: int, name: str) -> bool:
    """Is the name at `start` a whole key name (`token`, `access_token`, `apiToken`, ...)?"""
    if name == "key":  # only api/access/secret/private keys: not `monkey`, not `primary_key`
        return low[max(0, start - 14) : start].rstrip("_- ").endswith(_KEY_OWNERS)
    if start == 0 or not text[start - 1].isalnum() or after_escape(text, start):
        return True
    return text[start].isupper() and not text[start - 1].isupper()  # camelCase part


def after_escape(text: str, i: int) -> bool:
    """Does `text[i]` follow an escaped line break or tab (`\\n` in JSON or a repr)? Then
    it starts a word although a letter comes before it."""
    return i >= 2 and text[i - 2] == "\\" and text[i - 1] in "nrt"


def _tuple_name(match: re.Match[str]) -> bool:
    """A `(b'name', b'value')` pair (a header tuple) needs the whole name quoted after `(`."""
    low, i = match.string, match.start()
    while i > 0 and (low[i - 1].isalnum() or low[i - 1] in "_-"):
        i -= 1
    return i > 0 and low[i - 1] in "'\"" and low[max(0, i - 4) : i - 1].endswith(("(", "(b"))


def _named_matches(text: str, low: str, name: str, first: re.Match[str]) -> list[re.Match[str]]:
    """Non-overlapping matches like `first` in `low` at whole-name occurrences of `name`
    (checking the name before matching keeps this linear when names are rejected)."""
    matches: list[re.Match[str]] = []
    pattern, end = first.re, 0
    paired = "comma" in pattern.groupindex
    i = first.start()  # no earlier occurrence of the name matches
    while i >= 0:
        if i >= end and _name_ok(text, low, i, name):
            match = pattern.match(low, i)
            if match is not None and (not paired or match.start("comma") < 0 or _tuple_name(match)):
                matches.append(match)
                group = match.lastgroup  # the value: a quoted one may be a key, look inside
                end = match.start(group) if group in _QUOTED_VALUES else match.end()
        i = low.find(name, i + 1)
    return matches


def _value_edit(match: re.Match[str], text: str, last: int = 0) -> Edit | None:
    """Replace the value group of `match` by the marker unless it is empty or one already,
    or is a quoted key (`cookie: "password": "x"`): that key's own pass redacts its value.
    A value that goes on past a quote (`'a'b'`, `ab"cd`) is marked to the end of its tail;
    a quoted one keeps its opening quote and is closed again."""
    group = match.lastgroup  # the value group closes last in every name pattern
    start, end = match.span(group) if group else (0, 0)
    if group in _QUOTED_VALUES and _KEY_AFTER.match(text, end):
        return None
    tail = _TAIL.match(text, end) if group else None
    if tail is not None:
        opening = start
        while group in _QUOTED_VALUES and opening > 0 and text[opening - 1] in _QUOTES:
            opening -= 1
        return (start, tail.end(), MARK + text[opening:start])
    value = text[start:end]
    return None if not value or value == MARK else (start, end, MARK)


def _assignment(match: re.Match[str], text: str, last: int) -> Edit | None:
    value = match.group("v") if match.lastgroup == "v" else None
    if value is not None and (_DIGITS.isdisjoint(value) or not value.strip("0123456789+/_.=-")):
        return None  # a prose value must look opaque: digits and letters
    return _value_edit(match, text)


def _bearer(match: re.Match[str], text: str, last: int) -> Edit | None:
    token = text[match.start("v") : match.end("v")]
    if token.lower().rstrip(".") in _NOT_TOKENS:
        return None
    if match.string.startswith("basic", match.start()) and (
        len(token) < 8 or (token.isalpha() and token[1:].islower())
    ):
        return None  # prose such as "Basic authentication", not a credential
    return _value_edit(match, text)


_NAMED: tuple[tuple[str, re.Pattern[str], Decide], ...] = (
    ("authorization", re.compile("authorization" + _HEADER_VALUE), _value_edit),
    ("cookie", re.compile("cookie" + _HEADER_VALUE), _value_edit),
    *(
        (name.partition("(")[0], re.compile(name + value), _assignment)
        for value in (_ASSIGN_VALUE, _PROSE_VALUE)
        for name in _ASSIGN_NAMES
    ),
    ("bearer", re.compile("bearer" + _BEARER_VALUE), _bearer),
    ("basic", re.compile("basic" + _BEARER_VALUE), _bearer),
)
# The names, in order: a text holding none (lowercased) has nothing `redact_named` redacts.
NAMES = tuple(dict.fromkeys(name for name, _, _ in _NAMED))


def _lower(text: str) -> str:
    """Lower-case `text` keeping every index in place (a few characters grow when lowered)."""
    low = text.lower()
    if len(low) == len(text):
        return low
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def redact_named(text: str, found: AbstractSet[str] | None = None) -> str:
    """Header values, assignments and bearer tokens, found by their (lower-case) names.
    `found`, when given, holds every name of NAMES the lowercased text holds (a caller's
    one search for them: catalogue.substrings): a name it lacks is not searched for."""
    low = _lower(text)
    if found is None:
        for name in NAMES:
            if name in low:
                break
        else:  # the commonest case: one substring test per name (by `in`: no call)
            return text
    for name, pattern, decide in _NAMED:
        # A substring test is cheaper than starting a regex scan (patterns share names).
        if name not in (low if found is None else found):
            continue
        first = pattern.search(low)
        if first is not None:
            redacted = rewrite(text, _named_matches(text, low, name, first), decide)
            if redacted is not text:  # `found` was the first text's
                text, low, found = redacted, _lower(redacted), None
    return text
