"""binlake nightly DAG (thin, initial version): list the binlog archives, record them in Delta.

This file only wires tasks; their logic lives in ``binlake.nightly`` (and later in the discovery
and Spark-job modules). Whether the Spark task runs in-process or through SparkSubmitOperator is
decided by ``[spark].mode`` in conf/binlake.toml (or $BINLAKE_CONFIG), not by code.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, task

from binlake.config import load_config
from binlake.nightly import list_source_objects, spark_job_task

_cfg = load_config()

with DAG(
    dag_id="binlake_nightly",
    description="Archived MySQL binlogs -> bronze/silver Delta tables",
    schedule=_cfg.nightly_cron,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 0},
    tags=["binlake"],
) as dag:

    @task(task_id="list_source_objects")
    def list_objects() -> list[dict]:
        return list_source_objects()

    listing = list_objects()
    record = spark_job_task(
        task_id="record_ingested_files",
        job="ingested-files",
        job_args=[
            "{{ ti.xcom_pull(task_ids='list_source_objects') | tojson }}",
            "{{ run_id }}",
        ],
        cfg=_cfg,
    )
    listing >> record
