"""Table maintenance, the pure side: what a table holds (files, bytes, log entries), what it needs
(compaction, clustering columns, VACUUM, a checkpoint), and whether a VACUUM retention is safe.

Why: every night appends a few data files per table and source and gold MERGEs rewrite whole
files; nothing else ever compacts, vacuums or checkpoints, so after a year a table holds hundreds
of small files and its readers slow down with them (issue 38). The Spark / delta-rs side that acts
on a plan is ``spark_jobs/maintenance.py``; the DAG ``dags/binlake_maintenance.py``.

What a table needs is decided from its Delta log alone (delta-rs, no JVM) so that a table that needs
nothing costs one log read: compaction when one of its partitions holds ``min_files`` data files
smaller than the target size (a partition of few files is left as it is: compaction cannot merge
files across partitions), a checkpoint when ``checkpoint_every`` commits were written since the
last one, and VACUUM whenever something was compacted or the log has removed files
(``meta.maintenance_runs`` records what it did).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from binlake.config import BinlakeConfig, MaintenanceSettings, S3Settings, is_s3_uri
from binlake.errors import BinlakeError
from binlake.lake.tables import TableSpec

if TYPE_CHECKING:  # pragma: no cover
    from deltalake import DeltaTable


class MaintenanceError(BinlakeError):
    """Root of the maintenance stage's errors."""


class UnsafeRetentionError(MaintenanceError, ValueError):
    """A VACUUM retention shorter than a run may last: a running job could lose files it reads."""


def longest_run_hours(cfg: BinlakeConfig, lease_ttl_seconds: float) -> float:
    """The longest a pipeline run may read one version of a table: ``[maintenance] max_run_hours``
    or the run lease's life (a run that died keeps its lease that long), whichever is longer."""
    return max(cfg.maintenance.max_run_hours, lease_ttl_seconds / 3600.0)


def check_retention(cfg: BinlakeConfig, retention_hours: float, lease_ttl_seconds: float) -> None:
    """Refuse a VACUUM retention shorter than :func:`longest_run_hours`, naming both numbers.

    Why: VACUUM deletes the files that versions older than the retention still reference; a run
    started before the last compaction reads such a version (its snapshot) until it ends, and a
    file deleted under it fails the run, or worse, a writer's conflict check."""
    longest = longest_run_hours(cfg, lease_ttl_seconds)
    if retention_hours < longest:
        source = ("[maintenance] max_run_hours" if longest == cfg.maintenance.max_run_hours
                  else "the run lease's life (BINLAKE_SOURCE_LEASE_TTL)")
        raise UnsafeRetentionError(
            f"VACUUM retention of {retention_hours:g} hours is shorter than the longest a run may last, "
            f"{longest:g} hours ({source}): a running job could lose the files it reads. Set "
            f"[maintenance] vacuum_retention_hours to at least {longest:g}")


@dataclass(frozen=True)
class TableFacts:
    """What a table holds, from its Delta log: data files, bytes, files per partition, log entries."""

    name: str
    location: str
    version: int
    files: int
    bytes: int
    #: data files smaller than the target size, per partition (its values, in partition column order)
    small_files: tuple[tuple[tuple[str | None, ...], int], ...]
    log_entries: int
    commits_since_checkpoint: int
    partition_columns: tuple[str, ...]


@dataclass(frozen=True)
class TablePlan:
    """What maintenance does to one table; ``needs_nothing`` when it is skipped."""

    name: str
    compact_partitions: tuple[tuple[str | None, ...], ...]
    cluster_by: tuple[str, ...]
    checkpoint: bool
    vacuum: bool

    @property
    def needs_nothing(self) -> bool:
        return not (self.compact_partitions or self.checkpoint or self.vacuum)

    @property
    def actions(self) -> tuple[str, ...]:
        out = []
        if self.compact_partitions:
            out.append("zorder" if self.cluster_by else "compact")
        if self.checkpoint:
            out.append("checkpoint")
        if self.vacuum:
            out.append("vacuum")
        return tuple(out)


def cluster_columns(spec: TableSpec, primary_key: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The columns readers filter by, partition columns aside: ``file_seq`` and ``pos`` for the
    tables of binlog files (a day's changes, a file's events), else the key; a gold table's
    primary key (``primary_key``) for its point lookups."""
    if primary_key:
        return primary_key[:4]
    names = spec.column_names
    if "file_seq" in names:
        return tuple(c for c in ("file_seq", "pos") if c in names)
    return tuple(c for c in spec.key if c not in spec.partition_by)[:2]


def plan_table(facts: TableFacts, settings: MaintenanceSettings, cluster_by: tuple[str, ...],
               removed_files: bool) -> TablePlan:
    """What ``facts``' table needs (see module doc); ``removed_files``: its log holds ``remove``
    actions (files VACUUM may delete once older than the retention)."""
    compact = tuple(p for p, n in facts.small_files if n >= settings.min_files)
    return TablePlan(facts.name, compact, cluster_by,
                     checkpoint=facts.commits_since_checkpoint >= settings.checkpoint_every or bool(compact),
                     vacuum=bool(compact) or removed_files)


def _log_names(location: str, s3: S3Settings | None) -> list[str]:
    """The object names in the table's ``_delta_log`` folder."""
    from binlake.lake.storage import open_object_store

    folder = location.rstrip("/") + "/_delta_log/"
    if not is_s3_uri(folder):
        path = folder.removeprefix("file://")
        return sorted(os.listdir(path)) if os.path.isdir(path) else []
    return sorted(o.key.rsplit("/", 1)[-1] for o in open_object_store(folder, s3).list())


def log_counts(location: str, s3: S3Settings | None) -> tuple[int, int]:
    """(commit files in ``_delta_log``, commits after the last checkpoint)."""
    names = _log_names(location, s3)
    commits = sorted(int(n.split(".")[0]) for n in names if n.endswith(".json") and n.split(".")[0].isdigit())
    checkpoints = [int(n.split(".")[0]) for n in names if ".checkpoint." in n and n.split(".")[0].isdigit()]
    last = max(checkpoints, default=-1)
    return len(commits), sum(1 for v in commits if v > last)


def table_facts(name: str, location: str, table: DeltaTable, s3: S3Settings | None, target_bytes: int) -> TableFacts:
    """:class:`TableFacts` of the open delta-rs ``table`` at ``location``."""
    from binlake.lake.delta_tables import add_actions

    adds = add_actions(table)
    parts = tuple(table.metadata().partition_columns)
    sizes = adds.get("size_bytes", [])
    keys = [tuple(_text(adds[f"partition.{c}"][i]) for c in parts) for i in range(len(sizes))]
    small = Counter(k for k, size in zip(keys, sizes, strict=True) if size < target_bytes)
    entries, since = log_counts(location, s3)
    return TableFacts(name, location, int(table.version()), len(sizes), int(sum(sizes)),
                      tuple(sorted(small.items(), key=lambda kv: tuple(v or "" for v in kv[0]))), entries, since,
                      parts)


def _text(value: object) -> str | None:
    """A partition value as Delta's log spells it (text; dates ISO)."""
    if value is None:
        return None
    return value.isoformat() if hasattr(value, "isoformat") else str(value)
