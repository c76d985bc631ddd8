"""Union tables (``[gold.union]``): a fleet of shards' gold tables stacked in one ``gold.<union>``,
each source's rows in its own ``_source`` partition.

After a source's tables are up to date, its part of every union its tables belong to is brought
to them: replaced from the gold table, MERGEd on the touched keys after an incremental replay, or
removed (a dropped table, a source that left the union). A part whose column types differ from
the union's is refused by name (:class:`spark_jobs.errors.GoldUnionError`), after the other parts
and the status are written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from binlake.gold.plan import INCREMENTAL
from binlake.lake.leases import CommitFence
from binlake.lake.sql_text import sql_string
from spark_jobs.errors import GoldUnionError
from spark_jobs.gold.incremental import merge_union_part
from spark_jobs.gold.results import GoldTableResult, GoldUnionResult
from spark_jobs.gold.tables import gold_location, is_delta
from spark_jobs.lake import committed_write, delta_schema, write_replace

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from binlake.config import BinlakeConfig
    from spark_jobs.session import SparkSource


#: the per-source gold tables' source column: a union table's partition column and first key column
SOURCE_COLUMN = "_source"


def _check_union_schema(cfg: BinlakeConfig, path: str, df: DataFrame, union: str, source: str) -> None:
    """Refuse a part whose column types differ from the union table's (Delta's own error does not
    say which column); added or missing columns are fine: ``mergeSchema`` adds them, NULL elsewhere.
    The union's schema is read from its Delta log (delta-rs), not a Spark snapshot."""
    schema = delta_schema(cfg, path)
    if schema is None:
        return
    held = {f.name.casefold(): f.dataType for f in schema.fields}
    clash = [f"{f.name} ({f.dataType.simpleString()}, the union has {held[f.name.casefold()].simpleString()})"
             for f in df.schema.fields if f.name.casefold() in held and held[f.name.casefold()] != f.dataType]
    if clash:
        raise GoldUnionError(f"gold.{union}: source {source} cannot join it, column types differ: "
                             + ", ".join(clash))


def replace_union_rows(spark: SparkSession, cfg: BinlakeConfig, union: str, source: str, df: DataFrame, run_id: str) -> None:
    """Replace ``source``'s rows of ``gold.<union>`` (its ``_source`` partition) with ``df``: one commit.

    Why a partition replace and not a MERGE: each source's gold task writes only its own
    partition, so tasks of a fleet's sources running at once never conflict on data (Delta's
    conflict check prunes by partition); on S3 the write holds the table's commit lock like every
    job write, a first-time creation race is retried (:func:`spark_jobs.lake.committed_write`), and a
    retried task whose commit landed is skipped by Delta (``txnAppId``).
    """
    path = gold_location(cfg, union)
    _check_union_schema(cfg, path, df, union, source)
    write_replace(df, path, f"{SOURCE_COLUMN} = {sql_string(source)}", s3=cfg.s3, run_id=run_id,
                  job="gold-union", txn_app=f"binlake-gold-union:{union}:{source}:{run_id}",
                  extra_meta={"source": source}, partition_by=SOURCE_COLUMN, merge_schema=True)


def _remove_union_rows(spark: SparkSession, cfg: BinlakeConfig, union: str, source: str, run_id: str) -> None:
    path = gold_location(cfg, union)
    empty = spark.read.format("delta").load(path).limit(0)
    replace_union_rows(spark, cfg, union, source, empty, run_id)


def _merge_union_rows(spark: SparkSession, cfg: BinlakeConfig, union: str, source: str, table: GoldTableResult,
                      run_id: str) -> None:
    """After an incremental run of ``table``: its touched keys MERGEd into the source's part of the
    union (the part equalled the gold table before the run: same fingerprint); one commit under the
    table's commit lock, retried on a Delta conflict like every union write (a MERGE of absolute
    rows is idempotent)."""
    path = gold_location(cfg, union)
    touched = table.touched
    assert touched is not None  # only after an incremental replay, which names its touched keys

    def write(fence: CommitFence) -> None:
        fence.check()
        merge_union_part(spark, path, table.location, source, touched, run_id)

    committed_write(path, cfg.s3, write, f"gold union merge into {path}")


def _union_part(spark: SparkSession, cfg: BinlakeConfig, source: str, union: str, table: GoldTableResult,
                before: dict[str, Any] | None, run_id: str) -> GoldUnionResult:
    """Bring the source's part of ``gold.<union>`` to its gold table ``table`` (skipped when it was
    copied at the same input fingerprint and the table is unchanged)."""
    path = gold_location(cfg, union)
    exists = is_delta(cfg, path)
    same = exists and before is not None and before["input_fingerprint"] == table.fingerprint

    def part(rows: int, mode: str, error: str | None = None) -> GoldUnionResult:
        fingerprint = None if mode == "failed" else table.fingerprint
        return GoldUnionResult(union, table.db, table.table, path, rows, mode, fingerprint, error)

    if table.write_mode == "dropped":
        if not exists or same:
            return part(0, "unchanged")
        _remove_union_rows(spark, cfg, union, source, run_id)
        return part(0, "removed")
    if same and before is not None and table.write_mode == "unchanged":
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


def update_unions(spark: SparkSource, cfg: BinlakeConfig, source: str, results: list[GoldTableResult],
                  previous: dict[str, dict[str, Any]], run_id: str, *,
                  every_table: bool = True) -> tuple[tuple[GoldUnionResult, ...], tuple[str, ...]]:
    """The source's part of every union table (``[gold] union``) its gold tables belong to, and the
    union tables it left (named by its last status, no longer by the config: its rows are removed
    there; only when ``every_table`` of the source was considered this run)."""
    from spark_jobs.session import session_of

    parts = tuple(_union_part(session_of(spark), cfg, source, union, r, previous.get(union), run_id)
                  for r in results for union in cfg.gold.unions_of(source, r.db, r.table))
    left = []
    if every_table:
        kept = {u.name for u in parts}
        for name in sorted(previous):
            if "__" not in name and name not in kept and is_delta(cfg, gold_location(cfg, name)):
                _remove_union_rows(session_of(spark), cfg, name, source, run_id)
                left.append(name)
    return parts, tuple(left)
