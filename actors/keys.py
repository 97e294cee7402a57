"""Every Redis key the runtime uses, built here and nowhere else.

All keys live under one configurable prefix (default `recovery`) so two deployments can
share a Redis. Identifiers that become part of a key are validated first: a route id is
`[A-Za-z0-9._-]{1,128}` (the orchestrator's session id; docs/CONTRACTS.md "Routes"), so it can
never contain `:`, a glob character or whitespace, and keys never collide or inject.

Layout (`<p>` = prefix):

    <p>:route:<route>                        hash    route state (one field per snapshot field)
    <p>:attempts:<route>                     list    append-only attempt records (JSON)
    <p>:schedule:<route>                     hash    the route's pending schedule, readable
    <p>:schedules                            zset    route id -> deadline (epoch seconds)
    <p>:events                               stream  route transitions (MAXLEN ~)
    <p>:host:<host>:routes                   set     route ids a route host owns
    <p>:host:<host>:wakes                    stream  waits, delivered dispatches jobs announce
    <p>:dispatch:<route>:<generation>:<ord>  hash    dispatch ledger for one retry
    <p>:backstop:<host>:<second>             string  marker: that second's backstop job is armed
    <p>:circuit:<resource>                   hash    one circuit's state (resource = 32 hex)
    <p>:parked:<resource>                    zset    route ids parked on it -> park time (epoch)
    <p>:circuits                             set     resource ids of every known circuit
    <p>:circuit-events                       stream  circuit state changes and operator
                                                     overrides (MAXLEN ~)
    <p>:message:<message>                    hash    one transcript message (message = 32 hex)
    <p>:session-messages:<task>:<session>    zset    the session's message ids -> created_at
    <p>:transcript-sessions                  set     "<task>:<session>" of every session with
                                                     messages (for listing without SCAN)
    <p>:transcript                           stream  session.message.updated / .deleted (MAXLEN ~)
    <p>:profile:<profile>                    hash    one stored profile: its version and document
    <p>:profiles                             zset    ids of the stored profiles (scored 0: by id)

A task id has a route id's shape; a session is a route, so a session id is a route id;
a profile id has a route id's shape too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Final

from pydantic import AfterValidator, StringConstraints

from actors.errors import InvalidIdentifierError, InvalidRouteIdError

DEFAULT_PREFIX: Final = "recovery"
ROUTE_ID_PATTERN: Final = r"[A-Za-z0-9._-]{1,128}"
HOST_ID_PATTERN: Final = r"[A-Za-z0-9._-]{1,64}"
PREFIX_PATTERN: Final = r"[A-Za-z0-9._:-]{1,64}"
RESOURCE_ID_PATTERN: Final = r"[0-9a-f]{32}"

_ROUTE_ID = re.compile(ROUTE_ID_PATTERN)
_HOST_ID = re.compile(HOST_ID_PATTERN)
_PREFIX = re.compile(PREFIX_PATTERN)
_RESOURCE_ID = re.compile(RESOURCE_ID_PATTERN)
REQUEST_ID_PATTERN: Final = r"[A-Za-z0-9._:-]{1,128}"
_REQUEST_ID = re.compile(REQUEST_ID_PATTERN)
TASK_ID_PATTERN: Final = ROUTE_ID_PATTERN
CALLER_PATTERN: Final = ROUTE_ID_PATTERN
MESSAGE_ID_PATTERN: Final = r"[0-9a-f]{32}"
PROFILE_ID_PATTERN: Final = ROUTE_ID_PATTERN
_MESSAGE_ID = re.compile(MESSAGE_ID_PATTERN)


def valid_route_id(route_id: str) -> str:
    """`route_id` unchanged, or InvalidRouteIdError naming it."""
    if not isinstance(route_id, str) or not _ROUTE_ID.fullmatch(route_id):
        raise InvalidRouteIdError(route_id, ROUTE_ID_PATTERN)
    return route_id


def valid_request_id(request_id: str) -> str:
    """A caller's request id unchanged (an Idempotency-Key's shape: a uuid, a ulid), or
    InvalidIdentifierError naming it."""
    if not isinstance(request_id, str) or not _REQUEST_ID.fullmatch(request_id):
        raise InvalidIdentifierError("request id", request_id, REQUEST_ID_PATTERN)
    return request_id


def valid_task_id(task_id: str) -> str:
    """An orchestrator's task id unchanged (a route id's shape), or InvalidIdentifierError."""
    if not isinstance(task_id, str) or not _ROUTE_ID.fullmatch(task_id):
        raise InvalidIdentifierError("task id", task_id, TASK_ID_PATTERN)
    return task_id


def valid_caller(caller: str) -> str:
    """The name of what drives a route (any name of a route id's shape: `kanban`, `ci`,
    `my-orchestrator`), unchanged, or InvalidIdentifierError naming it."""
    if not isinstance(caller, str) or not _ROUTE_ID.fullmatch(caller):
        raise InvalidIdentifierError("caller", caller, CALLER_PATTERN)
    return caller


def valid_profile_id(profile_id: str) -> str:
    """A stored profile's id (a route id's shape: `fleet`, `team.default`), unchanged, or
    InvalidIdentifierError naming it."""
    if not isinstance(profile_id, str) or not _ROUTE_ID.fullmatch(profile_id):
        raise InvalidIdentifierError("profile id", profile_id, PROFILE_ID_PATTERN)
    return profile_id


def valid_message_id(message_id: str) -> str:
    """A transcript message id the Redis transcript made (32 lowercase hex), unchanged, or
    InvalidIdentifierError naming it."""
    if not isinstance(message_id, str) or not _MESSAGE_ID.fullmatch(message_id):
        raise InvalidIdentifierError("message id", message_id, MESSAGE_ID_PATTERN)
    return message_id


@dataclass(frozen=True, slots=True)
class AttemptFence:
    """One scheduled attempt of one route: (route, generation, attempt ordinal). Timers
    fire it, jobs dispatch it, the dispatch ledger records it and the dispatcher's replay
    identity names it; a write for it applies only while the route still holds exactly this
    attempt. The attempt ordinal never repeats within a generation (the retry ordinal does)."""

    route_id: str
    generation: int
    ordinal: int

    def __str__(self) -> str:
        return f"{self.route_id}:{self.generation}:{self.ordinal}"


def valid_host_id(host_id: str) -> str:
    if not isinstance(host_id, str) or not _HOST_ID.fullmatch(host_id):
        raise InvalidIdentifierError("host id", host_id, HOST_ID_PATTERN)
    return host_id


def _valid_prefix(prefix: str) -> str:
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix) or prefix.endswith(":"):
        raise InvalidIdentifierError("key prefix", prefix, PREFIX_PATTERN)
    return prefix


def valid_resource_id(resource_id: str) -> str:
    """A circuit's `ResourceKey.resource_id` unchanged, or InvalidIdentifierError."""
    if not isinstance(resource_id, str) or not _RESOURCE_ID.fullmatch(resource_id):
        raise InvalidIdentifierError("resource id", resource_id, RESOURCE_ID_PATTERN)
    return resource_id


