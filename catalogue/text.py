"""Text views the rules match against.

Provider errors reach us hard-wrapped by terminals, padded, JSON-escaped and in any case.
Rules are written against a lowercase view with whitespace collapsed (`flat`); a second
view with line breaks and their indentation removed (`joined`) recovers tokens a terminal
split mid-word ("api_\n    error"). Tokens of both views feed the rule index, so the cost of
finding candidate rules depends on the text's length, not on the number of rules.
"""

from __future__ import annotations

import re
from collections.abc import Set as AbstractSet
from typing import NamedTuple

_SPACE_RUN = re.compile(r"\s+")
# A terminal wrap inside a word: a word character on both sides of the line break. Only
# then can removing the break recover something the flat view does not already show.
# Found from the line break (a literal: a fast scan), the word character before it (and an
# optional CR) checked by a look-behind after it, all in one C-level search.
_MID_WORD_WRAP = re.compile(r"\n(?:(?<=\w\n)|(?<=\w\r\n))[ \t]*\w")


# The quote marks at the start of a line of Markdown-quoted output ("> ", "> > ").
_QUOTE_MARKS = re.compile(r"\n(?:[ \t]*>)+")
# The borders of a box-drawn frame around a line break (rich tables and panels, Gemini
# CLI's boxes: "... does not  │\n│ have access ..."), nested frames included: the
# closing border(s) before the break and the opening border(s) after it.
_BOX_BORDERS = re.compile(r"(?:[ \t]*[│┃])+[ \t]*\n(?:[ \t]*[│┃])+")


def _wraps_mid_word(text: str) -> bool:
    """Whether `text` has a word character, an optional CR, a line break, optional spaces
    or tabs and a word character, in that order."""
    return _MID_WORD_WRAP.search(text) is not None


# Tokens are maximal runs of ASCII letters, digits and underscores. Tokenising the UTF-8
# bytes with one translate() keeps this step a few microseconds (rule keys are ASCII words,
# which rules.py enforces).
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_TOKEN_TABLE = bytes(b if b in _WORD_BYTES else 0x20 for b in range(256))
# The token every text with a non-ASCII character holds besides its words: the key of rules
# whose patterns are in a script with no ASCII words (a Chinese UI's message), which would
# otherwise never be candidates.
NON_ASCII_TOKEN = b"nonascii_"


def tokens_of(text: str) -> set[bytes]:
    return set(text.encode("utf-8", "surrogatepass").translate(_TOKEN_TABLE).split())


def collapse_spaces(text: str) -> str:
    return " ".join(text.split())


# Where a status code is stated in prose rather than given as a field: a 4xx/5xx number
# (not part of a longer number) preceded by one of these contexts.
# The number's start is checked in the scan: no digit, "." or "," before it, asked by a
# look-behind after its first character (a leading look-behind would cost the scan its
# fast skip to a "4" or "5"). A number that fails it is inside a longer one, and so is
# every 3-digit run starting within it: the matches that remain are those a scan of
# `[45]\d\d` finds with a check of the character before each.
_STATUS_NUMBER = re.compile(r"[45](?<![0-9.,][45])\d\d")
# Every branch opens with a literal, so the regex engine tries only the positions holding
# one of their first characters (a branch opening with `^` or an optional group would make
# it try every position of the window, each with every branch).
_STATUS_CONTEXT = re.compile(
    r"(?:status(?: code)?(?: is)?[:= ]\s*\(?|error code\"?(?: is)?:?\s*|code\"?(?: is)?:?\s*|"
    r"unexpected status |http(?:/[12](?:\.[01])?)?[ :]\s*|"
    r"httpstatuscode\"?:\s*|<status:\s*|error:?\s*\(?|message:\s*|\n|\[|"
    # Chinese UIs: "HTTP 错误！状态：400" (status), "状态码: 429" (status code).
    r"状态码?[：:]\s*|"
    # "发生未知错误 (401)" (an unknown error occurred, koishijs/novelai-bot#48), "错误码: 400".
    r"错误码?\s*[：:(（]\s*|"
    # An editor's chat reason line ("Reason: Request Failed: 400 {...}", Copilot Chat).
    r"request failed:\s*|"
    # Rust's Debug of a status error (Warp's 'ErrorStatus(500, "")').
    r"errorstatus\(|"
    # A log line's level in brackets before the status ("[ERROR] 429 [object Object]", a
    # VS Code extension's output, timkmecl/codegpt#2).
    r"error\]\s*|"
    # A status alone in parentheses after a colon ("Failed to load response from
    # api.openai.com:\n(429)", wong2/chatgpt-google-extension#379).
    r":\s*\()$"
)
# A report's opening decoration (Claude Code's '  ⎿  503 {...}'), from the text's start:
# the one context that does not open with a literal, matched only near the start.
_STATUS_OPENING = re.compile(r"[\s⎿●⏺✕✖•·│>]+$")
_OPENING_REACH = 24  # the context window: a number further in has no opening before it
# A request line with the answer's status after its URL, as a browser console or an HTTP
# client's log prints it ("POST https://api.openai.com/v1/chat/completions 401").
_REQUEST_LINE = re.compile(r"(?:get|post|put|patch|delete) https?://[^\s\"'<>]{1,300} $")
_REQUEST_REACH = 320  # the method, the scheme and the longest URL it reads
_STATUS_PHRASE = re.compile(
    r" (?:too many requests|service unavailable|bad gateway|gateway timeout|"
    r"internal server error|unauthorized|forbidden|not found|bad request|payment required|"
    r"request entity too large|overloaded)"
)


