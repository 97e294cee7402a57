"""A wheel built from the checkout works outside it.

The wheel is built from a copy of the checkout (so the build leaves nothing behind here
and no stale `build/` can slip files in), installed with its dependencies into a fresh
venv in a temporary folder, and run from a folder outside the checkout with no
PYTHONPATH: `recovery --version`, `recovery classify`, `recovery corpus` and a small
`recovery demo` (an embedded Redis and a local Ray: the one part marked `integration` for
Redis and Ray; the venv tests share the mark because they share its slow venv). The
install needs the package index or pip's cache.

Beside them, two quick checks of the same behaviour in the checkout itself.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from actors.cli.main import main
from actors.jobs.workers import PROJECT_ROOT, worker_env

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("catalogue", "policy", "circuits", "actors")
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
VERSION = PROJECT["version"]
# Left out of the copy the wheel is built from: what a build makes or a checkout caches.
NOT_SOURCE = (".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache")
BUILD_TIMEOUT_S = 600.0  # guards against a hang: a build takes ~10 s, an install ~25 s
COMMAND_TIMEOUT_S = 120.0
DEMO_TIMEOUT_S = 600.0  # a small demo takes ~30 s here
DEMO_STOP_TIMEOUT_S = 60.0

PROBE = """
import json, sysconfig
import actors, catalogue, circuits, policy
from actors.jobs.workers import PROJECT_ROOT, worker_env
from catalogue.corpus import dev_corpus
print(json.dumps({
    "purelib": sysconfig.get_paths()["purelib"],
    "modules": {m.__name__: m.__file__ for m in (actors, catalogue, policy, circuits)},
    "project_root": str(PROJECT_ROOT),
    "worker_pythonpath": worker_env().get("PYTHONPATH"),
    "corpus": str(dev_corpus()),
    "corpus_is_file": dev_corpus().is_file(),
}))
"""


@dataclass(frozen=True)
class Installed:
    wheel: Path
    source: Path
    venv: Path
    cwd: Path  # outside the checkout
    env: Mapping[str, str]

    def run(
        self, *args: str, stdin: str = "", timeout: float = COMMAND_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args, input=stdin, capture_output=True, text=True, cwd=self.cwd, env=self.env,
            timeout=timeout, check=False,
        )  # fmt: skip

    def recovery(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return self.run(str(self.venv / "bin" / "recovery"), *args, stdin=stdin)


def clean_env() -> dict[str, str]:
    """The environment without anything that points at the checkout or at the test
    session's Redis and Ray, so the commands find only what the venv holds."""
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("RECOVERY_", "RAY_", "PYTHON", "VIRTUAL_ENV"))
        and name != "REDIS_URL"
    }


def checked(command: list[str], **kwargs: Any) -> None:
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False, **kwargs
    )
    assert result.returncode == 0, f"{command[:4]}: {result.stderr[-3000:]}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    source, wheels, venv, cwd = base / "source", base / "wheels", base / "venv", base / "run"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    cwd.mkdir()
    env = clean_env()
    pip = ["-m", "pip", "--disable-pip-version-check", "--no-input", "--quiet"]
    checked([sys.executable, *pip, "wheel", "--no-deps", "-w", str(wheels), str(source)], env=env)
    (wheel,) = wheels.glob("provider_recovery-*.whl")
    checked([sys.executable, "-m", "venv", str(venv)], env=env)
    checked([str(venv / "bin" / "python"), *pip, "install", str(wheel)], env=env, cwd=cwd)
    return Installed(wheel, source, venv, cwd, env)


# -- in the checkout ----------------------------------------------------------------------


def test_version_option_prints_the_distribution_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"recovery {VERSION}\n"


