"""`recovery top`: live counts for a person at a terminal, read straight from Redis.

Nothing of the runtime (no Ray) needs to be running. Each frame shows routes by state,
pending schedules with the next deadlines, transitions per second from the events
stream, dispatch-ledger outcomes and circuits by state; actors/cli/top_frame.py says which
figures are exact and which are sampled, actors/cli/top_reads.py what a frame costs Redis.
The view refreshes every `--interval` seconds until Ctrl-C; `--once` prints one frame and
exits, `--once --json` prints it as one JSON object.

Redis: `--redis-url`, else `REDIS_URL`, else the embedded Redis of `recovery up`
(`<data dir>/redis.sock`, the data dir being `RECOVERY_DATA_DIR` or the default) when its
socket exists. A problem (no URL, Redis unreachable, a bad prefix, unreadable data) is one
line on stderr and exit 2; a bad option value is argparse's usage error naming the option
and the value (exit 2).
"""

from __future__ import annotations

import argparse
import math
import sys
import threading
from collections.abc import Callable
from datetime import UTC
from typing import Any, Final

import redis
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from actors.cli.common import CliError, connect
from actors.cli.format import relative
from actors.cli.installation import installation, installation_options
from actors.cli.top_frame import SampledCounts, TopFrame, compute_frame
from actors.cli.top_reads import TopLimits, read_frame
from actors.errors import RecoveryError, error_text
from actors.keys import KeySpace

EXIT_ERROR: Final = 2
MAX_DEADLINES: Final = 100
PIPE_WIDTH: Final = 200
_DEFAULTS: Final = TopLimits()


def register(commands: Any) -> None:
    command = commands.add_parser(
        "top",
        help="live counts from Redis: routes, schedules, transitions/s, circuits",
        parents=[installation_options()],
    )
    command.add_argument(
        "--interval", type=positive_seconds, default=1.0, metavar="SECONDS",
        help="seconds between refreshes (default: 1)",
    )  # fmt: skip
    command.add_argument("--once", action="store_true", help="print one frame and exit")
    command.add_argument("--json", action="store_true", help="with --once: the frame as JSON")
    command.add_argument(
        "--window", type=positive_seconds, default=_DEFAULTS.window_s, metavar="SECONDS",
        help=f"transitions per second over this window (default: {_DEFAULTS.window_s:g})",
    )  # fmt: skip
    command.add_argument(
        "--deadlines", type=deadline_count, default=_DEFAULTS.deadlines, metavar="N",
        help=f"how many next deadlines to show (default: {_DEFAULTS.deadlines})",
    )  # fmt: skip
    command.add_argument(
        "--scan-keys", type=scan_budget, default=_DEFAULTS.scan_keys, metavar="N",
        help="keys the route/dispatch SCAN may examine per frame; beyond it the counts "
        f"are a sample (default: {_DEFAULTS.scan_keys})",
    )  # fmt: skip
    command.set_defaults(run=run_top)


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return value


