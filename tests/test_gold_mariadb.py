"""Gold against a real MariaDB: a workload over several rotated binlog files (every column type
the decoder supports, PK updates, deletes, ALTER TABLE ADD COLUMN ... DEFAULT, a table without
a primary key, FULL then MINIMAL then NO_LOG row metadata and MINIMAL / NOBLOB row images) is
ingested by the real Spark job, gold is built, and every gold table must equal the server's
``SELECT *`` cell by cell with the documented Spark types. Then the idempotency tests: a re-run,
an out-of-order ingest (newest files first, the oldest backfilled last) and a killed run
(gold built on a prefix of the files, then on everything) must give identical gold tables.
"""

from __future__ import annotations

import datetime as _dt
import shutil
import struct
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pymysql
import pytest
from conftest import make_test_config
from test_mariadb_server import running_mariadb

from spark_jobs.gold.job import GoldResult, gold_location, gold_table_name, run_gold
from spark_jobs.ingest import BinlogObject, run_ingest

SOURCE = "maria-gold"

CREATE = [
    """CREATE TABLE shop.t_all (
      id INT PRIMARY KEY,
      ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
      mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED,
      bi BIGINT, biu BIGINT UNSIGNED, f FLOAT, d DOUBLE,
      dec1 DECIMAL(10,4), dec65 DECIMAL(65,30), decu DECIMAL(20,2) UNSIGNED,
      dt DATE, tm TIME, tm6 TIME(6), dtm DATETIME, dtm6 DATETIME(6), ts TIMESTAMP(3) NULL,
      y YEAR, b1 BIT(1), b64 BIT(64), c CHAR(5), vc VARCHAR(100),
      vl VARCHAR(100) CHARACTER SET latin1, tx TEXT, tl TEXT CHARACTER SET latin1,
      bn BINARY(4), vb VARBINARY(20), bl BLOB, j JSON,
      e ENUM('red','green','blue'), s SET('a','b','c','d')
    ) DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE shop.orders (id INT NOT NULL, customer VARCHAR(50), amount DECIMAL(12,2),
      note TEXT, PRIMARY KEY (id))""",
    "CREATE TABLE shop.kv (k1 INT, k2 VARCHAR(10), v INT, PRIMARY KEY (k1, k2))",
    "CREATE TABLE shop.nopk (a INT, b VARCHAR(10) CHARACTER SET latin1)",
]

ROW_MAX = ("(1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, "
           "-9223372036854775808, 18446744073709551615, 3.14159, -1e300, "
           "-123456.7890, 12345678901234567890123456789012345.123456789012345678901234567890, "
           "999999999999999999.99, '2000-02-29', '-838:59:59', '-00:00:00.000001', "
           "'9999-12-31 23:59:59', '1000-01-01 00:00:00.000001', '2038-01-19 03:14:07.999', "
           "2155, b'1', b'1111111111111111111111111111111111111111111111111111111111111111', "
           "'ab', 'héllo 😀', 'café €', 'long ☃ text', 'naïve', x'00ff0a00', x'00', x'deadbeef00', "
           "'{\"k\": [1, 2.5, null, \"é\"]}', 'blue', 'a,d')")
ROW_MIN = ("(2, 127, 0, 32767, 0, 8388607, 0, 2147483647, 0, 9223372036854775807, 0, "
           "-1.5e-10, 0.30000000000000004, 0.0001, -0.000000000000000000000000000001, 0, "
           "'1970-01-01', '838:59:59', '12:34:56.789012', '2024-02-29 12:00:00', "
           "'2025-05-27 01:06:53.569478', '1970-01-01 00:00:01', 1901, b'0', b'0', '', '', '', "
           "'', '', x'', x'', x'', '[]', 'red', '')")
ROW_NULL = "(3" + ", NULL" * 35 + ")"

