"""The owning host's process-local session guards: one reference-counted entry per session.

A session is a route. Its entry serialises the session's notice lifecycle (prompt evidence,
retry reservation and arming, notice writes, retirement, deletion) and remembers what was
retired, so a late provider event cannot bring a retired notice back:

- `hold(session)` counts the caller as a user of the entry *before* it awaits the entry's
  lock, so an entry with a waiter is never reclaimed and replaced: every caller of one
  session meets the same lock.
- An entry is *owned* while an accepted prompt or a retry exists. A prompt is accepted only
  with a complete `ExecutionIdentity`; a retry is reserved under the guard when its failure
  transition committed and armed once the failed turn completed (the session waits for
  input); a later attempt's reservation supersedes an earlier one.
- Retirement clears the ownership of the attempt it ends (and of earlier ones), raises the
  session's retired watermark (generation, attempt ordinal) and, once nothing owns the
  session, arms a fence (5 minutes) for late provider events: while the entry lives, a
  prompt, reservation or notice write for an attempt at or below the watermark is refused,
  and so is one for an attempt older than the one that owns the session.
- The entry is reclaimed when it is unowned, unused and its fence has expired (the fence
  timer, or the last user's release, does it), so memory stays bounded under churn.
- Deleting a session retires it and closes the entry: nothing more is accepted for it until
  the entry is reclaimed after its fence.

Every method of a held session is synchronous: store I/O happens around them, under the
session's guard, never under the host's runtime-state lock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Final

from actors.clock import Clock
from actors.engine.schedulers import Scheduler
from actors.engine.session_state import (
    ExecutionIdentity,
    GuardView,
    Reservation,
    Retirement,
    RetryEntry,
    SessionEntry,
    attempt_order,
    latest_attempt,
)
from actors.keys import AttemptFence, valid_route_id

__all__ = [
    "LATE_EVENT_FENCE",
    "ExecutionIdentity",
    "GuardView",
    "HeldSession",
    "Reservation",
    "Retirement",
    "SessionEntry",
    "SessionGuards",
]

LATE_EVENT_FENCE: Final = timedelta(minutes=5)


class SessionGuards:
    """The guard table of one host. `fence` is how long a retired session refuses late
    events; `scheduler` arms the fence timers (LoopScheduler in a host)."""

    def __init__(
        self, clock: Clock, scheduler: Scheduler, *, fence: timedelta = LATE_EVENT_FENCE
    ) -> None:
        if fence <= timedelta(0):
            raise ValueError(f"the late-event fence must be positive, got {fence}")
        self.clock = clock
        self.fence = fence
        self._scheduler = scheduler
        self._entries: dict[str, SessionEntry] = {}

    @property
    def live_entries(self) -> int:
        """Entries in the table (a gauge)."""
        return len(self._entries)

    def counts(self) -> dict[str, int]:
        """The table in numbers: live entries (`guards`), those an accepted prompt or a
        retry owns (`guards_owned`) and those past their fence (`guards_past_fence`: 0
        unless reclamation is broken)."""
        owned = sum(1 for entry in self._entries.values() if entry.owned)
        past = len(self.entries_past_fence())
        return {"guards": self.live_entries, "guards_owned": owned, "guards_past_fence": past}

    def view(self, session_id: str) -> GuardView | None:
        """The session's entry as it stands (None: it has none)."""
        entry = self._entries.get(session_id)
        return None if entry is None else entry.view()

    @property
    def entries(self) -> Mapping[str, SessionEntry]:
        """The table itself, read-only."""
        return MappingProxyType(self._entries)

    def entries_past_fence(self) -> list[str]:
        """Sessions whose entry outlived its reason to exist (unowned, unused, fence over):
        always empty unless reclamation is broken."""
        now = self.clock.now()
        return sorted(s for s, e in self._entries.items() if self._idle(e, now))

    def is_late(self, attempt: AttemptFence) -> bool:
        """Whether a provider event for `attempt` is late: its session retired that attempt
        (or a later one) and its fence still stands. Reads only; creates no entry."""
        entry = self._entries.get(attempt.route_id)
        return entry is not None and entry.retired(attempt)

    @asynccontextmanager
    async def hold(self, session_id: str) -> AsyncIterator[HeldSession]:
        """The session's guard, held: one caller at a time per session."""
        valid_route_id(session_id)
        entry = self._entries.get(session_id)
        if entry is None:
            entry = self._entries[session_id] = SessionEntry(session_id)
        entry.users += 1  # counted before the await below: a waiter keeps the entry alive
        try:
            async with entry.lock:
                held = HeldSession(self, entry)
                try:
                    yield held
                finally:
                    held.released = True
        finally:
            entry.users -= 1
            self._reclaim_if_idle(entry)

    # -- what HeldSession changes --------------------------------------------------------

    def _arm_fence(self, entry: SessionEntry) -> None:
        entry.fence_until = self.clock.now() + self.fence
        self._schedule(entry, self.fence.total_seconds())

    def _lift_fence(self, entry: SessionEntry) -> None:
        entry.fence_until = None
        if entry.fence_timer is not None:
            entry.fence_timer.cancel()
            entry.fence_timer = None

    def _schedule(self, entry: SessionEntry, delay_s: float) -> None:
        if entry.fence_timer is not None:
            entry.fence_timer.cancel()
        entry.fence_timer = self._scheduler.call_later(delay_s, lambda: self._fence_due(entry))

    def _fence_due(self, entry: SessionEntry) -> None:
        entry.fence_timer = None
        if self._entries.get(entry.session_id) is not entry or entry.fence_until is None:
            return  # reclaimed already, or owned again (its fence lifted)
        left = (entry.fence_until - self.clock.now()).total_seconds()
        if left > 0:  # a loop timer may fire early: wait out the rest
            self._schedule(entry, left)
            return
        self._reclaim_if_idle(entry)

    def _idle(self, entry: SessionEntry, now: datetime) -> bool:
        fence_over = entry.fence_until is None or entry.fence_until <= now
        return entry.users == 0 and not entry.owned and fence_over

    def _reclaim_if_idle(self, entry: SessionEntry) -> None:
        if self._entries.get(entry.session_id) is entry and self._idle(entry, self.clock.now()):
            del self._entries[entry.session_id]
            if entry.fence_timer is not None:
                entry.fence_timer.cancel()
                entry.fence_timer = None


