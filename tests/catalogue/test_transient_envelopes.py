"""A transient envelope never makes a hard cause transient (issue 16).

Generic status-only rules (a 429, a 5xx), a proxy's bad-gateway page and relay wrappers are
envelopes: they decide only when nothing inside names a cause. A hard, invalid or
content-policy cause inside wins whatever tier its rule is in; an inner client-error status
that no rule reads leaves the evidence unclassified rather than a transient guess.
"""

from __future__ import annotations

import pytest

from catalogue.classifier import classify, explain
from catalogue.evidence import Evidence, EvidenceKind

# Hard causes in real wordings (see the fixtures' notes for their sources).
HARD_CAUSES = [
    ("model requires more system memory (2.7 GiB) than is available (2.3 GiB)",
     "model_unavailable"),
    ("An assistant message with 'tool_calls' must be followed by tool messages responding to "
     "each 'tool_call_id'. (insufficient tool messages following tool_calls message)",
     "invalid_request"),
    ("blocked: prompt: BlockedReasonProhibitedContent ()", "content_policy"),
    ("The prompt was blocked due to SAFETY", "content_policy"),
    ("prompt is too long: 209683 tokens > 200000 maximum", "context_length_exceeded"),
    ("Incorrect API key provided: sk-abc***. You can find your API key at the dashboard.",
     "auth_required"),
    ("The model `gpt-9-turbo` does not exist or you do not have access to it.",
     "model_unavailable"),
]  # fmt: skip

# Envelopes: (HTTP status or None, template). Each alone is a transient failure.
ENVELOPES = [
    pytest.param(429, "%s", id="bare-429"),
    pytest.param(500, '{"error":{"message":"%s"}}', id="500-json"),
    pytest.param(502, "unexpected status 502 Bad Gateway: %s", id="relay-502"),
    pytest.param(503, "Error: 503 Service Unavailable: %s", id="503-phrase"),
    pytest.param(
        429,
        '429: {"code":429,"error":"gemini Error when proxying request: {\\"error\\":'
        '{\\"message\\":\\"%s\\",\\"type\\":\\"one_api_error\\"}}"}',
        id="one-api-429-chain",
    ),
    pytest.param(
        502, "<html><head><title>502 Bad Gateway</title></head></html>\n%s", id="bad-gateway-page"
    ),
    pytest.param(None, "stream disconnected before completion: %s", id="codex-wrapper"),
    pytest.param(
        500,
        'ValueError: Ollama call failed with status code 500. Details: {"error":"%s"}',
        id="sdk-500-details",
    ),
]

PLAIN = "the upstream did not answer"


def _evidence(status: int | None, text: str) -> Evidence:
    if status is None:
        return Evidence(kind=EvidenceKind.STDERR, text=text)
    return Evidence(kind=EvidenceKind.HTTP, http_status=status, body=text)


@pytest.mark.parametrize(("status", "envelope"), ENVELOPES)
@pytest.mark.parametrize(("cause", "code"), HARD_CAUSES)
def test_a_hard_cause_in_a_transient_envelope_wins(
    status: int | None, envelope: str, cause: str, code: str
) -> None:
    evidence = _evidence(status, envelope % cause)
    result = classify(evidence)
    assert result.code == code, explain(evidence).matched
    assert result.error_class != "transient"


@pytest.mark.parametrize(("status", "envelope"), ENVELOPES)
def test_the_envelope_alone_is_transient(status: int | None, envelope: str) -> None:
    assert classify(_evidence(status, envelope % PLAIN)).error_class == "transient"


INNER_STATUSES = [
    'Upstream 400: {"error":{"message":"bad things"}}',
    '{"error":{"message":"upstream error","code":400}}',
    "upstream answered with status 403",
]


@pytest.mark.parametrize("inner", INNER_STATUSES)
@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_an_inner_client_status_nobody_reads_is_unclassified_not_transient(
    status: int, inner: str
) -> None:
    evidence = Evidence(kind=EvidenceKind.HTTP, http_status=status, body=inner)
    assert classify(evidence).code == "unclassified", explain(evidence).matched
