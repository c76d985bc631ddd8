"""The reconcile job's output tables without a JVM: created as Spark's ``ensure_table`` creates them,
and an older binlake's layout brought up to date by delta-rs (partitioned by ``source``, the
commit-time columns added, rows kept)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from binlake.lake.ensure import delta_schema_json, ensure_registry_table
from binlake.lake.tables import table
from binlake.reconcile.job import run_reconcile
from tests.conftest import make_test_config

NAME = "meta.gtid_coverage"
OLD_ROW = {"source": "alpha", "flavor": "mariadb", "sid": "0", "tag": "", "gno_start": 1, "gno_end": 9,
           "transactions": 9, "first_file": "binlog.000001", "last_file": "binlog.000004", "files": 4,
           "gtid_set": "0:1-9"}


def test_schema_is_the_one_spark_writes() -> None:
    """The registry's columns as Spark's StructType.json() spells them (comments included)."""
    from spark_jobs.schemas import spec

    for name in (NAME, "meta.gtid_reconciliation"):
        assert json.loads(delta_schema_json(table(name))) == json.loads(spec(name).schema.json())


def test_created_then_left_alone(tmp_path: Path) -> None:
    cfg = make_test_config(tmp_path, "http://127.0.0.1:9")
    created = ensure_registry_table(cfg, NAME)
    assert created.metadata().partition_columns == ["source"]
    assert created.metadata().configuration == table(NAME).properties
    assert ensure_registry_table(cfg, NAME).version() == created.version() == 0
    assert run_reconcile(cfg, "nothing").files == 0  # no meta.binlog_files yet: nothing written
    assert DeltaTable(table(NAME).location(cfg.warehouse)).version() == 0


def test_an_older_layout_is_brought_up_to_date_rows_kept(tmp_path: Path) -> None:
    """Unpartitioned and without the commit-time columns, as binlake once wrote it."""
    cfg = make_test_config(tmp_path, "http://127.0.0.1:9")
    location = table(NAME).location(cfg.warehouse)
    old = pa.Table.from_pylist([OLD_ROW], schema=pa.schema(
        [(k, pa.int64() if isinstance(v, int) else pa.string()) for k, v in OLD_ROW.items()]))
    write_deltalake(location, old)
    current = ensure_registry_table(cfg, NAME)
    assert current.metadata().partition_columns == ["source"]
    assert [f.name for f in current.schema().fields][-2:] == ["first_commit_time", "last_commit_time"]
    assert current.to_pyarrow_table().to_pylist() == [dict(OLD_ROW, first_commit_time=None, last_commit_time=None)]
    version = current.version()
    assert ensure_registry_table(cfg, NAME).version() == version  # up to date: no commit


def test_maintenance_runs_table_is_created_by_the_same_ensure(tmp_path: Path) -> None:
    """meta.maintenance_runs, created by maintenance's first record, is the registry's table as
    Spark writes it (column comments included) and takes no commit when it is up to date."""
    import datetime as dt

    from spark_jobs.maintenance import record_runs

    cfg = make_test_config(tmp_path, "http://127.0.0.1:9")
    row = {"source": "*", "run_id": "m1", "table_name": "bronze.events", "engine": "delta-rs",
           "actions": ["zorder"], "cluster_by": ["file_seq", "pos"], "files_before": 3, "files_after": 1,
           "bytes_before": 30, "bytes_after": 12, "log_entries_before": 4, "log_entries_after": 5,
           "files_vacuumed": 0, "retention_hours": 168, "millis": 7,
           "started_at": dt.datetime(2026, 1, 2, tzinfo=dt.UTC)}
    record_runs(cfg, "m1", [row])
    runs = DeltaTable(table("meta.maintenance_runs").location(cfg.warehouse))
    assert json.loads(runs.schema().to_json()) == json.loads(delta_schema_json(table("meta.maintenance_runs")))
    assert runs.metadata().configuration == table("meta.maintenance_runs").properties
    assert runs.to_pyarrow_table().to_pylist() == [row]
    record_runs(cfg, "m1", [row])  # the same run again: its rows replaced, the table not re-created
    assert DeltaTable(runs.table_uri).to_pyarrow_table().to_pylist() == [row]
    assert [h["operation"] for h in DeltaTable(runs.table_uri).history()].count("CREATE TABLE") == 1
