"""Where gold's tables live, their Spark schemas, and the per-table stream gold reads from silver.

Shared by every step of the stage (schema history, inputs, the full and the incremental replay,
unions, status), which is why it is a module of its own: they import it, none imports another's
internals for these.
"""

from __future__ import annotations

import contextlib
import functools
import json
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from binlake.gold.schema_history import Coordinates, TableSchema
from binlake.gold.state import COPIES_COLUMN, HISTORY_COLUMNS, Segment, StreamItem
from binlake.gold.types import spark_type
from binlake.lake.sql_text import source_predicate, sql_identifier
from binlake.lake.tables import gold_table
from spark_jobs.lake import delta_path_sql, ensure_table, replace_few_rows, table_path
from spark_jobs.schemas import spec

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, Row, SparkSession

    from binlake.config import BinlakeConfig
    from spark_jobs.session import SparkSource

META_DDL = ("_source STRING NOT NULL, _op STRING, _gtid STRING, _commit_time TIMESTAMP, "
            "_binlog_file STRING, _binlog_pos BIGINT, _binlog_payload_index INT, "
            "_binlog_row_index INT")
HISTORY_TYPES = ("STRING NOT NULL", "STRING", "STRING", "TIMESTAMP", "STRING", "BIGINT", "INT", "INT",
                 "TIMESTAMP", "STRING", "STRING", "BIGINT", "INT", "INT", "STRING", "BOOLEAN NOT NULL")
HISTORY_SUFFIX = "__history"
#: where a version starts, with the row's key: a version's identity in ``gold.<name>__history``
HISTORY_START = ("_valid_from_file", "_valid_from_pos", "_valid_from_payload_index", "_valid_from_row_index")


def gold_location(cfg: BinlakeConfig, name: str) -> str:
    """Location (as Spark spells it) of the gold table ``gold.<name>``."""
    return table_path(cfg, gold_table(name).full_name)


#: the Delta table properties of ``[gold] change_data_feed`` and ``deletion_vectors``
CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
DELETION_VECTORS = "delta.enableDeletionVectors"


def gold_properties(cfg: BinlakeConfig) -> dict[str, str]:
    """The table properties every gold table carries (docs/maintenance.md, "Gold for consumers").

    Change data feed: consumers read a night's net changes (``table_changes`` / ``readChangeFeed``)
    instead of diffing whole tables. Deletion vectors: a MERGE that updates or deletes a few rows
    marks them in a small side file instead of rewriting every data file holding one of them."""
    on = {True: "true", False: "false"}
    return {CHANGE_DATA_FEED: on[cfg.gold.change_data_feed], DELETION_VECTORS: on[cfg.gold.deletion_vectors]}


@contextlib.contextmanager
def gold_defaults(spark: SparkSession, cfg: BinlakeConfig) -> Iterator[None]:
    """Every Delta table Spark creates inside (a gold table, its ``__history``) is created with
    :func:`gold_properties` (Delta's ``spark.databricks.delta.properties.defaults.*``), so its first
    night's commit is in its change feed already."""
    keys = {f"spark.databricks.delta.properties.defaults.{k.removeprefix('delta.')}": v
            for k, v in gold_properties(cfg).items()}
    for key, value in keys.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key in keys:
            spark.conf.unset(key)


def ensure_gold_properties(spark: SparkSource, cfg: BinlakeConfig, path: str) -> None:
    """Give the existing gold table at ``path`` :func:`gold_properties` it lacks: one ``ALTER TABLE
    SET TBLPROPERTIES`` commit through :func:`spark_jobs.lake.committed_write` (the commit lock, the
    fence). Called before a table's MERGE (an older table gets them on its next run) and after a
    write that created it. Turning a property off sets it ``false``; deletion vectors already written
    stay until the files are rewritten (``OPTIMIZE``, ``REORG TABLE ... APPLY (PURGE)``)."""
    from binlake.lake.delta_tables import open_delta_table
    from spark_jobs.lake import committed_write
    from spark_jobs.session import session_of

    table = open_delta_table(path, cfg.s3)
    if table is None:
        return
    current = table.metadata().configuration
    missing = {k: v for k, v in gold_properties(cfg).items() if current.get(k, "false") != v}
    if not missing:
        return
    props = ", ".join(f"'{k}' = '{v}'" for k, v in sorted(missing.items()))
    target = delta_path_sql(path)

    def alter(fence: Any) -> None:
        fence.check()
        session_of(spark).sql(f"ALTER TABLE {target} SET TBLPROPERTIES ({props})")

    committed_write(path, cfg.s3, alter, f"set {props} on {path}")


