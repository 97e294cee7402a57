"""The classifier of one batch round: each distinct evidence classified once."""

from __future__ import annotations

from datetime import datetime
from typing import Final

from catalogue import Classification, Evidence, classify


class RoundClassifier:
    """catalogue.classify, once per distinct evidence: a round plans every item at the
    same `now`, and classification is a function of (evidence, now), so reports of one
    outage (the same error body from many sessions) are classified once per round."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[tuple[object, ...], Classification] = {}

    def __call__(self, evidence: Evidence, now: datetime) -> Classification:
        key = _evidence_key(evidence)
        found = self._seen.get(key)
        if found is None:
            found = self._seen[key] = classify(evidence, now)
        return found


def _evidence_key(evidence: Evidence) -> tuple[object, ...]:
    values = [getattr(evidence, name) for name in _EVIDENCE_FIELDS]
    values[_HEADERS_AT] = tuple(sorted(evidence.headers.items()))
    return (*values,)


_EVIDENCE_FIELDS: Final = tuple(Evidence.model_fields)
_HEADERS_AT: Final = _EVIDENCE_FIELDS.index("headers")
