"""Gold over the committed MariaDB 10.11 chain (tests/fixtures/mariadb-10.11): four binlogs with
FULL metadata, CREATE TABLE / ALTER TABLE ... ADD COLUMN ... DEFAULT ... AFTER in the archive, and
each table's final contents as the server's ``mariadb --batch`` printed them. Every gold cell,
printed back as MySQL text (with the fsp / scale the schema history knows), must equal the
server's bytes. The same chain as two shards checks the ``[gold.union]`` tables. Needs no
server: it runs wherever the suite runs.
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from conftest import make_test_config

from binlog_parser.rows.numbers import format_double, format_float
from spark_jobs.gold.job import HISTORY_SUFFIX, gold_location, gold_table_name, run_gold
from spark_jobs.ingest import BinlogObject, run_ingest

FIX = Path(__file__).parent / "fixtures" / "mariadb-10.11"
SOURCE = "fixture-maria"


def _unescape(b: bytes) -> bytes:
    """``mariadb --batch`` escaping undone (\\0 \\n \\t \\\\ …)."""
    out = bytearray()
    i = 0
    while i < len(b):
        if b[i] == 0x5C and i + 1 < len(b):
            n = chr(b[i + 1])
            out += {"0": b"\0", "n": b"\n", "t": b"\t", "\\": b"\\", "b": b"\b", "r": b"\r",
                    "Z": b"\x1a"}.get(n, n.encode())
            i += 2
        else:
            out.append(b[i])
            i += 1
    return bytes(out)


def _expected(table: str) -> tuple[list[str], list[list[bytes | None]]]:
    lines = (FIX / f"table.shop.{table}.tsv").read_bytes().rstrip(b"\n").split(b"\n")
    header = lines[0].decode().split("\t")
    return header, [[None if v == b"NULL" else _unescape(v) for v in ln.split(b"\t")] for ln in lines[1:]]


def _fraction(moment: _dt.datetime, fsp: int) -> str:
    return ("." + f"{moment.microsecond:06d}"[:fsp]) if fsp else ""


def mysql_text(value: Any, column: dict[str, Any]) -> bytes | None:
    """A gold value printed as the server prints its column (the inverse of the type table)."""
    if value is None:
        return None
    kind, fsp = column["type"], column.get("fsp") or 0
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if kind == "timestamp":
        moment = value.astimezone(_dt.UTC)
        return (moment.strftime("%Y-%m-%d %H:%M:%S") + _fraction(moment, fsp)).encode()
    if kind == "datetime":
        return (value.strftime("%Y-%m-%d %H:%M:%S") + _fraction(value, fsp)).encode()
    if kind == "year":
        return f"{value:04d}".encode()
    if kind == "float":
        return format_float(value).encode()
    if kind == "double":
        return format_double(value).encode()
    if isinstance(value, Decimal):
        return format(value, "f").encode()
    return str(value).encode()


def _copy_chain(root: Path, source: str = SOURCE) -> list[BinlogObject]:
    objects = []
    root.mkdir(parents=True, exist_ok=True)
    for p in sorted(FIX.glob("binlog.0*")):
        shutil.copyfile(p, root / p.name)
        objects.append(BinlogObject(source=source, uri=str(root / p.name), size=p.stat().st_size, etag="1"))
    return objects


@pytest.fixture(scope="module")
def gold(spark: Any, tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("gold-fixture")
    objects = _copy_chain(root)
    cfg = make_test_config(root, s3_server.endpoint_url, gold={"history": True})
    run_ingest(spark, cfg, objects, "fixture-ingest")
    result = run_gold(spark, cfg, SOURCE, "fixture-gold")
    return {"cfg": cfg, "result": result, "objects": objects}


@pytest.mark.parametrize("table", ["customer", "orders"])
def test_gold_prints_what_the_server_printed(spark: Any, gold: dict[str, Any], table: str) -> None:
    cfg = gold["cfg"]
    header, rows = _expected(table)
    history = (spark.read.format("delta").load(f"{cfg.warehouse}/silver/schema_history")
               .where(f"source = '{SOURCE}' AND table_name = '{table}'").orderBy("version").collect())
    columns = {c["name"]: c for c in json.loads(history[-1]["columns"])}
    df = spark.read.format("delta").load(gold_location(cfg, gold_table_name(SOURCE, "shop", table)))
    assert df.columns[: len(header)] == header
    got = sorted(([mysql_text(r[n], columns[n]) for n in header] for r in df.collect()), key=repr)
    assert got == sorted(rows, key=repr)
    (status,) = [t for t in gold["result"].tables if t.table == table]
    assert status.warnings == ()
    print(f"{table}: {len(rows) * len(header)} cells equal the server's printout", file=sys.stderr)


def test_in_process_fingerprints_equal_sparks_aggregate(spark: Any, gold: dict[str, Any]) -> None:
    """``binlake.gold.fingerprints`` over the source's partition (whole, split at a mark W per table,
    and some of its data files) gives the counts, hash sums and first new rows Spark's aggregate gives."""
    from pyspark.sql import functions as F

    from binlake.gold.fingerprints import count_files
    from binlake.gold.schema_history import Coordinates
    from binlake.lake.delta_tables import add_actions, open_delta_table
    from spark_jobs.gold.inputs import aggregate

    cfg = gold["cfg"]
    path = f"{cfg.warehouse}/silver/row_changes"
    table = open_delta_table(path, cfg.s3)
    assert table is not None
    rows = spark.read.format("delta").load(path).where(F.col("source") == SOURCE)
    ordered = sorted(rows.select("db", "table_name", "file_seq", "file", "pos", "payload_index", "row_index").collect(),
                     key=lambda r: (r.file_seq or 0, r.file, r.pos, -1 if r.payload_index is None else r.payload_index,
                                    r.row_index))
    marks = {}  # each table's W: its middle row change
    for key in {(r.db, r.table_name) for r in ordered}:
        mine = [r for r in ordered if (r.db, r.table_name) == key]
        r = mine[len(mine) // 2]
        marks[key] = Coordinates(r.file_seq or 0, r.pos, -1 if r.payload_index is None else r.payload_index,
                                 r.row_index, r.file)
    paths = [p for p, s in zip(add_actions(table)["path"], add_actions(table)["partition.source"]) if s == SOURCE]
    some = paths[: max(1, len(paths) // 2)]
    for mark in ({}, marks):
        whole = count_files(table, SOURCE, None, mark)
        assert whole == aggregate(spark, rows, mark) and len(whole) == 2, mark
        assert any(c.first_new for c in whole.values()) == bool(mark)
        part = count_files(table, SOURCE, some, mark)
        assert part == aggregate(spark, spark.read.parquet(*(f"{path}/{p}" for p in some)), mark) and part, some
    assert sum(c.n for c in whole.values()) == len(ordered) == 14


def test_binlake_sql_sees_the_gold_tables(spark: Any, gold: dict[str, Any]) -> None:
    """silver.schema_history, meta.gold_status and every gold table are in the registry that
    ``binlake sql`` reads: both engines list them and return the same rows."""
    from binlake.sql.fast import FastWarehouse
    from spark_jobs.sql_engine import register_tables, run_query

    cfg = gold["cfg"]
    gold_names = {f"gold.{gold_table_name(SOURCE, 'shop', t)}" for t in ("customer", "orders")}
    fast = FastWarehouse(cfg)
    listed = {spec.full_name for spec in fast.existing_tables()}
    assert {"silver.schema_history", "meta.gold_status"} | gold_names <= listed
    assert gold_names <= set(register_tables(spark, cfg))
    for name in sorted({"silver.schema_history", "meta.gold_status"} | gold_names):
        got = fast.run(f"SELECT * FROM {name}")
        want = run_query(spark, f"SELECT * FROM {name}", max_rows=100_000)
        assert got.columns == want.columns, name
        assert got.rows and sorted(got.rows, key=repr) == sorted(want.rows, key=repr), name
    status = fast.run("SELECT gold_table FROM meta.gold_status")
    assert {f"gold.{name}" for (name,) in status.rows} == {n for n in listed if n.startswith("gold.")}


def _history(spark: Any, cfg: Any, table: str) -> list[Any]:
    name = gold_table_name(SOURCE, "shop", table) + HISTORY_SUFFIX
    return sorted(spark.read.format("delta").load(gold_location(cfg, name)).collect(),
                  key=lambda r: (r["id"], r["_valid_from_file"], r["_valid_from_pos"], r["_valid_from_row_index"]))


def test_scd2_history_follows_the_scenario(spark: Any, gold: dict[str, Any]) -> None:
    """scenario.sql: customers 1, 2 inserted then updated, 3 inserted then deleted, 4 inserted;
    orders 1 inserted then (after ADD COLUMN channel DEFAULT 'web') updated to 'app', 2 inserted,
    3-5 inserted by INSERT ... SELECT, 4 deleted. Every version, chained, the current ones equal
    to the gold table."""
    cfg = gold["cfg"]
    customer = [(r["id"], r["_op"], r["_ended_by"], r["_is_current"]) for r in _history(spark, cfg, "customer")]
    assert customer == [(1, "insert", "update", False), (1, "update", None, True),
                        (2, "insert", "update", False), (2, "update", None, True),
                        (3, "insert", "delete", False), (4, "insert", None, True)]
    orders = _history(spark, cfg, "orders")
    assert [(r["id"], r["status"], r["channel"], r["_ended_by"], r["_is_current"]) for r in orders] == [
        (1, "new", "web", "update", False), (1, "paid", "app", None, True), (2, "new", "web", None, True),
        (3, "new", "web", None, True), (4, "new", "web", "delete", False), (5, "new", "web", None, True)]
    ended = orders[0]
    assert (ended["_valid_to"], ended["_valid_to_gtid"], ended["_valid_to_file"], ended["_valid_to_pos"]) == (
        orders[1]["_valid_from"], orders[1]["_gtid"], orders[1]["_valid_from_file"], orders[1]["_valid_from_pos"])
    assert ended["_valid_to"] >= ended["_valid_from"]  # the scenario ran within one second
    assert (ended["_valid_from_file"], ended["_valid_to_file"]) == ("binlog.000002", "binlog.000003")
    for table in ("customer", "orders"):
        current = _history(spark, cfg, table)
        df = spark.read.format("delta").load(gold_location(cfg, gold_table_name(SOURCE, "shop", table)))
        source_columns = [c for c in df.columns if not c.startswith("_")]
        assert sorted(tuple(r[c] for c in source_columns) for r in current if r["_is_current"]) == \
            sorted(tuple(r[c] for c in source_columns) for r in df.collect())
    status = {r["gold_table"]: r["rows"] for r in spark.read.format("delta")
              .load(f"{cfg.warehouse}/meta/gold_status").where(f"source = '{SOURCE}'").collect()}
    assert status[gold_table_name(SOURCE, "shop", "orders") + HISTORY_SUFFIX] == 6


def _gold_rows(spark: Any, cfg: Any) -> dict[str, list[tuple[Any, ...]]]:
    return {t: sorted((tuple(r) for r in spark.read.format("delta")
                       .load(gold_location(cfg, gold_table_name(SOURCE, "shop", t))).collect()), key=repr)
            for t in ("customer", "orders")}


def test_gap_is_flagged_and_a_backfill_repairs_it(spark: Any, gold: dict[str, Any],
                                                 tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> None:
    """binlog.000003 missing: reconciliation finds the gap, gold applies what it has and flags every
    table incomplete since the file after the gap; the backfilled file (out of order) repairs gold
    and the SCD2 ``__history`` tables to the in-order state (valid_from/valid_to included) and clears
    the flag. A forced re-run then gives the same versions, and a run with unchanged inputs rewrites
    nothing."""
    from binlake.reconcile.job import run_reconcile

    want = {t: [tuple(r) for r in _history(spark, gold["cfg"], t)] for t in ("customer", "orders")}
    root = tmp_path_factory.mktemp("gold-fixture-gap")
    objects = _copy_chain(root)
    cfg = make_test_config(root, s3_server.endpoint_url, gold={"history_tables": ["SHOP.orders", "shop.customer"]})
    run_ingest(spark, cfg, [o for o in objects if o.file != "binlog.000003"], "gap-ingest")
    run_reconcile(cfg, "gap-reconcile", sources=[SOURCE])
    run_gold(spark, cfg, SOURCE, "gap-gold")
    status_path = f"{cfg.warehouse}/meta/gold_status"
    flags = {(r["table_name"], r["complete"], r["incomplete_since"])
             for r in spark.read.format("delta").load(status_path).collect()}
    assert flags == {("customer", False, "binlog.000004"), ("orders", False, "binlog.000004")}
    assert _gold_rows(spark, cfg) != _gold_rows(spark, gold["cfg"])
    run_ingest(spark, cfg, [o for o in objects if o.file == "binlog.000003"], "gap-backfill")
    run_reconcile(cfg, "gap-reconcile-2", sources=[SOURCE])
    run_gold(spark, cfg, SOURCE, "gap-gold-2")
    flags = {(r["table_name"], r["complete"], r["incomplete_since"])
             for r in spark.read.format("delta").load(status_path).collect()}
    assert flags == {("customer", True, None), ("orders", True, None)}
    assert _gold_rows(spark, cfg) == _gold_rows(spark, gold["cfg"])
    assert {t: [tuple(r) for r in _history(spark, cfg, t)] for t in want} == want
    forced = run_gold(spark, cfg, SOURCE, "gap-gold-forced", force=True)
    assert {t: [tuple(r) for r in _history(spark, cfg, t)] for t in want} == want
    assert {t.table: t.history_rows for t in forced.tables} == {"customer": 6, "orders": 6}
    skipped = run_gold(spark, cfg, SOURCE, "gap-gold-skipped")
    assert {t.write_mode for t in skipped.tables} == {"unchanged"}
    assert {t.table: t.history_rows for t in skipped.tables} == {"customer": 6, "orders": 6}


# ------------------------------------------------------------------ a fleet's union table

SHARDS = ("shard-a", "shard-b")
UNIONS = {"fleet_orders": "orders", "fleet_customer": "customer"}


def _union_vs_stacked(spark: Any, cfg: Any, union: str, sources: tuple[str, ...]) -> tuple[list[Any], list[Any]]:
    """The union table's rows, and the sources' gold tables stacked in the union's columns (a
    column a source's table lacks is NULL there), both sorted."""
    df = spark.read.format("delta").load(gold_location(cfg, union))
    columns = df.columns
    got = sorted((tuple(r[c] for c in columns) for r in df.collect()), key=repr)
    want = []
    for source in sources:
        part = spark.read.format("delta").load(gold_location(cfg, gold_table_name(source, "shop", UNIONS[union])))
        assert set(part.columns) <= set(columns), (union, source)
        want += [tuple(r[c] if c in part.columns else None for c in columns) for r in part.collect()]
    return got, sorted(want, key=repr)


def _gold_at_once(spark: Any, cfg: Any, runs: dict[str, str]) -> dict[str, Any]:
    """run_gold of each source (-> its run id) in its own thread, released together (as Airflow runs
    a fleet's mapped gold tasks); their results by source."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    barrier = threading.Barrier(len(runs))

    def gold_of(source: str) -> Any:
        barrier.wait()
        return run_gold(spark, cfg, source, runs[source])

    with ThreadPoolExecutor(len(runs)) as pool:
        return dict(zip(runs, pool.map(gold_of, runs), strict=True))


def test_a_fleet_union_is_the_per_source_tables_stacked(spark: Any, tmp_path_factory: pytest.TempPathFactory,
                                                       s3_server: Any) -> None:
    """Two shards of the fixture's schema (shard-b holds only the first two files: fewer orders, no
    ``channel`` column yet) with ``[gold] union``: their gold runs, started together, write each
    union table once per shard; it equals the two gold tables stacked, keyed by (``_source``, id).
    A new file of shard-b then replaces shard-b's rows only; a shard taken out of a union leaves it."""
    from delta.tables import DeltaTable

    root = tmp_path_factory.mktemp("gold-union")
    objects = {s: _copy_chain(root / s, s) for s in SHARDS}
    unions = {"fleet_orders": "shop.orders", "fleet_customer": {"table": "SHOP.Customer", "sources": list(SHARDS)}}
    sources = [{"name": s, "uri": str(root / s)} for s in SHARDS]
    cfg = make_test_config(root, s3_server.endpoint_url, gold={"union": unions}, sources=sources)
    run_ingest(spark, cfg, objects["shard-a"] + objects["shard-b"][:2], "union-ingest")
    first = _gold_at_once(spark, cfg, {"shard-a": "union-gold-a", "shard-b": "union-gold-b"})
    assert first["shard-a"].written() == ("gold.fleet_customer", "gold.fleet_orders",
                                          "gold.shard_a__shop__customer", "gold.shard_a__shop__orders")
    cells = 0
    for union in UNIONS:
        got, want = _union_vs_stacked(spark, cfg, union, SHARDS)
        assert got == want and len(got) == {"fleet_customer": 3 + 3, "fleet_orders": 4 + 2}[union]
        keys = spark.read.format("delta").load(gold_location(cfg, union)).select("_source", "id").distinct().count()
        assert keys == len(got)
        assert DeltaTable.forPath(spark, gold_location(cfg, union)).detail().first()["partitionColumns"] == ["_source"]
        cells += len(got) * len(got[0])
    orders = spark.read.format("delta").load(gold_location(cfg, "fleet_orders"))
    assert {(r["_source"], r["channel"]) for r in orders.collect()} == {
        ("shard-a", "web"), ("shard-a", "app"), ("shard-b", None)}  # shard-b's table has no channel yet
    print(f"union tables: {cells} cells equal the shards' gold tables stacked", file=sys.stderr)

    version = DeltaTable.forPath(spark, gold_location(cfg, "fleet_orders")).history(1).first()["version"]
    shard_a_rows = sorted((tuple(r) for r in orders.where("_source = 'shard-a'").collect()), key=repr)
    run_ingest(spark, cfg, objects["shard-b"][2:3], "union-ingest-2")
    later = run_gold(spark, cfg, "shard-b", "union-gold-b2")
    assert {(u.name, u.write_mode) for u in later.unions} == {("fleet_orders", "union"), ("fleet_customer", "unchanged")}
    got, want = _union_vs_stacked(spark, cfg, "fleet_orders", SHARDS)
    assert got == want and len(got) == 8
    orders = spark.read.format("delta").load(gold_location(cfg, "fleet_orders"))
    assert sorted((tuple(r) for r in orders.where("_source = 'shard-a'").collect()), key=repr) == shard_a_rows
    assert DeltaTable.forPath(spark, gold_location(cfg, "fleet_orders")).history(1).first()["version"] == version + 1
    quiet = run_gold(spark, cfg, "shard-a", "union-gold-a2")
    assert quiet.written() == () and {u.write_mode for u in quiet.unions} == {"unchanged"}

    unions["fleet_customer"]["sources"] = ["shard-a"]  # type: ignore[index]
    fewer = make_test_config(root, s3_server.endpoint_url, gold={"union": unions}, sources=sources)
    left = run_gold(spark, fewer, "shard-b", "union-gold-b3")
    assert left.left_unions == ("fleet_customer",) and left.written() == ("gold.fleet_customer",)
    got, want = _union_vs_stacked(spark, fewer, "fleet_customer", ("shard-a",))
    assert got == want and len(got) == 3
    status = {(r["source"], r["gold_table"]): (r["rows"], r["write_mode"]) for r in spark.read.format("delta")
              .load(f"{fewer.warehouse}/meta/gold_status").where("gold_table LIKE 'fleet%'").collect()}
    assert status == {("shard-a", "fleet_orders"): (4, "unchanged"), ("shard-a", "fleet_customer"): (3, "unchanged"),
                      ("shard-b", "fleet_orders"): (4, "unchanged")}
    from binlake.sql.fast import FastWarehouse  # binlake sql finds the union tables through meta.gold_status

    fast = FastWarehouse(fewer)
    assert {"gold.fleet_orders", "gold.fleet_customer"} <= {t.full_name for t in fast.existing_tables()}
    assert sorted(fast.run("SELECT _source, count(*) FROM gold.fleet_orders GROUP BY ALL ORDER BY ALL").rows) == [
        ("shard-a", 4), ("shard-b", 4)]


def test_union_schema_grows_by_added_columns_and_refuses_a_type_clash(
        spark: Any, tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> None:
    """A shard with a column the union lacks adds it (NULL for the others' rows); a column whose
    type differs fails with the column named and leaves the table as it was."""
    from delta.tables import DeltaTable

    from spark_jobs.gold.job import GoldUnionError, replace_union_rows

    cfg = make_test_config(tmp_path_factory.mktemp("gold-union-schema"), s3_server.endpoint_url)
    replace_union_rows(spark, cfg, "fleet", "a", spark.createDataFrame([(1, "x", "a")], "id INT, v STRING, _source STRING"),
                       "s1")
    replace_union_rows(spark, cfg, "fleet", "b", spark.createDataFrame(
        [(2, "y", 7, "b")], "id INT, v STRING, added BIGINT, _source STRING"), "s2")
    path = gold_location(cfg, "fleet")
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(path).select("_source", "id", "v", "added").collect())
    assert rows == [("a", 1, "x", None), ("b", 2, "y", 7)]
    with pytest.raises(GoldUnionError, match=r"gold.fleet: source c cannot join it, column types differ: "
                                             r"id \(bigint, the union has int\)"):
        replace_union_rows(spark, cfg, "fleet", "c", spark.createDataFrame([(3, "c")], "id BIGINT, _source STRING"), "s3")
    assert DeltaTable.forPath(spark, path).history().count() == 2


# ------------------------------------------------------------------ incremental: one file a night

#: status fields a night-by-night warehouse must share with one in-order run (not run ids, write modes,
#: versions or what the run replayed)
STATUS_FIELDS = ("rows", "changes", "schema_version", "last_file", "last_pos", "last_gtid", "last_commit_time",
                 "warnings", "input_fingerprint", "replayed_through", "schema_digest", "archive_gtids", "complete")


def _status(spark: Any, cfg: Any) -> dict[str, dict[str, Any]]:
    """The source's meta.gold_status rows of its per-source tables (gold and __history), by table."""
    rows = spark.read.format("delta").load(f"{cfg.warehouse}/meta/gold_status").where(f"source = '{SOURCE}'").collect()
    return {r["gold_table"]: {f: r[f] for f in STATUS_FIELDS} for r in rows if "__" in r["gold_table"]}


def _every_table(spark: Any, cfg: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Every gold and __history table of the source: its rows (columns by name), sorted."""
    out = {}
    for table in ("customer", "orders"):
        for suffix in ("", HISTORY_SUFFIX):
            name = gold_table_name(SOURCE, "shop", table) + suffix
            df = spark.read.format("delta").load(gold_location(cfg, name))
            out[name] = sorted((tuple(r) for r in df.select(*sorted(df.columns)).collect()), key=repr)
    return out


def assert_same_as_one_run(spark: Any, cfg: Any, reference: Any) -> int:
    """Every gold and __history table equals the in-order run's cell by cell, and so do the status
    fields both must share; returns the cells compared."""
    got, want = _every_table(spark, cfg), _every_table(spark, reference)
    for name in want:
        assert got[name] == want[name], name
    assert _status(spark, cfg) == _status(spark, reference)
    return sum(len(rows) * len(rows[0]) for rows in want.values() if rows)


def _replays(result: Any) -> dict[str, tuple[str, int]]:
    return {t.table: (t.replay, t.replayed) for t in result.tables}


def test_one_file_a_night_is_incremental_and_equals_one_run(
        spark: Any, gold: dict[str, Any], tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> None:
    """Each file ingested and gold run on its own, history kept and ``customer`` in a union: the
    second night brings ``customer`` up to date incrementally (only its 4 new row changes replayed,
    its TIMESTAMP(3), BIT, BLOB, FLOAT, DECIMAL values read back from Delta exactly), the union's part
    by a MERGE of the touched keys; ``orders`` is created on night 2 and altered on night 3 (full
    replays, the DDL said). At the end every gold and __history table and the status equal the
    one in-order run's."""
    root = tmp_path_factory.mktemp("gold-nightly")
    objects = _copy_chain(root)
    cfg = make_test_config(root, s3_server.endpoint_url,
                           gold={"history": True, "union": {"fleet_customer": "shop.customer"}})
    nights = []
    for i, obj in enumerate(objects[:3]):  # file 4 holds no row change
        run_ingest(spark, cfg, [obj], f"nightly-ingest-{i}")
        result = run_gold(spark, cfg, SOURCE, f"nightly-gold-{i}")
        nights.append(result)
        got, want = _union_vs_stacked(spark, cfg, "fleet_customer", (SOURCE,))
        assert got == want, i
    assert [_replays(r) for r in nights] == [
        {"customer": ("full", 3)},
        {"customer": ("incremental", 4), "orders": ("full", 2)},
        {"customer": ("none", 0), "orders": ("full", 7)}]
    assert [u.write_mode for u in nights[1].unions] == ["merge"]
    new = (spark.read.format("delta").load(f"{cfg.warehouse}/silver/row_changes")
           .where("table_name = 'customer' AND file = 'binlog.000002'").count())
    assert new == 4  # night 2 replayed exactly the new file's changes of the table
    reasons = {t.table: t.replay_reason for t in nights[2].tables}
    assert reasons["orders"] == "schema history or seed changed (DDL)"
    cells = assert_same_as_one_run(spark, cfg, gold["cfg"])
    print(f"one file a night == one run: {cells} cells (gold and __history tables)", file=sys.stderr)


def test_a_replay_on_an_executor_equals_the_one_in_process(
        spark: Any, gold: dict[str, Any], tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> None:
    """``[gold] in_process_changes = 0``: every full replay runs as a Spark job (the stream read and
    sorted by Spark, replayed in a Python worker); the module's run replayed the same tables in its
    own process (the stream read with delta-rs). Same gold and __history tables, cell by cell, and
    the same results (rows, changes, last change, the coordinates replayed through)."""
    root = tmp_path_factory.mktemp("gold-on-executor")
    cfg = make_test_config(root, s3_server.endpoint_url, gold={"history": True, "in_process_changes": 0})
    run_ingest(spark, cfg, _copy_chain(root), "executor-ingest")
    result = run_gold(spark, cfg, SOURCE, "executor-gold")

    def facts(r: Any) -> list[tuple[Any, ...]]:
        return [(t.table, t.replay, t.write_mode, t.rows, t.changes, t.last_change, t.through, t.replayed,
                 t.history_rows, t.warnings) for t in r.tables]
    assert facts(result) == facts(gold["result"]) and {t.replay for t in result.tables} == {"full"}
    assert assert_same_as_one_run(spark, cfg, gold["cfg"]) > 100


def _cut(path: Path, end: int, folder: Path) -> BinlogObject:
    """``path``'s bytes up to ``end`` (an event boundary) as the same file name with another etag:
    the archive object replaced by a shorter one."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / path.name
    target.write_bytes(path.read_bytes()[:end])
    return BinlogObject(source=SOURCE, file=path.name, uri=str(target), size=end, etag=f"cut-{end}")


class Killed(Exception):
    """The run was stopped after its table writes, before its status write."""


def test_fallbacks_and_a_killed_run_equal_one_run(
        spark: Any, gold: dict[str, Any], tmp_path_factory: pytest.TempPathFactory, s3_server: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """In one warehouse (history kept): file 2 first, then file 1 backfilled (older than customer's
    last replayed change: full); file 2 replaced by a copy cut after its DELETE rows event (the
    changes at or before W differ: full) and then by the whole file again (it only grew: incremental,
    1 new change) in a run killed after its table writes but before its status write; the re-run
    (file 3 ingested meanwhile) finds customer's gold table a version ahead of its status row (full,
    never the MERGE twice). Every gold and __history table and the status then equal the one
    in-order run's."""
    import spark_jobs.gold.job as gold_job

    root = tmp_path_factory.mktemp("gold-fallbacks")
    objects = _copy_chain(root)
    cfg = make_test_config(root, s3_server.endpoint_url, gold={"history": True})

    def night(objs: list[BinlogObject], run: str) -> dict[str, tuple[str, str | None]]:
        run_ingest(spark, cfg, objs, f"{run}-ingest")
        return {t.table: (t.replay, t.replay_reason) for t in run_gold(spark, cfg, SOURCE, run).tables}

    older = "changes at or before the last replayed one differ (an older file backfilled or a file re-ingested)"
    first = "no earlier replay of the table in meta.gold_status"
    assert night([objects[1]], "late") == {"customer": ("full", first), "orders": ("full", first)}
    assert night([objects[0]], "backfill") == {"customer": ("full", older), "orders": ("none", None)}
    assert night([_cut(FIX / "binlog.000002", 72659, root / "cut")], "shrunk") == {"customer": ("full", older)}

    seen: list[Any] = []

    def killed(spark_: Any, cfg_: Any, source: str, results: list[Any], *args: Any, **kwargs: Any) -> None:
        seen.extend(results)
        raise Killed

    monkeypatch.setattr(gold_job, "write_status", killed)
    run_ingest(spark, cfg, [objects[1]], "grown-ingest")
    with pytest.raises(Killed):
        run_gold(spark, cfg, SOURCE, "grown")
    monkeypatch.undo()
    assert {t.table: (t.replay, t.replayed, t.write_mode) for t in seen} == {
        "customer": ("incremental", 1, "merge"), "orders": ("full", 2, "merge")}
    rerun = night([objects[2]], "rerun")  # file 3 (ALTER TABLE orders) ingested meanwhile
    # customer's versions: 0 "late", 1 "shrunk", 2 the killed run's MERGE (the backfill's full replay
    # gave the same rows: its MERGE changed nothing and committed nothing)
    assert rerun["customer"] == ("full", "the gold table is at version 2, its status row says 1 "
                                         "(a run stopped after writing it?)")
    assert rerun["orders"] == ("full", first)  # no status row: the killed run wrote none
    cells = assert_same_as_one_run(spark, cfg, gold["cfg"])  # file 4 holds no row change
    print(f"backfill, shrunk / grown file, killed run == one run: {cells} cells", file=sys.stderr)
