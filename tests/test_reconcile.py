"""The reconcile job (delta-rs, no JVM) over archives ingested by Spark from real fixtures (local[2], Delta).

Each scenario is its own source in one ingestion: the clean MariaDB chain, the chain with a
file missing, with a file uploaded twice under two names, with a file cut mid-event, and a
MySQL 5.6 two-file chain from another server. One reconcile run must give exactly the
expected statuses and missing sets; a second run leaves both tables unchanged.
"""

from __future__ import annotations

from typing import Any

import pytest
from _scenario_warehouse import scenario_objects
from conftest import make_test_config

from binlake.reconcile.job import run_reconcile
from spark_jobs.ingest import run_ingest
from spark_jobs.lake import table_path

pytestmark = pytest.mark.spark

MYSQL56_PREV = ("7e23401a-c603-11e3-8e13-5e10e6a05cfb:1-5,8186fc1e-c5ff-11e3-8df9-e66ccf50db66:1-11,"
                "a6ce328c-c602-11e3-8e0d-e66ccf50db66:1-6,b7009920-c601-11e3-8e07-5e10e6a05cfb:1-6")


@pytest.fixture(scope="module")
def reconciled(spark: Any, tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> dict[str, Any]:
    objs = scenario_objects(tmp_path_factory.mktemp("scenarios"), truncated=True)
    cfg = make_test_config(tmp_path_factory.mktemp("wh"), s3_server.endpoint_url)
    run_ingest(spark, cfg, objs, "ingest-1")
    result = run_reconcile(cfg, "reconcile-1")
    recon = spark.read.format("delta").load(table_path(cfg, "meta.gtid_reconciliation"))
    cov = spark.read.format("delta").load(table_path(cfg, "meta.gtid_coverage"))
    return {"cfg": cfg, "result": result,
            "recon": [r.asDict() for r in recon.orderBy("source", "chain_index").collect()],
            "cov": [r.asDict() for r in cov.orderBy("source", "sid", "tag", "gno_start").collect()]}


def rows_of(reconciled: dict[str, Any], source: str) -> list[tuple]:
    return [(r["file"], r["status"], r["missing_gtids"], r["extra_gtids"])
            for r in reconciled["recon"] if r["source"] == source]


def test_clean_chain_is_ok(reconciled: dict[str, Any]) -> None:
    assert rows_of(reconciled, "clean") == [(f"binlog.00000{i}", "OK", "", "") for i in range(1, 5)]


def test_missing_file_is_a_gap(reconciled: dict[str, Any]) -> None:
    assert rows_of(reconciled, "missing") == [
        ("binlog.000001", "OK", "", ""),
        ("binlog.000003", "GAP", "0:4-6", ""),
        ("binlog.000004", "OK", "", ""),
    ]
    row = next(r for r in reconciled["recon"] if r["source"] == "missing" and r["file"] == "binlog.000003")
    assert row["missing_files"] == ["binlog.000002"] and row["expected_file"] == "binlog.000002"


def test_duplicate_upload(reconciled: dict[str, Any]) -> None:
    assert rows_of(reconciled, "dup") == [(f"binlog.00000{i}", "OK", "", "") for i in range(1, 5)] + [
        ("binlog-reupload.000002", "DUPLICATE", "", "0:4-6")]
    row = reconciled["recon"][[r["file"] for r in reconciled["recon"]].index("binlog-reupload.000002")]
    assert row["duplicate_of"] == "binlog.000002"


def test_truncated_tail_shows_as_gap_after_it(reconciled: dict[str, Any]) -> None:
    assert rows_of(reconciled, "trunc") == [
        ("binlog.000001", "OK", "", ""),
        ("binlog.000002", "OK", "", ""),
        ("binlog.000003", "GAP", "0:6", ""),   # 0-7-6 was cut off with the tail
        ("binlog.000004", "OK", "", ""),
    ]
    t2 = next(r for r in reconciled["recon"] if r["source"] == "trunc" and r["file"] == "binlog.000002")
    assert t2["truncated"] and t2["closing_event"] is None and t2["contained_gtids"] == "0:4-5"


def test_other_server_chain(reconciled: dict[str, Any]) -> None:
    # The 5.6 server's second file says it follows 4 UUIDs' GTIDs that no archived file holds.
    assert rows_of(reconciled, "mysql56") == [
        ("mysql-bin.000001", "OK", "", ""),
        ("mysql-bin.000002", "GAP", MYSQL56_PREV, ""),
    ]


def test_coverage(reconciled: dict[str, Any]) -> None:
    cov = [(c["source"], c["sid"], c["gno_start"], c["gno_end"], c["first_file"], c["last_file"])
           for c in reconciled["cov"]]
    assert ("clean", "0", 1, 10, "binlog.000001", "binlog.000003") in cov
    assert [c for c in cov if c[0] == "missing"] == [
        ("missing", "0", 1, 3, "binlog.000001", "binlog.000001"),
        ("missing", "0", 7, 10, "binlog.000003", "binlog.000003")]
    assert [c for c in cov if c[0] == "trunc"] == [
        ("trunc", "0", 1, 5, "binlog.000001", "binlog.000002"),
        ("trunc", "0", 7, 10, "binlog.000003", "binlog.000003")]
    assert ("mysql56", "7e23401a-c603-11e3-8e13-5e10e6a05cfb", 6, 6, "mysql-bin.000002", "mysql-bin.000002") in cov


def test_rerun_is_unchanged_and_reachable_by_sql(spark: Any, reconciled: dict[str, Any]) -> None:
    from spark_jobs.sql_engine import register_tables

    cfg = reconciled["cfg"]
    r = run_reconcile(cfg, "reconcile-2")
    assert r.statuses == reconciled["result"].statuses
    again = spark.read.format("delta").load(table_path(cfg, "meta.gtid_reconciliation"))
    assert [x.asDict() for x in again.orderBy("source", "chain_index").collect()] == reconciled["recon"]
    register_tables(spark, cfg)
    n = spark.sql("SELECT count(*) AS n FROM meta.gtid_reconciliation WHERE status = 'GAP'").collect()[0]["n"]
    assert n == 3
    assert spark.sql("SELECT count(*) AS n FROM meta.gtid_coverage").collect()[0]["n"] == len(reconciled["cov"])


def test_coverage_commit_times(reconciled: dict[str, Any]) -> None:
    """mariadb-binlog prints every commit of the fixture chain at 261122 5:28:04 (server id 7)."""
    import datetime as dt

    server_time = dt.datetime(2026, 11, 22, 5, 28, 4)
    times = {(c["source"], c["gno_start"], c["gno_end"]): (c["first_commit_time"], c["last_commit_time"])
             for c in reconciled["cov"] if c["sid"] == "0"}
    assert times[("clean", 1, 10)] == (server_time, server_time)
    assert times[("missing", 7, 10)] == (server_time, server_time)
    assert times[("trunc", 1, 5)] == (server_time, server_time)  # 0-7-6 was cut: 5 is the last one there
