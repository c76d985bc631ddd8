"""The Spark side of the lake: where a table lives, creating it, and the one committed write.

Every Spark job (ingest, gold, the steps' small patches) writes Delta tables the same way: one
replace-write tied to its run (:func:`write_replace`, or :func:`replace_few_rows` for a few rows,
by delta-rs where it may), each a :func:`committed_write`: the table's commit lock on S3, the fence
checked right before the commit, and a bounded, jittered retry of Delta's optimistic-concurrency
conflicts. Why a module of its own: the jobs used to import these helpers from the ingest job.

Why retrying is safe: every binlake write is a deterministic full replacement of the rows of one
source (``replaceWhere`` on ``source = ... [AND file IN (...)]``), tagged with a ``txnAppId``;
re-running the same write after a conflict produces the same table. Since every table is
partitioned by ``source``, writers of different sources never conflict on data; what remains
retryable is Delta's optimistic-concurrency noise: a concurrent first-time CREATE of the table
(``ProtocolChangedException`` / ``MetadataChangedException``), a concurrent metadata change (the
one-off re-partitioning of an old table) and, for a write that still overlaps another one, a
``ConcurrentAppendException``. Anything else (schema mismatch, I/O errors, bugs, and
``ConcurrentTransactionException``: the *same* run writing twice at once) fails at once.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from binlake.config import BinlakeConfig, S3Settings
from binlake.lake import leases
from binlake.lake.delta_tables import delta_uri, locked_storage_options
from binlake.lake.leases import CommitFence
from binlake.lake.row_images import ROW_CHANGES, migrate_row_changes
from spark_jobs.schemas import TableSpec, spec

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from spark_jobs.session import SparkSource

log = logging.getLogger("binlake.lake")

T = TypeVar("T")

#: Delta error classes (the ``[...]`` tag of the message) that a re-run of the same write may clear.
RETRYABLE_ERROR_CLASSES: tuple[str, ...] = (
    "DELTA_CONCURRENT_APPEND",
    "DELTA_CONCURRENT_DELETE_READ",
    "DELTA_CONCURRENT_DELETE_DELETE",
    "DELTA_METADATA_CHANGED",
    "DELTA_PROTOCOL_CHANGED",
    "DELTA_CONCURRENT_WRITE",
)
#: Python exception class names raised for them (delta.exceptions), for errors without a tag.
RETRYABLE_CLASS_NAMES: frozenset[str] = frozenset({
    "ConcurrentAppendException", "ConcurrentDeleteReadException", "ConcurrentDeleteDeleteException",
    "MetadataChangedException", "ProtocolChangedException", "ConcurrentWriteException",
})


def is_retryable_conflict(exc: BaseException) -> bool:
    """True for Delta's optimistic-concurrency conflicts a re-run may clear (see module doc)."""
    if type(exc).__name__ == "ConcurrentTransactionException":
        return False
    if type(exc).__name__ in RETRYABLE_CLASS_NAMES:
        return True
    text = str(exc).split("\n", 1)[0]
    return any(f"[{tag}" in text for tag in RETRYABLE_ERROR_CLASSES)


def committed_write(path: str, s3: S3Settings | None, write: Callable[[CommitFence], T], what: str, *,
                    attempts: int = leases.COMMIT_ATTEMPTS, max_wait: float = leases.COMMIT_MAX_WAIT_SECONDS) -> T:
    """``write(fence)``, a Spark Delta commit to the table at ``path``, as every job commits
    (:func:`binlake.lake.leases.committed_write`: the commit lock, the fence ``write`` checks right
    before its commit), re-run on the conflicts :func:`is_retryable_conflict` names."""
    return leases.committed_write(path, s3, write, what=what, retryable=is_retryable_conflict, attempts=attempts,
                                  max_wait=max_wait)


def table_path(config: BinlakeConfig, name: str) -> str:
    """Where registry table ``name`` lives, spelled for Spark (``s3a://`` on S3)."""
    from binlake.config import to_spark_uri
    from binlake.lake.tables import table_location

    return to_spark_uri(table_location(config.warehouse, name))


def delta_log(config: BinlakeConfig, path: str) -> DeltaTable | None:
    """The table's Delta log through delta-rs (metadata, version: no Spark job), or None if absent."""
    from binlake.lake.delta_tables import open_delta_table

    return open_delta_table(path, config.s3)


def delta_schema(config: BinlakeConfig, path: str) -> StructType | None:
    """The table's Spark schema read from its Delta log (delta-rs; the log holds Spark's own schema
    JSON), None if absent. Why not a Spark read: that costs a snapshot of the table for a schema."""
    from pyspark.sql.types import StructType

    table = delta_log(config, path)
    return None if table is None else StructType.fromJson(json.loads(table.schema().to_json()))


