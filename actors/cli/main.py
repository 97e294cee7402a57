"""The `recovery` command line. Subcommands live in small modules beside this one."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Final

from actors.cli import acp as cli_acp
from actors.cli import catalogue as cli_catalogue
from actors.cli import circuit_override as cli_circuit_override
from actors.cli import circuits as cli_circuits
from actors.cli import demo as cli_demo
from actors.cli import notices as cli_notices
from actors.cli import policy as cli_policy
from actors.cli import reconcile as cli_reconcile
from actors.cli import routes as cli_routes
from actors.cli import top as cli_top
from actors.cli import up_command as cli_up
from actors.cli import workers as cli_workers

DISTRIBUTION: Final = "provider-recovery"


def installed_version() -> str:
    """The installed distribution's version (its metadata), or a note that there is none."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # imported from a checkout that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="recovery",
        description="Provider-error recovery runtime for coding-agent fleets.",
    )
    parser.add_argument("--version", action="version", version=f"recovery {installed_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    cli_catalogue.register(commands)
    cli_policy.register(commands)
    cli_routes.register(commands)
    cli_circuits.register(commands)
    cli_circuit_override.register(commands)
    cli_notices.register(commands)
    cli_reconcile.register(commands)
    cli_acp.register(commands)
    cli_up.register(commands)
    cli_demo.register(commands)
    cli_top.register(commands)
    cli_workers.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.run(args)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); nothing more to say.
        sys.stderr.close()
        return 1
    return code


if __name__ == "__main__":
    raise SystemExit(main())
