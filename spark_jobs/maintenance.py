"""Table maintenance, the acting side: compaction with clustering, VACUUM, checkpoints and log
cleanup for every table of the warehouse, recorded in ``meta.maintenance_runs``.

What each table needs comes from :mod:`binlake.lake.maintenance` (its Delta log, read by delta-rs);
a table that needs nothing costs that one read. Where the line between the engines is: a table whose
protocol delta-rs writes (:func:`binlake.lake.delta_tables.delta_rs_writes`: every bronze, silver and
meta table) is maintained by delta-rs, in this process, without a JVM (``optimize.z_order``,
``vacuum``, ``create_checkpoint``, ``cleanup_metadata``); a table with features delta-rs does not
write (gold tables with deletion vectors or the change data feed) by Spark SQL (``OPTIMIZE``,
``VACUUM``; Spark checkpoints every ``delta.checkpointInterval`` commits on its own), the Spark
session started only when the first such table needs work.

Clustering is Z-order within a partition on the columns readers filter by (``file_seq, pos``; the
key; a gold table's primary key), not Delta's liquid clustering: binlake's tables are partitioned
by ``source`` (``bronze.events`` by day too, union tables by ``_source``) and liquid clustering
cannot be combined with partitioning; a per-source gold table could take it, but its full replay
overwrites it with ``overwriteSchema`` on a schema change, and the ``clustering`` writer feature
would take the tables off delta-rs (docs/maintenance.md).

Every change is one :func:`binlake.lake.leases.committed_write` (the table's commit lock on S3, the
fence right before the commit, a commit conflict retried): maintenance never writes a table while a
job commits to it. A per-source gold table's writer (the source's gold task) takes no commit lock:
it holds the source's run lease, so maintenance holds that lease while it works on the table, and
leaves the table for the next run when a pipeline run is processing the source. Compaction changes
no row (a ``dataChange = false`` rewrite), so readers and the jobs' conflict checks see the same table.
"""

from __future__ import annotations

import datetime as _dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from binlake.config import BinlakeConfig
from binlake.lake import leases
from binlake.lake.delta_tables import delta_rs_writes, delta_uri, locked_storage_options, open_delta_table
from binlake.lake.maintenance import (
    TableFacts,
    TablePlan,
    check_retention,
    cluster_columns,
    plan_table,
    table_facts,
)
from binlake.lake.sql_text import sql_identifier, sql_string
from binlake.lake.tables import TABLES, TableSpec, gold_table, table, table_location

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from deltalake import DeltaTable
    from pyspark.sql import SparkSession

log = logging.getLogger("binlake.maintenance")

RUNS_TABLE = "meta.maintenance_runs"
#: the ``source`` value of every ``meta.maintenance_runs`` row (maintenance works on whole tables)
ALL_SOURCES = "*"
#: ``files_vacuumed`` of a Spark VACUUM: its result names the table, not what it deleted
NOT_COUNTED = -1


@dataclass(frozen=True)
class Target:
    """One table to maintain: its name, location and the primary key of a gold table."""

    name: str
    location: str
    primary_key: tuple[str, ...] = ()
    #: a per-source gold table's source: its writer takes no commit lock but holds the source's run
    #: lease, so maintenance takes that lease for the table (a union table: None, it takes the lock)
    source: str | None = None


@dataclass
class MaintenanceResult:
    """What a maintenance run did: one ``meta.maintenance_runs`` row per table it changed."""

    run_id: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    #: per-source gold tables whose source a pipeline run was processing (its run lease): left alone
    busy: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _retryable(exc: BaseException) -> bool:
    from deltalake.exceptions import CommitFailedError

    from spark_jobs.lake import is_retryable_conflict

    return isinstance(exc, CommitFailedError) or is_retryable_conflict(exc)


def _committed(location: str, cfg: BinlakeConfig, what: str, change: Callable[[], Any]) -> Any:
    """``change()`` as one committed write to the table at ``location`` (lock, fence, retries)."""
    def write(fence: leases.CommitFence) -> Any:
        fence.check()
        return change()

    return leases.committed_write(location, cfg.s3, write, what=what, retryable=_retryable)


def gold_targets(cfg: BinlakeConfig) -> list[Target]:
    """The gold tables ``meta.gold_status`` lists, each with its primary key (the latest version in
    ``silver.schema_history``); a union table is keyed (``_source``, key) and partitioned by
    ``_source``, so its key alone is clustered."""
    status = open_delta_table(table_location(cfg.warehouse, "meta.gold_status"), cfg.s3)
    if status is None:
        return []
    history = open_delta_table(table_location(cfg.warehouse, "silver.schema_history"), cfg.s3)
    keys: dict[tuple[str, str, str], tuple[int, tuple[str, ...]]] = {}
    if history is not None:
        for r in history.to_pyarrow_table(columns=["source", "db", "table_name", "version", "primary_key"]).to_pylist():
            at = (r["source"], r["db"].casefold(), r["table_name"].casefold())
            if at not in keys or keys[at][0] < r["version"]:
                keys[at] = (r["version"], tuple(r["primary_key"] or ()))
    out: dict[str, Target] = {}
    rows = status.to_pyarrow_table(columns=["source", "gold_table", "db", "table_name", "location", "write_mode"])
    for r in rows.to_pylist():
        if r["write_mode"] == "dropped" or r["gold_table"] in out:
            continue
        pk = keys.get((r["source"], r["db"].casefold(), r["table_name"].casefold()), (0, ()))[1]
        per_source = "__" in r["gold_table"]
        out[r["gold_table"]] = Target(f"gold.{r['gold_table']}", r["location"], pk,
                                      r["source"] if per_source else None)
    return [out[k] for k in sorted(out)]


