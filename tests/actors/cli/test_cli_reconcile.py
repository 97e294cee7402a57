"""`recovery reconcile` on a real Redis: one JSON line reporting what one reconciliation
pass did; a missing URL or dispatcher is one stderr line and exit 2."""

from __future__ import annotations

import json
from typing import Any

import pytest

from actors.cli.main import main
from actors.jobs.reconcile import REASON_ABANDONED
from tests.actors.conftest import Backend
from tests.actors.jobs import test_dispatch
from tests.actors.jobs.test_dispatch import DELIVER, R, Rig, retrying
from tests.actors.route_builders import T0

rig = test_dispatch.rig  # the fixture: a sync connection and the prefix's dispatch queue


def run(capsys: pytest.CaptureFixture[str], backend: Backend, *extra: str) -> dict[str, Any]:
    assert backend.url is not None
    argv = ["reconcile", "--redis-url", backend.url, "--prefix", backend.keys.prefix, *extra]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    parsed: dict[str, Any] = json.loads(out)
    return parsed


@pytest.mark.integration
def test_reconcile_requeues_an_undispatched_retry_and_prints_one_json_line(
    real_backend: Backend, rig: Rig, capsys: pytest.CaptureFixture[str]
) -> None:
    retrying(real_backend)
    report = run(capsys, real_backend, "--dispatcher", DELIVER)
    assert report == {
        "prefix": real_backend.keys.prefix, "queue": rig.queue.name, "requeued": 1,
        "ambiguous": 0, "left": 0, "routes": {"requeued": [R], "ambiguous": [], "left": []},
    }  # fmt: skip
    rig.work()
    assert len(rig.calls()) == 1
    again = run(capsys, real_backend, "--dispatcher", DELIVER)
    assert (again["requeued"], again["left"]) == (0, 1)  # finished: never dispatched again


@pytest.mark.integration
def test_reconcile_settles_a_dispatch_whose_worker_is_gone(
    real_backend: Backend, rig: Rig, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    retrying(real_backend)
    assert rig.ledger().start(R, 1, 1, "a-worker-long-gone", T0) == "applied"
    monkeypatch.setenv("RECOVERY_DISPATCHER", DELIVER)
    report = run(capsys, real_backend)
    assert report["routes"] == {"requeued": [], "ambiguous": [R], "left": []}
    route = rig.route()
    assert (route.state, route.reason) == ("action_required", REASON_ABANDONED)
    rig.work()
    assert rig.calls() == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--dispatcher", DELIVER], "no Redis URL"),
        (["--redis-url", "redis://localhost:1/0"], "no dispatcher"),
        (["--redis-url", "redis://localhost:1/0", "--dispatcher", DELIVER, "--prefix", "a b"],
         "prefix"),
        (["--redis-url", "redis://localhost:1/0", "--dispatcher", DELIVER], "cannot reach Redis"),
    ],
)  # fmt: skip
def test_reconcile_reports_a_problem_on_one_line_with_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("RECOVERY_DISPATCHER", raising=False)
    assert main(["reconcile", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("recovery reconcile: ")
    assert message in err
    assert err.count("\n") == 1
