"""The installation a `recovery` command works on, from the same settings value its hosts
and workers write with: defaults < `--config FILE` (or `RECOVERY_CONFIG`) < the
environment (`RECOVERY_*`, `REDIS_URL`) < the command's `--redis-url` and `--prefix`.
Without any URL, the embedded Redis of the data dir is used when its socket exists."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

import redis

from actors.cli.common import CliError, connect
from actors.engine.config import ConfigError, RuntimeConfig, load_config
from actors.engine.settings import EngineSettings
from actors.keys import KeySpace
from actors.store.embedded import EmbeddedRedis


def installation_options() -> argparse.ArgumentParser:
    """The options every command that reads or writes an installation shares (a parent
    parser for `add_parser(parents=...)`)."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--redis-url",
        metavar="URL",
        help="redis://host:port/db or unix:///path/redis.sock (default: the installation's: "
        "REDIS_URL, the --config file, else the embedded Redis of the data dir; pass a URL "
        "with a password through REDIS_URL: any user can read a command line)",
    )
    options.add_argument(
        "--prefix",
        "--key-prefix",
        dest="prefix",
        metavar="PREFIX",
        help="key prefix (default: the installation's: RECOVERY_KEY_PREFIX, the --config "
        "file, else recovery)",
    )
    options.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="the installation's TOML settings (default: $RECOVERY_CONFIG)",
    )
    return options


@dataclass(frozen=True)
class Installation:
    """Where an installation's data is and the settings it is written with."""

    url: str
    settings: EngineSettings
    config: RuntimeConfig


def installation(args: argparse.Namespace) -> Installation:
    """The installation `args` names (module docstring). Raises CliError naming the bad
    setting, or saying where a Redis URL can come from when there is none."""
    flags = {"redis_url": args.redis_url, "key_prefix": args.prefix}
    try:
        config = load_config(args.config, os.environ, flags=flags)
    except ConfigError as error:
        raise CliError(str(error)) from None
    return Installation(_url(config), config.engine_settings(), config)


def _url(config: RuntimeConfig) -> str:
    if config.redis_url:
        return config.redis_url
    embedded = EmbeddedRedis(config.data_dir.expanduser())
    if embedded.socket_path.exists():
        return embedded.url
    raise CliError(
        "no Redis URL: pass --redis-url URL or set REDIS_URL "
        f"(and no embedded Redis socket at {embedded.socket_path}; `recovery up` starts one)"
    )


def open_redis(args: argparse.Namespace) -> tuple[redis.Redis, KeySpace]:
    """A checked connection to the installation's Redis and its key space."""
    found = installation(args)
    return connect(found.url), found.settings.keys
