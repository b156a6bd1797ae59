"""The terminal's usage error, in a module that imports nothing (``inferbot --help`` stays light)."""

from __future__ import annotations


class UsageError(Exception):
    """Bad usage or config: one clear line on stderr, exit 2.

    ``example``: text to add (config TOML), printed below the line (``example`` in ``--json``).
    """

    def __init__(self, message: str, example: str | None = None) -> None:
        super().__init__(message)
        self.example = example
