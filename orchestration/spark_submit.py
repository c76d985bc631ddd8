"""``[spark] mode = "submit"``: the operator of a Spark step that ``spark-submit`` runs.

Why a module of its own: Airflow's Spark provider's operator module imports the OpenLineage
provider's Spark helpers as it loads (about half a CPU-second), and every task process parses the
DAG file, so the tasks of the local and connect modes, which never use the operator, would pay
for it in each of them (:func:`orchestration.tasks.spark_step` imports this module only in submit
mode).
"""

from __future__ import annotations

from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from binlake.config import load_config
from binlake.runs import get_result
from binlake.step_results import GoldStepResult, to_doc
from orchestration.credentials import export_airflow_aws_credentials
from orchestration.tasks import emit_gold_assets, run_reporting_expected_failures


class BinlakeSparkSubmitOperator(SparkSubmitOperator):
    """SparkSubmitOperator that first exports the Airflow AWS connection's credentials (if any),
    so the spark-submit child process (driver) and S3A find them in its environment."""

    def execute(self, context: Any) -> Any:
        """Without spark-submit when the step has nothing for Spark (dry run, nothing new)."""
        from spark_jobs.steps import WITHOUT_SPARK

        cfg = load_config()
        step, source = list(self.application_args or ())[0:3:2]
        quick = run_reporting_expected_failures(lambda: WITHOUT_SPARK[step](cfg, source, context["run_id"]))
        if quick is not None:
            return to_doc(quick)
        export_airflow_aws_credentials(cfg)
        super().execute(context)
        if step == "gold":  # the application wrote its result document: the tables it wrote
            emit_gold_assets(cfg, context, get_result(cfg, context["run_id"], source, "gold", GoldStepResult))
        return None
