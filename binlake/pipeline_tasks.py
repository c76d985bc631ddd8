"""The task logic behind the binlake DAGs: discover -> decode (Spark) -> reconcile -> data checks -> summary.

Why here and not in ``dags/``: DAG files are parsed often and must stay thin; this module holds
the callables (tested without Airflow too) and :func:`wire_pipeline`, which adds the same task
graph to the nightly and the backfill DAG:

* one **mapped task group per source** (``per_source``, expanded over the source names), so a
  source whose discovery, decode or checks fail does not stop the others;
* inside it ``discover`` (plain Python: heads/tails via :mod:`binlake.discovery`, plan via
  :mod:`binlake.ingest_state`) -> ``decode`` (Spark: ``spark_jobs.ingest.run_ingest``) ->
  ``reconcile`` (Spark: ``spark_jobs.reconcile.run_reconcile``; **fails** on a GAP / CHAIN_BREAK
  or a broken chain reported by discovery) -> ``data_checks`` (Spark: per-file counts agree,
  table keys unique);
* ``summary`` (runs whatever happened upstream; fails the DAG run when any source failed, so the
  run's state tells the truth).

Spark steps run **in-process** (``[spark].mode = "local"``, the session comes from
:func:`binlake.spark.build_spark_session`) or through **SparkSubmitOperator** (``"submit"``) with
this file as the application: ``spark-submit binlake/pipeline_tasks.py decode --source S
--run-id R``. Same DAG code, chosen by configuration alone.

Steps hand over through small JSON documents in the warehouse
(``<warehouse>/_binlake/runs/<run>/<source>/<step>.json``: the discovery, the ingest plan, each
step's result), not through big XComs, so the same hand-over works when a step runs on a
cluster; XCom carries short summaries.

Alerting: :func:`alert_on_failure` is the ``on_failure_callback`` of every task and of the DAGs.
It logs ``BINLAKE ALERT ...``, appends the alert to ``<state_dir>/alerts.jsonl`` and calls the
hook named by ``$BINLAKE_ALERT_HOOK`` (``module:function``, called with the alert dict) or
registered with :func:`register_alert_hook` - the place to plug Slack, PagerDuty, e-mail.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file by spark-submit: make `import binlake` work
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from binlake.config import BinlakeConfig, load_config

log = logging.getLogger("binlake.pipeline")

GROUP_ID = "per_source"
SPARK_STEPS = ("decode", "reconcile", "data_checks")
#: reconciliation statuses that fail the run (OVERLAP / DUPLICATE are reported, not fatal)
FATAL_RECONCILIATION = ("GAP", "CHAIN_BREAK")
#: tables each step writes (Airflow Assets / outlets)
DECODE_TABLES = ("bronze.events", "bronze.quarantine", "silver.transactions", "silver.row_changes",
                 "silver.statements", "meta.binlog_files", "meta.ingested_files")
RECONCILE_TABLES = ("meta.gtid_coverage", "meta.gtid_reconciliation")
XCOM_LIST_LIMIT = 50


class ChainBrokenError(RuntimeError):
    """Reconciliation found a GAP / CHAIN_BREAK, or discovery reported a broken chain."""


class IngestFailedError(RuntimeError):
    """The decode job could not ingest some files."""


class DataCheckError(RuntimeError):
    """A data check over the ingested files failed."""


class RunFailedError(RuntimeError):
    """The run summary: at least one source did not complete cleanly."""


# --------------------------------------------------------------------------- run folder


def run_key(run_id: str) -> str:
    """A path-safe form of an Airflow run id (``scheduled__2026-01-01T02:00:00+00:00`` ...)."""
    key = re.sub(r"[^A-Za-z0-9._-]+", "_", run_id).strip("._")
    return key or "run"


def _runs_store(cfg: BinlakeConfig) -> Any:
    from binlake.storage import open_object_store

    return open_object_store(cfg.warehouse.rstrip("/") + "/_binlake/runs/", cfg.s3)


def put_doc(cfg: BinlakeConfig, run_id: str, source: str, step: str, doc: Mapping[str, Any]) -> str:
    """Store one step's JSON document for the run; returns its URI."""
    info = _runs_store(cfg).put(f"{run_key(run_id)}/{source}/{step}.json",
                                json.dumps(doc, sort_keys=True, default=str).encode())
    return info.uri