PHASES: list[list[str]] = [
    # file 1: FULL metadata, FULL image
    ["SET GLOBAL binlog_row_metadata = FULL", "CREATE DATABASE shop CHARACTER SET utf8mb4",
     *CREATE,
     f"INSERT INTO shop.t_all VALUES {ROW_MAX}, {ROW_MIN}, {ROW_NULL}",
     ("INSERT INTO shop.orders VALUES (1, 'ann', 10.50, 'first'), (2, 'bob', 20.00, NULL), "
     "(3, 'cy', 0.01, 'x'), (4, 'dee', 99.99, 'gone soon')"),
     "INSERT INTO shop.kv VALUES (1, 'a', 1), (1, 'b', 2), (2, 'a', 3)",
     "INSERT INTO shop.nopk VALUES (1, 'x'), (1, 'x'), (2, 'çà'), (3, NULL)",
     "FLUSH BINARY LOGS"],
    # file 2: updates (incl. primary-key changes) and deletes
    ["UPDATE shop.orders SET id = 40 WHERE id = 4", "UPDATE shop.orders SET amount = amount * 2",
     "DELETE FROM shop.orders WHERE id = 3", "UPDATE shop.kv SET k2 = 'z' WHERE k1 = 1 AND k2 = 'b'",
     "DELETE FROM shop.nopk WHERE a = 1 LIMIT 1", "UPDATE shop.t_all SET id = 30 WHERE id = 3",
     "UPDATE shop.t_all SET vl = 'über', biu = 18446744073709551614, dt = '0000-00-00' WHERE id = 2",
     "FLUSH BINARY LOGS"],
    # file 3: ALTER TABLE ADD COLUMN ... DEFAULT (old rows show the default), more changes
    ["ALTER TABLE shop.orders ADD COLUMN status VARCHAR(10) NOT NULL DEFAULT 'new' AFTER amount",
     "INSERT INTO shop.orders VALUES (5, 'eve', 5.55, 'paid', 'fifth')",
     "UPDATE shop.orders SET status = 'sent' WHERE id = 1",
     "FLUSH BINARY LOGS"],
    # file 4: MINIMAL row metadata, MINIMAL row image (only changed columns + key)
    ["SET GLOBAL binlog_row_metadata = MINIMAL", "SET SESSION binlog_row_image = MINIMAL",
     "UPDATE shop.orders SET note = 'minimal' WHERE id = 2",
     "UPDATE shop.orders SET id = 50, customer = 'bo' WHERE id = 40",
     ("UPDATE shop.t_all SET tiu = 7, e = 'green', s = 'b,c', vl = 'Ñandú', biu = 18446744073709551615 "
     "WHERE id = 1"),
     "INSERT INTO shop.t_all (id, vc, tl) VALUES (4, 'minimal insert', 'Ä')",
     "DELETE FROM shop.kv WHERE k1 = 2",
     "FLUSH BINARY LOGS"],
    # file 5: NO_LOG row metadata (no names, no signedness, no charsets), NOBLOB image
    ["SET GLOBAL binlog_row_metadata = NO_LOG", "SET SESSION binlog_row_image = NOBLOB",
     ("UPDATE shop.t_all SET iu = 4294967295, miu = 16777215, vl = 'çé€', tl = 'Ünïcödé latin1', "
     "bl = x'ff00fe', vc = '0x41', e = 'blue', s = 'a,b,c,d', y = 2000, dec65 = 1.5 WHERE id = 2"),
     "UPDATE shop.t_all SET tx = 'noblob keeps other columns' WHERE id = 1",
     "INSERT INTO shop.orders VALUES (6, 'fay', 6.00, 'new', 'sixth')",
     "INSERT INTO shop.nopk VALUES (2, 'çà'), (4, 'ü')",
     "UPDATE shop.kv SET v = 99 WHERE k1 = 1 AND k2 = 'a'",
     "FLUSH BINARY LOGS"],
    # file 6: back to FULL metadata and image
    ["SET GLOBAL binlog_row_metadata = FULL",
     "UPDATE shop.orders SET note = CONCAT(note, '+') WHERE id IN (1, 5)",
     "DELETE FROM shop.t_all WHERE id = 30"],
]
TABLES = ("t_all", "orders", "kv", "nopk")


def _connect(sock: Path) -> Any:
    return pymysql.connect(unix_socket=str(sock), user="root", charset="utf8mb4",
                           init_command="SET time_zone = '+00:00'", autocommit=True)


@pytest.fixture(scope="module")
def server_files() -> Iterator[dict[str, Any]]:
    with running_mariadb("binlake-gold-") as db:
        for phase in PHASES:
            conn = _connect(db.sock)  # a new session per phase: GLOBAL settings apply to it
            with conn.cursor() as cur:
                for sql in phase:
                    cur.execute(sql)
            conn.close()
        conn = _connect(db.sock)
        selects: dict[str, tuple[list[str], list[tuple[Any, ...]], dict[str, tuple[str, str]]]] = {}
        with conn.cursor() as cur:
            for table in TABLES:
                cur.execute(f"SELECT * FROM shop.{table}")
                names = [d[0] for d in cur.description]
                rows = list(cur.fetchall())
                cur.execute("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE FROM information_schema.COLUMNS "
                            "WHERE TABLE_SCHEMA = 'shop' AND TABLE_NAME = %s", (table,))
                types = {r[0]: (r[1], r[2]) for r in cur.fetchall()}
                selects[table] = (names, rows, types)
        conn.close()
        index = (db.datadir / "binlog.index").read_text().split()
        db.stop()
        archive = db.base / "archive"
        archive.mkdir()
        files = []
        for name in index:
            target = archive / Path(name).name
            shutil.copyfile(db.datadir / Path(name).name, target)
            files.append(target)
        yield {"files": files, "selects": selects}


