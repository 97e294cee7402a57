"""Records the demo's ACP captures from the scripted agent (tests/acp_agent.py).

Each capture is the wire transcript of one live session — initialize, session/new, one
session/prompt — between the official SDK's client side and a scripted agent subprocess,
one `{"direction": …, "message": …}` line per JSON-RPC message in wire order. The demo
replays them in-process through the ACP observer (actors/demo/acp_turns.py), the path
`recovery acp-replay` takes, instead of starting a subprocess per turn.

    .venv/bin/python -m tests.actors.demo_recorder    # rewrites actors/demo/captures/
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, cast

from acp import PROTOCOL_VERSION, Client, RequestError, text_block
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AllowedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)
from acp.stdio import spawn_agent_process

from actors.demo.acp_turns import CAPTURES, CAPTURES_DIR

ROOT: Final = Path(__file__).resolve().parents[2]
TIMEOUT_S: Final = 30.0
PROMPT_TEXT: Final = "fix the failing test"


@dataclass
class RecordingClient:
    """The SDK client of one recording: answers what the scripts ask, keeps the wire."""

    lines: list[dict[str, Any] | None] = field(default_factory=list)
    _prompt_slot: int | None = None

    def on_stream(self, event: StreamEvent) -> None:
        message = event.message
        if event.direction is StreamDirection.INCOMING:
            self.lines.append({"direction": "agent_to_client", "message": message})
            return
        entry = {"direction": "client_to_agent", "message": message}
        if message.get("method") == "session/prompt" and self._prompt_slot is not None:
            # Seen once the write completed: it goes where the request was sent.
            self.lines[self._prompt_slot] = entry
            self._prompt_slot = None
            return
        self.lines.append(entry)

    async def prompt(self, conn: Any, session_id: str) -> None:
        self._prompt_slot = len(self.lines)
        self.lines.append(None)
        with contextlib.suppress(RequestError):  # its error response is on the wire already
            await conn.prompt(session_id=session_id, prompt=[text_block(PROMPT_TEXT)])

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:  # fmt: skip
        chosen = AllowedOutcome(outcome="selected", option_id=options[0].option_id)
        return RequestPermissionResponse(outcome=chosen)


async def _record(script: str) -> list[dict[str, Any]]:
    client = RecordingClient()
    async with spawn_agent_process(
        cast(Client, client), sys.executable, "-m", "tests.acp_agent", "--script", script,
        cwd=ROOT, observers=[client.on_stream],
    ) as (conn, process):  # fmt: skip
        try:
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd="/workspace", mcp_servers=[])
            await client.prompt(conn, session.session_id)
        finally:
            if process.returncode is None:
                process.terminate()
            await process.wait()
    return [line for line in client.lines if line is not None]


def record(script: str) -> list[dict[str, Any]]:
    """The wire transcript of one live session of `script`."""
    return asyncio.run(asyncio.wait_for(_record(script), TIMEOUT_S))


def capture_text(lines: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines)


def main() -> None:
    CAPTURES_DIR.mkdir(parents=True, exist_ok=True)
    for script in sorted({capture.script for capture in CAPTURES.values()}):
        path = CAPTURES_DIR / f"{script}.jsonl"
        path.write_text(capture_text(record(script)), encoding="utf-8")
        print(f"recorded {path}")


if __name__ == "__main__":
    main()
