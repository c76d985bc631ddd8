"""binlake nightly DAG: archived MySQL/MariaDB binlogs -> bronze/silver/meta Delta tables.

Only wiring; the logic is in ``binlake.pipeline_tasks`` (tasks), ``binlake.discovery`` and the
Spark jobs. Per source (dynamic task mapping, one source failing does not stop the others):
discover -> decode (Spark) -> reconcile (fails on a GTID GAP / broken chain) -> data checks;
then a run summary. Schedule from ``[pipeline].nightly_cron``; whether Spark runs in-process or
through SparkSubmitOperator is ``[spark].mode`` (conf/binlake.toml or $BINLAKE_CONFIG).
See docs/operations.md.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from binlake.config import load_config
from binlake.pipeline_tasks import alert_on_failure, wire_pipeline

_cfg = load_config()

with DAG(
    dag_id="binlake_nightly",
    description="Archived MySQL binlogs -> bronze/silver Delta tables",
    schedule=_cfg.nightly_cron,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 0, "on_failure_callback": alert_on_failure},
    on_failure_callback=alert_on_failure,
    tags=["binlake"],
) as dag:
    wire_pipeline(_cfg, backfill=False)
