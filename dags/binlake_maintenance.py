"""binlake maintenance DAG: every table of the warehouse kept fast to read a year on.

One task, ``maintain`` (``orchestration.maintenance``): per table, compaction of the partitions
holding many small data files, Z-ordered on the columns readers filter by; ``VACUUM`` with the
configured retention (refused when shorter than a run may last); a checkpoint and log cleanup. A
table that needs nothing is skipped; what was done is in ``meta.maintenance_runs`` and the task
log. Every change takes the table's commit lock like the jobs' writes, so it may run while the
nightly does. Schedule: ``[maintenance] cron`` (default weekly); see docs/maintenance.md.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from binlake.config import load_config
from orchestration.alerts import BinlakeAlert
from orchestration.maintenance import maintain_task

cfg = load_config()

with DAG(
    dag_id="binlake_maintenance",
    description="Compaction, clustering, VACUUM and checkpoints of every binlake table",
    doc_md=__doc__,
    schedule=cfg.maintenance.cron,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={"on_failure_callback": [BinlakeAlert()]},
    tags=["binlake"],
) as dag:
    maintain_task()
