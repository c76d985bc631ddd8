"""orchestration.run_local (``binlake run``): parameters refused before Airflow starts, and a real
dry-run backfill through Airflow's dag.test() against a folder archive of the fixture chain
(a dry run starts no Spark, so this runs in seconds once Airflow is imported)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from binlake.config import BinlakeConfig
from orchestration.run_local import PipelineRunError, check_params, run_pipeline
from tests._chain_util import write_mariadb_chain
from tests.conftest import make_test_config


@pytest.fixture()
def config_file(tmp_path: Path) -> Path:
    archive = write_mariadb_chain(tmp_path / "archive")
    jars = os.environ.get("BINLAKE_JARS_DIR", str(Path(__file__).resolve().parent.parent / ".jars"))
    path = tmp_path / "binlake.toml"
    path.write_text(f'[pipeline]\nwarehouse = "{tmp_path / "wh"}"\nstate_dir = "{tmp_path / "state"}"\n'
                    f'jars_dir = "{jars}"\n[[sources]]\nname = "chain"\nuri = "{archive}"\n')
    return path


@pytest.fixture()
def cfg(tmp_path: Path) -> BinlakeConfig:
    return make_test_config(tmp_path, "http://127.0.0.1:9", sources=[{"name": "chain", "uri": str(tmp_path)}])


def test_parameters_are_checked_before_airflow_starts(cfg: BinlakeConfig) -> None:
    assert check_params("nightly", None, cfg) == {}
    assert check_params("backfill", {"source": "chain", "dry_run": True}, cfg) == {"source": "chain", "dry_run": True}
    with pytest.raises(PipelineRunError, match=r"unknown run kind 'nighty': nightly or backfill"):
        check_params("nighty", None, cfg)
    with pytest.raises(PipelineRunError, match=r"a nightly run takes no parameters \(got \['mode'\]\): use backfill"):
        check_params("nightly", {"mode": "reprocess"}, cfg)
    with pytest.raises(PipelineRunError, match=r"unknown backfill parameter\(s\) \['form_file'\]"):
        check_params("backfill", {"form_file": "binlog.000002"}, cfg)
    with pytest.raises(PipelineRunError, match=r"unknown source\(s\) \['nope'\]; configured: \['chain'\]"):
        check_params("backfill", {"source": "nope"}, cfg)
    with pytest.raises(PipelineRunError, match="not a date"):
        check_params("backfill", {"from_date": "yesterday"}, cfg)


@pytest.mark.airflow
def test_a_dry_run_backfill_through_airflow(config_file: Path) -> None:
    from orchestration.run_local import migrate_airflow_db

    migrate_airflow_db()
    run = run_pipeline("backfill", {"source": "chain", "mode": "reprocess", "dry_run": True},
                       config_path=str(config_file))
    assert run.success, run.lines()
    # a dry run needs no Spark: the discover task finished the source; the per-source group ran for none
    assert run.task_states == {
        "discover": "success", "summary": "success", **{f"per_source.{step}": "skipped" for step in (
            "decode", "reconcile", "gold", "data_checks")}}
    summary = json.loads(Path(run.summary_uri).read_text())
    assert summary["ok"] and summary["sources"]["chain"]["dry_run"] and summary["sources"]["chain"]["planned"] == 4
    assert run.lines() == [f"binlake_backfill run {run.run_id}: success", f"  summary: {run.summary_uri}"]
    assert not (config_file.parent / "wh" / "meta").exists()  # a dry run writes no table
