"""The profile store as an orchestrator (or the HTTP API) uses it: every edit authorised
first, then validated and written (actors/store/profile_store.py).

    editor = ProfileEditor(store, authoriser)
    stored = await editor.create("fleet", {"candidates": [...]}, principal="alice")
    stored = await editor.update("fleet", changed, expected_version=stored.version)
    page = await editor.list()
    await editor.delete("fleet", expected_version=stored.version)

An edit asks the authoriser (actors/engine/authorisers.py, `authorise_profile_edit`)
before anything is read or written: ProfileEditDeniedError, with no effect. Reads need no
authorisation, as a route snapshot needs none.
"""

from __future__ import annotations

from actors.engine.authorisers import Authoriser, ProfileEditAuthoriser, require_profile_edit
from actors.keys import valid_profile_id
from actors.store.profile_codec import ProfilePage, StoredProfile
from actors.store.profile_store import DEFAULT_PAGE, ProfileInput, ProfileStore

__all__ = ["ProfileEditor"]


class ProfileEditor:
    """Create, update, read, list and delete stored profiles, edits authorised."""

    def __init__(self, store: ProfileStore, authoriser: Authoriser | ProfileEditAuthoriser) -> None:
        self.store = store
        self.authoriser = authoriser

    async def create(
        self, profile_id: str, document: ProfileInput, *, principal: str | None = None
    ) -> StoredProfile:
        """A new stored profile (version 1, or after a delete the next version): the
        normalised document as stored. Raises ProfileEditDeniedError, InvalidIdentifierError
        for an id outside `[A-Za-z0-9._-]{1,128}`, PolicyError with every problem of the
        document (addressed by field), ProfileExistsError."""
        await self._authorise("create", profile_id, principal)
        return await self.store.create(profile_id, document)

    async def update(
        self,
        profile_id: str,
        document: ProfileInput,
        *,
        expected_version: int,
        principal: str | None = None,
    ) -> StoredProfile:
        """Replace the profile at `expected_version` (the version you read): the next
        version, normalised, as stored. Routes that follow it use it from their next
        decision on. Raises ProfileEditDeniedError, PolicyError, ProfileNotFoundError, and
        StaleProfileVersionError when another edit came first (nothing written)."""
        await self._authorise("update", profile_id, principal)
        return await self.store.update(profile_id, document, expected_version=expected_version)

    async def delete(
        self,
        profile_id: str,
        *,
        expected_version: int | None = None,
        principal: str | None = None,
    ) -> None:
        """Delete the profile (at `expected_version` when given); the routes that follow it
        stop at their next decision, naming it. Raises ProfileEditDeniedError,
        ProfileNotFoundError, StaleProfileVersionError."""
        await self._authorise("delete", profile_id, principal)
        await self.store.delete(profile_id, expected_version=expected_version)

    async def get(self, profile_id: str) -> StoredProfile:
        """The profile at its current version. Raises ProfileNotFoundError, and
        InvalidStoredProfileError (saying what to do) for a stored document that cannot
        be decided from (a legacy or invalid one)."""
        return await self.store.get(profile_id)

    async def list(self, *, limit: int = DEFAULT_PAGE, after: str | None = None) -> ProfilePage:
        """Up to `limit` stored profiles in id order after the id `after` (a page's
        `next_cursor`), the unreadable ones apart."""
        return await self.store.list(limit=limit, after=after)

    async def _authorise(self, action: str, profile_id: str, principal: str | None) -> None:
        valid_profile_id(profile_id)  # an id that could name nothing is refused as such
        await require_profile_edit(self.authoriser, action, profile_id, principal)
