"""The least-privilege ACL user (actors/store/acl.py): its rule, and on a real Redis (the
Redis 7 leg too: RECOVERY_TEST_REDIS=system) that the runtime's writes and rq's work as
that user while keys outside its prefix and admin commands are refused. bench/chaos.py
runs the whole runtime as that user (tests/actors/test_chaos.py)."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime
from urllib.parse import quote, urlsplit, urlunsplit

import pytest
import redis
from rq.job import Job
from rq.serializers import JSONSerializer

from actors.errors import InvalidIdentifierError
from actors.jobs.queue import dispatch_queue, enqueue_dispatch
from actors.jobs.rq_worker import PromptTeardownWorker
from actors.keys import AttemptFence, KeySpace
from actors.store.acl import acl_user_rule
from tests.actors.cli.test_cli_up import read_route, write_waiting_route
from tests.actors.conftest import _delete_prefix, unique_keys


def test_the_rule_restricts_keys_to_the_prefix_and_rq_and_hashes_the_password() -> None:
    rule = acl_user_rule("fleet-a", "recovery-a", "s3cret-pass")
    assert rule.startswith("user recovery-a on #")
    assert "s3cret-pass" not in rule
    assert "#" + hashlib.sha256(b"s3cret-pass").hexdigest() in rule
    assert " resetkeys ~fleet-a:* ~rq:* resetchannels &rq:* -@all +" in rule
    assert "+flushall" not in rule
    assert "+config" not in rule
    assert "+keys" not in rule


@pytest.mark.parametrize(
    ("prefix", "user", "password"),
    [("fleet a", "u", "p"), ("fleet*", "u", "p"), ("p", "bad user", "p"), ("p", "u", "a b"),
     ("p", "u", "")],
)  # fmt: skip
def test_a_rule_with_an_unsafe_part_is_refused(prefix: str, user: str, password: str) -> None:
    with pytest.raises((ValueError, InvalidIdentifierError), match=r"prefix|acl user|acl password"):
        acl_user_rule(prefix, user, password)


def _with_user(url: str, user: str, password: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(password, safe='')}@{host}"))


@pytest.fixture
def restricted(redis_url: str) -> Iterator[tuple[str, KeySpace]]:
    """(a URL of a user holding the rule of a fresh prefix, that prefix)."""
    keys = unique_keys()
    user, password = f"acl-{keys.prefix[-12:]}", secrets.token_hex(16)
    admin = redis.Redis.from_url(redis_url)
    admin.acl_setuser(user, reset=True)  # a fresh user, then the rule's words
    words = acl_user_rule(keys.prefix, user, password).split()[1:]  # after "user"
    admin.execute_command("ACL", "SETUSER", *words)  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
    try:
        yield _with_user(redis_url, user, password), keys
    finally:
        admin.acl_deluser(user)
        admin.close()
        _delete_prefix(redis_url, keys)


@pytest.mark.integration
def test_the_runtime_writes_and_rq_works_as_the_restricted_user(
    restricted: tuple[str, KeySpace],
) -> None:
    url, keys = restricted
    asyncio.run(write_waiting_route(url, keys, "acl-route", 600))
    assert asyncio.run(read_route(url, keys, "acl-route")).state == "retry_wait"
    connection = redis.Redis.from_url(url)
    try:
        queue = dispatch_queue(connection, f"{keys.prefix}-dispatch")
        fence = AttemptFence("acl-route", 1, 1)
        job_id = enqueue_dispatch(queue, keys, fence, dispatcher="x:y", now=datetime.now(UTC))
        assert job_id is not None
        worker = PromptTeardownWorker([queue], connection=connection, serializer=JSONSerializer)
        assert worker.work(burst=True)
        job = Job.fetch(job_id, connection=connection, serializer=JSONSerializer)
        assert job.return_value() == "stale"  # it ran: the route is not retrying
    finally:
        connection.close()


@pytest.mark.integration
def test_the_restricted_user_cannot_touch_other_keys_or_run_admin_commands(
    restricted: tuple[str, KeySpace],
) -> None:
    url, keys = restricted
    connection = redis.Redis.from_url(url)
    try:
        connection.set(f"{keys.prefix}:mine", "1")
        for refused in (
            lambda: connection.set("someone-else:key", "1"),
            lambda: connection.get("recovery:route:x"),
            connection.flushall,
            lambda: connection.config_get("*"),
            lambda: connection.keys("*"),
        ):
            with pytest.raises(redis.exceptions.NoPermissionError):
                refused()
    finally:
        connection.close()
