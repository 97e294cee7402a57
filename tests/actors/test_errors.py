"""Every exception class the shell defines is a RecoveryError (the core's root, re-exported
by actors.errors) and keeps its identifiers and message through pickling, as it does
through a Ray actor call."""

from __future__ import annotations

import pickle

import pytest

from actors.api.auth import TokenError
from actors.cli.common import CliError
from actors.cli.jsonlines import LineRefusedError
from actors.cli.operator import OperatorExitError
from actors.demo.errors import DemoError
from actors.engine.config import ConfigError
from actors.errors import (
    CircuitConflictError,
    CircuitStoreUnavailableError,
    CorruptCircuitError,
    CorruptProfileError,
    CorruptRouteError,
    InvalidCircuitInputError,
    InvalidCommandError,
    InvalidIdentifierError,
    InvalidRouteIdError,
    InvalidStateError,
    MessageNotFoundError,
    NoEligibleCandidateError,
    NotAuthorisedError,
    PluginLoadError,
    RecoveryError,
    StaleFieldError,
    StaleGenerationError,
    StaleOrdinalError,
    StoreUnavailableError,
    TransitionRejectedError,
    error_report,
)
from actors.hosting.circuit_handle import NoCircuitHostsError
from actors.hosting.installation import InstallationMismatchError
from actors.jobs.dispatcher import AmbiguousDispatch, DispatchTimedOut, NotDispatched
from actors.routes.profile_errors import (
    InvalidStoredProfileError,
    ProfileConfigurationError,
    ProfileEditDeniedError,
    ProfileExistsError,
    ProfileNotFoundError,
    ProfileNotReadError,
    StaleProfileVersionError,
)
from actors.store.embedded import EmbeddedRedisError
from actors.store.installation import CorruptInstallationError, NoInstallationError
from actors.store.scripts import ScriptError
from catalogue.errors import RecoveryError as CoreRoot
from tests.error_tree import exception_classes

SHELL_EXCEPTIONS = exception_classes("actors")

# Exception classes that are deliberately not errors, with the reason.
NOT_ERRORS = {
    "actors.store.route_codec._UnreadableError": (
        "the codec's internal signal naming the field that does not decode: never leaves "
        "route_codec, which raises CorruptRouteError or StoreUnavailableError in its place"
    ),
    "actors.api.problems.ApiProblem": (
        "an HTTP error answer raised to leave an endpoint and turned into its response by "
        "the app's own handler: it never leaves the API app"
    ),
    "actors.api.guard.BodyTooLargeError": (
        "the guard's internal signal that a streamed body passed its bound, answered 413 by "
        "the guard itself: it never leaves actors/api/guard.py"
    ),
    "actors.cli.up._StopRequestedError": (
        "a stop signal raised into the main thread by the signal handler and caught by "
        "serve(): a control-flow signal like KeyboardInterrupt, which no handler of "
        "RecoveryError should swallow"
    ),
}

