"""What the operator commands share (`recovery route ID ACTION`, `recovery circuit RESOURCE
ACTION`): joining the running installation as an attached process, and their exit codes.

They act through the installation's actors, never by writing Redis: each attaches to the
installation's Ray as another orchestrator process does (`RecoveryRuntime.attach`: the
host ring and the Ray address from the installation's record), sends one command to the
actor that owns the route or the circuit, prints what it answered and lets go.

Exit codes (docs/CONTRACTS.md, "The command line"):

    0  done: the snapshot (or circuit) it produced is printed
    2  usage or bad input: argparse's usage errors, a bad id or value, no such route or
       circuit, no Redis to read (as every `recovery` command)
    3  stale generation: the route moved past the generation given; nothing changed
    4  refused: the route's state (or the circuit's owner) does not allow it; nothing changed
    5  the runtime could not be reached: no installation recorded, no live owner (is
       `recovery up` running?), no circuit hosts, Ray or Redis failing it
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final

import ray
import redis

from actors.cli.common import CliError, connect
from actors.cli.installation import Installation
from actors.errors import (
    CorruptProfileError,
    CorruptRouteError,
    InvalidIdentifierError,
    RecoveryError,
    StoreUnavailableError,
    error_text,
)
from actors.hosting.runtime import RecoveryRuntime
from actors.store.installation import live_owner, read_installation

EXIT_USAGE: Final = 2
EXIT_STALE: Final = 3
EXIT_REFUSED: Final = 4
EXIT_UNREACHABLE: Final = 5
EXIT_CODES_HELP: Final = """exit codes (with an ACTION):
  0  done: prints what it produced
  2  usage or bad input (a bad id or value, no such route or circuit, no Redis)
  3  stale generation: the route moved past the generation given; nothing changed
  4  refused by the route's state (or the circuit's owner); nothing changed
  5  the runtime could not be reached (no installation or live owner, Ray or Redis)"""


class OperatorExitError(RecoveryError):
    """An operator command ends with `code` and `message` on one line of stderr."""

    def __init__(self, code: int, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.code, self.message))


def unreachable(message: str) -> OperatorExitError:
    return OperatorExitError(EXIT_UNREACHABLE, message)


@contextmanager
def attached(found: Installation) -> Iterator[RecoveryRuntime]:
    """The installation `found` names, attached to: only when it has a live owner (else
    attaching would wait on a Ray nobody runs) and a Ray address to join (never a Ray of
    its own). Let go of on exit; the hosts keep serving."""
    keys = found.settings.keys
    connection = connect(found.url)
    try:
        record = read_installation(connection, keys)
        owner = live_owner(connection, keys)
    finally:
        connection.close()
    where = f"under prefix {keys.prefix!r}"
    if record is None:
        raise unreachable(f"no installation is recorded {where}: start one with `recovery up`")
    if owner is None or owner != record.owner:
        raise unreachable(f"the installation {where} has no live owner: is `recovery up` running?")
    if record.ray_address is None:
        raise unreachable(f"the installation {where} recorded no Ray address to join")
    try:
        runtime = RecoveryRuntime.attach(
            redis_url=found.url, key_prefix=keys.prefix,
            installation_key=found.settings.installation_key,
        )  # fmt: skip
    except RecoveryError as error:
        raise unreachable(
            f"cannot attach to the installation {where}: {error_text(error)}"
        ) from None
    except Exception as error:  # Ray's own: the cluster or a host did not answer
        raise unreachable(
            f"cannot reach the installation's Ray at {record.ray_address}: "
            f"{type(error).__name__}: {error_text(error)}"
        ) from None
    try:
        yield runtime
    finally:
        runtime.shutdown()


def reported(what: str, run: Callable[[], int]) -> int:
    """`run()`'s exit code, with any expected failure reported on one stderr line as
    `recovery <what>: <message>` and its own exit code (module docstring)."""
    try:
        return run()
    except OperatorExitError as error:
        message, code = error.message, error.code
    except (CliError, InvalidIdentifierError, CorruptRouteError, CorruptProfileError) as error:
        message, code = error_text(error), EXIT_USAGE
    except StoreUnavailableError as error:
        message, code = error_text(error), EXIT_UNREACHABLE
    except redis.RedisError as error:
        message, code = f"cannot read Redis: {error_text(error)}", EXIT_UNREACHABLE
    except ray.exceptions.RayError as error:  # the owning actor died or did not answer
        message = f"the runtime did not answer: {type(error).__name__}: {error_text(error)}"
        code = EXIT_UNREACHABLE
    except RecoveryError as error:  # any other refusal of the owning actor
        message, code = f"refused: {error_text(error)}; nothing was changed", EXIT_REFUSED
    print(f"recovery {what}: {message}", file=sys.stderr)
    return code
