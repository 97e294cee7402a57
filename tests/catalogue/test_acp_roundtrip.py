"""A real ACP round trip: the scripted agent (`tests.acp_agent`) runs as a subprocess over
stdio, the SDK's client side talks to it (initialize → session/new → session/prompt), and
every message the client sees, in both directions, feeds the turn observer.

The client glue marks the prompt generation before the request is written, feeds
`session/update` notifications and agent requests in wire order from the connection's
stream observer, hands the prompt's result or JSON-RPC error to the observer, and settles
the turn once the SDK has drained the updates queued behind the response. It also keeps the
wire transcript, which replays through `recovery acp-replay` to the same decision.
"""

from __future__ import annotations

import asyncio
import io
import json
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from acp import PROTOCOL_VERSION, Client, RequestError, text_block
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AllowedOutcome,
    Error,
    PermissionOption,
    RequestPermissionResponse,
    SessionNotification,
    ToolCallUpdate,
)
from acp.stdio import spawn_agent_process

from actors.cli.acp import replay_lines
from catalogue.acp import (
    CURSOR_DIAGNOSTIC,
    AcpTurnObserver,
    ChunkSuppressed,
    ObserverEvent,
    TurnCompleted,
    TurnFailed,
    TurnSnapshot,
)
from tests.acp_agent import CURSOR_RESET, SCRIPTS

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 30.0
EXECUTION = "exec-roundtrip"


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class ObservedClient:
    """The SDK `Client` of the round trip, feeding one adapter's turn observer."""

    adapter: str
    observer: AcpTurnObserver = field(init=False)
    events: list[ObserverEvent] = field(default_factory=list)
    transcript: list[dict[str, Any] | None] = field(default_factory=list)
    _prompt_slots: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.observer = AcpTurnObserver(self.adapter, EXECUTION)

    # -- the connection's stream observer (wire order) ------------------------------------

    def on_stream(self, event: StreamEvent) -> None:
        message = event.message
        method = message.get("method")
        if event.direction is StreamDirection.OUTGOING:
            entry = {"direction": "client_to_agent", "message": message}
            if method == "session/prompt" and self._prompt_slots:
                # Logged after the write completes: put it where the prompt was sent.
                self.transcript[self._prompt_slots.pop(0)] = entry
                return
            self.transcript.append(entry)
            if method == "session/cancel":
                self.observer.cancel_requested(message["params"]["sessionId"])
            return
        self.transcript.append({"direction": "agent_to_client", "message": message})
        if method == "session/update":
            notification = SessionNotification.model_validate(message.get("params"))
            self.events.extend(self.observer.update(notification))
        elif isinstance(method, str) and "id" in message:
            params = message.get("params")
            session_id = params.get("sessionId") if isinstance(params, dict) else None
            self.observer.agent_request(session_id if isinstance(session_id, str) else None)

    # -- driving a turn -------------------------------------------------------------------

    async def prompt(self, conn: Any, session_id: str, text: str) -> None:
        _, settled = self.observer.prompt_started(session_id, _now())
        self.events.extend(settled)
        self._prompt_slots.append(len(self.transcript))
        self.transcript.append(None)
        try:
            response = await conn.prompt(session_id=session_id, prompt=[text_block(text)])
        except RequestError as exc:
            error = Error(code=exc.code, message=str(exc), data=exc.data)
            self.observer.prompt_returned(session_id, error=error)
        else:
            self.observer.prompt_returned(session_id, result=response)
        self.events.extend(self.observer.settle(session_id, _now()))

    # -- the SDK Client methods the scripts can reach -------------------------------------

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None  # observed on the wire by on_stream, in order

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        chosen = AllowedOutcome(outcome="selected", option_id=options[0].option_id)
        return RequestPermissionResponse(outcome=chosen)


async def _round_trip(script: str, adapter: str) -> ObservedClient:
    client = ObservedClient(adapter)
    async with spawn_agent_process(
        cast(Client, client),
        sys.executable,
        "-m",
        "tests.acp_agent",
        "--script",
        script,
        cwd=ROOT,
        observers=[client.on_stream],
    ) as (conn, process):
        try:
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(ROOT), mcp_servers=[])
            await client.prompt(conn, session.session_id, "fix the failing test")
        finally:
            if process.returncode is None:
                process.terminate()
            await process.wait()
    return client


