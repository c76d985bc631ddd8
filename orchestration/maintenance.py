"""The Airflow task of ``binlake_maintenance`` (``dags/binlake_maintenance.py``): every table of the
warehouse compacted, clustered, vacuumed and checkpointed where it needs it
(:func:`spark_jobs.maintenance.run_maintenance`), on its own schedule (``[maintenance] cron``).

One task, no mapping: the tables are done one after another in the task process. delta-rs does
the bronze, silver and meta tables there without a JVM; a Spark session (``[spark]`` settings, the
``master`` of the config in every mode) is started only when a table delta-rs does not write (a gold
table with deletion vectors or the change data feed) needs work, and stopped at the end. An unsafe
VACUUM retention fails the task at once, without a retry, before any table is touched.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import task
from airflow.sdk.exceptions import AirflowFailException

from binlake.config import load_config
from binlake.lake.maintenance import UnsafeRetentionError
from orchestration.credentials import export_airflow_aws_credentials

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger("binlake.maintenance")


class LazySpark:
    """A Spark session started on first use; :meth:`stop` stops it only if this object started it
    (under ``dag.test()`` a session of the caller may be running already)."""

    def __init__(self, start: Any) -> None:
        self._start = start
        self._session: SparkSession | None = None
        self._owned = False

    def __call__(self) -> SparkSession:
        if self._session is None:
            from pyspark.sql import SparkSession

            self._owned = SparkSession.getActiveSession() is None
            self._session = self._start()
        return self._session

    def stop(self) -> None:
        if self._session is not None and self._owned:
            from spark_jobs.session import stop_session

            stop_session(self._session)
        self._session = None


@task(task_id="maintain", retries=1, retry_delay=timedelta(minutes=5))
def maintain_task(**context: Any) -> dict[str, Any]:
    """Maintain every table (see module doc); returns what was done, per table."""
    from spark_jobs.maintenance import run_maintenance
    from spark_jobs.session import build_spark_session

    cfg = load_config()
    export_airflow_aws_credentials(cfg)
    spark = LazySpark(lambda: build_spark_session(cfg, "binlake-maintenance"))
    try:
        result = run_maintenance(cfg, context["run_id"], spark)
    except UnsafeRetentionError as exc:  # a configuration error: a retry would not help
        raise AirflowFailException(str(exc)) from exc
    finally:
        spark.stop()
    for row in result.rows:
        log.info("%s: %s by %s: %d -> %d data files, %d -> %d bytes, %d -> %d log entries, %d vacuumed, %.1f s",
                 row["table_name"], "+".join(row["actions"]), row["engine"], row["files_before"], row["files_after"],
                 row["bytes_before"], row["bytes_after"], row["log_entries_before"], row["log_entries_after"],
                 row["files_vacuumed"], row["millis"] / 1000)
    return {"run_id": result.run_id, "seconds": round(result.seconds, 1), "skipped": result.skipped,
            "maintained": [{k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in row.items()}
                           for row in result.rows]}
