"""What `recovery up` runs (actors/cli/up_command.py parses its arguments): the recovery runtime in
the foreground until Ctrl-C or SIGTERM.

The settings come from actors/engine/config.py (defaults < `--config FILE` or `RECOVERY_CONFIG`
< environment variables < the flags given to `recovery up`). Once the runtime is up it prints one
line each, in this order and with this wording (tools may wait on them):

    redis: redis://db:6379/0
    redis: unix:///…/redis.sock (embedded, data in /…; inspect: redis-cli -s /…/redis.sock)
    ray: 127.0.0.1:6379 (dashboard: http://127.0.0.1:8265)     or (no dashboard)
    hosts: 2 route hosts (host-0, host-1), key prefix recovery
    workers: 1 rq worker on queue recovery-dispatch, dispatcher pkg.module:dispatch
    workers: none (no dispatcher configured)
    api: http://127.0.0.1:8484 (no token: loopback only; docs: http://127.0.0.1:8484/docs)
    ready: Ctrl-C or SIGTERM stops the runtime

The `api:` line (actors/cli/up_api.py) comes once the HTTP API accepts requests, so
`ready` means both the runtime and the API serve; with `api_address = off` it is absent.

Before them, `reaped: N processes left by an `up` that crashed` when a previous `up` on the
same data folder was killed and some of what it started still ran
(actors/cli/up_children.py).

Ctrl-C (SIGINT) and SIGTERM drain the same way: `stopping: <signal> received`, then
`RecoveryRuntime.shutdown()` (rq workers, hosts, then the embedded Redis and the local Ray
it started), then `stopped: N schedules left pending in Redis`, exit 0. Pending schedules
stay in Redis and fire after the next `up`. A Ctrl-C while the runtime is starting is
honoured as soon as it is up (a SIGTERM then meets Ray's own handler until ours is back:
Ray exits, and the same shutdown runs on the way out); a second signal while draining is
ignored, so the drain completes. A bad setting or an unreachable Redis is one line on
stderr and exit 2, before anything starts; a runtime that fails is drained, reported on
one line and exits 1.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any, Final

import ray
import redis

from actors.cli.up_api import PreparedApi, prepare_api
from actors.cli.up_children import forget_children, reap_children, record_children
from actors.engine.config import ConfigError, RuntimeConfig, load_config
from actors.errors import error_text
from actors.hosting.runtime import RecoveryRuntime
from catalogue.sanitize import masked_url

EXIT_FAILED: Final = 1
EXIT_ERROR: Final = 2
REDIS_TIMEOUT_S: Final = 5.0
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
# the record of what `up` started is written again this often, so the next `up` reaps what
# was started after it was ready too, should this one be killed
RECORD_EVERY_S: Final = 5.0


class _StopRequestedError(Exception):
    """Raised by the signal handler into the main thread, which is waiting for it."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(name)


FLAGS: Final = (
    "redis_url", "ray_address", "hosts", "dispatcher", "workers", "queue", "data_dir",
    "key_prefix", "api_address",
)  # fmt: skip


def run(args: argparse.Namespace) -> int:
    try:
        flags = {name: getattr(args, name) for name in FLAGS}
        config = load_config(args.config, os.environ, flags=flags)
    except ConfigError as error:
        return _problem(error_text(error))
    folder = config.data_dir.expanduser()
    if config.redis_url is None:
        problem = data_dir_problem(folder)
        if problem is not None:
            return _problem(problem)
    if folder.is_dir():
        reaped = reap_children(folder)
        if reaped:
            noun = "process" if reaped == 1 else "processes"
            say(f"reaped: {reaped} {noun} left by an `up` that crashed")
    if config.redis_url is not None:
        try:
            check_redis(config.redis_url)
        except redis.RedisError as error:
            url = masked_url(config.redis_url)
            return _problem(f"cannot reach Redis at {url}: {error_text(error)}")
    api = prepare_api(config)  # its socket bound now: a port in use fails before the runtime
    if isinstance(api, str):
        return _problem(api)
    runtime = RecoveryRuntime.from_config(config)
    failure: str | None = None
    try:
        say(f"stopping: {serve(runtime, config, api)} received")
    except Exception as error:  # one line, not a traceback; the drain below still runs
        failure = f"{type(error).__name__}: {error_text(error)}"
    finally:
        _install(signal.SIG_IGN)  # a second signal must not interrupt the drain
        if api is not None:
            api.stop()  # no new request reaches the hosts while they drain
        left = runtime.shutdown()
        forget_children(folder)
    say(f"stopped: {_pending_text(left)}")
    if failure is not None:
        print(f"recovery up: failed: {failure}", file=sys.stderr)
        return EXIT_FAILED
    return 0


