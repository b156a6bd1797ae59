"""The terminal's usage error, in a module that imports nothing (``inferbot --help`` stays light)."""

from __future__ import annotations


class UsageError(Exception):
    """Bad usage or config: one clear line on stderr, exit 2."""
