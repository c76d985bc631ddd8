"""What gold reads from silver through delta-rs, in this process: the source's table DDL.

Why not Spark: the DDL of a source is a few rows of one partition of ``silver.statements``; a Spark
read of it costs a Delta snapshot of the table and a job on the driver (the first read of a gold
step's session pays the JVM's warm-up too), for rows that are collected to the driver anyway. The
``asof`` / ``flashback`` commands (``binlake.history``) read the same DDL through this function.
"""

from __future__ import annotations

from typing import Any

from binlake.config import BinlakeConfig
from binlake.gold.schema_history import Coordinates, DdlStatement, is_table_ddl
from binlake.lake.delta_tables import open_delta_table
from binlake.lake.tables import table_location

#: the columns of ``silver.statements`` a DDL statement is built from
DDL_COLUMNS = ("file", "file_seq", "pos", "payload_index", "db", "sql", "gtid", "error_code")


def load_ddl(cfg: BinlakeConfig, source: str) -> list[DdlStatement] | None:
    """The source's table DDL from ``silver.statements`` (statements the server ran without an error),
    in no particular order (:func:`binlake.gold.schema_history.build_history` sorts); None when the
    table does not exist yet."""
    import pyarrow.dataset as ds

    table = open_delta_table(table_location(cfg.warehouse, "silver.statements"), cfg.s3)
    if table is None:
        return None
    where = (ds.field("source") == source) & (ds.field("kind") == "DDL")
    rows = table.to_pyarrow_dataset().to_table(columns=list(DDL_COLUMNS), filter=where).to_pylist()
    return [DdlStatement(row_coordinates(r), r["db"], r["sql"], r["gtid"]) for r in rows
            if (r["error_code"] or 0) == 0 and r["sql"] and is_table_ddl(r["sql"])]


def row_coordinates(row: dict[str, Any], row_index: int = -1) -> Coordinates:
    """The binlog coordinates of a silver / bronze row read as a dict (``file_seq`` NULL reads as 0,
    ``payload_index`` NULL as -1, as Spark's :func:`spark_jobs.gold.tables.stream_coordinates` orders them)."""
    payload = row.get("payload_index")
    return Coordinates(row.get("file_seq") or 0, row["pos"], -1 if payload is None else payload, row_index, row["file"])
