"""The profile editor: every edit is authorised before anything is read or written, reads
need no authorisation; on fakeredis and the session's real Redis."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from actors.engine.authorisers import RecordedTaskAuthoriser
from actors.engine.profile_edits import ProfileEditor
from actors.errors import InvalidIdentifierError
from actors.routes.profile_errors import ProfileEditDeniedError
from actors.store.profile_store import ProfileStore
from policy import PolicyError
from tests.actors.conftest import Backend
from tests.actors.engine.plugin_samples import EditorsOnly
from tests.actors.route_scenarios import seed_profile

FLEET = "fleet"


async def no_task(session_id: str) -> str | None:
    return None


def run(backend: Backend, scenario: Callable[[ProfileEditor, Backend], Awaitable[None]]) -> None:
    async def main() -> None:
        store = ProfileStore(
            backend.raw(), clock=backend.clock, keys=backend.keys, owns_client=True
        )
        async with store:
            await scenario(ProfileEditor(store, EditorsOnly()), backend)

    asyncio.run(main())


def test_a_denied_principal_creates_updates_and_deletes_nothing(backend: Backend) -> None:
    async def scenario(editor: ProfileEditor, backend: Backend) -> None:
        with pytest.raises(ProfileEditDeniedError, match="principal 'bob' may not create"):
            await editor.create(FLEET, seed_profile(), principal="bob")
        assert await backend.raw().exists(backend.keys.profile(FLEET)) == 0
        created = await editor.create(FLEET, seed_profile(), principal="alice")
        with pytest.raises(ProfileEditDeniedError):
            await editor.update(FLEET, seed_profile(), expected_version=1, principal="bob")
        with pytest.raises(ProfileEditDeniedError):
            await editor.delete(FLEET, principal=None)
        assert await editor.get(FLEET) == created  # reads need no principal
        assert [p.profile_id for p in (await editor.list()).profiles] == [FLEET]

    run(backend, scenario)


def test_the_authoriser_is_asked_before_the_document_is_validated(backend: Backend) -> None:
    async def scenario(editor: ProfileEditor, backend: Backend) -> None:
        with pytest.raises(ProfileEditDeniedError):
            await editor.create(FLEET, {"candidates": "nonsense"}, principal="bob")
        with pytest.raises(PolicyError):
            await editor.create(FLEET, {"candidates": "nonsense"}, principal="alice")
        with pytest.raises(InvalidIdentifierError, match="profile id"):
            await editor.create("has space", seed_profile(), principal="alice")

    run(backend, scenario)


def test_with_the_default_authoriser_any_principal_edits(backend: Backend) -> None:
    async def main() -> None:
        store = ProfileStore(
            backend.raw(), clock=backend.clock, keys=backend.keys, owns_client=True
        )
        async with store:
            editor = ProfileEditor(store, RecordedTaskAuthoriser(no_task))
            created = await editor.create(FLEET, seed_profile(), principal="anyone")
            updated = await editor.update(FLEET, seed_profile(), expected_version=1)
            await editor.delete(FLEET, expected_version=updated.version, principal="else")
            assert (created.version, updated.version) == (1, 2)

    asyncio.run(main())
