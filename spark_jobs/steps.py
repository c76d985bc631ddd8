"""The steps of a pipeline run after discovery: decode, reconcile, gold (Spark) and data checks.

Each step reads its run's hand-over documents (:mod:`binlake.runs`: the ingest plan, the
discovery), runs its Spark job and writes its own document, so a step runs the same in-process
(an Airflow task in ``local`` mode, tests) or as a spark-submit application on a cluster
(``python -m spark_jobs STEP --source S --run-id R``, :mod:`spark_jobs.__main__`).

* ``decode``: ingest the planned files (:func:`spark_jobs.ingest.run_ingest`); fails when a file
  could not be decoded.
* ``reconcile``: GTID coverage / reconciliation of the source (:mod:`spark_jobs.reconcile`); fails
  on a GAP / CHAIN_BREAK or a broken chain reported by discovery, naming it.
* ``gold``: the typed current-state tables of the source (:func:`spark_jobs.gold.run_gold`).
* ``data_checks`` (:func:`run_data_checks`, no Spark: delta-rs + DuckDB): per-file counts agree
  with meta.ingested_files, table keys unique; the source's last step, so it releases the lease.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from binlake.config import BinlakeConfig, load_config
from binlake.runs import (
    FATAL_RECONCILIATION,
    XCOM_LIST_LIMIT,
    ChainBrokenError,
    DataCheckError,
    IngestFailedError,
    MissingPlanError,
    chain_message,
    get_doc,
    hold_source,
    put_doc,
    release_source,
    run_key,
)

log = logging.getLogger("binlake.pipeline")


def step_decode(spark: Any, cfg: BinlakeConfig, source: str, run_id: str) -> dict[str, Any]:
    """Ingest the planned files (``run_ingest``); fails when a file could not be decoded."""
    from spark_jobs.ingest import run_ingest

    plan = get_doc(cfg, run_id, source, "plan")
    if plan is None:
        raise MissingPlanError(f"no ingest plan for source {source} in run {run_id}: did discover run?")
    if plan.get("dry_run"):
        would = [f["file"] for f in plan["files"]]
        doc = {"source": source, "dry_run": True, "would_ingest": would, "ok": True}
        put_doc(cfg, run_id, source, "decode", doc)
        log.info("dry run: source %s would ingest %d file(s): %s", source, len(would), would[:XCOM_LIST_LIMIT])
        return doc
    res = run_ingest(spark, cfg, plan["files"], run_id=f"{run_key(run_id)}.{source}", force=bool(plan["force"]))
    failed = sorted(k for k, s in res.file_status.items() if s == "failed")
    partial = sorted(k for k, s in res.file_status.items() if s == "partial")
    doc = {"source": source, "dry_run": False, "mode": plan["mode"], "files": res.files, "skipped": res.skipped,
           "ingested": sorted(res.file_status)[:XCOM_LIST_LIMIT], "rows": res.rows, "quarantined": res.quarantined,
           "bytes": res.bytes, "seconds": round(res.seconds, 2), "failed": failed, "partial": partial,
           "ok": not failed}
    put_doc(cfg, run_id, source, "decode", doc)
    log.info("source %s: ingested %d file(s) (%d skipped as already ingested), rows %s, %d quarantined, %.1fs",
             source, res.files, res.skipped, res.rows, res.quarantined, res.seconds)
    if failed:
        raise IngestFailedError(f"source {source}: {len(failed)} file(s) failed to decode: {', '.join(failed)}")
    return doc


def step_reconcile(spark: Any, cfg: BinlakeConfig, source: str, run_id: str) -> dict[str, Any]:
    """Recompute GTID coverage/reconciliation for the source; fail on a GAP or a broken chain."""
    from spark_jobs.reconcile import run_reconcile

    plan = get_doc(cfg, run_id, source, "plan") or {}
    disc = get_doc(cfg, run_id, source, "discovery") or {}
    disc_errors = [f"[{i['severity']}] {i['source']} {i['file'] or ''}: {i['kind']}: {i['detail']}"
                   for i in disc.get("issues", []) if i.get("severity") == "error"]
    if plan.get("dry_run"):
        doc = {"source": source, "dry_run": True, "ok": not disc_errors, "discovery_errors": disc_errors}
        put_doc(cfg, run_id, source, "reconcile", doc)
        if disc_errors:
            raise ChainBrokenError(chain_message(source, disc_errors, []))
        return doc
    res = run_reconcile(spark, cfg, run_id=f"{run_key(run_id)}.{source}", sources=[source])
    fatal = [p for p in res.problems if p["status"] in FATAL_RECONCILIATION]
    doc = {"source": source, "dry_run": False, "files": res.files, "statuses": res.statuses,
           "problems": res.problems[:XCOM_LIST_LIMIT], "discovery_errors": disc_errors,
           "ok": not fatal and not disc_errors}
    put_doc(cfg, run_id, source, "reconcile", doc)
    log.info("source %s: GTID reconciliation over %d file(s): %s", source, res.files, res.statuses)
    if fatal or disc_errors:
        raise ChainBrokenError(chain_message(source, disc_errors, fatal))
    return doc


def step_gold(spark: Any, cfg: BinlakeConfig, source: str, run_id: str) -> dict[str, Any]:
    """Bring the source's gold tables up to date (only tables whose inputs changed are replayed)."""
    from spark_jobs.gold import run_gold

    plan = get_doc(cfg, run_id, source, "plan") or {}
    if plan.get("dry_run"):
        doc = {"source": source, "dry_run": True, "ok": True}
        put_doc(cfg, run_id, source, "gold", doc)
        return doc
    res = run_gold(spark, cfg, source, f"{run_key(run_id)}.{source}")
    modes: dict[str, int] = {}
    for t in res.tables:
        modes[t.write_mode] = modes.get(t.write_mode, 0) + 1
    doc = {"source": source, "dry_run": False, "tables": len(res.tables), "write_modes": modes,
           "rows": sum(t.rows for t in res.tables), "schema_versions": res.schema_versions,
           "names": sorted(t.name for t in res.tables)[:XCOM_LIST_LIMIT], "seconds": round(res.seconds, 2), "ok": True}
    put_doc(cfg, run_id, source, "gold", doc)
    log.info("source %s: %d gold table(s) %s, %d rows, %.1fs", source, len(res.tables), modes, doc["rows"], res.seconds)
    return doc


