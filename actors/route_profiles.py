"""Compatibility: `actors.route_profiles` moved to `actors.routes.profiles`; this path
keeps working.

Kept for code written against the flat layout.
"""

from actors.routes.profiles import (
    PROFILE_CACHE_SIZE,
    BuiltinPolicyName,
    ConcreteProfile,
    RouteCandidate,
    RouteProfile,
    candidates_of,
    find_candidate,
    first_eligible,
    next_eligible,
    profile_from_json,
    profile_json,
)

__all__ = [
    "PROFILE_CACHE_SIZE",
    "BuiltinPolicyName",
    "ConcreteProfile",
    "RouteCandidate",
    "RouteProfile",
    "candidates_of",
    "find_candidate",
    "first_eligible",
    "next_eligible",
    "profile_from_json",
    "profile_json",
]
