"""The dispatch ledger: one Redis hash per attempt (route, generation, attempt ordinal),
moved queued -> started -> finished by the job itself (dispatch_ledger.lua), so that an
attempt never started is provably undispatched and one started and never finished is
ambiguous. An attempt the dispatcher answered NotDispatched (nothing sent) is queued again
for its redelivery once its route has recorded the answer; `returns` counts them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, Literal

from redis import Redis

from actors.keys import AttemptFence, KeySpace
from actors.store.replies import reply_text, reply_texts
from actors.store.scripts import script
from catalogue.sanitize import sanitize

LEDGER_TTL_S: Final = 7 * 24 * 3600
FACT_FIELDS: Final = frozenset({"status", "latency_ms", "answer"})
"""What a dispatcher observed of its call (actors/jobs/dispatcher.py DispatchFacts)."""

LedgerState = Literal["none", "queued", "started", "finished"]
Outcome = Literal["delivered", "not_dispatched", "failed"]


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    state: LedgerState
    fields: Mapping[str, str] = field(default_factory=dict)

    @property
    def worker(self) -> str | None:
        return self.fields.get("worker") or None

    def awaits_redelivery(self, redeliveries: int) -> bool:
        """Whether the attempt is finished `not_dispatched` and its route has recorded
        every such answer (`redeliveries`): its redelivery may be queued."""
        returns = self.fields.get("returns", "0")
        return (
            self.state == "finished"
            and self.fields.get("outcome") == "not_dispatched"
            and redeliveries >= 1
            and returns == str(redeliveries)
        )

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

    def read(self, fence: AttemptFence) -> LedgerEntry:
        raw = reply_texts(self._connection.hgetall(self.keys.dispatch(fence)))
        state = raw.get("state", "none")
        if state not in ("queued", "started", "finished"):
            return LedgerEntry("none", raw)
        return LedgerEntry(state, raw)  # type: ignore[arg-type]  # checked just above

    def queue(
        self, fence: AttemptFence, job_id: str, at: datetime, *, redeliveries: int = 0
    ) -> str:
        """Queue the attempt's dispatch: a new ledger, or (with `redeliveries`, the
        NotDispatched answers its route has recorded for the attempt) a redelivery of one
        the dispatcher answered NotDispatched that many times."""
        return self._step(fence, ["queue", _iso(at), job_id, str(redeliveries)])

    def start(self, fence: AttemptFence, worker: str, at: datetime) -> str:
        return self._step(fence, ["start", _iso(at), worker, ""])

    def finish(
        self,
        fence: AttemptFence,
        outcome: Outcome,
        at: datetime,
        *,
        detail: str = "",
        facts: Mapping[str, str] | None = None,
    ) -> str:
        """`detail` (a dispatcher's message, often exception text) is stored sanitised;
        `facts` (FACT_FIELDS: what the dispatcher observed) sanitised too."""
        pairs: list[str] = []
        for name, value in (facts or {}).items():
            if name not in FACT_FIELDS:
                raise ValueError(f"unknown ledger fact {name!r} (known: {sorted(FACT_FIELDS)})")
            pairs += [name, sanitize(value)]
        return self._step(fence, ["finish", _iso(at), outcome, sanitize(detail)], pairs)

    def _step(self, fence: AttemptFence, argv: list[str], extra: list[str] | None = None) -> str:
        """ "applied" when the step was written, else the ledger's state that refused it."""
        applied, state = self._script(
            keys=[self.keys.dispatch(fence)], args=[*argv, str(self.ttl_s), *(extra or [])]
        )
        return "applied" if int(applied) == 1 else reply_text(state)
