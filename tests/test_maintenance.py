"""Table maintenance (issue 38): compaction leaves every table's rows identical with fewer files,
VACUUM refuses a retention shorter than a run may last, a table that needs nothing is skipped, and
what was done lands in ``meta.maintenance_runs``.

The warehouse: the MariaDB 10.11 fixture chain ingested one file per night for two sources (four
nights each: a small data file per night, table and source), then gold once per source.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO_ROOT, make_test_config

from binlake.config import BinlakeConfig, MaintenanceSettings
from binlake.lake.delta_tables import add_actions, open_delta_table
from binlake.lake.maintenance import (
    TableFacts,
    UnsafeRetentionError,
    check_retention,
    cluster_columns,
    plan_table,
)
from binlake.lake.tables import TABLES, table, table_location
from binlake_testing.table_digest import warehouse_digests

MARIA = REPO_ROOT / "tests" / "fixtures" / "mariadb-10.11"
SOURCES = ("night-a", "night-b")


def _facts(small: int, since: int = 1, parts: tuple[str, ...] = ("source",)) -> TableFacts:
    return TableFacts("silver.row_changes", "/wh/silver/row_changes", 5, small, small * 100,
                      ((("a",), small),), since + 1, since, parts)


def test_plan_compacts_only_partitions_of_many_small_files() -> None:
    settings = MaintenanceSettings(min_files=4, checkpoint_every=10)
    few = plan_table(_facts(3), settings, ("file_seq", "pos"), removed_files=False)
    assert few.needs_nothing and few.actions == ()
    many = plan_table(_facts(4), settings, ("file_seq", "pos"), removed_files=False)
    assert many.compact_partitions == (("a",),) and many.actions == ("zorder", "checkpoint", "vacuum")
    old_log = plan_table(_facts(1, since=10), settings, (), removed_files=False)
    assert old_log.actions == ("checkpoint",)
    assert plan_table(_facts(1), settings, (), removed_files=True).actions == ("vacuum",)


def test_cluster_columns_are_what_readers_filter_by() -> None:
    assert cluster_columns(table("bronze.events")) == ("file_seq", "pos")
    assert cluster_columns(table("meta.gtid_coverage")) == ("sid", "tag")
    assert cluster_columns(table("meta.gold_status"), ("id",)) == ("id",)


def test_vacuum_retention_shorter_than_a_run_is_refused(tmp_path: Path) -> None:
    cfg = make_test_config(tmp_path, "http://127.0.0.1:1", maintenance={"max_run_hours": 30})
    with pytest.raises(UnsafeRetentionError) as err:
        check_retention(cfg, 24, lease_ttl_seconds=6 * 3600)
    assert str(err.value).startswith("VACUUM retention of 24 hours is shorter than the longest a run may last, "
                                     "30 hours ([maintenance] max_run_hours)")
    with pytest.raises(UnsafeRetentionError, match=r"of 24 hours .* 48 hours \(the run lease's life"):
        check_retention(cfg, 24, lease_ttl_seconds=48 * 3600)
    check_retention(cfg, 30, lease_ttl_seconds=6 * 3600)


def _objects(archive: Path) -> list[list[Any]]:
    """Per night, the night's file of each source (as discovery hands it to the ingest)."""
    from spark_jobs.ingest import BinlogObject

    nights: list[list[Any]] = []
    for path in sorted(MARIA.glob("binlog.0*")):
        night = []
        for source in SOURCES:
            (archive / source).mkdir(parents=True, exist_ok=True)
            dest = archive / source / path.name
            dest.write_bytes(path.read_bytes())
            night.append(BinlogObject(source=source, uri=str(dest), size=dest.stat().st_size,
                                      etag=f"{source}/{path.name}"))
        nights.append(night)
    return nights


