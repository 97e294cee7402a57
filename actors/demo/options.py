"""The demo's settings (`recovery demo` flags)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources.abc import Traversable
from typing import Final

from catalogue.corpus import dev_corpus

# A package resource, so an installed wheel finds it too; `--corpus` gives a file instead.
DEFAULT_CORPUS: Final = dev_corpus()


@dataclass(frozen=True, slots=True)
class DemoOptions:
    sessions: int = 200
    seed: int = 7
    duration_s: float = 20.0
    drain_timeout_s: float = 80.0
    hosts: int = 2
    workers: int = 2
    corpus: Traversable = DEFAULT_CORPUS
