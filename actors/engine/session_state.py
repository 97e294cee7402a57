"""A session guard's state (session_guards.py): what identifies a session's attempts and
prompts, and one session's entry."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import TypeGuard

from actors.engine.schedulers import Cancellable
from actors.keys import AttemptFence

__all__ = [
    "ExecutionIdentity",
    "GuardView",
    "Reservation",
    "Retirement",
    "RetryEntry",
    "SessionEntry",
    "attempt_order",
    "latest_attempt",
]


def attempt_order(attempt: AttemptFence) -> tuple[int, int]:
    """How attempts are ordered: by generation, then attempt ordinal."""
    return (attempt.generation, attempt.ordinal)


def latest_attempt(*attempts: AttemptFence | None) -> AttemptFence | None:
    """The latest of the attempts given (None when none is)."""
    known = [a for a in attempts if a is not None]
    return max(known, key=attempt_order) if known else None


def _present(text: object) -> TypeGuard[str]:
    return isinstance(text, str) and bool(text)


def _count(value: object, *, least: int) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


@dataclass(frozen=True, slots=True)
class ExecutionIdentity:
    """A prompt's complete execution identity: the orchestrator's task, the session (route),
    the execution (invocation) id of the turn, and the route attempt it runs — the route's
    generation and attempt ordinal (a start is attempt 0 of its generation, a delivered
    dispatch the attempt it delivered)."""

    task_id: str
    session_id: str
    execution_id: str
    generation: int
    attempt_ordinal: int

    @classmethod
    def of(
        cls,
        *,
        task_id: str | None,
        session_id: str | None,
        execution_id: str | None,
        generation: int | None,
        attempt_ordinal: int | None,
    ) -> ExecutionIdentity | None:
        """The identity, or None when any part is missing or malformed (evidence without
        a complete identity never opens a session's fence)."""
        if not (_present(task_id) and _present(session_id) and _present(execution_id)):
            return None
        if not (_count(generation, least=1) and _count(attempt_ordinal, least=0)):
            return None
        return cls(task_id, session_id, execution_id, generation, attempt_ordinal)

    @property
    def attempt(self) -> AttemptFence:
        return AttemptFence(self.session_id, self.generation, self.attempt_ordinal)


@dataclass(slots=True)
class RetryEntry:
    """A session's retry: reserved when its failure transition committed, armed once the
    failed turn completed."""

    attempt: AttemptFence
    armed: bool = False


@dataclass(frozen=True, slots=True)
class Reservation:
    """A reservation's answer: whether `attempt` is now the session's retry, and the
    earlier attempt it superseded (whose timer the host cancels)."""

    reserved: bool
    superseded: AttemptFence | None = None


@dataclass(frozen=True, slots=True)
class Retirement:
    """What a retirement ended: whether it ended a retry or a prompt, the watermark it
    left, and whether a later attempt's retry still owns the session (whose notice, the
    session's one notice, is then that attempt's and stays)."""

    had_retry: bool
    had_prompt: bool
    watermark: AttemptFence | None
    retry_remains: bool = False


@dataclass(frozen=True, slots=True)
class GuardView:
    """One session's entry as it stands: what owns it (its prompt's attempt, its retry's
    and whether that is armed), its retired watermark, its late-event fence, how many
    callers use it and whether it was closed. A value, for a host's introspection."""

    session_id: str
    prompt: AttemptFence | None
    retry: AttemptFence | None
    retry_armed: bool
    watermark: AttemptFence | None
    fence_until: datetime | None
    users: int
    closed: bool


class SessionEntry:
    """One session's guard state (read it in tests; change it through `HeldSession`)."""

    __slots__ = (
        "closed", "fence_timer", "fence_until", "lock", "prompt", "retry", "session_id",
        "users", "watermark",
    )  # fmt: skip

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.lock = asyncio.Lock()
        self.users = 0
        self.prompt: ExecutionIdentity | None = None
        self.retry: RetryEntry | None = None
        self.watermark: AttemptFence | None = None
        self.fence_until: datetime | None = None
        self.closed = False
        self.fence_timer: Cancellable | None = None  # the guard table's to arm and cancel

    @property
    def owned(self) -> bool:
        return self.prompt is not None or self.retry is not None

    def view(self) -> GuardView:
        prompt = None if self.prompt is None else self.prompt.attempt
        return GuardView(
            self.session_id, prompt, self.retry_attempt, self.retry_armed, self.watermark,
            self.fence_until, self.users, self.closed,
        )  # fmt: skip

    @property
    def retry_attempt(self) -> AttemptFence | None:
        return None if self.retry is None else self.retry.attempt

    @property
    def retry_armed(self) -> bool:
        return self.retry is not None and self.retry.armed

    def retired(self, attempt: AttemptFence) -> bool:
        """Whether `attempt` is at or below the retired watermark (or the session closed)."""
        if self.closed:
            return True
        watermark = self.watermark
        return watermark is not None and attempt_order(attempt) <= attempt_order(watermark)

    @property
    def owner(self) -> AttemptFence | None:
        """The latest attempt that owns the session (its retry's or its prompt's)."""
        return latest_attempt(
            self.retry_attempt, None if self.prompt is None else self.prompt.attempt
        )

    def superseded(self, attempt: AttemptFence) -> bool:
        """Whether a later attempt than `attempt` owns the session (a retry or a prompt)."""
        owner = self.owner
        return owner is not None and attempt_order(attempt) < attempt_order(owner)
