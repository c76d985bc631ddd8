"""Gold: one typed current-state Delta table per source table, plus silver.schema_history and
meta.gold_status (see docs/gold.md).

Spark glue only: the schema history (``binlake.gold.schema_history``), the type mapping
(``binlake.gold.types``) and the ordered replay (``binlake.gold.state``) are pure modules.
Per source, :func:`run_gold`

1. rebuilds ``silver.schema_history`` for the source from the DDL in ``silver.statements``
   (plus an optional ``SHOW CREATE TABLE`` seed), replacing the source's rows in one commit;
2. for every table with new row changes: when ``binlake.gold.plan`` proves it exact, replays only
   the changes after the last one the gold table includes, on the rows they touch, and MERGEs
   those keys back (``spark_jobs.gold.incremental``); otherwise replays the table's TABLE_MAPs
   (``bronze.events``) and row changes (``silver.row_changes``) in binlog order on one executor
   and writes the result to ``gold.<source>__<db>__<table>``: a MERGE on the primary key
   (changed rows updated, new rows inserted, vanished rows deleted) when the table's schema is
   unchanged, else an overwrite with the new schema (a new table version, said in the result);
3. replaces the source's rows (its ``_source`` partition) of every union table ``[gold] union``
   stacks the table in (``gold.<union>``, one table for a fleet of shards), from the gold table;
4. replaces the source's rows of ``meta.gold_status``.

Every output is a function of what silver holds, so re-runs, out-of-order backfills and a run
killed halfway (each Delta commit is atomic; a table written after its status row falls back to
the full replay) converge to the same tables.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import logging
import re
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from binlake.errors import BinlakeError
from binlake.gold.plan import (
    FULL,
    INCREMENTAL,
    NONE,
    ReplayState,
    TableInputs,
    Versions,
    coordinates_of,
    coordinates_text,
    old_part_unchanged,
    replay_reason,
    schema_digest,
)
from binlake.gold.schema_history import (
    Coordinates,
    DdlStatement,
    SchemaVersion,
    TableSchema,
    build_history,
    is_table_ddl,
    split_dump,
)
from binlake.gold.seed import SeedTable, Snapshot, SnapshotPosition, parse_dump
from binlake.gold.state import Lineage, Segment, TableReplayer, best_table_map, final_schema, lineage
from binlake.lake.sql_text import source_predicate, sql_identifier, sql_string
from binlake.lake.tables import check_gold_names, gold_table_name
from spark_jobs.gold.incremental import Outcome, TableJob, merge_union_part, replay_new, versions_after
from spark_jobs.gold.inputs import input_fingerprints, previous_base
from spark_jobs.gold.tables import (
    HISTORY_SUFFIX,
    coordinates,
    coordinates_literal,
    event_coordinates,
    gold_location,
    gold_schema_ddl,
    history_schema_ddl,
    is_delta,
    lineage_stream,
    read_silver,
    sorted_stream,
    stream_item,
    table_version,
)
from spark_jobs.lake import committed_write, ensure_table, replace_few_rows, table_path, write_replace
from spark_jobs.schemas import spec

__all__ = ["HISTORY_SUFFIX", "GoldResult", "GoldTableResult", "GoldUnionError", "gold_location", "gold_schema_ddl",
           "gold_table_name", "history_schema_ddl", "replace_union_rows", "run_gold"]

#: the per-source gold tables' source column: a union table's partition column and first key column
SOURCE_COLUMN = "_source"
#: write modes of a gold table / a union part that mean "written by this run" (an asset event each)
WRITTEN_MODES = frozenset({"merge", "overwrite"})
UNION_WRITTEN_MODES = frozenset({"union", "merge", "removed"})


log = logging.getLogger(__name__)


class GoldUnionError(BinlakeError):
    """A source's gold table cannot join its union table (a column's type differs)."""


@dataclass(frozen=True)
class GoldTableResult:
    """One gold table written by a run."""

    name: str
    db: str
    table: str
    location: str
    rows: int
    changes: int
    write_mode: str  # 'merge' | 'overwrite' (new schema) | 'unchanged' (inputs as last run) | 'dropped'
    warnings: tuple[tuple[str, int], ...]
    last_change: tuple[Any, ...] | None = None  # (file, pos, gtid, commit_time) of the latest change
    fingerprint: str | None = None
    history_rows: int | None = None  # versions in gold.<name>__history; None: no history kept
    replay: str = NONE  # 'full' | 'incremental' | 'none' (nothing replayed: unchanged, dropped)
    replay_reason: str | None = None  # why full
    replayed: int = 0  # row changes fed to the replay by this run
    through: Coordinates | None = None  # the last TABLE_MAP / row change of the table the gold table includes
    table_version: int | None = None  # Delta version of the gold table after the run
    history_version: int | None = None  # ... of its __history table
    schema_digest: str | None = None  # of the schema rows were converted with
    previous_fingerprint: str | None = None  # the table's fingerprint before an incremental run
    table_map: str | None = None  # a table without DDL: its best-informed TABLE_MAP and where (JSON)
    touched: Any = field(default=None, compare=False, repr=False)  # incremental: the touched keys (DataFrame)
    schema_status: str | None = None  # why the table's schema is unknown (None: known)


@dataclass(frozen=True)
class GoldUnionResult:
    """The source's part of one union table after a run. ``write_mode``: ``union`` (its rows
    replaced), ``removed`` (its rows deleted: the table was dropped), ``unchanged`` or ``failed``."""

    name: str
    db: str
    table: str
    location: str
    rows: int
    write_mode: str
    fingerprint: str | None  # the gold table's input fingerprint its rows were copied at
    error: str | None = None


@dataclass(frozen=True)
class GoldResult:
    """What :func:`run_gold` did for one source."""

    source: str
    run_id: str
    tables: tuple[GoldTableResult, ...]
    schema_versions: int
    seconds: float
    unions: tuple[GoldUnionResult, ...] = ()
    left_unions: tuple[str, ...] = ()  # union tables the source's rows were removed from (config)

    def written(self) -> tuple[str, ...]:
        """Every gold table (``gold.<name>``) this run wrote: one Airflow asset event each."""
        names = set(self.left_unions)
        for t in self.tables:
            if t.write_mode in WRITTEN_MODES:
                names.add(t.name)
                if t.history_rows is not None:
                    names.add(t.name + HISTORY_SUFFIX)
        names.update(u.name for u in self.unions if u.write_mode in UNION_WRITTEN_MODES)
        return tuple(f"gold.{name}" for name in sorted(names))


# ------------------------------------------------------------------ schema history

def load_ddl(spark: Any, cfg: Any, source: str) -> list[DdlStatement]:
    """The source's table DDL from silver.statements (small: collected on the driver)."""
    from pyspark.sql import functions as F

    rows = (read_silver(spark, cfg, "silver.statements")
            .where((F.col("source") == source) & (F.col("kind") == "DDL")
                   & (F.coalesce(F.col("error_code"), F.lit(0)) == 0))
            .select("file", "file_seq", "pos", "payload_index", "db", "sql", "gtid").collect())
    return [DdlStatement(coordinates(r), r["db"], r["sql"], r["gtid"]) for r in rows
            if r["sql"] and is_table_ddl(r["sql"])]


