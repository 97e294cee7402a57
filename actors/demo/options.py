"""The demo's settings (`recovery demo` flags)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from actors.jobs.workers import PROJECT_ROOT

DEFAULT_CORPUS: Final = PROJECT_ROOT / "bench" / "data" / "real_errors.dev.jsonl"


@dataclass(frozen=True, slots=True)
class DemoOptions:
    sessions: int = 200
    seed: int = 7
    duration_s: float = 20.0
    drain_timeout_s: float = 80.0
    hosts: int = 2
    workers: int = 2
    corpus: Path = DEFAULT_CORPUS
