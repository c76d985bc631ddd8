"""The steps of a pipeline run after discovery: decode and gold (Spark), reconcile and data checks (no JVM).

Each step reads its run's hand-over documents (:mod:`binlake.runs`: the ingest plan, the
discovery), runs its Spark job and writes its own document, so a step runs the same in-process
(an Airflow task in ``local`` mode, tests) or as a spark-submit application on a cluster
(``python -m spark_jobs STEP --source S --run-id R``, :mod:`spark_jobs.__main__`).

* ``decode``: ingest the planned files (:func:`spark_jobs.ingest.run_ingest`); fails when a file
  could not be decoded.
* ``reconcile`` (:func:`run_reconcile_step`, no Spark: delta-rs, :mod:`binlake.reconcile.job`): GTID
  coverage / reconciliation of the source; fails on a GAP / CHAIN_BREAK or a broken chain reported
  by discovery, naming it.
* ``gold``: the typed current-state tables of the source (:func:`spark_jobs.gold.job.run_gold`).
* ``data_checks`` (:func:`run_data_checks`, no Spark: delta-rs + DuckDB): per-file counts agree
  with meta.ingested_files, table keys unique; the source's last step, so it releases the lease.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from binlake.config import BinlakeConfig, load_config
from binlake.runs import (
    FATAL_RECONCILIATION,
    XCOM_LIST_LIMIT,
    ChainBrokenError,
    DataCheckError,
    IngestFailedError,
    chain_message,
    get_discovery,
    get_plan,
    get_result,
    hold_source,
    put_doc,
    release_source,
    run_key,
)
from binlake.step_results import (
    ChecksResult,
    DecodeResult,
    GoldStepResult,
    ReconcileProblem,
    ReconcileResult,
    RunDiscovery,
    RunPlan,
)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from spark_jobs.session import SparkSource

log = logging.getLogger("binlake.pipeline")


# --------------------------------------------------------------------------- decode


def decode_without_spark(cfg: BinlakeConfig, source: str, run_id: str) -> DecodeResult | None:
    """The decode step's answer when it needs no Spark (a dry run, or nothing new to ingest);
    None when there is work for Spark. Why: starting a Spark application costs from seconds to
    minutes on a busy host, and a routine night often has nothing new."""
    plan = get_plan(cfg, run_id, source)
    if plan.dry_run:
        would = plan.file_names
        result = DecodeResult(source=source, dry_run=True, mode=plan.mode, would_ingest=tuple(would), spark=False)
        log.info("dry run: source %s would ingest %d file(s): %s", source, len(would), would[:XCOM_LIST_LIMIT])
    elif not plan.files:
        result = DecodeResult(source=source, mode=plan.mode, skipped=len(plan.skipped), spark=False)
        log.info("source %s: nothing new to ingest (%d file(s) already ingested): no Spark started",
                 source, len(plan.skipped))
    else:
        return None
    put_doc(cfg, run_id, source, "decode", result)
    return result


def step_decode(spark: SparkSource, cfg: BinlakeConfig, source: str, run_id: str) -> DecodeResult:
    """Ingest the planned files (``run_ingest``); fails when a file could not be decoded."""
    from spark_jobs.ingest import run_ingest
    from spark_jobs.session import session_started

    plan = get_plan(cfg, run_id, source)
    res = run_ingest(spark, cfg, list(plan.files), run_id=f"{run_key(run_id)}.{source}",
                     force=plan.force, record_run_id=run_id)
    failed = sorted(k for k, s in res.file_status.items() if s == "failed")
    partial = sorted(k for k, s in res.file_status.items() if s == "partial")
    filled = fill_stop_successors(spark, cfg, source, run_id) if res.files else []
    result = DecodeResult(
        source=source, mode=plan.mode, files=res.files, skipped=res.skipped,
        ingested=tuple(sorted(res.file_status)[:XCOM_LIST_LIMIT]), rows=dict(res.rows), quarantined=res.quarantined,
        bytes=res.bytes, seconds=round(res.seconds, 2), failed=tuple(failed), partial=tuple(partial),
        next_file_filled=tuple(filled), ok=not failed, spark=session_started(spark))
    put_doc(cfg, run_id, source, "decode", result)
    log.info("source %s: ingested %d file(s) (%d skipped as already ingested), rows %s, %d quarantined, %.1fs",
             source, res.files, res.skipped, res.rows, res.quarantined, res.seconds)
    if failed:
        raise IngestFailedError(f"source {source}: {len(failed)} file(s) failed to decode: {', '.join(failed)}")
    return result


def stop_successors(cfg: BinlakeConfig, source: str, run_id: str) -> dict[str, str]:
    """STOP-closed files whose successor discovery found in the archive: file -> successor."""
    disc = get_discovery(cfg, run_id, source)
    if disc is None:
        return {}
    present = {f.file for f in disc.files}
    return {f.file: f.next_file for f in disc.files
            if f.closing_event == "STOP" and f.next_file and f.next_file in present}


def fill_stop_successors(spark: SparkSource, cfg: BinlakeConfig, source: str, run_id: str) -> list[str]:
    """Set ``meta.binlog_files.next_file`` of STOP-closed files to the successor discovery names.

    Why here and not in the decoder: a STOP event names no next file (the server stopped); the
    successor is only known from the archive's listing, and may appear nights after the STOP file
    was ingested. The rows (one per file) are read and replaced with delta-rs like the ingest's
    meta rows (:func:`spark_jobs.lake.replace_few_rows`: one commit tied to the run).
    """
    import functools

    from binlake.lake.sql_text import files_predicate
    from binlake.reconcile.report import read_table_rows
    from spark_jobs.lake import replace_few_rows

    successors = stop_successors(cfg, source, run_id)
    if not successors:
        return []
    rows = [r for r in read_table_rows(cfg, "meta.binlog_files", source)
            if r["file"] in successors and r["next_file"] is None]
    todo = sorted(r["file"] for r in rows)
    if not todo:
        return []
    patched = [{**r, "next_file": successors[r["file"]]} for r in rows]
    replace_few_rows(spark, cfg, "meta.binlog_files", patched,
                     functools.partial(files_predicate, [(source, f) for f in todo]), run_id=run_key(run_id),
                     job="next-file", txn_app=f"binlake-next-file:{run_key(run_id)}.{source}")
    log.info("source %s: next_file of STOP-closed file(s) set from discovery: %s", source,
             {f: successors[f] for f in todo})
    return todo


# --------------------------------------------------------------------------- reconcile


def _problem(p: dict[str, Any]) -> ReconcileProblem:
    return ReconcileProblem(source=p["source"], file=p["file"], status=p["status"],
                            missing_gtids=p.get("missing_gtids") or "", extra_gtids=p.get("extra_gtids") or "",
                            missing_files=tuple(p.get("missing_files") or ()), detail=p.get("detail") or "")


def _discovery_errors(cfg: BinlakeConfig, source: str, run_id: str) -> list[str]:
    disc = get_discovery(cfg, run_id, source)
    return [str(i) for i in disc.errors] if disc is not None else []


def persisted_reconciliation(cfg: BinlakeConfig, source: str) -> tuple[list[ReconcileProblem], dict[str, int]] | None:
    """The source's stored ``meta.gtid_reconciliation`` verdict (delta-rs, no JVM), or None when it
    does not cover every file of ``meta.binlog_files`` (a reconcile never ran after an ingest)."""
    from binlake.reconcile.report import read_table_rows

    recon = read_table_rows(cfg, "meta.gtid_reconciliation", source)
    facts = {r["file"] for r in read_table_rows(cfg, "meta.binlog_files", source)}
    if {r["file"] for r in recon} != facts:
        return None
    statuses: dict[str, int] = {}
    for r in recon:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    recon.sort(key=lambda r: r.get("chain_index") or 0)
    return [_problem(r) for r in recon if r["status"] != "OK"], statuses


def reconcile_without_spark(cfg: BinlakeConfig, source: str, run_id: str) -> ReconcileResult | None:
    """The reconcile step's answer without Spark: a dry run (reports, never fails), or a night that
    ingested nothing new (the stored verdict stands: a GAP found before is still reported and still
    fails the step). None when it must be recomputed (:func:`step_reconcile`)."""
    plan = get_plan(cfg, run_id, source)
    decoded = get_result(cfg, run_id, source, "decode", DecodeResult)
    if not plan.dry_run and (decoded is None or decoded.files):
        return None
    stored = persisted_reconciliation(cfg, source)
    if stored is None and not plan.dry_run:
        return None
    problems, statuses = stored or ([], {})
    disc_errors = _discovery_errors(cfg, source, run_id)
    fatal = [p for p in problems if p.status in FATAL_RECONCILIATION]
    result = ReconcileResult(source=source, dry_run=plan.dry_run, files=sum(statuses.values()), statuses=statuses,
                             problems=tuple(problems[:XCOM_LIST_LIMIT]), discovery_errors=tuple(disc_errors),
                             persisted=stored is not None, spark=False,
                             ok=plan.dry_run or not (fatal or disc_errors))
    put_doc(cfg, run_id, source, "reconcile", result)
    log.info("source %s: nothing new ingested: GTID reconciliation as stored, %s (no Spark started)",
             source, statuses)
    if fatal or disc_errors:
        message = chain_message(source, disc_errors, fatal)
        if plan.dry_run:
            log.warning("dry run (no alert): %s", message)
        else:
            raise ChainBrokenError(message)
    return result


def step_reconcile(cfg: BinlakeConfig, source: str, run_id: str) -> ReconcileResult:
    """Recompute GTID coverage/reconciliation for the source (no JVM: :mod:`binlake.reconcile.job`);
    fail on a GAP or a broken chain."""
    from binlake.reconcile.job import run_reconcile

    disc_errors = _discovery_errors(cfg, source, run_id)
    res = run_reconcile(cfg, run_id=f"{run_key(run_id)}.{source}", sources=[source])
    problems = [_problem(p) for p in res.problems]
    fatal = [p for p in problems if p.status in FATAL_RECONCILIATION]
    result = ReconcileResult(source=source, files=res.files, statuses=dict(res.statuses),
                             problems=tuple(problems[:XCOM_LIST_LIMIT]), discovery_errors=tuple(disc_errors),
                             spark=False, ok=not fatal and not disc_errors)
    put_doc(cfg, run_id, source, "reconcile", result)
    log.info("source %s: GTID reconciliation over %d file(s): %s (no Spark)", source, res.files, res.statuses)
    if fatal or disc_errors:
        raise ChainBrokenError(chain_message(source, disc_errors, fatal))
    return result


def run_reconcile_step(source: str, run_id: str, cfg: BinlakeConfig | None = None) -> ReconcileResult:
    """The reconcile step in this process, in every Spark mode: renew the source's lease, then the
    stored verdict when nothing new was ingested (no Delta write at all), else recompute it with
    delta-rs. Why no JVM: its data is a few rows per archived file (docs/architecture.md)."""
    cfg = cfg or load_config()
    get_plan(cfg, run_id, source)  # a source the run could not discover fails here, with the reason
    hold_source(cfg, source, run_id)  # renew; fails if another run took over an expired lease
    quick = reconcile_without_spark(cfg, source, run_id)
    return quick if quick is not None else step_reconcile(cfg, source, run_id)


# --------------------------------------------------------------------------- gold


#: what the gold step reads: unchanged versions (and config) mean unchanged gold tables
GOLD_CODE = ("spark_jobs.gold.job", "spark_jobs.gold.incremental", "spark_jobs.gold.inputs", "spark_jobs.gold.tables",
             "spark_jobs.gold.replay", "spark_jobs.gold.results", "spark_jobs.gold.schema_history",
             "spark_jobs.gold.status", "spark_jobs.gold.unions",
             "binlake.gold.types", "binlake.gold.state", "binlake.gold.plan", "binlake.gold.schema_history",
             "binlake.gold.seed", "binlake.gold.errors")
GOLD_INPUTS = ("silver.statements", "silver.row_changes", "silver.schema_history", "meta.gtid_reconciliation",
               "meta.gtid_coverage", "meta.gold_status")


def gold_inputs(cfg: BinlakeConfig, source: str) -> dict[str, Any]:
    """What the gold step of ``source`` reads, as a fingerprint: per input table the data files of
    the source's partition (delta-rs, no JVM), a digest of the source's config and of gold's code.

    Why data files: every write of a source's rows (even identical rows) adds new files, and
    other sources' writes do not touch its partition. Equal fingerprints since the last
    successful gold step mean nothing gold reads has changed; a difference re-runs gold (maybe
    needlessly, never skipped wrongly).
    """
    import hashlib

    from binlake.lake.delta_tables import add_actions, open_delta_table
    from binlake.lake.tables import table_location

    # [gold] (history tables, seed dumps) shapes the gold tables too
    out: dict[str, Any] = {"config": hashlib.sha256(repr((cfg.warehouse, cfg.source(source), cfg.gold))
                                                    .encode()).hexdigest(),
                           "code": _gold_code_digest()}
    for name in GOLD_INPUTS:
        table = open_delta_table(table_location(cfg.warehouse, name), cfg.s3)
        if table is None:
            out[name] = None
            continue
        actions = add_actions(table)
        mine = sorted(p for p, s in zip(actions["path"], actions.get("partition.source", []), strict=False)
                      if s == source)
        out[name] = hashlib.sha256("\n".join(mine).encode()).hexdigest()
    return out


def _gold_code_digest() -> str:
    """A digest of the code that shapes gold tables: an upgrade that changes it replays gold."""
    import hashlib
    import importlib.util

    digest = hashlib.sha256()
    for module in GOLD_CODE:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.origin:
            with open(spec.origin, "rb") as fh:
                digest.update(fh.read())
    return digest.hexdigest()


def _gold_inputs_key(source: str) -> str:
    return f"_sources/{source}/gold_inputs.json"


def gold_without_spark(cfg: BinlakeConfig, source: str, run_id: str) -> GoldStepResult | None:
    """A dry run writes no gold table; a night that ingested nothing, with every input of gold as
    the last successful gold step of the source left it, has nothing to replay."""
    import json

    from binlake.lake.storage import ObjectNotFound
    from binlake.runs import runs_store

    plan = get_plan(cfg, run_id, source)
    decoded = get_result(cfg, run_id, source, "decode", DecodeResult)
    if plan.dry_run:
        result = GoldStepResult(source=source, dry_run=True, spark=False)
    elif decoded is not None and not decoded.files:
        try:
            last = json.loads(runs_store(cfg).read_all(_gold_inputs_key(source)))
        except ObjectNotFound:
            return None
        if last != gold_inputs(cfg, source):
            return None
        result = GoldStepResult(source=source, spark=False)
        log.info("source %s: nothing new ingested and gold's inputs unchanged: no Spark started", source)
    else:
        return None
    put_doc(cfg, run_id, source, "gold", result)
    return result


def step_gold(spark: SparkSource, cfg: BinlakeConfig, source: str, run_id: str) -> GoldStepResult:
    """Bring the source's gold tables up to date (only tables whose inputs changed are replayed)."""
    import json

    from binlake.runs import runs_store
    from spark_jobs.gold.job import run_gold
    from spark_jobs.session import session_started

    res = run_gold(spark, cfg, source, f"{run_key(run_id)}.{source}")
    modes: dict[str, int] = {}
    for t in res.tables:
        modes[t.write_mode] = modes.get(t.write_mode, 0) + 1
    result = GoldStepResult(source=source, tables=len(res.tables), write_modes=modes,
                            rows=sum(t.rows for t in res.tables), schema_versions=res.schema_versions,
                            names=tuple(sorted(t.name for t in res.tables)[:XCOM_LIST_LIMIT]),
                            written=res.written(), seconds=round(res.seconds, 2),
                            unknown_schemas=tuple(f"gold.{t.name}: {t.schema_status}" for t in res.tables
                                                  if t.schema_status),
                            spark=session_started(spark))
    put_doc(cfg, run_id, source, "gold", result)
    runs_store(cfg).put(_gold_inputs_key(source), json.dumps(gold_inputs(cfg, source), sort_keys=True).encode())
    log.info("source %s: %d gold table(s) %s, %d rows, %d table(s) written, %.1fs", source, len(res.tables), modes,
             result.rows, len(result.written), res.seconds)
    return result