def seed_statements(initial_schema_sql: str | None, default_db: str | None = None) -> list[DdlStatement]:
    """A ``SHOW CREATE TABLE`` / ``mysqldump --no-data`` text as seed statements (before the archive)."""
    if not initial_schema_sql:
        return []
    db = default_db
    out = []
    for i, sql in enumerate(split_dump(initial_schema_sql)):
        use = re.match(r"^\s*USE\s+`?(\w+)`?", sql, re.IGNORECASE)
        if use:
            db = use.group(1)
            continue
        out.append(DdlStatement(Coordinates(-1, i, file="<initial schema>"), db, sql))
    return out


def _history_rows(source: str, history: list[SchemaVersion]) -> list[tuple[Any, ...]]:
    rows = []
    for v in history:
        schema = v.schema
        rows.append((source, v.db, v.table, v.version, v.origin, v.at.file or None,
                     v.at.file_seq, v.at.pos, None if v.at.payload_index < 0 else v.at.payload_index,
                     v.statement,
                     None if schema is None else json.dumps([c.to_json() for c in schema.columns]),
                     None if schema is None else list(schema.primary_key),
                     json.dumps(v.renames) if v.renames else None,
                     schema is None and v.warning is None, v.warning))
    return rows


def write_schema_history(spark: Any, cfg: Any, source: str, history: list[SchemaVersion],
                         run_id: str) -> None:
    """Replace the source's rows of silver.schema_history (one commit)."""
    _replace_source(spark, cfg, "silver.schema_history", _history_rows(source, history), source, run_id)


def _replace_source(spark: Any, cfg: Any, full_name: str, rows: list[tuple[Any, ...]], source: str,
                    run_id: str) -> None:
    """Replace the source's rows of a gold side table, once per (run, source): a retried task
    whose commit did land is skipped by Delta (``txnAppId``), like every job write."""
    job = full_name.split(".", 1)[1]
    ensure_table(spark, cfg, full_name)  # partitioned by source (an older, unpartitioned one once re-partitioned)
    names = spec(full_name).column_names
    replace_few_rows(spark, cfg, full_name, [dict(zip(names, r, strict=True)) for r in rows],
                     functools.partial(source_predicate, source), run_id=run_id, job=job,
                     txn_app=f"binlake-{job}:{source}:{run_id}", extra_meta={"source": source})


