"""`recovery demo`: a simulated orchestrator drives a fleet through the real runtime and
prints a report computed from Redis (actors/demo/). What runs is imported only when the
demo runs, so the other `recovery` commands do not pay for importing Ray.

Exit 0 when every invariant holds and no session failed; 1 otherwise; 2 for bad options.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Final

EXIT_FAILED: Final = 1
EXIT_ERROR: Final = 2


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def register(commands: Any) -> None:
    demo = commands.add_parser(
        "demo",
        help="drive a simulated fleet through the real runtime and report what happened",
    )
    demo.add_argument("--sessions", type=_positive_int, default=200, help="fleet size (200)")
    demo.add_argument("--seed", type=int, default=7, help="seed of the sessions' draws (7)")
    demo.add_argument(
        "--duration", type=_positive_float, default=20.0, metavar="S",
        help="seconds during which sessions start turns; then the fleet drains (20)",
    )  # fmt: skip
    demo.add_argument(
        "--drain-timeout", type=_positive_float, default=80.0, metavar="S",
        help="longest wait for the fleet to drain after the duration (80)",
    )  # fmt: skip
    demo.add_argument("--workers", type=_positive_int, default=2, help="rq workers (2)")
    demo.add_argument(
        "--corpus", type=Path, metavar="PATH",
        help="labelled corpus (default: the development corpus in the package)",
    )  # fmt: skip
    demo.add_argument("--json", action="store_true", help="print only the final JSON report")
    demo.set_defaults(run=run_demo_command)


def run_demo_command(args: argparse.Namespace) -> int:
    # deferred: Ray and rich take a while to import
    from rich.console import Console  # noqa: PLC0415

    from actors.demo.errors import DemoError  # noqa: PLC0415
    from actors.demo.options import DemoOptions  # noqa: PLC0415
    from actors.demo.render import report_lines  # noqa: PLC0415
    from actors.demo.runner import run_demo  # noqa: PLC0415

    corpus = {"corpus": args.corpus} if args.corpus is not None else {}
    options = DemoOptions(
        sessions=args.sessions, seed=args.seed, duration_s=args.duration,
        drain_timeout_s=args.drain_timeout, workers=args.workers, **corpus,
    )  # fmt: skip
    try:
        report = run_demo(options, None if args.json else Console())
    except DemoError as error:
        print(f"recovery demo: {error}", file=sys.stderr)
        return EXIT_ERROR
    if args.json:
        print(json.dumps(report, sort_keys=True))
    else:
        print("\n".join(report_lines(report)))
    failed = not report["ok"] or report["run"]["session_errors"]
    return EXIT_FAILED if failed else 0
