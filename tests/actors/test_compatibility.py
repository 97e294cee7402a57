"""What an orchestrator wrote against 0.1.0 keeps working: the public surface, the
signatures it calls, the snapshot's fields, the settings, the old module paths, and rq jobs
queued in Redis under the old paths."""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

import actors
from actors.engine.config import ENVIRONMENT, load_config
from actors.hosting.handle import RouteHandle
from actors.hosting.runtime import RecoveryRuntime
from actors.jobs.dispatcher import ReplayIdentity
from actors.keys import AttemptFence
from actors.routes.models import RouteSnapshot
from tests.actors.conftest import Backend
from tests.actors.dispatch_rig import DELIVER, R, Rig, retrying

POSITIONAL = inspect.Parameter.POSITIONAL_OR_KEYWORD
KEYWORD = inspect.Parameter.KEYWORD_ONLY
NO_DEFAULT = inspect.Parameter.empty

# (name, kind, default) of every parameter as 0.1.0 had it, `self` left out.
Signature = list[tuple[str, inspect._ParameterKind, object]]
SIGNATURES: dict[str, tuple[Callable[..., Any], Signature]] = {
    "load_config": (
        load_config,
        [("path", POSITIONAL, NO_DEFAULT), ("environ", POSITIONAL, NO_DEFAULT),
         ("flags", KEYWORD, None)],
    ),
    "RecoveryRuntime.from_config": (
        RecoveryRuntime.from_config, [("config", POSITIONAL, NO_DEFAULT)]
    ),
    "RecoveryRuntime.start": (RecoveryRuntime.start, []),
    "RecoveryRuntime.route": (RecoveryRuntime.route, [("route_id", POSITIONAL, NO_DEFAULT)]),
    "RecoveryRuntime.shutdown": (RecoveryRuntime.shutdown, []),
    "RouteHandle.start": (
        RouteHandle.start,
        [("profile", POSITIONAL, NO_DEFAULT), ("caller", KEYWORD, NO_DEFAULT),
         ("invocation_id", KEYWORD, NO_DEFAULT), ("provider_session_id", KEYWORD, None)],
    ),
    "RouteHandle.report_failure": (
        RouteHandle.report_failure,
        [("expected_generation", POSITIONAL, NO_DEFAULT), ("evidence", POSITIONAL, NO_DEFAULT),
         ("turn", POSITIONAL, NO_DEFAULT), ("caller", KEYWORD, NO_DEFAULT),
         ("invocation_id", KEYWORD, NO_DEFAULT), ("provider_session_id", KEYWORD, None)],
    ),
    **{
        f"RouteHandle.{name}": (
            getattr(RouteHandle, name), [("expected_generation", POSITIONAL, NO_DEFAULT)]
        )
        for name in (
            "report_success", "retry_now", "skip_now", "cancel_wait", "stop", "resume", "close"
        )
    },
    "RouteHandle.start_fresh": (
        RouteHandle.start_fresh,
        [("expected_generation", POSITIONAL, NO_DEFAULT), ("profile", POSITIONAL, None)],
    ),
    "RouteHandle.snapshot": (RouteHandle.snapshot, []),
    "RouteHandle.history": (RouteHandle.history, []),
}  # fmt: skip


def parameters(function: Callable[..., Any]) -> list[inspect.Parameter]:
    return [p for p in inspect.signature(function).parameters.values() if p.name != "self"]


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_a_call_written_against_the_first_release_still_binds(name: str) -> None:
    function, expected = SIGNATURES[name]
    found = parameters(function)
    assert [(p.name, p.kind) for p in found[: len(expected)]] == [(n, k) for n, k, _ in expected]
    for parameter, (_, _, default) in zip(found, expected, strict=False):
        # a default kept, or one given to a parameter that had none: every old call binds
        assert default in (parameter.default, NO_DEFAULT), parameter
    for added in found[len(expected) :]:  # new parameters never break an old call
        assert (added.kind, added.default is not NO_DEFAULT) == (KEYWORD, True), added


def test_the_runtime_still_exposes_its_url_and_key_prefix() -> None:
    assert isinstance(inspect.getattr_static(RecoveryRuntime, "url"), property)
    assert "key_prefix" in RecoveryRuntime.__dataclass_fields__


SNAPSHOT_FIELDS = {
    "attempt_ordinal", "caller", "candidate_id", "candidate_index", "catalogue_version",
    "circuit", "code", "cycle", "deadline", "error_class", "generation", "invocation_id",
    "pending_outcome", "policy_snapshot", "probe_token", "profile", "provider_session_id",
    "reason", "retry_max", "retry_ordinal", "route_id", "rule", "state", "updated_at",
}  # fmt: skip


def test_the_snapshot_keeps_every_field() -> None:
    assert set(RouteSnapshot.model_fields) >= SNAPSHOT_FIELDS


def test_the_replay_identity_keeps_every_field() -> None:
    identity = ReplayIdentity("r", 2, 3, "c", provider_session_id="p", prompt_ref="i")
    assert (identity.route_id, identity.generation, identity.ordinal) == ("r", 2, 3)
    assert (identity.candidate_id, identity.provider_session_id, identity.prompt_ref) == (
        "c", "p", "i"
    )  # fmt: skip


