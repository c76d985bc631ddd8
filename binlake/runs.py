"""One pipeline run of one source, without Spark and without Airflow: plan, hand-over, leases, summary.

A run (nightly or backfill) processes each source as ``discover -> decode -> reconcile -> gold ->
data_checks``, then a ``summary`` over all sources. This module holds the parts that need neither
Spark nor Airflow, so the Spark steps (:mod:`spark_jobs.steps`), the Airflow tasks
(:mod:`orchestration`) and the tests share them:

* the **run folder**: steps hand over through small JSON documents in the warehouse
  (``<warehouse>/_binlake/runs/<run>/<source>/<step>.json``: the discovery, the ingest plan, each
  step's result), not through big XComs, so the same hand-over works when a step runs on a
  cluster (spark-submit) or in-process;
* the run **parameters** (nightly defaults, the backfill DAG's params) and the source list;
* :func:`discover` (plain Python: heads/tails via :mod:`binlake.discovery.discover`, the plan via
  :mod:`binlake.ingest.state`), which also takes the source's run lease (:mod:`binlake.lake.leases`);
* :func:`run_for_sources`: one step for a batch of sources in one task (``[pipeline]
  sources_per_task``), each source on its own: one's failure neither stops nor hides the others;
* :func:`summarize`: every source's documents into one verdict; it fails when a source did not
  complete cleanly, so the run's state tells the truth.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

from binlake.config import BinlakeConfig, load_config
from binlake.errors import BinlakeError
from binlake.step_results import (
    BinlogObject,
    ChecksResult,
    DecodeResult,
    DiscoverResult,
    GoldStepResult,
    ReconcileProblem,
    ReconcileResult,
    RunPlan,
    RunSummary,
    SourceSummary,
    from_doc,
    to_doc,
)

log = logging.getLogger("binlake.pipeline")

#: the run-folder document each step writes
STEP_DOCS = {"discover": "plan", "decode": "decode", "reconcile": "reconcile", "gold": "gold",
             "data_checks": "checks"}
#: reconciliation statuses that fail the run (OVERLAP / DUPLICATE are reported, not fatal)
FATAL_RECONCILIATION = ("GAP", "CHAIN_BREAK")
#: the tables each step writes (Airflow Assets / outlets); gold tables are per source table
STEP_TABLES: dict[str, tuple[str, ...]] = {
    "decode": ("bronze.events", "bronze.quarantine", "silver.transactions", "silver.row_changes",
               "silver.statements", "meta.binlog_files", "meta.ingested_files"),
    "reconcile": ("meta.gtid_coverage", "meta.gtid_reconciliation"),
    "gold": ("silver.schema_history", "meta.gold_status"),  # + gold.<source>__<db>__<table>, known at run time
    "data_checks": (),
}
XCOM_LIST_LIMIT = 50
#: the run-folder document of a source the run's discover task could not discover (``{"error": ...}``)
DISCOVERY_FAILED = "discovery_failed"
#: the result class of each step's document
STEP_RESULTS: dict[str, type] = {"discover": RunPlan, "decode": DecodeResult, "reconcile": ReconcileResult,
                                 "gold": GoldStepResult, "data_checks": ChecksResult}
R = TypeVar("R")


class ChainBrokenError(BinlakeError):
    """Reconciliation found a GAP / CHAIN_BREAK, or discovery reported a broken chain."""


class IngestFailedError(BinlakeError):
    """The decode job could not ingest some files."""


class DataCheckError(BinlakeError):
    """A data check over the ingested files failed."""


class RunFailedError(BinlakeError):
    """The run summary: at least one source did not complete cleanly."""


class RunParamsError(BinlakeError, ValueError):
    """A run parameter (backfill mode, date, source name) is not valid."""


class MissingPlanError(BinlakeError):
    """A Spark step found no ingest plan: its run's discover step did not run."""


