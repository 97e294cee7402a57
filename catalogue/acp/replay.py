"""Replaying a captured ACP session (JSON-RPC messages in wire order) through the observer.

A line is a bare JSON-RPC message or `{"direction": …, "message": {…}}`. Bare requests of
a client method, and responses answering an agent request, travel client→agent; everything
else agent→client. A turn ends at its prompt barrier: when the next prompt of its session
is sent, or at the end of the capture, so notifications queued behind the prompt's response
still belong to it. Pure: the caller reads and writes the lines and passes the time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from acp.schema import (
    AgentErrorMessage,
    CancelNotification,
    PromptRequest,
    PromptResponse,
    SessionNotification,
)
from pydantic import ValidationError

from catalogue.acp.observer import (
    AcpTurnObserver,
    ChunkSuppressed,
    ObserverEvent,
    TurnCompleted,
    TurnFailed,
    TurnSnapshot,
)
from catalogue.classifier import Catalogue
from catalogue.errors import RecoveryError

Direction = Literal["client_to_agent", "agent_to_client"]
CLIENT_METHODS = frozenset(
    {"initialize", "session/new", "session/load", "session/prompt", "session/cancel"}
)
_DIRECTIONS: frozenset[str] = frozenset({"client_to_agent", "agent_to_client"})


class ReplayError(RecoveryError, ValueError):
    """A line that cannot be replayed; `field` names the part that is wrong. Also a
    ValueError, as it always was."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(slots=True)
class AcpReplay:
    adapter: str
    execution_id: str = "acp-replay"
    catalogue: Catalogue | None = None
    observer: AcpTurnObserver = field(init=False)
    _prompts: dict[str | int, str] = field(default_factory=dict)  # request id → session
    _agent_requests: dict[str | int, str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.observer = AcpTurnObserver(self.adapter, self.execution_id, self.catalogue)

    def feed(self, data: dict[str, Any], now: datetime) -> list[ObserverEvent]:
        """One line of the capture. Raises ReplayError for a line that cannot be read."""
        direction, message = self._unwrap(data)
        try:
            if direction == "client_to_agent":
                return self._from_client(message, now)
            return self._from_agent(message)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"]) or None
            raise ReplayError(f"not a valid ACP message: {error['msg']}", where) from None

    def finish(self, now: datetime) -> list[ObserverEvent]:
        return self.observer.finish_all(now)

    def _unwrap(self, data: dict[str, Any]) -> tuple[Direction, dict[str, Any]]:
        if "message" in data and "jsonrpc" not in data:
            direction, message = data.get("direction"), data["message"]
            if direction not in _DIRECTIONS:
                raise ReplayError(
                    "direction must be client_to_agent or agent_to_client", "direction"
                )
            if not isinstance(message, dict):
                raise ReplayError("message must be a JSON object", "message")
            if direction == "client_to_agent":
                return "client_to_agent", message
            return "agent_to_client", message
        method = data.get("method")
        if isinstance(method, str) and "id" in data and method in CLIENT_METHODS:
            return "client_to_agent", data
        if method == "session/cancel":
            return "client_to_agent", data
        if method is None and data.get("id") in self._agent_requests:
            return "client_to_agent", data
        return "agent_to_client", data

    def _from_client(self, message: dict[str, Any], now: datetime) -> list[ObserverEvent]:
        method = message.get("method")
        if method == "session/prompt":
            request = PromptRequest.model_validate(message.get("params"))
            _, events = self.observer.prompt_started(request.session_id, now)
            request_id = message.get("id")
            if isinstance(request_id, str | int):
                self._prompts[request_id] = request.session_id
            return events
        if method == "session/cancel":
            cancel = CancelNotification.model_validate(message.get("params"))
            self.observer.cancel_requested(cancel.session_id)
            return []
        if method is None:
            self._agent_requests.pop(message.get("id"), None)  # type: ignore[arg-type]
        return []

    def _from_agent(self, message: dict[str, Any]) -> list[ObserverEvent]:
        method = message.get("method")
        if method == "session/update":
            return self.observer.update(SessionNotification.model_validate(message.get("params")))
        if isinstance(method, str):
            params = message.get("params")
            session_id = params.get("sessionId") if isinstance(params, dict) else None
            if "id" in message:
                self._agent_requests[message["id"]] = session_id
            self.observer.agent_request(session_id if isinstance(session_id, str) else None)
            return []
        request_id = message.get("id")
        if not isinstance(request_id, str | int) or request_id not in self._prompts:
            return []
        session_id = self._prompts.pop(request_id)
        if "error" in message:
            failed = AgentErrorMessage.model_validate(message)
            self.observer.prompt_returned(session_id, error=failed.error)
        else:
            result = PromptResponse.model_validate(message.get("result"))
            self.observer.prompt_returned(session_id, result=result)
        return []


def event_json(event: ObserverEvent) -> dict[str, Any]:
    """The `recovery acp-replay` output object of one observer event."""
    if isinstance(event, ChunkSuppressed):
        return {
            "event": "chunk_suppressed",
            "generation": event.generation,
            "session_id": event.session_id,
            "reason": event.reason,
        }
    if isinstance(event, TurnSnapshot):
        return {
            "event": "turn_evidence",
            "generation": event.generation,
            "session_id": event.session_id,
            "adapter": event.adapter,
            "evidence": event.evidence.model_dump(mode="json"),
        }
    if isinstance(event, TurnCompleted):
        return {
            "event": "complete",
            "generation": event.generation,
            "session_id": event.session_id,
            "stop_reason": event.stop_reason,
        }
    assert isinstance(event, TurnFailed)
    error = event.provider_error
    return {
        "event": "error",
        "generation": event.generation,
        "session_id": event.session_id,
        "projection": event.projection,
        "provider_error": {
            "source": error.source,
            "provider_id": error.provider_id,
            "message": error.message,
            "occurred_at": error.occurred_at.isoformat().replace("+00:00", "Z"),
        },
        "classification": event.classification.model_dump(mode="json"),
        "effect_safety": event.effect_safety.model_dump(mode="json"),
    }
