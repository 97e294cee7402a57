"""JSON-lines commands: one JSON object in per line, one JSON object out, errors inline.

Shared by `recovery classify`, `recovery policy evaluate` and `recovery acp-replay`
(docs/CONTRACTS.md): blank lines give no output, and a line that cannot be read gives
`{"line", "error", "field"}` while processing goes on. Input is bounded: a line longer than
MAX_LINE_CHARS is answered as too long and skipped without being held in memory, and a
document nested deeper than MAX_DEPTH is refused before anything reads it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, Final

from actors.errors import RecoveryError
from catalogue.sanitize import sanitize
from policy.errors import FieldError

LineHandler = Callable[[dict[str, Any], int], dict[str, Any]]
MAX_LINE_CHARS: Final = 1 << 20
MAX_DEPTH: Final = 64
_CHUNK: Final = 1 << 16
_OPENERS: Final = frozenset("[{")
_CLOSERS: Final = frozenset("]}")


class LineTooLong:
    """A line of the input beyond MAX_LINE_CHARS (what is left of it was skipped)."""


def bounded_lines(source: IO[str]) -> Iterator[tuple[int, str | LineTooLong]]:
    """The numbered lines of `source`, each read at most MAX_LINE_CHARS at a time: a
    longer one comes as LineTooLong, its rest read and dropped chunk by chunk."""
    number = 0
    while True:
        line = source.readline(MAX_LINE_CHARS + 1)
        if not line:
            return
        number += 1
        if len(line) <= MAX_LINE_CHARS or line.endswith("\n"):
            yield number, line
            continue
        while not line.endswith("\n"):  # the rest of an overlong line
            line = source.readline(_CHUNK)
            if not line:
                break
        yield number, LineTooLong()


def too_deep(text: str) -> bool:
    """Whether JSON `text` nests arrays and objects deeper than MAX_DEPTH (one linear
    scan, strings skipped), so that no parser recurses into it."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:  # the usual line: no scan at all
        return False
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in _OPENERS:
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif char in _CLOSERS:
            depth -= 1
    return False


def line_error(number: int, message: str, field: str | None) -> dict[str, Any]:
    """An unreadable line's answer; its message may quote the input, so it is sanitised."""
    return {"line": number, "error": sanitize(message), "field": field}


def errors_json(errors: Iterable[FieldError]) -> list[dict[str, str | None]]:
    """Field errors as printed: their messages may quote the input, so sanitised."""
    return [{"field": e.field, "message": sanitize(e.message)} for e in errors]


def parse_line(line: str | LineTooLong, number: int) -> dict[str, Any]:
    """The JSON object on input line `number`. Raises LineRefusedError carrying that
    line's error answer (too long, too deep, not JSON, not an object)."""
    if isinstance(line, LineTooLong):
        raise LineRefusedError(
            line_error(number, f"line too long: over {MAX_LINE_CHARS} characters", None)
        )
    if too_deep(line):
        raise LineRefusedError(line_error(number, f"nested deeper than {MAX_DEPTH} levels", None))
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        message = f"not valid JSON: {exc.msg} at column {exc.colno}"
        raise LineRefusedError(line_error(number, message, None)) from None
    if not isinstance(data, dict):
        message = f"expected a JSON object, got {type(data).__name__}"
        raise LineRefusedError(line_error(number, message, None))
    return data


class LineRefusedError(RecoveryError, ValueError):
    """An input line that cannot be read; `answer` is what is printed for it."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        super().__init__(answer["error"])

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.answer,))


def answer_line(line: str | LineTooLong, number: int, handle: LineHandler) -> dict[str, Any]:
    try:
        data = parse_line(line, number)
    except LineRefusedError as refused:
        return refused.answer
    return handle(data, number)


def input_lines(source: IO[str]) -> Iterator[tuple[int, str | LineTooLong]]:
    """The non-blank lines of `source`, numbered, bounded as `bounded_lines` reads them."""
    for number, line in bounded_lines(source):
        if isinstance(line, LineTooLong) or line.strip():
            yield number, line


def map_json_lines(source: IO[str], sink: IO[str], handle: LineHandler) -> None:
    """Answer each non-blank line of `source` on `sink`, in order, flushing as it goes."""
    for number, line in input_lines(source):
        sink.write(json.dumps(answer_line(line, number, handle), ensure_ascii=False) + "\n")
        sink.flush()