class SourcesFailedError(BinlakeError):
    """A step failed for more than one source of its task (``[pipeline] sources_per_task`` > 1);
    the message names each source and its reason (one failure is raised as itself)."""


class DiscoveryFailedError(BinlakeError):
    """The run's discover task could not discover the source (its lease is held by another run, an
    archived object was replaced, storage failed after retries): the source's first step fails with it."""


# --------------------------------------------------------------------------- run folder


def run_key(run_id: str) -> str:
    """A path-safe form of an Airflow run id (``scheduled__2026-01-01T02:00:00+00:00`` ...)."""
    key = re.sub(r"[^A-Za-z0-9._-]+", "_", run_id).strip("._")
    return key or "run"


def runs_store(cfg: BinlakeConfig) -> Any:
    from binlake.lake.storage import open_object_store

    return open_object_store(cfg.warehouse.rstrip("/") + "/_binlake/runs/", cfg.s3)


def put_doc(cfg: BinlakeConfig, run_id: str, source: str, step: str, doc: Any) -> str:
    """Store one step's JSON document (a step result dataclass, or a plain mapping) for the run;
    returns its URI."""
    body = dict(doc) if isinstance(doc, Mapping) else to_doc(doc)
    info = runs_store(cfg).put(f"{run_key(run_id)}/{source}/{step}.json",
                                json.dumps(body, sort_keys=True, default=str).encode())
    return info.uri


def get_doc(cfg: BinlakeConfig, run_id: str, source: str, step: str) -> dict[str, Any] | None:
    from binlake.lake.storage import ObjectNotFound

    try:
        return json.loads(runs_store(cfg).read_all(f"{run_key(run_id)}/{source}/{step}.json"))
    except ObjectNotFound:
        return None


def get_result(cfg: BinlakeConfig, run_id: str, source: str, step: str, cls: type[R]) -> R | None:
    """One step's document read back as its result class (None when the step did not write it)."""
    doc = get_doc(cfg, run_id, source, step)
    return None if doc is None else from_doc(cls, doc)


def get_plan(cfg: BinlakeConfig, run_id: str, source: str) -> RunPlan:
    """The run's ingest plan of the source (MissingPlanError when discover did not write one)."""
    plan = get_result(cfg, run_id, source, "plan", RunPlan)
    if plan is None:
        failed = get_doc(cfg, run_id, source, DISCOVERY_FAILED)
        if failed is not None:
            raise DiscoveryFailedError(f"source {source}: not discovered in run {run_id}: {failed['error']}")
        raise MissingPlanError(f"no ingest plan for source {source} in run {run_id}: did discover run?")
    return plan


def get_discovery(cfg: BinlakeConfig, run_id: str, source: str) -> Any:
    """The run's discovery of the source as :class:`binlake.discovery.discover.SourceDiscovery` (or None)."""
    from binlake.discovery.discover import SourceDiscovery

    return get_result(cfg, run_id, source, "discovery", SourceDiscovery)


# --------------------------------------------------------------------------- a step for a batch of sources

#: the step whose success a source's step needs, within one run
STEP_BEFORE = {"reconcile": "decode", "gold": "reconcile", "data_checks": "gold"}


def batches(sources: Sequence[str], size: int) -> list[list[str]]:
    """``sources`` in order, cut into lists of at most ``size``: one task per list and step."""
    return [list(sources[i:i + size]) for i in range(0, len(sources), max(1, size))]


def step_not_done(cfg: BinlakeConfig, run_id: str, source: str, step: str) -> str | None:
    """None when the source's ``step`` wrote an ok document in this run; else why not (``"did not
    run"``: no document, ``"failed"``: one that is not ok)."""
    doc = get_doc(cfg, run_id, source, STEP_DOCS[step])
    if doc is None:
        return "did not run"
    return None if doc.get("ok", True) else "failed"


