"""`binlake sql`: the JVM-free fast path equals Spark on every table, formats, hints, the prompt.

The warehouse is written by the real Spark ingest + reconcile of the fixture chain (four scenario
sources, tests/_scenario_warehouse.py); the S3 case reads a copy of it from the loopback S3 server.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _scenario_warehouse import scenario_warehouse, write_config_file

from binlake.config import BinlakeConfig, load_config
from binlake.errors import BinlakeError
from binlake.lake.tables import TABLES
from binlake.sql.fast import FastWarehouse, NeedsSparkError, TableNotFoundError, translate
from binlake.sql.values import canonical, render_text, write_csv, write_table
from binlake_cli.sql import (
    SqlOptions,
    SqlSession,
    interactive,
    make_completer,
    run_sql,
    split_statements,
)

BINLAKE = Path(sys.executable).parent / "binlake"


@pytest.fixture(scope="module")
def scenario(spark: Any, tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> BinlakeConfig:
    return scenario_warehouse(spark, tmp_path_factory, s3_server.endpoint_url)


@pytest.fixture(scope="module")
def config_file(scenario: BinlakeConfig, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_config_file(scenario, tmp_path_factory.mktemp("conf") / "binlake.toml")


def _sorted(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=repr)


def _spark_result(spark: Any, cfg: BinlakeConfig, query: str) -> Any:
    from spark_jobs.sql_engine import register_tables, run_query

    register_tables(spark, cfg)
    return run_query(spark, query, max_rows=100_000)


@pytest.mark.spark
def test_fast_path_equals_spark_on_every_table(spark: Any, scenario: BinlakeConfig) -> None:
    fast = FastWarehouse(scenario)
    present = [spec.full_name for spec in fast.existing_tables()]
    assert {"bronze.events", "silver.transactions", "silver.row_changes", "meta.binlog_files",
            "meta.gtid_coverage", "meta.gtid_reconciliation", "meta.ingested_files"} <= set(present)
    for name in present:
        want = _spark_result(spark, scenario, f"SELECT * FROM {name}")
        got = fast.run(f"SELECT * FROM {name}")
        assert got.columns == want.columns, name
        assert len(got.rows) == len(want.rows), name
        assert name == "bronze.quarantine" or len(got.rows) >= 4, name  # quarantine: nothing bad here
        assert _sorted(got.rows) == _sorted(want.rows), name


@pytest.mark.spark
@pytest.mark.parametrize("query", [
    "SELECT source, status, count(*) AS n FROM meta.gtid_reconciliation GROUP BY source, status",
    ("SELECT source, sid, sum(gno_end - gno_start + 1) AS gtids, 7 / 2 AS half FROM meta.gtid_coverage "
    "GROUP BY source, sid"),
    "SELECT file, size(missing_files) AS n, missing_files FROM meta.gtid_reconciliation WHERE status = 'GAP'",
    ("WITH t AS (SELECT source, count(*) AS c FROM silver.row_changes GROUP BY source) "
    "SELECT * FROM t WHERE c > 0"),
    "SELECT upper(source) AS s, concat(source, ':', file) AS k FROM meta.ingested_files",
])
def test_fast_path_equals_spark_on_queries(spark: Any, scenario: BinlakeConfig, query: str) -> None:
    want = _spark_result(spark, scenario, query)
    got = FastWarehouse(scenario).run(query)
    assert got.columns == want.columns
    assert want.rows and _sorted(got.rows) == _sorted(want.rows)


def _typed_gold_table(location: str) -> None:
    """A gold-like Delta table of every kind of type, one column with a comment (written by delta-rs).

    No NOT NULL column: delta-rs 1.6.6 then lists ``invariants`` in the metadata but not in the
    protocol, which Delta Spark 4.4 refuses to read (DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH).
    """
    import datetime
    import decimal

    import pyarrow as pa
    from deltalake import write_deltalake

    schema = pa.schema([
        pa.field("id", pa.int64(), metadata={"comment": "the row's key"}),  # nullable: see below
        pa.field("amount", pa.decimal128(12, 2)), pa.field("placed", pa.timestamp("us")),
        pa.field("at", pa.timestamp("us", tz="UTC")), pa.field("raw", pa.binary()),
        pa.field("tags", pa.list_(pa.string())), pa.field("attrs", pa.map_(pa.string(), pa.string())),
        pa.field("n", pa.int32()), pa.field("small", pa.int16()), pa.field("pair", pa.struct([("a", pa.int8())])),
        pa.field("ok", pa.bool_()), pa.field("day", pa.date32()), pa.field("x", pa.float64()),
    ])
    row = {"id": 1, "amount": decimal.Decimal("1.50"), "placed": datetime.datetime(2024, 1, 1),
           "at": datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC), "raw": b"x", "tags": ["a"],
           "attrs": [("k", "v")], "n": 1, "small": 2, "pair": {"a": 3}, "ok": True,
           "day": datetime.date(2024, 1, 1), "x": 0.5}
    write_deltalake(location, pa.Table.from_pylist([row], schema=schema))


@pytest.mark.spark
def test_describe_shows_the_delta_types_and_comments_as_spark_does(spark: Any, scenario: BinlakeConfig) -> None:
    """DESCRIBE on the JVM-free path is Spark's DESCRIBE: Delta's types, comments, partition columns."""
    from binlake.lake.tables import gold_table
    from spark_jobs.sql_engine import register_tables, run_query

    name = "hk_describe_types"
    location = gold_table(name).location(scenario.warehouse)
    _typed_gold_table(location)
    fast = FastWarehouse(scenario)
    got = fast.run(f"DESCRIBE gold.{name}")
    assert got.columns == ["col_name", "data_type", "comment"]
    assert got.rows == [
        ("id", "bigint", "the row's key"), ("amount", "decimal(12,2)", None), ("placed", "timestamp_ntz", None),
        ("at", "timestamp", None), ("raw", "binary", None), ("tags", "array<string>", None),
        ("attrs", "map<string,string>", None), ("n", "int", None), ("small", "smallint", None),
        ("pair", "struct<a:tinyint>", None), ("ok", "boolean", None), ("day", "date", None),
        ("x", "double", None)]
    register_tables(spark, scenario)  # the databases, and the registry's tables by name
    spark.sql(f"CREATE TABLE IF NOT EXISTS gold.{name} USING delta LOCATION '{location}'")
    try:
        for table in (f"gold.{name}", "silver.row_changes", "meta.ingested_files"):  # partitioned by source
            want = run_query(spark, f"DESCRIBE TABLE {table}")
            got = fast.run(f"DESCRIBE {table}")
            assert (table, got.columns, got.rows) == (table, want.columns, want.rows)
    finally:
        spark.sql(f"DROP TABLE IF EXISTS gold.{name}")  # the name only: the data stays for the fast path


@pytest.mark.spark
def test_fast_path_reads_an_s3_warehouse(spark: Any, scenario: BinlakeConfig) -> None:
    """The warehouse copied to a bucket of a moto server in its own process.

    (Not the session's in-process server: delta-rs holds the GIL while it waits for the
    response, which a server thread in the same interpreter could then never send.)
    """
    import dataclasses

    from binlake_testing.s3server import S3Server

    server = S3Server(mode="process").start()
    try:
        client = server.client()
        client.create_bucket(Bucket="lake")
        root = Path(scenario.warehouse)
        for path in root.rglob("*"):
            if path.is_file():
                client.upload_file(str(path), "lake", f"wh/{path.relative_to(root)}")
        on_s3 = dataclasses.replace(scenario, warehouse="s3a://lake/wh",
                                    s3=dataclasses.replace(scenario.s3, endpoint_url=server.endpoint_url))
        query = "SELECT source, file, status, missing_gtids FROM meta.gtid_reconciliation"
        got = FastWarehouse(on_s3).run(query)
    finally:
        server.stop()
    assert _sorted(got.rows) == _sorted(_spark_result(spark, scenario, query).rows)
    assert ("missing", "binlog.000003", "GAP", "0:4-6") in got.rows


def _cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BINLAKE), "sql", "--config", str(config), *args], capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.mark.spark
def test_console_script_formats(config_file: Path) -> None:
    query = "SELECT source, file, missing_files FROM meta.gtid_reconciliation WHERE status = 'GAP' ORDER BY source"
    proc = _cli(config_file, "--format", "csv", query)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert list(csv.reader(io.StringIO(proc.stdout))) == [
        ["source", "file", "missing_files"],
        ["missing", "binlog.000003", '["binlog.000002"]'],
        ["mysql56", "mysql-bin.000002", "[]"],
    ]
    proc = _cli(config_file, "--format", "json", query)
    assert next(json.loads(line) for line in proc.stdout.splitlines()) == {
        "source": "missing", "file": "binlog.000003", "missing_files": ["binlog.000002"]}
    proc = _cli(config_file, "SHOW TABLES IN meta")
    assert proc.returncode == 0
    assert "| meta      | gtid_reconciliation |" in proc.stdout and "bronze" not in proc.stdout


@pytest.mark.spark
def test_missing_table_names_warehouse_and_config(config_file: Path, scenario: BinlakeConfig) -> None:
    proc = _cli(config_file, "SELECT * FROM silver.nope")
    assert proc.returncode == 1
    line, = proc.stderr.splitlines()
    assert line.startswith("ERROR: table silver.nope not found in warehouse " + scenario.warehouse)
    assert f"config: {config_file}" in line and "meta.gtid_coverage" in line


def test_missing_table_hint_points_at_the_demo(tmp_path: Path) -> None:
    demo = tmp_path / "state" / "demo"
    demo.mkdir(parents=True)
    (demo / "binlake.toml").write_text("")
    cfg_path = tmp_path / "c.toml"
    cfg_path.write_text('[pipeline]\nwarehouse = "wh"\nstate_dir = "state"\n')
    fast = FastWarehouse(load_config(cfg_path, env={}))
    with pytest.raises(TableNotFoundError) as info:
        fast.run("SELECT * FROM meta.ingested_files")
    assert str(info.value) == (
        f"table meta.ingested_files not found in warehouse {tmp_path / 'wh'} (config: {cfg_path}); "
        f"there: no binlake tables yet. The demo's tables: BINLAKE_CONFIG={demo / 'binlake.toml'} binlake sql ...")


@pytest.mark.spark
def test_writes_go_to_spark_and_spark_engine_prints_the_same(spark: Any, config_file: Path) -> None:
    query = "SELECT source, sid, gno_start, gno_end FROM meta.gtid_coverage ORDER BY source, sid, gno_start"
    fast_out, spark_out, err = io.StringIO(), io.StringIO(), io.StringIO()
    assert run_sql(SqlOptions(query=query, config=str(config_file), output_format="csv"), out=fast_out) == 0
    assert run_sql(SqlOptions(query=query, config=str(config_file), output_format="csv", engine="spark"),
                   out=spark_out) == 0
    assert fast_out.getvalue() == spark_out.getvalue() and "missing,0,7,10" in fast_out.getvalue()
    out = io.StringIO()
    rc = run_sql(SqlOptions(query="CREATE OR REPLACE TEMPORARY VIEW v AS SELECT 1 AS a; SELECT 2 AS b",
                            config=str(config_file)), out=out, err=err)
    assert rc == 0, err.getvalue()
    assert "(running on Spark: CREATE statements run on Spark)" in err.getvalue()
    assert out.getvalue().startswith("OK\n")


@pytest.mark.spark
def test_prompt_history_completion_and_ctrl_c(config_file: Path) -> None:
    from prompt_toolkit.document import Document
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    cfg = load_config(config_file, env={})
    session = SqlSession(cfg)
    completer = make_completer(session)
    typed = "SELECT * FROM meta.gtid_reconcil"
    assert [c.text for c in completer.get_completions(Document(typed), None)] == ["meta.gtid_reconciliation"]
    typed = "SELECT missing_fi"
    assert [c.text for c in completer.get_completions(Document(typed), None)] == ["missing_files"]
    out, err = io.StringIO(), io.StringIO()
    with create_pipe_input() as pipe:
        # a statement abandoned with Ctrl-C, one run, then Ctrl-D
        pipe.send_text("SELECT 'abandoned' AS x\x03")
        pipe.send_text("SELECT count(*) AS n FROM meta.gtid_reconciliation\r  WHERE status = 'GAP';\r")
        pipe.send_text("\x04")
        rc = interactive(session, SqlOptions(config=str(config_file)), out=out, err=err,
                         prompt_input=pipe, prompt_output=DummyOutput())
    session.close()
    text = out.getvalue()
    assert rc == 0 and err.getvalue() == "", err.getvalue()
    assert "abandoned" not in text
    assert "| n |" in text and "| 2 |" in text
    history = (Path(cfg.state_dir) / "sql_history").read_text()
    assert "+  WHERE status = 'GAP';" in history and "abandoned" not in history


@pytest.mark.spark
def test_pipe_prompt_keeps_going_after_an_error(config_file: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    stdin = io.StringIO("SELECT count(*) AS files\n  FROM meta.ingested_files;\nSELECT nope FROM meta.x;\nexit\n")
    assert run_sql(SqlOptions(config=str(config_file)), out=out, err=err, stdin=stdin) == 0
    assert "| 14    |" in out.getvalue()  # 4 + 3 + 5 + 2 files
    assert err.getvalue().startswith("ERROR: table meta.x not found")


def test_values_print_as_sql_does() -> None:
    import pyarrow as pa

    table = pa.table({
        "m": pa.array([[("k", "v"), ("n", None)], []], type=pa.map_(pa.string(), pa.string())),
        "s": pa.array([{"a": 1, "b": "x"}, None]),
        "b": pa.array([b"\x00\x01" * 40, None]),
    })
    from binlake.sql.values import arrow_rows

    rows = arrow_rows(table)
    assert [render_text(v) for v in rows[0]] == ['{"k":"v","n":null}', '{"a":1,"b":"x"}', "0x" + "0001" * 40]
    assert [render_text(v) for v in rows[1]] == ["{}", "NULL", "NULL"]
    assert canonical([1, [2]]) == [1, [2]]


def test_full_cells_in_every_format() -> None:
    long_text = "tab\there\nnew line " + "x" * 200
    out = io.StringIO()
    write_csv(["a", "b"], [(long_text, None)], out)
    assert list(csv.reader(io.StringIO(out.getvalue()))) == [["a", "b"], [long_text, ""]]
    out = io.StringIO()
    write_table(["a"], [("y" * 300,)], out)
    assert "y" * 300 in out.getvalue()


def test_split_and_translate() -> None:
    assert split_statements("SELECT ';' AS a; SELECT 2; -- done;\n") == ["SELECT ';' AS a", "SELECT 2", "-- done;"]
    sql, tables, calls = translate("WITH c AS (SELECT * FROM meta.gtid_coverage) SELECT 7/2, count(*) FROM c")
    assert tables == ["meta.gtid_coverage"] and calls == []
    assert '"7 / 2"' in sql and "NULLIF" in sql


def test_translate_hands_binlake_table_functions_to_the_caller() -> None:
    """``asof_table(...)`` becomes a reference to rows the caller registers; other table functions
    and non-literal arguments are refused in words."""
    sql, tables, calls = translate("SELECT a.id FROM asof_table('s1', 'shop.t', 'gtid', '0-1-9') AS a "
                                   "JOIN meta.binlog_files AS f ON a.id = f.file_seq", frozenset({"asof_table"}))
    assert calls == [("asof_table", ["s1", "shop.t", "gtid", "0-1-9"])] and tables == ["meta.binlog_files"]
    assert "__function_0 AS a" in sql and "asof_table" not in sql.lower()
    with pytest.raises(NeedsSparkError, match="table function"):
        translate("SELECT * FROM asof_table('s1', 'shop.t', 'gtid', '0-1-9')")
    with pytest.raises(BinlakeError, match="string literals only, got 1 \\+ 1"):
        translate("SELECT * FROM asof_table('s1', 'shop.t', 'gtid', 1 + 1)", frozenset({"asof_table"}))


def test_table_registry() -> None:
    names = [t.full_name for t in TABLES]
    assert len(names) == len(set(names))
    for required in ("bronze.events", "bronze.quarantine", "silver.transactions", "silver.row_changes",
                     "silver.statements", "meta.ingested_files", "meta.gtid_coverage", "meta.gtid_reconciliation"):
        assert required in names