def get_doc(cfg: BinlakeConfig, run_id: str, source: str, step: str) -> dict[str, Any] | None:
    from binlake.storage import ObjectNotFound

    try:
        return json.loads(_runs_store(cfg).read_all(f"{run_key(run_id)}/{source}/{step}.json"))
    except ObjectNotFound:
        return None


def source_leases(cfg: BinlakeConfig) -> Any:
    """The per-source run leases of the warehouse (:mod:`binlake.leases`)."""
    from binlake.leases import SourceLeases, lease_backend

    return SourceLeases(lease_backend(cfg.warehouse, cfg.s3))


def hold_source(cfg: BinlakeConfig, source: str, run_id: str) -> None:
    """Take or renew the source's lease for this run (LeaseHeldError if another run holds it)."""
    lease = source_leases(cfg).acquire(source, run_id)
    log.info("source %s: run lease held by %s until %s", source, run_id,
             time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(lease.expires_at)))


def release_source(cfg: BinlakeConfig, source: str, run_id: str) -> None:
    """Drop the source's lease if this run holds it (never raises: the lease expires anyway)."""
    try:
        if source_leases(cfg).release(source, run_id):
            log.info("source %s: run lease released by %s", source, run_id)
    except Exception as exc:  # noqa: BLE001 - an unreleased lease only delays the next run
        log.warning("source %s: could not release the run lease of %s: %s", source, run_id, exc)


# --------------------------------------------------------------------------- params


def normalize_params(params: Mapping[str, Any] | None, *, backfill: bool) -> dict[str, Any]:
    """Run parameters: nightly runs use the defaults; the backfill DAG passes its params.

    ``mode``: ``nightly`` | ``missing`` (only files not yet ingested) | ``reprocess`` (ingest the
    range again). ``from_file``/``to_file`` (series order, inclusive) and/or ``from_date``/
    ``to_date`` (object last-modified, ``YYYY-MM-DD``, to_date exclusive); ``dry_run``.
    """
    p = dict(params or {})
    out: dict[str, Any] = {"mode": "nightly", "from_file": None, "to_file": None, "from_time": None,
                           "to_time": None, "dry_run": False}
    if not backfill:
        return out
    mode = (p.get("mode") or "missing").strip()
    if mode not in ("missing", "reprocess"):
        raise ValueError(f"backfill mode must be 'missing' or 'reprocess', got {mode!r}")
    out["mode"] = mode
    out["from_file"] = p.get("from_file") or None
    out["to_file"] = p.get("to_file") or None
    out["from_time"] = _date_ts(p.get("from_date"))
    out["to_time"] = _date_ts(p.get("to_date"))
    out["dry_run"] = bool(p.get("dry_run"))
    return out


def _date_ts(value: Any) -> float | None:
    if value in (None, ""):
        return None
    import datetime as dt

    d = dt.date.fromisoformat(str(value)[:10])
    return dt.datetime(d.year, d.month, d.day, tzinfo=dt.UTC).timestamp()


def resolve_sources(requested: Any, cfg: BinlakeConfig | None = None) -> list[str]:
    """The source names a run covers: all configured ones, or the requested subset (validated)."""
    cfg = cfg or load_config()
    names = [s.name for s in cfg.sources]
    if requested in (None, "", [], "*", "all"):
        return names
    wanted = [requested] if isinstance(requested, str) else list(requested)
    wanted = [w.strip() for item in wanted for w in str(item).split(",") if w.strip()]
    unknown = [w for w in wanted if w not in names]
    if unknown:
        raise ValueError(f"unknown source(s) {unknown}; configured: {names}")
    return wanted


# --------------------------------------------------------------------------- discover (plain Python)


