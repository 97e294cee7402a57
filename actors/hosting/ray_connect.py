"""Connecting to Ray, or starting a local one, as an installation needs it.

A local Ray this process starts binds its node and its dashboard to `bind_host`
(loopback unless told otherwise: a local `recovery up` is not reachable from the network;
its GCS, raylet, workers and dashboard all listen on 127.0.0.1). A process joining a
loopback address (another process of such an installation, on the same machine) takes
the same single-host mode: otherwise Ray dials the machine's reachable IP instead, where
nothing listens.
Ray 2.59+ starts local clusters with token authentication: a process that joins one must
run with `RAY_AUTH_MODE=token` and see the same token (`RAY_AUTH_TOKEN`,
`RAY_AUTH_TOKEN_PATH`, else `~/.ray/auth_token`, which the cluster's starter wrote). When
joining an address and that mode is not set, it is set here whenever a token is there
to use, so an attaching client does not spend 20 s on `InvalidAuthToken`.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import ray
from ray._private import ray_constants
from ray._raylet import Config as RayConfig  # type: ignore[attr-defined]  # its stub omits it

AUTH_MODE_ENV: Final = "RAY_AUTH_MODE"
TOKEN_ENV: Final = "RAY_AUTH_TOKEN"  # noqa: S105 - a variable name, not a token
TOKEN_PATH_ENV: Final = "RAY_AUTH_TOKEN_PATH"  # noqa: S105 - a variable name
DEFAULT_TOKEN_PATH: Final = Path("~/.ray/auth_token")
LOOPBACK: Final = "127.0.0.1"
LOOPBACK_NAMES: Final = frozenset({"127.0.0.1", "localhost", "::1"})
# Ray turns a node address of 127.0.0.1 into the machine's reachable one, except where it
# runs single-host clusters (macOS, Windows), which this (Ray's own) switch selects.
SINGLE_HOST_ENV: Final = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def has_token(environ: MutableMapping[str, str], home_token: Path = DEFAULT_TOKEN_PATH) -> bool:
    """Whether a Ray token is available to this process (environment or token file)."""
    if environ.get(TOKEN_ENV, "").strip():
        return True
    path = environ.get(TOKEN_PATH_ENV, "").strip()
    return Path(path or home_token).expanduser().is_file()


def prepare_auth(environ: MutableMapping[str, str], home_token: Path = DEFAULT_TOKEN_PATH) -> bool:
    """Set RAY_AUTH_MODE=token in `environ` for joining a cluster when it is unset and a
    token is available; whether it set it (an explicit mode is left alone)."""
    if environ.get(AUTH_MODE_ENV, "").strip() or not has_token(environ, home_token):
        return False
    environ[AUTH_MODE_ENV] = "token"
    return True


@dataclass(frozen=True)
class RayConnection:
    """What `start_ray` did: whether it started (or joined) Ray, and the dashboard URL."""

    started: bool
    dashboard_url: str | None


def start_ray(
    address: str | None,
    *,
    namespace: str,
    cpus: int | None = None,
    dashboard: bool | None = None,
    bind_host: str = LOOPBACK,
) -> RayConnection:
    """Join `address` (else RAY_ADDRESS), or start a local Ray bound to `bind_host`;
    nothing when Ray is initialised in this process already."""
    if ray.is_initialized():
        return RayConnection(False, None)
    address = address or os.environ.get("RAY_ADDRESS")
    options: dict[str, Any] = {}  # options Ray accepts only when it starts a new cluster
    if address in (None, "local"):
        options = {"num_cpus": cpus, "include_dashboard": dashboard, "dashboard_host": bind_host}
        options.update(_bind_to(bind_host))
    else:
        if prepare_auth(os.environ):
            # Ray read RAY_AUTH_MODE into its config when it was imported: read it again
            # (as Ray does itself when it turns token mode on), or the mode set is unseen.
            RayConfig.initialize("")
        if _host_of(address) in LOOPBACK_NAMES:  # e.g. a local `recovery up`'s Ray
            _bind_to(LOOPBACK)  # else Ray dials the machine's own IP, where nothing listens
    context = ray.init(address=address or "local", namespace=namespace, **options)
    return RayConnection(True, getattr(context, "dashboard_url", None) or None)


def _bind_to(host: str) -> dict[str, Any]:
    """The ray.init options (and process settings) that bind a local Ray to `host`."""
    if host not in LOOPBACK_NAMES:
        return {"_node_ip_address": host}
    os.environ[SINGLE_HOST_ENV] = "0"  # for Ray's own processes, which read it at import
    ray_constants.ENABLE_RAY_CLUSTER = False  # this process imported Ray already
    return {}


def _host_of(address: str) -> str:
    """The host part of a Ray address (`host:port`, `[::1]:port`, `ray://host:port`)."""
    rest = address.split("://", 1)[-1]
    if rest.startswith("["):
        return rest[1:].split("]", 1)[0]
    return rest.rsplit(":", 1)[0] if rest.count(":") == 1 else rest


def gcs_address() -> str | None:
    """The address other processes join this Ray at (None when not connected)."""
    if not ray.is_initialized():
        return None
    found = ray.get_runtime_context().gcs_address
    return str(found) if found else None
