"""Gold's incremental path: a table's new changes replayed on just the rows they touch, MERGEd back.

Why it is exact (docs/gold.md, "Incremental replay"): ``binlake.gold.plan`` has proven that the gold
table holds the replay of every change up to W (the status row's ``replayed_through``) and that
silver's part up to W is unchanged, so the full replay would be that state followed by the changes
after W. Those changes read and write only the keys ``TableReplayer.keys_touched_by`` names; every
other row stays as the gold table holds it. So:

1. pass 1 (one executor): the stream after W, plus the last TABLE_MAP at or before it, gives the
   touched keys;
2. the gold table's rows of those keys are read back exactly (TIMESTAMP as microseconds, BINARY as
   bytes: the replay's own values) and collected on the driver (a night's worth, not the table);
3. pass 2 (one executor): a replayer resumed from those rows is fed the changes after W; its rows
   and the touched keys it no longer holds are the MERGE source: one Delta commit updates, inserts
   and deletes just those keys (and the ``__history`` table's versions of them).

A committed MERGE is never applied twice: the plan requires the table at the Delta version its
status row recorded, and the status row is written after the MERGE.
"""

from __future__ import annotations

import datetime as _dt
import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from binlake.gold.errors import ConversionError
from binlake.gold.plan import stream_order
from binlake.gold.schema_history import Coordinates, SchemaVersion, TableSchema
from binlake.gold.seed import SnapshotPosition
from binlake.gold.state import META_COLUMNS, StreamItem, TableReplayer
from binlake.gold.types import spark_type
from binlake.lake.sql_text import sql_identifier, sql_string
from spark_jobs.gold.tables import (
    HISTORY_START,
    coordinates_literal,
    gold_schema_ddl,
    history_schema_ddl,
    merge_into,
    sorted_stream,
    stream_coordinates,
    stream_item,
    table_stream,
    table_version,
)
from spark_jobs.session import map_partitions_tagged, tagged_frame, tagged_values

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, Row, SparkSession

    from binlake.config import BinlakeConfig

#: the MERGE source's flag column: the touched key is no longer held (delete it)
GONE = "_binlake_gone"
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


@dataclass(frozen=True)
class TableJob:
    """What the incremental replay of one table needs (pure values; shipped to the executor)."""

    source: str
    versions: tuple[SchemaVersion, ...]
    final: TableSchema
    through: Coordinates
    history: bool = False
    position: SnapshotPosition | None = None

    def replayer(self) -> TableReplayer:
        return TableReplayer(self.source, self.versions, self.final, self.history, self.position)


@dataclass
class Outcome:
    """What the incremental replay of a table did (new changes only; the caller adds the earlier counts)."""

    changes: int
    replayed: int
    warnings: Counter[str]
    last: tuple[Any, ...] | None  # META_COLUMNS of the latest change applied (None: none applied)
    through: Coordinates
    fetched: int  # gold rows read back: the rows the new changes touch
    keys: DataFrame | None = field(default=None, repr=False)  # the touched keys (a cached DataFrame), for the union MERGEs


def new_stream(spark: SparkSession, cfg: BinlakeConfig, source: str, db: str, table: str, through: Coordinates
               ) -> DataFrame:
    """The table's TABLE_MAPs and row changes after ``through``, and the last TABLE_MAP at or before
    it (a row change's TABLE_MAP is in its transaction, so in ``through``'s file), sorted on one
    partition. ``file_seq >= through's`` lets Delta skip older files' data by their statistics."""
    from pyspark.sql import functions as F

    maps, rows = table_stream(spark, cfg, source, db, table)
    recent = (F.col("file_seq") >= through.file_seq) | F.col("file_seq").isNull()
    after = stream_coordinates() > coordinates_literal(through)
    context = (maps.where(recent & (F.col("file") == through.file) & ~after)
               .orderBy(stream_coordinates().desc()).limit(1))
    return sorted_stream(context.unionByName(maps.where(recent & after)).unionByName(rows.where(recent & after)))


