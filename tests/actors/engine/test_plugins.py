"""RECOVERY_TRANSCRIPT and RECOVERY_AUTHORISER: `module:factory` loaded, or the defaults;
a spec that does not load is named in the error."""

from __future__ import annotations

import asyncio
import logging

import pytest
from fakeredis.aioredis import FakeRedis

from actors.clock import ManualClock
from actors.engine.authorisers import RecordedTaskAuthoriser, require_profile_edit
from actors.engine.plugins import load_authoriser, load_transcript
from actors.errors import PluginLoadError
from actors.keys import KeySpace
from actors.routes.profile_errors import ProfileEditDeniedError
from actors.store.redis_transcript import RedisTranscript
from tests.actors.engine.plugin_samples import AllowAll, EditorsOnly
from tests.actors.engine.transcript_fakes import MemoryTranscript
from tests.actors.route_builders import T0

SAMPLES = "tests.actors.engine.plugin_samples"


async def no_task(session_id: str) -> str | None:
    return None


def test_without_a_spec_the_transcript_is_redis_on_the_given_client() -> None:
    client = FakeRedis()
    port = load_transcript(None, client=client, clock=ManualClock(T0), keys=KeySpace("x"),
                           maxlen=77)  # fmt: skip
    assert isinstance(port, RedisTranscript)
    assert (port.maxlen, port.keys.prefix) == (77, "x")


def test_a_transcript_spec_loads_the_orchestrators_port() -> None:
    port = load_transcript(f"{SAMPLES}:memory_transcript", client=FakeRedis(),
                           clock=ManualClock(T0), keys=KeySpace())  # fmt: skip
    assert isinstance(port, MemoryTranscript)


def test_without_a_spec_the_authoriser_checks_the_recorded_task() -> None:
    assert isinstance(load_authoriser(None, recorded_task=no_task), RecordedTaskAuthoriser)


@pytest.mark.parametrize("attribute", ["allow_all", "Factories.allow_all"])
def test_an_authoriser_spec_loads_the_orchestrators_authoriser(attribute: str) -> None:
    authoriser = load_authoriser(f"{SAMPLES}:{attribute}", recorded_task=no_task)
    assert isinstance(authoriser, AllowAll)
    assert asyncio.run(authoriser.authorise("t", "s", None)) is True


@pytest.mark.parametrize(
    ("spec", "detail"),
    [
        ("plugin_samples", "must be 'module:factory'"),
        (":memory_transcript", "must be 'module:factory'"),
        (f"{SAMPLES}:", "must be 'module:factory'"),
        ("no_such_module_anywhere:factory", "does not import"),
        (f"{SAMPLES}:missing", "has no attribute 'missing'"),
        (f"{SAMPLES}:NOT_CALLABLE", "is not callable"),
        (f"{SAMPLES}:broken", "the factory raised the task service is not configured"),
        (f"{SAMPLES}:nothing", "without the async method(s) list_session_messages"),
        (f"{SAMPLES}:allow_all", "without the async method(s) list_session_messages"),
    ],
)
def test_a_transcript_spec_that_does_not_load_is_named(spec: str, detail: str) -> None:
    with pytest.raises(PluginLoadError) as caught:
        load_transcript(spec, client=FakeRedis(), clock=ManualClock(T0), keys=KeySpace())
    error = caught.value
    assert (error.setting, error.spec) == ("RECOVERY_TRANSCRIPT", spec)
    assert detail in error.detail
    assert str(error).startswith(f"RECOVERY_TRANSCRIPT={spec!r}: ")


@pytest.mark.parametrize("attribute", ["sync_authoriser", "memory_transcript", "nothing"])
def test_an_authoriser_without_an_async_authorise_is_refused(attribute: str) -> None:
    with pytest.raises(PluginLoadError) as caught:
        load_authoriser(f"{SAMPLES}:{attribute}", recorded_task=no_task)
    assert caught.value.setting == "RECOVERY_AUTHORISER"
    assert "without the async method(s) authorise of Authoriser" in caught.value.detail


def test_a_plugin_load_error_is_a_value_error() -> None:
    assert issubclass(PluginLoadError, ValueError)


def test_an_authoriser_with_a_profile_edit_check_loads_with_it() -> None:
    authoriser = load_authoriser(f"{SAMPLES}:editors_only", recorded_task=no_task)
    assert isinstance(authoriser, EditorsOnly)
    asyncio.run(require_profile_edit(authoriser, "create", "fleet", "alice"))
    with pytest.raises(ProfileEditDeniedError):
        asyncio.run(require_profile_edit(authoriser, "create", "fleet", "bob"))


def test_an_authoriser_without_a_profile_edit_check_loads_and_warns_that_edits_are_denied(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="actors.engine.plugins"):
        authoriser = load_authoriser(f"{SAMPLES}:allow_all", recorded_task=no_task)
    assert "has no authorise_profile_edit: every profile edit is denied" in caplog.text
    with pytest.raises(ProfileEditDeniedError):
        asyncio.run(require_profile_edit(authoriser, "create", "fleet", "alice"))


def test_an_authoriser_whose_profile_edit_check_is_not_async_is_refused() -> None:
    with pytest.raises(PluginLoadError) as caught:
        load_authoriser(f"{SAMPLES}:sync_edit_check", recorded_task=no_task)
    assert caught.value.detail == "its authorise_profile_edit is not async"
