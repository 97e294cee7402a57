"""Documents many routes share, kept once: a route's profile is the same ~850 B of JSON
for every route that runs it, read and written on each of their transitions. The route
codec parses each text once (`PROFILE_DOCUMENTS`: one document object per text) and
encodes each document object once (`PROFILE_TEXTS`), so the profile parser
(actors/routes/profiles.profile_from_json) and the encoder find them by identity. The
documents are never changed in place (route snapshots are frozen values)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final


class SharedTexts:
    """Documents' JSON by object. An entry holds its document, so its id is not reused
    while it is kept; at `bound` entries the table starts again."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self._texts: dict[int, tuple[Any, str]] = {}

    def __len__(self) -> int:
        return len(self._texts)

    def text(self, value: Any, encode: Callable[[Any], str]) -> str:
        """`value`'s JSON (`encode(value)`), encoded once while kept."""
        found = self._texts.get(id(value))
        if found is not None and found[0] is value:
            return found[1]
        text = encode(value)
        if len(self._texts) >= self.bound:
            self._texts.clear()
        self._texts[id(value)] = (value, text)
        return text


class SharedDocuments:
    """Documents by their stored text, parsed once. At `bound` texts the table starts
    again."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self._documents: dict[str, Any] = {}

    def __len__(self) -> int:
        return len(self._documents)

    def get(self, text: str) -> Any:
        return self._documents.get(text)

    def put(self, text: str, document: Any) -> None:
        if len(self._documents) >= self.bound:
            self._documents.clear()
        self._documents[text] = document


# An entry is a parsed document and its text, ~3 KB: 256 of them are under 1 MiB a table.
# A fleet runs far fewer distinct profiles at once; every route's Start brings a document
# of its own that is encoded once and never seen again, and these must not make the
# tables grow with the routes (bench/timers.py's memory per idle route counts them).
PROFILE_TEXTS: Final = SharedTexts(bound=256)
PROFILE_DOCUMENTS: Final = SharedDocuments(bound=256)