# ------------------------------------------------------------------ per-table replay

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


def _replay_partition(source: str, versions: Sequence[SchemaVersion], final: TableSchema,
                      history: bool = False, seed: SeedTable | None = None,
                      position: SnapshotPosition | None = None) -> Any:
    def run(rows: Iterator[Any]) -> Iterator[tuple[str, Any]]:
        replayer = TableReplayer(source, versions, final, history, position)
        if seed is not None:
            replayer.seed(seed)
        fed, through = 0, None
        for r in rows:
            item = stream_item(r)
            fed += item.kind == "row"
            through = item.at
            replayer.feed(item)
        replayer.feed_all(())
        for out in replayer.rows():
            yield "row", out
        for version in replayer.history_rows():
            yield "history", version
        yield "changes", replayer.report.changes
        if replayer.report.in_snapshot:
            yield "warning", ("row changes already in the seed snapshot (skipped)", replayer.report.in_snapshot)
        yield "last", replayer.report.last
        yield "fed", fed
        yield "through", through
        for text, count in replayer.report.warnings.items():
            yield "warning", (text, count)
    return run


def _write_history(spark: Any, out: Any, final: TableSchema, path: str, run_id: str) -> int:
    """Overwrite the SCD2 table with every version the replay made (one atomic Delta commit: the
    replay is a function of silver, so a re-run or backfill rewrites the same versions)."""
    df = spark.createDataFrame(out.filter(lambda kv: kv[0] == "history").map(lambda kv: kv[1]),
                               history_schema_ddl(final))
    (df.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
       .option("userMetadata", json.dumps({"job": "gold-history", "run_id": run_id})).save(path))
    return int(spark.read.format("delta").load(path).count())


def _table_maps(spark: Any, cfg: Any, task: TableTask, after: Coordinates | None = None
                ) -> list[tuple[Coordinates, dict[str, Any]]]:
    """The table's distinct TABLE_MAPs (each where last seen) from bronze.events; only those after
    ``after`` when given (Delta skips the older files' data by ``file_seq``)."""
    from pyspark.sql import functions as F

    mine = F.lit(False)
    for seg in task.segments or (Segment(task.db, task.table),):  # rows renamed in: their TABLE_MAPs too
        cond = (F.col("db") == seg.db) & (F.col("table_name") == seg.table)
        if seg.after is not None:
            cond = cond & (event_coordinates() > coordinates_literal(seg.after))
        if seg.before is not None:
            cond = cond & (event_coordinates() < coordinates_literal(seg.before))
        mine = mine | cond
    maps = (read_silver(spark, cfg, "bronze.events")
            .where((F.col("source") == task.source) & mine & (F.col("event_type") == "TABLE_MAP")))
    if after is not None:
        maps = maps.where(((F.col("file_seq") >= after.file_seq) | F.col("file_seq").isNull())
                          & (event_coordinates() > coordinates_literal(after)))
    seen = (maps.groupBy("fields")
            .agg(F.max(F.struct(F.coalesce("file_seq", F.lit(0)).alias("s"), "file", "pos")).alias("at")).collect())
    return [(Coordinates(r["at"]["s"], r["at"]["pos"], file=r["at"]["file"]), json.loads(r["fields"])) for r in seen]


def _best_table_map(spark: Any, cfg: Any, task: TableTask) -> tuple[dict[str, Any] | None, str | None]:
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


def _write_gold(spark: Any, df: Any, path: str, final: TableSchema, run_id: str) -> str:
    """MERGE when the schema is unchanged (and the table has a key), else overwrite."""
    from delta.tables import DeltaTable

    meta = json.dumps({"job": "gold", "run_id": run_id})
    if final.primary_key and is_delta(spark, path):
        target = DeltaTable.forPath(spark, path)
        if target.toDF().schema.simpleString() == df.schema.simpleString():
            on = " AND ".join(f"t.{sql_identifier(k)} = s.{sql_identifier(k)}" for k in final.primary_key)
            # every column, not just the last change's coordinates: a backfill of older files
            # changes a row's values while its last change stays the same
            changed = "NOT (" + " AND ".join(
                f"t.{sql_identifier(c)} <=> s.{sql_identifier(c)}" for c in df.columns) + ")"
            spark.conf.set("spark.databricks.delta.commitInfo.userMetadata", meta)
            try:
                (target.alias("t").merge(df.alias("s"), on)
                 .whenMatchedUpdateAll(condition=changed).whenNotMatchedInsertAll()
                 .whenNotMatchedBySourceDelete().execute())
            finally:
                spark.conf.unset("spark.databricks.delta.commitInfo.userMetadata")
            return "merge"
    (df.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
       .option("userMetadata", meta).save(path))
    return "overwrite"