# --------------------------------------------------------------------------- data checks


def _duckdb_strings(values: list[str]) -> str:
    """A DuckDB list of string literals (DuckDB, like standard SQL, doubles quotes; Spark SQL does not)."""
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values)


def step_data_checks(cfg: BinlakeConfig, source: str, run_id: str) -> ChecksResult:
    """Checks over the files this run ingested: state recorded, per-file counts agree, keys unique.

    Fails, whatever the counts, when the source's reconcile did not succeed: a source with a GAP
    is not a checked source. Why without Spark: the checks read a few columns of the run's files
    only, so delta-rs and DuckDB (the engines of ``binlake sql``'s fast path) answer them in
    seconds, where a Spark application would spend most of a minute starting a JVM.
    """
    plan = get_plan(cfg, run_id, source)
    decoded = get_result(cfg, run_id, source, "decode", DecodeResult)
    reconciled = get_result(cfg, run_id, source, "reconcile", ReconcileResult)
    if reconciled is None or not reconciled.ok:
        why = "did not run" if reconciled is None else "failed"
        result = ChecksResult(source=source, note=f"reconcile {why}", ok=False)
        put_doc(cfg, run_id, source, "checks", result)
        raise DataCheckError(f"source {source}: not checked: its reconcile step {why} in run {run_id}")
    if plan.dry_run or not plan.files or decoded is None or not decoded.files:
        result = ChecksResult(source=source, note="dry run" if plan.dry_run else "nothing ingested")
        put_doc(cfg, run_id, source, "checks", result)
        return result
    failures = _check_ingested_files(cfg, source, plan)
    result = ChecksResult(source=source, checked_files=len(plan.files), failures=tuple(failures), ok=not failures)
    put_doc(cfg, run_id, source, "checks", result)
    if failures:
        raise DataCheckError(f"source {source}: {len(failures)} data check(s) failed:\n  " + "\n  ".join(failures))
    log.info("source %s: data checks passed on %d file(s)", source, len(plan.files))
    return result


