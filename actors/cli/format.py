"""Aligned text for the inspection commands: relative deadlines and tables."""

from collections.abc import Sequence
from datetime import UTC, datetime


def relative(deadline: datetime, now: datetime) -> str:
    """ "in 4 s", "overdue 2 s" or "due now", in whole seconds (minutes, hours beyond)."""
    seconds = round((deadline - now).total_seconds())
    if seconds == 0:
        return "due now"
    span = _span(abs(seconds))
    return f"in {span}" if seconds > 0 else f"overdue {span}"


def _span(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        minutes, rest = divmod(seconds, 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, rest = divmod(seconds, 3600)
    minutes = rest // 60
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def due_in_s(deadline: datetime | None, now: datetime) -> float | None:
    """Seconds until `deadline` (negative when overdue), for JSON output."""
    return None if deadline is None else round((deadline - now).total_seconds(), 3)


def when(moment: datetime | None) -> str:
    return "-" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cell(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """Left-aligned columns two spaces apart; the last column is not padded."""
    cells = [list(headers), *([cell(v) for v in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers) - 1)]
    lines = []
    for row in cells:
        padded = [text.ljust(width) for text, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*padded, row[-1]]).rstrip())
    return lines