SETTINGS = {
    "RAY_ADDRESS", "REDIS_URL", "RECOVERY_CIRCUIT_INITIAL_BACKOFF_S",
    "RECOVERY_CIRCUIT_MAX_BACKOFF_S", "RECOVERY_CIRCUIT_MIN_DISTINCT_ROUTES",
    "RECOVERY_CIRCUIT_PROBE_TTL_S", "RECOVERY_CIRCUIT_TRANSIENT_THRESHOLD",
    "RECOVERY_CIRCUIT_TRANSIENT_WINDOW_S", "RECOVERY_CLOSED_TTL_S", "RECOVERY_DATA_DIR",
    "RECOVERY_DISPATCHER", "RECOVERY_EVENTS_MAXLEN", "RECOVERY_HOSTS",
    "RECOVERY_INSTALLATION_KEY", "RECOVERY_KEY_PREFIX", "RECOVERY_QUEUE", "RECOVERY_RAY_CPUS",
    "RECOVERY_RAY_DASHBOARD", "RECOVERY_UTILITY_TTL_S", "RECOVERY_WORKERS",
    "RECOVERY_WORKER_PATHS",
}  # fmt: skip


def test_every_setting_of_the_first_release_is_still_read() -> None:
    assert set(ENVIRONMENT) >= SETTINGS
    config = load_config(None, {"RECOVERY_HOSTS": "3", "RECOVERY_KEY_PREFIX": "compat"})
    assert (config.hosts, config.key_prefix) == (3, "compat")


# Old path -> (new module, names an orchestrator or a queued job reaches through it).
OLD_PATHS = {
    "actors.runtime": ("actors.hosting.runtime", ["RecoveryRuntime", "NAMESPACE", "host_name"]),
    "actors.config": ("actors.engine.config", ["load_config", "RuntimeConfig", "ConfigError"]),
    "actors.route_profiles": ("actors.routes.profiles", ["ConcreteProfile", "RouteCandidate"]),
    "actors.dispatch": ("actors.jobs.dispatch", ["run_dispatch", "dispatch_once"]),
    "actors.backstop": ("actors.jobs.backstop", ["run_backstop", "fire_backstop"]),
}
OLD_DISPATCH_NAMES = [
    "NotDispatched", "ReplayIdentity", "Dispatcher", "DispatchLedger", "LedgerEntry",
    "enqueue_dispatch", "dispatch_queue", "dispatch_job_id", "default_queue_name", "reconcile",
    "ReconcileReport", "load_dispatcher", "JOB_FUNCTION", "DEFAULT_QUEUE",
]  # fmt: skip


@pytest.mark.parametrize("old", sorted(OLD_PATHS))
def test_an_old_module_path_reaches_the_same_objects(old: str) -> None:
    new, names = OLD_PATHS[old]
    old_module, new_module = importlib.import_module(old), importlib.import_module(new)
    for name in names:
        assert getattr(old_module, name) is getattr(new_module, name), name


def test_the_old_dispatch_path_still_has_everything_it_exported() -> None:
    old = importlib.import_module("actors.dispatch")
    missing = [name for name in OLD_DISPATCH_NAMES if not hasattr(old, name)]
    assert missing == []
    assert old.JOB_FUNCTION == "actors.jobs.dispatch.run_dispatch"
    assert importlib.import_module("actors.backstop").JOB_FUNCTION == (
        "actors.jobs.backstop.run_backstop"
    )


def test_every_public_name_is_exported_and_documented() -> None:
    """Classes and functions by their docstrings; a type alias (no docstring of its own)
    by the package docstring's line about it."""
    undocumented = []
    for name in actors.__all__:
        value = getattr(actors, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            documented = bool((inspect.getdoc(value) or "").strip())
        else:
            documented = f"`{name}`" in (actors.__doc__ or "")
        if not documented:
            undocumented.append(name)
    assert undocumented == []
    assert set(actors.__all__) <= set(dir(actors))


def test_an_unknown_name_on_the_package_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        actors.no_such_thing  # noqa: B018 - the attribute access is the test


def test_importing_the_package_loads_no_ray() -> None:
    probe = (
        "import json, sys\n"
        "import actors\n"
        "from actors import ReplayIdentity, NotDispatched, RecoveryError, RouteSnapshot\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'ray')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(result.stdout) == []


@pytest.mark.integration
def test_a_dispatch_job_queued_under_the_old_path_still_dispatches(
    real_backend: Backend, rig: Rig
) -> None:
    """rq keeps a job's function path in Redis: one queued before the move still runs,
    calling the dispatcher with the six arguments of the first release."""
    retrying(real_backend)
    rig.queue.enqueue(
        "actors.dispatch.run_dispatch", rig.keys.prefix, R, 1, 1, DELIVER, None, job_id="old-path"
    )
    rig.work()
    [call] = rig.calls()
    assert (call["route_id"], call["generation"], call["ordinal"], call["candidate"]) == (
        R, 1, 1, "claude"
    )  # fmt: skip
    assert set(call["replay"]) >= {
        "route_id", "generation", "ordinal", "candidate_id", "provider_session_id", "prompt_ref"
    }  # fmt: skip
    assert rig.ledger().read(AttemptFence(R, 1, 1)).fields["outcome"] == "delivered"