def discover(source: str, run_id: str, params: Mapping[str, Any] | None = None, *, backfill: bool = False,
             cfg: BinlakeConfig | None = None) -> dict[str, Any]:
    """Discover the source's rotated files, plan what this run ingests, store both; XCom summary."""
    from binlake.discovery import discover_source
    from binlake.ingest_state import load_known_files, plan_ingest
    from binlake.nightly import export_airflow_aws_credentials
    from binlake.storage import open_object_store

    cfg = cfg or load_config()
    export_airflow_aws_credentials(cfg)
    p = normalize_params(params, backfill=backfill)
    src = cfg.source(source)
    hold_source(cfg, source, run_id)  # held until the source's data_checks / the run summary
    known = load_known_files(cfg, source)
    store = open_object_store(src.uri, cfg.s3)
    disc = discover_source(store, source, known=known, reuse_known=p["mode"] != "reprocess")
    plan = plan_ingest(disc, p["mode"], from_file=p["from_file"], to_file=p["to_file"],
                       from_time=p["from_time"], to_time=p["to_time"])
    put_doc(cfg, run_id, source, "discovery", disc.as_dict())
    plan_doc = plan.as_dict() | {"dry_run": p["dry_run"], "run_id": run_id}
    put_doc(cfg, run_id, source, "plan", plan_doc)
    errors = [str(i) for i in disc.errors]
    warnings = [str(i) for i in disc.issues if i.severity == "warning"]
    files = [f["file"] for f in plan.files]
    log.info("%s", disc.summary())
    log.info("source %s: plan (%s%s): %d file(s) to ingest %s; %d already ingested", source, p["mode"],
             ", dry run" if p["dry_run"] else "", len(files), files[:XCOM_LIST_LIMIT], len(plan.skipped))
    return {
        "source": source, "mode": p["mode"], "dry_run": p["dry_run"], "objects": disc.objects,
        "bytes_read": disc.bytes_read, "seconds": round(disc.seconds, 3),
        "to_ingest": len(files), "files": files[:XCOM_LIST_LIMIT], "skipped": len(plan.skipped),
        "errors": errors[:XCOM_LIST_LIMIT], "warnings": warnings[:XCOM_LIST_LIMIT],
        "chain_broken": bool(errors),
    }


# --------------------------------------------------------------------------- Spark steps


def step_decode(spark: Any, cfg: BinlakeConfig, source: str, run_id: str) -> dict[str, Any]:
    """Ingest the planned files (``run_ingest``); fails when a file could not be decoded."""
    from spark_jobs.ingest import run_ingest

    plan = get_doc(cfg, run_id, source, "plan")
    if plan is None:
        raise RuntimeError(f"no ingest plan for source {source} in run {run_id}: did discover run?")
    if plan.get("dry_run"):
        doc = {"source": source, "dry_run": True, "would_ingest": [f["file"] for f in plan["files"]], "ok": True}
        put_doc(cfg, run_id, source, "decode", doc)
        log.info("dry run: source %s would ingest %d file(s): %s", source, len(plan["files"]),
                 doc["would_ingest"][:XCOM_LIST_LIMIT])
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
            raise ChainBrokenError(_chain_message(source, disc_errors, []))
        return doc
    res = run_reconcile(spark, cfg, run_id=f"{run_key(run_id)}.{source}", sources=[source])
    fatal = [p for p in res.problems if p["status"] in FATAL_RECONCILIATION]
    doc = {"source": source, "dry_run": False, "files": res.files, "statuses": res.statuses,
           "problems": res.problems[:XCOM_LIST_LIMIT], "discovery_errors": disc_errors,
           "ok": not fatal and not disc_errors}
    put_doc(cfg, run_id, source, "reconcile", doc)
    log.info("source %s: GTID reconciliation over %d file(s): %s", source, res.files, res.statuses)
    if fatal or disc_errors:
        raise ChainBrokenError(_chain_message(source, disc_errors, fatal))
    return doc


