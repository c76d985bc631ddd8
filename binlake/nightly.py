"""Task logic behind the (thin, initial) nightly DAG, and the spark-submit entry point.

Why here and not in the DAG file: DAG files are parsed often and must stay cheap; the logic is
tested without Airflow, and the same Spark job runs either in-process (``spark.mode = "local"``)
or on a cluster through ``SparkSubmitOperator`` (``spark.mode = "submit"``) with no code change:
:func:`spark_job_task` picks the operator from the config.

Spark jobs are registered in :data:`SPARK_JOBS` as ``name -> "module:function"``; a job function
has the signature ``(spark, cfg, args: list[str]) -> dict`` (a JSON-able summary for XCom).
On a cluster this file is the application: ``spark-submit binlake/nightly.py <job> <args...>``.
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

from binlake.config import BinlakeConfig, load_config, to_spark_uri
from binlake.storage import open_object_store
from binlake.tables import table_location

log = logging.getLogger(__name__)

SPARK_JOBS: dict[str, str] = {
    "ingested-files": "binlake.nightly:job_record_ingested_files",
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


def list_source_objects(cfg: BinlakeConfig | None = None) -> list[dict[str, Any]]:
    """List every configured source's objects (metadata only, no reads). JSON-able for XCom."""
    cfg = cfg or load_config()
    export_airflow_aws_credentials(cfg)
    out: list[dict[str, Any]] = []
    for src in cfg.sources:
        store = open_object_store(src.uri, cfg.s3)
        objects = store.list()
        log.info("source %s: %d objects under %s", src.name, len(objects), src.uri)
        for obj in objects:
            out.append({
                "source": src.name, "name": obj.name, "uri": obj.uri, "size": obj.size,
                "etag": obj.etag, "last_modified": obj.last_modified,
            })
    return out


def job_record_ingested_files(spark: Any, cfg: BinlakeConfig, args: list[str]) -> dict[str, Any]:
    """Upsert the listing (``args[0]``: JSON from :func:`list_source_objects`) into meta.ingested_files.

    Thin placeholder for the real ingest job: it records what was listed (``status = 'listed'``)
    using the column names of the real table (source, file, uri, size, etag, run_id, status).
    """
    from delta.tables import DeltaTable

    listing: list[dict[str, Any]] = json.loads(args[0]) if args and args[0] else []
    run_id = args[1] if len(args) > 1 else "manual"
    location = to_spark_uri(table_location(cfg.warehouse, "meta.ingested_files"))
    schema = "source STRING, file STRING, uri STRING, size BIGINT, etag STRING, run_id STRING, status STRING"
    rows = [(r["source"], r["name"].rsplit("/", 1)[-1], r["uri"], int(r["size"]), r["etag"], run_id, "listed")
            for r in listing]
    df = spark.createDataFrame(rows, schema)
    if not DeltaTable.isDeltaTable(spark, location):
        df.write.format("delta").mode("overwrite").save(location)
    else:
        (
            DeltaTable.forPath(spark, location).alias("t")
            .merge(df.alias("s"), "t.source = s.source AND t.file = s.file")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        )
    total = spark.read.format("delta").load(location).count()
    log.info("meta.ingested_files at %s: %d rows (%d in this listing)", location, total, len(rows))
    return {"table": "meta.ingested_files", "rows": total, "listed": len(rows)}


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
