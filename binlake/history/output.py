"""An ``asof`` answer as an Arrow table with gold's column types, and written as a Delta table.

Why gold's types: the answer is meant to be joined with (or compared to) the gold table, so each
column has the Spark type gold gives it (``binlake.gold.types.spark_type``), spelt in Arrow the way
Spark reads it back (TIMESTAMP: an instant in UTC; TIMESTAMP_NTZ: a wall time).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from binlake.config import BinlakeConfig
from binlake.gold.types import spark_type
from binlake.history.asof import AsOf
from binlake.history.errors import HistoryError
from binlake.lake.delta_tables import delta_uri, storage_options

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

_DECIMAL = re.compile(r"DECIMAL\((\d+),(\d+)\)")


def arrow_type(spark: str) -> pa.DataType:
    """The Arrow type of a gold column's Spark type (DDL text)."""
    import pyarrow as pa

    simple = {"TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INT": pa.int32(), "BIGINT": pa.int64(),
              "FLOAT": pa.float32(), "DOUBLE": pa.float64(), "DATE": pa.date32(), "STRING": pa.string(),
              "BINARY": pa.binary(), "TIMESTAMP_NTZ": pa.timestamp("us"), "TIMESTAMP": pa.timestamp("us", tz="UTC"),
              "ARRAY<FLOAT>": pa.list_(pa.float32())}
    if spark in simple:
        return simple[spark]
    match = _DECIMAL.fullmatch(spark)
    if match:
        return pa.decimal128(int(match.group(1)), int(match.group(2)))
    raise HistoryError(f"gold type {spark} has no Arrow form here")


def as_arrow(answer: AsOf) -> pa.Table:
    import pyarrow as pa

    fields = [pa.field(c.name, arrow_type(spark_type(c))) for c in answer.schema.columns]
    columns: list[list[Any]] = [list(col) for col in zip(*answer.rows)] if answer.rows else [[] for _ in fields]
    return pa.table([pa.array(values, type=f.type) for values, f in zip(columns, fields)], schema=pa.schema(fields))


def _normal(location: str) -> str:
    uri = delta_uri(location).rstrip("/")
    return uri if "://" in uri else os.path.abspath(uri)


def write_delta(cfg: BinlakeConfig, answer: AsOf, location: str, overwrite: bool = False) -> int:
    """Write the answer as a Delta table at ``location`` (a folder or ``s3://``); the rows written.
    Refuses a location inside the warehouse: binlake's own tables are written by its jobs only."""
    from deltalake import write_deltalake

    target, warehouse = _normal(location), _normal(cfg.warehouse)
    if target == warehouse or target.startswith(warehouse + "/"):
        raise HistoryError(f"{location} is inside the warehouse {cfg.warehouse}: write the answer somewhere else")
    data = as_arrow(answer)
    write_deltalake(delta_uri(location), data, mode="overwrite" if overwrite else "error",
                    storage_options=storage_options(cfg.s3, location) or None)
    return data.num_rows
