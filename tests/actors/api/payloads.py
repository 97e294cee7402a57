"""Request bodies the HTTP API's tests send, as a client in any language would write them."""

from __future__ import annotations

import json
from typing import Any

CONCRETE = {"kind": "concrete", "id": "claude", "agent": "claude-acp", "provider": "anthropic"}
SAFE_TURN = {
    "execution_id": "exec-1", "prompt_generation": 1, "output_observed": False,
    "thoughts_observed": False, "tool_call_started": False, "tool_call_completed": False,
    "partial_utility_result": False, "ambiguous_delivery": False,
}  # fmt: skip


def section(retries: int = 3, interval: int = 30) -> dict[str, Any]:
    """A class policy: `retries` retries from `interval` seconds, then skip."""
    return {
        "retry": {"enabled": True, "max_retries": retries, "initial_interval_seconds": interval},
        "wait_for_reset": {"enabled": False, "max_wait_seconds": 0},
        "on_exhausted": "skip",
    }


def document(retries: int = 3, interval: int = 30) -> dict[str, Any]:
    """One candidate's v1 policy document, both classes alike."""
    return {"version": 1, "transient": section(retries, interval),
            "hard": section(retries, interval)}  # fmt: skip


def dynamic(*ids: str, retries: int = 3, interval: int = 30) -> dict[str, Any]:
    """A dynamic profile: each candidate retries failures, then skips."""
    return {
        "version": 1,
        "candidates": [
            {"id": cid, "agent": "claude-acp", "provider": "anthropic",
             "transient": section(retries, interval), "hard": section(retries, interval)}
            for cid in ids
        ],
    }  # fmt: skip


def start(
    profile: dict[str, Any] | None = None,
    caller: str = "go-orchestrator",
    account: str | None = None,
) -> dict[str, Any]:
    """A start on `profile` (the concrete one by default; with `account`, its circuits
    are the account's own, so no other test's failures open them)."""
    chosen = profile or ({**CONCRETE, "account": account} if account else CONCRETE)
    return {"profile": chosen, "caller": caller, "invocation_id": "turn-1"}


def overloaded(retry_after: str | None = None) -> dict[str, Any]:
    """Anthropic's 529 as an HTTP client sees it (with a Retry-After header if given)."""
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    evidence: dict[str, Any] = {
        "kind": "http", "http_status": 529, "body": json.dumps(body),
        "provider": "anthropic", "agent": "claude-acp",
    }  # fmt: skip
    if retry_after is not None:
        evidence["headers"] = {"Retry-After": retry_after}
    return evidence


def failure(generation: int, evidence: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "generation": generation, "evidence": evidence or overloaded(), "turn": SAFE_TURN,
        "caller": "go-orchestrator", "invocation_id": "turn-1",
    }  # fmt: skip