def _side_facts(side: list[tuple[str, Any]]) -> tuple[int, int, Any, Coordinates | None, Counter[str]]:
    """(changes, row changes fed, last change, last item's coordinates, warnings) of a full replay."""
    warnings: Counter[str] = Counter()
    changes, fed, last, through = 0, 0, None, None
    for kind, value in side:
        if kind == "changes":
            changes += value
        elif kind == "fed":
            fed += value
        elif kind == "through":
            through = value
        elif kind == "last":
            last = None if value is None else (value[4], value[5], value[2], value[3])
        else:
            warnings[value[0]] += value[1]
    return changes, fed, last, through, warnings


def _full_replay(spark: Any, cfg: Any, task: TableTask, paths: tuple[str, str | None], final: TableSchema,
                 reason: str) -> GoldTableResult:
    """Replay the table's whole history from silver and write its gold (and ``__history``) table."""
    path, history_path = paths
    snapshot = task.snapshot
    segments = task.segments or (Segment(task.db, task.table),)
    first = segments[0]  # a seed snapshot's rows are the first table's, before any archived change
    seed = snapshot.rows_of(first.db, first.table) if snapshot and first.after is None else None
    out = sorted_stream(lineage_stream(spark, cfg, task.source, segments)).rdd.mapPartitions(
        _replay_partition(task.source, task.versions, final, task.history, seed,
                          snapshot.position if snapshot else None)).cache()
    history_rows = None
    try:
        data = out.filter(lambda kv: kv[0] == "row").map(lambda kv: kv[1])
        df = spark.createDataFrame(data, gold_schema_ddl(final))
        mode = _write_gold(spark, df, path, final, task.run_id)
        if history_path is not None:
            history_rows = _write_history(spark, out, final, history_path, task.run_id)
        side = out.filter(lambda kv: kv[0] not in ("row", "history")).collect()
    finally:
        out.unpersist()
    changes, fed, last, through, warnings = _side_facts(side)
    rows = spark.read.format("delta").load(path).count()
    gold_version, history_version = versions_after(cfg, path, history_path)
    return GoldTableResult(gold_table_name(task.source, task.db, task.table), task.db, task.table, path, rows, changes,
                           mode, tuple(sorted(warnings.items())), last, task.fingerprint, history_rows, FULL, reason,
                           fed, through, gold_version, history_version, schema_digest(final), table_map=task.table_map,
                           schema_status=schema_problem(task, final))


def _incremental_result(spark: Any, cfg: Any, task: TableTask, paths: tuple[str, str | None], final: TableSchema,
                        outcome: Outcome) -> GoldTableResult:
    """The table's result after an incremental replay: counts are the earlier run's plus the new ones."""
    path, history_path = paths
    state = task.state
    assert state is not None
    warnings: Counter[str] = Counter(state.warnings or {})
    warnings.update(outcome.warnings)
    last = state.last if outcome.last is None else (outcome.last[4], outcome.last[5], outcome.last[2], outcome.last[3])
    rows = spark.read.format("delta").load(path).count()
    history_rows = None if history_path is None else int(spark.read.format("delta").load(history_path).count())
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


def _say_unknown(name: str, problem: str | None) -> None:
    if problem:
        log.warning("gold.%s: %s. Seed it from a dump: [gold] seed_dumps = { <source> = \"<mysqldump file>\" } "
                    "(docs/gold.md, \"Seeding from a snapshot\"), or give run_gold its SHOW CREATE TABLE text "
                    "(initial_schema_sql)", name, problem)


def build_table(spark: Any, cfg: Any, task: TableTask) -> GoldTableResult:
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
    _say_unknown(name, problem)
    if final is None:
        return GoldTableResult(name, task.db, task.table, path, 0, 0, "dropped",
                               (("table dropped or unknown", 1),), None, task.fingerprint, schema_status=problem)
    history_path = gold_location(cfg, name + HISTORY_SUFFIX) if task.history else None
    paths = (path, history_path)
    reason: str | None = "no earlier replay of the table in meta.gold_status"
    if task.inputs is not None:
        now = Versions(table_version(cfg, path), None if history_path is None else table_version(cfg, history_path))
        reason = replay_reason(task.state, task.inputs, task.versions, final, now, keep_history=task.history,
                               force=task.force)
    if reason is None and task.state is not None and task.state.through is not None:
        snapshot = task.snapshot
        job = TableJob(task.source, task.versions, final, task.state.through, task.history,
                       snapshot.position if snapshot else None)
        outcome = replay_new(spark, cfg, job, (task.source, task.db, task.table), paths, task.run_id)
        if isinstance(outcome, Outcome):
            log.info("gold.%s: incremental, %d new row change(s) replayed on %d row(s) read back", name,
                     outcome.replayed, outcome.fetched)
            return _incremental_result(spark, cfg, task, paths, final, outcome)
        reason = outcome
    log.info("gold.%s: full replay (%s)", name, reason)
    return _full_replay(spark, cfg, task, paths, final, reason or "forced")


