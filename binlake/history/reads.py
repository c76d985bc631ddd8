"""What ``asof`` / ``flashback`` read from the warehouse, through delta-rs (no JVM): one source's
transactions, table DDL, reconciliation rows, and one table's TABLE_MAPs and row changes.

Why delta-rs and not Spark: every read is one source's partition, filtered further by table and
binlog coordinates (Parquet statistics skip the rest), and the answer is replayed in this process
anyway (one table's rows in binlog order: what gold's executor does for the same table). A JVM would
cost more to start than these reads take up to millions of row changes; past that, gold's
``__history`` table or a Spark job is the tool (docs/history.md says where the line is).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from binlake.config import BinlakeConfig
from binlake.gold.reads import load_ddl as gold_ddl
from binlake.gold.reads import row_change_items, row_coordinates, segment_filter, table_map_items
from binlake.gold.schema_history import Coordinates, DdlStatement
from binlake.gold.state import Segment, StreamItem
from binlake.history.errors import HistoryError
from binlake.history.moments import Transaction
from binlake.lake.delta_tables import open_delta_table
from binlake.lake.tables import table_location
from binlake.sql.values import canonical

T = TypeVar("T")


def read_rows(cfg: BinlakeConfig, full_name: str, where: Any, columns: Sequence[str]) -> list[dict[str, Any]] | None:
    """The rows of ``full_name`` matching the pyarrow expression ``where`` (None: the table does not
    exist yet), values canonical (naive UTC timestamps, bytes)."""
    table = open_delta_table(table_location(cfg.warehouse, full_name), cfg.s3)
    if table is None:
        return None
    data = table.to_pyarrow_dataset().to_table(columns=list(columns), filter=where)
    names = data.column_names
    lists = [[canonical(v, c.type) for v in c.to_pylist()] for c in data.columns]
    return [dict(zip(names, values)) for values in zip(*lists)] if lists else []


def _must(rows: list[T] | None, full_name: str, cfg: BinlakeConfig) -> list[T]:
    if rows is None:
        raise HistoryError(f"{full_name} does not exist under warehouse {cfg.warehouse}: nothing ingested yet")
    return rows


def load_transactions(cfg: BinlakeConfig, source: str) -> list[Transaction]:
    """The source's complete transactions (``silver.transactions``), in no particular order."""
    import pyarrow.dataset as ds

    rows = _must(read_rows(cfg, "silver.transactions", (ds.field("source") == source) & ds.field("complete"),
                           ("file", "file_seq", "start_pos", "end_pos", "gtid", "commit_time")),
                 "silver.transactions", cfg)
    return [Transaction(r["file"], r["file_seq"] or 0, r["start_pos"], r["end_pos"] or r["start_pos"], r["gtid"],
                        r["commit_time"]) for r in rows]


def load_ddl(cfg: BinlakeConfig, source: str) -> list[DdlStatement]:
    """The source's table DDL (``silver.statements``), as gold's schema history reads it."""
    ddl = gold_ddl(cfg, source)
    if ddl is None:
        raise HistoryError(f"silver.statements does not exist under warehouse {cfg.warehouse}: nothing ingested yet")
    return ddl


def load_reconciliation(cfg: BinlakeConfig, source: str) -> list[dict[str, Any]] | None:
    """The source's ``meta.gtid_reconciliation`` rows (None: reconciliation never ran)."""
    import pyarrow.dataset as ds

    return read_rows(cfg, "meta.gtid_reconciliation", ds.field("source") == source,
                     ("file", "seq", "chain_index", "status", "missing_gtids", "missing_files", "detail"))


def _within(at: Coordinates, seg: Segment, after: Coordinates | None, until: Coordinates | None) -> bool:
    return ((seg.after is None or at > seg.after) and (seg.before is None or at < seg.before)
            and (after is None or at > after) and (until is None or at < until))


def _files_between(where: Any, after: Coordinates | None, until: Coordinates | None) -> Any:
    """``where`` narrowed to the numbered files between ``after`` and ``until`` (Parquet statistics
    then skip the data files of other files); files without a number are always read."""
    import pyarrow.dataset as ds

    seq = ds.field("file_seq")
    if after is not None:
        where = where & ((seq >= after.file_seq) | seq.is_null())
    if until is not None:
        where = where & ((seq <= until.file_seq) | seq.is_null())
    return where


def count_changes(cfg: BinlakeConfig, source: str, segments: Sequence[Segment], split: Coordinates,
                  end: Coordinates) -> tuple[int, int, int]:
    """The table's row changes before ``split``, from it through ``end``, and after ``end`` but
    before ``split``: what a replay from the start and a take-back from gold (state at ``end``) would
    each work through, and what gold lacks before ``split`` (coordinates only are read)."""
    before = after = missing = 0
    for seg in segments:
        rows = _must(read_rows(cfg, "silver.row_changes", segment_filter(source, seg),
                               ("file", "file_seq", "pos", "payload_index", "row_index")), "silver.row_changes", cfg)
        for r in rows:
            at = row_coordinates(r, r["row_index"])
            if _within(at, seg, None, None):
                before += at < split
                after += split <= at <= end
                missing += end < at < split
    return before, after, missing


def load_stream(cfg: BinlakeConfig, source: str, segments: Sequence[Segment], *,
                after: Coordinates | None = None, until: Coordinates | None = None) -> list[StreamItem]:
    """The TABLE_MAPs and row changes feeding a table made of ``segments`` (gold's lineage), strictly
    after ``after`` and strictly before ``until`` (None: unbounded), in binlog order."""
    items: list[StreamItem] = []
    for seg in segments:
        mine = _files_between(segment_filter(source, seg), after, until)
        found = (_must(table_map_items(cfg, mine), "bronze.events", cfg)
                 + _must(row_change_items(cfg, mine, canonical), "silver.row_changes", cfg))
        items += [item for item in found if _within(item.at, seg, after, until)]
    items.sort(key=lambda item: item.at)
    return items
