"""Authorising a cancel: the default checks the task recorded at route start and reads
nothing else; denied and foreign pairs get the same answer. Authorising a profile edit:
the default lets every principal edit; an orchestrator's check decides, and one without
it denies every edit."""

from __future__ import annotations

import asyncio

import pytest

from actors.engine.authorisers import (
    PROFILE_ACTIONS,
    Authoriser,
    RecordedTaskAuthoriser,
    require_authorised,
    require_profile_edit,
)
from actors.errors import NotAuthorisedError, StoreUnavailableError
from actors.routes.profile_errors import ProfileEditDeniedError

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


# Profile edits


def _edit(authoriser: object, action: str = "update", profile_id: str = "fleet") -> str | None:
    """Why the edit is denied (the error's text), None when it is allowed."""
    try:
        asyncio.run(require_profile_edit(authoriser, action, profile_id, "alice"))  # type: ignore[arg-type]  # any object may be configured
    except ProfileEditDeniedError as error:
        return str(error)
    return None


@pytest.mark.parametrize("principal", [None, "alice", "bob"])
@pytest.mark.parametrize("action", PROFILE_ACTIONS)
def test_the_default_lets_every_principal_edit_every_profile_without_a_read(
    action: str, principal: str | None
) -> None:
    lookup = Lookup()
    authoriser = RecordedTaskAuthoriser(lookup)
    assert asyncio.run(authoriser.authorise_profile_edit(action, "fleet", principal)) is True
    assert lookup.reads == []


@pytest.mark.parametrize(
    ("action", "profile_id"), [("rename", "fleet"), ("update", "no spaces"), ("delete", "")]
)
def test_the_default_denies_an_edit_that_could_name_nothing(action: str, profile_id: str) -> None:
    denied = _edit(RecordedTaskAuthoriser(Lookup()), action, profile_id)
    assert denied == f"principal 'alice' may not {action} profile {profile_id!r}"


class EditPolicy:
    """An orchestrator's authoriser whose profile-edit check answers `answer` (or raises
    `error`), recording what it was asked; it denies every cancel."""

    def __init__(self, answer: object = True, error: BaseException | None = None) -> None:
        self.answer = answer
        self.error = error
        self.asked: list[tuple[str, str, str | None]] = []

    async def authorise(self, task_id: str, session_id: str, principal: str | None) -> bool:
        return False

    async def authorise_profile_edit(
        self, action: str, profile_id: str, principal: str | None
    ) -> bool:
        self.asked.append((action, profile_id, principal))
        if self.error is not None:
            raise self.error
        return self.answer  # type: ignore[return-value]  # a careless authoriser


def test_an_orchestrators_profile_edit_check_is_asked_and_decides() -> None:
    allowing, denying = EditPolicy(), EditPolicy(answer=False)
    assert _edit(allowing) is None
    assert _edit(denying) == "principal 'alice' may not update profile 'fleet'"
    assert allowing.asked == denying.asked == [("update", "fleet", "alice")]


@pytest.mark.parametrize(
    "authoriser",
    [EditPolicy(answer="yes"), EditPolicy(answer=1), EditPolicy(error=KeyError("fleet")), Odd()],
    ids=["string", "one", "raises", "no-method"],
)
def test_only_true_allows_an_edit_and_an_authoriser_without_the_check_denies_every_edit(
    authoriser: object,
) -> None:
    assert _edit(authoriser) == "principal 'alice' may not update profile 'fleet'"


def test_a_store_outage_during_an_edit_check_is_no_denial() -> None:
    outage = EditPolicy(error=StoreUnavailableError("principals", "ConnectionError: refused"))
    with pytest.raises(StoreUnavailableError):
        asyncio.run(require_profile_edit(outage, "create", "fleet", None))


def test_a_denied_anonymous_edit_names_no_principal_and_a_long_one_is_cut() -> None:
    assert str(ProfileEditDeniedError("fleet", "delete", None)) == (
        "an anonymous caller may not delete profile 'fleet'"
    )
    assert "x" * 59 + "…'" in str(ProfileEditDeniedError("fleet", "delete", "x" * 300))
