"""The shell's layers: imports only run downward, and no module imports itself back.

core ← actors/{keys,errors,clock} ← routes ← store ← engine ← jobs ← hosting ← api ← demo ←
cli,
with the public surface (`actors/__init__.py`) and the compatibility paths on top. Every
import counts: at module level, inside functions and under `TYPE_CHECKING`.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PACKAGES = ("catalogue", "policy", "circuits", "actors")
BOTTOM = frozenset({"actors.keys", "actors.errors", "actors.clock"})
LAYERS = ("routes", "store", "engine", "jobs", "hosting", "api", "demo", "cli")
TOP = len(LAYERS) + 2


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int:
    """0 for the core, 1 for the shell's bottom modules, then one per layer; the public
    surface and the compatibility paths are above them all."""
    parts = module.split(".")
    if parts[0] != "actors":
        return 0
    if module in BOTTOM:
        return 1
    if len(parts) > 1 and parts[1] in LAYERS:
        return LAYERS.index(parts[1]) + 2
    return TOP


@cache
def shell_modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def resolve(module: str, name: str | None) -> str:
    """The module an import reaches: `from a.b import c` reaches `a.b.c` when that is a
    module of ours, else `a.b`."""
    if name is not None and f"{module}.{name}" in shell_modules():
        return f"{module}.{name}"
    return module


def imports_of(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) for every import of one of our packages anywhere in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import on line {node.lineno}"
            base = node.module or ""
            for alias in node.names:
                yield node.lineno, resolve(base, alias.name)


def ours(module: str) -> bool:
    return module.split(".", maxsplit=1)[0] in PACKAGES


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for module, path in shell_modules().items():
        edges[module] = {target for _, target in imports_of(path) if ours(target)}
    return edges


ACTOR_MODULES = sorted(m for m in shell_modules() if m.startswith("actors"))


@pytest.mark.parametrize("module", ACTOR_MODULES)
def test_shell_module_imports_only_its_own_layer_or_below(module: str) -> None:
    path = shell_modules()[module]
    upward = [
        (line, target)
        for line, target in imports_of(path)
        if ours(target) and layer_of(target) > layer_of(module)
    ]
    assert upward == [], f"{module} imports upward: {upward}"


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components with more than one module (or a module importing itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1 or node in edges.get(node, ()):
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_back_through_others() -> None:
    assert strongly_connected(graph()) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_layer_check_sees_imports_inside_functions_and_type_checking(
    tmp_path: Path,
) -> None:
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from actors.hosting.runtime import RecoveryRuntime\n"
        "def later() -> None:\n"
        "    import actors.cli.main\n",
        encoding="utf-8",
    )
    assert [target for _, target in imports_of(source)] == [
        "typing",
        "actors.hosting.runtime",
        "actors.cli.main",
    ]


def test_every_module_is_importable_by_its_name() -> None:
    missing = [m for m in shell_modules() if importlib.util.find_spec(m) is None]
    assert missing == []


SIZE_LIMIT = 400
# The modules allowed over SIZE_LIMIT lines, each for the reason in the closing note.
LONG_MODULES: frozenset[str] = frozenset()


def test_at_most_three_shell_modules_exceed_the_size_limit() -> None:
    long = {
        m
        for m, path in shell_modules().items()
        if m.startswith("actors")
        and len(path.read_text(encoding="utf-8").splitlines()) > SIZE_LIMIT
    }
    assert long <= LONG_MODULES, sorted(long - LONG_MODULES)
    assert len(LONG_MODULES) <= 3
