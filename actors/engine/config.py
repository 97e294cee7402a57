"""The runtime's configuration: defaults, then an optional TOML file, then the environment.

`load_config(path, environ)` reads the TOML file at `path` (when `path` is None, the file
`RECOVERY_CONFIG` names, if set; no file at all is fine), then lets environment variables
override it, then `flags` (the command line) override both. An empty environment
variable counts as unset. Every setting, with its TOML key and environment variable:

    TOML key        environment variable       default
    redis_url       REDIS_URL                  none: an embedded Redis in data_dir
    ray_address     RAY_ADDRESS                none: a local Ray started for the runtime
    ray_cpus        RECOVERY_RAY_CPUS          all cores (only for a local Ray)
    ray_dashboard   RECOVERY_RAY_DASHBOARD     true (only for a local Ray)
    ray_host        RECOVERY_RAY_HOST          127.0.0.1: the interface a local Ray's
                                               node and dashboard bind to
    hosts           RECOVERY_HOSTS             2 route host actors
    circuit_hosts   RECOVERY_CIRCUIT_HOSTS     1 circuit host actor (0 to 16; 0: the
                                               route hosts write circuits themselves)
    dispatcher      RECOVERY_DISPATCHER        none: no dispatch ("module:callable", or
                                               "webhook": the built-in webhook dispatcher)
    workers         RECOVERY_WORKERS           1 rq worker process (with a dispatcher;
                                               0: none here, `recovery workers` elsewhere)
    queue           RECOVERY_QUEUE             <key_prefix>-dispatch
    dispatch_timeout_s
                    RECOVERY_DISPATCH_TIMEOUT_S             60 (1 to 600 s a dispatch job
                                                            waits for the dispatcher: past
                                                            it, ambiguous: action_required)
    transcript      RECOVERY_TRANSCRIPT        none: the Redis transcript ("module:factory"
                                               of the orchestrator's TranscriptPort)
    authoriser      RECOVERY_AUTHORISER        none: the task recorded at route start
                                               ("module:factory" of an Authoriser)
    transcript_maxlen
                    RECOVERY_TRANSCRIPT_MAXLEN              100000 (transcript stream MAXLEN)
    worker_paths    RECOVERY_WORKER_PATHS      none (import paths for the workers;
                                               a TOML list, or os.pathsep-separated)
    data_dir        RECOVERY_DATA_DIR          ~/.local/state/provider-recovery
    key_prefix      RECOVERY_KEY_PREFIX        recovery
    events_maxlen   RECOVERY_EVENTS_MAXLEN     100000 (events stream MAXLEN, approximate)
    closed_ttl_s    RECOVERY_CLOSED_TTL_S      604800 (7 days: expiry of closed routes)
    utility_ttl_s   RECOVERY_UTILITY_TTL_S     86400 (1 day: expiry of utility routes)
    installation_key
                    RECOVERY_INSTALLATION_KEY  a built-in key (the HMAC key of circuit
                                               credential fingerprints: every process
                                               of one installation must share it)
    circuit_transient_threshold
                    RECOVERY_CIRCUIT_TRANSIENT_THRESHOLD    3 transient failures open
    circuit_transient_window_s
                    RECOVERY_CIRCUIT_TRANSIENT_WINDOW_S     60 (seconds they count within)
    circuit_min_distinct_routes
                    RECOVERY_CIRCUIT_MIN_DISTINCT_ROUTES    2 (routes they come from)
    circuit_initial_backoff_s
                    RECOVERY_CIRCUIT_INITIAL_BACKOFF_S      60 (first open period; doubles)
    circuit_max_backoff_s
                    RECOVERY_CIRCUIT_MAX_BACKOFF_S          3600 (the backoff's cap)
    circuit_probe_ttl_s
                    RECOVERY_CIRCUIT_PROBE_TTL_S            300 (a probe lease's lifetime)
    webhook_url     RECOVERY_WEBHOOK_URL       none (with dispatcher "webhook": where each
                                               due attempt is POSTed; http(s), no credentials)
    webhook_secret  RECOVERY_WEBHOOK_SECRET    none (the HMAC-SHA256 key of its signature,
                                               >= 16 characters; never shown or recorded)
    webhook_timeout_s
                    RECOVERY_WEBHOOK_TIMEOUT_S              10 (0.1 to 600 s for the connect and
                                                            for the answer; below the dispatch
                                                            timeout)
    api_address     RECOVERY_API_ADDRESS       127.0.0.1:8484: where `recovery up` serves the
                                               HTTP API (HOST:PORT, [IPV6]:PORT; port 0:
                                               any free one; `off`: no API)
    api_token       RECOVERY_API_TOKEN         none: a bearer token the API requires (its
                                               principal: `api`); at least 16 characters
    api_token_file  RECOVERY_API_TOKEN_FILE    none: a file of `<principal> <token>` lines
                                               (actors/api/auth.py); without a token the
                                               API serves loopback addresses only

The circuit settings are those of circuits.CircuitSettings (docs/DESIGN.md §3); the backoff
cap must not be below the initial backoff (reported on circuit_max_backoff_s).

Booleans accept true/false, yes/no, on/off, 1/0 (any case) from the environment.
A bad value raises ConfigError naming its source (the file, the variable or the flag),
the setting and the value: `RECOVERY_HOSTS: must be an integer >= 1, got 'x'`,
`config.toml: hosts: must be an integer >= 1, got 0`; a TOML key that is not a setting
is rejected by name. An import path's shape is checked (`package.module:callable`), never
imported here: the rq workers import it.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from actors.engine.config_values import (
    API_OFF,
    DEFAULT_API_ADDRESS,
    ApiAddress,
    PositiveInt,
    PositiveSeconds,
    parse_api_address,
    parse_boolean,
    parse_circuit_hosts,
    parse_count,
    parse_dispatch_timeout,
    parse_dispatcher,
    parse_import_path,
    parse_key_prefix,
    parse_optional,
    parse_path,
    parse_paths,
    parse_positive_int,
    parse_queue,
    parse_redis_url,
    parse_text,
    parse_webhook_secret,
    parse_webhook_timeout,
    parse_webhook_url,
)
from actors.engine.settings import (
    DEFAULT_CIRCUIT_HOSTS,
    DEFAULT_DISPATCH_TIMEOUT_S,
    DEFAULT_WEBHOOK_TIMEOUT_S,
    EngineSettings,
)
from actors.errors import RecoveryError
from actors.keys import DEFAULT_PREFIX
from actors.routes.circuit_board import DEFAULT_PROBE_TTL_S
from actors.routes.commands import RouteSettings
from actors.store.redis_transcript import DEFAULT_TRANSCRIPT_MAXLEN
from actors.store.route_store import DEFAULT_EVENTS_MAXLEN
from circuits import CircuitSettings

CONFIG_ENV: Final = "RECOVERY_CONFIG"
DEFAULT_HOSTS: Final = 2
DEFAULT_WORKER_COUNT: Final = 1
DEFAULT_DATA_DIR: Final = Path("~/.local/state/provider-recovery")
_ROUTE_DEFAULTS: Final = RouteSettings()
_CIRCUIT_DEFAULTS: Final = CircuitSettings()


SECRET_SETTINGS: Final = frozenset({"redis_url", "installation_key", "webhook_secret", "api_token"})
"""Settings whose value may hold a secret: a refusal never carries it (WITHHELD instead)."""
WITHHELD: Final = "<withheld>"


class ConfigError(RecoveryError):
    """A setting that cannot be used: `source` is the file, environment variable or flag
    it came from, `field` the setting (None for the file as a whole), `value` the value."""

    def __init__(self, source: str, field: str | None, value: object, reason: str) -> None:
        self.source = source
        self.field = field
        self.value = value
        self.reason = reason
        # A variable or a flag names its setting already; a file does not.
        names_field = field is None or source in ENVIRONMENT or source.startswith("--")
        where = source if names_field else f"{source}: {field}"
        super().__init__(f"{where}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.source, self.field, self.value, self.reason))


class RuntimeConfig(BaseModel):
    """Every setting of a runtime (see the module docstring for sources and defaults)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    redis_url: Annotated[str | None, BeforeValidator(parse_optional(parse_redis_url))] = Field(
        default=None,
        repr=False,  # it may hold a password
    )
    ray_address: Annotated[str | None, BeforeValidator(parse_optional(parse_text))] = None
    ray_cpus: Annotated[int | None, BeforeValidator(parse_optional(parse_positive_int))] = None
    ray_dashboard: Annotated[bool, BeforeValidator(parse_boolean)] = True
    ray_host: Annotated[str, BeforeValidator(parse_text)] = "127.0.0.1"
    hosts: PositiveInt = DEFAULT_HOSTS
    circuit_hosts: Annotated[int, BeforeValidator(parse_circuit_hosts)] = DEFAULT_CIRCUIT_HOSTS
    dispatcher: Annotated[str | None, BeforeValidator(parse_optional(parse_dispatcher))] = None
    workers: Annotated[int, BeforeValidator(parse_count)] = DEFAULT_WORKER_COUNT
    queue: Annotated[str | None, BeforeValidator(parse_optional(parse_queue))] = None
    dispatch_timeout_s: Annotated[float, BeforeValidator(parse_dispatch_timeout)] = (
        DEFAULT_DISPATCH_TIMEOUT_S
    )
    transcript: Annotated[str | None, BeforeValidator(parse_optional(parse_import_path))] = None
    authoriser: Annotated[str | None, BeforeValidator(parse_optional(parse_import_path))] = None
    transcript_maxlen: PositiveInt = DEFAULT_TRANSCRIPT_MAXLEN
    worker_paths: Annotated[tuple[str, ...], BeforeValidator(parse_paths)] = ()
    data_dir: Annotated[Path, BeforeValidator(parse_path)] = DEFAULT_DATA_DIR
    key_prefix: Annotated[str, BeforeValidator(parse_key_prefix)] = DEFAULT_PREFIX
    events_maxlen: PositiveInt = DEFAULT_EVENTS_MAXLEN
    closed_ttl_s: PositiveInt = _ROUTE_DEFAULTS.closed_ttl_s
    utility_ttl_s: PositiveInt = _ROUTE_DEFAULTS.utility_ttl_s
    installation_key: Annotated[str | None, BeforeValidator(parse_optional(parse_text))] = Field(
        default=None, repr=False
    )
    circuit_transient_threshold: PositiveInt = _CIRCUIT_DEFAULTS.transient_threshold
    circuit_transient_window_s: PositiveSeconds = _CIRCUIT_DEFAULTS.transient_window_s
    circuit_min_distinct_routes: PositiveInt = _CIRCUIT_DEFAULTS.min_distinct_routes
    circuit_initial_backoff_s: PositiveSeconds = _CIRCUIT_DEFAULTS.initial_backoff_s
    circuit_max_backoff_s: PositiveSeconds = _CIRCUIT_DEFAULTS.max_backoff_s
    circuit_probe_ttl_s: PositiveSeconds = DEFAULT_PROBE_TTL_S
    webhook_url: Annotated[str | None, BeforeValidator(parse_optional(parse_webhook_url))] = None
    webhook_secret: Annotated[str | None, BeforeValidator(parse_optional(parse_webhook_secret))] = (
        Field(default=None, repr=False)
    )
    webhook_timeout_s: Annotated[float, BeforeValidator(parse_webhook_timeout)] = (
        DEFAULT_WEBHOOK_TIMEOUT_S
    )
    api_address: Annotated[str, BeforeValidator(parse_api_address)] = DEFAULT_API_ADDRESS
    api_token: Annotated[str | None, BeforeValidator(parse_optional(parse_text))] = Field(
        default=None, repr=False
    )
    api_token_file: Annotated[Path | None, BeforeValidator(parse_optional(parse_path))] = None

    def engine_settings(self) -> EngineSettings:
        """The one settings value every writer of this installation uses."""
        return EngineSettings(
            key_prefix=self.key_prefix, closed_ttl_s=self.closed_ttl_s,
            utility_ttl_s=self.utility_ttl_s, events_maxlen=self.events_maxlen,
            circuit_settings=self.circuit_settings(), probe_ttl_s=self.circuit_probe_ttl_s,
            installation_key=self.installation_key, dispatcher=self.dispatcher,
            queue_name=self.queue, dispatch_timeout_s=self.dispatch_timeout_s,
            circuit_hosts=self.circuit_hosts, transcript=self.transcript,
            authoriser=self.authoriser, transcript_maxlen=self.transcript_maxlen,
            webhook_url=self.webhook_url, webhook_secret=self.webhook_secret,
            webhook_timeout_s=self.webhook_timeout_s,
        )  # fmt: skip

    def api(self) -> ApiAddress | None:
        """Where `recovery up` serves the HTTP API (None: `off`)."""
        return None if self.api_address == API_OFF else ApiAddress.parse(self.api_address)

    def circuit_settings(self) -> CircuitSettings:
        """The circuits' thresholds and timings (checked together when loaded)."""
        return CircuitSettings(
            transient_threshold=self.circuit_transient_threshold,
            transient_window_s=self.circuit_transient_window_s,
            min_distinct_routes=self.circuit_min_distinct_routes,
            initial_backoff_s=self.circuit_initial_backoff_s,
            max_backoff_s=self.circuit_max_backoff_s,
            max_recent_failures=max(
                _CIRCUIT_DEFAULTS.max_recent_failures, self.circuit_transient_threshold
            ),
        )


