"""`recovery up`: run the recovery runtime in the foreground until Ctrl-C or SIGTERM.

The arguments are parsed here; what runs is actors/cli/up.py (its docstring lists the lines
`up` prints), imported only when `up` runs so that the other `recovery` commands do not
pay for importing Ray. Settings: defaults < `--config FILE` (or `RECOVERY_CONFIG`) <
environment variables < these flags (actors/engine/config.py lists them all).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(commands: Any) -> None:
    command = commands.add_parser(
        "up", help="run the runtime (Redis, Ray route hosts, rq workers) in the foreground"
    )
    command.add_argument(
        "--config", type=Path, metavar="FILE", help="TOML settings (default: $RECOVERY_CONFIG)"
    )
    command.add_argument(
        "--redis-url",
        metavar="URL",
        help="external Redis (default: $REDIS_URL, else embedded; use $REDIS_URL for a URL "
        "with a password: any user can read a command line)",
    )
    command.add_argument("--ray-address", metavar="ADDRESS", help="Ray cluster (default: local)")
    command.add_argument("--hosts", metavar="N", help="route host actors")
    command.add_argument("--dispatcher", metavar="MODULE:CALLABLE", help="dispatch entry point")
    command.add_argument("--workers", metavar="N", help="rq worker processes")
    command.add_argument("--queue", metavar="NAME", help="rq dispatch queue")
    command.add_argument("--data-dir", metavar="DIR", help="embedded Redis data folder")
    command.add_argument("--key-prefix", metavar="PREFIX", help="Redis key prefix")
    command.add_argument(
        "--api-address",
        metavar="HOST:PORT",
        help="where the HTTP API listens (default: $RECOVERY_API_ADDRESS, else 127.0.0.1:8484; "
        "'off': none; beyond loopback it needs $RECOVERY_API_TOKEN or $RECOVERY_API_TOKEN_FILE)",
    )
    command.set_defaults(run=run_up)


def run_up(args: argparse.Namespace) -> int:
    from actors.cli.up import run  # noqa: PLC0415  # deferred: Ray takes ~1 s to import

    return run(args)
