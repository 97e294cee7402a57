"""The runtime's exceptions: one root, identifiers as attributes, lowercase messages.

The root, `RecoveryError`, is the core's (catalogue/errors.py), re-exported here: the
core's errors (PolicyError, RuleError, ...) and the shell's share it, so
`except RecoveryError` catches everything the project raises on purpose.

Every exception pickles by its identifiers (`__reduce__`), so it survives a trip through a
Ray actor call unchanged.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable
from typing import Any

from catalogue.errors import RecoveryError
from catalogue.sanitize import sanitize

__all__ = [
    "CORRUPT_PREFIX",
    "CircuitConflictError",
    "CircuitStoreUnavailableError",
    "CorruptCircuitError",
    "CorruptProfileError",
    "CorruptRouteError",
    "InvalidCircuitInputError",
    "InvalidIdentifierError",
    "InvalidRouteIdError",
    "InvalidStateError",
    "MessageNotFoundError",
    "NoEligibleCandidateError",
    "NotAuthorisedError",
    "PluginLoadError",
    "RecoveryError",
    "StaleFieldError",
    "StaleGenerationError",
    "StaleOrdinalError",
    "StoreUnavailableError",
    "TransitionRejectedError",
    "corrupt_reason",
    "error_report",
    "error_text",
]


def error_text(error: BaseException) -> str:
    """An exception's message for a log line, a CLI message or a stored detail: sanitised
    (an exception's text may quote a credential), its type's name when it has none."""
    return sanitize(str(error) or type(error).__name__)


def error_report(error: BaseException) -> str:
    """An unexpected exception with its traceback, for a log: sanitised and bounded as
    every text that leaves the runtime (a frame's line or a message may quote a secret)."""
    return sanitize("".join(traceback.format_exception(error)))


class InvalidIdentifierError(RecoveryError):
    """An identifier that cannot become part of a Redis key (e.g. a key prefix, a host id).

    Deliberately not a ValueError: pydantic re-raises it as is instead of folding it into a
    ValidationError, so callers always see this type.
    """

    def __init__(self, kind: str, value: object, pattern: str) -> None:
        self.kind = kind
        self.value = value
        self.pattern = pattern
        super().__init__(f"invalid {kind} {value!r}: must match {pattern}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.kind, self.value, self.pattern))


class InvalidCommandError(RecoveryError):
    """A command argument of the wrong type or shape (e.g. a generation given as `True`
    or `1.0`, a report without evidence): refused before anything is read or written."""

    def __init__(self, field: str, value: object, expected: str) -> None:
        self.field = field
        self.value = value
        self.expected = expected
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:79] + "…"
        super().__init__(f"{field}: must be {expected}, got {shown}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.field, self.value, self.expected))


class InvalidRouteIdError(InvalidIdentifierError):
    """A route id outside `[A-Za-z0-9._-]{1,128}` (no key injection)."""

    def __init__(self, route_id: object, pattern: str) -> None:
        self.route_id = route_id
        super().__init__("route id", route_id, pattern)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.route_id, self.pattern))


class TransitionRejectedError(RecoveryError):
    """The fence refused a transition; nothing was written. Carries the route's actual
    generation and state so the caller can re-read or report them."""

    route_id: str
    actual_generation: int
    actual_state: str


class StaleGenerationError(TransitionRejectedError):
    def __init__(self, route_id: str, expected: int, actual: int, actual_state: str) -> None:
        self.route_id = route_id
        self.expected = expected
        self.actual = actual
        self.actual_generation = actual
        self.actual_state = actual_state
        super().__init__(
            f"route {route_id!r}: expected generation {expected}, found {actual} ({actual_state})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.route_id, self.expected, self.actual, self.actual_state))


class InvalidStateError(TransitionRejectedError):
    def __init__(self, route_id: str, state: str, allowed: Iterable[str], generation: int) -> None:
        self.route_id = route_id
        self.state = state
        self.actual_state = state
        self.allowed = tuple(sorted(allowed))
        self.actual_generation = generation
        super().__init__(
            f"route {route_id!r} is {state!r} (generation {generation}); "
            f"this transition needs one of {', '.join(self.allowed)}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.route_id, self.state, self.allowed, self.actual_generation))


class StaleOrdinalError(TransitionRejectedError):
    """The route is at the expected generation and state, but its pending attempt is no
    longer the one the caller saw (a late timer, or a read overtaken by a write)."""

    def __init__(
        self, route_id: str, expected: int, actual: int, actual_generation: int, actual_state: str
    ) -> None:
        self.route_id = route_id
        self.expected = expected
        self.actual = actual
        self.actual_generation = actual_generation
        self.actual_state = actual_state
        super().__init__(
            f"route {route_id!r}: expected attempt ordinal {expected}, found {actual} "
            f"(generation {actual_generation}, {actual_state})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            type(self),
            (self.route_id, self.expected, self.actual, self.actual_generation, self.actual_state),
        )


class StaleFieldError(TransitionRejectedError):
    """A quarantine lost its fence: the corrupt field it was planned from no longer holds
    the text it read (another writer got there first)."""

    def __init__(
        self, route_id: str, field: str, actual_generation: int, actual_state: str
    ) -> None:
        self.route_id = route_id
        self.field = field
        self.actual_generation = actual_generation
        self.actual_state = actual_state
        super().__init__(f"route {route_id!r}: field {field!r} changed since it was read")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.route_id, self.field, self.actual_generation, self.actual_state))


class NoEligibleCandidateError(RecoveryError):
    """A route cannot start (or start fresh, or resume) because its profile offers no
    enabled candidate to run on. Nothing was written."""

    def __init__(self, route_id: str, action: str) -> None:
        self.route_id = route_id
        self.action = action
        super().__init__(f"route {route_id!r}: no enabled candidate to {action} on")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.route_id, self.action))


