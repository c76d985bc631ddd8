"""binlake.gold.seed: a real ``mariadb-dump --single-transaction --master-data=2 --gtid --hex-blob``
(tests/fixtures/gold, see its README for the SQL that made it) parsed into a seed snapshot; its
rows converted by the replayer into gold values equal to what the SQL stored; the GTID position
decides which archived changes still apply."""

from __future__ import annotations

import datetime as _dt
import json
from decimal import Decimal
from pathlib import Path

import pytest

from binlake.gold.errors import SnapshotError
from binlake.gold.schema_history import Coordinates, TableSchema, build_history
from binlake.gold.seed import SnapshotPosition, dump_position, parse_dump
from binlake.gold.state import COPIES_COLUMN, META_COLUMNS, StreamItem, TableReplayer, final_schema
from spark_jobs.gold.job import seed_statements

DUMP = (Path(__file__).parent / "fixtures" / "gold" / "mariadb-dump-gtid.sql").read_text(encoding="utf-8")


def _seeded_replayer() -> tuple[TableReplayer, TableSchema]:
    """A replayer of the real dump's table ``t`` (schema from its CREATE TABLE, rows seeded, at
    its GTID position), and that table's final schema."""
    snap = parse_dump(DUMP)
    versions = [v for v in build_history([], seed_statements(snap.schema_sql)) if v.table == "t"]
    final = final_schema(versions, None)
    assert final is not None
    replayer = TableReplayer("src", versions, final, snapshot=snap.position)
    replayer.seed(snap.tables[0])
    return replayer, final


def test_position_rows_and_schema_of_a_real_dump() -> None:
    snap = parse_dump(DUMP)
    assert snap.position == SnapshotPosition("0-7-3", "mariadb")
    (table,) = snap.tables
    assert (table.db, table.table, table.columns) == ("shop", "t", None)
    assert table.rows[0] == ("1", b"\x02\xaa", b"\x00\xff''\\\n", "it's \\ é😀\n", "café", "2025-01-02 03:04:05.678",
                             '{"a": [1, 2.5]}', "b", "18446744073709551615", "0000-00-00", "-838:59:59.00",
                             "3.14159")
    assert table.rows[1] == ("2",) + (None,) * 11
    assert snap.schema_sql.startswith("USE `shop`;\nCREATE TABLE `t` (")


def _columns(replayer: TableReplayer) -> tuple[str, ...]:
    """The names of a replayed row's values (the gold table's columns, as ``gold_schema_ddl`` orders them)."""
    final = replayer.final
    return (*(c.name for c in final.columns), *META_COLUMNS, *(() if final.primary_key else (COPIES_COLUMN,)))


def test_seed_rows_become_gold_values() -> None:
    replayer, _ = _seeded_replayer()
    replayer.feed_all(())
    rows = {r[0]: dict(zip(_columns(replayer), r)) for r in replayer.rows()}
    one = rows[1]
    assert one["b"] == b"\x02\xaa" and one["bl"] == b"\x00\xff''\\\n" and one["tx"] == "it's \\ é😀\n"
    assert one["l"] == "café" and one["ts"] == _dt.datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=_dt.UTC)
    assert json.loads(one["j"]) == {"a": [1, 2.5]} and one["e"] == "b"
    assert one["bu"] == Decimal("18446744073709551615") and one["d"] is None  # zero date: NULL
    assert one["tm"] == "-838:59:59.00" and one["f"] == pytest.approx(3.14159, rel=1e-6)
    assert one["_op"] == "snapshot" and one["_binlog_file"] is None
    assert all(v is None for k, v in rows[2].items() if not k.startswith("_") and k != "id")
    assert replayer.report.seeded == 2 and not replayer.report.warnings


def test_empty_binary_and_literal_forms() -> None:
    """``--hex-blob`` leaves an empty binary value as ``''``; bit and ``_binary`` literals are bytes."""
    dump = ("-- SET GLOBAL gtid_slave_pos='0-1-9';\nUSE `s`;\nCREATE TABLE t (id INT PRIMARY KEY, vb VARBINARY(4), "
            "b BIT(9), tx TEXT);\nINSERT INTO `t` (`id`, `vb`, `b`, `tx`) VALUES (1,'',b'100000001',_binary 'é'),"
            "(-2,0x00,NULL,'0x41');")
    snap = parse_dump(dump)
    versions = [v for v in build_history([], seed_statements(snap.schema_sql)) if v.table == "t"]
    final = final_schema(versions, None)
    assert final is not None and snap.tables[0].columns == ("id", "vb", "b", "tx")
    replayer = TableReplayer("src", versions, final)
    replayer.seed(snap.tables[0])
    rows = {r[0]: r[1:4] for r in replayer.rows()}
    assert rows == {1: (b"", b"\x01\x01", "é"), -2: (b"\x00", None, "0x41")}


def test_only_changes_after_the_position_apply() -> None:
    """0-7-3 is in the snapshot (skipped), 0-7-4 is not (applied); another domain is never in it."""
    replayer, final = _seeded_replayer()
    columns = [{"name": c.name, "type": "LONG" if c.name == "id" else "BLOB", "nullable": True}
               for c in final.columns]
    tm = StreamItem(Coordinates(2, 100, file="binlog.000002"), "table_map", json.dumps({"columns": columns}))
    stale = StreamItem(Coordinates(2, 110, -1, 0, "binlog.000002"), "row", None, "delete",
                       json.dumps({"id": 1}), None, "0-7-3")
    fresh = StreamItem(Coordinates(2, 120, -1, 0, "binlog.000002"), "row", None, "delete",
                       json.dumps({"id": 2}), None, "0-7-4")
    replayer.feed_all([tm, stale, fresh])
    assert [r[0] for r in replayer.rows()] == [1]
    assert (replayer.report.in_snapshot, replayer.report.changes) == (1, 1)


def test_positions_and_missing_position() -> None:
    maria = SnapshotPosition("0-7-10,1-9-5", "mariadb")
    assert maria.contains("0-8-10") and not maria.contains("0-7-11") and maria.contains("1-1-5")
    assert not maria.contains("2-7-1") and not maria.contains(None) and not maria.contains("ANONYMOUS")
    mysql = dump_position("SET @@GLOBAL.GTID_PURGED=/*!80000 '+'*/ '3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5';")
    assert mysql.flavor == "mysql" and mysql.contains("3e11fa47-71ca-11e1-9e33-c80aa9429562:5")
    assert not mysql.contains("3e11fa47-71ca-11e1-9e33-c80aa9429562:6")
    with pytest.raises(SnapshotError, match="records no GTID position"):
        parse_dump("CREATE TABLE t (a INT); INSERT INTO t VALUES (1);")
