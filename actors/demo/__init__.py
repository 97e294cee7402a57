"""`recovery demo`: a simulated orchestrator drives a fleet through the real runtime.

runner.py starts and stops everything; orchestrator.py is the simulated orchestrator,
turns.py what its candidates do (corpus_pool.py, acp_turns.py give the evidence),
profiles.py the three dynamic profiles, dispatcher.py the dispatcher the rq workers call,
facts.py and report.py the report read from Redis, progress.py and render.py the output.
`actors.demo.runner.run_demo` runs it (imported on its own: it imports Ray, which the
dispatcher's rq workers do not need).
"""

from actors.demo.options import DemoOptions
from actors.demo.report import build_report

__all__ = ["DemoOptions", "build_report"]
