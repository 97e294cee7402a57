"""Loading the catalogue's fixture files for tests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from catalogue.evidence import Evidence


@dataclass(frozen=True)
class Fixture:
    source: str
    line: int
    raw: dict[str, Any]

    @property
    def label(self) -> str:
        name = self.raw.get("rule") or self.raw.get("near_miss")
        return f"{self.source}:{self.line}:{name}"

    @property
    def evidence(self) -> Evidence:
        return Evidence.model_validate(self.raw["evidence"])


def load_fixtures() -> list[Fixture]:
    folder = resources.files("catalogue") / "fixtures"
    fixtures = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".jsonl"):
            continue
        for number, line in enumerate(entry.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                fixtures.append(Fixture(entry.name, number, json.loads(line)))
    return fixtures


FIXTURES = load_fixtures()
POSITIVES = [f for f in FIXTURES if "rule" in f.raw]
NEAR_MISSES = [f for f in FIXTURES if "near_miss" in f.raw]