# ------------------------------------------------------------------ status

def _gap_since(spark: Any, cfg: Any, source: str) -> tuple[bool | None, str | None]:
    """(complete, first GAP file) from meta.gtid_reconciliation; (None, None) if not reconciled."""
    from pyspark.sql import functions as F

    path = table_path(cfg, "meta.gtid_reconciliation")
    if not is_delta(spark, path):
        return None, None
    gaps = (spark.read.format("delta").load(path)
            .where((F.col("source") == source) & F.col("status").isin("GAP", "CHAIN_BREAK"))
            .orderBy("chain_index").select("file").first())
    return (gaps is None), (None if gaps is None else gaps["file"])


def _archive_gtids(spark: Any, cfg: Any, source: str) -> str | None:
    from pyspark.sql import functions as F

    path = table_path(cfg, "meta.gtid_coverage")
    if not is_delta(spark, path):
        return None
    sets = [r["gtid_set"] for r in spark.read.format("delta").load(path)
            .where(F.col("source") == source).orderBy("sid", "tag", "gno_start").collect()]
    return ",".join(sets) or None


def _replay_columns(r: GoldTableResult, version: int | None, silver: int | None) -> tuple[Any, ...]:
    """The status row's replay columns (``replay`` … ``schema_status``) for table ``r`` at ``version``."""
    return (r.replay, r.replay_reason, r.replayed, coordinates_text(r.through), version, r.schema_digest, silver,
            r.table_map, r.schema_status)


def write_status(spark: Any, cfg: Any, source: str, results: list[GoldTableResult],
                 history: list[SchemaVersion], seeded: bool, run_id: str,
                 unions: tuple[GoldUnionResult, ...] = (), silver_version: int | None = None) -> None:
    """Replace the source's rows of meta.gold_status: one per gold table, history table and union
    part (a union table has one row per source: its rows there, and what they were copied at).
    Written after every table: the recorded ``table_version`` then proves the next run that
    nothing wrote the table since (``binlake.gold.plan``)."""
    complete, since = _gap_since(spark, cfg, source)
    gtids = _archive_gtids(spark, cfg, source)
    now = _dt.datetime.now(_dt.UTC)
    rows = []
    for r in results:
        last = r.last_change or (None, None, None, None)
        versions = [v.version for v in history if (v.db, v.table) == (r.db, r.table)]
        shared = (max(versions) if versions else None, *last, gtids, complete, since, seeded)
        warnings = json.dumps(dict(r.warnings)) if r.warnings else None
        tail = (r.write_mode, warnings, r.fingerprint, run_id, now)
        rows.append((source, r.name, r.db, r.table, r.location, r.rows, r.changes, *shared, *tail,
                     *_replay_columns(r, r.table_version, silver_version)))
        if r.history_rows is not None:  # the status row is the history table's catalog entry too
            name = r.name + HISTORY_SUFFIX
            rows.append((source, name, r.db, r.table, gold_location(cfg, name), r.history_rows, r.changes,
                         *shared, *tail, *_replay_columns(r, r.history_version, silver_version)))
        for u in unions:
            if (u.db, u.table) == (r.db, r.table):
                rows.append((source, u.name, u.db, u.table, u.location, u.rows, r.changes, *shared,
                             u.write_mode, u.error and json.dumps({u.error: 1}), u.fingerprint, run_id, now,
                             *_replay_columns(r, None, silver_version)))
    _ensure_columns(spark, cfg, "meta.gold_status")
    _replace_source(spark, cfg, "meta.gold_status", rows, source, run_id)


def _ensure_columns(spark: Any, cfg: Any, full_name: str) -> None:
    """Add the registry's columns a table written by an older binlake lacks (appended at the end,
    as the registry appends new columns), so the replace below finds the schema it writes."""
    from binlake.lake.leases import CommitFence

    path = ensure_table(spark, cfg, full_name)
    wanted = spec(full_name)
    held = set(spark.read.format("delta").load(path).columns)
    missing = [c for c in wanted.table.columns if c.name not in held]
    if not missing:
        return
    columns = ", ".join(f"{sql_identifier(c.name)} {c.type} COMMENT {sql_string(c.comment)}" for c in missing)

    def alter(fence: CommitFence) -> None:
        now_held = set(spark.read.format("delta").load(path).columns)
        if all(c.name in now_held for c in missing):
            return  # another source's gold task added them meanwhile
        fence.check()
        spark.sql(f"ALTER TABLE delta.{sql_identifier(path)} ADD COLUMNS ({columns})")

    committed_write(path, cfg.s3, alter, f"add columns to {full_name}")


