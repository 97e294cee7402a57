"""`recovery route ID ACTION [--generation G]`: an operator's manual action on one route,
sent to the route host that owns it through an attached RouteHandle (actors/cli/
operator.py) — the same fenced command an orchestrator sends, never a Redis write.

    retry-now    start the pending attempt now (RouteHandle.retry_now)
    skip         give up the wait, switch to the next eligible candidate (skip_now)
    cancel       cancel the pending wait: action_required (cancel_wait)
    stop         stop automatic recovery: action_required (stop)
    resume       leave action_required on the same candidate and generation (resume)
    start-fresh  leave action_required in a new generation, first eligible candidate
    close        close the route for good (close)

Every action carries the generation it expects: `--generation G`, else the route's
current one, read from Redis and shown on stderr. A stale one changes nothing and exits
3 naming the expected and the actual generation; a refusal by the route's state exits 4
(docs/CONTRACTS.md, "The command line").
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any, Final

from actors.cli.common import CliError, connect
from actors.cli.installation import installation
from actors.cli.operator import EXIT_REFUSED, EXIT_STALE, OperatorExitError, attached
from actors.errors import (
    NoEligibleCandidateError,
    StaleGenerationError,
    TransitionRejectedError,
    error_text,
)
from actors.hosting.handle import RouteHandle
from actors.keys import valid_route_id
from actors.routes.models import RouteSnapshot
from actors.store.sync_reads import read_route

Act = Callable[[RouteHandle, int], Coroutine[Any, Any, RouteSnapshot]]

ACTIONS: Final[dict[str, Act]] = {
    "retry-now": lambda route, generation: route.retry_now(generation),
    "skip": lambda route, generation: route.skip_now(generation),
    "cancel": lambda route, generation: route.cancel_wait(generation),
    "stop": lambda route, generation: route.stop(generation),
    "resume": lambda route, generation: route.resume(generation),
    "start-fresh": lambda route, generation: route.start_fresh(generation),
    "close": lambda route, generation: route.close(generation),
}
ROUTE_ACTIONS: Final = tuple(ACTIONS)


def add_action_arguments(route_cmd: Any) -> None:
    """ACTION and --generation on the `recovery route ID` parser."""
    route_cmd.add_argument(
        "action", nargs="?", choices=ROUTE_ACTIONS, metavar="ACTION",
        help=f"act on the route instead of showing it: one of {', '.join(ROUTE_ACTIONS)}; "
        "prints the snapshot it produced",
    )  # fmt: skip
    route_cmd.add_argument(
        "--generation", type=generation_value, metavar="G",
        help="with an ACTION: the generation it expects (default: the route's current one, "
        "read and shown); a stale one changes nothing and exits 3",
    )  # fmt: skip


def generation_value(text: str) -> int:
    """A generation as given on the command line: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def act_on_route(args: argparse.Namespace) -> RouteSnapshot:
    """Run `args.action` on the route through the installation's route host; the snapshot
    it answered. Raises OperatorExitError (stale 3, refused 4, unreachable 5) or CliError."""
    if args.history:
        raise CliError("--history goes with showing a route, not with an ACTION")
    route_id = valid_route_id(args.route_id)  # a bad id fails before connecting
    found = installation(args)
    keys = found.settings.keys
    with connect(found.url) as client:
        current = read_route(client, keys, route_id)
    if current.state == "none":
        raise CliError(
            f"no route {route_id!r} under prefix {keys.prefix!r} (never written, or expired)"
        )
    generation = args.generation
    if generation is None:
        generation = current.generation
        print(
            f"recovery route {route_id} {args.action}: at generation {generation} "
            "(the route's current one)", file=sys.stderr, flush=True,
        )  # fmt: skip
    with attached(found) as runtime:
        try:
            return asyncio.run(ACTIONS[args.action](runtime.route(route_id), generation))
        except StaleGenerationError as error:
            raise OperatorExitError(EXIT_STALE, stale_message(error)) from None
        except (TransitionRejectedError, NoEligibleCandidateError) as error:
            raise OperatorExitError(
                EXIT_REFUSED, f"refused: {error_text(error)}; nothing was changed"
            ) from None


def stale_message(error: StaleGenerationError) -> str:
    return (
        f"stale generation: expected {error.expected}, but the route is at generation "
        f"{error.actual} ({error.actual_state}); nothing was changed (`recovery route "
        f"{error.route_id}` shows it; without --generation an action takes the current one)"
    )
