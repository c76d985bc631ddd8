"""The nightly DAG runs for real through Airflow (dag.test(): scheduler loop, task runner, XCom,
SQLite metadata DB), reading the sample chains from the loopback S3 server and writing Delta."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from binlake.config import load_config
from binlake.demo import (
    DEMO_SOURCES,
    NIGHTLY_DAG_ID,
    load_dag,
    migrate_airflow_db,
    run_dag,
    upload_demo_sources,
    write_demo_config,
)
from binlake.s3server import S3Server
from binlake.tables import table_location


@pytest.fixture()
def demo_config(tmp_path: Path, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Path:
    bucket = "binlake-dag-test"
    upload_demo_sources(s3_server.client(), bucket=bucket)
    path = write_demo_config(tmp_path / "binlake.toml", endpoint=s3_server.endpoint_url,
                             warehouse=tmp_path / "warehouse", state_dir=tmp_path / "state", bucket=bucket)
    monkeypatch.setenv("BINLAKE_CONFIG", str(path))
    return path


@pytest.mark.airflow
@pytest.mark.spark
def test_nightly_dag_runs_through_airflow(demo_config: Path, spark: Any) -> None:
    # AIRFLOW_HOME (a tmp dir with SQLite) was set by conftest before Airflow was imported.
    assert "binlake-airflow-" in os.environ["AIRFLOW_HOME"]
    migrate_airflow_db()
    dag = load_dag(NIGHTLY_DAG_ID)
    assert {t.task_id for t in dag.tasks} == {"list_source_objects", "record_ingested_files"}

    result = run_dag(dag)
    assert result.success, result
    assert result.task_states == {"list_source_objects": "success", "record_ingested_files": "success"}

    listing = result.xcoms["list_source_objects"]
    expected = sum(len(s.files) for s in DEMO_SOURCES)
    assert len(listing) == expected
    assert {r["source"] for r in listing} == {s.name for s in DEMO_SOURCES}
    assert result.xcoms["record_ingested_files"]["rows"] == expected

    cfg = load_config(demo_config)
    table = spark.read.format("delta").load(table_location(cfg.warehouse, "meta.ingested_files"))
    rows = {(r.source, r.file) for r in table.collect()}
    assert ("mariadb-10.11", "binlog.000004") in rows
    assert ("mysql-5.6", "mysql-bin.000002") in rows
    assert len(rows) == expected

    # A second run is idempotent (MERGE on source + file).
    again = run_dag(dag)
    assert again.success
    assert spark.read.format("delta").load(table_location(cfg.warehouse, "meta.ingested_files")).count() == expected


def test_dag_file_is_thin_and_switches_to_spark_submit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """spark.mode = "submit" turns the Spark task into a SparkSubmitOperator by configuration alone."""
    path = tmp_path / "c.toml"
    path.write_text(
        '[pipeline]\nwarehouse = "s3a://lake/wh"\n'
        f'jars_dir = "{os.environ.get("BINLAKE_JARS_DIR", str(Path(__file__).parent.parent / ".jars"))}"\n'
        '[[sources]]\nname = "a"\nuri = "s3://arch/a/"\n'
        '[spark]\nmode = "submit"\nconn_id = "spark_cluster"\n'
    )
    monkeypatch.setenv("BINLAKE_CONFIG", str(path))
    dag = load_dag(NIGHTLY_DAG_ID)
    op = dag.get_task("record_ingested_files")
    assert type(op).__name__ == "SparkSubmitOperator"
    assert op._conn_id == "spark_cluster"
    assert "delta-spark_" in op.jars
    assert op.conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert op.application.endswith("binlake/nightly.py")
    assert op.application_args[0] == "ingested-files"
