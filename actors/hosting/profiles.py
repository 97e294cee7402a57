"""`runtime.profiles`: the installation's profile store, as an orchestrator process uses it.

    stored = await runtime.profiles.create("fleet", {"candidates": [...]}, principal="alice")
    route = runtime.route("session-42")
    snapshot = await route.start(profile_id="fleet", caller="kanban", invocation_id="turn-1")
    stored = await runtime.profiles.update("fleet", edited, expected_version=stored.version)

Each call talks to the installation's Redis directly (no route host is involved: a profile
edit is no route transition) on a connection of its own, opened and closed on the caller's
event loop, so any loop may call it. Edits are authorised first by the installation's
authoriser (`authoriser`, RECOVERY_AUTHORISER; by default every principal may edit:
actors/engine/authorisers.py), loaded in this process on first use.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Final

from actors.clock import Clock, SystemClock
from actors.engine.authorisers import Authoriser
from actors.engine.plugins import load_authoriser
from actors.engine.profile_edits import ProfileEditor
from actors.engine.settings import EngineSettings
from actors.store.profile_codec import ProfilePage, StoredProfile
from actors.store.profile_store import DEFAULT_PAGE, ProfileInput, ProfileStore
from actors.store.route_store import RouteStore

__all__ = ["RuntimeProfiles"]

CONNECTIONS: Final = 1


@dataclass
class RuntimeProfiles:
    """The profile store of the installation at `url` written with `settings` (its key
    prefix, its authoriser). Methods as ProfileEditor's (actors/engine/profile_edits.py)."""

    url: str = field(repr=False)  # it may hold a password
    settings: EngineSettings = field(repr=False)
    clock: Clock = field(default_factory=SystemClock, repr=False)
    _authoriser: Authoriser | None = field(default=None, init=False, repr=False)

    async def create(
        self, profile_id: str, document: ProfileInput, *, principal: str | None = None
    ) -> StoredProfile:
        """A new stored profile: the normalised document as stored (ProfileEditor.create)."""
        async with self._editor() as editor:
            return await editor.create(profile_id, document, principal=principal)

    async def update(
        self,
        profile_id: str,
        document: ProfileInput,
        *,
        expected_version: int,
        principal: str | None = None,
    ) -> StoredProfile:
        """The profile at `expected_version` replaced: the next version, as stored
        (ProfileEditor.update; StaleProfileVersionError when another edit came first)."""
        async with self._editor() as editor:
            return await editor.update(
                profile_id, document, expected_version=expected_version, principal=principal
            )

    async def delete(
        self,
        profile_id: str,
        *,
        expected_version: int | None = None,
        principal: str | None = None,
    ) -> None:
        """Delete the profile; the routes that follow it stop at their next decision."""
        async with self._editor() as editor:
            await editor.delete(profile_id, expected_version=expected_version, principal=principal)

    async def get(self, profile_id: str) -> StoredProfile:
        """The profile at its current version (ProfileEditor.get)."""
        async with self._editor() as editor:
            return await editor.get(profile_id)

    async def list(self, *, limit: int = DEFAULT_PAGE, after: str | None = None) -> ProfilePage:
        """One page of the stored profiles in id order (ProfileEditor.list)."""
        async with self._editor() as editor:
            return await editor.list(limit=limit, after=after)

    @asynccontextmanager
    async def _editor(self) -> AsyncIterator[ProfileEditor]:
        store = ProfileStore.connect(
            self.url, clock=self.clock, keys=self.settings.keys, max_connections=CONNECTIONS
        )
        async with store:
            yield ProfileEditor(store, self.authoriser)

    @property
    def authoriser(self) -> Authoriser:
        """The installation's authoriser, loaded on first use (PluginLoadError when its
        `module:factory` does not load here)."""
        if self._authoriser is None:
            self._authoriser = load_authoriser(
                self.settings.authoriser, recorded_task=self._recorded_task
            )
        return self._authoriser

    async def _recorded_task(self, session_id: str) -> str | None:
        """The task the session's route recorded at its start (the default authoriser's
        cancel check; a profile edit never needs it)."""
        store = RouteStore.connect(
            self.url, clock=self.clock, keys=self.settings.keys, max_connections=CONNECTIONS
        )
        async with store:
            return (await store.snapshot(session_id)).task_id
