"""`recovery acp-replay`: replay a captured ACP session through the turn observer."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import IO, Any

from actors.cli.jsonlines import LineRefusedError, input_lines, line_error, parse_line
from catalogue.acp import AcpReplay, event_json
from catalogue.acp.replay import ReplayError


def register(commands: Any) -> None:
    replay = commands.add_parser(
        "acp-replay",
        help="replay captured ACP JSON-RPC lines from stdin; print the observer's events",
    )
    replay.add_argument("--agent", required=True, help="adapter id, e.g. cursor-acp")
    replay.add_argument(
        "--now", type=_aware_datetime, help="event time (default: the current UTC time)"
    )
    replay.set_defaults(run=run_acp_replay)


def _aware_datetime(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    if value.utcoffset() is None:
        raise argparse.ArgumentTypeError(f"needs a time zone, got {text!r}")
    return value


def run_acp_replay(args: argparse.Namespace) -> int:
    replay_lines(sys.stdin, sys.stdout, args.agent, args.now or datetime.now(UTC))
    return 0


def replay_lines(source: IO[str], sink: IO[str], agent: str, now: datetime) -> None:
    replay = AcpReplay(agent)

    def write(data: dict[str, Any]) -> None:
        sink.write(json.dumps(data, ensure_ascii=False) + "\n")
        sink.flush()

    for number, line in input_lines(source):
        try:
            data = parse_line(line, number)
        except LineRefusedError as refused:
            write(refused.answer)
            continue
        try:
            events = replay.feed(data, now)
        except ReplayError as exc:
            write(line_error(number, str(exc), exc.field))
            continue
        for event in events:
            write(event_json(event))
    for event in replay.finish(now):
        write(event_json(event))