# ------------------------------------------------------------------ union tables (a fleet of shards)

def _check_union_schema(spark: Any, path: str, df: Any, union: str, source: str) -> None:
    """Refuse a part whose column types differ from the union table's (Delta's own error does not
    say which column); added or missing columns are fine: ``mergeSchema`` adds them, NULL elsewhere."""
    if not is_delta(spark, path):
        return
    held = {f.name.casefold(): f.dataType for f in spark.read.format("delta").load(path).schema.fields}
    clash = [f"{f.name} ({f.dataType.simpleString()}, the union has {held[f.name.casefold()].simpleString()})"
             for f in df.schema.fields if f.name.casefold() in held and held[f.name.casefold()] != f.dataType]
    if clash:
        raise GoldUnionError(f"gold.{union}: source {source} cannot join it, column types differ: "
                             + ", ".join(clash))


def replace_union_rows(spark: Any, cfg: Any, union: str, source: str, df: Any, run_id: str) -> None:
    """Replace ``source``'s rows of ``gold.<union>`` (its ``_source`` partition) with ``df``: one commit.

    Why a partition replace and not a MERGE: each source's gold task writes only its own
    partition, so tasks of a fleet's sources running at once never conflict on data (Delta's
    conflict check prunes by partition); on S3 the write holds the table's commit lock like every
    job write, a first-time creation race is retried (:func:`spark_jobs.lake.committed_write`), and a
    retried task whose commit landed is skipped by Delta (``txnAppId``).
    """
    path = gold_location(cfg, union)
    _check_union_schema(spark, path, df, union, source)
    write_replace(df, path, f"{SOURCE_COLUMN} = {sql_string(source)}", s3=cfg.s3, run_id=run_id,
                  job="gold-union", txn_app=f"binlake-gold-union:{union}:{source}:{run_id}",
                  extra_meta={"source": source}, partition_by=SOURCE_COLUMN, merge_schema=True)


def _remove_union_rows(spark: Any, cfg: Any, union: str, source: str, run_id: str) -> None:
    path = gold_location(cfg, union)
    empty = spark.read.format("delta").load(path).limit(0)
    replace_union_rows(spark, cfg, union, source, empty, run_id)


def _merge_union_rows(spark: Any, cfg: Any, union: str, source: str, table: GoldTableResult, run_id: str) -> None:
    """After an incremental run of ``table``: its touched keys MERGEd into the source's part of the
    union (the part equalled the gold table before the run: same fingerprint); one commit under the
    table's commit lock, retried on a Delta conflict like every union write (a MERGE of absolute
    rows is idempotent)."""
    from binlake.lake.leases import CommitFence

    path = gold_location(cfg, union)

    def write(fence: CommitFence) -> None:
        fence.check()
        merge_union_part(spark, path, table.location, source, table.touched, run_id)

    committed_write(path, cfg.s3, write, f"gold union merge into {path}")


def _union_part(spark: Any, cfg: Any, source: str, union: str, table: GoldTableResult, before: Any,
                run_id: str) -> GoldUnionResult:
    """Bring the source's part of ``gold.<union>`` to its gold table ``table`` (skipped when it was
    copied at the same input fingerprint and the table is unchanged)."""
    path = gold_location(cfg, union)
    exists = is_delta(spark, path)
    same = exists and before is not None and before["input_fingerprint"] == table.fingerprint

    def part(rows: int, mode: str, error: str | None = None) -> GoldUnionResult:
        fingerprint = None if mode == "failed" else table.fingerprint
        return GoldUnionResult(union, table.db, table.table, path, rows, mode, fingerprint, error)

    if table.write_mode == "dropped":
        if not exists or same:
            return part(0, "unchanged")
        _remove_union_rows(spark, cfg, union, source, run_id)
        return part(0, "removed")
    if same and table.write_mode == "unchanged":
        return part(before["rows"], "unchanged")
    in_step = (exists and before is not None and before["write_mode"] != "failed"
               and before["input_fingerprint"] == table.previous_fingerprint)
    if table.replay == INCREMENTAL and table.touched is not None and in_step:
        _merge_union_rows(spark, cfg, union, source, table, run_id)
        return part(table.rows, "merge")
    try:
        replace_union_rows(spark, cfg, union, source, spark.read.format("delta").load(table.location), run_id)
    except GoldUnionError as exc:
        return part(before["rows"] if before is not None and exists else 0, "failed", str(exc))
    return part(table.rows, "union")