def _chain_message(source: str, disc_errors: Sequence[str], fatal: Sequence[Mapping[str, Any]]) -> str:
    lines = [f"source {source}: binlog chain broken"]
    for p in fatal:
        extra = []
        if p.get("missing_files"):
            extra.append("missing files " + ", ".join(p["missing_files"]))
        if p.get("missing_gtids"):
            extra.append(f"missing GTIDs {p['missing_gtids']}")
        lines.append(f"  gtid_reconciliation: {p['file']}: {p['status']}"
                     + (f" ({'; '.join(extra)})" if extra else "") + f": {p.get('detail', '')}")
    for e in disc_errors:
        lines.append(f"  discovery: {e}")
    return "\n".join(lines)


def step_data_checks(spark: Any, cfg: BinlakeConfig, source: str, run_id: str) -> dict[str, Any]:
    """Checks over the files this run ingested: state recorded, counts agree, keys unique."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from spark_jobs.ingest import files_predicate, table_path
    from spark_jobs.schemas import spec

    plan = get_doc(cfg, run_id, source, "plan") or {}
    decode = get_doc(cfg, run_id, source, "decode") or {}
    files = [f["file"] for f in plan.get("files", [])]
    if plan.get("dry_run") or not files or not decode:
        doc = {"source": source, "checked_files": 0, "failures": [], "ok": True,
               "note": "dry run" if plan.get("dry_run") else "nothing ingested"}
        put_doc(cfg, run_id, source, "checks", doc)
        return doc
    failures: list[str] = []
    pred = files_predicate((source, f) for f in files)
    state = {r["file"]: r.asDict() for r in
             spark.read.format("delta").load(table_path(cfg, "meta.ingested_files")).where(pred).collect()}
    etags = {f["file"]: f.get("etag") for f in plan["files"]}
    for name in files:
        row = state.get(name)
        if row is None:
            failures.append(f"{name}: not recorded in meta.ingested_files")
        elif row["status"] == "failed":
            failures.append(f"{name}: status failed in meta.ingested_files")
        elif (row["etag"] or None) != (etags[name] or None):
            failures.append(f"{name}: meta.ingested_files etag {row['etag']} != discovered {etags[name]}")
    counted = {r["file"]: r["n"] for r in spark.read.format("delta").load(table_path(cfg, "bronze.events"))
               .where(pred).groupBy("file").agg(F.count(F.lit(1)).alias("n")).collect()}
    for name, row in state.items():
        if int(row.get("events") or 0) != int(counted.get(name, 0)):
            failures.append(f"{name}: bronze.events has {counted.get(name, 0)} rows, "
                            f"meta.ingested_files says {row.get('events')}")
        if int(row.get("events") or 0) == 0:
            failures.append(f"{name}: no events decoded")
    for name in ("bronze.events", "silver.transactions", "silver.row_changes", "silver.statements"):
        path = table_path(cfg, name)
        if not DeltaTable.isDeltaTable(spark, path):
            continue
        key = list(spec(name).key)
        dup = (spark.read.format("delta").load(path).where(pred).groupBy(*key).count()
               .where("count > 1").limit(3).collect())
        if dup:
            failures.append(f"{name}: duplicate keys {key}: {[tuple(r)[:-1] for r in dup]}")
    doc = {"source": source, "checked_files": len(files), "failures": failures, "ok": not failures}
    put_doc(cfg, run_id, source, "checks", doc)
    if failures:
        raise DataCheckError(f"source {source}: {len(failures)} data check(s) failed:\n  " + "\n  ".join(failures))
    log.info("source %s: data checks passed on %d file(s)", source, len(files))
    return doc


STEPS: dict[str, Callable[[Any, BinlakeConfig, str, str], dict[str, Any]]] = {
    "decode": step_decode,
    "reconcile": step_reconcile,
    "data_checks": step_data_checks,
}


def run_spark_step(step: str, source: str, run_id: str, cfg: BinlakeConfig | None = None) -> dict[str, Any]:
    """Local mode: run one Spark step in this process (the session is reused when one runs)."""
    from binlake.nightly import export_airflow_aws_credentials
    from binlake.spark import build_spark_session

    cfg = cfg or load_config()
    export_airflow_aws_credentials(cfg)
    if step != "data_checks":
        hold_source(cfg, source, run_id)  # renew; fails if another run took over an expired lease
    try:
        spark = build_spark_session(cfg, f"binlake-{step}")
        _ensure_pyspark_temp_dir(spark)
        return STEPS[step](spark, cfg, source, run_id)
    finally:
        if step == "data_checks":  # the source's last step: let the next run in
            release_source(cfg, source, run_id)


def _ensure_pyspark_temp_dir(spark: Any) -> None:
    """Recreate PySpark's driver temp dir if it vanished under a long-lived session.

    Seen on a shared, busy host where /tmp/spark-* of a live JVM disappeared between two tasks
    of the same dag.test() process: parallelize()/createDataFrame() then fail with ENOENT.
    """
    temp = getattr(spark.sparkContext, "_temp_dir", None)
    if temp and not os.path.isdir(temp):
        log.warning("PySpark temp dir %s vanished; recreating it", temp)
        os.makedirs(temp, exist_ok=True)


# --------------------------------------------------------------------------- summary


def summarize(sources: Sequence[str], run_id: str, cfg: BinlakeConfig | None = None) -> dict[str, Any]:
    """Collect every source's step documents, log a run summary, fail when a source is not clean."""
    cfg = cfg or load_config()
    out: dict[str, Any] = {"run_id": run_id, "sources": {}, "ok": True}
    lines = [f"binlake run {run_id}"]
    problems: list[str] = []
    for source in sources:
        release_source(cfg, source, run_id)  # normally done by data_checks; here if it never ran
        docs = {step: get_doc(cfg, run_id, source, step) for step in ("plan", "decode", "reconcile", "checks")}
        disc = get_doc(cfg, run_id, source, "discovery")
        plan, dec, rec, chk = docs["plan"], docs["decode"], docs["reconcile"], docs["checks"]
        s: dict[str, Any] = {
            "discovered": disc["objects"] if disc else None,
            "planned": len(plan["files"]) if plan else None,
            "ingested": dec.get("files") if dec else None,
            "rows": dec.get("rows") if dec else None,
            "reconciliation": rec.get("statuses") if rec else None,
            "checks_ok": chk.get("ok") if chk else None,
            "dry_run": bool(plan and plan.get("dry_run")),
        }
        missing = [step for step, d in (("discover", plan), ("decode", dec), ("reconcile", rec), ("data_checks", chk))
                   if d is None]
        bad = [step for step, d in (("decode", dec), ("reconcile", rec), ("data_checks", chk))
               if d is not None and not d.get("ok", True)]
        s["ok"] = not missing and not bad
        if not s["ok"]:
            why = (f"did not complete: {', '.join(missing)}" if missing else "") + \
                  ("; " if missing and bad else "") + (f"failed: {', '.join(bad)}" if bad else "")
            problems.append(f"source {source}: {why}")
            if rec and rec.get("problems"):
                for p in rec["problems"]:
                    if p["status"] in FATAL_RECONCILIATION:
                        problems.append(f"  {p['file']}: {p['status']} {p.get('detail', '')}")
            for e in (rec or {}).get("discovery_errors", []):
                problems.append(f"  discovery: {e}")
        out["sources"][source] = s
        lines.append(f"  {source}: objects={s['discovered']} planned={s['planned']} ingested={s['ingested']} "
                     f"rows={s['rows']} reconciliation={s['reconciliation']} checks_ok={s['checks_ok']}"
                     f"{' (dry run)' if s['dry_run'] else ''} -> {'OK' if s['ok'] else 'FAILED'}")
    out["ok"] = not problems
    out["problems"] = problems
    for line in lines:
        log.info("%s", line)
    _runs_store(cfg).put(f"{run_key(run_id)}/summary.json", json.dumps(out, sort_keys=True, default=str).encode())
    if problems:
        raise RunFailedError("run failed:\n" + "\n".join(problems))
    return out


