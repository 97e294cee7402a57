"""The dispatcher contract: what the runtime calls to hand a due retry back to the
orchestrator, and how the orchestrator says nothing was sent (docs/CONTRACTS.md, Routes).

A dispatcher is any callable at a `module:attribute` path, called inside an rq job as
`dispatcher(route_id, generation, ordinal, candidate_id, reason, identity)`; it may return
an awaitable, which the job awaits. `call_dispatcher` bounds the call by the installation's
dispatch timeout: the call runs in a thread of its own (in the job's context, so rq's
`get_current_job()` still answers), and a call still running at the timeout is left behind
as ambiguous (`DispatchTimedOut`). A thread cannot be stopped: a dispatcher that hangs
keeps its thread until it returns or the worker exits, and whatever it does later is
never read. An awaitable is cancelled at the timeout.
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import inspect
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from actors.errors import RecoveryError
from actors.keys import AttemptFence

MAX_RETRY_AFTER_S: Final = 86_400


class NotDispatched(RecoveryError):  # noqa: N818 - the name docs/CONTRACTS.md gives dispatchers
    """Raised by a dispatcher when it sent nothing ("not now": an agent pool full, a
    receiver answering 503): the same attempt is delivered again later, after
    `retry_after` seconds when given (0 to 86400), else after a doubling backoff, without
    spending the provider's retry budget (docs/CONTRACTS.md, Routes)."""

    def __init__(self, message: str = "", *, retry_after: float | None = None) -> None:
        if retry_after is not None and (
            isinstance(retry_after, bool)
            or not isinstance(retry_after, int | float)
            or not 0 <= retry_after <= MAX_RETRY_AFTER_S
        ):
            raise ValueError(
                f"retry_after must be seconds from 0 to {MAX_RETRY_AFTER_S}, got {retry_after!r}"
            )
        self.retry_after = None if retry_after is None else float(retry_after)
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_not_dispatched, (str(self), self.retry_after))


def _not_dispatched(message: str, retry_after: float | None) -> NotDispatched:
    return NotDispatched(message, retry_after=retry_after)


class AmbiguousDispatch(RecoveryError):  # noqa: N818 - says what happened, like NotDispatched
    """Whether the dispatcher sent anything is unknown, for a reason its message says in a
    form safe to show (it becomes the route's reason: the route stops for manual recovery).
    Any other exception a dispatcher raises is ambiguous too, with a generic reason."""


@dataclass(frozen=True, slots=True)
class DispatchFacts:
    """What a dispatcher observed of its call, recorded in the attempt's ledger: the
    receiver's status (None: no answer), the call's latency and a sanitised excerpt of the
    answer. A dispatcher returns them, or attaches them to what it raises (`facts`)."""

    status: int | None
    latency_ms: float
    excerpt: str = ""

    def ledger_fields(self) -> dict[str, str]:
        """The ledger fields these facts are stored as."""
        fields = {"latency_ms": f"{self.latency_ms:g}"}
        if self.status is not None:
            fields["status"] = str(self.status)
        if self.excerpt:
            fields["answer"] = self.excerpt
        return fields


def facts_of(found: object) -> DispatchFacts | None:
    """The DispatchFacts a dispatcher returned or attached to what it raised."""
    if isinstance(found, DispatchFacts):
        return found
    attached = getattr(found, "facts", None)
    return attached if isinstance(attached, DispatchFacts) else None


class DispatchTimedOut(AmbiguousDispatch):
    """The dispatcher had not returned `timeout_s` after it was called: whether it sent
    anything is unknown."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        super().__init__(f"dispatch timed out after {timeout_s:g} s")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.timeout_s,))


@dataclass(frozen=True, slots=True)
class ReplayIdentity:
    """What identifies the turn to replay (docs/CONTRACTS.md, Routes). `prompt_ref` is the
    route's invocation id; `provider_session_id` the agent's own session id the route
    recorded for its current candidate (None: no provider-native resume)."""

    route_id: str
    generation: int
    ordinal: int
    candidate_id: str | None
    provider_session_id: str | None = None
    prompt_ref: str | None = None

    @classmethod
    def of(
        cls,
        fence: AttemptFence,
        candidate_id: str | None,
        *,
        provider_session_id: str | None = None,
        prompt_ref: str | None = None,
    ) -> ReplayIdentity:
        """The identity of attempt `fence` on `candidate_id`."""
        return cls(
            fence.route_id, fence.generation, fence.ordinal, candidate_id,
            provider_session_id=provider_session_id, prompt_ref=prompt_ref,
        )  # fmt: skip

    @property
    def fence(self) -> AttemptFence:
        """The attempt this identity names."""
        return AttemptFence(self.route_id, self.generation, self.ordinal)


class Dispatcher(Protocol):
    """The orchestrator's callable that launches a due attempt (configured as
    `module:callable`, RECOVERY_DISPATCHER). Called once per attempt inside an rq job with
    the attempt (`route_id`, `generation`, `ordinal`), the candidate to run it on, the
    route's reason and the replay identity; it may return an awaitable. It raises
    `NotDispatched` when it sent nothing (the attempt is delivered again later); any other
    exception makes the outcome ambiguous and the route `action_required`."""

    def __call__(  # noqa: PLR0917 - the dispatcher's arguments, as docs/CONTRACTS.md gives them
        self,
        route_id: str,
        generation: int,
        ordinal: int,
        candidate_id: str | None,
        reason: str | None,
        identity: ReplayIdentity,
        /,
    ) -> Any: ...


def load_dispatcher(path: str) -> Dispatcher:
    """The dispatcher at `module:attribute`. Raises ValueError for a path of another shape,
    ImportError or AttributeError when it does not resolve, TypeError when what it names
    is not callable."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"a dispatcher path is 'module:callable', got {path!r}")
    found: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        found = getattr(found, part)
    if not callable(found):
        raise TypeError(f"dispatcher {path!r} is not callable")
    dispatcher: Dispatcher = found
    return dispatcher


def call_dispatcher(
    dispatcher: Callable[..., Any], args: Sequence[Any], *, timeout_s: float
) -> Any:
    """Call `dispatcher(*args)` and await what it returns, for at most `timeout_s`: returns
    what it returned when it did, raises what it raised, or DispatchTimedOut when it had
    not returned by then (module docstring: its thread is left behind)."""
    deadline = time.monotonic() + timeout_s
    failure: list[BaseException] = []
    returned: list[Any] = []
    done = threading.Event()

    def call() -> None:
        try:
            result = dispatcher(*args)
            if inspect.isawaitable(result):
                finished, value = asyncio.run(_awaited(result, deadline))
                if not finished:
                    failure.append(DispatchTimedOut(timeout_s))
                result = value
            returned.append(result)
        except BaseException as error:  # handed to the job's thread, which raises it
            failure.append(error)
        finally:
            done.set()

    context = contextvars.copy_context()  # rq's current job, for get_current_job()
    thread = threading.Thread(target=context.run, args=(call,), name="dispatch", daemon=True)
    thread.start()
    if not done.wait(timeout_s):
        raise DispatchTimedOut(timeout_s)
    if failure:
        raise failure[0]
    return returned[0] if returned else None


async def _awaited(result: Any, deadline: float) -> tuple[bool, Any]:
    """Whether `result` completed before `deadline` (it is cancelled if not), and its
    value; raises what it raised."""
    task = asyncio.ensure_future(result)
    done, _ = await asyncio.wait({task}, timeout=max(0.0, deadline - time.monotonic()))
    if not done:
        task.cancel()
        return False, None
    return True, task.result()