def table_version(config: BinlakeConfig, path: str) -> int | None:
    log_reader = delta_log(config, path)
    return None if log_reader is None else int(log_reader.version())


def ensure_table(spark: SparkSource, config: BinlakeConfig, name: str) -> str:
    """Create the Delta table (schema, comments, partitioning) if it does not exist; race-safe.

    Created with delta-rs from the Spark schema (the Delta schema JSON is Spark's), so creating
    a table runs no Spark job: on S3 the creation holds the table's commit lock, and a driver
    must never wait for executors while holding a lock that another application (holding those
    executors) waits for. Several tasks creating the same table at once: one commit of version 0
    wins (the lock on S3, put-if-absent locally), the others find the table.
    A table written by an older binlake with other partition columns (meta tables were not
    partitioned by ``source``) is re-partitioned once with Spark, rows kept (docs/operations.md);
    one without binlake's table properties (:attr:`binlake.lake.tables.TableSpec.properties`: which
    columns carry data-skipping statistics) gets them in one metadata commit, with delta-rs.
    """
    path = table_path(config, name)
    ts = spec(name)
    if name == ROW_CHANGES:  # the previous layout's row images (issue 37): migrated once, first
        migrate_row_changes(path, config.s3)
    log_reader = delta_log(config, path)
    if log_reader is not None and tuple(log_reader.metadata().partition_columns) == ts.partition_by \
            and not _missing_properties(log_reader, ts):
        return path

    def bring_up_to_date(fence: CommitFence) -> None:
        fence.check()
        current = delta_log(config, path)
        if current is None:
            _create_table(config, path, ts)
            return
        if tuple(current.metadata().partition_columns) != ts.partition_by:
            from spark_jobs.session import session_of

            _repartition(session_of(spark), path, ts)
            current = delta_log(config, path)
        missing = _missing_properties(current, ts) if current is not None else {}
        if missing:
            from deltalake import DeltaTable

            log.info("%s: setting table properties %s", name, missing)
            (DeltaTable(delta_uri(path), storage_options=locked_storage_options(path, config.s3))
                .alter.set_table_properties(missing, raise_if_not_exists=False))

    committed_write(path, config.s3, bring_up_to_date, f"create or update {name}")
    return path


def _missing_properties(log_reader: DeltaTable, ts: TableSpec) -> dict[str, str]:
    """binlake's table properties the table lacks or holds with another value."""
    current = log_reader.metadata().configuration
    return {k: v for k, v in ts.table.properties.items() if current.get(k) != v}


def _create_table(config: BinlakeConfig, path: str, ts: TableSpec) -> None:
    from deltalake import DeltaTable, Schema

    try:
        DeltaTable.create(delta_uri(path), schema=Schema.from_json(ts.schema.json()),
                          partition_by=list(ts.partition_by) or None, description=ts.description,
                          configuration=ts.table.properties or None, mode="ignore",
                          storage_options=locked_storage_options(path, config.s3))
    except Exception:  # noqa: BLE001 - a concurrent creator won the race for version 0
        if delta_log(config, path) is None:
            raise


def is_delta_table(spark: SparkSession, path: str) -> bool:
    """Whether ``path`` holds a Delta table, asked of Spark in every mode: delta-spark's Python
    ``DeltaTable`` needs Delta's Connect plugin on a Spark Connect server, so a Connect client
    reads the table's schema instead (an analysis error: no table there)."""
    from spark_jobs.session import is_connect

    if not is_connect(spark):
        from delta.tables import DeltaTable

        return bool(DeltaTable.isDeltaTable(spark, path))
    from pyspark.errors import AnalysisException

    try:
        spark.read.format("delta").load(path).schema  # noqa: B018 - analysed on the server
    except AnalysisException:
        return False
    return True


def delta_path_sql(path: str) -> str:
    """``delta.`<path>``` (a Delta table by its path in Spark SQL), the backticks in the path doubled."""
    return "delta.`" + path.replace("`", "``") + "`"


def _repartition(spark: SparkSession, path: str, ts: TableSpec) -> None:
    target = delta_path_sql(path)
    current = tuple(spark.sql(f"DESCRIBE DETAIL {target}").collect()[0]["partitionColumns"])
    if current == ts.partition_by:
        return
    log.warning("%s: partitioned by %s, binlake now partitions it by %s: rewriting it once (rows kept)",
                ts.name, list(current) or "nothing", list(ts.partition_by))
    (spark.read.format("delta").load(path).write.format("delta").mode("overwrite")
        .option("overwriteSchema", "true").partitionBy(*ts.partition_by)
        .option("userMetadata", json.dumps({"job": "repartition", "partition_by": list(ts.partition_by)}))
        .save(path))


