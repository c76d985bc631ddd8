"""OpenLineage events of binlake's DAG tasks (Airflow's OpenLineage provider); docs/lineage.md.

Two parts:

* :func:`airflow_lineage_env`: the ``AIRFLOW__OPENLINEAGE__*`` settings for ``[lineage]`` (transport,
  namespace, this module's extractor). The provider reads them when Airflow loads its plugins, so
  they must be in the environment of the scheduler / task processes before Airflow starts:
  ``binlake run`` and the demo set them (:func:`orchestration.run_local.prepare_airflow`); for a
  deployment, ``python -m orchestration.lineage`` prints them as ``export`` lines.
* ``BinlakeStepExtractor``: the provider's documented hook for operators it does not know
  (a custom extractor). Why not the tasks' Asset outlets alone: the provider turns a ``file://`` or
  ``s3://`` Asset into a path-named dataset and knows nothing of a step's *input* objects (the
  binlog files the run planned) nor of the gold tables written, which only the run's documents
  say. The extractor names each step's datasets from the run's plan and result documents:
  tables as ``namespace = the warehouse URI``, ``name = "silver.row_changes"``; binlog objects
  by the OpenLineage naming spec (``s3://bucket`` + key, ``file`` + absolute path).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from binlake.config import BinlakeConfig, load_config
from binlake.lake.tables import table_location
from binlake.runs import STEP_TABLES

#: what each step reads, by table (decode reads the run's planned binlog objects)
STEP_INPUT_TABLES: dict[str, tuple[str, ...]] = {
    "discover": ("meta.ingested_files",),
    "decode": (),
    "reconcile": ("meta.binlog_files", "silver.transactions"),
    "gold": ("silver.row_changes", "silver.statements"),
    "data_checks": ("meta.ingested_files", "bronze.events", "silver.transactions", "silver.row_changes",
                    "silver.statements"),
}
#: the tasks (of the per-source group) this extractor names datasets for, and the run's discover task
STEP_TASK_PREFIX = "per_source."
DISCOVER_TASK = "discover"
#: the operator classes of those tasks (TaskFlow tasks and the submit-mode Spark steps)
OPERATOR_CLASSES = ("_PythonDecoratedOperator", "BinlakeSparkSubmitOperator")
EXTRACTOR_PATH = "orchestration.lineage.BinlakeStepExtractor"


def lineage_dir(cfg: BinlakeConfig) -> Path:
    """Where the file transport writes (``[lineage] file_dir``, default ``<state_dir>/lineage``)."""
    return Path(cfg.lineage.file_dir or Path(cfg.state_dir) / "lineage")


def openlineage_transport(cfg: BinlakeConfig, file_name: str = "airflow.jsonl") -> dict[str, Any]:
    """The OpenLineage client's transport config for ``[lineage]``."""
    ln = cfg.lineage
    if ln.transport == "http":
        return {"type": "http", "url": ln.url, "endpoint": ln.endpoint}
    if ln.transport == "console":
        return {"type": "console"}
    return {"type": "file", "log_file_path": str(lineage_dir(cfg) / file_name), "append": True}


def airflow_lineage_env(cfg: BinlakeConfig) -> dict[str, str]:
    """``AIRFLOW__OPENLINEAGE__*`` for ``[lineage]``; lineage off: the provider disabled."""
    if not cfg.lineage.enabled:
        return {"AIRFLOW__OPENLINEAGE__DISABLED": "True"}
    if cfg.lineage.transport == "file":
        lineage_dir(cfg).mkdir(parents=True, exist_ok=True)
    return {
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(openlineage_transport(cfg)),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": cfg.lineage.namespace,
        "AIRFLOW__OPENLINEAGE__EXTRACTORS": EXTRACTOR_PATH,
        # submit mode: the provider hands spark-submit the task's run as the Spark job's parent
        "AIRFLOW__OPENLINEAGE__SPARK_INJECT_PARENT_JOB_INFO": "True",
        # emit from a thread of the task process, not a fork: the extractor reads the discover task's
        # XCom, which a forked child cannot ask the task's supervisor for (it timed out); a step's
        # extraction reads two small run documents, so 30 s is ample even on a loaded machine
        "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "True",
        "AIRFLOW__OPENLINEAGE__EXECUTION_TIMEOUT": "30",
    }


def warehouse_namespace(cfg: BinlakeConfig) -> str:
    """The namespace of binlake's tables: the warehouse URI (``s3://lake/binlake``, ``file:///srv/wh``)."""
    wh = cfg.warehouse.rstrip("/")
    if wh.startswith(("s3a://", "s3n://")):
        return "s3://" + wh.split("://", 1)[1]
    return wh if "://" in wh else "file://" + wh


def table_dataset(cfg: BinlakeConfig, name: str) -> Any:
    """One table as an OpenLineage dataset, its location as a symlink (what Spark's events name)."""
    from openlineage.client.event_v2 import Dataset
    from openlineage.client.facet_v2 import symlinks_dataset

    ns, path = object_identity(table_location(cfg.warehouse, name))
    link = symlinks_dataset.Identifier(namespace=ns, name=path, type="LOCATION")
    return Dataset(namespace=warehouse_namespace(cfg), name=name,
                   facets={"symlinks": symlinks_dataset.SymlinksDatasetFacet(identifiers=[link])})