def update_unions(spark: Any, cfg: Any, source: str, results: list[GoldTableResult], previous: dict[str, Any],
                  run_id: str, *, every_table: bool = True) -> tuple[tuple[GoldUnionResult, ...], tuple[str, ...]]:
    """The source's part of every union table (``[gold] union``) its gold tables belong to, and the
    union tables it left (named by its last status, no longer by the config: its rows are removed
    there; only when ``every_table`` of the source was considered this run)."""
    parts = tuple(_union_part(spark, cfg, source, union, r, previous.get(union), run_id)
                  for r in results for union in cfg.gold.unions_of(source, r.db, r.table))
    left = []
    if every_table:
        kept = {u.name for u in parts}
        for name in sorted(previous):
            if "__" not in name and name not in kept and is_delta(spark, gold_location(cfg, name)):
                _remove_union_rows(spark, cfg, name, source, run_id)
                left.append(name)
    return parts, tuple(left)


# ------------------------------------------------------------------ skipping unchanged tables

def _schema_digest_of(source: str, history: list[SchemaVersion]) -> Any:
    """A table's schema history digest (part of its input fingerprint)."""
    rows = _history_rows(source, history)

    def digest(key: tuple[str, str]) -> str:
        mine = [row for row in rows if (row[1], row[2]) == key]
        return hashlib.sha1(json.dumps(mine, default=str).encode()).hexdigest()[:16]
    return digest


def _previous_status(spark: Any, cfg: Any, source: str) -> dict[str, dict[str, Any]]:
    from pyspark.sql import functions as F

    path = table_path(cfg, "meta.gold_status")
    if not is_delta(spark, path):
        return {}
    df = spark.read.format("delta").load(path)
    if "input_fingerprint" not in df.columns:
        return {}
    return {r["gold_table"]: r.asDict() for r in df.where(F.col("source") == source).collect()}


def _unchanged(previous: dict[str, Any], history: dict[str, Any] | None) -> GoldTableResult:
    """A table whose inputs are those of its last run: its status row carried over, nothing replayed."""
    warnings = tuple(sorted(json.loads(previous["warnings"]).items())) if previous["warnings"] else ()
    last = (previous["last_file"], previous["last_pos"], previous["last_gtid"],
            previous["last_commit_time"])
    state = ReplayState.from_status(previous, history)
    return GoldTableResult(previous["gold_table"], previous["db"], previous["table_name"],
                           previous["location"], previous["rows"], previous["changes"], "unchanged",
                           warnings, last, previous["input_fingerprint"],
                           None if history is None else history["rows"], NONE, None, 0, state.through,
                           state.table_version, state.history_version, state.schema_digest, table_map=state.table_map,
                           schema_status=previous.get("schema_status"))


# ------------------------------------------------------------------ entry point

def _snapshot(cfg: Any, source: str, seed_dump: str | None) -> Snapshot | None:
    """The source's seed snapshot: ``seed_dump`` text, else the ``[gold] seed_dumps`` file."""
    if seed_dump is None:
        path = cfg.gold.seed_dumps.get(source)
        if path is None:
            return None
        with open(path, encoding="utf-8") as dump:
            seed_dump = dump.read()
    return parse_dump(seed_dump)


def _is_current(spark: Any, before: Any, before_history: Any, fingerprint: str, keep_history: bool) -> bool:
    """The table's inputs are those of its last run and its tables (history too, if kept) exist."""
    if before is None or before["input_fingerprint"] != fingerprint or not is_delta(spark, before["location"]):
        return False
    return keep_history == (before_history is not None and is_delta(spark, before_history["location"]))


