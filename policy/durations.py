"""Durations in words for reasons and previews: `5 s`, `1 min 30 s`, `6 h`, `7 d`."""

from __future__ import annotations

import math

_UNITS = (("d", 86400), ("h", 3600), ("min", 60), ("s", 1))


def format_duration(seconds: float) -> str:
    """Whole units from days down to seconds; sub-minute fractions keep their decimals."""
    if not math.isfinite(seconds):
        return str(seconds)
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if seconds < 60 and not float(seconds).is_integer():
        return f"{seconds:.3g} s"
    remaining = round(seconds)
    parts: list[str] = []
    for name, size in _UNITS:
        count, remaining = divmod(remaining, size)
        if count:
            parts.append(f"{count} {name}")
    return " ".join(parts) or "0 s"
