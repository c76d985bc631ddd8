"""Alerting for binlake's DAGs: an Airflow notifier on every task and on both DAGs.

:class:`BinlakeAlert` is the ``on_failure_callback`` of the DAG files. It logs
``BINLAKE ALERT {...}`` (one line: DAG, run, task, source, the reason in binlake's words) and
appends the alert to ``<state_dir>/alerts.jsonl``. To page someone, add any Airflow notifier next
to it in the DAG file (``on_failure_callback=[BinlakeAlert(), SlackNotifier(...)]``, or SMTP,
PagerDuty, Opsgenie ... from their providers): Airflow calls each one; binlake keeps no hook
registry of its own. Alerting never raises.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from airflow.sdk import BaseNotifier

from binlake.config import load_config

log = logging.getLogger("binlake.pipeline")


def alert_from_context(context: Mapping[str, Any]) -> dict[str, Any]:
    """The alert of a failed task or DAG run: who failed, and why in the exception's own words."""
    ti = context.get("ti") or context.get("task_instance")
    dag_run = context.get("dag_run")
    exc = context.get("exception")
    return {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "dag_id": getattr(dag_run, "dag_id", None) or getattr(ti, "dag_id", None),
        "run_id": getattr(dag_run, "run_id", None) or context.get("run_id"),
        "task_id": getattr(ti, "task_id", None),
        "map_index": getattr(ti, "map_index", None),
        # an expected failure (BinlakeTaskFailed) carries the reason and the kind of the binlake error
        "reason": (getattr(exc, "reason", None) or str(exc)) if exc is not None
        else str(context.get("reason") or "failed"),
        "kind": (getattr(exc, "kind", None) or type(exc).__name__) if exc is not None else "DagRunFailed",
    }


class BinlakeAlert(BaseNotifier):
    """binlake's notifier: the ``BINLAKE ALERT`` log line and a line in ``<state_dir>/alerts.jsonl``."""

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        """Nothing to render. Why this override: under ``dag.test()`` / ``airflow dags test`` a DAG
        callback's context holds a ``SerializedDAG``, from which ``BaseNotifier`` cannot build a
        template environment (apache/airflow#64649, fix not released in 3.3.2)."""
        if self.template_fields:
            super().render_template_fields(context, jinja_env)

    def notify(self, context: Any) -> None:
        alert = alert_from_context(context)
        log.error("BINLAKE ALERT %s", json.dumps(alert, default=str))
        try:
            path = Path(load_config().state_dir) / "alerts.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(alert, default=str) + "\n")
        except Exception as e:  # noqa: BLE001 - alerting must never raise
            log.warning("could not record the alert: %s", e)
