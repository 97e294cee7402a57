"""The README's orchestrator example runs as printed, against the session's Redis and Ray
(its settings come from the environment, as the example says)."""

from __future__ import annotations

import ast
import re
import uuid
from pathlib import Path

import pytest

from actors.keys import KeySpace
from tests.actors.conftest import _delete_prefix
from tests.actors.ray_fixtures import ray_session  # noqa: F401  # a fixture, used by name

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_session")]

README = Path(__file__).resolve().parent.parent / "README.md"
MARKER = "<!-- example: tests/test_readme_example.py runs this block -->"


def example() -> str:
    text = README.read_text(encoding="utf-8")
    found = re.search(re.escape(MARKER) + r"\s*```python\n(.*?)```", text, re.DOTALL)
    assert found is not None, "the README lost its tested example"
    return found.group(1)


def test_the_readme_example_is_short_enough_to_read_on_the_first_screen() -> None:
    body = [line for line in example().splitlines() if line.strip() and "import" not in line]
    assert len(body) <= 14, body


def test_the_readme_example_imports_only_the_public_packages() -> None:
    imported: set[str] = set()
    for node in ast.walk(ast.parse(example())):
        if isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    assert imported - {"asyncio", "os"} == {"actors", "catalogue", "policy"}


def test_the_readme_example_runs_and_prints_what_its_comment_says(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = f"recovery-readme-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("RECOVERY_KEY_PREFIX", prefix)
    monkeypatch.setenv("RECOVERY_HOSTS", "1")
    monkeypatch.delenv("RECOVERY_DISPATCHER", raising=False)
    monkeypatch.delenv("RECOVERY_CONFIG", raising=False)
    code = example()
    try:
        exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})
    finally:
        _delete_prefix(redis_url, KeySpace(prefix))
    printed = capsys.readouterr().out.split()
    promised = re.search(r"# (retry_wait .*)$", code, re.MULTILINE)
    assert promised is not None
    assert printed == promised.group(1).split()
