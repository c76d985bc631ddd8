"""Gold over the MySQL 8.x fixture binlogs (tests/fixtures/binlogs, see PROVENANCE.tsv): files
written with FULL row metadata (real column names in every TABLE_MAP) and files with
``binlog_row_metadata=MINIMAL`` where only the CREATE TABLE in the archive names and types the
columns ("DDL only"). Each file is its own source, ingested by the real Spark job, then gold.

None of these files comes with the server's final ``SELECT``, so the expected tables are the
binlog's own row events applied in order, as MariaDB's independent decoder prints them
(``mariadb-binlog -v --base64-output=DECODE-ROWS <file>``; quoted in each expectation's comment),
typed as docs/gold.md says. mariadb-binlog does not print MySQL's binary JSON, so the JSON
file's expectation is its documents as the row images carry them (the generated columns
``name`` / ``age`` of the same images agree) with the partial-JSON diffs applied.
"""

from __future__ import annotations

import datetime as _dt
import shutil
import sys
from decimal import Decimal as D
from pathlib import Path
from typing import Any

import pytest
from conftest import make_test_config

from spark_jobs.gold.job import GoldResult, gold_location, gold_table_name, run_gold
from spark_jobs.ingest import BinlogObject, run_ingest

FIX = Path(__file__).parent / "fixtures" / "binlogs"
BB = "blackbeam__rust_mysql_common/test-data__binlogs__"
RU = "rust-us__mysql-cdc-rs/tests__events__8.0__"
#: source -> fixture file; FULL metadata: bit, invisible, enumset (8.0.26 / 8.0.28);
#: DDL only: lineitem (8.0.31), int / update / delete (8.2.0), json (8.0.22), gcol (8.0.17)
FILES = {
    "my8-bit": BB + "mysql_type_bit.000001",
    "my8-invisible": BB + "binlog-invisible-columns.000001",
    "my8-enumset": BB + "mysql-enum-string-set.000001",
    "my8-lineitem": RU + "02_query_bigger__binlog.000733",
    "my8-int": RU + "19_30_Table_map_event_Write_rows_log_event__binlog.000018",
    "my8-update": RU + "31_update_rows_v2__binlog.000001",
    "my8-delete": RU + "32_delete_rows_v2__binlog.000001",
    "my8-json": BB + "json.binlog.000001",
    "my8-gcol": BB + "rpl_unfiltered_hidden_gcol.000001",
}

LINEITEM_COLUMNS = ["L_ORDERKEY", "L_PARTKEY", "L_SUPPKEY", "L_LINENUMBER", "L_QUANTITY",
                    "L_EXTENDEDPRICE", "L_DISCOUNT", "L_TAX", "L_RETURNFLAG", "L_LINESTATUS",
                    "L_SHIPDATE", "L_COMMITDATE", "L_RECEIPTDATE", "L_SHIPINSTRUCT", "L_SHIPMODE",
                    "L_COMMENT"]
COMMENT_ZH = ("使用箭头标记 -> 不是 SQL 语句的一部分，它仅仅表示一个新行，如果一条 SQL 语句太长，"
              "我们可以通过回车键来创建一个新行来编写 SQL 语句，SQL 语句的命令结束符为分号 ;。")


def _lineitem(key: int, part: int, supp: int, line: int, qty: str, price: str, disc: str, tax: str,
              flag: str, status: str | None, comment: str | None) -> tuple[Any, ...]:
    dates = (_dt.date(1990, 8, 1), _dt.date(1990, 6, 1), _dt.date(1990, 1, 1))
    return (key, part, supp, line, D(qty), D(price), D(disc), D(tax), flag, status, *dates,
            "test@test.com", "test", comment)


def _doc(age: int, fill: str, name: str) -> tuple[str, str, int]:
    return f'{{"age": {age}, "data": "{fill * 10}", "name": "{name}"}}', name, age


