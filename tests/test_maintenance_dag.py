"""``binlake_maintenance`` runs for real through Airflow (``dag.test()``, SQLite metadata DB) over a
small warehouse written by delta-rs: ``meta.ingested_files`` with one small data file per night.
The DAG has one task and no mapped tasks, so ``dag.test()`` runs it as the scheduler would.
No JVM: every table here is one delta-rs writes, so the task never starts Spark.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from binlake.lake.delta_tables import add_actions, open_delta_table
from binlake_testing.table_digest import delta_table_digest

pytestmark = [pytest.mark.airflow]

NIGHTS = 6


def _write_config(path: Path, warehouse: Path, state: Path, retention: int) -> Path:
    path.write_text("\n".join([
        "[pipeline]", f'warehouse = "{warehouse}"', f'state_dir = "{state}"', "",
        "[[sources]]", 'name = "a"', f'uri = "{state}/archive/a"', "",
        "[maintenance]", 'cron = "0 4 * * 6"', "min_files = 4", f"vacuum_retention_hours = {retention}",
        "max_run_hours = 2", ""]))
    return path


def _night_rows(night: int) -> list[dict[str, Any]]:
    return [{"source": "a", "file": f"binlog.{night:06d}", "file_seq": night, "uri": f"/x/binlog.{night:06d}",
             "size": 100 + night, "etag": f"e{night}", "run_id": f"night-{night}", "status": "ok", "events": 3,
             "transactions": 1, "row_changes": 1, "statements": 0, "quarantined": 0}]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from deltalake import DeltaTable, write_deltalake

    from binlake.lake.tables import table_location
    from spark_jobs.lake import rows_table
    from spark_jobs.schemas import spec

    tmp = tmp_path_factory.mktemp("maintdag")
    location = table_location(str(tmp / "warehouse"), "meta.ingested_files")
    ts = spec("meta.ingested_files")
    DeltaTable.create(location, schema=rows_table("meta.ingested_files", []).schema, partition_by=["source"],
                      configuration=ts.table.properties)
    for night in range(1, NIGHTS + 1):
        write_deltalake(location, rows_table("meta.ingested_files", _night_rows(night)), mode="append")
    return tmp


def test_the_maintenance_dag_compacts_and_records(warehouse: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from binlake.config import load_config
    from binlake.lake.tables import table_location
    from binlake_testing.demo import run_dag
    from orchestration.run_local import load_dag, migrate_airflow_db

    migrate_airflow_db()
    monkeypatch.setenv("BINLAKE_SOURCE_LEASE_TTL", "3600")
    config = _write_config(warehouse / "binlake.toml", warehouse / "warehouse", warehouse / "state", retention=2)
    monkeypatch.setenv("BINLAKE_CONFIG", str(config))
    cfg = load_config(config)
    location = table_location(cfg.warehouse, "meta.ingested_files")
    before = delta_table_digest("meta.ingested_files", location)

    dag = load_dag("binlake_maintenance")
    assert dag.max_active_runs == 1 and not dag.catchup and [t.task_id for t in dag.tasks] == ["maintain"]
    assert dag.timetable.expression == "0 4 * * 6"  # [maintenance] cron
    run = run_dag(dag)

    assert run.state == "success", run
    done = run.xcoms["maintain"]
    assert [r["table_name"] for r in done["maintained"]] == ["meta.ingested_files"]
    row = done["maintained"][0]
    assert (row["files_before"], row["files_after"], row["engine"]) == (NIGHTS, 1, "delta-rs")
    assert row["actions"] == ["zorder", "checkpoint", "vacuum"] and row["cluster_by"] == ["file_seq"]
    table = open_delta_table(location)
    assert table is not None and len(add_actions(table)["path"]) == 1
    assert delta_table_digest("meta.ingested_files", location) == before
    runs = open_delta_table(table_location(cfg.warehouse, "meta.maintenance_runs"))
    assert runs is not None
    recorded = runs.to_pyarrow_table().to_pylist()
    assert [(r["run_id"], r["table_name"], r["files_before"], r["files_after"]) for r in recorded] == [
        (run.run_id, "meta.ingested_files", NIGHTS, 1)]
    assert recorded[0]["started_at"] <= dt.datetime.now(dt.UTC)


def test_an_unsafe_retention_fails_the_run_and_names_both_numbers(warehouse: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    from binlake_testing.demo import run_dag
    from orchestration.run_local import load_dag, migrate_airflow_db

    migrate_airflow_db()
    monkeypatch.setenv("BINLAKE_SOURCE_LEASE_TTL", "3600")
    config = _write_config(warehouse / "unsafe.toml", warehouse / "warehouse", warehouse / "state", retention=1)
    monkeypatch.setenv("BINLAKE_CONFIG", str(config))
    run = run_dag(load_dag("binlake_maintenance"))
    assert run.state == "failed" and run.task_states == {"maintain": "failed"}
    alerts = [r.getMessage() for r in caplog.records if "BINLAKE ALERT" in r.getMessage()]
    assert len(alerts) == 1
    assert "VACUUM retention of 1 hours is shorter than the longest a run may last, 2 hours" in alerts[0]
