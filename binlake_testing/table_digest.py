"""Row counts and order-independent checksums of Delta tables, to prove two runs wrote the same tables.

Why not Spark: the comparison must be independent of the engine that wrote the tables (a local
run against a cluster run, a serial run against a parallel one), and cheap to call from a test
that has no SparkSession. ``deltalake`` (delta-rs) reads the same tables, local or on S3.

The checksum is the SHA-256 of the sorted per-row SHA-256 digests of each row's canonical JSON
(keys sorted, bytes as hex, timestamps/dates as ISO text), so row order and file layout do not
matter, while any changed, missing or duplicated row does.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from binlake.config import S3Settings

#: columns that name the run that wrote a row (differ between two otherwise identical runs)
RUN_COLUMNS: frozenset[str] = frozenset({"run_id"})


@dataclass(frozen=True)
class TableDigest:
    """What two runs must agree on for one table."""

    table: str
    rows: int
    checksum: str


def _canonical(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "b64:" + base64.b64encode(bytes(value)).decode()
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        # Spark maps arrive as lists of (key, value) pairs from Arrow: order them too.
        items = [_canonical(v) for v in value]
        if items and all(isinstance(i, (list, tuple)) and len(i) == 2 for i in value):
            return sorted(items, key=lambda kv: json.dumps(kv, sort_keys=True))
        return items
    return value


def rows_digest(table: str, rows: Iterable[Mapping[str, Any]],
                ignore_columns: frozenset[str] = RUN_COLUMNS) -> TableDigest:
    """The digest of an iterable of rows (dicts)."""
    digests = []
    for row in rows:
        canon = {k: _canonical(v) for k, v in row.items() if k not in ignore_columns}
        digests.append(hashlib.sha256(json.dumps(canon, sort_keys=True).encode()).hexdigest())
    digests.sort()
    return TableDigest(table, len(digests), hashlib.sha256("\n".join(digests).encode()).hexdigest())


def delta_table_digest(table: str, location: str, s3: S3Settings | None = None,
                       ignore_columns: frozenset[str] = RUN_COLUMNS) -> TableDigest:
    """Digest of the Delta table at ``location`` (local path, ``s3://`` or ``s3a://``)."""
    from binlake.lake.delta_tables import open_delta_table

    delta = open_delta_table(location, s3)
    if delta is None:
        raise FileNotFoundError(f"no Delta table at {location}")
    return rows_digest(table, delta.to_pyarrow_table().to_pylist(), ignore_columns)


def warehouse_digests(warehouse: str, tables: Iterable[str], s3: S3Settings | None = None,
                      ignore_columns: frozenset[str] = RUN_COLUMNS) -> dict[str, TableDigest]:
    """Digests of several tables of one warehouse, by table name (``bronze.events`` ...)."""
    from binlake.lake.tables import table_location

    return {t: delta_table_digest(t, table_location(warehouse, t), s3, ignore_columns) for t in tables}
