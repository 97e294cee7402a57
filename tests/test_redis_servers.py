"""The test session's system redis-server is waited on through its ready log line
(tests/redis_servers.py): a line that arrives in one write with the lines before it is
still seen at once (a buffered readline kept it out of the select's sight, and the start
waited its whole timeout)."""

from __future__ import annotations

import subprocess
import sys
import time

from tests.redis_servers import READY_LINE, START_TIMEOUT_S, _wait_ready

# A stand-in server: its start-up lines and the ready line in one write, then it idles
# until its standard input closes (the test kills it first).
SERVER = (
    "import sys\n"
    "lines = b'# oO0OoO0OoO0Oo starting\\n# Server initialized\\n'\n"
    f"sys.stdout.buffer.write(lines + {READY_LINE!r} + b'\\n')\n"
    "sys.stdout.flush()\n"
    "sys.stdin.read()\n"
)


def test_a_ready_line_written_with_the_lines_before_it_is_seen_at_once() -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        began = time.monotonic()
        _wait_ready(process)
        waited = time.monotonic() - began
    finally:
        process.kill()
        process.wait()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()
    assert waited < START_TIMEOUT_S / 2, f"waited {waited:.1f} s for a line already written"
