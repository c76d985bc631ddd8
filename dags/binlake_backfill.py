"""binlake backfill DAG: manual runs over a chosen source and range, the same tasks as the nightly DAG.

Only wiring; the logic is in ``binlake.pipeline_tasks``. Trigger it from the UI / CLI with params:

    airflow dags trigger binlake_backfill --conf '{"source": "orders-primary",
        "from_file": "binlog.000100", "to_file": "binlog.000120", "mode": "reprocess"}'

``mode``: ``missing`` (ingest only files not yet ingested, or changed) or ``reprocess`` (ingest
the range again; rows are replaced, tables end up identical). ``dry_run`` plans and reports only.
Relation to ``airflow backfill create``: see docs/operations.md.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from binlake.config import load_config
from binlake.pipeline_tasks import alert_on_failure, wire_pipeline

_cfg = load_config()

with DAG(
    dag_id="binlake_backfill",
    description="Backfill / reprocess archived binlogs of one source (or all) over a file or date range",
    schedule=None,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 0, "on_failure_callback": alert_on_failure},
    on_failure_callback=alert_on_failure,
    params={
        "source": Param("", type="string", description="source name(s), comma separated; empty = all"),
        "mode": Param("missing", enum=["missing", "reprocess"],
                      description="missing: only files not yet ingested; reprocess: ingest the range again"),
        "from_file": Param("", type="string", description="first file of the range (inclusive), e.g. binlog.000100"),
        "to_file": Param("", type="string", description="last file of the range (inclusive)"),
        "from_date": Param("", type="string", description="objects last modified on/after this UTC date (YYYY-MM-DD)"),
        "to_date": Param("", type="string", description="objects last modified before this UTC date (YYYY-MM-DD)"),
        "dry_run": Param(False, type="boolean", description="discover and plan only; write nothing"),
    },
    tags=["binlake"],
) as dag:
    wire_pipeline(_cfg, backfill=True)
