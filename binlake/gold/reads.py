"""What gold reads through delta-rs, in this process: the source's table DDL, what its last run
recorded (``meta.gold_status``) and what reconcile found (``meta.gtid_reconciliation``,
``meta.gtid_coverage``).

Why not Spark: each is a few rows of one partition of a table written with delta-rs; a Spark read
costs a Delta snapshot of the table and a job on the driver (seconds; in connect mode on the shared
server), for rows that are collected to the driver anyway. The ``asof`` / ``flashback`` commands
(``binlake.history``) read the same DDL through :func:`load_ddl`.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from binlake.config import BinlakeConfig
from binlake.gold.schema_history import Coordinates, DdlStatement, is_table_ddl
from binlake.gold.state import Segment, StreamItem
from binlake.lake.delta_tables import open_delta_table
from binlake.lake.tables import table_location

if TYPE_CHECKING:  # pragma: no cover
    from deltalake import DeltaTable

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


def gold_status_rows(cfg: BinlakeConfig, source: str) -> dict[str, dict[str, Any]]:
    """The source's rows of ``meta.gold_status`` by gold table name; empty when the table does not
    exist yet or was written before the replay columns (``input_fingerprint``) existed."""
    table = open_delta_table(table_location(cfg.warehouse, "meta.gold_status"), cfg.s3)
    if table is None or "input_fingerprint" not in {f.name for f in table.schema().fields}:
        return {}
    return {r["gold_table"]: {k: _naive_local(v) for k, v in r.items()} for r in _source_rows(table, source)}


def _naive_local(value: Any) -> Any:
    """A TIMESTAMP as Spark's ``collect`` gives it (naive, this process's local time), so a carried-over
    status row's ``last_commit_time`` equals the one a replay in the same run reports."""
    if isinstance(value, _dt.datetime) and value.tzinfo is not None:
        return value.astimezone().replace(tzinfo=None)
    return value


def reconciled_gap(cfg: BinlakeConfig, source: str) -> tuple[bool | None, str | None]:
    """(complete, the first file of the chain with a GAP or CHAIN_BREAK) from ``meta.gtid_reconciliation``;
    (None, None) when the source was never reconciled."""
    table = open_delta_table(table_location(cfg.warehouse, "meta.gtid_reconciliation"), cfg.s3)
    if table is None:
        return None, None
    gaps = sorted((r["chain_index"], r["file"]) for r in _source_rows(table, source, ("chain_index", "file", "status"))
                  if r["status"] in ("GAP", "CHAIN_BREAK"))
    return not gaps, (gaps[0][1] if gaps else None)


def coverage_text(cfg: BinlakeConfig, source: str) -> str | None:
    """The source's ``meta.gtid_coverage`` intervals as one GTID-set text (in key order), or None."""
    table = open_delta_table(table_location(cfg.warehouse, "meta.gtid_coverage"), cfg.s3)
    if table is None:
        return None
    rows = sorted(_source_rows(table, source, ("sid", "tag", "gno_start", "gtid_set")),
                  key=lambda r: (r["sid"], r["tag"], r["gno_start"]))
    return ",".join(r["gtid_set"] for r in rows) or None


def _source_rows(table: DeltaTable, source: str, columns: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """The rows of one source's partition (a metadata-sized table read whole into this process)."""
    import pyarrow.dataset as ds

    data = table.to_pyarrow_dataset().to_table(columns=list(columns) if columns else None,
                                               filter=ds.field("source") == source)
    return list(data.to_pylist())


#: a stream item's columns of ``bronze.events`` (a TABLE_MAP) and ``silver.row_changes`` (a row change)
TABLE_MAP_COLUMNS = ("file", "file_seq", "pos", "payload_index", "fields", "gtid")
ROW_CHANGE_COLUMNS = ("file", "file_seq", "pos", "payload_index", "row_index", "operation", "before", "after", "gtid",
                      "commit_time")


def segment_filter(source: str, seg: Segment) -> Any:
    """The pyarrow filter of a segment's table (its rows of the source's partition)."""
    import pyarrow.dataset as ds

    return (ds.field("source") == source) & (ds.field("db") == seg.db) & (ds.field("table_name") == seg.table)


def table_map_items(cfg: BinlakeConfig, where: Any) -> list[StreamItem] | None:
    """The TABLE_MAPs of ``bronze.events`` matching ``where`` as stream items (None: no such table yet)."""
    import pyarrow.dataset as ds

    events = open_delta_table(table_location(cfg.warehouse, "bronze.events"), cfg.s3)
    if events is None:
        return None
    rows = events.to_pyarrow_dataset().to_table(columns=list(TABLE_MAP_COLUMNS),
                                                filter=where & (ds.field("event_type") == "TABLE_MAP")).to_pylist()
    return [StreamItem(row_coordinates(r), "table_map", r["fields"], gtid=r["gtid"]) for r in rows]


def row_change_items(cfg: BinlakeConfig, where: Any, commit_time: Callable[[Any], Any]) -> list[StreamItem] | None:
    """The row changes of ``silver.row_changes`` matching ``where`` as stream items, their commit time
    through ``commit_time`` (delta-rs gives it UTC-aware; the caller says which naive form it needs)
    (None: no such table yet)."""
    changes = open_delta_table(table_location(cfg.warehouse, "silver.row_changes"), cfg.s3)
    if changes is None:
        return None
    rows = changes.to_pyarrow_dataset().to_table(columns=list(ROW_CHANGE_COLUMNS), filter=where).to_pylist()
    return [StreamItem(row_coordinates(r, r["row_index"]), "row", None, r["operation"], r["before"], r["after"],
                       r["gtid"], commit_time(r["commit_time"])) for r in rows]


def stream_items(cfg: BinlakeConfig, source: str, segments: Sequence[Segment]) -> list[StreamItem]:
    """The stream a full replay of a gold table is fed (``spark_jobs.gold.tables.lineage_stream``,
    read here): each segment's TABLE_MAPs and row changes within its coordinates, in Spark's binlog
    order (:func:`order_key`), with the values a Spark ``Row`` carries (a TIMESTAMP naive in local
    time). For a table of a few thousand changes, where a Spark job's fixed cost is most of the replay's."""
    items: list[StreamItem] = []
    for seg in segments:
        where = segment_filter(source, seg)
        found = (table_map_items(cfg, where) or []) + (row_change_items(cfg, where, _naive_local) or [])
        items += [item for item in found if _within(item.at, seg)]
    return sorted(items, key=lambda item: order_key(item.at))


def order_key(at: Coordinates) -> tuple[int, str, int, int, int]:
    """``at`` in binlog order, as Spark compares :func:`spark_jobs.gold.tables.stream_coordinates`."""
    return at.file_seq, at.file, at.pos, at.payload_index, at.row_index


def _within(at: Coordinates, seg: Segment) -> bool:
    key = order_key(at)
    return (seg.after is None or key > order_key(seg.after)) and (seg.before is None or key < order_key(seg.before))


def row_coordinates(row: Mapping[str, Any], row_index: int = -1) -> Coordinates:
    """The binlog coordinates of a silver / bronze row read as a dict (``file_seq`` NULL reads as 0,
    ``payload_index`` NULL as -1, as Spark's :func:`spark_jobs.gold.tables.stream_coordinates` orders them)."""
    payload = row.get("payload_index")
    return Coordinates(row.get("file_seq") or 0, row["pos"], -1 if payload is None else payload, row_index, row["file"])
