"""The Cursor normal-completion failure projection and its catalogue rule, table-driven."""

from __future__ import annotations

import pytest
from acp.schema import PromptResponse, SessionNotification

from catalogue import Evidence, EvidenceKind, classify
from catalogue.acp import (
    CURSOR_DIAGNOSTIC,
    AcpTurnObserver,
    ChunkSuppressed,
    TurnCompleted,
    TurnFailed,
    cursor_retriable_suffix,
)
from tests.catalogue.acp_messages import (
    NOW,
    Message,
    done,
    failed,
    prompt,
    replay,
    say,
    think,
    tool,
    tool_update,
)

RULE = "cursor.retriable_stream_reset.v1"
MARKER = "Error: RetriableError: [unavailable] PING timed out"

# (text, is a marker): the chunk check, in the order the seed gives its conditions.
CHUNKS = [
    (MARKER, True),
    ("Error: RetriableError: Connection stalled", True),
    (CURSOR_DIAGNOSTIC, True),
    ("error: retriableerror: Connection stalled", True),
    ("ERROR: RETRIABLEERROR: Connection stalled", True),
    ("\u00a0\u2003 Error: RetriableError: Connection stalled \u3000\n", True),
    ("Error: RetriableError:\u2009Connection stalled", True),
    ("Error: RetriableError: [canceled] HTTP/2 stream closed", True),
    ("Error: RetriableError:", False),
    ("Error: RetriableError: \u2003\u00a0 ", False),
    ("Note: Error: RetriableError: Connection stalled", False),
    ("The log says Error: RetriableError: Connection stalled", False),
    ("Error: Retriable Error: Connection stalled", False),
    ("RetriableError: Connection stalled", False),
    ("Error: RetriableError: context canceled", False),
    ("Error: RetriableError: rpc error: Context Canceled", False),
    ("Error: RetriableError: context deadline exceeded", False),
    ("Error: RetriableError: cancel escalated", False),
    ("Error: RetriableError: retry escalated", False),
    ("Error: RetriableError: retry escalation after 3 attempts", False),
    ("Error: RetriableError: " + "a" * 256, True),
    ("Error: RetriableError: " + "a" * 257, False),
    ("Error: RetriableError: " + "é" * 128, True),  # 2 bytes each: 256 bytes
    ("Error: RetriableError: " + "é" * 128 + "a", False),  # 257 bytes, 129 characters
    ("Error: RetriableError: " + "€" * 85 + "a", True),  # 3 bytes each: 256 bytes
    ("Error: RetriableError: " + "€" * 86, False),  # 258 bytes
    ("Error: RetriableError: " + "😀" * 64, True),  # 4 bytes each: 256 bytes
    ("Error: RetriableError: " + "😀" * 64 + "a", False),
    ("Error: RetriableError:    " + "a" * 256 + "   ", True),  # the bound is after trimming
]


@pytest.mark.parametrize(("text", "marker"), CHUNKS)
def test_the_chunk_check(text: str, marker: bool) -> None:
    assert (cursor_retriable_suffix(text) is not None) is marker


@pytest.mark.parametrize(("text", "marker"), CHUNKS)
def test_the_rule_and_the_chunk_check_share_the_prefix_vetoes_and_byte_bound(
    text: str, marker: bool
) -> None:
    result = classify(Evidence(kind=EvidenceKind.ACP_ERROR, text=text, agent="cursor-acp"))
    assert (result.rule == RULE) is marker
    if marker:
        assert (result.code, result.error_class, result.confidence) == (
            "agent_transport_lost",
            "transient",
            "high",
        )


@pytest.mark.parametrize(
    ("agent", "kind", "expected"),
    [
        ("cursor-acp", EvidenceKind.ACP_ERROR, RULE),
        ("cursor-acp", EvidenceKind.MESSAGE_CHUNK, RULE),
        ("cursor-acp", EvidenceKind.STDERR, RULE),
        ("claude-acp", EvidenceKind.ACP_ERROR, None),
        (None, EvidenceKind.ACP_ERROR, None),
    ],
)
def test_the_rule_takes_cursor_diagnostics_only(
    agent: str | None, kind: EvidenceKind, expected: str | None
) -> None:
    result = classify(Evidence(kind=kind, text=CURSOR_DIAGNOSTIC, agent=agent))
    assert (result.rule == RULE) is (expected is not None)


def _cursor(
    messages: list[Message],
) -> tuple[list[ChunkSuppressed], list[TurnCompleted | TurnFailed]]:
    events = replay("cursor-acp", [prompt(1), *messages, done(1)])
    suppressed = [e for e in events if isinstance(e, ChunkSuppressed)]
    terminal = [e for e in events if isinstance(e, TurnCompleted | TurnFailed)]
    return suppressed, terminal


