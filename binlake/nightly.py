"""Helpers shared by the DAGs and ad-hoc Spark jobs: Airflow credentials export and a job registry.

The nightly and backfill DAGs' task logic lives in :mod:`binlake.pipeline_tasks` (discover ->
decode -> reconcile -> data checks -> summary); this module keeps

* :func:`export_airflow_aws_credentials` - put an Airflow AWS connection's credentials in the
  process env for boto3 and S3A (never written to disk or logs);
* a small registry of Spark jobs (:data:`SPARK_JOBS`, ``name -> "module:function"`` with the
  signature ``(spark, cfg, args: list[str]) -> dict``), runnable in-process
  (:func:`run_spark_job`), as an Airflow operator picked by ``[spark].mode``
  (:func:`spark_job_task`) or by ``spark-submit binlake/nightly.py <job> <args...>`` - handy for
  one-off operations (``ingest`` a JSON listing, ``reconcile`` sources) outside the DAGs.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable

if __package__ in (None, ""):  # run as a file by spark-submit: make `import binlake` work
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from binlake.config import BinlakeConfig, load_config

log = logging.getLogger(__name__)

SPARK_JOBS: dict[str, str] = {
    "ingest": "spark_jobs.ingest:job_ingest",
    "reconcile": "spark_jobs.reconcile:job_reconcile",
}


def export_airflow_aws_credentials(cfg: BinlakeConfig) -> None:
    """When ``s3.aws_conn_id`` names an Airflow connection, put its credentials in this process's env.

    Why env: both boto3 and S3A's DefaultCredentialsProvider read it, and nothing is written to disk
    or logged. A missing connection or no Airflow means the standard AWS chain is used as is.
    """
    if not cfg.s3.aws_conn_id:
        return
    try:
        from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

        creds = AwsBaseHook(aws_conn_id=cfg.s3.aws_conn_id, client_type="s3").get_credentials()
    except Exception:  # noqa: BLE001 - fall back to the default chain
        log.info("Airflow connection %s not usable; using the default AWS credentials chain", cfg.s3.aws_conn_id)
        return
    if creds.access_key and creds.secret_key:
        os.environ["AWS_ACCESS_KEY_ID"] = creds.access_key
        os.environ["AWS_SECRET_ACCESS_KEY"] = creds.secret_key
        if creds.token:
            os.environ["AWS_SESSION_TOKEN"] = creds.token


def resolve_job(name: str) -> Callable[[Any, BinlakeConfig, list[str]], dict[str, Any]]:
    """The job function registered as ``name`` in :data:`SPARK_JOBS`."""
    try:
        target = SPARK_JOBS[name]
    except KeyError:
        raise KeyError(f"unknown Spark job {name!r}; known: {sorted(SPARK_JOBS)}") from None
    module, _, func = target.partition(":")
    return getattr(importlib.import_module(module), func)  # type: ignore[no-any-return]


def run_spark_job(job: str, *args: str, cfg: BinlakeConfig | None = None) -> dict[str, Any]:
    """Run a registered job in this process (local mode): session -> job -> summary."""
    from binlake.spark import spark_session

    cfg = cfg or load_config()
    export_airflow_aws_credentials(cfg)
    with spark_session(cfg, f"binlake-{job}") as spark:
        return resolve_job(job)(spark, cfg, list(args))


def spark_job_task(task_id: str, job: str, job_args: list[str], cfg: BinlakeConfig | None = None) -> Any:
    """An Airflow operator running ``job``: in-process (local mode) or via SparkSubmitOperator.

    ``job_args`` may hold Jinja templates (both operators template them), e.g. an XCom pulled
    as JSON: ``"{{ ti.xcom_pull(task_ids='list_source_objects') | tojson }}"``.
    """
    cfg = cfg or load_config()
    if cfg.spark.mode == "submit":
        from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

        from binlake.spark import spark_submit_kwargs

        env = {"BINLAKE_CONFIG": cfg.config_path} if cfg.config_path else None
        return SparkSubmitOperator(
            task_id=task_id,
            application=str(Path(__file__).resolve()),
            application_args=[job, *job_args],
            name=f"binlake-{job}",
            env_vars=env,
            **spark_submit_kwargs(cfg),  # conn_id, jars, conf
        )
    from airflow.providers.standard.operators.python import PythonOperator

    return PythonOperator(task_id=task_id, python_callable=run_spark_job, op_args=[job, *job_args])


def main(argv: list[str] | None = None) -> int:
    """spark-submit entry: ``nightly.py <job> [args...]`` (config from $BINLAKE_CONFIG)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print(f"usage: nightly.py JOB [ARGS...]; jobs: {', '.join(sorted(SPARK_JOBS))}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    summary = run_spark_job(argv[0], *argv[1:])
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
