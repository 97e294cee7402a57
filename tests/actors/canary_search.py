"""Everything a deployment wrote, as text to search for canary fragments: every Redis key
with its value (whatever its type), files on disk, and the process table; and an embedded
Redis that requires a (canary) password."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import redis

from actors.store.embedded import EmbeddedRedis


@contextmanager
def protected_redis(folder: Path, password: str) -> Iterator[tuple[str, Path]]:
    """An embedded Redis in `folder` requiring `password`: (its URL with the password, its
    socket)."""
    server = EmbeddedRedis(folder)
    server.start()
    open_client = redis.Redis(unix_socket_path=str(server.socket_path))
    open_client.config_set("requirepass", password)
    open_client.close()
    url = f"unix://:{quote(password)}@{server.socket_path}"
    try:
        yield url, server.socket_path
    finally:
        client = redis.Redis.from_url(url)
        client.config_set("requirepass", "")  # so the embedded server can be stopped
        client.close()
        server.stop()


@dataclass(frozen=True, slots=True)
class Stored:
    keys: list[str]
    text: str  # every key and every value, one per line


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, dict):
        return "\n".join(f"{_text(k)}={_text(v)}" for k, v in value.items())
    if isinstance(value, list | tuple | set):
        return "\n".join(_text(item) for item in value)
    return str(value)


_READERS: dict[str, Any] = {
    "string": lambda c, k: c.get(k),
    "hash": lambda c, k: c.hgetall(k),
    "list": lambda c, k: c.lrange(k, 0, -1),
    "set": lambda c, k: c.smembers(k),
    "zset": lambda c, k: c.zrange(k, 0, -1, withscores=True),
    "stream": lambda c, k: c.xrange(k, "-", "+"),
    "none": lambda c, k: "",  # expired between SCAN and TYPE
}


def _value(connection: redis.Redis, key: bytes) -> Any:
    kind = _text(connection.type(key))
    reader = _READERS.get(kind)
    if reader is None:
        raise AssertionError(f"a key of a type the search does not read: {kind} ({key!r})")
    return reader(connection, key)


def everything_in_redis(connection: redis.Redis) -> Stored:
    """Every key of every database the connection's server holds data in, with its value."""
    keys: list[str] = []
    lines: list[str] = []
    for key in connection.scan_iter(count=1000):
        keys.append(_text(key))
        lines += (_text(key), _text(_value(connection, key)))
    return Stored(keys, "\n".join(lines))


def files_under(folder: Path) -> str:
    """The bytes of every file under `folder` (an embedded Redis's AOF and snapshot)."""
    return "\n".join(
        path.read_bytes().decode("utf-8", errors="replace")
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.is_socket()
    )


def process_table() -> str:
    """Every process's command line, as any user can read it from /proc."""
    lines: list[str] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        command = raw.replace(b"\0", b" ").decode(errors="replace")
        lines.append(f"{entry.name} {command}")
    return "\n".join(lines)
