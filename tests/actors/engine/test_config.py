"""Runtime configuration: defaults, a TOML file, environment variables over it, flags over
both, and errors that name where a bad value came from, the setting and the value."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

from actors.engine.config import (
    CONFIG_ENV,
    DEFAULT_DATA_DIR,
    ENVIRONMENT,
    ConfigError,
    RuntimeConfig,
    load_config,
)
from actors.engine.settings import EngineSettings
from actors.hosting.runtime import RecoveryRuntime
from actors.routes.circuit_board import DEFAULT_PROBE_TTL_S
from actors.store.route_store import DEFAULT_EVENTS_MAXLEN
from circuits import CircuitSettings


def write_toml(folder: Path, text: str) -> Path:
    path = folder / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def config_error(path: Path | None, environ: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ)
    return caught.value


def test_without_file_or_environment_every_setting_has_its_default() -> None:
    config = load_config(None, {})
    assert config == RuntimeConfig()
    assert (config.redis_url, config.ray_address, config.dispatcher, config.queue) == (
        None, None, None, None,
    )  # fmt: skip
    assert (config.hosts, config.workers, config.key_prefix) == (2, 1, "recovery")
    assert config.data_dir == DEFAULT_DATA_DIR
    assert config.events_maxlen == DEFAULT_EVENTS_MAXLEN
    assert (config.closed_ttl_s, config.utility_ttl_s) == (7 * 86400, 86400)
    assert config.ray_dashboard is True


def test_every_setting_has_one_environment_variable_and_the_documented_ones_exist() -> None:
    assert sorted(ENVIRONMENT.values()) == sorted(RuntimeConfig.model_fields)
    documented = {
        "REDIS_URL", "RAY_ADDRESS", "RECOVERY_HOSTS", "RECOVERY_DISPATCHER",
        "RECOVERY_WORKERS", "RECOVERY_QUEUE", "RECOVERY_DATA_DIR", "RECOVERY_KEY_PREFIX",
        "RECOVERY_EVENTS_MAXLEN", "RECOVERY_CLOSED_TTL_S", "RECOVERY_UTILITY_TTL_S",
    }  # fmt: skip
    assert documented <= set(ENVIRONMENT)


def test_a_toml_file_sets_every_kind_of_value(tmp_path: Path) -> None:
    path = write_toml(
        tmp_path,
        """
        redis_url = "redis://db.internal:6379/2"
        ray_address = "ray://head:10001"
        hosts = 4
        dispatcher = "kandev.recovery:dispatch"
        workers = 3
        queue = "fleet-dispatch"
        worker_paths = ["/srv/kandev", "/srv/plugins"]
        data_dir = "/var/lib/recovery"
        key_prefix = "fleet-a"
        events_maxlen = 5000
        closed_ttl_s = 3600
        utility_ttl_s = 600
        ray_dashboard = false
        ray_cpus = 1
        """,
    )
    config = load_config(path, {})
    assert config.redis_url == "redis://db.internal:6379/2"
    assert config.ray_address == "ray://head:10001"
    assert (config.hosts, config.workers, config.queue) == (4, 3, "fleet-dispatch")
    assert config.dispatcher == "kandev.recovery:dispatch"
    assert config.worker_paths == ("/srv/kandev", "/srv/plugins")
    assert (config.data_dir, config.key_prefix) == (Path("/var/lib/recovery"), "fleet-a")
    assert (config.events_maxlen, config.closed_ttl_s, config.utility_ttl_s) == (5000, 3600, 600)
    assert (config.ray_dashboard, config.ray_cpus) == (False, 1)


def test_environment_variables_override_the_file(tmp_path: Path) -> None:
    path = write_toml(tmp_path, 'hosts = 4\nkey_prefix = "from-file"\nworkers = 2\n')
    environ = {"RECOVERY_HOSTS": "6", "RECOVERY_KEY_PREFIX": "from-env"}
    config = load_config(path, environ)
    assert (config.hosts, config.key_prefix, config.workers) == (6, "from-env", 2)


def test_flags_override_the_environment_and_unset_flags_change_nothing() -> None:
    config = load_config(
        None, {"RECOVERY_HOSTS": "6", "RECOVERY_WORKERS": "2"}, flags={"hosts": 3, "workers": None}
    )
    assert (config.hosts, config.workers) == (3, 2)


def test_recovery_config_names_the_file_when_no_path_is_given(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "hosts = 5\n")
    assert load_config(None, {CONFIG_ENV: str(path)}).hosts == 5


def test_an_explicit_path_wins_over_recovery_config(tmp_path: Path) -> None:
    chosen = write_toml(tmp_path, "hosts = 7\n")
    assert load_config(chosen, {CONFIG_ENV: str(tmp_path / "other.toml")}).hosts == 7


def test_an_empty_environment_variable_counts_as_unset(tmp_path: Path) -> None:
    path = write_toml(tmp_path, 'redis_url = "redis://file:6379"\n')
    config = load_config(path, {"REDIS_URL": "", "RECOVERY_HOSTS": "  "})
    assert (config.redis_url, config.hosts) == ("redis://file:6379", 2)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("true", True), ("YES", True), ("on", True), ("1", True),
     ("false", False), ("No", False), ("off", False), ("0", False)],
)  # fmt: skip
def test_boolean_variables_accept_the_usual_spellings(text: str, expected: bool) -> None:
    assert load_config(None, {"RECOVERY_RAY_DASHBOARD": text}).ray_dashboard is expected


def test_integer_variables_are_parsed_with_surrounding_blanks_ignored() -> None:
    environ = {"RECOVERY_EVENTS_MAXLEN": " 250 ", "RECOVERY_CLOSED_TTL_S": "60"}
    config = load_config(None, environ)
    assert (config.events_maxlen, config.closed_ttl_s) == (250, 60)


def test_worker_paths_from_the_environment_are_split_on_the_path_separator() -> None:
    config = load_config(None, {"RECOVERY_WORKER_PATHS": "/srv/a:/srv/b:"})
    assert config.worker_paths == ("/srv/a", "/srv/b")


INTEGER = "must be an integer >= 1, got "
DISPATCHER = "must be 'webhook' or an import path 'package.module:callable', got "


@pytest.mark.parametrize(
    ("variable", "value", "reason"),
    [
        ("RECOVERY_HOSTS", "x", INTEGER + "'x'"),
        ("RECOVERY_HOSTS", "0", INTEGER + "'0'"),
        ("RECOVERY_WORKERS", "-2", "must be an integer >= 0, got '-2'"),
        ("RECOVERY_EVENTS_MAXLEN", "1e5", INTEGER + "'1e5'"),
        ("RECOVERY_CLOSED_TTL_S", "7d", INTEGER + "'7d'"),
        ("RECOVERY_UTILITY_TTL_S", "²", INTEGER + "'²'"),
        ("RECOVERY_RAY_CPUS", "half", INTEGER + "'half'"),
        ("RECOVERY_RAY_DASHBOARD", "maybe", "must be a boolean"),
        ("RECOVERY_DISPATCHER", "kandev.dispatch", DISPATCHER + "'kandev.dispatch'"),
        ("RECOVERY_DISPATCHER", "kandev:2fast", DISPATCHER + "'kandev:2fast'"),
        ("RECOVERY_KEY_PREFIX", "bad prefix", "must match"),
        ("RECOVERY_KEY_PREFIX", "ends:", "got 'ends:'"),
        ("RECOVERY_QUEUE", "two words", "must match"),
        (
            "REDIS_URL",
            "http://db",
            "must be a redis://, rediss:// or unix:// URL, got 'http://db'",
        ),
    ],
)
def test_a_bad_environment_value_names_the_variable_and_the_value(
    variable: str, value: str, reason: str
) -> None:
    error = config_error(None, {variable: value})
    assert str(error).startswith(f"{variable}: ")
    assert reason in str(error)
    shown = "<withheld>" if variable == "REDIS_URL" else value  # a URL may hold a password
    assert (error.source, error.field, error.value) == (variable, ENVIRONMENT[variable], shown)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("hosts = 0", "hosts: must be an integer >= 1, got 0"),
        ("hosts = true", "hosts: must be an integer >= 1, got True"),
        ('workers = "many"', "workers: must be an integer >= 0, got 'many'"),
        ("ray_dashboard = 3", "ray_dashboard: must be a boolean"),
        ('dispatcher = "no-colon"', "dispatcher: must be 'webhook' or an import path"),
        ("data_dir = 5", "data_dir: must be a non-empty string, got 5"),
        ("worker_paths = [1, 2]", "worker_paths: must be a list of folder paths, got [1, 2]"),
        ("redis_url = { host = 'db' }", "redis_url: must be a non-empty string, got {'host'"),
    ],
)  # fmt: skip
def test_a_bad_file_value_names_the_file_the_setting_and_the_value(
    tmp_path: Path, line: str, message: str
) -> None:
    path = write_toml(tmp_path, line + "\n")
    error = config_error(path, {})
    assert str(error).startswith(f"{path}: ")
    assert message in str(error)
    assert error.source == str(path)


def test_a_bad_file_value_overridden_by_a_good_variable_is_never_used(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "hosts = 0\n")
    assert load_config(path, {"RECOVERY_HOSTS": "3"}).hosts == 3


def test_a_bad_flag_names_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"^--hosts: must be an integer >= 1, got 0$"):
        load_config(None, {}, flags={"hosts": 0})


def test_an_unknown_key_in_the_file_is_rejected_by_name(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "hots = 3\n")
    error = config_error(path, {})
    assert str(error).startswith(f"{path}: hots: unknown setting 'hots' (known: ")
    assert "hosts" in str(error)


def test_a_table_of_settings_is_not_a_setting(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "[retention]\nevents_maxlen = 10\n")
    assert "unknown setting 'retention'" in str(config_error(path, {}))


def test_a_file_that_is_not_toml_names_the_file(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "hosts = = 3\n")
    assert str(config_error(path, {})).startswith(f"{path}: not valid TOML: ")


def test_a_missing_file_named_by_recovery_config_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "absent.toml"
    error = config_error(None, {CONFIG_ENV: str(missing)})
    assert str(error) == f"{missing}: cannot read: No such file or directory"


def test_the_configuration_is_frozen_and_rejects_unknown_fields() -> None:
    config = RuntimeConfig()
    with pytest.raises(ValueError, match="frozen"):
        config.hosts = 3  # type: ignore[misc]  # the point: assignment is refused
    with pytest.raises(ValueError, match="extra"):
        RuntimeConfig(hots=3)  # type: ignore[call-arg]  # the point: an unknown field


def test_a_runtime_built_from_a_config_carries_every_setting() -> None:
    config = load_config(
        None,
        {
            "REDIS_URL": "redis://db:6379/1", "RAY_ADDRESS": "auto", "RECOVERY_HOSTS": "3",
            "RECOVERY_DISPATCHER": "kandev.recovery:dispatch", "RECOVERY_WORKERS": "2",
            "RECOVERY_QUEUE": "q1", "RECOVERY_WORKER_PATHS": "/srv/k",
            "RECOVERY_DATA_DIR": "/tmp/r", "RECOVERY_KEY_PREFIX": "p1",
            "RECOVERY_EVENTS_MAXLEN": "99", "RECOVERY_CLOSED_TTL_S": "98",
            "RECOVERY_UTILITY_TTL_S": "97", "RECOVERY_RAY_CPUS": "1",
            "RECOVERY_RAY_DASHBOARD": "no",
        },
    )  # fmt: skip
    runtime = RecoveryRuntime.from_config(config)
    assert (runtime.redis_url, runtime.ray_address) == ("redis://db:6379/1", "auto")
    assert (runtime.host_count, runtime.worker_count, runtime.queue) == (3, 2, "q1")
    assert runtime.dispatcher == "kandev.recovery:dispatch"
    assert (runtime.worker_paths, runtime.data_dir) == (("/srv/k",), Path("/tmp/r"))
    assert runtime.key_prefix == "p1"
    assert (runtime.events_maxlen, runtime.closed_ttl_s, runtime.utility_ttl_s) == (99, 98, 97)
    assert (runtime.ray_cpus, runtime.ray_dashboard) == (1, False)


def test_a_runtime_from_the_default_config_uses_the_prefixed_dispatch_queue() -> None:
    runtime = RecoveryRuntime.from_config(load_config(None, {"RECOVERY_KEY_PREFIX": "p2"}))
    assert runtime.queue == "p2-dispatch"


CIRCUIT_ENV = {
    "RECOVERY_INSTALLATION_KEY": "install-7",
    "RECOVERY_CIRCUIT_TRANSIENT_THRESHOLD": "5",
    "RECOVERY_CIRCUIT_TRANSIENT_WINDOW_S": "30.5",
    "RECOVERY_CIRCUIT_MIN_DISTINCT_ROUTES": "3",
    "RECOVERY_CIRCUIT_INITIAL_BACKOFF_S": "10",
    "RECOVERY_CIRCUIT_MAX_BACKOFF_S": "600",
    "RECOVERY_CIRCUIT_PROBE_TTL_S": "45",
}


def test_circuit_settings_default_to_the_designed_thresholds_and_timings() -> None:
    config = load_config(None, {})
    assert config.circuit_settings() == CircuitSettings()
    assert config.circuit_probe_ttl_s == DEFAULT_PROBE_TTL_S
    assert config.installation_key is None


def test_circuit_settings_come_from_the_file_and_the_environment_over_it(tmp_path: Path) -> None:
    path = write_toml(
        tmp_path,
        """
        installation_key = "from-file"
        circuit_transient_threshold = 4
        circuit_transient_window_s = 90
        circuit_min_distinct_routes = 1
        circuit_initial_backoff_s = 5.5
        circuit_max_backoff_s = 120
        circuit_probe_ttl_s = 60
        """,
    )
    from_file = load_config(path, {})
    assert from_file.installation_key == "from-file"
    assert from_file.circuit_settings() == CircuitSettings(
        transient_threshold=4, transient_window_s=90, min_distinct_routes=1,
        initial_backoff_s=5.5, max_backoff_s=120,
    )  # fmt: skip
    assert from_file.circuit_probe_ttl_s == 60
    overridden = load_config(path, CIRCUIT_ENV)
    assert overridden.installation_key == "install-7"
    assert (overridden.circuit_transient_threshold, overridden.circuit_max_backoff_s) == (5, 600)
    assert overridden.circuit_probe_ttl_s == 45


def test_the_installation_key_is_never_shown_in_the_configuration_repr() -> None:
    config = load_config(None, {"RECOVERY_INSTALLATION_KEY": "very-secret-key"})
    assert config.installation_key == "very-secret-key"
    assert "very-secret-key" not in repr(config)


@pytest.mark.parametrize(
    ("variable", "value", "reason"),
    [
        ("RECOVERY_CIRCUIT_TRANSIENT_THRESHOLD", "0", INTEGER + "'0'"),
        ("RECOVERY_CIRCUIT_MIN_DISTINCT_ROUTES", "two", INTEGER + "'two'"),
        ("RECOVERY_CIRCUIT_TRANSIENT_WINDOW_S", "soon", "must be a number of seconds > 0"),
        ("RECOVERY_CIRCUIT_INITIAL_BACKOFF_S", "-1", "must be a number of seconds > 0, got '-1'"),
        ("RECOVERY_CIRCUIT_MAX_BACKOFF_S", "inf", "must be a number of seconds > 0, got 'inf'"),
        ("RECOVERY_CIRCUIT_PROBE_TTL_S", "0", "must be a number of seconds > 0, got '0'"),
        ("RECOVERY_CIRCUIT_TRANSIENT_THRESHOLD", "5000", "less than or equal to 1000"),
        ("RECOVERY_CIRCUIT_TRANSIENT_WINDOW_S", "100000", "less than or equal to 86400"),
        ("RECOVERY_CIRCUIT_MAX_BACKOFF_S", "30", "max_backoff_s 30.0 is below initial_backoff_s"),
    ],
)
def test_a_bad_circuit_variable_names_the_variable_the_setting_and_the_value(
    variable: str, value: str, reason: str
) -> None:
    error = config_error(None, {variable: value})
    assert str(error).startswith(f"{variable}: ")
    assert reason in str(error)
    assert (error.source, error.field, error.value) == (variable, ENVIRONMENT[variable], value)


def test_backoffs_out_of_order_in_a_file_name_the_file_and_the_cap(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "circuit_initial_backoff_s = 900\ncircuit_max_backoff_s = 300\n")
    error = config_error(path, {})
    assert str(error).startswith(f"{path}: circuit_max_backoff_s: ")
    assert (error.field, error.value) == ("circuit_max_backoff_s", 300)


def test_a_runtime_from_a_config_carries_the_circuit_settings_to_hosts_and_workers() -> None:
    config = load_config(None, CIRCUIT_ENV)
    runtime = RecoveryRuntime.from_config(config)
    assert runtime.installation_key == "install-7"
    assert runtime.circuit_settings == config.circuit_settings()
    assert runtime.probe_ttl_s == 45
    handed = EngineSettings.from_environment(runtime._worker_env())
    assert handed == runtime.settings == config.engine_settings()
    assert (handed.installation_key, handed.probe_ttl_s) == ("install-7", 45)
    assert handed.circuit_settings == config.circuit_settings()
    assert "install-7" not in repr(runtime)
    assert "install-7" not in repr(runtime.settings)


def test_a_refused_redis_url_is_shown_masked_never_with_its_password() -> None:
    error = config_error(None, {"REDIS_URL": "http://user:hunter2pw@db:6379/0"})
    assert "got 'http://user:***@db:6379/0'" in str(error)
    assert "hunter2pw" not in str(error)
    assert "hunter2pw" not in repr(error.args)
    assert error.value == "<withheld>"
    assert "hunter2pw" not in repr(pickle.loads(pickle.dumps(error)).__dict__)


SECONDS_1_TO_600 = "must be a number of seconds from 1 to 600, got "


def test_the_dispatch_timeout_defaults_to_a_minute_and_reaches_the_hosts_and_workers(
    tmp_path: Path,
) -> None:
    assert load_config(None, {}).dispatch_timeout_s == 60
    from_file = load_config(write_toml(tmp_path, "dispatch_timeout_s = 90\n"), {})
    assert from_file.dispatch_timeout_s == 90
    config = load_config(None, {"RECOVERY_DISPATCH_TIMEOUT_S": "12.5"})
    runtime = RecoveryRuntime.from_config(config)
    assert runtime.dispatch_timeout_s == 12.5
    handed = EngineSettings.from_environment(runtime._worker_env())
    assert handed.dispatch_timeout_s == runtime.settings.dispatch_timeout_s == 12.5
    assert handed == config.engine_settings()


@pytest.mark.parametrize("value", ["0", "0.5", "601", "-3", "nan", "inf", "1m", "true"])
def test_a_dispatch_timeout_out_of_bounds_names_the_variable_and_the_value(value: str) -> None:
    error = config_error(None, {"RECOVERY_DISPATCH_TIMEOUT_S": value})
    assert str(error) == f"RECOVERY_DISPATCH_TIMEOUT_S: {SECONDS_1_TO_600}{value!r}"
    assert (error.field, error.value) == ("dispatch_timeout_s", value)


@pytest.mark.parametrize("line", ["dispatch_timeout_s = 0", "dispatch_timeout_s = true"])
def test_a_dispatch_timeout_out_of_bounds_in_a_file_names_the_file_and_the_setting(
    tmp_path: Path, line: str
) -> None:
    path = write_toml(tmp_path, line + "\n")
    shown = {"dispatch_timeout_s = 0": "0", "dispatch_timeout_s = true": "True"}[line]
    assert str(config_error(path, {})) == f"{path}: dispatch_timeout_s: {SECONDS_1_TO_600}{shown}"


@pytest.mark.parametrize("value", [0, 0.9, 601, float("nan"), True, "60"])
def test_a_runtime_or_settings_value_refuses_a_dispatch_timeout_out_of_bounds(
    value: object,
) -> None:
    message = f"dispatch_timeout_s must be between 1 and 600 seconds, got {value!r}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        EngineSettings(dispatch_timeout_s=value)  # type: ignore[arg-type]  # the point
    with pytest.raises(ValueError, match="dispatch_timeout_s must be between 1 and 600"):
        RecoveryRuntime(dispatch_timeout_s=value)  # type: ignore[arg-type]  # the point