def _duckdb_strings(values: list[str]) -> str:
    """A DuckDB list of string literals (DuckDB, like standard SQL, doubles quotes; Spark SQL does not)."""
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values)


def step_data_checks(cfg: BinlakeConfig, source: str, run_id: str) -> dict[str, Any]:
    """Checks over the files this run ingested: state recorded, per-file counts agree, keys unique.

    Why without Spark: the checks read a few columns of the run's files only, so delta-rs and
    DuckDB (the engines of ``binlake sql``'s fast path) answer them in seconds, where a Spark
    application would spend most of a minute starting a JVM and its executors.
    """
    import duckdb

    from binlake.delta_tables import open_delta_table
    from binlake.tables import table_location
    from spark_jobs.schemas import spec

    plan = get_doc(cfg, run_id, source, "plan") or {}
    decode = get_doc(cfg, run_id, source, "decode") or {}
    files = [f["file"] for f in plan.get("files", [])]
    if plan.get("dry_run") or not files or not decode:
        doc = {"source": source, "checked_files": 0, "failures": [], "ok": True,
               "note": "dry run" if plan.get("dry_run") else "nothing ingested"}
        put_doc(cfg, run_id, source, "checks", doc)
        return doc
    con = duckdb.connect()
    for name in ("meta.ingested_files", "bronze.events", "silver.transactions", "silver.row_changes",
                 "silver.statements"):
        delta = open_delta_table(table_location(cfg.warehouse, name), cfg.s3)
        if delta is not None:
            con.register(name.replace(".", "__"), delta.to_pyarrow_dataset())
    where = f"source = '{source.replace(chr(39), chr(39) * 2)}' AND file IN ({_duckdb_strings(files)})"
    state = {r[0]: r[1:] for r in con.sql(
        f"SELECT file, status, etag, events FROM meta__ingested_files WHERE {where}").fetchall()}
    counted = dict(con.sql(f"SELECT file, count(*) FROM bronze__events WHERE {where} GROUP BY file").fetchall())
    failures: list[str] = []
    etags = {f["file"]: f.get("etag") for f in plan["files"]}
    for name in files:
        if name not in state:
            failures.append(f"{name}: not recorded in meta.ingested_files")
            continue
        status, etag, events = state[name]
        if status == "failed":
            failures.append(f"{name}: status failed in meta.ingested_files")
        elif (etag or None) != (etags[name] or None):
            failures.append(f"{name}: meta.ingested_files etag {etag} != discovered {etags[name]}")
        if int(events or 0) != int(counted.get(name, 0)):
            failures.append(f"{name}: bronze.events has {counted.get(name, 0)} rows, meta.ingested_files says {events}")
        if int(events or 0) == 0:
            failures.append(f"{name}: no events decoded")
    registered = {r[0] for r in con.sql("SHOW TABLES").fetchall()}
    for name in ("bronze.events", "silver.transactions", "silver.row_changes", "silver.statements"):
        if name.replace(".", "__") not in registered:
            continue
        key = ", ".join(spec(name).key)
        dup = con.sql(f"SELECT {key} FROM {name.replace('.', '__')} WHERE {where} GROUP BY {key} "
                      "HAVING count(*) > 1 LIMIT 3").fetchall()
        if dup:
            failures.append(f"{name}: duplicate keys ({key}): {dup}")
    con.close()
    doc = {"source": source, "checked_files": len(files), "failures": failures, "ok": not failures}
    put_doc(cfg, run_id, source, "checks", doc)
    if failures:
        raise DataCheckError(f"source {source}: {len(failures)} data check(s) failed:\n  " + "\n  ".join(failures))
    log.info("source %s: data checks passed on %d file(s)", source, len(files))
    return doc


