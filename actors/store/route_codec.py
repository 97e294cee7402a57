"""Route models <-> Redis: hash fields, the transition script's request and its reply.

Every stored value is a plain string so `redis-cli HGETALL` reads as the model does: an
unset field is "", times are ISO-8601 UTC with a `Z`, nested values are compact JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import to_json, to_jsonable_python

from actors.errors import (
    CorruptRouteError,
    InvalidStateError,
    StaleFieldError,
    StaleGenerationError,
    StaleOrdinalError,
    StoreUnavailableError,
)
from actors.routes.models import (
    AttemptRecord,
    RouteEvent,
    RouteFields,
    RouteSnapshot,
    ScheduleEntry,
    Transition,
)
from actors.routes.trusted import snapshot_of_validated
from actors.store.shared_documents import PROFILE_DOCUMENTS, PROFILE_TEXTS
from policy.decisions import utc_iso

ModelT = TypeVar("ModelT", bound=BaseModel)

JSON_FIELDS: Final = ("policy_snapshot", "cycle", "profile")
# Schedule hash field names, chosen for `redis-cli` readers; the model's names otherwise.
SCHEDULE_NAMES: Final = {"route_id": "route", "candidate_id": "candidate", "error_class": "class"}
_SCHEDULE_FIELDS: Final = {SCHEDULE_NAMES.get(n, n): n for n in ScheduleEntry.model_fields}
# The schedule hash after `route` and `generation`: (stored name, route field).
_SCHEDULE_FROM_ROUTE: Final = (
    ("state", "state"),
    ("deadline", "deadline"),
    ("candidate", "candidate_id"),
    ("code", "code"),
    ("class", "error_class"),
    ("ordinal", "attempt_ordinal"),
    ("pending_outcome", "pending_outcome"),
    ("reason", "reason"),
)
_ROUTE_FIELDS: Final = tuple(RouteFields.model_fields)
# Route fields an event repeats (all but the JSON documents), in stored order.
_EVENT_ROUTE_FIELDS: Final = tuple(n for n in RouteFields.model_fields if n not in JSON_FIELDS)

STALE_GENERATION: Final = "stale_generation"
INVALID_STATE: Final = "invalid_state"
STALE_ORDINAL: Final = "stale_ordinal"
STALE_FIELD: Final = "stale_field"
# The hash a quarantine's fence reads, by its index in transition.lua's KEYS.
_GUARD_KEY_INDEX: Final = {"route": 1, "schedule": 3}
SHOWN_VALUE_CHARS: Final = 60
DEFAULT_REQUESTS_KEPT: Final = 16
DEFAULT_REQUESTS_TTL_S: Final = 86_400


def _dumps(value: Any) -> str:
    """Compact JSON, UTF-8 kept as is (pydantic-core's encoder: ~7x json.dumps here)."""
    return to_json(value).decode()


def _stored_text(name: str, value: Any) -> str:
    """One route field as its stored string: what its JSON-mode dump gives, as text."""
    if value is None:
        return ""
    if name == "profile":
        return PROFILE_TEXTS.text(value, _dumps)
    if name in JSON_FIELDS:
        return _dumps(value)
    if type(value) is str:
        return value
    if type(value) is int:
        return str(value)
    plain = to_jsonable_python(value)  # enums, datetimes: pydantic-core's JSON forms
    return plain if type(plain) is str else str(plain)


def _route_texts(route: RouteFields) -> dict[str, str]:
    """Every route field as its stored string, read field by field in the model's order
    (no whole-model dump: its JSON documents are encoded once, by _dumps)."""
    return {name: _stored_text(name, getattr(route, name)) for name in _ROUTE_FIELDS}


class _UnreadableError(Exception):
    """A stored field that does not decode: its name and why (the bad value shown)."""

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(field, detail)
        self.field = field
        self.detail = detail


def _decode(model: type[ModelT], raw: Mapping[str, str], **known: Any) -> ModelT:
    """A model from stored strings: "" is unset, JSON fields are parsed, unknown fields
    (from a newer writer) are ignored. Raises _UnreadableError naming the first field
    that does not decode."""
    values: dict[str, Any] = {}
    fields = model.model_fields  # read once: each read of it costs ~1 µs (pydantic 2.11+)
    for name, text in raw.items():
        if name not in fields or text == "":
            continue
        if not text.isascii() and not _is_utf8(text):
            raise _UnreadableError(name, "not UTF-8 text")
        values[name] = _json_field(name, text) if name in JSON_FIELDS else text
    values.update(known)
    try:
        return model.model_validate(values)
    except ValidationError as error:
        raise _first_unreadable(error) from error
    except ValueError as error:
        raise _UnreadableError("?", str(error)) from error


def _is_utf8(text: str) -> bool:
    """Whether text read with `surrogateescape` was valid UTF-8 in Redis."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _json_field(name: str, text: str) -> Any:
    """A stored JSON document; text that is not JSON is unreadable. A profile's text read
    before gives the same document object (actors/store/shared_documents.py)."""
    if name == "profile":
        found = PROFILE_DOCUMENTS.get(text)
        if found is not None:
            return found
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise _UnreadableError(name, f"not JSON: {error}") from error
    if name == "profile":
        PROFILE_DOCUMENTS.put(text, document)
    return document


def _first_unreadable(error: ValidationError) -> _UnreadableError:
    first = error.errors(include_url=False)[0]
    location = first.get("loc") or ("?",)
    shown = repr(first.get("input"))
    if len(shown) > SHOWN_VALUE_CHARS:
        shown = shown[: SHOWN_VALUE_CHARS - 1] + "…"
    return _UnreadableError(str(location[0]), f"{first.get('msg', 'invalid')}, got {shown}")


def _store_failure(what: str, error: _UnreadableError) -> StoreUnavailableError:
    return StoreUnavailableError(what, f"unreadable stored {error.field}: {error.detail}")


def salvaged_route(route_id: str, raw: Mapping[str, str]) -> RouteSnapshot:
    """What can be read of a route hash that does not decode: every field that decodes
    on its own kept, the others at their defaults (an unreadable generation is 0, an
    unreadable state `none`)."""
    values: dict[str, Any] = {}
    for name, text in raw.items():
        if name not in RouteSnapshot.model_fields or text == "" or not _is_utf8(text):
            continue
        try:
            values[name] = _json_field(name, text) if name in JSON_FIELDS else text
        except _UnreadableError:
            continue
    for _ in range(len(values) + 1):
        try:
            return RouteSnapshot.model_validate(
                {"state": "none", "generation": 0, **values, "route_id": route_id}
            )
        except ValidationError as error:
            bad = {str(e["loc"][0]) for e in error.errors() if e.get("loc")}
            if not bad & set(values):
                break
            for name in bad:
                values.pop(name, None)
    return RouteSnapshot.absent(route_id)


def decode_route(route_id: str, raw: Mapping[str, str], key: str) -> RouteSnapshot:
    """The route stored in hash `key`; CorruptRouteError when a field does not decode."""
    if not raw:
        return RouteSnapshot.absent(route_id)
    try:
        return _decode(RouteSnapshot, raw, route_id=route_id)
    except _UnreadableError as error:
        raise CorruptRouteError(
            route_id, key, error.field, error.detail, stored=raw.get(error.field, ""),
            salvaged=salvaged_route(route_id, raw),
        ) from None  # fmt: skip


def applied_snapshot(transition: Transition, at: datetime) -> RouteSnapshot:
    """The snapshot a transition wrote, exactly as a read would return it."""
    values = {name: getattr(transition.route, name) for name in _ROUTE_FIELDS}
    # The transition's fields were validated as a RouteUpdate (the same field types).
    return snapshot_of_validated(
        {**values, "route_id": transition.route_id, "generation": transition.generation,
         "updated_at": at.astimezone(UTC)}
    )  # fmt: skip


def decode_attempt(text: str) -> AttemptRecord:
    try:
        return AttemptRecord.model_validate_json(text)
    except ValidationError as error:
        raise StoreUnavailableError("history", f"unreadable attempt record: {error}") from error


def decode_schedule(raw: Mapping[str, str], route_id: str, key: str) -> ScheduleEntry:
    """Route `route_id`'s schedule stored in hash `key`; CorruptRouteError (`where`
    "schedule", nothing salvaged) when a field does not decode."""
    renamed = {_SCHEDULE_FIELDS.get(n, n): v for n, v in raw.items()}
    try:
        return _decode(ScheduleEntry, renamed)
    except _UnreadableError as error:
        stored_name = SCHEDULE_NAMES.get(error.field, error.field)
        raise CorruptRouteError(
            route_id, key, stored_name, error.detail, where="schedule",
            stored=raw.get(stored_name, ""),
        ) from None  # fmt: skip


def decode_event(event_id: str, raw: Mapping[str, str]) -> RouteEvent:
    at = raw.get("updated_at", "")  # an event repeats the route's write time as its `at`
    try:
        return _decode(RouteEvent, {**raw, "at": at}, event_id=event_id)
    except _UnreadableError as error:
        raise _store_failure("events", error) from None


def transition_request(
    transition: Transition,
    at: datetime,
    events_maxlen: int,
    request: RequestRecord | None = None,
) -> list[str]:
    """ARGV of transition.lua (its header documents every member); with `request`, the
    script applies it once per request id and keeps the ids as `request` says."""
    route_id, route = transition.route_id, transition.route
    texts = _route_texts(route)
    # The event repeats the leading fields: everything but the JSON documents.
    fields = ["route_id", route_id]
    for name in _EVENT_ROUTE_FIELDS:
        fields += (name, texts[name])
    fields += ("updated_at", utc_iso(at))
    event_pairs = len(fields) // 2
    for name in JSON_FIELDS:
        fields += (name, texts[name])
    schedule: list[str] = []
    if route.deadline is not None:
        schedule = ["route", route_id, "generation", str(transition.generation)]
        for stored, name in _SCHEDULE_FROM_ROUTE:
            schedule += (stored, texts[name])
    argv: dict[str, Any] = {
        "route": route_id,
        "expected": transition.expected_generation,
        "generation": transition.generation,
        "allowed": sorted(transition.allowed_from),
        "state": route.state,
        "fields": fields,
        "event_pairs": event_pairs,
        "cause": transition.cause,
        "decision": transition.attempt.decision if transition.attempt else "",
        "schedule": schedule,
        "score": repr(route.deadline.timestamp()) if route.deadline is not None else "",
        "maxlen": events_maxlen,
        "ttl": transition.expire_after_s or 0,
    }
    # Optional members are absent, not null: cjson's null is truthy in Lua.
    if transition.expected_ordinal is not None:
        argv["ordinal"] = transition.expected_ordinal
    if transition.unchanged is not None:
        guard = transition.unchanged
        argv["unchanged"] = [_GUARD_KEY_INDEX[guard.where], guard.field]
        argv["from_state"] = min(transition.allowed_from)
    if request is not None:
        argv.update(
            request_id=request.request_id, requests_keep=request.keep,
            requests_ttl=request.keep_for_s,
        )  # fmt: skip
    attempt = transition.attempt.model_dump_json() if transition.attempt else ""
    if transition.unchanged is not None:
        return [_dumps(argv), attempt, transition.unchanged.text]
    return [_dumps(argv), attempt]


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """How a transition records its caller's request id: the route keeps its last `keep`
    applied ids, for `keep_for_s` after the last one (a replay within them is not applied
    again, and answers the first outcome)."""

    request_id: str
    keep: int = DEFAULT_REQUESTS_KEPT
    keep_for_s: int = DEFAULT_REQUESTS_TTL_S


def outcome_record(snapshot: RouteSnapshot) -> str:
    """What transition.lua keeps of a request's outcome, for a request that changed
    nothing (a no-op answers the route as it was; a replay must answer that again)."""
    texts = _route_texts(snapshot)
    flat = ["route_id", snapshot.route_id]
    for name in _ROUTE_FIELDS:
        flat += (name, texts[name])
    if snapshot.updated_at is not None:
        flat += ("updated_at", utc_iso(snapshot.updated_at))
    return _dumps([snapshot.generation, flat])


def replayed_snapshot(route_id: str, first: str) -> RouteSnapshot:
    """The snapshot a request's first outcome wrote (what transition.lua kept of it)."""
    try:
        generation, flat = json.loads(first)
        pairs = dict(zip(flat[::2], flat[1::2], strict=True))
    except (ValueError, TypeError) as error:
        raise StoreUnavailableError("replay", f"unreadable recorded outcome: {error}") from error
    try:
        return decode_route(route_id, {**pairs, "generation": str(generation)}, "replay")
    except CorruptRouteError as error:  # the route itself may be fine: not a quarantine
        raise StoreUnavailableError("replay", f"unreadable recorded outcome: {error}") from None


