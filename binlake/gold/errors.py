"""The errors gold's pure modules raise on purpose, under :class:`binlake.errors.BinlakeError`.

Why one module: a caller (the gold job, the CLI, a test) finds every explained failure of gold's
schema history, seed dumps and value conversion in one place, and tells them from a bug by the
package's root.
"""

from __future__ import annotations

from binlake.errors import BinlakeError


class GoldError(BinlakeError):
    """Base class of gold's own errors (its message names the statement, dump or value)."""


class DdlError(GoldError, ValueError):
    """A DDL statement that affects a table but could not be understood."""


class SnapshotError(GoldError, ValueError):
    """The dump cannot seed gold (no GTID position, a statement that does not parse)."""


class ConversionError(GoldError, ValueError):
    """A silver value that does not fit its column's type (a schema that does not match)."""