def targets(cfg: BinlakeConfig) -> list[Target]:
    """Every registry table that exists (``meta.maintenance_runs`` aside), then the gold tables."""
    found = [Target(t.full_name, table_location(cfg.warehouse, t.full_name)) for t in TABLES
             if t.full_name != RUNS_TABLE]
    return [t for t in found if open_delta_table(t.location, cfg.s3) is not None] + gold_targets(cfg)


def _spec(name: str) -> TableSpec:
    return table(name) if not name.startswith("gold.") else gold_table(name.split(".", 1)[1])


def _partition_filter(facts: TableFacts, values: tuple[str | None, ...]) -> list[tuple[str, str, Any]]:
    return [(c, "=", v) for c, v in zip(facts.partition_columns, values, strict=True)]


def _delta_rs_work(cfg: BinlakeConfig, facts: TableFacts, plan: TablePlan, retention: int) -> int:
    """``plan`` carried out with delta-rs; the count of files VACUUM deleted."""
    from deltalake import DeltaTable

    options = locked_storage_options(facts.location, cfg.s3)
    target_bytes = cfg.maintenance.target_file_mb << 20

    def open_table() -> DeltaTable:
        return DeltaTable(delta_uri(facts.location), storage_options=options)

    def optimize(where: list[tuple[str, str, Any]] | None) -> Callable[[], Any]:
        def run() -> Any:
            if plan.cluster_by:
                return open_table().optimize.z_order(plan.cluster_by, partition_filters=where, target_size=target_bytes)
            return open_table().optimize.compact(partition_filters=where, target_size=target_bytes)
        return run

    for values in plan.compact_partitions:
        _committed(facts.location, cfg, f"optimize {facts.name} {values}", optimize(_partition_filter(facts, values) or None))
    vacuumed = 0
    if plan.vacuum:
        vacuumed = len(_committed(facts.location, cfg, f"VACUUM {facts.name}", lambda: open_table().vacuum(
            retention_hours=retention, dry_run=False, enforce_retention_duration=False)))
    if plan.checkpoint:
        _committed(facts.location, cfg, f"checkpoint {facts.name}", lambda: open_table().create_checkpoint())
        open_table().cleanup_metadata()  # log entries older than delta.logRetentionDuration (30 days)
    return vacuumed


def _spark_work(spark: SparkSession, cfg: BinlakeConfig, facts: TableFacts, plan: TablePlan, retention: int) -> int:
    """``plan`` carried out with Spark SQL; the count of files VACUUM deleted."""
    from spark_jobs.lake import committed_write as spark_committed
    from spark_jobs.lake import delta_path_sql

    path = delta_path_sql(facts.location)
    cols = ", ".join(sql_identifier(c) for c in plan.cluster_by)

    def run(sql: str) -> Callable[[leases.CommitFence], Any]:
        def write(fence: leases.CommitFence) -> Any:
            fence.check()
            return spark.sql(sql).collect()
        return write

    for values in plan.compact_partitions:
        where = " AND ".join(f"{sql_identifier(c)} = {sql_string(str(v))}" for c, v
                             in zip(facts.partition_columns, values, strict=True))
        sql = f"OPTIMIZE {path}" + (f" WHERE {where}" if where else "") + (f" ZORDER BY ({cols})" if cols else "")
        spark_committed(facts.location, cfg.s3, run(sql), f"OPTIMIZE {facts.name}")
    if not plan.vacuum:
        return 0
    key = "spark.databricks.delta.retentionDurationCheck.enabled"
    spark.conf.set(key, "false")  # the retention was checked against the config (check_retention)
    try:
        # Delta 4 applies the table's delta.deletedFileRetentionDuration (7 days unless set) and
        # ignores a longer or shorter RETAIN: never shorter than checked, as the default is 168 h
        spark_committed(facts.location, cfg.s3, run(f"VACUUM {path} RETAIN {retention} HOURS"), f"VACUUM {facts.name}")
    finally:
        spark.conf.unset(key)
    return NOT_COUNTED