def _resumed(job: TableJob, rows: Iterable[Row], held: Sequence[Sequence[Any]]) -> tuple[TableReplayer, Iterator[StreamItem]]:
    """A replayer resumed from ``held`` (the stream's leading TABLE_MAP at or before W is its
    context) and the stream's items after W."""
    items = (stream_item(r) for r in rows)
    context: list[StreamItem] = []
    first: list[StreamItem] = []
    mark = stream_order(job.through)
    for item in items:
        if stream_order(item.at) <= mark:
            context.append(item)
        else:
            first.append(item)
            break
    replayer = job.replayer()
    replayer.resume(context, held)
    return replayer, itertools.chain(first, items)


def _keys_partition(job: TableJob) -> Callable[[Iterable[Row]], Iterator[tuple[str, Any]]]:
    """Pass 1: ``("key", key)`` for every key the new changes may touch, or ``("abort", why)``."""
    def run(rows: Iterable[Row]) -> Iterator[tuple[str, Any]]:
        try:
            replayer, items = _resumed(job, rows, ())
        except ConversionError as exc:
            yield "abort", str(exc)
            return
        seen: set[tuple[Any, ...]] = set()
        for item in items:
            if item.kind == "table_map":
                replayer.feed(item)
                continue
            for key in replayer.keys_touched_by(item):
                if key not in seen:
                    seen.add(key)
                    yield "key", key
    return run


def _merge_partition(job: TableJob, held: Sequence[tuple[Any, ...]]
                     ) -> Callable[[Iterable[Row]], Iterator[tuple[str, Any]]]:
    """Pass 2: the resumed replay of the new changes; ``("row", …)`` for every row it holds,
    ``("gone", key)`` for touched keys it no longer holds, its history versions and side facts.
    ``held`` (the touched keys' gold rows, a night's worth) travels pickled with the function: a
    Spark Connect client has no ``sparkContext.broadcast``."""
    def run(rows: Iterable[Row]) -> Iterator[tuple[str, Any]]:
        replayer, items = _resumed(job, rows, held)
        replayer.touched = set()
        fed, through = 0, job.through
        for item in items:
            fed += item.kind == "row"
            replayer.feed(item)
            through = item.at
        replayer.feed_all(())
        for out in replayer.rows():
            yield "row", out
        for key in replayer.touched - replayer.held_keys():
            yield "gone", key
        for version in replayer.history_rows():
            yield "history", version
        report = replayer.report
        yield "side", (report.changes, fed, report.last, through, dict(report.warnings), report.in_snapshot)
    return run


def _key_ddl(final: TableSchema) -> str:
    by_name = {c.name: c for c in final.columns}
    return ", ".join(f"{sql_identifier(k)} {spark_type(by_name[k])}" for k in final.primary_key)


def _null_safe_on(keys: Sequence[str], left: str, right: str) -> str:
    return " AND ".join(f"{left}.{sql_identifier(k)} <=> {right}.{sql_identifier(k)}" for k in keys)


#: key types whose min / max can be spelled as ``CAST('<text>' AS <type>)`` exactly
_RANGE_TYPES = ("TINYINT", "SMALLINT", "INT", "BIGINT", "DECIMAL", "STRING", "DATE")


def key_range(keys: DataFrame, alias: str) -> str:
    """A predicate on the first key column of the target (``alias``): between the touched
    ``keys``' least and greatest values. Not needed for correctness (every key the MERGE source
    holds is among ``keys``) — it lets Delta skip, by their column statistics, the files that hold
    none of the keys (the table's old rows, when the changes insert new keys); "true" when the
    type or a NULL key rules it out."""
    from pyspark.sql import functions as F

    first = keys.schema.fields[0]
    kind = first.dataType.simpleString().upper()
    if not kind.startswith(_RANGE_TYPES):
        return "true"
    name = sql_identifier(first.name)
    bounds = keys.agg(F.min(name), F.max(name), F.sum(F.col(name).isNull().cast("int"))).first()
    assert bounds is not None  # an aggregate without grouping is one row
    low, high, nulls = bounds
    if low is None or nulls:
        return "true"
    return (f"{alias}.{name} >= CAST({sql_string(str(low))} AS {kind}) AND "
            f"{alias}.{name} <= CAST({sql_string(str(high))} AS {kind})")


