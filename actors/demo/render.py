"""The demo report for a person: the same figures as `--json`, as plain lines."""

from __future__ import annotations

from typing import Any


def _spread(figures: dict[str, Any]) -> str:
    if not figures["count"]:
        return "none measured"
    return f"p50 {figures['p50']} ms, p99 {figures['p99']} ms, max {figures['max']} ms " + (
        f"({figures['count']})"
    )


def _pairs(counts: dict[str, Any]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counts.items()) or "none"


def report_lines(report: dict[str, Any]) -> list[str]:
    run, dispatch, schedules = report["run"], report["dispatch"], report["schedules"]
    invariants = report["invariants"]
    lines = [
        f"recovery demo: {run['sessions']} sessions, seed {run['seed']}, "
        f"{run['hosts']} route hosts, {run['workers']} rq workers",
        f"time: startup {run.get('startup_s')} s, driving {run['driving_s']} s, drain "
        f"{run['drain_s']} s, wall {run.get('wall_s')} s",
        f"routes: {_pairs(report['routes']['by_state'])}",
        "",
        "decisions by class and code (from the route histories):",
    ]
    for row in report["decisions"]["by_class_and_code"]:
        lines.append(f"  {row['decision']:<15}{row['class'] or '-':<14}{row['code'] or '-':<26}"
                     f"{row['count']:>6}")  # fmt: skip
    lines += [
        f"retries: {report['retries']}   reset waits: {report['reset_waits']}   "
        f"skips: {report['skips']}   stops: {report['stops']}   "
        f"action_required: {report['action_required']}",
        f"history records: {_pairs(report['decisions']['history_records'])}",
        f"probes: {report['circuits']['probes']} ({report['circuits']['circuits']} circuits)",
        f"dispatches: {dispatch['dispatches']} (dispatcher log; "
        f"ledger {_pairs(dispatch['ledger'])})",
        f"dispatch latency after the deadline transition: {_spread(dispatch['latency_ms'])}",
        f"timer lateness: {_spread(report['timer_lateness_ms'])}",
        f"schedules: {schedules['written']} written: {schedules['fired']} fired, "
        f"{schedules['rescheduled']} rescheduled, {schedules['cancelled']} cancelled, "
        f"{schedules['pending']} pending",
        f"left: {schedules['pending']} schedules pending, {run['sessions_unfinished']} "
        f"sessions unfinished, {run['session_errors']} session errors",
        "",
        f"double dispatches: {invariants['double_dispatches']}",
        f"schedules lost: {invariants['schedules_lost']}",
        f"unexplained dispatches: {invariants['unexplained_dispatches']}",
        f"notices written: {report['notices']['written']} (retired {report['notices']['retired']})",
        f"notices leaked: {invariants['notices_leaked']}",
    ]
    lines += [f"  lost: {name}" for name in schedules["lost"]]
    lines += [f"  doubled: {name}" for name in dispatch["doubled"]]
    lines += [f"  session error: {error}" for error in run["errors"]]
    lines += [f"note: {note}" for note in run["notes"]]
    lines.append("ok" if report["ok"] else "FAILED: an invariant is violated")
    return lines
