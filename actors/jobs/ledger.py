"""The dispatch ledger: one Redis hash per attempt (route, generation, attempt ordinal),
moved queued -> started -> finished by the job itself (dispatch_ledger.lua), so that an
attempt never started is provably undispatched and one started and never finished is
ambiguous."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, Literal

from redis import Redis

from actors.keys import KeySpace
from actors.store.replies import reply_text, reply_texts
from actors.store.scripts import script

LEDGER_TTL_S: Final = 7 * 24 * 3600

LedgerState = Literal["none", "queued", "started", "finished"]
Outcome = Literal["delivered", "not_dispatched", "failed"]


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    state: LedgerState
    fields: Mapping[str, str] = field(default_factory=dict)

    @property
    def worker(self) -> str | None:
        return self.fields.get("worker") or None

    @property
    def started_at(self) -> datetime | None:
        text = self.fields.get("started_at")
        return datetime.fromisoformat(text) if text else None


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


class DispatchLedger:
    """The ledger hashes under one key prefix, each step one run of dispatch_ledger.lua."""

    def __init__(self, connection: Redis, keys: KeySpace, *, ttl_s: int = LEDGER_TTL_S) -> None:
        if ttl_s < 1:
            raise ValueError(f"ttl_s must be >= 1, got {ttl_s}")
        self.keys = keys
        self.ttl_s = ttl_s
        self._connection = connection
        self._script = connection.register_script(script("dispatch_ledger").source)

    def read(self, route_id: str, generation: int, ordinal: int) -> LedgerEntry:
        raw = reply_texts(
            self._connection.hgetall(self.keys.dispatch(route_id, generation, ordinal))
        )
        state = raw.get("state", "none")
        if state not in ("queued", "started", "finished"):
            return LedgerEntry("none", raw)
        return LedgerEntry(state, raw)  # type: ignore[arg-type]  # checked just above

    def queue(self, route_id: str, generation: int, ordinal: int, job_id: str, at: datetime) -> str:
        return self._step(route_id, generation, ordinal, ["queue", _iso(at), job_id, ""])

    def start(self, route_id: str, generation: int, ordinal: int, worker: str, at: datetime) -> str:
        return self._step(route_id, generation, ordinal, ["start", _iso(at), worker, ""])

    def finish(
        self, route_id: str, generation: int, ordinal: int, outcome: Outcome, at: datetime, *,
        detail: str = "",
    ) -> str:  # fmt: skip
        return self._step(route_id, generation, ordinal, ["finish", _iso(at), outcome, detail])

    def _step(self, route_id: str, generation: int, ordinal: int, argv: list[str]) -> str:
        """ "applied" when the step was written, else the ledger's state that refused it."""
        key = self.keys.dispatch(route_id, generation, ordinal)
        applied, state = self._script(keys=[key], args=[*argv, str(self.ttl_s)])
        return "applied" if int(applied) == 1 else reply_text(state)