def earlier_step_failed(cfg: BinlakeConfig, run_id: str, source: str, step: str) -> str | None:
    """Why ``step`` must not run for ``source`` in this run (the step before it did not succeed,
    :func:`step_not_done`), or None. Why: in a batched task the next step runs after a failure of
    the one before (for the batch's other sources); a source with a failed step stops there, as
    Airflow stops a source's own tasks (``upstream_failed``)."""
    before = STEP_BEFORE.get(step)
    why = None if before is None else step_not_done(cfg, run_id, source, before)
    return None if why is None else f"its {before} step {why}"


@dataclasses.dataclass(frozen=True)
class BatchOutcome(Generic[R]):
    """One step over a batch of sources: each source's result, the sources left out (why), the
    sources it failed for (the exception)."""

    step: str
    results: dict[str, R]
    left_out: dict[str, str]
    failures: dict[str, Exception]

    def raise_failures(self) -> None:
        """Nothing when every source ran; one failure raised as itself (its message names its
        source); several as one :class:`SourcesFailedError` naming each."""
        if not self.failures:
            return
        if len(self.failures) == 1:
            raise next(iter(self.failures.values()))
        reasons = [f"{source}: {(str(exc).splitlines() or [type(exc).__name__])[0]}"
                   for source, exc in self.failures.items()]
        raise SourcesFailedError(f"{self.step} failed for {len(reasons)} sources:\n  " + "\n  ".join(reasons))


def run_for_sources(step: str, sources: Sequence[str], run_id: str, cfg: BinlakeConfig,
                    run_one: Callable[[str], R]) -> BatchOutcome[R]:
    """``run_one(source)`` for each source of a batch whose earlier step succeeded
    (:func:`earlier_step_failed`), in order; a failure is kept and logged, and the next source runs.
    The caller raises them (:meth:`BatchOutcome.raise_failures`) after reporting what succeeded."""
    from binlake.lake.delta_tables import reused_delta_tables

    results: dict[str, R] = {}
    left_out: dict[str, str] = {}
    failures: dict[str, Exception] = {}
    with reused_delta_tables():  # the sources' steps read the same tables' logs: once, then what is new
        for source in sources:
            why = earlier_step_failed(cfg, run_id, source, step)
            if why is not None:
                left_out[source] = why
                log.info("source %s: no %s: %s", source, step, why)
                continue
            try:
                results[source] = run_one(source)
            except Exception as exc:  # noqa: BLE001 - kept and raised after the batch's other sources ran
                failures[source] = exc
                if len(sources) > 1:
                    detail = None if isinstance(exc, BinlakeError) else exc  # a bug: its traceback too
                    log.error("source %s: %s failed: %s", source, step, exc, exc_info=detail)
    return BatchOutcome(step, results, left_out, failures)


def source_leases(cfg: BinlakeConfig) -> Any:
    """The per-source run leases of the warehouse (:mod:`binlake.lake.leases`)."""
    from binlake.lake.leases import SourceLeases, lease_backend

    return SourceLeases(lease_backend(cfg.warehouse, cfg.s3))


#: the lease heartbeats of this process, by (warehouse, source, run id): started by
#: :func:`hold_source`, stopped by :func:`release_source` or when the process ends (daemon threads)
_renewers: dict[tuple[str, str, str], Any] = {}
_renewers_lock = threading.Lock()