class StoreUnavailableError(RecoveryError):
    """Redis failed (refused, timed out, or a script error): the operation's outcome is
    an error and nothing else happens. `operation` names what was attempted."""

    def __init__(self, operation: str, detail: str) -> None:
        self.operation = operation
        self.detail = detail
        super().__init__(f"route store unavailable during {operation}: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.operation, self.detail))


class MessageNotFoundError(RecoveryError):
    """A transcript message to update that does not exist (deleted, or never written)."""

    def __init__(self, message_id: str) -> None:
        self.message_id = message_id
        super().__init__(f"transcript message {message_id!r} does not exist")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message_id,))


class NotAuthorisedError(RecoveryError):
    """A task-session pair the principal may not act on, or that does not exist: the two
    are one answer on purpose (a caller cannot probe which sessions exist). Built from
    the caller's own input only, so a denied pair and a foreign one read the same."""

    def __init__(self, task_id: object, session_id: object) -> None:
        self.task_id = task_id
        self.session_id = session_id
        super().__init__(
            f"task {_shown(task_id)}, session {_shown(session_id)}: not found or not authorised"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.task_id, self.session_id))


class PluginLoadError(RecoveryError, ValueError):
    """A `module:factory` setting (e.g. RECOVERY_TRANSCRIPT) that does not load: `setting`
    names the variable, `spec` its value, `detail` what went wrong."""

    def __init__(self, setting: str, spec: str, detail: str) -> None:
        self.setting = setting
        self.spec = spec
        self.detail = detail
        super().__init__(f"{setting}={spec!r}: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.setting, self.spec, self.detail))


def _shown(value: object) -> str:
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:79] + "…"


class InvalidCircuitInputError(RecoveryError):
    """A circuit operation was given a value it cannot use (a resource part, a naive time,
    a holder or TTL); `field` names the argument. Nothing was read or written."""

    def __init__(self, field: str, value: object, expected: str) -> None:
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(f"invalid circuit {field} {value!r}: {expected}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.field, self.value, self.expected))


class CircuitConflictError(RecoveryError):
    """A circuit kept changing under the caller: every compare-and-set of `attempts` found
    a newer version. Nothing of this call was written."""

    def __init__(self, resource_id: str, operation: str, attempts: int) -> None:
        self.resource_id = resource_id
        self.operation = operation
        self.attempts = attempts
        super().__init__(
            f"circuit {resource_id!r}: {operation} lost {attempts} compare-and-set rounds"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.resource_id, self.operation, self.attempts))


class CorruptCircuitError(RecoveryError):
    """A stored circuit hash that does not decode into a valid circuit state."""

    def __init__(self, resource_id: str, detail: str) -> None:
        self.resource_id = resource_id
        self.detail = detail
        super().__init__(f"circuit {resource_id!r} holds unreadable state: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.resource_id, self.detail))


class CorruptProfileError(RecoveryError):
    """A route's stored profile that is not JSON, not a JSON object, or not a valid
    profile: the route cannot be planned from it (never a guess at a policy)."""

    def __init__(self, route_id: str, detail: str) -> None:
        self.route_id = route_id
        self.detail = detail
        super().__init__(f"route {route_id!r} holds an unreadable profile: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.route_id, self.detail))


class CircuitStoreUnavailableError(StoreUnavailableError):
    """Redis failed during a circuit operation; as StoreUnavailableError, for circuits."""

    def __init__(self, operation: str, detail: str) -> None:
        super().__init__(operation, detail)
        self.args = (f"circuit store unavailable during {operation}: {detail}",)


class CorruptRouteError(RecoveryError):
    """A route's stored data that does not decode: `field` of the hash at `key` (`where`
    is "route" for the route hash, "schedule" for its schedule hash). `stored` is the
    field's text as found (the quarantine's fence, never shown), `salvaged` the route
    with what could be read (a RouteSnapshot, None for a schedule). `reason` is what the
    quarantined route says: `corrupt: <key> <field>: <detail>`, sanitised and bounded."""

    def __init__(
        self,
        route_id: str,
        key: str,
        field: str,
        detail: str,
        *,
        where: str = "route",
        stored: str = "",
        salvaged: Any = None,
    ) -> None:
        self.route_id = route_id
        self.key = key
        self.field = field
        self.detail = detail
        self.where = where
        self.stored = stored
        self.salvaged = salvaged
        self.reason = corrupt_reason(key, field, detail)
        super().__init__(f"route {route_id!r}: {self.reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_corrupt_route, (self.route_id, self.key, self.field, self.detail, self.where,
                                 self.stored, self.salvaged))  # fmt: skip


def _corrupt_route(  # noqa: PLR0917 - the pickled identifiers, in order
    route_id: str, key: str, field: str, detail: str, where: str, stored: str, salvaged: Any
) -> CorruptRouteError:
    return CorruptRouteError(
        route_id, key, field, detail, where=where, stored=stored, salvaged=salvaged
    )


CORRUPT_PREFIX = "corrupt: "
CORRUPT_DETAIL_CHARS = 240


def corrupt_reason(key: str, field: str, detail: str) -> str:
    """The reason a quarantined route carries: it begins `corrupt:` and names the key and
    field; the detail is sanitised and cut to CORRUPT_DETAIL_CHARS."""
    shown = sanitize(detail)
    if len(shown) > CORRUPT_DETAIL_CHARS:
        shown = shown[: CORRUPT_DETAIL_CHARS - 1] + "…"
    return f"{CORRUPT_PREFIX}{sanitize(key)[:300]} {sanitize(field)[:64]}: {shown}"
