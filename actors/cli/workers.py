"""`recovery workers`: rq workers for a running installation on this node, in the
foreground until SIGTERM or Ctrl-C, so dispatch capacity grows with the cluster
(cluster.yaml runs it on every worker node).

The workers take the installation's dispatch queue, dispatcher and settings from its
record in Redis (what `recovery up` or the owning runtime wrote), and this process's
installation key (`RECOVERY_INSTALLATION_KEY` / the TOML file), which must be the
installation's: it is compared by digest, never recorded. A worker that dies is replaced,
and the dispatches it had started are reconciled.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any, Final

import redis

from actors.cli.common import CliError
from actors.cli.installation import installation, installation_options
from actors.engine.settings import EngineSettings
from actors.errors import RecoveryError
from actors.jobs.queue import dispatch_queue
from actors.jobs.reconcile import reconcile
from actors.jobs.worker_engine import WorkerEngine
from actors.jobs.workers import WorkerPool, worker_env
from actors.keys import KeySpace
from actors.store.installation import InstallationRecord, NoInstallationError, recorded_at

EXIT_ERROR: Final = 2
DEFAULT_WAIT_S: Final = 300.0
WAIT_POLL_S: Final = 1.0
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)


def register(commands: Any) -> None:
    command = commands.add_parser(
        "workers",
        help="run rq dispatch workers for a running installation on this node",
        parents=[installation_options()],
    )
    command.add_argument(
        "--count", type=int, default=1, metavar="N", help="worker processes (default: 1)"
    )
    command.add_argument(
        "--worker-path", action="append", default=[], metavar="PATH",
        help="a folder the workers import the dispatcher from (repeatable)",
    )  # fmt: skip
    command.add_argument(
        "--wait", type=float, default=DEFAULT_WAIT_S, metavar="SECONDS",
        help="how long to wait for the installation to be recorded (a node may start "
        f"before the head's `recovery up`; default: {DEFAULT_WAIT_S:g})",
    )  # fmt: skip
    command.set_defaults(run=run_workers)


def installation_settings(args: argparse.Namespace) -> tuple[str, EngineSettings]:
    """The Redis URL and the installation's settings, with this process's key. Raises
    CliError when nothing is recorded, the key differs or there is no dispatcher."""
    found = installation(args)
    record = _wait_recorded(found.url, found.settings.keys, args.wait)
    settings = EngineSettings.from_public(
        record.settings, found.config.installation_key, found.config.webhook_secret
    )
    if settings.key_digest() != record.key_digest:
        raise CliError(
            "this process's installation key (RECOVERY_INSTALLATION_KEY) is not the "
            f"installation's; its workers would see other circuits than prefix "
            f"{settings.key_prefix!r}'s hosts"
        )
    if settings.dispatcher is None:
        raise CliError(f"installation {settings.key_prefix!r} has no dispatcher to run")
    if settings.dispatcher == "webhook" and not settings.webhook_secret:
        raise CliError(
            f"installation {settings.key_prefix!r} dispatches by webhook: its workers need "
            "the webhook secret (RECOVERY_WEBHOOK_SECRET)"
        )
    return found.url, settings


def _wait_recorded(url: str, keys: KeySpace, wait_s: float) -> InstallationRecord:
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return recorded_at(url, keys)
        except NoInstallationError:
            if time.monotonic() >= deadline:
                raise
        time.sleep(WAIT_POLL_S)  # the head's `recovery up` is still starting: bounded


def run_workers(args: argparse.Namespace) -> int:
    try:
        if args.count < 1:
            raise CliError(f"--count must be >= 1, got {args.count}")
        url, settings = installation_settings(args)
    except RecoveryError as error:  # a CliError among them
        print(f"recovery workers: {error}", file=sys.stderr)
        return EXIT_ERROR
    stop = threading.Event()
    for number in STOP_SIGNALS:
        signal.signal(number, lambda _number, _frame: stop.set())
    pool = WorkerPool(
        url, str(settings.queue_name), count=args.count,
        name_prefix=f"{settings.key_prefix}-node-worker",
        env={**worker_env(tuple(args.worker_path)), **settings.to_environment()},
        on_death=lambda name: _reconcile(url, settings, name),
    ).start()  # fmt: skip
    names = ", ".join(worker.name for worker in pool.workers)
    print(f"workers: {names} on queue {settings.queue_name}", flush=True)
    try:
        stop.wait()
    finally:
        pool.stop()
    print("stopped", flush=True)
    return 0


def _reconcile(url: str, settings: EngineSettings, name: str) -> None:
    """A dead worker's started dispatches, settled as the owner's reconcile would."""
    assert settings.dispatcher is not None  # checked before the pool starts
    connection = redis.Redis.from_url(url)
    engine = WorkerEngine(url, settings)
    try:
        queue = dispatch_queue(connection, str(settings.queue_name))
        now = datetime.now(UTC)
        report = reconcile(
            queue, settings.keys, settings.dispatcher, now=now, engine=engine,
            dispatch_timeout_s=settings.dispatch_timeout_s,
        )  # fmt: skip
        print(f"worker {name} died; reconciliation: {report}", flush=True)
    finally:
        engine.close()
        connection.close()