#: (source, db, table) -> (columns, Spark types, rows)
EXPECTED: dict[tuple[str, str, str], tuple[list[str], list[str], list[tuple[Any, ...]]]] = {
    # INSERT `mysql`.`foo` SET @1=b'100' @2='foo' @3=b'00100000'
    ("my8-bit", "mysql", "foo"): (["a", "b", "c"], ["binary", "string", "binary"],
                                  [(b"\x04", "foo", b"\x20")]),
    # INSERT @1=1 @2=2 @3=-3 @4='4' @5='\x05' @6=6000000000; INSERT @1=NULL @2=NULL @3=-33 @4='44'
    # @5='U' @6=NULL; UPDATE that row SET @1=111 @2=222 @3=-333 @4='444' @5='U' @6=NULL
    ("my8-invisible", "mysql", "t1"): (
        ["f1", "f2", "f3", "f4", "f5", "f6"],
        ["bigint", "bigint", "int", "string", "binary", "decimal(20,0)"],
        [(1, 2, -3, "4", b"\x05", D(6000000000)), (111, 222, -333, "444", b"U", None)]),
    # INSERT, UPDATE, DELETE of the one row: empty
    ("my8-enumset", "mysql", "t"): (["f1", "f2", "f3", "f4", "f5"], ["string"] * 5, []),
    # 6 INSERTs; UPDATE ...877 SET @5=88.880 @9='update L_RETURNFLAG '; DELETE ...880, ...879
    ("my8-lineitem", "test", "LINEITEM"): (LINEITEM_COLUMNS, [], [
        _lineitem(1234567890111, 1235111, 13711, 888878711, "99.911", "76.11", "888.1", "109.1",
                  "code", "Y", "com"),
        _lineitem(12345678909876, 12356789, 13789, 888878787, "99.998", "76.77", "888.7", "109.7",
                  "code", "Y", "com"),
        _lineitem(12345678909877, 12356790, 13789, 888878788, "88.880", "76.88", "888.1", "109.8",
                  "update L_RETURNFLAG ", "Y", "com"),
        _lineitem(12345678909878, 12356791, 13790, 888878789, "99.999", "76.99", "888.5", "109.9",
                  "code", "Y", COMMENT_ZH)]),
    # CREATE, CREATE, DROP, CREATE `Demo`; 5 INSERTs (@10 and @16 NULL where printed so)
    ("my8-lineitem", "test", "Demo"): (LINEITEM_COLUMNS, [], [
        _lineitem(12345678909876, 12356789, 13789, 888878787, "99.998", "76.77", "888.7", "109.7",
                  "code", None, None),
        _lineitem(12345678909877, 12356790, 13789, 888878788, "99.997", "76.88", "888.1", "109.8",
                  "code", "Y", None),
        _lineitem(12345678909878, 12356791, 13790, 888878789, "99.999", "76.99", "888.5", "109.9",
                  "code", None, None),
        _lineitem(12345678909879, 12356792, 13791, 888878790, "99.995", "76.01", "888.3", "109.1",
                  "code", "Y", None),
        _lineitem(12345678909880, 12356792, 13791, 888878791, "99.999", "76.22", "888.8", "109.0",
                  "code", "Y", None)]),
    # INSERT @1=1 @2=11 @3=111 @4=1111 @5=11111 @6=1
    ("my8-int", "test", "int_table"): (
        ["col1", "col2", "col3", "col4", "col5", "col6"],
        ["tinyint", "smallint", "int", "int", "bigint", "tinyint"], [(1, 11, 111, 1111, 11111, 1)]),
    # the same INSERT, then UPDATE SET @2=22 @3=222
    ("my8-update", "test", "int_table"): (
        ["col1", "col2", "col3", "col4", "col5", "col6"], [], [(1, 22, 222, 1111, 11111, 1)]),
    # INSERT, UPDATE, DELETE: empty
    ("my8-delete", "test", "int_table"): (["col1", "col2", "col3", "col4", "col5", "col6"], [], []),
    # ids 1-6 inserted with ages 24/32/40, a full-image UPDATE (+1) of 1-3, then a partial JSON
    # update (MINIMAL before image, JSON_REPLACE('$.age') diffs only) of every row
    ("my8-json", "mysql", "t"): (["id", "json_col", "name", "age"], ["int", "string", "string", "int"], [
        (1, *_doc(26, "x", "Joe")), (2, *_doc(34, "y", "Sue")), (3, *_doc(42, "z", "Pete")),
        (4, *_doc(26, "x", "Joe")), (5, *_doc(34, "y", "Sue")), (6, *_doc(42, "z", "Pete"))]),
}


