"""JSON-lines commands: one JSON object in per line, one JSON object out, errors inline.

Shared by `recovery classify` and `recovery policy evaluate` (docs/CONTRACTS.md): blank lines
give no output, and a line that cannot be read gives `{"line", "error", "field"}` while
processing goes on.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import IO, Any

LineHandler = Callable[[dict[str, Any], int], dict[str, Any]]


def line_error(number: int, message: str, field: str | None) -> dict[str, Any]:
    return {"line": number, "error": message, "field": field}


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