def object_identity(uri: str) -> tuple[str, str]:
    """(namespace, name) of an object or folder by the OpenLineage naming spec."""
    if "://" in uri and not uri.startswith("file://"):
        scheme, rest = uri.split("://", 1)
        bucket, _, key = rest.partition("/")
        return f"{'s3' if scheme in ('s3a', 's3n') else scheme}://{bucket}", key
    return "file", uri.removeprefix("file://")


def object_dataset(uri: str) -> Any:
    from openlineage.client.event_v2 import Dataset

    namespace, name = object_identity(uri)
    return Dataset(namespace=namespace, name=name)


def step_datasets(cfg: BinlakeConfig, step: str, source: str, run_id: str) -> tuple[list[Any], list[Any]]:
    """(inputs, outputs) of one step of one source in run ``run_id``, from the run's documents."""
    from binlake.runs import get_doc

    inputs = [table_dataset(cfg, t) for t in STEP_INPUT_TABLES.get(step, ())]
    outputs = [table_dataset(cfg, t) for t in STEP_TABLES.get(step, ())]
    plan = get_doc(cfg, run_id, source, "plan") or {}
    if step == "decode":
        inputs += [object_dataset(str(f["uri"])) for f in plan.get("files", ())]
    elif step == "gold":
        gold = get_doc(cfg, run_id, source, "gold") or {}
        outputs += [table_dataset(cfg, t) for t in gold.get("written", ())]
    return inputs, outputs


def _task_sources(task_instance: Any) -> list[str]:
    """The sources of a mapped step task instance: the group maps over the discover task's return
    value (the busy sources in batches), so the task's map index is its batch's place in it."""
    batches = task_instance.xcom_pull(task_ids=DISCOVER_TASK)
    index = int(task_instance.map_index)
    if not isinstance(batches, list) or not 0 <= index < len(batches) or not isinstance(batches[index], list):
        return []
    return [str(source) for source in batches[index]]


def discover_datasets(cfg: BinlakeConfig, task_instance: Any) -> tuple[list[Any], list[Any]]:
    """(inputs, outputs) of the run's discover task: meta.ingested_files and every discovered
    source's objects; no outputs (a source it settles writes run documents, no table)."""
    found = task_instance.xcom_pull(task_ids=DISCOVER_TASK, key="found") or []
    inputs = [table_dataset(cfg, t) for t in STEP_INPUT_TABLES["discover"]]
    inputs += [object_dataset(cfg.source(str(doc["source"])).uri) for doc in found if isinstance(doc, dict)]
    return inputs, []


def _make_extractor() -> type:
    """The extractor class, made on first use (:func:`__getattr__`): its base is the provider's, and
    importing the provider imports Airflow, which reads its settings once; ``binlake run`` imports
    this module to build those settings, so importing it must not import Airflow."""
    from airflow.providers.openlineage.extractors.base import BaseExtractor, OperatorLineage

    class BinlakeStepExtractor(BaseExtractor):
        """Inputs and outputs of binlake's per-source steps (see the module doc); other tasks of
        these operator classes get none from here, so the provider falls back to their inlets/outlets."""

        @classmethod
        def get_operator_classnames(cls) -> list[str]:
            return list(OPERATOR_CLASSES)

        def _execute_extraction(self) -> Any:
            return OperatorLineage()  # on start: the run's documents are not written yet

        def extract_on_complete(self, task_instance: Any) -> Any:
            task_id = str(self.operator.task_id)
            if task_id == DISCOVER_TASK:
                inputs, outputs = discover_datasets(load_config(), task_instance)
                return OperatorLineage(inputs=inputs, outputs=outputs)
            if not task_id.startswith(STEP_TASK_PREFIX):
                return OperatorLineage()
            step = task_id.removeprefix(STEP_TASK_PREFIX)
            if step not in STEP_INPUT_TABLES:
                return OperatorLineage()
            cfg, inputs, outputs = load_config(), [], []
            for source in _task_sources(task_instance):
                more_in, more_out = step_datasets(cfg, step, source, str(task_instance.run_id))
                inputs += [d for d in more_in if d not in inputs]
                outputs += [d for d in more_out if d not in outputs]
            return OperatorLineage(inputs=inputs, outputs=outputs)

    BinlakeStepExtractor.__module__ = __name__
    BinlakeStepExtractor.__qualname__ = "BinlakeStepExtractor"
    return BinlakeStepExtractor


_made: dict[str, type] = {}


def __getattr__(name: str) -> Any:
    """``orchestration.lineage.BinlakeStepExtractor`` (what the provider imports by name)."""
    if name != "BinlakeStepExtractor":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _made:
        _made[name] = _make_extractor()
    return _made[name]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m orchestration.lineage [CONFIG]``: the Airflow settings as ``export`` lines."""
    import shlex

    args = list(sys.argv[1:] if argv is None else argv)
    cfg = load_config(args[0] if args else None)
    for key, value in airflow_lineage_env(cfg).items():
        print(f"export {key}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
