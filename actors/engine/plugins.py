"""The orchestrator's plug-ins, named by `module:factory` settings, and their defaults.

- `RECOVERY_TRANSCRIPT`: a zero-argument factory returning a TranscriptPort (the
  orchestrator's task service); unset, the Redis transcript.
- `RECOVERY_AUTHORISER`: a zero-argument factory returning an Authoriser; unset, the
  recorded-task authoriser. Its `authorise_profile_edit`, when it has one, must be async
  too; without one, profile edits are denied (a warning says so at load).

A spec that does not load raises PluginLoadError naming the setting, the spec and why, at
start-up rather than at the first notice.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Callable
from typing import Any, Final, TypeVar

from redis.asyncio import Redis

from actors.clock import Clock
from actors.engine.authorisers import Authoriser, RecordedTask, RecordedTaskAuthoriser
from actors.errors import PluginLoadError, error_text
from actors.keys import KeySpace
from actors.store.redis_transcript import DEFAULT_TRANSCRIPT_MAXLEN, RedisTranscript
from actors.store.transcript import TranscriptPort

__all__ = ["AUTHORISER_SETTING", "TRANSCRIPT_SETTING", "load_authoriser", "load_factory",
           "load_transcript"]  # fmt: skip

TRANSCRIPT_SETTING: Final = "RECOVERY_TRANSCRIPT"
AUTHORISER_SETTING: Final = "RECOVERY_AUTHORISER"
_TRANSCRIPT_METHODS: Final = ("list_session_messages", "create_message", "update_message",
                              "delete_message")  # fmt: skip
_AUTHORISER_METHODS: Final = ("authorise",)
PROFILE_EDIT_METHOD: Final = "authorise_profile_edit"

P = TypeVar("P")

log = logging.getLogger(__name__)


def load_factory(setting: str, spec: str) -> Callable[[], Any]:
    """The callable at `module:attribute` (the attribute may be dotted); PluginLoadError
    naming `setting` and `spec` when it is of another shape, does not import or resolve,
    or is not callable."""
    module_name, _, attribute = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    if not module_name or not attribute:
        raise PluginLoadError(setting, str(spec), "must be 'module:factory'")
    try:
        found: Any = importlib.import_module(module_name)
    except Exception as error:  # an ImportError, or whatever the module raised on import
        raise PluginLoadError(
            setting, spec, f"module {module_name!r} does not import: {error_text(error)}"
        ) from error
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise PluginLoadError(setting, spec, f"{module_name!r} has no attribute {attribute!r}")
        found = getattr(found, part)
    if not callable(found):
        raise PluginLoadError(setting, spec, f"{attribute!r} is not callable")
    factory: Callable[[], Any] = found
    return factory


def _made(setting: str, spec: str, protocol: type[P], methods: tuple[str, ...]) -> P:
    try:
        made = load_factory(setting, spec)()
    except PluginLoadError:
        raise
    except Exception as error:  # the factory's own failure, named for the operator
        raise PluginLoadError(setting, spec, f"the factory raised {error_text(error)}") from error
    missing = [m for m in methods if not inspect.iscoroutinefunction(getattr(made, m, None))]
    if missing or not isinstance(made, protocol):
        raise PluginLoadError(setting, spec, f"made a {type(made).__name__} without the async "
                              f"method(s) {', '.join(missing)} of {protocol.__name__}")  # fmt: skip
    return made


def load_transcript(
    spec: str | None,
    *,
    client: Redis,
    clock: Clock,
    keys: KeySpace,
    maxlen: int = DEFAULT_TRANSCRIPT_MAXLEN,
) -> TranscriptPort:
    """The transcript port RECOVERY_TRANSCRIPT names; None: the Redis transcript on
    `client` (the caller keeps owning it) with a stream of about `maxlen` changes."""
    if spec is None:
        return RedisTranscript(client, clock=clock, keys=keys, maxlen=maxlen)
    return _made(TRANSCRIPT_SETTING, spec, TranscriptPort, _TRANSCRIPT_METHODS)  # type: ignore[type-abstract]  # a Protocol is what isinstance checks against


def load_authoriser(spec: str | None, *, recorded_task: RecordedTask) -> Authoriser:
    """The authoriser RECOVERY_AUTHORISER names; None: the recorded-task authoriser over
    `recorded_task`."""
    if spec is None:
        return RecordedTaskAuthoriser(recorded_task)
    made = _made(AUTHORISER_SETTING, spec, Authoriser, _AUTHORISER_METHODS)  # type: ignore[type-abstract]  # as above
    edit = getattr(made, PROFILE_EDIT_METHOD, None)
    if edit is None:
        log.warning("%s=%s has no %s: every profile edit is denied", AUTHORISER_SETTING, spec,
                    PROFILE_EDIT_METHOD)  # fmt: skip
    elif not inspect.iscoroutinefunction(edit):
        raise PluginLoadError(AUTHORISER_SETTING, spec, f"its {PROFILE_EDIT_METHOD} is not async")
    return made
