"""The demo's own Redis keys, under the runtime's key prefix (`<p>:demo:…`).

    <p>:demo:dispatches   list   the demo dispatcher's log: one JSON object per call
    <p>:demo:turns        list   run-the-next-turn messages the simulated orchestrator pops

They belong to the demo, not to the runtime's layout (actors/keys.py), and live only in
the demo's temporary Redis.
"""

from __future__ import annotations

from dataclasses import dataclass

from actors.keys import KeySpace


@dataclass(frozen=True, slots=True)
class DemoKeys:
    prefix: str

    def __post_init__(self) -> None:
        KeySpace(self.prefix)  # the same rules as the runtime's prefix

    @property
    def dispatches(self) -> str:
        return f"{self.prefix}:demo:dispatches"

    @property
    def turns(self) -> str:
        return f"{self.prefix}:demo:turns"
