"""Stored profiles <-> their Redis hash (`<prefix>:profile:<id>`), and the models the
profile store answers with.

The hash is plain text for `redis-cli HGETALL`: `id`, `version` (a whole number >= 1),
`document` (the normalised v1 profile, compact JSON), `created_at`, `updated_at` (ISO-8601
UTC); a deleted profile keeps only `id`, `version`, `deleted_at` and `updated_at`. A
document is read strictly: a normalised v1 dynamic profile or nothing. A legacy document
(candidate `rules`), one written around the store, or damaged data reads as an
InvalidStoredProfileError naming what is wrong and what to do; it is never normalised on
read, so it never authorises work.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from typing import Final

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, JsonValue, ValidationError
from pydantic_core import to_json

from actors.keys import ProfileId
from actors.routes.profile_board import ProfileRead, ProfileRevision
from actors.routes.profile_errors import InvalidStoredProfileError, ProfileNotFoundError
from policy import DynamicProfile, PolicyError, parse_profile

PARSED_DOCUMENTS: Final = 256
"""How many distinct stored documents stay parsed: rounds read the same few profiles."""
SHOWN_ERRORS: Final = 3

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class StoredProfile(BaseModel):
    """A stored profile at its current version: the normalised document every route that
    follows it decides with from its next decision on."""

    model_config = _FROZEN

    profile_id: ProfileId
    version: int = Field(ge=1)
    document: DynamicProfile
    created_at: AwareDatetime | None = None
    updated_at: AwareDatetime | None = None


class UnreadableProfile(BaseModel):
    """A stored profile that cannot be decided from, as a listing shows it."""

    model_config = _FROZEN

    profile_id: ProfileId
    version: int | None = None
    reason: str


class ProfilePage(BaseModel):
    """One page of the stored profiles in id order: the readable ones, the unreadable
    ones (each with what to do), and the cursor of the next page (None: the last)."""

    model_config = _FROZEN

    profiles: tuple[StoredProfile, ...] = ()
    unreadable: tuple[UnreadableProfile, ...] = ()
    next_cursor: ProfileId | None = None


def document_text(profile: DynamicProfile) -> str:
    """The stored text of a normalised document: compact JSON of its JSON dump."""
    return to_json(profile.model_dump(mode="json")).decode()


def decode_profile(profile_id: str, raw: Mapping[str, str]) -> StoredProfile:
    """The stored profile in hash `raw`; ProfileNotFoundError for none or a deleted one,
    InvalidStoredProfileError for one that cannot be decided from."""
    if not raw:
        raise ProfileNotFoundError(profile_id)
    version = _version(raw.get("version", ""))
    if "deleted_at" in raw:
        raise ProfileNotFoundError(
            profile_id,
            f"profile {profile_id!r} was deleted (at version {raw.get('version') or '?'}): "
            "create it again, or start the route fresh with another profile",
        )
    if version is None:
        problem = f"its version {_shown(raw.get('version', ''))} is no whole number >= 1"
        raise InvalidStoredProfileError(profile_id, None, problem)
    text = raw.get("document", "")
    parsed = parsed_document(text) if text else "it holds no document"
    if isinstance(parsed, str):
        raise InvalidStoredProfileError(profile_id, version, parsed)
    return StoredProfile(
        profile_id=profile_id, version=version, document=parsed,
        created_at=stored_time(raw.get("created_at")),
        updated_at=stored_time(raw.get("updated_at")),
    )  # fmt: skip


def revision_read(profile_id: str, raw: Mapping[str, str]) -> ProfileRead:
    """What a round reads of the profile: its revision (with its JSON dump, made once
    per stored text for every route that copies it), or why it cannot be decided from."""
    try:
        stored = decode_profile(profile_id, raw)
    except (ProfileNotFoundError, InvalidStoredProfileError) as error:
        return error
    dumped = _dumped(raw["document"])
    return ProfileRevision(profile_id, stored.version, stored.document, dumped)


@lru_cache(maxsize=PARSED_DOCUMENTS)
def _dumped(text: str) -> JsonValue:
    """The JSON dump of the (valid) stored document `text`'s profile."""
    parsed = parsed_document(text)
    assert not isinstance(parsed, str)  # decode_profile refused an invalid one first
    document: JsonValue = parsed.model_dump(mode="json")
    return document


@lru_cache(maxsize=PARSED_DOCUMENTS)
def parsed_document(text: str) -> DynamicProfile | str:
    """A stored document's profile, or what is wrong with it (a pure function of the
    text, so one parse serves every round that reads the same version)."""
    if not _is_utf8(text):
        return "its document is not UTF-8 text"
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as error:
        return f"its document is not JSON: {_shown(str(error))}"
    legacy = _legacy_rules(data)
    if legacy is not None:
        return f"it holds legacy rules at {legacy}, which only a write normalises"
    try:
        return DynamicProfile.model_validate(data)
    except ValidationError as error:
        return _problems(data, error)


def _legacy_rules(data: object) -> str | None:
    """Where a document holds legacy candidate rules (the first such field), if it does."""
    candidates = data.get("candidates") if isinstance(data, dict) else None
    for index, candidate in enumerate(candidates if isinstance(candidates, list) else []):
        if isinstance(candidate, dict) and "rules" in candidate:
            return f"candidates[{index}].rules"
    return None


def _problems(data: object, error: ValidationError) -> str:
    """The field-addressed problems of an invalid document, the first few of them."""
    try:
        parse_profile(data)
    except PolicyError as refused:
        shown = "; ".join(str(e) for e in refused.errors[:SHOWN_ERRORS])
        more = len(refused.errors) - SHOWN_ERRORS
        return shown + (f"; and {more} more" if more > 0 else "")
    first = error.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "document"
    return f"{where}: {first.get('msg', 'invalid')}"


def _version(text: str) -> int | None:
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        return None
    return int(text)


def stored_time(text: str | None) -> datetime | None:
    """A stored time, or None when it is missing or unreadable (times describe a profile;
    they never decide anything)."""
    try:
        moment = datetime.fromisoformat(text) if text else None
    except ValueError:
        return None
    return moment if moment is not None and moment.tzinfo is not None else None


def _is_utf8(text: str) -> bool:
    """Whether text read with `surrogateescape` was valid UTF-8 in Redis."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _shown(value: str) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:59] + "…"
