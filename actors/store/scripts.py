"""Lua scripts shipped in `actors/store/lua/`, checked and loaded by name.

Every script starts with a `KEYS:` / `ARGV:` header comment, and touches only keys passed
in KEYS (one Redis primary today, but the rule keeps scripts Cluster-safe in shape).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

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
