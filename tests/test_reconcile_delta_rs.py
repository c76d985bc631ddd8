"""Reconcile without a JVM (binlake.reconcile.job, delta-rs) writes the tables the Spark job wrote.

The fixture chains are ingested once by the real Spark ingest (the scenario sources of
tests/_scenario_warehouse.py: clean, missing = GAP, dup = DUPLICATE, trunc = a tail cut off,
mysql56 = another server's history), plus two sources whose facts are the clean chain's with one
file's PREVIOUS_GTIDS changed: ``overlap`` (it forgets its predecessor's last GTID: OVERLAP) and
``chainbreak`` (it is empty after a non-empty history: CHAIN_BREAK). The Spark job's tables of
that warehouse were compared live with these, then recorded (tests/fixtures/reconcile/) before the
Spark job was removed; the test compares cell by cell, Arrow types and nullability included.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from _scenario_warehouse import scenario_objects
from conftest import make_test_config

from binlake.config import BinlakeConfig
from binlake.lake.tables import table

pytestmark = pytest.mark.spark

TABLES = ("meta.gtid_coverage", "meta.gtid_reconciliation")
#: the two tables as the Spark job wrote them from this warehouse (recorded at commit e0c5e84)
SPARK_TABLES = Path(__file__).parent / "fixtures" / "reconcile" / "spark_tables.json"
#: the synthetic sources: binlog.000003's PREVIOUS_GTIDS (GTID_LIST) replaced
EDITED = {"overlap": "0:1-5", "chainbreak": ""}


def _add_edited_sources(cfg: BinlakeConfig) -> None:
    """Append the clean chain's facts as sources ``overlap`` / ``chainbreak``, one file edited."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from binlake.lake.delta_tables import open_delta_table

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
    from binlake.lake.delta_tables import open_delta_table

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


def recorded(rows: list[list[Any]]) -> list[list[list[Any]]]:
    """Each cell as ``[Python type name, value]`` (``1 == True`` in Python; not here), times as ISO
    text: the form of the recorded tables."""
    return [[[type(v).__name__, v.isoformat() if isinstance(v, dt.datetime) else v] for v in row] for row in rows]


def test_tables_equal_the_spark_jobs(ingested: BinlakeConfig, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Cell by cell, types included, against the tables the Spark job (spark_jobs/reconcile.py, removed
    after this comparison passed live) wrote from the same warehouse, recorded in SPARK_TABLES."""
    from binlake.reconcile.job import run_reconcile

    cfg = _copy(ingested, tmp_path_factory.mktemp("delta_rs"))
    result = run_reconcile(cfg, "reconcile-1")
    # overlap's binlog.000004 then misses the GTID its predecessor forgot: a GAP too
    assert result.statuses == {"OK": 19, "GAP": 4, "DUPLICATE": 1, "OVERLAP": 1, "CHAIN_BREAK": 1}
    expected = json.loads(SPARK_TABLES.read_text())
    compared = {"tables": 0, "rows": 0, "cells": 0}
    for name in TABLES:
        schema, rows = table_cells(cfg, name)
        assert [list(c) for c in schema] == expected[name]["schema"], name
        assert recorded(rows) == expected[name]["rows"], name
        compared["tables"] += 1
        compared["rows"] += len(rows)
        compared["cells"] += len(rows) * len(schema)
    assert compared == {"tables": 2, "rows": 35, "cells": 611}


def test_rerun_leaves_the_tables_unchanged(ingested: BinlakeConfig, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Deterministic: a second run over the same facts writes the same rows (one commit per table)."""
    from binlake.lake.delta_tables import open_delta_table
    from binlake.reconcile.job import run_reconcile

    cfg = _copy(ingested, tmp_path_factory.mktemp("rerun"))
    run_reconcile(cfg, "reconcile-1")
    first = {name: table_cells(cfg, name) for name in TABLES}
    versions = {n: open_delta_table(table(n).location(cfg.warehouse)).version() for n in TABLES}  # type: ignore[union-attr]
    run_reconcile(cfg, "reconcile-2", sources=["overlap", "clean"])
    assert {name: table_cells(cfg, name) for name in TABLES} == first
    assert {n: open_delta_table(table(n).location(cfg.warehouse)).version() for n in TABLES} == {  # type: ignore[union-attr]
        n: v + 1 for n, v in versions.items()}


def test_commit_times_are_utc_instants(ingested: BinlakeConfig, tmp_path_factory: pytest.TempPathFactory) -> None:
    """mariadb-binlog prints every commit of the fixture chain at 261122 5:28:04 server time."""
    from binlake.reconcile.job import run_reconcile

    cfg = _copy(ingested, tmp_path_factory.mktemp("times"))
    run_reconcile(cfg, "reconcile-times", sources=["clean"])
    schema, rows = table_cells(cfg, "meta.gtid_coverage")
    names = [c for c, *_ in schema]
    assert dict((c, t) for c, t, _n in schema)["first_commit_time"] == "timestamp[us, tz=UTC]"
    (row,) = [dict(zip(names, r, strict=True)) for r in rows if r[0] == "clean"]
    local = dt.datetime(2026, 11, 22, 5, 28, 4).astimezone(dt.UTC)  # as Spark read the naive time
    assert (row["first_commit_time"], row["last_commit_time"]) == (local, local)


def test_an_output_table_with_features_delta_rs_leaves_to_spark_is_named(tmp_path: Path) -> None:
    """delta-rs's refusal is a returned outcome; reconcile (no Spark to fall back on) turns it into
    its own error naming the table, its protocol and the fix, and writes nothing."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from binlake.reconcile.job import ReconcileTableError, _write

    cfg = make_test_config(tmp_path, "http://127.0.0.1:9")
    location = table("meta.gtid_coverage").location(cfg.warehouse)
    write_deltalake(location, pa.table({"source": ["a"], "n": [1]}), partition_by=["source"],
                    configuration={"delta.enableDeletionVectors": "true"})
    with pytest.raises(ReconcileTableError, match=r"meta\.gtid_coverage has Delta protocol features .*deletionVectors"):
        _write(cfg, "meta.gtid_coverage", DeltaTable(location), [{"source": "a", "n": 2}], ["a"], run_id="r1",
               txn_app="binlake-reconcile:r1")
    assert DeltaTable(location).version() == 0