TransitionRejection = StaleGenerationError | InvalidStateError | StaleOrdinalError | StaleFieldError


def transition_result(
    transition: Transition, reply: Sequence[Any], at: datetime
) -> RouteSnapshot | TransitionRejection:
    """The script's reply as the applied snapshot or the typed rejection."""
    match list(reply):
        case [1, _generation, _state]:
            return applied_snapshot(transition, at)
        case [2, str(first)]:
            return replayed_snapshot(transition.route_id, first)
        case [0, generation, state, str(why)] if why == STALE_GENERATION:
            return StaleGenerationError(
                transition.route_id, transition.expected_generation, int(generation), str(state)
            )
        case [0, generation, state, str(why)] if why == INVALID_STATE:
            return InvalidStateError(
                transition.route_id, str(state), transition.allowed_from, int(generation)
            )
        case [0, generation, state, str(why)] if why == STALE_FIELD:
            guard = transition.unchanged
            field = guard.field if guard is not None else "?"
            return StaleFieldError(transition.route_id, field, int(generation), str(state))
        case [0, generation, state, str(why), ordinal] if why == STALE_ORDINAL:
            return StaleOrdinalError(
                transition.route_id,
                transition.expected_ordinal if transition.expected_ordinal is not None else -1,
                int(ordinal),
                int(generation),
                str(state),
            )
    raise StoreUnavailableError("apply", f"unexpected reply from transition.lua: {reply!r}")
