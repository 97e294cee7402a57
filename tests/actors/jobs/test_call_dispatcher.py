"""`call_dispatcher` bounds a dispatcher's call by the dispatch timeout (unit tier: no
Redis, no rq; the timeouts are short and only the bound is asserted)."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from actors.jobs.dispatcher import DispatchTimedOut, NotDispatched, call_dispatcher

TIMEOUT_S = 0.2
GUARD_S = 10.0  # a guard against a hang only
JOB: contextvars.ContextVar[str] = contextvars.ContextVar("job")


def test_a_dispatcher_that_never_returns_times_out_and_is_left_behind() -> None:
    release = threading.Event()
    began = time.monotonic()
    try:
        with pytest.raises(DispatchTimedOut, match=r"^dispatch timed out after 0\.2 s$"):
            call_dispatcher(lambda: release.wait(GUARD_S), (), timeout_s=TIMEOUT_S)
    finally:
        release.set()
    assert TIMEOUT_S <= time.monotonic() - began < GUARD_S


def test_an_awaitable_still_pending_at_the_timeout_is_cancelled() -> None:
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.Event().wait()  # never set: pending until cancelled
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(DispatchTimedOut) as caught:
        call_dispatcher(forever, (), timeout_s=TIMEOUT_S)
    assert caught.value.timeout_s == TIMEOUT_S
    assert cancelled.wait(GUARD_S)


def test_what_the_dispatcher_raises_or_returns_comes_back_as_it_was() -> None:
    def refuse() -> None:
        raise NotDispatched("nothing sent")

    async def explode() -> None:
        raise TimeoutError("the dispatcher's own")

    with pytest.raises(NotDispatched, match="nothing sent"):
        call_dispatcher(refuse, (), timeout_s=GUARD_S)
    with pytest.raises(TimeoutError, match="the dispatcher's own"):  # not DispatchTimedOut
        call_dispatcher(explode, (), timeout_s=GUARD_S)
    seen: list[tuple[int, str]] = []
    call_dispatcher(lambda n, word: seen.append((n, word)), (7, "sent"), timeout_s=GUARD_S)
    assert seen == [(7, "sent")]


def test_the_dispatcher_runs_in_the_callers_context() -> None:
    """rq's get_current_job() reads a context variable: a dispatcher still sees its job."""
    seen: list[str] = []
    token = JOB.set("job-1")
    try:
        call_dispatcher(lambda: seen.append(JOB.get()), (), timeout_s=GUARD_S)
    finally:
        JOB.reset(token)
    assert seen == ["job-1"]