# (stream before the prompt returns, marker pending at the end)
SEQUENCES = [
    ([say(MARKER)], True),
    ([say("Let me look."), say(MARKER)], True),
    ([say(MARKER), say("Retrying: here is the fix.")], False),
    ([say(MARKER), think("Resuming")], False),
    ([say(MARKER), tool("t1")], False),
    ([tool("t1"), say(MARKER), tool_update("t1", "in_progress")], True),
    ([tool("t1"), say(MARKER), tool_update("t1", "completed")], True),
    ([say(MARKER), say("   "), think("\n")], True),  # blank chunks prove nothing
    ([say(MARKER), say("ok"), say(MARKER)], True),  # a later marker re-arms it
    ([say(MARKER), think("x"), say(MARKER), tool("t2"), say(MARKER)], True),
    ([say(MARKER), say(MARKER)], True),
    ([say("Error: RetriableError: context canceled")], False),
    ([say("Error: RetriableError:")], False),
    ([say("Before. Error: RetriableError: Connection stalled")], False),
]


@pytest.mark.parametrize(("stream", "pending"), SEQUENCES)
def test_the_marker_is_set_cleared_and_re_armed(stream: list[Message], pending: bool) -> None:
    _, terminal = _cursor(stream)
    assert len(terminal) == 1  # exactly one event per generation
    event = terminal[0]
    if not pending:
        assert isinstance(event, TurnCompleted)
        return
    assert isinstance(event, TurnFailed)
    error = event.provider_error
    assert (error.source, error.provider_id, error.message) == (
        "cursor_acp",
        "cursor-acp",
        CURSOR_DIAGNOSTIC,
    )
    assert error.occurred_at.utcoffset() is not None
    assert error.occurred_at.tzname() == "UTC"
    assert event.classification.rule == RULE
    assert "PING" not in error.message  # no raw assistant text


def test_each_matching_chunk_is_suppressed_and_not_output() -> None:
    suppressed, terminal = _cursor([say(MARKER), say("ok"), say(MARKER)])
    assert [s.generation for s in suppressed] == [1, 1]
    assert isinstance(terminal[0], TurnFailed)
    assert terminal[0].evidence.output_observed is True  # "ok" was output


def test_a_clean_marker_turn_is_replayable_and_an_active_one_is_not() -> None:
    _, clean = _cursor([say(MARKER)])
    assert isinstance(clean[0], TurnFailed)
    assert clean[0].effect_safety.same_candidate
    # The observed incident: thoughts and a Read File call in flight.
    _, incident = _cursor([think("Reading"), tool("t1"), say(MARKER), tool_update("t1")])
    assert isinstance(incident[0], TurnFailed)
    assert incident[0].classification.error_class == "transient"
    assert not incident[0].effect_safety.same_candidate


@pytest.mark.parametrize("adapter", ["claude-acp", "codex-acp", "cursor", "gemini-acp"])
def test_other_adapters_never_project(adapter: str) -> None:
    events = replay(adapter, [prompt(1), say(MARKER), done(1)])
    assert not any(isinstance(e, ChunkSuppressed | TurnFailed) for e in events)
    assert sum(isinstance(e, TurnCompleted) for e in events) == 1


def test_a_marker_outside_an_active_turn_does_nothing() -> None:
    events = replay("cursor-acp", [say(MARKER), prompt(1), done(1), say(MARKER)])
    # The first marker precedes any prompt (generation 0); the last arrives after the
    # response and is drained into generation 1, which it then fails.
    assert [type(e).__name__ for e in events] == [
        "ChunkSuppressed",
        "TurnSnapshot",
        "TurnFailed",
    ]
    stale = replay("cursor-acp", [prompt(1), done(1), prompt(2), say(MARKER), done(2)])
    assert [(type(e).__name__, getattr(e, "generation", 0)) for e in stale] == [
        ("TurnSnapshot", 1),
        ("TurnCompleted", 1),
        ("ChunkSuppressed", 2),
        ("TurnSnapshot", 2),
        ("TurnFailed", 2),
    ]


def test_a_prompt_error_wins_over_a_pending_marker_with_exactly_one_event() -> None:
    events = replay("cursor-acp", [prompt(1), say(MARKER), failed(1, "Internal error")])
    terminal = [e for e in events if isinstance(e, TurnCompleted | TurnFailed)]
    assert len(terminal) == 1
    assert isinstance(terminal[0], TurnFailed)
    assert terminal[0].projection is None


def test_a_cancelled_turn_is_not_projected() -> None:
    cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s1"}}
    events = replay("cursor-acp", [prompt(1), say(MARKER), cancel, done(1, "cancelled")])
    assert isinstance(events[-1], TurnCompleted)
    assert events[-1].stop_reason == "cancelled"


def test_nothing_is_emitted_for_recovery_while_the_prompt_rpc_is_open() -> None:
    observer = AcpTurnObserver("cursor-acp", "exec-1")
    generation, started = observer.prompt_started("s1", NOW)
    assert generation == 1
    assert started == []
    marker = SessionNotification.model_validate(say(MARKER)["params"])
    during = observer.update(marker)
    # Cursor is still retrying on its own: the chunk is hidden, no failure is emitted yet.
    assert [type(e) for e in during] == [ChunkSuppressed]
    assert observer.settle("s1", NOW) == []
    observer.prompt_returned("s1", result=PromptResponse(stop_reason="end_turn"))
    after = observer.settle("s1", NOW)
    assert sum(isinstance(e, TurnFailed) for e in after) == 1
