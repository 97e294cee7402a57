"""A wrapper never makes a failure transient when what it wraps is hard, invalid or not a
provider error; at equal evidence the classifier prefers unclassified to a transient guess.
Bare transport exception classes classify as transport losses."""

from __future__ import annotations

import pytest

from catalogue import Evidence, EvidenceKind, classify, explain
from catalogue.classifier import Catalogue
from catalogue.rules import load_rule_file

RULES = """
[[rule]]
id = "test.wrapper.v1"
code = "agent_transport_lost"
tier = "neutral"
keys = ["wrapped"]
match = ['wrapped failure']
wrapper = true
why = "a wrapper line"

[[rule]]
id = "test.status_401.v1"
code = "auth_required"
tier = "status"
status = [401]
why = "a bare 401"

[[rule]]
id = "test.status_503.v1"
code = "provider_unavailable"
tier = "status"
status = [503]
why = "a bare 503"

[[rule]]
id = "test.weak_task.v1"
code = "task_error"
tier = "broad"
confidence = "low"
keys = ["tool"]
match = ['tool said no']
why = "weak evidence of a tool failure"

[[rule]]
id = "test.weak_network.v1"
code = "network_unavailable"
tier = "broad"
confidence = "low"
keys = ["flaky"]
match = ['flaky']
why = "weak evidence of a network problem"
"""
CATALOGUE = Catalogue(load_rule_file("test.toml", RULES))


def run(text: str, status: int | None = None) -> tuple[str, str]:
    evidence = Evidence(kind=EvidenceKind.SDK_EXCEPTION, http_status=status, text=text)
    result = CATALOGUE.classify(evidence)
    explained = CATALOGUE.explain(evidence).classification
    assert (result.code, result.rule) == (explained.code, explained.rule), "hot path = explain"
    return result.code, result.rule


def test_a_wrapper_alone_is_its_transport_loss() -> None:
    assert run("wrapped failure") == ("agent_transport_lost", "test.wrapper.v1")


def test_a_hard_status_beside_a_wrapper_decides() -> None:
    assert run("wrapped failure", 401) == ("auth_required", "test.status_401.v1")


def test_a_transient_status_beside_a_wrapper_leaves_the_wrapper() -> None:
    assert run("wrapped failure", 503) == ("agent_transport_lost", "test.wrapper.v1")


def test_weak_evidence_of_a_non_provider_cause_makes_it_unclassified_not_transient() -> None:
    assert run("wrapped failure: tool said no") == ("unclassified", "test.weak_task.v1")


def test_weak_evidence_of_a_transient_cause_leaves_the_wrapper() -> None:
    assert run("wrapped failure: flaky") == ("agent_transport_lost", "test.wrapper.v1")


SHIPPED_WRAPPED = [
    pytest.param(
        "Connection failed\nSerialization error in aiserver.v1.StreamUnifiedChatRequestWithTools",
        "invalid_request",
        id="connection-failed-around-an-invalid-request",
    ),
    pytest.param(
        'ACP protocol error: Internal error: {"data": "Process exited with exit code: 1"}\n'
        "Error: Invalid API key · Please run /login",
        "auth_required",
        id="process-exit-around-an-auth-failure",
    ),
    pytest.param(
        "stream disconnected before completion: Your input exceeds the context window of this "
        "model. Please adjust your input and try again.",
        "context_length_exceeded",
        id="stream-disconnected-around-a-context-overflow",
    ),
    pytest.param(
        "TypeError: fetch failed\n  [cause]: Error: 401 Unauthorized",
        "auth_required",
        id="fetch-failed-around-an-auth-failure",
    ),
    pytest.param(
        "TypeError: fetch failed\n  [cause]: Error: 400 Bad Request: invalid_request_error: "
        "messages: text content blocks must be non-empty",
        "invalid_request",
        id="fetch-failed-around-an-invalid-request",
    ),
    pytest.param(
        "Connection failed. If the problem persists, please check your internet connection or VPN\n"
        "Serialization error in aiserver.v1.StreamUnifiedChatRequestWithTools [internal]",
        "invalid_request",
        id="cursor-banner-around-an-invalid-request",
    ),
    pytest.param(
        "Connection failed. If the problem persists, please check your internet connection or VPN\n"
        "Something went wrong [internal]",
        "unclassified",
        id="cursor-banner-around-a-non-transport-code-is-no-network-guess",
    ),
    pytest.param(
        "Error: Exit code 137\n(eval):1: killed     npm test",
        "task_error",
        id="signal-exit-of-a-tool-is-the-task",
    ),
]


