"""binlake.gold.state: the ordered per-table replay (pure; the Spark job runs it per table)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from binlake.gold.errors import ConversionError
from binlake.gold.schema_history import Coordinates, DdlStatement, build_history
from binlake.gold.state import (
    COPIES_COLUMN,
    HISTORY_COLUMNS,
    META_COLUMNS,
    StreamItem,
    TableReplayer,
    best_table_map,
    final_schema,
)

FULL_MAP = {"columns": [
    {"name": "id", "type": "LONG", "unsigned": False, "nullable": False, "primary_key": True},
    {"name": "amount", "type": "NEWDECIMAL", "precision": 12, "scale": 2, "nullable": True},
    {"name": "note", "type": "VARCHAR", "charset": "latin1", "length": 40, "nullable": True},
], "primary_key": ["id"]}
NO_LOG_MAP = {"columns": [
    {"name": f"col_{i + 1}", "type": t, "nullable": True, "name_from": "fallback"}
    for i, t in enumerate(("LONG", "NEWDECIMAL", "VARCHAR"))]}
WITH_STATUS = {"columns": [*FULL_MAP["columns"][:2],
                           {"name": "status", "type": "VARCHAR", "charset": "utf8mb4", "nullable": False},
                           FULL_MAP["columns"][2]], "primary_key": ["id"]}
DDL = [DdlStatement(Coordinates(1, 4, file="b.1"), "shop",
                    "CREATE TABLE orders (id INT PRIMARY KEY, amount DECIMAL(12,2), note VARCHAR(40) CHARSET latin1)")]


class Feed:
    """Builds a binlog-ordered stream: each call takes the next position."""

    def __init__(self) -> None:
        self.items: list[StreamItem] = []
        self.pos = 100

    def table_map(self, fields: dict[str, Any]) -> None:
        self.pos += 10
        self.items.append(StreamItem(Coordinates(1, self.pos, file="b.1"), "table_map", json.dumps(fields)))

    def row(self, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        self.pos += 10
        self.items.append(StreamItem(Coordinates(1, self.pos, -1, 0, "b.1"), "row", None, op,
                                     None if before is None else json.dumps(before),
                                     None if after is None else json.dumps(after), f"0-1-{self.pos}"))


def _columns(replayer: TableReplayer) -> tuple[str, ...]:
    """The names of a replayed row's values (the gold table's columns, as ``gold_schema_ddl`` orders them)."""
    final = replayer.final
    return (*(c.name for c in final.columns), *META_COLUMNS, *(() if final.primary_key else (COPIES_COLUMN,)))


def _replay(feed: Feed, ddl: list[DdlStatement]) -> tuple[TableReplayer, dict[Any, dict[str, Any]]]:
    versions = [v for v in build_history(ddl) if v.table == "orders"]
    final = final_schema(versions, None)
    assert final is not None
    replayer = TableReplayer("src", versions, final)
    replayer.feed_all(feed.items)
    names = _columns(replayer)
    rows = {r[0]: dict(zip(names, r)) for r in replayer.rows()}
    return replayer, rows


def test_insert_update_pk_change_delete_with_minimal_images() -> None:
    f = Feed()
    f.table_map(FULL_MAP)
    f.row("insert", None, {"id": 1, "amount": "10.50", "note": "a"})
    f.row("insert", None, {"id": 2, "amount": "2.00", "note": "b"})
    f.table_map(NO_LOG_MAP)  # MINIMAL image: key before, changed columns after
    f.row("update", {"col_1": 1}, {"col_1": 10})
    f.row("update", {"col_1": 10}, {"col_3": "0x636166e9"})  # latin1 'café', no charset known
    f.row("delete", {"col_1": 2}, None)
    replayer, rows = _replay(f, DDL)
    assert set(rows) == {10}
    assert rows[10]["amount"] == Decimal("10.50") and rows[10]["note"] == "café"
    assert rows[10]["_op"] == "update" and rows[10]["_binlog_pos"] == f.items[-2].at.pos
    assert not replayer.report.warnings and replayer.report.changes == 5


def test_add_column_default_reaches_old_rows() -> None:
    ddl = [*DDL, DdlStatement(Coordinates(1, 135, file="b.1"), "shop",
                              "ALTER TABLE orders ADD status VARCHAR(10) NOT NULL DEFAULT 'new' AFTER amount")]
    f = Feed()
    f.table_map(FULL_MAP)
    f.row("insert", None, {"id": 1, "amount": "1.00", "note": None})
    f.pos = 140
    f.table_map(WITH_STATUS)
    f.row("insert", None, {"id": 2, "amount": "2.00", "status": "paid", "note": "x"})
    replayer, rows = _replay(f, ddl)
    assert rows[1]["status"] == "new" and rows[2]["status"] == "paid"
    assert _columns(replayer)[:4] == ("id", "amount", "status", "note")


def test_stale_table_map_is_said_not_guessed() -> None:
    f = Feed()
    f.table_map(WITH_STATUS)  # 4 columns, the DDL knows 3: the ALTER is not in the archive
    f.row("insert", None, {"id": 1, "amount": "1.00", "status": "x", "note": None})
    replayer, rows = _replay(f, DDL)
    assert rows == {}
    assert any("TABLE_MAP has 4 columns" in w for w in replayer.report.warnings)


def test_table_without_primary_key_counts_copies() -> None:
    ddl = [DdlStatement(Coordinates(1, 4, file="b.1"), "shop", "CREATE TABLE orders (a INT, b VARCHAR(3))")]
    tm = {"columns": [{"name": "a", "type": "LONG"}, {"name": "b", "type": "VARCHAR", "charset": "utf8mb4"}]}
    f = Feed()
    f.table_map(tm)
    for _ in range(3):
        f.row("insert", None, {"a": 1, "b": "x"})
    f.row("delete", {"a": 1, "b": "x"}, None)
    f.row("update", {"a": 1, "b": "x"}, {"a": 2, "b": "x"})
    _replayer, rows = _replay(f, ddl)
    assert {k: v[COPIES_COLUMN] for k, v in rows.items()} == {1: 1, 2: 1}


def test_update_of_unknown_row_is_said() -> None:
    f = Feed()
    f.table_map(FULL_MAP)
    f.row("update", {"id": 7, "amount": "1.00", "note": None}, {"id": 7, "amount": "2.00", "note": None})
    replayer, rows = _replay(f, DDL)
    assert rows[7]["amount"] == Decimal("2.00")
    assert replayer.report.warnings["update/delete of a row gold did not hold"] == 1


def test_table_map_only_schema_uses_the_best_informed_map() -> None:
    """No DDL in the archive: MINIMAL (charsets known) and NO_LOG (nothing known) maps of the
    same table; the final schema comes from the best-informed one and every event converts
    into it (the bug this guards: text kept as str in a column typed BINARY by another map)."""
    minimal = {"columns": [{"name": "col_1", "type": "LONG", "name_from": "fallback", "unsigned": False},
                           {"name": "col_2", "type": "VARCHAR", "charset": "latin1", "name_from": "fallback"}]}
    no_log = {"columns": [{"name": "col_1", "type": "LONG", "name_from": "fallback"},
                          {"name": "col_2", "type": "VARCHAR", "name_from": "fallback"}]}
    best = best_table_map([(Coordinates(4, 10), minimal), (Coordinates(5, 10), no_log)])
    assert best is minimal
    final = final_schema([], best)
    assert final is not None and [c.name for c in final.columns] == ["@1", "@2"]
    f = Feed()
    f.table_map(minimal)
    f.row("insert", None, {"col_1": 1, "col_2": "a"})
    f.table_map(no_log)
    f.row("insert", None, {"col_1": 2, "col_2": "0xe9"})  # latin1 'é', charset unknown here
    replayer = TableReplayer("src", [], final)
    replayer.feed_all(f.items)
    rows = sorted(replayer.rows())
    assert [(r[0], r[1]) for r in rows] == [(1, "a"), (2, "é")]
    assert replayer.report.warnings["schema from TABLE_MAPs only (no DDL / seed)"] == 2


def test_partial_json_update_applies_to_the_held_document() -> None:
    """MySQL 8 PARTIAL_JSON with a MINIMAL before image: silver holds only the diffs; gold
    applies them (values are JSON text) to the document it holds, in MySQL's key order."""
    ddl = [DdlStatement(Coordinates(1, 4, file="b.1"), "shop",
                        "CREATE TABLE orders (id INT PRIMARY KEY, doc JSON)")]
    tm = {"columns": [{"name": "col_1", "type": "LONG", "nullable": False},
                      {"name": "col_2", "type": "JSON", "nullable": True}]}
    f = Feed()
    f.table_map(tm)
    f.row("insert", None, {"col_1": 1, "col_2": '{"age": 24, "name": "Joe"}'})
    diffs = [{"op": "REPLACE", "path": "$.age", "value": "26"},
             {"op": "INSERT", "path": "$.ab", "value": '[1, 2.5, "é"]'},
             {"op": "REMOVE", "path": "$.name"}]
    f.row("update", {"col_1": 1}, {"col_2": {"partial_json": diffs}})
    f.row("update", {"col_1": 7}, {"col_2": {"partial_json": diffs[:1]}})  # a row gold never saw
    replayer, rows = _replay(f, ddl)
    assert rows[1]["doc"] == '{"ab": [1, 2.5, "é"], "age": 26}'
    assert replayer.report.warnings == {
        "update/delete of a row gold did not hold": 1,
        "update of a row gold did not hold (archive starts later; no seed)": 1,
        "row change not applied: partial JSON update of a document gold does not hold": 1}


