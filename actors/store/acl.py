"""The least-privilege Redis ACL user of an installation (README, "Least privilege").

Everything the runtime writes is under its key prefix (`<prefix>:*`); rq keeps its queues,
jobs, registries and workers under `rq:*` and talks to its workers on `rq:*` channels.
COMMANDS are the commands the runtime, its Lua scripts and rq issue (measured with
`INFO commandstats` over bench/chaos.py runs); scripts run as the user that called them,
so the commands inside them must be allowed too. ACLs need Redis 6 or later. redis-py's
connection handshake also sends `CLIENT SETINFO` (its name and version): refused here
(Redis 7.0 refuses a rule naming it), it shows in `ACL LOG`, and redis-py goes on.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

from actors.keys import KeySpace

COMMANDS: Final = tuple(
    "+" + name
    for name in (
        # connection and server: redis-py's handshake, rq's worker registration and version
        "auth",
        "hello",
        "ping",
        "client|setname",
        "client|info",
        "info",
        "time",
        # keys, strings, hashes, lists, sets, sorted sets, streams
        "get",
        "set",
        "del",
        "exists",
        "expire",
        "pexpire",
        "persist",
        "pttl",
        "type",
        "scan",
        "hset",
        "hget",
        "hgetall",
        "hmget",
        "hdel",
        "hincrby",
        "hincrbyfloat",
        "hexists",
        "rpush",
        "lpop",
        "lrem",
        "lrange",
        "llen",
        "lmove",
        "blmove",
        "blpop",
        "lpos",
        "sadd",
        "srem",
        "smembers",
        "smismember",
        "scard",
        "zadd",
        "zrem",
        "zrange",
        "zrangebyscore",
        "zrangebylex",
        "zremrangebyscore",
        "zcard",
        "zcount",
        "zscore",
        "xadd",
        "xlen",
        "xrange",
        "xread",
        "xrevrange",
        # scripts (redis-py: EVALSHA, loading on NOSCRIPT), transactions, rq's pub/sub
        "evalsha",
        "script|load",
        "script|exists",
        "multi",
        "exec",
        "discard",
        "watch",
        "unwatch",
        "subscribe",
        "unsubscribe",
        "publish",
    )
)

_USER: Final = re.compile(r"[A-Za-z0-9._-]{1,64}")


def acl_user_rule(prefix: str, user: str, password: str) -> str:
    """One ACL file line (or `ACL SETUSER` arguments after `user`) for `user`: its keys
    under `prefix` and rq's, rq's channels, the runtime's commands; the password as its
    SHA-256 (`#…`), as Redis keeps it, so the file never holds it in clear. ValueError for a
    user name outside `[A-Za-z0-9._-]{1,64}` or a password with white space,
    InvalidIdentifierError for a prefix outside the key prefix pattern."""
    if not _USER.fullmatch(user):
        raise ValueError(f"acl user must match [A-Za-z0-9._-]{{1,64}}, got {user!r}")
    if not password or any(c.isspace() for c in password):
        raise ValueError("acl password must be non-empty, without white space")
    prefix = KeySpace(prefix).prefix  # validated: a prefix never widens the pattern
    rules = [
        "on", f"#{hashlib.sha256(password.encode()).hexdigest()}", "resetkeys",
        f"~{prefix}:*", "~rq:*", "resetchannels", "&rq:*", "-@all", *COMMANDS,
    ]  # fmt: skip
    return f"user {user} " + " ".join(rules)
