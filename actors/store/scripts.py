"""Lua scripts shipped in `actors/store/lua/`, checked and loaded by name, and the runner
that sends one (EVALSHA, loading the script on NOSCRIPT).

Every script starts with a `KEYS:` / `ARGV:` header comment, and touches only keys passed
in KEYS (one Redis primary today, but the rule keeps scripts Cluster-safe in shape).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from actors.errors import RecoveryError

_HEADER = re.compile(r"^-- KEYS:.*^-- ARGV:", re.MULTILINE | re.DOTALL)
_KEY_LITERAL = re.compile(r"redis\.call\(\s*'[A-Z]+'\s*,\s*'")


class ScriptError(RecoveryError, ValueError):
    """A shipped script that breaks the house rules (also a ValueError, as it always was)."""


@dataclass(frozen=True, slots=True)
class LuaScript:
    name: str
    source: str


def _check(name: str, source: str) -> None:
    if not _HEADER.search(source):
        raise ScriptError(f"{name}: missing the '-- KEYS:' / '-- ARGV:' header")
    if _KEY_LITERAL.search(source):
        raise ScriptError(f"{name}: names a key literally; pass every key in KEYS")


@cache
def script(name: str) -> LuaScript:
    """The script `actors/store/lua/<name>.lua`, checked."""
    source = (resources.files("actors.store") / "lua" / f"{name}.lua").read_text(encoding="utf-8")
    _check(name, source)
    return LuaScript(name, source)


def all_scripts() -> list[LuaScript]:
    folder = resources.files("actors.store") / "lua"
    names = sorted(e.name[:-4] for e in folder.iterdir() if e.name.endswith(".lua"))
    return [script(n) for n in names]


@dataclass(frozen=True, slots=True)
class LoadedScript:
    """A shipped script with its SHA-1, as EVALSHA names it."""

    source: str
    sha: str

    @classmethod
    def named(cls, name: str) -> LoadedScript:
        source = script(name).source
        return cls(source, hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest())


async def run_scripts(
    client: Redis, loaded: LoadedScript, calls: Sequence[tuple[Sequence[str], Sequence[Any]]]
) -> list[Any]:
    """EVALSHA `loaded` once per (keys, argv) in one pipeline, replies in order, a call's
    own error as its reply; the calls the server answered NOSCRIPT (they never ran) are
    sent again once the script is loaded. A failure of the connection raises."""
    replies = await _pipelined(client, loaded, calls)
    missing = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
    if missing:
        await client.script_load(loaded.source)
        again = await _pipelined(client, loaded, [calls[i] for i in missing])
        for index, reply in zip(missing, again, strict=True):
            replies[index] = reply
    return replies


async def _pipelined(
    client: Redis, loaded: LoadedScript, calls: Sequence[tuple[Sequence[str], Sequence[Any]]]
) -> list[Any]:
    async with client.pipeline(transaction=False) as pipe:
        for keys, argv in calls:
            pipe.evalsha(loaded.sha, len(keys), *keys, *argv)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
    return replies


async def run_script(
    client: Redis, loaded: LoadedScript, keys: Sequence[str], argv: Sequence[Any]
) -> Any:
    """EVALSHA `loaded` with `keys` and `argv`; on NOSCRIPT (first use on this server, or
    after SCRIPT FLUSH) load it and send it again: a NOSCRIPT reply means it never ran."""
    try:
        return await client.evalsha(loaded.sha, len(keys), *keys, *argv)
    except NoScriptError:
        await client.script_load(loaded.source)
        return await client.evalsha(loaded.sha, len(keys), *keys, *argv)
