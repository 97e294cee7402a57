"""The built-in webhook dispatcher (`RECOVERY_DISPATCHER=webhook`): each due attempt is
POSTed as signed JSON to the orchestrator's URL, so an orchestrator needs no Python.

The request (docs/CONTRACTS.md, "The webhook dispatcher"): a compact JSON body naming the
attempt (route, generation, attempt ordinal), its candidate (id, agent, provider, model),
the route's reason, the replay identity and `next_step` `run`; the headers
`Idempotency-Key: <route>:<generation>:<ordinal>` (the same on every redelivery of that
attempt), `X-Recovery-Timestamp: <unix seconds>` and `X-Recovery-Signature: v1=<hex>`, the
HMAC-SHA256 of `<timestamp>.<body>` under the shared secret.

What the answer means:
- a 2xx: delivered;
- 503 or 429 ("not now", optionally with `Retry-After`), a refused connection, or a
  connect that failed or timed out before anything was written: nothing was sent,
  `NotDispatched` (redelivered later with the same key, the provider's budget untouched);
- a timeout or a reset after the request was written, or any other status: the receiver
  may have acted, `AmbiguousDispatch` (the route stops for manual recovery, the status in
  its reason).

Only the status and a sanitised excerpt of a response body are ever kept.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import socket
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Final
from urllib.parse import urlsplit

from actors.errors import CorruptProfileError
from actors.jobs.dispatcher import (
    MAX_RETRY_AFTER_S,
    AmbiguousDispatch,
    DispatchFacts,
    NotDispatched,
    ReplayIdentity,
)
from actors.routes.models import RouteSnapshot
from actors.routes.profiles import ConcreteProfile, profile_from_json
from catalogue.sanitize import sanitize

WEBHOOK: Final = "webhook"
"""The RECOVERY_DISPATCHER value that names this dispatcher."""
SIGNATURE_HEADER: Final = "X-Recovery-Signature"
TIMESTAMP_HEADER: Final = "X-Recovery-Timestamp"
KEY_HEADER: Final = "Idempotency-Key"
SIGNATURE_VERSION: Final = "v1"
NOT_NOW_STATUSES: Final = frozenset({429, 503})
BODY_EXCERPT_CHARS: Final = 200
_READ_LIMIT: Final = 64 * 1024


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header's value of `body` sent at `timestamp` (unix seconds)."""
    message = str(timestamp).encode() + b"." + body
    digest = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    return f"{SIGNATURE_VERSION}={digest}"


def idempotency_key(identity: ReplayIdentity) -> str:
    """The attempt's key, the same on every redelivery of it."""
    return f"{identity.route_id}:{identity.generation}:{identity.ordinal}"


@dataclass(frozen=True, slots=True)
class CandidateRef:
    """What the receiver needs to launch the turn: the candidate and where it runs."""

    id: str | None
    agent: str | None = None
    provider: str | None = None
    model: str | None = None

    @classmethod
    def of(cls, snapshot: RouteSnapshot) -> CandidateRef:
        """The route's current candidate as its stored profile names it (only the id when
        the profile cannot be read: the route's own steps stop it on its next decision)."""
        try:
            profile = profile_from_json(snapshot.route_id, snapshot.profile)
        except CorruptProfileError:
            return cls(snapshot.candidate_id)
        found = (
            profile
            if isinstance(profile, ConcreteProfile)
            else next((c for c in profile.candidates if c.id == snapshot.candidate_id), None)
        )
        if found is None or found.id != snapshot.candidate_id:
            return cls(snapshot.candidate_id)
        return cls(found.id, found.agent, found.provider, found.model)


def payload(identity: ReplayIdentity, candidate: CandidateRef, reason: str | None) -> bytes:
    """The request body: compact JSON with sorted keys (what the signature covers)."""
    document = {
        "route_id": identity.route_id,
        "generation": identity.generation,
        "ordinal": identity.ordinal,
        "idempotency_key": idempotency_key(identity),
        "candidate": {
            "id": candidate.id, "agent": candidate.agent, "provider": candidate.provider,
            "model": candidate.model,
        },
        "reason": reason,
        "next_step": "run",
        "replay": {
            "route_id": identity.route_id, "generation": identity.generation,
            "ordinal": identity.ordinal, "candidate_id": identity.candidate_id,
            "provider_session_id": identity.provider_session_id,
            "prompt_ref": identity.prompt_ref,
        },
    }  # fmt: skip
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


