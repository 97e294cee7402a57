"""`recovery circuit RESOURCE open --until T | close`: an operator's override of one
circuit, as a command to the circuit actor that owns it (actors/hosting/circuit_handle.py,
through the attached installation: actors/cli/operator.py), which applies it with the
store's fenced write and records it on the circuit events stream.

RESOURCE is what `recovery circuits` prints: the circuit's label (`provider/model/
fingerprint-prefix`) or its resource id (32 hex). Only a known circuit (one ever written)
can be named; a label two circuits share is refused, listing their ids. `--until` is an
ISO-8601 time with a zone (`2025-06-01T18:00:00Z`, `...+02:00`) or a duration from now
(`90s`, `10m`, `2h`, `1d`, `1h30m`). `close` releases the routes parked on the circuit in
budgeted waves, as a probe success does. Prints the circuit it produced (`--json`: one
JSON object, `recovery circuits --json`'s fields plus `override`). Exit codes as for
route actions (actors/cli/operator.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from actors.cli.circuits import circuit_json, circuit_owners, circuit_rows, read_circuits
from actors.cli.common import CliError
from actors.cli.installation import installation, installation_options
from actors.cli.operator import EXIT_CODES_HELP, attached, reported, unreachable
from actors.hosting.circuit_handle import NoCircuitHostsError, circuit_handle
from actors.keys import RESOURCE_ID_PATTERN
from actors.routes.circuit_models import CircuitView, OverrideOutcome
from policy.decisions import utc_iso

CIRCUIT_ACTIONS: Final = ("open", "close")
_DURATION: Final = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
_RESOURCE_ID: Final = re.compile(RESOURCE_ID_PATTERN)
_UNITS_S: Final = (86_400, 3600, 60, 1)
# Far beyond any circuit's max_open_s (30 days by default; the circuit's owner refuses an
# until past its own), short of what a datetime can hold.
MAX_DURATION_S: Final = 3650 * 86_400


def register(commands: Any) -> None:
    command = commands.add_parser(
        "circuit", parents=[installation_options()],
        help="an operator's override of one circuit: open it until a time, or close it",
        epilog=EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    command.add_argument(
        "resource", metavar="RESOURCE",
        help="the circuit's label or resource id, as `recovery circuits` prints them",
    )  # fmt: skip
    command.add_argument(
        "action", choices=CIRCUIT_ACTIONS, metavar="ACTION",
        help="open (needs --until) or close (releases its parked routes)",
    )  # fmt: skip
    command.add_argument(
        "--until", type=until_value, metavar="T",
        help="with open: until when, an ISO-8601 time with a zone or a duration from now "
        "(90s, 10m, 2h, 1d, 1h30m)",
    )  # fmt: skip
    command.add_argument("--json", action="store_true", help="one JSON object")
    command.set_defaults(run=run_circuit)


def until_value(text: str) -> datetime | timedelta:
    """`--until`: an aware ISO-8601 time, or a positive duration like `10m` or `1h30m`."""
    duration = _DURATION.fullmatch(text)
    if text and duration is not None:
        parts = zip(duration.groups(), _UNITS_S, strict=True)
        seconds = sum(int(n) * unit for n, unit in parts if n)
        if seconds <= 0:
            raise argparse.ArgumentTypeError(f"a duration must be longer than 0, got {text!r}")
        if seconds > MAX_DURATION_S:
            raise argparse.ArgumentTypeError(
                f"a duration must be at most {MAX_DURATION_S // 86_400} days, got {text!r}"
            )
        return timedelta(seconds=seconds)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not an ISO-8601 time with a zone nor a duration like 10m: {text!r}"
        ) from None
    if moment.utcoffset() is None:
        raise argparse.ArgumentTypeError(
            f"needs a time zone (Z or +02:00, say), got {text!r}"
        ) from None
    return moment.astimezone(UTC)


def until_of(given: datetime | timedelta, now: datetime) -> datetime:
    """The moment `--until` names, at `now` (a duration counts from the next whole
    second, so the time shown is as readable as the one typed); CliError when it is not
    in the future."""
    if isinstance(given, timedelta):
        second = now.replace(microsecond=0)
        return (second if second == now else second + timedelta(seconds=1)) + given
    until = given
    if until <= now:
        raise CliError(f"--until {utc_iso(until)} is not in the future (now {utc_iso(now)})")
    return until


def select_circuit(circuits: Sequence[CircuitView], resource: str, prefix: str) -> CircuitView:
    """The one circuit `resource` names (its resource id, else its label), or CliError:
    none (naming where to look) or several (listing their ids)."""
    if _RESOURCE_ID.fullmatch(resource):
        found = [view for view in circuits if view.resource_id == resource]
    else:
        found = [view for view in circuits if view.resource.label == resource]
    if len(found) == 1:
        return found[0]
    if not found:
        raise CliError(
            f"no circuit {resource!r} under prefix {prefix!r}: `recovery circuits` lists "
            "them (pass a label or a resource id it prints)"
        )
    listed = ", ".join(f"{view.resource_id} ({view.resource.provider})" for view in found)
    raise CliError(
        f"label {resource!r} names {len(found)} circuits: {listed}; pass one resource id"
    )


def run_circuit(args: argparse.Namespace) -> int:
    return reported(f"circuit {args.resource} {args.action}", lambda: _override(args))


def _override(args: argparse.Namespace) -> int:
    if args.action == "open" and args.until is None:
        raise CliError("open needs --until T (an ISO-8601 time with a zone, or a duration)")
    if args.action == "close" and args.until is not None:
        raise CliError("--until goes with open, not with close")
    found = installation(args)
    keys = found.settings.keys
    view = select_circuit(asyncio.run(read_circuits(found.url, keys)), args.resource, keys.prefix)
    until = None if args.until is None else until_of(args.until, datetime.now(UTC))
    with attached(found) as runtime:
        try:
            handle = circuit_handle(runtime, view.resource)
        except NoCircuitHostsError as error:
            raise unreachable(str(error)) from None
        outcome = asyncio.run(handle.close() if until is None else handle.open_until(until))
    owner = circuit_owners(found.url, keys)(view.resource_id)
    _print(outcome, args, owner)
    return 0


def override_json(outcome: OverrideOutcome, action: str) -> dict[str, Any]:
    release = outcome.release
    return {
        "action": action,
        "changed": outcome.changed,
        "event_id": outcome.event_id,
        "released": 0 if release is None else len(release.slots),
    }


def override_line(outcome: OverrideOutcome, action: str) -> str:
    """What the override did, in words, under the circuit's row."""
    if not outcome.changed:
        return f"override: {action}: nothing to change (the circuit already was so)"
    release = outcome.release
    until = outcome.view.open_until
    done = "closed" if until is None else f"open until {utc_iso(until)}"
    if release is not None and release.slots:
        done += f", {len(release.slots)} parked route(s) released in waves"
    return f"override: {done} (event {outcome.event_id})"


def _print(outcome: OverrideOutcome, args: argparse.Namespace, owner: str | None) -> None:
    now = datetime.now(UTC)
    if args.json:
        payload = circuit_json(outcome.view, now, owner)
        payload["override"] = override_json(outcome, args.action)
        print(json.dumps(payload, ensure_ascii=False), flush=True)
        return
    for line in circuit_rows([outcome.view], now, lambda _resource_id: owner):
        print(line)
    print(override_line(outcome, args.action))