def _history(feed: Feed, ddl: list[DdlStatement]) -> list[dict[str, Any]]:
    versions = [v for v in build_history(ddl) if v.table == "orders"]
    final = final_schema(versions, None)
    assert final is not None
    replayer = TableReplayer("src", versions, final, history=True)
    replayer.feed_all(feed.items)
    names = [c.name for c in final.columns] + list(HISTORY_COLUMNS)
    return [dict(zip(names, r)) for r in replayer.history_rows()]


def test_scd2_history_versions_chain_and_end() -> None:
    """Every version of every row: an update ends a version where the next begins, a PK change
    ends the old key's version, a delete and a DROP TABLE end the last ones; an ADD COLUMN
    shows its default on the versions open at the ALTER, not on those that ended before it."""
    ddl = [*DDL, DdlStatement(Coordinates(1, 155, file="b.1"), "shop",
                              "ALTER TABLE orders ADD status VARCHAR(10) NOT NULL DEFAULT 'new' AFTER amount"),
           DdlStatement(Coordinates(1, 500, file="b.1"), "shop", "DROP TABLE orders"),
           DdlStatement(Coordinates(1, 510, file="b.1"), "shop",
                        "CREATE TABLE orders (id INT PRIMARY KEY, amount DECIMAL(12,2), "
                        "status VARCHAR(10) NOT NULL DEFAULT 'new', note VARCHAR(40) CHARSET latin1)")]
    f = Feed()
    f.table_map(FULL_MAP)
    f.row("insert", None, {"id": 1, "amount": "1.00", "note": "a"})   # 120
    f.row("update", {"id": 1, "amount": "1.00", "note": "a"}, {"id": 1, "amount": "2.00", "note": "a"})  # 130
    f.row("insert", None, {"id": 2, "amount": "5.00", "note": "b"})   # 140
    f.row("delete", {"id": 2, "amount": "5.00", "note": "b"}, None)   # 150
    f.table_map(WITH_STATUS)  # 160, after the ALTER at 155
    f.row("update", {"id": 1, "amount": "2.00", "status": "new", "note": "a"},
          {"id": 10, "amount": "2.00", "status": "new", "note": "a"})  # 170: PK change
    rows = _history(f, ddl)
    got = [(r["id"], r["amount"], r["status"], r["_op"], r["_valid_from_pos"], r["_valid_to_pos"],
            r["_ended_by"], r["_is_current"]) for r in rows]
    assert got == [(1, Decimal("1.00"), None, "insert", 120, 130, "update", False),
                   (1, Decimal("2.00"), "new", "update", 130, 170, "update", False),
                   (2, Decimal("5.00"), None, "insert", 140, 150, "delete", False),
                   (10, Decimal("2.00"), "new", "update", 170, 500, "drop table", False)]
    assert rows[0]["_valid_to_gtid"] == rows[1]["_gtid"] == "0-1-130"
    assert rows[3]["_valid_to_gtid"] is None and rows[3]["_valid_to_file"] == "b.1"


