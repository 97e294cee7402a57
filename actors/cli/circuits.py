"""`recovery circuits`: every known circuit with its state, open-until, probe holder,
parked count and the circuit host that owns it, read straight from Redis (as `recovery
routes` reads routes; the owner from the installation's record and its circuit ring).

Nothing of the runtime needs to be running: a CircuitStore on `--redis-url` (else
`REDIS_URL`) reads the index of known circuits under one prefix, then each circuit's hash
and parked count in pipelined batches (`CircuitStore.all_circuits`).
Human output is aligned text; `--json` prints one JSON object per line. A problem (no URL,
Redis unreachable, a bad prefix, unreadable data) is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from actors.cli.common import CliError, connect
from actors.cli.format import due_in_s, relative, table
from actors.cli.installation import installation, installation_options
from actors.cli.policy import aware_datetime
from actors.errors import RecoveryError, error_text
from actors.hosting.names import Owners
from actors.keys import KeySpace
from actors.routes.circuit_models import CircuitView
from actors.store.circuit_store import CircuitStore
from actors.store.installation import read_installation
from policy.decisions import utc_iso

EXIT_ERROR: Final = 2
TIMEOUT_S: Final = 5.0


def register(commands: Any) -> None:
    command = commands.add_parser(
        "circuits",
        help="every provider-resource circuit: state, open-until, probe, parked",
        parents=[installation_options()],
    )
    command.add_argument("--json", action="store_true", help="one JSON object per line")
    command.add_argument(
        "--now",
        type=aware_datetime,
        metavar="TIME",
        help="reference time for 'in 4 s' / 'overdue 2 s' (default: the current time)",
    )
    command.set_defaults(run=run_circuits)


def run_circuits(args: argparse.Namespace) -> int:
    try:
        found = installation(args)  # a bad setting or prefix fails before connecting
        keys = found.settings.keys
        circuits = asyncio.run(read_circuits(found.url, keys))
        owners = circuit_owners(found.url, keys)
    except (CliError, RecoveryError) as error:
        print(f"recovery circuits: {error_text(error)}", file=sys.stderr)
        return EXIT_ERROR
    print_circuits(circuits, keys, args, owners)
    return 0


def circuit_owners(url: str, keys: KeySpace) -> Callable[[str], str | None]:
    """The name of the circuit host owning a resource id, by the installation's record
    (None for every circuit when none is recorded or it has no circuit hosts: then
    the route hosts write circuits themselves)."""
    connection = connect(url)
    try:
        record = read_installation(connection, keys)
    finally:
        connection.close()
    names = () if record is None else record.circuit_host_names
    if not names:
        return lambda _resource_id: None
    owners = Owners(len(names), kind="circuit")
    return lambda resource_id: names[owners.index_of(resource_id)]


async def read_circuits(url: str, keys: KeySpace) -> list[CircuitView]:
    """Every circuit in the index under the prefix, by label, read as the store reads."""
    try:
        store = CircuitStore.connect(url, keys=keys, max_connections=2, timeout_s=TIMEOUT_S)
    except ValueError as error:
        raise CliError(f"invalid Redis URL: {error_text(error)}") from None
    async with store:
        return await store.all_circuits()


def circuit_json(view: CircuitView, now: datetime, host: str | None = None) -> dict[str, Any]:
    state = view.state
    lease = state.lease
    return {
        "resource_id": view.resource_id,
        "label": view.resource.label,
        "provider": view.resource.provider,
        "model": view.resource.model,
        "credential_fingerprint": view.resource.credential_fingerprint,
        "state": state.status.value,
        "open_until": None if state.open_until is None else utc_iso(state.open_until),
        "open_in_s": due_in_s(state.open_until, now),
        "reason": state.reason,
        "failures": len(state.recent_failures),
        "backoff_step": state.failed_probes,
        "probe_holder": None if lease is None else lease.holder,
        "lease_expires_at": None if lease is None else utc_iso(lease.expires_at),
        "parked": view.parked,
        "host": host,
        "version": view.version,
        "updated_at": None if view.updated_at is None else utc_iso(view.updated_at),
    }


def circuit_rows(
    circuits: Sequence[CircuitView], now: datetime, owner: Callable[[str], str | None]
) -> list[str]:
    headers = ("RESOURCE", "STATE", "OPEN UNTIL", "DUE", "PROBE HOLDER", "PARKED", "HOST", "REASON")
    rows = []
    for view in circuits:
        until = view.open_until
        lease = view.state.lease
        holder = None if lease is None else f"{lease.holder} (until {when(lease.expires_at)})"
        due = None if until is None else relative(until, now)
        rows.append(
            (view.resource.label, view.status.value, when(until), due, holder, view.parked,
             owner(view.resource_id), view.state.reason)
        )  # fmt: skip
    return table(headers, rows)


def print_circuits(
    circuits: Sequence[CircuitView],
    keys: KeySpace,
    args: argparse.Namespace,
    owner: Callable[[str], str | None],
) -> None:
    now = args.now.astimezone(UTC) if args.now else datetime.now(UTC)
    if args.json:
        for view in circuits:
            found = circuit_json(view, now, owner(view.resource_id))
            print(json.dumps(found, ensure_ascii=False), flush=True)
        return
    if not circuits:
        print(f"no circuits under prefix {keys.prefix!r}")
        return
    for line in circuit_rows(circuits, now, owner):
        print(line)


def when(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