def _objects(files: list[Path]) -> list[BinlogObject]:
    return [BinlogObject(source=SOURCE, file=p.name, uri=str(p), size=p.stat().st_size,
                         etag=f"{p.stat().st_size}") for p in files]


def _fresh_config(tmp: Path, s3_server: Any) -> Any:
    return make_test_config(tmp, s3_server.endpoint_url)


# ------------------------------------------------------------------ expected values

def _time_text(value: _dt.timedelta, fsp: int) -> str:
    micros = value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    secs, frac = divmod(micros, 1_000_000)
    text = f"{sign}{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}"
    return text + ("." + f"{frac:06d}"[:fsp] if fsp else "")


def expected_cell(value: Any, data_type: str, column_type: str) -> Any:
    """The server's value (PyMySQL) as gold must hold it (docs/gold.md, type mapping)."""
    if value is None:
        return None
    if data_type == "bigint" and "unsigned" in column_type:
        return Decimal(value)
    if data_type == "decimal":
        precision = int(column_type.split("(")[1].split(",")[0])
        return value if precision <= 38 else format(value, "f")
    if data_type == "float":
        return struct.unpack("<f", struct.pack("<f", value))[0]
    if data_type == "time":
        fsp = int(column_type.split("(")[1].rstrip(")")) if "(" in column_type else 0
        return _time_text(value, fsp)
    if data_type in ("date", "datetime") and isinstance(value, str):
        return None  # zero date: no Spark DATE/TIMESTAMP holds it (documented)
    if data_type == "year":
        return int(value)
    if data_type == "char" and "binary" not in column_type:
        return value
    return value


def gold_cell(value: Any, data_type: str) -> Any:
    if data_type == "timestamp" and value is not None:
        return value.astimezone(_dt.UTC).replace(tzinfo=None)  # Spark gives local wall time
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def compare_table(spark: Any, cfg: Any, table: str,
                  select: tuple[list[str], list[tuple[Any, ...]], dict[str, tuple[str, str]]]) -> int:
    """Assert gold == server for one table; return the number of cells compared."""
    names, rows, types = select
    df = spark.read.format("delta").load(gold_location(cfg, gold_table_name(SOURCE, "shop", table)))
    gold_rows = df.select(*[f"`{n}`" for n in names],
                          *(["_copies"] if "_copies" in df.columns else [])).collect()
    expected = sorted((tuple(expected_cell(v, *types[n]) for v, n in zip(r, names)) for r in rows), key=repr)
    got: list[tuple[Any, ...]] = []
    for g in gold_rows:
        values = tuple(gold_cell(g[i], types[n][0]) for i, n in enumerate(names))
        copies = g["_copies"] if "_copies" in df.columns else 1
        got.extend([values] * copies)
    got.sort(key=repr)
    assert len(got) == len(expected), f"{table}: {len(got)} gold rows, server has {len(expected)}"
    for e, g in zip(expected, got):
        for n, ev, gv in zip(names, e, g):
            assert ev == gv and type(ev) is type(gv) or (ev is None and gv is None), (
                f"{table}.{n}: server {ev!r} ({type(ev).__name__}) != gold {gv!r} ({type(gv).__name__})")
    return len(expected) * len(names)


def gold_snapshot(spark: Any, cfg: Any) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    for table in TABLES:
        df = spark.read.format("delta").load(gold_location(cfg, gold_table_name(SOURCE, "shop", table)))
        out[table] = sorted((tuple(r) for r in df.collect()), key=repr)
    return out


# ------------------------------------------------------------------ tests

@pytest.fixture(scope="module")
def in_order(spark: Any, server_files: dict[str, Any], tmp_path_factory: pytest.TempPathFactory,
             s3_server: Any) -> dict[str, Any]:
    cfg = _fresh_config(tmp_path_factory.mktemp("gold-wh"), s3_server)
    run_ingest(spark, cfg, _objects(server_files["files"]), "ingest-1")
    result = run_gold(spark, cfg, SOURCE, "gold-1")
    return {"cfg": cfg, "result": result, "snapshot": gold_snapshot(spark, cfg)}


