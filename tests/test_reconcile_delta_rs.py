"""Reconcile without a JVM (binlake.reconcile_job, delta-rs) writes the tables the Spark job wrote.

The fixture chains are ingested once by the real Spark ingest (the scenario sources of
tests/_scenario_warehouse.py: clean, missing = GAP, dup = DUPLICATE, trunc = a tail cut off,
mysql56 = another server's history), plus two sources whose facts are the clean chain's with one
file's PREVIOUS_GTIDS changed: ``overlap`` (it forgets its predecessor's last GTID: OVERLAP) and
``chainbreak`` (it is empty after a non-empty history: CHAIN_BREAK). Both implementations reconcile
copies of that warehouse; the two tables are compared cell by cell, Arrow types and nullability
included.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import pytest
from _scenario_warehouse import scenario_objects
from conftest import make_test_config

from binlake.config import BinlakeConfig
from binlake.tables import table

pytestmark = pytest.mark.spark

TABLES = ("meta.gtid_coverage", "meta.gtid_reconciliation")
#: the synthetic sources: binlog.000003's PREVIOUS_GTIDS (GTID_LIST) replaced
EDITED = {"overlap": "0:1-5", "chainbreak": ""}


def _add_edited_sources(cfg: BinlakeConfig) -> None:
    """Append the clean chain's facts as sources ``overlap`` / ``chainbreak``, one file edited."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from binlake.delta_tables import open_delta_table

    facts = open_delta_table(table("meta.binlog_files").location(cfg.warehouse))
    assert facts is not None
    clean = [r for r in facts.to_pyarrow_table().to_pylist() if r["source"] == "clean"]
    assert [r["previous_gtids"] for r in clean if r["file"] == "binlog.000003"] == ["0:1-6"]
    rows = []
    for source, previous in EDITED.items():
        for r in clean:
            rows.append(dict(r, source=source, previous_gtids=previous if r["file"] == "binlog.000003"
                             else r["previous_gtids"]))
    write_deltalake(facts, pa.Table.from_pylist(rows, schema=pa.schema(facts.schema().to_arrow())), mode="append")


@pytest.fixture(scope="module")
def ingested(spark: Any, tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> BinlakeConfig:
    from spark_jobs.ingest import run_ingest

    objs = scenario_objects(tmp_path_factory.mktemp("scenarios"), truncated=True)
    cfg = make_test_config(tmp_path_factory.mktemp("wh"), s3_server.endpoint_url)
    run_ingest(spark, cfg, objs, "ingest-1")
    _add_edited_sources(cfg)
    return cfg


def _copy(cfg: BinlakeConfig, to: Path) -> BinlakeConfig:
    shutil.copytree(cfg.warehouse, to / "warehouse")
    return make_test_config(to, str(cfg.s3.endpoint_url))


def table_cells(cfg: BinlakeConfig, name: str) -> tuple[list[tuple[str, str, bool]], list[list[Any]]]:
    """The table's (column, Arrow type, nullable) and its rows in key order, run-dependent columns aside."""
    from binlake.delta_tables import open_delta_table

    delta = open_delta_table(table(name).location(cfg.warehouse))
    assert delta is not None, name
    data = delta.to_pyarrow_table()
    schema = [(f.name, str(f.type), f.nullable) for f in data.schema]
    rows = [[r[f[0]] for f in schema] for r in data.to_pylist()]
    key = [i for i, f in enumerate(schema) if f[0] in table(name).key]
    return schema, sorted(rows, key=lambda r: [r[i] for i in key])


def typed(rows: list[list[Any]]) -> list[list[tuple[str, Any]]]:
    """Each cell with its Python type's name (``1 == True`` in Python; not here)."""
    return [[(type(v).__name__, v) for v in row] for row in rows]


def test_delta_rs_tables_equal_the_spark_jobs(spark: Any, ingested: BinlakeConfig,
                                               tmp_path_factory: pytest.TempPathFactory) -> None:
    from binlake.reconcile_job import run_reconcile
    from spark_jobs.reconcile import run_reconcile as spark_reconcile

    with_spark = _copy(ingested, tmp_path_factory.mktemp("spark"))
    without = _copy(ingested, tmp_path_factory.mktemp("delta_rs"))
    theirs = spark_reconcile(spark, with_spark, "reconcile-1")
    mine = run_reconcile(without, "reconcile-1")
    assert mine.statuses == theirs.statuses
    # overlap's binlog.000004 then misses the GTID its predecessor forgot: a GAP too
    assert mine.statuses == {"OK": 19, "GAP": 4, "DUPLICATE": 1, "OVERLAP": 1, "CHAIN_BREAK": 1}
    compared = {"tables": 0, "rows": 0, "cells": 0}
    for name in TABLES:
        schema, rows = table_cells(without, name)
        spark_schema, spark_rows = table_cells(with_spark, name)
        assert schema == spark_schema, name
        assert typed(rows) == typed(spark_rows), name
        compared["tables"] += 1
        compared["rows"] += len(rows)
        compared["cells"] += len(rows) * len(schema)
    print(f"compared {compared}")
    assert compared["tables"] == 2


def test_commit_times_are_utc_instants(ingested: BinlakeConfig, tmp_path_factory: pytest.TempPathFactory) -> None:
    """mariadb-binlog prints every commit of the fixture chain at 261122 5:28:04 server time."""
    from binlake.reconcile_job import run_reconcile

    cfg = _copy(ingested, tmp_path_factory.mktemp("times"))
    run_reconcile(cfg, "reconcile-times", sources=["clean"])
    schema, rows = table_cells(cfg, "meta.gtid_coverage")
    names = [c for c, *_ in schema]
    assert dict((c, t) for c, t, _n in schema)["first_commit_time"] == "timestamp[us, tz=UTC]"
    (row,) = [dict(zip(names, r, strict=True)) for r in rows if r[0] == "clean"]
    local = dt.datetime(2026, 11, 22, 5, 28, 4).astimezone(dt.UTC)  # as Spark read the naive time
    assert (row["first_commit_time"], row["last_commit_time"]) == (local, local)
