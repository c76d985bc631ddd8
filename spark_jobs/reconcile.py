"""The reconciliation job: meta.binlog_files -> meta.gtid_coverage + meta.gtid_reconciliation.

Reads the per-file facts ingestion stored (one small row per archived file; no binlog is
re-decoded), runs the pure logic of ``binlake.reconciliation`` on the driver and
replaces both tables' rows for the reconciled sources in one Delta commit each (tied to the
run by a Delta txn id and ``userMetadata``; a few rows, written by delta-rs:
:func:`spark_jobs.ingest.replace_few_rows`). Deterministic: re-running on the same facts leaves
both tables unchanged.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from binlake.reconciliation import FileFacts, coverage, reconcile
from binlake.run_ids import new_run_id
from binlake.sql_text import sources_predicate
from spark_jobs.ingest import ensure_table, replace_few_rows, table_path
from spark_jobs.schemas import spec

log = logging.getLogger("binlake.reconcile")


@dataclass
class ReconcileResult:
    run_id: str
    sources: list[str] = field(default_factory=list)
    files: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    coverage_rows: int = 0
    problems: list[dict[str, Any]] = field(default_factory=list)  # non-OK rows, for logs / alerts
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_file_facts(spark: Any, config: Any, sources: Iterable[str] | None = None) -> list[FileFacts]:
    from delta.tables import DeltaTable

    path = table_path(config, "meta.binlog_files")
    if not DeltaTable.isDeltaTable(spark, path):
        return []
    df = spark.read.format("delta").load(path)
    if sources is not None:
        wanted = sorted(set(sources))
        if not wanted:
            return []
        df = df.where(sources_predicate(wanted))
    return [FileFacts.from_row(r.asDict()) for r in df.collect()]


def add_commit_times(spark: Any, config: Any, cov_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each coverage interval with the commit times of its first and last transaction.

    Why from silver.transactions: meta.binlog_files knows each file's first/last event time
    only; an interval can start or end in the middle of a file. One join on the endpoints'
    GTIDs (a few rows per source) answers it; an endpoint whose transaction is not in silver
    (an archive that starts with a PREVIOUS_GTIDS of history) keeps NULL.
    """
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    path = table_path(config, "silver.transactions")
    if not cov_rows or not DeltaTable.isDeltaTable(spark, path):
        return cov_rows
    ends = sorted({(r["source"], r["sid"].lower(), r["tag"], g) for r in cov_rows for g in (r["gno_start"], r["gno_end"])})
    wanted = spark.createDataFrame(ends, "source string, sid string, tag string, gno bigint")
    txs = (spark.read.format("delta").load(path).where(sources_predicate({r["source"] for r in cov_rows}))
           .select("source",
                   F.lower(F.coalesce(F.col("uuid"), F.col("mariadb_domain_id").cast("string"))).alias("sid"),
                   F.coalesce(F.col("tag"), F.lit("")).alias("tag"),
                   F.coalesce(F.col("gno"), F.col("mariadb_seq_no")).alias("gno"),
                   F.coalesce(F.col("commit_time"), F.col("begin_time")).alias("t")))
    found = (txs.join(F.broadcast(wanted), ["source", "sid", "tag", "gno"])
             .groupBy("source", "sid", "tag", "gno").agg(F.min("t").alias("first"), F.max("t").alias("last"))
             .collect())
    times = {(r["source"], r["sid"], r["tag"], r["gno"]): (r["first"], r["last"]) for r in found}
    out = []
    for r in cov_rows:
        key = (r["source"], r["sid"].lower(), r["tag"])
        out.append(dict(r, first_commit_time=times.get((*key, r["gno_start"]), (None, None))[0],
                        last_commit_time=times.get((*key, r["gno_end"]), (None, None))[1]))
    return out


def add_new_columns(spark: Any, config: Any, name: str) -> None:
    """Columns a newer binlake added to the table (e.g. meta.gtid_coverage's commit times), added
    to a table an older one created, so the replacing write's schema matches."""
    path = table_path(config, name)
    have = set(spark.read.format("delta").load(path).columns)
    missing = [c for c in spec(name).table.columns if c.name not in have]
    if missing:
        cols = ", ".join(f"{c.name} {c.type}" for c in missing)
        spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({cols})")
        log.info("%s: added column(s) %s", name, cols)


def run_reconcile(spark: Any, config: Any, run_id: str | None = None, *,
                  sources: Iterable[str] | None = None) -> ReconcileResult:
    """Recompute coverage and reconciliation for ``sources`` (default: every ingested source)."""
    t0 = time.time()
    run_id = run_id or new_run_id()
    result = ReconcileResult(run_id=run_id)
    for name in ("meta.gtid_coverage", "meta.gtid_reconciliation"):
        ensure_table(spark, config, name)
    facts = load_file_facts(spark, config, sources)
    srcs = sorted({f.source for f in facts} | set(sources or ()))
    result.sources = srcs
    result.files = len(facts)
    if not srcs:
        result.seconds = time.time() - t0
        return result
    recon_rows = [r.as_dict() for r in reconcile(facts)]
    cov_rows = add_commit_times(spark, config, [c.as_dict() for c in coverage(facts)])
    add_new_columns(spark, config, "meta.gtid_coverage")
    for r in recon_rows:
        result.statuses[r["status"]] = result.statuses.get(r["status"], 0) + 1
        if r["status"] != "OK":
            result.problems.append({k: r[k] for k in ("source", "file", "status", "missing_gtids",
                                                      "extra_gtids", "missing_files", "detail")})
    result.coverage_rows = len(cov_rows)
    predicate = sources_predicate(srcs)
    txn_app = f"binlake-reconcile:{run_id}:{hashlib.sha1(predicate.encode()).hexdigest()[:12]}"
    for name, rows in (("meta.gtid_coverage", cov_rows), ("meta.gtid_reconciliation", recon_rows)):
        replace_few_rows(spark, config, name, rows, functools.partial(sources_predicate, srcs), run_id=run_id,
                         job="reconcile", txn_app=txn_app)
    result.seconds = time.time() - t0
    for p in result.problems:
        log.warning("gtid reconciliation %s/%s: %s %s", p["source"], p["file"], p["status"], p["detail"])
    return result