# --------------------------------------------------------------------------- alerts

_ALERT_HOOKS: list[Callable[[dict[str, Any]], None]] = []


def register_alert_hook(fn: Callable[[dict[str, Any]], None]) -> None:
    """Call ``fn(alert)`` on every task / DAG-run failure (Slack, PagerDuty, e-mail ...)."""
    _ALERT_HOOKS.append(fn)


def alert_on_failure(context: Mapping[str, Any]) -> None:
    """``on_failure_callback`` for binlake tasks and DAGs: log, record, call the alert hooks."""
    ti = context.get("ti") or context.get("task_instance")
    dag_run = context.get("dag_run")
    exc = context.get("exception")
    alert = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "dag_id": getattr(dag_run, "dag_id", None) or getattr(ti, "dag_id", None),
        "run_id": getattr(dag_run, "run_id", None) or context.get("run_id"),
        "task_id": getattr(ti, "task_id", None),
        "map_index": getattr(ti, "map_index", None),
        "reason": str(exc) if exc is not None else str(context.get("reason") or "failed"),
        "kind": type(exc).__name__ if exc is not None else "DagRunFailed",
    }
    log.error("BINLAKE ALERT %s", json.dumps(alert, default=str))
    try:
        cfg = load_config()
        path = Path(cfg.state_dir) / "alerts.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(alert, default=str) + "\n")
    except Exception as e:  # noqa: BLE001 - alerting must never raise
        log.warning("could not record the alert: %s", e)
    hooks = list(_ALERT_HOOKS)
    spec = os.environ.get("BINLAKE_ALERT_HOOK")
    if spec:
        try:
            import importlib

            mod, _, fn = spec.partition(":")
            hooks.append(getattr(importlib.import_module(mod), fn))
        except Exception as e:  # noqa: BLE001
            log.warning("alert hook %s not loadable: %s", spec, e)
    for hook in hooks:
        try:
            hook(alert)
        except Exception as e:  # noqa: BLE001
            log.warning("alert hook %r failed: %s", hook, e)