def _check_ingested_files(cfg: BinlakeConfig, source: str, plan: RunPlan) -> list[str]:
    """The checks' failures (empty when they pass), through delta-rs + DuckDB."""
    import duckdb

    from binlake.lake.delta_tables import open_delta_table
    from binlake.lake.tables import table_location
    from spark_jobs.schemas import spec

    files = plan.file_names
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
    etags = {f.file: f.etag for f in plan.files}
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
    return failures


def run_data_checks(source: str, run_id: str, cfg: BinlakeConfig | None = None) -> ChecksResult:
    """The source's last step (no Spark): run the checks, then release the source's run lease."""
    cfg = cfg or load_config()
    try:
        return step_data_checks(cfg, source, run_id)
    finally:
        release_source(cfg, source, run_id)  # let the next run in


# --------------------------------------------------------------------------- the run's discover task


#: a source's discovery is tried this often in the discover task when it fails with an error that is not
#: binlake's own (storage unreachable, throttled): the task covers every source, so it retries per source
DISCOVER_ATTEMPTS = 3


def settle_without_spark(cfg: BinlakeConfig, source: str, run_id: str) -> str | None:
    """Finish the source's run here when no step of it needs Spark (nothing new and gold's inputs
    unchanged, or a dry run): each step's document, the data checks, the lease released; None then.
    Otherwise why its per-source tasks must run: the first step that needs Spark, or the failure a
    step reports (a GAP found before is reported again, by its own task, which alerts)."""
    from binlake.errors import BinlakeError

    try:
        for step in ("decode", "reconcile", "gold"):
            if WITHOUT_SPARK[step](cfg, source, run_id) is None:
                return f"{step} has work"
        run_data_checks(source, run_id, cfg)
    except BinlakeError as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    log.info("source %s: settled in the discover task (nothing for Spark to do)", source)
    return None


