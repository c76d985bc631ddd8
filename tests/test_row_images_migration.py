"""silver.row_changes written by the previous layout (each image twice: ``before`` / ``after`` as
``map<string,string>`` and ``before_json`` / ``after_json``) is migrated by the ingest's first
step, once: one overwrite commit, ``before := before_json``, ``after := after_json``, the maps
gone, every other column, the partitioning and the rows as they were (issue 37).

The old table is built here with delta-rs in the old schema (no Spark: ``ensure_table`` migrates
before it would need a session)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from binlake.config import BinlakeConfig
from binlake.lake import tables
from binlake.lake.row_images import is_old_layout, migrate_row_changes, old_layout_message
from binlake.lake.tables import table_location
from spark_jobs.lake import ensure_table

NEW = tables.table("silver.row_changes").arrow_schema
TEXT_MAP = pa.map_(pa.string(), pa.string())
#: binlake's table properties, which the previous version set too
PROPERTIES = dict(tables.table("silver.row_changes").properties)


def _old_schema() -> pa.Schema:
    """The previous layout: the maps where the JSON is now, the JSON columns right after them."""
    fields = []
    for f in NEW:
        if f.name in ("before", "after"):
            fields.append(pa.field(f.name, TEXT_MAP))
            continue
        if f.name == "event_type":
            fields += [pa.field("before_json", pa.string()), pa.field("after_json", pa.string())]
        fields.append(f)
    return pa.schema(fields)


def _old_rows() -> list[dict[str, object]]:
    when = dt.datetime(2026, 11, 20, 10, tzinfo=dt.UTC)
    base = {"source": "s1", "file": "binlog.000001", "file_seq": 1, "payload_index": None,
            "gtid": "0-1-5", "trx_pos": 4, "commit_time": when, "event_time": when, "server_id": 1, "db": "shop",
            "table_name": "t", "event_type": "UPDATE_ROWS_V1", "commit_date": when.date()}
    images = [("insert", None, None, [("id", "1"), ("f", "1e15"), ("n", None)], '{"id":1,"f":1000000000000000.0,"n":null}'),
              ("update", [("id", "1")], '{"id":1}', [("id", "2"), ("d", "12.50")], '{"id":2,"d":"12.50"}'),
              ("delete", [("id", "2")], '{"id":2}', None, None)]
    return [{**base, "pos": 100 + i, "row_index": 0, "operation": op, "before": bm, "before_json": bj,
             "after": am, "after_json": aj} for i, (op, bm, bj, am, aj) in enumerate(images)]


@pytest.fixture
def old_warehouse(tmp_path: Path) -> BinlakeConfig:
    cfg = BinlakeConfig(warehouse=str(tmp_path / "wh"), state_dir=str(tmp_path / "state"))
    location = table_location(cfg.warehouse, "silver.row_changes")
    write_deltalake(location, pa.Table.from_pylist(_old_rows(), schema=_old_schema()),
                    partition_by=["source", "commit_date"], configuration=PROPERTIES)
    write_deltalake(location, pa.Table.from_pylist(_old_rows()[:1], schema=_old_schema()).set_column(
        1, "file", pa.array(["binlog.000002"])), mode="append")  # a second commit, a second file
    return cfg


def test_the_ingest_migrates_the_previous_layout_once(old_warehouse: BinlakeConfig) -> None:
    location = table_location(old_warehouse.warehouse, "silver.row_changes")
    old = DeltaTable(location)
    assert is_old_layout(old) and old.version() == 1
    want = sorted(((r["file"], r["pos"], r["operation"], r["before_json"], r["after_json"])
                   for r in old.to_pyarrow_table().to_pylist()), key=str)

    ensure_table(None, old_warehouse, "silver.row_changes")  # type: ignore[arg-type] - no Spark needed

    new = DeltaTable(location)
    assert new.version() == 2  # one commit: the schema change and the rows rewritten
    assert not is_old_layout(new) and new.metadata().partition_columns == ["source", "commit_date"]
    assert {k: new.metadata().configuration.get(k) for k in PROPERTIES} == PROPERTIES  # kept
    got = new.to_pyarrow_table()
    assert got.schema.names == NEW.names
    assert got.schema.field("before").type == pa.string() and got.schema.field("after").type == pa.string()
    rows = got.to_pylist()
    assert sorted(((r["file"], r["pos"], r["operation"], r["before"], r["after"]) for r in rows), key=str) == want
    assert json.loads(next(r["after"] for r in rows if r["operation"] == "update")) == {"id": 2, "d": "12.50"}
    assert len(rows) == 4 and {r["gtid"] for r in rows} == {"0-1-5"}
    # again: nothing to do, no commit
    assert migrate_row_changes(location) is False
    ensure_table(None, old_warehouse, "silver.row_changes")  # type: ignore[arg-type]
    assert DeltaTable(location).version() == 2


def test_a_new_or_absent_table_is_left_alone(tmp_path: Path) -> None:
    location = str(tmp_path / "row_changes")
    assert migrate_row_changes(location) is False  # no table
    write_deltalake(location, pa.Table.from_pylist([], schema=NEW), partition_by=["source", "commit_date"])
    assert migrate_row_changes(location) is False and DeltaTable(location).version() == 0
    assert "binlake ingest" in old_layout_message(location) and location in old_layout_message(location)