_new = tuple.__new__


class TextViews(NamedTuple):
    """What rules match against. A NamedTuple: built once per classification, and tuple
    construction is several times cheaper than a frozen dataclass's."""

    flat: str
    joined: str | None
    tokens: AbstractSet[bytes]
    all: tuple[str, ...]  # flat, then joined when there is one

    def views(self) -> tuple[str, ...]:
        return self.all


def make_views(text: str) -> TextViews:
    return views_of(text.lower())


def views_of(lowered: str) -> TextViews:
    """`make_views` of a text, given the text lowercased (`text.lower()`)."""
    if "\\n" in lowered:
        # JSON printed inside another message keeps its escaped line breaks ("an internal
        # \\n  error"); read them as the line breaks they were.
        lowered = lowered.replace("\\r\\n", "\n").replace("\\n", "\n")
    if "\n>" in lowered:
        # Output pasted as a Markdown quote ("> " before every line): the marks are
        # decoration, and a wrap inside a message would leave one between its words.
        lowered = _QUOTE_MARKS.sub("\n", lowered)
    if "│" in lowered or "┃" in lowered:
        # Output framed in a box: the borders at a line's two ends are decoration, and a
        # message wrapped inside the frame would keep two of them between its words.
        lowered = _BOX_BORDERS.sub("\n", lowered)
    if lowered.isascii():
        # Most texts: the tokens from one encoding of the text as it is (white space only
        # separates tokens, so collapsing it changes none), and no split when the text is
        # already flat (no white space but single spaces inside it: then collapsing it
        # gives it back). One memchr per white-space character `str.split` splits ASCII
        # at is cheaper than `isprintable`'s lookup per character.
        tokens = set(lowered.encode("ascii").translate(_TOKEN_TABLE).split())
        if (
            "\n" in lowered
            or "  " in lowered
            or lowered[:1] == " "
            or lowered[-1:] == " "
            or "\t" in lowered
            or "\r" in lowered
            or "\x0b" in lowered
            or "\x0c" in lowered
            or "\x1c" in lowered
            or "\x1d" in lowered
            or "\x1e" in lowered
            or "\x1f" in lowered
        ):
            flat = " ".join(lowered.split())
        else:
            flat = lowered
    else:
        flat = collapse_spaces(lowered)
        tokens = tokens_of(flat)
        if not flat.isascii():  # collapsing removes non-ASCII white space
            tokens.add(NON_ASCII_TOKEN)
    joined: str | None = None
    if "\n" in lowered and _wraps_mid_word(lowered):
        candidate = collapse_spaces(_unwrapped(lowered))
        if candidate != flat:
            joined = candidate
            tokens.update(tokens_of(joined))
    # tuple.__new__ directly: a NamedTuple's own __new__ is a Python-level call.
    return _new(TextViews, (flat, joined, tokens, (flat,) if joined is None else (flat, joined)))


def _unwrapped(text: str) -> str:
    """`text` with its line breaks removed, each with the spaces and tabs around it (and
    a CR right before it), up to whitespace at its two ends: the same text once spaces
    are collapsed as `re.sub(r"[ \\t]*\\r?\\n[ \\t]*", "", text)`. By str methods: that
    pattern opens with no literal, so a regex scan tries it at every position."""
    lines = text.split("\n")
    last = lines.pop()
    # Stripping the first line's start and the last line's end too only removes
    # whitespace at the text's ends, which collapsing spaces removes anyway.
    kept = [(line[:-1] if line.endswith("\r") else line).strip(" \t") for line in lines]
    kept.append(last.strip(" \t"))
    return "".join(kept)


