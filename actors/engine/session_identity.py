"""What identifies a session's attempts and prompts for its guard (session_guards.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeGuard

from actors.keys import AttemptFence

__all__ = ["ExecutionIdentity", "attempt_order", "latest_attempt"]


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