def run_data_checks(source: str, run_id: str, cfg: BinlakeConfig | None = None) -> dict[str, Any]:
    """The source's last step (no Spark): run the checks, then release the source's run lease."""
    cfg = cfg or load_config()
    try:
        return step_data_checks(cfg, source, run_id)
    finally:
        release_source(cfg, source, run_id)  # let the next run in


STEPS: dict[str, Callable[[Any, BinlakeConfig, str, str], dict[str, Any]]] = {
    "decode": step_decode,
    "reconcile": step_reconcile,
    "gold": step_gold,
}


def run_spark_step(step: str, source: str, run_id: str, cfg: BinlakeConfig | None = None) -> dict[str, Any]:
    """Run one Spark step in this process (the session is reused when one runs): what an in-process
    Airflow task and ``python -m spark_jobs`` (spark-submit) both call."""
    from spark_jobs.session import build_spark_session

    cfg = cfg or load_config()
    hold_source(cfg, source, run_id)  # renew; fails if another run took over an expired lease
    spark = build_spark_session(cfg, f"binlake-{step}")
    _ensure_pyspark_temp_dir(spark)
    return STEPS[step](spark, cfg, source, run_id)


def _ensure_pyspark_temp_dir(spark: Any) -> None:
    """Recreate PySpark's driver temp dir if it vanished under a long-lived session.

    Seen on a shared, busy host where /tmp/spark-* of a live JVM disappeared between two tasks
    of the same dag.test() process: parallelize()/createDataFrame() then fail with ENOENT.
    """
    temp = getattr(spark.sparkContext, "_temp_dir", None)
    if temp and not os.path.isdir(temp):
        log.warning("PySpark temp dir %s vanished; recreating it", temp)
        os.makedirs(temp, exist_ok=True)
