"""The errors of the profile store (actors/store/profile_store.py) and of the routes that
follow a stored profile.

Two of them say a stored profile cannot be decided from: ProfileNotFoundError (never
created, or deleted) and InvalidStoredProfileError (its stored document is not a
normalised v1 profile, or its stored version is no number). Both are a
ProfileConfigurationError, whose `detail` says what to do; a route that follows such a
profile stops with it (actors/routes/stored_profiles.py). The others refuse an edit:
ProfileExistsError, StaleProfileVersionError, ProfileEditDeniedError. Validation errors
of a document are policy's PolicyError (every error at once, addressed by field).
"""

from __future__ import annotations

from typing import Any

from actors.errors import RecoveryError

__all__ = [
    "InvalidStoredProfileError",
    "ProfileConfigurationError",
    "ProfileEditDeniedError",
    "ProfileExistsError",
    "ProfileNotFoundError",
    "ProfileNotReadError",
    "StaleProfileVersionError",
]


class ProfileConfigurationError(RecoveryError):
    """A stored profile that cannot be decided from; `detail` names it and says what to
    do (it becomes the reason of a route that follows it)."""

    def __init__(self, profile_id: str, detail: str) -> None:
        self.profile_id = profile_id
        self.detail = detail
        super().__init__(detail)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.profile_id, self.detail))


class ProfileNotFoundError(ProfileConfigurationError):
    """No profile `profile_id` is stored: never created, or deleted."""

    def __init__(self, profile_id: str, detail: str | None = None) -> None:
        super().__init__(
            profile_id,
            detail
            or f"profile {profile_id!r} does not exist (never created, or deleted): create it "
            "again, or start the route fresh with another profile",
        )


class InvalidStoredProfileError(ProfileConfigurationError):
    """The stored profile `profile_id` (at `version`, None when that is unreadable too) is
    not a normalised v1 profile: a legacy document, one written around the store, or
    damaged data. It never authorises work; an update through the store replaces it."""

    def __init__(self, profile_id: str, version: int | None, problem: str) -> None:
        self.version = version
        self.problem = problem
        at = "" if version is None else f" version {version}"
        super().__init__(
            profile_id,
            f"stored profile {profile_id!r}{at} is not a valid v1 profile ({problem}): write "
            "it again with the profile store's update, which validates and normalises it",
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.profile_id, self.version, self.problem))


class ProfileNotReadError(RecoveryError):
    """A route follows profile `profile_id` but the round did not read it: nothing is
    planned from a guess (the engine reads every profile its round's routes follow)."""

    def __init__(self, profile_id: str) -> None:
        self.profile_id = profile_id
        super().__init__(f"profile {profile_id!r} was not read for this decision; send it again")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.profile_id,))


class ProfileExistsError(RecoveryError):
    """A create of profile `profile_id`, which exists at `version`: update it instead."""

    def __init__(self, profile_id: str, version: int) -> None:
        self.profile_id = profile_id
        self.version = version
        super().__init__(
            f"profile {profile_id!r} exists (version {version}): update it with that version"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.profile_id, self.version))


class StaleProfileVersionError(RecoveryError):
    """An edit of profile `profile_id` expecting `expected`, while it is at `actual`: another
    edit came first. Nothing was written; read it again and re-apply the change."""

    def __init__(self, profile_id: str, expected: int, actual: int) -> None:
        self.profile_id = profile_id
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"profile {profile_id!r} is at version {actual}, not the expected {expected}: "
            "read it again and re-apply the change"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.profile_id, self.expected, self.actual))


class ProfileEditDeniedError(RecoveryError):
    """The authoriser did not allow `principal` to `action` (create, update, delete) profile
    `profile_id`; nothing was read or written."""

    def __init__(self, profile_id: str, action: str, principal: str | None) -> None:
        self.profile_id = profile_id
        self.action = action
        self.principal = principal
        shown = principal if principal is None or len(principal) <= 60 else principal[:59] + "…"
        who = "an anonymous caller" if shown is None else f"principal {shown!r}"
        super().__init__(f"{who} may not {action} profile {profile_id!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.profile_id, self.action, self.principal))
