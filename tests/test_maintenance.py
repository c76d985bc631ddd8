"""Table maintenance and gold for consumers (issue 38): compaction leaves every table's rows
identical with fewer files, VACUUM refuses a retention shorter than a run may last, a table that
needs nothing is skipped, and what was done lands in ``meta.maintenance_runs``; a gold table's
change data feed gives each night's net changes, and a MERGE with deletion vectors gives the same
table as one without.

The warehouse: the MariaDB 10.11 fixture chain ingested one file per night (three nights: a
small data file per night and table), gold after every night. The chain's second file updates,
deletes and inserts customers; its third updates, inserts and deletes orders.
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

MARIA = REPO_ROOT / "tests" / "fixtures" / "mariadb-10.11"
SOURCE = "night-a"


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
    """Per night, the night's file (as discovery hands it to the ingest)."""
    from spark_jobs.ingest import BinlogObject

    nights: list[list[Any]] = []
    for path in sorted(MARIA.glob("binlog.0*")):
        (archive / SOURCE).mkdir(parents=True, exist_ok=True)
        dest = archive / SOURCE / path.name
        dest.write_bytes(path.read_bytes())
        nights.append([BinlogObject(source=SOURCE, uri=str(dest), size=dest.stat().st_size,
                                    etag=f"{SOURCE}/{path.name}")])
    return nights


@dataclasses.dataclass
class Warehouse:
    """The module's warehouse and, per night and gold table of ``night-a``, what the night did."""

    cfg: BinlakeConfig
    #: (night, gold table name) -> (version before, version after, rows before, rows after, write mode)
    nights: dict[tuple[int, str], tuple[int | None, int | None, list[dict[str, Any]], list[dict[str, Any]], str]]


def _rows(spark: Any, location: str) -> list[dict[str, Any]]:
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, location):
        return []
    return [r.asDict(recursive=True) for r in spark.read.format("delta").load(location).collect()]


