"""Authorising a cancel: the default checks the task recorded at route start and reads
nothing else; denied and foreign pairs get the same answer."""

from __future__ import annotations

import asyncio

import pytest

from actors.engine.authorisers import Authoriser, RecordedTaskAuthoriser, require_authorised
from actors.errors import NotAuthorisedError, StoreUnavailableError

RECORDED = {"route-1": "task-1", "route-2": "task-2"}


class Lookup:
    """The route's recorded task, counting its reads."""

    def __init__(self, recorded: dict[str, str] | None = None) -> None:
        self.recorded = RECORDED if recorded is None else recorded
        self.reads: list[str] = []

    async def __call__(self, session_id: str) -> str | None:
        self.reads.append(session_id)
        return self.recorded.get(session_id)


def test_the_recorded_pair_is_authorised_for_any_principal() -> None:
    lookup = Lookup()
    authoriser = RecordedTaskAuthoriser(lookup)
    for principal in (None, "alice", "bob"):
        assert asyncio.run(authoriser.authorise("task-1", "route-1", principal)) is True
    assert lookup.reads == ["route-1"] * 3


@pytest.mark.parametrize(
    ("task_id", "session_id"),
    [("task-2", "route-1"), ("task-1", "route-9"), ("task-1x", "route-1"), ("TASK-1", "route-1")],
)
def test_another_task_or_an_unknown_session_is_denied_after_one_read(
    task_id: str, session_id: str
) -> None:
    lookup = Lookup()
    assert asyncio.run(RecordedTaskAuthoriser(lookup).authorise(task_id, session_id, None)) is False
    assert lookup.reads == [session_id]


@pytest.mark.parametrize(
    ("task_id", "session_id"), [("task 1", "route-1"), ("task-1", "route:1"), ("", ""), (3, None)]
)
def test_ids_that_name_nothing_are_denied_without_a_read(
    task_id: object, session_id: object
) -> None:
    lookup = Lookup()
    denied = asyncio.run(
        RecordedTaskAuthoriser(lookup).authorise(task_id, session_id, None)  # type: ignore[arg-type]  # what is refused
    )
    assert denied is False
    assert lookup.reads == []


def _answer(authoriser: Authoriser, task_id: str, session_id: str) -> NotAuthorisedError | None:
    try:
        asyncio.run(require_authorised(authoriser, task_id, session_id, "mallory"))
    except NotAuthorisedError as error:
        return error
    return None


def test_denied_and_foreign_pairs_are_indistinguishable() -> None:
    """The same pair asked of a runtime where the session runs another task (denied) and
    of one where the session does not exist (foreign): one answer, after one read each."""
    recorded_elsewhere, nowhere = Lookup(), Lookup({})
    denied = _answer(RecordedTaskAuthoriser(recorded_elsewhere), "task-1", "route-2")
    foreign = _answer(RecordedTaskAuthoriser(nowhere), "task-1", "route-2")
    assert denied is not None
    assert foreign is not None
    assert (type(denied), str(denied), denied.args, vars(denied)) == (
        type(foreign), str(foreign), foreign.args, vars(foreign),
    )  # fmt: skip
    assert recorded_elsewhere.reads == nowhere.reads == ["route-2"]
    assert _answer(RecordedTaskAuthoriser(Lookup()), "task-1", "route-1") is None


class Odd:
    def __init__(self, answer: object = None, error: BaseException | None = None) -> None:
        self.answer = answer
        self.error = error

    async def authorise(self, task_id: str, session_id: str, principal: str | None) -> bool:
        if self.error is not None:
            raise self.error
        return self.answer  # type: ignore[return-value]  # a careless authoriser


@pytest.mark.parametrize(
    "authoriser",
    [Odd(answer="yes"), Odd(answer=1), Odd(answer=None), Odd(error=KeyError("route-2"))],
    ids=["string", "one", "none", "raises"],
)
def test_only_the_boolean_true_authorises_and_a_failing_authoriser_denies(
    authoriser: Odd, caplog: pytest.LogCaptureFixture
) -> None:
    error = _answer(authoriser, "task-1", "route-2")
    assert error is not None
    assert str(error) == "task 'task-1', session 'route-2': not found or not authorised"


def test_a_store_outage_during_authorisation_is_no_denial() -> None:
    outage = Odd(error=StoreUnavailableError("recorded task", "ConnectionError: refused"))
    with pytest.raises(StoreUnavailableError):
        asyncio.run(require_authorised(outage, "task-1", "route-1", None))
