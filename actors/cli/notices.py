"""`recovery notices`: the outstanding transcript retry notices (metadata `retrying: true`)
of every session, or of one (`--session`), read straight from Redis (the Redis transcript's
keys under the installation's prefix; an orchestrator's own transcript port keeps its
notices elsewhere).

Human output is aligned text; `--json` prints one JSON object per line (the message as the
transcript stores it). A problem (no URL, Redis unreachable, a bad prefix or session id)
is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Final

from redis.exceptions import RedisError

from actors.cli.common import CliError, connect
from actors.cli.format import table
from actors.cli.installation import installation, installation_options
from actors.errors import RecoveryError, error_text
from actors.store.transcript import TranscriptMessage
from actors.store.transcript_reads import read_notices
from policy.decisions import utc_iso

EXIT_ERROR: Final = 2


def register(commands: Any) -> None:
    command = commands.add_parser(
        "notices",
        help="outstanding transcript retry notices (retrying: true), by session",
        parents=[installation_options()],
    )
    command.add_argument("--session", metavar="ID", help="only this session (route id)")
    command.add_argument("--json", action="store_true", help="one JSON object per line")
    command.set_defaults(run=run_notices)


def run_notices(args: argparse.Namespace) -> int:
    try:
        found = installation(args)
        client = connect(found.url)
        try:
            notices = read_notices(client, found.settings.keys, args.session)
        finally:
            client.close()
    except (CliError, RecoveryError, RedisError) as error:
        print(f"recovery notices: {error_text(error)}", file=sys.stderr)
        return EXIT_ERROR
    if args.json:
        for notice in notices:
            print(json.dumps(notice.model_dump(mode="json"), ensure_ascii=False), flush=True)
        return 0
    if not notices:
        where = f"session {args.session!r}" if args.session else "any session"
        print(f"no retry notices for {where}")
        return 0
    for line in table(("SESSION", "TASK", "CREATED", "RETRY", "DEADLINE", "MESSAGE"),
                      [_row(n) for n in notices]):  # fmt: skip
        print(line)
    return 0


def _row(notice: TranscriptMessage) -> tuple[object, ...]:
    metadata = notice.metadata
    retry = f"{metadata.get('retry_ordinal')} of {metadata.get('retry_max')}"
    return (
        notice.session_id, notice.task_id, utc_iso(notice.created_at), retry,
        metadata.get("deadline"), notice.id,
    )  # fmt: skip
