"""The Airflow tasks of binlake's DAGs; the DAG files in ``dags/`` put them together.

One ``discover`` task for every source of the run (plain Python: it also finishes each source that
has nothing for Spark, see :class:`binlake.step_results.RunDiscovery`), then per batch of sources
with work (a mapped task group over batches of ``[pipeline] sources_per_task`` sources, 1 by
default: one task per source and step): ``decode`` -> ``reconcile`` -> ``gold``
(:mod:`spark_jobs.steps`) -> ``data_checks`` (delta-rs + DuckDB, no JVM), then one ``summary``.
One source failing does not stop the others: with one source per batch Airflow stops that
source's later tasks (``upstream_failed``); in a larger batch each task runs its step for the
batch's sources whose step before succeeded, and fails at its end naming the sources it failed for
(:func:`binlake.runs.run_for_sources`). Why batches: a task process, its Spark session and the
scheduler's work for it cost seconds of CPU each, whatever the source's bytes; a fleet of many
small sources pays that per batch, not per source. This module only adapts them to Airflow:
operators, retries, Assets, credentials, alerts; the logic lives below (``binlake.runs``, ``spark_jobs.steps``).

A Spark step is either an in-process ``@task`` (``[spark].mode = "local"``: the task process
starts a SparkSession; ``"connect"``: the task process is a thin Spark Connect client of the warm
server at ``[spark].remote``) or a :class:`BinlakeSparkSubmitOperator` (``"submit"``: ``spark-submit
spark_jobs/__main__.py STEP --source S --run-id R`` through the ``spark_default`` connection, the
driver in the task's process tree, executors on the cluster). Same DAG, chosen by configuration.

Retries (see docs/operations.md): ``discover`` 2 (and up to 3 tries per source inside it: S3
hiccups), ``decode`` 1 (a lost executor or driver: the re-run replaces the same rows, exactly once),
the others 0: a GAP or a failed data check is deterministic and must fail at once (and alert).
Within a step, Spark itself retries a task whose executor died (``spark.task.maxFailures``), and
Delta commit conflicts are retried by :func:`spark_jobs.lake.committed_write`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Asset, AssetAlias, task, task_group
from airflow.sdk.definitions.xcom_arg import PlainXComArg

from binlake.config import BinlakeConfig, load_config
from binlake.errors import BinlakeError
from binlake.lake.tables import table_location
from binlake.runs import (
    STEP_DOCS,
    STEP_TABLES,
    BatchOutcome,
    ChainBrokenError,
    DataCheckError,
    DiscoveryFailedError,
    RunFailedError,
    SourcesFailedError,
    batches,
    get_result,
    resolve_sources,
    run_for_sources,
    step_not_done,
    summarize,
)
from binlake.step_results import GoldStepResult, to_doc
from orchestration.credentials import export_airflow_aws_credentials

log = logging.getLogger("binlake.pipeline")

GROUP_ID = "per_source"
#: the application spark-submit runs in submit mode
SPARK_APPLICATION = Path(__file__).resolve().parent.parent / "spark_jobs" / "__main__.py"
#: retries per step where a retry can help (see module doc)
STEP_RETRIES = {"decode": 1, "reconcile": 0, "gold": 0}
RETRY_DELAY = timedelta(seconds=30)
#: mapped task instances are labelled by their sources in the UI (not 0, 1, 2): the TaskFlow tasks
#: put the names in their context, the submit operator pulls them from the discover task's XCom
SOURCE_LABEL = "{{ binlake_source }}"
#: the discover task's return value is the list of batches of sources whose tasks run (the group is
#: mapped over it: Airflow maps over return values only), so a task's map index is its batch's place
SOURCE_FROM_XCOM = "{{ ti.xcom_pull(task_ids='discover')[ti.map_index] | join(',') }}"
#: the discover task's other XComs (keys): the fields of :class:`binlake.step_results.RunDiscovery`
DISCOVERY_XCOMS = ("sources", "settled", "found", "failed", "reasons")
#: the gold step's outlet alias: gold table names are known at run time only, so the step adds one
#: asset event per gold table it wrote through this alias (:func:`emit_gold_assets`); downstream DAGs
#: schedule on the alias (any gold table) or on a table's Asset (:func:`table_assets`)
GOLD_ASSET_ALIAS = "binlake.gold"


#: failures that are an expected, fully explained outcome (the message says it all)
EXPECTED_FAILURES: tuple[type[BinlakeError], ...] = (ChainBrokenError, DataCheckError, DiscoveryFailedError,
                                                     RunFailedError, SourcesFailedError)


class BinlakeTaskFailed(SystemExit):
    """A task failure whose message says everything: logged as one error line, no traceback.

    Why a ``SystemExit``: Airflow's task runner logs every other exception with its full
    traceback ("Task failed with exception"); for a GAP the traceback only buries the message.
    A ``SystemExit`` still fails the task (retries and ``on_failure_callback``, i.e. the alert,
    as usual) but is logged as one ``Task exited`` line. ``reason`` is what the alert reports.
    """

    def __init__(self, reason: str, kind: str) -> None:
        super().__init__(1)
        self.reason = reason
        self.kind = kind


def run_reporting_expected_failures(fn: Callable[[], Any]) -> Any:
    """``fn()``; an expected binlake failure becomes one ERROR line and :class:`BinlakeTaskFailed`."""
    try:
        return fn()
    except EXPECTED_FAILURES as exc:
        log.error("%s", exc)
        raise BinlakeTaskFailed(str(exc), type(exc).__name__) from None


#: a mapped instance's label names at most this many of its sources
LABEL_SOURCES = 3


def _label(sources: Sequence[str]) -> None:
    """Name this mapped task instance after its sources (rendered into ``map_index_template``)."""
    from airflow.sdk import get_current_context

    more = len(sources) - LABEL_SOURCES
    label = ", ".join(sources[:LABEL_SOURCES]) + (f" (+{more} more)" if more > 0 else "")
    get_current_context()["binlake_source"] = label  # type: ignore[typeddict-unknown-key]


def finish_batch(cfg: BinlakeConfig, context: Any, outcome: BatchOutcome[Any]) -> list[dict[str, Any]]:
    """The task's end for a batch: gold's asset events for every source it wrote, then the batch's
    failures (one error line each, the alert naming them); a batch whose every source was left out
    (an earlier step failed for each) is skipped; else one document per source (the XCom)."""
    from airflow.sdk.exceptions import AirflowSkipException

    if outcome.step == "gold":
        for result in outcome.results.values():
            emit_gold_assets(cfg, context, result)
    run_reporting_expected_failures(outcome.raise_failures)
    if not outcome.results:
        raise AirflowSkipException("; ".join(f"{s}: {why}" for s, why in outcome.left_out.items()))
    return [to_doc(r) for r in outcome.results.values()]


def run_batch_task(step: str, sources: list[str], context: Any,
                   run_one: Callable[[BinlakeConfig, str, str], Any]) -> list[dict[str, Any]]:
    """What every in-process step task does: label the instance, load the config and the Airflow
    credentials, ``run_one(cfg, source, run_id)`` for each source of the batch, end the batch."""
    _label(sources)
    cfg = load_config()
    export_airflow_aws_credentials(cfg)
    run_id = context["run_id"]
    outcome = run_for_sources(step, sources, run_id, cfg, lambda source: run_one(cfg, source, run_id))
    return finish_batch(cfg, context, outcome)


def table_assets(cfg: BinlakeConfig, tables: Sequence[str]) -> list[Asset]:
    """One Airflow Asset per Delta table: URI = the table location (``s3://`` / ``file://``),
    name = the table and its warehouse (``silver.row_changes @ s3://lake/binlake``),
    ``extra={"table": "silver.row_changes"}``.

    The warehouse is part of the name because asset names must be unique: a bare
    ``silver.row_changes`` bound to two warehouses (a config change, a second deployment sharing
    the metadata DB) would leave the newer asset inactive and fail the producing task.
    """
    out = []
    for name in tables:
        loc = table_location(cfg.warehouse, name)
        if "://" in loc:
            uri = "s3://" + loc.split("://", 1)[1] if loc.startswith(("s3a://", "s3n://")) else loc
        else:
            uri = "file://" + loc
        warehouse = uri[: -len(name.replace(".", "/"))].rstrip("/")
        out.append(Asset(name=f"{name} @ {warehouse}", uri=uri, group="binlake", extra={"table": name}))
    return out


def emit_gold_assets(cfg: BinlakeConfig, context: Any, result: GoldStepResult | None) -> list[Asset]:
    """Add an asset event (through :data:`GOLD_ASSET_ALIAS`) for each gold table the gold step wrote;
    the Assets follow :func:`table_assets` (URI = location, ``extra.table = "gold.<name>"``).

    Why from the step's result: in submit mode the Spark job runs in another process, and its
    ``gold`` document in the run folder is how the task learns which tables it wrote. Tables the
    step left unchanged get no event: nothing downstream needs to re-read."""
    assets = table_assets(cfg, result.written if result is not None else ())
    alias = AssetAlias(GOLD_ASSET_ALIAS)
    for asset in assets:
        context["outlet_events"][alias].add(asset)
    if assets:
        log.info("asset events for %d gold table(s): %s", len(assets), ", ".join(str(a.extra["table"]) for a in assets))
    return assets


#: Airflow's states of a DAG run that is over
FINISHED_RUN_STATES = ("success", "failed")


def airflow_run_over(context: Any) -> Callable[[Any], bool]:
    """Whether the run holding a source's lease is over, asked of Airflow (``holder_finished`` of
    :meth:`binlake.lake.leases.SourceLeases.take`).

    Why: a run marked failed in the UI has its running tasks killed and the rest (its summary too)
    skipped, so nothing releases its leases, and DAG failure callbacks do not run for a manual mark;
    without this the next run failed with "re-run after that run ends" for the lease's whole life.
    A lease without a DAG id, or a run Airflow cannot tell about, counts as alive."""
    ti = context.get("ti")

    def over(lease: Any) -> bool:
        if ti is None or not lease.dag_id:
            return False
        return str(ti.get_dagrun_state(lease.dag_id, lease.holder)) in FINISHED_RUN_STATES

    return over


def release_run_leases(context: Any) -> None:
    """DAG ``on_failure_callback``: drop every source lease the failed run still holds.

    Why: a run the scheduler fails (a ``dagrun_timeout``, a task killed with its worker) may never
    reach its summary, which releases them otherwise. Releasing is conditional on the holder being
    this run, so naming every configured source is safe; never raises (a lease left over expires)."""
    from binlake.runs import release_source

    run_id = context.get("run_id") or getattr(context.get("dag_run"), "run_id", None)
    if not run_id:
        return
    try:
        cfg = load_config()
        export_airflow_aws_credentials(cfg)
    except Exception as exc:  # noqa: BLE001 - a callback must not fail: the leases expire anyway
        log.warning("run %s failed; its source leases are left to expire: %s", run_id, exc)
        return
    for src in cfg.sources:
        release_source(cfg, src.name, str(run_id))


@task(task_id="discover", retries=2, retry_delay=RETRY_DELAY, retry_exponential_backoff=True)
def discover_task(backfill: bool = False, per_task: int = 1, **context: Any) -> list[list[str]]:
    """Every source of the run in one task: list its objects, follow the ROTATE chain, plan, take its
    lease; finish here each source no step of which needs Spark (``spark_jobs.steps.discover_run``).
    Returns the ``busy`` sources in batches of ``per_task`` (the group maps over them: the DAG's
    ``[pipeline] sources_per_task`` when it was parsed, so the batches match the trigger rules the DAG
    was built with); XComs ``sources`` (all), ``settled``, ``found``, ``failed``, ``reasons``. The
    backfill's sources are ``params.source`` or all."""
    from spark_jobs.steps import discover_run

    cfg = load_config()
    params = context.get("params")
    names = resolve_sources((params or {}).get("source"), cfg) if backfill else [s.name for s in cfg.sources]
    export_airflow_aws_credentials(cfg)
    doc = to_doc(discover_run(cfg, names, context["run_id"], params, backfill=backfill,
                              dag_id=str(getattr(context.get("dag"), "dag_id", "") or ""),
                              holder_finished=airflow_run_over(context)))
    for key in DISCOVERY_XCOMS:
        context["ti"].xcom_push(key=key, value=doc[key])
    return batches(list(doc["busy"]), per_task)


def pipeline_tasks(cfg: BinlakeConfig, *, backfill: bool = False) -> None:
    """The tasks of one run, as both DAGs wire them (call it inside ``with DAG(...)``)::

        discover >> per_source (mapped over batches of busy sources): decode >> reconcile >> gold >> data_checks
                 >> summary (every source of the run)

    With batches of one source, a step runs only after the one before succeeded (Airflow's
    ``all_success``); with larger batches after it ended (``all_done``), for the batch's sources
    whose step before succeeded (:func:`binlake.runs.earlier_step_failed`)."""
    after = "all_success" if cfg.sources_per_task == 1 else "all_done"

    @task_group(group_id=GROUP_ID)
    def per_source(sources: list[str]) -> None:
        decoded = spark_step(cfg, "decode", sources)
        reconciled = reconcile_step(cfg, sources, trigger_rule=after)
        gold = spark_step(cfg, "gold", sources, trigger_rule=after)
        checked = data_checks_task.override(trigger_rule=after)(sources)
        decoded >> reconciled >> gold >> checked

    busy = cast(PlainXComArg, discover_task(backfill=backfill, per_task=cfg.sources_per_task))  # the group's map
    per_source.expand(sources=busy) >> summary_task(PlainXComArg(busy.operator, key="sources"))


class BinlakeSparkSubmitOperator(SparkSubmitOperator):
    """SparkSubmitOperator that first exports the Airflow AWS connection's credentials (if any),
    so the spark-submit child process (driver) and S3A find them in its environment."""

    def execute(self, context: Any) -> Any:
        """spark-submit for the batch's sources whose step needs Spark (none: no spark-submit at all);
        the others answer here (dry run, nothing new, an earlier step failed)."""
        from spark_jobs.steps import WITHOUT_SPARK

        cfg = load_config()
        args = list(self.application_args or ())
        step, sources, run_id = str(args[0]), str(args[2]).split(","), context["run_id"]
        quick = run_for_sources(step, sources, run_id, cfg, lambda s: WITHOUT_SPARK[step](cfg, s, run_id))
        spark_sources = [s for s, result in quick.results.items() if result is None]
        submitted: BatchOutcome[Any] = BatchOutcome(step, {}, {}, {})
        if spark_sources:
            export_airflow_aws_credentials(cfg)
            self.application_args = [step, "--source", ",".join(spark_sources), "--run-id", run_id]
            try:
                super().execute(context)
            except Exception as exc:  # noqa: BLE001 - the application's own message is in the task log above
                failed = {s: exc for s in spark_sources if step_not_done(cfg, run_id, s, step) is not None}
                submitted = BatchOutcome(step, {}, {}, failed or {spark_sources[0]: exc})
        results = {s: r for s, r in quick.results.items() if r is not None}
        for source in (s for s in spark_sources if s not in submitted.failures):
            written = _result(cfg, run_id, source, step)
            if written is not None:  # the application printed it too; the document is what lasts
                results[source] = written
        outcome = BatchOutcome(step, results, quick.left_out, {**quick.failures, **submitted.failures})
        return finish_batch(cfg, context, outcome)


def _result(cfg: BinlakeConfig, run_id: str, source: str, step: str) -> Any:
    """The step's document the spark-submit application wrote for the source, as its result class."""
    from binlake.runs import STEP_RESULTS

    return get_result(cfg, run_id, source, STEP_DOCS[step], STEP_RESULTS[step])


def spark_step(cfg: BinlakeConfig, step: str, sources: Any, *, trigger_rule: str = "all_success") -> Any:
    """The task of one Spark step of a batch of ``sources`` (the mapped group's argument)."""
    outlets: list[Asset | AssetAlias] = [*table_assets(cfg, STEP_TABLES[step])]
    if step == "gold":
        outlets.append(AssetAlias(GOLD_ASSET_ALIAS))
    retries = STEP_RETRIES[step]
    if cfg.spark.mode == "submit":
        from spark_jobs.session import spark_submit_kwargs

        submit = spark_submit_kwargs(cfg)
        env = {"BINLAKE_CONFIG": cfg.config_path} if cfg.config_path else None
        operator = BinlakeSparkSubmitOperator(
            task_id=step, application=str(SPARK_APPLICATION), map_index_template=SOURCE_FROM_XCOM,
            application_args=[step, "--source", SOURCE_FROM_XCOM, "--run-id", "{{ run_id }}"],
            name=f"binlake-{step}", env_vars=env, outlets=outlets, trigger_rule=trigger_rule,
            retries=retries, retry_delay=RETRY_DELAY, conn_id=str(submit["conn_id"]),
            conf=cast(dict[str, Any], submit["conf"]), jars=cast(str | None, submit.get("jars")))
        return operator

    @task(task_id=step, outlets=outlets, trigger_rule=trigger_rule, retries=retries, retry_delay=RETRY_DELAY,
          map_index_template=SOURCE_LABEL)
    def in_process_step(sources: list[str], **context: Any) -> list[dict[str, Any]]:
        from spark_jobs.steps import run_spark_step

        return run_batch_task(step, sources, context,
                              lambda cfg, source, run_id: run_spark_step(step, source, run_id, cfg))

    return in_process_step(sources)


def reconcile_step(cfg: BinlakeConfig, sources: Any, *, trigger_rule: str = "all_success") -> Any:
    """The reconcile task of a batch of ``sources`` (the mapped group's argument): in the task
    process in every ``[spark].mode``, no JVM (delta-rs, :func:`spark_jobs.steps.run_reconcile_step`):
    its data is a few rows per archived file. Fails on a GAP or a broken chain (one error line, then
    the alert)."""

    @task(task_id="reconcile", outlets=table_assets(cfg, STEP_TABLES["reconcile"]), retries=STEP_RETRIES["reconcile"],
          retry_delay=RETRY_DELAY, map_index_template=SOURCE_LABEL, trigger_rule=trigger_rule)
    def reconcile_task(sources: list[str], **context: Any) -> list[dict[str, Any]]:
        from spark_jobs.steps import run_reconcile_step

        return run_batch_task("reconcile", sources, context,
                              lambda cfg, source, run_id: run_reconcile_step(source, run_id, cfg))

    return reconcile_task(sources)


@task(task_id="data_checks", map_index_template=SOURCE_LABEL)
def data_checks_task(sources: list[str], **context: Any) -> list[dict[str, Any]]:
    """The data checks of a batch of sources (no Spark, in every mode); releases each one's run lease.

    Runs for a source only when its earlier steps succeeded (with one source per batch the task is
    ``upstream_failed`` otherwise: a source whose reconcile failed is not a checked source); the
    summary then releases the lease."""
    from spark_jobs.steps import run_data_checks

    return run_batch_task("data_checks", sources, context,
                          lambda cfg, source, run_id: run_data_checks(source, run_id, cfg))


@task(task_id="summary", trigger_rule="all_done")
def summary_task(source_names: Any = None, **context: Any) -> dict[str, Any]:
    """One verdict for the run over ``source_names`` (the discover task's ``sources``: settled or
    not; every configured source when called without them); fails it when any source did not
    complete cleanly. When the discover task itself failed there is no list and this task fails too;
    the DAG's ``release_run_leases`` callback then frees the sources."""
    wanted = list(source_names) if source_names is not None else [s.name for s in load_config().sources]
    return to_doc(run_reporting_expected_failures(lambda: summarize(wanted, context["run_id"])))