# --------------------------------------------------------------------------- DAG wiring


def table_assets(cfg: BinlakeConfig, tables: Sequence[str]) -> list[Any]:
    """One Airflow Asset per Delta table: URI (and name) = the table location (``s3://``/``file://``),
    ``extra={"table": "bronze.events"}``."""
    from airflow.sdk import Asset

    from binlake.tables import table_location

    out = []
    for name in tables:
        loc = table_location(cfg.warehouse, name)
        if "://" in loc:
            uri = "s3://" + loc.split("://", 1)[1] if loc.startswith(("s3a://", "s3n://")) else loc
        else:
            uri = "file://" + loc
        # name = URI (Airflow's default): asset names must be unique, and a fixed name such as
        # "binlake.bronze.events" bound to two warehouses (a config change, a second deployment
        # sharing the metadata DB) leaves the newer asset inactive and fails the producing task.
        out.append(Asset(uri=uri, group="binlake", extra={"table": name}))
    return out


def _spark_operator(step: str, cfg: BinlakeConfig, outlets: list[Any], trigger_rule: str = "all_success",
                    retries: int = 0) -> Any:
    """The operator of a Spark step: in-process @task (local) or SparkSubmitOperator (submit)."""
    from datetime import timedelta

    if cfg.spark.mode == "submit":
        from airflow.providers.apache.spark.operators.spark_submit import (
            SparkSubmitOperator,
        )

        from binlake.spark import spark_submit_kwargs

        env = {"BINLAKE_CONFIG": cfg.config_path} if cfg.config_path else None
        source_tpl = ("{{ ti.xcom_pull(task_ids='" + GROUP_ID + ".discover', map_indexes=ti.map_index)['source'] }}")
        return SparkSubmitOperator(
            task_id=step,
            application=str(Path(__file__).resolve()),
            application_args=[step, "--source", source_tpl, "--run-id", "{{ run_id }}"],
            name=f"binlake-{step}",
            env_vars=env,
            outlets=outlets,
            trigger_rule=trigger_rule,
            retries=retries,
            retry_delay=timedelta(seconds=60),
            **spark_submit_kwargs(cfg),
        )
    from airflow.sdk import task

    @task(task_id=step, outlets=outlets, trigger_rule=trigger_rule, retries=retries,
          retry_delay=timedelta(seconds=60))
    def spark_step(discovered: dict[str, Any], **context: Any) -> dict[str, Any]:
        return run_spark_step(step, discovered["source"], context["run_id"])

    return spark_step


