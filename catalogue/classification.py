"""Classification: the catalogue's verdict on one piece of evidence."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from catalogue.codes import CATALOGUE_VERSION, Confidence, ErrorClass, Scope
from catalogue.timing import HintSource


class Classification(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str
    error_class: ErrorClass
    confidence: Confidence
    scope: Scope
    rule: str
    catalogue_version: str = CATALOGUE_VERSION
    provider: str | None = None
    model: str | None = None
    phase: str | None = None
    occurred_at: datetime | None = None
    retry_after_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    reset_at: datetime | None = None
    hint_source: HintSource | None = None
    safe_excerpt: str = ""

    @property
    def is_actionable(self) -> bool:
        """True when policy may act on it: a class it configures and enough confidence."""
        return (
            self.error_class in (ErrorClass.TRANSIENT, ErrorClass.HARD)
            and self.confidence is not Confidence.LOW
        )
