"""A safety refusal is never transient, whatever envelope a relay puts it in (issue 16)."""

from __future__ import annotations

import pytest

from catalogue.classifier import classify
from catalogue.evidence import Evidence, EvidenceKind

# Refusals in the providers' documented wordings.
REFUSALS = [
    "Output blocked by content filtering policy",  # Anthropic
    "The prompt was blocked due to SAFETY",  # Gemini blockReason
    "Candidate was blocked due to PROHIBITED_CONTENT",  # Gemini
    "Input data may contain inappropriate content.",  # DashScope data_inspection_failed
    "Your request was flagged by our moderation system",
    "This request has been flagged for potentially violating our usage policy",  # OpenAI
    "The response was filtered due to the prompt triggering content management policy",  # Azure
]
# Transient envelopes relays wrap them in: each alone is a rate limit, overload or outage.
ENVELOPES = [
    '{"type":"error","error":{"type":"rate_limit_error","message":"%s"}}',
    '{"error":{"code":429,"message":"%s","status":"RESOURCE_EXHAUSTED"}}',
    "ThrottlingException: %s",
    '{"object":"error","type":"rate_limited","message":"%s"}',
    '{"error":{"message":"%s","type":"rate_limit_error","code":"slow_down"}}',
    "Error 429 Too Many Requests: %s",
    '{"error":{"type":"server_error","message":"%s"}}',
    '{"type":"error","error":{"type":"overloaded_error","message":"%s"}}',
]


@pytest.mark.parametrize("envelope", ENVELOPES)
@pytest.mark.parametrize("refusal", REFUSALS)
def test_a_refusal_in_a_transient_envelope_is_content_policy(envelope: str, refusal: str) -> None:
    evidence = Evidence(kind=EvidenceKind.HTTP, http_status=429, body=envelope % refusal)
    result = classify(evidence)
    assert (result.code, result.error_class) == ("content_policy", "hard")


@pytest.mark.parametrize("envelope", ENVELOPES)
def test_the_envelope_alone_stays_transient(envelope: str) -> None:
    evidence = Evidence(kind=EvidenceKind.HTTP, http_status=429, body=envelope % "Please slow down")
    assert classify(evidence).error_class == "transient"
