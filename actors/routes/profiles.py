"""The profiles a route runs with, as a route stores and reads them.

A dynamic profile (policy.DynamicProfile) is an ordered list of candidates, each with its
own v1 policy document. A concrete profile is one agent under a built-in policy (the
interactive one: docs/CONTRACTS.md, `recovery policy evaluate`), run by the same evaluator.
Both are stored as JSON in the route itself, so a restarted host reads the same profile,
and an edit is a write of the route (it affects the next decision only).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError
from pydantic_core import PydanticSerializationError, to_json

from actors.errors import CorruptProfileError
from catalogue.codes import ErrorClass
from policy import (
    BUILTIN_POLICIES,
    POLICY_CLASSES,
    DynamicProfile,
    NamedPolicy,
    PolicyDocument,
)
from policy.document import ACCOUNT_LABEL_PATTERN, MAX_CANDIDATE_ID_CHARS

BuiltinPolicyName = Literal["interactive"]

PROFILE_CACHE_SIZE: Final = 256
"""How many distinct stored profiles stay parsed (with their candidates) between
decisions: a route host's routes mostly share a few profiles."""
DOCUMENTS_KEPT: Final = 8192
"""How many stored profile documents (by identity) remember their parsed profile: a round
asks for the profile of each of its snapshots several times (plan, circuits, notices),
and of the snapshot the transition wrote, which holds the same document. About two
rounds of the largest batches."""


class ConcreteProfile(BaseModel):
    """One agent (provider, model) under a built-in policy; it has no other candidate."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["concrete"] = "concrete"
    id: str = Field(min_length=1, max_length=MAX_CANDIDATE_ID_CHARS)
    agent: str = Field(min_length=1)
    provider: str | None = None
    model: str | None = None
    account: str | None = Field(default=None, pattern=ACCOUNT_LABEL_PATTERN)
    policy: BuiltinPolicyName = "interactive"


RouteProfile = DynamicProfile | ConcreteProfile


@dataclass(frozen=True, slots=True)
class RouteCandidate:
    """One candidate of a route's profile, at its place in the profile's order."""

    index: int
    id: str
    enabled: bool
    policy: PolicyDocument | NamedPolicy
    # The policy snapshot, computed once for a candidate of a cached profile (the
    # snapshot is JSON that nothing mutates, so the routes sharing the profile share it).
    snapshot: JsonValue = field(default=None, compare=False, repr=False)

    def policy_snapshot(self) -> JsonValue:
        """The policy as the route and its history store it: a v1 document's JSON, or for
        a built-in policy its name, document and the limits documents do not expose."""
        if self.snapshot is not None:
            return self.snapshot
        return self._policy_snapshot()

    def _policy_snapshot(self) -> JsonValue:
        if isinstance(self.policy, PolicyDocument):
            document: JsonValue = self.policy.model_dump(mode="json")
            return document
        return {
            "builtin": self.policy.name,
            "document": self.policy.document.model_dump(mode="json"),
            "delay_cap_seconds": self.policy.limits.delay_cap_seconds,
            "reset_due_now_counts": self.policy.limits.reset_due_now_counts,
        }

    def retry_budget(self, error_class: ErrorClass) -> int:
        """The retry budget for a class (0 for classes no policy configures)."""
        if error_class not in POLICY_CLASSES:
            return 0
        document = self.policy if isinstance(self.policy, PolicyDocument) else self.policy.document
        section = document.for_class(error_class)
        return section.retry.max_retries if section.retry.enabled else 0


def candidates_of(profile: RouteProfile) -> tuple[RouteCandidate, ...]:
    parsed = _PROFILES.parsed(profile)
    if parsed is not None:
        return parsed.candidates
    return _candidates(profile)


def _candidates(profile: RouteProfile) -> tuple[RouteCandidate, ...]:
    if isinstance(profile, ConcreteProfile):
        return (RouteCandidate(0, profile.id, True, BUILTIN_POLICIES[profile.policy]),)
    return tuple(
        RouteCandidate(index, c.id, c.enabled, c.policy)
        for index, c in enumerate(profile.candidates)
    )


def find_candidate(profile: RouteProfile, candidate_id: str | None) -> RouteCandidate | None:
    return next((c for c in candidates_of(profile) if c.id == candidate_id), None)


def first_eligible(profile: RouteProfile, excluded: Iterable[str] = ()) -> RouteCandidate | None:
    """The first enabled candidate in profile order that is not excluded."""
    return next_eligible(profile, None, excluded)


def next_eligible(
    profile: RouteProfile, after: str | None, excluded: Iterable[str] = ()
) -> RouteCandidate | None:
    """The next enabled, not excluded candidate after the one with id `after` in profile
    order, wrapping around to the start (never `after` itself). With `after` None or no
    longer in the profile: the first such candidate."""
    candidates = candidates_of(profile)
    out = frozenset(excluded) | ({after} if after is not None else set())
    start = next((c.index + 1 for c in candidates if c.id == after), 0)
    ordered = candidates[start:] + candidates[:start]
    return next((c for c in ordered if c.enabled and c.id not in out), None)


def profile_json(profile: RouteProfile) -> JsonValue:
    stored: JsonValue = profile.model_dump(mode="json")
    return stored


@dataclass(frozen=True, slots=True)
class _Parsed:
    stored: JsonValue  # the text's own JSON value, never handed out
    profile: RouteProfile
    candidates: tuple[RouteCandidate, ...]


class _ProfileCache:
    """Stored profiles already validated, by their compact JSON text, least recently used
    evicted first. A hit also needs the stored value to equal the text's own JSON value,
    so a value that is not plain JSON (a tuple, a datetime: to_json writes them as JSON
    too) is always validated as before. Profiles and their candidates are frozen, so one
    parse serves every route that stores the same profile. Also found by the parsed
    profile's identity, for its candidates."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._by_text: OrderedDict[bytes, _Parsed] = OrderedDict()
        self._by_id: dict[int, _Parsed] = {}
        self._lock = threading.Lock()

    def get(self, text: bytes, stored: JsonValue) -> RouteProfile | None:
        with self._lock:
            parsed = self._by_text.get(text)
            if parsed is None:
                return None
            self._by_text.move_to_end(text)
        return parsed.profile if parsed.stored == stored else None

    def parsed(self, profile: RouteProfile) -> _Parsed | None:
        parsed = self._by_id.get(id(profile))
        # Only a cached profile is found: the cache holds it, so its id is not reused.
        return parsed if parsed is not None and parsed.profile is profile else None

    def put(self, text: bytes, profile: RouteProfile) -> None:
        candidates = tuple(
            RouteCandidate(c.index, c.id, c.enabled, c.policy, c.policy_snapshot())
            for c in _candidates(profile)
        )
        parsed = _Parsed(json.loads(text), profile, candidates)
        with self._lock:
            if text in self._by_text:
                return
            self._by_text[text] = parsed
            self._by_id[id(profile)] = parsed
            while len(self._by_text) > self._size:
                _, evicted = self._by_text.popitem(last=False)
                del self._by_id[id(evicted.profile)]