@dataclass(frozen=True, slots=True)
class _Given:
    """One setting's value and where it came from."""

    value: object
    source: str


def setting_env(name: str) -> str:
    """The environment variable of setting `name`."""
    return _ENV_NAMES.get(name, f"RECOVERY_{name.upper()}")


_ENV_NAMES: Final = {"redis_url": "REDIS_URL", "ray_address": "RAY_ADDRESS"}
SETTINGS: Final = tuple(RuntimeConfig.model_fields)
ENVIRONMENT: Final = {setting_env(name): name for name in SETTINGS}


def load_config(
    path: Path | None,
    environ: Mapping[str, str],
    *,
    flags: Mapping[str, object] | None = None,
) -> RuntimeConfig:
    """The runtime's settings: defaults < the TOML file (`path`, else $RECOVERY_CONFIG) <
    the environment (`environ`: RECOVERY_* names, REDIS_URL, RAY_ADDRESS) < `flags`
    (setting name -> value, None for a flag not given; reported as `--setting-name`).
    Raises ConfigError naming the source, the setting and the bad value."""
    given: dict[str, _Given] = {}
    if path is None and environ.get(CONFIG_ENV):
        path = Path(environ[CONFIG_ENV])
    if path is not None:
        source = str(path)
        given.update({name: _Given(v, source) for name, v in read_toml(path).items()})
    for variable, name in ENVIRONMENT.items():
        if environ.get(variable, "").strip():
            given[name] = _Given(environ[variable], variable)
    for name, value in (flags or {}).items():
        if value is not None:
            given[name] = _Given(value, "--" + name.replace("_", "-"))
    return _validated(given)


