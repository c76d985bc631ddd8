"""binlake backfill DAG: manual runs over a chosen source and range, the same tasks as the nightly DAG.

Trigger it from the UI (params form) or the CLI, e.g.::

    airflow dags trigger binlake_backfill --conf '{"source": "orders-primary",
        "from_file": "binlog.000100", "to_file": "binlog.000120", "mode": "reprocess"}'

One ``discover`` task for the chosen sources, then per source with work: ``decode >> reconcile >> gold
>> data_checks``, then one summary (as in the nightly DAG).
``mode``: ``missing`` (ingest only files not yet ingested, or changed) or ``reprocess`` (ingest
the range again; rows are replaced, tables end up identical). ``dry_run`` plans and reports only.
New DAGs start paused: unpause it once (UI toggle or ``airflow dags unpause binlake_backfill``).
Relation to ``airflow backfill create``: see docs/operations.md.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from binlake.config import load_config
from orchestration.alerts import BinlakeAlert
from orchestration.tasks import pipeline_tasks, release_run_leases

cfg = load_config()
OPTIONAL_TEXT = ["null", "string"]  # may be left empty in the trigger form

with DAG(
    dag_id="binlake_backfill",
    description="Backfill / reprocess archived binlogs of one source (or all) over a file or date range",
    doc_md=__doc__,
    schedule=None,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 0, "on_failure_callback": [BinlakeAlert()]},
    # add Airflow notifiers here (Slack, SMTP, ...); release_run_leases frees the run's sources
    on_failure_callback=[BinlakeAlert(), release_run_leases],
    params={
        "source": Param(None, type=OPTIONAL_TEXT, description="source name(s), comma separated; empty = all"),
        "mode": Param("missing", enum=["missing", "reprocess"],
                      description="missing: only files not yet ingested; reprocess: ingest the range again"),
        "from_file": Param(None, type=OPTIONAL_TEXT, description="first file of the range (inclusive), e.g. binlog.000100"),
        "to_file": Param(None, type=OPTIONAL_TEXT, description="last file of the range (inclusive)"),
        "from_date": Param(None, type=OPTIONAL_TEXT, description="objects last modified on/after this UTC date (YYYY-MM-DD)"),
        "to_date": Param(None, type=OPTIONAL_TEXT, description="objects last modified before this UTC date (YYYY-MM-DD)"),
        "dry_run": Param(False, type="boolean", description="discover and plan only; write nothing"),
    },
    tags=["binlake"],
) as dag:
    pipeline_tasks(cfg, backfill=True)  # discover >> per source: decode >> reconcile >> gold >> data_checks >> summary
