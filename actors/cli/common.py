"""What every read-only `recovery` command shares: the Redis connection from `--redis-url`
or `REDIS_URL` (failing fast, its password never printed) and one-line errors with exit 2."""

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from actors.errors import (
    CorruptProfileError,
    InvalidIdentifierError,
    RecoveryError,
    StoreUnavailableError,
)

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
            InvalidIdentifierError,
            StoreUnavailableError,
        ) as error:
            message = str(error)
        except redis.RedisError as error:
            detail = str(error) or type(error).__name__
            given = getattr(args, "redis_url", None)
            at = f" at {redacted(given)}" if given else ""
            message = f"cannot read Redis{at}: {detail}"
        print(f"recovery {args.command}: {message}", file=sys.stderr)
        return EXIT_ERROR

    return guarded


# -- connection ---------------------------------------------------------------------------


def redacted(url: str) -> str:
    """`url` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def connect(url: str) -> redis.Redis:
    """A synchronous client that fails fast (no retries) and has answered a PING."""
    try:
        client = redis.Redis.from_url(
            url,
            decode_responses=True,
            socket_timeout=TIMEOUT_S,
            socket_connect_timeout=TIMEOUT_S,
            retry=Retry(NoBackoff(), 0),
        )
    except ValueError as error:
        raise CliError(f"invalid Redis URL {redacted(url)!r}: {error}") from None
    try:
        client.ping()
    except redis.RedisError as error:
        client.close()
        detail = str(error) or type(error).__name__
        raise CliError(f"cannot reach Redis at {redacted(url)}: {detail}") from None
    return client


def args_now(args: argparse.Namespace) -> datetime:
    now: datetime = args.now.astimezone(UTC) if args.now else datetime.now(UTC)
    return now
