"""A scripted ACP agent, built on the official SDK's agent side, for round-trip tests and
the demo.

    python -m tests.acp_agent --script cursor-retriable

It speaks ACP (JSON-RPC 2.0, newline-delimited) over stdio: `initialize`, `session/new`
and `session/prompt`. On each prompt it plays its script — the `session/update`
notifications a real agent of that kind sends when its provider fails — and then answers
the prompt with a result or a JSON-RPC error:

- `cursor-retriable`: cursor-agent's upstream stream reset, reported as an ordinary
  assistant chunk `Error: RetriableError: …`, then a normal `end_turn`.
- `cursor-tool-then-reset`: a thought and a completed tool call, then the same reset.
- `codex-capacity`: codex-acp's `systemError` thread status in a session info update, the
  "Selected model is at capacity" chunk, then `end_turn`.
- `claude-overloaded`: the Anthropic `overloaded_error` shown as a chunk, then a JSON-RPC
  internal error carrying the same text.
- `clean`: a thought, a tool call, an answer and `end_turn`.

Nothing here reads the clock or the network; the process exits when stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, cast

from acp import (
    PROTOCOL_VERSION,
    Agent,
    Client,
    RequestError,
    run_agent,
    start_read_tool_call,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
)
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    SessionInfoUpdate,
)

CURSOR_RESET = "Error: RetriableError: [unavailable] PING timed out"
CODEX_CAPACITY = "Selected model is at capacity. Please try a different model."
CLAUDE_OVERLOADED = (
    'API Error: 529 {"type":"error","error":{"type":"overloaded_error",'
    '"message":"Overloaded"},"request_id":"req_011CUdemo"}'
)
CODEX_SYSTEM_ERROR: dict[str, Any] = {
    "threadStatus": {"type": "systemError"},
    "codex": {"turnId": "turn-1"},
}

Step = Callable[[Client, str], Awaitable[None]]


async def _cursor_retriable(client: Client, session_id: str) -> None:
    await client.session_update(session_id, update_agent_message_text(CURSOR_RESET))


async def _cursor_tool_then_reset(client: Client, session_id: str) -> None:
    await client.session_update(session_id, update_agent_thought_text("Reading the config."))
    await client.session_update(
        session_id, start_read_tool_call("read-1", "Read File", "README.md")
    )
    await client.session_update(session_id, update_tool_call("read-1", status="completed"))
    await client.session_update(session_id, update_agent_message_text(CURSOR_RESET))


async def _codex_capacity(client: Client, session_id: str) -> None:
    await client.session_update(
        session_id,
        SessionInfoUpdate(session_update="session_info_update", field_meta=CODEX_SYSTEM_ERROR),
    )
    await client.session_update(session_id, update_agent_message_text(CODEX_CAPACITY))


async def _claude_overloaded(client: Client, session_id: str) -> None:
    await client.session_update(session_id, update_agent_message_text(CLAUDE_OVERLOADED))
    raise RequestError(-32603, f"Internal error: {CLAUDE_OVERLOADED}")


async def _clean(client: Client, session_id: str) -> None:
    await client.session_update(session_id, update_agent_thought_text("Looking at the file."))
    await client.session_update(
        session_id, start_read_tool_call("read-1", "Read File", "README.md")
    )
    await client.session_update(session_id, update_tool_call("read-1", status="completed"))
    await client.session_update(session_id, update_agent_message_text("The README is fine."))


SCRIPTS: dict[str, Step] = {
    "cursor-retriable": _cursor_retriable,
    "cursor-tool-then-reset": _cursor_tool_then_reset,
    "codex-capacity": _codex_capacity,
    "claude-overloaded": _claude_overloaded,
    "clean": _clean,
}


class ScriptedAgent:
    """The SDK's `Agent` for one script; unimplemented methods answer "method not found"."""

    def __init__(self, script: str) -> None:
        self.script = script
        self._step = SCRIPTS[script]
        self._client: Client | None = None
        self._sessions = 0

    def on_connect(self, conn: Client) -> None:
        self._client = conn

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, **kwargs: Any
    ) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(),
            agent_info=Implementation(name=f"scripted-{self.script}", version="1"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        self._sessions += 1
        return NewSessionResponse(session_id=f"{self.script}-{self._sessions}")

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        if self._client is None:
            raise RequestError.internal_error({"details": "no client connection"})
        await self._step(self._client, session_id)
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.acp_agent", description=__doc__)
    parser.add_argument("--script", required=True, choices=sorted(SCRIPTS))
    args = parser.parse_args(argv)
    asyncio.run(run_agent(cast(Agent, ScriptedAgent(args.script))))


if __name__ == "__main__":
    main()
