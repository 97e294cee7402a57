"""The ordered, per-session ACP turn observer.

Each `session/prompt` request starts a new prompt generation of its session (1, 2, …). The
observer records what the agent did in that turn — assistant output, thoughts, tool calls
started and completed, tool updates, diagnostics — and the terminal result or JSON-RPC
error of the prompt. The turn ends at the prompt barrier (`settle`): after the prompt has
returned and the queued notifications have been drained. Only then does it emit, in order,
a `TurnSnapshot` (the immutable `TurnEvidence` the gate consumes) and exactly one
`TurnCompleted` or `TurnFailed`, so the decision does not depend on whether the failure or
the stream events were delivered first.

Updates for a session without an active turn are ignored: they can never authorise recovery.
Pure: no I/O; every time is an argument.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from acp.schema import (
    AgentMessageChunk,
    AgentThoughtChunk,
    Error,
    PromptResponse,
    SessionInfoUpdate,
    SessionNotification,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
)

from catalogue.acp.projections import (
    CODEX_ADAPTER,
    CODEX_CAPACITY_DIAGNOSTIC,
    CURSOR_ADAPTER,
    CURSOR_DIAGNOSTIC,
    codex_system_error,
    cursor_retriable_suffix,
    diagnostic_pairs,
    is_capacity_chunk,
)
from catalogue.classification import Classification
from catalogue.classifier import Catalogue, default_catalogue
from catalogue.codes import Confidence, ErrorClass
from catalogue.evidence import Evidence, EvidenceKind
from catalogue.sanitize import sanitize
from policy.gate import EffectSafety, TurnEvidence, assess_turn

UNANSWERED = "session/prompt did not return before the capture ended"
_DONE_STATUSES = frozenset({"completed", "failed"})


@dataclass(frozen=True, slots=True)
class ProviderError:
    source: str
    provider_id: str
    message: str
    occurred_at: datetime


@dataclass(frozen=True, slots=True)
class ChunkSuppressed:
    session_id: str
    generation: int
    reason: str


@dataclass(frozen=True, slots=True)
class TurnSnapshot:
    session_id: str
    generation: int
    adapter: str
    evidence: TurnEvidence


@dataclass(frozen=True, slots=True)
class TurnCompleted:
    session_id: str
    generation: int
    stop_reason: str


@dataclass(frozen=True, slots=True)
class TurnFailed:
    session_id: str
    generation: int
    adapter: str
    provider_error: ProviderError
    classification: Classification
    evidence: TurnEvidence
    effect_safety: EffectSafety
    projection: str | None = None


ObserverEvent = ChunkSuppressed | TurnSnapshot | TurnCompleted | TurnFailed


def authorise(
    snapshot: TurnSnapshot | TurnFailed, *, adapter: str, execution_id: str, generation: int
) -> EffectSafety:
    """The gate's verdict for a turn, refusing evidence recorded by another adapter."""
    if snapshot.adapter != adapter:
        return EffectSafety.unsafe(
            f"not effect-safe: turn evidence is from adapter {snapshot.adapter!r}, not {adapter!r}"
        )
    return assess_turn(snapshot.evidence, execution_id=execution_id, prompt_generation=generation)


@dataclass(slots=True)
class _Turn:
    session_id: str
    generation: int
    output: bool = False
    thoughts: bool = False
    tool_started: bool = False
    tool_completed: bool = False
    tool_updates: int = 0
    tools: dict[str, str] = field(default_factory=dict)
    cursor_marker: bool = False
    cancelled: bool = False
    codex_system_error: bool = False
    capacity_chunk: bool = False
    diagnostics: list[tuple[str, str]] = field(default_factory=list)
    plain_output: bool = False
    answered: bool = False
    result: PromptResponse | None = None
    error: Error | None = None


@dataclass(slots=True)
class _Session:
    generation: int = 0
    turn: _Turn | None = None


