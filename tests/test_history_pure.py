"""The pure parts of ``asof`` / ``flashback`` without a server or a warehouse: moments resolved to a
cut (MySQL GTID sets with tags, non-prefix sets, same-second commit times, positions), the undo SQL's
literals (what the server reads back), and the range options."""

from __future__ import annotations

import datetime as _dt
from decimal import Decimal

import pytest

from binlake.gold.types import MySQLColumn, Rendering
from binlake.history.errors import HistoryError, MomentError
from binlake.history.literals import identifier, literal, text_literal
from binlake.history.moments import GtidMembership, Moment, Transaction, resolve
from binlake.history.undo import gtid_range, time_window, transactions

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
U2 = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
T0 = _dt.datetime(2026, 11, 28, 9, 0, 0)


def _txn(i: int, gtid: str | None, second: int, file: str = "binlog.000001", seq: int = 1) -> Transaction:
    return Transaction(file, seq, 100 * i, 100 * i + 90, gtid, T0 + _dt.timedelta(seconds=second))


ARCHIVE = [_txn(1, f"{U1}:1", 0), _txn(2, f"{U1}:2", 0), _txn(3, f"{U2}:1", 1),
           _txn(4, f"{U1}:tag1:1", 2, "binlog.000002", 2), _txn(5, f"{U1}:3", 5, "binlog.000002", 2)]


def test_gtid_membership_mysql_sets_tags_and_one_gtid() -> None:
    one = GtidMembership(f"{U1}:2")  # one GTID: everything of that server up to it
    assert one.contains(f"{U1}:1") and one.contains(f"{U1}:2") and not one.contains(f"{U1}:3")
    assert not one.contains(f"{U2}:1") and not one.contains(None) and not one.contains("ANONYMOUS")
    tagged = GtidMembership(f"{U1}:1-2:tag1:1,{U2}:1")
    assert tagged.contains(f"{U1}:TAG1:1") and tagged.contains(f"{U2}:1") and not tagged.contains(f"{U1}:3")
    maria = GtidMembership("0-1-5,1-2-3")
    assert maria.contains("0-9-5") and not maria.contains("0-1-6") and maria.contains("1-1-1")
    with pytest.raises(MomentError, match="neither a MariaDB GTID position"):
        GtidMembership("not a gtid")


def test_resolve_by_set_time_and_position() -> None:
    assert resolve(Moment("gtid", f"{U1}:1-2,{U2}:1"), ARCHIVE, "s").gtid == f"{U2}:1"
    assert resolve(Moment("gtid", f"{U1}:1-3:tag1:1,{U2}:1"), ARCHIVE, "s").gtid == f"{U1}:3"
    with pytest.raises(MomentError, match=rf"includes {U1}:3 .* but not {U1}:tag1:1"):
        resolve(Moment("gtid", f"{U1}:1-3,{U2}:1"), ARCHIVE, "s")
    # whole seconds: both transactions of second 0 are in, the one of second 1 is not
    assert resolve(Moment("time", "2026-11-28 09:00:00.999"), ARCHIVE, "s").gtid == f"{U1}:2"
    assert resolve(Moment("time", "2026-11-28T11:00:04+02:00"), ARCHIVE, "s").gtid == f"{U1}:tag1:1"
    assert resolve(Moment("position", "binlog.000002:490"), ARCHIVE, "s").gtid == f"{U1}:tag1:1"
    assert resolve(Moment("position", "binlog.000002:0"), ARCHIVE, "s").gtid == f"{U2}:1"  # earlier files
    with pytest.raises(MomentError, match="precedes the archive of source s: its first transaction is"):
        resolve(Moment("time", "2026-11-28 08:59:59"), ARCHIVE, "s")
    with pytest.raises(MomentError, match="file binlog.000009 holds no transaction of source s"):
        resolve(Moment("position", "binlog.000009:4"), ARCHIVE, "s")
    with pytest.raises(MomentError, match=f"GTID {U1}:9 .* is not in the archive"):
        resolve(Moment("gtid", f"{U1}:9"), ARCHIVE, "s")
    with pytest.raises(MomentError, match="not a date-time"):
        resolve(Moment("time", "yesterday"), ARCHIVE, "s")


def col(kind: str, **facts: object) -> MySQLColumn:
    return MySQLColumn("c", kind, **facts)  # type: ignore[arg-type]


@pytest.mark.parametrize(("raw", "column", "sql"), [
    (None, col("int"), "NULL"),
    (-1, col("bigint", unsigned=True), "18446744073709551615"),  # decoded signed: the schema says UNSIGNED
    ("18446744073709551615", col("bigint", unsigned=True), "18446744073709551615"),
    ("-0.000000000000000000000000000001", col("decimal", precision=65, scale=30), "-0.000000000000000000000000000001"),
    (3.14159, col("float"), "3.14159"),
    (-1e300, col("double"), "-1e+300"),
    ("0000-00-00", col("date"), "'0000-00-00'"),  # gold holds NULL; the undo puts the zero date back
    ("2024-02-29 12:00:00.123456", col("datetime", fsp=6), "'2024-02-29 12:00:00.123456'"),
    ("-838:59:59", col("time"), "'-838:59:59'"),
    (2155, col("year"), "2155"),
    ("0x05", col("bit", length=3), "5"),
    ("0x00ff", col("varbinary", length=8), "X'00FF'"),
    ("0x", col("blob"), "X''"),
    ("it's", col("varchar", charset="utf8mb4"), "_utf8mb4'it''s'"),
    ("back\\slash\n", col("varchar", charset="utf8mb4"), "_utf8mb4 X'6261636B5C736C6173680A'"),
    ("héllo 😀", col("text", charset="latin1"), "_utf8mb4'héllo 😀'"),
    ('{"k": [1, 2.5]}', col("json"), "_utf8mb4'{\"k\": [1, 2.5]}'"),
    ("a,d", col("set", members=("a", "b", "c", "d")), "_utf8mb4'a,d'"),
    (2, col("enum"), "2"),  # the binlog gave the index only: the server reads it the same
])
def test_literals_read_back_as_the_value(raw: object, column: MySQLColumn, sql: str) -> None:
    assert literal(raw, column) == sql


