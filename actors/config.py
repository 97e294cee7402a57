"""Compatibility: `actors.config` moved to `actors.engine.config`; this path keeps working.

Kept for code written against the flat layout.
"""

from actors.engine.config import (
    CONFIG_ENV,
    DEFAULT_DATA_DIR,
    DEFAULT_HOSTS,
    ENVIRONMENT,
    SETTINGS,
    ConfigError,
    RuntimeConfig,
    load_config,
    read_toml,
    setting_env,
)
from actors.engine.config_values import REDIS_SCHEMES, PositiveInt, PositiveSeconds

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_DATA_DIR",
    "DEFAULT_HOSTS",
    "ENVIRONMENT",
    "REDIS_SCHEMES",
    "SETTINGS",
    "ConfigError",
    "PositiveInt",
    "PositiveSeconds",
    "RuntimeConfig",
    "load_config",
    "read_toml",
    "setting_env",
]