def wire_pipeline(cfg: BinlakeConfig, *, backfill: bool) -> Any:
    """Add the per-source mapped task group and the summary to the DAG being defined.

    Nightly: expanded over the configured sources (known when the file is parsed). Backfill: a
    ``sources`` task resolves ``params.source`` at run time and the group expands over its output.
    """
    from datetime import timedelta

    from airflow.sdk import task, task_group

    # Retries where a retry can help (S3 / Spark hiccups); a broken chain or a failed data check
    # is deterministic and fails at once (and alerts).
    @task(task_id="discover", retries=2, retry_delay=timedelta(seconds=30), retry_exponential_backoff=True)
    def discover_task(source: str, **context: Any) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowFailException

        from binlake.leases import LeaseHeldError

        try:
            return discover(source, context["run_id"], context.get("params"), backfill=backfill)
        except LeaseHeldError as exc:  # another run has the source: retrying in 30 s would not help
            raise AirflowFailException(str(exc)) from exc

    decode_assets = table_assets(cfg, DECODE_TABLES)
    reconcile_assets = table_assets(cfg, RECONCILE_TABLES)
    local = cfg.spark.mode != "submit"

    @task_group(group_id=GROUP_ID)
    def per_source(source: str) -> Any:
        # operators are created inside the group so they belong to (and are mapped with) it
        found = discover_task(source)
        decode_op = _spark_operator("decode", cfg, decode_assets, retries=1)
        reconcile_op = _spark_operator("reconcile", cfg, reconcile_assets)
        checks_op = _spark_operator("data_checks", cfg, [], trigger_rule="all_done")
        if local:
            decoded, reconciled, checked = decode_op(found), reconcile_op(found), checks_op(found)
        else:
            decoded, reconciled, checked = decode_op, reconcile_op, checks_op
            found >> decoded
        decoded >> reconciled >> checked
        return checked

    if backfill:
        @task(task_id="sources")
        def sources_task(**context: Any) -> list[str]:
            return resolve_sources((context.get("params") or {}).get("source"))

        names: Any = sources_task()
    else:
        names = [s.name for s in cfg.sources]

    groups = per_source.expand(source=names)

    @task(task_id="summary", trigger_rule="all_done")
    def summary_task(source_names: Any = None, **context: Any) -> dict[str, Any]:
        wanted = list(source_names) if source_names is not None else [s.name for s in load_config().sources]
        return summarize(wanted, context["run_id"])

    summary = summary_task(names) if backfill else summary_task()
    groups >> summary
    return summary


# --------------------------------------------------------------------------- spark-submit entry


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit binlake/pipeline_tasks.py STEP --source NAME --run-id RUN [--config FILE]``."""
    ap = argparse.ArgumentParser(prog="binlake-pipeline")
    ap.add_argument("step", choices=sorted(STEPS))
    ap.add_argument("--source", required=True)
    ap.add_argument("--run-id", required=True)
    ap.add_argument("--config", default=None)
    args = ap.parse_args(list(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cfg = load_config(args.config)
    try:
        result = run_spark_step(args.step, args.source, args.run_id, cfg)
    except (ChainBrokenError, IngestFailedError, DataCheckError) as exc:
        print(str(exc), file=sys.stderr)
        return 3
    print(json.dumps(result, sort_keys=True, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
