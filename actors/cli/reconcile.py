"""`recovery reconcile`: one reconciliation pass over the pending dispatches.

For every route in `retrying` under the prefix (actors/jobs/dispatch.py, `reconcile`): a
dispatch that provably never started is enqueued again on the dispatch queue; one that
started and never finished while its worker is gone (or too long ago) moves its route to
`action_required`; anything else is left. Prints one JSON line:

    {"prefix": "recovery", "queue": "recovery-dispatch", "requeued": 1, "ambiguous": 0,
     "left": 2, "routes": {"requeued": ["s-1"], "ambiguous": [], "left": ["s-2", "s-3"]}}

The dispatcher import path comes from `--dispatcher`, else `RECOVERY_DISPATCHER`. A
problem (no URL or dispatcher, Redis unreachable, a bad prefix) is one line on stderr and
exit 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Final

import redis

from actors.cli.common import CliError
from actors.cli.installation import installation, installation_options
from actors.errors import RecoveryError, error_text
from actors.jobs.queue import default_queue_name, dispatch_queue
from actors.jobs.reconcile import reconcile
from actors.jobs.worker_engine import WorkerEngine

EXIT_ERROR: Final = 2
TIMEOUT_S: Final = 5.0
DISPATCHER_ENV: Final = "RECOVERY_DISPATCHER"


def register(commands: Any) -> None:
    command = commands.add_parser(
        "reconcile",
        help="re-enqueue provably undispatched retries, settle ambiguous dispatches",
        parents=[installation_options()],
    )
    command.add_argument(
        "--dispatcher",
        metavar="MODULE:CALLABLE",
        help=f"the orchestrator's dispatcher (default: ${DISPATCHER_ENV})",
    )
    command.add_argument(
        "--queue", metavar="NAME", help="the rq dispatch queue (default: <prefix>-dispatch)"
    )
    command.set_defaults(run=run_reconcile)


def run_reconcile(args: argparse.Namespace) -> int:
    try:
        line = reconcile_line(args, datetime.now(UTC))
    except RecoveryError as error:  # a CliError among them
        message = error_text(error)
    except redis.RedisError as error:
        message = f"cannot reach Redis: {error_text(error)}"
    else:
        print(line)
        return 0
    print(f"recovery reconcile: {message}", file=sys.stderr)
    return EXIT_ERROR


def reconcile_line(args: argparse.Namespace, now: datetime) -> str:
    found = installation(args)  # the installation's settings, as its hosts write with them
    settings = found.settings
    if args.dispatcher:
        settings = replace(settings, dispatcher=args.dispatcher)
    if args.queue:
        settings = replace(settings, queue_name=args.queue)
    dispatcher = settings.dispatcher
    if not dispatcher:
        raise CliError(f"no dispatcher: pass --dispatcher MODULE:CALLABLE or set {DISPATCHER_ENV}")
    keys = settings.keys
    queue_name = settings.queue_name or default_queue_name(keys.prefix)
    url = found.url
    connection = redis.Redis.from_url(
        url, socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S
    )
    engine = WorkerEngine(url, settings)
    try:
        queue = dispatch_queue(connection, queue_name)
        report = reconcile(
            queue, keys, dispatcher, now=now, engine=engine,
            dispatch_timeout_s=settings.dispatch_timeout_s,
        )  # fmt: skip
    finally:
        engine.close()
        connection.close()
    routes = {"requeued": report.requeued, "ambiguous": report.ambiguous, "left": report.left}
    summary: dict[str, Any] = {"prefix": keys.prefix, "queue": queue_name}
    summary.update({name: len(ids) for name, ids in routes.items()})
    summary["routes"] = routes
    return json.dumps(summary, separators=(",", ":"))
