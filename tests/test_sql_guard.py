"""`binlake sql` stays inside the warehouse and is read-only unless told otherwise (issue 43, items 13-14).

Small warehouses written with delta-rs (no ingest): a name must never reach a Delta table or a file
outside the warehouse (``gold.`../../x```, ``delta.`/abs```), a write is refused without
``--allow-writes``, and an allowed write waits for the table's commit lock like the jobs' writes.
"""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from conftest import make_test_config

from binlake.config import BinlakeConfig
from binlake.errors import BinlakeError
from binlake.lake.tables import META_GOLD_STATUS, META_INGESTED_FILES
from binlake.sql.fast import FastWarehouse
from binlake.sql.guard import UnsafeStatementError, WriteRefusedError, analyse
from binlake_cli.sql import SqlOptions, SqlSession, run_statements


def _write(location: str | Path, table: pa.Table) -> None:
    from deltalake import write_deltalake

    write_deltalake(str(location), table)


@pytest.fixture()
def warehouse(tmp_path: Path) -> BinlakeConfig:
    """A warehouse with meta.ingested_files and a gold_status naming one real and two hostile gold
    tables, plus a Delta table *outside* it (``<tmp>/outside``)."""
    cfg = make_test_config(tmp_path, "http://127.0.0.1:9")
    wh = Path(cfg.warehouse)
    _write(META_INGESTED_FILES.location(str(wh)), pa.table({"source": ["a", "b"], "n": [1, 2]}))
    _write(wh / "gold" / "a__shop__t", pa.table({"id": [7]}))
    _write(META_GOLD_STATUS.location(str(wh)), pa.table({
        "source": ["a", "a", "a"], "gold_table": ["a__shop__t", "../../outside", "x`; DROP"],
        "write_mode": ["merge", "merge", "merge"]}))
    _write(tmp_path / "outside", pa.table({"secret": ["outside the warehouse"]}))
    return cfg


@pytest.mark.parametrize("query", [
    "SELECT * FROM gold.`../../outside`",
    "SELECT * FROM gold.`{tmp}/outside`",
    "SELECT * FROM `gold.../../outside`",
    "SELECT * FROM delta.`{tmp}/outside`",
    "SELECT * FROM meta.ingested_files JOIN gold.`../../outside` ON true",
])
def test_fast_path_never_opens_a_table_outside_the_warehouse(warehouse: BinlakeConfig, query: str) -> None:
    """``gold.`../../outside``` used to open ``<warehouse>/gold/../../outside`` and return its rows."""
    tmp = Path(warehouse.warehouse).parent
    fast = FastWarehouse(warehouse)
    try:
        with pytest.raises(UnsafeStatementError, match="not a binlake table name") as info:
            fast.run(query.format(tmp=tmp))
    finally:
        fast.close()
    assert isinstance(info.value, BinlakeError)


def test_fast_path_lists_only_safe_gold_names_and_reads_no_files(warehouse: BinlakeConfig) -> None:
    fast = FastWarehouse(warehouse)
    try:
        names = [spec.full_name for spec in fast.existing_tables()]
        assert names == ["meta.ingested_files", "meta.gold_status", "gold.a__shop__t"]
        assert fast.run("SELECT id FROM gold.a__shop__t").rows == [(7,)]
        # DuckDB's own file readers (read_text, read_csv ...) are off, whatever the name
        with pytest.raises(BinlakeError):
            fast.run(f"SELECT * FROM read_csv('{Path(warehouse.warehouse).parent / 'outside'}')")
    finally:
        fast.close()


@pytest.mark.parametrize("statement, verb, writes", [
    ("DELETE FROM meta.ingested_files WHERE source = 'a'", "DELETE", ("meta.ingested_files",)),
    ("INSERT OVERWRITE meta.ingested_files SELECT * FROM meta.ingested_files", "INSERT",
     ("meta.ingested_files",)),
    ("UPDATE meta.gold_status SET rows = 0", "UPDATE", ("meta.gold_status",)),
    ("MERGE INTO gold.a__shop__t t USING gold.a__shop__t s ON t.id = s.id WHEN MATCHED THEN DELETE", "MERGE",
     ("gold.a__shop__t",)),
    ("VACUUM meta.ingested_files RETAIN 0 HOURS", "VACUUM", ("meta.ingested_files",)),
    ("OPTIMIZE silver.row_changes ZORDER BY (db)", "OPTIMIZE", ("silver.row_changes",)),
    ("ALTER TABLE meta.gtid_coverage ADD COLUMNS (x INT)", "ALTER", ("meta.gtid_coverage",)),
    ("DROP TABLE bronze.events", "DROP", ("bronze.events",)),
    ("TRUNCATE TABLE meta.ingested_files", "TRUNCATE", ("meta.ingested_files",)),
    ("RESTORE TABLE meta.ingested_files TO VERSION AS OF 0", "RESTORE", ("meta.ingested_files",)),
    ("WITH c AS (SELECT 1) INSERT INTO meta.ingested_files SELECT * FROM c", "INSERT", ("meta.ingested_files",)),
])
def test_writes_are_recognised_with_their_tables(statement: str, verb: str, writes: tuple[str, ...]) -> None:
    access = analyse(statement)
    assert (access.verb, access.writes, access.read_only) == (verb, writes, False)


