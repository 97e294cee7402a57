"""JSON-lines commands: one JSON object in per line, one JSON object out, errors inline.

Shared by `recovery classify` and `recovery policy evaluate` (docs/CONTRACTS.md): blank lines
give no output, and a line that cannot be read gives `{"line", "error", "field"}` while
processing goes on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import IO, Any

from catalogue.sanitize import sanitize
from policy.errors import FieldError

LineHandler = Callable[[dict[str, Any], int], dict[str, Any]]


def line_error(number: int, message: str, field: str | None) -> dict[str, Any]:
    """An unreadable line's answer; its message may quote the input, so it is sanitised."""
    return {"line": number, "error": sanitize(message), "field": field}


def errors_json(errors: Iterable[FieldError]) -> list[dict[str, str | None]]:
    """Field errors as printed: their messages may quote the input, so sanitised."""
    return [{"field": e.field, "message": sanitize(e.message)} for e in errors]


def answer_line(line: str, number: int, handle: LineHandler) -> dict[str, Any]:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        return line_error(number, f"not valid JSON: {exc.msg} at column {exc.colno}", None)
    if not isinstance(data, dict):
        return line_error(number, f"expected a JSON object, got {type(data).__name__}", None)
    return handle(data, number)


def map_json_lines(source: IO[str], sink: IO[str], handle: LineHandler) -> None:
    """Answer each non-blank line of `source` on `sink`, in order, flushing as it goes."""
    for number, line in enumerate(source, 1):
        if not line.strip():
            continue
        sink.write(json.dumps(answer_line(line, number, handle), ensure_ascii=False) + "\n")
        sink.flush()
