"""One gold table brought up to date: the full replay, or the incremental one when
``binlake.gold.plan`` proves it exact (:func:`build_table`).

The full replay reads the table's TABLE_MAPs and row changes in binlog order
(``binlake.gold.state.TableReplayer``): in the step's own process when few changes feed it
(``[gold] in_process_changes``), else on one executor; and writes the result: a MERGE on the primary
key when the schema is unchanged, else an overwrite with the new schema; the ``__history`` table (when kept) is
rewritten from the same replay. The incremental path lives in :mod:`spark_jobs.gold.incremental`.
A table without DDL takes its columns from its best-informed TABLE_MAP; when its schema cannot be
known, the result says why (:func:`schema_problem`).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from binlake.gold.plan import (
    FULL,
    INCREMENTAL,
    ReplayState,
    TableInputs,
    Versions,
    old_part_unchanged,
    replay_reason,
    schema_digest,
)
from binlake.gold.reads import stream_items
from binlake.gold.schema_history import Coordinates, SchemaVersion, TableSchema
from binlake.gold.seed import SeedTable, Snapshot, SnapshotPosition
from binlake.gold.state import Segment, StreamItem, TableReplayer, best_table_map, final_schema
from binlake.lake.delta_tables import Commit, merge_rows, overwrite_table
from binlake.lake.sql_text import sql_identifier
from binlake.lake.tables import gold_table_name
from spark_jobs.gold.incremental import Outcome, TableJob, replay_new, versions_after
from spark_jobs.gold.results import GoldTableResult, last_change
from spark_jobs.gold.tables import (
    HISTORY_SUFFIX,
    coordinates_literal,
    ensure_gold_properties,
    event_coordinates,
    gold_defaults,
    gold_location,
    gold_properties,
    gold_schema_ddl,
    history_schema_ddl,
    lineage_stream,
    merge_into,
    read_silver,
    row_count,
    sorted_stream,
    stream_item,
    table_version,
)
from spark_jobs.lake import delta_schema
from spark_jobs.session import (
    ddl_schema,
    local_arrow,
    local_frame,
    map_partitions_tagged,
    session_of,
    tagged_frame,
    tagged_values,
)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, Row, SparkSession
    from pyspark.sql.types import StructType

    from binlake.config import BinlakeConfig
    from spark_jobs.session import SparkSource

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableTask:
    """One table of a gold run: what its replay needs, and what decides full vs incremental."""

    source: str
    db: str
    table: str
    versions: tuple[SchemaVersion, ...]
    run_id: str
    fingerprint: str | None = None
    history: bool = False
    snapshot: Snapshot | None = None
    state: ReplayState | None = None  # what its status row says the gold table holds
    inputs: TableInputs | None = None  # its silver changes, split at the state's W
    force: bool = False
    table_map: str | None = None  # a table without DDL: its best-informed TABLE_MAP and where (JSON)
    #: the source tables (and coordinate ranges) whose row changes feed the gold table: more than
    #: one when rows were renamed into it (``binlake.gold.state.lineage``)
    segments: tuple[Segment, ...] = ()
    #: row changes silver holds for those tables (None: not counted): a full replay of at most
    #: ``[gold] in_process_changes`` runs in the step's own process
    changes_fed: int | None = None


def _replay_partition(source: str, versions: Sequence[SchemaVersion], final: TableSchema,
                      history: bool = False, seed: SeedTable | None = None,
                      position: SnapshotPosition | None = None) -> Callable[[Iterable[Row]], Iterator[tuple[str, Any]]]:
    """The replay over a partition of Spark ``Row``s (:func:`sorted_stream`'s one partition)."""
    replay = _replay(source, versions, final, history, seed, position)

    def run(rows: Iterable[Row]) -> Iterator[tuple[str, Any]]:
        return replay(stream_item(r) for r in rows)
    return run


def _replay(source: str, versions: Sequence[SchemaVersion], final: TableSchema, history: bool = False,
            seed: SeedTable | None = None, position: SnapshotPosition | None = None
            ) -> Callable[[Iterable[StreamItem]], Iterator[tuple[str, Any]]]:
    """The replay of a table's stream, in binlog order: its gold rows (``row``), its history
    versions (``history``), then the side facts (:data:`SIDE_KINDS`), each as ``(kind, value)``."""
    def run(items: Iterable[StreamItem]) -> Iterator[tuple[str, Any]]:
        replayer = TableReplayer(source, versions, final, history, position)
        if seed is not None:
            replayer.seed(seed)
        fed, through = 0, None
        for item in items:
            fed += item.kind == "row"
            through = item.at
            replayer.feed(item)
        replayer.feed_all(())
        rows_out = versions_out = 0
        for out in replayer.rows():
            rows_out += 1
            yield "row", out
        for version in replayer.history_rows():
            versions_out += 1
            yield "history", version
        yield "written", (rows_out, versions_out)
        yield "changes", replayer.report.changes
        if replayer.report.in_snapshot:
            yield "warning", ("row changes already in the seed snapshot (skipped)", replayer.report.in_snapshot)
        yield "last", replayer.report.last
        yield "fed", fed
        yield "through", through
        for text, count in replayer.report.warnings.items():
            yield "warning", (text, count)
    return run


def _write_history(cfg: BinlakeConfig, df: DataFrame, path: str, run_id: str) -> None:
    """Overwrite the SCD2 table with every version the replay made (one atomic Delta commit: the
    replay is a function of silver, so a re-run or backfill rewrites the same versions); a table it
    creates carries the gold table properties."""
    with gold_defaults(df.sparkSession, cfg):
        (df.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
           .option("userMetadata", json.dumps({"job": "gold-history", "run_id": run_id})).save(path))


def _table_maps(spark: SparkSource, cfg: BinlakeConfig, task: TableTask, after: Coordinates | None = None
                ) -> list[tuple[Coordinates, dict[str, Any]]]:
    """The table's distinct TABLE_MAPs (each where last seen) from bronze.events; only those after
    ``after`` when given (Delta skips the older files' data by ``file_seq``)."""
    from pyspark.sql import functions as F

    session = session_of(spark)  # before the first Column: classic PySpark builds them in the JVM
    mine = F.lit(False)
    for seg in task.segments or (Segment(task.db, task.table),):  # rows renamed in: their TABLE_MAPs too
        cond = (F.col("db") == seg.db) & (F.col("table_name") == seg.table)
        if seg.after is not None:
            cond = cond & (event_coordinates() > coordinates_literal(seg.after))
        if seg.before is not None:
            cond = cond & (event_coordinates() < coordinates_literal(seg.before))
        mine = mine | cond
    maps = (read_silver(session, cfg, "bronze.events")
            .where((F.col("source") == task.source) & mine & (F.col("event_type") == "TABLE_MAP")))
    if after is not None:
        maps = maps.where(((F.col("file_seq") >= after.file_seq) | F.col("file_seq").isNull())
                          & (event_coordinates() > coordinates_literal(after)))
    seen = (maps.groupBy("fields")
            .agg(F.max(F.struct(F.coalesce("file_seq", F.lit(0)).alias("s"), "file", "pos")).alias("at")).collect())
    return [(Coordinates(r["at"]["s"], r["at"]["pos"], file=r["at"]["file"]), json.loads(r["fields"])) for r in seen]


def _best_table_map(spark: SparkSource, cfg: BinlakeConfig, task: TableTask) -> tuple[dict[str, Any] | None, str | None]:
    """The table's best-informed TABLE_MAP (``gold_state.best_table_map``) and, as JSON for its
    status row, where it was seen. Why not always a scan of all its TABLE_MAPs: when the status row
    holds the previous best and the changes up to W are unchanged, the best of all is the best of
    that one and the TABLE_MAPs after W (``best_table_map`` compares maps of the latest one's width,
    and a new width changes the schema anyway), so a night reads only its own TABLE_MAPs."""
    state = task.state
    prev = None if state is None or not state.table_map else json.loads(state.table_map)
    if prev is not None and state is not None and state.through is not None and old_part_unchanged(state, task.inputs):
        at = Coordinates(prev["at"][0], prev["at"][1], file=prev["at"][2])
        candidates = [(at, prev["fields"]), *_table_maps(spark, cfg, task, state.through)]
        widths = {len(fields.get("columns") or []) for _, fields in candidates}
        if len(widths) == 1:
            return _best_with_place(candidates)
    return _best_with_place(_table_maps(spark, cfg, task))


def _best_with_place(candidates: list[tuple[Coordinates, dict[str, Any]]]) -> tuple[dict[str, Any] | None, str | None]:
    best = best_table_map(candidates)
    if best is None:
        return None, None
    at = max(c for c, fields in candidates if fields == best)
    return best, json.dumps({"at": [at.file_seq, at.pos, at.file], "fields": best}, sort_keys=True)


def _merges(cfg: BinlakeConfig, path: str, final: TableSchema, schema: StructType) -> bool:
    """Whether the gold table at ``path`` is MERGEd rather than overwritten: it has a key and its
    stored schema (read from the Delta log) is ``schema``."""
    stored = delta_schema(cfg, path)
    return bool(final.primary_key) and stored is not None and stored.simpleString() == schema.simpleString()


def _write_gold(spark: SparkSession, cfg: BinlakeConfig, df: DataFrame, path: str, final: TableSchema, run_id: str, *,
                merge: bool) -> str:
    """MERGE (``merge``: :func:`_merges`), else overwrite (a table it creates carries the gold table properties)."""
    meta = json.dumps({"job": "gold", "run_id": run_id})
    if merge:
        on = " AND ".join(f"t.{sql_identifier(k)} = s.{sql_identifier(k)}" for k in final.primary_key)
        # every column, not just the last change's coordinates: a backfill of older files
        # changes a row's values while its last change stays the same
        changed = "NOT (" + " AND ".join(
            f"t.{sql_identifier(c)} <=> s.{sql_identifier(c)}" for c in df.columns) + ")"
        merge_into(spark, path, df, on, f"WHEN MATCHED AND {changed} THEN UPDATE SET * "
                   "WHEN NOT MATCHED THEN INSERT * WHEN NOT MATCHED BY SOURCE THEN DELETE", job="gold", run_id=run_id)
        return "merge"
    with gold_defaults(spark, cfg):
        (df.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
           .option("userMetadata", meta).save(path))
    return "overwrite"


#: the side facts :func:`_replay_partition` yields after the rows and history versions
SIDE_KINDS = ("changes", "warning", "last", "fed", "through", "written")


@dataclass
class ReplayFacts:
    """What a full replay says besides its rows: its changes, the row changes fed, the last change,
    the last item's coordinates, the warnings, and how many gold rows and history versions it wrote
    (the tables' row counts: the MERGE leaves the gold table holding exactly the replay's rows)."""

    changes: int = 0
    fed: int = 0
    last: Any = None
    through: Coordinates | None = None
    warnings: Counter[str] = field(default_factory=Counter)
    rows: int = 0
    versions: int = 0

    @classmethod
    def of(cls, side: list[tuple[str, Any]]) -> ReplayFacts:
        facts = cls()
        for kind, value in side:
            if kind == "changes":
                facts.changes += value
            elif kind == "fed":
                facts.fed += value
            elif kind == "through":
                facts.through = value
            elif kind == "last":
                facts.last = None if value is None else last_change(value)
            elif kind == "written":
                facts.rows, facts.versions = facts.rows + value[0], facts.versions + value[1]
            else:
                facts.warnings[value[0]] += value[1]
        return facts


def _full_replay(spark: SparkSource, cfg: BinlakeConfig, task: TableTask, paths: tuple[str, str | None], final: TableSchema,
                 reason: str) -> GoldTableResult:
    """Replay the table's whole history from silver and write its gold (and ``__history``) table:
    in this process when few row changes feed it (``[gold] in_process_changes``), else on an executor."""
    path, history_path = paths
    snapshot = task.snapshot
    segments = task.segments or (Segment(task.db, task.table),)
    first = segments[0]  # a seed snapshot's rows are the first table's, before any archived change
    seed = snapshot.rows_of(first.db, first.table) if snapshot and first.after is None else None
    args = (task.source, task.versions, final, task.history, seed, snapshot.position if snapshot else None)
    here = task.changes_fed is not None and task.changes_fed <= cfg.gold.in_process_changes
    log.info("gold.%s: %d row change(s) replayed %s", gold_table_name(task.source, task.db, task.table),
             task.changes_fed or 0, "in this process" if here else "by a Spark job")
    if here:
        mode, facts = _replay_here(spark, cfg, task, paths, final, _replay(*args), segments)
    else:
        mode, facts = _replay_on_executor(session_of(spark), cfg, task, paths, final, _replay_partition(*args), segments)
    gold_version, history_version = versions_after(cfg, path, history_path)
    return GoldTableResult(gold_table_name(task.source, task.db, task.table), task.db, task.table, path, facts.rows,
                           facts.changes, mode, tuple(sorted(facts.warnings.items())), facts.last, task.fingerprint,
                           None if history_path is None else facts.versions, FULL, reason, facts.fed, facts.through,
                           gold_version, history_version, schema_digest(final), table_map=task.table_map,
                           schema_status=schema_problem(task, final))


def _replay_on_executor(spark: SparkSession, cfg: BinlakeConfig, task: TableTask, paths: tuple[str, str | None],
                        final: TableSchema, replay: Callable[[Iterable[Row]], Iterator[tuple[str, Any]]],
                        segments: tuple[Segment, ...]) -> tuple[str, ReplayFacts]:
    """The replay as a Spark job: the stream sorted on one partition, replayed there, its output
    cached for the writes and the side facts."""
    path, history_path = paths
    out = map_partitions_tagged(sorted_stream(lineage_stream(spark, cfg, task.source, segments)), replay).cache()
    try:
        rows = tagged_frame(spark, out, ("row",), gold_schema_ddl(final))
        mode = _write_gold(spark, cfg, rows, path, final, task.run_id, merge=_merges(cfg, path, final, rows.schema))
        if history_path is not None:
            _write_history(cfg, tagged_frame(spark, out, ("history",), history_schema_ddl(final)), history_path,
                           task.run_id)
        return mode, ReplayFacts.of(tagged_values(out, *SIDE_KINDS))
    finally:
        out.unpersist()


def _replay_here(spark: SparkSource, cfg: BinlakeConfig, task: TableTask, paths: tuple[str, str | None],
                 final: TableSchema, replay: Callable[[Iterable[StreamItem]], Iterator[tuple[str, Any]]],
                 segments: tuple[Segment, ...]) -> tuple[str, ReplayFacts]:
    """The replay in this process over the stream read with delta-rs, its rows written by delta-rs
    (Spark where delta-rs may not: :func:`_write_gold_here`). Why: for a table of a few thousand
    changes, the Spark job (silver's Delta snapshots, a Python worker, the sort, the cached output)
    costs seconds of driver time for a few milliseconds of work."""
    path, history_path = paths
    out: dict[str, list[Any]] = {"row": [], "history": []}
    side: list[tuple[str, Any]] = []
    for kind, value in replay(stream_items(cfg, task.source, segments)):
        if kind in out:
            out[kind].append(value)
        else:
            side.append((kind, value))
    mode = _write_gold_here(spark, cfg, out["row"], path, final, task.run_id)
    if history_path is not None:
        _write_history_here(spark, cfg, out["history"], history_path, final, task.run_id)
    return mode, ReplayFacts.of(side)


def _write_gold_here(spark: SparkSource, cfg: BinlakeConfig, rows: list[Any], path: str, final: TableSchema,
                     run_id: str) -> str:
    """:func:`_write_gold` of rows made in this process, committed by delta-rs: the same MERGE or
    overwrite, decided the same way; Spark writes them where delta-rs may not (deletion vectors, a
    table feature beyond :data:`binlake.lake.delta_tables.DELTA_RS_GOLD_WRITER_FEATURES`).
    Why: a Spark Delta write of a few rows costs seconds of driver time (the table's snapshot
    is a Spark job), delta-rs milliseconds; small tables are most tables of a small night."""
    ddl = gold_schema_ddl(final)
    schema = ddl_schema(ddl)
    merge = _merges(cfg, path, final, schema)
    if not cfg.gold.deletion_vectors:
        data = local_arrow(rows, schema)
        meta = json.dumps({"job": "gold", "run_id": run_id})
        if merge:
            if merge_rows(path, cfg.s3, data, final.primary_key, user_metadata=meta) is not Commit.LEFT_TO_SPARK:
                return "merge"
        elif overwrite_table(path, cfg.s3, data, configuration=gold_properties(cfg),
                             user_metadata=meta) is not Commit.LEFT_TO_SPARK:
            return "overwrite"
    session = session_of(spark)
    return _write_gold(session, cfg, local_frame(session, rows, ddl), path, final, run_id, merge=merge)


def _write_history_here(spark: SparkSource, cfg: BinlakeConfig, rows: list[Any], path: str, final: TableSchema,
                        run_id: str) -> None:
    """:func:`_write_history` of rows made in this process, by delta-rs as :func:`_write_gold_here`."""
    ddl = history_schema_ddl(final)
    if not cfg.gold.deletion_vectors and overwrite_table(
            path, cfg.s3, local_arrow(rows, ddl_schema(ddl)), configuration=gold_properties(cfg),
            user_metadata=json.dumps({"job": "gold-history", "run_id": run_id})) is not Commit.LEFT_TO_SPARK:
        return
    _write_history(cfg, local_frame(session_of(spark), rows, ddl), path, run_id)


def _incremental_result(spark: SparkSource, cfg: BinlakeConfig, task: TableTask, paths: tuple[str, str | None],
                        final: TableSchema, outcome: Outcome) -> GoldTableResult:
    """The table's result after an incremental replay: counts are the earlier run's plus the new ones."""
    path, history_path = paths
    state = task.state
    assert state is not None
    warnings: Counter[str] = Counter(state.warnings or {})
    warnings.update(outcome.warnings)
    last = state.last if outcome.last is None else last_change(outcome.last)
    rows = row_count(spark, cfg, path)
    history_rows = None if history_path is None else row_count(spark, cfg, history_path)
    gold_version, history_version = versions_after(cfg, path, history_path)
    return GoldTableResult(gold_table_name(task.source, task.db, task.table), task.db, task.table, path, rows,
                           state.changes + outcome.changes, "merge", tuple(sorted(warnings.items())), last,
                           task.fingerprint, history_rows, INCREMENTAL, None, outcome.replayed, outcome.through,
                           gold_version, history_version, schema_digest(final), state.fingerprint, task.table_map,
                           outcome.keys, schema_problem(task, final))


def schema_problem(task: TableTask, final: TableSchema | None) -> str | None:
    """Why the table's schema cannot be known (None: it is, from DDL, a seed or FULL row metadata):
    the text of ``meta.gold_status.schema_status``, naming the table and the statement."""
    if final is not None and task.table_map is None:
        return None  # the schema comes from DDL or a seed
    if final is not None and json.loads(task.table_map or "{}").get("fields", {}).get("has_full_metadata"):
        return None
    last = task.versions[-1] if task.versions else None
    if final is None and (last is None or last.warning is None):
        return None  # dropped
    why = (f"{last.warning} at `{' '.join(last.statement.split())[:300]}`" if last is not None and last.warning
           else "no CREATE TABLE for it in the archive and no seed")
    tail = ("its columns are the TABLE_MAPs' @1..@N and no primary key is known (binlog_row_metadata is not FULL)"
            if final is not None else "no TABLE_MAP tells its columns either")
    return f"schema of {task.db}.{task.table} unknown: {why}; {tail}"


def build_table(spark: SparkSource, cfg: BinlakeConfig, task: TableTask) -> GoldTableResult:
    """Bring one gold table (and its ``__history`` table when kept) up to date: incrementally when
    ``binlake.gold.plan`` proves it exact, else by the full replay (the result says which, and why)."""
    name = gold_table_name(task.source, task.db, task.table)
    path = gold_location(cfg, name)
    final, table_map = final_schema(task.versions, None), None
    if final is None:
        best, table_map = _best_table_map(spark, cfg, task)
        final = final_schema(task.versions, best)
    task = replace(task, table_map=table_map)
    problem = schema_problem(task, final)
    if final is None:
        return GoldTableResult(name, task.db, task.table, path, 0, 0, "dropped",
                               (("table dropped or unknown", 1),), None, task.fingerprint, schema_status=problem)
    history_path = gold_location(cfg, name + HISTORY_SUFFIX) if task.history else None
    paths = (path, history_path)
    for existing in (p for p in paths if p is not None):  # before the version the plan compares
        ensure_gold_properties(spark, cfg, existing)
    reason: str | None = "no earlier replay of the table in meta.gold_status"
    if task.inputs is not None:
        now = Versions(table_version(cfg, path), None if history_path is None else table_version(cfg, history_path))
        reason = replay_reason(task.state, task.inputs, task.versions, final, now, keep_history=task.history,
                               force=task.force, min_changes=cfg.gold.incremental_min_changes)
    if reason is None and task.state is not None and task.state.through is not None:
        snapshot = task.snapshot
        job = TableJob(task.source, task.versions, final, task.state.through, task.history,
                       snapshot.position if snapshot else None)
        outcome = replay_new(session_of(spark), cfg, job, (task.source, task.db, task.table), paths, task.run_id)
        if isinstance(outcome, Outcome):
            log.info("gold.%s: incremental, %d new row change(s) replayed on %d row(s) read back", name,
                     outcome.replayed, outcome.fetched)
            return _incremental_result(spark, cfg, task, paths, final, outcome)
        reason = outcome
    log.info("gold.%s: full replay (%s)", name, reason)
    return _full_replay(spark, cfg, task, paths, final, reason or "forced")