@pytest.fixture(scope="module")
def small_files(spark: Any, tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> BinlakeConfig:
    from binlake.reconcile.job import run_reconcile
    from spark_jobs.gold.job import run_gold
    from spark_jobs.ingest import run_ingest

    tmp = tmp_path_factory.mktemp("maint")
    archive = tmp / "archive"
    nights = _objects(archive)
    cfg = make_test_config(tmp, s3_server.endpoint_url,
                           sources=[{"name": s, "uri": str(archive / s)} for s in SOURCES],
                           maintenance={"min_files": 3, "vacuum_retention_hours": 24, "max_run_hours": 1})
    for i, night in enumerate(nights):
        run_ingest(spark, cfg, night, f"night-{i}")
    run_reconcile(cfg, "reconcile")
    for source in SOURCES:
        run_gold(spark, cfg, source, f"gold-{source}")
    return cfg


def _all_tables(cfg: BinlakeConfig) -> list[str]:
    from spark_jobs.maintenance import targets

    return [t.name for t in targets(cfg)]


def _files(cfg: BinlakeConfig, name: str) -> int:
    delta = open_delta_table(table_location(cfg.warehouse, name), cfg.s3)
    assert delta is not None
    return len(add_actions(delta)["path"])


def test_maintenance_keeps_rows_and_leaves_fewer_files(spark: Any, small_files: BinlakeConfig,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_jobs.maintenance import run_maintenance

    cfg = small_files
    monkeypatch.setenv("BINLAKE_SOURCE_LEASE_TTL", "3600")
    names = _all_tables(cfg)
    assert {"bronze.events", "silver.row_changes", "meta.ingested_files"} <= set(names)
    assert any(n.startswith("gold.night_a__") for n in names)
    before = warehouse_digests(cfg.warehouse, names, cfg.s3)
    files_before = {n: _files(cfg, n) for n in names}
    assert files_before["silver.row_changes"] == 2 * 3  # a file per night and source (binlog.000004 has no rows)

    result = run_maintenance(cfg, "maint-1", lambda: spark)

    assert warehouse_digests(cfg.warehouse, names, cfg.s3) == before
    done = {r["table_name"]: r for r in result.rows}
    assert _files(cfg, "silver.row_changes") == 2 == done["silver.row_changes"]["files_after"]
    assert done["silver.row_changes"]["files_before"] == 6
    assert done["silver.row_changes"]["actions"] == ["zorder", "checkpoint", "vacuum"]
    assert done["silver.row_changes"]["files_vacuumed"] == 0  # the compacted files are younger than 24 h
    assert done["silver.row_changes"]["cluster_by"] == ["file_seq", "pos"]
    for name in names:
        assert _files(cfg, name) <= files_before[name], name
    # gold tables were written once: nothing to do; nor for the tables of one file per source
    assert not any(n.startswith("gold.") for n in done) and "meta.gtid_coverage" in result.skipped
    runs = open_delta_table(table_location(cfg.warehouse, "meta.maintenance_runs"), cfg.s3)
    assert runs is not None
    recorded = {r["table_name"]: r for r in runs.to_pyarrow_table().to_pylist()}
    assert recorded.keys() == done.keys()
    assert recorded["silver.row_changes"]["files_before"] == 6 and recorded["silver.row_changes"]["run_id"] == "maint-1"

    again = run_maintenance(cfg, "maint-2", lambda: spark)  # compacted now: no compaction left to do
    assert all("zorder" not in r["actions"] for r in again.rows)
    assert warehouse_digests(cfg.warehouse, names, cfg.s3) == before


def test_maintenance_refuses_an_unsafe_retention_before_touching_anything(small_files: BinlakeConfig,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_jobs.maintenance import run_maintenance

    monkeypatch.setenv("BINLAKE_SOURCE_LEASE_TTL", str(6 * 3600))  # 6 h > the 1 h max run and the 1 h retention
    cfg = dataclasses.replace(small_files, maintenance=dataclasses.replace(
        small_files.maintenance, vacuum_retention_hours=1))
    version = open_delta_table(table_location(cfg.warehouse, "silver.row_changes"), cfg.s3)
    assert version is not None
    with pytest.raises(UnsafeRetentionError, match="1 hours is shorter than the longest a run may last, 6 hours"):
        run_maintenance(cfg, "maint-unsafe", lambda: pytest.fail("no Spark wanted"))
    after = open_delta_table(table_location(cfg.warehouse, "silver.row_changes"), cfg.s3)
    assert after is not None and after.version() == version.version()


def test_every_registry_table_is_a_target_name() -> None:
    assert "meta.maintenance_runs" in {t.full_name for t in TABLES}