def test_literals_of_unknown_charsets_and_refusals() -> None:
    # no charset in the TABLE_MAP and bytes that are not UTF-8: the decoder wrote 0x<hex>
    assert literal("0xe9", col("varchar", charset="latin1"), Rendering.RAW_OR_HEX) == "_utf8mb4'é'"
    assert text_literal("tab\there") == "_utf8mb4 X'7461620968657265'"
    assert identifier("we`ird") == "`we``ird`"
    with pytest.raises(HistoryError, match="partial JSON update"):
        literal({"partial_json": []}, col("json"))
    with pytest.raises(HistoryError, match="is not a number"):
        literal(Decimal("1.50"), col("decimal", precision=10, scale=2))  # images hold JSON numbers or text


def test_range_options() -> None:
    assert gtid_range("0-1-5..0-1-9").mariadb_range == (0, 5, 9)
    assert gtid_range(f"{U1}:5..{U1}:9").includes(_txn(1, f"{U1}:7", 0))
    assert not gtid_range(f"{U1}:5-9").includes(_txn(1, f"{U1}:10", 0))
    with pytest.raises(MomentError, match="one domain"):
        gtid_range("0-1-5..1-1-9")
    with pytest.raises(MomentError, match="first..last"):
        gtid_range("0-1-5")
    with pytest.raises(MomentError, match="of one server"):
        gtid_range(f"{U1}:5..{U2}:9")
    window = time_window("2026-11-28 09:00:01", None)
    assert [t.gtid for t in ARCHIVE if window.includes(t)] == [f"{U2}:1", f"{U1}:tag1:1", f"{U1}:3"]
    with pytest.raises(MomentError, match="needs --from-time"):
        time_window(None, None)
    assert transactions([f" {U1}:2 "]).includes(ARCHIVE[1])


def test_refusals_name_the_ddl_and_the_gap() -> None:
    from binlake.gold.schema_history import Coordinates, SchemaVersion
    from binlake.history.asof import _check_followable
    from binlake.history.errors import CoverageGapError, SchemaChangeError
    from binlake.history.undo import check_range_coverage

    unknown = SchemaVersion("shop", "t", 2, Coordinates(3, 420, file="binlog.000003"), "ddl",
                            "ALTER TABLE t  PARTITION BY weird", None, "statement not understood")
    with pytest.raises(SchemaChangeError, match=r"shop.t: DDL binlake cannot follow at binlog.000003:420 "
                                                r"\(statement not understood\): `ALTER TABLE t PARTITION BY weird`"):
        _check_followable([unknown], "shop", "t")
    rows = [{"file": f"binlog.00000{i}", "chain_index": i, "status": "GAP" if i == 3 else "OK",
             "missing_gtids": "0:40-41" if i == 3 else ""} for i in range(1, 5)]
    check_range_coverage(rows, "binlog.000003", "binlog.000004", "s")  # the GAP is before the range
    with pytest.raises(CoverageGapError, match=r"crosses a GAP of source s before file binlog.000003 \(missing: 0:40-41\)"):
        check_range_coverage(rows, "binlog.000002", "binlog.000003", "s")


def test_take_back_undoes_newest_first_and_says_when_it_cannot() -> None:
    import json

    from binlake.gold.schema_history import Coordinates, TableSchema
    from binlake.gold.state import StreamItem
    from binlake.history.unapply import Unusable, take_back

    schema = TableSchema((MySQLColumn("id", "int"), MySQLColumn("v", "varchar", charset="utf8mb4")), ("id",))
    table_map = StreamItem(Coordinates(1, 10), "table_map", json.dumps(
        {"columns": [{"name": "id", "type": "LONG"}, {"name": "v", "type": "VARCHAR", "charset": "utf8mb4"}]}))

    def change(pos: int, op: str, before: dict[str, object] | None, after: dict[str, object] | None) -> StreamItem:
        return StreamItem(Coordinates(1, pos), "row", None, op, None if before is None else json.dumps(before),
                          None if after is None else json.dumps(after), f"0-1-{pos}")

    later = [table_map, change(20, "update", {"id": 1, "v": "a"}, {"id": 2, "v": "b"}),
             change(30, "delete", {"id": 3, "v": "c"}, None), change(40, "insert", None, {"id": 4, "v": "d"})]
    # gold now: 2 (moved from 1), 4 (inserted); 3 deleted. Taken back: 1 and 3, as before the changes
    assert sorted(take_back(schema, [(2, "b"), (4, "d")], later)) == [(1, "a"), (3, "c")]
    with pytest.raises(Unusable, match="made is not in the gold state"):
        take_back(schema, [(2, "b")], later)  # row 4 missing: not the state those changes left
    minimal = [table_map, change(50, "update", {"id": 2}, {"v": "z"})]
    with pytest.raises(Unusable, match="not full"):
        take_back(schema, [(2, "z")], minimal)
