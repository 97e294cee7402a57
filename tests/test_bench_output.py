"""A benchmark prints one JSON line on stdout: what else is printed while it measures (Ray's
driver prints a retried task or a restarted actor to stdout) goes to stderr."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from bench_common import print_json_line  # bench/ is not a package: on sys.path above


def test_what_is_printed_while_measuring_goes_to_stderr_and_stdout_holds_the_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def measure() -> dict[str, Any]:
        print("(raylet) Task RouteHost.run_compact failed; it will be retried")
        return {"p50_ms": 1.5, "runs": 3}

    returned = print_json_line(measure)

    out, err = capsys.readouterr()
    assert out.splitlines() == [json.dumps(returned)]
    assert json.loads(out) == {"p50_ms": 1.5, "runs": 3}
    assert "run_compact failed" in err
