"""The one settings value every writer of an installation uses.

Built once from the configuration (`EngineSettings.from_config`) and handed to every route
host (a Ray actor argument) and to every rq worker (`to_environment`: one variable in the
worker's environment, never on a command line, since it holds the installation key), so a
transition has the same TTLs, circuit thresholds, backoffs, probe TTL and event retention
whoever writes it: a host, a backstop job or a dispatch job. `dispatch_timeout_s` is how
long a dispatch job waits for the orchestrator's dispatcher before the outcome is ambiguous
(actors/jobs/dispatch.py); `circuit_hosts` how many circuit hosts own the circuits.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from actors.keys import DEFAULT_PREFIX, KeySpace
from actors.routes.circuit_board import (
    DEFAULT_INSTALLATION_KEY,
    DEFAULT_PROBE_TTL_S,
    CircuitBinding,
)
from actors.routes.commands import RouteSettings
from actors.store.redis_transcript import DEFAULT_TRANSCRIPT_MAXLEN
from actors.store.route_store import DEFAULT_EVENTS_MAXLEN
from circuits import CircuitSettings

SETTINGS_ENV: Final = "RECOVERY_ENGINE_SETTINGS"
INSTALLATION_KEY_ENV: Final = "RECOVERY_INSTALLATION_KEY"
_ROUTE_DEFAULTS: Final = RouteSettings()
_DIGEST_LABEL: Final = b"provider-recovery installation key digest"
DEFAULT_DISPATCH_TIMEOUT_S: Final = 60.0
# The longest a dispatch may take: under reconciliation's 15 minutes for a started
# dispatch (actors/jobs/reconcile.py), which would otherwise settle one still running.
DISPATCH_TIMEOUT_RANGE_S: Final = (1.0, 600.0)
# Circuit hosts (Ray actors owning the circuits, actors/hosting/circuit_host.py); 0: the
# route hosts write circuits themselves, under the same Lua fences (no circuit actors).
DEFAULT_CIRCUIT_HOSTS: Final = 1
CIRCUIT_HOSTS_RANGE: Final = (0, 16)
# Long enough for a circuit host to wake a parked route through a route host being
# restarted (~1-3 s) and for the woken route's probe to take the lease.
OWNER_WAKE_MARGIN_S: Final = 30.0
# The webhook dispatcher's bound on its connect and on the receiver's answer.
DEFAULT_WEBHOOK_TIMEOUT_S: Final = 10.0
# Settings that never leave the process in `public()` (nor in a repr).
_SECRETS: Final = frozenset({"installation_key", "webhook_secret"})


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """What every transition of an installation is written with. `installation_key` keys
    the credential fingerprints of circuits (None: $RECOVERY_INSTALLATION_KEY, else the
    built-in one); it never appears in a repr."""

    key_prefix: str = DEFAULT_PREFIX
    closed_ttl_s: int = _ROUTE_DEFAULTS.closed_ttl_s
    utility_ttl_s: int = _ROUTE_DEFAULTS.utility_ttl_s
    events_maxlen: int = DEFAULT_EVENTS_MAXLEN
    circuit_settings: CircuitSettings = field(default_factory=CircuitSettings)
    probe_ttl_s: float = DEFAULT_PROBE_TTL_S
    installation_key: str | None = field(default=None, repr=False)
    dispatcher: str | None = None
    queue_name: str | None = None
    dispatch_timeout_s: float = DEFAULT_DISPATCH_TIMEOUT_S
    circuit_hosts: int = DEFAULT_CIRCUIT_HOSTS
    transcript: str | None = None
    authoriser: str | None = None
    transcript_maxlen: int = DEFAULT_TRANSCRIPT_MAXLEN
    webhook_url: str | None = None
    webhook_timeout_s: float = DEFAULT_WEBHOOK_TIMEOUT_S
    webhook_secret: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        KeySpace(self.key_prefix)  # validates the prefix
        low_hosts, high_hosts = CIRCUIT_HOSTS_RANGE
        hosts = self.circuit_hosts
        if (
            isinstance(hosts, bool)
            or not isinstance(hosts, int)
            or not low_hosts <= hosts <= high_hosts
        ):
            raise ValueError(
                f"circuit_hosts must be an integer from {low_hosts} to {high_hosts}, got {hosts!r}"
            )
        if self.queue_name is None:  # frozen: the default is filled in once, here
            object.__setattr__(self, "queue_name", default_queue_name(self.key_prefix))
        self.route_settings()  # validates the TTLs
        if self.events_maxlen < 1:
            raise ValueError(f"events_maxlen must be >= 1, got {self.events_maxlen}")
        if self.transcript_maxlen < 1:
            raise ValueError(f"transcript_maxlen must be >= 1, got {self.transcript_maxlen}")
        webhook = self.webhook_timeout_s
        if isinstance(webhook, bool) or not isinstance(webhook, int | float) or not webhook > 0:
            raise ValueError(f"webhook_timeout_s must be > 0 seconds, got {webhook!r}")
        if not self.probe_ttl_s > 0:
            raise ValueError(f"probe_ttl_s must be > 0, got {self.probe_ttl_s}")
        low, high = DISPATCH_TIMEOUT_RANGE_S
        timeout = self.dispatch_timeout_s
        number = isinstance(timeout, int | float) and not isinstance(timeout, bool)
        if not number or not low <= timeout <= high:
            raise ValueError(
                f"dispatch_timeout_s must be between {low:g} and {high:g} seconds, "
                f"got {self.dispatch_timeout_s!r}"
            )

    @property
    def keys(self) -> KeySpace:
        return KeySpace(self.key_prefix)

    def route_settings(self, host_id: str | None = None) -> RouteSettings:
        """The route settings of transitions written for host `host_id`'s routes."""
        return RouteSettings(
            host_id=host_id, closed_ttl_s=self.closed_ttl_s, utility_ttl_s=self.utility_ttl_s
        )

    def circuit_binding(self) -> CircuitBinding:
        """How this installation's routes meet circuits; with circuit hosts, each
        circuit's host wakes one parked route at its probe time, so parked routes wake
        by themselves only OWNER_WAKE_MARGIN_S later (a host that never woke one)."""
        margin = OWNER_WAKE_MARGIN_S if self.circuit_hosts else 0.0
        return circuit_binding(
            self.installation_key, settings=self.circuit_settings, probe_ttl_s=self.probe_ttl_s,
            owner_wake_margin_s=margin,
        )  # fmt: skip

    def to_environment(self) -> dict[str, str]:
        """The variable that hands these settings to a worker process."""
        secrets = {"installation_key": self.installation_key, "webhook_secret": self.webhook_secret}
        return {SETTINGS_ENV: json.dumps({**self.public(), **secrets})}

    def public(self) -> dict[str, Any]:
        """Every setting but the installation key, as JSON values (what an installation
        records in Redis and compares; `key_digest` stands for the key)."""
        values: dict[str, Any] = {
            name: getattr(self, name)
            for name in self.__dataclass_fields__
            if name != "circuit_settings" and name not in _SECRETS
        }
        values["circuit_settings"] = self.circuit_settings.model_dump(mode="json")
        return values

    def key_digest(self) -> str:
        """A digest of the installation key in force (it says whether two processes use
        the same key; the key cannot be recovered from it)."""
        key = self.circuit_binding().installation_key
        return hmac.new(key, _DIGEST_LABEL, hashlib.sha256).hexdigest()[:32]

    @classmethod
    def from_public(
        cls,
        values: Mapping[str, Any],
        installation_key: str | None,
        webhook_secret: str | None = None,
    ) -> EngineSettings:
        """The settings `public()` gave, with the secrets (not recorded)."""
        found = dict(values)
        found["circuit_settings"] = CircuitSettings.model_validate(found["circuit_settings"])
        return cls(**found, installation_key=installation_key, webhook_secret=webhook_secret)

    def first_difference(self, other: EngineSettings) -> tuple[str, object, object] | None:
        """The first setting (in declaration order) whose values differ, as (name, this
        value, the other's), the installation key compared by digest; None when equal."""
        mine, theirs = self.public(), other.public()
        for name, value in mine.items():
            if name == "circuit_settings":
                for field_name, field_value in value.items():
                    if theirs[name][field_name] != field_value:
                        return f"circuit_{field_name}", field_value, theirs[name][field_name]
            elif theirs[name] != value:
                return name, value, theirs[name]
        if self.key_digest() != other.key_digest():
            return "installation_key", "<withheld>", "<withheld>"
        return None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> EngineSettings:
        """The settings a worker was handed; the defaults (and the installation key of
        $RECOVERY_INSTALLATION_KEY) for a worker started by hand without them."""
        text = environ.get(SETTINGS_ENV)
        if not text:
            return cls(installation_key=environ.get(INSTALLATION_KEY_ENV))
        values = json.loads(text)
        values["circuit_settings"] = CircuitSettings.model_validate(values["circuit_settings"])
        return cls(**values)


def default_queue_name(prefix: str) -> str:
    """The dispatch queue of a key prefix, as the runtime and `recovery reconcile` name it."""
    return f"{prefix}-dispatch"


def circuit_binding(
    installation_key: str | None = None,
    *,
    settings: CircuitSettings | None = None,
    probe_ttl_s: float = DEFAULT_PROBE_TTL_S,
    owner_wake_margin_s: float = 0.0,
) -> CircuitBinding:
    """The binding of this installation: the HMAC key of credential fingerprints is
    `installation_key`, else $RECOVERY_INSTALLATION_KEY, else a fixed default (every
    process of one installation must use the same key, or they see different circuits);
    the circuits' `settings` (the defaults of docs/DESIGN.md §3 when None) and probe TTL."""
    key = installation_key or os.environ.get(INSTALLATION_KEY_ENV)
    return CircuitBinding(
        installation_key=key.encode() if key else DEFAULT_INSTALLATION_KEY,
        settings=settings or CircuitSettings(),
        probe_ttl_s=probe_ttl_s,
        owner_wake_margin_s=owner_wake_margin_s,
    )
