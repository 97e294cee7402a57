"""Compact batch replies over Ray: what a route host sends back for a HostBatcher's batch.

A RouteSnapshot pickled whole is ~0.9 KB, most of it three documents (the profile, the
latest policy snapshot and the cycle record) that the routes of a batch nearly always
share; 256 of them cross Ray's 100 KB limit for returning a value inline (a larger value
goes through the object store: several ms more per call), and pickling them costs both
sides ~30 µs per transition. So a batch reply (`WireBatch`) carries each distinct
document once, in a table, and each snapshot as the tuple of its other field values
with the table indexes of its documents (`WireSnapshot`). `unpack` rebuilds every answer
as it was: an equal RouteSnapshot with the same fields set (no validation again: the
host validated it), every other answer (an exception, a history) untouched. Documents
equal within a batch become one shared object on the caller's side: snapshots are
frozen values, and their documents are never changed in place.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from pydantic_core import PydanticSerializationError, to_json

from actors.routes.models import RouteSnapshot
from actors.routes.profiles import remembered_profile
from actors.routes.trusted import snapshot_of_validated

DOCUMENTS: Final = ("profile", "policy_snapshot", "cycle")
_FIELDS: Final = tuple(RouteSnapshot.model_fields)
_PLAIN: Final = tuple(name for name in _FIELDS if name not in DOCUMENTS)
_BIT: Final = {name: 1 << index for index, name in enumerate(_FIELDS)}
_ALL_SET: Final = (1 << len(_FIELDS)) - 1  # what a snapshot the store read or wrote has
_plain_values: Final = operator.itemgetter(*_PLAIN)


@dataclass(frozen=True, slots=True)
class WireSnapshot:
    """A snapshot without its documents: its other field values (in the model's order,
    documents left out), its documents' indexes in the batch's table, and which fields
    were set (a bit per field, in the model's order)."""

    values: tuple[Any, ...]
    documents: tuple[int, ...]
    fields_set: int


@dataclass(frozen=True, slots=True)
class WireBatch:
    """A batch's answers, each snapshot as a WireSnapshot, and the documents table."""

    answers: list[Any]
    documents: list[Any]


class _Table:
    """The distinct documents of one batch, by equality. Found first by identity (the
    answers hold every document alive while the batch is packed, so an id is not
    reused): the documents of the snapshots a round wrote are mostly shared objects
    already. Else a profile by the parsed profile its document was read as (one per
    distinct profile, actors/routes/profiles.py), another JSON document by its compact
    JSON, and anything else (a frozen model, None) by itself."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self._by_key: dict[Any, int] = {}
        self._by_id: dict[int, int] = {}

    def index(self, value: Any) -> int:
        found = self._by_id.get(id(value))
        if found is None:
            key = _key(value)
            found = self._by_key.get(key)
            if found is None:
                found = self._by_key[key] = len(self.values)
                self.values.append(value)
            self._by_id[id(value)] = found
        return found


def _key(value: Any) -> Any:
    if not isinstance(value, dict | list):
        return ("value", value)
    parsed = remembered_profile(value)
    if parsed is not None:
        return ("profile", id(parsed))  # the parse cache holds it: its id is not reused
    try:
        return ("json", to_json(value))
    except (PydanticSerializationError, ValueError):
        return ("object", id(value))  # not JSON (never stored as such): kept apart


def pack(answers: Sequence[Any]) -> WireBatch:
    """The batch's answers as they travel (see the module)."""
    table = _Table()
    packed: list[Any] = []
    for answer in answers:
        if type(answer) is not RouteSnapshot:
            packed.append(answer)
            continue
        stored = answer.__dict__
        documents = (
            table.index(stored["profile"]), table.index(stored["policy_snapshot"]),
            table.index(stored["cycle"]),
        )  # fmt: skip
        packed.append(WireSnapshot(_plain_values(stored), documents, _fields_set(answer)))
    return WireBatch(packed, table.values)


def _fields_set(snapshot: RouteSnapshot) -> int:
    names = snapshot.model_fields_set
    if len(names) == len(_FIELDS):
        return _ALL_SET
    bits = 0
    for name in names:
        bits |= _BIT[name]
    return bits


def unpack(reply: WireBatch) -> list[Any]:
    """The answers `pack` was given, rebuilt."""
    documents = reply.documents
    answers: list[Any] = []
    for answer in reply.answers:
        if type(answer) is not WireSnapshot:
            answers.append(answer)
            continue
        values = dict(zip(_PLAIN, answer.values, strict=True))
        for name, index in zip(DOCUMENTS, answer.documents, strict=True):
            values[name] = documents[index]
        answers.append(_snapshot(values, answer.fields_set))
    return answers


def _snapshot(values: dict[str, Any], fields_set: int) -> RouteSnapshot:
    names = None if fields_set == _ALL_SET else {n for n in _FIELDS if fields_set & _BIT[n]}
    return snapshot_of_validated(values, names)
