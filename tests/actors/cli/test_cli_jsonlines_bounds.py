"""The JSON-lines commands (`recovery classify`, `policy evaluate`, `acp-replay`) on bad
input: a line too long or nested too deep is that line's error, read in bounded memory,
and the lines after it are still answered; arbitrary text never raises (a fuzz test)."""

from __future__ import annotations

import io
import json
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime
from typing import IO

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.cli.acp import replay_lines
from actors.cli.catalogue import write_classifications
from actors.cli.jsonlines import MAX_DEPTH, MAX_LINE_CHARS
from actors.cli.policy import write_decisions

NOW = datetime(2026, 12, 1, tzinfo=UTC)
GOOD = json.dumps({"kind": "stderr", "text": "API Error: 529 Overloaded"})

Command = Callable[[IO[str], IO[str]], None]
COMMANDS: dict[str, Command] = {
    "classify": lambda source, sink: write_classifications(source, sink, NOW),
    "policy evaluate": lambda source, sink: write_decisions(source, sink, NOW),
    "acp-replay": lambda source, sink: replay_lines(source, sink, "claude-acp", NOW),
}


class HugeLine(io.StringIO):
    """`size` characters of one line, then a newline and `after`: produced as read, so
    the test holds none of it."""

    def __init__(self, size: int, after: str) -> None:
        super().__init__()
        self.left = size
        self.after = io.StringIO(after)

    def readline(self, size: int = -1, /) -> str:  # type: ignore[override]  # typeshed's StringIO also inherits _IOBase's bytes readline
        if self.left > 0:
            take = self.left if size < 0 else min(size, self.left)
            self.left -= take
            return "x" * take
        if self.left == 0:
            self.left = -1
            return "\n"
        return self.after.readline(size)


def answers(command: Command, source: IO[str]) -> list[dict[str, object]]:
    sink = io.StringIO()
    command(source, sink)
    return [json.loads(line) for line in sink.getvalue().splitlines()]


def test_a_line_nested_too_deep_is_its_own_error_and_the_next_line_is_answered() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    found = answers(COMMANDS["classify"], io.StringIO(f"{deep}\n{GOOD}\n"))
    assert found[0] == {
        "line": 1, "error": f"nested deeper than {MAX_DEPTH} levels", "field": None,
    }  # fmt: skip
    assert found[1]["code"] == "provider_overloaded"
    assert len(found) == 2


def test_brackets_inside_strings_are_not_nesting() -> None:
    quoted = json.dumps({"kind": "stderr", "text": "[" * 500 + " 529 Overloaded"})
    [found] = answers(COMMANDS["classify"], io.StringIO(quoted + "\n"))
    assert "error" not in found, found


def test_an_overlong_line_is_skipped_in_bounded_memory() -> None:
    size = 50 * MAX_LINE_CHARS  # 50 M characters
    tracemalloc.start()
    try:
        found = answers(COMMANDS["classify"], HugeLine(size, GOOD + "\n"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found[0] == {
        "line": 1, "error": f"line too long: over {MAX_LINE_CHARS} characters", "field": None,
    }  # fmt: skip
    assert found[1]["code"] == "provider_overloaded"
    assert peak < 16 * MAX_LINE_CHARS, f"peak {peak} bytes for a {size}-character line"


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    command=st.sampled_from(sorted(COMMANDS)),
    lines=st.lists(
        st.one_of(
            st.text(max_size=200).map(lambda text: text.replace("\n", " ")),
            st.recursive(
                st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                lambda inner: (
                    st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4)
                ),
                max_leaves=20,
            ).map(json.dumps),
        ),
        max_size=8,
    ),
)
def test_any_text_gets_one_answer_per_line_and_no_traceback(command: str, lines: list[str]) -> None:
    text = "".join(f"{line}\n" for line in lines)
    found = answers(COMMANDS[command], io.StringIO(text))
    numbered = [n for n, line in enumerate(lines, 1) if line.strip()]
    refused = {answer["line"] for answer in found if "error" in answer and "line" in answer}
    assert refused <= set(numbered)
    if command != "acp-replay":  # a replay answers events, not lines
        assert len(found) == len(numbered)


def test_bytes_that_are_not_utf8_are_that_lines_error_through_the_real_command() -> None:
    import subprocess
    import sys

    good = GOOD.encode()
    stdin = b"\xff\xfe{}\n" + good + b"\n\x00\x01\n\xed\xa0\x80\n" + good + b"\n"
    done = subprocess.run(
        [sys.executable, "-m", "actors.cli", "classify"], input=stdin, capture_output=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr
    found = [json.loads(line) for line in done.stdout.splitlines()]
    assert [answer.get("line") for answer in found] == [1, None, 3, 4, None]
    assert [answer.get("code") for answer in found][1::3] == ["provider_overloaded"] * 2