class HeldSession:
    """A session's entry while its guard is held (valid only inside `hold`)."""

    __slots__ = ("_entry", "_guards", "released")

    def __init__(self, guards: SessionGuards, entry: SessionEntry) -> None:
        self._guards = guards
        self._entry = entry
        self.released = False

    @property
    def entry(self) -> SessionEntry:
        if self.released:
            raise RuntimeError(f"session {self._entry.session_id!r}: its guard was released")
        return self._entry

    def accept_prompt(self, identity: ExecutionIdentity | None) -> bool:
        """Take prompt evidence (a start, a delivered dispatch): with a complete identity
        for an attempt neither retired nor superseded, the session is owned again and its
        fence lifted. False (nothing changed) otherwise."""
        entry = self.entry
        if identity is None:
            return False
        if identity.session_id != entry.session_id:
            raise ValueError(f"identity of session {identity.session_id!r} offered to "
                             f"session {entry.session_id!r}")  # fmt: skip
        if entry.retired(identity.attempt) or entry.superseded(identity.attempt):
            return False
        entry.prompt = identity
        self._guards._lift_fence(entry)
        return True

    def reserve_retry(self, attempt: AttemptFence) -> Reservation:
        """Make `attempt` the session's retry (reserved, not armed), superseding an earlier
        one; refused for a retired or superseded attempt. Reserving the current retry again
        changes nothing."""
        entry = self._checked(attempt)
        if entry.retired(attempt) or entry.superseded(attempt):
            return Reservation(reserved=False)
        previous = entry.retry
        if previous is not None and previous.attempt == attempt:
            return Reservation(reserved=True)
        entry.retry = RetryEntry(attempt)
        self._guards._lift_fence(entry)
        return Reservation(True, None if previous is None else previous.attempt)

    def arm_retry(self, attempt: AttemptFence) -> bool:
        """The failed turn completed and the session waits for input: arm the reserved
        retry `attempt` (the host arms its timer only on True). The failed prompt is over."""
        entry = self._checked(attempt)
        if entry.retry is None or entry.retry.attempt != attempt or entry.retired(attempt):
            return False
        entry.retry.armed = True
        entry.prompt = None
        return True

    def release_retry(self, attempt: AttemptFence) -> None:
        """Forget the reservation of `attempt` without retiring it: no watermark raised, no
        fence armed, so the entry is reclaimed once unused. For a process that writes a
        notice for a session another process owns (an rq worker's engine: the owning host
        retires it, and this table would never hear of that)."""
        entry = self._checked(attempt)
        if entry.retry is not None and entry.retry.attempt == attempt:
            entry.retry = None

    def may_write(self, attempt: AttemptFence) -> bool:
        """Whether a notice for `attempt` may be written: not retired, not superseded."""
        entry = self._checked(attempt)
        return not entry.retired(attempt) and not entry.superseded(attempt)

    def retire(self, attempt: AttemptFence | None = None) -> Retirement:
        """Retry ownership ends for `attempt` (None: for whatever owns the session): clear
        the retry and the prompt at or below it, raise the watermark to the latest attempt
        retired, and arm the late-event fence once nothing owns the session.

        `attempt` is the attempt the ending transition ended. A later attempt's ownership
        survives it: that transition and a later one committed in order but reached the
        guard out of order, and the later one's notice is not this retirement's to end."""
        entry = self.entry
        if attempt is not None:
            self._checked(attempt)

        def ends(owner: AttemptFence) -> bool:
            return attempt is None or attempt_order(owner) <= attempt_order(attempt)

        retry = entry.retry_attempt
        prompt = None if entry.prompt is None else entry.prompt.attempt
        retry_ends = retry is not None and ends(retry)
        prompt_ends = prompt is not None and ends(prompt)
        if retry_ends:
            entry.retry = None
        if prompt_ends:
            entry.prompt = None
        entry.watermark = latest_attempt(
            entry.watermark, attempt, retry if retry_ends else None, prompt if prompt_ends else None
        )
        if not entry.owned:
            self._guards._arm_fence(entry)
        return Retirement(retry_ends, prompt_ends, entry.watermark, entry.retry is not None)

    def close(self, attempt: AttemptFence | None = None) -> Retirement:
        """The session is deleted: retire whatever owns it (and `attempt`), then refuse
        everything until the entry is reclaimed."""
        if attempt is not None:
            self._checked(attempt)
        retirement = self.retire()
        entry = self.entry
        entry.watermark = latest_attempt(entry.watermark, attempt)
        entry.closed = True
        return dataclasses.replace(retirement, watermark=entry.watermark)

    def _checked(self, attempt: AttemptFence) -> SessionEntry:
        entry = self.entry
        if attempt.route_id != entry.session_id:
            raise ValueError(f"attempt {attempt} offered to session {entry.session_id!r}")
        return entry