def discover_run(cfg: BinlakeConfig, sources: Sequence[str], run_id: str, params: Mapping[str, Any] | None = None,
                 *, backfill: bool = False, dag_id: str = "",
                 holder_finished: Callable[[Any], bool] | None = None) -> RunDiscovery:
    """Discover every source of the run in this process (:func:`binlake.runs.discover`), settle the
    ones that need no Spark (:func:`settle_without_spark`), and name the rest (see
    :class:`binlake.step_results.RunDiscovery`). A source whose discovery fails does not stop the
    others: the reason goes to its ``discovery_failed`` document, and its first step fails with it."""
    import tenacity

    from binlake.errors import BinlakeError
    from binlake.lake.delta_tables import reused_delta_tables
    from binlake.runs import DISCOVERY_FAILED, discover
    from binlake.step_results import DiscoverResult

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(DISCOVER_ATTEMPTS), wait=tenacity.wait_exponential(multiplier=2, max=30),
        retry=tenacity.retry_if_not_exception_type(BinlakeError), reraise=True,
        before_sleep=lambda state: log.warning("discovery failed (attempt %d), retrying: %s", state.attempt_number,
                                               state.outcome.exception() if state.outcome else ""))
    busy: list[str] = []
    settled: list[str] = []
    found: list[DiscoverResult] = []
    failed: dict[str, str] = {}
    reasons: dict[str, str] = {}
    with reused_delta_tables():  # the same meta tables, once per source
        for source in sources:
            try:
                result = retrying(discover, source, run_id, params, backfill=backfill, cfg=cfg, dag_id=dag_id,
                                  holder_finished=holder_finished)
            except Exception as exc:  # noqa: BLE001 - one source's failure is reported by its own task
                failed[source] = f"{type(exc).__name__}: {exc}" if not isinstance(exc, BinlakeError) else str(exc)
                put_doc(cfg, run_id, source, DISCOVERY_FAILED, {"error": failed[source]})
                log.error("source %s: discovery failed: %s", source, failed[source])
                busy.append(source)
                reasons[source] = "discovery failed"
                continue
            found.append(result)
            why = settle_without_spark(cfg, source, run_id)
            if why is None:
                settled.append(source)
            else:
                busy.append(source)
                reasons[source] = why
                log.info("source %s: its steps run as tasks: %s", source, why)
    log.info("run %s: %d source(s) with steps to run %s, %d settled here", run_id, len(busy),
             busy[:XCOM_LIST_LIMIT], len(settled))
    return RunDiscovery(sources=tuple(sources), busy=tuple(busy), settled=tuple(settled), found=tuple(found),
                        failed=failed, reasons=reasons)


