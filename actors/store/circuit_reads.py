"""Reading the circuits' state history back: the circuit events stream.

The circuit store appends one event to `<prefix>:circuit-events` in the same script as
every change of a circuit's state (and every operator override): `event`
(`circuit.changed`), `version`, `cause`, `resource_id`, `label`, `from_state`, `state`,
`open_until`, `reason`, `at` (actors/store/circuit_codec.py). The stream is trimmed to
about `events_maxlen` entries. `read_circuit_changes` answers the entries of the last
`since_s` seconds (by the stream ids, Redis's own clock), at most `count` of them, oldest
first; an entry that does not decode is skipped.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from redis.asyncio import Redis
from redis.exceptions import RedisError

from actors.errors import CircuitStoreUnavailableError
from actors.keys import KeySpace
from actors.store.replies import reply_text, reply_texts

MS_PER_S: Final = 1000


class CircuitEvent(BaseModel):
    """One change of a circuit, as the circuit events stream holds it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    event_id: str
    cause: str = Field(min_length=1)
    resource_id: str = Field(pattern=r"^[0-9a-f]{32}$")
    label: str = ""
    from_state: str
    state: str
    open_until: datetime | None = None
    reason: str | None = None
    at: datetime
    version: int = Field(default=0, ge=0)

    @field_validator("open_until", "reason", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        return None if value == "" else value


async def read_circuit_changes(
    client: Redis, keys: KeySpace, *, since_s: float, count: int
) -> list[CircuitEvent]:
    """The circuit events of the last `since_s` seconds (at most `count`, the newest
    kept), oldest first. Raises CircuitStoreUnavailableError when Redis failed."""
    try:
        (seconds, micros) = await client.time()
        start = int(seconds) * MS_PER_S + int(micros) // MS_PER_S - int(since_s * MS_PER_S)
        entries: Any = await client.xrevrange(keys.circuit_events, "+", str(max(start, 0)),
                                              count=count)  # fmt: skip
    except RedisError as error:
        raise CircuitStoreUnavailableError("circuit history", str(error)) from error
    found: list[CircuitEvent] = []
    for entry_id, fields in reversed(entries or []):
        try:
            found.append(CircuitEvent.model_validate(
                {**reply_texts(fields), "event_id": reply_text(entry_id)}))  # fmt: skip
        except ValidationError:
            continue  # not an entry the circuit store wrote: never shown half-read
    return found