def test_workers_started_from_a_checkout_get_it_on_their_import_path() -> None:
    assert PROJECT_ROOT == ROOT
    assert worker_env()["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)


# -- from the wheel -----------------------------------------------------------------------


@pytest.mark.integration
def test_the_wheel_holds_every_module_and_data_file_and_the_licence(
    installed: Installed,
) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    sources = {
        path.relative_to(installed.source).as_posix()
        for package in PACKAGES
        for path in (installed.source / package).rglob("*")
        if path.is_file() and path.suffix != ".md"  # notes for contributors stay here
    }
    assert sources - names == set()
    for data in ("catalogue/data/real_errors.dev.jsonl", "actors/store/lua/transition.lua",
                 "catalogue/rules/anthropic.toml", "actors/demo/captures/clean.jsonl",
                 "catalogue/acp/observer.py", "actors/py.typed",
                 "actors/api/console/templates/editor.html",
                 "actors/api/console/static/editor.js"):  # fmt: skip
        assert data in names
    info = f"provider_recovery-{VERSION}.dist-info"
    assert f"{info}/licenses/LICENSE" in names
    metadata = zipfile.ZipFile(installed.wheel).read(f"{info}/METADATA").decode()
    assert "License-Expression: MIT" in metadata.splitlines()


@pytest.mark.integration
def test_the_packages_import_from_the_venv_and_not_from_the_checkout(
    installed: Installed,
) -> None:
    result = installed.run(str(installed.venv / "bin" / "python"), "-c", PROBE)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    purelib = Path(found["purelib"]).resolve()
    assert purelib.is_relative_to(installed.venv.resolve())
    for name, file in found["modules"].items():
        assert Path(file).resolve().is_relative_to(purelib), name
        assert not Path(file).resolve().is_relative_to(ROOT), name
    # rq workers import actors from site-packages as is, with no PYTHONPATH of ours
    assert Path(found["project_root"]) == purelib
    assert found["worker_pythonpath"] is None
    assert found["corpus_is_file"]
    assert Path(found["corpus"]).resolve().is_relative_to(purelib)


@pytest.mark.integration
def test_recovery_version_names_the_installed_version(installed: Installed) -> None:
    result = installed.recovery("--version")
    assert (result.returncode, result.stdout) == (0, f"recovery {VERSION}\n"), result.stderr


@pytest.mark.integration
def test_recovery_classify_answers_an_evidence_line(installed: Installed) -> None:
    line = {"kind": "stderr", "agent": "claude-acp", "text": "API Error: 529 Overloaded"}
    result = installed.recovery("classify", stdin=json.dumps(line) + "\n")
    assert result.returncode == 0, result.stderr
    (output,) = result.stdout.splitlines()
    verdict = json.loads(output)
    assert (verdict["code"], verdict["error_class"]) == ("provider_overloaded", "transient")
    assert verdict["catalogue_version"].startswith("catalogue.")
    assert verdict["rule"]


@pytest.mark.integration
def test_recovery_corpus_reads_the_corpus_the_wheel_ships(installed: Installed) -> None:
    result = installed.recovery("corpus")
    assert result.returncode == 0, result.stderr
    assert "(157 rows)" in result.stdout
    assert "accuracy: " in result.stdout


@pytest.mark.integration
def test_a_small_recovery_demo_runs_from_the_wheel(installed: Installed) -> None:
    command = [
        str(installed.venv / "bin" / "recovery"), "demo", "--sessions", "8", "--seed", "3",
        "--duration", "8", "--drain-timeout", "10", "--workers", "1", "--json",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=installed.cwd, env=installed.env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=DEMO_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)  # the demo drains and stops what it started
        process.communicate(timeout=DEMO_STOP_TIMEOUT_S)
        raise
    assert process.returncode == 0, stderr[-3000:]
    (line,) = stdout.splitlines()
    report = json.loads(line)
    assert report["ok"] is True, report["invariants"]
    assert report["run"]["sessions"] == 8
    # the corpus came from the wheel, and the rq workers (the venv's python, no PYTHONPATH)
    # imported the demo dispatcher from it
    assert Path(report["run"]["corpus"]).resolve().is_relative_to(installed.venv.resolve())
    assert report["dispatch"]["dispatches"] >= 1, report["dispatch"]
