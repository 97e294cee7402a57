"""Evidence: what an adapter saw of a failed turn, bounded and typed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, tzinfo
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from catalogue._durations import zone_named

# Evidence text beyond this is cut before classification: provider errors are short, and
# a bound keeps the classifier's cost linear in a known size.
MAX_EVIDENCE_CHARS = 64 * 1024


class EvidenceKind(StrEnum):
    HTTP = "http"
    STDERR = "stderr"
    ACP_ERROR = "acp_error"
    MESSAGE_CHUNK = "message_chunk"
    EXIT = "exit"
    SDK_EXCEPTION = "sdk_exception"


class Evidence(BaseModel):
    """One failure observation. `provider`, `agent` and `model` are free strings: known
    values select provider-specific rules, unknown ones fall through to neutral rules."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)

    kind: EvidenceKind
    text: str = ""
    http_status: int | None = Field(default=None, ge=100, le=599)
    headers: Mapping[str, str] = Field(default_factory=dict)
    body: str | None = None
    exit_code: int | None = None
    provider: str | None = None
    agent: str | None = None
    model: str | None = None
    observed_at: datetime | None = None
    invocation_id: str | None = None
    execution_id: str | None = None
    prompt_generation: int | None = Field(default=None, ge=0)
    phase: str | None = None
    # The IANA zone of the machine the agent ran on (the orchestrator knows it): a clock
    # time that names no zone ("try again at 9:15 AM") is read in it, else dropped.
    timezone: str | None = None

    @field_validator("headers", mode="before")
    @classmethod
    def _lowercase_header_names(cls, value: object) -> object:
        # Header names are case-insensitive on the wire; store them lowercased once.
        if isinstance(value, Mapping):
            return {str(k).lower(): v for k, v in value.items()}
        if value is None:
            return {}
        return value

    @field_validator("body", mode="before")
    @classmethod
    def _serialise_object_body(cls, value: object) -> object:
        # A body given as a JSON object is accepted and kept as its JSON text.
        if isinstance(value, dict | list):
            return json.dumps(value, ensure_ascii=False)
        return value

    @field_validator("observed_at")
    @classmethod
    def _require_zone(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.utcoffset() is None:
            raise ValueError("must carry a time zone (ISO-8601 with an offset or Z)")
        return value

    @field_validator("timezone")
    @classmethod
    def _require_known_zone(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if zone_named(value.strip().lower()) is None:
            raise ValueError(f"not an IANA time zone: {value!r}")
        return value.strip()

    @field_validator("provider", "agent", "model", mode="after")
    @classmethod
    def _normalise_identity(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip().lower()
        return value or None

    def header(self, name: str) -> str | None:
        """A header value by case-insensitive name."""
        return self.headers.get(name.lower())

    def zone(self) -> tzinfo | None:
        """The agent machine's zone, when the evidence names one."""
        return None if self.timezone is None else zone_named(self.timezone.lower())

    def combined_text(self) -> str:
        """Text and body as one bounded string, the classifier's input: the two joined by a
        line break when both are there."""
        text, body = self.text, self.body
        if body:
            text = f"{text}\n{body}" if text else body
        return text[:MAX_EVIDENCE_CHARS]


def evidence_from_json(data: Mapping[str, Any]) -> Evidence:
    """Validate a JSON object as Evidence (raises pydantic.ValidationError)."""
    return Evidence.model_validate(dict(data))
