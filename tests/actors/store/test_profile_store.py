"""The profile store on fakeredis[lua] (unit tier) and the session's real Redis
(integration tier): create, update, read, list and delete, every error of a document at
once, legacy rules normalised once on write, the version fence (and its race on real
Redis), and stored documents that cannot be decided from."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest

from actors.routes.profile_board import ProfileRevision
from actors.routes.profile_errors import (
    InvalidStoredProfileError,
    ProfileExistsError,
    ProfileNotFoundError,
    StaleProfileVersionError,
)
from actors.store.profile_codec import parsed_document
from actors.store.profile_store import ProfileStore, normalised
from policy import PolicyError
from tests.actors.conftest import Backend
from tests.actors.route_builders import T0

FLEET = "fleet"


def section(**retry: Any) -> dict[str, Any]:
    return {
        "retry": {"enabled": True, "max_retries": 3, "initial_interval_seconds": 5, **retry},
        "wait_for_reset": {"enabled": False},
        "on_exhausted": "skip",
    }


def document(*ids: str) -> dict[str, Any]:
    return {
        "name": "fleet",
        "candidates": [
            {"id": i, "agent": f"{i}-acp", "provider": i, "transient": section(), "hard": section()}
            for i in ids or ("claude", "codex")
        ],
    }


@asynccontextmanager
async def profile_store(backend: Backend) -> AsyncIterator[ProfileStore]:
    if backend.url is not None:
        store = ProfileStore.connect(backend.url, clock=backend.clock, keys=backend.keys)
    else:
        store = ProfileStore(
            backend.raw(), clock=backend.clock, keys=backend.keys, owns_client=True
        )
    async with store:
        yield store


def run(backend: Backend, scenario: Callable[[ProfileStore], Awaitable[None]]) -> None:
    async def main() -> None:
        async with profile_store(backend) as store:
            await scenario(store)

    asyncio.run(main())


def test_a_created_profile_is_version_1_normalised_and_readable_with_redis_cli(
    backend: Backend,
) -> None:
    async def scenario(store: ProfileStore) -> None:
        created = await store.create(FLEET, document())
        assert (created.profile_id, created.version) == (FLEET, 1)
        assert created.created_at == created.updated_at == T0
        assert await store.get(FLEET) == created
        raw = await backend.raw().hgetall(backend.keys.profile(FLEET))
        assert raw == {
            "id": FLEET, "version": "1", "created_at": "2026-03-01T12:00:00Z",
            "updated_at": "2026-03-01T12:00:00Z",
            "document": json.dumps(created.document.model_dump(mode="json"), separators=(",", ":")),
        }  # fmt: skip
        disabled = created.document.candidates[0].transient.wait_for_reset
        assert (disabled.enabled, disabled.max_wait_seconds) == (False, 0)  # zeroed
        assert await backend.raw().zrange(backend.keys.profiles, 0, -1, withscores=True) == [
            (FLEET, 0.0)
        ]

    run(backend, scenario)


def test_legacy_rules_are_normalised_once_on_write(backend: Backend) -> None:
    legacy = {"candidates": [
        {"id": "claude", "agent": "claude-acp", "rules": {"on_provider_error": "try_next",
                                                          "quota_limited": "stop"}},
    ]}  # fmt: skip

    async def scenario(store: ProfileStore) -> None:
        created = await store.create(FLEET, legacy)
        text = await backend.raw().hget(backend.keys.profile(FLEET), "document")
        assert isinstance(text, str)
        stored = json.loads(text)
        assert "rules" not in stored["candidates"][0]
        claude = created.document.candidates[0]
        assert (claude.transient.on_exhausted, claude.hard.on_exhausted) == ("skip", "stop")
        again = await store.update(FLEET, created.document, expected_version=1)
        assert again.document == created.document  # normalising twice changes nothing

    run(backend, scenario)


def test_every_error_of_a_document_is_reported_at_once_by_field_and_nothing_written(
    backend: Backend,
) -> None:
    bad = document("claude", "codex", "gemini")
    bad["candidates"][0]["agent"] = ""
    bad["candidates"][1]["colour"] = "red"
    bad["candidates"][2]["hard"]["retry"]["max_retries"] = 11

    async def scenario(store: ProfileStore) -> None:
        with pytest.raises(PolicyError) as refused:
            await store.create(FLEET, bad)
        assert [(e.field, e.message) for e in refused.value.errors] == [
            ("candidates[0].agent", "must be a non-empty string, got ''"),
            ("candidates[1].colour", "unknown key 'colour'"),
            ("candidates[2].hard.retry.max_retries", "must be between 1 and 10, got 11"),
        ]
        assert await backend.raw().exists(backend.keys.profile(FLEET)) == 0
        with pytest.raises(ProfileNotFoundError):
            await store.get(FLEET)

    run(backend, scenario)


def test_each_update_bumps_the_version_and_a_stale_one_changes_nothing(backend: Backend) -> None:
    async def scenario(store: ProfileStore) -> None:
        await store.create(FLEET, document())
        backend.clock.advance(timedelta(seconds=30))
        second = await store.update(FLEET, document("codex"), expected_version=1)
        assert (second.version, second.created_at, second.updated_at) == (
            2, T0, T0 + timedelta(seconds=30),
        )  # fmt: skip
        with pytest.raises(StaleProfileVersionError) as stale:
            await store.update(FLEET, document("gemini"), expected_version=1)
        assert (stale.value.expected, stale.value.actual) == (1, 2)
        assert await store.get(FLEET) == second
        with pytest.raises(ProfileExistsError, match="version 2"):
            await store.create(FLEET, document())
        with pytest.raises(ProfileNotFoundError):
            await store.update("absent", document(), expected_version=1)

    run(backend, scenario)


def test_a_deleted_profile_is_gone_and_its_versions_never_repeat(backend: Backend) -> None:
    async def scenario(store: ProfileStore) -> None:
        await store.create(FLEET, document())
        await store.update(FLEET, document("codex"), expected_version=1)
        with pytest.raises(StaleProfileVersionError):
            await store.delete(FLEET, expected_version=1)
        await store.delete(FLEET, expected_version=2)
        with pytest.raises(ProfileNotFoundError, match="was deleted"):
            await store.get(FLEET)
        assert (await store.list()).profiles == ()
        with pytest.raises(ProfileNotFoundError):
            await store.delete(FLEET)
        (read,) = (await store.revisions([FLEET])).values()
        assert isinstance(read, ProfileNotFoundError)
        recreated = await store.create(FLEET, document())
        assert recreated.version == 3

    run(backend, scenario)


def test_the_list_pages_in_id_order_and_lists_unreadable_profiles_apart(backend: Backend) -> None:
    async def scenario(store: ProfileStore) -> None:
        for profile_id in ("c", "a", "d", "b"):
            await store.create(profile_id, document())
        await backend.raw().hset(backend.keys.profile("c"), "document", "{not json")
        first = await store.list(limit=2)
        assert [p.profile_id for p in first.profiles] == ["a", "b"]
        assert first.next_cursor == "b"
        second = await store.list(limit=2, after=first.next_cursor)
        assert [p.profile_id for p in second.profiles] == ["d"]
        assert [(u.profile_id, u.version) for u in second.unreadable] == [("c", 1)]
        assert "not JSON" in second.unreadable[0].reason
        assert second.next_cursor == "d"
        assert await store.list(limit=2, after="d") == type(first)()

    run(backend, scenario)


@pytest.mark.parametrize(
    ("field", "text", "problem"),
    [
        ("document", "{not json", "its document is not JSON"),
        ("document", '{"candidates": [{"id": "a", "agent": "x", "rules": "stop"}]}',
         "it holds legacy rules at candidates[0].rules, which only a write normalises"),
        ("document", '{"candidates": [{"id": "a", "agent": "x"}]}',
         "candidates.0.transient: Field required"),
        ("document", '{"candidates": "claude"}',
         "candidates: must be a non-empty list of candidates"),
        ("version", "two", "its version 'two' is no whole number >= 1"),
    ],
    ids=["not-json", "legacy", "not-normalised", "invalid", "bad-version"],
)  # fmt: skip
def test_a_stored_profile_that_cannot_be_decided_from_reads_as_a_configuration_error(
    backend: Backend, field: str, text: str, problem: str
) -> None:
    async def scenario(store: ProfileStore) -> None:
        await store.create(FLEET, document())
        await backend.raw().hset(backend.keys.profile(FLEET), field, text)
        with pytest.raises(InvalidStoredProfileError) as unreadable:
            await store.get(FLEET)
        assert problem in unreadable.value.problem
        assert "write it again with the profile store's update" in str(unreadable.value)
        (read,) = (await store.revisions([FLEET])).values()
        assert isinstance(read, InvalidStoredProfileError)
        if field == "document":  # an update replaces it, fenced as any
            repaired = await store.update(FLEET, document(), expected_version=1)
            assert repaired.version == 2

    run(backend, scenario)


def test_revisions_read_several_profiles_and_skip_ids_that_name_none(backend: Backend) -> None:
    async def scenario(store: ProfileStore) -> None:
        await store.create("a", document("claude"))
        await store.create("b", document("codex"))
        read = await store.revisions(["a", "b", "a", "no such", "c"])
        assert sorted(read) == ["a", "b", "c"]
        a, b = read["a"], read["b"]
        assert isinstance(a, ProfileRevision)
        assert isinstance(b, ProfileRevision)
        assert (a.version, a.profile.candidates[0].id, b.profile.candidates[0].id) == (
            1, "claude", "codex",
        )  # fmt: skip
        assert isinstance(read["c"], ProfileNotFoundError)

    run(backend, scenario)


def test_normalising_names_the_whole_input_when_it_is_no_object() -> None:
    with pytest.raises(PolicyError) as refused:
        normalised(["not", "a", "profile"])  # type: ignore[arg-type]  # what is refused
    assert [str(e) for e in refused.value.errors] == ["must be an object, got a list"]


def test_one_stored_text_is_parsed_once() -> None:
    text = json.dumps(normalised(document()).model_dump(mode="json"))
    assert parsed_document(text) is parsed_document(text)


@pytest.mark.integration
def test_two_concurrent_updates_with_the_same_expected_version_exactly_one_wins(
    real_backend: Backend,
) -> None:
    async def main() -> None:
        async with profile_store(real_backend) as first, profile_store(real_backend) as second:
            await first.create(FLEET, document())
            for round_ in range(1, 21):  # many rounds: the race is real, not staged
                outcomes = await asyncio.gather(
                    first.update(FLEET, document("claude"), expected_version=round_),
                    second.update(FLEET, document("codex"), expected_version=round_),
                    return_exceptions=True,
                )
                won = [o for o in outcomes if not isinstance(o, BaseException)]
                lost = [o for o in outcomes if isinstance(o, StaleProfileVersionError)]
                assert (len(won), len(lost)) == (1, 1), outcomes
                assert (won[0].version, lost[0].actual) == (round_ + 1, round_ + 1)
                assert await first.get(FLEET) == won[0]

    asyncio.run(main())
