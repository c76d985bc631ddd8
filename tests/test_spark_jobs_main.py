"""``python -m spark_jobs STEP``: the one command line of the Spark steps (what spark-submit runs)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from binlake.config import REPO_ROOT
from spark_jobs.__main__ import main


def _config(tmp_path: Path) -> Path:
    jars = os.environ.get("BINLAKE_JARS_DIR", str(REPO_ROOT / ".jars"))
    path = tmp_path / "binlake.toml"
    path.write_text(f'[pipeline]\nwarehouse = "{tmp_path / "wh"}"\nstate_dir = "{tmp_path / "state"}"\n'
                    f'jars_dir = "{jars}"\n'
                    f'[[sources]]\nname = "chain"\nuri = "{tmp_path / "archive"}"\n')
    return path


@pytest.mark.spark
def test_a_step_without_its_plan_is_a_clear_error_and_exit_3(tmp_path: Path, spark: Any,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["decode", "--source", "chain", "--run-id", "r1", "--config", str(_config(tmp_path))]) == 3
    assert "no ingest plan for source chain in run r1: did discover run?" in capsys.readouterr().err


def test_unknown_steps_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["data_checks", "--source", "chain", "--run-id", "r1"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'data_checks'" in capsys.readouterr().err