def fetch_rows(spark: SparkSession, path: str, final: TableSchema, keys: DataFrame, within: str = "true"
               ) -> list[tuple[Any, ...]]:
    """The gold table's rows of ``keys`` (``within``: :func:`key_range` on alias ``t``, for file
    skipping) in the replayer's own values: TIMESTAMP read as
    microseconds since the epoch and made aware UTC (PySpark would give naive local time, ambiguous
    in a DST fold), BINARY as ``bytes``; every other type reads back as the replay wrote it."""
    from pyspark.sql import functions as F

    names = [c.name for c in final.columns] + list(META_COLUMNS)
    stamps = {c.name for c in final.columns if spark_type(c) == "TIMESTAMP"} | {"_commit_time"}
    gold = spark.read.format("delta").load(path).alias("t").where(F.expr(within))
    touched = gold.join(keys.alias("k"), F.expr(_null_safe_on(final.primary_key, "t", "k")), "left_semi")
    exact = [F.unix_micros(F.col(sql_identifier(n))).alias(n) if n in stamps else F.col(sql_identifier(n))
             for n in names]
    positions = [i for i, n in enumerate(names) if n in stamps]
    out = []
    for row in touched.select(*exact).collect():
        values: list[Any] = [bytes(v) if isinstance(v, bytearray) else v for v in row]
        for i in positions:
            if values[i] is not None:
                values[i] = _EPOCH + _dt.timedelta(microseconds=values[i])
        out.append(tuple(values))
    return out


def _merge_source(spark: SparkSession, out: DataFrame, final: TableSchema, source: str) -> DataFrame:
    """The MERGE source: held rows (``GONE`` false) and touched keys no longer held (``GONE`` true,
    their other columns NULL)."""
    names = [c.name for c in final.columns]
    width = len(names) + len(META_COLUMNS)
    key_at = [names.index(k) for k in final.primary_key]
    source_at = len(names)  # _source: NOT NULL in the gold schema

    def as_row(kv: tuple[str, Any]) -> tuple[Any, ...]:
        kind, value = kv
        if kind == "row":
            return (*value, False)
        row: list[Any] = [None] * width
        for i, v in zip(key_at, value):
            row[i] = v
        row[source_at] = source
        return (*row, True)

    return tagged_frame(spark, out, ("row", "gone"), gold_schema_ddl(final) + f", {GONE} BOOLEAN", as_row)


def merge_rows(spark: SparkSession, path: str, src: DataFrame, on: str, columns: Sequence[str], *,
               gone: bool, run_id: str, job: str) -> None:
    """One Delta MERGE of ``src`` into the table at ``path`` on ``on``: rows whose values differ
    updated, new ones inserted, and (``gone``) the rows flagged ``GONE`` deleted. Never deletes
    unmatched target rows: the source holds only the touched keys."""
    changed = "NOT (" + " AND ".join(f"t.{sql_identifier(c)} <=> s.{sql_identifier(c)}" for c in columns) + ")"
    names = [sql_identifier(c) for c in columns]
    keep = f"NOT s.{GONE}" if gone else "true"
    clauses = [f"WHEN MATCHED AND s.{GONE} THEN DELETE"] if gone else []
    clauses += [f"WHEN MATCHED AND {keep} AND {changed} THEN UPDATE SET " + ", ".join(f"{n} = s.{n}" for n in names),
                f"WHEN NOT MATCHED AND {keep} THEN INSERT ({', '.join(names)}) VALUES "
                f"({', '.join(f's.{n}' for n in names)})"]
    merge_into(spark, path, src, on, " ".join(clauses), job=job, run_id=run_id)


def _merge_history(spark: SparkSession, out: DataFrame, final: TableSchema, within: str, path: str,
                   run_id: str) -> None:
    """The touched rows' versions into ``__history``: keyed by (primary key, where the version
    starts); versions are never deleted, an ended one is updated (its ``_valid_to*``)."""
    df = tagged_frame(spark, out, ("history",), history_schema_ddl(final))
    on = _null_safe_on([*final.primary_key, *HISTORY_START], "t", "s") + " AND " + within
    merge_rows(spark, path, df, on, df.columns, gone=False, run_id=run_id, job="gold-history")


