"""orchestration.tasks / orchestration.alerts without a DAG run: an expected failure (a GAP) is one
error line and an alert that carries the whole message, not a traceback."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from binlake.runs import ChainBrokenError, IngestFailedError
from orchestration.alerts import BinlakeAlert
from orchestration.tasks import BinlakeTaskFailed, run_reporting_expected_failures

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