def read_toml(path: Path) -> dict[str, object]:
    """The settings in a TOML file; ConfigError for an unreadable file or unknown key."""
    source = str(path)
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(source, None, source, f"cannot read: {error.strerror}") from error
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(source, None, source, f"not valid TOML: {error}") from error
    for key in document:
        if key not in SETTINGS:
            known = ", ".join(sorted(SETTINGS))
            raise ConfigError(source, key, key, f"unknown setting {key!r} (known: {known})")
    return document


def _validated(given: Mapping[str, _Given]) -> RuntimeConfig:
    try:
        config = RuntimeConfig(**{name: item.value for name, item in given.items()})
    except ValidationError as error:
        first = error.errors()[0]
        name = str(first["loc"][0])
        cause = first.get("ctx", {}).get("error")
        reason = str(cause) if cause is not None else first["msg"]
        value = WITHHELD if name in SECRET_SETTINGS else given[name].value
        raise ConfigError(given[name].source, name, value, reason) from None
    _check_circuits(config, given)
    _check_webhook(config, given)
    return config


def _check_webhook(config: RuntimeConfig, given: Mapping[str, _Given]) -> None:
    """The webhook dispatcher needs its URL and secret, and answers within the dispatch
    timeout."""
    if config.dispatcher != "webhook":
        return
    source = given["dispatcher"].source
    for name in ("webhook_url", "webhook_secret"):
        if getattr(config, name) is None:
            raise ConfigError(
                source, "dispatcher", "webhook",
                f"the webhook dispatcher needs {name} ({setting_env(name)})",
            )  # fmt: skip
    if config.webhook_timeout_s >= config.dispatch_timeout_s:
        where = given.get("webhook_timeout_s", given["dispatcher"]).source
        raise ConfigError(
            where, "webhook_timeout_s", config.webhook_timeout_s,
            f"must be below dispatch_timeout_s ({config.dispatch_timeout_s:g} s)",
        )  # fmt: skip


def _check_circuits(config: RuntimeConfig, given: Mapping[str, _Given]) -> None:
    """The circuit settings each valid alone, together: pydantic's own limits (a
    threshold above 1000, a window beyond a day) and the order of the two backoffs."""
    try:
        config.circuit_settings()
    except ValidationError as error:
        first = error.errors()[0]
        name = f"circuit_{first['loc'][0]}" if first["loc"] else "circuit_max_backoff_s"
        cause = first.get("ctx", {}).get("error")
        reason = str(cause) if cause is not None else first["msg"]
        item = given.get(name) or _Given(getattr(config, name, None), "defaults")
        raise ConfigError(item.source, name, item.value, reason.lower()) from None