def test_scd2_history_of_a_table_without_key_counts_copies() -> None:
    """Two identical rows are two versions; deleting one copy ends one of them."""
    ddl = [DdlStatement(Coordinates(1, 4, file="b.1"), "shop", "CREATE TABLE orders (a INT, b VARCHAR(5))")]
    tm = {"columns": [{"name": "a", "type": "LONG"}, {"name": "b", "type": "VARCHAR", "charset": "utf8mb4"}]}
    f = Feed()
    f.table_map(tm)
    f.row("insert", None, {"a": 1, "b": "x"})
    f.row("insert", None, {"a": 1, "b": "x"})
    f.row("delete", {"a": 1, "b": "x"}, None)
    rows = _history(f, ddl)
    assert [(r["a"], r["_valid_from_pos"], r["_valid_to_pos"], r["_is_current"]) for r in rows] == [
        (1, 120, None, True), (1, 130, 140, False)]


# ------------------------------------------------------------------ resuming (the incremental path)

def _busy_feed() -> Feed:
    """Inserts, a PK change, MINIMAL / NO_LOG images (key before, changed columns after), a delete,
    an insert over an existing key and an update of a row gold never saw."""
    f = Feed()
    f.table_map(FULL_MAP)
    f.row("insert", None, {"id": 1, "amount": "10.50", "note": "a"})
    f.row("insert", None, {"id": 2, "amount": "2.00", "note": "b"})
    f.row("insert", None, {"id": 3, "amount": "3.00", "note": "c"})
    f.table_map(NO_LOG_MAP)
    f.row("update", {"col_1": 1}, {"col_1": 10})
    f.row("update", {"col_1": 10}, {"col_3": "0x636166e9"})
    f.row("delete", {"col_1": 2}, None)
    f.table_map(FULL_MAP)
    f.row("insert", None, {"id": 3, "amount": "9.99", "note": "again"})
    f.row("update", {"id": 8, "amount": "1.00", "note": None}, {"id": 8, "amount": "2.00", "note": None})
    f.row("update", {"id": 10, "amount": "10.50", "note": "café"}, {"id": 2, "amount": "10.50", "note": "x"})
    return f