def retry_after_s(value: str | None, now: datetime) -> float | None:
    """A `Retry-After` header (delta-seconds or an HTTP-date) as seconds from `now`,
    within 0..MAX_RETRY_AFTER_S; None when absent or unreadable."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(min(int(text), MAX_RETRY_AFTER_S))
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        return None
    return max(0.0, min((moment - now).total_seconds(), float(MAX_RETRY_AFTER_S)))


@dataclass(frozen=True, slots=True)
class WebhookDispatcher:
    """A dispatcher (actors/jobs/dispatcher.py) that POSTs the attempt to `url`, bounded by
    `timeout_s` for the connect and for the answer. Returns DispatchFacts when delivered;
    raises NotDispatched or AmbiguousDispatch (module docstring), each with its facts."""

    url: str
    secret: str = field(repr=False)
    timeout_s: float
    candidate: CandidateRef

    def __call__(  # noqa: PLR0917 - the dispatcher's arguments (docs/CONTRACTS.md, Routes)
        self,
        route_id: str,
        generation: int,
        ordinal: int,
        candidate_id: str | None,
        reason: str | None,
        identity: ReplayIdentity,
        /,
    ) -> DispatchFacts:
        body = payload(identity, self.candidate, reason)
        timestamp = int(time.time())
        headers = {
            "Content-Type": "application/json",
            KEY_HEADER: idempotency_key(identity),
            TIMESTAMP_HEADER: str(timestamp),
            SIGNATURE_HEADER: sign(self.secret, timestamp, body),
        }
        started = time.monotonic()
        connection = self._connection()
        try:
            return self._post(connection, body, headers, started)
        finally:
            connection.close()

    def _connection(self) -> http.client.HTTPConnection:
        parts = urlsplit(self.url)
        secure = parts.scheme == "https"
        kind = http.client.HTTPSConnection if secure else http.client.HTTPConnection
        return kind(parts.hostname or "", parts.port, timeout=self.timeout_s)

    def _target(self) -> str:
        parts = urlsplit(self.url)
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    def _post(
        self,
        connection: http.client.HTTPConnection,
        body: bytes,
        headers: dict[str, str],
        started: float,
    ) -> DispatchFacts:
        try:
            connection.connect()
        except OSError as error:  # refused, unreachable, a connect timeout: nothing written
            facts = DispatchFacts(None, _ms_since(started))
            raise _with(NotDispatched(f"webhook not reached: {_why(error)}"), facts) from None
        try:
            connection.request("POST", self._target(), body=body, headers=headers)
            response = connection.getresponse()
            excerpt = _excerpt(response.read(_READ_LIMIT))
        except (OSError, http.client.HTTPException) as error:
            facts = DispatchFacts(None, _ms_since(started))
            timed_out = isinstance(error, TimeoutError | socket.timeout)
            what = f"no answer within {self.timeout_s:g} s" if timed_out else _why(error)
            ambiguous = AmbiguousDispatch(f"webhook request written, then {what}")
            raise _with(ambiguous, facts) from None
        facts = DispatchFacts(response.status, _ms_since(started), excerpt)
        if 200 <= response.status < 300:
            return facts
        if response.status in NOT_NOW_STATUSES:
            hint = retry_after_s(response.getheader("Retry-After"), datetime.now(UTC))
            refusal = NotDispatched(f"webhook answered {response.status}", retry_after=hint)
            raise _with(refusal, facts)
        ambiguous = AmbiguousDispatch(f"webhook answered {response.status}: outcome ambiguous")
        raise _with(ambiguous, facts)


def _with(error: Any, facts: DispatchFacts) -> Any:
    error.facts = facts
    return error


def _ms_since(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 3)


def _why(error: BaseException) -> str:
    return sanitize(f"{type(error).__name__}: {error}")[:BODY_EXCERPT_CHARS]


def _excerpt(body: bytes) -> str:
    return sanitize(body.decode("utf-8", "replace"))[:BODY_EXCERPT_CHARS]