def test_workload_spans_rotated_files(server_files: dict[str, Any]) -> None:
    assert len(server_files["files"]) >= 6


def test_gold_equals_server_select(spark: Any, server_files: dict[str, Any], in_order: dict[str, Any]) -> None:
    cells = 0
    for table in TABLES:
        cells += compare_table(spark, in_order["cfg"], table, server_files["selects"][table])
    print(f"gold == server SELECT: {cells} cells compared over {len(TABLES)} tables", file=sys.stderr)
    assert cells == 149


def test_gold_types(spark: Any, in_order: dict[str, Any]) -> None:
    df = spark.read.format("delta").load(gold_location(in_order["cfg"], gold_table_name(SOURCE, "shop", "t_all")))
    types = dict(df.dtypes)
    assert types["dec65"] == "string" and types["dec1"] == "decimal(10,4)"
    assert types["biu"] == "decimal(20,0)" and types["iu"] == "bigint" and types["ti"] == "tinyint"
    assert types["dtm6"] == "timestamp_ntz" and types["ts"] == "timestamp" and types["dt"] == "date"
    assert types["tm6"] == "string" and types["b64"] == "binary" and types["bl"] == "binary"
    assert types["e"] == "string" and types["j"] == "string" and types["f"] == "float"
    assert {"_source", "_gtid", "_commit_time", "_binlog_file", "_binlog_pos"} <= set(types)


def test_gold_status_and_history(spark: Any, in_order: dict[str, Any]) -> None:
    result: GoldResult = in_order["result"]
    assert {t.table for t in result.tables} == set(TABLES)
    cfg = in_order["cfg"]
    status = {r["table_name"]: r for r in spark.read.format("delta")
              .load(f"{cfg.warehouse}/meta/gold_status").collect()}
    assert status["orders"]["rows"] == 5 and status["orders"]["schema_version"] == 1
    assert status["orders"]["last_gtid"].startswith("0-7-")
    history = spark.read.format("delta").load(f"{cfg.warehouse}/silver/schema_history")
    orders = history.where("table_name = 'orders'").orderBy("version").collect()
    assert [r["version"] for r in orders] == [0, 1]
    assert '"default": "new"' in orders[1]["columns"]


def test_rerun_is_identical(spark: Any, server_files: dict[str, Any], in_order: dict[str, Any]) -> None:
    cfg = in_order["cfg"]
    again = run_ingest(spark, cfg, _objects(server_files["files"]), "ingest-again")
    assert again.skipped == len(server_files["files"])
    # a forced re-run's MERGEs over an existing warehouse: test_one_file_a_night_is_incremental_and_equals_one_run
    skipped = run_gold(spark, cfg, SOURCE, "gold-2")  # inputs unchanged: nothing rewritten
    assert {t.write_mode for t in skipped.tables} == {"unchanged"}
    assert [(t.table, t.rows, t.last_change) for t in skipped.tables] == \
        [(t.table, t.rows, t.last_change) for t in in_order["result"].tables]
    assert gold_snapshot(spark, cfg) == in_order["snapshot"]


def test_backfill_out_of_order_and_killed_run(spark: Any, server_files: dict[str, Any],
                                             in_order: dict[str, Any],
                                             tmp_path_factory: pytest.TempPathFactory,
                                             s3_server: Any) -> None:
    """Newest files first, gold built on them; then the oldest files backfilled; then a run
    "killed" after its first table (simulated: ``only_tables`` rebuilds one table, the others
    keep their partial state); then a full re-run, twice. Same gold tables as the in-order run."""
    cfg = _fresh_config(tmp_path_factory.mktemp("gold-backfill"), s3_server)
    files = server_files["files"]
    run_ingest(spark, cfg, _objects(files[3:]), "late-files-first")
    partial = run_gold(spark, cfg, SOURCE, "gold-partial")
    assert any(t.warnings for t in partial.tables)  # rows it never saw inserted are said
    run_ingest(spark, cfg, _objects(files[:3]), "backfill-oldest")
    run_gold(spark, cfg, SOURCE, "gold-killed", only_tables=frozenset({("shop", "orders")}))
    snap = gold_snapshot(spark, cfg)
    assert snap["orders"] == in_order["snapshot"]["orders"]
    assert snap["t_all"] != in_order["snapshot"]["t_all"]  # the "killed" run never got there
    run_gold(spark, cfg, SOURCE, "gold-rerun")
    again = run_gold(spark, cfg, SOURCE, "gold-rerun-twice")
    assert gold_snapshot(spark, cfg) == in_order["snapshot"]
    assert not any(t.warnings for t in again.tables)
    assert {t.write_mode for t in again.tables} == {"unchanged"}