@pytest.fixture(scope="module")
def small_files(spark: Any, tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> Warehouse:
    """Three nights of one file each, gold after each night (binlog.000004 holds no row changes);
    from night 2 a table with new changes is MERGEd incrementally (Spark)."""
    return _three_nights(spark, tmp_path_factory.mktemp("maint"), s3_server.endpoint_url, {})


@pytest.fixture(scope="module")
def small_files_in_process(spark: Any, tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> Warehouse:
    """The same nights with gold's production floors: every night replays each table in full in
    the step's process, and delta-rs MERGEs the rows into the gold table."""
    return _three_nights(spark, tmp_path_factory.mktemp("maint-in-process"), s3_server.endpoint_url,
                         {"incremental_min_changes": 50_000, "in_process_changes": 50_000})


def _three_nights(spark: Any, tmp: Path, endpoint: str, gold: dict[str, Any]) -> Warehouse:
    from binlake.reconcile.job import run_reconcile
    from spark_jobs.gold.job import gold_location, gold_table_name, run_gold
    from spark_jobs.ingest import run_ingest

    archive = tmp / "archive"
    cfg = make_test_config(tmp, endpoint, sources=[{"name": SOURCE, "uri": str(archive / SOURCE)}],
                           maintenance={"min_files": 3, "vacuum_retention_hours": 24, "max_run_hours": 1}, gold=gold)
    nights: dict[tuple[int, str], Any] = {}
    names = [gold_table_name(SOURCE, "shop", t) for t in ("customer", "orders")]
    for i, night in enumerate(_objects(archive)[:3]):
        run_ingest(spark, cfg, night, f"night-{i}")
        run_reconcile(cfg, f"reconcile-{i}")
        before = {n: (_version(cfg, gold_location(cfg, n)), _rows(spark, gold_location(cfg, n))) for n in names}
        result = run_gold(spark, cfg, SOURCE, f"gold-{i}")
        for t in result.tables:
            if t.name in before:
                nights[(i, t.name)] = (before[t.name][0], t.table_version, before[t.name][1],
                                       _rows(spark, t.location), t.write_mode)
    return Warehouse(cfg, nights)


def _version(cfg: BinlakeConfig, location: str) -> int | None:
    delta = open_delta_table(location, cfg.s3)
    return None if delta is None else int(delta.version())


def _all_tables(cfg: BinlakeConfig) -> list[str]:
    from spark_jobs.maintenance import targets

    return [t.name for t in targets(cfg)]


def _files(cfg: BinlakeConfig, name: str) -> int:
    delta = open_delta_table(table_location(cfg.warehouse, name), cfg.s3)
    assert delta is not None
    return len(add_actions(delta)["path"])


def _key(row: dict[str, Any]) -> Any:
    return row["id"]


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """A gold row without CDF's columns and the source's name (the same row in both sources)."""
    return {k: v for k, v in row.items() if k not in ("_change_type", "_commit_version", "_commit_timestamp",
                                                       "_source")}


def _net_changes(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """What changed between two snapshots of a table keyed by ``id``, as the change feed spells it."""
    old, new = {_key(r): r for r in before}, {_key(r): r for r in after}
    both = [k for k in old.keys() & new.keys() if old[k] != new[k]]
    out = {"insert": [new[k] for k in new.keys() - old.keys()], "delete": [old[k] for k in old.keys() - new.keys()],
           "update_preimage": [old[k] for k in both], "update_postimage": [new[k] for k in both]}
    return {kind: sorted((_plain(r) for r in rows), key=repr) for kind, rows in out.items()}


@pytest.mark.parametrize("warehouse", ["small_files", "small_files_in_process"])
def test_change_data_feed_gives_each_nights_net_changes(spark: Any, warehouse: str,
                                                        request: pytest.FixtureRequest) -> None:
    """Every night a gold table was MERGEd (by Spark, incrementally; by delta-rs after a replay in
    the step's process): ``readChangeFeed`` over the night's commits equals the difference of the
    table before and after it (inserts, updates' pre and post images, deletes)."""
    small_files: Warehouse = request.getfixturevalue(warehouse)
    checked, kinds = [], set()
    for (night, name), (v0, v1, before, after, mode) in sorted(small_files.nights.items()):
        if v0 is None or v1 == v0 or mode != "merge":
            continue  # created this night, unchanged, or a new schema (overwritten: every row changes)
        feed = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", v0 + 1)
                .option("endingVersion", v1).load(table_location(small_files.cfg.warehouse, f"gold.{name}")))
        got: dict[str, list[Any]] = {k: [] for k in ("insert", "delete", "update_preimage", "update_postimage")}
        for r in feed.collect():
            got[r["_change_type"]].append(_plain(r.asDict(recursive=True)))
        got = {k: sorted(v, key=repr) for k, v in got.items()}
        assert got == _net_changes(before, after), (night, name)
        kinds |= {k for k, v in got.items() if v}
        checked.append((night, name))
    assert ("night_a__shop__customer" in {n for _, n in checked}) and kinds == {
        "insert", "delete", "update_preimage", "update_postimage"}, checked


def _merge_bytes(spark: Any, location: str) -> dict[str, int]:
    last = spark.sql(f"DESCRIBE HISTORY delta.`{location}` LIMIT 1").collect()[0]
    assert last["operation"] == "MERGE"
    return {k: int(v) for k, v in last["operationMetrics"].items() if v.isdigit()}


def test_a_merge_with_deletion_vectors_gives_the_same_table(spark: Any, tmp_path: Path) -> None:
    """The incremental gold MERGE (``merge_rows``: a night's touched keys) on a 20,000-row table in one
    file, with and without deletion vectors: the same rows after, and with them only the touched
    rows are written instead of the whole file."""
    from spark_jobs.gold.incremental import GONE, merge_rows
    from spark_jobs.gold.tables import gold_defaults

    night = spark.createDataFrame([(5, "five'", False), (77, "x", True), (20_001, "new", False)],
                                  f"id BIGINT, v STRING, {GONE} BOOLEAN")
    written = {}
    for dv in (False, True):
        path = str(tmp_path / f"dv-{dv}")
        cfg = make_test_config(tmp_path, "http://127.0.0.1:1", gold={"deletion_vectors": dv})
        with gold_defaults(spark, cfg):  # as run_gold creates a gold table
            spark.range(20_000).selectExpr("id", "concat('value ', id) AS v").repartition(1).write.format(
                "delta").save(path)
        merge_rows(spark, path, night, "t.id = s.id", ["id", "v"], gone=True,
                   run_id="night", job="gold")
        written[dv] = _merge_bytes(spark, path)
    plain, with_dv = (sorted(tuple(r) for r in spark.read.format("delta").load(str(tmp_path / f"dv-{d}")).collect())
                      for d in (False, True))
    assert plain == with_dv and len(plain) == 20_000 and (5, "five'") in plain and (77, "value 77") not in plain
    assert written[True]["numTargetDeletionVectorsAdded"] == 1 and written[False]["numTargetDeletionVectorsAdded"] == 0
    assert written[True]["numTargetBytesAdded"] * 10 < written[False]["numTargetBytesAdded"], written
    print(f"\nMERGE of 3 keys into 20,000 rows: bytes written without deletion vectors "
          f"{written[False]['numTargetBytesAdded']}, with {written[True]['numTargetBytesAdded']}")


def _digests(cfg: BinlakeConfig, names: list[str]) -> dict[str, Any]:
    """Each table's rows digest, read by delta-rs (the gold tables here have no deletion vectors)."""
    from binlake_testing.table_digest import warehouse_digests

    return warehouse_digests(cfg.warehouse, names, cfg.s3)


def test_maintenance_keeps_rows_and_leaves_fewer_files(spark: Any, small_files: Warehouse,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_jobs.maintenance import run_maintenance

    cfg = small_files.cfg
    monkeypatch.setenv("BINLAKE_SOURCE_LEASE_TTL", "3600")
    names = _all_tables(cfg)
    assert {"bronze.events", "silver.row_changes", "meta.ingested_files"} <= set(names)
    assert "gold.night_a__shop__customer" in names
    customer = table_location(cfg.warehouse, "gold.night_a__shop__customer")
    # the gold table in three small files (as many nights of MERGEs leave it): Spark's side of maintenance
    spark.read.format("delta").load(customer).repartition(3).write.format("delta").mode("overwrite").save(customer)
    before = _digests(cfg, names)
    files_before = {n: _files(cfg, n) for n in names}
    assert files_before["silver.row_changes"] == 3  # a file per night

    result = run_maintenance(cfg, "maint-1", lambda: spark)

    assert _digests(cfg, names) == before
    done = {r["table_name"]: r for r in result.rows}
    assert _files(cfg, "silver.row_changes") == 1 == done["silver.row_changes"]["files_after"]
    assert done["silver.row_changes"]["files_before"] == 3
    assert done["silver.row_changes"]["actions"] == ["zorder", "checkpoint", "vacuum"]
    assert done["silver.row_changes"]["files_vacuumed"] == 0  # the compacted files are younger than 24 h
    assert done["silver.row_changes"]["cluster_by"] == ["file_seq", "pos"]
    for name in names:
        assert _files(cfg, name) <= files_before[name], name
    gold = done["gold.night_a__shop__customer"]  # the change data feed's protocol: left to Spark
    assert (gold["engine"], gold["cluster_by"], gold["files_before"], gold["files_after"]) == ("spark", ["id"], 3, 1)
    assert "meta.gtid_coverage" in result.skipped  # one file per source: nothing to do
    runs = open_delta_table(table_location(cfg.warehouse, "meta.maintenance_runs"), cfg.s3)
    assert runs is not None
    recorded = {r["table_name"]: r for r in runs.to_pyarrow_table().to_pylist()}
    assert recorded.keys() == done.keys()
    assert recorded["silver.row_changes"]["files_before"] == 3 and recorded["silver.row_changes"]["run_id"] == "maint-1"

    again = run_maintenance(cfg, "maint-2", lambda: spark)  # compacted now: no compaction left to do
    assert all("zorder" not in r["actions"] for r in again.rows)
    assert _digests(cfg, names) == before


def test_a_gold_table_whose_source_a_run_holds_is_left_alone(small_files: Warehouse,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A per-source gold table's writer holds the source's run lease, not the commit lock: while a
    run holds it, maintenance leaves the table for its next run (and releases nothing of the run's)."""
    from binlake.lake import leases
    from spark_jobs.maintenance import run_maintenance

    monkeypatch.setenv("BINLAKE_SOURCE_LEASE_TTL", "3600")
    cfg = small_files.cfg
    held = leases.SourceLeases(leases.lease_backend(cfg.warehouse, cfg.s3))
    held.acquire(SOURCE, "nightly-run")
    try:
        result = run_maintenance(cfg, "maint-busy", lambda: pytest.fail("no Spark wanted"),
                                 only=frozenset({"gold.night_a__shop__customer"}))
        assert result.busy == ["gold.night_a__shop__customer"] and result.rows == []
        current = held.current(SOURCE)
        assert current is not None and current.holder == "nightly-run"
    finally:
        held.release(SOURCE, "nightly-run")


def test_maintenance_refuses_an_unsafe_retention_before_touching_anything(small_files: Warehouse,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_jobs.maintenance import run_maintenance

    monkeypatch.setenv("BINLAKE_SOURCE_LEASE_TTL", str(6 * 3600))  # 6 h > the 1 h max run and the 1 h retention
    cfg = dataclasses.replace(small_files.cfg, maintenance=dataclasses.replace(
        small_files.cfg.maintenance, vacuum_retention_hours=1))
    version = open_delta_table(table_location(cfg.warehouse, "silver.row_changes"), cfg.s3)
    assert version is not None
    with pytest.raises(UnsafeRetentionError, match="1 hours is shorter than the longest a run may last, 6 hours"):
        run_maintenance(cfg, "maint-unsafe", lambda: pytest.fail("no Spark wanted"))
    after = open_delta_table(table_location(cfg.warehouse, "silver.row_changes"), cfg.s3)
    assert after is not None and after.version() == version.version()


def test_every_registry_table_is_a_target_name() -> None:
    assert "meta.maintenance_runs" in {t.full_name for t in TABLES}
