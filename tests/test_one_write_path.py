"""Every route transition is written by the engine's batch runner, whoever causes it.

The transition script is run only by the route store; the store's writes are called only
by the batch runner; the planner's output reaches Redis by no other road (no module runs
`plan` and writes its result itself). A test of the check itself keeps it from passing
vacuously.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SHELL = sorted((ROOT / "actors").rglob("*.py"))
STORE = ROOT / "actors" / "store" / "route_store.py"
RUNNER = ROOT / "actors" / "engine" / "batch.py"
WRITES = {"apply", "apply_many"}
ENCODER = "transition_request"


def called_names(path: Path) -> set[str]:
    """Every function or method name the module calls."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute):
                names.add(node.func.attr)
            elif isinstance(node.func, ast.Name):
                names.add(node.func.id)
    return names


def script_names(path: Path) -> set[str]:
    """The Lua scripts the module loads by name (`script("name")` or
    `LoadedScript.named("name")`)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and _loads_a_script(node.func)
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.add(str(node.args[0].value))
    return found


def _loads_a_script(called: ast.expr) -> bool:
    if isinstance(called, ast.Name):
        return called.id == "script"
    return (
        isinstance(called, ast.Attribute)
        and called.attr == "named"
        and isinstance(called.value, ast.Name)
        and called.value.id == "LoadedScript"
    )


@pytest.mark.parametrize("path", SHELL, ids=lambda p: str(p.relative_to(ROOT)))
def test_only_the_route_store_runs_the_transition_script(path: Path) -> None:
    if path != STORE:
        assert "transition" not in script_names(path)
        assert ENCODER not in called_names(path)


@pytest.mark.parametrize("path", SHELL, ids=lambda p: str(p.relative_to(ROOT)))
def test_only_the_batch_runner_calls_the_route_stores_writes(path: Path) -> None:
    if path not in (STORE, RUNNER):
        assert not called_names(path) & WRITES, sorted(called_names(path) & WRITES)


def test_the_store_and_the_runner_are_where_the_checks_expect_them() -> None:
    assert "transition" in script_names(STORE)
    assert ENCODER in called_names(STORE)
    assert WRITES & called_names(RUNNER)


def test_the_write_check_sees_a_module_that_writes_on_its_own(tmp_path: Path) -> None:
    rogue = tmp_path / "rogue.py"
    rogue.write_text(
        "async def sneak(store, transition):\n"
        "    await store.apply_many([transition])\n"
        "    runner = script('transition')\n",
        encoding="utf-8",
    )
    assert called_names(rogue) & WRITES == {"apply_many"}
    assert script_names(rogue) == {"transition"}
    loaded = tmp_path / "loaded.py"
    loaded.write_text("runner = LoadedScript.named('transition')\n", encoding="utf-8")
    assert script_names(loaded) == {"transition"}