def status_in_text(lowered: str) -> int | None:
    """An HTTP status stated in the text ("API Error: 529", "status code 429", "[503 ]")."""
    if "4" not in lowered and "5" not in lowered:
        return None  # two C-level byte searches instead of a character-class scan
    for match in _STATUS_NUMBER.finditer(lowered):
        start, end = match.span()
        # Not part of a longer number either: no digit (or "." or "," and a digit, as in
        # "429.5" or "429,000") right after it.
        after = lowered[end : end + 2]
        if after[:1].isdigit() or (after[:1] in (".", ",") and after[1:2].isdigit()):
            continue
        if (
            start == 0
            or _STATUS_CONTEXT.search(lowered, max(0, start - _OPENING_REACH), start)
            or (start <= _OPENING_REACH and _STATUS_OPENING.match(lowered, 0, start))
        ):
            return int(match.group())
        if _STATUS_PHRASE.match(lowered, end):
            return int(match.group())
        if _REQUEST_LINE.search(lowered, max(0, start - _REQUEST_REACH), start):
            return int(match.group())
    return None


# An agent message chunk is evidence only when a line of it is itself an error report.
_REPORT_DECORATION = re.compile(r"^[\s●⏺⎿✕✖✗✘■•·│>*\-\[]*")
_REPORT_PREFIX = re.compile(
    r"(?:(?:acp|agent|json-?rpc|rpc)(?: protocol)? )?"
    r"(?:api error|internal error|error|fatal|错误|ошибка|erreur|fehler)\b\s*[:：(\[]|api error\b|"
    # An editor's heading for an ACP turn that ended in error ("### ❌ Agent finished
    # with error: {code = -32603, ...}", agentclientprotocol/claude-agent-acp#296).
    # A '#' opens only this heading: in a chunk's prose it is a code comment's.
    r"(?:#{1,6} )?(?:❌ )?agent (?:finished|stopped|ended|exited) with (?:an )?error\s*[:：]"
)


# An agent's fixed apology that opens its error report (Warp: "I'm sorry, I couldn't
# complete that request." over "Request failed with error: QuotaLimit"): what follows it,
# on its line and under it, is the report, not the model's prose.
_REPORT_HEADER = re.compile(
    r"i.?m sorry, i (?:couldn.?t|can.?t|cannot|could not|was unable to) complete "
    r"(?:that|this|your) request\.?\s*"
)


# A streamed API's failure event relayed whole as a chunk: the Responses API's
# '{"type":"response.failed","response":{...,"error":{...}}}' (Wei-Shaw/sub2api#5909) or a
# Messages stream's '{"type":"error","error":{...}}'. Prose never opens with it.
# A JSON-RPC error response relayed whole ('{"jsonrpc":"2.0","id":4,"error":{...}}',
# agent-shell) is one too.
_ERROR_EVENT = re.compile(
    r'\{\s*"type"\s*:\s*"(?:response\.failed|error)"\s*,'
    r'|\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*[^,{}]{1,40},\s*"error"\s*:'
)


def report_lines(text: str) -> list[str]:
    """Lines of a chunk that open with an error-report prefix, decoration stripped. A report
    line that opens a JSON body ("Internal error: {") keeps the body's lines under it. A
    chunk that opens with an agent's error-report header is that report: everything after
    the header is kept; so is a chunk that opens with a stream's failure event."""
    all_lines = text.lower().splitlines()
    first = next((n for n, line in enumerate(all_lines) if line.strip()), None)
    if first is not None and _ERROR_EVENT.match(all_lines[first].strip()):
        return [line.strip() for line in all_lines[first:] if line.strip()]
    if first is not None and (header := _REPORT_HEADER.match(all_lines[first].strip())):
        rest = [all_lines[first].strip()[header.end() :], *all_lines[first + 1 :]]
        return [line.strip() for line in rest if line.strip()]
    lines: list[str] = []
    in_body = False
    for line in all_lines:
        stripped = _REPORT_DECORATION.sub("", line)
        if _REPORT_PREFIX.match(stripped):
            lines.append(stripped)
            in_body = stripped.rstrip().endswith(("{", "["))
        elif in_body and _JSON_BODY_LINE.match(line):
            lines.append(line.strip())
        else:
            in_body = False
    return lines


# A line inside a pretty-printed JSON body: indented, closing it, or a member printed
# without indentation ('"code": -32603,', layercodedev/sled#4).
_JSON_BODY_LINE = re.compile(r"^(?:[ \t]+\S|[}\]]|\"[^\"\n]{1,80}\"\s*:)")


def undecorated_lines(text: str) -> list[str]:
    """Every non-empty line of a chunk, lowercase, decoration stripped, spaces collapsed."""
    out = []
    for line in text.lower().splitlines():
        stripped = _SPACE_RUN.sub(" ", _REPORT_DECORATION.sub("", line)).strip()
        if stripped:
            out.append(stripped)
    return out
