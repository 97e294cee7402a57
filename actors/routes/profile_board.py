"""The stored profiles a round's routes follow, as the shell read them before planning
(RouteContext.profiles; actors/routes/stored_profiles.py says how the planner uses them).
Pure values: the shell reads (actors/engine/batch.py), the planner only looks them up."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import JsonValue

from actors.routes.profile_errors import ProfileConfigurationError, ProfileNotReadError
from policy import DynamicProfile


@dataclass(frozen=True, slots=True)
class ProfileRevision:
    """One version of a stored profile, as a round read it. `document`: the profile's
    JSON dump when the reader made it once for every route of the round (JSON nothing
    mutates, so the routes share it); None: made on demand."""

    profile_id: str
    version: int
    profile: DynamicProfile
    document: JsonValue = field(default=None, compare=False, repr=False)

    def copy(self) -> JsonValue:
        """The profile as a route following it stores its copy."""
        if self.document is not None:
            return self.document
        dumped: JsonValue = self.profile.model_dump(mode="json")
        return dumped


ProfileRead = ProfileRevision | ProfileConfigurationError
"""A stored profile as read: its current revision, or why it cannot be decided from."""


@dataclass(frozen=True, slots=True)
class ProfileBoard:
    """The stored profiles a round's routes follow, by id, read before planning."""

    read: Mapping[str, ProfileRead] = field(default_factory=dict)

    def revision(self, profile_id: str) -> ProfileRevision:
        """The current revision of `profile_id`; raises its ProfileConfigurationError
        when it cannot be decided from, ProfileNotReadError when it was not read."""
        found = self.read.get(profile_id)
        if found is None:
            raise ProfileNotReadError(profile_id)
        if isinstance(found, ProfileConfigurationError):
            raise copy.copy(found)  # a fresh error each time: raising sets its traceback
        return found
