"""Routes: the recovery logic of one orchestrator session, durable in Redis.

`RouteService` is the entry point (start, report_failure, report_success, the manual
actions, fire_due, snapshot, history). The logic itself is the pure `plan` function over
`RouteCommand` values; profiles are `DynamicProfile` or `ConcreteProfile`.
"""

from actors.route_batch import RouteLocks
from actors.route_commands import (
    CancelWait,
    Close,
    CompleteSwitch,
    FireDue,
    ReportFailure,
    ReportSuccess,
    Resume,
    RetryNow,
    RouteCommand,
    RouteContext,
    RouteSettings,
    SkipNow,
    Start,
    StartFresh,
    StopRoute,
    UpdateProfile,
)
from actors.route_decisions import Judgement, judge_failure
from actors.route_profiles import (
    ConcreteProfile,
    RouteCandidate,
    RouteProfile,
    candidates_of,
    first_eligible,
    next_eligible,
)
from actors.route_service import RouteService
from actors.route_transitions import plan

__all__ = [
    "CancelWait",
    "Close",
    "CompleteSwitch",
    "ConcreteProfile",
    "FireDue",
    "Judgement",
    "ReportFailure",
    "ReportSuccess",
    "Resume",
    "RetryNow",
    "RouteCandidate",
    "RouteCommand",
    "RouteContext",
    "RouteLocks",
    "RouteProfile",
    "RouteService",
    "RouteSettings",
    "SkipNow",
    "Start",
    "StartFresh",
    "StopRoute",
    "UpdateProfile",
    "candidates_of",
    "first_eligible",
    "judge_failure",
    "next_eligible",
    "plan",
]
