"""Gold's input fingerprints: per table, how many row changes silver holds and their order-free hash
sum, split at the table's W (the last change its gold table includes).

Why a module of its own: the fingerprints decide what a gold run does (skip, incremental, full), and
computing them must not cost a scan of the whole archive every night. The hash sum is additive, so:

* after a gold run that saw every table of the source at ``silver.row_changes`` version V0 (its
  ``meta.gold_status.silver_version``), if no data file of the source's partition was removed since
  (no file re-ingested, no compaction), silver now holds exactly V0's rows plus the rows of the data
  files added since: each table's fingerprint is its status row's plus an aggregate over **the added
  files only** (a night's rows, read as the Parquet files they are when the table needs no Delta
  reader feature); an added row at or before a table's W is a backfill (the old part changed);
* otherwise one aggregate over the source's whole partition.

Either aggregate runs in this process (``binlake.gold.fingerprints``, the same numbers) when it
covers at most ``IN_PROCESS_ROWS`` row changes, else as a Spark job.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from binlake.gold.fingerprints import IN_PROCESS_ROWS, Counts, count_files, rows_in
from binlake.gold.plan import TableInputs, fingerprint
from binlake.gold.schema_history import Coordinates
from binlake.lake.tables import table_location
from spark_jobs.gold.tables import read_silver, stream_coordinates
from spark_jobs.lake import table_path

if TYPE_CHECKING:  # pragma: no cover
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame, SparkSession

    from binlake.config import BinlakeConfig
    from spark_jobs.session import SparkSource

TableKey = tuple[str, str]


@dataclass(frozen=True)
class Base:
    """What the previous run's status rows say: silver's version then, and per table its counts
    (all at or before its W) and W."""

    version: int
    counts: dict[TableKey, Counts]
    marks: dict[TableKey, Coordinates]


def aggregate(spark: SparkSession, df: DataFrame, marks: dict[TableKey, Coordinates]) -> dict[TableKey, Counts]:
    """Per table of ``df`` (row changes): count and hash sum, and split at its mark W."""
    from pyspark.sql import functions as F

    digest = F.xxhash64("file", "pos", "payload_index", "row_index", "operation",
                        "before", "after").cast("decimal(38,0)")
    coords = stream_coordinates()
    old = F.lit(None).cast("boolean")
    if marks:
        rows = [(db, t, at.file_seq, at.file, at.pos, at.payload_index, at.row_index) for (db, t), at in marks.items()]
        df = df.join(F.broadcast(spark.createDataFrame(
            rows, "db STRING, table_name STRING, s BIGINT, f STRING, p BIGINT, i INT, r INT")), ["db", "table_name"], "left")
        old = coords <= F.when(F.col("s").isNotNull(), F.struct("s", "f", "p", "i", "r"))
    out = {}
    for r in (df.groupBy("db", "table_name")
              .agg(F.count(F.lit(1)).alias("n"), F.sum(digest).alias("h"),
                   F.sum(F.when(old, 1).otherwise(0)).alias("n_old"), F.sum(F.when(old, digest)).alias("h_old"),
                   F.min(F.when(~old, coords)).alias("first_new"))
              .collect()):
        first = r["first_new"]
        out[(r["db"], r["table_name"])] = Counts(
            r["n"], r["h"] or Decimal(0), r["n_old"], r["h_old"] or Decimal(0),
            None if first is None else Coordinates(first["s"], first["p"], first["i"], first["r"], first["f"]))
    return out


def added_files(cfg: BinlakeConfig, source: str, since: int | None
                ) -> tuple[DeltaTable | None, int | None, list[str] | None]:
    """``silver.row_changes`` (delta-rs, at its version now), that version, and the data files of the
    source's partition added since version ``since`` (paths as the log spells them). None instead
    of the files when the rows at ``since`` may not all be there any more (a file of the partition
    removed: a re-ingested file, a compaction), ``since`` is unknown or gone from the log, or the
    data files are not plain Parquet (a reader feature such as deletion vectors or column mapping:
    reader protocol > 1)."""
    from deltalake.exceptions import DeltaError

    from binlake.lake.delta_tables import add_actions, open_delta_table

    location = table_location(cfg.warehouse, "silver.row_changes")
    table = open_delta_table(location, cfg.s3)
    if table is None:
        return None, None, None
    now = int(table.version())
    if since is None or since > now or table.protocol().min_reader_version > 1:
        return table, now, None

    def mine(t: DeltaTable) -> set[str]:
        actions = add_actions(t)
        return {p for p, s in zip(actions["path"], actions.get("partition.source", [])) if s == source}

    current = mine(table)
    try:
        table.load_as_version(since)
    except DeltaError:
        table.load_as_version(now)
        return table, now, None  # that version's log was cleaned up
    before = mine(table)
    table.load_as_version(now)
    if before - current:
        return table, now, None
    return table, now, sorted(current - before)


def counts_of(spark: SparkSource, cfg: BinlakeConfig, table: DeltaTable | None, version: int | None, source: str,
              files: list[str] | None, marks: dict[TableKey, Coordinates]) -> tuple[dict[TableKey, Counts], str]:
    """The source's row changes aggregated (``files``: only those data files, else its whole
    partition at ``version``), and where: in this process when they are few and plain Parquet
    (``binlake.gold.fingerprints``), else by Spark."""
    from pyspark.sql import functions as F

    from spark_jobs.session import session_of

    if table is not None and table.protocol().min_reader_version == 1:
        rows = rows_in(table, source, files)
        if rows is not None and rows <= IN_PROCESS_ROWS:
            return count_files(table, source, files, marks), "in process"
    spark = session_of(spark)
    if files is not None:
        root = table_path(cfg, "silver.row_changes").rstrip("/")
        df = spark.read.parquet(*(f"{root}/{urllib.parse.unquote(p)}" for p in files))
        return aggregate(spark, df, marks), "Spark"
    df = read_silver(spark, cfg, "silver.row_changes") if version is None else (
        spark.read.format("delta").option("versionAsOf", version).load(table_path(cfg, "silver.row_changes")))
    return aggregate(spark, df.where(F.col("source") == source), marks), "Spark"


def previous_base(previous: dict[str, dict[str, Any]], gold_names: dict[str, TableKey]) -> Base | None:
    """The previous run's base from its status rows (``gold_names``: per-source gold table name ->
    (db, table)), or None when it cannot serve: an ``only_tables`` run (no version), rows of
    different runs, or a row without a replay state."""
    from binlake.gold.plan import coordinates_of

    versions, counts, marks = set(), {}, {}
    for name, row in previous.items():
        key = gold_names.get(name)
        if key is None:
            continue
        versions.add(row.get("silver_version"))
        text = row.get("input_fingerprint") or ""
        parts = text.split(":")
        if text.startswith("no changes"):
            counts[key] = Counts()
        elif len(parts) >= 2 and parts[0].isdigit():
            n, h = int(parts[0]), Decimal(parts[1])
            counts[key] = Counts(n, h, n, h)
        else:
            return None
        at = coordinates_of(row.get("replayed_through"))
        if at is not None:
            marks[key] = at
    version = versions.pop() if len(versions) == 1 else None
    return None if version is None else Base(int(version), counts, marks)


def input_fingerprints(spark: SparkSource, cfg: BinlakeConfig, source: str, schema_of: Callable[[TableKey], str],
                       base: Base | None, marks: dict[TableKey, Coordinates], seed: str | None = None
                       ) -> tuple[int | None, dict[TableKey, TableInputs], str]:
    """(silver's version, per table its :class:`TableInputs`, how they were computed: ``added files``
    or ``full scan``). ``schema_of``: a table's schema history digest; ``marks``: per table its W."""
    table, version, files = added_files(cfg, source, None if base is None else base.version)
    if base is not None and files is not None:
        added, where = counts_of(spark, cfg, table, version, source, files, marks) if files else ({}, "no files")
        counts = {key: base.counts.get(key, Counts()) + added.get(key, Counts())
                  for key in set(base.counts) | set(added)}
        how = f"added files ({where})"
    else:
        counts, where = counts_of(spark, cfg, table, version, source, None, marks)
        how = f"full scan ({where})"
    out = {}
    for key, c in counts.items():
        if c.n == 0:
            continue  # a table whose status row said "no changes" (seeded) and still has none
        schema = schema_of(key)
        out[key] = TableInputs(fingerprint(c.n, c.h, schema, seed),
                               fingerprint(c.n_old, c.h_old, schema, seed) if key in marks else None,
                               c.first_new, c.n)
    return version, out, how
