"""The error of a configuration that cannot be used, apart from the schema so that a command that
only reports one (the command line) imports nothing heavy."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration file that cannot be used; the message names the field."""