# One instance of every error the shell defines, built as the shell raises it.
SAMPLES: list[RecoveryError] = [
    InvalidIdentifierError("host id", "h:1", "[A-Za-z0-9._-]{1,64}"),
    InvalidRouteIdError("a b", "[A-Za-z0-9._-]{1,128}"),
    TransitionRejectedError("route 'route-1': rejected"),
    StaleGenerationError("route-1", 1, 2, "switching"),
    InvalidStateError("route-1", "active", ["retry_wait", "waiting_for_reset"], 3),
    StaleOrdinalError("route-1", 2, 3, 4, "retry_wait"),
    NoEligibleCandidateError("route-1", "start fresh"),
    StoreUnavailableError("apply", "ConnectionError: refused"),
    InvalidCircuitInputError("lease_ttl", -1, "a positive number of seconds"),
    CircuitConflictError("anthropic:claude", "record failure", 8),
    CorruptCircuitError("anthropic:claude", "status 'ajar' is not a circuit status"),
    CorruptProfileError("route-1", "expected a JSON object, got an array"),
    CorruptRouteError(
        "route-1",
        "recovery:route:route-1",
        "profile",
        "not JSON: Expecting value",
        stored="{not json",
    ),
    StaleFieldError("route-1", "profile", 2, "retry_wait"),
    CircuitStoreUnavailableError("circuit_apply", "TimeoutError: timed out"),
    ConfigError("recovery.toml", "hosts", 0, "must be an integer >= 1, got 0"),
    CliError("no Redis URL: pass --redis-url URL or set REDIS_URL"),
    DemoError("the fleet needs at least one route"),
    NotDispatched("the orchestrator is draining"),
    NotDispatched("agent pool full", retry_after=3),
    AmbiguousDispatch("webhook answered 500: outcome ambiguous"),
    TokenError("RECOVERY_API_TOKEN", "must be at least 16 characters"),
    DispatchTimedOut(60.0),
    ScriptError("transition: names a key literally; pass every key in KEYS"),
    CorruptInstallationError("recovery:installation", "host_names: Field required"),
    NoInstallationError("no installation is recorded under prefix 'recovery'"),
    InvalidCommandError("expected_generation", True, "an integer >= 0"),
    LineRefusedError({"line": 3, "error": "nested deeper than 64 levels", "field": None}),
    InstallationMismatchError("recovery", "hosts", 3, 2),
    EmbeddedRedisError("/var/lib/recovery", "locked by process 4242"),
    MessageNotFoundError("0123456789abcdef0123456789abcdef"),
    NotAuthorisedError("task-1", "route-1"),
    PluginLoadError("RECOVERY_TRANSCRIPT", "acme.tasks:nope", "module has no attribute 'nope'"),
    OperatorExitError(3, "stale generation: expected 1, but the route is at generation 2"),
    NoCircuitHostsError("recovery"),
    ProfileConfigurationError("fleet", "profile 'fleet' cannot be decided from"),
    ProfileNotFoundError("fleet"),
    InvalidStoredProfileError("fleet", 3, "its document is not JSON"),
    ProfileNotReadError("fleet"),
    ProfileExistsError("fleet", 2),
    StaleProfileVersionError("fleet", 2, 3),
    ProfileEditDeniedError("fleet", "update", "alice"),
]


def test_the_shell_re_exports_the_core_root_rather_than_defining_its_own() -> None:
    assert RecoveryError is CoreRoot
    assert "actors.errors.RecoveryError" not in SHELL_EXCEPTIONS


@pytest.mark.parametrize("name", sorted(set(SHELL_EXCEPTIONS) - set(NOT_ERRORS)))
def test_every_exception_class_the_shell_defines_is_a_recovery_error(name: str) -> None:
    assert issubclass(SHELL_EXCEPTIONS[name], RecoveryError), name


@pytest.mark.parametrize("name", sorted(NOT_ERRORS))
def test_an_exception_class_that_is_no_error_still_exists(name: str) -> None:
    assert name in SHELL_EXCEPTIONS, f"{name} is gone: drop it from NOT_ERRORS"


def test_every_error_the_shell_defines_has_a_pickling_sample() -> None:
    sampled = {f"{type(e).__module__}.{type(e).__qualname__}" for e in SAMPLES}
    assert set(SHELL_EXCEPTIONS) - set(NOT_ERRORS) == sampled


@pytest.mark.parametrize("error", SAMPLES, ids=lambda error: type(error).__name__)
def test_a_shell_error_keeps_its_identifiers_and_message_through_pickling(
    error: RecoveryError,
) -> None:
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error)
    assert vars(again) == vars(error)
    assert again.args == error.args
    assert str(again) == str(error)


def test_a_script_error_is_still_a_value_error() -> None:
    assert issubclass(ScriptError, ValueError)


def test_a_not_authorised_error_names_only_what_the_caller_gave() -> None:
    error = NotAuthorisedError("task-1", "x" * 200)
    assert str(error).startswith("task 'task-1', session 'xxx")
    assert str(error).endswith("…: not found or not authorised")


def test_an_error_report_keeps_the_traceback_and_no_secret() -> None:
    secret = "sk-ant-api03-" + "Q7vX2mN9pL4kR8sT1wY6zB3cD5fG0hJ"

    def dispatch() -> None:
        raise RuntimeError(f"upstream refused Authorization: Bearer {secret}")

    try:
        dispatch()
    except RuntimeError as error:
        report = error_report(error)
    assert "Traceback (most recent call last)" in report
    assert "in dispatch" in report
    assert secret[14:30] not in report
    assert len(report.encode()) <= 4096
