"""The circuits package reads no clock and no randomness: `now` is always an argument."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CIRCUITS_DIR = Path(__file__).parents[2] / "circuits"
FORBIDDEN_MODULES = {"time", "random", "secrets", "ray", "redis", "rq", "asyncio", "os", "uuid"}
FORBIDDEN_CALLS = {"now", "utcnow", "today", "time", "monotonic"}


@pytest.mark.parametrize("path", sorted(CIRCUITS_DIR.glob("*.py")), ids=lambda p: p.name)
def test_circuit_module_imports_no_clock_randomness_or_shell(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            names = {(node.module or "").split(".")[0]}
        else:
            names = set()
        assert not names & FORBIDDEN_MODULES, (path.name, names)
        assert "actors" not in names, (path.name, names)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            assert node.func.attr not in FORBIDDEN_CALLS, (path.name, node.func.attr)