def _halves(feed: Feed, at: int) -> tuple[TableReplayer, TableReplayer, TableReplayer]:
    """One replay of the whole feed, and the feed replayed in two halves: items before ``at`` by one
    replayer, the rest by another resumed from the first's rows (as a gold table holds them) and its
    last TABLE_MAP."""
    versions = [v for v in build_history(DDL) if v.table == "orders"]
    final = final_schema(versions, None)
    assert final is not None
    whole = TableReplayer("src", versions, final, history=True)
    whole.feed_all(feed.items)
    first = TableReplayer("src", versions, final, history=True)
    first.feed_all(feed.items[:at])
    second = TableReplayer("src", versions, final, history=True)
    second.resume([i for i in feed.items[:at] if i.kind == "table_map"][-1:], list(first.rows()))
    second.feed_all(feed.items[at:])
    return whole, first, second


def test_a_replay_resumed_from_its_rows_equals_one_replay() -> None:
    """Cut anywhere: rows, SCD2 versions (the first half's ended ones plus the second's), changes
    and warnings (added up) equal one replay of the whole feed."""
    feed = _busy_feed()
    for at in range(1, len(feed.items)):
        whole, first, second = _halves(feed, at)
        assert sorted(second.rows()) == sorted(whole.rows()), at
        ended = [v for v in first.history_rows() if not v[-1]]
        assert sorted([*ended, *second.history_rows()], key=repr) == sorted(whole.history_rows(), key=repr), at
        assert first.report.changes + second.report.changes == whole.report.changes
        assert first.report.warnings + second.report.warnings == whole.report.warnings, at


class _Recording(dict[Any, Any]):
    """A replayer's row index that notes every key read or written."""

    def __init__(self, data: dict[Any, Any]) -> None:
        super().__init__(data)
        self.used: set[Any] = set()

    def get(self, key: Any, default: Any = None) -> Any:
        self.used.add(key)
        return super().get(key, default)

    def pop(self, key: Any, *default: Any) -> Any:
        self.used.add(key)
        return super().pop(key, *default)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.used.add(key)
        super().__setitem__(key, value)


def test_keys_touched_by_cover_every_key_the_replay_reads_or_writes() -> None:
    """The superset the Spark job fetches from the gold table: for every change, each key the
    replay looked up, removed or stored is among ``keys_touched_by`` (asked before the change)."""
    versions = [v for v in build_history(DDL) if v.table == "orders"]
    final = final_schema(versions, None)
    assert final is not None
    replayer = TableReplayer("src", versions, final)
    for item in _busy_feed().items:
        predicted = set(replayer.keys_touched_by(item))
        recording = _Recording(replayer._by_key)
        replayer._by_key = recording
        replayer.feed(item)
        assert recording.used <= predicted, (item, recording.used, predicted)
    assert replayer.keys_touched_by(_busy_feed().items[0]) == []  # a TABLE_MAP touches no row


def test_resume_refuses_a_table_map_of_another_shape() -> None:
    """The last TABLE_MAP before the new changes has 4 columns, the gold table 3: not a state a replay
    could hold, so the table is replayed in full."""
    versions = [v for v in build_history(DDL) if v.table == "orders"]
    final = final_schema(versions, None)
    assert final is not None
    f = Feed()
    f.table_map(WITH_STATUS)
    with pytest.raises(ConversionError, match="another shape than the gold table"):
        TableReplayer("src", [], final).resume(f.items, [])
