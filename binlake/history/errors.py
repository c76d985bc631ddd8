"""The history stage's errors: one root (:class:`HistoryError`) under :class:`BinlakeError`, each
message naming the source, table, GTID, file or time it is about."""

from __future__ import annotations

from binlake.errors import BinlakeError


class HistoryError(BinlakeError):
    """``asof`` / ``flashback`` cannot answer (the message says why, in the archive's words)."""


class MomentError(HistoryError):
    """The moment is not one the archive can place: unparsable, before the archive, after it, or a
    GTID set that is not a prefix of the archive's transactions."""


class CoverageGapError(HistoryError):
    """Reconciliation found a GAP (or a broken chain) before the moment / inside the range."""


class SchemaChangeError(HistoryError):
    """DDL (ALTER, TRUNCATE, an unknown statement) the answer cannot follow."""
