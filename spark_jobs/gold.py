"""Gold: one typed current-state Delta table per source table, plus silver.schema_history and
meta.gold_status (see docs/gold.md).

Spark glue only: the schema history (``binlake.schema_history``), the type mapping
(``binlake.gold_types``) and the ordered replay (``binlake.gold_state``) are pure modules.
Per source, :func:`run_gold`

1. rebuilds ``silver.schema_history`` for the source from the DDL in ``silver.statements``
   (plus an optional ``SHOW CREATE TABLE`` seed), replacing the source's rows in one commit;
2. for every table with row changes, replays the table's TABLE_MAPs (``bronze.events``) and row
   changes (``silver.row_changes``) in binlog order on one executor and writes the result to
   ``gold.<source>__<db>__<table>``: a MERGE on the primary key (changed rows updated, new
   rows inserted, vanished rows deleted) when the table's schema is unchanged, else an
   overwrite with the new schema (a new table version, said in the result);
3. replaces the source's rows (its ``_source`` partition) of every union table ``[gold] union``
   stacks the table in (``gold.<union>``, one table for a fleet of shards), from the gold table;
4. replaces the source's rows of ``meta.gold_status``.

Every output is a function of what silver holds, so re-runs, out-of-order backfills and a run
killed halfway (each Delta commit is atomic) converge to the same tables.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from binlake.errors import BinlakeError
from binlake.gold_seed import SeedTable, Snapshot, SnapshotPosition, parse_dump
from binlake.gold_state import (
    COPIES_COLUMN,
    HISTORY_COLUMNS,
    StreamItem,
    TableReplayer,
    best_table_map,
    final_schema,
)
from binlake.gold_types import spark_type
from binlake.schema_history import (
    Coordinates,
    DdlStatement,
    SchemaVersion,
    TableSchema,
    build_history,
    is_table_ddl,
    split_dump,
)
from binlake.sql_text import source_predicate, sql_identifier, sql_string
from binlake.tables import gold_table, gold_table_name
from spark_jobs.ingest import ensure_table, table_path, write_replace
from spark_jobs.schemas import spec

_META_DDL = ("_source STRING NOT NULL, _op STRING, _gtid STRING, _commit_time TIMESTAMP, "
             "_binlog_file STRING, _binlog_pos BIGINT, _binlog_payload_index INT, "
             "_binlog_row_index INT")
_HISTORY_TYPES = ("STRING NOT NULL", "STRING", "STRING", "TIMESTAMP", "STRING", "BIGINT", "INT", "INT",
                  "TIMESTAMP", "STRING", "STRING", "BIGINT", "INT", "INT", "STRING", "BOOLEAN NOT NULL")
HISTORY_SUFFIX = "__history"
#: the per-source gold tables' source column: a union table's partition column and first key column
SOURCE_COLUMN = "_source"
#: write modes of a gold table / a union part that mean "written by this run" (an asset event each)
WRITTEN_MODES = frozenset({"merge", "overwrite"})
UNION_WRITTEN_MODES = frozenset({"union", "removed"})


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


def gold_location(cfg: Any, name: str) -> str:
    """Location (as Spark spells it) of the gold table ``gold.<name>``."""
    return table_path(cfg, gold_table(name).full_name)


def _silver(spark: Any, cfg: Any, full_name: str) -> Any:
    return spark.read.format("delta").load(table_path(cfg, full_name))


def _is_delta(spark: Any, path: str) -> bool:
    from delta.tables import DeltaTable

    return bool(DeltaTable.isDeltaTable(spark, path))


def _coords(row: Any, row_index: int = -1) -> Coordinates:
    payload = row["payload_index"]
    return Coordinates(row["file_seq"] or 0, row["pos"], -1 if payload is None else payload,
                       row_index, row["file"])


# ------------------------------------------------------------------ schema history

def load_ddl(spark: Any, cfg: Any, source: str) -> list[DdlStatement]:
    """The source's table DDL from silver.statements (small: collected on the driver)."""
    from pyspark.sql import functions as F

    rows = (_silver(spark, cfg, "silver.statements")
            .where((F.col("source") == source) & (F.col("kind") == "DDL")
                   & (F.coalesce(F.col("error_code"), F.lit(0)) == 0))
            .select("file", "file_seq", "pos", "payload_index", "db", "sql", "gtid").collect())
    return [DdlStatement(_coords(r), r["db"], r["sql"], r["gtid"]) for r in rows
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
    df = spark.createDataFrame(rows, spec(full_name).schema)
    write_replace(df, table_path(cfg, full_name), source_predicate(source), s3=cfg.s3, run_id=run_id, job=job,
                  txn_app=f"binlake-{job}:{source}:{run_id}", extra_meta={"source": source})


# ------------------------------------------------------------------ per-table replay

def _stream(spark: Any, cfg: Any, source: str, db: str, table: str) -> Any:
    """TABLE_MAPs and row changes of one table as one DataFrame, sorted on one partition."""
    from pyspark.sql import functions as F

    def same_table(df: Any) -> Any:
        return df.where((F.col("source") == source) & (F.col("db") == db) & (F.col("table_name") == table))

    maps = (same_table(_silver(spark, cfg, "bronze.events")).where(F.col("event_type") == "TABLE_MAP")
            .select("file", "file_seq", "pos", "payload_index", F.lit(-1).alias("row_index"),
                    F.lit("table_map").alias("kind"), "fields", F.lit(None).cast("string").alias("operation"),
                    F.lit(None).cast("string").alias("before_json"),
                    F.lit(None).cast("string").alias("after_json"), "gtid",
                    F.lit(None).cast("timestamp").alias("commit_time")))
    rows = (same_table(_silver(spark, cfg, "silver.row_changes"))
            .select("file", "file_seq", "pos", "payload_index", "row_index", F.lit("row").alias("kind"),
                    F.lit(None).cast("string").alias("fields"), "operation", "before_json",
                    "after_json", "gtid", "commit_time"))
    order = [F.coalesce("file_seq", F.lit(0)), "file", "pos", F.coalesce("payload_index", F.lit(-1)),
             "row_index"]
    return maps.unionByName(rows).repartition(1).sortWithinPartitions(*order)


def _replay_partition(source: str, versions: list[SchemaVersion], final: TableSchema,
                      history: bool = False, seed: SeedTable | None = None,
                      position: SnapshotPosition | None = None) -> Any:
    def run(rows: Iterator[Any]) -> Iterator[tuple[str, Any]]:
        replayer = TableReplayer(source, versions, final, history, position)
        if seed is not None:
            replayer.seed(seed)
        for r in rows:
            replayer.feed(StreamItem(_coords(r, r["row_index"]), r["kind"], r["fields"], r["operation"],
                                     r["before_json"], r["after_json"], r["gtid"], r["commit_time"]))
        replayer.feed_all(())
        for out in replayer.rows():
            yield "row", out
        for version in replayer.history_rows():
            yield "history", version
        yield "changes", replayer.report.changes
        if replayer.report.in_snapshot:
            yield "warning", ("row changes already in the seed snapshot (skipped)", replayer.report.in_snapshot)
        yield "last", replayer.report.last
        for text, count in replayer.report.warnings.items():
            yield "warning", (text, count)
    return run


def gold_schema_ddl(final: TableSchema) -> str:
    """The gold table's Spark schema (DDL text): source columns, then the _meta columns."""
    cols = [f"{sql_identifier(c.name)} {spark_type(c)}" for c in final.columns]
    extra = [] if final.primary_key else [f"{COPIES_COLUMN} BIGINT NOT NULL"]
    return ", ".join([*cols, _META_DDL, *extra])


def history_schema_ddl(final: TableSchema) -> str:
    """``gold.<name>__history``'s Spark schema: source columns, then :data:`HISTORY_COLUMNS`."""
    cols = [f"{sql_identifier(c.name)} {spark_type(c)}" for c in final.columns]
    return ", ".join([*cols, *(f"{n} {t}" for n, t in zip(HISTORY_COLUMNS, _HISTORY_TYPES))])


def _write_history(spark: Any, out: Any, final: TableSchema, path: str, run_id: str) -> int:
    """Overwrite the SCD2 table with every version the replay made (one atomic Delta commit: the
    replay is a function of silver, so a re-run or backfill rewrites the same versions)."""
    df = spark.createDataFrame(out.filter(lambda kv: kv[0] == "history").map(lambda kv: kv[1]),
                               history_schema_ddl(final))
    (df.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
       .option("userMetadata", json.dumps({"job": "gold-history", "run_id": run_id})).save(path))
    return int(spark.read.format("delta").load(path).count())


def _best_table_map(spark: Any, cfg: Any, source: str, db: str, table: str) -> dict[str, Any] | None:
    """The table's best-informed TABLE_MAP (``gold_state.best_table_map``) from bronze.events."""
    from pyspark.sql import functions as F

    seen = (_silver(spark, cfg, "bronze.events")
            .where((F.col("source") == source) & (F.col("db") == db) & (F.col("table_name") == table)
                   & (F.col("event_type") == "TABLE_MAP"))
            .groupBy("fields")
            .agg(F.max(F.struct(F.coalesce("file_seq", F.lit(0)).alias("s"), "file", "pos")).alias("at"))
            .collect())
    return best_table_map([(Coordinates(r["at"]["s"], r["at"]["pos"], file=r["at"]["file"]),
                            json.loads(r["fields"])) for r in seen])


def _write_gold(spark: Any, df: Any, path: str, final: TableSchema, run_id: str) -> str:
    """MERGE when the schema is unchanged (and the table has a key), else overwrite."""
    from delta.tables import DeltaTable

    meta = json.dumps({"job": "gold", "run_id": run_id})
    if final.primary_key and _is_delta(spark, path):
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


def build_table(spark: Any, cfg: Any, source: str, db: str, table: str,
                versions: list[SchemaVersion], run_id: str, fingerprint: str | None = None,
                history: bool = False, snapshot: Snapshot | None = None) -> GoldTableResult:
    """Replay one table and write its gold table (and its ``__history`` table when asked)."""
    name = gold_table_name(source, db, table)
    path = gold_location(cfg, name)
    known = final_schema(versions, None)
    final = known or final_schema(versions, _best_table_map(spark, cfg, source, db, table))
    if final is None:
        return GoldTableResult(name, db, table, path, 0, 0, "dropped",
                               (("table dropped or unknown", 1),), None, fingerprint)
    schema_ddl = gold_schema_ddl(final)
    out = _stream(spark, cfg, source, db, table).rdd.mapPartitions(
        _replay_partition(source, versions, final, history, snapshot.rows_of(db, table) if snapshot else None,
                          snapshot.position if snapshot else None)).cache()
    history_rows = None
    try:
        data = out.filter(lambda kv: kv[0] == "row").map(lambda kv: kv[1])
        df = spark.createDataFrame(data, schema_ddl)
        mode = _write_gold(spark, df, path, final, run_id)
        if history:
            history_rows = _write_history(spark, out, final, gold_location(cfg, name + HISTORY_SUFFIX), run_id)
        side = out.filter(lambda kv: kv[0] not in ("row", "history")).collect()
    finally:
        out.unpersist()
    warnings: Counter[str] = Counter()
    changes, last = 0, None
    for kind, value in side:
        if kind == "changes":
            changes += value
        elif kind == "last":
            last = None if value is None else (value[4], value[5], value[2], value[3])
        else:
            warnings[value[0]] += value[1]
    rows = spark.read.format("delta").load(path).count()
    return GoldTableResult(name, db, table, path, rows, changes, mode, tuple(sorted(warnings.items())),
                           last, fingerprint, history_rows)


# ------------------------------------------------------------------ status

def _gap_since(spark: Any, cfg: Any, source: str) -> tuple[bool | None, str | None]:
    """(complete, first GAP file) from meta.gtid_reconciliation; (None, None) if not reconciled."""
    from pyspark.sql import functions as F

    path = table_path(cfg, "meta.gtid_reconciliation")
    if not _is_delta(spark, path):
        return None, None
    gaps = (spark.read.format("delta").load(path)
            .where((F.col("source") == source) & F.col("status").isin("GAP", "CHAIN_BREAK"))
            .orderBy("chain_index").select("file").first())
    return (gaps is None), (None if gaps is None else gaps["file"])


def _archive_gtids(spark: Any, cfg: Any, source: str) -> str | None:
    from pyspark.sql import functions as F

    path = table_path(cfg, "meta.gtid_coverage")
    if not _is_delta(spark, path):
        return None
    sets = [r["gtid_set"] for r in spark.read.format("delta").load(path)
            .where(F.col("source") == source).orderBy("sid", "tag", "gno_start").collect()]
    return ",".join(sets) or None


def write_status(spark: Any, cfg: Any, source: str, results: list[GoldTableResult],
                 history: list[SchemaVersion], seeded: bool, run_id: str,
                 unions: tuple[GoldUnionResult, ...] = ()) -> None:
    """Replace the source's rows of meta.gold_status: one per gold table, history table and union
    part (a union table has one row per source: its rows there, and what they were copied at)."""
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
        rows.append((source, r.name, r.db, r.table, r.location, r.rows, r.changes, *shared, *tail))
        if r.history_rows is not None:  # the status row is the history table's catalog entry too
            name = r.name + HISTORY_SUFFIX
            rows.append((source, name, r.db, r.table, gold_location(cfg, name), r.history_rows, r.changes,
                         *shared, *tail))
        for u in unions:
            if (u.db, u.table) == (r.db, r.table):
                rows.append((source, u.name, u.db, u.table, u.location, u.rows, r.changes, *shared,
                             u.write_mode, u.error and json.dumps({u.error: 1}), u.fingerprint, run_id, now))
    _replace_source(spark, cfg, "meta.gold_status", rows, source, run_id)


# ------------------------------------------------------------------ union tables (a fleet of shards)

def _check_union_schema(spark: Any, path: str, df: Any, union: str, source: str) -> None:
    """Refuse a part whose column types differ from the union table's (Delta's own error does not
    say which column); added or missing columns are fine: ``mergeSchema`` adds them, NULL elsewhere."""
    if not _is_delta(spark, path):
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
    job write, a first-time creation race is retried (:mod:`spark_jobs.delta_retry`), and a
    retried task whose commit landed is skipped by Delta (``txnAppId``).
    """
    from binlake.leases import table_commit_lock
    from spark_jobs.delta_retry import with_conflict_retry

    path = gold_location(cfg, union)
    _check_union_schema(spark, path, df, union, source)
    meta = json.dumps({"job": "gold-union", "run_id": run_id, "source": source}, sort_keys=True)

    def write() -> None:
        (df.write.format("delta").mode("overwrite").partitionBy(SOURCE_COLUMN)
            .option("replaceWhere", f"{SOURCE_COLUMN} = {sql_string(source)}")
            .option("mergeSchema", "true")
            .option("txnAppId", f"binlake-gold-union:{union}:{source}:{run_id}").option("txnVersion", "0")
            .option("userMetadata", meta).save(path))

    with table_commit_lock(path, cfg.s3):
        with_conflict_retry(write, f"gold union write to {path}")


def _remove_union_rows(spark: Any, cfg: Any, union: str, source: str, run_id: str) -> None:
    path = gold_location(cfg, union)
    empty = spark.read.format("delta").load(path).limit(0)
    replace_union_rows(spark, cfg, union, source, empty, run_id)


def _union_part(spark: Any, cfg: Any, source: str, union: str, table: GoldTableResult, before: Any,
                run_id: str) -> GoldUnionResult:
    """Bring the source's part of ``gold.<union>`` to its gold table ``table`` (skipped when it was
    copied at the same input fingerprint and the table is unchanged)."""
    path = gold_location(cfg, union)
    exists = _is_delta(spark, path)
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
            if "__" not in name and name not in kept and _is_delta(spark, gold_location(cfg, name)):
                _remove_union_rows(spark, cfg, name, source, run_id)
                left.append(name)
    return parts, tuple(left)


# ------------------------------------------------------------------ skipping unchanged tables

def input_fingerprints(spark: Any, cfg: Any, source: str, history: list[SchemaVersion]
                       ) -> dict[tuple[str, str], str]:
    """Per table: a digest of its silver row changes (count + order-free hash sum, one
    aggregate over the source) and of its schema versions. Equal digest = same replay result."""
    from pyspark.sql import functions as F

    digest = F.xxhash64("file", "pos", "payload_index", "row_index", "operation",
                        "before_json", "after_json")
    agg = (_silver(spark, cfg, "silver.row_changes").where(F.col("source") == source)
           .groupBy("db", "table_name")
           .agg(F.count(F.lit(1)).alias("n"), F.sum(digest.cast("decimal(38,0)")).alias("h"))
           .collect())
    out = {}
    for r in agg:
        key = (r["db"], r["table_name"])
        schema_rows = [row for row in _history_rows(source, history) if (row[1], row[2]) == key]
        schema_digest = hashlib.sha1(json.dumps(schema_rows, default=str).encode()).hexdigest()[:16]
        out[key] = f"{r['n']}:{r['h']}:{schema_digest}"
    return out


def _previous_status(spark: Any, cfg: Any, source: str) -> dict[str, Any]:
    from pyspark.sql import functions as F

    path = table_path(cfg, "meta.gold_status")
    if not _is_delta(spark, path):
        return {}
    df = spark.read.format("delta").load(path)
    if "input_fingerprint" not in df.columns:
        return {}
    return {r["gold_table"]: r for r in df.where(F.col("source") == source).collect()}


def _unchanged(previous: Any, history: Any | None) -> GoldTableResult:
    warnings = tuple(sorted(json.loads(previous["warnings"]).items())) if previous["warnings"] else ()
    last = (previous["last_file"], previous["last_pos"], previous["last_gtid"],
            previous["last_commit_time"])
    return GoldTableResult(previous["gold_table"], previous["db"], previous["table_name"],
                           previous["location"], previous["rows"], previous["changes"], "unchanged",
                           warnings, last, previous["input_fingerprint"],
                           None if history is None else history["rows"])


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
    if before is None or before["input_fingerprint"] != fingerprint or not _is_delta(spark, before["location"]):
        return False
    return keep_history == (before_history is not None and _is_delta(spark, before_history["location"]))


def run_gold(spark: Any, cfg: Any, source: str, run_id: str, *,
             initial_schema_sql: str | None = None,
             only_tables: frozenset[tuple[str, str]] | None = None,
             force: bool = False, seed_dump: str | None = None) -> GoldResult:
    """Build (or bring up to date) every gold table of ``source`` from silver; see module doc.

    ``initial_schema_sql``: ``SHOW CREATE TABLE`` texts for tables created before the archive.
    ``seed_dump``: a dump taken at a GTID position (``binlake.gold_seed``; default: the
    ``[gold] seed_dumps`` file of the source): its tables start from its rows, and only
    changes (and DDL) whose GTID is not in its position apply.
    ``force``: replay every table even when its inputs are unchanged since the last run.
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
    fingerprints = input_fingerprints(spark, cfg, source, history)
    seeded_tables = {(t.db, t.table) for t in snapshot.tables} if snapshot else set()
    previous = _previous_status(spark, cfg, source)
    results = []
    for db, table in sorted(set(fingerprints) | seeded_tables):
        if only_tables is not None and (db, table) not in only_tables:
            continue
        name = gold_table_name(source, db, table)
        keep_history = cfg.gold.keeps_history(db, table)
        fingerprint = fingerprints.get((db, table), "no changes") + (f":seed {snapshot.digest()}" if snapshot else "")
        before, before_history = previous.get(name), previous.get(name + HISTORY_SUFFIX)
        if not force and _is_current(spark, before, before_history, fingerprint, keep_history):
            results.append(_unchanged(before, before_history))
            continue
        versions = [v for v in history if (v.db, v.table) == (db, table)]
        results.append(build_table(spark, cfg, source, db, table, versions, run_id, fingerprint,
                                   keep_history, snapshot))
    unions, left = update_unions(spark, cfg, source, results, previous, run_id, every_table=only_tables is None)
    write_status(spark, cfg, source, results, history, bool(seeds), run_id, unions)
    failed = [u.error for u in unions if u.error]
    if failed:
        raise GoldUnionError("\n".join(failed))
    return GoldResult(source, run_id, tuple(results), len(history), time.time() - t0, unions, left)
