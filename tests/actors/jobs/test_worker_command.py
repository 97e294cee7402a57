"""A supervised rq worker's command line carries no Redis URL (actors/jobs/workers.py)."""

from __future__ import annotations

from actors.jobs.workers import URL_ENV, worker_command, worker_process_env


def test_a_worker_gets_the_url_in_its_environment_never_its_command_line() -> None:
    url = "redis://:s3cr3t@db:6379/0"
    command = worker_command("q", "w-1")
    assert not any("s3cr3t" in part or "redis://" in part for part in command)
    assert "--url" not in command
    assert worker_process_env({"PATH": "/bin"}, url) == {"PATH": "/bin", URL_ENV: url}
