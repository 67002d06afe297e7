"""Errors raised for bad input. Their message names the problem and the fix.

The CLI prints a `UserError` as one line (no traceback); library users can catch it. Subclasses
also derive from the builtin a Python user would expect (ValueError, FileNotFoundError, ...).
"""


class UserError(Exception):
    """An error caused by the user's input (config, flags, files, data)."""


class ConfigError(UserError, ValueError):
    """A configuration value or flag is invalid."""


class DataError(UserError, ValueError):
    """A dataset, task or benchmark cannot be loaded or lacks what is needed."""


class ModelLoadError(UserError, OSError):
    """A model or tokenizer cannot be loaded."""
