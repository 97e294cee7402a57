"""`recovery acp-replay`: captured ACP JSON lines in, observer events out."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from typing import Any

from actors.cli.acp import replay_lines
from actors.cli.main import build_parser

NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


def _prompt(request_id: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "session/prompt",
        "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "go"}]},
    }


def _say(text: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": "s1",
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": text},
            },
        },
    }


def _run(lines: list[str], agent: str = "cursor-acp") -> list[dict[str, Any]]:
    sink = io.StringIO()
    replay_lines(io.StringIO("\n".join(lines) + "\n"), sink, agent, NOW)
    return [json.loads(line) for line in sink.getvalue().splitlines()]


def test_a_cursor_marker_replays_to_one_error_event() -> None:
    out = _run(
        [
            json.dumps(_prompt(1)),
            json.dumps(_say("Error: RetriableError: Connection stalled")),
            json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}}),
            json.dumps(_prompt(2)),
            json.dumps({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}),
        ]
    )
    assert [(o["event"], o["generation"]) for o in out] == [
        ("chunk_suppressed", 1),
        ("turn_evidence", 1),
        ("error", 1),
        ("turn_evidence", 2),
        ("complete", 2),
    ]
    error = out[2]
    assert error["provider_error"] == {
        "source": "cursor_acp",
        "provider_id": "cursor-acp",
        "message": "Error: RetriableError: HTTP/2 stream closed with error code CANCEL (0x8).",
        "occurred_at": "2026-03-04T05:06:07Z",
    }
    assert error["classification"]["rule"] == "cursor.retriable_stream_reset.v1"
    assert error["classification"]["error_class"] == "transient"
    assert out[1]["evidence"]["output_observed"] is False


def test_bad_lines_are_reported_and_processing_goes_on() -> None:
    out = _run(
        [
            "not json",
            "[1]",
            "",
            json.dumps({"direction": "up", "message": {}}),
            json.dumps(_prompt(1)),
            json.dumps({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "x"}}),
        ],
        agent="claude-acp",
    )
    assert [o.get("line") for o in out[:3]] == [1, 2, 4]
    assert out[2]["field"] == "direction"
    assert [o["event"] for o in out[3:]] == ["turn_evidence", "error"]


def test_the_command_is_registered() -> None:
    args = build_parser().parse_args(
        ["acp-replay", "--agent", "cursor-acp", "--now", "2026-03-04T05:06:07Z"]
    )
    assert args.agent == "cursor-acp"
    assert args.now == NOW
