"""The demo's evidence: corpus rows with their hints moved a few seconds ahead still
classify to their labels; recorded ACP captures replay to the observer's verdicts and are
what the scripted agent sends today; a session's draws repeat for a seed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from actors.demo.acp_turns import CAPTURES, capture_lines, replay_turn
from actors.demo.corpus_pool import CorpusPool, FailureKind, rewrite_text
from actors.demo.options import DEFAULT_CORPUS
from actors.demo.profiles import PROFILES
from actors.demo.turns import SessionScript
from catalogue import classify
from catalogue.corpus import accepted_codes
from tests.actors.demo_recorder import record

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def pool() -> CorpusPool:
    return CorpusPool.load(DEFAULT_CORPUS, NOW)


def test_every_bucket_has_rows(pool: CorpusPool) -> None:
    assert {kind for kind, cases in pool.cases.items() if cases} == set(FailureKind)


@pytest.mark.parametrize("kind", [FailureKind.RATE_LIMIT, FailureKind.QUOTA_RESET])
def test_hinted_rows_classify_to_their_label_with_the_hint_seconds_ahead(
    pool: CorpusPool, kind: FailureKind
) -> None:
    for case in pool.cases[kind]:
        result = classify(case.evidence(4, NOW), NOW)
        assert result.code in accepted_codes(case.row), case.row_id
        offsets = [result.retry_after_s] if result.retry_after_s is not None else []
        if result.reset_at is not None:
            offsets.append((result.reset_at - NOW).total_seconds())
        assert offsets, case.row_id
        assert all(3.0 <= offset <= 5.5 for offset in offsets), (case.row_id, offsets)


def test_rewriting_moves_relative_and_epoch_hints_and_keeps_the_wording() -> None:
    text = "Rate limit reached. Please try again in 9m38.016s. Visit the dashboard."
    assert rewrite_text(text, 3, NOW) == (
        "Rate limit reached. Please try again in 3 seconds. Visit the dashboard."
    )
    epoch = int(NOW.timestamp()) + 3 + 1
    assert rewrite_text("Claude AI usage limit reached|1748268000", 3, NOW) == (
        f"Claude AI usage limit reached|{epoch}"
    )


@pytest.mark.parametrize(
    ("name", "code", "tool_activity"),
    [
        ("cursor_retriable", "agent_transport_lost", False),
        ("cursor_tool_then_reset", "agent_transport_lost", True),
        ("codex_capacity", "model_capacity", False),
        ("claude_overloaded", "provider_overloaded", False),
        ("clean", None, True),
    ],
)
def test_captures_replay_to_the_observers_verdict(
    name: str, code: str | None, tool_activity: bool
) -> None:
    verdict = replay_turn(name, execution_id="exec-test", now=NOW)
    assert (verdict.classification.code if verdict.classification else None) == code
    assert verdict.turn.tool_call_started is tool_activity
    assert verdict.turn.execution_id == "exec-test"


def test_the_cursor_capture_is_what_the_scripted_agent_sends() -> None:
    capture = CAPTURES["cursor_retriable"]
    assert list(capture_lines(capture.script)) == record(capture.script)


def test_a_sessions_draws_repeat_for_the_same_seed(pool: CorpusPool) -> None:
    def outcomes(seed: int) -> list[str | None]:
        script = SessionScript(seed, 4, pool)
        drawn = []
        for candidate in [c for profile in PROFILES for c in profile.candidates] * 3:
            failure = script.attempt(candidate, NOW, first=True)
            drawn.append(None if failure is None else f"{failure.kind}:{failure.source}")
        return drawn

    assert outcomes(7) == outcomes(7)
    assert outcomes(7) != outcomes(8)
    drawn = outcomes(7)
    assert any(drawn)  # some attempts fail
    assert None in drawn  # and some succeed
