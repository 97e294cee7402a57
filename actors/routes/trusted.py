"""A RouteSnapshot built from field values validated already, without validating them again.

Validating a RouteSnapshot costs ~25 µs; a route host builds one for every transition it
writes, from the RouteUpdate the store wrote (the same field types, validated when the
transition was planned), and a HostBatcher rebuilds every snapshot a host sent over Ray
(validated on the host). Both build it as unpickling builds a model: pydantic's own
`__setstate__`, no validation, no copy.
"""

from __future__ import annotations

from typing import Any

from actors.routes.models import RouteSnapshot
from actors.routes.next_steps import STATE_NEXT_STEP


def snapshot_of_validated(
    values: dict[str, Any], fields_set: set[str] | None = None
) -> RouteSnapshot:
    """The snapshot of `values`, which holds every field of RouteSnapshot, each already
    valid for it (times in UTC). A next step left unset is the one the state implies, as
    validation would set it. `fields_set`: the fields set explicitly (None: all)."""
    if values.get("next_step") is None and values["state"] in STATE_NEXT_STEP:
        values["next_step"] = STATE_NEXT_STEP[values["state"]]
    snapshot = RouteSnapshot.__new__(RouteSnapshot)
    snapshot.__setstate__(
        {"__dict__": values, "__pydantic_extra__": None, "__pydantic_private__": None,
         "__pydantic_fields_set__": set(values) if fields_set is None else fields_set}
    )  # fmt: skip
    return snapshot
