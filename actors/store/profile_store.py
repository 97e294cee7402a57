"""The profile store: versioned dynamic profiles in Redis (docs/CONTRACTS.md, Profiles).

    <prefix>:profile:<id>   hash   the profile (actors/store/profile_codec.py)
    <prefix>:profiles       zset   ids of the stored profiles, each scored 0 (listed by id)

Create and update validate the document (policy.parse_profile: every error at once,
addressed by field, PolicyError), normalise legacy candidate rules once, and store the
normalised v1 document, which they return. Every write is one run of
`lua/profile_write.lua`: it checks that the profile exists (or not, for a create) and is
at the expected version, then writes the hash and the index together. Each update bumps
the version by one; versions never repeat, not even across a delete and a create.

Reads decode strictly (a legacy or invalid stored document is an
InvalidStoredProfileError saying what to do). Authorisation is not this store's: the
engine's ProfileEditor (actors/engine/profile_edits.py) asks the authoriser first.
Failures of Redis itself raise StoreUnavailableError; nothing else happens.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Self

from redis.asyncio import Redis
from redis.exceptions import RedisError

from actors.clock import Clock
from actors.errors import (
    InvalidCommandError,
    InvalidIdentifierError,
    StoreUnavailableError,
    error_text,
)
from actors.keys import KeySpace, valid_profile_id
from actors.routes.profile_board import ProfileRead
from actors.routes.profile_errors import (
    InvalidStoredProfileError,
    ProfileExistsError,
    ProfileNotFoundError,
    StaleProfileVersionError,
)
from actors.store.pool import OwnsItsClient, bounded_client
from actors.store.profile_codec import (
    ProfilePage,
    StoredProfile,
    UnreadableProfile,
    decode_profile,
    document_text,
    revision_read,
    stored_time,
)
from actors.store.replies import reply_text, reply_texts
from actors.store.scripts import LoadedScript, run_script
from policy import DynamicProfile, parse_profile
from policy.decisions import utc_iso

DEFAULT_PAGE: Final = 100
MAX_PAGE: Final = 1000
DEFAULT_CONNECTIONS: Final = 4
DEFAULT_TIMEOUT_S: Final = 5.0

ProfileInput = DynamicProfile | Mapping[str, Any]
"""A profile to store: a DynamicProfile, or its parsed JSON (legacy candidate rules
allowed: they are normalised once, here)."""


def _unavailable(operation: str, error: BaseException) -> StoreUnavailableError:
    return StoreUnavailableError(f"profiles {operation}", error_text(error))


def normalised(document: ProfileInput) -> DynamicProfile:
    """The normalised v1 profile of `document`, or PolicyError listing every problem,
    each addressed by field (`candidates[2].hard.retry.max_retries`)."""
    data = document.model_dump(mode="json") if isinstance(document, DynamicProfile) else document
    return parse_profile(data)


class ProfileStore(OwnsItsClient):
    """Async access to the stored profiles of one Redis, under one key prefix."""

    def __init__(
        self,
        client: Redis,
        *,
        clock: Clock,
        keys: KeySpace | None = None,
        owns_client: bool = False,
    ) -> None:
        self.keys = keys or KeySpace()
        self._client = client
        self._clock = clock
        self._owns_client = owns_client
        self._write = LoadedScript.named("profile_write")

    @classmethod
    def connect(
        cls,
        url: str,
        *,
        clock: Clock,
        keys: KeySpace | None = None,
        max_connections: int = DEFAULT_CONNECTIONS,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> Self:
        """A store with its own bounded pool (closed with the store)."""
        client = bounded_client(url, max_connections=max_connections, timeout_s=timeout_s)
        return cls(client, clock=clock, keys=keys, owns_client=True)

    def _own_client(self) -> Redis:
        return self._client

    # Edits

    async def create(self, profile_id: str, document: ProfileInput) -> StoredProfile:
        """Store a new profile at version 1 (or, after a delete, the deleted version + 1);
        the normalised document as stored. Raises PolicyError (every problem), and
        ProfileExistsError when it is stored already."""
        valid_profile_id(profile_id)  # refused before the document is looked at
        profile = normalised(document)
        written = await self._run("create", profile_id, "", document_text(profile))
        if written.status == "exists":
            raise ProfileExistsError(profile_id, _number(written.version) or 0)
        return written.stored(profile_id, profile)

    async def update(
        self, profile_id: str, document: ProfileInput, *, expected_version: int
    ) -> StoredProfile:
        """Replace the profile at `expected_version` with `document`, at the next version;
        the normalised document as stored. Every route that follows it decides with it
        from its next decision on. Raises PolicyError, ProfileNotFoundError, and
        StaleProfileVersionError when another version is stored (nothing written)."""
        valid_profile_id(profile_id)
        expected = _expected(expected_version)
        profile = normalised(document)
        written = await self._run("update", profile_id, expected, document_text(profile))
        _refuse(profile_id, written, expected_version)
        return written.stored(profile_id, profile)

    async def delete(self, profile_id: str, *, expected_version: int | None = None) -> None:
        """Delete the profile (at `expected_version`, when given): routes that follow it
        stop at their next decision. Raises ProfileNotFoundError, StaleProfileVersionError."""
        expected = "" if expected_version is None else _expected(expected_version)
        _refuse(profile_id, await self._run("delete", profile_id, expected, ""), expected_version)

    # Reads

    async def get(self, profile_id: str) -> StoredProfile:
        """The profile at its current version. Raises ProfileNotFoundError, and
        InvalidStoredProfileError for a stored document that cannot be decided from."""
        key = self.keys.profile(profile_id)
        try:
            raw = await self._client.hgetall(key)
        except RedisError as error:
            raise _unavailable("get", error) from error
        return decode_profile(profile_id, reply_texts(raw))

    async def list(self, *, limit: int = DEFAULT_PAGE, after: str | None = None) -> ProfilePage:
        """Up to `limit` (1..1000) stored profiles in id order, after the id `after` (a
        page's `next_cursor`); the unreadable ones are listed apart, with what to do."""
        if type(limit) is not int or not 1 <= limit <= MAX_PAGE:
            raise InvalidCommandError("limit", limit, f"a whole number in 1..{MAX_PAGE}")
        start = "-" if after is None else f"({valid_profile_id(after)}"
        try:
            members = await self._client.zrangebylex(self.keys.profiles, start, "+", 0, limit)
        except RedisError as error:
            raise _unavailable("list", error) from error
        found = [reply_text(member) for member in members]
        hashes = await self._hashes(_valid_ids(found), "list")
        profiles: list[StoredProfile] = []
        unreadable: list[UnreadableProfile] = []
        for profile_id, raw in hashes.items():
            try:
                profiles.append(decode_profile(profile_id, raw))
            except ProfileNotFoundError:
                continue  # deleted between the two reads
            except InvalidStoredProfileError as error:
                unreadable.append(UnreadableProfile(
                    profile_id=profile_id, version=error.version, reason=error.detail
                ))  # fmt: skip
        cursor = found[-1] if len(found) == limit else None
        return ProfilePage(
            profiles=tuple(profiles), unreadable=tuple(unreadable), next_cursor=cursor
        )

    async def revisions(
        self, profile_ids: Iterable[str], *, operation: str = "revisions"
    ) -> dict[str, ProfileRead]:
        """The current revision of each profile (or why it cannot be decided from), read
        in one pipeline: what a route round plans with. Ids that could not name a
        profile are left out (never turned into keys)."""
        hashes = await self._hashes(_valid_ids(profile_ids), operation)
        return {profile_id: revision_read(profile_id, raw) for profile_id, raw in hashes.items()}

    async def _hashes(
        self, profile_ids: Sequence[str], operation: str
    ) -> dict[str, dict[str, str]]:
        if not profile_ids:
            return {}
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                for profile_id in profile_ids:
                    pipe.hgetall(self.keys.profile(profile_id))
                replies: list[Any] = await pipe.execute()
        except RedisError as error:
            raise _unavailable(operation, error) from error
        return {i: reply_texts(raw) for i, raw in zip(profile_ids, replies, strict=True)}

    # The one write script

    async def _run(self, action: str, profile_id: str, expected: str, document: str) -> _Written:
        keys = [self.keys.profile(profile_id), self.keys.profiles]
        now = self._clock.now()
        argv = [action, profile_id, expected, document, utc_iso(now)]
        try:
            reply = await run_script(self._client, self._write, keys, argv)
        except RedisError as error:
            raise _unavailable(action, error) from error
        status, version, created = (reply_text(part) for part in reply)
        return _Written(status, version, created, now)


@dataclass(frozen=True, slots=True)
class _Written:
    """profile_write.lua's answer: its status, the version (as stored, text) and, once
    written, the profile's creation time; `at` is the write's own time."""

    status: str
    version: str
    created_at: str
    at: datetime

    def stored(self, profile_id: str, profile: DynamicProfile) -> StoredProfile:
        """The profile as this write stored it."""
        return StoredProfile(
            profile_id=profile_id, version=int(self.version), document=profile,
            created_at=stored_time(self.created_at), updated_at=self.at,
        )  # fmt: skip


def _refuse(profile_id: str, written: _Written, expected: int | None) -> None:
    """Raise why a fenced write was refused (nothing was written), if it was."""
    if written.status == "missing":
        raise ProfileNotFoundError(profile_id)
    if written.status == "stale":
        actual = _number(written.version)
        if actual is None or expected is None:
            raise InvalidStoredProfileError(
                profile_id, None, f"its version {written.version!r} is no whole number >= 1: "
                "delete it (without an expected version) and create it again",
            )  # fmt: skip
        raise StaleProfileVersionError(profile_id, expected, actual)


def _expected(version: int) -> str:
    if type(version) is not int or version < 1:
        raise InvalidCommandError("expected_version", version, "a whole number >= 1")
    return str(version)


def _number(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() else None


def _valid_ids(profile_ids: Iterable[str]) -> list[str]:
    valid: list[str] = []
    for profile_id in dict.fromkeys(profile_ids):
        try:
            valid.append(valid_profile_id(profile_id))
        except InvalidIdentifierError:
            continue
    return valid