_PROFILES: Final = _ProfileCache(PROFILE_CACHE_SIZE)


class _DocumentMemo:
    """The parsed profile of a stored document, by the document's identity: the first
    `profile_from_json` of a snapshot's profile encodes and looks it up (or validates it),
    the next ones of the same document are one dictionary lookup. The memo holds the
    document, so its id is not reused while remembered; snapshots are frozen values and
    their documents are never changed in place. Least recently added evicted first."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._by_id: OrderedDict[int, tuple[JsonValue, RouteProfile]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, stored: JsonValue) -> RouteProfile | None:
        found = self._by_id.get(id(stored))
        return found[1] if found is not None and found[0] is stored else None

    def put(self, stored: JsonValue, profile: RouteProfile) -> None:
        with self._lock:
            self._by_id[id(stored)] = (stored, profile)
            while len(self._by_id) > self._size:
                self._by_id.popitem(last=False)


_DOCUMENTS: Final = _DocumentMemo(DOCUMENTS_KEPT)


def remembered_profile(stored: JsonValue) -> RouteProfile | None:
    """The profile this very document was parsed as, while remembered (None: not parsed
    lately, or not a valid profile). Equal documents give the same profile object."""
    return _DOCUMENTS.get(stored)


def profile_from_json(route_id: str, stored: JsonValue) -> RouteProfile:
    """The profile a route stored. A route without one, or with one that is not a JSON
    object or not a valid profile, raises CorruptProfileError (never a guess at a
    policy). A profile read before is not validated again (see _ProfileCache); an
    unreadable one is never cached."""
    if stored is None:
        raise CorruptProfileError(route_id, "the route stores no profile")
    if not isinstance(stored, dict):
        raise CorruptProfileError(route_id, f"expected a JSON object, got {_kind(stored)}")
    remembered = _DOCUMENTS.get(stored)
    if remembered is not None:
        return remembered
    try:
        text: bytes | None = to_json(stored)
    except (PydanticSerializationError, ValueError):
        text = None  # not JSON at all (say, a circular value): validation says why
    if text is not None:
        cached = _PROFILES.get(text, stored)
        if cached is not None:
            _DOCUMENTS.put(stored, cached)
            return cached
    profile = _validated_profile(route_id, stored)
    if text is not None:
        _PROFILES.put(text, profile)
        _DOCUMENTS.put(stored, profile)
    return profile


def _validated_profile(route_id: str, stored: dict[str, JsonValue]) -> RouteProfile:
    try:
        if stored.get("kind") == "concrete":
            return ConcreteProfile.model_validate(stored)
        return DynamicProfile.model_validate(stored)
    except ValidationError as error:
        raise CorruptProfileError(route_id, f"not a valid profile: {error}") from error


def _kind(stored: JsonValue) -> str:
    """What a stored JSON value is, in JSON's words."""
    match stored:
        case bool():
            return "a boolean"
        case int() | float():
            return "a number"
        case str():
            return "a string"
        case list():
            return "an array"
        case _:
            return type(stored).__name__
