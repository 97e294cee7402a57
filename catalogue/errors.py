"""The project's one root exception, in the lowest core package so every package can use it.

catalogue, policy and circuits (pure) and actors (the shell, which re-exports it from
`actors.errors`) raise only subclasses of `RecoveryError` on purpose, so
`except RecoveryError` catches all of them. A class its callers also know as a builtin
(a ValueError that pydantic folds into a ValidationError, a KeyError of a registry
lookup) keeps that base beside this one.
"""

from __future__ import annotations


class RecoveryError(Exception):
    """Root of every error provider-recovery raises on purpose."""
