"""Run binlake's nightly or backfill DAG once against the configured sources, from a terminal.

What ``binlake run nightly|backfill`` calls (:func:`run_pipeline`): the DAG files of ``dags/``
run through Airflow's ``dag.test()`` (Airflow's scheduling loop and task runner in this process,
a SQLite metadata DB under ``<state_dir>/airflow`` unless ``AIRFLOW_HOME`` is set), so an
operator runs exactly what the scheduler would, without writing Python. Backfill parameters are
checked before Airflow starts, so a typo is a one-line error, not a failed DAG run.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from binlake.config import REPO_ROOT, BinlakeConfig, load_config
from binlake.errors import BinlakeError

DAG_IDS = {"nightly": "binlake_nightly", "backfill": "binlake_backfill"}
#: the backfill DAG's params (dags/binlake_backfill.py); anything else is refused
BACKFILL_PARAMS = ("source", "mode", "from_file", "to_file", "from_date", "to_date", "dry_run")


class PipelineRunError(BinlakeError):
    """``binlake run`` could not start the run (bad kind or parameters, Airflow DB not migratable)."""


@dataclass(frozen=True)
class PipelineRun:
    """One finished DAG run: its state, each task instance's state, where its summary is."""

    dag_id: str
    run_id: str
    state: str
    task_states: dict[str, str]  # "per_source.decode[orders]" / "summary" -> state
    summary_uri: str

    @property
    def success(self) -> bool:
        return self.state == "success"

    def lines(self) -> list[str]:
        """What the terminal shows: the verdict, then every task instance not in success (nor skipped:
        the per-source tasks are skipped as a whole when no source had work, which is no news)."""
        out = [f"{self.dag_id} run {self.run_id}: {self.state}"]
        out += [f"  {task}: {state}" for task, state in sorted(self.task_states.items())
                if state not in ("success", "skipped")]
        out.append(f"  summary: {self.summary_uri}")
        return out


def dags_folder() -> Path:
    """The DAG files: a checkout's ``dags/``, else the copy a wheel ships in ``orchestration/dag_files/``."""
    checkout = REPO_ROOT / "dags"
    return checkout if checkout.is_dir() else Path(__file__).resolve().parent / "dag_files"


def check_params(kind: str, params: Mapping[str, Any] | None, cfg: BinlakeConfig) -> dict[str, Any]:
    """The run's DAG params, validated like the DAG will (mode, dates, source names)."""
    from binlake.runs import RunParamsError, normalize_params, resolve_sources

    if kind not in DAG_IDS:
        raise PipelineRunError(f"unknown run kind {kind!r}: nightly or backfill")
    given = dict(params or {})
    if kind == "nightly":
        if given:
            raise PipelineRunError(f"a nightly run takes no parameters (got {sorted(given)}): use backfill")
        return {}
    unknown = sorted(set(given) - set(BACKFILL_PARAMS))
    if unknown:
        raise PipelineRunError(f"unknown backfill parameter(s) {unknown}; known: {list(BACKFILL_PARAMS)}")
    try:
        normalize_params(given, backfill=True)
        resolve_sources(given.get("source"), cfg)
    except RunParamsError as exc:
        raise PipelineRunError(str(exc)) from exc
    return given


def airflow_env(airflow_home: Path, folder: Path | None = None, quiet: bool = True) -> dict[str, str]:
    """Env vars for a self-contained Airflow: SQLite DB in ``airflow_home``, the DAG files, no examples."""
    airflow_home.mkdir(parents=True, exist_ok=True)
    env = {
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(folder or dags_folder()),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{airflow_home / 'airflow.db'}",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
        # The gold step names its tables through an AssetAlias (orchestration.tasks.emit_gold_assets);
        # Airflow logs two WARNINGs for the first event of each asset no DAG declares ("AssetModel ...
        # not found", then "Emitting event for inactive AssetModel"), creates it and records the event:
        # its documented path for aliases (apache/airflow PR 48565), not a fault (docs/lineage.md).
        "AIRFLOW__LOGGING__NAMESPACE_LEVELS": "airflow.assets.manager=ERROR",
    }
    if quiet:
        env["AIRFLOW__LOGGING__LOGGING_LEVEL"] = "WARNING"
    return env


def migrate_airflow_db(env: Mapping[str, str] | None = None, timeout: float = 900) -> None:
    """``airflow db migrate`` in a subprocess (creates / upgrades the metadata DB); one line on failure."""
    proc = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise PipelineRunError(f"airflow db migrate failed (exit {proc.returncode}): {tail[0]}")


def prepare_airflow(cfg: BinlakeConfig) -> None:
    """A self-contained Airflow for this process (unless Airflow is configured or imported already):
    SQLite under ``<state_dir>/airflow``, the DAG files, no examples, ``[lineage]``'s OpenLineage
    settings (docs/lineage.md); DB migrated."""
    if "airflow" not in sys.modules and "AIRFLOW_HOME" not in os.environ:
        from orchestration.lineage import airflow_lineage_env

        os.environ.update(airflow_env(Path(cfg.state_dir) / "airflow", quiet=False))
        for key, value in airflow_lineage_env(cfg).items():  # [lineage]; settings given outside win
            os.environ.setdefault(key, value)
    migrate_airflow_db()


def load_dag(dag_id: str, folder: Path | None = None) -> Any:
    """The DAG object of ``<folder>/<dag_id>.py`` (default: :func:`dags_folder`), imported fresh: a
    DAG file reads the config when it is loaded."""
    path = (folder or dags_folder()) / f"{dag_id}.py"
    spec = importlib.util.spec_from_file_location(f"binlake_dagfile_{dag_id}", path)
    if spec is None or spec.loader is None:
        raise PipelineRunError(f"cannot load the DAG file {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for value in vars(module).values():
        if getattr(value, "dag_id", None) == dag_id and hasattr(value, "test"):
            return value
    raise PipelineRunError(f"no DAG {dag_id!r} in {path}")


def _task_states(dag_id: str, run_id: str) -> dict[str, str]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id).all()
        return {(f"{ti.task_id}[{ti.rendered_map_index or ti.map_index}]" if ti.map_index >= 0 else ti.task_id):
                str(getattr(ti.state, "value", ti.state)) for ti in tis}


def run_pipeline(kind: str, params: Mapping[str, Any] | None = None, *, config_path: str | None = None) -> PipelineRun:
    """Run the nightly or backfill DAG once through ``dag.test()``; the finished run's states."""
    from binlake.runs import run_key

    cfg = load_config(config_path)
    conf = check_params(kind, params, cfg)
    if cfg.config_path:
        os.environ["BINLAKE_CONFIG"] = str(cfg.config_path)
    prepare_airflow(cfg)
    dag = load_dag(DAG_IDS[kind])
    dag_run = dag.test(run_conf=conf or None)
    run_id = str(dag_run.run_id)
    summary = cfg.warehouse.rstrip("/") + f"/_binlake/runs/{run_key(run_id)}/summary.json"
    return PipelineRun(dag_id=DAG_IDS[kind], run_id=run_id, state=str(getattr(dag_run.state, "value", dag_run.state)),
                       task_states=_task_states(DAG_IDS[kind], run_id), summary_uri=summary)
