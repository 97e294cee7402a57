"""Building ACP JSON-RPC messages (as they travel on the wire) for observer tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from catalogue.acp import AcpReplay, ObserverEvent

NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
Message = dict[str, Any]


def prompt(request_id: int, session: str = "s1") -> Message:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "do the task"}]},
    }


def update(body: dict[str, Any], session: str = "s1") -> Message:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": session, "update": body},
    }


def say(text: str, session: str = "s1") -> Message:
    return update(
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}},
        session,
    )


def think(text: str, session: str = "s1") -> Message:
    return update(
        {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": text}},
        session,
    )


def tool(call_id: str, status: str = "in_progress", session: str = "s1") -> Message:
    return update(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": call_id,
            "title": "Read File",
            "status": status,
        },
        session,
    )


def tool_update(call_id: str, status: str | None = None, session: str = "s1") -> Message:
    body: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": call_id}
    if status is not None:
        body["status"] = status
    return update(body, session)


def info(meta: dict[str, Any], session: str = "s1") -> Message:
    return update({"sessionUpdate": "session_info_update", "_meta": meta}, session)


def done(request_id: int, stop_reason: str = "end_turn") -> Message:
    return {"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": stop_reason}}


def failed(request_id: int, message: str, code: int = -32603) -> Message:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def replay(adapter: str, messages: list[Message]) -> list[ObserverEvent]:
    runner = AcpReplay(adapter)
    events: list[ObserverEvent] = []
    for message in messages:
        events.extend(runner.feed(message, NOW))
    events.extend(runner.finish(NOW))
    return events
