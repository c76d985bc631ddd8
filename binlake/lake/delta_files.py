"""Data files that binlake writes into a Delta table's folder itself: where each one goes and the
facts its ``add`` action carries.

Why binlake writes some data files itself: an ingest's executors already write each table's rows
as Parquet. When a table holds no rows of the run's files (every nightly file and every
backfill of new files), those Parquet files can go straight into the table's folder and be
committed as they are, in one ``add``-only commit (:func:`binlake.lake.delta_tables.append_files`).
Before, Spark read them back and wrote every byte a second time, which cost more CPU than
decoding them (issue 13).

The files must look like Spark Delta's own to every reader:

- the Hive-style partition folders Spark writes (``source=a/event_date=2024-01-02/``), with the
  partition columns left out of the file (Delta keeps them in ``partitionValues``);
- ``stats`` in Delta's format (:class:`FileStats`), so that data skipping and
  :func:`spark_jobs.ingest.may_hold_rows_of` work as on Spark's files. Each bound is one Delta's
  readers can trust: timestamps are cut to milliseconds downwards for a minimum and upwards for a
  maximum; a string minimum is cut to :data:`STATS_STRING_PREFIX` characters; a longer string's
  maximum, which would need a tie-breaking character, is left out. A missing bound only means a
  reader cannot skip the file.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: how many leading data columns get statistics (Delta's ``delta.dataSkippingNumIndexedCols`` default)
STATS_INDEXED_COLUMNS = 32
#: Delta keeps a string column's min/max statistics as prefixes of this many characters
STATS_STRING_PREFIX = 32
#: the folder name of a NULL partition value (Hive's, as Spark writes it)
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"

# The characters Spark escapes in a partition folder name (ExternalCatalogUtils.escapePathName)
_ESCAPED = frozenset('"#%\'*/:=?\\\x7f{[]^') | frozenset(chr(c) for c in range(0x20))


@dataclass(frozen=True)
class DataFile:
    """A Parquet file written into a table's folder, to be committed by an ``add`` action."""

    #: relative to the table folder, as written; the log holds it URI-encoded (delta-rs encodes it)
    path: str
    size: int
    partition_values: Mapping[str, str | None]
    stats: str  # Delta's statistics JSON


def partition_text(value: Any) -> str | None:
    """A partition value as Delta's ``partitionValues`` spell it (dates ISO, NULL as None)."""
    if value is None:
        return None
    if isinstance(value, _dt.date):
        return value.isoformat()
    return str(value)


def partition_folder(partition_by: Sequence[str], values: Mapping[str, str | None]) -> str:
    """``col=value/...`` as Spark names partition folders (escaped, NULL as Hive's default)."""
    parts = []
    for name in partition_by:
        value = values[name]
        text = NULL_PARTITION if value is None or value == "" else "".join(
            f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)
        parts.append(f"{name}={text}")
    return "/".join(parts)


def _timestamp_text(value: _dt.datetime, *, upper: bool) -> str:
    """A timestamp bound at millisecond precision, as Delta writes it: floored for a minimum,
    ceiled for a maximum (a floored maximum would be below the value it bounds)."""
    if value.tzinfo is not None:
        value = value.astimezone(_dt.UTC).replace(tzinfo=None)
    extra = value.microsecond % 1000
    value = value.replace(microsecond=value.microsecond - extra)
    if upper and extra:
        value += _dt.timedelta(milliseconds=1)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def _bound(value: Any, *, upper: bool) -> Any:
    """A Parquet statistic as a Delta stats value, or None when Delta would not keep it exactly."""
    if isinstance(value, bool):
        return None  # Delta keeps no min/max for booleans
    if isinstance(value, int):
        return value
    if isinstance(value, _dt.datetime):
        return _timestamp_text(value, upper=upper)
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, str):
        if len(value) <= STATS_STRING_PREFIX:
            return value
        return None if upper else value[:STATS_STRING_PREFIX]
    return None  # floats, decimals, binary: no bounds (a reader just cannot skip on them)


class FileStats:
    """Delta statistics of one Parquet file being written, on ``columns`` (a table's
    ``delta.dataSkippingStatsColumns``) or else the first :data:`STATS_INDEXED_COLUMNS` columns
    as Delta's default: null counts summed from the Arrow data
    as it is written (a nested column's Parquet leaves do not count its NULLs), bounds from the
    Parquet footer's row-group statistics once it is closed."""

    def __init__(self, schema: Any, columns: Sequence[str] | None = None) -> None:
        import pyarrow as pa

        if columns is None:  # Delta's default: the first columns
            self.columns: list[str] = [f.name for f in schema][:STATS_INDEXED_COLUMNS]
        else:  # the table's delta.dataSkippingStatsColumns
            wanted = set(columns)
            self.columns = [f.name for f in schema if f.name in wanted]
        self._flat = {f.name for f in schema if not pa.types.is_nested(f.type)}
        self.null_counts = dict.fromkeys(self.columns, 0)
        self.rows = 0

    def note(self, table: Any) -> None:
        """Count a row group's rows and NULLs (``table``: the pyarrow table written)."""
        self.rows += table.num_rows
        for name in self.columns:
            self.null_counts[name] += table.column(name).null_count

    def to_json(self, metadata: Any) -> str:
        """The stats JSON, given the closed file's ``pyarrow.parquet.FileMetaData``."""
        lows: dict[str, Any] = {}
        highs: dict[str, Any] = {}
        leaves = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
        for name in self.columns:
            if name not in self._flat or name not in leaves or self.null_counts[name] == self.rows:
                continue
            bounds = _column_bounds(metadata, leaves[name])
            if bounds is None:
                continue
            low, high = _bound(bounds[0], upper=False), _bound(bounds[1], upper=True)
            if low is not None:
                lows[name] = low
            if high is not None:
                highs[name] = high
        return json.dumps({"numRecords": self.rows, "minValues": lows, "maxValues": highs,
                           "nullCount": self.null_counts}, separators=(",", ":"))


def _column_bounds(metadata: Any, leaf: int) -> tuple[Any, Any] | None:
    """(min, max) of a flat column (Parquet leaf ``leaf``) over every row group, or None when a
    group lacks them."""
    low: Any = None
    high: Any = None
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        stats = group.column(leaf).statistics
        if stats is None or stats.null_count == group.num_rows:
            continue  # a group of NULLs only bounds nothing
        if not stats.has_min_max:
            return None
        try:
            g_low, g_high = stats.min, stats.max
        except (ValueError, OverflowError):  # a timestamp beyond Python's datetime
            return None
        low = g_low if low is None or g_low < low else low
        high = g_high if high is None or g_high > high else high
    return None if low is None else (low, high)