def _valid_counter(kind: str, value: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidIdentifierError(kind, value, "an integer >= 0")
    return value


def session_member(task_id: str, session_id: str) -> str:
    """`<task>:<session>`: neither id can hold a `:`, so the pair reads back unambiguously."""
    return f"{valid_task_id(task_id)}:{valid_route_id(session_id)}"


RouteId = Annotated[str, AfterValidator(valid_route_id)]
"""A route id field: invalid values raise InvalidRouteIdError (not a ValidationError)."""

HostId = Annotated[str, AfterValidator(valid_host_id)]
TaskId = Annotated[str, AfterValidator(valid_task_id)]
CallerName = Annotated[str, AfterValidator(valid_caller)]
MessageId = Annotated[str, AfterValidator(valid_message_id)]
ProfileId = Annotated[str, StringConstraints(pattern=f"^{PROFILE_ID_PATTERN}$")]
"""A stored profile's id as a field: unlike the ids above, a bad one is a validation error
(a route hash storing one reads as corrupt, and is quarantined)."""


@dataclass(frozen=True, slots=True)
class KeySpace:
    """Key names under one prefix. Methods validate what they are given."""

    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        _valid_prefix(self.prefix)

    def route(self, route_id: str) -> str:
        return f"{self.prefix}:route:{valid_route_id(route_id)}"

    def attempts(self, route_id: str) -> str:
        return f"{self.prefix}:attempts:{valid_route_id(route_id)}"

    def schedule(self, route_id: str) -> str:
        return f"{self.prefix}:schedule:{valid_route_id(route_id)}"

    @property
    def schedules(self) -> str:
        return f"{self.prefix}:schedules"

    @property
    def events(self) -> str:
        return f"{self.prefix}:events"

    def requests(self, route_id: str) -> str:
        """The route's applied request ids, each with the route fields of its outcome."""
        return f"{self.prefix}:requests:{valid_route_id(route_id)}"

    def request_order(self, route_id: str) -> str:
        """The route's applied request ids, oldest first (which to forget first)."""
        return f"{self.prefix}:request-order:{valid_route_id(route_id)}"

    def host_routes(self, host_id: str) -> str:
        return f"{self.prefix}:host:{valid_host_id(host_id)}:routes"

    def host_wakes(self, host_id: str) -> str:
        """The waits written for a host's routes by someone else (a job), for its timers."""
        return f"{self.prefix}:host:{valid_host_id(host_id)}:wakes"

    def dispatch(self, fence: AttemptFence) -> str:
        """The dispatch ledger of one attempt."""
        generation = _valid_counter("generation", fence.generation)
        ordinal = _valid_counter("attempt ordinal", fence.ordinal)
        route_id = valid_route_id(fence.route_id)
        return f"{self.prefix}:dispatch:{route_id}:{generation}:{ordinal}"

    def backstop(self, host_id: str, second: int) -> str:
        """The marker of a host's coalesced backstop job for one whole epoch second."""
        second = _valid_counter("backstop second", second)
        return f"{self.prefix}:backstop:{valid_host_id(host_id)}:{second}"

    def circuit(self, resource_id: str) -> str:
        return f"{self.prefix}:circuit:{valid_resource_id(resource_id)}"

    def parked(self, resource_id: str) -> str:
        return f"{self.prefix}:parked:{valid_resource_id(resource_id)}"

    @property
    def circuits(self) -> str:
        return f"{self.prefix}:circuits"

    @property
    def circuit_events(self) -> str:
        """Every circuit's state changes and operator overrides, as they were written."""
        return f"{self.prefix}:circuit-events"

    def message(self, message_id: str) -> str:
        """One transcript message's hash."""
        return f"{self.prefix}:message:{valid_message_id(message_id)}"

    def session_messages(self, task_id: str, session_id: str) -> str:
        """The message ids of one task's session, scored by creation time (epoch s)."""
        return f"{self.prefix}:session-messages:{session_member(task_id, session_id)}"

    @property
    def transcript_sessions(self) -> str:
        """Every (task, session) that has transcript messages, as `session_member`s."""
        return f"{self.prefix}:transcript-sessions"

    @property
    def transcript(self) -> str:
        """The transcript's change stream (session.message.updated / .deleted)."""
        return f"{self.prefix}:transcript"

    def profile(self, profile_id: str) -> str:
        """One stored profile's hash (its version, document and times)."""
        return f"{self.prefix}:profile:{valid_profile_id(profile_id)}"

    @property
    def profiles(self) -> str:
        """The ids of the stored profiles, each scored 0 (listed in id order, by range)."""
        return f"{self.prefix}:profiles"

    @property
    def installation(self) -> str:
        """The installation's record: its host ring, Ray address and public settings."""
        return f"{self.prefix}:installation"

    @property
    def installation_owner(self) -> str:
        """The owner's lease (its token, with a TTL the owner keeps renewing)."""
        return f"{self.prefix}:installation:owner"

    def pattern(self) -> str:
        """A SCAN MATCH pattern for every key under this prefix (test cleanup, tooling);
        the prefix admits no glob characters, so it needs no escaping."""
        return f"{self.prefix}:*"
