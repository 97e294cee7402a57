"""The demo fleet's three dynamic profiles and the simulated candidates in them.

Intervals are short (1-3 s, reset waits of at most 8 s) so a fleet goes through retries,
reset waits, skips and stops within a minute. Each candidate is a simulated agent (an ACP
adapter whose turns are replayed captures) or a simulated HTTP provider (`raw-api`),
failing with the evidence kinds listed in `FAILURE_MIX` (actors/demo/turns.py draws them).
"""

from __future__ import annotations

from typing import Final

from actors.demo.errors import DemoError
from actors.routes.profiles import ConcreteProfile
from policy import (
    Candidate,
    ClassPolicy,
    DynamicProfile,
    Outcome,
    RetryPolicy,
    WaitForResetPolicy,
)

RAW_API: Final = "raw-api"
MAX_RESET_WAIT_S: Final = 8


def _section(
    *, retries: int = 0, initial_s: int = 1, reset_wait: bool = False, then: Outcome
) -> ClassPolicy:
    retry = (
        RetryPolicy(enabled=True, max_retries=retries, initial_interval_seconds=initial_s)
        if retries
        else RetryPolicy.disabled()
    )
    wait = (
        WaitForResetPolicy(enabled=True, max_wait_seconds=MAX_RESET_WAIT_S)
        if reset_wait
        else WaitForResetPolicy.disabled()
    )
    return ClassPolicy(retry=retry, wait_for_reset=wait, on_exhausted=then)


def _candidate(
    candidate_id: str, agent: str, provider: str, model: str, *, transient: ClassPolicy,
    hard: ClassPolicy,
) -> Candidate:  # fmt: skip
    return Candidate(
        id=candidate_id, agent=agent, provider=provider, model=model, transient=transient,
        hard=hard,
    )  # fmt: skip


SKIP, STOP = Outcome.SKIP, Outcome.STOP

AGENTS_PROFILE: Final = DynamicProfile(
    name="agents: claude, then codex, then gemini",
    candidates=(
        _candidate(
            "claude", "claude-acp", "anthropic", "claude-sonnet-4-5",
            transient=_section(retries=2, initial_s=1, reset_wait=True, then=SKIP),
            hard=_section(reset_wait=True, then=SKIP),
        ),
        _candidate(
            "codex", "codex-acp", "openai", "gpt-5-codex",
            transient=_section(retries=2, initial_s=2, then=SKIP),
            hard=_section(reset_wait=True, then=SKIP),
        ),
        _candidate(
            "gemini", "gemini-acp", "google", "gemini-2.5-pro",
            transient=_section(retries=1, initial_s=1, then=STOP),
            hard=_section(then=STOP),
        ),
    ),
)  # fmt: skip

CURSOR_PROFILE: Final = DynamicProfile(
    name="cursor first, then opencode, then copilot",
    candidates=(
        _candidate(
            "cursor", "cursor-acp", "cursor", "auto",
            transient=_section(retries=3, initial_s=1, then=SKIP),
            hard=_section(then=SKIP),
        ),
        _candidate(
            "opencode", "opencode-acp", "openrouter", "qwen3-coder",
            transient=_section(retries=2, initial_s=1, reset_wait=True, then=SKIP),
            hard=_section(reset_wait=True, then=SKIP),
        ),
        _candidate(
            "copilot", "copilot-acp", "copilot", "gpt-4.1",
            transient=_section(retries=1, initial_s=2, then=STOP),
            hard=_section(then=STOP),
        ),
    ),
)  # fmt: skip

API_PROFILE: Final = DynamicProfile(
    name="HTTP providers: openai, azure, groq",
    candidates=(
        _candidate(
            "openai-api", RAW_API, "openai", "gpt-4o",
            transient=_section(retries=2, initial_s=1, reset_wait=True, then=SKIP),
            hard=_section(reset_wait=True, then=SKIP),
        ),
        _candidate(
            "azure-api", RAW_API, "azure", "gpt-4o",
            transient=_section(retries=2, initial_s=3, reset_wait=True, then=SKIP),
            hard=_section(then=SKIP),
        ),
        _candidate(
            "groq-api", RAW_API, "groq", "llama-3.3-70b-versatile",
            transient=_section(retries=1, initial_s=1, then=STOP),
            hard=_section(then=STOP),
        ),
    ),
)  # fmt: skip

PROFILES: Final = (AGENTS_PROFILE, CURSOR_PROFILE, API_PROFILE)


def profile_for(session_index: int) -> DynamicProfile:
    """Sessions take the three profiles in turn."""
    return PROFILES[session_index % len(PROFILES)]


def candidate_of(profile: DynamicProfile, candidate_id: str | None) -> Candidate:
    for candidate in profile.candidates:
        if candidate.id == candidate_id:
            return candidate
    raise DemoError(f"candidate {candidate_id!r} is not in profile {profile.name!r}")


INTERACTIVE_EVERY: Final = 5


def interactive(session_index: int) -> bool:
    """Every fifth session is an interactive task chat: a concrete profile under the
    built-in `interactive` policy, whose retries leave a transcript notice."""
    return session_index % INTERACTIVE_EVERY == 0


def concrete_for(session_index: int) -> ConcreteProfile:
    """The interactive session's concrete profile: its dynamic profile's first candidate
    alone, under the `interactive` policy (retries at 5, 10, 20, 40, 60 s, then stop)."""
    first = profile_for(session_index).candidates[0]
    return ConcreteProfile(
        id=first.id, agent=first.agent, provider=first.provider, model=first.model,
        policy="interactive",
    )  # fmt: skip
