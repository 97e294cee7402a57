"""cluster.yaml is a Ray cluster-launcher config that Ray itself accepts.

Two checks, both with Ray's own code and schema (no credentials, no cloud calls):
- the file as written against `ray/autoscaler/ray-schema.json` — this catches a required
  field dropped from the file that Ray's defaults would otherwise fill silently (a missing
  `cluster_name` becomes "default");
- what `ray up` does first: `prepare_config` (merge the provider's defaults, fill node-type
  bounds) then `validate_config` (the schema again, plus the head-type and worker-count
  rules).
Negative cases run on modified copies, so a validator that accepts anything fails here.
Then what the project needs from the file: every node installs the checkout it mounts and
exports a REDIS_URL the runtime's configuration accepts, and the head starts `recovery up`
after `ray start --head`.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # a Ray dependency; ships no stubs
import pytest
import ray.autoscaler
import yaml  # type: ignore[import-untyped]  # PyYAML (a Ray dependency) ships no stubs
from ray.autoscaler._private.util import prepare_config, validate_config

from actors.engine.config import load_config

CLUSTER_YAML = Path(__file__).resolve().parents[1] / "cluster.yaml"
RAY_SCHEMA = Path(ray.autoscaler.__file__).parent / "ray-schema.json"
INSTALL_STEPS = ("apt-get", "-m venv", "pip install")
Config = dict[str, Any]


def load_cluster() -> Config:
    config: Config = yaml.safe_load(CLUSTER_YAML.read_text(encoding="utf-8"))
    return config


def validate_as_ray_does(config: Config) -> None:
    """Ray's schema on the file as written, then `ray up`'s prepare-and-validate step."""
    schema = json.loads(RAY_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.validate(config, schema)
    validate_config(prepare_config(copy.deepcopy(config)))


def worker_type(config: Config) -> Config:
    workers = [
        spec
        for name, spec in config["available_node_types"].items()
        if name != config["head_node_type"]
    ]
    assert len(workers) == 1
    node_type: Config = workers[0]
    return node_type


def test_cluster_yaml_is_valid_for_ray_up() -> None:
    validate_as_ray_does(load_cluster())


def test_cluster_yaml_has_a_head_and_autoscaling_workers() -> None:
    config = load_cluster()
    prepared = prepare_config(copy.deepcopy(config))

    head = prepared["available_node_types"][prepared["head_node_type"]]
    assert head["max_workers"] == 0
    workers = worker_type(prepared)
    assert 0 <= workers["min_workers"] < workers["max_workers"] <= prepared["max_workers"]


def _without_cluster_name(config: Config) -> None:
    del config["cluster_name"]


def _without_provider_type(config: Config) -> None:
    del config["provider"]["type"]


def _worker_without_node_config(config: Config) -> None:
    del worker_type(config)["node_config"]


def _max_workers_as_text(config: Config) -> None:
    config["max_workers"] = "four"


def _setup_commands_as_one_string(config: Config) -> None:
    config["setup_commands"] = "pip install ~/provider-recovery"


def _unknown_top_level_field(config: Config) -> None:
    config["redis_url"] = "redis://db:6379/0"


def _head_type_not_declared(config: Config) -> None:
    config["head_node_type"] = "ray.head.missing"


def _more_min_workers_than_max(config: Config) -> None:
    worker_type(config)["min_workers"] = config["max_workers"] + 1


@pytest.mark.parametrize(
    ("break_config", "complaint"),
    [
        (_without_cluster_name, "'cluster_name' is a required property"),
        (_without_provider_type, "'type' is a required property"),
        (_worker_without_node_config, "'node_config' is a required property"),
        (_max_workers_as_text, "'four' is not of type 'integer'"),
        (_setup_commands_as_one_string, "is not of type 'array'"),
        (_unknown_top_level_field, "'redis_url' was unexpected"),
        (_head_type_not_declared, "must be one of `available_node_types`"),
        (_more_min_workers_than_max, "smaller than the sum of `min_workers`"),
    ],
)
def test_a_broken_copy_of_cluster_yaml_is_rejected_by_ray(
    break_config: Callable[[Config], None], complaint: str
) -> None:
    config = load_cluster()
    break_config(config)

    with pytest.raises((jsonschema.ValidationError, ValueError)) as raised:
        validate_as_ray_does(config)
    assert complaint in str(raised.value)


def mount_of_checkout(config: Config) -> str:
    """The remote folder the repository root (the folder `ray up` runs in) is copied to."""
    remotes = [remote for remote, local in config["file_mounts"].items() if local in {".", "./"}]
    assert len(remotes) == 1
    remote: str = remotes[0]
    return remote


def test_every_node_installs_the_mounted_checkout_with_pip() -> None:
    config = load_cluster()
    remote = mount_of_checkout(config)

    installs = [
        command
        for command in config["setup_commands"]
        if "pip install" in command and shlex.split(command)[-1] == remote
    ]
    assert installs, f"no setup command pip-installs {remote}"
    assert not config.get("worker_setup_commands")  # workers install exactly what heads do


def test_every_node_exports_a_redis_url_the_runtime_accepts(tmp_path: Path) -> None:
    config = load_cluster()
    setup = config["setup_commands"]
    assert any("export REDIS_URL=redis://" in command for command in setup)
    home = {"HOME": str(tmp_path), "PATH": os.environ["PATH"]}
    # Run the setup steps that write the environment (not apt or pip) in a scratch HOME,
    # then read what a later login shell of that node would see.
    for command in setup:
        if not any(step in command for step in INSTALL_STEPS):
            subprocess.run(["bash", "-c", command], env=home, check=True, timeout=30)
    shown = subprocess.run(
        ["bash", "-c", "source ~/.bashrc && env"],
        env=home, check=True, timeout=30, capture_output=True, text=True,
    )  # fmt: skip
    environ = dict(line.split("=", 1) for line in shown.stdout.splitlines() if "=" in line)

    settings = load_config(None, environ)

    assert settings.redis_url is not None
    assert settings.redis_url == environ["REDIS_URL"]
    assert settings.redis_url.startswith("redis://")
    assert f"{tmp_path}/recovery-venv/bin" in environ["PATH"].split(":")


def test_the_head_starts_the_runtime_after_ray_start_head() -> None:
    config = load_cluster()
    commands = config["head_start_ray_commands"]

    ray_head = next(i for i, c in enumerate(commands) if "ray start --head" in c)
    runtime = next(i for i, c in enumerate(commands) if "recovery up" in c)

    assert ray_head < runtime
    assert "--ray-address auto" in commands[runtime]
    assert all("recovery up" not in c for c in config["worker_start_ray_commands"])
    assert any("ray start --address=" in c for c in config["worker_start_ray_commands"])


def test_every_worker_node_runs_dispatch_workers_of_its_own_when_there_is_a_dispatcher() -> None:
    commands = load_cluster()["worker_start_ray_commands"]
    joins = next(i for i, c in enumerate(commands) if "ray start --address=" in c)
    workers = next(i for i, c in enumerate(commands) if "recovery workers" in c)
    assert joins < workers
    assert "RECOVERY_DISPATCHER" in commands[workers]
    assert "recovery-workers.pid" in commands[workers], "a re-run stops the previous ones"