def hold_source(cfg: BinlakeConfig, source: str, run_id: str, *, dag_id: str = "",
                holder_finished: Callable[[Any], bool] | None = None) -> None:
    """Take or renew the source's lease for this run (LeaseHeldError if another run holds it), and
    heartbeat it from this process until :func:`release_source` or the process's end.

    Why a heartbeat and not only a renewal per step: a step longer than the lease's life (6 h by
    default) would lose it mid-step. Every step calls this first, and an Airflow task (or a
    spark-submit driver) is one process, so the lease is renewed exactly while a step of the run
    runs; between steps the ttl covers the gap. ``holder_finished(lease)`` (Airflow: is that run
    over?) lets a run take the lease of a run that ended without releasing it (see
    :meth:`binlake.lake.leases.SourceLeases.take`)."""
    from binlake.lake.leases import SourceLeaseRenewer

    leases = source_leases(cfg)
    held = leases.take(source, run_id, dag_id=dag_id, holder_finished=holder_finished)
    key = (cfg.warehouse, source, run_id)
    with _renewers_lock:
        previous = _renewers.pop(key, None)
        if previous is not None:
            previous.stop(timeout=0)
        _renewers[key] = SourceLeaseRenewer(leases, source, held).start()
    log.info("source %s: run lease held by %s until %s (renewed every %.0fs while this process runs)",
             source, run_id, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(held.lease.expires_at)),
             leases.ttl / 3)


def release_source(cfg: BinlakeConfig, source: str, run_id: str) -> None:
    """Stop this process's heartbeat of the lease and drop the lease if this run holds it (never
    raises: the lease expires anyway)."""
    with _renewers_lock:
        renewer = _renewers.pop((cfg.warehouse, source, run_id), None)
    if renewer is not None:
        renewer.stop()
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
        raise RunParamsError(f"backfill mode must be 'missing' or 'reprocess', got {mode!r}")
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

    try:
        d = dt.date.fromisoformat(str(value)[:10])
    except ValueError as exc:
        raise RunParamsError(f"not a date (YYYY-MM-DD): {value!r}") from exc
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
        raise RunParamsError(f"unknown source(s) {unknown}; configured: {names}")
    return wanted


# --------------------------------------------------------------------------- discover


def discover(source: str, run_id: str, params: Mapping[str, Any] | None = None, *, backfill: bool = False,
             cfg: BinlakeConfig | None = None, dag_id: str = "",
             holder_finished: Callable[[Any], bool] | None = None) -> DiscoverResult:
    """Discover the source's rotated files, plan what this run ingests, store both; the XCom summary.
    ``dag_id`` / ``holder_finished``: for the source's lease (:func:`hold_source`)."""
    from binlake.discovery.discover import discover_source
    from binlake.ingest.state import load_known_files, plan_ingest
    from binlake.lake.storage import open_object_store

    cfg = cfg or load_config()
    p = normalize_params(params, backfill=backfill)
    src = cfg.source(source)
    hold_source(cfg, source, run_id, dag_id=dag_id,  # held until the source's data_checks / the run summary
                holder_finished=holder_finished)
    known = load_known_files(cfg, source)
    store = open_object_store(src.uri, cfg.s3)
    disc = discover_source(store, source, known=known, reuse_known=p["mode"] != "reprocess",
                           on_replaced=cfg.on_replaced_object)
    ingest_plan = plan_ingest(disc, p["mode"], from_file=p["from_file"], to_file=p["to_file"],
                              from_time=p["from_time"], to_time=p["to_time"])
    put_doc(cfg, run_id, source, "discovery", disc.as_dict())
    plan = RunPlan(source=source, run_id=run_id, mode=ingest_plan.mode, force=ingest_plan.force,
                   dry_run=p["dry_run"], files=tuple(BinlogObject(**f) for f in ingest_plan.files),
                   skipped=tuple(ingest_plan.skipped), reasons=dict(ingest_plan.reasons),
                   range=dict(ingest_plan.range))
    put_doc(cfg, run_id, source, "plan", plan)
    errors = [str(i) for i in disc.errors]
    warnings = [str(i) for i in disc.issues if i.severity == "warning"]
    files = plan.file_names
    log.info("%s", disc.summary())
    log.info("source %s: plan (%s%s): %d file(s) to ingest %s; %d already ingested", source, p["mode"],
             ", dry run" if p["dry_run"] else "", len(files), files[:XCOM_LIST_LIMIT], len(plan.skipped))
    return DiscoverResult(
        source=source, mode=p["mode"], dry_run=p["dry_run"], objects=disc.objects, bytes_read=disc.bytes_read,
        seconds=round(disc.seconds, 3), to_ingest=len(files), files=tuple(files[:XCOM_LIST_LIMIT]),
        skipped=len(plan.skipped), errors=tuple(errors[:XCOM_LIST_LIMIT]),
        warnings=tuple(warnings[:XCOM_LIST_LIMIT]), chain_broken=bool(errors))