@pytest.fixture(scope="module")
def gold(spark: Any, tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("gold-mysql8")
    objects = []
    for source, rel in FILES.items():
        folder = root / source
        folder.mkdir()
        target = folder / "binlog.000001"
        shutil.copyfile(FIX / rel, target)
        objects.append(BinlogObject(source=source, uri=str(target), size=target.stat().st_size, etag="1"))
    cfg = make_test_config(root, s3_server.endpoint_url)
    run_ingest(spark, cfg, objects, "mysql8-ingest")
    results: dict[str, GoldResult] = {s: run_gold(spark, cfg, s, f"gold-{s}") for s in FILES}
    return {"cfg": cfg, "results": results}


def _compare(spark: Any, cfg: Any, key: tuple[str, str, str]) -> int:
    columns, types, rows = EXPECTED[key]
    df = spark.read.format("delta").load(gold_location(cfg, gold_table_name(*key)))
    assert df.columns[: len(columns)] == columns, key
    if types:
        assert [t for _, t in df.dtypes[: len(columns)]] == types, key
    got = [tuple(r) for r in df.select(*[f"`{c}`" for c in columns]).collect()]
    copies = [r["_copies"] for r in df.collect()] if "_copies" in df.columns else []
    assert set(copies) <= {1}, key
    # repr: type and exact value (a DECIMAL's scale, bytes vs str) must both agree
    assert sorted(map(repr, got)) == sorted(map(repr, rows)), key
    return len(rows) * len(columns)


def test_gold_equals_the_binlogs_row_events(spark: Any, gold: dict[str, Any]) -> None:
    cells = sum(_compare(spark, gold["cfg"], key) for key in EXPECTED)
    print(f"MySQL 8.x fixtures: {cells} gold cells compared over {len(EXPECTED)} tables", file=sys.stderr)
    assert cells == 195
    for source, result in gold["results"].items():
        if source != "my8-gcol":
            assert [t.warnings for t in result.tables] == [()] * len(result.tables), source


def test_full_metadata_types_and_ddl_only_decimals(spark: Any, gold: dict[str, Any]) -> None:
    """DDL-only: the CREATE TABLE's DECIMAL(p,s) and DATE reach gold; FULL: ENUM/SET/text as strings."""
    cfg = gold["cfg"]
    df = spark.read.format("delta").load(gold_location(cfg, gold_table_name("my8-lineitem", "test", "LINEITEM")))
    types = dict(df.dtypes)
    assert (types["L_QUANTITY"], types["L_EXTENDEDPRICE"], types["L_DISCOUNT"]) == (
        "decimal(12,3)", "decimal(13,2)", "decimal(10,1)")
    assert types["L_SHIPDATE"] == "date" and "_copies" not in types  # PRIMARY KEY from the DDL
    history = (spark.read.format("delta").load(f"{cfg.warehouse}/silver/schema_history")
               .where("source = 'my8-lineitem' AND table_name = 'Demo'").orderBy("version").collect())
    assert [(r["version"], r["dropped"]) for r in history] == [(0, False), (1, True), (2, False)]


def test_hidden_functional_index_column_is_said_not_guessed(gold: dict[str, Any]) -> None:
    """8.0.17: ``INDEX i((a+1))`` adds a hidden generated column the TABLE_MAP carries but no DDL
    names; gold applies nothing it cannot place and says so."""
    (table,) = gold["results"]["my8-gcol"].tables
    assert table.rows == 0 and table.changes == 1
    assert table.warnings == (("row change not applied: TABLE_MAP has 3 columns, the schema 2: "
                               "the DDL in between is not in the archive", 1),)