#: status fields a night-by-night warehouse must share with one in-order run
STATUS_FIELDS = ("rows", "changes", "schema_version", "last_file", "last_pos", "last_gtid", "last_commit_time",
                 "warnings", "input_fingerprint", "replayed_through", "schema_digest", "archive_gtids", "complete")


def _status(spark: Any, cfg: Any, gold_tables: bool = True) -> dict[str, dict[str, Any]]:
    rows = spark.read.format("delta").load(f"{cfg.warehouse}/meta/gold_status").collect()
    return {r["gold_table"]: {f: r[f] for f in STATUS_FIELDS} for r in rows
            if not gold_tables or not r["gold_table"].endswith("__history")}


def _with_history(spark: Any, cfg: Any) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    for table in TABLES:
        for suffix in ("", "__history"):
            df = spark.read.format("delta").load(gold_location(cfg, gold_table_name(SOURCE, "shop", table) + suffix))
            out[table + suffix] = sorted((tuple(r) for r in df.collect()), key=repr)
    return out


def test_one_file_a_night_is_incremental_and_equals_one_run(
        spark: Any, server_files: dict[str, Any], in_order: dict[str, Any], tmp_path_factory: pytest.TempPathFactory,
        s3_server: Any) -> None:
    """The workload's files ingested and gold run night by night (history kept): files 1, 2 and 3
    one a night, then the last three in one night. From night 2 every table with a key and new
    changes is brought up to date incrementally — PK changes, MINIMAL and NOBLOB images, NO_LOG
    metadata, every column type read back from Delta — replaying exactly its new files' changes; a
    table without new changes is not touched; ``orders``' ALTER TABLE (night 3) and the table
    without a key replay in full. At the end the gold tables and status equal the in-order run's,
    and a forced full replay of the same warehouse changes no gold or __history cell."""
    files = server_files["files"]
    assert len(files) == 6, [f.name for f in files]
    nights = ([files[0]], [files[1]], [files[2]], files[3:])  # fewer Spark runs than one a night
    cfg = make_test_config(tmp_path_factory.mktemp("gold-nightly"), s3_server.endpoint_url, gold={"history": True})
    results = []
    for i, night in enumerate(nights):
        run_ingest(spark, cfg, _objects(night), f"nightly-ingest-{i}")
        results.append(run_gold(spark, cfg, SOURCE, f"nightly-gold-{i}"))
    full, incr, none = "full", "incremental", "none"
    assert [{t.table: t.replay for t in r.tables} for r in results] == [
        {"t_all": full, "orders": full, "kv": full, "nopk": full},
        {"t_all": incr, "orders": incr, "kv": incr, "nopk": full},
        {"t_all": none, "orders": full, "kv": none, "nopk": none},
        {"t_all": incr, "orders": incr, "kv": incr, "nopk": full}]
    per_file = {(r["file"], r["table_name"]): r["count"] for r in spark.read.format("delta")
                .load(f"{cfg.warehouse}/silver/row_changes").groupBy("file", "table_name").count().collect()}
    for night, result in zip(nights, results):
        for t in result.tables:
            if t.replay == incr:  # only the night's new files' changes of the table were replayed
                expected = sum(per_file.get((path.name, t.table), 0) for path in night)
                assert t.replayed == expected > 0, ([path.name for path in night], t.table)
    assert gold_snapshot(spark, cfg) == in_order["snapshot"]
    assert _status(spark, cfg) == _status(spark, in_order["cfg"])
    nightly, status = _with_history(spark, cfg), _status(spark, cfg, gold_tables=False)
    forced = run_gold(spark, cfg, SOURCE, "nightly-forced", force=True)  # replays and MERGEs again
    assert {t.replay_reason for t in forced.tables} == {"forced"}
    assert {t.table: t.write_mode for t in forced.tables} == {
        "t_all": "merge", "orders": "merge", "kv": "merge", "nopk": "overwrite"}
    assert _with_history(spark, cfg) == nightly and _status(spark, cfg, gold_tables=False) == status
    cells = sum(len(rows) * len(rows[0]) for rows in nightly.values() if rows)
    print(f"one file a night == one run: {cells} cells (gold and __history tables)", file=sys.stderr)