def run_gold(spark: Any, cfg: Any, source: str, run_id: str, *,
             initial_schema_sql: str | None = None,
             only_tables: frozenset[tuple[str, str]] | None = None,
             force: bool = False, seed_dump: str | None = None) -> GoldResult:
    """Build (or bring up to date) every gold table of ``source`` from silver; see module doc.

    ``initial_schema_sql``: ``SHOW CREATE TABLE`` texts for tables created before the archive.
    ``seed_dump``: a dump taken at a GTID position (``binlake.gold.seed``; default: the
    ``[gold] seed_dumps`` file of the source): its tables start from its rows, and only
    changes (and DDL) whose GTID is not in its position apply.
    ``force``: replay every table in full, even when its inputs are unchanged since the last run.
    ``only_tables``: rebuild just these ``(db, table)`` (status rows of the others are kept
    out of this run's ``meta.gold_status`` rows, so use it for repairs, not routinely).
    """
    t0 = time.time()
    snapshot = _snapshot(cfg, source, seed_dump)
    seeds = seed_statements("\n".join(text for text in (initial_schema_sql, snapshot.schema_sql if snapshot else None)
                                       if text))
    ddl = [d for d in load_ddl(spark, cfg, source) if snapshot is None or not snapshot.position.contains(d.gtid)]
    history = build_history(ddl, seeds)
    write_schema_history(spark, cfg, source, history, run_id)
    previous = _previous_status(spark, cfg, source)
    seed = snapshot.digest() if snapshot else None
    marks, names = _marks(previous), _gold_names(source, previous)
    version, inputs, how = input_fingerprints(spark, cfg, source, _schema_digest_of(source, history),
                                              previous_base(previous, names), marks, seed)
    log.info("source %s: input fingerprints of %d table(s) from %s", source, len(inputs), how)
    seeded_tables = {(t.db, t.table) for t in snapshot.tables} if snapshot else set()
    check_gold_names(source, set(inputs) | seeded_tables | _renamed_into(history) | set(names.values()),
                     cfg.gold.keeps_history)
    lineages = {key: lineage(history, key) for key in set(inputs) | seeded_tables | _renamed_into(history)}
    inputs = _lineage_inputs(inputs, lineages, _schema_digest_of(source, history))
    results = []
    try:
        for db, table in sorted(lineages):
            if only_tables is None or (db, table) in only_tables:
                line = lineages[(db, table)]
                task = TableTask(source, db, table, line.versions, run_id, None, cfg.gold.keeps_history(db, table),
                                 snapshot, force=force, segments=line.segments)
                results.append(_table(spark, cfg, task, inputs.get((db, table)), previous, seed))
        unions, left = update_unions(spark, cfg, source, results, previous, run_id, every_table=only_tables is None)
        write_status(spark, cfg, source, results, history, bool(seeds), run_id, unions,
                     version if only_tables is None else None)
    finally:
        for r in results:
            if r.touched is not None:
                r.touched.unpersist()
    failed = [u.error for u in unions if u.error]
    if failed:
        raise GoldUnionError("\n".join(failed))
    return GoldResult(source, run_id, tuple(replace(r, touched=None) for r in results), len(history),
                      time.time() - t0, unions, left)


def _renamed_into(history: list[SchemaVersion]) -> set[tuple[str, str]]:
    """Tables rows were renamed into (RENAME TABLE, ALTER TABLE ... RENAME): each has a gold table
    even without row changes under its own name (a swap after the last change)."""
    return {(v.db, v.table) for v in history if v.renamed_from is not None}


def _lineage_inputs(inputs: dict[tuple[str, str], TableInputs], lineages: dict[tuple[str, str], Lineage],
                    schema_of: Any) -> dict[tuple[str, str], TableInputs]:
    """Per gold table, its inputs: its own table's, and when rows were renamed into it, a digest of
    every other segment's table's fingerprint appended (``:lineage <digest>``). Why appended: the
    count and hash sum in front stay the table's own (what ``gold_inputs`` adds a night's files to),
    and a change in a table the rows came from changes the schema part, so the table is replayed in
    full rather than skipped or resumed."""
    out = dict(inputs)
    for key, line in lineages.items():
        if not line.renamed:
            continue
        parts = [[*seg.key, inputs[seg.key].fingerprint if seg.key in inputs else "no changes:" + schema_of(seg.key)]
                 for seg in line.segments[:-1]]
        parts.append(["segments", *(str(seg) for seg in line.segments)])
        suffix = ":lineage " + hashlib.sha1(json.dumps(parts).encode()).hexdigest()[:16]
        own = inputs.get(key) or TableInputs("no changes:" + schema_of(key))
        out[key] = replace(own, fingerprint=own.fingerprint + suffix)
    return out


def _gold_names(source: str, previous: dict[str, dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """The previous status rows of the source's own gold tables (not __history, not unions): name -> key."""
    return {name: (row["db"], row["table_name"]) for name, row in previous.items()
            if name == gold_table_name(source, row["db"], row["table_name"])}


def _marks(previous: dict[str, dict[str, Any]]) -> dict[tuple[str, str], Coordinates]:
    """Per table: the W its status row says its gold table includes (``replayed_through``)."""
    out = {}
    for name, row in previous.items():
        at = coordinates_of(row.get("replayed_through"))
        if at is not None and not name.endswith(HISTORY_SUFFIX) and "__" in name:
            out[(row["db"], row["table_name"])] = at
    return out


def _table(spark: Any, cfg: Any, task: TableTask, inputs: TableInputs | None, previous: dict[str, dict[str, Any]],
           seed: str | None) -> GoldTableResult:
    """One table of the run: skipped when its inputs are those of its last run, else built."""
    name = gold_table_name(task.source, task.db, task.table)
    fingerprint = inputs.fingerprint if inputs else "no changes" + (f":seed {seed}" if seed else "")
    before, before_history = previous.get(name), previous.get(name + HISTORY_SUFFIX)
    if not task.force and _is_current(spark, before, before_history, fingerprint, task.history):
        assert before is not None
        return _unchanged(before, before_history)
    state = None if before is None else ReplayState.from_status(before, before_history)
    return build_table(spark, cfg, replace(task, fingerprint=fingerprint, state=state, inputs=inputs))
