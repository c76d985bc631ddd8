"""The one base class of binlake's own errors.

Why one base: callers (the CLI, Airflow tasks, the archiver service) catch ``BinlakeError`` to tell an
expected, explained failure (a GAP, a bad config key, a purged binlog) from a bug, and print the
former as one clear message instead of a traceback.
"""

from __future__ import annotations


class BinlakeError(Exception):
    """Base class of every error binlake raises on purpose (its message is meant for operators)."""