def data_dir_problem(folder: Path) -> str | None:
    """Why the embedded Redis could not keep its data in `folder` (None: it can), found
    before anything starts."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return f"data_dir {str(folder)!r}: cannot create it: {error.strerror or error}"
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        return f"data_dir {str(folder)!r}: not a folder this user can write"
    return None


def check_redis(url: str) -> None:
    """PING the configured Redis, so a wrong URL fails now rather than hang the hosts."""
    connection = redis.Redis.from_url(
        url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S
    )
    try:
        connection.ping()
    finally:
        connection.close()


def serve(runtime: RecoveryRuntime, config: RuntimeConfig, api: PreparedApi | None = None) -> str:
    """Start the runtime (and the API), print what runs, wait for a stop signal; the
    signal's name."""
    deferred: list[str] = []
    _install(lambda number, _frame: deferred.append(signal.Signals(number).name))
    try:
        runtime.start()
        # Ray installs its own SIGTERM handler in ray.init: ours goes back on top.
        _install(_raise_stop)
        if deferred:
            return deferred[0]
        folder = config.data_dir.expanduser()
        if folder.is_dir():
            record_children(folder)
        if api is not None:
            api.serve(runtime)
        for line in status_lines(runtime, config, api):
            say(line)
        while True:
            time.sleep(RECORD_EVERY_S)  # a stop signal raises out of it
            if folder.is_dir():  # what started since (Ray's workers for restarted hosts)
                record_children(folder)
    except _StopRequestedError as stop:
        return stop.name


def status_lines(
    runtime: RecoveryRuntime, config: RuntimeConfig, api: PreparedApi | None = None
) -> list[str]:
    lines = [redis_line(runtime, config), ray_line(runtime), metrics_line(), hosts_line(runtime),
             workers_line(runtime)]  # fmt: skip
    if api is not None:
        lines.append(api.line())
    return [*lines, "ready: Ctrl-C or SIGTERM stops the runtime"]


def redis_line(runtime: RecoveryRuntime, config: RuntimeConfig) -> str:
    url = masked_url(runtime.url)  # the password never printed
    if config.redis_url is not None:
        return f"redis: {url}"
    folder = config.data_dir.expanduser()
    socket = runtime.url.removeprefix("unix://")
    return f"redis: {url} (embedded, data in {folder}; inspect: redis-cli -s {socket})"


def ray_line(runtime: RecoveryRuntime) -> str:
    address = ray.get_runtime_context().gcs_address
    if runtime.dashboard_url:
        dashboard = runtime.dashboard_url
        if "://" not in dashboard:
            dashboard = f"http://{dashboard}"
        return f"ray: {address} (dashboard: {dashboard})"
    return f"ray: {address} (no dashboard)"


def metrics_line() -> str:
    """Where each node's Prometheus export is, as a command that needs no Python."""
    urls = [
        f"http://{node['NodeManagerAddress']}:{node['MetricsExportPort']}/metrics"
        for node in ray.nodes()  # type: ignore[no-untyped-call]  # Ray ships it untyped
        if node.get("Alive") and node.get("MetricsExportPort")
    ]
    if not urls:
        return "metrics: none exported"
    return "metrics: " + ", ".join(f"curl -s {url}" for url in urls)


def hosts_line(runtime: RecoveryRuntime) -> str:
    ids = ", ".join(f"host-{index}" for index in range(len(runtime.hosts)))
    count = _plural(len(runtime.hosts), "route host")
    role = "owned here" if runtime.owner else "attached: another process owns them"
    return f"hosts: {count} ({ids}), key prefix {runtime.key_prefix}, {role}"


def workers_line(runtime: RecoveryRuntime) -> str:
    if runtime.workers is None:
        return "workers: none (no dispatcher configured)"
    count = _plural(len(runtime.workers.workers), "rq worker")
    return f"workers: {count} on queue {runtime.queue}, dispatcher {runtime.dispatcher}"


def say(line: str) -> None:
    print(line, flush=True)


def _pending_text(left: int | None) -> str:
    if left is None:
        return "could not count the schedules left pending in Redis"
    return f"{_plural(left, 'schedule')} left pending in Redis (they fire after the next up)"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _raise_stop(number: int, _frame: FrameType | None) -> None:
    raise _StopRequestedError(signal.Signals(number).name)


def _install(handler: Any) -> None:
    for number in STOP_SIGNALS:
        signal.signal(number, handler)


def _problem(message: str) -> int:
    print(f"recovery up: {message}", file=sys.stderr)
    return EXIT_ERROR