class AcpTurnObserver:
    """Observes one adapter's ACP traffic, in wire order, for one execution."""

    def __init__(self, adapter: str, execution_id: str, catalogue: Catalogue | None = None) -> None:
        self.adapter = adapter.strip().lower()
        self.execution_id = execution_id
        self._catalogue = catalogue or default_catalogue()
        self._sessions: dict[str, _Session] = {}
        self.ignored_updates = 0

    # -- client side ----------------------------------------------------------------------

    def prompt_started(self, session_id: str, now: datetime) -> tuple[int, list[ObserverEvent]]:
        """A `session/prompt` request: settles the previous turn, starts a new generation."""
        events = self.settle(session_id, now)
        session = self._sessions.setdefault(session_id, _Session())
        if session.turn is not None:  # never answered, yet a new prompt was sent
            events.extend(self._finish(session, now))
        session.generation += 1
        session.turn = _Turn(session_id, session.generation)
        return session.generation, events

    def cancel_requested(self, session_id: str) -> None:
        turn = self._active(session_id)
        if turn is not None:
            turn.cancelled = True

    def agent_request(self, session_id: str | None) -> None:
        """A request from the agent (permission, file system, terminal) during a turn: an
        effect may follow, so the turn counts as having tool activity."""
        turn = self._active(session_id) if session_id else None
        if turn is not None:
            turn.tool_started = True

    # -- agent side -----------------------------------------------------------------------

    def update(self, notification: SessionNotification) -> list[ObserverEvent]:
        turn = self._active(notification.session_id)
        if turn is None or turn.generation == 0:
            self.ignored_updates += 1
            return []
        update = notification.update
        if isinstance(update, AgentMessageChunk):
            return self._message_chunk(turn, update)
        if isinstance(update, AgentThoughtChunk):
            if _chunk_text(update) != "":  # a blank chunk is no progress
                turn.thoughts = True
                turn.cursor_marker = False
        elif isinstance(update, ToolCallStart):
            turn.tool_started = True
            turn.cursor_marker = False
            turn.tools[update.tool_call_id] = update.status or "pending"
            if update.status in _DONE_STATUSES:
                turn.tool_completed = True
        elif isinstance(update, ToolCallProgress):
            # An update of an in-flight tool is activity, but does not prove that the
            # provider resumed generating: it leaves a Cursor marker pending.
            turn.tool_updates += 1
            turn.tool_started = True
            if update.status is not None:
                turn.tools[update.tool_call_id] = update.status
            if update.status in _DONE_STATUSES:
                turn.tool_completed = True
        elif isinstance(update, SessionInfoUpdate) and codex_system_error(update.field_meta):
            turn.codex_system_error = True
        return []

    def prompt_returned(
        self, session_id: str, result: PromptResponse | None = None, error: Error | None = None
    ) -> None:
        """The response to the turn's `session/prompt`. Nothing is emitted until `settle`."""
        turn = self._active(session_id)
        if turn is None or turn.answered:
            return
        turn.answered = True
        turn.result = result
        turn.error = error

    def settle(self, session_id: str, now: datetime) -> list[ObserverEvent]:
        """The prompt barrier: once the prompt has returned and the notification queue is
        drained, the turn's snapshot and its one terminal event."""
        session = self._sessions.get(session_id)
        if session is None or session.turn is None or not session.turn.answered:
            return []
        return self._finish(session, now)

    def finish_all(self, now: datetime) -> list[ObserverEvent]:
        """End of the capture: every turn still open ends, answered or not."""
        events: list[ObserverEvent] = []
        for session in self._sessions.values():
            if session.turn is not None:
                events.extend(self._finish(session, now))
        return events

    def active_generation(self, session_id: str) -> int:
        turn = self._active(session_id)
        return 0 if turn is None else turn.generation

    # -- internals ------------------------------------------------------------------------

    def _active(self, session_id: str | None) -> _Turn | None:
        session = self._sessions.get(session_id or "")
        return None if session is None else session.turn

    def _message_chunk(self, turn: _Turn, chunk: AgentMessageChunk) -> list[ObserverEvent]:
        text = _chunk_text(chunk)
        if text == "":
            return []
        if (
            text is not None
            and self.adapter == CURSOR_ADAPTER
            and cursor_retriable_suffix(text) is not None
        ):
            turn.cursor_marker = True
            return [ChunkSuppressed(turn.session_id, turn.generation, "cursor_retriable_marker")]
        turn.cursor_marker = False
        turn.output = True
        if text is None:
            turn.plain_output = True
            return []
        if self.adapter == CODEX_ADAPTER and is_capacity_chunk(text):
            turn.capacity_chunk = True
            turn.diagnostics.append((text, "model_capacity"))
            return []
        code = self._diagnostic_code(text)
        if code is None:
            turn.plain_output = True
        else:
            turn.diagnostics.append((text, code))
        return []

    def _diagnostic_code(self, text: str) -> str | None:
        result = self._catalogue.classify(
            Evidence(kind=EvidenceKind.MESSAGE_CHUNK, text=text, agent=self.adapter)
        )
        if result.confidence is Confidence.HIGH and result.error_class in (
            ErrorClass.TRANSIENT,
            ErrorClass.HARD,
        ):
            return result.code
        return None

    def _finish(self, session: _Session, now: datetime) -> list[ObserverEvent]:
        turn = session.turn
        assert turn is not None
        session.turn = None
        failure = self._failure(turn, now)
        projection: str | None = None
        if failure is not None:
            evidence_kind, message, projection = failure
            classification = self._classify(turn, evidence_kind, message, now)
        matched = self._diagnostics_match(turn, projection, failure)
        evidence = TurnEvidence(
            execution_id=self.execution_id,
            prompt_generation=turn.generation,
            provider_session_id=turn.session_id,
            output_observed=turn.output,
            thoughts_observed=turn.thoughts,
            tool_call_started=turn.tool_started,
            tool_call_completed=turn.tool_completed,
            partial_utility_result=False,
            ambiguous_delivery=None if not turn.answered else False,
            matched_acp_diagnostic=matched,
        )
        snapshot = TurnSnapshot(turn.session_id, turn.generation, self.adapter, evidence)
        if failure is None:
            stop = turn.result.stop_reason if turn.result is not None else "end_turn"
            return [snapshot, TurnCompleted(turn.session_id, turn.generation, stop)]
        source = self.adapter.replace("-", "_")
        error = ProviderError(source, self.adapter, sanitize(message), _utc(now))
        safety = assess_turn(
            evidence, execution_id=self.execution_id, prompt_generation=turn.generation
        )
        return [
            snapshot,
            TurnFailed(
                turn.session_id,
                turn.generation,
                self.adapter,
                error,
                classification,
                evidence,
                safety,
                projection,
            ),
        ]

    def _failure(self, turn: _Turn, now: datetime) -> tuple[EvidenceKind, str, str | None] | None:
        if not turn.answered:
            return EvidenceKind.ACP_ERROR, UNANSWERED, None
        if turn.error is not None:
            message = turn.error.message
            if turn.error.data is not None:
                message = f"{message}\n{json.dumps(turn.error.data, ensure_ascii=False)}"
            return EvidenceKind.ACP_ERROR, message, None
        if turn.cancelled or (turn.result is not None and turn.result.stop_reason == "cancelled"):
            return None  # the client cancelled: a cancellation vetoes every projection
        if self.adapter == CURSOR_ADAPTER and turn.cursor_marker:
            return EvidenceKind.ACP_ERROR, CURSOR_DIAGNOSTIC, "cursor_retriable"
        if self.adapter == CODEX_ADAPTER and turn.codex_system_error and turn.capacity_chunk:
            return EvidenceKind.ACP_ERROR, CODEX_CAPACITY_DIAGNOSTIC, "codex_capacity"
        return None

    def _classify(
        self, turn: _Turn, kind: EvidenceKind, message: str, now: datetime
    ) -> Classification:
        provider = CURSOR_ADAPTER if self.adapter == CURSOR_ADAPTER else None
        evidence = Evidence(
            kind=kind,
            text=message,
            agent=self.adapter,
            provider=provider,
            observed_at=_utc(now),
            execution_id=self.execution_id,
            prompt_generation=turn.generation,
            phase="prompt",
        )
        return self._catalogue.classify(evidence, _utc(now))

    def _diagnostics_match(
        self,
        turn: _Turn,
        projection: str | None,
        failure: tuple[EvidenceKind, str, str | None] | None,
    ) -> bool:
        # The only output is diagnostics, before any tool activity, and each reports the
        # failure itself: then they are not assistant output for the gate.
        if not turn.diagnostics or turn.plain_output or turn.tool_started or failure is None:
            return False
        if projection == "codex_capacity":
            return all(code == "model_capacity" for _, code in turn.diagnostics)
        if projection is not None or turn.error is None:
            return False
        error_code = self._classify(turn, EvidenceKind.ACP_ERROR, failure[1], _EPOCH).code
        return all(
            diagnostic_pairs(text, code, turn.error.message, error_code)
            for text, code in turn.diagnostics
        )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _chunk_text(chunk: AgentMessageChunk | AgentThoughtChunk) -> str | None:
    """The trimmed text of a text chunk ("" when blank), or None for other content."""
    content: Any = chunk.content
    if isinstance(content, TextContentBlock):
        return content.text.strip()
    return None


def _utc(value: datetime) -> datetime:
    if value.utcoffset() is None:
        raise ValueError("times must carry a time zone")
    return value.astimezone(UTC)