@pytest.mark.parametrize(("text", "code"), SHIPPED_WRAPPED)
def test_shipped_wrappers_never_hide_a_non_transient_cause(text: str, code: str) -> None:
    assert classify(Evidence(kind=EvidenceKind.STDERR, text=text)).code == code


BARE_TRANSPORT = [
    ("httpx.ReadError", "agent_transport_lost"),
    ("ReadError", "agent_transport_lost"),
    ("httpcore.RemoteProtocolError", "agent_transport_lost"),
    ("httpx.WriteError", "agent_transport_lost"),
    ("aiohttp.client_exceptions.ClientOSError", "agent_transport_lost"),
    ("aiohttp.client_exceptions.ClientPayloadError: Response payload is not completed",
     "agent_transport_lost"),
    ("APIConnectionError", "network_unavailable"),
    ("openai.APIConnectionError", "network_unavailable"),
    ("Error: read ECONNRESET", "network_unavailable"),
    ("TypeError: terminated\n  [cause]: SocketError: other side closed\n    code: 'UND_ERR_SOCKET'",
     "agent_transport_lost"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "code"), BARE_TRANSPORT)
def test_bare_transport_exception_classes_are_transport_failures(text: str, code: str) -> None:
    result = classify(Evidence(kind=EvidenceKind.SDK_EXCEPTION, text=text))
    assert result.code == code, explain(Evidence(kind=EvidenceKind.SDK_EXCEPTION, text=text))


def test_a_stated_cause_beats_the_exception_class_that_carries_it() -> None:
    text = "httpx.RemoteProtocolError: Server disconnected without sending a response."
    assert classify(Evidence(kind=EvidenceKind.SDK_EXCEPTION, text=text)).code == (
        "network_unavailable"
    )


def test_litellm_wrapping_a_provider_cause_is_not_a_bare_connection_error() -> None:
    text = (
        "litellm.APIConnectionError: AnthropicException - Overloaded. Handle with "
        "`litellm.APIConnectionError`"
    )
    assert classify(Evidence(kind=EvidenceKind.STDERR, text=text)).code == "provider_overloaded"


AGENT_GONE = [
    (EvidenceKind.EXIT, "Killed"),
    (EvidenceKind.EXIT, "Terminated"),
    (EvidenceKind.EXIT, "Command failed with exit code -9 (exit code: -9)"),
    (EvidenceKind.EXIT, "error: Agent exited with code 143"),
    (EvidenceKind.EXIT, "process exited with status 137"),
    (EvidenceKind.STDERR, "agent process killed by signal 15"),
    (EvidenceKind.SDK_EXCEPTION, "Error: Claude Code process terminated by signal SIGKILL"),
]


@pytest.mark.parametrize(("kind", "text"), AGENT_GONE)
def test_an_agent_ended_by_a_signal_is_a_transport_loss(kind: EvidenceKind, text: str) -> None:
    assert classify(Evidence(kind=kind, text=text)).code == "agent_transport_lost"


def test_a_bare_killed_inside_the_turn_is_not_the_agent_exiting() -> None:
    assert classify(Evidence(kind=EvidenceKind.MESSAGE_CHUNK, text="Killed")).code == (
        "unclassified"
    )