def table_version(cfg: BinlakeConfig, path: str) -> int | None:
    """The Delta table's latest version through delta-rs (no Spark job), None if absent."""
    from binlake.lake.delta_tables import open_delta_table

    table = open_delta_table(path, cfg.s3)
    return None if table is None else int(table.version())


def row_count(spark: SparkSource, cfg: BinlakeConfig, path: str) -> int:
    """Rows of the Delta table at ``path``: the sum of its data files' ``numRecords`` statistics, read
    from the log by delta-rs (no Spark job); a Spark count where the log cannot tell (a file written
    without the statistic, or deletion vectors: a file's count then includes the rows its vector
    deletes)."""
    from binlake.lake.delta_tables import add_actions, open_delta_table

    table = open_delta_table(path, cfg.s3)
    if table is not None and "deletionVectors" not in (table.protocol().reader_features or ()):
        counts = add_actions(table).get("num_records", [])
        if None not in counts:
            return int(sum(counts))
    from spark_jobs.session import session_of

    return int(session_of(spark).read.format("delta").load(path).count())


def replace_source_rows(spark: SparkSource, cfg: BinlakeConfig, full_name: str, rows: list[tuple[Any, ...]],
                        source: str, run_id: str) -> None:
    """Replace the source's rows of a gold side table (``silver.schema_history``, ``meta.gold_status``),
    once per (run, source): a retried task whose commit did land is skipped by Delta (``txnAppId``),
    like every job write."""
    job = full_name.split(".", 1)[1]
    ensure_table(spark, cfg, full_name)  # partitioned by source (an older, unpartitioned one once re-partitioned)
    names = spec(full_name).column_names
    replace_few_rows(spark, cfg, full_name, [dict(zip(names, r, strict=True)) for r in rows],
                     functools.partial(source_predicate, source), run_id=run_id, job=job,
                     txn_app=f"binlake-{job}:{source}:{run_id}", extra_meta={"source": source})


@contextlib.contextmanager
def commit_metadata(spark: SparkSession, job: str, run_id: str) -> Iterator[None]:
    """Tag the Delta commits made inside (a MERGE: its builder takes no ``userMetadata`` option)
    with the job and run, as every binlake write is tagged."""
    key = "spark.databricks.delta.commitInfo.userMetadata"
    spark.conf.set(key, json.dumps({"job": job, "run_id": run_id}))
    try:
        yield
    finally:
        spark.conf.unset(key)


def merge_into(spark: SparkSession, path: str, src: DataFrame, on: str, clauses: str, *, job: str,
               run_id: str) -> None:
    """``MERGE INTO delta.`path` AS t USING src AS s ON on <clauses>``, tagged with the job and run.

    SQL rather than delta-spark's Python ``DeltaTable`` builder: that needs Delta's Spark Connect
    plugin on a Connect server, the SQL needs only Delta's extension, so the same call runs in
    every mode. ``src`` is a temporary view for the statement's length."""
    view = f"binlake_merge_source_{uuid.uuid4().hex}"
    src.createOrReplaceTempView(view)
    try:
        with commit_metadata(spark, job, run_id):
            spark.sql(f"MERGE INTO {delta_path_sql(path)} AS t USING {view} AS s ON {on} {clauses}")
    finally:
        spark.catalog.dropTempView(view)


def read_silver(spark: SparkSession, cfg: BinlakeConfig, full_name: str) -> DataFrame:
    return spark.read.format("delta").load(table_path(cfg, full_name))


def is_delta(cfg: BinlakeConfig, path: str) -> bool:
    """Whether ``path`` holds a Delta table, from its log through delta-rs: a Spark Delta snapshot
    is a Spark job of seconds on a small night, asked once per gold table and union."""
    from spark_jobs.lake import delta_log

    return delta_log(cfg, path) is not None


def stream_item(row: Row) -> StreamItem:
    """One row of :func:`table_stream` as the replayer's :class:`StreamItem`. Unpacked by position:
    a PySpark ``Row`` looks each name up in turn, once per value of every row replayed."""
    file, file_seq, pos, payload_index, row_index, kind, fields, operation, before, after, gtid, commit_time = row
    at = Coordinates(file_seq or 0, pos, -1 if payload_index is None else payload_index, row_index, file)
    return StreamItem(at, kind, fields, operation, before, after, gtid, commit_time)


def gold_schema_ddl(final: TableSchema) -> str:
    """The gold table's Spark schema (DDL text): source columns, then the _meta columns."""
    cols = [f"{sql_identifier(c.name)} {spark_type(c)}" for c in final.columns]
    extra = [] if final.primary_key else [f"{COPIES_COLUMN} BIGINT NOT NULL"]
    return ", ".join([*cols, META_DDL, *extra])


