"""The transcript's keys: under the prefix, built from validated ids only."""

from __future__ import annotations

import pytest

from actors.errors import InvalidIdentifierError, InvalidRouteIdError
from actors.keys import KeySpace, session_member, valid_message_id, valid_task_id
from actors.store.transcript import new_message_id
from tests.actors.route_builders import T0

MESSAGE_ID = "0123456789abcdef0123456789abcdef"


def test_the_transcript_keys_sit_under_the_prefix_and_read_plainly() -> None:
    keys = KeySpace("acme")
    assert keys.message(MESSAGE_ID) == f"acme:message:{MESSAGE_ID}"
    assert keys.session_messages("task-1", "route-1") == "acme:session-messages:task-1:route-1"
    assert keys.transcript_sessions == "acme:transcript-sessions"
    assert keys.transcript == "acme:transcript"


@pytest.mark.parametrize("task_id", ["", "a:b", "a b", "t*", "x" * 129, 7, None])
def test_a_task_id_that_could_inject_a_key_is_refused(task_id: object) -> None:
    with pytest.raises(InvalidIdentifierError) as caught:
        valid_task_id(task_id)  # type: ignore[arg-type]  # what is refused
    assert caught.value.kind == "task id"


@pytest.mark.parametrize(
    "message_id", ["", "0123", MESSAGE_ID.upper(), MESSAGE_ID + "0", "*" * 32, None]
)
def test_a_message_id_is_32_lowercase_hex(message_id: object) -> None:
    with pytest.raises(InvalidIdentifierError) as caught:
        valid_message_id(message_id)  # type: ignore[arg-type]  # what is refused
    assert caught.value.kind == "message id"


def test_a_session_member_names_the_pair_and_refuses_a_bad_session() -> None:
    assert session_member("task-1", "route-1") == "task-1:route-1"
    with pytest.raises(InvalidRouteIdError):
        session_member("task-1", "route:1")


def test_new_message_ids_are_valid_distinct_and_sort_by_their_millisecond() -> None:
    ids = {new_message_id(T0) for _ in range(1000)}
    assert len(ids) == 1000
    assert all(valid_message_id(i) for i in ids)
    later = new_message_id(T0.replace(microsecond=T0.microsecond + 1000))
    assert all(i < later for i in ids)
