"""orchestration.tasks / orchestration.alerts: an expected failure (a GAP) is one error line and an
alert that carries the whole message, not a traceback; in submit mode the gold task emits one asset
event per gold table its Spark application wrote (a DAG run without Spark; the local mode's events
are checked on the real runs of tests/test_dags.py)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from binlake.config import BinlakeConfig
from binlake.runs import BatchOutcome, ChainBrokenError, IngestFailedError
from orchestration.alerts import BinlakeAlert
from orchestration.tasks import BinlakeTaskFailed, finish_batch, run_reporting_expected_failures
from tests._airflow_util import asset_events

GAP = ("source gappy: binlog chain broken\n  gtid_reconciliation: binlog.000004: GAP "
       "(missing files binlog.000003): GAP: binlog.000003 is missing")


def _gap() -> None:
    raise ChainBrokenError(GAP)


def test_an_expected_failure_is_one_error_line(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="binlake.pipeline"), pytest.raises(BinlakeTaskFailed) as failed:
        run_reporting_expected_failures(_gap)
    assert [(r.levelname, r.getMessage(), r.exc_info) for r in caplog.records] == [("ERROR", GAP, None)]
    assert isinstance(failed.value, SystemExit) and failed.value.code == 1
    assert failed.value.reason == GAP and failed.value.kind == "ChainBrokenError"
    assert failed.value.__cause__ is None and failed.value.__suppress_context__


def test_other_failures_keep_their_traceback() -> None:
    def broken() -> None:
        raise IngestFailedError("source a: 1 file(s) failed to decode: a/binlog.000002")

    with pytest.raises(IngestFailedError):
        run_reporting_expected_failures(broken)
    assert run_reporting_expected_failures(lambda: 42) == 42


def test_a_batch_whose_every_source_was_left_out_is_skipped_with_the_reasons() -> None:
    """Airflow's own skip exception (``airflow.sdk``; the old import path warns, which pytest's
    ``filterwarnings`` turns into an error for binlake's modules), naming each source and why."""
    from airflow.sdk.exceptions import AirflowSkipException

    outcome = BatchOutcome("gold", {}, {"a": "reconcile failed in this run", "b": "decode failed in this run"}, {})
    with pytest.raises(AirflowSkipException) as skipped:
        finish_batch(BinlakeConfig(), {}, outcome)
    assert str(skipped.value) == "a: reconcile failed in this run; b: decode failed in this run"


def test_the_alert_carries_the_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       caplog: pytest.LogCaptureFixture) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f'[pipeline]\nwarehouse = "{tmp_path / "wh"}"\nstate_dir = "{tmp_path / "state"}"\n'
                      f'[[sources]]\nname = "gappy"\nuri = "{tmp_path}"\n')
    monkeypatch.setenv("BINLAKE_CONFIG", str(config))
    with pytest.raises(BinlakeTaskFailed) as failed:
        run_reporting_expected_failures(_gap)
    with caplog.at_level(logging.ERROR, logger="binlake.pipeline"):
        BinlakeAlert()({"exception": failed.value, "run_id": "scheduled__2026-01-02T03:00:00+00:00"})
    alert, = (json.loads(line) for line in (tmp_path / "state" / "alerts.jsonl").read_text().splitlines())
    assert alert["reason"] == GAP and alert["kind"] == "ChainBrokenError"
    assert alert["run_id"] == "scheduled__2026-01-02T03:00:00+00:00"
    assert caplog.records[-1].getMessage().startswith("BINLAKE ALERT {")


def test_the_dag_level_alert_works_with_a_serialized_dag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A DAG callback under dag.test() gets a SerializedDAG in its context (apache/airflow#64649):
    binlake's notifier still records the alert."""
    from airflow.serialization.serialized_objects import DagSerialization

    from orchestration.run_local import load_dag

    config = tmp_path / "c.toml"
    config.write_text(f'[pipeline]\nwarehouse = "{tmp_path / "wh"}"\nstate_dir = "{tmp_path / "state"}"\n'
                      f'[[sources]]\nname = "gappy"\nuri = "{tmp_path}"\n')
    monkeypatch.setenv("BINLAKE_CONFIG", str(config))
    serialized = DagSerialization.from_dict(DagSerialization.to_dict(load_dag("binlake_nightly")))
    assert not hasattr(serialized, "get_template_env")  # what BaseNotifier trips over
    BinlakeAlert()({"dag": serialized, "run_id": "manual__1", "reason": "task_failure"})
    alert, = (json.loads(line) for line in (tmp_path / "state" / "alerts.jsonl").read_text().splitlines())
    assert (alert["run_id"], alert["reason"], alert["kind"]) == ("manual__1", "task_failure", "DagRunFailed")



@pytest.mark.airflow
def test_submit_mode_gold_emits_an_asset_event_per_gold_table_it_wrote(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``[spark] mode = "submit"``: the gold application runs in another process; the task learns
    the tables it wrote from its ``gold`` document in the run folder and adds one asset event per
    table through the alias. The real nightly DAG through ``dag.test()`` over two empty archives
    (decode and reconcile answer without Spark, gold needs it: no gold step ran before), both sources
    in one task per step (``sources_per_task = 2``: one application for both); only spark-submit is
    replaced by what the gold application leaves behind: a document per source. (One source per
    task, for real: tests/test_scale_out.py.)"""
    import os

    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    from binlake.config import load_config
    from binlake.runs import put_doc
    from binlake.step_results import GoldStepResult
    from binlake_testing.demo import run_dag
    from orchestration.run_local import load_dag, migrate_airflow_db
    from orchestration.tasks import GOLD_ASSET_ALIAS

    jars = os.environ.get("BINLAKE_JARS_DIR", str(Path(__file__).resolve().parent.parent / ".jars"))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    config = tmp_path / "c.toml"
    config.write_text(f'[pipeline]\nwarehouse = "{tmp_path / "wh"}"\nstate_dir = "{tmp_path / "state"}"\n'
                      f'jars_dir = "{jars}"\nsources_per_task = 2\n[[sources]]\nname = "a"\nuri = "{tmp_path}/a"\n'
                      f'[[sources]]\nname = "b"\nuri = "{tmp_path}/b"\n[spark]\nmode = "submit"\n')
    monkeypatch.setenv("BINLAKE_CONFIG", str(config))
    cfg = load_config()
    wrote = {"a": ("gold.a__shop__orders", "gold.a__shop__orders__history", "gold.fleet_orders"),
             "b": ("gold.b__shop__orders", "gold.fleet_orders")}
    submitted: list[list[str]] = []

    def application(self: SparkSubmitOperator, context: Any) -> None:  # what `spark_jobs gold` leaves behind
        submitted.append(list(self.application_args))
        for source in self.application_args[2].split(","):
            put_doc(cfg, context["run_id"], source, "gold", GoldStepResult(source=source, written=wrote[source]))

    monkeypatch.setattr(SparkSubmitOperator, "execute", application)
    migrate_airflow_db()
    run = run_dag(load_dag("binlake_nightly"))
    assert run.success, run
    assert [args[:3] for args in submitted] == [["gold", "--source", "a,b"]]
    wh = tmp_path / "wh"
    static = [(f"file://{wh}/meta/gold_status", "meta.gold_status", ()),
              (f"file://{wh}/silver/schema_history", "silver.schema_history", ())]
    want = sorted({(0, f"file://{wh}/gold/{name[5:]}", name, (GOLD_ASSET_ALIAS,))
                   for source in "ab" for name in wrote[source]} | {(0, *s) for s in static})
    assert asset_events("binlake_nightly", run.run_id, "per_source.gold") == want
