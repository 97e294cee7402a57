"""An installation's record and its owner's lease in Redis (synchronous: the runtime and
the CLI use them, never a hot path).

`<prefix>:installation` is one JSON document: the host ring (host names and virtual
nodes), the Ray address the hosts run on, the installation's settings without secrets,
a digest of its installation key, and who owns it. Every client reads the ring from
here, so no client setting can make two hosts own one route. `<prefix>:installation:owner`
holds the owner's token with a TTL the owner keeps renewing; when it lapses (the owner
died) the next process to start the installation becomes its owner.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

import redis
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from actors.errors import RecoveryError, StoreUnavailableError
from actors.keys import KeySpace
from actors.store.scripts import script

RECORD_VERSION: Final = 1
REDIS_TIMEOUT_S: Final = 5.0


class CorruptInstallationError(RecoveryError):
    """The installation record under a prefix cannot be read (not this project's format)."""

    def __init__(self, key: str, detail: str) -> None:
        self.key = key
        self.detail = detail
        super().__init__(f"installation record {key!r} is unreadable: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.key, self.detail))


class NoInstallationError(RecoveryError):
    """Nothing to attach to: no installation is recorded under the prefix."""


class InstallationRecord(BaseModel):
    """What every process of one installation agrees on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = RECORD_VERSION
    host_names: tuple[str, ...] = Field(min_length=1)
    circuit_host_names: tuple[str, ...] = ()  # none: the route hosts write circuits
    virtual_nodes: int = Field(ge=1)
    ray_address: str | None = None
    settings: dict[str, Any]
    key_digest: str
    owner: str
    started_at: datetime

    @property
    def host_count(self) -> int:
        return len(self.host_names)


def read_installation(connection: redis.Redis, keys: KeySpace) -> InstallationRecord | None:
    """The record under `keys`' prefix, or None when no installation was recorded there.
    Raises CorruptInstallationError, StoreUnavailableError."""
    try:
        text = connection.get(keys.installation)
    except redis.RedisError as error:
        raise StoreUnavailableError("installation read", str(error)) from error
    if text is None:
        return None
    try:
        return InstallationRecord.model_validate_json(text)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "document"
        raise CorruptInstallationError(keys.installation, f"{where}: {first['msg']}") from None


def write_installation(connection: redis.Redis, keys: KeySpace, record: InstallationRecord) -> None:
    """Record the installation (its owner does, once it holds the lease)."""
    try:
        connection.set(keys.installation, record.model_dump_json())
    except redis.RedisError as error:
        raise StoreUnavailableError("installation write", str(error)) from error


class OwnerLease:
    """The owner lease of one installation, held under `token` (lua/installation_owner.lua)."""

    def __init__(
        self, connection: redis.Redis, keys: KeySpace, token: str, *, ttl_s: float
    ) -> None:
        self.keys = keys
        self.token = token
        self._connection = connection
        self.ttl_ms = max(1, round(ttl_s * 1000))
        self._run = connection.register_script(script("installation_owner").source)

    def claim(self) -> bool:
        """Take the lease unless a live owner holds it (True: this token owns it now)."""
        return self._call("claim")

    def renew(self) -> bool:
        """Extend the lease; False when it lapsed and another process (or nobody) holds it."""
        return self._call("renew")

    def release(self) -> bool:
        return self._call("release")

    def holder(self) -> str | None:
        """The token holding the lease now (None: no live owner)."""
        return live_owner(self._connection, self.keys)

    def holder_and_remaining_ms(self) -> tuple[str | None, int]:
        """The token holding the lease now (None: no live owner) and the milliseconds its
        lease has left, read together (a renewal puts them back up to the TTL).
        Raises StoreUnavailableError."""
        try:
            with self._connection.pipeline(transaction=True) as pipeline:
                pipeline.get(self.keys.installation_owner)
                pipeline.pttl(self.keys.installation_owner)
                found, remaining = pipeline.execute()
        except redis.RedisError as error:
            raise StoreUnavailableError("installation owner read", str(error)) from error
        return (None, 0) if found is None else (_text(found), int(remaining))

    def _call(self, action: str) -> bool:
        try:
            done = self._run(
                keys=[self.keys.installation_owner], args=[action, self.token, self.ttl_ms]
            )
        except redis.RedisError as error:
            raise StoreUnavailableError(f"installation owner {action}", str(error)) from error
        return bool(done)


def live_owner(connection: redis.Redis, keys: KeySpace) -> str | None:
    """The token of the installation's live owner (None: nobody holds its lease now).
    Raises StoreUnavailableError."""
    try:
        found = connection.get(keys.installation_owner)
    except redis.RedisError as error:
        raise StoreUnavailableError("installation owner read", str(error)) from error
    return None if found is None else _text(found)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def recorded_at(url: str, keys: KeySpace) -> InstallationRecord:
    """The installation recorded in the Redis at `url` under `keys`' prefix. Raises
    NoInstallationError when there is none, CorruptInstallationError, StoreUnavailableError."""
    connection = redis.Redis.from_url(
        url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S
    )
    try:
        record = read_installation(connection, keys)
    finally:
        connection.close()
    if record is None:
        raise NoInstallationError(f"no installation is recorded under prefix {keys.prefix!r}")
    return record