def maintain_table(cfg: BinlakeConfig, target: Target, run_id: str, spark: Callable[[], SparkSession]
                   ) -> dict[str, Any] | None:
    """Maintain one table (see module doc): its ``meta.maintenance_runs`` row, or None when it
    needed nothing."""
    started, t0 = _dt.datetime.now(_dt.UTC), time.monotonic()
    settings, retention = cfg.maintenance, cfg.maintenance.vacuum_retention_hours
    current = open_delta_table(target.location, cfg.s3)
    if current is None:
        return None
    before = table_facts(target.name, target.location, current, cfg.s3, settings.target_file_mb << 20)
    by_delta_rs = delta_rs_writes(current)
    removed = (bool(current.vacuum(retention_hours=retention, dry_run=True, enforce_retention_duration=False))
               if by_delta_rs else False)
    plan = plan_table(before, settings, cluster_columns(_spec(target.name), target.primary_key), removed)
    if plan.needs_nothing:
        log.info("%s: needs nothing (%d data files, %d log entries)", target.name, before.files, before.log_entries)
        return None
    log.info("%s: %s (%d data files, %d bytes, %d log entries; by %s)", target.name, ", ".join(plan.actions),
             before.files, before.bytes, before.log_entries, "delta-rs" if by_delta_rs else "Spark")
    vacuumed = (_delta_rs_work(cfg, before, plan, retention) if by_delta_rs
                else _spark_work(spark(), cfg, before, plan, retention))
    after_table = open_delta_table(target.location, cfg.s3)
    assert after_table is not None
    after = table_facts(target.name, target.location, after_table, cfg.s3, settings.target_file_mb << 20)
    row: dict[str, Any] = {"source": ALL_SOURCES, "run_id": run_id, "table_name": target.name,
           "engine": "delta-rs" if by_delta_rs else "spark", "actions": list(plan.actions),
           "cluster_by": list(plan.cluster_by), "files_before": before.files, "files_after": after.files,
           "bytes_before": before.bytes, "bytes_after": after.bytes, "log_entries_before": before.log_entries,
           "log_entries_after": after.log_entries, "files_vacuumed": vacuumed, "retention_hours": retention,
           "millis": int((time.monotonic() - t0) * 1000), "started_at": started}
    log.info("%s: %d -> %d data files, %d -> %d bytes, %d -> %d log entries, %d files vacuumed, %.1f s",
             target.name, before.files, after.files, before.bytes, after.bytes, before.log_entries,
             after.log_entries, vacuumed, row["millis"] / 1000)
    return row


def _runs_arrow(rows: list[dict[str, Any]]) -> pa.Table:
    import pyarrow as pa

    from binlake.lake.tables import arrow_type

    spec = table(RUNS_TABLE)
    schema = pa.schema([pa.field(c.name, arrow_type(c.type), c.nullable) for c in spec.columns])
    return pa.Table.from_pylist(rows, schema=schema)


def record_runs(cfg: BinlakeConfig, run_id: str, rows: list[dict[str, Any]]) -> None:
    """The run's rows into ``meta.maintenance_runs`` (created on first use; a re-run of the same
    run id replaces its rows), by delta-rs."""
    from binlake.lake.delta_tables import replace_rows
    from binlake.lake.ensure import ensure_registry_table

    spec = table(RUNS_TABLE)
    location = table_location(cfg.warehouse, RUNS_TABLE)
    data = _runs_arrow(rows)
    ensure_registry_table(cfg, RUNS_TABLE)
    replace_rows(location, cfg.s3, data, f"run_id = {sql_string(run_id, '')}", partition_by=spec.partition_by,
                 txn_app=f"binlake-maintenance:{run_id}")


def run_maintenance(cfg: BinlakeConfig, run_id: str, spark: Callable[[], SparkSession],
                    only: frozenset[str] | None = None) -> MaintenanceResult:
    """Maintain every table of the warehouse (``only``: these names), then record what was done.

    ``spark`` starts (or returns) a Spark session; called only for a table delta-rs does not write.
    Raises :class:`binlake.lake.maintenance.UnsafeRetentionError` before touching anything when the
    configured VACUUM retention is shorter than a run may last."""
    t0 = time.monotonic()
    check_retention(cfg, cfg.maintenance.vacuum_retention_hours, leases.default_ttl())
    result = MaintenanceResult(run_id)
    sources = leases.SourceLeases(leases.lease_backend(cfg.warehouse, cfg.s3))
    for target in targets(cfg):
        if only is not None and target.name not in only:
            continue
        try:
            held = sources.acquire(target.source, run_id, dag_id="binlake_maintenance") if target.source else None
        except leases.LeaseHeldError as exc:
            log.warning("%s: left for the next maintenance run: %s", target.name, exc)
            result.busy.append(target.name)
            continue
        try:
            row = maintain_table(cfg, target, run_id, spark)
        finally:
            if held is not None and target.source is not None:
                sources.release(target.source, run_id)
        if row is None:
            result.skipped.append(target.name)
        else:
            result.rows.append(row)
    if result.rows:
        record_runs(cfg, run_id, result.rows)
    result.seconds = time.monotonic() - t0
    log.info("maintenance %s: %d table(s) maintained, %d needed nothing, %.1f s", run_id, len(result.rows),
             len(result.skipped), result.seconds)
    return result
