"""The webhook dispatcher's settings and pure parts: what `load_config` refuses (naming the
setting, never showing the secret), the signature, the `Retry-After` forms, the body."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime

import pytest

from actors.engine.config import ConfigError, load_config
from actors.engine.settings import EngineSettings
from actors.jobs.dispatcher import ReplayIdentity
from actors.jobs.webhook import CandidateRef, payload, retry_after_s, sign
from actors.keys import AttemptFence

SECRET = "a-webhook-secret-of-some-length"
GOOD = {
    "RECOVERY_DISPATCHER": "webhook",
    "RECOVERY_WEBHOOK_URL": "https://orchestrator.example/hooks/recovery",
    "RECOVERY_WEBHOOK_SECRET": SECRET,
}
NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def refused(environ: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_config(None, environ)
    return caught.value


def test_a_complete_webhook_setting_loads_and_keeps_the_secret_out_of_public_settings() -> None:
    settings = load_config(None, GOOD).engine_settings()
    assert (settings.dispatcher, settings.webhook_timeout_s) == ("webhook", 10.0)
    assert SECRET not in json.dumps(settings.public())
    assert SECRET not in repr(settings)
    assert SECRET not in repr(load_config(None, GOOD))
    handed = EngineSettings.from_environment(settings.to_environment())
    assert handed.webhook_secret == SECRET, "a worker gets it through its environment"


@pytest.mark.parametrize("missing", ["RECOVERY_WEBHOOK_URL", "RECOVERY_WEBHOOK_SECRET"])
def test_the_webhook_dispatcher_needs_its_url_and_secret(missing: str) -> None:
    environ = {k: v for k, v in GOOD.items() if k != missing}
    error = refused(environ)
    assert error.field == "dispatcher"
    assert missing in str(error)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://example/hooks", "http:// or https://"),
        ("https:///no-host", "http:// or https://"),
        ("https://user:pw@example/hooks", "must not carry credentials"),
        ("http://example:99999/hooks", "bad port"),
    ],
)
def test_a_bad_webhook_url_is_refused_naming_it(url: str, why: str) -> None:
    error = refused({**GOOD, "RECOVERY_WEBHOOK_URL": url})
    assert error.field == "webhook_url"
    assert why in str(error)
    assert "pw" not in str(error) or why != "must not carry credentials"


def test_a_short_secret_is_refused_without_showing_it() -> None:
    error = refused({**GOOD, "RECOVERY_WEBHOOK_SECRET": "short-secret"})
    assert error.field == "webhook_secret"
    assert "at least 16 characters" in str(error)
    assert "short-secret" not in str(error)
    assert error.value == "<withheld>"


def test_the_webhook_timeout_must_be_below_the_dispatch_timeout() -> None:
    error = refused({**GOOD, "RECOVERY_WEBHOOK_TIMEOUT_S": "60"})
    assert error.field == "webhook_timeout_s"
    assert "below dispatch_timeout_s" in str(error)
    assert refused({**GOOD, "RECOVERY_WEBHOOK_TIMEOUT_S": "0.01"}).field == "webhook_timeout_s"


def test_the_signature_is_hmac_sha256_of_the_timestamp_a_dot_and_the_body() -> None:
    body = b'{"route_id":"r"}'
    expected = hmac.new(SECRET.encode(), b"1764669600." + body, hashlib.sha256).hexdigest()
    assert sign(SECRET, 1764669600, body) == f"v1={expected}"


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        (None, None),
        ("7", 7.0),
        ("0", 0.0),
        ("999999999", 86400.0),
        ("Wed, 02 Dec 2026 10:00:30 GMT", 30.0),
        ("Wed, 02 Dec 2026 09:00:00 GMT", 0.0),
        ("soon", None),
        ("-5", None),
        ("1.5", None),
    ],
)
def test_retry_after_reads_seconds_and_http_dates_within_bounds(
    header: str | None, seconds: float | None
) -> None:
    assert retry_after_s(header, NOW) == seconds


def test_the_body_names_the_attempt_its_candidate_and_its_replay_identity() -> None:
    identity = ReplayIdentity.of(
        AttemptFence("s-1", 3, 2), "codex", provider_session_id="ps", prompt_ref="inv"
    )
    body = payload(identity, CandidateRef("codex", "codex-acp", "openai", "gpt-5"), "retry 1 of 3")
    document = json.loads(body)
    assert document == {
        "route_id": "s-1", "generation": 3, "ordinal": 2, "idempotency_key": "s-1:3:2",
        "candidate": {"id": "codex", "agent": "codex-acp", "provider": "openai", "model": "gpt-5"},
        "reason": "retry 1 of 3", "next_step": "run",
        "replay": {
            "route_id": "s-1", "generation": 3, "ordinal": 2, "candidate_id": "codex",
            "provider_session_id": "ps", "prompt_ref": "inv",
        },
    }  # fmt: skip
    assert body == json.dumps(document, separators=(",", ":"), sort_keys=True).encode()
