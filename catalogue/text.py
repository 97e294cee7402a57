"""Text views the rules match against.

Provider errors reach us hard-wrapped by terminals, padded, JSON-escaped and in any case.
Rules are written against a lowercase view with whitespace collapsed (`flat`); a second
view with line breaks and their indentation removed (`joined`) recovers tokens a terminal
split mid-word ("api_\n    error"). Tokens of both views feed the rule index, so the cost of
finding candidate rules depends on the text's length, not on the number of rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SPACE_RUN = re.compile(r"\s+")
_LINE_BREAK = re.compile(r"[ \t]*\r?\n[ \t]*")
TOKEN = re.compile(r"\w+")

# Where a status code is stated in prose rather than given as a field. First match wins;
# only 4xx and 5xx count.
_STATUS_IN_TEXT = re.compile(
    r"(?:status(?: code)?(?: is)?[:= ]\s*\(?|(?:error )?code\"?(?: is)?:?\s*|"
    r"unexpected status |http(?:/[12](?:\.[01])?)?[ :]\s*|"
    r"httpstatuscode\"?:\s*|<status:\s*|error:?\s*\(?|message:\s*|^|\n|\[)"
    r"([45]\d\d)(?!\d|[.,]\d)"
)
_STATUS_PHRASE = re.compile(
    r"\b([45]\d\d) (?:too many requests|service unavailable|bad gateway|gateway timeout|"
    r"internal server error|unauthorized|forbidden|not found|bad request|payment required|"
    r"request entity too large|overloaded)"
)


@dataclass(frozen=True, slots=True)
class TextViews:
    flat: str
    joined: str | None
    tokens: frozenset[str]

    def views(self) -> tuple[str, ...]:
        return (self.flat,) if self.joined is None else (self.flat, self.joined)


def make_views(text: str) -> TextViews:
    lowered = text.lower()
    flat = _SPACE_RUN.sub(" ", lowered).strip()
    tokens = set(TOKEN.findall(flat))
    joined: str | None = None
    if "\n" in lowered:
        candidate = _SPACE_RUN.sub(" ", _LINE_BREAK.sub("", lowered)).strip()
        if candidate != flat:
            joined = candidate
            tokens.update(TOKEN.findall(joined))
    return TextViews(flat, joined, frozenset(tokens))


def status_in_text(lowered: str) -> int | None:
    """An HTTP status stated in the text ("API Error: 529", "status code 429", "[503 ]")."""
    match = _STATUS_IN_TEXT.search(lowered) or _STATUS_PHRASE.search(lowered)
    return int(match.group(1)) if match else None


# An agent message chunk is evidence only when a line of it is itself an error report.
_REPORT_DECORATION = re.compile(r"^[\s●⏺⎿✕✖✗✘■•·│>*\-\[]*")
_REPORT_PREFIX = re.compile(
    r"(?:api error|error|fatal|错误|ошибка|erreur|fehler)\b\s*[:(\[]|api error\b"
)


def report_lines(text: str) -> list[str]:
    """Lines of a chunk that open with an error-report prefix, decoration stripped."""
    lines = []
    for line in text.lower().splitlines():
        stripped = _REPORT_DECORATION.sub("", line)
        if _REPORT_PREFIX.match(stripped):
            lines.append(stripped)
    return lines


def undecorated_lines(text: str) -> list[str]:
    """Every non-empty line of a chunk, lowercase, decoration stripped, spaces collapsed."""
    out = []
    for line in text.lower().splitlines():
        stripped = _SPACE_RUN.sub(" ", _REPORT_DECORATION.sub("", line)).strip()
        if stripped:
            out.append(stripped)
    return out