def write_replace(df: DataFrame, path: str, predicate: str, *, s3: S3Settings | None, run_id: str, job: str,
                  txn_version: int = 0, txn_app: str | None = None,
                  extra_meta: Mapping[str, Any] | None = None, partition_by: str | None = None,
                  merge_schema: bool = False) -> None:
    """Replace the rows matching ``predicate`` with ``df`` in one Delta commit tied to the run.

    The one Delta replace-write of every Spark job (ingest, gold, the union tables, the steps).
    ``partition_by`` names the partition column when the write may create the table (union
    tables; the others are created by :func:`ensure_table`); ``merge_schema`` lets it add
    columns (a shard's ``ADD COLUMN`` reaching a union table).

    ``predicate`` always starts with the ``source`` partition column, so writers of other
    sources cannot conflict with it (Delta's conflict check prunes by partition values); a
    retryable conflict left (a concurrent CREATE / re-partitioning) is retried
    (:func:`committed_write`): the write is a deterministic replacement, and a commit that did
    land is skipped by Delta on retry through ``txnAppId``/``txnVersion``.
    """
    meta = {"job": job, "run_id": run_id}
    if extra_meta:
        meta.update(extra_meta)

    def write(fence: CommitFence) -> None:
        writer = df.write.format("delta").mode("overwrite")
        if partition_by:
            writer = writer.partitionBy(partition_by)
        if merge_schema:
            writer = writer.option("mergeSchema", "true")
        fence.check()
        (writer.option("replaceWhere", predicate)
            .option("txnAppId", txn_app or f"binlake-{job}:{run_id}")
            .option("txnVersion", str(txn_version))
            .option("userMetadata", json.dumps(meta, sort_keys=True))
            .save(path))

    committed_write(path, s3, write, f"{job} write to {path}")


def replace_few_rows(spark: SparkSource, config: BinlakeConfig, name: str, rows: Sequence[Mapping[str, Any]],
                     predicate: Callable[[str], str], *, run_id: str, job: str, txn_app: str,
                     extra_meta: Mapping[str, Any] | None = None) -> None:
    """Replace the rows of table ``name`` that ``predicate`` selects with ``rows`` (a few: one per
    file or per source): one commit, by delta-rs (:func:`binlake.lake.delta_tables.replace_rows`), tied
    to the run like every job write (txn id, ``userMetadata``; see :func:`write_replace`).
    ``predicate(dialect)`` spells the selection in :data:`binlake.lake.sql_text.DELTA_RS` or Spark SQL.

    Why not :func:`write_replace`: a Spark Delta commit costs seconds of JVM CPU whatever its size
    (issue 13), and the meta tables and schema history take one per table and run. A table whose
    protocol delta-rs should not write (features an older or foreign writer added) is written by
    Spark, as before.
    """
    from binlake.lake.delta_tables import Commit, replace_rows
    from binlake.lake.sql_text import DELTA_RS, SPARK

    ts = spec(name)
    path = table_path(config, name)
    meta = {"job": job, "run_id": run_id, **(extra_meta or {})}
    done = replace_rows(path, config.s3, rows_table(name, rows), predicate(DELTA_RS),
                        partition_by=ts.table.partition_by, txn_app=txn_app,
                        user_metadata=json.dumps(meta, sort_keys=True))
    if done is Commit.LEFT_TO_SPARK:
        from spark_jobs.session import session_of

        log.info("%s: written with Spark (its protocol is left to Spark)", name)
        write_replace(rows_df(session_of(spark), name, rows), path, predicate(SPARK), s3=config.s3, run_id=run_id,
                      job=job, txn_app=txn_app, extra_meta=extra_meta)


def rows_table(name: str, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """``rows`` as an Arrow table in the table's columns (TIMESTAMP: UTC microseconds, as Spark
    writes it). A naive datetime is local time, as Spark reads it in ``createDataFrame`` and
    returns it from ``collect`` (Arrow would take it for UTC)."""
    import pyarrow as pa

    def value(v: Any) -> Any:
        return v.astimezone(_dt.UTC) if isinstance(v, _dt.datetime) and v.tzinfo is None else v

    return pa.Table.from_pylist([{c: value(r.get(c)) for c in spec(name).column_names} for r in rows],
                                schema=spec(name).arrow_schema)


def rows_df(spark: SparkSession, name: str, rows: Sequence[Mapping[str, Any]]) -> DataFrame:
    """``rows`` as a Spark DataFrame with table ``name``'s schema."""
    ts = spec(name)
    cols = ts.column_names
    return spark.createDataFrame([tuple(r.get(c) for c in cols) for r in rows], ts.schema)
