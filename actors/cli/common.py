"""What every read-only `recovery` command shares: the Redis connection from `--redis-url`
or `REDIS_URL` (failing fast, its password never printed) and one-line errors with exit 2."""

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from actors.errors import (
    CorruptProfileError,
    CorruptRouteError,
    InvalidIdentifierError,
    RecoveryError,
    StoreUnavailableError,
    error_text,
)
from catalogue.sanitize import masked_url

EXIT_ERROR: Final = 2
TIMEOUT_S: Final = 5.0


class CliError(RecoveryError):
    """A problem to report on one line of stderr (exit 2)."""


def guarded(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """`run` with every expected failure turned into one stderr line and exit 2."""

    def guarded(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except (
            CliError,
            CorruptProfileError,
            CorruptRouteError,
            InvalidIdentifierError,
            StoreUnavailableError,
        ) as error:
            message = error_text(error)
        except redis.RedisError as error:
            given = getattr(args, "redis_url", None)
            at = f" at {masked_url(given)}" if given else ""
            message = f"cannot read Redis{at}: {error_text(error)}"
        print(f"recovery {args.command}: {message}", file=sys.stderr)
        return EXIT_ERROR

    return guarded


# -- connection ---------------------------------------------------------------------------


def connect(url: str) -> redis.Redis:
    """A synchronous client that fails fast (no retries) and has answered a PING."""
    try:
        client = redis.Redis.from_url(
            url,
            decode_responses=True,
            encoding_errors="surrogateescape",  # a corrupt value is read, not raised
            socket_timeout=TIMEOUT_S,
            socket_connect_timeout=TIMEOUT_S,
            retry=Retry(NoBackoff(), 0),
        )
    except ValueError as error:
        raise CliError(f"invalid Redis URL {masked_url(url)!r}: {error_text(error)}") from None
    try:
        client.ping()
    except redis.RedisError as error:
        client.close()
        raise CliError(f"cannot reach Redis at {masked_url(url)}: {error_text(error)}") from None
    return client


def args_now(args: argparse.Namespace) -> datetime:
    now: datetime = args.now.astimezone(UTC) if args.now else datetime.now(UTC)
    return now
