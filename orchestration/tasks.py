"""The Airflow tasks of binlake's DAGs; the DAG files in ``dags/`` put them together.

Per source (a mapped task group, so one source failing does not stop the others):
``discover`` (plain Python) -> ``decode`` -> ``reconcile`` -> ``gold`` (Spark steps,
:mod:`spark_jobs.steps`) -> ``data_checks`` (delta-rs + DuckDB, no JVM), then one ``summary``. This module only adapts them to
Airflow: operators, retries, Assets, credentials, alerts; the logic lives below (``binlake.runs``,
``spark_jobs.steps``).

A Spark step is either an in-process ``@task`` (``[spark].mode = "local"``: the task process
starts a SparkSession; ``"connect"``: the task process is a thin Spark Connect client of the warm
server at ``[spark].remote``) or a :class:`BinlakeSparkSubmitOperator` (``"submit"``: ``spark-submit
spark_jobs/__main__.py STEP --source S --run-id R`` through the ``spark_default`` connection, the
driver in the task's process tree, executors on the cluster). Same DAG, chosen by configuration.

Retries (see docs/operations.md): ``discover`` 2 (S3 hiccups), ``decode`` 1 (a lost executor or
driver: the re-run replaces the same rows, exactly once), the others 0: a GAP or a failed data check
is deterministic and must fail at once (and alert). Within a step, Spark itself retries a task whose
executor died (``spark.task.maxFailures``), and Delta commit conflicts are retried by
:func:`spark_jobs.lake.committed_write`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Asset, AssetAlias, task

from binlake.config import BinlakeConfig, load_config
from binlake.errors import BinlakeError
from binlake.lake.tables import table_location
from binlake.runs import (
    STEP_TABLES,
    ChainBrokenError,
    DataCheckError,
    RunFailedError,
    discover,
    get_result,
    resolve_sources,
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
#: mapped task instances are labelled by their source in the UI (not 0, 1, 2): the TaskFlow tasks
#: put the name in their context, the submit operator pulls it from the discover task's XCom
SOURCE_LABEL = "{{ binlake_source }}"
SOURCE_FROM_XCOM = "{{ ti.xcom_pull(task_ids='" + GROUP_ID + ".discover', map_indexes=ti.map_index)['source'] }}"
#: the gold step's outlet alias: gold table names are known at run time only, so the step adds one
#: asset event per gold table it wrote through this alias (:func:`emit_gold_assets`); downstream DAGs
#: schedule on the alias (any gold table) or on a table's Asset (:func:`table_assets`)
GOLD_ASSET_ALIAS = "binlake.gold"


#: failures that are an expected, fully explained outcome (the message says it all)
EXPECTED_FAILURES: tuple[type[BinlakeError], ...] = (ChainBrokenError, DataCheckError, RunFailedError)


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


def _label(source: str) -> None:
    """Name this mapped task instance after its source (rendered into ``map_index_template``)."""
    from airflow.sdk import get_current_context

    get_current_context()["binlake_source"] = source  # type: ignore[typeddict-unknown-key]


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


@task(task_id="discover", retries=2, retry_delay=RETRY_DELAY, retry_exponential_backoff=True,
      map_index_template=SOURCE_LABEL)
def discover_task(source: str, backfill: bool = False, **context: Any) -> dict[str, Any]:
    """List the source's objects, follow the ROTATE chain, plan the run; take the source's lease."""
    from airflow.sdk.exceptions import AirflowFailException

    from binlake.discovery.discover import ReplacedObjectError
    from binlake.lake.leases import LeaseHeldError

    _label(source)
    cfg = load_config()
    export_airflow_aws_credentials(cfg)
    try:
        return to_doc(discover(source, context["run_id"], context.get("params"), backfill=backfill, cfg=cfg,
                               dag_id=str(getattr(context.get("dag"), "dag_id", "") or ""),
                               holder_finished=airflow_run_over(context)))
    except (LeaseHeldError, ReplacedObjectError) as exc:  # retrying in 30 s would not help
        raise AirflowFailException(str(exc)) from exc


class BinlakeSparkSubmitOperator(SparkSubmitOperator):
    """SparkSubmitOperator that first exports the Airflow AWS connection's credentials (if any),
    so the spark-submit child process (driver) and S3A find them in its environment."""

    def execute(self, context: Any) -> Any:
        """Without spark-submit when the step has nothing for Spark (dry run, nothing new)."""
        from spark_jobs.steps import WITHOUT_SPARK

        cfg = load_config()
        step, source = list(self.application_args or ())[0:3:2]
        quick = run_reporting_expected_failures(lambda: WITHOUT_SPARK[step](cfg, source, context["run_id"]))
        if quick is not None:
            return to_doc(quick)
        export_airflow_aws_credentials(cfg)
        super().execute(context)
        if step == "gold":  # the application wrote its result document: the tables it wrote
            emit_gold_assets(cfg, context, get_result(cfg, context["run_id"], source, "gold", GoldStepResult))
        return None


def spark_step(cfg: BinlakeConfig, step: str, discovered: Any, *, trigger_rule: str = "all_success") -> Any:
    """The task of one Spark step of the source that ``discovered`` (the discover task's output) names."""
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
        discovered >> operator
        return operator

    @task(task_id=step, outlets=outlets, trigger_rule=trigger_rule, retries=retries, retry_delay=RETRY_DELAY,
          map_index_template=SOURCE_LABEL)
    def in_process_step(found: dict[str, Any], **context: Any) -> dict[str, Any]:
        from spark_jobs.steps import run_spark_step

        _label(found["source"])
        step_cfg = load_config()
        export_airflow_aws_credentials(step_cfg)
        result = run_reporting_expected_failures(
            lambda: run_spark_step(step, found["source"], context["run_id"], step_cfg))
        if isinstance(result, GoldStepResult):
            emit_gold_assets(step_cfg, context, result)
        return to_doc(result)

    return in_process_step(discovered)


def reconcile_step(cfg: BinlakeConfig, discovered: Any) -> Any:
    """The reconcile task of the source that ``discovered`` names: in the task process in every
    ``[spark].mode``, no JVM (delta-rs, :func:`spark_jobs.steps.run_reconcile_step`): its data is a
    few rows per archived file. Fails on a GAP or a broken chain (one error line, then the alert)."""

    @task(task_id="reconcile", outlets=table_assets(cfg, STEP_TABLES["reconcile"]), retries=STEP_RETRIES["reconcile"],
          retry_delay=RETRY_DELAY, map_index_template=SOURCE_LABEL)
    def reconcile_task(found: dict[str, Any], **context: Any) -> dict[str, Any]:
        from spark_jobs.steps import run_reconcile_step

        _label(found["source"])
        step_cfg = load_config()
        export_airflow_aws_credentials(step_cfg)
        return to_doc(run_reporting_expected_failures(
            lambda: run_reconcile_step(found["source"], context["run_id"], step_cfg)))

    return reconcile_task(discovered)


@task(task_id="data_checks", map_index_template=SOURCE_LABEL)
def data_checks_task(found: Any, **context: Any) -> dict[str, Any]:
    """The source's data checks (no Spark, in both modes); releases the source's run lease.

    Runs only when every earlier step succeeded (``upstream_failed`` otherwise: a source whose
    reconcile failed is not a checked source); the summary then releases the lease."""
    from spark_jobs.steps import run_data_checks

    _label(found["source"])
    cfg = load_config()
    export_airflow_aws_credentials(cfg)
    return to_doc(run_reporting_expected_failures(lambda: run_data_checks(found["source"], context["run_id"], cfg)))


@task(task_id="sources")
def sources_task(**context: Any) -> list[str]:
    """The backfill's sources: ``params.source`` (comma separated) or all configured ones."""
    return resolve_sources((context.get("params") or {}).get("source"))


@task(task_id="summary", trigger_rule="all_done")
def summary_task(source_names: Any = None, **context: Any) -> dict[str, Any]:
    """One verdict for the run; fails it when any source did not complete cleanly."""
    wanted = list(source_names) if source_names is not None else [s.name for s in load_config().sources]
    return to_doc(run_reporting_expected_failures(lambda: summarize(wanted, context["run_id"])))