@pytest.mark.parametrize("statement, reads", [
    ("SELECT * FROM meta.ingested_files", ("meta.ingested_files",)),
    ("WITH c AS (SELECT * FROM meta.gtid_coverage) SELECT * FROM c JOIN gold.a__b__c USING (x)",
     ("meta.gtid_coverage", "gold.a__b__c")),
    ("DESCRIBE HISTORY meta.ingested_files", ("meta.ingested_files",)),
    ("DESCRIBE DETAIL meta.ingested_files", ("meta.ingested_files",)),
    ("SHOW TABLES IN meta", ()),
    ("SHOW TBLPROPERTIES meta.ingested_files", ("meta.ingested_files",)),
    ("EXPLAIN SELECT * FROM silver.row_changes", ("silver.row_changes",)),
    ("CREATE OR REPLACE TEMPORARY VIEW v AS SELECT * FROM meta.ingested_files", ("meta.ingested_files",)),
])
def test_reads_are_read_only(statement: str, reads: tuple[str, ...]) -> None:
    access = analyse(statement)
    assert (access.read_only, access.writes, sorted(access.reads)) == (True, (), sorted(reads))


@pytest.mark.parametrize("statement", [
    "SELECT * FROM parquet.`/etc`",
    "SELECT * FROM csv.`data.csv`",
    "SELECT * FROM spark_catalog.gold.`a/b`",
    "CREATE TABLE gold.x USING delta LOCATION '/tmp/x'",
    "CONVERT TO DELTA parquet.`/tmp/x`",
    "EXPLAIN SELECT * FROM delta.`/tmp/x`",
    "DESCRIBE DETAIL delta.`/tmp/x`",
    "INSERT OVERWRITE DIRECTORY '/tmp/o' USING parquet SELECT 1",
    "LOAD DATA INPATH '/etc/passwd' INTO TABLE meta.ingested_files",
])
def test_paths_and_locations_are_refused(statement: str) -> None:
    with pytest.raises((UnsafeStatementError, WriteRefusedError)):
        access = analyse(statement)
        if not access.read_only:
            raise WriteRefusedError("a write")


def test_default_mode_refuses_writes_and_leaves_the_table(warehouse: BinlakeConfig) -> None:
    """It used to send the DELETE to Spark with a one-line note."""
    from deltalake import DeltaTable

    location = META_INGESTED_FILES.location(warehouse.warehouse)
    out, err = io.StringIO(), io.StringIO()
    session = SqlSession(warehouse, err=err)
    try:
        rc = run_statements(session, "DELETE FROM meta.ingested_files WHERE source = 'a'; VACUUM meta.ingested_files",
                            SqlOptions(), out, err)
    finally:
        session.close()
    assert rc == 1
    assert err.getvalue().splitlines() == [
        "ERROR: DELETE writes meta.ingested_files: binlake sql is read-only unless started with --allow-writes",
        "ERROR: VACUUM writes meta.ingested_files: binlake sql is read-only unless started with --allow-writes",
    ]
    assert session._spark is None  # refused before any JVM starts
    assert DeltaTable(location).version() == 0


@pytest.mark.spark
def test_spark_engine_never_reads_a_path(spark: Any, warehouse: BinlakeConfig) -> None:
    """``--engine spark`` used to answer ``SELECT * FROM delta.`/any/path```."""
    tmp = Path(warehouse.warehouse).parent
    out, err = io.StringIO(), io.StringIO()
    session = SqlSession(warehouse, engine="spark", err=err)
    try:
        rc = run_statements(session, f"SELECT * FROM delta.`{tmp}/outside`", SqlOptions(), out, err)
        assert rc == 1 and "outside the warehouse" not in out.getvalue()
        assert err.getvalue().startswith(f"ERROR: delta.`{tmp}/outside` is not a binlake table name")
        # runSQLOnFiles is off while binlake sql runs a statement, on again after (a shared session)
        assert session.run("SELECT count(*) AS n FROM meta.ingested_files", 0).rows == [(2,)]
        assert spark.conf.get("spark.sql.runSQLOnFiles") == "true"
    finally:
        session.close()


@pytest.mark.spark
def test_allowed_write_waits_for_the_tables_commit_lock(spark: Any, s3_server: Any, s3_bucket: str,
                                                        tmp_path: Path) -> None:
    """With --allow-writes a DELETE runs under binlake.lake.leases.table_commit_lock, as the jobs' writes do:
    while another writer holds the table's lock it does not commit."""
    from binlake.lake.leases import table_commit_lock

    cfg = make_test_config(tmp_path, s3_server.endpoint_url, pipeline={"warehouse": f"s3a://{s3_bucket}/wh"})
    location = META_INGESTED_FILES.location(cfg.warehouse)
    spark.createDataFrame([("a", 1), ("b", 2)], "source STRING, n BIGINT").write.format("delta").save(location)
    client = s3_server.client()

    def commits() -> int:
        listed = client.list_objects_v2(Bucket=s3_bucket, Prefix="wh/meta/ingested_files/_delta_log/")
        return sum(1 for o in listed.get("Contents", []) if o["Key"].endswith(".json"))

    err = io.StringIO()
    session = SqlSession(cfg, err=err, allow_writes=True)
    outcome: list[Any] = []
    try:
        assert session.run("SELECT count(*) AS n FROM meta.ingested_files", 0).rows == [(2,)]
        _ = session.spark.spark  # the JVM and the table registrations are ready before the lock is taken
        with table_commit_lock(location, cfg.s3):
            writer = threading.Thread(target=lambda: outcome.append(
                session.run("DELETE FROM meta.ingested_files WHERE source = 'a'", 0)))
            writer.start()
            time.sleep(6)
            assert writer.is_alive() and commits() == 1  # waiting for the lock, nothing committed
        writer.join(120)
        assert not writer.is_alive() and commits() == 2
        assert session.run("SELECT source FROM meta.ingested_files", 0).rows == [("b",)]
    finally:
        session.close()