def history_schema_ddl(final: TableSchema) -> str:
    """``gold.<name>__history``'s Spark schema: source columns, then :data:`HISTORY_COLUMNS`."""
    cols = [f"{sql_identifier(c.name)} {spark_type(c)}" for c in final.columns]
    return ", ".join([*cols, *(f"{n} {t}" for n, t in zip(HISTORY_COLUMNS, HISTORY_TYPES))])


def stream_coordinates() -> Column:
    """The binlog order of the stream's rows as one comparable struct (Spark orders structs field by field)."""
    from pyspark.sql import functions as F

    return F.struct(F.coalesce("file_seq", F.lit(0)).cast("bigint").alias("s"), F.col("file").alias("f"),
                    F.col("pos").cast("bigint").alias("p"),
                    F.coalesce("payload_index", F.lit(-1)).cast("int").alias("i"),
                    F.col("row_index").cast("int").alias("r"))


def event_coordinates() -> Column:
    """:func:`stream_coordinates` of a ``bronze.events`` row (a TABLE_MAP: row index -1, as in the stream)."""
    from pyspark.sql import functions as F

    return F.struct(F.coalesce("file_seq", F.lit(0)).cast("bigint").alias("s"), F.col("file").alias("f"),
                    F.col("pos").cast("bigint").alias("p"),
                    F.coalesce("payload_index", F.lit(-1)).cast("int").alias("i"), F.lit(-1).cast("int").alias("r"))


def coordinates_literal(at: Coordinates) -> Column:
    """``at`` as a struct literal comparable with :func:`stream_coordinates`."""
    from pyspark.sql import functions as F

    return F.struct(F.lit(at.file_seq).cast("bigint").alias("s"), F.lit(at.file).alias("f"),
                    F.lit(at.pos).cast("bigint").alias("p"), F.lit(at.payload_index).cast("int").alias("i"),
                    F.lit(at.row_index).cast("int").alias("r"))


def table_stream(spark: SparkSession, cfg: BinlakeConfig, source: str, db: str, table: str) -> tuple[DataFrame, DataFrame]:
    """The table's TABLE_MAPs (``bronze.events``) and row changes (``silver.row_changes``) as two
    DataFrames of one shape (``kind`` 'table_map' / 'row'), for :func:`sorted_stream`."""
    from pyspark.sql import functions as F

    def same_table(df: DataFrame) -> DataFrame:
        return df.where((F.col("source") == source) & (F.col("db") == db) & (F.col("table_name") == table))

    maps = (same_table(read_silver(spark, cfg, "bronze.events")).where(F.col("event_type") == "TABLE_MAP")
            .select("file", "file_seq", "pos", "payload_index", F.lit(-1).alias("row_index"),
                    F.lit("table_map").alias("kind"), "fields", F.lit(None).cast("string").alias("operation"),
                    F.lit(None).cast("string").alias("before"),
                    F.lit(None).cast("string").alias("after"), "gtid",
                    F.lit(None).cast("timestamp").alias("commit_time")))
    rows = (same_table(read_silver(spark, cfg, "silver.row_changes"))
            .select("file", "file_seq", "pos", "payload_index", "row_index", F.lit("row").alias("kind"),
                    F.lit(None).cast("string").alias("fields"), "operation", "before",
                    "after", "gtid", "commit_time"))
    return maps, rows


def lineage_stream(spark: SparkSession, cfg: BinlakeConfig, source: str, segments: tuple[Segment, ...]) -> DataFrame:
    """The stream of a gold table fed by ``segments`` (``binlake.gold.state.lineage``): each source
    table's TABLE_MAPs and row changes within its segment's coordinates, as one DataFrame for
    :func:`sorted_stream`. One unbounded segment is :func:`table_stream` as it is."""
    out: DataFrame | None = None
    for seg in segments:
        maps, rows = table_stream(spark, cfg, source, seg.db, seg.table)
        part = maps.unionByName(rows)
        if seg.after is not None:
            part = part.where(stream_coordinates() > coordinates_literal(seg.after))
        if seg.before is not None:
            part = part.where(stream_coordinates() < coordinates_literal(seg.before))
        out = part if out is None else out.unionByName(part)
    assert out is not None, "a gold table is fed by at least one segment (binlake.gold.state.lineage)"
    return out


def sorted_stream(df: DataFrame) -> DataFrame:
    """``df`` (stream rows) on one partition, in binlog order: one replay per table."""
    from pyspark.sql import functions as F

    order: list[Column | str] = [F.coalesce("file_seq", F.lit(0)), "file", "pos", F.coalesce("payload_index", F.lit(-1)),
             "row_index"]
    return df.repartition(1).sortWithinPartitions(*order)
