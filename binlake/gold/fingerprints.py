"""Gold's input fingerprints computed in this process: per table, the count and order-free hash sum of
its row changes, split at the table's W (``spark_jobs.gold.inputs`` says what they decide).

Why in Python as well as in Spark: a night usually adds a few hundred row changes per source, and
the Spark aggregate over them costs a job on the driver (seconds; in connect mode on the shared
server) for a handful of numbers. Below :data:`IN_PROCESS_ROWS` rows the same numbers come from
the Parquet files through delta-rs here; above it Spark's aggregate runs on the executors.

The hash is Spark's ``xxhash64(file, pos, payload_index, row_index, operation, before, after)``
re-computed bit for bit (the sums must equal what a Spark run recorded in ``meta.gold_status``):
XXH64 with seed 42, each non-NULL column hashed with the previous hash as its seed, an INT as its 4
little-endian bytes, a BIGINT as its 8, a STRING as its UTF-8 bytes (Spark's ``XXH64.hashInt``,
``hashLong`` and ``hashUnsafeBytes`` are the reference XXH64 of those bytes).
"""

from __future__ import annotations

import struct
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from binlake.gold.reads import order_key, row_coordinates
from binlake.gold.schema_history import Coordinates

if TYPE_CHECKING:  # pragma: no cover
    from deltalake import DeltaTable

TableKey = tuple[str, str]

#: a night (or a partition) of at most this many row changes is fingerprinted in this process: at
#: this size the Python pass costs less than the Spark job it replaces (bench/RESULTS.md, session 30)
IN_PROCESS_ROWS = 200_000

#: the hashed columns in Spark's order and their Spark types: 'i' INT, 'q' BIGINT, 's' STRING
HASHED_COLUMNS = (("file", "s"), ("pos", "q"), ("payload_index", "i"), ("row_index", "i"), ("operation", "s"),
                  ("before", "s"), ("after", "s"))
#: Spark's seed for ``hash`` / ``xxhash64``
SPARK_HASH_SEED = 42
_U64 = (1 << 64) - 1
_INT = struct.Struct("<i")
_LONG = struct.Struct("<q")
#: what a row change is read with: the hashed columns, the table, and its coordinates
ROW_COLUMNS = ("db", "table_name", "file_seq", *(name for name, _ in HASHED_COLUMNS))


@dataclass(frozen=True)
class Counts:
    """One table's row changes in an aggregate: all, those at or before its W, the first after it."""

    n: int = 0
    h: Decimal = Decimal(0)
    n_old: int = 0
    h_old: Decimal = Decimal(0)
    first_new: Coordinates | None = None

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.n + other.n, self.h + other.h, self.n_old + other.n_old, self.h_old + other.h_old,
                      other.first_new if self.first_new is None else self.first_new)


def spark_xxhash64(row: Mapping[str, Any]) -> int:
    """Spark's ``xxhash64`` of a row change's :data:`HASHED_COLUMNS` (a signed 64-bit value)."""
    import xxhash

    value = SPARK_HASH_SEED
    for name, kind in HASHED_COLUMNS:
        v = row[name]
        if v is None:
            continue
        data = _INT.pack(v) if kind == "i" else _LONG.pack(v) if kind == "q" else v.encode("utf-8")
        value = xxhash.xxh64_intdigest(data, seed=value)
    return value - (1 << 64) if value > _U64 >> 1 else value


def count_rows(rows: Iterable[Mapping[str, Any]], marks: Mapping[TableKey, Coordinates]) -> dict[TableKey, Counts]:
    """Per table of ``rows`` (row changes with :data:`ROW_COLUMNS`): count and hash sum, and split at
    its mark W (a row at or before W is old; the first new row is the least after it, in binlog
    order: :func:`binlake.gold.reads.order_key`)."""
    sums: dict[TableKey, list[Any]] = {}
    for row in rows:
        key = (row["db"], row["table_name"])
        acc = sums.setdefault(key, [0, 0, 0, 0, None])
        digest = spark_xxhash64(row)
        acc[0] += 1
        acc[1] += digest
        mark = marks.get(key)
        if mark is None:
            continue
        at = row_coordinates(row, row["row_index"])
        if order_key(at) <= order_key(mark):
            acc[2] += 1
            acc[3] += digest
        elif acc[4] is None or order_key(at) < order_key(acc[4]):
            acc[4] = at
    return {key: Counts(n, Decimal(h), n_old, Decimal(h_old), first)
            for key, (n, h, n_old, h_old, first) in sums.items()}


def rows_in(table: DeltaTable, source: str, files: Iterable[str] | None) -> int | None:
    """Row changes in the source's partition of ``silver.row_changes`` (``files``: only those data
    files, paths as the Delta log spells them), from the log's statistics; None when a file has none."""
    from binlake.lake.delta_tables import add_actions

    actions = add_actions(table)
    wanted = None if files is None else {urllib.parse.unquote(p) for p in files}
    total = 0
    for path, part, records in zip(actions["path"], actions.get("partition.source", []), actions["num_records"]):
        if part == source and (wanted is None or urllib.parse.unquote(path) in wanted):
            if records is None:
                return None
            total += int(records)
    return total


def count_files(table: DeltaTable, source: str, files: Iterable[str] | None,
                marks: Mapping[TableKey, Coordinates]) -> dict[TableKey, Counts]:
    """:func:`count_rows` over the source's partition of ``silver.row_changes`` at the table's loaded
    version (``files``: only those data files), read here through delta-rs."""
    import pyarrow.dataset as ds

    wanted = None if files is None else {urllib.parse.unquote(p) for p in files}
    counts: dict[TableKey, Counts] = {}
    for fragment in table.to_pyarrow_dataset().get_fragments(filter=ds.field("source") == source):
        if wanted is not None and urllib.parse.unquote(fragment.path) not in wanted:
            continue
        part = count_rows(fragment.to_table(columns=list(ROW_COLUMNS)).to_pylist(), marks)
        counts = {key: _merged(counts.get(key, Counts()), part.get(key, Counts())) for key in set(counts) | set(part)}
    return counts


def _merged(a: Counts, b: Counts) -> Counts:
    """Two parts of one table's rows: sums added, the least first new row kept."""
    firsts = [c for c in (a.first_new, b.first_new) if c is not None]
    first = min(firsts, key=order_key, default=None)
    return Counts(a.n + b.n, a.h + b.h, a.n_old + b.n_old, a.h_old + b.h_old, first)
