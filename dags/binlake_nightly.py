"""binlake nightly DAG: archived MySQL/MariaDB binlogs -> bronze/silver/gold/meta Delta tables.

One discover task for every source, then per source with work (dynamic task mapping: one source
failing does not stop the others)::

    discover >> per source: decode >> reconcile >> gold >> data_checks >> one summary for the run

``discover`` follows each source's ROTATE chain, plans the run, and finishes there every source with
nothing for Spark (nothing new, gold's inputs unchanged): a quiet source costs no task of its own.
``reconcile`` fails on a GTID GAP or a broken chain, naming it (one error line, then the alert);
``gold`` and ``data_checks`` do not run for a source whose chain is broken, and a GAP found before is
reported again every night (from meta.gtid_reconciliation). ``reconcile`` never starts Spark
(delta-rs, in the task process); ``gold`` starts none when its inputs are unchanged.
Schedule: ``[pipeline].nightly_cron``. Whether Spark runs in the task process or through
spark-submit on a cluster is ``[spark].mode`` (conf/binlake.toml or $BINLAKE_CONFIG). The tasks
are in ``orchestration.tasks``; see docs/operations.md.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from binlake.config import load_config
from orchestration.alerts import BinlakeAlert
from orchestration.tasks import pipeline_tasks, release_run_leases

cfg = load_config()

with DAG(
    dag_id="binlake_nightly",
    description="Archived MySQL/MariaDB binlogs -> bronze/silver/gold Delta tables",
    doc_md=__doc__,
    schedule=cfg.nightly_cron,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 0, "on_failure_callback": [BinlakeAlert()]},
    # add Airflow notifiers here (Slack, SMTP, ...); release_run_leases frees the run's sources
    on_failure_callback=[BinlakeAlert(), release_run_leases],
    tags=["binlake"],
) as dag:
    pipeline_tasks(cfg)  # discover >> per source: decode >> reconcile >> gold >> data_checks >> summary