def _bounded_int(text: str, low: int, high: int | None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < low or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"from {low} to {high}"
        raise argparse.ArgumentTypeError(f"must be an integer {bounds}, got {text!r}")
    return value


def deadline_count(text: str) -> int:
    return _bounded_int(text, 0, MAX_DEADLINES)


def scan_budget(text: str) -> int:
    return _bounded_int(text, 1, None)


def run_top(args: argparse.Namespace) -> int:
    limits = TopLimits(window_s=args.window, deadlines=args.deadlines, scan_keys=args.scan_keys)
    try:
        if args.json and not args.once:
            raise CliError("--json needs --once (the live view is for a terminal)")
        found = installation(args)  # a bad setting or prefix fails before connecting
        keys = found.settings.keys
        client = connect(found.url)
        with client:
            if args.once:
                show_once(client, keys, limits, as_json=args.json)
            else:
                run_live(client, keys, limits, args.interval)
    except (CliError, RecoveryError) as error:
        return _problem(error_text(error))
    except redis.RedisError as error:
        return _problem(f"cannot read Redis: {error_text(error)}")
    return 0


def show_once(client: redis.Redis, keys: KeySpace, limits: TopLimits, *, as_json: bool) -> None:
    raw, _cursor = read_frame(client, keys, limits)
    frame = compute_frame(raw)
    if as_json:
        print(frame.model_dump_json(), flush=True)
    else:
        console = Console()
        if not console.is_terminal:  # a file or a pipe: one line per row, never wrapped
            console = Console(width=PIPE_WIDTH)
        console.print(render(frame))


def run_live(
    client: redis.Redis,
    keys: KeySpace,
    limits: TopLimits,
    interval_s: float,
    *,
    stop: threading.Event | None = None,
    shown: Callable[[TopFrame], None] | None = None,
) -> None:
    """Redraw a frame every `interval_s` until Ctrl-C (or `stop`, for tests; `shown` sees
    each frame after it is drawn). The SCAN cursor carries over, so a large fleet is
    sampled part by part."""
    stop = stop or threading.Event()
    cursor = 0
    with Live(Text("reading Redis…"), auto_refresh=False) as live:
        try:
            while not stop.is_set():
                raw, cursor = read_frame(client, keys, limits, cursor)
                frame = compute_frame(raw)
                live.update(render(frame), refresh=True)
                if shown is not None:
                    shown(frame)
                stop.wait(interval_s)
        except KeyboardInterrupt:
            pass  # Ctrl-C is how the live view ends


# -- rendering ----------------------------------------------------------------------------


def render(frame: TopFrame) -> RenderableType:
    at = frame.at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    title = Text.assemble(
        ("recovery top", "bold"), f"  prefix {frame.prefix}  at {at} (Redis clock)"
    )
    summary = frame.schedules
    return Group(
        title,
        Text(f"routes: {_coverage(frame.routes)}", style="bold"),
        _counts_table(frame.routes, "STATE"),
        Text(
            f"schedules: {summary.pending} pending, {summary.overdue} overdue (exact)",
            style="bold",
        ),
        _deadlines_table(frame),
        _transitions_line(frame),
        Text(f"dispatches: {_coverage(frame.dispatches)}", style="bold"),
        _counts_table(frame.dispatches, "LEDGER"),
        _circuits_line(frame),
    )


def _coverage(counts: SampledCounts) -> str:
    if counts.exact:
        return f"{counts.seen} (exact: a full SCAN)"
    return (
        f"a sample of {counts.seen} (the SCAN stopped after {counts.scan_calls} calls; "
        "read the proportions, not totals)"
    )


def _counts_table(counts: SampledCounts, column: str) -> Table:
    table = Table(box=None, padding=(0, 1, 0, 2))
    table.add_column(column)
    table.add_column("COUNT", justify="right")
    for value, count in counts.by_state.items():
        table.add_row(value, str(count), style=None if count else "dim")
    return table


def _deadlines_table(frame: TopFrame) -> Table:
    table = Table(box=None, padding=(0, 1, 0, 2))
    for column in ("ROUTE", "STATE", "OUTCOME", "DUE", "CANDIDATE", "CODE"):
        table.add_column(column, no_wrap=True)
    for entry in frame.schedules.next:
        table.add_row(
            entry.route_id, entry.state, entry.pending_outcome or "-",
            relative(entry.deadline, frame.at), entry.candidate_id or "-", entry.code or "-",
        )  # fmt: skip
    return table


def _transitions_line(frame: TopFrame) -> Text:
    rate = frame.transitions
    how = "exact" if rate.exact else f"estimated from the newest {rate.count}"
    into = ", ".join(f"{state} {count}" for state, count in sorted(rate.by_state.items()))
    return Text.assemble(
        (f"transitions: {rate.per_s:g}/s", "bold"),
        f" over the last {rate.window_s:g} s ({how}); into: {into or 'none'}; "
        f"events stream length {rate.stream_length}",
    )


def _circuits_line(frame: TopFrame) -> Text:
    total = sum(frame.circuits.values())
    if not total:
        return Text("circuits: none", style="bold")
    parts = ", ".join(f"{state} {count}" for state, count in frame.circuits.items())
    hosts = "" if frame.circuit_hosts is None else f" · circuit hosts {frame.circuit_hosts}"
    return Text.assemble(
        ("circuits: ", "bold"), f"{parts} (exact) · parked now {frame.parked}{hosts}"
    )


def _problem(message: str) -> int:
    print(f"recovery top: {message}", file=sys.stderr)
    return EXIT_ERROR
