"""Factories for the plug-in loader tests, named by `module:factory` specs."""

from __future__ import annotations

from actors.clock import ManualClock
from tests.actors.engine.transcript_fakes import MemoryTranscript
from tests.actors.route_builders import T0

NOT_CALLABLE = 42


def memory_transcript() -> MemoryTranscript:
    return MemoryTranscript(ManualClock(T0))


class AllowAll:
    async def authorise(self, task_id: str, session_id: str, principal: str | None) -> bool:
        return True


def allow_all() -> AllowAll:
    return AllowAll()


class SyncAuthoriser:
    def authorise(self, task_id: str, session_id: str, principal: str | None) -> bool:
        return True


def sync_authoriser() -> SyncAuthoriser:
    return SyncAuthoriser()


def nothing() -> object:
    return object()


def broken() -> object:
    raise RuntimeError("the task service is not configured")


class Factories:
    """A dotted attribute path: `module:Factories.allow_all`."""

    allow_all = staticmethod(allow_all)


class EditorsOnly(AllowAll):
    """An authoriser that also decides profile edits: only "alice" may edit."""

    async def authorise_profile_edit(
        self, action: str, profile_id: str, principal: str | None
    ) -> bool:
        return principal == "alice"


def editors_only() -> EditorsOnly:
    return EditorsOnly()


class SyncEditCheck(AllowAll):
    def authorise_profile_edit(self, action: str, profile_id: str, principal: str | None) -> bool:
        return True


def sync_edit_check() -> SyncEditCheck:
    return SyncEditCheck()