StepResult = DecodeResult | ReconcileResult | GoldStepResult
#: the steps that need Spark when they have work (``python -m spark_jobs`` runs these and ``reconcile``)
STEPS: dict[str, Callable[[SparkSource, BinlakeConfig, str, str], StepResult]] = {
    "decode": step_decode,
    "gold": step_gold,
}
#: the steps run in-process without a JVM whatever ``[spark].mode`` says
WITHOUT_JVM: dict[str, Callable[[str, str, BinlakeConfig | None], StepResult]] = {
    "reconcile": run_reconcile_step,
}
#: each Spark step's answer when it needs no Spark (None: Spark must run)
WITHOUT_SPARK: dict[str, Callable[[BinlakeConfig, str, str], StepResult | None]] = {
    "decode": decode_without_spark,
    "reconcile": reconcile_without_spark,
    "gold": gold_without_spark,
}


def run_spark_step(step: str, source: str, run_id: str, cfg: BinlakeConfig | None = None) -> StepResult:
    """Run one step in this process (the session is reused when one runs): what an in-process
    Airflow task and ``python -m spark_jobs`` (spark-submit) both call. A step with nothing for
    Spark to do (dry run, nothing new) answers without starting a session; ``reconcile`` never
    starts one (:data:`WITHOUT_JVM`); the others start it when their work first needs it
    (:class:`spark_jobs.session.LazySession`: a small night's decode never does)."""
    from spark_jobs.progress import spark_progress
    from spark_jobs.session import LazySession, build_spark_session
    from spark_jobs.spark_logs import relay_jvm_stderr

    cfg = cfg or load_config()
    if step in WITHOUT_JVM:
        return WITHOUT_JVM[step](source, run_id, cfg)
    get_plan(cfg, run_id, source)  # a source the run could not discover fails here, with the reason
    hold_source(cfg, source, run_id)  # renew; fails if another run took over an expired lease
    quick = WITHOUT_SPARK[step](cfg, source, run_id)
    if quick is not None:
        return quick
    plan = get_plan(cfg, run_id, source)
    size = sum(f.size for f in plan.files) if step == "decode" else 0
    with contextlib.ExitStack() as stack:

        def start() -> SparkSession:
            with relay_jvm_stderr():  # Spark's own log lines at their level, not as the task's stderr
                spark = build_spark_session(cfg, f"binlake-{step}")
            _ensure_pyspark_temp_dir(spark)
            stack.enter_context(spark_progress(spark, step, source, files=len(plan.files) if size else 0,
                                               total_bytes=size))
            return spark

        return STEPS[step](LazySession(start), cfg, source, run_id)


def _ensure_pyspark_temp_dir(spark: SparkSession) -> None:
    """Recreate PySpark's driver temp dir if it vanished under a long-lived session.

    Seen on a shared, busy host where /tmp/spark-* of a live JVM disappeared between two tasks
    of the same dag.test() process: parallelize()/createDataFrame() then fail with ENOENT.
    """
    from spark_jobs.session import is_connect

    if is_connect(spark):
        return  # a Spark Connect client has no driver temp dir (nor a sparkContext)
    temp = getattr(spark.sparkContext, "_temp_dir", None)
    if temp and not os.path.isdir(temp):
        log.warning("PySpark temp dir %s vanished; recreating it", temp)
        os.makedirs(temp, exist_ok=True)