def run(script: str, adapter: str) -> ObservedClient:
    return asyncio.run(asyncio.wait_for(_round_trip(script, adapter), TIMEOUT_S))


def terminal(client: ObservedClient) -> TurnCompleted | TurnFailed:
    ends = [e for e in client.events if isinstance(e, TurnCompleted | TurnFailed)]
    assert len(ends) == 1, client.events
    return ends[0]


def replayed(client: ObservedClient) -> dict[str, Any]:
    """The final event `recovery acp-replay` prints for the captured wire transcript."""
    lines = "".join(json.dumps(entry) + "\n" for entry in client.transcript if entry is not None)
    sink = io.StringIO()
    replay_lines(io.StringIO(lines), sink, client.adapter, _now())
    output = [json.loads(line) for line in sink.getvalue().splitlines()]
    assert not [line for line in output if "line" in line and "error" in line]
    final: dict[str, Any] = output[-1]
    return final


def test_every_script_is_offered() -> None:
    assert set(SCRIPTS) == {
        "cursor-retriable",
        "cursor-tool-then-reset",
        "codex-capacity",
        "claude-overloaded",
        "clean",
    }


def test_cursor_retriable_reset_is_one_safe_transport_loss() -> None:
    client = run("cursor-retriable", "cursor-acp")
    failure = terminal(client)
    assert isinstance(failure, TurnFailed)
    assert failure.classification.code == "agent_transport_lost"
    assert failure.classification.rule == "cursor.retriable_stream_reset.v1"
    assert failure.projection == "cursor_retriable"
    error = failure.provider_error
    assert (error.source, error.provider_id) == ("cursor_acp", "cursor-acp")
    assert error.message == CURSOR_DIAGNOSTIC
    assert CURSOR_RESET not in error.message
    assert error.occurred_at.utcoffset() is not None
    assert failure.effect_safety.same_candidate
    assert not failure.evidence.output_observed
    suppressed = [e for e in client.events if isinstance(e, ChunkSuppressed)]
    assert [e.reason for e in suppressed] == ["cursor_retriable_marker"]
    assert sum(isinstance(e, TurnSnapshot) for e in client.events) == 1
    final = replayed(client)
    assert final["event"] == "error"
    assert final["classification"]["rule"] == "cursor.retriable_stream_reset.v1"
    assert final["effect_safety"]["same_candidate"] is True


def test_cursor_reset_after_a_tool_call_is_unsafe_to_replay() -> None:
    client = run("cursor-tool-then-reset", "cursor-acp")
    failure = terminal(client)
    assert isinstance(failure, TurnFailed)
    assert failure.classification.code == "agent_transport_lost"
    assert failure.evidence.tool_call_started
    assert failure.evidence.tool_call_completed
    assert failure.evidence.thoughts_observed
    assert not failure.effect_safety.same_candidate
    final = replayed(client)
    assert final["event"] == "error"
    assert final["effect_safety"]["same_candidate"] is False


def test_codex_capacity_is_one_model_capacity_error() -> None:
    client = run("codex-capacity", "codex-acp")
    failure = terminal(client)
    assert isinstance(failure, TurnFailed)
    assert failure.classification.code == "model_capacity"
    assert failure.projection == "codex_capacity"
    assert failure.evidence.matched_acp_diagnostic
    assert failure.effect_safety.same_candidate
    assert replayed(client)["classification"]["code"] == "model_capacity"


def test_claude_overloaded_error_is_provider_overloaded() -> None:
    client = run("claude-overloaded", "claude-acp")
    failure = terminal(client)
    assert isinstance(failure, TurnFailed)
    assert failure.classification.code == "provider_overloaded"
    assert failure.projection is None
    assert failure.evidence.matched_acp_diagnostic  # the chunk reports the same error
    assert failure.effect_safety.same_candidate
    assert replayed(client)["classification"]["code"] == "provider_overloaded"


@pytest.mark.parametrize("adapter", ["cursor-acp", "codex-acp", "claude-acp"])
def test_clean_turn_is_one_complete(adapter: str) -> None:
    client = run("clean", adapter)
    done = terminal(client)
    assert isinstance(done, TurnCompleted)
    assert done.stop_reason == "end_turn"
    assert not [e for e in client.events if isinstance(e, ChunkSuppressed)]
    final = replayed(client)
    assert (final["event"], final["stop_reason"]) == ("complete", "end_turn")
