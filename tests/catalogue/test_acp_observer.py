"""The ACP turn observer: turn evidence, Codex capacity, diagnostic pairing, permutations."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

from catalogue.acp import (
    CODEX_CAPACITY_DIAGNOSTIC,
    TurnCompleted,
    TurnFailed,
    TurnSnapshot,
    authorise,
    codex_system_error,
    diagnostic_pairs,
    is_capacity_chunk,
)
from catalogue.acp.replay import AcpReplay, ReplayError
from policy.gate import assess_turn
from tests.catalogue.acp_messages import (
    NOW,
    Message,
    done,
    failed,
    info,
    prompt,
    replay,
    say,
    think,
    tool,
    tool_update,
)

SYSTEM_ERROR = {"threadStatus": {"type": "systemError"}}
CAPACITY = "Selected model is at capacity. Please try a different model."
OVERLOADED = "API Error: 529 Overloaded"


def _terminal(events: Sequence[object]) -> TurnCompleted | TurnFailed:
    terminal = [e for e in events if isinstance(e, TurnCompleted | TurnFailed)]
    assert len(terminal) == 1
    return terminal[0]


def test_the_snapshot_records_the_turn() -> None:
    events = replay(
        "claude-acp",
        [prompt(1), think("hm"), say("text"), tool("a"), tool_update("a", "completed"), done(1)],
    )
    snapshot = next(e for e in events if isinstance(e, TurnSnapshot))
    evidence = snapshot.evidence
    assert (evidence.prompt_generation, evidence.provider_session_id) == (1, "s1")
    assert evidence.output_observed
    assert evidence.thoughts_observed
    assert evidence.tool_call_started
    assert evidence.tool_call_completed
    assert evidence.ambiguous_delivery is False
    assert isinstance(_terminal(events), TurnCompleted)


def test_generations_are_per_session_and_per_prompt() -> None:
    events = replay(
        "claude-acp",
        [prompt(1, "a"), prompt(2, "b"), done(1), done(2), prompt(3, "a"), done(3)],
    )
    seen = [(e.session_id, e.generation) for e in events if isinstance(e, TurnCompleted)]
    assert sorted(seen) == [("a", 1), ("a", 2), ("b", 1)]


def test_an_unanswered_prompt_fails_closed() -> None:
    events = replay("claude-acp", [prompt(1), say("partial")])
    terminal = _terminal(events)
    assert isinstance(terminal, TurnFailed)
    assert terminal.classification.error_class == "unclassified"
    assert terminal.evidence.ambiguous_delivery is None
    assert not terminal.effect_safety.same_candidate


def test_stale_generation_and_other_adapter_never_authorise() -> None:
    events = replay("cursor-acp", [prompt(1), say("Error: RetriableError: x"), done(1)])
    failure = _terminal(events)
    assert isinstance(failure, TurnFailed)
    assert authorise(failure, adapter="cursor-acp", execution_id="acp-replay", generation=1)
    assert not authorise(
        failure, adapter="cursor-acp", execution_id="acp-replay", generation=2
    ).same_candidate
    assert not authorise(
        failure, adapter="claude-acp", execution_id="acp-replay", generation=1
    ).same_candidate
    assert not authorise(
        failure, adapter="cursor-acp", execution_id="other", generation=1
    ).same_candidate


# -- Codex capacity -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "meta",
    [SYSTEM_ERROR, {"codex": SYSTEM_ERROR}],
)
def test_codex_capacity_becomes_one_model_capacity_error(meta: dict[str, object]) -> None:
    events = replay("codex-acp", [prompt(1), info(meta), say(CAPACITY), done(1)])
    failure = _terminal(events)
    assert isinstance(failure, TurnFailed)
    assert failure.projection == "codex_capacity"
    assert failure.classification.code == "model_capacity"
    assert failure.provider_error.message == CODEX_CAPACITY_DIAGNOSTIC
    assert failure.evidence.matched_acp_diagnostic
    assert failure.effect_safety.same_candidate


@pytest.mark.parametrize(
    ("adapter", "stream"),
    [
        ("codex-acp", [info(SYSTEM_ERROR)]),
        ("codex-acp", [say(CAPACITY)]),
        ("codex-acp", [info({"threadStatus": {"type": "active"}}), say(CAPACITY)]),
        ("claude-acp", [info(SYSTEM_ERROR), say(CAPACITY)]),
    ],
)
def test_codex_capacity_needs_both_signals(adapter: str, stream: list[Message]) -> None:
    assert isinstance(_terminal(replay(adapter, [prompt(1), *stream, done(1)])), TurnCompleted)


def test_codex_signals_of_an_earlier_generation_do_not_count() -> None:
    events = replay(
        "codex-acp", [prompt(1), info(SYSTEM_ERROR), done(1), prompt(2), say(CAPACITY), done(2)]
    )
    assert all(not isinstance(e, TurnFailed) for e in events)


def test_projection_predicates() -> None:
    assert codex_system_error({"codex": {"threadStatus": {"type": "systemError"}}})
    assert not codex_system_error({"threadStatus": "systemError"})
    assert not codex_system_error(None)
    assert is_capacity_chunk("The model is currently at capacity")
    assert not is_capacity_chunk("the job queue is at 90% capacity")
    assert diagnostic_pairs("API Error: 529 Overloaded.", "x", "api error: 529 overloaded", "x")
    assert not diagnostic_pairs("API Error: 529 Overloaded", "x", "API Error: 529", "x")
    assert not diagnostic_pairs("API Error: 529 Overloaded", "x", OVERLOADED, "y")


# -- diagnostic pairing -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stream", "error", "matched", "safe"),
    [
        ([say(OVERLOADED)], OVERLOADED, True, True),
        ([say(OVERLOADED + ".")], f"{OVERLOADED} (request req_1)", True, True),
        ([say(OVERLOADED)], "API Error: 500 Internal server error", False, False),
        ([say(OVERLOADED), say("Here is my answer")], OVERLOADED, False, False),
        ([say("Working on it"), say(OVERLOADED)], OVERLOADED, False, False),
        ([say(OVERLOADED), tool("t")], OVERLOADED, False, False),
        ([], OVERLOADED, False, True),
    ],
)
def test_a_matching_diagnostic_is_not_output(
    stream: list[Message], error: str, matched: bool, safe: bool
) -> None:
    failure = _terminal(replay("claude-acp", [prompt(1), *stream, failed(1, error)]))
    assert isinstance(failure, TurnFailed)
    assert failure.evidence.matched_acp_diagnostic is matched
    assert failure.effect_safety.same_candidate is safe


# -- permutations -------------------------------------------------------------------------

# (adapter, the turn's stream in its own order, the failure)
TURNS = [
    ("cursor-acp", [say("Error: RetriableError: Connection stalled")], done(1)),
    ("cursor-acp", [think("t"), tool("a"), say("Error: RetriableError: x")], done(1)),
    ("claude-acp", [say(OVERLOADED)], failed(1, OVERLOADED)),
    ("claude-acp", [think("t"), say("out"), tool("a")], failed(1, OVERLOADED)),
    ("codex-acp", [info(SYSTEM_ERROR), say(CAPACITY)], done(1)),
]


def _decision(adapter: str, messages: list[Message]) -> tuple[object, ...]:
    failure = _terminal(replay(adapter, messages))
    assert isinstance(failure, TurnFailed)
    safety = assess_turn(failure.evidence, execution_id="acp-replay", prompt_generation=1)
    return (failure.classification.code, failure.classification.rule, safety)


@pytest.mark.parametrize(("adapter", "stream", "failure"), TURNS)
def test_the_failure_may_arrive_anywhere_in_the_turn(
    adapter: str, stream: list[Message], failure: Message
) -> None:
    decisions = {
        _decision(adapter, [prompt(1), *stream[:cut], failure, *stream[cut:]])
        for cut in range(len(stream) + 1)
    }
    assert len(decisions) == 1


@pytest.mark.parametrize(("adapter", "stream", "failure"), TURNS[2:])
def test_order_independent_evidence_gives_one_decision_in_every_order(
    adapter: str, stream: list[Message], failure: Message
) -> None:
    decisions = {
        _decision(adapter, [prompt(1), *order])
        for order in itertools.permutations([*stream, failure])
    }
    assert len(decisions) == 1


# -- wire ---------------------------------------------------------------------------------


def test_wrapped_lines_and_agent_requests() -> None:
    runner = AcpReplay("claude-acp")
    permission = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "session/request_permission",
        "params": {"sessionId": "s1"},
    }
    lines: list[Message] = [
        {"direction": "client_to_agent", "message": prompt(1)},
        permission,
        {"jsonrpc": "2.0", "id": 0, "result": {"outcome": {"outcome": "cancelled"}}},
        {"direction": "agent_to_client", "message": done(1)},
    ]
    events = [e for line in lines for e in runner.feed(line, NOW)] + runner.finish(NOW)
    snapshot = next(e for e in events if isinstance(e, TurnSnapshot))
    assert snapshot.evidence.tool_call_started  # an agent request may carry an effect


def test_bad_lines_raise_replay_errors() -> None:
    runner = AcpReplay("claude-acp")
    with pytest.raises(ReplayError):
        runner.feed({"direction": "sideways", "message": {}}, NOW)
    with pytest.raises(ReplayError):
        runner.feed({"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {}}, NOW)
