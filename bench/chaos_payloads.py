"""What the chaos orchestrator sends over the HTTP API: profiles and failure evidence.

Three kinds of failure, chosen per route by its seeded random generator:
- `transport`: the agent's transport lost (request scope: no circuit), retried;
- `overload`: Anthropic's 529 (provider scope): routes sharing a `group` account open
  that account's model circuit together (3 failures in 60 s from 2 routes) and park on
  it until its probe succeeds;
- `ratelimit`: a 429 with Retry-After on the route's own account: its circuit opens at
  once until the hint, then the route is the probe.
Retry delays are 1 s and 2 s, circuits open for seconds (the harness sets
RECOVERY_CIRCUIT_INITIAL_BACKOFF_S), so a route's life takes seconds, not minutes.
"""

from __future__ import annotations

import json
from typing import Any, Final

KINDS: Final = ("transport", "overload", "ratelimit")
WEIGHTS: Final = (0.6, 0.25, 0.15)
RETRY_AFTER_S: Final = "2"
SAFE_TURN: Final = {
    "execution_id": "exec-chaos", "prompt_generation": 1, "output_observed": False,
    "thoughts_observed": False, "tool_call_started": False, "tool_call_completed": False,
    "partial_utility_result": False, "ambiguous_delivery": False,
}  # fmt: skip


def _section(on_exhausted: str) -> dict[str, Any]:
    return {
        "retry": {"enabled": True, "max_retries": 2, "initial_interval_seconds": 1},
        "wait_for_reset": {"enabled": True, "max_wait_seconds": 60},
        "on_exhausted": on_exhausted,
    }


def profile(account: str) -> dict[str, Any]:
    """Claude on `account` (retried, then a skip), then Codex (retried, then a stop)."""
    claude, codex = _section("skip"), _section("stop")
    return {
        "version": 1,
        "candidates": [
            {"id": "claude", "agent": "claude-acp", "provider": "anthropic", "account": account,
             "model": "claude-sonnet-4", "transient": claude, "hard": claude},
            {"id": "codex", "agent": "codex-acp", "provider": "openai", "account": account,
             "model": "gpt-5", "transient": codex, "hard": codex},
        ],
    }  # fmt: skip


def evidence(kind: str, candidate: str | None, canary: str | None) -> dict[str, Any]:
    """The failure `kind` as the candidate's agent reports it, with the canary text (the
    planted secrets) in its body or text when given."""
    provider, agent = (
        ("openai", "codex-acp") if candidate == "codex" else ("anthropic", "claude-acp")
    )
    tail = "" if canary is None else "\n" + canary
    if kind == "transport":
        text = "SDK query error: Error: Claude Code process exited with code 1" + tail
        return {"kind": "sdk_exception", "provider": provider, "agent": agent, "text": text}
    if kind == "overload":
        if canary is not None:
            body = "API Error: 529 overloaded" + tail
        else:
            body = json.dumps({"type": "error", "error": {"type": "overloaded_error"}})
        return {"kind": "http", "http_status": 529, "body": body, "provider": "anthropic",
                "agent": agent}  # fmt: skip
    error = {"type": "error", "error": {"type": "rate_limit_error", "message": "rate limited"}}
    return {
        "kind": "http", "http_status": 429, "headers": {"Retry-After": RETRY_AFTER_S},
        "body": json.dumps(error) if canary is None else "rate limit exceeded" + tail,
        "provider": provider, "agent": agent,
    }  # fmt: skip


def failure(generation: int, kind: str, candidate: str | None, invocation: str,
            canary: str | None) -> dict[str, Any]:  # fmt: skip
    return {
        "generation": generation, "evidence": evidence(kind, candidate, canary),
        "turn": SAFE_TURN, "caller": "chaos", "invocation_id": invocation,
    }  # fmt: skip
