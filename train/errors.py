"""The training stage's own error: a config that cannot run. Its own module so that methods (which validate
their options) and the config (which resolves methods) both import it without importing each other."""

from __future__ import annotations


class ConfigError(ValueError):
    """A training config is invalid: unknown key, wrong type or bad value."""
