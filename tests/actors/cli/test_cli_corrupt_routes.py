"""`recovery routes --corrupt` lists the quarantined routes and those not quarantined yet;
plain `recovery routes` and `recovery schedules` go on past a corrupt one (issue 19)."""

from __future__ import annotations

import asyncio
import json

import pytest

from actors.engine.service import RouteService
from actors.routes.commands import StopRoute
from tests.actors.cli.test_cli_routes import apply, run
from tests.actors.conftest import Backend
from tests.actors.route_builders import in_seconds, retry_wait, start

pytestmark = pytest.mark.integration


def test_routes_corrupt_lists_quarantined_and_unreadable_routes(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    apply(
        real_backend,
        start("r-fine"),
        start("r-quarantined"),
        start("r-unreadable"),
        start("r-bad-schedule"),
        retry_wait("r-bad-schedule", 1, deadline=in_seconds(5)),
    )
    raw = real_backend.raw()
    keys = real_backend.keys

    async def corrupt_and_quarantine_one() -> None:
        await raw.hset(keys.route("r-quarantined"), "profile", "{oops")
        await raw.hset(keys.route("r-unreadable"), "generation", "two")
        await raw.hset(keys.schedule("r-bad-schedule"), "deadline", "soon")
        async with real_backend.store() as store:
            await RouteService(store, real_backend.clock).run_many(
                [("r-quarantined", StopRoute(1))]
            )
        await raw.aclose()

    asyncio.run(corrupt_and_quarantine_one())

    assert run(real_backend, "routes", "--corrupt", "--json") == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    found = {(r["route_id"], r["quarantined"]): r["reason"] for r in rows}
    assert sorted(found) == [
        ("r-bad-schedule", False), ("r-quarantined", True), ("r-unreadable", False)
    ]  # fmt: skip
    assert found["r-quarantined", True].startswith(
        f"corrupt: {keys.route('r-quarantined')} profile: "
    )
    assert found["r-unreadable", False].startswith(
        f"corrupt: {keys.route('r-unreadable')} generation: "
    )
    assert "'two'" in found["r-unreadable", False]
    assert found["r-bad-schedule", False].startswith(
        f"corrupt: {keys.schedule('r-bad-schedule')} deadline: "
    )

    assert run(real_backend, "routes") == 0
    captured = capsys.readouterr()
    listed = sorted(line.split()[0] for line in captured.out.splitlines()[1:])
    assert listed == ["r-bad-schedule", "r-fine", "r-quarantined"]
    assert "1 route(s) could not be read" in captured.err

    assert run(real_backend, "schedules") == 0  # the corrupt schedule is left out
    assert "r-bad-schedule" not in capsys.readouterr().out