# --------------------------------------------------------------------------- reports


def chain_message(source: str, disc_errors: Sequence[str], fatal: Sequence[ReconcileProblem]) -> str:
    """The operator's message for a broken chain: each GAP / CHAIN_BREAK with its files and GTIDs."""
    lines = [f"source {source}: binlog chain broken"]
    for p in fatal:
        extra = []
        if p.missing_files:
            extra.append("missing files " + ", ".join(p.missing_files))
        if p.missing_gtids:
            extra.append(f"missing GTIDs {p.missing_gtids}")
        lines.append(f"  gtid_reconciliation: {p.file}: {p.status}"
                     + (f" ({'; '.join(extra)})" if extra else "") + f": {p.detail}")
    for e in disc_errors:
        lines.append(f"  discovery: {e}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- summary


def _source_summary(cfg: BinlakeConfig, source: str, run_id: str) -> tuple[SourceSummary, list[str]]:
    """One source's line of the run summary and its problems (empty when it completed cleanly).

    A dry run's problems (a broken chain it would have reported) are listed but do not fail it:
    a dry run only reports, it alerts no one.
    """
    docs = {step: get_result(cfg, run_id, source, STEP_DOCS[step], cls) for step, cls in STEP_RESULTS.items()}
    disc = get_doc(cfg, run_id, source, "discovery")
    plan = docs["discover"]
    dec, rec, gold, chk = (docs[k] for k in ("decode", "reconcile", "gold", "data_checks"))
    missing = [step for step, d in docs.items() if d is None]
    bad = [step for step, d in docs.items() if d is not None and not getattr(d, "ok", True)]
    dry_run = bool(plan and plan.dry_run)
    s = SourceSummary(
        discovered=disc["objects"] if disc else None,
        planned=len(plan.files) if isinstance(plan, RunPlan) else None,
        ingested=dec.files if isinstance(dec, DecodeResult) else None,
        rows=dec.rows if isinstance(dec, DecodeResult) else None,
        reconciliation=rec.statuses if isinstance(rec, ReconcileResult) else None,
        gold_tables=gold.tables if isinstance(gold, GoldStepResult) else None,
        checks_ok=chk.ok if isinstance(chk, ChecksResult) else None,
        dry_run=dry_run, ok=not missing and not bad)
    problems: list[str] = []
    if not s.ok:
        why = "; ".join(part for part in (f"did not complete: {', '.join(missing)}" if missing else "",
                                          f"failed: {', '.join(bad)}" if bad else "") if part)
        problems.append(f"source {source}: {why}")
        failed = get_doc(cfg, run_id, source, DISCOVERY_FAILED)
        if failed is not None:
            problems.append(f"source {source}: not discovered: {failed['error']}")
    if isinstance(gold, GoldStepResult):  # reported, not fatal: the other tables are right
        problems.extend(f"source {source}: {u} (seed it from a dump: [gold] seed_dumps)" for u in gold.unknown_schemas)
    chain: list[str] = []
    if isinstance(rec, ReconcileResult):
        chain = [f"  {p.file}: {p.status} {p.detail}" for p in rec.problems if p.status in FATAL_RECONCILIATION]
        chain += [f"  discovery: {e}" for e in rec.discovery_errors]
    if chain and (not s.ok or dry_run):
        if s.ok:
            problems.append(f"source {source}: dry run: the binlog chain is broken")
        problems.extend(chain)
    return s, problems


def write_coverage_pages(cfg: BinlakeConfig, source: str) -> tuple[str | None, str | None]:
    """The source's coverage page (HTML, and a PNG of it when reconciliation has findings and
    Chromium is installed) as it stands; returns their URIs for the run's summary. Never fails the
    run: a missing picture is logged.

    The page is a function of the source's rows of the three meta tables it draws, so it is kept by
    a digest of those rows (``_sources/<source>/coverage/<digest>/``) and drawn only when they
    changed. Why: drawing (plotly, a headless Chromium) costs seconds of CPU and the page with
    plotly.js inline is megabytes, while most nights of most sources change none of those rows.
    Why a picture only with findings (a GAP, an OVERLAP, ...): a healthy source's rows change every
    night it gets a file, and its Chromium screenshot was most of the summary's CPU per source
    (bench/RESULTS.md, session 32); the page a reader opens is the HTML, and the picture is for the
    night something is wrong (``binlake coverage`` draws it whenever asked)."""
    import hashlib

    from binlake.lake.storage import ObjectNotFound
    from binlake.reconcile.report import chromium_binary, load_coverage, render_coverage_report

    try:
        data = load_coverage(cfg, source)
        try:
            chromium_binary()
            png = bool(data.findings)
        except BinlakeError:
            png = False
        store = runs_store(cfg)
        kept = f"_sources/{source}/coverage/{hashlib.sha256(repr((data, png)).encode()).hexdigest()[:20]}/"
        names = [f"coverage-{source}.html"] + ([f"coverage-{source}.png"] if png else [])
        try:
            uris = [store.head(kept + name).uri for name in names]
        except ObjectNotFound:
            with tempfile.TemporaryDirectory(prefix="binlake-coverage-") as tmp:
                report = render_coverage_report(data, source, Path(tmp), png=png)
                uris = [store.put(kept + p.name, p.read_bytes()).uri for p in report.files]
        return uris[0], (uris[1] if len(uris) > 1 else None)
    except Exception as exc:  # noqa: BLE001 - a report, not a step: the run's verdict stands without it
        log.warning("source %s: no coverage page: %s", source, exc)
        return None, None


def summarize(sources: Sequence[str], run_id: str, cfg: BinlakeConfig | None = None, *,
              coverage_pages: bool = True) -> RunSummary:
    """Collect every source's step documents, log a run summary, fail when a source is not clean."""
    import dataclasses

    from binlake.lake.delta_tables import reused_delta_tables

    cfg = cfg or load_config()
    log.info("binlake run %s", run_id)
    problems: list[str] = []
    fatal: list[str] = []
    by_source: dict[str, SourceSummary] = {}
    with reused_delta_tables():  # the same meta tables, once per source
        for source in sources:
            release_source(cfg, source, run_id)  # normally done by data_checks; here if it never ran
            s, source_problems = _source_summary(cfg, source, run_id)
            if coverage_pages and not s.dry_run:
                html_uri, png_uri = write_coverage_pages(cfg, source)
                s = dataclasses.replace(s, coverage_html=html_uri, coverage_png=png_uri)
            problems += source_problems
            if not s.ok:
                fatal += source_problems
            by_source[source] = s
            log.info("  %s: objects=%s planned=%s ingested=%s rows=%s reconciliation=%s gold_tables=%s checks_ok=%s%s -> %s",
                     source, s.discovered, s.planned, s.ingested, s.rows, s.reconciliation, s.gold_tables,
                     s.checks_ok, " (dry run)" if s.dry_run else "", "OK" if s.ok else "FAILED")
            if s.coverage_html:
                log.info("  %s: coverage page %s", source, s.coverage_png or s.coverage_html)
    out = RunSummary(run_id=run_id, sources=by_source, problems=tuple(problems), ok=not fatal)
    runs_store(cfg).put(f"{run_key(run_id)}/summary.json", json.dumps(to_doc(out), sort_keys=True).encode())
    if fatal:
        raise RunFailedError("run failed:\n" + "\n".join(fatal))
    for line in problems:
        log.warning("%s", line)
    return out
