"""The writer's error classes (a module of their own: every encoder module raises them)."""

from __future__ import annotations


class EncodeError(ValueError):
    """An event (or value) that cannot be written in the requested format."""


class ValueEncodeError(ValueError):
    """A value that cannot be stored in its column."""
