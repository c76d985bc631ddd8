"""`make demo`'s path: the nightly DAG runs for real through Airflow (dag.test(): scheduler loop,
task runner, XCom, SQLite metadata DB) on the demo's sample chains in the loopback S3 server,
discovering, decoding, reconciling and checking them into Delta."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from binlake.config import load_config
from binlake.lake.tables import table_location
from binlake_testing.demo import (
    DEMO_SOURCES,
    NIGHTLY_DAG_ID,
    run_dag,
    upload_demo_sources,
    write_demo_config,
)
from binlake_testing.s3server import S3Server
from orchestration.run_local import load_dag, migrate_airflow_db

NIGHTLY_TASKS = {"discover", "per_source.decode", "per_source.reconcile", "per_source.gold",
                 "per_source.data_checks", "summary"}


@pytest.fixture()
def demo_config(tmp_path: Path, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Path:
    bucket = "binlake-dag-test"
    upload_demo_sources(s3_server.client(), bucket=bucket)
    path = write_demo_config(tmp_path / "binlake.toml", endpoint=s3_server.endpoint_url,
                             warehouse=tmp_path / "warehouse", state_dir=tmp_path / "state", bucket=bucket)
    monkeypatch.setenv("BINLAKE_CONFIG", str(path))
    return path


@pytest.mark.airflow
@pytest.mark.spark
def test_nightly_dag_runs_through_airflow(demo_config: Path, spark: Any) -> None:
    # AIRFLOW_HOME (a tmp dir with SQLite) was set by conftest before Airflow was imported.
    assert "binlake-airflow-" in os.environ["AIRFLOW_HOME"]
    migrate_airflow_db()
    dag = load_dag(NIGHTLY_DAG_ID)
    assert {t.task_id for t in dag.tasks} == NIGHTLY_TASKS

    result = run_dag(dag)
    assert result.success, result
    assert set(result.task_states.values()) == {"success"}

    cfg = load_config(demo_config)
    table = spark.read.format("delta").load(table_location(cfg.warehouse, "meta.ingested_files"))
    rows = {(r.source, r.file) for r in table.collect()}
    expected = {(s.name, name) for s in DEMO_SOURCES for _fixture, name in s.files}
    assert rows == expected
    recon = spark.read.format("delta").load(table_location(cfg.warehouse, "meta.gtid_reconciliation"))
    assert {r.status for r in recon.collect()} <= {"OK"}


def test_dag_file_is_thin_and_switches_to_spark_submit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """spark.mode = "submit" turns the Spark steps into SparkSubmitOperators by configuration alone."""
    path = tmp_path / "c.toml"
    path.write_text(
        '[pipeline]\nwarehouse = "s3a://lake/wh"\n'
        f'jars_dir = "{os.environ.get("BINLAKE_JARS_DIR", str(Path(__file__).parent.parent / ".jars"))}"\n'
        '[[sources]]\nname = "a"\nuri = "s3://arch/a/"\n'
        '[spark]\nmode = "submit"\nconn_id = "spark_cluster"\n'
    )
    monkeypatch.setenv("BINLAKE_CONFIG", str(path))
    dag = load_dag(NIGHTLY_DAG_ID)
    op = dag.get_task("per_source.decode")
    assert type(op).__name__ == "BinlakeSparkSubmitOperator"
    assert op._conn_id == "spark_cluster"
    assert "delta-spark_" in op.jars
    assert op.conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert op.application.endswith("spark_jobs/__main__.py")
    assert op.application_args[0] == "decode"
    # the DAG file shows the graph and holds no task logic (the tasks are in orchestration.tasks)
    text = (Path(__file__).resolve().parent.parent / "dags" / "binlake_nightly.py").read_text()
    assert "pipeline_tasks(cfg)  # discover >> per source: decode >> reconcile >> gold >> data_checks >> summary" in text
    assert "@task(" not in text and "import spark_jobs" not in text


def test_the_demo_shows_spark_progress_lines_on_the_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    """The Spark steps' progress (logger ``binlake.progress``) reaches the demo's terminal while the
    DAG runs, and only then."""
    import logging
    import time

    from binlake_testing.demo import progress_on_terminal

    logger = logging.getLogger("binlake.progress")
    with progress_on_terminal(time.monotonic()):
        logger.info("decode mariadb-10.11: 3/8 tasks, 1.2/3.0 MB, 0.4 MB/s, ETA 5 s")
    logger.info("after the run: not shown")
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[demo]")]
    assert len(lines) == 1 and lines[0].endswith("s]   decode mariadb-10.11: 3/8 tasks, 1.2/3.0 MB, 0.4 MB/s, ETA 5 s")


def test_on_a_terminal_the_demo_draws_a_bar_per_step() -> None:
    """On an interactive terminal each step's progress is a rich bar, moved by the reports."""
    import io
    import logging

    from rich.console import Console
    from rich.progress import Progress, TextColumn

    from binlake_testing.demo import _SayHandler
    from spark_jobs.progress import StepProgress

    screen = io.StringIO()
    bars = Progress(TextColumn("{task.description} {task.completed}/{task.total} {task.fields[detail]}"),
                    console=Console(file=screen, force_terminal=True, width=200))
    handler = _SayHandler(0.0, bars)
    with bars:
        for done in (3, 8):
            seen = StepProgress("decode", "mariadb-10.11", done, 8, 1, 4.0, files=4, total_bytes=3_000_000)
            handler.emit(logging.makeLogRecord({"msg": seen.line(), "step_progress": seen}))
    (task,) = bars.tasks
    assert (task.description, task.completed, task.total) == ("decode mariadb-10.11", 8, 8)
    assert task.fields["detail"].startswith("8/8 tasks (100%) in 1 stage(s); ~3.0 of 3.0 MB of 4 file(s)")
    assert "decode mariadb-10.11 8/8 8/8 tasks (100%)" in screen.getvalue()  # drawn on the terminal


def test_the_demo_sends_spark_lines_to_its_log_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The JVM's lines (logger ``spark``) go to the demo's log file; only warnings and errors also
    reach the terminal (the root logger's handlers), so the WARNs every healthy run prints, relayed
    at INFO, are in the file and not on the terminal."""
    import logging

    from binlake_testing.demo import spark_lines_to_file

    log_file = tmp_path / "demo.log"
    spark_log = logging.getLogger("spark")
    with caplog.at_level(logging.WARNING), spark_lines_to_file(log_file):
        spark_log.info("WARN NativeCodeLoader: Unable to load native-hadoop library for your platform")
        spark_log.warning("WARN TaskSetManager: Lost task 0.0 in stage 1.0 (TID 1)")
        spark_log.error("ERROR Executor: Exception in task 0.0 in stage 1.0 (TID 1)")
    assert [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "spark"] == [
        ("WARNING", "WARN TaskSetManager: Lost task 0.0 in stage 1.0 (TID 1)"),
        ("ERROR", "ERROR Executor: Exception in task 0.0 in stage 1.0 (TID 1)"),
    ]
    lines = log_file.read_text().splitlines()
    assert [line.split(" ", 2)[2] for line in lines] == [
        "INFO spark: WARN NativeCodeLoader: Unable to load native-hadoop library for your platform",
        "WARNING spark: WARN TaskSetManager: Lost task 0.0 in stage 1.0 (TID 1)",
        "ERROR spark: ERROR Executor: Exception in task 0.0 in stage 1.0 (TID 1)",
    ]
    assert spark_log.propagate and not [h for h in spark_log.handlers if isinstance(h, logging.FileHandler)]
