"""Alerting for binlake's DAGs: the ``on_failure_callback`` of every task and of both DAGs.

:func:`alert_on_failure` logs ``BINLAKE ALERT {...}``, appends the alert to
``<state_dir>/alerts.jsonl`` and calls the hook named by ``$BINLAKE_ALERT_HOOK``
(``module:function``, called with the alert dict) or registered with
:func:`register_alert_hook`: the place to plug Slack, PagerDuty, e-mail. Alerting never raises.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from binlake.config import load_config

log = logging.getLogger("binlake.pipeline")

_ALERT_HOOKS: list[Callable[[dict[str, Any]], None]] = []


def register_alert_hook(fn: Callable[[dict[str, Any]], None]) -> None:
    """Call ``fn(alert)`` on every task / DAG-run failure (Slack, PagerDuty, e-mail ...)."""
    _ALERT_HOOKS.append(fn)


def alert_on_failure(context: Mapping[str, Any]) -> None:
    """``on_failure_callback`` for binlake tasks and DAGs: log, record, call the alert hooks."""
    ti = context.get("ti") or context.get("task_instance")
    dag_run = context.get("dag_run")
    exc = context.get("exception")
    alert = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "dag_id": getattr(dag_run, "dag_id", None) or getattr(ti, "dag_id", None),
        "run_id": getattr(dag_run, "run_id", None) or context.get("run_id"),
        "task_id": getattr(ti, "task_id", None),
        "map_index": getattr(ti, "map_index", None),
        "reason": (getattr(exc, "reason", None) or str(exc)) if exc is not None
        else str(context.get("reason") or "failed"),
        "kind": (getattr(exc, "kind", None) or type(exc).__name__) if exc is not None else "DagRunFailed",
    }
    log.error("BINLAKE ALERT %s", json.dumps(alert, default=str))
    try:
        cfg = load_config()
        path = Path(cfg.state_dir) / "alerts.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(alert, default=str) + "\n")
    except Exception as e:  # noqa: BLE001 - alerting must never raise
        log.warning("could not record the alert: %s", e)
    hooks = list(_ALERT_HOOKS)
    spec = os.environ.get("BINLAKE_ALERT_HOOK")
    if spec:
        try:
            import importlib

            mod, _, fn = spec.partition(":")
            hooks.append(getattr(importlib.import_module(mod), fn))
        except Exception as e:  # noqa: BLE001
            log.warning("alert hook %s not loadable: %s", spec, e)
    for hook in hooks:
        try:
            hook(alert)
        except Exception as e:  # noqa: BLE001
            log.warning("alert hook %r failed: %s", hook, e)
