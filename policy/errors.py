"""The policy package's exception (a RecoveryError) and its field-addressed errors."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from catalogue.errors import RecoveryError


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem with one field. `field` is a JSON path such as
    `candidates[2].hard.retry.max_retries`, or None when the problem is the whole input."""

    field: str | None
    message: str

    def __str__(self) -> str:
        return self.message if self.field is None else f"{self.field}: {self.message}"

    def as_json(self) -> dict[str, str | None]:
        return {"field": self.field, "message": self.message}


class PolicyError(RecoveryError, ValueError):
    """Invalid policy input. `errors` lists every problem found, not only the first.

    Also a ValueError: raised inside a pydantic validator, pydantic folds it into the
    ValidationError it reports.
    """

    def __init__(self, errors: Iterable[FieldError]) -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        if not self.errors:
            raise ValueError("a PolicyError needs at least one error")
        super().__init__("; ".join(str(error) for error in self.errors))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.errors,))

    @classmethod
    def single(cls, field: str | None, message: str) -> PolicyError:
        return cls([FieldError(field, message)])

    def prefixed(self, prefix: str) -> PolicyError:
        """The same errors addressed from an enclosing object, e.g. `document.`."""
        return PolicyError(
            FieldError(join_path(prefix, error.field), error.message) for error in self.errors
        )


def join_path(parent: str | None, child: str | None) -> str | None:
    """`parent.child`, `parent[3]` for index children, or whichever part exists."""
    if not parent:
        return child
    if not child:
        return parent
    if child.startswith("["):
        return parent + child
    return f"{parent}.{child}"