def touched_keys(spark: SparkSession, stream: DataFrame, job: TableJob) -> DataFrame | str:
    """Pass 1 as a cached DataFrame of keys (typed as the gold table's key columns), or the reason
    the table cannot be resumed (a string)."""
    from pyspark.sql import functions as F

    out = map_partitions_tagged(stream, _keys_partition(job)).cache()
    aborted = tagged_values(out.where(F.col("kind") == "abort").limit(1), "abort")
    if aborted:
        out.unpersist()
        return f"cannot resume the replay: {aborted[0][1]}"
    keys = tagged_frame(spark, out, ("key",), _key_ddl(job.final)).cache()
    keys.count()
    out.unpersist()
    return keys


def replay_new(spark: SparkSession, cfg: BinlakeConfig, job: TableJob, names: tuple[str, str, str], paths: tuple[str, str | None],
               run_id: str) -> Outcome | str:
    """Bring one gold table (and its ``__history`` table, ``paths[1]``) up to date with the changes
    after ``job.through``: see the module doc. ``names`` = (source, db, table). A string result
    says why the table must be replayed in full instead (nothing was written then)."""

    source, db, table = names
    path, history_path = paths
    stream = new_stream(spark, cfg, source, db, table, job.through).cache()
    try:
        keys = touched_keys(spark, stream, job)
        if isinstance(keys, str):
            return keys
        within = key_range(keys, "t")
        held = fetch_rows(spark, path, job.final, keys, within)
        out = map_partitions_tagged(stream, _merge_partition(job, held)).cache()
        try:
            src = _merge_source(spark, out, job.final, source)
            on = _null_safe_on(job.final.primary_key, "t", "s") + " AND " + within
            merge_rows(spark, path, src, on, [c for c in src.columns if c != GONE], gone=True, run_id=run_id,
                       job="gold")
            if history_path is not None:
                _merge_history(spark, out, job.final, within, history_path, run_id)
            side = [value for _kind, value in tagged_values(out, "side")]
        finally:
            out.unpersist()
    finally:
        stream.unpersist()
    changes, fed, last, through, warnings, in_snapshot = side[0]
    counts = Counter(warnings)
    if in_snapshot:
        counts["row changes already in the seed snapshot (skipped)"] += in_snapshot
    return Outcome(changes, fed, counts, last, through, len(held), keys)


def merge_union_part(spark: SparkSession, union_path: str, gold_path: str, source: str, keys: DataFrame,
                     run_id: str) -> None:
    """The source's rows of a union table brought to its gold table for the touched ``keys`` only
    (the rest of its part equals the gold table already): the gold rows of those keys upserted, the
    keys the gold table no longer holds deleted; the condition names the source's ``_source``
    partition, so other sources' concurrent writes do not conflict with it."""
    from pyspark.sql import functions as F

    gold = spark.read.format("delta").load(gold_path)
    names, key = gold.columns, keys.columns  # the touched keys' columns are the primary key
    src = (keys.alias("k").join(gold.alias("g"), F.expr(_null_safe_on(key, "k", "g")), "left")
           .select(*[F.col(f"k.{sql_identifier(n)}" if n in key else f"g.{sql_identifier(n)}").alias(n)
                     for n in names], F.col("g._source").isNull().alias(GONE)))
    on = f"t._source = {sql_string(source)} AND " + _null_safe_on(key, "t", "s") + " AND " + key_range(keys, "t")
    merge_rows(spark, union_path, src, on, names, gone=True, run_id=run_id,
               job="gold-union")


def versions_after(cfg: BinlakeConfig, path: str, history_path: str | None) -> tuple[int | None, int | None]:
    """The gold and ``__history`` tables' Delta versions after a write (recorded in the status)."""
    return table_version(cfg, path), None if history_path is None else table_version(cfg, history_path)
