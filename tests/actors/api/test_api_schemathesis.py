"""schemathesis runs the API's own OpenAPI schema against a live `recovery up` (one per
module): for every operation, examples generated from the schema, valid and invalid
(bounded: a few per operation), each checked by schemathesis — no 5xx, every status
documented, every answer matching its schema, content type and headers, invalid input
refused with a 4xx. `GET /events` is left out: an event stream never ends, so it has no
answer to check (tests/actors/api/test_api_up.py reads it).

One check is left out, `positive_data_acceptance` (every schema-valid request must be
accepted): the API refuses some schema-valid requests on purpose, with a 422 naming the
field — a generation written `3.0` (JSON Schema counts it an integer; the route contract
refuses it, docs/CONTRACTS.md), rules across fields (evidence or a classification, not
both; a profile only on a start-fresh; a document or a built-in policy), and values only
the catalogue can judge (an IANA zone, a Classification's rule and code)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any, Final

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.generation.case import Case
from schemathesis.schemas import BaseSchema
from schemathesis.specs.openapi.checks import positive_data_acceptance

from actors.api import create_app
from tests.actors.api.api_rigs import recording_backend
from tests.actors.api.test_api_up import START_TIMEOUT_S
from tests.actors.cli.test_cli_up import RunningUp, up_environment
from tests.actors.conftest import _delete_prefix, unique_keys

pytestmark = pytest.mark.integration

TOKEN: Final = "schemathesis-token-0123456789"
AUTH: Final = {"Authorization": f"Bearer {TOKEN}"}
EXAMPLES: Final = 8  # per operation: bounded, so the module runs in well under a minute
REQUEST_TIMEOUT_S: Final = 30
UNBOUNDED: Final = frozenset({"/events"})


@pytest.fixture(scope="module")
def live_url(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("api-schemathesis")
    keys = unique_keys()
    env = up_environment(redis_url, keys, folder / "data")
    env["RECOVERY_API_TOKEN"] = TOKEN
    up = RunningUp(env, folder / "up.stderr")
    try:
        url = up.wait_line("api: ", START_TIMEOUT_S).split()[1]
        up.wait_line("ready: ", START_TIMEOUT_S)
        yield url
        assert up.stop(signal.SIGTERM) == 0, up.report()
        assert "Traceback" not in up.stderr_path.read_text(errors="replace"), up.report()
    finally:
        if up.process.poll() is None:
            up.kill()
        _delete_prefix(redis_url, keys)


@pytest.fixture(scope="module")
def api_schema(live_url: str) -> BaseSchema:
    return schemathesis.openapi.from_url(f"{live_url}/openapi.json")


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    with requests.Session() as made:
        made.headers.update(AUTH)
        yield made


def operations() -> list[tuple[str, str]]:
    """Every (method, path) of the schema, read from the app itself (no runtime needed)."""
    backend, _ = recording_backend(unique_keys())
    paths = create_app(backend).openapi()["paths"]
    return sorted(
        (method.upper(), path) for path, item in paths.items() for method in item
        if path not in UNBOUNDED
    )  # fmt: skip


def test_the_live_schema_is_the_apps_own(api_schema: BaseSchema) -> None:
    backend, _ = recording_backend(unique_keys())
    assert api_schema.raw_schema == create_app(backend).openapi()


@pytest.mark.parametrize(("method", "path"), operations())
def test_every_operation_answers_within_its_schema_and_never_5xx(
    api_schema: BaseSchema, live_url: str, session: requests.Session, method: str, path: str
) -> None:
    operation = api_schema[path][method]
    cases = st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
    )

    @given(case=cases)
    @settings(
        max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    def answers_within_schema(case: Case[Any]) -> None:
        case.call_and_validate(
            base_url=live_url, session=session, timeout=REQUEST_TIMEOUT_S,
            excluded_checks=[positive_data_acceptance],
        )  # fmt: skip

    answers_within_schema()
