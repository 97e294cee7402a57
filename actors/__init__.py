"""provider-recovery's runtime: what an orchestrator imports.

```python
from actors import ConcreteProfile, RecoveryRuntime, load_config
```

`RecoveryRuntime` starts (or attaches to) the route hosts, Redis and the rq workers;
`runtime.route(id)` is the `RouteHandle` an orchestrator reports through; every call answers
with the route's authoritative `RouteSnapshot`. A due retry comes back through the
orchestrator's `Dispatcher`, which raises `NotDispatched` when it sent nothing. Every error
the runtime raises on purpose is a `RecoveryError`.

Two names are type aliases of string literals: `RouteState` (a snapshot's `state`: none,
active, retry_wait, waiting_for_reset, retrying, switching, action_required, closed) and
`NextStep` (a snapshot's `next_step`: run, wait, manual, done). A route's `caller` is any
name of a route id's shape; a utility route (`utility=True`, or the caller "utility")
expires after a day. `RouteProfile` is what a route runs with: policy's
`DynamicProfile` (candidates with their policies) or a `ConcreteProfile` (one candidate on
the built-in interactive policy). `runtime.profiles` is the installation's profile store
(`StoredProfile`s, versioned; a route started with `profile_id=` follows one).
`__version__` is the installed distribution's version.

The names load lazily: importing `actors` (or one of its layers, e.g. in an rq worker) does
not import Ray until something Ray-bound is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    __version__: str
    from actors.engine.config import ConfigError, RuntimeConfig, load_config
    from actors.errors import (
        CorruptProfileError,
        InvalidCommandError,
        InvalidIdentifierError,
        InvalidRouteIdError,
        InvalidStateError,
        NoEligibleCandidateError,
        RecoveryError,
        StaleGenerationError,
        StaleOrdinalError,
        StoreUnavailableError,
        TransitionRejectedError,
    )
    from actors.hosting.handle import RouteHandle
    from actors.hosting.installation import InstallationMismatchError
    from actors.hosting.runtime import RecoveryRuntime
    from actors.jobs.dispatcher import Dispatcher, NotDispatched, ReplayIdentity
    from actors.keys import KeySpace
    from actors.routes.models import (
        AttemptRecord,
        RouteEvent,
        RouteSnapshot,
        RouteState,
        ScheduleEntry,
    )
    from actors.routes.next_steps import NextStep
    from actors.routes.profile_errors import (
        InvalidStoredProfileError,
        ProfileConfigurationError,
        ProfileEditDeniedError,
        ProfileExistsError,
        ProfileNotFoundError,
        StaleProfileVersionError,
    )
    from actors.routes.profiles import ConcreteProfile, RouteCandidate, RouteProfile
    from actors.store.installation import CorruptInstallationError, NoInstallationError
    from actors.store.profile_codec import ProfilePage, StoredProfile

_EXPORTS: Final[dict[str, str]] = {
    "RecoveryRuntime": "actors.hosting.runtime",
    "RouteHandle": "actors.hosting.handle",
    "load_config": "actors.engine.config",
    "RuntimeConfig": "actors.engine.config",
    "ConfigError": "actors.engine.config",
    "ConcreteProfile": "actors.routes.profiles",
    "RouteCandidate": "actors.routes.profiles",
    "RouteProfile": "actors.routes.profiles",
    "StoredProfile": "actors.store.profile_codec",
    "ProfilePage": "actors.store.profile_codec",
    "RouteSnapshot": "actors.routes.models",
    "AttemptRecord": "actors.routes.models",
    "RouteEvent": "actors.routes.models",
    "ScheduleEntry": "actors.routes.models",
    "RouteState": "actors.routes.models",
    "NextStep": "actors.routes.next_steps",
    "Dispatcher": "actors.jobs.dispatcher",
    "ReplayIdentity": "actors.jobs.dispatcher",
    "NotDispatched": "actors.jobs.dispatcher",
    "KeySpace": "actors.keys",
    "RecoveryError": "actors.errors",
    "TransitionRejectedError": "actors.errors",
    "StaleGenerationError": "actors.errors",
    "InvalidStateError": "actors.errors",
    "StaleOrdinalError": "actors.errors",
    "NoEligibleCandidateError": "actors.errors",
    "StoreUnavailableError": "actors.errors",
    "CorruptProfileError": "actors.errors",
    "InvalidIdentifierError": "actors.errors",
    "InvalidRouteIdError": "actors.errors",
    "InvalidCommandError": "actors.errors",
    "ProfileConfigurationError": "actors.routes.profile_errors",
    "ProfileNotFoundError": "actors.routes.profile_errors",
    "InvalidStoredProfileError": "actors.routes.profile_errors",
    "ProfileExistsError": "actors.routes.profile_errors",
    "StaleProfileVersionError": "actors.routes.profile_errors",
    "ProfileEditDeniedError": "actors.routes.profile_errors",
    "InstallationMismatchError": "actors.hosting.installation",
    "NoInstallationError": "actors.store.installation",
    "CorruptInstallationError": "actors.store.installation",
}


__all__ = [  # noqa: RUF022 - grouped by what an orchestrator reaches for first
    "RecoveryRuntime",
    "RouteHandle",
    "load_config",
    "RuntimeConfig",
    "ConfigError",
    "ConcreteProfile",
    "RouteCandidate",
    "RouteProfile",
    "StoredProfile",
    "ProfilePage",
    "RouteSnapshot",
    "AttemptRecord",
    "RouteEvent",
    "ScheduleEntry",
    "RouteState",
    "NextStep",
    "Dispatcher",
    "ReplayIdentity",
    "NotDispatched",
    "KeySpace",
    "RecoveryError",
    "TransitionRejectedError",
    "StaleGenerationError",
    "InvalidStateError",
    "StaleOrdinalError",
    "NoEligibleCandidateError",
    "StoreUnavailableError",
    "CorruptProfileError",
    "InvalidIdentifierError",
    "InvalidRouteIdError",
    "InvalidCommandError",
    "ProfileConfigurationError",
    "ProfileNotFoundError",
    "InvalidStoredProfileError",
    "ProfileExistsError",
    "StaleProfileVersionError",
    "ProfileEditDeniedError",
    "InstallationMismatchError",
    "NoInstallationError",
    "CorruptInstallationError",
    "__version__",
]


def _version() -> str:
    """The installed distribution's version: read on first use (reading the installed
    metadata costs tens of milliseconds, which every process importing actors would pay)."""
    from importlib import metadata  # noqa: PLC0415 - its import alone costs ~45 ms

    try:
        return metadata.version("provider-recovery")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "0+unknown"


def __getattr__(name: str) -> Any:
    """Load an exported name from its layer on first use (PEP 562)."""
    if name == "__version__":
        found = globals()[name] = _version()
        return found
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'actors' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
